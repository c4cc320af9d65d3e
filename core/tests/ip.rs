//! Plain-UDP endpoints (`Encap::PlainUdp`, docs/ip.md) on every emulated NIC: two endpoints
//! exchange datagrams with ARP in between (RFC 826); a peer that never answers ARP fails each
//! held send with `FI_EHOSTUNREACH`, buffers back; ICMP echo requests are answered (RFC 792);
//! malformed frames are dropped and counted, never reported; `FI_SOURCE` and `FI_SOURCE_ERR`
//! with `sockaddr_in` addresses; `max_msg_size` is MTU − 28. Time is a clock the test moves,
//! so ARP's retries are deterministic.

mod common;
use common::*;

use std::io::Write;
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ringfab::av::{AddrFormat, AvAttr, FiAddr};
use ringfab::cq::{CompletionQueue, CqAttr};
use ringfab::domain::Domain;
use ringfab::entry::{ErrEntry, Msg, MsgEntry, OpContext};
use ringfab::ep::{Endpoint, EpAttr};
use ringfab::flags::BindFlags;
use ringfab::hal::{MacAddr, Nic};
use ringfab::ip::emit::{udp_frame, UdpHeader};
use ringfab::ip::{checksum, Discard, SockAddrIn, UDP_HEADER_LEN};
use ringfab::mr::{Buf, MemoryRegion};
use ringfab::proto::Encap;
use ringfab::sep::{CtxAttr, SepAttr};
use ringfab::srx::SrxAttr;
use ringfab::{Capacities, Clock, Error};
use ringfab_emu::{EmuVirtioNet, VirtioNetModelConfig, Wire};

const D: usize = 64;
const BUF: usize = 2048;
const IP_A: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
const IP_B: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 2);
/// An address on the subnet nobody has.
const IP_NOBODY: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 99);

/// A clock the test moves by hand, counting how often it is read.
struct TestClock {
    millis: AtomicU64,
    reads: AtomicU64,
}

impl TestClock {
    fn new() -> Self {
        TestClock {
            millis: AtomicU64::new(0),
            reads: AtomicU64::new(0),
        }
    }

    fn advance(&self, d: Duration) {
        self.millis
            .fetch_add(d.as_millis() as u64, Ordering::Relaxed);
    }

    fn reads(&self) -> u64 {
        self.reads.load(Ordering::Relaxed)
    }
}

impl Clock for TestClock {
    fn now(&self) -> Duration {
        self.reads.fetch_add(1, Ordering::Relaxed);
        Duration::from_millis(self.millis.load(Ordering::Relaxed))
    }
}

/// Every frame sent onto `wire` from now on, kept in memory (the wire's pcap capture).
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn on(wire: &Wire) -> Self {
        let c = Captured::default();
        wire.capture_to(c.clone()).unwrap();
        c
    }

    /// The frames so far (pcap: a 24-byte file header, then a 16-byte header per record,
    /// its captured length at bytes 8..12).
    fn frames(&self) -> Vec<Vec<u8>> {
        let b = self.0.lock().unwrap();
        let mut out = Vec::new();
        let mut at = 24;
        while at + 16 <= b.len() {
            let len = u32::from_le_bytes(b[at + 8..at + 12].try_into().unwrap()) as usize;
            out.push(b[at + 16..at + 16 + len].to_vec());
            at += 16 + len;
        }
        out
    }
}

fn is_arp_request_for(f: &[u8], target: Ipv4Addr) -> bool {
    f.len() >= 42
        && f[12..14] == [0x08, 0x06]
        && f[20..22] == [0, 1]
        && f[38..42] == target.octets()
}

/// A plain-UDP host: its domain's CQ, AV (of `sockaddr_in`), endpoint and memory.
struct Host<N: Nic> {
    cq: CompletionQueue<N, Msg>,
    av: ringfab::av::AddressVector,
    ep: Endpoint,
    mr: MemoryRegion,
}

fn domain<'n, N: Nic>(nic: &'n N, clock: &'n TestClock, addr: Ipv4Addr) -> Domain<'n, N, D> {
    let caps = Capacities {
        queues: 2,
        cqs: 1,
        cq_size: 256,
        mrs: 1,
        avs: 1,
        av_entries: 4,
    };
    ip_domain(nic, clock, addr, &caps)
}

fn host<N: Nic>(d: &Domain<'_, N, D>, port: u16, source_err: bool) -> Host<N> {
    host_with_cq(d, port, source_err, 256)
}

/// [`host`] with a CQ of `cq_size` entries.
fn host_with_cq<N: Nic>(
    d: &Domain<'_, N, D>,
    port: u16,
    source_err: bool,
    cq_size: usize,
) -> Host<N> {
    let attr = EpAttr {
        encap: Encap::PlainUdp,
        port,
        source_err,
        ..EpAttr::default()
    };
    host_with(d, &attr, cq_size)
}

/// A plain-UDP host whose endpoint has `attr`, with a CQ of `cq_size` entries.
fn host_with<N: Nic>(d: &Domain<'_, N, D>, attr: &EpAttr, cq_size: usize) -> Host<N> {
    let cq = d
        .open_cq::<Msg>(&CqAttr {
            size: cq_size,
            ..CqAttr::default()
        })
        .unwrap();
    let av = d
        .open_av(&AvAttr {
            format: AddrFormat::SockaddrIn,
            ..AvAttr::default()
        })
        .unwrap();
    let mut ep = d.endpoint(attr).unwrap();
    ep.bind_cq(d, &cq, BindFlags::TRANSMIT | BindFlags::RECV)
        .unwrap();
    ep.bind_av(d, &av).unwrap();
    ep.enable(d).unwrap();
    let mr = d.register(memory(40 * BUF)).unwrap();
    Host { cq, av, ep, mr }
}

