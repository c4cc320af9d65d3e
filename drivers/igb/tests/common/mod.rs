//! The fixture the integration tests share: the 82576 as QEMU's `igb` presents it, under
//! `ringfab-igb`.

use std::time::Duration;

use ringfab_emu::{EmuIgb, EmuPlatform, Igb82576, ModelConfig};
use ringfab_igb::Igb;
use ringfab_nic_suite::Fixture;

/// The 82576 as QEMU's `igb` presents it, under `ringfab-igb`.
pub(crate) struct Igb82576Fixture;

impl Fixture for Igb82576Fixture {
    type Kind = Igb82576;
    type Nic = Igb<EmuPlatform>;

    fn device(config: ModelConfig) -> EmuIgb {
        EmuIgb::new(config)
    }

    fn driver(platform: EmuPlatform) -> ringfab_hal::Result<Igb<EmuPlatform>> {
        Igb::new(platform)
    }

    /// RXE (advanced write-back error bit 31): the 82576 reports a CRC error there.
    const RX_CRC_ERROR: u32 = ringfab_emu::igb::regs::RXD_ERR_RXE;
    /// Bit 20 of the status dword: undefined in every 82576 write-back.
    const RX_GARBAGE_STATUS: u32 = 1 << 20;
    /// Bit 8 of the STA dword is POPTS.IXSM, which the driver never sets.
    const TX_GARBAGE_STATUS: u32 = 1 << 8;
    /// The driver sets EITR to 0: no throttling.
    const INTERRUPT_THROTTLE: Duration = Duration::ZERO;
}
