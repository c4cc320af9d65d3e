//! Event queues (`fi_eq_open`, fi_eq(3)): a queue of events in software. Most programs open
//! one whatever their endpoint type; ringfab's DGRAM endpoints have no connection events, so
//! what it holds is what the application writes (`fi_eq_write`), in order. It reports no
//! errors of its own: `fi_eq_readerr` finds none.
//!
//! Wait objects: `FI_WAIT_NONE` (no `fi_eq_sread`), `FI_WAIT_UNSPEC`, `FI_WAIT_YIELD` and
//! `FI_WAIT_MUTEX_COND` (a condition variable inside the provider, used by `fi_eq_sread`);
//! `FI_WAIT_FD` and `FI_WAIT_SET` return `-FI_ENOSYS`.

use core::ffi::{c_char, c_int, c_void};
use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crate::ffi::{self, errno, Ret};
use crate::fid::{self, Ops};
use crate::nosys;
use crate::sys;

/// An event queue as the provider allocates it.
#[repr(C)]
pub(crate) struct EqObj {
    fid: sys::fid_eq,
    events: Mutex<VecDeque<Event>>,
    /// Signalled by every write.
    written: Condvar,
    /// Whether `fi_eq_sread` may block (a wait object other than `FI_WAIT_NONE`).
    waits: bool,
    /// Most events the queue holds (`fi_eq_attr::size`).
    size: usize,
}

/// One event: its number and the bytes written with it.
struct Event {
    event: u32,
    data: Vec<u8>,
}

/// Events a queue of size 0 holds (libfabric's util EQ default).
const DEFAULT_SIZE: usize = 256;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A queue of plain values: consistent whatever panicked while it was held.
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

static EQ_OPS: Ops<sys::fi_ops_eq> = Ops(sys::fi_ops_eq {
    size: core::mem::size_of::<sys::fi_ops_eq>(),
    read: Some(read),
    readerr: Some(readerr),
    write: Some(write),
    sread: Some(sread),
    strerror: Some(strerror),
});

/// The event queue `fid` is, if it is one of this provider's.
///
/// # Safety
/// `fid` is null or points to a `struct fid`.
pub(crate) unsafe fn ours<'a>(fid: *const sys::fid) -> Option<&'a EqObj> {
    // SAFETY: null or a valid fid; queues of this class and table are `EqObj`s, alive until
    // fi_close.
    unsafe { fid::ours(fid, sys::FI_CLASS_EQ, &FI_OPS) }
}

/// `fi_ops_fabric::eq_open` (`fi_eq_open`).
///
/// # Safety
/// As libfabric calls it: `attr` null or valid, `eq` valid for writing.
pub(crate) unsafe extern "C" fn open(
    fabric: *mut sys::fid_fabric,
    attr: *mut sys::fi_eq_attr,
    eq: *mut *mut sys::fid_eq,
    context: *mut c_void,
) -> c_int {
    ffi::guard("fi_eq_open", || {
        // SAFETY: a fabric pointer from the application, checked to be one of ours.
        if unsafe { crate::fabric::ours(fabric.cast()) }.is_none() || attr.is_null() {
            return errno::INVAL;
        }
        if eq.is_null() {
            return errno::INVAL;
        }
        // SAFETY: checked not null; the application's attributes.
        let a = unsafe { &*attr };
        // fi_eq(3): FI_WRITE is the one flag (fi_eq_write is always allowed here).
        if a.flags & !sys::FI_WRITE != 0 {
            return errno::BADFLAGS;
        }
        let waits = match a.wait_obj {
            sys::FI_WAIT_NONE => false,
            sys::FI_WAIT_UNSPEC | sys::FI_WAIT_YIELD | sys::FI_WAIT_MUTEX_COND => true,
            sys::FI_WAIT_FD | sys::FI_WAIT_SET | sys::FI_WAIT_POLLFD => return errno::NOSYS,
            _ => return errno::INVAL,
        };
        let obj = Box::new(EqObj {
            fid: sys::fid_eq {
                fid: fid::new(sys::FI_CLASS_EQ, context, &FI_OPS),
                ops: EQ_OPS.ptr(),
            },
            events: Mutex::new(VecDeque::new()),
            written: Condvar::new(),
            waits,
            size: if a.size == 0 { DEFAULT_SIZE } else { a.size },
        });
        // SAFETY: checked not null; the queue is the caller's until fi_close.
        unsafe { *eq = Box::into_raw(obj).cast() };
        0
    })
}

/// `fi_ops::close` of an event queue.
unsafe extern "C" fn close(fid: *mut sys::fid) -> c_int {
    ffi::guard("fi_close(eq)", || {
        // SAFETY: libfabric passes the fid it was given, or null.
        let Some(q) = (unsafe { ours(fid) }) else {
            return errno::INVAL;
        };
        // SAFETY: made by Box::into_raw in `open`, closed once.
        unsafe { fid::free(q) };
        0
    })
}

