//! Sections `queues` and `rss`: many queues and many frames — traffic between two emulated
//! devices over one or more queue pairs with RSS, in one direction and in both at once, and a
//! million frames through small rings. [`exchange`] is public so that a driver with more queues
//! runs it with more (igb: 4 and 8).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use ringfab_emu::{toeplitz, EmuDma};
use ringfab_hal::{
    DmaRegion, Iova, MacAddr, Nic, Platform, Queue, Report, RssConfig, RssInfo, RxConfig, RxQueue,
    Token, TxConfig, TxQueue, TxSegment,
};

use crate::{
    expected_hash, in_order, pair, post, send_all, udp_frame, Fixture, Pair, RxSlots, Udp, BUF,
    MAC_A, MAC_B, NO_RX, NO_TX, UDP_PAYLOAD,
};

/// Ring depth of every queue in the multi-queue tests.
const DEPTH: usize = 64;
/// Frames in flight per direction: fewer than the buffers one receive queue holds, so that RSS
/// sending them all to one queue cannot overrun it.
const WINDOW: usize = 32;
/// Frames sent on each transmit queue: more than a ring holds, so every ring wraps.
const PER_QUEUE: usize = 150;
/// UDP flows per transmit queue.
const FLOWS: usize = 8;

/// The RSS key both devices use: Microsoft's verification key.
const KEY: [u8; toeplitz::KEY_LEN] = [
    0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0,
    0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30, 0xf2, 0x0c,
    0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
];

/// A redirection table spreading its 128 entries round-robin over queues `0..k`.
fn reta(k: usize) -> [u16; 128] {
    std::array::from_fn(|i| (i % k) as u16)
}

/// What the emulated device must report for `flow` — the hash and its kind — and the receive
/// queue it must pick, computed independently of the driver: the emu's Toeplitz hash, low 7
/// bits into the table.
fn expected_rss<N: Nic>(nic: &N, flow: Udp, table: &[u16; 128]) -> (RssInfo, u16) {
    let (hash, kind) = expected_hash(nic, &KEY, flow);
    (RssInfo { hash, kind }, table[(hash & 127) as usize])
}

/// One end of the exchange.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Side {
    A,
    B,
}

impl Side {
    fn mac(self) -> MacAddr {
        match self {
            Side::A => MAC_A,
            Side::B => MAC_B,
        }
    }

