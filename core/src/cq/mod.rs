//! Completion queues (`fi_cq`): the pieces that do not depend on how queues are owned.
//!
//! A ringfab CQ is a *hard* CQ (DESIGN.md decision 1): it keeps no ring of its own but converts
//! completions straight from the descriptor rings of the queues bound to it into the caller's
//! format. What it converts into are values, in modules of their own below every object
//! ([`crate::entry`]: the entry types and the [`Format`]s; [`crate::errdata`]: how `readerr`
//! returns error data; [`crate::strerror`]: `prov_errno`/`err_data` and `fi_cq_strerror`).
//! Here:
//!
//! * [`attr`]: `fi_cq_attr` and [`CqAttr::validate`], every rule
//!   `fi_cq_open` applies to its arguments.
//! * [`queue`]: the queue itself, [`CompletionQueue`]: `read`, `readerr`, `strerror`, binding,
//!   credits, overrun and close. Under it, private to this module: `read.rs`, the read loop
//!   every read shares; `aux.rs`, the aux queue; `slot.rs`, a CQ's slot in the domain's table
//!   (its state, credits, bindings, overrun).
//! * [`wait`]: blocking — `sread`, `signal`, `control(GetWait)`, wait objects, one MSI-X
//!   vector per CQ, and [`WaitSet`].

pub mod attr;
pub(crate) mod aux;
pub mod queue;
mod read;
pub(crate) mod slot;
pub mod wait;

pub use crate::entry::{
    BufAddr, ContextEntry, CqFormat, DataEntry, ErrEntry, ErrEntryAbi, Format, MsgEntry, OpContext,
    TaggedEntry,
};
pub use crate::raw::write_err_entry_raw;
pub use attr::{CqAttr, CqLimits, ResolvedCqAttr, WaitCond, WaitSetId};
pub use queue::CompletionQueue;
pub use wait::{CqControl, WaitSet};
