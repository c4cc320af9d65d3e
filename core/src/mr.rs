//! Memory registration (`fi_mr`, local access): caller memory mapped for the NIC, and the owned
//! buffers carved from it.
//!
//! A [`MemoryRegion`] is caller memory the NIC can reach: registering it asks the NIC for an
//! IOMMU mapping ([`Nic::map_dma`]). Buffers are carved from it with
//! [`MemoryRegion::alloc`] as [`Buf`]s — owned handles, neither `Copy` nor `Clone`, so that
//! exactly one party holds a buffer at a time (DESIGN.md decision 6): the application while it
//! fills or reads it, the endpoint (and the NIC) from posting until the completion hands it back.
//!
//! # What the safe registration takes: [`Memory`]
//!
//! A posted buffer is written by the device at a time of the device's choosing, so registered
//! memory must outlive every queue that could name it, whatever the application does with its
//! handles. Two kinds of memory make that true without trusting a destructor to run:
//!
//! * memory the region **owns** (`Vec<u8>` or `Box<[u8]>`, with the `alloc` feature): it lives
//!   in the domain's [`Storage`](crate::storage::Storage), which stops the hardware queues
//!   before it unmaps and frees it (its fields drop in that order), and a leaked storage leaks
//!   the memory with it;
//! * memory that lives **for ever** (`&'static mut [u8]`: a `static` on bare metal).
//!
//! Borrowed memory could be freed while the domain (and with it the running queues) is leaked
//! with `mem::forget` — the same reason `std::thread::scope` cannot rely on a destructor — so
//! [`Memory::from_raw_parts`] takes it only with that promise made by the caller in an
//! `unsafe` block.
//!
//! # Access without references
//!
//! The device can write registered memory, so [`Buf`] offers copies ([`Buf::write`],
//! [`Buf::read`], [`Buf::fill`]) rather than `&[u8]` into it. They go through the hal's checked
//! accessor for mapped memory ([`DmaSpan`](crate::hal::DmaSpan)): bounds-checked, and through the pointer the memory
//! was registered with, so the address keeps its provenance — core never turns an integer back
//! into a pointer. [`Buf::as_slice`] exists for zero-copy readers, as an `unsafe` promise that
//! the device is done with the buffer. What registering trusts, and that promise, live in
//! core's one `unsafe` module (`raw.rs`).
//!
//! # Lifetime of a region
//!
//! Every `Buf` counts against its region; [`MemoryRegion::close`] returns `Busy` while any is
//! alive — held by the application or posted — so the mapping (and its IOVA range) can never be
//! released under a descriptor that still names it.

use core::sync::atomic::{AtomicUsize, Ordering};

use spin::Mutex;

use crate::buf::RawBuf;
pub use crate::buf::{Buf, Iov, IOV_MAX};
use crate::domain::Domain;
use crate::hal::{DmaMapping, Iova, Nic};
use crate::raw::Registered;
pub use crate::raw::{Memory, NoOverlap};
use crate::storage::Capacity;
use crate::{Error, Result};

/// Buffers start on this boundary (a cache line), so that two buffers never share a line the
/// device and the CPU write at once.
pub const BUF_ALIGN: usize = 64;

/// The IOMMU page: a buffer of at most this many bytes is carved inside one.
pub const PAGE: usize = 4096;

