//! The hard completion queue: `read` converts completions straight from the bound queues'
//! rings; a small software *aux queue* keeps, in order, what cannot be delivered at once.
//!
//! # The read path (DESIGN.md decision 1)
//!
//! [`CompletionQueue::read`]:
//!
//! 1. delivers the aux queue first — successes that were polled behind an error, then stops at
//!    an error at its head (returning what it has, or [`Error::Avail`] if nothing);
//! 2. then polls each bound path, round-robin from a start that advances every call (so one
//!    busy queue cannot starve another), for at most the entries still wanted, converting each
//!    completion through the path's op table straight into `F::Entry`;
//! 3. an error completion goes to the aux queue and ends the call; completions the same poll
//!    returned after it go behind it, so each queue's order is kept.
//!
//! [`CompletionQueue::readerr`] takes the error at the head, and `read` resumes with what
//! follows it.
//!
//! # Credits and overrun (DESIGN.md decision 2)
//!
//! A CQ of size `S` can owe at most `S` completions. Every posted operation that can complete
//! on it reserves a credit (including selective ones, whose errors are still reported);
//! delivering its completion — by `read`, `readerr`, or silently for a success nobody asked
//! for — releases it. The aux queue has `S` entries, so everything credited fits. A software
//! entry not tied to a posted operation (unknown-source reports; reached today through
//! [`CompletionQueue::report_uncredited`]) needs a free credit too, because an aux slot not
//! already owed to a posted operation is exactly a free credit; finding none, the CQ enters the
//! **overrun** state: what it holds is still delivered, in order — including completions of
//! operations posted before the overrun, which were credited — then every read returns
//! [`Error::Overrun`] for good, and posting to its paths returns [`Error::OpBadState`].
//!
//! # Storage
//!
//! Each CQ slot of the domain's [`Storage`](crate::storage::Storage) has an aux queue of the
//! storage's `CQ_SIZE` entries (a `heapless` deque), which bounds the size a CQ can be opened
//! with ([`Capacity::CqSize`]). The CQ-owned `err_data`
//! buffer of `fi_cq_readerr` lives in the handle, so the borrow `readerr` returns keeps `read`
//! from running while the application looks at it.

use core::fmt;
use core::marker::PhantomData;
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};

use spin::Mutex;

use super::attr::ResolvedCqAttr;
use super::entry::{BufAddr, Completion, ErrEntry, Format, OpContext, ADDR_NOTAVAIL};
use super::errdata::{deliver_err_data, ErrDataOut, ERR_DATA_MAX};
use super::strerror::{self, ProvError};
use super::wait::{Sleepers, NO_SET, NO_VECTOR};
use crate::av::{EpAddr, FiAddr};
use crate::domain::Domain;
use crate::flags::{BindFlags, CompletionFlags};
use crate::hal::Nic;
use crate::mr::{owner_of, Buf, Iov, MrSlot, RawBuf};
use crate::path::{
    release, ErrRecord, Outcome, Path, PathSlot, PathState, Plain, Sink, Window, NO_CQ,
};
use crate::storage::Capacity;
use crate::{Error, Result};

/// What an aux-queue slot holds: a completion polled but not yet delivered, or an error.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum AuxItem {
    Ok(Completion),
    Err(ErrRecord),
}

/// Where `read` puts what it delivers: the entries, and optionally their sources and owned
/// buffers.
pub(super) struct Delivery<'o, 's, F: Format, N: Nic> {
    pub(super) out: &'o mut [F::Entry],
    pub(super) src: Option<&'o mut [FiAddr]>,
    pub(super) bufs: Option<&'o mut [Option<Buf<'s>>]>,
    /// Every buffer of each entry (a gather send's several), for `read_owned_iov`.
    pub(super) iovs: Option<&'o mut [Iov<'s>]>,
    pub(super) mrs: &'s [MrSlot<N>],
}

impl<'s, F: Format, N: Nic> Delivery<'_, 's, F, N> {
    /// The same delivery from entry `base` on (what a blocking read that already holds `base`
    /// entries reads into next).
    pub(super) fn from(&mut self, base: usize) -> Delivery<'_, 's, F, N> {
        Delivery {
            out: &mut self.out[base..],
            src: self.src.as_deref_mut().map(|s| &mut s[base..]),
            bufs: self.bufs.as_deref_mut().map(|b| &mut b[base..]),
            iovs: self.iovs.as_deref_mut().map(|b| &mut b[base..]),
            mrs: self.mrs,
        }
    }

    /// Writes plain completions `run` as entries `n..`.
    #[inline(always)]
    fn put_plains(&mut self, n: usize, run: &[Plain]) {
        for (e, p) in self.out[n..n + run.len()].iter_mut().zip(run) {
            *e = F::plain(p.context, p.flags, p.len);
        }
        self.fill_plain_extras(n, run.len());
    }

    /// What plain entries `n..n + k` have beside the entry: no source, no owned buffer.
    #[inline(always)]
    fn fill_plain_extras(&mut self, n: usize, k: usize) {
        if let Some(src) = self.src.as_deref_mut() {
            src[n..n + k].fill(FiAddr::NOTAVAIL);
        }
        if let Some(bufs) = self.bufs.as_deref_mut() {
            for b in &mut bufs[n..n + k] {
                *b = None;
            }
        }
        if let Some(iovs) = self.iovs.as_deref_mut() {
            for b in &mut iovs[n..n + k] {
                *b = Iov::new();
            }
        }
    }

    /// Writes completion `c` as entry `n`.
    #[inline(always)]
    fn put(&mut self, n: usize, c: &Completion) {
        self.out[n] = F::fill(c);
        if let Some(src) = self.src.as_deref_mut() {
            src[n] = c.src.unwrap_or(FiAddr::NOTAVAIL);
        }
        let mrs = self.mrs;
        let owned = move |raw: Option<RawBuf>| {
            raw.and_then(|raw| owner_of(mrs, raw.mr).map(|o| Buf::from_raw(raw, o)))
        };
        if let Some(iovs) = self.iovs.as_deref_mut() {
            iovs[n] = Iov::from_bufs(core::iter::once(c.owned).chain(c.extra).filter_map(owned));
        } else {
            // Buffers nobody takes go back to their regions' counts (the handle drops).
            if let Some(bufs) = self.bufs.as_deref_mut() {
                bufs[n] = owned(c.owned);
            } else {
                drop(owned(c.owned));
            }
            c.extra.into_iter().for_each(|raw| drop(owned(raw)));
        }
    }
}

