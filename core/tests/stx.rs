//! Shared transmit contexts (fi_endpoint(3), SHARED CONTEXTS) on the emulated 82576: four
//! endpoints of NIC A send through one transmit queue, each reporting to its own CQ; B
//! receives everything on one endpoint.

mod common;
use common::*;
use ringfab::av::{AvAttr, FiAddr};
use ringfab::cntr::{Counter, CounterAttr, WaitObj};
use ringfab::cq::{CompletionQueue, CqAttr};
use ringfab::domain::Domain;
use ringfab::entry::{Data, DataEntry, OpContext};
use ringfab::ep::{Endpoint, EpAttr};
use ringfab::flags::{BindFlags, CntrBindFlags, OpFlags};
use ringfab::hal::Nic;
use ringfab::proto::HEADER_LEN;
use ringfab::stx::StxAttr;
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

/// Every entry `cq` (of domain `d`) has now (driving the wire first), as (context, len).
fn drain(wire: &Wire, d: &Domain<'_, Igb0, D>, cq: &Cq) -> Vec<(usize, usize)> {
    wire.run_until_idle();
    let mut got = Vec::new();
    let mut out = [DataEntry::default(); 8];
    loop {
        match cq.read(d, &mut out) {
            Ok(n) => got.extend(out[..n].iter().map(|e| (e.op_context.0, e.len))),
            Err(Error::Again) => return got,
            Err(e) => panic!("read: {e}"),
        }
    }
}

/// Receives on B (domain `d`) until `n` messages came, each as (first payload byte, second,
/// source).
fn receive(
    wire: &Wire,
    d: &Domain<'_, Igb0, D>,
    cq: &Cq,
    ep: &Endpoint,
    n: usize,
) -> Vec<(u8, u8, FiAddr)> {
    let mut got = Vec::new();
    for _ in 0..n * 4 {
        wire.run_until_idle();
        let mut e = [DataEntry::default(); 1];
        let mut src = [FiAddr::NOTAVAIL; 1];
        let mut bufs = [None];
        match cq.read_owned(d, &mut e, &mut src, &mut bufs) {
            Ok(1) => {
                let buf = bufs[0].take().expect("the receive buffer");
                let mut b = [0u8; 2];
                buf.read(HEADER_LEN, &mut b).unwrap();
                got.push((b[0], b[1], src[0]));
                ep.recv(d, buf, OpContext(0)).unwrap();
                if got.len() == n {
                    break;
                }
            }
            Err(Error::Again) => {}
            other => panic!("B read: {other:?}"),
        }
    }
    got
}

