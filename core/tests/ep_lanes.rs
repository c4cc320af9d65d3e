//! An endpoint's receive completions through both lanes of the CQ read path, on every NIC: the
//! framed lane (a plain success of an endpoint's receive into an owned buffer, written straight
//! into the reader's array, its source and buffer beside it) and the general lane (everything
//! else) interleaved — frames for other contexts, malformed frames, broadcasts, remote CQ data,
//! device errors, senders the AV does not know, multi-receive slots, buffers of two regions,
//! buffers longer than the queue's — read with `read`, `readfrom` and `read_owned` through
//! arrays of 1, 3 and 64 entries. Whatever the lane, every completion is the one the man pages
//! define, once, in the order the device completed it.
//!
//! The frames come from A's driver directly (a transmit queue of its own, no endpoint), so
//! that any header can be put on the wire.

mod common;
use common::*;
use ringfab::av::{AddressVector, AvAttr, EpAddr, FiAddr};
use ringfab::cq::{CompletionQueue, CqAttr};
use ringfab::domain::Domain;
use ringfab::entry::{DataEntry, ErrEntry, OpContext};
use ringfab::ep::{Endpoint, EpAttr};
use ringfab::flags::{BindFlags, CompletionFlags, OpFlags};
use ringfab::hal::{MacAddr, Nic};
use ringfab::mr::{Buf, MemoryRegion};
use ringfab::proto::{Encap, Header, ANY_CTX, HEADER_LEN, MAX_HEADER_LEN};
use ringfab::{Capacities, Error};
use ringfab_emu::{DeviceFault, Ring};

const D: usize = 64;
const BUF: usize = 2048;
const RECV: CompletionFlags = CompletionFlags::RECV.union(CompletionFlags::MSG);

/// B's domain over `nic`: two hardware queues, two CQs of up to 256 entries, two regions, one
/// AV.
fn domain<N: Nic>(nic: &N) -> Domain<'_, N, D> {
    Domain::with_capacities(
        nic,
        &Capacities {
            queues: 2,
            cqs: 2,
            cq_size: 256,
            mrs: 2,
            avs: 1,
            av_entries: 8,
        },
    )
}

/// The sender the AV of B knows (A's station address, context 0), and one it does not.
const KNOWN: EpAddr = EpAddr { mac: MAC_A, ctx: 0 };
const UNKNOWN_CTX: u16 = 9;

/// What one frame on the wire is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// A message for the endpoint from the known sender.
    Good,
    /// A message for the endpoint from a sender not in B's AV.
    Unknown,
    /// For another context on B's NIC: never reaches the endpoint.
    OtherContext,
    /// A header version this code does not speak: never reaches the endpoint.
    Version,
    /// A payload length beyond the frame: never reaches the endpoint.
    LongClaim,
    /// To the broadcast address: a message with `FI_MULTICAST`.
    Broadcast,
    /// With remote CQ data.
    Data,
    /// A frame the device reports bad: an error entry.
    Bad,
}

impl Kind {
    fn dropped(self) -> bool {
        matches!(self, Kind::OtherContext | Kind::Version | Kind::LongClaim)
    }
}

/// The frame of kind `kind` carrying `len` payload bytes of value `fill`, to B's endpoint
/// `to`.
fn frame(kind: Kind, to: EpAddr, len: usize, fill: u8) -> Vec<u8> {
    let h = Header {
        dst: if kind == Kind::Broadcast {
            MacAddr::BROADCAST
        } else {
            to.mac
        },
        src: KNOWN.mac,
        dst_ctx: match kind {
            Kind::OtherContext => to.ctx + 3,
            Kind::Broadcast => ANY_CTX,
            _ => to.ctx,
        },
        src_ctx: if kind == Kind::Unknown {
            UNKNOWN_CTX
        } else {
            KNOWN.ctx
        },
        payload_len: len as u16,
        data: (kind == Kind::Data).then_some(0xdead_0000 + u64::from(fill)),
        flow: 0,
    };
    let mut b = [0u8; MAX_HEADER_LEN];
    let mut v = h.emit(Encap::Ethernet, &mut b).to_vec();
    v.extend(std::iter::repeat_n(fill, len));
    match kind {
        Kind::Version => v[14] = 2,
        Kind::LongClaim => v[20..22].copy_from_slice(&(len as u16 + 100).to_be_bytes()),
        _ => {}
    }
    v
}

