//! Paths: one hardware queue and the table of the operations posted on it.
//!
//! A *path* is one transmit or receive queue of the NIC (`N::Tx<'n, D>` / `N::Rx<'n, D>`) plus
//! the core's op table, `[Op; D]`, indexed by the [`Token`] the driver carries: the token *is*
//! the slot index, so a completion finds its operation without a search. Slots are handed out
//! in ring order (`tail`), and `head` follows the oldest operation still outstanding. The driver
//! returns every token exactly once, so a slot is free again when its completion is taken; on a
//! device that completes out of order a freed slot in the middle waits until `head` passes it
//! (posting returns `Again` meanwhile), which costs capacity, never correctness.
//!
//! A path is guarded by one `spin::Mutex`, taken once per CQ read and once per posting batch
//! (the slot in `PathSlot`). The CQ a path reports to is also kept in an atomic outside the
//! lock so that a CQ's read can skip paths bound elsewhere without locking them.
//!
//! # Selective completion in hardware
//!
//! An operation that needs no successful completion (`FI_SELECTIVE_COMPLETION` bind without
//! `FI_COMPLETION`) is pushed with [`Report::ErrorsOnly`] when the device completes in order
//! ([`Capabilities::in_order_completion`](crate::hal::Capabilities::in_order_completion)): the
//! driver then reclaims it silently, and the core learns that it is done only from the driver's
//! [`pending`](crate::hal::Queue::pending) count. After each poll, the oldest live operations beyond that
//! count are the silently reclaimed ones (in order, every such frame is older than any frame the
//! driver still holds), and their CQ credits are released. On an out-of-order device that
//! inference is unsound, so every frame is pushed with [`Report::Always`] and the unrequested
//! successes are dropped in software.
//!
//! # Critical faults
//!
//! A driver reports a queue the device no longer honours — removed, reset, queue disabled,
//! needs reset — as a sticky [`QueueFault`] ([`TxQueue::fault`](crate::hal::Queue::fault)), found by its own stall check
//! inside `poll`. A poll that comes back short asks for it (a field read, once per poll, never
//! per completion); the first time it is there the path *fails* (`PathState::fail`): every
//! outstanding operation is discarded without a completion (credits released, owned buffers
//! returned to their regions), one error entry reports the fault on the bound CQ, and every
//! later post returns `OpBadState`. The fault is published in the slot
//! (`PathSlot::fault`) for the endpoint, which reads it without the path lock.
//!
//! # Shared paths
//!
//! A shared transmit context (`crate::stx`) is one path carrying the sends of several
//! endpoints, each reporting to its own CQ. Every operation records its CQ, its counter and
//! its endpoint's owner number; each of those CQs polls the path (`PathSlot::cq_mask`). A
//! read takes the reader's *held* operations first, oldest first — finished operations
//! another CQ's read found and left in their op-table slots (`OpTable::held`) — then polls the
//! ring, holding what belongs to other CQs. So each endpoint's completions keep their order,
//! no read takes another CQ's lock, and nothing needs more room than the ring's depth.
//! Successes nobody asked for are settled at once (credit back to the operation's own CQ),
//! counters count each operation when it is found, whoever finds it, and every frame is pushed
//! `Report::Always` (the silent-reclaim inference assumes one CQ). The read's fast lane is
//! off on a shared path. Closing one endpoint flushes the queue, discards that endpoint's
//! operations and posts the others back into their slots (`discard_owner`); `cancel` does
//! the same for one operation of the acting endpoint (`cancel_shared`).
//!
//! # Shared receive contexts
//!
//! A shared receive context (`crate::srx`) is a shared path whose receives the application
//! posts to the context; which endpoint a frame is for — and so its CQ — is known only from
//! the frame's header. Such a receive holds no CQ credit while posted; when its frame arrives
//! it is routed (its owner and CQ recorded in its slot) and takes a credit of that CQ when the
//! CQ's read delivers it — a CQ with no free credit leaves it held, so nothing is lost and
//! nothing overruns. A frame for no bound endpoint, or one the device reports bad (its header
//! cannot be trusted), is dropped and its buffer posted again, as a foreign frame is on an
//! endpoint's own queue. An endpoint that leaves puts the receives its frames filled, unread,
//! back into the ring: they are the context's buffers.
//!
//! # The raw layer
//!
//! A path opened without an endpoint ([`Domain::open_rx`], [`Domain::open_tx`]) and bound to a
//! CQ ([`CompletionQueue::bind`](crate::cq::CompletionQueue::bind)) is the layer below
//! endpoints: whole Ethernet frames in DMA memory the application keeps, posted in batches with
//! [`Path::post_recvs`] and [`Path::post_sends`] (one lock and one doorbell per batch), read
//! through the same CQ — credits, order, errors, selective completion and `cancel_all` as for
//! an endpoint, but no header, no addressing, no owned buffers: an entry carries the context
//! and, for a receive, the frame's length. It is what the CQ was first built and tested on;
//! endpoints post through the same op table.

use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering};

use spin::Mutex;

use crate::av::{AvRef, AvTables, EpAddr, FiAddr};
use crate::cntr::Counter;
use crate::cq::entry::{BufAddr, Completion, OpContext};
use crate::cq::slot::CqSlot;
use crate::cq::strerror::ProvError;
use crate::domain::Domain;
use crate::flags::{BindFlags, CompletionFlags, OpFlags};
use crate::hal::Queue as _;
use crate::hal::{
    Iova, Nic, PushError, QueueFault, Report, RxBuffer, RxCompletion, RxError, RxQueue, Token,
    TxCompletion, TxError, TxQueue, TxSegment,
};
use crate::mr::{forget_posted, owner_of, Buf, MrSlot, RawBuf, IOV_MAX};
use crate::proto::{self, Encap, Header};
use crate::{Error, Result};

/// The `cq` value of a path bound to no CQ.
pub(crate) const NO_CQ: usize = usize::MAX;

/// Completions asked of the driver per `poll` call: a stack array, small enough to stay in
/// cache, large enough to amortise the call.
const CHUNK: usize = 64;

const NO_RX: RxCompletion = RxCompletion {
    token: Token(u64::MAX),
    len: 0,
    status: Ok(()),
    rss: None,
};
const NO_TX: TxCompletion = TxCompletion {
    token: Token(u64::MAX),
    status: Ok(()),
};

/// What an op-table slot holds.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum OpKind {
    Free,
    Send,
    Recv,
}

/// The fast lane a success of a live operation may take, decided once, when it is posted
/// ([`OpTable::commit`]), so that a lane tests one field per completion ([`LaneKey`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u8)]
enum Lane {
    /// None: the general lane decides (also every free slot).
    General,
    /// A [`Plain`] send: requested, no owned buffer.
    Send,
    /// A [`Plain`] receive of the raw layer: requested, no multi-receive group, no owned
    /// buffer, and the whole DMA buffer accepted — so the driver's own check of the frame
    /// length against the buffer (the `RxCompletion::len` contract) is the only one needed.
    Recv,
    /// An endpoint's receive into an owned [`Buf`]: requested, no multi-receive group, a CPU
    /// address, at least [`proto::MAX_HEADER_LEN`] bytes (so the header can be read in place)
    /// and all of it accepted but an Ethernet-encapsulated header (so a payload that fits the
    /// frame the driver checked against the buffer fits what was accepted: no `FI_ETRUNC`).
    /// The framed lane ([`fast_lane_framed`]) checks ringfab's header itself. A buffer longer
    /// than the queue's buffer size (of which the endpoint accepts only the queue's) takes
    /// the general lane.
    OwnedRecv,
}

/// [`Op::plain`]: the operation's [`Lane`] in the low byte and its buffer's region above it, so
/// that a lane tests "live, mine, and (framed lane) of the region this poll hands back" in one
/// comparison. The raw layer's operations have no region ([`NO_MR`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct LaneKey(u32);

impl LaneKey {
    /// No fast lane (and every free slot).
    const GENERAL: LaneKey = LaneKey(Lane::General as u32);

    const fn of(lane: Lane, mr: u16) -> LaneKey {
        LaneKey(lane as u32 | (mr as u32) << 8)
    }
}

/// The lane of a receive of `buf` that accepts `len` bytes, posted alone (no multi-receive
/// group), whose success is reported if `report` ([`Lane::Recv`], [`Lane::OwnedRecv`]).
#[inline(always)]
fn recv_lane(report: bool, buf: &RawBuf, len: u32) -> LaneKey {
    let accepts_all_but_a_header =
        || (proto::MAX_HEADER_LEN..=len as usize + proto::HEADER_LEN).contains(&(buf.len as usize));
    if !report {
        LaneKey::GENERAL
    } else if buf.mr == NO_MR {
        if len == buf.len {
            LaneKey::of(Lane::Recv, NO_MR)
        } else {
            LaneKey::GENERAL
        }
    } else if buf.cpu != 0 && accepts_all_but_a_header() {
        LaneKey::of(Lane::OwnedRecv, buf.mr)
    } else {
        LaneKey::GENERAL
    }
}

impl Lane {
    /// The lane of a plain completion of `kind` on the raw layer.
    const fn plain(kind: OpKind) -> Lane {
        match kind {
            OpKind::Send => Lane::Send,
            OpKind::Recv => Lane::Recv,
            OpKind::Free => Lane::General,
        }
    }
}

/// One posted operation: what the completion needs to be written without asking anyone.
///
/// Aligned to a cache line, which makes its size 64 (it is 48): the read path's lanes find an
/// operation at `slot << 6` rather than `slot * 48` (a shift instead of two instructions per
/// entry), and no operation straddles two lines.
#[derive(Clone, Copy, Debug)]
#[repr(align(64))]
pub(crate) struct Op {
    kind: OpKind,
    context: OpContext,
    /// The buffer: for a receive the whole DMA buffer, for a send the frame's first segment.
    /// `buf.mr` is [`NO_MR`] unless it is an owned [`Buf`] to hand back; `buf.cpu` is 0 when
    /// the poster gave no CPU address (only unframed paths accept that).
    buf: RawBuf,
    /// Posted length: for a receive, the bytes the application accepts (≤ the DMA buffer).
    len: u32,
    /// Whether a *successful* completion was requested (errors are always reported).
    report: bool,
    /// The multi-receive group the operation is a slot of, or [`NO_GROUP`].
    group: u8,
    /// Which of the read path's fast lanes a success of this operation may take ([`Lane`],
    /// with the buffer's region: [`LaneKey`]); [`LaneKey::GENERAL`] whenever the slot is free.
    /// Set by [`OpTable::commit`], cleared with `kind` ([`Op::free`]): what a fast lane tests
    /// for "live, of this kind, mine".
    plain: LaneKey,
    /// On a shared path ([`PathState::shared`]): the CQ the operation reports to, the
    /// endpoint that posted it (its owner number on the shared context) and its counter
    /// ([`NO_CNTR`] for none). Unused elsewhere (the path's binding says).
    cq: u8,
    owner: u8,
    cntr: u8,
    /// A gather send's record in the path's pool (`PathState::iov`), or [`NO_IOV`].
    iov: u8,
}

/// `Op::iov` of an operation that is not a gather send.
const NO_IOV: u8 = u8::MAX;

/// Gather sends in flight whose further buffers a path keeps (posting another is `Again`):
/// a small pool rather than room in every op-table slot.
pub(crate) const IOV_POOL: usize = 8;

/// A gather send in flight: its segments (to post it again after a flush) and the buffers
/// after the first (the first is the operation's own `buf`).
#[derive(Clone, Copy, Debug)]
struct IovRec {
    used: bool,
    segs: [TxSegment; IOV_MAX + 1],
    nsegs: u8,
    extra: [Option<RawBuf>; IOV_MAX - 1],
}

impl IovRec {
    const FREE: IovRec = IovRec {
        used: false,
        segs: [TxSegment {
            iova: Iova(0),
            len: 0,
        }; IOV_MAX + 1],
        nsegs: 0,
        extra: [None; IOV_MAX - 1],
    };
}

/// `Op::cntr` of an operation counted by no counter.
const NO_CNTR: u8 = u8::MAX;

/// Who posts an operation on a shared path: the CQ it reports to, the endpoint's bind flags,
/// owner number and counter. ([`PathState::post_send`] on an ordinary path takes them from
/// the path's binding.)
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Poster {
    pub(crate) cq: usize,
    pub(crate) bind: BindFlags,
    pub(crate) owner: u8,
    pub(crate) cntr: Option<usize>,
}

/// What the general lane's plain take needs of a driver's completion, receive or send.
trait DriverCompletion {
    /// The kind of operation it completes, and the flags of its entry.
    const KIND: OpKind;
    const FLAGS: CompletionFlags;
    fn token(&self) -> Token;
    fn ok(&self) -> bool;
    /// The entry's length and the bytes a counter counts, for an operation of `op_len`.
    fn lengths(&self, header: usize, op_len: u32) -> (usize, u64);
}

impl DriverCompletion for RxCompletion {
    const KIND: OpKind = OpKind::Recv;
    const FLAGS: CompletionFlags = RECV_FLAGS;
    #[inline(always)]
    fn token(&self) -> Token {
        self.token
    }
    #[inline(always)]
    fn ok(&self) -> bool {
        self.status.is_ok()
    }
    #[inline(always)]
    fn lengths(&self, _header: usize, _op_len: u32) -> (usize, u64) {
        (self.len as usize, u64::from(self.len))
    }
}

impl DriverCompletion for TxCompletion {
    const KIND: OpKind = OpKind::Send;
    const FLAGS: CompletionFlags = SEND_FLAGS;
    #[inline(always)]
    fn token(&self) -> Token {
        self.token
    }
    #[inline(always)]
    fn ok(&self) -> bool {
        self.status.is_ok()
    }
    /// A send's entry has no length; its payload still counts for the counter.
    #[inline(always)]
    fn lengths(&self, header: usize, op_len: u32) -> (usize, u64) {
        (0, tx_payload(header, op_len) as u64)
    }
}

/// `Op::group` of an operation that is not part of a multi-receive buffer.
const NO_GROUP: u8 = u8::MAX;

/// Multi-receive buffers a path can have posted at once.
pub(crate) const MAX_GROUPS: usize = 8;

/// One multi-receive buffer (`FI_MULTI_RECV`): posted as several slots (one descriptor each),
/// released — handed back with `FI_MULTI_RECV` — with the completion of its last slot.
#[derive(Clone, Copy, Debug)]
struct Group {
    /// Slots still outstanding; 0 = the group entry is free.
    remaining: u32,
    /// The whole buffer, handed back with the last slot's completion.
    owned: RawBuf,
}

/// What taking a slot out of its group means for its completion.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum GroupExit {
    /// Not a multi-receive slot.
    None,
    /// A slot, not the last: its completion points into the buffer.
    Member,
    /// The last slot: its completion also releases the buffer.
    Last(RawBuf),
}

/// `RawBuf::mr` of a buffer that is not an owned [`Buf`].
pub(crate) const NO_MR: u16 = u16::MAX;

impl Op {
    const FREE: Op = Op {
        kind: OpKind::Free,
        context: OpContext::NULL,
        buf: RawBuf {
            cpu: 0,
            iova: Iova(0),
            len: 0,
            mr: NO_MR,
        },
        len: 0,
        report: false,
        group: NO_GROUP,
        plain: LaneKey::GENERAL,
        cq: 0,
        owner: 0,
        cntr: NO_CNTR,
        iov: NO_IOV,
    };

    fn owned(&self) -> Option<RawBuf> {
        (self.buf.mr != NO_MR).then_some(self.buf)
    }

    /// The fast lane a success of this operation may take ([`Lane`]).
    fn lane(&self) -> LaneKey {
        match self.kind {
            _ if self.group != NO_GROUP => LaneKey::GENERAL,
            OpKind::Recv => recv_lane(self.report, &self.buf, self.len),
            OpKind::Send if self.report && self.buf.mr == NO_MR => LaneKey::of(Lane::Send, NO_MR),
            _ => LaneKey::GENERAL,
        }
    }