/// What a read hands the paths it polls: entries go straight into the caller's array while
/// there is room and no error has been queued; after an error (which stops the read) or
/// beyond `cap` they go to the aux queue, so nothing overtakes the error and nothing is lost.
struct ReadSink<'x, 'o, 's, F: Format, N: Nic> {
    d: &'x mut Delivery<'o, 's, F, N>,
    /// Entries in `d` so far.
    n: usize,
    cap: usize,
    /// Entries this sink put in `d` (their credits go back after the poll).
    delivered: usize,
    /// An error was queued.
    stopped: bool,
    st: &'x mut CqState,
    /// The CQ's aux-queue cells, found when something has to be queued (rare).
    row: AuxRow<'x>,
    slot: &'x CqSlot,
}

/// Where a CQ's aux-queue cells are, without the slicing until they are needed.
#[derive(Clone, Copy)]
pub(crate) struct AuxRow<'a> {
    /// Every CQ's cells.
    pub(crate) cells: &'a [AuxCell],
    /// The CQ's index, and the cells per CQ.
    pub(crate) index: usize,
    pub(crate) size: usize,
}

impl<'a> AuxRow<'a> {
    /// The CQ's cells.
    pub(crate) fn get(self) -> &'a [AuxCell] {
        self.cells
            .get(self.index * self.size..)
            .and_then(|r| r.get(..self.size))
            .unwrap_or_default()
    }
}

impl<'s, F: Format, N: Nic> Sink<'s> for ReadSink<'_, '_, 's, F, N> {
    type Entry = F::Entry;

    #[inline(always)]
    fn window(&mut self) -> Window<'_, 's, F::Entry> {
        // Entries `n..cap` (`cap` is `out.len()`, and `readfrom`/`read_owned` checked that
        // the sources and buffers are as long); none once an error is queued.
        let (n, end) = (self.n, if self.stopped { self.n } else { self.cap });
        let d = &mut *self.d;
        Window {
            entries: d.out.get_mut(n..end).unwrap_or_default(),
            src: d
                .src
                .as_deref_mut()
                .map(|s| s.get_mut(n..end).unwrap_or_default()),
            bufs: d
                .bufs
                .as_deref_mut()
                .map(|b| b.get_mut(n..end).unwrap_or_default()),
            whole: d.iovs.is_none(),
        }
    }

    #[inline(always)]
    fn write(entry: &mut F::Entry, p: Plain) {
        *entry = F::plain(p.context, p.flags, p.len);
    }

    #[inline(always)]
    fn commit(&mut self, k: usize) {
        if k > 0 {
            self.d.fill_plain_extras(self.n, k);
            self.n += k;
            self.delivered += k;
        }
    }

    #[inline(always)]
    fn commit_filled(&mut self, k: usize) {
        self.n += k;
        self.delivered += k;
    }

    #[inline(always)]
    fn plain(&mut self, run: &[Plain]) -> bool {
        let room = if self.stopped { 0 } else { self.cap - self.n };
        let direct = room.min(run.len());
        self.d.put_plains(self.n, &run[..direct]);
        self.n += direct;
        self.delivered += direct;
        for p in &run[direct..] {
            self.st
                .push_credited(self.row.get(), self.slot, AuxItem::Ok(p.completion()));
        }
        self.stopped
    }

    #[inline]
    fn outcome(&mut self, o: Outcome<'_>) -> bool {
        match o {
            Outcome::Plain(p) => return self.plain(&[p]),
            Outcome::Done(c) if !self.stopped && self.n < self.cap => {
                self.d.put(self.n, c);
                self.delivered += 1;
                self.n += 1;
            }
            Outcome::Done(c) => self
                .st
                .push_credited(self.row.get(), self.slot, AuxItem::Ok(*c)),
            Outcome::Failed(e) => {
                self.st
                    .push_credited(self.row.get(), self.slot, AuxItem::Err(*e));
                self.stopped = true;
            }
        }
        self.stopped
    }
}

/// One cell of a CQ's aux queue. The cells live in the domain's table, `cq_size` per CQ; a
/// CQ touches its cells only under its own lock, so a cell's lock is never contended (it is
/// what lets the table be shared without `unsafe`).
pub(crate) struct AuxCell(Mutex<Option<AuxItem>>);

impl AuxCell {
    /// An unused cell.
    #[allow(
        clippy::declare_interior_mutable_const,
        reason = "a fresh cell per use is the point: the domain's table is built of them"
    )]
    pub(crate) const EMPTY: Self = AuxCell(Mutex::new(None));
}

