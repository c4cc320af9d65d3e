//! Endpoints (`fi_endpoint`, fi_endpoint(3)): DGRAM endpoints over core's [`Endpoint`], with
//! the control calls (`fi_ep_bind`, `fi_enable`, `fi_control`, `fi_getopt`/`fi_setopt`,
//! `fi_cancel`, `fi_getname`) and the message calls (`fi_send`, `fi_sendv`, `fi_sendmsg`,
//! `fi_senddata`, `fi_inject`, `fi_injectdata`, `fi_recv`, `fi_recvv`, `fi_recvmsg`). RMA,
//! tagged, atomic and collective calls return `-FI_ENOSYS`. Aliases (`fi_ep_alias`) are
//! [`crate::alias`]'s; an endpoint counts them, and its close waits for them.
//!
//! # Buffers
//!
//! Core's buffers are owned ([`Buf`]): posted by value, handed back with the completion.
//! A C application's buffers are its own, at addresses of its choosing, and ringfab's frame
//! header lands in front of the payload — inside the buffer the NIC is given. An application
//! that has not asked for `FI_MSG_PREFIX` (fi_pingpong does not) gives no room in front of
//! its payload, so the NIC cannot be handed its buffer. Each endpoint therefore owns a
//! registration of its own, carved when it is enabled into one buffer per receive and per
//! transmit slot ([`Shared`]); a receive posts one of them and remembers the application's
//! buffer ([`crate::ops`]), whose payload the CQ copies there when the completion is read; a
//! send copies the application's payload behind the header in one of them. The buffers go
//! back to the endpoint with their completions. Injects are core's own (core copies into its
//! bounce buffers). A plain-UDP endpoint's receive buffers are all on the ring, whatever the
//! application posted, and matched to its receives in order ([`crate::rxpool`]).
//!
//! # Selective completion
//!
//! Core completes an operation without `FI_COMPLETION` under `FI_SELECTIVE_COMPLETION`
//! silently and drops its buffer back to the region it was carved from — whose memory is
//! carved once — not to the endpoint. So the provider keeps the flag to itself
//! ([`Selective`]): core's CQ is bound without it and reports everything, and the CQ drops the
//! success of an operation recorded as silent after giving its buffer back. Counters, which
//! count every completion, and errors, which are always reported (fi_cq(3)), are unchanged.

use core::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use ringfab::domain::Domain;
use ringfab::entry::OpContext;
use ringfab::ep::{Endpoint, EpAttr, EpOpt, EpType};
use ringfab::flags::{BindFlags, CntrBindFlags, OpFlags};
use ringfab::mr::{Buf, MemoryRegion};
use ringfab::sep::Context;
use ringfab::Error;

use crate::alias::AliasObj;
use crate::av::AvObj;
use crate::cntr::CntrObj;
use crate::cq::CqObj;
use crate::domain::DomainObj;
use crate::ffi::{self, errno, Ret};
use crate::fid::{self, Ops};
use crate::nosys::{self, nosys_table, NoSys};
use crate::ops::{self, Record};
use crate::rxpool::RxPool;
use crate::sep::SepObj;
use crate::sys;
use crate::table::ProvNic;

/// An endpoint as the provider allocates it.
#[repr(C)]
pub(crate) struct EpObj {
    fid: sys::fid_ep,
    domain: &'static DomainObj,
    /// Tells this endpoint's records from others' ([`crate::ops`]).
    serial: u64,
    /// For a context, its scalable endpoint (told when the context closes).
    sep: Option<&'static SepObj>,
    /// Aliases open on it ([`crate::alias`]): its close is `-FI_EBUSY` while there are any.
    aliases: AtomicUsize,
    /// Made from an `fi_info` whose transmit and receive modes have `FI_MSG_PREFIX`: the
    /// application's send and receive buffers start with `msg_prefix_size` bytes of room
    /// ([`crate::prefix::modes`]).
    msg_prefix: crate::prefix::Modes,
    state: Mutex<State>,
}

// SAFETY: the threading level is FI_THREAD_SAFE: libfabric calls an endpoint from any
// thread. What is not `Sync` in it are the fid's pointers, to the provider's static,
// read-only ops tables and to the application's context, which the provider never
// dereferences; everything that changes is behind the state's mutex.
unsafe impl Sync for EpObj {}
// SAFETY: as for `Sync`: nothing in it belongs to one thread.
unsafe impl Send for EpObj {}

/// What the endpoint's calls change.
struct State {
    /// Core's endpoint or context (taken when it closes).
    ep: Option<CoreEp>,
    /// What it is bound to, for the close (binding counts) and checks.
    cqs: Vec<&'static CqObj>,
    av: Option<&'static AvObj>,
    /// Counters bound (each drives this endpoint's progress until it closes).
    cntrs: Vec<&'static CntrObj>,
    /// The one of them bound with `FI_RECV`.
    rx_cntr: Option<&'static CntrObj>,
    /// The CQ bound with `FI_RECV`.
    rx_cq: Option<&'static CqObj>,
    /// `FI_SELECTIVE_COMPLETION` on the transmit and on the receive CQ binding: the provider's
    /// to honour (see the module documentation).
    selective: Selective,
    /// The endpoint's buffers, once enabled.
    shared: Option<Arc<Shared>>,
}

/// The endpoint's own buffers (see the module documentation), shared with the records of
/// its operations in flight.
pub(crate) struct Shared {
    /// Where the payload starts in a buffer (behind ringfab's header).
    pub(crate) payload_offset: usize,
    /// The counter of receives, if one is bound: a receive the provider truncates is a
    /// success to core, and the CQ counts it again as an error
    /// ([`crate::cntr::recount_truncated`]).
    pub(crate) rx_cntr: Option<&'static crate::cntr::CoreCntr>,
    /// A plain-UDP endpoint's receive matching ([`crate::rxpool`]): its receive buffers are
    /// all posted, whatever the application posted.
    pub(crate) pool: Option<RxPool>,
    rx: Mutex<Vec<Buf<'static>>>,
    tx: Mutex<Vec<Buf<'static>>>,
    /// The registration they were carved from. It stays registered until the domain goes
    /// (a handle dropped without `close` leaves it so): a buffer still posted when the
    /// endpoint closes goes back to it then, and its memory with the domain's tables.
    _region: MemoryRegion,
}

