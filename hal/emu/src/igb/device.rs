//! [`EmuIgb`]: the constructor of an emulated 82576; everything else an emulated NIC does is
//! shared ([`EmuNic`]).

use super::model::IgbModel;
use super::regs::{BAR0_LEN, MSIX_VECTORS};
use crate::device::{EmuNic, Kind, ModelConfig};
use crate::iommu::Iommu;
use crate::wait::EmuWait;

/// How to build an emulated 82576 (the same knobs as every model).
pub type IgbModelConfig = ModelConfig;

/// The [`Kind`] of an emulated Intel 82576 as QEMU's `igb` presents it.
#[derive(Debug)]
pub enum Igb82576 {}

impl Kind for Igb82576 {
    const NAME: &'static str = "EmuIgb";
}

/// An emulated Intel 82576 as QEMU's `igb` presents it. Cheap to clone; clones are the same
/// device.
pub type EmuIgb = EmuNic<Igb82576>;

impl EmuNic<Igb82576> {
    /// A powered-on device: registers at their reset values, MAC in RAL0/RAH0, and (as QEMU at
    /// VM start) autonegotiation running, so the link comes up after 500 ms of emulated time.
    pub fn new(config: IgbModelConfig) -> EmuIgb {
        let iommu = Iommu::new();
        let vectors: Vec<EmuWait> = (0..MSIX_VECTORS).map(|_| EmuWait::new()).collect();
        let model = IgbModel::new(
            config.mac,
            config.bus_master,
            config.link,
            iommu.clone(),
            vectors.clone(),
        );
        EmuNic::from_model(Box::new(model), iommu, vectors, BAR0_LEN)
    }
}
