//! The batched send (`Endpoint::send_batch`) on every emulated NIC and every encapsulation:
//! what it does to each buffer is what `sendmsg` on each in turn does — the same messages on
//! the receiver's side, the same send completions, contexts, order and buffers, the same
//! `tx_size_left`, the same error at the same buffer when the ring, the op table or the CQ's
//! credits run out — and an invalid call loses no buffer. Only the doorbell differs: one call
//! rings at most once (counted at the device's registers), not at all with `FI_MORE`, and a
//! call that stops at a buffer rings for those it sent.

mod common;
use common::counting::{Counted, Counting};
use common::*;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use ringfab::av::{AddrFormat, AvAttr, FiAddr};
use ringfab::cq::{CompletionQueue, CqAttr};
use ringfab::domain::Domain;
use ringfab::entry::{Msg, MsgEntry, OpContext};
use ringfab::ep::{Endpoint, EpAttr};
use ringfab::flags::{BindFlags, CompletionFlags, OpFlags};
use ringfab::hal::Nic;
use ringfab::ip::{Ipv4Addr, SockAddrIn};
use ringfab::mr::{Buf, MemoryRegion};
use ringfab::proto::Encap;
use ringfab::stx::StxAttr;
use ringfab::{Capacities, Error};
use ringfab_emu::CriticalFault;

const D: usize = 64;
const BUF: usize = 2048;
const IP_A: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
const IP_B: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 2);
/// Both endpoints' port (plain UDP).
const PORT: u16 = 7000;
const ENCAPS: [Encap; 3] = [Encap::Ethernet, Encap::Udp, Encap::PlainUdp];
/// Every message's payload length (a batch sends one length).
const LEN: usize = 40;

/// One side: its CQ, AV, endpoint and memory.
struct Side<N: Nic> {
    cq: CompletionQueue<N, Msg>,
    av: ringfab::av::AddressVector,
    ep: Endpoint,
    mr: MemoryRegion,
}

/// A domain over `nic` at `addr` (for plain UDP).
fn domain<'n, N: Nic>(nic: &'n N, clock: &'n StdClock, addr: Ipv4Addr) -> Domain<'n, N, D> {
    let caps = Capacities {
        queues: 4,
        cqs: 2,
        cq_size: 256,
        mrs: 1,
        avs: 1,
        av_entries: 4,
    };
    ip_domain(nic, clock, addr, &caps)
}

/// How a side is made: its encapsulation, its CQ's size, whether it is enabled, whether its
/// sends go through a shared transmit context.
#[derive(Clone, Copy)]
struct Make {
    encap: Encap,
    cq_size: usize,
    enable: bool,
    shared_tx: bool,
}

impl Make {
    fn new(encap: Encap) -> Self {
        Make {
            encap,
            cq_size: 256,
            enable: true,
            shared_tx: false,
        }
    }
}

fn side<N: Nic>(d: &Domain<'_, N, D>, how: Make) -> Side<N> {
    let cq = d
        .open_cq::<Msg>(&CqAttr {
            size: how.cq_size,
            ..CqAttr::default()
        })
        .unwrap();
    let format = if how.encap.is_ringfab() {
        AddrFormat::Ringfab
    } else {
        AddrFormat::SockaddrIn
    };
    let av = d
        .open_av(&AvAttr {
            format,
            ..AvAttr::default()
        })
        .unwrap();
    let mut ep = d
        .endpoint(&EpAttr {
            encap: how.encap,
            port: PORT,
            ..EpAttr::default()
        })
        .unwrap();
    if how.shared_tx {
        let stx = d.stx_context(&StxAttr::default()).unwrap();
        ep.bind_stx(d, &stx).unwrap();
    }
    ep.bind_cq(d, &cq, BindFlags::TRANSMIT | BindFlags::RECV)
        .unwrap();
    ep.bind_av(d, &av).unwrap();
    if how.enable {
        ep.enable(d).unwrap();
    }
    let mr = d.register(memory(2 * D * BUF + ringfab::mr::PAGE)).unwrap();
    Side { cq, av, ep, mr }
}

