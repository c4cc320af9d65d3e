//! The contract between ringfab's core, its NIC drivers and the platforms they run on.
//!
//! Two sides, kept apart:
//!
//! * **Platform side** ([`platform`]): what a driver needs from the machine — register access by BAR
//!   offset ([`Mmio`]), DMA-coherent memory ([`DmaRegion`]), mapping caller memory for DMA
//!   ([`DmaMapping`], the basis of memory registration) and reaching it from the CPU ([`span`]:
//!   [`DmaSpan`]), PCI configuration space, and interrupt vectors that deliver to a [`Wait`]
//!   handle. VFIO implements it on Linux, `ringfab-emu` in tests.
//! * **Device side** ([`nic`] for the control path, [`queue`] for the data path): what core needs from
//!   a NIC driver — capabilities, reset, link, queues, RSS, statistics; then batch push of frames and
//!   buffers with a [`Token`] each, one doorbell per batch, and poll of completed tokens.
//!
//! What the layer guarantees, whatever the device does:
//!
//! * no reference (`&`/`&mut`) ever points into memory a device can write: registers and
//!   descriptors are reached through raw pointers with volatile access ([`DmaRegion`]'s accessors),
//!   mapped caller memory through bounds-checked copies that keep the pointer's provenance
//!   ([`DmaSpan`]);
//! * a full ring refuses at push time ([`PushError::Full`]), never later;
//! * every pushed token comes back exactly once from `poll` — completed, failed, or
//!   [flushed](queue::Queue::flush) — and a value the device wrote that makes no sense becomes an
//!   error status on a token, never a panic or an out-of-bounds access;
//! * a device that stops answering, resets itself or disables a queue is noticed without a
//!   register read per frame: a queue checks the device only after many empty polls with work
//!   pending, and then reports a [`QueueFault`] (see [`queue`], "Critical faults").
//!
//! The crate is `#![no_std]` and needs no allocator: queues carry their private shadow state in
//! arrays sized by a const generic, and all memory a device touches comes from the platform.
#![no_std]
#![deny(clippy::undocumented_unsafe_blocks)]

pub mod addr;
pub mod error;
pub mod nic;
pub mod platform;
pub mod queue;
pub mod span;
pub mod wait;

pub use addr::{Iova, MacAddr};
pub use error::{Error, OutOfSpan, PushError, QueueFault, Result};
pub use nic::{
    Capabilities, Link, Nic, Offloads, RssCaps, RssConfig, RssHashes, RssSaved, RxConfig, RxMode,
    Stats, TxConfig,
};
pub use platform::{
    DmaBlock, DmaMapping, DmaRegion, DmaRing, DmaRingRef, FixedLen, Mmio, Platform,
};
pub use queue::{
    Queue, Report, RssHashKind, RssInfo, RxBuffer, RxChecksum, RxCompletion, RxError, RxQueue,
    Token, TxChecksum, TxCompletion, TxError, TxQueue, TxSegment,
};
pub use span::{DmaHead, DmaSpan};
pub use wait::{RawWait, Wait, WaitOutcome, WaitSet};
