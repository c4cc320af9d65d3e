//! Faults injected into the wire, the emulated device and its IOMMU, and interrupts: each one
//! detected cleanly — no panic, every token back exactly once, the right error or the right
//! count.

//!
//! Sections `wire`, `device`, `iommu`, `link`, `interrupts`, and (one test) `rss`.

use ringfab_emu::{CorruptMode, DeviceFault, EmuDma, IommuFault, Ring, WireFault, WireStats};
use ringfab_hal::{
    DmaRegion, Iova, Nic, Platform, Queue, Report, RssConfig, RxCompletion, RxConfig, RxError,
    RxQueue, Token, TxCompletion, TxConfig, TxError, TxQueue, TxSegment, Wait,
};

use crate::{
    drain_rx, drain_tx, expected_hash, frame, in_key_order, in_order, pair, post, push_frame,
    read_bytes, rx_buf, send_all, udp_frame, Fixture, Pair, RxSlots, Udp, BUF, MAC_A, MAC_B, NO_RX,
};

fn ok(token: u64) -> TxCompletion {
    TxCompletion {
        token: Token(token),
        status: Ok(()),
    }
}

fn flushed(token: u64) -> TxCompletion {
    TxCompletion {
        token: Token(token),
        status: Err(TxError::Flushed),
    }
}

/// `(token, status, len)` of one receive completion.
type Outcome = (u64, Result<(), RxError>, u32);

/// `(token, status, len)` of receive completions, for comparing whole sequences at once.
fn summary(got: &[(RxCompletion, Vec<u8>)]) -> Vec<Outcome> {
    got.iter()
        .map(|(c, _)| (c.token.0, c.status, c.len))
        .collect()
}

/// B's receive queue 0 (depth 16, 2 KiB buffers) with `count` buffers posted from fresh memory.
#[allow(
    clippy::type_complexity,
    reason = "the driver's queue type, named once"
)]
fn rx_queue<F: Fixture>(p: &Pair<F>, count: usize) -> (<F::Nic as Nic>::Rx<'_, 16>, EmuDma) {
    let mut rx = p.nic_b.open_rx::<16>(0, RxConfig::new(BUF as u32)).unwrap();
    let mem = p.b.platform().alloc_dma(BUF * 16).unwrap();
    post(&mut rx, &mem, count);
    (rx, mem)
}

// ---- the wire ----

/// A dropped frame never arrives and its buffer comes back flushed.
pub fn a_dropped_frame_never_arrives_and_its_buffer_comes_back_flushed<F: Fixture>() {
    let p = pair::<F>();
    let (mut rx, mem) = rx_queue::<F>(&p, 1);
    p.wire.inject(WireFault::Drop { count: 1 });
    send_all(&p, &[frame(MAC_B, MAC_A, 100, 1)]);
    assert!(drain_rx(&mut rx, &mem).is_empty());
    assert_eq!(rx.pending(), 1, "the buffer is still the device's");
    let s = p.wire.stats();
    assert_eq!((s.sent, s.dropped, s.deliveries), (1, 1, 0));
    rx.flush();
    assert_eq!(
        summary(&drain_rx(&mut rx, &mem)),
        [(0, Err(RxError::Flushed), 0)]
    );
    assert_eq!(rx.pending(), 0);
    assert!(drain_rx(&mut rx, &mem).is_empty(), "returned once");
    // The fault is used up and the flushed queue works: the next frame arrives.
    rx.push(rx_buf(&mem, 1), Token(1)).unwrap();
    rx.doorbell();
    let f = frame(MAC_B, MAC_A, 100, 2);
    send_all(&p, std::slice::from_ref(&f));
    let got = drain_rx(&mut rx, &mem);
    assert_eq!(summary(&got), [(1, Ok(()), f.len() as u32)]);
    assert_eq!(got[0].1, f);
}

/// Silent corruption delivers the frame with its byte flipped and no error.
pub fn silent_corruption_delivers_the_frame_with_its_byte_flipped_and_no_error<F: Fixture>() {
    let p = pair::<F>();
    let (mut rx, mem) = rx_queue::<F>(&p, 4);
    p.wire.inject(WireFault::Corrupt {
        count: 1,
        offset: 40,
        mode: CorruptMode::Silent,
    });
    let frames = [frame(MAC_B, MAC_A, 100, 1), frame(MAC_B, MAC_A, 100, 2)];
    send_all(&p, &frames);
    let got = drain_rx(&mut rx, &mem);
    assert_eq!(summary(&got), [(0, Ok(()), 114), (1, Ok(()), 114)]);
    let mut want = frames[0].clone();
    want[40] ^= 0xff;
    assert_eq!(got[0].1, want, "exactly byte 40 differs");
    assert_eq!(got[1].1, frames[1], "only the next frame was corrupted");
    assert_eq!(p.wire.stats().corrupted, 1);
}

