//! Multiqueue and long runs: queue pairs made active through the control queue, RSS steering
//! by the device's Toeplitz hash and indirection table, steering without RSS, and many frames
//! through small rings with every token back once.

mod fixture;

use fixture::{config, pair_with, VirtioNetFixture};
use ringfab_emu::{toeplitz, DeviceFault, Ring};
use ringfab_hal::{
    DmaRegion, Error, Iova, Nic, Platform, Queue, Report, RssConfig, RssHashes, RxConfig, RxQueue,
    Token, TxConfig, TxQueue, TxSegment,
};
use ringfab_nic_suite::{
    drain_rx, drain_tx, post, push_frame, read_bytes, rx_buf, udp_frame, write_bytes, Pair, Udp,
    BUF, MAC_A, MAC_B, NO_RX, NO_TX,
};

const KEY: [u8; 40] = [
    0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0,
    0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30, 0xf2, 0x0c,
    0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
];

fn mq(pairs: u16, rss: bool) -> Pair<VirtioNetFixture> {
    let (mut a, mut b) = (config(MAC_A), config(MAC_B));
    for c in [&mut a, &mut b] {
        c.queue_pairs = pairs;
        c.rss = rss;
    }
    pair_with(a, b)
}

#[test]
fn bring_up_activates_every_queue_pair_through_the_control_queue() {
    let p = mq(4, false);
    let caps = p.nic_b.capabilities();
    assert_eq!((caps.tx_queues, caps.rx_queues), (4, 4));
    assert_eq!(
        p.b.active_queue_pairs(),
        4,
        "VIRTIO_NET_CTRL_MQ_VQ_PAIRS_SET 4"
    );
    assert!(caps.rss.is_none());
    let table = [0u16; 128];
    let rss = RssConfig {
        key: &KEY,
        table: &table,
        hashes: RssHashes::ALL_IPV4,
    };
    assert_eq!(p.nic_b.set_rss(&rss), Err(Error::Unsupported));
    assert_eq!(p.nic_b.irq_vectors(), 10, "2 × 4 + 2, QEMU's default");
}

#[test]
fn without_rss_every_frame_arrives_on_pair_0_and_every_pair_transmits() {
    let p = mq(2, false);
    let mut rx0 = p.nic_b.open_rx::<16>(0, RxConfig::new(BUF as u32)).unwrap();
    let mut rx1 = p.nic_b.open_rx::<16>(1, RxConfig::new(BUF as u32)).unwrap();
    let (m0, m1) = (
        p.nic_b.platform().alloc_dma(BUF * 16).unwrap(),
        p.nic_b.platform().alloc_dma(BUF * 16).unwrap(),
    );
    post(&mut rx0, &m0, 16);
    post(&mut rx1, &m1, 16);
    let mut tx0 = p.nic_a.open_tx::<8>(0, TxConfig::default()).unwrap();
    let mut tx1 = p.nic_a.open_tx::<8>(1, TxConfig::default()).unwrap();
    let tm = p.nic_a.platform().alloc_dma(BUF * 8).unwrap();
    for i in 0..4u16 {
        let f = udp_frame(MAC_B, MAC_A, Udp::ports(1000 + i, 2000), &[i as u8; 20]);
        let tx = if i % 2 == 0 { &mut tx0 } else { &mut tx1 };
        push_frame(tx, &tm, usize::from(i), &f, u64::from(i), Report::Always);
        tx.doorbell();
    }
    p.wire.run_until_idle();
    assert_eq!(drain_tx(&mut tx0).len(), 2);
    assert_eq!(drain_tx(&mut tx1).len(), 2);
    assert_eq!(drain_rx(&mut rx0, &m0).len(), 4);
    assert!(drain_rx(&mut rx1, &m1).is_empty());
}

