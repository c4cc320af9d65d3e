//! The raw layer ([`path`](super)'s "The raw layer"): [`RecvPost`] and [`SendPost`], and
//! [`Path::post_recvs`](super::Path::post_recvs) and [`Path::post_sends`](super::Path::post_sends),
//! which post whole frames in batches, one lock and one doorbell each.

use super::op::NO_MR;
use super::state::Queue;
use super::Credits;
use super::{Path, PathState};
use crate::buf::RawBuf;
use crate::entry::OpContext;
use crate::flags::OpFlags;
use crate::hal::Queue as _;
use crate::hal::{DmaSpan, Iova, Nic, RxBuffer, TxSegment};
use crate::{Error, Result};

/// A receive to post: a buffer the NIC may fill, how much of it the application accepts, and
/// the context its completion returns.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct RecvPost {
    /// The DMA buffer; at least the queue's buffer size (the device may write that much).
    pub buf: RxBuffer,
    /// Bytes the application accepts (at most `buf.len`): a longer frame completes with
    /// `Trunc` and `olen` = the excess.
    pub len: u32,
    /// Returned as `op_context`.
    pub context: OpContext,
    /// `COMPLETION` asks for a completion under `SELECTIVE_COMPLETION`; nothing else is
    /// accepted on a receive yet.
    pub flags: OpFlags,
}

/// A send to post: the frame's segments, flags and context.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct SendPost<'a> {
    /// The whole frame, Ethernet header included.
    pub segments: &'a [TxSegment],
    /// Returned as `op_context`.
    pub context: OpContext,
    /// `COMPLETION`, `INJECT_COMPLETE`, `TRANSMIT_COMPLETE`; anything else is `BadFlags`.
    pub flags: OpFlags,
}

/// Send flags the raw layer accepts: the completion levels a DGRAM transmit can honour
/// (docs/architecture.md, "Completion levels").
const SEND_FLAGS_OK: OpFlags = OpFlags::COMPLETION
    .union(OpFlags::INJECT_COMPLETE)
    .union(OpFlags::TRANSMIT_COMPLETE);

