//! A platform that counts register writes, for tests that count doorbells: during a post the
//! only register writes are doorbells (an Intel ring's tail, virtio's queue notification).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ringfab::hal::{Mmio, Nic, Platform};
use ringfab_e1000e::E1000e;
use ringfab_emu::{EmuDma, EmuMapping, EmuMmio, EmuPlatform, EmuWait};
use ringfab_igb::Igb;
use ringfab_virtio_net::VirtioNet;

use super::{E1000eNic, IgbNic, TestNic, VirtioNic};

/// A platform that counts register writes: during a post the only ones are doorbells (an
/// Intel ring's tail, virtio's queue notification).
pub(crate) struct Counting {
    pub(crate) inner: EmuPlatform,
    pub(crate) writes: Arc<AtomicUsize>,
}

/// A BAR of [`Counting`].
pub(crate) struct CountingMmio {
    inner: EmuMmio,
    writes: Arc<AtomicUsize>,
}

impl Mmio for CountingMmio {
    fn read32(&self, offset: usize) -> u32 {
        self.inner.read32(offset)
    }

    fn write32(&self, offset: usize, value: u32) {
        self.writes.fetch_add(1, Ordering::Relaxed);
        self.inner.write32(offset, value);
    }

    fn read16(&self, offset: usize) -> u16 {
        self.inner.read16(offset)
    }

    fn write16(&self, offset: usize, value: u16) {
        self.writes.fetch_add(1, Ordering::Relaxed);
        self.inner.write16(offset, value);
    }

    fn read8(&self, offset: usize) -> u8 {
        self.inner.read8(offset)
    }

    fn write8(&self, offset: usize, value: u8) {
        self.writes.fetch_add(1, Ordering::Relaxed);
        self.inner.write8(offset, value);
    }

    fn len(&self) -> usize {
        self.inner.len()
    }
}

// SAFETY: every call goes to the emulated platform, which keeps `Platform`'s promises
// (the device reaches only the memory it hands out or maps; `bar` reaches its own registers);
// the wrapper only counts register writes on the way.
unsafe impl Platform for Counting {
    type Mmio = CountingMmio;
    type Dma = EmuDma;
    type Mapping = EmuMapping;
    type Wait = EmuWait;

    fn bar(&self, index: u8) -> ringfab::hal::Result<CountingMmio> {
        Ok(CountingMmio {
            inner: self.inner.bar(index)?,
            writes: self.writes.clone(),
        })
    }

    fn config_read32(&self, offset: u16) -> u32 {
        self.inner.config_read32(offset)
    }

    fn config_write32(&self, offset: u16, value: u32) {
        self.inner.config_write32(offset, value);
    }

    fn alloc_dma(&self, len: usize) -> ringfab::hal::Result<EmuDma> {
        self.inner.alloc_dma(len)
    }

    unsafe fn map_dma(
        &self,
        cpu: std::ptr::NonNull<u8>,
        len: usize,
    ) -> ringfab::hal::Result<EmuMapping> {
        // SAFETY: the caller's promise for this call is the one the inner call needs.
        unsafe { self.inner.map_dma(cpu, len) }
    }

    fn delay(&self, duration: Duration) {
        self.inner.delay(duration);
    }

    fn irq_vectors(&self) -> u16 {
        self.inner.irq_vectors()
    }

    fn irq(&self, vector: u16) -> ringfab::hal::Result<EmuWait> {
        self.inner.irq(vector)
    }
}

/// A NIC whose driver can run on [`Counting`].
pub(crate) trait Counted: TestNic {
    /// Whether every doorbell is a register write. A virtio device says in ring memory whether
    /// it wants to be notified (`VIRTIO_F_EVENT_IDX`, virtio 1.2 §2.7.10): the driver's
    /// doorbell always publishes the buffers, and writes the notification register only when
    /// asked, so writes count at most the doorbells there.
    const EVERY_DOORBELL_WRITES: bool = true;
    type Driver: Nic;
    fn counted(platform: Counting) -> Self::Driver;
}

impl Counted for IgbNic {
    type Driver = Igb<Counting>;
    fn counted(platform: Counting) -> Self::Driver {
        Igb::new(platform).unwrap()
    }
}

impl Counted for E1000eNic {
    type Driver = E1000e<Counting>;
    fn counted(platform: Counting) -> Self::Driver {
        E1000e::new(platform).unwrap()
    }
}

impl Counted for VirtioNic {
    const EVERY_DOORBELL_WRITES: bool = false;
    type Driver = VirtioNet<Counting>;
    fn counted(platform: Counting) -> Self::Driver {
        VirtioNet::new(platform).unwrap()
    }
}
