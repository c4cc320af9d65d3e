//! The resolver's behaviour as RFC 826 and RFC 1122 §2.3.2.1 ask, driven by hand-made time.

use super::*;
use crate::ip::Ipv4Config;

const US_MAC: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x0a]);
const US: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 10);
const B_MAC: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x0b]);
const B: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 11);
const C_MAC: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x0c]);
const C: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 12);

fn resolver<const E: usize, const H: usize>() -> Resolver<u32, E, H> {
    Resolver::new(Local {
        mac: US_MAC,
        ip: Ipv4Config {
            addr: US,
            prefix_len: 24,
            gateway: None,
        },
    })
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn packet(op: ArpOp, sender_mac: MacAddr, sender_ip: Ipv4Addr, target_ip: Ipv4Addr) -> Arp {
    Arp {
        op,
        sender_mac,
        sender_ip,
        target_mac: MacAddr([0; 6]),
        target_ip,
    }
}

fn reply_from(mac: MacAddr, ip: Ipv4Addr) -> Arp {
    Arp {
        target_mac: US_MAC,
        ..packet(ArpOp::Reply, mac, ip, US)
    }
}

#[test]
fn a_request_for_our_address_is_answered_and_its_sender_learnt() {
    let mut r = resolver::<4, 4>();
    let reply = r.receive(&packet(ArpOp::Request, B_MAC, B, US), secs(0));
    assert_eq!(
        reply,
        Some(ArpFrame {
            op: ArpOp::Reply,
            eth_dst: B_MAC,
            sender_mac: US_MAC,
            sender_ip: US,
            target_mac: B_MAC,
            target_ip: B,
        })
    );
    assert_eq!(r.lookup(B, secs(1)), Some(B_MAC));
}

#[test]
fn a_request_for_another_host_is_not_answered_and_teaches_only_known_senders() {
    let mut r = resolver::<4, 4>();
    assert_eq!(
        r.receive(&packet(ArpOp::Request, B_MAC, B, C), secs(0)),
        None
    );
    assert_eq!(
        r.lookup(B, secs(0)),
        None,
        "an unknown sender is not learnt"
    );
    // Known: RFC 826's merge updates it (B moved to C's MAC).
    r.receive(&reply_from(B_MAC, B), secs(0));
    r.receive(&packet(ArpOp::Request, C_MAC, B, C), secs(1));
    assert_eq!(r.lookup(B, secs(1)), Some(C_MAC));
}

#[test]
fn senders_no_host_may_be_teach_nothing() {
    let mut r = resolver::<4, 4>();
    // A probe (RFC 5227: sender 0.0.0.0) for our address is still answered, to its MAC.
    let probe = packet(ArpOp::Request, B_MAC, Ipv4Addr::UNSPECIFIED, US);
    assert!(r.receive(&probe, secs(0)).is_some());
    assert_eq!(r.lookup(Ipv4Addr::UNSPECIFIED, secs(0)), None);
    // Someone claiming our address, the broadcast, or with a group MAC.
    for bad in [
        packet(ArpOp::Reply, B_MAC, US, US),
        packet(ArpOp::Reply, B_MAC, Ipv4Addr::new(192, 0, 2, 255), US),
        packet(ArpOp::Reply, MacAddr::BROADCAST, C, US),
    ] {
        r.receive(&bad, secs(0));
    }
    assert_eq!(r.lookup(US, secs(0)), None);
    assert_eq!(r.lookup(Ipv4Addr::new(192, 0, 2, 255), secs(0)), None);
    assert_eq!(r.lookup(C, secs(0)), None);
}

#[test]
fn a_miss_holds_items_asks_once_and_releases_them_in_order_on_the_reply() {
    let mut r = resolver::<4, 4>();
    let first = r.resolve(B, 1, secs(0));
    assert_eq!(
        first,
        Resolve::Held(Some(ArpFrame {
            op: ArpOp::Request,
            eth_dst: MacAddr::BROADCAST,
            sender_mac: US_MAC,
            sender_ip: US,
            target_mac: MacAddr([0; 6]),
            target_ip: B,
        }))
    );
    assert_eq!(r.resolve(B, 2, secs(0)), Resolve::Held(None), "asked once");
    assert_eq!(r.take_ready(), None);
    let g = r.generation();
    r.receive(&reply_from(B_MAC, B), secs(0));
    assert_ne!(r.generation(), g, "progress learns that something resolved");
    // A send after the reply but before progress released the held ones waits behind them.
    assert_eq!(r.resolve(B, 3, secs(0)), Resolve::Held(None));
    assert_eq!(r.take_ready(), Some((B_MAC, 1)));
    assert_eq!(r.take_ready(), Some((B_MAC, 2)));
    assert_eq!(r.take_ready(), Some((B_MAC, 3)));
    assert_eq!(r.take_ready(), None);
    assert_eq!(r.resolve(B, 4, secs(1)), Resolve::Ready(B_MAC, 4));
}

#[test]
fn an_unanswered_address_is_asked_three_times_a_second_apart_then_fails_its_items() {
    let mut r = resolver::<4, 4>();
    assert!(matches!(r.resolve(B, 1, secs(0)), Resolve::Held(Some(_))));
    assert!(matches!(r.resolve(B, 2, secs(0)), Resolve::Held(None)));
    assert_eq!(
        r.next_request(Duration::from_millis(999)),
        None,
        "not before a second"
    );
    assert_eq!(r.next_request(secs(1)).map(|f| f.target_ip), Some(B));
    assert_eq!(r.next_request(secs(1)), None, "one a second");
    assert_eq!(r.next_request(secs(2)).map(|f| f.target_ip), Some(B));
    let g = r.generation();
    // Three requests sent: a second after the last, the address has failed.
    assert_eq!(r.next_request(Duration::from_millis(2999)), None);
    assert_eq!(r.generation(), g);
    assert_eq!(r.next_request(secs(3)), None);
    assert_ne!(r.generation(), g);
    // A send meanwhile fails with the rest rather than starting over.
    assert_eq!(r.resolve(B, 3, secs(3)), Resolve::Held(None));
    assert_eq!(r.take_ready(), None);
    assert_eq!(r.take_failed(), Some(1));
    assert_eq!(r.take_failed(), Some(2));
    assert_eq!(r.take_failed(), Some(3));
    assert_eq!(r.take_failed(), None);
    assert_eq!(r.held(), 0);
    // Forgotten: the next send asks again.
    assert!(matches!(r.resolve(B, 4, secs(10)), Resolve::Held(Some(_))));
}

#[test]
fn the_held_queue_is_bounded_and_gives_the_item_back() {
    let mut r = resolver::<4, 2>();
    assert!(matches!(r.resolve(B, 1, secs(0)), Resolve::Held(_)));
    assert!(matches!(r.resolve(C, 2, secs(0)), Resolve::Held(_)));
    assert_eq!(r.resolve(B, 3, secs(0)), Resolve::Full(3));
    // A resolved destination with nothing held is not held, so a full queue does not stop it.
    r.receive(
        &packet(ArpOp::Request, C_MAC, Ipv4Addr::new(192, 0, 2, 13), US),
        secs(0),
    );
    assert_eq!(
        r.resolve(Ipv4Addr::new(192, 0, 2, 13), 4, secs(0)),
        Resolve::Ready(C_MAC, 4)
    );
}

#[test]
fn entries_expire_and_are_asked_for_again() {
    let mut r = resolver::<4, 4>();
    r.receive(&reply_from(B_MAC, B), secs(0));
    assert_eq!(r.lookup(B, EXPIRY - Duration::from_millis(1)), Some(B_MAC));
    assert_eq!(r.lookup(B, EXPIRY), None);
    assert!(matches!(r.resolve(B, 1, EXPIRY), Resolve::Held(Some(_))));
    // Confirmation renews the entry.
    r.receive(&reply_from(B_MAC, B), EXPIRY);
    assert_eq!(r.take_ready(), Some((B_MAC, 1)));
    assert_eq!(r.lookup(B, EXPIRY + secs(59)), Some(B_MAC));
}

#[test]
fn a_full_cache_gives_up_its_stalest_idle_entry_never_one_being_resolved() {
    let mut r = resolver::<2, 4>();
    r.receive(&reply_from(B_MAC, B), secs(0));
    r.receive(&reply_from(C_MAC, C), secs(5));
    let d = Ipv4Addr::new(192, 0, 2, 13);
    assert!(matches!(r.resolve(d, 1, secs(6)), Resolve::Held(Some(_))));
    assert_eq!(
        r.lookup(B, secs(6)),
        None,
        "B, confirmed longest ago, made room"
    );
    assert_eq!(r.lookup(C, secs(6)), Some(C_MAC));
    let e = Ipv4Addr::new(192, 0, 2, 14);
    assert!(matches!(r.resolve(e, 2, secs(7)), Resolve::Held(Some(_))));
    // Both entries are now being resolved with items held: nothing can be evicted.
    assert_eq!(r.resolve(B, 3, secs(8)), Resolve::Full(3));
    // A reply nobody asked for, for our address, finds no room either and is not learnt.
    r.receive(&reply_from(B_MAC, B), secs(8));
    assert_eq!(r.lookup(B, secs(8)), None);
}

#[test]
fn the_announcement_is_a_request_for_our_own_address() {
    let r = resolver::<1, 1>();
    let a = r.announce();
    assert_eq!((a.op, a.eth_dst), (ArpOp::Request, MacAddr::BROADCAST));
    assert_eq!((a.sender_ip, a.target_ip), (US, US));
    assert_eq!(a.target_mac, MacAddr([0; 6]));
}

#[test]
fn prefetch_asks_once_and_a_later_item_waits_on_the_same_request() {
    let mut r = resolver::<4, 4>();
    assert!(r.prefetch(B, secs(0)).is_some());
    assert_eq!(r.prefetch(B, secs(0)), None, "already being resolved");
    assert_eq!(r.resolve(B, 1, secs(0)), Resolve::Held(None));
    r.receive(&reply_from(B_MAC, B), secs(0));
    assert_eq!(r.prefetch(B, secs(1)), None, "resolved");
    assert_eq!(r.take_ready(), Some((B_MAC, 1)));
}

#[test]
fn take_if_releases_only_the_items_asked_for_in_order() {
    let mut r = resolver::<4, 4>();
    let _ = r.resolve(B, 1, secs(0));
    let _ = r.resolve(B, 2, secs(0));
    let _ = r.resolve(B, 3, secs(0));
    r.receive(&reply_from(B_MAC, B), secs(0));
    assert_eq!(r.take_ready_if(|i| i % 2 == 0), Some((B_MAC, 2)));
    assert_eq!(r.take_ready_if(|i| i % 2 == 0), None);
    assert_eq!(r.take_ready(), Some((B_MAC, 1)));
    assert_eq!(r.take_ready(), Some((B_MAC, 3)));
}

/// RFC 1122 §2.3.2.1 ("a mechanism to prevent ARP flooding (repeatedly sending an ARP Request
/// for the same IP address, at a high rate) MUST be included"): retries fall due only while an
/// address is being resolved, and `busy` says exactly when — what lets a transmit path skip
/// the resolver with one load the rest of the time.
#[test]
fn the_resolver_is_busy_only_while_it_resolves_or_holds() {
    let mut r = resolver::<4, 4>();
    assert!(!r.busy(), "a fresh resolver has nothing to do");
    assert!(r.prefetch(B, secs(0)).is_some());
    assert!(
        r.busy(),
        "B is being resolved: a retry or a verdict will fall due"
    );
    r.receive(&reply_from(B_MAC, B), secs(0));
    assert!(!r.busy(), "B resolved and nothing held");
    assert!(matches!(r.resolve(C, 7, secs(0)), Resolve::Held(Some(_))));
    r.receive(&reply_from(C_MAC, C), secs(0));
    assert!(
        r.busy(),
        "C resolved, its item still held for a transmit path"
    );
    assert_eq!(r.take_ready(), Some((C_MAC, 7)));
    assert!(!r.busy());
    assert!(r.prefetch(Ipv4Addr::new(192, 0, 2, 13), secs(0)).is_some());
    for s in 1..=2 {
        assert!(r.next_request(secs(s)).is_some(), "retry {s}");
    }
    assert!(r.busy(), "the last interval has not ended");
    assert_eq!(r.next_request(secs(3)), None);
    assert!(!r.busy(), "given up: nothing more falls due");
}
