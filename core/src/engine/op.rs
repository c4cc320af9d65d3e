//! The op table: what a slot holds ([`Op`], [`OpKind`]; a shared path's finished operation,
//! [`Held`]), the fast lane an operation may take, decided when it is posted ([`Lane`],
//! [`LaneKey`]), and [`OpTable`]'s slot handling — slots handed out in ring order, taken back by
//! token, and the general lane's run of plain successes ([`DriverCompletion`]).

use super::gather::NO_IOV;
use super::multi::NO_GROUP;
use super::sink::Plain;
use super::state::CHUNK;
use super::verdict::{tx_payload, RECV_FLAGS, SEND_FLAGS};
use super::{OpTable, Tally};
use crate::buf::RawBuf;
use crate::entry::OpContext;
use crate::flags::CompletionFlags;
use crate::hal::{
    DmaHead, DmaSpan, Iova, RxBuffer, RxCompletion, RxError, Token, TxCompletion, TxError,
};
use crate::ip::UDP_HEADER_LEN;
use crate::proto;

/// What an op-table slot holds.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum OpKind {
    Free,
    Send,
    Recv,
    /// A control frame of the domain's IPv4 host (ARP, ICMP; `engine/ip.rs`) on a plain-UDP
    /// transmit path: no CQ credit, never reported; a failure is counted.
    Control,
}

/// The fast lane a success of a live operation may take, decided once, when it is posted
/// ([`OpTable::commit`]), so that a lane tests one field per completion ([`LaneKey`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u8)]
pub(super) enum Lane {
    /// None: the general lane decides (also every free slot).
    General,
    /// A [`Plain`] send: requested, no owned buffer.
    Send,
    /// A [`Plain`] receive of the raw layer: requested, no multi-receive group, no owned
    /// buffer, and the whole DMA buffer accepted — so the driver's own check of the frame
    /// length against the buffer (the `RxCompletion::len` contract) is the only one needed.
    Recv,
    /// An endpoint's receive into an owned [`Buf`](crate::mr::Buf): requested, no multi-receive
    /// group, a CPU address, at least [`proto::MAX_HEADER_LEN`] bytes (so the header can be read in
    /// place) and all of it accepted but an Ethernet-encapsulated header (so a payload that fits
    /// the frame the driver checked against the buffer fits what was accepted: no `FI_ETRUNC`). The
    /// framed lane ([`fast_lane_framed`](super::FramedLane::fast_lane_framed)) checks ringfab's
    /// header itself. A buffer longer than the queue's buffer size (of which the endpoint accepts
    /// only the queue's) takes the general lane.
    OwnedRecv,
    /// As `OwnedRecv`, but of a buffer that accepts all but plain UDP's longer header (42
    /// bytes, `ip::UDP_HEADER_LEN`): the plain-UDP lane
    /// ([`fast_lane_plain`](super::plain_lane::PlainLane)) reads the headers in place and checks
    /// the payload against what was accepted itself.
    PlainRecv,
    /// An endpoint's send of one owned [`Buf`](crate::mr::Buf): requested, not a gather send
    /// (no further buffers to hand back with it). The send lane
    /// ([`send_lane`](super::PathState::send_lane)) writes its entry and hands its buffer back
    /// without building a `Completion`.
    OwnedSend,
}

/// The lane of a send of `buf`, a frame of one segment (not a gather send), whose success is
/// reported if `report`: [`Lane::Send`] without an owned buffer, [`Lane::OwnedSend`] with one.
#[inline(always)]
pub(super) fn send_lane(report: bool, buf: &RawBuf) -> LaneKey {
    match (report, buf.mr) {
        (false, _) => LaneKey::GENERAL,
        (true, NO_MR) => LaneKey::of(Lane::Send, NO_MR),
        (true, mr) => LaneKey::of(Lane::OwnedSend, mr),
    }
}

/// [`Op::plain`]: the operation's [`Lane`] in the low byte and its buffer's region above it, so
/// that a lane tests "live, mine, and (framed lane) of the region this poll hands back" in one
/// comparison. The raw layer's operations have no region ([`NO_MR`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) struct LaneKey(u32);

impl LaneKey {
    /// No fast lane (and every free slot).
    pub(super) const GENERAL: LaneKey = LaneKey(Lane::General as u32);

    pub(super) const fn of(lane: Lane, mr: u16) -> LaneKey {
        LaneKey(lane as u32 | (mr as u32) << 8)
    }
}

/// Bytes at the start of a received frame that the lanes read in place: the framed lane
/// (`FramedHead`) up to the end of ringfab's payload length (22), the plain-UDP lane the
/// Ethernet, IPv4 and UDP headers (42).
pub(super) const FRAMED_HEAD: usize = 42;

