//! [`EventFdWait`]: the `Wait` handle an MSI-X vector delivers to, on a Linux eventfd.
//!
//! VFIO signals an interrupt by adding 1 to the eventfd wired to its vector. The eventfd is
//! non-blocking; its counter is the pending flag of `ringfab_hal::wait`'s "semaphore of one": a
//! read returns and clears the whole counter, so many interrupts before a wait collapse into one
//! notification, and one that arrives while nobody waits is kept.
//!
//! [`EpollWaitSet`] waits on several of them with one epoll descriptor (level-triggered, so a
//! member's pending count keeps it readable until someone reads it).

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use ringfab_hal::{RawWait, Wait, WaitOutcome, WaitSet};
use vmm_sys_util::epoll::{ControlOperation, Epoll, EpollEvent, EventSet};
use vmm_sys_util::eventfd::{EventFd, EFD_NONBLOCK};

/// A wait handle on an eventfd. Cheap to clone; clones share the eventfd.
#[derive(Clone, Debug)]
pub struct EventFdWait {
    fd: Arc<EventFd>,
}

impl EventFdWait {
    /// A new non-blocking eventfd with nothing pending.
    ///
    /// # Errors
    /// The OS error from eventfd(2) (out of file descriptors).
    pub fn new() -> io::Result<EventFdWait> {
        Ok(EventFdWait {
            fd: Arc::new(EventFd::new(EFD_NONBLOCK)?),
        })
    }

    /// The eventfd, for VFIO_DEVICE_SET_IRQS or for an application's own poll loop.
    pub fn eventfd(&self) -> &EventFd {
        &self.fd
    }

    /// Reads (and so clears) the counter; `false` if it was zero.
    fn consume(&self) -> bool {
        // EAGAIN is "nothing pending"; any other error (there is none for a valid eventfd read
        // of 8 bytes) is treated the same, as a wait that found nothing.
        self.fd.read().is_ok()
    }
}

impl AsRawFd for EventFdWait {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// poll(2) for readability with a timeout in milliseconds (-1: for ever). EINTR counts as "not
/// ready": the caller re-checks its deadline.
fn poll_readable(fd: RawFd, timeout_ms: libc::c_int) -> bool {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: `pfd` is a valid, initialised pollfd that lives across the call; nfds is 1.
    let n = unsafe { libc::poll(&mut pfd, 1, timeout_ms) };
    n > 0 && pfd.revents & libc::POLLIN != 0
}

/// Milliseconds to pass to poll(2) for `left`, rounded up so that the wait is never shorter
/// than asked, and clamped to what a `c_int` holds.
fn poll_ms(left: Duration) -> libc::c_int {
    let ms = left.as_nanos().div_ceil(1_000_000);
    libc::c_int::try_from(ms).unwrap_or(libc::c_int::MAX)
}

impl Wait for EventFdWait {
    fn drain(&self) -> bool {
        self.consume()
    }

    fn wait(&self, timeout: Option<Duration>) -> WaitOutcome {
        let deadline = timeout.map(|t| Instant::now().checked_add(t));
        loop {
            if self.consume() {
                return WaitOutcome::Notified;
            }
            let ms = match deadline {
                None | Some(None) => -1,
                Some(Some(d)) => {
                    let now = Instant::now();
                    if now >= d {
                        return WaitOutcome::TimedOut;
                    }
                    poll_ms(d - now)
                }
            };
            // Readable or not, loop: another thread may have consumed the count first, and a
            // signal may have cut the poll short; the deadline check above ends the loop.
            poll_readable(self.fd.as_raw_fd(), ms);
        }
    }

    fn notify(&self) {
        // A write fails only when the counter would overflow u64::MAX - 1: then a notification
        // is certainly pending already.
        let _ = self.fd.write(1);
    }

