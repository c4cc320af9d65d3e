//! One side of a ringfab endpoint pair, as a process of its own: what the bench
//! ([`crate::bench`]) runs so that ringfab's two sides poll on two CPUs, as testpmd's two
//! processes do, instead of taking turns in one process (as the pingpong example's do).
//!
//! `ringfab-qemu-guest bench-role ROLE BDF PEER DEPTH CPU` opens the NIC at `BDF` through
//! VFIO, pins itself to `CPU`, opens one endpoint (receive context 0, a CQ of `2 × DEPTH`,
//! rings of `DEPTH`) and plays `ROLE` against its peer. `PEER` is either a MAC — ringfab's
//! Ethernet encapsulation, the peer context 0 on that MAC — or `plain:OWN,PEER`, two IPv4
//! addresses — a plain IPv4/UDP endpoint (docs/ip.md) on port [`PORT`] of a domain whose
//! address is `OWN`/24, the peer port [`PORT`] at `PEER` (reached through ARP):
//!
//! * `send`: sends messages that make 64-byte frames (34 bytes after ringfab's header, 22
//!   after plain UDP's) in bursts of 32, one doorbell a burst, until SIGTERM, and prints
//!   `result <messages/s it sent>`;
//! * `recv`: counts messages from the first one plus the warm-up for the measuring time and
//!   prints `result <messages/s>`;
//! * `ping`: sends a message and waits for one back, prints `result <µs per round trip>`;
//! * `pong`: sends back every message it receives, until SIGTERM.
//!
//! `ROLE+wait` (`send+wait`, …) plays the role without spinning while it has nothing to do: its
//! CQ is opened with `FI_WAIT_UNSPEC` (an MSI-X vector; the endpoint's queues steered to it)
//! and, where the role would poll again after a read that found nothing, it blocks in
//! `sread` (`fi_cq_sread`) until a completion is queued or [`IDLE_WAIT`] passes — the
//! receiver and the pong when no message came, the sender when no buffer or ring slot was
//! free, the ping while it waits for its answer.
//!
//! Context 0 on both sides is what makes `ping` work against testpmd's macswap too: the frame
//! comes back with its MACs swapped and ringfab's header untouched, so it names context 0 of
//! the pinging NIC as its destination and context 0 of the peer as its source.

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use std::net::Ipv4Addr;

use ringfab::av::{AddrFormat, AvAttr, EpAddr, FiAddr};
use ringfab::cntr::WaitObj;
use ringfab::cq::{CompletionQueue, CqAttr};
use ringfab::domain::Domain;
use ringfab::entry::{Msg, MsgEntry, OpContext};
use ringfab::ep::{Endpoint, EpAttr};
use ringfab::flags::{BindFlags, CompletionFlags, OpFlags};
use ringfab::hal::{MacAddr, Nic};
use ringfab::ip::{Ipv4Config, SockAddrIn};
use ringfab::mr::Buf;
use ringfab::proto::Encap;
use ringfab::{Capacities, Error};

use crate::bench::{
    mark, open, parse_mac, pin, BURST, FRAME, IDLE_WAIT, MEASURE, PINGS, PING_WARMUP, STARTUP,
    WARMUP,
};
use crate::nic::BUF;
use crate::wait::StdClock;

/// The first argument that makes the guest program play a role instead of running its tests.
pub(crate) const ROLE: &str = "bench-role";

