//! Ping-pong and streaming between two ringfab endpoints, like libfabric's `fi_pingpong`.
//!
//! By default both endpoints run in this process on two emulated Intel 82576 NICs on one wire
//! (the real igb driver, the emulated device): no root, no hardware. `--nic e1000e` or
//! `--nic virtio-net` picks the emulated 82574 or virtio-net device instead. With `--vfio A B` they run
//! on two real (or QEMU-emulated) functions bound to vfio-pci. Either way the NICs are opened
//! with `ringfab_nics::AnyNic`, which picks the driver from the PCI ID: an 82576 (igb), an 82574
//! (e1000e) or a virtio-net device (virtio-net).
//!
//! * **pingpong** (window 1): A sends a message, B receives it and sends it back, A receives
//!   it; `usec/xfer` is half the round trip.
//! * **stream** (window > 1): A sends `window` messages per doorbell (`FI_MORE` on all but the
//!   last), B receives them; `Mxfers/sec` is the one-way message rate.
//!
//! `--encap udp` puts ringfab's header inside IPv4/UDP (`Encap::Udp`, 58 bytes instead of 30)
//! on both endpoints, the encapsulation RSS-fed receive contexts use. `--encap plain` makes
//! them plain IPv4/UDP endpoints (`Encap::PlainUdp`, docs/ip.md): A is 10.0.0.1:7000, B is
//! 10.0.0.2:7000 on a /24, the message is the UDP payload and nothing else, and each side finds
//! the other's MAC address by ARP (started when the peer is inserted in the AV).
//!
//! ```sh
//! cargo run --example pingpong                          # 64 B and 1 KiB, both modes
//! cargo run --release --example pingpong -- -S 1024 -I 100000 -W 32
//! cargo run --release --example pingpong -- --vfio 0000:00:03.0 0000:00:0b.0
//! ```

use std::net::Ipv4Addr;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use ringfab::av::{AddrFormat, AvAttr, FiAddr};
use ringfab::cq::{CompletionQueue, CqAttr};
use ringfab::domain::Domain;
use ringfab::entry::{Msg, MsgEntry, OpContext};
use ringfab::ep::{Endpoint, EpAttr};
use ringfab::flags::{BindFlags, CompletionFlags, OpFlags};
use ringfab::hal::{MacAddr, Nic};
use ringfab::ip::Ipv4Config;
use ringfab::mr::Buf;
use ringfab::proto::Encap;
use ringfab::{Clock, Error};
use ringfab_emu::{
    EmuE1000e, EmuIgb, EmuNic, EmuPlatform, EmuVirtioNet, Kind, ModelConfig, VirtioNetModelConfig,
    Wire,
};
use ringfab_nics::AnyNic;
use ringfab_vfio::VfioPlatform;

/// Ring depth of every queue.
const D: usize = 256;
/// Receive buffer size (the NIC queue's buffer size).
const BUF: usize = 2048;
/// CQ size: everything both directions of one endpoint can have outstanding.
const CQ_SIZE: usize = 2 * D;
/// Largest streaming window: B keeps twice as many receives posted.
const MAX_WINDOW: usize = D / 2;

struct Options {
    sizes: Vec<usize>,
    iterations: usize,
    warmup: usize,
    windows: Vec<usize>,
    vfio: Option<(String, String)>,
    /// Which emulated NIC (`igb`, `e1000e` or `virtio-net`).
    nic: String,
    /// ringfab's header straight on Ethernet or inside IPv4/UDP.
    encap: Encap,
}

const USAGE: &str = "usage: pingpong [-S bytes[,bytes…]] [-I iterations] [-w warmup] \
[-W window[,window…]] [--nic igb|e1000e|virtio-net] [--encap ethernet|udp|plain] \
[--vfio BDF_A BDF_B]";

fn list(flag: &str, v: Option<String>) -> Result<Vec<usize>, String> {
    let v = v.ok_or(format!("{flag} needs a value"))?;
    v.split(',')
        .map(|x| x.parse().map_err(|_| format!("{flag}: not a number: {x}")))
        .collect()
}

