//! The entries of the ops tables for what ringfab does not do (yet): each returns
//! `-FI_ENOSYS` (fi_errno(3): "Function not implemented"), so that libfabric's inline
//! wrappers, which call through the tables without checking for null, never reach a null
//! pointer. libfabric keeps such helpers (`fi_no_*`) inside its own tree; these are the
//! provider's own.

use core::ffi::{c_char, c_int, c_void};

use crate::ffi::errno::NOSYS;
use crate::sys;

/// `fi_ops::bind`.
pub(crate) unsafe extern "C" fn bind(_: *mut sys::fid, _: *mut sys::fid, _: u64) -> c_int {
    NOSYS
}

/// `fi_ops::control`.
pub(crate) unsafe extern "C" fn control(_: *mut sys::fid, _: c_int, _: *mut c_void) -> c_int {
    NOSYS
}

/// `fi_ops::ops_open` (`fi_open_ops`).
pub(crate) unsafe extern "C" fn ops_open(
    _: *mut sys::fid,
    _: *const c_char,
    _: u64,
    _: *mut *mut c_void,
    _: *mut c_void,
) -> c_int {
    NOSYS
}

/// `fi_ops::tostr`.
pub(crate) unsafe extern "C" fn tostr(_: *const sys::fid, _: *mut c_char, _: usize) -> c_int {
    NOSYS
}

/// `fi_ops::ops_set` (`fi_set_ops`).
pub(crate) unsafe extern "C" fn ops_set(
    _: *mut sys::fid,
    _: *const c_char,
    _: u64,
    _: *mut c_void,
    _: *mut c_void,
) -> c_int {
    NOSYS
}

/// `fi_ops_fabric::domain` (`fi_domain`).
pub(crate) unsafe extern "C" fn domain(
    _: *mut sys::fid_fabric,
    _: *mut sys::fi_info,
    _: *mut *mut sys::fid_domain,
    _: *mut c_void,
) -> c_int {
    NOSYS
}

/// `fi_ops_fabric::domain2` (`fi_domain2`).
pub(crate) unsafe extern "C" fn domain2(
    _: *mut sys::fid_fabric,
    _: *mut sys::fi_info,
    _: *mut *mut sys::fid_domain,
    _: u64,
    _: *mut c_void,
) -> c_int {
    NOSYS
}

/// `fi_ops_fabric::passive_ep` (`fi_passive_ep`): DGRAM endpoints have no passive side.
pub(crate) unsafe extern "C" fn passive_ep(
    _: *mut sys::fid_fabric,
    _: *mut sys::fi_info,
    _: *mut *mut sys::fid_pep,
    _: *mut c_void,
) -> c_int {
    NOSYS
}

/// `fi_ops_fabric::eq_open` (`fi_eq_open`).
pub(crate) unsafe extern "C" fn eq_open(
    _: *mut sys::fid_fabric,
    _: *mut sys::fi_eq_attr,
    _: *mut *mut sys::fid_eq,
    _: *mut c_void,
) -> c_int {
    NOSYS
}

/// `fi_ops_fabric::wait_open` (`fi_wait_open`).
pub(crate) unsafe extern "C" fn wait_open(
    _: *mut sys::fid_fabric,
    _: *mut sys::fi_wait_attr,
    _: *mut *mut sys::fid_wait,
) -> c_int {
    NOSYS
}

/// `fi_ops_fabric::trywait` (`fi_trywait`).
pub(crate) unsafe extern "C" fn trywait(
    _: *mut sys::fid_fabric,
    _: *mut *mut sys::fid,
    _: c_int,
) -> c_int {
    NOSYS
}
