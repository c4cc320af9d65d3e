//! `fi_cancel` on a path of one endpoint, [`PathState::cancel`](super::PathState::cancel): the
//! queue is flushed, the target completes `FI_ECANCELED`, everything else is posted back in its
//! slot. (A shared path's cancel is in `shared.rs`, a shared receive context's in `srx.rs`.)

use super::multi::{leave_group, leave_group_last, settle, settle_success, GroupExit, NO_GROUP};
use super::op::OpKind;
use super::sink::{ErrRecord, Outcome};
use super::state::{PollCtx, Queue, CHUNK, NO_RX, NO_TX};
use super::verdict::{
    canceled_recv, completion_flags, is_drop, rx_outcome, tx_outcome, tx_payload, Verdict,
};
use super::{release, OpTable, PathState, Tally};
use crate::entry::{Completion, OpContext};
use crate::hal::Queue as _;
use crate::hal::{Nic, Report, RxError, RxQueue, Token, TxError, TxQueue};
use crate::strerror::ProvError;
use crate::Error;

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
        ctx: &PollCtx<'_>,
        sink: &mut dyn FnMut(Outcome<'_>),
    ) -> bool {
        if self.kind.is_shared() {
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
        ctx: &PollCtx<'_>,
        sink: &mut dyn FnMut(Outcome<'_>),
        tally: &mut Tally,
    ) -> bool {
        let live = |t: &OpTable<D>| {
            (0..t.live_span()).any(|k| {
                let op = t.ops[(t.head + k) % D];
                matches!(op.kind, OpKind::Send | OpKind::Recv) && op.context == target
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
            .find(|op| matches!(op.kind, OpKind::Send | OpKind::Recv) && op.context == target)
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
                if cfg!(feature = "plain-udp") && op.kind == OpKind::Control {
                    // A control frame is not the application's to cancel, nor to post again:
                    // sent or (flushed) lost and counted.
                    let sent = !flushed && tx[i].status.is_ok();
                    if self.table.take(token, OpKind::Control).is_some() && !sent {
                        super::ip::control_lost(ctx.ip);
                    }
                    continue;
                }
                if op.kind != kind {
                    continue;
                }
                let verdict = (!flushed).then(|| {
                    if kind == OpKind::Send {
                        tx_outcome(&op, &tx[i])
                    } else {
                        rx_outcome(self.kind.framing(), &op, &rx[i], ctx.avs(), ctx.ip)
                    }
                });
                // A foreign frame (or a piece of a split one) in a buffer filled before the
                // flush leaves the operation as it was: back from the device, never completed.
                // Like a flushed one it is canceled if chosen, else posted again below.
                let returned = match &verdict {
                    None => true,
                    Some(Verdict::Repost) => {
                        self.dropped += u64::from(is_drop(&rx[i]));
                        true
                    }
                    Some(Verdict::Consumed) => true,
                    Some(_) => false,
                };
                if returned {
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
                let Some(mut verdict) = verdict else {
                    continue;
                };
                if self.table.take(token, kind).is_none() {
                    continue;
                }
                self.attach_extras(&op, &mut verdict, ctx.owners());
                let bytes = if kind == OpKind::Send {
                    tx_payload(header, op.len)
                } else {
                    rx[i].len as usize
                };
                match &mut verdict {
                    Verdict::Done(done) => {
                        let reported = settle_success(&mut self.groups, header, &op, done);
                        tally.success(if kind == OpKind::Recv {
                            done.len
                        } else {
                            bytes
                        });
                        if reported {
                            sink(Outcome::Done(done));
                        } else {
                            ctx.cq.release_credit();
                        }
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
                        release(ctx.owners(), op.owned());
                    }
                    Verdict::Repost | Verdict::Consumed => {}
                }
            }
        }
        // A flush the device did not acknowledge (hal "Flush and quiet devices"): the driver
        // holds every buffer the device may still write and refuses pushes. Nothing is posted
        // again, and nothing completes `Canceled` with a buffer the device may write: the path
        // fails now, reporting the fault (issue 14 item 9). The operation was found (and
        // discarded with the rest): `true`, so that the caller stops searching and wakes the
        // readers of the CQ the fault entry went to.
        if let Some(fault) = self.queue_fault() {
            self.fail(fault, ctx, true, sink);
            return true;
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
