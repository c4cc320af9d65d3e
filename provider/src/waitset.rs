//! Wait sets (`fi_wait_open`, `fi_wait`, fi_poll(3)) over core's [`WaitSet`]: one thread
//! waits on several completion queues opened with `FI_WAIT_SET` naming the set.
//!
//! libfabric opens a wait set on the fabric, before any domain; core's set covers the CQs of
//! one domain. So a set of the provider's is bound to the domain of the first CQ opened in it,
//! while it has members: a CQ of another domain is refused (`-FI_EINVAL`) meanwhile, and when
//! the last member closes the set is free to serve another domain.
//!
//! `fi_wait` waits on core's set, then lets each member take what completed (the success of an
//! operation without `FI_COMPLETION` under selective completion makes no entry, [`crate::ep`])
//! and returns once one has an entry to read, or `-FI_ETIMEDOUT`. Wait objects: `FI_WAIT_UNSPEC`
//! (`FI_WAIT_FD` is `-FI_ENOSYS`: the set is the provider platform's epoll set,
//! `crate::platform::ProvWaitSet`, whose descriptor is not given out yet). Counters do not join wait sets in core: a counter opened
//! with `FI_WAIT_SET` is `-FI_ENOSYS` ([`crate::cntr`]).

use core::ffi::c_int;
use std::sync::{Mutex, MutexGuard, PoisonError};

use ringfab::cq::{CompletionQueue, CqAttr, WaitSet};
use ringfab::entry::Tagged;

use crate::cq::CqObj;
use crate::domain::DomainObj;
use crate::ffi::{self, errno};
use crate::fid::{self, Ops};
use crate::nosys;
use crate::platform::ProvWaitSet;
use crate::sys;
use crate::table::ProvNic;

/// Core's wait set over the provider's NICs, on the provider platform's set (an epoll set
/// over wait handles of either kind, `crate::platform`).
type CoreSet = WaitSet<ProvNic, ProvWaitSet>;

/// A wait set as the provider allocates it.
#[repr(C)]
pub(crate) struct WaitSetObj {
    fid: sys::fid_wait,
    bound: Mutex<Option<Bound>>,
}

/// A set bound to a domain while it has members.
struct Bound {
    domain: &'static DomainObj,
    core: CoreSet,
    members: Vec<&'static CqObj>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Plain values: consistent whatever panicked while they were held.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

static FI_OPS: Ops<sys::fi_ops> = Ops(sys::fi_ops {
    size: core::mem::size_of::<sys::fi_ops>(),
    close: Some(close),
    bind: Some(nosys::bind),
    control: Some(nosys::control),
    ops_open: Some(nosys::ops_open),
    tostr: Some(nosys::tostr),
    ops_set: Some(nosys::ops_set),
});

static WAIT_OPS: Ops<sys::fi_ops_wait> = Ops(sys::fi_ops_wait {
    size: core::mem::size_of::<sys::fi_ops_wait>(),
    wait: Some(wait),
});

/// The wait set `fid` is, if it is one of this provider's.
///
/// # Safety
/// `fid` is null or points to a `struct fid`.
pub(crate) unsafe fn ours<'a>(fid: *const sys::fid) -> Option<&'a WaitSetObj> {
    // SAFETY: null or a valid fid; wait sets of this class and table are `WaitSetObj`s, alive
    // until fi_close.
    unsafe { fid::ours(fid, sys::FI_CLASS_WAIT, &FI_OPS) }
}

/// `fi_ops_fabric::wait_open` (`fi_wait_open`).
pub(crate) unsafe extern "C" fn open(
    fabric: *mut sys::fid_fabric,
    attr: *mut sys::fi_wait_attr,
    waitset: *mut *mut sys::fid_wait,
) -> c_int {
    ffi::guard("fi_wait_open", || {
        // SAFETY: the application's fabric, checked to be one of ours.
        if unsafe { crate::fabric::ours(fabric.cast()) }.is_none() {
            return errno::INVAL;
        }
        // SAFETY: null or the application's attributes.
        let Some(a) = (unsafe { attr.as_ref() }) else {
            return errno::INVAL;
        };
        if waitset.is_null() {
            return errno::INVAL;
        }
        if a.flags != 0 {
            return errno::BADFLAGS;
        }
        match a.wait_obj {
            sys::FI_WAIT_UNSPEC => {}
            // Known wait objects the emulated platform's set cannot be (module documentation).
            sys::FI_WAIT_FD
            | sys::FI_WAIT_MUTEX_COND
            | sys::FI_WAIT_POLLFD
            | sys::FI_WAIT_YIELD => {
                return errno::NOSYS;
            }
            _ => return errno::INVAL,
        }
        let obj = Box::new(WaitSetObj {
            fid: sys::fid_wait {
                fid: fid::new(sys::FI_CLASS_WAIT, core::ptr::null_mut(), &FI_OPS),
                ops: WAIT_OPS.ptr(),
            },
            bound: Mutex::new(None),
        });
        // SAFETY: checked not null; the set is the caller's until fi_close.
        unsafe { *waitset = Box::into_raw(obj).cast() };
        0
    })
}

/// `fi_ops::close` of a wait set: `-FI_EBUSY` while a CQ is in it.
unsafe extern "C" fn close(fid: *mut sys::fid) -> c_int {
    ffi::guard("fi_close(wait)", || {
        // SAFETY: libfabric passes the fid it was given, or null.
        let Some(w) = (unsafe { ours(fid) }) else {
            return errno::INVAL;
        };
        if lock(&w.bound).is_some() {
            return errno::BUSY;
        }
        // SAFETY: made by Box::into_raw in `open`, closed once.
        unsafe { fid::free(w) };
        0
    })
}

impl WaitSetObj {
    /// Opens core's CQ for `cq_attr` in this set, on domain `d` (binding the set to it if it
    /// has no member): core's CQ, or the negated error.
    pub(crate) fn open_cq(
        &self,
        d: &'static DomainObj,
        cq_attr: &CqAttr,
    ) -> Result<CompletionQueue<ProvNic, Tagged>, c_int> {
        let mut bound = lock(&self.bound);
        let b = match bound.as_mut() {
            Some(b) if !core::ptr::eq(b.domain, d) => {
                // Core's set covers one domain (module documentation).
                return Err(errno::INVAL);
            }
            Some(b) => b,
            None => {
                let set = ProvWaitSet::new().map_err(|_| errno::NOMEM)?;
                bound.insert(Bound {
                    domain: d,
                    core: WaitSet::new(d.core(), set),
                    members: Vec::new(),
                })
            }
        };
        let attr = CqAttr {
            wait_set: Some(b.core.id()),
            ..*cq_attr
        };
        let r = b.core.open_cq::<Tagged, _>(d.core(), &attr);
        if b.members.is_empty() && r.is_err() {
            *bound = None;
        }
        r.map_err(ffi::fail)
    }