    /// Marks the slot free (only `kind` and `plain` say so; the rest is overwritten by the
    /// next commit).
    #[inline(always)]
    fn free(&mut self) {
        self.kind = OpKind::Free;
        self.plain = LaneKey::GENERAL;
    }
}

/// A finished operation's status, held in its slot for its CQ (shared paths).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Held {
    Tx(core::result::Result<(), TxError>),
    Rx {
        len: u32,
        status: core::result::Result<(), RxError>,
    },
}

/// The op table of a path of depth `D`: slots handed out in ring order.
struct OpTable<const D: usize> {
    ops: [Op; D],
    /// On a shared path: the status of a finished operation that belongs to another CQ than
    /// the one whose read found it, kept until that CQ reads (its slot stays live).
    held: [Option<Held>; D],
    /// Slots with a `held` status: 0 lets a read skip the walk over the live span.
    holding: usize,
    /// Oldest slot still live (a wrapping count; the slot is `head % D`).
    head: usize,
    /// Next slot to hand out.
    tail: usize,
    /// Live slots.
    live: usize,
}

impl<const D: usize> OpTable<D> {
    const fn new() -> Self {
        OpTable {
            ops: [Op::FREE; D],
            held: [None; D],
            holding: 0,
            head: 0,
            tail: 0,
            live: 0,
        }
    }

    /// The slot the next operation would take, if it is free.
    fn next_free(&self) -> Option<usize> {
        let slot = self.tail % D;
        (self.tail.wrapping_sub(self.head) < D && self.ops[slot].kind == OpKind::Free)
            .then_some(slot)
    }

    /// Commits `op` into `slot`, its lane decided here ([`Lane`]).
    fn commit(&mut self, slot: usize, op: Op) {
        self.commit_as(
            slot,
            Op {
                plain: op.lane(),
                ..op
            },
        );
    }

    /// Commits `op` into `slot` with the lane its poster decided (`op.plain`, as
    /// [`Op::lane`] would).
    #[inline(always)]
    fn commit_as(&mut self, slot: usize, op: Op) {
        self.ops[slot] = op;
        self.tail = self.tail.wrapping_add(1);
        self.live += 1;
    }

    /// Takes the operation of `token` if it is live and of `kind`; a token that names no such
    /// operation (a driver bug) gives `None` rather than a panic.
    fn take(&mut self, token: Token, kind: OpKind) -> Option<Op> {
        let slot = usize::try_from(token.0).ok().filter(|&s| s < D)?;
        if self.ops[slot].kind != kind {
            return None;
        }
        let op = self.ops[slot];
        self.ops[slot].free();
        if self.held[slot].take().is_some() {
            self.holding -= 1;
        }
        self.live -= 1;
        self.advance_head();
        Some(op)
    }

    /// The general lane's run of plain successes: takes the leading run of `cs` that are plain
    /// successes — `Ok`, naming a live operation of `C::KIND` whose success is [`plain`](Op::plain)
    /// — writing each as a [`Plain`] into `out` and counting it in `tally` (bytes: a receive's
    /// frame payload; a send's payload, without the `header` bytes of ringfab's header on a framed
    /// path). Stops at the first completion that is anything else, changing nothing for it (the
    /// caller takes it the general way). Frees the slots but leaves `head` to
    /// [`advance_head`](Self::advance_head), once per batch; copies three fields per operation, not
    /// the whole `Op`.
    #[inline(always)]
    fn take_plain<C: DriverCompletion>(
        &mut self,
        cs: &[C],
        header: usize,
        out: &mut [Plain; CHUNK],
        tally: &mut Tally,
    ) -> usize {
        let mut k = 0;
        let mut bytes = 0;
        for (c, p) in cs.iter().zip(out.iter_mut()) {
            let Some(op) = self.plain_op(c.token(), C::KIND, c.ok()) else {
                break;
            };
            op.free();
            let (len, counted) = c.lengths(header, op.len);
            *p = Plain {
                context: op.context,
                flags: C::FLAGS,
                len,
            };
            bytes += counted;
            k += 1;
        }
        self.live -= k;
        tally.ok += k as u64;
        tally.bytes += bytes;
        k
    }

    /// The operation `token` names if the completion is `ok`, the operation is live, of `kind`
    /// and [`plain`](Op::plain).
    #[inline(always)]
    fn plain_op(&mut self, token: Token, kind: OpKind, ok: bool) -> Option<&mut Op> {
        let slot = usize::try_from(token.0).ok().filter(|&s| s < D)?;
        let op = &mut self.ops[slot];
        (ok && op.plain == LaneKey::of(Lane::plain(kind), NO_MR)).then_some(op)
    }

    /// Marks the live operation of `slot` finished with `status`, for its own CQ's read.
    fn hold(&mut self, slot: usize, status: Held) {
        if self.held[slot].replace(status).is_none() {
            self.holding += 1;
        }
    }

    /// Moves `head` past the slots freed since (what [`take`](Self::take) does each time).
    #[inline(always)]
    fn advance_head(&mut self) {
        while self.head != self.tail && self.ops[self.head % D].kind == OpKind::Free {
            self.head = self.head.wrapping_add(1);
        }
    }

    /// Slots from the oldest live operation to the newest (free ones in between included).
    fn live_span(&self) -> usize {
        self.tail.wrapping_sub(self.head)
    }

    /// The oldest live operation.
    fn oldest(&self) -> Option<(usize, Op)> {
        (self.live > 0).then(|| (self.head % D, self.ops[self.head % D]))
    }
}

/// An error completion on its way to the application, with everything `readerr` reports.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct ErrRecord {
    pub(crate) completion: Completion,
    pub(crate) err: Error,
    pub(crate) olen: usize,
    pub(crate) prov: Option<ProvError>,
}

/// A success with nothing but a context, flags and a length: no buffer pointer, data, tag,
/// source or owned buffer — the common case, which the read path fills an entry from
/// directly, without building a [`Completion`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Plain {
    pub(crate) context: OpContext,
    pub(crate) flags: CompletionFlags,
    pub(crate) len: usize,
}

impl Plain {
    const NONE: Plain = Plain {
        context: OpContext::NULL,
        flags: CompletionFlags::empty(),
        len: 0,
    };

    /// The same completion, whole (for the aux queue).
    pub(crate) fn completion(self) -> Completion {
        Completion {
            context: self.context,
            flags: self.flags,
            len: self.len,
            ..Completion::default()
        }
    }
}

/// What one hardware completion becomes, as handed to a sink: by reference, so that the
/// hot path builds each completion once, in place, and never moves it.
#[derive(Clone, Copy)]
pub(crate) enum Outcome<'a> {
    /// A successful completion the application asked for, with nothing but what [`Plain`]
    /// holds.
    Plain(Plain),
    /// A successful completion the application asked for.
    Done(&'a Completion),
    /// An error completion, for the error queue.
    Failed(&'a ErrRecord),
}

/// Where [`PathState::poll`] hands what it completes.
///
/// The reader's array is open to the poll as a *window* ([`Window`]): successes found in the
/// driver's loop are written there directly ([`write`](Self::write), and on an endpoint's path
/// their sources and buffers beside them) and accepted with [`commit`](Self::commit) or
/// [`commit_filled`](Self::commit_filled) — no intermediate record, no call per entry.
/// Everything else goes through [`plain`](Self::plain) (runs of plain successes found off the
/// fast path) and [`outcome`](Self::outcome), which return `true` to stop after the current
/// chunk. `'s` is the storage's lifetime: the owned buffers a window hands back borrow it.
pub(crate) trait Sink<'s> {
    /// What a plain success becomes in the reader's array.
    type Entry;
    /// The entries the poll may write directly, the reader's next free ones (empty when the
    /// reader takes none that way), with the reader's arrays of sources and buffers.
    fn window(&mut self) -> Window<'_, 's, Self::Entry>;
    /// Writes plain success `p` as `entry`.
    fn write(entry: &mut Self::Entry, p: Plain);
    /// Accepts the first `k` entries of the window, written with [`write`](Self::write); they
    /// have no source and no buffer.
    fn commit(&mut self, k: usize);
    /// Accepts the first `k` entries of the window, written with [`write`](Self::write), whose
    /// sources and buffers (where the window has them) the poll wrote too.
    fn commit_filled(&mut self, k: usize);
    /// A run of plain successes, in order.
    fn plain(&mut self, run: &[Plain]) -> bool;
    /// Any other outcome.
    fn outcome(&mut self, o: Outcome<'_>) -> bool;
}

/// The part of a reader's arrays a poll may write directly (see [`Sink`]): `entries`, and
/// beside them the entries' sources (`readfrom`) and owned buffers (`read_owned`) when the
/// reader takes them. `whole` is false when the reader wants something a window cannot hold
/// (every buffer of a gather send): then only entries without any buffer may be written.
pub(crate) struct Window<'w, 's, E> {
    pub(crate) entries: &'w mut [E],
    pub(crate) src: Option<&'w mut [FiAddr]>,
    pub(crate) bufs: Option<&'w mut [Option<Buf<'s>>]>,
    pub(crate) whole: bool,
}

impl<E> Window<'_, '_, E> {
    /// A window the poll writes nothing into.
    pub(crate) fn closed() -> Self {
        Window {
            entries: &mut [],
            src: None,
            bufs: None,
            whole: false,
        }
    }
}

/// A closure is a sink without a window.
impl<'s, T: FnMut(Outcome<'_>) -> bool> Sink<'s> for T {
    type Entry = Plain;

    fn window(&mut self) -> Window<'_, 's, Plain> {
        Window::closed()
    }

    fn write(entry: &mut Plain, p: Plain) {
        *entry = p;
    }

    fn commit(&mut self, _k: usize) {}

    fn commit_filled(&mut self, _k: usize) {}

    #[inline(always)]
    fn plain(&mut self, run: &[Plain]) -> bool {
        let mut stop = false;
        for p in run {
            stop |= self(Outcome::Plain(*p));
        }
        stop
    }

    #[inline(always)]
    fn outcome(&mut self, o: Outcome<'_>) -> bool {
        self(o)
    }
}

/// The hardware queue of a path.
pub(crate) enum Queue<'n, N: Nic + 'n, const D: usize> {
    Tx(N::Tx<'n, D>),
    Rx(N::Rx<'n, D>),
}

/// How an endpoint's path frames and filters (ringfab's header, [`proto`]). Paths opened
/// without an endpoint carry whole Ethernet frames and filter nothing.
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
    /// How ringfab's header travels (every endpoint of a shared path uses the same).
    pub(crate) encap: Encap,
}

/// Context every `poll` of a path needs from its domain.
pub(crate) struct PollCtx<'a, N: Nic> {
    pub(crate) cq: &'a CqSlot,
    /// `cq`'s index in the domain, and the owner number of the endpoint acting (a cancel or
    /// close on a shared path); 0 elsewhere.
    pub(crate) reader: usize,
    pub(crate) owner: u8,
    /// Every CQ of the domain: on a shared path credits go back to the operation's own CQ.
    pub(crate) cqs: &'a [CqSlot],
    pub(crate) avs: AvTables<'a>,
    pub(crate) mrs: &'a [MrSlot<N>],
    pub(crate) cntrs: &'a [&'a Counter<N::Wait>],
}

impl<N: Nic> Clone for PollCtx<'_, N> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<N: Nic> Copy for PollCtx<'_, N> {}

/// What one poll completed, for the path's counter: added once per poll, not per operation.
#[derive(Default)]
struct Tally {
    ok: u64,
    bytes: u64,
    err: u64,
}

impl Tally {
    fn success(&mut self, len: usize) {
        self.ok += 1;
        self.bytes += len as u64;
    }

    /// Adds the tally to counter `cntr` of the domain, if the path has one.
    fn apply<N: Nic>(&self, ctx: &PollCtx<'_, N>, cntr: Option<usize>) {
        let Some(c) = cntr.and_then(|i| ctx.cntrs.get(i)) else {
            return;
        };
        if self.ok > 0 {
            c.complete_ok(self.ok, self.bytes);
        }
        if self.err > 0 {
            c.complete_err(self.err);
        }
    }
}

/// An open path: its queue, its op table and its binding.
pub(crate) struct PathState<'n, N: Nic + 'n, const D: usize> {
    pub(crate) queue: Queue<'n, N, D>,
    table: OpTable<D>,
    /// The CQ this path reports to.
    pub(crate) cq: Option<usize>,
    /// The bind flags (`SELECTIVE_COMPLETION` matters).
    bind: BindFlags,
    /// Whether unrequested transmit successes may be left to the hardware (in-order device).
    hw_selective: bool,
    /// Set by an endpoint: frames carry ringfab's header.
    pub(crate) framing: Option<Framing>,
    /// Frames received and dropped because they were not well-formed ringfab frames for this
    /// endpoint (their buffers were posted again).
    pub(crate) dropped: u64,
    /// The counter (an index into the domain's counters) this path's completions count into.
    pub(crate) cntr: Option<usize>,
    /// Multi-receive buffers posted on this path.
    groups: [Group; MAX_GROUPS],
    /// The critical fault that failed the path (module documentation, "Critical faults").
    pub(crate) fault: Option<QueueFault>,
    /// Where the driver's `poll` writes completions: kept here, not on the stack, so that a
    /// poll does not zero a fresh array each time (whatever is in it is overwritten first).
    rx_scratch: [RxCompletion; CHUNK],
    tx_scratch: [TxCompletion; CHUNK],
    /// Where the fast path puts a run of plain successes for the sink (likewise reused).
    plains: [Plain; CHUNK],
    /// A shared context's path: operations of several endpoints, each reporting to its own
    /// CQ (module documentation, "Shared paths").
    pub(crate) shared: bool,
    /// A shared *receive* context's path: the endpoints bound to it, by owner number. Its
    /// receives hold no CQ credit until their endpoint is known (from the frame).
    pub(crate) srx: [Option<SrxEp>; SRX_MAX],
    /// Gather sends in flight (`Op::iov`).
    iov: [IovRec; IOV_POOL],
    /// A transmit path of endpoints: one inject bounce slot per op-table slot (an inject's
    /// frame, a gather send's header), free exactly as long as that slot is. Declared after
    /// `queue`, so it is freed only once the queue that could read it has stopped — and it
    /// lives with the path, not with an endpoint handle that could be dropped first.
    pub(crate) bounce: Option<N::Dma>,
}

/// Endpoints one shared context takes (owner numbers are bits of a `u32`).
pub(crate) const SRX_MAX: usize = crate::stx::MAX_SHARED_ENDPOINTS;

/// `Op::owner` of a shared receive not yet routed to an endpoint.
const NO_OWNER: u8 = u8::MAX;

/// An endpoint bound to a shared receive context, as the read path routes frames to it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct SrxEp {
    /// Its address (the context's receive address, its own context number).
    pub(crate) local: EpAddr,
    /// Its CQ and counter (`NO_CNTR` for none).
    pub(crate) cq: u8,
    pub(crate) cntr: u8,
    /// Its binding is `FI_SELECTIVE_COMPLETION`.
    pub(crate) selective: bool,
    pub(crate) source_err: bool,
    pub(crate) context: OpContext,
}

/// One slot of the domain's hardware-queue table (in its [`Storage`](crate::storage::Storage)).
pub(crate) struct PathSlot<'n, N: Nic + 'n, const D: usize> {
    pub(crate) state: Mutex<Option<PathState<'n, N, D>>>,
    /// The bound CQ's index, or [`NO_CQ`]; written under the lock, read without it.
    pub(crate) cq: AtomicUsize,
    /// The path state's `fault` as its [`QueueFault::code`] (0: none), published for readers
    /// that do not take the lock (an endpoint checking whether it is still enabled).
    fault: AtomicU8,
    /// A shared path: bit `i` set when CQ `i` (< 64) may find work in it.
    pub(crate) cq_mask: AtomicU64,
    /// A shared path: the owner numbers of the endpoints bound to it, one bit each.
    pub(crate) owners: AtomicU32,
    /// A shared path whose context was dropped while endpoints were bound: the last one to
    /// leave closes it.
    pub(crate) orphaned: AtomicBool,
}

