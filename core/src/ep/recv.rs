//! Receives: `fi_recv`, `fi_recvv`, `fi_recvmsg`, multi-receive buffers.

use crate::buf::{Buf, Iov};
use crate::domain::Domain;
use crate::engine::{Credits, PathState, Queue};
use crate::entry::OpContext;
use crate::flags::OpFlags;
use crate::hal::{Nic, RxQueue};
use crate::{Error, Result};

use super::*;

impl Endpoint {
    /// Posts `buf` to receive one message (`fi_recv`) with the endpoint's default receive
    /// flags. The payload lands at [`payload_offset`](Self::payload_offset); the completion's
    /// `len` is its length and the buffer comes back with it.
    ///
    /// # Errors
    /// See [`recvmsg`](Self::recvmsg).
    pub fn recv<'d, 'n, N: Nic + 'n, const D: usize>(
        &self,
        dom: &'d Domain<'n, N, D>,
        buf: Buf<'d>,
        context: OpContext,
    ) -> core::result::Result<(), (Error, Buf<'d>)> {
        self.recvmsg(dom, buf, context, self.attr.rx_op_flags)
    }

    /// Posts the buffers of `iov` to receive one message (`fi_recvv`), with the endpoint's
    /// default receive flags. A receive descriptor of these NICs takes one buffer, so the
    /// receive `iov_limit` is 1 ([`Endpoint::info`]): `iov` holds exactly one, posted as by
    /// [`recv`](Self::recv) (its length in the list is not used: the whole buffer receives).
    ///
    /// # Errors
    /// `Inval` with the list back for an empty list or more than one buffer; otherwise as
    /// [`recvmsg`](Self::recvmsg), the list back.
    #[allow(
        clippy::result_large_err,
        reason = "decision 6: the buffers come back with the error; no allocator to box them"
    )]
    pub fn recvv<'d, 'n, N: Nic + 'n, const D: usize>(
        &self,
        dom: &'d Domain<'n, N, D>,
        iov: Iov<'d>,
        context: OpContext,
    ) -> core::result::Result<(), (Error, Iov<'d>)> {
        if iov.len() != 1 {
            return Err((Error::Inval, iov));
        }
        let Some(buf) = iov.into_bufs().next() else {
            return Err((Error::Inval, Iov::new()));
        };
        self.recv(dom, buf, context)
            .map_err(|(e, buf)| (e, Iov::from_bufs([buf])))
    }

    /// Posts a receive with explicit flags (`fi_recvmsg`); `FI_MORE` defers the doorbell.
    ///
    /// `FI_MULTI_RECV`: the buffer takes many messages. A descriptor ring places one frame per
    /// descriptor, so the buffer is carved into slots of the queue's buffer size
    /// ([`EpAttr::rx_buf_len`]), one message each; every completion's `buf` points at its
    /// payload inside the buffer, and the buffer is released — the completion carries
    /// `FI_MULTI_RECV` and hands the `Buf` back — with the message after which the free space
    /// left would be below `MIN_MULTI_RECV` ([`EpOpt::MinMultiRecv`]), so only that many slots
    /// are posted (never more than the buffer holds). Under selective completion a buffer
    /// posted without `FI_COMPLETION` reports only its release and errors. The endpoint must
    /// be made for them: [`EpAttr::multi_recv_msgs`] bounds the slots of one buffer, which
    /// keeps [`rx_size_left`](Self::rx_size_left) a true lower bound.
    ///
    /// # Errors
    /// The buffer comes back with the error: `OpBadState` before enable; `BadFlags` for flags
    /// other than `COMPLETION`/`MORE`/`MULTI_RECV`, or `MULTI_RECV` on an endpoint whose
    /// `multi_recv_msgs` is 0; `Inval` for a buffer shorter than the receive queue's buffer
    /// size (the NIC may write that much), or a multi-receive buffer that needs more slots
    /// than `multi_recv_msgs`; `Again` when the ring, the op table, the CQ's credits (a
    /// multi-receive buffer needs one per slot) or the path's multi-receive groups are full.
    pub fn recvmsg<'d, 'n, N: Nic + 'n, const D: usize>(
        &self,
        dom: &'d Domain<'n, N, D>,
        buf: Buf<'d>,
        context: OpContext,
        flags: OpFlags,
    ) -> core::result::Result<(), (Error, Buf<'d>)> {
        if let Err(e) = self.usable(dom) {
            return Err((e, buf));
        }
        if self.srx.is_some() {
            // Receives go to the shared receive context (fi_endpoint(3)).
            return Err((Error::OpNotSupp, buf));
        }
        let Some(rx) = self.rx_path(dom) else {
            return Err((Error::OpBadState, buf));
        };
        if !RX_FLAGS_OK.contains(flags) {
            return Err((Error::BadFlags, buf));
        }
        let cq = match self.cq_slot(dom, self.rx_cq) {
            Ok(cq) => cq,
            Err(e) => return Err((e, buf)),
        };
        let raw = buf.raw();
        let min_multi_recv = self.min_multi_recv;
        let multi_recv_msgs = self.attr.multi_recv_msgs;
        let header = self.payload_offset() as u32;
        let r = rx.with_state(|st| {
            let Queue::Rx(q) = &st.queue else {
                return Err(Error::OpBadState);
            };
            let dev_len = q.buf_len();
            if flags.contains(OpFlags::MULTI_RECV) {
                // (Without the `multi-recv` feature no endpoint has `multi_recv_msgs`.)
                if multi_recv_msgs == 0 || !cfg!(feature = "multi-recv") {
                    // The endpoint was not made for them (EpAttr::multi_recv_msgs).
                    return Err(Error::BadFlags);
                }
                let slots = multi_recv_slots(raw.len, dev_len, min_multi_recv)?;
                if slots > multi_recv_msgs {
                    // More messages than the endpoint's size counts a receive as: it could
                    // break the lower bound rx_size_left promised.
                    return Err(Error::Inval);
                }
                let accepted = dev_len - header;
                let r =
                    st.post_multi_recv(cq.credits, raw, dev_len, slots, accepted, context, flags);
                if !flags.contains(OpFlags::MORE) || r.is_err() {
                    st.recv_doorbell();
                }
                return r;
            }
            if raw.len < dev_len {
                return Err(Error::Inval);
            }
            let accepted = dev_len.min(raw.len) - header;
            let r = st.post_recv_one(cq.credits, raw, accepted, context, flags);
            if !flags.contains(OpFlags::MORE) || r.is_err() {
                // The device may see it later (`recv_doorbell`): fi_endpoint(3) asks a post to
                // be accepted, not to be visible to the hardware at once.
                st.recv_doorbell();
            }
            r
        });
        buf.posted(r)
    }
}

