//! Shared receive contexts (fi_endpoint(3), SHARED CONTEXTS) on the emulated 82576: four
//! endpoints of NIC B receive through one receive queue and one pool of receives posted to
//! the context, each completing on its own CQ; A sends from one endpoint.

mod common;
use common::*;
use ringfab::av::{AddressVector, AvAttr, EpAddr, FiAddr};
use ringfab::cntr::{Counter, CounterAttr, WaitObj};
use ringfab::cq::{CompletionQueue, CqAttr};
use ringfab::domain::Domain;
use ringfab::entry::{Data, DataEntry, OpContext};
use ringfab::ep::{Endpoint, EpAttr};
use ringfab::flags::{BindFlags, CntrBindFlags, OpFlags};
use ringfab::proto::HEADER_LEN;
use ringfab::srx::{SharedRxContext, SrxAttr};
use ringfab::{Capacities, Error};
use ringfab_emu::Wire;

const D: usize = 64;
const BUF: usize = 2048;
const EPS: usize = 4;

type Cq = CompletionQueue<Igb0, Data>;

fn cq_attr() -> CqAttr {
    CqAttr {
        size: 64,
        ..CqAttr::default()
    }
}

/// Every entry `cq` (of domain `d`) has now (driving the wire first), as (first two payload
/// bytes, len, source); each buffer dropped (back to its region).
fn drain(wire: &Wire, d: &Domain<'_, Igb0, D>, cq: &Cq) -> Vec<([u8; 2], usize, FiAddr)> {
    wire.run_until_idle();
    let mut got = Vec::new();
    loop {
        let mut e = [DataEntry::default(); 4];
        let mut src = [FiAddr::NOTAVAIL; 4];
        let mut bufs = [None, None, None, None];
        match cq.read_owned(d, &mut e, &mut src, &mut bufs) {
            Ok(n) => {
                for k in 0..n {
                    let buf = bufs[k].take().expect("the receive buffer comes back");
                    let mut b = [0u8; 2];
                    buf.read(HEADER_LEN, &mut b).unwrap();
                    got.push((b, e[k].len, src[k]));
                }
            }
            Err(Error::Again) => return got,
            Err(e) => panic!("read: {e}"),
        }
    }
}

/// A sends to B's endpoint (context `rx_queue`), which receives through B's shared receive
/// context; B's CQ has the wait object `wait_obj`.
struct OnSrx<'p> {
    da: Domain<'p, Igb0, D>,
    db: Domain<'p, Igb0, D>,
    cq_a: Cq,
    cq_b: Cq,
    av_a: AddressVector,
    av_b: AddressVector,
    srx: SharedRxContext,
    ep_a: Endpoint,
    ep_b: Endpoint,
}

fn one_endpoint_on_a_shared_context(p: &Pair, wait_obj: WaitObj, rx_queue: u16) -> OnSrx<'_> {
    let (da, db) = two_domains::<D>(p, 1, 1);
    let cq_a = da.open_cq::<Data>(&cq_attr()).unwrap();
    let cq_b = db
        .open_cq::<Data>(&CqAttr {
            wait_obj,
            ..cq_attr()
        })
        .unwrap();
    let av_a = da.open_av(&AvAttr::default()).unwrap();
    let av_b = db.open_av(&AvAttr::default()).unwrap();
    let srx = db.srx_context(&SrxAttr::default()).unwrap();
    let mut ep_a = da.endpoint(&EpAttr::default()).unwrap();
    ep_a.bind_cq(&da, &cq_a, BindFlags::TRANSMIT | BindFlags::RECV)
        .unwrap();
    ep_a.bind_av(&da, &av_a).unwrap();
    ep_a.enable(&da).unwrap();
    let mut ep_b = db
        .endpoint(&EpAttr {
            rx_queue,
            ..EpAttr::default()
        })
        .unwrap();
    ep_b.bind_cq(&db, &cq_b, BindFlags::TRANSMIT | BindFlags::RECV)
        .unwrap();
    ep_b.bind_av(&db, &av_b).unwrap();
    ep_b.bind_srx(&db, &srx).unwrap();
    ep_b.enable(&db).unwrap();
    OnSrx {
        da,
        db,
        cq_a,
        cq_b,
        av_a,
        av_b,
        srx,
        ep_a,
        ep_b,
    }
}

