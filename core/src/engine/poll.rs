//! The CQ read's work on one path, [`PathState::poll`](super::PathState::poll): the fast lanes
//! inside the driver's loop (`fast_lane.rs`, `framed.rs`, `plain_lane.rs`) or, on a transmit
//! queue, over what its poll gave (`send_lane.rs`), then the general lane over what they left; after it, the silent reclaim of selective completion in hardware ([`path`](super)'s
//! "Selective completion in hardware"), and the [`Tally`] a poll adds to the path's counter.

use super::multi::{settle, settle_success, NO_GROUP};
use super::op::OpKind;
use super::plain_lane::PlainLane;
use super::sink::{Deliver, Outcome, Sink};
use super::state::{PollCtx, Queue, RxLane, CHUNK};
use super::verdict::{canceled_recv, is_drop, rx_outcome, tx_outcome, tx_payload, Verdict};
use super::{release, FramedLane, PathState, Tally};
use crate::hal::Queue as _;
use crate::hal::{Nic, RxQueue, Token, TxQueue};

impl Tally {
    pub(super) fn success(&mut self, len: usize) {
        self.ok += 1;
        self.bytes += len as u64;
    }

    /// Adds the tally to counter `cntr` of the domain, if the path has one.
    #[inline(always)]
    pub(super) fn apply(&self, ctx: &PollCtx<'_>, cntr: Option<usize>) {
        if let Some(index) = cntr {
            self.apply_to(ctx, index);
        }
    }

    /// [`apply`](Self::apply) for a path that has a counter (out of line: most have none).
    #[inline(never)]
    fn apply_to(&self, ctx: &PollCtx<'_>, index: usize) {
        let Some(c) = ctx.cntrs.counter(index) else {
            return;
        };
        if self.ok > 0 {
            c.complete_ok(self.ok, self.bytes);
        }
        if self.err > 0 {
            c.complete_err(self.err);
        }
    }
}

