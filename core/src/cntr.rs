//! Counters (`fi_cntr`): a success count and an error count that completions increase, and a
//! thread can wait on.
//!
//! A [`Counter`] is the light-weight completion mechanism of `fi_cntr(3)`: instead of one entry
//! per operation, it only says *how many* operations completed (or, with
//! [`CounterEvents::Bytes`], how many bytes they moved) and how many failed.
//!
//! # What is guaranteed
//!
//! * **Lock-free, from any thread.** The two counts are `AtomicU64`s; [`add`](Counter::add),
//!   [`set`](Counter::set), [`adderr`](Counter::adderr), [`seterr`](Counter::seterr) and the
//!   completion path may run on many threads at once, and concurrent `add`s sum exactly. Counts
//!   wrap modulo 2^64, as libfabric's atomics do. (On a target without 64-bit atomics, such as
//!   32-bit Arm, each update takes a short lock instead: docs/architecture.md, "Targets without
//!   64-bit atomics".)
//! * **Updates are visible at once.** `fi_cntr(3)` allows "a small, but undefined, delay" before
//!   a read sees an update; here there is none: a [`read`](Counter::read) that happens after an
//!   update returns it, and a thread that sees a count also sees what the completing thread wrote
//!   before counting (the counts use sequentially consistent atomics).
//! * **[`wait`](Counter::wait)** returns `Ok(())` only after it observed the success count at or
//!   above the threshold; returns [`Error::Avail`] if the error count *changed* after the call
//!   began (a change that is undone again is still seen, because every change also bumps a private
//!   change count); returns [`Error::TimedOut`] (`FI_ETIMEDOUT`) only once the [`Clock`] says the
//!   timeout has passed — never earlier, whatever the wait handle does. If both the threshold is
//!   reached and the error count changed, success wins, as in libfabric's `util_cntr`.
//! * **No lost wake-up for a waiter.** Waiting follows DESIGN.md decision 9: register as a waiter,
//!   drain the wait handle, run progress, re-check, then block on the handle for what is left of
//!   the timeout. An update made after the re-check notifies the handle, whose notification is
//!   sticky, so the block returns at once.
//!
//! # Cost on the data path
//!
//! An update is one atomic read-modify-write plus one atomic load of the number of registered
//! waiters. Only when a thread is inside `wait` does the update also call
//! [`Wait::notify`] — an `eventfd` write (one syscall) under VFIO, a mutex and condvar broadcast
//! under emulation. So a counter nobody waits on costs no syscall and takes no lock (DESIGN.md
//! decision 7). Skipping the notification is safe: the updater's store and load of the waiter
//! count, and the waiter's registration and load of the count, are sequentially consistent, so
//! either the updater sees the waiter (and notifies) or the waiter sees the update.
//!
//! # Time: why `wait` takes a [`Clock`]
//!
//! The core has no clock of its own. [`Wait::wait`] takes a timeout, but it cannot bound a whole
//! `fi_cntr_wait`: a notification may arrive for an update that does not reach the threshold, and
//! the waiter must go back to sleep for the *rest* of the timeout. Re-arming with the full
//! timeout each time would let a stream of such updates postpone the timeout for ever, and
//! returning on the first wake would time out early. So `wait` computes a deadline from a
//! caller-supplied monotonic [`Clock`] and blocks for `deadline - now` each round. The clock is
//! passed to `wait` rather than stored, so that a counter's type does not depend on it and a
//! zero-sized clock costs nothing; a `wait` with no timeout never reads it.
//!
//! # Several waiters on one counter
//!
//! A [`Wait`] handle is a single sticky flag (an eventfd used as a semaphore of one): one
//! notification wakes one consumer. With several threads blocked in `wait` on the same counter,
//! the thread that takes a notification passes it on (notifies again) if another waiter is
//! registered and the notification told it something new, which wakes the others in the common
//! case without letting waiters ping-pong for ever. Because a one-bit object cannot guarantee
//! that every waiter sees every change, each block is also capped at [`WAIT_QUANTUM`]: a waiter
//! whose notification another waiter consumed re-checks within that time. libfabric's
//! `util_cntr` makes the same trade with a 50 ms quantum. A lone waiter never depends on the
//! quantum; it only costs it a wake-up per quantum while it sleeps.
//!
//! # Wait objects
//!
//! | [`WaitObj`] | updates notify | `wait` |
//! |---|---|---|
//! | `None` (the default) | nothing | refused with [`Error::NoSys`], as libfabric's `fi_no_cntr_wait` |
//! | `Unspec`, `Fd`, `MutexCond` | the handle given at open, if a thread waits | blocks on the handle |
//! | `Yield` | nothing | spins (`core::hint::spin_loop`) re-checking; no handle |
//! | `Set`, `PollFd` | — | refused at open with [`Error::NoSys`] (counters do not join wait sets yet; CQs do) |
//!
//! Which operating-system object `Fd` or `MutexCond` stands for is the platform's choice of
//! [`Wait`] implementation; `fi_cntr_control(FI_GETWAIT)` is not offered, so the application
//! never blocks on the handle itself.