/// `to`'s address in `from`'s AV.
fn peer<N: Nic, M: Nic>(
    d: &Domain<'_, N, D>,
    from: &Side<N>,
    encap: Encap,
    to: &Side<M>,
    to_ip: Ipv4Addr,
) -> FiAddr {
    if encap.is_ringfab() {
        let mut out = [FiAddr::NOTAVAIL];
        assert_eq!(from.av.insert(d, &[to.ep.name()], &mut out), Ok(1));
        out[0]
    } else {
        from.av
            .insert_sockaddr_one(d, SockAddrIn::new(to_ip, PORT))
            .unwrap()
    }
}

/// The payload of message `i`: `LEN` bytes of `i`.
fn payload(i: usize) -> Vec<u8> {
    vec![i as u8; LEN]
}

/// `n` buffers from `side`'s memory, in slots, buffer `i` holding `payload(i)` at the
/// endpoint's payload offset.
fn bufs<'d, N: Nic>(d: &'d Domain<'_, N, D>, side: &Side<N>, n: usize) -> Vec<Option<Buf<'d>>> {
    bufs_of(d, side, n, BUF)
}

/// [`bufs`] of `len` bytes each.
fn bufs_of<'d, N: Nic>(
    d: &'d Domain<'_, N, D>,
    side: &Side<N>,
    n: usize,
    len: usize,
) -> Vec<Option<Buf<'d>>> {
    (0..n)
        .map(|i| {
            let mut b = side.mr.alloc(d, len).unwrap();
            let at = side.ep.payload_offset();
            if at + LEN <= len {
                b.write(at, &payload(i)).unwrap();
            }
            Some(b)
        })
        .collect()
}

/// How a run sends.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Send {
    /// `sendmsg` on each buffer in turn, with the call's flags.
    OneByOne,
    /// One `send_batch` call.
    Batch,
}

/// Sends the buffers of `slots` (skipping empty slots) to `dest` with `context` and `flags`,
/// one by one or in one batch: how many were sent, and the error that stopped the sending if
/// any. The buffers not sent stay in their slots either way.
fn send<'d, N: Nic>(
    how: Send,
    d: &'d Domain<'_, N, D>,
    ep: &Endpoint,
    slots: &mut [Option<Buf<'d>>],
    dest: FiAddr,
    flags: OpFlags,
) -> (usize, Option<Error>) {
    let context = OpContext(7);
    match how {
        Send::Batch => match ep.send_batch(d, slots, LEN, dest, context, flags) {
            Ok(n) => (n, None),
            Err((e, n)) => (n, Some(e)),
        },
        Send::OneByOne => {
            let mut sent = 0;
            for slot in slots.iter_mut() {
                let Some(buf) = slot.take() else {
                    continue;
                };
                match ep.sendmsg(d, buf, LEN, dest, None, context, flags) {
                    Ok(()) => sent += 1,
                    Err((e, buf)) => {
                        *slot = Some(buf);
                        return (sent, Some(e));
                    }
                }
            }
            (sent, None)
        }
    }
}

/// Reads every completion `side`'s CQ has now; `addrs` are the addresses of the buffers of
/// interest.
fn read_all<N: Nic>(d: &Domain<'_, N, D>, side: &Side<N>, addrs: &[usize]) -> Vec<Seen> {
    read_seen(d, &side.cq, side.ep.payload_offset(), addrs)
}