fn parse_args() -> Result<Options, String> {
    let mut o = Options {
        sizes: vec![64, 1024],
        iterations: 10_000,
        warmup: 100,
        windows: vec![1, 32],
        vfio: None,
        nic: "igb".into(),
        encap: Encap::Ethernet,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "-S" | "--size" => o.sizes = list("-S", args.next())?,
            "-I" | "--iterations" => o.iterations = list("-I", args.next())?[0],
            "-w" | "--warmup" => o.warmup = list("-w", args.next())?[0],
            "-W" | "--window" => o.windows = list("-W", args.next())?,
            "--vfio" => {
                let a = args.next().ok_or("--vfio needs two PCI addresses")?;
                let b = args.next().ok_or("--vfio needs two PCI addresses")?;
                o.vfio = Some((a, b));
            }
            "--nic" => o.nic = args.next().ok_or("--nic needs igb, e1000e or virtio-net")?,
            "--encap" => {
                o.encap = match args.next().as_deref() {
                    Some("ethernet") => Encap::Ethernet,
                    Some("udp") => Encap::Udp,
                    Some("plain") => Encap::PlainUdp,
                    _ => return Err("--encap needs ethernet, udp or plain".into()),
                }
            }
            "-h" | "--help" => return Err(USAGE.into()),
            other => return Err(format!("unknown argument {other}\n{USAGE}")),
        }
    }
    if o.iterations == 0 {
        return Err("-I must be at least 1".into());
    }
    if let Some(&w) = o.windows.iter().find(|&&w| w == 0 || w > MAX_WINDOW) {
        return Err(format!(
            "-W {w}: the window must be between 1 and {MAX_WINDOW}"
        ));
    }
    Ok(o)
}

/// One side: its domain, endpoint, CQ, send-buffer pool and the peer's address.
struct Side<'d, 'n, N: Nic> {
    dom: &'d Domain<'n, N, D>,
    ep: Endpoint,
    cq: CompletionQueue<N, Msg>,
    pool: Vec<Buf<'d>>,
    peer: FiAddr,
}

impl<'d, N: Nic> Side<'d, '_, N> {
    /// Reads completions: receive buffers are posted again at once (after checking the
    /// length), send buffers return to the pool. Returns the receives completed.
    fn poll(&mut self, expect_len: usize) -> Result<usize, String> {
        let mut e = [MsgEntry::default(); 32];
        let mut src = [FiAddr::NOTAVAIL; 32];
        let mut bufs: [Option<Buf<'d>>; 32] = std::array::from_fn(|_| None);
        let n = match self.cq.read_owned(self.dom, &mut e, &mut src, &mut bufs) {
            Ok(n) => n,
            Err(Error::Again) => return Ok(0),
            Err(err) => return Err(format!("reading the CQ: {err}")),
        };
        let mut recvs = 0;
        for (entry, buf) in e[..n].iter().zip(bufs.iter_mut()) {
            let buf = buf.take().ok_or("a completion without its buffer")?;
            if entry.flags.contains(CompletionFlags::RECV) {
                if entry.len != expect_len {
                    return Err(format!(
                        "received {} bytes, expected {expect_len}",
                        entry.len
                    ));
                }
                recvs += 1;
                self.ep
                    .recv(self.dom, buf, OpContext(1))
                    .map_err(|(err, _)| format!("reposting a receive: {err}"))?;
            } else {
                self.pool.push(buf);
            }
        }
        Ok(recvs)
    }

    /// Sends one message of `len` bytes; `more` defers the doorbell.
    fn send(&mut self, len: usize, more: bool) -> Result<bool, String> {
        let Some(buf) = self.pool.pop() else {
            return Ok(false);
        };
        let flags = if more {
            OpFlags::MORE
        } else {
            OpFlags::empty()
        };
        match self
            .ep
            .sendmsg(self.dom, buf, len, self.peer, None, OpContext(2), flags)
        {
            Ok(()) => Ok(true),
            Err((Error::Again, buf)) => {
                self.pool.push(buf);
                Ok(false)
            }
            Err((err, _)) => Err(format!("sending: {err}")),
        }
    }
}

/// Gives up when nothing moves for this long (a lost frame on real hardware).
const STALL: Duration = Duration::from_secs(2);

