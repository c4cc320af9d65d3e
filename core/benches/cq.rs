//! Completion-queue benchmark (not a test: it asserts only that every completion arrives).
//!
//! What an application reaches: an endpoint on a real driver under a core [`Domain`], on the
//! do-nothing device of `ringfab_emu::null` (a device of the driver's NIC that completes every
//! buffer the moment its doorbell is rung, with a 64-byte frame), receives posted with
//! `Endpoint::recvmsg` into owned buffers of registered memory, read from the endpoint's CQ.
//! The null device writes no frame data: each buffer holds, from the start, the ringfab header
//! a peer in the endpoint's address vector would have sent (a 34-byte payload), so every
//! completion goes through the header check and the source lookup as a real one does.
//! `--nic igb` (the default), `e1000e` or `virtio-net`.
//!
//! * **read**: post [`ROUND`] receives (not timed; the device completes them at the doorbell),
//!   then time only `cq.read` with room for 1, 16 or 64 entries per call until all are read.
//!   `read` drops each owned buffer (its region counts it back); the next round posts buffers
//!   carved afresh from the same memory, registered again.
//! * **read-owned**: the same with `cq.read_owned`, which hands back the buffers, in bulk, with
//!   each entry's source.
//! * **cycle**: post a batch of receives (the buffers the last read handed back), the doorbell
//!   with the last, then read the batch back with `read_owned`: an application's receive loop,
//!   everything timed, per message.
//! * **send**: send a batch of messages (a [`SEND_PAYLOAD`]-byte payload each, to the AV's
//!   peer) with `Endpoint::sendmsg`, `FI_MORE` on all but the last (whose doorbell the null
//!   device completes them in), then read their completions back from the send CQ with
//!   `read_owned`: an application's streaming loop, everything timed, per message. Not on
//!   plain UDP, whose first send to the peer waits for an ARP reply the null device never gives.
//! * **empty**: `cq.read` of the receive CQ with room for 1, 16 or 64 entries when nothing has
//!   completed (every call `Err(Again)`): what a polling loop pays per call while it waits.
//!   Per call. Nothing is posted, so the driver's stall count (which runs only while work is
//!   pending) is not in it.
//!
//! The endpoint's sends report to a CQ of their own (as libfabric's fabtests bind them);
//! `--one-cq` binds them to the receive CQ, whose read then polls the idle transmit queue too.
//!
//! `--layer plain` measures the same endpoint on plain IPv4/UDP (`Encap::PlainUdp`,
//! docs/ip.md): each buffer holds a datagram from the AV's peer to the endpoint's port with a
//! 22-byte payload and no UDP checksum (RFC 768's zero — the null device verifies no checksum,
//! so a datagram with one would be summed in software by the general lane, which is the path of a
//! NIC without receive checksum offload, not this one), so every completion goes through the
//! plain-UDP lane's header checks and source lookup. The null igb and e1000e devices report
//! each frame as their models report such a datagram (`NullPlatform::with_rx_checksum`): the
//! IPv4 header checksum verified (RXCSUM.IPOFLD, which the drivers turn on), the zero UDP
//! checksum unmarked — the path of these NICs' users. `--unmarked` leaves the marks off: the
//! path of a NIC that does not verify the IPv4 header checksum (virtio-net, whose model marks
//! only the L4 checksum, is measured that way either way), where the lane sums it.
//!
//! `--post batch` posts each batch of receives with one `Endpoint::recv_batch` call (the
//! doorbell after the last) instead of `recvmsg` per buffer (`--post each`, the default): the
//! cycle's post half with the batched receive post. Endpoint and plain layers. In the send
//! mode it sends each batch with one `Endpoint::send_batch` call instead of `sendmsg` per
//! buffer (`FI_MORE` on all but the last).
//!
//! `--layer raw` measures the raw layer instead — a receive path opened without an endpoint
//! (`Domain::open_rx`), whole frames into DMA memory posted with `Path::post_recvs`, read with
//! `cq.read` — in the modes `read` and `cycle`.
//!
//! The timed work is in `#[inline(never)]` functions — `cq_read_all`, `cq_read_owned_all`,
//! `cq_post_batch`, `cq_repost_batch`, `cq_cycle`, `cq_send_batch`, `cq_resend_batch`,
//! `cq_send_cycle` and
//! `cq_read_empty` — so that callgrind can
//! attribute it;
//! `core/benches/instructions.sh` counts instructions per entry that way.
//!
//! `cargo bench -p ringfab --bench cq [-- --entries N] [-- --batch B]
//! [-- --mode read|read-owned|cycle|send|empty] [-- --format msg|data] [-- --nic igb|e1000e|virtio-net]
//! [-- --layer endpoint|plain|raw] [-- --one-cq] [-- --unmarked] [-- --post each|batch]`

