//! Every parse path of [`classify`] with well-formed and malformed input: each malformation is
//! dropped with its reason, and no input — truncated at any length, or with any byte changed —
//! panics.

extern crate std;

use std::{vec, vec::Vec};

use super::*;
use crate::ip::checksum::{self, Sum};
use crate::ip::emit::{self, ArpFrame, UdpHeader};
use crate::ip::{ETH_MIN_FRAME, UDP_HEADER_LEN};

const US_MAC: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x0a]);
const PEER_MAC: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x0b]);
const US: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 10);
const PEER: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 11);

fn local() -> Local {
    Local {
        mac: US_MAC,
        ip: Ipv4Config {
            addr: US,
            prefix_len: 24,
            gateway: None,
        },
    }
}

fn classify_all(frame: &[u8]) -> Result<Frame<'_>, Discard> {
    classify(frame, &local(), Verify::ALL)
}

/// A UDP datagram from the peer's port 40000 to ours, 5000, carrying `payload`.
fn udp_to(dst_mac: MacAddr, dst: Ipv4Addr, payload: &[u8]) -> Vec<u8> {
    let header = UdpHeader {
        src_mac: PEER_MAC,
        dst_mac,
        src: SockAddrIn::new(PEER, 40000),
        dst: SockAddrIn::new(dst, 5000),
    };
    let mut out = vec![0; UDP_HEADER_LEN + payload.len()];
    let n = emit::udp_frame(&header, payload, &mut out).expect("fits");
    out.truncate(n);
    out
}

fn udp(payload: &[u8]) -> Vec<u8> {
    udp_to(US_MAC, US, payload)
}

/// `frame` with byte `i` set to `v` and the IPv4 header checksum made right again (so that an
/// edit reaches the check it is meant for).
fn edit_ip(frame: &[u8], i: usize, v: u8) -> Vec<u8> {
    let mut f = frame.to_vec();
    f[i] = v;
    refresh_ip_checksum(&mut f);
    f
}

fn refresh_ip_checksum(f: &mut [u8]) {
    let ihl = usize::from(f[14] & 0x0f) * 4;
    let end = (14 + ihl.max(20)).min(f.len());
    f[24..26].copy_from_slice(&[0, 0]);
    let c = checksum::of(&f[14..end]);
    f[24..26].copy_from_slice(&c.to_be_bytes());
}

/// `frame` (a UDP one) with its UDP checksum made right again after an edit.
fn refresh_udp_checksum(f: &mut [u8]) {
    f[40..42].copy_from_slice(&[0, 0]);
    let udp_len = u16::from_be_bytes([f[38], f[39]]);
    let mut sum = Sum::new();
    sum.add_pseudo_header(PEER, US, checksum::IPPROTO_UDP, udp_len)
        .add(&f[34..]);
    f[40..42].copy_from_slice(&checksum::udp_field(sum.finish()).to_be_bytes());
}

fn arp_frame(op: ArpOp, eth_dst: MacAddr, target_ip: Ipv4Addr) -> [u8; ETH_MIN_FRAME] {
    let mut out = [0; ETH_MIN_FRAME];
    emit::arp(
        &ArpFrame {
            op,
            eth_dst,
            sender_mac: PEER_MAC,
            sender_ip: PEER,
            target_mac: MacAddr([0; 6]),
            target_ip,
        },
        &mut out,
    );
    out
}

/// An echo request from the peer to `dst`, built by hand (RFC 792's layout).
fn echo_request(dst: Ipv4Addr, data: &[u8]) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&US_MAC.0);
    f.extend_from_slice(&PEER_MAC.0);
    f.extend_from_slice(&[0x08, 0x00]);
    let total = (20 + 8 + data.len()) as u16;
    f.extend_from_slice(&[0x45, 0]);
    f.extend_from_slice(&total.to_be_bytes());
    f.extend_from_slice(&[0, 1, 0x40, 0, 64, 1, 0, 0]);
    f.extend_from_slice(&PEER.octets());
    f.extend_from_slice(&dst.octets());
    refresh_ip_checksum(&mut f);
    let icmp_at = f.len();
    f.extend_from_slice(&[8, 0, 0, 0, 0x12, 0x34, 0, 7]);
    f.extend_from_slice(data);
    let c = checksum::of(&f[icmp_at..]);
    f[icmp_at + 2..icmp_at + 4].copy_from_slice(&c.to_be_bytes());
    f
}

