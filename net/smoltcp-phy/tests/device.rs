//! The device under smoltcp's interface, driven directly through its tokens: frames read and
//! written in place, ARP and ICMP echo answered by the interface above it, a frame longer
//! than a buffer, a full transmit ring.

mod common;

use common::{Dev, Model, Pair, SERVER_IP, SOCKET_BUFFER};
use ringfab_emu::{DeviceFault, Ring};
use ringfab_smoltcp::echo::{EchoServer, SocketMemory};
use ringfab_smoltcp::{Config, RingDevice};
use smoltcp::iface::SocketStorage;
use smoltcp::phy::{ChecksumCapabilities, Device, RxToken, TxToken};
use smoltcp::time::Instant;
use smoltcp::wire::{
    ArpOperation, ArpPacket, ArpRepr, EthernetAddress, EthernetFrame, EthernetProtocol,
    EthernetRepr, Icmpv4Packet, Icmpv4Repr, IpProtocol, Ipv4Address, Ipv4Cidr, Ipv4Packet,
    Ipv4Repr,
};

const NOW: Instant = Instant::ZERO;

/// Sends `frame` through a transmit token, checking that smoltcp would write it straight into
/// one of the device's transmit buffers.
fn send_raw(dev: &mut Dev<'_>, frame: &[u8]) {
    let range = dev.tx_buffer_addrs();
    let token = dev.transmit(NOW).expect("a free transmit buffer");
    token.consume(frame.len(), |buf| {
        assert!(
            range.contains(&buf.as_ptr().addr())
                && range.contains(&(buf.as_ptr().addr() + buf.len() - 1)),
            "the transmit token's buffer lies in the device's transmit buffers"
        );
        buf.copy_from_slice(frame);
    });
}

/// The next frame through a receive token, checking that smoltcp would read it where the NIC
/// wrote it.
fn recv_raw(dev: &mut Dev<'_>) -> Option<Vec<u8>> {
    let range = dev.rx_buffer_addrs();
    let (rx, _tx) = dev.receive(NOW)?;
    Some(rx.consume(|frame| {
        assert!(
            range.contains(&frame.as_ptr().addr())
                && range.contains(&(frame.as_ptr().addr() + frame.len() - 1)),
            "the receive token's frame lies in the device's receive buffers"
        );
        frame.to_vec()
    }))
}

/// An Ethernet frame of `len` bytes from `src` to `dst` with a test EtherType and a payload
/// numbered from `seed`.
fn test_frame(dst: [u8; 6], src: [u8; 6], len: usize, seed: u8) -> Vec<u8> {
    let mut f = vec![0u8; len];
    f[..6].copy_from_slice(&dst);
    f[6..12].copy_from_slice(&src);
    f[12..14].copy_from_slice(&0x88b6u16.to_be_bytes()); // IEEE 802 local experimental
    for (i, b) in f[14..].iter_mut().enumerate() {
        *b = seed.wrapping_add(i as u8);
    }
    f
}

fn frames_cross_in_place(model: Model) {
    let pair = Pair::new(model);
    let (mut a, mut b) = pair.devices();
    // More frames than either ring holds, a few at a time: buffers are reused both ways.
    for round in 0..8u8 {
        let sent: Vec<Vec<u8>> = (0..16u8)
            .map(|i| test_frame(b.mac().0, a.mac().0, 60 + 90 * usize::from(i), round ^ i))
            .collect();
        for f in &sent {
            send_raw(&mut a, f);
        }
        pair.wire.run_until_idle();
        for f in &sent {
            assert_eq!(
                recv_raw(&mut b).as_ref(),
                Some(f),
                "{model:?} round {round}"
            );
        }
        assert_eq!(recv_raw(&mut b), None);
    }
    assert_eq!(a.counters().tx_bytes, b.counters().rx_bytes);
    assert_eq!(b.counters().rx_frames, 8 * 16);
}

#[test]
fn frames_are_written_and_read_in_place_on_igb() {
    frames_cross_in_place(Model::Igb);
}

#[test]
fn frames_are_written_and_read_in_place_on_e1000e() {
    frames_cross_in_place(Model::E1000e);
}

#[test]
fn frames_are_written_and_read_in_place_on_virtio_net() {
    frames_cross_in_place(Model::VirtioNet);
}

const CLIENT_IP: Ipv4Address = Ipv4Address::new(192, 0, 2, 1);

