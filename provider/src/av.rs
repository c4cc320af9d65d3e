//! Address vectors (`fi_av_open`, fi_av(3)) over core's [`AddressVector`]: addresses are
//! in the format of the `fi_info` the domain was opened with — ringfab's 8 bytes
//! (`FI_FORMAT_UNSPEC`: the NIC's MAC, then the receive context, big-endian) or a 16-byte
//! `struct sockaddr_in` (`FI_SOCKADDR_IN`, plain UDP) — and an `fi_addr_t` is the index of the
//! address in the table — for `FI_AV_TABLE` as fi_av(3) requires, and for `FI_AV_MAP`, whose
//! values are the provider's to choose.
//!
//! Inserting an address on an emulated NIC first waits (at most [`PEER_WAIT`]) until the
//! emulated wire's hub knows another process: frames sent before a member is known do not
//! reach it, and an application that inserts a peer's address is about to send to it.

use core::ffi::{c_char, c_int, c_void};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use ringfab::av::{AddrFormat, AddressVector, AvAttr, EpAddr, FiAddr};
use ringfab::ip::SockAddrIn;

use crate::domain::DomainObj;
use crate::ffi::{self, errno};
use crate::fid::{self, Ops};
use crate::nosys::{self, NoSys};
use crate::sys;

/// The longest an insert waits for the hub to know a peer.
const PEER_WAIT: Duration = Duration::from_secs(2);

/// An address vector as the provider allocates it.
#[repr(C)]
pub(crate) struct AvObj {
    fid: sys::fid_av,
    pub(crate) domain: &'static DomainObj,
    /// The format of its addresses (the domain's).
    format: AddrFormat,
    /// Core's AV; `None` once closed (a close core refused puts it back).
    core: Mutex<Option<AddressVector>>,
}