/// Where the next buffer of `len` bytes starts in a region whose first byte is at device
/// address `base`, with `used` bytes carved already: the first [`BUF_ALIGN`] boundary of device
/// addresses at or past the used bytes, moved on to the next [`PAGE`] boundary if a buffer
/// that fits in a page would straddle one. Gives the offset into the region and the device
/// address; `None` (no room) if either would overflow.
///
/// Device addresses are 64-bit on every target, so the arithmetic is `u64` and only the
/// offset is narrowed, checked: on a 32-bit target a region mapped at or just below 4 GiB is
/// carved as on a 64-bit one, where an address narrowed to `usize` would lose its high bits
/// and overflow when aligned.
fn carve_at(base: Iova, used: usize, len: usize) -> Option<(usize, Iova)> {
    const ALIGN: u64 = BUF_ALIGN as u64;
    const PAGE_BYTES: u64 = PAGE as u64;
    let len = u64::try_from(len).ok()?;
    let mut at = base
        .0
        .checked_add(u64::try_from(used).ok()?)?
        .checked_next_multiple_of(ALIGN)?;
    if len <= PAGE_BYTES && at % PAGE_BYTES + len > PAGE_BYTES {
        at = at.checked_next_multiple_of(PAGE_BYTES)?;
    }
    Some((usize::try_from(at - base.0).ok()?, Iova(at)))
}

/// A registered region as its slot keeps it.
struct MrState<M> {
    /// The mapping and the memory (unmapped, then freed, when dropped).
    mem: Registered<M>,
    /// Bytes handed out so far by [`MemoryRegion::alloc`].
    used: usize,
}

/// One slot of the domain's memory-registration table (in its
/// [`Storage`](crate::storage::Storage)).
///
/// The count of the region's live [`Buf`]s (held or posted) is not here but in the domain's
/// table of buffer owners, at the same index (`Domain::owners`): the engine hands buffers back
/// through it without knowing regions.
pub(crate) struct MrSlot<N: Nic> {
    state: Mutex<Option<MrState<N::Mapping>>>,
}

impl<N: Nic> MrSlot<N> {
    /// A free slot.
    #[allow(
        clippy::declare_interior_mutable_const,
        reason = "a fresh slot per use is the point: the storage's table is built of them"
    )]
    pub(crate) const EMPTY: Self = MrSlot {
        state: Mutex::new(None),
    };
}

impl<'n, N: Nic + 'n, const D: usize> Domain<'n, N, D> {
    /// Registers `mem` (`fi_mr_reg` for local send/receive access): maps it for the NIC. The
    /// region keeps owned memory (`Vec<u8>`, `Box<[u8]>`) until it is closed.
    ///
    /// ```
    /// # use ringfab::{domain::Domain, storage::Storage};
    /// # fn f<N: ringfab::hal::Nic>(d: &Domain<'_, N>) -> ringfab::Result {
    /// let mr = d.register(vec![0u8; 64 * 2048])?;
    /// let buf = mr.alloc(d, 2048)?;
    /// # let _ = buf; Ok(()) }
    /// ```
    ///
    /// # Errors
    /// `Inval` for empty memory; `Full(Mrs)` when every MR slot is taken; `Device(_)` when the
    /// platform refuses the mapping (owned memory is freed then).
    pub fn register(&self, mem: impl Into<Memory>) -> Result<MemoryRegion> {
        let mem = mem.into();
        if mem.is_empty() {
            return Err(Error::Inval);
        }
        for (index, (slot, owner)) in self.mrs().iter().zip(self.owners()).enumerate() {
            let mut guard = slot.state.lock();
            if guard.is_some() {
                continue;
            }
            let mem = Registered::map(self.nic(), mem)?;
            owner.store(0, Ordering::Release);
            *guard = Some(MrState { mem, used: 0 });
            return Ok(MemoryRegion {
                domain: self.id(),
                index,
            });
        }
        Err(Error::Full(Capacity::Mrs))
    }
}

/// A registered region (`fid_mr`): an index into its domain's MR table. Its methods take the
/// domain it was registered in (another domain's is `Domain`).
///
/// Dropping the handle leaves the region registered until the domain goes; [`close`](Self::close)
/// unmaps it.
#[derive(Debug)]
pub struct MemoryRegion {
    domain: u32,
    index: usize,
}

impl MemoryRegion {
    fn slot<'d, N: Nic, const D: usize>(&self, dom: &'d Domain<'_, N, D>) -> Result<&'d MrSlot<N>> {
        dom.check(self.domain)?;
        dom.mrs().get(self.index).ok_or(Error::Domain)
    }

