//! Frames this host sends: the 42-byte Ethernet/IPv4/UDP header written in front of a payload
//! ([`UdpHeader::emit`]), ARP packets ([`arp`]), ICMP echo replies ([`echo_reply`]) and
//! port-unreachable messages ([`port_unreachable`]).
//!
//! IPv4 headers are written as smoltcp's `Ipv4Repr` writes them (RFC 791): no options, DF set
//! (ringfab never fragments), identification 0 — allowed for an atomic datagram, RFC 6864
//! §4.1 — and a correct header checksum, always.

use core::net::Ipv4Addr;

use smoltcp::phy::ChecksumCapabilities;
use smoltcp::wire::{
    ArpOperation, ArpPacket, ArpRepr, EthernetAddress, EthernetFrame, EthernetProtocol,
    EthernetRepr, Icmpv4Message, Icmpv4Packet, Icmpv4Repr, IpProtocol, Ipv4Packet, Ipv4Repr,
    UdpPacket,
};

use super::addr::SockAddrIn;
use super::checksum::{self, Sum, IPPROTO_UDP};
use super::parse::{ArpOp, Echo};
use super::{ETH_LEN, ETH_MIN_FRAME, IPV4_LEN, TTL, UDP_HEADER_LEN, UDP_LEN};
use crate::hal::MacAddr;

/// A frame that does not fit where it was to be written, or a datagram longer than IPv4 can
/// say.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct TooLong;

/// What a sent datagram's UDP checksum field carries.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum UdpChecksum {
    /// 0: no checksum (RFC 768 allows it over IPv4).
    None,
    /// The checksum, from the one's-complement sum of the payload (a [`Sum`] over the
    /// payload's bytes, in whatever pieces they were read).
    Payload(Sum),
    /// The pseudo-header's sum, not complemented, for a NIC that computes the checksum over the
    /// rest (82576 `TXSM`, 82574 `TUCSO`, virtio `NEEDS_CSUM`: each expects this seed).
    Offload,
}

/// The header of a plain-UDP send.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct UdpHeader {
    /// Ethernet source: the station.
    pub src_mac: MacAddr,
    /// Ethernet destination: the next hop's, or broadcast.
    pub dst_mac: MacAddr,
    /// The sending endpoint's address and port.
    pub src: SockAddrIn,
    /// The peer's.
    pub dst: SockAddrIn,
}

fn eth(a: MacAddr) -> EthernetAddress {
    EthernetAddress(a.0)
}

impl UdpHeader {
    /// Writes the header of a datagram of `payload_len` bytes into `out`, with the UDP checksum
    /// `checksum` asks for.
    ///
    /// # Errors
    /// `TooLong` if IPv4's 16-bit total length cannot hold the datagram (the MTU refuses far
    /// shorter ones first).
    pub fn emit(
        &self,
        out: &mut [u8; UDP_HEADER_LEN],
        payload_len: usize,
        checksum: UdpChecksum,
    ) -> Result<(), TooLong> {
        let udp_len = u16::try_from(UDP_LEN + payload_len).map_err(|_| TooLong)?;
        u16::try_from(IPV4_LEN + UDP_LEN + payload_len).map_err(|_| TooLong)?;
        let (eth_out, rest) = out.split_at_mut(ETH_LEN);
        let (ip_out, udp_out) = rest.split_at_mut(IPV4_LEN);
        EthernetRepr {
            src_addr: eth(self.src_mac),
            dst_addr: eth(self.dst_mac),
            ethertype: EthernetProtocol::Ipv4,
        }
        .emit(&mut EthernetFrame::new_unchecked(eth_out));
        Ipv4Repr {
            src_addr: self.src.addr,
            dst_addr: self.dst.addr,
            next_header: IpProtocol::Udp,
            payload_len: usize::from(udp_len),
            hop_limit: TTL,
        }
        .emit(
            &mut Ipv4Packet::new_unchecked(ip_out),
            &ChecksumCapabilities::default(),
        );
        let mut udp = UdpPacket::new_unchecked(udp_out);
        udp.set_src_port(self.src.port);
        udp.set_dst_port(self.dst.port);
        udp.set_len(udp_len);
        let mut sum = Sum::new();
        sum.add_pseudo_header(self.src.addr, self.dst.addr, IPPROTO_UDP, udp_len);
        let field = match checksum {
            UdpChecksum::None => 0,
            UdpChecksum::Offload => sum.folded(),
            UdpChecksum::Payload(payload) => {
                sum.add_u16(self.src.port)
                    .add_u16(self.dst.port)
                    .add_u16(udp_len)
                    .add_u16(payload.folded());
                checksum::udp_field(sum.finish())
            }
        };
        udp.set_checksum(field);
        Ok(())
    }
}