impl AvObj {
    /// Runs `f` on core's AV (`-FI_EINVAL` if it is closed).
    pub(crate) fn with<R>(&self, f: impl FnOnce(&AddressVector) -> R) -> Result<R, c_int> {
        let guard = self.core.lock().unwrap_or_else(PoisonError::into_inner);
        guard.as_ref().map(f).ok_or(errno::INVAL)
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

static AV_OPS: Ops<sys::fi_ops_av> = Ops(sys::fi_ops_av {
    size: core::mem::size_of::<sys::fi_ops_av>(),
    insert: Some(insert),
    insertsvc: Some(insertsvc),
    insertsym: Some(NoSys::NOSYS),
    remove: Some(remove),
    lookup: Some(lookup),
    straddr: Some(straddr),
    av_set: Some(NoSys::NOSYS),
});

/// The address vector `fid` is, if it is one of this provider's.
///
/// # Safety
/// `fid` is null or points to a `struct fid`.
pub(crate) unsafe fn ours<'a>(fid: *const sys::fid) -> Option<&'a AvObj> {
    // SAFETY: null or a valid fid; AVs of this class and table are `AvObj`s, alive until
    // fi_close.
    unsafe { fid::ours(fid, sys::FI_CLASS_AV, &FI_OPS) }
}

/// `fi_ops_domain::av_open` (`fi_av_open`).
pub(crate) unsafe extern "C" fn open(
    domain: *mut sys::fid_domain,
    attr: *mut sys::fi_av_attr,
    av: *mut *mut sys::fid_av,
    context: *mut c_void,
) -> c_int {
    ffi::guard("fi_av_open", || {
        // SAFETY: the application's domain fid, checked to be one of ours.
        let Some(d) = (unsafe { crate::domain::ours(domain.cast()) }) else {
            return errno::INVAL;
        };
        // SAFETY: null or the application's attributes.
        let Some(a) = (unsafe { attr.as_ref() }) else {
            return errno::INVAL;
        };
        if av.is_null() {
            return errno::INVAL;
        }
        if !matches!(
            a.type_,
            sys::FI_AV_UNSPEC | sys::FI_AV_TABLE | sys::FI_AV_MAP
        ) {
            return errno::INVAL;
        }
        if !a.name.is_null() || !a.map_addr.is_null() {
            // Shared (named) AVs.
            return errno::NOSYS;
        }
        if a.flags & !sys::FI_SYMMETRIC != 0 {
            // FI_EVENT needs an EQ bound to the AV; FI_READ a named one.
            return errno::BADFLAGS;
        }
        let Ok(rx_ctx_bits) = u32::try_from(a.rx_ctx_bits) else {
            return errno::INVAL;
        };
        let attr = AvAttr {
            count: a.count,
            rx_ctx_bits,
            format: d.addr_format,
        };
        let core = match d.core().open_av(&attr) {
            Ok(av) => av,
            Err(e) => return ffi::fail(e),
        };
        let obj = Box::new(AvObj {
            fid: sys::fid_av {
                fid: fid::new(sys::FI_CLASS_AV, context, &FI_OPS),
                ops: AV_OPS.ptr(),
            },
            domain: d.retain(),
            format: d.addr_format,
            core: Mutex::new(Some(core)),
        });
        // SAFETY: checked not null; the AV is the caller's until fi_close.
        unsafe { *av = Box::into_raw(obj).cast() };
        0
    })
}

/// `fi_ops::close` of an AV: `-FI_EBUSY` while an endpoint is bound to it.
unsafe extern "C" fn close(fid: *mut sys::fid) -> c_int {
    ffi::guard("fi_close(av)", || {
        // SAFETY: libfabric passes the fid it was given, or null.
        let Some(a) = (unsafe { ours(fid) }) else {
            return errno::INVAL;
        };
        let mut guard = a.core.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(handle) = guard.take() {
            if let Err((e, back)) = handle.close(a.domain.core()) {
                *guard = Some(back);
                return ffi::fail(e);
            }
        }
        drop(guard);
        let domain = a.domain;
        // SAFETY: made by Box::into_raw in `open`, closed once.
        unsafe { fid::free(a) };
        domain.release();
        0
    })
}

/// Addresses to insert, in one of the two formats.
enum Addrs {
    Native(Vec<EpAddr>),
    SockaddrIn(Vec<SockAddrIn>),
}

impl Addrs {
    fn len(&self) -> usize {
        match self {
            Addrs::Native(v) => v.len(),
            Addrs::SockaddrIn(v) => v.len(),
        }
    }
}

/// The length of one address of `format`.
fn addr_len(format: AddrFormat) -> usize {
    match format {
        AddrFormat::SockaddrIn => SockAddrIn::LEN,
        _ => EpAddr::LEN,
    }
}

/// Inserts `addrs` (with `fi_addr` null or `addrs.len()` long): the number inserted.
///
/// # Safety
/// `fi_addr` null or valid for `addrs.len()` writes.
unsafe fn insert_addrs(a: &AvObj, addrs: &Addrs, fi_addr: *mut u64) -> c_int {
    let mut out = vec![FiAddr::NOTAVAIL; addrs.len()];
    let dom = a.domain.core();
    let inserted = a.with(|av| match addrs {
        Addrs::Native(v) => av.insert(dom, v, &mut out),
        Addrs::SockaddrIn(v) => av.insert_sockaddr(dom, v, &mut out),
    });
    let n = match inserted {
        Ok(Ok(n)) => n,
        Ok(Err(e)) => return ffi::fail(e),
        Err(e) => return e,
    };
    if let Addrs::SockaddrIn(v) = addrs {
        for (s, h) in v.iter().zip(&out) {
            crate::log::info(&format!(
                "fi_av_insert: fi_sockaddr_in://{}:{} as fi_addr {}",
                s.addr, s.port, h.0
            ));
        }
    }
    if !fi_addr.is_null() {
        for (i, h) in out.iter().enumerate() {
            // SAFETY: the caller's promise: `addrs.len()` entries.
            unsafe { *fi_addr.add(i) = h.0 };
        }
    }
    if n > 0 && !a.domain.nic.wait_for_peer(PEER_WAIT) {
        crate::log::info("fi_av_insert: no other member on the emulated wire's hub yet");
    }
    c_int::try_from(n).unwrap_or(c_int::MAX)
}

/// `fi_av_insert`: `count` addresses of the AV's format, 8 bytes each (ringfab's) or 16
/// (`struct sockaddr_in`: one of another family makes the whole call `-FI_EINVAL`, and
/// nothing is inserted).
unsafe extern "C" fn insert(
    av: *mut sys::fid_av,
    addr: *const c_void,
    count: usize,
    fi_addr: *mut u64,
    flags: u64,
    _context: *mut c_void,
) -> c_int {
    ffi::guard("fi_av_insert", || {
        // SAFETY: the application's fid, checked to be one of ours.
        let Some(a) = (unsafe { ours(av.cast()) }) else {
            return errno::INVAL;
        };
        if flags & !sys::FI_MORE != 0 {
            return errno::BADFLAGS;
        }
        if count == 0 {
            return 0;
        }
        let len = addr_len(a.format);
        let Some(bytes_len) = count.checked_mul(len) else {
            return errno::INVAL;
        };
        if addr.is_null() {
            return errno::INVAL;
        }
        // SAFETY: fi_av(3): `count` addresses of the AV's format (`len` bytes each) at `addr`.
        let bytes = unsafe { core::slice::from_raw_parts(addr.cast::<u8>(), bytes_len) };
        let addrs = match a.format {
            AddrFormat::SockaddrIn => {
                let parsed: Result<Vec<SockAddrIn>, _> = bytes
                    .chunks_exact(len)
                    .map(SockAddrIn::from_bytes)
                    .collect();
                match parsed {
                    Ok(v) => Addrs::SockaddrIn(v),
                    Err(_) => {
                        crate::log::info("fi_av_insert: an address is not a sockaddr_in");
                        return errno::INVAL;
                    }
                }
            }
            // Every 8-byte chunk is a ringfab address (`EpAddr::from_bytes` refuses only a
            // wrong length): none is dropped, so the outputs stay aligned with the inputs.
            _ => {
                let parsed: Result<Vec<EpAddr>, _> =
                    bytes.chunks_exact(len).map(EpAddr::from_bytes).collect();
                match parsed {
                    Ok(v) => Addrs::Native(v),
                    Err(_) => return errno::INVAL,
                }
            }
        };
        // SAFETY: `fi_addr` holds `count` entries (fi_av(3)) or is null.
        unsafe { insert_addrs(a, &addrs, fi_addr) }
    })
}

/// `fi_av_insertsvc`: `node` a MAC address (`02:52:00:12:34:00`), `service` a receive
/// context (none: 0), as `fi_getinfo` takes them; in an AV of `sockaddr_in`, `node` a
/// numeric IPv4 address and `service` a UDP port (no name is resolved).
unsafe extern "C" fn insertsvc(
    av: *mut sys::fid_av,
    node: *const c_char,
    service: *const c_char,
    fi_addr: *mut u64,
    flags: u64,
    _context: *mut c_void,
) -> c_int {
    ffi::guard("fi_av_insertsvc", || {
        // SAFETY: the application's fid, checked to be one of ours.
        let Some(a) = (unsafe { ours(av.cast()) }) else {
            return errno::INVAL;
        };
        if flags & !sys::FI_MORE != 0 {
            return errno::BADFLAGS;
        }
        // SAFETY: null or the application's strings.
        let (node, service) = unsafe { (ffi::str_at(node), ffi::str_at(service)) };
        let Some(node) = node else {
            return errno::INVAL;
        };
        let addrs = match a.format {
            AddrFormat::SockaddrIn => {
                crate::ipv4::parse_node(node, service).map(|addr| Addrs::SockaddrIn(vec![addr]))
            }
            _ => crate::getinfo::parse_node(node, service).map(|addr| Addrs::Native(vec![addr])),
        };
        let Some(addrs) = addrs else {
            return errno::INVAL;
        };
        // SAFETY: one entry at `fi_addr`, or null.
        unsafe { insert_addrs(a, &addrs, fi_addr) }
    })
}

/// `fi_av_remove`.
unsafe extern "C" fn remove(
    av: *mut sys::fid_av,
    fi_addr: *mut u64,
    count: usize,
    flags: u64,
) -> c_int {
    ffi::guard("fi_av_remove", || {
        // SAFETY: the application's fid, checked to be one of ours.
        let Some(a) = (unsafe { ours(av.cast()) }) else {
            return errno::INVAL;
        };
        if flags != 0 {
            return errno::BADFLAGS;
        }
        if count == 0 {
            return 0;
        }
        if fi_addr.is_null() {
            return errno::INVAL;
        }
        // SAFETY: fi_av(3): `count` handles at `fi_addr`.
        let handles: Vec<FiAddr> = unsafe { core::slice::from_raw_parts(fi_addr, count) }
            .iter()
            .map(|&h| FiAddr(h))
            .collect();
        match a.with(|av| av.remove(a.domain.core(), &handles)) {
            Ok(Ok(())) => 0,
            Ok(Err(e)) => ffi::fail(e),
            Err(e) => e,
        }
    })
}

/// `fi_av_lookup`: the address behind `fi_addr`; `*addrlen` becomes its size (8, or 16 for a
/// `sockaddr_in`), and only as much as fits is copied (fi_av(3)).
unsafe extern "C" fn lookup(
    av: *mut sys::fid_av,
    fi_addr: u64,
    addr: *mut c_void,
    addrlen: *mut usize,
) -> c_int {
    ffi::guard("fi_av_lookup", || {
        // SAFETY: the application's fid, checked to be one of ours.
        let Some(a) = (unsafe { ours(av.cast()) }) else {
            return errno::INVAL;
        };
        if addrlen.is_null() {
            return errno::INVAL;
        }
        let dom = a.domain.core();
        let found = a.with(|av| match a.format {
            AddrFormat::SockaddrIn => av
                .lookup_sockaddr(dom, FiAddr(fi_addr))
                .map(|s| s.to_bytes().to_vec()),
            _ => av
                .lookup(dom, FiAddr(fi_addr))
                .map(|e| e.to_bytes().to_vec()),
        });
        let found = match found {
            Ok(Ok(found)) => found,
            Ok(Err(_)) => return ffi::neg(sys::FI_ENOENT),
            Err(e) => return e,
        };
        // SAFETY: checked not null; the caller's size of `addr`.
        let room = unsafe { *addrlen };
        if !addr.is_null() {
            let n = room.min(found.len());
            // SAFETY: `addr` holds `room` bytes (fi_av(3)); `n` <= `room`.
            unsafe { core::ptr::copy_nonoverlapping(found.as_ptr(), addr.cast::<u8>(), n) };
        }
        // SAFETY: checked not null.
        unsafe { *addrlen = found.len() };
        0
    })
}

/// `fi_av_straddr`: `ringfab://02:52:00:12:34:00/0` (MAC, receive context), or
/// `fi_sockaddr_in://192.0.2.1:49152` in an AV of `sockaddr_in`; `*len` becomes the size the
/// whole string needs, NUL included.
unsafe extern "C" fn straddr(
    av: *mut sys::fid_av,
    addr: *const c_void,
    buf: *mut c_char,
    len: *mut usize,
) -> *const c_char {
    let mut out: *const c_char = core::ptr::null();
    let _: c_int = ffi::guard("fi_av_straddr", || {
        // SAFETY: the application's fid, checked to be one of ours.
        let Some(av) = (unsafe { ours(av.cast()) }) else {
            return errno::INVAL;
        };
        if addr.is_null() || len.is_null() {
            return errno::INVAL;
        }
        // SAFETY: fi_av(3): "The specified address must be of the same format as those stored
        // by the AV": that many bytes.
        let bytes = unsafe { core::slice::from_raw_parts(addr.cast::<u8>(), addr_len(av.format)) };
        let text = match av.format {
            AddrFormat::SockaddrIn => match SockAddrIn::from_bytes(bytes) {
                Ok(a) => crate::ipv4::straddr(a),
                Err(_) => return errno::INVAL,
            },
            _ => match EpAddr::from_bytes(bytes) {
                Ok(a) => format!("ringfab://{}/{}", a.mac, a.ctx),
                Err(_) => return errno::INVAL,
            },
        };
        // SAFETY: checked not null: the caller's size of `buf`.
        let room = unsafe { *len };
        if !buf.is_null() && room > 0 {
            let n = text.len().min(room - 1);
            // SAFETY: `buf` holds `room` bytes; `n + 1` <= `room`.
            unsafe {
                core::ptr::copy_nonoverlapping(text.as_ptr(), buf.cast::<u8>(), n);
                *buf.add(n) = 0;
            }
            out = buf;
        }
        // SAFETY: checked not null.
        unsafe { *len = text.len() + 1 };
        0
    });
    out
}
