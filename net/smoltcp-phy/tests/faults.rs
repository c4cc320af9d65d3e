//! A device that lies or misbehaves under a TCP exchange (the emulated NICs' `DeviceFault`s):
//! no panic, no byte delivered wrong, and the exchange completes where TCP can make up for
//! what the device did.

mod common;

use common::{exchange, Model, Pair};
use ringfab_emu::{DeviceFault, Ring};
use ringfab_hal::QueueFault;
use ringfab_smoltcp::echo::ClientState;
use ringfab_smoltcp::Config;
use smoltcp::time::Duration;

/// 64 KiB: two windows.
const TOTAL: u64 = 64 * 1024;

/// What the fault must lead to.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Expect {
    /// The driver refuses the completions the device lied in; the device drops and counts
    /// them as `rx_device_errors` (at least this many), TCP retransmits, the exchange
    /// completes.
    Counted(u64),
    /// Frames are late, lost, out of order or refused without a count of this device's;
    /// TCP makes up for it and the exchange completes.
    Completes,
    /// An in-order ring (the Intel ones) stops behind a write-back that never lands on its
    /// own descriptor, and the device looks healthy to the hal's stall check: a watchdog
    /// (the transmit timeout or the idle receive flush) flushes the queue, which delivers what
    /// the device finished, and the exchange completes.
    Watchdog,
    /// virtio-net's used-index jump puts the device in `NeedsReset`, a queue fault its owner
    /// must recover from (tests/recovery.rs does): the exchange stops, the fault is
    /// reported, nothing panics, and no wrong byte is delivered.
    Faulted,
}

fn faults(model: Model) -> Vec<(DeviceFault, Expect)> {
    use DeviceFault::*;
    use Expect::*;
    let mut list = vec![
        (
            OversizeLength {
                queue: None,
                count: 8,
                extra: 100,
            },
            Counted(8),
        ),
        (
            GarbageStatus {
                ring: Some(Ring::Rx(0)),
                count: 8,
                bits: 0xffff_ff00,
            },
            Counted(8),
        ),
        (
            GarbageStatus {
                ring: Some(Ring::Tx(0)),
                count: 8,
                bits: 0xffff_ff00,
            },
            Completes,
        ),
        (
            ExactLength {
                queue: None,
                count: 4,
                len: 0,
            },
            Counted(4),
        ),
        (
            ExactLength {
                queue: None,
                count: 4,
                len: 65535,
            },
            Counted(4),
        ),
        // A length inside the buffer but shorter than the frame: the driver cannot tell,
        // smoltcp drops the cut frame as malformed.
        (
            ExactLength {
                queue: None,
                count: 4,
                len: 30,
            },
            Completes,
        ),
        (
            DelayWriteback {
                ring: None,
                count: 16,
                steps: 2,
            },
            Completes,
        ),
        (
            WithholdWriteback {
                ring: Some(Ring::Rx(0)),
                count: 4,
            },
            // virtio-net completes by id: the buffers withheld are lost, the rest go on.
            if model == Model::VirtioNet {
                Completes
            } else {
                Watchdog
            },
        ),
        (
            WithholdWriteback {
                ring: Some(Ring::Tx(0)),
                count: 4,
            },
            Completes,
        ),
    ];
    match model {
        Model::Igb | Model::E1000e => list.extend([
            (
                MisplaceWriteback {
                    ring: None,
                    count: 4,
                    offset: 5,
                },
                Watchdog,
            ),
            (
                StrayWriteback {
                    ring: None,
                    count: 4,
                },
                Completes,
            ),
        ]),
        Model::VirtioNet => list.extend([
            (
                CompleteOutOfOrder {
                    ring: None,
                    count: 16,
                },
                Completes,
            ),
            (
                LieUsedId {
                    ring: None,
                    count: 4,
                    id: 1000,
                },
                Completes,
            ),
            (
                JumpUsedIdx {
                    ring: Some(Ring::Rx(0)),
                    by: 3,
                },
                Faulted,
            ),
            (
                RepeatUsedId {
                    ring: None,
                    count: 4,
                },
                Completes,
            ),
            (
                RewindUsedIdx {
                    ring: Some(Ring::Rx(0)),
                    by: 2,
                },
                Completes,
            ),
        ]),
    }
    list
}

fn device_faults_give_no_panic_and_no_wrong_byte(model: Model) {
    // Both watchdogs on: a ring stuck behind a write-back that never lands is flushed.
    let mut watchdogs = Config::default();
    watchdogs.tx_timeout = Some(Duration::from_millis(500));
    watchdogs.rx_idle_flush = Some(Duration::from_millis(500));
    for (fault, expect) in faults(model) {
        for on_server in [false, true] {
            let pair = Pair::new(model);
            let (mut a, mut b) = pair.devices_with(&watchdogs);
            let emu = if on_server { &pair.emu_b } else { &pair.emu_a };
            let out = exchange(
                &pair.wire,
                &mut a,
                &mut b,
                TOTAL,
                Duration::from_secs(120),
                |round| {
                    // The fault strikes once the connection carries data.
                    if round == 3 {
                        emu.inject(fault);
                    }
                    // Delayed write-backs land a little later.
                    emu.run_until_idle();
                },
            );
            let c = if on_server {
                out.counters_b
            } else {
                out.counters_a
            };
            assert!(
                !matches!(out.client, ClientState::Mismatch { .. }),
                "{model:?} {fault:?}: a wrong byte was delivered: {out:?}"
            );
            match expect {
                Expect::Counted(n) => {
                    assert!(c.rx_device_errors >= n, "{model:?} {fault:?}: {c:?}");
                    assert_eq!(
                        out.client,
                        ClientState::Done,
                        "{model:?} {fault:?}: {out:?}"
                    );
                    assert_eq!(out.server.echoed, TOTAL);
                }
                Expect::Completes => {
                    assert_eq!(
                        out.client,
                        ClientState::Done,
                        "{model:?} {fault:?}: {out:?}"
                    );
                    assert_eq!(out.server.echoed, TOTAL);
                }
                Expect::Watchdog => {
                    assert!(
                        c.rx_idle_flushes + c.tx_timeouts > 0,
                        "{model:?} {fault:?}: {c:?}"
                    );
                    assert_eq!(
                        out.client,
                        ClientState::Done,
                        "{model:?} {fault:?}: {out:?}"
                    );
                    assert_eq!(out.server.echoed, TOTAL);
                }
                Expect::Faulted => {
                    let found = if on_server { out.fault_b } else { out.fault_a };
                    assert_eq!(
                        found,
                        Some(QueueFault::NeedsReset),
                        "{model:?} {fault:?} {out:?}"
                    );
                    assert!(
                        !out.client.is_finished() && out.server.echoed < TOTAL,
                        "{model:?} {fault:?}: {out:?}"
                    );
                }
            }
        }
    }
}

#[test]
fn device_faults_give_no_panic_and_no_wrong_byte_on_igb() {
    device_faults_give_no_panic_and_no_wrong_byte(Model::Igb);
}

#[test]
fn device_faults_give_no_panic_and_no_wrong_byte_on_e1000e() {
    device_faults_give_no_panic_and_no_wrong_byte(Model::E1000e);
}

#[test]
fn device_faults_give_no_panic_and_no_wrong_byte_on_virtio_net() {
    device_faults_give_no_panic_and_no_wrong_byte(Model::VirtioNet);
}
