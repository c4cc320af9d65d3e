//! The domain (`fi_domain`): one NIC and the tables every object it opens lives in.
//!
//! DESIGN.md decision 10, as docs/architecture.md ("Ownership") makes it concrete: a
//! [`Domain`] borrows the NIC (`&'n N`) and owns fixed tables ([`crate::storage`]) that hold
//! every hardware queue, completion queue, memory registration and address vector it opens —
//! allocated once by [`Domain::new`] under std, or lent by a `static` [`Storage`] on bare metal.
//! Applications hold handles with no lifetime — an index into a table, the domain's id, and
//! what the object keeps of its own (an endpoint's bindings, a CQ's attributes) — and pass the
//! domain to their methods (`ep.send(&domain, …)`); a handle given another domain gets
//! `Error::Domain`. Bindings are indices, so closing a bound object is a run-time `Busy`, as
//! libfabric's `fi_close` wants, not a borrow error; objects not closed go with the domain.
//!
//! ```
//! # use ringfab::domain::Domain;
//! # fn f<N: ringfab::hal::Nic>(nic: &N) {
//! let domain = Domain::new(nic);
//! # let _ = domain; }
//! ```

use crate::addr::AvTables;
use crate::clock::Clock;
use crate::cntr::Counter;
use crate::cq::attr::CqLimits;
use crate::cq::aux::{AuxCell, AuxRow};
use crate::cq::queue::CompletionQueue;
use crate::cq::slot::{CqRef, CqSlot, PATH_BITS};
use crate::engine::{Credits, IpCtx, IpHost, PathSlot, PathState, PollCtx};
use crate::entry::Format;
use crate::hal::{MacAddr, Nic, RssConfig, RssHashes, RssSaved, RxConfig, TxConfig};
use crate::ip::{IpDrops, Ipv4Addr, Ipv4Config};
use crate::mr::MrSlot;
use crate::path::Path;
#[cfg(feature = "alloc")]
use crate::storage::Capacities;
use crate::storage::{Capacity, Storage, Tables};
use crate::{Error, Result};
use core::sync::atomic::{AtomicU32, Ordering};
use core::time::Duration;
use spin::Mutex;

/// One NIC and the tables of everything opened on it. See the [module documentation](self).
///
/// `D` is the ring depth of every hardware queue of the domain (a const generic because the
/// driver's queue types are sized by it). `'n` is how long what the domain borrows lives: the
/// NIC, and the counters it may count into.
pub struct Domain<'n, N: Nic + 'n, const D: usize = 256> {
    /// Tells the domain's handles from another's (they keep it and check it on every call).
    id: u32,
    nic: &'n N,
    tables: Tables<'n, N, D>,
    cntrs: &'n [&'n Counter<N::Wait>],
    limits: CqLimits,
    /// What the domain's objects set on the NIC beyond their queues, so that the domain's end
    /// undoes what objects left open did: receive queues given an address of their own (one
    /// bit each), and whether RSS is on.
    steering: Mutex<Steering>,
    /// The IPv4 host of plain-UDP endpoints (`docs/ip.md`): configuration, ARP, ports.
    ip: IpHost,
    /// The time source of ARP's retries and expiry ([`with_clock`](Self::with_clock)).
    clock: Option<&'n (dyn Clock + Sync)>,
}