/// B: a CQ (Data format, so `buf` and `data` are seen), an AV that knows [`KNOWN`], and an
/// endpoint whose sends report elsewhere, enabled.
struct B<N: Nic> {
    cq: CompletionQueue<N, ringfab::entry::Data>,
    _tx_cq: CompletionQueue<N, ringfab::entry::Data>,
    av: AddressVector,
    ep: Endpoint,
    known: FiAddr,
}

fn endpoint_b<N: Nic>(d: &Domain<'_, N, D>, attr: &EpAttr) -> B<N> {
    let cq_attr = CqAttr {
        size: 256,
        ..CqAttr::default()
    };
    let cq = d.open_cq(&cq_attr).unwrap();
    let tx_cq = d.open_cq(&cq_attr).unwrap();
    let av = d.open_av(&AvAttr::default()).unwrap();
    let mut known = [FiAddr::NOTAVAIL];
    assert_eq!(av.insert(d, &[KNOWN], &mut known), Ok(1));
    let mut ep = d.endpoint(attr).unwrap();
    ep.bind_cq(d, &cq, BindFlags::RECV).unwrap();
    ep.bind_cq(d, &tx_cq, BindFlags::TRANSMIT).unwrap();
    ep.bind_av(d, &av).unwrap();
    ep.enable(d).unwrap();
    B {
        cq,
        _tx_cq: tx_cq,
        av,
        ep,
        known: known[0],
    }
}

/// The reader a round uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reader {
    Read,
    ReadFrom,
    ReadOwned,
}

/// One completion as read: its entry, its source (`readfrom`, `read_owned`), the address of
/// the buffer that came back with it (`read_owned`, `readerr_owned`) and its error (0 for a
/// success).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Got {
    context: usize,
    flags: CompletionFlags,
    len: usize,
    data: u64,
    buf: usize,
    src: Option<FiAddr>,
    owned: Option<usize>,
    err: i32,
}

/// Reads `count` completions from `b.cq` (of domain `d`) with `reader` through an array of
/// `width` entries, taking error entries with `readerr_owned` as they reach the head; checks
/// the payload of every buffer that comes back against `fill_of` its context.
fn read_all<'d, N: Nic>(
    d: &'d Domain<'_, N, D>,
    b: &mut B<N>,
    wire: &ringfab_emu::Wire,
    reader: Reader,
    width: usize,
    count: usize,
    fill_of: impl Fn(usize) -> u8,
) -> Vec<Got> {
    let mut got = Vec::new();
    let mut out = vec![DataEntry::default(); width];
    let mut src = vec![FiAddr(7); width];
    let mut bufs: Vec<Option<Buf<'d>>> = (0..width).map(|_| None).collect();
    let mut idle = 0;
    while got.len() < count {
        wire.run_until_idle();
        let r = match reader {
            Reader::Read => b.cq.read(d, &mut out),
            Reader::ReadFrom => b.cq.readfrom(d, &mut out, &mut src),
            Reader::ReadOwned => b.cq.read_owned(d, &mut out, &mut src, &mut bufs),
        };
        match r {
            Ok(n) => {
                assert!(n >= 1 && n <= width);
                for i in 0..n {
                    let e = out[i];
                    let owned = bufs[i].take().map(|buf| {
                        // A multi-receive buffer's data is at each entry's `buf`, not here.
                        if e.buf.is_null() {
                            let mut bytes = vec![0u8; e.len];
                            buf.read(HEADER_LEN, &mut bytes).unwrap();
                            let fill = fill_of(e.op_context.0);
                            assert!(bytes.iter().all(|&x| x == fill), "payload of {e:?}");
                        }
                        buf.addr()
                    });
                    got.push(Got {
                        context: e.op_context.0,
                        flags: e.flags,
                        len: e.len,
                        data: e.data,
                        buf: e.buf.0,
                        src: (reader != Reader::Read).then_some(src[i]),
                        owned,
                        err: 0,
                    });
                }
            }
            Err(Error::Avail) => {
                let mut e = ErrEntry::default();
                let (_, buf) = b.cq.readerr_owned(d, &mut e, None, 0).unwrap();
                got.push(Got {
                    context: e.op_context.0,
                    flags: e.flags,
                    len: e.len,
                    data: e.data,
                    buf: e.buf.0,
                    src: None,
                    owned: buf.map(|b| b.addr()),
                    err: e.err,
                });
            }
            Err(Error::Again) => {
                idle += 1;
                assert!(idle < 100, "{} of {count} completions arrived", got.len());
            }
            Err(e) => panic!("{reader:?}: {e}"),
        }
    }
    got
}

