//! virtio-net's part of the hostile-device suite (issue 14; the NIC-independent part is the
//! suite's `hostile` section): a device that writes its used ring against the rules — an id
//! repeated, a used index that goes backwards — in exact, deterministic sequences.

mod fixture;

use fixture::{pair, VirtioNetFixture};
use ringfab_emu::{DeviceFault, Ring};
use ringfab_hal::{Nic, Platform, Queue, RxConfig, RxError, RxQueue, Token};
use ringfab_nic_suite::{frame, rx_buf, send_all, Pair, BUF, MAC_A, MAC_B, NO_RX};

fn rx_on_b(
    p: &Pair<VirtioNetFixture>,
) -> (
    ringfab_virtio_net::VirtioNetRx<'_, ringfab_emu::EmuPlatform, 16>,
    ringfab_emu::EmuDma,
) {
    let rx = p.nic_b.open_rx::<16>(0, RxConfig::new(BUF as u32)).unwrap();
    let mem = p.nic_b.platform().alloc_dma(BUF * 64).unwrap();
    (rx, mem)
}

/// "The device MUST NOT write a used element for a buffer it has not been given" is not a
/// sentence of the spec; what it says (virtio 1.2 §2.7.8) is that the used ring holds the
/// buffers the device has finished with, each once. A repeated id names a buffer already
/// back: it is refused, and a buffer posted again under the same id afterwards is not taken
/// for done on the stale entry's word.
#[test]
fn a_repeated_used_id_completes_its_buffer_once_and_never_a_buffer_posted_after_it() {
    let p = pair();
    let (mut rx, mem) = rx_on_b(&p);
    for t in 0..4 {
        rx.push(rx_buf(&mem, t), Token(t as u64)).unwrap();
    }
    rx.doorbell();
    p.b.inject(DeviceFault::RepeatUsedId {
        ring: Some(Ring::Rx(0)),
        count: 1,
    });
    send_all(&p, &[frame(MAC_B, MAC_A, 60, 0)]);
    // One completion at a time: the driver takes id 0's entry, and posts a new buffer, which
    // gets the id just freed, before it reads the repeated entry.
    let mut out = [NO_RX; 1];
    assert_eq!(rx.poll(&mut out), 1);
    assert_eq!((out[0].token, out[0].status), (Token(0), Ok(())));
    rx.push(rx_buf(&mem, 4), Token(4)).unwrap();
    rx.doorbell();
    let mut more = [NO_RX; 8];
    let n = rx.poll(&mut more);
    assert!(
        more[..n].iter().all(|c| c.token != Token(4)),
        "buffer 4 was never filled, yet came back on a stale entry: {:?}",
        &more[..n]
    );
    assert!(rx.device_errors() >= 1, "the repeated entry is counted");
    // The device fills buffers 1.. in order; buffer 4 comes back only when it is filled.
    send_all(
        &p,
        &(1..5)
            .map(|i| frame(MAC_B, MAC_A, 60, i))
            .collect::<Vec<_>>(),
    );
    let mut tokens = Vec::new();
    loop {
        let n = rx.poll(&mut more);
        if n == 0 {
            break;
        }
        for c in &more[..n] {
            assert_eq!(c.status, Ok(()), "{c:?}");
            tokens.push(c.token.0);
        }
    }
    tokens.sort_unstable();
    assert_eq!(tokens, [1, 2, 3, 4]);
}

/// A used index that goes backwards (virtio 1.2 §2.7.8: the device increments `idx`) claims
/// more entries than buffers out, which is refused; the flush then takes every buffer back
/// once, and the queue works after it.
#[test]
fn a_used_index_going_backwards_is_refused_and_flush_takes_every_buffer_back_once() {
    let p = pair();
    let (mut rx, mem) = rx_on_b(&p);
    for t in 0..4 {
        rx.push(rx_buf(&mem, t), Token(t as u64)).unwrap();
    }
    rx.doorbell();
    send_all(&p, &[frame(MAC_B, MAC_A, 60, 0)]);
    let mut out = [NO_RX; 8];
    assert_eq!(rx.poll(&mut out), 1);
    p.b.inject(DeviceFault::RewindUsedIdx {
        ring: Some(Ring::Rx(0)),
        by: 3,
    });
    send_all(&p, &[frame(MAC_B, MAC_A, 60, 1)]);
    assert_eq!(rx.poll(&mut out), 0, "nothing read behind a rewound index");
    assert!(rx.device_errors() >= 1);
    rx.flush();
    let mut back = Vec::new();
    loop {
        let n = rx.poll(&mut out);
        if n == 0 {
            break;
        }
        back.extend(out[..n].iter().map(|c| {
            (
                c.token.0,
                c.status.is_ok() || c.status == Err(RxError::Flushed),
            )
        }));
    }
    back.sort_unstable();
    assert_eq!(back, [(1, true), (2, true), (3, true)]);
    assert_eq!(rx.pending(), 0);
    rx.push(rx_buf(&mem, 4), Token(4)).unwrap();
    rx.doorbell();
    send_all(&p, &[frame(MAC_B, MAC_A, 60, 2)]);
    assert_eq!(rx.poll(&mut out), 1);
    assert_eq!((out[0].token, out[0].status), (Token(4), Ok(())));
}
