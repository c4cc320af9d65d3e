//! The domain (`fi_domain`): one NIC and the caller-provided slabs every object lives in.
//!
//! DESIGN.md decision 10, as docs/architecture.md ("Ownership") makes it concrete: a
//! [`Domain`] borrows the NIC (`&'n N`) and *slabs* of slots the caller places wherever it likes
//! (a `static` on bare metal, the stack or a `Vec` in a test): [`PathSlot`]s for hardware queues
//! and [`CqSlot`]s for completion queues. Objects are slots; applications hold small handles —
//! [`Path`], [`CompletionQueue`] — that are an index plus `&Domain`. Bindings are indices, so
//! closing a bound object is a run-time `Busy`, as libfabric's `fi_close` wants, not a borrow
//! error.
//!
//! ```
//! # use ringfab::{cq::{AuxEntry, CqSlot}, domain::Domain, path::PathSlot};
//! # fn f<N: ringfab::hal::Nic>(nic: &N) {
//! let paths = [PathSlot::<N, 64>::EMPTY; 2];
//! let cqs = [CqSlot::EMPTY; 1];
//! let domain = Domain::new(nic, &paths, &cqs);
//! # let _ = domain; }
//! ```
//!
//! What this first slice holds: paths (one hardware queue each) and completion queues. Later
//! issues add counters bound to paths, address vectors, memory registration and endpoints
//! (an endpoint owns a TX and an RX path), each in a slab of its own passed to the domain.

use crate::av::AvSlot;
use crate::cntr::Counter;
use crate::cq::attr::CqLimits;
use crate::cq::entry::Format;
use crate::cq::queue::{AuxEntry, CompletionQueue, CqSlot};
use crate::hal::{Nic, RxConfig, TxConfig};
use crate::mr::MrSlot;
use crate::path::{Path, PathSlot, PathState, PollCtx};
use crate::{Error, Result};

/// One NIC, its paths and its completion queues. See the [module documentation](self).
///
/// `D` is the ring depth of every hardware queue of the domain (a const generic because the
/// driver's queue types are sized by it).
pub struct Domain<'s, 'n, N: Nic + 'n, const D: usize> {
    nic: &'n N,
    paths: &'s [PathSlot<'n, N, D>],
    cqs: &'s [CqSlot<'s>],
    mrs: &'s [MrSlot<N>],
    avs: &'s [AvSlot<'s>],
    cntrs: &'s [&'s Counter<N::Wait>],
    limits: CqLimits,
}

