//! Blocking on completion queues on every emulated NIC with its real driver — the 82576 (igb),
//! the 82574 (e1000e) and virtio-net, each test once per NIC (`igb::…`, `e1000e::…`,
//! `virtio_net::…`): `sread` woken by the emulated MSI-X interrupt, timeouts measured with a
//! clock, `signal` from another thread, thresholds, wait objects, `control(GetWait)`, and a
//! wait set over two CQs.

mod common;
use common::*;
use std::thread;
use std::time::{Duration, Instant};

use ringfab::cntr::{timeout_from_ms, WaitObj};
use ringfab::cq::{CompletionQueue, CqAttr, CqControl, WaitCond, WaitSet};
use ringfab::domain::Domain;
use ringfab::entry::{Msg, MsgEntry, OpContext};
use ringfab::flags::{BindFlags, CqFlags, OpFlags};
use ringfab::hal::{
    DmaRegion, Iova, MacAddr, Nic, Platform, Queue, RawWait, Report, RxBuffer, RxConfig, Token,
    TxCompletion, TxConfig, TxQueue, TxSegment, Wait,
};
use ringfab::path::{Path, RecvPost, SendPost};
use ringfab::{Capacities, Error};
use ringfab_emu::{EmuDma, EmuWaitSet};

const D: usize = 64;
const BUF: usize = 2048;
const SLOTS: usize = 128;
const FRAME: usize = 114;
/// Long enough never to pass in a test that works; a test that hangs fails on it instead.
const LONG: Option<Duration> = Some(Duration::from_secs(20));

type Cq<N> = CompletionQueue<N, Msg>;

/// A domain over `nic` with rings of `D` descriptors, `queues` hardware queues and `cqs` CQs of
/// up to `cq_size` entries (the other capacities the defaults).
fn domain<N: Nic>(nic: &N, queues: usize, cqs: usize, cq_size: usize) -> Domain<'_, N, D> {
    Domain::with_capacities(
        nic,
        &Capacities {
            queues,
            cqs,
            cq_size,
            ..Capacities::DEFAULT
        },
    )
}

fn frame(seq: u64, to: MacAddr, from: MacAddr) -> Vec<u8> {
    let mut f = Vec::with_capacity(FRAME);
    f.extend_from_slice(&to.0);
    f.extend_from_slice(&from.0);
    f.extend_from_slice(&[0x88, 0xB5]);
    f.extend_from_slice(&seq.to_le_bytes());
    f.resize(FRAME, 0x5a);
    f
}

fn write_frame(mem: &EmuDma, seq: u64, f: &[u8]) -> TxSegment {
    let off = (seq as usize % SLOTS) * BUF;
    for (i, chunk) in f.chunks(8).enumerate() {
        let mut w = [0u8; 8];
        w[..chunk.len()].copy_from_slice(chunk);
        mem.write_u64(off + 8 * i, u64::from_le_bytes(w));
    }
    TxSegment {
        iova: Iova(mem.iova().0 + off as u64),
        len: f.len() as u16,
    }
}

/// Sends frames from A to B with the driver alone; the emulated wire delivers them (and B's
/// model writes back and raises its interrupt) before `send` returns.
struct Sender<'n, T: TestNic> {
    tx: <T::Nic as Nic>::Tx<'n, 64>,
    mem: EmuDma,
    next: u64,
}

impl<'n, T: TestNic> Sender<'n, T> {
    fn new(p: &'n Pair<T>) -> Self {
        Sender {
            tx: p.nic_a.open_tx::<64>(1, TxConfig::default()).unwrap(),
            mem: p.a.platform().alloc_dma(BUF * SLOTS).unwrap(),
            next: 0,
        }
    }

    fn send(&mut self, p: &Pair<T>, n: u64) {
        for _ in 0..n {
            let seg = write_frame(&self.mem, self.next, &frame(self.next, MAC_B, MAC_A));
            self.tx
                .push(&[seg], Token(self.next), Report::Always)
                .unwrap();
            self.next += 1;
        }
        self.tx.doorbell();
        p.wire.run_until_idle();
        let mut out = [TxCompletion {
            token: Token(0),
            status: Ok(()),
        }; 64];
        while self.tx.poll(&mut out) > 0 {}
    }
}