/// fi_cq(3): completions are read "from a CQ" in the order the queue completed them; for
/// `fi_cq_readfrom` "Source address data is only available for those endpoints configured
/// with FI_SOURCE capability" and a source not in the AV "will be reported as
/// FI_ADDR_NOTAVAIL"; FI_MULTICAST "is only guaranteed to be valid for received messages if
/// the endpoint has been configured with FI_SOURCE"; "the data field is only valid if the
/// FI_REMOTE_CQ_DATA completion flag is set"; an error in the queue makes `fi_cq_read` fail
/// "with a return code of -FI_EAVAIL" until `fi_cq_readerr` takes it. Six rounds of 40 frames,
/// every kind interleaved with plain messages, each round read by another reader through
/// another width: every frame for the endpoint completes once, in order, with what its kind
/// defines — whichever lane took it — and the frames that are not for it never do (their
/// buffers stay posted).
fn every_kind_of_frame_interleaved_completes_in_order_with_its_own_fields<T: TestNic>() {
    let p = pair_of::<T>();
    let db = domain(&p.nic_b);
    let mut b = endpoint_b(&db, &EpAttr::default());
    let mr = db.register(memory(6 * 40 * BUF + BUF)).unwrap();
    let mut sender = RawSender::new(&p);
    let to = b.ep.name();
    let pattern = [
        Kind::Good,
        Kind::Good,
        Kind::OtherContext,
        Kind::Good,
        Kind::Unknown,
        Kind::Good,
        Kind::Broadcast,
        Kind::Good,
        Kind::Version,
        Kind::Good,
        Kind::Data,
        Kind::Good,
        Kind::LongClaim,
        Kind::Good,
        Kind::Good,
        Kind::Bad,
        Kind::Good,
        Kind::Unknown,
        Kind::Unknown,
        Kind::Good,
    ];
    let rounds = [
        (Reader::Read, 64),
        (Reader::ReadFrom, 3),
        (Reader::ReadOwned, 1),
        (Reader::ReadOwned, 64),
        (Reader::Read, 3),
        (Reader::ReadFrom, 64),
    ];
    // The receives posted, in ring order: frames fill them front to back; the buffer of a
    // frame that is not for the endpoint is posted again when the read finds it, behind
    // every buffer posted then — so it takes a frame of a later round.
    let mut ring: std::collections::VecDeque<(usize, usize)> = Default::default();
    let mut dropped = 0;
    for (round, &(reader, width)) in rounds.iter().enumerate() {
        let base = round * 100;
        // The pattern and ten plain messages: with the buffers of earlier rounds' dropped
        // frames still posted, at most 45 receives are out (the ring takes 63).
        let kinds: Vec<Kind> = pattern
            .iter()
            .copied()
            .chain(std::iter::repeat_n(Kind::Good, 10))
            .collect();
        for i in 0..kinds.len() {
            let buf = mr.alloc(&db, BUF).unwrap();
            ring.push_back((base + i, buf.addr()));
            b.ep.recv(&db, buf, OpContext(base + i)).unwrap();
        }
        let len_of = |i: usize| 1 + (i * 37) % 200;
        let mut fills = std::collections::HashMap::new();
        let mut want = Vec::new();
        let mut reposted = Vec::new();
        for (i, &k) in kinds.iter().enumerate() {
            let fill = (i + 1) as u8;
            if k == Kind::Bad {
                T::rx_error_next(&p);
            }
            sender.send(&p, &[frame(k, to, len_of(i), fill)]);
            let (ctx, addr) = ring.pop_front().unwrap();
            if k.dropped() {
                reposted.push((ctx, addr));
                continue;
            }
            fills.insert(ctx, fill);
            let mut g = Got {
                context: ctx,
                flags: RECV,
                len: len_of(i),
                data: 0,
                buf: 0,
                src: (reader != Reader::Read).then_some(b.known),
                owned: (reader == Reader::ReadOwned).then_some(addr),
                err: 0,
            };
            match k {
                Kind::Unknown => g.src = g.src.map(|_| FiAddr::NOTAVAIL),
                Kind::Broadcast => g.flags |= CompletionFlags::MULTICAST,
                Kind::Data => {
                    g.flags |= CompletionFlags::REMOTE_CQ_DATA;
                    g.data = 0xdead_0000 + u64::from(fill);
                }
                Kind::Bad => {
                    let (_, _, len) = T::rx_error(HEADER_LEN + len_of(i));
                    g = Got {
                        len,
                        src: None,
                        owned: Some(addr),
                        err: 5,
                        ..g
                    };
                }
                _ => {}
            }
            want.push(g);
        }
        dropped += reposted.len();
        let got = read_all(&db, &mut b, &p.wire, reader, width, want.len(), |ctx| {
            fills[&ctx]
        });
        assert_eq!(got, want, "round {round}: {reader:?} through {width}");
        assert_eq!(
            b.cq.read(&db, &mut [DataEntry::default()]),
            Err(Error::Again)
        );
        ring.extend(reposted);
        assert_eq!(b.ep.rx_size_left(&db), Ok(ring_room::<T>(D) - ring.len()));
        assert_eq!(
            mr.outstanding(&db),
            ring.len(),
            "every buffer read went back to the region (handed back or dropped)"
        );
        assert_eq!(b.cq.credits(&db), 256 - ring.len());
    }
    assert_eq!(b.ep.dropped_frames(&db), dropped as u64);
    let _ = &b.av;
}

