//! Blocking on completion queues: [`CompletionQueue::sread`], [`CompletionQueue::signal`],
//! [`CompletionQueue::control`] (`FI_GETWAIT`), and [`WaitSet`]s.
//!
//! # One vector per CQ
//!
//! A CQ that blocks on an interrupt holds one MSI-X vector of the NIC for itself, and its wait
//! handle is that vector's ([`Nic::irq`]). Every queue bound to it must be opened steered to that
//! vector (`RxConfig::with_vector(cq.interrupt_vector()…)`), which
//! [`bind`](CompletionQueue::bind) checks, so one handle covers all of them however many are
//! bound. The vector is chosen at open: with `FI_AFFINITY`, `signaling_vector` names it (as
//! verbs passes it on as the completion vector) when the NIC has that vector and no other CQ of
//! the domain holds it; otherwise — and without `FI_AFFINITY` — the lowest vector no other CQ
//! holds. So `signaling_vector` is a hint. Steering the vector to a CPU is the operating
//! system's business (under VFIO, the host's IRQ affinity); ringfab does not.
//!
//! # Wait objects
//!
//! | `wait_obj` | handle | `sread` | `control(GetWait)` |
//! |---|---|---|---|
//! | `None` | none | `NoSys` | `NoData` |
//! | `Unspec` (the default choice for blocking) | the CQ's vector (eventfd under VFIO, condvar under emu); if the NIC has no free vector, none: `sread` spins as `Yield` | blocks | `NoData` |
//! | `Fd` | the CQ's vector, which must be a file descriptor (else `NoSys` at open); no free vector: `NoMem` | blocks | `RawWait::Fd` (the eventfd) |
//! | `MutexCond` | the CQ's vector (a condvar is what emu uses; VFIO an eventfd); no free vector: `NoMem` | blocks | `NoSys`: no pthread objects in a `no_std` crate |
//! | `Yield` | none | spins with `core::hint::spin_loop` (no OS to yield to in `no_std`; on bare metal the natural loop) | `NoData` |
//! | `Set` | the CQ's vector, a member of the set's platform wait | `NoSys` (fi_cq(3)); wait with [`WaitSet::wait`] | `NoData`: ask the set ([`WaitSet::raw`]) |
//!
//! # Waiting (DESIGN.md decision 9)
//!
//! `sread` registers as a sleeper, drains the handle, then loops: arm the interrupts of every
//! bound queue, read, and block on the handle for what is left of the timeout (as the caller's
//! [`Clock`] measures it, so never early) — the loop [`Counter::wait`](crate::Counter::wait)
//! uses too. The interrupts are disarmed again when the last sleeper leaves, so a CQ
//! nobody blocks on costs no interrupt; the non-blocking `read` path takes no lock more, makes
//! no syscall and never touches an interrupt register. A reader that has blocked for
//! `DEVICE_CHECK_QUANTA` (10) slices of `WAIT_QUANTUM` without a notification asks the drivers
//! to check their devices, so that a device that died under it (no interrupt comes) wakes it
//! with the `FI_EIO` entry within about 100 ms.

use core::marker::PhantomData;
use core::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use core::time::Duration;

use spin::Mutex;

use super::attr::{CqAttr, CqLimits, WaitCond, WaitObj, WaitSetId};
use super::queue::CompletionQueue;
use super::read::{read_delivered, read_raw, Delivery};
use crate::addr::FiAddr;
use crate::clock::Clock;
use crate::cntr::block_until;
use crate::domain::Domain;
use crate::entry::{Context, CqFormat, Format};
use crate::hal::{self, Nic, RawWait, Wait, WaitOutcome};
use crate::storage::Capacity;
use crate::{Error, Result};