fn attr(wait_obj: WaitObj) -> CqAttr {
    CqAttr {
        size: 64,
        wait_obj,
        ..CqAttr::default()
    }
}

fn recv(mem: &EmuDma, seq: u64) -> RecvPost {
    RecvPost {
        buf: RxBuffer {
            iova: Iova(mem.iova().0 + ((seq as usize % SLOTS) * BUF) as u64),
            len: BUF as u32,
        },
        len: BUF as u32,
        context: OpContext(seq as usize),
        flags: OpFlags::empty(),
    }
}

fn post<N: Nic>(rx: &Path<'_, '_, N, D>, mem: &EmuDma, seqs: core::ops::Range<u64>) {
    let posts: Vec<_> = seqs.map(|s| recv(mem, s)).collect();
    assert_eq!(rx.post_recvs(&posts), Ok(posts.len()));
}

/// Opens B's receive queue 0 steered to `cq`'s vector (or without interrupt if it has none),
/// binds it and posts receives 0..16.
fn bound_rx<'d, 'n, N: Nic>(
    dom: &'d Domain<'n, N, D>,
    cq: &Cq<N>,
    mem: &EmuDma,
) -> Path<'d, 'n, N, D> {
    let config = match cq.interrupt_vector(dom) {
        Some(v) => RxConfig::new(BUF as u32).with_vector(v),
        None => RxConfig::new(BUF as u32),
    };
    let rx = dom.open_rx(0, config).unwrap();
    cq.bind(dom, &rx, BindFlags::RECV).unwrap();
    post(&rx, mem, 0..16);
    rx
}

/// The capacities of the domains on B that [`rig`] opens in: two hardware queues, two CQs of up
/// to 64 entries.
const RIG_CAPS: Capacities = Capacities {
    queues: 2,
    cqs: 2,
    cq_size: 64,
    ..Capacities::DEFAULT
};

/// A CQ of `attr` on `dom` (a domain on B) with one receive path bound to it, receives 0..16
/// posted into the memory returned with them (before the path, so that the path drops first).
fn rig<'d, 'n, T: TestNic>(
    p: &Pair<T>,
    dom: &'d Domain<'n, T::Nic, D>,
    attr: CqAttr,
) -> (Cq<T::Nic>, EmuDma, Path<'d, 'n, T::Nic, D>) {
    let cq = dom.open_cq::<Msg>(&attr).unwrap();
    let mem = p.b.platform().alloc_dma(BUF * SLOTS).unwrap();
    let rx = bound_rx(dom, &cq, &mem);
    (cq, mem, rx)
}

/// Waits until `n` threads block on `cq`, then a little longer for them to reach the block.
fn until_blocked<N: Nic>(dom: &Domain<'_, N, D>, cq: &Cq<N>, n: u32) {
    let start = Instant::now();
    while cq.sleepers(dom) < n {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "readers never blocked"
        );
        thread::yield_now();
    }
    thread::sleep(Duration::from_millis(20));
}

fn entries() -> [MsgEntry; 16] {
    [MsgEntry::default(); 16]
}

fn sread_times_out_with_again_and_never_early<T: TestNic>() {
    let p = pair_of::<T>();
    let dom = Domain::<_, D>::with_capacities(&p.nic_b, &RIG_CAPS);
    let (cq, _mem, _rx) = rig(&p, &dom, attr(WaitObj::Unspec));
    let clock = clock();
    let mut out = entries();
    for ms in [0, 1, 15, 40] {
        let t = Duration::from_millis(ms);
        let start = Instant::now();
        assert_eq!(
            cq.sread(&dom, &mut out, None, Some(t), &clock),
            Err(Error::Again)
        );
        let took = start.elapsed();
        assert!(took >= t, "{ms} ms timeout returned after {took:?}");
    }
    assert_eq!(
        timeout_from_ms(-1),
        None,
        "a negative libfabric timeout is infinite"
    );
}

