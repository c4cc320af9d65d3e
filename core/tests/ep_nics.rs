//! The same endpoint workload on every NIC ringfab drives — the 82576 (igb), the 82574
//! (e1000e) and virtio-net — each pair on its own emulated wire: messages both ways with their
//! contents, remote CQ data and sources; a canceled receive; a multi-receive buffer. virtio-net
//! completes by id, so this is also core's check that nothing in it assumes in-order devices.
//! Each NIC runs it twice: on ringfab's own EtherType and in UDP encapsulation (`Encap::Udp`,
//! where the payload starts 28 bytes later).

mod common;
use common::*;
use ringfab::av::{AvAttr, FiAddr};
use ringfab::cq::{CompletionQueue, CqAttr};
use ringfab::domain::Domain;
use ringfab::entry::{Data, DataEntry, ErrEntry, OpContext};
use ringfab::ep::{EpAttr, EpOpt};
use ringfab::flags::{BindFlags, CompletionFlags, OpFlags};
use ringfab::hal::{MacAddr, Nic};
use ringfab::mr::Buf;
use ringfab::proto::{Encap, HEADER_LEN, MAX_HEADER_LEN};
use ringfab::{Capacities, Error};
use ringfab_e1000e::E1000e;
use ringfab_emu::{EmuE1000e, EmuIgb, EmuVirtioNet, ModelConfig, VirtioNetModelConfig, Wire};
use ringfab_igb::Igb;
use ringfab_virtio_net::VirtioNet;

const D: usize = 64;
const BUF: usize = 2048;