#[test]
fn a_well_formed_datagram_to_us_is_udp_with_its_addresses_and_payload() {
    let f = udp(b"hello");
    let Ok(Frame::Udp(d)) = classify_all(&f) else {
        panic!("{:?}", classify_all(&f));
    };
    assert_eq!(d.src_mac, PEER_MAC);
    assert_eq!(d.src, SockAddrIn::new(PEER, 40000));
    assert_eq!(d.dst, SockAddrIn::new(US, 5000));
    assert!(!d.broadcast);
    assert_eq!(d.payload, b"hello");
}

#[test]
fn ethernet_padding_after_the_datagram_is_not_payload() {
    let mut f = udp(b"hi");
    f.resize(ETH_MIN_FRAME, 0xee);
    let Ok(Frame::Udp(d)) = classify_all(&f) else {
        panic!("{:?}", classify_all(&f));
    };
    assert_eq!(d.payload, b"hi");
}

#[test]
fn ethernet_addresses_decide_first() {
    let f = udp(b"x");
    assert_eq!(classify_all(&f[..13]), Err(Discard::Short));
    // Another station's unicast address; a multicast group; a group source.
    let mut other = f.clone();
    other[5] = 0x0c;
    assert_eq!(classify_all(&other), Err(Discard::EthOther));
    let mut group = f.clone();
    group[..6].copy_from_slice(&[0x01, 0x00, 0x5e, 0, 0, 1]);
    assert_eq!(classify_all(&group), Err(Discard::EthMulticast));
    let mut source = f.clone();
    source[6] |= 1;
    assert_eq!(classify_all(&source), Err(Discard::EthSource));
    // IPv6 and ringfab's own EtherType are not this module's.
    for t in [[0x86, 0xdd], [0x88, 0xb5]] {
        let mut t_frame = f.clone();
        t_frame[12..14].copy_from_slice(&t);
        assert_eq!(classify_all(&t_frame), Err(Discard::EtherType));
    }
}

#[test]
fn broadcasts_are_taken_and_marked() {
    for (mac, ip) in [
        (MacAddr::BROADCAST, Ipv4Addr::BROADCAST),
        (MacAddr::BROADCAST, Ipv4Addr::new(192, 0, 2, 255)),
        // A broadcast IPv4 destination in a unicast frame is still a broadcast.
        (US_MAC, Ipv4Addr::BROADCAST),
    ] {
        let f = udp_to(mac, ip, b"all");
        match classify_all(&f) {
            Ok(Frame::Udp(d)) => assert!(d.broadcast && d.payload == b"all"),
            other => panic!("{mac} {ip}: {other:?}"),
        }
    }
    // Another subnet's broadcast, and a multicast group, are not for us.
    for ip in [
        Ipv4Addr::new(198, 51, 100, 255),
        Ipv4Addr::new(224, 0, 0, 1),
    ] {
        assert_eq!(
            classify_all(&udp_to(MacAddr::BROADCAST, ip, b"x")),
            Err(Discard::Ipv4Destination),
            "{ip}"
        );
    }
}

#[test]
fn ipv4_header_malformations_each_have_their_reason() {
    let f = udp(b"payload");
    // Version 6 in an IPv4 EtherType; a header length under 20 (smoltcp lets it through).
    assert_eq!(
        classify_all(&edit_ip(&f, 14, 0x65)),
        Err(Discard::Ipv4Header)
    );
    assert_eq!(
        classify_all(&edit_ip(&f, 14, 0x44)),
        Err(Discard::Ipv4Header)
    );
    // A total length beyond the frame, or shorter than the header.
    assert_eq!(
        classify_all(&edit_ip(&f, 17, 200)),
        Err(Discard::Ipv4Header)
    );
    assert_eq!(classify_all(&edit_ip(&f, 17, 19)), Err(Discard::Ipv4Header));
    // Truncated inside the IPv4 header.
    assert_eq!(classify_all(&f[..30]), Err(Discard::Ipv4Header));
    // A wrong checksum; and the same frame when the NIC vouched for the header.
    let mut bad = f.clone();
    bad[25] ^= 0x40;
    assert_eq!(classify_all(&bad), Err(Discard::Ipv4Checksum));
    let nic_checked = Verify {
        ipv4: false,
        l4: true,
    };
    assert!(matches!(
        classify(&bad, &local(), nic_checked),
        Ok(Frame::Udp(_))
    ));
}

