//! The driver against `ringfab-emu`'s virtio-net-pci model, where virtio has its own rules:
//! bring-up and feature negotiation, what `push` refuses, interrupts and notification
//! suppression, flush and close as queue resets, the receive filter, device reset. The tests
//! every NIC passes (frames across the wire, flush, faults, link, interrupts) are the suite's
//! (`tests/suite.rs`).

mod fixture;

use fixture::{config, device_with, pair, pair_with, VirtioNetFixture};
use ringfab_emu::{EmuVirtioNet, Wire};
use ringfab_hal::{
    DmaRegion, Error, Iova, MacAddr, Nic, Platform, Queue, Report, RxConfig, RxError, RxMode,
    RxQueue, Token, TxConfig, TxError, TxQueue, TxSegment, Wait,
};
use ringfab_nic_suite::{
    drain_rx, drain_tx, frame, post, push_frame, rx_buf, send_all, Pair, MAC_A, MAC_B,
};
use ringfab_virtio_net::VirtioNet;

/// Feature bits the tests look for (virtio 1.2 §5.1.3, §6).
const F_MQ: u64 = 1 << 22;
const F_EVENT_IDX: u64 = 1 << 29;
const F_VERSION_1: u64 = 1 << 32;
const F_ACCESS_PLATFORM: u64 = 1 << 33;
const F_RING_RESET: u64 = 1 << 40;
const F_CSUM: u64 = 1 << 0;
const F_GUEST_CSUM: u64 = 1 << 1;
const F_GUEST_TSO4: u64 = 1 << 7;
const F_HOST_TSO4: u64 = 1 << 11;
const F_MRG_RXBUF: u64 = 1 << 15;
/// Device status: ACKNOWLEDGE | DRIVER | FEATURES_OK | DRIVER_OK, FAILED, NEEDS_RESET.
const S_RUNNING: u8 = 1 | 2 | 8 | 4;
const S_FAILED: u8 = 0x80;
const S_NEEDS_RESET: u8 = 0x40;

#[test]
fn bring_up_negotiates_the_required_features_and_reads_the_mac() {
    let wire = Wire::new();
    let dev = device_with(config(MAC_A), &wire);
    let nic = VirtioNet::new(dev.platform()).expect("bring-up");
    let caps = nic.capabilities();
    assert_eq!(caps.mac, MAC_A);
    assert!(!caps.in_order_completion, "a virtqueue completes by id");
    assert_eq!((caps.tx_queues, caps.rx_queues), (1, 1));
    assert_eq!(caps.max_depth, 256, "QEMU's default queue size");
    assert!(caps.rss.is_none(), "QEMU offers no RSS by default");
    let f = nic.features();
    for bit in [F_VERSION_1, F_ACCESS_PLATFORM, F_RING_RESET, F_EVENT_IDX] {
        assert_ne!(f & bit, 0, "{bit:#x} negotiated");
    }
    assert_eq!(
        f & (F_CSUM | F_GUEST_CSUM),
        F_CSUM | F_GUEST_CSUM,
        "checksum offloads on"
    );
    assert_eq!(
        f & (F_GUEST_TSO4 | F_HOST_TSO4 | F_MRG_RXBUF),
        0,
        "segmentation offloads and merged buffers stay off"
    );
    let offloads = caps.offloads;
    assert!(offloads.tx_l4_checksum && offloads.rx_l4_checksum);
    assert!(
        !offloads.rx_ipv4_checksum,
        "DATA_VALID says nothing of the IPv4 header"
    );
    assert_eq!(f & F_MQ, 0, "one queue pair: MQ not offered");
    assert_eq!(dev.device_status(), S_RUNNING);
    assert!(nic.link().up);
    assert!(!nic.needs_reset());
}

#[test]
fn a_device_that_refuses_features_ok_fails_bring_up_and_is_marked_failed() {
    let mut c = config(MAC_A);
    c.refuse_features_ok = true;
    let dev = EmuVirtioNet::new(c);
    let err = VirtioNet::new(dev.platform()).unwrap_err();
    assert_eq!(err, Error::FeaturesRefused { missing: 0 });
    assert_eq!(dev.device_status() & S_FAILED, S_FAILED);
    assert_eq!(dev.device_status() & 8, 0, "FEATURES_OK never set");
}

