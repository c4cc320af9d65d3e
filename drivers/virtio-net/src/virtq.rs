//! The split virtqueue (virtio 1.2 §2.7), driver side: safe bookkeeping over one DMA region,
//! no register access.
//!
//! One region holds the descriptor table, the driver (avail) and device (used) areas, and two
//! areas of the driver's own: an indirect descriptor table and a 12-byte network header per
//! descriptor id. Every buffer is one ring descriptor pointing to its id's indirect table
//! (`VIRTIO_RING_F_INDIRECT_DESC`), so a ring of `N` entries holds `N` buffers whatever their
//! segment count, and a used entry's id names exactly one buffer. What does not change from
//! one buffer to the next is written once, when a data queue opens: a receive queue's whole
//! tables but the buffer's address ([`Virtq::set_rx_chains`], so a post writes one word), a
//! transmit queue's ring descriptors and the header descriptor heading each table
//! ([`Virtq::set_tx_chains`], so a push writes only its segments' descriptors). The control
//! queue writes a whole chain at each command ([`Virtq::push`]).
//!
//! Ids are handed out from a free stack, so buffers may come back in any order (§2.7.13: a
//! device may use buffers out of order). A private shadow keeps, per id, the caller's token,
//! the state (free, out, retired), the capacity the device may write and the doorbell that
//! made it available, and, per avail slot, which id was put there.
//!
//! Nothing the device writes is trusted (DESIGN decision 4):
//! * `used.idx` may not move further than the number of buffers the device holds; if it does,
//!   the whole update is refused and counted ([`Virtq::errors`]) — the queue stalls until a
//!   reset, never reads a slot the device did not fill for it;
//! * a used element whose id is out of range, or names a buffer the device does not hold, is
//!   skipped and counted; a length is handed to the queue type to check against the capacity;
//! * a used element read under a `used.idx` read made before its id was last made available
//!   is skipped and counted too: it was written before the device could have seen that buffer,
//!   so it is a stale (repeated) entry for the id's previous buffer, not this one's completion.
//!
//! Both id checks are a comparison each, with nothing done per buffer at the doorbell: a push
//! records the number of the doorbell that will make its buffer available, a read of
//! `used.idx` the number of doorbells rung before it, and an id is the device's to return when
//! it is out and its doorbell is not after that read.
//!
//! Memory ordering: descriptors and avail entries are written, then a release fence, then
//! `avail.idx`; then a full fence before the notification-suppression fields are read (§2.7.13.3
//! and .4); `used.idx` is read, then an acquire fence, then the elements.

use core::sync::atomic::{fence, Ordering};

use ringfab_hal::{DmaBlock, DmaRegion, Error, FixedLen, PushError, Token, TxSegment};

use crate::desc::{
    flags, need_event, Desc, Layout, AVAIL_F_NO_INTERRUPT, INDIRECT_ENTRIES, NET_HDR_LEN,
    USED_F_NO_NOTIFY,
};
use crate::regs::hdr;

/// Per-id state.
mod st {
    pub(super) const FREE: u8 = 0;
    /// Pushed and not back yet: waiting for its doorbell, or the device's.
    pub(super) const OUT: u8 = 0x80;
    /// Taken back at a reset and found used: completes with its length.
    pub(super) const RETIRED_DONE: u8 = 0x40;
    /// Taken back at a reset unused: completes flushed.
    pub(super) const RETIRED_FLUSHED: u8 = 0x20;
    /// With one of the above: report a success too (`Report::Always`, every receive).
    pub(super) const ALWAYS: u8 = 1;
}

/// A transmit buffer's network header.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Hdr {
    /// Asking for nothing: all zero (flags 0, `gso_type` NONE).
    Out,
    /// Asking the device to complete a partial checksum (`VIRTIO_NET_HDR_F_NEEDS_CSUM` with
    /// `csum_start`, `csum_offset`; §5.1.6.2).
    Checksum {
        /// `csum_start`.
        start: u16,
        /// `csum_offset`.
        offset: u16,
    },
}

