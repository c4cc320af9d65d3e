//! An endpoint's send completions through both lanes of the CQ read path, on every NIC: the send
//! lane (a reported success of a send of one owned buffer, written straight into the reader's
//! array with its buffer beside it) and the general lane (everything else) interleaved — sends
//! of two regions, sends under selective completion that ask for none, `fi_inject` and
//! `FI_INJECT` sends (no owned buffer), gather sends, and sends whose completion the device
//! spoils — read with `read`, `readfrom` and `read_owned` through arrays of 1, 5 and 64
//! entries, and with `read_owned_iov`, which the send lane never serves (it needs every buffer
//! of a gather send, which a lane's window cannot hold): the general lane's answer. Whatever
//! the lane, every completion is the same entry, with the same buffer, in the same place, and
//! the counter counts the same.

mod common;
use common::*;
use ringfab::av::{AddressVector, AvAttr, EpAddr, FiAddr};
use ringfab::cntr::{Counter, CounterAttr, CounterEvents};
use ringfab::cq::{CompletionQueue, CqAttr};
use ringfab::domain::Domain;
use ringfab::entry::{Data, DataEntry, ErrEntry, OpContext};
use ringfab::ep::{Endpoint, EpAttr};
use ringfab::flags::{BindFlags, CntrBindFlags, CompletionFlags, OpFlags};
use ringfab::hal::Nic;
use ringfab::mr::{Buf, Iov, MemoryRegion};
use ringfab::{Capacities, Error};
use ringfab_emu::{DeviceFault, EmuWait, Ring};

const D: usize = 64;
const BUF: usize = 256;
const SEND: CompletionFlags = CompletionFlags::SEND.union(CompletionFlags::MSG);

/// The peer every send goes to: B's station, context 0 (nothing receives there; the frames
/// only have to leave).
const PEER: EpAddr = EpAddr { mac: MAC_B, ctx: 0 };

/// What one operation of a script is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    /// A send of one owned buffer of region 0 or 1 that asks for its completion: the send
    /// lane's.
    Owned(usize),
    /// The same without `FI_COMPLETION`, under `FI_SELECTIVE_COMPLETION`: no entry.
    Silent(usize),
    /// `fi_inject`: no buffer, no entry.
    Inject,
    /// `fi_sendmsg` with `FI_INJECT | FI_COMPLETION`: an entry, no buffer.
    InjectCompleted,
    /// A gather send of two buffers of region 0: an entry with both buffers.
    Gather,
    /// A send of one owned buffer whose completion the device writes with undefined status
    /// bits: an error entry, the buffer with it.
    Spoiled(usize),
}

/// A script of 50 operations: runs of plain owned sends (what the send lane takes), the other
/// kinds among them, a spoiled one in the middle of a run, and regions alternating.
fn script() -> Vec<Step> {
    let mut s = Vec::new();
    for i in 0..50 {
        s.push(match i {
            7 | 31 => Step::Silent(0),
            11 => Step::Inject,
            12 => Step::InjectCompleted,
            17 | 40 => Step::Gather,
            22 | 45 => Step::Spoiled(i % 2),
            26..=29 => Step::Owned(1),
            _ if i % 9 == 8 => Step::Owned(1),
            _ => Step::Owned(0),
        });
    }
    s
}

/// The reader a run uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reader {
    Read,
    ReadFrom,
    ReadOwned,
    /// `read_owned_iov`: the general lane only.
    ReadOwnedIov,
}

/// One completion as read: its entry, its source (`readfrom`, `read_owned`, `read_owned_iov`),
/// the buffers that came back with it (`read_owned`: the first; `read_owned_iov`,
/// `readerr_owned_iov`: every one; [`run`] names each `10 × operation + its place`) and its
/// error (0 for a success).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Got {
    context: usize,
    flags: CompletionFlags,
    len: usize,
    data: u64,
    buf: usize,
    src: Option<FiAddr>,
    owned: Vec<usize>,
    err: i32,
}