#[test]
fn four_endpoints_send_through_one_queue_each_reading_its_own_completions_in_order() {
    let p = pair();
    let counter = Counter::open(
        &CounterAttr {
            wait_obj: WaitObj::None,
            ..CounterAttr::default()
        },
        None,
    )
    .unwrap();
    let counters = [&counter];
    let (da, db) = two_domains::<D>(&p, EPS, 1);
    let da = da.with_counters(&counters);
    let cqs: Vec<Cq> = (0..EPS)
        .map(|_| da.open_cq::<Data>(&cq_attr()).unwrap())
        .collect();
    let cq_b = db.open_cq::<Data>(&cq_attr()).unwrap();
    let av_a = da.open_av(&AvAttr::default()).unwrap();
    let av_b = db.open_av(&AvAttr::default()).unwrap();
    let stx = da.stx_context(&StxAttr::default()).unwrap();

    let mut eps = Vec::new();
    for (i, cq) in cqs.iter().enumerate() {
        let mut ep = da
            .endpoint(&EpAttr {
                rx_queue: i as u16,
                ..EpAttr::default()
            })
            .unwrap();
        let bind = if i == 1 {
            // Endpoint 1 wants only what it asks for; its counter counts everything.
            BindFlags::TRANSMIT | BindFlags::RECV | BindFlags::SELECTIVE_COMPLETION
        } else {
            BindFlags::TRANSMIT | BindFlags::RECV
        };
        ep.bind_cq(&da, cq, bind).unwrap();
        ep.bind_av(&da, &av_a).unwrap();
        ep.bind_stx(&da, &stx).unwrap();
        if i == 1 {
            ep.bind_cntr(&da, &counter, CntrBindFlags::SEND).unwrap();
        }
        ep.enable(&da).unwrap();
        eps.push(ep);
    }
    assert_eq!(stx.endpoints(&da), EPS);
    let mut ep_b = db.endpoint(&EpAttr::default()).unwrap();
    ep_b.bind_cq(&db, &cq_b, BindFlags::TRANSMIT | BindFlags::RECV)
        .unwrap();
    ep_b.bind_av(&db, &av_b).unwrap();
    ep_b.enable(&db).unwrap();
    let mut to_b = [FiAddr::NOTAVAIL];
    av_a.insert(&da, &[ep_b.name()], &mut to_b).unwrap();
    let names: Vec<_> = eps.iter().map(|e| e.name()).collect();
    let mut from = [FiAddr::NOTAVAIL; EPS];
    av_b.insert(&db, &names, &mut from).unwrap();
    let mr_a = da.register(memory(48 * BUF)).unwrap();
    let mr_b = db.register(memory(48 * BUF)).unwrap();
    for _ in 0..40 {
        ep_b.recv(&db, mr_b.alloc(&db, BUF).unwrap(), OpContext(0))
            .unwrap();
    }

    // Ten sends per endpoint, interleaved on the one queue.
    for k in 0..10u8 {
        for (i, ep) in eps.iter().enumerate() {
            let mut buf = mr_a.alloc(&da, BUF).unwrap();
            buf.write(HEADER_LEN, &[i as u8, k]).unwrap();
            ep.send(&da, buf, 2, to_b[0], OpContext(i * 100 + usize::from(k)))
                .unwrap();
        }
    }
    let got = receive(&p.wire, &db, &cq_b, &ep_b, 40);
    assert_eq!(got.len(), 40, "every frame arrives");
    for (i, &addr) in from.iter().enumerate() {
        let seq: Vec<u8> = got
            .iter()
            .filter(|g| g.0 == i as u8)
            .map(|g| {
                assert_eq!(g.2, addr, "the source is the sending endpoint");
                g.1
            })
            .collect();
        assert_eq!(
            seq,
            (0..10).collect::<Vec<_>>(),
            "endpoint {i}'s frames in order"
        );
    }

    // CQ 3 reads first: it polls the shared ring and leaves the others' completions held.
    for i in [3, 2, 0, 1] {
        let got = drain(&p.wire, &da, &cqs[i]);
        let want: Vec<(usize, usize)> = if i == 1 {
            Vec::new() // selective, nothing asked for
        } else {
            (0..10).map(|k| (i * 100 + k, 0)).collect()
        };
        assert_eq!(got, want, "CQ {i}: its own completions, in posting order");
    }
    for cq in &cqs {
        assert_eq!(cq.credits(&da), 64, "every credit back to its own CQ");
    }
    assert_eq!(
        counter.read(),
        10,
        "endpoint 1's sends counted, no CQ entries"
    );
    assert_eq!(
        mr_a.outstanding(&da),
        0,
        "every send buffer back to its region"
    );
}