use core::fmt;
use core::sync::atomic::{AtomicU32, Ordering::SeqCst};
use core::time::Duration;

use ringfab_hal::{Wait, WaitOutcome};

use crate::atomic::AtomicU64;
// Still reachable here, where it was first defined.
pub use crate::clock::Clock;
use crate::engine::{Count, Counters};
use crate::{Error, Result};

/// [`Counter`]'s count of error changes. Only whether it moved matters, never its value, so
/// where 64-bit atomics are missing it is 32 bits wide and takes no lock: a waiter misses a
/// change only if exactly 2^32 of them happen between two of its looks.
#[cfg(target_has_atomic = "64")]
type Generation = AtomicU64;
#[cfg(not(target_has_atomic = "64"))]
type Generation = AtomicU32;

/// The longest a blocked [`Counter::wait`] sleeps before it re-checks the counter on its own:
/// the bound on how late a waiter learns of an update whose notification another waiter of the
/// same counter consumed (see the [module docs](self#several-waiters-on-one-counter)).
pub const WAIT_QUANTUM: Duration = Duration::from_millis(10);

/// The waiting loop counters and completion queues share (DESIGN.md decision 9): drain
/// `handle`, then run `check` until it returns `Some`, blocking on `handle` between checks for
/// what is left of `timeout` as `clock` measures it. `None` once the timeout has passed — never
/// earlier, whatever the handle does. `check` is where the caller arms its interrupts and
/// re-checks; its argument says whether the block before it consumed a notification.
///
/// Each block is capped at [`WAIT_QUANTUM`] (see the [module docs](self#several-waiters-on-one-counter));
/// without a handle (`FI_WAIT_YIELD`) the loop spins with `core::hint::spin_loop`: core is
/// `no_std` and has no scheduler to yield to. `Some(Duration::ZERO)` checks once; an overflowing
/// deadline is as good as none.
pub(crate) fn block_until<C: Clock + ?Sized, W: Wait, T>(
    handle: Option<&W>,
    timeout: Option<Duration>,
    clock: &C,
    mut check: impl FnMut(bool) -> Option<T>,
) -> Option<T> {
    let deadline = timeout.and_then(|t| clock.now().checked_add(t));
    let mut consumed = handle.is_some_and(|w| w.drain());
    loop {
        if let Some(done) = check(consumed) {
            return Some(done);
        }
        let remaining = match deadline {
            None => None,
            Some(deadline) => {
                let now = clock.now();
                if now >= deadline {
                    return None;
                }
                Some(deadline - now)
            }
        };
        consumed = match handle {
            Some(w) => {
                let slice = remaining.map_or(WAIT_QUANTUM, |r| r.min(WAIT_QUANTUM));
                w.wait(Some(slice)) == WaitOutcome::Notified
            }
            None => {
                core::hint::spin_loop();
                false
            }
        };
    }
}

/// Converts a libfabric timeout in milliseconds (`int timeout`) to the one [`Counter::wait`]
/// takes: a negative value means no timeout (`None`).
pub fn timeout_from_ms(ms: i32) -> Option<Duration> {
    u64::try_from(ms).ok().map(Duration::from_millis)
}

/// What a counter counts (`enum fi_cntr_events`).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
#[non_exhaustive]
pub enum CounterEvents {
    /// `FI_CNTR_EVENTS_COMP`: one per operation that completed successfully.
    #[default]
    Completions,
    /// `FI_CNTR_EVENTS_BYTES`: the transfer size of each operation that completed successfully.
    /// A failed operation still adds one to the error count, not its size.
    Bytes,
}

impl CounterEvents {
    /// The value from libfabric's `enum fi_cntr_events` (`FI_CNTR_EVENTS_COMP` = 0,
    /// `FI_CNTR_EVENTS_BYTES` = 1).
    ///
    /// # Errors
    /// [`Error::Inval`] for a value libfabric does not define.
    pub const fn from_raw(raw: u32) -> Result<CounterEvents> {
        match raw {
            0 => Ok(CounterEvents::Completions),
            1 => Ok(CounterEvents::Bytes),
            _ => Err(Error::Inval),
        }
    }

    /// libfabric's number for this value.
    pub const fn raw(self) -> u32 {
        match self {
            CounterEvents::Completions => 0,
            CounterEvents::Bytes => 1,
        }
    }
}