/// What a run of the script ends with: every completion in the order read, and the counter's
/// successes (bytes) and errors.
#[derive(Debug)]
struct Outcome {
    got: Vec<Got>,
    bytes: u64,
    errors: u64,
}

fn domain<'n, N: Nic<Wait = EmuWait>>(
    nic: &'n N,
    cntrs: &'n [&'n Counter<EmuWait>],
) -> Domain<'n, N, D> {
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
    .with_counters(cntrs)
}

/// A's endpoint: its sends on a CQ of their own (with `bind` added to `FI_TRANSMIT`), counted
/// by a byte counter, gather sends of up to two buffers, the peer in its AV.
struct A<N: Nic> {
    tx_cq: CompletionQueue<N, Data>,
    _rx_cq: CompletionQueue<N, Data>,
    _av: AddressVector,
    ep: Endpoint,
    peer: FiAddr,
}

fn endpoint_a<N: Nic>(d: &Domain<'_, N, D>, cntr: &Counter<N::Wait>, bind: BindFlags) -> A<N> {
    let cq_attr = CqAttr {
        size: 256,
        ..CqAttr::default()
    };
    let tx_cq = d.open_cq(&cq_attr).unwrap();
    let rx_cq = d.open_cq(&cq_attr).unwrap();
    let av = d.open_av(&AvAttr::default()).unwrap();
    let mut peer = [FiAddr::NOTAVAIL];
    assert_eq!(av.insert(d, &[PEER], &mut peer), Ok(1));
    let mut ep = d
        .endpoint(&EpAttr {
            tx_iov_limit: 2,
            ..EpAttr::default()
        })
        .unwrap();
    ep.bind_cq(d, &tx_cq, BindFlags::TRANSMIT | bind).unwrap();
    ep.bind_cq(d, &rx_cq, BindFlags::RECV).unwrap();
    ep.bind_cntr(d, cntr, CntrBindFlags::SEND).unwrap();
    ep.bind_av(d, &av).unwrap();
    ep.enable(d).unwrap();
    A {
        tx_cq,
        _rx_cq: rx_cq,
        _av: av,
        ep,
        peer: peer[0],
    }
}

/// The payload of operation `i`.
fn payload(i: usize) -> usize {
    8 + i % 13
}