/// The aux queue's ring over the CQ's cells: `cap` (the CQ's size) of them used.
struct AuxRing {
    head: usize,
    len: usize,
    cap: usize,
}

/// The aux queue at work: the ring and the cells it indexes. (Not a `heapless::Deque`: the
/// cells are the domain's, shared with the other CQs' in one table, so the ring cannot own
/// them.)
struct Aux<'a> {
    ring: &'a mut AuxRing,
    row: &'a [AuxCell],
}

impl Aux<'_> {
    #[inline]
    fn front(&self) -> Option<AuxItem> {
        if self.ring.len == 0 {
            return None;
        }
        *self.row[self.ring.head].0.lock()
    }

    #[inline]
    fn pop(&mut self) {
        if self.ring.len > 0 {
            *self.row[self.ring.head].0.lock() = None;
            self.ring.head = (self.ring.head + 1) % self.ring.cap;
            self.ring.len -= 1;
        }
    }

    #[inline]
    fn len(&self) -> usize {
        self.ring.len
    }

    /// Appends `item`; `false` if full.
    fn push(&mut self, item: AuxItem) -> bool {
        if self.ring.len == self.ring.cap {
            return false;
        }
        *self.row[(self.ring.head + self.ring.len) % self.ring.cap]
            .0
            .lock() = Some(item);
        self.ring.len += 1;
        true
    }
}

struct CqState {
    ring: AuxRing,
    /// Where the next read starts its round-robin over the path table.
    next: usize,
}

impl CqState {
    /// The aux queue over `row`, the CQ's cells.
    #[inline]
    fn aux<'a>(&'a mut self, row: &'a [AuxCell]) -> Aux<'a> {
        Aux {
            ring: &mut self.ring,
            row,
        }
    }

    /// Queues a credited entry. Credits make this infallible; should the invariant ever break,
    /// the entry is not dropped silently: the CQ is declared overrun, as fi_cq(3) asks of a
    /// queue that lost a completion.
    fn push_credited(&mut self, row: &[AuxCell], slot: &CqSlot, item: AuxItem) {
        if !self.aux(row).push(item) {
            slot.release_credit();
            slot.overrun.store(true, Ordering::Release);
        }
    }
}

/// A CQ slot with its aux-queue cells: what code outside the CQ's own read works with.
#[derive(Clone, Copy)]
pub(crate) struct CqRef<'a> {
    slot: &'a CqSlot,
    row: &'a [AuxCell],
}

impl<'a> CqRef<'a> {
    pub(crate) fn new(slot: &'a CqSlot, row: &'a [AuxCell]) -> Self {
        CqRef { slot, row }
    }