impl EqObj {
    /// Takes (or, with `FI_PEEK`, copies) the head event into `buf`: its size, or an error.
    ///
    /// # Safety
    /// `event` null or valid for a write; `buf` valid for `len` bytes of writes.
    unsafe fn take(&self, event: *mut u32, buf: *mut c_void, len: usize, flags: u64) -> isize {
        let mut q = lock(&self.events);
        let Some(head) = q.front() else {
            return isize::neg(sys::FI_EAGAIN);
        };
        if head.data.len() > len || (buf.is_null() && !head.data.is_empty()) {
            return isize::neg(sys::FI_ETOOSMALL as i32);
        }
        // SAFETY: the caller's promise; the sizes were checked just above.
        unsafe {
            if !event.is_null() {
                *event = head.event;
            }
            if !head.data.is_empty() {
                core::ptr::copy_nonoverlapping(
                    head.data.as_ptr(),
                    buf.cast::<u8>(),
                    head.data.len(),
                );
            }
        }
        let n = head.data.len() as isize;
        if flags & sys::FI_PEEK == 0 {
            q.pop_front();
        }
        n
    }
}

/// `fi_eq_read`.
unsafe extern "C" fn read(
    eq: *mut sys::fid_eq,
    event: *mut u32,
    buf: *mut c_void,
    len: usize,
    flags: u64,
) -> isize {
    ffi::guard("fi_eq_read", || {
        // SAFETY: the application's fid, checked to be one of ours.
        let Some(q) = (unsafe { ours(eq.cast()) }) else {
            return isize::neg(sys::FI_EINVAL);
        };
        // SAFETY: fi_eq(3): `buf` holds `len` bytes; `event` is the caller's.
        unsafe { q.take(event, buf, len, flags) }
    })
}

/// `fi_eq_sread`: waits up to `timeout` milliseconds (negative: for ever) for an event.
unsafe extern "C" fn sread(
    eq: *mut sys::fid_eq,
    event: *mut u32,
    buf: *mut c_void,
    len: usize,
    timeout: c_int,
    flags: u64,
) -> isize {
    ffi::guard("fi_eq_sread", || {
        // SAFETY: the application's fid, checked to be one of ours.
        let Some(q) = (unsafe { ours(eq.cast()) }) else {
            return isize::neg(sys::FI_EINVAL);
        };
        if !q.waits {
            // fi_eq(3): a queue without a wait object cannot be waited on.
            return isize::neg(sys::FI_ENOSYS);
        }
        let deadline = u64::try_from(timeout)
            .ok()
            .map(|ms| Instant::now() + Duration::from_millis(ms));
        let mut guard = lock(&q.events);
        while guard.is_empty() {
            guard = match deadline {
                None => q
                    .written
                    .wait(guard)
                    .unwrap_or_else(PoisonError::into_inner),
                Some(d) => {
                    let left = d.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return isize::neg(sys::FI_EAGAIN);
                    }
                    q.written
                        .wait_timeout(guard, left)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0
                }
            };
        }
        drop(guard);
        // SAFETY: as `read`.
        unsafe { q.take(event, buf, len, flags) }
    })
}

/// `fi_eq_readerr`: the queue reports no errors of its own.
unsafe extern "C" fn readerr(
    eq: *mut sys::fid_eq,
    buf: *mut sys::fi_eq_err_entry,
    _flags: u64,
) -> isize {
    ffi::guard("fi_eq_readerr", || {
        // SAFETY: the application's fid, checked to be one of ours.
        if unsafe { ours(eq.cast()) }.is_none() || buf.is_null() {
            return isize::neg(sys::FI_EINVAL);
        }
        isize::neg(sys::FI_EAGAIN)
    })
}

/// `fi_eq_write`: queues an event of the application's (fi_eq(3)); its size on success.
unsafe extern "C" fn write(
    eq: *mut sys::fid_eq,
    event: u32,
    buf: *const c_void,
    len: usize,
    _flags: u64,
) -> isize {
    ffi::guard("fi_eq_write", || {
        // SAFETY: the application's fid, checked to be one of ours.
        let Some(q) = (unsafe { ours(eq.cast()) }) else {
            return isize::neg(sys::FI_EINVAL);
        };
        if buf.is_null() && len > 0 {
            return isize::neg(sys::FI_EINVAL);
        }
        let data = if len == 0 {
            Vec::new()
        } else {
            // SAFETY: fi_eq(3): `buf` holds `len` bytes.
            unsafe { core::slice::from_raw_parts(buf.cast::<u8>(), len) }.to_vec()
        };
        let mut events = lock(&q.events);
        if events.len() >= q.size {
            return isize::neg(sys::FI_EAGAIN);
        }
        events.push_back(Event { event, data });
        drop(events);
        q.written.notify_all();
        len as isize
    })
}

/// `fi_eq_strerror`: the queue has no provider errors; the text says so.
unsafe extern "C" fn strerror(
    _eq: *mut sys::fid_eq,
    _prov_errno: c_int,
    _err_data: *const c_void,
    buf: *mut c_char,
    len: usize,
) -> *const c_char {
    const TEXT: &core::ffi::CStr = c"no provider error (ringfab's event queues report none)";
    let mut out = TEXT.as_ptr();
    let _: c_int = ffi::guard("fi_eq_strerror", || {
        if !buf.is_null() && len > 0 {
            let bytes = TEXT.to_bytes();
            let n = bytes.len().min(len - 1);
            // SAFETY: the caller's buffer holds `len` bytes; `n + 1` <= `len`.
            unsafe {
                core::ptr::copy_nonoverlapping(bytes.as_ptr(), buf.cast::<u8>(), n);
                *buf.add(n) = 0;
            }
            out = buf;
        }
        0
    });
    out
}