/// NIC state the domain's objects programmed (see `Domain::steering`).
#[derive(Default)]
struct Steering {
    /// Receive queues with an address of their own (`Nic::set_rx_queue_mac`), one bit each.
    queue_macs: u64,
    /// RSS programmed on (`Nic::set_rss` with hashes).
    rss: bool,
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
        /// Ids of the domains made so far (an id is never reused while the process lives;
        /// after 2^32 domains it wraps, which only weakens a check of a programming error).
        static NEXT_ID: AtomicU32 = AtomicU32::new(1);
        Domain {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            nic,
            tables,
            cntrs: &[],
            limits,
            steering: Mutex::new(Steering::default()),
            ip: IpHost::new(),
            clock: None,
        }
    }

    /// The same domain with `clock` as its time source: what ARP's retries and cache expiry
    /// of plain-UDP endpoints are measured with (`docs/ip.md`). A domain has no clock of its
    /// own (core is `no_std`); one is needed before [`set_ipv4`](Self::set_ipv4).
    pub fn with_clock(mut self, clock: &'n (dyn Clock + Sync)) -> Self {
        self.clock = Some(clock);
        self
    }

    /// Gives the domain its IPv4 configuration (`docs/ip.md`, "The domain's IPv4
    /// configuration"), as `ip addr add` would: plain-UDP endpoints send from this address and
    /// receive what is sent to it, its broadcast addresses or the limited broadcast. The ARP
    /// cache starts empty.
    ///
    /// # Errors
    /// `Inval` for a configuration that cannot be a host's ([`Ipv4Config::validate`]) or a
    /// domain without a clock ([`with_clock`](Self::with_clock)); `Busy` while a plain-UDP
    /// endpoint is enabled (the cache and every next hop depend on the configuration).
    pub fn set_ipv4(&self, config: Ipv4Config) -> Result {
        config.validate()?;
        if self.clock.is_none() {
            return Err(Error::Inval);
        }
        let busy = self.paths().iter().any(|p| {
            p.state
                .lock()
                .as_ref()
                .is_some_and(|st| st.kind.framing().is_some_and(|f| !f.encap.is_ringfab()))
        });
        if busy {
            return Err(Error::Busy);
        }
        let caps = self.nic.capabilities();
        self.ip
            .configure(caps.mac, config, caps.offloads.tx_l4_checksum);
        Ok(())
    }

    /// The IPv4 configuration, if [`set_ipv4`](Self::set_ipv4) gave one.
    pub fn ipv4(&self) -> Option<Ipv4Config> {
        self.ip.config()
    }

    /// What the domain's plain-UDP endpoints dropped, by reason (`docs/ip.md`).
    pub fn ip_drops(&self) -> IpDrops {
        self.ip.drops()
    }

    /// The domain's IPv4 host.
    pub(crate) fn ip(&self) -> &IpHost {
        &self.ip
    }

    /// The time on the domain's clock (zero without one).
    pub(crate) fn now(&self) -> Duration {
        self.clock.map_or(Duration::ZERO, |c| c.now())
    }

    /// Starts resolving `dst`'s next hop, if the domain has an IPv4 configuration (a peer
    /// inserted in an AV).
    pub(crate) fn ip_prefetch(&self, dst: Ipv4Addr) {
        if self.clock.is_some() {
            self.ip.prefetch(dst, self.now());
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

    /// The domain's id: what its handles keep to tell it from another domain.
    pub(crate) fn id(&self) -> u32 {
        self.id
    }

    /// `Domain` unless `id` is this domain's (a handle of another domain passed to it).
    pub(crate) fn check(&self, id: u32) -> Result {
        if id == self.id {
            Ok(())
        } else {
            Err(Error::Domain)
        }
    }

    /// Gives receive queue `queue` an address of its own, or takes it back (`None`)
    /// ([`Nic::set_rx_queue_mac`]), and remembers it for the domain's end.
    pub(crate) fn steer_queue(&self, queue: u16, mac: Option<MacAddr>) -> Result {
        let mut s = self.steering.lock();
        self.nic.set_rx_queue_mac(queue, mac)?;
        let bit = 1u64.checked_shl(u32::from(queue)).unwrap_or(0);
        if mac.is_some() {
            s.queue_macs |= bit;
        } else {
            s.queue_macs &= !bit;
        }
        Ok(())
    }

    /// Programs RSS ([`Nic::set_rss`]) and remembers whether it is on, for the domain's end.
    pub(crate) fn program_rss(&self, rss: &RssConfig<'_>) -> Result {
        let mut s = self.steering.lock();
        self.nic.set_rss(rss)?;
        s.rss = rss.hashes != RssHashes::default();
        Ok(())
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

    /// Marks path slot `path` as serving CQ `cq` in the CQ's mask ([`CqSlot::paths`]), or as
    /// no longer serving it: before the path slot starts saying it serves the CQ (its `cq` or
    /// `cq_mask`), after it stops, so that a read never skips a path that serves its CQ.
    /// Nothing for a slot the mask has no bit for (every read visits those) or a CQ index out
    /// of the table.
    pub(crate) fn mark_serving(&self, cq: usize, path: usize, serves: bool) {
        let Some(slot) = self.cqs().get(cq).filter(|_| path < PATH_BITS) else {
            return;
        };
        if serves {
            slot.paths.fetch_or(1 << path, Ordering::AcqRel);
        } else {
            slot.paths.fetch_and(!(1 << path), Ordering::AcqRel);
        }
    }

    /// Every CQ's credits, at the CQ's index.
    pub(crate) fn credits(&self) -> &[Credits] {
        self.tables.poll.credits()
    }

    /// CQ `index` with its aux-queue cells, if the domain has a CQ slot of that index.
    #[inline]
    pub(crate) fn cq(&self, index: usize) -> Option<CqRef<'_>> {
        Some(CqRef::new(
            self.cqs().get(index)?,
            self.aux_cells(index),
            self.credits().get(index)?,
        ))
    }

    /// Where CQ `index`'s aux-queue cells are (sliced when needed).
    pub(crate) fn aux_cells(&self, index: usize) -> AuxRow<'_> {
        AuxRow {
            cells: &self.tables.aux,
            index,
            size: self.tables.cq_size,
        }
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

    /// Live buffers of each registration, at the region's index (`crate::buf::owner_of`).
    pub(crate) fn owners(&self) -> &[core::sync::atomic::AtomicUsize] {
        self.tables.poll.owners()
    }

    pub(crate) fn avs(&self) -> AvTables<'_> {
        self.tables.poll.avs()
    }

    pub(crate) fn cntrs(&self) -> &'n [&'n Counter<N::Wait>] {
        self.cntrs
    }

    /// What polling a path on behalf of CQ `index` needs from the domain.
    pub(crate) fn poll_ctx(&self, index: usize) -> PollCtx<'_> {
        PollCtx {
            cq: &self.credits()[index],
            reader: index,
            owner: 0,
            tables: &self.tables.poll,
            cntrs: &self.cntrs,
            ip: self.ip_ctx(),
        }
    }

    /// The domain's IPv4 host and its clock, for a path's progress (with a clock only).
    pub(crate) fn ip_ctx(&self) -> Option<IpCtx<'_>> {
        self.clock.map(|clock| IpCtx {
            host: &self.ip,
            clock,
        })
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
                let mut st = open()?;
                st.index = index;
                *guard = Some(st);
                slot.clear_fault();
                return Ok(Path {
                    domain: self,
                    index,
                    closes: true,
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
    pub fn open_cq<F: Format>(&self, attr: &crate::cq::CqAttr) -> Result<CompletionQueue<N, F>> {
        CompletionQueue::open(self, attr, None)
    }
}

impl<N: Nic, const D: usize> Drop for Domain<'_, N, D> {
    /// Undoes what objects left open set on the NIC beyond their queues (an address of a
    /// receive queue's own, RSS), so that the NIC is as the next user expects; the queues
    /// themselves stop as the tables drop, after this. Nothing to report from a drop.
    fn drop(&mut self) {
        let s = self.steering.get_mut();
        for q in (0..64u16).filter(|q| s.queue_macs & (1 << q) != 0) {
            let _ = self.nic.set_rx_queue_mac(q, None);
        }
        if let (true, Some(caps)) = (s.rss, self.nic.capabilities().rss) {
            // Off as a scalable endpoint turns it off: no hashes, a key and table of the
            // NIC's sizes (the driver checks them whatever the hashes).
            let mut key = [0u8; RssSaved::MAX_KEY];
            let mut table = [0u16; RssSaved::MAX_TABLE];
            let _ = self.nic.set_rss(&RssConfig {
                key: key.get_mut(..caps.key_len).unwrap_or_default(),
                table: table.get_mut(..caps.table_len).unwrap_or_default(),
                hashes: RssHashes::default(),
            });
        }
    }
}
