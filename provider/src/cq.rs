//! Completion queues (`fi_cq_open`, fi_cq(3)) over core's hard CQ.
//!
//! Core's CQ is opened in the richest format (tagged entries) and every entry is written in
//! the format the application asked for: the four formats are each a prefix of the next
//! (`fi_cq_entry` ⊂ `msg` ⊂ `data` ⊂ `tagged`), as core's entry types are. On the way, each
//! completion is matched with the provider's record of its operation ([`crate::ops`]): the
//! context becomes the application's, a receive's payload is copied from the endpoint's
//! buffer into the application's (a payload longer than the application's buffer becomes an
//! `FI_ETRUNC` error entry with `olen`, fi_cq(3)), and the endpoint's buffer goes back to it.
//!
//! Entries the provider makes itself (truncations) wait in a small queue of the CQ's own, in
//! order with core's: `fi_cq_read` returns the successes before an error, then
//! `-FI_EAVAIL` until `fi_cq_readerr` takes it, as core does for its own errors.
//!
//! The success of an operation posted without `FI_COMPLETION` under selective completion
//! gives its buffer back and makes no entry ([`crate::ep`], "Selective completion").
//!
//! Wait objects are core's: `FI_WAIT_NONE`, `FI_WAIT_UNSPEC`, `FI_WAIT_YIELD`, and
//! `FI_WAIT_FD`, whose descriptor `fi_control(FI_GETWAIT)` gives (the emulated NIC's
//! interrupt eventfd), with `fi_trywait` before blocking on it; and `FI_WAIT_SET`, in a wait
//! set of [`crate::waitset`]'s.

use core::ffi::{c_char, c_int, c_void};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};
use std::time::Duration;

use ringfab::av::FiAddr;
use ringfab::cq::{CompletionQueue, CqAttr, CqControl, CqFormat, ErrEntry, TaggedEntry, WaitCond};
use ringfab::entry::{BufAddr, OpContext, Tagged};
use ringfab::errdata::{ErrDataOut, ERR_DATA_MAX};
use ringfab::flags::{CompletionFlags, CqFlags};
use ringfab::hal::RawWait;
use ringfab::mr::Buf;
use ringfab::{Error, WaitObj};

use crate::domain::DomainObj;
use crate::ep::Shared;
use crate::ffi::{self, errno, Ret};
use crate::fid::{self, Ops};
use crate::multi::Multi;
use crate::nosys;
use crate::ops;
use crate::rxpool::{Arrival, Arrived, Waiting};
use crate::sys;
use crate::table::ProvNic;
use crate::waitset::WaitSetObj;

/// Completions read from core at once.
const BATCH: usize = 64;

/// A completion queue as the provider allocates it.
#[repr(C)]
pub(crate) struct CqObj {
    fid: sys::fid_cq,
    pub(crate) domain: &'static DomainObj,
    /// The application's format.
    format: CqFormat,
    /// Core's CQ: shared by reads, blocking reads and signals; taken alone by `readerr` and
    /// `fi_control`, which core serializes so.
    core: RwLock<Option<CompletionQueue<ProvNic, Tagged>>>,
    /// Entries translated and waiting for the application, in order (see the module
    /// documentation).
    ready: Mutex<VecDeque<Ready>>,
    /// Where `err_data` of the last `fi_cq_readerr` points, when the application gave no
    /// buffer; and what `fi_cq_strerror` writes without one.
    err_buf: Mutex<[u8; ERR_DATA_MAX]>,
    str_buf: Mutex<[u8; 256]>,
    /// The wait set it was opened in (`FI_WAIT_SET`), which it leaves when it closes.
    wait_set: Option<&'static WaitSetObj>,
    /// Plain-UDP endpoints bound to it ([`crate::ep`]), each progressed in both directions
    /// by every read: address resolution crosses directions — the ARP reply a held send
    /// waits for arrives on the receive queue, and the reply to a peer's request leaves on
    /// the transmit queue — while an application with a CQ per direction (`fi_pingpong`)
    /// reads only the one its next completion is due on.
    plain_udp: Mutex<Vec<&'static crate::ep::EpObj>>,
    /// `fi_cq_signal`s of the application, and how many of them a blocking read has returned
    /// for: core's wait also ends for the entries the provider queues outside a read
    /// ([`deliver`](CqObj::deliver)), which are not the application's signal.
    app_signals: AtomicU64,
    app_signals_seen: AtomicU64,
}

