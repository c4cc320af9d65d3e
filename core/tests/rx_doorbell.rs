//! When the device sees a receive (docs/semantics.md): a receive posted without `FI_MORE` may
//! wait for its doorbell while the device holds many others, and every one that waited reaches
//! the device before it could run out — through later posts or through the CQ read alone.
//! On every NIC, with a ring deep enough for receives to wait: with 256 descriptors, a receive
//! may wait while the device holds at least 128 (half the ring), until 64 (a quarter) wait.

mod common;
use common::*;
use ringfab::av::{AddressVector, AvAttr, FiAddr};
use ringfab::cq::{CompletionQueue, CqAttr};
use ringfab::domain::Domain;
use ringfab::entry::{Msg, MsgEntry, OpContext};
use ringfab::ep::{Endpoint, EpAttr};
use ringfab::flags::{BindFlags, CompletionFlags};
use ringfab::hal::Nic;
use ringfab::mr::{Buf, MemoryRegion};
use ringfab::{Capacities, Error};

const D: usize = 256;
const BUF: usize = 2048;

/// One side: its CQ, AV, endpoint and memory.
struct Side<N: Nic> {
    cq: CompletionQueue<N, Msg>,
    av: AddressVector,
    ep: Endpoint,
    mr: MemoryRegion,
}

fn domain<N: Nic>(nic: &N) -> Domain<'_, N, D> {
    Domain::with_capacities(
        nic,
        &Capacities {
            queues: 2,
            cqs: 1,
            cq_size: 2 * D,
            mrs: 1,
            avs: 1,
            av_entries: 4,
        },
    )
}

fn side<N: Nic>(d: &Domain<'_, N, D>) -> Side<N> {
    let cq = d
        .open_cq::<Msg>(&CqAttr {
            size: 2 * D,
            ..CqAttr::default()
        })
        .unwrap();
    let av = d.open_av(&AvAttr::default()).unwrap();
    let mut ep = d.endpoint(&EpAttr::default()).unwrap();
    ep.bind_cq(d, &cq, BindFlags::TRANSMIT | BindFlags::RECV)
        .unwrap();
    ep.bind_av(d, &av).unwrap();
    ep.enable(d).unwrap();
    let mr = d.register(memory(2 * D * BUF + ringfab::mr::PAGE)).unwrap();
    Side { cq, av, ep, mr }
}