impl<'n, N: Nic + 'n, const D: usize> PathSlot<'n, N, D> {
    /// A free slot.
    #[allow(
        clippy::declare_interior_mutable_const,
        reason = "a fresh slot per use is the point: the storage's table is built of them"
    )]
    pub(crate) const EMPTY: Self = PathSlot {
        state: Mutex::new(None),
        cq: AtomicUsize::new(NO_CQ),
        fault: AtomicU8::new(0),
        cq_mask: AtomicU64::new(0),
        owners: AtomicU32::new(0),
        orphaned: AtomicBool::new(false),
    };

    /// Claims the lowest free owner number of a shared path for an endpoint; `None` when
    /// [`SRX_MAX`] (32) endpoints are bound.
    pub(crate) fn claim_owner(&self) -> Option<u8> {
        let mut owners = self.owners.load(Ordering::Acquire);
        loop {
            let free = (!owners).trailing_zeros() as usize;
            if free >= SRX_MAX {
                return None;
            }
            match self.owners.compare_exchange(
                owners,
                owners | (1 << free),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Some(free as u8),
                Err(now) => owners = now,
            }
        }
    }

    /// Gives owner number `owner` back; `true` if the caller must now close the path (it was
    /// the last endpoint of a context that was dropped).
    pub(crate) fn release_owner(&self, owner: u8) -> bool {
        let bit = 1u32 << owner;
        let left = self.owners.fetch_and(!bit, Ordering::AcqRel) & !bit;
        left == 0 && self.orphaned.swap(false, Ordering::AcqRel)
    }

    /// Whether CQ `index`'s read may find work in this path (checked again under the lock).
    #[inline]
    pub(crate) fn serves(&self, index: usize) -> bool {
        self.cq.load(Ordering::Acquire) == index
            || (index < 64 && self.cq_mask.load(Ordering::Acquire) & (1 << index) != 0)
    }

    /// The critical fault published for the path, if any.
    #[inline]
    pub(crate) fn fault(&self) -> Option<QueueFault> {
        match self.fault.load(Ordering::Acquire) {
            0 => None,
            code => QueueFault::from_code(code),
        }
    }

    /// Publishes the fault of `st` (the path's state, under its lock) for lock-free readers.
    #[inline]
    pub(crate) fn publish_fault(&self, st: &PathState<'n, N, D>) {
        if let Some(f) = st.fault {
            self.fault.store(f.code(), Ordering::Release);
        }
    }

    /// Forgets a published fault (the slot's path was closed or replaced).
    pub(crate) fn clear_fault(&self) {
        self.fault.store(0, Ordering::Release);
    }
}

/// What one hardware completion becomes, before it is handed on.
enum Verdict {
    /// A successful completion the application asked for.
    Done(Completion),
    /// An error completion, for the error queue.
    Failed(ErrRecord),
    /// A success nobody asked for: its credit goes back. The payload bytes a counter counts
    /// (a receive's; 0 for a send, whose caller knows its own).
    Silent(usize),
    /// Not a frame for this endpoint: the buffer is posted again, nothing is reported.
    Repost,
}