/// The start of an operation's buffer, as the framed lane reads it: its length checked once,
/// when the operation is posted ([`recv_lane`]), so that the lane's reads carry no check.
pub(super) type FrameHead = DmaHead<FRAMED_HEAD>;

/// [`Op::head`] of an operation the framed lane does not take: zeros, readable but never
/// read (the lane reads the head only of a [`Lane::OwnedRecv`] operation).
pub(super) const NO_HEAD: FrameHead = DmaHead::from_static(&[0; FRAMED_HEAD]);

/// The lane of a receive of `buf` that accepts `len` bytes, posted alone (no multi-receive
/// group), whose success is reported if `report` ([`Lane::Recv`], [`Lane::OwnedRecv`]); and
/// for [`Lane::OwnedRecv`] the head of its buffer ([`Op::head`]).
#[inline(always)]
pub(super) fn recv_lane(report: bool, buf: &RawBuf, len: u32) -> (LaneKey, FrameHead) {
    let accepts_all_but = |header: usize| {
        (proto::MAX_HEADER_LEN..=len as usize + header).contains(&(buf.len as usize))
    };
    if !report {
        (LaneKey::GENERAL, NO_HEAD)
    } else if buf.mr == NO_MR {
        if len == buf.len {
            (LaneKey::of(Lane::Recv, NO_MR), NO_HEAD)
        } else {
            (LaneKey::GENERAL, NO_HEAD)
        }
    } else if let Some(head) = buf
        .span
        .head()
        .filter(|_| accepts_all_but(proto::HEADER_LEN))
    {
        (LaneKey::of(Lane::OwnedRecv, buf.mr), head)
    } else if let Some(head) = buf.span.head().filter(|_| accepts_all_but(UDP_HEADER_LEN)) {
        (LaneKey::of(Lane::PlainRecv, buf.mr), head)
    } else {
        (LaneKey::GENERAL, NO_HEAD)
    }
}

impl Lane {
    /// The lane of a plain completion of `kind` on the raw layer.
    const fn plain(kind: OpKind) -> Lane {
        match kind {
            OpKind::Send => Lane::Send,
            OpKind::Recv => Lane::Recv,
            OpKind::Free | OpKind::Control => Lane::General,
        }
    }
}

/// One posted operation: what the completion needs to be written without asking anyone.
///
/// Aligned to a cache line, which makes its size 64 (it is 48): the read path's lanes find an
/// operation at `slot << 6` rather than `slot * 48` (a shift instead of two instructions per
/// entry), and no operation straddles two lines.
#[derive(Clone, Copy, Debug)]
#[repr(align(64))]
pub(crate) struct Op {
    pub(super) kind: OpKind,
    pub(super) context: OpContext,
    /// The buffer: for a receive the whole DMA buffer, for a send the frame's first segment.
    /// `buf.mr` is [`NO_MR`] unless it is an owned [`Buf`](crate::mr::Buf) to hand back;
    /// `buf.span` is empty when the poster gave no CPU address (only unframed paths accept
    /// that).
    pub(super) buf: RawBuf,
    /// Posted length: for a receive, the bytes the application accepts (≤ the DMA buffer).
    pub(super) len: u32,
    /// Whether a *successful* completion was requested (errors are always reported).
    pub(super) report: bool,
    /// The multi-receive group the operation is a slot of, or [`NO_GROUP`].
    pub(super) group: u8,
    /// Which of the read path's fast lanes a success of this operation may take ([`Lane`],
    /// with the buffer's region: [`LaneKey`]); [`LaneKey::GENERAL`] whenever the slot is free.
    /// Set by [`OpTable::commit`], cleared with `kind` ([`Op::free`]): what a fast lane tests
    /// for "live, of this kind, mine".
    pub(super) plain: LaneKey,
    /// For a [`Lane::OwnedRecv`] operation its buffer's first bytes, where the framed lane
    /// reads the frame's header (`FramedHead`); [`NO_HEAD`] otherwise. Set with `plain`.
    pub(super) head: FrameHead,
    /// On a shared path ([`PathState::shared`](super::PathState::shared)): the CQ the operation
    /// reports to, the endpoint that posted it (its owner number on the shared context) and its
    /// counter ([`NO_CNTR`] for none). Unused elsewhere (the path's binding says).
    pub(super) cq: u8,
    pub(super) owner: u8,
    pub(super) cntr: u8,
    /// A gather send's record in the path's pool (`PathState::iov`), or [`NO_IOV`].
    pub(super) iov: u8,
}

// An operation is one cache line (see `Op`): the lanes find a slot with a shift.
const _: () = assert!(core::mem::size_of::<Op>() == 64);