impl Shared {
    /// Registers a region of the domain's and carves it into `n.0` receive and `n.1`
    /// transmit buffers of `len` bytes each; `pool`: the receive buffers are a plain-UDP
    /// endpoint's pool.
    pub(crate) fn carve(
        domain: &DomainObj,
        payload_offset: usize,
        n: (usize, usize),
        len: usize,
        rx_cntr: Option<&'static crate::cntr::CoreCntr>,
        pool: Option<RxPool>,
    ) -> Result<Shared, Error> {
        let dom = domain.core();
        let region = dom.register(vec![0u8; (n.0 + n.1) * len.next_multiple_of(64) * 2])?;
        let carve = |n: usize| -> Result<Vec<Buf<'static>>, Error> {
            (0..n).map(|_| region.alloc(dom, len)).collect()
        };
        let (rx, tx) = (carve(n.0)?, carve(n.1)?);
        Ok(Shared {
            payload_offset,
            rx_cntr,
            pool,
            rx: Mutex::new(rx),
            tx: Mutex::new(tx),
            _region: region,
        })
    }

    /// Receive buffers not posted.
    pub(crate) fn rx_free(&self) -> usize {
        lock(&self.rx).len()
    }

    /// A buffer back from its completion.
    pub(crate) fn give_back(&self, b: Buf<'static>, recv: bool) {
        let pool = if recv { &self.rx } else { &self.tx };
        lock(pool).push(b);
    }

    fn take(&self, recv: bool) -> Option<Buf<'static>> {
        let pool = if recv { &self.rx } else { &self.tx };
        lock(pool).pop()
    }

    /// Posts every receive buffer not on the ring as a buffer of the receive pool
    /// ([`crate::rxpool`]); nothing without a pool. Stops at the first that core refuses (the
    /// ring full, the endpoint failed: the next call tries again).
    pub(crate) fn refill(
        self: &Arc<Shared>,
        ep: &Endpoint,
        dom: &'static Domain<'static, ProvNic>,
        serial: u64,
    ) {
        if self.pool.is_none() {
            return;
        }
        let bufs = core::mem::take(&mut *lock(&self.rx));
        let last = bufs.len().saturating_sub(1);
        let mut bufs = bufs.into_iter().enumerate();
        for (i, buf) in bufs.by_ref() {
            let id = ops::insert(Record {
                ep: serial,
                context: 0,
                recv: None,
                silent: false,
                shared: self.clone(),
                multi: None,
                prefix: None,
                pooled: true,
            });
            // One doorbell for the batch (core defers it further on a busy queue).
            let flags = if i == last {
                OpFlags::empty()
            } else {
                OpFlags::MORE
            };
            if let Err((_, buf)) = ep.recvmsg(dom, buf, id, flags) {
                drop(ops::take(id));
                self.give_back(buf, true);
                break;
            }
        }
        for (_, buf) in bufs {
            self.give_back(buf, true);
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Plain values: consistent whatever panicked while they were held.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Core's object behind an endpoint fid: an endpoint, or a context of a scalable endpoint
/// ([`crate::sep`]), which is one in every call but its enable and close.
pub(crate) enum CoreEp {
    Ep(Endpoint),
    Ctx(Context<'static>),
}

impl core::ops::Deref for CoreEp {
    type Target = Endpoint;
    fn deref(&self) -> &Endpoint {
        match self {
            CoreEp::Ep(e) => e,
            CoreEp::Ctx(c) => c,
        }
    }
}

impl core::ops::DerefMut for CoreEp {
    fn deref_mut(&mut self) -> &mut Endpoint {
        match self {
            CoreEp::Ep(e) => e,
            CoreEp::Ctx(c) => c,
        }
    }
}

impl CoreEp {
    /// `fi_enable` (a context's also joins its scalable endpoint's RSS table, if it has one).
    fn enable(
        &mut self,
        dom: &ringfab::domain::Domain<'static, crate::table::ProvNic>,
    ) -> ringfab::Result {
        match self {
            CoreEp::Ep(e) => e.enable(dom),
            CoreEp::Ctx(c) => c.enable(dom),
        }
    }

    /// `fi_close`; the object back with the error.
    #[allow(
        clippy::result_large_err,
        reason = "fi_close hands the object back on error, as core's closes do; not on the \
                  data path"
    )]
    fn close(
        self,
        dom: &ringfab::domain::Domain<'static, crate::table::ProvNic>,
    ) -> Result<(), (Error, CoreEp)> {
        match self {
            CoreEp::Ep(e) => e.close(dom).map_err(|(err, e)| (err, CoreEp::Ep(e))),
            CoreEp::Ctx(c) => c.close(dom).map_err(|(err, c)| (err, CoreEp::Ctx(c))),
        }
    }
}

/// `FI_SELECTIVE_COMPLETION` on an endpoint's CQ bindings, per direction.
///
/// The provider honours it itself rather than passing it to core: core reclaims an
/// operation that completes silently without handing its buffer back, and the buffer is one
/// of the endpoint's own (module documentation). So core binds the CQ without it and
/// reports every completion; the CQ gives the buffer back and drops the entry of an
/// operation recorded as silent ([`crate::ops::Record::silent`]). Errors are reported
/// either way (fi_cq(3)).
#[derive(Clone, Copy, Default)]
pub(crate) struct Selective {
    tx: bool,
    rx: bool,
}

impl Selective {
    /// Whether an operation of direction `recv` posted with `flags` (the call's; `None`:
    /// the endpoint's default op flags) completes without an entry when it succeeds:
    /// fi_endpoint(3), `FI_SELECTIVE_COMPLETION`: "data transfer operations will not generate
    /// entries for successful completions unless FI_COMPLETION is set as an operational flag
    /// for the given operation".
    pub(crate) fn silent(self, ep: &Endpoint, recv: bool, flags: Option<OpFlags>) -> bool {
        if !(if recv { self.rx } else { self.tx }) {
            return false;
        }
        let which = if recv {
            BindFlags::RECV
        } else {
            BindFlags::TRANSMIT
        };
        let flags = flags.unwrap_or_else(|| ep.get_op_flags(which).unwrap_or_default());
        !flags.contains(OpFlags::COMPLETION)
    }
}

/// Serial numbers of endpoints (and shared receive contexts: whatever owns records).
static SERIAL: AtomicU64 = AtomicU64::new(1);

/// A fresh serial number for an owner of records ([`crate::ops`]).
pub(crate) fn next_serial() -> u64 {
    SERIAL.fetch_add(1, Ordering::Relaxed)
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
    cancel: Some(cancel),
    getopt: Some(getopt),
    setopt: Some(setopt),
    tx_ctx: Some(NoSys::NOSYS),
    rx_ctx: Some(NoSys::NOSYS),
    rx_size_left: Some(rx_size_left),
    tx_size_left: Some(tx_size_left),
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

static MSG_OPS: Ops<sys::fi_ops_msg> = Ops(sys::fi_ops_msg {
    size: core::mem::size_of::<sys::fi_ops_msg>(),
    recv: Some(crate::msg::recv),
    recvv: Some(crate::msg::recvv),
    recvmsg: Some(crate::msg::recvmsg),
    send: Some(crate::msg::send),
    sendv: Some(crate::msg::sendv),
    sendmsg: Some(crate::msg::sendmsg),
    inject: Some(crate::msg::inject),
    senddata: Some(crate::msg::senddata),
    injectdata: Some(crate::msg::injectdata),
});

/// The tables of calls no endpoint, context or shared context of the provider offers
/// (`-FI_ENOSYS`), shared by all of them.
pub(crate) static RMA_OPS: Ops<sys::fi_ops_rma> = Ops(nosys_table!(fi_ops_rma {
    read,
    readv,
    readmsg,
    write,
    writev,
    writemsg,
    inject,
    writedata,
    injectdata
}));

pub(crate) static TAGGED_OPS: Ops<sys::fi_ops_tagged> = Ops(nosys_table!(fi_ops_tagged {
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

pub(crate) static ATOMIC_OPS: Ops<sys::fi_ops_atomic> = Ops(nosys_table!(fi_ops_atomic {
    write,
    writev,
    writemsg,
    inject,
    readwrite,
    readwritev,
    readwritemsg,
    compwrite,
    compwritev,
    compwritemsg,
    writevalid,
    readwritevalid,
    compwritevalid,
}));

pub(crate) static COLLECTIVE_OPS: Ops<sys::fi_ops_collective> =
    Ops(nosys_table!(fi_ops_collective {
        barrier,
        broadcast,
        alltoall,
        allreduce,
        allgather,
        reduce_scatter,
        reduce,
        scatter,
        gather,
        msg,
        barrier2,
    }));

/// The endpoint `fid` is, if it is one of this provider's.
///
/// # Safety
/// `fid` is null or points to a `struct fid`.
pub(crate) unsafe fn ours<'a>(fid: *const sys::fid) -> Option<&'a EpObj> {
    // SAFETY: null or a valid fid; endpoints and contexts of these classes and this table
    // are `EpObj`s, alive until fi_close.
    unsafe {
        fid::ours(fid, sys::FI_CLASS_EP, &FI_OPS)
            .or_else(|| fid::ours(fid, sys::FI_CLASS_TX_CTX, &FI_OPS))
            .or_else(|| fid::ours(fid, sys::FI_CLASS_RX_CTX, &FI_OPS))
    }
}

/// The endpoint `fid` is, or that it is an alias of ([`crate::alias`]): what the calls an
/// alias shares with its endpoint act on.
///
/// # Safety
/// `fid` is null or points to a `struct fid`.
pub(crate) unsafe fn ours_or_aliased<'a>(fid: *const sys::fid) -> Option<&'a EpObj> {
    // SAFETY: the caller's promise.
    unsafe { ours(fid).or_else(|| crate::alias::ours(fid).map(AliasObj::endpoint)) }
}

/// The endpoint attributes `info` asks for, in domain `d`.
///
/// # Safety
/// `info` is a valid `fi_info` (null attribute pointers allowed).
unsafe fn attr_of(
    info: &sys::fi_info,
    d: &DomainObj,
    context: *mut c_void,
) -> Result<EpAttr, c_int> {
    let mut attr = EpAttr {
        context: OpContext(context as usize),
        ..EpAttr::default()
    };
    // SAFETY: null or valid attribute structures of the caller's fi_info.
    let (ep, tx, rx) = unsafe {
        (
            info.ep_attr.as_ref(),
            info.tx_attr.as_ref(),
            info.rx_attr.as_ref(),
        )
    };
    if let Some(e) = ep {
        attr.ep_type = match e.type_ {
            sys::FI_EP_UNSPEC => EpType::Unspec,
            sys::FI_EP_DGRAM => EpType::Dgram,
            _ => return Err(errno::INVAL),
        };
        // More contexts are a scalable endpoint's (`fi_scalable_ep`); FI_SHARED_CONTEXT is an
        // endpoint that binds a shared transmit (crate::stx) or receive (crate::srx) context
        // before it is enabled.
        let shared = sys::FI_SHARED_CONTEXT as usize;
        if (e.tx_ctx_cnt > 1 && e.tx_ctx_cnt != shared)
            || (e.rx_ctx_cnt > 1 && e.rx_ctx_cnt != shared)
        {
            return Err(errno::INVAL);
        }
    }
    let caps = info.caps | rx.map_or(0, |r| r.caps);
    if caps & sys::FI_MULTI_RECV != 0 {
        attr.multi_recv_msgs = crate::nic::MULTI_RECV_MSGS;
    }
    attr.source_err = caps & sys::FI_SOURCE_ERR != 0;
    if let Some(t) = tx {
        attr.tx_iov_limit = t.iov_limit.max(1);
        attr.tx_op_flags = OpFlags::from_bits_retain(t.op_flags);
    }
    if let Some(r) = rx {
        attr.rx_op_flags = OpFlags::from_bits_retain(r.op_flags);
    }
    if info.addr_format == sys::FI_SOCKADDR_IN {
        // SAFETY: the caller's promise.
        return unsafe { plain_udp(info, d, attr) };
    }
    // A src_addr names the NIC (the domain's) and the receive context.
    if !info.src_addr.is_null() && info.src_addrlen == ringfab::av::EpAddr::LEN {
        // SAFETY: `src_addrlen` bytes at `src_addr` (fi_getinfo(3)).
        let bytes =
            unsafe { core::slice::from_raw_parts(info.src_addr.cast::<u8>(), info.src_addrlen) };
        if let Ok(a) = ringfab::av::EpAddr::from_bytes(bytes) {
            attr.rx_queue = a.ctx;
            attr.tx_queue = a.ctx;
        }
    }
    Ok(attr)
}

/// `attr` made a plain-UDP endpoint (`FI_SOCKADDR_IN`, docs/ip.md) on queue pair 0, bound to
/// the port of `info->src_addr` (none, or 0: a free one), whose address must be the domain's.
///
/// # Errors
/// `-FI_EINVAL` for a `src_addr` that is not a `sockaddr_in` or names another address, or
/// for more than one context; `-FI_EADDRNOTAVAIL` in a domain without an IPv4 configuration.
///
/// # Safety
/// `info` is a valid `fi_info`.
unsafe fn plain_udp(info: &sys::fi_info, d: &DomainObj, attr: EpAttr) -> Result<EpAttr, c_int> {
    let Some(config) = d.core().ipv4() else {
        crate::log::warn("fi_endpoint: FI_SOCKADDR_IN in a domain without FI_RINGFAB_IPV4");
        return Err(ffi::neg(sys::FI_EADDRNOTAVAIL));
    };
    let port = if info.src_addr.is_null() {
        0
    } else {
        // SAFETY: `src_addrlen` bytes at `src_addr` (fi_getinfo(3)).
        let bytes =
            unsafe { core::slice::from_raw_parts(info.src_addr.cast::<u8>(), info.src_addrlen) };
        match ringfab::ip::SockAddrIn::from_bytes(bytes) {
            Ok(a) if a.addr == config.addr => a.port,
            _ => return Err(errno::INVAL),
        }
    };
    // SAFETY: null or the caller's endpoint attributes.
    if let Some(e) = unsafe { info.ep_attr.as_ref() } {
        // A datagram names no receive context, and plain UDP has no shared contexts here.
        if e.tx_ctx_cnt > 1 || e.rx_ctx_cnt > 1 {
            return Err(errno::INVAL);
        }
    }
    Ok(EpAttr {
        encap: ringfab::proto::Encap::PlainUdp,
        port,
        ..attr
    })
}

/// `fi_ops_domain::endpoint` (`fi_endpoint`): a disabled endpoint.
pub(crate) unsafe extern "C" fn open(
    domain: *mut sys::fid_domain,
    info: *mut sys::fi_info,
    ep: *mut *mut sys::fid_ep,
    context: *mut c_void,
) -> c_int {
    ffi::guard("fi_endpoint", || {
        // SAFETY: the application's domain fid, checked to be one of ours.
        let Some(d) = (unsafe { crate::domain::ours(domain.cast()) }) else {
            return errno::INVAL;
        };
        // SAFETY: null or the application's fi_info.
        let Some(info) = (unsafe { info.as_ref() }) else {
            return errno::INVAL;
        };
        if ep.is_null() {
            return errno::INVAL;
        }
        // SAFETY: a valid fi_info.
        let attr = match unsafe { attr_of(info, d, context) } {
            Ok(a) => a,
            Err(e) => return e,
        };
        // SAFETY: a valid fi_info.
        let msg_prefix = unsafe { crate::prefix::modes(info) };
        // SAFETY: as above.
        if msg_prefix.any() && !unsafe { crate::prefix::allowed(info) } {
            return errno::INVAL;
        }
        let core = match d.core().endpoint(&attr) {
            Ok(e) => e,
            Err(e) => return ffi::fail(e),
        };
        let obj = Box::new(EpObj {
            fid: sys::fid_ep {
                fid: fid::new(sys::FI_CLASS_EP, context, &FI_OPS),
                ops: EP_OPS.ptr(),
                cm: CM_OPS.ptr(),
                msg: MSG_OPS.ptr(),
                rma: RMA_OPS.ptr(),
                tagged: TAGGED_OPS.ptr(),
                atomic: ATOMIC_OPS.ptr(),
                collective: COLLECTIVE_OPS.ptr(),
            },
            domain: d.retain(),
            serial: next_serial(),
            sep: None,
            aliases: AtomicUsize::new(0),
            msg_prefix,
            state: Mutex::new(State {
                ep: Some(CoreEp::Ep(core)),
                cqs: Vec::new(),
                av: None,
                cntrs: Vec::new(),
                rx_cntr: None,
                rx_cq: None,
                selective: Selective::default(),
                shared: None,
            }),
        });
        // SAFETY: checked not null; the endpoint is the caller's until fi_close.
        unsafe { *ep = Box::into_raw(obj).cast() };
        0
    })
}

impl EpObj {
    /// A context of scalable endpoint `sep` (`fi_tx_context`, `fi_rx_context`: fid class
    /// `class`) over core's context: disabled, as an endpoint from `fi_endpoint` is.
    pub(crate) fn new_context(
        domain: &'static DomainObj,
        sep: &'static SepObj,
        ctx: Context<'static>,
        class: u32,
        context: *mut c_void,
    ) -> *mut sys::fid_ep {
        let obj = Box::new(EpObj {
            fid: sys::fid_ep {
                fid: fid::new(class, context, &FI_OPS),
                ops: EP_OPS.ptr(),
                cm: CM_OPS.ptr(),
                msg: MSG_OPS.ptr(),
                rma: RMA_OPS.ptr(),
                tagged: TAGGED_OPS.ptr(),
                atomic: ATOMIC_OPS.ptr(),
                collective: COLLECTIVE_OPS.ptr(),
            },
            domain: domain.retain(),
            serial: next_serial(),
            sep: Some(sep),
            aliases: AtomicUsize::new(0),
            msg_prefix: crate::prefix::Modes::default(),
            state: Mutex::new(State {
                ep: Some(CoreEp::Ctx(ctx)),
                cqs: Vec::new(),
                av: None,
                cntrs: Vec::new(),
                rx_cntr: None,
                rx_cq: None,
                selective: Selective::default(),
                shared: None,
            }),
        });
        Box::into_raw(obj).cast()
    }

    /// The domain the endpoint is in.
    pub(crate) fn domain(&self) -> &'static DomainObj {
        self.domain
    }

    /// Whether its receives (`true`) or sends work in prefix mode (`FI_MSG_PREFIX`,
    /// [`crate::prefix`]).
    pub(crate) fn msg_prefix(&self, recv: bool) -> bool {
        if recv {
            self.msg_prefix.rx
        } else {
            self.msg_prefix.tx
        }
    }

    /// Runs `f` with core's endpoint, the endpoint's buffers and its selective-completion
    /// bindings (`-FI_EOPBADSTATE` before `fi_enable`).
    pub(crate) fn with_enabled<R: Ret>(
        &self,
        f: impl FnOnce(&Endpoint, &Arc<Shared>, Selective) -> R,
    ) -> R {
        let st = lock(&self.state);
        match (st.ep.as_deref(), st.shared.as_ref()) {
            (Some(ep), Some(shared)) => f(ep, shared, st.selective),
            _ => R::neg(sys::FI_EOPBADSTATE as i32),
        }
    }

    /// Runs `f` with core's endpoint (`None` once it is closed).
    pub(crate) fn with_core<R>(&self, f: impl FnOnce(&Endpoint) -> R) -> Option<R> {
        lock(&self.state).ep.as_deref().map(f)
    }

    /// Counts an alias about to be opened on the endpoint, if `f` (core's endpoint) allows it.
    pub(crate) fn open_alias<T>(
        &self,
        f: impl FnOnce(&Endpoint) -> Result<T, Error>,
    ) -> Result<T, c_int> {
        let st = lock(&self.state);
        let Some(ep) = st.ep.as_deref() else {
            return Err(errno::INVAL);
        };
        let r = f(ep).map_err(ffi::fail::<c_int>)?;
        self.aliases.fetch_add(1, Ordering::AcqRel);
        Ok(r)
    }

    /// An alias of the endpoint is closed.
    pub(crate) fn alias_closed(&self) {
        self.aliases.fetch_sub(1, Ordering::AcqRel);
    }

    /// The fid of an alias of the endpoint: the endpoint's class, context and tables, but
    /// `fi_ops` (close, bind, control) of the alias's own.
    pub(crate) fn fid_for_alias(&self, ops: &'static Ops<sys::fi_ops>) -> sys::fid_ep {
        sys::fid_ep {
            fid: fid::new(self.fid.fid.fclass as u32, self.fid.fid.context, ops),
            ..self.fid
        }
    }

    /// A record for an operation of this endpoint; `silent` if its success is not reported
    /// (selective completion).
    pub(crate) fn record(
        &self,
        shared: &Arc<Shared>,
        context: *mut c_void,
        recv: Option<(usize, usize)>,
        silent: bool,
    ) -> Record {
        Record {
            ep: self.serial,
            context: context as usize,
            recv,
            silent,
            shared: shared.clone(),
            multi: None,
            prefix: None,
            pooled: false,
        }
    }

    /// Drives the endpoint's progress (`FI_PROGRESS_MANUAL`): core polls its queues (so that
    /// counters count), then each CQ it is bound to takes what completed, so that buffers come back to the endpoint and silent
    /// completions are settled, whether or not the application reads the CQ.
    pub(crate) fn progress(&self) {
        let cqs = {
            let st = lock(&self.state);
            self.progress_core(&st);
            // Copied out: a CQ's lock is never taken under the endpoint's (bindings are
            // stable while a counter or size call drives progress: closing unbinds first).
            st.cqs.clone()
        };
        for cq in cqs {
            cq.progress();
        }
    }

    /// Core's progress of a plain-UDP endpoint, both directions, and its receive pool's
    /// buffers back on the ring ([`crate::rxpool`]): what a read of a CQ it is bound to does
    /// first ([`crate::cq`]). Not enabled yet, or failed: nothing (the read reports the rest).
    pub(crate) fn progress_plain_udp(&self) {
        self.progress_core(&lock(&self.state));
    }

    /// Core polls the endpoint's queues and counts what completed, past an error waiting at
    /// the head of a CQ (which stops a CQ read), and a receive pool's buffers go back on the
    /// ring. Not yet enabled, or failed: nothing to progress.
    fn progress_core(&self, st: &State) {
        if let Some(ep) = st.ep.as_deref() {
            let dom = self.domain.core();
            let _ = ep.progress(dom);
            if let Some(shared) = &st.shared {
                shared.refill(ep, dom, self.serial);
            }
        }
    }

    /// `fi_cancel` of a receive waiting in a plain-UDP endpoint's receive pool
    /// ([`crate::rxpool`]) posted with `context`: its `FI_ECANCELED` entry queued on the
    /// receive CQ, `Some(0)`; `None` if there is no pool or no such receive in it.
    pub(crate) fn cancel_pooled(&self, context: usize) -> Option<isize> {
        let (shared, cq) = {
            let st = lock(&self.state);
            (st.shared.clone()?, st.rx_cq)
        };
        let w = shared.pool.as_ref()?.cancel(context)?;
        let r = crate::cq::cancelled(&shared, w);
        if let Some(cq) = cq {
            cq.deliver(r);
        }
        Some(0)
    }

    /// Its serial number ([`crate::ops::Record::ep`]).
    pub(crate) fn serial(&self) -> u64 {
        self.serial
    }

    /// The CQ bound for its receives, if one is.
    pub(crate) fn rx_cq(&self) -> Option<&'static CqObj> {
        lock(&self.state).rx_cq
    }

    /// A buffer of the endpoint's for a receive (`true`) or a send.
    pub(crate) fn take_buf(shared: &Shared, recv: bool) -> Option<Buf<'static>> {
        shared.take(recv)
    }

    /// The endpoint as a `'static` borrow, for a counter bound to it or a multi-receive
    /// buffer posted on it.
    ///
    /// # Safety
    /// The borrow is not used once the endpoint is closed (a counter drops it in `unbind`; a
    /// multi-receive buffer goes with the records closing purges).
    pub(crate) unsafe fn as_static(&self) -> &'static EpObj {
        // SAFETY: the caller's promise.
        unsafe { &*(self as *const EpObj) }
    }

    /// `fi_enable`: opens the endpoint's queues and carves its buffers.
    pub(crate) fn enable(&self) -> c_int {
        let mut st = lock(&self.state);
        let dom = self.domain.core();
        let Some(ep) = st.ep.as_mut() else {
            return errno::INVAL;
        };
        if let Err(e) = ep.enable(dom) {
            return ffi::fail(e);
        }
        if !ep.attr().encap.is_ringfab() {
            // The gratuitous ARP announcement core queues at enable (RFC 5227 §2.3) leaves
            // now, when the address comes into use, rather than with the first progress —
            // where it would go out back to back with the ARP request and the first datagram
            // and could take the last of a peer's few posted receives (docs/libfabric.md,
            // "FI_SOCKADDR_IN (plain UDP)", "Limits"). A failure shows at the next call.
            let _ = ep.progress(dom);
        }
        if let (Some(shared), Some(ep)) = (st.shared.as_ref(), st.ep.as_deref()) {
            // Enabled again after a critical error: the buffers are still the endpoint's (a
            // receive pool's go back on the ring).
            shared.refill(ep, dom, self.serial);
            return 0;
        }
        let info = match st.ep.as_ref() {
            Some(ep) => ep.info(dom),
            None => return errno::INVAL,
        };
        let payload_offset = st.ep.as_deref().map_or(0, Endpoint::payload_offset);
        let len = st.ep.as_ref().map_or(0, |ep| ep.attr().rx_buf_len as usize);
        // With multi-receive buffers core counts a receive as `multi_recv_msgs` descriptors
        // (`rx_attr->size` shrinks so); the provider posts a buffer's slots as plain receives
        // of its own buffers, one per descriptor (crate::multi).
        let per_recv = st
            .ep
            .as_ref()
            .map_or(1, |ep| ep.attr().multi_recv_msgs.max(1)) as usize;
        let n_rx = (info.rx.size.max(1) * per_recv).min(crate::nic::RING_DEPTH);
        let n_tx = info.tx.size.max(1);
        let rx_cntr = st.rx_cntr.map(CntrObj::core);
        // A plain-UDP endpoint receives through a pool of its buffers, which counts its
        // receives itself (crate::rxpool).
        let plain = st
            .ep
            .as_ref()
            .is_some_and(|ep| !ep.attr().encap.is_ringfab());
        let (rx_cntr, pool) = if plain {
            (None, Some(RxPool::new(info.rx.size, n_rx, rx_cntr)))
        } else {
            (rx_cntr, None)
        };
        match Shared::carve(
            self.domain,
            payload_offset,
            (n_rx, n_tx),
            len,
            rx_cntr,
            pool,
        ) {
            Ok(shared) => {
                let shared = Arc::new(shared);
                if let Some(ep) = st.ep.as_deref() {
                    shared.refill(ep, dom, self.serial);
                }
                st.shared = Some(shared);
                0
            }
            Err(e) => ffi::fail(e),
        }
    }
}

/// `fi_ops::close` of an endpoint: outstanding operations are discarded (fi_endpoint(3)),
/// the bindings released.
unsafe extern "C" fn close(fid: *mut sys::fid) -> c_int {
    ffi::guard("fi_close(ep)", || {
        // SAFETY: libfabric passes the fid it was given, or null.
        let Some(e) = (unsafe { ours(fid) }) else {
            return errno::INVAL;
        };
        // fi_endpoint(3): "All allocated aliases must be closed for the underlying endpoint
        // to be released."
        if e.aliases.load(Ordering::Acquire) > 0 {
            return errno::BUSY;
        }
        // Counters first, without the endpoint's lock (a counter's progress takes its own,
        // then this endpoint's).
        let (cntrs, cqs) = {
            let st = lock(&e.state);
            (st.cntrs.clone(), st.cqs.clone())
        };
        for c in &cntrs {
            c.unbind(e);
        }
        // Off the CQs' lists of plain-UDP endpoints they progress (crate::cq), before the
        // endpoint goes; put back if the close is refused.
        for cq in &cqs {
            cq.remove_plain_udp(e);
        }
        let mut st = lock(&e.state);
        if let Some(core) = st.ep.take() {
            if let Err((err, back)) = core.close(e.domain.core()) {
                st.ep = Some(back);
                drop(st);
                // SAFETY: the endpoint stays open: it is alive until a later fi_close.
                let me = unsafe { e.as_static() };
                for c in cntrs {
                    c.bind(me);
                }
                let plain = lock(&e.state)
                    .ep
                    .as_ref()
                    .is_some_and(|ep| !ep.attr().encap.is_ringfab());
                for cq in cqs.iter().filter(|_| plain) {
                    cq.add_plain_udp(me);
                }
                return ffi::fail(err);
            }
        }
        st.cntrs.clear();
        st.rx_cntr = None;
        ops::purge(e.serial);
        st.shared = None;
        drop(st);
        let (domain, sep) = (e.domain, e.sep);
        // SAFETY: made by Box::into_raw in `open` or `new_context`, closed once.
        unsafe { fid::free(e) };
        if let Some(s) = sep {
            s.context_closed();
        }
        domain.release();
        0
    })
}

/// `fi_ops::bind` of an endpoint (`fi_ep_bind`): a CQ (`FI_TRANSMIT`, `FI_RECV`), the AV, or
/// an event queue (which a DGRAM endpoint reports nothing to).
unsafe extern "C" fn bind(fid: *mut sys::fid, bfid: *mut sys::fid, flags: u64) -> c_int {
    ffi::guard("fi_ep_bind", || {
        // SAFETY: libfabric passes the fid it was given, or null.
        match unsafe { ours(fid) } {
            Some(e) => e.bind(bfid, flags),
            None => errno::INVAL,
        }
    })
}

impl EpObj {
    /// `fi_ep_bind` of `bfid` to the endpoint (or through an alias of it).
    pub(crate) fn bind(&self, bfid: *mut sys::fid, flags: u64) -> c_int {
        let dom = self.domain.core();
        let mut st = lock(&self.state);
        let (enabled, has_rx_cntr) = (st.shared.is_some(), st.rx_cntr.is_some());
        let Some(ep) = st.ep.as_mut() else {
            return errno::INVAL;
        };
        // SAFETY: the application's fid to bind: each check reads its class and table only.
        let (cq, av, eq, cntr, stx, srx) = unsafe {
            (
                crate::cq::ours(bfid),
                crate::av::ours(bfid),
                crate::eq::ours(bfid),
                crate::cntr::ours(bfid),
                crate::stx::ours(bfid),
                crate::srx::ours(bfid),
            )
        };
        if let Some(s) = srx {
            if !core::ptr::eq(s.domain, self.domain) {
                return errno::INVAL;
            }
            if flags != 0 {
                return errno::BADFLAGS;
            }
            return match s.with_core(|core| ep.bind_srx(dom, core)) {
                Ok(Ok(())) => 0,
                Ok(Err(err)) => ffi::fail(err),
                Err(err) => err,
            };
        }
        if let Some(s) = stx {
            if !core::ptr::eq(s.domain, self.domain) {
                return errno::INVAL;
            }
            if flags != 0 {
                return errno::BADFLAGS;
            }
            return match s.with_core(|core| ep.bind_stx(dom, core)) {
                Ok(Ok(())) => 0,
                Ok(Err(err)) => ffi::fail(err),
                Err(err) => err,
            };
        }
        if let Some(cq) = cq {
            if !core::ptr::eq(cq.domain, self.domain) {
                return errno::INVAL;
            }
            // Selective completion is the provider's to honour (`Selective`); core reports
            // every completion.
            let selective = flags & sys::FI_SELECTIVE_COMPLETION != 0;
            let to_core = BindFlags::from_bits_retain(flags & !sys::FI_SELECTIVE_COMPLETION);
            let r = cq.with_core(|core| ep.bind_cq(dom, core, to_core));
            let plain = !ep.attr().encap.is_ringfab();
            return match r {
                Ok(Ok(())) => {
                    st.cqs.push(cq);
                    if flags & sys::FI_TRANSMIT != 0 {
                        st.selective.tx = selective;
                    }
                    if flags & sys::FI_RECV != 0 {
                        st.selective.rx = selective;
                        st.rx_cq = Some(cq);
                    }
                    // The CQ's list is never locked under an endpoint's lock (crate::cq).
                    drop(st);
                    if plain {
                        // SAFETY: the endpoint lives until its fi_close, which takes it off
                        // the CQ's list first.
                        cq.add_plain_udp(unsafe { self.as_static() });
                    }
                    0
                }
                Ok(Err(err)) => ffi::fail(err),
                Err(err) => err,
            };
        }
        if let Some(av) = av {
            if !core::ptr::eq(av.domain, self.domain) || self.sep.is_some() {
                // A context uses its scalable endpoint's AV (crate::sep).
                return errno::INVAL;
            }
            if flags != 0 {
                return errno::BADFLAGS;
            }
            return match av.with(|core| ep.bind_av(dom, core)) {
                Ok(Ok(())) => {
                    st.av = Some(av);
                    0
                }
                Ok(Err(err)) => ffi::fail(err),
                Err(err) => err,
            };
        }
        if eq.is_some() {
            // fi_endpoint(3): DGRAM endpoints report no connection events; a bound EQ stays
            // empty.
            return 0;
        }
        if let Some(c) = cntr {
            if !core::ptr::eq(c.domain, self.domain) {
                return errno::INVAL;
            }
            let flags = CntrBindFlags::from_bits_retain(flags);
            // A plain-UDP endpoint's receives are counted by its receive pool when they are
            // matched (crate::rxpool), so core is not given `FI_RECV`; what core would check
            // of it is checked here.
            let mut to_core = flags;
            if !ep.attr().encap.is_ringfab() && flags.contains(CntrBindFlags::RECV) {
                if enabled {
                    return ffi::fail(Error::OpBadState);
                }
                if has_rx_cntr {
                    return errno::INVAL;
                }
                to_core = to_core.difference(CntrBindFlags::RECV);
            }
            if !to_core.is_empty() || to_core.bits() == flags.bits() {
                if let Err(err) = ep.bind_cntr(dom, c.core(), to_core) {
                    return ffi::fail(err);
                }
            }
            // SAFETY: the endpoint lives until its fi_close, which unbinds it first (the
            // counter's fi_close refuses while it is bound).
            c.bind(unsafe { self.as_static() });
            st.cntrs.push(c);
            if flags.contains(CntrBindFlags::RECV) {
                st.rx_cntr = Some(c);
            }
            return 0;
        }
        // Wait sets, registrations, domains and other providers' fids.
        errno::INVAL
    }
}

/// `fi_ops::control` of an endpoint: `FI_ENABLE`, `FI_GETOPSFLAG`, `FI_SETOPSFLAG`, `FI_ALIAS`
/// ([`crate::alias`]) (fi_endpoint(3), fi_control(3)).
unsafe extern "C" fn control(fid: *mut sys::fid, command: c_int, arg: *mut c_void) -> c_int {
    ffi::guard("fi_control(ep)", || {
        // SAFETY: libfabric passes the fid it was given, or null.
        let Some(e) = (unsafe { ours(fid) }) else {
            return errno::INVAL;
        };
        match command as u32 {
            sys::FI_ENABLE => e.enable(),
            // SAFETY: the endpoint stays open while the alias is: its close refuses until then.
            sys::FI_ALIAS => crate::alias::open(unsafe { e.as_static() }, None, arg),
            sys::FI_GETOPSFLAG | sys::FI_SETOPSFLAG => {
                if arg.is_null() {
                    return errno::INVAL;
                }
                // SAFETY: fi_endpoint(3): the argument is a `uint64_t *` holding FI_TRANSMIT
                // or FI_RECV and, for FI_SETOPSFLAG, the flags.
                let flags = unsafe { &mut *arg.cast::<u64>() };
                let dirs = sys::FI_TRANSMIT | sys::FI_RECV;
                let which = BindFlags::from_bits_retain(*flags & dirs);
                let mut st = lock(&e.state);
                let Some(ep) = st.ep.as_mut() else {
                    return errno::INVAL;
                };
                let r = if command as u32 == sys::FI_GETOPSFLAG {
                    ep.get_op_flags(which).map(|f| *flags = f.bits())
                } else {
                    ep.set_op_flags(which, OpFlags::from_bits_retain(*flags & !dirs))
                };
                r.map_or_else(ffi::fail, |()| 0)
            }
            _ => errno::NOSYS,
        }
    })
}

/// The option `(level, optname)` as core names it.
fn option(level: c_int, optname: c_int) -> Result<EpOpt, c_int> {
    if level as u32 != sys::FI_OPT_ENDPOINT {
        return Err(ffi::neg(sys::FI_ENOPROTOOPT));
    }
    Ok(match optname as u32 {
        sys::FI_OPT_MIN_MULTI_RECV => EpOpt::MinMultiRecv,
        sys::FI_OPT_CM_DATA_SIZE => EpOpt::CmDataSize,
        other => EpOpt::Other(other as i32),
    })
}

/// `fi_getopt`: `FI_OPT_MIN_MULTI_RECV` and `FI_OPT_CM_DATA_SIZE` (`size_t`).
unsafe extern "C" fn getopt(
    fid: *mut sys::fid,
    level: c_int,
    optname: c_int,
    optval: *mut c_void,
    optlen: *mut usize,
) -> c_int {
    ffi::guard("fi_getopt", || {
        // SAFETY: libfabric passes the fid it was given, or null.
        let Some(e) = (unsafe { ours_or_aliased(fid) }) else {
            return errno::INVAL;
        };
        let opt = match option(level, optname) {
            Ok(o) => o,
            Err(err) => return err,
        };
        if optval.is_null() || optlen.is_null() {
            return errno::INVAL;
        }
        let st = lock(&e.state);
        let Some(ep) = st.ep.as_ref() else {
            return errno::INVAL;
        };
        let value = match ep.getopt(opt) {
            Ok(v) => v,
            Err(err) => return ffi::fail(err),
        };
        // SAFETY: checked not null; fi_endpoint(3): `*optlen` is the size of `optval`.
        unsafe {
            if *optlen < core::mem::size_of::<usize>() {
                *optlen = core::mem::size_of::<usize>();
                return errno::TOOSMALL;
            }
            *optval.cast::<usize>() = value;
            *optlen = core::mem::size_of::<usize>();
        }
        0
    })
}

/// `fi_setopt`: `FI_OPT_MIN_MULTI_RECV` (`size_t`).
unsafe extern "C" fn setopt(
    fid: *mut sys::fid,
    level: c_int,
    optname: c_int,
    optval: *const c_void,
    optlen: usize,
) -> c_int {
    ffi::guard("fi_setopt", || {
        // SAFETY: libfabric passes the fid it was given, or null.
        let Some(e) = (unsafe { ours_or_aliased(fid) }) else {
            return errno::INVAL;
        };
        let opt = match option(level, optname) {
            Ok(o) => o,
            Err(err) => return err,
        };
        if optval.is_null() || optlen != core::mem::size_of::<usize>() {
            return errno::INVAL;
        }
        // SAFETY: checked: a `size_t` at `optval`.
        let value = unsafe { optval.cast::<usize>().read_unaligned() };
        let mut st = lock(&e.state);
        let Some(ep) = st.ep.as_mut() else {
            return errno::INVAL;
        };
        ep.setopt(opt, value).map_or_else(ffi::fail, |()| 0)
    })
}

/// `fi_cancel`: cancels the operation posted with `context`; it completes with
/// `FI_ECANCELED` (fi_endpoint(3)). `-FI_ENOENT` if none is outstanding.
unsafe extern "C" fn cancel(fid: *mut sys::fid, context: *mut c_void) -> isize {
    ffi::guard("fi_cancel", || {
        // SAFETY: libfabric passes the fid it was given, or null.
        let Some(e) = (unsafe { ours_or_aliased(fid) }) else {
            return isize::neg(sys::FI_EINVAL);
        };
        if let Some(r) = e.cancel_pooled(context as usize) {
            return r;
        }
        let Some(id) = ops::find(e.serial, context as usize) else {
            return isize::neg(sys::FI_ENOENT);
        };
        let multi = ops::multi_of(id);
        let st = lock(&e.state);
        let r = st.ep.as_deref().map(|ep| match &multi {
            // Every slot of a multi-receive buffer (crate::multi).
            Some(m) => m.cancel(ep),
            None => ep.cancel(e.domain.core(), id),
        });
        match r {
            Some(Ok(true)) => 0,
            Some(Ok(false)) => isize::neg(sys::FI_ENOENT),
            Some(Err(err)) => ffi::fail(err),
            None => isize::neg(sys::FI_EINVAL),
        }
    })
}

/// `fi_rx_size_left`.
unsafe extern "C" fn rx_size_left(ep: *mut sys::fid_ep) -> isize {
    ffi::guard("fi_rx_size_left", || {
        // SAFETY: the application's endpoint, checked to be one of ours.
        let Some(e) = (unsafe { ours_or_aliased(ep.cast()) }) else {
            return isize::neg(sys::FI_EINVAL);
        };
        e.progress();
        e.with_enabled(|ep, shared, _| match ep.rx_size_left(e.domain.core()) {
            Ok(n) => match &shared.pool {
                // A plain-UDP endpoint's receives wait in its pool (crate::rxpool).
                Some(pool) => pool.room() as isize,
                None => n.min(lock(&shared.rx).len()) as isize,
            },
            Err(err) => ffi::fail(err),
        })
    })
}

/// `fi_tx_size_left`.
unsafe extern "C" fn tx_size_left(ep: *mut sys::fid_ep) -> isize {
    ffi::guard("fi_tx_size_left", || {
        // SAFETY: the application's endpoint, checked to be one of ours.
        let Some(e) = (unsafe { ours_or_aliased(ep.cast()) }) else {
            return isize::neg(sys::FI_EINVAL);
        };
        e.progress();
        e.with_enabled(|ep, shared, _| match ep.tx_size_left(e.domain.core()) {
            Ok(n) => n.min(lock(&shared.tx).len()) as isize,
            Err(err) => ffi::fail(err),
        })
    })
}

/// `fi_getname`: the endpoint's 8-byte address, or on plain UDP its 16-byte `sockaddr_in`
/// (the domain's address and the endpoint's port); `*addrlen` becomes its size, and
/// `-FI_ETOOSMALL` if the buffer is shorter (fi_cm(3)).
unsafe extern "C" fn getname(fid: *mut sys::fid, addr: *mut c_void, addrlen: *mut usize) -> c_int {
    ffi::guard("fi_getname", || {
        // SAFETY: libfabric passes the fid it was given, or null.
        let Some(e) = (unsafe { ours_or_aliased(fid) }) else {
            return errno::INVAL;
        };
        if addrlen.is_null() {
            return errno::INVAL;
        }
        let dom = e.domain.core();
        let name = lock(&e.state).ep.as_ref().map(|ep| match ep.sockaddr(dom) {
            Some(a) => a.to_bytes().to_vec(),
            None => ep.name().to_bytes().to_vec(),
        });
        let Some(name) = name else {
            return errno::INVAL;
        };
        // SAFETY: the application's buffer and its length (fi_cm(3)).
        unsafe { write_name(&name, addr, addrlen) }
    })
}

/// Writes an address for `fi_getname`: `*addrlen` becomes its size; `-FI_ETOOSMALL` if the
/// buffer is shorter (fi_cm(3)); `-FI_EINVAL` without `addrlen`.
///
/// # Safety
/// `addrlen` null or valid; `addr` null or `*addrlen` writable bytes.
pub(crate) unsafe fn write_name(name: &[u8], addr: *mut c_void, addrlen: *mut usize) -> c_int {
    if addrlen.is_null() {
        return errno::INVAL;
    }
    // SAFETY: checked not null; `*addrlen` is the size of `addr` (fi_cm(3)).
    unsafe {
        let room = *addrlen;
        *addrlen = name.len();
        if room < name.len() || addr.is_null() {
            return errno::TOOSMALL;
        }
        core::ptr::copy_nonoverlapping(name.as_ptr(), addr.cast::<u8>(), name.len());
    }
    0
}
