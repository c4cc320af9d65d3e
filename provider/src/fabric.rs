//! The fabric (`fi_fabric`, fi_fabric(3)): the object every domain and event queue of the
//! provider is opened from. It holds nothing of its own but the API version the application
//! asked for. Wait sets are [`crate::waitset`]'s; passive endpoints return `-FI_ENOSYS`
//! (docs/libfabric.md, "Status").

use core::ffi::{c_int, c_void};

use crate::ffi::{self, errno};
use crate::fid::{self, Ops};
use crate::nosys;
use crate::sys;

/// A fabric as the provider allocates it: libfabric's `fid_fabric` first, so that a
/// `struct fid *` to it is a pointer to this.
#[repr(C)]
pub(crate) struct Fabric {
    fid: sys::fid_fabric,
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

static FABRIC_OPS: Ops<sys::fi_ops_fabric> = Ops(sys::fi_ops_fabric {
    size: core::mem::size_of::<sys::fi_ops_fabric>(),
    domain: Some(crate::domain::open),
    passive_ep: Some(nosys::passive_ep),
    eq_open: Some(crate::eq::open),
    wait_open: Some(crate::waitset::open),
    trywait: Some(trywait),
    domain2: Some(nosys::domain2),
});

/// `fi_provider::fabric`: opens the fabric `attr` names (`attr->name` must be
/// [`FABRIC_NAME`](crate::getinfo::FABRIC_NAME)).
///
/// # Safety
/// As libfabric calls it: `attr` null or valid, `fabric` valid for writing.
pub(crate) unsafe extern "C" fn open(
    attr: *mut sys::fi_fabric_attr,
    fabric: *mut *mut sys::fid_fabric,
    context: *mut c_void,
) -> c_int {
    ffi::guard("fi_fabric", || {
        if attr.is_null() || fabric.is_null() {
            return errno::INVAL;
        }
        // SAFETY: `attr` checked not null; libfabric passes a valid attribute structure.
        let name = unsafe { ffi::str_at((*attr).name) };
        if name != Some(crate::getinfo::FABRIC_NAME) {
            // fi_fabric(3): "attr : Attributes of fabric to open" — not ours.
            return ffi::neg(sys::FI_ENODATA);
        }
        let f = Box::new(Fabric {
            fid: sys::fid_fabric {
                fid: sys::fid {
                    fclass: sys::FI_CLASS_FABRIC as usize,
                    context,
                    ops: FI_OPS.ptr(),
                },
                ops: FABRIC_OPS.ptr(),
                // SAFETY: checked not null above.
                api_version: unsafe { (*attr).api_version },
            },
        });
        // SAFETY: checked not null; the fabric is the caller's until fi_close.
        unsafe { *fabric = Box::into_raw(f).cast() };
        0
    })
}

/// The fabric `fid` is, if it is one of this provider's (its class and its ops table say so).
///
/// # Safety
/// `fid` is null or points to a `struct fid`.
pub(crate) unsafe fn ours<'a>(fid: *const sys::fid) -> Option<&'a Fabric> {
    // SAFETY: null or a valid fid; fabrics of this class and table are `Fabric`s, alive until
    // fi_close.
    unsafe { fid::ours(fid, sys::FI_CLASS_FABRIC, &FI_OPS) }
}

impl Fabric {
    /// The API version the application opened the fabric with (`fi_fabric_attr`).
    pub(crate) fn api_version(&self) -> u32 {
        self.fid.api_version
    }
}

/// `fi_trywait` (fi_poll(3)): whether it is safe to block on the wait objects of `fids`
/// (`FI_GETWAIT`'s descriptors): `0` with each one's interrupts armed, or `-FI_EAGAIN` if any
/// has something to read first. Completion queues and wait sets (each member) of the
/// provider's; any other fid is `-FI_EINVAL` (counters have no wait object to block on:
/// `crate::cntr`).
unsafe extern "C" fn trywait(
    fabric: *mut sys::fid_fabric,
    fids: *mut *mut sys::fid,
    count: c_int,
) -> c_int {
    ffi::guard("fi_trywait", || {
        // SAFETY: the application's fabric, checked to be one of ours.
        if unsafe { ours(fabric.cast()) }.is_none() {
            return errno::INVAL;
        }
        let Ok(count) = usize::try_from(count) else {
            return errno::INVAL;
        };
        if count > 0 && fids.is_null() {
            return errno::INVAL;
        }
        for i in 0..count {
            // SAFETY: fi_poll(3): `fids` holds `count` fids; each checked to be a CQ or a
            // wait set of ours.
            let (cq, set) = unsafe {
                let f = *fids.add(i);
                (crate::cq::ours(f), crate::waitset::ours(f))
            };
            let r = match (cq, set) {
                (Some(cq), _) => cq.trywait(),
                (_, Some(set)) => set.trywait(),
                _ => return errno::INVAL,
            };
            if r != 0 {
                return r;
            }
        }
        0
    })
}

/// `fi_ops::close` of a fabric (`fi_close`).
unsafe extern "C" fn close(fid: *mut sys::fid) -> c_int {
    ffi::guard("fi_close(fabric)", || {
        // SAFETY: libfabric passes the fid it was given, or null.
        let Some(f) = (unsafe { ours(fid) }) else {
            return errno::INVAL;
        };
        // SAFETY: `f` was made by Box::into_raw in `open` and is closed once (fi_close(3):
        // the fid is not used after).
        unsafe { fid::free(f) };
        0
    })
}
