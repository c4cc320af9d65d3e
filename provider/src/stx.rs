//! Shared transmit contexts (`fi_stx_context`, fi_endpoint(3) "SHARED CONTEXTS") over core's
//! [`SharedTxContext`]: one NIC transmit queue carrying the sends of several endpoints, each
//! bound to it with `fi_ep_bind` before `fi_enable` and still posting on itself, each
//! operation completing on its own endpoint's CQ and counter.
//!
//! `fi_tx_attr` names no queue, so the context takes the highest transmit queue of the NIC
//! that is free (endpoints take theirs from the bottom: their receive context number).
//! `fi_close` is `-FI_EBUSY` while an endpoint is bound. Core's limits hold (32 endpoints per
//! context; the shared queue has no interrupt, so a blocking read of an endpoint's CQ finds
//! its sends by polling every 10 ms). Shared receive contexts are [`crate::srx`]'s.

use core::ffi::{c_int, c_void};
use std::sync::{Mutex, MutexGuard, PoisonError};

use ringfab::flags::OpFlags;
use ringfab::stx::{SharedTxContext, StxAttr};

use crate::domain::DomainObj;
use crate::ffi::{self, errno};
use crate::fid::{self, Ops};
use crate::nosys::{self, NoSys};
use crate::sys;

/// A shared transmit context as the provider allocates it.
#[repr(C)]
pub(crate) struct StxObj {
    fid: sys::fid_stx,
    pub(crate) domain: &'static DomainObj,
    /// Core's context (taken when it closes).
    core: Mutex<Option<SharedTxContext>>,
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

// fi_endpoint(3): "operations are posted directly to the endpoint": none of its own.
static EP_OPS: Ops<sys::fi_ops_ep> = Ops(sys::fi_ops_ep {
    size: core::mem::size_of::<sys::fi_ops_ep>(),
    cancel: Some(NoSys::NOSYS),
    getopt: Some(NoSys::NOSYS),
    setopt: Some(NoSys::NOSYS),
    tx_ctx: Some(NoSys::NOSYS),
    rx_ctx: Some(NoSys::NOSYS),
    rx_size_left: Some(NoSys::NOSYS),
    tx_size_left: Some(NoSys::NOSYS),
});

/// The shared transmit context `fid` is, if it is one of this provider's.
///
/// # Safety
/// `fid` is null or points to a `struct fid`.
pub(crate) unsafe fn ours<'a>(fid: *const sys::fid) -> Option<&'a StxObj> {
    // SAFETY: null or a valid fid; contexts of this class and table are `StxObj`s, alive
    // until fi_close.
    unsafe { fid::ours(fid, sys::FI_CLASS_STX_CTX, &FI_OPS) }
}

/// `fi_ops_domain::stx_ctx` (`fi_stx_context`): `attr->op_flags` are the default transmit
/// flags its endpoints may have (a subset each).
pub(crate) unsafe extern "C" fn open(
    domain: *mut sys::fid_domain,
    attr: *mut sys::fi_tx_attr,
    stx: *mut *mut sys::fid_stx,
    context: *mut c_void,
) -> c_int {
    ffi::guard("fi_stx_context", || {
        // SAFETY: the application's domain fid, checked to be one of ours.
        let Some(d) = (unsafe { crate::domain::ours(domain.cast()) }) else {
            return errno::INVAL;
        };
        if stx.is_null() {
            return errno::INVAL;
        }
        // SAFETY: null or the application's attributes.
        let op_flags = unsafe { attr.as_ref() }.map_or(0, |a| a.op_flags);
        let dom = d.core();
        let queues = ringfab::hal::Nic::capabilities(dom.nic()).tx_queues;
        let mut last = ringfab::Error::NoMem;
        // The highest free queue (module documentation).
        let core = (0..queues).rev().find_map(|q| {
            let a = StxAttr {
                tx_queue: q,
                op_flags: OpFlags::from_bits_retain(op_flags),
                ..StxAttr::default()
            };
            dom.stx_context(&a).map_err(|e| last = e).ok()
        });
        let Some(core) = core else {
            return ffi::fail(last);
        };
        let obj = Box::new(StxObj {
            fid: sys::fid_stx {
                fid: fid::new(sys::FI_CLASS_STX_CTX, context, &FI_OPS),
                ops: EP_OPS.ptr(),
            },
            domain: d.retain(),
            core: Mutex::new(Some(core)),
        });
        // SAFETY: checked not null; the context is the caller's until fi_close.
        unsafe { *stx = Box::into_raw(obj).cast() };
        0
    })
}

impl StxObj {
    /// Runs `f` on core's context (`-FI_EINVAL` once closed).
    pub(crate) fn with_core<R>(&self, f: impl FnOnce(&SharedTxContext) -> R) -> Result<R, c_int> {
        lock(&self.core).as_ref().map(f).ok_or(errno::INVAL)
    }
}

/// `fi_ops::close` of a shared transmit context: `-FI_EBUSY` while an endpoint is bound.
unsafe extern "C" fn close(fid: *mut sys::fid) -> c_int {
    ffi::guard("fi_close(stx)", || {
        // SAFETY: libfabric passes the fid it was given, or null.
        let Some(s) = (unsafe { ours(fid) }) else {
            return errno::INVAL;
        };
        let mut core = lock(&s.core);
        if let Some(c) = core.take() {
            if let Err((e, back)) = c.close(s.domain.core()) {
                *core = Some(back);
                return ffi::fail(e);
            }
        }
        drop(core);
        let domain = s.domain;
        // SAFETY: made by Box::into_raw in `open`, closed once.
        unsafe { fid::free(s) };
        domain.release();
        0
    })
}