/// Reads everything `cq` (of domain `d`) has (driving the wire): successes as (context, len,
/// data, source, buffer, the entry's `buf` address), errors as (context, errno) with their
/// buffers.
#[allow(clippy::type_complexity, reason = "a test's tally")]
fn drain<'d, N: Nic>(
    wire: &Wire,
    d: &'d Domain<'_, N, D>,
    cq: &mut CompletionQueue<N, Data>,
) -> (
    Vec<(usize, usize, u64, FiAddr, Option<Buf<'d>>, usize)>,
    Vec<(usize, i32)>,
) {
    let (mut ok, mut err) = (Vec::new(), Vec::new());
    let mut idle = 0;
    while idle < 3 {
        wire.run_until_idle();
        let mut e = [DataEntry::default(); 8];
        let mut src = [FiAddr::NOTAVAIL; 8];
        let mut bufs: [Option<Buf<'d>>; 8] = Default::default();
        match cq.read_owned(d, &mut e, &mut src, &mut bufs) {
            Ok(n) => {
                idle = 0;
                for k in 0..n {
                    ok.push((
                        e[k].op_context.0,
                        e[k].len,
                        e[k].data,
                        src[k],
                        bufs[k].take(),
                        e[k].buf.0,
                    ));
                }
            }
            Err(Error::Avail) => {
                idle = 0;
                let mut entry = ErrEntry::default();
                let (_, buf) = cq.readerr_owned(d, &mut entry, None, 0).unwrap();
                assert!(buf.is_some());
                err.push((entry.op_context.0, entry.err));
            }
            Err(Error::Again) => idle += 1,
            Err(other) => panic!("read: {other:?}"),
        }
    }
    (ok, err)
}

/// The workload, on two brought-up NICs of one kind on `wire`, both endpoints using `encap`.
fn workload<N: Nic>(wire: &Wire, nic_a: &N, nic_b: &N, encap: Encap) {
    // One endpoint (two queues), one CQ of 256 entries, one MR and one AV of 2 addresses each.
    let caps = Capacities {
        queues: 2,
        cqs: 1,
        cq_size: 256,
        mrs: 1,
        avs: 1,
        av_entries: 2,
    };
    let da = Domain::<_, D>::with_capacities(nic_a, &caps);
    let db = Domain::<_, D>::with_capacities(nic_b, &caps);
    let attr = CqAttr {
        size: 256,
        ..CqAttr::default()
    };
    let mut cq_a = da.open_cq::<Data>(&attr).unwrap();
    let mut cq_b = db.open_cq::<Data>(&attr).unwrap();
    let av_a = da.open_av(&AvAttr::default()).unwrap();
    let av_b = db.open_av(&AvAttr::default()).unwrap();
    let ep_attr = EpAttr {
        encap,
        multi_recv_msgs: 3,
        ..EpAttr::default()
    };
    let mut ep_a = da.endpoint(&ep_attr).unwrap();
    let mut ep_b = db.endpoint(&ep_attr).unwrap();
    let offset = ep_a.payload_offset();
    assert_eq!(
        offset,
        match encap {
            Encap::Ethernet => HEADER_LEN,
            Encap::Udp => MAX_HEADER_LEN,
            Encap::PlainUdp => unreachable!("the workload speaks ringfab's header"),
        }
    );
    assert_eq!(
        ep_a.max_msg_size(&da),
        nic_a.capabilities().max_frame_len.min(BUF) - offset
    );
    assert_eq!(ep_a.info(&da).ep.protocol.header_len, offset);
    for (d, ep, cq, av) in [
        (&da, &mut ep_a, &cq_a, &av_a),
        (&db, &mut ep_b, &cq_b, &av_b),
    ] {
        ep.bind_cq(d, cq, BindFlags::TRANSMIT | BindFlags::RECV)
            .unwrap();
        ep.bind_av(d, av).unwrap();
        ep.enable(d).unwrap();
    }
    let (mut to_b, mut to_a) = ([FiAddr::NOTAVAIL], [FiAddr::NOTAVAIL]);
    av_a.insert(&da, &[ep_b.name()], &mut to_b).unwrap();
    av_b.insert(&db, &[ep_a.name()], &mut to_a).unwrap();
    let mr_a = da.register(memory(40 * BUF)).unwrap();
    let mr_b = db.register(memory(40 * BUF)).unwrap();

    // 8 messages each way, with contents and remote CQ data.
    for (d_from, d_to, from, to, mr_from, mr_to, dest, src) in [
        (&da, &db, &ep_a, &ep_b, &mr_a, &mr_b, to_b[0], to_a[0]),
        (&db, &da, &ep_b, &ep_a, &mr_b, &mr_a, to_a[0], to_b[0]),
    ] {
        for i in 0..8 {
            to.recv(d_to, mr_to.alloc(d_to, BUF).unwrap(), OpContext(100 + i))
                .unwrap();
        }
        for i in 0..8u64 {
            let mut buf = mr_from.alloc(d_from, BUF).unwrap();
            buf.write(offset, &[i as u8; 16]).unwrap();
            from.senddata(
                d_from,
                buf,
                16 + i as usize,
                0xd00d + i,
                dest,
                OpContext(i as usize),
            )
            .unwrap();
        }
        let cq_to = if core::ptr::eq(to, &ep_b) {
            &mut cq_b
        } else {
            &mut cq_a
        };
        let (got, err) = drain(wire, d_to, cq_to);
        assert!(err.is_empty(), "{err:?}");
        let recvs: Vec<_> = got.iter().filter(|g| g.0 >= 100).collect();
        assert_eq!(recvs.len(), 8);
        for (k, (ctx, len, data, s, buf, _)) in recvs.iter().enumerate() {
            assert_eq!(
                (*ctx, *len, *data, *s),
                (100 + k, 16 + k, 0xd00d + k as u64, src)
            );
            let mut b = [0u8; 16];
            buf.as_ref().unwrap().read(offset, &mut b).unwrap();
            assert_eq!(b, [k as u8; 16]);
        }
        let cq_from = if core::ptr::eq(from, &ep_a) {
            &mut cq_a
        } else {
            &mut cq_b
        };
        let (sent, err) = drain(wire, d_from, cq_from);
        assert!(err.is_empty());
        assert_eq!(
            sent.iter().filter(|g| g.0 < 100).count(),
            8,
            "every send completes once"
        );
    }

    // A canceled receive: FI_ECANCELED with its buffer; the next receive still works.
    ep_b.recv(&db, mr_b.alloc(&db, BUF).unwrap(), OpContext(7))
        .unwrap();
    ep_b.recv(&db, mr_b.alloc(&db, BUF).unwrap(), OpContext(8))
        .unwrap();
    assert_eq!(ep_b.cancel(&db, OpContext(7)), Ok(true));
    ep_a.send(&da, mr_a.alloc(&da, BUF).unwrap(), 5, to_b[0], OpContext(9))
        .unwrap();
    let (ok, err) = drain(wire, &db, &mut cq_b);
    assert_eq!(err, vec![(7, 125)]);
    assert_eq!(
        ok.iter().map(|g| (g.0, g.1)).collect::<Vec<_>>(),
        vec![(8, 5)]
    );

    // A multi-receive buffer of three slots takes three messages and comes back with the last.
    ep_b.setopt(EpOpt::MinMultiRecv, 1).unwrap();
    let multi = mr_b.alloc(&db, 3 * BUF).unwrap();
    let slots: Vec<usize> = (0..3).map(|i| multi.addr() + i * BUF).collect();
    ep_b.recvmsg(&db, multi, OpContext(50), OpFlags::MULTI_RECV)
        .unwrap();
    for i in 0..3 {
        let mut buf = mr_a.alloc(&da, BUF).unwrap();
        buf.fill(offset, 10 + i, 0xa0 + i as u8).unwrap();
        ep_a.send(&da, buf, 10 + i, to_b[0], OpContext(60 + i))
            .unwrap();
    }
    let mut got = Vec::new();
    for _ in 0..50 {
        let (ok, err) = drain(wire, &db, &mut cq_b);
        assert!(err.is_empty());
        got.extend(ok);
        if got.len() == 3 {
            break;
        }
    }
    assert_eq!(got.len(), 3);
    let mut lens: Vec<usize> = got.iter().map(|g| g.1).collect();
    lens.sort();
    assert_eq!(lens, vec![10, 11, 12]);
    let released = got.iter().filter(|g| g.4.is_some()).count();
    assert_eq!(
        released, 1,
        "the buffer comes back once, with the last slot"
    );
    // Each completion's `buf` is its message's data: a slot's start plus the header of the
    // encapsulation, holding the bytes sent.
    for g in &got {
        assert!(
            slots.iter().any(|&s| s + offset == g.5),
            "buf {:#x} is no slot's payload",
            g.5
        );
        // Read through the buffer handed back with the last slot, at `buf`'s offset in it: an
        // address (`buf` is `void *` in C) is not a pointer to read through in Rust.
        let whole = got
            .iter()
            .find_map(|g| g.4.as_ref())
            .expect("the released buffer");
        let mut first = [0u8];
        whole.read(g.5 - whole.addr(), &mut first).unwrap();
        assert_eq!(first[0], 0xa0 + (g.1 - 10) as u8);
    }
    let _ = CompletionFlags::MULTI_RECV;
}

fn config(mac: MacAddr) -> ModelConfig {
    let mut c = ModelConfig::default();
    c.mac = mac;
    c
}

fn on_igb(encap: Encap) {
    let wire = Wire::new();
    let (a, b) = (EmuIgb::new(config(MAC_A)), EmuIgb::new(config(MAC_B)));
    a.connect(&wire);
    b.connect(&wire);
    let (na, nb) = (
        Igb::new(a.platform()).unwrap(),
        Igb::new(b.platform()).unwrap(),
    );
    workload(&wire, &na, &nb, encap);
}

fn on_e1000e(encap: Encap) {
    let wire = Wire::new();
    let (a, b) = (EmuE1000e::new(config(MAC_A)), EmuE1000e::new(config(MAC_B)));
    a.connect(&wire);
    b.connect(&wire);
    let (na, nb) = (
        E1000e::new(a.platform()).unwrap(),
        E1000e::new(b.platform()).unwrap(),
    );
    workload(&wire, &na, &nb, encap);
}

fn on_virtio_net(encap: Encap) {
    let wire = Wire::new();
    let vconfig = |mac| {
        let mut c = VirtioNetModelConfig::default();
        c.mac = mac;
        c
    };
    let (a, b) = (
        EmuVirtioNet::new(vconfig(MAC_A)),
        EmuVirtioNet::new(vconfig(MAC_B)),
    );
    a.connect(&wire);
    b.connect(&wire);
    let na = VirtioNet::new(a.platform()).unwrap();
    let nb = VirtioNet::new(b.platform()).unwrap();
    assert!(!na.capabilities().in_order_completion);
    workload(&wire, &na, &nb, encap);
}

#[test]
fn the_endpoint_workload_on_igb() {
    on_igb(Encap::Ethernet);
}

#[test]
fn the_endpoint_workload_on_igb_in_udp_encapsulation() {
    on_igb(Encap::Udp);
}

#[test]
fn the_endpoint_workload_on_e1000e() {
    on_e1000e(Encap::Ethernet);
}

#[test]
fn the_endpoint_workload_on_e1000e_in_udp_encapsulation() {
    on_e1000e(Encap::Udp);
}

#[test]
fn the_endpoint_workload_on_virtio_net() {
    on_virtio_net(Encap::Ethernet);
}

#[test]
fn the_endpoint_workload_on_virtio_net_in_udp_encapsulation() {
    on_virtio_net(Encap::Udp);
}