#[test]
fn fragments_are_dropped_whichever_part_they_are() {
    let f = udp(b"payload");
    // More fragments (the first part), an offset (a later part), both (a middle part).
    assert_eq!(classify_all(&edit_ip(&f, 20, 0x20)), Err(Discard::Fragment));
    assert_eq!(classify_all(&edit_ip(&f, 21, 0x01)), Err(Discard::Fragment));
    let mut middle = edit_ip(&f, 20, 0x20);
    middle[21] = 0x10;
    refresh_ip_checksum(&mut middle);
    assert_eq!(classify_all(&middle), Err(Discard::Fragment));
    // DF alone is not a fragment.
    assert!(matches!(
        classify_all(&edit_ip(&f, 20, 0x40)),
        Ok(Frame::Udp(_))
    ));
}

/// `frame` (a UDP one to us) with `options` (a multiple of 4 bytes, at most 40) inserted after
/// its IPv4 header: IHL, total length and checksum made right.
fn with_options(frame: &[u8], options: &[u8]) -> Vec<u8> {
    assert!(options.len() % 4 == 0 && options.len() <= 40);
    let mut o = frame[..34].to_vec();
    o.extend_from_slice(options);
    o.extend_from_slice(&frame[34..]);
    o[14] = 0x45 + (options.len() / 4) as u8;
    let total = u16::from_be_bytes([o[16], o[17]]) + options.len() as u16;
    o[16..18].copy_from_slice(&total.to_be_bytes());
    refresh_ip_checksum(&mut o);
    o
}

/// RFC 1122 §3.2.1.8: "The IP and transport layer MUST each interpret those IP options that
/// they understand and silently ignore the others." A datagram whose header carries options
/// — No Operation, End of Option List, options this host does not act on (Record Route,
/// Timestamp, Router Alert, an unknown type), up to the longest header (60 bytes) — is taken,
/// its payload the same.
#[test]
fn a_header_with_well_formed_options_is_taken_and_its_options_ignored() {
    let f = udp(b"opts");
    for options in [
        &[1, 1, 1, 0][..],
        &[0, 0xde, 0xad, 0xbe][..], // End of Option List, then padding of any value
        &[148, 4, 0, 0][..],        // Router Alert (RFC 2113)
        &[7, 7, 8, 192, 0, 2, 1, 0][..], // Record Route: a pointer, one slot used, padding
        &[68, 12, 5, 0, 0, 0, 0, 1, 0, 0, 0, 2][..], // Timestamp, two stamps
        &[0x9e, 4, 0xff, 0xff][..], // a type nobody defined, with a right length
        &[1; 40][..],               // 40 No Operations: the longest header
    ] {
        let o = with_options(&f, options);
        match classify_all(&o) {
            Ok(Frame::Udp(d)) => {
                assert_eq!(d.payload, b"opts", "{options:?}");
                assert_eq!(d.src, SockAddrIn::new(PEER, 40000));
            }
            other => panic!("{options:?}: {other:?}"),
        }
    }
}

/// RFC 791 §3.1: an option is a single type octet (0, 1) or "an option-type octet, an
/// option-length octet, and the actual option-data octets", its length counting all three:
/// a length under 2, or one that runs past the header, is malformed — dropped and counted as
/// `Ipv4Options`, never a panic. An IHL under 5, or past the total length or the frame, is a
/// header error.
#[test]
fn malformed_options_and_header_lengths_are_dropped_with_their_reason() {
    let f = udp(b"opts");
    for options in [
        &[7, 0, 0, 0][..],                // length 0
        &[7, 1, 0, 0][..],                // length 1: shorter than its own two octets
        &[7, 5, 0, 0][..],                // one byte past the header
        &[1, 1, 1, 7][..],                // a type octet with no length octet
        &[68, 255, 0, 0][..],             // far past it
        &[1, 1, 130, 11, 0, 0, 0, 0][..], // Security, one short of its 11 bytes
    ] {
        assert_eq!(
            classify_all(&with_options(&f, options)),
            Err(Discard::Ipv4Options),
            "{options:?}"
        );
    }
    // An IHL that runs past the total length is a header error, not options.
    assert_eq!(
        classify_all(&edit_ip(&f, 14, 0x4f)),
        Err(Discard::Ipv4Header)
    );
    // An IHL under 5 would put the payload inside the fixed header.
    for ihl in 0..5u8 {
        assert_eq!(
            classify_all(&edit_ip(&f, 14, 0x40 | ihl)),
            Err(Discard::Ipv4Header),
            "IHL {ihl}"
        );
    }
    // An IHL past the frame itself (the frame cut inside the options).
    let o = with_options(&f, &[1; 8]);
    for cut in 34..42 {
        assert!(classify_all(&o[..cut]).is_err(), "cut at {cut}");
    }
}

