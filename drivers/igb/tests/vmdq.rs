//! `Nic::set_rx_queue_mac` on the emulated 82576: VMDq pools steered by destination address,
//! as QEMU's `igb` model does it (pool n = receive queue n, MRQC bit 0).

mod common;

use common::Igb82576Fixture as F;
use ringfab_emu::{EmuDma, EmuIgb, Wire};
use ringfab_hal::{
    DmaRegion, Error, Iova, MacAddr, Nic, Platform, Queue, RssConfig, RssHashes, RxBuffer,
    RxConfig, RxMode, RxQueue, Token,
};
use ringfab_nic_suite::{
    device, frame, pair, post, read_bytes, send_all, udp_frame, Fixture, Udp, BUF, MAC_A, MAC_B,
    NO_RX,
};

type Driver = <F as Fixture>::Nic;
type Rx<'a> = <Driver as Nic>::Rx<'a, 32>;

/// The address given to queue `q` in these tests.
fn mac(q: u16) -> MacAddr {
    MacAddr([0x52, 0x54, 0x00, 0x00, 0x01, q as u8])
}

/// A unicast address nobody has.
const STRANGER: MacAddr = MacAddr([0x52, 0x54, 0x00, 0x00, 0x00, 0x0C]);

/// A device with MAC [`MAC_B`] on a wire of its own, brought up; frames reach it with
/// `EmuNic::receive`.
fn one() -> (Wire, EmuIgb, Driver) {
    let wire = Wire::new();
    let dev = device::<F>(MAC_B, &wire);
    let nic = F::driver(dev.platform()).unwrap();
    (wire, dev, nic)
}

/// Receive queue `q` with 31 buffers of [`BUF`] bytes posted (tokens 0..31).
fn open<'a>(nic: &'a Driver, dev: &EmuIgb, q: u16) -> (Rx<'a>, EmuDma) {
    let mut rx = nic.open_rx::<32>(q, RxConfig::new(BUF as u32)).unwrap();
    let mem = dev.platform().alloc_dma(BUF * 31).unwrap();
    post(&mut rx, &mem, 31);
    (rx, mem)
}

/// The frames queue `rx` received since the last call, each checked `Ok`.
fn drain(rx: &mut Rx<'_>, mem: &EmuDma) -> Vec<Vec<u8>> {
    let mut out = [NO_RX; 32];
    let n = rx.poll(&mut out);
    out[..n]
        .iter()
        .map(|c| {
            assert_eq!(c.status, Ok(()));
            assert_eq!(c.rss, None, "no RSS in VMDq mode");
            let bytes = read_bytes(mem, c.token.0 as usize * BUF, c.len as usize);
            // Give the buffer back for the next frame.
            rx.push(
                RxBuffer {
                    iova: Iova(mem.iova().0 + c.token.0 * BUF as u64),
                    len: BUF as u32,
                },
                c.token,
            )
            .unwrap();
            bytes
        })
        .collect()
}