/// One buffer of a chain.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Seg {
    pub(crate) addr: u64,
    pub(crate) len: u32,
    pub(crate) write: bool,
}

/// A buffer back from the device (or from a reset).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Used {
    pub(crate) id: u16,
    pub(crate) token: Token,
    /// What the device wrote as `len` (unchecked); 0 for a flushed buffer.
    pub(crate) len: u32,
    /// Bytes the device may write (header included), as pushed.
    pub(crate) cap: u32,
    /// Whether a success is reported.
    pub(crate) always: bool,
    /// Taken back by a reset without being used.
    pub(crate) flushed: bool,
}

/// The length of a queue of `N` entries' region: what its [`DmaBlock`] checks offsets
/// against, a constant, so that the checks of offsets computed from masked indices fold away.
pub(crate) struct QueueLen<const N: usize>;

impl<const N: usize> FixedLen for QueueLen<N> {
    const LEN: usize = Layout::new(N).len;
}

/// A split virtqueue of `N` entries (N a power of two) in `mem`.
pub(crate) struct Virtq<D: DmaRegion, const N: usize> {
    mem: DmaBlock<D, QueueLen<N>>,
    tokens: [Token; N],
    state: [u8; N],
    cap: [u32; N],
    /// Length found in the used ring at a reset (for `RETIRED_DONE`).
    done_len: [u32; N],
    /// The id put in each avail slot (for a reset to flush in push order).
    order: [u16; N],
    /// Per id, the number of the doorbell that makes (or made) it available.
    doorbell_of: [u32; N],
    /// Per transmit id, whether its header asks for a checksum (a plain push then clears it).
    csum_hdr: [bool; N],
    /// Doorbells that made buffers available (wrapping).
    doorbells: u32,
    /// [`doorbells`](Self::doorbells) when `used.idx` was last read and found new entries:
    /// those entries, up to [`used_seen`](Self::used_seen), were all written before that
    /// read, so none is the completion of a buffer a later doorbell made available.
    /// (Wrapping: a buffer out across 2^31 doorbells would have its entry refused, and come
    /// back at the flush.)
    seen_doorbells: u32,
    free: [u16; N],
    nfree: usize,
    /// Retired ids, returned first by `next`.
    retired: [u16; N],
    ret_head: usize,
    ret_len: usize,
    /// Next avail index to fill; the one last published; the next used index to read.
    avail_idx: u16,
    published: u16,
    last_used: u16,
    /// The device's used index as last read: entries up to it are known to be there, so a
    /// poll reads the index once per batch, not once per buffer.
    used_seen: u16,
    /// Ids the device holds (published, not yet returned).
    in_device: usize,
    event_idx: bool,
    armed: bool,
    errors: u64,
}

impl<D: DmaRegion, const N: usize> Virtq<D, N> {
    const CHECK: () = assert!(N.is_power_of_two() && N <= 32768, "bad virtqueue size");
    /// Where everything lives: a constant, so every offset on the data path is an immediate.
    const LAY: Layout = Layout::new(N);

    /// A queue over `mem`, which holds [`Layout::new`]`(N).len` bytes. Interrupts start
    /// suppressed.
    ///
    /// # Errors
    /// [`Error::DmaAlloc`] if `mem` is shorter (a platform that gave less than was asked).
    pub(crate) fn new(mem: D, event_idx: bool) -> Result<Self, Error> {
        let () = Self::CHECK;
        let mem = DmaBlock::new(mem).map_err(|_| Error::DmaAlloc { len: Self::LAY.len })?;
        let mut free = [0u16; N];
        for (i, f) in free.iter_mut().enumerate() {
            // Popped from the end: id 0 first.
            *f = (N - 1 - i) as u16;
        }
        let q = Virtq {
            mem,
            tokens: [Token(0); N],
            state: [st::FREE; N],
            cap: [0; N],
            done_len: [0; N],
            order: [0; N],
            doorbell_of: [0; N],
            csum_hdr: [false; N],
            doorbells: 0,
            seen_doorbells: 0,
            free,
            nfree: N,
            retired: [0; N],
            ret_head: 0,
            ret_len: 0,
            avail_idx: 0,
            published: 0,
            last_used: 0,
            used_seen: 0,
            in_device: 0,
            event_idx,
            armed: false,
            errors: 0,
        };
        q.write_arming();
        Ok(q)
    }

