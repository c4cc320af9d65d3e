//! Checksum offload (issue 16, item 3): what a device marks verified on receive
//! ([`RxCompletion::checksum`](ringfab_hal::RxCompletion)) — only what it checked and found
//! right, as [`Offloads`](ringfab_hal::Offloads) says it checks — and the checksum a device
//! inserts on transmit ([`TxQueue::push_checksummed`]), checked on the wire in software, for
//! frames gathered from several segments of odd lengths and through a ring that wraps.

use ringfab_emu::Wire;
use ringfab_hal::{
    DmaRegion, Iova, Nic, Platform, PushError, Queue, Report, RxConfig, Token, TxChecksum,
    TxConfig, TxQueue, TxSegment,
};

use crate::{
    drain_rx, drain_tx, pair, post, send_all, udp_frame, write_bytes, Fixture, Udp, BUF, MAC_A,
    MAC_B,
};

/// The one's complement sum of `data` as big-endian words (an odd byte padded), folded.
fn ones_sum(data: &[u8], mut sum: u32) -> u16 {
    for w in data.chunks(2) {
        sum += u32::from(w[0]) << 8 | u32::from(w.get(1).copied().unwrap_or(0));
    }
    while sum > 0xFFFF {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    sum as u16
}

/// The sum of the IPv4 pseudo-header of the UDP datagram in `f` (a [`udp_frame`]): what the
/// partial-checksum model asks the sender to store in the checksum field.
fn pseudo_sum(f: &[u8]) -> u16 {
    let mut p = Vec::with_capacity(12);
    p.extend_from_slice(&f[26..34]);
    p.extend_from_slice(&[0, 17]);
    p.extend_from_slice(&f[38..40]);
    ones_sum(&p, 0)
}

/// Whether the UDP checksum of the datagram in `f` is present and right.
fn udp_checksum_right(f: &[u8]) -> bool {
    let udp_len = usize::from(u16::from_be_bytes([f[38], f[39]]));
    f[40..42] != [0, 0] && ones_sum(&f[34..34 + udp_len], u32::from(pseudo_sum(f))) == 0xFFFF
}

/// A [`udp_frame`] with its UDP checksum computed in software.
fn checksummed(flow: Udp, payload: &[u8]) -> Vec<u8> {
    let mut f = udp_frame(MAC_B, MAC_A, flow, payload);
    let udp_len = f.len() - 34;
    let sum = !ones_sum(&f[34..34 + udp_len], u32::from(pseudo_sum(&f)));
    let sum = if sum == 0 { 0xFFFF } else { sum };
    f[40..42].copy_from_slice(&sum.to_be_bytes());
    f
}

/// Where the UDP header of a [`udp_frame`] starts, and its checksum field's offset.
const UDP_CHECKSUM: TxChecksum = TxChecksum {
    start: 34,
    offset: TxChecksum::UDP,
};

/// The receive side: every frame is delivered good (a wrong checksum is not a frame error:
/// software checks it again and drops it), and a checksum is marked exactly when the device
/// checks that kind ([`Offloads`](ringfab_hal::Offloads)) and it was right — not a wrong one, a
/// UDP checksum of zero (none computed), a non-IP frame, nor a fragment's UDP checksum.
pub fn receive_marks_only_the_checksums_the_device_checked_and_found_right<F: Fixture>() {
    let p = pair::<F>();
    let offloads = p.nic_b.capabilities().offloads;
    let flow = Udp::ports(4000, 5000);
    let good = checksummed(flow, b"twelve bytes");
    let mut bad_ip = good.clone();
    bad_ip[24] ^= 0x40;
    let mut bad_udp = good.clone();
    bad_udp[41] ^= 0x01;
    let zero_udp = udp_frame(MAC_B, MAC_A, flow, b"twelve bytes");
    let not_ip = crate::frame(MAC_B, MAC_A, 60, 3);
    // A first fragment (MF set): its IPv4 header is whole, its UDP checksum covers bytes
    // other fragments carry, so no device checks it. The IPv4 checksum is made right again.
    let mut fragment = good.clone();
    fragment[20] = 0x20;
    fragment[24..26].copy_from_slice(&[0, 0]);
    let ip = !ones_sum(&fragment[14..34], 0);
    fragment[24..26].copy_from_slice(&ip.to_be_bytes());
    // (frame, IPv4 checksum right, UDP checksum present and right)
    let cases: [(&[u8], bool, bool); 6] = [
        (&good, true, true),
        (&bad_ip, false, true),
        (&bad_udp, true, false),
        (&zero_udp, true, false),
        (&not_ip, false, false),
        (&fragment, true, false),
    ];
    let mut rx = p.nic_b.open_rx::<16>(0, RxConfig::new(BUF as u32)).unwrap();
    let mem = p.b.platform().alloc_dma(BUF * 8).unwrap();
    post(&mut rx, &mem, cases.len());
    let frames: Vec<Vec<u8>> = cases.iter().map(|c| c.0.to_vec()).collect();
    send_all(&p, &frames);
    let got = drain_rx(&mut rx, &mem);
    let got = crate::in_key_order(&p.nic_b, got, |(c, _)| c.token.0);
    assert_eq!(got.len(), cases.len());
    for ((c, bytes), (sent, ipv4, l4)) in got.iter().zip(cases) {
        assert_eq!(c.status, Ok(()), "delivered: {c:?}");
        assert_eq!(&bytes[..sent.len()], sent, "intact");
        let what = format!("frame {:?}: {:?}", c.token, c.checksum);
        assert_eq!(
            c.checksum.ipv4_good(),
            ipv4 && offloads.rx_ipv4_checksum,
            "{what}"
        );
        assert_eq!(
            c.checksum.l4_good(),
            l4 && offloads.rx_l4_checksum,
            "{what}"
        );
    }
}

/// Sends `frames` from A's `tx` (each in slot `i` of `mem`, split into segments at `cuts`),
/// each with the checksum offload if `offload[i]`; runs the wire; checks every token back
/// `Ok`.
fn send_gathered<Q: TxQueue, D: DmaRegion>(
    tx: &mut Q,
    mem: &D,
    wire: &Wire,
    frames: &[(Vec<u8>, bool)],
    cuts: &[usize],
) {
    for (i, (f, offload)) in frames.iter().enumerate() {
        write_bytes(mem, i * BUF, f);
        let mut bounds: Vec<usize> = cuts.iter().copied().filter(|&c| c < f.len()).collect();
        bounds.insert(0, 0);
        bounds.push(f.len());
        let segs: Vec<TxSegment> = bounds
            .windows(2)
            .map(|w| TxSegment {
                iova: Iova(mem.iova().0 + (i * BUF + w[0]) as u64),
                len: (w[1] - w[0]) as u16,
            })
            .collect();
        let report = if i % 2 == 0 {
            Report::Always
        } else {
            Report::ErrorsOnly
        };
        let token = Token(i as u64);
        if *offload {
            tx.push_checksummed(&segs, token, report, UDP_CHECKSUM)
                .unwrap();
        } else {
            tx.push(&segs, token, report).unwrap();
        }
    }
    tx.doorbell();
    wire.run_until_idle();
    let done = drain_tx(tx);
    assert!(done.iter().all(|c| c.status == Ok(())), "{done:?}");
    assert_eq!(tx.pending(), 0, "every descriptor reclaimed, contexts too");
}

/// The transmit side: a frame pushed with the offload, its UDP checksum field holding the
/// pseudo-header's sum, arrives with the UDP checksum right — gathered from several segments
/// of odd lengths (the header alone, the payload split unevenly), payloads of odd and even
/// lengths, through a 16-descriptor ring many times over, mixed with frames pushed without
/// it, which arrive exactly as they were written (a checksum is inserted only where asked).
pub fn transmit_with_the_checksum_offload_puts_the_right_udp_checksum_on_the_wire<F: Fixture>() {
    let p = pair::<F>();
    if !p.nic_a.capabilities().offloads.tx_l4_checksum {
        let mut tx = p.nic_a.open_tx::<16>(0, TxConfig::default()).unwrap();
        let mem = p.a.platform().alloc_dma(BUF).unwrap();
        let seg = TxSegment {
            iova: mem.iova(),
            len: 60,
        };
        assert!(matches!(
            tx.push_checksummed(&[seg], Token(0), Report::Always, UDP_CHECKSUM),
            Err(PushError::Checksum { .. })
        ));
        return;
    }
    let mut tx = p.nic_a.open_tx::<16>(0, TxConfig::default()).unwrap();
    let mut rx = p.nic_b.open_rx::<64>(0, RxConfig::new(BUF as u32)).unwrap();
    let tx_mem = p.a.platform().alloc_dma(BUF * 3).unwrap();
    let rx_mem = p.b.platform().alloc_dma(BUF * 64).unwrap();
    let rx_l4 = p.nic_b.capabilities().offloads.rx_l4_checksum;
    let lengths = [0usize, 1, 2, 3, 17, 64, 101, 1000, 1471];
    let mut sent = 0;
    for round in 0..12 {
        // Three frames of up to four segments and a context each: 15 descriptors, all a
        // 16-descriptor ring has free (one slot stays empty).
        post(&mut rx, &rx_mem, 3);
        let frames: Vec<(Vec<u8>, bool)> = (0..3)
            .map(|i| {
                let n = lengths[(round * 3 + i) % lengths.len()];
                let payload: Vec<u8> = (0..n).map(|b| (b * 31 + round + i) as u8).collect();
                let mut f = udp_frame(MAC_B, MAC_A, Udp::ports(4000 + i as u16, 5000), &payload);
                let offload = (round + i) % 3 != 0;
                let seed = pseudo_sum(&f);
                // Without the offload the field keeps the seed: it must arrive unchanged.
                f[40..42].copy_from_slice(&seed.to_be_bytes());
                (f, offload)
            })
            .collect();
        // Segments: Ethernet + IPv4 + UDP headers (42), then the payload cut at odd places.
        send_gathered(&mut tx, &tx_mem, &p.wire, &frames, &[42, 45, 151]);
        let got = drain_rx(&mut rx, &rx_mem);
        assert_eq!(got.len(), frames.len(), "round {round}");
        let got = crate::in_key_order(&p.nic_b, got, |(c, _)| c.token.0);
        for ((c, bytes), (f, offload)) in got.iter().zip(&frames) {
            assert_eq!(c.status, Ok(()));
            let bytes = &bytes[..f.len()];
            if *offload {
                assert!(udp_checksum_right(bytes), "round {round}: {bytes:02x?}");
                assert_eq!(&bytes[..40], &f[..40], "only the checksum changes");
                assert_eq!(&bytes[42..], &f[42..]);
                assert_eq!(c.checksum.l4_good(), rx_l4, "the receiver agrees");
            } else {
                assert_eq!(bytes, &f[..], "no checksum where none was asked");
            }
            sent += 1;
        }
    }
    assert_eq!(sent, 36);
}

/// A checksum request whose field is not inside the frame is refused before anything is
/// queued, and the ring takes frames afterwards as before.
pub fn a_checksum_field_outside_the_frame_is_refused_and_nothing_is_queued<F: Fixture>() {
    let p = pair::<F>();
    if !p.nic_a.capabilities().offloads.tx_l4_checksum {
        return;
    }
    let mut tx = p.nic_a.open_tx::<16>(0, TxConfig::default()).unwrap();
    let mem = p.a.platform().alloc_dma(BUF).unwrap();
    let seg = |len| TxSegment {
        iova: mem.iova(),
        len,
    };
    let free = tx.free();
    // 41 bytes end one byte into the UDP checksum field at 40.
    assert_eq!(
        tx.push_checksummed(&[seg(41)], Token(1), Report::Always, UDP_CHECKSUM),
        Err(PushError::Checksum {
            start: 34,
            offset: 6
        })
    );
    assert_eq!((tx.free(), tx.pending()), (free, 0));
    let f = checksummed(Udp::ports(1, 2), b"x");
    write_bytes(&mem, 0, &f);
    tx.push_checksummed(
        &[seg(f.len() as u16)],
        Token(2),
        Report::Always,
        UDP_CHECKSUM,
    )
    .unwrap();
    tx.doorbell();
    p.wire.run_until_idle();
    assert_eq!(drain_tx(&mut tx).len(), 1);
}
