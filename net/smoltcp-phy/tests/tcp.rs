//! TCP between two smoltcp interfaces on `RingDevice`s over two emulated NICs on one wire:
//! an echo of more than a window each way, checked byte for byte, on every NIC model, on a
//! clean wire and on a lossy one.

mod common;

use common::{exchange, Model, Pair, LIMIT};
use ringfab_emu::{CorruptMode, WireFault};
use ringfab_smoltcp::echo::ClientState;

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
            c.rx_bad_frames + c.rx_too_long + c.rx_device_errors + c.tx_failed + c.tx_refused,
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
