//! The read loop every CQ read shares ([`read_delivered`]; [`read_raw`] is it by slot index,
//! for `sread` and wait sets): the aux queue first, then each bound path polled round-robin,
//! in the order [`queue`](super::queue)'s "The read path" gives. [`Delivery`] is where a read
//! puts what it delivers (entries, and optionally sources and owned buffers); [`ReadSink`] is
//! what the polled paths write into — straight into the caller's array, or behind an error
//! onto the aux queue.
//!
//! This is the data path, generic over the format and the NIC: the loop and what it runs per
//! entry are `#[inline(always)]` (the sink's `outcome`, `#[inline]`), so `read::<F>` compiles
//! to one loop in the caller's crate.

use core::sync::atomic::{AtomicUsize, Ordering};

use super::aux::{AuxItem, AuxRow};
use super::slot::{CqState, PATH_BITS};
use crate::addr::FiAddr;
use crate::buf::{owner_of, Buf, Iov, RawBuf};
use crate::domain::Domain;
use crate::engine::{Credits, Outcome, Plain, Sink, Window};
use crate::entry::{Completion, Format};
use crate::hal::Nic;
use crate::{Error, Result};

/// Where `read` puts what it delivers: the entries, and optionally their sources and owned
/// buffers.
pub(super) struct Delivery<'o, 's, F: Format> {
    pub(super) out: &'o mut [F::Entry],
    pub(super) src: Option<&'o mut [FiAddr]>,
    pub(super) bufs: Option<&'o mut [Option<Buf<'s>>]>,
    /// Every buffer of each entry (a gather send's several), for `read_owned_iov`.
    pub(super) iovs: Option<&'o mut [Iov<'s>]>,
    pub(super) owners: &'s [AtomicUsize],
}

impl<'s, F: Format> Delivery<'_, 's, F> {
    /// The same delivery from entry `base` on (what a blocking read that already holds `base`
    /// entries reads into next).
    pub(super) fn from(&mut self, base: usize) -> Delivery<'_, 's, F> {
        Delivery {
            out: &mut self.out[base..],
            src: self.src.as_deref_mut().map(|s| &mut s[base..]),
            bufs: self.bufs.as_deref_mut().map(|b| &mut b[base..]),
            iovs: self.iovs.as_deref_mut().map(|b| &mut b[base..]),
            owners: self.owners,
        }
    }

    /// Writes plain completions `run` as entries `n..`.
    #[inline(always)]
    fn put_plains(&mut self, n: usize, run: &[Plain]) {
        for (e, p) in self.out[n..n + run.len()].iter_mut().zip(run) {
            *e = F::plain(p.context, p.flags, p.len);
        }
        self.fill_plain_extras(n, run.len());
    }

    /// What plain entries `n..n + k` have beside the entry: no source, no owned buffer.
    #[inline(always)]
    fn fill_plain_extras(&mut self, n: usize, k: usize) {
        if let Some(src) = self.src.as_deref_mut() {
            src[n..n + k].fill(FiAddr::NOTAVAIL);
        }
        if let Some(bufs) = self.bufs.as_deref_mut() {
            for b in &mut bufs[n..n + k] {
                *b = None;
            }
        }
        if let Some(iovs) = self.iovs.as_deref_mut() {
            for b in &mut iovs[n..n + k] {
                *b = Iov::new();
            }
        }
    }

    /// Writes completion `c` as entry `n`.
    #[inline(always)]
    fn put(&mut self, n: usize, c: &Completion) {
        self.out[n] = F::fill(c);
        if let Some(src) = self.src.as_deref_mut() {
            src[n] = c.src.unwrap_or(FiAddr::NOTAVAIL);
        }
        let owners = self.owners;
        let owned = move |raw: Option<RawBuf>| {
            raw.and_then(|raw| owner_of(owners, raw.mr).map(|o| Buf::from_raw(raw, o)))
        };
        if let Some(iovs) = self.iovs.as_deref_mut() {
            iovs[n] = Iov::from_bufs(core::iter::once(c.owned).chain(c.extra).filter_map(owned));
        } else {
            // Buffers nobody takes go back to their regions' counts (the handle drops).
            if let Some(bufs) = self.bufs.as_deref_mut() {
                bufs[n] = owned(c.owned);
            } else {
                drop(owned(c.owned));
            }
            c.extra.into_iter().for_each(|raw| drop(owned(raw)));
        }
    }
}