/// A raw device on A asks B's interface (an echo server's) who has the server's address,
/// then pings it: smoltcp answers both (RFC 826, RFC 792), through the device's tokens.
fn arp_and_icmp_echo_are_answered(model: Model) {
    let pair = Pair::new(model);
    let (mut a, mut b) = pair.devices();
    let (mac_a, mac_b) = (EthernetAddress(a.mac().0), EthernetAddress(b.mac().0));
    let mut slots = [SocketStorage::EMPTY; 1];
    let (mut rx, mut tx) = (vec![0u8; SOCKET_BUFFER], vec![0u8; SOCKET_BUFFER]);
    let memory = SocketMemory {
        sockets: &mut slots,
        rx: &mut rx,
        tx: &mut tx,
    };
    let mac = b.mac();
    let mut server = EchoServer::new(&mut b, mac, Ipv4Cidr::new(SERVER_IP, 24), 7, memory, NOW)
        .expect("making the server");

    // ARP request, broadcast.
    let arp = ArpRepr::EthernetIpv4 {
        operation: ArpOperation::Request,
        source_hardware_addr: mac_a,
        source_protocol_addr: CLIENT_IP,
        target_hardware_addr: EthernetAddress([0; 6]),
        target_protocol_addr: SERVER_IP,
    };
    let mut frame = vec![0u8; 14 + arp.buffer_len()];
    let mut eth = EthernetFrame::new_unchecked(&mut frame[..]);
    EthernetRepr {
        src_addr: mac_a,
        dst_addr: EthernetAddress::BROADCAST,
        ethertype: EthernetProtocol::Arp,
    }
    .emit(&mut eth);
    arp.emit(&mut ArpPacket::new_unchecked(eth.payload_mut()));
    send_raw(&mut a, &frame);
    pair.wire.run_until_idle();
    server.poll(&mut b, NOW);
    pair.wire.run_until_idle();
    let reply = recv_raw(&mut a).expect("an ARP reply");
    let eth = EthernetFrame::new_checked(&reply[..]).expect("an Ethernet frame");
    assert_eq!(eth.dst_addr(), mac_a, "{model:?}");
    assert_eq!(eth.ethertype(), EthernetProtocol::Arp);
    let arp = ArpRepr::parse(&ArpPacket::new_checked(eth.payload()).expect("an ARP packet"))
        .expect("ARP for IPv4 over Ethernet");
    assert_eq!(
        arp,
        ArpRepr::EthernetIpv4 {
            operation: ArpOperation::Reply,
            source_hardware_addr: mac_b,
            source_protocol_addr: SERVER_IP,
            target_hardware_addr: mac_a,
            target_protocol_addr: CLIENT_IP,
        },
        "{model:?}"
    );

    // ICMP echo request with 56 bytes of data, as ping sends.
    let caps = ChecksumCapabilities::default();
    let data: Vec<u8> = (0..56u8).collect();
    let icmp = Icmpv4Repr::EchoRequest {
        ident: 0x1616,
        seq_no: 1,
        data: &data,
    };
    let ip = Ipv4Repr {
        src_addr: CLIENT_IP,
        dst_addr: SERVER_IP,
        next_header: IpProtocol::Icmp,
        payload_len: icmp.buffer_len(),
        hop_limit: 64,
    };
    let mut frame = vec![0u8; 14 + ip.buffer_len() + icmp.buffer_len()];
    let mut eth = EthernetFrame::new_unchecked(&mut frame[..]);
    EthernetRepr {
        src_addr: mac_a,
        dst_addr: mac_b,
        ethertype: EthernetProtocol::Ipv4,
    }
    .emit(&mut eth);
    let mut packet = Ipv4Packet::new_unchecked(eth.payload_mut());
    ip.emit(&mut packet, &caps);
    icmp.emit(
        &mut Icmpv4Packet::new_unchecked(packet.payload_mut()),
        &caps,
    );
    send_raw(&mut a, &frame);
    pair.wire.run_until_idle();
    server.poll(&mut b, NOW);
    pair.wire.run_until_idle();
    let reply = recv_raw(&mut a).expect("an echo reply");
    let eth = EthernetFrame::new_checked(&reply[..]).expect("an Ethernet frame");
    assert_eq!(eth.ethertype(), EthernetProtocol::Ipv4, "{model:?}");
    let packet = Ipv4Packet::new_checked(eth.payload()).expect("an IPv4 packet");
    let ip = Ipv4Repr::parse(&packet, &caps).expect("a good IPv4 header");
    assert_eq!((ip.src_addr, ip.dst_addr), (SERVER_IP, CLIENT_IP));
    let icmp = Icmpv4Repr::parse(
        &Icmpv4Packet::new_checked(packet.payload()).expect("an ICMP packet"),
        &caps,
    )
    .expect("a good ICMP message");
    assert_eq!(
        icmp,
        Icmpv4Repr::EchoReply {
            ident: 0x1616,
            seq_no: 1,
            data: &data,
        },
        "{model:?}"
    );
    assert_eq!(recv_raw(&mut a), None, "{model:?}: nothing more");
}

