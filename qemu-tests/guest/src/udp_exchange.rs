//! Datagrams both ways between a Linux UDP socket (`std::net::UdpSocket` on the kernel's
//! interface, a sending and a receiving thread) and a ringfab plain-UDP endpoint (docs/ip.md),
//! at once, each checked byte for byte and in order.
//!
//! A quiet link loses nothing only if no receiver is overrun: the kernel drops a datagram its
//! socket buffer cannot hold, and ringfab has as many receive buffers as it posted. So each
//! sender stays at most [`WINDOW`] datagrams ahead of what its receiver has taken — told
//! through two counters in this process's memory, not on the wire. With that, any datagram
//! missing or changed is a failure, reported with the counts; one that comes before an earlier
//! one is counted (UDP promises no order) and said in the pass line.

use std::collections::BTreeSet;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use ringfab::av::{AddrFormat, AddressVector, AvAttr, FiAddr};
use ringfab::cq::{CompletionQueue, CqAttr};
use ringfab::domain::Domain;
use ringfab::entry::{ErrEntry, Msg, MsgEntry, OpContext};
use ringfab::ep::{Endpoint, EpAttr};
use ringfab::flags::BindFlags;
use ringfab::hal::Nic;
use ringfab::mr::{Buf, MemoryRegion};
use ringfab::proto::Encap;
use ringfab::Error;

use crate::ep::memory;
use crate::nic::{BUF, PATIENCE};

/// The largest UDP payload on a 1500-byte link: MTU − 20 (IPv4) − 8 (UDP).
pub(crate) const MAX_PAYLOAD: usize = 1472;
/// Descriptors of each ringfab ring here (the domain's default).
pub(crate) const RING: usize = 256;
/// Datagrams a sender may be ahead of its receiver. Towards ringfab, fewer than the
/// [`RECEIVES`] it keeps posted, with room for ARP and a flood's frames
/// ([`crate::flood::flood`] keeps at most one round of them in flight): a frame that finds no
/// receive buffer is dropped by a real NIC, and on QEMU's igb such frames went missing
/// (docs/qemu-tests.md, "ringfab against Linux"). Towards Linux, the socket's receive buffer
/// is [`LINUX_RCVBUF`].
const WINDOW: u64 = 128;
/// The Linux socket's receive buffer (`SO_RCVBUFFORCE`, socket(7)): room for [`WINDOW`] of the
/// largest datagrams with the kernel's overhead (each is charged its whole receive buffer,
/// 2–4 KiB), which the default (`net.core.rmem_default`, 208 KiB) is not.
const LINUX_RCVBUF: i32 = 4 << 20;
/// Receive buffers the ringfab endpoint keeps posted (its ring holds [`RING`]).
const RECEIVES: usize = 192;
/// Sends the ringfab endpoint keeps in flight at most.
const SENDS: usize = 48;
/// Receive contexts are told from send contexts by this bit.
const RECV_CTX: usize = 1 << 40;
/// Size of the CQ: every posted receive and send fits.
pub(crate) const CQ_SIZE: usize = 512;

/// Which way a datagram goes (its contents differ, so a datagram echoed back is not taken for
/// one sent).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Way {
    LinuxToRingfab,
    RingfabToLinux,
}

/// Datagram `seq` of `way`: 1 to [`MAX_PAYLOAD`] bytes (the first of every thousand 1 byte,
/// the second the largest, the rest spread by SplitMix64's finaliser), each byte a function of
/// the way, the sequence number and its offset.
pub(crate) fn datagram(way: Way, seq: u64) -> Vec<u8> {
    let len = match seq % 1000 {
        0 => 1,
        1 => MAX_PAYLOAD,
        _ => 1 + (mix(seq) % MAX_PAYLOAD as u64) as usize,
    };
    let salt = match way {
        Way::LinuxToRingfab => 0x5a,
        Way::RingfabToLinux => 0xa5,
    };
    (0..len)
        .map(|i| (seq as u8).wrapping_mul(31) ^ (i as u8).wrapping_mul(7) ^ (i >> 8) as u8 ^ salt)
        .collect()
}

/// SplitMix64's finaliser (Steele, Lea, Flood, "Fast splittable pseudorandom number
/// generators", 2014): neighbouring inputs give unrelated outputs.
fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A plain-UDP endpoint with its CQ, AV (of `sockaddr_in`) and memory, on a domain whose IPv4
/// configuration is set.
pub(crate) struct PlainHost<N: Nic> {
    pub(crate) cq: CompletionQueue<N, Msg>,
    pub(crate) av: AddressVector,
    pub(crate) ep: Endpoint,
    pub(crate) mr: MemoryRegion,
}

