//! The hard completion queue's handle, [`CompletionQueue`] (`fid_cq`): `read` and its
//! variants, `readerr`, `strerror`, binding, credits, overrun and close. `read` converts
//! completions straight from the bound queues' rings; a small software *aux queue* keeps, in
//! order, what cannot be delivered at once.
//!
//! What is under the handle lives beside it, in modules private to [`cq`](super): the read
//! loop every read shares (`read.rs`), the aux queue (`aux.rs`), and the CQ's slot in the
//! domain's table — its locked state, credits, bindings and overrun flag (`slot.rs`).
//! Blocking (`sread`, wait objects, wait sets) is [`wait`](super::wait).
//!
//! # The read path (DESIGN.md decision 1)
//!
//! [`CompletionQueue::read`]:
//!
//! 1. delivers the aux queue first — successes that were polled behind an error, then stops at
//!    an error at its head (returning what it has, or [`Error::Avail`] if nothing);
//! 2. then polls each bound path, round-robin from a start that advances every call (so one
//!    busy queue cannot starve another), for at most the entries still wanted, converting each
//!    completion through the path's op table straight into `F::Entry`; the CQ keeps a mask of
//!    the path slots that serve it (`CqSlot::paths`), so that only those are visited;
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
//! A CQ's aux queue is its row of the domain's aux table ([`crate::storage`]): `cq_size`
//! cells per CQ ([`Capacities::cq_size`](crate::storage::Capacities::cq_size), `CQ_SIZE` of a
//! [`Storage`](crate::storage::Storage)), which bounds the size a CQ can be opened with
//! ([`Capacity::CqSize`](crate::storage::Capacity::CqSize)). The CQ-owned `err_data` buffer of
//! `fi_cq_readerr` lives in the handle, so the borrow `readerr` returns keeps `read` from
//! running while the application looks at it.

use core::fmt;
use core::marker::PhantomData;
use core::sync::atomic::Ordering;

use super::attr::ResolvedCqAttr;
use super::aux::AuxItem;
use super::read::{drain_to_aux, read_delivered, Delivery};
use super::slot::CqSlot;
use super::wait::{NO_SET, NO_VECTOR};
use crate::addr::FiAddr;
use crate::buf::{owner_of, Buf, Iov};
use crate::domain::Domain;
use crate::engine::{release, Credits, ErrRecord, PathSlot, PathState, NO_CQ};
use crate::entry::{BufAddr, Completion, ErrEntry, Format, OpContext, ADDR_NOTAVAIL};
use crate::errdata::{deliver_err_data, ErrDataOut, ERR_DATA_MAX};
use crate::flags::{BindFlags, CompletionFlags};
use crate::hal::Nic;
use crate::path::Path;
use crate::strerror::{self, ProvError};
use crate::{Error, Result};

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

    /// The CQ's credits in `dom` (none, for a domain the CQ is not of).
    pub(super) fn credit<'d, const D: usize>(&self, dom: &'d Domain<'_, N, D>) -> &'d Credits {
        /// What a handle of another domain finds.
        static NONE: Credits = Credits::EMPTY;
        if dom.id() != self.domain {
            return &NONE;
        }
        dom.credits().get(self.index).unwrap_or(&NONE)
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
        self.credit(dom).is_overrun()
    }

    /// Completions the CQ can still promise: its size minus what it owes.
    pub fn credits<'d, 'n, const D: usize>(&self, dom: &'d Domain<'n, N, D>) -> usize {
        self.credit(dom).credits()
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
            dom.mark_serving(self.index, st.index, true);
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
            dom.mark_serving(self.index, st.index, false);
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
                release(dom.owners(), c.owned);
                for raw in c.extra {
                    release(dom.owners(), raw);
                }
                aux.pop();
            }
        }
        *guard = None;
        self.credit(dom).close();
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
                owners: dom.owners(),
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
                owners: dom.owners(),
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
                owners: dom.owners(),
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
                owners: dom.owners(),
            },
        )
    }

    fn read_into<'d, 'n, const D: usize>(
        &self,
        dom: &'d Domain<'n, N, D>,
        d: &mut Delivery<'_, 'd, F>,
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
                    self.credit(dom).release_credit();
                    rec
                }
                None if self.credit(dom).is_overrun() => return Err(Error::Overrun),
                _ => return Err(Error::Again),
            }
        };

        let mut data = [0u8; ERR_DATA_MAX];
        let (prov_errno, data_len) = match (rec.prov, rec.err, rec.completion.src_raw) {
            (Some(p), _, _) => p.encode(&mut data),
            // FI_SOURCE_ERR: err_data is the sender's raw address (fi_cq(3)).
            (None, Error::AddrNotAvail, Some(raw)) => (ProvError::NONE, raw.write(&mut data)),
            (None, _, _) => (ProvError::NONE, 0),
        };
        let owners = dom.owners();
        let buf = Iov::from_bufs(
            core::iter::once(rec.completion.owned)
                .chain(rec.completion.extra)
                .filter_map(|raw| {
                    raw.and_then(|raw| owner_of(owners, raw.mr).map(|o| Buf::from_raw(raw, o)))
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
        let credits = self.credit(dom);
        if credits.is_overrun() {
            return Err(Error::Overrun);
        }
        if !credits.take() {
            // The overrun happens now: what the devices completed before it is moved where
            // reads still find it, and nothing after it is polled (`drain_to_aux`).
            drain_to_aux::<N, D, F>(dom, self.index, st);
            st.sealed = true;
            credits.mark_overrun();
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
        st.push_credited(dom.aux_row(self.index), credits, AuxItem::Err(rec));
        drop(guard);
        // A software insertion raises no interrupt: wake a blocked reader by hand.
        self.notify_sleepers(dom);
        Ok(())
    }
}
