//! What a received Ethernet frame is for this host ([`classify`]): an ARP packet, an ICMP echo
//! request, a UDP datagram — or the reason it is dropped ([`Discard`]).
//!
//! The checks, in order (`docs/ip.md`, "The receive path"):
//!
//! 1. Ethernet (IEEE 802.3): at least 14 bytes; a unicast source; a destination that is the
//!    station's address or broadcast (no multicast group is joined); EtherType IPv4 or ARP.
//! 2. ARP (RFC 826): Ethernet/IPv4 hardware and protocol types and lengths, request or reply.
//! 3. IPv4 (RFC 791): version 4, header length of 20 to 60 bytes within the total length, the
//!    total length within the frame (Ethernet padding after it is ignored), the header
//!    checksum; then no fragment (ringfab reassembles nothing), options well formed if there
//!    are any (RFC 791 §3.1's option list; none is acted on — RFC 1122 §3.2.1.8: a host must
//!    "silently ignore" the options it does not understand), a destination this host accepts
//!    and a source a host may have (RFC 1122 §3.2.1.3), UDP or ICMP.
//! 4. ICMP (RFC 792): the checksum; an echo request (type 8, code 0) to the host's own address
//!    (RFC 1122 §3.2.2.6 lets a host ignore one sent to a broadcast address).
//! 5. UDP (RFC 768): a length of at least 8 equal to the IPv4 payload's, a destination port
//!    other than 0, the checksum unless it is 0 (none, which IPv4 allows).
//!
//! Checksums are checked in software unless the NIC checked them ([`Verify`]). Which port is
//! bound is not known here: the receive path decides that.

use core::net::Ipv4Addr;

use smoltcp::wire::{
    ArpHardware, ArpOperation, ArpPacket, EthernetFrame, EthernetProtocol, Icmpv4Message,
    Icmpv4Packet, IpAddress, IpProtocol, Ipv4Packet, UdpPacket,
};

use super::addr::{is_host, Ipv4Config, SockAddrIn};
use super::checksum::Sum;
use super::{ETH_LEN, IPV4_LEN};
use crate::hal::MacAddr;

/// Why a frame is not for this host, or not one it can take: each is counted where frames are
/// dropped (`docs/ip.md`).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Discard {
    /// Shorter than an Ethernet header.
    Short,
    /// A group (multicast or broadcast) Ethernet source address, which no station has.
    EthSource,
    /// Unicast to another station's address.
    EthOther,
    /// To an Ethernet multicast group (this host joins none).
    EthMulticast,
    /// Neither IPv4 nor ARP.
    EtherType,
    /// ARP that is not Ethernet/IPv4, truncated, or neither a request nor a reply.
    Arp,
    /// An IPv4 header that is truncated, not version 4, shorter than 20 bytes, or whose total
    /// length disagrees with its header length or the frame.
    Ipv4Header,
    /// The IPv4 header checksum is wrong.
    Ipv4Checksum,
    /// A fragment (more-fragments set, or a fragment offset): nothing is reassembled.
    Fragment,
    /// IPv4 options that are malformed (RFC 791 §3.1): an option whose length octet is under 2
    /// or runs past the header. Well-formed options are accepted and ignored.
    Ipv4Options,
    /// To an IPv4 address this host does not accept (another host's, a multicast group).
    Ipv4Destination,
    /// From an address no host may have (0.0.0.0, broadcast, loopback, multicast, class E).
    Ipv4Source,
    /// An IPv4 protocol other than UDP and ICMP.
    Protocol,
    /// ICMP shorter than its 8-byte header, or with a wrong checksum.
    IcmpHeader,
    /// An ICMP message other than an echo request (nothing here keeps state it could update).
    Icmp,
    /// An echo request to a broadcast address (RFC 1122 §3.2.2.6 allows silence).
    IcmpBroadcast,
    /// UDP shorter than its header, a length field disagreeing with the IPv4 payload, or
    /// destination port 0.
    UdpHeader,
    /// The UDP checksum is wrong.
    UdpChecksum,
}

impl Discard {
    /// Every reason, in the order of [`index`](Self::index): for a table of counts.
    pub const ALL: [Discard; 18] = [
        Discard::Short,
        Discard::EthSource,
        Discard::EthOther,
        Discard::EthMulticast,
        Discard::EtherType,
        Discard::Arp,
        Discard::Ipv4Header,
        Discard::Ipv4Checksum,
        Discard::Fragment,
        Discard::Ipv4Options,
        Discard::Ipv4Destination,
        Discard::Ipv4Source,
        Discard::Protocol,
        Discard::IcmpHeader,
        Discard::Icmp,
        Discard::IcmpBroadcast,
        Discard::UdpHeader,
        Discard::UdpChecksum,
    ];

    /// The reason's place in [`ALL`](Self::ALL).
    pub const fn index(self) -> usize {
        self as usize
    }
}

/// Which checksums to check in software: those the NIC did not check (`Offloads`, reported
/// per frame).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Verify {
    /// The IPv4 header checksum.
    pub ipv4: bool,
    /// The UDP and ICMP checksums.
    pub l4: bool,
}

