//! The do-nothing device: an 82576-shaped device that completes every descriptor the moment its
//! tail is written — for benchmarks of the driver and core, not a model.
//!
//! Registers are a flat array; reads return what was written, except the few bits bring-up waits
//! on (RST self-clears, MDIC is always ready, the link is always up). A tail write completes every
//! descriptor between the old and the new tail on the spot (TX: DD on RS descriptors; RX: a
//! [`RX_FRAME_LEN`]-byte frame, DD|EOP). DMA memory is host memory with IOVA == CPU address:
//! there is no IOMMU here, which is fine for a benchmark of trusted code. Nothing is checked,
//! nothing is emulated beyond that: use [`EmuIgb`](crate::EmuIgb) for tests.
//!
//! What it costs is a few instructions of tail-write dispatch plus
//! [`NullRegs::complete_tx`] / [`NullRegs::complete_rx`], which are never inlined so that a
//! profiler (callgrind) can subtract them by name (`drivers/igb/benches/instructions.sh`,
//! `core/benches/instructions.sh`).
//!
//! ```
//! use ringfab_emu::null::NullPlatform;
//! use ringfab_hal::{Mmio, Platform};
//!
//! let p = NullPlatform::new();
//! assert_eq!(p.bar(0).unwrap().read32(0x0008) & 0b10, 0b10); // STATUS.LU: the link is up
//! ```

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use ringfab_hal::{DmaMapping, DmaRegion, Iova, Mmio, Platform, Result, Wait, WaitOutcome};

/// Length of every frame the null device "receives" (written into each completed RX
/// descriptor).
pub const RX_FRAME_LEN: u32 = 64;

const BAR0: usize = 128 * 1024;
const CTRL: usize = 0x0000;
const STATUS: usize = 0x0008;
const MDIC: usize = 0x0020;
const RXQ: usize = 0xC000;
const TXQ: usize = 0xE000;
const Q_STRIDE: usize = 0x40;
const BAL: usize = 0x00;
const BAH: usize = 0x04;
const LEN: usize = 0x08;
const HEAD: usize = 0x10;
const TAIL: usize = 0x18;

/// The platform of one null device: give it to a driver (`Igb::new(NullPlatform::new())`).
pub struct NullPlatform {
    regs: &'static NullRegs,
}

/// The null device's register file (BAR 0); its tail writes complete descriptors.
pub struct NullRegs {
    words: Vec<AtomicU32>,
}

impl NullPlatform {
    /// A new null device, link up, every register zero.
    ///
    /// Its register file is leaked on purpose: a benchmark process makes a handful of these.
    pub fn new() -> Self {
        let words = (0..BAR0 / 4).map(|_| AtomicU32::new(0)).collect();
        NullPlatform {
            regs: Box::leak(Box::new(NullRegs { words })),
        }
    }
}

impl Default for NullPlatform {
    fn default() -> Self {
        Self::new()
    }
}

impl NullRegs {
    #[inline]
    fn get(&self, offset: usize) -> u32 {
        self.words[offset / 4].load(Ordering::Relaxed)
    }

    #[inline]
    fn set(&self, offset: usize, value: u32) {
        self.words[offset / 4].store(value, Ordering::Relaxed);
    }

    /// Completes transmit descriptors up to `tail` (the device's cost, for the profiler).
    #[inline(never)]
    pub fn complete_tx(&self, base: usize, tail: u32) {
        self.complete(base, tail, false);
    }

    /// Completes receive descriptors up to `tail` (the device's cost, for the profiler).
    #[inline(never)]
    pub fn complete_rx(&self, base: usize, tail: u32) {
        self.complete(base, tail, true);
    }

    /// Completes ring descriptors `head..tail` of the queue at `base`, as the device would.
    #[inline(always)]
    fn complete(&self, base: usize, tail: u32, rx: bool) {
        let ring =
            (u64::from(self.get(base + BAH)) << 32 | u64::from(self.get(base + BAL))) as usize;
        let n = (self.get(base + LEN) / 16).max(1);
        let mut head = self.get(base + HEAD) % n;
        while head != tail % n {
            let desc = (ring + 16 * head as usize) as *mut u64;
            // SAFETY: `desc` is descriptor `head` of a ring the driver allocated from this
            // platform (IOVA == CPU address) and programmed into BAL/BAH/LEN; `head < n`.
            unsafe {
                let w1 = desc.add(1);
                if rx {
                    desc.write_volatile(0);
                    w1.write_volatile(u64::from(RX_FRAME_LEN) << 32 | 0b11); // length, EOP | DD
                } else if w1.read_volatile() & (1 << 27) != 0 {
                    w1.write_volatile(w1.read_volatile() | 1 << 32); // RS → DD
                }
            }
            head = (head + 1) % n;
        }
        self.set(base + HEAD, head);
    }
}

impl Mmio for &'static NullRegs {
    #[inline]
    fn read32(&self, offset: usize) -> u32 {
        if offset % 4 != 0 || offset >= BAR0 {
            return u32::MAX;
        }
        match offset {
            CTRL => self.get(CTRL) & !(1 << 26),
            STATUS => 0b11 | 0b10 << 6, // FD, LU, 1000 Mb/s
            MDIC => self.get(MDIC) | 1 << 28,
            _ => self.get(offset),
        }
    }

    #[inline]
    fn write32(&self, offset: usize, value: u32) {
        if offset % 4 != 0 || offset >= BAR0 {
            return;
        }
        self.set(offset, value);
        if offset % Q_STRIDE == TAIL {
            if (RXQ..RXQ + 16 * Q_STRIDE).contains(&offset) {
                self.complete_rx(offset - TAIL, value);
            } else if (TXQ..TXQ + 16 * Q_STRIDE).contains(&offset) {
                self.complete_tx(offset - TAIL, value);
            }
        }
    }

    fn len(&self) -> usize {
        BAR0
    }
}

/// DMA memory of the null device: zeroed, 4096-aligned host memory, IOVA == CPU address.
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

/// The null device maps nothing (`map_dma` always fails); this type only names the mapping.
pub struct NoMapping;

impl DmaMapping for NoMapping {
    fn iova(&self) -> Iova {
        Iova(0)
    }
    fn len(&self) -> usize {
        0
    }
}

/// The null device has no interrupts (`irq` always fails); this type only names the wait
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
// programmed, and DMA memory is plain host memory it owns.
unsafe impl Platform for NullPlatform {
    type Mmio = &'static NullRegs;
    type Dma = HostDma;
    type Mapping = NoMapping;
    type Wait = NoWait;

    fn bar(&self, index: u8) -> Result<Self::Mmio> {
        match index {
            0 => Ok(self.regs),
            _ => Err(ringfab_hal::Error::BarUnavailable { index }),
        }
    }
    fn config_read32(&self, offset: u16) -> u32 {
        match offset {
            0 => 0x10c9_8086, // 82576 as QEMU's igb
            _ => 0,
        }
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
    unsafe fn map_dma(&self, _cpu: NonNull<u8>, len: usize) -> Result<NoMapping> {
        Err(ringfab_hal::Error::DmaMap { len })
    }
    fn delay(&self, _duration: Duration) {}
    fn irq_vectors(&self) -> u16 {
        0
    }
    fn irq(&self, vector: u16) -> Result<NoWait> {
        Err(ringfab_hal::Error::InterruptUnavailable { vector })
    }
}
