//! Address resolution (RFC 826) as a state machine: [`Resolver`] keeps the cache of IPv4 → MAC
//! pairs with their expiry, the requests still unanswered with their retries, and a bounded
//! queue of items (sends) held until their next hop resolves or fails. It is handed received
//! ARP packets ([`Resolver::receive`]) and the time, and says what to send and what to release;
//! it does no I/O and keeps no clock, so the endpoint's progress drives it (`docs/ip.md`,
//! "The send path": no thread, nothing happens unless progress runs).
//!
//! * **Cache.** An entry resolved by a reply (or learnt from a request for our address, RFC 826's
//!   merge) lives [`EXPIRY`] after it was last confirmed (RFC 1122 §2.3.2.1 asks for a timeout
//!   and leaves its length open; 60 s as Linux's `base_reachable_time` order of magnitude). An
//!   entry the cache needs room for is taken from the one resolved or failed longest ago that
//!   holds nothing back.
//! * **Requests.** A next hop not in the cache is asked for at once, then again every
//!   [`RETRY_INTERVAL`] (RFC 1122 §2.3.2.1: at most one request per second per address), at
//!   most [`MAX_REQUESTS`] times; [`RETRY_INTERVAL`] after the last one it has failed, and the
//!   items held for it come back as failed, oldest first.
//! * **Held items** leave in the order they came, per next hop: an item is never released
//!   ahead of an older one for the same address.

use core::net::Ipv4Addr;
use core::time::Duration;

use super::addr::is_host;
use super::emit::ArpFrame;
use super::parse::{Arp, ArpOp, Local};
use crate::hal::MacAddr;

/// How long a resolved entry is believed after it was last confirmed.
pub const EXPIRY: Duration = Duration::from_secs(60);
/// Between two requests for one address (RFC 1122 §2.3.2.1: at most one a second).
pub const RETRY_INTERVAL: Duration = Duration::from_secs(1);
/// Requests sent for one address before it is declared unreachable.
pub const MAX_REQUESTS: u8 = 3;

/// What one cache entry knows of its address.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum State {
    /// Asked `sent` times; the next request (or the verdict) is due at `due`.
    Resolving { sent: u8, due: Duration },
    /// At `mac`, believed until `expires`.
    Resolved { mac: MacAddr, expires: Duration },
    /// No answer to [`MAX_REQUESTS`] requests, found at `at`.
    Failed { at: Duration },
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Entry {
    ip: Ipv4Addr,
    state: State,
}

/// One held item, with its place in line.
#[derive(Clone, Copy, Debug)]
struct Held<T> {
    next_hop: Ipv4Addr,
    seq: u64,
    item: T,
}

/// What [`Resolver::resolve`] did with an item.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Resolve<T> {
    /// The next hop is known: send the item to this MAC now.
    Ready(MacAddr, T),
    /// The item is held until the next hop resolves or fails; send this request first, if
    /// there is one (the first request for an address).
    Held(Option<ArpFrame>),
    /// Nothing can be held now (the held queue, or the cache, is full): the item comes back.
    Full(T),
}

/// The ARP state of one host: `ENTRIES` cached addresses, `HELD` held items of type `T`.
#[derive(Debug)]
pub struct Resolver<T, const ENTRIES: usize, const HELD: usize> {
    local: Local,
    cache: [Option<Entry>; ENTRIES],
    held: [Option<Held<T>>; HELD],
    seq: u64,
    generation: u64,
}

impl<T: Copy, const ENTRIES: usize, const HELD: usize> Resolver<T, ENTRIES, HELD> {
    /// An empty cache for the host `local`.
    pub fn new(local: Local) -> Self {
        Resolver {
            local,
            cache: [None; ENTRIES],
            held: [None; HELD],
            seq: 0,
            generation: 0,
        }
    }

    /// A number that changes whenever an address resolves or fails: a transmit path that saw
    /// the same number last time has nothing to release (one load on its progress).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Items held now.
    pub fn held(&self) -> usize {
        self.held.iter().flatten().count()
    }

    /// Whether anything waits on time or on a transmit path: an address being resolved (a
    /// retry or the verdict falls due) or an item held. An idle resolver needs no progress.
    pub fn busy(&self) -> bool {
        self.held.iter().any(Option::is_some)
            || self
                .cache
                .iter()
                .flatten()
                .any(|e| matches!(e.state, State::Resolving { .. }))
    }

    fn find(&self, ip: Ipv4Addr) -> Option<usize> {
        self.cache
            .iter()
            .position(|e| e.is_some_and(|e| e.ip == ip))
    }

    fn holds_for(&self, ip: Ipv4Addr) -> bool {
        self.held.iter().flatten().any(|h| h.next_hop == ip)
    }