impl Verify {
    /// Check everything in software.
    pub const ALL: Verify = Verify {
        ipv4: true,
        l4: true,
    };
}

/// What this host is, as a frame is classified.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Local {
    /// The station address.
    pub mac: MacAddr,
    /// The domain's IPv4 configuration.
    pub ip: Ipv4Config,
}

/// ARP's two operations (RFC 826: `ares_op$REQUEST`, `ares_op$REPLY`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ArpOp {
    /// Who has the target address?
    Request,
    /// The sender has the sender address.
    Reply,
}

/// An Ethernet/IPv4 ARP packet (RFC 826).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Arp {
    /// Request or reply.
    pub op: ArpOp,
    /// The sender's hardware address.
    pub sender_mac: MacAddr,
    /// The sender's protocol address.
    pub sender_ip: Ipv4Addr,
    /// The target's hardware address (meaningless in a request).
    pub target_mac: MacAddr,
    /// The target's protocol address.
    pub target_ip: Ipv4Addr,
}

/// An ICMP echo request to this host (RFC 792), with what its reply needs.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Echo<'a> {
    /// The requester's Ethernet address (where the reply goes).
    pub src_mac: MacAddr,
    /// The requester's IPv4 address.
    pub src: Ipv4Addr,
    /// The identifier, echoed.
    pub ident: u16,
    /// The sequence number, echoed.
    pub seq: u16,
    /// The data, echoed whole (RFC 1122 §3.2.2.6).
    pub data: &'a [u8],
}

/// A UDP datagram to this host.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Datagram<'a> {
    /// The sender's Ethernet address.
    pub src_mac: MacAddr,
    /// The sender's IPv4 address and port (`FI_SOURCE`).
    pub src: SockAddrIn,
    /// The destination address and port.
    pub dst: SockAddrIn,
    /// Sent to a broadcast address (`FI_MULTICAST` on its completion).
    pub broadcast: bool,
    /// The payload: the UDP data, Ethernet padding excluded. It starts at
    /// [`UDP_HEADER_LEN`](super::UDP_HEADER_LEN) in the frame, plus the length of the IPv4
    /// options if there are any.
    pub payload: &'a [u8],
}

/// A frame this host takes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Frame<'a> {
    /// For the ARP state machine.
    Arp(Arp),
    /// To be answered with an echo reply.
    EchoRequest(Echo<'a>),
    /// For the endpoint bound to its destination port.
    Udp(Datagram<'a>),
}

fn mac(b: &[u8]) -> MacAddr {
    let mut m = [0; 6];
    if let Some(src) = b.get(..6) {
        m.copy_from_slice(src);
    }
    MacAddr(m)
}

fn ipv4(b: &[u8]) -> Ipv4Addr {
    match b {
        [a, b, c, d, ..] => Ipv4Addr::new(*a, *b, *c, *d),
        _ => Ipv4Addr::UNSPECIFIED,
    }
}

/// Classifies `frame`, a received Ethernet frame without its FCS, for the host `local`,
/// checking in software the checksums `verify` names.
///
/// # Errors
/// The first reason, in the order of the module documentation, the frame is not for this host
/// or not one it takes.
pub fn classify<'a>(frame: &'a [u8], local: &Local, verify: Verify) -> Result<Frame<'a>, Discard> {
    let eth = EthernetFrame::new_checked(frame).map_err(|_| Discard::Short)?;
    let dst = MacAddr(eth.dst_addr().0);
    let src_mac = MacAddr(eth.src_addr().0);
    if src_mac.is_multicast() {
        return Err(Discard::EthSource);
    }
    if dst.is_multicast() {
        if !dst.is_broadcast() {
            return Err(Discard::EthMulticast);
        }
    } else if dst != local.mac {
        return Err(Discard::EthOther);
    }
    let payload = frame.get(ETH_LEN..).unwrap_or(&[]);
    match eth.ethertype() {
        EthernetProtocol::Arp => arp(payload).map(Frame::Arp),
        EthernetProtocol::Ipv4 => ip(payload, src_mac, local, verify),
        _ => Err(Discard::EtherType),
    }
}

/// RFC 826's packet, Ethernet/IPv4 only.
fn arp(bytes: &[u8]) -> Result<Arp, Discard> {
    let p = ArpPacket::new_checked(bytes).map_err(|_| Discard::Arp)?;
    if p.hardware_type() != ArpHardware::Ethernet
        || p.protocol_type() != EthernetProtocol::Ipv4
        || p.hardware_len() != 6
        || p.protocol_len() != 4
    {
        return Err(Discard::Arp);
    }
    let op = match p.operation() {
        ArpOperation::Request => ArpOp::Request,
        ArpOperation::Reply => ArpOp::Reply,
        _ => return Err(Discard::Arp),
    };
    Ok(Arp {
        op,
        sender_mac: mac(p.source_hardware_addr()),
        sender_ip: ipv4(p.source_protocol_addr()),
        target_mac: mac(p.target_hardware_addr()),
        target_ip: ipv4(p.target_protocol_addr()),
    })
}