/// What one read pass found: successes (context, len, source, buffer) and errors (context,
/// errno, err_data, buffer).
type Found<'d> = (
    Vec<(usize, usize, FiAddr, Option<Buf<'d>>)>,
    Vec<(usize, i32, Vec<u8>, Option<Buf<'d>>)>,
);

/// Reads everything `h`'s CQ has now (errors with their `err_data`).
fn read_all<'d, N: Nic>(d: &'d Domain<'_, N, D>, h: &mut Host<N>) -> Found<'d> {
    read_cq(d, &mut h.cq)
}

/// Reads everything `cq` has now (errors with their `err_data`).
fn read_cq<'d, N: Nic>(d: &'d Domain<'_, N, D>, cq: &mut CompletionQueue<N, Msg>) -> Found<'d> {
    let (mut ok, mut err) = (Vec::new(), Vec::new());
    loop {
        let mut e = [MsgEntry::default(); 8];
        let mut src = [FiAddr::NOTAVAIL; 8];
        let mut bufs: [Option<Buf<'d>>; 8] = Default::default();
        match cq.read_owned(d, &mut e, &mut src, &mut bufs) {
            Ok(n) => {
                for k in 0..n {
                    ok.push((e[k].op_context.0, e[k].len, src[k], bufs[k].take()));
                }
            }
            Err(Error::Avail) => {
                let mut entry = ErrEntry::default();
                let mut data = [0u8; 64];
                let (out, buf) = cq.readerr_owned(d, &mut entry, Some(&mut data), 0).unwrap();
                let n = match out {
                    ringfab::errdata::ErrDataOut::Copied(n) => n,
                    _ => 0,
                };
                err.push((entry.op_context.0, entry.err, data[..n].to_vec(), buf));
            }
            Err(Error::Again) => return (ok, err),
            Err(other) => panic!("read: {other:?}"),
        }
    }
}

fn post_recvs<N: Nic>(d: &Domain<'_, N, D>, h: &Host<N>, n: usize, base: usize) {
    for i in 0..n {
        h.ep.recv(d, h.mr.alloc(d, BUF).unwrap(), OpContext(base + i))
            .unwrap();
    }
}

fn send<N: Nic>(d: &Domain<'_, N, D>, h: &Host<N>, to: FiAddr, payload: &[u8], ctx: usize) {
    let mut buf = h.mr.alloc(d, BUF).unwrap();
    buf.write(UDP_HEADER_LEN, payload).unwrap();
    if let Err((e, _)) = h.ep.send(d, buf, payload.len(), to, OpContext(ctx)) {
        panic!("send {ctx}: {e}");
    }
}

/// Issue 16 item 1: "a send carries the message as the UDP payload and nothing else; a receive
/// takes any datagram to its port", and item 2: "resolve peers (on AV insert or first send)".
/// Two plain-UDP endpoints exchange datagrams with ARP between them (RFC 826: the request,
/// the reply, the merge of the requester into the cache); the IPv4 header checksum and the
/// UDP checksum are right on the wire (RFC 791 §3.1, RFC 768).
fn two_endpoints_exchange_datagrams_with_arp_in_between<T: TestNic>() {
    let p = pair_of::<T>();
    let cap = Captured::on(&p.wire);
    let clock = TestClock::new();
    let (da, db) = (
        domain(&p.nic_a, &clock, IP_A),
        domain(&p.nic_b, &clock, IP_B),
    );
    let mut a = host(&da, 7000, false);
    let mut b = host(&db, 0, false);
    assert_eq!(a.ep.sockaddr(&da), Some(SockAddrIn::new(IP_A, 7000)));
    assert_eq!(
        b.ep.port(),
        49152,
        "the lowest free port of the dynamic range"
    );
    // The MTU as the endpoint sees it: the NIC's largest frame or the receive buffer (these
    // emulated NICs take jumbo frames), less the Ethernet header.
    let mtu = p.nic_a.capabilities().max_frame_len.min(BUF) - 14;
    assert_eq!(a.ep.max_msg_size(&da), mtu - 28);
    assert_eq!(a.ep.payload_offset(), 42);
    let to_b =
        a.av.insert_sockaddr_one(&da, b.ep.sockaddr(&db).unwrap())
            .unwrap();
    let to_a =
        b.av.insert_sockaddr_one(&db, a.ep.sockaddr(&da).unwrap())
            .unwrap();
    post_recvs(&da, &a, 8, 100);
    post_recvs(&db, &b, 8, 100);

    // A's first sends go before B's MAC is known: held, then released in order.
    for i in 0..4 {
        send(&da, &a, to_b, format!("to b {i}").as_bytes(), i);
    }
    let big = a.mr.alloc(&da, BUF).unwrap();
    let r = a.ep.send(&da, big, mtu - 27, to_b, OpContext(99));
    assert!(matches!(r, Err((Error::MsgSize, _))));
    let (mut got_a, mut got_b) = (Vec::new(), Vec::new());
    for _ in 0..20 {
        p.wire.run_until_idle();
        let (ok, err) = read_all(&da, &mut a);
        assert!(
            err.is_empty(),
            "A's errors: {:?}",
            err.iter().map(|e| e.1).collect::<Vec<_>>()
        );
        got_a.extend(ok);
        let (ok, err) = read_all(&db, &mut b);
        assert!(err.is_empty());
        got_b.extend(ok);
    }
    let sends: Vec<usize> = got_a.iter().map(|c| c.0).collect();
    assert_eq!(sends, [0, 1, 2, 3], "each send completes once, in order");
    assert_eq!(got_b.len(), 4);
    // (ARP frames took B's first buffers, which went back to the ring behind the others: the
    // datagrams land in later ones, in order.)
    assert!(got_b.windows(2).all(|w| w[0].0 < w[1].0));
    for (i, (_, len, src, buf)) in got_b.iter().enumerate() {
        let want = format!("to b {i}");
        assert_eq!((*len, *src), (want.len(), to_a), "FI_SOURCE");
        let mut bytes = vec![0; *len];
        buf.as_ref()
            .unwrap()
            .read(UDP_HEADER_LEN, &mut bytes)
            .unwrap();
        assert_eq!(bytes, want.as_bytes());
    }
    // B answers at once: A's address resolved when B inserted it (and from A's own request,
    // RFC 826's merge).
    send(&db, &b, to_a, b"to a", 7);
    p.wire.run_until_idle();
    let (ok, _) = read_all(&da, &mut a);
    let (sent, _) = read_all(&db, &mut b);
    assert_eq!(sent.iter().map(|c| c.0).collect::<Vec<_>>(), [7]);
    assert_eq!(
        ok.iter().map(|c| (c.1, c.2)).collect::<Vec<_>>(),
        [(4, to_b)]
    );
    let frames = cap.frames();
    assert!(
        frames.iter().any(|f| is_arp_request_for(f, IP_B)),
        "A asked for B"
    );
    assert!(
        frames
            .iter()
            .any(|f| is_arp_request_for(f, IP_A) && f[28..32] == IP_B.octets()),
        "B asked for A when A went into its AV"
    );
    // The announcements (RFC 5227 §2.3): a request for one's own address, from it.
    assert!(frames
        .iter()
        .any(|f| is_arp_request_for(f, IP_A) && f[28..32] == IP_A.octets()));
    // The datagrams on the wire are plain IPv4/UDP with right checksums (classified as a
    // host would).
    let udp: Vec<_> = frames
        .iter()
        .filter(|f| f.len() > 34 && f[12..14] == [8, 0] && f[23] == 17)
        .collect();
    assert_eq!(udp.len(), 5);
    for f in udp {
        assert_eq!(checksum::of(&f[14..34]), 0, "IPv4 header checksum");
        let mut s = checksum::Sum::new();
        let len = u16::from_be_bytes([f[38], f[39]]);
        s.add_pseudo_header(
            Ipv4Addr::new(f[26], f[27], f[28], f[29]),
            Ipv4Addr::new(f[30], f[31], f[32], f[33]),
            17,
            len,
        )
        .add(&f[34..34 + usize::from(len)]);
        assert!(s.verifies(), "UDP checksum");
    }
}

/// Issue 16 item 2: "hold sends to a peer being resolved in a bounded queue, retry a bounded
/// number of times, then fail each held send with an error completion naming the cause" — three
/// requests a second apart (RFC 1122 §2.3.2.1 limits the rate of ARP requests), then
/// `FI_EHOSTUNREACH` for each held send, its buffer back.
fn a_peer_that_never_answers_arp_fails_each_held_send<T: TestNic>() {
    let p = pair_of::<T>();
    let cap = Captured::on(&p.wire);
    let clock = TestClock::new();
    let da = domain(&p.nic_a, &clock, IP_A);
    let mut a = host(&da, 7000, false);
    let nobody =
        a.av.insert_sockaddr_one(&da, SockAddrIn::new(IP_NOBODY, 9))
            .unwrap();
    for i in 0..3 {
        send(&da, &a, nobody, b"anyone?", i);
    }
    let mut failed = Vec::new();
    for _ in 0..6 {
        p.wire.run_until_idle();
        let (ok, err) = read_all(&da, &mut a);
        assert!(ok.is_empty());
        failed.extend(err);
        clock.advance(Duration::from_secs(1));
    }
    let got: Vec<_> = failed.iter().map(|e| (e.0, e.1)).collect();
    assert_eq!(
        got,
        [(0, 113), (1, 113), (2, 113)],
        "FI_EHOSTUNREACH, in order"
    );
    assert!(failed.iter().all(|e| e.3.is_some()), "every buffer back");
    let asked = cap
        .frames()
        .iter()
        .filter(|f| is_arp_request_for(f, IP_NOBODY))
        .count();
    assert_eq!(
        asked, 3,
        "three requests a second apart (RFC 1122 §2.3.2.1)"
    );
    // An inject to the unreachable peer is `Again`, and asks again.
    assert_eq!(a.ep.inject(&da, b"x", nobody), Err(Error::Again));
}

/// An ICMP echo request from `src` (MAC A) to B, by hand (RFC 792).
fn echo_request(ident: u16, seq: u16, data: &[u8]) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&MAC_B.0);
    f.extend_from_slice(&MAC_A.0);
    f.extend_from_slice(&[0x08, 0x00]);
    let total = (20 + 8 + data.len()) as u16;
    let mut ip = vec![0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 1, 0, 0];
    ip[2..4].copy_from_slice(&total.to_be_bytes());
    ip.extend_from_slice(&IP_A.octets());
    ip.extend_from_slice(&IP_B.octets());
    let c = checksum::of(&ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&ip);
    let mut icmp = vec![8, 0, 0, 0];
    icmp.extend_from_slice(&ident.to_be_bytes());
    icmp.extend_from_slice(&seq.to_be_bytes());
    icmp.extend_from_slice(data);
    let c = checksum::of(&icmp);
    icmp[2..4].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&icmp);
    f
}

/// Issue 16 item 2: "Answer ICMP echo requests (so `ping` works)": RFC 792's echo reply, with
/// the request's identifier, sequence number and data.
fn icmp_echo_requests_are_answered<T: TestNic>() {
    let p = pair_of::<T>();
    let clock = TestClock::new();
    let db = domain(&p.nic_b, &clock, IP_B);
    let mut b = host(&db, 7000, false);
    post_recvs(&db, &b, 4, 0);
    let mut raw = RawSender::new(&p);
    let cap = Captured::on(&p.wire);
    let data: Vec<u8> = (0..56).collect();
    raw.send(&p, &[echo_request(0x1234, 7, &data)]);
    for _ in 0..3 {
        let (ok, err) = read_all(&db, &mut b);
        assert!(
            ok.is_empty() && err.is_empty(),
            "nothing reaches the application"
        );
        p.wire.run_until_idle();
    }
    let replies = echo_replies(cap.frames());
    assert_eq!(replies.len(), 1, "one echo reply");
    let r = &replies[0];
    assert_eq!(&r[0..6], &MAC_A.0);
    assert_eq!(&r[26..30], &IP_B.octets());
    assert_eq!(&r[30..34], &IP_A.octets());
    assert_eq!(checksum::of(&r[14..34]), 0);
    assert_eq!(
        &r[38..42],
        &[0x12, 0x34, 0, 7],
        "identifier and sequence echoed"
    );
    assert_eq!(&r[42..42 + data.len()], &data[..], "the data echoed whole");
    assert_eq!(checksum::of(&r[34..42 + data.len()]), 0);
    assert_eq!(b.ep.dropped_frames(&db), 0, "an answered ping is no drop");
}

/// The echo replies among `frames` (IPv4, ICMP, type 0).
fn echo_replies(frames: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    frames
        .into_iter()
        .filter(|f| f.len() > 34 && f[12..14] == [8, 0] && f[23] == 1 && f[34] == 0)
        .collect()
}

/// An ARP request from A (MAC A, IP A) for `target` (RFC 826).
fn arp_request(target: Ipv4Addr) -> Vec<u8> {
    let mut out = [0u8; 60];
    ringfab::ip::emit::arp(
        &ringfab::ip::emit::ArpFrame {
            op: ringfab::ip::parse::ArpOp::Request,
            eth_dst: MacAddr::BROADCAST,
            sender_mac: MAC_A,
            sender_ip: IP_A,
            target_mac: MacAddr([0; 6]),
            target_ip: target,
        },
        &mut out,
    );
    out.to_vec()
}