/// Issue 14 item 8: `max_virtqueue_pairs` may be 0x8000 (virtio 1.2 §5.1.4), which puts the
/// control queue at virtqueue 0x10000 (§5.1.2) — beyond any 16-bit `queue_select`; a device
/// may also report more. Bring-up refuses it by name (it used to overflow `2 * pairs`: a
/// panic with overflow checks, the control queue on receive queue 0's virtqueue without).
#[test]
fn a_control_queue_index_beyond_the_device_fails_bring_up_by_name_without_a_panic() {
    for reported in [0x8000, 0x8001, 0xFFFF, 2] {
        let mut c = config(MAC_A);
        c.reported_pairs = Some(reported);
        let dev = EmuVirtioNet::new(c);
        let err = VirtioNet::new(dev.platform()).unwrap_err();
        assert_eq!(
            err,
            Error::ControlQueueIndex {
                pairs: reported,
                queues: 3
            },
            "max_virtqueue_pairs {reported:#x}"
        );
        assert_eq!(dev.device_status() & S_FAILED, S_FAILED);
    }
}

#[test]
fn a_device_without_access_platform_or_ring_reset_is_refused_by_name() {
    let mut c = config(MAC_A);
    c.iommu_platform = false;
    c.ring_reset = false;
    let dev = EmuVirtioNet::new(c);
    let err = VirtioNet::new(dev.platform()).unwrap_err();
    assert_eq!(
        err,
        Error::FeaturesRefused {
            missing: F_ACCESS_PLATFORM | F_RING_RESET
        }
    );
    assert_eq!(dev.device_status() & S_FAILED, S_FAILED);
}

#[test]
fn a_device_without_event_idx_is_driven_with_the_ring_flags() {
    let mut ca = config(MAC_A);
    ca.event_idx = false;
    let mut cb = config(MAC_B);
    cb.event_idx = false;
    let p = pair_with(ca, cb);
    assert_eq!(p.nic_a.features() & F_EVENT_IDX, 0);
    let mut rx = p.nic_b.open_rx::<16>(0, RxConfig::new(2048)).unwrap();
    let mem = p.nic_b.platform().alloc_dma(2048 * 16).unwrap();
    post(&mut rx, &mem, 8);
    let frames: Vec<_> = (0..5)
        .map(|i| frame(MAC_B, MAC_A, 60 + i, i as u8))
        .collect();
    send_all(&p, &frames);
    let got = drain_rx(&mut rx, &mem);
    assert_eq!(got.len(), 5);
    for (c, bytes) in &got {
        assert_eq!(c.status, Ok(()));
        assert_eq!(bytes, &frames[c.token.0 as usize]);
    }
}

#[test]
fn push_refuses_what_the_ring_or_the_device_cannot_take() {
    let p = pair();
    let mut tx = p.nic_a.open_tx::<4>(0, TxConfig::default()).unwrap();
    let mem = p.nic_a.platform().alloc_dma(4096).unwrap();
    let seg = TxSegment {
        iova: mem.iova(),
        len: 60,
    };
    assert!(tx.push(&[], Token(0), Report::Always).is_err());
    assert!(
        tx.push(&[seg; 8], Token(0), Report::Always).is_err(),
        "8 > 7 segments"
    );
    let empty = TxSegment {
        iova: mem.iova(),
        len: 0,
    };
    assert!(tx.push(&[seg, empty], Token(0), Report::Always).is_err());
    for t in 0..4 {
        tx.push(&[seg], Token(t), Report::Always).unwrap();
    }
    assert_eq!(tx.free(), 0, "every descriptor id is one frame");
    assert!(matches!(
        tx.push(&[seg], Token(9), Report::Always),
        Err(ringfab_hal::PushError::Full { .. })
    ));
    let mut rx = p.nic_b.open_rx::<4>(0, RxConfig::new(1500)).unwrap();
    let short = ringfab_hal::RxBuffer {
        iova: mem.iova(),
        len: 1499,
    };
    assert!(matches!(
        rx.push(short, Token(0)),
        Err(ringfab_hal::PushError::BufferTooSmall {
            len: 1499,
            min: 1500
        })
    ));
    assert!(
        p.nic_a.open_tx::<4>(0, TxConfig::default()).is_err(),
        "in use"
    );
    assert!(matches!(
        p.nic_a.open_tx::<4>(1, TxConfig::default()),
        Err(Error::QueueIndex { index: 1, count: 1 })
    ));
    assert!(matches!(
        p.nic_b.open_rx::<2048>(0, RxConfig::new(1500)),
        Err(Error::QueueDepth { depth: 2048, .. })
    ));
}