#[test]
fn closing_one_endpoint_discards_only_its_sends_and_the_others_go_out() {
    let p = pair();
    let (da, db) = two_domains::<D>(&p, EPS, 1);
    let cqs: Vec<Cq> = (0..EPS)
        .map(|_| da.open_cq::<Data>(&cq_attr()).unwrap())
        .collect();
    let cq_b = db.open_cq::<Data>(&cq_attr()).unwrap();
    let av_a = da.open_av(&AvAttr::default()).unwrap();
    let av_b = db.open_av(&AvAttr::default()).unwrap();
    let stx = da
        .stx_context(&StxAttr {
            tx_queue: 1,
            op_flags: OpFlags::COMPLETION,
            ..StxAttr::default()
        })
        .unwrap();
    let mut eps = Vec::new();
    for (i, cq) in cqs.iter().enumerate() {
        let mut ep = da
            .endpoint(&EpAttr {
                rx_queue: i as u16,
                ..EpAttr::default()
            })
            .unwrap();
        ep.bind_cq(&da, cq, BindFlags::TRANSMIT | BindFlags::RECV)
            .unwrap();
        ep.bind_av(&da, &av_a).unwrap();
        ep.bind_stx(&da, &stx).unwrap();
        ep.enable(&da).unwrap();
        eps.push(ep);
    }
    let mut ep_b = db.endpoint(&EpAttr::default()).unwrap();
    ep_b.bind_cq(&db, &cq_b, BindFlags::TRANSMIT | BindFlags::RECV)
        .unwrap();
    ep_b.bind_av(&db, &av_b).unwrap();
    ep_b.enable(&db).unwrap();
    let mut to_b = [FiAddr::NOTAVAIL];
    av_a.insert(&da, &[ep_b.name()], &mut to_b).unwrap();
    let names: Vec<_> = eps.iter().map(|e| e.name()).collect();
    let mut from = [FiAddr::NOTAVAIL; EPS];
    av_b.insert(&db, &names, &mut from).unwrap();
    let mr_a = da.register(memory(24 * BUF)).unwrap();
    let mr_b = db.register(memory(24 * BUF)).unwrap();
    for _ in 0..16 {
        ep_b.recv(&db, mr_b.alloc(&db, BUF).unwrap(), OpContext(0))
            .unwrap();
    }

    // Three sends each, all held back by FI_MORE: in the ring, not yet handed to the device.
    for k in 0..3u8 {
        for (i, ep) in eps.iter().enumerate() {
            let mut buf = mr_a.alloc(&da, BUF).unwrap();
            buf.write(HEADER_LEN, &[i as u8, k]).unwrap();
            ep.sendmsg(
                &da,
                buf,
                2,
                to_b[0],
                None,
                OpContext(i * 100 + usize::from(k)),
                OpFlags::MORE,
            )
            .unwrap();
        }
    }
    assert_eq!(mr_a.outstanding(&da), 12);
    // Endpoint 2 closes: its three sends are discarded, the other nine stay queued.
    let ep2 = eps.remove(2);
    closed(ep2.close(&da));
    assert_eq!(mr_a.outstanding(&da), 9, "endpoint 2's buffers are back");
    assert_eq!(cqs[2].credits(&da), 64, "and its CQ's credits");
    assert_eq!(stx.endpoints(&da), 3);
    // One more send without FI_MORE rings the doorbell for all.
    let mut buf = mr_a.alloc(&da, BUF).unwrap();
    buf.write(HEADER_LEN, &[0, 3]).unwrap();
    eps[0].send(&da, buf, 2, to_b[0], OpContext(3)).unwrap();
    let got = receive(&p.wire, &db, &cq_b, &ep_b, 10);
    assert_eq!(got.len(), 10);
    assert!(
        got.iter().all(|g| g.0 != 2),
        "nothing of endpoint 2 left: {got:?}"
    );
    let mut from0: Vec<u8> = got.iter().filter(|g| g.0 == 0).map(|g| g.1).collect();
    from0.sort_unstable();
    assert_eq!(from0, [0, 1, 2, 3]);
    for (i, want) in [
        (1, vec![100, 101, 102]),
        (3, vec![300, 301, 302]),
        (0, vec![0, 1, 2, 3]),
    ] {
        let got: Vec<usize> = drain(&p.wire, &da, &cqs[i])
            .into_iter()
            .map(|g| g.0)
            .collect();
        assert_eq!(got, want, "CQ {i}");
    }
    assert_eq!(
        drain(&p.wire, &da, &cqs[2]),
        [],
        "no entry for what close discarded"
    );
    assert_eq!(mr_a.outstanding(&da), 0);
}

#[test]
fn bind_and_close_rules_follow_fi_endpoint() {
    let p = pair();
    let da = Domain::<_, D>::with_capacities(
        &p.nic_a,
        &Capacities {
            queues: 8,
            cqs: 2,
            cq_size: 64,
            mrs: 0,
            avs: 1,
            av_entries: 2,
        },
    );
    let cq = da.open_cq::<Data>(&cq_attr()).unwrap();
    let av = da.open_av(&AvAttr::default()).unwrap();
    assert_eq!(
        da.stx_context(&StxAttr {
            op_flags: OpFlags::MULTI_RECV,
            ..StxAttr::default()
        })
        .err(),
        Some(Error::BadFlags),
        "a transmit context takes transmit flags only"
    );
    let stx = da.stx_context(&StxAttr::default()).unwrap();
    let mut ep = da.endpoint(&EpAttr::default()).unwrap();
    ep.bind_cq(&da, &cq, BindFlags::TRANSMIT | BindFlags::RECV)
        .unwrap();
    ep.bind_av(&da, &av).unwrap();

    // Endpoints use a subset of the shared context's attributes.
    let mut wants_more = da
        .endpoint(&EpAttr {
            rx_queue: 1,
            tx_op_flags: OpFlags::COMPLETION,
            ..EpAttr::default()
        })
        .unwrap();
    assert_eq!(wants_more.bind_stx(&da, &stx), Err(Error::BadFlags));
    closed(wants_more.close(&da));

    ep.bind_stx(&da, &stx).unwrap();
    assert_eq!(
        ep.bind_stx(&da, &stx),
        Err(Error::Inval),
        "one shared context per endpoint"
    );
    let stx = match stx.close(&da) {
        Err((Error::Busy, stx)) => stx,
        other => panic!("close while bound: {:?}", other.map_err(|e| e.0)),
    };
    ep.enable(&da).unwrap();
    assert_eq!(
        ep.bind_stx(&da, &stx),
        Err(Error::OpBadState),
        "bind before enable"
    );
    // The shared queue, not the endpoint's own (queue 0 is free for someone else).
    assert!(da.open_tx(5, ringfab::hal::TxConfig::default()).is_ok());
    closed(ep.close(&da));
    assert_eq!(stx.endpoints(&da), 0);
    stx.close(&da).map_err(|e| e.0).unwrap();
    // The queue was given back.
    let again = da.stx_context(&StxAttr::default()).unwrap();

    // Released while an endpoint is bound: the queue stays until the endpoint leaves.
    let mut ep = da.endpoint(&EpAttr::default()).unwrap();
    ep.bind_cq(&da, &cq, BindFlags::TRANSMIT | BindFlags::RECV)
        .unwrap();
    ep.bind_av(&da, &av).unwrap();
    ep.bind_stx(&da, &again).unwrap();
    ep.enable(&da).unwrap();
    again.release(&da).unwrap();
    assert!(ep.tx_size_left(&da).unwrap() > 0, "still usable");
    closed(ep.close(&da));
    assert!(
        da.stx_context(&StxAttr::default()).is_ok(),
        "the last endpoint closed the queue"
    );
    let _ = p.nic_a.capabilities();
}

