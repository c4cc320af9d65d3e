//! Malformed frames from the Linux side, through an `AF_PACKET` socket (packet(7)) on the
//! kernel's interface, each with the reason ringfab's receive path must drop it for
//! (`ringfab::ip::Discard`, docs/ip.md "The receive path"). The frames are built here by hand,
//! byte by byte (RFC 791, RFC 768, RFC 792, RFC 826), not with ringfab's emitter.

use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use ringfab::hal::MacAddr;
use ringfab::ip::Discard;

/// What ringfab does with a malformed frame.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Expect {
    /// Dropped and counted for this reason.
    Counted(Discard),
    /// A well-formed datagram to a port no endpoint bound: `IpDrops::port`.
    Port,
    /// Counted for this reason if it reaches ringfab at all: the NIC's address filter (a group
    /// not joined), a Linux bridge (a group source address, virtio-net's tap link) or the
    /// sending NIC's model may stop it first.
    MaybeFiltered(Discard),
}

/// One kind of malformed frame.
pub(crate) struct Malformed {
    pub(crate) name: &'static str,
    pub(crate) expect: Expect,
    pub(crate) frame: Vec<u8>,
}

/// The two ends and the port of the exchange the frames interfere with.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Link {
    pub(crate) ringfab_mac: MacAddr,
    pub(crate) linux_mac: MacAddr,
    pub(crate) ringfab_ip: Ipv4Addr,
    pub(crate) linux_ip: Ipv4Addr,
    /// The subnet's broadcast address.
    pub(crate) broadcast_ip: Ipv4Addr,
    /// The ringfab endpoint's port (which the exchange uses).
    pub(crate) port: u16,
    /// The frames cross a Linux bridge on the host (virtio-net's taps), which may validate
    /// IPv4 headers: with `br_netfilter` loaded, `br_validate_ipv4` drops a header whose
    /// checksum is wrong or whose total length passes the frame.
    pub(crate) bridged: bool,
}

const IPV4: u16 = 0x0800;
const ARP: u16 = 0x0806;
const UDP: u8 = 17;
const ICMP: u8 = 1;
/// A UDP port nobody binds: discard (RFC 863).
const DISCARD_PORT: u16 = 9;
const BROADCAST_MAC: MacAddr = MacAddr([0xff; 6]);