fn sread_is_woken_by_the_emulated_interrupt_of_its_vector<T: TestNic>() {
    let p = pair_of::<T>();
    let dom = Domain::<_, D>::with_capacities(&p.nic_b, &RIG_CAPS);
    let (cq, _mem, _rx) = rig(&p, &dom, attr(WaitObj::Unspec));
    let v = cq
        .interrupt_vector(&dom)
        .expect("an UNSPEC CQ holds a vector");
    let irq = p.b.vector(v).unwrap();
    let before = irq.notifications();
    assert_ne!(
        T::vector_unmasked(&p, v),
        Some(true),
        "nobody blocks: the vector is masked"
    );
    let clock = clock();
    let mut out = entries();
    thread::scope(|s| {
        let reader = s.spawn(|| {
            let got = cq.sread(&dom, &mut out, None, None, &clock);
            (got, Instant::now())
        });
        until_blocked(&dom, &cq, 1);
        assert_ne!(
            T::vector_unmasked(&p, v),
            Some(false),
            "armed while a reader blocks"
        );
        let mut sender = Sender::new(&p);
        let sent = Instant::now();
        sender.send(&p, 1);
        let (got, done) = reader.join().unwrap();
        assert_eq!(got, Ok(1));
        assert!(done >= sent, "it blocked until the frame arrived");
    });
    assert_eq!(out[0].op_context, OpContext(0));
    assert_eq!(out[0].len, FRAME);
    assert!(
        irq.notifications() > before,
        "the emulated MSI-X vector fired"
    );
    assert_ne!(
        T::vector_unmasked(&p, v),
        Some(true),
        "disarmed when the last reader left"
    );
}

fn sread_returns_at_once_what_is_already_there<T: TestNic>() {
    let p = pair_of::<T>();
    let dom = Domain::<_, D>::with_capacities(&p.nic_b, &RIG_CAPS);
    let (cq, _mem, _rx) = rig(&p, &dom, attr(WaitObj::MutexCond));
    Sender::new(&p).send(&p, 3);
    let mut out = entries();
    assert_eq!(cq.sread(&dom, &mut out, None, LONG, &clock()), Ok(3));
    assert_eq!(
        cq.sread(&dom, &mut out[..0], None, Some(Duration::ZERO), &clock()),
        Err(Error::Again),
        "an empty buffer waits for something queued"
    );
}

fn signal_from_another_thread_wakes_a_blocked_sread_with_again<T: TestNic>() {
    let p = pair_of::<T>();
    let dom = Domain::<_, D>::with_capacities(&p.nic_b, &RIG_CAPS);
    let (cq, _mem, _rx) = rig(&p, &dom, attr(WaitObj::Unspec));
    let clock = clock();
    let mut out = entries();
    thread::scope(|s| {
        let reader = s.spawn(|| cq.sread(&dom, &mut out, None, None, &clock));
        until_blocked(&dom, &cq, 1);
        cq.signal(&dom).unwrap();
        assert_eq!(reader.join().unwrap(), Err(Error::Again));
    });
    // A signal nobody was blocked for is kept for the next sread, infinite timeout or not.
    cq.signal(&dom).unwrap();
    let start = Instant::now();
    assert_eq!(
        cq.sread(&dom, &mut out, None, None, &clock),
        Err(Error::Again)
    );
    assert!(start.elapsed() < Duration::from_secs(5));
    assert_eq!(
        cq.sread(&dom, &mut out, None, Some(Duration::from_millis(5)), &clock),
        Err(Error::Again),
        "and only once: this one times out"
    );
}

fn signal_wakes_every_blocked_reader<T: TestNic>() {
    let p = pair_of::<T>();
    let dom = Domain::<_, D>::with_capacities(&p.nic_b, &RIG_CAPS);
    let (cq, _mem, _rx) = rig(&p, &dom, attr(WaitObj::Unspec));
    let clock = clock();
    thread::scope(|s| {
        let readers: Vec<_> = (0..3)
            .map(|_| {
                s.spawn(|| {
                    let mut out = entries();
                    cq.sread(&dom, &mut out, None, LONG, &clock)
                })
            })
            .collect();
        until_blocked(&dom, &cq, 3);
        let start = Instant::now();
        cq.signal(&dom).unwrap();
        for r in readers {
            assert_eq!(r.join().unwrap(), Err(Error::Again));
        }
        assert!(start.elapsed() < Duration::from_secs(5));
    });
}