/// RFC 1122 §3.2.2.6: "The data received in the Echo Request MUST be entirely included in the
/// Echo Reply." An echo request as long as a 1500-byte MTU allows (`ping -s 1472`), and one as
/// long as the receive path takes (the NIC's largest frame or the receive buffer), are each
/// answered with all their data.
fn an_echo_request_as_long_as_the_mtu_gets_all_its_data_back<T: TestNic>() {
    let p = pair_of::<T>();
    let clock = TestClock::new();
    let db = domain(&p.nic_b, &clock, IP_B);
    let mut b = host(&db, 7000, false);
    post_recvs(&db, &b, 4, 0);
    let mut raw = RawSender::new(&p);
    let cap = Captured::on(&p.wire);
    let largest = p.nic_b.capabilities().max_frame_len.min(BUF) - UDP_HEADER_LEN;
    for (seq, len) in [(1u16, 1472usize), (2, largest)] {
        let data: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
        raw.send_long(&p, &echo_request(0x4242, seq, &data));
        for _ in 0..3 {
            let (ok, err) = read_all(&db, &mut b);
            assert!(
                ok.is_empty() && err.is_empty(),
                "nothing reaches the application"
            );
            p.wire.run_until_idle();
        }
        let replies: Vec<_> = echo_replies(cap.frames())
            .into_iter()
            .filter(|r| r[40..42] == seq.to_be_bytes())
            .collect();
        assert_eq!(replies.len(), 1, "one reply to the request of {len} bytes");
        let r = &replies[0];
        assert_eq!(
            r.len(),
            UDP_HEADER_LEN + len,
            "the reply is as long as the request"
        );
        assert_eq!(&r[42..], &data[..], "the data echoed whole");
        assert_eq!(checksum::of(&r[14..34]), 0);
        assert_eq!(checksum::of(&r[34..]), 0, "ICMP checksum");
    }
    assert_eq!(db.ip_drops().control, 0);
}

/// fi_cq(3): the CQ's size bounds the completions it holds; docs/ip.md: control frames take
/// no CQ credit and are never reported, so a CQ whose every credit is taken does not hold back
/// RFC 826's reply ("the ar$op field is set to ares_op$REPLY, and the packet is sent ... to
/// the same hardware on which the request was received") nor RFC 1122 §3.2.2.6's ("Every host
/// MUST implement an ICMP Echo server function"). B's CQ has 4 entries, all taken by the 4
/// receives posted.
fn a_full_cq_does_not_hold_back_arp_and_icmp_answers<T: TestNic>() {
    let p = pair_of::<T>();
    let clock = TestClock::new();
    let db = domain(&p.nic_b, &clock, IP_B);
    let mut b = host_with_cq(&db, 7000, false, 4);
    post_recvs(&db, &b, 4, 0);
    let more = b.ep.recv(&db, b.mr.alloc(&db, BUF).unwrap(), OpContext(9));
    assert!(
        matches!(more, Err((Error::Again, _))),
        "the CQ's credits are all taken"
    );
    let mut raw = RawSender::new(&p);
    let cap = Captured::on(&p.wire);
    raw.send(&p, &[arp_request(IP_B), echo_request(1, 1, b"ping")]);
    for _ in 0..3 {
        let (ok, err) = read_all(&db, &mut b);
        assert!(
            ok.is_empty() && err.is_empty(),
            "nothing reaches the application"
        );
        p.wire.run_until_idle();
    }
    let frames = cap.frames();
    let arp_replies = frames
        .iter()
        .filter(|f| f[12..14] == [8, 6] && f[20..22] == [0, 2] && f[28..32] == IP_B.octets())
        .count();
    assert_eq!(arp_replies, 1, "B answered ARP");
    assert_eq!(echo_replies(frames).len(), 1, "B answered the ping");
    assert_eq!(db.ip_drops().control, 0);
}

/// docs/ip.md: a control frame is never reported to the application, and one that does not go
/// is counted (`IpDrops::control`) rather than lost silently. B answers a ping, and its
/// endpoint is closed before the device sent the answer (the emulated devices send when the
/// wire runs): the flush takes the echo reply back, no entry reaches B's CQ, and the reply
/// counts as a control drop.
fn a_control_frame_that_does_not_go_is_counted_never_reported<T: TestNic>() {
    let p = pair_of::<T>();
    let clock = TestClock::new();
    let db = domain(&p.nic_b, &clock, IP_B);
    let mut b = host(&db, 7000, false);
    post_recvs(&db, &b, 4, 0);
    let mut raw = RawSender::new(&p);
    let cap = Captured::on(&p.wire);
    raw.send(&p, &[echo_request(9, 9, b"lost?")]);
    // One read: the request is taken and the reply posted on B's transmit queue; the wire is
    // not run again before the close.
    let (ok, err) = read_all(&db, &mut b);
    assert!(ok.is_empty() && err.is_empty());
    let Host { cq, ep, .. } = b;
    ep.close(&db).unwrap();
    p.wire.run_until_idle();
    let mut e = [MsgEntry::default(); 4];
    assert!(
        matches!(cq.read(&db, &mut e), Err(Error::Again)),
        "nothing reported"
    );
    assert!(
        echo_replies(cap.frames()).is_empty(),
        "the reply never left"
    );
    assert_eq!(db.ip_drops().control, 1, "and was counted");
}

/// RFC 826: when the address is not in the table, the resolution module "generates an
/// Ethernet packet with a type field of ether_type$ADDRESS_RESOLUTION" — and here it leaves
/// with the send that needed it (docs/ip.md: the outbox is drained on sends, not only on CQ
/// reads): A sends to B, whose MAC it does not know, and never reads its CQ; the request is
/// on the wire, B answers, and A's held send goes out at A's next read.
fn a_send_takes_the_arp_request_it_needs_out_with_it<T: TestNic>() {
    let p = pair_of::<T>();
    let cap = Captured::on(&p.wire);
    let clock = TestClock::new();
    let (da, db) = (
        domain(&p.nic_a, &clock, IP_A),
        domain(&p.nic_b, &clock, IP_B),
    );
    let mut a = host(&da, 7000, false);
    let mut b = host(&db, 7000, false);
    post_recvs(&da, &a, 8, 100);
    post_recvs(&db, &b, 8, 0);
    let to_b =
        a.av.insert_sockaddr_one(&da, SockAddrIn::new(IP_B, 7000))
            .unwrap();
    p.wire.run_until_idle();
    assert!(
        !cap.frames().iter().any(|f| is_arp_request_for(f, IP_B)),
        "nothing sent A's outbox yet"
    );
    send(&da, &a, to_b, b"first", 1);
    p.wire.run_until_idle();
    assert!(
        cap.frames().iter().any(|f| is_arp_request_for(f, IP_B)),
        "the send sent A's ARP request"
    );
    let mut got_a = Vec::new();
    let mut got_b = Vec::new();
    for _ in 0..4 {
        got_b.extend(read_all(&db, &mut b).0);
        p.wire.run_until_idle();
        got_a.extend(read_all(&da, &mut a).0);
        p.wire.run_until_idle();
    }
    assert_eq!(got_a.iter().map(|c| c.0).collect::<Vec<_>>(), [1]);
    assert_eq!(got_b.iter().map(|c| c.1).collect::<Vec<_>>(), [5]);
}

/// The domain's clock times ARP (docs/ip.md): a CQ read reads it only when ARP or a control
/// frame has something to time. Once both peers are resolved, reading the datagrams that arrive
/// and polling an empty CQ read no clock (a clock read is a system call or a device access on
/// some hosts: a polling loop must not pay it per call).
fn a_read_with_nothing_for_arp_reads_no_clock<T: TestNic>() {
    let p = pair_of::<T>();
    let clock = TestClock::new();
    let (da, db) = (
        domain(&p.nic_a, &clock, IP_A),
        domain(&p.nic_b, &clock, IP_B),
    );
    let mut a = host(&da, 7000, false);
    let mut b = host(&db, 7000, false);
    post_recvs(&da, &a, 8, 100);
    post_recvs(&db, &b, 8, 0);
    let to_b =
        a.av.insert_sockaddr_one(&da, SockAddrIn::new(IP_B, 7000))
            .unwrap();
    let to_a =
        b.av.insert_sockaddr_one(&db, SockAddrIn::new(IP_A, 7000))
            .unwrap();
    send(&da, &a, to_b, b"first", 1);
    send(&db, &b, to_a, b"back", 2);
    let (mut got_a, mut got_b) = (Vec::new(), Vec::new());
    for _ in 0..6 {
        p.wire.run_until_idle();
        got_a.extend(read_all(&da, &mut a).0);
        p.wire.run_until_idle();
        got_b.extend(read_all(&db, &mut b).0);
    }
    assert_eq!(got_a.len(), 2, "A's send and B's datagram: {got_a:?}");
    assert_eq!(got_b.len(), 2, "B's send and A's datagram: {got_b:?}");
    // Both resolved: datagrams now go without ARP. Send some, then read them and poll on.
    let before = clock.reads();
    for i in 0..4 {
        p.wire.run_until_idle();
        let (ok, err) = read_all(&db, &mut b);
        assert!(err.is_empty() && ok.is_empty(), "round {i}: {ok:?} {err:?}");
    }
    assert_eq!(clock.reads(), before, "empty reads read the clock");
    send(&da, &a, to_b, b"second", 3);
    p.wire.run_until_idle();
    let sent_reads = clock.reads();
    let mut delivered = Vec::new();
    for _ in 0..4 {
        p.wire.run_until_idle();
        delivered.extend(read_all(&db, &mut b).0);
    }
    assert_eq!(
        delivered.iter().map(|c| c.1).collect::<Vec<_>>(),
        [6],
        "B received A's second datagram"
    );
    assert_eq!(
        clock.reads(),
        sent_reads,
        "reading a datagram and polling on read the clock"
    );
}

