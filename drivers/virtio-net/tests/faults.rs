//! Faults only a virtqueue has: the device writing the used ring out of order, late, with ids
//! it was not given, with index jumps; and where the model drops frames. Every token comes back
//! exactly once (at the latest through flush), and nothing panics. The faults every NIC has
//! (the wire, withheld and delayed completions, lying lengths and status, the IOMMU, the link)
//! are the suite's (`tests/suite.rs`).

mod fixture;

use fixture::{pair, VirtioNetFixture};
use ringfab_emu::{DeviceFault, Ring};
use ringfab_hal::{
    DmaRegion, Nic, Platform, Queue, Report, RxConfig, RxError, RxQueue, Token, TxCompletion,
    TxConfig, TxError, TxQueue,
};
use ringfab_nic_suite::{
    drain_rx, drain_tx, frame, post, push_frame, send_all, Pair, BUF, MAC_A, MAC_B, NO_RX,
};

fn ok(token: u64) -> TxCompletion {
    TxCompletion {
        token: Token(token),
        status: Ok(()),
    }
}

/// Pushes `count` frames on A's queue 0 (tokens 0..count) and rings once.
fn send<Q: TxQueue, D: DmaRegion>(tx: &mut Q, mem: &D, count: usize) {
    for i in 0..count {
        let f = frame(MAC_B, MAC_A, 60 + i, i as u8);
        push_frame(tx, mem, i, &f, i as u64, Report::Always);
    }
    tx.doorbell();
}

fn sorted(mut v: Vec<u64>) -> Vec<u64> {
    v.sort_unstable();
    v
}

fn rx_on_b(
    p: &Pair<VirtioNetFixture>,
) -> (
    ringfab_virtio_net::VirtioNetRx<'_, ringfab_emu::EmuPlatform, 16>,
    ringfab_emu::EmuDma,
) {
    let rx = p.nic_b.open_rx::<16>(0, RxConfig::new(BUF as u32)).unwrap();
    let mem = p.nic_b.platform().alloc_dma(BUF * 16).unwrap();
    (rx, mem)
}

#[test]
fn out_of_order_completions_map_back_to_their_tokens() {
    let p = pair();
    let (mut rx, rmem) = rx_on_b(&p);
    post(&mut rx, &rmem, 6);
    p.b.inject(DeviceFault::CompleteOutOfOrder {
        ring: Some(Ring::Rx(0)),
        count: 2,
    });
    p.a.inject(DeviceFault::CompleteOutOfOrder {
        ring: Some(Ring::Tx(0)),
        count: 1,
    });
    let mut tx = p.nic_a.open_tx::<8>(0, TxConfig::default()).unwrap();
    let tmem = p.nic_a.platform().alloc_dma(BUF * 8).unwrap();
    send(&mut tx, &tmem, 4);
    p.wire.run_until_idle();
    let t: Vec<_> = drain_tx(&mut tx).iter().map(|c| c.token.0).collect();
    assert_eq!(t, vec![1, 0, 2, 3], "token 0 completed after token 1");
    let got = drain_rx(&mut rx, &rmem);
    let tokens: Vec<_> = got.iter().map(|(c, _)| c.token.0).collect();
    assert_eq!(tokens, vec![1, 0, 3, 2], "two pairs swapped");
    for (c, bytes) in &got {
        assert_eq!(c.status, Ok(()));
        // Buffer t got frame t: the id → token map followed the device's order.
        let i = c.token.0 as usize;
        assert_eq!(bytes, &frame(MAC_B, MAC_A, 60 + i, i as u8));
    }
    assert_eq!((tx.device_errors(), rx.device_errors()), (0, 0));
}

#[test]
fn a_held_entry_with_no_successor_lands_at_the_next_device_step() {
    let p = pair();
    let (mut rx, rmem) = rx_on_b(&p);
    post(&mut rx, &rmem, 2);
    p.b.inject(DeviceFault::CompleteOutOfOrder {
        ring: None,
        count: 1,
    });
    send_all(&p, &[frame(MAC_B, MAC_A, 60, 0)]);
    // run_until_idle stepped the device: the held entry landed.
    let got = drain_rx(&mut rx, &rmem);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].0.status, Ok(()));
}

#[test]
fn a_used_id_out_of_range_is_refused_and_the_real_buffer_comes_back_at_flush() {
    let p = pair();
    let (mut rx, rmem) = rx_on_b(&p);
    post(&mut rx, &rmem, 4);
    p.b.inject(DeviceFault::LieUsedId {
        ring: Some(Ring::Rx(0)),
        count: 1,
        id: 999,
    });
    send_all(
        &p,
        &[frame(MAC_B, MAC_A, 60, 0), frame(MAC_B, MAC_A, 60, 1)],
    );
    let got = drain_rx(&mut rx, &rmem);
    assert_eq!(got.len(), 1, "only the honest entry");
    assert_eq!(got[0].0.token, Token(1));
    assert_eq!(rx.device_errors(), 1);
    assert_eq!(rx.pending(), 3);
    rx.flush();
    let rest = drain_rx(&mut rx, &rmem);
    assert_eq!(
        sorted(rest.iter().map(|(c, _)| c.token.0).collect()),
        vec![0, 2, 3]
    );
    assert!(rest.iter().all(|(c, _)| c.status == Err(RxError::Flushed)));
}