fn threshold_waits_for_that_many_entries<T: TestNic>() {
    let p = pair_of::<T>();
    let threshold = CqAttr {
        wait_cond: WaitCond::Threshold,
        ..attr(WaitObj::Unspec)
    };
    let dom = Domain::<_, D>::with_capacities(&p.nic_b, &RIG_CAPS);
    let (cq, _mem, _rx) = rig(&p, &dom, threshold);
    let clock = clock();
    let mut out = entries();
    let mut sender = Sender::new(&p);
    thread::scope(|s| {
        let reader = s.spawn(|| {
            let got = cq.sread(&dom, &mut out, Some(4), LONG, &clock);
            (got, Instant::now())
        });
        let mut fourth = Instant::now();
        for i in 0..4 {
            thread::sleep(Duration::from_millis(15));
            if i == 3 {
                fourth = Instant::now();
            }
            sender.send(&p, 1);
        }
        let (got, done) = reader.join().unwrap();
        assert_eq!(got, Ok(4), "not before the fourth entry");
        assert!(done >= fourth);
    });
    let ctx: Vec<_> = out[..4].iter().map(|e| e.op_context.0).collect();
    assert_eq!(ctx, [0, 1, 2, 3]);

    // Fewer than the threshold by the timeout: what is there, no earlier than the timeout.
    sender.send(&p, 2);
    let t = Duration::from_millis(40);
    let start = Instant::now();
    assert_eq!(cq.sread(&dom, &mut out, Some(8), Some(t), &clock), Ok(2));
    assert!(start.elapsed() >= t);
    // A threshold above the buffer is capped at its length.
    sender.send(&p, 2);
    assert_eq!(
        cq.sread(&dom, &mut out[..2], Some(100), LONG, &clock),
        Ok(2)
    );
}

fn cond_none_returns_with_the_first_entry_whatever_cond_says<T: TestNic>() {
    let p = pair_of::<T>();
    let dom = Domain::<_, D>::with_capacities(&p.nic_b, &RIG_CAPS);
    let (cq, _mem, _rx) = rig(&p, &dom, attr(WaitObj::Unspec));
    Sender::new(&p).send(&p, 1);
    let start = Instant::now();
    assert_eq!(
        cq.sread(&dom, &mut entries(), Some(8), LONG, &clock()),
        Ok(1)
    );
    assert!(start.elapsed() < Duration::from_secs(5));
}

fn a_software_error_entry_wakes_a_blocked_sread<T: TestNic>() {
    let p = pair_of::<T>();
    let dom = Domain::<_, D>::with_capacities(&p.nic_b, &RIG_CAPS);
    let (cq, _mem, _rx) = rig(&p, &dom, attr(WaitObj::Unspec));
    let clock = clock();
    thread::scope(|s| {
        let reader = s.spawn(|| cq.sread(&dom, &mut entries(), None, LONG, &clock));
        until_blocked(&dom, &cq, 1);
        cq.report_uncredited(&dom, OpContext(7), Error::AddrNotAvail)
            .unwrap();
        assert_eq!(reader.join().unwrap(), Err(Error::Avail));
    });
}

fn yield_cq_spins_needs_no_vector_and_is_signalled<T: TestNic>() {
    let p = pair_of::<T>();
    let dom = Domain::<_, D>::with_capacities(&p.nic_b, &RIG_CAPS);
    let (cq, _mem, _rx) = rig(&p, &dom, attr(WaitObj::Yield));
    assert_eq!(cq.interrupt_vector(&dom), None);
    let clock = clock();
    let t = Duration::from_millis(10);
    let start = Instant::now();
    assert_eq!(
        cq.sread(&dom, &mut entries(), None, Some(t), &clock),
        Err(Error::Again)
    );
    assert!(start.elapsed() >= t);
    thread::scope(|s| {
        let reader = s.spawn(|| cq.sread(&dom, &mut entries(), None, LONG, &clock));
        thread::sleep(Duration::from_millis(20));
        Sender::new(&p).send(&p, 1);
        assert_eq!(reader.join().unwrap(), Ok(1));
        let reader = s.spawn(|| cq.sread(&dom, &mut entries(), None, None, &clock));
        until_blocked(&dom, &cq, 1);
        cq.signal(&dom).unwrap();
        assert_eq!(reader.join().unwrap(), Err(Error::Again));
    });
}

