//! The split virtqueue (virtio 1.2 §2.7), driver side: safe bookkeeping over one DMA region,
//! no register access.
//!
//! One region holds the descriptor table, the driver (avail) and device (used) areas, and two
//! areas of the driver's own: an indirect descriptor table and a 12-byte network header per
//! descriptor id. Every buffer is one ring descriptor pointing to its id's indirect table
//! (`VIRTIO_RING_F_INDIRECT_DESC`), so a ring of `N` entries holds `N` buffers whatever their
//! segment count, and a used entry's id names exactly one buffer. A receive queue's tables
//! are written once ([`Virtq::set_rx_chains`]) and a post fills in only the buffer's address
//! ([`Virtq::push_rx`]); a transmit or control buffer's table is written at each push.
//!
//! Ids are handed out from a free stack, so buffers may come back in any order (§2.7.13: a
//! device may use buffers out of order). A private shadow keeps, per id, the caller's token,
//! the state (free, queued, owned by the device, retired), the capacity the device may write,
//! and, per avail slot, which id was published there.
//!
//! Nothing the device writes is trusted (DESIGN decision 4):
//! * `used.idx` may not move further than the number of buffers the device holds; if it does,
//!   the whole update is refused and counted ([`Virtq::errors`]) — the queue stalls until a
//!   reset, never reads a slot the device did not fill for it;
//! * a used element whose id is out of range, or names a buffer the device does not hold, is
//!   skipped and counted; a length is handed to the queue type to check against the capacity;
//! * a used element read under a `used.idx` read before its id was last made available is
//!   skipped and counted too: it was written before the device could have seen that buffer, so
//!   it is a stale (repeated) entry for the id's previous buffer, not this one's completion.
//!
//! Memory ordering: descriptors and avail entries are written, then a release fence, then
//! `avail.idx`; then a full fence before the notification-suppression fields are read (§2.7.13.3
//! and .4); `used.idx` is read, then an acquire fence, then the elements.

use core::sync::atomic::{fence, Ordering};

use ringfab_hal::{DmaRegion, PushError, Token};

use crate::desc::{
    flags, need_event, Desc, Layout, AVAIL_F_NO_INTERRUPT, INDIRECT_ENTRIES, NET_HDR_LEN,
    USED_F_NO_NOTIFY,
};
use crate::regs::hdr;

/// Per-id state.
mod st {
    pub(super) const FREE: u8 = 0;
    /// Pushed, not yet published by a doorbell.
    pub(super) const QUEUED: u8 = 1;
    /// Published: the device owns it.
    pub(super) const DEVICE: u8 = 2;
    /// Taken back at a reset and found used: completes with its length.
    pub(super) const RETIRED_DONE: u8 = 3;
    /// Taken back at a reset unused: completes flushed.
    pub(super) const RETIRED_FLUSHED: u8 = 4;
    /// Low bits: the state; this bit: report a success too (`Report::Always`, every receive).
    pub(super) const ALWAYS: u8 = 0x80;
    pub(super) const MASK: u8 = 0x7f;
}

/// Where a buffer's network header goes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Hdr {
    /// No header (control queue).
    None,
    /// A device-readable header first (transmit) asking for nothing. Receive chains, whose
    /// header is device-writable, are written once ([`Virtq::set_rx_chains`]).
    Out,
    /// A transmit header asking the device to complete a partial checksum
    /// (`VIRTIO_NET_HDR_F_NEEDS_CSUM` with `csum_start`, `csum_offset`; §5.1.6.2).
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

/// A split virtqueue of `N` entries (N a power of two) in `mem`.
pub(crate) struct Virtq<D: DmaRegion, const N: usize> {
    mem: D,
    tokens: [Token; N],
    state: [u8; N],
    cap: [u32; N],
    /// Length found in the used ring at a reset (for `RETIRED_DONE`).
    done_len: [u32; N],
    /// The id published in each avail slot (what the device may answer for).
    order: [u16; N],
    /// Per id, the [`epoch`](Self::epoch) in which it was last published.
    published_in: [u32; N],
    /// Reads of `used.idx` that found new entries (wrapping): the entries up to
    /// [`used_seen`](Self::used_seen) were all written before the latest one, so none of them
    /// can be the completion of a buffer published in the current epoch. (Wrapping: a buffer
    /// out across 2^32 such reads would have its entry refused, and come back at the flush.)
    epoch: u32,
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

