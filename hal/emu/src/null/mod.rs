//! The do-nothing devices: an 82576 (igb), an 82574 (e1000e) and a virtio-net device that
//! complete every buffer the moment the driver rings its doorbell — for benchmarks of the drivers
//! and core, not models.
//!
//! A [`NullPlatform<K>`](NullPlatform) is the platform of one null device of kind `K` (the same
//! markers as the emulated devices: [`Igb82576`], [`E1000e82574`](crate::E1000e82574),
//! [`VirtioNetPci`](crate::VirtioNetPci)); `NullPlatform` alone is the 82576. What the kinds
//! share is here: DMA memory is host memory with IOVA == CPU address (there is no IOMMU, which is
//! fine for a benchmark of trusted code), caller memory is "mapped" the same way (so registered
//! memory and endpoints work), and there are no interrupts. The device finds the rings the
//! driver programmed through the platform's [`DmaTable`] — the pointers it allocated, with
//! their provenance, never an IOVA cast back to a pointer — so that Miri can check a null
//! device's accesses under strict provenance as well as the driver's and core's (core's
//! `tests/miri.rs`). Each kind has its own register file:
//!
//! * **Intel** ([`NullRegs`], igb and e1000e): registers are a flat array; reads return what was
//!   written, except the few bits bring-up waits on (RST self-clears, MDIC is always ready, the
//!   link is always up). A tail write completes every descriptor between the old and the new
//!   tail on the spot (TX: DD on RS descriptors; RX: a [`RX_FRAME_LEN`]-byte frame, DD|EOP,
//!   and the checksum marks [`NullPlatform::with_rx_checksum`] asks for, none by default). The
//!   two differ only in where the queue registers are and the PCI id: the 82574's advanced
//!   formats put DD, EOP, RS and the length where the 82576's do.
//! * **virtio** ([`NullVirtioRegs`]): the modern PCI transport's structures, a minimal feature
//!   set (no control queue) and split virtqueues. A notification completes every buffer made
//!   available since the last one, by id through the used ring (TX: length 0; RX: the network
//!   header and a [`RX_FRAME_LEN`]-byte frame).
//!
//! Nothing is checked, nothing is emulated beyond that: use the emulated devices
//! ([`EmuIgb`](crate::EmuIgb), …) for tests.
//!
//! What a null device costs is a few instructions of register dispatch plus its `complete_tx` /
//! `complete_rx` functions, which are never inlined so that a profiler (callgrind) can subtract
//! them by name (`drivers/suite/benches/instructions.sh`, `core/benches/instructions.sh`).
//!
//! ```
//! use ringfab_emu::null::NullPlatform;
//! use ringfab_emu::{E1000e82574, Igb82576};
//! use ringfab_hal::{Mmio, Platform};
//!
//! let igb = NullPlatform::<Igb82576>::new();
//! assert_eq!(igb.bar(0).unwrap().read32(0x0008) & 0b10, 0b10); // STATUS.LU: the link is up
//! let e1000e = NullPlatform::<E1000e82574>::new();
//! assert_eq!(e1000e.config_read32(0), 0x10d3_8086);
//! ```

mod intel;
mod virtio;

pub use intel::{IntelLayout, NullRegs};
pub use virtio::NullVirtioRegs;

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::ptr::NonNull;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ringfab_hal::{DmaMapping, DmaRegion, Iova, Mmio, Platform, Result, Wait, WaitOutcome};

use crate::Igb82576;

/// Length of every frame a null device "receives" (what a completed RX buffer reports).
pub const RX_FRAME_LEN: u32 = 64;

/// A kind of NIC a null device can be: its register file and its identity in PCI configuration
/// space. Implemented by the emulated devices' markers.
pub trait NullKind: 'static {
    /// The handle on the register file that [`Platform::bar`] gives out (a clone of the
    /// platform's: the register file lives while any handle does).
    type Mmio: Mmio + Clone;
    /// The memory BAR the register file is.
    const BAR: u8;
    /// A new register file at reset, whose device reaches the DMA memory in `dma`.
    fn regs(dma: Arc<DmaTable>) -> Self::Mmio;
    /// The configuration space dword at `offset` (4-byte aligned).
    fn config_read32(offset: u16) -> u32;
}

/// The platform of one null device of kind `K`: give it to the kind's driver
/// (`Igb::new(NullPlatform::<Igb82576>::new())`).
pub struct NullPlatform<K: NullKind = Igb82576> {
    regs: K::Mmio,
    /// The DMA memory handed out, which the device reaches through it.
    dma: Arc<DmaTable>,
}

impl<K: NullKind> NullPlatform<K> {
    /// A new null device, link up, registers at reset.
    pub fn new() -> Self {
        let dma = Arc::new(DmaTable {
            regions: Mutex::new(Vec::new()),
        });
        NullPlatform {
            regs: K::regs(dma.clone()),
            dma,
        }
    }
}

/// The DMA memory a null device's platform has handed out ([`Platform::alloc_dma`]): how the
/// device turns an address the driver programmed into a pointer to that memory. IOVA == CPU
/// address, but the pointer is the allocation's own, with its provenance; an address outside
/// every allocation finds nothing. One lock and a short scan per lookup, on a doorbell: the
/// device's cost, which the benchmarks subtract (`complete_rx`, `complete_tx`).
pub struct DmaTable {
    /// Live allocations, oldest first.
    regions: Mutex<Vec<Region>>,
}

