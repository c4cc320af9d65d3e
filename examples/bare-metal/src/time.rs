//! Delays, measured with the 8254 PIT's channel 2 (1.193182 MHz), polled.
//!
//! Channel 2 is the one whose gate software controls (port 0x61 bit 0) and whose output it can
//! read (port 0x61 bit 5): programmed in mode 0 ("interrupt on terminal count", 8254 data
//! sheet), its output goes high when the count reaches zero. That needs no calibration and no
//! interrupt, and is what Linux uses to calibrate the TSC (`pit_calibrate_tsc`). One count is at
//! most 65535 ticks (≈ 55 ms); longer delays are a sequence of counts.

use core::time::Duration;

use crate::port::{in8, out8};

/// Input clock of the PIT, Hz.
const PIT_HZ: u64 = 1_193_182;
/// Channel 2's data port, the mode/command port, and the gate/output port (NMI status and
/// control, "port B").
const CHANNEL2: u16 = 0x42;
const COMMAND: u16 = 0x43;
const PORT_B: u16 = 0x61;
/// Port B: channel 2 gate (bit 0), speaker data (bit 1), channel 2 output (bit 5).
const GATE: u8 = 1 << 0;
const SPEAKER: u8 = 1 << 1;
const OUT2: u8 = 1 << 5;
/// Command: channel 2, low byte then high byte, mode 0, binary.
const CHANNEL2_MODE0: u8 = 0b1011_0000;

/// Busy-waits at least `d`.
pub(crate) fn delay(d: Duration) {
    let ticks = d.as_nanos().saturating_mul(u128::from(PIT_HZ)) / 1_000_000_000 + 1;
    let mut left = u64::try_from(ticks).unwrap_or(u64::MAX);
    while left > 0 {
        let count = left.min(0xffff) as u16;
        count_down(count);
        left -= u64::from(count);
    }
}

/// Counts `count` PIT ticks on channel 2 and waits for its output to rise.
fn count_down(count: u16) {
    // Gate low while programming, speaker off: the count starts when the gate rises.
    let b = in8(PORT_B) & !(GATE | SPEAKER);
    out8(PORT_B, b);
    out8(COMMAND, CHANNEL2_MODE0);
    out8(CHANNEL2, count as u8);
    out8(CHANNEL2, (count >> 8) as u8);
    out8(PORT_B, b | GATE);
    // Bounded, so that a machine without the PIT cannot hang the image here: 55 ms is far
    // fewer port reads than this on any machine that has one.
    for _ in 0..50_000_000u32 {
        if in8(PORT_B) & OUT2 != 0 {
            break;
        }
        core::hint::spin_loop();
    }
    out8(PORT_B, b);
}
