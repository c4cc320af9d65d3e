//! PCI configuration space by port I/O: configuration mechanism #1 (PCI Local Bus
//! Specification 3.0, §3.2.2.3.2): a 32-bit address written to 0xCF8 — enable bit 31, bus in
//! bits 23:16, device 15:11, function 10:8, register 7:2 — selects the dword that 0xCFC reads
//! and writes. It reaches the first 256 bytes of each function, which is all a driver of the
//! 82576 needs (header, BARs, command register); PCIe's extended space would take ECAM.

use crate::port::{in32, out32};

const CONFIG_ADDRESS: u16 = 0xcf8;
const CONFIG_DATA: u16 = 0xcfc;

/// Offsets in the type 0 header (PCI 3.0 §6.1).
const VENDOR_DEVICE: u16 = 0x00;
const COMMAND: u16 = 0x04;
const HEADER_TYPE: u16 = 0x0c;
const BAR0: u16 = 0x10;
/// The six BARs occupy 0x10..0x28.
const BARS: core::ops::Range<u16> = 0x10..0x28;
/// Command register: memory space decode (bit 1).
const COMMAND_MEMORY: u32 = 1 << 1;

/// One PCI function, by bus, device and function number.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Function {
    pub(crate) bus: u8,
    pub(crate) device: u8,
    pub(crate) function: u8,
}

/// A memory BAR: its physical address and size.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct MemoryBar {
    pub(crate) base: u64,
    pub(crate) len: u64,
}

impl Function {
    fn address(self, offset: u16) -> u32 {
        1 << 31
            | u32::from(self.bus) << 16
            | u32::from(self.device & 0x1f) << 11
            | u32::from(self.function & 0x7) << 8
            | u32::from(offset & 0xfc)
    }

    /// Reads the dword at `offset` (below 256, 4-aligned; anything else reads all ones, as a
    /// master abort would).
    pub(crate) fn read32(self, offset: u16) -> u32 {
        if offset >= 256 || offset % 4 != 0 {
            return u32::MAX;
        }
        out32(CONFIG_ADDRESS, self.address(offset));
        in32(CONFIG_DATA)
    }

    /// Writes the dword at `offset` (below 256, 4-aligned; anything else is dropped).
    pub(crate) fn write32(self, offset: u16, value: u32) {
        if offset >= 256 || offset % 4 != 0 {
            return;
        }
        out32(CONFIG_ADDRESS, self.address(offset));
        out32(CONFIG_DATA, value);
    }

    /// `(vendor, device)`, or `None` where no function answers (vendor 0xFFFF).
    pub(crate) fn id(self) -> Option<(u16, u16)> {
        let id = self.read32(VENDOR_DEVICE);
        let vendor = id as u16;
        (vendor != 0xffff).then_some((vendor, (id >> 16) as u16))
    }

    /// Whether `offset` is one of the BAR registers, which the platform keeps to itself once
    /// it has mapped BAR 0.
    pub(crate) fn is_bar(offset: u16) -> bool {
        BARS.contains(&offset)
    }

    /// BAR 0 as a memory BAR below 4 GiB (what the boot code maps), sized the standard way
    /// (PCI 3.0 §6.2.5.1: write all ones, read back the writable bits, restore) with memory
    /// decoding off meanwhile, so the device never answers at the all-ones address. `None`
    /// for an I/O BAR, an unassigned one, or one at or above 4 GiB.
    pub(crate) fn memory_bar0(self) -> Option<MemoryBar> {
        let command = self.read32(COMMAND);
        self.write32(COMMAND, command & !COMMAND_MEMORY & 0xffff);
        let low = self.read32(BAR0);
        let is_64 = low & 0b110 == 0b100;
        let high = if is_64 { self.read32(BAR0 + 4) } else { 0 };
        self.write32(BAR0, u32::MAX);
        let mask = self.read32(BAR0) & !0xf;
        self.write32(BAR0, low);
        self.write32(COMMAND, command & 0xffff);
        let base = u64::from(high) << 32 | u64::from(low & !0xf);
        let len = u64::from((!mask).wrapping_add(1));
        let io = low & 1 != 0;
        let usable = !io && mask != 0 && base != 0 && base.checked_add(len)? <= 1 << 32;
        usable.then_some(MemoryBar { base, len })
    }
}

/// Every function on buses 0..=255 whose id `matches`, in bus/device/function order, up to
/// `out.len()`; returns how many were found.
pub(crate) fn find(matches: impl Fn(u16, u16) -> bool, out: &mut [Function]) -> usize {
    let mut found = 0;
    for bus in 0..=255u8 {
        for device in 0..32u8 {
            for function in 0..8u8 {
                let f = Function {
                    bus,
                    device,
                    function,
                };
                let Some((vendor, id)) = f.id() else {
                    if function == 0 {
                        break; // no device in this slot
                    }
                    continue;
                };
                if matches(vendor, id) && found < out.len() {
                    out[found] = f;
                    found += 1;
                }
                // Bit 7 of the header type: a multi-function device; otherwise only function 0.
                if function == 0 && f.read32(HEADER_TYPE) >> 16 & 0x80 == 0 {
                    break;
                }
            }
        }
    }
    found
}