    fn peer(self) -> Side {
        match self {
            Side::A => Side::B,
            Side::B => Side::A,
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// The flow of frame `seq` sent by `from` on transmit queue `txq`.
fn flow_of(from: Side, txq: usize, seq: usize) -> Udp {
    let net = from.index() as u8;
    Udp {
        // A source address per flow, so that a hash over the addresses only spreads them too.
        src: [10, net, (txq * FLOWS + seq % FLOWS) as u8, 1],
        dst: [10, net, 0, 2],
        // Spaced ports, so that the hash does not split the flows evenly by construction.
        sport: 1024 + 97 * (txq * FLOWS + seq % FLOWS) as u16,
        dport: 4791,
    }
}

/// Frame `seq` of transmit queue `txq` of `from`: its payload names the sender, the queue and
/// the sequence number, then a pattern; lengths vary from 60 to 259 bytes.
fn stream_frame(from: Side, txq: usize, seq: usize) -> Vec<u8> {
    let mut payload = vec![from.index() as u8, txq as u8];
    payload.extend_from_slice(&(seq as u32).to_le_bytes());
    payload.extend((0..12 + seq * 37 % 200).map(|i| (i as u8) ^ (seq as u8) ^ (txq as u8)));
    udp_frame(
        from.peer().mac(),
        from.mac(),
        flow_of(from, txq, seq),
        &payload,
    )
}

/// What one end saw.
#[derive(Debug, Default)]
struct Seen {
    /// Frames received per receive queue.
    per_queue: Vec<usize>,
    /// The receive queue of every flow received.
    flow_queue: HashMap<Udp, u16>,
}

/// Runs one end: opens `k` transmit queues if it sends and `k` receive queues if it receives,
/// waits at `ready` for the other end, then sends [`PER_QUEUE`] frames on each transmit queue
/// and receives `k * PER_QUEUE` frames, checking each one (and the RSS hash it carries if
/// `hash_reported`). `received[side]` counts frames the side has received and replaced the
/// buffer of; senders keep at most [`WINDOW`] in flight.
#[allow(
    clippy::too_many_arguments,
    reason = "one end's whole configuration, spelled out at the two call sites"
)]
fn endpoint<N: Nic>(
    nic: &N,
    mem: &ringfab_emu::EmuPlatform,
    me: Side,
    (send, receive): (bool, bool),
    k: usize,
    hash_reported: bool,
    ready: &Barrier,
    received: &[AtomicUsize; 2],
) -> Seen {
    let table = reta(k);
    let mut txs: Vec<_> = (0..k)
        .filter(|_| send)
        .map(|q| nic.open_tx::<DEPTH>(q as u16, TxConfig::default()).unwrap())
        .collect();
    let mut rxs: Vec<_> = (0..k)
        .filter(|_| receive)
        .map(|q| {
            nic.open_rx::<DEPTH>(q as u16, RxConfig::new(BUF as u32))
                .unwrap()
        })
        .collect();
    let tx_mem: Vec<_> = txs
        .iter()
        .map(|_| mem.alloc_dma(DEPTH * BUF).unwrap())
        .collect();
    let mut rx_slots: Vec<_> = rxs
        .iter()
        .map(|_| RxSlots::new(mem.alloc_dma(DEPTH * BUF).unwrap(), DEPTH))
        .collect();
    for (rx, slots) in rxs.iter_mut().zip(&mut rx_slots) {
        slots.refill(rx);
    }
    let in_order = in_order(nic);
    // Per transmit queue: the tokens completed (by id, they may complete in any order).
    let mut tx_seen = vec![vec![false; PER_QUEUE]; txs.len()];
    ready.wait();

    let total = k * PER_QUEUE;
    let mut seen = Seen {
        per_queue: vec![0; rxs.len()],
        ..Seen::default()
    };
    // Per (sending queue, sequence number): times received; per transmit queue: next token due.
    let mut got = vec![vec![0u8; PER_QUEUE]; k];
    let mut tx_next = vec![0usize; txs.len()];
    let mut tx_done = vec![0usize; txs.len()];
    let (mut sent, mut rx_total) = (0usize, 0usize);
    let mut out_tx = [NO_TX; DEPTH];
    let mut out_rx = [NO_RX; DEPTH];
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let tx_finished = tx_done.iter().all(|&d| d == PER_QUEUE);
        if (!send || tx_finished) && (!receive || rx_total == total) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{me:?} stalled: sent {sent}, TX done {tx_done:?}, received {rx_total}"
        );
        let mut progress = false;
        // Round-robin over the transmit queues, within the window.
        let in_flight = sent - received[me.peer().index()].load(Ordering::Acquire);
        let mut budget = WINDOW.saturating_sub(in_flight);
        while budget > 0 && sent < txs.len() * PER_QUEUE {
            for (q, tx) in txs.iter_mut().enumerate() {
                let seq = tx_next[q];
                if budget == 0 || seq == PER_QUEUE || tx.free() < 2 {
                    continue;
                }
                let f = stream_frame(me, q, seq);
                let off = (seq % DEPTH) * BUF;
                tx_mem[q].write_bytes(off, &f);
                let base = tx_mem[q].iova().0 + off as u64;
                // Every third frame as header + payload, to cross descriptors too.
                let segs = [
                    TxSegment {
                        iova: Iova(base),
                        len: UDP_PAYLOAD as u16,
                    },
                    TxSegment {
                        iova: Iova(base + UDP_PAYLOAD as u64),
                        len: (f.len() - UDP_PAYLOAD) as u16,
                    },
                ];
                let whole = [TxSegment {
                    iova: Iova(base),
                    len: f.len() as u16,
                }];
                let segs: &[TxSegment] = if seq % 3 == 0 { &segs } else { &whole };
                tx.push(segs, Token(seq as u64), Report::Always).unwrap();
                tx_next[q] += 1;
                sent += 1;
                budget -= 1;
                progress = true;
            }
            if txs
                .iter()
                .zip(&tx_next)
                .all(|(tx, &n)| n == PER_QUEUE || tx.free() < 2)
            {
                break;
            }
        }
        for tx in txs.iter_mut() {
            tx.doorbell();
        }
        for (q, tx) in txs.iter_mut().enumerate() {
            let n = tx.poll(&mut out_tx);
            for c in &out_tx[..n] {
                assert_eq!(c.status, Ok(()), "{me:?} TX queue {q}: {c:?}");
                let t = c.token.0 as usize;
                if in_order {
                    assert_eq!(t, tx_done[q], "{me:?} TX queue {q} in order");
                }
                assert!(
                    !std::mem::replace(&mut tx_seen[q][t], true),
                    "{me:?} TX queue {q}: token {t} twice"
                );
                tx_done[q] += 1;
            }
            progress |= n > 0;
        }
        for (q, rx) in rxs.iter_mut().enumerate() {
            let n = rx.poll(&mut out_rx);
            for c in &out_rx[..n] {
                assert_eq!(c.status, Ok(()), "{me:?} RX queue {q}: {c:?}");
                let bytes = rx_slots[q].take(c);
                let from = me.peer();
                assert!(bytes.len() > UDP_PAYLOAD + 6, "{me:?} RX queue {q}: {c:?}");
                let p = &bytes[UDP_PAYLOAD..];
                let (txq, seq) = (
                    usize::from(p[1]),
                    u32::from_le_bytes([p[2], p[3], p[4], p[5]]) as usize,
                );
                assert_eq!(p[0], from.index() as u8, "{me:?} got a frame of its own");
                assert!(txq < k && seq < PER_QUEUE, "{me:?}: queue {txq} seq {seq}");
                assert_eq!(
                    bytes,
                    stream_frame(from, txq, seq),
                    "{me:?} queue {txq} seq {seq}"
                );
                got[txq][seq] += 1;
                assert_eq!(got[txq][seq], 1, "{me:?}: queue {txq} seq {seq} twice");
                let flow = Udp::of(&bytes);
                let (rss, want_q) = expected_rss(nic, flow, &table);
                assert_eq!(c.rss, hash_reported.then_some(rss), "{me:?} {flow:?}");
                assert_eq!(
                    usize::from(want_q),
                    q,
                    "{me:?}: {flow:?} on the RETA's queue"
                );
                let first = *seen.flow_queue.entry(flow).or_insert(q as u16);
                assert_eq!(usize::from(first), q, "{me:?}: {flow:?} changed queue");
                seen.per_queue[q] += 1;
            }
            if n > 0 {
                rx_slots[q].refill(rx);
                rx_total += n;
                received[me.index()].fetch_add(n, Ordering::Release);
                progress = true;
            }
        }
        if !progress {
            std::thread::yield_now();
        }
    }
    if receive {
        assert!(
            got.iter().flatten().all(|&n| n == 1),
            "{me:?}: every frame once"
        );
        assert_eq!(nic.stats().rx_missed, 0, "{me:?}");
    }
    for tx in &txs {
        assert_eq!(tx.pending(), 0, "{me:?}");
    }
    seen
}