/// Opens a plain-UDP endpoint on `port`, binds a CQ and an AV, enables it (which announces the
/// domain's address, RFC 5227 §2.3) and posts [`RECEIVES`] receives.
pub(crate) fn plain_host<N: Nic>(
    dom: &Domain<'_, N, RING>,
    port: u16,
) -> Result<PlainHost<N>, String> {
    let e = |what: &'static str| move |err: Error| format!("{what}: {err}");
    let cq = dom
        .open_cq::<Msg>(&CqAttr {
            size: CQ_SIZE,
            ..CqAttr::default()
        })
        .map_err(e("opening the CQ"))?;
    let av = dom
        .open_av(&AvAttr {
            format: AddrFormat::SockaddrIn,
            ..AvAttr::default()
        })
        .map_err(e("opening the AV"))?;
    let mut ep = dom
        .endpoint(&EpAttr {
            encap: Encap::PlainUdp,
            port,
            ..EpAttr::default()
        })
        .map_err(e("making the plain-UDP endpoint"))?;
    ep.bind_cq(dom, &cq, BindFlags::TRANSMIT | BindFlags::RECV)
        .map_err(e("bind_cq"))?;
    ep.bind_av(dom, &av).map_err(e("bind_av"))?;
    ep.enable(dom).map_err(e("enable"))?;
    let mr = dom
        .register(memory((RECEIVES + SENDS) * BUF)?)
        .map_err(e("registering memory"))?;
    let host = PlainHost { cq, av, ep, mr };
    for i in 0..RECEIVES {
        let buf = host.mr.alloc(dom, BUF).map_err(e("alloc"))?;
        host.ep
            .recv(dom, buf, OpContext(RECV_CTX + i))
            .map_err(|(err, _)| format!("posting receive {i}: {err}"))?;
    }
    Ok(host)
}

