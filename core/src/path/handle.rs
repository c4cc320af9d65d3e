//! The [`Path`] handle: closing, `cancel_all`, the published fault, and what endpoints and contexts
//! do through it — attaching an endpoint, making a path shared, detaching and closing. (Its
//! raw-layer posting is in `raw.rs`.)

use core::sync::atomic::Ordering;

use super::slot::NO_CQ;
use super::state::{Framing, Queue};
use super::Credits;
use super::{Path, PathSlot, PathState};
use crate::domain::Domain;
use crate::flags::BindFlags;
use crate::hal::Queue as _;
use crate::hal::{Nic, QueueFault};
use crate::{Error, Result};

impl<'d, 'n, N: Nic + 'n, const D: usize> Path<'d, 'n, N, D> {
    /// The path's index in the domain's path slab.
    pub fn index(&self) -> usize {
        self.index
    }

    pub(super) fn slot(&self) -> &'d PathSlot<'n, N, D> {
        &self.domain.paths()[self.index]
    }

    /// Closes the path.
    ///
    /// # Errors
    /// `Err((Error::Busy, self))` while it is bound to a CQ: unbind it first.
    pub fn close(self) -> core::result::Result<(), (Error, Self)> {
        if self.slot().cq.load(Ordering::Acquire) != NO_CQ {
            return Err((Error::Busy, self));
        }
        drop(self);
        Ok(())
    }

    /// Cancels every operation outstanding on the path (`fi_cancel` of all of them): the
    /// driver stops the hardware queue and hands every token back; operations the device had
    /// already finished complete normally, every other one completes with an error entry
    /// `Canceled` (`FI_ECANCELED`, `prov_errno` 5 or 6), delivered through the bound CQ's
    /// `read`/`readerr` in the path's order. The queue is restarted empty.
    ///
    /// This is how a path whose receives will never be filled is emptied before
    /// [`CompletionQueue::unbind`](crate::cq::CompletionQueue::unbind).
    pub fn cancel_all(&self) {
        let mut guard = self.slot().state.lock();
        match guard.as_mut().map(|st| &mut st.queue) {
            Some(Queue::Tx(q)) => q.flush(),
            Some(Queue::Rx(q)) => q.flush(),
            None => {}
        }
    }

    /// The critical fault that failed the path, if any (read without the lock).
    #[inline]
    pub(crate) fn fault(&self) -> Option<QueueFault> {
        self.slot().fault()
    }

    /// Publishes the path's fault after work done on its state outside a CQ read.
    pub(crate) fn publish_fault(&self) {
        let slot = self.slot();
        if let Some(st) = slot.state.lock().as_ref() {
            slot.publish_fault(st);
        }
    }

    /// Runs `f` on the open path's state under its lock.
    ///
    /// # Errors
    /// `OpBadState` if the path is not open; otherwise what `f` returns.
    pub(crate) fn with_state<T>(
        &self,
        f: impl FnOnce(&mut PathState<'n, N, D>) -> Result<T>,
    ) -> Result<T> {
        let mut guard = self.slot().state.lock();
        f(guard.as_mut().ok_or(Error::OpBadState)?)
    }

    /// Binds the path to CQ `cq` for an endpoint (which counts the CQ binding itself) and
    /// sets its framing and counter.
    pub(crate) fn attach(
        &self,
        cq: usize,
        flags: BindFlags,
        framing: Framing,
        cntr: Option<usize>,
    ) {
        let slot = self.slot();
        let mut guard = slot.state.lock();
        if let Some(st) = guard.as_mut() {
            st.set_binding(Some(cq), flags);
            st.framing = Some(framing);
            st.cntr = cntr;
            slot.cq.store(cq, Ordering::Release);
        }
    }

    /// A handle on shared path `index` for an endpoint bound to it (dropping it closes
    /// nothing: a shared path is closed by its context, or by its last endpoint).
    pub(crate) fn shared(domain: &'d Domain<'n, N, D>, index: usize) -> Self {
        Self::at(domain, index)
    }

    /// A view of path `index` that closes nothing when dropped: how an endpoint or a context,
    /// which keep their paths as indices, reach them.
    pub(crate) fn at(domain: &'d Domain<'n, N, D>, index: usize) -> Self {
        Path {
            domain,
            index,
            closes: false,
        }
    }

    /// Makes the freshly opened transmit path a shared one (`fi_stx_context`): no CQ of its
    /// own, every frame reported by the device (the silent-reclaim inference needs one CQ).
    pub(crate) fn make_shared(&self, framing: Framing) {
        if let Some(st) = self.slot().state.lock().as_mut() {
            st.shared = true;
            st.hw_selective = false;
            st.framing = Some(framing);
        }
    }

    /// Closes a shared path (its context closed and no endpoint left on it): whatever is
    /// still in it is discarded, the queue given back.
    pub(crate) fn close_shared(&self) {
        let slot = self.slot();
        let mut guard = slot.state.lock();
        let mut steered = None;
        if let Some(st) = guard.as_mut() {
            // Nothing can be left (every endpoint discarded its own on leaving); the belt to
            // those braces releases credits to whichever CQs they belong to.
            if st.live() > 0 && !self.domain.credits().is_empty() {
                st.discard_all(&self.domain.poll_ctx(0));
            }
            // A shared receive context on a queue above 0 was given its own address.
            if let Queue::Rx(q) = &st.queue {
                steered = Some(q.index()).filter(|&i| i > 0);
            }
        }
        slot.cq_mask.store(0, Ordering::Release);
        slot.owners.store(0, Ordering::Release);
        slot.orphaned.store(false, Ordering::Release);
        slot.clear_fault();
        *guard = None;
        if let Some(index) = steered {
            // Withdrawn with the queue, whoever closes it last (the context or its last
            // endpoint): left behind, the address would keep the NIC steering by address,
            // which refuses RSS. Nothing to report from a close.
            let _ = self.domain.steer_queue(index, None);
        }
    }

    /// Undoes [`attach`](Self::attach) and closes the path: every outstanding operation is
    /// discarded without a completion, its credit given back to `cq`.
    pub(crate) fn detach(self, cq: usize) {
        let slot = self.slot();
        let mut guard = slot.state.lock();
        if let Some(st) = guard.as_mut() {
            st.discard_all(&self.domain.poll_ctx(cq));
            st.set_binding(None, BindFlags::empty());
        }
        slot.cq.store(NO_CQ, Ordering::Release);
        slot.clear_fault();
        // Dropping the queue stops it in hardware before anything it named is released.
        *guard = None;
    }

    pub(super) fn bound_cq(&self, st: &PathState<'n, N, D>) -> Result<&'d Credits> {
        let index = st.cq.ok_or(Error::NoCq)?;
        self.domain.credits().get(index).ok_or(Error::NoCq)
    }
}

impl<'n, N: Nic + 'n, const D: usize> Drop for Path<'_, 'n, N, D> {
    fn drop(&mut self) {
        if !self.closes {
            return;
        }
        let slot = &self.domain.paths()[self.index];
        let mut guard = slot.state.lock();
        if guard
            .as_ref()
            .is_some_and(|st| st.cq.is_none() && !st.shared)
        {
            // Dropping the queue stops it in hardware before its ring memory is freed.
            *guard = None;
        }
    }
}