/// Frames from A to B (and from B to A if `both`) over `k` queue pairs, both ends running at
/// once in their own threads, with RSS over `k` receive queues on the receiving ends: every
/// frame arrives once and intact, with the hash the emu's own Toeplitz code gives and on the
/// queue its redirection table names, and each flow stays on one queue.
pub fn exchange<F: Fixture>(k: usize, both: bool) {
    let hash = F::RSS_HASH_REPORTED;
    let p = pair::<F>();
    let table = reta(k);
    for nic in [&p.nic_a, &p.nic_b] {
        nic.set_rss(&RssConfig {
            key: &KEY,
            table: &table,
            hashes: nic.capabilities().rss.expect("RSS").hashes,
        })
        .unwrap();
    }
    let ready = Barrier::new(2);
    let received = [AtomicUsize::new(0), AtomicUsize::new(0)];
    let (seen_a, seen_b) = std::thread::scope(|s| {
        let (p, ready, received) = (&p, &ready, &received);
        let a = s.spawn(move || {
            let mem = p.a.platform();
            endpoint(
                &p.nic_a,
                &mem,
                Side::A,
                (true, both),
                k,
                hash,
                ready,
                received,
            )
        });
        let b = s.spawn(move || {
            let mem = p.b.platform();
            endpoint(
                &p.nic_b,
                &mem,
                Side::B,
                (both, true),
                k,
                hash,
                ready,
                received,
            )
        });
        (a.join().unwrap(), b.join().unwrap())
    });
    let total = k * PER_QUEUE;
    let receivers: Vec<(Side, &Seen)> = if both {
        vec![(Side::B, &seen_b), (Side::A, &seen_a)]
    } else {
        vec![(Side::B, &seen_b)]
    };
    for (side, seen) in receivers {
        let from = side.peer();
        // What the RETA must have done, frame by frame, from the emu's own hash.
        let mut want = vec![0usize; k];
        for q in 0..k {
            for seq in 0..PER_QUEUE {
                want[usize::from(expected_rss(&p.nic_b, flow_of(from, q, seq), &table).1)] += 1;
            }
        }
        assert_eq!(seen.per_queue, want, "{side:?}: frames per receive queue");
        assert_eq!(seen.per_queue.iter().sum::<usize>(), total);
        assert_eq!(
            seen.flow_queue.len(),
            k * FLOWS,
            "{side:?}: every flow seen"
        );
        let used = seen.per_queue.iter().filter(|&&n| n > 0).count();
        if k > 1 {
            assert!(
                used > 1,
                "{side:?}: RSS used one queue of {k}: {:?}",
                seen.per_queue
            );
        }
    }
    let sent = if both { 2 * total } else { total };
    assert_eq!(p.wire.stats().sent, sent as u64);
    assert!(p.a.iommu_faults().is_empty() && p.b.iommu_faults().is_empty());
}

