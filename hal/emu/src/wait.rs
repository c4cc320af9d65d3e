//! [`EmuWait`]: the emulated platform's interrupt wait handle.
//!
//! A `Mutex<bool>` plus a `Condvar`, with the sticky "semaphore of one" semantics that
//! `ringfab_hal::wait` documents for an eventfd: a notification that arrives while nobody waits is
//! kept, and the next [`wait`](Wait::wait) consumes it at once. Many notifications before a wait
//! collapse into one, as an eventfd read in semaphore-less mode would return them together.
//!
//! On Linux a handle can also mirror its pending flag into an eventfd
//! ([`EmuWait::attach_eventfd`], [`EmuIgb::use_eventfds`](crate::EmuIgb::use_eventfds)): the
//! eventfd polls readable exactly while a notification is pending, so `FI_WAIT_FD` and
//! `FI_GETWAIT` can be tested on the emulated device as they work under VFIO.
//!
//! [`EmuWaitSet`] waits on several of them at once: a member's `notify` also wakes the sets it
//! belongs to (one condvar per set), and the set's wait looks at its members' pending flags, so it
//! is level-triggered as epoll over eventfds is.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, Weak};
use std::time::{Duration, Instant};

use ringfab_hal::{Result, Wait, WaitOutcome, WaitSet};

#[derive(Default)]
struct Inner {
    pending: Mutex<bool>,
    cv: Condvar,
    notifications: AtomicU64,
    /// The sets this handle is a member of; a notification wakes each.
    sets: Mutex<Vec<Weak<SetInner>>>,
    /// An eventfd whose count mirrors `pending` (changed only under its lock).
    #[cfg(target_os = "linux")]
    fd: std::sync::OnceLock<eventfd::EventFd>,
}