/// Whether the UDP checksum of the IPv4/UDP frame `f` (no options) is right (RFC 768).
fn udp_checksum_verifies(f: &[u8]) -> bool {
    let mut s = checksum::Sum::new();
    let len = u16::from_be_bytes([f[38], f[39]]);
    s.add_pseudo_header(
        Ipv4Addr::new(f[26], f[27], f[28], f[29]),
        Ipv4Addr::new(f[30], f[31], f[32], f[33]),
        17,
        len,
    )
    .add(&f[34..34 + usize::from(len)]);
    s.verifies()
}

/// fi_endpoint(3), iov_limit: "This is the maximum number of IO vectors (scatter-gather
/// elements) that a single posted operation may reference"; RFC 768: the checksum is "the
/// 16-bit one's complement of the one's complement sum of a pseudo header of information from
/// the IP header, the UDP header, and the data". A gather send of three buffers of odd lengths
/// is one datagram of their bytes in order, with a right checksum (summed across the pieces in
/// software, or inserted by the NIC where it offers that); the first, to a peer not yet
/// resolved, is held and released as a send of one buffer is; the buffers come back together.
fn gather_sends_on_plain_udp_are_one_datagram_of_every_piece<T: TestNic>() {
    use ringfab::mr::Iov;
    let p = pair_of::<T>();
    let cap = Captured::on(&p.wire);
    let clock = TestClock::new();
    let (da, db) = (
        domain(&p.nic_a, &clock, IP_A),
        domain(&p.nic_b, &clock, IP_B),
    );
    let attr = EpAttr {
        encap: Encap::PlainUdp,
        port: 7000,
        tx_iov_limit: 3,
        ..EpAttr::default()
    };
    let a = host_with(&da, &attr, 256);
    let mut b = host(&db, 7000, false);
    post_recvs(&da, &a, 8, 100);
    post_recvs(&db, &b, 8, 100);
    let to_b =
        a.av.insert_sockaddr_one(&da, SockAddrIn::new(IP_B, 7000))
            .unwrap();
    let lens = [5usize, 7, 9];
    let gather = |seed: u8| {
        let mut iov = Iov::new();
        for (k, len) in lens.into_iter().enumerate() {
            let mut buf = a.mr.alloc(&da, 256).unwrap();
            let bytes: Vec<u8> = (0..len).map(|j| seed + (k * 16 + j) as u8).collect();
            // The first buffer's payload sits behind the header, as a send's.
            let at = if k == 0 { UDP_HEADER_LEN } else { 0 };
            buf.write(at, &bytes).unwrap();
            iov.push(buf, len).unwrap();
        }
        iov
    };
    let expect = |seed: u8| -> Vec<u8> {
        lens.into_iter()
            .enumerate()
            .flat_map(|(k, len)| (0..len).map(move |j| seed + (k * 16 + j) as u8))
            .collect()
    };
    // B is not resolved yet: the first is held, the second sent when it is.
    if let Err((e, _)) = a.ep.sendv(&da, gather(0x10), to_b, OpContext(1)) {
        panic!("sendv 1: {e}");
    }
    let (mut sent, mut got) = (Vec::new(), Vec::new());
    let mut iovs_back = 0;
    for round in 0..6 {
        p.wire.run_until_idle();
        loop {
            let mut e = [MsgEntry::default(); 4];
            let mut src = [FiAddr::NOTAVAIL; 4];
            let mut iovs: [Iov; 4] = Default::default();
            match a.cq.read_owned_iov(&da, &mut e, &mut src, &mut iovs) {
                Ok(n) => {
                    for k in 0..n {
                        sent.push(e[k].op_context.0);
                        iovs_back += usize::from(iovs[k].len() == lens.len());
                    }
                }
                Err(Error::Again) => break,
                Err(other) => panic!("A's read: {other:?}"),
            }
        }
        let (ok, err) = read_all(&db, &mut b);
        assert!(err.is_empty());
        got.extend(ok);
        if round == 1 {
            if let Err((e, _)) = a.ep.sendv(&da, gather(0x40), to_b, OpContext(2)) {
                panic!("sendv 2: {e}");
            }
        }
    }
    assert_eq!(sent, [1, 2], "each gather send completes once, in order");
    assert_eq!(iovs_back, 2, "the three buffers come back together");
    assert_eq!(got.len(), 2);
    for ((_, len, _, buf), seed) in got.iter().zip([0x10, 0x40]) {
        let want = expect(seed);
        assert_eq!(*len, want.len());
        let mut bytes = vec![0; *len];
        buf.as_ref()
            .unwrap()
            .read(UDP_HEADER_LEN, &mut bytes)
            .unwrap();
        assert_eq!(bytes, want, "the pieces, in order");
    }
    let udp: Vec<_> = cap
        .frames()
        .into_iter()
        .filter(|f| f.len() > 34 && f[12..14] == [8, 0] && f[23] == 17)
        .collect();
    assert_eq!(udp.len(), 2);
    for f in &udp {
        assert_eq!(checksum::of(&f[14..34]), 0, "IPv4 header checksum");
        assert!(udp_checksum_verifies(f), "UDP checksum over every piece");
    }
}

/// fi_endpoint(3), SHARED CONTEXTS: "Conceptually, shareable transmit contexts are transmit
/// queues that may be accessed by many endpoints. ... operations are posted directly to the
/// endpoint. ... Completed operations are posted to the CQs bound to the endpoint." Two
/// plain-UDP endpoints of A, each with its own port and CQ, send through one shared transmit
/// context: each datagram leaves from its endpoint's port (B's `FI_SOURCE` tells them apart),
/// the first ones held while B resolves and released to each endpoint's own CQ, in order, and
/// the later ones (a send and an inject) sent at once.
fn endpoints_on_a_shared_transmit_context_send_plain_udp_from_their_own_ports<T: TestNic>() {
    let p = pair_of::<T>();
    let clock = TestClock::new();
    let caps = Capacities {
        queues: 4,
        cqs: 2,
        cq_size: 256,
        mrs: 1,
        avs: 1,
        av_entries: 4,
    };
    let da = Domain::<_, D>::with_capacities(&p.nic_a, &caps).with_clock(&clock);
    da.set_ipv4(ipv4_config(IP_A)).unwrap();
    let db = domain(&p.nic_b, &clock, IP_B);
    let mut b = host(&db, 9000, false);
    post_recvs(&db, &b, 16, 0);
    let stx = da
        .stx_context(&ringfab::stx::StxAttr {
            encap: Encap::PlainUdp,
            ..Default::default()
        })
        .unwrap();
    let av = da
        .open_av(&AvAttr {
            format: AddrFormat::SockaddrIn,
            ..AvAttr::default()
        })
        .unwrap();
    let mr = da.register(memory(40 * BUF)).unwrap();
    let mut sides = Vec::new();
    for (i, port) in [7000u16, 7001].into_iter().enumerate() {
        let cq = da
            .open_cq::<Msg>(&CqAttr {
                size: 64,
                ..CqAttr::default()
            })
            .unwrap();
        let mut ep = da
            .endpoint(&EpAttr {
                encap: Encap::PlainUdp,
                port,
                rx_queue: i as u16,
                ..EpAttr::default()
            })
            .unwrap();
        ep.bind_cq(&da, &cq, BindFlags::TRANSMIT | BindFlags::RECV)
            .unwrap();
        ep.bind_av(&da, &av).unwrap();
        ep.bind_stx(&da, &stx).unwrap();
        ep.enable(&da).unwrap();
        for k in 0..4 {
            ep.recv(&da, mr.alloc(&da, BUF).unwrap(), OpContext(100 + k))
                .unwrap();
        }
        sides.push((cq, ep));
    }
    let to_b = av
        .insert_sockaddr_one(&da, SockAddrIn::new(IP_B, 9000))
        .unwrap();
    let from: Vec<FiAddr> = [7000, 7001]
        .into_iter()
        .map(|port| {
            b.av.insert_sockaddr_one(&db, SockAddrIn::new(IP_A, port))
                .unwrap()
        })
        .collect();
    let send_from =
        |sides: &[(CompletionQueue<_, Msg>, Endpoint)], i: usize, payload: &[u8], ctx: usize| {
            let mut buf = mr.alloc(&da, BUF).unwrap();
            buf.write(UDP_HEADER_LEN, payload).unwrap();
            if let Err((e, _)) = sides[i]
                .1
                .send(&da, buf, payload.len(), to_b, OpContext(ctx))
            {
                panic!("send {ctx} from endpoint {i}: {e}");
            }
        };
    let pass = |sides: &mut [(CompletionQueue<_, Msg>, Endpoint)],
                completed: &mut [Vec<usize>; 2],
                got: &mut Vec<(usize, FiAddr)>,
                b: &mut Host<_>| {
        for _ in 0..4 {
            p.wire.run_until_idle();
            for (i, (cq, _)) in sides.iter_mut().enumerate() {
                let (ok, err) = read_cq(&da, cq);
                assert!(err.is_empty(), "endpoint {i}'s errors");
                completed[i].extend(ok.iter().map(|c| c.0));
            }
            let (ok, err) = read_all(&db, b);
            assert!(err.is_empty());
            got.extend(ok.into_iter().map(|c| (c.1, c.2)));
        }
    };
    // B is not resolved yet: both are held on the shared queue.
    send_from(&sides, 0, b"zero", 1);
    send_from(&sides, 1, b"one", 2);
    let mut completed = [Vec::new(), Vec::new()];
    let mut got = Vec::new();
    pass(&mut sides, &mut completed, &mut got, &mut b);
    assert_eq!(
        completed,
        [vec![1], vec![2]],
        "each on its own endpoint's CQ"
    );
    assert_eq!(got, [(4, from[0]), (3, from[1])], "each from its own port");
    // Resolved now: sent at once, an inject too.
    send_from(&sides, 1, b"one again", 3);
    sides[0].1.inject(&da, b"inj", to_b).unwrap();
    pass(&mut sides, &mut completed, &mut got, &mut b);
    assert_eq!(completed, [vec![1], vec![2, 3]]);
    assert_eq!(got[2..], [(9, from[1]), (3, from[0])]);
}

