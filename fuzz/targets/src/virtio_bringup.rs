//! `virtio_bringup`: virtio-net bring-up (`VirtioNet::new`) against `ringfab-emu`'s
//! virtio-net-pci model whose device side comes from the fuzzer: the feature bits offered
//! (QEMU's offer with any bits flipped), the queue pairs it has and the `max_virtqueue_pairs`
//! it reports, `mtu`, the RSS limits in its configuration, the data queues' size, the
//! `device_status` bits it does not acknowledge (`FEATURES_OK`, `DRIVER_OK`, a reset that never
//! reads 0), a refused `FEATURES_OK`, control commands it refuses, link, event index,
//! indirect descriptors, ring reset, the IOMMU platform bit.
//!
//! Input: three bytes of flags, then the values they ask for (see [`config`]).
//!
//! Checked:
//! * no panic: bring-up either returns a NIC or one of the driver's named errors;
//! * a NIC brought up describes the device: its MAC, as many transmit as receive queues, at
//!   least one and no more than the device has, a maximum depth no larger than the device's
//!   queue size or the driver's limit;
//! * a NIC brought up works, or says why not by name: queue 0 of each direction opens (or
//!   refuses by name: a queue size below the depth asked for, a queue the device lacks) and a
//!   frame crosses the wire each way, byte for byte, with a well-behaved peer; checked where the
//!   device acknowledged `DRIVER_OK` and its link is up (else the frames need not arrive, and
//!   only the absence of panics is checked);
//! * the NIC and its queues close (drop) without a panic.

use ringfab_emu::{EmuVirtioNet, VirtioNetModelConfig, Wire};
use ringfab_hal::{Nic, Platform, Queue, Report, RxConfig, TxConfig};
use ringfab_nic_suite::{drain_rx, drain_tx, frame, post, push_frame, BUF, MAC_A, MAC_B};
use ringfab_virtio_net::{VirtioNet, MAX_DEPTH, MAX_QUEUE_PAIRS};

use crate::Bytes;

/// QEMU virtio-net-pci's offer with everything ringfab's driver and the model know about
/// (`mq=on`, `rss=on`, `host_mtu`, `iommu_platform=on`): bits 0–3, 5, 7–24 (the offloads, MAC,
/// the control queue and its classes, MQ, `NOTIFY_ON_EMPTY`), 27–29 (`ANY_LAYOUT`, indirect
/// descriptors, event index), 32, 33, 40 and 60 (`VERSION_1`, `ACCESS_PLATFORM`, `RING_RESET`,
/// RSS). What the fuzzer's mask flips bits of.
const OFFER: u64 = 0x1000_0103_39ff_ffaf;

/// `device_status` bits (virtio 1.2 §2.1).
const DRIVER_OK: u8 = 4;

/// The `virtio_bringup` target's body.
pub fn run(data: &[u8]) {
    let mut b = Bytes::new(data);
    let Some(cfg) = config(&mut b) else {
        return;
    };
    let wire = Wire::new();
    let dev = EmuVirtioNet::new(cfg);
    dev.connect(&wire);
    let nic = match VirtioNet::new(dev.platform()) {
        Ok(nic) => nic,
        Err(e) => {
            // A named error: the hal's `Error`, which formats.
            let _ = format!("{e:?} {e}");
            return;
        }
    };
    let caps = nic.capabilities();
    assert_eq!(caps.mac, cfg.mac);
    assert_eq!(caps.tx_queues, caps.rx_queues);
    assert!(
        (1..=MAX_QUEUE_PAIRS.min(cfg.queue_pairs)).contains(&caps.rx_queues),
        "{} queue pairs on a device with {}",
        caps.rx_queues,
        cfg.queue_pairs
    );
    assert!(caps.max_depth <= MAX_DEPTH.min(usize::from(cfg.queue_size)));
    let works = cfg.link && cfg.status_ignores & DRIVER_OK == 0;
    exchange(&wire, &nic, &dev, cfg, works);
}

