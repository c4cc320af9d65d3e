//! The domain's tables: each, when used up, is an error that names it; tables come back when
//! their objects close; large tables live on the heap, not the stack; a `static`-style
//! [`Storage`] serves one domain; a CQ's format is stated once.

mod common;

use common::{memory, pair, Igb0};
use ringfab::av::AvAttr;
use ringfab::cq::{CqAttr, CqFormat};
use ringfab::domain::Domain;
use ringfab::entry::{Data, Msg};
use ringfab::ep::EpAttr;
use ringfab::{Capacities, Capacity, Error, Storage};

const D: usize = 64;

/// One of everything (two hardware queues: one endpoint), CQs of up to 16 entries, AVs of 4.
const ONE: Capacities = Capacities {
    queues: 2,
    cqs: 1,
    cq_size: 16,
    mrs: 1,
    avs: 1,
    av_entries: 4,
};

#[test]
fn each_used_up_table_is_an_error_that_names_it() {
    let p = pair();
    let d = Domain::<_, D>::with_capacities(&p.nic_a, &ONE);

    let _cq = d.open_cq::<Msg>(&CqAttr::default()).unwrap();
    assert_eq!(
        d.open_cq::<Msg>(&CqAttr::default()).err(),
        Some(Error::Full(Capacity::Cqs))
    );
    let _av = d.open_av(&AvAttr::default()).unwrap();
    assert_eq!(
        d.open_av(&AvAttr::default()).err(),
        Some(Error::Full(Capacity::Avs))
    );
    let _mr = d.register(memory(4096)).unwrap();
    assert_eq!(
        d.register(memory(4096)).err(),
        Some(Error::Full(Capacity::Mrs))
    );
    // An endpoint takes a transmit and a receive queue when it is enabled: the storage's two.
    let mut ep = d.endpoint(&EpAttr::default()).unwrap();
    ep.bind_cq(
        &d,
        &_cq,
        ringfab::flags::BindFlags::TRANSMIT | ringfab::flags::BindFlags::RECV,
    )
    .unwrap();
    ep.bind_av(&d, &_av).unwrap();
    ep.enable(&d).unwrap();
    let mut second = d
        .endpoint(&EpAttr {
            tx_queue: 1,
            rx_queue: 1,
            ..EpAttr::default()
        })
        .unwrap();
    second
        .bind_cq(
            &d,
            &_cq,
            ringfab::flags::BindFlags::TRANSMIT | ringfab::flags::BindFlags::RECV,
        )
        .unwrap();
    second.bind_av(&d, &_av).unwrap();
    assert_eq!(second.enable(&d), Err(Error::Full(Capacity::Queues)));

    // fi_errno: a table used up is FI_ENOMEM, and the message says which table.
    let full = Error::Full(Capacity::Cqs);
    assert_eq!(full.errno(), 12);
    assert!(full.to_string().contains("cqs"), "{full}");
}

#[test]
fn sizes_beyond_a_table_are_errors_that_name_it() {
    let p = pair();
    let d = Domain::<_, D>::with_capacities(&p.nic_a, &ONE);
    // cq_size is 16: a CQ of 17 entries has nowhere to keep what it may owe.
    assert_eq!(
        d.open_cq::<Msg>(&CqAttr {
            size: 17,
            ..CqAttr::default()
        })
        .err(),
        Some(Error::Full(Capacity::CqSize))
    );
    // The refusal left the slot free: a CQ of 16 opens, and size 0 is min(1024, cq_size).
    let cq = d
        .open_cq::<Msg>(&CqAttr {
            size: 16,
            ..CqAttr::default()
        })
        .unwrap();
    cq.close(&d).map_err(|(e, _)| e).unwrap();
    let cq = d.open_cq::<Msg>(&CqAttr::default()).unwrap();
    assert_eq!(cq.attr().size(), 16);
    assert_eq!(cq.credits(&d), 16);
    // av_entries is 4.
    assert_eq!(
        d.open_av(&AvAttr {
            count: 5,
            ..AvAttr::default()
        })
        .err(),
        Some(Error::Full(Capacity::AvEntries))
    );
    let av = d
        .open_av(&AvAttr {
            count: 2,
            ..AvAttr::default()
        })
        .unwrap();
    let addr = ringfab::av::EpAddr::default();
    let mut out = [ringfab::av::FiAddr::NOTAVAIL; 3];
    // "fi_av_insert ... the number of addresses successfully inserted": two fit in a count of 2.
    assert_eq!(av.insert(&d, &[addr; 3], &mut out), Ok(2));
    assert_eq!(out[2], ringfab::av::FiAddr::NOTAVAIL);
}

