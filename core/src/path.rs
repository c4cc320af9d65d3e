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
//! (the slot in [`PathSlot`]). The CQ a path reports to is also kept in an atomic outside the
//! lock so that a CQ's read can skip paths bound elsewhere without locking them.
//!
//! # Selective completion in hardware
//!
//! An operation that needs no successful completion (`FI_SELECTIVE_COMPLETION` bind without
//! `FI_COMPLETION`) is pushed with [`Report::ErrorsOnly`] when the device completes in order
//! ([`Capabilities::in_order_completion`](crate::hal::Capabilities::in_order_completion)): the
//! driver then reclaims it silently, and the core learns that it is done only from the driver's
//! [`pending`](TxQueue::pending) count. After each poll, the oldest live operations beyond that
//! count are the silently reclaimed ones (in order, every such frame is older than any frame the
//! driver still holds), and their CQ credits are released. On an out-of-order device that
//! inference is unsound, so every frame is pushed with [`Report::Always`] and the unrequested
//! successes are dropped in software.
//!
//! This module also holds the stand-in poster ([`Path::post_recvs`], [`Path::post_sends`]) used
//! until endpoints exist; endpoints will post through the same op table.

use core::sync::atomic::{AtomicUsize, Ordering};

use spin::Mutex;

use crate::cq::entry::{BufAddr, Completion, OpContext};
use crate::cq::queue::CqSlot;
use crate::cq::strerror::ProvError;
use crate::domain::Domain;
use crate::flags::{BindFlags, CompletionFlags, OpFlags};
use crate::hal::{
    Nic, PushError, Report, RxBuffer, RxCompletion, RxError, RxQueue, Token, TxCompletion, TxError,
    TxQueue, TxSegment,
};
use crate::{Error, Result};

/// The `cq` value of a path bound to no CQ.
pub(crate) const NO_CQ: usize = usize::MAX;

/// Completions asked of the driver per `poll` call: a stack array, small enough to stay in
/// cache, large enough to amortise the call.
const CHUNK: usize = 16;

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

/// One posted operation: what the completion needs to be written without asking anyone.
#[derive(Clone, Copy, Debug)]
struct Op {
    kind: OpKind,
    context: OpContext,
    /// Flags the operation was posted with (kept for the endpoint work: completion levels).
    #[allow(
        dead_code,
        reason = "recorded for endpoints (completion levels, counters); nothing reads it yet"
    )]
    flags: OpFlags,
    /// Device address of the buffer (the first segment for a send).
    #[allow(
        dead_code,
        reason = "recorded so the buffer can be handed back by value once endpoints own buffers"
    )]
    iova: u64,
    /// Posted length: for a receive, the bytes the application accepts (≤ the DMA buffer).
    len: u32,
    /// Whether a *successful* completion was requested (errors are always reported).
    report: bool,
}

impl Op {
    const FREE: Op = Op {
        kind: OpKind::Free,
        context: OpContext::NULL,
        flags: OpFlags::empty(),
        iova: 0,
        len: 0,
        report: false,
    };
}

/// The op table of a path of depth `D`: slots handed out in ring order.
struct OpTable<const D: usize> {
    ops: [Op; D],
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

