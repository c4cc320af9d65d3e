//! Emulated NICs for ringfab: register-level device models behind an emulated IOMMU, joined by
//! a [`Wire`], with fault injection — so that the real drivers and all of core run under
//! `cargo test`, deterministically and without privileges.
//!
//! The models here are the Intel 82576 as QEMU's `igb` device presents it ([`EmuIgb`]), the
//! Intel 82574 as QEMU's `e1000e` presents it ([`EmuE1000e`]) and a virtio 1.x network device
//! as QEMU's `virtio-net-pci` presents it ([`EmuVirtioNet`]); each is an [`EmuNic`] whose
//! [`EmuPlatform`] implements `ringfab_hal::Platform` and is what a driver is given. The IOMMU,
//! the wire, fault injection and the platform are shared by every model.
//!
//! What it guarantees:
//!
//! * **The device reaches memory only through the [`Iommu`].** An access outside the live
//!   mappings is refused and recorded ([`IommuFault`]); the model then does not act on that
//!   descriptor (the ring stalls there). No bad IOVA, register value or descriptor panics.
//! * **Deterministic by default.** Device work happens synchronously on register writes (a TDT
//!   write transmits; the frame reaches the other ports of the wire before the write returns),
//!   and deferred work only on [`EmuIgb::step`] / [`Wire::run_until_idle`]. Time is emulated:
//!   `Platform::delay` advances the device clock, which is what completes autonegotiation.
//!   [`Wire::spawn_pump`] adds a background thread when a test wants one.
//! * **Across processes on request.** [`Wire::join`] makes a wire a member of a hub that other
//!   processes join through the same directory (one Unix datagram socket each, no daemon, no
//!   root), so two programs, each with an emulated NIC, exchange frames. Frames from other
//!   members arrive on a thread of the wire's own, so that wire's timing is no longer
//!   deterministic; everything on the local side (faults, capture, counters) works as before.
//! * **Faults are explicit.** [`WireFault`] and [`DeviceFault`] are injected per test and act by
//!   counts, periods or a seeded PRNG, never by wall-clock time.
//! * **A device can be made hostile.** Besides the faults, a [`Scribbler`] flips bits in the
//!   rings the device writes while the driver polls ([`EmuNic::spawn_scribbler`], or one flip
//!   at a time with [`EmuNic::scribble`]), and the IOMMU can log every device write
//!   ([`Iommu::record_writes`]) so that a test can check that nothing the device wrote landed
//!   in a buffer after the driver handed it back.
//!
//! ```
//! use ringfab_emu::{EmuIgb, IgbModelConfig, Wire};
//! use ringfab_hal::{Mmio, Platform};
//!
//! let wire = Wire::new();
//! let a = EmuIgb::new(IgbModelConfig::default());
//! a.connect(&wire);
//! let bar = a.platform().bar(0).unwrap();
//! assert_eq!(bar.read32(0x5404) >> 31, 1); // RAH0.AV: the MAC is loaded
//! ```
#![deny(
    unsafe_op_in_unsafe_fn,
    clippy::undocumented_unsafe_blocks,
    missing_docs
)]

mod csum;
mod device;
pub mod e1000e;
mod engine;
pub mod fault;
#[cfg(unix)]
mod hub;
pub mod igb;
pub mod iommu;
pub mod null;
pub mod pcap;
mod pci;
pub mod platform;
pub mod scribble;
pub mod toeplitz;
pub mod virtio;
pub mod wait;
pub mod wire;

pub use device::{EmuNic, Kind, ModelConfig};
pub use e1000e::{E1000e82574, E1000eModelConfig, EmuE1000e};
pub use fault::{CorruptMode, CriticalFault, DeviceFault, Prng, Ring, WireFault};
pub use igb::{EmuIgb, Igb82576, IgbModelConfig};
pub use iommu::{DmaWrite, EmuDma, EmuMapping, Iommu, IommuFault};
pub use null::{NullPlatform, NullRegs, NullVirtioRegs};
pub use platform::{EmuMmio, EmuPlatform};
pub use scribble::{Flip, Scribbler};
pub use virtio::{EmuVirtioNet, VirtioNetModelConfig, VirtioNetPci};
pub use wait::{EmuWait, EmuWaitSet};
pub use wire::{Pump, Wire, WireStats};

std::thread_local! {
    static DEVICE_WORK: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Whether the calling thread is inside an emulated device right now (a register access the
/// model is handling, or the model delivering frames).
///
/// The models run on the thread that touches their registers, where real hardware would work
/// on its own; a test that checks the *driver* allocates nothing (a counting global allocator)
/// uses this to leave the stand-in hardware's allocations out.
pub fn in_device() -> bool {
    DEVICE_WORK.with(|d| d.get() > 0)
}

/// Marks the thread as inside a device model until dropped (nests).
pub(crate) struct DeviceWork;

impl DeviceWork {
    pub(crate) fn enter() -> DeviceWork {
        DEVICE_WORK.with(|d| d.set(d.get() + 1));
        DeviceWork
    }
}

impl Drop for DeviceWork {
    fn drop(&mut self) {
        DEVICE_WORK.with(|d| d.set(d.get() - 1));
    }
}

#[cfg(test)]
mod tests;
