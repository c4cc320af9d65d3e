//! Receive contexts fed by RSS (`SepAttr::rss`) and the UDP encapsulation it needs
//! (`Encap::Udp`), on emulated 82576s (four queue pairs, RSS over IPv4 and UDP ports) and
//! virtio-net with `rss=on`: flows spread over the receive contexts, each flow whole and in
//! order on one context; the redirection table follows the contexts enabled; frames of the
//! other encapsulation never reach the application; and the rules (UDP needed, a NIC with RSS,
//! not together with address steering).

mod common;
use common::*;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use ringfab::av::{AddressVector, AvAttr, FiAddr};
use ringfab::cq::{CompletionQueue, CqAttr};
use ringfab::domain::Domain;
use ringfab::entry::{Msg, MsgEntry, OpContext};
use ringfab::flags::BindFlags;
use ringfab::hal::{Error as HalError, Nic};
use ringfab::mr::{Buf, MemoryRegion};
use ringfab::proto::{Encap, MAX_HEADER_LEN};
use ringfab::sep::{Context, CtxAttr, SepAttr};
use ringfab::{Capacities, Error};
use ringfab_emu::{EmuVirtioNet, VirtioNetModelConfig, Wire};
use ringfab_igb::Igb;
use ringfab_virtio_net::VirtioNet;

const D: usize = 64;
const BUF: usize = 2048;
const CTX: u16 = 4;

/// The capacities of one domain of the RSS tests: 8 hardware queues, `cqs` CQs of up to 256
/// entries, one MR, one AV of 2 addresses.
fn rss_caps(cqs: usize) -> Capacities {
    Capacities {
        queues: 8,
        cqs,
        cq_size: 256,
        mrs: 1,
        avs: 1,
        av_entries: 2,
    }
}

fn cq_attr() -> CqAttr {
    CqAttr {
        size: 256,
        ..CqAttr::default()
    }
}

/// Four contexts each way, UDP; B's receive contexts fed by RSS.
fn udp_sep(ctx: u16, rss: bool) -> SepAttr {
    SepAttr {
        tx_ctx_cnt: ctx,
        rx_ctx_cnt: ctx,
        encap: Encap::Udp,
        rss,
        ..SepAttr::default()
    }
}

/// A message's tag: the flow (sending context) and its sequence number.
fn tag(flow: usize, seq: usize) -> [u8; 8] {
    (((flow as u64) << 32) | seq as u64).to_le_bytes()
}

fn untag(buf: &Buf<'_>) -> (usize, usize) {
    let mut t = [0u8; 8];
    buf.read(MAX_HEADER_LEN, &mut t).unwrap();
    let t = u64::from_le_bytes(t);
    ((t >> 32) as usize, (t & 0xffff_ffff) as usize)
}

