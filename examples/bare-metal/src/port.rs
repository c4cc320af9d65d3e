//! x86 port I/O: the one way this image reaches the serial port, PCI configuration space, the
//! PIT and QEMU's exit device.
//!
//! The functions are safe because every port this crate names belongs to a device the image
//! owns alone (it is the only software on the machine) and touching it cannot break memory
//! safety: none of the ports used programs DMA or remaps memory.

use core::arch::asm;

/// Writes `value` to 8-bit port `port`.
pub(crate) fn out8(port: u16, value: u8) {
    // SAFETY: an I/O instruction touches no memory; see the module documentation for why the
    // ports used are the image's own.
    unsafe {
        asm!("out dx, al", in("dx") port, in("al") value, options(nomem, nostack, preserves_flags))
    }
}

/// Reads 8-bit port `port`.
pub(crate) fn in8(port: u16) -> u8 {
    let value: u8;
    // SAFETY: as in `out8`.
    unsafe {
        asm!("in al, dx", in("dx") port, out("al") value, options(nomem, nostack, preserves_flags))
    }
    value
}

/// Writes `value` to 32-bit port `port`.
pub(crate) fn out32(port: u16, value: u32) {
    // SAFETY: as in `out8`.
    unsafe {
        asm!("out dx, eax", in("dx") port, in("eax") value, options(nomem, nostack, preserves_flags))
    }
}

/// Reads 32-bit port `port`.
pub(crate) fn in32(port: u16) -> u32 {
    let value: u32;
    // SAFETY: as in `out8`.
    unsafe {
        asm!("in eax, dx", in("dx") port, out("eax") value, options(nomem, nostack, preserves_flags))
    }
    value
}