/// One queue pair carries every frame once and intact (with the hash RSS reports).
pub fn one_queue_pair_carries_every_frame_once_and_intact<F: Fixture>() {
    exchange::<F>(1, false);
}

/// Two queue pairs carry every frame once, RSS keeping each flow on its queue.
pub fn two_queue_pairs_carry_every_frame_once_with_rss_keeping_each_flow_on_its_queue<
    F: Fixture,
>() {
    exchange::<F>(2, false);
}

/// One queue pair carries frames both ways at once.
pub fn one_queue_pair_carries_frames_both_ways_at_once<F: Fixture>() {
    exchange::<F>(1, true);
}

/// Two queue pairs carry frames both ways at once.
pub fn two_queue_pairs_carry_frames_both_ways_at_once<F: Fixture>() {
    exchange::<F>(2, true);
}

/// A million frames wrap 64 descriptor rings with every token back once, and in order where the
/// NIC completes in order; each receive buffer holds the frame sent in its turn.
pub fn a_million_frames_wrap_64_descriptor_rings_with_every_token_back_once_and_in_order<
    F: Fixture,
>() {
    const FRAMES: usize = 1_000_000;
    const BATCH: usize = 32;
    /// Where the sequence number sits: 8-byte aligned, inside the payload.
    const SEQ_AT: usize = 16;
    let p = pair::<F>();
    let mut tx = p.nic_a.open_tx::<DEPTH>(0, TxConfig::default()).unwrap();
    let mut rx = p
        .nic_b
        .open_rx::<DEPTH>(0, RxConfig::new(BUF as u32))
        .unwrap();
    let tx_mem = p.a.platform().alloc_dma(DEPTH * BUF).unwrap();
    let mut rx_slots = RxSlots::new(p.b.platform().alloc_dma(DEPTH * BUF).unwrap(), DEPTH);
    let in_order = in_order(&p.nic_a);
    let template = crate::frame(MAC_B, MAC_A, 46, 0x5A);
    for slot in 0..DEPTH {
        tx_mem.write_bytes(slot * BUF, &template);
    }
    let posted = rx_slots.refill(&mut rx);

    let mut tx_count = vec![0u8; FRAMES];
    let mut rx_count = vec![0u8; FRAMES + DEPTH];
    let (mut sent, mut tx_done, mut rx_done) = (0usize, 0usize, 0usize);
    let mut out_tx = [NO_TX; DEPTH];
    let mut out_rx = [NO_RX; DEPTH];
    let mut rounds = 0usize;
    while rx_done < FRAMES {
        rounds += 1;
        assert!(
            rounds < 4 * FRAMES / BATCH,
            "no progress: sent {sent}, received {rx_done}"
        );
        let in_flight = sent - rx_done;
        let n = BATCH
            .min(FRAMES - sent)
            .min(tx.free())
            .min(posted - in_flight);
        for _ in 0..n {
            let slot = sent % DEPTH;
            tx_mem.write_u64(slot * BUF + SEQ_AT, sent as u64);
            let seg = TxSegment {
                iova: Iova(tx_mem.iova().0 + (slot * BUF) as u64),
                len: template.len() as u16,
            };
            tx.push(&[seg], Token(sent as u64), Report::Always).unwrap();
            sent += 1;
        }
        tx.doorbell();
        let k = tx.poll(&mut out_tx);
        for c in &out_tx[..k] {
            assert_eq!(c.status, Ok(()), "{c:?}");
            if in_order {
                assert_eq!(c.token.0 as usize, tx_done, "TX tokens in order");
            }
            tx_count[c.token.0 as usize] += 1;
            tx_done += 1;
        }
        let k = rx.poll(&mut out_rx);
        for c in &out_rx[..k] {
            let t = RxSlots::<EmuDma>::seq(c.token) as usize;
            if in_order {
                assert_eq!(t, rx_done, "RX tokens in order");
            }
            rx_count[t] += 1;
            assert_eq!((c.status, c.len), (Ok(()), template.len() as u32), "{c:?}");
            // The device fills buffers in the order they were posted: buffer t holds frame t.
            let seq = rx_slots
                .mem()
                .read_u64(RxSlots::<EmuDma>::offset(c.token) + SEQ_AT);
            assert_eq!(seq, t as u64, "payload sequence number");
            rx_slots.release(c.token);
            rx_done += 1;
        }
        rx_slots.refill(&mut rx);
    }
    // The last batch's write-back is already there: its final frame carries RS.
    let k = tx.poll(&mut out_tx);
    for c in &out_tx[..k] {
        assert_eq!(c.status, Ok(()));
        tx_count[c.token.0 as usize] += 1;
    }
    assert!(tx_count.iter().all(|&c| c == 1), "every TX token once");
    assert!(
        rx_count[..FRAMES].iter().all(|&c| c == 1),
        "every RX token once"
    );
    assert_eq!(tx.pending(), 0);
    assert_eq!(
        rx.pending(),
        posted,
        "the ring is full of fresh buffers again"
    );
    assert_eq!(p.wire.stats().sent, FRAMES as u64);
    assert_eq!(p.nic_b.stats().rx_missed, 0);
    assert!(p.a.iommu_faults().is_empty() && p.b.iommu_faults().is_empty());
}

