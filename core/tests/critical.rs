//! Critical errors of endpoints (fi_endpoint(3): "If an endpoint experiences a critical error,
//! it will transition back into a disabled state ... all pending operations are discarded";
//! "fi_enable may also be used to re-enable an endpoint that has been disabled as a result of
//! experiencing a critical error"), on the emulated 82576, 82574 and virtio-net: the device
//! resets itself, asks for a reset or is surprise-removed while receives are pending.

mod common;
use common::*;
use ringfab::av::{AvAttr, FiAddr};
use ringfab::cntr::{WaitObj, WAIT_QUANTUM};
use ringfab::cq::{CompletionQueue, CqAttr};
use ringfab::domain::Domain;
use ringfab::entry::{Data, DataEntry, ErrEntry, OpContext};
use ringfab::ep::{Endpoint, EpAttr};
use ringfab::flags::{BindFlags, CompletionFlags};
use ringfab::hal::queue::STALL_POLLS;
use ringfab::hal::{Nic, QueueFault};
use ringfab::mr::{Buf, MemoryRegion};
use ringfab::proto::HEADER_LEN;
use ringfab::strerror::ProvError;
use ringfab::{Capacities, Error};
use ringfab_e1000e::E1000e;
use ringfab_emu::{
    CriticalFault, EmuE1000e, EmuNic, EmuVirtioNet, Kind, ModelConfig, VirtioNetModelConfig, Wire,
};
use ringfab_virtio_net::VirtioNet;
use std::time::{Duration, Instant};

const D: usize = 64;
const BUF: usize = 2048;
const CQ_SIZE: usize = 256;
/// The context B's endpoint is opened with (`fi_endpoint`'s `context`).
const EP_B_CONTEXT: OpContext = OpContext(0xE0B);

/// What one side's domain holds: two hardware queues, `cqs` CQs of `CQ_SIZE` entries, one MR
/// and one AV of 2 addresses.
fn caps(cqs: usize) -> Capacities {
    Capacities {
        queues: 2,
        cqs,
        cq_size: CQ_SIZE,
        mrs: 1,
        avs: 1,
        av_entries: 2,
    }
}

/// Reads `cq` (of domain `d`) until something other than `Again` comes back, driving the wire;
/// the bound is a count of reads (enough for several stall checks), never a time.
fn read_until<'d, N: Nic>(
    wire: &Wire,
    d: &'d Domain<'_, N, D>,
    cq: &CompletionQueue<N, Data>,
) -> Result<(DataEntry, Option<Buf<'d>>), Error> {
    for _ in 0..4 * STALL_POLLS {
        wire.run_until_idle();
        let mut e = [DataEntry::default(); 1];
        let mut src = [FiAddr::NOTAVAIL; 1];
        let mut bufs = [None];
        match cq.read_owned(d, &mut e, &mut src, &mut bufs) {
            Ok(1) => return Ok((e[0], bufs[0].take())),
            Err(Error::Again) => continue,
            Ok(n) => panic!("read {n} entries into one"),
            Err(e) => return Err(e),
        }
    }
    Err(Error::Again)
}

/// One message from `from` to `to`, each given with its domain (`dest` names `to` in `from`'s
/// AV): the receive completes with its length and its buffer, the send completes.
#[allow(clippy::too_many_arguments, reason = "a test's two sides")]
fn message<N: Nic>(
    wire: &Wire,
    (d_from, from, mr_from, cq_from): (
        &Domain<'_, N, D>,
        &Endpoint,
        &MemoryRegion,
        &CompletionQueue<N, Data>,
    ),
    (d_to, to, mr_to, cq_to): (
        &Domain<'_, N, D>,
        &Endpoint,
        &MemoryRegion,
        &CompletionQueue<N, Data>,
    ),
    dest: FiAddr,
    len: usize,
) {
    to.recv(d_to, mr_to.alloc(d_to, BUF).unwrap(), OpContext(0x100))
        .unwrap();
    let mut buf = mr_from.alloc(d_from, BUF).unwrap();
    buf.write(HEADER_LEN, &[0x5a; 32][..len.min(32)]).unwrap();
    from.send(d_from, buf, len, dest, OpContext(0x200)).unwrap();
    let (e, buf) = read_until(wire, d_to, cq_to).unwrap();
    assert_eq!((e.op_context, e.len), (OpContext(0x100), len));
    assert!(buf.is_some(), "the receive buffer comes back");
    let (e, buf) = read_until(wire, d_from, cq_from).unwrap();
    assert_eq!(e.op_context, OpContext(0x200));
    assert!(buf.is_some(), "the send buffer comes back");
}