/// Empty wake-ups (`WAIT_QUANTUM` each, 10 ms) of a blocked `sread` between two checks of the
/// devices behind its queues: a reader blocked on a device that died (removed, reset) is woken
/// within about 100 ms, because a dead device raises no interrupt and a blocked reader polls
/// too rarely for the drivers' own stall check (`hal::queue::STALL_POLLS` empty polls) to
/// come round. A check is a few register reads per queue; never on the non-blocking path.
const DEVICE_CHECK_QUANTA: u32 = 10;

/// Asks the driver of every queue bound to CQ `index` to check its device now
/// ([`TxQueue::check`](hal::Queue::check)); a queue found dead fails its path as a poll
/// would have (the engine's "Critical faults"): its operations discarded, one `FI_EIO`
/// entry on the CQ. CQ lock, then each path's: the order `read` takes them in.
fn check_devices<N: Nic, const D: usize>(domain: &Domain<'_, N, D>, index: usize) {
    let Some(cq) = domain.cq(index) else {
        return;
    };
    for pslot in domain.paths() {
        if !pslot.serves(index) {
            continue;
        }
        let _ = cq.with_sink(|sink| {
            let mut guard = pslot.state.lock();
            if let Some(ps) = guard.as_mut().filter(|ps| ps.serves(index)) {
                if ps.fault.is_none() {
                    if let Some(f) = ps.check_queue() {
                        ps.fail(f, &domain.poll_ctx(index), true, &mut |o| sink(o));
                    }
                }
                pslot.publish_fault(ps);
            }
        });
    }
}

/// `CqSlot::vector` of a CQ that holds none.
pub(super) const NO_VECTOR: u32 = u32::MAX;
/// `CqSlot::set` of a CQ in no wait set; set ids start at 1.
pub(super) const NO_SET: u32 = 0;

/// Who is blocked on one CQ, and its `signal`s.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Sleepers {
    /// Threads inside `sread`, plus a wait set's waiter while it waits.
    waiters: u32,
    /// `signal` calls so far: a sleeper returns when this moved since it registered.
    signals: u64,
    /// A `signal` that found nobody blocked: the next sleeper returns at once (as util's
    /// signal fd keeps it).
    pending: bool,
    /// Whether the waiter of the CQ's wait set is registered, and `signals` when it did.
    set_entered: bool,
    set_signals: u64,
}

impl Sleepers {
    /// Threads registered as blocked.
    pub(crate) fn waiters(&self) -> u32 {
        self.waiters
    }

    pub(crate) const NEW: Sleepers = Sleepers {
        waiters: 0,
        signals: 0,
        pending: false,
        set_entered: false,
        set_signals: 0,
    };
}

/// `fi_control` commands a CQ accepts.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub enum CqControl {
    /// `FI_GETWAIT`: the operating-system wait object behind the CQ.
    GetWait,
}

/// Arms or disarms the interrupt of every path bound to CQ `index`.
fn arm_paths<N: Nic, const D: usize>(domain: &Domain<'_, N, D>, index: usize, armed: bool) {
    for pslot in domain.paths() {
        if pslot.cq.load(Ordering::Acquire) != index {
            continue;
        }
        // A shared path's queue has no interrupt (it serves several CQs): not armed here.
        let mut guard = pslot.state.lock();
        if let Some(ps) = guard.as_mut().filter(|ps| ps.cq == Some(index)) {
            ps.set_interrupt(armed);
        }
    }
}

/// Leaves CQ `index`'s sleepers (the caller already took itself out of the count); the last one
/// out disarms the queues' interrupts, under the sleepers' lock so that a thread registering
/// meanwhile arms after this disarm, never before it.
fn leave<N: Nic, const D: usize>(domain: &Domain<'_, N, D>, index: usize, sleepers: &mut Sleepers) {
    sleepers.waiters -= 1;
    let slot = &domain.cqs()[index];
    if sleepers.waiters == 0 && slot.vector.load(Ordering::SeqCst) != NO_VECTOR {
        arm_paths(domain, index, false);
    }
}

