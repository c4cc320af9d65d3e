//! An open path's state, [`PathState`] (defined in `mod.rs` with the path's other types): what its
//! hardware queue is ([`Queue`]), how an endpoint's path frames ([`Framing`]), what every poll
//! needs of the domain ([`PollCtx`]), the size of a poll's chunk ([`CHUNK`]), and the state's
//! constructors and accessors — binding, interrupts, free slots, the doorbell.

use core::sync::atomic::AtomicUsize;

use super::credit::{Counters, Credits};
use super::gather::{IovRec, IOV_POOL};
use super::multi::{Group, MAX_GROUPS};
use super::op::Op;
use super::sink::Plain;
use super::srx::{SrxEp, SRX_MAX};
use super::{OpTable, PathState, PollTables};
use crate::addr::{AvTables, EpAddr};
use crate::entry::OpContext;
use crate::flags::BindFlags;
use crate::hal::Queue as _;
use crate::hal::{Nic, RxCompletion, Token, TxCompletion};
use crate::proto::Encap;

/// Completions asked of the driver per `poll` call: a stack array, small enough to stay in
/// cache, large enough to amortise the call.
pub(super) const CHUNK: usize = 64;

pub(super) const NO_RX: RxCompletion = RxCompletion {
    token: Token(u64::MAX),
    len: 0,
    status: Ok(()),
    rss: None,
    checksum: crate::hal::RxChecksum::NONE,
};

pub(super) const NO_TX: TxCompletion = TxCompletion {
    token: Token(u64::MAX),
    status: Ok(()),
};

/// The hardware queue of a path.
pub(crate) enum Queue<'n, N: Nic + 'n, const D: usize> {
    Tx(N::Tx<'n, D>),
    Rx(N::Rx<'n, D>),
}

/// How an endpoint's path frames and filters (ringfab's header, [`proto`](crate::proto)). Paths
/// opened without an endpoint carry whole Ethernet frames and filter nothing.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Framing {
    /// The endpoint's own address: source of what it sends, destination it accepts.
    pub(crate) local: EpAddr,
    /// The address vector `FI_SOURCE` resolves senders through.
    pub(crate) av: Option<usize>,
    /// `FI_SOURCE_ERR`: a receive from a sender not in the AV completes in error.
    pub(crate) source_err: bool,
    /// The endpoint's context, for error entries that belong to no operation (a critical
    /// fault of the queue).
    pub(crate) context: OpContext,
    /// How ringfab's header travels (every endpoint of a shared path uses the same), or plain
    /// UDP.
    pub(crate) encap: Encap,
    /// The UDP port of a plain-UDP endpoint (0 on ringfab's encapsulations).
    pub(crate) port: u16,
    /// The domain's IPv4 address when a plain-UDP endpoint was enabled (it cannot change while
    /// one is: `Domain::set_ipv4`); unspecified on ringfab's encapsulations.
    pub(crate) addr: crate::ip::Ipv4Addr,
    /// The subnet's broadcast address of that configuration, which no datagram may come from
    /// (RFC 1122 §3.2.1.3); unspecified where there is none (a /31 or /32) and on ringfab's
    /// encapsulations.
    pub(crate) broadcast: crate::ip::Ipv4Addr,
}

/// What a path is for — one type per kind, each with what only it keeps. The kind decides how
/// the path frames (`framing`), which CQs read it (`serves`) and which poll runs
/// (`PathState::poll`: a shared one holds what belongs to other CQs).
///
/// `repr(u8)`: a tag byte of its own, so that telling the kinds apart (once per poll) is one
/// comparison rather than a test of a niche inside `Framing`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u8)]
#[allow(
    clippy::large_enum_variant,
    reason = "a path is a table slot of fixed size either way, and core may have no allocator \
              to box the shared receive context's endpoints"
)]
pub(crate) enum Kind {
    /// Whole Ethernet frames, no header, filtered by nothing: the raw layer (`crate::path`).
    Raw,
    /// One endpoint's own queue: frames carry ringfab's header.
    Endpoint(Framing),
    /// A shared transmit context's queue: the sends of several endpoints, each reporting to its
    /// own CQ (the engine's "Shared paths").
    SharedTx(Framing),
    /// A shared receive context's queue: its receives, routed by header to the endpoints bound
    /// to it, here by owner number (the engine's "Shared receive contexts"). Its receives hold
    /// no CQ credit until their endpoint is known.
    SharedRx(Framing, [Option<SrxEp>; SRX_MAX]),
}

