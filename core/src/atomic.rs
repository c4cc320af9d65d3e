//! `AtomicU64` on every target core builds for.
//!
//! Core keeps three kinds of 64-bit value that threads read without a lock: an address-vector
//! entry (an 8-byte raw address, `crate::addr`), a counter's counts (`fi_cntr_read` returns 64
//! bits, `crate::cntr`) and a shared path's mask of the CQs that poll it (one bit for each of
//! 64 CQs, `crate::engine`). None of them may be narrowed without changing what it means, so on
//! a target without 64-bit atomics (32-bit Arm such as `thumbv7em-none-eabihf`) they are
//! `portable-atomic`'s `AtomicU64`, which takes a lock there; a target with them (x86_64,
//! aarch64) gets `core`'s own type, so its code is what it always was. Which lock the fallback
//! takes is the final binary's choice, not core's: docs/architecture.md, "Targets without
//! 64-bit atomics".

#[cfg(target_has_atomic = "64")]
pub(crate) use core::sync::atomic::AtomicU64;
#[cfg(not(target_has_atomic = "64"))]
pub(crate) use portable_atomic::AtomicU64;
