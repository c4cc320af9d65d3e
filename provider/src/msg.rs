//! The message calls of an endpoint (`fi_ops_msg`, fi_msg(3)): each checks the application's
//! buffers against their descriptors (`FI_MR_LOCAL`), takes one of the endpoint's own
//! buffers (a send copies the payload into it; a receive's payload is copied out when its
//! completion is read: [`crate::ep`]'s "Buffers") — or in prefix mode lends core the
//! application's own buffer ([`crate::prefix`]) — keeps a record of the operation
//! ([`crate::ops`]) and posts to core. A call core refuses gives the buffer and the record
//! back and returns core's error; no buffer is lost.

use core::ffi::c_void;

use ringfab::av::FiAddr;
use ringfab::flags::OpFlags;

use crate::alias::DefaultFlags;
use crate::domain::DomainObj;
use crate::ep::{EpObj, Shared};
use crate::ffi::{self, Ret};
use crate::multi::Multi;
use crate::ops;
use crate::prefix::Geometry;
use crate::sys;

/// One buffer of the application's: address, length, descriptor.
#[derive(Clone, Copy)]
pub(crate) struct AppBuf {
    pub(crate) addr: usize,
    pub(crate) len: usize,
    desc: *mut c_void,
}

impl AppBuf {
    /// The buffer at `addr`, `len` bytes, registered under `desc`.
    pub(crate) fn new(addr: usize, len: usize, desc: *mut c_void) -> AppBuf {
        AppBuf { addr, len, desc }
    }

    /// Its descriptor.
    pub(crate) fn desc(&self) -> *mut c_void {
        self.desc
    }

    /// Its bytes from `skip` on (`skip` <= `len`), under the same descriptor.
    pub(crate) fn tail(&self, skip: usize) -> AppBuf {
        AppBuf {
            addr: self.addr + skip,
            len: self.len - skip,
            desc: self.desc,
        }
    }
}

/// What every message entry point does first: runs `f` for the call `what` under
/// [`ffi::guard`] (a panic becomes `-FI_EOTHER`) with the endpoint `ep` is or is an alias of,
/// or returns `-FI_EINVAL` if it is neither of the provider's. Through an alias `f` also gets
/// the alias's default op flags, which a call without flags of its own posts with in place of
/// the endpoint's ([`crate::alias`]); `None`: the endpoint's own apply.
///
/// # Safety
/// `ep` null or a `struct fid_ep`.
unsafe fn on_ep(
    what: &'static str,
    ep: *mut sys::fid_ep,
    f: impl FnOnce(&EpObj, Option<DefaultFlags>) -> isize,
) -> isize {
    ffi::guard(what, || {
        // SAFETY: the caller's promise.
        if let Some(e) = unsafe { crate::ep::ours(ep.cast()) } {
            return f(e, None);
        }
        // SAFETY: as above.
        match unsafe { crate::alias::ours(ep.cast()) } {
            Some(a) => f(a.endpoint(), Some(a.flags())),
            None => isize::neg(sys::FI_EINVAL),
        }
    })
}

/// Checks every buffer against its descriptor (a zero-length buffer needs none).
///
/// # Safety
/// Each descriptor null or from `fi_mr_desc` of an open registration.
pub(crate) unsafe fn check(domain: &DomainObj, bufs: &[AppBuf]) -> Result<(), isize> {
    for b in bufs.iter().filter(|b| b.len > 0) {
        if b.addr == 0 {
            return Err(isize::neg(sys::FI_EINVAL));
        }
        // SAFETY: the caller's promise.
        unsafe { crate::mr::check(b.desc, domain, b.addr, b.len) }.map_err(|err| err as isize)?;
    }
    Ok(())
}

