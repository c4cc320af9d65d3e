//! Wait handles: where an interrupt lands and where a thread sleeps.
//!
//! Semantics are those of a Linux eventfd used as a semaphore of one: a notification that arrives
//! while nobody waits is kept, so the next [`wait`](Wait::wait) returns at once. That is what makes
//! the "drain, arm the interrupt, re-check, then block" sequence (DESIGN.md, decision 9) free of
//! lost wake-ups. VFIO provides eventfds, `ringfab-emu` a condvar; a bare-metal platform may spin.
//!
//! A [`WaitSet`] is one thread's wait over several handles (`fi_wait` over CQs opened with
//! `FI_WAIT_SET`): epoll over the eventfds under VFIO, one condvar the members notify under emu.

use core::time::Duration;

use crate::Result;

/// How a [`Wait::wait`] ended.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum WaitOutcome {
    /// A notification (interrupt or [`notify`](Wait::notify)) was consumed.
    Notified,
    /// The timeout passed with no notification.
    TimedOut,
}

/// The operating-system object behind a wait handle, for an application that blocks on it itself
/// (`fi_control(FI_GETWAIT)`). The hal is `no_std`, so this names the object rather than
/// wrapping it: the value is borrowed from the handle and valid while the handle lives.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub enum RawWait {
    /// A file descriptor that polls readable while a notification is pending (an eventfd, or
    /// an epoll descriptor for a [`WaitSet`]). Reading it is the handle's business: an
    /// application only polls it, then calls back into ringfab.
    Fd(i32),
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

    /// The operating-system object behind the handle, if it has one an application can block
    /// on (`FI_WAIT_FD`). The default is `None`: a condvar or a spin loop has nothing to hand out.
    fn raw(&self) -> Option<RawWait> {
        None
    }
}

/// One thread's wait over several [`Wait`] handles, its *members*.
///
/// Level-triggered, like epoll over eventfds: [`wait`](Self::wait) returns at once while any
/// member has a notification pending, so the caller drains the members ([`drain`](Self::drain)),
/// re-checks whatever the notifications stand for, and only then blocks — the same "drain, arm,
/// re-check, block" order as a single handle, with the same freedom from lost wake-ups. A member's
/// notification is consumed by whoever drains it: the set's `drain`/`wait`, or the member itself.
///
/// Membership is by identity: two handles of the same vector (clones, or two calls of
/// `Platform::irq` for one vector) are the same member.
pub trait WaitSet: Send + Sync {
    /// The member handle type: the platform's [`Wait`].
    type Wait: Wait;

    /// Adds `member`; adding a member twice is the same as adding it once.
    ///
    /// # Errors
    /// [`Error::InterruptUnavailable`](crate::Error::InterruptUnavailable) with vector
    /// `u16::MAX` if the platform cannot watch one more handle (epoll_ctl failed).
    fn add(&self, member: &Self::Wait) -> Result;

    /// Removes `member`; removing a handle that is not a member does nothing.
    fn remove(&self, member: &Self::Wait);

    /// Consumes every pending notification, of the members and of the set itself; returns
    /// whether there was one.
    fn drain(&self) -> bool;

    /// Blocks until a member or the set itself has a notification pending, then consumes every
    /// pending one ([`Notified`](WaitOutcome::Notified)); or until `timeout` passes (`None`:
    /// for ever). Returns at once if one was already pending.
    fn wait(&self, timeout: Option<Duration>) -> WaitOutcome;

    /// Makes a notification of the set itself pending and wakes its waiter.
    fn notify(&self);

    /// The operating-system object a thread can block on instead of calling
    /// [`wait`](Self::wait) (the epoll descriptor under VFIO); `None` by default.
    fn raw(&self) -> Option<RawWait> {
        None
    }
}