/// A panic while holding one of these locks leaves only flags and lists behind: still
/// consistent, so a poisoned lock is used as it is.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
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

    /// Mirrors the pending flag into a new eventfd from now on (a notification already pending
    /// is carried over), so that [`Wait::raw`] gives a descriptor that polls readable exactly
    /// while a notification is pending. Clones share it; attaching twice keeps the first.
    ///
    /// # Errors
    /// The OS error from eventfd(2).
    #[cfg(target_os = "linux")]
    pub fn attach_eventfd(&self) -> std::io::Result<()> {
        let pending = self.lock();
        if self.inner.fd.get().is_none() {
            let fd = eventfd::EventFd::new()?;
            if *pending {
                fd.set();
            }
            // Under the pending lock: nobody else can have set it meanwhile.
            let _ = self.inner.fd.set(fd);
        }
        Ok(())
    }

    /// Consumes the pending flag under its lock, clearing the eventfd with it.
    fn take(&self, pending: &mut bool) -> bool {
        let was = std::mem::replace(pending, false);
        #[cfg(target_os = "linux")]
        if was {
            if let Some(fd) = self.inner.fd.get() {
                fd.clear();
            }
        }
        was
    }

    fn lock(&self) -> MutexGuard<'_, bool> {
        lock(&self.inner.pending)
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
        self.take(&mut self.lock())
    }

    fn wait(&self, timeout: Option<Duration>) -> WaitOutcome {
        // Waiting is the one place the emulator uses wall-clock time: a blocked thread has to be
        // woken by something, and the caller asked for a real timeout.
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut pending = self.lock();
        loop {
            if self.take(&mut pending) {
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
        {
            let mut pending = self.lock();
            #[cfg(target_os = "linux")]
            if !*pending {
                if let Some(fd) = self.inner.fd.get() {
                    fd.set();
                }
            }
            *pending = true;
            self.inner.notifications.fetch_add(1, Ordering::SeqCst);
            self.inner.cv.notify_all();
        }
        // After the flag is set and its lock released: a set's waiter checks the flags under
        // the set's lock, so taking that lock here orders this wake after its check (or the
        // check after the flag), and no lock is ever held while taking the other.
        let sets: Vec<_> = lock(&self.inner.sets)
            .iter()
            .filter_map(Weak::upgrade)
            .collect();
        for set in sets {
            set.wake();
        }
    }

    #[cfg(target_os = "linux")]
    fn raw(&self) -> Option<ringfab_hal::RawWait> {
        use std::os::fd::AsRawFd;
        self.inner
            .fd
            .get()
            .map(|fd| ringfab_hal::RawWait::Fd(fd.0.as_raw_fd()))
    }
}

/// The one system call wrapper of this module: a non-blocking eventfd used as a flag.
#[cfg(target_os = "linux")]
mod eventfd {
    use std::io;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

    pub(super) struct EventFd(pub(super) OwnedFd);

    impl EventFd {
        pub(super) fn new() -> io::Result<EventFd> {
            // SAFETY: eventfd(2) takes no pointers; a non-negative result is a new descriptor
            // that nothing else owns, so `OwnedFd` may take it.
            let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: as above: `fd` is open and owned by nobody else.
            Ok(EventFd(unsafe { OwnedFd::from_raw_fd(fd) }))
        }

        /// Makes the descriptor readable (adds 1 to the count).
        pub(super) fn set(&self) {
            let one: u64 = 1;
            // SAFETY: writes 8 bytes from a live u64 to a descriptor this value owns. It fails
            // only when the count would overflow, i.e. it is readable already.
            let _ = unsafe { libc::write(self.0.as_raw_fd(), (&one as *const u64).cast(), 8) };
        }

        /// Makes it unreadable again (reads the count to 0; EAGAIN if it already was).
        pub(super) fn clear(&self) {
            let mut count: u64 = 0;
            // SAFETY: reads 8 bytes into a live u64 from a descriptor this value owns.
            let _ = unsafe { libc::read(self.0.as_raw_fd(), (&mut count as *mut u64).cast(), 8) };
        }
    }
}

#[derive(Default)]
struct SetInner {
    /// The set's own notification (from [`WaitSet::notify`]).
    pending: Mutex<bool>,
    cv: Condvar,
    members: Mutex<Vec<EmuWait>>,
}

impl SetInner {
    fn wake(&self) {
        let _guard = lock(&self.pending);
        self.cv.notify_all();
    }
}

/// A wait over several [`EmuWait`]s: the emulated platform's [`WaitSet`]. Cheap to clone;
/// clones are the same set.
#[derive(Clone, Default)]
pub struct EmuWaitSet {
    inner: Arc<SetInner>,
}

impl EmuWaitSet {
    /// A set with no members.
    pub fn new() -> EmuWaitSet {
        EmuWaitSet::default()
    }

    /// How many handles are members.
    pub fn len(&self) -> usize {
        lock(&self.inner.members).len()
    }

    /// Whether the set has no member.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Consumes every pending notification; the caller holds the set's own flag.
    fn consume(&self, own: &mut bool) -> bool {
        let mut any = std::mem::replace(own, false);
        for m in lock(&self.inner.members).iter() {
            any |= m.drain();
        }
        any
    }
}

impl std::fmt::Debug for EmuWaitSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmuWaitSet")
            .field("members", &self.len())
            .finish()
    }
}

impl WaitSet for EmuWaitSet {
    type Wait = EmuWait;

    fn add(&self, member: &EmuWait) -> Result {
        let mut members = lock(&self.inner.members);
        if members.iter().any(|m| Arc::ptr_eq(&m.inner, &member.inner)) {
            return Ok(());
        }
        members.push(member.clone());
        let mut sets = lock(&member.inner.sets);
        sets.retain(|s| s.strong_count() > 0);
        sets.push(Arc::downgrade(&self.inner));
        Ok(())
    }

