//! A path's slot in the domain's table, [`PathSlot`]: what is read without the path lock — the
//! bound CQ, the published fault, a shared path's CQ mask and owner numbers.

use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU8, AtomicUsize, Ordering};

use spin::Mutex;

use super::srx::SRX_MAX;
use super::{PathSlot, PathState};
use crate::atomic::AtomicU64;
use crate::hal::{Nic, QueueFault};

/// The `cq` value of a path bound to no CQ.
pub(crate) const NO_CQ: usize = usize::MAX;

impl<'n, N: Nic + 'n, const D: usize> PathSlot<'n, N, D> {
    /// A free slot.
    #[allow(
        clippy::declare_interior_mutable_const,
        reason = "a fresh slot per use is the point: the storage's table is built of them"
    )]
    pub(crate) const EMPTY: Self = PathSlot {
        state: Mutex::new(None),
        cq: AtomicUsize::new(NO_CQ),
        fault: AtomicU8::new(0),
        cq_mask: AtomicU64::new(0),
        owners: AtomicU32::new(0),
        orphaned: AtomicBool::new(false),
    };

    /// Claims the lowest free owner number of a shared path for an endpoint; `None` when
    /// [`SRX_MAX`] (32) endpoints are bound.
    pub(crate) fn claim_owner(&self) -> Option<u8> {
        let mut owners = self.owners.load(Ordering::Acquire);
        loop {
            let free = (!owners).trailing_zeros() as usize;
            if free >= SRX_MAX {
                return None;
            }
            match self.owners.compare_exchange(
                owners,
                owners | (1 << free),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Some(free as u8),
                Err(now) => owners = now,
            }
        }
    }

    /// Gives owner number `owner` back; `true` if the caller must now close the path (it was
    /// the last endpoint of a context that was dropped).
    pub(crate) fn release_owner(&self, owner: u8) -> bool {
        let bit = 1u32 << owner;
        let left = self.owners.fetch_and(!bit, Ordering::AcqRel) & !bit;
        left == 0 && self.orphaned.swap(false, Ordering::AcqRel)
    }

    /// Whether CQ `index`'s read may find work in this path (checked again under the lock).
    #[inline]
    pub(crate) fn serves(&self, index: usize) -> bool {
        self.cq.load(Ordering::Acquire) == index
            || (index < 64 && self.cq_mask.load(Ordering::Acquire) & (1 << index) != 0)
    }

    /// The critical fault published for the path, if any.
    #[inline]
    pub(crate) fn fault(&self) -> Option<QueueFault> {
        match self.fault.load(Ordering::Acquire) {
            0 => None,
            code => QueueFault::from_code(code),
        }
    }

    /// Publishes the fault of `st` (the path's state, under its lock) for lock-free readers.
    #[inline]
    pub(crate) fn publish_fault(&self, st: &PathState<'n, N, D>) {
        if let Some(f) = st.fault {
            self.fault.store(f.code(), Ordering::Release);
        }
    }

    /// Forgets a published fault (the slot's path was closed or replaced).
    pub(crate) fn clear_fault(&self) {
        self.fault.store(0, Ordering::Release);
    }
}