/// Sends `flows` UDP flows (two frames each) from A on transmit queue 0 to B, whose four
/// receive queues have buffers; returns how many frames each receive queue got.
fn spread_of_flows(p: &Pair<VirtioNetFixture>, flows: u16) -> [usize; 4] {
    let mut rxs: Vec<_> = (0..4)
        .map(|q| p.nic_b.open_rx::<64>(q, RxConfig::new(BUF as u32)).unwrap())
        .collect();
    let mems: Vec<_> = (0..4)
        .map(|_| p.nic_b.platform().alloc_dma(BUF * 64).unwrap())
        .collect();
    for (rx, m) in rxs.iter_mut().zip(&mems) {
        post(rx, m, 63);
    }
    let mut tx = p.nic_a.open_tx::<64>(0, TxConfig::default()).unwrap();
    let tm = p.nic_a.platform().alloc_dma(BUF * 64).unwrap();
    for i in 0..2 * flows {
        let f = udp_frame(MAC_B, MAC_A, Udp::ports(1000 + i / 2, 2000), &[0; 20]);
        push_frame(
            &mut tx,
            &tm,
            usize::from(i),
            &f,
            u64::from(i),
            Report::Always,
        );
    }
    tx.doorbell();
    p.wire.run_until_idle();
    assert_eq!(drain_tx(&mut tx).len(), usize::from(2 * flows));
    let mut spread = [0; 4];
    for (q, (rx, m)) in rxs.iter_mut().zip(&mems).enumerate() {
        spread[q] = drain_rx(rx, m).len();
    }
    spread
}

/// A four-queue tap (`multiqueue_backend`) without RSS offered: the device keeps QEMU's rule —
/// the backend's queue — and the driver cannot change it, so flows spread over the pairs.
/// With RSS offered, the driver's bring-up programs RSS with no hash type, and every frame
/// arrives on pair 0 until the application sets RSS (the QEMU test `virtio-rss-four-queues`
/// found frames on every pair before).
#[test]
fn on_a_multiqueue_backend_bring_up_steers_every_frame_to_pair_0_where_rss_is_offered() {
    let on_taps = |rss: bool| {
        let (mut a, mut b) = (config(MAC_A), config(MAC_B));
        for c in [&mut a, &mut b] {
            c.queue_pairs = 4;
            c.rss = rss;
            c.multiqueue_backend = true;
        }
        pair_with(a, b)
    };
    let spread = spread_of_flows(&on_taps(false), 16);
    assert_eq!(spread.iter().sum::<usize>(), 32);
    assert!(
        spread.iter().filter(|&&n| n > 0).count() >= 2,
        "the backend's queues spread flows without RSS: {spread:?}"
    );
    assert_eq!(spread_of_flows(&on_taps(true), 16), [32, 0, 0, 0]);
}

/// The receive queue the device must pick for `flow` under `table`.
fn expected_queue(flow: Udp, table: &[u16; 128]) -> u16 {
    let input = toeplitz::ipv4_ports_input(flow.src, flow.dst, flow.sport, flow.dport);
    table[toeplitz::hash(&KEY, &input) as usize & 127]
}

#[test]
fn rss_steers_each_flow_to_the_queue_its_hash_and_table_name() {
    let p = mq(4, true);
    let caps = p.nic_b.capabilities();
    let rss_caps = caps.rss.expect("RSS offered and negotiated");
    assert_eq!((rss_caps.key_len, rss_caps.table_len), (40, 128));
    assert!(rss_caps.hashes.ipv4_udp);
    let mut table = [0u16; 128];
    for (i, e) in table.iter_mut().enumerate() {
        *e = (i % 4) as u16;
    }
    p.nic_b
        .set_rss(&RssConfig {
            key: &KEY,
            table: &table,
            hashes: RssHashes::ALL_IPV4,
        })
        .unwrap();
    assert_eq!(
        p.b.active_queue_pairs(),
        4,
        "max_tx_vq keeps every pair active"
    );
    let bad = [7u16; 128];
    assert_eq!(
        p.nic_b.set_rss(&RssConfig {
            key: &KEY,
            table: &bad,
            hashes: RssHashes::ALL_IPV4,
        }),
        Err(Error::RssConfig)
    );
    p.nic_b
        .set_rss(&RssConfig {
            key: &KEY,
            table: &table,
            hashes: RssHashes::ALL_IPV4,
        })
        .unwrap();

    let mems: Vec<_> = (0..4)
        .map(|_| p.nic_b.platform().alloc_dma(BUF * 32).unwrap())
        .collect();
    let mut rxs: Vec<_> = (0..4u16)
        .map(|q| p.nic_b.open_rx::<32>(q, RxConfig::new(BUF as u32)).unwrap())
        .collect();
    for (rx, m) in rxs.iter_mut().zip(&mems) {
        post(rx, m, 32);
    }
    let mut tx = p.nic_a.open_tx::<64>(0, TxConfig::default()).unwrap();
    let tm = p.nic_a.platform().alloc_dma(BUF * 64).unwrap();
    let flows: Vec<_> = (0..40u16).map(|i| Udp::ports(5000 + 37 * i, 80)).collect();
    for (i, f) in flows.iter().enumerate() {
        let fr = udp_frame(MAC_B, MAC_A, *f, &[i as u8; 16]);
        push_frame(&mut tx, &tm, i, &fr, i as u64, Report::Always);
    }
    tx.doorbell();
    p.wire.run_until_idle();
    let mut seen = 0;
    let mut queues_used = [false; 4];
    for (q, (rx, m)) in rxs.iter_mut().zip(&mems).enumerate() {
        for (c, bytes) in drain_rx(rx, m) {
            assert_eq!(c.status, Ok(()));
            let flow = Udp::of(&bytes);
            assert_eq!(expected_queue(flow, &table), q as u16, "{flow:?}");
            queues_used[q] = true;
            seen += 1;
        }
    }
    assert_eq!(seen, flows.len());
    assert!(
        queues_used.iter().all(|&u| u),
        "40 flows reach all four queues"
    );
}