/// How a thread waits on an object (`enum fi_wait_obj`).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
#[non_exhaustive]
pub enum WaitObj {
    /// `FI_WAIT_NONE`: nobody will wait; [`Counter::wait`] is refused.
    #[default]
    None,
    /// `FI_WAIT_UNSPEC`: wait only through ringfab's calls; the platform picks the mechanism.
    Unspec,
    /// `FI_WAIT_SET`: a wait set shared by several objects (completion queues join one through
    /// `cq::WaitSet`; counters do not yet).
    Set,
    /// `FI_WAIT_FD`: a file descriptor (under VFIO, the eventfd behind the [`Wait`] handle).
    Fd,
    /// `FI_WAIT_MUTEX_COND`: a mutex and condition variable.
    MutexCond,
    /// `FI_WAIT_YIELD`: no wait object; waiting spins.
    Yield,
    /// `FI_WAIT_POLLFD`: a poll set of descriptors (not supported yet).
    PollFd,
}

impl WaitObj {
    /// The value from libfabric's `enum fi_wait_obj` (`FI_WAIT_NONE` = 0 … `FI_WAIT_POLLFD` = 6).
    ///
    /// # Errors
    /// [`Error::Inval`] for a value libfabric does not define.
    pub const fn from_raw(raw: u32) -> Result<WaitObj> {
        Ok(match raw {
            0 => WaitObj::None,
            1 => WaitObj::Unspec,
            2 => WaitObj::Set,
            3 => WaitObj::Fd,
            4 => WaitObj::MutexCond,
            5 => WaitObj::Yield,
            6 => WaitObj::PollFd,
            _ => return Err(Error::Inval),
        })
    }

    /// libfabric's number for this value.
    pub const fn raw(self) -> u32 {
        match self {
            WaitObj::None => 0,
            WaitObj::Unspec => 1,
            WaitObj::Set => 2,
            WaitObj::Fd => 3,
            WaitObj::MutexCond => 4,
            WaitObj::Yield => 5,
            WaitObj::PollFd => 6,
        }
    }

    /// Whether waiting blocks on a [`Wait`] handle given at open.
    const fn needs_handle(self) -> bool {
        matches!(self, WaitObj::Unspec | WaitObj::Fd | WaitObj::MutexCond)
    }
}

/// A counter's attributes (`struct fi_cntr_attr`, without `wait_set`: wait sets are not
/// supported yet). The default counts completions and allows no waiting, as libfabric's does.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct CounterAttr {
    /// What the success count counts.
    pub events: CounterEvents,
    /// How [`Counter::wait`] waits.
    pub wait_obj: WaitObj,
    /// Reserved by libfabric; must be 0.
    pub flags: u64,
}

/// An open counter (`fid_cntr`): a success count and an error count, shared by the endpoints
/// bound to it and by any number of threads.
///
/// `W` is the platform's [`Wait`] handle, used only by counters whose
/// [`wait_obj`](CounterAttr::wait_obj) blocks.
///
/// ```
/// use ringfab::cntr::{Counter, CounterAttr};
/// # struct NoHandle;
/// # impl ringfab::hal::Wait for NoHandle {
/// #     fn drain(&self) -> bool { false }
/// #     fn wait(&self, _: Option<core::time::Duration>) -> ringfab::hal::WaitOutcome {
/// #         ringfab::hal::WaitOutcome::TimedOut
/// #     }
/// #     fn notify(&self) {}
/// # }
///
/// // The default attributes: count completions, nobody waits.
/// let cntr = Counter::<NoHandle>::open(&CounterAttr::default(), None)?;
/// cntr.add(3);
/// cntr.adderr(1);
/// assert_eq!((cntr.read(), cntr.readerr()), (3, 1));
/// cntr.set(0);
/// assert_eq!(cntr.read(), 0);
/// # Ok::<(), ringfab::Error>(())
/// ```
pub struct Counter<W> {
    count: AtomicU64,
    err: AtomicU64,
    /// Bumped after every change of `err`, so a waiter sees a change even if it is undone.
    err_changes: Generation,
    /// Threads inside `wait`; updates notify the handle only when this is not zero.
    waiters: AtomicU32,
    attr: CounterAttr,
    wait: Option<W>,
}

impl<W: Wait> Counter<W> {
    /// Opens a counter (`fi_cntr_open`) with both counts at zero.
    ///
    /// `wait` is the handle a blocking [`wait_obj`](CounterAttr::wait_obj) (`Unspec`, `Fd`,
    /// `MutexCond`) sleeps on; it must be `None` for `None` and `Yield`, which need none.
    ///
    /// # Errors
    /// * [`Error::Inval`] if `attr.flags` is not 0 (libfabric reserves them), if a blocking
    ///   `wait_obj` comes without a handle, or if `None`/`Yield` comes with one.
    /// * [`Error::NoSys`] for `WaitObj::Set` and `WaitObj::PollFd` (counters do not join wait
    ///   sets yet).
    pub fn open(attr: &CounterAttr, wait: Option<W>) -> Result<Self> {
        if attr.flags != 0 {
            return Err(Error::Inval);
        }
        if matches!(attr.wait_obj, WaitObj::Set | WaitObj::PollFd) {
            return Err(Error::NoSys);
        }
        if attr.wait_obj.needs_handle() != wait.is_some() {
            return Err(Error::Inval);
        }
        Ok(Counter {
            count: AtomicU64::new(0),
            err: AtomicU64::new(0),
            err_changes: Generation::new(0),
            waiters: AtomicU32::new(0),
            attr: *attr,
            wait,
        })
    }

