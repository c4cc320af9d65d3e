//! `ip_classify`: core's classification of a received frame for a plain-UDP host
//! ([`classify`], `core/src/ip/parse.rs`) on the fuzzer's bytes — what every frame a plain-UDP
//! endpoint's queue takes from the network goes through on the general lane — and the answers
//! built from what it accepts ([`emit::echo_reply`], [`emit::port_unreachable`]).
//!
//! Input: one byte of flags (bit 0: the NIC verified the IPv4 header checksum; bit 1: it
//! verified the UDP or ICMP checksum, so software skips what is verified), then the frame.
//!
//! Checked:
//! * no panic, whatever the bytes;
//! * skipping checks only widens what is taken: a frame taken with every checksum checked is
//!   taken alike with none checked;
//! * an accepted datagram's payload lies inside the frame, right after the IPv4 header its IHL
//!   says (options included) and the 8-byte UDP header, so at
//!   [`UDP_HEADER_LEN`] or later, and its destination is one the
//!   host accepts, from an address a host may have;
//! * an accepted echo request's reply fits a control frame whenever the request did (RFC 1122
//!   §3.2.2.6: the reply carries all the data), and a datagram's port unreachable always fits
//!   a minimum-size buffer of 128 bytes (RFC 792: the header and 64 bits).

use ringfab::hal::MacAddr;
use ringfab::ip::emit;
use ringfab::ip::parse::{Frame, Local};
use ringfab::ip::{
    classify, Ipv4Addr, Ipv4Config, Verify, CONTROL_LEN, ETH_LEN, UDP_HEADER_LEN, UDP_LEN,
};

use crate::Bytes;

/// The host the frames are classified for: 192.0.2.10/24 at 02:00:00:00:00:0a.
const LOCAL: Local = Local {
    mac: MacAddr([0x02, 0, 0, 0, 0, 0x0a]),
    ip: Ipv4Config {
        addr: Ipv4Addr::new(192, 0, 2, 10),
        prefix_len: 24,
        gateway: None,
    },
};

/// The `ip_classify` target's body.
pub fn run(data: &[u8]) {
    let mut b = Bytes::new(data);
    let Some(flags) = b.u8() else {
        return;
    };
    let frame = b.rest();
    let verify = Verify {
        ipv4: flags & 1 == 0,
        l4: flags & 2 == 0,
    };
    let got = classify(frame, &LOCAL, verify);
    if let Ok(all) = classify(frame, &LOCAL, Verify::ALL) {
        let none = Verify {
            ipv4: false,
            l4: false,
        };
        assert_eq!(
            classify(frame, &LOCAL, none),
            Ok(all),
            "skipping checks took less"
        );
    }
    match got {
        Ok(Frame::Udp(d)) => {
            let at = offset_in(frame, d.payload);
            let ihl = usize::from(frame[ETH_LEN] & 0x0f) * 4;
            assert_eq!(at, ETH_LEN + ihl + UDP_LEN, "the payload after the headers");
            assert!(at >= UDP_HEADER_LEN);
            assert!(LOCAL.ip.accepts(d.dst.addr));
            assert!(!LOCAL.ip.is_broadcast(d.src.addr) && !d.src.addr.is_multicast());
            let original = &frame[ETH_LEN..ETH_LEN + ihl + UDP_LEN];
            let mut out = [0u8; 128];
            let mac = LOCAL.mac;
            let answered = emit::port_unreachable(
                original,
                mac,
                LOCAL.ip.addr,
                d.src_mac,
                d.src.addr,
                &mut out,
            );
            assert!(answered.is_ok(), "a port unreachable fits 128 bytes");
        }
        Ok(Frame::EchoRequest(e)) => {
            let at = offset_in(frame, e.data);
            assert!(at >= ETH_LEN + 20 + 8, "the data after the headers");
            let mut out = [0u8; CONTROL_LEN];
            let reply = emit::echo_reply(&e, LOCAL.mac, LOCAL.ip.addr, &mut out);
            if frame.len() <= CONTROL_LEN {
                assert!(
                    reply.is_ok(),
                    "the reply to a request that fit a control frame fits"
                );
            }
        }
        Ok(Frame::Arp(_)) | Err(_) => {}
    }
}

/// Where `part`, a subslice of `frame`, starts in it (checked to lie inside it).
fn offset_in(frame: &[u8], part: &[u8]) -> usize {
    let at = (part.as_ptr() as usize).wrapping_sub(frame.as_ptr() as usize);
    assert!(
        at <= frame.len() && part.len() <= frame.len() - at,
        "a slice outside the frame"
    );
    at
}