/// An `sread` caller's registration among a CQ's sleepers, undone on every exit.
struct Registration<'a, 'n, N: Nic + 'n, const D: usize> {
    domain: &'a Domain<'n, N, D>,
    index: usize,
    signals: u64,
    signaled_before: bool,
}

impl<'a, 'n, N: Nic + 'n, const D: usize> Registration<'a, 'n, N, D> {
    fn enter(domain: &'a Domain<'n, N, D>, index: usize) -> Self {
        let mut s = domain.cqs()[index].sleepers.lock();
        s.waiters += 1;
        let signaled_before = core::mem::take(&mut s.pending);
        Registration {
            domain,
            index,
            signals: s.signals,
            signaled_before,
        }
    }

    /// Whether the CQ was signalled since (or just before) this registration; and whether
    /// another thread is blocked on it too.
    fn state(&self) -> (bool, bool) {
        let s = self.domain.cqs()[self.index].sleepers.lock();
        (
            self.signaled_before || s.signals != self.signals,
            s.waiters > 1,
        )
    }
}

impl<N: Nic, const D: usize> Drop for Registration<'_, '_, N, D> {
    fn drop(&mut self) {
        let slot = &self.domain.cqs()[self.index];
        leave(self.domain, self.index, &mut slot.sleepers.lock());
    }
}

/// Claims an MSI-X vector for CQ `index`: `prefer` if the NIC has it and no other CQ holds it,
/// else the lowest free one. Two opens racing for one vector both store it and then look
/// (sequentially consistent, so at least one sees the other); whoever sees the other backs off.
fn claim_vector<N: Nic, const D: usize>(
    domain: &Domain<'_, N, D>,
    index: usize,
    prefer: Option<u32>,
) -> Option<u16> {
    let count = domain.nic().irq_vectors();
    let slot = &domain.cqs()[index];
    let prefer = prefer
        .and_then(|p| u16::try_from(p).ok())
        .filter(|&p| p < count);
    for v in prefer.into_iter().chain(0..count) {
        slot.vector.store(u32::from(v), Ordering::SeqCst);
        let taken = domain
            .cqs()
            .iter()
            .enumerate()
            .any(|(i, o)| i != index && o.vector.load(Ordering::SeqCst) == u32::from(v));
        if !taken {
            return Some(v);
        }
        slot.vector.store(NO_VECTOR, Ordering::SeqCst);
    }
    None
}

impl<N: Nic, F: Format> CompletionQueue<N, F> {
    /// `fi_cq_open`: [`Domain::open_cq`], and [`WaitSet::open_cq`] with `set`.
    pub(crate) fn open<const D: usize>(
        domain: &Domain<'_, N, D>,
        attr: &CqAttr,
        set: Option<WaitSetId>,
    ) -> Result<Self> {
        // Whether the handle is a file descriptor is known only once the CQ has one (below);
        // wait sets exist, but only a `WaitSet` can open a CQ into one.
        let limits = CqLimits {
            fd_wait: true,
            wait_sets: true,
            ..domain.cq_limits()
        };
        // The format is stated once, by `F`: an attribute that leaves it unspecified takes it.
        let attr = CqAttr {
            format: match attr.format {
                CqFormat::Unspec => F::FORMAT,
                f => f,
            },
            ..*attr
        };
        let resolved = attr.validate(limits)?;
        if resolved.format() != F::FORMAT {
            return Err(Error::Inval);
        }
        let in_set = resolved.wait_obj() == WaitObj::Set;
        if in_set != set.is_some() || (in_set && resolved.wait_set() != set) {
            // A SET CQ opened outside its set (or naming another), or a set opening a CQ
            // that does not ask for it: the wait set it names is not the one at hand.
            return Err(Error::Inval);
        }
        let mut index = None;
        for (i, (slot, credits)) in domain.cqs().iter().zip(domain.credits()).enumerate() {
            if slot.try_open(credits, resolved.size(), domain.max_cq_size())? {
                index = Some(i);
                break;
            }
        }
        let index = index.ok_or(Error::Full(Capacity::Cqs))?;
        let mut cq = CompletionQueue::new(domain, index, resolved);
        // From here on, an error closes the slot (and frees its vector) again.
        match cq.take_wait(domain, set) {
            Ok(()) => Ok(cq),
            Err(e) => {
                let _ = cq.close(domain);
                Err(e)
            }
        }
    }