#[test]
fn four_flows_spread_over_four_rss_fed_receive_contexts_each_whole_and_in_order() {
    let wire = Wire::new();
    let (dev_a, dev_b) = (device(MAC_A, &wire), device(MAC_B, &wire));
    let nic_a = Igb::new(dev_a.platform()).unwrap();
    let nic_b = Igb::new(dev_b.platform()).unwrap();
    let da = Domain::<_, D>::with_capacities(&nic_a, &rss_caps(4));
    let db = Domain::<_, D>::with_capacities(&nic_b, &rss_caps(4));
    let av_a = da.open_av(&AvAttr::default()).unwrap();
    let av_b = db.open_av(&AvAttr::default()).unwrap();
    let mut sep_a = da.scalable_endpoint(&udp_sep(CTX, false)).unwrap();
    let mut sep_b = db.scalable_endpoint(&udp_sep(CTX, true)).unwrap();
    sep_a.bind_av(&da, &av_a).unwrap();
    sep_b.bind_av(&db, &av_b).unwrap();
    let mut to_b = [FiAddr::NOTAVAIL];
    av_a.insert(&da, &[sep_b.name(&db)], &mut to_b).unwrap();
    let mut to_a = [FiAddr::NOTAVAIL];
    av_b.insert(&db, &[sep_a.name(&da)], &mut to_a).unwrap();
    let cqs_a: Vec<_> = (0..CTX)
        .map(|_| da.open_cq::<Msg>(&cq_attr()).unwrap())
        .collect();
    let cqs_b: Vec<_> = (0..CTX)
        .map(|_| db.open_cq::<Msg>(&cq_attr()).unwrap())
        .collect();
    let (mut txs, mut rxs) = (Vec::new(), Vec::new());
    for i in 0..CTX {
        let mut tx = sep_a.tx_context(&da, i, &CtxAttr::default()).unwrap();
        tx.bind_cq(&da, &cqs_a[usize::from(i)], BindFlags::TRANSMIT)
            .unwrap();
        tx.enable(&da).unwrap();
        txs.push(tx);
        let mut rx = sep_b.rx_context(&db, i, &CtxAttr::default()).unwrap();
        rx.bind_cq(&db, &cqs_b[usize::from(i)], BindFlags::RECV)
            .unwrap();
        rx.enable(&db).unwrap();
        assert_eq!(
            rx.name(),
            sep_b.name(&db),
            "RSS-fed contexts share one address"
        );
        rxs.push(rx);
    }
    let mr_a = da.register(memory(CTX as usize * 32 * BUF)).unwrap();
    let mr_b = db.register(memory(CTX as usize * 48 * BUF)).unwrap();
    for (i, rx) in rxs.iter().enumerate() {
        for _ in 0..40 {
            rx.recv(&db, mr_b.alloc(&db, BUF).unwrap(), OpContext(i))
                .unwrap();
        }
    }

    const MESSAGES: usize = 1500;
    // Flows × window stays under one context's 40 buffers: every flow may hash to one context.
    const WINDOW: usize = 8;
    let received: Vec<AtomicUsize> = (0..CTX).map(|_| AtomicUsize::new(0)).collect();
    let total = AtomicUsize::new(0);
    // Which receive context each flow reached, and how many frames each context took.
    let landed: Mutex<HashMap<usize, usize>> = Mutex::new(HashMap::new());
    let per_context: Vec<AtomicUsize> = (0..CTX).map(|_| AtomicUsize::new(0)).collect();
    let pump = wire.spawn_pump(Duration::from_micros(50));
    let (da, db) = (&da, &db);
    std::thread::scope(|s| {
        for (i, (tx, cq)) in txs.into_iter().zip(&cqs_a).enumerate() {
            let pool: Vec<Buf<'_>> = (0..24).map(|_| mr_a.alloc(da, BUF).unwrap()).collect();
            let received = &received[i];
            let dest = to_b[0];
            s.spawn(move || send_windowed(da, &tx, cq, pool, dest, i, MESSAGES, WINDOW, received));
        }
        for (c, (rx, cq)) in rxs.into_iter().zip(&cqs_b).enumerate() {
            let (received, total, landed, mine) = (&received, &total, &landed, &per_context[c]);
            s.spawn(move || {
                let mut e = [MsgEntry::default(); 8];
                let mut src = [FiAddr::NOTAVAIL; 8];
                let mut bufs: [Option<Buf<'_>>; 8] = Default::default();
                let mut next: HashMap<usize, usize> = HashMap::new();
                let deadline = Instant::now() + Duration::from_secs(60);
                while total.load(Ordering::Acquire) < CTX as usize * MESSAGES {
                    assert!(Instant::now() < deadline, "context {c}: stalled");
                    let n = match cq.read_owned(db, &mut e, &mut src, &mut bufs) {
                        Ok(n) => n,
                        Err(Error::Again) => {
                            std::thread::yield_now();
                            continue;
                        }
                        Err(err) => panic!("context {c}: {err}"),
                    };
                    for k in 0..n {
                        assert_eq!(src[k], to_a[0], "FI_SOURCE: A's name");
                        assert_eq!(e[k].len, 8);
                        let buf = bufs[k].take().unwrap();
                        let (flow, seq) = untag(&buf);
                        let at = *landed.lock().unwrap().entry(flow).or_insert(c);
                        assert_eq!(at, c, "flow {flow} reached contexts {at} and {c}");
                        let expect = next.entry(flow).or_insert(0);
                        assert_eq!(
                            seq, *expect,
                            "flow {flow} on context {c}: lost or reordered"
                        );
                        *expect += 1;
                        received[flow].fetch_add(1, Ordering::AcqRel);
                        mine.fetch_add(1, Ordering::AcqRel);
                        total.fetch_add(1, Ordering::AcqRel);
                        rx.recv(db, buf, OpContext(c)).unwrap();
                    }
                }
            });
        }
    });
    drop(pump);
    for (i, r) in received.iter().enumerate() {
        assert_eq!(r.load(Ordering::Acquire), MESSAGES, "flow {i}");
    }
    let spread: Vec<usize> = per_context
        .iter()
        .map(|c| c.load(Ordering::Acquire))
        .collect();
    assert!(
        spread.iter().filter(|&&n| n > 0).count() >= 2,
        "RSS spread the four flows: {spread:?}"
    );
    assert_eq!(nic_b.stats().rx_missed, 0);
}

/// A domain's objects in the single-threaded RSS tests: its AV, `cqs` CQs (A's transmit
/// contexts share one, B's receive contexts have one each) and a registered region.
fn open_side<N: Nic>(
    d: &Domain<'_, N, D>,
    cqs: usize,
) -> (AddressVector, Vec<CompletionQueue<N, Msg>>, MemoryRegion) {
    let av = d.open_av(&AvAttr::default()).unwrap();
    let cqs = (0..cqs)
        .map(|_| d.open_cq::<Msg>(&cq_attr()).unwrap())
        .collect();
    let mr = d.register(memory(64 * BUF)).unwrap();
    (av, cqs, mr)
}

/// Transmit contexts `0..n` of `sep` (of domain `d`), bound to `cq` and enabled.
fn tx_contexts<'e, N: Nic>(
    d: &Domain<'_, N, D>,
    sep: &'e ringfab::sep::ScalableEndpoint,
    n: u16,
    cq: &CompletionQueue<N, Msg>,
) -> Vec<Context<'e>> {
    (0..n)
        .map(|i| {
            let mut tx = sep.tx_context(d, i, &CtxAttr::default()).unwrap();
            tx.bind_cq(d, cq, BindFlags::TRANSMIT).unwrap();
            tx.enable(d).unwrap();
            tx
        })
        .collect()
}