    fn commit(&mut self, slot: usize, op: Op) {
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
        let op = core::mem::replace(&mut self.ops[slot], Op::FREE);
        self.live -= 1;
        while self.head != self.tail && self.ops[self.head % D].kind == OpKind::Free {
            self.head = self.head.wrapping_add(1);
        }
        Some(op)
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

/// What one hardware completion becomes.
pub(crate) enum Outcome {
    /// A successful completion the application asked for.
    Done(Completion),
    /// An error completion, for the error queue.
    Failed(ErrRecord),
}

/// The hardware queue of a path.
enum Queue<'n, N: Nic + 'n, const D: usize> {
    Tx(N::Tx<'n, D>),
    Rx(N::Rx<'n, D>),
}

/// An open path: its queue, its op table and its binding.
pub(crate) struct PathState<'n, N: Nic + 'n, const D: usize> {
    queue: Queue<'n, N, D>,
    table: OpTable<D>,
    /// The CQ this path reports to.
    pub(crate) cq: Option<usize>,
    /// The bind flags (`SELECTIVE_COMPLETION` matters).
    bind: BindFlags,
    /// Whether unrequested transmit successes may be left to the hardware (in-order device).
    hw_selective: bool,
}

/// One slot of the domain's path slab. Make them with [`PathSlot::EMPTY`]:
/// `[PathSlot::EMPTY; 4]`.
pub struct PathSlot<'n, N: Nic + 'n, const D: usize> {
    pub(crate) state: Mutex<Option<PathState<'n, N, D>>>,
    /// The bound CQ's index, or [`NO_CQ`]; written under the lock, read without it.
    pub(crate) cq: AtomicUsize,
}

impl<'n, N: Nic + 'n, const D: usize> PathSlot<'n, N, D> {
    /// A free slot.
    #[allow(
        clippy::declare_interior_mutable_const,
        reason = "a fresh slot per use is the point: `[PathSlot::EMPTY; N]` builds the slab"
    )]
    pub const EMPTY: Self = PathSlot {
        state: Mutex::new(None),
        cq: AtomicUsize::new(NO_CQ),
    };
}

impl<'n, N: Nic + 'n, const D: usize> PathState<'n, N, D> {
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
        }
    }

    pub(crate) fn is_tx(&self) -> bool {
        matches!(self.queue, Queue::Tx(_))
    }

    /// Operations posted and not yet completed.
    pub(crate) fn live(&self) -> usize {
        self.table.live
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
    /// Successes nobody asked for release their credit on `cq` here and never reach `sink`.
    /// `sink` returns `true` to stop after the current chunk (an error was queued). Returns
    /// the number of outcomes given to `sink`.
    pub(crate) fn poll(
        &mut self,
        budget: usize,
        cq: &CqSlot<'_>,
        mut sink: impl FnMut(Outcome) -> bool,
    ) -> usize {
        let mut given = 0;
        let mut stop = false;
        while given < budget && !stop {
            let want = (budget - given).min(CHUNK);
            let got = match &mut self.queue {
                Queue::Rx(q) => {
                    let mut buf = [NO_RX; CHUNK];
                    let got = q.poll(&mut buf[..want]).min(want);
                    for c in &buf[..got] {
                        let Some(op) = self.table.take(c.token, OpKind::Recv) else {
                            continue;
                        };
                        match rx_outcome(&op, c) {
                            Some(o) => {
                                given += 1;
                                stop |= sink(o);
                            }
                            None => cq.release_credit(),
                        }
                    }
                    got
                }
                Queue::Tx(q) => {
                    let mut buf = [NO_TX; CHUNK];
                    let got = q.poll(&mut buf[..want]).min(want);
                    for c in &buf[..got] {
                        let Some(op) = self.table.take(c.token, OpKind::Send) else {
                            continue;
                        };
                        match tx_outcome(&op, c) {
                            Some(o) => {
                                given += 1;
                                stop |= sink(o);
                            }
                            None => cq.release_credit(),
                        }
                    }
                    got
                }
            };
            if got < want {
                break;
            }
        }
        self.reclaim_silent(cq);
        given
    }

    /// Releases the credits of transmits the driver reclaimed without reporting them (see
    /// the module documentation).
    fn reclaim_silent(&mut self, cq: &CqSlot<'_>) {
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
                cq.release_credit();
            }
        }
    }
}

/// The completion flags of a receive and of a send (`fi_cq(3)`, as libfabric's util CQ).
const RECV_FLAGS: CompletionFlags = CompletionFlags::RECV.union(CompletionFlags::MSG);
const SEND_FLAGS: CompletionFlags = CompletionFlags::SEND.union(CompletionFlags::MSG);

