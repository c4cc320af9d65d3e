//! Memory registration (`fi_mr_reg`, fi_mr(3)) under `FI_MR_LOCAL`: the application's pages
//! are registered with core, which maps them for the NIC's DMA (an IOMMU mapping) until
//! `fi_close`. `fi_mr_desc` gives a pointer to the registration, which every data call with a
//! buffer must pass as its descriptor: a buffer outside the registration it names is refused
//! with `-FI_EINVAL`.
//!
//! Without `FI_MSG_PREFIX` the data path copies between the application's buffers and the
//! endpoint's own registered buffers (docs/libfabric.md, "Buffers", says why: ringfab's header
//! lands in front of the payload). In prefix mode ([`crate::prefix`]) the application leaves
//! room for the header, and [`lend`] hands core a buffer at the application's own bytes of the
//! registration (`MemoryRegion::lend`), posted without a copy.
//!
//! Core cannot see where the application's buffers are, so `lend`'s promise — no two live
//! buffers of a region overlap — is kept here: each registration keeps the ranges of the lent
//! operations in flight on its memory ([`Lease`]), and a buffer that overlaps one is not lent
//! (the caller copies instead).

use core::ffi::{c_int, c_void};
use core::ptr::NonNull;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use ringfab::mr::{Buf, Memory, MemoryRegion};

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
    /// The operations in flight on this memory in prefix mode.
    leased: Arc<Leased>,
}

/// The byte ranges of a registration's operations in flight, and its core region once
/// `fi_close` has been called while a buffer lent from it was still posted.
#[derive(Default)]
struct Leased {
    ranges: Mutex<Vec<(usize, usize)>>,
    /// Closed by the application while lent buffers were out: core's region and its domain
    /// (still retained), closed when the last lease goes ([`Lease`]'s drop).
    closing: Mutex<Option<(MemoryRegion, DomainRef)>>,
}

/// The domain a region left open by `fi_close` is in, kept by a lease that may drop on any
/// thread.
struct DomainRef(&'static DomainObj);

// SAFETY: the threading level is FI_THREAD_SAFE: libfabric calls a domain from any thread, and
// the provider's domain object is used so already (every object on it holds the same `'static`
// reference). What is not `Sync` in it are the fid's pointers, to the provider's static,
// read-only ops tables and to the application's context, which the provider never
// dereferences; core's domain serializes itself.
unsafe impl Send for DomainRef {}
// SAFETY: as for `Send`.
unsafe impl Sync for DomainRef {}

impl Leased {
    /// Closes the region `fi_close` left behind, if there is one and no operation holds bytes
    /// of it any more.
    fn close_if_idle(&self) {
        let mut closing = lock(&self.closing);
        if !lock(&self.ranges).is_empty() {
            return;
        }
        let Some((region, domain)) = closing.take() else {
            return;
        };
        match region.close(domain.0.core()) {
            Ok(()) => domain.0.release(),
            // A buffer core kept outlives its lease only until its endpoint closes
            // (crate::ops::strand), whose purge drops the lease after it: still busy means
            // another lease is being taken down; the last one closes it.
            Err((_, region)) => *closing = Some((region, domain)),
        }
    }
}

/// The bytes `[start, end)` of a registration, reserved for one operation in flight: no other
/// operation may take bytes of them until it drops (with the operation's record, after the
/// buffer core was lent is gone).
pub(crate) struct Lease {
    leased: Arc<Leased>,
    range: (usize, usize),
}

impl Drop for Lease {
    fn drop(&mut self) {
        {
            let mut l = lock(&self.leased.ranges);
            if let Some(i) = l.iter().position(|r| *r == self.range) {
                l.swap_remove(i);
            }
        }
        self.leased.close_if_idle();
    }
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

/// The registration `desc` names, if `[buf, buf + len)` lies inside it ([`check`]).
///
/// # Safety
/// As [`check`].
unsafe fn inside<'a>(
    desc: *mut c_void,
    domain: &DomainObj,
    buf: usize,
    len: usize,
) -> Result<&'a MrObj, c_int> {
    // SAFETY: the caller's promise.
    unsafe { check(desc, domain, buf, len)? };
    // SAFETY: as in `check`, which has just recognised it.
    unsafe { fid::ours::<MrObj>(desc.cast(), sys::FI_CLASS_MR, &FI_OPS) }.ok_or(errno::INVAL)
}