#[test]
fn closed_objects_give_their_tables_back() {
    let p = pair();
    let d = Domain::<_, D>::with_capacities(&p.nic_a, &ONE);
    for _ in 0..3 {
        let cq = d.open_cq::<Data>(&CqAttr::default()).unwrap();
        let av = d.open_av(&AvAttr::default()).unwrap();
        let mr = d.register(memory(4096)).unwrap();
        assert!(cq.close(&d).is_ok());
        assert!(av.close(&d).is_ok());
        assert!(mr.close(&d).is_ok());
    }
}

/// Issue 14 item 6, as the handle model has it: a handle is an index, and dropping it is not
/// `fi_close` — the object stays open, bound or not, until `close(&domain)` or the domain's end
/// (index handles cannot reach their domain from `Drop`; smoltcp's `SocketSet` handles behave
/// the same). What used to leak for good is now bounded by the domain: dropping it releases
/// every table entry, and a new domain over the NIC opens CQs again.
#[test]
fn a_dropped_cq_handle_keeps_its_cq_open_until_the_domain_s_end() {
    use ringfab::flags::BindFlags;
    let p = pair();
    let one_cq = Capacities { cqs: 1, ..ONE };
    {
        let d = Domain::<_, D>::with_capacities(&p.nic_a, &one_cq);
        let cq = d.open_cq::<Msg>(&CqAttr::default()).unwrap();
        let av = d.open_av(&AvAttr::default()).unwrap();
        let mut ep = d.endpoint(&EpAttr::default()).unwrap();
        ep.bind_cq(&d, &cq, BindFlags::TRANSMIT | BindFlags::RECV)
            .unwrap();
        ep.bind_av(&d, &av).unwrap();
        ep.enable(&d).unwrap();
        drop(cq); // not fi_close
        ep.close(&d).unwrap();
        assert_eq!(
            d.open_cq::<Msg>(&CqAttr::default()).err(),
            Some(Error::Full(Capacity::Cqs)),
            "the CQ whose handle was dropped is still open"
        );
    }
    // The domain's end closed it.
    let d = Domain::<_, D>::with_capacities(&p.nic_a, &one_cq);
    assert!(d.open_cq::<Msg>(&CqAttr::default()).is_ok());
}

#[test]
fn the_cq_format_is_stated_once() {
    let p = pair();
    let d = Domain::<_, D>::with_capacities(&p.nic_a, &ONE);
    // Left unspecified, the attribute takes the format of the type.
    let cq = d.open_cq::<Msg>(&CqAttr::default()).unwrap();
    assert_eq!(cq.attr().format(), CqFormat::Msg);
    cq.close(&d).map_err(|(e, _)| e).unwrap();
    // Saying it again is fine; saying another is refused.
    let same = CqAttr {
        format: CqFormat::Msg,
        ..CqAttr::default()
    };
    d.open_cq::<Msg>(&same)
        .unwrap()
        .close(&d)
        .map_err(|(e, _)| e)
        .unwrap();
    let other = CqAttr {
        format: CqFormat::Data,
        ..CqAttr::default()
    };
    assert_eq!(d.open_cq::<Msg>(&other).err(), Some(Error::Inval));
}