    /// What `open` does once the CQ has its slot: the wait handle its wait object needs, and
    /// its wait set.
    fn take_wait<const D: usize>(
        &mut self,
        domain: &Domain<'_, N, D>,
        set: Option<WaitSetId>,
    ) -> Result {
        let cq = self;
        let resolved = cq.attr;
        let index = cq.index;
        let in_set = set.is_some();
        if resolved.needs_wait_handle() || in_set {
            let handle = claim_vector(domain, index, resolved.affinity())
                .map(|v| domain.nic().irq(v).map_err(Error::from));
            match handle {
                Some(Ok(w)) => cq.wait = Some(w),
                // `FI_WAIT_UNSPEC` leaves the mechanism to ringfab: spin, as `Yield`.
                Some(Err(_)) | None if resolved.wait_obj() == WaitObj::Unspec => {
                    cq.slot(domain).vector.store(NO_VECTOR, Ordering::SeqCst);
                }
                Some(Err(e)) => return Err(e),
                None => return Err(Error::Full(Capacity::Vectors)),
            }
        }
        if resolved.wait_obj() == WaitObj::Fd
            && !matches!(cq.wait.as_ref().and_then(Wait::raw), Some(RawWait::Fd(_)))
        {
            return Err(Error::NoSys);
        }
        if let Some(id) = set {
            cq.slot(domain).set.store(id.0, Ordering::Release);
        }
        Ok(())
    }

    /// The MSI-X vector the CQ blocks on, if it holds one: open the queues to bind to it with
    /// `TxConfig::with_vector(v)` / `RxConfig::with_vector(v)`. `None` for `FI_WAIT_NONE`,
    /// `FI_WAIT_YIELD`, and an `FI_WAIT_UNSPEC` CQ that found no free vector.
    pub fn interrupt_vector<'d, 'n, const D: usize>(
        &self,
        dom: &'d Domain<'n, N, D>,
    ) -> Option<u16> {
        u16::try_from(self.slot(dom).vector.load(Ordering::SeqCst)).ok()
    }

    /// Blocking read (`fi_cq_sread`): as [`read`](Self::read), but waits until there is
    /// something to return, the timeout passes, or [`signal`](Self::signal) is called.
    ///
    /// * `cond`: with `FI_CQ_COND_THRESHOLD`, the number of entries to wait for (`None` is 1;
    ///   capped at `out.len()`): entries read are kept in `out` while more are awaited, and
    ///   returned together once there are that many. Ignored with `FI_CQ_COND_NONE`, where
    ///   one entry is enough. libfabric's providers treat the threshold as a hint and return
    ///   early; ringfab honours it, except that an error completion, a signal or the timeout
    ///   return what has been read so far.
    /// * `timeout`: `None` waits for ever (libfabric's negative timeout;
    ///   [`timeout_from_ms`](crate::cntr::timeout_from_ms) converts), `Some(ZERO)` checks once.
    ///   `clock` measures it: a timeout is never reported before `clock` says it passed.
    ///
    /// With an empty `out` it waits until something is queued and returns `Ok(0)`.
    ///
    /// # Errors
    /// * `NoSys` on a CQ opened with `FI_WAIT_NONE` or `FI_WAIT_SET` (invalid, fi_cq(3)).
    /// * `Again` when the timeout passed, or the CQ was signalled, with nothing read.
    /// * `Avail` and `Overrun` as `read` gives them, when nothing was read before.
    pub fn sread<'d, 'n, const D: usize, C: Clock + ?Sized>(
        &self,
        dom: &'d Domain<'n, N, D>,
        out: &mut [F::Entry],
        cond: Option<usize>,
        timeout: Option<Duration>,
        clock: &C,
    ) -> Result<usize> {
        let mut d = Delivery {
            out,
            src: None,
            bufs: None,
            iovs: None,
            owners: dom.owners(),
        };
        self.sread_into(dom, &mut d, cond, timeout, clock)
    }