/// RSS spreads IPv4/UDP flows over two receive queues, each frame on the queue the hash's table
/// entry names, reported (where the NIC reports it) with the hash kind the NIC offers for UDP
/// frames.
pub fn rss_spreads_flows_over_receive_queues_and_reports_the_hash<F: Fixture>() {
    let p = pair::<F>();
    let (key, table) = rss_key_and_table();
    p.nic_b
        .set_rss(&RssConfig {
            key: &key,
            table: &table,
            hashes: p.nic_b.capabilities().rss.expect("RSS").hashes,
        })
        .unwrap();
    assert_rss_spreads_flows(&p, &key, &table);
}

/// A key and a table alternating between receive queues 0 and 1.
pub(crate) fn rss_key_and_table() -> ([u8; 40], Vec<u16>) {
    let key: [u8; 40] = std::array::from_fn(|i| (i as u8).wrapping_mul(37).wrapping_add(11));
    (key, (0..128).map(|i| i % 2).collect())
}

/// Opens receive queues 0 and 1 of B, sends 28 IPv4/UDP flows from A and checks that each frame
/// arrives on the queue `table` names for its hash under `key` (reported, where the NIC
/// reports it), and that both queues get some.
pub(crate) fn assert_rss_spreads_flows<F: Fixture>(p: &Pair<F>, key: &[u8; 40], table: &[u16]) {
    let mut rxs: Vec<_> = (0..2)
        .map(|q| p.nic_b.open_rx::<32>(q, RxConfig::new(2048)).unwrap())
        .collect();
    let mems: Vec<_> = (0..2)
        .map(|_| p.b.platform().alloc_dma(2048 * 31).unwrap())
        .collect();
    for (rx, mem) in rxs.iter_mut().zip(&mems) {
        post(rx, mem, 31);
    }
    // Flows differing in source address and port: a hash over addresses only spreads them too.
    let flows: Vec<Udp> = (0..28u8)
        .map(|i| {
            let mut flow = Udp::ports(1000 + u16::from(i), 2000);
            flow.src = [10, 0, i, 1];
            flow
        })
        .collect();
    let frames: Vec<Vec<u8>> = flows
        .iter()
        .map(|&flow| udp_frame(MAC_B, MAC_A, flow, &[0xAB; 18]))
        .collect();
    send_all(p, &frames);
    let mut per_queue = Vec::new();
    let mut total = 0;
    for (q, rx) in rxs.iter_mut().enumerate() {
        let mut out = [NO_RX; 32];
        let n = rx.poll(&mut out);
        for c in &out[..n] {
            assert_eq!(c.status, Ok(()));
            let bytes = crate::read_bytes(&mems[q], c.token.0 as usize * BUF, c.len as usize);
            let flow = Udp::of(&bytes);
            assert!(flows.contains(&flow), "{flow:?}");
            let (hash, kind) = expected_hash(&p.nic_b, key, flow);
            let reported = F::RSS_HASH_REPORTED.then_some(RssInfo { hash, kind });
            assert_eq!(c.rss, reported, "{flow:?}");
            assert_eq!(
                usize::from(table[(hash & 127) as usize]),
                q,
                "RETA picked this queue"
            );
        }
        per_queue.push(n);
        total += n;
    }
    assert_eq!(total, 28);
    assert!(per_queue.iter().all(|&n| n > 0), "{per_queue:?}");
}