/// RFC 1122 §3.2.1.3: "A host MUST silently discard an incoming datagram containing an IP
/// source address that is invalid by the rules of this section" — among them a broadcast
/// address, the subnet's directed broadcast (`{<Network-number>, -1}`) as much as the limited
/// one (the subnet's broadcast was found by the `ip_classify` fuzz target).
#[test]
fn sources_no_host_may_have_are_refused() {
    let f = udp(b"x");
    let subnet_broadcast = local().ip.broadcast().unwrap();
    for src in [
        Ipv4Addr::UNSPECIFIED,
        Ipv4Addr::BROADCAST,
        subnet_broadcast,
        Ipv4Addr::LOCALHOST,
        Ipv4Addr::new(224, 1, 2, 3),
        Ipv4Addr::new(240, 0, 0, 9),
    ] {
        let mut g = f.clone();
        g[26..30].copy_from_slice(&src.octets());
        refresh_ip_checksum(&mut g);
        assert_eq!(classify_all(&g), Err(Discard::Ipv4Source), "{src}");
    }
}

#[test]
fn other_ip_protocols_are_dropped() {
    let f = udp(b"x");
    for proto in [6u8, 2, 41, 0] {
        assert_eq!(
            classify_all(&edit_ip(&f, 23, proto)),
            Err(Discard::Protocol),
            "protocol {proto}"
        );
    }
}

#[test]
fn udp_malformations_each_have_their_reason() {
    let f = udp(b"payload");
    let with = |i: usize, v: u8| {
        let mut g = f.clone();
        g[i] = v;
        refresh_udp_checksum(&mut g);
        g
    };
    // A length field longer, or shorter, than the IPv4 payload; below the header's 8 bytes.
    assert_eq!(classify_all(&with(39, 16)), Err(Discard::UdpHeader));
    assert_eq!(classify_all(&with(39, 14)), Err(Discard::UdpHeader));
    assert_eq!(classify_all(&with(39, 4)), Err(Discard::UdpHeader));
    // Destination port 0.
    let mut port0 = with(36, 0);
    port0[37] = 0;
    refresh_udp_checksum(&mut port0);
    assert_eq!(classify_all(&port0), Err(Discard::UdpHeader));
    // An IPv4 payload too short for a UDP header.
    let mut short = f[..34 + 6].to_vec();
    short[16..18].copy_from_slice(&26u16.to_be_bytes());
    refresh_ip_checksum(&mut short);
    assert_eq!(classify_all(&short), Err(Discard::UdpHeader));
    // A wrong checksum; none at all (0) is accepted; a NIC that checked it is believed.
    let mut bad = f.clone();
    bad[41] ^= 1;
    assert_eq!(classify_all(&bad), Err(Discard::UdpChecksum));
    let nic_checked = Verify {
        ipv4: true,
        l4: false,
    };
    assert!(matches!(
        classify(&bad, &local(), nic_checked),
        Ok(Frame::Udp(_))
    ));
    let mut none = f.clone();
    none[40..42].copy_from_slice(&[0, 0]);
    assert!(matches!(classify_all(&none), Ok(Frame::Udp(_))));
    // A payload byte changed breaks the checksum too.
    let mut data = f.clone();
    data[44] ^= 0x80;
    assert_eq!(classify_all(&data), Err(Discard::UdpChecksum));
}

#[test]
fn arp_requests_and_replies_parse_and_other_arp_does_not() {
    let req = arp_frame(ArpOp::Request, MacAddr::BROADCAST, US);
    assert_eq!(
        classify_all(&req),
        Ok(Frame::Arp(Arp {
            op: ArpOp::Request,
            sender_mac: PEER_MAC,
            sender_ip: PEER,
            target_mac: MacAddr([0; 6]),
            target_ip: US,
        }))
    );
    let reply = arp_frame(ArpOp::Reply, US_MAC, US);
    assert!(matches!(
        classify_all(&reply),
        Ok(Frame::Arp(Arp {
            op: ArpOp::Reply,
            ..
        }))
    ));
    // A request for another host still parses: the ARP state machine decides (RFC 826 merges
    // the sender of any request it sees into an entry it already has).
    let other = arp_frame(ArpOp::Request, MacAddr::BROADCAST, PEER);
    assert!(matches!(classify_all(&other), Ok(Frame::Arp(_))));
    let with = |i: usize, v: u8| {
        let mut g = req;
        g[i] = v;
        g
    };
    // Hardware type 6 (IEEE 802), protocol IPv6, lengths 8 and 16, operation 3 (RARP).
    assert_eq!(classify_all(&with(15, 6)), Err(Discard::Arp));
    assert_eq!(classify_all(&with(16, 0x86)), Err(Discard::Arp));
    assert_eq!(classify_all(&with(18, 8)), Err(Discard::Arp));
    assert_eq!(classify_all(&with(19, 16)), Err(Discard::Arp));
    assert_eq!(classify_all(&with(21, 3)), Err(Discard::Arp));
    // Truncated before the target protocol address.
    assert_eq!(classify_all(&req[..14 + 27]), Err(Discard::Arp));
}

