//! The receives of a plain-UDP endpoint (`FI_SOCKADDR_IN`, [`crate::ipv4`]): the endpoint's
//! own receive buffers are all kept posted on the receive ring, and each datagram that lands
//! in one is matched, in order, with the oldest receive the application posted — as a socket
//! does, and as a shared receive context matches its buffers to endpoints.
//!
//! Why not the application's receives on the ring, one buffer each, as on ringfab's own
//! encapsulation: a plain-UDP queue also carries ARP (and ICMP echo), which core consumes
//! from whatever buffer it lands in. A peer's address resolution and its first datagram come
//! as a burst (a gratuitous ARP announcement, an ARP request, the datagram), and an
//! application with two receives posted (`fi_pingpong`) had both taken by ARP frames and the
//! datagram missed for want of a descriptor; a DGRAM test that never retransmits then waits
//! for ever (docs/libfabric.md, "FI_SOCKADDR_IN (plain UDP)"). With the pool the ring holds
//! as many buffers as the endpoint has, whatever the application posted.
//!
//! So:
//! * a receive the application posts waits here ([`Waiting`]) until a datagram is matched to
//!   it; it is never on the ring, so `rx_attr->size` of them may wait (`fi_rx_size_left`),
//!   and `fi_cancel` takes it back here;
//! * a datagram that finds no receive waiting is held ([`Arrival`]), its buffer off the ring,
//!   until one is posted (`fi_recv` then completes it at once): the pool is the endpoint's
//!   socket buffer, and when every buffer holds a datagram the NIC drops what comes
//!   (`Stats::rx_missed`), as a full socket buffer does;
//! * the payload is copied from the endpoint's buffer into the application's, in prefix mode
//!   too (the prefix is the provider's room, fi_getinfo(3); it is not used on receive);
//! * the receive counter counts a datagram when it is matched with a receive, not when it
//!   arrives: core does not count the endpoint's receives (the provider binds the counter to
//!   core without `FI_RECV`), [`RxPool::count`] does.
//!
//! Matching happens under the pool's lock only; the entry it makes goes to the receive CQ's
//! queue of translated entries ([`crate::cq`]): from the CQ's own read when the datagram
//! comes second, from `fi_recv` (which then wakes a thread blocked on the CQ) when the
//! receive does.

use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard, PoisonError};

use ringfab::av::FiAddr;
use ringfab::cntr::CounterEvents;
use ringfab::cq::{ErrEntry, TaggedEntry};
use ringfab::mr::Buf;

use crate::cntr::CoreCntr;

/// A receive the application posted, not yet matched with a datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Waiting {
    /// The application's context (`void *context` of the call).
    pub(crate) context: usize,
    /// The payload's part of the application's buffer: address and length.
    pub(crate) recv: (usize, usize),
    /// `msg_prefix_size` in prefix mode (the application's buffer starts this many bytes
    /// before `recv`), else 0.
    pub(crate) prefix: usize,
    /// Its success is not reported (selective completion, [`crate::ep::Selective`]).
    pub(crate) silent: bool,
}

/// A datagram core completed into one of the pool's buffers, not yet matched with a receive.
pub(crate) enum Arrival {
    /// A success: core's entry, the sender's `fi_addr_t`, the buffer.
    Ok(TaggedEntry, FiAddr, Option<Buf<'static>>),
    /// An error that carries a datagram (`FI_EADDRNOTAVAIL` under `FI_SOURCE_ERR`, with the
    /// sender's address as error data).
    Err(ErrEntry, Vec<u8>, Option<Buf<'static>>),
}

impl Arrival {
    /// Its buffer, taken (a held arrival dropped goes back to the endpoint).
    pub(crate) fn take_buf(&mut self) -> Option<Buf<'static>> {
        match self {
            Arrival::Ok(_, _, b) | Arrival::Err(_, _, b) => b.take(),
        }
    }
}

/// The pool's two queues. At most one of them is non-empty: a receive posted while a
/// datagram is held is matched at once, and a datagram that comes while a receive waits.
#[derive(Default)]
struct Queues {
    waiting: VecDeque<Waiting>,
    arrived: VecDeque<Arrival>,
}

/// A plain-UDP endpoint's receive matching (see the module documentation).
pub(crate) struct RxPool {
    queues: Mutex<Queues>,
    /// Most receives that may wait: `rx_attr->size`.
    limit: usize,
    /// Most datagrams held: the pool's buffers.
    held_limit: usize,
    /// The counter bound with `FI_RECV`, which the pool counts on.
    cntr: Option<&'static CoreCntr>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Plain values: consistent whatever panicked while they were held.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What [`RxPool::arrive`] did with a datagram.
pub(crate) enum Arrived {
    /// Matched with the oldest waiting receive.
    Matched(Waiting, Arrival),
    /// Held until a receive is posted.
    Held,
    /// Not held: as many datagrams are held as the pool has buffers (the arrival is given
    /// back, for its buffer to go back to the endpoint).
    Full(Arrival),
}

impl RxPool {
    /// A pool of `buffers` buffers for an endpoint whose `rx_attr->size` is `limit`,
    /// counting on `cntr`.
    pub(crate) fn new(limit: usize, buffers: usize, cntr: Option<&'static CoreCntr>) -> RxPool {
        RxPool {
            queues: Mutex::new(Queues::default()),
            limit: limit.max(1),
            held_limit: buffers,
            cntr,
        }
    }