    /// The count of the region's live buffers (`Domain::owners`).
    fn owner<'d, N: Nic, const D: usize>(
        &self,
        dom: &'d Domain<'_, N, D>,
    ) -> Result<&'d AtomicUsize> {
        dom.check(self.domain)?;
        dom.owners().get(self.index).ok_or(Error::Domain)
    }

    /// The region's index in the domain's MR table.
    pub fn index(&self) -> usize {
        self.index
    }

    /// Bytes registered (0 for another domain's region).
    pub fn len<N: Nic, const D: usize>(&self, dom: &Domain<'_, N, D>) -> usize {
        self.slot(dom)
            .ok()
            .and_then(|s| s.state.lock().as_ref().map(|st| st.mem.span().len()))
            .unwrap_or(0)
    }

    /// Device address of the region's first byte.
    ///
    /// # Errors
    /// `Domain` for another domain; `OpBadState` if the region is closed.
    pub fn iova<N: Nic, const D: usize>(&self, dom: &Domain<'_, N, D>) -> Result<Iova> {
        self.slot(dom)?
            .state
            .lock()
            .as_ref()
            .map(|st| st.mem.mapping().iova())
            .ok_or(Error::OpBadState)
    }

    /// Carves the next `len` bytes (from a [`BUF_ALIGN`] boundary, and inside one [`PAGE`] of
    /// device addresses when `len` ≤ `PAGE`) off the region as an owned buffer. Regions are
    /// carved once, front to back: a buffer's memory returns to the region only when the region
    /// is closed.
    ///
    /// # Errors
    /// `Inval` for a zero or over-`u32` length; `NoMem` when the region has no room left;
    /// `Domain` for another domain.
    pub fn alloc<'d, N: Nic, const D: usize>(
        &self,
        dom: &'d Domain<'_, N, D>,
        len: usize,
    ) -> Result<Buf<'d>> {
        let len32 = u32::try_from(len).map_err(|_| Error::Inval)?;
        if len == 0 {
            return Err(Error::Inval);
        }
        let slot = self.slot(dom)?;
        let mut guard = slot.state.lock();
        let st = guard.as_mut().ok_or(Error::OpBadState)?;
        // Alignment is of device addresses (the region's memory need not be page-aligned).
        // A buffer that fits in a page never straddles one: behind an IOMMU two pages adjacent
        // in IOVA need not be adjacent in memory, and QEMU's igb and e1000e silently drop a
        // transmit buffer that crosses into a page that is not (docs/qemu-tests.md). Larger
        // buffers cannot avoid it; see docs/architecture.md.
        let (start, iova) = carve_at(st.mem.mapping().iova(), st.used, len).ok_or(Error::NoMem)?;
        let span = st.mem.span().sub(start, len).ok_or(Error::NoMem)?;
        st.used = start + len;
        let owner = self.owner(dom)?;
        owner.fetch_add(1, Ordering::AcqRel);
        let raw = RawBuf {
            span,
            iova,
            len: len32,
            mr: self.index as u16,
        };
        Ok(Buf::from_raw(raw, owner))
    }

    /// Lends bytes `offset..offset + len` of the region as a buffer, wherever they are: a
    /// caller that manages the region's memory itself — a libfabric provider whose application
    /// names its own buffers inside memory it registered (`fi_mr_reg`) — gets a [`Buf`] it can
    /// post without copying. The buffer counts as the region's (its close is `Busy` while the
    /// buffer lives) and goes back when dropped, as an allocated one does. `promise`
    /// ([`NoOverlap`], made only by an `unsafe` call) is the caller's
    /// word that no other live buffer of the region overlaps it.
    ///
    /// # Errors
    /// `Inval` for an empty range, one longer than `u32::MAX` or one outside the region;
    /// `OpBadState` after close; `Domain` for another domain.
    pub fn lend<'d, N: Nic, const D: usize>(
        &self,
        dom: &'d Domain<'_, N, D>,
        offset: usize,
        len: usize,
        promise: NoOverlap,
    ) -> Result<Buf<'d>> {
        let _ = promise;
        let len32 = u32::try_from(len).map_err(|_| Error::Inval)?;
        if len == 0 {
            return Err(Error::Inval);
        }
        let slot = self.slot(dom)?;
        let guard = slot.state.lock();
        let st = guard.as_ref().ok_or(Error::OpBadState)?;
        let span = st.mem.span().sub(offset, len).ok_or(Error::Inval)?;
        let iova = Iova(
            st.mem
                .mapping()
                .iova()
                .0
                .checked_add(u64::try_from(offset).map_err(|_| Error::Inval)?)
                .ok_or(Error::Inval)?,
        );
        let owner = self.owner(dom)?;
        owner.fetch_add(1, Ordering::AcqRel);
        let raw = RawBuf {
            span,
            iova,
            len: len32,
            mr: self.index as u16,
        };
        Ok(Buf::from_raw(raw, owner))
    }

    /// Buffers of this region still alive (held by the application or posted).
    pub fn outstanding<N: Nic, const D: usize>(&self, dom: &Domain<'_, N, D>) -> usize {
        self.owner(dom).map_or(0, |o| o.load(Ordering::Acquire))
    }

    /// Closes the region (`fi_close`): unmaps it (and frees memory it owns).
    ///
    /// # Errors
    /// `Err((Error::Busy, self))` while any of its buffers is alive; `Domain` for another
    /// domain.
    pub fn close<N: Nic, const D: usize>(
        self,
        dom: &Domain<'_, N, D>,
    ) -> core::result::Result<(), (Error, Self)> {
        let slot = match self.slot(dom) {
            Ok(slot) => slot,
            Err(e) => return Err((e, self)),
        };
        let mut guard = slot.state.lock();
        if self.owner(dom).is_ok_and(|o| o.load(Ordering::Acquire) > 0) {
            drop(guard);
            return Err((Error::Busy, self));
        }
        // Dropping the mapping unmaps the memory.
        *guard = None;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn carve_at_starts_buffers_on_a_cache_line() {
        assert_eq!(carve_at(Iova(0x1000), 1, 100), Some((0x40, Iova(0x1040))));
        assert_eq!(carve_at(Iova(0x1010), 0, 100), Some((0x30, Iova(0x1040))));
    }

    #[test]
    fn carve_at_keeps_a_small_buffer_inside_one_page() {
        // 0x1FC0 + 200 would cross 0x2000: the buffer moves to the next page.
        assert_eq!(
            carve_at(Iova(0x1000), 4000, 200),
            Some((0x1000, Iova(0x2000)))
        );
        // A buffer larger than a page cannot avoid crossing one: it stays where it is.
        assert_eq!(
            carve_at(Iova(0x1000), 4000, 5000),
            Some((0xFC0, Iova(0x1FC0)))
        );
    }

    #[test]
    fn carve_at_places_buffers_above_4_gib_as_below() {
        // Device addresses past 32 bits, as a 32-bit target sees behind an IOMMU: offsets and
        // addresses come out whole, never narrowed to the low 32 bits.
        assert_eq!(
            carve_at(Iova(0x1_0000_0F00), 0, 512),
            Some((0x100, Iova(0x1_0000_1000)))
        );
        // A region just below 4 GiB whose next buffer starts past it: aligning the address in
        // 32 bits would overflow.
        assert_eq!(
            carve_at(Iova(0xFFFF_F000), 0xFF0, 64),
            Some((0x1000, Iova(0x1_0000_0000)))
        );
    }

    #[test]
    fn carve_at_reports_no_room_instead_of_overflowing() {
        assert_eq!(carve_at(Iova(u64::MAX - 63), 1, 1), None);
        assert_eq!(
            carve_at(Iova(u64::MAX - 0xFFF), 0, 64),
            Some((0, Iova(u64::MAX - 0xFFF)))
        );
        assert_eq!(carve_at(Iova(u64::MAX - 0xFFF), 0x40, 0x1000), None);
    }
}