/// RFC 1071's Internet checksum of `b`.
fn checksum(b: &[u8]) -> u16 {
    let mut sum: u32 = b
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

fn eth(dst: MacAddr, src: MacAddr, ethertype: u16) -> Vec<u8> {
    let mut f = dst.0.to_vec();
    f.extend_from_slice(&src.0);
    f.extend_from_slice(&ethertype.to_be_bytes());
    f
}

/// An IPv4 header (RFC 791 §3.1) without options, DF set, its checksum right.
fn ipv4(src: Ipv4Addr, dst: Ipv4Addr, protocol: u8, payload_len: usize) -> Vec<u8> {
    let total = (20 + payload_len) as u16;
    let mut h = vec![0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, protocol, 0, 0];
    h[2..4].copy_from_slice(&total.to_be_bytes());
    h.extend_from_slice(&src.octets());
    h.extend_from_slice(&dst.octets());
    set_ipv4_checksum(&mut h);
    h
}

fn set_ipv4_checksum(h: &mut [u8]) {
    h[10..12].copy_from_slice(&[0, 0]);
    let c = checksum(h);
    h[10..12].copy_from_slice(&c.to_be_bytes());
}

/// A UDP datagram (RFC 768) with its checksum right over the pseudo-header.
fn udp(src: Ipv4Addr, dst: Ipv4Addr, sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    let len = (8 + payload.len()) as u16;
    let mut d = sport.to_be_bytes().to_vec();
    d.extend_from_slice(&dport.to_be_bytes());
    d.extend_from_slice(&len.to_be_bytes());
    d.extend_from_slice(&[0, 0]);
    d.extend_from_slice(payload);
    let mut pseudo = src.octets().to_vec();
    pseudo.extend_from_slice(&dst.octets());
    pseudo.extend_from_slice(&[0, UDP]);
    pseudo.extend_from_slice(&len.to_be_bytes());
    pseudo.extend_from_slice(&d);
    let c = match checksum(&pseudo) {
        0 => 0xffff,
        c => c,
    };
    d[6..8].copy_from_slice(&c.to_be_bytes());
    d
}

/// An ICMP message (RFC 792) of `kind` (type) with its checksum right.
fn icmp(kind: u8, data: &[u8]) -> Vec<u8> {
    let mut m = vec![kind, 0, 0, 0, 0x12, 0x34, 0, 1];
    m.extend_from_slice(data);
    let c = checksum(&m);
    m[2..4].copy_from_slice(&c.to_be_bytes());
    m
}

/// An Ethernet frame carrying IPv4 `ip` (header, options included) and `body`.
fn frame(dst: MacAddr, src: MacAddr, ip: &[u8], body: &[u8]) -> Vec<u8> {
    let mut f = eth(dst, src, IPV4);
    f.extend_from_slice(ip);
    f.extend_from_slice(body);
    f
}

/// Every malformed frame of the flood, from Linux (`linux_*`) to ringfab.
pub(crate) fn malformed(l: &Link) -> Vec<Malformed> {
    let (to, from) = (l.ringfab_mac, l.linux_mac);
    let (me, peer) = (l.linux_ip, l.ringfab_ip);
    let payload = [0x42u8; 64];
    let good_udp = udp(me, peer, 40000, l.port, &payload);
    let good_ip = ipv4(me, peer, UDP, good_udp.len());
    let udp_frame = |ip: &[u8], body: &[u8]| frame(to, from, ip, body);
    let bridge_checks = |r| {
        if l.bridged {
            Expect::MaybeFiltered(r)
        } else {
            Expect::Counted(r)
        }
    };
    let mut out = Vec::new();
    let mut add = |name, expect, frame| {
        out.push(Malformed {
            name,
            expect,
            frame,
        })
    };

    // Ethernet (IEEE 802.3).
    let mut bare = ipv4(me, peer, UDP, 0);
    bare[2..4].copy_from_slice(&20u16.to_be_bytes());
    set_ipv4_checksum(&mut bare);
    add(
        "runt",
        // 34 bytes, an IPv4 header and nothing after it: it arrives padded to 60 with zeros,
        // a UDP datagram shorter than its header.
        Expect::Counted(Discard::UdpHeader),
        frame(to, from, &bare, &[]),
    );
    add(
        "ipv4-no-header",
        // An Ethernet header and nothing else. QEMU's igb and e1000e do not send it: their
        // transmit path (`net_tx_pkt_parse_headers`) drops an IPv4 frame whose IPv4 header it
        // cannot read; virtio-net sends it, and it arrives as 60 bytes of an IPv4 version 0.
        Expect::MaybeFiltered(Discard::Ipv4Header),
        eth(to, from, IPV4),
    );
    add(
        "ethertype",
        Expect::Counted(Discard::EtherType),
        [eth(to, from, 0x88b5), payload.to_vec()].concat(),
    );
    add(
        "group-source",
        Expect::MaybeFiltered(Discard::EthSource),
        frame(to, MacAddr([0x03, 0, 0, 0, 0, 1]), &good_ip, &good_udp),
    );
    let group = Ipv4Addr::new(239, 255, 0, 1);
    let to_group = udp(me, group, 40000, l.port, &payload);
    add(
        "multicast",
        Expect::MaybeFiltered(Discard::EthMulticast),
        // RFC 1112 §6.4: group 239.255.0.1 on 01:00:5e:7f:00:01.
        frame(
            MacAddr([0x01, 0, 0x5e, 0x7f, 0, 1]),
            from,
            &ipv4(me, group, UDP, to_group.len()),
            &to_group,
        ),
    );

    // ARP (RFC 826): hardware type 0x1234, and a packet of zeros.
    let mut arp = vec![0x12, 0x34, 0x08, 0x00, 6, 4, 0, 1];
    arp.extend_from_slice(&from.0);
    arp.extend_from_slice(&me.octets());
    arp.extend_from_slice(&[0; 6]);
    arp.extend_from_slice(&peer.octets());
    add(
        "arp-hardware-type",
        Expect::Counted(Discard::Arp),
        [eth(BROADCAST_MAC, from, ARP), arp].concat(),
    );
    add(
        "arp-zeros",
        Expect::Counted(Discard::Arp),
        [eth(to, from, ARP), vec![0; 10]].concat(),
    );

    // IPv4 (RFC 791).
    let mut truncated = good_ip.clone();
    truncated[2..4].copy_from_slice(&1000u16.to_be_bytes());
    set_ipv4_checksum(&mut truncated);
    add(
        "ipv4-truncated",
        bridge_checks(Discard::Ipv4Header),
        udp_frame(&truncated, &good_udp),
    );
    let mut bad_sum = good_ip.clone();
    bad_sum[10] ^= 0x5a;
    add(
        "ipv4-checksum",
        bridge_checks(Discard::Ipv4Checksum),
        udp_frame(&bad_sum, &good_udp),
    );
    // The header with 4 bytes of options, its length and checksum right, carrying `udp`.
    let with_options = |options: [u8; 4], udp: &[u8]| {
        let mut ip = good_ip.clone();
        ip[0] = 0x46;
        ip.extend_from_slice(&options);
        let total = (24 + udp.len()) as u16;
        ip[2..4].copy_from_slice(&total.to_be_bytes());
        set_ipv4_checksum(&mut ip);
        udp_frame(&ip, udp)
    };
    // RFC 791 §3.1: an option other than end-of-list and no-operation has a length octet
    // counting itself and the type, so at least 2: a record-route option of length 1 is
    // malformed. (Well-formed options are taken and ignored, RFC 1122 §3.2.1.8: below.)
    add(
        "ipv4-options-malformed",
        bridge_checks(Discard::Ipv4Options),
        with_options([7, 1, 0, 0], &good_udp),
    );
    for (name, flags_offset) in [("fragment-first", 0x2000u16), ("fragment-later", 0x00b9)] {
        let mut frag = good_ip.clone();
        frag[6..8].copy_from_slice(&flags_offset.to_be_bytes());
        set_ipv4_checksum(&mut frag);
        add(
            name,
            Expect::Counted(Discard::Fragment),
            udp_frame(&frag, &good_udp),
        );
    }
    let other = Ipv4Addr::new(peer.octets()[0], peer.octets()[1], peer.octets()[2], 77);
    let to_other = udp(me, other, 40000, l.port, &payload);
    add(
        "ipv4-other-host",
        Expect::Counted(Discard::Ipv4Destination),
        udp_frame(&ipv4(me, other, UDP, to_other.len()), &to_other),
    );
    add(
        "ipv4-group-in-unicast",
        Expect::Counted(Discard::Ipv4Destination),
        udp_frame(&ipv4(me, group, UDP, to_group.len()), &to_group),
    );
    let nobody = Ipv4Addr::BROADCAST;
    let from_nobody = udp(nobody, peer, 40000, l.port, &payload);
    add(
        "ipv4-broadcast-source",
        Expect::Counted(Discard::Ipv4Source),
        udp_frame(&ipv4(nobody, peer, UDP, from_nobody.len()), &from_nobody),
    );
    add(
        "ipv4-protocol",
        Expect::Counted(Discard::Protocol),
        udp_frame(&ipv4(me, peer, 253, payload.len()), &payload),
    );

    // ICMP (RFC 792).
    let timestamp = icmp(13, &[0; 12]);
    add(
        "icmp-timestamp",
        Expect::Counted(Discard::Icmp),
        udp_frame(&ipv4(me, peer, ICMP, timestamp.len()), &timestamp),
    );
    let mut bad_echo = icmp(8, &payload);
    bad_echo[2] ^= 0xff;
    add(
        "icmp-checksum",
        Expect::Counted(Discard::IcmpHeader),
        udp_frame(&ipv4(me, peer, ICMP, bad_echo.len()), &bad_echo),
    );
    let echo = icmp(8, &payload);
    add(
        "icmp-echo-to-broadcast",
        Expect::Counted(Discard::IcmpBroadcast),
        frame(
            BROADCAST_MAC,
            from,
            &ipv4(me, l.broadcast_ip, ICMP, echo.len()),
            &echo,
        ),
    );

    // UDP (RFC 768).
    let mut long = good_udp.clone();
    long[4..6].copy_from_slice(&((good_udp.len() + 100) as u16).to_be_bytes());
    add(
        "udp-length",
        Expect::Counted(Discard::UdpHeader),
        udp_frame(&good_ip, &long),
    );
    let mut bad = good_udp.clone();
    bad[6] ^= 0x01;
    bad[7] ^= 0x01;
    add(
        "udp-checksum",
        Expect::Counted(Discard::UdpChecksum),
        udp_frame(&good_ip, &bad),
    );
    let port_zero = udp(me, peer, 40000, 0, &payload);
    add(
        "udp-port-0",
        Expect::Counted(Discard::UdpHeader),
        udp_frame(&good_ip, &port_zero),
    );
    let unbound = udp(me, peer, 40000, DISCARD_PORT, &payload);
    add(
        "udp-unbound-port",
        Expect::Port,
        udp_frame(&good_ip, &unbound),
    );
    // NOP, NOP, NOP, end of options (RFC 791 §3.1): taken, the options ignored (RFC 1122
    // §3.2.1.8), and then refused for its port like the datagram above.
    add(
        "ipv4-options-unbound-port",
        Expect::Port,
        with_options([1, 1, 1, 0], &unbound),
    );
    let broadcast = udp(me, l.broadcast_ip, 40000, DISCARD_PORT, &payload);
    add(
        "udp-broadcast",
        Expect::Port,
        frame(
            BROADCAST_MAC,
            from,
            &ipv4(me, l.broadcast_ip, UDP, broadcast.len()),
            &broadcast,
        ),
    );
    out
}

/// An `AF_PACKET` socket that sends whole Ethernet frames out of one interface.
pub(crate) struct PacketSocket {
    fd: OwnedFd,
    ifindex: i32,
}

impl PacketSocket {
    /// A raw packet socket on interface `ifname` (root only, packet(7)). Protocol 0: it
    /// receives nothing.
    pub(crate) fn open(ifname: &str) -> Result<PacketSocket, String> {
        let path = format!("/sys/class/net/{ifname}/ifindex");
        let ifindex: i32 = std::fs::read_to_string(&path)
            .map_err(|e| format!("reading {path}: {e}"))?
            .trim()
            .parse()
            .map_err(|e| format!("{path}: {e}"))?;
        // SAFETY: socket(2) with constant arguments touches no memory of ours.
        let raw = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, 0) };
        if raw < 0 {
            return Err(format!(
                "socket(AF_PACKET, SOCK_RAW): {}",
                std::io::Error::last_os_error()
            ));
        }
        // SAFETY: `raw` is a descriptor socket(2) just returned, owned by nothing else.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        Ok(PacketSocket { fd, ifindex })
    }

    /// Sends `frame` as it is (packet(7): `SOCK_RAW` frames include the link-level header).
    pub(crate) fn send(&self, frame: &[u8]) -> std::io::Result<()> {
        // SAFETY: all-zero is a valid `sockaddr_ll` (plain integers and a byte array).
        let mut to: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        to.sll_family = libc::AF_PACKET as u16;
        to.sll_ifindex = self.ifindex;
        to.sll_halen = 6;
        to.sll_addr[..6].copy_from_slice(&frame[..6]);
        // SAFETY: `frame` and `to` are live for the call and their lengths are the ones given;
        // sendto(2) only reads them.
        let n = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                frame.as_ptr().cast(),
                frame.len(),
                0,
                std::ptr::addr_of!(to).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if n < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }
}

