//! The one storage object a [`Domain`](crate::domain::Domain) keeps everything in.
//!
//! DESIGN.md decision 10: core allocates nothing, so every object a domain opens — hardware
//! queues with their op tables, completion queues with their aux queues, memory registrations,
//! address vectors with their tables — lives in a fixed-capacity table the application places.
//! [`Storage`] is all of those tables in one value, its capacities given as const generics
//! with defaults that suit one or two endpoints per NIC:
//!
//! | parameter | default | what it bounds |
//! |---|---|---|
//! | `D` | 256 | depth of every hardware ring (the driver's queue types are sized by it) |
//! | `QUEUES` | 8 | hardware queues open at once (an endpoint takes two, a context one) |
//! | `CQS` | 4 | completion queues open at once |
//! | `CQ_SIZE` | 512 | the largest CQ size, and the size of a CQ opened with size 0 |
//! | `MRS` | 4 | memory registrations |
//! | `AVS` | 2 | address vectors |
//! | `AV_ENTRIES` | 64 | addresses per address vector |
//!
//! An exhausted table is [`Error::Full`](crate::Error::Full), naming the [`Capacity`].
//!
//! Where it lives: on the heap under std ([`Storage::boxed`]: the default is about 730 KiB on
//! igb, mostly op tables and aux queues), in a `static` on bare metal ([`Storage::new`] is
//! `const`), or on the stack for small capacities. [`Domain::new`](crate::domain::Domain::new)
//! borrows it mutably for as long as the domain's objects may be used, so one storage serves one
//! domain.
//!
//! # Drop order
//!
//! Fields drop in declaration order: the hardware queues first (each driver stops its queue),
//! then the memory registrations (unmapping, then freeing owned memory). Memory a stopped device
//! can no longer write is the only memory ever freed.

use heapless::Deque;
use spin::Mutex;

use crate::av::{AvEntry, AvSlot};
use crate::cq::queue::{AuxItem, CqSlot};
use crate::hal::Nic;
use crate::mr::MrSlot;
use crate::path::PathSlot;

/// Which fixed capacity of a domain's [`Storage`] an open or a registration found used up.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub enum Capacity {
    /// `QUEUES`: hardware queues (endpoints, contexts, shared contexts).
    Queues,
    /// `CQS`: completion queues.
    Cqs,
    /// `CQ_SIZE`: a CQ asked for more entries than the storage's aux queues hold.
    CqSize,
    /// `MRS`: memory registrations.
    Mrs,
    /// `AVS`: address vectors.
    Avs,
    /// `AV_ENTRIES`: addresses in one address vector.
    AvEntries,
    /// The NIC's interrupt vectors (a blocking CQ takes one of its own).
    Vectors,
}

impl Capacity {
    /// The name of the storage parameter (or NIC resource) that bounds it.
    pub const fn name(self) -> &'static str {
        match self {
            Capacity::Queues => "QUEUES (hardware queues)",
            Capacity::Cqs => "CQS (completion queues)",
            Capacity::CqSize => "CQ_SIZE (entries of one completion queue)",
            Capacity::Mrs => "MRS (memory registrations)",
            Capacity::Avs => "AVS (address vectors)",
            Capacity::AvEntries => "AV_ENTRIES (addresses of one address vector)",
            Capacity::Vectors => "the NIC's interrupt vectors",
        }
    }
}

/// Every table of one domain. See the [module documentation](self).
///
/// `'s` is the lifetime of the domain's borrow of the storage (the aux queues and address
/// tables are handed to their slots through it); `'n` the NIC's.
pub struct Storage<
    's,
    'n,
    N: Nic + 'n,
    const D: usize = 256,
    const QUEUES: usize = 8,
    const CQS: usize = 4,
    const CQ_SIZE: usize = 512,
    const MRS: usize = 4,
    const AVS: usize = 2,
    const AV_ENTRIES: usize = 64,
