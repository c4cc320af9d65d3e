//! Posting one operation: a receive ([`PathState::post_recv`](super::PathState::post_recv)) or a
//! send ([`PathState::post_send`](super::PathState::post_send)), each reserving a CQ credit and an
//! op-table slot and pushing to the driver, without the doorbell. Endpoints, contexts and the raw
//! layer all post through these; [`Poster`] names the endpoint on a shared path.

use super::gather::NO_IOV;
use super::multi::NO_GROUP;
use super::op::{recv_lane, send_lane, Op, OpKind, NO_CNTR, NO_HEAD};
use super::state::Queue;
use super::Credits;
use super::PathState;
use crate::buf::RawBuf;
use crate::entry::OpContext;
use crate::flags::{BindFlags, OpFlags};
use crate::hal::{Nic, PushError, Report, RxQueue, Token, TxChecksum, TxQueue, TxSegment};
use crate::{Error, Result};

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

pub(super) fn push_error(e: PushError) -> Error {
    match e {
        PushError::Full { .. } => Error::Again,
        PushError::FrameLength { .. } => Error::MsgSize,
        PushError::Stopped | PushError::Fault(_) => Error::OpBadState,
        _ => Error::Inval,
    }
}

impl<N: Nic, const D: usize> PathState<'_, N, D> {
    /// [`post_recv`](Self::post_recv) out of line, for a caller that posts one receive per
    /// call (an endpoint's `recvmsg`): inlined there, it pushes the ring's own `push` and the
    /// op table's `commit` out of line instead, which costs more.
    #[inline(never)]
    pub(crate) fn post_recv_one(
        &mut self,
        cq: &Credits,
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
        cq: &Credits,
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
        let (plain, head) = recv_lane(report, &buf, len);
        self.table.commit_as(
            slot,
            Op {
                kind: OpKind::Recv,
                context,
                buf,
                len,
                report,
                group: NO_GROUP,
                plain,
                head,
                ..Op::FREE
            },
        );
        Ok(())
    }

    /// Posts one send of `segments` (`buf` names the first, and the owned buffer if any),
    /// reserving a CQ credit; nothing is left taken on failure. No doorbell.
    pub(crate) fn post_send(
        &mut self,
        cq: &Credits,
        segments: &[TxSegment],
        buf: RawBuf,
        context: OpContext,
        flags: OpFlags,
        who: Option<Poster>,
    ) -> Result {
        let report = self.reports(flags, who);
        self.post_send_with(cq, segments, buf, context, report, who)
    }

    /// [`post_send`](Self::post_send) with the success report decided by the caller (an
    /// inject reports none, whatever the binding). `who` is the posting endpoint on a shared
    /// path (required there), `None` elsewhere.
    pub(crate) fn post_send_with(
        &mut self,
        cq: &Credits,
        segments: &[TxSegment],
        buf: RawBuf,
        context: OpContext,
        report: bool,
        who: Option<Poster>,
    ) -> Result {
        self.post_send_checksummed(cq, segments, buf, context, report, who, None)
    }

    /// Whether a send posted with `flags` by `who` reports its success.
    pub(crate) fn reports(&self, flags: OpFlags, who: Option<Poster>) -> bool {
        flags.needs_completion(who.map_or(self.bind, |w| w.bind))
    }

    /// [`post_send_with`](Self::post_send_with), asking the NIC to insert `checksum` if given
    /// (`TxQueue::push_checksummed`: a plain-UDP datagram whose checksum field holds the
    /// pseudo-header's sum, on a NIC that offers the offload).
    #[allow(
        clippy::too_many_arguments,
        reason = "post_send_with's arguments and the checksum request"
    )]
    pub(crate) fn post_send_checksummed(
        &mut self,
        cq: &Credits,
        segments: &[TxSegment],
        buf: RawBuf,
        context: OpContext,
        report: bool,
        who: Option<Poster>,
        checksum: Option<TxChecksum>,
    ) -> Result {
        self.post_send_inline(cq, segments, buf, context, report, who, checksum)
    }

    /// [`post_send_checksummed`](Self::post_send_checksummed) always inlined, for an endpoint's
    /// sends of one buffer (`Endpoint::post_tx`), one send per call: there the call — its
    /// arguments, its prologue, its result through memory — cost more than the body's second
    /// copy (igb, batch 64: 59 instructions a send, 578 → 519).
    #[allow(
        clippy::too_many_arguments,
        reason = "post_send_checksummed's arguments"
    )]
    #[inline(always)]
    pub(crate) fn post_send_inline(
        &mut self,
        cq: &Credits,
        segments: &[TxSegment],
        buf: RawBuf,
        context: OpContext,
        report: bool,
        who: Option<Poster>,
        checksum: Option<TxChecksum>,
    ) -> Result {
        if self.kind.is_shared() != who.is_some() {
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
        let pushed = match checksum {
            None => q.push(segments, Token(slot as u64), hw),
            Some(c) => q.push_checksummed(segments, Token(slot as u64), hw, c),
        };
        if let Err(e) = pushed {
            cq.release_credit();
            return Err(push_error(e));
        }
        let (cq_index, owner, cntr) = who.map_or((0, 0, NO_CNTR), |w| {
            // Shared contexts take CQs and counters below 64 (checked when binding).
            (w.cq as u8, w.owner, w.cntr.map_or(NO_CNTR, |c| c as u8))
        });
        // The frame's length (what counts as bytes sent), not the buffer's.
        let frame: u32 = segments.iter().map(|s| u32::from(s.len)).sum();
        // The lane `Op::lane` would decide for a send, decided here rather than by building the
        // operation twice (`OpTable::commit`): a reported success is plain, or with an owned
        // buffer the send lane's. (A gather send's lane is decided again once its further
        // buffers are recorded: `post_send_iov`.)
        let plain = send_lane(report, &buf);
        let op = Op {
            kind: OpKind::Send,
            context,
            buf,
            len: frame,
            report,
            group: NO_GROUP,
            plain,
            head: NO_HEAD,
            cq: cq_index,
            owner,
            cntr,
            iov: NO_IOV,
        };
        debug_assert!(op.lane().0 == plain, "a send's lane as Op::lane decides it");
        self.table.commit_as(slot, op);
        Ok(())
    }

    /// The op-table slot the next post will take (inject's bounce buffer is indexed by it).
    pub(crate) fn next_slot(&self) -> Option<usize> {
        self.table.next_free()
    }
}