/// A bad CRC is a frame error carrying exactly the device's CRC error bit, with a name (or,
/// where the device never sees such a frame, it is not delivered and takes no buffer).
pub fn a_bad_crc_is_a_frame_error_carrying_exactly_the_crc_bit<F: Fixture>() {
    let p = pair::<F>();
    let (mut rx, mem) = rx_queue::<F>(&p, 4);
    p.wire.inject(WireFault::Corrupt {
        count: 1,
        offset: 30,
        mode: CorruptMode::BadCrc,
    });
    let frames = [frame(MAC_B, MAC_A, 100, 1), frame(MAC_B, MAC_A, 100, 2)];
    send_all(&p, &frames);
    let got = drain_rx(&mut rx, &mem);
    let Some(crc_bit) = F::RX_CRC_ERROR else {
        assert_eq!(
            summary(&got),
            [(0, Ok(()), 114)],
            "the next frame, buffer 0"
        );
        assert_eq!(got[0].1, frames[1]);
        assert_eq!((rx.pending(), p.wire.stats().corrupted), (3, 1));
        return;
    };
    assert_eq!(
        summary(&got),
        [
            (0, Err(RxError::Frame { bits: crc_bit }), 114),
            (1, Ok(()), 114)
        ]
    );
    assert!(got[0].0.rss.is_none(), "no hash reported on a bad frame");
    assert!(
        p.nic_b.rx_error_name(crc_bit.trailing_zeros()).is_some(),
        "the CRC error bit has a name"
    );
    let mut want = frames[0].clone();
    want[30] ^= 0xff;
    assert_eq!(got[0].1, want, "the bad frame is delivered as received");
    assert_eq!(got[1].1, frames[1]);
}

/// A duplicated frame fills two buffers and each token comes back once.
pub fn a_duplicated_frame_fills_two_buffers_and_each_token_comes_back_once<F: Fixture>() {
    let p = pair::<F>();
    let (mut rx, mem) = rx_queue::<F>(&p, 4);
    p.wire.inject(WireFault::Duplicate { count: 1 });
    let f = frame(MAC_B, MAC_A, 200, 3);
    send_all(&p, std::slice::from_ref(&f));
    let got = drain_rx(&mut rx, &mem);
    assert_eq!(summary(&got), [(0, Ok(()), 214), (1, Ok(()), 214)]);
    assert!(got.iter().all(|(_, bytes)| *bytes == f));
    assert_eq!(rx.pending(), 2, "the other two buffers are untouched");
    let s = p.wire.stats();
    assert_eq!((s.sent, s.duplicated, s.deliveries), (1, 1, 2));
    assert_eq!(p.nic_b.stats().rx_packets, 2);
    rx.flush();
    assert_eq!(
        summary(&drain_rx(&mut rx, &mem)),
        [(2, Err(RxError::Flushed), 0), (3, Err(RxError::Flushed), 0)]
    );
}

/// Reordered frames arrive swapped and a lone held frame waits for release held.
pub fn reordered_frames_arrive_swapped_and_a_lone_held_frame_waits_for_release_held<F: Fixture>() {
    let p = pair::<F>();
    let (mut rx, mem) = rx_queue::<F>(&p, 4);
    let f: Vec<Vec<u8>> = (0..3).map(|i| frame(MAC_B, MAC_A, 80, i)).collect();
    p.wire.inject(WireFault::Reorder { count: 1 });
    send_all(&p, &f[..1]);
    assert!(drain_rx(&mut rx, &mem).is_empty(), "frame 0 is held back");
    send_all(&p, &f[1..2]);
    let got = drain_rx(&mut rx, &mem);
    assert_eq!(summary(&got), [(0, Ok(()), 94), (1, Ok(()), 94)]);
    assert_eq!((&got[0].1, &got[1].1), (&f[1], &f[0]), "swapped");

    p.wire.inject(WireFault::Reorder { count: 1 });
    send_all(&p, &f[2..]);
    assert!(drain_rx(&mut rx, &mem).is_empty(), "frame 2 is held back");
    p.wire.release_held();
    let got = drain_rx(&mut rx, &mem);
    assert_eq!(summary(&got), [(2, Ok(()), 94)]);
    assert_eq!(got[0].1, f[2]);
    let s = p.wire.stats();
    assert_eq!((s.sent, s.reordered, s.deliveries), (3, 2, 3));
}

/// Sends `count` frames through a wire with `fault` and returns the wire's counters and every
/// receive completion (buffer sequence number, status, len) and bytes, in buffer order. Every
/// transmit token must come back `Ok` (`send_all` checks), whatever the wire does to the frame.
fn random_run<F: Fixture>(
    fault: WireFault,
    count: usize,
) -> (WireStats, Vec<Outcome>, Vec<Vec<u8>>) {
    const DEPTH: usize = 128;
    let p = pair::<F>();
    let mut rx = p
        .nic_b
        .open_rx::<DEPTH>(0, RxConfig::new(BUF as u32))
        .unwrap();
    let mut slots = RxSlots::new(p.b.platform().alloc_dma(BUF * DEPTH).unwrap(), DEPTH);
    slots.refill(&mut rx);
    p.wire.inject(fault);
    let frames: Vec<Vec<u8>> = (0..count)
        .map(|i| frame(MAC_B, MAC_A, 46 + i % 200, i as u8))
        .collect();
    // At most 64 arrivals per chunk (each frame duplicated), fewer than the buffers posted.
    let mut got = Vec::new();
    let mut out = [NO_RX; 8];
    for chunk in frames.chunks(32) {
        send_all(&p, chunk);
        loop {
            let n = rx.poll(&mut out);
            if n == 0 {
                break;
            }
            for c in &out[..n] {
                let outcome = (RxSlots::<EmuDma>::seq(c.token), c.status, c.len);
                got.push((outcome, slots.take(c)));
            }
        }
        slots.refill(&mut rx);
    }
    // Buffer n took arrival n: the device fills buffers in the order they were posted.
    let got = in_key_order(&p.nic_b, got, |g| g.0 .0);
    let seqs: Vec<u64> = got.iter().map(|g| g.0 .0).collect();
    assert_eq!(
        seqs,
        (0..got.len() as u64).collect::<Vec<_>>(),
        "buffers filled in order, each once"
    );
    assert_eq!(p.nic_b.stats().rx_missed, 0);
    if F::RX_CRC_ERROR.is_some() {
        assert_eq!(p.wire.stats().deliveries, got.len() as u64);
    } else {
        // Deliveries count the frames with a bad CRC the device then drops (the callers check
        // how many).
        assert!(p.wire.stats().deliveries >= got.len() as u64);
    }
    let (outcomes, bytes) = got.into_iter().unzip();
    (p.wire.stats(), outcomes, bytes)
}

