//! ringfab: libfabric's completion-queue and endpoint semantics on NIC descriptor rings.
//!
//! A [`domain::Domain`] is one NIC and the tables everything opened on it lives in
//! ([`storage`]). On it: completion queues ([`cq`], `fi_cq`) that read completions straight
//! from the rings, DGRAM endpoints ([`ep`], `fi_endpoint`), scalable endpoints and their
//! contexts ([`sep`]), shared transmit and receive contexts ([`stx`], [`srx`]), memory
//! registration ([`mr`]), address vectors ([`av`]) and counters ([`cntr`]); a [`Node`] is a
//! domain with one endpoint ready, and [`path`] the handle on one hardware queue (usable raw,
//! whole frames: [`path`]'s "The raw layer"). [`info`] is what an endpoint reports of itself.
//! Everything is built on the [`ringfab_hal`] contract and never names a driver or a platform.
//! `docs/semantics.md` maps every normative sentence of fi_cq(3) and fi_endpoint(3) to the
//! behaviour and the test.
//!
//! Core is built in three floors, and no module imports from a floor above its own
//! (`tests/floors.rs` checks it): **values** — [`entry`] (the CQ entry formats), [`flags`],
//! [`error`], [`proto`] (the frame format), [`ip`] (IPv4, UDP, ARP and ICMP as other hosts
//! speak them), [`errdata`], [`strerror`], and the addresses and
//! buffers the objects re-export ([`av::EpAddr`], [`mr::Buf`]); **the engine** (private:
//! the queues and their operations, which takes credits from CQs and counts for counters
//! through interfaces of its own, and names no object); **objects**, everything above.
//!
//! The smallest program: two NICs on one wire (here two emulated 82576 with the igb driver),
//! an endpoint on each ([`Node`]: a domain with one endpoint ready); B posts a receive, A
//! sends, B reads the completion. Eight calls.
//!
//! ```
//! use ringfab::entry::{Msg, MsgEntry, OpContext};
//! use ringfab::Node;
//! # use ringfab::hal::MacAddr;
//! # let wire = ringfab_emu::Wire::new();
//! # let dev = |last| {
//! #     let mut config = ringfab_emu::ModelConfig::default();
//! #     config.mac = MacAddr([0x52, 0x54, 0, 0, 0, last]);
//! #     let dev = ringfab_emu::EmuIgb::new(config);
//! #     dev.connect(&wire);
//! #     dev
//! # };
//! # let (dev_a, dev_b) = (dev(0xa), dev(0xb));
//! # let nic_a = ringfab_igb::Igb::new(dev_a.platform())?;
//! # let nic_b = ringfab_igb::Igb::new(dev_b.platform())?;
//! let a = Node::<_, Msg>::open(&nic_a)?; // domain, CQ, AV and endpoint, bound and enabled
//! let b = Node::<_, Msg>::open(&nic_b)?;
//! let peer = a.av.insert_one(&a.domain, &b.ep)?;
//!
//! let mr = b.domain.register(vec![0u8; 4096])?;
//! b.ep.recv(&b.domain, mr.alloc(&b.domain, 2048)?, OpContext(7)).map_err(|(e, _)| e)?;
//! a.ep.inject(&a.domain, b"hello", peer)?;
//! wire.run_until_idle(); // the emulated wire carries frames when asked; a real one needs no call
//! let mut done = [MsgEntry::default(); 1];
//! assert_eq!(b.cq.read(&b.domain, &mut done)?, 1);
//! assert_eq!((done[0].op_context, done[0].len), (OpContext(7), 5));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![no_std]
// One module may use `unsafe`: `raw`, where core trusts what a caller or the allocator promises
// (registered memory that stays put, a zero-copy view of a buffer, C's error entry). Everything
// else reaches memory through the hal's checked accessors.
#![deny(unsafe_code)]

#[cfg(feature = "alloc")]
extern crate alloc;

mod addr;
mod atomic;
pub mod av;
mod buf;
mod clock;
pub mod cntr;
pub mod cq;
pub mod domain;
mod engine;
pub mod entry;
pub mod ep;
pub mod errdata;
pub mod error;
pub mod flags;
pub mod info;
pub mod ip;
pub mod mr;
pub mod node;
pub mod path;
pub mod proto;
mod raw;
pub mod sep;
pub mod srx;
pub mod storage;
pub mod strerror;
pub mod stx;

pub use clock::Clock;
pub use cntr::{Counter, CounterAttr, CounterEvents, WaitObj};
pub use error::{Error, Result};
pub use node::Node;
pub use ringfab_hal as hal;
pub use storage::{Capacities, Capacity, Storage};