/// What a read hands the paths it polls: entries go straight into the caller's array while
/// there is room and no error has been queued; after an error (which stops the read) or
/// beyond `cap` they go to the aux queue, so nothing overtakes the error and nothing is lost.
struct ReadSink<'x, 'o, 's, F: Format> {
    d: &'x mut Delivery<'o, 's, F>,
    /// Entries in `d` so far.
    n: usize,
    cap: usize,
    /// Entries this sink put in `d` (their credits go back after the poll).
    delivered: usize,
    /// An error was queued.
    stopped: bool,
    st: &'x mut CqState,
    /// The CQ's aux-queue cells, found when something has to be queued (rare).
    row: &'x AuxRow<'x>,
    credits: &'x Credits,
}

impl<'s, F: Format> Sink<'s> for ReadSink<'_, '_, 's, F> {
    type Entry = F::Entry;

    #[inline(always)]
    fn window(&mut self) -> Window<'_, 's, F::Entry> {
        // Entries `n..cap` (`cap` is `out.len()`, and `readfrom`/`read_owned` checked that
        // the sources and buffers are as long); none once an error is queued.
        let (n, end) = (self.n, if self.stopped { self.n } else { self.cap });
        let d = &mut *self.d;
        Window {
            entries: d.out.get_mut(n..end).unwrap_or_default(),
            src: d
                .src
                .as_deref_mut()
                .map(|s| s.get_mut(n..end).unwrap_or_default()),
            bufs: d
                .bufs
                .as_deref_mut()
                .map(|b| b.get_mut(n..end).unwrap_or_default()),
            whole: d.iovs.is_none(),
        }
    }

    #[inline(always)]
    fn write(entry: &mut F::Entry, p: Plain) {
        *entry = F::plain(p.context, p.flags, p.len);
    }

    #[inline(always)]
    fn commit(&mut self, k: usize) {
        if k > 0 {
            self.d.fill_plain_extras(self.n, k);
            self.n += k;
            self.delivered += k;
        }
    }

    #[inline(always)]
    fn commit_filled(&mut self, k: usize) {
        self.n += k;
        self.delivered += k;
    }

    #[inline(always)]
    fn plain(&mut self, run: &[Plain]) -> bool {
        let room = if self.stopped { 0 } else { self.cap - self.n };
        let direct = room.min(run.len());
        self.d.put_plains(self.n, &run[..direct]);
        self.n += direct;
        self.delivered += direct;
        for p in &run[direct..] {
            self.st
                .push_credited(self.row.get(), self.credits, AuxItem::Ok(p.completion()));
        }
        self.stopped
    }

    #[inline]
    fn outcome(&mut self, o: Outcome<'_>) -> bool {
        match o {
            Outcome::Plain(p) => return self.plain(&[p]),
            Outcome::Done(c) if !self.stopped && self.n < self.cap => {
                self.d.put(self.n, c);
                self.delivered += 1;
                self.n += 1;
            }
            Outcome::Done(c) => {
                self.st
                    .push_credited(self.row.get(), self.credits, AuxItem::Ok(*c))
            }
            Outcome::Failed(e) => {
                self.st
                    .push_credited(self.row.get(), self.credits, AuxItem::Err(*e));
                self.stopped = true;
            }
        }
        self.stopped
    }
}

/// The path slots a read visits, round-robin from `start`: `start..len`, then `0..start`. A
/// table with a bit for every slot (`PATH_BITS` or fewer) gives the ones the CQ's mask of
/// serving paths has ([`CqSlot::paths`](super::slot::CqSlot::paths)), that mask rotated so that
/// bit 0 is `start`: a CQ bound to one path does not walk the whole table. A larger table is
/// walked whole, each slot asked whether it serves the CQ.
struct Visits {
    /// The mask, rotated; its lowest bit the next slot.
    bits: usize,
    start: usize,
    /// A larger table's walk (nothing left to walk for one with a bit for each slot).
    walk: Walk,
}

/// The walk over a table too large for the mask: every slot, each asked.
struct Walk {
    len: usize,
    /// Slots still to ask.
    left: usize,
    /// The next slot to ask.
    at: usize,
}

impl Visits {
    #[inline(always)]
    fn new(len: usize, start: usize, serving: usize) -> Self {
        let narrow = len <= PATH_BITS;
        Visits {
            bits: if narrow {
                serving.rotate_right(start as u32)
            } else {
                0
            },
            start,
            walk: Walk {
                len,
                left: if narrow { 0 } else { len },
                at: start,
            },
        }
    }