/// A valid datagram from A (port 5000) to B's `port`.
fn datagram(port: u16, payload: &[u8]) -> Vec<u8> {
    datagram_from(5000, port, payload)
}

/// A valid datagram from A's port `from` to B's `port`.
fn datagram_from(from: u16, port: u16, payload: &[u8]) -> Vec<u8> {
    datagram_to(MAC_B, IP_B, from, port, payload)
}

/// A valid datagram from A's port `from` to `dst_ip`'s `port`, at the Ethernet address
/// `dst_mac`.
fn datagram_to(
    dst_mac: MacAddr,
    dst_ip: Ipv4Addr,
    from: u16,
    port: u16,
    payload: &[u8],
) -> Vec<u8> {
    let mut out = vec![0u8; UDP_HEADER_LEN + payload.len()];
    let h = UdpHeader {
        src_mac: MAC_A,
        dst_mac,
        src: SockAddrIn::new(IP_A, from),
        dst: SockAddrIn::new(dst_ip, port),
    };
    let n = udp_frame(&h, payload, &mut out).unwrap();
    out.truncate(n);
    out
}

/// The ICMP port-unreachable messages among `frames` (IPv4, ICMP, type 3, code 3).
fn port_unreachables(frames: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    frames
        .into_iter()
        .filter(|f| f.len() > 35 && f[12..14] == [8, 0] && f[23] == 1 && f[34..36] == [3, 3])
        .collect()
}

/// RFC 1122 §4.1.3.1: "If a datagram arrives addressed to a UDP port for which there is no
/// pending LISTEN call, UDP SHOULD send an ICMP Port Unreachable message." RFC 792: the message
/// carries "the internet header plus the first 64 bits of the original datagram's data".
/// RFC 1122 §3.2.2: "An ICMP error message MUST NOT be sent as the result of receiving: ... a
/// datagram destined to an IP broadcast or IP multicast address, or a datagram sent as a
/// link-layer broadcast". RFC 1122 §3.2.2 also allows limiting the rate ("a host MAY limit the
/// rate at which it sends ICMP error messages"): a burst of 10, then one per 100 ms. Every
/// such datagram still counts as dropped for its port.
fn a_datagram_to_a_port_nobody_bound_is_answered_port_unreachable<T: TestNic>() {
    let p = pair_of::<T>();
    let clock = TestClock::new();
    let db = domain(&p.nic_b, &clock, IP_B);
    let mut b = host(&db, 7000, false);
    post_recvs(&db, &b, 16, 0);
    let mut raw = RawSender::new(&p);
    let cap = Captured::on(&p.wire);
    let pass = |raw: &mut RawSender<T>, b: &mut Host<_>, frames: &[Vec<u8>]| {
        raw.send(&p, frames);
        for _ in 0..3 {
            let (ok, err) = read_all(&db, b);
            assert!(
                ok.is_empty() && err.is_empty(),
                "nothing reaches the application"
            );
            p.wire.run_until_idle();
        }
    };
    let closed = datagram(7001, b"anyone there?");
    pass(&mut raw, &mut b, std::slice::from_ref(&closed));
    let answers = port_unreachables(cap.frames());
    assert_eq!(answers.len(), 1, "one port unreachable");
    let r = &answers[0];
    assert_eq!((&r[0..6], &r[6..12]), (&MAC_A.0[..], &MAC_B.0[..]));
    assert_eq!(
        (&r[26..30], &r[30..34]),
        (&IP_B.octets()[..], &IP_A.octets()[..])
    );
    assert_eq!(checksum::of(&r[14..34]), 0, "IPv4 header checksum");
    assert_eq!(&r[38..42], &[0; 4], "unused");
    assert_eq!(
        &r[42..70],
        &closed[14..42],
        "the IPv4 header and 64 bits of data"
    );
    assert_eq!(checksum::of(&r[34..70]), 0, "ICMP checksum");
    assert_eq!(db.ip_drops().port, 1);

    // Broadcast, at the IP layer or the link layer: counted, never answered.
    let subnet_broadcast = Ipv4Addr::new(192, 0, 2, 255);
    pass(
        &mut raw,
        &mut b,
        &[
            datagram_to(MacAddr::BROADCAST, subnet_broadcast, 5000, 7001, b"all"),
            datagram_to(MacAddr::BROADCAST, Ipv4Addr::BROADCAST, 5000, 7001, b"all"),
            datagram_to(MacAddr::BROADCAST, IP_B, 5000, 7001, b"link broadcast"),
        ],
    );
    assert_eq!(
        port_unreachables(cap.frames()).len(),
        1,
        "no answer to a broadcast"
    );
    assert_eq!(db.ip_drops().port, 4);

    // The rate limit: of 15 more at one instant, the 9 tokens left in the burst; a second
    // later the bucket is full again (10).
    for i in 0..15 {
        pass(
            &mut raw,
            &mut b,
            &[datagram(7002, format!("{i}").as_bytes())],
        );
    }
    assert_eq!(port_unreachables(cap.frames()).len(), 10);
    clock.advance(Duration::from_secs(1));
    for i in 0..15 {
        pass(
            &mut raw,
            &mut b,
            &[datagram(7002, format!("{i}").as_bytes())],
        );
    }
    assert_eq!(port_unreachables(cap.frames()).len(), 20);
    let drops = db.ip_drops();
    assert_eq!((drops.port, drops.control), (34, 0));
    assert_eq!(b.ep.dropped_frames(&db), 34);
}

/// `frame` (a datagram) with IPv4 `options` (a multiple of 4 bytes) after its fixed header:
/// IHL, total length and header checksum made right (the UDP checksum does not cover them).
fn with_options(frame: &[u8], options: &[u8]) -> Vec<u8> {
    let mut f = frame[..34].to_vec();
    f.extend_from_slice(options);
    f.extend_from_slice(&frame[34..]);
    f[14] = 0x45 + (options.len() / 4) as u8;
    let total = u16::from_be_bytes([f[16], f[17]]) + options.len() as u16;
    f[16..18].copy_from_slice(&total.to_be_bytes());
    fix_ipv4(&mut f);
    f
}

/// RFC 1122 §3.2.1.8: "The IP and transport layer MUST each interpret those IP options that
/// they understand and silently ignore the others." A datagram whose IPv4 header carries
/// options completes as one without them would: its payload at `payload_offset()` (42) in the
/// buffer, its length and source the same (the options are moved past, not delivered).
/// RFC 791 §3.1 defines an option's length octet; one that runs past the header is malformed:
/// dropped and counted (`Ipv4Options`), never reported. A datagram with options to a closed
/// port is answered with its whole header quoted, options included (RFC 792).
fn datagrams_with_ipv4_options_complete_with_the_payload_at_its_offset<T: TestNic>() {
    let p = pair_of::<T>();
    let clock = TestClock::new();
    let db = domain(&p.nic_b, &clock, IP_B);
    let mut b = host(&db, 7000, false);
    let from_a =
        b.av.insert_sockaddr_one(&db, SockAddrIn::new(IP_A, 5000))
            .unwrap();
    post_recvs(&db, &b, 8, 0);
    let mut raw = RawSender::new(&p);
    let cap = Captured::on(&p.wire);
    let payload: Vec<u8> = (0..300).map(|i| (i * 13 + 1) as u8).collect();
    let router_alert = [148, 4, 0, 0];
    let timestamp = [68, 12, 5, 0, 0, 0, 0, 1, 0, 0, 0, 2, 1, 1, 1, 0];
    let longest = [1u8; 40];
    let frames = vec![
        with_options(&datagram(7000, &payload), &router_alert),
        with_options(&datagram(7000, b"short"), &timestamp),
        with_options(&datagram(7000, &payload[..17]), &longest),
        with_options(&datagram(7000, b"bad"), &[7, 5, 0, 0]),
        with_options(&datagram(7001, b"closed"), &router_alert),
    ];
    raw.send(&p, &frames);
    let mut got = Vec::new();
    for _ in 0..3 {
        let (ok, err) = read_all(&db, &mut b);
        assert!(err.is_empty());
        got.extend(ok);
        p.wire.run_until_idle();
    }
    let want: [&[u8]; 3] = [&payload, b"short", &payload[..17]];
    assert_eq!(got.len(), 3);
    for ((_, len, src, buf), want) in got.iter().zip(want) {
        assert_eq!((*len, *src), (want.len(), from_a));
        let mut bytes = vec![0; *len];
        buf.as_ref()
            .unwrap()
            .read(b.ep.payload_offset(), &mut bytes)
            .unwrap();
        assert_eq!(bytes, want, "the payload at payload_offset()");
    }
    let drops = db.ip_drops();
    assert_eq!((drops.of(Discard::Ipv4Options), drops.port), (1, 1));
    let answers = port_unreachables(cap.frames());
    assert_eq!(answers.len(), 1);
    let closed = &frames[4];
    assert_eq!(
        &answers[0][42..42 + 24 + 8],
        &closed[14..14 + 24 + 8],
        "options quoted"
    );
    assert_eq!(checksum::of(&answers[0][34..]), 0, "ICMP checksum");
}

