//! ringfab: libfabric's completion-queue and endpoint semantics on NIC descriptor rings.
//!
//! This crate is at its start: it holds the error model every later object returns and the
//! completion counters ([`cntr`], `fi_cntr`). Completion queues and endpoints come next (see the
//! project's issues); they are built on the [`ringfab_hal`] contract and never name a driver or a
//! platform.
#![no_std]

pub mod cntr;
pub mod cq;
pub mod error;
pub mod flags;

pub use cntr::{Clock, Counter, CounterAttr, CounterEvents, WaitObj};
pub use error::{Error, Result};
pub use ringfab_hal as hal;
