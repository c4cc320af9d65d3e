//! The domain's IPv4 host as paths drive it (`docs/ip.md`): [`IpHost`] holds the IPv4
//! configuration, the ARP resolver (`ip::arp::Resolver`) with the sends it holds, the control
//! outbox (ARP and ICMP frames waiting for a transmit path), the bound UDP ports and the drop
//! counts. A plain-UDP receive path hands it ARP packets and echo requests
//! ([`IpHost::take_control`]); a plain-UDP transmit path, each time it is polled, sends what the
//! outbox holds and releases or fails its held sends ([`PathState::ip_progress`]), and each
//! time it sends, sends what the outbox holds ([`PathState::drain_outbox`]). Both first test
//! one atomic ([`IpHost::has_control`], [`IpHost::has_work`]): an idle host costs a path one
//! load. No thread and no timer: the time is the one the poll's caller read from the domain's
//! clock.
//!
//! Control frames go out as operations of their own kind (`OpKind::Control`): from a slot of
//! the transmit path's control region ([`CONTROL_SLOTS`] frames of [`CONTROL_LEN`] bytes in
//! DMA memory, after the path's bounce slots), with no CQ credit, never reported to the application;
//! a failure is counted (`IpDrops::control`). So a full CQ of the application's does not hold
//! ARP and ICMP answers back.
//!
//! Locks: a path's lock, then the host's — never the other way round (a send looks its
//! next hop up and lets go of the host before it takes its transmit path).

use core::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use core::time::Duration;

use spin::Mutex;

use super::op::{Op, OpKind};
use super::post::Poster;
use super::sink::{ErrRecord, Outcome};
use super::state::{PollCtx, Queue};
use super::verdict::SEND_FLAGS;
use super::{PathState, NO_MR};
use crate::atomic::AtomicU64;
use crate::buf::{RawBuf, IOV_MAX};
use crate::clock::Clock;
use crate::entry::{Completion, OpContext};
use crate::hal::MacAddr;
use crate::hal::{DmaRegion as _, Iova, Nic, Report, Token, TxChecksum, TxQueue, TxSegment};
use crate::ip::arp::{Resolve, Resolver};
use crate::ip::checksum::Sum;
use crate::ip::emit::{self, ArpFrame, UdpChecksum, UdpHeader};
use crate::ip::limit::{self, TokenBucket};
use crate::ip::parse::{Arp, Echo, Local};
use crate::ip::{
    Discard, IpDrops, Ipv4Addr, Ipv4Config, SockAddrIn, CONTROL_LEN, ETH_LEN, ETH_MIN_FRAME,
    UDP_HEADER_LEN, UDP_LEN,
};
use crate::{Error, Result};

/// Addresses the ARP cache holds.
pub(crate) const ARP_ENTRIES: usize = 16;
/// Sends held, domain-wide, while their next hops resolve.
pub(crate) const HELD: usize = 8;
/// Control frames waiting for a transmit path.
const OUTBOX: usize = 4;
/// Control frames one transmit path has in flight at once: the slots of its control region.
const CONTROL_SLOTS: usize = 4;
/// Bytes of a plain-UDP transmit path's control region (DMA memory, allocated with the path's
/// bounce slots, after them).
pub(crate) const CONTROL_REGION: usize = CONTROL_SLOTS * CONTROL_LEN;
/// UDP ports bound at once.
pub(crate) const MAX_PORTS: usize = 16;
/// The first port handed out for `EpAttr::port` 0 (RFC 6335 §6: the dynamic range).
const DYNAMIC_PORTS: u16 = 49152;

/// Bytes of one inject bounce slot of a transmit path: an inject's frame or a gather send's
/// header (the longest header and `inject_size`, rounded to cache lines).
pub(crate) const BOUNCE_SLOT: usize = 128;

/// [`IpHost::work`]: the outbox holds a frame (a send drains it).
const WORK_OUTBOX: u8 = 1;
/// [`IpHost::work`]: the resolver is busy (`Resolver::busy`: a retry, a verdict or a held send
/// waits; a poll's progress sees to it).
const WORK_RESOLVER: u8 = 2;