    /// The queue's memory (for the addresses given to the device).
    pub(crate) fn mem(&self) -> &D {
        self.mem.region()
    }

    /// The layout inside [`mem`](Self::mem).
    pub(crate) fn layout(&self) -> &'static Layout {
        &Self::LAY
    }

    /// Ids free for push.
    #[inline]
    pub(crate) fn free(&self) -> usize {
        self.nfree
    }

    /// Buffers pushed and not yet returned by [`next`](Self::next).
    #[inline]
    pub(crate) fn pending(&self) -> usize {
        N - self.nfree
    }

    /// Used entries the driver refused so far (bad id, id not held by the device, used index
    /// jump).
    pub(crate) fn errors(&self) -> u64 {
        self.errors
    }

    /// A free id, taken.
    #[inline(always)]
    fn take_id(&mut self) -> Result<usize, PushError> {
        if self.nfree == 0 {
            return Err(PushError::Full { needed: 1, free: 0 });
        }
        self.nfree -= 1;
        // `nfree` stays within `N` and the stack holds ids below `N` only, so the masks change
        // nothing: they let the compiler drop the bounds checks of every per-id array.
        Ok(usize::from(self.free[self.nfree & (N - 1)]) & (N - 1))
    }

    /// Puts id `i` in the next avail slot under `token`, with state `state`: out, to be made
    /// available by the next doorbell.
    #[inline(always)]
    fn make_available(&mut self, i: usize, token: Token, state: u8) -> u16 {
        let id = i as u16;
        let slot = self.avail_idx;
        self.mem
            .write_u16(Self::LAY.avail_ring(usize::from(slot)), id);
        self.order[usize::from(slot) & (N - 1)] = id;
        self.avail_idx = slot.wrapping_add(1);
        self.tokens[i] = token;
        self.state[i] = state;
        self.doorbell_of[i] = self.doorbells.wrapping_add(1);
        id
    }

    /// Queues one control buffer: the chain `segs` (at most [`INDIRECT_ENTRIES`]), written
    /// whole, under `token`; a success is reported, and the device may write up to 1 byte.
    pub(crate) fn push(&mut self, segs: &[Seg], token: Token) -> Result<u16, PushError> {
        let count = segs.len();
        if count == 0 || count > INDIRECT_ENTRIES {
            return Err(PushError::Segments {
                count,
                max: INDIRECT_ENTRIES,
            });
        }
        let i = self.take_id()?;
        for (k, &s) in segs.iter().enumerate() {
            self.write_indirect(i, k, s, k + 1 == count);
        }
        self.write_ring_desc(i, count);
        self.cap[i] = 1;
        Ok(self.make_available(i, token, st::OUT | st::ALWAYS))
    }

    /// Makes every id's chain a transmit chain, once, before the first
    /// [`push_tx`](Self::push_tx): the ring descriptor pointing to the id's whole indirect
    /// table, and the table's first descriptor pointing to the id's (zeroed) network header,
    /// device-readable and chained to the segments a push writes after it. The table's length
    /// is the table's room, [`INDIRECT_ENTRIES`] descriptors, whatever a chain uses: the chain
    /// ends at the first descriptor without `NEXT` (§2.7.5.3: "An indirect descriptor without
    /// a valid next field ... signals the end"), so no frame rewrites the ring descriptor.
    /// As for [`set_rx_chains`](Self::set_rx_chains), a free id's table is the driver's.
    pub(crate) fn set_tx_chains(&mut self) {
        for i in 0..N {
            let hdr = Seg {
                addr: self.mem().iova().0 + Self::LAY.hdr_of(i) as u64,
                len: NET_HDR_LEN as u32,
                write: false,
            };
            self.write_indirect(i, 0, hdr, false);
            self.write_ring_desc(i, INDIRECT_ENTRIES);
        }
    }

    /// Queues one transmit frame, the segments `segs` (1 to [`INDIRECT_ENTRIES`]` - 1`, as the
    /// caller checked) after a header `hdr`, under `token`, into the chain
    /// [`set_tx_chains`](Self::set_tx_chains) wrote for its id: the segments' descriptors,
    /// the avail entry, the shadow, and the header's first dword only when it changes. `cap`
    /// is kept for the caller (the frame's length, for the statistics).
    #[inline(always)]
    pub(crate) fn push_tx(
        &mut self,
        segs: &[TxSegment],
        hdr: Hdr,
        token: Token,
        always: bool,
        cap: u32,
    ) -> Result<u16, PushError> {
        let i = self.take_id()?;
        let base = Self::LAY.hdr_of(i);
        match hdr {
            Hdr::Checksum { start, offset } => {
                self.mem.write_u32(base, u32::from(hdr::F_NEEDS_CSUM));
                self.mem.write_u32(base + 4, u32::from(start) << 16);
                self.mem.write_u32(base + 8, u32::from(offset));
                self.csum_hdr[i] = true;
            }
            // The device reads `csum_start`/`csum_offset` only under `NEEDS_CSUM`, so a
            // header that asked for a checksum is cleared by its first dword (flags,
            // gso_type NONE, hdr_len), and one that asked for nothing is left as it is.
            Hdr::Out => {
                if self.csum_hdr[i] {
                    self.mem.write_u32(base, 0);
                    self.csum_hdr[i] = false;
                }
            }
        }
        let last = segs.len().wrapping_sub(1);
        for (k, s) in segs.iter().enumerate() {
            let d = Desc {
                addr: s.iova.0,
                len: s.len.into(),
                flags: if k == last { 0 } else { flags::NEXT },
                next: (k + 2) as u16,
            }
            .emit();
            let at = Self::LAY.indirect_desc(i, k + 1);
            self.mem.write_u64(at, d[0]);
            self.mem.write_u64(at + 8, d[1]);
        }
        self.cap[i] = cap;
        let state = st::OUT | if always { st::ALWAYS } else { 0 };
        Ok(self.make_available(i, token, state))
    }

    /// Makes every id's chain a receive chain, once, before the first
    /// [`push_rx`](Self::push_rx): the ring descriptor pointing to the id's indirect table, and
    /// in that table the device-writable header, a device-writable buffer of `buf_len` bytes
    /// (its address left to `push_rx`) and, if given, the device-writable `tail` every chain
    /// ends with. None of it changes from one post to the next, so a post writes only the
    /// buffer's address. The device reads a chain only through an avail entry naming its head
    /// (§2.7.13), and a free id is named by none, so the table of a free id is the driver's to
    /// write; a queue reset (§2.6.1) leaves the tables as they are (`take_back` starts only the
    /// indices over).
    pub(crate) fn set_rx_chains(&mut self, buf_len: u32, tail: Option<Seg>) {
        let count = 2 + usize::from(tail.is_some());
        for i in 0..N {
            let hdr = Seg {
                addr: self.mem().iova().0 + Self::LAY.hdr_of(i) as u64,
                len: NET_HDR_LEN as u32,
                write: true,
            };
            let buf = Seg {
                addr: 0,
                len: buf_len,
                write: true,
            };
            for (k, s) in [Some(hdr), Some(buf), tail]
                .into_iter()
                .flatten()
                .enumerate()
            {
                self.write_indirect(i, k, s, k + 1 == count);
            }
            self.write_ring_desc(i, count);
            // What the device may write into the caller's buffer, as `push` records it.
            self.cap[i] = buf_len;
        }
    }

    /// Queues one receive buffer at `addr` under `token`, into the chain
    /// [`set_rx_chains`](Self::set_rx_chains) wrote for its id: one descriptor word, the avail
    /// entry and the shadow. A success is always reported.
    #[inline(always)]
    pub(crate) fn push_rx(&mut self, addr: u64, token: Token) -> Result<u16, PushError> {
        let i = self.take_id()?;
        // The buffer is the chain's second descriptor, after the header; its address is the
        // descriptor's first word (`Desc::emit`).
        self.mem.write_u64(Self::LAY.indirect_desc(i, 1), addr);
        Ok(self.make_available(i, token, st::OUT | st::ALWAYS))
    }

    /// Descriptor `k` of id `i`'s indirect table: `s`, chained to `k + 1` unless `last`.
    #[inline]
    fn write_indirect(&self, i: usize, k: usize, s: Seg, last: bool) {
        let d = Desc {
            addr: s.addr,
            len: s.len,
            flags: if s.write { flags::WRITE } else { 0 } | if last { 0 } else { flags::NEXT },
            next: (k + 1) as u16,
        };
        let w = d.emit();
        let at = Self::LAY.indirect_desc(i, k);
        self.mem.write_u64(at, w[0]);
        self.mem.write_u64(at + 8, w[1]);
    }

    /// Ring descriptor `i`: id `i`'s indirect table of `count` descriptors (§2.7.5.3).
    #[inline]
    fn write_ring_desc(&self, i: usize, count: usize) {
        let ring = Desc {
            addr: self.mem().iova().0 + Self::LAY.indirect_desc(i, 0) as u64,
            len: (count * 16) as u32,
            flags: flags::INDIRECT,
            next: 0,
        }
        .emit();
        self.mem.write_u64(Self::LAY.ring_desc(i), ring[0]);
        self.mem.write_u64(Self::LAY.ring_desc(i) + 8, ring[1]);
    }

    /// Publishes everything pushed (one release fence, one `avail.idx` store) and says whether
    /// the device asked to be notified of it (§2.7.13.4: `avail_event` with `EVENT_IDX`, else
    /// `VIRTQ_USED_F_NO_NOTIFY`). Nothing pushed: nothing done, `false`. Nothing is done per
    /// buffer: each push recorded this doorbell's number already.
    #[inline]
    pub(crate) fn publish(&mut self) -> bool {
        let (old, new) = (self.published, self.avail_idx);
        if old == new {
            return false;
        }
        self.doorbells = self.doorbells.wrapping_add(1);
        self.in_device += usize::from(new.wrapping_sub(old));
        // Entries and descriptors before the index the device reads them by.
        fence(Ordering::Release);
        self.mem.write_u16(Self::LAY.avail_idx(), new);
        self.published = new;
        // The index store before the suppression fields are read (§2.7.13.3 step 4).
        fence(Ordering::SeqCst);
        if self.event_idx {
            need_event(self.mem.read_u16(Self::LAY.avail_event()), new, old)
        } else {
            self.mem.read_u16(Self::LAY.used) & USED_F_NO_NOTIFY == 0
        }
    }

    /// The next buffer back: retired ones first, then the used ring. `None` when nothing is
    /// (acceptably) used.
    #[inline(always)]
    pub(crate) fn next(&mut self) -> Option<Used> {
        loop {
            if self.last_used == self.used_seen {
                // Retired buffers come before any entry of the used ring: a reset sets the
                // indices equal, so the first `next` after it comes here.
                if self.ret_len > 0 {
                    return Some(self.next_retired());
                }
                let used_idx = self.mem.read_u16(Self::LAY.used_idx());
                let ready = used_idx.wrapping_sub(self.last_used);
                if ready == 0 {
                    return None;
                }
                if usize::from(ready) > self.in_device {
                    // The device claims more buffers than it was given: refuse the update.
                    self.errors += 1;
                    return None;
                }
                // Elements are read only after the index that covers them.
                fence(Ordering::Acquire);
                self.used_seen = used_idx;
                self.seen_doorbells = self.doorbells;
            }
            let at = Self::LAY.used_ring(usize::from(self.last_used));
            let id = self.mem.read_u32(at);
            let len = self.mem.read_u32(at + 4);
            self.last_used = self.last_used.wrapping_add(1);
            match self.take(id) {
                Some(i) => return Some(self.release(i, len, false)),
                None => self.errors += 1,
            }
        }
    }

    /// The next retired buffer (there is one).
    #[inline(never)]
    fn next_retired(&mut self) -> Used {
        let i = usize::from(self.retired[self.ret_head % N]);
        self.ret_head = self.ret_head.wrapping_add(1);
        self.ret_len -= 1;
        let flushed = self.state[i] & st::RETIRED_FLUSHED != 0;
        let len = if flushed { 0 } else { self.done_len[i] };
        self.release(i, len, flushed)
    }

    /// The index of id `id` as the device returned it, if it names a buffer that is out and
    /// was made available by a doorbell rung before the `used.idx` read that covers the entry
    /// (issue 14's hostile suite: a repeated id completed a buffer posted again under it,
    /// never filled, which the device then wrote after it was handed back).
    #[inline(always)]
    fn take(&mut self, id: u32) -> Option<usize> {
        let i = usize::try_from(id).ok().filter(|&i| i < N)?;
        // `seen - doorbell_of` is negative (as a wrapping difference) for a doorbell after
        // the read: the buffer's, or a later one's for a buffer not yet made available.
        let after = (self.seen_doorbells.wrapping_sub(self.doorbell_of[i]) as i32) < 0;
        if self.state[i] & st::OUT == 0 || after {
            return None;
        }
        self.in_device -= 1;
        Some(i)
    }

    /// Frees id `i` and describes it.
    #[inline(always)]
    fn release(&mut self, i: usize, len: u32, flushed: bool) -> Used {
        let s = self.state[i];
        self.state[i] = st::FREE;
        // An id comes back only after it was taken, so `nfree < N` here: the mask changes
        // nothing (as in `take_id`).
        self.free[self.nfree & (N - 1)] = i as u16;
        self.nfree += 1;
        Used {
            id: i as u16,
            token: self.tokens[i],
            len,
            cap: self.cap[i],
            always: s & st::ALWAYS != 0,
            flushed,
        }
    }

    /// After a completed queue reset (the device no longer touches the ring): buffers the
    /// device used before the reset complete with their length, every other outstanding one
    /// flushed, all through [`next`](Self::next); the ring memory starts over at index 0.
    pub(crate) fn take_back(&mut self) {
        // Used entries written before the reset: the same checks as `next`. Every buffer the
        // device may hold was made available before this read of the index.
        self.seen_doorbells = self.doorbells;
        let used_idx = self.mem.read_u16(Self::LAY.used_idx());
        let ready = used_idx.wrapping_sub(self.last_used);
        if usize::from(ready) <= self.in_device {
            fence(Ordering::Acquire);
            for k in 0..ready {
                let at = Self::LAY.used_ring(usize::from(self.last_used.wrapping_add(k)));
                let (id, len) = (self.mem.read_u32(at), self.mem.read_u32(at + 4));
                match self.take(id) {
                    Some(i) => self.retire(i, st::RETIRED_DONE, len),
                    None => self.errors += 1,
                }
            }
        } else {
            self.errors += 1;
        }
        // Everything still out (made available or only queued), in push order.
        let oldest = self.avail_idx.wrapping_sub(self.pending() as u16);
        let mut i = oldest;
        while i != self.avail_idx {
            let id = usize::from(self.order[usize::from(i) % N]);
            if self.state[id] & st::OUT != 0 {
                self.retire(id, st::RETIRED_FLUSHED, 0);
            }
            i = i.wrapping_add(1);
        }
        // Anything the order shadow missed (ids pushed long ago and overtaken): by id.
        for id in 0..N {
            if self.state[id] & st::OUT != 0 {
                self.retire(id, st::RETIRED_FLUSHED, 0);
            }
        }
        self.in_device = 0;
        self.avail_idx = 0;
        self.published = 0;
        self.last_used = 0;
        self.used_seen = 0;
        for off in [
            Self::LAY.avail,
            Self::LAY.avail_idx(),
            Self::LAY.used,
            Self::LAY.used_idx(),
            Self::LAY.avail_event(),
        ] {
            self.mem.write_u16(off, 0);
        }
        self.write_arming();
    }

    fn retire(&mut self, i: usize, state: u8, len: u32) {
        self.state[i] = self.state[i] & st::ALWAYS | state;
        self.done_len[i] = len;
        self.retired[self.ret_head.wrapping_add(self.ret_len) % N] = i as u16;
        self.ret_len += 1;
    }

    /// Asks for (`true`) or suppresses interrupts: with `EVENT_IDX`, `used_event` at the next
    /// used index (or half the index space away), else `VIRTQ_AVAIL_F_NO_INTERRUPT` (§2.7.7,
    /// §2.7.10).
    pub(crate) fn arm(&mut self, armed: bool) {
        self.armed = armed;
        self.write_arming();
        // Visible to the device before the caller re-checks the ring.
        fence(Ordering::SeqCst);
    }

    fn write_arming(&self) {
        if self.event_idx {
            let event = if self.armed {
                self.last_used
            } else {
                self.last_used.wrapping_add(0x8000)
            };
            self.mem.write_u16(Self::LAY.used_event(), event);
        } else {
            let f = if self.armed { 0 } else { AVAIL_F_NO_INTERRUPT };
            self.mem.write_u16(Self::LAY.avail, f);
        }
    }

    /// After a poll: an armed queue with `EVENT_IDX` moves `used_event` to the next entry, so
    /// that it stays armed (the event is one-shot otherwise).
    #[inline]
    pub(crate) fn end_poll(&mut self) {
        if self.armed && self.event_idx {
            self.mem.write_u16(Self::LAY.used_event(), self.last_used);
        }
    }

    /// The network header the device wrote for id `id` (its first 32 bits: flags, gso_type,
    /// hdr_len).
    #[inline(always)]
    pub(crate) fn rx_hdr(&self, id: u16) -> u32 {
        self.mem.read_u32(Self::LAY.hdr_of(usize::from(id)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringfab_emu::null::{HostDma, NullPlatform};
    use ringfab_emu::VirtioNetPci;
    use ringfab_hal::{Iova, Platform};

    const N: usize = 4;
    const LAY: Layout = Layout::new(N);

    fn queue() -> Virtq<HostDma, N> {
        let p = NullPlatform::<VirtioNetPci>::new();
        let mem = p.alloc_dma(LAY.len).unwrap();
        Virtq::new(mem, false).unwrap()
    }

    fn seg(addr: u64, len: u16) -> TxSegment {
        TxSegment {
            iova: Iova(addr),
            len,
        }
    }

    /// Descriptor `k` of id `id`'s indirect table, as the device reads it.
    fn indirect(q: &Virtq<HostDma, N>, id: u16, k: usize) -> Desc {
        let at = LAY.indirect_desc(usize::from(id), k);
        Desc::parse([q.mem().read_u64(at), q.mem().read_u64(at + 8)])
    }

    /// Plays the device: uses `ids` (with length 0), in order, after what it used before.
    fn use_ids(q: &Virtq<HostDma, N>, ids: &[u16]) {
        let mut idx = q.mem().read_u16(LAY.used_idx());
        for &id in ids {
            q.mem()
                .write_u32(LAY.used_ring(usize::from(idx)), u32::from(id));
            q.mem().write_u32(LAY.used_ring(usize::from(idx)) + 4, 0);
            idx = idx.wrapping_add(1);
        }
        q.mem().write_u16(LAY.used_idx(), idx);
    }

    #[test]
    fn a_transmit_chain_is_its_header_then_its_segments_in_the_whole_table() {
        let mut q = queue();
        q.set_tx_chains();
        let id = q
            .push_tx(
                &[seg(0x1000, 60), seg(0x2000, 4)],
                Hdr::Out,
                Token(7),
                true,
                64,
            )
            .unwrap();
        let i = usize::from(id);
        let ring = Desc::parse([
            q.mem().read_u64(LAY.ring_desc(i)),
            q.mem().read_u64(LAY.ring_desc(i) + 8),
        ]);
        assert_eq!(ring.flags, flags::INDIRECT);
        assert_eq!(ring.len as usize, INDIRECT_ENTRIES * 16, "the table's room");
        assert_eq!(ring.addr, q.mem().iova().0 + LAY.indirect_desc(i, 0) as u64);
        let hdr = indirect(&q, id, 0);
        assert_eq!(hdr.addr, q.mem().iova().0 + LAY.hdr_of(i) as u64);
        assert_eq!((hdr.len, hdr.flags, hdr.next), (12, flags::NEXT, 1));
        let first = indirect(&q, id, 1);
        assert_eq!((first.addr, first.len), (0x1000, 60));
        assert_eq!((first.flags, first.next), (flags::NEXT, 2));
        let last = indirect(&q, id, 2);
        assert_eq!(
            (last.addr, last.len, last.flags),
            (0x2000, 4, 0),
            "ends the chain"
        );
        assert_eq!(
            q.mem().read_u16(LAY.avail_ring(0)),
            id,
            "the avail entry names it"
        );
    }

    #[test]
    fn a_plain_frame_after_a_checksummed_one_under_the_same_id_clears_its_header() {
        let mut q = queue();
        q.set_tx_chains();
        let csum = Hdr::Checksum {
            start: 34,
            offset: 6,
        };
        let id = q
            .push_tx(&[seg(0x1000, 60)], csum, Token(1), true, 60)
            .unwrap();
        let hdr = LAY.hdr_of(usize::from(id));
        assert_eq!(q.mem().read_u32(hdr), 1, "NEEDS_CSUM");
        assert!(q.publish());
        use_ids(&q, &[id]);
        assert_eq!(q.next().map(|u| u.token), Some(Token(1)));
        let again = q
            .push_tx(&[seg(0x1000, 60)], Hdr::Out, Token(2), true, 60)
            .unwrap();
        assert_eq!(again, id, "the id just freed is taken again");
        assert_eq!(q.mem().read_u32(hdr), 0, "flags 0, gso_type NONE");
    }

    #[test]
    fn an_entry_for_a_buffer_no_doorbell_made_available_yet_is_refused() {
        let mut q = queue();
        q.set_tx_chains();
        let a = q
            .push_tx(&[seg(0x1000, 60)], Hdr::Out, Token(1), true, 60)
            .unwrap();
        assert!(q.publish());
        let b = q
            .push_tx(&[seg(0x2000, 60)], Hdr::Out, Token(2), true, 60)
            .unwrap();
        // The device names `b`, pushed but not made available, where `a` is due.
        use_ids(&q, &[b]);
        assert!(q.next().is_none());
        assert_eq!(q.errors(), 1);
        // Made available now: its entry, and `a`'s, are taken once written after that.
        assert!(q.publish());
        use_ids(&q, &[a, b]);
        assert_eq!(q.next().map(|u| u.token), Some(Token(1)));
        assert_eq!(q.next().map(|u| u.token), Some(Token(2)));
        assert!(q.next().is_none());
        assert_eq!(q.errors(), 1);
    }

    #[test]
    fn an_entry_read_before_its_id_was_made_available_again_is_refused() {
        let mut q = queue();
        q.set_tx_chains();
        let a = q
            .push_tx(&[seg(0x1000, 60)], Hdr::Out, Token(1), true, 60)
            .unwrap();
        let b = q
            .push_tx(&[seg(0x2000, 60)], Hdr::Out, Token(2), true, 60)
            .unwrap();
        q.push_tx(&[seg(0x3000, 60)], Hdr::Out, Token(3), true, 60)
            .unwrap();
        assert!(q.publish());
        // `a` used twice (a lying device), `b` once; the driver reads one entry, ...
        use_ids(&q, &[a, a, b]);
        assert_eq!(q.next().map(|u| u.token), Some(Token(1)));
        // ... then pushes a new buffer, which gets `a`'s id, and makes it available: the
        // repeated entry was covered by the read before that doorbell.
        let again = q
            .push_tx(&[seg(0x4000, 60)], Hdr::Out, Token(4), true, 60)
            .unwrap();
        assert_eq!(again, a);
        assert!(q.publish());
        assert_eq!(q.next().map(|u| u.token), Some(Token(2)));
        assert!(q.next().is_none(), "token 4 was never used");
        assert_eq!(q.errors(), 1);
        assert_eq!(q.pending(), 2, "tokens 3 and 4");
    }
}