#[test]
fn receive_interrupt_notifies_when_armed_and_stays_quiet_when_disarmed() {
    let p = pair();
    let v = 1;
    let mut rx = p
        .nic_b
        .open_rx::<16>(0, RxConfig::new(2048).with_vector(v))
        .unwrap();
    assert_eq!(rx.interrupt_vector(), Some(v));
    let mem = p.nic_b.platform().alloc_dma(2048 * 16).unwrap();
    post(&mut rx, &mem, 16);
    let wait = rx.interrupt().expect("opened with an interrupt").clone();
    let irq = p.b.vector(v).unwrap();
    // QEMU's virtio_should_notify sends the first interrupt after a queue reset whatever
    // used_event says (signalled_used_valid is false): one, however the queue is armed.
    send_all(&p, &[frame(MAC_B, MAC_A, 60, 0)]);
    assert_eq!(
        irq.notifications(),
        1,
        "the first used entry always interrupts"
    );
    assert_eq!(drain_rx(&mut rx, &mem).len(), 1);
    let base = irq.notifications();
    // Disarmed (as opened): frames arrive, no interrupt.
    send_all(&p, &[frame(MAC_B, MAC_A, 60, 1)]);
    assert_eq!(
        irq.notifications(),
        base,
        "a disarmed queue does not interrupt"
    );
    assert_eq!(drain_rx(&mut rx, &mem).len(), 1);
    // Armed: the next frame interrupts once, and the handle is the NIC's vector handle.
    rx.set_interrupt(true);
    send_all(&p, &[frame(MAC_B, MAC_A, 60, 2)]);
    assert_eq!(irq.notifications(), base + 1);
    assert!(wait.drain(), "the queue's handle saw it");
    // Still armed after a poll: the next one interrupts again.
    assert_eq!(drain_rx(&mut rx, &mem).len(), 1);
    send_all(&p, &[frame(MAC_B, MAC_A, 60, 3)]);
    assert_eq!(irq.notifications(), base + 2);
    assert!(p.nic_b.irq(v).unwrap().drain());
    // Disarmed again: quiet.
    assert_eq!(drain_rx(&mut rx, &mem).len(), 1);
    rx.set_interrupt(false);
    send_all(
        &p,
        &[frame(MAC_B, MAC_A, 60, 4), frame(MAC_B, MAC_A, 60, 5)],
    );
    assert_eq!(irq.notifications(), base + 2);
    assert_eq!(drain_rx(&mut rx, &mem).len(), 2);
    assert!(matches!(
        p.nic_b.irq(p.nic_b.irq_vectors()),
        Err(Error::InterruptUnavailable { .. })
    ));
}

#[test]
fn transmit_completion_interrupt_fires_on_the_steered_vector_when_armed() {
    let p = pair();
    let v = 3;
    let mut tx = p.nic_a.open_tx::<8>(0, TxConfig::with_vector(v)).unwrap();
    assert_eq!(tx.interrupt_vector(), Some(v));
    let mem = p.nic_a.platform().alloc_dma(2048 * 8).unwrap();
    let irq = p.a.vector(v).unwrap();
    // The first used entry after the queue's reset interrupts (QEMU's first-notify rule).
    push_frame(
        &mut tx,
        &mem,
        0,
        &frame(MAC_B, MAC_A, 60, 0),
        0,
        Report::Always,
    );
    tx.doorbell();
    assert_eq!(irq.notifications(), 1);
    push_frame(
        &mut tx,
        &mem,
        1,
        &frame(MAC_B, MAC_A, 60, 1),
        1,
        Report::Always,
    );
    tx.doorbell();
    assert_eq!(irq.notifications(), 1, "disarmed");
    assert_eq!(drain_tx(&mut tx).len(), 2);
    tx.set_interrupt(true);
    push_frame(
        &mut tx,
        &mem,
        2,
        &frame(MAC_B, MAC_A, 60, 2),
        2,
        Report::Always,
    );
    tx.doorbell();
    assert_eq!(irq.notifications(), 2, "armed");
    drop(tx);
    assert!(matches!(
        p.nic_a.open_tx::<8>(0, TxConfig::with_vector(99)),
        Err(Error::InterruptUnavailable { vector: 99 })
    ));
}