/// Random drops and bad crcs follow the seed and every frame is accounted for.
pub fn random_drops_and_bad_crcs_follow_the_seed_and_every_frame_is_accounted_for<F: Fixture>() {
    let fault = |seed| WireFault::Random {
        seed,
        drop_per_mille: 100,
        corrupt_per_mille: 100,
        duplicate_per_mille: 0,
        mode: CorruptMode::BadCrc,
    };
    let (stats, got, bytes) = random_run::<F>(fault(42), 400);
    assert_eq!(stats.sent, 400);
    assert!(stats.dropped > 0 && stats.corrupted > 0, "{stats:?}");
    if let Some(crc_bit) = F::RX_CRC_ERROR {
        assert_eq!(got.len() as u64, stats.sent - stats.dropped, "{stats:?}");
        let crc_error = Err(RxError::Frame { bits: crc_bit });
        let bad = got.iter().filter(|(_, s, _)| *s == crc_error).count();
        assert!(
            bad > 0 && bad as u64 <= stats.corrupted,
            "{bad} bad of {stats:?}"
        );
        assert!(
            got.iter().all(|(_, s, _)| s.is_ok() || *s == crc_error),
            "only CRC errors"
        );
    } else {
        // A frame is dropped or corrupted, not both; the corrupted ones never arrive.
        assert_eq!(
            got.len() as u64,
            stats.sent - stats.dropped - stats.corrupted,
            "{stats:?}"
        );
        assert!(got.iter().all(|(_, s, _)| s.is_ok()));
    }
    // Deterministic: the same seed does the same to the same traffic.
    assert_eq!(random_run::<F>(fault(42), 400), (stats, got, bytes));
    assert_ne!(
        random_run::<F>(fault(43), 400).0,
        stats,
        "another seed, other faults"
    );
}

/// Random duplicates follow the seed and every copy fills its own buffer.
pub fn random_duplicates_follow_the_seed_and_every_copy_fills_its_own_buffer<F: Fixture>() {
    let fault = WireFault::Random {
        seed: 7,
        drop_per_mille: 0,
        corrupt_per_mille: 0,
        duplicate_per_mille: 100,
        mode: CorruptMode::Silent,
    };
    let (stats, got, bytes) = random_run::<F>(fault, 400);
    assert!(stats.duplicated > 0, "{stats:?}");
    assert_eq!(got.len() as u64, stats.sent + stats.duplicated);
    assert!(got.iter().all(|(_, s, _)| s.is_ok()));
    // Each frame arrives once or twice in a row, and in order.
    let mut i = 0;
    let mut doubles = 0;
    for n in 0..400usize {
        let want = frame(MAC_B, MAC_A, 46 + n % 200, n as u8);
        assert_eq!(bytes[i], want, "frame {n}");
        i += 1;
        if bytes.get(i) == Some(&want) {
            i += 1;
            doubles += 1;
        }
    }
    assert_eq!((i, doubles as u64), (bytes.len(), stats.duplicated));
    assert_eq!(random_run::<F>(fault, 400), (stats, got, bytes));
}

/// Random drops corruption and duplicates together account for every frame.
pub fn random_drops_corruption_and_duplicates_together_account_for_every_frame<F: Fixture>() {
    let fault = WireFault::Random {
        seed: 1,
        drop_per_mille: 300,
        corrupt_per_mille: 200,
        duplicate_per_mille: 300,
        mode: CorruptMode::BadCrc,
    };
    let (stats, got, _) = random_run::<F>(fault, 60);
    assert!(
        stats.dropped > 0 && stats.duplicated > 0 && stats.corrupted > 0,
        "{stats:?}"
    );
    // A dropped frame is neither corrupted nor duplicated, and a corrupted frame is
    // duplicated corrupted: of the `sent - dropped + duplicated` arrivals, every corrupted
    // frame and its copy (between `corrupted` and twice as many) is a CRC error, or never
    // reaches a driver whose device drops such frames.
    let arrivals = stats.sent - stats.dropped + stats.duplicated;
    let lost_to_crc = if F::RX_CRC_ERROR.is_some() {
        assert_eq!(got.len() as u64, arrivals, "{stats:?}");
        got.iter().filter(|(_, s, _)| s.is_err()).count() as u64
    } else {
        assert!(got.iter().all(|(_, s, _)| s.is_ok()));
        arrivals - got.len() as u64
    };
    assert!(
        (stats.corrupted..=2 * stats.corrupted).contains(&lost_to_crc),
        "every corrupted frame (and its duplicate) is a CRC error: {lost_to_crc}, {stats:?}"
    );
    assert_eq!(
        random_run::<F>(fault, 60).0,
        stats,
        "deterministic for a seed"
    );
}

