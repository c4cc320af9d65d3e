//! A CQ's aux queue: the small software queue that keeps, in order, what a read polled but
//! could not deliver at once — successes polled behind an error, or beyond the caller's array —
//! and the errors `readerr` takes (see [`queue`](super::queue)'s "The read path" and "Credits
//! and overrun").
//!
//! The cells live in the domain's table ([`AuxCell`], `cq_size` per CQ; [`AuxRow`] finds a
//! CQ's); the ring that indexes them ([`AuxRing`]) lives in the CQ's locked state
//! ([`CqState`](super::slot::CqState)), and [`Aux`] is the two together at work.

use spin::Mutex;

use crate::engine::ErrRecord;
use crate::entry::Completion;

/// What an aux-queue slot holds: a completion polled but not yet delivered, or an error.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum AuxItem {
    Ok(Completion),
    Err(ErrRecord),
}

/// Where a CQ's aux-queue cells are, without the slicing until they are needed.
#[derive(Clone, Copy)]
pub(crate) struct AuxRow<'a> {
    /// Every CQ's cells.
    pub(crate) cells: &'a [AuxCell],
    /// The CQ's index, and the cells per CQ.
    pub(crate) index: usize,
    pub(crate) size: usize,
}

impl<'a> AuxRow<'a> {
    /// The CQ's cells.
    pub(crate) fn get(self) -> &'a [AuxCell] {
        self.cells
            .get(self.index * self.size..)
            .and_then(|r| r.get(..self.size))
            .unwrap_or_default()
    }
}

/// One cell of a CQ's aux queue. The cells live in the domain's table, `cq_size` per CQ; a
/// CQ touches its cells only under its own lock, so a cell's lock is never contended (it is
/// what lets the table be shared without `unsafe`).
pub(crate) struct AuxCell(Mutex<Option<AuxItem>>);

impl AuxCell {
    /// An unused cell.
    #[allow(
        clippy::declare_interior_mutable_const,
        reason = "a fresh cell per use is the point: the domain's table is built of them"
    )]
    pub(crate) const EMPTY: Self = AuxCell(Mutex::new(None));
}

/// The aux queue's ring over the CQ's cells: `cap` (the CQ's size) of them used.
pub(super) struct AuxRing {
    pub(super) head: usize,
    pub(super) len: usize,
    pub(super) cap: usize,
}

/// The aux queue at work: the ring and the cells it indexes. (Not a `heapless::Deque`: the
/// cells are the domain's, shared with the other CQs' in one table, so the ring cannot own
/// them.)
pub(super) struct Aux<'a> {
    pub(super) ring: &'a mut AuxRing,
    pub(super) row: &'a [AuxCell],
}

impl Aux<'_> {
    #[inline]
    pub(super) fn front(&self) -> Option<AuxItem> {
        if self.ring.len == 0 {
            return None;
        }
        *self.row[self.ring.head].0.lock()
    }

    #[inline]
    pub(super) fn pop(&mut self) {
        if self.ring.len > 0 {
            *self.row[self.ring.head].0.lock() = None;
            self.ring.head = (self.ring.head + 1) % self.ring.cap;
            self.ring.len -= 1;
        }
    }

    /// Appends `item`; `false` if full.
    pub(super) fn push(&mut self, item: AuxItem) -> bool {
        if self.ring.len == self.ring.cap {
            return false;
        }
        *self.row[(self.ring.head + self.ring.len) % self.ring.cap]
            .0
            .lock() = Some(item);
        self.ring.len += 1;
        true
    }
}
