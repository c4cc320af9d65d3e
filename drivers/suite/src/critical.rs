//! Critical device faults (`ringfab-hal`'s "Critical faults"): a device that is removed,
//! resets itself or disables a queue. Each is found by the stall check of `poll` (never
//! before [`STALL_POLLS`] empty polls: the data path reads no register), refuses pushes,
//! hands every token back on flush without touching the device, and — except for a removed
//! device — is recovered by closing the queue, [`Nic::recover`] and opening it again.
//!
//! Section `critical`.

use ringfab_emu::{CriticalFault, DeviceFault, Ring};
use ringfab_hal::queue::{STALL_POLLS, STALL_POLLS_MAX};
use ringfab_hal::{
    DmaRegion, Error, Nic, Platform, PushError, Queue, QueueFault, Report, RssConfig, RxConfig,
    RxError, RxQueue, Token, TxConfig, TxError, TxQueue, TxSegment,
};

use crate::{
    drain_tx, frame, pair, post, rx_buf, send_all, Fixture, BUF, MAC_A, MAC_B, NO_RX, NO_TX,
};

/// Polls `rx` `polls` times; returns how many completions came back.
pub fn poll_rx<Q: RxQueue>(rx: &mut Q, polls: u32) -> usize {
    let mut out = [NO_RX; 8];
    (0..polls).map(|_| rx.poll(&mut out)).sum()
}

/// Every token the flush of `rx` hands back, with its status.
pub fn flush_rx<Q: RxQueue>(rx: &mut Q) -> Vec<(u64, Result<(), RxError>)> {
    rx.flush();
    let mut all = Vec::new();
    let mut out = [NO_RX; 8];
    loop {
        let n = rx.poll(&mut out);
        if n == 0 {
            return all;
        }
        all.extend(out[..n].iter().map(|c| (c.token.0, c.status)));
    }
}

/// What flushing the four buffers the tests post (pending work an idle wire never completes,
/// which is what makes the polls count as stalled) hands back.
fn four_flushed() -> Vec<(u64, Result<(), RxError>)> {
    (0..4).map(|t| (t, Err(RxError::Flushed))).collect()
}

/// A device reset behind the driver's back is found after exactly [`STALL_POLLS`] empty polls,
/// refuses pushes, flush returns every buffer flushed, and after `recover` a queue opened again
/// receives.
pub fn a_device_reset_is_found_by_the_stall_check_and_recover_brings_the_queue_back<F: Fixture>() {
    let p = pair::<F>();
    let mem = p.b.platform().alloc_dma(BUF * 8).unwrap();
    {
        let mut rx = p.nic_b.open_rx::<16>(0, RxConfig::new(BUF as u32)).unwrap();
        post(&mut rx, &mem, 4);
        p.b.inject_critical(CriticalFault::Reset);
        assert_eq!(poll_rx(&mut rx, STALL_POLLS - 1), 0);
        assert_eq!(
            rx.fault(),
            None,
            "no register is read before the stall bound"
        );
        assert_eq!(poll_rx(&mut rx, 1), 0);
        assert_eq!(rx.fault(), Some(QueueFault::Reset));
        assert_eq!(
            rx.push(rx_buf(&mem, 4), Token(4)),
            Err(PushError::Fault(QueueFault::Reset))
        );
        assert_eq!(flush_rx(&mut rx), four_flushed());
        assert_eq!(rx.pending(), 0);
        assert_eq!(rx.fault(), Some(QueueFault::Reset), "faults are sticky");
    }
    p.nic_b.recover().unwrap();
    let mut rx = p.nic_b.open_rx::<16>(0, RxConfig::new(BUF as u32)).unwrap();
    post(&mut rx, &mem, 4);
    let f = frame(MAC_B, MAC_A, 100, 3);
    send_all(&p, std::slice::from_ref(&f));
    let mut out = [NO_RX; 8];
    assert_eq!(rx.poll(&mut out), 1);
    assert_eq!((out[0].token, out[0].status), (Token(0), Ok(())));
    assert_eq!(rx.fault(), None);
}

/// RSS is the application's: after a reset behind the driver's back, `recover` programs the
/// set-up it was given again, and flows land on their table's queues as before.
pub fn recover_after_a_reset_programs_rss_again<F: Fixture>() {
    let p = pair::<F>();
    let (key, table) = crate::queues::rss_key_and_table();
    p.nic_b
        .set_rss(&RssConfig {
            key: &key,
            table: &table,
            hashes: p.nic_b.capabilities().rss.expect("RSS").hashes,
        })
        .unwrap();
    {
        let mut rx = p.nic_b.open_rx::<16>(0, RxConfig::new(BUF as u32)).unwrap();
        p.b.inject_critical(CriticalFault::Reset);
        assert_eq!(rx.check(), Some(QueueFault::Reset));
    }
    p.nic_b.recover().unwrap();
    crate::queues::assert_rss_spreads_flows(&p, &key, &table);
}