impl Endpoint {
    /// Posts every buffer of `bufs` as a receive, in order (`Some` slots; `None` slots are
    /// skipped): a batch of [`recvmsg`](Self::recvmsg) calls in one, each buffer taken out of
    /// its slot as it is posted — the form a streaming receiver reposts what
    /// [`read_owned`](crate::cq::CompletionQueue::read_owned) handed back in. Every receive of
    /// the batch carries `context` and `flags` (a program that needs a context per buffer
    /// tells the completions apart by the buffer they hand back, or posts with `recvmsg`).
    ///
    /// What each buffer gets is exactly what `recvmsg(dom, buf, context, flags)` on each in
    /// turn would give it — the same errors, completions, lanes, credits, counters and
    /// [`rx_size_left`](Self::rx_size_left) — except that the endpoint's checks, the CQ
    /// binding, the path's lock and the doorbell's decision are taken once for the batch, so
    /// that the call rings at most once: with `FI_MORE` in `flags` not at all (the doorbell
    /// waits for a later post, as `recvmsg`'s does), otherwise after the last buffer as a
    /// single post without `FI_MORE` decides it (docs/semantics.md, "When the device sees a
    /// receive": now if a quarter of the ring's worth of receives wait for it or the device
    /// holds fewer than half the ring's worth, else at a later post or CQ read) — so the device holds at least what `recvmsg` on each would have
    /// given it. A batch that stops at a buffer it cannot post rings as a refused `recvmsg`
    /// does. Returns the number posted: every buffer of the slice, whose slots are all `None`
    /// now. A slice with no buffer is `Ok(0)`: nothing is checked, posted or rung, as no call
    /// would.
    ///
    /// The name and shape: `recvmsg`'s arguments with a slice for the buffer, explicit flags
    /// (the endpoint's defaults are [`get_op_flags`](Self::get_op_flags)), and — as the raw
    /// layer's [`Path::post_recvs`](crate::path::Path::post_recvs) — the buffers not posted left
    /// where they were rather than handed back with the error. For one buffer `recvmsg` costs
    /// less (docs/perf.md, "A batched receive post").
    ///
    /// # Errors
    /// `Err((error, posted))`: `posted` buffers were posted (their slots are now `None`); the
    /// buffer after them could not be, and it and every slot after it are untouched, still
    /// the caller's. `error` is the one `recvmsg` gives for that buffer: `OpBadState` before
    /// enable or after a critical fault, `OpNotSupp` on an endpoint bound to a shared receive
    /// context (its receives go to the context), `BadFlags` for flags other than
    /// `COMPLETION`/`MORE` (these first ones with `posted` = 0); `Inval` for a buffer shorter
    /// than the receive queue's buffer size; `Again` when the ring, the op table or the CQ's
    /// credits are full. `FI_MULTI_RECV` is `BadFlags` here even on an endpoint made for
    /// multi-receive buffers (a batch posts receives of one message each; post those with
    /// `recvmsg`).
    pub fn recv_batch<'d, 'n, N: Nic + 'n, const D: usize>(
        &self,
        dom: &'d Domain<'n, N, D>,
        bufs: &mut [Option<Buf<'d>>],
        context: OpContext,
        flags: OpFlags,
    ) -> core::result::Result<usize, (Error, usize)> {
        // No buffer, no call: nothing to check or ring.
        let Some(first) = bufs.iter().position(Option::is_some) else {
            return Ok(0);
        };
        let bufs = &mut bufs[first..];
        // `recvmsg`'s checks, in its order, once.
        self.usable(dom).map_err(|e| (e, 0))?;
        if self.srx.is_some() {
            // Receives go to the shared receive context (fi_endpoint(3)).
            return Err((Error::OpNotSupp, 0));
        }
        let rx = self.rx_path(dom).ok_or((Error::OpBadState, 0))?;
        if !RX_FLAGS_OK.contains(flags) {
            return Err((Error::BadFlags, 0));
        }
        let cq = self.cq_slot(dom, self.rx_cq).map_err(|e| (e, 0))?;
        if flags.contains(OpFlags::MULTI_RECV) {
            return Err((Error::BadFlags, 0));
        }
        let header = self.payload_offset() as u32;
        // The lock taken here rather than through `Path::with_state` (see `post_each`).
        let mut guard = rx.slot().state.lock();
        let Some(st) = guard.as_mut() else {
            return Err((Error::OpBadState, 0));
        };
        let Queue::Rx(q) = &st.queue else {
            return Err((Error::OpBadState, 0));
        };
        let dev_len = q.buf_len();
        let (posted, r) = post_each(st, cq.credits, bufs, dev_len, header, context, flags);
        if !flags.contains(OpFlags::MORE) || r.is_err() {
            st.recv_doorbell();
        }
        match r {
            Ok(()) => Ok(posted),
            Err(e) => Err((e, posted)),
        }
    }
}