#[test]
fn receive_doorbells_notify_only_when_the_device_asks() {
    let p = pair();
    let mut rx = p.nic_b.open_rx::<64>(0, RxConfig::new(2048)).unwrap();
    let mem = p.nic_b.platform().alloc_dma(2048 * 64).unwrap();
    let vq = 0; // receive queue of pair 0
    let notifies = |p: &Pair<VirtioNetFixture>| p.b.notifications(vq);
    let mut next = 0u64;
    let mut give = |rx: &mut ringfab_virtio_net::VirtioNetRx<'_, _, 64>, n: usize| {
        for _ in 0..n {
            rx.push(rx_buf(&mem, next as usize % 64), Token(next))
                .unwrap();
            next += 1;
        }
        rx.doorbell();
    };
    // The device has taken nothing yet: avail_event is 0, crossed by the first batch.
    give(&mut rx, 4);
    assert_eq!(notifies(&p), 1, "first batch crosses avail_event 0");
    // The device still has buffers it has not taken: no notification.
    give(&mut rx, 4);
    assert_eq!(
        notifies(&p),
        1,
        "suppressed: the device is behind the driver"
    );
    // Frames take buffers; QEMU moves avail_event to what it has taken at every pop. Taking
    // some of them leaves the event behind the next batch: still no notification.
    let frames: Vec<_> = (0..3).map(|i| frame(MAC_B, MAC_A, 60, i)).collect();
    send_all(&p, &frames);
    give(&mut rx, 1);
    assert_eq!(notifies(&p), 1, "the device has not caught up");
    // Once it has taken every buffer, the next batch crosses its avail_event: one
    // notification, then quiet again.
    let frames: Vec<_> = (0..6).map(|i| frame(MAC_B, MAC_A, 60, 10 + i)).collect();
    send_all(&p, &frames);
    give(&mut rx, 1);
    assert_eq!(notifies(&p), 2, "caught up: it asked to be told");
    give(&mut rx, 1);
    assert_eq!(notifies(&p), 2);
    assert_eq!(drain_rx(&mut rx, &mem).len(), 9);
}

#[test]
fn flush_gives_back_unfilled_buffers_flushed_and_filled_ones_with_their_frame() {
    let p = pair();
    let mut rx = p.nic_b.open_rx::<16>(0, RxConfig::new(2048)).unwrap();
    let mem = p.nic_b.platform().alloc_dma(2048 * 16).unwrap();
    post(&mut rx, &mem, 6);
    send_all(
        &p,
        &[frame(MAC_B, MAC_A, 80, 1), frame(MAC_B, MAC_A, 80, 2)],
    );
    rx.flush();
    let got = drain_rx(&mut rx, &mem);
    assert_eq!(got.len(), 6);
    let ok: Vec<_> = got.iter().filter(|(c, _)| c.status.is_ok()).collect();
    assert_eq!(ok.len(), 2, "{got:?}");
    assert!(got
        .iter()
        .filter(|(c, _)| c.status.is_err())
        .all(|(c, _)| c.status == Err(RxError::Flushed) && c.len == 0));
    let mut tokens: Vec<_> = got.iter().map(|(c, _)| c.token.0).collect();
    tokens.sort_unstable();
    assert_eq!(tokens, (0..6).collect::<Vec<_>>());
    // The queue runs again after the flush.
    post(&mut rx, &mem, 3);
    send_all(&p, &[frame(MAC_B, MAC_A, 80, 3)]);
    let again = drain_rx(&mut rx, &mem);
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].1, frame(MAC_B, MAC_A, 80, 3));

    // Transmit: frames pushed and not rung come back flushed.
    let mut tx = p.nic_a.open_tx::<8>(0, TxConfig::default()).unwrap();
    let tmem = p.nic_a.platform().alloc_dma(2048 * 8).unwrap();
    for i in 0..3u64 {
        push_frame(
            &mut tx,
            &tmem,
            i as usize,
            &frame(MAC_B, MAC_A, 60, 9),
            i,
            Report::Always,
        );
    }
    tx.flush();
    let done = drain_tx(&mut tx);
    assert_eq!(done.len(), 3);
    assert!(done.iter().all(|c| c.status == Err(TxError::Flushed)));
    assert_eq!(tx.pending(), 0);
}

