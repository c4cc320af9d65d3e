//! Scalable endpoints (`fi_scalable_ep`, fi_endpoint(3)) over core's [`ScalableEndpoint`]:
//! one address, transmit and receive contexts (`fi_tx_context`, `fi_rx_context`) that are
//! NIC queues of their own.
//!
//! A context is an endpoint object of the provider's ([`EpObj`], fid class
//! `FI_CLASS_TX_CTX`/`FI_CLASS_RX_CTX`) over core's [`Context`]: it binds its own CQ and
//! counters, is enabled on its own, and posts through the same message calls and bounce
//! buffers as an endpoint. The scalable endpoint binds the AV all its contexts use (before the
//! first context: core's contexts take it when they open), and `fi_close` of it is
//! `-FI_EBUSY` while a context is open. Receive context *k* listens on its own address (core's
//! `proto::context_mac`); a sender names it with `fi_rx_addr` on an AV opened with
//! `rx_ctx_bits`. More than one receive context needs a NIC that steers frames by address
//! (the 82576's VMDq): `fi_getinfo`'s `max_ep_rx_ctx` says how many.

use core::cell::UnsafeCell;
use core::ffi::{c_int, c_void};
use std::sync::{Mutex, MutexGuard, PoisonError};

use ringfab::entry::OpContext;
use ringfab::flags::OpFlags;
use ringfab::sep::{Context, CtxAttr, ScalableEndpoint, SepAttr};

use crate::domain::DomainObj;
use crate::ep::EpObj;
use crate::ffi::{self, errno};
use crate::fid::{self, Ops};
use crate::nosys::{self, nosys_table, NoSys};
use crate::sys;

/// A scalable endpoint as the provider allocates it.
#[repr(C)]
pub(crate) struct SepObj {
    fid: sys::fid_ep,
    pub(crate) domain: &'static DomainObj,
    /// Core's scalable endpoint; `None` once closed. Changed (`&mut`: the AV's binding, the
    /// close) only under `state`'s lock while no context is open; contexts borrow it shared
    /// for their whole life (see [`SepObj::core`]).
    core: UnsafeCell<Option<ScalableEndpoint>>,
    state: Mutex<SepState>,
}