    /// [`CqSlot::with_sink`] over this CQ's cells.
    pub(crate) fn with_sink<T>(
        &self,
        f: impl FnOnce(&mut dyn FnMut(Outcome<'_>)) -> T,
    ) -> Result<T> {
        self.slot.with_sink(self.row, f)
    }
}

impl core::ops::Deref for CqRef<'_> {
    type Target = CqSlot;

    fn deref(&self) -> &CqSlot {
        self.slot
    }
}

/// One slot of the domain's CQ table ([`crate::storage`]).
pub(crate) struct CqSlot {
    state: Mutex<Option<CqState>>,
    /// Completions the CQ can still promise (size − owed).
    credits: AtomicUsize,
    /// Paths bound to it.
    binds: AtomicUsize,
    /// Sticky overrun state.
    overrun: AtomicBool,
    /// The MSI-X vector the CQ holds ([`NO_VECTOR`] for none): the queues bound to it are
    /// steered there, and its wait handle is that vector's.
    pub(super) vector: AtomicU32,
    /// The wait set the CQ belongs to ([`NO_SET`] for none).
    pub(super) set: AtomicU32,
    /// Threads blocked on the CQ, and `signal`s.
    pub(super) sleepers: Mutex<Sleepers>,
}

impl CqSlot {
    /// A free slot.
    #[allow(
        clippy::declare_interior_mutable_const,
        reason = "a fresh slot per use is the point: the storage's table is built of them"
    )]
    pub(crate) const EMPTY: Self = CqSlot {
        state: Mutex::new(None),
        credits: AtomicUsize::new(0),
        binds: AtomicUsize::new(0),
        overrun: AtomicBool::new(false),
        vector: AtomicU32::new(NO_VECTOR),
        set: AtomicU32::new(NO_SET),
        sleepers: Mutex::new(Sleepers::NEW),
    };

    /// Opens the slot with `size` credits, its aux queue over `cells` of the domain's aux
    /// table.
    ///
    /// # Errors
    /// `Ok(false)` if the slot is in use; `Full(CqSize)` if `size` is more than `cells`.
    pub(crate) fn try_open(&self, size: usize, cells: usize) -> Result<bool> {
        let mut guard = self.state.lock();
        if guard.is_some() {
            return Ok(false);
        }
        if size > cells {
            return Err(Error::Full(Capacity::CqSize));
        }
        self.credits.store(size, Ordering::Release);
        self.binds.store(0, Ordering::Release);
        self.overrun.store(false, Ordering::Release);
        self.vector.store(NO_VECTOR, Ordering::SeqCst);
        self.set.store(NO_SET, Ordering::Release);
        *self.sleepers.lock() = Sleepers::NEW;
        *guard = Some(CqState {
            ring: AuxRing {
                head: 0,
                len: 0,
                cap: size,
            },
            next: 0,
        });
        Ok(true)
    }

    /// Reserves the credit of one operation about to be posted.
    ///
    /// # Errors
    /// `OpBadState` if the CQ is overrun (fatal: it reports nothing new); `Again` if it already
    /// owes as many completions as it can hold.
    pub(crate) fn reserve_credit(&self) -> Result {
        if self.overrun.load(Ordering::Acquire) {
            return Err(Error::OpBadState);
        }
        self.credits
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |c| c.checked_sub(1))
            .map(|_| ())
            .map_err(|_| Error::Again)
    }

    /// Reserves the credit of an entry no operation was posted for (a critical-fault report,
    /// crate::path's "Critical faults"). Without a free credit the entry cannot be queued
    /// without breaking the promise made to posted operations: the CQ is declared overrun
    /// (fi_cq(3): a queue that lost an entry) and `false` returned.
    pub(crate) fn reserve_report_credit(&self) -> bool {
        let ok = self
            .credits
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |c| c.checked_sub(1))
            .is_ok();
        if !ok {
            self.overrun.store(true, Ordering::Release);
        }
        ok
    }

    /// Gives back the credit of a completion delivered (or of a post that failed).
    pub(crate) fn release_credit(&self) {
        self.credits.fetch_add(1, Ordering::AcqRel);
    }

    /// Gives back `n` credits at once.
    pub(crate) fn release_credits(&self, n: usize) {
        if n > 0 {
            self.credits.fetch_add(n, Ordering::AcqRel);
        }
    }

    /// Completions the CQ can still promise.
    pub(crate) fn credits(&self) -> usize {
        self.credits.load(Ordering::Acquire)
    }

    /// Runs `f` with a sink that queues outcomes on the CQ's aux queue, in the order given,
    /// under the CQ lock — what an endpoint's cancel uses to report what it reclaimed. The CQ
    /// lock is taken before any path lock, the order `read` takes them in.
    ///
    /// `row` is the CQ's aux-queue cells ([`Domain::aux_row`]).
    ///
    /// # Errors
    /// `OpBadState` if the CQ is closed.
    pub(crate) fn with_sink<T>(
        &self,
        row: &[AuxCell],
        f: impl FnOnce(&mut dyn FnMut(Outcome<'_>)) -> T,
    ) -> Result<T> {
        let mut guard = self.state.lock();
        let st = guard.as_mut().ok_or(Error::OpBadState)?;
        let mut sink = |o: Outcome<'_>| match o {
            Outcome::Plain(p) => st.push_credited(row, self, AuxItem::Ok(p.completion())),
            Outcome::Done(c) => st.push_credited(row, self, AuxItem::Ok(*c)),
            Outcome::Failed(e) => st.push_credited(row, self, AuxItem::Err(*e)),
        };
        Ok(f(&mut sink))
    }

    /// Whether a thread is blocked reading the CQ (so a software insertion must wake it).
    pub(crate) fn has_sleepers(&self) -> bool {
        self.sleepers.lock().waiters() > 0
    }

    /// The MSI-X vector a blocking CQ owns: queues reporting to it must be steered there.
    pub(crate) fn interrupt_vector(&self) -> Option<u16> {
        u16::try_from(self.vector.load(Ordering::SeqCst)).ok()
    }

    /// Counts a binding (an endpoint direction) that keeps the CQ from closing.
    pub(crate) fn add_bind(&self) {
        self.binds.fetch_add(1, Ordering::AcqRel);
    }

    /// Forgets a binding counted by [`add_bind`](Self::add_bind).
    pub(crate) fn drop_bind(&self) {
        self.binds.fetch_sub(1, Ordering::AcqRel);
    }
}

/// An open completion queue of format `F` (`fid_cq`): an index into its domain's CQ table,
/// the attributes it was opened with, the `err_data` buffer `readerr` lends, and its wait
/// handle. Its methods take the domain it was opened in (another domain's is `Domain`).
///
/// Dropping the handle leaves the CQ open until the domain goes (its queues may still report
/// into it); [`close`](Self::close) closes it.
pub struct CompletionQueue<N: Nic, F: Format> {
    pub(super) domain: u32,
    pub(super) index: usize,
    pub(super) attr: ResolvedCqAttr,
    /// The provider-owned `err_data` buffer of `readerr` (fi_cq(3), err_data_size 0).
    err_buf: [u8; ERR_DATA_MAX],
    /// The wait handle of the CQ's vector, for the wait objects that block on one.
    pub(super) wait: Option<N::Wait>,
    _format: PhantomData<F>,
}

impl<N: Nic, F: Format> fmt::Debug for CompletionQueue<N, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CompletionQueue")
            .field("index", &self.index)
            .field("attr", &self.attr)
            .finish_non_exhaustive()
    }
}

impl<N: Nic, F: Format> CompletionQueue<N, F> {
    pub(super) fn new<const D: usize>(
        domain: &Domain<'_, N, D>,
        index: usize,
        attr: ResolvedCqAttr,
    ) -> Self {
        CompletionQueue {
            domain: domain.id(),
            index,
            attr,
            err_buf: [0; ERR_DATA_MAX],
            wait: None,
            _format: PhantomData,
        }
    }

