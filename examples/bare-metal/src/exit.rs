//! Ending the run with a status QEMU reports: its `isa-debug-exit` device
//! (`-device isa-debug-exit,iobase=0xf4,iosize=0x04`) ends QEMU when the guest writes a value
//! `v` to its port, with exit status `(v << 1) | 1` (QEMU `hw/misc/debugexit.c`).
//!
//! So no value gives status 0, which is also what QEMU returns when a guest resets with
//! `-no-reboot` — a triple fault, say. The image therefore reports success as 0x10 (status
//! 33) and failure as 0x11 (status 35), statuses nothing else produces; the runner checks for
//! 33 (docs/bare-metal.md).

use crate::port::out32;

/// The port `isa-debug-exit` listens on.
const DEBUG_EXIT: u16 = 0xf4;

/// What the run came to.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u32)]
pub(crate) enum Status {
    /// Everything checked out: QEMU exits with 33.
    Success = 0x10,
    /// A check failed, or a panic: QEMU exits with 35.
    Failure = 0x11,
}

/// Ends QEMU with `status`; without the exit device (another machine), halts for ever.
pub(crate) fn exit(status: Status) -> ! {
    out32(DEBUG_EXIT, status as u32);
    loop {
        // SAFETY: `cli; hlt` stops this CPU with interrupts off; it touches no memory.
        unsafe { core::arch::asm!("cli", "hlt", options(nomem, nostack)) }
    }
}