/// The `count` buffers of an iovec array with their descriptors.
///
/// # Safety
/// `iov` holds `count` entries and `desc` null or `count` entries (fi_msg(3)).
pub(crate) unsafe fn bufs_of(
    iov: *const sys::iovec,
    desc: *mut *mut c_void,
    count: usize,
) -> Result<Vec<AppBuf>, isize> {
    if count > 0 && iov.is_null() {
        return Err(isize::neg(sys::FI_EINVAL));
    }
    Ok((0..count)
        .map(|i| {
            // SAFETY: the caller's promise: `count` entries.
            let (v, d) = unsafe {
                (
                    &*iov.add(i),
                    if desc.is_null() {
                        core::ptr::null_mut()
                    } else {
                        *desc.add(i)
                    },
                )
            };
            AppBuf {
                addr: v.iov_base as usize,
                len: v.iov_len,
                desc: d,
            }
        })
        .collect())
}

/// Posts a receive into the application's buffer `b` (at most one: `rx_attr->iov_limit` 1):
/// into one of the endpoint's buffers, or in prefix mode into the application's own when it
/// is long enough ([`crate::prefix::recv_buf`]).
///
/// # Safety
/// `b` is the application's memory, the provider's until the completion (fi_msg(3)).
unsafe fn post_recv(
    e: &EpObj,
    bufs: &[AppBuf],
    context: *mut c_void,
    flags: Option<OpFlags>,
) -> isize {
    if bufs.len() > 1 {
        return isize::neg(sys::FI_EINVAL);
    }
    // SAFETY: the caller's promise.
    if let Err(err) = unsafe { check(e.domain(), bufs) } {
        return err;
    }
    // SAFETY: the caller's promise, the buffers checked.
    if let Some(r) = unsafe { post_pooled_recv(e, bufs, context, flags) } {
        return r;
    }
    let dom = e.domain().core();
    e.with_enabled(|ep, shared, selective| {
        let (buf, recv, prefix) = if e.msg_prefix(true) {
            let Some(whole) = bufs.first() else {
                // fi_getinfo(3): "Prefix buffer space must be provided with all sends and
                // receives, regardless of the size of the transfer".
                return isize::neg(sys::FI_EINVAL);
            };
            let g = Geometry::of(ep);
            let rx_buf_len = ep.attr().rx_buf_len as usize;
            // SAFETY: checked against its descriptor above; the caller's promise.
            match unsafe { crate::prefix::recv_buf(e.domain(), g, whole, rx_buf_len, shared) } {
                Ok((buf, payload, op)) => (buf, (payload.addr, payload.len), Some(op)),
                Err(err) => return err,
            }
        } else {
            let Some(buf) = EpObj::take_buf(shared, true) else {
                return isize::neg(sys::FI_EAGAIN);
            };
            (buf, bufs.first().map_or((0, 0), |b| (b.addr, b.len)), None)
        };
        let silent = selective.silent(ep, true, flags);
        let id = ops::insert(ops::Record {
            prefix,
            ..e.record(shared, context, Some(recv), silent)
        });
        let r = match flags {
            None => ep.recv(dom, buf, id),
            Some(f) => ep.recvmsg(dom, buf, id, f),
        };
        finish(r, id, shared, true)
    })
}

