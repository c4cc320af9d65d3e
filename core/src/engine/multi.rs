//! Multi-receive buffers (`FI_MULTI_RECV`): one buffer posted as several slots
//! ([`PathState::post_multi_recv`](super::PathState::post_multi_recv)), the group that tracks them
//! ([`Group`]), and a slot's completion settled — pointing into the buffer, and handing the buffer
//! back with the last ([`settle`]).

use super::op::{LaneKey, Op, OpKind, NO_MR};
use super::state::Queue;
use super::Credits;
use super::PathState;
use crate::buf::RawBuf;
use crate::entry::{BufAddr, Completion, OpContext};
use crate::flags::{CompletionFlags, OpFlags};
use crate::hal::{DmaSpan, Iova, Nic, RxQueue, Token};
use crate::{Error, Result};

/// `Op::group` of an operation that is not part of a multi-receive buffer.
pub(super) const NO_GROUP: u8 = u8::MAX;

/// Multi-receive buffers a path can have posted at once.
pub(crate) const MAX_GROUPS: usize = 8;

/// One multi-receive buffer (`FI_MULTI_RECV`): posted as several slots (one descriptor each),
/// released — handed back with `FI_MULTI_RECV` — with the completion of its last slot.
#[derive(Clone, Copy, Debug)]
pub(super) struct Group {
    /// Slots still outstanding; 0 = the group entry is free.
    pub(super) remaining: u32,
    /// The whole buffer, handed back with the last slot's completion.
    pub(super) owned: RawBuf,
}

/// What taking a slot out of its group means for its completion.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum GroupExit {
    /// Not a multi-receive slot.
    None,
    /// A slot, not the last: its completion points into the buffer.
    Member,
    /// The last slot: its completion also releases the buffer.
    Last(RawBuf),
}

impl<'n, N: Nic + 'n, const D: usize> PathState<'n, N, D> {
    /// Posts a multi-receive buffer (`FI_MULTI_RECV`) as `slots` receives of `slot_len` bytes
    /// each (`accepted` of them for the payload), all or none: the op slots, ring room and CQ
    /// credits are checked and reserved before the first descriptor is written. No doorbell.
    #[allow(
        clippy::too_many_arguments,
        reason = "the buffer, how it is carved (slot size, count, bytes accepted), and the \
                  operation's context and flags"
    )]
    pub(crate) fn post_multi_recv(
        &mut self,
        cq: &Credits,
        owned: RawBuf,
        slot_len: u32,
        slots: u32,
        accepted: u32,
        context: OpContext,
        flags: OpFlags,
    ) -> Result {
        // As `post_recv_one`: each message is reported if the flags and the binding ask.
        let report = flags.needs_completion(self.bind);
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
                // A slot outside the buffer cannot be (`slots * slot_len` is what the endpoint
                // carved it into); if it were, it would have no CPU address, and its frames
                // would never parse (each posted again, never seen).
                span: owned
                    .span
                    .sub(offset as usize, slot_len as usize)
                    .unwrap_or(DmaSpan::EMPTY),
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
                    // Whether each message is reported (`settle_success`): the last slot
                    // reports in any case, as it hands the buffer back.
                    report,
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
pub(super) fn leave_group_last(groups: &[Group], op: &Op) -> Option<RawBuf> {
    groups
        .get(usize::from(op.group))
        .filter(|g| g.remaining == 0)
        .map(|g| g.owned)
}

/// Takes `op`'s slot out of its multi-receive group.
pub(super) fn leave_group(groups: &mut [Group], op: &Op) -> GroupExit {
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

/// Settles the success of receive `op` (as [`settle`]) and says whether it is reported: when
/// the receive asked for a completion; otherwise, for a multi-receive buffer posted without
/// `FI_COMPLETION` under `FI_SELECTIVE_COMPLETION`, only its release — the last slot's
/// completion, with `FI_MULTI_RECV` — since the application must learn that the buffer is
/// its own again (fi_cq(3), FI_MULTI_RECV: "the original receive buffer referenced by the
/// completion has been consumed and was released by the provider"), and the messages before it
/// are successes it did not ask for.
#[inline(always)]
pub(super) fn settle_success(
    groups: &mut [Group],
    header: usize,
    op: &Op,
    c: &mut Completion,
) -> bool {
    settle(groups, header, op, c);
    op.report || c.flags.contains(CompletionFlags::MULTI_RECV)
}

/// Settles the outcome of receive `op`, taken from the table: a multi-receive slot's
/// completion points at its data (`buf`, fi_cq(3)), and the last one carries `FI_MULTI_RECV`
/// and the buffer.
#[inline(always)]
pub(super) fn settle(groups: &mut [Group], header: usize, op: &Op, c: &mut Completion) {
    let exit = leave_group(groups, op);
    if exit == GroupExit::None {
        return;
    }
    if !op.buf.span.is_empty() {
        c.buf = BufAddr(op.buf.span.addr() + header);
    }
    if let GroupExit::Last(raw) = exit {
        c.flags |= CompletionFlags::MULTI_RECV;
        c.owned = Some(raw);
    }
}