/// Runs the wire and reads both sides until neither has had anything for a few rounds (plain
/// UDP resolves B's MAC first: A's sends are held until B's ARP reply, which A's reads take
/// in): what A and B read.
fn exchange<N: Nic, M: Nic>(
    p: &Pair<impl TestNic>,
    da: &Domain<'_, N, D>,
    a: &Side<N>,
    a_addrs: &[usize],
    db: &Domain<'_, M, D>,
    b: &Side<M>,
) -> (Vec<Seen>, Vec<Seen>) {
    let (mut seen_a, mut seen_b) = (Vec::new(), Vec::new());
    let mut quiet = 0;
    while quiet < 4 {
        p.wire.run_until_idle();
        let got_b = read_all(db, b, &[]);
        p.wire.run_until_idle();
        let got_a = read_all(da, a, a_addrs);
        quiet = if got_a.is_empty() && got_b.is_empty() {
            quiet + 1
        } else {
            0
        };
        seen_a.extend(got_a);
        seen_b.extend(got_b);
    }
    (seen_a, seen_b)
}

/// One message from A to B, read on both sides: on plain UDP, the ARP exchange that resolves
/// B's MAC for A (and A's for B).
fn warm_up<N: Nic, M: Nic>(
    p: &Pair<impl TestNic>,
    da: &Domain<'_, N, D>,
    a: &Side<N>,
    to_b: FiAddr,
    db: &Domain<'_, M, D>,
    b: &Side<M>,
) {
    b.ep.recv(db, b.mr.alloc(db, BUF).unwrap(), OpContext(99))
        .unwrap();
    // Receives for B's ARP reply: a control frame takes a receive (and gives it back).
    for _ in 0..4 {
        a.ep.recv(da, a.mr.alloc(da, BUF).unwrap(), OpContext(98))
            .unwrap();
    }
    let buf = a.mr.alloc(da, BUF).unwrap();
    if let Err((e, _)) = a.ep.send(da, buf, LEN, to_b, OpContext(99)) {
        panic!("warm-up send: {e}");
    }
    let (seen_a, seen_b) = exchange(p, da, a, &[], db, b);
    assert_eq!((seen_a.len(), seen_b.len()), (1, 1), "the warm-up message");
}

/// What one run of the equivalence test gave: A's `tx_size_left` after sending, A's send
/// completions, B's receives.
type Run = (usize, Vec<Seen>, Vec<Seen>);

/// One run of the equivalence test: A sends 16 buffers (two slots empty) with `how`, B reads
/// the 14 messages.
fn send_run<T: TestNic>(make: Make, how: Send) -> Run {
    let p = pair_of::<T>();
    let clock = clock();
    let (da, db) = (
        domain(&p.nic_a, &clock, IP_A),
        domain(&p.nic_b, &clock, IP_B),
    );
    let a = side(&da, make);
    let b = side(&db, Make::new(make.encap));
    let to_b = peer(&da, &a, make.encap, &b, IP_B);
    if !make.encap.is_ringfab() {
        // B's MAC resolved first: a plain-UDP endpoint holds at most a few sends for ARP.
        warm_up(&p, &da, &a, to_b, &db, &b);
    }
    for i in 0..16 {
        b.ep.recv(&db, b.mr.alloc(&db, BUF).unwrap(), OpContext(100 + i))
            .unwrap();
    }
    let mut slots = bufs(&da, &a, 16);
    let addrs: Vec<usize> = slots.iter().flatten().map(Buf::addr).collect();
    // Empty slots are skipped, by the batch as by the loop.
    drop(slots[3].take());
    drop(slots[10].take());
    assert_eq!(
        send(how, &da, &a.ep, &mut slots, to_b, OpFlags::empty()),
        (14, None)
    );
    assert!(slots.iter().all(Option::is_none), "every buffer taken");
    let left = a.ep.tx_size_left(&da).unwrap();
    let (seen_a, seen_b) = exchange(&p, &da, &a, &addrs, &db, &b);
    // Only the warm-up's receives are still out.
    let receives = if make.encap.is_ringfab() { 0 } else { 4 };
    assert_eq!(
        a.mr.outstanding(&da),
        receives,
        "every sent buffer came back"
    );
    (left, seen_a, seen_b)
}