    /// A queue over `mem`, which must hold [`Layout::new`]`(N).len` bytes (checked by the
    /// caller when allocating). Interrupts start suppressed.
    pub(crate) fn new(mem: D, event_idx: bool) -> Self {
        let () = Self::CHECK;
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
            published_in: [0; N],
            epoch: 0,
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
        q
    }

    /// The queue's memory (for the addresses given to the device).
    pub(crate) fn mem(&self) -> &D {
        &self.mem
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

    /// Queues one buffer: `segs` after the header `hdr` asks for, under `token`. `cap` is what
    /// the device may write (the queue type checks the used length against it).
    #[inline]
    pub(crate) fn push(
        &mut self,
        hdr: Hdr,
        segs: &[Seg],
        token: Token,
        always: bool,
        cap: u32,
    ) -> Result<u16, PushError> {
        let count = segs.len() + usize::from(hdr != Hdr::None);
        if count == 0 || count > INDIRECT_ENTRIES {
            return Err(PushError::Segments {
                count: segs.len(),
                max: INDIRECT_ENTRIES - 1,
            });
        }
        if self.nfree == 0 {
            return Err(PushError::Full { needed: 1, free: 0 });
        }
        self.nfree -= 1;
        let id = self.free[self.nfree];
        let i = usize::from(id);
        let mut k = 0;
        if hdr != Hdr::None {
            // The id's header is written for each frame: an id goes from frame to frame, and
            // the device reads `csum_start`/`csum_offset` only under `NEEDS_CSUM`, so a frame
            // that asks for nothing writes only the first dword (flags, gso_type = NONE,
            // hdr_len).
            let base = Self::LAY.hdr_of(i);
            match hdr {
                Hdr::Checksum { start, offset } => {
                    self.mem.write_u32(base, u32::from(hdr::F_NEEDS_CSUM));
                    self.mem.write_u32(base + 4, u32::from(start) << 16);
                    self.mem.write_u32(base + 8, u32::from(offset));
                }
                _ => self.mem.write_u32(base, 0),
            }
            let at = self.mem.iova().0 + base as u64;
            let h = Seg {
                addr: at,
                len: NET_HDR_LEN as u32,
                write: false,
            };
            self.write_indirect(i, k, h, k + 1 == count);
            k += 1;
        }
        for &s in segs {
            self.write_indirect(i, k, s, k + 1 == count);
            k += 1;
        }
        self.write_ring_desc(i, count);
        let slot = usize::from(self.avail_idx);
        self.mem.write_u16(Self::LAY.avail_ring(slot), id);
        self.order[slot % N] = id;
        self.avail_idx = self.avail_idx.wrapping_add(1);
        self.tokens[i] = token;
        self.cap[i] = cap;
        self.state[i] = st::QUEUED | if always { st::ALWAYS } else { 0 };
        Ok(id)
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
                addr: self.mem.iova().0 + Self::LAY.hdr_of(i) as u64,
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
    #[inline]
    pub(crate) fn push_rx(&mut self, addr: u64, token: Token) -> Result<u16, PushError> {
        if self.nfree == 0 {
            return Err(PushError::Full { needed: 1, free: 0 });
        }
        self.nfree -= 1;
        let id = self.free[self.nfree];
        let i = usize::from(id);
        // The buffer is the chain's second descriptor, after the header; its address is the
        // descriptor's first word (`Desc::emit`).
        self.mem.write_u64(Self::LAY.indirect_desc(i, 1), addr);
        let slot = usize::from(self.avail_idx);
        self.mem.write_u16(Self::LAY.avail_ring(slot), id);
        self.order[slot % N] = id;
        self.avail_idx = self.avail_idx.wrapping_add(1);
        self.tokens[i] = token;
        self.state[i] = st::QUEUED | st::ALWAYS;
        Ok(id)
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
            addr: self.mem.iova().0 + Self::LAY.indirect_desc(i, 0) as u64,
            len: (count * 16) as u32,
            flags: flags::INDIRECT,
            next: 0,
        }
        .emit();
        self.mem.write_u64(Self::LAY.desc + 16 * i, ring[0]);
        self.mem.write_u64(Self::LAY.desc + 16 * i + 8, ring[1]);
    }

    /// Publishes everything pushed (one release fence, one `avail.idx` store) and says whether
    /// the device asked to be notified of it (§2.7.13.4: `avail_event` with `EVENT_IDX`, else
    /// `VIRTQ_USED_F_NO_NOTIFY`). Nothing pushed: nothing done, `false`.
    #[inline]
    pub(crate) fn publish(&mut self) -> bool {
        let (old, new) = (self.published, self.avail_idx);
        if old == new {
            return false;
        }
        let mut i = old;
        while i != new {
            let id = usize::from(self.order[usize::from(i) % N]);
            self.state[id] = self.state[id] & st::ALWAYS | st::DEVICE;
            self.published_in[id] = self.epoch;
            i = i.wrapping_add(1);
        }
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
        if self.ret_len > 0 {
            let id = self.retired[self.ret_head % N];
            self.ret_head = self.ret_head.wrapping_add(1);
            self.ret_len -= 1;
            let i = usize::from(id);
            let flushed = self.state[i] & st::MASK == st::RETIRED_FLUSHED;
            let len = if flushed { 0 } else { self.done_len[i] };
            return Some(self.release(id, len, flushed));
        }
        loop {
            if self.last_used == self.used_seen {
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
                self.epoch = self.epoch.wrapping_add(1);
            }
            let at = Self::LAY.used_ring(usize::from(self.last_used));
            let id = self.mem.read_u32(at);
            let len = self.mem.read_u32(at + 4);
            self.last_used = self.last_used.wrapping_add(1);
            match self.take(id) {
                Some(id) => return Some(self.release(id, len, false)),
                None => self.errors += 1,
            }
        }
    }

    /// Id `id` as the device returned it, if it names a buffer the device holds and held
    /// before the entries being read were written.
    #[inline]
    fn take(&mut self, id: u32) -> Option<u16> {
        let i = usize::try_from(id).ok().filter(|&i| i < N)?;
        // Published after the `used.idx` read that covers this entry: the entry is older than
        // the buffer (issue 14's hostile suite: a repeated id completed a buffer posted again
        // under it, never filled, which the device then wrote after it was handed back).
        if self.state[i] & st::MASK != st::DEVICE || self.published_in[i] == self.epoch {
            return None;
        }
        self.in_device -= 1;
        Some(id as u16)
    }

    /// Frees `id` and describes it.
    #[inline]
    fn release(&mut self, id: u16, len: u32, flushed: bool) -> Used {
        let i = usize::from(id);
        let s = self.state[i];
        self.state[i] = st::FREE;
        self.free[self.nfree] = id;
        self.nfree += 1;
        Used {
            id,
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
        // Used entries written before the reset: the same checks as `next`. Every buffer was
        // published before this read of the index, in an earlier epoch.
        self.epoch = self.epoch.wrapping_add(1);
        let used_idx = self.mem.read_u16(Self::LAY.used_idx());
        let ready = used_idx.wrapping_sub(self.last_used);
        if usize::from(ready) <= self.in_device {
            fence(Ordering::Acquire);
            for k in 0..ready {
                let at = Self::LAY.used_ring(usize::from(self.last_used.wrapping_add(k)));
                let (id, len) = (self.mem.read_u32(at), self.mem.read_u32(at + 4));
                match self.take(id) {
                    Some(id) => self.retire(id, st::RETIRED_DONE, len),
                    None => self.errors += 1,
                }
            }
        } else {
            self.errors += 1;
        }
        // Everything still out (published or only queued), in push order.
        let oldest = self.avail_idx.wrapping_sub(self.pending() as u16);
        let mut i = oldest;
        while i != self.avail_idx {
            let id = self.order[usize::from(i) % N];
            if matches!(
                self.state[usize::from(id)] & st::MASK,
                st::QUEUED | st::DEVICE
            ) {
                self.retire(id, st::RETIRED_FLUSHED, 0);
            }
            i = i.wrapping_add(1);
        }
        // Anything the order shadow missed (ids pushed long ago and overtaken): by id.
        for id in 0..N {
            if matches!(self.state[id] & st::MASK, st::QUEUED | st::DEVICE) {
                self.retire(id as u16, st::RETIRED_FLUSHED, 0);
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

    fn retire(&mut self, id: u16, state: u8, len: u32) {
        let i = usize::from(id);
        self.state[i] = self.state[i] & st::ALWAYS | state;
        self.done_len[i] = len;
        self.retired[self.ret_head.wrapping_add(self.ret_len) % N] = id;
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
    #[inline]
    pub(crate) fn rx_hdr(&self, id: u16) -> u32 {
        self.mem.read_u32(Self::LAY.hdr_of(usize::from(id)))
    }
}
