//! TCP between two smoltcp interfaces on `RingDevice`s over two emulated NICs on one wire:
//! an echo of more than a window each way, checked byte for byte, on every NIC model, on a
//! clean wire and on a lossy one.

mod common;

use std::cell::Cell;

use common::{exchange, Dev, Model, Pair, CLIENT_IP, LIMIT, PORT, SERVER_IP, SOCKET_BUFFER};
use ringfab_emu::{CorruptMode, WireFault};
use ringfab_smoltcp::echo::{self, ClientState, EchoClient, ServeConfig, SocketMemory};
use ringfab_smoltcp::{Config, Counters, RingDevice};
use smoltcp::iface::SocketStorage;
use smoltcp::time::{Duration, Instant};
use smoltcp::wire::Ipv4Cidr;

/// 256 KiB: eight times the sockets' 32 KiB buffers, so the window fills and slides.
const BIG: u64 = 256 * 1024;

fn echo_of_256_kib_checked_byte_for_byte(model: Model) {
    let pair = Pair::new(model);
    let (mut a, mut b) = pair.devices();
    let out = exchange(&pair.wire, &mut a, &mut b, BIG, LIMIT, |_| {});
    assert_eq!(out.client, ClientState::Done, "{model:?}: {out:?}");
    assert_eq!(out.server.echoed, BIG, "{model:?}");
    assert_eq!(out.server.connections, 1, "{model:?}");
    // A clean wire: every completion was a good frame, none refused.
    for c in [out.counters_a, out.counters_b] {
        assert_eq!(
            c.rx_bad_frames
                + c.rx_too_long
                + c.rx_device_errors
                + c.tx_failed
                + c.tx_refused
                + c.tx_timeouts,
            0,
            "{model:?}: {c:?}"
        );
        assert!(c.rx_frames > BIG / 1460, "{model:?}: {c:?}");
    }
}

#[test]
fn echo_of_256_kib_checked_byte_for_byte_on_igb() {
    echo_of_256_kib_checked_byte_for_byte(Model::Igb);
}

#[test]
fn echo_of_256_kib_checked_byte_for_byte_on_e1000e() {
    echo_of_256_kib_checked_byte_for_byte(Model::E1000e);
}

#[test]
fn echo_of_256_kib_checked_byte_for_byte_on_virtio_net() {
    echo_of_256_kib_checked_byte_for_byte(Model::VirtioNet);
}

/// Frames dropped, corrupted (silently: a good CRC over a flipped byte, which smoltcp's
/// checksums catch; or with a bad CRC, which the NIC reports) and duplicated at random: TCP
/// retransmits and the echo still comes back whole.
fn echo_survives_a_lossy_wire(model: Model, mode: CorruptMode) {
    let pair = Pair::new(model);
    pair.wire.inject(WireFault::Random {
        seed: 16,
        drop_per_mille: 30,
        corrupt_per_mille: 30,
        duplicate_per_mille: 10,
        mode,
    });
    let (mut a, mut b) = pair.devices();
    let out = exchange(&pair.wire, &mut a, &mut b, BIG, LIMIT, |_| {});
    assert_eq!(out.client, ClientState::Done, "{model:?} {mode:?}: {out:?}");
    assert_eq!(out.server.echoed, BIG, "{model:?} {mode:?}");
    let stats = pair.wire.stats();
    assert!(stats.dropped > 0 && stats.corrupted > 0, "{stats:?}");
    if mode == CorruptMode::BadCrc {
        // The NIC flags the bad CRC and the device drops the frame before smoltcp sees it.
        let bad = out.counters_a.rx_bad_frames + out.counters_b.rx_bad_frames;
        assert!(bad > 0, "{model:?}: {out:?}");
    }
}

#[test]
fn echo_survives_a_lossy_wire_on_igb() {
    echo_survives_a_lossy_wire(Model::Igb, CorruptMode::Silent);
    echo_survives_a_lossy_wire(Model::Igb, CorruptMode::BadCrc);
}

#[test]
fn echo_survives_a_lossy_wire_on_e1000e() {
    echo_survives_a_lossy_wire(Model::E1000e, CorruptMode::Silent);
    echo_survives_a_lossy_wire(Model::E1000e, CorruptMode::BadCrc);
}

#[test]
fn echo_survives_a_lossy_wire_on_virtio_net() {
    echo_survives_a_lossy_wire(Model::VirtioNet, CorruptMode::Silent);
}

/// `echo::serve` — the server as a guest program runs it, on a NIC it is given — answers a
/// client on another NIC; the caller's `keep_going` drives the client and the wire and stops
/// the server once the client is done.
fn serve_answers_a_client(model: Model) {
    let pair = Pair::new(model);
    let mut a: Dev<'_> = RingDevice::open(&pair.nic_a, &Config::default()).expect("device A");
    let mut slots = [SocketStorage::EMPTY; 1];
    let (mut rx, mut tx) = (vec![0u8; SOCKET_BUFFER], vec![0u8; SOCKET_BUFFER]);
    let clock = Cell::new(Instant::ZERO);
    let mac_a = a.mac();
    let mut client = EchoClient::new(
        &mut a,
        mac_a,
        Ipv4Cidr::new(CLIENT_IP, 24),
        49152,
        (SERVER_IP, PORT),
        BIG,
        SocketMemory {
            sockets: &mut slots,
            rx: &mut rx,
            tx: &mut tx,
        },
        clock.get(),
    )
    .expect("making the client");
    let (mut state, mut server_device) = (ClientState::Connecting, Counters::default());
    let stats = echo::serve::<_, { common::D }>(
        &pair.nic_b,
        &ServeConfig::new(Ipv4Cidr::new(SERVER_IP, 24), PORT),
        || clock.get(),
        |_, device| {
            server_device = device.counters();
            state = client.poll(&mut a, clock.get());
            pair.wire.run_until_idle();
            clock.set(clock.get() + Duration::from_millis(1));
            !state.is_finished() && clock.get().total_millis() < 300_000
        },
    )
    .expect("serving");
    assert_eq!(state, ClientState::Done, "{model:?}");
    assert_eq!((stats.connections, stats.echoed), (1, BIG), "{model:?}");
    assert!(
        server_device.rx_frames > BIG / 1460,
        "{model:?}: {server_device:?}"
    );
}

#[test]
fn serve_answers_a_client_on_igb() {
    serve_answers_a_client(Model::Igb);
}

#[test]
fn serve_answers_a_client_on_e1000e() {
    serve_answers_a_client(Model::E1000e);
}

#[test]
fn serve_answers_a_client_on_virtio_net() {
    serve_answers_a_client(Model::VirtioNet);
}
