//! The provider's time sources for core (`ringfab::Clock`: core is `no_std` and has no clock
//! of its own).

use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Monotonic time since the clock was made: what one blocking call (`fi_cq_sread`,
/// `fi_cntr_wait`, `fi_wait`) measures its timeout with, from the call's start.
pub(crate) struct CallClock(Instant);

impl CallClock {
    /// A clock starting now.
    pub(crate) fn start() -> Self {
        CallClock(Instant::now())
    }
}

impl ringfab::Clock for CallClock {
    fn now(&self) -> Duration {
        self.0.elapsed()
    }
}

/// The process's monotonic clock, from its first reading: the time source of every domain
/// with an IPv4 configuration (`Domain::with_clock`), which keeps it for its whole life.
pub(crate) struct ProcessClock(OnceLock<Instant>);

impl ringfab::Clock for ProcessClock {
    fn now(&self) -> Duration {
        self.0.get_or_init(Instant::now).elapsed()
    }
}

/// The clock every domain with an IPv4 configuration is given.
pub(crate) static CLOCK: ProcessClock = ProcessClock(OnceLock::new());
