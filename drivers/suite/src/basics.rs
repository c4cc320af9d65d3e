//! Section `basics`: bring-up, link, MAC, and frames between two emulated devices on one wire —
//! contents checked, flush, a receive interrupt, and the error completions of a lying device.

use ringfab_emu::{ModelConfig, Wire};
use ringfab_hal::{
    DmaRegion, Iova, Nic, Platform, Queue, Report, RxBuffer, RxConfig, RxError, RxQueue, Token,
    TxCompletion, TxConfig, TxError, TxQueue, TxSegment, Wait,
};

use ringfab_emu::EmuDma;

use crate::{
    device, frame, in_key_order, pair, post, send_all, write_bytes, Fixture, RxSlots, BUF, MAC_A,
    MAC_B, NO_RX, NO_TX,
};

/// Bring up reads the mac and brings the link up.
pub fn bring_up_reads_the_mac_and_brings_the_link_up<F: Fixture>() {
    let wire = Wire::new();
    let dev = device::<F>(MAC_A, &wire);
    let nic = F::driver(dev.platform()).expect("bring-up");
    assert_eq!(nic.capabilities().mac, MAC_A);
    let link = nic.link();
    assert!(link.up, "{link:?}");
    if let Some((speed, full_duplex)) = F::LINK_SPEED {
        assert_eq!((link.speed_mbps, link.full_duplex), (speed, full_duplex));
    }
}

/// Bring up without a cable succeeds with the link down.
pub fn bring_up_without_a_cable_succeeds_with_the_link_down<F: Fixture>() {
    let mut config = ModelConfig::default();
    config.link = false;
    let dev = F::device(config);
    let nic = F::driver(dev.platform()).expect("bring-up");
    assert!(!nic.link().up);
}

/// Frames of many lengths, as two segments each, cross the wire through 64-entry rings that
/// wrap; each arrives intact and every reported token comes back once (in order where the NIC
/// completes in order).
pub fn frames_cross_the_wire_with_their_contents_and_every_token_comes_back<F: Fixture>() {
    let wire = Wire::new();
    let (a, b) = (device::<F>(MAC_A, &wire), device::<F>(MAC_B, &wire));
    let (nic_a, nic_b) = (
        F::driver(a.platform()).unwrap(),
        F::driver(b.platform()).unwrap(),
    );
    let mut tx = nic_a.open_tx::<64>(0, TxConfig::default()).unwrap();
    let mut rx = nic_b.open_rx::<64>(0, RxConfig::new(2048)).unwrap();

    const FRAMES: usize = 100; // more than either ring holds: wraps around
    let mut rx_slots = RxSlots::new(b.platform().alloc_dma(BUF * 64).unwrap(), 64);
    let tx_mem = a.platform().alloc_dma(BUF * 64).unwrap();
    rx_slots.refill(&mut rx);

    let mut sent = 0usize;
    let mut tx_done = Vec::new();
    let mut received = Vec::new();
    let mut out_tx = [NO_TX; 16];
    let mut out_rx = [NO_RX; 16];
    for _ in 0..1000 {
        if received.len() == FRAMES {
            break;
        }
        while sent < FRAMES && tx.free() >= 2 && sent - received.len() < 32 {
            let f = frame(MAC_B, MAC_A, 46 + sent * 13 % 1400, sent as u8);
            let off = (sent % 64) * BUF;
            write_bytes(&tx_mem, off, &f);
            // Header and payload as two segments, to exercise multi-descriptor frames.
            let base = tx_mem.iova().0 + off as u64;
            let segs = [
                TxSegment {
                    iova: Iova(base),
                    len: 14,
                },
                TxSegment {
                    iova: Iova(base + 14),
                    len: (f.len() - 14) as u16,
                },
            ];
            let report = if sent % 2 == 0 {
                Report::Always
            } else {
                Report::ErrorsOnly
            };
            tx.push(&segs, Token(sent as u64), report).unwrap();
            sent += 1;
        }
        tx.doorbell();
        wire.run_until_idle();
        let n = tx.poll(&mut out_tx);
        tx_done.extend_from_slice(&out_tx[..n]);
        let n = rx.poll(&mut out_rx);
        for c in &out_rx[..n] {
            assert_eq!(c.status, Ok(()), "{c:?}");
            received.push((RxSlots::<EmuDma>::seq(c.token), rx_slots.take(c)));
        }
        rx_slots.refill(&mut rx);
    }
    assert_eq!(received.len(), FRAMES);
    // Buffer n took frame n: the device fills buffers in the order they were posted.
    let received = in_key_order(&nic_b, received, |r| r.0);
    assert!(a.iommu_faults().is_empty(), "{:?}", a.iommu_faults());
    assert!(b.iommu_faults().is_empty(), "{:?}", b.iommu_faults());
    for (i, (seq, got)) in received.iter().enumerate() {
        assert_eq!(*seq, i as u64);
        assert_eq!(
            got,
            &frame(MAC_B, MAC_A, 46 + i * 13 % 1400, i as u8),
            "frame {i}"
        );
    }
    // Drain the last write-backs, then: every Always token once, all Ok.
    for _ in 0..10 {
        wire.run_until_idle();
        let n = tx.poll(&mut out_tx);
        tx_done.extend_from_slice(&out_tx[..n]);
    }
    assert!(tx_done.iter().all(|c| c.status == Ok(())), "{tx_done:?}");
    let tx_done = in_key_order(&nic_a, tx_done, |c| c.token.0);
    let tokens: Vec<u64> = tx_done.iter().map(|c| c.token.0).collect();
    assert_eq!(tokens, (0..FRAMES as u64).step_by(2).collect::<Vec<_>>());
    assert_eq!(tx.pending(), 0, "ErrorsOnly frames were reclaimed silently");
    let stats = nic_b.stats();
    assert_eq!(stats.rx_packets, FRAMES as u64);
    assert_eq!(nic_a.stats().tx_packets, FRAMES as u64);
}

