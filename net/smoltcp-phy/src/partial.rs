//! Completing a partial TCP/UDP checksum before smoltcp checks it.
//!
//! A virtio-net device may hand over a frame from a sender on the same host with its checksum
//! left partial (`VIRTIO_NET_HDR_F_NEEDS_CSUM`, virtio 1.2 §5.1.6.4): the data is trusted, but
//! the TCP/UDP checksum field holds only the pseudo-header's sum, and the hal's completion marks
//! it so ([`RxChecksum::l4_partial`](ringfab_hal::RxChecksum::l4_partial)). smoltcp sums every
//! segment it receives (its checksum capabilities are the device's, not a frame's), so such a
//! segment would look corrupt and be dropped. [`complete_l4_checksum`] fills the field in
//! first, with smoltcp's own wire code: the pseudo-header from the IPv4 header, the segment as
//! the IPv4 header bounds it. The offsets are derived from the IPv4 header, not from the
//! device's `csum_start`/`csum_offset`, which the hal does not carry: for an IPv4 TCP or UDP
//! segment, the only kind smoltcp takes, they say the same.

use smoltcp::wire::{
    EthernetFrame, EthernetProtocol, IpAddress, IpProtocol, Ipv4Packet, TcpPacket, UdpPacket,
};

/// The shortest IPv4 header (IHL 5, RFC 791).
const IPV4_MIN_HEADER: u8 = 20;