#[test]
fn a_used_id_the_device_does_not_hold_is_refused_and_completes_nothing_twice() {
    let p = pair();
    let mut tx = p.nic_a.open_tx::<8>(0, TxConfig::default()).unwrap();
    let tmem = p.nic_a.platform().alloc_dma(BUF * 8).unwrap();
    send(&mut tx, &tmem, 1);
    assert_eq!(drain_tx(&mut tx), vec![ok(0)]);
    // Id 0 is free again; the device answers the next frame (id 0 reused? no: the free stack
    // hands out id 0 again) with id 5, which it was never given.
    p.a.inject(DeviceFault::LieUsedId {
        ring: Some(Ring::Tx(0)),
        count: 1,
        id: 5,
    });
    send(&mut tx, &tmem, 1);
    assert!(drain_tx(&mut tx).is_empty());
    assert_eq!(tx.device_errors(), 1);
    // And an id named twice: the device completes frame 0 as 0, then lies "0" again.
    tx.flush();
    assert_eq!(
        drain_tx(&mut tx),
        vec![TxCompletion {
            token: Token(0),
            status: Err(TxError::Flushed)
        }]
    );
    send(&mut tx, &tmem, 2);
    p.a.inject(DeviceFault::LieUsedId {
        ring: Some(Ring::Tx(0)),
        count: 1,
        id: 0,
    });
    send(&mut tx, &tmem, 0);
    let before = tx.device_errors();
    let done = drain_tx(&mut tx);
    assert_eq!(sorted(done.iter().map(|c| c.token.0).collect()), vec![0, 1]);
    assert_eq!(tx.device_errors(), before);
    assert_eq!(tx.pending(), 0);
}

#[test]
fn a_used_index_jump_is_refused_and_flush_takes_every_buffer_back() {
    let p = pair();
    let (mut rx, rmem) = rx_on_b(&p);
    post(&mut rx, &rmem, 4);
    p.b.inject(DeviceFault::JumpUsedIdx {
        ring: Some(Ring::Rx(0)),
        by: 100,
    });
    send_all(&p, &[frame(MAC_B, MAC_A, 60, 0)]);
    assert!(
        drain_rx(&mut rx, &rmem).is_empty(),
        "nothing read past a lie"
    );
    assert!(rx.device_errors() >= 1);
    rx.flush();
    let back = drain_rx(&mut rx, &rmem);
    assert_eq!(
        sorted(back.iter().map(|(c, _)| c.token.0).collect()),
        vec![0, 1, 2, 3]
    );
    assert!(back.iter().all(|(c, _)| c.status == Err(RxError::Flushed)));
    // The queue works again after the reset.
    post(&mut rx, &rmem, 2);
    send_all(&p, &[frame(MAC_B, MAC_A, 60, 1)]);
    assert_eq!(drain_rx(&mut rx, &rmem)[0].0.status, Ok(()));
}

#[test]
fn a_delayed_used_entry_lets_a_later_one_complete_first() {
    let p = pair();
    let mut tx = p.nic_a.open_tx::<8>(0, TxConfig::default()).unwrap();
    let tmem = p.nic_a.platform().alloc_dma(BUF * 8).unwrap();
    p.a.inject(DeviceFault::DelayWriteback {
        ring: Some(Ring::Tx(0)),
        count: 1,
        steps: 2,
    });
    send(&mut tx, &tmem, 2);
    assert_eq!(
        drain_tx(&mut tx),
        vec![ok(1)],
        "frame 0 is late: out of order"
    );
    assert!(p.a.step(), "one step left");
    assert!(drain_tx(&mut tx).is_empty());
    assert!(!p.a.step());
    assert_eq!(drain_tx(&mut tx), vec![ok(0)]);
}

#[test]
fn frames_without_a_receive_buffer_are_dropped_and_counted_by_the_model() {
    let p = pair();
    let (mut rx, rmem) = rx_on_b(&p);
    post(&mut rx, &rmem, 1);
    send_all(
        &p,
        &[frame(MAC_B, MAC_A, 60, 0), frame(MAC_B, MAC_A, 60, 1)],
    );
    assert_eq!(drain_rx(&mut rx, &rmem).len(), 1);
    assert_eq!(p.b.rx_dropped(), 1);
}

#[test]
/// Issue 14 item 2: a frame longer than the buffer used to be dropped by the device (QEMU
/// drops what a non-mergeable chain cannot hold); the chain's overflow area takes the rest,
/// and the buffer completes `Truncated` with the frame's length and its first bytes.
fn a_frame_longer_than_the_buffer_is_truncated_with_its_length() {
    let p = pair();
    let mut rx = p.nic_b.open_rx::<4>(0, RxConfig::new(64)).unwrap();
    let rmem = p.nic_b.platform().alloc_dma(BUF * 4).unwrap();
    post(&mut rx, &rmem, 1);
    let long = frame(MAC_B, MAC_A, 100, 0);
    send_all(&p, std::slice::from_ref(&long));
    let mut out = [NO_RX; 2];
    assert_eq!(rx.poll(&mut out), 1);
    assert_eq!(
        (out[0].len, out[0].status),
        (
            64,
            Err(RxError::Truncated {
                frame_len: long.len() as u32
            })
        )
    );
    assert_eq!(p.b.rx_dropped(), 0);
}
