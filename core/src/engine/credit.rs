//! What the engine takes from a completion queue: its credits.
//!
//! A CQ promises room for the completion of every operation posted against it
//! (`crate::cq::queue`'s "Credits and overrun"): posting reserves a credit, delivering or
//! discarding the completion gives it back, and a CQ that would have to drop an entry is
//! overrun — fatal, fi_cq(3): "Overrun completion queues are considered fatal and may not be
//! used to report additional completions once the overrun occurs." That count and that flag
//! are all the engine needs of a CQ, so they live here, one [`Credits`] per slot of the domain's
//! CQ table (a table of their own, at the CQ's index), and the engine never names the CQ object.

use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use crate::{Error, Result};

/// A CQ's credits and its sticky overrun flag.
pub(crate) struct Credits {
    /// Completions the CQ can still promise (size − owed).
    avail: AtomicUsize,
    /// Sticky overrun state.
    overrun: AtomicBool,
}

impl Credits {
    /// The credits of a closed CQ: none.
    #[allow(
        clippy::declare_interior_mutable_const,
        reason = "a fresh cell per use is the point: the storage's table is built of them"
    )]
    pub(crate) const EMPTY: Self = Credits {
        avail: AtomicUsize::new(0),
        overrun: AtomicBool::new(false),
    };

    /// A CQ of `size` entries opens: all of them free, not overrun.
    pub(crate) fn open(&self, size: usize) {
        self.avail.store(size, Ordering::Release);
        self.overrun.store(false, Ordering::Release);
    }

    /// The CQ closes: nothing can be promised any more.
    pub(crate) fn close(&self) {
        self.avail.store(0, Ordering::Release);
    }

    /// Reserves the credit of one operation about to be posted.
    ///
    /// # Errors
    /// `OpBadState` if the CQ is overrun (fatal: it reports nothing new); `Again` if it already
    /// owes as many completions as it can hold.
    ///
    /// Inlined (as [`take`](Self::take) and [`release_credit`](Self::release_credit)): every post
    /// takes a credit, and the driver crates' generic posts would otherwise call out of this crate
    /// and get the `Result` back through memory.
    #[inline]
    pub(crate) fn reserve_credit(&self) -> Result {
        if self.is_overrun() {
            return Err(Error::OpBadState);
        }
        self.take().then_some(()).ok_or(Error::Again)
    }

    /// Reserves the credit of an entry no operation was posted for (a critical-fault report,
    /// the engine's "Critical faults"). Without a free credit the entry cannot be queued
    /// without breaking the promise made to posted operations: the CQ is declared overrun
    /// (fi_cq(3): a queue that lost an entry) and `false` returned.
    pub(crate) fn reserve_report_credit(&self) -> bool {
        let ok = self.take();
        if !ok {
            self.mark_overrun();
        }
        ok
    }

    /// Takes one credit if there is one.
    #[inline]
    pub(crate) fn take(&self) -> bool {
        self.avail
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |c| c.checked_sub(1))
            .is_ok()
    }

    /// Gives back the credit of a completion delivered (or of a post that failed).
    #[inline]
    pub(crate) fn release_credit(&self) {
        self.avail.fetch_add(1, Ordering::AcqRel);
    }

    /// Gives back `n` credits at once.
    pub(crate) fn release_credits(&self, n: usize) {
        if n > 0 {
            self.avail.fetch_add(n, Ordering::AcqRel);
        }
    }

    /// Completions the CQ can still promise.
    pub(crate) fn credits(&self) -> usize {
        self.avail.load(Ordering::Acquire)
    }

    /// Whether the CQ is overrun.
    #[inline]
    pub(crate) fn is_overrun(&self) -> bool {
        self.overrun.load(Ordering::Acquire)
    }

    /// Declares the CQ overrun (for good: it reports nothing new).
    pub(crate) fn mark_overrun(&self) {
        self.overrun.store(true, Ordering::Release);
    }
}

/// What the engine does to a counter (`fi_cntr`) an endpoint is bound to: it counts the
/// operations that completed and those that failed. `crate::cntr`'s `Counter` is the one
/// implementation; the engine knows only this.
pub(crate) trait Count {
    /// Counts `ops` successful operations that moved `bytes` payload bytes.
    fn complete_ok(&self, ops: u64, bytes: u64);
    /// Counts `ops` operations that completed in error.
    fn complete_err(&self, ops: u64);
}

/// The domain's counters as the engine reaches them: by the index an endpoint was bound with.
pub(crate) trait Counters {
    /// Counter `index`, if the domain has one.
    fn counter(&self, index: usize) -> Option<&dyn Count>;
}