/// DESIGN.md decision 6 and `read_owned`'s contract: every buffer comes back with its own
/// completion, and those `read` does not hand back return to their own region's count. A run
/// of receives alternating between two regions — the framed lane takes a run of one region
/// per poll, the general lane the rest — completes whole and in order with either reader.
fn buffers_of_two_regions_alternating_complete_in_order_and_go_back_to_their_regions<T: TestNic>() {
    let p = pair_of::<T>();
    let db = domain(&p.nic_b);
    let mut b = endpoint_b(&db, &EpAttr::default());
    let regions: [MemoryRegion; 2] = [
        db.register(memory(128 * BUF)).unwrap(),
        db.register(memory(128 * BUF)).unwrap(),
    ];
    let mut sender = RawSender::new(&p);
    let to = b.ep.name();
    for (round, reader) in [Reader::Read, Reader::ReadOwned].into_iter().enumerate() {
        let base = round * 100;
        let mut addr = Vec::new();
        for i in 0..48 {
            // Two of one region, one of the other, …
            let buf = regions[usize::from(i % 3 == 2)].alloc(&db, BUF).unwrap();
            addr.push(buf.addr());
            b.ep.recv(&db, buf, OpContext(base + i)).unwrap();
        }
        let frames: Vec<Vec<u8>> = (0..48)
            .map(|i| frame(Kind::Good, to, 10 + i, (i + 1) as u8))
            .collect();
        sender.send(&p, &frames);
        let got = read_all(&db, &mut b, &p.wire, reader, 64, 48, |ctx| {
            (ctx % 100 + 1) as u8
        });
        let contexts: Vec<usize> = got.iter().map(|g| g.context).collect();
        assert_eq!(contexts, (base..base + 48).collect::<Vec<_>>());
        for (i, g) in got.iter().enumerate() {
            assert_eq!((g.len, g.flags, g.err), (10 + i, RECV, 0));
            if reader == Reader::ReadOwned {
                assert_eq!(g.owned, Some(addr[i]), "entry {i}'s own buffer");
            }
        }
        assert_eq!(regions[0].outstanding(&db), 0);
        assert_eq!(regions[1].outstanding(&db), 0);
    }
}