/// [`Endpoint::recv_batch`]'s loop: posts the buffers of `bufs` in order as `recvmsg` would
/// (each at least `dev_len` long, accepting all of it but the `header`), taking each out of its
/// slot, until one is refused; how many were posted and the refusal. No doorbell. Out of line:
/// inlined into `recv_batch`, beside its checks and the lock, the loop kept fewer values in
/// registers (igb, batch 64: 134.0 instructions a message against 123.6 so, in one build of
/// the benchmark). `recv_batch` takes the lock itself rather than through `Path::with_state`,
/// whose closure around the loop was not inlined (125.8 at batch 64, and 369.0 at batch 1
/// against 357.0: docs/perf.md, "A batched receive post").
#[inline(never)]
fn post_each<'d, N: Nic, const D: usize>(
    st: &mut PathState<'_, N, D>,
    cq: &Credits,
    bufs: &mut [Option<Buf<'d>>],
    dev_len: u32,
    header: u32,
    context: OpContext,
    flags: OpFlags,
) -> (usize, Result) {
    let accepted = dev_len - header;
    let mut posted = 0;
    for slot in bufs.iter_mut() {
        let Some(buf) = slot.as_ref() else {
            continue;
        };
        let raw = buf.raw();
        if raw.len < dev_len {
            return (posted, Err(Error::Inval));
        }
        // The post `recvmsg` makes (`post_recv_one`), inlined into the loop.
        if let Err(e) = st.post_recv(cq, raw, accepted, context, flags) {
            return (posted, Err(e));
        }
        if let Some(buf) = slot.take() {
            // Posted: its count stays with its region until it comes back.
            let _ = buf.into_raw();
        }
        posted += 1;
    }
    (posted, Ok(()))
}

/// How many slots of `slot_len` bytes a multi-receive buffer of `len` bytes gets: the message
/// after which less than `min` bytes (at least 1) would be left is the last.
fn multi_recv_slots(len: u32, slot_len: u32, min: usize) -> Result<u32> {
    let fit = len / slot_len;
    if fit == 0 {
        return Err(Error::Inval);
    }
    let min = min.max(1) as u64;
    // Release after message j when (fit - j) * slot_len < min: the smallest such j.
    let keep = (min - 1) / u64::from(slot_len); // slots whose room must stay free
    let slots = u64::from(fit).saturating_sub(keep).max(1);
    Ok(slots as u32)
}