#[test]
fn a_long_run_through_four_entry_rings_brings_every_token_back_once_despite_reordering() {
    let p = mq(1, false);
    let mut tx = p.nic_a.open_tx::<4>(0, TxConfig::default()).unwrap();
    let mut rx = p.nic_b.open_rx::<4>(0, RxConfig::new(BUF as u32)).unwrap();
    let tm = p.nic_a.platform().alloc_dma(BUF * 4).unwrap();
    let rm = p.nic_b.platform().alloc_dma(BUF * 4).unwrap();
    // Out-of-order completion on both rings for the whole run.
    p.a.inject(DeviceFault::CompleteOutOfOrder {
        ring: Some(Ring::Tx(0)),
        count: usize::MAX,
    });
    p.b.inject(DeviceFault::CompleteOutOfOrder {
        ring: Some(Ring::Rx(0)),
        count: usize::MAX,
    });
    const FRAMES: u64 = 20_000;
    let mut slot_of = std::collections::HashMap::new();
    let mut free_slots: Vec<usize> = (0..4).collect();
    let mut next_rx = 0u64;
    let give = |rx: &mut ringfab_virtio_net::VirtioNetRx<'_, _, 4>,
                free: &mut Vec<usize>,
                slots: &mut std::collections::HashMap<u64, usize>,
                next: &mut u64| {
        while let Some(s) = free.pop() {
            rx.push(rx_buf(&rm, s), Token(*next)).unwrap();
            slots.insert(*next, s);
            *next += 1;
        }
        rx.doorbell();
    };
    give(&mut rx, &mut free_slots, &mut slot_of, &mut next_rx);
    let (mut sent, mut tx_back, mut got) = (0u64, 0u64, Vec::new());
    let mut tx_seen = vec![false; FRAMES as usize];
    let mut out_tx = [NO_TX; 4];
    let mut out_rx = [NO_RX; 4];
    let mut rounds = 0;
    while (got.len() as u64) < FRAMES && rounds < 10 * FRAMES {
        rounds += 1;
        while sent < FRAMES && tx.free() > 0 && sent < got.len() as u64 + 3 {
            let f = udp_frame(MAC_B, MAC_A, Udp::ports(1, 2), &sent.to_le_bytes());
            let slot = (sent % 4) as usize;
            write_bytes(&tm, slot * BUF, &f);
            let seg = TxSegment {
                iova: Iova(tm.iova().0 + (slot * BUF) as u64),
                len: f.len() as u16,
            };
            tx.push(&[seg], Token(sent), Report::Always).unwrap();
            sent += 1;
        }
        tx.doorbell();
        p.wire.run_until_idle();
        let n = tx.poll(&mut out_tx);
        for c in &out_tx[..n] {
            assert_eq!(c.status, Ok(()));
            assert!(!std::mem::replace(&mut tx_seen[c.token.0 as usize], true));
            tx_back += 1;
        }
        let n = rx.poll(&mut out_rx);
        for c in &out_rx[..n] {
            assert_eq!(c.status, Ok(()), "{c:?}");
            let s = slot_of.remove(&c.token.0).expect("a token given once");
            let bytes = read_bytes(&rm, s * BUF, c.len as usize);
            got.push(u64::from_le_bytes(bytes[42..50].try_into().unwrap()));
            free_slots.push(s);
        }
        give(&mut rx, &mut free_slots, &mut slot_of, &mut next_rx);
    }
    assert_eq!(got.len() as u64, FRAMES);
    assert_eq!(tx_back, FRAMES);
    got.sort_unstable();
    assert!(got.iter().copied().eq(0..FRAMES), "every frame once");
    assert_eq!((tx.device_errors(), rx.device_errors()), (0, 0));
    assert_eq!(p.nic_b.stats().rx_packets, FRAMES);
}