/// A frame each way between the NIC under test and a well-behaved peer.
fn exchange(
    wire: &Wire,
    nic: &VirtioNet<ringfab_emu::EmuPlatform>,
    dev: &EmuVirtioNet,
    cfg: VirtioNetModelConfig,
    works: bool,
) {
    let mut pc = VirtioNetModelConfig::default();
    pc.mac = MAC_B;
    let peer_dev = EmuVirtioNet::new(pc);
    peer_dev.connect(wire);
    let peer = VirtioNet::new(peer_dev.platform()).expect("the well-behaved peer comes up");
    // Every receive queue, with buffers: on a multiqueue backend without RSS a frame may land
    // on any active pair.
    let opened = (0..nic.capabilities().rx_queues)
        .map(|i| nic.open_rx::<8>(i, RxConfig::new(BUF as u32)))
        .collect::<Result<Vec<_>, _>>();
    let (mut rxs, mut tx) = match (opened, nic.open_tx::<8>(0, TxConfig::default())) {
        (Ok(rxs), Ok(tx)) => (rxs, tx),
        (rx, tx) => {
            // Named refusals only: the queue size below 8, or no data queue.
            assert!(
                !works || cfg.queue_size < 8,
                "a queue refused on a device with queue size {}: {:?} {:?}",
                cfg.queue_size,
                rx.err(),
                tx.err()
            );
            return;
        }
    };
    let mut prx = peer.open_rx::<8>(0, RxConfig::new(BUF as u32)).unwrap();
    let mut ptx = peer.open_tx::<8>(0, TxConfig::default()).unwrap();
    let mem = dev.platform().alloc_dma(BUF * 8).unwrap();
    let rx_mem: Vec<_> = rxs
        .iter_mut()
        .map(|rx| {
            let m = dev.platform().alloc_dma(BUF * 8).unwrap();
            post(rx, &m, 4);
            m
        })
        .collect();
    let pmem = peer_dev.platform().alloc_dma(BUF * 8).unwrap();
    post(&mut prx, &pmem, 4);

    // Peer to the NIC under test.
    let to_nic = frame(cfg.mac, MAC_B, 100, 1);
    push_frame(&mut ptx, &pmem, 4, &to_nic, 10, Report::Always);
    ptx.doorbell();
    wire.run_until_idle();
    let got: Vec<_> = rxs
        .iter_mut()
        .zip(&rx_mem)
        .flat_map(|(rx, m)| drain_rx(rx, m))
        .collect();
    // The NIC under test to the peer.
    let to_peer = frame(MAC_B, cfg.mac, 80, 2);
    push_frame(&mut tx, &mem, 4, &to_peer, 11, Report::Always);
    tx.doorbell();
    wire.run_until_idle();
    let sent = drain_tx(&mut tx);
    let came = drain_rx(&mut prx, &pmem);
    if works {
        assert_eq!(got.len(), 1, "the peer's frame: {got:?}");
        assert_eq!((got[0].0.status, &got[0].1), (Ok(()), &to_nic));
        assert_eq!(sent.len(), 1);
        assert_eq!(sent[0].status, Ok(()));
        assert_eq!(came.len(), 1, "the NIC's frame at the peer");
        assert_eq!((came[0].0.status, &came[0].1), (Ok(()), &to_peer));
    }
    assert!(got.len() <= 1 && came.len() <= 1 && sent.len() <= 1);
    for rx in &mut rxs {
        rx.flush();
    }
    tx.flush();
}

/// The device the fuzzer describes; `None` when the bytes run out.
pub fn config(b: &mut Bytes<'_>) -> Option<VirtioNetModelConfig> {
    let (f1, f2, f3) = (b.u8()?, b.u8()?, b.u8()?);
    let mut c = VirtioNetModelConfig::default();
    c.mac = MAC_A;
    let bit = |f: u8, i: u32| f & (1 << i) != 0;
    if bit(f1, 0) {
        c.offered_features = Some(OFFER ^ b.u64()?);
    }
    if bit(f1, 1) {
        c.reported_pairs = Some(b.u16()?);
    }
    if bit(f1, 2) {
        c.mtu = Some(b.u16()?);
    }
    if bit(f1, 3) {
        c.rss_limits = Some((b.u8()?, b.u16()?, b.u32()?));
    }
    c.rss = bit(f1, 4);
    c.ctrl_refuses = bit(f1, 5);
    c.refuse_features_ok = bit(f1, 6);
    c.multiqueue_backend = bit(f1, 7);
    // QEMU's defaults are on: a set bit turns one off.
    c.event_idx = !bit(f2, 0);
    c.indirect_desc = !bit(f2, 1);
    c.ring_reset = !bit(f2, 2);
    c.iommu_platform = !bit(f2, 3);
    c.link = !bit(f2, 4);
    c.bus_master = !bit(f2, 5);
    c.queue_pairs = 1 + u16::from(f2 >> 6);
    if bit(f3, 0) {
        c.queue_size = b.u16()?;
    }
    if bit(f3, 1) {
        c.status_ignores = b.u8()?;
    }
    if bit(f3, 2) {
        c.status_after_reset = b.u8()?;
    }
    Some(c)
}