/// A translated entry.
pub(crate) enum Ready {
    Ok(TaggedEntry, FiAddr),
    Err(ErrEntry, Vec<u8>),
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Plain values: consistent whatever panicked while they were held.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

static FI_OPS: Ops<sys::fi_ops> = Ops(sys::fi_ops {
    size: core::mem::size_of::<sys::fi_ops>(),
    close: Some(close),
    bind: Some(nosys::bind),
    control: Some(control),
    ops_open: Some(nosys::ops_open),
    tostr: Some(nosys::tostr),
    ops_set: Some(nosys::ops_set),
});

static CQ_OPS: Ops<sys::fi_ops_cq> = Ops(sys::fi_ops_cq {
    size: core::mem::size_of::<sys::fi_ops_cq>(),
    read: Some(read),
    readfrom: Some(readfrom),
    readerr: Some(readerr),
    sread: Some(sread),
    sreadfrom: Some(sreadfrom),
    signal: Some(signal),
    strerror: Some(strerror),
});

/// The CQ `fid` is, if it is one of this provider's.
///
/// # Safety
/// `fid` is null or points to a `struct fid`.
pub(crate) unsafe fn ours<'a>(fid: *const sys::fid) -> Option<&'a CqObj> {
    // SAFETY: null or a valid fid; CQs of this class and table are `CqObj`s, alive until
    // fi_close.
    unsafe { fid::ours(fid, sys::FI_CLASS_CQ, &FI_OPS) }
}

/// The size of one entry of `format` in the application's buffer.
fn entry_size(format: CqFormat) -> usize {
    use core::mem::size_of;
    match format {
        CqFormat::Context | CqFormat::Unspec => size_of::<ringfab::cq::ContextEntry>(),
        CqFormat::Msg => size_of::<ringfab::cq::MsgEntry>(),
        CqFormat::Data => size_of::<ringfab::cq::DataEntry>(),
        CqFormat::Tagged => size_of::<TaggedEntry>(),
    }
}

/// `fi_ops_domain::cq_open` (`fi_cq_open`).
pub(crate) unsafe extern "C" fn open(
    domain: *mut sys::fid_domain,
    attr: *mut sys::fi_cq_attr,
    cq: *mut *mut sys::fid_cq,
    context: *mut c_void,
) -> c_int {
    ffi::guard("fi_cq_open", || {
        // SAFETY: the application's domain fid, checked to be one of ours.
        let Some(d) = (unsafe { crate::domain::ours(domain.cast()) }) else {
            return errno::INVAL;
        };
        // SAFETY: null or the application's attributes.
        let Some(a) = (unsafe { attr.as_ref() }) else {
            return errno::INVAL;
        };
        if cq.is_null() {
            return errno::INVAL;
        }
        let format = match CqFormat::from_raw(a.format) {
            Ok(f) => f.resolve(),
            Err(e) => return ffi::fail(e),
        };
        let (wait_obj, wait_cond) = match (
            WaitObj::from_raw(a.wait_obj),
            WaitCond::from_raw(a.wait_cond),
        ) {
            (Ok(w), Ok(c)) => (w, c),
            (Err(e), _) | (_, Err(e)) => return ffi::fail(e),
        };
        // fi_cq(3): "If specified, the wait_set field must reference an existing wait set
        // object."
        let wait_set = if wait_obj == WaitObj::Set {
            // SAFETY: the application's wait set fid, checked to be one of ours.
            match unsafe { crate::waitset::ours(a.wait_set.cast()) } {
                Some(w) => Some(w),
                None => return errno::INVAL,
            }
        } else {
            None
        };
        let attr = CqAttr {
            size: a.size,
            flags: CqFlags::from_bits_retain(a.flags),
            format: CqFormat::Unspec,
            wait_obj,
            signaling_vector: a.signaling_vector,
            wait_cond,
            wait_set: None,
        };
        let opened = match wait_set {
            Some(w) => w.open_cq(d, &attr),
            None => d.core().open_cq::<Tagged>(&attr).map_err(ffi::fail),
        };
        let core = match opened {
            Ok(cq) => cq,
            Err(e) => return e,
        };
        let obj = Box::new(CqObj {
            fid: sys::fid_cq {
                fid: fid::new(sys::FI_CLASS_CQ, context, &FI_OPS),
                ops: CQ_OPS.ptr(),
            },
            domain: d.retain(),
            format,
            core: RwLock::new(Some(core)),
            ready: Mutex::new(VecDeque::new()),
            err_buf: Mutex::new([0; ERR_DATA_MAX]),
            str_buf: Mutex::new([0; 256]),
            wait_set,
            plain_udp: Mutex::new(Vec::new()),
            app_signals: AtomicU64::new(0),
            app_signals_seen: AtomicU64::new(0),
        });
        let obj: &'static CqObj = Box::leak(obj);
        if let Some(w) = wait_set {
            w.join(obj);
        }
        // SAFETY: checked not null; the CQ is the caller's until fi_close (which frees the
        // leaked box).
        unsafe { *cq = (obj as *const CqObj).cast_mut().cast() };
        0
    })
}

/// `fi_ops::close` of a CQ: `-FI_EBUSY` while an endpoint is bound to it.
unsafe extern "C" fn close(fid: *mut sys::fid) -> c_int {
    ffi::guard("fi_close(cq)", || {
        // SAFETY: libfabric passes the fid it was given, or null.
        let Some(c) = (unsafe { ours(fid) }) else {
            return errno::INVAL;
        };
        let mut guard = c.core.write().unwrap_or_else(PoisonError::into_inner);
        if let Some(core) = guard.take() {
            if let Err((e, back)) = core.close(c.domain.core()) {
                *guard = Some(back);
                return ffi::fail(e);
            }
        }
        drop(guard);
        // Entries read from core and not taken: their records are gone already.
        lock(&c.ready).clear();
        if let Some(w) = c.wait_set {
            w.leave(c);
        }
        let domain = c.domain;
        // SAFETY: made by Box::into_raw in `open`, closed once.
        unsafe { fid::free(c) };
        domain.release();
        0
    })
}

/// `fi_ops::control` of a CQ: `FI_GETWAIT` gives the wait object's descriptor (an `int`) of
/// an `FI_WAIT_FD` CQ (fi_cq(3), fi_control(3)).
unsafe extern "C" fn control(fid: *mut sys::fid, command: c_int, arg: *mut c_void) -> c_int {
    ffi::guard("fi_control(cq)", || {
        // SAFETY: libfabric passes the fid it was given, or null.
        let Some(c) = (unsafe { ours(fid) }) else {
            return errno::INVAL;
        };
        if command != sys::FI_GETWAIT as c_int {
            return errno::NOSYS;
        }
        if arg.is_null() {
            return errno::INVAL;
        }
        let mut guard = c.core.write().unwrap_or_else(PoisonError::into_inner);
        let Some(core) = guard.as_mut() else {
            return errno::INVAL;
        };
        match core.control(CqControl::GetWait) {
            Ok(RawWait::Fd(fd)) => {
                // SAFETY: fi_control(3): FI_GETWAIT on an FI_WAIT_FD CQ takes an `int *`.
                unsafe { *arg.cast::<c_int>() = fd };
                0
            }
            Ok(_) => errno::NOSYS,
            Err(e) => ffi::fail(e),
        }
    })
}

impl CqObj {
    /// A plain-UDP endpoint is bound to the CQ (for either direction).
    pub(crate) fn add_plain_udp(&self, ep: &'static crate::ep::EpObj) {
        let mut eps = lock(&self.plain_udp);
        if !eps.iter().any(|e| core::ptr::eq(*e, ep)) {
            eps.push(ep);
        }
    }