use std::hint::black_box;
use std::ptr::NonNull;
use std::time::{Duration, Instant};

use ringfab::av::{AddrFormat, AvAttr, EpAddr, FiAddr};
use ringfab::cq::{CompletionQueue, CqAttr};
use ringfab::domain::Domain;
use ringfab::entry::{Data, Format, Msg, OpContext};
use ringfab::ep::{Endpoint, EpAttr};
use ringfab::flags::{BindFlags, OpFlags};
use ringfab::hal::{DmaRegion, Iova, MacAddr, Nic, RxBuffer, RxChecksum, RxConfig};
use ringfab::ip::emit::{udp_frame, UdpHeader};
use ringfab::ip::{Ipv4Addr, Ipv4Config, SockAddrIn, UDP_HEADER_LEN};
use ringfab::mr::{Buf, MemoryRegion, PAGE};
use ringfab::path::{Path, RecvPost};
use ringfab::proto::{Encap, Header, HEADER_LEN, MAX_HEADER_LEN};
use ringfab::{Capacities, Clock, Error};
use ringfab_e1000e::E1000e;
use ringfab_emu::null::{NullPlatform, RX_FRAME_LEN};
use ringfab_emu::{E1000e82574, Igb82576, VirtioNetPci};
use ringfab_igb::Igb;
use ringfab_virtio_net::VirtioNet;

/// Ring depth of the receive queue (and size of its op table).
const D: usize = 256;
/// Receives posted before each timed drain in the read measurements: a multiple of every batch,
/// below the ring's capacity.
const ROUND: usize = 192;
/// Receive buffer size (the endpoint's `rx_buf_len` and every buffer's length).
const SLOT: usize = 2048;
/// Payload bytes of every message the send measurement sends (a receive's, in the frames of
/// [`Frames`]).
const SEND_PAYLOAD: usize = RX_FRAME_LEN as usize - HEADER_LEN;
const BATCHES: [usize; 3] = [1, 16, 64];
const MAX_BATCH: usize = 64;
/// The peer whose frames the buffers hold: the AV's first entry.
const PEER: EpAddr = EpAddr {
    mac: MacAddr([0x02, 0, 0, 0, 0, 0x01]),
    ctx: 3,
};
/// With `--layer plain`: the peer's address and port, the domain's address and the endpoint's
/// port.
const PEER_IP: SockAddrIn = SockAddrIn::new(Ipv4Addr::new(192, 0, 2, 1), 40000);
const IP: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 2);
const PORT: u16 = 7000;

/// The time, for the plain-UDP domain's ARP (which the benchmark never needs to move).
struct Still;

impl Clock for Still {
    fn now(&self) -> Duration {
        Duration::ZERO
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Read,
    ReadOwned,
    Cycle,
    Send,
    Empty,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Read => "read",
            Mode::ReadOwned => "read_owned",
            Mode::Cycle => "post → complete → read_owned",
            Mode::Send => "send → complete → read_owned",
            Mode::Empty => "read, nothing completed",
        }
    }
}