/// fi_msg(3): "The call fi_send transfers the data contained in the user-specified data buffer
/// to a remote endpoint, with message boundaries being maintained"; a batch sends each buffer as `sendmsg` would: the same messages at the receiver (payload,
/// length, order), the same send completions (context, flags, buffer) in the same order, and
/// the same `tx_size_left` after it, on every encapsulation and through a shared transmit
/// context.
fn a_batch_sends_each_buffer_as_sendmsg_does<T: TestNic>() {
    let mut makes: Vec<Make> = ENCAPS.into_iter().map(Make::new).collect();
    makes.push(Make {
        shared_tx: true,
        ..Make::new(Encap::Ethernet)
    });
    for make in makes {
        let what = format!("{:?}, shared: {}", make.encap, make.shared_tx);
        let one = send_run::<T>(make, Send::OneByOne);
        let batch = send_run::<T>(make, Send::Batch);
        assert_eq!(batch, one, "{what}: a batch as sendmsg on each buffer");
        let (left, seen_a, seen_b) = batch;
        if make.encap.is_ringfab() {
            // (On plain UDP igb and e1000e take a context descriptor per checksum offload: the
            // room left is what sendmsg's left, compared above.)
            assert_eq!(left, ring_room::<T>(D) - 14, "{what}: tx_size_left");
        }
        // Buffers in slot order (3 and 10 empty), each message from the next one.
        let slot: Vec<usize> = (0..16).filter(|i| ![3, 10].contains(i)).collect();
        assert_eq!(seen_a.len(), 14, "{what}: every send completed");
        for (i, s) in seen_a.iter().enumerate() {
            assert_eq!(s.0, 7, "{what}: the batch's context");
            assert!(s.1.contains(CompletionFlags::SEND | CompletionFlags::MSG));
            assert_eq!(s.3, Some(slot[i]), "{what}: send {i} in posting order");
        }
        assert_eq!(seen_b.len(), 14, "{what}: every message received");
        for (i, s) in seen_b.iter().enumerate() {
            assert_eq!(s.0, 100 + i, "{what}: receive {i}");
            assert_eq!(s.2, LEN, "{what}: message {i}'s length");
            assert_eq!(s.4, payload(slot[i]), "{what}: message {i}'s bytes");
        }
    }
}

/// Sends `n` buffers with `how` on an endpoint of `encap` whose CQ has `cq_size` entries,
/// without running the wire, until something refuses one: how many were sent, the error, the
/// buffers left in their slots, and what `sendmsg` says of the first of them.
fn fill_run<T: TestNic>(
    encap: Encap,
    how: Send,
    cq_size: usize,
    n: usize,
) -> (usize, Option<Error>, usize, Error) {
    let p = pair_of::<T>();
    let clock = clock();
    let (da, db) = (
        domain(&p.nic_a, &clock, IP_A),
        domain(&p.nic_b, &clock, IP_B),
    );
    let a = side(
        &da,
        Make {
            cq_size,
            ..Make::new(encap)
        },
    );
    let b = side(&db, Make::new(encap));
    let to_b = peer(&da, &a, encap, &b, IP_B);
    let mut slots = bufs(&da, &a, n);
    let (sent, err) = send(how, &da, &a.ep, &mut slots, to_b, OpFlags::empty());
    assert!(
        slots[..sent].iter().all(Option::is_none),
        "the sent ones are taken"
    );
    let left = slots.iter().filter(|s| s.is_some()).count();
    assert_eq!(left, n - sent, "nothing after the refused one is touched");
    assert_eq!(a.mr.outstanding(&da), n, "no buffer lost");
    let next = slots[sent]
        .take()
        .expect("the refused buffer is still there");
    let again = match a
        .ep
        .sendmsg(&da, next, LEN, to_b, None, OpContext(1), OpFlags::empty())
    {
        Ok(()) => panic!("sendmsg took the buffer the batch could not send"),
        Err((e, _)) => e,
    };
    (sent, err, left, again)
}