    /// A receive the application posts: matched with the oldest held datagram (`Ok(Some)`),
    /// or left waiting (`Ok(None)`); `Err(())` when `rx_attr->size` receives wait already
    /// (the call's `-FI_EAGAIN`).
    pub(crate) fn post(&self, w: Waiting) -> Result<Option<(Waiting, Arrival)>, ()> {
        let mut q = lock(&self.queues);
        if let Some(a) = q.arrived.pop_front() {
            return Ok(Some((w, a)));
        }
        if q.waiting.len() >= self.limit {
            return Err(());
        }
        q.waiting.push_back(w);
        Ok(None)
    }

    /// A datagram core completed into one of the pool's buffers.
    pub(crate) fn arrive(&self, a: Arrival) -> Arrived {
        let mut q = lock(&self.queues);
        if let Some(w) = q.waiting.pop_front() {
            return Arrived::Matched(w, a);
        }
        if q.arrived.len() >= self.held_limit {
            return Arrived::Full(a);
        }
        q.arrived.push_back(a);
        Arrived::Held
    }

    /// `fi_cancel`: takes back the oldest waiting receive posted with `context`.
    pub(crate) fn cancel(&self, context: usize) -> Option<Waiting> {
        let mut q = lock(&self.queues);
        let at = q.waiting.iter().position(|w| w.context == context)?;
        q.waiting.remove(at)
    }

    /// Receives that may still be posted (`fi_rx_size_left`).
    pub(crate) fn room(&self) -> usize {
        self.limit.saturating_sub(lock(&self.queues).waiting.len())
    }

    /// Counts a receive that completed (`ok`) with `bytes` of payload, or in error, on the
    /// counter bound with `FI_RECV` (fi_cntr(3): "If an operation associated with the counter
    /// encounters an error, it will increment the error value associated with the counter").
    pub(crate) fn count(&self, ok: bool, bytes: usize) {
        let Some(c) = self.cntr else {
            return;
        };
        if !ok {
            c.adderr(1);
        } else if c.attr().events == CounterEvents::Bytes {
            c.add(bytes as u64);
        } else {
            c.add(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(context: usize) -> Waiting {
        Waiting {
            context,
            recv: (0x1000 * context, 64),
            prefix: 0,
            silent: false,
        }
    }

    fn arrival(len: usize) -> Arrival {
        Arrival::Ok(
            TaggedEntry {
                len,
                ..TaggedEntry::default()
            },
            FiAddr::NOTAVAIL,
            None,
        )
    }

    fn len_of(a: &Arrival) -> usize {
        match a {
            Arrival::Ok(e, ..) => e.len,
            Arrival::Err(e, ..) => e.len,
        }
    }

    /// The provider's choice for a DGRAM endpoint (docs/semantics.md, the row on
    /// `fi_rx_size_left`, `fi_cancel` and `fi_cntr`): receives and datagrams meet in the order
    /// each came, and a datagram no receive waits for is held until one is posted.
    #[test]
    fn datagrams_meet_receives_in_the_order_each_came() {
        let p = RxPool::new(4, 8, None);
        assert!(matches!(p.post(w(1)), Ok(None)));
        assert!(matches!(p.post(w(2)), Ok(None)));
        let Arrived::Matched(first, a) = p.arrive(arrival(10)) else {
            panic!("a waiting receive takes the datagram");
        };
        assert_eq!((first.context, len_of(&a)), (1, 10));
        let Arrived::Matched(second, _) = p.arrive(arrival(11)) else {
            panic!("the second receive takes the second datagram");
        };
        assert_eq!(second.context, 2);
        // Nothing waits now: the next two are held, and receives posted later take them
        // oldest first.
        assert!(matches!(p.arrive(arrival(12)), Arrived::Held));
        assert!(matches!(p.arrive(arrival(13)), Arrived::Held));
        let Ok(Some((r, a))) = p.post(w(3)) else {
            panic!("a held datagram completes the receive at once");
        };
        assert_eq!((r.context, len_of(&a)), (3, 12));
        let Ok(Some((_, a))) = p.post(w(4)) else {
            panic!("and the next");
        };
        assert_eq!(len_of(&a), 13);
        assert_eq!(p.room(), 4);
    }

    /// fi_endpoint(3), `fi_rx_size_left`: "a lower bound on the number of receive operations
    /// that may be posted to the given endpoint without that operation returning -FI_EAGAIN"
    /// — `rx_attr->size` may wait; fi_cancel: "If multiple outstanding operations match the
    /// context parameter, only one will be canceled."
    #[test]
    fn at_most_rx_size_receives_wait_and_at_most_the_pool_is_held() {
        let p = RxPool::new(2, 3, None);
        assert!(p.post(w(1)).is_ok() && p.post(w(2)).is_ok());
        assert_eq!(p.room(), 0);
        assert!(p.post(w(3)).is_err(), "a third waits past rx_attr->size");
        assert_eq!(p.cancel(1), Some(w(1)));
        assert_eq!(p.cancel(1), None, "cancelled once");
        assert_eq!(p.room(), 1);
        assert!(matches!(p.arrive(arrival(1)), Arrived::Matched(..)));
        for _ in 0..3 {
            assert!(matches!(p.arrive(arrival(2)), Arrived::Held));
        }
        let Arrived::Full(mut back) = p.arrive(arrival(3)) else {
            panic!("no more held than the pool has buffers");
        };
        assert!(back.take_buf().is_none());
    }
}