    /// The attributes the counter was opened with.
    pub fn attr(&self) -> CounterAttr {
        self.attr
    }

    /// The success count (`fi_cntr_read`).
    pub fn read(&self) -> u64 {
        self.count.load(SeqCst)
    }

    /// The error count (`fi_cntr_readerr`): operations that completed in error.
    pub fn readerr(&self) -> u64 {
        self.err.load(SeqCst)
    }

    /// Adds `value` to the success count (`fi_cntr_add`), wrapping modulo 2^64, and wakes a
    /// waiter if there is one.
    pub fn add(&self, value: u64) {
        if value == 0 {
            return;
        }
        self.count.fetch_add(value, SeqCst);
        self.signal();
    }

    /// Sets the success count to `value` (`fi_cntr_set`) and wakes a waiter if there is one.
    ///
    /// As `fi_cntr(3)` warns, a `set` that races with completions loses whichever of them it
    /// overwrites; here the result is always one of the orders in which they could have happened.
    pub fn set(&self, value: u64) {
        self.count.store(value, SeqCst);
        self.signal();
    }

    /// Adds `value` to the error count (`fi_cntr_adderr`), wrapping modulo 2^64; a non-zero
    /// `value` makes every thread inside [`wait`](Self::wait) return [`Error::Avail`].
    pub fn adderr(&self, value: u64) {
        if value == 0 {
            return;
        }
        self.err.fetch_add(value, SeqCst);
        self.error_changed();
    }

    /// Sets the error count to `value` (`fi_cntr_seterr`); if that changes it, every thread
    /// inside [`wait`](Self::wait) returns [`Error::Avail`].
    pub fn seterr(&self, value: u64) {
        if self.err.swap(value, SeqCst) != value {
            self.error_changed();
        }
    }

    /// Counts successful completions: `ops` operations that moved `bytes` bytes in all. Adds
    /// `ops` or `bytes` according to [`CounterAttr::events`].
    ///
    /// Crate-internal (`pub(crate)`), not `#[doc(hidden)] pub`: the completion path that calls it
    /// lives in this crate, and applications already have [`add`](Self::add); a hidden public
    /// item would still be API that semver and the C ABI would have to carry.
    pub(crate) fn complete_ok(&self, ops: u64, bytes: u64) {
        match self.attr.events {
            CounterEvents::Completions => self.add(ops),
            CounterEvents::Bytes => self.add(bytes),
        }
    }

    /// Counts `ops` operations that completed in error: one each, whatever
    /// [`CounterAttr::events`] says (`fi_cntr(3)`: the transfer size is not applied to the
    /// error field). `pub(crate)` for the reason given on [`complete_ok`](Self::complete_ok).
    pub(crate) fn complete_err(&self, ops: u64) {
        self.adderr(ops);
    }

    /// Waits until the success count is at least `threshold` (`fi_cntr_wait`).
    ///
    /// `timeout` of `None` waits for ever (libfabric's negative timeout; see
    /// [`timeout_from_ms`]); `Some(Duration::ZERO)` checks once. `clock` measures the timeout.
    /// The [module docs](self) say what is guaranteed and how waiting works.
    ///
    /// # Errors
    /// * [`Error::NoSys`] if the counter was opened with [`WaitObj::None`] (libfabric:
    ///   "invalid … to call this function"; its `fi_no_cntr_wait` returns `-FI_ENOSYS`).
    /// * [`Error::Avail`] if the error count changed after the call began and the threshold was
    ///   not reached; read it with [`readerr`](Self::readerr).
    /// * [`Error::TimedOut`] (`FI_ETIMEDOUT`) once `timeout` has passed by `clock`; the error
    ///   count is left as it is.
    pub fn wait<C: Clock + ?Sized>(
        &self,
        threshold: u64,
        timeout: Option<Duration>,
        clock: &C,
    ) -> Result {
        self.wait_with_progress(threshold, timeout, clock, || {})
    }