/// Two endpoints on one shared queue with the same context value in flight: `cancel` on one
/// cancels its own (FI_ECANCELED on its CQ), never the other's, which still goes out; an
/// `inject` through the shared queue carries the endpoint's own bounce copy.
#[test]
fn cancel_and_inject_on_a_shared_queue_touch_only_the_acting_endpoint() {
    let p = pair();
    let (da, db) = two_domains::<D>(&p, 2, 1);
    let mut cq0 = da.open_cq::<Data>(&cq_attr()).unwrap();
    let cq1 = da.open_cq::<Data>(&cq_attr()).unwrap();
    let cq_b = db.open_cq::<Data>(&cq_attr()).unwrap();
    let av_a = da.open_av(&AvAttr::default()).unwrap();
    let av_b = db.open_av(&AvAttr::default()).unwrap();
    let stx = da.stx_context(&StxAttr::default()).unwrap();
    let mut eps = Vec::new();
    for (i, cq) in [&cq0, &cq1].into_iter().enumerate() {
        let mut ep = da
            .endpoint(&EpAttr {
                rx_queue: i as u16,
                ..EpAttr::default()
            })
            .unwrap();
        ep.bind_cq(&da, cq, BindFlags::TRANSMIT | BindFlags::RECV)
            .unwrap();
        ep.bind_av(&da, &av_a).unwrap();
        ep.bind_stx(&da, &stx).unwrap();
        ep.enable(&da).unwrap();
        eps.push(ep);
    }
    let mut ep_b = db.endpoint(&EpAttr::default()).unwrap();
    ep_b.bind_cq(&db, &cq_b, BindFlags::TRANSMIT | BindFlags::RECV)
        .unwrap();
    ep_b.bind_av(&db, &av_b).unwrap();
    ep_b.enable(&db).unwrap();
    let mut to_b = [FiAddr::NOTAVAIL];
    av_a.insert(&da, &[ep_b.name()], &mut to_b).unwrap();
    let names: Vec<_> = eps.iter().map(|e| e.name()).collect();
    let mut from = [FiAddr::NOTAVAIL; 2];
    av_b.insert(&db, &names, &mut from).unwrap();
    let mr_a = da.register(memory(8 * BUF)).unwrap();
    let mr_b = db.register(memory(8 * BUF)).unwrap();
    for _ in 0..4 {
        ep_b.recv(&db, mr_b.alloc(&db, BUF).unwrap(), OpContext(0))
            .unwrap();
    }
    // The same context on both endpoints, both held back in the ring by FI_MORE; endpoint
    // 1's first, so that a cancel matching on the context alone would take it.
    for (i, ep) in eps.iter().enumerate().rev() {
        let mut buf = mr_a.alloc(&da, BUF).unwrap();
        buf.write(HEADER_LEN, &[i as u8, 0]).unwrap();
        ep.sendmsg(&da, buf, 2, to_b[0], None, OpContext(7), OpFlags::MORE)
            .unwrap();
    }
    assert_eq!(eps[0].cancel(&da, OpContext(7)), Ok(true));
    assert_eq!(eps[0].cancel(&da, OpContext(7)), Ok(false), "once");
    let mut out = [DataEntry::default(); 2];
    assert_eq!(cq0.read(&da, &mut out), Err(Error::Avail));
    let mut err = ringfab::entry::ErrEntry::default();
    let (_, buf) = cq0.readerr_owned(&da, &mut err, None, 0).unwrap();
    assert_eq!((err.op_context, err.err), (OpContext(7), 125), "ECANCELED");
    assert!(buf.is_some(), "the canceled send's buffer comes back");
    drop(buf);
    // Endpoint 1's send and an inject of endpoint 0 go out (the inject rings the doorbell).
    eps[0].inject(&da, &[0, 9], to_b[0]).unwrap();
    let got = receive(&p.wire, &db, &cq_b, &ep_b, 2);
    let mut firsts: Vec<(u8, u8)> = got.iter().map(|g| (g.0, g.1)).collect();
    firsts.sort_unstable();
    assert_eq!(firsts, [(0, 9), (1, 0)]);
    assert_eq!(
        drain(&p.wire, &da, &cq1),
        [(7, 0)],
        "endpoint 1's own completion"
    );
    assert_eq!(drain(&p.wire, &da, &cq0), [], "the inject reports nothing");
    assert_eq!((cq0.credits(&da), cq1.credits(&da)), (64, 64));
    assert_eq!(mr_a.outstanding(&da), 0);
}