    /// The CQ's slot in `dom`; a slot that is never open (so every operation finds the CQ
    /// closed) for a domain the CQ is not of.
    pub(super) fn slot<'d, const D: usize>(&self, dom: &'d Domain<'_, N, D>) -> &'d CqSlot {
        /// What a handle of another domain finds.
        static NONE: CqSlot = CqSlot::EMPTY;
        if dom.id() != self.domain {
            return &NONE;
        }
        dom.cqs().get(self.index).unwrap_or(&NONE)
    }

    /// The attributes the CQ was opened with, as resolved (size, format, …).
    pub fn attr(&self) -> &ResolvedCqAttr {
        &self.attr
    }

    /// The CQ's index in the domain's CQ table.
    pub fn index(&self) -> usize {
        self.index
    }

    /// The id of the domain the CQ belongs to.
    pub(crate) fn domain_id(&self) -> u32 {
        self.domain
    }

    /// Whether the CQ is in the overrun state.
    pub fn is_overrun<'d, 'n, const D: usize>(&self, dom: &'d Domain<'n, N, D>) -> bool {
        self.slot(dom).overrun.load(Ordering::Acquire)
    }

    /// Completions the CQ can still promise: its size minus what it owes.
    pub fn credits<'d, 'n, const D: usize>(&self, dom: &'d Domain<'n, N, D>) -> usize {
        self.slot(dom).credits.load(Ordering::Acquire)
    }

