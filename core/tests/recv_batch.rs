//! The batched receive post (`Endpoint::recv_batch`) on every emulated NIC and every
//! encapsulation: what it does to each buffer is what `recvmsg` on each in turn does — the
//! same completions, contexts, order and lengths, the same `rx_size_left`, the same error at
//! the same buffer when the ring, the op table or the CQ's credits run out — and an invalid
//! call loses no buffer. Only the doorbell differs: one call rings at most once (counted at
//! the device's registers), and not at all with `FI_MORE`.
//!
//! B's frames come from A's transmit queue 1 driven by the driver alone (`RawSender`), so
//! that every encapsulation, plain UDP included, is received without an exchange first.

mod common;
use common::counting::{Counted, Counting};
use common::*;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use ringfab::av::AvAttr;
use ringfab::cq::{CompletionQueue, CqAttr};
use ringfab::domain::Domain;
use ringfab::entry::{Msg, MsgEntry, OpContext};
use ringfab::ep::{Endpoint, EpAttr};
use ringfab::flags::{BindFlags, CompletionFlags, OpFlags};
use ringfab::hal::Nic;
use ringfab::ip::emit::{udp_frame, UdpHeader};
use ringfab::ip::{Ipv4Addr, SockAddrIn, UDP_HEADER_LEN};
use ringfab::mr::{Buf, MemoryRegion};
use ringfab::proto::{Encap, Header, MAX_HEADER_LEN};
use ringfab::srx::SrxAttr;
use ringfab::{Capacities, Error};
use ringfab_emu::CriticalFault;

const D: usize = 64;
const BUF: usize = 2048;
const IP_A: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
const IP_B: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 2);
/// The plain-UDP endpoint's port.
const PORT: u16 = 7000;
const ENCAPS: [Encap; 3] = [Encap::Ethernet, Encap::Udp, Encap::PlainUdp];

/// B's receiving side: its domain's CQ, endpoint and memory.
struct Rx<N: Nic> {
    cq: CompletionQueue<N, Msg>,
    ep: Endpoint,
    mr: MemoryRegion,
}

/// A domain over `nic` for one endpoint, with IPv4 configured (for plain UDP).
fn domain<'n, N: Nic>(nic: &'n N, clock: &'n StdClock) -> Domain<'n, N, D> {
    let caps = Capacities {
        queues: 4,
        cqs: 2,
        cq_size: 256,
        mrs: 1,
        avs: 1,
        av_entries: 4,
    };
    ip_domain(nic, clock, IP_B, &caps)
}

/// An endpoint of `encap` on `d` with a CQ of `cq_size` entries, enabled if `enable`.
fn rx_side<N: Nic>(d: &Domain<'_, N, D>, encap: Encap, cq_size: usize, enable: bool) -> Rx<N> {
    let cq = d
        .open_cq::<Msg>(&CqAttr {
            size: cq_size,
            ..CqAttr::default()
        })
        .unwrap();
    let format = if encap.is_ringfab() {
        ringfab::av::AddrFormat::Ringfab
    } else {
        ringfab::av::AddrFormat::SockaddrIn
    };
    let av = d
        .open_av(&AvAttr {
            format,
            ..AvAttr::default()
        })
        .unwrap();
    let mut ep = d
        .endpoint(&EpAttr {
            encap,
            port: PORT,
            ..EpAttr::default()
        })
        .unwrap();
    ep.bind_cq(d, &cq, BindFlags::TRANSMIT | BindFlags::RECV)
        .unwrap();
    ep.bind_av(d, &av).unwrap();
    if enable {
        ep.enable(d).unwrap();
    }
    let mr = d.register(memory(2 * D * BUF + ringfab::mr::PAGE)).unwrap();
    Rx { cq, ep, mr }
}

