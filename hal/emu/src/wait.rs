//! [`EmuWait`]: the emulated platform's interrupt wait handle.
//!
//! A `Mutex<bool>` plus a `Condvar`, with the sticky "semaphore of one" semantics that
//! `ringfab_hal::wait` documents for an eventfd: a notification that arrives while nobody waits is
//! kept, and the next [`wait`](Wait::wait) consumes it at once. Many notifications before a wait
//! collapse into one, as an eventfd read in semaphore-less mode would return them together.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use ringfab_hal::{Wait, WaitOutcome};

#[derive(Default)]
struct Inner {
    pending: Mutex<bool>,
    cv: Condvar,
    notifications: AtomicU64,
}

/// A wait handle an emulated interrupt vector notifies. Cheap to clone; clones share state.
#[derive(Clone, Default)]
pub struct EmuWait {
    inner: Arc<Inner>,
}

impl EmuWait {
    /// A handle with no notification pending.
    pub fn new() -> EmuWait {
        EmuWait::default()
    }

    /// How many notifications this handle received since it was created (never reset): lets a
    /// test see that an interrupt fired even after the pending flag was drained.
    pub fn notifications(&self) -> u64 {
        self.inner.notifications.load(Ordering::SeqCst)
    }

    /// Whether a notification is pending, without consuming it.
    pub fn is_pending(&self) -> bool {
        *self.lock()
    }

    fn lock(&self) -> MutexGuard<'_, bool> {
        // A panic while holding this lock leaves only a bool behind: still consistent.
        self.inner
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

impl std::fmt::Debug for EmuWait {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmuWait")
            .field("pending", &self.is_pending())
            .field("notifications", &self.notifications())
            .finish()
    }
}

impl Wait for EmuWait {
    fn drain(&self) -> bool {
        std::mem::replace(&mut *self.lock(), false)
    }

    fn wait(&self, timeout: Option<Duration>) -> WaitOutcome {
        // Waiting is the one place the emulator uses wall-clock time: a blocked thread has to be
        // woken by something, and the caller asked for a real timeout.
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut pending = self.lock();
        loop {
            if *pending {
                *pending = false;
                return WaitOutcome::Notified;
            }
            match deadline {
                None => {
                    pending = self
                        .inner
                        .cv
                        .wait(pending)
                        .unwrap_or_else(PoisonError::into_inner);
                }
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        return WaitOutcome::TimedOut;
                    }
                    pending = self
                        .inner
                        .cv
                        .wait_timeout(pending, d - now)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0;
                }
            }
        }
    }

    fn notify(&self) {
        let mut pending = self.lock();
        *pending = true;
        self.inner.notifications.fetch_add(1, Ordering::SeqCst);
        self.inner.cv.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notification_before_wait_is_kept() {
        let w = EmuWait::new();
        w.notify();
        assert_eq!(
            w.wait(Some(Duration::from_millis(1))),
            WaitOutcome::Notified
        );
        assert_eq!(
            w.wait(Some(Duration::from_millis(1))),
            WaitOutcome::TimedOut
        );
    }

    #[test]
    fn many_notifications_collapse_into_one_pending() {
        let w = EmuWait::new();
        w.notify();
        w.notify();
        assert!(w.drain());
        assert!(!w.drain());
        assert_eq!(w.notifications(), 2);
    }

    #[test]
    fn notify_from_another_thread_wakes_a_waiter() {
        let w = EmuWait::new();
        let w2 = w.clone();
        let t = std::thread::spawn(move || w2.wait(Some(Duration::from_secs(10))));
        std::thread::sleep(Duration::from_millis(5));
        w.notify();
        assert_eq!(t.join().unwrap(), WaitOutcome::Notified);
    }
}