/// Posts a receive of a plain-UDP endpoint, which waits in its receive pool for a datagram
/// ([`crate::rxpool`]) — or completes at once with one held there, its entry queued on the
/// receive CQ. `None` for an endpoint without a pool (not enabled, or not plain UDP).
///
/// # Safety
/// As [`post_recv`] (the buffers checked against their descriptors).
unsafe fn post_pooled_recv(
    e: &EpObj,
    bufs: &[AppBuf],
    context: *mut c_void,
    flags: Option<OpFlags>,
) -> Option<isize> {
    // Read before the endpoint's lock is taken: the entry is queued after it is let go.
    let rx_cq = e.rx_cq();
    let dom = e.domain().core();
    let (mut matched, mut pooled) = (None, false);
    let r = e.with_enabled(|ep, shared, selective| {
        let Some(pool) = shared.pool.as_ref() else {
            return 0;
        };
        pooled = true;
        // The endpoint's state, as core checks a receive's (failed, disabled).
        if let Err(err) = ep.rx_size_left(dom) {
            return ffi::fail(err);
        }
        // fi_msg(3): flags a receive takes here; `FI_MULTI_RECV` is not offered on plain UDP
        // (its call went to `post_multi_recv`).
        if flags.is_some_and(|f| !(OpFlags::COMPLETION | OpFlags::MORE).contains(f)) {
            return isize::neg(sys::FI_EBADFLAGS as i32);
        }
        let (recv, prefix) = if e.msg_prefix(true) {
            let g = Geometry::of(ep);
            match bufs.first().map(|whole| g.strip(whole)) {
                Some(Ok(p)) => ((p.addr, p.len), g.size),
                Some(Err(err)) => return err,
                // No buffer: no room for the prefix either.
                None => return isize::neg(sys::FI_EINVAL),
            }
        } else {
            (bufs.first().map_or((0, 0), |b| (b.addr, b.len)), 0)
        };
        let w = crate::rxpool::Waiting {
            context: context as usize,
            recv,
            prefix,
            silent: selective.silent(ep, true, flags),
        };
        shared.refill(ep, dom, e.serial());
        match pool.post(w) {
            Ok(None) => 0,
            Ok(Some(pair)) => {
                matched = Some((shared.clone(), pair));
                0
            }
            Err(()) => isize::neg(sys::FI_EAGAIN),
        }
    });
    if !pooled {
        return None;
    }
    if let Some((shared, (w, a))) = matched {
        let ready = crate::cq::matched(&shared, e.serial(), w, a);
        // A silent success makes no entry. Without a receive CQ there is nothing to queue it
        // on (core refuses to enable an endpoint without one, so none comes here).
        if let (Some(r), Some(cq)) = (ready, rx_cq) {
            cq.deliver(r);
        }
    }
    Some(r)
}

/// Posts a multi-receive buffer (`FI_MULTI_RECV`, [`crate::multi`]): the application's one
/// buffer `bufs`, packed with messages until less than `FI_OPT_MIN_MULTI_RECV` bytes are
/// left. `-FI_EBADFLAGS` on an endpoint not made for them (`FI_MULTI_RECV` not among its
/// capabilities).
///
/// # Safety
/// As [`post_recv`].
unsafe fn post_multi_recv(
    e: &EpObj,
    bufs: &[AppBuf],
    context: *mut c_void,
    flags: OpFlags,
) -> isize {
    let [b] = bufs else {
        return isize::neg(sys::FI_EINVAL);
    };
    if b.len == 0 {
        return isize::neg(sys::FI_EINVAL);
    }
    // SAFETY: the caller's promise.
    if let Err(err) = unsafe { check(e.domain(), bufs) } {
        return err;
    }
    let dom = e.domain().core();
    // SAFETY: the endpoint's records, this buffer's among them, go when it closes.
    let me = unsafe { e.as_static() };
    e.with_enabled(|ep, shared, selective| {
        if ep.attr().multi_recv_msgs == 0 {
            // fi_getinfo(3): a capability the endpoint was not made with.
            return isize::neg(sys::FI_EBADFLAGS as i32);
        }
        let min = ep
            .getopt(ringfab::ep::EpOpt::MinMultiRecv)
            .unwrap_or(1)
            .max(1);
        if b.len < min {
            // Released before it could take anything.
            return isize::neg(sys::FI_EINVAL);
        }
        let silent = selective.silent(ep, true, Some(flags));
        let multi = Multi::new(
            me,
            b.addr,
            b.len,
            min,
            ep.max_msg_size(dom),
            flags,
            silent,
            context,
        );
        match multi.fill(ep, shared) {
            Ok(0) => isize::neg(sys::FI_EAGAIN),
            Ok(_) => 0,
            Err(err) => ffi::fail(err),
        }
    })
}

