//! Shared receive contexts (`fi_srx_context`, fi_endpoint(3) "SHARED CONTEXTS") over core's
//! [`SharedRxContext`]: one NIC receive queue whose receives, posted on the context, serve
//! every endpoint bound to it; each completes on the CQ of the endpoint its frame was for.
//!
//! The context is a `fid_ep` of class `FI_CLASS_SRX_CTX` with the receive calls (`fi_recv`,
//! `fi_recvv`, `fi_recvmsg`), `fi_cancel` and `fi_rx_size_left`. Like an endpoint it has its
//! own receive buffers ([`Shared`], docs/libfabric.md "Buffers"): a receive posts one and
//! keeps a record of the application's buffer ([`crate::ops`]), and the CQ that reads the
//! completion copies the payload there and gives the buffer back to the context.
//!
//! The context takes receive queue 0 (the NIC's station address) if it is free, else the
//! highest free queue the NIC can steer an address of its own to; its endpoints are reached
//! at that address with their own context numbers. A receive cancelled on it has no CQ to
//! report to (core hands its buffer back at once): `fi_cancel` returns 0 and nothing is
//! reported. Multi-receive buffers are not taken (`-FI_EBADFLAGS`).

use core::ffi::{c_int, c_void};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use ringfab::flags::OpFlags;
use ringfab::proto::Encap;
use ringfab::srx::{SharedRxContext, SrxAttr};

use crate::domain::DomainObj;
use crate::ep::Shared;
use crate::ffi::{self, errno, Ret};
use crate::fid::{self, Ops};
use crate::msg::{bufs_of, check, AppBuf};
use crate::nosys::{self, nosys_table, NoSys};
use crate::ops::{self, Record};
use crate::sys;

/// A shared receive context as the provider allocates it.
#[repr(C)]
pub(crate) struct SrxObj {
    fid: sys::fid_ep,
    pub(crate) domain: &'static DomainObj,
    /// Tells its records from others' ([`crate::ops`]).
    serial: u64,
    /// Core's context (taken when it closes).
    core: Mutex<Option<SharedRxContext>>,
    /// Its receive buffers.
    shared: Arc<Shared>,
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

static EP_OPS: Ops<sys::fi_ops_ep> = Ops(sys::fi_ops_ep {
    size: core::mem::size_of::<sys::fi_ops_ep>(),
    cancel: Some(cancel),
    getopt: Some(NoSys::NOSYS),
    setopt: Some(NoSys::NOSYS),
    tx_ctx: Some(NoSys::NOSYS),
    rx_ctx: Some(NoSys::NOSYS),
    rx_size_left: Some(rx_size_left),
    tx_size_left: Some(NoSys::NOSYS),
});

static CM_OPS: Ops<sys::fi_ops_cm> = Ops(nosys_table!(fi_ops_cm {
    setname,
    getname,
    getpeer,
    connect,
    listen,
    accept,
    reject,
    shutdown,
    join
}));

static MSG_OPS: Ops<sys::fi_ops_msg> = Ops(sys::fi_ops_msg {
    size: core::mem::size_of::<sys::fi_ops_msg>(),
    recv: Some(recv),
    recvv: Some(recvv),
    recvmsg: Some(recvmsg),
    ..nosys_table!(fi_ops_msg {
        recv,
        recvv,
        recvmsg,
        send,
        sendv,
        sendmsg,
        inject,
        senddata,
        injectdata
    })
});

/// The shared receive context `fid` is, if it is one of this provider's.
///
/// # Safety
/// `fid` is null or points to a `struct fid`.
pub(crate) unsafe fn ours<'a>(fid: *const sys::fid) -> Option<&'a SrxObj> {
    // SAFETY: null or a valid fid; contexts of this class and table are `SrxObj`s, alive
    // until fi_close.
    unsafe { fid::ours(fid, sys::FI_CLASS_SRX_CTX, &FI_OPS) }
}

/// `fi_ops_domain::srx_ctx` (`fi_srx_context`): `attr->size` receives (0: a ring's worth),
/// `attr->op_flags` the defaults its endpoints' must be a subset of.
pub(crate) unsafe extern "C" fn open(
    domain: *mut sys::fid_domain,
    attr: *mut sys::fi_rx_attr,
    rx_ep: *mut *mut sys::fid_ep,
    context: *mut c_void,
) -> c_int {
    ffi::guard("fi_srx_context", || {
        // SAFETY: the application's domain fid, checked to be one of ours.
        let Some(d) = (unsafe { crate::domain::ours(domain.cast()) }) else {
            return errno::INVAL;
        };
        if rx_ep.is_null() {
            return errno::INVAL;
        }
        // SAFETY: null or the application's attributes.
        let (size, op_flags) = unsafe { attr.as_ref() }.map_or((0, 0), |a| (a.size, a.op_flags));
        let dom = d.core();
        let queues = ringfab::hal::Nic::capabilities(dom.nic()).rx_queues;
        let mut last = ringfab::Error::NoMem;
        // Queue 0 first, then from the top (module documentation).
        let order = core::iter::once(0).chain((1..queues).rev());
        let base = SrxAttr {
            op_flags: OpFlags::from_bits_retain(op_flags),
            ..SrxAttr::default()
        };
        let core = order.into_iter().find_map(|q| {
            let a = SrxAttr {
                rx_queue: q,
                ..base
            };
            dom.srx_context(&a).map_err(|e| last = e).ok()
        });
        let Some(core) = core else {
            return ffi::fail(last);
        };
        let ring = crate::nic::RING_DEPTH - 1;
        let n_rx = if size == 0 { ring } else { size.min(ring) };
        let len = base.rx_buf_len as usize;
        let shared =
            match Shared::carve(d, Encap::Ethernet.header_len(), (n_rx, 0), len, None, None) {
                Ok(s) => Arc::new(s),
                Err(e) => {
                    let _ = core.close(dom);
                    return ffi::fail(e);
                }
            };
        let obj = Box::new(SrxObj {
            fid: sys::fid_ep {
                fid: fid::new(sys::FI_CLASS_SRX_CTX, context, &FI_OPS),
                ops: EP_OPS.ptr(),
                cm: CM_OPS.ptr(),
                msg: MSG_OPS.ptr(),
                rma: crate::ep::RMA_OPS.ptr(),
                tagged: crate::ep::TAGGED_OPS.ptr(),
                atomic: crate::ep::ATOMIC_OPS.ptr(),
                collective: crate::ep::COLLECTIVE_OPS.ptr(),
            },
            domain: d.retain(),
            serial: crate::ep::next_serial(),
            core: Mutex::new(Some(core)),
            shared,
        });
        // SAFETY: checked not null; the context is the caller's until fi_close.
        unsafe { *rx_ep = Box::into_raw(obj).cast() };
        0
    })
}

impl SrxObj {
    /// Runs `f` on core's context (`-FI_EINVAL` once closed).
    pub(crate) fn with_core<R>(&self, f: impl FnOnce(&SharedRxContext) -> R) -> Result<R, c_int> {
        lock(&self.core).as_ref().map(f).ok_or(errno::INVAL)
    }