/// One allocation of a [`DmaTable`].
struct Region {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: a region names memory its `HostDma` owns; the table hands its pointer only to the
// device, which accesses it under the platform's contract (the rings the driver programmed),
// whichever thread rings the doorbell.
unsafe impl Send for Region {}

impl DmaTable {
    fn regions(&self) -> std::sync::MutexGuard<'_, Vec<Region>> {
        // A panic while the lock is held cannot leave the list half-changed.
        self.regions.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A pointer to the `len` bytes at `iova`, if one allocation holds them all.
    pub fn find(&self, iova: u64, len: usize) -> Option<NonNull<u8>> {
        let iova = usize::try_from(iova).ok()?;
        self.regions().iter().find_map(|r| {
            let off = iova.checked_sub(r.ptr.as_ptr().addr())?;
            (off.checked_add(len)? <= r.len).then(|| {
                // Inside the allocation: a pointer derived from its own.
                NonNull::new(r.ptr.as_ptr().wrapping_add(off)).expect("inside an allocation")
            })
        })
    }
}

impl<K: NullKind> Default for NullPlatform<K> {
    fn default() -> Self {
        Self::new()
    }
}

/// DMA memory of a null device: zeroed, 4096-aligned host memory, IOVA == CPU address.
pub struct HostDma {
    ptr: NonNull<u8>,
    layout: Layout,
    /// The platform's table, which lists it until it is freed.
    dma: Arc<DmaTable>,
}

// SAFETY: the memory is owned by this value alone.
unsafe impl Send for HostDma {}

// SAFETY: zeroed, 4096-aligned, valid for `len` bytes until drop; IOVA == CPU address and the
// null device touches only rings programmed into it.
unsafe impl DmaRegion for HostDma {
    fn cpu(&self) -> NonNull<u8> {
        self.ptr
    }
    fn iova(&self) -> Iova {
        Iova(self.ptr.as_ptr().addr() as u64)
    }
    fn len(&self) -> usize {
        self.layout.size()
    }
}

impl Drop for HostDma {
    fn drop(&mut self) {
        self.dma.regions().retain(|r| r.ptr != self.ptr);
        // SAFETY: allocated in `alloc_dma` with this layout; the device can no longer find it.
        unsafe { dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

/// Caller memory "mapped" for a null device: IOVA == CPU address, as its DMA memory, so that
/// core's memory registration (and with it endpoints and their owned buffers) runs on a null
/// device. Nothing is pinned or translated; dropping it does nothing.
pub struct HostMapping {
    iova: Iova,
    len: usize,
}

impl DmaMapping for HostMapping {
    fn iova(&self) -> Iova {
        self.iova
    }
    fn len(&self) -> usize {
        self.len
    }
}

/// A null device has no interrupts (`irq` always fails); this type only names the wait
/// object.
pub struct NoWait;

impl Wait for NoWait {
    fn drain(&self) -> bool {
        false
    }
    fn wait(&self, _timeout: Option<Duration>) -> WaitOutcome {
        WaitOutcome::TimedOut
    }
    fn notify(&self) {}
}

// SAFETY: a benchmark platform for trusted code: the "device" touches only rings the driver
// programmed (it never writes a buffer, mapped or not), and DMA memory is plain host memory it
// owns. There is no IOMMU to make a wrong address fault, which the trait asks for: a null
// device is for benchmarks of code the tests have already proven, never for tests.
unsafe impl<K: NullKind> Platform for NullPlatform<K> {
    type Mmio = K::Mmio;
    type Dma = HostDma;
    type Mapping = HostMapping;
    type Wait = NoWait;

    fn bar(&self, index: u8) -> Result<Self::Mmio> {
        if index == K::BAR {
            Ok(self.regs.clone())
        } else {
            Err(ringfab_hal::Error::BarUnavailable { index })
        }
    }
    fn config_read32(&self, offset: u16) -> u32 {
        K::config_read32(offset)
    }
    fn config_write32(&self, _offset: u16, _value: u32) {}
    fn alloc_dma(&self, len: usize) -> Result<HostDma> {
        let size = len.max(1).next_multiple_of(4096);
        let layout = Layout::from_size_align(size, 4096)
            .map_err(|_| ringfab_hal::Error::DmaAlloc { len })?;
        // SAFETY: `layout` has a non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        let ptr = NonNull::new(ptr).ok_or(ringfab_hal::Error::DmaAlloc { len })?;
        self.dma.regions().push(Region { ptr, len: size });
        Ok(HostDma {
            ptr,
            layout,
            dma: self.dma.clone(),
        })
    }
    unsafe fn map_dma(&self, cpu: NonNull<u8>, len: usize) -> Result<HostMapping> {
        Ok(HostMapping {
            iova: Iova(cpu.as_ptr().addr() as u64),
            len,
        })
    }
    fn delay(&self, _duration: Duration) {}
    fn irq_vectors(&self) -> u16 {
        0
    }
    fn irq(&self, vector: u16) -> Result<NoWait> {
        Err(ringfab_hal::Error::InterruptUnavailable { vector })
    }
}
