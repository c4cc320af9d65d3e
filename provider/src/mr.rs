//! Memory registration (`fi_mr_reg`, fi_mr(3)) under `FI_MR_LOCAL`: the application's pages
//! are registered with core, which maps them for the NIC's DMA (an IOMMU mapping) until
//! `fi_close`. `fi_mr_desc` gives a pointer to the registration, which every data call with a
//! buffer must pass as its descriptor: a buffer outside the registration it names is refused
//! with `-FI_EINVAL`.
//!
//! The data path copies between the application's buffers and the endpoint's own registered
//! buffers (docs/libfabric.md, "Buffers", says why a receive must: ringfab's header lands in
//! front of the payload); the application's mapping is not handed to the NIC yet, and core
//! carves no buffer from it.

use core::ffi::{c_int, c_void};
use core::ptr::NonNull;

use ringfab::mr::{Memory, MemoryRegion};

use crate::domain::DomainObj;
use crate::ffi::{self, errno};
use crate::fid::{self, Ops};
use crate::nosys;
use crate::sys;

/// A registration as the provider allocates it; `fid_mr::mem_desc` points at it.
#[repr(C)]
pub(crate) struct MrObj {
    fid: sys::fid_mr,
    domain: &'static DomainObj,
    /// Core's region (taken when it closes).
    core: std::sync::Mutex<Option<MemoryRegion>>,
    /// The application's memory: first byte and length.
    base: usize,
    len: usize,
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

/// Access bits a local registration may ask for (fi_mr(3)): the data transfers that use it.
/// Remote access needs keys, which ringfab does not have (`mr_key_size` 0).
const LOCAL_ACCESS: u64 = sys::FI_SEND | sys::FI_RECV | sys::FI_READ | sys::FI_WRITE;

/// `OFI_MR_NOCACHE` (bit 60, libfabric's internal `ofi_util.h`): what libfabric's utility
/// providers pass when they register their own packet pools — `ofi_rxd` does for every pool
/// (docs/libfabric.md, "RDM through ofi_rxd") — to keep a core provider's registration cache
/// out of it. The provider has no cache, so every registration already is what it asks for.
const OFI_MR_NOCACHE: u64 = 1 << 60;

/// Checks that `[buf, buf + len)` lies inside the registration `desc` names, of `domain`.
///
/// # Errors
/// `-FI_EINVAL` for a null or foreign descriptor, another domain's registration, or a buffer
/// outside it (fi_mr(3): with `FI_MR_LOCAL` every buffer a data call names is registered).
///
/// # Safety
/// `desc` is null or a descriptor from `fi_mr_desc` of a registration still open.
pub(crate) unsafe fn check(
    desc: *mut c_void,
    domain: &DomainObj,
    buf: usize,
    len: usize,
) -> Result<(), c_int> {
    // SAFETY: a descriptor from fi_mr_desc is a pointer to the MrObj (its fid first); the
    // class and table check tells ours from anything else.
    let Some(mr) = (unsafe { fid::ours::<MrObj>(desc.cast(), sys::FI_CLASS_MR, &FI_OPS) }) else {
        return Err(errno::INVAL);
    };
    let inside = buf >= mr.base && buf.checked_add(len).is_some_and(|e| e <= mr.base + mr.len);
    if !core::ptr::eq(mr.domain, domain) || !inside {
        return Err(errno::INVAL);
    }
    Ok(())
}

/// `fi_ops_mr::reg` (`fi_mr_reg`).
pub(crate) unsafe extern "C" fn reg(
    fid: *mut sys::fid,
    buf: *const c_void,
    len: usize,
    access: u64,
    offset: u64,
    requested_key: u64,
    flags: u64,
    mr: *mut *mut sys::fid_mr,
    context: *mut c_void,
) -> c_int {
    ffi::guard("fi_mr_reg", || {
        // SAFETY: the application's domain fid, checked to be one of ours.
        let Some(d) = (unsafe { crate::domain::ours(fid) }) else {
            return errno::INVAL;
        };
        // SAFETY: the caller's pointers, as fi_mr(3) defines them.
        unsafe {
            register(
                d,
                buf,
                len,
                access,
                offset,
                requested_key,
                flags,
                mr,
                context,
            )
        }
    })
}

/// `fi_ops_mr::regv` (`fi_mr_regv`): one buffer (`mr_iov_limit` is 1).
pub(crate) unsafe extern "C" fn regv(
    fid: *mut sys::fid,
    iov: *const sys::iovec,
    count: usize,
    access: u64,
    offset: u64,
    requested_key: u64,
    flags: u64,
    mr: *mut *mut sys::fid_mr,
    context: *mut c_void,
) -> c_int {
    ffi::guard("fi_mr_regv", || {
        // SAFETY: the application's domain fid, checked to be one of ours.
        let Some(d) = (unsafe { crate::domain::ours(fid) }) else {
            return errno::INVAL;
        };
        if count != 1 || iov.is_null() {
            return errno::INVAL;
        }
        // SAFETY: checked not null; fi_mr(3): `iov` holds `count` entries.
        let v = unsafe { &*iov };
        // SAFETY: as `reg`.
        unsafe {
            register(
                d,
                v.iov_base,
                v.iov_len,
                access,
                offset,
                requested_key,
                flags,
                mr,
                context,
            )
        }
    })
}

/// `fi_ops_mr::regattr` (`fi_mr_regattr`): one buffer, local access.
pub(crate) unsafe extern "C" fn regattr(
    fid: *mut sys::fid,
    attr: *const sys::fi_mr_attr,
    flags: u64,
    mr: *mut *mut sys::fid_mr,
) -> c_int {
    ffi::guard("fi_mr_regattr", || {
        // SAFETY: the application's domain fid, checked to be one of ours.
        let Some(d) = (unsafe { crate::domain::ours(fid) }) else {
            return errno::INVAL;
        };
        // SAFETY: null or the application's attributes.
        let Some(a) = (unsafe { attr.as_ref() }) else {
            return errno::INVAL;
        };
        if a.iov_count != 1 || a.mr_iov.is_null() {
            return errno::INVAL;
        }
        // SAFETY: checked not null; `iov_count` entries.
        let v = unsafe { &*a.mr_iov };
        // SAFETY: as `reg`.
        unsafe {
            register(
                d,
                v.iov_base,
                v.iov_len,
                a.access,
                a.offset,
                a.requested_key,
                flags,
                mr,
                a.context,
            )
        }
    })
}

/// Registers `len` bytes at `buf` in domain `d`.
///
/// # Safety
/// `buf` is the application's memory of `len` bytes, which it keeps valid until the
/// registration is closed (fi_mr(3)); `mr` null or valid for writing.
#[allow(
    clippy::too_many_arguments,
    reason = "fi_mr_reg's arguments and the domain they were given to"
)]
unsafe fn register(
    d: &DomainObj,
    buf: *const c_void,
    len: usize,
    access: u64,
    offset: u64,
    requested_key: u64,
    flags: u64,
    mr: *mut *mut sys::fid_mr,
    context: *mut c_void,
) -> c_int {
    if mr.is_null() || len == 0 || offset != 0 {
        return errno::INVAL;
    }
    let Some(ptr) = NonNull::new(buf.cast_mut().cast::<u8>()) else {
        return errno::INVAL;
    };
    if access & !LOCAL_ACCESS != 0 {
        // Remote access asks for keys a peer could use: none on a DGRAM endpoint.
        return errno::INVAL;
    }
    if flags & !OFI_MR_NOCACHE != 0 {
        return errno::BADFLAGS;
    }
    // SAFETY: fi_mr(3) has the application keep the memory valid while it is registered, and
    // the region is closed (unmapped) in `close`, before fi_close returns. Core carves no
    // buffer from the region (the data path copies through the endpoint's own buffers), so no
    // descriptor names it and the application's own accesses race with nothing the NIC does.
    let mem = unsafe { Memory::from_raw_parts(ptr, len) };
    let region = match d.core().register(mem) {
        Ok(r) => r,
        Err(e) => return ffi::fail(e),
    };
    let domain = d.retain();
    let obj = Box::new(MrObj {
        fid: sys::fid_mr {
            fid: fid::new(sys::FI_CLASS_MR, context, &FI_OPS),
            mem_desc: core::ptr::null_mut(),
            key: requested_key,
        },
        domain,
        core: std::sync::Mutex::new(Some(region)),
        base: ptr.as_ptr() as usize,
        len,
    });
    let raw = Box::into_raw(obj);
    // SAFETY: `raw` is the fresh object; its descriptor is its own address (`check`).
    unsafe {
        (*raw).fid.mem_desc = raw.cast();
        *mr = raw.cast();
    }
    0
}

/// `fi_ops::close` of a registration: unmaps it.
unsafe extern "C" fn close(fid: *mut sys::fid) -> c_int {
    ffi::guard("fi_close(mr)", || {
        // SAFETY: libfabric passes the fid it was given, or null.
        let Some(m) = (unsafe { fid::ours::<MrObj>(fid, sys::FI_CLASS_MR, &FI_OPS) }) else {
            return errno::INVAL;
        };
        let region = m
            .core
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(region) = region {
            if let Err((e, region)) = region.close(m.domain.core()) {
                *m.core
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(region);
                return ffi::fail(e);
            }
        }
        let domain = m.domain;
        // SAFETY: made by Box::into_raw in `register`, closed once.
        unsafe { fid::free(m) };
        domain.release();
        0
    })
}