impl<'n, N: Nic + 'n, const D: usize> PathState<'n, N, D> {
    /// Bytes of ringfab's header before the payload on this path: 0 on a raw (unframed) one.
    fn header_len(&self) -> usize {
        self.framing.map_or(0, |f| f.encap.header_len())
    }

    /// The encapsulation of a framed path (the Ethernet one on a raw path, which parses no header).
    fn header_encap(&self) -> Encap {
        self.framing.map_or(Encap::Ethernet, |f| f.encap)
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
            table: OpTable::new(),
            cq: None,
            bind: BindFlags::empty(),
            hw_selective: in_order,
            framing: None,
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
            shared: false,
            srx: [None; SRX_MAX],
            iov: [IovRec::FREE; IOV_POOL],
            bounce: None,
        }
    }

    pub(crate) fn is_tx(&self) -> bool {
        matches!(self.queue, Queue::Tx(_))
    }

    /// Whether CQ `index` reads this path: the one it is bound to, or any on a shared path.
    pub(crate) fn serves(&self, index: usize) -> bool {
        self.cq == Some(index) || self.shared
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

    /// Polls the hardware queue for at most `budget` completions that produce an entry,
    /// turning each into an [`Outcome`] for `sink`, in the order the driver gives them.
    /// Successes nobody asked for release their credit here and never reach `sink`; received
    /// frames that are not for this endpoint are posted again. `sink` returns `true` to stop
    /// after the current chunk (an error was queued). Returns the number of outcomes given to
    /// `sink`.
    pub(crate) fn poll<'s, S: Sink<'s>>(
        &mut self,
        budget: usize,
        ctx: &PollCtx<'s, N>,
        sink: &mut S,
    ) -> usize {
        if self.shared {
            return self.poll_shared(budget, ctx, &mut |o| sink.outcome(o));
        }
        let mut given = 0;
        let mut stop = false;
        let mut reposted = false;
        let mut tally = Tally::default();
        let header = self.header_len();
        let unframed = self.framing.is_none();
        // The framed lane serves endpoints on the Ethernet encapsulation without
        // `FI_SOURCE_ERR` (whose unknown senders turn successes into errors: the general
        // lane decides those); `framed` is what the lane compares a header with.
        let framed = self
            .framing
            .filter(|f| f.encap == Encap::Ethernet && !f.source_err)
            .map(|f| FramedLane::expect(f.local.ctx));
        while given < budget && !stop {
            let want = (budget - given).min(CHUNK);
            let got = match &mut self.queue {
                Queue::Rx(q) => {
                    // A fast lane, inside the driver's loop (`fast_lane` on the raw layer,
                    // `fast_lane_framed` on an endpoint's path); what it does not take waits
                    // in `rx_scratch` for the general lane below.
                    let mut win = sink.window();
                    let (head, table, scratch) =
                        (self.table.head, &mut self.table, &mut self.rx_scratch);
                    let counted = self.cntr.is_some();
                    let framed_lane = match framed {
                        Some(expect) if win.whole => {
                            FramedLane::new(expect, table.ops[head % D].buf.mr, ctx.mrs)
                        }
                        _ => None,
                    };
                    let (got, next, kept, bytes, filled) = match framed_lane {
                        Some(lane) => {
                            let (got, next, kept, bytes) =
                                lane.poll::<N, D, S>(q, table, scratch, &mut win, want, counted);
                            let direct = next.wrapping_sub(head);
                            let framing = self.framing.as_ref();
                            let av = framing.and_then(|f| f.av).and_then(|i| ctx.avs.get(i));
                            lane.settle(table, head, &mut win, direct, av);
                            (got, next, kept, bytes, true)
                        }
                        None => {
                            let room = if unframed {
                                win.entries.len().min(want)
                            } else {
                                0
                            };
                            let entries = &mut win.entries[..room];
                            // The byte count only where a counter may want it: one add less
                            // per entry (and a register more for the driver's loop) shows in
                            // the time.
                            let (got, next, kept, bytes) = if counted {
                                fast_lane::<N, D, S, true>(q, table, scratch, entries, want)
                            } else {
                                fast_lane::<N, D, S, false>(q, table, scratch, entries, want)
                            };
                            (got, next, kept, bytes, false)
                        }
                    };
                    let got = got.min(want);
                    // The slots taken were `head`, `head + 1`, …, `next - 1`: all freed.
                    let direct = next.wrapping_sub(head);
                    table.live -= direct;
                    table.head = next;
                    tally.ok += direct as u64;
                    tally.bytes += bytes;
                    if filled {
                        sink.commit_filled(direct);
                    } else {
                        sink.commit(direct);
                    }
                    given += direct;

                    let mut i = 0;
                    while i < kept {
                        // A run of plain successes on an unframed path goes to the sink in one
                        // call, straight from the op table.
                        if unframed {
                            let k = self.table.take_plain(
                                &self.rx_scratch[i..kept],
                                header,
                                &mut self.plains,
                                &mut tally,
                            );
                            if k > 0 {
                                given += k;
                                stop |= sink.plain(&self.plains[..k]);
                                i += k;
                                continue;
                            }
                        }
                        let c = &self.rx_scratch[i];
                        i += 1;
                        let Some(op) = self.table.take(c.token, OpKind::Recv) else {
                            continue;
                        };
                        let mut verdict = rx_outcome(self.framing.as_ref(), &op, c, ctx.avs);
                        match &mut verdict {
                            Verdict::Done(done) => {
                                if op.group != NO_GROUP {
                                    settle(&mut self.groups, header, &op, done);
                                }
                                tally.success(done.len);
                                given += 1;
                                stop |= sink.outcome(Outcome::Done(done));
                            }
                            Verdict::Failed(rec) => {
                                if op.group != NO_GROUP {
                                    settle(&mut self.groups, header, &op, &mut rec.completion);
                                }
                                tally.err += 1;
                                given += 1;
                                stop |= sink.outcome(Outcome::Failed(rec));
                            }
                            Verdict::Silent(payload) => {
                                tally.success(*payload);
                                ctx.cq.release_credit();
                                release(ctx.mrs, op.owned());
                            }
                            Verdict::Repost => {
                                self.dropped += 1;
                                // The buffer goes back to the ring as a fresh post that keeps
                                // the operation's credit; the slot `take` just freed is there.
                                match self.table.next_free() {
                                    Some(slot)
                                        if q.push(op.buf.rx(), Token(slot as u64)).is_ok() =>
                                    {
                                        self.table.commit(slot, op);
                                        reposted = true;
                                    }
                                    // Cannot happen (a slot and a descriptor were just
                                    // freed); should it, the operation completes canceled
                                    // rather than vanish.
                                    _ => {
                                        let mut rec = canceled_recv(&op);
                                        settle(&mut self.groups, header, &op, &mut rec.completion);
                                        tally.err += 1;
                                        given += 1;
                                        stop |= sink.outcome(Outcome::Failed(&rec));
                                    }
                                }
                            }
                        }
                    }
                    got
                }
                Queue::Tx(q) => {
                    let got = q.poll(&mut self.tx_scratch[..want]).min(want);
                    let mut i = 0;
                    while i < got {
                        // Fast path: a run of plain successes in one call to the sink.
                        let k = self.table.take_plain(
                            &self.tx_scratch[i..got],
                            header,
                            &mut self.plains,
                            &mut tally,
                        );
                        if k > 0 {
                            given += k;
                            stop |= sink.plain(&self.plains[..k]);
                            i += k;
                            continue;
                        }
                        let c = &self.tx_scratch[i];
                        i += 1;
                        let Some(op) = self.table.take(c.token, OpKind::Send) else {
                            continue;
                        };
                        let payload = tx_payload(header, op.len);
                        let mut verdict = tx_outcome(&op, c);
                        self.attach_extras(&op, &mut verdict, ctx.mrs);
                        match &verdict {
                            Verdict::Done(done) => {
                                tally.success(payload);
                                given += 1;
                                stop |= sink.outcome(Outcome::Done(done));
                            }
                            Verdict::Failed(rec) => {
                                tally.err += 1;
                                given += 1;
                                stop |= sink.outcome(Outcome::Failed(rec));
                            }
                            Verdict::Silent(_) | Verdict::Repost => {
                                tally.success(payload);
                                ctx.cq.release_credit();
                                release(ctx.mrs, op.owned());
                            }
                        }
                    }
                    got
                }
            };
            self.table.advance_head();
            if got < want {
                // A short poll is where a driver's stall check may have found a critical
                // fault: one field read per poll, nothing per completion.
                given += self.fail_if_faulted(ctx, &mut |o| {
                    sink.outcome(o);
                });
                break;
            }
        }
        if reposted {
            if let Queue::Rx(q) = &mut self.queue {
                q.doorbell();
            }
        }
        self.reclaim_silent(ctx, &mut tally);
        tally.apply(ctx, self.cntr);
        given
    }

    /// The critical fault the driver recorded for the queue, if any.
    #[inline]
    fn queue_fault(&self) -> Option<QueueFault> {
        match &self.queue {
            Queue::Tx(q) => q.fault(),
            Queue::Rx(q) => q.fault(),
        }
    }

    /// After a short poll: fails the path if the driver found a critical fault (once);
    /// returns the entries given to `sink` (0 or 1).
    #[inline]
    fn fail_if_faulted(
        &mut self,
        ctx: &PollCtx<'_, N>,
        sink: &mut dyn FnMut(Outcome<'_>),
    ) -> usize {
        match (self.fault, self.queue_fault()) {
            (None, Some(f)) => self.fail(f, ctx, true, sink),
            _ => 0,
        }
    }

    /// The live operation of `kind` a completion's token names on a shared path, unless a
    /// read already holds it finished: its slot and a copy.
    fn unheld_op(&self, token: Token, kind: OpKind) -> Option<(usize, Op)> {
        let slot = usize::try_from(token.0).ok().filter(|&s| s < D)?;
        let op = self.table.ops[slot];
        (op.kind == kind && self.table.held[slot].is_none()).then_some((slot, op))
    }

    /// Asks the driver to check the device now (control path: register reads).
    pub(crate) fn check_queue(&mut self) -> Option<QueueFault> {
        match &mut self.queue {
            Queue::Tx(q) => q.check(),
            Queue::Rx(q) => q.check(),
        }
    }

    /// Fails the path after critical fault `fault` (fi_endpoint(3): "When an endpoint is
    /// disabled as a result of a critical error, all pending operations are discarded"):
    /// every outstanding operation is discarded without a completion — its credit released,
    /// its owned buffer returned to its region, as on close — and, with `report`, one error
    /// entry goes to `sink`: `FI_EIO`, `prov_errno` 8 with the fault's code
    /// ([`ProvError::QueueFault`]), a NULL context, and the direction's flags. The entry takes
    /// a CQ credit like any other; discarding released at least one if anything was pending,
    /// and if none is free the CQ is declared overrun rather than the report lost silently.
    /// Idempotent: a failed path fails once. Returns the entries given to `sink` (0 or 1).
    #[cold]
    #[inline(never)]
    pub(crate) fn fail(
        &mut self,
        fault: QueueFault,
        ctx: &PollCtx<'_, N>,
        report: bool,
        sink: &mut dyn FnMut(Outcome<'_>),
    ) -> usize {
        if self.fault.is_some() {
            return 0;
        }
        self.fault = Some(fault);
        self.discard_all(ctx);
        if !report || !ctx.cq.reserve_report_credit() {
            return 0;
        }
        let kind = if self.is_tx() {
            OpKind::Send
        } else {
            OpKind::Recv
        };
        sink(Outcome::Failed(&ErrRecord {
            completion: Completion {
                // fi_endpoint(3) NOTES: an error without an operation's context carries the
                // endpoint's (NULL on a path opened without one).
                context: self.framing.map_or(OpContext::NULL, |f| f.context),
                flags: completion_flags(kind, false),
                ..Completion::default()
            },
            err: Error::Io,
            olen: 0,
            prov: Some(ProvError::QueueFault(fault)),
        }));
        1
    }

    /// Releases the credits of transmits the driver reclaimed without reporting them (see
    /// the module documentation).
    fn reclaim_silent(&mut self, ctx: &PollCtx<'_, N>, tally: &mut Tally) {
        let Queue::Tx(q) = &self.queue else {
            return;
        };
        if !self.hw_selective {
            return;
        }
        let pending = q.pending();
        while self.table.live > pending {
            let Some((slot, op)) = self.table.oldest() else {
                break;
            };
            // A reported frame is never reclaimed silently; if the oldest is one, the counts
            // disagree for a reason this inference does not know: stop rather than guess.
            if op.report {
                break;
            }
            if self.table.take(Token(slot as u64), OpKind::Send).is_some() {
                ctx.cq.release_credit();
                release(ctx.mrs, op.owned());
                self.release_extras(&op, ctx.mrs);
                tally.success(tx_payload(self.header_len(), op.len));
            }
        }
    }

    /// Discards every outstanding operation without a completion (endpoint close): the queue
    /// is flushed, every token comes back, credits are released and owned buffers returned to
    /// their regions.
    pub(crate) fn discard_all(&mut self, ctx: &PollCtx<'_, N>) {
        match &mut self.queue {
            Queue::Tx(q) => q.flush(),
            Queue::Rx(q) => q.flush(),
        }
        let mut rx = [NO_RX; CHUNK];
        let mut tx = [NO_TX; CHUNK];
        loop {
            let tokens = match &mut self.queue {
                Queue::Rx(q) => {
                    let got = q.poll(&mut rx).min(CHUNK);
                    TokenIter::Rx(rx[..got].iter())
                }
                Queue::Tx(q) => {
                    let got = q.poll(&mut tx).min(CHUNK);
                    TokenIter::Tx(tx[..got].iter())
                }
            };
            let mut any = false;
            for (token, kind) in tokens {
                any = true;
                if let Some(op) = self.table.take(token, kind) {
                    self.discard(&op, ctx);
                }
            }
            if !any {
                break;
            }
        }
        // Operations the driver never handed back (it must; this is the belt to its braces):
        // release them too, so that nothing the CQ or a region counts stays owed.
        while let Some((slot, op)) = self.table.oldest() {
            if self.table.take(Token(slot as u64), op.kind).is_some() {
                self.discard(&op, ctx);
            } else {
                break;
            }
        }
    }
}

impl<'n, N: Nic + 'n, const D: usize> PathState<'n, N, D> {
    /// Cancels one outstanding operation with `target` as its context (`fi_cancel`), giving
    /// outcomes to `sink` in the path's order. Returns whether one was found.
    ///
    /// A descriptor ring cannot take one descriptor back, so the queue is flushed: the driver
    /// stops it and hands every token back. Operations the device had finished complete
    /// normally; the first flushed operation with `target` completes `Canceled`
    /// (`FI_ECANCELED`); every other flushed operation is posted again, in its order, into the
    /// slot it already holds, keeping its CQ credit — it completes later, exactly once, as if
    /// nothing happened. Bounded: one flush and at most `D` pushes. An unknown context
    /// changes nothing (the queue is not touched).
    ///
    /// Only single-segment operations can be posted again (every endpoint operation is); a
    /// flushed multi-segment send of the raw poster completes `Canceled` too.
    pub(crate) fn cancel(
        &mut self,
        target: OpContext,
        ctx: &PollCtx<'_, N>,
        sink: &mut dyn FnMut(Outcome<'_>),
    ) -> bool {
        if self.shared {
            return self.cancel_shared(target, ctx, sink);
        }
        let mut tally = Tally::default();
        let found = self.cancel_inner(target, ctx, sink, &mut tally);
        tally.apply(ctx, self.cntr);
        found
    }

    fn cancel_inner(
        &mut self,
        target: OpContext,
        ctx: &PollCtx<'_, N>,
        sink: &mut dyn FnMut(Outcome<'_>),
        tally: &mut Tally,
    ) -> bool {
        let live = |t: &OpTable<D>| {
            (0..t.live_span()).any(|k| {
                let op = t.ops[(t.head + k) % D];
                op.kind != OpKind::Free && op.context == target
            })
        };
        if !live(&self.table) {
            return false;
        }
        let header = self.header_len();
        // Canceling a multi-receive buffer cancels all of its slots still in the ring: one
        // entry, with the last of them, releases the buffer.
        let target_group = (0..self.table.live_span())
            .map(|k| self.table.ops[(self.table.head + k) % D])
            .find(|op| op.kind != OpKind::Free && op.context == target)
            .map_or(NO_GROUP, |op| op.group);
        match &mut self.queue {
            Queue::Tx(q) => q.flush(),
            Queue::Rx(q) => q.flush(),
        }
        let mut canceled = false;
        let mut rx = [NO_RX; CHUNK];
        let mut tx = [NO_TX; CHUNK];
        loop {
            // Phase 1: everything the driver hands back. Finished operations complete now;
            // flushed ones stay in the table (except the one canceled).
            let got = match &mut self.queue {
                Queue::Rx(q) => q.poll(&mut rx).min(CHUNK),
                Queue::Tx(q) => q.poll(&mut tx).min(CHUNK),
            };
            if got == 0 {
                break;
            }
            for i in 0..got {
                let (token, kind, flushed) = if self.is_tx() {
                    let c = tx[i];
                    (c.token, OpKind::Send, c.status == Err(TxError::Flushed))
                } else {
                    let c = rx[i];
                    (c.token, OpKind::Recv, c.status == Err(RxError::Flushed))
                };
                let Some(slot) = usize::try_from(token.0).ok().filter(|&s| s < D) else {
                    continue;
                };
                let op = self.table.ops[slot];
                if op.kind != kind {
                    continue;
                }
                if flushed {
                    let chosen = if target_group == NO_GROUP {
                        !canceled && op.context == target
                    } else {
                        op.group == target_group
                    };
                    if !chosen {
                        continue; // posted again below
                    }
                    let Some(op) = self.table.take(token, kind) else {
                        continue;
                    };
                    canceled = true;
                    if leave_group(&mut self.groups, &op) == GroupExit::Member {
                        // A slot of the canceled buffer that is not its last: no entry of its
                        // own (the buffer's one entry comes with the last slot).
                        ctx.cq.release_credit();
                        continue;
                    }
                    let owned = match leave_group_last(&self.groups, &op) {
                        Some(raw) => Some(raw),
                        None => op.owned(),
                    };
                    tally.err += 1;
                    let extra = self.take_extras(&op);
                    sink(Outcome::Failed(&ErrRecord {
                        completion: Completion {
                            context: op.context,
                            flags: completion_flags(kind, op.group != NO_GROUP),
                            owned,
                            extra,
                            ..Completion::default()
                        },
                        err: Error::Canceled,
                        olen: 0,
                        prov: Some(if kind == OpKind::Send {
                            ProvError::TxFlushed
                        } else {
                            ProvError::RxFlushed
                        }),
                    }));
                    continue;
                }
                let mut verdict = if kind == OpKind::Send {
                    tx_outcome(&op, &tx[i])
                } else {
                    rx_outcome(self.framing.as_ref(), &op, &rx[i], ctx.avs)
                };
                if let Verdict::Repost = verdict {
                    // A foreign frame in a buffer filled before the flush: the buffer stays in
                    // the table and is posted again with the flushed ones.
                    self.dropped += 1;
                    continue;
                }
                if self.table.take(token, kind).is_none() {
                    continue;
                }
                self.attach_extras(&op, &mut verdict, ctx.mrs);
                let bytes = if kind == OpKind::Send {
                    tx_payload(header, op.len)
                } else {
                    rx[i].len as usize
                };
                match &mut verdict {
                    Verdict::Done(done) => {
                        settle(&mut self.groups, header, &op, done);
                        tally.success(if kind == OpKind::Recv {
                            done.len
                        } else {
                            bytes
                        });
                        sink(Outcome::Done(done));
                    }
                    Verdict::Failed(rec) => {
                        settle(&mut self.groups, header, &op, &mut rec.completion);
                        tally.err += 1;
                        sink(Outcome::Failed(rec));
                    }
                    Verdict::Silent(payload) => {
                        tally.success(if kind == OpKind::Recv {
                            *payload
                        } else {
                            bytes
                        });
                        ctx.cq.release_credit();
                        release(ctx.mrs, op.owned());
                    }
                    Verdict::Repost => {}
                }
            }
        }
        // Phase 2: what is still live was flushed: post it again, oldest first.
        let (head, span) = (self.table.head, self.table.live_span());
        for k in 0..span {
            let slot = (head + k) % D;
            let op = self.table.ops[slot];
            let token = Token(slot as u64);
            let (segs, nsegs) = self.resend_segments(&op);
            let pushed = match (&mut self.queue, op.kind) {
                (Queue::Rx(q), OpKind::Recv) => q.push(op.buf.rx(), token).is_ok(),
                (Queue::Tx(q), OpKind::Send) => {
                    let hw = if op.report || !self.hw_selective {
                        Report::Always
                    } else {
                        Report::ErrorsOnly
                    };
                    q.push(&segs[..nsegs], token, hw).is_ok()
                }
                _ => continue,
            };
            if !pushed {
                // Cannot happen (the ring was emptied by the flush); should it, the operation
                // completes canceled rather than vanish.
                if let Some(op) = self.table.take(token, op.kind) {
                    tally.err += 1;
                    let mut rec = canceled_recv(&op);
                    settle(&mut self.groups, header, &op, &mut rec.completion);
                    rec.completion.extra = self.take_extras(&op);
                    sink(Outcome::Failed(&rec));
                }
            }
        }
        self.doorbell();
        canceled
    }
}

/// Shared receive contexts (`fi_srx_context`, `crate::srx`): the application posts receives to
/// the context; the endpoint a frame is for — and so its CQ — is known only from the frame's
/// header. A receive therefore holds no CQ credit while posted; when its frame arrives it is
/// routed (`Op::owner`, `Op::cq` set), and it takes a credit of that CQ when that CQ's read
/// delivers it (a CQ without a free credit leaves it held: nothing is lost, nothing overruns).
/// A frame for no bound endpoint, or one the device reports bad (whose header cannot be
/// trusted), goes back into the ring as a foreign frame does on an endpoint's own queue.
impl<'n, N: Nic + 'n, const D: usize> PathState<'n, N, D> {
    /// Posts one receive on a shared receive context (no credit, no doorbell).
    pub(crate) fn post_recv_srx(
        &mut self,
        buf: RawBuf,
        len: u32,
        context: OpContext,
        report: bool,
    ) -> Result {
        let Queue::Rx(q) = &mut self.queue else {
            return Err(Error::OpBadState);
        };
        if self.fault.is_some() {
            return Err(Error::OpBadState);
        }
        let Some(slot) = self.table.next_free() else {
            return Err(Error::Again);
        };
        q.push(buf.rx(), Token(slot as u64)).map_err(push_error)?;
        self.table.commit(
            slot,
            Op {
                kind: OpKind::Recv,
                context,
                buf,
                len,
                report,
                group: NO_GROUP,
                plain: LaneKey::GENERAL, // commit decides (unused: no fast lane here)
                owner: NO_OWNER,
                ..Op::FREE
            },
        );
        Ok(())
    }

    /// The endpoint a received frame is for, if one is bound: its owner number.
    fn route_srx(&self, op: &Op, c: &RxCompletion) -> Option<u8> {
        if c.status.is_err() {
            return None;
        }
        let h = parse_header(self.header_encap(), op, c.len).ok()?;
        self.srx.iter().enumerate().find_map(|(o, e)| {
            let e = e.as_ref()?;
            (h.dst_ctx == e.local.ctx || h.dst_ctx == proto::ANY_CTX).then_some(o as u8)
        })
    }

    /// Puts the receive of `slot` back into the ring (its frame was for nobody).
    fn repost_srx(&mut self, slot: usize, ctx: &PollCtx<'_, N>) -> bool {
        let Some(op) = self.table.take(Token(slot as u64), OpKind::Recv) else {
            return false;
        };
        self.dropped += 1;
        let next = self.table.next_free();
        let pushed = match (&mut self.queue, next) {
            (Queue::Rx(q), Some(next)) => q.push(op.buf.rx(), Token(next as u64)).is_ok(),
            _ => false,
        };
        if let (true, Some(next)) = (pushed, next) {
            self.table.commit(
                next,
                Op {
                    owner: NO_OWNER,
                    ..op
                },
            );
        }
        if !pushed {
            // Cannot happen (a slot and a descriptor were just freed); should it, the buffer
            // goes back to its region rather than vanish.
            release(ctx.mrs, op.owned());
        }
        pushed
    }

    /// `poll` of a shared receive context's path on behalf of CQ `ctx.reader`.
    fn poll_srx(
        &mut self,
        budget: usize,
        ctx: &PollCtx<'_, N>,
        sink: &mut dyn FnMut(Outcome<'_>) -> bool,
    ) -> usize {
        let mut given = 0;
        let (head, span) = (self.table.head, self.table.live_span());
        let span = if self.table.holding > 0 { span } else { 0 };
        for k in 0..span {
            let slot = (head + k) % D;
            let op = self.table.ops[slot];
            let Some(Held::Rx { len, status }) = self.table.held[slot] else {
                continue;
            };
            if op.kind != OpKind::Recv || usize::from(op.cq) != ctx.reader {
                continue;
            }
            // Newer completions must not overtake the held ones still to deliver.
            if given >= budget || ctx.cq.reserve_credit().is_err() {
                return given;
            }
            self.table.take(Token(slot as u64), OpKind::Recv);
            let (n, stop) = self.deliver_srx(&op, len, status, ctx, sink);
            given += n;
            if stop {
                return given;
            }
        }
        let mut reposted = false;
        while given < budget {
            let want = (budget - given).min(CHUNK);
            let got = match &mut self.queue {
                Queue::Rx(q) => q.poll(&mut self.rx_scratch[..want]).min(want),
                Queue::Tx(_) => 0,
            };
            let mut stop = false;
            for i in 0..got {
                let c = self.rx_scratch[i];
                let Some((slot, op)) = self.unheld_op(c.token, OpKind::Recv) else {
                    continue;
                };
                let Some(owner) = self.route_srx(&op, &c) else {
                    reposted |= self.repost_srx(slot, ctx);
                    continue;
                };
                let Some(ep) = self.srx[usize::from(owner)] else {
                    continue;
                };
                self.table.ops[slot].owner = owner;
                self.table.ops[slot].cq = ep.cq;
                self.table.ops[slot].cntr = ep.cntr;
                let op = self.table.ops[slot];
                if usize::from(ep.cq) == ctx.reader && !stop && ctx.cq.reserve_credit().is_ok() {
                    self.table.take(c.token, OpKind::Recv);
                    let (n, s) = self.deliver_srx(&op, c.len, c.status, ctx, sink);
                    given += n;
                    stop |= s;
                } else {
                    self.table.hold(
                        slot,
                        Held::Rx {
                            len: c.len,
                            status: c.status,
                        },
                    );
                }
            }
            if stop {
                break;
            }
            if got < want {
                given += self.fail_if_faulted(ctx, &mut |o| {
                    sink(o);
                });
                break;
            }
        }
        if reposted {
            self.doorbell();
        }
        given
    }

    /// Hands a routed receive of the reader's to `sink` (its slot taken, a credit of the
    /// reader's CQ reserved for it): the completion as its endpoint's own queue would have
    /// made it. Returns the entries given and whether the read stops.
    fn deliver_srx(
        &mut self,
        op: &Op,
        len: u32,
        status: core::result::Result<(), RxError>,
        ctx: &PollCtx<'_, N>,
        sink: &mut dyn FnMut(Outcome<'_>) -> bool,
    ) -> (usize, bool) {
        let Some(ep) = self.srx.get(usize::from(op.owner)).copied().flatten() else {
            // Its endpoint left meanwhile (it reposts its held receives when it does).
            ctx.cq.release_credit();
            release(ctx.mrs, op.owned());
            return (0, false);
        };
        let framing = Framing {
            local: ep.local,
            av: self.framing.and_then(|f| f.av),
            source_err: ep.source_err,
            context: ep.context,
            encap: self.header_encap(),
        };
        let c = RxCompletion {
            token: Token(0),
            len,
            status,
            rss: None,
        };
        // Whether a success is reported is the endpoint's binding's business (known only
        // now): selective, it takes the receive's FI_COMPLETION; otherwise always.
        let op = Op {
            report: !ep.selective || op.report,
            ..*op
        };
        let verdict = rx_outcome(Some(&framing), &op, &c, ctx.avs);
        if let Some(cn) = ctx.cntrs.get(usize::from(ep.cntr)) {
            // The payload, as the endpoint's own queue counts it (not the padded frame).
            match &verdict {
                Verdict::Done(done) => cn.complete_ok(1, done.len as u64),
                Verdict::Silent(payload) => cn.complete_ok(1, *payload as u64),
                Verdict::Failed(_) => cn.complete_err(1),
                Verdict::Repost => {}
            }
        }
        match &verdict {
            Verdict::Done(done) => (1, sink(Outcome::Done(done))),
            Verdict::Failed(rec) => (1, sink(Outcome::Failed(rec))),
            _ => {
                ctx.cq.release_credit();
                release(ctx.mrs, op.owned());
                (0, false)
            }
        }
    }

    /// Cancels the receive posted to a shared receive context with `target` as its context, if
    /// one is still waiting for a frame: the queue is flushed, that receive taken out and its
    /// buffer returned (a shared receive context has no CQ to report it on); receives the
    /// device had filled are routed to their endpoints (held for their CQs) and the rest
    /// posted again in their slots, oldest first. `None` if no such receive waits.
    pub(crate) fn cancel_srx(&mut self, target: OpContext, mrs: &[MrSlot<N>]) -> Option<RawBuf> {
        let waiting = |t: &OpTable<D>| {
            (0..t.live_span()).any(|k| {
                let slot = (t.head + k) % D;
                let op = t.ops[slot];
                op.kind == OpKind::Recv
                    && op.owner == NO_OWNER
                    && op.context == target
                    && t.held[slot].is_none()
            })
        };
        if !waiting(&self.table) {
            return None;
        }
        if let Queue::Rx(q) = &mut self.queue {
            q.flush();
        }
        let mut canceled = None;
        let mut rx = [NO_RX; CHUNK];
        loop {
            let got = match &mut self.queue {
                Queue::Rx(q) => q.poll(&mut rx).min(CHUNK),
                Queue::Tx(_) => 0,
            };
            if got == 0 {
                break;
            }
            for c in &rx[..got] {
                let Some((slot, op)) = self.unheld_op(c.token, OpKind::Recv) else {
                    continue;
                };
                if c.status == Err(RxError::Flushed) {
                    if canceled.is_none() && op.context == target {
                        self.table.take(c.token, OpKind::Recv);
                        canceled = Some(op.buf);
                    }
                    continue; // the others are posted again below
                }
                match self
                    .route_srx(&op, c)
                    .and_then(|o| Some((o, self.srx[usize::from(o)]?)))
                {
                    Some((owner, ep)) => {
                        let held = &mut self.table.ops[slot];
                        (held.owner, held.cq, held.cntr) = (owner, ep.cq, ep.cntr);
                        self.table.hold(
                            slot,
                            Held::Rx {
                                len: c.len,
                                status: c.status,
                            },
                        );
                    }
                    // A frame for nobody, or a bad one: its buffer waits again, below.
                    None => self.dropped += 1,
                }
            }
        }
        let (head, span) = (self.table.head, self.table.live_span());
        for k in 0..span {
            let slot = (head + k) % D;
            let op = self.table.ops[slot];
            if op.kind != OpKind::Recv || self.table.held[slot].is_some() {
                continue;
            }
            let pushed = match &mut self.queue {
                Queue::Rx(q) => q.push(op.buf.rx(), Token(slot as u64)).is_ok(),
                Queue::Tx(_) => false,
            };
            if !pushed {
                // Cannot happen (the flush emptied the ring); should it, the buffer goes back
                // to its region rather than vanish.
                self.table.take(Token(slot as u64), OpKind::Recv);
                release(mrs, op.owned());
            }
        }
        self.doorbell();
        canceled
    }

    /// An endpoint leaves a shared receive context: the receives its frames filled and that
    /// its CQ has not read go back into the ring (they are the context's buffers), and it is
    /// no longer routed to.
    pub(crate) fn leave_srx(&mut self, owner: u8, ctx: &PollCtx<'_, N>) {
        if let Some(e) = self.srx.get_mut(usize::from(owner)) {
            *e = None;
        }
        let (head, span) = (self.table.head, self.table.live_span());
        let mut reposted = false;
        for k in 0..span {
            let slot = (head + k) % D;
            let op = self.table.ops[slot];
            if op.kind == OpKind::Recv
                && op.owner == owner
                && matches!(self.table.held[slot], Some(Held::Rx { .. }))
            {
                reposted |= self.repost_srx(slot, ctx);
            }
        }
        if reposted {
            self.doorbell();
        }
    }
}

/// The queue of a shared context (`crate::stx`, `crate::srx`): what both kinds share — the
/// endpoints bound to it (owner numbers in the slot), and the rule that a context dropped
/// while endpoints are bound leaves the queue to the last of them to close.
#[derive(Debug)]
pub(crate) struct SharedPath {
    /// The id of the domain the queue is in.
    pub(crate) domain: u32,
    /// Its path slot index.
    pub(crate) index: usize,
}

impl SharedPath {
    /// The queue's path in `dom`.
    ///
    /// # Errors
    /// `Domain` for a domain the context is not of.
    pub(crate) fn path<'d, 'n, N: Nic + 'n, const D: usize>(
        &self,
        dom: &'d Domain<'n, N, D>,
    ) -> Result<Path<'d, 'n, N, D>> {
        dom.check(self.domain)?;
        Ok(Path::at(dom, self.index))
    }

    /// Endpoints bound now (0 for a domain the context is not of).
    pub(crate) fn endpoints<N: Nic, const D: usize>(&self, dom: &Domain<'_, N, D>) -> usize {
        self.path(dom).map_or(0, |p| {
            p.slot().owners.load(Ordering::Acquire).count_ones() as usize
        })
    }

    /// The context goes: closes the queue now if no endpoint is bound (`true`); otherwise
    /// the last endpoint to leave closes it.
    pub(crate) fn release<N: Nic, const D: usize>(&self, dom: &Domain<'_, N, D>) -> bool {
        let Ok(path) = self.path(dom) else {
            return false;
        };
        let slot = path.slot();
        slot.orphaned.store(true, Ordering::Release);
        if slot.owners.load(Ordering::Acquire) == 0 && slot.orphaned.swap(false, Ordering::AcqRel) {
            path.close_shared();
            return true;
        }
        false
    }
}

/// Gather sends (`Endpoint::sendv`): the first buffer is the operation's own; the others and
/// the segment list wait in a pool record until the operation completes, when they travel
/// with the completion (`Completion::extra`) or go back to their regions with the first.
impl<'n, N: Nic + 'n, const D: usize> PathState<'n, N, D> {
    /// Posts a gather send: as [`post_send`](Self::post_send) with `segments` (the header
    /// first) and `extra`, the buffers after `buf`.
    ///
    /// # Errors
    /// `Again` when the pool is full; otherwise as `post_send`.
    #[allow(
        clippy::too_many_arguments,
        reason = "post_send's, plus the further buffers"
    )]
    pub(crate) fn post_send_iov(
        &mut self,
        cq: &CqSlot,
        segments: &[TxSegment],
        buf: RawBuf,
        extra: [Option<RawBuf>; IOV_MAX - 1],
        context: OpContext,
        flags: OpFlags,
        who: Option<Poster>,
    ) -> Result {
        if segments.len() > IOV_MAX + 1 {
            return Err(Error::Inval);
        }
        let Some(r) = self.iov.iter().position(|r| !r.used) else {
            return Err(Error::Again);
        };
        self.post_send(cq, segments, buf, context, flags, who)?;
        let slot = self.table.tail.wrapping_sub(1) % D;
        self.table.ops[slot].iov = r as u8;
        let mut rec = IovRec {
            used: true,
            nsegs: segments.len() as u8,
            extra,
            ..IovRec::FREE
        };
        rec.segs[..segments.len()].copy_from_slice(segments);
        self.iov[r] = rec;
        Ok(())
    }

    /// Takes a gather send's further buffers out of its pool record, freeing it.
    fn take_extras(&mut self, op: &Op) -> [Option<RawBuf>; IOV_MAX - 1] {
        match self.iov.get_mut(usize::from(op.iov)) {
            Some(rec) if op.kind == OpKind::Send && rec.used => {
                rec.used = false;
                core::mem::take(&mut rec.extra)
            }
            _ => [None; IOV_MAX - 1],
        }
    }

    /// Gives a finished send's further buffers to its outcome's completion, or back to their
    /// regions when the outcome reaches nobody.
    fn attach_extras(&mut self, op: &Op, verdict: &mut Verdict, mrs: &[MrSlot<N>]) {
        let extra = self.take_extras(op);
        match verdict {
            Verdict::Done(c) => c.extra = extra,
            Verdict::Failed(rec) => rec.completion.extra = extra,
            Verdict::Silent(_) | Verdict::Repost => {
                for raw in extra {
                    release(mrs, raw);
                }
            }
        }
    }

    /// Gives an operation's further buffers back to their regions (it is discarded).
    fn release_extras(&mut self, op: &Op, mrs: &[MrSlot<N>]) {
        for raw in self.take_extras(op) {
            release(mrs, raw);
        }
    }

    /// The segments to push a send again with (after a flush): a gather send's list, else its
    /// frame in its one buffer.
    fn resend_segments(&self, op: &Op) -> ([TxSegment; IOV_MAX + 1], usize) {
        match self.iov.get(usize::from(op.iov)) {
            Some(rec) if rec.used => (rec.segs, usize::from(rec.nsegs)),
            _ => {
                let mut segs = IovRec::FREE.segs;
                segs[0] = TxSegment {
                    iova: op.buf.iova,
                    len: op.len as u16,
                };
                (segs, 1)
            }
        }
    }
}

