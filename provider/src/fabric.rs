//! The fabric (`fi_fabric`, fi_fabric(3)): the object every domain of the provider is
//! opened from. It holds nothing of its own yet: `fi_close` frees it; domains, event queues
//! and wait sets are the next steps (docs/libfabric.md, "Status") and return `-FI_ENOSYS`.

use core::ffi::{c_int, c_void};

use crate::ffi::{self, errno};
use crate::nosys;
use crate::sys;

/// A fabric as the provider allocates it: libfabric's `fid_fabric` first, so that a
/// `struct fid *` to it is a pointer to this.
#[repr(C)]
pub(crate) struct Fabric {
    fid: sys::fid_fabric,
}

/// Wraps a table of C function pointers so that it can be a `static`: libfabric only reads
/// the tables the provider points its fids at.
#[repr(transparent)]
pub(crate) struct Ops<T>(pub(crate) T);

// SAFETY: the tables hold only a size and function pointers, and nothing writes to them.
unsafe impl<T> Sync for Ops<T> {}

impl<T> Ops<T> {
    /// The table as the `*mut` C declares the field (libfabric never writes through it).
    pub(crate) fn ptr(&'static self) -> *mut T {
        (&self.0 as *const T).cast_mut()
    }
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
    domain: Some(nosys::domain),
    passive_ep: Some(nosys::passive_ep),
    eq_open: Some(nosys::eq_open),
    wait_open: Some(nosys::wait_open),
    trywait: Some(nosys::trywait),
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
            // fi_fabric(3): the attributes "identify the fabric to open".
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
unsafe fn ours(fid: *mut sys::fid) -> Option<*mut Fabric> {
    // SAFETY: null or a valid fid, as the caller promises.
    let f = unsafe { fid.as_ref() }?;
    (f.fclass == sys::FI_CLASS_FABRIC as usize && f.ops == FI_OPS.ptr())
        .then_some(fid.cast::<Fabric>())
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
        drop(unsafe { Box::from_raw(f) });
        0
    })
}
