//! The framed lane: an endpoint's plain receives into owned buffers, written into the reader's
//! array inside the driver's loop ([`FramedLane`]: what it compares a header with, its loop, and
//! the second pass that fills in sources and buffers).

use core::sync::atomic::AtomicUsize;

use super::header::FramedHead;
use super::op::{Lane, LaneKey};
use super::sink::{Plain, Sink, Window};
use super::state::CHUNK;
use super::verdict::RECV_FLAGS;
use super::{FramedLane, OpTable};
use crate::addr::{AvRef, EpAddr, FiAddr};
use crate::buf::{forget_posted, owner_of, Buf};
use crate::hal::{Nic, RxCompletion, RxQueue};
use crate::proto;

impl<'s> FramedLane<'s> {
    /// What bytes 12..18 of a frame for context `ctx` hold (see [`FramedLane::expect`]).
    pub(super) fn expect(ctx: u16) -> u64 {
        let [e0, e1] = proto::ETHERTYPE.to_be_bytes();
        let [c0, c1] = ctx.to_be_bytes();
        u64::from_le_bytes([e0, e1, proto::VERSION, 0, c0, c1, 0, 0])
    }

    /// The lane for buffers of region `mr`, if it is one of `mrs`.
    pub(super) fn new(expect: u64, mr: u16, owners: &'s [AtomicUsize]) -> Option<Self> {
        owner_of(owners, mr).map(|owner| FramedLane {
            expect,
            key: LaneKey::of(Lane::OwnedRecv, mr),
            owner,
        })
    }