fn rx_outcome(op: &Op, c: &RxCompletion) -> Option<Outcome> {
    let completion = |len: u32| Completion {
        context: op.context,
        flags: RECV_FLAGS,
        len: len as usize,
        buf: BufAddr::NULL,
        data: 0,
        tag: 0,
    };
    match c.status {
        // A frame longer than the application accepted: the first `op.len` bytes are its, the
        // rest is reported as discarded (olen), as fi_cq(3) defines truncation.
        Ok(()) if c.len > op.len => Some(Outcome::Failed(ErrRecord {
            completion: completion(op.len),
            err: Error::Trunc,
            olen: (c.len - op.len) as usize,
            prov: None,
        })),
        Ok(()) => op.report.then(|| Outcome::Done(completion(c.len))),
        Err(e) => Some(Outcome::Failed(ErrRecord {
            // Only a frame error carries a (device-checked) length; the driver gives 0
            // otherwise. Never more than the application accepted.
            completion: completion(c.len.min(op.len)),
            err: match e {
                RxError::Flushed => Error::Canceled,
                _ => Error::Io,
            },
            olen: 0,
            prov: Some(ProvError::from_rx(e)),
        })),
    }
}

fn tx_outcome(op: &Op, c: &TxCompletion) -> Option<Outcome> {
    let completion = Completion {
        context: op.context,
        flags: SEND_FLAGS,
        len: 0,
        buf: BufAddr::NULL,
        data: 0,
        tag: 0,
    };
    match c.status {
        Ok(()) => op.report.then_some(Outcome::Done(completion)),
        Err(e) => Some(Outcome::Failed(ErrRecord {
            completion,
            err: match e {
                TxError::Flushed => Error::Canceled,
                _ => Error::Io,
            },
            olen: 0,
            prov: Some(ProvError::from_tx(e)),
        })),
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

/// Send flags the stand-in poster accepts: the completion levels a DGRAM transmit can honour
/// (docs/architecture.md, "Completion levels").
const SEND_FLAGS_OK: OpFlags = OpFlags::COMPLETION
    .union(OpFlags::INJECT_COMPLETE)
    .union(OpFlags::TRANSMIT_COMPLETE);

/// A handle to one open path of a [`Domain`]: an index and the domain it lives in.
///
/// Dropping the handle closes the path if it is bound to no CQ (the driver stops the hardware
/// queue); a bound path stays open, as its CQ still counts it.
pub struct Path<'d, 's, 'n, N: Nic + 'n, const D: usize> {
    pub(crate) domain: &'d Domain<'s, 'n, N, D>,
    pub(crate) index: usize,
}

impl<'d, 's, 'n, N: Nic + 'n, const D: usize> Path<'d, 's, 'n, N, D> {
    /// The path's index in the domain's path slab.
    pub fn index(&self) -> usize {
        self.index
    }

    fn slot(&self) -> &'s PathSlot<'n, N, D> {
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

    /// Posts receive buffers, in order, and rings the doorbell once for all of them. The
    /// stand-in for `Endpoint::recv` until endpoints exist.
    ///
    /// Each receive reserves a credit of the bound CQ (so its completion can never be lost);
    /// posting stops at the first one that cannot be posted, with the op slot and credit it
    /// took released again.
    ///
    /// # Errors
    /// Only when not even the first could be posted: `Again` (no CQ credit, ring or op table
    /// full), `NoCq` (not bound), `OpBadState` (the CQ is overrun, or this is a transmit path),
    /// `Inval` (`len` above the buffer, or a buffer below the queue's size), `BadFlags`.
    /// Otherwise `Ok(n)`, the number posted (the caller retries the rest).
    #[doc(hidden)]
    pub fn post_recvs(&self, posts: &[RecvPost]) -> Result<usize> {
        self.post_batch(posts, post_one_recv)
    }

    /// Posts sends, in order, with one doorbell. As [`post_recvs`](Self::post_recvs), for a
    /// transmit path; the stand-in for `Endpoint::send`.
    ///
    /// # Errors
    /// As `post_recvs`; `MsgSize` for a frame the device cannot send, `Inval` for a bad
    /// segment list.
    #[doc(hidden)]
    pub fn post_sends(&self, posts: &[SendPost<'_>]) -> Result<usize> {
        self.post_batch(posts, post_one_send)
    }

    /// The posting batch both directions share: under the path lock, post in order until the
    /// first failure, then one doorbell for everything posted. `Err` only when nothing was
    /// posted; otherwise `Ok(n)` and the caller retries the rest.
    fn post_batch<P>(
        &self,
        posts: &[P],
        post_one: impl Fn(&mut PathState<'n, N, D>, &CqSlot<'_>, &P) -> Result,
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

    fn bound_cq(&self, st: &PathState<'n, N, D>) -> Result<&'s CqSlot<'s>> {
        let index = st.cq.ok_or(Error::NoCq)?;
        self.domain.cqs().get(index).ok_or(Error::NoCq)
    }
}

impl<'n, N: Nic + 'n, const D: usize> Drop for Path<'_, '_, 'n, N, D> {
    fn drop(&mut self) {
        let slot = &self.domain.paths()[self.index];
        let mut guard = slot.state.lock();
        if guard.as_ref().is_some_and(|st| st.cq.is_none()) {
            // Dropping the queue stops it in hardware before its ring memory is freed.
            *guard = None;
        }
    }
}

fn push_error(e: PushError) -> Error {
    match e {
        PushError::Full { .. } => Error::Again,
        PushError::FrameLength { .. } => Error::MsgSize,
        PushError::Stopped => Error::OpBadState,
        _ => Error::Inval,
    }
}

fn post_one_recv<N: Nic, const D: usize>(
    st: &mut PathState<'_, N, D>,
    cq: &CqSlot<'_>,
    p: &RecvPost,
) -> Result {
    if p.flags.unknown() != 0 || !OpFlags::COMPLETION.contains(p.flags) {
        return Err(Error::BadFlags);
    }
    if p.len > p.buf.len {
        return Err(Error::Inval);
    }
    let Queue::Rx(q) = &mut st.queue else {
        return Err(Error::OpBadState);
    };
    cq.reserve_credit()?;
    let Some(slot) = st.table.next_free() else {
        cq.release_credit();
        return Err(Error::Again);
    };
    if let Err(e) = q.push(p.buf, Token(slot as u64)) {
        cq.release_credit();
        return Err(push_error(e));
    }
    st.table.commit(
        slot,
        Op {
            kind: OpKind::Recv,
            context: p.context,
            flags: p.flags,
            iova: p.buf.iova.0,
            len: p.len,
            report: p.flags.needs_completion(st.bind),
        },
    );
    Ok(())
}

fn post_one_send<N: Nic, const D: usize>(
    st: &mut PathState<'_, N, D>,
    cq: &CqSlot<'_>,
    p: &SendPost<'_>,
) -> Result {
    if !SEND_FLAGS_OK.contains(p.flags) {
        return Err(Error::BadFlags);
    }
    let Queue::Tx(q) = &mut st.queue else {
        return Err(Error::OpBadState);
    };
    let report = p.flags.needs_completion(st.bind);
    let hw = if report || !st.hw_selective {
        Report::Always
    } else {
        Report::ErrorsOnly
    };
    cq.reserve_credit()?;
    let Some(slot) = st.table.next_free() else {
        cq.release_credit();
        return Err(Error::Again);
    };
    if let Err(e) = q.push(p.segments, Token(slot as u64), hw) {
        cq.release_credit();
        return Err(push_error(e));
    }
    st.table.commit(
        slot,
        Op {
            kind: OpKind::Send,
            context: p.context,
            flags: p.flags,
            iova: p.segments.first().map_or(0, |s| s.iova.0),
            len: p.segments.iter().map(|s| u32::from(s.len)).sum(),
            report,
        },
    );
    Ok(())
}