/// Writes a whole plain-UDP frame — `header`, then `payload` — into `out`; returns its length.
///
/// # Errors
/// `TooLong` if `out` cannot hold it.
pub fn udp_frame(header: &UdpHeader, payload: &[u8], out: &mut [u8]) -> Result<usize, TooLong> {
    let len = UDP_HEADER_LEN + payload.len();
    let frame = out.get_mut(..len).ok_or(TooLong)?;
    let (head, body) = frame.split_at_mut(UDP_HEADER_LEN);
    body.copy_from_slice(payload);
    let head: &mut [u8; UDP_HEADER_LEN] = head.try_into().map_err(|_| TooLong)?;
    let mut sum = Sum::new();
    sum.add(payload);
    header.emit(head, payload.len(), UdpChecksum::Payload(sum))?;
    Ok(len)
}

/// An ARP packet to send (RFC 826).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct ArpFrame {
    /// Request or reply.
    pub op: ArpOp,
    /// The Ethernet destination: broadcast for a request, the requester for a reply.
    pub eth_dst: MacAddr,
    /// This host's hardware address.
    pub sender_mac: MacAddr,
    /// This host's protocol address.
    pub sender_ip: Ipv4Addr,
    /// The target's hardware address (zero in a request: RFC 826 leaves it unset; RFC 5227
    /// §2.1.1 zeroes it).
    pub target_mac: MacAddr,
    /// The target's protocol address.
    pub target_ip: Ipv4Addr,
}

/// Writes `a` as a minimum-length Ethernet frame (60 bytes: the 42 of ARP, zero padding that
/// IEEE 802.3 requires and a NIC without padding would not add).
pub fn arp(a: &ArpFrame, out: &mut [u8; ETH_MIN_FRAME]) {
    out.fill(0);
    let (eth_out, arp_out) = out.split_at_mut(ETH_LEN);
    EthernetRepr {
        src_addr: eth(a.sender_mac),
        dst_addr: eth(a.eth_dst),
        ethertype: EthernetProtocol::Arp,
    }
    .emit(&mut EthernetFrame::new_unchecked(eth_out));
    ArpRepr::EthernetIpv4 {
        operation: match a.op {
            ArpOp::Request => ArpOperation::Request,
            ArpOp::Reply => ArpOperation::Reply,
        },
        source_hardware_addr: eth(a.sender_mac),
        source_protocol_addr: a.sender_ip,
        target_hardware_addr: eth(a.target_mac),
        target_protocol_addr: a.target_ip,
    }
    .emit(&mut ArpPacket::new_unchecked(arp_out));
}

/// Writes the echo reply to `req` from `mac`/`ip` into `out` (RFC 792: type 0, the request's
/// identifier, sequence number and whole data, RFC 1122 §3.2.2.6); returns the frame's length
/// (padded to 60 bytes, as [`arp`]).
///
/// # Errors
/// `TooLong` if `out` cannot hold it.
pub fn echo_reply(
    req: &Echo<'_>,
    mac: MacAddr,
    ip: Ipv4Addr,
    out: &mut [u8],
) -> Result<usize, TooLong> {
    let icmp = Icmpv4Repr::EchoReply {
        ident: req.ident,
        seq_no: req.seq,
        data: req.data,
    };
    let icmp_len = icmp.buffer_len();
    let ip_len = IPV4_LEN + icmp_len;
    u16::try_from(ip_len).map_err(|_| TooLong)?;
    let len = (ETH_LEN + ip_len).max(ETH_MIN_FRAME);
    let frame = out.get_mut(..len).ok_or(TooLong)?;
    frame.fill(0);
    let (eth_out, rest) = frame.split_at_mut(ETH_LEN);
    let (ip_out, rest) = rest.split_at_mut(IPV4_LEN);
    let icmp_out = rest.get_mut(..icmp_len).ok_or(TooLong)?;
    EthernetRepr {
        src_addr: eth(mac),
        dst_addr: eth(req.src_mac),
        ethertype: EthernetProtocol::Ipv4,
    }
    .emit(&mut EthernetFrame::new_unchecked(eth_out));
    Ipv4Repr {
        src_addr: ip,
        dst_addr: req.src,
        next_header: IpProtocol::Icmp,
        payload_len: icmp_len,
        hop_limit: TTL,
    }
    .emit(
        &mut Ipv4Packet::new_unchecked(ip_out),
        &ChecksumCapabilities::default(),
    );
    icmp.emit(
        &mut Icmpv4Packet::new_unchecked(icmp_out),
        &ChecksumCapabilities::default(),
    );
    Ok(len)
}

/// The code of an ICMP destination unreachable for a port nobody listens on (RFC 792).
pub const PORT_UNREACHABLE: u8 = 3;