/// A send held while its next hop resolves: everything its post needs.
#[derive(Clone, Copy, Debug)]
pub(crate) struct HeldSend {
    /// The transmit path it goes out on (its index in the domain's table).
    pub(crate) path: usize,
    /// The owned buffer, the 42-byte header room at its start.
    pub(crate) buf: RawBuf,
    /// Payload bytes after the header, in `buf` and `extra` together.
    pub(crate) payload_len: u16,
    /// A gather send's buffers after `buf`, each sent from its start, and the bytes sent of
    /// each (`Endpoint::sendv`); `None` and 0 for a send of one buffer.
    pub(crate) extra: [Option<RawBuf>; IOV_MAX - 1],
    pub(crate) extra_lens: [u16; IOV_MAX - 1],
    pub(crate) src: SockAddrIn,
    pub(crate) dst: SockAddrIn,
    /// What the UDP checksum field gets: the checksum from the payload's one's-complement sum,
    /// or the pseudo-header's sum for the NIC to complete (decided when the send was made).
    pub(crate) checksum: UdpChecksum,
    pub(crate) context: OpContext,
    /// Whether its success is reported.
    pub(crate) report: bool,
    /// The endpoint that posted it, on a shared transmit context's path (its CQ, counter and
    /// owner number: `Poster`); `None` on an endpoint's own path.
    pub(crate) who: Option<Poster>,
}

impl HeldSend {
    /// The segments of its frame, and how many: the first buffer's header and payload, then
    /// each further buffer's bytes from its start.
    pub(crate) fn segments(&self) -> ([TxSegment; IOV_MAX], usize) {
        let mut segs = [TxSegment {
            iova: Iova(0),
            len: 0,
        }; IOV_MAX];
        let extra_len: u16 = self.extra_lens.iter().sum();
        segs[0] = TxSegment {
            iova: self.buf.iova,
            len: (UDP_HEADER_LEN as u16).saturating_add(self.payload_len - extra_len),
        };
        let mut n = 1;
        for (raw, &len) in self.extra.iter().zip(&self.extra_lens) {
            if let Some(raw) = raw {
                segs[n] = TxSegment {
                    iova: raw.iova,
                    len,
                };
                n += 1;
            }
        }
        (segs, n)
    }
}

/// A control frame waiting in the outbox.
#[derive(Clone, Copy)]
struct Control {
    len: usize,
    bytes: [u8; CONTROL_LEN],
}

/// The host's state behind its lock, once configured.
pub(crate) struct IpState {
    pub(crate) local: Local,
    pub(crate) arp: Resolver<HeldSend, ARP_ENTRIES, HELD>,
    outbox: [Option<Control>; OUTBOX],
    /// How many port-unreachable messages may go now (`ip::limit::UNREACHABLE`).
    unreachable: TokenBucket,
}

impl Control {
    const EMPTY: Control = Control {
        len: 0,
        bytes: [0; CONTROL_LEN],
    };
}

/// What the host does with a frame a receive path classified as its own business.
pub(crate) enum ControlIn<'a> {
    Arp(Arp),
    Echo(Echo<'a>),
}

/// Counts of [`IpDrops`], as atomics.
const COUNTS: usize = Discard::ALL.len() + 3;
const PORT: usize = Discard::ALL.len();
const TOO_LONG: usize = PORT + 1;
const CONTROL: usize = PORT + 2;

/// The domain's IPv4 host. See the [module documentation](self).
pub(crate) struct IpHost {
    pub(crate) state: Mutex<Option<IpState>>,
    /// Bound UDP ports (0: free).
    ports: Mutex<[u16; MAX_PORTS]>,
    counts: [AtomicU64; COUNTS],
    /// Whether the NIC inserts UDP checksums on transmit
    /// ([`Offloads::tx_l4_checksum`](crate::hal::Offloads)): plain-UDP sends then leave the
    /// payload unsummed and ask for the insertion.
    udp_offload: AtomicBool,
    /// What waits for a transmit path ([`WORK_OUTBOX`], [`WORK_RESOLVER`]): written under the
    /// state's lock after every change, read without it — the one load a path pays when the
    /// host is idle.
    work: AtomicU8,
}