    /// `cq` (opened through [`open_cq`](Self::open_cq)) is the set's.
    pub(crate) fn join(&self, cq: &'static CqObj) {
        if let Some(b) = lock(&self.bound).as_mut() {
            b.members.push(cq);
        }
    }

    /// `cq` is closed: it leaves the set, which the last member's leaving unbinds.
    pub(crate) fn leave(&self, cq: &CqObj) {
        let mut bound = lock(&self.bound);
        if let Some(b) = bound.as_mut() {
            b.members.retain(|m| !core::ptr::eq(*m, cq));
            if b.members.is_empty() {
                *bound = None;
            }
        }
    }

    /// `fi_trywait` of the set: each member's (fi_poll(3): only the set is passed).
    pub(crate) fn trywait(&self) -> c_int {
        let bound = lock(&self.bound);
        for cq in bound.iter().flat_map(|b| b.members.iter()) {
            let r = cq.trywait();
            if r != 0 {
                return r;
            }
        }
        0
    }
}

/// `fi_wait`: until a member CQ has an entry to read (0) or `timeout` ms pass
/// (`-FI_ETIMEDOUT`; negative: no timeout).
unsafe extern "C" fn wait(waitset: *mut sys::fid_wait, timeout: c_int) -> c_int {
    ffi::guard("fi_wait", || {
        // SAFETY: the application's wait set.
        let Some(w) = (unsafe { ours(waitset.cast()) }) else {
            return errno::INVAL;
        };
        let clock = crate::clock::CallClock::start();
        let timeout = ringfab::cntr::timeout_from_ms(timeout);
        let bound = lock(&w.bound);
        let Some(b) = bound.as_ref() else {
            // No member: nothing can end the wait but its timeout.
            return match timeout {
                Some(t) => {
                    std::thread::sleep(t);
                    ffi::neg(sys::FI_ETIMEDOUT)
                }
                None => errno::INVAL,
            };
        };
        // Members take what completed; one with an entry (or an error) to read ends the wait.
        for cq in &b.members {
            cq.progress();
        }
        if b.members.iter().any(|cq| cq.has_ready()) {
            return 0;
        }
        // Something completed or a member was signalled (fi_cq_signal); a completion that
        // makes no entry (selective completion) wakes it too, as fi_poll(3) allows: the
        // application reads nothing and waits again.
        match b.core.wait(b.domain.core(), timeout, &clock) {
            Ok(()) => 0,
            Err(e) => ffi::fail(e),
        }
    })
}