/// How the endpoint's receives are posted.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Post {
    /// `Endpoint::recvmsg` (in the send mode `sendmsg`) per buffer, `FI_MORE` on all but the
    /// last.
    Each,
    /// One `Endpoint::recv_batch` call per batch (`--post batch`); in the send mode, one
    /// `Endpoint::send_batch` call per batch.
    Batch,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Layer {
    Endpoint,
    /// The endpoint with its sends on the receive CQ (`--one-cq`).
    OneCq,
    /// The endpoint on plain UDP (`--layer plain`).
    Plain,
    Raw,
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let fail = |what: String| -> ! {
        eprintln!("cq: {what}");
        std::process::exit(2);
    };
    let entries: usize = value("--entries")
        .and_then(|v| v.parse().ok())
        .unwrap_or(4_000_000);
    let batches: Vec<usize> = value("--batch")
        .and_then(|v| v.parse().ok())
        .map_or(BATCHES.to_vec(), |b| vec![b]);
    if batches.iter().any(|&b| b == 0 || b > MAX_BATCH) {
        fail(format!("--batch must be between 1 and {MAX_BATCH}"));
    }
    let layer = match value("--layer").as_deref() {
        None | Some("endpoint") if args.iter().any(|a| a == "--one-cq") => Layer::OneCq,
        None | Some("endpoint") => Layer::Endpoint,
        Some("raw") => Layer::Raw,
        Some("plain") => Layer::Plain,
        Some(l) => fail(format!("unknown --layer {l} (endpoint, plain, raw)")),
    };
    let modes = match value("--mode").as_deref() {
        None if layer == Layer::Raw => vec![Mode::Read, Mode::Cycle],
        None if layer == Layer::Plain => vec![Mode::Read, Mode::ReadOwned, Mode::Cycle],
        None => vec![Mode::Read, Mode::ReadOwned, Mode::Cycle, Mode::Send],
        Some("read") => vec![Mode::Read],
        Some("read-owned") if layer != Layer::Raw => vec![Mode::ReadOwned],
        Some("cycle") => vec![Mode::Cycle],
        Some("send") if layer != Layer::Raw && layer != Layer::Plain => vec![Mode::Send],
        Some("empty") if layer != Layer::Raw => vec![Mode::Empty],
        Some(m) => fail(format!(
            "unknown --mode {m} (read, read-owned, cycle, send, empty; plain: no send; raw: read, \
             cycle)"
        )),
    };
    let formats: Vec<&str> = match value("--format").as_deref() {
        None => vec!["msg", "data"],
        Some("msg") => vec!["msg"],
        Some("data") => vec!["data"],
        Some(f) => fail(format!("unknown --format {f} (msg, data)")),
    };
    let post = match value("--post").as_deref() {
        None | Some("each") => Post::Each,
        Some("batch") if layer != Layer::Raw => Post::Batch,
        Some(p) => fail(format!("unknown --post {p} (each, batch; raw: each)")),
    };
    let nic = value("--nic").unwrap_or_else(|| "igb".into());
    if !["igb", "e1000e", "virtio-net"].contains(&nic.as_str()) {
        fail(format!("unknown --nic {nic} (igb, e1000e, virtio-net)"));
    }

    // Checksum marks only for plain UDP: ringfab's header is no IPv4, which no model marks.
    let marked = layer == Layer::Plain && !args.iter().any(|a| a == "--unmarked");
    let what = match layer {
        Layer::Endpoint => "endpoint receives into registered memory",
        Layer::OneCq => "endpoint receives into registered memory, sends on the same CQ",
        Layer::Plain => "plain-UDP endpoint receives into registered memory",
        Layer::Raw => "raw layer (Path::post_recvs, no endpoint)",
    };
    let posted = match post {
        Post::Each => "",
        Post::Batch => ", receives posted with recv_batch",
    };
    println!("CQ on the null device ({nic} driver), {what}{posted}, {entries} entries per figure");
    println!(
        "{:<30} {:>6} {:>5} {:>12} {:>10}",
        "measurement", "format", "batch", "Mentries/s", "ns/entry"
    );
    for &mode in &modes {
        for &format in &formats {
            for &batch in &batches {
                let ns = match format {
                    "msg" => on_nic::<Msg>(&nic, layer, mode, post, entries, batch, marked),
                    _ => on_nic::<Data>(&nic, layer, mode, post, entries, batch, marked),
                };
                let name = match (layer, mode) {
                    (Layer::Raw, Mode::Cycle) => "post → complete → read",
                    _ => mode.name(),
                };
                println!(
                    "{:<30} {:>6} {:>5} {:>12.2} {:>10.2}",
                    name,
                    format,
                    batch,
                    1e3 / ns,
                    ns
                );
            }
        }
    }
}