/// `n` buffers of `len` bytes from `mr`, in slots.
fn bufs<'d, N: Nic>(
    d: &'d Domain<'_, N, D>,
    mr: &MemoryRegion,
    n: usize,
    len: usize,
) -> Vec<Option<Buf<'d>>> {
    (0..n).map(|_| Some(mr.alloc(d, len).unwrap())).collect()
}

/// A frame from A to B's endpoint in `encap` carrying `payload`.
fn frame(encap: Encap, payload: &[u8]) -> Vec<u8> {
    if !encap.is_ringfab() {
        let mut out = vec![0u8; UDP_HEADER_LEN + payload.len()];
        let h = UdpHeader {
            src_mac: MAC_A,
            dst_mac: MAC_B,
            src: SockAddrIn::new(IP_A, 5000),
            dst: SockAddrIn::new(IP_B, PORT),
        };
        let n = udp_frame(&h, payload, &mut out).unwrap();
        out.truncate(n);
        return out;
    }
    let header = Header {
        dst: MAC_B,
        src: MAC_A,
        dst_ctx: 0,
        src_ctx: 1,
        payload_len: payload.len() as u16,
        data: None,
        flow: 0,
    };
    let mut bytes = [0u8; MAX_HEADER_LEN];
    let mut f = header.emit(encap, &mut bytes).to_vec();
    f.extend_from_slice(payload);
    f
}

/// The payload of message `i`: long enough for a minimal Ethernet frame, its length varying.
fn payload(i: usize) -> Vec<u8> {
    vec![i as u8; 32 + i % 16]
}

/// Reads every completion `rx`'s CQ has now; `posted` are the addresses of the buffers posted,
/// in slot order.
fn read_all<N: Nic>(d: &Domain<'_, N, D>, rx: &Rx<N>, posted: &[usize]) -> Vec<Seen> {
    read_seen(d, &rx.cq, rx.ep.payload_offset(), posted)
}

/// How a run posts its receives.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Post {
    /// `recvmsg` on each buffer in turn.
    OneByOne,
    /// One `recv_batch` call.
    Batch,
}

/// Posts the buffers of `slots` (skipping empty slots) with `context` and `flags`, one by one
/// or in one batch: how many were posted, and the error that stopped the posting if any. The
/// buffers not posted stay in their slots either way.
fn post<'d, N: Nic>(
    how: Post,
    d: &'d Domain<'_, N, D>,
    ep: &Endpoint,
    slots: &mut [Option<Buf<'d>>],
    context: OpContext,
    flags: OpFlags,
) -> (usize, Option<Error>) {
    match how {
        Post::Batch => match ep.recv_batch(d, slots, context, flags) {
            Ok(n) => (n, None),
            Err((e, n)) => (n, Some(e)),
        },
        Post::OneByOne => {
            let mut posted = 0;
            for slot in slots.iter_mut() {
                let Some(buf) = slot.take() else {
                    continue;
                };
                match ep.recvmsg(d, buf, context, flags) {
                    Ok(()) => posted += 1,
                    Err((e, buf)) => {
                        *slot = Some(buf);
                        return (posted, Some(e));
                    }
                }
            }
            (posted, None)
        }
    }
}

/// One run of the equivalence test: B posts 16 buffers (two slots empty) with `how`, A sends
/// 14 messages, B reads them back. What B's `rx_size_left` said after posting, and what it read.
fn receive_run<T: TestNic>(encap: Encap, how: Post) -> (usize, Vec<Seen>) {
    let p = pair_of::<T>();
    let clock = clock();
    let db = domain(&p.nic_b, &clock);
    let rx = rx_side(&db, encap, 256, true);
    let mut slots = bufs(&db, &rx.mr, 16, BUF);
    let addrs: Vec<usize> = slots.iter().flatten().map(Buf::addr).collect();
    // Empty slots are skipped, by the batch as by the loop.
    drop(slots[3].take());
    drop(slots[10].take());
    assert_eq!(
        post(how, &db, &rx.ep, &mut slots, OpContext(7), OpFlags::empty()),
        (14, None)
    );
    assert!(slots.iter().all(Option::is_none), "every buffer taken");
    let left = rx.ep.rx_size_left(&db).unwrap();
    let frames: Vec<Vec<u8>> = (0..14).map(|i| frame(encap, &payload(i))).collect();
    let mut raw = RawSender::new(&p);
    raw.send(&p, &frames);
    p.wire.run_until_idle();
    let seen = read_all(&db, &rx, &addrs);
    assert_eq!(rx.mr.outstanding(&db), 0, "every buffer came back");
    (left, seen)
}