/// Reads `side`'s CQ (driving the wire) until a receive completes or `tries` reads found
/// nothing; send completions on the way are dropped with their buffers. Returns the receive's
/// length and its buffer.
fn next_recv<'d, N: Nic>(
    p: &Pair<impl TestNic>,
    d: &'d Domain<'_, N, D>,
    side: &Side<N>,
    tries: usize,
) -> Option<(usize, Buf<'d>)> {
    for _ in 0..tries {
        p.wire.run_until_idle();
        let mut e = [MsgEntry::default(); 1];
        let mut src = [FiAddr::NOTAVAIL; 1];
        let mut bufs: [Option<Buf<'d>>; 1] = Default::default();
        match side.cq.read_owned(d, &mut e, &mut src, &mut bufs) {
            Ok(1) if e[0].flags.contains(CompletionFlags::RECV) => {
                return Some((e[0].len, bufs[0].take().unwrap()));
            }
            Ok(_) | Err(Error::Again) => {}
            Err(err) => panic!("reading the CQ: {err}"),
        }
    }
    None
}

/// The buffers of A's sends that completed (A's CQ holds nothing else).
fn sent_buffers<'d, N: Nic>(d: &'d Domain<'_, N, D>, a: &Side<N>) -> Vec<Buf<'d>> {
    let mut e = [MsgEntry::default(); 8];
    let mut src = [FiAddr::NOTAVAIL; 8];
    let mut bufs: [Option<Buf<'d>>; 8] = Default::default();
    match a.cq.read_owned(d, &mut e, &mut src, &mut bufs) {
        Ok(n) => bufs[..n].iter_mut().map(|b| b.take().unwrap()).collect(),
        Err(Error::Again) => Vec::new(),
        Err(err) => panic!("reading A's CQ: {err}"),
    }
}

/// fi_endpoint(3): FI_EP_DGRAM "Flow control is not guaranteed" — but a receive that was
/// accepted is posted: frames sent one at a time, each read before the next, must each find
/// one, although the receiver posted them all one by one without `FI_MORE` (so that the last
/// ones waited for their doorbell) and posts nothing more: the CQ reads alone must give the
/// waiting receives to the device as it runs low.
fn receives_whose_doorbell_waited_are_given_to_the_device_by_the_cq_read<T: TestNic>() {
    let p = pair_of::<T>();
    let (da, db) = (domain(&p.nic_a), domain(&p.nic_b));
    let (a, b) = (side(&da), side(&db));
    let to_b = a.av.insert_one(&da, b.ep.name()).unwrap();
    let receives = ring_room::<T>(D) - 1;
    assert!(
        receives > 128 + 64,
        "a ring deep enough for a whole batch of receives to wait"
    );
    for i in 0..receives {
        let buf = b.mr.alloc(&db, BUF).unwrap();
        b.ep.recv(&db, buf, OpContext(i)).unwrap();
    }
    let off = a.ep.payload_offset();
    let mut pool = Vec::new();
    for i in 0..receives {
        let mut buf = pool.pop().unwrap_or_else(|| a.mr.alloc(&da, BUF).unwrap());
        let len = 1 + i % 200;
        buf.fill(off, len, i as u8).unwrap();
        a.ep.send(&da, buf, len, to_b, OpContext(i)).unwrap();
        let (got, buf) = next_recv(&p, &db, &b, 50)
            .unwrap_or_else(|| panic!("message {i} of {receives} found no receive"));
        assert_eq!(got, len, "message {i}");
        let mut data = vec![0u8; len];
        buf.read(b.ep.payload_offset(), &mut data).unwrap();
        assert!(data.iter().all(|&x| x == i as u8), "message {i}'s bytes");
        pool.extend(sent_buffers(&da, &a));
    }
}

/// The same with the receives posted again as they complete, one at a time without
/// `FI_MORE`, as an application's loop does: over several laps of the ring, every message finds
/// a receive, in order.
fn receives_reposted_one_by_one_keep_every_message_over_laps_of_the_ring<T: TestNic>() {
    let p = pair_of::<T>();
    let (da, db) = (domain(&p.nic_a), domain(&p.nic_b));
    let (a, b) = (side(&da), side(&db));
    let to_b = a.av.insert_one(&da, b.ep.name()).unwrap();
    let receives = ring_room::<T>(D) - 1;
    for i in 0..receives {
        let buf = b.mr.alloc(&db, BUF).unwrap();
        b.ep.recv(&db, buf, OpContext(i)).unwrap();
    }
    let off = a.ep.payload_offset();
    let mut pool = Vec::new();
    for i in 0..4 * D {
        let mut buf = pool.pop().unwrap_or_else(|| a.mr.alloc(&da, BUF).unwrap());
        buf.fill(off, 8, i as u8).unwrap();
        a.ep.send(&da, buf, 8, to_b, OpContext(i)).unwrap();
        let (_, buf) =
            next_recv(&p, &db, &b, 50).unwrap_or_else(|| panic!("message {i} found no receive"));
        let mut data = [0u8; 8];
        buf.read(b.ep.payload_offset(), &mut data).unwrap();
        assert_eq!(data, [i as u8; 8], "message {i} in order");
        b.ep.recv(&db, buf, OpContext(i)).unwrap();
        pool.extend(sent_buffers(&da, &a));
    }
}

on_every_nic!(
    receives_whose_doorbell_waited_are_given_to_the_device_by_the_cq_read,
    receives_reposted_one_by_one_keep_every_message_over_laps_of_the_ring
);
