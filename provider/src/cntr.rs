//! Counters (`fi_cntr_open`, fi_cntr(3)) over core's [`Counter`].
//!
//! Core's domain holds the counters its endpoints may bind from the moment it is made
//! ([`Domain::with_counters`](ringfab::domain::Domain::with_counters): it borrows them for
//! its whole life, so that no counter can go while an endpoint could count into it), but
//! libfabric opens counters later, one `fi_cntr_open` at a time. So every domain of the
//! provider is made with a [`Pool`] of counters — [`POOL_PER_KIND`] counting completions
//! (`FI_CNTR_EVENTS_COMP`) and as many counting bytes (`FI_CNTR_EVENTS_BYTES`) — and
//! `fi_cntr_open` hands out a free one, both counts set to zero; `fi_close` gives it back
//! (`-FI_EBUSY` while an endpoint is bound to it). `fi_getinfo`'s `cntr_cnt` is
//! [`POOL_PER_KIND`].
//!
//! Progress is manual (`FI_PROGRESS_MANUAL`): nothing counts unless the application calls in.
//! `fi_cntr_read`, `fi_cntr_readerr` and `fi_cntr_wait` drive the progress of the endpoints
//! bound to the counter (as libfabric's own counters do), so that a program that only looks
//! at its counters sees its operations complete.
//!
//! Wait objects: `FI_WAIT_NONE` (`fi_cntr_wait` is `-FI_ENOSYS`, as fi_cntr(3) and core have
//! it), `FI_WAIT_UNSPEC` and `FI_WAIT_YIELD` (the wait drives progress and sleeps on the
//! counter's handle between checks, [`ringfab::cntr::WAIT_QUANTUM`] at most). Core offers no
//! descriptor for a counter (`FI_GETWAIT`), so `FI_WAIT_FD`, `FI_WAIT_MUTEX_COND`,
//! `FI_WAIT_POLLFD` and wait sets are `-FI_ENOSYS`.

use core::ffi::{c_int, c_void};
use std::sync::{Mutex, MutexGuard, PoisonError};

use ringfab::cntr::{Counter, CounterAttr, CounterEvents, WaitObj};

use crate::domain::DomainObj;
use crate::ep::EpObj;
use crate::ffi::{self, errno};
use crate::fid::{self, Ops};
use crate::nosys;
use crate::sys;
use crate::table::ProvNic;

/// The wait handle core's counters sleep on: the NIC's.
type CntrWait = <ProvNic as ringfab::hal::Nic>::Wait;

/// A counter of core's, as a domain's pool holds it.
pub(crate) type CoreCntr = Counter<CntrWait>;

/// Counters of each kind (`FI_CNTR_EVENTS_COMP`, `FI_CNTR_EVENTS_BYTES`) a domain can have
/// open at once: `fi_getinfo`'s `cntr_cnt`.
pub(crate) const POOL_PER_KIND: usize = 16;