/// Writes the ICMP destination unreachable, code 3 (port unreachable), from `mac`/`ip` to the
/// sender `to_mac`/`to` of the UDP datagram whose IPv4 header and first 8 data bytes, as
/// received, are `original` (RFC 792: type 3, 4 unused bytes of zero, then "the internet
/// header plus the first 64 bits of the original datagram's data"; RFC 1122 §4.1.3.1); returns
/// the frame's length (padded to 60 bytes, as [`arp`]). Which datagrams may be answered is the
/// caller's to decide (RFC 1122 §3.2.2: no broadcast, no fragment after the first, …).
///
/// # Errors
/// `TooLong` if `out` cannot hold it, or `original` is longer than an IPv4 header of 60
/// bytes and 8 more.
pub fn port_unreachable(
    original: &[u8],
    mac: MacAddr,
    ip: Ipv4Addr,
    to_mac: MacAddr,
    to: Ipv4Addr,
    out: &mut [u8],
) -> Result<usize, TooLong> {
    if original.len() > 60 + UDP_LEN {
        return Err(TooLong);
    }
    // The ICMP header: type, code, checksum, 4 unused bytes.
    let icmp_len = 8 + original.len();
    let len = (ETH_LEN + IPV4_LEN + icmp_len).max(ETH_MIN_FRAME);
    let frame = out.get_mut(..len).ok_or(TooLong)?;
    frame.fill(0);
    let (eth_out, rest) = frame.split_at_mut(ETH_LEN);
    let (ip_out, rest) = rest.split_at_mut(IPV4_LEN);
    let icmp_out = rest.get_mut(..icmp_len).ok_or(TooLong)?;
    EthernetRepr {
        src_addr: eth(mac),
        dst_addr: eth(to_mac),
        ethertype: EthernetProtocol::Ipv4,
    }
    .emit(&mut EthernetFrame::new_unchecked(eth_out));
    Ipv4Repr {
        src_addr: ip,
        dst_addr: to,
        next_header: IpProtocol::Icmp,
        payload_len: icmp_len,
        hop_limit: TTL,
    }
    .emit(
        &mut Ipv4Packet::new_unchecked(ip_out),
        &ChecksumCapabilities::default(),
    );
    let mut icmp = Icmpv4Packet::new_unchecked(icmp_out);
    icmp.set_msg_type(Icmpv4Message::DstUnreachable);
    icmp.set_msg_code(PORT_UNREACHABLE);
    icmp.data_mut().copy_from_slice(original);
    icmp.fill_checksum();
    Ok(len)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ip::parse::{classify, Frame, Local, Verify};
    use crate::ip::Ipv4Config;

    const A: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x0a]);
    const B: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x0b]);
    const A_IP: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 10);
    const B_IP: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 11);

    fn header() -> UdpHeader {
        UdpHeader {
            src_mac: A,
            dst_mac: B,
            src: SockAddrIn::new(A_IP, 0xc000),
            dst: SockAddrIn::new(B_IP, 5000),
        }
    }

    #[test]
    fn the_udp_header_has_the_documented_layout() {
        let mut out = [0; UDP_HEADER_LEN];
        header()
            .emit(&mut out, 5, UdpChecksum::None)
            .expect("emits");
        assert_eq!(
            out,
            [
                2, 0, 0, 0, 0, 0x0b, 2, 0, 0, 0, 0, 0x0a, 0x08, 0x00, // Ethernet
                0x45, 0, 0, 33, // version 4, 20 bytes; total 20 + 8 + 5
                0, 0, 0x40, 0, // identification 0; DF
                64, 17, 0xb6, 0xb6, // TTL, UDP, header checksum (RFC 1071, by hand: !0x4949)
                192, 0, 2, 10, 192, 0, 2, 11, // addresses
                0xc0, 0x00, 0x13, 0x88, 0, 13, 0, 0, // ports, length 8 + 5, no checksum
            ]
        );
        assert_eq!(
            header().emit(&mut out, 65_536, UdpChecksum::None),
            Err(TooLong)
        );
        assert_eq!(
            header().emit(&mut out, 65_535 - 28 + 1, UdpChecksum::None),
            Err(TooLong)
        );
    }

    #[test]
    fn a_frame_emitted_here_is_taken_by_classify_with_its_checksums_checked() {
        let mut out = [0; 128];
        let n = udp_frame(&header(), b"hello, world", &mut out).expect("fits");
        let b = Local {
            mac: B,
            ip: Ipv4Config {
                addr: B_IP,
                prefix_len: 24,
                gateway: None,
            },
        };
        match classify(&out[..n], &b, Verify::ALL) {
            Ok(Frame::Udp(d)) => {
                assert_eq!((d.src, d.payload), (header().src, &b"hello, world"[..]))
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(udp_frame(&header(), &[0; 100], &mut out), Err(TooLong));
    }

    #[test]
    fn the_offload_seed_is_the_pseudo_header_sum() {
        let mut out = [0; UDP_HEADER_LEN];
        header()
            .emit(&mut out, 5, UdpChecksum::Offload)
            .expect("emits");
        let mut seed = Sum::new();
        seed.add_pseudo_header(A_IP, B_IP, IPPROTO_UDP, 13);
        assert_eq!(u16::from_be_bytes([out[40], out[41]]), seed.folded());
    }

    #[test]
    fn an_echo_reply_echoes_the_request_and_checksums_right() {
        let data = [7u8; 40];
        let req = Echo {
            src_mac: B,
            src: B_IP,
            ident: 0x1234,
            seq: 9,
            data: &data,
        };
        let mut out = [0; 128];
        let n = echo_reply(&req, A, A_IP, &mut out).expect("fits");
        assert_eq!(n, 14 + 20 + 8 + 40);
        let p = Icmpv4Packet::new_checked(&out[34..n]).expect("icmp");
        assert!(p.verify_checksum());
        assert_eq!(
            (p.msg_type(), p.echo_ident(), p.echo_seq_no()),
            (smoltcp::wire::Icmpv4Message::EchoReply, 0x1234, 9)
        );
        assert_eq!(p.data(), &data);
        let ip = Ipv4Packet::new_checked(&out[14..n]).expect("ipv4");
        assert!(ip.verify_checksum());
        assert_eq!((ip.src_addr(), ip.dst_addr()), (A_IP, B_IP));
        assert_eq!(&out[..6], &B.0);
        // A short request's reply is padded to Ethernet's minimum; a buffer too small refuses.
        let tiny = Echo { data: &[], ..req };
        assert_eq!(echo_reply(&tiny, A, A_IP, &mut out), Ok(ETH_MIN_FRAME));
        assert_eq!(echo_reply(&req, A, A_IP, &mut out[..60]), Err(TooLong));
    }

    /// RFC 792, Destination Unreachable Message: type 3, code 3 "port unreachable", "unused"
    /// zero, then "Internet Header + 64 bits of Original Data Datagram"; the ICMP checksum
    /// "is the 16-bit ones's complement of the one's complement sum of the ICMP message".
    #[test]
    fn a_port_unreachable_quotes_the_datagram_and_checksums_right() {
        let mut datagram = [0u8; 60];
        let n = udp_frame(&header(), b"hello", &mut datagram).expect("fits");
        let original = &datagram[ETH_LEN..ETH_LEN + IPV4_LEN + UDP_LEN];
        let mut out = [0xffu8; 128];
        let len = port_unreachable(original, B, B_IP, A, A_IP, &mut out).expect("fits");
        assert_eq!(len, 14 + 20 + 8 + 28);
        assert_eq!(&out[..6], &A.0, "to the sender's station");
        let ip = Ipv4Packet::new_checked(&out[14..len]).expect("ipv4");
        assert!(ip.verify_checksum());
        assert_eq!((ip.src_addr(), ip.dst_addr()), (B_IP, A_IP));
        assert_eq!(ip.next_header(), IpProtocol::Icmp);
        let icmp = Icmpv4Packet::new_checked(&out[34..len]).expect("icmp");
        assert!(icmp.verify_checksum());
        assert_eq!(
            &out[34..36],
            &[3, 3],
            "destination unreachable, port unreachable"
        );
        assert_eq!(&out[38..42], &[0; 4], "unused");
        assert_eq!(
            &out[42..len],
            original,
            "the header and 64 bits, as received"
        );
        assert!(
            n > len - 14 - 20 - 8,
            "the payload past 8 bytes is not quoted"
        );
        assert_eq!(
            port_unreachable(original, B, B_IP, A, A_IP, &mut out[..60]),
            Err(TooLong)
        );
        assert_eq!(
            port_unreachable(&[0; 69], B, B_IP, A, A_IP, &mut out),
            Err(TooLong),
            "longer than a header with options and 8 bytes"
        );
    }

    #[test]
    fn an_arp_request_has_rfc_826_layout() {
        let mut out = [0xff; ETH_MIN_FRAME];
        arp(
            &ArpFrame {
                op: ArpOp::Request,
                eth_dst: MacAddr::BROADCAST,
                sender_mac: A,
                sender_ip: A_IP,
                target_mac: MacAddr([0; 6]),
                target_ip: B_IP,
            },
            &mut out,
        );
        assert_eq!(
            out[..42],
            [
                0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0, 0x0a, 0x08,
                0x06, // Ethernet
                0, 1, 0x08, 0x00, 6, 4, 0, 1, // Ethernet/IPv4, request
                2, 0, 0, 0, 0, 0x0a, 192, 0, 2, 10, // sender
                0, 0, 0, 0, 0, 0, 192, 0, 2, 11, // target
            ]
        );
        assert!(out[42..].iter().all(|&b| b == 0), "zero padding");
    }
}