#[test]
fn four_endpoints_receive_through_one_shared_context_each_on_its_own_cq() {
    let p = pair();
    let counter = Counter::open(
        &CounterAttr {
            wait_obj: WaitObj::None,
            ..CounterAttr::default()
        },
        None,
    )
    .unwrap();
    let bytes = Counter::open(
        &CounterAttr {
            events: ringfab::cntr::CounterEvents::Bytes,
            wait_obj: WaitObj::None,
            ..CounterAttr::default()
        },
        None,
    )
    .unwrap();
    let counters = [&counter, &bytes];
    let (da, db) = two_domains::<D>(&p, 1, EPS);
    let db = db.with_counters(&counters);
    let cq_a = da.open_cq::<Data>(&cq_attr()).unwrap();
    let cqs: Vec<Cq> = (0..EPS)
        .map(|_| db.open_cq::<Data>(&cq_attr()).unwrap())
        .collect();
    let av_a = da.open_av(&AvAttr::default()).unwrap();
    let av_b = db.open_av(&AvAttr::default()).unwrap();
    let srx = db.srx_context(&SrxAttr::default()).unwrap();
    assert_eq!(srx.mac(), MAC_B, "queue 0: the station address");

    let mut ep_a = da.endpoint(&EpAttr::default()).unwrap();
    ep_a.bind_cq(&da, &cq_a, BindFlags::TRANSMIT | BindFlags::RECV)
        .unwrap();
    ep_a.bind_av(&da, &av_a).unwrap();
    ep_a.enable(&da).unwrap();
    let mut eps = Vec::new();
    for (i, cq) in cqs.iter().enumerate() {
        let mut ep = db
            .endpoint(&EpAttr {
                tx_queue: i as u16,
                rx_queue: 10 + i as u16, // the endpoint's context number on the wire
                ..EpAttr::default()
            })
            .unwrap();
        let bind = if i == 1 {
            BindFlags::TRANSMIT | BindFlags::RECV | BindFlags::SELECTIVE_COMPLETION
        } else {
            BindFlags::TRANSMIT | BindFlags::RECV
        };
        ep.bind_cq(&db, cq, bind).unwrap();
        ep.bind_av(&db, &av_b).unwrap();
        ep.bind_srx(&db, &srx).unwrap();
        if i == 1 {
            ep.bind_cntr(&db, &counter, CntrBindFlags::RECV).unwrap();
        }
        if i == 2 {
            ep.bind_cntr(&db, &bytes, CntrBindFlags::RECV).unwrap();
        }
        ep.enable(&db).unwrap();
        assert_eq!(
            ep.name(),
            EpAddr {
                mac: MAC_B,
                ctx: 10 + i as u16
            }
        );
        eps.push(ep);
    }
    assert_eq!(srx.endpoints(&db), EPS);
    let mr_a = da.register(memory(48 * BUF)).unwrap();
    let mr_b = db.register(memory(48 * BUF)).unwrap();
    assert_eq!(
        eps[0]
            .recv(&db, mr_b.alloc(&db, BUF).unwrap(), OpContext(0))
            .map_err(|e| e.0),
        Err(Error::OpNotSupp),
        "receives are posted to the shared context"
    );
    let mut names: Vec<EpAddr> = eps.iter().map(|e| e.name()).collect();
    names.push(EpAddr {
        mac: MAC_B,
        ctx: 99,
    }); // bound to nobody
    let mut to = [FiAddr::NOTAVAIL; EPS + 1];
    av_a.insert(&da, &names, &mut to).unwrap();
    let mut from_a = [FiAddr::NOTAVAIL];
    av_b.insert(&db, &[ep_a.name()], &mut from_a).unwrap();
    for n in 0..44 {
        srx.recv(&db, mr_b.alloc(&db, BUF).unwrap(), OpContext(1000 + n))
            .unwrap();
    }
    for k in 0..10u8 {
        for (i, &dest) in to[..EPS].iter().enumerate() {
            let mut buf = mr_a.alloc(&da, BUF).unwrap();
            buf.write(HEADER_LEN, &[i as u8, k]).unwrap();
            ep_a.send(&da, buf, 2, dest, OpContext(0)).unwrap();
        }
        if k < 2 {
            ep_a.send(&da, mr_a.alloc(&da, BUF).unwrap(), 2, to[EPS], OpContext(0))
                .unwrap();
        }
    }
    // CQ 3 reads first: it takes the shared ring and holds the others' receives for them.
    for i in [3, 2, 0, 1] {
        let got = drain(&p.wire, &db, &cqs[i]);
        let want: Vec<([u8; 2], usize, FiAddr)> = if i == 1 {
            Vec::new() // selective, nothing asked for
        } else {
            (0..10).map(|k| ([i as u8, k], 2, from_a[0])).collect()
        };
        assert_eq!(
            got, want,
            "CQ {i}: its own messages, in order, with their source"
        );
    }
    assert_eq!(
        counter.read(),
        10,
        "endpoint 1's receives counted, without entries"
    );
    assert_eq!(
        bytes.read(),
        20,
        "endpoint 2's payload bytes: not the padded frames"
    );
    for cq in &cqs {
        assert_eq!(cq.credits(&db), 64, "every credit back");
    }
    assert!(
        eps[0].dropped_frames(&db) >= 2,
        "the frames for nobody were dropped"
    );
    assert_eq!(mr_b.outstanding(&db), 4, "the four receives still posted");
    // The 82576's ring holds D - 1 receives; four are posted.
    assert_eq!(srx.rx_size_left(&db), Ok(D - 5));
    let _ = drain(&p.wire, &da, &cq_a);
}