    /// Blocking [`readfrom`](Self::readfrom) (`fi_cq_sreadfrom`): as [`sread`](Self::sread),
    /// with each entry's source in `src`.
    ///
    /// # Errors
    /// As `sread`; `Inval` if `src` is shorter than `out`.
    pub fn sreadfrom<'d, 'n, const D: usize, C: Clock + ?Sized>(
        &self,
        dom: &'d Domain<'n, N, D>,
        out: &mut [F::Entry],
        src: &mut [FiAddr],
        cond: Option<usize>,
        timeout: Option<Duration>,
        clock: &C,
    ) -> Result<usize> {
        if src.len() < out.len() {
            return Err(Error::Inval);
        }
        let mut d = Delivery {
            out,
            src: Some(src),
            bufs: None,
            iovs: None,
            owners: dom.owners(),
        };
        self.sread_into(dom, &mut d, cond, timeout, clock)
    }

    fn sread_into<'d, 'n, const D: usize, C: Clock + ?Sized>(
        &self,
        dom: &'d Domain<'n, N, D>,
        d: &mut Delivery<'_, 'd, F>,
        cond: Option<usize>,
        timeout: Option<Duration>,
        clock: &C,
    ) -> Result<usize> {
        dom.check(self.domain)?;
        if !self.attr.sread_allowed() {
            return Err(Error::NoSys);
        }
        let cap = d.out.len();
        let want = match self.attr.wait_cond() {
            WaitCond::Threshold => cond.unwrap_or(1).clamp(1, cap.max(1)),
            WaitCond::None => 1,
        };
        let handle = self.wait.as_ref();
        let reg = Registration::enter(dom, self.index);
        let mut filled = 0;
        let mut empty_wakes = 0u32;
        let mut first = true;
        let so_far = |filled: usize, e: Error| if filled > 0 { Ok(filled) } else { Err(e) };
        let done = block_until(handle, timeout, clock, |consumed| {
            if handle.is_some() {
                // Idempotent: only the first arm of a queue touches the device.
                arm_paths(dom, self.index, true);
            }
            if !core::mem::take(&mut first) && !consumed {
                empty_wakes += 1;
                if empty_wakes % DEVICE_CHECK_QUANTA == 0 {
                    check_devices(dom, self.index);
                }
            }
            let base = filled;
            let got = read_delivered(dom, self.index, &mut d.from(base));
            match got {
                Ok(n) => {
                    filled += n;
                    if filled >= want || cap == 0 {
                        return Some(Ok(filled));
                    }
                }
                Err(Error::Again) => {}
                Err(e) => return Some(so_far(filled, e)),
            }
            let (signaled, others) = reg.state();
            if consumed && others && (signaled || filled > base) {
                // The notification may have been meant for another blocked reader too.
                if let Some(w) = handle {
                    w.notify();
                }
            }
            signaled.then(|| so_far(filled, Error::Again))
        });
        done.unwrap_or_else(|| so_far(filled, Error::Again))
    }

    /// Wakes every thread blocked in [`sread`](Self::sread) on this CQ, or the thread waiting
    /// on its wait set (`fi_cq_signal`); they return `Again` if they have nothing to return. A
    /// signal that finds nobody blocked is kept: the next `sread` (or wait of the set) returns
    /// at once, as libfabric's util CQ does. Callable from any thread.
    ///
    /// # Errors
    /// `NoSys` on a CQ opened with `FI_WAIT_NONE` (fi_cq(3): only with a wait object).
    pub fn signal<'d, 'n, const D: usize>(&self, dom: &'d Domain<'n, N, D>) -> Result {
        dom.check(self.domain)?;
        if !self.attr.signal_allowed() {
            return Err(Error::NoSys);
        }
        {
            let mut s = self.slot(dom).sleepers.lock();
            s.signals = s.signals.wrapping_add(1);
            if s.waiters == 0 {
                s.pending = true;
            }
        }
        if let Some(w) = &self.wait {
            w.notify();
        }
        Ok(())
    }

