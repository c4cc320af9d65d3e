//! PCI configuration space of the emulated 82574, as QEMU's e1000e.c lays it out (reduced; the
//! shared rules are in the crate's `pci` module).

use crate::pci::PciLayout;

/// Intel's vendor id.
pub const VENDOR_INTEL: u16 = 0x8086;
/// 82574L, the id QEMU's e1000e presents (`E1000_DEV_ID_82574L`).
pub const DEVICE_82574L: u16 = 0x10d3;
/// Offset of the MSI-X capability (QEMU e1000e.c `E1000E_MSIX_CAP_OFFSET`).
pub const MSIX_CAP: u16 = 0xa0;

/// The 82574's configuration space: BAR0 memory (registers), BAR1 memory (flash), BAR2 I/O,
/// BAR3 memory with the MSI-X table at 0 and the PBA at 0x2000 (QEMU e1000e.c
/// `E1000E_MSIX_TABLE` / `E1000E_MSIX_PBA`); the addresses are only plausible values.
pub(crate) static LAYOUT: PciLayout = PciLayout {
    id: (DEVICE_82574L as u32) << 16 | VENDOR_INTEL as u32,
    class_rev: 0x0200_0000,
    subsystem: 0,
    bars: &[
        (0x10, 0xfebc_0000),
        (0x14, 0xfeba_0000),
        (0x18, 0x0000_c001),
        (0x1c, 0xfebe_0000),
    ],
    msix_cap: MSIX_CAP,
    msix_vectors: super::regs::MSIX_VECTORS,
    msix_table: 3,
    msix_pba: 0x2000 | 3,
};