/// fi_endpoint(3), fi_tx_size_left: it "returns a lower bound on the number of transmit
/// operations that may be posted to the given endpoint without that operation returning
/// -FI_EAGAIN". When the ring and op table, or the CQ's credits, run out in the middle of a
/// batch, the batch sends what `sendmsg` one by one sends, stops with `Again` at the same
/// buffer, and leaves that one and the rest in their slots. (ringfab's encapsulations: plain
/// UDP's sends wait for ARP, in no ring.)
fn a_batch_stops_where_sendmsg_would_and_keeps_the_rest<T: TestNic>() {
    for encap in [Encap::Ethernet, Encap::Udp] {
        // The ring and the op table (D) run out; the CQ has room for more.
        let ring = ring_room::<T>(D);
        let one = fill_run::<T>(encap, Send::OneByOne, 256, ring + 5);
        let batch = fill_run::<T>(encap, Send::Batch, 256, ring + 5);
        assert_eq!(batch, one, "{encap:?}: the ring full");
        assert_eq!(batch, (ring, Some(Error::Again), 5, Error::Again));
        // The CQ's credits run out first.
        let one = fill_run::<T>(encap, Send::OneByOne, 16, 20);
        let batch = fill_run::<T>(encap, Send::Batch, 16, 20);
        assert_eq!(batch, one, "{encap:?}: the CQ's credits");
        assert_eq!(batch, (16, Some(Error::Again), 4, Error::Again));
    }
}

/// What an invalid call does to the buffers: every one not sent is still in its slot, its
/// region counting it, and the error is `expect`'s, which `sendmsg` gives the first of them.
#[track_caller]
#[allow(
    clippy::too_many_arguments,
    reason = "the call's arguments and the expectation"
)]
fn refused<'d, N: Nic>(
    d: &'d Domain<'_, N, D>,
    side: &Side<N>,
    slots: &mut [Option<Buf<'d>>],
    len: usize,
    dest: FiAddr,
    flags: OpFlags,
    expect: (Error, usize),
) {
    let before = slots.iter().filter(|s| s.is_some()).count();
    let outstanding = side.mr.outstanding(d);
    assert_eq!(
        side.ep.send_batch(d, slots, len, dest, OpContext(1), flags),
        Err(expect),
        "{flags:?}"
    );
    let after = slots.iter().filter(|s| s.is_some()).count();
    assert_eq!(after, before - expect.1, "only the sent ones are taken");
    assert_eq!(side.mr.outstanding(d), outstanding, "no buffer lost");
    let first = slots
        .iter_mut()
        .find_map(Option::take)
        .expect("a buffer left");
    let one = side
        .ep
        .sendmsg(d, first, len, dest, None, OpContext(1), flags)
        .map_err(|(e, _)| e);
    assert_eq!(one, Err(expect.0), "sendmsg's error for the same buffer");
}