/// Runs `steps` on A of a fresh pair of `T`: each operation posted with `FI_MORE` but the
/// last before a spoiled one (which the device completes alone, its fault injected just
/// before) and the very last, so that the device sees runs of sends at one doorbell; then
/// reads every completion with `reader` through an array of `width` entries, taking each error
/// entry with `readerr_owned_iov` as it reaches the head.
fn run<T: TestNic>(steps: &[Step], reader: Reader, width: usize) -> Outcome {
    let p = pair_of::<T>();
    let cntr = Counter::<EmuWait>::open(
        &CounterAttr {
            events: CounterEvents::Bytes,
            ..CounterAttr::default()
        },
        None,
    )
    .unwrap();
    let cntrs = [&cntr];
    let d = domain(&p.nic_a, &cntrs);
    let mut a = endpoint_a(&d, &cntr, BindFlags::SELECTIVE_COMPLETION);
    let regions: [MemoryRegion; 2] = [
        d.register(memory(64 * BUF)).unwrap(),
        d.register(memory(64 * BUF)).unwrap(),
    ];
    let mut sent = Vec::new();
    for (i, &step) in steps.iter().enumerate() {
        let last = i + 1 == steps.len() || matches!(steps[i + 1], Step::Spoiled(_));
        let more = if last {
            OpFlags::empty()
        } else {
            OpFlags::MORE
        };
        if let Step::Spoiled(_) = step {
            // Everything before it written back first, so that the fault spoils its own.
            p.wire.run_until_idle();
            p.a.inject(DeviceFault::GarbageStatus {
                ring: Some(Ring::Tx(0)),
                count: 1,
                bits: u32::MAX,
            });
        }
        let mut owned = |region: usize, flags: OpFlags| {
            let buf = regions[region].alloc(&d, BUF).unwrap();
            sent.push((i, vec![buf.addr()]));
            a.ep.sendmsg(&d, buf, payload(i), a.peer, None, OpContext(i), flags)
                .map_err(|(e, _)| e)
                .unwrap();
        };
        match step {
            Step::Owned(r) | Step::Spoiled(r) => owned(r, more | OpFlags::COMPLETION),
            Step::Silent(r) => owned(r, more),
            Step::Inject => a.ep.inject(&d, &[i as u8; 16], a.peer).unwrap(),
            Step::InjectCompleted => {
                a.ep.injectmsg(
                    &d,
                    &[i as u8; 16],
                    a.peer,
                    None,
                    OpContext(i),
                    more | OpFlags::COMPLETION,
                )
                .unwrap();
            }
            Step::Gather => {
                let mut iov = Iov::new();
                let (b0, b1) = (
                    regions[0].alloc(&d, BUF).unwrap(),
                    regions[0].alloc(&d, BUF).unwrap(),
                );
                sent.push((i, vec![b0.addr(), b1.addr()]));
                iov.push(b0, payload(i)).unwrap();
                iov.push(b1, 5).unwrap();
                a.ep.sendmsgv(
                    &d,
                    iov,
                    a.peer,
                    None,
                    OpContext(i),
                    more | OpFlags::COMPLETION,
                )
                .map_err(|(e, _)| e)
                .unwrap();
            }
        }
        if last {
            p.wire.run_until_idle();
        }
    }
    let reported = steps
        .iter()
        .filter(|s| !matches!(s, Step::Silent(_) | Step::Inject))
        .count();
    let mut got = read_all(&d, &mut a, &p.wire, reader, width, reported);
    // Each buffer that came back named by the operation that sent it and its place there (the
    // addresses differ from run to run).
    for g in &mut got {
        for addr in &mut g.owned {
            let (op, k) = sent
                .iter()
                .find_map(|(op, bufs)| bufs.iter().position(|b| b == addr).map(|k| (*op, k)))
                .expect("a buffer that was sent");
            *addr = op * 10 + k;
        }
    }
    // Every buffer is back: with its completion (dropped here), or to its region.
    assert_eq!(regions[0].outstanding(&d), 0, "{reader:?}: region 0");
    assert_eq!(regions[1].outstanding(&d), 0, "{reader:?}: region 1");
    Outcome {
        got,
        bytes: cntr.read(),
        errors: cntr.readerr(),
    }
}

