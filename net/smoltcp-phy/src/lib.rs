//! smoltcp's [`phy::Device`](smoltcp::phy::Device) on a ringfab NIC's rings: a TCP/IP stack
//! for a program that drives its NIC with ringfab, with no kernel in the path.
//!
//! ringfab's endpoints offer datagrams (ringfab's own frames, or plain IPv4/UDP); a program
//! that must speak TCP — serve HTTP, reach a TCP service — runs smoltcp's [`Interface`] and
//! sockets on a [`RingDevice`] instead: one receive and one transmit queue of any [`Nic`],
//! with buffers in DMA memory the NIC allocated. Frames are read and written **in place**:
//! smoltcp parses a received frame in the buffer the NIC wrote it to, and writes a frame to
//! send straight into the buffer the NIC reads it from. Nothing is copied between the wire and
//! smoltcp's socket buffers.
//!
//! ```
//! use ringfab_emu::{EmuIgb, IgbModelConfig, Wire};
//! use ringfab_nics::AnyNic;
//! use ringfab_smoltcp::{Config, RingDevice};
//! use smoltcp::phy::Device;
//!
//! let wire = Wire::new();
//! let dev = EmuIgb::new(IgbModelConfig::default());
//! dev.connect(&wire);
//! let nic = AnyNic::open(dev.platform()).unwrap();
//! let device = RingDevice::<_, 64>::open(&nic, &Config::default()).unwrap();
//! assert_eq!(device.capabilities().max_transmission_unit, 1514);
//! ```
//!
//! [`echo`] is a TCP echo server and a checking client on smoltcp's sockets, each a
//! state machine polled by its caller ([`echo::serve`] runs a server on a NIC until told to
//! stop): the example `tcp-echo` and this crate's tests run one against the other on two
//! emulated NICs; a guest program can run the server on its NIC.
//!
//! The crate is `#![no_std]` and needs no allocator. Its one `unsafe` act — the in-place view
//! of a buffer — is in `slots.rs`, with the rule that makes it sound; the two token `consume`s
//! that use it are the only other places allowed `unsafe`.
//!
//! smoltcp checks every checksum itself. A frame the NIC hands over with a partial TCP/UDP
//! checksum (virtio-net's `NEEDS_CSUM`, from a sender on the same host:
//! [`RxChecksum::l4_partial`](ringfab_hal::RxChecksum::l4_partial)) has it completed in its
//! buffer first, so that smoltcp takes it ([`Counters::rx_checksums_completed`]).
//!
//! [`Interface`]: smoltcp::iface::Interface
//! [`Nic`]: ringfab_hal::Nic
#![no_std]
#![deny(unsafe_code)]

mod device;
pub mod echo;
mod error;
mod partial;
mod slots;

/// The smoltcp this crate implements the device trait of: its interface, sockets and wire
/// formats, at the version and features the device was built with.
pub use smoltcp;

pub use device::{Config, Counters, RingDevice, RxToken, TxToken, MIN_FRAME_LEN};
pub use error::{Error, Result};