#[test]
fn an_echo_request_to_us_parses_and_other_icmp_does_not() {
    let f = echo_request(US, b"ping data");
    assert_eq!(
        classify_all(&f),
        Ok(Frame::EchoRequest(Echo {
            src_mac: PEER_MAC,
            src: PEER,
            ident: 0x1234,
            seq: 7,
            data: b"ping data",
        }))
    );
    let with_icmp = |i: usize, v: u8| {
        let mut g = f.clone();
        g[34 + i] = v;
        g[36..38].copy_from_slice(&[0, 0]);
        let c = checksum::of(&g[34..]);
        g[36..38].copy_from_slice(&c.to_be_bytes());
        g
    };
    // An echo reply, a destination unreachable, an echo request with a code.
    assert_eq!(classify_all(&with_icmp(0, 0)), Err(Discard::Icmp));
    assert_eq!(classify_all(&with_icmp(0, 3)), Err(Discard::Icmp));
    assert_eq!(classify_all(&with_icmp(1, 1)), Err(Discard::Icmp));
    // A wrong checksum; shorter than ICMP's header.
    let mut bad = f.clone();
    bad[40] ^= 1;
    assert_eq!(classify_all(&bad), Err(Discard::IcmpHeader));
    let mut short = f[..34 + 4].to_vec();
    short[16..18].copy_from_slice(&24u16.to_be_bytes());
    refresh_ip_checksum(&mut short);
    assert_eq!(classify_all(&short), Err(Discard::IcmpHeader));
    // To a broadcast address: silence (RFC 1122 §3.2.2.6).
    let mut b = echo_request(Ipv4Addr::BROADCAST, b"x");
    b[..6].copy_from_slice(&MacAddr::BROADCAST.0);
    assert_eq!(classify_all(&b), Err(Discard::IcmpBroadcast));
}

#[test]
fn every_truncation_of_every_kind_of_frame_is_a_reason_not_a_panic() {
    // Frames without Ethernet padding: ARP's 28 bytes after the Ethernet header are all of it.
    let frames = [
        udp(b"some payload bytes"),
        arp_frame(ArpOp::Request, MacAddr::BROADCAST, US)[..42].to_vec(),
        echo_request(US, b"0123456789"),
    ];
    for f in &frames {
        assert!(classify_all(f).is_ok());
        for n in 0..f.len() {
            assert!(classify_all(&f[..n]).is_err(), "{n} bytes of {f:02x?}");
        }
    }
}

#[test]
fn random_corruption_never_panics() {
    // A xorshift generator: deterministic, no dependency.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let frames = [
        udp(b"some payload bytes"),
        arp_frame(ArpOp::Request, MacAddr::BROADCAST, US).to_vec(),
        echo_request(US, b"0123456789"),
    ];
    let mut taken = 0;
    for round in 0..30_000 {
        let mut f = frames[round % frames.len()].clone();
        for _ in 0..1 + next() % 4 {
            let i = (next() as usize) % f.len();
            f[i] = next() as u8;
        }
        // Keep the IPv4 checksum right half the time so that later checks are reached.
        if next() % 2 == 0 && f.len() >= 34 {
            refresh_ip_checksum(&mut f);
        }
        let cut = f.len() - (next() as usize % 8).min(f.len());
        for verify in [
            Verify::ALL,
            Verify {
                ipv4: false,
                l4: false,
            },
        ] {
            if classify(&f[..cut], &local(), verify).is_ok() {
                taken += 1;
            }
        }
    }
    assert!(taken > 0, "some corrupted frames must still be valid ones");
}

#[test]
fn a_checksum_summed_in_pieces_verifies_like_the_library() {
    let f = udp(b"odd length payload");
    let mut sum = Sum::new();
    let udp_len = (f.len() - 34) as u16;
    sum.add_pseudo_header(PEER, US, checksum::IPPROTO_UDP, udp_len);
    for piece in f[34..].chunks(5) {
        sum.add(piece);
    }
    let field = u16::from_be_bytes([f[40], f[41]]);
    assert!(udp_checksum_ok(field, &sum));
    assert!(udp_checksum_ok(0, &Sum::new()));
    let mut wrong = sum;
    wrong.add_u16(1);
    assert!(!udp_checksum_ok(field, &wrong));
}