/// The fast lane of a path's receive poll ([`PathState::poll`](super::PathState::poll)):
/// framed, for the endpoint's context ([`FramedLane::expect`](super::FramedLane::expect)); plain UDP; or
/// neither — on a raw path the raw layer's lane, on an endpoint's the general lane for
/// everything.
#[derive(Clone, Copy)]
pub(super) enum RxLane {
    Framed(u16),
    Plain,
    General,
}

impl Kind {
    /// How the path frames: `None` on a raw path.
    #[inline(always)]
    pub(crate) fn framing(&self) -> Option<&Framing> {
        match self {
            Kind::Raw => None,
            Kind::Endpoint(f) | Kind::SharedTx(f) | Kind::SharedRx(f, _) => Some(f),
        }
    }

    /// A shared context's path: operations of several endpoints, each reporting to its own CQ.
    #[inline(always)]
    pub(crate) fn is_shared(&self) -> bool {
        // Without the feature no path is ever shared (the contexts are refused when opened):
        // saying so lets the compiler leave the shared paths' poll out.
        cfg!(feature = "shared-contexts") && matches!(self, Kind::SharedTx(_) | Kind::SharedRx(..))
    }

    /// The endpoints bound to a shared receive context, by owner number (none elsewhere).
    pub(crate) fn srx_eps(&self) -> &[Option<SrxEp>] {
        match self {
            Kind::SharedRx(_, eps) => eps,
            _ => &[],
        }
    }
}

/// Context every `poll` of a path needs from its domain: the CQs' credits, the address table,
/// the buffers' owners and the counters — values and narrow interfaces, no object.
#[derive(Clone, Copy)]
pub(crate) struct PollCtx<'a> {
    pub(crate) cq: &'a Credits,
    /// `cq`'s index in the domain, and the owner number of the endpoint acting (a cancel or
    /// close on a shared path); 0 elsewhere.
    pub(crate) reader: usize,
    pub(crate) owner: u8,
    /// The domain's tables a poll reads: every CQ's credits (on a shared path credits go back
    /// to the operation's own CQ), the AVs, the registrations' live buffers. One reference,
    /// not a copy of each: a read builds the context on every call.
    pub(crate) tables: &'a PollTables<'a>,
    pub(crate) cntrs: &'a dyn Counters,
    /// The domain's IPv4 host and the time, where it has an IPv4 configuration (plain-UDP
    /// paths use it; nothing else looks).
    pub(crate) ip: Option<super::IpCtx<'a>>,
}

impl<'a> PollCtx<'a> {
    /// Every CQ's credits, at the CQ's index.
    #[inline]
    pub(crate) fn credits(&self) -> &'a [Credits] {
        self.tables.credits()
    }

    /// The domain's address vectors.
    #[inline]
    pub(crate) fn avs(&self) -> AvTables<'a> {
        self.tables.avs()
    }

    /// Live buffers of each registration, at the region's index.
    #[inline]
    pub(crate) fn owners(&self) -> &'a [AtomicUsize] {
        self.tables.owners()
    }
}