    /// The next slot to visit; `serves` answers for a slot of a table walked whole.
    #[inline(always)]
    fn next(&mut self, serves: impl Fn(usize) -> bool) -> Option<usize> {
        if self.bits != 0 {
            let i = (self.bits.trailing_zeros() as usize + self.start) % PATH_BITS;
            self.bits &= self.bits - 1;
            Some(i)
        } else if self.walk.left == 0 {
            None
        } else {
            self.walk.next(serves)
        }
    }
}

impl Walk {
    /// The next slot that serves (out of line: most tables have a bit for each slot, and
    /// the walk's state in memory keeps the mask's in registers).
    #[inline(never)]
    fn next(&mut self, serves: impl Fn(usize) -> bool) -> Option<usize> {
        while self.left > 0 {
            self.left -= 1;
            let i = self.at;
            self.at = if i + 1 < self.len { i + 1 } else { 0 };
            if serves(i) {
                return Some(i);
            }
        }
        None
    }
}

/// `read` of CQ `index`, as a function of the slot rather than of a handle: what `read`,
/// `sread` and a wait set share. An empty `out` is how waiting checks for "anything queued"
/// without taking it; the format then does not matter (a wait set checks CQs of any format as
/// `Context`). Kept exactly the shape `read` had, so `read::<F>` compiles to the same loop.
#[inline(always)]
pub(super) fn read_raw<N: Nic, const D: usize, F: Format>(
    domain: &Domain<'_, N, D>,
    index: usize,
    out: &mut [F::Entry],
) -> Result<usize> {
    read_delivered(
        domain,
        index,
        &mut Delivery::<'_, '_, F> {
            out,
            src: None,
            bufs: None,
            iovs: None,
            owners: domain.owners(),
        },
    )
}

/// Moves every completion the devices have already written back on the paths that serve CQ
/// `index` into its aux queue, in each path's order: what happens at the moment the CQ
/// overruns, so that the completions that came before the overrun stay readable (fi_cq(3):
/// "Read operations will continue to return any valid, non-corrupted completions") and none
/// that comes after it is ever polled. Every one of them holds a credit, so the aux queue has
/// room for all. Called with the CQ's state locked (`st`), before the overrun is declared.
pub(super) fn drain_to_aux<N: Nic, const D: usize, F: Format>(
    domain: &Domain<'_, N, D>,
    index: usize,
    st: &mut CqState,
) {
    let ctx = domain.poll_ctx(index);
    let mut none = Delivery::<'_, '_, F> {
        out: &mut [],
        src: None,
        bufs: None,
        iovs: None,
        owners: domain.owners(),
    };
    for pslot in domain.paths() {
        if !pslot.serves(index) {
            continue;
        }
        let mut pguard = pslot.state.lock();
        let Some(ps) = pguard.as_mut().filter(|ps| ps.serves(index)) else {
            continue;
        };
        loop {
            let mut sink = ReadSink {
                d: &mut none,
                n: 0,
                cap: 0,
                delivered: 0,
                stopped: false,
                st: &mut *st,
                row: &domain.aux_cells(index),
                credits: ctx.cq,
            };
            // Nothing is delivered (`cap` 0): everything goes to the aux queue. A poll stops
            // after an error's chunk, so poll again until the queue has nothing more.
            if ps.poll(D, &ctx, &mut sink) == 0 {
                break;
            }
        }
        pslot.publish_fault(ps);
    }
}