#[test]
fn the_receive_filter_takes_own_unicast_and_broadcast_and_promiscuous_takes_all() {
    let p = pair();
    let mut rx = p.nic_b.open_rx::<16>(0, RxConfig::new(2048)).unwrap();
    let mem = p.nic_b.platform().alloc_dma(2048 * 16).unwrap();
    post(&mut rx, &mem, 16);
    let other = MacAddr([0x52, 0x54, 0, 0, 0, 0x0C]);
    let multicast = MacAddr([0x01, 0, 0x5e, 0, 0, 1]);
    send_all(
        &p,
        &[
            frame(other, MAC_A, 60, 1),
            frame(MAC_B, MAC_A, 60, 2),
            frame(MacAddr::BROADCAST, MAC_A, 60, 3),
            frame(multicast, MAC_A, 60, 4),
        ],
    );
    let got = drain_rx(&mut rx, &mem);
    let seeds: Vec<_> = got.iter().map(|(_, b)| b[14..].to_vec()).collect();
    assert_eq!(got.len(), 2, "own unicast and broadcast only");
    assert_eq!(seeds[0], frame(MAC_B, MAC_A, 60, 2)[14..]);
    p.nic_b.set_rx_mode(RxMode::PROMISCUOUS).unwrap();
    send_all(
        &p,
        &[frame(other, MAC_A, 60, 5), frame(multicast, MAC_A, 60, 6)],
    );
    assert_eq!(drain_rx(&mut rx, &mem).len(), 2);
}

#[test]
fn the_link_follows_the_cable_and_a_device_reset_brings_the_device_back() {
    let p = pair();
    assert!(p.nic_a.link().up);
    p.a.set_link(false);
    assert!(!p.nic_a.link().up);
    p.a.set_link(true);
    assert!(p.nic_a.link().up);
    {
        let _tx = p.nic_a.open_tx::<8>(0, TxConfig::default()).unwrap();
        assert_eq!(p.nic_a.reset(), Err(Error::QueuesOpen));
    }
    p.nic_a.reset().unwrap();
    assert_eq!(p.a.device_status(), S_RUNNING);
    let mut rx = p.nic_b.open_rx::<8>(0, RxConfig::new(2048)).unwrap();
    let mem = p.nic_b.platform().alloc_dma(2048 * 8).unwrap();
    post(&mut rx, &mem, 4);
    send_all(&p, &[frame(MAC_B, MAC_A, 60, 7)]);
    assert_eq!(drain_rx(&mut rx, &mem).len(), 1);
}

/// The suite's `iommu` section checks the faults and the recovery; this checks how virtio
/// says a device must be reset.
#[test]
fn a_dma_fault_sets_device_needs_reset_and_a_device_reset_clears_it() {
    let p = pair();
    {
        let mut tx = p.nic_a.open_tx::<8>(0, TxConfig::default()).unwrap();
        let seg = TxSegment {
            iova: Iova(0x10),
            len: 60,
        };
        tx.push(&[seg], Token(1), Report::Always).unwrap();
        tx.doorbell();
        // QEMU's virtio_error: the device stops and asks for a reset.
        assert!(p.nic_a.needs_reset());
        assert_eq!(p.a.device_status() & S_NEEDS_RESET, S_NEEDS_RESET);
        tx.flush();
        assert!(p.nic_a.needs_reset(), "a queue reset is not enough");
    }
    p.nic_a.reset().unwrap();
    assert!(!p.nic_a.needs_reset());
    assert_eq!(p.a.device_status(), S_RUNNING);
}
#[test]
fn closing_a_queue_resets_it_on_the_device_before_its_memory_goes() {
    let p = pair();
    let mem = p.nic_b.platform().alloc_dma(2048 * 8).unwrap();
    {
        let mut rx = p.nic_b.open_rx::<8>(0, RxConfig::new(2048)).unwrap();
        post(&mut rx, &mem, 8);
    }
    // The closed queue's ring is gone: a frame finds no queue, and no DMA faults.
    send_all(&p, &[frame(MAC_B, MAC_A, 60, 1)]);
    assert_eq!(p.b.iommu_faults(), vec![]);
    let mut rx = p.nic_b.open_rx::<8>(0, RxConfig::new(2048)).unwrap();
    post(&mut rx, &mem, 8);
    send_all(&p, &[frame(MAC_B, MAC_A, 60, 2)]);
    let got = drain_rx(&mut rx, &mem);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].1, frame(MAC_B, MAC_A, 60, 2));
}