/// `check` finds a reset at once, on a transmit queue with nothing pending too.
pub fn check_finds_a_device_reset_on_an_idle_transmit_queue<F: Fixture>() {
    let p = pair::<F>();
    let mut tx = p.nic_a.open_tx::<16>(0, TxConfig::default()).unwrap();
    assert_eq!(tx.check(), None);
    p.a.inject_critical(CriticalFault::Reset);
    assert_eq!(tx.fault(), None, "nothing looked until asked");
    assert_eq!(tx.check(), Some(QueueFault::Reset));
    let mut out = [NO_TX; 4];
    tx.flush();
    assert_eq!(tx.poll(&mut out), 0, "nothing was pending");
}

/// A surprise-removed device is found as `Removed`; flush still returns every buffer, the
/// queue closes without waiting on the device, and `recover` says the device is gone.
pub fn a_removed_device_is_found_and_recover_says_it_is_gone<F: Fixture>() {
    let p = pair::<F>();
    let mem = p.b.platform().alloc_dma(BUF * 8).unwrap();
    let mut rx = p.nic_b.open_rx::<16>(0, RxConfig::new(BUF as u32)).unwrap();
    let mut tx = p.nic_b.open_tx::<16>(0, TxConfig::default()).unwrap();
    post(&mut rx, &mem, 4);
    p.b.inject_critical(CriticalFault::SurpriseRemoval);
    assert_eq!(poll_rx(&mut rx, STALL_POLLS), 0);
    assert_eq!(rx.fault(), Some(QueueFault::Removed));
    assert_eq!(tx.check(), Some(QueueFault::Removed));
    assert_eq!(flush_rx(&mut rx), four_flushed());
    drop((rx, tx));
    assert_eq!(p.nic_b.recover(), Err(Error::DeviceRemoved));
    assert!(
        p.nic_b.open_rx::<16>(0, RxConfig::new(BUF as u32)).is_err(),
        "a queue of a removed device never enables"
    );
}

/// A queue the device disabled is found as `Disabled`; the device keeps its set-up, so
/// `recover` has nothing to do and a queue opened again receives.
pub fn a_queue_disabled_by_the_device_is_found_and_reopening_it_recovers<F: Fixture>() {
    let p = pair::<F>();
    let mem = p.b.platform().alloc_dma(BUF * 8).unwrap();
    {
        let mut rx = p.nic_b.open_rx::<16>(0, RxConfig::new(BUF as u32)).unwrap();
        post(&mut rx, &mem, 4);
        p.b.inject_critical(CriticalFault::DisableQueue(Ring::Rx(0)));
        assert_eq!(poll_rx(&mut rx, STALL_POLLS), 0);
        assert_eq!(rx.fault(), Some(QueueFault::Disabled));
        assert_eq!(flush_rx(&mut rx), four_flushed());
    }
    p.nic_b.recover().unwrap();
    let mut rx = p.nic_b.open_rx::<16>(0, RxConfig::new(BUF as u32)).unwrap();
    post(&mut rx, &mem, 4);
    send_all(&p, &[frame(MAC_B, MAC_A, 100, 4)]);
    let mut out = [NO_RX; 8];
    assert_eq!(rx.poll(&mut out), 1);
    assert_eq!(out[0].status, Ok(()));
}

/// A healthy queue waiting for frames that never come is checked every [`STALL_POLLS`] polls
/// and never reported faulted.
pub fn a_healthy_idle_queue_is_never_reported_faulted<F: Fixture>() {
    let p = pair::<F>();
    let mem = p.b.platform().alloc_dma(BUF * 8).unwrap();
    let mut rx = p.nic_b.open_rx::<16>(0, RxConfig::new(BUF as u32)).unwrap();
    post(&mut rx, &mem, 4);
    assert_eq!(poll_rx(&mut rx, 3 * STALL_POLLS), 0);
    assert_eq!(rx.fault(), None);
    assert_eq!(rx.check(), None);
    send_all(&p, &[frame(MAC_B, MAC_A, 60, 5)]);
    let mut out = [NO_RX; 8];
    assert_eq!(rx.poll(&mut out), 1);
    assert_eq!(out[0].status, Ok(()));
}

/// A reset that comes after the queue has idled long enough for its checks to be spaced out
/// to [`STALL_POLLS_MAX`] is still found, within that many empty polls.
pub fn a_reset_after_a_long_idle_is_found_within_the_longest_period<F: Fixture>() {
    let p = pair::<F>();
    let mem = p.b.platform().alloc_dma(BUF * 8).unwrap();
    let mut rx = p.nic_b.open_rx::<16>(0, RxConfig::new(BUF as u32)).unwrap();
    post(&mut rx, &mem, 4);
    // 256 + 512 + … + 8192 empty polls reach the longest period; twice that stays in it.
    assert_eq!(poll_rx(&mut rx, 2 * STALL_POLLS_MAX), 0);
    assert_eq!(rx.fault(), None);
    p.b.inject_critical(CriticalFault::Reset);
    assert_eq!(poll_rx(&mut rx, STALL_POLLS_MAX), 0);
    assert_eq!(rx.fault(), Some(QueueFault::Reset));
    assert_eq!(flush_rx(&mut rx), four_flushed());
}