    fn raw(&self) -> Option<RawWait> {
        Some(RawWait::Fd(self.fd.as_raw_fd()))
    }
}

/// The time left until `deadline` as a poll/epoll timeout, or `None` once it has passed.
/// `deadline` of `None` (no timeout, or one too far to represent) is -1, for ever.
fn timeout_ms(deadline: Option<Instant>) -> Option<libc::c_int> {
    match deadline {
        None => Some(-1),
        Some(d) => {
            let now = Instant::now();
            (now < d).then(|| poll_ms(d - now))
        }
    }
}

/// A wait over several [`EventFdWait`]s on one epoll descriptor: the VFIO platform's
/// [`WaitSet`]. Its own notification is one more eventfd in the same epoll set.
#[derive(Debug)]
pub struct EpollWaitSet {
    epoll: Epoll,
    own: EventFdWait,
    members: Mutex<Vec<EventFdWait>>,
}

impl EpollWaitSet {
    /// An empty set: a new epoll descriptor watching only the set's own eventfd.
    ///
    /// # Errors
    /// The OS error from epoll_create1(2), eventfd(2) or epoll_ctl(2).
    pub fn new() -> io::Result<EpollWaitSet> {
        let set = EpollWaitSet {
            epoll: Epoll::new()?,
            own: EventFdWait::new()?,
            members: Mutex::new(Vec::new()),
        };
        set.watch(ControlOperation::Add, set.own.as_raw_fd())?;
        Ok(set)
    }

    /// How many handles are members.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether the set has no member.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<EventFdWait>> {
        // The list holds handles only; a panic elsewhere leaves it consistent.
        self.members.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn watch(&self, op: ControlOperation, fd: RawFd) -> io::Result<()> {
        // Level-triggered EPOLLIN: readable for as long as the eventfd's count is not zero.
        let data = u64::try_from(fd).unwrap_or(0);
        self.epoll.ctl(op, fd, EpollEvent::new(EventSet::IN, data))
    }
}

impl AsRawFd for EpollWaitSet {
    fn as_raw_fd(&self) -> RawFd {
        self.epoll.as_raw_fd()
    }
}

impl WaitSet for EpollWaitSet {
    type Wait = EventFdWait;

    fn add(&self, member: &EventFdWait) -> ringfab_hal::Result {
        let mut members = self.lock();
        let fd = member.as_raw_fd();
        if members.iter().any(|m| m.as_raw_fd() == fd) {
            return Ok(());
        }
        self.watch(ControlOperation::Add, fd)
            .map_err(|_| ringfab_hal::Error::InterruptUnavailable { vector: u16::MAX })?;
        members.push(member.clone());
        Ok(())
    }

    fn remove(&self, member: &EventFdWait) {
        let mut members = self.lock();
        let fd = member.as_raw_fd();
        if let Some(i) = members.iter().position(|m| m.as_raw_fd() == fd) {
            // The fd is open (the list holds a clone), so EPOLL_CTL_DEL cannot fail on it.
            let _ = self.watch(ControlOperation::Delete, fd);
            members.swap_remove(i);
        }
    }

    fn drain(&self) -> bool {
        let mut any = self.own.drain();
        for m in self.lock().iter() {
            any |= m.drain();
        }
        any
    }

    fn wait(&self, timeout: Option<Duration>) -> WaitOutcome {
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        let mut events = [EpollEvent::default(); 1];
        loop {
            if self.drain() {
                return WaitOutcome::Notified;
            }
            let Some(ms) = timeout_ms(deadline) else {
                return WaitOutcome::TimedOut;
            };
            // Ready or not, loop: the drain above decides, and an EINTR or an fd another
            // thread read first only costs one more round; the deadline ends the loop.
            let _ = self.epoll.wait(ms, &mut events);
        }
    }

    fn notify(&self) {
        self.own.notify();
    }

