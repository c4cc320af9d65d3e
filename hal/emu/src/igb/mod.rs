//! The emulated Intel 82576 ("igb"), register for register as QEMU's `igb` device presents it.

mod device;
mod model;
pub mod pci;
mod queues;
pub mod regs;

pub use device::{EmuIgb, Igb82576, IgbModelConfig};
