//! A reduced PCI configuration space, as the models lay it out (QEMU's `igb.c` / `e1000e.c`).
//!
//! Only the command register is writable: Memory Space, I/O Space, Bus Master Enable and INTx
//! disable. BARs and the MSI-X capability belong to the platform (as VFIO keeps them), so writes
//! there are dropped, as `Platform::config_write32` allows.

/// Size of PCI Express configuration space.
pub(crate) const CONFIG_LEN: u16 = 4096;
/// Offset of the command (low half) and status (high half) registers.
pub(crate) const COMMAND: u16 = 0x04;
/// Command: memory space enable.
pub(crate) const CMD_MEMORY: u16 = 1 << 1;
/// Command: bus master enable. The device does no DMA while it is clear.
pub(crate) const CMD_BUS_MASTER: u16 = 1 << 2;
const CMD_WRITABLE: u16 = 0x0407;
const STATUS_CAP_LIST: u32 = 1 << 4;

/// What differs between the models' configuration spaces.
#[derive(Debug)]
pub(crate) struct PciLayout {
    /// Vendor id (low half) and device id (high half) at offset 0.
    pub(crate) id: u32,
    /// Class code (02 network, 00 Ethernet) and revision at 0x08.
    pub(crate) class_rev: u32,
    /// Subsystem vendor and id at 0x2c.
    pub(crate) subsystem: u32,
    /// `(offset, value)` of the BAR registers the model reports.
    pub(crate) bars: &'static [(u16, u32)],
    /// Offset of the MSI-X capability (the only one in the list).
    pub(crate) msix_cap: u16,
    /// MSI-X vectors.
    pub(crate) msix_vectors: u16,
    /// Table offset/BIR and PBA offset/BIR dwords of the capability.
    pub(crate) msix_table: u32,
    /// PBA offset/BIR.
    pub(crate) msix_pba: u32,
}

/// The configuration registers the model keeps.
#[derive(Clone, Debug)]
pub(crate) struct PciConfig {
    pub(crate) command: u16,
    layout: &'static PciLayout,
}

impl PciConfig {
    pub(crate) fn new(bus_master: bool, layout: &'static PciLayout) -> PciConfig {
        let bme = if bus_master { CMD_BUS_MASTER } else { 0 };
        PciConfig {
            command: CMD_MEMORY | bme,
            layout,
        }
    }

    pub(crate) fn bus_master(&self) -> bool {
        self.command & CMD_BUS_MASTER != 0
    }

    pub(crate) fn read32(&self, offset: u16) -> u32 {
        if offset % 4 != 0 || offset >= CONFIG_LEN {
            return 0xffff_ffff;
        }
        let l = self.layout;
        if let Some(&(_, bar)) = l.bars.iter().find(|(o, _)| *o == offset) {
            return bar;
        }
        match offset {
            0x00 => l.id,
            COMMAND => STATUS_CAP_LIST << 16 | u32::from(self.command),
            0x08 => l.class_rev,
            0x2c => l.subsystem,
            0x34 => u32::from(l.msix_cap),
            0x3c => 1 << 8,
            // MSI-X: id 0x11, last capability, table size N (encoded N-1), enabled by the
            // platform.
            o if o == l.msix_cap => 0x11 | (u32::from(l.msix_vectors - 1) | 1 << 15) << 16,
            o if o == l.msix_cap + 4 => l.msix_table,
            o if o == l.msix_cap + 8 => l.msix_pba,
            _ => 0,
        }
    }

    pub(crate) fn write32(&mut self, offset: u16, value: u32) {
        if offset == COMMAND {
            self.command = value as u16 & CMD_WRITABLE;
        }
    }
}