impl IpState {
    /// Queues the frame `emit` writes into a free outbox slot (returning its length); `false`
    /// if the outbox is full or `emit` writes nothing. The frame is written in place: a slot
    /// is a full frame, too large to build on the stack and copy.
    fn queue_with(&mut self, emit: impl FnOnce(&mut [u8; CONTROL_LEN]) -> Option<usize>) -> bool {
        let Some(slot) = self.outbox.iter_mut().find(|c| c.is_none()) else {
            return false;
        };
        let control = slot.insert(Control::EMPTY);
        match emit(&mut control.bytes).filter(|&n| n <= CONTROL_LEN) {
            Some(len) => {
                control.len = len;
                true
            }
            None => {
                *slot = None;
                false
            }
        }
    }

    fn queue_arp(&mut self, a: &ArpFrame) -> bool {
        self.queue_with(|out| {
            let frame: &mut [u8; ETH_MIN_FRAME] = (&mut out[..ETH_MIN_FRAME]).try_into().ok()?;
            emit::arp(a, frame);
            Some(ETH_MIN_FRAME)
        })
    }

    /// The [`IpHost::work`] bits of this state.
    fn work(&self) -> u8 {
        let outbox = if self.outbox.iter().any(Option::is_some) {
            WORK_OUTBOX
        } else {
            0
        };
        let resolver = if self.arp.busy() { WORK_RESOLVER } else { 0 };
        outbox | resolver
    }
}

impl IpHost {
    pub(crate) const fn new() -> Self {
        IpHost {
            state: Mutex::new(None),
            ports: Mutex::new([0; MAX_PORTS]),
            counts: [const { AtomicU64::new(0) }; COUNTS],
            udp_offload: AtomicBool::new(false),
            work: AtomicU8::new(0),
        }
    }

    /// Publishes what `st` leaves waiting (call under the state's lock, after a change).
    fn publish(&self, st: &IpState) {
        self.work.store(st.work(), Ordering::Release);
    }

    /// Whether the outbox holds a frame: one load, what a send pays when it does not.
    #[inline]
    pub(crate) fn has_control(&self) -> bool {
        self.work.load(Ordering::Acquire) & WORK_OUTBOX != 0
    }

    /// Whether a transmit path's progress has anything to do (the outbox, a retry or verdict
    /// of ARP, a held send): one load, what a poll pays when it does not.
    #[inline]
    pub(crate) fn has_work(&self) -> bool {
        self.work.load(Ordering::Acquire) != 0
    }

    /// Sets (or, with no plain-UDP endpoint enabled, replaces) the configuration; the ARP
    /// cache starts empty. `udp_offload`: the NIC inserts UDP checksums on transmit.
    pub(crate) fn configure(&self, mac: MacAddr, ip: Ipv4Config, udp_offload: bool) {
        self.udp_offload.store(udp_offload, Ordering::Relaxed);
        let local = Local { mac, ip };
        let mut guard = self.state.lock();
        let st = guard.insert(IpState {
            local,
            arp: Resolver::new(local),
            outbox: [None; OUTBOX],
            unreachable: limit::UNREACHABLE,
        });
        self.publish(st);
    }

    /// How a plain-UDP send's checksum is made: by the NIC where it offers the offload (the
    /// field gets the pseudo-header's sum, and the payload needs no summing), else from the
    /// payload's sum, which `payload_sum` computes only then.
    pub(crate) fn udp_checksum(
        &self,
        payload_sum: impl FnOnce() -> Result<Sum>,
    ) -> Result<UdpChecksum> {
        if self.udp_offload.load(Ordering::Relaxed) {
            Ok(UdpChecksum::Offload)
        } else {
            payload_sum().map(UdpChecksum::Payload)
        }
    }

    /// The configuration, if set.
    pub(crate) fn config(&self) -> Option<Ipv4Config> {
        self.local().map(|l| l.ip)
    }

