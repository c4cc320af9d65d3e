//! What every object the provider hands out shares: a `struct fid` first (so that a pointer
//! to the object is a pointer to its fid, as libfabric's `container_of` expects), a class,
//! and an `fi_ops` table of the provider's own by which a fid is recognised as one of ours.

use core::ffi::c_void;

use crate::sys;

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

/// A fid of class `class` with the application's `context` and the provider's `ops`.
pub(crate) fn new(class: u32, context: *mut c_void, ops: &'static Ops<sys::fi_ops>) -> sys::fid {
    sys::fid {
        fclass: class as usize,
        context,
        ops: ops.ptr(),
    }
}

/// The object of type `T` behind `fid`, if `fid` is one of the provider's of class `class`
/// (its class and its `fi_ops` table say so).
///
/// # Safety
/// `fid` is null or points to a `struct fid`; every object whose fid has class `class` and
/// the table `ops` is a `T` (`#[repr(C)]`, fid first) that lives for `'a`.
pub(crate) unsafe fn ours<'a, T>(
    fid: *const sys::fid,
    class: u32,
    ops: &'static Ops<sys::fi_ops>,
) -> Option<&'a T> {
    // SAFETY: null or a valid fid, as the caller promises.
    let f = unsafe { fid.as_ref() }?;
    (f.fclass == class as usize && f.ops == ops.ptr()).then(|| {
        // SAFETY: the class and the table are this provider's for `T`: the caller's promise.
        unsafe { &*fid.cast::<T>() }
    })
}

/// Frees an object made by `Box::into_raw` and recognised by [`ours`].
///
/// # Safety
/// `obj` came from `Box::into_raw(Box<T>)` and is not used after (fi_close(3): the fid is
/// gone).
pub(crate) unsafe fn free<T>(obj: &T) {
    // SAFETY: the caller's promise.
    drop(unsafe { Box::from_raw((obj as *const T).cast_mut()) });
}