    /// `ep` is closing.
    pub(crate) fn remove_plain_udp(&self, ep: &crate::ep::EpObj) {
        lock(&self.plain_udp).retain(|e| !core::ptr::eq(*e, ep));
    }

    /// Core's progress of the plain-UDP endpoints bound here, both directions (see
    /// `plain_udp`), and their receive pools' buffers back on the ring ([`crate::rxpool`]).
    /// Their completions go to their CQs' core queues; none is translated here,
    /// so no other CQ's lock is taken. The list stays locked meanwhile, so that an endpoint's
    /// `fi_close`, which takes itself off the list first, waits for this to finish with it;
    /// nothing takes the list's lock while holding an endpoint's.
    fn progress_plain_udp(&self) {
        let eps = lock(&self.plain_udp);
        for ep in eps.iter() {
            ep.progress_plain_udp();
        }
    }

    /// Runs `f` on core's CQ (`-FI_EINVAL` if it is closed).
    pub(crate) fn with_core<R>(
        &self,
        f: impl FnOnce(&CompletionQueue<ProvNic, Tagged>) -> R,
    ) -> Result<R, c_int> {
        let guard = self.core.read().unwrap_or_else(PoisonError::into_inner);
        guard.as_ref().map(f).ok_or(errno::INVAL)
    }