fn sread_and_signal_are_refused_where_the_spec_forbids_them<T: TestNic>() {
    let p = pair_of::<T>();
    let dom = domain(&p.nic_b, 1, 2, 64);
    let cq = dom.open_cq::<Msg>(&attr(WaitObj::None)).unwrap();
    let clock = clock();
    assert_eq!(
        cq.sread(&dom, &mut entries(), None, Some(Duration::ZERO), &clock),
        Err(Error::NoSys),
        "sread with FI_WAIT_NONE"
    );
    assert_eq!(
        cq.signal(&dom),
        Err(Error::NoSys),
        "signal without a wait object"
    );

    let set = WaitSet::new(&dom, EmuWaitSet::new());
    let set_attr = CqAttr {
        wait_set: Some(set.id()),
        ..attr(WaitObj::Set)
    };
    let in_set = set.open_cq::<Msg, D>(&dom, &set_attr).unwrap();
    assert_eq!(
        in_set.sread(&dom, &mut entries(), None, Some(Duration::ZERO), &clock),
        Err(Error::NoSys),
        "sread with FI_WAIT_SET"
    );
    assert_eq!(in_set.signal(&dom), Ok(()), "a SET CQ has a wait object");
}

fn getwait_returns_the_wait_object_or_the_specs_error<T: TestNic>() {
    let p = pair_of::<T>();
    let dom = domain(&p.nic_b, 1, 1, 64);
    for (w, want) in [
        (WaitObj::None, Error::NoData),
        (WaitObj::Unspec, Error::NoData),
        (WaitObj::Yield, Error::NoData),
        (WaitObj::MutexCond, Error::NoSys),
    ] {
        let mut cq = dom.open_cq::<Msg>(&attr(w)).unwrap();
        assert_eq!(cq.control(CqControl::GetWait), Err(want), "{w:?}");
        assert_eq!(want.errno(), if want == Error::NoData { 61 } else { 38 });
        // The domain has one CQ slot: closing gives it back for the next wait object.
        cq.close(&dom).map_err(|(e, _)| e).unwrap();
    }
    // Emulated vectors are condvars, not file descriptors: FI_WAIT_FD cannot be honoured.
    assert_eq!(
        dom.open_cq::<Msg>(&attr(WaitObj::Fd)).err(),
        Some(Error::NoSys)
    );
    // …and the failed open left the slot and its vector free.
    let cq = dom.open_cq::<Msg>(&attr(WaitObj::Unspec)).unwrap();
    assert_eq!(cq.interrupt_vector(&dom), Some(0));
}

fn every_invalid_wait_attribute_returns_the_specs_error<T: TestNic>() {
    let p = pair_of::<T>();
    let dom = domain(&p.nic_b, 1, 2, 64);
    let set = WaitSet::new(&dom, EmuWaitSet::new());
    let other = WaitSet::new(&dom, EmuWaitSet::new());
    let cases = [
        (
            "FI_WAIT_SET without a set",
            attr(WaitObj::Set),
            Error::Inval,
        ),
        (
            "FI_WAIT_SET opened outside its set",
            CqAttr {
                wait_set: Some(set.id()),
                ..attr(WaitObj::Set)
            },
            Error::Inval,
        ),
        (
            "FI_WAIT_FD on emulated vectors",
            attr(WaitObj::Fd),
            Error::NoSys,
        ),
        ("FI_WAIT_POLLFD", attr(WaitObj::PollFd), Error::NoSys),
        (
            "an unknown flag with a wait object",
            CqAttr {
                flags: CqFlags::from_bits_retain(1 << 43),
                ..attr(WaitObj::Unspec)
            },
            Error::BadFlags,
        ),
    ];
    for (what, a, want) in cases {
        assert_eq!(dom.open_cq::<Msg>(&a).err(), Some(want), "{what}");
    }
    let named_other = CqAttr {
        wait_set: Some(other.id()),
        ..attr(WaitObj::Set)
    };
    assert_eq!(
        set.open_cq::<Msg, D>(&dom, &named_other).err(),
        Some(Error::Inval),
        "a set opening a CQ that names another set"
    );
    assert_eq!(
        set.open_cq::<Msg, D>(&dom, &attr(WaitObj::Unspec)).err(),
        Some(Error::Inval),
        "a set opening a CQ that is not FI_WAIT_SET"
    );
    assert_eq!(WaitObj::from_raw(7), Err(Error::Inval));
    assert_eq!(WaitCond::from_raw(2), Err(Error::Inval));
}

