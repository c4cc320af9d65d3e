//! The domain (`fi_domain`): one NIC and the tables every object it opens lives in.
//!
//! DESIGN.md decision 10, as docs/architecture.md ("Ownership") makes it concrete: a
//! [`Domain`] borrows the NIC (`&'n N`) and owns fixed tables ([`crate::storage`]) that hold
//! every hardware queue, completion queue, memory registration and address vector it opens —
//! allocated once by [`Domain::new`] under std, or lent by a `static` [`Storage`] on bare metal.
//! Applications hold small handles that are an index plus `&Domain`. Bindings are indices, so
//! closing a bound object is a run-time `Busy`, as libfabric's `fi_close` wants, not a borrow
//! error.
//!
//! ```
//! # use ringfab::domain::Domain;
//! # fn f<N: ringfab::hal::Nic>(nic: &N) {
//! let domain = Domain::new(nic);
//! # let _ = domain; }
//! ```

use crate::av::AvTables;
use crate::cntr::Counter;
use crate::cq::attr::CqLimits;
use crate::cq::entry::Format;
use crate::cq::queue::{AuxCell, CompletionQueue, CqRef, CqSlot};
use crate::hal::{Nic, RxConfig, TxConfig};
use crate::mr::MrSlot;
use crate::path::{Path, PathSlot, PathState, PollCtx};
#[cfg(feature = "alloc")]
use crate::storage::Capacities;
use crate::storage::{Capacity, Storage, Tables};
use crate::{Error, Result};

/// One NIC and the tables of everything opened on it. See the [module documentation](self).
///
/// `D` is the ring depth of every hardware queue of the domain (a const generic because the
/// driver's queue types are sized by it). `'n` is how long what the domain borrows lives: the
/// NIC, and the counters it may count into.
pub struct Domain<'n, N: Nic + 'n, const D: usize = 256> {
    nic: &'n N,
    tables: Tables<'n, N, D>,
    cntrs: &'n [&'n Counter<N::Wait>],
    limits: CqLimits,
}

#[cfg(feature = "alloc")]
impl<'n, N: Nic + 'n> Domain<'n, N> {
    /// A domain over `nic` with rings of 256 descriptors and the default [`Capacities`].
    pub fn new(nic: &'n N) -> Self {
        Self::with_capacities(nic, &Capacities::default())
    }
}

impl<'n, N: Nic + 'n, const D: usize> Domain<'n, N, D> {
    /// A domain over `nic` whose tables hold `caps`, allocated now (and only now).
    #[cfg(feature = "alloc")]
    pub fn with_capacities(nic: &'n N, caps: &Capacities) -> Self {
        Self::over(nic, Tables::allocate(caps))
    }

    /// A domain over `nic` keeping everything in `storage` (a `static` on bare metal: the
    /// domain owns its tables from now on, and a storage serves one domain).
    ///
    /// # Errors
    /// `Busy` if another domain has the storage.
    pub fn from_storage<
        const QUEUES: usize,
        const CQS: usize,
        const CQ_SIZE: usize,
        const MRS: usize,
        const AVS: usize,
        const AV_ENTRIES: usize,
    >(
        nic: &'n N,
        storage: &'n Storage<'n, N, D, QUEUES, CQS, CQ_SIZE, MRS, AVS, AV_ENTRIES>,
    ) -> Result<Self> {
        storage
            .lend()
            .map(|tables| Self::over(nic, tables))
            .ok_or(Error::Busy)
    }

    fn over(nic: &'n N, tables: Tables<'n, N, D>) -> Self {
        let limits = CqLimits {
            default_size: CqLimits::DEFAULT_SIZE.min(tables.cq_size),
            ..CqLimits::default()
        };
        Domain {
            nic,
            tables,
            cntrs: &[],
            limits,
        }
    }

    /// The same domain with `cntrs` as the counters its endpoints may bind (`fi_ep_bind` with
    /// a counter takes one of them). The domain borrows them for as long as it lives, so a
    /// counter cannot be closed while an endpoint could still count into it.
    pub fn with_counters(mut self, cntrs: &'n [&'n Counter<N::Wait>]) -> Self {
        self.cntrs = cntrs;
        self
    }

    /// The largest size a CQ of this domain can have (its aux queues' capacity).
    pub fn max_cq_size(&self) -> usize {
        self.tables.cq_size
    }

    /// The NIC.
    pub fn nic(&self) -> &'n N {
        self.nic
    }

    /// The limits `open_cq` validates attributes against.
    pub fn cq_limits(&self) -> CqLimits {
        self.limits
    }

    pub(crate) fn paths(&self) -> &[PathSlot<'n, N, D>] {
        &self.tables.paths
    }

    pub(crate) fn cqs(&self) -> &[CqSlot] {
        &self.tables.cqs
    }

    /// CQ `index` with its aux-queue cells, if the domain has a CQ slot of that index.
    pub(crate) fn cq(&self, index: usize) -> Option<CqRef<'_>> {
        Some(CqRef::new(self.cqs().get(index)?, self.aux_row(index)))
    }

    /// CQ `index`'s aux-queue cells.
    pub(crate) fn aux_row(&self, index: usize) -> &[AuxCell] {
        let size = self.tables.cq_size;
        self.tables
            .aux
            .get(index * size..)
            .and_then(|r| r.get(..size))
            .unwrap_or_default()
    }

    pub(crate) fn mrs(&self) -> &[MrSlot<N>] {
        &self.tables.mrs
    }

    pub(crate) fn avs(&self) -> AvTables<'_> {
        AvTables {
            slots: &self.tables.avs,
            entries: &self.tables.av_entries,
            size: self.tables.av_size,
        }
    }

    pub(crate) fn cntrs(&self) -> &'n [&'n Counter<N::Wait>] {
        self.cntrs
    }

    /// What polling a path on behalf of CQ `index` needs from the domain.
    pub(crate) fn poll_ctx(&self, index: usize) -> PollCtx<'_, N> {
        PollCtx {
            cq: &self.cqs()[index],
            reader: index,
            owner: 0,
            cqs: self.cqs(),
            avs: self.avs(),
            mrs: self.mrs(),
            cntrs: self.cntrs,
        }
    }

    /// Opens transmit queue `index` of the NIC as a path.
    ///
    /// # Errors
    /// `NoMem` when every path slot is taken; `Device(_)` when the driver refuses the queue.
    pub fn open_tx(&self, index: u16, config: TxConfig) -> Result<Path<'_, 'n, N, D>> {
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
    pub fn open_rx(&self, index: u16, config: RxConfig) -> Result<Path<'_, 'n, N, D>> {
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
    ) -> Result<Path<'_, 'n, N, D>> {
        for (index, slot) in self.paths().iter().enumerate() {
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
    ) -> Result<CompletionQueue<'_, 'n, N, D, F>> {
        CompletionQueue::open(self, attr, None)
    }
}
