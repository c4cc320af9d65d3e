//! Scalable endpoints on two emulated 82576: transmit and receive contexts on their own queues,
//! named receive contexts reached through address steering, one thread per context. igb only:
//! four queue pairs and receive-address steering (`Nic::set_rx_queue_mac`, VMDq) are what the
//! tests exercise; the 82574 has two queues and no such steering, and the endpoint semantics
//! themselves run on every NIC in `ep.rs`.

mod common;
use common::*;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use ringfab::av::{AvAttr, EpAddr, FiAddr};
use ringfab::cq::CqAttr;
use ringfab::domain::Domain;
use ringfab::entry::{Msg, MsgEntry, OpContext};
use ringfab::flags::{BindFlags, CompletionFlags, OpFlags};
use ringfab::hal::{MacAddr, Nic};
use ringfab::mr::Buf;
use ringfab::proto::{context_mac, HEADER_LEN};
use ringfab::sep::{CtxAttr, SepAttr};
use ringfab::{Capacities, Error};
use ringfab_emu::{EmuE1000e, EmuPlatform, ModelConfig, Wire};
use ringfab_igb::Igb;

const D: usize = 64;
const BUF: usize = 2048;
const CTX: u16 = 4;
/// Bits of a handle that name a receive context.
const RX_BITS: u32 = 4;

type Nic0 = Igb0;

fn attr(size: usize) -> CqAttr {
    CqAttr {
        size,
        ..CqAttr::default()
    }
}

#[test]
fn context_addresses_are_the_station_address_made_local_with_the_index_in_byte_3() {
    assert_eq!(context_mac(MAC_A, 0), MAC_A);
    assert_eq!(
        context_mac(MAC_A, 3),
        MacAddr([0x52, 0x54, 0x00, 0x03, 0x00, 0x0A])
    );
    let global = MacAddr([0x00, 0x1b, 0x21, 0x00, 0x00, 0x01]);
    assert_eq!(context_mac(global, 1).0[0], 0x02, "locally administered");
    assert!(!context_mac(global, 1).is_multicast());
}