/// Brings `nic`'s driver up on its null device and runs one measurement; ns per entry. With
/// `marked`, an Intel null device reports the IPv4 header checksum of every frame verified.
fn on_nic<F: Format>(
    nic: &str,
    layer: Layer,
    mode: Mode,
    post: Post,
    entries: usize,
    batch: usize,
    marked: bool,
) -> f64 {
    let up = "bring-up on the null device";
    // IPv4 header verified; the UDP checksum is zero (none), which the models leave unmarked.
    let marks = RxChecksum::verified(marked, false);
    match nic {
        "e1000e" => run::<_, F>(
            E1000e::new(NullPlatform::<E1000e82574>::new().with_rx_checksum(marks)).expect(up),
            layer,
            mode,
            post,
            entries,
            batch,
        ),
        "virtio-net" => run::<_, F>(
            VirtioNet::new(NullPlatform::<VirtioNetPci>::new()).expect(up),
            layer,
            mode,
            post,
            entries,
            batch,
        ),
        _ => run::<_, F>(
            Igb::new(NullPlatform::<Igb82576>::new().with_rx_checksum(marks)).expect(up),
            layer,
            mode,
            post,
            entries,
            batch,
        ),
    }
}

fn run<N: Nic, F: Format>(
    nic: N,
    layer: Layer,
    mode: Mode,
    post: Post,
    entries: usize,
    batch: usize,
) -> f64 {
    match layer {
        Layer::Endpoint => run_endpoint::<N, F>(&nic, mode, post, entries, batch, false, false),
        Layer::OneCq => run_endpoint::<N, F>(&nic, mode, post, entries, batch, true, false),
        Layer::Plain => run_endpoint::<N, F>(&nic, mode, post, entries, batch, false, true),
        Layer::Raw => run_raw::<N, F>(&nic, mode, entries, batch),
    }
}

/// The buffers' memory, owned here so that every round can register it again: a read that
/// drops its buffers gives nothing back to post, and regions are carved once, front to back.
/// Each buffer holds a ringfab frame from [`PEER`] to `to`, or with `plain` a UDP datagram from
/// [`PEER_IP`] to `to`'s MAC, [`IP`] and [`PORT`] (the null device writes no data).
struct Frames(Box<[u8]>);

impl Frames {
    fn new(to: EpAddr, plain: bool) -> Frames {
        let mut mem = vec![0u8; ROUND * SLOT + PAGE].into_boxed_slice();
        let header = Header {
            dst: to.mac,
            src: PEER.mac,
            dst_ctx: to.ctx,
            src_ctx: PEER.ctx,
            payload_len: (RX_FRAME_LEN as usize - HEADER_LEN) as u16,
            data: None,
            flow: 0,
        };
        let mut bytes = [0u8; RX_FRAME_LEN as usize];
        let mut ringfab = [0u8; MAX_HEADER_LEN];
        let frame = if plain {
            let udp = UdpHeader {
                src_mac: PEER.mac,
                dst_mac: to.mac,
                src: PEER_IP,
                dst: SockAddrIn::new(IP, PORT),
            };
            let payload = [0x5a; RX_FRAME_LEN as usize - UDP_HEADER_LEN];
            let n = udp_frame(&udp, &payload, &mut bytes).expect("a 64-byte frame");
            // No UDP checksum (RFC 768's zero): see the module documentation.
            bytes[40..42].fill(0);
            &bytes[..n]
        } else {
            header.emit(Encap::Ethernet, &mut ringfab)
        };
        // Buffers are carved front to back, none straddling a page: from a page-aligned start,
        // `SLOT` apart.
        let skip = mem.as_ptr().align_offset(PAGE);
        for i in 0..ROUND {
            let at = skip + i * SLOT;
            mem[at..at + frame.len()].copy_from_slice(frame);
        }
        Frames(mem)
    }

    /// The aligned part of the memory, where the frames are.
    fn region(&mut self) -> (NonNull<u8>, usize) {
        let skip = self.0.as_ptr().align_offset(PAGE);
        let ptr = NonNull::new(self.0[skip..].as_mut_ptr()).expect("a boxed slice");
        (ptr, ROUND * SLOT)
    }
}