/// A domain's counters (see the module documentation): the first [`POOL_PER_KIND`] count
/// completions, the others bytes.
pub(crate) struct Pool {
    counters: Box<[CoreCntr]>,
    /// Borrows of `counters`, the slice core's domain is made with.
    refs: Box<[&'static CoreCntr]>,
    /// Which are open.
    open: Mutex<Vec<bool>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Plain values: consistent whatever panicked while they were held.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Pool {
    /// A pool of closed counters.
    pub(crate) fn new() -> Pool {
        let kinds = [CounterEvents::Completions, CounterEvents::Bytes];
        let counters: Box<[CoreCntr]> = kinds
            .iter()
            .flat_map(|&events| {
                (0..POOL_PER_KIND).map(move |_| {
                    let attr = CounterAttr {
                        events,
                        wait_obj: WaitObj::Unspec,
                        flags: 0,
                    };
                    // Unspec with a handle, and no flags: what `open` accepts.
                    // Core notifies a counter's handle itself (no device behind it), so the
                    // emulated platform's kind serves every NIC.
                    Counter::open(&attr, Some(CntrWait::Emu(ringfab_emu::EmuWait::new())))
                        .expect("a counter with a handle and no flags")
                })
            })
            .collect();
        let refs = counters
            .iter()
            .map(|c| {
                // SAFETY: the counters live in their own heap allocation, which neither moves
                // nor goes before the pool does; the domain that holds these borrows is
                // dropped before its pool (`DomainObj`'s field order).
                unsafe { &*(c as *const CoreCntr) }
            })
            .collect();
        Pool {
            open: Mutex::new(vec![false; counters.len()]),
            counters,
            refs,
        }
    }

    /// The slice core's domain is made with ([`Domain::with_counters`]).
    ///
    /// # Safety
    /// The domain made with it is dropped before the pool.
    ///
    /// [`Domain::with_counters`]: ringfab::domain::Domain::with_counters
    pub(crate) unsafe fn refs(&self) -> &'static [&'static CoreCntr] {
        // SAFETY: the caller's promise: the borrow ends with the domain, before the pool.
        unsafe { &*(&*self.refs as *const [&'static CoreCntr]) }
    }

    /// Opens a free counter of kind `events`, both counts at zero: its index.
    fn take(&self, events: CounterEvents) -> Option<usize> {
        let first = match events {
            CounterEvents::Bytes => POOL_PER_KIND,
            _ => 0,
        };
        let mut open = lock(&self.open);
        let i = (first..first + POOL_PER_KIND).find(|&i| !open[i])?;
        open[i] = true;
        let c = &self.counters[i];
        c.set(0);
        c.seterr(0);
        Some(i)
    }

    fn give_back(&self, i: usize) {
        lock(&self.open)[i] = false;
    }
}

/// Counts again, as an error, a receive core counted as a success of `bytes` bytes and the
/// provider truncated (the application's buffer was shorter than the message: core received
/// it whole into the endpoint's buffer; fi_cq(3) makes it `FI_ETRUNC`). fi_cntr(3): "If an
/// operation associated with the counter encounters an error, it will increment the error
/// value associated with the counter." The success is taken back (a wrapping add of its
/// negation); a thread inside `fi_cntr_wait` may have seen it meanwhile.
pub(crate) fn recount_truncated(c: &CoreCntr, bytes: usize) {
    let counted = match c.attr().events {
        CounterEvents::Bytes => bytes as u64,
        _ => 1,
    };
    c.add(counted.wrapping_neg());
    c.adderr(1);
}

/// A counter as the provider allocates it.
#[repr(C)]
pub(crate) struct CntrObj {
    fid: sys::fid_cntr,
    pub(crate) domain: &'static DomainObj,
    /// Its index in the domain's pool.
    index: usize,
    /// The application's wait object (the pool's counter always has a handle).
    wait_obj: WaitObj,
    /// The endpoints bound to it, whose progress its calls drive. Each removes itself when it
    /// closes ([`unbind`](Self::unbind)), so none is used after it is freed.
    eps: Mutex<Vec<&'static EpObj>>,
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

static CNTR_OPS: Ops<sys::fi_ops_cntr> = Ops(sys::fi_ops_cntr {
    size: core::mem::size_of::<sys::fi_ops_cntr>(),
    read: Some(read),
    readerr: Some(readerr),
    add: Some(add),
    set: Some(set),
    wait: Some(wait),
    adderr: Some(adderr),
    seterr: Some(seterr),
});

/// The counter `fid` is, if it is one of this provider's.
///
/// # Safety
/// `fid` is null or points to a `struct fid`.
pub(crate) unsafe fn ours<'a>(fid: *const sys::fid) -> Option<&'a CntrObj> {
    // SAFETY: null or a valid fid; counters of this class and table are `CntrObj`s, alive
    // until fi_close.
    unsafe { fid::ours(fid, sys::FI_CLASS_CNTR, &FI_OPS) }
}

/// `fi_ops_domain::cntr_open` (`fi_cntr_open`).
pub(crate) unsafe extern "C" fn open(
    domain: *mut sys::fid_domain,
    attr: *mut sys::fi_cntr_attr,
    cntr: *mut *mut sys::fid_cntr,
    context: *mut c_void,
) -> c_int {
    ffi::guard("fi_cntr_open", || {
        // SAFETY: the application's domain fid, checked to be one of ours.
        let Some(d) = (unsafe { crate::domain::ours(domain.cast()) }) else {
            return errno::INVAL;
        };
        if cntr.is_null() {
            return errno::INVAL;
        }
        // fi_cntr(3): attributes may be NULL ("the counter attributes … default").
        // SAFETY: null or the application's attributes.
        let (events, wait_obj, flags) = match unsafe { attr.as_ref() } {
            Some(a) => (a.events, a.wait_obj, a.flags),
            None => (sys::FI_CNTR_EVENTS_COMP, sys::FI_WAIT_NONE, 0),
        };
        if flags != 0 {
            return errno::BADFLAGS;
        }
        let (events, wait_obj) =
            match (CounterEvents::from_raw(events), WaitObj::from_raw(wait_obj)) {
                (Ok(e), Ok(w)) => (e, w),
                (Err(e), _) | (_, Err(e)) => return ffi::fail(e),
            };
        if !matches!(wait_obj, WaitObj::None | WaitObj::Unspec | WaitObj::Yield) {
            // No descriptor or wait set to give (module documentation).
            return errno::NOSYS;
        }
        let Some(index) = d.cntrs.take(events) else {
            return errno::NOMEM;
        };
        let obj = Box::new(CntrObj {
            fid: sys::fid_cntr {
                fid: fid::new(sys::FI_CLASS_CNTR, context, &FI_OPS),
                ops: CNTR_OPS.ptr(),
            },
            domain: d.retain(),
            index,
            wait_obj,
            eps: Mutex::new(Vec::new()),
        });
        // SAFETY: checked not null; the counter is the caller's until fi_close.
        unsafe { *cntr = Box::into_raw(obj).cast() };
        0
    })
}

/// `fi_ops::close` of a counter: `-FI_EBUSY` while an endpoint is bound to it.
unsafe extern "C" fn close(fid: *mut sys::fid) -> c_int {
    ffi::guard("fi_close(cntr)", || {
        // SAFETY: libfabric passes the fid it was given, or null.
        let Some(c) = (unsafe { ours(fid) }) else {
            return errno::INVAL;
        };
        if !lock(&c.eps).is_empty() {
            return errno::BUSY;
        }
        let (domain, index) = (c.domain, c.index);
        // SAFETY: made by Box::into_raw in `open`, closed once.
        unsafe { fid::free(c) };
        domain.cntrs.give_back(index);
        domain.release();
        0
    })
}

impl CntrObj {
    /// Core's counter.
    pub(crate) fn core(&self) -> &'static CoreCntr {
        let pool: &'static Pool = &self.domain.cntrs;
        &pool.counters[self.index]
    }

    /// `ep` is bound to the counter (its progress is driven by the counter's calls).
    pub(crate) fn bind(&self, ep: &'static EpObj) {
        let mut eps = lock(&self.eps);
        if !eps.iter().any(|e| core::ptr::eq(*e, ep)) {
            eps.push(ep);
        }
    }

    /// `ep` is closing.
    pub(crate) fn unbind(&self, ep: &EpObj) {
        lock(&self.eps).retain(|e| !core::ptr::eq(*e, ep));
    }

    /// Drives the progress of the bound endpoints.
    fn progress(&self) {
        for ep in lock(&self.eps).iter() {
            ep.progress();
        }
    }
}

/// The counter of an `fid_cntr` from the application.
///
/// # Safety
/// `cntr` null or a `struct fid_cntr`.
unsafe fn cntr_of<'a>(cntr: *mut sys::fid_cntr) -> Option<&'a CntrObj> {
    // SAFETY: the caller's promise.
    unsafe { ours(cntr.cast()) }
}

/// `fi_cntr_read`: the success count, after driving progress. fi_cntr(3) gives the call no
/// error return: a fid that is not a counter of ours reads 0.
unsafe extern "C" fn read(cntr: *mut sys::fid_cntr) -> u64 {
    read_with("fi_cntr_read", cntr, CoreCntr::read)
}

/// `fi_cntr_readerr`: the error count, after driving progress.
unsafe extern "C" fn readerr(cntr: *mut sys::fid_cntr) -> u64 {
    read_with("fi_cntr_readerr", cntr, CoreCntr::readerr)
}

fn read_with(what: &'static str, cntr: *mut sys::fid_cntr, f: fn(&CoreCntr) -> u64) -> u64 {
    let mut out = 0;
    let _: c_int = ffi::guard(what, || {
        // SAFETY: the application's counter.
        if let Some(c) = unsafe { cntr_of(cntr) } {
            c.progress();
            out = f(c.core());
        }
        0
    });
    out
}

/// Runs `f` on core's counter of `cntr` (`-FI_EINVAL` if it is not one of ours).
fn update(what: &'static str, cntr: *mut sys::fid_cntr, f: impl FnOnce(&CoreCntr)) -> c_int {
    ffi::guard(what, || {
        // SAFETY: the application's counter.
        match unsafe { cntr_of(cntr) } {
            Some(c) => {
                f(c.core());
                0
            }
            None => errno::INVAL,
        }
    })
}

/// `fi_cntr_add`.
unsafe extern "C" fn add(cntr: *mut sys::fid_cntr, value: u64) -> c_int {
    update("fi_cntr_add", cntr, |c| c.add(value))
}

/// `fi_cntr_set`.
unsafe extern "C" fn set(cntr: *mut sys::fid_cntr, value: u64) -> c_int {
    update("fi_cntr_set", cntr, |c| c.set(value))
}

/// `fi_cntr_adderr`.
unsafe extern "C" fn adderr(cntr: *mut sys::fid_cntr, value: u64) -> c_int {
    update("fi_cntr_adderr", cntr, |c| c.adderr(value))
}

/// `fi_cntr_seterr`.
unsafe extern "C" fn seterr(cntr: *mut sys::fid_cntr, value: u64) -> c_int {
    update("fi_cntr_seterr", cntr, |c| c.seterr(value))
}

/// `fi_cntr_wait`: until the success count reaches `threshold` (0), the error count changes
/// (`-FI_EAVAIL`) or `timeout` ms pass (`-FI_ETIMEDOUT`; negative: no timeout), driving the
/// bound endpoints' progress meanwhile. `-FI_ENOSYS` for a counter opened with
/// `FI_WAIT_NONE`.
unsafe extern "C" fn wait(cntr: *mut sys::fid_cntr, threshold: u64, timeout: c_int) -> c_int {
    ffi::guard("fi_cntr_wait", || {
        // SAFETY: the application's counter.
        let Some(c) = (unsafe { cntr_of(cntr) }) else {
            return errno::INVAL;
        };
        if c.wait_obj == WaitObj::None {
            // fi_cntr(3): waiting needs a wait object; core refuses it as libfabric does.
            return errno::NOSYS;
        }
        let clock = crate::clock::CallClock::start();
        let timeout = ringfab::cntr::timeout_from_ms(timeout);
        match c
            .core()
            .wait_with_progress(threshold, timeout, &clock, || c.progress())
        {
            Ok(()) => 0,
            Err(e) => ffi::fail(e),
        }
    })
}