impl<'n, N: Nic + 'n, const D: usize> PathState<'n, N, D> {
    /// Bytes of ringfab's header before the payload on this path: 0 on a raw (unframed) one.
    pub(super) fn header_len(&self) -> usize {
        self.kind.framing().map_or(0, |f| f.encap.header_len())
    }

    /// The encapsulation of a framed path (the Ethernet one on a raw path, which parses no header).
    pub(super) fn header_encap(&self) -> Encap {
        self.kind.framing().map_or(Encap::Ethernet, |f| f.encap)
    }

    pub(crate) fn new_tx(q: N::Tx<'n, D>, in_order: bool) -> Self {
        Self::new(Queue::Tx(q), in_order)
    }

    pub(crate) fn new_rx(q: N::Rx<'n, D>, in_order: bool) -> Self {
        Self::new(Queue::Rx(q), in_order)
    }

    fn new(queue: Queue<'n, N, D>, in_order: bool) -> Self {
        PathState {
            queue,
            index: 0,
            table: OpTable::new(),
            cq: None,
            bind: BindFlags::empty(),
            hw_selective: in_order,
            kind: Kind::Raw,
            rx_lane: RxLane::General,
            dropped: 0,
            cntr: None,
            groups: [Group {
                remaining: 0,
                owned: Op::FREE.buf,
            }; MAX_GROUPS],
            fault: None,
            rx_scratch: [NO_RX; CHUNK],
            tx_scratch: [NO_TX; CHUNK],
            plains: [Plain::NONE; CHUNK],
            iov: [IovRec::FREE; IOV_POOL],
            bounce: None,
        }
    }

    /// Binds the path to CQ `cq` for an endpoint, with its framing and counter.
    pub(crate) fn attach(
        &mut self,
        cq: usize,
        flags: BindFlags,
        framing: Framing,
        cntr: Option<usize>,
    ) {
        self.set_binding(Some(cq), flags);
        // The framed lane serves endpoints on the Ethernet encapsulation, the plain-UDP lane
        // those on plain UDP, both without `FI_SOURCE_ERR` (whose unknown senders turn
        // successes into errors: the general lane decides those).
        self.rx_lane = match framing.encap {
            _ if framing.source_err => RxLane::General,
            Encap::Ethernet => RxLane::Framed(framing.local.ctx),
            Encap::PlainUdp if cfg!(feature = "plain-udp") => RxLane::Plain,
            Encap::PlainUdp | Encap::Udp => RxLane::General,
        };
        self.kind = Kind::Endpoint(framing);
        self.cntr = cntr;
    }

    /// Makes a freshly opened path a shared context's (`SharedTx` or `SharedRx` by its
    /// direction): no CQ of its own, every frame reported by the device (the silent-reclaim
    /// inference needs one CQ).
    pub(crate) fn make_shared(&mut self, framing: Framing) {
        self.hw_selective = false;
        // A shared path's poll is its own (`poll_shared`).
        self.rx_lane = RxLane::General;
        self.kind = if self.is_tx() {
            Kind::SharedTx(framing)
        } else {
            Kind::SharedRx(framing, [None; SRX_MAX])
        };
    }

    pub(crate) fn is_tx(&self) -> bool {
        matches!(self.queue, Queue::Tx(_))
    }

    /// Whether CQ `index` reads this path: the one it is bound to, or any on a shared path.
    pub(crate) fn serves(&self, index: usize) -> bool {
        self.cq == Some(index) || self.kind.is_shared()
    }

    /// Operations posted and not yet completed.
    pub(crate) fn live(&self) -> usize {
        self.table.live
    }

    /// Op-table slots free for posting (what `tx_size_left`/`rx_size_left` report; the ring
    /// has at least as many free descriptors for single-segment frames).
    pub(crate) fn free_slots(&self) -> usize {
        D - self.table.tail.wrapping_sub(self.table.head)
    }

    /// Operations of up to `descs` descriptors each that can be posted now, each also taking
    /// a record if `record` (a gather send's of two or more buffers, a multi-receive
    /// buffer's group) — a lower bound whatever they are (fi_endpoint(3)'s
    /// `fi_tx_size_left`: "Depending on the specific details of the subsequently posted
    /// transmit operations (e.g., number of iov entries ...), it may be possible to post
    /// more"): free op-table slots (each descriptor of an operation takes one), free ring
    /// descriptors (an Intel ring keeps one descriptor empty, so it holds one operation fewer
    /// than the table) and free records.
    pub(crate) fn room(&self, descs: usize, record: bool) -> usize {
        let ring = match &self.queue {
            Queue::Tx(q) => q.free(),
            Queue::Rx(q) => q.free(),
        };
        let records = match (&self.queue, record) {
            (_, false) => usize::MAX,
            (Queue::Tx(_), true) => self.iov.iter().filter(|r| !r.used).count(),
            (Queue::Rx(_), true) => self.groups.iter().filter(|g| g.remaining == 0).count(),
        };
        (self.free_slots().min(ring) / descs.max(1)).min(records)
    }

    /// [`room`](Self::room) of the empty path: what `size` (`fi_tx_attr`/`fi_rx_attr`)
    /// promises.
    pub(crate) fn capacity(&self, descs: usize, record: bool) -> usize {
        let ring = match &self.queue {
            Queue::Tx(q) => q.free() + q.pending(),
            Queue::Rx(q) => q.free() + q.pending(),
        };
        let records = match (&self.queue, record) {
            (_, false) => usize::MAX,
            (Queue::Tx(_), true) => IOV_POOL,
            (Queue::Rx(_), true) => MAX_GROUPS,
        };
        (D.min(ring) / descs.max(1)).min(records)
    }

    /// Whether the queue has an interrupt, and the vector it is steered to if the driver says.
    pub(crate) fn interrupt_steering(&self) -> (bool, Option<u16>) {
        match &self.queue {
            Queue::Tx(q) => (q.interrupt().is_some(), q.interrupt_vector()),
            Queue::Rx(q) => (q.interrupt().is_some(), q.interrupt_vector()),
        }
    }

    /// Arms (unmasks) or disarms the queue's interrupt; nothing without one.
    pub(crate) fn set_interrupt(&mut self, armed: bool) {
        match &mut self.queue {
            Queue::Tx(q) => q.set_interrupt(armed),
            Queue::Rx(q) => q.set_interrupt(armed),
        }
    }

    pub(crate) fn set_binding(&mut self, cq: Option<usize>, bind: BindFlags) {
        self.cq = cq;
        self.bind = bind;
    }

    /// Rings the queue's doorbell.
    pub(crate) fn doorbell(&mut self) {
        match &mut self.queue {
            Queue::Tx(q) => q.doorbell(),
            Queue::Rx(q) => q.doorbell(),
        }
        self.table.rung = self.table.tail;
    }

    /// The doorbell after a refused call: rung if posts since the last ring wait for it (an
    /// earlier `FI_MORE`), not otherwise (no tail write for nothing).
    pub(crate) fn ring_deferred(&mut self) {
        if self.table.rung != self.table.tail {
            self.doorbell();
        }
    }

    /// The doorbell of a receive posted without `FI_MORE`: rung now, or left for a later post
    /// or poll while the device has plenty of receives already (see
    /// [`OpTable::RX_DOORBELL_BATCH`](super::OpTable::RX_DOORBELL_BATCH)).
    #[inline]
    pub(crate) fn recv_doorbell(&mut self) {
        if self.table.recv_doorbell_due(false) {
            self.doorbell();
        }
    }
}

