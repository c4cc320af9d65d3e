//! PCI configuration space of the emulated 82576, as QEMU's igb.c lays it out (reduced).
//!
//! Only the command register is writable: Memory Space, I/O Space, Bus Master Enable and INTx
//! disable. BARs and the MSI-X capability belong to the platform (as VFIO keeps them), so writes
//! there are dropped, as `Platform::config_write32` allows.

/// Intel's vendor id.
pub const VENDOR_INTEL: u16 = 0x8086;
/// 82576 copper, the id QEMU's igb presents (`E1000_DEV_ID_82576`).
pub const DEVICE_82576: u16 = 0x10c9;
/// Size of PCI Express configuration space.
pub const CONFIG_LEN: u16 = 4096;
/// Offset of the command (low half) and status (high half) registers.
pub const COMMAND: u16 = 0x04;
/// Command: memory space enable.
pub const CMD_MEMORY: u16 = 1 << 1;
/// Command: bus master enable. The device does no DMA while it is clear.
pub const CMD_BUS_MASTER: u16 = 1 << 2;
const CMD_WRITABLE: u16 = 0x0407;
const STATUS_CAP_LIST: u32 = 1 << 4;
/// Offset of the MSI-X capability (QEMU igb.c `IGB_MSIX_IDX`... at 0x70).
pub const MSIX_CAP: u16 = 0x70;

/// The configuration registers the model keeps.
#[derive(Clone, Debug)]
pub(crate) struct PciConfig {
    pub(crate) command: u16,
}

impl PciConfig {
    pub(crate) fn new(bus_master: bool) -> PciConfig {
        let bme = if bus_master { CMD_BUS_MASTER } else { 0 };
        PciConfig {
            command: CMD_MEMORY | bme,
        }
    }

    pub(crate) fn bus_master(&self) -> bool {
        self.command & CMD_BUS_MASTER != 0
    }

    pub(crate) fn read32(&self, offset: u16) -> u32 {
        if offset % 4 != 0 || offset >= CONFIG_LEN {
            return 0xffff_ffff;
        }
        match offset {
            0x00 => u32::from(DEVICE_82576) << 16 | u32::from(VENDOR_INTEL),
            COMMAND => STATUS_CAP_LIST << 16 | u32::from(self.command),
            // Class 02 (network) / 00 (Ethernet), revision 1.
            0x08 => 0x0200_0001,
            // BAR0: 32-bit non-prefetchable memory; the address is only a plausible value.
            0x10 => 0xfeb8_0000,
            // BAR3: 64-bit memory, MSI-X table and PBA.
            0x1c => 0xfebf_0004,
            0x2c => u32::from(VENDOR_INTEL) << 16 | u32::from(VENDOR_INTEL),
            0x34 => u32::from(MSIX_CAP),
            0x3c => 1 << 8,
            // MSI-X: id 0x11, last capability, table size 10 (encoded 9), enabled by the platform.
            MSIX_CAP => 0x11 | (u32::from(super::regs::MSIX_VECTORS - 1) | 1 << 15) << 16,
            // Table in BAR3 at 0, PBA in BAR3 at 0x2000.
            0x74 => 3,
            0x78 => 0x2000 | 3,
            _ => 0,
        }
    }

    pub(crate) fn write32(&mut self, offset: u16, value: u32) {
        if offset == COMMAND {
            self.command = value as u16 & CMD_WRITABLE;
        }
    }
}