#[derive(Default)]
struct SepState {
    /// Contexts open.
    contexts: usize,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Plain values: consistent whatever panicked while they were held.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

static FI_OPS: Ops<sys::fi_ops> = Ops(sys::fi_ops {
    size: core::mem::size_of::<sys::fi_ops>(),
    close: Some(close),
    bind: Some(bind),
    control: Some(control),
    ops_open: Some(nosys::ops_open),
    tostr: Some(nosys::tostr),
    ops_set: Some(nosys::ops_set),
});

static EP_OPS: Ops<sys::fi_ops_ep> = Ops(sys::fi_ops_ep {
    size: core::mem::size_of::<sys::fi_ops_ep>(),
    cancel: Some(NoSys::NOSYS),
    getopt: Some(NoSys::NOSYS),
    setopt: Some(NoSys::NOSYS),
    tx_ctx: Some(tx_ctx),
    rx_ctx: Some(rx_ctx),
    rx_size_left: Some(NoSys::NOSYS),
    tx_size_left: Some(NoSys::NOSYS),
});

static CM_OPS: Ops<sys::fi_ops_cm> = Ops(sys::fi_ops_cm {
    size: core::mem::size_of::<sys::fi_ops_cm>(),
    getname: Some(getname),
    ..nosys_table!(fi_ops_cm {
        setname,
        getname,
        getpeer,
        connect,
        listen,
        accept,
        reject,
        shutdown,
        join
    })
});

// Data moves through the contexts: a scalable endpoint's own message calls are -FI_ENOSYS.
static MSG_OPS: Ops<sys::fi_ops_msg> = Ops(nosys_table!(fi_ops_msg {
    recv,
    recvv,
    recvmsg,
    send,
    sendv,
    sendmsg,
    inject,
    senddata,
    injectdata
}));

/// The scalable endpoint `fid` is, if it is one of this provider's.
///
/// # Safety
/// `fid` is null or points to a `struct fid`.
pub(crate) unsafe fn ours<'a>(fid: *const sys::fid) -> Option<&'a SepObj> {
    // SAFETY: null or a valid fid; scalable endpoints of this class and table are `SepObj`s,
    // alive until fi_close.
    unsafe { fid::ours(fid, sys::FI_CLASS_SEP, &FI_OPS) }
}

/// `fi_ops_domain::scalable_ep` (`fi_scalable_ep`): `info->ep_attr`'s `tx_ctx_cnt` and
/// `rx_ctx_cnt` contexts (0: one).
pub(crate) unsafe extern "C" fn open(
    domain: *mut sys::fid_domain,
    info: *mut sys::fi_info,
    sep: *mut *mut sys::fid_ep,
    context: *mut c_void,
) -> c_int {
    ffi::guard("fi_scalable_ep", || {
        // SAFETY: the application's domain fid, checked to be one of ours.
        let Some(d) = (unsafe { crate::domain::ours(domain.cast()) }) else {
            return errno::INVAL;
        };
        // SAFETY: null or the application's fi_info, its attributes null or valid.
        let Some(info) = (unsafe { info.as_ref() }) else {
            return errno::INVAL;
        };
        if sep.is_null() {
            return errno::INVAL;
        }
        if info.addr_format == sys::FI_SOCKADDR_IN {
            // fi_getinfo offers FI_SOCKADDR_IN with one context (max_ep_rx_ctx 1): plain UDP's
            // scalable endpoints (core's SepAttr::port, RSS) are not offered through libfabric.
            return errno::NOSYS;
        }
        // SAFETY: as above.
        if unsafe { crate::prefix::modes(info) }.any() {
            // Contexts post through the copying path only (crate::prefix): an application in
            // prefix mode would have its prefix sent as payload.
            return errno::INVAL;
        }
        let mut attr = SepAttr::default();
        // SAFETY: as above.
        if let Some(e) = unsafe { info.ep_attr.as_ref() } {
            if !matches!(e.type_, sys::FI_EP_UNSPEC | sys::FI_EP_DGRAM) {
                return errno::INVAL;
            }
            // FI_SHARED_CONTEXT (SIZE_MAX) and other counts over u16 are not scalable
            // endpoints' counts.
            let (Ok(tx), Ok(rx)) = (u16::try_from(e.tx_ctx_cnt), u16::try_from(e.rx_ctx_cnt))
            else {
                return errno::INVAL;
            };
            attr.tx_ctx_cnt = tx;
            attr.rx_ctx_cnt = rx;
        }
        let caps = info.caps
            // SAFETY: as above.
            | unsafe { info.rx_attr.as_ref() }.map_or(0, |r| r.caps);
        attr.source_err = caps & sys::FI_SOURCE_ERR != 0;
        let core = match d.core().scalable_endpoint(&attr) {
            Ok(s) => s,
            Err(e) => return ffi::fail(e),
        };
        let obj = Box::new(SepObj {
            fid: sys::fid_ep {
                fid: fid::new(sys::FI_CLASS_SEP, context, &FI_OPS),
                ops: EP_OPS.ptr(),
                cm: CM_OPS.ptr(),
                msg: MSG_OPS.ptr(),
                rma: crate::ep::RMA_OPS.ptr(),
                tagged: crate::ep::TAGGED_OPS.ptr(),
                atomic: crate::ep::ATOMIC_OPS.ptr(),
                collective: crate::ep::COLLECTIVE_OPS.ptr(),
            },
            domain: d.retain(),
            core: UnsafeCell::new(Some(core)),
            state: Mutex::new(SepState::default()),
        });
        // SAFETY: checked not null; the scalable endpoint is the caller's until fi_close.
        unsafe { *sep = Box::into_raw(obj).cast() };
        0
    })
}

impl SepObj {
    /// Core's scalable endpoint, shared. Taken under the state's lock; `&mut` to it is made
    /// only under the same lock while no context is open (`bind`, `close`), and contexts are
    /// counted under it, so no `&mut` exists while a shared borrow is used.
    fn core<'a>(&'a self, _locked: &MutexGuard<'_, SepState>) -> Option<&'a ScalableEndpoint> {
        // SAFETY: see above: the caller holds the lock, under which no `&mut` is live.
        unsafe { (*self.core.get()).as_ref() }
    }