impl<'n, N: Nic + 'n, const D: usize> PathState<'n, N, D> {
    /// Polls the hardware queue for at most `budget` completions that produce an entry,
    /// turning each into an [`Outcome`] for `sink`, in the order the driver gives them.
    /// Successes nobody asked for release their credit here and never reach `sink`; received
    /// frames that are not for this endpoint are posted again. `sink` returns `true` to stop
    /// after the current chunk (an error was queued). Returns the number of outcomes given to
    /// `sink`.
    pub(crate) fn poll<'s, S: Sink<'s>>(
        &mut self,
        budget: usize,
        ctx: &PollCtx<'s>,
        sink: &mut S,
    ) -> usize {
        if self.kind.is_shared() {
            return self.poll_shared(budget, ctx, &mut |o| sink.outcome(o));
        }
        let mut given = 0;
        let mut stop = false;
        let mut reposted = false;
        let mut tally = Tally::default();
        let header = self.header_len();
        let unframed = self.kind.framing().is_none();
        // The lane decided when the path was attached (`RxLane`); `framed` is what the framed
        // lane compares a header with. One match for both: the framed path pays one test.
        let (framed, plain) = match self.rx_lane {
            RxLane::Framed(ctx) => (Some(FramedLane::expect(ctx)), false),
            // Known false without the feature, so that the plain lane is left out.
            RxLane::Plain => (None, cfg!(feature = "plain-udp")),
            RxLane::General => (None, false),
        };
        while given < budget && !stop {
            let want = (budget - given).min(CHUNK);
            let got = match &mut self.queue {
                Queue::Rx(q) => {
                    // A fast lane, inside the driver's loop (`fast_lane` on the raw layer,
                    // `fast_lane_framed` on an endpoint's path); what it does not take waits
                    // in `rx_scratch` for the general lane below.
                    let mut win = sink.window();
                    let (head, table, scratch) =
                        (self.table.head, &mut self.table, &mut self.rx_scratch);
                    let counted = self.cntr.is_some();
                    let framed_lane = match framed {
                        Some(expect) if win.whole => {
                            FramedLane::new(expect, table.ops[head % D].buf.mr, ctx.owners())
                        }
                        _ => None,
                    };
                    let plain_lane = match self.kind.framing() {
                        Some(f) if plain && win.whole => PlainLane::new(
                            f.local.mac,
                            f.addr,
                            f.broadcast,
                            f.port,
                            table.ops[head % D].buf.mr,
                            ctx.owners(),
                        ),
                        _ => None,
                    };
                    let (got, next, kept, bytes, filled) = match (framed_lane, plain_lane) {
                        (Some(lane), _) => {
                            let (got, next, kept, bytes) =
                                lane.poll::<N, D, S>(q, table, scratch, &mut win, want, counted);
                            let direct = next.wrapping_sub(head);
                            let framing = self.kind.framing();
                            let av = framing.and_then(|f| f.av).and_then(|i| ctx.avs().get(i));
                            lane.settle(table, head, &mut win, direct, av);
                            (got, next, kept, bytes, true)
                        }
                        (None, Some(lane)) => {
                            let (got, next, kept, bytes) =
                                lane.poll::<N, D, S>(q, table, scratch, &mut win, want, counted);
                            let direct = next.wrapping_sub(head);
                            let framing = self.kind.framing();
                            let av = framing.and_then(|f| f.av).and_then(|i| ctx.avs().get(i));
                            lane.settle(table, head, &mut win, direct, av);
                            (got, next, kept, bytes, true)
                        }
                        (None, None) => {
                            let room = if unframed {
                                win.entries.len().min(want)
                            } else {
                                0
                            };
                            let entries = &mut win.entries[..room];
                            // The byte count only where a counter may want it: one add less
                            // per entry (and a register more for the driver's loop) shows in
                            // the time.
                            let (got, next, kept, bytes) = if counted {
                                Self::fast_lane::<S, true>(q, table, scratch, entries, want)
                            } else {
                                Self::fast_lane::<S, false>(q, table, scratch, entries, want)
                            };
                            (got, next, kept, bytes, false)
                        }
                    };
                    let got = got.min(want);
                    // The slots taken were `head`, `head + 1`, …, `next - 1`: all freed.
                    let direct = next.wrapping_sub(head);
                    table.live -= direct;
                    table.head = next;
                    tally.ok += direct as u64;
                    tally.bytes += bytes;
                    if filled {
                        sink.commit_filled(direct);
                    } else {
                        sink.commit(direct);
                    }
                    given += direct;

                    if kept > 0 {
                        // The general lane, out of line: what the fast lanes left (rare on a
                        // busy endpoint), so that its registers and addresses are not set up
                        // on every poll.
                        let (g, st, rp) =
                            self.general_rx(kept, header, unframed, ctx, sink, &mut tally);
                        given += g;
                        stop |= st;
                        reposted |= rp;
                    }
                    got
                }
                Queue::Tx(q) => {
                    let got = q.poll(&mut self.tx_scratch[..want]).min(want);
                    // The send lane first: a leading run of an endpoint's sends of owned
                    // buffers, straight into the reader's array; the general lane takes the
                    // rest, from the first completion the lane declined.
                    let mut win = sink.window();
                    let taken = Self::send_lane::<S>(
                        &mut self.table,
                        &self.tx_scratch[..got],
                        &mut win,
                        ctx.owners(),
                        header,
                        self.cntr.is_some(),
                    );
                    let i = taken.direct;
                    if i > 0 {
                        sink.commit_filled(i);
                        given += i;
                        tally.ok += i as u64;
                        tally.bytes += taken.bytes;
                    }
                    if i < got {
                        // The general lane, out of line (as a receive poll's).
                        let (g, st) = self.general_tx(i, got, header, ctx, sink, &mut tally);
                        given += g;
                        stop |= st;
                    }
                    got
                }
            };
            self.table.advance_head();
            if got < want {
                // A short poll is where a driver's stall check may have found a critical
                // fault: one field read per poll, nothing per completion.
                given += self.fail_if_faulted(ctx, &mut |o| {
                    sink.outcome(o);
                });
                break;
            }
        }
        if let Queue::Rx(q) = &mut self.queue {
            // Frames dropped and posted again, or receives posted earlier whose doorbell
            // waited and which the device now needs (`recv_doorbell`).
            if reposted || self.table.recv_doorbell_due(true) {
                q.doorbell();
                self.table.rung = self.table.tail;
            }
        }
        if self.is_tx() && self.kind.framing().is_some_and(|f| !f.encap.is_ringfab()) {
            // A plain-UDP transmit path sends the host's control frames and its held sends.
            let (g, errors) = self.ip_progress(ctx, &mut |o| sink.outcome(o), &mut stop);
            given += g;
            tally.err += errors;
        }
        self.reclaim_silent(ctx, &mut tally);
        tally.apply(ctx, self.cntr);
        given
    }

    /// The general lane of a receive poll: the `kept` completions the fast lane left in
    /// `rx_scratch`, in the driver's order — runs of plain successes on an unframed path in
    /// one call to the sink, everything else through the operation's [`Verdict`]. Returns the
    /// outcomes given to `sink`, whether it asked to stop, and whether a buffer was posted
    /// again (its doorbell is the caller's). Out of line: on a busy endpoint the fast lanes
    /// take everything and the poll does not pay for this part's set-up.
    #[inline(never)]
    fn general_rx<'s>(
        &mut self,
        kept: usize,
        header: usize,
        unframed: bool,
        ctx: &PollCtx<'s>,
        sink: &mut dyn Deliver<'s>,
        tally: &mut Tally,
    ) -> (usize, bool, bool) {
        let Queue::Rx(q) = &mut self.queue else {
            return (0, false, false);
        };
        let (mut given, mut stop, mut reposted) = (0, false, false);
        let mut i = 0;
        while i < kept {
            // A run of plain successes on an unframed path goes to the sink in one
            // call, straight from the op table.
            if unframed {
                let k = self.table.take_plain(
                    &self.rx_scratch[i..kept],
                    header,
                    &mut self.plains,
                    tally,
                );
                if k > 0 {
                    given += k;
                    stop |= sink.plain_run(&self.plains[..k]);
                    i += k;
                    continue;
                }
            }
            let c = &self.rx_scratch[i];
            i += 1;
            let Some(op) = self.table.take(c.token, OpKind::Recv) else {
                continue;
            };
            let mut verdict = rx_outcome(self.kind.framing(), &op, c, ctx.avs(), ctx.ip);
            match &mut verdict {
                Verdict::Done(done) => {
                    if op.group != NO_GROUP && !settle_success(&mut self.groups, header, &op, done)
                    {
                        // A message of a multi-receive buffer nobody asked to
                        // hear of: a silent success.
                        tally.success(done.len);
                        ctx.cq.release_credit();
                        continue;
                    }
                    tally.success(done.len);
                    given += 1;
                    stop |= sink.deliver(Outcome::Done(done));
                }
                Verdict::Failed(rec) => {
                    if op.group != NO_GROUP {
                        settle(&mut self.groups, header, &op, &mut rec.completion);
                    }
                    tally.err += 1;
                    given += 1;
                    stop |= sink.deliver(Outcome::Failed(rec));
                }
                Verdict::Silent(payload) => {
                    tally.success(*payload);
                    ctx.cq.release_credit();
                    release(ctx.owners(), op.owned());
                }
                Verdict::Repost | Verdict::Consumed => {
                    let dropped = matches!(verdict, Verdict::Repost) && is_drop(c);
                    self.dropped += u64::from(dropped);
                    // The buffer goes back to the ring as a fresh post that keeps
                    // the operation's credit; the slot `take` just freed is there.
                    match self.table.next_free() {
                        Some(slot) if q.push(op.buf.rx(), Token(slot as u64)).is_ok() => {
                            self.table.commit(slot, op);
                            reposted = true;
                        }
                        // Cannot happen (a slot and a descriptor were just
                        // freed); should it, the operation completes canceled
                        // rather than vanish.
                        _ => {
                            let mut rec = canceled_recv(&op);
                            settle(&mut self.groups, header, &op, &mut rec.completion);
                            tally.err += 1;
                            given += 1;
                            stop |= sink.deliver(Outcome::Failed(&rec));
                        }
                    }
                }
            }
        }
        (given, stop, reposted)
    }

    /// The general lane of a transmit poll: completions `i..got` of `tx_scratch`, those the
    /// send lane declined, in the driver's order — runs of plain successes in one call to the
    /// sink, everything else through the operation's [`Verdict`]. Returns the outcomes given to
    /// `sink` and whether it asked to stop. Out of line, as [`general_rx`](Self::general_rx).
    #[inline(never)]
    fn general_tx<'s>(
        &mut self,
        mut i: usize,
        got: usize,
        header: usize,
        ctx: &PollCtx<'s>,
        sink: &mut dyn Deliver<'s>,
        tally: &mut Tally,
    ) -> (usize, bool) {
        let (mut given, mut stop) = (0, false);
        while i < got {
            // Fast path: a run of plain successes in one call to the sink.
            let k =
                self.table
                    .take_plain(&self.tx_scratch[i..got], header, &mut self.plains, tally);
            if k > 0 {
                given += k;
                stop |= sink.plain_run(&self.plains[..k]);
                i += k;
                continue;
            }
            let c = &self.tx_scratch[i];
            i += 1;
            let Some(op) = self.table.take(c.token, OpKind::Send) else {
                if cfg!(feature = "plain-udp") {
                    // A control frame of the domain's IPv4 host, or nothing.
                    self.control_done(c.token, c.status.is_ok(), ctx);
                }
                continue;
            };
            let payload = tx_payload(header, op.len);
            let mut verdict = tx_outcome(&op, c);
            self.attach_extras(&op, &mut verdict, ctx.owners());
            match &verdict {
                Verdict::Done(done) => {
                    tally.success(payload);
                    given += 1;
                    stop |= sink.deliver(Outcome::Done(done));
                }
                Verdict::Failed(rec) => {
                    tally.err += 1;
                    given += 1;
                    stop |= sink.deliver(Outcome::Failed(rec));
                }
                Verdict::Silent(_) | Verdict::Repost | Verdict::Consumed => {
                    tally.success(payload);
                    ctx.cq.release_credit();
                    release(ctx.owners(), op.owned());
                }
            }
        }
        (given, stop)
    }

    /// Releases the credits of transmits the driver reclaimed without reporting them (see
    /// the module documentation). The test is inline (a receive queue never has any); the
    /// work is not.
    #[inline(always)]
    fn reclaim_silent(&mut self, ctx: &PollCtx<'_>, tally: &mut Tally) {
        if self.hw_selective && matches!(self.queue, Queue::Tx(_)) {
            self.reclaim_silent_tx(ctx, tally);
        }
    }

    #[inline(never)]
    fn reclaim_silent_tx(&mut self, ctx: &PollCtx<'_>, tally: &mut Tally) {
        let Queue::Tx(q) = &self.queue else {
            return;
        };
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
            if cfg!(feature = "plain-udp") && op.kind == OpKind::Control {
                // A control frame, sent: it holds no credit and counts for no counter.
                self.table.take(Token(slot as u64), OpKind::Control);
                continue;
            }
            if self.table.take(Token(slot as u64), OpKind::Send).is_some() {
                ctx.cq.release_credit();
                release(ctx.owners(), op.owned());
                self.release_extras(&op, ctx.owners());
                tally.success(tx_payload(self.header_len(), op.len));
            }
        }
    }
}