fn pingpong<N: Nic>(
    a: &mut Side<'_, '_, N>,
    b: &mut Side<'_, '_, N>,
    len: usize,
    iterations: usize,
    progress: &dyn Fn(),
) -> Result<(), String> {
    for _ in 0..iterations {
        one_way(a, b, len, progress)?;
        one_way(b, a, len, progress)?;
    }
    Ok(())
}

/// `from` sends one message and `to` receives it.
fn one_way<N: Nic>(
    from: &mut Side<'_, '_, N>,
    to: &mut Side<'_, '_, N>,
    len: usize,
    progress: &dyn Fn(),
) -> Result<(), String> {
    let start = Instant::now();
    while !from.send(len, false)? {
        progress();
        from.poll(len)?;
        if start.elapsed() > STALL {
            return Err("no send buffer came back".into());
        }
    }
    let start = Instant::now();
    loop {
        progress();
        if to.poll(len)? > 0 {
            return Ok(());
        }
        from.poll(len)?;
        if start.elapsed() > STALL {
            return Err("a message was lost".into());
        }
    }
}

fn stream<N: Nic>(
    a: &mut Side<'_, '_, N>,
    b: &mut Side<'_, '_, N>,
    len: usize,
    iterations: usize,
    window: usize,
    progress: &dyn Fn(),
) -> Result<(), String> {
    let (mut sent, mut received) = (0, 0);
    let mut last_move = Instant::now();
    while received < iterations {
        // At most one window in flight, so B's receives (twice the window) never run out.
        let burst = (window - (sent - received)).min(iterations - sent);
        let mut posted = 0;
        // FI_MORE on all but the last of the burst: one doorbell for the lot.
        while posted < burst && a.send(len, posted + 1 < burst && a.pool.len() > 1)? {
            posted += 1;
        }
        sent += posted;
        progress();
        let got = b.poll(len)?;
        received += got;
        a.poll(len)?;
        if got > 0 || posted > 0 {
            last_move = Instant::now();
        } else if last_move.elapsed() > STALL {
            return Err(format!("{} of {sent} messages were lost", sent - received));
        }
    }
    Ok(())
}

/// An error of `what`, for `map_err`.
fn fail(what: &'static str) -> impl Fn(Error) -> String {
    move |e| format!("{what}: {e}")
}

/// Wall-clock time since the program's first endpoint was opened: what ARP's retries and
/// cache expiry are measured with on plain UDP (core has no clock of its own).
struct WallClock(Instant);

impl Clock for WallClock {
    fn now(&self) -> Duration {
        self.0.elapsed()
    }
}

/// With `--encap plain`: each side's address (one /24, no gateway) and both endpoints' port.
const IP_A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const IP_B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const PORT: u16 = 7000;

