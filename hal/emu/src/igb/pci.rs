//! PCI configuration space of the emulated 82576, as QEMU's igb.c lays it out (reduced; the
//! shared rules are in the crate's `pci` module).

use crate::pci::PciLayout;

/// Intel's vendor id.
pub const VENDOR_INTEL: u16 = 0x8086;
/// 82576 copper, the id QEMU's igb presents (`E1000_DEV_ID_82576`).
pub const DEVICE_82576: u16 = 0x10c9;
/// Size of PCI Express configuration space.
pub const CONFIG_LEN: u16 = crate::pci::CONFIG_LEN;
/// Offset of the command (low half) and status (high half) registers.
pub const COMMAND: u16 = crate::pci::COMMAND;
/// Command: memory space enable.
pub const CMD_MEMORY: u16 = crate::pci::CMD_MEMORY;
/// Command: bus master enable. The device does no DMA while it is clear.
pub const CMD_BUS_MASTER: u16 = crate::pci::CMD_BUS_MASTER;
/// Offset of the MSI-X capability (QEMU igb.c `IGB_MSIX_IDX`... at 0x70).
pub const MSIX_CAP: u16 = 0x70;

/// The 82576's configuration space: BAR0 32-bit memory, BAR3 64-bit memory with the MSI-X table
/// at 0 and the PBA at 0x2000 (the addresses are only plausible values).
pub(crate) static LAYOUT: PciLayout = PciLayout {
    id: (DEVICE_82576 as u32) << 16 | VENDOR_INTEL as u32,
    class_rev: 0x0200_0001,
    subsystem: (VENDOR_INTEL as u32) << 16 | VENDOR_INTEL as u32,
    bars: &[(0x10, 0xfeb8_0000), (0x1c, 0xfebf_0004)],
    msix_cap: MSIX_CAP,
    msix_vectors: super::regs::MSIX_VECTORS,
    msix_table: 3,
    msix_pba: 0x2000 | 3,
};