/// What a shared path's flush does with one operation handed back.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Settle {
    /// Gone without a completion (its endpoint is closing).
    Discard,
    /// Completes `FI_ECANCELED` on the acting endpoint's CQ.
    Cancel,
    /// Finished ones complete (or are held for their CQ); flushed ones are posted again.
    Keep,
}

/// Shared paths: one transmit queue carrying the operations of several endpoints, each
/// reporting to its own CQ (`fi_stx_context`). Every CQ of those endpoints polls the path;
/// what it finds for another CQ it leaves in the op table, marked finished (`held`), where
/// that CQ's next read takes it first — so each endpoint's completions keep their order, a
/// CQ never takes another's lock, and nothing needs more room than the ring's depth.
/// Successes nobody asked for are settled at once (credit back to the operation's own CQ).
/// Counters count each operation when its completion is found, whoever found it.
impl<'n, N: Nic + 'n, const D: usize> PathState<'n, N, D> {
    /// The CQ an operation's credit belongs to.
    fn op_cq<'c>(&self, op: &Op, ctx: &PollCtx<'c, N>) -> &'c CqSlot {
        if self.shared {
            ctx.cqs.get(usize::from(op.cq)).unwrap_or(ctx.cq)
        } else {
            ctx.cq
        }
    }

    /// Counts a shared path's operation on its endpoint's counter.
    fn count_shared(&self, op: &Op, ok: bool, ctx: &PollCtx<'_, N>) {
        let Some(c) = ctx.cntrs.get(usize::from(op.cntr)) else {
            return;
        };
        if ok {
            c.complete_ok(1, tx_payload(self.header_len(), op.len) as u64);
        } else {
            c.complete_err(1);
        }
    }

    /// `poll` of a shared path on behalf of CQ `ctx.reader`: first the reader's held
    /// operations, oldest first, then the ring.
    #[cold]
    #[inline(never)]
    fn poll_shared(
        &mut self,
        budget: usize,
        ctx: &PollCtx<'_, N>,
        sink: &mut dyn FnMut(Outcome<'_>) -> bool,
    ) -> usize {
        if !self.is_tx() {
            return self.poll_srx(budget, ctx, sink);
        }
        let mut given = 0;
        let (head, span) = (self.table.head, self.table.live_span());
        let span = if self.table.holding > 0 { span } else { 0 };
        for k in 0..span {
            if given >= budget {
                // Newer completions must not overtake the held ones still to deliver.
                return given;
            }
            let slot = (head + k) % D;
            let op = self.table.ops[slot];
            let Some(Held::Tx(status)) = self.table.held[slot] else {
                continue;
            };
            if op.kind != OpKind::Send || usize::from(op.cq) != ctx.reader {
                continue;
            }
            self.table.take(Token(slot as u64), OpKind::Send);
            let (n, stop) = self.deliver_shared(&op, status, ctx, sink);
            given += n;
            if stop {
                return given;
            }
        }
        while given < budget {
            let want = (budget - given).min(CHUNK);
            let got = match &mut self.queue {
                Queue::Tx(q) => q.poll(&mut self.tx_scratch[..want]).min(want),
                Queue::Rx(_) => 0,
            };
            let mut stop = false;
            for i in 0..got {
                let c = self.tx_scratch[i];
                let Some((slot, op)) = self.unheld_op(c.token, OpKind::Send) else {
                    continue;
                };
                self.count_shared(&op, c.status.is_ok(), ctx);
                if c.status.is_ok() && !op.report {
                    self.table.take(c.token, OpKind::Send);
                    self.op_cq(&op, ctx).release_credit();
                    release(ctx.mrs, op.owned());
                    self.release_extras(&op, ctx.mrs);
                } else if usize::from(op.cq) != ctx.reader || stop {
                    // Another CQ's, or behind an error this read stops at: kept in its slot.
                    self.table.hold(slot, Held::Tx(c.status));
                } else {
                    self.table.take(c.token, OpKind::Send);
                    let (n, s) = self.deliver_shared(&op, c.status, ctx, sink);
                    given += n;
                    stop |= s;
                }
            }
            if stop {
                break;
            }
            if got < want {
                given += self.fail_if_faulted(ctx, &mut |o| {
                    sink(o);
                });
                break;
            }
        }
        given
    }

    /// Hands a finished operation of the reader's to `sink` (its slot already taken); returns
    /// the entries given and whether the read stops (an error was queued).
    fn deliver_shared(
        &mut self,
        op: &Op,
        status: core::result::Result<(), TxError>,
        ctx: &PollCtx<'_, N>,
        sink: &mut dyn FnMut(Outcome<'_>) -> bool,
    ) -> (usize, bool) {
        let c = TxCompletion {
            token: Token(0),
            status,
        };
        let mut verdict = tx_outcome(op, &c);
        self.attach_extras(op, &mut verdict, ctx.mrs);
        match &verdict {
            Verdict::Done(done) => (1, sink(Outcome::Done(done))),
            Verdict::Failed(rec) => (1, sink(Outcome::Failed(rec))),
            Verdict::Silent(_) | Verdict::Repost => {
                self.op_cq(op, ctx).release_credit();
                release(ctx.mrs, op.owned());
                (0, false)
            }
        }
    }

    /// `cancel` on a shared path: only the acting endpoint's (`ctx.owner`) operations match.
    fn cancel_shared(
        &mut self,
        target: OpContext,
        ctx: &PollCtx<'_, N>,
        sink: &mut dyn FnMut(Outcome<'_>),
    ) -> bool {
        let pending = (0..self.table.live_span()).any(|k| {
            let slot = (self.table.head + k) % D;
            let op = self.table.ops[slot];
            op.kind == OpKind::Send
                && op.owner == ctx.owner
                && op.context == target
                && self.table.held[slot].is_none()
        });
        if !pending {
            return false;
        }
        let mut canceled = false;
        self.flush_shared(ctx, sink, |op, flushed| {
            if !canceled && flushed && op.owner == ctx.owner && op.context == target {
                canceled = true;
                Settle::Cancel
            } else {
                Settle::Keep
            }
        });
        canceled
    }

    /// Closing one endpoint of a shared path: its operations — finished and held, or still in
    /// the ring — are discarded without completions (credits back to its CQ, buffers to their
    /// regions); every other endpoint's go on as if nothing happened.
    pub(crate) fn discard_owner(&mut self, owner: u8, ctx: &PollCtx<'_, N>) {
        let (head, span) = (self.table.head, self.table.live_span());
        let mut in_ring = false;
        for k in 0..span {
            let slot = (head + k) % D;
            let op = self.table.ops[slot];
            if op.kind != OpKind::Send || op.owner != owner {
                continue;
            }
            if self.table.held[slot].is_some() {
                self.table.take(Token(slot as u64), OpKind::Send);
                self.discard(&op, ctx);
            } else {
                in_ring = true;
            }
        }
        if in_ring {
            // No reader: every other endpoint's finished operation is held for its CQ.
            let ctx = PollCtx {
                reader: usize::MAX,
                ..*ctx
            };
            self.flush_shared(&ctx, &mut |_| {}, |op, _| {
                if op.owner == owner {
                    Settle::Discard
                } else {
                    Settle::Keep
                }
            });
        }
    }

    /// Stops the shared queue, settles every operation it hands back as `pick` says, and
    /// posts the flushed ones that stay back into the ring, oldest first, in their own slots
    /// (same token, same credit), then rings once. Finished operations that stay complete on
    /// the acting CQ if they are its, else are held for theirs.
    fn flush_shared(
        &mut self,
        ctx: &PollCtx<'_, N>,
        sink: &mut dyn FnMut(Outcome<'_>),
        mut pick: impl FnMut(&Op, bool) -> Settle,
    ) {
        if let Queue::Tx(q) = &mut self.queue {
            q.flush();
        }
        let mut tx = [NO_TX; CHUNK];
        loop {
            let got = match &mut self.queue {
                Queue::Tx(q) => q.poll(&mut tx).min(CHUNK),
                Queue::Rx(_) => 0,
            };
            if got == 0 {
                break;
            }
            for c in &tx[..got] {
                let Some((slot, op)) = self.unheld_op(c.token, OpKind::Send) else {
                    continue;
                };
                let flushed = c.status == Err(TxError::Flushed);
                match pick(&op, flushed) {
                    Settle::Discard => {
                        self.table.take(c.token, OpKind::Send);
                        self.discard(&op, ctx);
                    }
                    Settle::Cancel => {
                        self.table.take(c.token, OpKind::Send);
                        self.count_shared(&op, false, ctx);
                        let extra = self.take_extras(&op);
                        sink(Outcome::Failed(&ErrRecord {
                            completion: Completion {
                                context: op.context,
                                flags: SEND_FLAGS,
                                owned: op.owned(),
                                extra,
                                ..Completion::default()
                            },
                            err: Error::Canceled,
                            olen: 0,
                            prov: Some(ProvError::TxFlushed),
                        }));
                    }
                    Settle::Keep if flushed => {} // posted again below
                    Settle::Keep => {
                        self.count_shared(&op, c.status.is_ok(), ctx);
                        if c.status.is_ok() && !op.report {
                            self.table.take(c.token, OpKind::Send);
                            self.op_cq(&op, ctx).release_credit();
                            release(ctx.mrs, op.owned());
                            self.release_extras(&op, ctx.mrs);
                        } else if usize::from(op.cq) == ctx.reader {
                            self.table.take(c.token, OpKind::Send);
                            let (_, _) = self.deliver_shared(&op, c.status, ctx, &mut |o| {
                                sink(o);
                                false
                            });
                        } else {
                            self.table.hold(slot, Held::Tx(c.status));
                        }
                    }
                }
            }
        }
        let (head, span) = (self.table.head, self.table.live_span());
        for k in 0..span {
            let slot = (head + k) % D;
            let op = self.table.ops[slot];
            if op.kind != OpKind::Send || self.table.held[slot].is_some() {
                continue;
            }
            let (segs, nsegs) = self.resend_segments(&op);
            let pushed = match &mut self.queue {
                Queue::Tx(q) => q
                    .push(&segs[..nsegs], Token(slot as u64), Report::Always)
                    .is_ok(),
                Queue::Rx(_) => false,
            };
            if !pushed {
                // Cannot happen (the ring was emptied by the flush); should it, the operation
                // is discarded rather than left owed.
                self.table.take(Token(slot as u64), OpKind::Send);
                self.discard(&op, ctx);
            }
        }
        self.doorbell();
    }
}

impl<'n, N: Nic + 'n, const D: usize> PathState<'n, N, D> {
    /// Forgets receive `op` without a completion (close), releasing a multi-receive buffer
    /// with its last slot.
    fn discard(&mut self, op: &Op, ctx: &PollCtx<'_, N>) {
        // A shared receive context's receives hold no credit (module documentation).
        if !(self.shared && op.kind == OpKind::Recv) {
            self.op_cq(op, ctx).release_credit();
        }
        self.release_extras(op, ctx.mrs);
        release(ctx.mrs, op.owned());
        if let GroupExit::Last(raw) = leave_group(&mut self.groups, op) {
            release(ctx.mrs, Some(raw));
        }
    }

    /// Posts a multi-receive buffer (`FI_MULTI_RECV`) as `slots` receives of `slot_len` bytes
    /// each (`accepted` of them for the payload), all or none: the op slots, ring room and CQ
    /// credits are checked and reserved before the first descriptor is written. No doorbell.
    pub(crate) fn post_multi_recv(
        &mut self,
        cq: &CqSlot,
        owned: RawBuf,
        slot_len: u32,
        slots: u32,
        accepted: u32,
        context: OpContext,
    ) -> Result {
        if self.fault.is_some() {
            return Err(Error::OpBadState);
        }
        let Some(gi) = self.groups.iter().position(|g| g.remaining == 0) else {
            return Err(Error::Again);
        };
        if self.free_slots() < slots as usize {
            return Err(Error::Again);
        }
        for taken in 0..slots {
            if let Err(e) = cq.reserve_credit() {
                for _ in 0..taken {
                    cq.release_credit();
                }
                return Err(e);
            }
        }
        let Queue::Rx(q) = &mut self.queue else {
            for _ in 0..slots {
                cq.release_credit();
            }
            return Err(Error::OpBadState);
        };
        let mut posted = 0;
        for i in 0..slots {
            let offset = u64::from(i) * u64::from(slot_len);
            let buf = RawBuf {
                cpu: owned.cpu + offset as usize,
                iova: Iova(owned.iova.0 + offset),
                len: slot_len,
                mr: NO_MR,
            };
            let Some(slot) = self.table.next_free() else {
                break;
            };
            if q.push(buf.rx(), Token(slot as u64)).is_err() {
                break;
            }
            self.table.commit(
                slot,
                Op {
                    kind: OpKind::Recv,
                    context,
                    buf,
                    len: accepted,
                    // Every slot reports: the application needs each `buf`, and the last one
                    // hands the buffer back.
                    report: true,
                    group: gi as u8,
                    plain: LaneKey::GENERAL, // commit decides
                    ..Op::FREE
                },
            );
            posted += 1;
        }
        // Checked above, so this does not happen; if the driver refused anyway, the slots that
        // made it form the group and the rest give their credits back.
        for _ in posted..slots {
            cq.release_credit();
        }
        if posted == 0 {
            return Err(Error::Again);
        }
        self.groups[gi] = Group {
            remaining: posted,
            owned,
        };
        Ok(())
    }
}

/// The buffer of `op`'s group if `op` was just its last slot (after [`leave_group`]).
fn leave_group_last(groups: &[Group], op: &Op) -> Option<RawBuf> {
    groups
        .get(usize::from(op.group))
        .filter(|g| g.remaining == 0)
        .map(|g| g.owned)
}

/// The flags of a canceled operation's entry.
fn completion_flags(kind: OpKind, multi: bool) -> CompletionFlags {
    match (kind, multi) {
        (OpKind::Send, _) => SEND_FLAGS,
        (_, true) => RECV_FLAGS.union(CompletionFlags::MULTI_RECV),
        (_, false) => RECV_FLAGS,
    }
}

/// Takes `op`'s slot out of its multi-receive group.
fn leave_group(groups: &mut [Group], op: &Op) -> GroupExit {
    let Some(g) = groups.get_mut(usize::from(op.group)) else {
        return GroupExit::None;
    };
    g.remaining = g.remaining.saturating_sub(1);
    if g.remaining == 0 {
        GroupExit::Last(g.owned)
    } else {
        GroupExit::Member
    }
}

/// Settles the outcome of receive `op`, taken from the table: a multi-receive slot's
/// completion points at its data (`buf`, fi_cq(3)), and the last one carries `FI_MULTI_RECV`
/// and the buffer.
#[inline(always)]
fn settle(groups: &mut [Group], header: usize, op: &Op, c: &mut Completion) {
    let exit = leave_group(groups, op);
    if exit == GroupExit::None {
        return;
    }
    if op.buf.cpu != 0 {
        c.buf = BufAddr(op.buf.cpu + header);
    }
    if let GroupExit::Last(raw) = exit {
        c.flags |= CompletionFlags::MULTI_RECV;
        c.owned = Some(raw);
    }
}

/// The tokens of one chunk of completions, either direction.
enum TokenIter<'a> {
    Rx(core::slice::Iter<'a, RxCompletion>),
    Tx(core::slice::Iter<'a, TxCompletion>),
}

impl Iterator for TokenIter<'_> {
    type Item = (Token, OpKind);
    fn next(&mut self) -> Option<Self::Item> {
        match self {
            TokenIter::Rx(i) => i.next().map(|c| (c.token, OpKind::Recv)),
            TokenIter::Tx(i) => i.next().map(|c| (c.token, OpKind::Send)),
        }
    }
}

/// The raw layer's fast lane, inside the driver's loop (`RxQueue::poll_each`): a plain
/// success for the next slot in order is written straight into `win`, the reader's next free
/// entries.
/// The first completion that is anything else, and every one after it (order!), is kept in
/// `scratch` for the general lane. Returns the completions the driver gave, the wrapping slot
/// count after the last one taken (`head` + taken), the number kept and, with `BYTES`, the
/// bytes taken (0 without: no counter can want them).
///
/// Never inlined, as [`fast_lane_framed`]: a function of its own keeps its loop's registers
/// whatever the rest of `poll` becomes.
#[inline(never)]
fn fast_lane<'s, N: Nic, const D: usize, S: Sink<'s>, const BYTES: bool>(
    q: &mut N::Rx<'_, D>,
    table: &mut OpTable<D>,
    scratch: &mut [RxCompletion; CHUNK],
    win: &mut [S::Entry],
    want: usize,
) -> (usize, usize, usize, u64) {
    // `kept` is 32-bit so that the optimiser cannot merge its increment with `next`'s into
    // one store through a chosen pointer (which kept `next` in memory, five instructions per
    // entry).
    let (mut kept, mut bytes) = (0u32, 0u64);
    // Entries not yet written; emptied when the first completion is kept.
    let mut free = win.iter_mut();
    // The wrapping slot count of the operation the next completion is for, if the device
    // completes in order: `head`, `head + 1`, …
    let mut next = table.head;
    // Core never reads the RSS hash: the driver need not either.
    let got = q.poll_each_unhashed(want, &mut |c| {
        if free.len() > 0 && c.token.0 == (next % D) as u64 {
            let op = &mut table.ops[next % D];
            if c.status.is_ok() && op.plain == LaneKey::of(Lane::Recv, NO_MR) {
                op.free();
                if let Some(entry) = free.next() {
                    S::write(
                        entry,
                        Plain {
                            context: op.context,
                            flags: RECV_FLAGS,
                            len: c.len as usize,
                        },
                    );
                }
                if BYTES {
                    bytes += u64::from(c.len);
                }
                next = next.wrapping_add(1);
                return;
            }
        }
        free = [].iter_mut();
        // More than `want` would be a driver bug; `got` ignores them as well.
        if let Some(slot) = scratch.get_mut(kept as usize) {
            *slot = *c;
            kept += 1;
        }
    });
    (got, next, kept as usize, bytes)
}

/// The framed lane of one poll: an endpoint's receives into owned buffers, on the Ethernet
/// encapsulation, read with `read`, `readfrom` or `read_owned` (docs/architecture.md, "The
/// hard CQ read path"). What it compares a header with, and the region of the buffers it takes.
#[derive(Clone, Copy)]
struct FramedLane<'s> {
    /// Bytes 12..18 of a frame for this endpoint as a little-endian number: ringfab's
    /// EtherType, its version, no flags (no remote CQ data), the endpoint's context.
    expect: u64,
    /// `LaneKey::of(Lane::OwnedRecv, mr)`: what an operation the lane takes has as `plain`.
    /// `mr` is the region of the buffers the lane takes in this poll, the oldest operation's.
    /// A buffer of another region ends the lane for the rest of the poll (the general lane
    /// takes it), so that the buffers a `read` drops go back to their region in one atomic
    /// subtraction, and a `read_owned` finds the region's count (`owner`) without a lookup per
    /// entry.
    key: LaneKey,
    owner: &'s AtomicUsize,
}

/// The low 48 bits of a `u64`: a MAC address read as a little-endian number.
const MAC_MASK: u64 = (1 << 48) - 1;

impl<'s> FramedLane<'s> {
    /// What bytes 12..18 of a frame for context `ctx` hold (see [`FramedLane::expect`]).
    fn expect(ctx: u16) -> u64 {
        let [e0, e1] = proto::ETHERTYPE.to_be_bytes();
        let [c0, c1] = ctx.to_be_bytes();
        u64::from_le_bytes([e0, e1, proto::VERSION, 0, c0, c1, 0, 0])
    }

    /// The lane for buffers of region `mr`, if it is one of `mrs`.
    fn new<N: Nic>(expect: u64, mr: u16, mrs: &'s [MrSlot<N>]) -> Option<Self> {
        owner_of(mrs, mr).map(|owner| FramedLane {
            expect,
            key: LaneKey::of(Lane::OwnedRecv, mr),
            owner,
        })
    }

    /// Runs the lane over one poll of `q`, writing entries into `win`; the rest as
    /// [`fast_lane`]. Compiled with and without the byte count (`counted`), so that a path
    /// without a counter does not pay for it.
    #[inline(always)]
    fn poll<N: Nic, const D: usize, S: Sink<'s>>(
        self,
        q: &mut N::Rx<'_, D>,
        table: &mut OpTable<D>,
        scratch: &mut [RxCompletion; CHUNK],
        win: &mut Window<'_, 's, S::Entry>,
        want: usize,
        counted: bool,
    ) -> (usize, usize, usize, u64) {
        let mut room = win.entries.len().min(want);
        if let Some(src) = &win.src {
            room = room.min(src.len());
        }
        if let Some(bufs) = &win.bufs {
            room = room.min(bufs.len());
        }
        let entries = &mut win.entries[..room];
        if counted {
            fast_lane_framed::<N, D, S, true>(q, table, scratch, entries, self, want)
        } else {
            fast_lane_framed::<N, D, S, false>(q, table, scratch, entries, self, want)
        }
    }

    /// After the lane took the `direct` operations from slot `head` on into `win`'s entries:
    /// their sources and buffers, where the reader takes them — each source a handle of `av`
    /// (one lookup per run of frames from the same sender), each buffer rebuilt from its slot
    /// — and the buffers the reader does not take go back to their region in one subtraction.
    /// A second pass over what the lane took, so that the lane's loop is the same for every
    /// reader (a loop that also wrote sources and buffers ran short of registers). It reads
    /// the freed slots, which nothing has reused yet: it runs before the general lane, the
    /// only thing that posts during a poll.
    #[inline(always)]
    fn settle<const D: usize, E>(
        self,
        table: &OpTable<D>,
        head: usize,
        win: &mut Window<'_, 's, E>,
        direct: usize,
        av: Option<AvRef<'_>>,
    ) {
        if direct == 0 {
            return;
        }
        let taken = |i: usize| &table.ops[head.wrapping_add(i) % D].buf;
        if let Some(src) = win.src.as_deref_mut() {
            // The sender of a frame is looked up once per run of frames from it: within one
            // read, as the table stood when that sender's first frame was looked up. A key of
            // all ones is the address no table holds (av.rs: it marks a free entry).
            let (mut last_key, mut last) = (u64::MAX, FiAddr::NOTAVAIL);
            for (i, a) in src[..direct].iter_mut().enumerate() {
                // SAFETY: as in the lane: the operation's buffer is registered memory of at
                // least `MAX_HEADER_LEN` bytes, written by the device before its completion
                // was observed, and still the operation's (handed back or dropped below).
                let key = unsafe { FramedHead::source(taken(i).cpu) };
                if key != last_key {
                    (last_key, last) = (key, resolve_source(key, av));
                }
                *a = last;
            }
        }
        match win.bufs.as_deref_mut() {
            Some(bufs) => {
                for (i, b) in bufs[..direct].iter_mut().enumerate() {
                    *b = Some(Buf::from_raw(*taken(i), self.owner));
                }
            }
            None => forget_posted(self.owner, direct),
        }
    }
}