/// Opens everything on two NICs and runs every size × window.
fn run<N: Nic>(nic_a: &N, nic_b: &N, o: &Options, progress: &dyn Fn()) -> Result<(), String> {
    let clock = WallClock(Instant::now());
    let plain = o.encap == Encap::PlainUdp;
    let (mut da, mut db) = (Domain::new(nic_a), Domain::new(nic_b));
    if plain {
        (da, db) = (da.with_clock(&clock), db.with_clock(&clock));
        for (d, addr) in [(&da, IP_A), (&db, IP_B)] {
            d.set_ipv4(Ipv4Config {
                addr,
                prefix_len: 24,
                gateway: None,
            })
            .map_err(fail("setting the domain's IPv4 address"))?;
        }
    }
    let attr = CqAttr {
        size: CQ_SIZE,
        ..CqAttr::default()
    };
    let cq_a = da.open_cq::<Msg>(&attr).map_err(fail("opening CQ A"))?;
    let cq_b = db.open_cq::<Msg>(&attr).map_err(fail("opening CQ B"))?;
    let av_attr = AvAttr {
        format: if plain {
            AddrFormat::SockaddrIn
        } else {
            AddrFormat::Ringfab
        },
        ..AvAttr::default()
    };
    let av_a = da.open_av(&av_attr).map_err(fail("opening AV A"))?;
    let av_b = db.open_av(&av_attr).map_err(fail("opening AV B"))?;
    let ep_attr = EpAttr {
        encap: o.encap,
        port: if plain { PORT } else { 0 },
        ..EpAttr::default()
    };
    let mut ep_a = da.endpoint(&ep_attr).map_err(fail("endpoint A"))?;
    let mut ep_b = db.endpoint(&ep_attr).map_err(fail("endpoint B"))?;
    let both = BindFlags::TRANSMIT | BindFlags::RECV;
    ep_a.bind_cq(&da, &cq_a, both)
        .map_err(fail("binding CQ A"))?;
    ep_b.bind_cq(&db, &cq_b, both)
        .map_err(fail("binding CQ B"))?;
    ep_a.bind_av(&da, &av_a).map_err(fail("binding AV A"))?;
    ep_b.bind_av(&db, &av_b).map_err(fail("binding AV B"))?;
    ep_a.enable(&da).map_err(fail("enabling A"))?;
    ep_b.enable(&db).map_err(fail("enabling B"))?;
    let (mut to_b, mut to_a) = ([FiAddr::NOTAVAIL], [FiAddr::NOTAVAIL]);
    if plain {
        // The peer's `sockaddr_in`; inserting it starts its ARP resolution.
        let (name_a, name_b) = (ep_a.sockaddr(&da), ep_b.sockaddr(&db));
        let (Some(name_a), Some(name_b)) = (name_a, name_b) else {
            return Err("a plain-UDP endpoint without its sockaddr_in".into());
        };
        to_b[0] = av_a
            .insert_sockaddr_one(&da, name_b)
            .map_err(fail("AV insert"))?;
        to_a[0] = av_b
            .insert_sockaddr_one(&db, name_a)
            .map_err(fail("AV insert"))?;
    } else {
        av_a.insert(&da, &[ep_b.name()], &mut to_b)
            .map_err(fail("AV insert"))?;
        av_b.insert(&db, &[ep_a.name()], &mut to_a)
            .map_err(fail("AV insert"))?;
    }

    // Each side: D buffers, half for receives, half for sends.
    let mr_a = da
        .register(vec![0u8; D * BUF + ringfab::mr::PAGE])
        .map_err(fail("registering A"))?;
    let mr_b = db
        .register(vec![0u8; D * BUF + ringfab::mr::PAGE])
        .map_err(fail("registering B"))?;
    let mut a = Side {
        dom: &da,
        ep: ep_a,
        cq: cq_a,
        pool: Vec::new(),
        peer: to_b[0],
    };
    let mut b = Side {
        dom: &db,
        ep: ep_b,
        cq: cq_b,
        pool: Vec::new(),
        peer: to_a[0],
    };
    for (side, mr) in [(&mut a, &mr_a), (&mut b, &mr_b)] {
        for i in 0..D {
            let mut buf = mr.alloc(side.dom, BUF).map_err(fail("carving a buffer"))?;
            let offset = side.ep.payload_offset();
            buf.fill(offset, BUF - offset, i as u8)
                .map_err(fail("filling a buffer"))?;
            if i < D / 2 {
                // One doorbell for all of them: FI_MORE on all but the last.
                let more = if i + 1 < D / 2 {
                    OpFlags::MORE
                } else {
                    OpFlags::empty()
                };
                side.ep
                    .recvmsg(side.dom, buf, OpContext(1), more)
                    .map_err(|(e, _)| format!("posting a receive: {e}"))?;
            } else {
                side.pool.push(buf);
            }
        }
    }

    let header = a.ep.payload_offset();
    match o.encap {
        Encap::Ethernet => println!("# ringfab's own EtherType, {header}-byte header"),
        Encap::Udp => println!("# UDP encapsulation, {header}-byte header"),
        Encap::PlainUdp => {
            println!("# plain IPv4/UDP, {IP_A}:{PORT} <-> {IP_B}:{PORT}, {header}-byte header")
        }
    }
    println!(
        "{:<9} {:>6} {:>8} {:>7} {:>10} {:>9} {:>10} {:>11}",
        "mode", "bytes", "window", "iters", "time", "MB/sec", "usec/xfer", "Mxfers/sec"
    );
    for &len in &o.sizes {
        if len > a.ep.max_msg_size(&da) {
            return Err(format!(
                "-S {len}: larger than max_msg_size {}",
                a.ep.max_msg_size(&da)
            ));
        }
        for &window in &o.windows {
            let mode = if window == 1 { "pingpong" } else { "stream" };
            let mut go = |n| {
                if window == 1 {
                    pingpong(&mut a, &mut b, len, n, progress)
                } else {
                    stream(&mut a, &mut b, len, n, window, progress)
                }
            };
            go(o.warmup)?;
            let start = Instant::now();
            go(o.iterations)?;
            let secs = start.elapsed().as_secs_f64();
            // A ping-pong iteration is two transfers (there and back); a stream iteration one.
            let xfers = if window == 1 {
                2 * o.iterations
            } else {
                o.iterations
            } as f64;
            println!(
                "{:<9} {:>6} {:>8} {:>7} {:>9.3}s {:>9.2} {:>10.2} {:>11.3}",
                mode,
                len,
                window,
                o.iterations,
                secs,
                xfers * len as f64 / secs / 1e6,
                secs * 1e6 / xfers,
                xfers / secs / 1e6,
            );
        }
    }
    Ok(())
}

