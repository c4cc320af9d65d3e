//! The C boundary: how every entry point runs, libfabric's error numbers, and memory that
//! libfabric frees.
//!
//! Every function libfabric calls goes through [`guard`]: a panic inside becomes
//! `-FI_EOTHER` (logged), never an unwind into C code, which would be undefined behaviour.
//! Error numbers are returned negated, as fi_errno(3) has every call do.
//!
//! Whatever the provider hands libfabric to free — `fi_info` lists (`fi_freeinfo`) and the
//! strings and addresses inside them — is allocated by libfabric ([`sys::fi_dupinfo`]) or by
//! the C library's `malloc`/`strdup`, never by Rust's allocator: libfabric releases it with
//! `free(3)`.

use core::ffi::{c_char, c_int, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::sys;

/// `-FI_E…` as an entry point returns it.
pub(crate) const fn neg(errno: i32) -> c_int {
    -errno
}

/// fi_errno(3) values the provider returns, typed once.
pub(crate) mod errno {
    use super::neg;
    use crate::sys;
    use core::ffi::c_int;

    /// `-FI_EINVAL`: an argument is invalid (a null pointer where one is required).
    pub(crate) const INVAL: c_int = neg(sys::FI_EINVAL);
    /// `-FI_ENOMEM`.
    pub(crate) const NOMEM: c_int = neg(sys::FI_ENOMEM);
    /// `-FI_ENODATA`: fi_getinfo(3), "If no matching fabric information is available, info will
    /// be set to NULL and the call will return -FI_ENODATA".
    pub(crate) const NODATA: c_int = neg(sys::FI_ENODATA);
    /// `-FI_ENOSYS`: the call is not implemented.
    pub(crate) const NOSYS: c_int = neg(sys::FI_ENOSYS);
    /// `-FI_EBUSY`: the object is still in use (fi_close of an object others hold).
    pub(crate) const BUSY: c_int = neg(sys::FI_EBUSY);
    /// `-FI_EBADFLAGS`: flags not supported.
    pub(crate) const BADFLAGS: c_int = neg(sys::FI_EBADFLAGS as i32);
    /// `-FI_ETOOSMALL`: the caller's buffer is too small.
    pub(crate) const TOOSMALL: c_int = neg(sys::FI_ETOOSMALL as i32);
    /// `-FI_EOTHER`: what a panic becomes.
    pub(crate) const OTHER: c_int = -(sys::FI_EOTHER as c_int);
}

/// What an entry point returns: `int` or `ssize_t`, both negated error numbers on failure.
pub(crate) trait Ret: Copy {
    /// `-FI_EOTHER` in this type: what a panic becomes.
    const OTHER: Self;
    /// `-errno` in this type.
    fn neg(errno: i32) -> Self;
}

impl Ret for c_int {
    const OTHER: c_int = errno::OTHER;
    fn neg(errno: i32) -> c_int {
        -errno
    }
}

impl Ret for isize {
    const OTHER: isize = errno::OTHER as isize;
    fn neg(errno: i32) -> isize {
        -(errno as isize)
    }
}

/// A core error as an entry point returns it (`-FI_E…`, fi_errno(3)).
pub(crate) fn fail<R: Ret>(e: ringfab::Error) -> R {
    R::neg(e.errno())
}

/// Runs `f` for the entry point `what`, turning a panic into `-FI_EOTHER`.
///
/// The panic's message goes to libfabric's log (a warning); the default panic hook has already
/// printed it to standard error.
pub(crate) fn guard<R: Ret>(what: &'static str, f: impl FnOnce() -> R) -> R {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(panic) => {
            let msg = panic
                .downcast_ref::<&str>()
                .copied()
                .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
                .unwrap_or("(no message)");
            crate::log::warn(&format!("{what}: internal error (panic: {msg})"));
            R::OTHER
        }
    }
}

/// [`guard`] for an entry point that returns nothing (`fi_provider::cleanup`).
pub(crate) fn guard_void(what: &'static str, f: impl FnOnce()) {
    let _: c_int = guard(what, || {
        f();
        0
    });
}

/// The string at `p`, if `p` is not null and holds UTF-8.
///
/// # Safety
/// `p` is null or points to a NUL-terminated string that stays valid and unchanged for `'a`.
pub(crate) unsafe fn str_at<'a>(p: *const c_char) -> Option<&'a str> {
    if p.is_null() {
        return None;
    }
    // SAFETY: not null, and the caller promises a NUL-terminated string valid for 'a.
    unsafe { CStr::from_ptr(p) }.to_str().ok()
}

/// A copy of `s` in memory from `malloc(3)` (libfabric frees it with `free(3)`), or null if
/// `s` holds a NUL or memory is short.
pub(crate) fn c_strdup(s: &str) -> *mut c_char {
    let Ok(c) = std::ffi::CString::new(s) else {
        return core::ptr::null_mut();
    };
    // SAFETY: `c` is a NUL-terminated string; strdup copies it into fresh malloc'd memory.
    unsafe { libc::strdup(c.as_ptr()) }
}

/// A copy of `bytes` in memory from `malloc(3)`, or null if memory is short (or `bytes` is
/// empty).
pub(crate) fn c_memdup(bytes: &[u8]) -> *mut core::ffi::c_void {
    if bytes.is_empty() {
        return core::ptr::null_mut();
    }
    // SAFETY: malloc of a non-zero size; the result is checked before use.
    let p = unsafe { libc::malloc(bytes.len()) }.cast::<u8>();
    if !p.is_null() {
        // SAFETY: `p` has room for `bytes.len()` bytes and does not overlap `bytes`.
        unsafe { core::ptr::copy_nonoverlapping(bytes.as_ptr(), p, bytes.len()) };
    }
    p.cast()
}

/// An `fi_info` with every attribute structure, from libfabric's allocator (what the
/// `fi_allocinfo` macro does), or null if memory is short.
pub(crate) fn alloc_info() -> *mut sys::fi_info {
    // SAFETY: fi_dupinfo(NULL) allocates a zeroed fi_info and its attribute structures.
    unsafe { sys::fi_dupinfo(core::ptr::null()) }
}