/// Sets up an endpoint on `nic` (one CQ of format `F` for both directions, an AV holding
/// [`PEER`]) and runs one measurement; ns per entry.
fn run_endpoint<N: Nic, F: Format>(
    nic: &N,
    mode: Mode,
    post: Post,
    entries: usize,
    batch: usize,
    one_cq: bool,
    plain: bool,
) -> f64 {
    let name = EpAddr {
        mac: nic.capabilities().mac,
        ctx: 0,
    };
    // Declared before the domain: it outlives the domain and every queue that could name it
    // (`Memory::from_raw_parts`'s promise below).
    let mut frames = Frames::new(name, plain);
    // Two hardware queues, a CQ of D entries for receives and one for sends, one region at a
    // time, one AV.
    let caps = Capacities {
        queues: 2,
        cqs: 2,
        cq_size: D,
        mrs: 2,
        avs: 1,
        av_entries: 8,
    };
    let mut domain = Domain::<_, D>::with_capacities(nic, &caps);
    if plain {
        // Only plain UDP needs the time (ARP's): with a clock every read takes it.
        domain = domain.with_clock(&Still);
        let config = Ipv4Config {
            addr: IP,
            prefix_len: 24,
            gateway: None,
        };
        domain.set_ipv4(config).expect("the domain's address");
    }
    let cq = domain
        .open_cq::<F>(&CqAttr {
            size: D,
            ..CqAttr::default()
        })
        .expect("open CQ");
    let av = domain
        .open_av(&AvAttr {
            format: if plain {
                AddrFormat::SockaddrIn
            } else {
                AddrFormat::Ringfab
            },
            ..AvAttr::default()
        })
        .expect("open AV");
    let mut peer = [FiAddr::NOTAVAIL];
    if plain {
        peer[0] = av
            .insert_sockaddr_one(&domain, PEER_IP)
            .expect("insert the peer");
    } else {
        assert_eq!(av.insert(&domain, &[PEER], &mut peer), Ok(1));
    }
    let mut ep = domain
        .endpoint(&EpAttr {
            rx_buf_len: SLOT as u32,
            encap: if plain {
                Encap::PlainUdp
            } else {
                Encap::Ethernet
            },
            port: PORT,
            ..EpAttr::default()
        })
        .expect("endpoint");
    // Sends report to a CQ of their own, as libfabric's fabtests set endpoints up: the
    // receive CQ's read polls the receive queue alone. With `--one-cq` they share the receive
    // CQ, whose read then also polls the (empty) transmit queue every other call. Room for a
    // send measurement's batch.
    let tx_cq = domain
        .open_cq::<F>(&CqAttr {
            size: MAX_BATCH,
            ..CqAttr::default()
        })
        .expect("open the send CQ");
    ep.bind_cq(
        &domain,
        if one_cq { &cq } else { &tx_cq },
        BindFlags::TRANSMIT,
    )
    .expect("bind the send CQ");
    ep.bind_cq(&domain, &cq, BindFlags::RECV).expect("bind CQ");
    ep.bind_av(&domain, &av).expect("bind AV");
    ep.enable(&domain).expect("enable");
    assert_eq!(ep.name(), name);

    let (ptr, len) = frames.region();
    let register = || {
        // SAFETY: `frames` lives until after `domain` (declared before it), so the memory
        // stays valid until the domain's paths and regions are closed; from here on the bench
        // touches it only through the region's buffers.
        let mem = unsafe { ringfab::mr::Memory::from_raw_parts(ptr, len) };
        domain.register(mem).expect("register")
    };
    let mut out = [F::Entry::default(); MAX_BATCH];
    let mut src = [FiAddr::NOTAVAIL; ROUND];
    let mut pool: Vec<Option<Buf<'_>>> = (0..ROUND).map(|_| None).collect();

    let ns = match mode {
        Mode::Read => {
            let mut timed = Duration::ZERO;
            let mut done = 0;
            while done < entries {
                // A region per round: `read` drops the buffers, so the memory is carved again
                // (the last round's region closed first).
                let mr = register();
                carve(&domain, &mr, &mut pool);
                post_all(&domain, &ep, post, &mut pool);
                let start = Instant::now();
                cq_read_all(&domain, &cq, &mut out[..batch], ROUND);
                timed += start.elapsed();
                done += ROUND;
                assert_eq!(mr.outstanding(&domain), 0, "read dropped every buffer");
                if let Err((e, _)) = mr.close(&domain) {
                    panic!("cq: closing the round's region failed: {e}");
                }
            }
            timed.as_nanos() as f64 / done as f64
        }
        Mode::ReadOwned => {
            let mr = register();
            carve(&domain, &mr, &mut pool);
            let mut timed = Duration::ZERO;
            let mut done = 0;
            while done < entries {
                post_all(&domain, &ep, post, &mut pool);
                let start = Instant::now();
                cq_read_owned_all(&domain, &cq, &mut out[..batch], &mut src, &mut pool);
                timed += start.elapsed();
                done += ROUND;
            }
            assert!(src.iter().all(|&a| a == peer[0]), "FI_SOURCE: the peer");
            timed.as_nanos() as f64 / done as f64
        }
        Mode::Cycle => {
            let mr = register();
            carve(&domain, &mr, &mut pool[..batch]);
            let start = Instant::now();
            let mut done = 0;
            while done < entries {
                cq_cycle(
                    &domain,
                    &ep,
                    post,
                    &cq,
                    &mut out[..batch],
                    &mut src[..batch],
                    &mut pool[..batch],
                );
                done += batch;
            }
            start.elapsed().as_nanos() as f64 / done as f64
        }
        Mode::Send => {
            let mr = register();
            carve(&domain, &mr, &mut pool[..batch]);
            // With `--one-cq` the completions are read from the receive CQ they report to.
            let send_cq = if one_cq { &cq } else { &tx_cq };
            let start = Instant::now();
            let mut done = 0;
            while done < entries {
                cq_send_cycle(
                    &domain,
                    &ep,
                    send_cq,
                    peer[0],
                    post,
                    &mut out[..batch],
                    &mut src[..batch],
                    &mut pool[..batch],
                );
                done += batch;
            }
            start.elapsed().as_nanos() as f64 / done as f64
        }
        Mode::Empty => {
            let start = Instant::now();
            cq_read_empty(&domain, &cq, &mut out[..batch], entries);
            start.elapsed().as_nanos() as f64 / entries as f64
        }
    };
    drop(pool);
    if let Err((e, _)) = ep.close(&domain) {
        panic!("cq: closing the endpoint failed: {e}");
    }
    ns
}