/// `Op::cntr` of an operation counted by no counter.
pub(super) const NO_CNTR: u8 = u8::MAX;

/// `RawBuf::mr` of a buffer that is not an owned [`Buf`](crate::mr::Buf).
pub(crate) const NO_MR: u16 = u16::MAX;

impl Op {
    pub(super) const FREE: Op = Op {
        kind: OpKind::Free,
        context: OpContext::NULL,
        buf: RawBuf {
            span: DmaSpan::EMPTY,
            iova: Iova(0),
            len: 0,
            mr: NO_MR,
        },
        len: 0,
        report: false,
        group: NO_GROUP,
        plain: LaneKey::GENERAL,
        head: NO_HEAD,
        cq: 0,
        owner: 0,
        cntr: NO_CNTR,
        iov: NO_IOV,
    };

    pub(super) fn owned(&self) -> Option<RawBuf> {
        (self.buf.mr != NO_MR).then_some(self.buf)
    }

    /// The fast lane a success of this operation may take ([`Lane`]), and the head the framed
    /// lane reads ([`Op::head`]).
    pub(super) fn lane(&self) -> (LaneKey, FrameHead) {
        match self.kind {
            _ if self.group != NO_GROUP => (LaneKey::GENERAL, NO_HEAD),
            OpKind::Recv => recv_lane(self.report, &self.buf, self.len),
            // A gather send's further buffers travel with its completion: the general lane's.
            OpKind::Send if self.iov == NO_IOV => (send_lane(self.report, &self.buf), NO_HEAD),
            _ => (LaneKey::GENERAL, NO_HEAD),
        }
    }

    /// Marks the slot free (only `kind` and `plain` say so; the rest is overwritten by the
    /// next commit).
    #[inline(always)]
    pub(super) fn free(&mut self) {
        self.kind = OpKind::Free;
        self.plain = LaneKey::GENERAL;
    }
}

/// A finished operation's status, held in its slot for its CQ (shared paths).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Held {
    Tx(core::result::Result<(), TxError>),
    Rx {
        len: u32,
        status: core::result::Result<(), RxError>,
    },
}

impl<const D: usize> OpTable<D> {
    pub(super) const fn new() -> Self {
        OpTable {
            ops: [Op::FREE; D],
            held: [None; D],
            holding: 0,
            head: 0,
            tail: 0,
            live: 0,
            rung: 0,
        }
    }

    /// The slot the next operation would take, if it is free.
    pub(super) fn next_free(&self) -> Option<usize> {
        let slot = self.tail % D;
        (self.tail.wrapping_sub(self.head) < D && self.ops[slot].kind == OpKind::Free)
            .then_some(slot)
    }

    /// Commits `op` into `slot`, its lane decided here ([`Lane`]).
    pub(super) fn commit(&mut self, slot: usize, op: Op) {
        let (plain, head) = op.lane();
        self.commit_as(slot, Op { plain, head, ..op });
    }

    /// Commits `op` into `slot` with the lane its poster decided (`op.plain` and `op.head`,
    /// as [`Op::lane`] would).
    #[inline(always)]
    pub(super) fn commit_as(&mut self, slot: usize, op: Op) {
        self.ops[slot] = op;
        self.tail = self.tail.wrapping_add(1);
        self.live += 1;
    }

    /// Takes the operation of `token` if it is live and of `kind`; a token that names no such
    /// operation (a driver bug) gives `None` rather than a panic.
    pub(super) fn take(&mut self, token: Token, kind: OpKind) -> Option<Op> {
        let slot = usize::try_from(token.0).ok().filter(|&s| s < D)?;
        if self.ops[slot].kind != kind {
            return None;
        }
        let op = self.ops[slot];
        self.ops[slot].free();
        if self.held[slot].take().is_some() {
            self.holding -= 1;
        }
        self.live -= 1;
        self.advance_head();
        Some(op)
    }

    /// The general lane's run of plain successes: takes the leading run of `cs` that are plain
    /// successes — `Ok`, naming a live operation of `C::KIND` whose success is [`plain`](Op::plain)
    /// — writing each as a [`Plain`] into `out` and counting it in `tally` (bytes: a receive's
    /// frame payload; a send's payload, without the `header` bytes of ringfab's header on a framed
    /// path). Stops at the first completion that is anything else, changing nothing for it (the
    /// caller takes it the general way). Frees the slots but leaves `head` to
    /// [`advance_head`](Self::advance_head), once per batch; copies three fields per operation, not
    /// the whole `Op`.
    #[inline(always)]
    pub(super) fn take_plain<C: DriverCompletion>(
        &mut self,
        cs: &[C],
        header: usize,
        out: &mut [Plain; CHUNK],
        tally: &mut Tally,
    ) -> usize {
        let mut k = 0;
        let mut bytes = 0;
        for (c, p) in cs.iter().zip(out.iter_mut()) {
            let Some(op) = self.plain_op(c.token(), C::KIND, c.ok()) else {
                break;
            };
            op.free();
            let (len, counted) = c.lengths(header, op.len);
            *p = Plain {
                context: op.context,
                flags: C::FLAGS,
                len,
            };
            bytes += counted;
            k += 1;
        }
        self.live -= k;
        tally.ok += k as u64;
        tally.bytes += bytes;
        k
    }

