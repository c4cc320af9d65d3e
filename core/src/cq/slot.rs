//! A CQ's slot in the domain's CQ table ([`CqSlot`]): what the CQ is while it is open,
//! whoever holds its handle — its locked state ([`CqState`]: the aux queue's ring and the
//! read's round-robin start), its credits, its bindings, its sticky overrun flag and what
//! blocking on it needs (vector, wait set, sleepers). [`CqRef`] is a slot with its aux-queue
//! cells, what paths and endpoints work with. The rules credits keep are
//! [`queue`](super::queue)'s "Credits and overrun".

use core::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

use spin::Mutex;

use super::aux::{Aux, AuxCell, AuxItem, AuxRing, AuxRow};
use super::wait::{Sleepers, NO_SET, NO_VECTOR};
use crate::engine::{Credits, Outcome};
use crate::storage::Capacity;
use crate::{Error, Result};

/// The path slots a CQ's mask of serving paths ([`CqSlot::paths`]) has a bit for: a word's
/// worth, so that the mask is one plain atomic on every target.
pub(crate) const PATH_BITS: usize = usize::BITS as usize;

/// One slot of the domain's CQ table ([`crate::storage`]).
pub(crate) struct CqSlot {
    pub(super) state: Mutex<Option<CqState>>,
    /// Paths bound to it.
    pub(super) binds: AtomicUsize,
    /// The path slots below [`PATH_BITS`] that serve it, one bit each (path slot `i` is bit
    /// `i`): bound to it, or shared with an endpoint bound to it (`PathSlot::serves`). A read
    /// visits these and every slot from `PATH_BITS` on, and no other: the slots between are
    /// not scanned. Set before the path slot says it serves the CQ, cleared after it stops
    /// saying so ([`Domain::mark_serving`](crate::domain::Domain::mark_serving)).
    pub(crate) paths: AtomicUsize,
    /// The MSI-X vector the CQ holds ([`NO_VECTOR`] for none): the queues bound to it are
    /// steered there, and its wait handle is that vector's.
    pub(super) vector: AtomicU32,
    /// The wait set the CQ belongs to ([`NO_SET`] for none).
    pub(super) set: AtomicU32,
    /// Threads blocked on the CQ, and `signal`s.
    pub(super) sleepers: Mutex<Sleepers>,
}