    /// Moves up to `want` completions from core into `ready`, translated. `Ok(n)` read, or
    /// core's error (`Again`, `Avail`, `Overrun`, …).
    fn pull(&self, ready: &mut VecDeque<Ready>, want: usize) -> Result<usize, Error> {
        let guard = self.core.read().unwrap_or_else(PoisonError::into_inner);
        let core = guard.as_ref().ok_or(Error::OpBadState)?;
        let dom = self.domain.core();
        let want = want.clamp(1, BATCH);
        let mut entries = [TaggedEntry::default(); BATCH];
        let mut src = [FiAddr::NOTAVAIL; BATCH];
        let mut bufs: [Option<Buf<'static>>; BATCH] = [const { None }; BATCH];
        let n = core.read_owned(
            dom,
            &mut entries[..want],
            &mut src[..want],
            &mut bufs[..want],
        )?;
        for ((e, s), b) in entries.iter().zip(src).zip(bufs.iter_mut()).take(n) {
            ready.extend(translate(*e, s, b.take()));
        }
        Ok(n)
    }

    /// `fi_trywait` of this CQ: `Ok` if nothing is waiting to be read (neither here nor in
    /// core), with the interrupts armed so that the next completion makes the wait object
    /// signal; `-FI_EAGAIN` otherwise (fi_poll(3)).
    pub(crate) fn trywait(&self) -> c_int {
        let ready = lock(&self.ready);
        if !ready.is_empty() {
            return ffi::neg(sys::FI_EAGAIN);
        }
        let guard = self.core.read().unwrap_or_else(PoisonError::into_inner);
        match guard.as_ref().map(|core| core.trywait(self.domain.core())) {
            Some(Ok(())) => 0,
            Some(Err(e)) => ffi::fail(e),
            None => errno::INVAL,
        }
    }

    /// Takes the error at the head of core's queue into `ready`, translated (the provider's
    /// record taken, the buffer given back), or drops it if it is one the application does
    /// not see ([`crate::multi`]).
    fn take_core_err(&self, ready: &mut VecDeque<Ready>) -> Result<(), Error> {
        let mut guard = self.core.write().unwrap_or_else(PoisonError::into_inner);
        let core = guard.as_mut().ok_or(Error::OpBadState)?;
        let mut e = ErrEntry::default();
        let (data, buf) = match core.readerr_owned(self.domain.core(), &mut e, None, 0)? {
            (ErrDataOut::Provider(d), b) => (d.to_vec(), b),
            (ErrDataOut::Copied(_), b) => (Vec::new(), b),
        };
        drop(guard);
        let Some(rec) = ops::take(e.op_context) else {
            ready.push_back(Ready::Err(e, data));
            return Ok(());
        };
        if rec.pooled {
            // A buffer of a receive pool: cancelled (the endpoint's queue flushed) it holds
            // nothing; otherwise its datagram is the application's (crate::rxpool).
            if e.err == Error::Canceled.errno() {
                if let Some(b) = buf {
                    rec.shared.give_back(b, true);
                }
            } else {
                ready.extend(pool_arrival(
                    &rec.shared,
                    rec.ep,
                    Arrival::Err(e, data, buf),
                ));
            }
            return Ok(());
        }
        ready.extend(translate_err(rec, e, data, buf));
        Ok(())
    }

    /// Whether an `fi_cq_signal` of the application's came that no blocking read has returned
    /// for yet (then one returns: a signal that finds nobody blocked is kept, as core's is).
    fn take_app_signal(&self) -> bool {
        let now = self.app_signals.load(Ordering::Acquire);
        self.app_signals_seen.swap(now, Ordering::AcqRel) != now
    }

    /// An entry the provider made outside a read of the CQ — a receive of a plain-UDP
    /// endpoint that `fi_recv` matched with a held datagram, or that `fi_cancel` took back
    /// ([`crate::rxpool`]) — queued behind the entries translated already; a thread blocked
    /// on the CQ, or on its wait object, is woken (core's signal, which a blocking read
    /// here tells from the application's).
    pub(crate) fn deliver(&self, r: Ready) {
        lock(&self.ready).push_back(r);
        let guard = self.core.read().unwrap_or_else(PoisonError::into_inner);
        if let Some(core) = guard.as_ref() {
            // `NoSys` without a wait object: nobody can be blocked.
            let _ = core.signal(self.domain.core());
        }
    }

    /// Whether translated entries wait to be read.
    pub(crate) fn has_ready(&self) -> bool {
        !lock(&self.ready).is_empty()
    }

    /// Takes everything core has completed into `ready` (translated: buffers back to their
    /// endpoints, silent successes settled), for an endpoint's progress
    /// ([`EpObj::progress`](crate::ep::EpObj::progress)). Errors are taken in order too, and
    /// wait in `ready` for `fi_cq_readerr`.
    pub(crate) fn progress(&self) {
        let mut ready = lock(&self.ready);
        loop {
            match self.pull(&mut ready, BATCH) {
                Ok(1..) => {}
                // An error at the head of core's queue: taken, in order, and on.
                Err(Error::Avail) if self.take_core_err(&mut ready).is_ok() => {}
                _ => break,
            }
        }
    }

    /// Writes up to `count` ready entries into `buf` (and their sources into `src`, if not
    /// null): the number written, or the negated error.
    ///
    /// # Safety
    /// `buf` holds `count` entries of the CQ's format; `src` null or `count` long.
    unsafe fn read_into(&self, buf: *mut c_void, count: usize, src: *mut u64) -> isize {
        if buf.is_null() && count > 0 {
            return isize::neg(sys::FI_EINVAL);
        }
        self.progress_plain_udp();
        let size = entry_size(self.format);
        let mut ready = lock(&self.ready);
        let mut n = 0;
        let mut core_err = None;
        while n < count {
            match ready.front() {
                Some(Ready::Ok(e, s)) => {
                    // SAFETY: entry `n` < `count` of the caller's buffer; the formats are
                    // prefixes of the tagged entry (module documentation).
                    unsafe {
                        core::ptr::copy_nonoverlapping(
                            (e as *const TaggedEntry).cast::<u8>(),
                            buf.cast::<u8>().add(n * size),
                            size,
                        );
                        if !src.is_null() {
                            *src.add(n) = s.0;
                        }
                    }
                    ready.pop_front();
                    n += 1;
                }
                Some(Ready::Err(..)) => break,
                None => match self.pull(&mut ready, count - n) {
                    Ok(0) => break,
                    Ok(_) => {}
                    // An error of core's at the head: taken into `ready`, in order, unless it
                    // is one the application does not see (then the read goes on).
                    Err(Error::Avail) if n == 0 => {
                        if let Err(e) = self.take_core_err(&mut ready) {
                            core_err = Some(e);
                            break;
                        }
                    }
                    Err(e) => {
                        core_err = Some(e);
                        break;
                    }
                },
            }
        }
        if n > 0 {
            return n as isize;
        }
        if matches!(ready.front(), Some(Ready::Err(..))) {
            return isize::neg(sys::FI_EAVAIL as i32);
        }
        match core_err {
            Some(e) => ffi::fail(e),
            None => isize::neg(sys::FI_EAGAIN),
        }
    }

    /// `fi_cq_sread`: waits up to `timeout` ms (negative: for ever) for entries.
    ///
    /// # Safety
    /// As [`read_into`](Self::read_into).
    unsafe fn sread_into(
        &self,
        buf: *mut c_void,
        count: usize,
        src: *mut u64,
        timeout: c_int,
    ) -> isize {
        let clock = crate::clock::CallClock::start();
        let deadline = u64::try_from(timeout).ok().map(Duration::from_millis);
        loop {
            // SAFETY: the caller's promise.
            let r = unsafe { self.read_into(buf, count, src) };
            if r != isize::neg(sys::FI_EAGAIN) {
                return r;
            }
            let left = match deadline {
                None => None,
                Some(d) => match d.checked_sub(ringfab::Clock::now(&clock)) {
                    Some(left) if !left.is_zero() => Some(left),
                    _ => return r,
                },
            };
            let guard = self.core.read().unwrap_or_else(PoisonError::into_inner);
            let Some(core) = guard.as_ref() else {
                return isize::neg(sys::FI_EINVAL);
            };
            // An empty output: core waits until something is queued (fi_cq(3)'s sread), and
            // the loop reads it above.
            match core.sread(self.domain.core(), &mut [], None, left, &clock) {
                Ok(_) => {}
                // Timed out (the deadline check above returns), signalled by the application
                // (return), or woken for an entry the provider queued (read above).
                Err(Error::Again) if self.take_app_signal() => return isize::neg(sys::FI_EAGAIN),
                Err(Error::Again) => {}
                Err(Error::Avail) => {}
                Err(e) => return ffi::fail(e),
            }
        }
    }
}

/// One completion of core's, as the application sees it: the provider's record taken, the
/// payload copied, the endpoint's buffer given back. `None` for the success of an operation
/// posted without `FI_COMPLETION` under selective completion ([`crate::ep::Selective`]).
fn translate(e: TaggedEntry, src: FiAddr, buf: Option<Buf<'static>>) -> Option<Ready> {
    let Some(rec) = ops::take(e.op_context) else {
        // A completion of no operation of the application's (core's own context for an
        // endpoint: the application's fi_endpoint context), or of an endpoint now closed.
        return Some(Ready::Ok(e, src));
    };
    if rec.pooled {
        return pool_arrival(&rec.shared, rec.ep, Arrival::Ok(e, src, buf));
    }
    if let Some(m) = rec.multi.clone() {
        return translate_multi(e, src, buf, &rec, &m);
    }
    translate_record(rec, e, src, buf)
}

/// A success of core's for the operation whose record is `rec` (not a multi-receive slot's).
fn translate_record(
    rec: ops::Record,
    e: TaggedEntry,
    src: FiAddr,
    buf: Option<Buf<'static>>,
) -> Option<Ready> {
    let mut out = TaggedEntry {
        op_context: OpContext(rec.context),
        ..e
    };
    let is_recv = e.flags.contains(CompletionFlags::RECV);
    let mut result = None;
    // In prefix mode `recv` is the payload's part of the application's buffer, which starts
    // `prefix` bytes before it.
    let prefix = prefix_of(&rec);
    if let (Some((app, app_len)), Some(_)) = (rec.recv, buf.as_ref()) {
        let n = e.len.min(app_len);
        if place_payload(&rec, buf.as_ref(), n).is_none() {
            out.len = 0;
        }
        out.buf = BufAddr(app - prefix);
        if e.len > app_len {
            // fi_cq(3): a message longer than the buffer completes in error, FI_ETRUNC, with
            // the bytes that did not fit in `olen`.
            if let Some(c) = rec.shared.rx_cntr {
                crate::cntr::recount_truncated(c, e.len);
            }
            let err = ErrEntry {
                op_context: out.op_context,
                flags: out.flags,
                len: app_len + prefix,
                buf: out.buf,
                data: out.data,
                olen: e.len - app_len,
                err: Error::Trunc.errno(),
                src_addr: src.0,
                ..ErrEntry::default()
            };
            result = Some(Ready::Err(err, Vec::new()));
        } else {
            // fi_cq(3): "If an endpoint has been configured with the FI_MSG_PREFIX mode, the
            // len also reflects the size of the prefix buffer."
            out.len = n + prefix;
        }
    } else if !is_recv {
        out.buf = BufAddr::NULL;
    }
    let mut rec = rec;
    settle(&mut rec, buf, is_recv);
    match result {
        Some(err) => Some(err),
        None if rec.silent => None,
        None => Some(Ready::Ok(out, src)),
    }
}

/// An error of core's for an operation of the application's (its record `rec`), as the
/// application sees it: the context and buffer the application's, a datagram's payload
/// placed, the endpoint's buffer given back. `None` for one the application does not see
/// (a slot of a multi-receive buffer, [`crate::multi`]).
fn translate_err(
    mut rec: ops::Record,
    e: ErrEntry,
    data: Vec<u8>,
    buf: Option<Buf<'static>>,
) -> Option<Ready> {
    // fi_cq(3), FI_EADDRNOTAVAIL: "the data transfer was successfully received and
    // processed": the payload is placed as a success's is, and `len` counts it (and the
    // prefix, in prefix mode).
    let mut len = e.len;
    if e.err == Error::AddrNotAvail.errno() && rec.multi.is_none() {
        if let Some((_, app_len)) = rec.recv {
            let placed = place_payload(&rec, buf.as_ref(), e.len.min(app_len));
            len = placed.map_or(0, |n| n + prefix_of(&rec));
        }
    }
    settle(&mut rec, buf, e.flags.contains(CompletionFlags::RECV));
    let mut out = ErrEntry {
        op_context: OpContext(rec.context),
        len,
        buf: rec
            .recv
            .map_or(BufAddr::NULL, |(a, _)| BufAddr(a - prefix_of(&rec))),
        ..e
    };
    if let Some(m) = &rec.multi {
        let (report, release) = m.failed(e.op_context);
        if !report {
            return None;
        }
        out.buf = BufAddr(m.app);
        if release {
            out.flags |= CompletionFlags::MULTI_RECV;
        }
    }
    Some(Ready::Err(out, data))
}

/// A datagram core completed into a buffer of the receive pool of endpoint `ep`
/// ([`crate::rxpool`]): matched with the oldest receive waiting, or held.
fn pool_arrival(shared: &Arc<Shared>, ep: u64, a: Arrival) -> Option<Ready> {
    let pool = shared.pool.as_ref()?;
    match pool.arrive(a) {
        Arrived::Matched(w, a) => matched(shared, ep, w, a),
        Arrived::Held => None,
        Arrived::Full(mut a) => {
            // Unreachable while each held datagram holds one of the pool's buffers; should
            // it come, the datagram is dropped as the NIC drops one that finds no buffer.
            if let Some(b) = a.take_buf() {
                shared.give_back(b, true);
            }
            None
        }
    }
}

/// The entry of receive `w` of endpoint `ep`, which datagram `a` completes: the payload
/// copied behind the prefix (in prefix mode), truncation and `FI_SOURCE_ERR` as for any
/// receive; counted on the endpoint's receive counter.
pub(crate) fn matched(shared: &Arc<Shared>, ep: u64, w: Waiting, a: Arrival) -> Option<Ready> {
    let rec = ops::Record {
        ep,
        context: w.context,
        recv: Some(w.recv),
        silent: w.silent,
        shared: shared.clone(),
        multi: None,
        prefix: (w.prefix > 0).then_some(ops::PrefixOp {
            size: w.prefix,
            in_place: false,
            lease: None,
        }),
        pooled: false,
    };
    let (r, len) = match a {
        Arrival::Ok(e, src, buf) => (translate_record(rec, e, src, buf), e.len),
        Arrival::Err(e, data, buf) => (translate_err(rec, e, data, buf), e.len),
    };
    if let Some(pool) = shared.pool.as_ref() {
        pool.count(!matches!(r, Some(Ready::Err(..))), len);
    }
    r
}

/// The error entry of receive `w`, which `fi_cancel` took back before a datagram came
/// (fi_endpoint(3), fi_cancel: "An error queue entry will be available in the the
/// associated error queue with error code FI_ECANCELED"); counted as an error.
pub(crate) fn cancelled(shared: &Shared, w: Waiting) -> Ready {
    if let Some(pool) = shared.pool.as_ref() {
        pool.count(false, 0);
    }
    Ready::Err(
        ErrEntry {
            op_context: OpContext(w.context),
            flags: CompletionFlags::MSG | CompletionFlags::RECV,
            buf: BufAddr(w.recv.0 - w.prefix),
            err: Error::Canceled.errno(),
            ..ErrEntry::default()
        },
        Vec::new(),
    )
}

/// Places the first `n` bytes of a received payload (`n` at most the application's buffer)
/// from the endpoint's buffer `buf` into the application's receive buffer, unless the NIC
/// wrote it there already (prefix mode, in place): `n`, or `None` if the buffer could not be
/// read.
fn place_payload(rec: &ops::Record, buf: Option<&Buf<'static>>, n: usize) -> Option<usize> {
    let in_place = rec.prefix.as_ref().is_some_and(|p| p.in_place);
    let (Some((app, app_len)), Some(b)) = (rec.recv, buf) else {
        return Some(0);
    };
    if n == 0 || in_place {
        return Some(n);
    }
    let n = n.min(app_len);
    // SAFETY: fi_msg(3): the application's receive buffer holds `app_len` bytes and is the
    // provider's until this completion is reported; `n` <= `app_len`.
    let dst = unsafe { core::slice::from_raw_parts_mut(app as *mut u8, n) };
    b.read(rec.shared.payload_offset, dst).ok().map(|()| n)
}

/// `msg_prefix_size` of the record's endpoint in prefix mode, else 0.
fn prefix_of(rec: &ops::Record) -> usize {
    rec.prefix.as_ref().map_or(0, |p| p.size)
}

/// Where the buffer core handed back with an operation's completion goes: back to the
/// endpoint, or — lent from the application's registration (prefix mode) — dropped, back to
/// the registration, before the record's lease goes. A lent buffer core kept (a fault whose
/// flush the device did not acknowledge) keeps its lease until the endpoint closes
/// ([`ops::strand`]), so that no other operation is lent its bytes meanwhile.
fn settle(rec: &mut ops::Record, buf: Option<Buf<'static>>, recv: bool) {
    match (rec.prefix.as_mut().filter(|p| p.in_place), buf) {
        (Some(_), Some(b)) => drop(b),
        (Some(p), None) => {
            if let Some(lease) = p.lease.take() {
                ops::strand(rec.ep, lease);
            }
        }
        (None, Some(b)) => rec.shared.give_back(b, recv),
        (None, None) => {}
    }
}

/// A slot of a multi-receive buffer completed ([`crate::multi`]): its payload placed in the
/// application's buffer, the entry pointing there; `FI_MULTI_RECV` on the one that releases
/// the buffer.
fn translate_multi(
    e: TaggedEntry,
    src: FiAddr,
    buf: Option<Buf<'static>>,
    rec: &ops::Record,
    m: &std::sync::Arc<Multi>,
) -> Option<Ready> {
    let off = rec.shared.payload_offset;
    let placed = match buf.as_ref() {
        Some(b) => m.place(e.op_context, b, off, e.len),
        None => m.place_nothing(e.op_context),
    };
    if let Some(b) = buf {
        rec.shared.give_back(b, true);
    }
    let mut flags = e.flags;
    if placed.release {
        flags |= CompletionFlags::MULTI_RECV;
    }
    let out = TaggedEntry {
        op_context: OpContext(m.context),
        flags,
        len: placed.len,
        buf: BufAddr(placed.buf),
        ..e
    };
    if placed.olen > 0 {
        // fi_cq(3): FI_ETRUNC, with the bytes that did not fit in `olen`.
        if let Some(c) = rec.shared.rx_cntr {
            crate::cntr::recount_truncated(c, e.len);
        }
        let err = ErrEntry {
            op_context: out.op_context,
            flags,
            len: placed.len,
            buf: out.buf,
            data: out.data,
            olen: placed.olen,
            err: Error::Trunc.errno(),
            src_addr: src.0,
            ..ErrEntry::default()
        };
        return Some(Ready::Err(err, Vec::new()));
    }
    if m.silent && !placed.release {
        return None;
    }
    Some(Ready::Ok(out, src))
}

/// The CQ of an `fid_cq` from the application, as `isize`'s error if it is not one of ours.
///
/// # Safety
/// `cq` null or a `struct fid_cq`.
unsafe fn cq_of<'a>(cq: *mut sys::fid_cq) -> Result<&'a CqObj, isize> {
    // SAFETY: the caller's promise.
    unsafe { ours(cq.cast()) }.ok_or(isize::neg(sys::FI_EINVAL))
}

/// `fi_cq_read`.
unsafe extern "C" fn read(cq: *mut sys::fid_cq, buf: *mut c_void, count: usize) -> isize {
    ffi::guard("fi_cq_read", || {
        // SAFETY: the application's CQ and buffer of `count` entries (fi_cq(3)).
        unsafe { cq_of(cq).map_or_else(|e| e, |c| c.read_into(buf, count, core::ptr::null_mut())) }
    })
}

/// `fi_cq_readfrom`.
unsafe extern "C" fn readfrom(
    cq: *mut sys::fid_cq,
    buf: *mut c_void,
    count: usize,
    src_addr: *mut u64,
) -> isize {
    ffi::guard("fi_cq_readfrom", || {
        // SAFETY: the application's CQ, buffer and source array of `count` entries.
        unsafe { cq_of(cq).map_or_else(|e| e, |c| c.read_into(buf, count, src_addr)) }
    })
}

/// `fi_cq_sread`.
unsafe extern "C" fn sread(
    cq: *mut sys::fid_cq,
    buf: *mut c_void,
    count: usize,
    _cond: *const c_void,
    timeout: c_int,
) -> isize {
    ffi::guard("fi_cq_sread", || {
        // SAFETY: as `read`; the threshold is a hint (fi_cq(3)) and one entry is enough.
        unsafe {
            cq_of(cq).map_or_else(
                |e| e,
                |c| c.sread_into(buf, count, core::ptr::null_mut(), timeout),
            )
        }
    })
}

/// `fi_cq_sreadfrom`.
unsafe extern "C" fn sreadfrom(
    cq: *mut sys::fid_cq,
    buf: *mut c_void,
    count: usize,
    src_addr: *mut u64,
    _cond: *const c_void,
    timeout: c_int,
) -> isize {
    ffi::guard("fi_cq_sreadfrom", || {
        // SAFETY: as `readfrom`.
        unsafe { cq_of(cq).map_or_else(|e| e, |c| c.sread_into(buf, count, src_addr, timeout)) }
    })
}

/// `fi_cq_readerr`: the error entry at the head, written in the layout of the application's
/// API version; 1 on success.
unsafe extern "C" fn readerr(
    cq: *mut sys::fid_cq,
    buf: *mut sys::fi_cq_err_entry,
    flags: u64,
) -> isize {
    ffi::guard("fi_cq_readerr", || {
        // SAFETY: the application's CQ.
        let c = match unsafe { cq_of(cq) } {
            Ok(c) => c,
            Err(e) => return e,
        };
        if buf.is_null() {
            return isize::neg(sys::FI_EINVAL);
        }
        if flags != 0 {
            return isize::neg(sys::FI_EBADFLAGS as i32);
        }
        let mut ready = lock(&c.ready);
        let (entry, data) = match ready.front() {
            Some(Ready::Ok(..)) => return isize::neg(sys::FI_EAGAIN),
            Some(Ready::Err(..)) => match ready.pop_front() {
                Some(Ready::Err(e, d)) => (e, d),
                _ => return isize::neg(sys::FI_EAGAIN),
            },
            None => {
                if let Err(err) = c.take_core_err(&mut ready) {
                    return ffi::fail(err);
                }
                match ready.pop_front() {
                    Some(Ready::Err(e, d)) => (e, d),
                    // The error belonged to nothing the application sees (a cancelled slot of
                    // a multi-receive buffer before its last).
                    Some(other) => {
                        ready.push_front(other);
                        return isize::neg(sys::FI_EAGAIN);
                    }
                    None => return isize::neg(sys::FI_EAGAIN),
                }
            }
        };
        drop(ready);
        let mut cq_buf = lock(&c.err_buf);
        // SAFETY: fi_cq(3): `buf` is an fi_cq_err_entry of the application's API version
        // (`abi`), with its err_data/err_data_size as the application set them; the CQ's own
        // buffer stays until the next readerr (the mutex's memory is the CQ's, which lives
        // until fi_close).
        unsafe {
            ringfab::cq::write_err_entry_raw(buf.cast(), c.domain.abi, &entry, &data, &mut cq_buf)
        };
        1
    })
}

/// `fi_cq_signal`: wakes a thread blocked in `fi_cq_sread`.
unsafe extern "C" fn signal(cq: *mut sys::fid_cq) -> c_int {
    ffi::guard("fi_cq_signal", || {
        // SAFETY: the application's CQ.
        let Some(c) = (unsafe { ours(cq.cast()) }) else {
            return errno::INVAL;
        };
        let guard = c.core.read().unwrap_or_else(PoisonError::into_inner);
        if guard
            .as_ref()
            .is_some_and(|core| core.attr().signal_allowed())
        {
            c.app_signals.fetch_add(1, Ordering::AcqRel);
        }
        match guard.as_ref().map(|core| core.signal(c.domain.core())) {
            Some(Ok(())) => 0,
            Some(Err(e)) => ffi::fail(e),
            None => errno::INVAL,
        }
    })
}

/// `fi_cq_strerror`: core's description of `prov_errno` and the error data (which is read
/// only when it is the CQ's own buffer, whose size the provider knows).
unsafe extern "C" fn strerror(
    cq: *mut sys::fid_cq,
    prov_errno: c_int,
    err_data: *const c_void,
    buf: *mut c_char,
    len: usize,
) -> *const c_char {
    let mut out: *const c_char = c"(not a ringfab completion queue)".as_ptr();
    let _: c_int = ffi::guard("fi_cq_strerror", || {
        // SAFETY: the application's CQ.
        let Some(c) = (unsafe { ours(cq.cast()) }) else {
            return errno::INVAL;
        };
        let own = lock(&c.err_buf);
        let data: &[u8] = if core::ptr::eq(err_data.cast::<u8>(), own.as_ptr()) {
            &own[..]
        } else {
            &[]
        };
        let mut text = String::new();
        let guard = c.core.read().unwrap_or_else(PoisonError::into_inner);
        if let Some(core) = guard.as_ref() {
            let _ = core.strerror(c.domain.core(), None, prov_errno, data, &mut text);
        }
        let (dst, room) = if buf.is_null() || len == 0 {
            let mut s = lock(&c.str_buf);
            (s.as_mut_ptr().cast::<c_char>(), s.len())
        } else {
            (buf, len)
        };
        let n = text.len().min(room - 1);
        // SAFETY: `dst` holds `room` bytes (the caller's buffer, or the CQ's own, which lives
        // until fi_close); `n + 1` <= `room`.
        unsafe {
            core::ptr::copy_nonoverlapping(text.as_ptr(), dst.cast::<u8>(), n);
            *dst.add(n) = 0;
        }
        out = dst;
        0
    });
    out
}
