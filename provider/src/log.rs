//! Messages to libfabric's log (`FI_LOG_LEVEL`, `FI_LOG_PROV`: fi_provider(7), "LOGGING
//! INTERFACE"), as the provider `ringfab`.

use core::ffi::{c_char, CStr};

use crate::sys;

/// Logs `msg` at `level` (`sys::FI_LOG_WARN`, …) for the fabric subsystem, if libfabric's
/// settings let it through. A message holding a NUL is cut there.
pub(crate) fn log(level: sys::fi_log_level, msg: &str) {
    let prov = crate::provider();
    // SAFETY: `prov` is the provider structure, valid for the life of the library.
    if unsafe { sys::fi_log_enabled(prov, level, sys::FI_LOG_FABRIC) } == 0 {
        return;
    }
    let msg =
        std::ffi::CString::new(msg.split('\0').next().unwrap_or_default()).unwrap_or_default();
    const FUNC: &CStr = c"ringfab";
    const FMT: &CStr = c"%s\n";
    // SAFETY: every pointer is a NUL-terminated string alive for the call; the format takes
    // exactly the one string given, so the variadic arguments match it.
    unsafe {
        sys::fi_log(
            prov,
            level,
            sys::FI_LOG_FABRIC,
            FUNC.as_ptr(),
            line!() as i32,
            FMT.as_ptr(),
            msg.as_ptr() as *const c_char,
        )
    };
}

/// [`log`] at `FI_LOG_WARN`.
pub(crate) fn warn(msg: &str) {
    log(sys::FI_LOG_WARN, msg);
}

/// [`log`] at `FI_LOG_INFO`.
pub(crate) fn info(msg: &str) {
    log(sys::FI_LOG_INFO, msg);
}