fn affinity_picks_the_vector_when_it_is_free_and_is_a_hint_otherwise<T: TestNic>() {
    let p = pair_of::<T>();
    let dom = domain(&p.nic_b, 1, 3, 64);
    let affine = |cpu| CqAttr {
        flags: CqFlags::AFFINITY,
        signaling_vector: cpu,
        ..attr(WaitObj::Unspec)
    };
    // The NIC's last vector (the 82574 has five, the others more).
    let last = p.nic_b.irq_vectors() - 1;
    assert!(last >= 2, "room for three CQs");
    let c1 = dom.open_cq::<Msg>(&affine(last.into())).unwrap();
    let c2 = dom.open_cq::<Msg>(&affine(last.into())).unwrap();
    let c3 = dom.open_cq::<Msg>(&affine(1000)).unwrap();
    assert_eq!(c1.interrupt_vector(&dom), Some(last));
    assert_eq!(
        c2.interrupt_vector(&dom),
        Some(0),
        "the last is taken: the lowest free"
    );
    assert_eq!(
        c3.interrupt_vector(&dom),
        Some(1),
        "no vector 1000: the lowest free"
    );
    c1.close(&dom).map_err(|(e, _)| e).unwrap();
    let c4 = dom.open_cq::<Msg>(&affine(last.into())).unwrap();
    assert_eq!(
        c4.interrupt_vector(&dom),
        Some(last),
        "closing gave it back"
    );
}

fn bind_refuses_a_queue_not_steered_to_the_cqs_vector<T: TestNic>() {
    let p = pair_of::<T>();
    let dom = domain(&p.nic_b, 4, 1, 64);
    let cq = dom.open_cq::<Msg>(&attr(WaitObj::Unspec)).unwrap();
    let v = cq.interrupt_vector(&dom).unwrap();
    let no_irq = dom.open_rx(0, RxConfig::new(BUF as u32)).unwrap();
    assert_eq!(cq.bind(&dom, &no_irq, BindFlags::RECV), Err(Error::Inval));
    let elsewhere = dom
        .open_rx(1, RxConfig::new(BUF as u32).with_vector(v + 1))
        .unwrap();
    assert_eq!(
        cq.bind(&dom, &elsewhere, BindFlags::RECV),
        Err(Error::Inval)
    );
    let steered = dom.open_tx(1, TxConfig::with_vector(v)).unwrap();
    assert_eq!(cq.bind(&dom, &steered, BindFlags::TRANSMIT), Ok(()));
    cq.unbind(&dom, &steered).unwrap();
}

/// B's transmit path 0, steered to `cq`'s vector and bound to it, and a buffer to send from.
fn bound_tx<'d, 'n, N: Nic>(dom: &'d Domain<'n, N, D>, cq: &Cq<N>) -> Path<'d, 'n, N, D> {
    let v = cq.interrupt_vector(dom).unwrap();
    let tx = dom.open_tx(0, TxConfig::with_vector(v)).unwrap();
    cq.bind(dom, &tx, BindFlags::TRANSMIT).unwrap();
    tx
}