/// Sets the IPv4 header checksum of `f` right again after an edit (over the header length
/// its IHL says).
fn fix_ipv4(f: &mut [u8]) {
    f[24..26].fill(0);
    let ihl = usize::from(f[14] & 0x0f) * 4;
    let c = checksum::of(&f[14..14 + ihl]);
    f[24..26].copy_from_slice(&c.to_be_bytes());
}

/// Issue 16 item 6: "Every parse path with malformed input (truncated, wrong lengths, bad
/// checksums, options, fragments, broadcast and multicast): dropped and counted, never a
/// panic"; and fi_cq(3): "For endpoints allocated using the FI_SOURCE_ERR capability, if the
/// source address cannot be converted into a valid fi_addr_t value, fi_cq_readfrom will return
/// -FI_EAVAIL ... The completion will then be reported through fi_cq_readerr with error code
/// -FI_EADDRNOTAVAIL" (here with the sender's `sockaddr_in` in `err_data`).
fn malformed_frames_are_dropped_and_counted_never_reported<T: TestNic>() {
    let p = pair_of::<T>();
    let clock = TestClock::new();
    let db = domain(&p.nic_b, &clock, IP_B);
    let mut b = host(&db, 7000, true);
    post_recvs(&db, &b, 16, 0);
    let mut raw = RawSender::new(&p);
    let good = datagram(7000, b"hello");
    let mut bad_udp = good.clone();
    bad_udp[UDP_HEADER_LEN] ^= 0xff;
    let mut bad_ip = good.clone();
    bad_ip[24] ^= 0xff;
    let mut fragment = good.clone();
    fragment[20] |= 0x20; // more fragments
    fix_ipv4(&mut fragment);
    let mut options = good.clone();
    // A 24-byte header: the UDP header's first word read as an option (type 0x13, length
    // 0x88: past the header), which RFC 791 §3.1's option format refuses.
    options[14] = 0x46;
    fix_ipv4(&mut options);
    let mut other_host = good.clone();
    other_host[30..34].copy_from_slice(&Ipv4Addr::new(192, 0, 2, 77).octets());
    fix_ipv4(&mut other_host);
    let mut ringfab_frame = good.clone();
    ringfab_frame[12..14].copy_from_slice(&[0x88, 0xb5]);
    let mut tcp = good.clone();
    tcp[23] = 6;
    fix_ipv4(&mut tcp);
    let frames = vec![
        bad_udp,
        bad_ip,
        fragment,
        options,
        other_host,
        ringfab_frame,
        tcp,
        datagram(7001, b"nobody's port"),
        good[..20].to_vec(),
    ];
    raw.send(&p, &frames);
    for _ in 0..3 {
        let (ok, err) = read_all(&db, &mut b);
        assert!(ok.is_empty() && err.is_empty(), "never reported");
        p.wire.run_until_idle();
    }
    let drops = db.ip_drops();
    assert_eq!(drops.of(Discard::UdpChecksum), 1);
    // The truncated frame: a NIC that pads short frames (IEEE 802.3's 60 bytes) gives it a
    // header of zeros, whose checksum is wrong; one that does not, a header cut short.
    assert_eq!(
        drops.of(Discard::Ipv4Checksum) + drops.of(Discard::Ipv4Header),
        2,
        "{drops:?}"
    );
    assert_eq!(drops.of(Discard::Ipv4Options), 1);
    assert_eq!(drops.of(Discard::Fragment), 1);
    assert_eq!(drops.of(Discard::Ipv4Destination), 1);
    assert_eq!(drops.of(Discard::EtherType), 1);
    assert_eq!(drops.of(Discard::Protocol), 1);
    assert_eq!(drops.port, 1);
    let total: u64 = drops.discards.iter().sum::<u64>() + drops.port + drops.too_long;
    assert_eq!(total, frames.len() as u64, "{drops:?}");
    assert_eq!(b.ep.dropped_frames(&db), frames.len() as u64);

    // FI_SOURCE_ERR: a datagram from a sender not in the AV is an error entry whose err_data
    // is the sender's sockaddr_in, ready for insertion.
    raw.send(&p, std::slice::from_ref(&good));
    let (ok, err) = read_all(&db, &mut b);
    assert!(ok.is_empty());
    assert_eq!(err.len(), 1);
    // (The buffers the dropped frames filled went to the back of the ring: the next one
    // is the tenth receive posted.)
    let (ctx, errno, data, buf) = &err[0];
    assert_eq!((*ctx, *errno), (9, 99), "FI_EADDRNOTAVAIL");
    assert!(buf.is_some());
    let sender = SockAddrIn::from_bytes(data).unwrap();
    assert_eq!(sender, SockAddrIn::new(IP_A, 5000));
    let fa = b.av.insert_sockaddr_one(&db, sender).unwrap();
    raw.send(&p, &[good]);
    let (ok, err) = read_all(&db, &mut b);
    assert!(err.is_empty());
    assert_eq!(
        ok.iter().map(|c| (c.0, c.1, c.2)).collect::<Vec<_>>(),
        [(10, 5, fa)]
    );
}

/// Issue 16 item 1: "Several endpoints share one queue, told apart by port." fi_endpoint(3),
/// SHARED CONTEXTS: "Users post receive buffers directly to a shared receive context, with the
/// buffers usable by any endpoint bound to the shared receive context. ... Completed receive
/// operations are posted to the CQs bound to the endpoint." Two plain-UDP endpoints of B
/// receive through one shared receive context on one queue, each datagram on the CQ of the
/// endpoint bound to its destination port; a datagram to a port nobody bound is dropped and
/// counted; ARP reaches B's host through the shared queue (A's sends are resolved); a receive
/// still waiting is canceled with its buffer back.
fn several_endpoints_share_one_queue_told_apart_by_port<T: TestNic>() {
    let p = pair_of::<T>();
    let clock = TestClock::new();
    let da = domain(&p.nic_a, &clock, IP_A);
    let mut a = host(&da, 5000, false);
    let caps = Capacities {
        queues: 3,
        cqs: 2,
        cq_size: 256,
        mrs: 1,
        avs: 1,
        av_entries: 4,
    };
    let db = Domain::<_, D>::with_capacities(&p.nic_b, &caps).with_clock(&clock);
    db.set_ipv4(ipv4_config(IP_B)).unwrap();
    let srx = db
        .srx_context(&SrxAttr {
            encap: Encap::PlainUdp,
            ..SrxAttr::default()
        })
        .unwrap();
    let av_b = db
        .open_av(&AvAttr {
            format: AddrFormat::SockaddrIn,
            ..AvAttr::default()
        })
        .unwrap();
    let mut bs = Vec::new();
    let mr_b = db.register(memory(40 * BUF)).unwrap();
    for (port, tx_queue) in [(7000, 0), (7001, 1)] {
        let cq = db
            .open_cq::<Msg>(&CqAttr {
                size: 64,
                ..CqAttr::default()
            })
            .unwrap();
        let mut ep = db
            .endpoint(&EpAttr {
                encap: Encap::PlainUdp,
                port,
                tx_queue,
                ..EpAttr::default()
            })
            .unwrap();
        ep.bind_cq(&db, &cq, BindFlags::TRANSMIT | BindFlags::RECV)
            .unwrap();
        ep.bind_av(&db, &av_b).unwrap();
        ep.bind_srx(&db, &srx).unwrap();
        ep.enable(&db).unwrap();
        bs.push((cq, ep));
    }
    assert_eq!(srx.endpoints(&db), 2);
    for i in 0..16 {
        srx.recv(&db, mr_b.alloc(&db, BUF).unwrap(), OpContext(100 + i))
            .unwrap();
    }
    let to: Vec<FiAddr> = [7000, 7001, 7002]
        .into_iter()
        .map(|port| {
            a.av.insert_sockaddr_one(&da, SockAddrIn::new(IP_B, port))
                .unwrap()
        })
        .collect();
    post_recvs(&da, &a, 4, 0);
    // Two datagrams to each bound port, one to a port nobody bound.
    for (i, &dst) in [to[0], to[1], to[2], to[1], to[0]].iter().enumerate() {
        send(&da, &a, dst, format!("datagram {i}").as_bytes(), i);
    }
    let mut got: [Vec<(usize, Vec<u8>)>; 2] = Default::default();
    let mut sent = Vec::new();
    for _ in 0..20 {
        p.wire.run_until_idle();
        let (ok, err) = read_all(&da, &mut a);
        assert!(
            err.is_empty(),
            "A's sends: {:?}",
            err.iter().map(|e| e.1).collect::<Vec<_>>()
        );
        sent.extend(ok.iter().map(|c| c.0));
        for (k, (cq, _)) in bs.iter_mut().enumerate() {
            let (ok, err) = read_cq(&db, cq);
            assert!(err.is_empty());
            for (_, len, _, buf) in ok {
                let mut bytes = vec![0; len];
                buf.unwrap().read(UDP_HEADER_LEN, &mut bytes).unwrap();
                got[k].push((len, bytes));
            }
        }
    }
    assert_eq!(
        sent,
        [0, 1, 2, 3, 4],
        "A's sends, resolved through B's shared queue's ARP"
    );
    let payloads = |k: usize| -> Vec<Vec<u8>> { got[k].iter().map(|g| g.1.clone()).collect() };
    assert_eq!(
        payloads(0),
        [b"datagram 0".to_vec(), b"datagram 4".to_vec()]
    );
    assert_eq!(
        payloads(1),
        [b"datagram 1".to_vec(), b"datagram 3".to_vec()]
    );
    assert_eq!(db.ip_drops().port, 1, "port 7002: nobody's");

    // B's first endpoint answers A (A's address learned from its ARP request).
    let to_a = av_b
        .insert_sockaddr_one(&db, SockAddrIn::new(IP_A, 5000))
        .unwrap();
    let mut reply = mr_b.alloc(&db, BUF).unwrap();
    reply.write(UDP_HEADER_LEN, b"reply").unwrap();
    bs[0]
        .1
        .send(&db, reply, 5, to_a, OpContext(50))
        .map_err(|(e, _)| e)
        .unwrap();
    p.wire.run_until_idle();
    let (ok, _) = read_all(&da, &mut a);
    assert_eq!(ok.iter().map(|c| c.1).collect::<Vec<_>>(), [5]);

    // A receive still waiting on the shared queue is canceled, its buffer back.
    let back = srx.cancel(&db, OpContext(115)).unwrap();
    assert!(back.is_some(), "the last receive posted still waits");
    assert!(srx.cancel(&db, OpContext(115)).unwrap().is_none());
}