#[test]
fn an_endpoint_leaving_gives_its_unread_receives_back_to_the_shared_context() {
    let p = pair();
    let (da, db) = two_domains::<D>(&p, 1, 2);
    let cq_a = da.open_cq::<Data>(&cq_attr()).unwrap();
    let cq0 = db.open_cq::<Data>(&cq_attr()).unwrap();
    let cq1 = db.open_cq::<Data>(&cq_attr()).unwrap();
    let av_a = da.open_av(&AvAttr::default()).unwrap();
    let av_b = db.open_av(&AvAttr::default()).unwrap();
    let srx = db.srx_context(&SrxAttr::default()).unwrap();
    let mut ep_a = da.endpoint(&EpAttr::default()).unwrap();
    ep_a.bind_cq(&da, &cq_a, BindFlags::TRANSMIT | BindFlags::RECV)
        .unwrap();
    ep_a.bind_av(&da, &av_a).unwrap();
    ep_a.enable(&da).unwrap();
    let mut eps = Vec::new();
    for (i, cq) in [&cq0, &cq1].into_iter().enumerate() {
        let mut ep = db
            .endpoint(&EpAttr {
                tx_queue: i as u16,
                rx_queue: 5 + i as u16,
                ..EpAttr::default()
            })
            .unwrap();
        ep.bind_cq(&db, cq, BindFlags::TRANSMIT | BindFlags::RECV)
            .unwrap();
        ep.bind_av(&db, &av_b).unwrap();
        ep.bind_srx(&db, &srx).unwrap();
        ep.enable(&db).unwrap();
        eps.push(ep);
    }
    let names: Vec<EpAddr> = eps.iter().map(|e| e.name()).collect();
    let mut to = [FiAddr::NOTAVAIL; 2];
    av_a.insert(&da, &names, &mut to).unwrap();
    let mr_a = da.register(memory(16 * BUF)).unwrap();
    let mr_b = db.register(memory(16 * BUF)).unwrap();
    for n in 0..4 {
        srx.recv(&db, mr_b.alloc(&db, BUF).unwrap(), OpContext(n))
            .unwrap();
    }
    // Three messages for endpoint 1, held for its CQ (read by endpoint 0's first).
    for k in 0..3u8 {
        let mut buf = mr_a.alloc(&da, BUF).unwrap();
        buf.write(HEADER_LEN, &[1, k]).unwrap();
        ep_a.send(&da, buf, 2, to[1], OpContext(0)).unwrap();
    }
    assert_eq!(drain(&p.wire, &db, &cq0), []);
    // Three of the four receives are filled and held for endpoint 1: out of the ring, still
    // in the op table.
    assert_eq!(srx.rx_size_left(&db), Ok(D - 4));
    // Endpoint 1 leaves unread: its three buffers go back to the context's pool, and
    // endpoint 0 can receive into them.
    let ep1 = eps.pop().unwrap();
    closed(ep1.close(&db));
    assert_eq!(srx.endpoints(&db), 1);
    assert_eq!(mr_b.outstanding(&db), 4, "nothing lost, nothing handed out");
    for k in 0..4u8 {
        let mut buf = mr_a.alloc(&da, BUF).unwrap();
        buf.write(HEADER_LEN, &[0, k]).unwrap();
        ep_a.send(&da, buf, 2, to[0], OpContext(0)).unwrap();
    }
    let got: Vec<[u8; 2]> = drain(&p.wire, &db, &cq0).into_iter().map(|g| g.0).collect();
    assert_eq!(got, [[0, 0], [0, 1], [0, 2], [0, 3]]);
    assert_eq!(cq1.credits(&db), 64);
    let _ = drain(&p.wire, &da, &cq_a);
}