/// fi_cq(3), *olen*: "The olen specifies the amount of data that did not fit into the available
/// receive buffer and was discarded." A buffer longer than the queue's buffer size (the
/// endpoint accepts the queue's, less the header) completes like any other; a device that
/// reports more than the queue's size into such a buffer, for a frame whose header claims a
/// payload beyond what was accepted, gives `FI_ETRUNC` with `len` what was accepted and
/// `olen` the rest. The same lie into a buffer of the queue's own size is beyond the buffer:
/// the driver refuses it (`FI_EIO`), never a success.
fn a_long_buffer_completes_and_a_payload_beyond_what_was_accepted_is_etrunc_with_olen<
    T: TestNic,
>() {
    let p = pair_of::<T>();
    let db = domain(&p.nic_b);
    let mut b = endpoint_b(&db, &EpAttr::default());
    let mr = db.register(memory(16 * BUF)).unwrap();
    let mut sender = RawSender::new(&p);
    let to = b.ep.name();
    let accepted = BUF - HEADER_LEN;

    b.ep.recv(&db, mr.alloc(&db, 2 * BUF).unwrap(), OpContext(1))
        .unwrap();
    sender.send(&p, &[frame(Kind::Good, to, 100, 2)]);
    let got = read_all(&db, &mut b, &p.wire, Reader::ReadOwned, 4, 1, |_| 2);
    assert_eq!((got[0].context, got[0].len, got[0].err), (1, 100, 0));

    // A payload of `accepted + 12` bytes into a buffer that could hold it. The Intel rings
    // write at most the queue's buffer size (a longer frame is split, `SPLITS_LONG_FRAMES`),
    // but the driver checks a length against the buffer it was given: a device that reports
    // 40 bytes more than the queue's size lets a header's claim of that much pass — a lie
    // within the buffer, which the endpoint reports as a truncation. virtio-net gives the
    // device the queue's size and an overflow area up to its longest frame: a real frame of
    // that payload is truncated the same way (issue 14 item 2; it used to be dropped whole by
    // the device, the buffer left posted and nothing reported).
    let mut claim = frame(Kind::Good, to, 100, 3);
    claim[20..22].copy_from_slice(&((accepted + 12) as u16).to_be_bytes());
    let lie = DeviceFault::OversizeLength {
        queue: Some(0),
        count: 1,
        extra: 40,
    };
    b.ep.recv(&db, mr.alloc(&db, 2 * BUF).unwrap(), OpContext(2))
        .unwrap();
    let mut out = [DataEntry::default(); 4];
    let mut e = ErrEntry::default();
    if T::SPLITS_LONG_FRAMES {
        p.b.inject(lie);
        sender.send(&p, &[claim.clone()]);
        assert_eq!(b.cq.read(&db, &mut out), Err(Error::Avail));
        let (_, buf) = b.cq.readerr_owned(&db, &mut e, None, 0).unwrap();
        assert_eq!(e.err, 265, "FI_ETRUNC");
        assert_eq!((e.op_context, e.len, e.olen), (OpContext(2), accepted, 12));
        assert!(buf.is_some(), "the buffer comes back with the error");
    } else {
        sender.send(&p, &[frame(Kind::Good, to, accepted + 12, 3)]);
        assert_eq!(b.cq.read(&db, &mut out), Err(Error::Avail));
        let (_, buf) = b.cq.readerr_owned(&db, &mut e, None, 0).unwrap();
        assert_eq!(e.err, 265, "FI_ETRUNC");
        assert_eq!((e.op_context, e.len, e.olen), (OpContext(2), accepted, 12));
        assert!(buf.is_some(), "the buffer comes back with the error");
    }

    b.ep.recv(&db, mr.alloc(&db, BUF).unwrap(), OpContext(3))
        .unwrap();
    p.b.inject(lie);
    sender.send(&p, &[claim]);
    assert_eq!(b.cq.read(&db, &mut out), Err(Error::Avail));
    let (_, buf) = b.cq.readerr_owned(&db, &mut e, None, 0).unwrap();
    assert_eq!((e.err, e.op_context), (5, OpContext(3)), "FI_EIO");
    assert!(buf.is_some());
    drop(buf);
    assert_eq!(mr.outstanding(&db), 0);
}

