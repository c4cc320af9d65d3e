//! Wait handles: where an interrupt lands and where a thread sleeps.
//!
//! Semantics are those of a Linux eventfd used as a semaphore of one: a notification that arrives
//! while nobody waits is kept, so the next [`wait`](Wait::wait) returns at once. That is what makes
//! the "drain, arm the interrupt, re-check, then block" sequence (DESIGN.md, decision 9) free of
//! lost wake-ups. VFIO provides eventfds, `ringfab-emu` a condvar; a bare-metal platform may spin.

use core::time::Duration;

/// How a [`Wait::wait`] ended.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum WaitOutcome {
    /// A notification (interrupt or [`notify`](Wait::notify)) was consumed.
    Notified,
    /// The timeout passed with no notification.
    TimedOut,
}

/// A notification object an interrupt vector delivers to.
pub trait Wait: Send + Sync {
    /// Consumes any pending notification without blocking; returns whether there was one.
    fn drain(&self) -> bool;

    /// Blocks until a notification is pending, then consumes it; or until `timeout` passes
    /// (`None` waits for ever). Returns at once if a notification was already pending.
    fn wait(&self, timeout: Option<Duration>) -> WaitOutcome;

    /// Makes a notification pending, as an interrupt would, and wakes a waiter.
    fn notify(&self);
}