/// Completes in place the TCP or UDP checksum of `frame`, an Ethernet frame whose completion
/// said the field is partial: sums the pseudo-header and the segment (the field zeroed) and
/// stores the complement (UDP's 0 as 0xFFFF, RFC 768). Returns whether it did.
///
/// A frame it cannot complete is left as it is, for smoltcp to parse and drop (or take, if its
/// checksum happens to be whole): not IPv4; an IPv4 header that is not version 4, shorter than
/// 20 bytes, or whose total length is below its header or past the frame; a fragment (the
/// segment is not all here); a protocol other than TCP and UDP; a TCP header whose data offset
/// is past the segment, or a UDP length below 8 or past the segment.
pub(crate) fn complete_l4_checksum(frame: &mut [u8]) -> bool {
    let Ok(mut eth) = EthernetFrame::new_checked(frame) else {
        return false;
    };
    if eth.ethertype() != EthernetProtocol::Ipv4 {
        return false;
    }
    // `new_checked`: the buffer holds the fixed header, the IHL's and the total length.
    let Ok(mut ip) = Ipv4Packet::new_checked(eth.payload_mut()) else {
        return false;
    };
    // smoltcp's length check does not look at the version, nor at an IHL below 5 (whose
    // payload would start inside the addresses).
    if ip.version() != 4
        || ip.header_len() < IPV4_MIN_HEADER
        || ip.more_frags()
        || ip.frag_offset() != 0
    {
        return false;
    }
    let (src, dst) = (
        IpAddress::Ipv4(ip.src_addr()),
        IpAddress::Ipv4(ip.dst_addr()),
    );
    let protocol = ip.next_header();
    // The IPv4 payload: from the header's end to the total length, Ethernet padding left out.
    let segment = ip.payload_mut();
    match protocol {
        IpProtocol::Tcp => match TcpPacket::new_checked(segment) {
            Ok(mut tcp) => {
                tcp.fill_checksum(&src, &dst);
                true
            }
            Err(_) => false,
        },
        IpProtocol::Udp => match UdpPacket::new_checked(segment) {
            Ok(mut udp) => {
                udp.fill_checksum(&src, &dst);
                true
            }
            Err(_) => false,
        },
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use smoltcp::wire::{Ipv4Address, TcpSeqNumber};

    use super::*;

    const SRC: Ipv4Address = Ipv4Address::new(192, 0, 2, 2);
    const DST: Ipv4Address = Ipv4Address::new(192, 0, 2, 1);

    /// The ones' complement sum of `data`, folded, not complemented (RFC 1071).
    fn ones_sum(data: &[u8], mut sum: u32) -> u16 {
        for w in data.chunks(2) {
            sum += u32::from(u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)]));
        }
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        sum as u16
    }

    /// An Ethernet/IPv4 frame carrying `segment` as `protocol`, its IPv4 header checksum
    /// right, followed by `padding` bytes of Ethernet padding.
    fn frame(protocol: u8, segment: &[u8], padding: usize) -> [u8; 256] {
        let mut f = [0u8; 256];
        f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        let total = 20 + segment.len() as u16;
        f[14] = 0x45;
        f[16..18].copy_from_slice(&total.to_be_bytes());
        f[22] = 64;
        f[23] = protocol;
        f[26..30].copy_from_slice(&SRC.octets());
        f[30..34].copy_from_slice(&DST.octets());
        let c = !ones_sum(&f[14..34], 0);
        f[24..26].copy_from_slice(&c.to_be_bytes());
        f[34..34 + segment.len()].copy_from_slice(segment);
        for b in &mut f[34 + segment.len()..34 + segment.len() + padding] {
            *b = 0xee;
        }
        f
    }

    /// The pseudo-header's sum the sender leaves in the field of a partial checksum.
    fn pseudo_sum(protocol: u8, len: u16) -> u16 {
        let mut p = [0u8; 12];
        p[..4].copy_from_slice(&SRC.octets());
        p[4..8].copy_from_slice(&DST.octets());
        p[9] = protocol;
        p[10..].copy_from_slice(&len.to_be_bytes());
        ones_sum(&p, 0)
    }

    /// A TCP segment (20-byte header, `payload`) with its checksum field partial.
    fn partial_tcp(payload: &[u8]) -> ([u8; 256], usize) {
        let mut seg = [0u8; 120];
        let len = 20 + payload.len();
        let mut tcp = TcpPacket::new_unchecked(&mut seg[..len]);
        tcp.set_src_port(40000);
        tcp.set_dst_port(7);
        tcp.set_seq_number(TcpSeqNumber(1234));
        tcp.set_header_len(20);
        tcp.set_ack(true);
        tcp.set_window_len(1000);
        tcp.payload_mut().copy_from_slice(payload);
        tcp.set_checksum(pseudo_sum(6, len as u16));
        (frame(6, &seg[..len], 6), 14 + 20 + len)
    }

    #[test]
    fn a_partial_tcp_checksum_is_completed_to_the_one_smoltcp_verifies() {
        for payload in [&b""[..], b"odd", b"even", &[0xffu8; 99][..]] {
            let (mut f, end) = partial_tcp(payload);
            let (s, d) = (IpAddress::Ipv4(SRC), IpAddress::Ipv4(DST));
            let seg = 34..end;
            assert!(!TcpPacket::new_unchecked(&f[seg.clone()]).verify_checksum(&s, &d));
            assert!(complete_l4_checksum(&mut f));
            assert!(
                TcpPacket::new_unchecked(&f[seg]).verify_checksum(&s, &d),
                "payload {payload:?}"
            );
            assert!(
                f[end..end + 6].iter().all(|&b| b == 0xee),
                "padding untouched"
            );
        }
    }

    #[test]
    fn a_partial_udp_checksum_is_completed_and_a_zero_sum_is_sent_as_all_ones() {
        let (s, d) = (IpAddress::Ipv4(SRC), IpAddress::Ipv4(DST));
        let mut seg = [0u8; 12];
        seg[..2].copy_from_slice(&5353u16.to_be_bytes());
        seg[2..4].copy_from_slice(&9u16.to_be_bytes());
        seg[4..6].copy_from_slice(&12u16.to_be_bytes());
        seg[6..8].copy_from_slice(&pseudo_sum(17, 12).to_be_bytes());
        seg[8..].copy_from_slice(b"data");
        let mut f = frame(17, &seg, 0);
        assert!(complete_l4_checksum(&mut f));
        assert!(UdpPacket::new_unchecked(&f[34..46]).verify_checksum(&s, &d));
        // A payload whose sum with the rest is all ones makes the checksum 0: RFC 768 sends
        // it as all ones.
        let mut zero = seg;
        zero[6..].copy_from_slice(&[0; 6]);
        let rest = ones_sum(&zero, u32::from(pseudo_sum(17, 12)));
        zero[8..10].copy_from_slice(&(!rest).to_be_bytes());
        zero[6..8].copy_from_slice(&pseudo_sum(17, 12).to_be_bytes());
        let mut f = frame(17, &zero, 0);
        assert!(complete_l4_checksum(&mut f));
        assert_eq!(f[40..42], [0xff, 0xff]);
        assert!(UdpPacket::new_unchecked(&f[34..46]).verify_checksum(&s, &d));
    }

    /// Everything [`complete_l4_checksum`] cannot complete is left byte for byte as it was
    /// (for smoltcp to drop), and nothing panics, whatever the lengths say.
    #[test]
    fn a_malformed_frame_marked_partial_is_left_as_it_is() {
        let (good, end) = partial_tcp(b"payload");
        let edit = |at: usize, bytes: &[u8]| {
            let mut f = good;
            f[at..at + bytes.len()].copy_from_slice(bytes);
            f
        };
        let total = (end - 14) as u16;
        let cases: [(&str, [u8; 256], usize); 12] = [
            ("ARP", edit(12, &[0x08, 0x06]), end),
            ("IPv6's EtherType", edit(12, &[0x86, 0xdd]), end),
            ("version 6", edit(14, &[0x65]), end),
            ("IHL 4", edit(14, &[0x44]), end),
            ("IHL past the total length", edit(14, &[0x4f]), end),
            (
                "total length past the frame",
                edit(16, &(total + 1).to_be_bytes()),
                end,
            ),
            (
                "total length below the header",
                edit(16, &19u16.to_be_bytes()),
                end,
            ),
            ("more fragments", edit(20, &[0x20]), end),
            ("a later fragment", edit(21, &[0x01]), end),
            ("ICMP", edit(23, &[1]), end),
            (
                "TCP data offset past the segment",
                edit(34 + 12, &[0xf0]),
                end,
            ),
            ("cut inside the IPv4 header", good, 30),
        ];
        for (what, f, len) in cases {
            let mut got = f;
            assert!(!complete_l4_checksum(&mut got[..len]), "{what}");
            assert_eq!(got, f, "{what}: left as it was");
        }
        // UDP: a length below its header, and one past the IPv4 payload.
        for udp_len in [7u16, 13] {
            let mut seg = [0u8; 12];
            seg[4..6].copy_from_slice(&udp_len.to_be_bytes());
            let f = frame(17, &seg, 0);
            let mut got = f;
            assert!(
                !complete_l4_checksum(&mut got[..46]),
                "UDP length {udp_len}"
            );
            assert_eq!(got, f);
        }
        // Every cut of a good frame: completed only once the whole segment is there.
        for len in 0..end {
            let mut f = good;
            assert!(!complete_l4_checksum(&mut f[..len]), "cut at {len}");
        }
        let mut f = good;
        assert!(complete_l4_checksum(&mut f[..end]));
    }
}