impl<'d, 'n, N: Nic + 'n, const D: usize> Path<'d, 'n, N, D> {
    /// Posts receive buffers, in order, and rings the doorbell once for all of them: the raw
    /// layer's receive ([module documentation](super), "The raw layer"). Each completion's
    /// entry carries the post's context and the frame's length (Ethernet header included, FCS
    /// not).
    ///
    /// The buffers are device addresses: memory the device may write (from
    /// [`Nic::alloc_dma`], or registered), which the application
    /// keeps and does not use while the receive is posted — core never touches it. Each
    /// receive reserves a credit of the bound CQ (so its completion can never be lost); posting
    /// stops at the first one that cannot be posted, with the op slot and credit it took
    /// released again.
    ///
    /// ```
    /// use ringfab::{cq::CqAttr, entry::{Msg, MsgEntry, OpContext}};
    /// use ringfab::domain::Domain;
    /// use ringfab::flags::{BindFlags, OpFlags};
    /// use ringfab::hal::{DmaRegion, Nic, RxBuffer, RxConfig};
    /// use ringfab::path::RecvPost;
    /// use ringfab::Capacities;
    /// use ringfab_emu::{null::NullPlatform, Igb82576};
    ///
    /// // The do-nothing 82576: it completes every buffer with a 64-byte frame at the doorbell.
    /// let nic = ringfab_igb::Igb::new(NullPlatform::<Igb82576>::new()).unwrap();
    /// let caps = Capacities { queues: 1, cqs: 1, cq_size: 64, ..Capacities::DEFAULT };
    /// let domain = Domain::<_, 64>::with_capacities(&nic, &caps);
    /// let cq = domain.open_cq::<Msg>(&CqAttr { size: 64, ..CqAttr::default() })?;
    /// let rx = domain.open_rx(0, RxConfig::new(2048))?;
    /// cq.bind(&domain, &rx, BindFlags::RECV)?;
    /// let mem = nic.alloc_dma(4 * 2048)?;
    /// let posts: Vec<RecvPost> = (0..4)
    ///     .map(|i| RecvPost {
    ///         buf: RxBuffer { iova: mem.iova().checked_add(i * 2048).unwrap(), len: 2048 },
    ///         len: 2048,
    ///         context: OpContext(i as usize),
    ///         flags: OpFlags::empty(),
    ///     })
    ///     .collect();
    /// assert_eq!(rx.post_recvs(&posts), Ok(4));
    /// let mut out = [MsgEntry::default(); 8];
    /// assert_eq!(cq.read(&domain, &mut out), Ok(4));
    /// assert_eq!((out[3].op_context, out[3].len), (OpContext(3), 64));
    /// # cq.unbind(&domain, &rx)?;
    /// # Ok::<(), ringfab::Error>(())
    /// ```
    ///
    /// # Errors
    /// Only when not even the first could be posted: `Again` (no CQ credit, ring or op table
    /// full), `NoCq` (not bound), `OpBadState` (the CQ is overrun, or this is a transmit path),
    /// `Inval` (`len` above the buffer, or a buffer below the queue's size), `BadFlags`.
    /// Otherwise `Ok(n)`, the number posted (the caller retries the rest).
    pub fn post_recvs(&self, posts: &[RecvPost]) -> Result<usize> {
        self.post_batch(posts, Self::post_one_recv)
    }

    /// Posts sends, in order, with one doorbell: the raw layer's send. As
    /// [`post_recvs`](Self::post_recvs), for a transmit path; each [`SendPost`] names a whole
    /// frame (Ethernet header included) in device memory the application keeps until its
    /// completion (an entry with the post's context; none for a success not asked for under
    /// `FI_SELECTIVE_COMPLETION`).
    ///
    /// # Errors
    /// As `post_recvs`; `MsgSize` for a frame the device cannot send, `Inval` for a bad
    /// segment list.
    pub fn post_sends(&self, posts: &[SendPost<'_>]) -> Result<usize> {
        self.post_batch(posts, Self::post_one_send)
    }

    /// The posting batch both directions share: under the path lock, post in order until the
    /// first failure, then one doorbell for everything posted. `Err` only when nothing was
    /// posted; otherwise `Ok(n)` and the caller retries the rest.
    fn post_batch<P>(
        &self,
        posts: &[P],
        post_one: impl Fn(&mut PathState<'n, N, D>, &Credits, &P) -> Result,
    ) -> Result<usize> {
        let mut guard = self.slot().state.lock();
        let Some(st) = guard.as_mut() else {
            return Err(Error::OpBadState);
        };
        let cq = self.bound_cq(st)?;
        let mut posted = 0;
        let mut failure = Ok(());
        for p in posts {
            if let Err(e) = post_one(st, cq, p) {
                failure = Err(e);
                break;
            }
            posted += 1;
        }
        match &mut st.queue {
            Queue::Tx(q) => q.doorbell(),
            Queue::Rx(q) => q.doorbell(),
        }
        match failure {
            Err(e) if posted == 0 => Err(e),
            _ => Ok(posted),
        }
    }

    fn post_one_recv(st: &mut PathState<'_, N, D>, cq: &Credits, p: &RecvPost) -> Result {
        if p.flags.unknown() != 0 || !OpFlags::COMPLETION.contains(p.flags) {
            return Err(Error::BadFlags);
        }
        if p.len > p.buf.len {
            return Err(Error::Inval);
        }
        let raw = RawBuf {
            span: DmaSpan::EMPTY,
            iova: p.buf.iova,
            len: p.buf.len,
            mr: NO_MR,
        };
        st.post_recv(cq, raw, p.len, p.context, p.flags)
    }

    fn post_one_send(st: &mut PathState<'_, N, D>, cq: &Credits, p: &SendPost<'_>) -> Result {
        if !SEND_FLAGS_OK.contains(p.flags) {
            return Err(Error::BadFlags);
        }
        let first = p.segments.first().map_or(Iova(0), |s| s.iova);
        let raw = RawBuf {
            span: DmaSpan::EMPTY,
            iova: first,
            len: p.segments.iter().map(|s| u32::from(s.len)).sum(),
            mr: NO_MR,
        };
        st.post_send(cq, p.segments, raw, p.context, p.flags, None)
    }
}
