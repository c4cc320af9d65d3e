//! [`EmuIgb`]: one emulated 82576 — its model behind a mutex, its IOMMU, its interrupt vectors
//! and its port on a [`Wire`].

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use ringfab_hal::{Iova, MacAddr};

use super::model::IgbModel;
use crate::fault::DeviceFault;
use crate::iommu::{Iommu, IommuFault};
use crate::platform::EmuPlatform;
use crate::wait::EmuWait;
use crate::wire::{Wire, WirePort};

/// How to build an emulated 82576.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub struct IgbModelConfig {
    /// The permanent MAC address (QEMU `-device igb,mac=`), loaded into RAL0/RAH0 on reset.
    pub mac: MacAddr,
    /// Whether PCI Bus Master Enable starts set. A VFIO platform turns bus mastering on itself,
    /// so the default is `true`; clear it to test a device that may not DMA.
    pub bus_master: bool,
    /// Whether a link partner is present (the cable is plugged in). Default `true`.
    pub link: bool,
}

impl Default for IgbModelConfig {
    fn default() -> Self {
        IgbModelConfig {
            mac: MacAddr([0x52, 0x54, 0, 0x12, 0x34, 0x56]),
            bus_master: true,
            link: true,
        }
    }
}

pub(crate) struct Device {
    model: Mutex<IgbModel>,
    pub(crate) iommu: Iommu,
    pub(crate) vectors: Vec<EmuWait>,
    port: Mutex<Option<(Wire, usize)>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic inside the model (a model bug) leaves registers as they were; carrying on with
    // them is more useful to a test than a cascade of poison errors.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Device {
    /// Runs `f` on the model, then hands any transmitted frames to the wire — after the model
    /// lock is released, so that delivering into another device never nests two device locks.
    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut IgbModel) -> R) -> R {
        let _device = crate::DeviceWork::enter();
        let (r, out) = {
            let mut m = lock(&self.model);
            let r = f(&mut m);
            (r, std::mem::take(&mut m.outbox))
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
        self.with(|m| m.receive(frame, crc_ok));
    }

    fn step(&self) -> bool {
        self.with(IgbModel::step)
    }
}

/// An emulated Intel 82576 as QEMU's `igb` presents it. Cheap to clone; clones are the same
/// device.
#[derive(Clone)]
pub struct EmuIgb {
    dev: Arc<Device>,
}

impl std::fmt::Debug for EmuIgb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmuIgb").field("mac", &self.mac()).finish()
    }
}

impl EmuIgb {
    /// A powered-on device: registers at their reset values, MAC in RAL0/RAH0, and (as QEMU at
    /// VM start) autonegotiation running, so the link comes up after 500 ms of emulated time.
    pub fn new(config: IgbModelConfig) -> EmuIgb {
        let iommu = Iommu::new();
        let model = IgbModel::new(config.mac, config.bus_master, config.link, iommu.clone());
        let vectors = model.vectors.clone();
        EmuIgb {
            dev: Arc::new(Device {
                model: Mutex::new(model),
                iommu,
                vectors,
                port: Mutex::new(None),
            }),
        }
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
        self.dev.with(|m| m.faults.push(fault));
    }

    /// Removes every device fault not yet used up.
    pub fn clear_faults(&self) {
        self.dev.with(|m| m.faults.clear());
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
    /// complete, else the link is up at once. Raises ICR.LSC when STATUS changes.
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
    /// Transmission itself needs no step: it happens on the TDT write.
    pub fn step(&self) -> bool {
        self.dev.with(IgbModel::step)
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
        self.dev.with(|m| m.receive(frame, true));
    }

    /// The wait handle of MSI-X vector `v` (the same one `Platform::irq(v)` returns), if any.
    pub fn vector(&self, v: u16) -> Option<EmuWait> {
        self.dev.vectors.get(usize::from(v)).cloned()
    }
}
