//! Paths as applications and objects hold them: the [`Path`] handle on one hardware queue of
//! a domain, the raw layer it offers, and `SharedPath`, the queue of a shared context.
//!
//! What a path *is* — the op table, posting, polling, faults, shared paths — is the engine
//! (`core/src/engine/`), which knows no object; this module is where the engine meets the
//! [`Domain`] that owns it: a handle is an index into the domain's path table.
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
//!
//! The handle's small methods (`slot`, `at`, `with_state`, …) are `#[inline]`: they are generic,
//! and a generic function is otherwise compiled in the codegen unit of its defining module, away
//! from the engine code it wraps (the engine's `mod.rs` says what that costs).

use core::sync::atomic::Ordering;

use crate::buf::RawBuf;
use crate::domain::Domain;
use crate::engine::{Credits, Framing, PathSlot, PathState, Queue, NO_CQ, NO_MR};
use crate::entry::OpContext;
use crate::flags::{BindFlags, OpFlags};
use crate::hal::Queue as _;
use crate::hal::{DmaSpan, Iova, Nic, QueueFault, RxBuffer, TxSegment};
use crate::{Error, Result};

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

    #[inline]
    pub(crate) fn slot(&self) -> &'d PathSlot<'n, N, D> {
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
    #[inline]
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
            st.attach(cq, flags, framing, cntr);
            self.domain.mark_serving(cq, self.index, true);
            slot.cq.store(cq, Ordering::Release);
        }
    }

    /// A handle on shared path `index` for an endpoint bound to it (dropping it closes
    /// nothing: a shared path is closed by its context, or by its last endpoint).
    pub(crate) fn shared(domain: &'d Domain<'n, N, D>, index: usize) -> Self {
        Self::at(domain, index)
    }

    /// A view of path `index` that closes nothing when dropped: how an endpoint or a context,
    /// which keep their paths as indices, reach them.
    #[inline]
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
            st.make_shared(framing);
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
            if st.live() > 0 && !self.domain.credits().is_empty() {
                st.discard_all(&self.domain.poll_ctx(0));
            }
            // A shared receive context on a queue above 0 was given its own address.
            if let Queue::Rx(q) = &st.queue {
                steered = Some(q.index()).filter(|&i| i > 0);
            }
        }
        let mut served = slot.cq_mask.swap(0, Ordering::AcqRel);
        while served != 0 {
            self.domain
                .mark_serving(served.trailing_zeros() as usize, self.index, false);
            served &= served - 1;
        }
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

    /// Undoes [`attach`](Self::attach) and closes the path: every outstanding operation is
    /// discarded without a completion, its credit given back to `cq`.
    pub(crate) fn detach(self, cq: usize) {
        let slot = self.slot();
        let mut guard = slot.state.lock();
        if let Some(st) = guard.as_mut() {
            st.discard_all(&self.domain.poll_ctx(cq));
            st.set_binding(None, BindFlags::empty());
        }
        let was = slot.cq.swap(NO_CQ, Ordering::AcqRel);
        self.domain.mark_serving(was, self.index, false);
        slot.clear_fault();
        // Dropping the queue stops it in hardware before anything it named is released.
        *guard = None;
    }

    #[inline]
    pub(crate) fn bound_cq(&self, st: &PathState<'n, N, D>) -> Result<&'d Credits> {
        let index = st.cq.ok_or(Error::NoCq)?;
        self.domain.credits().get(index).ok_or(Error::NoCq)
    }
}

impl<'n, N: Nic + 'n, const D: usize> Drop for Path<'_, 'n, N, D> {
    /// Inlined: most views close nothing (an endpoint's every post makes one, `Path::at`), and
    /// the test alone costs less than the call.
    #[inline]
    fn drop(&mut self) {
        if self.closes {
            self.close_queue();
        }
    }
}

impl<'n, N: Nic + 'n, const D: usize> Path<'_, 'n, N, D> {
    /// [`Drop`]'s work for a view that closes its queue.
    #[inline(never)]
    fn close_queue(&mut self) {
        let slot = &self.domain.paths()[self.index];
        let mut guard = slot.state.lock();
        if guard
            .as_ref()
            .is_some_and(|st| st.cq.is_none() && !st.kind.is_shared())
        {
            // Dropping the queue stops it in hardware before its ring memory is freed.
            *guard = None;
        }
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

impl<'d, 'n, N: Nic + 'n, const D: usize> Path<'d, 'n, N, D> {
    /// Posts receive buffers, in order, and rings the doorbell once for all of them: the raw
    /// layer's receive ([module documentation](super), "The raw layer"). Each completion's
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
    /// use ringfab::{cq::CqAttr, entry::{Msg, MsgEntry, OpContext}};
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
        self.post_batch(posts, Self::post_one_recv)
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
        self.post_batch(posts, Self::post_one_send)
    }

    /// The posting batch both directions share: under the path lock, post in order until the
    /// first failure, then one doorbell for everything posted. `Err` only when nothing was
    /// posted; otherwise `Ok(n)` and the caller retries the rest.
    fn post_batch<P>(
        &self,
        posts: &[P],
        post_one: impl Fn(&mut PathState<'n, N, D>, &Credits, &P) -> Result,
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
        st.doorbell();
        match failure {
            Err(e) if posted == 0 => Err(e),
            _ => Ok(posted),
        }
    }

    fn post_one_recv(st: &mut PathState<'_, N, D>, cq: &Credits, p: &RecvPost) -> Result {
        if p.flags.unknown() != 0 || !OpFlags::COMPLETION.contains(p.flags) {
            return Err(Error::BadFlags);
        }
        if p.len > p.buf.len {
            return Err(Error::Inval);
        }
        let raw = RawBuf {
            span: DmaSpan::EMPTY,
            iova: p.buf.iova,
            len: p.buf.len,
            mr: NO_MR,
        };
        st.post_recv(cq, raw, p.len, p.context, p.flags)
    }

    fn post_one_send(st: &mut PathState<'_, N, D>, cq: &Credits, p: &SendPost<'_>) -> Result {
        if !SEND_FLAGS_OK.contains(p.flags) {
            return Err(Error::BadFlags);
        }
        let first = p.segments.first().map_or(Iova(0), |s| s.iova);
        let raw = RawBuf {
            span: DmaSpan::EMPTY,
            iova: first,
            len: p.segments.iter().map(|s| u32::from(s.len)).sum(),
            mr: NO_MR,
        };
        st.post_send(cq, p.segments, raw, p.context, p.flags, None)
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