/// `bench-role ROLE BDF PEER DEPTH CPU`: prints `result …` and exits 0, or the error on
/// stderr and exits 1.
pub(crate) fn main(args: &[String]) -> ExitCode {
    match play(args) {
        Ok(result) => {
            println!("result {result}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("bench-role: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Whom an endpoint talks to, and so its encapsulation.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Peer {
    /// ringfab's Ethernet encapsulation: context 0 on this MAC.
    Ringfab(MacAddr),
    /// Plain IPv4/UDP: this domain's address and the peer's, both on [`PORT`].
    Plain { own: Ipv4Addr, peer: Ipv4Addr },
}

impl Peer {
    /// A MAC, or `plain:OWN,PEER`.
    fn parse(s: &str) -> Option<Peer> {
        if let Some(pair) = s.strip_prefix("plain:") {
            let (own, peer) = pair.split_once(',')?;
            return Some(Peer::Plain {
                own: own.parse().ok()?,
                peer: peer.parse().ok()?,
            });
        }
        parse_mac(s).map(Peer::Ringfab)
    }
}

/// The plain-UDP endpoints' port, on both sides.
pub(crate) const PORT: u16 = 9000;

fn play(args: &[String]) -> Result<String, String> {
    let [role, bdf, peer, depth, cpu] = args else {
        return Err(format!(
            "usage: {ROLE} send|recv|ping|pong[+wait] BDF PEER_MAC|plain:OWN,PEER DEPTH CPU"
        ));
    };
    let (role, wait) = match role.strip_suffix("+wait") {
        Some(r) => (r, true),
        None => (role.as_str(), false),
    };
    let cpu: usize = cpu.parse().map_err(|_| format!("bad CPU {cpu}"))?;
    stop_on_sigterm()?;
    pin(cpu)?;
    let peer = Peer::parse(peer).ok_or_else(|| format!("bad peer {peer}"))?;
    let nic = open(bdf)?;
    match depth.as_str() {
        "512" => endpoint::<_, 512>(&nic, role, wait, peer),
        "256" => endpoint::<_, 256>(&nic, role, wait, peer),
        other => Err(format!("depth {other}: 256 or 512")),
    }
}

fn fail(what: &'static str) -> impl Fn(Error) -> String {
    move |e| format!("{what}: {e}")
}

/// One endpoint, its CQ, its send buffers, its peer and the length of its messages; the clock
/// of a role that blocks when idle.
struct Side<'d, 'n, N: Nic, const D: usize> {
    dom: &'d Domain<'n, N, D>,
    ep: Endpoint,
    cq: CompletionQueue<N, Msg>,
    pool: Vec<Buf<'d>>,
    peer: FiAddr,
    message: usize,
    wait: Option<&'d StdClock>,
}

impl<'d, N: Nic, const D: usize> Side<'d, '_, N, D> {
    /// Where a role would poll again after finding nothing: a `+wait` role blocks in `sread`
    /// until a completion is queued or `most` passes (at most [`IDLE_WAIT`]); others return.
    fn idle(&self, most: Duration) -> Result<(), String> {
        let Some(clock) = self.wait else {
            return Ok(());
        };
        let timeout = most.min(IDLE_WAIT);
        match self.cq.sread(self.dom, &mut [], None, Some(timeout), clock) {
            Ok(_) | Err(Error::Again) => Ok(()),
            Err(e) => Err(format!("waiting in sread: {e}")),
        }
    }

    /// Reads completions and posts the receives again at once; returns the entries read and
    /// the receives among them, as [`Side::read`].
    fn poll(&mut self) -> Result<(usize, usize), String> {
        let mut bufs: [Option<Buf<'d>>; BURST] = std::array::from_fn(|_| None);
        let (n, recvs) = self.read(&mut bufs)?;
        self.repost(&mut bufs[..n])?;
        Ok((n, recvs))
    }

    /// Reads up to [`BURST`] completions: send buffers go back to the pool, the receives'
    /// buffers stay in `bufs` for [`Side::repost`]. Returns the entries read and the receives
    /// among them.
    fn read(&mut self, bufs: &mut [Option<Buf<'d>>; BURST]) -> Result<(usize, usize), String> {
        let mut e = [MsgEntry::default(); BURST];
        let mut src = [FiAddr::NOTAVAIL; BURST];
        let n = match self.cq.read_owned(self.dom, &mut e, &mut src, bufs) {
            Ok(n) => n,
            Err(Error::Again) => return Ok((0, 0)),
            Err(err) => return Err(format!("reading the CQ: {err}")),
        };
        let mut recvs = 0;
        for (entry, slot) in e[..n].iter().zip(bufs.iter_mut()) {
            if slot.is_none() {
                return Err("a completion without its buffer".into());
            }
            if entry.flags.contains(CompletionFlags::RECV) {
                // Its buffer stays in its slot, to be posted again with the others.
                recvs += 1;
            } else if let Some(buf) = slot.take() {
                self.pool.push(buf);
            }
        }
        Ok((n, recvs))
    }

    /// Posts the receive buffers a [`Side::read`] left in `bufs` again, in one `recv_batch`
    /// call with the endpoint's default receive flags (none), so one doorbell decision for
    /// them all.
    fn repost(&mut self, bufs: &mut [Option<Buf<'d>>]) -> Result<(), String> {
        self.ep
            .recv_batch(self.dom, bufs, OpContext(1), OpFlags::empty())
            .map(|_| ())
            .map_err(|(err, _)| format!("reposting a receive: {err}"))
    }

    /// Sends up to [`BURST`] messages from the pool with one `send_batch` call (one doorbell):
    /// how many went. Those refused with `Again` (the ring or the CQ's credits full) go back
    /// to the pool.
    fn send_burst(&mut self) -> Result<usize, String> {
        let n = self.pool.len().min(BURST);
        if n == 0 {
            return Ok(0);
        }
        let mut bufs: [Option<Buf<'d>>; BURST] = std::array::from_fn(|_| None);
        for slot in &mut bufs[..n] {
            *slot = self.pool.pop();
        }
        let r = self.ep.send_batch(
            self.dom,
            &mut bufs[..n],
            self.message,
            self.peer,
            OpContext(2),
            OpFlags::empty(),
        );
        self.pool
            .extend(bufs[..n].iter_mut().filter_map(Option::take));
        match r {
            Ok(sent) | Err((Error::Again, sent)) => Ok(sent),
            Err((err, _)) => Err(format!("sending: {err}")),
        }
    }

    /// Sends one message, the doorbell with it. `false` if no buffer or credit is free.
    fn send(&mut self) -> Result<bool, String> {
        let Some(buf) = self.pool.pop() else {
            return Ok(false);
        };
        match self.ep.sendmsg(
            self.dom,
            buf,
            self.message,
            self.peer,
            None,
            OpContext(2),
            OpFlags::empty(),
        ) {
            Ok(()) => Ok(true),
            Err((Error::Again, buf)) => {
                self.pool.push(buf);
                Ok(false)
            }
            Err((err, _)) => Err(format!("sending: {err}")),
        }
    }
}

fn endpoint<N: Nic, const D: usize>(
    nic: &N,
    role: &str,
    wait: bool,
    peer: Peer,
) -> Result<String, String> {
    let clock = StdClock::new();
    // CQs of up to 1024 entries: enough for 2 × 512.
    let mut dom: Domain<'_, N, D> = Domain::with_capacities(nic, &Capacities::DEFAULT);
    if let Peer::Plain { own, .. } = peer {
        // ARP's retries and expiry need time.
        dom = dom.with_clock(&clock);
        dom.set_ipv4(Ipv4Config {
            addr: own,
            prefix_len: 24,
            gateway: None,
        })
        .map_err(fail("setting the domain's IPv4 address"))?;
    }
    let plain = matches!(peer, Peer::Plain { .. });
    let cq = dom
        .open_cq::<Msg>(&CqAttr {
            size: 2 * D,
            // A vector to block on for `+wait` (fi_cq(3): "the provider picks the best
            // mechanism"; ringfab's is the CQ's MSI-X vector).
            wait_obj: if wait { WaitObj::Unspec } else { WaitObj::None },
            ..CqAttr::default()
        })
        .map_err(fail("opening the CQ"))?;
    let av = dom
        .open_av(&AvAttr {
            format: if plain {
                AddrFormat::SockaddrIn
            } else {
                AddrFormat::Ringfab
            },
            ..AvAttr::default()
        })
        .map_err(fail("opening the AV"))?;
    let mut ep = dom
        .endpoint(&EpAttr {
            encap: if plain {
                Encap::PlainUdp
            } else {
                Encap::Ethernet
            },
            port: if plain { PORT } else { 0 },
            ..EpAttr::default()
        })
        .map_err(fail("opening the endpoint"))?;
    ep.bind_cq(&dom, &cq, BindFlags::TRANSMIT | BindFlags::RECV)
        .map_err(fail("binding the CQ"))?;
    ep.bind_av(&dom, &av).map_err(fail("binding the AV"))?;
    ep.enable(&dom).map_err(fail("enabling the endpoint"))?;
    let mut to = [FiAddr::NOTAVAIL];
    match peer {
        Peer::Ringfab(mac) => {
            let peer = EpAddr {
                mac,
                ctx: ep.name().ctx,
            };
            av.insert(&dom, &[peer], &mut to)
                .map_err(fail("inserting the peer"))?;
        }
        // Inserting the peer's `sockaddr_in` starts its ARP resolution.
        Peer::Plain { peer, .. } => {
            to[0] = av
                .insert_sockaddr_one(&dom, SockAddrIn::new(peer, PORT))
                .map_err(fail("inserting the peer"))?;
        }
    }
    let message = FRAME - ep.payload_offset();
    let mr = dom
        .register(vec![0u8; D * BUF + ringfab::mr::PAGE])
        .map_err(fail("registering buffers"))?;
    let mut side = Side {
        dom: &dom,
        ep,
        cq,
        pool: Vec::new(),
        peer: to[0],
        message,
        wait: wait.then_some(&clock),
    };
    // The stream's receiver posts every receive its ring takes, as testpmd's rxonly fills its
    // ring (`--rxd`); the other roles post half the buffers and send with the other half.
    // One doorbell for all the receives.
    let receives = if role == "recv" {
        side.ep
            .rx_size_left(&dom)
            .map_err(fail("asking the receive room"))?
            .min(D)
    } else {
        D / 2
    };
    for i in 0..D {
        let buf = mr.alloc(&dom, BUF).map_err(fail("carving a buffer"))?;
        if i < receives {
            let more = if i + 1 < receives {
                OpFlags::MORE
            } else {
                OpFlags::empty()
            };
            side.ep
                .recvmsg(&dom, buf, OpContext(1), more)
                .map_err(|(e, _)| format!("posting a receive: {e}"))?;
        } else {
            side.pool.push(buf);
        }
    }
    match role {
        "send" => send(&mut side),
        "recv" => recv(&mut side),
        "ping" => ping(&mut side),
        "pong" => pong(&mut side),
        other => Err(format!("no role {other}")),
    }
}

/// Set by SIGTERM: `send` and `pong` then return, and their endpoint, queues and mappings are
/// dropped in order. Killed outright, the process would lose its mappings while the NIC still
/// reads descriptors through them (the vIOMMU reports the faults).
pub(crate) static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigterm(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

/// Makes SIGTERM set [`STOP`].
pub(crate) fn stop_on_sigterm() -> Result<(), String> {
    let handler: extern "C" fn(libc::c_int) = on_sigterm;
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    let previous = unsafe { libc::signal(libc::SIGTERM, handler as libc::sighandler_t) };
    if previous == libc::SIG_ERR {
        return Err(format!(
            "installing the SIGTERM handler: {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

/// Bursts of up to [`BURST`] messages, each one `send_batch` call with one doorbell, until
/// SIGTERM; then the messages per second it sent from its first one: beside the receiver's
/// rate, it tells a sender that limits the stream from frames lost on the way.
fn send<N: Nic, const D: usize>(side: &mut Side<'_, '_, N, D>) -> Result<String, String> {
    let (mut sent, mut first) = (0u64, None);
    while !STOP.load(Ordering::Relaxed) {
        let posted = side.send_burst()?;
        if posted > 0 {
            first.get_or_insert_with(Instant::now);
            sent += posted as u64;
        }
        let (n, _) = side.poll()?;
        if posted == 0 && n == 0 {
            // Nothing sent (no buffer, ring slot or credit free) and nothing came back.
            side.idle(IDLE_WAIT)?;
        }
    }
    let secs = first.map_or(0.0, |t| t.elapsed().as_secs_f64());
    Ok(format!(
        "{:.1} sent {sent} in {secs:.1} s",
        sent as f64 / secs.max(1e-9)
    ))
}

/// Messages per second from the first one plus [`WARMUP`] for [`MEASURE`].
fn recv<N: Nic, const D: usize>(side: &mut Side<'_, '_, N, D>) -> Result<String, String> {
    // A poll, and the idle wait of a `+wait` receiver when it found nothing.
    let poll = |side: &mut Side<'_, '_, N, D>| -> Result<usize, String> {
        let (_, got) = side.poll()?;
        if got == 0 {
            side.idle(IDLE_WAIT)?;
        }
        Ok(got)
    };
    let start = Instant::now();
    while poll(side)? == 0 {
        if start.elapsed() > STARTUP {
            return Err(format!("no message in {STARTUP:?}"));
        }
    }
    let warm = Instant::now();
    while warm.elapsed() < WARMUP {
        poll(side)?;
    }
    mark(true);
    let (mut got, t) = (0, Instant::now());
    while t.elapsed() < MEASURE {
        got += poll(side)?;
    }
    let secs = t.elapsed().as_secs_f64();
    mark(false);
    Ok(format!("{:.1}", got as f64 / secs))
}

/// One round trip: a message out, reading the CQ until one comes back (or `patience`
/// passes). The receives read are left in `bufs` (their number returned), to be posted again
/// after the round trip's time is taken: reposting is not part of a round trip.
fn trip<'d, N: Nic, const D: usize>(
    side: &mut Side<'d, '_, N, D>,
    bufs: &mut [Option<Buf<'d>>; BURST],
    patience: Duration,
) -> Result<Option<usize>, String> {
    let start = Instant::now();
    while !side.send()? {
        side.poll()?;
        if start.elapsed() > patience {
            return Err("no send buffer came back".into());
        }
    }
    loop {
        let (n, recvs) = side.read(bufs)?;
        if recvs > 0 {
            return Ok(Some(n));
        }
        side.repost(&mut bufs[..n])?;
        let waited = start.elapsed();
        if waited > patience {
            return Ok(None);
        }
        if n == 0 {
            side.idle(patience - waited)?;
        }
    }
}

/// µs per round trip, the mean over [`PINGS`] answered ones after [`PING_WARMUP`]; until the
/// peer answers, a message every 100 ms. A message not answered within [`LOST`] is counted
/// as lost and its time left out (a tap bridge under load drops the odd frame); more than
/// [`MAX_LOST`] fail the measurement.
fn ping<'d, N: Nic, const D: usize>(side: &mut Side<'d, '_, N, D>) -> Result<String, String> {
    let mut bufs: [Option<Buf<'d>>; BURST] = std::array::from_fn(|_| None);
    // One round trip and its time; the receives read are posted again after the time is taken.
    let mut timed = |side: &mut Side<'d, '_, N, D>, patience| -> Result<Option<Duration>, String> {
        let t = Instant::now();
        let answer = trip(side, &mut bufs, patience)?;
        let took = t.elapsed();
        match answer {
            Some(n) => {
                side.repost(&mut bufs[..n])?;
                Ok(Some(took))
            }
            None => Ok(None),
        }
    };
    let start = Instant::now();
    while timed(side, Duration::from_millis(100))?.is_none() {
        if start.elapsed() > STARTUP {
            return Err(format!("no answer in {STARTUP:?}"));
        }
    }
    let mut lost = 0;
    let mut answered = |side: &mut Side<'d, '_, N, D>| -> Result<Option<Duration>, String> {
        if let Some(t) = timed(side, LOST)? {
            return Ok(Some(t));
        }
        lost += 1;
        if lost > MAX_LOST {
            return Err(format!("more than {MAX_LOST} messages lost"));
        }
        Ok(None)
    };
    let mut warm = 0;
    while warm < PING_WARMUP {
        warm += usize::from(answered(side)?.is_some());
    }
    let (mut total, mut trips) = (Duration::ZERO, 0);
    mark(true);
    while trips < PINGS {
        if let Some(t) = answered(side)? {
            total += t;
            trips += 1;
        }
    }
    mark(false);
    Ok(format!(
        "{:.2} lost {lost}",
        total.as_secs_f64() * 1e6 / PINGS as f64
    ))
}

/// How long a round trip may take before its message counts as lost.
pub(crate) const LOST: Duration = Duration::from_millis(500);
/// Lost messages a ping measurement tolerates.
pub(crate) const MAX_LOST: usize = 20;

/// Every message received is answered, until SIGTERM: the answers first, then the receives
/// posted again, so that no answer waits for the reposts.
fn pong<'d, N: Nic, const D: usize>(side: &mut Side<'d, '_, N, D>) -> Result<String, String> {
    let mut bufs: [Option<Buf<'d>>; BURST] = std::array::from_fn(|_| None);
    while !STOP.load(Ordering::Relaxed) {
        let (n, recvs) = side.read(&mut bufs)?;
        for _ in 0..recvs {
            while !side.send()? && !STOP.load(Ordering::Relaxed) {
                side.poll()?;
            }
        }
        side.repost(&mut bufs[..n])?;
        if n == 0 {
            side.idle(IDLE_WAIT)?;
        }
    }
    Ok("stopped".into())
}
