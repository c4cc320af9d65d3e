//! What every emulated NIC shares: the model behind a mutex, its IOMMU, its MSI-X vectors, its
//! port on a [`Wire`], and the handle a test holds, [`EmuNic`].
//!
//! A model (`igb/`, `e1000e/`) implements the crate-private `Model` trait: register reads and
//! writes, configuration space, frames from the wire, deferred work, emulated time, the cable and
//! its [`Engine`]. Everything around it — locking, delivering what it transmitted after its lock
//! is released, the platform a driver is given — is written once, here.

use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use ringfab_hal::{Iova, MacAddr};

use crate::engine::Engine;
use crate::fault::{CriticalFault, DeviceFault};
use crate::iommu::{Iommu, IommuFault};
use crate::platform::EmuPlatform;
use crate::wait::EmuWait;
use crate::wire::{Wire, WirePort};

/// One register-level device model. Every method runs with the device lock held.
pub(crate) trait Model: Send {
    /// A 32-bit register read at BAR0 offset `off` (in range and aligned).
    fn read(&mut self, off: usize) -> u32;
    /// A 32-bit register write at BAR0 offset `off` (in range and aligned).
    fn write(&mut self, off: usize, val: u32);
    /// A configuration-space read.
    fn config_read(&self, off: u16) -> u32;
    /// A configuration-space write (4-byte aligned).
    fn config_write(&mut self, off: u16, val: u32);
    /// A frame from the wire; `crc_ok` is false when it was corrupted in transit.
    fn receive(&mut self, frame: &[u8], crc_ok: bool);
    /// One step of deferred work; returns whether any remains.
    fn step(&mut self) -> bool;
    /// Advances emulated time by `ns`.
    fn advance(&mut self, ns: u64);
    /// Emulated time in nanoseconds.
    fn now_ns(&self) -> u64;
    /// The permanent MAC address.
    fn mac(&self) -> MacAddr;
    /// Plugs or pulls the cable.
    fn set_cable(&mut self, up: bool);
    /// The DMA engine's fault state.
    fn engine(&mut self) -> &mut Engine;
    /// Frames transmitted since the last call.
    fn take_outbox(&mut self) -> Vec<Vec<u8>>;
    /// The ring memory the device writes (descriptor rings of the Intel models, used rings of
    /// virtqueues): `(iova, bytes)` of each area programmed now.
    fn rings(&self) -> Vec<(u64, u64)>;

    /// A device-initiated [`CriticalFault::Reset`], [`CriticalFault::NeedsReset`] or
    /// [`CriticalFault::DisableQueue`] (surprise removal is the device wrapper's, not the
    /// model's). A model ignores what it does not have.
    fn critical(&mut self, fault: CriticalFault);

    /// The virtio-net model, for its test accessors; `None` for every other model.
    fn as_virtio(&self) -> Option<&crate::virtio::model::VirtioNetModel> {
        None
    }

    /// A read of `size` bytes (1, 2 or 4, naturally aligned, in range) at `off` of BAR `bar`.
    /// Models with registers in BAR0 only keep the default: a 32-bit register read, narrowed.
    fn read_bar(&mut self, bar: u8, off: usize, size: usize) -> u32 {
        let _ = bar;
        let v = self.read(off & !3);
        match size {
            4 => v,
            _ => (v >> ((off & 3) * 8)) & ((1 << (size * 8)) - 1),
        }
    }

    /// A write of `size` bytes at `off` of BAR `bar`; the default merges the narrow value into
    /// the 32-bit BAR0 register around it.
    fn write_bar(&mut self, bar: u8, off: usize, size: usize, val: u32) {
        let _ = bar;
        if size == 4 {
            return self.write(off, val);
        }
        let shift = (off & 3) * 8;
        let mask = ((1u32 << (size * 8)) - 1) << shift;
        let old = self.read(off & !3);
        self.write(off & !3, old & !mask | (val << shift) & mask);
    }
}

/// How to build an emulated NIC (any model).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub struct ModelConfig {
    /// The permanent MAC address (QEMU `-device igb,mac=` / `-device e1000e,mac=`), loaded into
    /// RAL0/RAH0 on reset.
    pub mac: MacAddr,
    /// Whether PCI Bus Master Enable starts set. A VFIO platform turns bus mastering on itself,
    /// so the default is `true`; clear it to test a device that may not DMA.
    pub bus_master: bool,
    /// Whether a link partner is present (the cable is plugged in). Default `true`.
    pub link: bool,
}