/// fi_msg(3): "The fi_recv call posts a data buffer to the receive queue of the
/// corresponding endpoint. Posted receives are searched in the order in which they were
/// posted in order to match sends." A batch posts each buffer as `recvmsg` would: the same
/// completions (context, flags, length, buffer, data) in the same order, and the same
/// `rx_size_left` after it, on every encapsulation.
fn a_batch_posts_each_buffer_as_recvmsg_does<T: TestNic>() {
    for encap in ENCAPS {
        let one = receive_run::<T>(encap, Post::OneByOne);
        let batch = receive_run::<T>(encap, Post::Batch);
        assert_eq!(batch, one, "{encap:?}: a batch as recvmsg on each buffer");
        let (left, seen) = batch;
        assert_eq!(left, ring_room::<T>(D) - 14, "{encap:?}: rx_size_left");
        assert_eq!(seen.len(), 14, "{encap:?}: every message received");
        // Buffers in slot order (3 and 10 empty), each message in the next one.
        let slot: Vec<usize> = (0..16).filter(|i| ![3, 10].contains(i)).collect();
        for (i, s) in seen.iter().enumerate() {
            assert_eq!(s.0, 7, "{encap:?}: the batch's context");
            assert!(s.1.contains(CompletionFlags::RECV | CompletionFlags::MSG));
            assert_eq!(s.2, payload(i).len(), "{encap:?}: message {i}'s length");
            assert_eq!(
                s.3,
                Some(slot[i]),
                "{encap:?}: message {i} in posting order"
            );
            assert_eq!(s.4, payload(i), "{encap:?}: message {i}'s bytes");
        }
    }
}

/// Posts `n` buffers with `how` on an endpoint of `encap` whose CQ has `cq_size` entries,
/// until something refuses one: how many were posted, the error, the buffers left in their
/// slots, and what `recvmsg` says of the first of them.
fn fill_run<T: TestNic>(
    encap: Encap,
    how: Post,
    cq_size: usize,
    n: usize,
) -> (usize, Option<Error>, usize, Error) {
    let p = pair_of::<T>();
    let clock = clock();
    let db = domain(&p.nic_b, &clock);
    let rx = rx_side(&db, encap, cq_size, true);
    let mut slots = bufs(&db, &rx.mr, n, BUF);
    let (posted, err) = post(how, &db, &rx.ep, &mut slots, OpContext(1), OpFlags::empty());
    assert!(
        slots[..posted].iter().all(Option::is_none),
        "the posted ones are taken"
    );
    let left = slots.iter().filter(|s| s.is_some()).count();
    assert_eq!(left, n - posted, "nothing after the refused one is touched");
    assert_eq!(rx.mr.outstanding(&db), n, "no buffer lost");
    let next = slots[posted]
        .take()
        .expect("the refused buffer is still there");
    let again = match rx.ep.recvmsg(&db, next, OpContext(1), OpFlags::empty()) {
        Ok(()) => panic!("recvmsg took the buffer the batch could not post"),
        Err((e, _)) => e,
    };
    (posted, err, left, again)
}