/// Fills `pool` with buffers carved from `mr` (of `domain`).
fn carve<'d, N: Nic>(
    domain: &'d Domain<'_, N, D>,
    mr: &MemoryRegion,
    pool: &mut [Option<Buf<'d>>],
) {
    for b in pool.iter_mut() {
        *b = Some(mr.alloc(domain, SLOT).expect("room for a round"));
    }
}

/// Posts a receive of every buffer in `pool` (taking them) as `post` says: [`cq_post_batch`]
/// or [`cq_repost_batch`].
fn post_all<'d, N: Nic>(
    domain: &'d Domain<'_, N, D>,
    ep: &Endpoint,
    post: Post,
    pool: &mut [Option<Buf<'d>>],
) {
    match post {
        Post::Each => cq_post_batch(domain, ep, pool),
        Post::Batch => cq_repost_batch(domain, ep, pool),
    }
}

/// Posts a receive of every buffer in `pool` (taking them) with one `recv_batch` call (the
/// doorbell after the last); the null device completes them all in it — its own cost is its
/// `complete_rx`, to be subtracted. (A function of its own rather than a branch in
/// [`cq_post_batch`], whose loop that made 5 instructions a message dearer.)
#[inline(never)]
fn cq_repost_batch<'d, N: Nic>(
    domain: &'d Domain<'_, N, D>,
    ep: &Endpoint,
    pool: &mut [Option<Buf<'d>>],
) {
    match ep.recv_batch(domain, pool, OpContext(1), OpFlags::empty()) {
        Ok(n) if n == pool.len() => {}
        Ok(n) => panic!("cq: recv_batch posted {n} of {}", pool.len()),
        Err((e, n)) => panic!("cq: recv_batch failed after {n}: {e}"),
    }
}

/// Posts a receive of every buffer in `pool` (taking them), the doorbell with the last
/// (`FI_MORE` before it); the null device completes them all in it — its own cost is its
/// `complete_rx`, to be subtracted.
#[inline(never)]
fn cq_post_batch<'d, N: Nic>(
    domain: &'d Domain<'_, N, D>,
    ep: &Endpoint,
    pool: &mut [Option<Buf<'d>>],
) {
    let last = pool.len() - 1;
    for (i, b) in pool.iter_mut().enumerate() {
        let buf = b.take().expect("a buffer to post");
        let flags = if i == last {
            OpFlags::empty()
        } else {
            OpFlags::MORE
        };
        if let Err((e, _)) = ep.recvmsg(domain, buf, OpContext(i + 1), flags) {
            panic!("cq: recv failed: {e}");
        }
    }
}