    /// Binds `path` (`fi_ep_bind` with a CQ, one direction).
    ///
    /// `flags` must contain the path's direction (`TRANSMIT` for a transmit path, `RECV` for a
    /// receive path); the other direction's bit is ignored, so an endpoint can pass the same
    /// flags to both of its paths. `SELECTIVE_COMPLETION` makes only operations posted with
    /// `COMPLETION` report success (errors are always reported).
    ///
    /// A CQ that blocks on an interrupt ([`interrupt_vector`](Self::interrupt_vector) is
    /// `Some(v)`) accepts only paths whose queue was opened with its interrupt steered to `v`
    /// (`TxConfig::with_vector(v)` / `RxConfig::with_vector(v)`): a completion on any other
    /// queue would not wake `sread`.
    ///
    /// # Errors
    /// `Domain` for a path of another domain; `Inval` without the path's direction, if the
    /// path is already bound (libfabric's util answers a duplicate binding the same way), or if
    /// the CQ blocks on vector `v` and the path's queue has no interrupt or the driver reports
    /// it steered to another vector.
    pub fn bind<'n, const D: usize>(
        &self,
        dom: &Domain<'n, N, D>,
        path: &Path<'_, 'n, N, D>,
        flags: BindFlags,
    ) -> Result {
        dom.check(self.domain)?;
        let vector = self.interrupt_vector(dom);
        self.with_path(dom, path, |pslot, st| {
            let dir = if st.is_tx() {
                BindFlags::TRANSMIT
            } else {
                BindFlags::RECV
            };
            if !flags.contains(dir) || st.cq.is_some() {
                return Err(Error::Inval);
            }
            if let Some(v) = vector {
                let (has, steered) = st.interrupt_steering();
                if !has || steered.is_some_and(|s| s != v) {
                    return Err(Error::Inval);
                }
            }
            st.set_binding(Some(self.index), flags);
            pslot.cq.store(self.index, Ordering::Release);
            self.slot(dom).binds.fetch_add(1, Ordering::AcqRel);
            Ok(())
        })
    }

    /// Unbinds `path`.
    ///
    /// # Errors
    /// `Inval` if it is not bound to this CQ; `Busy` while operations posted on it are
    /// outstanding (their completions are owed to this CQ).
    pub fn unbind<'n, const D: usize>(
        &self,
        dom: &Domain<'n, N, D>,
        path: &Path<'_, 'n, N, D>,
    ) -> Result {
        dom.check(self.domain)?;
        self.with_path(dom, path, |pslot, st| {
            if st.cq != Some(self.index) {
                return Err(Error::Inval);
            }
            if st.live() > 0 {
                return Err(Error::Busy);
            }
            st.set_binding(None, BindFlags::empty());
            pslot.cq.store(NO_CQ, Ordering::Release);
            self.slot(dom).binds.fetch_sub(1, Ordering::AcqRel);
            Ok(())
        })
    }

    /// Runs `f` on `path`'s slot and open state under the path lock: what `bind` and `unbind`
    /// share. `Domain` for a path of another domain, `Inval` for a path no longer open.
    fn with_path<'d, 'n, const D: usize>(
        &self,
        dom: &'d Domain<'n, N, D>,
        path: &Path<'_, 'n, N, D>,
        f: impl FnOnce(&PathSlot<'n, N, D>, &mut PathState<'n, N, D>) -> Result,
    ) -> Result {
        if !core::ptr::eq(path.domain, dom) {
            return Err(Error::Domain);
        }
        let pslot = &dom.paths()[path.index];
        let mut guard = pslot.state.lock();
        let Some(st) = guard.as_mut() else {
            return Err(Error::Inval);
        };
        f(pslot, st)
    }

    /// Closes the CQ (`fi_close`); completions still queued are discarded.
    ///
    /// # Errors
    /// `Err((Error::Busy, self))` while any path is bound: the CQ stays usable.
    #[allow(
        clippy::result_large_err,
        reason = "fi_close's Busy hands the handle back (as the issue asks); without an \
                  allocator there is no box to put it in, and close is not on the data path"
    )]
    pub fn close<const D: usize>(
        self,
        dom: &Domain<'_, N, D>,
    ) -> core::result::Result<(), (Error, Self)> {
        if let Err(e) = dom.check(self.domain) {
            return Err((e, self));
        }
        let slot = self.slot(dom);
        if slot.binds.load(Ordering::Acquire) > 0 {
            return Err((Error::Busy, self));
        }
        // Queued completions are lost with the slot, as fi_close says; the owned buffers they
        // carried go back to their regions.
        let mut guard = slot.state.lock();
        if let Some(st) = guard.as_mut() {
            let mut aux = st.aux(dom.aux_row(self.index));
            while let Some(item) = aux.front() {
                let c = match item {
                    AuxItem::Ok(c) => c,
                    AuxItem::Err(e) => e.completion,
                };
                release(dom.mrs(), c.owned);
                for raw in c.extra {
                    release(dom.mrs(), raw);
                }
                aux.pop();
            }
        }
        *guard = None;
        slot.credits.store(0, Ordering::Release);
        slot.vector.store(NO_VECTOR, Ordering::SeqCst);
        slot.set.store(NO_SET, Ordering::Release);
        Ok(())
    }

    /// Reads up to `out.len()` completions (`fi_cq_read`), oldest first per queue. See the
    /// [module documentation](self) for the order of work.
    ///
    /// With an empty `out` it drives progress (moves at most one completion per bound queue
    /// into the aux queue) and returns `Ok(0)` if anything is queued.
    ///
    /// # Errors
    /// `Again` when nothing is queued; `Avail` when an error is at the head (take it with
    /// [`readerr`](Self::readerr)); `Overrun` once an overrun CQ has delivered everything it
    /// held, on every call after.
    pub fn read<'d, 'n, const D: usize>(
        &self,
        dom: &'d Domain<'n, N, D>,
        out: &mut [F::Entry],
    ) -> Result<usize> {
        self.read_into(
            dom,
            &mut Delivery {
                out,
                src: None,
                bufs: None,
                iovs: None,
                mrs: dom.mrs(),
            },
        )
    }

    /// [`read`](Self::read) that also reports each entry's source (`fi_cq_readfrom`):
    /// `src[i]` is the sender of `out[i]` as a handle of the receiving endpoint's address
    /// vector, or [`FiAddr::NOTAVAIL`] when it is not there, or for a send (`FI_SOURCE`).
    ///
    /// # Errors
    /// As `read`; `Inval` if `src` is shorter than `out`.
    pub fn readfrom<'d, 'n, const D: usize>(
        &self,
        dom: &'d Domain<'n, N, D>,
        out: &mut [F::Entry],
        src: &mut [FiAddr],
    ) -> Result<usize> {
        if src.len() < out.len() {
            return Err(Error::Inval);
        }
        self.read_into(
            dom,
            &mut Delivery {
                out,
                src: Some(src),
                bufs: None,
                iovs: None,
                mrs: dom.mrs(),
            },
        )
    }

    /// [`readfrom`](Self::readfrom) that also hands back the owned [`Buf`] each operation was
    /// posted with (DESIGN.md decision 6): `bufs[i]` is `out[i]`'s buffer, or `None` for an
    /// operation posted without one. (`read` and `readfrom` drop such buffers: their memory
    /// stays with the region until it is closed.)
    ///
    /// # Errors
    /// As `read`; `Inval` if `src` or `bufs` is shorter than `out`.
    pub fn read_owned<'d, 'n, const D: usize>(
        &self,
        dom: &'d Domain<'n, N, D>,
        out: &mut [F::Entry],
        src: &mut [FiAddr],
        bufs: &mut [Option<Buf<'d>>],
    ) -> Result<usize> {
        if src.len() < out.len() || bufs.len() < out.len() {
            return Err(Error::Inval);
        }
        self.read_into(
            dom,
            &mut Delivery {
                out,
                src: Some(src),
                bufs: Some(bufs),
                iovs: None,
                mrs: dom.mrs(),
            },
        )
    }

    /// [`read_owned`](Self::read_owned) that hands back *every* buffer of each entry:
    /// `iovs[i]` holds `out[i]`'s — a gather send's several
    /// ([`Endpoint::sendv`](crate::ep::Endpoint::sendv)), one for any other operation posted
    /// with an owned buffer, none otherwise (lengths are not kept: 0).
    ///
    /// # Errors
    /// As `read`; `Inval` if `src` or `iovs` is shorter than `out`.
    pub fn read_owned_iov<'d, 'n, const D: usize>(
        &self,
        dom: &'d Domain<'n, N, D>,
        out: &mut [F::Entry],
        src: &mut [FiAddr],
        iovs: &mut [Iov<'d>],
    ) -> Result<usize> {
        if src.len() < out.len() || iovs.len() < out.len() {
            return Err(Error::Inval);
        }
        self.read_into(
            dom,
            &mut Delivery {
                out,
                src: Some(src),
                bufs: None,
                iovs: Some(iovs),
                mrs: dom.mrs(),
            },
        )
    }

    fn read_into<'d, 'n, const D: usize>(
        &self,
        dom: &'d Domain<'n, N, D>,
        d: &mut Delivery<'_, 'd, F, N>,
    ) -> Result<usize> {
        dom.check(self.domain)?;
        read_delivered(dom, self.index, d)
    }

    /// Takes the error completion at the head of the CQ (`fi_cq_readerr`) into `entry`,
    /// filling every field, and releases its credit.
    ///
    /// `err_data` is the caller's buffer for provider error data (`err_data_size` > 0 on
    /// input): the data is copied into it and `entry.err_data` points at it. With `None` or an
    /// empty buffer, `entry.err_data` points into the CQ's own buffer, which the returned
    /// borrow keeps unchanged — no `read` can run while it is held. The returned
    /// [`ErrDataOut`] is the same information, typed.
    ///
    /// # Errors
    /// `BadFlags` for non-zero `flags` (none is defined); `Again` unless an error is at the head
    /// (successes before it are `read` first); `Overrun` on an overrun CQ with nothing queued.
    pub fn readerr<'b, 'd, 'n, const D: usize>(
        &'b mut self,
        dom: &'d Domain<'n, N, D>,
        entry: &mut ErrEntry,
        err_data: Option<&mut [u8]>,
        flags: u64,
    ) -> Result<ErrDataOut<'b>> {
        self.readerr_owned(dom, entry, err_data, flags)
            .map(|(out, _buf)| out)
    }

    /// [`readerr`](Self::readerr) that also hands back the owned [`Buf`] the failed operation
    /// was posted with (`None` if it had none).
    ///
    /// # Errors
    /// As `readerr`.
    pub fn readerr_owned<'b, 'd, 'n, const D: usize>(
        &'b mut self,
        dom: &'d Domain<'n, N, D>,
        entry: &mut ErrEntry,
        err_data: Option<&mut [u8]>,
        flags: u64,
    ) -> Result<(ErrDataOut<'b>, Option<Buf<'d>>)> {
        // A gather send's further buffers, which this call has no place for, go back to
        // their regions.
        self.readerr_owned_iov(dom, entry, err_data, flags)
            .map(|(out, iov)| (out, iov.into_bufs().next()))
    }

    /// [`readerr_owned`](Self::readerr_owned) that hands back every buffer of the failed
    /// operation (a gather send's several; see [`read_owned_iov`](Self::read_owned_iov)).
    ///
    /// # Errors
    /// As `readerr`.
    pub fn readerr_owned_iov<'b, 'd, 'n, const D: usize>(
        &'b mut self,
        dom: &'d Domain<'n, N, D>,
        entry: &mut ErrEntry,
        err_data: Option<&mut [u8]>,
        flags: u64,
    ) -> Result<(ErrDataOut<'b>, Iov<'d>)> {
        if flags != 0 {
            return Err(Error::BadFlags);
        }
        dom.check(self.domain)?;
        let slot = self.slot(dom);
        let row = dom.aux_row(self.index);
        let rec = {
            let mut guard = slot.state.lock();
            let Some(st) = guard.as_mut() else {
                return Err(Error::OpBadState);
            };
            let mut aux = st.aux(row);
            match aux.front() {
                Some(AuxItem::Err(rec)) => {
                    aux.pop();
                    slot.release_credit();
                    rec
                }
                None if slot.overrun.load(Ordering::Acquire) => return Err(Error::Overrun),
                _ => return Err(Error::Again),
            }
        };

        let mut data = [0u8; ERR_DATA_MAX];
        let (prov_errno, data_len) = match (rec.prov, rec.err, rec.completion.src_raw) {
            (Some(p), _, _) => p.encode(&mut data),
            // FI_SOURCE_ERR: err_data is the sender's raw address (fi_cq(3)).
            (None, Error::AddrNotAvail, Some(raw)) => {
                data[..EpAddr::LEN].copy_from_slice(&raw.to_bytes());
                (ProvError::NONE, EpAddr::LEN)
            }
            (None, _, _) => (ProvError::NONE, 0),
        };
        let mrs = dom.mrs();
        let buf = Iov::from_bufs(
            core::iter::once(rec.completion.owned)
                .chain(rec.completion.extra)
                .filter_map(|raw| {
                    raw.and_then(|raw| owner_of(mrs, raw.mr).map(|o| Buf::from_raw(raw, o)))
                }),
        );
        let caller_ptr = err_data
            .as_deref()
            .map_or(BufAddr::NULL, |b| BufAddr(b.as_ptr() as usize));
        let out = deliver_err_data(&data[..data_len], err_data, &mut self.err_buf);
        let (ptr, size) = match out {
            ErrDataOut::Copied(n) => (caller_ptr, n),
            ErrDataOut::Provider([]) => (BufAddr::NULL, 0),
            ErrDataOut::Provider(s) => (BufAddr(s.as_ptr() as usize), s.len()),
        };
        *entry = ErrEntry {
            olen: rec.olen,
            err_data: ptr,
            err_data_size: size,
            src_addr: rec.completion.src.map_or(ADDR_NOTAVAIL, |a| a.0),
            ..ErrEntry::from_completion(&rec.completion, rec.err, prov_errno)
        };
        Ok((out, buf))
    }

    /// Writes a readable description of an error entry's provider detail (`fi_cq_strerror`),
    /// naming the NIC's error bits with its own table
    /// ([`Nic::rx_error_name`]).
    ///
    /// # Errors
    /// Only what `out` returns.
    pub fn strerror<'d, 'n, const D: usize>(
        &self,
        dom: &'d Domain<'n, N, D>,
        err: Option<Error>,
        prov_errno: i32,
        err_data: &[u8],
        out: &mut impl fmt::Write,
    ) -> fmt::Result {
        // Another domain's NIC may name its error bits otherwise: without this CQ's domain,
        // no names (the numbers are printed as they are).
        let nic = (dom.id() == self.domain).then(|| dom.nic());
        strerror::strerror(
            err,
            prov_errno,
            err_data,
            |b| nic.and_then(|n| n.rx_error_name(b)),
            out,
        )
    }

    /// Queues a software error entry that no posted operation reserved a credit for (an
    /// unknown-source report, later; a test hook now). It takes a free credit if there is one;
    /// if there is none, the CQ enters the overrun state and the entry is lost.
    ///
    /// # Errors
    /// `Overrun` if this entry overran the CQ (or it already was).
    #[doc(hidden)]
    pub fn report_uncredited<'d, 'n, const D: usize>(
        &self,
        dom: &'d Domain<'n, N, D>,
        context: OpContext,
        err: Error,
    ) -> Result {
        dom.check(self.domain)?;
        let slot = self.slot(dom);
        let mut guard = slot.state.lock();
        let Some(st) = guard.as_mut() else {
            return Err(Error::OpBadState);
        };
        if slot.overrun.load(Ordering::Acquire) {
            return Err(Error::Overrun);
        }
        if slot
            .credits
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |c| c.checked_sub(1))
            .is_err()
        {
            slot.overrun.store(true, Ordering::Release);
            return Err(Error::Overrun);
        }
        let rec = ErrRecord {
            completion: Completion {
                context,
                flags: CompletionFlags::empty(),
                ..Completion::default()
            },
            err,
            olen: 0,
            prov: None,
        };
        st.push_credited(dom.aux_row(self.index), slot, AuxItem::Err(rec));
        drop(guard);
        // A software insertion raises no interrupt: wake a blocked reader by hand.
        self.notify_sleepers(dom);
        Ok(())
    }
}