    /// [`wait`](Self::wait), running `progress` before every check of the counter: where the
    /// endpoints bound to the counter poll their rings (pass
    /// [`Endpoint::progress`](crate::ep::Endpoint::progress)) and re-arm their interrupts, so
    /// that a counter on a hardware queue advances while its waiter sleeps (DESIGN.md decision
    /// 9: drain, arm, re-check, block). ringfab's progress is manual: nothing advances a
    /// counter but a CQ read or `progress`.
    pub fn wait_with_progress<C: Clock + ?Sized>(
        &self,
        threshold: u64,
        timeout: Option<Duration>,
        clock: &C,
        mut progress: impl FnMut(),
    ) -> Result {
        let handle = match self.attr.wait_obj {
            WaitObj::None => return Err(Error::NoSys),
            WaitObj::Yield => None,
            // `open` guarantees a handle for every other wait object it accepts.
            _ => self.wait.as_ref(),
        };

        // Register before the first check: from here on every update notifies the handle.
        let _registered = Registered::new(&self.waiters);
        let errs_at_entry = self.err_changes.load(SeqCst);
        let mut last_seen = None;
        block_until(handle, timeout, clock, |consumed| {
            progress();
            let count = self.count.load(SeqCst);
            let errs = self.err_changes.load(SeqCst);
            let news = last_seen != Some((count, errs));
            last_seen = Some((count, errs));
            if consumed && news {
                // The notification may have been meant for another waiter too.
                self.pass_on();
            }
            if count >= threshold {
                Some(Ok(()))
            } else if errs != errs_at_entry {
                Some(Err(Error::Avail))
            } else {
                None
            }
        })
        .unwrap_or(Err(Error::TimedOut))
    }

    fn error_changed(&self) {
        self.err_changes.fetch_add(1, SeqCst);
        self.signal();
    }

    /// Notifies the handle if a thread is inside `wait`. The load pairs with the waiter's
    /// registration (both sequentially consistent): see the module docs.
    fn signal(&self) {
        if let Some(w) = &self.wait {
            if self.waiters.load(SeqCst) != 0 {
                w.notify();
            }
        }
    }

    /// Re-notifies a consumed notification when another waiter may need it.
    fn pass_on(&self) {
        if let Some(w) = &self.wait {
            if self.waiters.load(SeqCst) > 1 {
                w.notify();
            }
        }
    }
}

impl<W> fmt::Debug for Counter<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Counter")
            .field("count", &self.count.load(SeqCst))
            .field("err", &self.err.load(SeqCst))
            .field("waiters", &self.waiters.load(SeqCst))
            .field("attr", &self.attr)
            .finish_non_exhaustive()
    }
}

/// A thread's registration as a waiter, undone on every exit from `wait` (panics in `progress`
/// included).
struct Registered<'a>(&'a AtomicU32);

impl<'a> Registered<'a> {
    fn new(waiters: &'a AtomicU32) -> Self {
        waiters.fetch_add(1, SeqCst);
        Registered(waiters)
    }
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, SeqCst);
    }
}

/// The engine counts through [`Count`] (it never names a counter).
impl<W: Wait> Count for Counter<W> {
    fn complete_ok(&self, ops: u64, bytes: u64) {
        Counter::complete_ok(self, ops, bytes);
    }

    fn complete_err(&self, ops: u64) {
        Counter::complete_err(self, ops);
    }
}

/// A domain's counters ([`Domain::with_counters`](crate::domain::Domain::with_counters)) as the
/// engine reaches them.
impl<W: Wait> Counters for &[&Counter<W>] {
    fn counter(&self, index: usize) -> Option<&dyn Count> {
        self.get(index).map(|c| *c as &dyn Count)
    }
}

#[cfg(test)]
mod tests {
    extern crate std;

    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::{Condvar, Mutex};
    use std::thread;
    use std::time::Instant;

    /// A condvar wait handle with the hal's sticky semantics, counting what was asked of it.
    #[derive(Default)]
    struct CondWait {
        pending: Mutex<bool>,
        cv: Condvar,
        notifies: AtomicUsize,
        blocks: AtomicUsize,
        timeouts: AtomicUsize,
    }

    impl Wait for CondWait {
        fn drain(&self) -> bool {
            core::mem::replace(&mut *self.pending.lock().unwrap(), false)
        }

        fn wait(&self, timeout: Option<Duration>) -> WaitOutcome {
            self.blocks.fetch_add(1, SeqCst);
            let deadline = Instant::now() + timeout.unwrap_or(Duration::from_secs(3600));
            let mut pending = self.pending.lock().unwrap();
            loop {
                if core::mem::replace(&mut *pending, false) {
                    return WaitOutcome::Notified;
                }
                let now = Instant::now();
                if now >= deadline {
                    self.timeouts.fetch_add(1, SeqCst);
                    return WaitOutcome::TimedOut;
                }
                pending = self.cv.wait_timeout(pending, deadline - now).unwrap().0;
            }
        }

        fn notify(&self) {
            *self.pending.lock().unwrap() = true;
            self.notifies.fetch_add(1, SeqCst);
            self.cv.notify_all();
        }
    }