/// Enables receive context `c` (of domain `d`) and posts 8 receives to it from `mr`.
fn listen<N: Nic>(d: &Domain<'_, N, D>, rx: &mut Context<'_>, mr: &MemoryRegion, c: usize) {
    rx.enable(d).unwrap();
    for _ in 0..8 {
        rx.recv(d, mr.alloc(d, BUF).unwrap(), OpContext(c)).unwrap();
    }
}

/// A receive context, or `None` once closed.
type Slot<'c> = Option<Context<'c>>;

/// Sends one tagged message from each of `txs` (of domain `da`, buffers from `mr`) to
/// `dest`, drives the wire, and returns for each flow the receive context (of domain `db`)
/// that got it (the buffer goes back to that context).
#[allow(
    clippy::too_many_arguments,
    reason = "two domains and their objects, spelled out"
)]
fn one_per_flow<N: Nic>(
    wire: &Wire,
    da: &Domain<'_, N, D>,
    txs: &[Context<'_>],
    db: &Domain<'_, N, D>,
    rxs: &[Slot<'_>],
    cqs: &[CompletionQueue<N, Msg>],
    mr: &MemoryRegion,
    dest: FiAddr,
) -> Vec<Option<usize>> {
    for (i, tx) in txs.iter().enumerate() {
        let mut buf = mr.alloc(da, BUF).unwrap();
        buf.write(tx.payload_offset(), &tag(i, 0)).unwrap();
        tx.send(da, buf, 8, dest, OpContext(i)).unwrap();
    }
    wire.run_until_idle();
    let mut at = vec![None; txs.len()];
    for (c, cq) in cqs.iter().enumerate() {
        let mut e = [MsgEntry::default(); 8];
        let mut src = [FiAddr::NOTAVAIL; 8];
        let mut bufs: [Option<Buf<'_>>; 8] = Default::default();
        while let Ok(n) = cq.read_owned(db, &mut e, &mut src, &mut bufs) {
            for b in bufs[..n].iter_mut() {
                let buf = b.take().unwrap();
                let (flow, _) = untag(&buf);
                assert_eq!(at[flow], None, "flow {flow} arrived twice");
                at[flow] = Some(c);
                let rx = rxs[c].as_ref().expect("a frame for a closed context");
                rx.recv(db, buf, OpContext(c)).unwrap();
            }
        }
    }
    at
}

#[test]
fn the_redirection_table_follows_the_enabled_receive_contexts_and_goes_with_the_endpoint() {
    let wire = Wire::new();
    let (dev_a, dev_b) = (device(MAC_A, &wire), device(MAC_B, &wire));
    let nic_a = Igb::new(dev_a.platform()).unwrap();
    let nic_b = Igb::new(dev_b.platform()).unwrap();
    let da = Domain::<_, D>::with_capacities(&nic_a, &rss_caps(1));
    let db = Domain::<_, D>::with_capacities(&nic_b, &rss_caps(4));
    let (av_a, cqs_a, mr_a) = open_side(&da, 1);
    let (av_b, cqs_b, mr_b) = open_side(&db, 4);
    let mut sep_a = da.scalable_endpoint(&udp_sep(CTX, false)).unwrap();
    sep_a.bind_av(&da, &av_a).unwrap();
    let txs = tx_contexts(&da, &sep_a, CTX, &cqs_a[0]);
    {
        let mut sep_b = db.scalable_endpoint(&udp_sep(CTX, true)).unwrap();
        sep_b.bind_av(&db, &av_b).unwrap();
        let mut to_b = [FiAddr::NOTAVAIL];
        av_a.insert(&da, &[sep_b.name(&db)], &mut to_b).unwrap();
        let mut rxs: Vec<_> = (0..CTX)
            .map(|i| {
                let mut rx = sep_b.rx_context(&db, i, &CtxAttr::default()).unwrap();
                rx.bind_cq(&db, &cqs_b[usize::from(i)], BindFlags::RECV)
                    .unwrap();
                Some(rx)
            })
            .collect();
        // Opened but not enabled, a context gets nothing; only context 2 enabled: every flow
        // reaches it.
        listen(&db, rxs[2].as_mut().unwrap(), &mr_b, 2);
        let at = one_per_flow(&wire, &da, &txs, &db, &rxs, &cqs_b, &mr_a, to_b[0]);
        assert_eq!(at, vec![Some(2); 4]);
        // Contexts 0 and 2: every flow reaches one of them.
        listen(&db, rxs[0].as_mut().unwrap(), &mr_b, 0);
        for _ in 0..3 {
            let at = one_per_flow(&wire, &da, &txs, &db, &rxs, &cqs_b, &mr_a, to_b[0]);
            assert!(at.iter().all(|c| matches!(c, Some(0) | Some(2))), "{at:?}");
        }
        // Context 2 closed: everything goes to 0.
        closed(rxs[2].take().unwrap().close(&db));
        let at = one_per_flow(&wire, &da, &txs, &db, &rxs, &cqs_b, &mr_a, to_b[0]);
        assert_eq!(at, vec![Some(0); 4]);
        // While RSS is programmed the NIC refuses to steer by address.
        assert_eq!(
            nic_b.set_rx_queue_mac(1, Some(ringfab::proto::context_mac(MAC_B, 1))),
            Err(HalError::Unsupported)
        );
        for rx in rxs.into_iter().flatten() {
            closed(rx.close(&db));
        }
        closed(sep_b.close(&db));
    }
    // The endpoint is closed and RSS with it: address steering (a named receive context)
    // works.
    let mut named = db
        .scalable_endpoint(&SepAttr {
            rx_ctx_cnt: 2,
            ..SepAttr::default()
        })
        .unwrap();
    named.bind_av(&db, &av_b).unwrap();
    assert!(named.rx_context(&db, 1, &CtxAttr::default()).is_ok());
}

#[test]
fn virtio_net_with_rss_feeds_the_enabled_receive_contexts() {
    let wire = Wire::new();
    let config = |mac| {
        let mut c = VirtioNetModelConfig::default();
        c.mac = mac;
        c.queue_pairs = 2;
        c.rss = true;
        c
    };
    let (a, b) = (
        EmuVirtioNet::new(config(MAC_A)),
        EmuVirtioNet::new(config(MAC_B)),
    );
    a.connect(&wire);
    b.connect(&wire);
    let (nic_a, nic_b) = (
        VirtioNet::new(a.platform()).unwrap(),
        VirtioNet::new(b.platform()).unwrap(),
    );
    type V = VirtioNet<ringfab_emu::EmuPlatform>;
    let da = Domain::<V, D>::with_capacities(&nic_a, &rss_caps(1));
    let db = Domain::<V, D>::with_capacities(&nic_b, &rss_caps(2));
    let (av_a, cqs_a, mr_a) = open_side(&da, 1);
    let (av_b, cqs_b, mr_b) = open_side(&db, 2);
    // A sends only; virtio-net has no address steering for named receive contexts.
    let sender = SepAttr {
        rx_ctx_cnt: 1,
        ..udp_sep(2, false)
    };
    let mut sep_a = da.scalable_endpoint(&sender).unwrap();
    let mut sep_b = db.scalable_endpoint(&udp_sep(2, true)).unwrap();
    sep_a.bind_av(&da, &av_a).unwrap();
    sep_b.bind_av(&db, &av_b).unwrap();
    let mut to_b = [FiAddr::NOTAVAIL];
    av_a.insert(&da, &[sep_b.name(&db)], &mut to_b).unwrap();
    let txs = tx_contexts(&da, &sep_a, 2, &cqs_a[0]);
    let mut rxs: Vec<_> = (0..2)
        .map(|i| {
            let mut rx = sep_b.rx_context(&db, i, &CtxAttr::default()).unwrap();
            rx.bind_cq(&db, &cqs_b[usize::from(i)], BindFlags::RECV)
                .unwrap();
            Some(rx)
        })
        .collect();
    for c in [1, 0] {
        listen(&db, rxs[c].as_mut().unwrap(), &mr_b, c);
        if c == 1 {
            // Only context 1 enabled: both flows reach it.
            let at = one_per_flow(&wire, &da, &txs, &db, &rxs, &cqs_b, &mr_a, to_b[0]);
            assert_eq!(at, vec![Some(1); 2]);
        }
    }
    for _ in 0..3 {
        let at = one_per_flow(&wire, &da, &txs, &db, &rxs, &cqs_b, &mr_a, to_b[0]);
        assert!(at.iter().all(Option::is_some), "every flow arrives: {at:?}");
    }
}

#[test]
fn rss_needs_udp_encapsulation_a_nic_with_rss_and_no_address_steering() {
    let wire = Wire::new();
    let dev = device(MAC_A, &wire);
    let nic = Igb::new(dev.platform()).unwrap();
    let d = Domain::<_, D>::with_capacities(
        &nic,
        &Capacities {
            queues: 8,
            cqs: 1,
            ..Capacities::DEFAULT
        },
    );
    let ethernet_rss = SepAttr {
        encap: Encap::Ethernet,
        ..udp_sep(2, true)
    };
    assert_eq!(
        d.scalable_endpoint(&ethernet_rss).err(),
        Some(Error::Inval),
        "RSS cannot hash ringfab's own EtherType"
    );
    // The UDP header is 58 bytes: a receive buffer must be longer.
    let short = SepAttr {
        rx_buf_len: MAX_HEADER_LEN as u32,
        ..udp_sep(2, true)
    };
    assert_eq!(d.scalable_endpoint(&short).err(), Some(Error::Inval));
    let short = ringfab::ep::EpAttr {
        rx_buf_len: MAX_HEADER_LEN as u32,
        encap: Encap::Udp,
        ..ringfab::ep::EpAttr::default()
    };
    assert_eq!(d.endpoint(&short).err(), Some(Error::Inval));

    // A named receive context steers by address: the NIC takes no RSS meanwhile.
    let av = d.open_av(&AvAttr::default()).unwrap();
    {
        let mut named = d
            .scalable_endpoint(&SepAttr {
                rx_ctx_cnt: 2,
                ..SepAttr::default()
            })
            .unwrap();
        named.bind_av(&d, &av).unwrap();
        let rx1 = named.rx_context(&d, 1, &CtxAttr::default()).unwrap();
        assert_eq!(
            d.scalable_endpoint(&udp_sep(2, true)).err(),
            Some(Error::Device(HalError::Unsupported))
        );
        closed(rx1.close(&d));
        closed(named.close(&d));
    }
    assert!(
        d.scalable_endpoint(&udp_sep(2, true)).is_ok(),
        "once the address is withdrawn"
    );

    // A NIC without RSS (virtio-net without `rss=on`).
    let mut config = VirtioNetModelConfig::default();
    config.mac = MAC_B;
    config.queue_pairs = 2;
    let v = EmuVirtioNet::new(config);
    let vnic = VirtioNet::new(v.platform()).unwrap();
    assert!(vnic.capabilities().rss.is_none());
    let vd = Domain::<_, D>::with_capacities(
        &vnic,
        &Capacities {
            queues: 2,
            cqs: 1,
            ..Capacities::DEFAULT
        },
    );
    assert_eq!(
        vd.scalable_endpoint(&udp_sep(2, true)).err(),
        Some(Error::OpNotSupp)
    );
}

/// A handle dropped without `close` leaves its object to the domain's end (module `domain`):
/// what such objects set on the NIC beyond their queues — a receive context's own address,
/// RSS — must go with the domain too, or the next user of the NIC inherits it (here: RSS is
/// refused while the NIC steers by address).
#[test]
fn the_domain_s_end_withdraws_what_objects_left_open_set_on_the_nic() {
    let wire = Wire::new();
    let dev = device(MAC_A, &wire);
    let nic = Igb::new(dev.platform()).unwrap();
    let caps = Capacities {
        queues: 8,
        cqs: 1,
        ..Capacities::DEFAULT
    };
    {
        let d = Domain::<_, D>::with_capacities(&nic, &caps);
        let av = d.open_av(&AvAttr::default()).unwrap();
        let mut named = d
            .scalable_endpoint(&SepAttr {
                rx_ctx_cnt: 2,
                ..SepAttr::default()
            })
            .unwrap();
        named.bind_av(&d, &av).unwrap();
        // Queue 1 has an address of its own now; the handles go without `close`, at the
        // end of the block, with the domain.
        let _rx1 = named.rx_context(&d, 1, &CtxAttr::default()).unwrap();
    }
    {
        let d = Domain::<_, D>::with_capacities(&nic, &caps);
        let mut fed = d
            .scalable_endpoint(&udp_sep(2, true))
            .expect("the address went with the domain, so the NIC takes RSS");
        let av = d.open_av(&AvAttr::default()).unwrap();
        fed.bind_av(&d, &av).unwrap();
        let mut rx0 = fed.rx_context(&d, 0, &CtxAttr::default()).unwrap();
        let cq = d.open_cq::<Msg>(&cq_attr()).unwrap();
        rx0.bind_cq(&d, &cq, BindFlags::RECV).unwrap();
        rx0.enable(&d).unwrap();
        // RSS is on, and the handles go without `close` again, with the domain at the end of
        // the block: the next domain must be able to steer by address.
    }
    let d = Domain::<_, D>::with_capacities(&nic, &caps);
    let av = d.open_av(&AvAttr::default()).unwrap();
    let mut named = d
        .scalable_endpoint(&SepAttr {
            rx_ctx_cnt: 2,
            ..SepAttr::default()
        })
        .expect("RSS went with the domain");
    named.bind_av(&d, &av).unwrap();
    assert!(named.rx_context(&d, 1, &CtxAttr::default()).is_ok());
}

#[test]
fn shared_contexts_take_endpoints_of_their_own_encapsulation_only() {
    use ringfab::ep::EpAttr;
    use ringfab::srx::SrxAttr;
    use ringfab::stx::StxAttr;
    let wire = Wire::new();
    let dev = device(MAC_A, &wire);
    let nic = Igb::new(dev.platform()).unwrap();
    let d = Domain::<_, D>::with_capacities(
        &nic,
        &Capacities {
            queues: 8,
            cqs: 1,
            ..Capacities::DEFAULT
        },
    );
    let stx = d
        .stx_context(&StxAttr {
            tx_queue: 1,
            encap: Encap::Udp,
            ..StxAttr::default()
        })
        .unwrap();
    let srx = d
        .srx_context(&SrxAttr {
            rx_queue: 0,
            encap: Encap::Udp,
            ..SrxAttr::default()
        })
        .unwrap();
    let mut eth = d.endpoint(&EpAttr::default()).unwrap();
    assert_eq!(eth.bind_stx(&d, &stx), Err(Error::Inval));
    assert_eq!(eth.bind_srx(&d, &srx), Err(Error::Inval));
    let mut udp = d
        .endpoint(&EpAttr {
            rx_queue: 2,
            encap: Encap::Udp,
            ..EpAttr::default()
        })
        .unwrap();
    assert_eq!(udp.bind_stx(&d, &stx), Ok(()));
    assert_eq!(udp.bind_srx(&d, &srx), Ok(()));
}

#[test]
fn a_frame_of_the_other_encapsulation_never_reaches_the_application() {
    use ringfab::ep::EpAttr;
    let p = pair();
    let caps = Capacities {
        queues: 4,
        ..rss_caps(1)
    };
    let da = Domain::<_, D>::with_capacities(&p.nic_a, &caps);
    let db = Domain::<_, D>::with_capacities(&p.nic_b, &caps);
    let av_a = da.open_av(&AvAttr::default()).unwrap();
    let av_b = db.open_av(&AvAttr::default()).unwrap();
    let cq_a = da.open_cq::<Msg>(&cq_attr()).unwrap();
    let cq_b = db.open_cq::<Msg>(&cq_attr()).unwrap();
    let mr_a = da.register(memory(16 * BUF)).unwrap();
    let mr_b = db.register(memory(16 * BUF)).unwrap();
    // A: an Ethernet endpoint on queue 0, a UDP one sending from queue 1. B: UDP on queue 0.
    let mut a_eth = da.endpoint(&EpAttr::default()).unwrap();
    let mut a_udp = da
        .endpoint(&EpAttr {
            tx_queue: 1,
            rx_queue: 1,
            encap: Encap::Udp,
            ..EpAttr::default()
        })
        .unwrap();
    let mut b = db
        .endpoint(&EpAttr {
            encap: Encap::Udp,
            ..EpAttr::default()
        })
        .unwrap();
    for ep in [&mut a_eth, &mut a_udp] {
        ep.bind_cq(&da, &cq_a, BindFlags::TRANSMIT | BindFlags::RECV)
            .unwrap();
        ep.bind_av(&da, &av_a).unwrap();
        ep.enable(&da).unwrap();
    }
    b.bind_cq(&db, &cq_b, BindFlags::TRANSMIT | BindFlags::RECV)
        .unwrap();
    b.bind_av(&db, &av_b).unwrap();
    b.enable(&db).unwrap();
    let mut to_b = [FiAddr::NOTAVAIL];
    av_a.insert(&da, &[b.name()], &mut to_b).unwrap();
    let mut to_a = [FiAddr::NOTAVAIL];
    av_b.insert(&db, &[a_eth.name()], &mut to_a).unwrap();
    let read = |d: &Domain<'_, Igb0, D>, cq: &CompletionQueue<Igb0, Msg>| {
        p.wire.run_until_idle();
        let mut got = Vec::new();
        let mut e = [MsgEntry::default(); 8];
        while let Ok(n) = cq.read(d, &mut e) {
            got.extend(e[..n].iter().map(|e| (e.op_context.0, e.len)));
        }
        got
    };

    b.recv(&db, mr_b.alloc(&db, BUF).unwrap(), OpContext(1))
        .unwrap();
    a_eth
        .send(
            &da,
            mr_a.alloc(&da, BUF).unwrap(),
            9,
            to_b[0],
            OpContext(10),
        )
        .unwrap();
    assert_eq!(read(&da, &cq_a), vec![(10, 0)], "the send itself completes");
    assert_eq!(
        read(&db, &cq_b),
        vec![],
        "an Ethernet frame is no UDP endpoint's"
    );
    assert_eq!(b.dropped_frames(&db), 1);
    a_udp
        .send(
            &da,
            mr_a.alloc(&da, BUF).unwrap(),
            7,
            to_b[0],
            OpContext(11),
        )
        .unwrap();
    assert_eq!(read(&da, &cq_a), vec![(11, 0)]);
    assert_eq!(
        read(&db, &cq_b),
        vec![(1, 7)],
        "the same receive takes the UDP frame"
    );

    // And the other way: B's UDP frame to A's Ethernet endpoint (context 0).
    a_eth
        .recv(&da, mr_a.alloc(&da, BUF).unwrap(), OpContext(2))
        .unwrap();
    b.send(
        &db,
        mr_b.alloc(&db, BUF).unwrap(),
        5,
        to_a[0],
        OpContext(12),
    )
    .unwrap();
    assert_eq!(read(&db, &cq_b), vec![(12, 0)]);
    assert_eq!(read(&da, &cq_a), vec![]);
    assert_eq!(a_eth.dropped_frames(&da), 1);
}

#[test]
fn a_shared_receive_context_s_address_goes_with_its_queue_whoever_closes_it_last() {
    use ringfab::ep::EpAttr;
    use ringfab::srx::SrxAttr;
    let wire = Wire::new();
    let dev = device(MAC_A, &wire);
    let nic = Igb::new(dev.platform()).unwrap();
    let d = Domain::<_, D>::with_capacities(
        &nic,
        &Capacities {
            mrs: 0,
            ..rss_caps(1)
        },
    );
    let av = d.open_av(&AvAttr::default()).unwrap();
    let cq = d.open_cq::<Msg>(&cq_attr()).unwrap();
    let srx = d
        .srx_context(&SrxAttr {
            rx_queue: 1,
            ..SrxAttr::default()
        })
        .unwrap();
    let mut ep = d
        .endpoint(&EpAttr {
            rx_queue: 5,
            ..EpAttr::default()
        })
        .unwrap();
    ep.bind_cq(&d, &cq, BindFlags::TRANSMIT | BindFlags::RECV)
        .unwrap();
    ep.bind_av(&d, &av).unwrap();
    ep.bind_srx(&d, &srx).unwrap();
    ep.enable(&d).unwrap();
    // Released with an endpoint bound: the queue and its address stay, so no RSS.
    srx.release(&d).unwrap();
    assert_eq!(
        d.scalable_endpoint(&udp_sep(2, true)).err(),
        Some(Error::Device(HalError::Unsupported))
    );
    // The last endpoint closes the queue, and the address goes with it.
    closed(ep.close(&d));
    assert!(d.scalable_endpoint(&udp_sep(2, true)).is_ok());
}
