//! Completion queues (`fi_cq`): the pieces that do not depend on how queues are owned.
//!
//! A ringfab CQ is a *hard* CQ (DESIGN.md decision 1): it keeps no ring of its own but converts
//! completions straight from the descriptor rings of the queues bound to it into the caller's
//! format. The modules here are the leaves that conversion is built on:
//!
//! * [`entry`]: the entry types, laid out as libfabric's on x86_64 so a C caller's buffer can be
//!   written directly, and the [`Format`] types (`Context`, `Msg`, `Data`,
//!   `Tagged`) a queue is generic over.
//! * [`attr`]: `fi_cq_attr` and [`CqAttr::validate`], every rule
//!   `fi_cq_open` applies to its arguments.
//! * [`errdata`]: the two ways `fi_cq_readerr` returns error data (into the caller's buffer, or
//!   a CQ-owned buffer valid until the next read).
//! * [`strerror`]: ringfab's `prov_errno`/`err_data` encoding and `fi_cq_strerror`.
//!
//! * [`queue`]: the queue itself, [`CompletionQueue`]: `read`, `readerr`, `strerror`, binding,
//!   credits, overrun and close. Under it, private to this module: `read.rs`, the read loop
//!   every read shares; `aux.rs`, the aux queue; `slot.rs`, a CQ's slot in the domain's table
//!   (its state, credits, bindings, overrun).
//! * [`wait`]: blocking — `sread`, `signal`, `control(GetWait)`, wait objects, one MSI-X
//!   vector per CQ, and [`WaitSet`].

pub mod attr;
pub(crate) mod aux;
pub mod entry;
pub mod errdata;
pub mod queue;
mod read;
pub(crate) mod slot;
pub mod strerror;
pub mod wait;

pub use attr::{CqAttr, CqLimits, ResolvedCqAttr, WaitCond, WaitSetId};
pub use entry::{
    BufAddr, ContextEntry, CqFormat, DataEntry, ErrEntry, ErrEntryAbi, Format, MsgEntry, OpContext,
    TaggedEntry,
};
pub use queue::CompletionQueue;
pub use wait::{CqControl, WaitSet};