    /// A handle that claims its timeout passed at once: a badly behaved platform.
    struct ImpatientWait;

    impl Wait for ImpatientWait {
        fn drain(&self) -> bool {
            false
        }
        fn wait(&self, _: Option<Duration>) -> WaitOutcome {
            WaitOutcome::TimedOut
        }
        fn notify(&self) {}
    }

    struct StdClock(Instant);

    impl StdClock {
        fn new() -> Self {
            StdClock(Instant::now())
        }
    }

    impl Clock for StdClock {
        fn now(&self) -> Duration {
            self.0.elapsed()
        }
    }

    /// Bounds of the waiting tests, and their work, under Miri: it interprets every
    /// instruction, so its clock runs hundreds of times faster against the work done, and the
    /// same loops take minutes. The bounds stay hang guards; the loops keep the same shape.
    const SLOW: u32 = if cfg!(miri) { 100 } else { 1 };
    const LONG: Option<Duration> = Some(Duration::from_secs(20 * SLOW as u64));

    fn attr(wait_obj: WaitObj) -> CounterAttr {
        CounterAttr {
            wait_obj,
            ..CounterAttr::default()
        }
    }

    fn blocking() -> Counter<CondWait> {
        Counter::open(&attr(WaitObj::Unspec), Some(CondWait::default())).unwrap()
    }

    /// Waits until `n` threads are registered in `c.wait`.
    fn until_waiting<W>(c: &Counter<W>, n: u32) {
        while c.waiters.load(SeqCst) < n {
            thread::yield_now();
        }
        // Give the waiter time to get past its checks and block.
        thread::sleep(Duration::from_millis(20));
    }

    #[test]
    fn add_and_set_change_only_the_success_count() {
        let c = blocking();
        assert_eq!((c.read(), c.readerr()), (0, 0));
        c.add(5);
        c.add(2);
        assert_eq!((c.read(), c.readerr()), (7, 0));
        c.set(3);
        assert_eq!((c.read(), c.readerr()), (3, 0));
        c.set(u64::MAX);
        c.add(2);
        assert_eq!(c.read(), 1, "counts wrap modulo 2^64");
    }

    #[test]
    fn adderr_and_seterr_change_only_the_error_count() {
        let c = blocking();
        c.adderr(4);
        c.adderr(1);
        assert_eq!((c.read(), c.readerr()), (0, 5));
        c.seterr(2);
        assert_eq!((c.read(), c.readerr()), (0, 2));
    }

    #[test]
    fn complete_ok_counts_operations_or_bytes_as_events_says() {
        let ops = blocking();
        ops.complete_ok(3, 4500);
        assert_eq!(ops.read(), 3);

        let bytes_attr = CounterAttr {
            events: CounterEvents::Bytes,
            ..attr(WaitObj::Unspec)
        };
        let bytes = Counter::open(&bytes_attr, Some(CondWait::default())).unwrap();
        bytes.complete_ok(3, 4500);
        assert_eq!(bytes.read(), 4500);
    }

    #[test]
    fn complete_err_adds_one_per_failed_operation_even_when_counting_bytes() {
        let bytes_attr = CounterAttr {
            events: CounterEvents::Bytes,
            ..attr(WaitObj::Unspec)
        };
        let c = Counter::open(&bytes_attr, Some(CondWait::default())).unwrap();
        c.complete_err(2);
        assert_eq!((c.read(), c.readerr()), (0, 2));
    }

    #[test]
    fn wait_returns_when_another_thread_reaches_the_threshold() {
        let c = blocking();
        let clock = StdClock::new();
        thread::scope(|s| {
            let waiter = s.spawn(|| c.wait(3, LONG, &clock));
            until_waiting(&c, 1);
            c.add(1);
            c.add(1);
            c.add(1);
            assert_eq!(waiter.join().unwrap(), Ok(()));
        });
        assert!(c.read() >= 3);
    }

    #[test]
    fn wait_with_threshold_already_met_returns_at_once_without_blocking() {
        let c = blocking();
        c.add(5);
        let clock = StdClock::new();
        assert_eq!(c.wait(5, None, &clock), Ok(()));
        assert_eq!(c.wait(2, Some(Duration::ZERO), &clock), Ok(()));
        assert_eq!(c.wait.as_ref().unwrap().blocks.load(SeqCst), 0);
    }

    #[test]
    fn wait_with_zero_timeout_checks_once_and_times_out() {
        let c = blocking();
        let clock = StdClock::new();
        assert_eq!(
            c.wait(1, Some(Duration::ZERO), &clock),
            Err(Error::TimedOut)
        );
        assert_eq!(c.wait.as_ref().unwrap().blocks.load(SeqCst), 0);
    }