/// fi_endpoint(3), fi_rx_size_left: it "returns a lower bound on the number of receive
/// operations that may be posted to the given endpoint without that operation returning
/// -FI_EAGAIN". When the ring and op table, or the CQ's credits, run out in the middle of a
/// batch, the batch posts what `recvmsg` one by one posts, stops with `Again` at the same
/// buffer, and leaves that one and the rest in their slots.
fn a_batch_stops_where_recvmsg_would_and_keeps_the_rest<T: TestNic>() {
    for encap in ENCAPS {
        // The ring and the op table (D) run out; the CQ has room for more.
        let ring = ring_room::<T>(D);
        let one = fill_run::<T>(encap, Post::OneByOne, 256, ring + 5);
        let batch = fill_run::<T>(encap, Post::Batch, 256, ring + 5);
        assert_eq!(batch, one, "{encap:?}: the ring full");
        assert_eq!(batch, (ring, Some(Error::Again), 5, Error::Again));
        // The CQ's credits run out first.
        let one = fill_run::<T>(encap, Post::OneByOne, 16, 20);
        let batch = fill_run::<T>(encap, Post::Batch, 16, 20);
        assert_eq!(batch, one, "{encap:?}: the CQ's credits");
        assert_eq!(batch, (16, Some(Error::Again), 4, Error::Again));
    }
}

/// What an invalid call does to the buffers: every one not posted is still in its slot, its
/// region counting it, and the error is `recvmsg`'s for the first of them.
#[track_caller]
fn refused<'d, N: Nic>(
    d: &'d Domain<'_, N, D>,
    ep: &Endpoint,
    mr: &MemoryRegion,
    slots: &mut [Option<Buf<'d>>],
    flags: OpFlags,
    expect: (Error, usize),
) {
    let before = slots.iter().filter(|s| s.is_some()).count();
    let outstanding = mr.outstanding(d);
    assert_eq!(
        ep.recv_batch(d, slots, OpContext(1), flags),
        Err(expect),
        "{flags:?}"
    );
    let after = slots.iter().filter(|s| s.is_some()).count();
    assert_eq!(after, before - expect.1, "only the posted ones are taken");
    assert_eq!(mr.outstanding(d), outstanding, "no buffer lost");
}

