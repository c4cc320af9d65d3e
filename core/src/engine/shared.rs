//! Shared transmit paths (`fi_stx_context`; the engine's "Shared paths"): a poll on behalf of
//! one of several CQs, holding what belongs to the others; cancel and an endpoint's close on a
//! shared path.

use super::op::{Held, Op, OpKind};
use super::sink::{ErrRecord, Outcome};
use super::state::{PollCtx, Queue, CHUNK, NO_TX};
use super::verdict::{tx_outcome, tx_payload, Verdict, SEND_FLAGS};
use super::Credits;
use super::{release, PathState};
use crate::entry::{Completion, OpContext};
use crate::hal::Queue as _;
use crate::hal::{Nic, Report, Token, TxCompletion, TxError, TxQueue};
use crate::strerror::ProvError;
use crate::Error;

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
    /// The live operation of `kind` a completion's token names on a shared path, unless a
    /// read already holds it finished: its slot and a copy.
    pub(super) fn unheld_op(&self, token: Token, kind: OpKind) -> Option<(usize, Op)> {
        let slot = usize::try_from(token.0).ok().filter(|&s| s < D)?;
        let op = self.table.ops[slot];
        (op.kind == kind && self.table.held[slot].is_none()).then_some((slot, op))
    }

    /// The CQ an operation's credit belongs to.
    pub(super) fn op_cq<'c>(&self, op: &Op, ctx: &PollCtx<'c>) -> &'c Credits {
        if self.kind.is_shared() {
            ctx.credits().get(usize::from(op.cq)).unwrap_or(ctx.cq)
        } else {
            ctx.cq
        }
    }

    /// Counts a shared path's operation on its endpoint's counter.
    fn count_shared(&self, op: &Op, ok: bool, ctx: &PollCtx<'_>) {
        let Some(c) = ctx.cntrs.counter(usize::from(op.cntr)) else {
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
    pub(super) fn poll_shared(
        &mut self,
        budget: usize,
        ctx: &PollCtx<'_>,
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
                    if cfg!(feature = "plain-udp") {
                        // A control frame of the domain's IPv4 host, or nothing.
                        self.control_done(c.token, c.status.is_ok(), ctx);
                    }
                    continue;
                };
                self.count_shared(&op, c.status.is_ok(), ctx);
                if c.status.is_ok() && !op.report {
                    self.table.take(c.token, OpKind::Send);
                    self.op_cq(&op, ctx).release_credit();
                    release(ctx.owners(), op.owned());
                    self.release_extras(&op, ctx.owners());
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
        if self.kind.framing().is_some_and(|f| !f.encap.is_ringfab()) {
            // Plain UDP: the host's control frames, and the held sends of the endpoints that
            // report to this CQ.
            let mut stop = false;
            given += self.ip_progress(ctx, sink, &mut stop).0;
        }
        given
    }

    /// Hands a finished operation of the reader's to `sink` (its slot already taken); returns
    /// the entries given and whether the read stops (an error was queued).
    fn deliver_shared(
        &mut self,
        op: &Op,
        status: core::result::Result<(), TxError>,
        ctx: &PollCtx<'_>,
        sink: &mut dyn FnMut(Outcome<'_>) -> bool,
    ) -> (usize, bool) {
        let c = TxCompletion {
            token: Token(0),
            status,
        };
        let mut verdict = tx_outcome(op, &c);
        self.attach_extras(op, &mut verdict, ctx.owners());
        match &verdict {
            Verdict::Done(done) => (1, sink(Outcome::Done(done))),
            Verdict::Failed(rec) => (1, sink(Outcome::Failed(rec))),
            Verdict::Silent(_) | Verdict::Repost | Verdict::Consumed => {
                self.op_cq(op, ctx).release_credit();
                release(ctx.owners(), op.owned());
                (0, false)
            }
        }
    }

    /// `cancel` on a shared path: only the acting endpoint's (`ctx.owner`) operations match.
    pub(super) fn cancel_shared(
        &mut self,
        target: OpContext,
        ctx: &PollCtx<'_>,
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
    pub(crate) fn discard_owner(&mut self, owner: u8, ctx: &PollCtx<'_>) {
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
        ctx: &PollCtx<'_>,
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
                let flushed = c.status == Err(TxError::Flushed);
                let Some((slot, op)) = self.unheld_op(c.token, OpKind::Send) else {
                    if cfg!(feature = "plain-udp") {
                        // A control frame: sent, or (flushed) lost and counted.
                        self.control_done(c.token, !flushed && c.status.is_ok(), ctx);
                    }
                    continue;
                };
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
                            release(ctx.owners(), op.owned());
                            self.release_extras(&op, ctx.owners());
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