    #[test]
    fn wait_times_out_no_earlier_than_the_timeout_with_etimedout() {
        let c = blocking();
        let clock = StdClock::new();
        for ms in [1, 15, 40] {
            let timeout = Duration::from_millis(ms);
            let start = Instant::now();
            let got = c.wait(1, Some(timeout), &clock);
            let took = start.elapsed();
            assert_eq!(got, Err(Error::TimedOut));
            assert_eq!(got.unwrap_err().errno(), 110);
            assert!(took >= timeout, "{ms} ms timeout returned after {took:?}");
        }
        assert_eq!(c.readerr(), 0, "a timeout leaves the error count alone");
    }

    #[test]
    fn wait_never_times_out_early_even_if_the_handle_returns_early() {
        let c = Counter::open(&attr(WaitObj::Fd), Some(ImpatientWait)).unwrap();
        let clock = StdClock::new();
        let timeout = Duration::from_millis(20);
        let start = Instant::now();
        assert_eq!(c.wait(1, Some(timeout), &clock), Err(Error::TimedOut));
        assert!(start.elapsed() >= timeout);
    }

    #[test]
    fn error_increment_wakes_a_waiter_with_avail() {
        let c = blocking();
        let clock = StdClock::new();
        thread::scope(|s| {
            let waiter = s.spawn(|| c.wait(1, LONG, &clock));
            until_waiting(&c, 1);
            c.adderr(1);
            assert_eq!(waiter.join().unwrap(), Err(Error::Avail));
        });
        assert_eq!(c.readerr(), 1);
    }

    #[test]
    fn seterr_to_a_new_value_wakes_a_waiter_with_avail() {
        let c = blocking();
        c.adderr(7);
        let clock = StdClock::new();
        thread::scope(|s| {
            let waiter = s.spawn(|| c.wait(1, LONG, &clock));
            until_waiting(&c, 1);
            c.seterr(0);
            assert_eq!(waiter.join().unwrap(), Err(Error::Avail));
        });
    }

    #[test]
    fn error_change_undone_while_waiting_still_unblocks() {
        let c = blocking();
        let clock = StdClock::new();
        let mut first = true;
        let got = c.wait_with_progress(1, LONG, &clock, || {
            if core::mem::take(&mut first) {
                c.seterr(9);
                c.seterr(0);
            }
        });
        assert_eq!(got, Err(Error::Avail));
    }

    #[test]
    fn errors_counted_before_the_wait_began_do_not_unblock_it() {
        let c = blocking();
        c.adderr(3);
        c.seterr(3);
        let clock = StdClock::new();
        assert_eq!(
            c.wait(1, Some(Duration::from_millis(15)), &clock),
            Err(Error::TimedOut)
        );
    }

    #[test]
    fn reaching_the_threshold_takes_precedence_over_an_error_change() {
        let c = blocking();
        let clock = StdClock::new();
        let mut first = true;
        let got = c.wait_with_progress(2, LONG, &clock, || {
            if core::mem::take(&mut first) {
                c.adderr(1);
                c.add(2);
            }
        });
        assert_eq!(got, Ok(()));
    }

    #[test]
    fn wait_on_counter_without_wait_object_is_refused_with_nosys() {
        let c = Counter::<CondWait>::open(&CounterAttr::default(), None).unwrap();
        c.add(1);
        let clock = StdClock::new();
        assert_eq!(c.wait(1, None, &clock), Err(Error::NoSys));
        assert_eq!(c.wait(5, Some(Duration::ZERO), &clock), Err(Error::NoSys));
    }

    #[test]
    fn yield_counter_waits_by_spinning_without_a_handle() {
        let c = Counter::<CondWait>::open(&attr(WaitObj::Yield), None).unwrap();
        let clock = StdClock::new();
        thread::scope(|s| {
            let waiter = s.spawn(|| c.wait(2, LONG, &clock));
            until_waiting(&c, 1);
            c.add(2);
            assert_eq!(waiter.join().unwrap(), Ok(()));
        });
        assert_eq!(
            c.wait(3, Some(Duration::from_millis(5)), &clock),
            Err(Error::TimedOut)
        );
    }

    #[test]
    fn concurrent_adds_from_four_threads_sum_exactly() {
        const PER_THREAD: u64 = 100_000 / SLOW as u64;
        let c = blocking();
        thread::scope(|s| {
            for t in 0..4 {
                let c = &c;
                s.spawn(move || {
                    for _ in 0..PER_THREAD {
                        c.add(t + 1);
                        c.adderr(1);
                    }
                });
            }
        });
        assert_eq!(c.read(), PER_THREAD * (1 + 2 + 3 + 4));
        assert_eq!(c.readerr(), PER_THREAD * 4);
    }