/// The handle of the sender whose raw address is `key` ([`FramedHead::source`]) in `av`, or
/// `FI_ADDR_NOTAVAIL`: what the general lane finds for the same frame.
#[cold]
fn resolve_source(key: u64, av: Option<AvRef<'_>>) -> FiAddr {
    let b = key.to_le_bytes();
    let raw = EpAddr {
        mac: crate::hal::MacAddr([b[0], b[1], b[2], b[3], b[4], b[5]]),
        ctx: u16::from_be_bytes([b[6], b[7]]),
    };
    av.and_then(|av| av.reverse(raw))
        .unwrap_or(FiAddr::NOTAVAIL)
}

/// The part of a received frame's header the framed lane reads, in place: the first byte of
/// the Ethernet destination, bytes 10..18 (the end of the source MAC, EtherType, ringfab's
/// version, flags and destination context) and the payload length.
struct FramedHead {
    dst0: u8,
    w10: u64,
    payload_len: u16,
}

impl FramedHead {
    /// Reads the header of the frame in the buffer at `cpu`.
    ///
    /// # Safety
    /// `cpu` is the address of a buffer of at least 22 bytes of registered memory that the
    /// device has finished writing (its completion was observed with acquire ordering), owned
    /// by the operation being completed.
    #[inline(always)]
    unsafe fn read(cpu: usize) -> FramedHead {
        let at = |offset: usize| (cpu + offset) as *const u8;
        // SAFETY: every read lies inside the buffer's first 22 bytes (the caller's promise);
        // unaligned reads of plain integers through raw pointers, no reference into memory a
        // device can write (DESIGN.md decision 5), as `parse_header`'s copy.
        unsafe {
            FramedHead {
                dst0: at(0).read(),
                w10: u64::from_le(at(10).cast::<u64>().read_unaligned()),
                payload_len: u16::from_be(at(20).cast::<u16>().read_unaligned()),
            }
        }
    }