    /// `fi_trywait` for this CQ: prepares an application that blocks on the CQ's wait object
    /// itself (the eventfd `control(GetWait)` gives for `FI_WAIT_FD`, polled with poll/epoll)
    /// instead of calling [`sread`](Self::sread). Drains the handle, arms the interrupt of
    /// every bound queue, then checks the CQ: `Ok` means nothing is queued and it is safe to
    /// block — the next completion makes the descriptor readable. The interrupts stay armed
    /// until a blocking call on the CQ ends (the last `sread` leaving disarms them).
    ///
    /// # Errors
    /// `Again` when something is queued (an error or overrun too): read it before blocking.
    /// `NoSys` on a CQ without a wait object (`FI_WAIT_NONE`).
    pub fn trywait<'d, 'n, const D: usize>(&self, dom: &'d Domain<'n, N, D>) -> Result {
        dom.check(self.domain)?;
        if !self.attr.signal_allowed() {
            return Err(Error::NoSys);
        }
        if let Some(w) = &self.wait {
            w.drain();
            arm_paths(dom, self.index, true);
        }
        match read_raw::<N, D, F>(dom, self.index, &mut []) {
            Err(Error::Again) => Ok(()),
            _ => Err(Error::Again),
        }
    }

    /// Threads registered as blocked on the CQ right now (`sread` callers, and the waiter of
    /// its wait set): lets a test wait until a reader really blocks.
    #[doc(hidden)]
    pub fn sleepers<'d, 'n, const D: usize>(&self, dom: &'d Domain<'n, N, D>) -> u32 {
        self.slot(dom).sleepers.lock().waiters
    }

    /// Wakes a blocked reader after a software insertion (which raises no interrupt).
    pub(super) fn notify_sleepers<'d, 'n, const D: usize>(&self, dom: &'d Domain<'n, N, D>) {
        if let Some(w) = &self.wait {
            if self.slot(dom).sleepers.lock().waiters > 0 {
                w.notify();
            }
        }
    }

    /// `fi_control` on the CQ. The only command is [`CqControl::GetWait`], which returns the
    /// operating-system object behind the wait handle for an application to block on itself
    /// (then call [`read`](Self::read)): the eventfd of an `FI_WAIT_FD` CQ. Takes the handle
    /// exclusively, as fi_cq(3) asks callers to serialize `fi_control` with the CQ's other
    /// calls.
    ///
    /// # Errors
    /// `NoData` (as libfabric's util CQ) for `FI_WAIT_NONE`, and for `FI_WAIT_UNSPEC`,
    /// `FI_WAIT_YIELD` and `FI_WAIT_SET`, which promise nothing retrievable (ask the set:
    /// [`WaitSet::raw`]); `NoSys` for `FI_WAIT_MUTEX_COND`: a `no_std` crate has no pthread
    /// mutex and condition variable to hand out.
    pub fn control(&mut self, command: CqControl) -> Result<RawWait> {
        match command {
            CqControl::GetWait => match self.attr.wait_obj() {
                WaitObj::Fd => self.wait.as_ref().and_then(Wait::raw).ok_or(Error::NoData),
                WaitObj::MutexCond => Err(Error::NoSys),
                _ => Err(Error::NoData),
            },
        }
    }
}

/// The next wait-set id; ids are never reused, so a CQ left naming a closed set names nothing.
static NEXT_SET: AtomicU32 = AtomicU32::new(1);

/// A [`hal::WaitSet`] seen as one [`Wait`] handle, for [`block_until`].
struct AsWait<'a, S>(&'a S);