/// Sends every buffer in `pool` (taking them) to `dest`, a [`SEND_PAYLOAD`]-byte payload each,
/// the doorbell with the last (`FI_MORE` before it); the null device completes them all in it —
/// its own cost is its `complete_tx`, to be subtracted.
#[inline(never)]
fn cq_send_batch<'d, N: Nic>(
    domain: &'d Domain<'_, N, D>,
    ep: &Endpoint,
    dest: FiAddr,
    pool: &mut [Option<Buf<'d>>],
) {
    let last = pool.len() - 1;
    for (i, b) in pool.iter_mut().enumerate() {
        let buf = b.take().expect("a buffer to send");
        let flags = if i == last {
            OpFlags::empty()
        } else {
            OpFlags::MORE
        };
        if let Err((e, _)) = ep.sendmsg(
            domain,
            buf,
            SEND_PAYLOAD,
            dest,
            None,
            OpContext(i + 1),
            flags,
        ) {
            panic!("cq: send failed: {e}");
        }
    }
}

/// Sends every buffer in `pool` (taking them) to `dest` with one `Endpoint::send_batch` call, a
/// [`SEND_PAYLOAD`]-byte payload each (the doorbell after the last); the null device completes
/// them all in it — its own cost is its `complete_tx`, to be subtracted.
#[inline(never)]
fn cq_resend_batch<'d, N: Nic>(
    domain: &'d Domain<'_, N, D>,
    ep: &Endpoint,
    dest: FiAddr,
    pool: &mut [Option<Buf<'d>>],
) {
    match ep.send_batch(
        domain,
        pool,
        SEND_PAYLOAD,
        dest,
        OpContext(1),
        OpFlags::empty(),
    ) {
        Ok(n) if n == pool.len() => {}
        Ok(n) => panic!("cq: send_batch sent {n} of {}", pool.len()),
        Err((e, n)) => panic!("cq: send_batch failed after {n}: {e}"),
    }
}

/// One send → complete → read cycle of `pool.len()` messages: send every buffer of `pool` as
/// `post` says ([`cq_send_batch`] or [`cq_resend_batch`]), read their completions (and the
/// buffers) back from `cq`.
#[allow(
    clippy::too_many_arguments,
    reason = "the endpoint, its CQ and peer, how it sends, and the read's arrays"
)]
#[inline(never)]
fn cq_send_cycle<'d, N: Nic, F: Format>(
    domain: &'d Domain<'_, N, D>,
    ep: &Endpoint,
    cq: &CompletionQueue<N, F>,
    dest: FiAddr,
    post: Post,
    out: &mut [F::Entry],
    src: &mut [FiAddr],
    pool: &mut [Option<Buf<'d>>],
) {
    match post {
        Post::Each => cq_send_batch(domain, ep, dest, pool),
        Post::Batch => cq_resend_batch(domain, ep, dest, pool),
    }
    cq_read_owned_all(domain, cq, out, src, pool);
}

/// Reads `total` entries from `cq`, `out.len()` at a time, as an application's completion loop
/// would (`Again` is not expected: every entry is already complete).
#[inline(never)]
fn cq_read_all<N: Nic, F: Format>(
    domain: &Domain<'_, N, D>,
    cq: &CompletionQueue<N, F>,
    out: &mut [F::Entry],
    total: usize,
) {
    let mut got = 0;
    while got < total {
        let want = out.len().min(total - got);
        match cq.read(domain, &mut out[..want]) {
            Ok(n) => got += n,
            Err(Error::Again) => panic!("cq: {got} of {total} entries read, then Again"),
            Err(e) => panic!("cq: read failed: {e}"),
        }
        black_box(&out[..want]);
    }
}

/// Reads `pool.len()` entries from `cq` with `read_owned`, `out.len()` at a time, each
/// entry's buffer into `pool` and its source into `src`.
#[inline(never)]
fn cq_read_owned_all<'d, N: Nic, F: Format>(
    domain: &'d Domain<'_, N, D>,
    cq: &CompletionQueue<N, F>,
    out: &mut [F::Entry],
    src: &mut [FiAddr],
    pool: &mut [Option<Buf<'d>>],
) {
    let total = pool.len();
    let mut got = 0;
    while got < total {
        let want = out.len().min(total - got);
        match cq.read_owned(
            domain,
            &mut out[..want],
            &mut src[got..got + want],
            &mut pool[got..got + want],
        ) {
            Ok(n) => got += n,
            Err(Error::Again) => panic!("cq: {got} of {total} entries read, then Again"),
            Err(e) => panic!("cq: read_owned failed: {e}"),
        }
        black_box(&out[..want]);
    }
}

