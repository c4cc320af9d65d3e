//! The domain's tables as the engine sees them: [`Table`], what every table of a domain is
//! (lent or owned), and [`PollTables`], the ones a path's poll reads, which a
//! [`PollCtx`](super::PollCtx) refers to. The domain's tables as a whole are the objects'
//! (`crate::storage`).

use core::ops::Deref;
use core::sync::atomic::AtomicUsize;

use super::Credits;
use crate::addr::{AvEntry, AvSlot, AvTables};

/// A table: lent for the domain's life (bare metal), or owned (std).
pub(crate) enum Table<'n, T> {
    Lent(&'n [T]),
    #[cfg(feature = "alloc")]
    Owned(alloc::boxed::Box<[T]>),
}

impl<T> Deref for Table<'_, T> {
    type Target = [T];

    #[inline(always)]
    fn deref(&self) -> &[T] {
        match self {
            Table::Lent(t) => t,
            #[cfg(feature = "alloc")]
            Table::Owned(t) => t,
        }
    }
}

#[cfg(feature = "alloc")]
impl<T> Table<'_, T> {
    /// `len` entries, each `make()`, built in place on the heap.
    pub(crate) fn owned(len: usize, make: impl Fn() -> T) -> Self {
        Table::Owned((0..len).map(|_| make()).collect())
    }
}

/// The tables a path's poll reads ([`PollCtx`](super::PollCtx)): each CQ's credits,
/// the address vectors and each registration's live buffers. Not generic over the NIC, so
/// that a poll's context holds one reference to them rather than a copy of each.
pub(crate) struct PollTables<'n> {
    /// Each CQ's credits, at its index (the engine's view of a CQ).
    pub(crate) credits: Table<'n, Credits>,
    pub(crate) avs: Table<'n, AvSlot>,
    /// Every AV's address table, `av_entries` each, AV `i`'s at `i * av_entries`.
    pub(crate) av_entries: Table<'n, AvEntry>,
    pub(crate) av_size: usize,
    /// Live buffers of each registration (`crate::buf`'s owners), at the region's index.
    pub(crate) owners: Table<'n, AtomicUsize>,
}

impl<'n> PollTables<'n> {
    /// Every CQ's credits, at the CQ's index.
    #[inline]
    pub(crate) fn credits(&self) -> &[Credits] {
        &self.credits
    }

    /// The address vectors and their address tables.
    #[inline]
    pub(crate) fn avs(&self) -> AvTables<'_> {
        AvTables {
            slots: &self.avs,
            entries: &self.av_entries,
            size: self.av_size,
        }
    }

    /// Live buffers of each registration, at the region's index (`crate::buf::owner_of`).
    #[inline]
    pub(crate) fn owners(&self) -> &[AtomicUsize] {
        &self.owners
    }
}