    #[test]
    fn concurrent_adds_wake_a_waiter_at_the_exact_total() {
        const PER_THREAD: u64 = 10_000 / SLOW as u64;
        let c = blocking();
        let clock = StdClock::new();
        thread::scope(|s| {
            let waiter = s.spawn(|| c.wait(4 * PER_THREAD, LONG, &clock));
            until_waiting(&c, 1);
            for _ in 0..4 {
                s.spawn(|| (0..PER_THREAD).for_each(|_| c.add(1)));
            }
            assert_eq!(waiter.join().unwrap(), Ok(()));
        });
        assert_eq!(c.read(), 4 * PER_THREAD);
    }

    #[test]
    fn one_add_wakes_every_waiter_it_satisfies() {
        let c = blocking();
        let clock = StdClock::new();
        thread::scope(|s| {
            let waiters: std::vec::Vec<_> = (0..3)
                .map(|_| s.spawn(|| c.wait(1, LONG, &clock)))
                .collect();
            until_waiting(&c, 3);
            let start = Instant::now();
            c.add(1);
            for w in waiters {
                assert_eq!(w.join().unwrap(), Ok(()));
            }
            assert!(start.elapsed() < Duration::from_secs(5) * SLOW);
        });
    }

    #[test]
    fn ping_pong_between_two_lone_waiters_loses_no_wakeup() {
        // Each round both threads block on their own counter; a lost wake-up would leave one
        // sleeping until the quantum runs out, so count how often that happened.
        const ROUNDS: u64 = 2_000 / SLOW as u64;
        let (ping, pong) = (blocking(), blocking());
        let clock = StdClock::new();
        let start = Instant::now();
        thread::scope(|s| {
            s.spawn(|| {
                for i in 1..=ROUNDS {
                    assert_eq!(ping.wait(i, LONG, &clock), Ok(()));
                    pong.add(1);
                }
            });
            for i in 1..=ROUNDS {
                ping.add(1);
                assert_eq!(pong.wait(i, LONG, &clock), Ok(()));
            }
        });
        let expired = [&ping, &pong].map(|c| c.wait.as_ref().unwrap().timeouts.load(SeqCst));
        // A loaded machine may deschedule a thread past a quantum now and then; lost wake-ups
        // would show in nearly every round.
        assert!(
            expired[0] + expired[1] < 20,
            "quantum expiries: {expired:?}"
        );
        assert!(start.elapsed() < Duration::from_secs(10) * SLOW);
    }

    #[test]
    fn updates_notify_the_handle_only_while_a_thread_waits() {
        let c = blocking();
        for _ in 0..100 {
            c.add(1);
            c.adderr(1);
            c.set(0);
        }
        assert_eq!(c.wait.as_ref().unwrap().notifies.load(SeqCst), 0);
    }

    #[test]
    fn open_rejects_nonzero_flags_with_inval() {
        let a = CounterAttr {
            flags: 1,
            ..attr(WaitObj::Unspec)
        };
        let got = Counter::open(&a, Some(CondWait::default()));
        assert_eq!(got.map(|_| ()), Err(Error::Inval));
    }

    #[test]
    fn open_rejects_wait_sets_with_nosys() {
        for w in [WaitObj::Set, WaitObj::PollFd] {
            let got = Counter::<CondWait>::open(&attr(w), None);
            assert_eq!(got.map(|_| ()), Err(Error::NoSys), "{w:?}");
        }
    }

    #[test]
    fn open_rejects_a_missing_or_unneeded_wait_handle_with_inval() {
        for w in [WaitObj::Unspec, WaitObj::Fd, WaitObj::MutexCond] {
            let got = Counter::<CondWait>::open(&attr(w), None);
            assert_eq!(got.map(|_| ()), Err(Error::Inval), "{w:?} without a handle");
        }
        for w in [WaitObj::None, WaitObj::Yield] {
            let got = Counter::open(&attr(w), Some(CondWait::default()));
            assert_eq!(got.map(|_| ()), Err(Error::Inval), "{w:?} with a handle");
        }
    }

    #[test]
    fn raw_values_outside_libfabric_enums_are_inval() {
        for raw in 0..=6 {
            assert_eq!(WaitObj::from_raw(raw).map(WaitObj::raw), Ok(raw));
        }
        assert_eq!(WaitObj::from_raw(7), Err(Error::Inval));
        for raw in 0..=1 {
            assert_eq!(
                CounterEvents::from_raw(raw).map(CounterEvents::raw),
                Ok(raw)
            );
        }
        assert_eq!(CounterEvents::from_raw(2), Err(Error::Inval));
        assert_eq!(CounterAttr::default().wait_obj, WaitObj::None);
    }

    #[test]
    fn negative_millisecond_timeout_means_infinite() {
        assert_eq!(timeout_from_ms(-1), None);
        assert_eq!(timeout_from_ms(i32::MIN), None);
        assert_eq!(timeout_from_ms(0), Some(Duration::ZERO));
        assert_eq!(timeout_from_ms(250), Some(Duration::from_millis(250)));
    }
}
