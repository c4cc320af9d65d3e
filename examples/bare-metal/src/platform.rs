//! [`BarePlatform`]: `ringfab_hal::Platform` for one PCI function on a bare x86_64 machine.
//!
//! What a platform must give a driver, and how this one gives it:
//!
//! | need | here |
//! |---|---|
//! | registers by BAR offset (`Mmio`) | BAR 0's physical address, identity-mapped by the boot code, read and written with volatile accesses of the register's width |
//! | DMA-coherent memory (`DmaRegion`) | pages of a static arena in `.bss`; device address = physical address = CPU address (no IOMMU) |
//! | caller memory for DMA (`DmaMapping`) | nothing to map: the device address is the CPU address |
//! | configuration space | mechanism #1 by port I/O ([`crate::pci`]); writes to the BARs are dropped |
//! | delays | the PIT ([`crate::time`]) |
//! | interrupts | none: the image polls. `irq_vectors` is 0, and the wait type has no values |
//!
//! The arena never takes memory back: the image opens its queues once and never closes them,
//! and memory never reused is zeroed when handed out, as `DmaRegion` requires.

use core::cell::UnsafeCell;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicUsize, Ordering};
use core::time::Duration;

use ringfab_hal::{DmaMapping, DmaRegion, Error, Iova, Mmio, Platform, Result, Wait, WaitOutcome};

use crate::pci::{Function, MemoryBar};

/// Page size of DMA allocations (and of the arena's alignment).
const PAGE: usize = 4096;
/// Bytes of DMA-coherent memory: two NICs' rings (a page each) and their endpoints' inject
/// bounce buffers, with room to spare.
const ARENA_LEN: usize = 512 * 1024;

/// The arena's memory: zero in `.bss`, page-aligned.
#[repr(C, align(4096))]
struct Arena(UnsafeCell<[u8; ARENA_LEN]>);

// SAFETY: the bytes are handed out in disjoint pieces (`NEXT` only grows, atomically), each to
// one `DmaPages`, and never through a reference; sharing the arena shares only that.
unsafe impl Sync for Arena {}

static ARENA: Arena = Arena(UnsafeCell::new([0; ARENA_LEN]));
/// Bytes of the arena handed out so far.
static NEXT: AtomicUsize = AtomicUsize::new(0);

/// `len` bytes of the arena, rounded up to whole pages, never handed out before: their start
/// and the rounded length.
fn take_pages(len: usize) -> Option<(NonNull<u8>, usize)> {
    let len = len.checked_next_multiple_of(PAGE)?.max(PAGE);
    let start = NEXT
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
            used.checked_add(len).filter(|&end| end <= ARENA_LEN)
        })
        .ok()?;
    // SAFETY: `start + len <= ARENA_LEN`, so the pointer stays inside the arena; it keeps the
    // arena's provenance (no integer becomes a pointer).
    let cpu = NonNull::new(unsafe { ARENA.0.get().cast::<u8>().add(start) })?;
    Some((cpu, len))
}

/// Pages of the arena, as DMA-coherent memory.
#[derive(Debug)]
pub(crate) struct DmaPages {
    cpu: NonNull<u8>,
    len: usize,
}

// SAFETY: owns its pages alone (see `take_pages`); moving it to another thread moves that.
unsafe impl Send for DmaPages {}

// SAFETY: the pages come from `take_pages`: inside the static arena (valid for the program's
// life), page-aligned, zero (never handed out before, and the arena starts zeroed), owned by
// this value alone; `cpu` and `len` never change. The device reaches them at their physical
// address, which the identity mapping makes the CPU address; without an IOMMU it could reach
// other memory too — see `BarePlatform`'s implementation safety.
unsafe impl DmaRegion for DmaPages {
    fn cpu(&self) -> NonNull<u8> {
        self.cpu
    }
    fn iova(&self) -> Iova {
        Iova(self.cpu.as_ptr().addr() as u64)
    }
    fn len(&self) -> usize {
        self.len
    }
}

/// Caller memory as the device reaches it: at its own address.
#[derive(Debug)]
pub(crate) struct Identity {
    iova: Iova,
    len: usize,
}

impl DmaMapping for Identity {
    fn iova(&self) -> Iova {
        self.iova
    }
    fn len(&self) -> usize {
        self.len
    }
}

/// A memory BAR, reached at its physical address.
#[derive(Debug)]
pub(crate) struct Bar {
    base: NonNull<u8>,
    len: usize,
}

// SAFETY: the BAR's registers are device memory reached only with volatile accesses, which
// any thread may make; the value holds nothing else.
unsafe impl Send for Bar {}
// SAFETY: as for `Send`: shared use makes only volatile accesses.
unsafe impl Sync for Bar {}

impl Bar {
    /// A pointer to the `T` at `offset`, if it lies inside the BAR and is aligned.
    fn at<T>(&self, offset: usize) -> Option<*mut T> {
        let size = core::mem::size_of::<T>();
        let inside = offset % size == 0 && offset.checked_add(size)? <= self.len;
        // SAFETY: `offset + size <= len`: the result stays inside the BAR's mapping.
        inside.then(|| unsafe { self.base.as_ptr().add(offset).cast::<T>() })
    }
}

