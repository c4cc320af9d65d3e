//! ringfab with no operating system: an x86_64 image that QEMU boots with `-kernel` and that
//! drives two of QEMU's 82576 (`igb`) NICs with ringfab's igb driver and core — a ping-pong of
//! messages between an endpoint on each, every byte checked — then ends QEMU with a status.
//!
//! * [`boot`]: the PVH entry note and the 32→64-bit trampoline (identity-mapped 4 GiB);
//! * [`platform`]: `ringfab_hal::Platform` for a PCI function here — BAR 0 at its physical
//!   address, DMA memory from a static arena at physical addresses, no interrupts;
//! * [`pci`], [`time`], [`serial`], [`exit`], [`port`]: configuration space by port I/O, the
//!   PIT for delays, COM1 for the console, `isa-debug-exit` for the status;
//! * [`pingpong`]: the program — find the NICs, open a ringfab endpoint on each, ping-pong.
//!
//! docs/bare-metal.md says how to build and boot it and what a port to another board takes.
#![no_std]
#![no_main]

mod boot;
mod exit;
mod pci;
mod pingpong;
mod platform;
mod port;
mod serial;
mod time;

use core::panic::PanicInfo;

use exit::{exit, Status};

/// What every console line of the image starts with (the runner looks for it).
const MARKER: &str = "ringfab-bare-metal: ";

/// Writes one console line: the marker, then `text`, without the newline (callers add more).
fn line(text: &str) {
    serial::str(MARKER);
    serial::str(text);
}

/// Rust's entry, called by the boot code in 64-bit mode with the PVH start-info address.
extern "C" fn start(start_info: u32) -> ! {
    serial::init();
    // The start-info block is in low memory, which the boot code identity-mapped; only its
    // first word is read, to tell the user the image came in through PVH.
    let info = core::ptr::with_exposed_provenance::<u32>(start_info as usize);
    let magic = if info.is_null() {
        0
    } else {
        // SAFETY: the PVH loader put `hvm_start_info` (at least its 4-byte magic) at
        // `start_info`, 4-aligned, in identity-mapped RAM that nothing else writes.
        unsafe { info.read_volatile() }
    };
    line("booted, PVH start info ");
    serial::str(if magic == boot::PVH_START_MAGIC {
        "found\n"
    } else {
        "missing\n"
    });
    match pingpong::run() {
        Ok(()) => {
            line("PASS\n");
            exit(Status::Success)
        }
        Err(failure) => {
            line("FAIL ");
            failure.print();
            serial::str("\n");
            exit(Status::Failure)
        }
    }
}

/// A panic — a driver or core bug, never device input (docs/bare-metal.md, "No panic from the
/// device") — prints its message and where it happened, and ends QEMU with the failure status.
#[panic_handler]
fn panic(info: &PanicInfo<'_>) -> ! {
    line("PANIC");
    // Only a message without arguments is printed: formatting one would bring in `core::fmt`.
    if let Some(message) = info.message().as_str() {
        serial::str(": ");
        serial::str(message);
    }
    if let Some(at) = info.location() {
        serial::str(" at ");
        serial::str(at.file());
        serial::str(":");
        serial::dec(u64::from(at.line()));
    }
    serial::str("\n");
    exit(Status::Failure)
}