// ---- the device ----

/// A withheld transmit writeback keeps the token until flush returns it once.
pub fn a_withheld_transmit_writeback_keeps_the_token_until_flush_returns_it_once<F: Fixture>() {
    let p = pair::<F>();
    let (mut rx, rx_mem) = rx_queue::<F>(&p, 8);
    let mut tx = p.nic_a.open_tx::<16>(0, TxConfig::default()).unwrap();
    let mem = p.a.platform().alloc_dma(BUF * 8).unwrap();
    let f: Vec<Vec<u8>> = (0..4).map(|i| frame(MAC_B, MAC_A, 100, i)).collect();
    push_frame(&mut tx, &mem, 0, &f[0], 0, Report::Always);
    push_frame(&mut tx, &mem, 1, &f[1], 1, Report::Always);
    tx.doorbell();
    // Frames 0 and 1 are written back; frame 2's write-back is lost.
    p.a.inject(DeviceFault::WithholdWriteback {
        ring: Some(Ring::Tx(0)),
        count: 1,
    });
    push_frame(&mut tx, &mem, 2, &f[2], 2, Report::Always);
    tx.doorbell();
    let got = drain_rx(&mut rx, &rx_mem);
    assert_eq!(got.len(), 3, "all three frames were sent");
    assert_eq!(got[2].1, f[2]);
    assert_eq!(tx.pending(), 3);
    tx.flush();
    // Written back (but not yet polled) completes Ok; the withheld one is Flushed.
    assert_eq!(drain_tx(&mut tx), [ok(0), ok(1), flushed(2)]);
    assert_eq!(tx.pending(), 0);
    assert!(drain_tx(&mut tx).is_empty(), "each token once");
    // The queue goes on after the flush.
    push_frame(&mut tx, &mem, 3, &f[3], 3, Report::Always);
    tx.doorbell();
    assert_eq!(drain_tx(&mut tx), [ok(3)]);
    let got = drain_rx(&mut rx, &rx_mem);
    assert_eq!(summary(&got), [(3, Ok(()), 114)]);
    assert_eq!(got[0].1, f[3]);
}

/// A withheld transmit writeback returns nothing before flush.
pub fn a_withheld_transmit_writeback_returns_nothing_before_flush<F: Fixture>() {
    let p = pair::<F>();
    let mut tx = p.nic_a.open_tx::<16>(0, TxConfig::default()).unwrap();
    let mem = p.a.platform().alloc_dma(BUF).unwrap();
    p.a.inject(DeviceFault::WithholdWriteback {
        ring: Some(Ring::Tx(0)),
        count: 1,
    });
    push_frame(
        &mut tx,
        &mem,
        0,
        &frame(MAC_B, MAC_A, 100, 0),
        7,
        Report::Always,
    );
    tx.doorbell();
    p.wire.run_until_idle();
    assert_eq!(p.wire.stats().sent, 1, "the frame left");
    for _ in 0..3 {
        assert!(drain_tx(&mut tx).is_empty());
    }
    assert_eq!(tx.pending(), 1);
    tx.flush();
    assert_eq!(drain_tx(&mut tx), [flushed(7)]);
    assert!(drain_tx(&mut tx).is_empty());
    assert_eq!(tx.pending(), 0);
}

/// A withheld receive writeback leaves the buffer pending until flush.
pub fn a_withheld_receive_writeback_leaves_the_buffer_pending_until_flush<F: Fixture>() {
    let p = pair::<F>();
    let (mut rx, mem) = rx_queue::<F>(&p, 3);
    let f: Vec<Vec<u8>> = (0..3).map(|i| frame(MAC_B, MAC_A, 100, i)).collect();
    send_all(&p, &f[..1]);
    p.b.inject(DeviceFault::WithholdWriteback {
        ring: Some(Ring::Rx(0)),
        count: 1,
    });
    send_all(&p, &f[1..2]);
    assert_eq!(rx.pending(), 3);
    // Not polled before the flush: buffer 0 was written back, buffer 1 was filled without a
    // write-back, buffer 2 is empty.
    rx.flush();
    let got = drain_rx(&mut rx, &mem);
    assert_eq!(
        summary(&got),
        [
            (0, Ok(()), 114),
            (1, Err(RxError::Flushed), 0),
            (2, Err(RxError::Flushed), 0)
        ]
    );
    assert_eq!(got[0].1, f[0]);
    assert_eq!(rx.pending(), 0);
    assert!(drain_rx(&mut rx, &mem).is_empty(), "each token once");
    rx.push(rx_buf(&mem, 3), Token(3)).unwrap();
    rx.doorbell();
    send_all(&p, &f[2..]);
    let got = drain_rx(&mut rx, &mem);
    assert_eq!(summary(&got), [(3, Ok(()), 114)]);
    assert_eq!(got[0].1, f[2]);
}

/// A lost transmit writeback before a later one holds completions until flush calls both sent.
pub fn a_lost_transmit_writeback_before_a_later_one_holds_completions_until_flush_calls_both_sent<
    F: Fixture,