/// `read` of CQ `index`, as a function of the slot rather than of a handle: what `read`,
/// `sread` and a wait set share. An empty `out` is how waiting checks for "anything queued"
/// without taking it; the format then does not matter (a wait set checks CQs of any format as
/// `Context`). Kept exactly the shape `read` had, so `read::<F>` compiles to the same loop.
#[inline(always)]
pub(super) fn read_raw<N: Nic, const D: usize, F: Format>(
    domain: &Domain<'_, N, D>,
    index: usize,
    out: &mut [F::Entry],
) -> Result<usize> {
    read_delivered(
        domain,
        index,
        &mut Delivery::<'_, '_, F, N> {
            out,
            src: None,
            bufs: None,
            iovs: None,
            mrs: domain.mrs(),
        },
    )
}

/// The read loop every read shares, delivering into `d` (entries, and optionally sources and
/// owned buffers).
#[inline(always)]
pub(super) fn read_delivered<'s, N: Nic, const D: usize, F: Format>(
    domain: &'s Domain<'_, N, D>,
    index: usize,
    d: &mut Delivery<'_, 's, F, N>,
) -> Result<usize> {
    let cap = d.out.len();
    let slot = &domain.cqs()[index];
    let mut guard = slot.state.lock();
    let Some(st) = guard.as_mut() else {
        return Err(Error::OpBadState);
    };
    // The aux queue's cells are looked up only when it holds something (rare on a read);
    // the sink looks them up itself if it has to queue.
    let cells = domain.aux_cells(index);
    let row = if st.ring.len > 0 { cells.get() } else { &[] };

    let mut n = 0;
    while n < cap {
        let mut aux = st.aux(row);
        match aux.front() {
            Some(AuxItem::Ok(c)) => {
                d.put(n, &c);
                aux.pop();
                slot.release_credit();
                n += 1;
            }
            Some(AuxItem::Err(_)) if n == 0 => return Err(Error::Avail),
            Some(AuxItem::Err(_)) => return Ok(n),
            None => break,
        }
    }
    // Hardware is polled only behind an empty aux queue, so nothing overtakes what it holds.
    if st.aux(row).len() > 0 {
        return Ok(n);
    }

    let paths = domain.paths();
    let ctx = domain.poll_ctx(index);
    // Round-robin from `start`, wrapping by comparison rather than by division.
    let start = if st.next < paths.len() { st.next } else { 0 };
    st.next = if start + 1 < paths.len() {
        start + 1
    } else {
        0
    };
    let mut stopped = false;
    let (later, earlier) = paths.split_at(start);
    for pslot in earlier.iter().chain(later) {
        if stopped || (cap != 0 && n == cap) {
            break;
        }
        if !pslot.serves(index) {
            continue;
        }
        let mut pguard = pslot.state.lock();
        let Some(ps) = pguard.as_mut() else {
            continue;
        };
        if !ps.serves(index) {
            continue;
        }
        // `cap` 0 still takes one completion per queue, into the aux queue.
        let budget = if cap == 0 { 1 } else { cap - n };
        let mut sink = ReadSink {
            d: &mut *d,
            n,
            cap,
            delivered: 0,
            stopped,
            st: &mut *st,
            row: cells,
            slot,
        };
        ps.poll(budget, &ctx, &mut sink);
        // Credits of delivered entries go back once per queue, not once per entry: one atomic
        // add instead of many.
        slot.release_credits(sink.delivered);
        (n, stopped) = (sink.n, sink.stopped);
        pslot.publish_fault(ps);
    }

    let queued = st.aux(row).len();
    if n > 0 || (cap == 0 && queued > 0) {
        Ok(n)
    } else if queued > 0 {
        // Nothing delivered and something queued: an error is at the head.
        Err(Error::Avail)
    } else if slot.overrun.load(Ordering::Acquire) {
        Err(Error::Overrun)
    } else {
        Err(Error::Again)
    }
}