    /// Posts a receive into the application's buffer (one, at most).
    ///
    /// # Safety
    /// Each buffer is the application's memory, the provider's until the completion.
    unsafe fn post(&self, bufs: &[AppBuf], context: *mut c_void, flags: Option<OpFlags>) -> isize {
        if bufs.len() > 1 {
            return isize::neg(sys::FI_EINVAL);
        }
        if flags.is_some_and(|f| f.contains(OpFlags::MULTI_RECV)) {
            // Module documentation.
            return isize::neg(sys::FI_EBADFLAGS as i32);
        }
        // SAFETY: the caller's promise.
        if let Err(err) = unsafe { check(self.domain, bufs) } {
            return err;
        }
        let b = bufs.first().map_or((0, 0), |b| (b.addr, b.len));
        let dom = self.domain.core();
        let core = lock(&self.core);
        let Some(srx) = core.as_ref() else {
            return isize::neg(sys::FI_EOPBADSTATE as i32);
        };
        let Some(buf) = crate::ep::EpObj::take_buf(&self.shared, true) else {
            return isize::neg(sys::FI_EAGAIN);
        };
        let id = ops::insert(Record {
            ep: self.serial,
            context: context as usize,
            recv: Some(b),
            silent: false,
            shared: self.shared.clone(),
            multi: None,
            prefix: None,
            pooled: false,
        });
        let r = match flags {
            None => srx.recv(dom, buf, id),
            Some(f) => srx.recvmsg(dom, buf, id, f),
        };
        match r {
            Ok(()) => 0,
            Err((err, buf)) => {
                drop(ops::take(id));
                self.shared.give_back(buf, true);
                ffi::fail(err)
            }
        }
    }
}

/// The context of an `fid_ep` from the application, under [`ffi::guard`].
///
/// # Safety
/// `ep` null or a `struct fid_ep`.
unsafe fn on_srx(
    what: &'static str,
    ep: *mut sys::fid_ep,
    f: impl FnOnce(&SrxObj) -> isize,
) -> isize {
    ffi::guard(what, || {
        // SAFETY: the caller's promise.
        match unsafe { ours(ep.cast()) } {
            Some(s) => f(s),
            None => isize::neg(sys::FI_EINVAL),
        }
    })
}

/// `fi_recv` on a shared receive context.
unsafe extern "C" fn recv(
    ep: *mut sys::fid_ep,
    buf: *mut c_void,
    len: usize,
    desc: *mut c_void,
    _src_addr: u64,
    context: *mut c_void,
) -> isize {
    let b = AppBuf::new(buf as usize, len, desc);
    // SAFETY: the application's context and buffer, the provider's until the completion.
    unsafe { on_srx("fi_recv(srx)", ep, |s| s.post(&[b], context, None)) }
}

/// `fi_recvv` on a shared receive context.
unsafe extern "C" fn recvv(
    ep: *mut sys::fid_ep,
    iov: *const sys::iovec,
    desc: *mut *mut c_void,
    count: usize,
    _src_addr: u64,
    context: *mut c_void,
) -> isize {
    // SAFETY: the application's context and `count` iovecs and descriptors.
    unsafe {
        on_srx("fi_recvv(srx)", ep, |s| match bufs_of(iov, desc, count) {
            Ok(bufs) => s.post(&bufs, context, None),
            Err(err) => err,
        })
    }
}

/// `fi_recvmsg` on a shared receive context.
unsafe extern "C" fn recvmsg(ep: *mut sys::fid_ep, msg: *const sys::fi_msg, flags: u64) -> isize {
    // SAFETY: the application's context and message (fi_msg(3)).
    unsafe {
        on_srx("fi_recvmsg(srx)", ep, |s| {
            let Some(m) = msg.as_ref() else {
                return isize::neg(sys::FI_EINVAL);
            };
            match bufs_of(m.msg_iov, m.desc, m.iov_count) {
                Ok(bufs) => s.post(&bufs, m.context, Some(OpFlags::from_bits_retain(flags))),
                Err(err) => err,
            }
        })
    }
}

/// `fi_cancel` on a shared receive context: the receive's buffer comes back at once and
/// nothing is reported (module documentation); `-FI_ENOENT` if none waits with `context`.
unsafe extern "C" fn cancel(fid: *mut sys::fid, context: *mut c_void) -> isize {
    ffi::guard("fi_cancel(srx)", || {
        // SAFETY: libfabric passes the fid it was given, or null.
        let Some(s) = (unsafe { ours(fid) }) else {
            return isize::neg(sys::FI_EINVAL);
        };
        let Some(id) = ops::find(s.serial, context as usize) else {
            return isize::neg(sys::FI_ENOENT);
        };
        let r = s.with_core(|srx| srx.cancel(s.domain.core(), id));
        match r {
            Ok(Ok(Some(buf))) => {
                drop(ops::take(id));
                s.shared.give_back(buf, true);
                0
            }
            Ok(Ok(None)) => isize::neg(sys::FI_ENOENT),
            Ok(Err(e)) => ffi::fail(e),
            Err(e) => e as isize,
        }
    })
}

/// `fi_rx_size_left` on a shared receive context.
unsafe extern "C" fn rx_size_left(ep: *mut sys::fid_ep) -> isize {
    // SAFETY: the application's context.
    unsafe {
        on_srx("fi_rx_size_left(srx)", ep, |s| {
            match s.with_core(|srx| srx.rx_size_left(s.domain.core())) {
                Ok(Ok(n)) => n.min(s.shared.rx_free()) as isize,
                Ok(Err(e)) => ffi::fail(e),
                Err(e) => e as isize,
            }
        })
    }
}

/// `fi_ops::close` of a shared receive context: `-FI_EBUSY` while an endpoint is bound; the
/// receives still posted are discarded.
unsafe extern "C" fn close(fid: *mut sys::fid) -> c_int {
    ffi::guard("fi_close(srx)", || {
        // SAFETY: libfabric passes the fid it was given, or null.
        let Some(s) = (unsafe { ours(fid) }) else {
            return errno::INVAL;
        };
        let mut core = lock(&s.core);
        if let Some(c) = core.take() {
            if let Err((e, back)) = c.close(s.domain.core()) {
                *core = Some(back);
                return ffi::fail(e);
            }
        }
        drop(core);
        ops::purge(s.serial);
        let domain = s.domain;
        // SAFETY: made by Box::into_raw in `open`, closed once.
        unsafe { fid::free(s) };
        domain.release();
        0
    })
}