    /// Runs `f` on core's scalable endpoint exclusively: only under the lock with no context
    /// open (`None` otherwise).
    fn with_core_mut<R>(
        &self,
        locked: &MutexGuard<'_, SepState>,
        f: impl FnOnce(&mut Option<ScalableEndpoint>) -> R,
    ) -> Option<R> {
        if locked.contexts > 0 {
            return None;
        }
        // SAFETY: under the lock with no context open: no shared borrow of it is live (the
        // calls that take one hold the lock for their whole use), and this one ends with `f`.
        Some(f(unsafe { &mut *self.core.get() }))
    }

    /// A context of this scalable endpoint closed.
    pub(crate) fn context_closed(&self) {
        let mut st = lock(&self.state);
        st.contexts = st.contexts.saturating_sub(1);
    }
}

/// `fi_ops::close` of a scalable endpoint: `-FI_EBUSY` while a context is open.
unsafe extern "C" fn close(fid: *mut sys::fid) -> c_int {
    ffi::guard("fi_close(sep)", || {
        // SAFETY: libfabric passes the fid it was given, or null.
        let Some(s) = (unsafe { ours(fid) }) else {
            return errno::INVAL;
        };
        let st = lock(&s.state);
        let closed = s.with_core_mut(&st, |slot| match slot.take() {
            Some(core) => core.close(s.domain.core()).map_err(|(e, back)| {
                *slot = Some(back);
                e
            }),
            None => Ok(()),
        });
        match closed {
            None => return errno::BUSY,
            Some(Err(e)) => return ffi::fail(e),
            Some(Ok(())) => {}
        }
        drop(st);
        let domain = s.domain;
        // SAFETY: made by Box::into_raw in `open`, closed once.
        unsafe { fid::free(s) };
        domain.release();
        0
    })
}

/// `fi_ops::bind` of a scalable endpoint (`fi_scalable_ep_bind`): the AV its contexts use,
/// before the first context; an event queue (which reports nothing on DGRAM).
unsafe extern "C" fn bind(fid: *mut sys::fid, bfid: *mut sys::fid, flags: u64) -> c_int {
    ffi::guard("fi_scalable_ep_bind", || {
        // SAFETY: libfabric passes the fid it was given, or null.
        let Some(s) = (unsafe { ours(fid) }) else {
            return errno::INVAL;
        };
        // SAFETY: the application's fid to bind: each check reads its class and table only.
        let (av, eq) = unsafe { (crate::av::ours(bfid), crate::eq::ours(bfid)) };
        if eq.is_some() {
            return 0;
        }
        let Some(av) = av else {
            // CQs and counters bind to the contexts.
            return errno::INVAL;
        };
        if !core::ptr::eq(av.domain, s.domain) {
            return errno::INVAL;
        }
        if flags != 0 {
            return errno::BADFLAGS;
        }
        let st = lock(&s.state);
        let dom = s.domain.core();
        let r = s.with_core_mut(&st, |slot| {
            slot.as_mut().map(|core| av.with(|a| core.bind_av(dom, a)))
        });
        let Some(Some(r)) = r else {
            // Contexts took the AV when they opened: too late to change it.
            return ffi::neg(sys::FI_EOPBADSTATE as i32);
        };
        match r {
            Ok(Ok(())) => 0,
            Ok(Err(e)) => ffi::fail(e),
            Err(e) => e,
        }
    })
}

/// `fi_ops::control` of a scalable endpoint: `FI_ENABLE` (nothing to do: each context is
/// enabled on its own).
unsafe extern "C" fn control(fid: *mut sys::fid, command: c_int, _arg: *mut c_void) -> c_int {
    ffi::guard("fi_control(sep)", || {
        // SAFETY: libfabric passes the fid it was given, or null.
        if unsafe { ours(fid) }.is_none() {
            return errno::INVAL;
        }
        match command as u32 {
            sys::FI_ENABLE => 0,
            _ => errno::NOSYS,
        }
    })
}

/// `fi_getname` of a scalable endpoint: its address (the NIC's, context 0).
unsafe extern "C" fn getname(fid: *mut sys::fid, addr: *mut c_void, addrlen: *mut usize) -> c_int {
    ffi::guard("fi_getname(sep)", || {
        // SAFETY: libfabric passes the fid it was given, or null.
        let Some(s) = (unsafe { ours(fid) }) else {
            return errno::INVAL;
        };
        let st = lock(&s.state);
        let Some(name) = s.core(&st).map(|c| c.name(s.domain.core()).to_bytes()) else {
            return errno::INVAL;
        };
        drop(st);
        // SAFETY: the application's buffer and its length (fi_cm(3)).
        unsafe { crate::ep::write_name(&name, addr, addrlen) }
    })
}

/// `fi_tx_context`.
unsafe extern "C" fn tx_ctx(
    sep: *mut sys::fid_ep,
    index: c_int,
    attr: *mut sys::fi_tx_attr,
    tx_ep: *mut *mut sys::fid_ep,
    context: *mut c_void,
) -> c_int {
    ffi::guard("fi_tx_context", || {
        // SAFETY: null or the application's attributes.
        let flags = unsafe { attr.as_ref() }.map_or(0, |a| a.op_flags);
        // SAFETY: the application's scalable endpoint and where to put the context.
        unsafe { open_context(sep, index, flags, tx_ep, context, true) }
    })
}

/// `fi_rx_context`.
unsafe extern "C" fn rx_ctx(
    sep: *mut sys::fid_ep,
    index: c_int,
    attr: *mut sys::fi_rx_attr,
    rx_ep: *mut *mut sys::fid_ep,
    context: *mut c_void,
) -> c_int {
    ffi::guard("fi_rx_context", || {
        // SAFETY: null or the application's attributes.
        let flags = unsafe { attr.as_ref() }.map_or(0, |a| a.op_flags);
        // SAFETY: the application's scalable endpoint and where to put the context.
        unsafe { open_context(sep, index, flags, rx_ep, context, false) }
    })
}

/// Opens context `index` of the scalable endpoint `sep`, transmit (`tx`) or receive.
///
/// # Safety
/// `sep` null or a `struct fid_ep`; `out` null or valid for writing.
unsafe fn open_context(
    sep: *mut sys::fid_ep,
    index: c_int,
    op_flags: u64,
    out: *mut *mut sys::fid_ep,
    context: *mut c_void,
    tx: bool,
) -> c_int {
    // SAFETY: the caller's promise.
    let Some(s) = (unsafe { ours(sep.cast()) }) else {
        return errno::INVAL;
    };
    let Ok(index) = u16::try_from(index) else {
        return errno::INVAL;
    };
    if out.is_null() {
        return errno::INVAL;
    }
    let attr = CtxAttr {
        op_flags: OpFlags::from_bits_retain(op_flags),
        context: OpContext(context as usize),
    };
    let mut st = lock(&s.state);
    let dom = s.domain.core();
    let Some(core) = s.core(&st) else {
        return errno::INVAL;
    };
    let r = if tx {
        core.tx_context(dom, index, &attr)
    } else {
        core.rx_context(dom, index, &attr)
    };
    let ctx = match r {
        // SAFETY: the context borrows core's scalable endpoint, which stays where it is (the
        // object is boxed) and is neither changed nor closed while a context is open
        // (`contexts`, counted below, keeps `bind` and `close` away) — the context's close
        // uncounts it only after core's context is gone.
        Ok(c) => unsafe { core::mem::transmute::<Context<'_>, Context<'static>>(c) },
        Err(e) => return ffi::fail(e),
    };
    st.contexts += 1;
    drop(st);
    // SAFETY: the scalable endpoint is freed only by its close, which refuses while this
    // context is open.
    let sep: &'static SepObj = unsafe { &*(s as *const SepObj) };
    let class = if tx {
        sys::FI_CLASS_TX_CTX
    } else {
        sys::FI_CLASS_RX_CTX
    };
    let ep = EpObj::new_context(sep.domain, sep, ctx, class, context);
    // SAFETY: checked not null; the context is the caller's until fi_close.
    unsafe { *out = ep };
    0
}