/// The read loop every read shares, delivering into `d` (entries, and optionally sources and
/// owned buffers).
#[inline(always)]
pub(super) fn read_delivered<'s, N: Nic, const D: usize, F: Format>(
    domain: &'s Domain<'_, N, D>,
    index: usize,
    d: &mut Delivery<'_, 's, F>,
) -> Result<usize> {
    let cap = d.out.len();
    let slot = &domain.cqs()[index];
    let ctx = domain.poll_ctx(index);
    let credits = ctx.cq;
    let mut guard = slot.state.lock();
    let Some(st) = guard.as_mut() else {
        return Err(Error::OpBadState);
    };
    let cells = domain.aux_cells(index);
    let mut n = 0;
    if st.ring.len > 0 {
        // The aux queue's cells are looked up only when it holds something (rare on a read);
        // the sink looks them up itself if it has to queue.
        let row = cells.get();
        while n < cap {
            let mut aux = st.aux(row);
            match aux.front() {
                Some(AuxItem::Ok(c)) => {
                    d.put(n, &c);
                    aux.pop();
                    credits.release_credit();
                    n += 1;
                }
                Some(AuxItem::Err(_)) if n == 0 => return Err(Error::Avail),
                Some(AuxItem::Err(_)) => return Ok(n),
                None => break,
            }
        }
        // Hardware is polled only behind an empty aux queue, so nothing overtakes what it
        // holds; and never on an overrun CQ: what the devices had completed when it overran
        // was moved into the aux queue then (`drain_to_aux`), and fi_cq(3) has an overrun CQ
        // report no completion that came after ("may not be used to report additional
        // completions once the overrun occurs").
        if st.ring.len > 0 {
            return Ok(n);
        }
    }

    let paths = domain.paths();
    let len = paths.len();
    // Round-robin from `start`, wrapping by comparison rather than by division.
    let start = if st.next < len { st.next } else { 0 };
    st.next = if start + 1 < len { start + 1 } else { 0 };
    // A sealed (overrun) CQ polls nothing: the loop ends before its first path.
    let mut stopped = st.sealed;
    let mut visits = Visits::new(len, start, slot.paths.load(Ordering::Acquire));
    while let Some(i) = visits.next(|i| paths[i].serves(index)) {
        if stopped || (cap != 0 && n == cap) {
            break;
        }
        let Some(pslot) = paths.get(i) else {
            continue;
        };
        let mut pguard = pslot.state.lock();
        let Some(ps) = pguard.as_mut() else {
            continue;
        };
        if !ps.serves(index) {
            continue;
        }
        // `cap` 0 still takes one completion per queue, into the aux queue.
        let budget = if cap == 0 { 1 } else { cap - n };
        let mut sink = ReadSink {
            d: &mut *d,
            n,
            cap,
            delivered: 0,
            stopped,
            st: &mut *st,
            row: &cells,
            credits,
        };
        ps.poll(budget, &ctx, &mut sink);
        // Credits of delivered entries go back once per queue, not once per entry: one atomic
        // add instead of many.
        credits.release_credits(sink.delivered);
        (n, stopped) = (sink.n, sink.stopped);
        pslot.publish_fault(ps);
    }

    let queued = st.ring.len;
    if n > 0 || (cap == 0 && queued > 0) {
        Ok(n)
    } else if queued > 0 {
        // Nothing delivered and something queued: an error is at the head.
        Err(Error::Avail)
    } else if credits.is_overrun() {
        // Overrun inside a poll (a critical fault's report finding no credit): seal it now.
        st.sealed = true;
        Err(Error::Overrun)
    } else {
        Err(Error::Again)
    }
}

#[cfg(test)]
mod tests {
    extern crate std;

    use std::vec;
    use std::vec::Vec;

    use super::{Visits, PATH_BITS};

    /// The order the read visited slots in before the mask: every slot from `start` round,
    /// those that serve.
    fn walked(len: usize, start: usize, serves: impl Fn(usize) -> bool) -> Vec<usize> {
        (0..len)
            .map(|k| (start + k) % len)
            .filter(|&i| serves(i))
            .collect()
    }

    fn visited(
        len: usize,
        start: usize,
        mask: usize,
        serves: impl Fn(usize) -> bool,
    ) -> Vec<usize> {
        let mut v = Visits::new(len, start, mask);
        core::iter::from_fn(|| v.next(&serves)).collect()
    }

    #[test]
    fn visits_are_the_serving_slots_in_the_walks_order_with_or_without_a_bit_for_each() {
        // A few masks of every shape: none, all, single bits, alternating, random-ish.
        let mut masks = vec![0, usize::MAX, 1, 1 << (PATH_BITS - 1), 0x5555_5555];
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..20 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            masks.push(x as usize);
        }
        for len in [1, 2, 3, 8, PATH_BITS - 1, PATH_BITS] {
            for start in 0..len {
                for &mask in &masks {
                    let mask = if len == PATH_BITS {
                        mask
                    } else {
                        mask & ((1 << len) - 1)
                    };
                    let serves = |i: usize| mask >> i & 1 != 0;
                    // `serves` is not asked where the mask has a bit for each slot.
                    let order = visited(len, start, mask, |_| unreachable!());
                    assert_eq!(order, walked(len, start, serves), "{len} {start} {mask:x}");
                }
            }
        }
        // A larger table ignores the mask and asks each slot.
        let len = PATH_BITS + 5;
        for start in [0, 1, PATH_BITS - 1, PATH_BITS, len - 1] {
            for &mask in &masks {
                let serves = |i: usize| (mask >> (i % PATH_BITS)) & 1 != 0 || i == len - 1;
                let order = visited(len, start, 0, serves);
                assert_eq!(order, walked(len, start, serves), "{start} {mask:x}");
            }
        }
        assert_eq!(visited(0, 0, 0, |_| true), Vec::<usize>::new());
    }
}
