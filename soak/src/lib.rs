//! Issue 14's soak: millions of operations through core's public API on every emulated NIC
//! (two 82576 under igb, two 82574 under e1000e, two virtio-net devices) on the deterministic
//! emulated wire, under random faults — on the wire (frames dropped, corrupted with a good or
//! a bad FCS, duplicated, reordered), in the devices' DMA engines (write-backs withheld or
//! delayed, lengths beyond the buffer, garbage status, cut frames, out-of-order and lying
//! used entries, index jumps, stops and starts refused), critical (reset, a queue disabled,
//! `DEVICE_NEEDS_RESET`, surprise removal) and in the IOMMU (a registered region's mapping
//! removed) — with exactly-once accounting of every operation.
//!
//! What it proves, and how (see `docs/reliability.md`, "Soak"):
//!
//! * every operation posted leaves the [`ledger`] exactly once: by its completion (success or
//!   error, `FI_ECANCELED` included), or by a discard the man pages allow — its path's failure
//!   (one `FI_EIO` entry with the endpoint's context for all of them), its endpoint's close or
//!   re-enable; a completion of anything else is a violation, and so is an operation still
//!   outstanding after a cancel of everything on a healthy endpoint;
//! * every buffer comes back: with its completion, with a refused post, or to its region at a
//!   discard; the region's count agrees with the ledger, and every region closes with all its
//!   buffers back;
//! * a buffer core handed back is not written by a device afterwards (a canary in each buffer
//!   the application holds);
//! * no panic and no hang: the loop is single-threaded and bounded.
//!
//! Everything follows from the seed: a violation names the seed, the NIC and the operation
//! index, and the same command reproduces it.

pub mod args;
pub mod faults;
pub mod ledger;
pub mod run;
pub mod station;
pub mod tally;

pub use faults::Model;
pub use run::{soak, Plan, Violation, PROGRESS};
pub use tally::Tally;