// Each access is one volatile access of its width to the register (the `Mmio` contract); an
// offset outside the BAR or misaligned reads all ones and drops the write.
impl Mmio for Bar {
    fn read32(&self, offset: usize) -> u32 {
        // SAFETY: `at` checked the register lies inside the BAR, which the boot code's identity
        // mapping makes valid memory (device memory) for as long as the image runs.
        self.at::<u32>(offset)
            .map_or(u32::MAX, |p| unsafe { p.read_volatile() })
    }
    fn write32(&self, offset: usize, value: u32) {
        if let Some(p) = self.at::<u32>(offset) {
            // SAFETY: as in `read32`.
            unsafe { p.write_volatile(value) }
        }
    }
    fn read16(&self, offset: usize) -> u16 {
        // SAFETY: as in `read32`.
        self.at::<u16>(offset)
            .map_or(u16::MAX, |p| unsafe { p.read_volatile() })
    }
    fn write16(&self, offset: usize, value: u16) {
        if let Some(p) = self.at::<u16>(offset) {
            // SAFETY: as in `read32`.
            unsafe { p.write_volatile(value) }
        }
    }
    fn read8(&self, offset: usize) -> u8 {
        // SAFETY: as in `read32`.
        self.at::<u8>(offset)
            .map_or(u8::MAX, |p| unsafe { p.read_volatile() })
    }
    fn write8(&self, offset: usize, value: u8) {
        if let Some(p) = self.at::<u8>(offset) {
            // SAFETY: as in `read32`.
            unsafe { p.write_volatile(value) }
        }
    }
    fn len(&self) -> usize {
        self.len
    }
}

/// The wait handle of a platform without interrupts: a type with no values, so no queue can
/// ever hold one ([`BarePlatform::irq`] always refuses).
#[derive(Debug)]
pub(crate) enum NoInterrupt {}

impl Wait for NoInterrupt {
    fn drain(&self) -> bool {
        match *self {}
    }
    fn wait(&self, _timeout: Option<Duration>) -> WaitOutcome {
        match *self {}
    }
    fn notify(&self) {
        match *self {}
    }
}

/// One PCI function of a bare x86_64 machine with identity-mapped memory and no IOMMU.
#[derive(Debug)]
pub(crate) struct BarePlatform {
    function: Function,
    bar0: MemoryBar,
}

impl BarePlatform {
    /// The platform of `function`, whose BAR 0 is `bar0` (from [`Function::memory_bar0`]).
    pub(crate) fn new(function: Function, bar0: MemoryBar) -> Self {
        BarePlatform { function, bar0 }
    }
}

// SAFETY: the contract asks that the device reach only memory from `alloc_dma`/`map_dma`, with
// an IOMMU or a model of one. This machine has none (`-device intel-iommu` is not given), so
// that part of it cannot hold: a device — or a driver bug — that programs a wrong address
// writes wherever it points, as on any machine without an IOMMU. What holds is the rest: the
// only addresses the drivers of this image program are those `alloc_dma` and `map_dma`
// returned (the igb driver takes ring and buffer addresses from them alone, and checks what
// the device writes back), and `bar(0)` reaches this function's registers only.
unsafe impl Platform for BarePlatform {
    type Mmio = Bar;
    type Dma = DmaPages;
    type Mapping = Identity;
    type Wait = NoInterrupt;

    fn bar(&self, index: u8) -> Result<Bar> {
        let unavailable = Error::BarUnavailable { index };
        if index != 0 {
            return Err(unavailable);
        }
        let len = usize::try_from(self.bar0.len).map_err(|_| unavailable)?;
        let addr = usize::try_from(self.bar0.base).map_err(|_| unavailable)?;
        // The BAR's physical address is its CPU address (identity mapping): an integer that
        // names device memory, exposed as such.
        let base =
            NonNull::new(core::ptr::with_exposed_provenance_mut::<u8>(addr)).ok_or(unavailable)?;
        Ok(Bar { base, len })
    }

    fn config_read32(&self, offset: u16) -> u32 {
        self.function.read32(offset)
    }

    fn config_write32(&self, offset: u16, value: u32) {
        // The BARs stay where the firmware put them: `bar(0)` relies on it.
        if !Function::is_bar(offset) {
            self.function.write32(offset, value);
        }
    }

    fn alloc_dma(&self, len: usize) -> Result<DmaPages> {
        let (cpu, len) = take_pages(len).ok_or(Error::DmaAlloc { len })?;
        Ok(DmaPages { cpu, len })
    }

    unsafe fn map_dma(&self, cpu: NonNull<u8>, len: usize) -> Result<Identity> {
        if len == 0 {
            return Err(Error::DmaMap { len });
        }
        Ok(Identity {
            iova: Iova(cpu.as_ptr().addr() as u64),
            len,
        })
    }

    fn delay(&self, duration: Duration) {
        crate::time::delay(duration);
    }

    fn irq_vectors(&self) -> u16 {
        0
    }

    fn irq(&self, vector: u16) -> Result<NoInterrupt> {
        Err(Error::InterruptUnavailable { vector })
    }
}