/// Issue 14 item 9 (the hal's "Flush and quiet devices"): a device that ignores the stop of a
/// receive queue keeps using its ring, so the flush hands nothing back, records
/// `StopTimeout` and refuses pushes; what the device then completes comes back with its own
/// completion, and the first stop it acknowledges hands back the rest — every token exactly
/// once.
pub fn a_receive_stop_the_device_does_not_acknowledge_holds_the_buffers_until_one_it_does<
    F: Fixture,
>() {
    let p = pair::<F>();
    let mem = p.b.platform().alloc_dma(BUF * 8).unwrap();
    let mut rx = p.nic_b.open_rx::<16>(0, RxConfig::new(BUF as u32)).unwrap();
    post(&mut rx, &mem, 4);
    p.b.inject(DeviceFault::RefuseStop {
        ring: Some(Ring::Rx(0)),
        count: 1,
    });
    assert_eq!(
        flush_rx(&mut rx),
        [],
        "nothing handed back that the device may still write"
    );
    assert_eq!(rx.fault(), Some(QueueFault::StopTimeout));
    assert_eq!(rx.pending(), 4, "held");
    assert_eq!(
        rx.push(rx_buf(&mem, 4), Token(4)),
        Err(PushError::Fault(QueueFault::StopTimeout))
    );
    // The device did keep the ring: a frame still lands in the first buffer.
    send_all(&p, &[frame(MAC_B, MAC_A, 100, 9)]);
    let mut out = [NO_RX; 8];
    assert_eq!(rx.poll(&mut out), 1);
    assert_eq!((out[0].token, out[0].status), (Token(0), Ok(())));
    // The next flush's stop is acknowledged: the rest come back, once.
    let rest: Vec<_> = (1..4).map(|t| (t, Err(RxError::Flushed))).collect();
    assert_eq!(flush_rx(&mut rx), rest);
    assert_eq!(rx.pending(), 0);
    assert_eq!(
        rx.fault(),
        Some(QueueFault::StopTimeout),
        "faults are sticky"
    );
    assert_eq!(flush_rx(&mut rx), [], "each token once");
}

/// The same for a transmit queue: frames whose write-backs never came are held while the
/// device ignores the stop, and come back `Flushed` after a stop it acknowledges.
pub fn a_transmit_stop_the_device_does_not_acknowledge_holds_the_frames_until_one_it_does<
    F: Fixture,
>() {
    let p = pair::<F>();
    let mem = p.a.platform().alloc_dma(BUF).unwrap();
    let mut tx = p.nic_a.open_tx::<16>(0, TxConfig::default()).unwrap();
    p.a.inject(DeviceFault::WithholdWriteback {
        ring: Some(Ring::Tx(0)),
        count: usize::MAX,
    });
    let seg = TxSegment {
        iova: mem.iova(),
        len: 60,
    };
    for t in 0..2 {
        tx.push(&[seg], Token(t), Report::Always).unwrap();
    }
    tx.doorbell();
    p.a.inject(DeviceFault::RefuseStop {
        ring: Some(Ring::Tx(0)),
        count: 1,
    });
    tx.flush();
    assert_eq!(drain_tx(&mut tx), []);
    assert_eq!(tx.fault(), Some(QueueFault::StopTimeout));
    assert_eq!(tx.pending(), 2, "held");
    assert_eq!(
        tx.push(&[seg], Token(2), Report::Always),
        Err(PushError::Fault(QueueFault::StopTimeout))
    );
    tx.flush();
    let got: Vec<_> = drain_tx(&mut tx)
        .iter()
        .map(|c| (c.token.0, c.status))
        .collect();
    assert_eq!(
        got,
        [(0, Err(TxError::Flushed)), (1, Err(TxError::Flushed))]
    );
    assert_eq!(tx.pending(), 0);
}

/// A device that acknowledges the stop but not the start after a flush: the tokens come back
/// (the stop was acknowledged), and the queue records `StartTimeout` and refuses pushes rather
/// than take buffers that would never complete until the stall check.
pub fn a_restart_the_device_does_not_acknowledge_is_a_fault_not_a_silent_stall<F: Fixture>() {
    let p = pair::<F>();
    let mem = p.b.platform().alloc_dma(BUF * 8).unwrap();
    let mut rx = p.nic_b.open_rx::<16>(0, RxConfig::new(BUF as u32)).unwrap();
    post(&mut rx, &mem, 4);
    p.b.inject(DeviceFault::RefuseStart {
        ring: Some(Ring::Rx(0)),
        count: 1,
    });
    assert_eq!(flush_rx(&mut rx), four_flushed());
    assert_eq!(rx.fault(), Some(QueueFault::StartTimeout));
    assert_eq!(
        rx.push(rx_buf(&mem, 4), Token(4)),
        Err(PushError::Fault(QueueFault::StartTimeout))
    );
    assert_eq!(rx.pending(), 0);
}