/// The critical-error walk on two brought-up NICs of one kind: B has four receives pending
/// when `fault` hits its device. Checks the report, the discarded operations, the state
/// after, and — unless the device was removed — that `enable` brings the endpoint back and
/// traffic flows both ways again.
fn critical_walk<K: Kind, N: Nic>(
    wire: &Wire,
    dev_b: &EmuNic<K>,
    nic_a: &N,
    nic_b: &N,
    fault: CriticalFault,
    expect: QueueFault,
) {
    // One endpoint (two queues), one CQ, one MR and one AV of 2 addresses each.
    let da = Domain::<_, D>::with_capacities(nic_a, &caps(1));
    let db = Domain::<_, D>::with_capacities(nic_b, &caps(1));
    let attr = CqAttr {
        size: CQ_SIZE,
        ..CqAttr::default()
    };
    let cq_a = da.open_cq::<Data>(&attr).unwrap();
    let mut cq_b = db.open_cq::<Data>(&attr).unwrap();
    let av_a = da.open_av(&AvAttr::default()).unwrap();
    let av_b = db.open_av(&AvAttr::default()).unwrap();
    let mut ep_a = da.endpoint(&EpAttr::default()).unwrap();
    let mut ep_b = db
        .endpoint(&EpAttr {
            context: EP_B_CONTEXT,
            ..EpAttr::default()
        })
        .unwrap();
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
    let mr_a = da.register(memory(16 * BUF)).unwrap();
    let mr_b = db.register(memory(16 * BUF)).unwrap();
    let a = (&da, &ep_a, &mr_a, &cq_a);

    // Traffic, then four receives left pending on B when its device fails.
    message(wire, a, (&db, &ep_b, &mr_b, &cq_b), to_b[0], 20);
    for i in 0..4 {
        ep_b.recv(&db, mr_b.alloc(&db, BUF).unwrap(), OpContext(i))
            .unwrap();
    }
    assert_eq!(mr_b.outstanding(&db), 4);
    dev_b.inject_critical(fault);

    // Reported once, on the bound CQ, as an error entry naming the fault.
    assert_eq!(read_until(wire, &db, &cq_b).err(), Some(Error::Avail));
    let mut entry = ErrEntry::default();
    let mut data = [0u8; 8];
    let (_, buf) = cq_b
        .readerr_owned(&db, &mut entry, Some(&mut data), 0)
        .unwrap();
    assert!(buf.is_none(), "the report is of no operation");
    assert_eq!(entry.err, 5, "FI_EIO");
    assert_eq!(
        entry.op_context, EP_B_CONTEXT,
        "no operation's: the endpoint's context (fi_endpoint(3) NOTES)"
    );
    assert_eq!(entry.flags, CompletionFlags::RECV | CompletionFlags::MSG);
    assert_eq!(
        ProvError::decode(entry.prov_errno, &data[..entry.err_data_size]),
        Some(ProvError::QueueFault(expect))
    );
    // The pending receives were discarded: no completion for them, their buffers back in
    // the region, their credits back in the CQ.
    assert_eq!(read_until(wire, &db, &cq_b).err(), Some(Error::Again));
    assert_eq!(
        mr_b.outstanding(&db),
        0,
        "discarded buffers went back to the region"
    );
    assert_eq!(cq_b.credits(&db), CQ_SIZE, "nothing is owed any more");

    // Disabled: every data operation is OpBadState (the buffer comes back with it).
    assert!(!ep_b.is_enabled(&db));
    assert_eq!(ep_b.fault(&db), Some(expect));
    let (e, _) = ep_b
        .recv(&db, mr_b.alloc(&db, BUF).unwrap(), OpContext(9))
        .unwrap_err();
    assert_eq!(e, Error::OpBadState);
    let (e, _) = ep_b
        .send(&db, mr_b.alloc(&db, BUF).unwrap(), 8, to_a[0], OpContext(9))
        .unwrap_err();
    assert_eq!(e, Error::OpBadState);
    assert_eq!(ep_b.inject(&db, b"x", to_a[0]), Err(Error::OpBadState));
    assert_eq!(ep_b.progress(&db), Err(Error::OpBadState));
    assert_eq!(ep_b.rx_size_left(&db), Err(Error::OpBadState));
    let alias = ep_b.alias(BindFlags::RECV, Default::default()).unwrap();
    let (e, _) = alias
        .recv(&db, mr_b.alloc(&db, BUF).unwrap(), OpContext(9))
        .unwrap_err();
    assert_eq!(e, Error::OpBadState, "aliases share the endpoint's state");
    assert_eq!(
        read_until(wire, &db, &cq_b).err(),
        Some(Error::Again),
        "the transmit queue was discarded without a second report"
    );

    if expect == QueueFault::Removed {
        let gone = Error::Device(ringfab::hal::Error::DeviceRemoved);
        assert_eq!(ep_b.enable(&db), Err(gone));
        assert!(!ep_b.is_enabled(&db));
        assert_eq!(
            ep_b.enable(&db),
            Err(gone),
            "still gone, still a clear error"
        );
        return;
    }

    // fi_enable brings it back; traffic flows both ways.
    ep_b.enable(&db).unwrap();
    assert!(ep_b.is_enabled(&db));
    assert_eq!(ep_b.fault(&db), None);
    assert_eq!(
        ep_b.enable(&db),
        Err(Error::OpBadState),
        "enabled once is enough"
    );
    let b = (&db, &ep_b, &mr_b, &cq_b);
    message(wire, a, b, to_b[0], 24);
    message(wire, b, a, to_a[0], 28);
    assert_eq!(mr_b.outstanding(&db), 0);
    assert_eq!(cq_b.credits(&db), CQ_SIZE);
}

