//! What only the 82574 does, against `ringfab-emu`'s model: its IVAR steering of queues to
//! MSI-X vectors, EITR throttling, and the refusal of an RSS hash over UDP ports. (Everything
//! NIC-independent is in the shared suite, `suite.rs`.)

mod fixture;

use std::time::Duration;

use fixture::E1000e82574Fixture as E1000e;
use ringfab_hal::{
    DmaRegion, Iova, Nic, Platform, Queue, Report, RssConfig, RssHashes, RxConfig, RxQueue, Token,
    TxConfig, TxQueue, TxSegment, Wait,
};
use ringfab_nic_suite::{
    frame, post, send_all, udp_frame, write_bytes, Udp, BUF, MAC_A, MAC_B, NO_RX, NO_TX,
};

fn pair() -> ringfab_nic_suite::Pair<E1000e> {
    ringfab_nic_suite::pair::<E1000e>()
}

#[test]
fn an_rss_hash_over_udp_ports_is_refused_not_silently_replaced() {
    let p = pair();
    let hashes = p.nic_b.capabilities().rss.unwrap().hashes;
    assert!(hashes.ipv4 && hashes.ipv4_tcp && !hashes.ipv4_udp);
    let key = [0x5Au8; 40];
    let table = [0u16; 128];
    assert_eq!(
        p.nic_b.set_rss(&RssConfig {
            key: &key,
            table: &table,
            hashes: RssHashes::ALL_IPV4,
        }),
        Err(ringfab_hal::Error::RssConfig)
    );
    // What the capabilities offer is accepted.
    assert_eq!(
        p.nic_b.set_rss(&RssConfig {
            key: &key,
            table: &table,
            hashes,
        }),
        Ok(())
    );
}

#[test]
fn eitr_throttling_holds_an_armed_queues_next_message_for_128_us() {
    let p = pair();
    let mut tx = p
        .nic_a
        .open_tx::<16>(1, TxConfig::with_interrupt(true))
        .unwrap();
    let wait = tx.interrupt().expect("wired").clone();
    // EITR resets to 0, throttling off (§7.4.4), and the driver leaves it: program it here.
    let eitr = ringfab_emu::e1000e::regs::EITR0 + 4 * usize::from(tx.interrupt_vector().unwrap());
    ringfab_hal::Mmio::write32(&p.a.platform().bar(0).unwrap(), eitr, 500);
    let mem = p.a.platform().alloc_dma(BUF * 4).unwrap();
    let f = frame(MAC_B, MAC_A, 100, 0);
    let push = |tx: &mut <ringfab_e1000e::E1000e<ringfab_emu::EmuPlatform> as Nic>::Tx<'_, 16>,
                slot: usize| {
        write_bytes(&mem, slot * BUF, &f);
        let seg = TxSegment {
            iova: Iova(mem.iova().0 + (slot * BUF) as u64),
            len: f.len() as u16,
        };
        tx.push(&[seg], Token(slot as u64), Report::Always).unwrap();
        tx.doorbell();
    };
    // A completion while disarmed latches the queue's cause without a message.
    push(&mut tx, 0);
    let mut out = [NO_TX; 4];
    assert_eq!(tx.poll(&mut out), 1);
    let base = wait.notifications();
    // Arming delivers the latched cause, which starts the vector's EITR timer (500 × 256 ns =
    // 128 µs).
    tx.set_interrupt(true);
    assert_eq!(wait.notifications(), base + 1, "the latched cause, at once");
    push(&mut tx, 1);
    assert_eq!(tx.poll(&mut out), 1);
    assert_eq!(wait.notifications(), base + 1, "throttled");
    p.a.advance_clock(Duration::from_micros(127));
    assert_eq!(wait.notifications(), base + 1, "still throttled at 127 µs");
    p.a.advance_clock(Duration::from_micros(1));
    assert_eq!(
        wait.notifications(),
        base + 2,
        "sent when the timer expires"
    );
}

