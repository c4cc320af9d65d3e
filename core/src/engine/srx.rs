//! Shared receive contexts (`fi_srx_context`; the engine's "Shared receive contexts"):
//! receives posted without a credit, routed to their endpoint by the frame's header and held for
//! that endpoint's CQ; an endpoint bound to one ([`SrxEp`]); cancel, and an endpoint leaving.

use core::sync::atomic::AtomicUsize;

use super::header::parse_header;
use super::ip::IpCtx;
use super::multi::NO_GROUP;
use super::op::{Held, LaneKey, Op, OpKind};
use super::post::push_error;
use super::sink::Outcome;
use super::state::{Framing, Kind, PollCtx, Queue, CHUNK, NO_RX};
use super::verdict::{classify_plain, rx_outcome, unbound_port, NotDelivered, Verdict};
use super::{release, OpTable, PathState};
use crate::addr::EpAddr;
use crate::buf::RawBuf;
use crate::entry::OpContext;
use crate::hal::Queue as _;
use crate::hal::{Nic, RxCompletion, RxError, RxQueue, Token};
use crate::proto;
use crate::{Error, Result};

/// Endpoints one shared context takes (owner numbers are bits of a `u32`): shared transmit and
/// receive contexts alike (`crate::stx::MAX_SHARED_ENDPOINTS` is this).
pub(crate) const SRX_MAX: usize = 32;

/// `Op::owner` of a shared receive not yet routed to an endpoint.
const NO_OWNER: u8 = u8::MAX;

/// An endpoint bound to a shared receive context, as the read path routes frames to it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct SrxEp {
    /// Its address (the context's receive address, its own context number).
    pub(crate) local: EpAddr,
    /// Its CQ and counter (`NO_CNTR` for none).
    pub(crate) cq: u8,
    pub(crate) cntr: u8,
    /// Its binding is `FI_SELECTIVE_COMPLETION`.
    pub(crate) selective: bool,
    pub(crate) source_err: bool,
    pub(crate) context: OpContext,
    /// Its UDP port (plain UDP, where frames are routed by destination port); 0 on ringfab's
    /// encapsulations.
    pub(crate) port: u16,
}

/// Where a frame a shared receive context received goes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Route {
    /// To the bound endpoint with this owner number.
    To(u8),
    /// To nobody: the buffer is posted again. `dropped`: it held a frame of its own that
    /// nobody takes (counted in `dropped_frames`), rather than a continuation piece or a
    /// frame the domain's IPv4 host took (ARP, an echo request).
    Nobody { dropped: bool },
}