    /// The MAC of `ip`, if it is resolved and not expired at `now`.
    pub fn lookup(&self, ip: Ipv4Addr, now: Duration) -> Option<MacAddr> {
        match self.find(ip).and_then(|i| self.cache[i]).map(|e| e.state) {
            Some(State::Resolved { mac, expires }) if now < expires => Some(mac),
            _ => None,
        }
    }

    /// An entry for a new address: a free one, else the resolved or failed one that has gone
    /// longest without news and holds nothing back.
    fn room(&self) -> Option<usize> {
        if let Some(i) = self.cache.iter().position(Option::is_none) {
            return Some(i);
        }
        self.cache
            .iter()
            .enumerate()
            .filter_map(|(i, e)| {
                let e = (*e)?;
                let age = match e.state {
                    State::Resolved { expires, .. } => expires,
                    State::Failed { at } => at,
                    State::Resolving { .. } => return None,
                };
                (!self.holds_for(e.ip)).then_some((age, i))
            })
            .min()
            .map(|(_, i)| i)
    }

    fn request(&self, target_ip: Ipv4Addr) -> ArpFrame {
        ArpFrame {
            op: ArpOp::Request,
            eth_dst: MacAddr::BROADCAST,
            sender_mac: self.local.mac,
            sender_ip: self.local.ip.addr,
            target_mac: MacAddr([0; 6]),
            target_ip,
        }
    }

    /// Where `item`, for the unicast next hop `next_hop`, goes at `now`: sent at once to a
    /// resolved address that holds nothing back, else held (behind what is held for the same
    /// address), with a first request when the address was not being resolved.
    pub fn resolve(&mut self, next_hop: Ipv4Addr, item: T, now: Duration) -> Resolve<T> {
        if let Some(mac) = self.lookup(next_hop, now) {
            if !self.holds_for(next_hop) {
                return Resolve::Ready(mac, item);
            }
        }
        let Some(slot) = self.held.iter().position(Option::is_none) else {
            return Resolve::Full(item);
        };
        let resolving = match self.find(next_hop).and_then(|i| self.cache[i]) {
            Some(Entry {
                state: State::Resolving { .. },
                ..
            }) => true,
            // Resolved, with older items still held: they leave first, when progress runs.
            Some(Entry {
                state: State::Resolved { expires, .. },
                ..
            }) => now < expires,
            // Failed, with items still to be failed: this one fails with them.
            Some(Entry {
                state: State::Failed { .. },
                ..
            }) => self.holds_for(next_hop),
            _ => false,
        };
        let mut request = None;
        if !resolving {
            let Some(i) = self.find(next_hop).or_else(|| self.room()) else {
                return Resolve::Full(item);
            };
            self.cache[i] = Some(Entry {
                ip: next_hop,
                state: State::Resolving {
                    sent: 1,
                    due: now + RETRY_INTERVAL,
                },
            });
            request = Some(self.request(next_hop));
        }
        self.seq += 1;
        self.held[slot] = Some(Held {
            next_hop,
            seq: self.seq,
            item,
        });
        Resolve::Held(request)
    }

    /// Starts resolving `next_hop` at `now` without holding anything (a peer just inserted in
    /// an address vector, `docs/ip.md`): the first request if the address is neither cached
    /// nor being resolved, else nothing.
    pub fn prefetch(&mut self, next_hop: Ipv4Addr, now: Duration) -> Option<ArpFrame> {
        if self.lookup(next_hop, now).is_some() {
            return None;
        }
        if let Some(Entry {
            state: State::Resolving { .. },
            ..
        }) = self.find(next_hop).and_then(|i| self.cache[i])
        {
            return None;
        }
        let i = self.find(next_hop).or_else(|| self.room())?;
        self.cache[i] = Some(Entry {
            ip: next_hop,
            state: State::Resolving {
                sent: 1,
                due: now + RETRY_INTERVAL,
            },
        });
        Some(self.request(next_hop))
    }

    /// Takes a received ARP packet at `now` (RFC 826's algorithm): the sender's pair updates
    /// its entry if there is one (the merge), and is added if the packet is for our address; a
    /// request for our address gets the reply returned. Requests for other hosts and packets
    /// from addresses no host may have (a probe's 0.0.0.0, RFC 5227 §2.1.1) teach nothing.
    pub fn receive(&mut self, arp: &Arp, now: Duration) -> Option<ArpFrame> {
        let ours = arp.target_ip == self.local.ip.addr;
        let sender_ok = is_host(arp.sender_ip)
            && arp.sender_mac.is_station()
            && arp.sender_ip != self.local.ip.addr
            && !self.local.ip.is_broadcast(arp.sender_ip);
        if sender_ok {
            let known = self.find(arp.sender_ip);
            let slot = match known {
                Some(i) => Some(i),
                None if ours => self.room(),
                None => None,
            };
            if let Some(i) = slot {
                let was_resolved =
                    matches!(self.cache[i].map(|e| e.state), Some(State::Resolved { .. }));
                self.cache[i] = Some(Entry {
                    ip: arp.sender_ip,
                    state: State::Resolved {
                        mac: arp.sender_mac,
                        expires: now + EXPIRY,
                    },
                });
                if !was_resolved {
                    self.generation += 1;
                }
            }
        }
        (ours && arp.op == ArpOp::Request).then_some(ArpFrame {
            op: ArpOp::Reply,
            eth_dst: arp.sender_mac,
            sender_mac: self.local.mac,
            sender_ip: self.local.ip.addr,
            target_mac: arp.sender_mac,
            target_ip: arp.sender_ip,
        })
    }

