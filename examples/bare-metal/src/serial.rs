//! The console: COM1, a 16550 UART at I/O port 0x3F8, 115200 baud 8N1, written by polling.
//!
//! Numbers are printed by hand rather than with `core::fmt`: the formatting machinery would be
//! a few KiB of the image's size budget (docs/perf.md, "Image size") for a handful of lines.

use crate::port::{in8, out8};

/// COM1's base port.
const COM1: u16 = 0x3f8;
/// Line status register, and its "transmit holding register empty" bit (16550 data sheet).
const LSR: u16 = COM1 + 5;
const LSR_THRE: u8 = 1 << 5;

/// Programs COM1: interrupts off, divisor 1 (115200 baud), 8 data bits, no parity, one stop
/// bit, FIFOs on, DTR and RTS set.
pub(crate) fn init() {
    out8(COM1 + 1, 0x00); // IER: no interrupts
    out8(COM1 + 3, 0x80); // LCR: DLAB, to reach the divisor
    out8(COM1, 0x01); // DLL
    out8(COM1 + 1, 0x00); // DLM
    out8(COM1 + 3, 0x03); // LCR: 8N1, DLAB off
    out8(COM1 + 2, 0xc7); // FCR: FIFOs on and cleared, 14-byte threshold
    out8(COM1 + 4, 0x03); // MCR: DTR, RTS
}

fn byte(b: u8) {
    // Bounded: a UART that never drains (none on QEMU) must not hang the image.
    for _ in 0..100_000 {
        if in8(LSR) & LSR_THRE != 0 {
            break;
        }
    }
    out8(COM1, b);
}

/// Writes `s`, with `\r` before each `\n`.
pub(crate) fn str(s: &str) {
    for b in s.bytes() {
        if b == b'\n' {
            byte(b'\r');
        }
        byte(b);
    }
}

/// Writes `n` in decimal.
pub(crate) fn dec(n: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    let mut n = n;
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    digits[i..].iter().for_each(|&d| byte(d));
}

/// Writes the low `width` hexadecimal digits of `n`.
pub(crate) fn hex(n: u64, width: u32) {
    for shift in (0..width).rev() {
        let d = ((n >> (shift * 4)) & 0xf) as u8;
        byte(if d < 10 { b'0' + d } else { b'a' + d - 10 });
    }
}

/// Writes a MAC address as six colon-separated hexadecimal bytes.
pub(crate) fn mac(m: [u8; 6]) {
    for (i, b) in m.iter().enumerate() {
        if i > 0 {
            byte(b':');
        }
        for d in [b >> 4, b & 0xf] {
            byte(if d < 10 { b'0' + d } else { b'a' + d - 10 });
        }
    }
}
