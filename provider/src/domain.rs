//! The domain (`fi_domain`, fi_domain(3)): one NIC of the process's table ([`crate::table`])
//! and a core [`Domain`] over it, which holds every CQ, AV, registration and endpoint opened
//! on it. The NIC is emulated or bound to vfio-pci (`platform.rs`). An emulated NIC joins the emulated wire's hub while a domain is open on it.
//!
//! Objects opened on the domain keep a `&'static DomainObj`: the domain is freed only by
//! `fi_close`, which refuses (`-FI_EBUSY`, as fi_domain(3) has it for a domain with objects
//! still open) while any of them is open, so none outlives it.

use core::ffi::{c_int, c_void};
use core::sync::atomic::{AtomicUsize, Ordering};

use ringfab::domain::Domain;
use ringfab::entry::ErrEntryAbi;

use crate::ffi::{self, errno};
use crate::fid::{self, Ops};
use crate::nosys::{self, nosys_table};
use crate::sys;
use crate::table::{Opened, ProvNic};

/// A domain as the provider allocates it.
#[repr(C)]
pub(crate) struct DomainObj {
    fid: sys::fid_domain,
    /// The NIC.
    pub(crate) nic: &'static Opened,
    /// Core's domain: boxed, so that the `'static` borrows objects take of it stay put.
    core: Box<Domain<'static, ProvNic>>,
    /// The `fi_cq_err_entry` layout of the application (from the fabric's API version).
    pub(crate) abi: ErrEntryAbi,
    /// The API version, for the objects that depend on it.
    pub(crate) api_version: u32,
    /// The address format of the `fi_info` the domain was opened with, which its AVs take:
    /// fi_av(3), "Addresses inserted into an address vector must be in the same format as
    /// specified in the addr_format field of the fi_info struct provided when opening the
    /// corresponding domain."
    pub(crate) addr_format: ringfab::av::AddrFormat,
    /// Objects open on the domain (CQs, AVs, registrations, endpoints, counters).
    children: AtomicUsize,
    /// The counters `core` is made with: after it, so that it is dropped first.
    pub(crate) cntrs: crate::cntr::Pool,
}

