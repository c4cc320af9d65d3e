//! IPv4 and UDP as other hosts speak them (issue 16, `docs/ip.md`): the values a plain-UDP
//! endpoint is built on. Nothing here knows a queue or an object; everything is `no_std` and
//! allocates nothing.
//!
//! * [`addr`]: a peer's `sockaddr_in` ([`SockAddrIn`]) and the domain's IPv4 configuration
//!   ([`Ipv4Config`]) with its next-hop and acceptance rules (RFC 1122 §3.2.1.3, §3.3.1).
//! * [`checksum`]: the Internet checksum (RFC 1071) over pieces, for a header written in front
//!   of a payload that stays where it is.
//! * [`parse`]: what a received Ethernet frame is for this host — an ARP packet (RFC 826), an
//!   ICMP echo request (RFC 792), a UDP datagram (RFC 768 over RFC 791) — or why it is dropped
//!   ([`Discard`]). Every length is checked before it is used: a malformed frame is a reason,
//!   never a panic.
//! * [`emit`]: the 42-byte Ethernet/IPv4/UDP header of a send, ARP packets, echo replies and
//!   port-unreachable messages.
//! * [`arp`]: the ARP cache, resolver and responder as a state machine that is handed frames
//!   and the time and says what to send; it does no I/O.
//! * [`limit`]: the token bucket that limits ICMP error messages (RFC 1122 §3.2.2).
//!
//! The header formats themselves are smoltcp's `wire` module (its Packet/Repr views, whose
//! `check_len` guarantees that no accessor panics afterwards); what is here is what ringfab
//! needs around them — reasons for drops, the checks smoltcp leaves to its interface (a host's
//! addresses, an IPv4 header length of at least 20, broadcast sources), and checksums over
//! pieces.

pub mod addr;
pub mod arp;
pub mod checksum;
pub mod emit;
pub mod limit;
pub mod parse;

pub use addr::{Ipv4Config, NextHop, SockAddrIn};
pub use core::net::Ipv4Addr;
pub use parse::{classify, Discard, Frame, Verify};

/// Bytes of the Ethernet header (IEEE 802.3: destination, source, EtherType).
pub const ETH_LEN: usize = 14;
/// Bytes of an IPv4 header without options (RFC 791).
pub const IPV4_LEN: usize = 20;
/// Bytes of the UDP header (RFC 768).
pub const UDP_LEN: usize = 8;
/// Bytes before a plain-UDP payload: Ethernet, IPv4 without options, UDP.
pub const UDP_HEADER_LEN: usize = ETH_LEN + IPV4_LEN + UDP_LEN;
/// What IPv4 and UDP take of the MTU: a datagram's payload is at most MTU − 28.
pub const IP_UDP_OVERHEAD: usize = IPV4_LEN + UDP_LEN;
/// The shortest Ethernet frame without its FCS (IEEE 802.3 §3.2.8: 64 with it).
pub const ETH_MIN_FRAME: usize = 60;
/// The TTL ringfab sends with: the default RFC 1700 gives (and Linux uses).
pub const TTL: u8 = 64;

/// `max_msg_size` of a plain-UDP endpoint on a NIC whose largest frame (Ethernet header
/// included, FCS excluded: `Capabilities::max_frame_len`) is `max_frame`: MTU − 28.
pub const fn max_payload(max_frame: usize) -> usize {
    max_frame.saturating_sub(UDP_HEADER_LEN)
}

/// What a domain's plain-UDP endpoints dropped, by reason (`Domain::ip_drops`): frames their
/// receive queues took that reached no application, and control frames that could not go.
/// Every dropped frame also counts in its endpoint's `dropped_frames`.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct IpDrops {
    /// Frames [`classify`] refused, at [`Discard::index`].
    pub discards: [u64; Discard::ALL.len()],
    /// Datagrams to a UDP port no endpoint on the queue is bound to.
    pub port: u64,
    /// Frames longer than the receive path classifies ([`MAX_CLASSIFIED`]), or that did not
    /// fit their buffer: their checksum cannot be checked.
    pub too_long: u64,
    /// ARP and ICMP answers, and ARP requests, dropped because the control outbox was full, or
    /// lost on their way out (the device failed to send them, or a queue was flushed with
    /// them in it): control frames are never reported to the application.
    pub control: u64,
}

impl IpDrops {
    /// Frames dropped for `reason`.
    pub fn of(&self, reason: Discard) -> u64 {
        self.discards[reason.index()]
    }
}

/// The longest frame the receive path classifies: it is copied out of its buffer onto the
/// stack (its UDP checksum is summed over the copy). Jumbo frames are not offered on plain
/// UDP.
pub const MAX_CLASSIFIED: usize = 2048;

/// The longest control frame (ARP, an ICMP echo reply, an ICMP error): as long as the longest
/// frame the receive path classifies, so that an echo request of any length it takes gets its
/// whole data back (RFC 1122 §3.2.2.6: "The data received in the Echo Request MUST be entirely
/// included in the Echo Reply").
pub const CONTROL_LEN: usize = MAX_CLASSIFIED;
