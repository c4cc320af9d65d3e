//! Critical device faults against the virtio-net driver (`ringfab-hal`'s "Critical faults"):
//! `DEVICE_NEEDS_RESET` (virtio 1.2 §2.1.2), a device reset behind the driver's back, a
//! virtqueue reset by the device, and surprise removal. Each is found by the stall check of
//! `poll` or by `check`, refuses pushes, gives every buffer back on flush, and — except
//! removal — is recovered by closing the queues, `Nic::recover` and opening them again.

mod fixture;

use fixture::{pair, VirtioNetFixture};
use ringfab_emu::{CriticalFault, DeviceFault, Ring};
use ringfab_hal::queue::{STALL_POLLS, STALL_POLLS_MAX};
use ringfab_hal::{
    Error, Nic, Platform, PushError, Queue, QueueFault, RxConfig, RxError, RxQueue, Token, TxConfig,
};
use ringfab_nic_suite::critical::{flush_rx, poll_rx};
use ringfab_nic_suite::{frame, post, rx_buf, send_all, Pair, BUF, MAC_A, MAC_B, NO_RX};

fn sorted(mut v: Vec<(u64, Result<(), RxError>)>) -> Vec<(u64, Result<(), RxError>)> {
    v.sort_unstable_by_key(|e| e.0);
    v
}

fn four_flushed() -> Vec<(u64, Result<(), RxError>)> {
    (0..4).map(|t| (t, Err(RxError::Flushed))).collect()
}

/// Whether B's receive queue 0, opened afresh, receives a frame from A.
fn b_receives(p: &Pair<VirtioNetFixture>) -> bool {
    let mem = p.b.platform().alloc_dma(BUF * 4).unwrap();
    let mut rx = p.nic_b.open_rx::<16>(0, RxConfig::new(BUF as u32)).unwrap();
    post(&mut rx, &mem, 4);
    send_all(p, &[frame(MAC_B, MAC_A, 80, 9)]);
    let mut out = [NO_RX; 8];
    rx.poll(&mut out) == 1 && out[0].status == Ok(())
}

#[test]
fn device_needs_reset_is_found_by_the_stall_check_and_recover_resets_the_device() {
    let p = pair();
    let mem = p.b.platform().alloc_dma(BUF * 8).unwrap();
    {
        let mut rx = p.nic_b.open_rx::<16>(0, RxConfig::new(BUF as u32)).unwrap();
        let mut tx = p.nic_b.open_tx::<16>(0, TxConfig::default()).unwrap();
        post(&mut rx, &mem, 4);
        p.b.inject_critical(CriticalFault::NeedsReset);
        assert!(p.nic_b.needs_reset());
        assert_eq!(poll_rx(&mut rx, STALL_POLLS - 1), 0);
        assert_eq!(
            rx.fault(),
            None,
            "no register is read before the stall bound"
        );
        assert_eq!(poll_rx(&mut rx, 1), 0);
        assert_eq!(rx.fault(), Some(QueueFault::NeedsReset));
        assert_eq!(tx.check(), Some(QueueFault::NeedsReset));
        assert_eq!(
            rx.push(rx_buf(&mem, 4), Token(4)),
            Err(PushError::Fault(QueueFault::NeedsReset))
        );
        assert_eq!(sorted(flush_rx(&mut rx)), four_flushed());
        assert_eq!(rx.pending(), 0);
    }
    p.nic_b.recover().unwrap();
    assert!(!p.nic_b.needs_reset(), "recover reset the device (§2.1.2)");
    assert!(b_receives(&p));
}

