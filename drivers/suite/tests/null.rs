//! Every driver on its do-nothing device (`ringfab_emu::null`), the device the data-path and CQ
//! benchmarks measure against: bring-up succeeds, and a doorbell gets every pushed frame and
//! buffer back at once, each token once, in order, receives with the null device's frame length —
//! across several laps of the ring, so that wrapping indices are covered.

use ringfab_e1000e::E1000e;
use ringfab_emu::null::{NullPlatform, RX_FRAME_LEN};
use ringfab_emu::{E1000e82574, Igb82576, VirtioNetPci};
use ringfab_hal::{
    DmaRegion, Iova, Nic, Queue, Report, RxBuffer, RxCompletion, RxConfig, RxQueue, Token,
    TxCompletion, TxConfig, TxQueue, TxSegment,
};
use ringfab_igb::Igb;
use ringfab_virtio_net::VirtioNet;

const DEPTH: usize = 64;
const SLOT: u64 = 2048;
const BATCH: usize = 24;

fn batches_complete_at_the_doorbell<N: Nic>(nic: &N) {
    assert!(nic.link().up, "a null device's link is up");
    let mut tx = nic.open_tx::<DEPTH>(0, TxConfig::default()).unwrap();
    let mut rx = nic.open_rx::<DEPTH>(0, RxConfig::new(SLOT as u32)).unwrap();
    let mem = nic.alloc_dma(SLOT as usize * BATCH).unwrap();
    let at = |i: usize| Iova(mem.iova().0 + SLOT * i as u64);
    let mut next = 0u64;
    // 10 batches of 24 through rings of 64: the indices wrap several times.
    for _ in 0..10 {
        let first = next;
        for i in 0..BATCH {
            let seg = TxSegment {
                iova: at(i),
                len: 60,
            };
            tx.push(&[seg], Token(next + i as u64), Report::Always)
                .unwrap();
            let buf = RxBuffer {
                iova: at(i),
                len: SLOT as u32,
            };
            rx.push(buf, Token(next + i as u64)).unwrap();
        }
        next += BATCH as u64;
        tx.doorbell();
        rx.doorbell();
        let mut txc = [TxCompletion {
            token: Token(0),
            status: Ok(()),
        }; DEPTH];
        let mut rxc = [RxCompletion {
            token: Token(0),
            len: 0,
            status: Ok(()),
            rss: None,
            checksum: ringfab_hal::RxChecksum::NONE,
        }; DEPTH];
        assert_eq!(tx.poll(&mut txc), BATCH, "every frame sent at the doorbell");
        assert_eq!(
            rx.poll(&mut rxc),
            BATCH,
            "every buffer filled at the doorbell"
        );
        for (k, (t, r)) in txc[..BATCH].iter().zip(&rxc[..BATCH]).enumerate() {
            assert_eq!((t.token, t.status), (Token(first + k as u64), Ok(())));
            assert_eq!(
                (r.token, r.len, r.status),
                (Token(first + k as u64), RX_FRAME_LEN, Ok(()))
            );
        }
        assert_eq!((tx.pending(), rx.pending()), (0, 0));
    }
}

#[test]
fn igb_on_its_null_device() {
    batches_complete_at_the_doorbell(&Igb::new(NullPlatform::<Igb82576>::new()).unwrap());
}

#[test]
fn e1000e_on_its_null_device() {
    batches_complete_at_the_doorbell(&E1000e::new(NullPlatform::<E1000e82574>::new()).unwrap());
}

#[test]
fn virtio_net_on_its_null_device() {
    let nic = VirtioNet::new(NullPlatform::<VirtioNetPci>::new()).unwrap();
    assert!(!nic.capabilities().in_order_completion);
    batches_complete_at_the_doorbell(&nic);
}