impl DomainObj {
    /// Core's domain, for as long as any object of it may be used: see the module
    /// documentation for why `'static` holds.
    pub(crate) fn core(&self) -> &'static Domain<'static, ProvNic> {
        // SAFETY: the domain is boxed and freed only by `close`, which refuses while any object
        // that could hold this borrow is open; the provider's own calls hold it no longer than
        // the call of the object they serve.
        unsafe { &*(&*self.core as *const Domain<'static, ProvNic>) }
    }

    /// The domain as a `'static` borrow, for an object opened on it (counted until
    /// [`release`](Self::release)).
    pub(crate) fn retain(&self) -> &'static DomainObj {
        self.children.fetch_add(1, Ordering::AcqRel);
        // SAFETY: as `core`: the domain stays until every object counted here is closed.
        unsafe { &*(self as *const DomainObj) }
    }

    /// An object opened with [`retain`](Self::retain) is closed.
    pub(crate) fn release(&self) {
        self.children.fetch_sub(1, Ordering::AcqRel);
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

static DOMAIN_OPS: Ops<sys::fi_ops_domain> = Ops(sys::fi_ops_domain {
    size: core::mem::size_of::<sys::fi_ops_domain>(),
    av_open: Some(crate::av::open),
    cq_open: Some(crate::cq::open),
    endpoint: Some(crate::ep::open),
    cntr_open: Some(crate::cntr::open),
    scalable_ep: Some(crate::sep::open),
    stx_ctx: Some(crate::stx::open),
    srx_ctx: Some(crate::srx::open),
    ..nosys_table!(fi_ops_domain {
        av_open,
        cq_open,
        endpoint,
        scalable_ep,
        cntr_open,
        poll_open,
        stx_ctx,
        srx_ctx,
        query_atomic,
        query_collective,
        endpoint2,
    })
});

static MR_OPS: Ops<sys::fi_ops_mr> = Ops(sys::fi_ops_mr {
    size: core::mem::size_of::<sys::fi_ops_mr>(),
    reg: Some(crate::mr::reg),
    regv: Some(crate::mr::regv),
    regattr: Some(crate::mr::regattr),
});

/// The domain `fid` is, if it is one of this provider's.
///
/// # Safety
/// `fid` is null or points to a `struct fid`.
pub(crate) unsafe fn ours<'a>(fid: *const sys::fid) -> Option<&'a DomainObj> {
    // SAFETY: null or a valid fid; domains of this class and table are `DomainObj`s, alive
    // until fi_close.
    unsafe { fid::ours(fid, sys::FI_CLASS_DOMAIN, &FI_OPS) }
}

/// `fi_ops_fabric::domain` (`fi_domain`): opens the NIC `info->domain_attr->name` names (the
/// first of `FI_RINGFAB_NICS` without a name).
///
/// # Safety
/// As libfabric calls it: `fabric` and `info` valid, `domain` valid for writing.
pub(crate) unsafe extern "C" fn open(
    fabric: *mut sys::fid_fabric,
    info: *mut sys::fi_info,
    domain: *mut *mut sys::fid_domain,
    context: *mut c_void,
) -> c_int {
    ffi::guard("fi_domain", || {
        // SAFETY: a fabric pointer from the application, checked to be one of ours.
        let Some(fab) = (unsafe { crate::fabric::ours(fabric.cast()) }) else {
            return errno::INVAL;
        };
        if info.is_null() || domain.is_null() {
            return errno::INVAL;
        }
        // SAFETY: `info` checked not null; libfabric and applications pass fi_info lists with
        // valid (or null) attribute pointers.
        let (name, addr_format) = unsafe {
            (
                (*info)
                    .domain_attr
                    .as_ref()
                    .and_then(|d| ffi::str_at(d.name)),
                (*info).addr_format,
            )
        };
        let addr_format = match addr_format {
            sys::FI_FORMAT_UNSPEC => ringfab::av::AddrFormat::Ringfab,
            sys::FI_SOCKADDR_IN => ringfab::av::AddrFormat::SockaddrIn,
            other => {
                crate::log::warn(&format!("fi_domain: address format {other} not offered"));
                return errno::INVAL;
            }
        };
        let specs = crate::params::nics();
        let found = specs
            .iter()
            .enumerate()
            .find(|(_, s)| name.is_none_or(|n| n == s.to_string()));
        let Some((index, spec)) = found else {
            crate::log::warn(&format!("fi_domain: no NIC '{}'", name.unwrap_or("")));
            return errno::NODATA;
        };
        let opened = match crate::table::open(spec, index) {
            Ok(o) => o,
            Err(e) => {
                crate::log::warn(&format!("fi_domain: {e}"));
                return errno::NODATA;
            }
        };
        // A NIC with an IPv4 configuration gets it, and the clock its ARP needs, in every
        // domain (a domain without one never reads a clock); FI_SOCKADDR_IN needs one.
        let ipv4 = crate::params::ipv4_of(spec);
        if ipv4.is_none() && addr_format == ringfab::av::AddrFormat::SockaddrIn {
            crate::log::warn(&format!(
                "fi_domain: FI_SOCKADDR_IN on {spec}, which FI_RINGFAB_IPV4 gives no address"
            ));
            return errno::NODATA;
        }
        let hub = crate::params::hub();
        let nic = match opened.start_domain(&hub) {
            Ok(nic) => nic,
            Err(e) => {
                crate::log::warn(&format!("fi_domain: joining the wire's hub: {e}"));
                return ffi::neg(sys::FI_EIO);
            }
        };
        let api = fab.api_version();
        let cntrs = crate::cntr::Pool::new();
        // SAFETY: the pool is the domain object's, declared after `core`: dropped after it.
        let counters = unsafe { cntrs.refs() };
        let mut core =
            Domain::with_capacities(nic, &crate::nic::CAPACITIES).with_counters(counters);
        if let Some(config) = ipv4 {
            core = core.with_clock(&crate::clock::CLOCK);
            if let Err(e) = core.set_ipv4(config) {
                crate::log::warn(&format!("fi_domain: {spec}: set_ipv4: {e}"));
                drop(core);
                opened.end_domain();
                return ffi::fail(e);
            }
        }
        let obj = Box::new(DomainObj {
            fid: sys::fid_domain {
                fid: fid::new(sys::FI_CLASS_DOMAIN, context, &FI_OPS),
                ops: DOMAIN_OPS.ptr(),
                mr: MR_OPS.ptr(),
            },
            nic: opened,
            core: Box::new(core),
            abi: ErrEntryAbi::for_api(api >> 16, api & 0xffff),
            api_version: api,
            addr_format,
            children: AtomicUsize::new(0),
            cntrs,
        });
        // SAFETY: checked not null; the domain is the caller's until fi_close.
        unsafe { *domain = Box::into_raw(obj).cast() };
        0
    })
}

/// `fi_ops::close` of a domain: `-FI_EBUSY` while objects opened on it are open.
unsafe extern "C" fn close(fid: *mut sys::fid) -> c_int {
    ffi::guard("fi_close(domain)", || {
        // SAFETY: libfabric passes the fid it was given, or null.
        let Some(d) = (unsafe { ours(fid) }) else {
            return errno::INVAL;
        };
        if d.children.load(Ordering::Acquire) > 0 {
            return errno::BUSY;
        }
        // What the NIC and core's IPv4 host counted, for a user chasing a lost frame
        // (`FI_LOG_LEVEL=info`).
        {
            use ringfab::hal::Nic as _;
            let core = d.core();
            crate::log::info(&format!(
                "fi_close(domain): the NIC counted {:?}; IPv4 drops {:?}",
                core.nic().stats(),
                core.ip_drops()
            ));
        }
        let nic = d.nic;
        // SAFETY: made by Box::into_raw in `open`, closed once; nothing holds it (no child).
        unsafe { fid::free(d) };
        nic.end_domain();
        0
    })
}