/// Receive interrupt notifies when armed.
pub fn receive_interrupt_notifies_when_armed<F: Fixture>() {
    let wire = Wire::new();
    let (a, b) = (device::<F>(MAC_A, &wire), device::<F>(MAC_B, &wire));
    let (nic_a, nic_b) = (
        F::driver(a.platform()).unwrap(),
        F::driver(b.platform()).unwrap(),
    );
    let mut tx = nic_a.open_tx::<16>(0, TxConfig::default()).unwrap();
    let mut rx = nic_b
        .open_rx::<16>(0, RxConfig::new(2048).with_interrupt(true))
        .unwrap();
    let mem = b.platform().alloc_dma(4096).unwrap();
    rx.push(
        RxBuffer {
            iova: mem.iova(),
            len: 2048,
        },
        Token(7),
    )
    .unwrap();
    rx.doorbell();
    let wait = rx.interrupt().expect("wired");
    wait.drain();
    rx.set_interrupt(true);

    let tx_mem = a.platform().alloc_dma(4096).unwrap();
    let f = frame(MAC_B, MAC_A, 100, 1);
    write_bytes(&tx_mem, 0, &f);
    tx.push(
        &[TxSegment {
            iova: tx_mem.iova(),
            len: f.len() as u16,
        }],
        Token(1),
        Report::Always,
    )
    .unwrap();
    tx.doorbell();
    wire.run_until_idle();
    assert!(rx.interrupt().unwrap().drain(), "the armed vector fired");
    let mut out = [NO_RX; 2];
    assert_eq!(rx.poll(&mut out), 1);
    assert_eq!(
        (out[0].token, out[0].len, out[0].status),
        (Token(7), f.len() as u32, Ok(()))
    );
}

/// Flush gives back unfilled buffers and unsent frames.
pub fn flush_gives_back_unfilled_buffers_and_unsent_frames<F: Fixture>() {
    let wire = Wire::new();
    let dev = device::<F>(MAC_A, &wire);
    let nic = F::driver(dev.platform()).unwrap();
    // The last queue of at most two: not queue 0, where the NIC has more than one.
    let caps = nic.capabilities();
    let mut rx = nic
        .open_rx::<16>(caps.rx_queues.min(2) - 1, RxConfig::new(1024))
        .unwrap();
    let mem = dev.platform().alloc_dma(4 * 1024).unwrap();
    for t in 0..4 {
        rx.push(
            RxBuffer {
                iova: Iova(mem.iova().0 + t * 1024),
                len: 1024,
            },
            Token(t),
        )
        .unwrap();
    }
    rx.doorbell();
    rx.flush();
    let mut out = [NO_RX; 8];
    assert_eq!(rx.poll(&mut out), 4);
    assert!(out[..4].iter().all(|c| c.status == Err(RxError::Flushed)));
    assert_eq!(rx.pending(), 0);

    let mut tx = nic
        .open_tx::<16>(caps.tx_queues.min(2) - 1, TxConfig::default())
        .unwrap();
    // Pushed but never rung: the device never saw it.
    tx.push(
        &[TxSegment {
            iova: mem.iova(),
            len: 60,
        }],
        Token(9),
        Report::ErrorsOnly,
    )
    .unwrap();
    tx.flush();
    let mut out = [NO_TX; 2];
    assert_eq!(tx.poll(&mut out), 1);
    assert_eq!(
        out[0],
        TxCompletion {
            token: Token(9),
            status: Err(TxError::Flushed)
        }
    );
}

