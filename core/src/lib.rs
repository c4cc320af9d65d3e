//! ringfab: libfabric's completion-queue and endpoint semantics on NIC descriptor rings.
//!
//! What exists: the error model every object returns, completion counters ([`cntr`],
//! `fi_cntr`), the hard completion queue — a [`domain::Domain`] over one NIC with one storage,
//! [`path`]s (one hardware queue and its op table each), and [`cq::CompletionQueue`] reading
//! completions straight from the bound rings — memory registration ([`mr`]), address vectors
//! ([`av`]) and DGRAM endpoints ([`ep`], with scalable endpoints and shared contexts) on
//! ringfab's frame format ([`proto`]). Below endpoints, a path can be used raw (whole frames,
//! [`path`]'s "The raw layer"). Everything is built on the [`ringfab_hal`] contract and never
//! names a driver or a platform.
#![no_std]

#[cfg(feature = "alloc")]
extern crate alloc;

pub mod av;
pub mod cntr;
pub mod cq;
pub mod domain;
pub mod ep;
pub mod error;
pub mod flags;
pub mod info;
pub mod mr;
pub mod path;
pub mod proto;
pub mod sep;
pub mod srx;
pub mod storage;
pub mod stx;

pub use cntr::{Clock, Counter, CounterAttr, CounterEvents, WaitObj};
pub use error::{Error, Result};
pub use ringfab_hal as hal;
pub use storage::{Capacity, Storage};