/// Reads `count` completions of A's send CQ as [`run`] says.
fn read_all<'d, N: Nic>(
    d: &'d Domain<'_, N, D>,
    a: &mut A<N>,
    wire: &ringfab_emu::Wire,
    reader: Reader,
    width: usize,
    count: usize,
) -> Vec<Got> {
    let mut got = Vec::new();
    let mut out = vec![DataEntry::default(); width];
    let mut src = vec![FiAddr(7); width];
    let mut bufs: Vec<Option<Buf<'d>>> = (0..width).map(|_| None).collect();
    let mut iovs: Vec<Iov<'d>> = (0..width).map(|_| Iov::new()).collect();
    let mut idle = 0;
    while got.len() < count {
        wire.run_until_idle();
        let r = match reader {
            Reader::Read => a.tx_cq.read(d, &mut out),
            Reader::ReadFrom => a.tx_cq.readfrom(d, &mut out, &mut src),
            Reader::ReadOwned => a.tx_cq.read_owned(d, &mut out, &mut src, &mut bufs),
            Reader::ReadOwnedIov => a.tx_cq.read_owned_iov(d, &mut out, &mut src, &mut iovs),
        };
        match r {
            Ok(n) => {
                assert!(n >= 1 && n <= width);
                for i in 0..n {
                    let e = out[i];
                    let owned = match reader {
                        Reader::ReadOwned => bufs[i].take().map(|b| b.addr()).into_iter().collect(),
                        Reader::ReadOwnedIov => core::mem::take(&mut iovs[i])
                            .into_bufs()
                            .map(|b| b.addr())
                            .collect(),
                        _ => Vec::new(),
                    };
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
                let (_, iov) = a.tx_cq.readerr_owned_iov(d, &mut e, None, 0).unwrap();
                got.push(Got {
                    context: e.op_context.0,
                    flags: e.flags,
                    len: e.len,
                    data: e.data,
                    buf: e.buf.0,
                    src: None,
                    owned: iov.into_bufs().map(|b| b.addr()).collect(),
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

/// fi_cq(3): "*FI_SEND*: Indicates that the completion was for a send operation"; "Operations
/// which fail are reported 'out of band' … Attempting to read from a CQ while an item is in the
/// error queue results in fi_cq_read failing with a return code of -FI_EAVAIL"; for
/// `fi_cq_readfrom`, where "source addressing data is not available, the source address will be
/// set to FI_ADDR_NOTAVAIL". fi_endpoint(3): with `FI_SELECTIVE_COMPLETION` "data transfer
/// operations will not generate entries for successful completions unless FI_COMPLETION is set
/// as an operational flag for the given operation"; a counter bound with `FI_SEND` "Increments
/// the specified counter whenever a message transfer initiated over the endpoint has completed
/// successfully or in error". The general lane's reading (`read_owned_iov`) is checked against
/// those sentences; every other reader, through every width, must read exactly what it read —
/// the same entries in the same order, the same buffers with them, the same counts.
fn every_kind_of_send_interleaved_completes_the_same_whichever_lane_takes_it<T: TestNic>() {
    let steps = script();
    let general = run::<T>(&steps, Reader::ReadOwnedIov, 64);

    // The general lane as the man pages define it.
    let expected: Vec<usize> = steps
        .iter()
        .enumerate()
        .filter(|(_, s)| !matches!(s, Step::Silent(_) | Step::Inject))
        .map(|(i, _)| i)
        .collect();
    let contexts: Vec<usize> = general.got.iter().map(|g| g.context).collect();
    assert_eq!(
        contexts, expected,
        "every reported operation once, in order"
    );
    let buffers_of = |i: usize| match steps[i] {
        Step::Gather => vec![i * 10, i * 10 + 1],
        Step::InjectCompleted => Vec::new(),
        _ => vec![i * 10],
    };
    for g in &general.got {
        let step = steps[g.context];
        assert_eq!(
            (g.len, g.data, g.buf),
            (0, 0, 0),
            "{step:?}: a send's entry"
        );
        assert_eq!(g.flags, SEND, "{step:?}");
        assert_eq!(g.owned, buffers_of(g.context), "{step:?}: its own buffers");
        if let Step::Spoiled(_) = step {
            assert_eq!(g.err, 5, "{step:?}: FI_EIO");
        } else {
            assert_eq!(g.err, 0, "{step:?}");
            assert_eq!(g.src, Some(FiAddr::NOTAVAIL), "{step:?}: no source");
        }
    }
    let ok_bytes: u64 = steps
        .iter()
        .enumerate()
        .filter(|(_, s)| !matches!(s, Step::Spoiled(_)))
        .map(|(i, s)| match s {
            Step::Inject | Step::InjectCompleted => 16,
            Step::Gather => payload(i) as u64 + 5,
            _ => payload(i) as u64,
        })
        .sum();
    assert_eq!(
        (general.bytes, general.errors),
        (ok_bytes, 2),
        "payload bytes of every success, the two errors"
    );

    // Every other reader reads the same, whatever lane took each completion.
    for (reader, width) in [
        (Reader::ReadOwned, 64),
        (Reader::ReadOwned, 5),
        (Reader::ReadOwned, 1),
        (Reader::ReadFrom, 64),
        (Reader::Read, 64),
        (Reader::ReadOwnedIov, 1),
    ] {
        let o = run::<T>(&steps, reader, width);
        assert_eq!(o.got.len(), general.got.len(), "{reader:?} × {width}");
        for (g, want) in o.got.iter().zip(&general.got) {
            let mut want = want.clone();
            match reader {
                Reader::Read if want.err == 0 => want.src = None,
                _ => {}
            }
            if want.err == 0 {
                match reader {
                    Reader::ReadOwned => want.owned.truncate(1),
                    Reader::Read | Reader::ReadFrom => want.owned.clear(),
                    Reader::ReadOwnedIov => {}
                }
            }
            assert_eq!(*g, want, "{reader:?} × {width}");
        }
        assert_eq!(
            (o.bytes, o.errors),
            (general.bytes, general.errors),
            "{reader:?} × {width}: the counter"
        );
    }
}

/// fi_endpoint(3), FI_INJECT_COMPLETE: "A completion guarantees that the buffers will not be
/// read from again and the application may reclaim them" — what every send's completion here
/// hands back its buffer with. Sends posted with `FI_MORE` and no doorbell yet are ones the
/// device has not been told of: they complete nothing and keep their buffers, whatever lane
/// would take them; once rung, they complete in order, through `read_owned` in one call, each
/// with its own buffer, counted once each.
fn a_send_the_device_has_not_seen_keeps_its_buffer_until_its_completion<T: TestNic>() {
    let p = pair_of::<T>();
    let cntr = Counter::<EmuWait>::open(&CounterAttr::default(), None).unwrap();
    let cntrs = [&cntr];
    let d = domain(&p.nic_a, &cntrs);
    let a = endpoint_a(&d, &cntr, BindFlags::empty());
    let mr = d.register(memory(8 * BUF)).unwrap();
    let mut addrs = Vec::new();
    for i in 0..4 {
        let buf = mr.alloc(&d, BUF).unwrap();
        addrs.push(buf.addr());
        a.ep.sendmsg(&d, buf, 10, a.peer, None, OpContext(i), OpFlags::MORE)
            .map_err(|(e, _)| e)
            .unwrap();
    }
    p.wire.run_until_idle();
    let mut out = [DataEntry::default(); 8];
    let mut src = [FiAddr(7); 8];
    let mut bufs: Vec<Option<Buf<'_>>> = (0..8).map(|_| None).collect();
    assert_eq!(
        a.tx_cq.read_owned(&d, &mut out, &mut src, &mut bufs),
        Err(Error::Again),
        "nothing rang the doorbell"
    );
    assert_eq!(mr.outstanding(&d), 4, "the sends keep their buffers");
    let buf = mr.alloc(&d, BUF).unwrap();
    addrs.push(buf.addr());
    a.ep.sendmsg(&d, buf, 10, a.peer, None, OpContext(4), OpFlags::empty())
        .map_err(|(e, _)| e)
        .unwrap();
    p.wire.run_until_idle();
    assert_eq!(a.tx_cq.read_owned(&d, &mut out, &mut src, &mut bufs), Ok(5));
    for i in 0..5 {
        assert_eq!(out[i].op_context, OpContext(i));
        assert_eq!(out[i].flags, SEND);
        assert_eq!(src[i], FiAddr::NOTAVAIL);
        assert_eq!(bufs[i].take().map(|b| b.addr()), Some(addrs[i]));
    }
    assert_eq!(cntr.read(), 5, "one count per send");
    assert_eq!(mr.outstanding(&d), 0);
}

on_every_nic!(
    every_kind_of_send_interleaved_completes_the_same_whichever_lane_takes_it,
    a_send_the_device_has_not_seen_keeps_its_buffer_until_its_completion,
);