#[test]
fn large_tables_are_built_on_the_heap() {
    // Four CQs of up to 4096 entries and eight 256-deep queues: about 4 MiB of tables, built
    // and used on a thread with a test thread's 2 MiB stack.
    std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(|| {
            let p = pair();
            let caps = Capacities {
                cq_size: 4096,
                ..Capacities::DEFAULT
            };
            let d = Domain::<_, 256>::with_capacities(&p.nic_a, &caps);
            assert_eq!(d.max_cq_size(), 4096);
            let cqs: Vec<_> = (0..4)
                .map(|_| d.open_cq::<Msg>(&CqAttr::default()).unwrap())
                .collect();
            // fi_cq(3), size: "A value of 0 indicates that the provider may choose a default
            // value": ringfab's choice is libfabric util's 1024.
            assert!(cqs.iter().all(|cq| cq.attr().size() == 1024));
            assert!(d
                .open_cq::<Msg>(&CqAttr {
                    size: 4096,
                    ..CqAttr::default()
                })
                .is_err());
        })
        .unwrap()
        .join()
        .unwrap();
}

#[test]
fn a_storage_serves_one_domain() {
    // Bare metal's way: tables in a storage that lives for ever (here leaked, there a `static`),
    // the NIC too.
    let p: &'static common::Pair = Box::leak(Box::new(pair()));
    let storage: &'static Storage<'static, Igb0, D, 2, 1, 16, 1, 1, 4> =
        Box::leak(Box::new(Storage::new()));
    assert_eq!(Storage::<Igb0, D, 2, 1, 16, 1, 1, 4>::capacities(), ONE);
    let d = Domain::from_storage(&p.nic_a, storage).unwrap();
    assert_eq!(
        Domain::from_storage(&p.nic_b, storage).err(),
        Some(Error::Busy),
        "one storage, one domain"
    );
    // The lent tables are the domain's: their capacities hold.
    let _cq = d.open_cq::<Msg>(&CqAttr::default()).unwrap();
    assert_eq!(
        d.open_cq::<Msg>(&CqAttr::default()).err(),
        Some(Error::Full(Capacity::Cqs))
    );
    assert_eq!(d.max_cq_size(), 16);
}

#[test]
fn a_ready_endpoint_is_enabled_and_a_failed_one_leaves_nothing_open() {
    let p = pair();
    let d = Domain::<_, D>::with_capacities(&p.nic_a, &ONE);
    let (ep, cq, av) = d
        .ready_endpoint::<Msg>(&EpAttr::default(), &CqAttr::default())
        .unwrap();
    assert!(ep.is_enabled(&d));
    // The CQ and the AV are bound: closing them is fi_close's Busy until the endpoint goes.
    let (cq, av) = (cq.close(&d).unwrap_err().1, av.close(&d).unwrap_err().1);
    ep.close(&d).unwrap();
    cq.close(&d).unwrap();
    av.close(&d).unwrap();

    // One hardware queue: the endpoint cannot be enabled, and the CQ and AV it opened are
    // closed again (the domain has one of each).
    let one_queue = Capacities { queues: 1, ..ONE };
    let d = Domain::<_, D>::with_capacities(&p.nic_b, &one_queue);
    assert_eq!(
        d.ready_endpoint::<Msg>(&EpAttr::default(), &CqAttr::default())
            .err(),
        Some(Error::Full(Capacity::Queues))
    );
    assert!(d.open_cq::<Msg>(&CqAttr::default()).is_ok());
    assert!(d.open_av(&AvAttr::default()).is_ok());
}