#[test]
fn igb_a_device_reset_disables_the_endpoint_discards_its_operations_and_enable_recovers_it() {
    let p = pair();
    critical_walk(
        &p.wire,
        &p.b,
        &p.nic_a,
        &p.nic_b,
        CriticalFault::Reset,
        QueueFault::Reset,
    );
}

#[test]
fn igb_a_queue_disabled_by_the_device_disables_the_endpoint_and_enable_recovers_it() {
    let p = pair();
    critical_walk(
        &p.wire,
        &p.b,
        &p.nic_a,
        &p.nic_b,
        CriticalFault::DisableQueue(ringfab_emu::Ring::Rx(0)),
        QueueFault::Disabled,
    );
}

#[test]
fn igb_a_removed_device_disables_the_endpoint_and_enable_says_it_is_gone() {
    let p = pair();
    critical_walk(
        &p.wire,
        &p.b,
        &p.nic_a,
        &p.nic_b,
        CriticalFault::SurpriseRemoval,
        QueueFault::Removed,
    );
}

fn e1000e_pair() -> (Wire, EmuE1000e, E1000e<ringfab_emu::EmuPlatform>, EmuE1000e) {
    let wire = Wire::new();
    let dev = |mac| {
        let mut c = ModelConfig::default();
        c.mac = mac;
        let d = EmuE1000e::new(c);
        d.connect(&wire);
        d
    };
    let (a, b) = (dev(MAC_A), dev(MAC_B));
    let nic_a = E1000e::new(a.platform()).unwrap();
    (wire, a, nic_a, b)
}

#[test]
fn e1000e_a_device_reset_disables_the_endpoint_and_enable_recovers_it() {
    let (wire, _a, nic_a, b) = e1000e_pair();
    let nic_b = E1000e::new(b.platform()).unwrap();
    critical_walk(
        &wire,
        &b,
        &nic_a,
        &nic_b,
        CriticalFault::Reset,
        QueueFault::Reset,
    );
}

#[test]
fn virtio_net_needs_reset_disables_the_endpoint_and_enable_resets_the_device() {
    let wire = Wire::new();
    let dev = |mac| {
        let mut c = VirtioNetModelConfig::default();
        c.mac = mac;
        let d = EmuVirtioNet::new(c);
        d.connect(&wire);
        d
    };
    let (a, b) = (dev(MAC_A), dev(MAC_B));
    let nic_a = VirtioNet::new(a.platform()).unwrap();
    let nic_b = VirtioNet::new(b.platform()).unwrap();
    critical_walk(
        &wire,
        &b,
        &nic_a,
        &nic_b,
        CriticalFault::NeedsReset,
        QueueFault::NeedsReset,
    );
}