impl CqSlot {
    /// A free slot.
    #[allow(
        clippy::declare_interior_mutable_const,
        reason = "a fresh slot per use is the point: the storage's table is built of them"
    )]
    pub(crate) const EMPTY: Self = CqSlot {
        state: Mutex::new(None),
        binds: AtomicUsize::new(0),
        paths: AtomicUsize::new(0),
        vector: AtomicU32::new(NO_VECTOR),
        set: AtomicU32::new(NO_SET),
        sleepers: Mutex::new(Sleepers::NEW),
    };

    /// Opens the slot with `size` credits, its aux queue over `cells` of the domain's aux
    /// table.
    ///
    /// # Errors
    /// `Ok(false)` if the slot is in use; `Full(CqSize)` if `size` is more than `cells`.
    pub(crate) fn try_open(&self, credits: &Credits, size: usize, cells: usize) -> Result<bool> {
        let mut guard = self.state.lock();
        if guard.is_some() {
            return Ok(false);
        }
        if size > cells {
            return Err(Error::Full(Capacity::CqSize));
        }
        credits.open(size);
        self.binds.store(0, Ordering::Release);
        self.vector.store(NO_VECTOR, Ordering::SeqCst);
        self.set.store(NO_SET, Ordering::Release);
        *self.sleepers.lock() = Sleepers::NEW;
        *guard = Some(CqState {
            ring: AuxRing {
                head: 0,
                len: 0,
                cap: size,
            },
            next: 0,
            sealed: false,
        });
        Ok(true)
    }

    /// Runs `f` with a sink that queues outcomes on the CQ's aux queue, in the order given,
    /// under the CQ lock — what an endpoint's cancel uses to report what it reclaimed. The CQ
    /// lock is taken before any path lock, the order `read` takes them in.
    ///
    /// `row` is the CQ's aux-queue cells
    /// ([`Domain::aux_row`](crate::domain::Domain::aux_row)), `credits` its credits.
    ///
    /// # Errors
    /// `OpBadState` if the CQ is closed.
    pub(crate) fn with_sink<T>(
        &self,
        row: &[AuxCell],
        credits: &Credits,
        f: impl FnOnce(&mut dyn FnMut(Outcome<'_>)) -> T,
    ) -> Result<T> {
        let mut guard = self.state.lock();
        let st = guard.as_mut().ok_or(Error::OpBadState)?;
        let mut sink = |o: Outcome<'_>| match o {
            Outcome::Plain(p) => st.push_credited(row, credits, AuxItem::Ok(p.completion())),
            Outcome::Done(c) => st.push_credited(row, credits, AuxItem::Ok(*c)),
            Outcome::Failed(e) => st.push_credited(row, credits, AuxItem::Err(*e)),
        };
        Ok(f(&mut sink))
    }

    /// Whether a thread is blocked reading the CQ (so a software insertion must wake it).
    pub(crate) fn has_sleepers(&self) -> bool {
        self.sleepers.lock().waiters() > 0
    }

    /// The MSI-X vector a blocking CQ owns: queues reporting to it must be steered there.
    pub(crate) fn interrupt_vector(&self) -> Option<u16> {
        u16::try_from(self.vector.load(Ordering::SeqCst)).ok()
    }

    /// Counts a binding (an endpoint direction) that keeps the CQ from closing.
    pub(crate) fn add_bind(&self) {
        self.binds.fetch_add(1, Ordering::AcqRel);
    }

    /// Forgets a binding counted by [`add_bind`](Self::add_bind).
    pub(crate) fn drop_bind(&self) {
        self.binds.fetch_sub(1, Ordering::AcqRel);
    }
}

/// What an open CQ's lock guards: its aux queue's ring, and where the next read starts.
pub(super) struct CqState {
    pub(super) ring: AuxRing,
    /// Where the next read starts its round-robin over the path table.
    pub(super) next: usize,
    /// The CQ overran: its queues are never polled again (`read::drain_to_aux`).
    pub(super) sealed: bool,
}

impl CqState {
    /// The aux queue over `row`, the CQ's cells.
    #[inline]
    pub(super) fn aux<'a>(&'a mut self, row: &'a [AuxCell]) -> Aux<'a> {
        Aux {
            ring: &mut self.ring,
            row,
        }
    }

    /// Queues a credited entry. Credits make this infallible; should the invariant ever break,
    /// the entry is not dropped silently: the CQ is declared overrun, as fi_cq(3) asks of a
    /// queue that lost a completion.
    pub(super) fn push_credited(&mut self, row: &[AuxCell], credits: &Credits, item: AuxItem) {
        if !self.aux(row).push(item) {
            credits.release_credit();
            credits.mark_overrun();
        }
    }
}

/// A CQ slot with its aux-queue cells: what code outside the CQ's own read works with.
#[derive(Clone, Copy)]
pub(crate) struct CqRef<'a> {
    slot: &'a CqSlot,
    /// The CQ's aux-queue cells, sliced only when something is queued (rare: a cancel, a fault).
    row: AuxRow<'a>,
    /// The CQ's credits, what the engine takes.
    pub(crate) credits: &'a Credits,
}

impl<'a> CqRef<'a> {
    #[inline]
    pub(crate) fn new(slot: &'a CqSlot, row: AuxRow<'a>, credits: &'a Credits) -> Self {
        CqRef { slot, row, credits }
    }

    /// [`CqSlot::with_sink`] over this CQ's cells.
    pub(crate) fn with_sink<T>(
        &self,
        f: impl FnOnce(&mut dyn FnMut(Outcome<'_>)) -> T,
    ) -> Result<T> {
        self.slot.with_sink(self.row.get(), self.credits, f)
    }
}

impl core::ops::Deref for CqRef<'_> {
    type Target = CqSlot;

    fn deref(&self) -> &CqSlot {
        self.slot
    }
}