impl Default for ModelConfig {
    fn default() -> Self {
        ModelConfig {
            mac: MacAddr([0x52, 0x54, 0, 0x12, 0x34, 0x56]),
            bus_master: true,
            link: true,
        }
    }
}

/// Which device an [`EmuNic`] models: [`Igb82576`](crate::Igb82576),
/// [`E1000e82574`](crate::E1000e82574) or [`VirtioNetPci`](crate::VirtioNetPci). Only this
/// crate's markers have constructors.
pub trait Kind: 'static {
    /// The device's name, for `Debug`.
    const NAME: &'static str;
}

pub(crate) struct Device {
    model: Mutex<Box<dyn Model>>,
    pub(crate) iommu: Iommu,
    pub(crate) vectors: Vec<EmuWait>,
    /// Size in bytes of each memory BAR the model has registers in (0: none).
    pub(crate) bars: [usize; 6],
    port: Mutex<Option<(Wire, usize)>>,
    /// Surprise removal ([`CriticalFault::SurpriseRemoval`]): registers read all-ones,
    /// writes and frames are dropped, no deferred work runs.
    pub(crate) removed: AtomicBool,
}

fn lock<T: ?Sized>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic inside the model (a model bug) leaves registers as they were; carrying on with
    // them is more useful to a test than a cascade of poison errors.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Device {
    /// Whether the device was surprise-removed.
    pub(crate) fn is_removed(&self) -> bool {
        self.removed.load(Ordering::Acquire)
    }

    /// Runs `f` on the model, then hands any transmitted frames to the wire — after the model
    /// lock is released, so that delivering into another device never nests two device locks.
    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut dyn Model) -> R) -> R {
        let _device = crate::DeviceWork::enter();
        let (r, out) = {
            let mut m = lock(&self.model);
            let r = f(&mut **m);
            (r, m.take_outbox())
        };
        if !out.is_empty() {
            let port = lock(&self.port).clone();
            if let Some((wire, id)) = port {
                wire.send(id, out);
            }
        }
        r
    }
}

impl WirePort for Device {
    fn receive(&self, frame: &[u8], crc_ok: bool) {
        if !self.is_removed() {
            self.with(|m| m.receive(frame, crc_ok));
        }
    }

    fn step(&self) -> bool {
        !self.is_removed() && self.with(|m| m.step())
    }
}

/// An emulated NIC of kind `K`. Cheap to clone; clones are the same device. Named through its
/// aliases, [`EmuIgb`](crate::EmuIgb) and [`EmuE1000e`](crate::EmuE1000e).
pub struct EmuNic<K: Kind> {
    dev: Arc<Device>,
    _kind: PhantomData<fn() -> K>,
}

impl<K: Kind> Clone for EmuNic<K> {
    fn clone(&self) -> Self {
        EmuNic {
            dev: self.dev.clone(),
            _kind: PhantomData,
        }
    }
}

impl<K: Kind> std::fmt::Debug for EmuNic<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct(K::NAME).field("mac", &self.mac()).finish()
    }
}

impl<K: Kind> EmuNic<K> {
    /// Wraps a model built by a kind's constructor; `vectors` are the wait handles the model
    /// notifies.
    pub(crate) fn from_model(
        model: Box<dyn Model>,
        iommu: Iommu,
        vectors: Vec<EmuWait>,
        bar_len: usize,
    ) -> Self {
        Self::from_model_bars(model, iommu, vectors, [bar_len, 0, 0, 0, 0, 0])
    }

    /// As [`from_model`](Self::from_model), for a model with registers in several BARs
    /// (`bars[i]`: size of BAR `i` in bytes, 0 where the model has none).
    pub(crate) fn from_model_bars(
        model: Box<dyn Model>,
        iommu: Iommu,
        vectors: Vec<EmuWait>,
        bars: [usize; 6],
    ) -> Self {
        EmuNic {
            dev: Arc::new(Device {
                model: Mutex::new(model),
                iommu,
                vectors,
                bars,
                port: Mutex::new(None),
                removed: AtomicBool::new(false),
            }),
            _kind: PhantomData,
        }
    }

    /// Runs `f` on the model under the device lock (for a kind's own accessors).
    pub(crate) fn with_model<R>(&self, f: impl FnOnce(&mut dyn Model) -> R) -> R {
        self.dev.with(f)
    }