    /// The sender's raw address in the frame at `cpu`, as an opaque key: the source MAC in
    /// bytes 0..6 and the source context (big-endian) in bytes 6..8 of its little-endian form.
    ///
    /// # Safety
    /// As [`read`](Self::read).
    #[inline(always)]
    unsafe fn source(cpu: usize) -> u64 {
        let at = |offset: usize| (cpu + offset) as *const u8;
        // SAFETY: as in `read`: bytes 6..14 and 18..20 of the buffer.
        let (mac, ctx) = unsafe {
            (
                u64::from_le(at(6).cast::<u64>().read_unaligned()) & MAC_MASK,
                u64::from(u16::from_le(at(18).cast::<u16>().read_unaligned())),
            )
        };
        mac | ctx << 48
    }

    /// The payload length, if the frame is a plain success for the endpoint that expects
    /// `expect` ([`FramedLane::expect`]): ringfab's EtherType, version and context, no flags
    /// (remote CQ data takes the general lane), a unicast destination (a group frame carries
    /// `FI_MULTICAST`) and a payload inside the frame's `frame_len` bytes (so inside what a
    /// [`Lane::OwnedRecv`] operation accepted). Exactly the frames `rx_outcome` completes
    /// `Done` with nothing but a context, flags and a length (and the source it finds the same
    /// way).
    #[inline(always)]
    fn payload(&self, expect: u64, frame_len: u32) -> Option<u32> {
        let len = u32::from(self.payload_len);
        // A shift, not a mask: a 64-bit mask would need one more register in a loop that has
        // none to spare.
        (self.w10 >> 16 == expect
            && len + proto::HEADER_LEN as u32 <= frame_len
            && self.dst0 & 1 == 0)
            .then_some(len)
    }
}

/// The framed lane, inside the driver's loop: an endpoint's receive of the next slot in order
/// whose operation is [`Lane::OwnedRecv`] of the lane's region and whose frame is a plain
/// success ([`FramedHead::payload`]) is written straight into `entries` and its slot freed
/// (its source and buffer follow in [`FramedLane::settle`]). The first completion that is
/// anything else, and every one after it, is kept in `scratch` for the general lane. Returns
/// as [`fast_lane`].
///
/// Never inlined: a function of its own is register-allocated on its own, so that what the
/// rest of `poll` does (the general lane, [`FramedLane::settle`]) does not push the loop's
/// values out of registers. The driver's loop and the closure are inlined into it.
#[inline(never)]
fn fast_lane_framed<'s, N: Nic, const D: usize, S: Sink<'s>, const BYTES: bool>(
    q: &mut N::Rx<'_, D>,
    table: &mut OpTable<D>,
    scratch: &mut [RxCompletion; CHUNK],
    entries: &mut [S::Entry],
    lane: FramedLane<'s>,
    want: usize,
) -> (usize, usize, usize, u64) {
    let (mut kept, mut bytes) = (0u32, 0u64);
    // Entries not yet written; emptied when the first completion is kept (order!).
    let mut free = entries.iter_mut();
    let mut next = table.head;
    let got = q.poll_each_unhashed(want, &mut |c| {
        if free.len() > 0 && c.token.0 == (next % D) as u64 {
            let op = &mut table.ops[next % D];
            if c.status.is_ok() && op.plain == lane.key {
                // SAFETY: a `Lane::OwnedRecv` operation owns a registered buffer of at least
                // `MAX_HEADER_LEN` bytes at `buf.cpu` (decided at posting); the driver reported
                // it `Ok`, having observed its write-back with acquire ordering.
                let h = unsafe { FramedHead::read(op.buf.cpu) };
                if let Some(len) = h.payload(lane.expect, c.len) {
                    if let Some(entry) = free.next() {
                        S::write(
                            entry,
                            Plain {
                                context: op.context,
                                flags: RECV_FLAGS,
                                len: len as usize,
                            },
                        );
                    }
                    op.free();
                    if BYTES {
                        bytes += u64::from(len);
                    }
                    next = next.wrapping_add(1);
                    return;
                }
            }
        }
        free = [].iter_mut();
        // More than `want` would be a driver bug; `got` ignores them as well.
        if let Some(slot) = scratch.get_mut(kept as usize) {
            *slot = *c;
            kept += 1;
        }
    });
    (got, next, kept as usize, bytes)
}

/// The payload bytes of a send (`FI_CNTR_EVENTS_BYTES` counts user bytes): the frame less
/// ringfab's header on an endpoint's path, the whole frame on a raw one.
fn tx_payload(header: usize, frame_len: u32) -> usize {
    (frame_len as usize).saturating_sub(header)
}

/// Returns an owned buffer that will not reach the application to its region's count.
pub(crate) fn release<N: Nic>(mrs: &[MrSlot<N>], owned: Option<RawBuf>) {
    if let Some(raw) = owned {
        if let Some(owner) = owner_of(mrs, raw.mr) {
            drop(Buf::from_raw(raw, owner));
        }
    }
}

impl RawBuf {
    fn rx(&self) -> RxBuffer {
        RxBuffer {
            iova: self.iova,
            len: self.len,
        }
    }
}

/// The completion flags of a receive and of a send (`fi_cq(3)`, as libfabric's util CQ).
const RECV_FLAGS: CompletionFlags = CompletionFlags::RECV.union(CompletionFlags::MSG);
const SEND_FLAGS: CompletionFlags = CompletionFlags::SEND.union(CompletionFlags::MSG);

fn canceled_recv(op: &Op) -> ErrRecord {
    ErrRecord {
        completion: Completion {
            context: op.context,
            flags: RECV_FLAGS,
            owned: op.owned(),
            ..Completion::default()
        },
        err: Error::Canceled,
        olen: 0,
        prov: Some(ProvError::RxFlushed),
    }
}

/// Reads the ringfab header of a received frame out of its buffer and decides what the frame
/// is: `Ok((header, payload offset))`, or `Err(())` when it is not a well-formed frame for
/// `local`.
#[inline(always)]
fn parse_framed(f: &Framing, op: &Op, frame_len: u32) -> core::result::Result<Header, ()> {
    let local = f.local;
    let h = parse_header(f.encap, op, frame_len)?;
    let for_us = h.dst_ctx == local.ctx || h.dst_ctx == proto::ANY_CTX;
    if !for_us {
        return Err(());
    }
    Ok(h)
}

/// Reads and checks the ringfab header of a received frame out of its buffer (whoever it is
/// for).
#[inline(always)]
fn parse_header(encap: Encap, op: &Op, frame_len: u32) -> core::result::Result<Header, ()> {
    if op.buf.cpu == 0 {
        return Err(());
    }
    let mut bytes = [0u8; proto::MAX_HEADER_LEN];
    let n = (frame_len as usize)
        .min(encap.header_len())
        .min(op.buf.len as usize);
    // SAFETY: `op.buf` is registered memory of at least `op.buf.len` bytes that this operation
    // owns (an owned `Buf`, or the raw poster's promise); the device has finished writing it —
    // the driver observed its write-back with acquire ordering before reporting the token.
    // `n` stays inside the buffer and inside `bytes`.
    unsafe {
        core::ptr::copy_nonoverlapping(op.buf.cpu as *const u8, bytes.as_mut_ptr(), n);
    }
    Header::parse(encap, &bytes[..n], frame_len as usize).map_err(|_| ())
}

#[inline(always)]
fn rx_outcome(framing: Option<&Framing>, op: &Op, c: &RxCompletion, avs: AvTables<'_>) -> Verdict {
    let completion = |len: u32| Completion {
        context: op.context,
        flags: RECV_FLAGS,
        len: len as usize,
        buf: BufAddr::NULL,
        owned: op.owned(),
        ..Completion::default()
    };
    let failed = Verdict::Failed;
    match c.status {
        Ok(()) => {
            let (mut done, payload) = match framing {
                None => (completion(c.len), c.len),
                Some(f) => match parse_framed(f, op, c.len) {
                    Err(()) => return Verdict::Repost,
                    Ok(h) => {
                        let mut done = completion(u32::from(h.payload_len));
                        if h.dst.is_multicast() {
                            // Sent to a group (broadcast included); every endpoint has
                            // FI_SOURCE, which fi_cq(3) requires for this flag on a receive.
                            done.flags |= CompletionFlags::MULTICAST;
                        }
                        if let Some(data) = h.data {
                            done.data = data;
                            done.flags |= CompletionFlags::REMOTE_CQ_DATA;
                        }
                        let src = EpAddr {
                            mac: h.src,
                            ctx: h.src_ctx,
                        };
                        done.src_raw = Some(src);
                        done.src = f.av.and_then(|i| avs.get(i)).and_then(|av| av.reverse(src));
                        (done, u32::from(h.payload_len))
                    }
                },
            };
            // A frame longer than the application accepted: the first `op.len` bytes are its,
            // the rest is reported as discarded (olen), as fi_cq(3) defines truncation.
            if payload > op.len {
                done.len = op.len as usize;
                return failed(ErrRecord {
                    completion: done,
                    err: Error::Trunc,
                    olen: (payload - op.len) as usize,
                    prov: None,
                });
            }
            if framing.is_some_and(|f| f.source_err) && done.src.is_none() {
                // FI_SOURCE_ERR: an unknown sender turns the success into FI_EADDRNOTAVAIL
                // with the raw address as err_data (fi_cq(3)).
                return failed(ErrRecord {
                    completion: done,
                    err: Error::AddrNotAvail,
                    olen: 0,
                    prov: None,
                });
            }
            if op.report {
                Verdict::Done(done)
            } else {
                Verdict::Silent(payload as usize)
            }
        }
        Err(e) => failed(ErrRecord {
            // Only a frame error carries a (device-checked) length; the driver gives 0
            // otherwise. Never more than the application accepted.
            completion: completion(c.len.min(op.len)),
            err: match e {
                RxError::Flushed => Error::Canceled,
                _ => Error::Io,
            },
            olen: 0,
            prov: Some(ProvError::from_rx(e)),
        }),
    }
}

#[inline(always)]
fn tx_outcome(op: &Op, c: &TxCompletion) -> Verdict {
    let completion = Completion {
        context: op.context,
        flags: SEND_FLAGS,
        owned: op.owned(),
        ..Completion::default()
    };
    match c.status {
        Ok(()) if op.report => Verdict::Done(completion),
        Ok(()) => Verdict::Silent(0),
        Err(e) => Verdict::Failed(ErrRecord {
            completion,
            err: match e {
                TxError::Flushed => Error::Canceled,
                _ => Error::Io,
            },
            olen: 0,
            prov: Some(ProvError::from_tx(e)),
        }),
    }
}

/// A receive to post: a buffer the NIC may fill, how much of it the application accepts, and
/// the context its completion returns.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct RecvPost {
    /// The DMA buffer; at least the queue's buffer size (the device may write that much).
    pub buf: RxBuffer,
    /// Bytes the application accepts (at most `buf.len`): a longer frame completes with
    /// `Trunc` and `olen` = the excess.
    pub len: u32,
    /// Returned as `op_context`.
    pub context: OpContext,
    /// `COMPLETION` asks for a completion under `SELECTIVE_COMPLETION`; nothing else is
    /// accepted on a receive yet.
    pub flags: OpFlags,
}

/// A send to post: the frame's segments, flags and context.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct SendPost<'a> {
    /// The whole frame, Ethernet header included.
    pub segments: &'a [TxSegment],
    /// Returned as `op_context`.
    pub context: OpContext,
    /// `COMPLETION`, `INJECT_COMPLETE`, `TRANSMIT_COMPLETE`; anything else is `BadFlags`.
    pub flags: OpFlags,
}

/// Send flags the raw layer accepts: the completion levels a DGRAM transmit can honour
/// (docs/architecture.md, "Completion levels").
const SEND_FLAGS_OK: OpFlags = OpFlags::COMPLETION
    .union(OpFlags::INJECT_COMPLETE)
    .union(OpFlags::TRANSMIT_COMPLETE);

/// A handle to one open path of a [`Domain`]: an index and the domain it lives in.
///
/// Dropping the handle closes the path if it is bound to no CQ (the driver stops the hardware
/// queue); a bound path stays open, as its CQ still counts it.
pub struct Path<'d, 'n, N: Nic + 'n, const D: usize> {
    pub(crate) domain: &'d Domain<'n, N, D>,
    pub(crate) index: usize,
    /// Whether dropping this handle may close the path: the handle `open_tx`/`open_rx` gave;
    /// not a view made from an index an endpoint or context keeps ([`Path::at`]).
    pub(crate) closes: bool,
}