#[test]
fn a_node_is_a_domain_with_one_ready_endpoint() {
    use ringfab::entry::{MsgEntry, OpContext};
    use ringfab::Node;
    let p = pair();
    let a = Node::<_, Msg>::open(&p.nic_a).unwrap();
    let b = Node::<_, Msg>::open(&p.nic_b).unwrap();
    assert!(a.ep.is_enabled(&a.domain) && b.ep.is_enabled(&b.domain));
    // Its CQ and AV are the endpoint's: bound, so closing them is fi_close's Busy.
    let Node { domain, ep, cq, av } = a;
    let (cq, av) = (
        cq.close(&domain).unwrap_err().1,
        av.close(&domain).unwrap_err().1,
    );
    let a = Node { domain, ep, cq, av };

    let peer = a.av.insert_one(&a.domain, &b.ep).unwrap();
    let mr = b.domain.register(memory(4096)).unwrap();
    b.ep.recv(&b.domain, mr.alloc(&b.domain, 2048).unwrap(), OpContext(7))
        .unwrap();
    a.ep.inject(&a.domain, b"hello", peer).unwrap();
    p.wire.run_until_idle();
    let mut done = [MsgEntry::default(); 1];
    assert_eq!(b.cq.read(&b.domain, &mut done), Ok(1));
    assert_eq!((done[0].op_context, done[0].len), (OpContext(7), 5));
}

#[test]
fn a_node_on_a_given_domain_and_a_failed_node() {
    use ringfab::Node;
    let p = pair();
    // On a domain made elsewhere (a storage of its own, counters): its capacities hold.
    let d = Domain::<_, D>::with_capacities(&p.nic_a, &ONE);
    let node = Node::<_, Msg, D>::on(d, &EpAttr::default(), &CqAttr::default()).unwrap();
    assert_eq!(
        node.domain.open_cq::<Msg>(&CqAttr::default()).err(),
        Some(Error::Full(Capacity::Cqs))
    );
    // What ready_endpoint refuses, a node refuses: a CQ size above `CqLimits::max_size` is
    // `Inval` (cq/attr.rs's rule 3).
    let too_big = CqAttr {
        size: 1 << 20,
        ..CqAttr::default()
    };
    let refused = Node::<_, Msg>::open_with(&p.nic_b, &EpAttr::default(), &too_big);
    assert_eq!(refused.err(), Some(Error::Inval));
    // With the defaults it opens on the same NIC afterwards: nothing was left behind.
    assert!(Node::<_, Msg>::open(&p.nic_b).is_ok());
}

#[test]
fn insert_one_gives_a_handle_or_says_which_table_is_full() {
    let p = pair();
    let d = Domain::<_, D>::with_capacities(&p.nic_a, &ONE);
    let other = Domain::<_, D>::with_capacities(&p.nic_b, &ONE);
    let av = d.open_av(&AvAttr::default()).unwrap();
    let addr = |ctx| ringfab::av::EpAddr {
        mac: common::MAC_B,
        ctx,
    };
    // FI_AV_TABLE handles are table indices; ringfab hands out the lowest free entries
    // (av.rs, its module documentation): 0, 1, 2, 3 (ONE has four).
    for i in 0..4 {
        assert_eq!(
            av.insert_one(&d, addr(i)),
            Ok(ringfab::av::FiAddr(u64::from(i)))
        );
    }
    assert_eq!(
        av.insert_one(&d, addr(4)),
        Err(Error::Full(Capacity::AvEntries))
    );
    // Nothing changed: the entries are the four first addresses.
    assert_eq!(av.lookup(&d, ringfab::av::FiAddr(3)), Ok(addr(3)));
    // The one address that cannot be stored, and another domain's AV.
    av.remove(&d, &[ringfab::av::FiAddr(0)]).unwrap();
    let broadcast = ringfab::av::EpAddr {
        mac: ringfab::hal::MacAddr([0xff; 6]),
        ctx: 0xffff,
    };
    assert_eq!(av.insert_one(&d, broadcast), Err(Error::Inval));
    assert_eq!(av.insert_one(&other, addr(0)), Err(Error::Domain));
}