/// fi_cq(3), *buf*: "only applies when the receive buffer was posted with the FI_MULTI_RECV
/// flag. In this case, buf points to the starting location where the receive data was
/// placed"; FI_MULTI_RECV "indicates that the original receive buffer referenced by the
/// completion has been consumed and was released". Plain receives around a multi-receive
/// buffer: the plain ones take the framed lane, the slots the general lane, and the entries
/// keep posting order.
fn plain_receives_around_a_multi_receive_buffer_keep_order_and_the_slots_their_fields<
    T: TestNic,
>() {
    let p = pair_of::<T>();
    let db = domain(&p.nic_b);
    let attr = EpAttr {
        multi_recv_msgs: 3,
        ..EpAttr::default()
    };
    let mut b = endpoint_b(&db, &attr);
    let mr = db.register(memory(16 * BUF)).unwrap();
    let mut sender = RawSender::new(&p);
    let to = b.ep.name();
    b.ep.recv(&db, mr.alloc(&db, BUF).unwrap(), OpContext(1))
        .unwrap();
    b.ep.recv(&db, mr.alloc(&db, BUF).unwrap(), OpContext(2))
        .unwrap();
    let multi = mr.alloc(&db, 3 * BUF).unwrap();
    let base = multi.addr();
    b.ep.recvmsg(&db, multi, OpContext(3), OpFlags::MULTI_RECV)
        .unwrap();
    b.ep.recv(&db, mr.alloc(&db, BUF).unwrap(), OpContext(4))
        .unwrap();
    b.ep.recv(&db, mr.alloc(&db, BUF).unwrap(), OpContext(5))
        .unwrap();
    // MIN_MULTI_RECV 0: the buffer takes as many messages as it has room for.
    let slots = 3;
    let n = 4 + slots;
    let frames: Vec<Vec<u8>> = (0..n).map(|i| frame(Kind::Good, to, 20 + i, 9)).collect();
    sender.send(&p, &frames);
    let got = read_all(&db, &mut b, &p.wire, Reader::ReadOwned, 64, n, |_| 9);
    let mut want = vec![(1, 20, 0, RECV), (2, 21, 0, RECV)];
    for s in 0..slots {
        let flags = if s + 1 == slots {
            RECV | CompletionFlags::MULTI_RECV
        } else {
            RECV
        };
        want.push((3, 22 + s, base + s * BUF + HEADER_LEN, flags));
    }
    want.push((4, 22 + slots, 0, RECV));
    want.push((5, 23 + slots, 0, RECV));
    let seen: Vec<_> = got
        .iter()
        .map(|g| (g.context, g.len, g.buf, g.flags))
        .collect();
    assert_eq!(seen, want);
    assert_eq!(
        got.iter().filter(|g| g.owned == Some(base)).count(),
        1,
        "the multi-receive buffer comes back once, with its last slot"
    );
    assert_eq!(mr.outstanding(&db), 0);
}

/// fi_cq(3), fi_cq_readfrom: "For endpoints allocated using the FI_SOURCE_ERR capability, if
/// the source address cannot be converted into a valid fi_addr_t value, fi_cq_readfrom will
/// return -FI_EAVAIL, even if the data were received successfully". An endpoint with it takes the general lane for every frame: known senders
/// complete with their handle, the unknown one in error, in order.
fn with_source_err_known_senders_succeed_and_an_unknown_one_is_eaddrnotavail_in_order<
    T: TestNic,
