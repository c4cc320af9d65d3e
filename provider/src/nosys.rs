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

/// What an entry returns for "not implemented": `-FI_ENOSYS` as `int` or as `ssize_t`.
pub(crate) trait NoSysRet {
    /// `-FI_ENOSYS`.
    const NOSYS: Self;
}

impl NoSysRet for c_int {
    const NOSYS: c_int = NOSYS;
}

impl NoSysRet for isize {
    const NOSYS: isize = NOSYS as isize;
}

/// A C function pointer type whose every entry can be one that returns `-FI_ENOSYS`, whatever
/// its arguments: the tables of operations ringfab does not offer (RMA, tagged, atomic,
/// collective messages) are filled with `Some(NoSys::NOSYS)`, the type chosen by the field.
pub(crate) trait NoSys: Sized {
    /// An entry of this type that returns `-FI_ENOSYS`.
    const NOSYS: Self;
}

/// Implements [`NoSys`] for C functions of the given argument types (generic), by a generic
/// function that ignores them.
macro_rules! nosys_for_arity {
    ($f:ident: $($a:ident),*) => {
        #[allow(
            improper_ctypes_definitions,
            reason = "instantiated only with the C types of libfabric's own ops tables"
        )]
        unsafe extern "C" fn $f<$($a,)* R: NoSysRet>($(_: $a),*) -> R {
            R::NOSYS
        }
        impl<$($a,)* R: NoSysRet> NoSys for unsafe extern "C" fn($($a),*) -> R {
            const NOSYS: Self = $f::<$($a,)* R>;
        }
    };
}

nosys_for_arity!(nosys1: A);
nosys_for_arity!(nosys2: A, B);
nosys_for_arity!(nosys3: A, B, C);
nosys_for_arity!(nosys4: A, B, C, D);
nosys_for_arity!(nosys5: A, B, C, D, E);
nosys_for_arity!(nosys6: A, B, C, D, E, F);
nosys_for_arity!(nosys7: A, B, C, D, E, F, G);
nosys_for_arity!(nosys8: A, B, C, D, E, F, G, H);
nosys_for_arity!(nosys9: A, B, C, D, E, F, G, H, I);
nosys_for_arity!(nosys10: A, B, C, D, E, F, G, H, I, J);
nosys_for_arity!(nosys11: A, B, C, D, E, F, G, H, I, J, K);
nosys_for_arity!(nosys12: A, B, C, D, E, F, G, H, I, J, K, L);
nosys_for_arity!(nosys13: A, B, C, D, E, F, G, H, I, J, K, L, M);
nosys_for_arity!(nosys14: A, B, C, D, E, F, G, H, I, J, K, L, M, N);
nosys_for_arity!(nosys15: A, B, C, D, E, F, G, H, I, J, K, L, M, N, O);
nosys_for_arity!(nosys16: A, B, C, D, E, F, G, H, I, J, K, L, M, N, O, P);

/// A whole table of `-FI_ENOSYS` entries: `nosys_table!(sys::fi_ops_rma { read, readv, … })`.
macro_rules! nosys_table {
    ($t:ident { $($field:ident),* $(,)? }) => {
        sys::$t {
            size: core::mem::size_of::<sys::$t>(),
            $($field: Some($crate::nosys::NoSys::NOSYS),)*
        }
    };
}
pub(crate) use nosys_table;