> {
    // Declaration order is drop order: queues stop before memory is unmapped and freed.
    pub(crate) paths: [PathSlot<'n, N, D>; QUEUES],
    pub(crate) cqs: [CqSlot<'s>; CQS],
    pub(crate) avs: [AvSlot<'s>; AVS],
    pub(crate) mrs: [MrSlot<N>; MRS],
    aux: [Mutex<Deque<AuxItem, CQ_SIZE>>; CQS],
    av_tables: [[AvEntry; AV_ENTRIES]; AVS],
}

impl<
        's,
        'n,
        N: Nic + 'n,
        const D: usize,
        const QUEUES: usize,
        const CQS: usize,
        const CQ_SIZE: usize,
        const MRS: usize,
        const AVS: usize,
        const AV_ENTRIES: usize,
    > Storage<'s, 'n, N, D, QUEUES, CQS, CQ_SIZE, MRS, AVS, AV_ENTRIES>
{
    /// An empty aux queue.
    #[allow(
        clippy::declare_interior_mutable_const,
        reason = "a fresh queue per use is the point"
    )]
    const EMPTY_AUX: Mutex<Deque<AuxItem, CQ_SIZE>> = Mutex::new(Deque::new());

    /// Empty tables.
    pub const fn new() -> Self {
        Storage {
            paths: [const { PathSlot::EMPTY }; QUEUES],
            cqs: [const { CqSlot::EMPTY }; CQS],
            avs: [const { AvSlot::EMPTY }; AVS],
            mrs: [const { MrSlot::EMPTY }; MRS],
            aux: [const { Self::EMPTY_AUX }; CQS],
            av_tables: [const { [const { AvEntry::EMPTY }; AV_ENTRIES] }; AVS],
        }
    }

    /// Empty tables on the heap, built in place: `Box::new(Storage::new())` would build them on
    /// the stack first (unoptimised builds do), and the default tables are about 730 KiB —
    /// a test thread's 2 MiB stack overflows with a storage of four 1024-entry CQs. `boxed`
    /// needs about one aux queue's worth of stack.
    #[cfg(feature = "alloc")]
    pub fn boxed() -> alloc::boxed::Box<Self> {
        /// Writes `value()` into each of the `n` elements at `first`.
        ///
        /// # Safety
        /// `first..first + n` must be valid for writes.
        unsafe fn fill<T>(first: *mut T, n: usize, value: impl Fn() -> T) {
            for i in 0..n {
                // SAFETY: `i < n`, and the caller's range is valid for writes.
                unsafe { first.add(i).write(value()) };
            }
        }
        let mut b = alloc::boxed::Box::<Self>::new_uninit();
        let p = b.as_mut_ptr();
        // SAFETY: `p` points to uninitialised memory for one `Self`; every field is an array,
        // each is written element by element (an array's elements are contiguous, so the cast
        // pointer and the count cover it exactly), so every byte `Self` needs is initialised
        // before `assume_init`. Nothing is read before it is written, and no element panics
        // while being made (they are constants and `const fn` results).
        unsafe {
            fill(
                core::ptr::addr_of_mut!((*p).paths).cast::<PathSlot<'n, N, D>>(),
                QUEUES,
                || PathSlot::EMPTY,
            );
            fill(
                core::ptr::addr_of_mut!((*p).cqs).cast::<CqSlot<'s>>(),
                CQS,
                || CqSlot::EMPTY,
            );
            fill(
                core::ptr::addr_of_mut!((*p).avs).cast::<AvSlot<'s>>(),
                AVS,
                || AvSlot::EMPTY,
            );
            fill(
                core::ptr::addr_of_mut!((*p).mrs).cast::<MrSlot<N>>(),
                MRS,
                || MrSlot::EMPTY,
            );
            // Not through `fill`: a deque of CQ_SIZE entries is large, and an unoptimised build
            // copies a closure's result through the stack more than once. A constant is written
            // from where it is kept.
            let aux = core::ptr::addr_of_mut!((*p).aux).cast::<Mutex<Deque<AuxItem, CQ_SIZE>>>();
            for i in 0..CQS {
                aux.add(i).write(Self::EMPTY_AUX);
            }
            fill(
                core::ptr::addr_of_mut!((*p).av_tables).cast::<AvEntry>(),
                AVS * AV_ENTRIES,
                || AvEntry::EMPTY,
            );
            b.assume_init()
        }
    }

    /// Hands each CQ slot its aux queue and each AV slot its table, for the domain's lifetime.
    /// The aux queues are taken out of their locks for good (`leak`): the slot owns its queue
    /// from now on, and gives it back to itself when the CQ closes.
    pub(crate) fn attach(&'s mut self) -> &'s Self {
        let this: &'s Self = self;
        for (slot, aux) in this.cqs.iter().zip(&this.aux) {
            if let Some(q) = aux.try_lock() {
                slot.give_aux(spin::MutexGuard::leak(q).as_mut_view());
            }
        }
        for (slot, table) in this.avs.iter().zip(&this.av_tables) {
            slot.give_table(table);
        }
        this
    }
}

impl<
        's,
        'n,
        N: Nic + 'n,
        const D: usize,
        const QUEUES: usize,
        const CQS: usize,
        const CQ_SIZE: usize,
        const MRS: usize,
        const AVS: usize,
        const AV_ENTRIES: usize,
    > Default for Storage<'s, 'n, N, D, QUEUES, CQS, CQ_SIZE, MRS, AVS, AV_ENTRIES>
{
    fn default() -> Self {
        Self::new()
    }
}