fn a_wait_set_over_two_cqs_wakes_on_either_and_on_signal<T: TestNic>() {
    let p = pair_of::<T>();
    let dom = domain(&p.nic_b, 2, 2, 64);
    let set = WaitSet::new(&dom, EmuWaitSet::new());
    let in_set = CqAttr {
        wait_set: Some(set.id()),
        ..attr(WaitObj::Set)
    };
    let rx_cq = set.open_cq::<Msg, D>(&dom, &in_set).unwrap();
    let tx_cq = set.open_cq::<Msg, D>(&dom, &in_set).unwrap();
    assert_ne!(rx_cq.interrupt_vector(&dom), tx_cq.interrupt_vector(&dom));
    let mem = p.b.platform().alloc_dma(BUF * SLOTS).unwrap();
    let _rx = bound_rx(&dom, &rx_cq, &mem);
    let tx = bound_tx(&dom, &tx_cq);
    let clock = clock();
    let mut out = entries();

    // Nothing: a timeout, never early.
    let t = Duration::from_millis(30);
    let start = Instant::now();
    assert_eq!(set.wait(&dom, Some(t), &clock), Err(Error::TimedOut));
    assert!(start.elapsed() >= t);

    // A receive on the first CQ, by its interrupt, while the set waits.
    thread::scope(|s| {
        let waiter = s.spawn(|| set.wait(&dom, LONG, &clock));
        thread::sleep(Duration::from_millis(30));
        Sender::new(&p).send(&p, 1);
        assert_eq!(waiter.join().unwrap(), Ok(()));
    });
    assert_eq!(rx_cq.read(&dom, &mut out), Ok(1));
    assert_eq!(tx_cq.read(&dom, &mut out), Err(Error::Again));

    // A send completing on the second.
    thread::scope(|s| {
        let waiter = s.spawn(|| set.wait(&dom, LONG, &clock));
        thread::sleep(Duration::from_millis(30));
        let seg = [write_frame(&mem, 100, &frame(100, MAC_A, MAC_B))];
        let send = SendPost {
            segments: &seg,
            context: OpContext(100),
            flags: OpFlags::empty(),
        };
        assert_eq!(tx.post_sends(&[send]), Ok(1));
        p.wire.run_until_idle();
        assert_eq!(waiter.join().unwrap(), Ok(()));
    });
    assert_eq!(tx_cq.read(&dom, &mut out), Ok(1));
    assert_eq!(out[0].op_context, OpContext(100));

    // A signal on a member wakes the set with nothing to read.
    thread::scope(|s| {
        let waiter = s.spawn(|| set.wait(&dom, None, &clock));
        thread::sleep(Duration::from_millis(30));
        tx_cq.signal(&dom).unwrap();
        assert_eq!(waiter.join().unwrap(), Ok(()));
    });
    assert_eq!(rx_cq.read(&dom, &mut out), Err(Error::Again));
    assert_eq!(set.raw(), None, "emulated sets have no descriptor");
}

fn a_closed_member_leaves_the_set_and_its_vector_no_longer_wakes_it<T: TestNic>() {
    let p = pair_of::<T>();
    let dom = domain(&p.nic_b, 2, 2, 64);
    let set = WaitSet::new(&dom, EmuWaitSet::new());
    let in_set = CqAttr {
        wait_set: Some(set.id()),
        ..attr(WaitObj::Set)
    };
    let member = set.open_cq::<Msg, D>(&dom, &in_set).unwrap();
    let v = member.interrupt_vector(&dom).unwrap();
    member.close(&dom).map_err(|(e, _)| e).unwrap();
    let outsider = dom.open_cq::<Msg>(&attr(WaitObj::Unspec)).unwrap();
    assert_eq!(
        outsider.interrupt_vector(&dom),
        Some(v),
        "the vector is reused"
    );
    outsider.signal(&dom).unwrap();
    let clock = clock();
    let t = Duration::from_millis(20);
    let start = Instant::now();
    assert_eq!(set.wait(&dom, Some(t), &clock), Err(Error::TimedOut));
    assert!(start.elapsed() >= t);
    assert_eq!(
        outsider.sread(&dom, &mut entries(), None, Some(Duration::ZERO), &clock),
        Err(Error::Again),
        "its signal was its own"
    );
}

/// poll(2) for readability: what an application does with the descriptor `FI_GETWAIT` gives.
fn poll_readable(fd: i32, timeout_ms: i32) -> bool {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid, initialised pollfd that lives across the call.
    unsafe { libc::poll(&mut pfd, 1, timeout_ms) == 1 }
}