    /// The next request due at `now` (a retry), if any; an address asked [`MAX_REQUESTS`]
    /// times without an answer fails when its last interval ends.
    pub fn next_request(&mut self, now: Duration) -> Option<ArpFrame> {
        for i in 0..ENTRIES {
            let Some(Entry {
                ip,
                state: State::Resolving { sent, due },
            }) = self.cache[i]
            else {
                continue;
            };
            if now < due {
                continue;
            }
            if sent >= MAX_REQUESTS {
                self.cache[i] = Some(Entry {
                    ip,
                    state: State::Failed { at: now },
                });
                self.generation += 1;
                continue;
            }
            self.cache[i] = Some(Entry {
                ip,
                state: State::Resolving {
                    sent: sent + 1,
                    due: now + RETRY_INTERVAL,
                },
            });
            return Some(self.request(ip));
        }
        None
    }

    /// The oldest held item whose next hop matches `pick` and which `mine` accepts, taken out
    /// of the queue.
    fn take_oldest(
        &mut self,
        pick: impl Fn(&State) -> bool,
        mine: impl Fn(&T) -> bool,
    ) -> Option<(State, T)> {
        let mut best: Option<(u64, usize, State)> = None;
        for (i, h) in self.held.iter().enumerate() {
            let Some(h) = h else { continue };
            if !mine(&h.item) {
                continue;
            }
            let Some(state) = self
                .find(h.next_hop)
                .and_then(|e| self.cache[e])
                .map(|e| e.state)
            else {
                continue;
            };
            if pick(&state) && best.is_none_or(|(seq, ..)| h.seq < seq) {
                best = Some((h.seq, i, state));
            }
        }
        let (_, i, state) = best?;
        self.held[i].take().map(|h| (state, h.item))
    }

    /// The oldest held item whose next hop has resolved, with the MAC to send it to.
    pub fn take_ready(&mut self) -> Option<(MacAddr, T)> {
        self.take_ready_if(|_| true)
    }

    /// [`take_ready`](Self::take_ready) among the items `mine` accepts (a transmit path's own,
    /// where several share the resolver). Order is kept per next hop among those items.
    pub fn take_ready_if(&mut self, mine: impl Fn(&T) -> bool) -> Option<(MacAddr, T)> {
        match self.take_oldest(|s| matches!(s, State::Resolved { .. }), mine)? {
            (State::Resolved { mac, .. }, item) => Some((mac, item)),
            _ => None,
        }
    }

    /// The oldest held item whose next hop failed to resolve: it is to complete in error
    /// (`FI_EHOSTUNREACH`). Once nothing is held for a failed address its entry is forgotten,
    /// so that a later send asks again.
    pub fn take_failed(&mut self) -> Option<T> {
        self.take_failed_if(|_| true)
    }

    /// [`take_failed`](Self::take_failed) among the items `mine` accepts.
    pub fn take_failed_if(&mut self, mine: impl Fn(&T) -> bool) -> Option<T> {
        let (_, item) = self.take_oldest(|s| matches!(s, State::Failed { .. }), mine)?;
        for i in 0..ENTRIES {
            if let Some(Entry {
                ip,
                state: State::Failed { .. },
            }) = self.cache[i]
            {
                if !self.holds_for(ip) {
                    self.cache[i] = None;
                }
            }
        }
        Some(item)
    }

    /// The oldest held item `mine` accepts, whatever the state of its next hop (its sender is
    /// going away).
    pub fn take_any_if(&mut self, mine: impl Fn(&T) -> bool) -> Option<T> {
        self.take_oldest(|_| true, mine).map(|(_, item)| item)
    }

    /// The announcement of our address (RFC 5227 §2.3: a request with our address as both
    /// sender and target), sent when the first endpoint is enabled so that the link's caches
    /// learn where it is.
    pub fn announce(&self) -> ArpFrame {
        ArpFrame {
            target_ip: self.local.ip.addr,
            ..self.request(self.local.ip.addr)
        }
    }
}

#[cfg(test)]
mod tests;