    fn raw(&self) -> Option<RawWait> {
        Some(RawWait::Fd(self.epoll.as_raw_fd()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_notification_before_the_wait_is_kept_and_consumed_once() {
        let w = EventFdWait::new().unwrap();
        w.notify();
        assert_eq!(w.wait(Some(Duration::ZERO)), WaitOutcome::Notified);
        assert_eq!(
            w.wait(Some(Duration::from_millis(1))),
            WaitOutcome::TimedOut
        );
    }

    #[test]
    fn many_notifications_collapse_into_one_and_drain_clears_it() {
        let w = EventFdWait::new().unwrap();
        assert!(!w.drain(), "nothing pending at first");
        w.notify();
        w.notify();
        w.notify();
        assert!(w.drain());
        assert!(!w.drain());
        assert_eq!(
            w.wait(Some(Duration::from_millis(1))),
            WaitOutcome::TimedOut
        );
    }

    #[test]
    fn a_timeout_is_never_early() {
        let w = EventFdWait::new().unwrap();
        for t in [1u64, 7, 30] {
            let t = Duration::from_millis(t);
            let start = Instant::now();
            assert_eq!(w.wait(Some(t)), WaitOutcome::TimedOut);
            assert!(
                start.elapsed() >= t,
                "returned after {:?} < {t:?}",
                start.elapsed()
            );
        }
        // Sub-millisecond timeouts round up, not down to a busy zero-ms poll.
        assert_eq!(poll_ms(Duration::from_micros(1)), 1);
        assert_eq!(poll_ms(Duration::from_secs(u64::MAX)), libc::c_int::MAX);
    }

    #[test]
    fn notify_from_another_thread_wakes_a_blocked_waiter() {
        let w = EventFdWait::new().unwrap();
        let w2 = w.clone();
        let start = Instant::now();
        let t = std::thread::spawn(move || w2.wait(None));
        std::thread::sleep(Duration::from_millis(20));
        w.notify();
        assert_eq!(t.join().unwrap(), WaitOutcome::Notified);
        assert!(start.elapsed() < Duration::from_secs(5));
        assert!(!w.drain(), "the waiter consumed it");
    }

    #[test]
    fn getwait_gives_the_eventfd_itself() {
        let w = EventFdWait::new().unwrap();
        assert_eq!(w.raw(), Some(RawWait::Fd(w.as_raw_fd())));
    }

    /// poll(2) on `fd` with a zero timeout: what an application does with FI_GETWAIT's fd.
    fn readable(fd: RawFd) -> bool {
        poll_readable(fd, 0)
    }

    #[test]
    fn an_epoll_set_wakes_on_any_member_and_consumes_what_was_pending() {
        let (a, b) = (EventFdWait::new().unwrap(), EventFdWait::new().unwrap());
        let set = EpollWaitSet::new().unwrap();
        set.add(&a).unwrap();
        set.add(&b).unwrap();
        set.add(&a.clone()).unwrap();
        assert_eq!(set.len(), 2, "a clone is the same member");
        let t = Duration::from_millis(15);
        let start = Instant::now();
        assert_eq!(set.wait(Some(t)), WaitOutcome::TimedOut);
        assert!(start.elapsed() >= t, "never early");
        b.notify();
        let Some(RawWait::Fd(epfd)) = set.raw() else {
            panic!("an epoll set has a descriptor");
        };
        assert!(
            readable(epfd),
            "the epoll fd polls readable while a member is pending"
        );
        assert_eq!(set.wait(Some(Duration::ZERO)), WaitOutcome::Notified);
        assert!(!b.drain(), "the set consumed the member's notification");
        assert!(!readable(epfd));

        let set = Arc::new(set);
        let set2 = set.clone();
        let waiter = std::thread::spawn(move || set2.wait(None));
        std::thread::sleep(Duration::from_millis(20));
        // What VFIO does when a's vector fires: the kernel adds to the counter.
        let n: u64 = 1;
        // SAFETY: writes 8 bytes from a live u64 to an fd this test owns.
        let r = unsafe { libc::write(a.as_raw_fd(), (&n as *const u64).cast(), 8) };
        assert_eq!(r, 8);
        assert_eq!(waiter.join().unwrap(), WaitOutcome::Notified);
    }

    #[test]
    fn an_epoll_set_has_its_own_notification_and_forgets_removed_members() {
        let a = EventFdWait::new().unwrap();
        let set = EpollWaitSet::new().unwrap();
        set.add(&a).unwrap();
        set.notify();
        assert!(set.drain());
        assert!(!set.drain());
        set.remove(&a);
        set.remove(&a);
        assert!(set.is_empty());
        a.notify();
        assert_eq!(
            set.wait(Some(Duration::from_millis(2))),
            WaitOutcome::TimedOut,
            "a removed member no longer wakes the set"
        );
        assert!(a.drain(), "and its notification stays its own");
    }

    #[test]
    fn a_write_to_the_eventfd_itself_counts_as_an_interrupt() {
        // What VFIO does when the vector fires: the kernel adds to the counter.
        let w = EventFdWait::new().unwrap();
        let n: u64 = 1;
        // SAFETY: writes 8 bytes from a live u64 to an fd this test owns.
        let r = unsafe { libc::write(w.as_raw_fd(), (&n as *const u64).cast(), 8) };
        assert_eq!(r, 8);
        assert_eq!(w.wait(Some(Duration::from_secs(1))), WaitOutcome::Notified);
    }
}