#[test]
fn a_scalable_endpoints_receive_context_is_disabled_and_reenabled_alone() {
    let p = pair();
    // Two contexts (two queues), two CQs, one MR and one AV of 2 addresses.
    let db = Domain::<_, D>::with_capacities(&p.nic_b, &caps(2));
    let attr = CqAttr {
        size: CQ_SIZE,
        ..CqAttr::default()
    };
    let mut cq_rx = db.open_cq::<Data>(&attr).unwrap();
    let cq_tx = db.open_cq::<Data>(&attr).unwrap();
    let av = db.open_av(&AvAttr::default()).unwrap();
    let mut sep = db.scalable_endpoint(&Default::default()).unwrap();
    sep.bind_av(&db, &av).unwrap();
    let ctx_attr = Default::default();
    let mut rx = sep.rx_context(&db, 0, &ctx_attr).unwrap();
    let mut tx = sep.tx_context(&db, 0, &ctx_attr).unwrap();
    rx.bind_cq(&db, &cq_rx, BindFlags::RECV).unwrap();
    tx.bind_cq(&db, &cq_tx, BindFlags::TRANSMIT).unwrap();
    rx.enable(&db).unwrap();
    tx.enable(&db).unwrap();
    let mr = db.register(memory(8 * BUF)).unwrap();
    rx.recv(&db, mr.alloc(&db, BUF).unwrap(), OpContext(1))
        .unwrap();
    p.b.inject_critical(CriticalFault::DisableQueue(ringfab_emu::Ring::Rx(0)));
    assert_eq!(read_until(&p.wire, &db, &cq_rx).err(), Some(Error::Avail));
    let mut entry = ErrEntry::default();
    cq_rx.readerr(&db, &mut entry, None, 0).unwrap();
    assert_eq!(entry.prov_errno, 8);
    assert!(!rx.is_enabled(&db));
    assert_eq!(mr.outstanding(&db), 0);
    assert!(
        tx.is_enabled(&db),
        "the transmit context has a queue of its own"
    );
    rx.enable(&db).unwrap();
    rx.recv(&db, mr.alloc(&db, BUF).unwrap(), OpContext(2))
        .unwrap();
    // The 82576's ring holds D - 1 (one descriptor stays empty); one is posted.
    assert_eq!(rx.rx_size_left(&db), Ok(D - 2));
}

/// A reader blocked in `sread` when the device is surprise-removed: no interrupt will ever come,
/// and the reader polls once per `WAIT_QUANTUM`, too rarely for the driver's stall check (one
/// device check per `STALL_POLLS` empty polls: 2.56 s), so the blocked reader checks the device
/// itself every tenth empty wake-up and returns with the `FI_EIO` entry at the head (`Avail`).
/// Its timeout is three quarters of the stall check's period: without its own check it would
/// time out (`Again`) first.
#[test]
fn a_reader_blocked_in_sread_is_woken_when_the_device_is_removed() {
    let p = pair();
    // One endpoint (two queues), one CQ, one MR and one AV of 2 addresses.
    let db = Domain::<_, D>::with_capacities(&p.nic_b, &caps(1));
    let attr = CqAttr {
        size: CQ_SIZE,
        wait_obj: WaitObj::Unspec,
        ..CqAttr::default()
    };
    let mut cq = db.open_cq::<Data>(&attr).unwrap();
    let av = db.open_av(&AvAttr::default()).unwrap();
    let mut ep = db
        .endpoint(&EpAttr {
            context: EP_B_CONTEXT,
            ..EpAttr::default()
        })
        .unwrap();
    ep.bind_cq(&db, &cq, BindFlags::TRANSMIT | BindFlags::RECV)
        .unwrap();
    ep.bind_av(&db, &av).unwrap();
    ep.enable(&db).unwrap();
    let mr = db.register(memory(4 * BUF)).unwrap();
    for i in 0..2 {
        ep.recv(&db, mr.alloc(&db, BUF).unwrap(), OpContext(i))
            .unwrap();
    }

    let got = std::thread::scope(|s| {
        let reader = s.spawn(|| {
            let mut out = [DataEntry::default(); 4];
            let stall_period = WAIT_QUANTUM * STALL_POLLS;
            cq.sread(&db, &mut out, None, Some(stall_period * 3 / 4), &clock())
        });
        let start = Instant::now();
        while cq.sleepers(&db) < 1 {
            assert!(start.elapsed() < Duration::from_secs(10), "never blocked");
            std::thread::yield_now();
        }
        p.b.inject_critical(CriticalFault::SurpriseRemoval);
        reader.join().unwrap()
    });
    assert_eq!(
        got,
        Err(Error::Avail),
        "woken by the fault, not by the timeout"
    );
    let mut e = ErrEntry::default();
    cq.readerr(&db, &mut e, None, 0).unwrap();
    assert_eq!(
        (e.err, e.prov_errno, e.op_context),
        (5, 8, EP_B_CONTEXT),
        "FI_EIO, the queue-fault kind, the endpoint's context"
    );
    assert!(!ep.is_enabled(&db) || ep.fault(&db).is_some());
    assert_eq!(
        mr.outstanding(&db),
        0,
        "the pending receives were discarded"
    );
}