/// RFC 791's header, then ICMP or UDP.
fn ip<'a>(
    bytes: &'a [u8],
    src_mac: MacAddr,
    local: &Local,
    verify: Verify,
) -> Result<Frame<'a>, Discard> {
    // smoltcp's length check: 20 bytes at least, the header length and the total length inside
    // the buffer, the header inside the total. It does not refuse a header length under 20,
    // which would put the payload inside the fixed header.
    let p = Ipv4Packet::new_checked(bytes).map_err(|_| Discard::Ipv4Header)?;
    let header_len = usize::from(p.header_len());
    if p.version() != 4 || header_len < IPV4_LEN {
        return Err(Discard::Ipv4Header);
    }
    if verify.ipv4 && !p.verify_checksum() {
        return Err(Discard::Ipv4Checksum);
    }
    if p.more_frags() || p.frag_offset() != 0 {
        return Err(Discard::Fragment);
    }
    if !options_well_formed(bytes.get(IPV4_LEN..header_len).unwrap_or(&[])) {
        return Err(Discard::Ipv4Options);
    }
    let (src, dst) = (p.src_addr(), p.dst_addr());
    if !local.ip.accepts(dst) {
        return Err(Discard::Ipv4Destination);
    }
    // RFC 1122 §3.2.1.3: a host discards a datagram whose source is not one a host may
    // have — among them a broadcast address, the subnet's directed broadcast included.
    if !is_host(src) || local.ip.is_broadcast(src) {
        return Err(Discard::Ipv4Source);
    }
    let broadcast = local.ip.is_broadcast(dst);
    let payload = p.payload();
    match p.next_header() {
        IpProtocol::Icmp => icmp(payload, src_mac, src, broadcast, verify),
        IpProtocol::Udp => udp(payload, src_mac, src, dst, broadcast, verify),
        _ => Err(Discard::Protocol),
    }
}

/// Whether `options` (the IPv4 header after its 20 fixed bytes) is a well-formed option list
/// (RFC 791 §3.1): each option is "a single octet of option-type" (End of Option List, 0, which
/// ends the list — what follows is padding; No Operation, 1) or "an option-type octet, an
/// option-length octet, and the actual option-data octets", whose length "counts the
/// option-type octet and the option-length octet as well as the option-data octets": at least
/// 2, and within the header. What an option means is not looked at: none changes how this
/// host takes a datagram.
fn options_well_formed(mut options: &[u8]) -> bool {
    while let Some((&kind, rest)) = options.split_first() {
        match kind {
            0 => return true,
            1 => options = rest,
            _ => {
                let len = rest.first().map_or(0, |&l| usize::from(l));
                match options.get(len..) {
                    Some(after) if len >= 2 => options = after,
                    _ => return false,
                }
            }
        }
    }
    true
}

/// RFC 792's echo request.
fn icmp(
    bytes: &[u8],
    src_mac: MacAddr,
    src: Ipv4Addr,
    broadcast: bool,
    verify: Verify,
) -> Result<Frame<'_>, Discard> {
    let p = Icmpv4Packet::new_checked(bytes).map_err(|_| Discard::IcmpHeader)?;
    if verify.l4 && !p.verify_checksum() {
        return Err(Discard::IcmpHeader);
    }
    if p.msg_type() != Icmpv4Message::EchoRequest || p.msg_code() != 0 {
        return Err(Discard::Icmp);
    }
    if broadcast {
        return Err(Discard::IcmpBroadcast);
    }
    Ok(Frame::EchoRequest(Echo {
        src_mac,
        src,
        ident: p.echo_ident(),
        seq: p.echo_seq_no(),
        data: p.data(),
    }))
}

/// RFC 768's datagram.
fn udp<'a>(
    bytes: &'a [u8],
    src_mac: MacAddr,
    src: Ipv4Addr,
    dst: Ipv4Addr,
    broadcast: bool,
    verify: Verify,
) -> Result<Frame<'a>, Discard> {
    // smoltcp's length check: 8 bytes at least, a length field of 8 or more inside the buffer.
    // The length must also be the whole IPv4 payload: a datagram that claims less than IPv4
    // carried is malformed, not one to trim.
    let p = UdpPacket::new_checked(bytes).map_err(|_| Discard::UdpHeader)?;
    if usize::from(p.len()) != bytes.len() || p.dst_port() == 0 {
        return Err(Discard::UdpHeader);
    }
    if verify.l4 && !p.verify_checksum(&IpAddress::Ipv4(src), &IpAddress::Ipv4(dst)) {
        return Err(Discard::UdpChecksum);
    }
    Ok(Frame::Udp(Datagram {
        src_mac,
        src: SockAddrIn::new(src, p.src_port()),
        dst: SockAddrIn::new(dst, p.dst_port()),
        broadcast,
        payload: p.payload(),
    }))
}

/// Whether a UDP datagram whose checksum field is `field` sums right, given the sum of its
/// pseudo-header, header and data as read in pieces (a receive path that reads a payload out
/// of registered memory in chunks rather than as one slice). A field of 0 is "no checksum"
/// (RFC 768).
pub fn udp_checksum_ok(field: u16, sum: &Sum) -> bool {
    field == 0 || sum.verifies()
}

#[cfg(test)]
mod tests;
