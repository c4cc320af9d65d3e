//! The tables a [`Domain`](crate::domain::Domain) keeps every object in, and their capacities.
//!
//! DESIGN.md decision 10: every object a domain opens — hardware queues with their op tables,
//! completion queues with their aux queues, memory registrations, address vectors with their
//! address tables — lives in a fixed-capacity table, so nothing is allocated once the domain
//! exists and the data path never allocates. The tables belong to the domain. Where they come
//! from:
//!
//! * under std (the `alloc` feature, on by default): [`Domain::new`](crate::domain::Domain::new)
//!   allocates them once, with the [`Capacities`] given (or the defaults);
//! * on bare metal: a [`Storage`] — the same tables as arrays sized by const generics, `const`
//!   to build, so it can be a `static` — lent to the domain for good with
//!   [`Domain::from_storage`](crate::domain::Domain::from_storage).
//!
//! An exhausted table is [`Error::Full`](crate::Error::Full), naming the [`Capacity`].
//!
//! # Drop order
//!
//! The domain's tables drop in declaration order: the hardware queues first (each driver stops
//! its queue), then the memory registrations (unmapping, then freeing owned memory). Memory a
//! stopped device can no longer write is the only memory ever freed; a domain leaked with
//! `mem::forget` leaks its memory with it.

use core::sync::atomic::AtomicUsize;

use spin::Mutex;

use crate::addr::{AvEntry, AvSlot};
use crate::cq::aux::AuxCell;
use crate::cq::slot::CqSlot;
use crate::engine::{Credits, PathSlot, PollTables, Table};
use crate::hal::Nic;
use crate::mr::MrSlot;

pub use crate::error::Capacity;

/// How many of each object a domain can hold at once. The defaults suit a few endpoints per
/// NIC; the memory they take is mostly op tables (one entry per ring slot, per hardware queue)
/// and aux queues (`cq_size` entries per CQ).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Capacities {
    /// Hardware queues open at once (an endpoint takes two, a context or shared context one).
    pub queues: usize,
    /// Completion queues open at once.
    pub cqs: usize,
    /// The largest CQ size, and the size of a CQ opened with size 0 when it is below 1024.
    pub cq_size: usize,
    /// Memory registrations.
    pub mrs: usize,
    /// Address vectors.
    pub avs: usize,
    /// Addresses of one address vector.
    pub av_entries: usize,
}

impl Capacities {
    /// 8 queues, 4 CQs of up to 1024 entries (libfabric's util CQ default size), 4 MRs,
    /// 2 AVs of 64 addresses; as a constant, for `Capacities { cqs: 1, ..Capacities::DEFAULT }`
    /// in a `const`.
    pub const DEFAULT: Capacities = Capacities {
        queues: 8,
        cqs: 4,
        cq_size: 1024,
        mrs: 4,
        avs: 2,
        av_entries: 64,
    };
}

impl Default for Capacities {
    /// [`Capacities::DEFAULT`].
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// The domain's tables, in drop order (see the [module documentation](self)).
pub(crate) struct Tables<'n, N: Nic + 'n, const D: usize> {
    pub(crate) paths: Table<'n, PathSlot<'n, N, D>>,
    pub(crate) cqs: Table<'n, CqSlot>,
    /// Every CQ's aux queue, `cq_size` cells each, CQ `i`'s at `i * cq_size`.
    pub(crate) aux: Table<'n, AuxCell>,
    pub(crate) cq_size: usize,
    pub(crate) mrs: Table<'n, MrSlot<N>>,
    /// The tables a path's poll reads.
    pub(crate) poll: PollTables<'n>,
}

#[cfg(feature = "alloc")]
impl<'n, N: Nic + 'n, const D: usize> Tables<'n, N, D> {
    /// Tables of `caps` on the heap.
    pub(crate) fn allocate(caps: &Capacities) -> Self {
        Tables {
            paths: Table::owned(caps.queues, || PathSlot::EMPTY),
            cqs: Table::owned(caps.cqs, || CqSlot::EMPTY),
            aux: Table::owned(caps.cqs * caps.cq_size, || AuxCell::EMPTY),
            cq_size: caps.cq_size,
            mrs: Table::owned(caps.mrs, || MrSlot::EMPTY),
            poll: PollTables {
                credits: Table::owned(caps.cqs, || Credits::EMPTY),
                avs: Table::owned(caps.avs, || AvSlot::EMPTY),
                av_entries: Table::owned(caps.avs * caps.av_entries, || AvEntry::EMPTY),
                av_size: caps.av_entries,
                owners: Table::owned(caps.mrs, || AtomicUsize::new(0)),
            },
        }
    }
}