/// A lying receive length and garbage status become error completions.
pub fn a_lying_receive_length_and_garbage_status_become_error_completions<F: Fixture>() {
    use ringfab_emu::{DeviceFault, Ring};
    let p = pair::<F>();
    let mut rx = p.nic_b.open_rx::<16>(0, RxConfig::new(2048)).unwrap();
    let mem = p.b.platform().alloc_dma(2048 * 8).unwrap();
    post(&mut rx, &mem, 4);
    p.b.inject(DeviceFault::OversizeLength {
        queue: Some(0),
        count: 1,
        extra: 100,
    });
    let garbage = DeviceFault::GarbageStatus {
        ring: Some(Ring::Rx(0)),
        count: 1,
        bits: F::RX_GARBAGE_STATUS,
    };
    let frames: Vec<Vec<u8>> = (0..3).map(|i| frame(MAC_B, MAC_A, 100, i)).collect();
    send_all(&p, &frames[..1]);
    p.b.inject(garbage);
    send_all(&p, &frames[1..]);
    let mut out = [NO_RX; 8];
    assert_eq!(rx.poll(&mut out), 3);
    let out = in_key_order(&p.nic_b, out[..3].to_vec(), |c| c.token.0);
    assert_eq!(
        out[0].status,
        Err(RxError::Length {
            reported: F::rx_room(2048) + 100,
            capacity: F::rx_room(2048)
        })
    );
    assert_eq!(out[0].len, 0);
    assert!(
        matches!(out[1].status, Err(RxError::DeviceStatus { .. })),
        "{:?}",
        out[1]
    );
    assert_eq!((out[2].status, out[2].len), (Ok(()), 114));
}

/// A bad crc is a frame error with a named bit.
pub fn a_bad_crc_is_a_frame_error_with_a_named_bit<F: Fixture>() {
    use ringfab_emu::{CorruptMode, WireFault};
    let p = pair::<F>();
    let mut rx = p.nic_b.open_rx::<16>(0, RxConfig::new(2048)).unwrap();
    let mem = p.b.platform().alloc_dma(2048 * 4).unwrap();
    post(&mut rx, &mem, 2);
    p.wire.inject(WireFault::Corrupt {
        count: 1,
        offset: 20,
        mode: CorruptMode::BadCrc,
    });
    send_all(&p, &[frame(MAC_B, MAC_A, 100, 0)]);
    let mut out = [NO_RX; 2];
    if F::RX_CRC_ERROR.is_none() {
        // Dropped before the device: no completion, both buffers still the device's, and the
        // next frame takes the first one.
        assert_eq!(rx.poll(&mut out), 0);
        assert_eq!(rx.pending(), 2);
        send_all(&p, &[frame(MAC_B, MAC_A, 100, 1)]);
        assert_eq!(rx.poll(&mut out), 1);
        assert_eq!(
            (out[0].token, out[0].status, out[0].len),
            (Token(0), Ok(()), 114)
        );
        return;
    }
    assert_eq!(rx.poll(&mut out), 1);
    let Err(RxError::Frame { bits }) = out[0].status else {
        panic!("{:?}", out[0])
    };
    assert_eq!(out[0].len, 114);
    let names: Vec<_> = (0..32)
        .filter(|b| bits & 1 << b != 0)
        .map(|b| p.nic_b.rx_error_name(b))
        .collect();
    assert!(
        names.iter().all(Option::is_some) && !names.is_empty(),
        "{bits:#x}"
    );
}

/// A garbage transmit status is a device status error for that token.
pub fn a_garbage_transmit_status_is_a_device_status_error_for_that_token<F: Fixture>() {
    use ringfab_emu::{DeviceFault, Ring};
    let p = pair::<F>();
    let mut tx = p.nic_a.open_tx::<16>(0, TxConfig::default()).unwrap();
    let mem = p.a.platform().alloc_dma(4096).unwrap();
    write_bytes(&mem, 0, &frame(MAC_B, MAC_A, 100, 0));
    p.a.inject(DeviceFault::GarbageStatus {
        ring: Some(Ring::Tx(0)),
        count: 1,
        bits: F::TX_GARBAGE_STATUS,
    });
    let seg = TxSegment {
        iova: mem.iova(),
        len: 114,
    };
    tx.push(&[seg], Token(1), Report::ErrorsOnly).unwrap();
    tx.push(&[seg], Token(2), Report::Always).unwrap();
    tx.doorbell();
    p.wire.run_until_idle();
    let mut out = [NO_TX; 4];
    let n = tx.poll(&mut out);
    if F::TX_STATUS_OF_EVERY_FRAME {
        // Token 1's own status carries the garbage: reported although ErrorsOnly; token 2 is
        // fine.
        let done = in_key_order(&p.nic_a, out[..n].to_vec(), |c| c.token.0);
        assert_eq!(n, 2, "{done:?}");
        assert_eq!(done[0].token, Token(1));
        assert!(
            matches!(done[0].status, Err(TxError::DeviceStatus { .. })),
            "{:?}",
            done[0]
        );
        assert_eq!((done[1].token, done[1].status), (Token(2), Ok(())));
        assert_eq!(tx.pending(), 0);
        return;
    }
    // Token 1 (ErrorsOnly, no RS of its own) is reclaimed silently by token 2's write-back,
    // which carries the garbage.
    assert_eq!(n, 1, "{:?}", &out[..n]);
    assert_eq!(out[0].token, Token(2));
    assert!(
        matches!(out[0].status, Err(TxError::DeviceStatus { .. })),
        "{:?}",
        out[0]
    );
    assert_eq!(tx.pending(), 0);
}