#[test]
fn four_transmit_contexts_reach_four_named_receive_contexts_from_four_threads() {
    let wire = Wire::new();
    let (dev_a, dev_b) = (device(MAC_A, &wire), device(MAC_B, &wire));
    let nic_a = Igb::new(dev_a.platform()).unwrap();
    let nic_b = Igb::new(dev_b.platform()).unwrap();
    assert!(nic_b.capabilities().rx_mac_queues >= CTX);

    let caps = Capacities {
        queues: 8,
        cqs: 4,
        cq_size: 256,
        mrs: 4,
        avs: 1,
        av_entries: 4,
    };
    let da = Domain::<Nic0, D>::with_capacities(&nic_a, &caps);
    let db = Domain::<Nic0, D>::with_capacities(&nic_b, &caps);
    let av_a = da
        .open_av(&AvAttr {
            count: 4,
            rx_ctx_bits: RX_BITS,
            ..AvAttr::default()
        })
        .unwrap();
    let av_b = db.open_av(&AvAttr::default()).unwrap();
    let sep_attr = SepAttr {
        tx_ctx_cnt: CTX,
        rx_ctx_cnt: CTX,
        ..SepAttr::default()
    };
    let mut sep_a = da.scalable_endpoint(&sep_attr).unwrap();
    let mut sep_b = db.scalable_endpoint(&sep_attr).unwrap();
    sep_a.bind_av(&da, &av_a).unwrap();
    sep_b.bind_av(&db, &av_b).unwrap();
    let mut to_b = [FiAddr::NOTAVAIL];
    av_a.insert(&da, &[sep_b.name(&db)], &mut to_b).unwrap();
    let mut to_a = [FiAddr::NOTAVAIL];
    av_b.insert(&db, &[sep_a.name(&da)], &mut to_a).unwrap();

    let cqs_a: Vec<_> = (0..CTX)
        .map(|_| da.open_cq::<Msg>(&attr(256)).unwrap())
        .collect();
    let cqs_b: Vec<_> = (0..CTX)
        .map(|_| db.open_cq::<Msg>(&attr(256)).unwrap())
        .collect();
    let mut txs = Vec::new();
    let mut rxs = Vec::new();
    for i in 0..CTX {
        let mut tx = sep_a.tx_context(&da, i, &CtxAttr::default()).unwrap();
        tx.bind_cq(&da, &cqs_a[usize::from(i)], BindFlags::TRANSMIT)
            .unwrap();
        tx.enable(&da).unwrap();
        txs.push(tx);
        let mut rx = sep_b.rx_context(&db, i, &CtxAttr::default()).unwrap();
        rx.bind_cq(&db, &cqs_b[usize::from(i)], BindFlags::RECV)
            .unwrap();
        rx.enable(&db).unwrap();
        assert_eq!(
            rx.name(),
            EpAddr {
                mac: context_mac(MAC_B, i),
                ctx: i
            }
        );
        rxs.push(rx);
    }
    let mr_a = da.register(memory(CTX as usize * 32 * BUF)).unwrap();
    let mr_b = db.register(memory(CTX as usize * 48 * BUF)).unwrap();

    const MESSAGES: usize = 2000;
    const WINDOW: usize = 16;
    let received: Vec<AtomicUsize> = (0..CTX).map(|_| AtomicUsize::new(0)).collect();
    // Every receive context has its buffers posted before anything is sent: DGRAM drops a
    // frame that finds no buffer.
    for (i, rx) in rxs.iter().enumerate() {
        for _ in 0..40 {
            rx.recv(&db, mr_b.alloc(&db, BUF).unwrap(), OpContext(i))
                .unwrap();
        }
    }
    let pump = wire.spawn_pump(Duration::from_micros(50));
    let (da, db) = (&da, &db);
    std::thread::scope(|s| {
        for (i, (tx, cq)) in txs.into_iter().zip(&cqs_a).enumerate() {
            let pool: Vec<Buf<'_>> = (0..24).map(|_| mr_a.alloc(da, BUF).unwrap()).collect();
            let received = &received[i];
            let dest = to_b[0].rx(i as u16, RX_BITS);
            s.spawn(move || send_windowed(da, &tx, cq, pool, dest, i, MESSAGES, WINDOW, received));
        }
        for (i, (rx, cq)) in rxs.into_iter().zip(&cqs_b).enumerate() {
            let received = &received[i];
            s.spawn(move || {
                let mut e = [MsgEntry::default(); 8];
                let mut src = [FiAddr::NOTAVAIL; 8];
                let mut bufs: [Option<Buf<'_>>; 8] = Default::default();
                let mut expect = 0u64;
                let deadline = Instant::now() + Duration::from_secs(60);
                while (expect as usize) < MESSAGES {
                    assert!(Instant::now() < deadline, "rx {i}: stalled at {expect}");
                    let n = match cq.read_owned(db, &mut e, &mut src, &mut bufs) {
                        Ok(n) => n,
                        Err(Error::Again) => {
                            std::thread::yield_now();
                            continue;
                        }
                        Err(err) => panic!("rx {i}: {err}"),
                    };
                    for k in 0..n {
                        assert_eq!(e[k].flags, CompletionFlags::RECV | CompletionFlags::MSG);
                        assert_eq!(src[k], to_a[0], "every context's frames come from A's name");
                        let buf = bufs[k].take().unwrap();
                        let mut tag = [0u8; 8];
                        buf.read(HEADER_LEN, &mut tag).unwrap();
                        let tag = u64::from_le_bytes(tag);
                        assert_eq!(tag >> 32, i as u64, "rx {i} got another context's frame");
                        assert_eq!(tag & 0xffff_ffff, expect, "rx {i}: lost or reordered");
                        expect += 1;
                        received.fetch_add(1, Ordering::AcqRel);
                        rx.recv(db, buf, OpContext(i)).unwrap();
                    }
                }
            });
        }
    });
    drop(pump);
    for (i, r) in received.iter().enumerate() {
        assert_eq!(r.load(Ordering::Acquire), MESSAGES, "context {i}");
    }
    assert_eq!(
        nic_b.stats().rx_missed,
        0,
        "the window kept every receive queue fed"
    );
}

#[test]
fn context_rules_follow_fi_endpoint() {
    let wire = Wire::new();
    let (dev_a, _dev_b) = (device(MAC_A, &wire), device(MAC_B, &wire));
    let nic = Igb::new(dev_a.platform()).unwrap();
    let d = Domain::<Nic0, D>::with_capacities(
        &nic,
        &Capacities {
            queues: 4,
            cqs: 1,
            ..Capacities::DEFAULT
        },
    );
    let caps = nic.capabilities();
    let too_many = SepAttr {
        tx_ctx_cnt: caps.tx_queues + 1,
        ..SepAttr::default()
    };
    assert_eq!(d.scalable_endpoint(&too_many).err(), Some(Error::Inval));
    // fi_endpoint(3), tx_ctx_cnt: "If not specified (0), 1 context will be assigned if the
    // endpoint supports outbound transfers"; rx_ctx_cnt: "If not specified, 1 context will be
    // assigned if the endpoint supports inbound transfers."
    let unspecified = SepAttr {
        tx_ctx_cnt: 0,
        rx_ctx_cnt: 0,
        ..SepAttr::default()
    };
    let mut one = d.scalable_endpoint(&unspecified).unwrap();
    assert_eq!((one.attr().tx_ctx_cnt, one.attr().rx_ctx_cnt), (1, 1));
    let av = d.open_av(&AvAttr::default()).unwrap();
    one.bind_av(&d, &av).unwrap();
    let _ctx = one.rx_context(&d, 0, &CtxAttr::default()).unwrap();
    assert_eq!(
        one.rx_context(&d, 1, &CtxAttr::default()).err(),
        Some(Error::Inval),
        "one receive context was assigned, not two"
    );
    assert!(one.tx_context(&d, 0, &CtxAttr::default()).is_ok());
    let mut sep = d
        .scalable_endpoint(&SepAttr {
            tx_ctx_cnt: 2,
            rx_ctx_cnt: 2,
            ..SepAttr::default()
        })
        .unwrap();
    assert_eq!(
        sep.tx_context(&d, 0, &CtxAttr::default()).err(),
        Some(Error::NoAv),
        "contexts need the AV bound first"
    );
    let av = d.open_av(&AvAttr::default()).unwrap();
    sep.bind_av(&d, &av).unwrap();
    assert_eq!(sep.bind_av(&d, &av), Err(Error::Inval));
    assert_eq!(
        sep.rx_context(&d, 2, &CtxAttr::default()).err(),
        Some(Error::Inval)
    );
    let tx0 = sep.tx_context(&d, 0, &CtxAttr::default()).unwrap();
    assert_eq!(
        sep.tx_context(&d, 0, &CtxAttr::default()).err(),
        Some(Error::Busy),
        "one context per index"
    );
    // A transmit context has no receive side.
    assert_eq!(tx0.rx_size_left(&d), Err(Error::OpBadState));
    closed(tx0.close(&d));
    let tx0 = sep.tx_context(&d, 0, &CtxAttr::default()).unwrap();
    let rx1 = sep.rx_context(&d, 1, &CtxAttr::default()).unwrap();
    assert_eq!(rx1.name().mac, context_mac(MAC_A, 1));
    closed(tx0.close(&d));
    closed(rx1.close(&d));
    // The queue's address went with the receive context: it can be given again.
    let rx1 = sep.rx_context(&d, 1, &CtxAttr::default()).unwrap();
    closed(rx1.close(&d));

    // Per-context attributes: op flags checked as an endpoint's (a transmit context takes no
    // receive flag), the actual ones reported by `info`, the context's own context kept.
    let bad = CtxAttr {
        op_flags: OpFlags::MULTI_RECV,
        ..CtxAttr::default()
    };
    assert_eq!(sep.tx_context(&d, 0, &bad).err(), Some(Error::BadFlags));
    let own = CtxAttr {
        op_flags: OpFlags::COMPLETION,
        context: OpContext(0xC0),
    };
    let tx0 = sep.tx_context(&d, 0, &own).unwrap();
    assert_eq!(tx0.info(&d).tx.op_flags, OpFlags::COMPLETION);
    assert_eq!(tx0.attr().context, OpContext(0xC0));
    let rx0 = sep.rx_context(&d, 0, &CtxAttr::default()).unwrap();
    assert_eq!(
        rx0.info(&d).rx.op_flags,
        OpFlags::empty(),
        "a sibling keeps its own (default) attributes"
    );
}

#[test]
fn several_receive_contexts_need_a_nic_that_steers_by_address() {
    let mut config = ModelConfig::default();
    config.mac = MAC_A;
    let dev = EmuE1000e::new(config);
    let nic = ringfab_e1000e::E1000e::new(dev.platform()).unwrap();
    assert_eq!(nic.capabilities().rx_mac_queues, 0);
    let d = Domain::<ringfab_e1000e::E1000e<EmuPlatform>, D>::with_capacities(
        &nic,
        &Capacities {
            queues: 2,
            cqs: 1,
            ..Capacities::DEFAULT
        },
    );
    let two = SepAttr {
        rx_ctx_cnt: 2,
        ..SepAttr::default()
    };
    assert_eq!(d.scalable_endpoint(&two).err(), Some(Error::OpNotSupp));
    assert!(
        d.scalable_endpoint(&SepAttr::default()).is_ok(),
        "one is fine"
    );
}