/// A domain's tables as arrays, for a domain without an allocator: make it a `static` (its
/// [`new`](Self::new) is `const`) and lend it to
/// [`Domain::from_storage`](crate::domain::Domain::from_storage). The const generics are the
/// [`Capacities`] (`CQ_SIZE` is `cq_size`, and so on) and the ring depth `D`.
pub struct Storage<
    'n,
    N: Nic + 'n,
    const D: usize = 256,
    const QUEUES: usize = 8,
    const CQS: usize = 4,
    const CQ_SIZE: usize = 1024,
    const MRS: usize = 4,
    const AVS: usize = 2,
    const AV_ENTRIES: usize = 64,
> {
    // Declaration order is drop order: queues stop before memory is unmapped and freed.
    paths: [PathSlot<'n, N, D>; QUEUES],
    cqs: [CqSlot; CQS],
    credits: [Credits; CQS],
    aux: [[AuxCell; CQ_SIZE]; CQS],
    avs: [AvSlot; AVS],
    av_entries: [[AvEntry; AV_ENTRIES]; AVS],
    mrs: [MrSlot<N>; MRS],
    owners: [AtomicUsize; MRS],
    /// Whether a domain has it (a storage serves one domain).
    lent: Mutex<bool>,
}

impl<
        'n,
        N: Nic + 'n,
        const D: usize,
        const QUEUES: usize,
        const CQS: usize,
        const CQ_SIZE: usize,
        const MRS: usize,
        const AVS: usize,
        const AV_ENTRIES: usize,
    > Storage<'n, N, D, QUEUES, CQS, CQ_SIZE, MRS, AVS, AV_ENTRIES>
{
    /// Empty tables.
    pub const fn new() -> Self {
        Storage {
            paths: [const { PathSlot::EMPTY }; QUEUES],
            cqs: [const { CqSlot::EMPTY }; CQS],
            credits: [const { Credits::EMPTY }; CQS],
            aux: [const { [const { AuxCell::EMPTY }; CQ_SIZE] }; CQS],
            avs: [const { AvSlot::EMPTY }; AVS],
            av_entries: [const { [const { AvEntry::EMPTY }; AV_ENTRIES] }; AVS],
            mrs: [const { MrSlot::EMPTY }; MRS],
            owners: [const { AtomicUsize::new(0) }; MRS],
            lent: Mutex::new(false),
        }
    }

    /// The capacities the arrays hold.
    pub const fn capacities() -> Capacities {
        Capacities {
            queues: QUEUES,
            cqs: CQS,
            cq_size: CQ_SIZE,
            mrs: MRS,
            avs: AVS,
            av_entries: AV_ENTRIES,
        }
    }

    /// The tables, lent for `'n`, unless a domain has them already.
    pub(crate) fn lend(&'n self) -> Option<Tables<'n, N, D>> {
        let mut lent = self.lent.lock();
        if *lent {
            return None;
        }
        *lent = true;
        Some(Tables {
            paths: Table::Lent(&self.paths),
            cqs: Table::Lent(&self.cqs),
            aux: Table::Lent(self.aux.as_flattened()),
            cq_size: CQ_SIZE,
            mrs: Table::Lent(&self.mrs),
            poll: PollTables {
                credits: Table::Lent(&self.credits),
                avs: Table::Lent(&self.avs),
                av_entries: Table::Lent(self.av_entries.as_flattened()),
                av_size: AV_ENTRIES,
                owners: Table::Lent(&self.owners),
            },
        })
    }
}

impl<
        'n,
        N: Nic + 'n,
        const D: usize,
        const QUEUES: usize,
        const CQS: usize,
        const CQ_SIZE: usize,
        const MRS: usize,
        const AVS: usize,
        const AV_ENTRIES: usize,
    > Default for Storage<'n, N, D, QUEUES, CQS, CQ_SIZE, MRS, AVS, AV_ENTRIES>
{
    fn default() -> Self {
        Self::new()
    }
}
