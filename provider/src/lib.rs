//! ringfab as a libfabric provider: `libringfab-fi.so`, which libfabric loads from the
//! directories of `FI_PROVIDER_PATH` and asks for its `struct fi_provider` through
//! [`fi_prov_ini`] (`rdma/providers/fi_prov.h`, `FI_EXT_INI`). Everything later goes through
//! the provider's `getinfo` and `fabric` and the `fi_ops_*` tables of the fids it hands out.
//!
//! The provider is named `ringfab`. Which NICs it offers, one domain each, the parameter
//! `FI_RINGFAB_NICS` says ([`params`]); by default the three emulated NICs of `ringfab-emu`,
//! so that `fi_info -p ringfab` works on any machine. `docs/libfabric.md` says how to build,
//! load and use it, and what it offers so far.
//!
//! Every entry point catches panics (`ffi`), checks its pointers and the class of the fids
//! it is given, and returns libfabric's negated error numbers; nothing unwinds into C.
//!
//! Modules, one job each: [`sys`] (the C types, generated from the installed headers),
//! `ffi` (the boundary), `fid` (what every object shares), `log`, [`params`], [`ipv4`] (the `FI_SOCKADDR_IN` configuration and addresses), [`nic`]
//! (describing and measuring a NIC), [`platform`] (emulated or VFIO), [`table`] (the
//! process's open NICs), [`getinfo`];
//! the objects — `fabric`, `eq` (event queues), `domain`, `mr` (registrations), `av`
//! (address vectors), `cq` (completion queues), `cntr` (counters), `waitset` (wait sets), `ep` (endpoints and their control calls),
//! `msg` (their message calls), `multi` (multi-receive buffers), `ops` (operations in flight), `sep` (scalable endpoints), `stx`, `srx` (shared transmit and receive contexts) —; `nosys` (the `-FI_ENOSYS`
//! entries of the ops tables).

use core::cell::UnsafeCell;

mod alias;
mod av;
mod clock;
mod cntr;
mod cq;
mod domain;
mod ep;
mod eq;
mod fabric;
mod ffi;
mod fid;
pub mod getinfo;
pub mod ipv4;
mod log;
mod mr;
mod msg;
mod multi;
pub mod nic;
mod nosys;
mod ops;
pub mod params;
pub mod platform;
mod prefix;
mod rxpool;
mod sep;
mod srx;
mod stx;
pub mod sys;
pub mod table;
mod waitset;

/// The provider's own version (`fi_provider::version`): the crate's major and minor.
const VERSION: u32 = getinfo::fi_version(0, 1);

/// The provider structure libfabric keeps a pointer to. libfabric writes to its `context`
/// (its own bookkeeping) while it registers the provider, so it is not a plain `static`.
struct Provider(UnsafeCell<sys::fi_provider>);

// SAFETY: the fields the provider sets are written once, at compile time; libfabric writes
// `context` only while it registers providers, under its own initialisation lock, and never
// while another thread reads it through this crate (which reads only `name`).
unsafe impl Sync for Provider {}

static PROVIDER: Provider = Provider(UnsafeCell::new(sys::fi_provider {
    version: VERSION,
    // The API the provider is written to: Debian 12's libfabric 1.17.
    fi_version: getinfo::fi_version(sys::FI_MAJOR_VERSION, sys::FI_MINOR_VERSION),
    context: sys::fi_context {
        internal: [core::ptr::null_mut(); 4],
    },
    name: c"ringfab".as_ptr(),
    getinfo: Some(getinfo::getinfo),
    fabric: Some(fabric::open),
    cleanup: Some(cleanup),
}));

/// The provider structure, as libfabric's calls (`fi_param_define`, `fi_log`) take it.
pub(crate) fn provider() -> *mut sys::fi_provider {
    PROVIDER.0.get()
}

/// `fi_provider::cleanup`: libfabric is unloading the provider. Every object is freed by its
/// own `fi_close`; what is left is the emulated NICs' membership of the wire's hub (their
/// socket files).
unsafe extern "C" fn cleanup() {
    ffi::guard_void("cleanup", table::leave_hubs);
}

/// The entry point libfabric looks up in every `*fi.so` of `FI_PROVIDER_PATH`
/// (`FI_EXT_INI`): declares the provider's parameters and returns the provider.
#[no_mangle]
pub extern "C" fn fi_prov_ini() -> *mut sys::fi_provider {
    let _ = ffi::guard("fi_prov_ini", || {
        params::define();
        0
    });
    provider()
}