/// Sends the application's buffers as one message, copied into one of the endpoint's
/// buffers — or in prefix mode, for one buffer, posted in place ([`crate::prefix`]); `flags`
/// replaces the endpoint's default flags (`fi_sendmsg`), and with `FI_INJECT` the payload goes
/// through core's inject buffers instead.
///
/// # Safety
/// Each buffer is the application's memory, readable for its length.
unsafe fn post_send(
    e: &EpObj,
    app: &[AppBuf],
    dest: u64,
    context: *mut c_void,
    data: Option<u64>,
    flags: Option<OpFlags>,
) -> isize {
    // SAFETY: the caller's promise.
    if let Err(err) = unsafe { check(e.domain(), app) } {
        return err;
    }
    let dom = e.domain().core();
    e.with_enabled(|ep, shared, selective| {
        let geometry = e.msg_prefix(false).then(|| Geometry::of(ep));
        // fi_getinfo(3): "the size of the prefix buffer is not counted toward any message
        // limits, including inject": the limits apply to the payload behind it.
        let stripped;
        let bufs = match geometry.map(|g| g.payload(app)) {
            None => app,
            Some(Ok(p)) => {
                stripped = p;
                &stripped[..]
            }
            Some(Err(err)) => return err,
        };
        let total: usize = bufs.iter().map(|b| b.len).sum();
        let silent = selective.silent(ep, false, flags);
        if bufs.len() > ep.iov_limit(dom) {
            return isize::neg(sys::FI_EINVAL);
        }
        if total > ep.max_msg_size(dom) {
            return isize::neg(sys::FI_EMSGSIZE);
        }
        if flags.is_some_and(|f| f.contains(OpFlags::INJECT)) {
            let payload = gather(bufs, total);
            let id = ops::insert(e.record(shared, context, None, silent));
            let f = flags.unwrap_or_default();
            return match ep.injectmsg(dom, &payload, FiAddr(dest), data, id, f) {
                Ok(()) => 0,
                Err(err) => {
                    drop(ops::take(id));
                    ffi::fail(err)
                }
            };
        }
        let lent = match (geometry, app) {
            // One buffer, prefix and payload together: the application's own bytes.
            // SAFETY: checked against its descriptor above, and at least the prefix long
            // (`payload` refuses shorter).
            (Some(g), [whole]) => match unsafe { crate::prefix::lend_send(e.domain(), g, whole) } {
                Ok(lent) => lent,
                Err(err) => return err,
            },
            _ => None,
        };
        let (buf, prefix) = match lent {
            Some((buf, op)) => (buf, Some(op)),
            // No prefix, a gather of several buffers, or bytes lent already: copied behind
            // the header.
            None => match copy_in(shared, bufs) {
                Ok(buf) => (buf, None),
                Err(err) => return err,
            },
        };
        let id = ops::insert(ops::Record {
            prefix,
            ..e.record(shared, context, None, silent)
        });
        let r = match (flags, data) {
            (None, None) => ep.send(dom, buf, total, FiAddr(dest), id),
            (None, Some(d)) => ep.senddata(dom, buf, total, d, FiAddr(dest), id),
            (Some(f), d) => ep.sendmsg(dom, buf, total, FiAddr(dest), d, id, f),
        };
        finish(r, id, shared, false)
    })
}

/// One of the endpoint's buffers with the payload of `bufs` copied behind the header.
fn copy_in(shared: &Shared, bufs: &[AppBuf]) -> Result<ringfab::mr::Buf<'static>, isize> {
    let Some(mut buf) = EpObj::take_buf(shared, false) else {
        return Err(isize::neg(sys::FI_EAGAIN));
    };
    let mut at = shared.payload_offset;
    for b in bufs.iter().filter(|b| b.len > 0) {
        // SAFETY: checked against its registration: the application's readable memory.
        let src = unsafe { core::slice::from_raw_parts(b.addr as *const u8, b.len) };
        if let Err(err) = buf.write(at, src) {
            shared.give_back(buf, false);
            return Err(ffi::fail(err));
        }
        at += b.len;
    }
    Ok(buf)
}