>() {
    let p = pair_of::<T>();
    let db = domain(&p.nic_b);
    let attr = EpAttr {
        source_err: true,
        ..EpAttr::default()
    };
    let mut b = endpoint_b(&db, &attr);
    let mr = db.register(memory(16 * BUF)).unwrap();
    let mut sender = RawSender::new(&p);
    let to = b.ep.name();
    for i in 0..5 {
        b.ep.recv(&db, mr.alloc(&db, BUF).unwrap(), OpContext(i))
            .unwrap();
    }
    let kinds = [
        Kind::Good,
        Kind::Good,
        Kind::Unknown,
        Kind::Good,
        Kind::Good,
    ];
    let frames: Vec<Vec<u8>> = kinds.iter().map(|&k| frame(k, to, 8, 1)).collect();
    sender.send(&p, &frames);
    let got = read_all(&db, &mut b, &p.wire, Reader::ReadFrom, 64, 5, |_| 1);
    let seen: Vec<_> = got.iter().map(|g| (g.context, g.err, g.src)).collect();
    let known = Some(b.known);
    assert_eq!(
        seen,
        [
            (0, 0, known),
            (1, 0, known),
            (2, 99, None),
            (3, 0, known),
            (4, 0, known)
        ]
    );
}

/// A virtio device may complete buffers out of order (virtio 1.2 §2.7.13): the framed lane
/// takes only the slot next in line and leaves the rest of the poll to the general lane, so
/// every receive completes once, with its own context and buffer, in the device's order.
#[test]
fn out_of_order_endpoint_receives_on_virtio_each_complete_once_with_their_own_buffer() {
    let p = pair_of::<VirtioNic>();
    let db = domain(&p.nic_b);
    let mut b = endpoint_b(&db, &EpAttr::default());
    let mr = db.register(memory(64 * BUF)).unwrap();
    let mut sender = RawSender::new(&p);
    let to = b.ep.name();
    p.b.inject(DeviceFault::CompleteOutOfOrder {
        ring: Some(Ring::Rx(0)),
        count: usize::MAX,
    });
    let mut addr = Vec::new();
    for i in 0..40 {
        let buf = mr.alloc(&db, BUF).unwrap();
        addr.push(buf.addr());
        b.ep.recv(&db, buf, OpContext(i)).unwrap();
    }
    let frames: Vec<Vec<u8>> = (0..40)
        .map(|i| frame(Kind::Good, to, 4 + i, i as u8 + 1))
        .collect();
    sender.send(&p, &frames);
    p.b.step();
    let got = read_all(&db, &mut b, &p.wire, Reader::ReadOwned, 16, 40, |ctx| {
        ctx as u8 + 1
    });
    // The emulated device holds each used entry back until the next one is written: 1, 0,
    // 3, 2, …
    let device_order: Vec<usize> = (0..40).map(|i| i ^ 1).collect();
    assert_eq!(
        got.iter().map(|g| g.context).collect::<Vec<_>>(),
        device_order
    );
    for g in &got {
        assert_eq!(g.len, 4 + g.context);
        assert_eq!(g.owned, Some(addr[g.context]));
    }
    assert_eq!(mr.outstanding(&db), 0);
}

