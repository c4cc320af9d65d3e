//! The gather pool (`Endpoint::sendv`): a gather send's segments and further buffers, kept in a
//! small per-path pool ([`IovRec`]) until the send completes, and what its completion, discard or
//! repost does with them.

use core::sync::atomic::AtomicUsize;

use super::op::{Op, OpKind};
use super::post::Poster;
use super::verdict::Verdict;
use super::Credits;
use super::{release, PathState};
use crate::buf::{RawBuf, IOV_MAX};
use crate::entry::OpContext;
use crate::hal::{Iova, Nic, TxChecksum, TxSegment};
use crate::{Error, Result};

/// `Op::iov` of an operation that is not a gather send.
pub(super) const NO_IOV: u8 = u8::MAX;

/// Gather sends in flight whose further buffers a path keeps (posting another is `Again`):
/// a small pool rather than room in every op-table slot.
pub(crate) const IOV_POOL: usize = 8;

/// A gather send in flight: its segments (to post it again after a flush) and the buffers
/// after the first (the first is the operation's own `buf`).
#[derive(Clone, Copy, Debug)]
pub(super) struct IovRec {
    pub(super) used: bool,
    segs: [TxSegment; IOV_MAX],
    nsegs: u8,
    extra: [Option<RawBuf>; IOV_MAX - 1],
}

impl IovRec {
    pub(super) const FREE: IovRec = IovRec {
        used: false,
        segs: [TxSegment {
            iova: Iova(0),
            len: 0,
        }; IOV_MAX],
        nsegs: 0,
        extra: [None; IOV_MAX - 1],
    };
}

/// Gather sends (`Endpoint::sendv`): the first buffer is the operation's own; the others and
/// the segment list wait in a pool record until the operation completes, when they travel
/// with the completion (`Completion::extra`) or go back to their regions with the first.
impl<'n, N: Nic + 'n, const D: usize> PathState<'n, N, D> {
    /// Posts a gather send: as [`post_send_checksummed`](Self::post_send_checksummed) with
    /// `segments` (the first in `buf`, which holds the header) and `extra`, the buffers after
    /// `buf`; `report` whether its success is reported, `checksum` the NIC's part of a
    /// plain-UDP datagram's checksum, if it has one.
    ///
    /// # Errors
    /// `Again` when the pool is full; otherwise as `post_send`.
    #[allow(
        clippy::too_many_arguments,
        reason = "post_send_checksummed's, plus the further buffers"
    )]
    pub(crate) fn post_send_iov(
        &mut self,
        cq: &Credits,
        segments: &[TxSegment],
        buf: RawBuf,
        extra: [Option<RawBuf>; IOV_MAX - 1],
        context: OpContext,
        report: bool,
        who: Option<Poster>,
        checksum: Option<TxChecksum>,
    ) -> Result {
        if segments.len() > IOV_MAX {
            return Err(Error::Inval);
        }
        let Some(r) = self.iov.iter().position(|r| !r.used) else {
            return Err(Error::Again);
        };
        self.post_send_checksummed(cq, segments, buf, context, report, who, checksum)?;
        let slot = self.table.tail.wrapping_sub(1) % D;
        let op = &mut self.table.ops[slot];
        op.iov = r as u8;
        // Its further buffers travel with its completion: not a lane's (`Op::lane`).
        op.plain = op.lane().0;
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
    pub(super) fn take_extras(&mut self, op: &Op) -> [Option<RawBuf>; IOV_MAX - 1] {
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
    pub(super) fn attach_extras(&mut self, op: &Op, verdict: &mut Verdict, owners: &[AtomicUsize]) {
        let extra = self.take_extras(op);
        match verdict {
            Verdict::Done(c) => c.extra = extra,
            Verdict::Failed(rec) => rec.completion.extra = extra,
            Verdict::Silent(_) | Verdict::Repost | Verdict::Consumed => {
                for raw in extra {
                    release(owners, raw);
                }
            }
        }
    }

    /// Gives an operation's further buffers back to their regions (it is discarded).
    pub(super) fn release_extras(&mut self, op: &Op, owners: &[AtomicUsize]) {
        for raw in self.take_extras(op) {
            release(owners, raw);
        }
    }

    /// The segments to push a send again with (after a flush): a gather send's list, else its
    /// frame in its one buffer.
    pub(super) fn resend_segments(&self, op: &Op) -> ([TxSegment; IOV_MAX], usize) {
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