impl<S: hal::WaitSet> Wait for AsWait<'_, S> {
    fn drain(&self) -> bool {
        self.0.drain()
    }
    fn wait(&self, timeout: Option<Duration>) -> WaitOutcome {
        self.0.wait(timeout)
    }
    fn notify(&self) {
        self.0.notify()
    }
}

/// A wait set (`fid_wait`, `fi_wait_open`): one thread waits on several completion queues of
/// one domain, through the platform's wait over their vectors' handles (`S`: epoll under VFIO,
/// a shared condvar under emu).
///
/// CQs join it by being opened through it ([`open_cq`](Self::open_cq)) with
/// `wait_obj: FI_WAIT_SET` and `wait_set: Some(set.id())`. [`wait`](Self::wait) (`fi_wait`)
/// returns once any member has something to read (or an error) or was
/// [signalled](CompletionQueue::signal); the application then reads the members. One thread
/// waits on a set at a time. A set covers one domain (libfabric's span a fabric).
pub struct WaitSet<N: Nic, S: hal::WaitSet<Wait = N::Wait>> {
    domain: u32,
    _nic: PhantomData<fn() -> N>,
    set: S,
    id: WaitSetId,
    /// Bit `v`: vector `v`'s handle is a member of `set`.
    members: Mutex<u64>,
    /// A thread is inside `wait`.
    waiting: AtomicBool,
}

impl<N: Nic, S: hal::WaitSet<Wait = N::Wait>> WaitSet<N, S> {
    /// Opens a wait set over `domain`'s CQs on the platform's `set` (`fi_wait_open`).
    pub fn new<const D: usize>(domain: &Domain<'_, N, D>, set: S) -> Self {
        WaitSet {
            domain: domain.id(),
            _nic: PhantomData,
            set,
            id: WaitSetId(NEXT_SET.fetch_add(1, Ordering::Relaxed)),
            members: Mutex::new(0),
            waiting: AtomicBool::new(false),
        }
    }

    /// The id CQs name in [`CqAttr::wait_set`] to join this set.
    pub fn id(&self) -> WaitSetId {
        self.id
    }

    /// The operating-system object a thread can block on instead of [`wait`](Self::wait)
    /// (`fi_control(FI_GETWAIT)` on the set): the epoll descriptor under VFIO; `None` under emu.
    pub fn raw(&self) -> Option<RawWait> {
        self.set.raw()
    }

    /// Opens a completion queue in this set, as [`Domain::open_cq`] does otherwise: `attr`
    /// must say `wait_obj: WaitObj::Set` and `wait_set: Some(self.id())`. The CQ takes a vector
    /// of its own, whose handle joins the platform set.
    ///
    /// # Errors
    /// As `open_cq`; `Inval` if `attr` does not name this set; `NoMem` when no vector is free;
    /// `Device(_)` if the platform cannot watch one more handle.
    pub fn open_cq<F: Format, const D: usize>(
        &self,
        dom: &Domain<'_, N, D>,
        attr: &CqAttr,
    ) -> Result<CompletionQueue<N, F>> {
        dom.check(self.domain)?;
        let cq = CompletionQueue::open(dom, attr, Some(self.id))?;
        if let (Some(w), Some(v)) = (cq.wait.as_ref(), cq.interrupt_vector(dom)) {
            if let Err(e) = self.set.add(w) {
                let _ = cq.close(dom);
                return Err(e.into());
            }
            *self.members.lock() |= 1u64.checked_shl(u32::from(v)).unwrap_or(0);
        }
        Ok(cq)
    }