>() {
    let p = pair::<F>();
    let (mut rx, rx_mem) = rx_queue::<F>(&p, 8);
    let mut tx = p.nic_a.open_tx::<16>(0, TxConfig::default()).unwrap();
    let mem = p.a.platform().alloc_dma(BUF * 2).unwrap();
    p.a.inject(DeviceFault::WithholdWriteback {
        ring: Some(Ring::Tx(0)),
        count: 1,
    });
    for i in 0..2 {
        let f = frame(MAC_B, MAC_A, 100, i as u8);
        push_frame(&mut tx, &mem, i, &f, i as u64, Report::Always);
    }
    tx.doorbell();
    assert_eq!(drain_rx(&mut rx, &rx_mem).len(), 2, "both frames left");
    if !in_order(&p.nic_a) {
        // By id: frame 1 completes at once; frame 0's completion never comes, so the flush
        // cannot know it was sent.
        assert_eq!(drain_tx(&mut tx), [ok(1)]);
        assert_eq!(tx.pending(), 1);
        tx.flush();
        assert_eq!(drain_tx(&mut tx), [flushed(0)]);
        assert_eq!((tx.pending(), p.a.iommu_faults().len()), (0, 0));
        return;
    }
    // Frame 1's DD is there, frame 0's never came: a running queue completes in order only.
    assert!(drain_tx(&mut tx).is_empty());
    assert_eq!(tx.pending(), 2);
    // Stopped, the device can no longer write: frame 1's DD proves frame 0 was sent before it.
    tx.flush();
    assert_eq!(drain_tx(&mut tx), [ok(0), ok(1)]);
    assert_eq!((tx.pending(), p.a.iommu_faults().len()), (0, 0));
}

/// A lost receive writeback before a later one delivers the later frame at flush.
pub fn a_lost_receive_writeback_before_a_later_one_delivers_the_later_frame_at_flush<F: Fixture>() {
    let p = pair::<F>();
    let (mut rx, mem) = rx_queue::<F>(&p, 3);
    let f: Vec<Vec<u8>> = (0..2).map(|i| frame(MAC_B, MAC_A, 100, i)).collect();
    p.b.inject(DeviceFault::WithholdWriteback {
        ring: Some(Ring::Rx(0)),
        count: 1,
    });
    send_all(&p, &f);
    if !in_order(&p.nic_b) {
        // By id: the later frame completes at once; the buffer whose completion was lost and
        // the empty one come back flushed.
        let got = drain_rx(&mut rx, &mem);
        assert_eq!(summary(&got), [(1, Ok(()), 114)]);
        assert_eq!(got[0].1, f[1]);
        rx.flush();
        let got = in_key_order(&p.nic_b, drain_rx(&mut rx, &mem), |g| g.0.token.0);
        assert_eq!(
            summary(&got),
            [(0, Err(RxError::Flushed), 0), (2, Err(RxError::Flushed), 0)]
        );
        return;
    }
    assert!(drain_rx(&mut rx, &mem).is_empty(), "in order while running");
    rx.flush();
    let got = drain_rx(&mut rx, &mem);
    assert_eq!(
        summary(&got),
        [
            (0, Err(RxError::Flushed), 0), // filled, but its length was never written back
            (1, Ok(()), 114),
            (2, Err(RxError::Flushed), 0),
        ]
    );
    assert_eq!(got[1].1, f[1], "the later frame is delivered intact");
}

/// A delayed transmit writeback is made when the queue stops so flush reports it sent.
pub fn a_delayed_transmit_writeback_is_made_when_the_queue_stops_so_flush_reports_it_sent<
    F: Fixture,
>() {
    let p = pair::<F>();
    let mut tx = p.nic_a.open_tx::<16>(0, TxConfig::default()).unwrap();
    let mem = p.a.platform().alloc_dma(BUF * 2).unwrap();
    p.a.inject(DeviceFault::DelayWriteback {
        ring: Some(Ring::Tx(0)),
        count: 1,
        steps: 1_000,
    });
    push_frame(
        &mut tx,
        &mem,
        0,
        &frame(MAC_B, MAC_A, 100, 0),
        0,
        Report::Always,
    );
    tx.doorbell();
    assert!(drain_tx(&mut tx).is_empty(), "write-back still held back");
    tx.flush();
    assert_eq!(drain_tx(&mut tx), [ok(0)]);
    // Nothing is left to land later on the reused ring.
    assert!(!p.a.step());
    push_frame(
        &mut tx,
        &mem,
        1,
        &frame(MAC_B, MAC_A, 100, 1),
        1,
        Report::Always,
    );
    tx.doorbell();
    assert_eq!(drain_tx(&mut tx), [ok(1)]);
}

/// A delayed transmit writeback completes only after the steps.
pub fn a_delayed_transmit_writeback_completes_only_after_the_steps<F: Fixture>() {
    let p = pair::<F>();
    let mut tx = p.nic_a.open_tx::<16>(0, TxConfig::default()).unwrap();
    let mem = p.a.platform().alloc_dma(BUF).unwrap();
    p.a.inject(DeviceFault::DelayWriteback {
        ring: Some(Ring::Tx(0)),
        count: 1,
        steps: 3,
    });
    push_frame(
        &mut tx,
        &mem,
        0,
        &frame(MAC_B, MAC_A, 100, 0),
        5,
        Report::Always,
    );
    tx.doorbell();
    assert_eq!(p.wire.stats().sent, 1, "sent at once, reported later");
    assert!(drain_tx(&mut tx).is_empty());
    for step in 1..3 {
        assert!(p.a.step(), "step {step}: the write-back is still due");
        assert!(drain_tx(&mut tx).is_empty(), "none after step {step}");
    }
    assert!(!p.a.step(), "the third step performs it");
    assert_eq!(drain_tx(&mut tx), [ok(5)]);
    assert_eq!(tx.pending(), 0);
}