/// Issue 14 item 12: "Frames that are not for an endpoint (wrong format, wrong address, or
/// longer than anything the endpoint can receive) must be dropped and counted, never reported
/// as the endpoint's errors". A jumbo frame for another context and one in a format ringfab
/// does not speak, each longer than the endpoint's 2 KiB buffers (split over several on the
/// Intel NICs), are dropped and counted once each, report nothing and use up no receive: the
/// next message arrives, and the other receives are still posted. (They used to
/// become one `FI_EIO` entry per piece, each taking a posted receive.)
fn foreign_jumbo_frames_are_dropped_and_counted_and_use_up_no_receive<T: TestNic>() {
    let p = pair_of::<T>();
    let db = domain(&p.nic_b);
    let mut b = endpoint_b(&db, &EpAttr::default());
    let mr = db.register(memory(16 * BUF)).unwrap();
    let mut sender = RawSender::new(&p);
    let to = b.ep.name();
    for i in 0..8 {
        b.ep.recv(&db, mr.alloc(&db, BUF).unwrap(), OpContext(i))
            .unwrap();
    }
    let mut out = [DataEntry::default(); 4];
    for (kind, len) in [(Kind::OtherContext, 8000), (Kind::Version, 6000)] {
        sender.send_long(&p, &frame(kind, to, len, 9));
        assert_eq!(
            b.cq.read(&db, &mut out),
            Err(Error::Again),
            "{kind:?}: nothing reported"
        );
    }
    assert_eq!(
        b.ep.dropped_frames(&db),
        2,
        "one drop per frame, not per piece"
    );
    sender.send(&p, &[frame(Kind::Good, to, 100, 2)]);
    let got = read_all(&db, &mut b, &p.wire, Reader::ReadOwned, 4, 1, |_| 2);
    // The buffers the dropped frames filled went back into the ring behind the others (four
    // and three 2 KiB pieces on the Intel NICs, one buffer each on virtio-net): the message
    // takes the first receive they did not fill.
    let first_untouched = if T::SPLITS_LONG_FRAMES { 7 } else { 2 };
    assert_eq!(
        (got[0].context, got[0].len, got[0].err),
        (first_untouched, 100, 0)
    );
    assert_eq!(
        b.ep.rx_size_left(&db),
        Ok(ring_room::<T>(D) - 7),
        "seven receives still posted"
    );
    let _ = &b.av;
}

/// fi_endpoint(3), fi_cancel: "Canceling an operation causes the fabric provider to search for
/// the operation and, if it is still pending, complete it as having been canceled. An error
/// queue entry will be available in the the associated error queue with error code
/// FI_ECANCELED." A receive whose buffer a frame for another context filled, not yet polled,
/// is still pending (the frame is dropped, the receive posted again): the cancel finds it.
/// It used to be posted again behind the others and the cancel answered `false` (issue 14's
/// `api_sequence` finding).
fn cancel_finds_a_receive_a_dropped_frame_filled_before_any_read<T: TestNic>() {
    let p = pair_of::<T>();
    let db = domain(&p.nic_b);
    let mut b = endpoint_b(&db, &EpAttr::default());
    let mr = db.register(memory(4 * BUF)).unwrap();
    let mut sender = RawSender::new(&p);
    let to = b.ep.name();
    for i in 0..2 {
        b.ep.recv(&db, mr.alloc(&db, BUF).unwrap(), OpContext(i))
            .unwrap();
    }
    // Into receive 0's buffer, unread.
    sender.send(&p, &[frame(Kind::OtherContext, to, 100, 1)]);
    assert_eq!(b.ep.cancel(&db, OpContext(0)), Ok(true), "still pending");
    assert_eq!(b.ep.cancel(&db, OpContext(0)), Ok(false), "canceled once");
    assert_eq!(
        b.ep.dropped_frames(&db),
        1,
        "the frame is dropped and counted"
    );
    sender.send(&p, &[frame(Kind::Good, to, 100, 2)]);
    let got = read_all(&db, &mut b, &p.wire, Reader::ReadOwned, 4, 2, |_| 2);
    assert_eq!(
        got.iter().map(|g| (g.context, g.err)).collect::<Vec<_>>(),
        vec![(0, 125), (1, 0)],
        "FI_ECANCELED for the canceled one, the message in the other"
    );
    assert_eq!(mr.outstanding(&db), 0, "both buffers came back");
    let _ = &b.av;
}

on_every_nic!(
    cancel_finds_a_receive_a_dropped_frame_filled_before_any_read,
    foreign_jumbo_frames_are_dropped_and_counted_and_use_up_no_receive,
    every_kind_of_frame_interleaved_completes_in_order_with_its_own_fields,
    buffers_of_two_regions_alternating_complete_in_order_and_go_back_to_their_regions,
    a_long_buffer_completes_and_a_payload_beyond_what_was_accepted_is_etrunc_with_olen,
    plain_receives_around_a_multi_receive_buffer_keep_order_and_the_slots_their_fields,
    with_source_err_known_senders_succeed_and_an_unknown_one_is_eaddrnotavail_in_order,
);