/// The model's knobs for a hostile device's configuration and status handling
/// (`VirtioNetModelConfig`, which the `virtio_bringup` fuzz target drives): each fails
/// bring-up by name, or bring-up copes.
#[test]
fn a_device_that_does_not_acknowledge_its_status_or_commands_fails_bring_up_by_name() {
    let mut c = config(MAC_A);
    c.status_after_reset = 1;
    let err = VirtioNet::new(EmuVirtioNet::new(c).platform()).unwrap_err();
    assert_eq!(err, Error::ResetTimeout, "a reset that never reads 0");

    let mut c = config(MAC_A);
    c.status_ignores = 8;
    let dev = EmuVirtioNet::new(c);
    let err = VirtioNet::new(dev.platform()).unwrap_err();
    assert_eq!(
        err,
        Error::FeaturesRefused { missing: 0 },
        "FEATURES_OK never stored"
    );
    assert_eq!(dev.device_status() & S_FAILED, S_FAILED);

    let mut c = config(MAC_A);
    c.ctrl_refuses = true;
    let err = VirtioNet::new(EmuVirtioNet::new(c).platform()).unwrap_err();
    assert!(
        matches!(err, Error::DeviceCommand { .. }),
        "the receive filter's command refused: {err:?}"
    );

    let mut c = config(MAC_A);
    c.offered_features = Some(F_VERSION_1 | F_ACCESS_PLATFORM | F_RING_RESET);
    let err = VirtioNet::new(EmuVirtioNet::new(c).platform()).unwrap_err();
    assert_eq!(
        err,
        Error::FeaturesRefused {
            missing: 1 << 28 // INDIRECT_DESC
        }
    );
}

#[test]
fn a_device_with_small_queues_or_an_mtu_comes_up_and_refuses_deeper_rings_by_name() {
    let mut c = config(MAC_A);
    c.queue_size = 4;
    c.mtu = Some(1500);
    let nic = VirtioNet::new(EmuVirtioNet::new(c).platform()).expect("bring-up");
    assert_eq!(nic.capabilities().max_depth, 4);
    assert_eq!(nic.features() & 1 << 3, 0, "VIRTIO_NET_F_MTU is not taken");
    assert!(matches!(
        nic.open_rx::<8>(0, RxConfig::new(2048)).err(),
        Some(Error::QueueDepth { depth: 8, .. })
    ));
    assert!(nic.open_rx::<4>(0, RxConfig::new(2048)).is_ok());
}

/// A received frame whose header says `NEEDS_CSUM` came from a sender on the same host that
/// left the UDP checksum partial (virtio 1.2 §5.1.6.4): its checksum field holds only the
/// pseudo-header's sum, so it must not be taken for a wrong checksum — the driver marks it
/// verified (as Linux takes `CHECKSUM_PARTIAL`) and partial (the field is not the checksum),
/// and delivers it as it is. The flag is played by the model's header fault, which ORs it into
/// the header.
#[test]
fn a_received_frame_with_a_partial_checksum_is_marked_verified_not_wrong() {
    use ringfab_emu::{DeviceFault, Ring};
    use ringfab_nic_suite::{udp_frame, Udp};
    let p: Pair<VirtioNetFixture> = pair();
    let mut rx = p.nic_b.open_rx::<16>(0, RxConfig::new(2048)).unwrap();
    let mem = p.b.platform().alloc_dma(2048 * 4).unwrap();
    post(&mut rx, &mem, 2);
    // UDP checksum field: the pseudo-header's sum, as a local sender leaves it.
    let mut partial = udp_frame(MAC_B, MAC_A, Udp::ports(7, 9), b"partial");
    partial[40..42].copy_from_slice(&0x2233u16.to_be_bytes());
    p.b.inject(DeviceFault::GarbageStatus {
        ring: Some(Ring::Rx(0)),
        count: 1,
        bits: 0x0001,
    });
    send_all(&p, &[partial.clone()]);
    // The same frame without the flag: a wrong checksum, unmarked (software drops it).
    send_all(&p, &[partial.clone()]);
    let got = drain_rx(&mut rx, &mem);
    assert_eq!(got.len(), 2);
    let (flagged, plain) = (&got[0], &got[1]);
    assert_eq!(flagged.0.status, Ok(()));
    assert_eq!(
        &flagged.1[..partial.len()],
        &partial[..],
        "delivered as it is"
    );
    let marks = flagged.0.checksum;
    assert!(marks.l4_good() && marks.l4_partial() && !marks.ipv4_good());
    assert_eq!(plain.0.status, Ok(()));
    assert!(!plain.0.checksum.l4_good() && !plain.0.checksum.l4_partial());
}

