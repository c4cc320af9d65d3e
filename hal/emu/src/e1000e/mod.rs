//! The emulated Intel 82574 ("e1000e"), register for register as QEMU's `e1000e` device
//! presents it: two queue pairs, RSS over them, five MSI-X vectors, extended receive
//! descriptors, legacy and extended transmit descriptors.

mod model;
pub mod pci;
mod queues;
pub mod regs;
#[cfg(test)]
mod tests;

use crate::device::{EmuNic, Kind, ModelConfig};
use crate::iommu::Iommu;
use crate::wait::EmuWait;
use model::E1000eModel;

/// How to build an emulated 82574 (the same knobs as every model).
pub type E1000eModelConfig = ModelConfig;

/// The [`Kind`] of an emulated Intel 82574 as QEMU's `e1000e` presents it.
#[derive(Debug)]
pub enum E1000e82574 {}

impl Kind for E1000e82574 {
    const NAME: &'static str = "EmuE1000e";
}

/// An emulated Intel 82574 as QEMU's `e1000e` presents it. Cheap to clone; clones are the same
/// device.
pub type EmuE1000e = EmuNic<E1000e82574>;

impl EmuNic<E1000e82574> {
    /// A powered-on device: registers at their reset values (STATUS.LU set, as QEMU's reset
    /// leaves it), MAC in RAL0/RAH0, and autonegotiation running as at QEMU's VM start: it
    /// completes 500 ms of emulated time later.
    pub fn new(config: E1000eModelConfig) -> EmuE1000e {
        let iommu = Iommu::new();
        let vectors: Vec<EmuWait> = (0..regs::MSIX_VECTORS).map(|_| EmuWait::new()).collect();
        let model = E1000eModel::new(
            config.mac,
            config.bus_master,
            config.link,
            iommu.clone(),
            vectors.clone(),
        );
        EmuNic::from_model(Box::new(model), iommu, vectors, regs::BAR0_LEN)
    }
}