    /// Runs the lane over one poll of `q`, writing entries into `win`; the rest as
    /// [`fast_lane`](super::PathState::fast_lane). Compiled with and without the byte count
    /// (`counted`), so that a path without a counter does not pay for it.
    #[inline(always)]
    pub(super) fn poll<N: Nic, const D: usize, S: Sink<'s>>(
        self,
        q: &mut N::Rx<'_, D>,
        table: &mut OpTable<D>,
        scratch: &mut [RxCompletion; CHUNK],
        win: &mut Window<'_, 's, S::Entry>,
        want: usize,
        counted: bool,
    ) -> (usize, usize, usize, u64) {
        let room = win.room(want);
        let entries = &mut win.entries[..room];
        if counted {
            Self::fast_lane_framed::<N, D, S, true>(q, table, scratch, entries, self, want)
        } else {
            Self::fast_lane_framed::<N, D, S, false>(q, table, scratch, entries, self, want)
        }
    }

    /// After the lane took the `direct` operations from slot `head` on into `win`'s entries:
    /// their sources and buffers, where the reader takes them — each source a handle of `av`
    /// (one lookup per run of frames from the same sender), each buffer rebuilt from its slot
    /// — and the buffers the reader does not take go back to their region in one subtraction.
    /// A second pass over what the lane took, so that the lane's loop is the same for every
    /// reader (a loop that also wrote sources and buffers ran short of registers). It reads
    /// the freed slots, which nothing has reused yet: it runs before the general lane, the
    /// only thing that posts during a poll.
    #[inline(always)]
    pub(super) fn settle<const D: usize, E>(
        self,
        table: &OpTable<D>,
        head: usize,
        win: &mut Window<'_, 's, E>,
        direct: usize,
        av: Option<AvRef<'_>>,
    ) {
        if direct == 0 {
            return;
        }
        let taken = |i: usize| &table.ops[head.wrapping_add(i) % D];
        if let Some(src) = win.src.as_deref_mut() {
            // The sender of a frame is looked up once per run of frames from it: within one
            // read, as the table stood when that sender's first frame was looked up. A key of
            // all ones is the address no table holds (av.rs: it marks a free entry).
            let (mut last_key, mut last) = (u64::MAX, FiAddr::NOTAVAIL);
            for (i, a) in src[..direct].iter_mut().enumerate() {
                // The operation's buffer, written by the device before its completion was
                // observed, is still the operation's (handed back or dropped below).
                let key = FramedHead::source(taken(i).head);
                if key != last_key {
                    (last_key, last) = (key, resolve_source(key, av));
                }
                *a = last;
            }
        }
        hand_back(self.owner, table, head, win, direct);
    }

    /// The framed lane, inside the driver's loop: an endpoint's receive of the next slot in order
    /// whose operation is [`Lane::OwnedRecv`] of the lane's region and whose frame is a plain
    /// success ([`FramedHead::payload`]) is written straight into `entries` and its slot freed
    /// (its source and buffer follow in [`FramedLane::settle`]). The first completion that is
    /// anything else, and every one after it, is kept in `scratch` for the general lane. Returns
    /// as [`fast_lane`](super::PathState::fast_lane).
    ///
    /// Never inlined: a function of its own is register-allocated on its own, so that what the
    /// rest of `poll` does (the general lane, [`FramedLane::settle`]) does not push the loop's
    /// values out of registers. The driver's loop and the closure are inlined into it.
    #[inline(never)]
    fn fast_lane_framed<N: Nic, const D: usize, S: Sink<'s>, const BYTES: bool>(
        q: &mut N::Rx<'_, D>,
        table: &mut OpTable<D>,
        scratch: &mut [RxCompletion; CHUNK],
        entries: &mut [S::Entry],
        lane: FramedLane<'s>,
        want: usize,
    ) -> (usize, usize, usize, u64) {
        // `kept` is 32-bit: where the driver's `poll_each_split` is the default (virtio-net),
        // `slow` runs inside the lane's loop, and the optimiser could merge the increments of a
        // `usize` count and of `next` into one store through a chosen pointer, which keeps `next`
        // in memory (virtio-net's endpoint read: 4 instructions more per entry).
        let (mut kept, mut bytes) = (0u32, 0u64);
        // Entries not yet written.
        let mut free = entries.iter_mut();
        let mut next = table.head;
        // The first completion the lane declines, and every one after it (order!), is kept in
        // `scratch` by the driver's `slow`, out of the lane's loop.
        let got = q.poll_each_split(
            want,
            &mut |c| {
                if free.len() == 0 || c.token.0 != (next % D) as u64 {
                    return false;
                }
                let op = &mut table.ops[next % D];
                if c.status.is_err() || op.plain != lane.key {
                    return false;
                }
                // A `Lane::OwnedRecv` operation owns a registered buffer whose head was taken
                // at posting; the driver reported it `Ok`, having observed its write-back with
                // acquire ordering.
                let h = FramedHead::read(op.head);
                let Some(len) = h.payload(lane.expect, c.len) else {
                    return false;
                };
                if let Some(entry) = free.next() {
                    S::write(
                        entry,
                        Plain {
                            context: op.context,
                            flags: RECV_FLAGS,
                            len: len as usize,
                        },
                    );
                }
                op.free();
                if BYTES {
                    bytes += u64::from(len);
                }
                next = next.wrapping_add(1);
                true
            },
            &mut |c| {
                // More than `want` would be a driver bug; `got` ignores them as well.
                if let Some(slot) = scratch.get_mut(kept as usize) {
                    *slot = *c;
                    kept += 1;
                }
            },
        );
        (got, next, kept as usize, bytes)
    }
}

/// The buffers of the `direct` operations a lane took from slot `head` on, where the reader takes
/// them (each rebuilt from its slot, which nothing has reused yet), or back to their region
/// (`owner`) in one subtraction: the framed and the plain-UDP lane's second pass alike.
#[inline(always)]
pub(super) fn hand_back<'s, const D: usize, E>(
    owner: &'s AtomicUsize,
    table: &OpTable<D>,
    head: usize,
    win: &mut Window<'_, 's, E>,
    direct: usize,
) {
    match win.bufs.as_deref_mut() {
        Some(bufs) => {
            for (i, b) in bufs[..direct].iter_mut().enumerate() {
                *b = Some(Buf::from_raw(
                    table.ops[head.wrapping_add(i) % D].buf,
                    owner,
                ));
            }
        }
        None => forget_posted(owner, direct),
    }
}

/// The handle of the sender whose raw address is `key` ([`FramedHead::source`]) in `av`, or
/// `FI_ADDR_NOTAVAIL`: what the general lane finds for the same frame.
#[cold]
fn resolve_source(key: u64, av: Option<AvRef<'_>>) -> FiAddr {
    let b = key.to_le_bytes();
    let raw = EpAddr {
        mac: crate::hal::MacAddr([b[0], b[1], b[2], b[3], b[4], b[5]]),
        ctx: u16::from_be_bytes([b[6], b[7]]),
    };
    av.and_then(|av| av.reverse(raw))
        .unwrap_or(FiAddr::NOTAVAIL)
}
