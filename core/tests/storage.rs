//! The domain's one storage: each fixed table, when used up, is an error that names it; tables
//! come back when their objects close; a large storage is built on the heap, not the stack; a
//! CQ's format is stated once.

mod common;

use common::{memory, pair, Igb0};
use ringfab::av::AvAttr;
use ringfab::cq::entry::{Data, Msg};
use ringfab::cq::{CqAttr, CqFormat};
use ringfab::domain::Domain;
use ringfab::ep::EpAttr;
use ringfab::{Capacity, Error, Storage};

const D: usize = 64;

/// A storage with one of everything (two hardware queues: one endpoint).
type One<'s, 'n> = Storage<'s, 'n, Igb0, D, 2, 1, 16, 1, 1, 4>;

#[test]
fn each_used_up_table_is_an_error_that_names_it() {
    let p = pair();
    let mut storage = One::boxed();
    let d = Domain::new(&p.nic_a, &mut storage);

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
        &_cq,
        ringfab::flags::BindFlags::TRANSMIT | ringfab::flags::BindFlags::RECV,
    )
    .unwrap();
    ep.bind_av(&_av).unwrap();
    ep.enable().unwrap();
    let mut second = d
        .endpoint(&EpAttr {
            tx_queue: 1,
            rx_queue: 1,
            ..EpAttr::default()
        })
        .unwrap();
    second
        .bind_cq(
            &_cq,
            ringfab::flags::BindFlags::TRANSMIT | ringfab::flags::BindFlags::RECV,
        )
        .unwrap();
    second.bind_av(&_av).unwrap();
    assert_eq!(second.enable(), Err(Error::Full(Capacity::Queues)));

    // fi_errno: a table used up is FI_ENOMEM, and the message says which table.
    let full = Error::Full(Capacity::Cqs);
    assert_eq!(full.errno(), 12);
    assert!(full.to_string().contains("CQS"), "{full}");
}

#[test]
fn sizes_beyond_a_table_are_errors_that_name_it() {
    let p = pair();
    let mut storage = One::boxed();
    let d = Domain::new(&p.nic_a, &mut storage);
    // CQ_SIZE is 16: a CQ of 17 entries has nowhere to keep what it may owe.
    assert_eq!(
        d.open_cq::<Msg>(&CqAttr {
            size: 17,
            ..CqAttr::default()
        })
        .err(),
        Some(Error::Full(Capacity::CqSize))
    );
    // The refusal left the slot free: a CQ of 16 opens, and size 0 is min(1024, CQ_SIZE).
    let cq = d
        .open_cq::<Msg>(&CqAttr {
            size: 16,
            ..CqAttr::default()
        })
        .unwrap();
    drop(cq);
    let cq = d.open_cq::<Msg>(&CqAttr::default()).unwrap();
    assert_eq!(cq.attr().size(), 16);
    assert_eq!(cq.credits(), 16);
    // AV_ENTRIES is 4.
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
    assert_eq!(av.insert(&[addr; 3], &mut out), Ok(2));
    assert_eq!(out[2], ringfab::av::FiAddr::NOTAVAIL);
}

#[test]
fn closed_objects_give_their_tables_back() {
    let p = pair();
    let mut storage = One::boxed();
    let d = Domain::new(&p.nic_a, &mut storage);
    for _ in 0..3 {
        let cq = d.open_cq::<Data>(&CqAttr::default()).unwrap();
        let av = d.open_av(&AvAttr::default()).unwrap();
        let mr = d.register(memory(4096)).unwrap();
        assert!(cq.close().is_ok());
        assert!(av.close().is_ok());
        assert!(mr.close().is_ok());
    }
}

#[test]
fn the_cq_format_is_stated_once() {
    let p = pair();
    let mut storage = One::boxed();
    let d = Domain::new(&p.nic_a, &mut storage);
    // Left unspecified, the attribute takes the format of the type.
    let cq = d.open_cq::<Msg>(&CqAttr::default()).unwrap();
    assert_eq!(cq.attr().format(), CqFormat::Msg);
    drop(cq);
    // Saying it again is fine; saying another is refused.
    let same = CqAttr {
        format: CqFormat::Msg,
        ..CqAttr::default()
    };
    drop(d.open_cq::<Msg>(&same).unwrap());
    let other = CqAttr {
        format: CqFormat::Data,
        ..CqAttr::default()
    };
    assert_eq!(d.open_cq::<Msg>(&other).err(), Some(Error::Inval));
}

#[test]
fn a_large_storage_is_built_on_the_heap() {
    // Four CQs of up to 4096 entries and eight 256-deep queues: about 4 MiB, built and used on a
    // thread with a test thread's 2 MiB stack, which `Box::new(Storage::new())` could not do in
    // an unoptimised build (it builds the value on the stack first).
    std::thread::Builder::new()
        .stack_size(2048 << 10)
        .spawn(|| {
            let p = pair();
            let mut storage = Storage::<Igb0, 256, 8, 4, 4096>::boxed();
            assert!(std::mem::size_of_val(&*storage) > 2 << 20);
            let d = Domain::new(&p.nic_a, &mut storage);
            let cqs: Vec<_> = (0..4)
                .map(|_| d.open_cq::<Msg>(&CqAttr::default()).unwrap())
                .collect();
            assert!(cqs.iter().all(|cq| cq.attr().size() == 1024));
        })
        .unwrap()
        .join()
        .unwrap();
}
