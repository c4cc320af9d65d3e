//! `AnyNic` on the three emulated NICs — the driver picked by PCI ID, every call reaching it —
//! and on null devices whose PCI ID no driver (or another driver than the registers') claims.
mod common;
use common::{e1000e, igb, virtio_net, Make};

use std::sync::Arc;

use ringfab_emu::null::{DmaTable, NullKind, NullPlatform};
use ringfab_emu::{EmuPlatform, Igb82576, Kind, Wire};
use ringfab_hal::{Nic, Queue, Report, RxCompletion, RxConfig, RxError, RxQueue, TxConfig, Wait};
use ringfab_nic_suite::{drain_rx, drain_tx, frame, post, push_frame, BUF, MAC_A, MAC_B};
use ringfab_nics::{AnyNic, Driver, Error};

/// Opens a device of `make` through `AnyNic` and checks it landed on `driver`, with the
/// capabilities the driver itself reports for the same device.
fn opens_with<K: Kind>(make: Make<K>, driver: Driver) {
    let dev = make(MAC_A);
    let nic = AnyNic::open(dev.platform()).unwrap();
    assert_eq!(nic.driver(), driver);
    let (vendor, device) = nic.pci_id();
    assert!(driver.drives(vendor, device));
    // Debug is the driver's own: `Igb { .. }`, `E1000e { .. }`, `VirtioNet { .. }`.
    assert!(format!("{nic:?}").starts_with(&format!("{driver:?} ")));
    let caps = nic.capabilities();
    let direct = match driver {
        Driver::Igb => ringfab_igb::Igb::new(make(MAC_A).platform())
            .unwrap()
            .capabilities(),
        Driver::E1000e => ringfab_e1000e::E1000e::new(make(MAC_A).platform())
            .unwrap()
            .capabilities(),
        _ => ringfab_virtio_net::VirtioNet::new(make(MAC_A).platform())
            .unwrap()
            .capabilities(),
    };
    assert_eq!(caps, direct);
    assert_eq!(caps.mac, MAC_A);
    assert!(nic.link().up);
}

#[test]
fn open_picks_igb_for_the_emulated_82576() {
    opens_with(igb, Driver::Igb);
}

#[test]
fn open_picks_e1000e_for_the_emulated_82574() {
    opens_with(e1000e, Driver::E1000e);
}

#[test]
fn open_picks_virtio_net_for_the_emulated_virtio_net_device() {
    opens_with(virtio_net, Driver::VirtioNet);
}

/// Two devices of `make` on one wire, each opened through `AnyNic`.
fn pair<K: Kind>(make: Make<K>) -> (Wire, AnyNic<EmuPlatform>, AnyNic<EmuPlatform>) {
    let wire = Wire::new();
    let (a, b) = (make(MAC_A), make(MAC_B));
    a.connect(&wire);
    b.connect(&wire);
    let nic_a = AnyNic::open(a.platform()).unwrap();
    let nic_b = AnyNic::open(b.platform()).unwrap();
    (wire, nic_a, nic_b)
}

/// Frames from A to B through `AnyTx` and `AnyRx`: every token back once, every frame whole,
/// through `poll`, then `poll_each`, then `poll_each_split`; then a flush hands every remaining
/// buffer back.
fn frames_cross<K: Kind>(make: Make<K>) {
    let (wire, a, b) = pair(make);
    let mut tx = a.open_tx::<64>(0, TxConfig::default()).unwrap();
    let mut rx = b
        .open_rx::<64>(0, RxConfig::new(BUF as u32).with_interrupt(true))
        .unwrap();
    assert_eq!((tx.index(), tx.depth(), rx.depth()), (0, 64, 64));
    assert_eq!(rx.buf_len(), BUF as u32);
    assert!(rx.interrupt().is_some() && rx.interrupt_vector().is_some());
    rx.set_interrupt(true);
    let (tx_mem, rx_mem) = (
        a.alloc_dma(BUF * 64).unwrap(),
        b.alloc_dma(BUF * 64).unwrap(),
    );
    post(&mut rx, &rx_mem, 48);
    assert_eq!(rx.pending(), 48);
    let frames: Vec<Vec<u8>> = (0..16)
        .map(|i| frame(MAC_B, MAC_A, 100 + i, i as u8))
        .collect();
    for (i, f) in frames.iter().enumerate() {
        push_frame(&mut tx, &tx_mem, i, f, i as u64, Report::Always);
    }
    tx.doorbell();
    wire.run_until_idle();
    let sent = drain_tx(&mut tx);
    assert_eq!(sent.len(), 16);
    assert!(sent.iter().all(|c| c.status.is_ok()));
    let mut got = drain_rx(&mut rx, &rx_mem);
    got.sort_by_key(|(c, _)| c.token.0);
    assert_eq!(got.len(), 16);
    for ((c, bytes), f) in got.iter().zip(&frames) {
        assert_eq!(c.status, Ok(()));
        assert_eq!(&bytes[..f.len()], &f[..]);
    }
    assert!(
        rx.interrupt().unwrap().drain(),
        "the armed receive queue interrupted"
    );

    for i in 16..24 {
        let f = frame(MAC_B, MAC_A, 60, i as u8);
        push_frame(&mut tx, &tx_mem, i, &f, i as u64, Report::ErrorsOnly);
    }
    tx.doorbell();
    wire.run_until_idle();
    let mut each: Vec<RxCompletion> = Vec::new();
    let n = rx.poll_each(64, &mut |c| each.push(*c));
    assert_eq!((n, each.len()), (8, 8));
    assert!(each.iter().all(|c| c.status.is_ok()));
    assert_eq!(
        rx.poll_each_unhashed(64, &mut |_| panic!("nothing left")),
        0
    );
    assert!(
        drain_tx(&mut tx).iter().all(|c| c.status.is_ok()),
        "ErrorsOnly frames come back only if they fail"
    );

    // `poll_each_split`: `fast` takes three, declines the fourth, which goes to `slow` with
    // every one after it; each completion is handed out once.
    for i in 24..32 {
        let f = frame(MAC_B, MAC_A, 60, i as u8);
        push_frame(&mut tx, &tx_mem, i, &f, i as u64, Report::ErrorsOnly);
    }
    tx.doorbell();
    wire.run_until_idle();
    let (mut fast, mut slow) = (Vec::new(), Vec::new());
    let n = rx.poll_each_split(
        64,
        &mut |c| {
            fast.push(c.token.0);
            fast.len() <= 3
        },
        &mut |c| slow.push(c.token.0),
    );
    assert_eq!((n, fast.len(), slow.len()), (8, 4, 5));
    assert_eq!(fast[3], slow[0], "the declined completion goes to `slow`");
    let mut all: Vec<u64> = fast[..3].iter().chain(&slow).copied().collect();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), 8, "each completion once");
    assert_eq!(
        rx.poll_each_split(64, &mut |_| panic!("nothing left"), &mut |_| panic!()),
        0
    );
    drain_tx(&mut tx);

    rx.flush();
    let flushed = drain_rx(&mut rx, &rx_mem);
    assert_eq!(flushed.len(), 48 - 32);
    assert!(flushed
        .iter()
        .all(|(c, _)| c.status == Err(RxError::Flushed)));
    assert_eq!((rx.pending(), rx.fault(), rx.check()), (0, None, None));
    assert_eq!((a.stats().tx_packets, b.stats().rx_packets), (32, 32));
}