/// The ones' complement sum of `data` (RFC 1071), folded, not complemented.
fn ones_sum(data: &[u8], mut sum: u32) -> u16 {
    for w in data.chunks(2) {
        sum += u32::from(u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)]));
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// The sum of RFC 768's pseudo-header of the IPv4 packet in `f` (an Ethernet frame, no
/// options): source, destination, zero, protocol, the IP payload's length.
fn pseudo_header_sum(f: &[u8]) -> u16 {
    let total = u16::from_be_bytes([f[16], f[17]]);
    let mut pseudo = f[26..34].to_vec();
    pseudo.extend_from_slice(&[0, f[23]]);
    pseudo.extend_from_slice(&(total - 20).to_be_bytes());
    ones_sum(&pseudo, 0)
}

/// With the model playing a sender on the same host whose checksum offload is on
/// (`partial_checksums`), a UDP datagram with a right checksum arrives as virtio 1.2
/// §5.1.6.4.1 has the device hand it over — "the device MUST set the packet checksum stored in
/// the receive buffer to the TCP/UDP pseudo header" — and the completion says so: verified and
/// partial. Summing from the UDP header to the end and storing the complement restores the
/// sender's checksum. A frame the model cannot make partial (a UDP checksum of 0, none) still
/// carries the flag, as a lying device would send it: marked partial, delivered unchanged.
#[test]
fn a_same_host_senders_frame_arrives_with_the_pseudo_header_sum_marked_partial() {
    use ringfab_nic_suite::{udp_frame, Udp};
    let mut cb = config(MAC_B);
    cb.partial_checksums = true;
    let p = pair_with(config(MAC_A), cb);
    let mut rx = p.nic_b.open_rx::<16>(0, RxConfig::new(2048)).unwrap();
    let mem = p.b.platform().alloc_dma(2048 * 4).unwrap();
    post(&mut rx, &mem, 2);
    let mut whole = udp_frame(MAC_B, MAC_A, Udp::ports(7, 9), b"from the same host");
    let checksum = !ones_sum(&whole[34..], u32::from(pseudo_header_sum(&whole)));
    whole[40..42].copy_from_slice(&checksum.to_be_bytes());
    let no_checksum = udp_frame(MAC_B, MAC_A, Udp::ports(7, 9), b"none");
    send_all(&p, &[whole.clone(), no_checksum.clone()]);
    let got = drain_rx(&mut rx, &mem);
    assert_eq!(got.len(), 2);
    let (partial, unmade) = (&got[0], &got[1]);
    assert_eq!(partial.0.status, Ok(()));
    let marks = partial.0.checksum;
    assert!(marks.l4_good() && marks.l4_partial() && !marks.ipv4_good());
    let mut f = partial.1[..whole.len()].to_vec();
    assert_eq!(
        u16::from_be_bytes([f[40], f[41]]),
        pseudo_header_sum(&whole),
        "the field holds the pseudo-header's sum"
    );
    assert_eq!(f[..40], whole[..40]);
    assert_eq!(f[42..], whole[42..], "nothing else changed");
    let completed = !ones_sum(&f[34..], 0);
    f[40..42].copy_from_slice(&completed.to_be_bytes());
    assert_eq!(
        f, whole,
        "completed from csum_start, it is the sender's checksum"
    );
    assert!(unmade.0.checksum.l4_partial() && unmade.0.checksum.l4_good());
    assert_eq!(unmade.1[..no_checksum.len()], no_checksum[..]);
}