#[test]
fn bind_and_close_rules_follow_fi_endpoint() {
    let p = pair();
    let db = Domain::<_, D>::with_capacities(
        &p.nic_b,
        &Capacities {
            queues: 8,
            cqs: 1,
            cq_size: 64,
            mrs: 0,
            avs: 2,
            av_entries: 2,
        },
    );
    let cq = db.open_cq::<Data>(&cq_attr()).unwrap();
    let av = db.open_av(&AvAttr::default()).unwrap();
    let other_av = db.open_av(&AvAttr::default()).unwrap();
    assert_eq!(
        db.srx_context(&SrxAttr {
            op_flags: OpFlags::MULTI_RECV,
            ..SrxAttr::default()
        })
        .err(),
        Some(Error::BadFlags)
    );
    let srx = db.srx_context(&SrxAttr::default()).unwrap();
    let make = |tx: u16, ctx: u16, flags: OpFlags| {
        db.endpoint(&EpAttr {
            tx_queue: tx,
            rx_queue: ctx,
            rx_op_flags: flags,
            ..EpAttr::default()
        })
        .unwrap()
    };
    let mut wants_more = make(0, 1, OpFlags::COMPLETION);
    assert_eq!(
        wants_more.bind_srx(&db, &srx),
        Err(Error::BadFlags),
        "a subset of its flags"
    );
    closed(wants_more.close(&db));

    let mut ep = make(0, 1, OpFlags::empty());
    ep.bind_cq(&db, &cq, BindFlags::TRANSMIT | BindFlags::RECV)
        .unwrap();
    ep.bind_av(&db, &av).unwrap();
    ep.bind_srx(&db, &srx).unwrap();
    assert_eq!(
        ep.bind_srx(&db, &srx),
        Err(Error::Inval),
        "one shared receive context"
    );
    ep.enable(&db).unwrap();
    assert_eq!(ep.bind_srx(&db, &srx), Err(Error::OpBadState));

    // Another AV, or the same context number: refused at enable.
    let mut other = make(1, 2, OpFlags::empty());
    other
        .bind_cq(&db, &cq, BindFlags::TRANSMIT | BindFlags::RECV)
        .unwrap();
    other.bind_av(&db, &other_av).unwrap();
    other.bind_srx(&db, &srx).unwrap();
    assert_eq!(
        other.enable(&db),
        Err(Error::Inval),
        "endpoints of one context share one AV"
    );
    closed(other.close(&db));
    let mut twin = make(1, 1, OpFlags::empty());
    twin.bind_cq(&db, &cq, BindFlags::TRANSMIT | BindFlags::RECV)
        .unwrap();
    twin.bind_av(&db, &av).unwrap();
    twin.bind_srx(&db, &srx).unwrap();
    assert_eq!(
        twin.enable(&db),
        Err(Error::Inval),
        "context numbers are unique on a context"
    );
    closed(twin.close(&db));

    let srx = match srx.close(&db) {
        Err((Error::Busy, srx)) => srx,
        other => panic!("close while bound: {:?}", other.map_err(|e| e.0)),
    };
    closed(ep.close(&db));
    srx.close(&db).map_err(|e| e.0).unwrap();
    assert!(
        db.srx_context(&SrxAttr::default()).is_ok(),
        "the queue was given back"
    );
}