#[test]
fn a_chosen_vector_steers_the_queue_there_and_an_absent_one_is_refused() {
    use ringfab_emu::e1000e::regs::IVAR;
    use ringfab_hal::{Error, Mmio};
    let p = pair();
    let nic = &p.nic_b;
    assert_eq!(nic.irq_vectors(), 5, "the 82574's five MSI-X vectors");
    let mut rx = nic
        .open_rx::<16>(1, RxConfig::new(2048).with_vector(3))
        .unwrap();
    let tx = nic.open_tx::<16>(0, TxConfig::with_vector(3)).unwrap();
    assert_eq!(
        (rx.interrupt_vector(), tx.interrupt_vector()),
        (Some(3), Some(3))
    );
    let ivar = nic.platform().bar(0).unwrap().read32(IVAR);
    // RX 1 → IVAR bits 7:4; TX 0 → bits 11:8; both vector 3 with the valid bit (8).
    assert_eq!(ivar >> 4 & 0xF, 0x8 | 3);
    assert_eq!(ivar >> 8 & 0xF, 0x8 | 3);
    assert_eq!(ivar & 0xF, 0, "RX 0 is not wired");

    // The queue's completion notifies vector 3, and Nic::irq(3) is that vector's handle.
    let vector = nic.irq(3).unwrap();
    assert_eq!(
        vector.notifications(),
        p.b.vector(3).unwrap().notifications()
    );
    let mem = nic.platform().alloc_dma(2048 * 2).unwrap();
    post(&mut rx, &mem, 2);
    rx.set_interrupt(true);
    vector.drain();
    let before = (
        vector.notifications(),
        p.b.vector(1).unwrap().notifications(),
    );
    // RSS sends nothing to queue 1 unless programmed: a table of only queue 1.
    let key = [0x5Au8; 40];
    let table = [1u16; 128];
    nic.set_rss(&ringfab_hal::RssConfig {
        key: &key,
        table: &table,
        hashes: nic.capabilities().rss.unwrap().hashes,
    })
    .unwrap();
    send_all(&p, &[udp_frame(MAC_B, MAC_A, Udp::ports(1, 2), &[7; 30])]);
    let mut out = [NO_RX; 2];
    assert_eq!(rx.poll(&mut out), 1);
    assert_eq!(out[0].status, Ok(()));
    assert_eq!(vector.notifications(), before.0 + 1, "vector 3 fired");
    assert_eq!(
        p.b.vector(1).unwrap().notifications(),
        before.1,
        "not the pair's default vector"
    );

    assert_eq!(
        nic.irq(5).err(),
        Some(Error::InterruptUnavailable { vector: 5 })
    );
    assert_eq!(
        nic.open_tx::<16>(1, TxConfig::with_vector(5)).err(),
        Some(Error::InterruptUnavailable { vector: 5 })
    );
    assert_eq!(
        nic.open_rx::<16>(0, RxConfig::new(2048).with_vector(7))
            .err(),
        Some(Error::InterruptUnavailable { vector: 7 })
    );
    // The refused queues are free again, and opened without interrupt have no vector.
    let plain = nic.open_tx::<16>(1, TxConfig::default()).unwrap();
    assert_eq!(plain.interrupt_vector(), None);
    let rx0 = nic.open_rx::<16>(0, RxConfig::new(2048)).unwrap();
    assert_eq!(rx0.interrupt_vector(), None);
    drop(rx);
    let ivar = nic.platform().bar(0).unwrap().read32(IVAR);
    assert_eq!(ivar >> 4 & 0xF, 0, "closing RX 1 cleared its entry");
    assert_eq!(ivar >> 8 & 0xF, 0x8 | 3, "TX 0's entry kept");
}

#[test]
fn without_a_chosen_vector_queue_pair_i_uses_vector_i_mod_the_count() {
    let p = pair();
    let rx = p
        .nic_b
        .open_rx::<16>(1, RxConfig::new(2048).with_interrupt(true))
        .unwrap();
    let tx = p
        .nic_b
        .open_tx::<16>(1, TxConfig::with_interrupt(true))
        .unwrap();
    assert_eq!(
        (rx.interrupt_vector(), tx.interrupt_vector()),
        (Some(1), Some(1))
    );
}