impl<'s, 'n, N: Nic + 'n, const D: usize> Domain<'s, 'n, N, D> {
    /// A domain over `nic`, keeping its paths in `paths` and its CQs in `cqs` (every slot
    /// [`EMPTY`](PathSlot::EMPTY)).
    pub fn new(nic: &'n N, paths: &'s [PathSlot<'n, N, D>], cqs: &'s [CqSlot<'s>]) -> Self {
        Domain {
            nic,
            paths,
            cqs,
            mrs: &[],
            avs: &[],
            cntrs: &[],
            limits: CqLimits::default(),
        }
    }

    /// The same domain with memory registrations kept in `mrs` (every slot
    /// [`EMPTY`](MrSlot::EMPTY)); without it, `register` returns `NoMem`.
    pub fn with_mrs(mut self, mrs: &'s [MrSlot<N>]) -> Self {
        self.mrs = mrs;
        self
    }

    /// The same domain with `cntrs` as the counters its endpoints may bind (`fi_ep_bind` with
    /// a counter takes one of them). The domain borrows them for as long as it lives, so a
    /// counter cannot be closed while an endpoint could still count into it.
    pub fn with_counters(mut self, cntrs: &'s [&'s Counter<N::Wait>]) -> Self {
        self.cntrs = cntrs;
        self
    }

    /// The same domain with address vectors kept in `avs`; without it, `open_av` returns
    /// `NoMem`.
    pub fn with_avs(mut self, avs: &'s [AvSlot<'s>]) -> Self {
        self.avs = avs;
        self
    }

    /// The NIC.
    pub fn nic(&self) -> &'n N {
        self.nic
    }

    /// The limits `open_cq` validates attributes against.
    pub fn cq_limits(&self) -> CqLimits {
        self.limits
    }

    pub(crate) fn paths(&self) -> &'s [PathSlot<'n, N, D>] {
        self.paths
    }

    pub(crate) fn cqs(&self) -> &'s [CqSlot<'s>] {
        self.cqs
    }

    pub(crate) fn mrs(&self) -> &'s [MrSlot<N>] {
        self.mrs
    }

    pub(crate) fn avs(&self) -> &'s [AvSlot<'s>] {
        self.avs
    }

    pub(crate) fn cntrs(&self) -> &'s [&'s Counter<N::Wait>] {
        self.cntrs
    }

    /// What polling a path on behalf of CQ `index` needs from the domain.
    pub(crate) fn poll_ctx(&self, index: usize) -> PollCtx<'s, N> {
        PollCtx {
            cq: &self.cqs[index],
            reader: index,
            owner: 0,
            cqs: self.cqs,
            avs: self.avs,
            mrs: self.mrs,
            cntrs: self.cntrs,
        }
    }

    /// Opens transmit queue `index` of the NIC as a path.
    ///
    /// # Errors
    /// `NoMem` when every path slot is taken; `Device(_)` when the driver refuses the queue.
    pub fn open_tx(&self, index: u16, config: TxConfig) -> Result<Path<'_, 's, 'n, N, D>> {
        let in_order = self.nic.capabilities().in_order_completion;
        self.open_path(|| {
            Ok(PathState::new_tx(
                self.nic.open_tx::<D>(index, config)?,
                in_order,
            ))
        })
    }

    /// Opens receive queue `index` of the NIC as a path.
    ///
    /// # Errors
    /// As [`open_tx`](Self::open_tx).
    pub fn open_rx(&self, index: u16, config: RxConfig) -> Result<Path<'_, 's, 'n, N, D>> {
        let in_order = self.nic.capabilities().in_order_completion;
        self.open_path(|| {
            Ok(PathState::new_rx(
                self.nic.open_rx::<D>(index, config)?,
                in_order,
            ))
        })
    }

    fn open_path(
        &self,
        open: impl FnOnce() -> Result<PathState<'n, N, D>>,
    ) -> Result<Path<'_, 's, 'n, N, D>> {
        for (index, slot) in self.paths.iter().enumerate() {
            let mut guard = slot.state.lock();
            if guard.is_none() {
                *guard = Some(open()?);
                slot.clear_fault();
                return Ok(Path {
                    domain: self,
                    index,
                });
            }
        }
        Err(Error::NoMem)
    }

    /// Opens a completion queue of format `F` (`fi_cq_open`), its aux queue in `aux`.
    ///
    /// `aux` must hold at least the resolved size (`attr.size`, or the default 1024 for 0):
    /// the CQ can owe that many completions, and every one of them may have to wait in the aux
    /// queue. Open slots of `[AuxEntry::EMPTY; N]`. A CQ whose wait object blocks on an
    /// interrupt takes an MSI-X vector of its own (`crate::cq::wait` explains the choice);
    /// a CQ of a wait set is opened through [`WaitSet::open_cq`](crate::cq::WaitSet::open_cq).
    ///
    /// # Errors
    /// Everything [`CqAttr::validate`](crate::cq::CqAttr::validate) returns (`BadFlags`,
    /// `Inval`, `NoSys`); `Inval` if the resolved format is not `F::FORMAT`, or for
    /// `FI_WAIT_SET` (only the set can open its CQs); `TooSmall` if `aux` is shorter than the
    /// size; `NoMem` when every CQ slot is taken, or no interrupt vector is free for
    /// `FI_WAIT_FD`/`FI_WAIT_MUTEX_COND`; `NoSys` for `FI_WAIT_FD` when the platform's wait
    /// handles are not file descriptors.
    pub fn open_cq<F: Format>(
        &self,
        attr: &crate::cq::CqAttr,
        aux: &'s mut [AuxEntry],
    ) -> Result<CompletionQueue<'_, 's, 'n, N, D, F>> {
        CompletionQueue::open(self, attr, aux, None)
    }
}
