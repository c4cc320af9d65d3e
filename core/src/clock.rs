//! The time source the crate is given: [`Counter::wait`](crate::Counter::wait)'s and the CQs'
//! timeouts, ARP's retries and cache expiry on plain UDP (`docs/ip.md`). A module of its own,
//! with no dependency, so that the engine (which reads it for ARP) and the counters (which wait
//! on it, and count through the engine) both point here rather than at each other.

use core::time::Duration;

/// A monotonic time source for [`Counter::wait`](crate::Counter::wait)'s timeout.
///
/// `now` returns the time since an arbitrary, fixed origin; it must never go backwards. Only the
/// differences between readings matter.
pub trait Clock {
    /// The current time since this clock's origin.
    fn now(&self) -> Duration;
}