/// Issue 16 item 4: "RSS spreads flows by UDP port over a scalable endpoint's receive
/// contexts." fi_endpoint(3), SCALABLE ENDPOINTS: "Scalable endpoints are loosely modeled after
/// the networking concept of transmit/receive side scaling, also known as multi-queue"; the RSS
/// hash of the 82576 and of virtio-net
/// covers the UDP ports, so the flows of one peer (one source port each) spread; the 82574
/// hashes the IPv4 addresses only, so they stay together. Every datagram arrives once, a
/// flow's on one context, in order.
fn rss_spreads_udp_flows_over_a_scalable_endpoint_s_receive_contexts<T: TestNic>() {
    let p = pair_of::<T>();
    let clock = TestClock::new();
    let caps = Capacities {
        queues: 8,
        cqs: 4,
        cq_size: 256,
        mrs: 1,
        avs: 1,
        av_entries: 4,
    };
    let db = Domain::<_, D>::with_capacities(&p.nic_b, &caps).with_clock(&clock);
    db.set_ipv4(ipv4_config(IP_B)).unwrap();
    let nic = p.nic_b.capabilities();
    let contexts = nic.rx_queues.min(4);
    let attr = SepAttr {
        rx_ctx_cnt: contexts,
        encap: Encap::PlainUdp,
        rss: true,
        port: 7000,
        ..SepAttr::default()
    };
    let Some(rss) = nic.rss else {
        assert_eq!(db.scalable_endpoint(&attr).err(), Some(Error::OpNotSupp));
        return;
    };
    let mut sep = db.scalable_endpoint(&attr).unwrap();
    assert_eq!(sep.sockaddr(&db), Some(SockAddrIn::new(IP_B, 7000)));
    assert_eq!(
        db.endpoint(&EpAttr {
            encap: Encap::PlainUdp,
            port: 7000,
            ..EpAttr::default()
        })
        .err(),
        Some(Error::AddrInUse),
        "the scalable endpoint holds its port"
    );
    let av = db
        .open_av(&AvAttr {
            format: AddrFormat::SockaddrIn,
            ..AvAttr::default()
        })
        .unwrap();
    sep.bind_av(&db, &av).unwrap();
    // Room on every context for every datagram (the 82574 puts them all on one).
    let mr = db.register(memory(4 * 40 * BUF)).unwrap();
    let mut rx = Vec::new();
    for k in 0..contexts {
        let cq = db
            .open_cq::<Msg>(&CqAttr {
                size: 64,
                ..CqAttr::default()
            })
            .unwrap();
        let mut ctx = sep.rx_context(&db, k, &CtxAttr::default()).unwrap();
        ctx.bind_cq(&db, &cq, BindFlags::RECV).unwrap();
        ctx.enable(&db).unwrap();
        for i in 0..36 {
            ctx.recv(&db, mr.alloc(&db, BUF).unwrap(), OpContext(i))
                .unwrap();
        }
        rx.push((cq, ctx));
    }
    // 16 flows (source ports) of two datagrams each, the payload naming flow and sequence.
    const FLOWS: u16 = 16;
    let mut raw = RawSender::new(&p);
    for seq in 0..2u8 {
        let frames: Vec<_> = (0..FLOWS)
            .map(|f| datagram_from(6000 + f, 7000, &[f as u8, seq]))
            .collect();
        raw.send(&p, &frames);
    }
    p.wire.run_until_idle();
    let mut on = vec![Vec::new(); usize::from(FLOWS)];
    let mut used = 0;
    for (k, (cq, _)) in rx.iter_mut().enumerate() {
        let (ok, err) = read_cq(&db, cq);
        assert!(err.is_empty());
        used += usize::from(!ok.is_empty());
        for (_, len, _, buf) in ok {
            let mut b = [0u8; 2];
            assert_eq!(len, 2);
            buf.unwrap().read(UDP_HEADER_LEN, &mut b).unwrap();
            on[usize::from(b[0])].push((k, b[1]));
        }
    }
    for (f, got) in on.iter().enumerate() {
        assert_eq!(got.len(), 2, "flow {f}: each datagram once");
        assert_eq!(got[0].0, got[1].0, "flow {f}: one context");
        assert_eq!((got[0].1, got[1].1), (0, 1), "flow {f}: in order");
    }
    if rss.hashes.ipv4_udp {
        assert!(used > 1, "flows by UDP port spread over {used} context(s)");
    } else {
        assert_eq!(used, 1, "hashed by address only: one peer, one context");
    }
    for (_, ctx) in rx {
        closed(ctx.close(&db));
    }
    closed(sep.close(&db));
    // The port is free again.
    let again = db
        .endpoint(&EpAttr {
            encap: Encap::PlainUdp,
            port: 7000,
            ..EpAttr::default()
        })
        .unwrap();
    assert_eq!(again.port(), 7000);
}

/// RFC 768: "An all zero transmitted checksum value means that the transmitter generated no
/// checksum". Datagrams without one take the plain-UDP lane (the headers read in place,
/// `engine/plain_lane.rs`) and complete as the general lane completes them: payload, length,
/// `FI_SOURCE` per sender, buffers back; among them a broadcast (`FI_MULTICAST`) and one with
/// a wrong IPv4 header checksum (dropped, counted), which the lane leaves to the general lane.
fn datagrams_without_a_checksum_complete_as_the_general_lane_completes_them<T: TestNic>() {
    let p = pair_of::<T>();
    let clock = TestClock::new();
    let db = domain(&p.nic_b, &clock, IP_B);
    let mut b = host(&db, 7000, false);
    let from_5000 =
        b.av.insert_sockaddr_one(&db, SockAddrIn::new(IP_A, 5000))
            .unwrap();
    post_recvs(&db, &b, 8, 0);
    let no_sum = |from: u16, payload: &[u8]| {
        let mut f = datagram_from(from, 7000, payload);
        f[40..42].fill(0);
        f
    };
    let mut broadcast = no_sum(5000, b"to all");
    broadcast[..6].fill(0xff);
    broadcast[30..34].copy_from_slice(&[192, 0, 2, 255]);
    fix_ipv4(&mut broadcast);
    let mut bad_ip = no_sum(5000, b"bad");
    bad_ip[24] ^= 0x55;
    let frames = vec![
        no_sum(5000, b"one"),
        no_sum(5000, b"two!"),
        no_sum(5001, b"unknown sender"),
        bad_ip,
        no_sum(5000, b"three"),
        broadcast,
        no_sum(5000, b"four"),
    ];
    let mut raw = RawSender::new(&p);
    raw.send(&p, &frames);
    p.wire.run_until_idle();
    let (ok, err) = read_all(&db, &mut b);
    let got: Vec<(usize, Vec<u8>, FiAddr)> = ok
        .into_iter()
        .map(|(ctx, len, src, buf)| {
            let mut bytes = vec![0; len];
            buf.expect("read_owned hands each buffer back")
                .read(UDP_HEADER_LEN, &mut bytes)
                .unwrap();
            (ctx, bytes, src)
        })
        .collect();
    let want: Vec<(usize, Vec<u8>, FiAddr)> = vec![
        (0, b"one".to_vec(), from_5000),
        (1, b"two!".to_vec(), from_5000),
        (2, b"unknown sender".to_vec(), FiAddr::NOTAVAIL),
        // (receive 3 took the bad header, and its buffer went back to the ring behind the
        // others)
        (4, b"three".to_vec(), from_5000),
        (5, b"to all".to_vec(), from_5000),
        (6, b"four".to_vec(), from_5000),
    ];
    assert_eq!(got, want);
    assert!(err.is_empty());
    assert_eq!(db.ip_drops().of(Discard::Ipv4Checksum), 1);
    assert_eq!(b.ep.dropped_frames(&db), 1);
}

