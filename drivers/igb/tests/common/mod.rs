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
    const RX_CRC_ERROR: Option<u32> = Some(ringfab_emu::igb::regs::RXD_ERR_RXE);
    /// Bit 20 of the status dword: undefined in every 82576 write-back.
    const RX_GARBAGE_STATUS: u32 = 1 << 20;
    /// Bit 8 of the STA dword is POPTS.IXSM, which the driver never sets.
    const TX_GARBAGE_STATUS: u32 = 1 << 8;
    /// The driver sets EITR to 0: no throttling.
    const INTERRUPT_THROTTLE: Duration = Duration::ZERO;
    /// An MSI-X message needs a completion while armed (EIMS); nothing interrupts disarmed.
    const FIRST_COMPLETION_INTERRUPTS: bool = false;
    /// The emulated PHY links at 1000 Mb/s full duplex (STATUS.SPEED, STATUS.FD).
    const LINK_SPEED: Option<(u32, bool)> = Some((1000, true));
    /// The model's autonegotiation takes 500 ms after the cable comes back.
    const LINK_UP_DELAY: Duration = Duration::from_millis(500);
    /// The 82576 writes back only descriptors with RS set (one per `Always` frame).
    const TX_STATUS_OF_EVERY_FRAME: bool = false;
    /// The receive write-back carries the RSS hash and its type.
    const RSS_HASH_REPORTED: bool = true;
    /// An IOMMU fault stalls only the queue whose descriptor faulted; its flush recovers it.
    const DMA_FAULT_NEEDS_DEVICE_RESET: bool = false;
}