    /// The operation `token` names if the completion is `ok`, the operation is live, of `kind`
    /// and [`plain`](Op::plain).
    #[inline(always)]
    fn plain_op(&mut self, token: Token, kind: OpKind, ok: bool) -> Option<&mut Op> {
        let slot = usize::try_from(token.0).ok().filter(|&s| s < D)?;
        let op = &mut self.ops[slot];
        (ok && op.plain == LaneKey::of(Lane::plain(kind), NO_MR)).then_some(op)
    }

    /// Marks the live operation of `slot` finished with `status`, for its own CQ's read.
    pub(super) fn hold(&mut self, slot: usize, status: Held) {
        if self.held[slot].replace(status).is_none() {
            self.holding += 1;
        }
    }

    /// Takes the transmit operation of `token`: an application's send, or (with the
    /// `plain-udp` feature) a control frame of the domain's IPv4 host, which the caller
    /// settles apart (it holds no credit; `engine/ip.rs`).
    #[inline(always)]
    pub(super) fn take_tx(&mut self, token: Token) -> Option<Op> {
        match self.take(token, OpKind::Send) {
            Some(op) => Some(op),
            None if cfg!(feature = "plain-udp") => self.take_control(token),
            None => None,
        }
    }

    /// [`take_tx`](Self::take_tx)'s rare case, out of line: the read path's poll, which
    /// inlines `take_tx`, stays as it was for ringfab's own encapsulations.
    #[cold]
    #[inline(never)]
    fn take_control(&mut self, token: Token) -> Option<Op> {
        self.take(token, OpKind::Control)
    }

    /// Moves `head` past the slots freed since (what [`take`](Self::take) does each time).
    #[inline(always)]
    pub(super) fn advance_head(&mut self) {
        while self.head != self.tail && self.ops[self.head % D].kind == OpKind::Free {
            self.head = self.head.wrapping_add(1);
        }
    }

    /// Slots from the oldest live operation to the newest (free ones in between included).
    pub(super) fn live_span(&self) -> usize {
        self.tail.wrapping_sub(self.head)
    }

    /// The oldest live operation.
    pub(super) fn oldest(&self) -> Option<(usize, Op)> {
        (self.live > 0).then(|| (self.head % D, self.ops[self.head % D]))
    }
}

/// What the general lane's plain take needs of a driver's completion, receive or send.
pub(super) trait DriverCompletion {
    /// The kind of operation it completes, and the flags of its entry.
    const KIND: OpKind;
    const FLAGS: CompletionFlags;
    fn token(&self) -> Token;
    fn ok(&self) -> bool;
    /// The entry's length and the bytes a counter counts, for an operation of `op_len`.
    fn lengths(&self, header: usize, op_len: u32) -> (usize, u64);
}

impl DriverCompletion for RxCompletion {
    const KIND: OpKind = OpKind::Recv;
    const FLAGS: CompletionFlags = RECV_FLAGS;
    #[inline(always)]
    fn token(&self) -> Token {
        self.token
    }
    #[inline(always)]
    fn ok(&self) -> bool {
        self.status.is_ok()
    }
    #[inline(always)]
    fn lengths(&self, _header: usize, _op_len: u32) -> (usize, u64) {
        (self.len as usize, u64::from(self.len))
    }
}

impl DriverCompletion for TxCompletion {
    const KIND: OpKind = OpKind::Send;
    const FLAGS: CompletionFlags = SEND_FLAGS;
    #[inline(always)]
    fn token(&self) -> Token {
        self.token
    }
    #[inline(always)]
    fn ok(&self) -> bool {
        self.status.is_ok()
    }
    /// A send's entry has no length; its payload still counts for the counter.
    #[inline(always)]
    fn lengths(&self, header: usize, op_len: u32) -> (usize, u64) {
        (0, tx_payload(header, op_len) as u64)
    }
}

impl RawBuf {
    pub(super) fn rx(&self) -> RxBuffer {
        RxBuffer {
            iova: self.iova,
            len: self.len,
        }
    }
}