impl<const D: usize> super::OpTable<D> {
    /// Receives a receive queue of `D` descriptors may post before its doorbell is rung, when
    /// the device already holds at least [`Self::RX_DEVICE_FLOOR`] of them: the hal's
    /// [`rx_doorbell_batch`](crate::hal::queue::rx_doorbell_batch), a quarter of the ring, at
    /// least 32.
    pub(crate) const RX_DOORBELL_BATCH: usize = crate::hal::queue::rx_doorbell_batch(D);

    /// The receives the device must hold (posted, given to it, not yet seen complete) for a
    /// receive's doorbell to wait ([`Self::RX_DOORBELL_BATCH`]): half the ring, at least 96.
    /// Fewer than a batch wait while at least twice as many are the device's, so a link that
    /// fills every posted receive at once loses at most a third of them (docs/semantics.md,
    /// "When the device sees a receive").
    pub(crate) const RX_DEVICE_FLOOR: usize = if D / 2 > 96 { D / 2 } else { 96 };

    /// Whether the receives posted since the last doorbell must be given to the device now:
    /// a batch's worth of them, or the device holding fewer than [`Self::RX_DEVICE_FLOOR`].
    /// After a poll (`after_poll`) only if some wait (the device's count has fallen as frames
    /// arrived; nothing new is posted).
    #[inline(always)]
    pub(super) fn recv_doorbell_due(&self, after_poll: bool) -> bool {
        let waiting = self.tail.wrapping_sub(self.rung);
        if after_poll && waiting == 0 {
            return false;
        }
        waiting >= Self::RX_DOORBELL_BATCH
            || self.live.saturating_sub(waiting) < Self::RX_DEVICE_FLOOR
    }
}