/// Sends every frame of `frames` in turn until `stop`, round after round; returns how many of
/// each the kernel took (a send refused for want of buffer space, `ENOBUFS`, is not counted).
/// A round starts only once `ports` (ringfab's count of datagrams to unbound ports,
/// `IpDrops::port`) shows that the last frame of the round before, such a datagram, has been
/// taken: frames arrive in order on one receive queue, so at most one round is in flight and
/// the flood never takes more of ringfab's receive buffers than the exchange leaves — a flood
/// that outruns its receiver is dropped by any NIC (QEMU's igb drops what finds no descriptor
/// without counting it), and that is not what this test is about.
///
/// # Panics
/// If the last frame is not a datagram to an unbound port.
pub(crate) fn flood(
    sock: &PacketSocket,
    frames: &[Malformed],
    stop: &AtomicBool,
    ports: impl Fn() -> u64,
) -> Vec<u64> {
    assert!(
        matches!(frames.last().map(|m| m.expect), Some(Expect::Port)),
        "the last frame of a round is what its pacing counts"
    );
    let mut sent = vec![0u64; frames.len()];
    let mut must_arrive = 0;
    while !stop.load(Ordering::SeqCst) {
        if ports() < must_arrive {
            std::thread::sleep(Duration::from_micros(200));
            continue;
        }
        for (i, m) in frames.iter().enumerate() {
            if sock.send(&m.frame).is_ok() {
                sent[i] += 1;
                if m.expect == Expect::Port {
                    must_arrive += 1;
                }
            }
        }
    }
    sent
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_internet_checksum_of_rfc_1071_s_example() {
        // RFC 1071 §3: the words 0001 f203 f4f5 f6f7 sum to ddf2; the checksum is its
        // complement.
        assert_eq!(
            checksum(&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7]),
            !0xddf2
        );
    }

    #[test]
    fn every_frame_is_refused_by_ringfab_s_classifier_for_the_reason_it_names() {
        use ringfab::ip::parse::Local;
        use ringfab::ip::{classify, Frame, Ipv4Config, Verify};
        let l = Link {
            ringfab_mac: MacAddr([0x52, 0x54, 0, 0x12, 0x34, 0x03]),
            linux_mac: MacAddr([0x52, 0x54, 0, 0x12, 0x34, 0x0b]),
            ringfab_ip: Ipv4Addr::new(192, 0, 2, 1),
            linux_ip: Ipv4Addr::new(192, 0, 2, 2),
            broadcast_ip: Ipv4Addr::new(192, 0, 2, 255),
            port: 7000,
            bridged: false,
        };
        let local = Local {
            mac: l.ringfab_mac,
            ip: Ipv4Config {
                addr: l.ringfab_ip,
                prefix_len: 24,
                gateway: None,
            },
        };
        for m in malformed(&l) {
            // What the NIC delivers: at least 60 bytes (IEEE 802.3 §3.2.8, padded).
            let mut f = m.frame.clone();
            f.resize(f.len().max(60), 0);
            let got = classify(&f, &local, Verify::ALL);
            match (m.expect, got) {
                (Expect::Counted(r) | Expect::MaybeFiltered(r), Err(d)) if d == r => {}
                (Expect::Port, Ok(Frame::Udp(u))) if u.dst.port == DISCARD_PORT => {}
                (e, g) => panic!("{}: expected {e:?}, classified {g:?}", m.name),
            }
        }
    }
}
