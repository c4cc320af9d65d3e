//! Emulated NICs of each model with a given MAC, for the tests of `AnyNic`.

use ringfab_emu::{EmuE1000e, EmuIgb, EmuNic, EmuVirtioNet, ModelConfig, VirtioNetModelConfig};
use ringfab_hal::MacAddr;

/// Builds an emulated NIC of kind `K` with MAC `mac`.
pub(crate) type Make<K> = fn(MacAddr) -> EmuNic<K>;

pub(crate) fn igb(mac: MacAddr) -> EmuIgb {
    let mut c = ModelConfig::default();
    c.mac = mac;
    EmuIgb::new(c)
}

pub(crate) fn e1000e(mac: MacAddr) -> EmuE1000e {
    let mut c = ModelConfig::default();
    c.mac = mac;
    EmuE1000e::new(c)
}

pub(crate) fn virtio_net(mac: MacAddr) -> EmuVirtioNet {
    let mut c = VirtioNetModelConfig::default();
    c.mac = mac;
    EmuVirtioNet::new(c)
}
