//! Shared contexts on every emulated NIC (igb, e1000e, virtio-net — virtio completes by id, so
//! the held-operation logic meets completions out of slot order): two endpoints of A send
//! through one shared transmit context to two endpoints of B that receive through one shared
//! receive context, each completing on its own CQ, in order — on ringfab's own EtherType and in
//! UDP encapsulation (the shared contexts and their endpoints all on `Encap::Udp`).

mod common;
use common::*;
use ringfab::av::{AvAttr, FiAddr};
use ringfab::cq::{CompletionQueue, CqAttr};
use ringfab::domain::Domain;
use ringfab::entry::{Data, DataEntry, OpContext};
use ringfab::ep::EpAttr;
use ringfab::flags::BindFlags;
use ringfab::hal::Nic;
use ringfab::mr::Buf;
use ringfab::proto::Encap;
use ringfab::srx::SrxAttr;
use ringfab::stx::StxAttr;
use ringfab::{Capacities, Error};

const D: usize = 64;
const BUF: usize = 2048;
/// Endpoints on each side.
const EPS: usize = 2;
/// Messages each sending endpoint sends to its peer.
const MESSAGES: usize = 200;
/// Messages in flight per endpoint at most (a frame that finds no buffer is lost).
const WINDOW: usize = 6;

/// Every entry `cq` (of domain `d`) has now, as (context, len, first two payload bytes, read
/// at `offset`); buffers to `back`.
fn read_now<'d, N: Nic>(
    d: &'d Domain<'_, N, D>,
    cq: &CompletionQueue<N, Data>,
    offset: usize,
    back: &mut Vec<Buf<'d>>,
) -> Vec<(usize, usize, [u8; 2])> {
    let mut got = Vec::new();
    loop {
        let mut e = [DataEntry::default(); 8];
        let mut src = [FiAddr::NOTAVAIL; 8];
        let mut bufs: [Option<Buf<'d>>; 8] = Default::default();
        match cq.read_owned(d, &mut e, &mut src, &mut bufs) {
            Ok(n) => {
                for k in 0..n {
                    let mut head = [0u8; 2];
                    if let Some(b) = bufs[k].take() {
                        b.read(offset, &mut head).unwrap();
                        back.push(b);
                    }
                    got.push((e[k].op_context.0, e[k].len, head));
                }
            }
            Err(Error::Again) => return got,
            Err(e) => panic!("read: {e}"),
        }
    }
}

fn through_shared_transmit_and_receive_contexts_each_endpoint_keeps_its_own_order<T: TestNic>() {
    shared_contexts::<T>(Encap::Ethernet);
}

fn shared_contexts_work_alike_in_udp_encapsulation<T: TestNic>() {
    shared_contexts::<T>(Encap::Udp);
}

fn shared_contexts<T: TestNic>(encap: Encap) {
    let p = pair_of::<T>();
    let caps = Capacities {
        queues: 8,
        cqs: EPS,
        cq_size: 64,
        mrs: 1,
        avs: 1,
        av_entries: 4,
    };
    let da = Domain::<T::Nic, D>::with_capacities(&p.nic_a, &caps);
    let db = Domain::<T::Nic, D>::with_capacities(&p.nic_b, &caps);
    let attr = CqAttr {
        size: 64,
        ..CqAttr::default()
    };
    let cqs_a = [
        da.open_cq::<Data>(&attr).unwrap(),
        da.open_cq::<Data>(&attr).unwrap(),
    ];
    let cqs_b = [
        db.open_cq::<Data>(&attr).unwrap(),
        db.open_cq::<Data>(&attr).unwrap(),
    ];
    let av_a = da.open_av(&AvAttr::default()).unwrap();
    let av_b = db.open_av(&AvAttr::default()).unwrap();
    let stx = da
        .stx_context(&StxAttr {
            encap,
            ..StxAttr::default()
        })
        .unwrap();
    let srx = db
        .srx_context(&SrxAttr {
            encap,
            ..SrxAttr::default()
        })
        .unwrap();
    let (mut eps_a, mut eps_b) = (Vec::new(), Vec::new());
    for i in 0..EPS {
        let mut a = da
            .endpoint(&EpAttr {
                rx_queue: i as u16,
                encap,
                ..EpAttr::default()
            })
            .unwrap();
        a.bind_cq(&da, &cqs_a[i], BindFlags::TRANSMIT | BindFlags::RECV)
            .unwrap();
        a.bind_av(&da, &av_a).unwrap();
        a.bind_stx(&da, &stx).unwrap();
        a.enable(&da).unwrap();
        eps_a.push(a);
        let mut b = db
            .endpoint(&EpAttr {
                tx_queue: i as u16,
                rx_queue: i as u16,
                encap,
                ..EpAttr::default()
            })
            .unwrap();
        b.bind_cq(&db, &cqs_b[i], BindFlags::TRANSMIT | BindFlags::RECV)
            .unwrap();
        b.bind_av(&db, &av_b).unwrap();
        b.bind_srx(&db, &srx).unwrap();
        b.enable(&db).unwrap();
        eps_b.push(b);
    }
    let names_b: Vec<_> = eps_b.iter().map(|e| e.name()).collect();
    let mut to_b = [FiAddr::NOTAVAIL; EPS];
    av_a.insert(&da, &names_b, &mut to_b).unwrap();
    let mr_a = da.register(memory((EPS * (WINDOW + 2) + 4) * BUF)).unwrap();
    let mr_b = db.register(memory(24 * BUF)).unwrap();
    for _ in 0..20 {
        srx.recv(&db, mr_b.alloc(&db, BUF).unwrap(), OpContext(0))
            .unwrap();
    }
    let offset = encap.header_len();
    assert_eq!(eps_a[0].payload_offset(), offset);
    let mut pool: Vec<Buf<'_>> = (0..EPS * (WINDOW + 2))
        .map(|_| mr_a.alloc(&da, BUF).unwrap())
        .collect();

    let (mut sent, mut done, mut received) = ([0usize; EPS], [0usize; EPS], [0usize; EPS]);
    let mut rounds = 0;
    while received.iter().any(|&r| r < MESSAGES) || done.iter().any(|&d| d < MESSAGES) {
        rounds += 1;
        assert!(
            rounds < 100 * MESSAGES,
            "stuck: sent {sent:?}, completed {done:?}, received {received:?}"
        );
        for i in 0..EPS {
            while sent[i] < MESSAGES && sent[i] - received[i] < WINDOW {
                let Some(mut buf) = pool.pop() else { break };
                buf.write(offset, &[i as u8, sent[i] as u8]).unwrap();
                match eps_a[i].send(&da, buf, 2, to_b[i], OpContext(i * 1000 + sent[i])) {
                    Ok(()) => sent[i] += 1,
                    Err((Error::Again, buf)) => {
                        pool.push(buf);
                        break;
                    }
                    Err((e, _)) => panic!("send: {e}"),
                }
            }
        }
        p.wire.run_until_idle();
        for i in 0..EPS {
            for (c, _, _) in read_now(&da, &cqs_a[i], offset, &mut pool) {
                assert_eq!(c, i * 1000 + done[i], "A CQ {i}: its own, in posting order");
                done[i] += 1;
            }
        }
        for i in 0..EPS {
            let mut back = Vec::new();
            for (_, len, head) in read_now(&db, &cqs_b[i], offset, &mut back) {
                assert_eq!(
                    (len, head),
                    (2, [i as u8, received[i] as u8]),
                    "B CQ {i}: its sender's, in order"
                );
                received[i] += 1;
            }
            for b in back {
                srx.recv(&db, b, OpContext(0)).unwrap();
            }
        }
    }
    for cq in &cqs_a {
        assert_eq!(cq.credits(&da), 64);
    }
    for cq in &cqs_b {
        assert_eq!(cq.credits(&db), 64);
    }
}

on_every_nic!(
    through_shared_transmit_and_receive_contexts_each_endpoint_keeps_its_own_order,
    shared_contexts_work_alike_in_udp_encapsulation,
);
