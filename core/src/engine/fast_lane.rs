//! The raw layer's fast lane, [`PathState::fast_lane`](super::PathState::fast_lane): plain
//! successes written into the reader's array inside the driver's loop.

use super::op::{Lane, LaneKey, NO_MR};
use super::sink::{Plain, Sink};
use super::state::CHUNK;
use super::verdict::RECV_FLAGS;
use super::{OpTable, PathState};
use crate::hal::{Nic, RxCompletion, RxQueue};

impl<'n, N: Nic + 'n, const D: usize> PathState<'n, N, D> {
    /// The raw layer's fast lane, inside the driver's loop (`RxQueue::poll_each_split`): a plain
    /// success for the next slot in order is written straight into `win`, the reader's next free
    /// entries.
    /// The first completion that is anything else, and every one after it (order!), is kept in
    /// `scratch` for the general lane. Returns the completions the driver gave, the wrapping slot
    /// count after the last one taken (`head` + taken), the number kept and, with `BYTES`, the
    /// bytes taken (0 without: no counter can want them).
    ///
    /// Never inlined, as [`fast_lane_framed`](super::FramedLane::fast_lane_framed): a function of
    /// its own keeps its loop's registers whatever the rest of `poll` becomes.
    #[inline(never)]
    pub(super) fn fast_lane<'s, S: Sink<'s>, const BYTES: bool>(
        q: &mut N::Rx<'_, D>,
        table: &mut OpTable<D>,
        scratch: &mut [RxCompletion; CHUNK],
        win: &mut [S::Entry],
        want: usize,
    ) -> (usize, usize, usize, u64) {
        // `kept` is 32-bit: where the driver's `poll_each_split` is the default (virtio-net),
        // `slow` runs inside the lane's loop, and the optimiser could merge the increments of a
        // `usize` count and of `next` into one store through a chosen pointer, which keeps `next`
        // in memory (virtio-net's endpoint read: 4 instructions more per entry).
        let (mut kept, mut bytes) = (0u32, 0u64);
        // Entries not yet written.
        let mut free = win.iter_mut();
        // The wrapping slot count of the operation the next completion is for, if the device
        // completes in order: `head`, `head + 1`, …
        let mut next = table.head;
        // Core never reads the RSS hash: the driver need not either. The first completion the
        // lane declines, and every one after it (order!), is kept in `scratch` by the driver's
        // `slow`, out of the lane's loop.
        let got = q.poll_each_split(
            want,
            &mut |c| {
                if free.len() == 0 || c.token.0 != (next % D) as u64 {
                    return false;
                }
                let op = &mut table.ops[next % D];
                if c.status.is_err() || op.plain != LaneKey::of(Lane::Recv, NO_MR) {
                    return false;
                }
                op.free();
                if let Some(entry) = free.next() {
                    S::write(
                        entry,
                        Plain {
                            context: op.context,
                            flags: RECV_FLAGS,
                            len: c.len as usize,
                        },
                    );
                }
                if BYTES {
                    bytes += u64::from(c.len);
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
