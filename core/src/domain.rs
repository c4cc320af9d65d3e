//! The domain (`fi_domain`): one NIC and the [`Storage`] every object it opens lives in.
//!
//! DESIGN.md decision 10, as docs/architecture.md ("Ownership") makes it concrete: a
//! [`Domain`] borrows the NIC (`&'n N`) and one [`Storage`] (`&'s mut`), whose fixed tables hold
//! every hardware queue, completion queue, memory registration and address vector the domain
//! opens. Applications hold small handles that are an index plus `&Domain`. Bindings are
//! indices, so closing a bound object is a run-time `Busy`, as libfabric's `fi_close` wants,
//! not a borrow error.
//!
//! ```
//! # use ringfab::{domain::Domain, storage::Storage};
//! # fn f<N: ringfab::hal::Nic>(nic: &N) {
//! let mut storage = Storage::<N>::boxed();
//! let domain = Domain::new(nic, &mut storage);
//! # let _ = domain; }
//! ```

use crate::av::AvSlot;
use crate::cntr::Counter;
use crate::cq::attr::CqLimits;
use crate::cq::entry::Format;
use crate::cq::queue::{CompletionQueue, CqSlot};
use crate::hal::{Nic, RxConfig, TxConfig};
use crate::mr::MrSlot;
use crate::path::{Path, PathSlot, PathState, PollCtx};
use crate::storage::{Capacity, Storage};
use crate::{Error, Result};

/// One NIC and the storage of everything opened on it. See the [module documentation](self).
///
/// `D` is the ring depth of every hardware queue of the domain (a const generic because the
/// driver's queue types are sized by it).
pub struct Domain<'s, 'n, N: Nic + 'n, const D: usize = 256> {
    nic: &'n N,
    paths: &'s [PathSlot<'n, N, D>],
    cqs: &'s [CqSlot<'s>],
    mrs: &'s [MrSlot<N>],
    avs: &'s [AvSlot<'s>],
    cntrs: &'s [&'s Counter<N::Wait>],
    limits: CqLimits,
}

impl<'s, 'n, N: Nic + 'n, const D: usize> Domain<'s, 'n, N, D> {
    /// A domain over `nic`, keeping every object it opens in `storage` (which it borrows for
    /// as long as those objects may be used, so one storage serves one domain).
    pub fn new<
        const QUEUES: usize,
        const CQS: usize,
        const CQ_SIZE: usize,
        const MRS: usize,
        const AVS: usize,
        const AV_ENTRIES: usize,
    >(
        nic: &'n N,
        storage: &'s mut Storage<'s, 'n, N, D, QUEUES, CQS, CQ_SIZE, MRS, AVS, AV_ENTRIES>,
    ) -> Self {
        let storage = storage.attach();
        Domain {
            nic,
            paths: &storage.paths,
            cqs: &storage.cqs,
            mrs: &storage.mrs,
            avs: &storage.avs,
            cntrs: &[],
            limits: CqLimits {
                default_size: CqLimits::DEFAULT_SIZE.min(CQ_SIZE),
                ..CqLimits::default()
            },
        }
    }

    /// The same domain with `cntrs` as the counters its endpoints may bind (`fi_ep_bind` with
    /// a counter takes one of them). The domain borrows them for as long as it lives, so a
    /// counter cannot be closed while an endpoint could still count into it.
    pub fn with_counters(mut self, cntrs: &'s [&'s Counter<N::Wait>]) -> Self {
        self.cntrs = cntrs;
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
        Err(Error::Full(Capacity::Queues))
    }

    /// Opens a completion queue of format `F` (`fi_cq_open`).
    ///
    /// The format is `F`'s: `attr.format` may say the same or leave it
    /// [`Unspec`](crate::cq::CqFormat::Unspec). A size of 0 is 1024 entries or the storage's
    /// `CQ_SIZE`, whichever is smaller. A CQ whose wait object blocks on an interrupt takes an
    /// MSI-X vector of its own (`crate::cq::wait` explains the choice); a CQ of a wait set is
    /// opened through [`WaitSet::open_cq`](crate::cq::WaitSet::open_cq).
    ///
    /// # Errors
    /// Everything [`CqAttr::validate`](crate::cq::CqAttr::validate) returns (`BadFlags`,
    /// `Inval`, `NoSys`); `Inval` if `attr.format` names another format than `F`, or for
    /// `FI_WAIT_SET` (only the set can open its CQs); `Full(Cqs)` when every CQ slot is taken,
    /// `Full(CqSize)` for a size above the storage's `CQ_SIZE`, `Full(Vectors)` when no
    /// interrupt vector is free for `FI_WAIT_FD`/`FI_WAIT_MUTEX_COND`; `NoSys` for
    /// `FI_WAIT_FD` when the platform's wait handles are not file descriptors.
    pub fn open_cq<F: Format>(
        &self,
        attr: &crate::cq::CqAttr,
    ) -> Result<CompletionQueue<'_, 's, 'n, N, D, F>> {
        CompletionQueue::open(self, attr, None)
    }
}