#[test]
fn arp_and_icmp_echo_are_answered_on_igb() {
    arp_and_icmp_echo_are_answered(Model::Igb);
}

#[test]
fn arp_and_icmp_echo_are_answered_on_e1000e() {
    arp_and_icmp_echo_are_answered(Model::E1000e);
}

#[test]
fn arp_and_icmp_echo_are_answered_on_virtio_net() {
    arp_and_icmp_echo_are_answered(Model::VirtioNet);
}

/// A jumbo frame reaches a device whose buffers hold 2048 bytes: dropped and counted once,
/// every buffer it took posted again (the ring keeps taking frames), no panic.
fn frame_longer_than_a_buffer_is_dropped_and_counted(model: Model) {
    let pair = Pair::new(model);
    let mut jumbo = Config::default();
    jumbo.max_frame_len = 9014;
    jumbo.buf_len = 9216;
    let mut a: Dev<'_> = RingDevice::open(&pair.nic_a, &jumbo).expect("jumbo device on A");
    let mut b: Dev<'_> = RingDevice::open(&pair.nic_b, &Config::default()).expect("device on B");
    assert_eq!(a.max_frame_len(), 9014);
    assert_eq!(b.max_frame_len(), 1514);
    let (dst, src) = (b.mac().0, a.mac().0);
    for round in 0..3 * common::D {
        send_raw(&mut a, &test_frame(dst, src, 6000, round as u8));
        let small = test_frame(dst, src, 100, round as u8);
        send_raw(&mut a, &small);
        pair.wire.run_until_idle();
        assert_eq!(recv_raw(&mut b), Some(small), "{model:?} round {round}");
        assert_eq!(recv_raw(&mut b), None);
    }
    let c = b.counters();
    assert_eq!(c.rx_too_long, 3 * common::D as u64, "{model:?}: {c:?}");
    assert_eq!(c.rx_frames, 3 * common::D as u64, "{model:?}: {c:?}");
}

#[test]
fn frame_longer_than_a_buffer_is_dropped_and_counted_on_igb() {
    frame_longer_than_a_buffer_is_dropped_and_counted(Model::Igb);
}

#[test]
fn frame_longer_than_a_buffer_is_dropped_and_counted_on_e1000e() {
    frame_longer_than_a_buffer_is_dropped_and_counted(Model::E1000e);
}

#[test]
fn frame_longer_than_a_buffer_is_dropped_and_counted_on_virtio_net() {
    frame_longer_than_a_buffer_is_dropped_and_counted(Model::VirtioNet);
}

/// A device that holds its transmit write-backs back: the buffers run out, `transmit`
/// returns `None` (counted) instead of panicking or overwriting a buffer in flight, and once
/// the write-backs land the buffers are reclaimed and sending goes on.
fn full_transmit_ring_returns_none_until_reclaimed(model: Model) {
    let pair = Pair::new(model);
    let (mut a, mut b) = pair.devices();
    pair.emu_a.inject(DeviceFault::DelayWriteback {
        ring: Some(Ring::Tx(0)),
        count: usize::MAX,
        steps: 1,
    });
    let (dst, src) = (b.mac().0, a.mac().0);
    let mut sent = 0;
    while a.transmit(NOW).is_some() {
        send_raw(&mut a, &test_frame(dst, src, 64, sent as u8));
        sent += 1;
        assert!(sent <= common::D, "{model:?}: more frames than buffers");
    }
    assert!(sent > 0);
    assert!(a.counters().tx_ring_full > 0, "{model:?}");
    pair.wire.run_until_idle();
    pair.emu_a.run_until_idle(); // the held write-backs land
    pair.emu_a.clear_faults();
    assert!(
        a.transmit(NOW).is_some(),
        "{model:?}: buffers reclaimed after the write-backs"
    );
    let mut got = 0;
    while recv_raw(&mut b).is_some() {
        got += 1;
    }
    assert_eq!(got, sent, "{model:?}");
}

#[test]
fn full_transmit_ring_returns_none_until_reclaimed_on_igb() {
    full_transmit_ring_returns_none_until_reclaimed(Model::Igb);
}

#[test]
fn full_transmit_ring_returns_none_until_reclaimed_on_e1000e() {
    full_transmit_ring_returns_none_until_reclaimed(Model::E1000e);
}

#[test]
fn full_transmit_ring_returns_none_until_reclaimed_on_virtio_net() {
    full_transmit_ring_returns_none_until_reclaimed(Model::VirtioNet);
}