/// A device reset under a shared queue disables every endpoint on it: one FI_EIO entry, on
/// the CQ whose read found it, their sends discarded; `enable` then says the shared context
/// must be opened again.
#[test]
fn a_critical_fault_of_the_shared_queue_disables_every_endpoint_on_it() {
    let p = pair();
    let da = Domain::<_, D>::with_capacities(
        &p.nic_a,
        &Capacities {
            queues: 8,
            cqs: 2,
            cq_size: 64,
            mrs: 1,
            avs: 1,
            av_entries: 2,
        },
    );
    let mut cq0 = da.open_cq::<Data>(&cq_attr()).unwrap();
    let cq1 = da.open_cq::<Data>(&cq_attr()).unwrap();
    let av_a = da.open_av(&AvAttr::default()).unwrap();
    let stx = da.stx_context(&StxAttr::default()).unwrap();
    let mut eps = Vec::new();
    for (i, cq) in [&cq0, &cq1].into_iter().enumerate() {
        let mut ep = da
            .endpoint(&EpAttr {
                rx_queue: i as u16,
                ..EpAttr::default()
            })
            .unwrap();
        ep.bind_cq(&da, cq, BindFlags::TRANSMIT | BindFlags::RECV)
            .unwrap();
        ep.bind_av(&da, &av_a).unwrap();
        ep.bind_stx(&da, &stx).unwrap();
        ep.enable(&da).unwrap();
        eps.push(ep);
    }
    let mut to_b = [FiAddr::NOTAVAIL];
    av_a.insert(
        &da,
        &[ringfab::av::EpAddr { mac: MAC_B, ctx: 0 }],
        &mut to_b,
    )
    .unwrap();
    let mr_a = da.register(memory(8 * BUF)).unwrap();
    for ep in &eps {
        ep.sendmsg(
            &da,
            mr_a.alloc(&da, BUF).unwrap(),
            2,
            to_b[0],
            None,
            OpContext(1),
            OpFlags::MORE,
        )
        .unwrap();
    }
    p.a.inject_critical(ringfab_emu::CriticalFault::Reset);
    let mut out = [DataEntry::default(); 1];
    let mut r = Err(Error::Again);
    for _ in 0..4 * ringfab::hal::queue::STALL_POLLS {
        r = cq0.read(&da, &mut out);
        if r != Err(Error::Again) {
            break;
        }
    }
    assert_eq!(r, Err(Error::Avail));
    let mut err = ringfab::entry::ErrEntry::default();
    cq0.readerr(&da, &mut err, None, 0).unwrap();
    assert_eq!((err.err, err.prov_errno), (5, 8), "FI_EIO, a queue fault");
    assert_eq!(mr_a.outstanding(&da), 0, "both endpoints' sends discarded");
    assert_eq!((cq0.credits(&da), cq1.credits(&da)), (64, 64));
    for ep in &mut eps {
        assert!(ep.fault(&da).is_some());
        assert_eq!(
            ep.enable(&da),
            Err(Error::OpBadState),
            "the shared context must be reopened"
        );
    }
}
