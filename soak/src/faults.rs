//! The faults the soak injects, drawn from its seeded [`Prng`]: on the wire, in a device's
//! DMA engine, critical device events, and IOMMU mappings removed behind the driver's back.
//! Each comes with the name it is counted under.

use ringfab_emu::{CorruptMode, CriticalFault, DeviceFault, Prng, Ring, WireFault};

/// The NIC models the soak runs.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Model {
    /// Two emulated 82576 under the igb driver.
    Igb,
    /// Two emulated 82574 under the e1000e driver.
    E1000e,
    /// Two emulated virtio-net devices under the virtio-net driver.
    VirtioNet,
}

impl Model {
    /// Every model, in the order `--nic all` runs them.
    pub const ALL: [Model; 3] = [Model::Igb, Model::E1000e, Model::VirtioNet];

    /// The name `--nic` takes.
    pub fn name(self) -> &'static str {
        match self {
            Model::Igb => "igb",
            Model::E1000e => "e1000e",
            Model::VirtioNet => "virtio-net",
        }
    }

    fn is_intel(self) -> bool {
        self != Model::VirtioNet
    }
}

/// One fault to inject.
#[derive(Clone, Copy, Debug)]
pub enum Fault {
    /// On the wire.
    Wire(WireFault),
    /// In one station's device.
    Device(DeviceFault),
    /// A critical event of one station's device.
    Critical(CriticalFault),
    /// The IOMMU mapping of one station's registered region is removed.
    Iommu,
}

/// Uniform in `0..n` (`n` > 0).
pub fn below(rng: &mut Prng, n: u64) -> u64 {
    rng.next_u64() % n
}

fn ring(rng: &mut Prng) -> Option<Ring> {
    Some(if rng.chance(500) {
        Ring::Tx(0)
    } else {
        Ring::Rx(0)
    })
}

/// Draws a fault for `model`, with its name. `removal` is the chance (per mille of critical
/// faults) of a surprise removal, which ends the devices' life in the soak.
pub fn draw(rng: &mut Prng, model: Model, removal: u16) -> (Fault, &'static str) {
    let count = below(rng, 4) as usize + 1;
    match below(rng, 100) {
        // The wire: 40 %.
        0..40 => {
            let (f, name) = match below(rng, 5) {
                0 => (WireFault::Drop { count }, "wire.drop"),
                1 => (
                    WireFault::Corrupt {
                        count,
                        offset: below(rng, 96) as usize,
                        mode: CorruptMode::Silent,
                    },
                    "wire.corrupt-good-fcs",
                ),
                2 => (
                    WireFault::Corrupt {
                        count,
                        offset: below(rng, 96) as usize,
                        mode: CorruptMode::BadCrc,
                    },
                    "wire.corrupt-bad-fcs",
                ),
                3 => (WireFault::Duplicate { count }, "wire.duplicate"),
                _ => (WireFault::Reorder { count }, "wire.reorder"),
            };
            (Fault::Wire(f), name)
        }
        // The device's DMA engine: 45 %.
        40..85 => {
            let ring = ring(rng);
            let (f, name) = match below(rng, if model.is_intel() { 7 } else { 9 }) {
                0 => (
                    DeviceFault::WithholdWriteback { ring, count },
                    "device.withhold-writeback",
                ),
                1 => (
                    DeviceFault::DelayWriteback {
                        ring,
                        count,
                        steps: below(rng, 16) as u32 + 1,
                    },
                    "device.delay-writeback",
                ),
                2 => (
                    DeviceFault::OversizeLength {
                        queue: Some(0),
                        count,
                        extra: below(rng, 4096) as u16 + 1,
                    },
                    "device.oversize-length",
                ),
                3 => (
                    DeviceFault::GarbageStatus {
                        ring,
                        count,
                        bits: rng.next_u64() as u32,
                    },
                    "device.garbage-status",
                ),
                4 => (
                    DeviceFault::RefuseStop { ring, count: 1 },
                    "device.refuse-stop",
                ),
                5 => (
                    DeviceFault::RefuseStart { ring, count: 1 },
                    "device.refuse-start",
                ),
                6 if model.is_intel() => (
                    DeviceFault::CutFrame {
                        queue: Some(0),
                        count,
                    },
                    "device.cut-frame",
                ),
                6 => (
                    DeviceFault::CompleteOutOfOrder { ring, count },
                    "device.out-of-order",
                ),
                // Ids out of the queue's range only: a device that names another buffer
                // the driver made available cannot be told from an honest one, and the driver
                // hands that buffer back while the device may still write it (open finding,
                // docs/reliability.md, "Soak").
                7 => (
                    DeviceFault::LieUsedId {
                        ring,
                        count: 1,
                        id: 1024 + rng.next_u64() as u32 % 1024,
                    },
                    "device.lie-used-id",
                ),
                _ => (
                    DeviceFault::JumpUsedIdx {
                        ring,
                        by: below(rng, 512) as u16 + 1,
                    },
                    "device.jump-used-idx",
                ),
            };
            (Fault::Device(f), name)
        }
        // Critical events: 12 %.
        85..97 => {
            if rng.chance(removal) {
                return (
                    Fault::Critical(CriticalFault::SurpriseRemoval),
                    "critical.surprise-removal",
                );
            }
            let (f, name) = match below(rng, if model.is_intel() { 2 } else { 3 }) {
                0 => (CriticalFault::Reset, "critical.reset"),
                1 => (
                    CriticalFault::DisableQueue(ring(rng).unwrap_or(Ring::Rx(0))),
                    "critical.disable-queue",
                ),
                _ => (CriticalFault::NeedsReset, "critical.needs-reset"),
            };
            (Fault::Critical(f), name)
        }
        // The IOMMU: 3 %.
        _ => (Fault::Iommu, "iommu.region-unmapped"),
    }
}
