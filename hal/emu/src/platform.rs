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

/// BAR0 of an emulated device. Each access is one register access of the model, in order.
#[derive(Clone)]
pub struct EmuMmio {
    dev: Arc<Device>,
}

impl std::fmt::Debug for EmuMmio {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EmuMmio(BAR0)")
    }
}

fn in_bar(offset: usize, len: usize) -> bool {
    offset % 4 == 0 && offset.checked_add(4).is_some_and(|end| end <= len)
}

impl Mmio for EmuMmio {
    fn read32(&self, offset: usize) -> u32 {
        if !in_bar(offset, self.dev.bar_len) {
            return 0xffff_ffff;
        }
        self.dev.with(|m| m.read(offset))
    }

    fn write32(&self, offset: usize, value: u32) {
        if in_bar(offset, self.dev.bar_len) {
            self.dev.with(|m| m.write(offset, value));
        }
    }

    fn len(&self) -> usize {
        self.dev.bar_len
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
        match index {
            0 => Ok(EmuMmio {
                dev: self.dev.clone(),
            }),
            _ => Err(Error::BarUnavailable { index }),
        }
    }

    fn config_read32(&self, offset: u16) -> u32 {
        self.dev.with(|m| m.config_read(offset))
    }

    fn config_write32(&self, offset: u16, value: u32) {
        if offset % 4 == 0 {
            self.dev.with(|m| m.config_write(offset, value));
        }
    }

    fn alloc_dma(&self, len: usize) -> Result<EmuDma> {
        EmuDma::alloc(&self.dev.iommu, len).ok_or(Error::DmaAlloc { len })
    }

    unsafe fn map_dma(&self, cpu: NonNull<u8>, len: usize) -> Result<EmuMapping> {
        if len == 0 || (cpu.as_ptr() as usize).checked_add(len).is_none() {
            return Err(Error::DmaMap { len });
        }
        // The caller's contract (memory valid until the mapping drops) is what lets the IOMMU
        // copy into it later.
        Ok(EmuMapping::new(&self.dev.iommu, cpu.as_ptr() as usize, len))
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
