//! Critical faults (the engine's "Critical faults"): noticing one after a short poll, failing
//! the path ([`PathState::fail`](super::PathState::fail)), and discarding operations without a
//! completion — all of them, on a fault or at close
//! ([`PathState::discard_all`](super::PathState::discard_all)), or one
//! ([`PathState::discard`](super::PathState::discard)).

use super::multi::{leave_group, GroupExit};
use super::op::{Op, OpKind};
use super::sink::{ErrRecord, Outcome};
use super::state::{PollCtx, Queue, CHUNK, NO_RX, NO_TX};
use super::verdict::completion_flags;
use super::{release, PathState};
use crate::entry::{Completion, OpContext};
use crate::hal::Queue as _;
use crate::hal::{Nic, QueueFault, RxCompletion, RxQueue, Token, TxCompletion, TxQueue};
use crate::strerror::ProvError;
use crate::Error;

impl<'n, N: Nic + 'n, const D: usize> PathState<'n, N, D> {
    /// The critical fault the driver recorded for the queue, if any.
    #[inline]
    pub(super) fn queue_fault(&self) -> Option<QueueFault> {
        match &self.queue {
            Queue::Tx(q) => q.fault(),
            Queue::Rx(q) => q.fault(),
        }
    }

    /// After a short poll: fails the path if the driver found a critical fault (once);
    /// returns the entries given to `sink` (0 or 1).
    #[inline]
    pub(super) fn fail_if_faulted(
        &mut self,
        ctx: &PollCtx<'_>,
        sink: &mut dyn FnMut(Outcome<'_>),
    ) -> usize {
        match (self.fault, self.queue_fault()) {
            (None, Some(f)) => self.fail(f, ctx, true, sink),
            _ => 0,
        }
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
        ctx: &PollCtx<'_>,
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
                context: self.kind.framing().map_or(OpContext::NULL, |f| f.context),
                flags: completion_flags(kind, false),
                ..Completion::default()
            },
            err: Error::Io,
            olen: 0,
            prov: Some(ProvError::QueueFault(fault)),
        }));
        1
    }

    /// Discards every outstanding operation without a completion (endpoint close): the queue
    /// is flushed, every token comes back, credits are released and owned buffers returned to
    /// their regions.
    pub(crate) fn discard_all(&mut self, ctx: &PollCtx<'_>) {
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
                let op = match kind {
                    OpKind::Send => self.table.take_tx(token),
                    _ => self.table.take(token, kind),
                };
                if let Some(op) = op {
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
    /// Forgets receive `op` without a completion (close), releasing a multi-receive buffer
    /// with its last slot.
    pub(super) fn discard(&mut self, op: &Op, ctx: &PollCtx<'_>) {
        if cfg!(feature = "plain-udp") && op.kind == OpKind::Control {
            // Flushed before it was sent: lost, and counted (it holds no credit).
            super::ip::control_lost(ctx.ip);
            return;
        }
        // A shared receive context's receives hold no credit (module documentation).
        if !(self.kind.is_shared() && op.kind == OpKind::Recv) {
            self.op_cq(op, ctx).release_credit();
        }
        self.release_extras(op, ctx.owners());
        release(ctx.owners(), op.owned());
        if let GroupExit::Last(raw) = leave_group(&mut self.groups, op) {
            release(ctx.owners(), Some(raw));
        }
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
