//! The do-nothing devices: an 82576 (igb), an 82574 (e1000e) and a virtio-net device that
//! complete every buffer the moment the driver rings its doorbell — for benchmarks of the drivers
//! and core, not models.
//!
//! A [`NullPlatform<K>`](NullPlatform) is the platform of one null device of kind `K` (the same
//! markers as the emulated devices: [`Igb82576`], [`E1000e82574`](crate::E1000e82574),
//! [`VirtioNetPci`](crate::VirtioNetPci)); `NullPlatform` alone is the 82576. What the kinds
//! share is here: DMA memory is host memory with IOVA == CPU address (there is no IOMMU, which is
//! fine for a benchmark of trusted code), caller memory is "mapped" the same way (so registered
//! memory and endpoints work), and there are no interrupts. Each kind has its own register
//! file:
//!
//! * **Intel** ([`NullRegs`], igb and e1000e): registers are a flat array; reads return what was
//!   written, except the few bits bring-up waits on (RST self-clears, MDIC is always ready, the
//!   link is always up). A tail write completes every descriptor between the old and the new
//!   tail on the spot (TX: DD on RS descriptors; RX: a [`RX_FRAME_LEN`]-byte frame, DD|EOP). The
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
use std::time::Duration;

use ringfab_hal::{DmaMapping, DmaRegion, Iova, Mmio, Platform, Result, Wait, WaitOutcome};

use crate::Igb82576;

/// Length of every frame a null device "receives" (what a completed RX buffer reports).
pub const RX_FRAME_LEN: u32 = 64;

/// A kind of NIC a null device can be: its register file and its identity in PCI configuration
/// space. Implemented by the emulated devices' markers.
pub trait NullKind: 'static {
    /// The handle on the register file that [`Platform::bar`] gives out.
    type Mmio: Mmio + Copy;
    /// The memory BAR the register file is.
    const BAR: u8;
    /// A new register file at reset; it is leaked on purpose (a benchmark process makes a
    /// handful).
    fn regs() -> Self::Mmio;
    /// The configuration space dword at `offset` (4-byte aligned).
    fn config_read32(offset: u16) -> u32;
}

/// The platform of one null device of kind `K`: give it to the kind's driver
/// (`Igb::new(NullPlatform::<Igb82576>::new())`).
pub struct NullPlatform<K: NullKind = Igb82576> {
    regs: K::Mmio,
}

impl<K: NullKind> NullPlatform<K> {
    /// A new null device, link up, registers at reset.
    pub fn new() -> Self {
        NullPlatform { regs: K::regs() }
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
        Iova(self.ptr.as_ptr() as u64)
    }
    fn len(&self) -> usize {
        self.layout.size()
    }
}

impl Drop for HostDma {
    fn drop(&mut self) {
        // SAFETY: allocated in `alloc_dma` with this layout.
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
            Ok(self.regs)
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
        Ok(HostDma { ptr, layout })
    }
    unsafe fn map_dma(&self, cpu: NonNull<u8>, len: usize) -> Result<HostMapping> {
        Ok(HostMapping {
            iova: Iova(cpu.as_ptr() as u64),
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