/// Calls `cq.read` `calls` times with nothing completed: each must find nothing
/// (`Err(Again)`).
#[inline(never)]
fn cq_read_empty<N: Nic, F: Format>(
    domain: &Domain<'_, N, D>,
    cq: &CompletionQueue<N, F>,
    out: &mut [F::Entry],
    calls: usize,
) {
    for _ in 0..calls {
        match cq.read(domain, out) {
            Err(Error::Again) => {}
            Ok(n) => panic!("cq: an empty read returned {n} entries"),
            Err(e) => panic!("cq: empty read failed: {e}"),
        }
        black_box(&*out);
    }
}

/// One post → complete → read cycle of `pool.len()` receives: post every buffer of `pool`,
/// read them back into it.
#[inline(never)]
fn cq_cycle<'d, N: Nic, F: Format>(
    domain: &'d Domain<'_, N, D>,
    ep: &Endpoint,
    post: Post,
    cq: &CompletionQueue<N, F>,
    out: &mut [F::Entry],
    src: &mut [FiAddr],
    pool: &mut [Option<Buf<'d>>],
) {
    post_all(domain, ep, post, pool);
    cq_read_owned_all(domain, cq, out, src, pool);
}

/// The raw layer: a receive path bound to a CQ of format `F`, whole frames into DMA memory.
fn run_raw<N: Nic, F: Format>(nic: &N, mode: Mode, entries: usize, batch: usize) -> f64 {
    let mem = nic.alloc_dma(SLOT * D).expect("buffers");
    // One hardware queue, one CQ of D entries.
    let caps = Capacities {
        queues: 1,
        cqs: 1,
        cq_size: D,
        ..Capacities::DEFAULT
    };
    let domain = Domain::<_, D>::with_capacities(nic, &caps);
    let cq = domain
        .open_cq::<F>(&CqAttr {
            size: D,
            ..CqAttr::default()
        })
        .expect("open CQ");
    let rx = domain
        .open_rx(0, RxConfig::new(SLOT as u32))
        .expect("open RX path");
    cq.bind(&domain, &rx, BindFlags::RECV).expect("bind");

    // Posts are built once, as an application keeps its buffers: the loop should cost what core
    // and the driver cost, not what building the posts costs.
    let posts: Vec<RecvPost> = (0..ROUND)
        .map(|i| RecvPost {
            buf: RxBuffer {
                iova: at(&mem, i * SLOT),
                len: SLOT as u32,
            },
            len: SLOT as u32,
            context: OpContext(i),
            flags: OpFlags::empty(),
        })
        .collect();
    let mut out = [F::Entry::default(); MAX_BATCH];

    let ns = match mode {
        Mode::Cycle => {
            let start = Instant::now();
            let mut done = 0;
            while done < entries {
                cq_raw_cycle(&domain, &rx, &cq, &posts[..batch], &mut out[..batch]);
                done += batch;
            }
            start.elapsed().as_nanos() as f64 / done as f64
        }
        _ => {
            let mut timed = Duration::ZERO;
            let mut done = 0;
            while done < entries {
                cq_raw_post_batch(&rx, &posts);
                let start = Instant::now();
                cq_read_all(&domain, &cq, &mut out[..batch], ROUND);
                timed += start.elapsed();
                done += ROUND;
            }
            timed.as_nanos() as f64 / done as f64
        }
    };
    cq.unbind(&domain, &rx)
        .expect("unbind: nothing outstanding");
    ns
}

/// Posts every receive in `posts` with one `post_recvs` call (one doorbell).
#[inline(never)]
fn cq_raw_post_batch<N: Nic>(rx: &Path<'_, '_, N, D>, posts: &[RecvPost]) {
    let n = rx.post_recvs(posts).expect("post receives");
    assert_eq!(n, posts.len(), "every receive posted");
}

/// One post → complete → read cycle of `posts.len()` receives on the raw layer.
#[inline(never)]
fn cq_raw_cycle<N: Nic, F: Format>(
    domain: &Domain<'_, N, D>,
    rx: &Path<'_, '_, N, D>,
    cq: &CompletionQueue<N, F>,
    posts: &[RecvPost],
    out: &mut [F::Entry],
) {
    cq_raw_post_batch(rx, posts);
    cq_read_all(domain, cq, out, posts.len());
}

fn at(region: &impl DmaRegion, offset: usize) -> Iova {
    region
        .iova()
        .checked_add(offset as u64)
        .expect("offset inside the region")
}