/// A reader blocked in `sread` on the CQ of an endpoint that receives through a shared
/// context: the shared queue raises no interrupt of its own, so the reader finds the message
/// by the polling of its wait (every `WAIT_QUANTUM`), long before its timeout.
#[test]
fn a_blocked_sread_finds_a_message_received_through_a_shared_context() {
    let p = pair();
    let OnSrx {
        da,
        db,
        cq_a: _cq_a,
        cq_b,
        av_a,
        av_b: _av_b,
        srx,
        ep_a,
        ep_b,
    } = one_endpoint_on_a_shared_context(&p, WaitObj::Unspec, 3);
    let mut to_b = [FiAddr::NOTAVAIL];
    av_a.insert(&da, &[ep_b.name()], &mut to_b).unwrap();
    let mr_a = da.register(memory(2 * BUF)).unwrap();
    let mr_b = db.register(memory(2 * BUF)).unwrap();
    srx.recv(&db, mr_b.alloc(&db, BUF).unwrap(), OpContext(5))
        .unwrap();
    let got = std::thread::scope(|s| {
        let reader = s.spawn(|| {
            let mut out = [DataEntry::default(); 1];
            let r = cq_b.sread(
                &db,
                &mut out,
                None,
                Some(std::time::Duration::from_secs(20)),
                &clock(),
            );
            (r, out[0])
        });
        let start = std::time::Instant::now();
        while cq_b.sleepers(&db) < 1 {
            assert!(
                start.elapsed() < std::time::Duration::from_secs(10),
                "never blocked"
            );
            std::thread::yield_now();
        }
        let mut buf = mr_a.alloc(&da, BUF).unwrap();
        buf.write(HEADER_LEN, &[7, 7]).unwrap();
        ep_a.send(&da, buf, 2, to_b[0], OpContext(0)).unwrap();
        p.wire.run_until_idle();
        reader.join().unwrap()
    });
    assert_eq!(got.0, Ok(1));
    assert_eq!((got.1.op_context, got.1.len), (OpContext(5), 2));
}

