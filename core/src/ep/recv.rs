//! Receives: `fi_recv`, `fi_recvv`, `fi_recvmsg`, multi-receive buffers.

use crate::buf::{Buf, Iov};
use crate::domain::Domain;
use crate::engine::Queue;
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