    /// Plugs the device into `wire`. Connect each device once: it transmits on the wire it was
    /// connected to last, and receives from every wire it was connected to.
    pub fn connect(&self, wire: &Wire) {
        let weak: std::sync::Weak<dyn WirePort> = Arc::downgrade(&self.dev) as _;
        let id = wire.attach(weak);
        *lock(&self.dev.port) = Some((wire.clone(), id));
    }

    /// The platform a driver runs on: BAR0, DMA through this device's IOMMU, configuration
    /// space, interrupt vectors, and a `delay` that advances this device's clock.
    pub fn platform(&self) -> EmuPlatform {
        EmuPlatform::new(self.dev.clone())
    }

    /// The permanent MAC address.
    pub fn mac(&self) -> MacAddr {
        self.dev.with(|m| m.mac())
    }

    /// Adds a device fault; faults act in the order they were injected.
    pub fn inject(&self, fault: DeviceFault) {
        self.dev.with(|m| m.engine().faults.push(fault));
    }

    /// Makes a critical device event happen now (see [`CriticalFault`]).
    pub fn inject_critical(&self, fault: CriticalFault) {
        match fault {
            CriticalFault::SurpriseRemoval => self.dev.removed.store(true, Ordering::Release),
            _ => self.dev.with(|m| m.critical(fault)),
        }
    }

    /// Whether the device was surprise-removed ([`CriticalFault::SurpriseRemoval`]).
    pub fn is_removed(&self) -> bool {
        self.dev.is_removed()
    }

    /// Removes every device fault not yet used up.
    pub fn clear_faults(&self) {
        self.dev.with(|m| m.engine().faults.clear());
    }

    /// The IOMMU this device sits behind.
    pub fn iommu(&self) -> &Iommu {
        &self.dev.iommu
    }

    /// DMA accesses the IOMMU refused so far.
    pub fn iommu_faults(&self) -> Vec<IommuFault> {
        self.dev.iommu.faults()
    }

    /// Revokes the IOMMU mapping containing `iova` behind the driver's back; see
    /// [`Iommu::revoke`].
    pub fn revoke_dma(&self, iova: Iova) -> bool {
        self.dev.iommu.revoke(iova)
    }

    /// Plugs (`true`) or pulls (`false`) the cable, as QEMU's `set_link` does: down is
    /// immediate; up restarts autonegotiation (500 ms of emulated time) if it is enabled and not
    /// complete, else the link is up at once. Raises the link-status-change cause when STATUS
    /// changes.
    pub fn set_link(&self, up: bool) {
        self.dev.with(|m| m.set_cable(up));
    }

    /// Advances the device's emulated clock (what `Platform::delay` does).
    pub fn advance_clock(&self, by: Duration) {
        let ns = u64::try_from(by.as_nanos()).unwrap_or(u64::MAX);
        self.dev.with(|m| m.advance(ns));
    }

    /// Emulated time since the device was created.
    pub fn now(&self) -> Duration {
        Duration::from_nanos(self.dev.with(|m| m.now_ns()))
    }

    /// One step of deferred device work (delayed write-backs); returns whether any remains.
    /// Transmission itself needs no step: it happens on the tail write.
    pub fn step(&self) -> bool {
        !self.dev.is_removed() && self.dev.with(|m| m.step())
    }

    /// Steps until no deferred work remains (bounded).
    pub fn run_until_idle(&self) {
        for _ in 0..10_000 {
            if !self.step() {
                return;
            }
        }
    }

    /// Delivers `frame` to the device as if it arrived from the wire with a good CRC.
    pub fn receive(&self, frame: &[u8]) {
        if !self.dev.is_removed() {
            self.dev.with(|m| m.receive(frame, true));
        }
    }

    /// Makes every MSI-X vector's wait handle mirror its notifications into an eventfd, so that
    /// `Wait::raw` gives a descriptor as under VFIO (`FI_WAIT_FD`, `FI_GETWAIT`); see
    /// [`EmuWait::attach_eventfd`].
    ///
    /// # Errors
    /// The OS error from eventfd(2).
    #[cfg(target_os = "linux")]
    pub fn use_eventfds(&self) -> std::io::Result<()> {
        self.dev
            .vectors
            .iter()
            .try_for_each(EmuWait::attach_eventfd)
    }

    /// The wait handle of MSI-X vector `v` (the same one `Platform::irq(v)` returns), if any.
    pub fn vector(&self, v: u16) -> Option<EmuWait> {
        self.dev.vectors.get(usize::from(v)).cloned()
    }
}