/// A delayed receive writeback completes and interrupts only after the steps.
pub fn a_delayed_receive_writeback_completes_and_interrupts_only_after_the_steps<F: Fixture>() {
    let p = pair::<F>();
    let mut rx = p
        .nic_b
        .open_rx::<16>(0, RxConfig::new(BUF as u32).with_interrupt(true))
        .unwrap();
    let mem = p.b.platform().alloc_dma(BUF * 4).unwrap();
    post(&mut rx, &mem, 2);
    let wait = rx.interrupt().expect("wired").clone();
    rx.set_interrupt(true);
    wait.drain();
    let before = wait.notifications();
    p.b.inject(DeviceFault::DelayWriteback {
        ring: Some(Ring::Rx(0)),
        count: 1,
        steps: 2,
    });
    let mut tx = p.nic_a.open_tx::<16>(0, TxConfig::default()).unwrap();
    let tx_mem = p.a.platform().alloc_dma(BUF).unwrap();
    let f = frame(MAC_B, MAC_A, 300, 9);
    push_frame(&mut tx, &tx_mem, 0, &f, 0, Report::Always);
    tx.doorbell();
    assert!(drain_rx(&mut rx, &mem).is_empty());
    assert!(p.b.step());
    assert!(drain_rx(&mut rx, &mem).is_empty());
    assert_eq!(
        wait.notifications(),
        before,
        "no interrupt before the write-back"
    );
    assert!(!p.b.step());
    assert_eq!(
        wait.notifications(),
        before + 1,
        "the write-back interrupts"
    );
    assert!(wait.drain());
    let got = drain_rx(&mut rx, &mem);
    assert_eq!(summary(&got), [(0, Ok(()), f.len() as u32)]);
    assert_eq!(got[0].1, f);
}

/// A UDP flow (10.0.x.1 → 10.0.0.2, ports 1024+x → 7) that `table` sends to receive queue
/// `queue` under `key`, by the emu's own Toeplitz hash (over addresses and ports, or over
/// addresses only, as the NIC hashes UDP).
fn flow_for<N: Nic>(nic: &N, queue: u16, key: &[u8; 40], table: &[u16; 128]) -> Udp {
    (0u8..=255)
        .map(|x| {
            let mut f = Udp::ports(1024 + u16::from(x), 7);
            f.src = [10, 0, x, 1];
            f
        })
        .find(|&f| table[(expected_hash(nic, key, f).0 & 127) as usize] == queue)
        .unwrap()
}

/// A lying length on the last of two RSS queues is a length error there; the frame to queue 0
/// and the next frame to the last queue are delivered intact.
pub fn an_oversize_length_on_one_queue_is_a_length_error_there_and_spares_the_others<F: Fixture>() {
    let p = pair::<F>();
    const K: u16 = 2;
    let mut rxs: Vec<_> = (0..K)
        .map(|q| p.nic_b.open_rx::<16>(q, RxConfig::new(BUF as u32)).unwrap())
        .collect();
    let mems: Vec<_> = (0..K)
        .map(|_| p.b.platform().alloc_dma(BUF * 4).unwrap())
        .collect();
    for (rx, mem) in rxs.iter_mut().zip(&mems) {
        post(rx, mem, 4);
    }
    let key: [u8; 40] = std::array::from_fn(|i| (i as u8).wrapping_mul(37).wrapping_add(11));
    let table: [u16; 128] = std::array::from_fn(|i| (i % usize::from(K)) as u16);
    p.nic_b
        .set_rss(&RssConfig {
            key: &key,
            table: &table,
            hashes: p.nic_b.capabilities().rss.expect("RSS").hashes,
        })
        .unwrap();
    let last = K - 1;
    p.b.inject(DeviceFault::OversizeLength {
        queue: Some(last),
        count: 1,
        extra: 7,
    });
    let to0 = udp_frame(MAC_B, MAC_A, flow_for(&p.nic_b, 0, &key, &table), &[1; 40]);
    let to_last = udp_frame(
        MAC_B,
        MAC_A,
        flow_for(&p.nic_b, last, &key, &table),
        &[2; 40],
    );
    send_all(&p, &[to0.clone(), to_last.clone(), to_last.clone()]);
    let got0 = drain_rx(&mut rxs[0], &mems[0]);
    assert_eq!(summary(&got0), [(0, Ok(()), to0.len() as u32)]);
    assert_eq!(got0[0].1, to0);
    let got = drain_rx(&mut rxs[usize::from(last)], &mems[usize::from(last)]);
    assert_eq!(
        summary(&got),
        [
            (
                0,
                Err(RxError::Length {
                    reported: F::rx_room(BUF as u32) + 7,
                    capacity: F::rx_room(BUF as u32)
                }),
                0
            ),
            (1, Ok(()), to_last.len() as u32)
        ]
    );
    assert_eq!(got[1].1, to_last);
}

/// Frames sent while the receiver link is down are lost quietly and flow after link up.
pub fn frames_sent_while_the_receiver_link_is_down_are_lost_quietly_and_flow_after_link_up<
    F: Fixture,
