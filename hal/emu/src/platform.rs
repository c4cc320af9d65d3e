//! [`EmuPlatform`]: `ringfab_hal::Platform` for an emulated device.

use std::ptr::NonNull;
use std::sync::Arc;
use std::time::Duration;

use ringfab_hal::{Error, Mmio, Platform, Result};

use crate::device::Device;
use crate::iommu::{EmuDma, EmuMapping};
use crate::wait::EmuWait;

/// The platform of one emulated PCI function. `Send + Sync`, cheap to clone (an `Arc` inside).
#[derive(Clone)]
pub struct EmuPlatform {
    dev: Arc<Device>,
}

impl std::fmt::Debug for EmuPlatform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EmuPlatform")
    }
}

impl EmuPlatform {
    pub(crate) fn new(dev: Arc<Device>) -> EmuPlatform {
        EmuPlatform { dev }
    }
}

/// One memory BAR of an emulated device. Each access is one register access of the model, of
/// its own width, in order.
#[derive(Clone)]
pub struct EmuMmio {
    dev: Arc<Device>,
    bar: u8,
}

impl std::fmt::Debug for EmuMmio {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "EmuMmio(BAR{})", self.bar)
    }
}

fn in_bar(offset: usize, size: usize, len: usize) -> bool {
    offset % size == 0 && offset.checked_add(size).is_some_and(|end| end <= len)
}

impl EmuMmio {
    fn len_of(&self) -> usize {
        self.dev.bars[usize::from(self.bar)]
    }

    /// `None` (read as all-ones) outside the BAR, and for a removed device: a PCIe read of a
    /// function that is gone completes as Unsupported Request, which the host sees as all-ones.
    fn read(&self, offset: usize, size: usize) -> Option<u32> {
        (in_bar(offset, size, self.len_of()) && !self.dev.is_removed())
            .then(|| self.dev.with(|m| m.read_bar(self.bar, offset, size)))
    }

    fn write(&self, offset: usize, size: usize, value: u32) {
        if in_bar(offset, size, self.len_of()) && !self.dev.is_removed() {
            self.dev
                .with(|m| m.write_bar(self.bar, offset, size, value));
        }
    }
}

impl Mmio for EmuMmio {
    fn read32(&self, offset: usize) -> u32 {
        self.read(offset, 4).unwrap_or(0xffff_ffff)
    }

    fn write32(&self, offset: usize, value: u32) {
        self.write(offset, 4, value);
    }

    fn read16(&self, offset: usize) -> u16 {
        self.read(offset, 2).map_or(0xffff, |v| v as u16)
    }

    fn write16(&self, offset: usize, value: u16) {
        self.write(offset, 2, value.into());
    }

    fn read8(&self, offset: usize) -> u8 {
        self.read(offset, 1).map_or(0xff, |v| v as u8)
    }

    fn write8(&self, offset: usize, value: u8) {
        self.write(offset, 1, value.into());
    }

    fn len(&self) -> usize {
        self.len_of()
    }
}

// SAFETY: the device model reaches memory only through `Iommu`, whose table holds exactly the
// regions from `alloc_dma` and `map_dma` while they live (an access elsewhere is refused and
// recorded), and `bar` hands out access to this device's registers only.
unsafe impl Platform for EmuPlatform {
    type Mmio = EmuMmio;
    type Dma = EmuDma;
    type Mapping = EmuMapping;
    type Wait = EmuWait;

    fn bar(&self, index: u8) -> Result<EmuMmio> {
        match self.dev.bars.get(usize::from(index)) {
            Some(&len) if len > 0 => Ok(EmuMmio {
                dev: self.dev.clone(),
                bar: index,
            }),
            _ => Err(Error::BarUnavailable { index }),
        }
    }

    fn config_read32(&self, offset: u16) -> u32 {
        if self.dev.is_removed() {
            return u32::MAX;
        }
        self.dev.with(|m| m.config_read(offset))
    }

    fn config_write32(&self, offset: u16, value: u32) {
        if offset % 4 == 0 && !self.dev.is_removed() {
            self.dev.with(|m| m.config_write(offset, value));
        }
    }

    fn alloc_dma(&self, len: usize) -> Result<EmuDma> {
        EmuDma::alloc(&self.dev.iommu, len).ok_or(Error::DmaAlloc { len })
    }

    unsafe fn map_dma(&self, cpu: NonNull<u8>, len: usize) -> Result<EmuMapping> {
        if len == 0 || cpu.as_ptr().addr().checked_add(len).is_none() {
            return Err(Error::DmaMap { len });
        }
        // The caller's contract (memory valid until the mapping drops) is what lets the IOMMU
        // copy into it later.
        Ok(EmuMapping::new(&self.dev.iommu, cpu.as_ptr(), len))
    }

    fn delay(&self, duration: Duration) {
        // Emulated time: the model's clock moves, the thread does not sleep.
        let ns = u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX);
        self.dev.with(|m| m.advance(ns));
    }

    fn irq_vectors(&self) -> u16 {
        // At most a few dozen vectors per model.
        self.dev.vectors.len() as u16
    }

    fn irq(&self, vector: u16) -> Result<EmuWait> {
        self.dev
            .vectors
            .get(usize::from(vector))
            .cloned()
            .ok_or(Error::InterruptUnavailable { vector })
    }
}

const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<EmuPlatform>();
    send_sync::<EmuMmio>();
};