/// Reads `host`'s CQ once: its successes (context, length, buffer); an error entry is a
/// failure, named.
pub(crate) fn read_once<'d, N: Nic>(
    dom: &'d Domain<'_, N, RING>,
    host: &mut PlainHost<N>,
) -> Result<Vec<(usize, usize, Buf<'d>)>, String> {
    let mut e = [MsgEntry::default(); 16];
    let mut src = [FiAddr::NOTAVAIL; 16];
    let mut bufs: [Option<Buf<'d>>; 16] = Default::default();
    match host.cq.read_owned(dom, &mut e, &mut src, &mut bufs) {
        Ok(n) => Ok((0..n)
            .filter_map(|k| Some((e[k].op_context.0, e[k].len, bufs[k].take()?)))
            .collect()),
        Err(Error::Again) => Ok(Vec::new()),
        Err(Error::Avail) => {
            let mut entry = ErrEntry::default();
            let _ = host.cq.readerr_owned(dom, &mut entry, None, 0);
            Err(format!(
                "an error completion: context {:#x}, errno {}, prov_errno {}",
                entry.op_context.0, entry.err, entry.prov_errno
            ))
        }
        Err(other) => Err(format!("reading the CQ: {other}")),
    }
}

/// A finished exchange.
pub(crate) struct Exchanged {
    pub(crate) elapsed: Duration,
    /// Datagrams that came before an earlier one, at each end.
    pub(crate) early_at_linux: u64,
    pub(crate) early_at_ringfab: u64,
}

impl Exchanged {
    /// The order as received, for a pass line.
    pub(crate) fn order(&self) -> String {
        match (self.early_at_linux, self.early_at_ringfab) {
            (0, 0) => "in order".into(),
            (l, r) => format!("{l} came early at Linux and {r} at ringfab"),
        }
    }
}

/// What the two sides have done, shared between the threads.
#[derive(Default)]
struct Progress {
    /// Datagrams the Linux socket sent, and received (checked).
    linux_sent: AtomicU64,
    linux_got: AtomicU64,
    /// Datagrams ringfab sent (completed or not), and received (checked).
    ringfab_sent: AtomicU64,
    ringfab_got: AtomicU64,
    /// Sends the Linux interface's queue refused (`ENOBUFS`), each sent again.
    linux_enobufs: AtomicU64,
    /// Datagrams that came before an earlier one, at Linux and at ringfab.
    linux_early: AtomicU64,
    ringfab_early: AtomicU64,
    /// Where each receiver is, when the run stalls.
    linux_state: Mutex<String>,
    /// Set when any side fails or the run is over.
    stop: AtomicBool,
    /// The first failure.
    failure: Mutex<Option<String>>,
}

impl Progress {
    fn fail(&self, why: String) {
        self.failure.lock().unwrap().get_or_insert(why);
        self.stop.store(true, Ordering::SeqCst);
    }

    fn counts(&self, count: u64) -> String {
        format!(
            "Linux sent {} ({} ENOBUFS) and ringfab received {}; ringfab sent {} and Linux \
             received {} (of {count} each way)",
            self.linux_sent.load(Ordering::SeqCst),
            self.linux_enobufs.load(Ordering::SeqCst),
            self.ringfab_got.load(Ordering::SeqCst),
            self.ringfab_sent.load(Ordering::SeqCst),
            self.linux_got.load(Ordering::SeqCst),
        )
    }
}

/// `count` datagrams each way, at once, between `sock` (bound on the Linux side) and `host`
/// (whose address is `ringfab_addr`; `to_linux` is `sock`'s address in its AV). Returns how
/// long it took. The endpoint's send buffers are carved from its memory here: one exchange per
/// host.
pub(crate) fn exchange<N: Nic>(
    dom: &Domain<'_, N, RING>,
    host: &mut PlainHost<N>,
    sock: &UdpSocket,
    ringfab_addr: SocketAddr,
    to_linux: FiAddr,
    count: u64,
) -> Result<Exchanged, String> {
    let p = Progress::default();
    set_int(
        sock,
        libc::SOL_SOCKET,
        libc::SO_RCVBUFFORCE,
        LINUX_RCVBUF,
        "SO_RCVBUFFORCE",
    )?;
    set_int(sock, libc::IPPROTO_IP, libc::IP_RECVERR, 1, "IP_RECVERR")?;
    let rx = sock
        .try_clone()
        .map_err(|e| format!("cloning the socket: {e}"))?;
    rx.set_read_timeout(Some(Duration::from_millis(100)))
        .map_err(|e| format!("SO_RCVTIMEO: {e}"))?;
    let start = Instant::now();
    std::thread::scope(|s| {
        s.spawn(|| linux_receiver(&p, &rx, ringfab_addr, count));
        s.spawn(|| linux_sender(&p, sock, ringfab_addr, count));
        if let Err(why) = ringfab_side(dom, host, &p, to_linux, count) {
            p.fail(format!("{why} (ringfab's drops: {:?})", dom.ip_drops()));
        }
        p.stop.store(true, Ordering::SeqCst);
    });
    let elapsed = start.elapsed();
    let failure = p.failure.lock().unwrap().take();
    match failure {
        Some(why) => Err(format!("{why}; {}", p.counts(count))),
        None => Ok(Exchanged {
            elapsed,
            early_at_linux: p.linux_early.load(Ordering::SeqCst),
            early_at_ringfab: p.ringfab_early.load(Ordering::SeqCst),
        }),
    }
}

/// What a receiver has taken of one way: every datagram below `next`, and those of `ahead`.
/// UDP does not promise order (RFC 768 promises nothing of it), so a datagram may come early;
/// it must come once and whole.
#[derive(Default)]
struct Arrivals {
    next: u64,
    ahead: BTreeSet<u64>,
    /// Datagrams that came before an earlier one.
    early: u64,
}

impl Arrivals {
    /// Takes `bytes` as datagram `next`, or as a later one not taken yet (at most two windows
    /// on); anything else is a failure, described.
    fn take(&mut self, way: Way, bytes: &[u8]) -> Result<(), String> {
        if bytes == datagram(way, self.next) {
            self.next += 1;
            while self.ahead.remove(&self.next) {
                self.next += 1;
            }
            return Ok(());
        }
        let later = self.next + 1..self.next + 2 * WINDOW;
        match later
            .into_iter()
            .find(|s| !self.ahead.contains(s) && datagram(way, *s) == bytes)
        {
            Some(s) => {
                self.ahead.insert(s);
                self.early += 1;
                Ok(())
            }
            None => Err(format!(
                "datagram {}: {}",
                self.next,
                mismatch(way, self.next, bytes)
            )),
        }
    }

    /// Where a stalled receiver is, for a failure.
    fn state(&self) -> String {
        format!(
            "datagram {} not come; {} later ones did",
            self.next,
            self.ahead.len()
        )
    }
}

/// How datagram `seq` of `way` came out as `got`: which datagram it is if it is a nearby one
/// (a loss, or a reordering), else where its bytes first differ.
fn mismatch(way: Way, seq: u64, got: &[u8]) -> String {
    let near = seq.saturating_sub(2 * WINDOW)..seq + 2 * WINDOW;
    if let Some(other) = near.clone().find(|s| datagram(way, *s) == got) {
        return format!("{} bytes, datagram {other} where {seq} was due", got.len());
    }
    let want = datagram(way, seq);
    match got.iter().zip(&want).position(|(a, b)| a != b) {
        _ if got.len() != want.len() => format!(
            "{} bytes, expected {}, and no datagram in {near:?} is it",
            got.len(),
            want.len()
        ),
        Some(at) => format!(
            "{} bytes as expected, wrong from byte {at}: {:02x?} where {:02x?} was due",
            got.len(),
            &got[at..got.len().min(at + 8)],
            &want[at..want.len().min(at + 8)]
        ),
        None => "equal (no mismatch)".into(),
    }
}

/// Sets an integer socket option (socket(7), ip(7)); `what` names it in the error. Here
/// `SO_RCVBUFFORCE` sets the receive buffer past `net.core.rmem_max` (root) and `IP_RECVERR`
/// makes a datagram the interface's queue refuses an `ENOBUFS` of the send instead of a silent
/// drop; the bench's kernel roles use it too.
pub(crate) fn set_int(
    sock: &UdpSocket,
    level: i32,
    name: i32,
    value: i32,
    what: &str,
) -> Result<(), String> {
    use std::os::fd::AsRawFd;
    // SAFETY: setsockopt(2) reads `size_of::<c_int>()` bytes at `&value`, which lives for the
    // call; the descriptor is the socket's own.
    let r = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            level,
            name,
            std::ptr::addr_of!(value).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(format!(
            "setsockopt {what} {value}: {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

/// Receives `count` datagrams on the socket, each from ringfab's address and equal to the next
/// one ringfab sends.
fn linux_receiver(p: &Progress, sock: &UdpSocket, from: SocketAddr, count: u64) {
    let mut buf = vec![0u8; 2048];
    let mut got = Arrivals::default();
    while got.next < count && !p.stop.load(Ordering::SeqCst) {
        match sock.recv_from(&mut buf) {
            Ok((n, src)) => {
                if src != from {
                    return p.fail(format!(
                        "Linux got {n} bytes from {src}, not ringfab ({from})"
                    ));
                }
                if let Err(why) = got.take(Way::RingfabToLinux, &buf[..n]) {
                    return p.fail(format!("Linux's {why}"));
                }
                p.linux_got.store(got.next, Ordering::SeqCst);
                p.linux_early.store(got.early, Ordering::SeqCst);
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                *p.linux_state.lock().unwrap() = got.state();
            }
            Err(e) => return p.fail(format!("recv_from on the Linux socket: {e}")),
        }
    }
    *p.linux_state.lock().unwrap() = got.state();
}

/// Sends `count` datagrams to ringfab, at most [`WINDOW`] ahead of what it received.
fn linux_sender(p: &Progress, sock: &UdpSocket, to: SocketAddr, count: u64) {
    for seq in 0..count {
        while seq >= p.ringfab_got.load(Ordering::SeqCst) + WINDOW {
            if p.stop.load(Ordering::SeqCst) {
                return;
            }
            std::thread::sleep(Duration::from_micros(100));
        }
        if p.stop.load(Ordering::SeqCst) {
            return;
        }
        let payload = datagram(Way::LinuxToRingfab, seq);
        loop {
            match sock.send_to(&payload, to) {
                Ok(_) => break,
                // With IP_RECVERR a datagram the interface's queue refused is reported
                // (ip(7)) rather than dropped in silence: sent again.
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                    p.linux_enobufs.fetch_add(1, Ordering::SeqCst);
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err(e) => {
                    return p.fail(format!(
                        "send_to of datagram {seq} on the Linux socket: {e}"
                    ))
                }
            }
        }
        p.linux_sent.store(seq + 1, Ordering::SeqCst);
    }
}

/// The ringfab endpoint's loop: sends its `count` datagrams at most [`WINDOW`] ahead of what
/// Linux received, checks each it receives and posts its buffer again, until both ways are
/// done and every send completed; fails after [`PATIENCE`] without progress.
fn ringfab_side<N: Nic>(
    dom: &Domain<'_, N, RING>,
    host: &mut PlainHost<N>,
    p: &Progress,
    to_linux: FiAddr,
    count: u64,
) -> Result<(), String> {
    let offset = host.ep.payload_offset();
    let (mut sent, mut completed) = (0u64, 0u64);
    let mut got = Arrivals::default();
    let mut scratch = vec![0u8; BUF];
    let mut last = (Instant::now(), 0u64);
    // Regions are carved once (`MemoryRegion::alloc`): send buffers go round through the CQ.
    let mut free = (0..SENDS)
        .map(|_| host.mr.alloc(dom, BUF))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("carving the send buffers: {e}"))?;
    loop {
        if p.stop.load(Ordering::SeqCst) {
            return Ok(());
        }
        let done = read_once(dom, host)?;
        for (ctx, len, buf) in done {
            if ctx < RECV_CTX {
                if ctx as u64 != completed {
                    return Err(format!("send {ctx} completed where {completed} was next"));
                }
                completed += 1;
                free.push(buf);
                continue;
            }
            let bytes = &mut scratch[..len.min(BUF)];
            buf.read(offset, bytes)
                .map_err(|e| format!("reading a receive: {e}"))?;
            got.take(Way::LinuxToRingfab, bytes)
                .map_err(|why| format!("ringfab's {why}"))?;
            p.ringfab_got.store(got.next, Ordering::SeqCst);
            p.ringfab_early.store(got.early, Ordering::SeqCst);
            host.ep
                .recv(dom, buf, OpContext(ctx))
                .map_err(|(e, _)| format!("posting a receive again: {e}"))?;
        }
        let acked = p.linux_got.load(Ordering::SeqCst);
        while sent < count && sent < acked + WINDOW {
            let Some(mut buf) = free.pop() else { break };
            let payload = datagram(Way::RingfabToLinux, sent);
            buf.write(offset, &payload)
                .map_err(|e| format!("writing send {sent}: {e}"))?;
            match host
                .ep
                .send(dom, buf, payload.len(), to_linux, OpContext(sent as usize))
            {
                Ok(()) => sent += 1,
                Err((Error::Again, buf)) => {
                    free.push(buf);
                    break;
                }
                Err((e, _)) => return Err(format!("send {sent}: {e}")),
            }
            p.ringfab_sent.store(sent, Ordering::SeqCst);
        }
        if got.next == count && completed == count && acked == count {
            return Ok(());
        }
        let moved = got.next + got.ahead.len() as u64 + completed + acked;
        if moved != last.1 {
            last = (Instant::now(), moved);
        } else if last.0.elapsed() > PATIENCE {
            return Err(format!(
                "nothing moved for {PATIENCE:?}: at ringfab {}; at Linux {}",
                got.state(),
                p.linux_state.lock().unwrap()
            ));
        } else {
            std::thread::yield_now();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_datagram_may_come_early_but_only_once_and_whole() {
        let way = Way::LinuxToRingfab;
        let mut a = Arrivals::default();
        a.take(way, &datagram(way, 0)).unwrap();
        a.take(way, &datagram(way, 2)).unwrap();
        assert_eq!((a.next, a.early), (1, 1));
        assert!(a.take(way, &datagram(way, 2)).is_err(), "twice");
        a.take(way, &datagram(way, 1)).unwrap();
        assert_eq!(a.next, 3, "1 fills the gap up to the early 2");
        let mut changed = datagram(way, 3);
        changed[0] ^= 1;
        assert!(a.take(way, &changed).is_err());
        assert!(a.take(way, &datagram(Way::RingfabToLinux, 3)).is_err());
    }

    #[test]
    fn datagrams_have_every_size_and_differ_by_way() {
        let lens: Vec<usize> = (0..3000)
            .map(|s| datagram(Way::LinuxToRingfab, s).len())
            .collect();
        assert_eq!(lens[0], 1);
        assert_eq!(lens[1], MAX_PAYLOAD);
        assert!(lens.iter().all(|l| (1..=MAX_PAYLOAD).contains(l)));
        let small = lens.iter().filter(|l| **l <= 100).count();
        assert!(
            (100..300).contains(&small),
            "{small} of 3000 at most 100 bytes"
        );
        assert_ne!(
            datagram(Way::LinuxToRingfab, 7),
            datagram(Way::RingfabToLinux, 7)
        );
    }
}