>() {
    let p = pair::<F>();
    let (mut rx, mem) = rx_queue::<F>(&p, 4);
    p.b.set_link(false);
    assert!(!p.nic_b.link().up);
    let f: Vec<Vec<u8>> = (0..3).map(|i| frame(MAC_B, MAC_A, 100, i)).collect();
    send_all(&p, &f[..2]); // transmit tokens all Ok: A's link is up
    assert!(
        drain_rx(&mut rx, &mem).is_empty(),
        "nothing, not even an error"
    );
    assert_eq!(rx.pending(), 4);
    let s = p.nic_b.stats();
    assert_eq!((s.rx_packets, s.rx_missed), (0, 0));
    p.b.set_link(true);
    if !F::LINK_UP_DELAY.is_zero() {
        assert!(!p.nic_b.link().up, "autonegotiation takes a while");
        p.b.platform().delay(F::LINK_UP_DELAY);
    }
    let link = p.nic_b.link();
    assert!(link.up, "{link:?}");
    if let Some((speed, full_duplex)) = F::LINK_SPEED {
        assert_eq!((link.speed_mbps, link.full_duplex), (speed, full_duplex));
    }
    send_all(&p, &f[2..]);
    let got = drain_rx(&mut rx, &mem);
    assert_eq!(summary(&got), [(0, Ok(()), 114)], "into the first buffer");
    assert_eq!(got[0].1, f[2]);
}

/// Frames sent while the sender link is down complete but never reach the wire.
pub fn frames_sent_while_the_sender_link_is_down_complete_but_never_reach_the_wire<F: Fixture>() {
    let p = pair::<F>();
    let (mut rx, mem) = rx_queue::<F>(&p, 4);
    p.a.set_link(false);
    assert!(!p.nic_a.link().up);
    let f: Vec<Vec<u8>> = (0..2).map(|i| frame(MAC_B, MAC_A, 100, i)).collect();
    send_all(&p, &f[..1]); // the token comes back Ok: the MAC sent it into a dead link
    assert_eq!(p.wire.stats().sent, 0);
    assert!(drain_rx(&mut rx, &mem).is_empty());
    p.a.set_link(true);
    p.a.advance_clock(F::LINK_UP_DELAY);
    assert!(p.nic_a.link().up);
    send_all(&p, &f[1..]);
    assert_eq!(p.wire.stats().sent, 1);
    let got = drain_rx(&mut rx, &mem);
    assert_eq!(summary(&got), [(0, Ok(()), 114)]);
    assert_eq!(got[0].1, f[1]);
}

// ---- the IOMMU ----

/// A transmit from an unmapped iova faults stalls the ring and flush recovers it.
pub fn a_transmit_from_an_unmapped_iova_faults_stalls_the_ring_and_flush_recovers_it<F: Fixture>() {
    let p = pair::<F>();
    let (mut rx, rx_mem) = rx_queue::<F>(&p, 4);
    let mut tx = p.nic_a.open_tx::<16>(0, TxConfig::default()).unwrap();
    let mem = p.a.platform().alloc_dma(BUF * 4).unwrap();
    // The guard page after `mem`: never mapped.
    let unmapped = Iova(mem.iova().0 + mem.len() as u64);
    tx.push(
        &[TxSegment {
            iova: unmapped,
            len: 100,
        }],
        Token(1),
        Report::Always,
    )
    .unwrap();
    let good = frame(MAC_B, MAC_A, 100, 2);
    push_frame(&mut tx, &mem, 1, &good, 2, Report::Always);
    tx.doorbell();
    p.wire.run_until_idle();
    assert_eq!(
        p.a.iommu_faults(),
        [IommuFault {
            iova: unmapped,
            len: 100,
            write: false
        }]
    );
    assert_eq!(p.wire.stats().sent, 0, "not sent, nor the frame behind it");
    assert!(drain_tx(&mut tx).is_empty(), "the ring is stalled");
    assert_eq!(tx.pending(), 2);
    assert!(drain_rx(&mut rx, &rx_mem).is_empty());
    tx.flush();
    assert_eq!(drain_tx(&mut tx), [flushed(1), flushed(2)]);
    assert_eq!(tx.pending(), 0);
    if F::DMA_FAULT_NEEDS_DEVICE_RESET {
        // The whole device stopped at the fault: close the queue, reset the device, reopen.
        drop(tx);
        p.nic_a.reset().unwrap();
        tx = p.nic_a.open_tx::<16>(0, TxConfig::default()).unwrap();
    }
    // The queue works again, from past the bad descriptor.
    push_frame(&mut tx, &mem, 2, &good, 3, Report::Always);
    tx.doorbell();
    assert_eq!(drain_tx(&mut tx), [ok(3)]);
    assert_eq!(p.a.iommu_faults().len(), 1, "no new fault");
    let got = drain_rx(&mut rx, &rx_mem);
    assert_eq!(summary(&got), [(0, Ok(()), 114)]);
    assert_eq!(got[0].1, good);
}

/// A receive buffer whose mapping was revoked faults as a write and flush recovers.
pub fn a_receive_buffer_whose_mapping_was_revoked_faults_as_a_write_and_flush_recovers<
    F: Fixture,