/// Every queue's received frames, after ringing each queue's doorbell for the buffers given
/// back.
fn drain_all(queues: &mut [(u16, Rx<'_>, EmuDma)]) -> Vec<(u16, Vec<Vec<u8>>)> {
    queues
        .iter_mut()
        .map(|(q, rx, mem)| {
            let got = drain(rx, mem);
            rx.doorbell();
            (*q, got)
        })
        .collect()
}

/// The same 0x88B5 frame (not IP: nothing to hash) to `dst`, payload seeded by `seed`.
fn to(dst: MacAddr, seed: u8) -> Vec<u8> {
    frame(dst, MAC_A, 46, seed)
}

#[test]
fn capabilities_offer_eight_address_queues() {
    let (_w, _dev, nic) = one();
    assert_eq!(nic.capabilities().rx_mac_queues, 8);
}

#[test]
fn frames_to_each_queue_address_land_on_that_queue_and_station_and_broadcast_on_queue_0() {
    let (_w, dev, nic) = one();
    let ids = [0u16, 1, 3, 6, 7];
    let mut queues: Vec<_> = ids
        .iter()
        .map(|&q| {
            let (rx, mem) = open(&nic, &dev, q);
            (q, rx, mem)
        })
        .collect();
    for &q in &ids[1..] {
        nic.set_rx_queue_mac(q, Some(mac(q))).unwrap();
    }
    // Twice round, interleaved, so that each queue gets two frames in order.
    let mut expected: Vec<(u16, Vec<Vec<u8>>)> = ids.iter().map(|&q| (q, Vec::new())).collect();
    for round in 0..2u8 {
        for (i, &q) in ids.iter().enumerate().rev() {
            let dst = if q == 0 { MAC_B } else { mac(q) };
            let f = to(dst, round * 16 + i as u8);
            dev.receive(&f);
            expected[i].1.push(f);
        }
        let b = to(MacAddr::BROADCAST, 200 + round);
        dev.receive(&b);
        expected[0].1.push(b);
    }
    assert_eq!(drain_all(&mut queues), expected);
}

#[test]
fn frames_sent_over_the_wire_are_steered_too_ip_or_not() {
    let p = pair::<F>();
    let (mut rx0, mem0) = open(&p.nic_b, &p.b, 0);
    let (mut rx5, mem5) = open(&p.nic_b, &p.b, 5);
    p.nic_b.set_rx_queue_mac(5, Some(mac(5))).unwrap();
    let udp = udp_frame(mac(5), MAC_A, Udp::ports(1000, 2000), &[7; 30]);
    let frames = vec![to(mac(5), 1), udp.clone(), to(MAC_B, 2)];
    send_all(&p, &frames);
    assert_eq!(drain(&mut rx5, &mem5), [frames[0].clone(), udp]);
    assert_eq!(drain(&mut rx0, &mem0), [frames[2].clone()]);
}

#[test]
fn removing_an_address_stops_its_frames_and_removing_the_last_restores_queue_0_and_rss() {
    let (_w, dev, nic) = one();
    let (mut rx0, mem0) = open(&nic, &dev, 0);
    let (mut rx2, mem2) = open(&nic, &dev, 2);
    let (mut rx4, mem4) = open(&nic, &dev, 4);
    nic.set_rx_queue_mac(2, Some(mac(2))).unwrap();
    nic.set_rx_queue_mac(4, Some(mac(4))).unwrap();
    nic.set_rx_queue_mac(2, None).unwrap();
    // Removing twice is harmless.
    nic.set_rx_queue_mac(2, None).unwrap();
    dev.receive(&to(mac(2), 1));
    dev.receive(&to(mac(4), 2));
    dev.receive(&to(MAC_B, 3));
    assert!(drain(&mut rx2, &mem2).is_empty(), "its address is gone");
    assert_eq!(drain(&mut rx4, &mem4), [to(mac(4), 2)]);
    assert_eq!(
        drain(&mut rx0, &mem0),
        [to(MAC_B, 3)],
        "not promiscuous: mac(2) dropped"
    );
    rx0.doorbell();
    nic.set_rx_queue_mac(4, None).unwrap();
    dev.receive(&to(mac(4), 4));
    dev.receive(&to(MAC_B, 5));
    dev.receive(&to(MacAddr::BROADCAST, 6));
    assert!(drain(&mut rx4, &mem4).is_empty());
    assert_eq!(
        drain(&mut rx0, &mem0),
        [to(MAC_B, 5), to(MacAddr::BROADCAST, 6)],
        "out of VMDq mode: the accept filter and queue 0, as after bring-up"
    );
    // RSS is available again.
    let key = [0x6Du8; 40];
    let table = [0u16; 128];
    let cfg = RssConfig {
        key: &key,
        table: &table,
        hashes: RssHashes::ALL_IPV4,
    };
    nic.set_rss(&cfg).unwrap();
}

#[test]
fn promiscuous_sends_unknown_unicast_to_queue_0_and_known_addresses_still_to_their_queue() {
    let (_w, dev, nic) = one();
    let (mut rx0, mem0) = open(&nic, &dev, 0);
    let (mut rx1, mem1) = open(&nic, &dev, 1);
    nic.set_rx_queue_mac(1, Some(mac(1))).unwrap();
    dev.receive(&to(STRANGER, 1));
    assert!(drain(&mut rx0, &mem0).is_empty(), "not promiscuous");
    nic.set_rx_mode(RxMode::PROMISCUOUS).unwrap();
    dev.receive(&to(STRANGER, 2));
    dev.receive(&to(mac(1), 3));
    assert_eq!(drain(&mut rx0, &mem0), [to(STRANGER, 2)]);
    assert_eq!(
        drain(&mut rx1, &mem1),
        [to(mac(1), 3)],
        "not also on queue 0"
    );
}

#[test]
fn multicast_and_broadcast_follow_the_rx_mode_in_vmdq_mode() {
    let (_w, dev, nic) = one();
    let (mut rx0, mem0) = open(&nic, &dev, 0);
    nic.set_rx_queue_mac(3, Some(mac(3))).unwrap();
    let group = MacAddr([0x01, 0x00, 0x5E, 0x00, 0x00, 0x42]);
    dev.receive(&to(group, 1));
    assert!(drain(&mut rx0, &mem0).is_empty(), "no all-multicast");
    let mut mode = RxMode::default();
    mode.all_multicast = true;
    nic.set_rx_mode(mode).unwrap();
    dev.receive(&to(group, 2));
    dev.receive(&to(MacAddr::BROADCAST, 3));
    assert_eq!(
        drain(&mut rx0, &mem0),
        [to(group, 2), to(MacAddr::BROADCAST, 3)]
    );
    rx0.doorbell();
    mode.all_multicast = false;
    mode.broadcast = false;
    nic.set_rx_mode(mode).unwrap();
    dev.receive(&to(group, 4));
    dev.receive(&to(MacAddr::BROADCAST, 5));
    dev.receive(&to(MAC_B, 6));
    assert_eq!(drain(&mut rx0, &mem0), [to(MAC_B, 6)]);
}

#[test]
fn a_long_frame_reaches_a_queue_address() {
    let (_w, dev, nic) = one();
    const LEN: usize = ringfab_igb::MAX_FRAME_LEN;
    const SLOT: usize = 16 * 1024;
    let mut rx = nic.open_rx::<8>(6, RxConfig::new(SLOT as u32)).unwrap();
    let mem = dev.platform().alloc_dma(SLOT).unwrap();
    rx.push(
        RxBuffer {
            iova: mem.iova(),
            len: SLOT as u32,
        },
        Token(0),
    )
    .unwrap();
    rx.doorbell();
    nic.set_rx_queue_mac(6, Some(mac(6))).unwrap();
    let f = frame(mac(6), MAC_A, LEN - 14, 9);
    dev.receive(&f);
    let mut out = [NO_RX; 1];
    assert_eq!(rx.poll(&mut out), 1);
    assert_eq!(out[0].status, Ok(()));
    assert_eq!(read_bytes(&mem, 0, out[0].len as usize), f);
}

#[test]
fn refusals_follow_the_hal_contract() {
    let (_w, _dev, nic) = one();
    for q in [0u16, 8, 15, 200] {
        assert_eq!(
            nic.set_rx_queue_mac(q, Some(mac(1))),
            Err(Error::QueueIndex { index: q, count: 8 })
        );
        assert_eq!(
            nic.set_rx_queue_mac(q, None),
            Err(Error::QueueIndex { index: q, count: 8 })
        );
    }
    let bad = [
        MacAddr::BROADCAST,
        MacAddr([0x01, 0x00, 0x5E, 0x00, 0x00, 0x01]),
        MacAddr([0x33, 0x33, 0x00, 0x00, 0x00, 0x01]),
        MacAddr([0; 6]),
        MAC_B,
    ];
    for a in bad {
        assert_eq!(
            nic.set_rx_queue_mac(1, Some(a)),
            Err(Error::RxMacAddress),
            "{a}"
        );
    }
    nic.set_rx_queue_mac(1, Some(mac(1))).unwrap();
    assert_eq!(
        nic.set_rx_queue_mac(2, Some(mac(1))),
        Err(Error::RxMacAddress),
        "another queue has it"
    );
    // Giving a queue its own address again, or a new one, is fine.
    nic.set_rx_queue_mac(1, Some(mac(1))).unwrap();
    nic.set_rx_queue_mac(1, Some(mac(9))).unwrap();
    nic.set_rx_queue_mac(2, Some(mac(1))).unwrap();
}

#[test]
fn a_new_address_replaces_the_queues_old_one() {
    let (_w, dev, nic) = one();
    let (mut rx1, mem1) = open(&nic, &dev, 1);
    nic.set_rx_queue_mac(1, Some(mac(1))).unwrap();
    nic.set_rx_queue_mac(1, Some(mac(11))).unwrap();
    dev.receive(&to(mac(1), 1));
    dev.receive(&to(mac(11), 2));
    assert_eq!(drain(&mut rx1, &mem1), [to(mac(11), 2)]);
}

#[test]
fn rss_and_queue_addresses_exclude_each_other_both_ways() {
    let (_w, _dev, nic) = one();
    let key = [0x6Du8; 40];
    let table: Vec<u16> = (0..128).map(|i| i % 2).collect();
    let rss = RssConfig {
        key: &key,
        table: &table,
        hashes: RssHashes::ALL_IPV4,
    };
    nic.set_rss(&rss).unwrap();
    assert_eq!(
        nic.set_rx_queue_mac(1, Some(mac(1))),
        Err(Error::Unsupported)
    );
    assert_eq!(nic.set_rx_queue_mac(1, None), Err(Error::Unsupported));
    // RSS off (no hash enabled): addresses allowed.
    nic.set_rss(&RssConfig {
        hashes: RssHashes::default(),
        ..rss
    })
    .unwrap();
    nic.set_rx_queue_mac(1, Some(mac(1))).unwrap();
    assert_eq!(nic.set_rss(&rss), Err(Error::Unsupported));
    assert_eq!(
        nic.set_rss(&RssConfig {
            hashes: RssHashes::default(),
            ..rss
        }),
        Err(Error::Unsupported),
        "even switching RSS off would take the device out of VMDq mode"
    );
    nic.set_rx_queue_mac(1, None).unwrap();
    nic.set_rss(&rss).unwrap();
}

#[test]
fn reset_forgets_queue_addresses() {
    let (_w, dev, nic) = one();
    nic.set_rx_queue_mac(1, Some(mac(1))).unwrap();
    nic.reset().unwrap();
    let (mut rx0, mem0) = open(&nic, &dev, 0);
    let (mut rx1, mem1) = open(&nic, &dev, 1);
    dev.receive(&to(mac(1), 1));
    dev.receive(&to(MAC_B, 2));
    assert!(drain(&mut rx1, &mem1).is_empty());
    assert_eq!(drain(&mut rx0, &mem0), [to(MAC_B, 2)]);
    // And the queue may take the same address again.
    nic.set_rx_queue_mac(2, Some(mac(1))).unwrap();
}