/// `cancel` on a shared receive context: a receive still waiting comes back from the call (no
/// CQ to report it on), the others wait on and take the next messages; a context with nothing
/// waiting under it changes nothing.
#[test]
fn cancel_hands_a_waiting_receive_back_and_leaves_the_others_posted() {
    let p = pair();
    let OnSrx {
        da,
        db,
        cq_a: _cq_a,
        cq_b,
        av_a,
        av_b: _av_b,
        srx,
        ep_a,
        ep_b,
    } = one_endpoint_on_a_shared_context(&p, WaitObj::None, 2);
    let mut to_b = [FiAddr::NOTAVAIL];
    av_a.insert(&da, &[ep_b.name()], &mut to_b).unwrap();
    let mr_a = da.register(memory(4 * BUF)).unwrap();
    let mr_b = db.register(memory(4 * BUF)).unwrap();
    for c in 1..=3 {
        srx.recv(&db, mr_b.alloc(&db, BUF).unwrap(), OpContext(c))
            .unwrap();
    }
    let back = srx.cancel(&db, OpContext(2)).unwrap();
    assert!(back.is_some(), "the waiting receive's buffer comes back");
    assert_eq!(
        srx.cancel(&db, OpContext(2)).unwrap().map(|_| ()),
        None,
        "once"
    );
    assert_eq!(srx.cancel(&db, OpContext(9)).unwrap().map(|_| ()), None);
    drop(back);
    assert_eq!(mr_b.outstanding(&db), 2);
    for k in 0..2u8 {
        let mut buf = mr_a.alloc(&da, BUF).unwrap();
        buf.write(HEADER_LEN, &[9, k]).unwrap();
        ep_a.send(&da, buf, 2, to_b[0], OpContext(0)).unwrap();
    }
    p.wire.run_until_idle();
    let mut out = [DataEntry::default(); 4];
    assert_eq!(cq_b.read(&db, &mut out), Ok(2));
    let contexts: Vec<usize> = out[..2].iter().map(|e| e.op_context.0).collect();
    assert_eq!(
        contexts,
        [1, 3],
        "the two left took the messages, in posting order"
    );
    assert_eq!(
        mr_b.outstanding(&db),
        0,
        "read hands their buffers back to the region"
    );
}

/// fi_endpoint(3), fi_cancel: "Canceling an operation causes the fabric provider to search for
/// the operation and, if it is still pending, complete it as having been canceled." A receive
/// whose buffer a frame for nobody filled, not yet polled, is still pending (the frame is
/// dropped and the buffer waits again): the cancel finds it and hands it back. It used to wait
/// again and the cancel found nothing.
#[test]
fn cancel_finds_a_receive_a_frame_for_nobody_filled_before_any_read() {
    let p = pair();
    let OnSrx {
        da,
        db,
        cq_a: _cq_a,
        cq_b,
        av_a,
        av_b: _av_b,
        srx,
        ep_a,
        ep_b,
    } = one_endpoint_on_a_shared_context(&p, WaitObj::None, 2);
    let nobody = EpAddr {
        mac: MAC_B,
        ctx: 99,
    };
    let mut to = [FiAddr::NOTAVAIL; 2];
    av_a.insert(&da, &[ep_b.name(), nobody], &mut to).unwrap();
    let mr_a = da.register(memory(4 * BUF)).unwrap();
    let mr_b = db.register(memory(4 * BUF)).unwrap();
    for c in 1..=2 {
        srx.recv(&db, mr_b.alloc(&db, BUF).unwrap(), OpContext(c))
            .unwrap();
    }
    let mut buf = mr_a.alloc(&da, BUF).unwrap();
    buf.write(HEADER_LEN, &[7, 7]).unwrap();
    ep_a.send(&da, buf, 2, to[1], OpContext(0)).unwrap();
    p.wire.run_until_idle(); // into receive 1's buffer, unread
    let back = srx.cancel(&db, OpContext(1)).unwrap();
    assert!(back.is_some(), "still pending: its buffer comes back");
    assert_eq!(srx.cancel(&db, OpContext(1)).unwrap().map(|_| ()), None);
    drop(back);
    let mut buf = mr_a.alloc(&da, BUF).unwrap();
    buf.write(HEADER_LEN, &[9, 0]).unwrap();
    ep_a.send(&da, buf, 2, to[0], OpContext(0)).unwrap();
    let got = drain(&p.wire, &db, &cq_b);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].0, [9, 0], "the message in the receive left");
    assert_eq!(mr_b.outstanding(&db), 0);
}