/// fi_msg(3): "The fi_recvmsg and fi_sendmsg calls allow the user to specify flags which can
/// change the default message handling of the endpoint"; a receive takes `FI_COMPLETION`, `FI_MORE` and `FI_MULTI_RECV` (docs/semantics.md). Each
/// invalid input gives `recvmsg`'s error and loses no buffer: flags a receive cannot take,
/// `FI_MULTI_RECV` (which a batch refuses, docs: post multi-receive buffers with `recvmsg`),
/// a buffer shorter than the queue's (the ones before it posted), before `enable`, after a
/// critical fault ("If an endpoint experiences a critical error, it will transition back into
/// a disabled state"), and on an endpoint bound to a shared receive context.
fn invalid_batches_give_recvmsgs_error_and_lose_no_buffer<T: TestNic>() {
    let p = pair_of::<T>();
    let clock = clock();
    let db = domain(&p.nic_b, &clock);
    // Before enable: OpBadState.
    let rx = rx_side(&db, Encap::Ethernet, 256, false);
    let mut slots = bufs(&db, &rx.mr, 4, BUF);
    refused(
        &db,
        &rx.ep,
        &rx.mr,
        &mut slots,
        OpFlags::empty(),
        (Error::OpBadState, 0),
    );
    let one = slots[0].take().unwrap();
    assert_eq!(
        rx.ep
            .recvmsg(&db, one, OpContext(1), OpFlags::empty())
            .map_err(|(e, _)| e),
        Err(Error::OpBadState)
    );
    let mut rx = rx;
    rx.ep.enable(&db).unwrap();
    // Flags a receive cannot take; FI_MULTI_RECV in a batch.
    for flags in [
        OpFlags::INJECT_COMPLETE,
        OpFlags::REMOTE_CQ_DATA,
        OpFlags::MULTI_RECV,
        OpFlags::MULTI_RECV | OpFlags::MORE,
    ] {
        refused(&db, &rx.ep, &rx.mr, &mut slots, flags, (Error::BadFlags, 0));
    }
    // A short buffer in the middle: the two before it are posted, it and the rest stay.
    let mut slots = bufs(&db, &rx.mr, 2, BUF);
    slots.push(Some(rx.mr.alloc(&db, 1024).unwrap()));
    slots.extend(bufs(&db, &rx.mr, 2, BUF));
    refused(
        &db,
        &rx.ep,
        &rx.mr,
        &mut slots,
        OpFlags::empty(),
        (Error::Inval, 2),
    );
    assert!(slots[2].as_ref().is_some_and(|b| b.len() == 1024));
    let short = slots[2].take().unwrap();
    assert_eq!(
        rx.ep
            .recvmsg(&db, short, OpContext(1), OpFlags::empty())
            .map_err(|(e, _)| e),
        Err(Error::Inval)
    );
    // A slice with no buffer: nothing to do.
    let mut empty: [Option<Buf<'_>>; 3] = Default::default();
    assert_eq!(
        rx.ep
            .recv_batch(&db, &mut empty, OpContext(1), OpFlags::MULTI_RECV),
        Ok(0)
    );
    // After a critical fault, once a read found it: OpBadState.
    p.b.inject_critical(CriticalFault::DisableQueue(ringfab_emu::Ring::Rx(0)));
    let mut e = [MsgEntry::default(); 4];
    // The driver checks the device after STALL_POLLS empty polls, then after periods that
    // double up to STALL_POLLS_MAX: two of the longest hold a check wherever the count stands.
    for _ in 0..2 * ringfab::hal::queue::STALL_POLLS_MAX {
        p.wire.run_until_idle();
        if rx.cq.read(&db, &mut e) == Err(Error::Avail) {
            break;
        }
    }
    assert!(!rx.ep.is_enabled(&db), "the fault disabled the endpoint");
    let mut slots = bufs(&db, &rx.mr, 4, BUF);
    refused(
        &db,
        &rx.ep,
        &rx.mr,
        &mut slots,
        OpFlags::empty(),
        (Error::OpBadState, 0),
    );
}

/// fi_endpoint(3), SHARED CONTEXTS: "Users post receive buffers directly to a shared receive
/// context, with the buffers usable by any endpoint bound to the shared receive context" — an
/// endpoint bound to one refuses them (`OpNotSupp`), by the batch as by `recvmsg`.
fn an_endpoint_on_a_shared_receive_context_refuses_a_batch<T: TestNic>() {
    let p = pair_of::<T>();
    let clock = clock();
    let db = domain(&p.nic_b, &clock);
    let cq = db.open_cq::<Msg>(&CqAttr::default()).unwrap();
    let av = db.open_av(&AvAttr::default()).unwrap();
    let srx = db.srx_context(&SrxAttr::default()).unwrap();
    let mut ep = db.endpoint(&EpAttr::default()).unwrap();
    ep.bind_cq(&db, &cq, BindFlags::TRANSMIT | BindFlags::RECV)
        .unwrap();
    ep.bind_av(&db, &av).unwrap();
    ep.bind_srx(&db, &srx).unwrap();
    ep.enable(&db).unwrap();
    let mr = db.register(memory(8 * BUF)).unwrap();
    let mut slots = bufs(&db, &mr, 3, BUF);
    refused(
        &db,
        &ep,
        &mr,
        &mut slots,
        OpFlags::empty(),
        (Error::OpNotSupp, 0),
    );
    let one = slots[0].take().unwrap();
    assert_eq!(
        ep.recvmsg(&db, one, OpContext(1), OpFlags::empty())
            .map_err(|(e, _)| e),
        Err(Error::OpNotSupp)
    );
}

/// docs/semantics.md, "When the device sees a receive": a receive posted without `FI_MORE` is
/// given to the device at once while it holds fewer than 96; fi_msg(3) on `FI_MORE`:
/// "Indicates that the user has additional requests that will immediately be posted after the
/// current call returns. Use of this flag may improve performance by enabling the provider to
/// optimize its access to the fabric hardware." A batch without `FI_MORE` rings once however many buffers it posts —
/// where `recvmsg` rings once per buffer — and the device sees them all; a batch with
/// `FI_MORE` rings not at all, and the device sees none until a later post rings.
fn a_batch_rings_once_and_not_at_all_with_fi_more<T: Counted>() {
    let p = pair_of::<T>();
    let writes = Arc::new(AtomicUsize::new(0));
    let nic = T::counted(Counting {
        inner: p.b.platform(),
        writes: writes.clone(),
    });
    let clock = clock();
    let db = domain(&nic, &clock);
    let rx = rx_side(&db, Encap::Ethernet, 256, true);
    let mut raw = RawSender::new(&p);
    // One by one without FI_MORE: a doorbell per receive (the device holds fewer than 96).
    let mut slots = bufs(&db, &rx.mr, 8, BUF);
    let before = writes.load(Ordering::Relaxed);
    assert_eq!(
        post(
            Post::OneByOne,
            &db,
            &rx.ep,
            &mut slots,
            OpContext(1),
            OpFlags::empty()
        ),
        (8, None)
    );
    let rung = |before: usize| writes.load(Ordering::Relaxed) - before;
    let doorbells = |n: usize| {
        if T::EVERY_DOORBELL_WRITES {
            n..=n
        } else {
            0..=n
        }
    };
    assert!(
        doorbells(8).contains(&rung(before)),
        "recvmsg rings per receive"
    );
    // A batch with FI_MORE: no doorbell. Of 16 frames, the first 8 fill the receives recvmsg
    // rang for; the rest find no receive the device knows of, and are dropped. (A CQ read
    // would ring for the waiting receives, so none comes before the frames.)
    let mut slots = bufs(&db, &rx.mr, 8, BUF);
    let before = writes.load(Ordering::Relaxed);
    assert_eq!(
        rx.ep
            .recv_batch(&db, &mut slots, OpContext(2), OpFlags::MORE),
        Ok(8)
    );
    assert_eq!(rung(before), 0, "FI_MORE: none");
    let frames: Vec<Vec<u8>> = (0..16)
        .map(|i| frame(Encap::Ethernet, &payload(i)))
        .collect();
    raw.send(&p, &frames);
    p.wire.run_until_idle();
    let contexts = |seen: Vec<Seen>| seen.iter().map(|s| s.0).collect::<Vec<_>>();
    assert_eq!(
        contexts(read_all(&db, &rx, &[])),
        [1; 8],
        "only the receives recvmsg rang for"
    );
    // A batch without FI_MORE: one doorbell for its 8.
    let mut slots = bufs(&db, &rx.mr, 8, BUF);
    let before = writes.load(Ordering::Relaxed);
    assert_eq!(
        rx.ep
            .recv_batch(&db, &mut slots, OpContext(3), OpFlags::empty()),
        Ok(8)
    );
    assert!(doorbells(1).contains(&rung(before)), "one doorbell");
    raw.send(&p, &frames);
    p.wire.run_until_idle();
    assert_eq!(
        contexts(read_all(&db, &rx, &[])),
        [[2; 8], [3; 8]].concat(),
        "all 16, in posting order"
    );
}

on_every_nic!(
    a_batch_posts_each_buffer_as_recvmsg_does,
    a_batch_stops_where_recvmsg_would_and_keeps_the_rest,
    invalid_batches_give_recvmsgs_error_and_lose_no_buffer,
    an_endpoint_on_a_shared_receive_context_refuses_a_batch,
    a_batch_rings_once_and_not_at_all_with_fi_more
);