/// `QueueFault::NeedsReset` proves nothing about the device (hal `QueueFault::device_quiet`:
/// "Not `NeedsReset` (virtio 1.2 §2.1.2 promises nothing about a device in that state until it
/// is reset) nor `StopTimeout`: for those a flush asks for the stop again and holds the
/// buffers until the device acknowledges it"). A queue that needs a reset whose queue resets
/// the device ignores twice: each flush asks for the reset again, hands nothing back
/// (nothing `Flushed`) and refuses pushes; the third flush, acknowledged, hands back every
/// token, once ("every token comes back exactly once, or is held while `fault` says why").
#[test]
fn a_queue_that_needs_a_reset_retries_it_on_every_flush_and_holds_its_buffers_until_acknowledged() {
    let p = pair();
    let mem = p.b.platform().alloc_dma(BUF * 8).unwrap();
    {
        let mut rx = p.nic_b.open_rx::<16>(0, RxConfig::new(BUF as u32)).unwrap();
        post(&mut rx, &mem, 4);
        p.b.inject_critical(CriticalFault::NeedsReset);
        assert_eq!(rx.check(), Some(QueueFault::NeedsReset));
        p.b.inject(DeviceFault::RefuseStop {
            ring: Some(Ring::Rx(0)),
            count: 2,
        });
        for attempt in 0..2 {
            assert_eq!(
                flush_rx(&mut rx),
                [],
                "attempt {attempt}: nothing handed back while the device may still write"
            );
            assert_eq!(rx.pending(), 4, "attempt {attempt}: held");
            assert_eq!(
                rx.fault(),
                Some(QueueFault::NeedsReset),
                "the first fault stays (sticky)"
            );
            assert_eq!(
                rx.push(rx_buf(&mem, 4), Token(4)),
                Err(PushError::Fault(QueueFault::NeedsReset))
            );
        }
        // Both refusals were used up, one per flush: each flush asked for the reset again.
        assert_eq!(sorted(flush_rx(&mut rx)), four_flushed(), "acknowledged");
        assert_eq!(rx.pending(), 0);
        assert_eq!(flush_rx(&mut rx), [], "each token once");
    }
    p.nic_b.recover().unwrap();
    assert!(b_receives(&p));
}

#[test]
fn a_device_reset_behind_the_driver_is_found_and_recovered() {
    let p = pair();
    let mem = p.b.platform().alloc_dma(BUF * 8).unwrap();
    {
        let mut rx = p.nic_b.open_rx::<16>(0, RxConfig::new(BUF as u32)).unwrap();
        post(&mut rx, &mem, 4);
        p.b.inject_critical(CriticalFault::Reset);
        assert_eq!(p.b.device_status(), 0);
        assert_eq!(poll_rx(&mut rx, STALL_POLLS), 0);
        assert_eq!(rx.fault(), Some(QueueFault::Reset));
        assert_eq!(sorted(flush_rx(&mut rx)), four_flushed());
    }
    p.nic_b.recover().unwrap();
    assert!(b_receives(&p));
}

#[test]
fn a_virtqueue_reset_by_the_device_is_found_and_reopening_it_recovers() {
    let p = pair();
    let mem = p.b.platform().alloc_dma(BUF * 8).unwrap();
    {
        let mut rx = p.nic_b.open_rx::<16>(0, RxConfig::new(BUF as u32)).unwrap();
        post(&mut rx, &mem, 4);
        p.b.inject_critical(CriticalFault::DisableQueue(Ring::Rx(0)));
        assert_eq!(poll_rx(&mut rx, STALL_POLLS), 0);
        assert_eq!(rx.fault(), Some(QueueFault::Disabled));
        assert_eq!(sorted(flush_rx(&mut rx)), four_flushed());
    }
    p.nic_b.recover().unwrap();
    assert!(b_receives(&p));
}

/// `DEVICE_NEEDS_RESET` set after the queue has idled long enough for its checks to be spaced
/// out to [`STALL_POLLS_MAX`] is still found, within that many empty polls.
#[test]
fn device_needs_reset_after_a_long_idle_is_found_within_the_longest_period() {
    let p = pair();
    let mem = p.b.platform().alloc_dma(BUF * 8).unwrap();
    let mut rx = p.nic_b.open_rx::<16>(0, RxConfig::new(BUF as u32)).unwrap();
    post(&mut rx, &mem, 4);
    assert_eq!(poll_rx(&mut rx, 2 * STALL_POLLS_MAX), 0);
    assert_eq!(rx.fault(), None);
    p.b.inject_critical(CriticalFault::NeedsReset);
    assert_eq!(poll_rx(&mut rx, STALL_POLLS_MAX), 0);
    assert_eq!(rx.fault(), Some(QueueFault::NeedsReset));
    assert_eq!(sorted(flush_rx(&mut rx)), four_flushed());
}

#[test]
fn a_removed_device_is_found_and_recover_says_it_is_gone() {
    let p = pair();
    let mem = p.b.platform().alloc_dma(BUF * 8).unwrap();
    let mut rx = p.nic_b.open_rx::<16>(0, RxConfig::new(BUF as u32)).unwrap();
    post(&mut rx, &mem, 4);
    p.b.inject_critical(CriticalFault::SurpriseRemoval);
    assert_eq!(poll_rx(&mut rx, STALL_POLLS), 0);
    assert_eq!(rx.fault(), Some(QueueFault::Removed));
    assert_eq!(sorted(flush_rx(&mut rx)), four_flushed());
    drop(rx);
    assert_eq!(p.nic_b.recover(), Err(Error::DeviceRemoved));
}