/// Shared receive contexts (`fi_srx_context`, `crate::srx`): the application posts receives to
/// the context; the endpoint a frame is for — and so its CQ — is known only from the frame's
/// header. A receive therefore holds no CQ credit while posted; when its frame arrives it is
/// routed (`Op::owner`, `Op::cq` set), and it takes a credit of that CQ when that CQ's read
/// delivers it (a CQ without a free credit leaves it held: nothing is lost, nothing overruns).
/// A frame for no bound endpoint, or one the device reports bad (whose header cannot be
/// trusted), goes back into the ring as a foreign frame does on an endpoint's own queue.
impl<'n, N: Nic + 'n, const D: usize> PathState<'n, N, D> {
    /// Posts one receive on a shared receive context (no credit, no doorbell).
    pub(crate) fn post_recv_srx(
        &mut self,
        buf: RawBuf,
        len: u32,
        context: OpContext,
        report: bool,
    ) -> Result {
        let Queue::Rx(q) = &mut self.queue else {
            return Err(Error::OpBadState);
        };
        if self.fault.is_some() {
            return Err(Error::OpBadState);
        }
        let Some(slot) = self.table.next_free() else {
            return Err(Error::Again);
        };
        q.push(buf.rx(), Token(slot as u64)).map_err(push_error)?;
        self.table.commit(
            slot,
            Op {
                kind: OpKind::Recv,
                context,
                buf,
                len,
                report,
                group: NO_GROUP,
                plain: LaneKey::GENERAL, // commit decides (unused: no fast lane here)
                owner: NO_OWNER,
                ..Op::FREE
            },
        );
        Ok(())
    }

    /// The endpoint a received frame is for: on ringfab's encapsulations the bound endpoint
    /// with the frame's destination context; on plain UDP (docs/ip.md, "Ports") the one bound
    /// to the datagram's destination port, after the whole classification of the receive path
    /// (ARP and echo requests go to the domain's host here, everything malformed is counted).
    fn route_srx(&self, op: &Op, c: &RxCompletion, ip: Option<IpCtx<'_>>) -> Route {
        // A frame the driver split across buffers is routed by the header in its first one.
        let (frame_len, fit) = match c.status {
            Ok(()) => (c.len, c.len),
            Err(RxError::Truncated { frame_len }) => (frame_len, c.len),
            Err(RxError::Continuation) => return Route::Nobody { dropped: false },
            Err(_) => return Route::Nobody { dropped: true },
        };
        let eps = self.kind.srx_eps();
        let encap = self.header_encap();
        let owner = if encap.is_ringfab() {
            let Ok(h) = parse_header(encap, op, frame_len) else {
                return Route::Nobody { dropped: true };
            };
            eps.iter().position(|e| {
                e.is_some_and(|e| h.dst_ctx == e.local.ctx || h.dst_ctx == proto::ANY_CTX)
            })
        } else {
            let d = match classify_plain(op, c.checksum, frame_len, fit, ip) {
                Ok(d) => d,
                Err(n) => {
                    return Route::Nobody {
                        dropped: n == NotDelivered::Dropped,
                    }
                }
            };
            let owner = eps
                .iter()
                .position(|e| e.is_some_and(|e| e.port == d.dst_port));
            if owner.is_none() {
                unbound_port(op, fit, ip);
            }
            owner
        };
        match owner {
            Some(o) => Route::To(o as u8),
            None => Route::Nobody { dropped: true },
        }
    }

    /// Puts the receive of `slot` back into the ring (its frame was for nobody).
    /// `dropped`: it held a frame of its own (not a continuation piece), counted as dropped.
    fn repost_srx(&mut self, slot: usize, ctx: &PollCtx<'_>, dropped: bool) -> bool {
        let Some(op) = self.table.take(Token(slot as u64), OpKind::Recv) else {
            return false;
        };
        self.dropped += u64::from(dropped);
        let next = self.table.next_free();
        let pushed = match (&mut self.queue, next) {
            (Queue::Rx(q), Some(next)) => q.push(op.buf.rx(), Token(next as u64)).is_ok(),
            _ => false,
        };
        if let (true, Some(next)) = (pushed, next) {
            self.table.commit(
                next,
                Op {
                    owner: NO_OWNER,
                    ..op
                },
            );
        }
        if !pushed {
            // Cannot happen (a slot and a descriptor were just freed); should it, the buffer
            // goes back to its region rather than vanish.
            release(ctx.owners(), op.owned());
        }
        pushed
    }

    /// `poll` of a shared receive context's path on behalf of CQ `ctx.reader`.
    pub(super) fn poll_srx(
        &mut self,
        budget: usize,
        ctx: &PollCtx<'_>,
        sink: &mut dyn FnMut(Outcome<'_>) -> bool,
    ) -> usize {
        let mut given = 0;
        let (head, span) = (self.table.head, self.table.live_span());
        let span = if self.table.holding > 0 { span } else { 0 };
        for k in 0..span {
            let slot = (head + k) % D;
            let op = self.table.ops[slot];
            let Some(Held::Rx { len, status }) = self.table.held[slot] else {
                continue;
            };
            if op.kind != OpKind::Recv || usize::from(op.cq) != ctx.reader {
                continue;
            }
            // Newer completions must not overtake the held ones still to deliver.
            if given >= budget || ctx.cq.reserve_credit().is_err() {
                return given;
            }
            self.table.take(Token(slot as u64), OpKind::Recv);
            let (n, stop) = self.deliver_srx(&op, len, status, ctx, sink);
            given += n;
            if stop {
                return given;
            }
        }
        let mut reposted = false;
        while given < budget {
            let want = (budget - given).min(CHUNK);
            let got = match &mut self.queue {
                Queue::Rx(q) => q.poll(&mut self.rx_scratch[..want]).min(want),
                Queue::Tx(_) => 0,
            };
            let mut stop = false;
            for i in 0..got {
                let c = self.rx_scratch[i];
                let Some((slot, op)) = self.unheld_op(c.token, OpKind::Recv) else {
                    continue;
                };
                let owner = match self.route_srx(&op, &c, ctx.ip) {
                    Route::To(owner) => owner,
                    Route::Nobody { dropped } => {
                        reposted |= self.repost_srx(slot, ctx, dropped);
                        continue;
                    }
                };
                let Some(ep) = self
                    .kind
                    .srx_eps()
                    .get(usize::from(owner))
                    .copied()
                    .flatten()
                else {
                    continue;
                };
                self.table.ops[slot].owner = owner;
                self.table.ops[slot].cq = ep.cq;
                self.table.ops[slot].cntr = ep.cntr;
                let op = self.table.ops[slot];
                if usize::from(ep.cq) == ctx.reader && !stop && ctx.cq.reserve_credit().is_ok() {
                    self.table.take(c.token, OpKind::Recv);
                    let (n, s) = self.deliver_srx(&op, c.len, c.status, ctx, sink);
                    given += n;
                    stop |= s;
                } else {
                    self.table.hold(
                        slot,
                        Held::Rx {
                            len: c.len,
                            status: c.status,
                        },
                    );
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
        if reposted {
            self.doorbell();
        }
        given
    }

    /// Hands a routed receive of the reader's to `sink` (its slot taken, a credit of the
    /// reader's CQ reserved for it): the completion as its endpoint's own queue would have
    /// made it. Returns the entries given and whether the read stops.
    fn deliver_srx(
        &mut self,
        op: &Op,
        len: u32,
        status: core::result::Result<(), RxError>,
        ctx: &PollCtx<'_>,
        sink: &mut dyn FnMut(Outcome<'_>) -> bool,
    ) -> (usize, bool) {
        let Some(ep) = self
            .kind
            .srx_eps()
            .get(usize::from(op.owner))
            .copied()
            .flatten()
        else {
            // Its endpoint left meanwhile (it reposts its held receives when it does).
            ctx.cq.release_credit();
            release(ctx.owners(), op.owned());
            return (0, false);
        };
        let framing = Framing {
            local: ep.local,
            av: self.kind.framing().and_then(|f| f.av),
            source_err: ep.source_err,
            context: ep.context,
            encap: self.header_encap(),
            port: ep.port,
            addr: crate::ip::Ipv4Addr::UNSPECIFIED,
            broadcast: crate::ip::Ipv4Addr::UNSPECIFIED,
        };
        let c = RxCompletion {
            token: Token(0),
            len,
            status,
            rss: None,
            checksum: crate::hal::RxChecksum::NONE,
        };
        // Whether a success is reported is the endpoint's binding's business (known only
        // now): selective, it takes the receive's FI_COMPLETION; otherwise always.
        let op = Op {
            report: !ep.selective || op.report,
            ..*op
        };
        let verdict = rx_outcome(Some(&framing), &op, &c, ctx.avs(), ctx.ip);
        if let Some(cn) = ctx.cntrs.counter(usize::from(ep.cntr)) {
            // The payload, as the endpoint's own queue counts it (not the padded frame).
            match &verdict {
                Verdict::Done(done) => cn.complete_ok(1, done.len as u64),
                Verdict::Silent(payload) => cn.complete_ok(1, *payload as u64),
                Verdict::Failed(_) => cn.complete_err(1),
                Verdict::Repost | Verdict::Consumed => {}
            }
        }
        match &verdict {
            Verdict::Done(done) => (1, sink(Outcome::Done(done))),
            Verdict::Failed(rec) => (1, sink(Outcome::Failed(rec))),
            _ => {
                ctx.cq.release_credit();
                release(ctx.owners(), op.owned());
                (0, false)
            }
        }
    }

    /// Cancels the receive posted to a shared receive context with `target` as its context, if
    /// one is still waiting for a frame: the queue is flushed, that receive taken out and its
    /// buffer returned (a shared receive context has no CQ to report it on); receives the
    /// device had filled are routed to their endpoints (held for their CQs) and the rest
    /// posted again in their slots, oldest first. `None` if no such receive waits.
    pub(crate) fn cancel_srx(
        &mut self,
        target: OpContext,
        owners: &[AtomicUsize],
        ip: Option<IpCtx<'_>>,
    ) -> Option<RawBuf> {
        let waiting = |t: &OpTable<D>| {
            (0..t.live_span()).any(|k| {
                let slot = (t.head + k) % D;
                let op = t.ops[slot];
                op.kind == OpKind::Recv
                    && op.owner == NO_OWNER
                    && op.context == target
                    && t.held[slot].is_none()
            })
        };
        if !waiting(&self.table) {
            return None;
        }
        if let Queue::Rx(q) = &mut self.queue {
            q.flush();
        }
        let mut canceled = None;
        let mut rx = [NO_RX; CHUNK];
        loop {
            let got = match &mut self.queue {
                Queue::Rx(q) => q.poll(&mut rx).min(CHUNK),
                Queue::Tx(_) => 0,
            };
            if got == 0 {
                break;
            }
            for c in &rx[..got] {
                let Some((slot, op)) = self.unheld_op(c.token, OpKind::Recv) else {
                    continue;
                };
                if c.status == Err(RxError::Flushed) {
                    if canceled.is_none() && op.context == target {
                        self.table.take(c.token, OpKind::Recv);
                        canceled = Some(op.buf);
                    }
                    continue; // the others are posted again below
                }
                let (routed, dropped) = match self.route_srx(&op, c, ip) {
                    Route::To(o) => (
                        self.kind
                            .srx_eps()
                            .get(usize::from(o))
                            .copied()
                            .flatten()
                            .map(|ep| (o, ep)),
                        true,
                    ),
                    Route::Nobody { dropped } => (None, dropped),
                };
                match routed {
                    Some((owner, ep)) => {
                        let held = &mut self.table.ops[slot];
                        (held.owner, held.cq, held.cntr) = (owner, ep.cq, ep.cntr);
                        self.table.hold(
                            slot,
                            Held::Rx {
                                len: c.len,
                                status: c.status,
                            },
                        );
                    }
                    // A frame for nobody, or a bad one: the receive is back from the device,
                    // never filled for anyone. Canceled if it is the target (as a flushed one
                    // is), else its buffer waits again, below.
                    None => {
                        self.dropped += u64::from(dropped);
                        if canceled.is_none() && op.context == target {
                            self.table.take(c.token, OpKind::Recv);
                            canceled = Some(op.buf);
                        }
                    }
                }
            }
        }
        let (head, span) = (self.table.head, self.table.live_span());
        for k in 0..span {
            let slot = (head + k) % D;
            let op = self.table.ops[slot];
            if op.kind != OpKind::Recv || self.table.held[slot].is_some() {
                continue;
            }
            let pushed = match &mut self.queue {
                Queue::Rx(q) => q.push(op.buf.rx(), Token(slot as u64)).is_ok(),
                Queue::Tx(_) => false,
            };
            if !pushed {
                // Cannot happen (the flush emptied the ring); should it, the buffer goes back
                // to its region rather than vanish.
                self.table.take(Token(slot as u64), OpKind::Recv);
                release(owners, op.owned());
            }
        }
        self.doorbell();
        canceled
    }

    /// An endpoint joins the shared receive context as owner `owner`: frames for `ep.local`'s
    /// context are routed to it from now on. The context has one AV for all its endpoints
    /// (fi_endpoint(3)); the first to bring one sets it.
    ///
    /// # Errors
    /// `Inval` for another AV than the context's, a context number another endpoint of the
    /// context has, or an owner number out of range; `OpBadState` on a path that is not a
    /// shared receive context's.
    pub(crate) fn join_srx(&mut self, owner: u8, ep: SrxEp, av: Option<usize>) -> Result {
        let Kind::SharedRx(framing, eps) = &mut self.kind else {
            return Err(Error::OpBadState);
        };
        match framing.av {
            None => framing.av = av,
            Some(mine) if Some(mine) != av => return Err(Error::Inval),
            Some(_) => {}
        }
        // Endpoints are told apart by context number, or on plain UDP by port.
        let clash = |e: &SrxEp| {
            if framing.encap.is_ringfab() {
                e.local.ctx == ep.local.ctx
            } else {
                e.port == ep.port
            }
        };
        if eps.iter().flatten().any(clash) {
            return Err(Error::Inval);
        }
        *eps.get_mut(usize::from(owner)).ok_or(Error::Inval)? = Some(ep);
        Ok(())
    }

    /// An endpoint leaves a shared receive context: the receives its frames filled and that
    /// its CQ has not read go back into the ring (they are the context's buffers), and it is
    /// no longer routed to.
    pub(crate) fn leave_srx(&mut self, owner: u8, ctx: &PollCtx<'_>) {
        if let Kind::SharedRx(_, eps) = &mut self.kind {
            if let Some(e) = eps.get_mut(usize::from(owner)) {
                *e = None;
            }
        }
        let (head, span) = (self.table.head, self.table.live_span());
        let mut reposted = false;
        for k in 0..span {
            let slot = (head + k) % D;
            let op = self.table.ops[slot];
            if op.kind == OpKind::Recv
                && op.owner == owner
                && matches!(self.table.held[slot], Some(Held::Rx { .. }))
            {
                reposted |= self.repost_srx(slot, ctx, true);
            }
        }
        if reposted {
            self.doorbell();
        }
    }
}