    /// The host as frames are classified for it, if configured.
    pub(crate) fn local(&self) -> Option<Local> {
        self.state.lock().as_ref().map(|s| s.local)
    }

    /// Binds `port` (0: the lowest free one of the dynamic range) and returns it.
    pub(crate) fn bind_port(&self, port: u16) -> Result<u16> {
        let mut ports = self.ports.lock();
        let port = if port != 0 {
            if ports.contains(&port) {
                return Err(Error::AddrInUse);
            }
            port
        } else {
            (DYNAMIC_PORTS..=u16::MAX)
                .find(|p| !ports.contains(p))
                .ok_or(Error::AddrInUse)?
        };
        let free = ports
            .iter_mut()
            .find(|p| **p == 0)
            .ok_or(Error::Full(crate::error::Capacity::Ports))?;
        *free = port;
        Ok(port)
    }

    /// Releases `port`.
    pub(crate) fn unbind_port(&self, port: u16) {
        let mut ports = self.ports.lock();
        if let Some(p) = ports.iter_mut().find(|p| **p == port) {
            *p = 0;
        }
    }

    /// Counts a frame dropped for `reason`.
    pub(crate) fn count(&self, reason: Discard) {
        self.counts[reason.index()].fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn count_port(&self) {
        self.counts[PORT].fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn count_too_long(&self) {
        self.counts[TOO_LONG].fetch_add(1, Ordering::Relaxed);
    }

    fn count_control(&self) {
        self.counts[CONTROL].fetch_add(1, Ordering::Relaxed);
    }

    /// The drop counts.
    pub(crate) fn drops(&self) -> IpDrops {
        let mut d = IpDrops::default();
        for (i, n) in d.discards.iter_mut().enumerate() {
            *n = self.counts[i].load(Ordering::Relaxed);
        }
        d.port = self.counts[PORT].load(Ordering::Relaxed);
        d.too_long = self.counts[TOO_LONG].load(Ordering::Relaxed);
        d.control = self.counts[CONTROL].load(Ordering::Relaxed);
        d
    }

    /// Takes an ARP packet or an echo request at `now`: the cache learns what RFC 826's merge
    /// teaches, and the answer, if any, goes into the outbox.
    pub(crate) fn take_control(&self, frame: ControlIn<'_>, now: Duration) {
        let mut guard = self.state.lock();
        let Some(st) = guard.as_mut() else {
            return;
        };
        let queued = match frame {
            ControlIn::Arp(a) => match st.arp.receive(&a, now) {
                Some(reply) => st.queue_arp(&reply),
                None => true,
            },
            ControlIn::Echo(e) => {
                let (mac, addr) = (st.local.mac, st.local.ip.addr);
                st.queue_with(|out| emit::echo_reply(&e, mac, addr, out).ok())
            }
        };
        if !queued {
            self.count_control();
        }
        self.publish(st);
    }

    /// Answers the UDP datagram that starts `frame` (as received: its Ethernet header, its
    /// IPv4 header and at least the 8 bytes of its UDP header, which `ip::classify` passed) —
    /// to a port no endpoint of the domain bound — with an ICMP port unreachable (RFC 1122
    /// §4.1.3.1: "If a datagram arrives addressed to a UDP port for which there is no pending
    /// LISTEN call, UDP SHOULD send an ICMP Port Unreachable message"), unless RFC 1122 §3.2.2
    /// forbids it ("An ICMP error message MUST NOT be sent as the result of receiving: ... a
    /// datagram destined to an IP broadcast or IP multicast address, or a datagram sent as a
    /// link-layer broadcast", the other cases of that list being frames `classify` already
    /// refused: fragments, sources that are no single host, ICMP) or the rate limit
    /// (`ip::limit`) says to keep quiet. The datagram is counted (`IpDrops::port`) by the
    /// caller either way.
    pub(crate) fn port_unreachable(&self, frame: &[u8], now: Duration) {
        let Some(&version_ihl) = frame.get(ETH_LEN) else {
            return;
        };
        let ihl = usize::from(version_ihl & 0x0f) * 4;
        let (Some(eth), Some(original)) = (
            frame.get(..ETH_LEN),
            frame.get(ETH_LEN..ETH_LEN + ihl + UDP_LEN),
        ) else {
            return;
        };
        let (Some(src), Some(dst), Some(port)) = (
            original.get(12..16),
            original.get(16..20),
            original.get(ihl + 2..ihl + 4),
        ) else {
            return;
        };
        let (to_mac, link_dst) = (mac_at(&eth[6..]), mac_at(eth));
        let (to, dst) = (ipv4_at(src), ipv4_at(dst));
        let port = u16::from_be_bytes([port[0], port[1]]);
        if link_dst.is_multicast() || self.ports.lock().contains(&port) {
            // A link-layer broadcast; or a port bound by an endpoint whose queue the datagram
            // did not reach (it is there, only not on this queue): not unreachable.
            return;
        }
        let mut guard = self.state.lock();
        let Some(st) = guard.as_mut() else {
            return;
        };
        // Only a datagram to our own unicast address is answered (never a broadcast one).
        if dst != st.local.ip.addr || !st.unreachable.take(now) {
            return;
        }
        let (mac, addr) = (st.local.mac, st.local.ip.addr);
        if !st.queue_with(|out| emit::port_unreachable(original, mac, addr, to_mac, to, out).ok()) {
            self.count_control();
        }
        self.publish(st);
    }

    /// Queues the announcement of our address (RFC 5227 §2.3).
    pub(crate) fn announce(&self) {
        let mut guard = self.state.lock();
        if let Some(st) = guard.as_mut() {
            let a = st.arp.announce();
            if !st.queue_arp(&a) {
                self.count_control();
            }
            self.publish(st);
        }
    }

    /// Starts resolving the next hop of `dst` (an address just inserted in an AV).
    pub(crate) fn prefetch(&self, dst: Ipv4Addr, now: Duration) {
        let mut guard = self.state.lock();
        let Some(st) = guard.as_mut() else {
            return;
        };
        let Ok(crate::ip::NextHop::Unicast(hop)) = st.local.ip.next_hop(dst) else {
            return;
        };
        if let Some(req) = st.arp.prefetch(hop, now) {
            if !st.queue_arp(&req) {
                self.count_control();
            }
        }
        self.publish(st);
    }

    /// Where a send to `dst` goes at `now`: `Ok(Some(mac))` to send at once, `Ok(None)` when
    /// `held` was held (its next hop is being resolved), the item back when nothing can be
    /// held (`Again`), or the next hop's error (`HostUnreach`, `Inval`).
    pub(crate) fn route(
        &self,
        dst: Ipv4Addr,
        held: Option<HeldSend>,
        now: Duration,
    ) -> Result<Option<MacAddr>> {
        let mut guard = self.state.lock();
        let st = guard.as_mut().ok_or(Error::AddrNotAvail)?;
        let hop = match st.local.ip.next_hop(dst)? {
            crate::ip::NextHop::Broadcast => return Ok(Some(MacAddr::BROADCAST)),
            crate::ip::NextHop::Unicast(hop) => hop,
        };
        let Some(item) = held else {
            // No item to hold (an inject): the cache or nothing, and the question asked.
            if let Some(mac) = st.arp.lookup(hop, now) {
                return Ok(Some(mac));
            }
            if let Some(req) = st.arp.prefetch(hop, now) {
                if !st.queue_arp(&req) {
                    self.count_control();
                }
            }
            self.publish(st);
            return Err(Error::Again);
        };
        match st.arp.resolve(hop, item, now) {
            Resolve::Ready(mac, _) => Ok(Some(mac)),
            Resolve::Held(request) => {
                if let Some(req) = request {
                    if !st.queue_arp(&req) {
                        self.count_control();
                    }
                }
                self.publish(st);
                Ok(None)
            }
            Resolve::Full(_) => Err(Error::Again),
        }
    }

    /// Takes every send held for transmit path `path` by the endpoint of owner number `owner`
    /// (`None`: the path is an endpoint's own) out — the endpoint is closing — and hands each
    /// to `each`, which gives its credit and buffers back.
    pub(crate) fn forget_held(
        &self,
        path: usize,
        owner: Option<u8>,
        mut each: impl FnMut(HeldSend),
    ) {
        let mut guard = self.state.lock();
        let Some(st) = guard.as_mut() else {
            return;
        };
        while let Some(h) = st
            .arp
            .take_any_if(|h| h.path == path && h.who.map(|w| w.owner) == owner)
        {
            each(h);
        }
        self.publish(st);
    }
}

/// Writes the 42-byte header of a plain-UDP datagram at the start of `buf`'s span, its UDP
/// checksum field as `checksum` says.
fn write_udp_header(
    buf: &RawBuf,
    src_mac: MacAddr,
    dst_mac: MacAddr,
    src: SockAddrIn,
    dst: SockAddrIn,
    payload_len: usize,
    checksum: UdpChecksum,
) -> Result {
    let mut head = [0u8; UDP_HEADER_LEN];
    UdpHeader {
        src_mac,
        dst_mac,
        src,
        dst,
    }
    .emit(&mut head, payload_len, checksum)
    .map_err(|_| Error::MsgSize)?;
    buf.span.write_bytes(0, &head).map_err(|_| Error::Inval)
}

/// The NIC's part of a plain-UDP datagram's checksum, for the post: the UDP header's checksum
/// field (after the 14-byte Ethernet and 20-byte IPv4 headers), when the checksum is offloaded.
pub(crate) fn udp_offload_request(checksum: UdpChecksum) -> Option<TxChecksum> {
    matches!(checksum, UdpChecksum::Offload).then_some(UDP_TX_CHECKSUM)
}

/// Where a plain-UDP datagram's checksum starts and goes: its header follows the Ethernet
/// header and an IPv4 header without options.
const UDP_TX_CHECKSUM: TxChecksum = TxChecksum {
    start: (UDP_HEADER_LEN - 8) as u16,
    offset: TxChecksum::UDP,
};

impl<N: Nic, const D: usize> PathState<'_, N, D> {
    /// A plain-UDP transmit path's progress (module documentation): ARP retries due at `now`,
    /// the outbox, then its held sends — released in order to resolved next hops, or failed
    /// (`FI_EHOSTUNREACH`) where resolution gave up. Returns the outcomes given to `sink` and
    /// the errors among them (for the counter). An idle host costs one load. Out of line: the
    /// read path's poll calls it for plain-UDP transmit paths only, and must not grow for it.
    ///
    /// On a shared transmit context's path only the held sends of endpoints that report to
    /// the reading CQ (`ctx.reader`) are released or failed: their credits are that CQ's, and
    /// their errors are its entries.
    #[inline(never)]
    pub(super) fn ip_progress(
        &mut self,
        ctx: &PollCtx<'_>,
        sink: &mut dyn FnMut(Outcome<'_>) -> bool,
        stop: &mut bool,
    ) -> (usize, u64) {
        let Some(ip) = ctx.ip else {
            return (0, 0);
        };
        if !ip.host.has_work() {
            return (0, 0);
        }
        let me = self.index;
        let reader = ctx.reader;
        let mine = |h: &HeldSend| h.path == me && h.who.is_none_or(|w| w.cq == reader);
        let mut guard = ip.host.state.lock();
        let Some(st) = guard.as_mut() else {
            return (0, 0);
        };
        let now = ip.now();
        while let Some(req) = st.arp.next_request(now) {
            if !st.queue_arp(&req) {
                ip.host.count_control();
            }
        }
        let mut rang = self.post_outbox(ip.host, st);
        let (mut given, mut errors) = (0, 0);
        while let Some(h) = st.arp.take_failed_if(mine) {
            given += 1;
            errors += 1;
            count_held_error(&h, ctx);
            *stop |= sink(Outcome::Failed(&held_failed(&h, Error::HostUnreach)));
        }
        let src_mac = st.local.mac;
        while let Some((mac, h)) = st.arp.take_ready_if(mine) {
            let posted = write_udp_header(
                &h.buf,
                src_mac,
                mac,
                h.src,
                h.dst,
                usize::from(h.payload_len),
                h.checksum,
            )
            .and_then(|()| {
                // The hold's credit becomes the post's.
                ctx.cq.release_credit();
                let (segments, n) = h.segments();
                let offload = udp_offload_request(h.checksum);
                let posted = if n == 1 {
                    self.post_send_checksummed(
                        ctx.cq,
                        &segments[..1],
                        h.buf,
                        h.context,
                        h.report,
                        h.who,
                        offload,
                    )
                } else {
                    self.post_send_iov(
                        ctx.cq,
                        &segments[..n],
                        h.buf,
                        h.extra,
                        h.context,
                        h.report,
                        h.who,
                        offload,
                    )
                };
                posted.inspect_err(|_| {
                    let _ = ctx.cq.reserve_credit();
                })
            });
            match posted {
                Ok(()) => rang = true,
                Err(e) => {
                    given += 1;
                    errors += 1;
                    count_held_error(&h, ctx);
                    *stop |= sink(Outcome::Failed(&held_failed(&h, e)));
                }
            }
        }
        ip.host.publish(st);
        drop(guard);
        if rang {
            self.doorbell();
        }
        (given, errors)
    }

    /// A send's part of the progress: the outbox, if it holds anything (one load if not),
    /// posted on this path and the doorbell rung. Nothing here can fail an application's
    /// operation, so a send needs no sink.
    pub(crate) fn drain_outbox(&mut self, host: &IpHost) {
        if !host.has_control() {
            return;
        }
        let mut guard = host.state.lock();
        let Some(st) = guard.as_mut() else {
            return;
        };
        let rang = self.post_outbox(host, st);
        host.publish(st);
        drop(guard);
        if rang {
            self.doorbell();
        }
    }

    /// Posts what the outbox holds, in order, until the path has no room; a frame that cannot
    /// go at all is dropped and counted. Returns whether anything was posted (no doorbell).
    fn post_outbox(&mut self, host: &IpHost, st: &mut IpState) -> bool {
        let mut posted = false;
        for slot in st.outbox.iter_mut() {
            let Some(c) = slot else { continue };
            match self.post_control(c.bytes.get(..c.len).unwrap_or(&[])) {
                Ok(()) => {
                    *slot = None;
                    posted = true;
                }
                // The ring, the op table or the control region is full: the frame waits.
                Err(Error::Again) => break,
                Err(_) => {
                    *slot = None;
                    host.count_control();
                }
            }
        }
        posted
    }

    /// Posts one control frame from a free slot of the path's control region, as an operation
    /// of the control kind: no CQ credit (a full CQ of the application's does not hold it
    /// back), no success reported (pushed `Report::ErrorsOnly` where the device completes in
    /// order, so the driver reclaims it silently), a failure counted when its completion is
    /// taken ([`control_lost`]). No doorbell.
    fn post_control(&mut self, frame: &[u8]) -> Result {
        if self.fault.is_some() {
            return Err(Error::OpBadState);
        }
        if frame.len() > CONTROL_LEN {
            return Err(Error::MsgSize);
        }
        let region = self.bounce.as_ref().ok_or(Error::OpBadState)?;
        // The control region follows the `D` bounce slots, on a plain-UDP endpoint's path.
        let base = D * BOUNCE_SLOT;
        if region.len() < base + CONTROL_REGION {
            return Err(Error::OpBadState);
        }
        let free = self.free_control_slot().ok_or(Error::Again)?;
        let slot = self.table.next_free().ok_or(Error::Again)?;
        let offset = base + free * CONTROL_LEN;
        region.write_bytes(offset, frame);
        let iova = Iova(region.iova().0 + offset as u64);
        let hw = if self.hw_selective {
            Report::ErrorsOnly
        } else {
            Report::Always
        };
        let segment = TxSegment {
            iova,
            len: frame.len() as u16,
        };
        let Queue::Tx(q) = &mut self.queue else {
            return Err(Error::OpBadState);
        };
        q.push(&[segment], Token(slot as u64), hw)
            .map_err(super::post::push_error)?;
        self.table.commit(
            slot,
            Op {
                kind: OpKind::Control,
                buf: RawBuf {
                    span: crate::hal::DmaSpan::EMPTY,
                    iova,
                    len: frame.len() as u32,
                    mr: NO_MR,
                },
                len: frame.len() as u32,
                ..Op::FREE
            },
        );
        Ok(())
    }

    /// A slot of the control region no live control frame uses: each names its slot by its
    /// address. A walk over the live operations — control frames are rare, and the path keeps
    /// no state for them that its read would carry.
    fn free_control_slot(&self) -> Option<usize> {
        let base = self.bounce.as_ref()?.iova().0 + (D * BOUNCE_SLOT) as u64;
        let mut used = [false; CONTROL_SLOTS];
        for k in 0..self.table.live_span() {
            let op = &self.table.ops[(self.table.head + k) % D];
            if op.kind == OpKind::Control {
                let at = op.buf.iova.0.wrapping_sub(base) / CONTROL_LEN as u64;
                if let Some(u) = used.get_mut(at as usize) {
                    *u = true;
                }
            }
        }
        used.iter().position(|u| !u)
    }

    /// The completion of `token` on a transmit path when it names no send: a control frame's
    /// (taken, and counted if it failed), or nothing. Out of line: the read path's poll calls it
    /// and must not grow for it.
    #[cold]
    #[inline(never)]
    pub(super) fn control_done(&mut self, token: Token, ok: bool, ctx: &PollCtx<'_>) {
        if self.table.take(token, OpKind::Control).is_some() && !ok {
            control_lost(ctx.ip);
        }
    }
}

/// Counts a control frame that did not go (the device could not send it, or a flush took it
/// back unsent) in `IpDrops::control`: it is never reported, the application did not post it.
/// Its slot of the control region is free with its op-table slot.
#[cold]
#[inline(never)]
pub(super) fn control_lost(ip: Option<IpCtx<'_>>) {
    if let Some(ip) = ip {
        ip.host.count_control();
    }
}

fn mac_at(b: &[u8]) -> MacAddr {
    let mut m = [0; 6];
    if let Some(src) = b.get(..6) {
        m.copy_from_slice(src);
    }
    MacAddr(m)
}

fn ipv4_at(b: &[u8]) -> Ipv4Addr {
    match b {
        [a, b, c, d, ..] => Ipv4Addr::new(*a, *b, *c, *d),
        _ => Ipv4Addr::UNSPECIFIED,
    }
}

/// Counts a held send's failure in its endpoint's counter on a shared transmit context's path
/// (where each operation names its counter); an endpoint's own path counts it in the poll's
/// tally.
fn count_held_error(h: &HeldSend, ctx: &PollCtx<'_>) {
    if let Some(c) = h
        .who
        .and_then(|w| w.cntr)
        .and_then(|i| ctx.cntrs.counter(i))
    {
        c.complete_err(1);
    }
}

/// The error entry of a held send that cannot go.
fn held_failed(h: &HeldSend, err: Error) -> ErrRecord {
    ErrRecord {
        completion: Completion {
            context: h.context,
            flags: SEND_FLAGS,
            owned: (h.buf.mr != NO_MR).then_some(h.buf),
            extra: h.extra,
            ..Completion::default()
        },
        err,
        olen: 0,
        prov: None,
    }
}

/// What a poll needs of the host: the host and the domain's clock. The clock is read only
/// when the host has something to time (an ARP request due, a control frame, a port
/// unreachable), not on every poll: a read of a plain-UDP CQ with nothing of ARP's pending
/// reads no clock.
#[derive(Clone, Copy)]
pub(crate) struct IpCtx<'a> {
    pub(crate) host: &'a IpHost,
    pub(crate) clock: &'a (dyn Clock + Sync),
}

impl IpCtx<'_> {
    /// The time on the domain's clock.
    pub(crate) fn now(&self) -> Duration {
        self.clock.now()
    }
}