    /// The CQ slots of the domain in this set.
    fn member_slots<'d, 'n, const D: usize>(
        &self,
        dom: &'d Domain<'n, N, D>,
    ) -> impl Iterator<Item = usize> + 'd {
        let id = self.id.0;
        dom.cqs()
            .iter()
            .enumerate()
            .filter(move |(_, s)| s.set.load(Ordering::Acquire) == id)
            .map(|(i, _)| i)
    }

    /// Takes out of the platform set the vectors no member holds any more (members closed
    /// since), so a vector reused by another CQ does not wake this set.
    fn forget_closed<'d, 'n, const D: usize>(&self, dom: &'d Domain<'n, N, D>) {
        let mut held = 0u64;
        for i in self.member_slots(dom) {
            let v = dom.cqs()[i].vector.load(Ordering::SeqCst);
            held |= 1u64.checked_shl(v).unwrap_or(0);
        }
        let mut members = self.members.lock();
        let stale = *members & !held;
        for v in (0..64u16).filter(|v| stale & (1 << v) != 0) {
            if let Ok(w) = dom.nic().irq(v) {
                self.set.remove(&w);
            }
        }
        *members &= held;
    }

    /// Waits until a member CQ has something to read or an error queued, or was signalled
    /// (`fi_wait`). Registers with every member (their queues' interrupts are armed while it
    /// waits), drains the platform set, re-checks every member, then blocks for what is left
    /// of `timeout` as `clock` measures it — never reporting a timeout early.
    ///
    /// # Errors
    /// `TimedOut` (`FI_ETIMEDOUT`, as `fi_wait`) when the timeout passed first; `Busy` if
    /// another thread is waiting on the set.
    pub fn wait<'d, 'n, const D: usize, C: Clock + ?Sized>(
        &self,
        dom: &'d Domain<'n, N, D>,
        timeout: Option<Duration>,
        clock: &C,
    ) -> Result {
        dom.check(self.domain)?;
        if self.waiting.swap(true, Ordering::AcqRel) {
            return Err(Error::Busy);
        }
        self.forget_closed(dom);
        let guard = SetWaiting(self, dom);
        let done = block_until(Some(&AsWait(&self.set)), timeout, clock, |_| {
            let mut ready = false;
            for i in self.member_slots(dom) {
                let slot = &dom.cqs()[i];
                let signaled = {
                    let mut s = slot.sleepers.lock();
                    if !s.set_entered {
                        s.set_entered = true;
                        s.set_signals = s.signals;
                        s.waiters += 1;
                    }
                    core::mem::take(&mut s.pending) || s.signals != s.set_signals
                };
                if slot.vector.load(Ordering::SeqCst) != NO_VECTOR {
                    arm_paths(dom, i, true);
                }
                // A read of nothing: `Ok(0)` if anything is queued (an error too), without
                // taking it; `Overrun` is news as well.
                let queued = !matches!(
                    read_raw::<N, D, Context>(dom, i, &mut []),
                    Err(Error::Again | Error::OpBadState)
                );
                ready |= signaled || queued;
            }
            ready.then_some(())
        });
        drop(guard);
        done.ok_or(Error::TimedOut)
    }
}

/// A wait on a set, undone on every exit: every member it registered with is left.
struct SetWaiting<'w, 'd, 'n, N: Nic + 'n, const D: usize, S: hal::WaitSet<Wait = N::Wait>>(
    &'w WaitSet<N, S>,
    &'d Domain<'n, N, D>,
);

impl<N: Nic, const D: usize, S: hal::WaitSet<Wait = N::Wait>> Drop
    for SetWaiting<'_, '_, '_, N, D, S>
{
    fn drop(&mut self) {
        let (set, dom) = (self.0, self.1);
        // A member closed during the wait no longer names the set, and is skipped: its slot
        // starts with fresh sleepers when it is opened again.
        for i in set.member_slots(dom) {
            let slot = &dom.cqs()[i];
            let mut s = slot.sleepers.lock();
            if s.set_entered {
                s.set_entered = false;
                leave(dom, i, &mut s);
            }
        }
        set.waiting.store(false, Ordering::Release);
    }
}

impl<N: Nic, S: hal::WaitSet<Wait = N::Wait>> core::fmt::Debug for WaitSet<N, S> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("WaitSet")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}
