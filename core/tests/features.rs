//! What core's optional features leave out (core/Cargo.toml, "features"; docs/architecture.md,
//! "Features"): with each feature what it names works as everywhere else in the tests; without
//! it the call that would make such a path is refused with `OpNotSupp` (or `FI_MULTI_RECV` with
//! `BadFlags`), and the rest of core is unchanged. `cargo test --workspace` runs this file with
//! the default features; `.ci/run` runs it again with none of them
//! (`cargo test -p ringfab --no-default-features --features alloc --test features`).

mod common;
use common::*;

use ringfab::domain::Domain;
use ringfab::ep::EpAttr;
use ringfab::ip::Ipv4Config;
use ringfab::proto::Encap;
use ringfab::sep::SepAttr;
use ringfab::srx::SrxAttr;
use ringfab::stx::StxAttr;
use ringfab::{Capacities, Clock, Error};

const D: usize = 64;

/// The time, which plain UDP's ARP needs and this test never moves.
struct Still;

impl Clock for Still {
    fn now(&self) -> std::time::Duration {
        std::time::Duration::ZERO
    }
}

#[test]
fn each_feature_offers_its_paths_and_its_absence_refuses_them() {
    let p = pair();
    let d = Domain::<_, D>::with_capacities(&p.nic_a, &Capacities::DEFAULT).with_clock(&Still);
    d.set_ipv4(Ipv4Config {
        addr: std::net::Ipv4Addr::new(192, 0, 2, 1),
        prefix_len: 24,
        gateway: None,
    })
    .unwrap();
    let plain = EpAttr {
        encap: Encap::PlainUdp,
        port: 7000,
        ..EpAttr::default()
    };
    let plain_sep = SepAttr {
        encap: Encap::PlainUdp,
        ..SepAttr::default()
    };
    if cfg!(feature = "plain-udp") {
        let ep = d.endpoint(&plain).unwrap();
        assert_eq!(ep.port(), 7000);
        closed(ep.close(&d));
        let sep = d.scalable_endpoint(&plain_sep).unwrap();
        closed(sep.close(&d));
    } else {
        assert_eq!(d.endpoint(&plain).err(), Some(Error::OpNotSupp));
        assert_eq!(
            d.scalable_endpoint(&plain_sep).err(),
            Some(Error::OpNotSupp)
        );
    }

    let srx = d.srx_context(&SrxAttr::default());
    let stx = d.stx_context(&StxAttr::default());
    if cfg!(feature = "shared-contexts") {
        closed(srx.unwrap().close(&d));
        closed(stx.unwrap().close(&d));
    } else {
        assert_eq!(srx.err(), Some(Error::OpNotSupp));
        assert_eq!(stx.err(), Some(Error::OpNotSupp));
    }

    let multi = EpAttr {
        multi_recv_msgs: 4,
        ..EpAttr::default()
    };
    if cfg!(feature = "multi-recv") {
        closed(d.endpoint(&multi).unwrap().close(&d));
    } else {
        assert_eq!(d.endpoint(&multi).err(), Some(Error::OpNotSupp));
    }

    // What no feature names is there either way: an endpoint on ringfab's header.
    closed(d.endpoint(&EpAttr::default()).unwrap().close(&d));
}