/// `dev` plugged into `wire`; the platform its driver runs on (which keeps the device alive).
fn plugged<K: Kind>(dev: EmuNic<K>, wire: &Wire) -> EmuPlatform {
    dev.connect(wire);
    dev.platform()
}

fn emulated(o: &Options) -> Result<(), String> {
    let wire = Wire::new();
    let config = |last: u8| {
        let mut config = ModelConfig::default();
        config.mac = MacAddr([0x52, 0x54, 0x00, 0x00, 0x00, last]);
        config
    };
    let vconfig = |last: u8| {
        let mut c = VirtioNetModelConfig::default();
        c.mac = config(last).mac;
        c
    };
    let progress = || wire.run_until_idle();
    // The name picks the emulated device; the driver is the one its PCI ID calls for.
    let (pa, pb, what) = match o.nic.as_str() {
        "igb" => (
            plugged(EmuIgb::new(config(0x0a)), &wire),
            plugged(EmuIgb::new(config(0x0b)), &wire),
            "two emulated 82576",
        ),
        "e1000e" => (
            plugged(EmuE1000e::new(config(0x0a)), &wire),
            plugged(EmuE1000e::new(config(0x0b)), &wire),
            "two emulated 82574",
        ),
        "virtio-net" => (
            plugged(EmuVirtioNet::new(vconfig(0x0a)), &wire),
            plugged(EmuVirtioNet::new(vconfig(0x0b)), &wire),
            "two emulated virtio-net devices",
        ),
        other => return Err(format!("--nic {other}: igb, e1000e or virtio-net")),
    };
    let nic_a = AnyNic::open(pa).map_err(|e| format!("NIC A: {e}"))?;
    let nic_b = AnyNic::open(pb).map_err(|e| format!("NIC B: {e}"))?;
    println!(
        "# ringfab pingpong: {what} ({} driver) on one emulated wire",
        nic_a.driver()
    );
    run(&nic_a, &nic_b, o, &progress)
}

fn vfio(o: &Options, a: &str, b: &str) -> Result<(), String> {
    let open = |bdf: &str| -> Result<AnyNic<VfioPlatform>, String> {
        let platform = VfioPlatform::open(bdf).map_err(|e| format!("{bdf}: {e}"))?;
        AnyNic::open(platform).map_err(|e| format!("{bdf}: {e}"))
    };
    let (na, nb) = (open(a)?, open(b)?);
    let (ida, idb) = (na.pci_id(), nb.pci_id());
    if ida != idb {
        return Err(format!(
            "{a} and {b} are different NICs ({:04x}:{:04x}, {:04x}:{:04x})",
            ida.0, ida.1, idb.0, idb.1
        ));
    }
    for (bdf, nic) in [(a, &na), (b, &nb)] {
        if !nic.link().up {
            return Err(format!("{bdf}: link is down"));
        }
    }
    println!(
        "# ringfab pingpong: {a} <-> {b} through VFIO ({} driver)",
        na.driver()
    );
    run(&na, &nb, o, &|| {})
}

fn main() -> ExitCode {
    let o = match parse_args() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let r = match &o.vfio {
        None => emulated(&o),
        Some((a, b)) => vfio(&o, a, b),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("pingpong: {e}");
            ExitCode::FAILURE
        }
    }
}