/// fi_msg(3): "The fi_recvmsg and fi_sendmsg calls allow the user to specify flags which can
/// change the default message handling of the endpoint"; a send takes `FI_COMPLETION`, the completion levels a DGRAM endpoint honours, `FI_MORE`, and
/// `FI_REMOTE_CQ_DATA` with data (docs/semantics.md). Each invalid input gives `sendmsg`'s
/// error and loses no buffer, on every encapsulation: flags a send cannot take, remote CQ data
/// (a batch carries none), a payload over `max_msg_size`, a destination not in the AV, a
/// buffer too short for header and payload (the ones before it sent); and on ringfab's,
/// before `enable` and after a critical fault ("If an endpoint experiences a critical error,
/// it will transition back into a disabled state").
fn invalid_batches_give_sendmsgs_error_and_lose_no_buffer<T: TestNic>() {
    for encap in ENCAPS {
        let p = pair_of::<T>();
        let clock = clock();
        let (da, db) = (
            domain(&p.nic_a, &clock, IP_A),
            domain(&p.nic_b, &clock, IP_B),
        );
        let a = side(
            &da,
            Make {
                enable: false,
                ..Make::new(encap)
            },
        );
        let b = side(&db, Make::new(encap));
        let to_b = peer(&da, &a, encap, &b, IP_B);
        // Before enable: OpBadState.
        let mut slots = bufs(&da, &a, 4);
        let none = OpFlags::empty();
        refused(&da, &a, &mut slots, LEN, to_b, none, (Error::OpBadState, 0));
        let mut a = a;
        a.ep.enable(&da).unwrap();
        for flags in [
            OpFlags::FENCE,
            OpFlags::DELIVERY_COMPLETE,
            OpFlags::INJECT,
            OpFlags::REMOTE_CQ_DATA,
            OpFlags::MULTI_RECV | OpFlags::MORE,
        ] {
            let mut slots = bufs(&da, &a, 3);
            refused(&da, &a, &mut slots, LEN, to_b, flags, (Error::BadFlags, 0));
        }
        let max = a.ep.max_msg_size(&da);
        let mut slots = bufs(&da, &a, 3);
        refused(
            &da,
            &a,
            &mut slots,
            max + 1,
            to_b,
            none,
            (Error::MsgSize, 0),
        );
        let mut slots = bufs(&da, &a, 3);
        let nobody = FiAddr(3);
        refused(&da, &a, &mut slots, LEN, nobody, none, (Error::Inval, 0));
        // A short buffer in the middle: the two before it are sent, it and the rest stay.
        let short = a.ep.payload_offset() + LEN - 1;
        let mut slots = bufs(&da, &a, 2);
        slots.extend(bufs_of(&da, &a, 1, short));
        slots.extend(bufs(&da, &a, 2));
        refused(&da, &a, &mut slots, LEN, to_b, none, (Error::Inval, 2));
        // A slice with no buffer: nothing to do, whatever the flags.
        let mut empty: [Option<Buf<'_>>; 3] = Default::default();
        assert_eq!(
            a.ep.send_batch(&da, &mut empty, LEN, nobody, OpContext(1), OpFlags::FENCE),
            Ok(0)
        );
        if !encap.is_ringfab() {
            continue;
        }
        // After a critical fault, once a read found it: OpBadState.
        p.a.inject_critical(CriticalFault::DisableQueue(ringfab_emu::Ring::Tx(0)));
        let mut e = [MsgEntry::default(); 4];
        let mut slots = bufs(&da, &a, 1);
        let _ =
            a.ep.send_batch(&da, &mut slots, LEN, to_b, OpContext(1), none);
        // The driver checks the device after STALL_POLLS polls with work pending, then after
        // periods that double up to STALL_POLLS_MAX: two of the longest hold a check wherever
        // the count stands.
        for _ in 0..2 * ringfab::hal::queue::STALL_POLLS_MAX {
            p.wire.run_until_idle();
            if a.cq.read(&da, &mut e) == Err(Error::Avail) || !a.ep.is_enabled(&da) {
                break;
            }
        }
        assert!(
            !a.ep.is_enabled(&da),
            "{encap:?}: the fault disabled the endpoint"
        );
        let mut slots = bufs(&da, &a, 3);
        refused(&da, &a, &mut slots, LEN, to_b, none, (Error::OpBadState, 0));
    }
}

/// fi_msg(3) on `FI_MORE`: "Indicates that the user has additional requests that will
/// immediately be posted after the current call returns. Use of this flag may improve
/// performance by enabling the provider to optimize its access to the fabric hardware." A
/// batch without `FI_MORE` rings once however many buffers it sends — where `sendmsg` rings
/// once per buffer — and the receiver gets them all; a batch with `FI_MORE` rings not at all,
/// and nothing leaves until a later send rings; a batch that stops at a buffer it cannot send
/// rings for the ones before it, even with `FI_MORE` (the call that was to follow may never
/// come).
fn a_batch_rings_once_and_not_at_all_with_fi_more<T: Counted>() {
    let p = pair_of::<T>();
    let writes = Arc::new(AtomicUsize::new(0));
    let nic = T::counted(Counting {
        inner: p.a.platform(),
        writes: writes.clone(),
    });
    let clock = clock();
    let (da, db) = (domain(&nic, &clock, IP_A), domain(&p.nic_b, &clock, IP_B));
    let a = side(&da, Make::new(Encap::Ethernet));
    let b = side(&db, Make::new(Encap::Ethernet));
    let to_b = peer(&da, &a, Encap::Ethernet, &b, IP_B);
    for i in 0..40 {
        b.ep.recv(&db, b.mr.alloc(&db, BUF).unwrap(), OpContext(i))
            .unwrap();
    }
    let rung = |before: usize| writes.load(Ordering::Relaxed) - before;
    let doorbells = |n: usize| {
        if T::EVERY_DOORBELL_WRITES {
            n..=n
        } else {
            0..=n
        }
    };
    let received = || {
        let mut n = 0;
        for _ in 0..4 {
            p.wire.run_until_idle();
            n += read_all(&db, &b, &[]).len();
            let _ = read_all(&da, &a, &[]);
        }
        n
    };
    // One by one without FI_MORE: a doorbell per send.
    let mut slots = bufs(&da, &a, 8);
    let before = writes.load(Ordering::Relaxed);
    let none = OpFlags::empty();
    assert_eq!(
        send(Send::OneByOne, &da, &a.ep, &mut slots, to_b, none),
        (8, None)
    );
    assert!(
        doorbells(8).contains(&rung(before)),
        "sendmsg rings per send"
    );
    assert_eq!(received(), 8);
    // A batch with FI_MORE: no doorbell, nothing leaves.
    let mut slots = bufs(&da, &a, 8);
    let before = writes.load(Ordering::Relaxed);
    let more = OpFlags::MORE;
    assert_eq!(
        a.ep.send_batch(&da, &mut slots, LEN, to_b, OpContext(1), more),
        Ok(8)
    );
    assert_eq!(rung(before), 0, "FI_MORE: none");
    assert_eq!(received(), 0, "nothing left before a doorbell");
    // A batch without FI_MORE: one doorbell, for its 8 and the 8 before.
    let mut slots = bufs(&da, &a, 8);
    let before = writes.load(Ordering::Relaxed);
    assert_eq!(
        a.ep.send_batch(&da, &mut slots, LEN, to_b, OpContext(1), none),
        Ok(8)
    );
    assert!(doorbells(1).contains(&rung(before)), "one doorbell");
    assert_eq!(received(), 16, "the deferred 8 and the batch's 8");
    // A batch with FI_MORE that stops at a short buffer rings for the 3 it sent.
    let mut slots = bufs(&da, &a, 3);
    slots.extend(bufs_of(&da, &a, 1, a.ep.payload_offset() + LEN - 1));
    let before = writes.load(Ordering::Relaxed);
    assert_eq!(
        a.ep.send_batch(&da, &mut slots, LEN, to_b, OpContext(1), more),
        Err((Error::Inval, 3))
    );
    assert!(doorbells(1).contains(&rung(before)), "the refusal rang");
    assert_eq!(received(), 3, "the 3 before the short buffer left");
}

on_every_nic!(
    a_batch_sends_each_buffer_as_sendmsg_does,
    a_batch_stops_where_sendmsg_would_and_keeps_the_rest,
    invalid_batches_give_sendmsgs_error_and_lose_no_buffer,
    a_batch_rings_once_and_not_at_all_with_fi_more
);