impl<'d, 'n, N: Nic + 'n, const D: usize> Path<'d, 'n, N, D> {
    /// The path's index in the domain's path slab.
    pub fn index(&self) -> usize {
        self.index
    }

    fn slot(&self) -> &'d PathSlot<'n, N, D> {
        &self.domain.paths()[self.index]
    }

    /// Closes the path.
    ///
    /// # Errors
    /// `Err((Error::Busy, self))` while it is bound to a CQ: unbind it first.
    pub fn close(self) -> core::result::Result<(), (Error, Self)> {
        if self.slot().cq.load(Ordering::Acquire) != NO_CQ {
            return Err((Error::Busy, self));
        }
        drop(self);
        Ok(())
    }

    /// Posts receive buffers, in order, and rings the doorbell once for all of them: the raw
    /// layer's receive ([module documentation](self), "The raw layer"). Each completion's
    /// entry carries the post's context and the frame's length (Ethernet header included, FCS
    /// not).
    ///
    /// The buffers are device addresses: memory the device may write (from
    /// [`Nic::alloc_dma`], or registered), which the application
    /// keeps and does not use while the receive is posted — core never touches it. Each
    /// receive reserves a credit of the bound CQ (so its completion can never be lost); posting
    /// stops at the first one that cannot be posted, with the op slot and credit it took
    /// released again.
    ///
    /// ```
    /// use ringfab::cq::{entry::{Msg, MsgEntry, OpContext}, CqAttr};
    /// use ringfab::domain::Domain;
    /// use ringfab::flags::{BindFlags, OpFlags};
    /// use ringfab::hal::{DmaRegion, Nic, RxBuffer, RxConfig};
    /// use ringfab::path::RecvPost;
    /// use ringfab::Capacities;
    /// use ringfab_emu::{null::NullPlatform, Igb82576};
    ///
    /// // The do-nothing 82576: it completes every buffer with a 64-byte frame at the doorbell.
    /// let nic = ringfab_igb::Igb::new(NullPlatform::<Igb82576>::new()).unwrap();
    /// let caps = Capacities { queues: 1, cqs: 1, cq_size: 64, ..Capacities::DEFAULT };
    /// let domain = Domain::<_, 64>::with_capacities(&nic, &caps);
    /// let cq = domain.open_cq::<Msg>(&CqAttr { size: 64, ..CqAttr::default() })?;
    /// let rx = domain.open_rx(0, RxConfig::new(2048))?;
    /// cq.bind(&domain, &rx, BindFlags::RECV)?;
    /// let mem = nic.alloc_dma(4 * 2048)?;
    /// let posts: Vec<RecvPost> = (0..4)
    ///     .map(|i| RecvPost {
    ///         buf: RxBuffer { iova: mem.iova().checked_add(i * 2048).unwrap(), len: 2048 },
    ///         len: 2048,
    ///         context: OpContext(i as usize),
    ///         flags: OpFlags::empty(),
    ///     })
    ///     .collect();
    /// assert_eq!(rx.post_recvs(&posts), Ok(4));
    /// let mut out = [MsgEntry::default(); 8];
    /// assert_eq!(cq.read(&domain, &mut out), Ok(4));
    /// assert_eq!((out[3].op_context, out[3].len), (OpContext(3), 64));
    /// # cq.unbind(&domain, &rx)?;
    /// # Ok::<(), ringfab::Error>(())
    /// ```
    ///
    /// # Errors
    /// Only when not even the first could be posted: `Again` (no CQ credit, ring or op table
    /// full), `NoCq` (not bound), `OpBadState` (the CQ is overrun, or this is a transmit path),
    /// `Inval` (`len` above the buffer, or a buffer below the queue's size), `BadFlags`.
    /// Otherwise `Ok(n)`, the number posted (the caller retries the rest).
    pub fn post_recvs(&self, posts: &[RecvPost]) -> Result<usize> {
        self.post_batch(posts, post_one_recv)
    }

    /// Posts sends, in order, with one doorbell: the raw layer's send. As
    /// [`post_recvs`](Self::post_recvs), for a transmit path; each [`SendPost`] names a whole
    /// frame (Ethernet header included) in device memory the application keeps until its
    /// completion (an entry with the post's context; none for a success not asked for under
    /// `FI_SELECTIVE_COMPLETION`).
    ///
    /// # Errors
    /// As `post_recvs`; `MsgSize` for a frame the device cannot send, `Inval` for a bad
    /// segment list.
    pub fn post_sends(&self, posts: &[SendPost<'_>]) -> Result<usize> {
        self.post_batch(posts, post_one_send)
    }

    /// The posting batch both directions share: under the path lock, post in order until the
    /// first failure, then one doorbell for everything posted. `Err` only when nothing was
    /// posted; otherwise `Ok(n)` and the caller retries the rest.
    fn post_batch<P>(
        &self,
        posts: &[P],
        post_one: impl Fn(&mut PathState<'n, N, D>, &CqSlot, &P) -> Result,
    ) -> Result<usize> {
        let mut guard = self.slot().state.lock();
        let Some(st) = guard.as_mut() else {
            return Err(Error::OpBadState);
        };
        let cq = self.bound_cq(st)?;
        let mut posted = 0;
        let mut failure = Ok(());
        for p in posts {
            if let Err(e) = post_one(st, cq, p) {
                failure = Err(e);
                break;
            }
            posted += 1;
        }
        match &mut st.queue {
            Queue::Tx(q) => q.doorbell(),
            Queue::Rx(q) => q.doorbell(),
        }
        match failure {
            Err(e) if posted == 0 => Err(e),
            _ => Ok(posted),
        }
    }

    /// Cancels every operation outstanding on the path (`fi_cancel` of all of them): the
    /// driver stops the hardware queue and hands every token back; operations the device had
    /// already finished complete normally, every other one completes with an error entry
    /// `Canceled` (`FI_ECANCELED`, `prov_errno` 5 or 6), delivered through the bound CQ's
    /// `read`/`readerr` in the path's order. The queue is restarted empty.
    ///
    /// This is how a path whose receives will never be filled is emptied before
    /// [`CompletionQueue::unbind`](crate::cq::CompletionQueue::unbind).
    pub fn cancel_all(&self) {
        let mut guard = self.slot().state.lock();
        match guard.as_mut().map(|st| &mut st.queue) {
            Some(Queue::Tx(q)) => q.flush(),
            Some(Queue::Rx(q)) => q.flush(),
            None => {}
        }
    }

    /// The critical fault that failed the path, if any (read without the lock).
    #[inline]
    pub(crate) fn fault(&self) -> Option<QueueFault> {
        self.slot().fault()
    }

    /// Publishes the path's fault after work done on its state outside a CQ read.
    pub(crate) fn publish_fault(&self) {
        let slot = self.slot();
        if let Some(st) = slot.state.lock().as_ref() {
            slot.publish_fault(st);
        }
    }

    /// Runs `f` on the open path's state under its lock.
    ///
    /// # Errors
    /// `OpBadState` if the path is not open; otherwise what `f` returns.
    pub(crate) fn with_state<T>(
        &self,
        f: impl FnOnce(&mut PathState<'n, N, D>) -> Result<T>,
    ) -> Result<T> {
        let mut guard = self.slot().state.lock();
        f(guard.as_mut().ok_or(Error::OpBadState)?)
    }

    /// Binds the path to CQ `cq` for an endpoint (which counts the CQ binding itself) and
    /// sets its framing and counter.
    pub(crate) fn attach(
        &self,
        cq: usize,
        flags: BindFlags,
        framing: Framing,
        cntr: Option<usize>,
    ) {
        let slot = self.slot();
        let mut guard = slot.state.lock();
        if let Some(st) = guard.as_mut() {
            st.set_binding(Some(cq), flags);
            st.framing = Some(framing);
            st.cntr = cntr;
            slot.cq.store(cq, Ordering::Release);
        }
    }

    /// Undoes [`attach`](Self::attach) and closes the path: every outstanding operation is
    /// discarded without a completion, its credit given back to `cq`.
    /// A handle on shared path `index` for an endpoint bound to it (dropping it closes
    /// nothing: a shared path is closed by its context, or by its last endpoint).
    pub(crate) fn shared(domain: &'d Domain<'n, N, D>, index: usize) -> Self {
        Self::at(domain, index)
    }

    /// A view of path `index` that closes nothing when dropped: how an endpoint or a context,
    /// which keep their paths as indices, reach them.
    pub(crate) fn at(domain: &'d Domain<'n, N, D>, index: usize) -> Self {
        Path {
            domain,
            index,
            closes: false,
        }
    }

    /// Makes the freshly opened transmit path a shared one (`fi_stx_context`): no CQ of its
    /// own, every frame reported by the device (the silent-reclaim inference needs one CQ).
    pub(crate) fn make_shared(&self, framing: Framing) {
        if let Some(st) = self.slot().state.lock().as_mut() {
            st.shared = true;
            st.hw_selective = false;
            st.framing = Some(framing);
        }
    }

    /// Closes a shared path (its context closed and no endpoint left on it): whatever is
    /// still in it is discarded, the queue given back.
    pub(crate) fn close_shared(&self) {
        let slot = self.slot();
        let mut guard = slot.state.lock();
        let mut steered = None;
        if let Some(st) = guard.as_mut() {
            // Nothing can be left (every endpoint discarded its own on leaving); the belt to
            // those braces releases credits to whichever CQs they belong to.
            if st.live() > 0 && !self.domain.cqs().is_empty() {
                st.discard_all(&self.domain.poll_ctx(0));
            }
            // A shared receive context on a queue above 0 was given its own address.
            if let Queue::Rx(q) = &st.queue {
                steered = Some(q.index()).filter(|&i| i > 0);
            }
        }
        slot.cq_mask.store(0, Ordering::Release);
        slot.owners.store(0, Ordering::Release);
        slot.orphaned.store(false, Ordering::Release);
        slot.clear_fault();
        *guard = None;
        if let Some(index) = steered {
            // Withdrawn with the queue, whoever closes it last (the context or its last
            // endpoint): left behind, the address would keep the NIC steering by address,
            // which refuses RSS. Nothing to report from a close.
            let _ = self.domain.steer_queue(index, None);
        }
    }

    pub(crate) fn detach(self, cq: usize) {
        let slot = self.slot();
        let mut guard = slot.state.lock();
        if let Some(st) = guard.as_mut() {
            st.discard_all(&self.domain.poll_ctx(cq));
            st.set_binding(None, BindFlags::empty());
        }
        slot.cq.store(NO_CQ, Ordering::Release);
        slot.clear_fault();
        // Dropping the queue stops it in hardware before anything it named is released.
        *guard = None;
    }

    fn bound_cq(&self, st: &PathState<'n, N, D>) -> Result<&'d CqSlot> {
        let index = st.cq.ok_or(Error::NoCq)?;
        self.domain.cqs().get(index).ok_or(Error::NoCq)
    }
}

impl<'n, N: Nic + 'n, const D: usize> Drop for Path<'_, 'n, N, D> {
    fn drop(&mut self) {
        if !self.closes {
            return;
        }
        let slot = &self.domain.paths()[self.index];
        let mut guard = slot.state.lock();
        if guard
            .as_ref()
            .is_some_and(|st| st.cq.is_none() && !st.shared)
        {
            // Dropping the queue stops it in hardware before its ring memory is freed.
            *guard = None;
        }
    }
}

fn push_error(e: PushError) -> Error {
    match e {
        PushError::Full { .. } => Error::Again,
        PushError::FrameLength { .. } => Error::MsgSize,
        PushError::Stopped | PushError::Fault(_) => Error::OpBadState,
        _ => Error::Inval,
    }
}

fn post_one_recv<N: Nic, const D: usize>(
    st: &mut PathState<'_, N, D>,
    cq: &CqSlot,
    p: &RecvPost,
) -> Result {
    if p.flags.unknown() != 0 || !OpFlags::COMPLETION.contains(p.flags) {
        return Err(Error::BadFlags);
    }
    if p.len > p.buf.len {
        return Err(Error::Inval);
    }
    let raw = RawBuf {
        cpu: 0,
        iova: p.buf.iova,
        len: p.buf.len,
        mr: NO_MR,
    };
    st.post_recv(cq, raw, p.len, p.context, p.flags)
}

fn post_one_send<N: Nic, const D: usize>(
    st: &mut PathState<'_, N, D>,
    cq: &CqSlot,
    p: &SendPost<'_>,
) -> Result {
    if !SEND_FLAGS_OK.contains(p.flags) {
        return Err(Error::BadFlags);
    }
    let first = p.segments.first().map_or(Iova(0), |s| s.iova);
    let raw = RawBuf {
        cpu: 0,
        iova: first,
        len: p.segments.iter().map(|s| u32::from(s.len)).sum(),
        mr: NO_MR,
    };
    st.post_send(cq, p.segments, raw, p.context, p.flags, None)
}

impl<N: Nic, const D: usize> PathState<'_, N, D> {
    /// [`post_recv`](Self::post_recv) out of line, for a caller that posts one receive per
    /// call (an endpoint's `recvmsg`): inlined there, it pushes the ring's own `push` and the
    /// op table's `commit` out of line instead, which costs more.
    #[inline(never)]
    pub(crate) fn post_recv_one(
        &mut self,
        cq: &CqSlot,
        buf: RawBuf,
        len: u32,
        context: OpContext,
        flags: OpFlags,
    ) -> Result {
        self.post_recv(cq, buf, len, context, flags)
    }

    /// Posts one receive of `buf` (the whole buffer goes to the NIC; `len` bytes of it are
    /// accepted), reserving a CQ credit; nothing is left taken on failure. No doorbell.
    /// Always inlined, into the raw layer's batch loop and into
    /// [`post_recv_one`](Self::post_recv_one).
    #[inline(always)]
    pub(crate) fn post_recv(
        &mut self,
        cq: &CqSlot,
        buf: RawBuf,
        len: u32,
        context: OpContext,
        flags: OpFlags,
    ) -> Result {
        let report = flags.needs_completion(self.bind);
        let Queue::Rx(q) = &mut self.queue else {
            return Err(Error::OpBadState);
        };
        if self.fault.is_some() {
            return Err(Error::OpBadState);
        }
        cq.reserve_credit()?;
        let Some(slot) = self.table.next_free() else {
            cq.release_credit();
            return Err(Error::Again);
        };
        if let Err(e) = q.push(buf.rx(), Token(slot as u64)) {
            cq.release_credit();
            return Err(push_error(e));
        }
        self.table.commit_as(
            slot,
            Op {
                kind: OpKind::Recv,
                context,
                buf,
                len,
                report,
                group: NO_GROUP,
                plain: recv_lane(report, &buf, len),
                ..Op::FREE
            },
        );
        Ok(())
    }

    /// Posts one send of `segments` (`buf` names the first, and the owned buffer if any),
    /// reserving a CQ credit; nothing is left taken on failure. No doorbell.
    pub(crate) fn post_send(
        &mut self,
        cq: &CqSlot,
        segments: &[TxSegment],
        buf: RawBuf,
        context: OpContext,
        flags: OpFlags,
        who: Option<Poster>,
    ) -> Result {
        let report = flags.needs_completion(who.map_or(self.bind, |w| w.bind));
        self.post_send_with(cq, segments, buf, context, report, who)
    }

    /// [`post_send`](Self::post_send) with the success report decided by the caller (an
    /// inject reports none, whatever the binding). `who` is the posting endpoint on a shared
    /// path (required there), `None` elsewhere.
    pub(crate) fn post_send_with(
        &mut self,
        cq: &CqSlot,
        segments: &[TxSegment],
        buf: RawBuf,
        context: OpContext,
        report: bool,
        who: Option<Poster>,
    ) -> Result {
        if self.shared != who.is_some() {
            return Err(Error::OpBadState);
        }
        let hw = if report || !self.hw_selective {
            Report::Always
        } else {
            Report::ErrorsOnly
        };
        let Queue::Tx(q) = &mut self.queue else {
            return Err(Error::OpBadState);
        };
        if self.fault.is_some() {
            return Err(Error::OpBadState);
        }
        cq.reserve_credit()?;
        let Some(slot) = self.table.next_free() else {
            cq.release_credit();
            return Err(Error::Again);
        };
        if let Err(e) = q.push(segments, Token(slot as u64), hw) {
            cq.release_credit();
            return Err(push_error(e));
        }
        let (cq_index, owner, cntr) = who.map_or((0, 0, NO_CNTR), |w| {
            // Shared contexts take CQs and counters below 64 (checked when binding).
            (w.cq as u8, w.owner, w.cntr.map_or(NO_CNTR, |c| c as u8))
        });
        // The frame's length (what counts as bytes sent), not the buffer's.
        let frame: u32 = segments.iter().map(|s| u32::from(s.len)).sum();
        self.table.commit(
            slot,
            Op {
                kind: OpKind::Send,
                context,
                buf,
                len: frame,
                report,
                group: NO_GROUP,
                plain: LaneKey::GENERAL, // commit decides
                cq: cq_index,
                owner,
                cntr,
                iov: NO_IOV,
            },
        );
        Ok(())
    }

    /// The op-table slot the next post will take (inject's bounce buffer is indexed by it).
    pub(crate) fn next_slot(&self) -> Option<usize> {
        self.table.next_free()
    }

    /// Rings the queue's doorbell.
    pub(crate) fn doorbell(&mut self) {
        match &mut self.queue {
            Queue::Tx(q) => q.doorbell(),
            Queue::Rx(q) => q.doorbell(),
        }
    }
}