>() {
    let p = pair::<F>();
    let mut rx = p.nic_b.open_rx::<16>(0, RxConfig::new(BUF as u32)).unwrap();
    let doomed = p.b.platform().alloc_dma(BUF).unwrap();
    let mem = p.b.platform().alloc_dma(BUF * 8).unwrap();
    let canary = vec![0xEEu8; BUF * 8];
    mem.write_bytes(0, &canary);
    // Token 0 in the doomed region, tokens 1..=3 in `mem` slots 1..=3.
    rx.push(rx_buf(&doomed, 0), Token(0)).unwrap();
    for t in 1..4 {
        rx.push(rx_buf(&mem, t), Token(t as u64)).unwrap();
    }
    rx.doorbell();
    assert!(p.b.revoke_dma(doomed.iova()));
    let f: Vec<Vec<u8>> = (0..3).map(|i| frame(MAC_B, MAC_A, 100, i)).collect();
    send_all(&p, &f[..2]);
    let faults = p.b.iommu_faults();
    if F::DMA_FAULT_NEEDS_DEVICE_RESET {
        // The first frame's write faults and stops the device: the second is never taken.
        assert_eq!(faults.len(), 1, "{faults:?}");
        assert!(
            faults[0].write && faults[0].iova == doomed.iova(),
            "{faults:?}"
        );
    } else {
        let fault = IommuFault {
            iova: doomed.iova(),
            len: 114,
            write: true,
        };
        assert_eq!(faults, [fault, fault], "both frames hit the head buffer");
        assert_eq!(p.nic_b.stats().rx_missed, 2);
    }
    let mut out = [NO_RX; 4];
    assert_eq!(rx.poll(&mut out), 0);
    assert_eq!(
        read_bytes(&mem, 0, BUF * 8),
        canary,
        "no data landed elsewhere"
    );
    assert!(
        read_bytes(&doomed, 0, BUF).iter().all(|&b| b == 0),
        "nor in the revoked buffer"
    );
    rx.flush();
    let got = drain_rx(&mut rx, &mem);
    assert_eq!(
        got.iter()
            .map(|(c, _)| (c.token.0, c.status))
            .collect::<Vec<_>>(),
        (0..4)
            .map(|t| (t, Err(RxError::Flushed)))
            .collect::<Vec<_>>()
    );
    assert_eq!(rx.pending(), 0);
    if F::DMA_FAULT_NEEDS_DEVICE_RESET {
        // The whole device stopped at the fault: close the queue, reset the device, reopen.
        drop(rx);
        p.nic_b.reset().unwrap();
        rx = p.nic_b.open_rx::<16>(0, RxConfig::new(BUF as u32)).unwrap();
    }
    rx.push(rx_buf(&mem, 4), Token(4)).unwrap();
    rx.doorbell();
    send_all(&p, &f[2..]);
    let got = drain_rx(&mut rx, &mem);
    assert_eq!(summary(&got), [(4, Ok(()), 114)]);
    assert_eq!(got[0].1, f[2]);
    assert_eq!(p.b.iommu_faults(), faults, "no new fault");
}

// ---- interrupts ----

/// The transmit completion interrupt fires when armed and not when disarmed.
pub fn the_transmit_completion_interrupt_fires_when_armed_and_not_when_disarmed<F: Fixture>() {
    let p = pair::<F>();
    let mut tx = p
        .nic_a
        .open_tx::<16>(1, TxConfig::with_interrupt(true))
        .unwrap();
    let wait = tx.interrupt().expect("wired").clone();
    let vector = tx.interrupt_vector().expect("the driver says which vector");
    assert_eq!(
        p.a.vector(vector).unwrap().notifications(),
        wait.notifications()
    );
    let mem = p.a.platform().alloc_dma(BUF * 4).unwrap();
    let f = frame(MAC_B, MAC_A, 100, 0);
    let base = wait.notifications();
    push_frame(&mut tx, &mem, 0, &f, 0, Report::Always);
    tx.doorbell();
    assert_eq!(drain_tx(&mut tx), [ok(0)]);
    if F::FIRST_COMPLETION_INTERRUPTS {
        assert_eq!(wait.notifications(), base + 1, "the first one interrupts");
        assert!(wait.drain());
        let base = wait.notifications();
        push_frame(&mut tx, &mem, 0, &f, 10, Report::Always);
        tx.doorbell();
        assert_eq!(drain_tx(&mut tx), [ok(10)]);
        assert_eq!(wait.notifications(), base, "disarmed: silent");
    } else {
        assert_eq!(wait.notifications(), base, "disarmed: silent");
    }
    assert!(!wait.drain());

    tx.set_interrupt(true);
    wait.drain(); // whatever arming itself delivered
    let armed = wait.notifications();
    push_frame(&mut tx, &mem, 1, &f, 1, Report::Always);
    tx.doorbell();
    // A throttling device may hold the message back until its interval has passed.
    p.a.advance_clock(F::INTERRUPT_THROTTLE);
    assert_eq!(wait.notifications(), armed + 1, "armed: one notification");
    assert!(wait.drain());
    assert_eq!(drain_tx(&mut tx), [ok(1)]);

    tx.set_interrupt(false);
    push_frame(&mut tx, &mem, 2, &f, 2, Report::Always);
    tx.doorbell();
    assert_eq!(drain_tx(&mut tx), [ok(2)]);
    assert_eq!(wait.notifications(), armed + 1, "disarmed again: silent");
    assert!(!wait.drain());
}
