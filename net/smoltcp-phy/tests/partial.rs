//! TCP segments with a partial checksum, as virtio-net hands over those of a sender on the same
//! host (`VIRTIO_NET_HDR_F_NEEDS_CSUM`, virtio 1.2 §5.1.6.4): the device completes the checksum
//! before smoltcp, which sums every segment, checks it; a frame marked partial that it cannot
//! complete reaches smoltcp as it is and is dropped there.

mod common;

use common::{exchange, Pair, LIMIT, PORT, SERVER_IP, SOCKET_BUFFER};
use ringfab_emu::{EmuVirtioNet, VirtioNetModelConfig};
use ringfab_hal::{DmaRegion, MacAddr, Nic, Queue, Report, Token, TxConfig, TxQueue, TxSegment};
use ringfab_nics::AnyNic;
use ringfab_smoltcp::echo::{ClientState, EchoServer, SocketMemory};
use smoltcp::iface::SocketStorage;
use smoltcp::time::Instant;
use smoltcp::wire::Ipv4Cidr;

/// 256 KiB: eight times the sockets' buffers, so the window fills and slides.
const BIG: u64 = 256 * 1024;

/// virtio 1.2 §5.1.6.4.1: "the device MUST set the packet checksum stored in the receive
/// buffer to the TCP/UDP pseudo header" — so every segment either side receives fails
/// smoltcp's check as it arrives, and the echo completes only if each one's checksum is
/// completed first. The frames the model cannot make partial (ARP) carry the flag too and are
/// handed over as they are.
#[test]
fn tcp_echo_completes_when_every_segment_arrives_with_a_partial_checksum() {
    let pair = Pair::virtio_net_partial_checksums();
    let (mut a, mut b) = pair.devices();
    let out = exchange(&pair.wire, &mut a, &mut b, BIG, LIMIT, |_| {});
    assert_eq!(out.client, ClientState::Done, "{out:?}");
    assert_eq!(out.server.echoed, BIG);
    assert_eq!(out.server.connections, 1);
    for c in [out.counters_a, out.counters_b] {
        // Every TCP segment was completed; the ARP exchange was not (nothing to complete).
        assert!(c.rx_checksums_completed > BIG / 1460, "{c:?}");
        assert!(c.rx_checksums_completed < c.rx_frames, "{c:?}");
        assert_eq!(c.rx_bad_frames + c.rx_device_errors, 0, "{c:?}");
    }
}

/// An Ethernet/IPv4/TCP frame to the server, from a third host, its checksums right before the
/// edit `edit` makes it malformed.
fn malformed(dst: MacAddr, edit: impl Fn(&mut Vec<u8>)) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&dst.0);
    f.extend_from_slice(&[0x52, 0x54, 0, 0, 0, 0x0c]);
    f.extend_from_slice(&[0x08, 0x00]);
    let total: u16 = 20 + 20 + 4;
    f.extend_from_slice(&[0x45, 0]);
    f.extend_from_slice(&total.to_be_bytes());
    f.extend_from_slice(&[0, 1, 0x40, 0, 64, 6, 0, 0]);
    f.extend_from_slice(&[192, 0, 2, 3]);
    f.extend_from_slice(&SERVER_IP.octets());
    f.extend_from_slice(&40000u16.to_be_bytes());
    f.extend_from_slice(&PORT.to_be_bytes());
    f.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x02, 0x10, 0, 0, 0, 0, 0]);
    f.extend_from_slice(b"data");
    let mut sum = 0u32;
    for w in f[14..34].chunks(2) {
        sum += u32::from(u16::from_be_bytes([w[0], w[1]]));
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    f[24..26].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    edit(&mut f);
    f
}

/// Frames marked partial that are not an IPv4 TCP/UDP segment the device can complete — the
/// IPv4 header's lengths or the TCP header's data offset past what is there, a fragment — are
/// handed to smoltcp as they are: nothing completed, nothing panics, smoltcp drops them, and
/// the server then echoes a whole exchange. The model marks them `NEEDS_CSUM` as no faithful
/// device would (one "MUST validate the packet checksum"): a device that lies.
#[test]
fn a_malformed_frame_marked_partial_is_handed_over_as_it_is_and_dropped_without_a_panic() {
    let pair = Pair::virtio_net_partial_checksums();
    let (mut a, mut b) = pair.devices();
    let server_mac = b.mac();
    let frames = [
        // Total length past the frame.
        malformed(server_mac, |f| {
            f[16..18].copy_from_slice(&200u16.to_be_bytes())
        }),
        // IHL 4: a header shorter than the fixed one.
        malformed(server_mac, |f| f[14] = 0x44),
        // IHL past the total length.
        malformed(server_mac, |f| f[14] = 0x4f),
        // TCP data offset past the segment.
        malformed(server_mac, |f| f[46] = 0xf0),
        // More fragments follow.
        malformed(server_mac, |f| f[20] = 0x20),
        // Cut inside the TCP header (the IPv4 total length still says 44).
        malformed(server_mac, |f| f.truncate(14 + 20 + 10)),
    ];
    // A third NIC on the wire sends them.
    let mut c = VirtioNetModelConfig::default();
    c.mac = MacAddr([0x52, 0x54, 0, 0, 0, 0x0c]);
    let third = EmuVirtioNet::new(c);
    third.connect(&pair.wire);
    let nic = AnyNic::open(third.platform()).expect("bringing up the third NIC");
    let mut tx = nic
        .open_tx::<8>(0, TxConfig::default())
        .expect("its transmit queue");
    let mem = nic.alloc_dma(2048 * frames.len()).expect("its buffers");
    for (i, f) in frames.iter().enumerate() {
        mem.write_bytes(2048 * i, f);
        let seg = TxSegment {
            iova: mem.iova().checked_add(2048 * i as u64).unwrap(),
            len: f.len() as u16,
        };
        tx.push(&[seg], Token(i as u64), Report::Always)
            .expect("pushing a frame");
    }
    tx.doorbell();
    pair.wire.run_until_idle();

    // smoltcp's interface on the server's device takes them in.
    let mut slots = [SocketStorage::EMPTY; 1];
    let (mut rx_buf, mut tx_buf) = (vec![0u8; SOCKET_BUFFER], vec![0u8; SOCKET_BUFFER]);
    let memory = SocketMemory {
        sockets: &mut slots,
        rx: &mut rx_buf,
        tx: &mut tx_buf,
    };
    let mut server = EchoServer::new(
        &mut b,
        server_mac,
        Ipv4Cidr::new(SERVER_IP, 24),
        PORT,
        memory,
        Instant::ZERO,
    )
    .expect("making the server");
    server.poll(&mut b, Instant::ZERO);
    let counters = b.counters();
    assert_eq!(counters.rx_frames, frames.len() as u64, "{counters:?}");
    assert_eq!(counters.rx_checksums_completed, 0, "{counters:?}");
    assert_eq!(server.stats().connections, 0, "nothing opened a connection");
    drop(server);

    // The devices carry a whole exchange after them.
    let out = exchange(&pair.wire, &mut a, &mut b, BIG, LIMIT, |_| {});
    assert_eq!(out.client, ClientState::Done, "{out:?}");
    assert_eq!(out.server.echoed, BIG);
}