/// A post's outcome: on failure the record goes, and the buffer back to the endpoint — or,
/// lent from the application's registration, back to it (dropped before the record's lease).
fn finish(
    r: Result<(), (ringfab::Error, ringfab::mr::Buf<'static>)>,
    id: ringfab::entry::OpContext,
    shared: &Shared,
    recv: bool,
) -> isize {
    match r {
        Ok(()) => 0,
        Err((err, buf)) => {
            let rec = ops::take(id);
            if rec
                .as_ref()
                .and_then(|r| r.prefix.as_ref())
                .is_some_and(|p| p.in_place)
            {
                drop(buf);
            } else {
                shared.give_back(buf, recv);
            }
            drop(rec);
            ffi::fail(err)
        }
    }
}

/// The payload of `bufs`, copied (for core's inject, at most `inject_size` bytes).
fn gather(bufs: &[AppBuf], total: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(total);
    for b in bufs.iter().filter(|b| b.len > 0 && b.addr != 0) {
        // SAFETY: each buffer was checked against its registration by the caller: the
        // application's readable memory.
        out.extend_from_slice(unsafe { core::slice::from_raw_parts(b.addr as *const u8, b.len) });
    }
    out
}

/// `fi_recv`.
pub(crate) unsafe extern "C" fn recv(
    ep: *mut sys::fid_ep,
    buf: *mut c_void,
    len: usize,
    desc: *mut c_void,
    _src_addr: u64,
    context: *mut c_void,
) -> isize {
    let b = AppBuf {
        addr: buf as usize,
        len,
        desc,
    };
    // SAFETY: the application's endpoint; its buffer is the provider's until the completion
    // (fi_msg(3)).
    unsafe {
        on_ep("fi_recv", ep, |e, defaults| {
            post_recv(e, &[b], context, defaults.map(|d| d.rx))
        })
    }
}

/// `fi_recvv`: one buffer (`rx_attr->iov_limit` is 1).
pub(crate) unsafe extern "C" fn recvv(
    ep: *mut sys::fid_ep,
    iov: *const sys::iovec,
    desc: *mut *mut c_void,
    count: usize,
    _src_addr: u64,
    context: *mut c_void,
) -> isize {
    // SAFETY: the application's endpoint and `count` iovecs and descriptors, the buffers the
    // provider's until the completion (fi_msg(3)).
    unsafe {
        on_ep("fi_recvv", ep, |e, defaults| {
            match bufs_of(iov, desc, count) {
                Ok(bufs) => post_recv(e, &bufs, context, defaults.map(|d| d.rx)),
                Err(err) => err,
            }
        })
    }
}

/// `fi_recvmsg`; `FI_MULTI_RECV` posts a multi-receive buffer ([`crate::multi`]).
pub(crate) unsafe extern "C" fn recvmsg(
    ep: *mut sys::fid_ep,
    msg: *const sys::fi_msg,
    flags: u64,
) -> isize {
    // SAFETY: the application's endpoint and message (fi_msg(3)).
    unsafe {
        on_ep("fi_recvmsg", ep, |e, _| {
            let Some(m) = msg.as_ref() else {
                return isize::neg(sys::FI_EINVAL);
            };
            let flags = OpFlags::from_bits_retain(flags);
            match bufs_of(m.msg_iov, m.desc, m.iov_count) {
                Ok(bufs) if flags.contains(OpFlags::MULTI_RECV) => {
                    post_multi_recv(e, &bufs, m.context, flags)
                }
                Ok(bufs) => post_recv(e, &bufs, m.context, Some(flags)),
                Err(err) => err,
            }
        })
    }
}

/// `fi_send`.
pub(crate) unsafe extern "C" fn send(
    ep: *mut sys::fid_ep,
    buf: *const c_void,
    len: usize,
    desc: *mut c_void,
    dest_addr: u64,
    context: *mut c_void,
) -> isize {
    let b = AppBuf {
        addr: buf as usize,
        len,
        desc,
    };
    // SAFETY: the application's endpoint and buffer.
    unsafe {
        on_ep("fi_send", ep, |e, defaults| {
            post_send(e, &[b], dest_addr, context, None, defaults.map(|d| d.tx))
        })
    }
}

/// `fi_senddata`.
pub(crate) unsafe extern "C" fn senddata(
    ep: *mut sys::fid_ep,
    buf: *const c_void,
    len: usize,
    desc: *mut c_void,
    data: u64,
    dest_addr: u64,
    context: *mut c_void,
) -> isize {
    let b = AppBuf {
        addr: buf as usize,
        len,
        desc,
    };
    // SAFETY: the application's endpoint and buffer.
    unsafe {
        on_ep("fi_senddata", ep, |e, defaults| {
            // As core's `senddata`: the defaults with the data's flag.
            let flags = defaults.map(|d| d.tx | OpFlags::REMOTE_CQ_DATA);
            post_send(e, &[b], dest_addr, context, Some(data), flags)
        })
    }
}

/// `fi_sendv`.
pub(crate) unsafe extern "C" fn sendv(
    ep: *mut sys::fid_ep,
    iov: *const sys::iovec,
    desc: *mut *mut c_void,
    count: usize,
    dest_addr: u64,
    context: *mut c_void,
) -> isize {
    // SAFETY: the application's endpoint and `count` iovecs and descriptors.
    unsafe {
        on_ep("fi_sendv", ep, |e, defaults| {
            match bufs_of(iov, desc, count) {
                Ok(bufs) => post_send(e, &bufs, dest_addr, context, None, defaults.map(|d| d.tx)),
                Err(err) => err,
            }
        })
    }
}

/// `fi_sendmsg`: the message's flags replace the endpoint's defaults; `FI_INJECT` copies
/// through core's inject buffers; `data` is sent with `FI_REMOTE_CQ_DATA`.
pub(crate) unsafe extern "C" fn sendmsg(
    ep: *mut sys::fid_ep,
    msg: *const sys::fi_msg,
    flags: u64,
) -> isize {
    // SAFETY: the application's endpoint and message (fi_msg(3)).
    unsafe {
        on_ep("fi_sendmsg", ep, |e, _| {
            let Some(m) = msg.as_ref() else {
                return isize::neg(sys::FI_EINVAL);
            };
            let data = (flags & sys::FI_REMOTE_CQ_DATA != 0).then_some(m.data);
            let flags = Some(OpFlags::from_bits_retain(flags));
            match bufs_of(m.msg_iov, m.desc, m.iov_count) {
                Ok(bufs) => post_send(e, &bufs, m.addr, m.context, data, flags),
                Err(err) => err,
            }
        })
    }
}

/// `fi_inject`: core copies the payload; no completion for success.
pub(crate) unsafe extern "C" fn inject(
    ep: *mut sys::fid_ep,
    buf: *const c_void,
    len: usize,
    dest_addr: u64,
) -> isize {
    // SAFETY: the application's endpoint and `len` bytes at `buf` (fi_msg(3)).
    unsafe {
        on_ep("fi_inject", ep, |e, _| {
            inject_inner(e, buf, len, None, dest_addr)
        })
    }
}

/// `fi_injectdata`.
pub(crate) unsafe extern "C" fn injectdata(
    ep: *mut sys::fid_ep,
    buf: *const c_void,
    len: usize,
    data: u64,
    dest_addr: u64,
) -> isize {
    // SAFETY: as `inject`.
    unsafe {
        on_ep("fi_injectdata", ep, |e, _| {
            inject_inner(e, buf, len, Some(data), dest_addr)
        })
    }
}

/// `fi_inject` and `fi_injectdata`.
///
/// # Safety
/// `buf` null or `len` readable bytes.
unsafe fn inject_inner(
    e: &EpObj,
    buf: *const c_void,
    len: usize,
    data: Option<u64>,
    dest: u64,
) -> isize {
    if buf.is_null() && len > 0 {
        return isize::neg(sys::FI_EINVAL);
    }
    let all: &[u8] = if len == 0 {
        &[]
    } else {
        // SAFETY: the caller's promise: `len` readable bytes, copied before the call returns.
        unsafe { core::slice::from_raw_parts(buf.cast::<u8>(), len) }
    };
    let dom = e.domain().core();
    e.with_enabled(|ep, _, _| {
        // fi_getinfo(3): "Prefix buffer space must be provided with all sends and receives,
        // regardless of the size of the transfer or other transfer options."
        let skip = if e.msg_prefix(false) {
            Geometry::of(ep).size
        } else {
            0
        };
        let Some(payload) = all.get(skip..) else {
            return isize::neg(sys::FI_EINVAL);
        };
        let r = match data {
            None => ep.inject(dom, payload, FiAddr(dest)),
            Some(d) => ep.injectdata(dom, payload, d, FiAddr(dest)),
        };
        r.map_or_else(ffi::fail, |()| 0)
    })
}