/// Issue 16 item 1: "A domain has an IPv4 configuration given by the application ... An
/// endpoint binds a UDP port (or is given a free one); `getname` returns its `sockaddr_in`; the
/// AV takes `sockaddr_in` addresses": a port bound twice, an endpoint enabled before the domain
/// has an address, an AV of ringfab's addresses are refused by name.
fn plain_udp_needs_its_address_format_and_the_domains_address<T: TestNic>() {
    let p = pair_of::<T>();
    let clock = TestClock::new();
    let d = Domain::<_, D>::with_capacities(&p.nic_a, &Capacities::DEFAULT).with_clock(&clock);
    let cq = d.open_cq::<Msg>(&CqAttr::default()).unwrap();
    let ringfab_av = d.open_av(&AvAttr::default()).unwrap();
    let attr = EpAttr {
        encap: Encap::PlainUdp,
        port: 7000,
        ..EpAttr::default()
    };
    let mut ep = d.endpoint(&attr).unwrap();
    assert_eq!(d.endpoint(&attr).err(), Some(Error::AddrInUse));
    ep.bind_cq(&d, &cq, BindFlags::TRANSMIT | BindFlags::RECV)
        .unwrap();
    ep.bind_av(&d, &ringfab_av).unwrap();
    assert_eq!(
        ep.enable(&d),
        Err(Error::AddrNotAvail),
        "no IPv4 address yet"
    );
    d.set_ipv4(ipv4_config(IP_A)).unwrap();
    assert_eq!(
        ep.enable(&d),
        Err(Error::Inval),
        "an AV of ringfab addresses"
    );
    assert!(ringfab_av
        .insert_sockaddr_one(&d, SockAddrIn::new(IP_B, 1))
        .is_err());
    closed(ep.close(&d));
    // The port is free again.
    let again = d.endpoint(&attr).unwrap();
    assert_eq!(again.port(), 7000);
    let _: MacAddr = again.name().mac;
}

/// The UDP checksum of a wire frame `f` (plain IPv4, no options) is present and right.
fn udp_checksum_right(f: &[u8]) -> bool {
    let len = u16::from_be_bytes([f[38], f[39]]);
    let mut s = checksum::Sum::new();
    s.add_pseudo_header(
        Ipv4Addr::new(f[26], f[27], f[28], f[29]),
        Ipv4Addr::new(f[30], f[31], f[32], f[33]),
        17,
        len,
    )
    .add(&f[34..34 + usize::from(len)]);
    f[40..42] != [0, 0] && s.verifies()
}

/// Issue 16 item 3: "the UDP checksum is computed, or offloaded where the NIC offers it (the
/// 82576's and 82574's transmit offload, virtio-net's `VIRTIO_NET_F_CSUM`), and checked on
/// receive (by the NIC where it can)". Every emulated NIC offers both: sends and injects of odd
/// and even lengths leave the payload unsummed and the NIC inserts the checksum, which is
/// right on the wire (the IPv4 header's is software's, right too); on receive, a datagram
/// whose UDP checksum the NIC found wrong is not marked verified, so software checks it again,
/// drops it and counts it, while the right ones are delivered.
fn the_udp_checksum_is_inserted_by_the_nic_and_a_wrong_one_is_still_dropped_and_counted<
    T: TestNic,
>() {
    let p = pair_of::<T>();
    let offloads = p.nic_a.capabilities().offloads;
    assert!(
        offloads.tx_l4_checksum && offloads.rx_l4_checksum,
        "{offloads:?}"
    );
    let cap = Captured::on(&p.wire);
    let clock = TestClock::new();
    let (da, db) = (
        domain(&p.nic_a, &clock, IP_A),
        domain(&p.nic_b, &clock, IP_B),
    );
    let mut a = host(&da, 7000, false);
    let mut b = host(&db, 7001, false);
    let to_a =
        b.av.insert_sockaddr_one(&db, a.ep.sockaddr(&da).unwrap())
            .unwrap();
    let to_b =
        a.av.insert_sockaddr_one(&da, b.ep.sockaddr(&db).unwrap())
            .unwrap();
    post_recvs(&db, &b, 16, 0);
    post_recvs(&da, &a, 4, 100);
    // Resolve B: the first send is held until B answers (each host's progress runs in its
    // CQ reads).
    send(&da, &a, to_b, b"x", 0);
    let mut got = Vec::new();
    for _ in 0..4 {
        p.wire.run_until_idle();
        read_all(&da, &mut a);
        got.extend(read_all(&db, &mut b).0);
    }
    // Injects (short: they are copied) and sends, odd and even lengths.
    let payloads: Vec<Vec<u8>> = [3usize, 101, 4, 1000]
        .iter()
        .map(|&n| (0..n).map(|i| (i * 7 + n) as u8).collect())
        .collect();
    for (i, pl) in payloads.iter().enumerate() {
        if i % 2 == 1 {
            send(&da, &a, to_b, pl, 1 + i);
        } else {
            a.ep.inject(&da, pl, to_b).unwrap();
        }
    }
    p.wire.run_until_idle();
    let (sent, err) = read_all(&da, &mut a);
    assert!(err.is_empty());
    assert_eq!(sent.iter().map(|c| c.0).collect::<Vec<_>>(), [2, 4]);
    let (more, err) = read_all(&db, &mut b);
    assert!(err.is_empty());
    got.extend(more);
    let lens: Vec<usize> = got.iter().map(|c| c.1).collect();
    assert_eq!(lens, [1, 3, 101, 4, 1000]);
    assert!(got.iter().all(|c| c.2 == to_a));
    let udp: Vec<_> = cap
        .frames()
        .into_iter()
        .filter(|f| f.len() > 34 && f[12..14] == [8, 0] && f[23] == 17)
        .collect();
    assert_eq!(udp.len(), 5);
    for f in &udp {
        assert_eq!(checksum::of(&f[14..34]), 0, "IPv4 header checksum");
        assert!(udp_checksum_right(f), "UDP checksum on the wire: {f:02x?}");
    }

    // Receive: one datagram with a wrong UDP checksum between two right ones.
    let mut raw = RawSender::new(&p);
    let good = datagram_from(7000, 7001, b"odd");
    let mut bad = good.clone();
    bad[41] ^= 0x10;
    raw.send(&p, &[good.clone(), bad, good]);
    p.wire.run_until_idle();
    let (got, err) = read_all(&db, &mut b);
    assert!(err.is_empty());
    assert_eq!(got.iter().map(|c| c.1).collect::<Vec<_>>(), [3, 3]);
    assert_eq!(db.ip_drops().of(Discard::UdpChecksum), 1);
    assert_eq!(b.ep.dropped_frames(&db), 1);
}

/// virtio 1.2 §5.1.6.4.1: with `NEEDS_CSUM` "the device MUST set the packet checksum stored in
/// the receive buffer to the TCP/UDP pseudo header" — a datagram from a sender on the same host
/// (a guest's virtio_net across the host's bridge) carries only that sum in its checksum field,
/// and the driver marks it verified and partial. Core trusts the mark and never reads the
/// field: every such datagram is delivered, on the plain-UDP lane and on the general one (IPv4
/// options), none dropped as a wrong checksum — which the field, summed in software, is.
#[test]
fn datagrams_with_a_partial_checksum_are_delivered_on_virtio_net() {
    let wire = Wire::new();
    let a = VirtioNic::device(MAC_A);
    let mut config = VirtioNetModelConfig::default();
    config.mac = MAC_B;
    config.queue_pairs = 2;
    config.partial_checksums = true;
    let b = EmuVirtioNet::new(config);
    a.connect(&wire);
    b.connect(&wire);
    let (nic_a, nic_b) = (
        VirtioNic::driver(a.platform()),
        VirtioNic::driver(b.platform()),
    );
    let p = Pair::<VirtioNic> {
        wire,
        a,
        b,
        nic_a,
        nic_b,
    };
    let clock = TestClock::new();
    let db = domain(&p.nic_b, &clock, IP_B);
    let mut b = host(&db, 7000, false);
    post_recvs(&db, &b, 16, 0);
    let mut raw = RawSender::new(&p);
    let payloads: [&[u8]; 3] = [b"partial", b"odd length", &[0xa5; 1000]];
    let mut frames: Vec<Vec<u8>> = payloads.iter().map(|pl| datagram(7000, pl)).collect();
    frames.push(with_options(&frames[0], &[1, 1, 1, 0]));
    for f in &frames[..payloads.len()] {
        assert!(udp_checksum_verifies(f), "sent with the whole checksum");
    }
    raw.send(&p, &frames);
    let mut got = Vec::new();
    for _ in 0..3 {
        p.wire.run_until_idle();
        let (ok, err) = read_all(&db, &mut b);
        assert!(err.is_empty());
        got.extend(ok.iter().map(|c| c.1));
    }
    assert_eq!(got, [7, 10, 1000, 7]);
    assert_eq!(db.ip_drops().of(Discard::UdpChecksum), 0);
    assert_eq!(b.ep.dropped_frames(&db), 0);
}

on_every_nic!(
    two_endpoints_exchange_datagrams_with_arp_in_between,
    a_peer_that_never_answers_arp_fails_each_held_send,
    icmp_echo_requests_are_answered,
    an_echo_request_as_long_as_the_mtu_gets_all_its_data_back,
    a_full_cq_does_not_hold_back_arp_and_icmp_answers,
    a_send_takes_the_arp_request_it_needs_out_with_it,
    a_read_with_nothing_for_arp_reads_no_clock,
    a_control_frame_that_does_not_go_is_counted_never_reported,
    a_datagram_to_a_port_nobody_bound_is_answered_port_unreachable,
    datagrams_with_ipv4_options_complete_with_the_payload_at_its_offset,
    gather_sends_on_plain_udp_are_one_datagram_of_every_piece,
    endpoints_on_a_shared_transmit_context_send_plain_udp_from_their_own_ports,
    malformed_frames_are_dropped_and_counted_never_reported,
    plain_udp_needs_its_address_format_and_the_domains_address,
    several_endpoints_share_one_queue_told_apart_by_port,
    rss_spreads_udp_flows_over_a_scalable_endpoint_s_receive_contexts,
    datagrams_without_a_checksum_complete_as_the_general_lane_completes_them,
    the_udp_checksum_is_inserted_by_the_nic_and_a_wrong_one_is_still_dropped_and_counted,
);