#[test]
fn frames_cross_between_two_82576_through_any_queues() {
    frames_cross(igb);
}

#[test]
fn frames_cross_between_two_82574_through_any_queues() {
    frames_cross(e1000e);
}

#[test]
fn frames_cross_between_two_virtio_net_devices_through_any_queues() {
    frames_cross(virtio_net);
}

/// A null device with the 82576's registers and PCI configuration dword `ID`.
struct WithId<const ID: u32>;

impl<const ID: u32> NullKind for WithId<ID> {
    type Mmio = <Igb82576 as NullKind>::Mmio;
    const BAR: u8 = 0;
    fn regs(dma: Arc<DmaTable>) -> Self::Mmio {
        Igb82576::regs(dma)
    }
    fn config_read32(offset: u16) -> u32 {
        if offset == 0 {
            ID
        } else {
            0
        }
    }
}

#[test]
fn an_unknown_pci_id_is_refused_with_its_vendor_and_device() {
    let err = AnyNic::open(NullPlatform::<WithId<0x5678_1234>>::new()).unwrap_err();
    assert_eq!(
        err,
        Error::NoDriver {
            vendor: 0x1234,
            device: 0x5678
        }
    );
    let text = err.to_string();
    assert!(
        text.starts_with("PCI 1234:5678 has no ringfab driver"),
        "{text}"
    );
    assert!(
        text.contains("igb: 8086:10c9") && text.contains("virtio-net: 1af4:1041"),
        "{text}"
    );
    assert_eq!(
        ringfab_hal::Error::from(err),
        ringfab_hal::Error::UnsupportedDevice {
            vendor: 0x1234,
            device: 0x5678
        }
    );
}

#[test]
fn another_82576_id_opens_with_igb() {
    let nic = AnyNic::open(NullPlatform::<WithId<0x10E8_8086>>::new()).unwrap();
    assert_eq!(nic.driver(), Driver::Igb);
    assert_eq!(nic.pci_id(), (0x8086, 0x10E8));
}

#[test]
fn a_failed_bring_up_names_the_driver_that_claimed_the_device() {
    // A virtio-net ID over Intel registers: virtio-net claims it and finds no virtio structures.
    let err = AnyNic::open(NullPlatform::<WithId<0x1041_1af4>>::new()).unwrap_err();
    let Error::Driver { driver, error } = err else {
        panic!("{err:?}");
    };
    assert_eq!(driver, Driver::VirtioNet);
    assert!(err
        .to_string()
        .starts_with("bringing up the NIC with the virtio-net driver: "));
    assert_eq!(ringfab_hal::Error::from(err), error);
}

#[test]
fn each_listed_id_belongs_to_its_own_driver_only() {
    for driver in Driver::ALL {
        assert!(!driver.pci_ids().is_empty());
        for &(vendor, device) in driver.pci_ids() {
            assert_eq!(Driver::for_id(vendor, device), Some(driver));
            let others = Driver::ALL.iter().filter(|d| d.drives(vendor, device));
            assert_eq!(others.count(), 1, "{vendor:04x}:{device:04x}");
        }
    }
    assert_eq!(
        Driver::for_id(0xffff, 0xffff),
        None,
        "a function that does not answer"
    );
    assert_eq!(
        Driver::ALL.map(|d| (d.name(), d.device())),
        [
            ("igb", "Intel 82576"),
            ("e1000e", "Intel 82574"),
            ("virtio-net", "virtio-net")
        ]
    );
}