/// Lends core the application's bytes `lent` (first byte, length) of the registration `desc`
/// names, under a lease of the application's whole buffer `whole` (first byte, length): a
/// buffer core posts in place (`MemoryRegion::lend`). The buffer must drop before the lease.
///
/// `Ok(None)` if `whole` overlaps the buffer of another lent operation in flight: fi_msg(3)
/// leaves a buffer to the provider until its operation completes, but an application may
/// break that (`fi_pingpong` posts its receive buffer twice), and core must never hold two
/// overlapping live buffers of a region — the caller copies through the endpoint's own
/// buffers instead.
///
/// # Errors
/// As [`check`]; core's error if the region refuses (closing).
///
/// # Safety
/// As [`check`] for `whole`; `lent` lies inside `whole`.
pub(crate) unsafe fn lend(
    desc: *mut c_void,
    domain: &'static DomainObj,
    whole: (usize, usize),
    lent: (usize, usize),
) -> Result<Option<(Buf<'static>, Lease)>, c_int> {
    // SAFETY: the caller's promise.
    let mr = unsafe { inside(desc, domain, whole.0, whole.1)? };
    let range = (whole.0, whole.0 + whole.1);
    let lease = {
        let mut l = lock(&mr.leased.ranges);
        if l.iter().any(|&(s, e)| s < range.1 && range.0 < e) {
            return Ok(None);
        }
        l.push(range);
        Lease {
            leased: mr.leased.clone(),
            range,
        }
    };
    let region = lock(&mr.core);
    let Some(region) = region.as_ref() else {
        return Err(errno::INVAL);
    };
    // SAFETY: `lend`'s promise: the bytes lent lie inside the lease just taken, and every
    // buffer lent from this region lies inside a lease of its own, which lives as long as the
    // buffer (the provider keeps it in the operation's record and drops it after the buffer,
    // or until the endpoint closes when core keeps the buffer: crate::ops::strand). Leases do
    // not overlap (checked above, under the lock), so neither do the buffers; and core hands
    // out no buffer of its own from an application's registration (nothing `alloc`s from it).
    let promise = unsafe { ringfab::mr::NoOverlap::promise() };
    let b = region
        .lend(domain.core(), lent.0 - mr.base, lent.1, promise)
        .map_err(ffi::fail::<c_int>)?;
    Ok(Some((b, lease)))
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
    // the region is closed (unmapped) in `close`, before fi_close returns — or, while a buffer
    // lent from it (`lend`, prefix mode) is still posted, when the last such buffer comes back:
    // core refuses to close a region with a live buffer, and fi_mr(3) has operations in flight
    // on a closed registration "fail or result in accesses to invalid memory". While a lent
    // buffer is posted the NIC reads or writes those bytes: fi_msg(3) has them the provider's
    // until the completion.
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
        leased: Arc::new(Leased::default()),
    });
    let raw = Box::into_raw(obj);
    // SAFETY: `raw` is the fresh object; its descriptor is its own address (`check`).
    unsafe {
        (*raw).fid.mem_desc = raw.cast();
        *mr = raw.cast();
    }
    0
}

/// `fi_ops::close` of a registration: unmaps it. fi_mr(3): "Active or queued operations that
/// reference a memory region being closed may fail or result in accesses to invalid memory.
/// Applications are responsible for ensuring that a MR is no longer needed prior to closing
/// it." So a registration with buffers lent to operations in flight (prefix mode) closes for
/// the application at once — `fi_pingpong` closes its registration before its endpoint, a
/// receive still posted — while core's region, which cannot unmap memory the NIC may still
/// write, closes when the last of those operations completes or its endpoint closes; the
/// domain stays busy until then.
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
        let mut deferred = false;
        if let Some(region) = region {
            if let Err((e, region)) = region.close(m.domain.core()) {
                if e != ringfab::Error::Busy || lock(&m.leased.ranges).is_empty() {
                    *lock(&m.core) = Some(region);
                    return ffi::fail(e);
                }
                // Lent buffers are out: the last lease closes the region and releases the
                // domain.
                *lock(&m.leased.closing) = Some((region, DomainRef(m.domain)));
                deferred = true;
            }
        }
        let domain = m.domain;
        let leased = m.leased.clone();
        // SAFETY: made by Box::into_raw in `register`, closed once.
        unsafe { fid::free(m) };
        if deferred {
            // The leases may all have gone meanwhile.
            leased.close_if_idle();
        } else {
            domain.release();
        }
        0
    })
}