    fn remove(&self, member: &EmuWait) {
        lock(&self.inner.members).retain(|m| !Arc::ptr_eq(&m.inner, &member.inner));
        lock(&member.inner.sets).retain(|s| {
            s.strong_count() > 0 && !std::ptr::eq(s.as_ptr(), Arc::as_ptr(&self.inner))
        });
    }

    fn drain(&self) -> bool {
        let mut own = lock(&self.inner.pending);
        self.consume(&mut own)
    }

    fn wait(&self, timeout: Option<Duration>) -> WaitOutcome {
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut own = lock(&self.inner.pending);
        loop {
            // Checked under the set's lock, which a member's notify takes after setting its
            // flag: a notification cannot slip between this check and the condvar wait.
            if self.consume(&mut own) {
                return WaitOutcome::Notified;
            }
            own = match deadline {
                None => self
                    .inner
                    .cv
                    .wait(own)
                    .unwrap_or_else(PoisonError::into_inner),
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        return WaitOutcome::TimedOut;
                    }
                    self.inner
                        .cv
                        .wait_timeout(own, d - now)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0
                }
            };
        }
    }

    fn notify(&self) {
        *lock(&self.inner.pending) = true;
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
    fn a_set_wakes_on_any_member_and_consumes_what_was_pending() {
        let (a, b) = (EmuWait::new(), EmuWait::new());
        let set = EmuWaitSet::new();
        set.add(&a).unwrap();
        set.add(&b).unwrap();
        set.add(&a.clone()).unwrap();
        assert_eq!(set.len(), 2, "a clone is the same member");
        assert_eq!(
            set.wait(Some(Duration::from_millis(2))),
            WaitOutcome::TimedOut
        );
        b.notify();
        assert_eq!(set.wait(Some(Duration::ZERO)), WaitOutcome::Notified);
        assert!(
            !b.is_pending(),
            "the set consumed the member's notification"
        );
        let set2 = set.clone();
        let t = std::thread::spawn(move || set2.wait(Some(Duration::from_secs(10))));
        std::thread::sleep(Duration::from_millis(5));
        a.notify();
        assert_eq!(t.join().unwrap(), WaitOutcome::Notified);
    }

    #[test]
    fn a_set_is_level_triggered_until_drained_and_has_its_own_notification() {
        let a = EmuWait::new();
        let set = EmuWaitSet::new();
        a.notify();
        set.add(&a).unwrap();
        assert!(set.drain(), "a notification pending before joining counts");
        assert!(!set.drain());
        set.notify();
        assert!(!a.is_pending());
        assert_eq!(set.wait(Some(Duration::ZERO)), WaitOutcome::Notified);
        set.remove(&a);
        assert!(set.is_empty());
        a.notify();
        assert_eq!(
            set.wait(Some(Duration::from_millis(2))),
            WaitOutcome::TimedOut,
            "a removed member no longer wakes the set"
        );
        assert!(a.is_pending(), "and its notification stays its own");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn an_attached_eventfd_is_readable_exactly_while_a_notification_is_pending() {
        let readable = |w: &EmuWait| {
            let Some(ringfab_hal::RawWait::Fd(fd)) = w.raw() else {
                panic!("an attached handle has a descriptor");
            };
            let mut pfd = libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid, initialised pollfd that lives across the call.
            unsafe { libc::poll(&mut pfd, 1, 0) == 1 }
        };
        let w = EmuWait::new();
        assert_eq!(w.raw(), None);
        w.notify();
        w.attach_eventfd().unwrap();
        assert!(readable(&w), "a pending notification carries over");
        assert!(w.drain());
        assert!(!readable(&w));
        w.notify();
        w.notify();
        assert!(readable(&w));
        assert_eq!(w.wait(Some(Duration::ZERO)), WaitOutcome::Notified);
        assert!(!readable(&w));
        let set = EmuWaitSet::new();
        set.add(&w).unwrap();
        w.clone().notify();
        assert!(set.drain());
        assert!(!readable(&w), "a set's drain clears it too");
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