fn fd_wait_gives_an_eventfd_the_emulated_interrupt_makes_readable<T: TestNic>() {
    let p = pair_of::<T>();
    p.b.use_eventfds().unwrap();
    let dom = Domain::<_, D>::with_capacities(&p.nic_b, &RIG_CAPS);
    let (mut cq, _mem, _rx) = rig(&p, &dom, attr(WaitObj::Fd));
    let Ok(RawWait::Fd(fd)) = cq.control(CqControl::GetWait) else {
        panic!("an FD CQ gives its descriptor");
    };
    let v = cq.interrupt_vector(&dom).unwrap();
    assert!(
        matches!(p.b.vector(v).unwrap().raw(), Some(RawWait::Fd(f)) if f == fd),
        "the descriptor is the CQ's vector's"
    );
    assert_eq!(cq.trywait(&dom), Ok(()), "nothing queued: safe to block");
    assert!(!poll_readable(fd, 0));
    thread::scope(|s| {
        s.spawn(|| {
            thread::sleep(Duration::from_millis(30));
            Sender::new(&p).send(&p, 1);
        });
        assert!(
            poll_readable(fd, 10_000),
            "the emulated interrupt made it readable"
        );
    });
    assert_eq!(cq.trywait(&dom), Err(Error::Again), "read first");
    let mut out = entries();
    assert_eq!(cq.read(&dom, &mut out), Ok(1));
    assert_eq!(cq.trywait(&dom), Ok(()));
    assert!(!poll_readable(fd, 0), "trywait drained it");
    // The same CQ also blocks in sread.
    thread::scope(|s| {
        let reader = s.spawn(|| cq.sread(&dom, &mut out, None, LONG, &clock()));
        until_blocked(&dom, &cq, 1);
        Sender::new(&p).send(&p, 1);
        assert_eq!(reader.join().unwrap(), Ok(1));
    });
}

/// `fi_trywait` re-arms the CQ's interrupts every time: after the application read what the
/// first completion brought, a second `trywait` and a second completion make the descriptor
/// readable again (and a third), each within the wait, with no sread polling in between.
fn fd_wait_is_signalled_again_after_each_trywait<T: TestNic>() {
    let p = pair_of::<T>();
    p.b.use_eventfds().unwrap();
    let dom = Domain::<_, D>::with_capacities(&p.nic_b, &RIG_CAPS);
    let (mut cq, _mem, _rx) = rig(&p, &dom, attr(WaitObj::Fd));
    let Ok(RawWait::Fd(fd)) = cq.control(CqControl::GetWait) else {
        panic!("an FD CQ gives its descriptor");
    };
    let mut sender = Sender::new(&p);
    let mut out = entries();
    for round in 0..3 {
        assert_eq!(cq.trywait(&dom), Ok(()), "round {round}: nothing queued");
        assert!(!poll_readable(fd, 0), "round {round}: trywait drained it");
        thread::scope(|s| {
            s.spawn(|| {
                thread::sleep(Duration::from_millis(20));
                sender.send(&p, 1);
            });
            assert!(
                poll_readable(fd, 5_000),
                "round {round}: the completion made the descriptor readable"
            );
        });
        assert_eq!(cq.read(&dom, &mut out), Ok(1), "round {round}");
    }
}

on_every_nic!(
    sread_times_out_with_again_and_never_early,
    sread_is_woken_by_the_emulated_interrupt_of_its_vector,
    sread_returns_at_once_what_is_already_there,
    signal_from_another_thread_wakes_a_blocked_sread_with_again,
    signal_wakes_every_blocked_reader,
    threshold_waits_for_that_many_entries,
    cond_none_returns_with_the_first_entry_whatever_cond_says,
    a_software_error_entry_wakes_a_blocked_sread,
    yield_cq_spins_needs_no_vector_and_is_signalled,
    sread_and_signal_are_refused_where_the_spec_forbids_them,
    getwait_returns_the_wait_object_or_the_specs_error,
    every_invalid_wait_attribute_returns_the_specs_error,
    affinity_picks_the_vector_when_it_is_free_and_is_a_hint_otherwise,
    bind_refuses_a_queue_not_steered_to_the_cqs_vector,
    a_wait_set_over_two_cqs_wakes_on_either_and_on_signal,
    a_closed_member_leaves_the_set_and_its_vector_no_longer_wakes_it,
    fd_wait_gives_an_eventfd_the_emulated_interrupt_makes_readable,
    fd_wait_is_signalled_again_after_each_trywait,
);
