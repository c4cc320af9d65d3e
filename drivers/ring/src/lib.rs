//! The descriptor rings of ringfab's Intel drivers: safe, register-free bookkeeping over one
//! [`DmaRing`] each, generic over the device's descriptor layout ([`Format`]).
//!
//! `ringfab-igb` (82576, advanced descriptors) and `ringfab-e1000e` (82574, extended receive and
//! legacy transmit descriptors) share everything here — the transmit shadow, the report-status
//! policy, reclaim, flush and the receive fast path — and each supplies only a [`Format`]: how to
//! encode a descriptor and how to read the device's write-back. The format's functions are
//! associated functions of a type parameter, so every call is resolved and inlined at compile
//! time; the rings cost a driver the same instructions as a copy written for its format alone.
//!
//! The queues the two drivers hand out are written here too: [`IntelQueue`] ([`IntelTx`],
//! [`IntelRx`]) wraps a ring with the claimed index, the interrupt, the stall check and sticky
//! fault, the open, flush and close sequences and the `ringfab-hal` queue traits, generic over
//! [`QueueHw`] — the registers and rules in which the 82576 and the 82574 differ (how a queue
//! stops and starts, where its interrupt is steered and how it is armed, how the receive buffer
//! size is settled, how a fault is read, and the descriptor [`Format`]). A driver implements
//! [`QueueHw`] for its own per-queue type and names the queues as type aliases (`IgbTx`,
//! `E1000eRx`, …); it keeps its bring-up and control path.
//!
//! A ring is `N` 16-byte descriptors in DMA memory plus a private shadow of what the driver wrote
//! there, kept as plain arrays indexed like the ring (tokens in one, a small per-slot word in
//! another), so that the data path loads and stores only the fields it needs. The ring never forms
//! a reference into the DMA memory: descriptors are written and read as two `u64` words through
//! [`DmaRing`]'s volatile accessors, which `ringfab-hal` checked once, when the queue was opened,
//! against the region's length; they reduce every index modulo `N`, so no index reaches outside
//! the ring and no access can panic. That is where the only unsafety lives (in `ringfab-hal`).
//! The rings touch no register: the queue writes the tail (through [`QueueHw::write_tail`])
//! after [`TxRing::doorbell`] / [`RxRing::doorbell`] return it, behind a release fence.
//!
//! Indices are free-running `usize` counters compared only for equality; a descriptor's place
//! is `index & (N - 1)` (N is a power of two, which the driver checks when the queue is opened),
//! so the data path has no division and no bounds check that can fail. What both rings keep
//! alike — the [`DmaRing`], a token per slot, and the `head`/`notified`/`tail` indices with the
//! arithmetic on them (`free`, the hardware tail, publishing at the doorbell) — lives in one
//! private `Slots` value each ring embeds; each ring adds only its own shadow and indices.
//!
//! Nothing the device writes is trusted. The rings read a done bit only on descriptors they
//! handed over (between the last reclaimed one and the last doorbell), so a DD written on a
//! descriptor past the tail is never seen, and the next push overwrites it. Lengths are checked
//! against the shadow, status words against the bits the format says the device may set; a bad
//! value turns into an error completion on that token.
//!
//! Performance: the common case — a clean write-back — is decided with one mask test on the
//! status word (plus the length check on receive); anything unusual falls through to the full
//! decode in a separate, cold function, which gives exactly the answer the fast test would have
//! given had it been written out in full.
#![no_std]
#![deny(unsafe_code)]

mod queue;

pub use queue::{
    check_depth, pick_vector, IntelQueue, IntelRx, IntelTx, QueueHw, Ring, DESC_LEN, MAX_DEPTH,
    MIN_DEPTH,
};

use core::marker::PhantomData;
use core::sync::atomic::{fence, Ordering};

use ringfab_hal::{
    DmaRegion, DmaRing, DmaRingRef, PushError, Report, RssInfo, RxBuffer, RxChecksum, RxCompletion,
    RxError, Token, TxChecksum, TxCompletion, TxError, TxSegment,
};

/// A device's descriptor layout: how the rings write a descriptor and read a write-back.
///
/// Every descriptor is 16 bytes, moved as two little-endian `u64` words (bytes 0–7, 8–15).
/// Implementations are types without values (`enum Layout {}`); the rings call only these
/// associated functions and constants, which should be `#[inline]` shifts and masks.
///
/// Contract the rings rely on: a transmit descriptor's report-status request and its done bit
/// are in word 1; a receive descriptor's done bit is in the low 32 bits of word 1 and
/// [`rx_read`](Self::rx_read) clears it; no function panics on any input.
pub trait Format {
    /// A transmit data descriptor: `len` bytes at `addr`, the frame's last descriptor if `eop`,
    /// asking for a done write-back if `rs`; `frame_len` is the whole frame's length.
    fn tx_data(addr: u64, len: u16, eop: bool, rs: bool, frame_len: u32) -> [u64; 2];

    /// Word 1 of a transmit descriptor already written, with its report-status request added.
    fn tx_with_rs(word1: u64) -> u64;

    /// What word 1 of a transmit descriptor written with report-status says now (a data
    /// descriptor, with or without [`TX_CHECKSUM_DATA`](Self::TX_CHECKSUM_DATA)).
    fn tx_writeback(word1: u64) -> TxWriteback;

    /// The context descriptor that asks the device to insert `checksum` into the frame whose
    /// data descriptors follow it, or `None` if the device cannot express these offsets.
    fn tx_checksum_context(checksum: TxChecksum) -> Option<[u64; 2]>;

    /// Bits ORed into word 1 of every data descriptor [`tx_data`](Self::tx_data) wrote for a
    /// frame sent behind a [checksum context](Self::tx_checksum_context): what tells the device
    /// to use the context and insert the checksum.
    const TX_CHECKSUM_DATA: u64;

    /// A receive descriptor handing the device the buffer at `addr` (its done bit clear).
    fn rx_read(addr: u64) -> [u64; 2];

    /// Bits of word 1 (low 32) the receive fast path tests at once: done, end of packet, every
    /// error bit and every bit the device may not set.
    const RX_CLEAN_MASK: u32;
    /// The value those bits have in the write-back of a clean one-descriptor frame: the mask's
    /// lowest bits, all set (done and end of packet are bits 0 and 1), which the fast path's
    /// test relies on (`RxRing::clean`, checked at compile time).
    const RX_CLEAN: u32;

    /// Whether word 1 of a receive descriptor has its done bit.
    fn rx_done(word1: u64) -> bool;

    /// The packet length in word 1 of a receive write-back.
    fn rx_len(word1: u64) -> u32;

    /// Whether word 0 of a receive write-back reports an RSS hash (the fast path then calls
    /// [`rx_rss`](Self::rx_rss); else it stores `None`).
    fn rx_hashed(word0: u64) -> bool;

    /// The RSS hash word 0 of a receive write-back reports, if any.
    fn rx_rss(word0: u64) -> Option<RssInfo>;

    /// The checksums word 1 of a receive write-back the fast path accepted (no error bit
    /// set, [`RX_CLEAN_MASK`](Self::RX_CLEAN_MASK)) reports checked: its checked-status bits
    /// alone, from the word already loaded.
    fn rx_checksum(word1: u64) -> RxChecksum;

    /// The whole receive write-back, decoded (off the fast path).
    fn rx_writeback(word0: u64, word1: u64) -> RxWriteback;
}

/// What a transmit write-back says about one report-status descriptor.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum TxWriteback {
    /// Not done: the device has not finished.
    Pending,
    /// Done, nothing unexpected.
    Done,
    /// Done with bits the driver did not expect; the raw word 1.
    Bad(u64),
}

/// A receive write-back, decoded by [`Format::rx_writeback`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct RxWriteback {
    /// Bytes the device says it wrote into the buffer.
    pub len: u32,
    /// The frame's last descriptor.
    pub eop: bool,
    /// Error bits, in their places in the status word (0: none).
    pub errors: u32,
    /// The device set bits no write-back defines.
    pub undefined: bool,
    /// The RSS hash, if reported.
    pub rss: Option<RssInfo>,
    /// The checksums the device checked and found right. A checksum it found wrong is not an
    /// error here (not in `errors`): the frame is delivered unmarked, and whoever needs the
    /// checksum checks it again in software, which counts and drops it.
    pub checksum: RxChecksum,
}

/// What both rings keep alike: the descriptors in DMA memory, a token per slot, and the three
/// free-running indices the device's view depends on — `head` (oldest slot whose token has not
/// come back), `notified` (the tail last handed to the device) and `tail` (next slot to push).
struct Slots<D: DmaRegion, const N: usize> {
    ring: DmaRing<D, N>,
    tokens: [Token; N],
    head: usize,
    notified: usize,
    tail: usize,
}

impl<D: DmaRegion, const N: usize> Slots<D, N> {
    const MASK: usize = N - 1;

    fn new(ring: DmaRing<D, N>) -> Self {
        Slots {
            ring,
            tokens: [Token(0); N],
            head: 0,
            notified: 0,
            tail: 0,
        }
    }

    fn dma(&self) -> &D {
        self.ring.region()
    }

    /// Slots in `[head, tail)`.
    #[inline(always)]
    fn used(&self) -> usize {
        self.tail.wrapping_sub(self.head)
    }

    /// Slots free for push: one stays empty so that a full ring's tail never equals its head
    /// (the device reads head == tail as empty).
    #[inline(always)]
    fn free(&self) -> usize {
        N - 1 - self.used()
    }

    /// The tail as the device numbers it.
    #[inline(always)]
    fn hw_tail(&self) -> u32 {
        (self.tail & Self::MASK) as u32
    }

    /// Counts everything pushed as handed to the device; returns the tail to write.
    #[inline(always)]
    fn publish(&mut self) -> u32 {
        self.notified = self.tail;
        self.hw_tail()
    }
}

/// Transmit shadow word, one per descriptor, meaningful in a frame's first slot: the frame's
/// descriptor count in the low bits, then flags.
mod txm {
    /// Descriptors of the frame.
    pub(super) const NDESC: u32 = 0xFFFF;
    /// Report the token when it succeeds (`Report::Always`).
    pub(super) const ALWAYS: u32 = 1 << 16;
    /// RS is set on the frame's last descriptor.
    pub(super) const RS: u32 = 1 << 17;
    /// The queue was flushed before the device reported the frame.
    pub(super) const FLUSHED: u32 = 1 << 18;
    /// The device wrote back a status the driver does not accept (the word is in `raw`).
    pub(super) const BAD: u32 = 1 << 19;
}

/// A transmit ring of `N` descriptors.
///
/// Indices, in ring order: `head` ≤ `done` ≤ `scan` ≤ `notified` ≤ `tail`.
/// * `[head, done)`: complete (the device wrote DD on a later-or-equal RS descriptor, or the
///   queue was flushed) but not yet returned by `poll`;
/// * `[done, scan)`: whole frames without RS, waiting for a later RS descriptor;
/// * `[scan, notified)`: handed to the device, not yet looked at;
/// * `[notified, tail)`: pushed, not yet rung.
pub struct TxRing<F: Format, D: DmaRegion, const N: usize> {
    /// Ring, tokens (of the frame starting at each slot), `head`, `notified`, `tail`.
    slots: Slots<D, N>,
    /// `txm` word of the frame starting at each slot.
    meta: [u32; N],
    /// The write-back word of a frame marked `txm::BAD` (read only then).
    raw: [u64; N],
    done: usize,
    scan: usize,
    /// Descriptors pushed since the last one marked RS.
    since_rs: usize,
    /// First descriptor of the most recently pushed frame, kept only while that frame has no RS
    /// (`since_rs != 0`), the one case the doorbell needs it.
    last_frame: usize,
    /// Descriptors in `[head, tail)` beyond one per frame (Σ ndesc − 1), so that `pending` is
    /// `tail - head - extra` and a one-descriptor frame costs no bookkeeping.
    extra: usize,
    format: PhantomData<fn() -> F>,
}

impl<F: Format, D: DmaRegion, const N: usize> TxRing<F, D, N> {
    const MASK: usize = N - 1;
    /// Request a write-back at least every this many descriptors.
    pub const RECLAIM_THRESHOLD: usize = if N >= 8 { N >> 2 } else { 1 };
    /// A frame's descriptor count must fit `txm::NDESC`; it is at most `N - 1`.
    const FITS: () = assert!(N - 1 <= txm::NDESC as usize, "ring too deep for the shadow");

    /// A ring over `ring` (whose size `DmaRing::new` checked).
    pub fn new(ring: DmaRing<D, N>) -> Self {
        let () = Self::FITS;
        TxRing {
            slots: Slots::new(ring),
            meta: [0; N],
            raw: [0; N],
            done: 0,
            scan: 0,
            since_rs: 0,
            last_frame: 0,
            extra: 0,
            format: PhantomData,
        }
    }

    /// The DMA memory (for its IOVA).
    pub fn dma(&self) -> &D {
        self.slots.dma()
    }

    /// Descriptors free for push.
    #[inline]
    pub fn free(&self) -> usize {
        self.slots.free()
    }

    /// Frames whose token has not come back.
    #[inline]
    pub fn pending(&self) -> usize {
        self.slots.used() - self.extra
    }

    /// The tail as the device numbers it.
    #[inline]
    pub fn hw_tail(&self) -> u32 {
        self.slots.hw_tail()
    }

    /// Queues one frame. `max_segments` and `max_len` are the device's limits.
    ///
    /// RS goes on the frame's last descriptor when the caller wants the completion, when
    /// [`RECLAIM_THRESHOLD`](Self::RECLAIM_THRESHOLD) descriptors have gone by without one, or
    /// when this push fills the ring — so a full ring always ends in an RS descriptor and every
    /// descriptor is eventually reclaimed. ([`doorbell`](Self::doorbell) adds one more rule.)
    #[inline]
    pub fn push(
        &mut self,
        segments: &[TxSegment],
        token: Token,
        report: Report,
        max_segments: usize,
        max_len: usize,
    ) -> Result<(), PushError> {
        let count = segments.len();
        // `count == 0 || count > max_segments` in one comparison (0 wraps to usize::MAX).
        if count.wrapping_sub(1) >= max_segments {
            return Err(segments_error(count, max_segments));
        }
        let free = self.free();
        let always = matches!(report, Report::Always);
        let first = self.slots.tail;
        if let [s] = segments {
            // The common one-buffer frame: no loop, its length is the frame's.
            let len = s.len as usize;
            if len == 0 || len > max_len {
                return Err(length_error(len, max_len));
            }
            if free == 0 {
                return Err(full_error(1, free));
            }
            let rs = self.rs_for(first, 1, free, always);
            let d = F::tx_data(s.iova.0, s.len, true, rs, u32::from(s.len));
            self.write_desc(first, d);
            self.record(first, 1, token, always, rs);
            return Ok(());
        }

        let total = Self::frame_len(segments, max_len)?;
        self.push_frame(segments, total, None, token, always)
    }

    /// Queues one frame behind a context descriptor asking the device to insert `checksum`
    /// ([`Format::tx_checksum_context`]): the frame takes one descriptor more than its
    /// segments, the context in its first slot, so that it is reclaimed with the frame (the
    /// device writes back only the frame's last descriptor). Refuses as [`push`](Self::push)
    /// does, and with [`PushError::Checksum`] when the format cannot express `checksum` or
    /// its field does not lie inside the frame.
    pub fn push_checksummed(
        &mut self,
        segments: &[TxSegment],
        token: Token,
        report: Report,
        checksum: TxChecksum,
        max_segments: usize,
        max_len: usize,
    ) -> Result<(), PushError> {
        let count = segments.len();
        if count.wrapping_sub(1) >= max_segments {
            return Err(segments_error(count, max_segments));
        }
        let total = Self::frame_len(segments, max_len)?;
        let context = match F::tx_checksum_context(checksum) {
            Some(context) if checksum.field_end() <= total => context,
            _ => return Err(checksum_error(checksum)),
        };
        let always = matches!(report, Report::Always);
        self.push_frame(segments, total, Some(context), token, always)
    }

    /// The length of a frame of `segments` (at least one), checked against `max_len` and for
    /// empty segments.
    #[inline]
    fn frame_len(segments: &[TxSegment], max_len: usize) -> Result<usize, PushError> {
        let mut total = 0usize;
        let mut empty = false;
        for s in segments {
            total += s.len as usize;
            empty |= s.len == 0;
        }
        if empty || total > max_len {
            return Err(length_error(total, max_len));
        }
        Ok(total)
    }

    /// Writes a checked frame of `total` bytes: its segments, behind `context` if given (whose
    /// data descriptors then carry [`Format::TX_CHECKSUM_DATA`]), if the ring has room for all
    /// of its descriptors.
    #[inline]
    fn push_frame(
        &mut self,
        segments: &[TxSegment],
        total: usize,
        context: Option<[u64; 2]>,
        token: Token,
        always: bool,
    ) -> Result<(), PushError> {
        let free = self.free();
        let first = self.slots.tail;
        let (ndesc, data_at, data_bits) = match context {
            Some(_) => (segments.len() + 1, 1, F::TX_CHECKSUM_DATA),
            None => (segments.len(), 0, 0),
        };
        // Room for the whole frame, context included: the ring keeps its one empty slot.
        if ndesc > free {
            return Err(full_error(ndesc, free));
        }
        let rs = self.rs_for(first, ndesc, free, always);
        if let Some(context) = context {
            self.write_desc(first, context);
        }
        let last = segments.len() - 1;
        for (i, s) in segments.iter().enumerate() {
            let eop = i == last;
            let [w0, w1] = F::tx_data(s.iova.0, s.len, eop, rs && eop, total as u32);
            self.write_desc(first.wrapping_add(data_at + i), [w0, w1 | data_bits]);
        }
        self.record(first, ndesc, token, always, rs);
        self.extra += ndesc - 1;
        Ok(())
    }

    /// Whether a frame of `count` descriptors at `first`, pushed with `free` free, gets RS;
    /// counts it.
    #[inline(always)]
    fn rs_for(&mut self, first: usize, count: usize, free: usize, always: bool) -> bool {
        let since = self.since_rs + count;
        let rs = always || since >= Self::RECLAIM_THRESHOLD || count == free;
        if rs {
            self.since_rs = 0;
        } else {
            self.since_rs = since;
            self.last_frame = first;
        }
        rs
    }

    #[inline(always)]
    fn write_desc(&self, index: usize, words: [u64; 2]) {
        self.slots.ring.write(index, 0, words[0]);
        self.slots.ring.write(index, 1, words[1]);
    }

    /// Shadows a frame of `count` descriptors pushed at `first`.
    #[inline(always)]
    fn record(&mut self, first: usize, count: usize, token: Token, always: bool, rs: bool) {
        let i = first & Self::MASK;
        self.slots.tokens[i] = token;
        // `count < N`, which `FITS` proved to fit `NDESC`.
        self.meta[i] =
            count as u32 | if always { txm::ALWAYS } else { 0 } | if rs { txm::RS } else { 0 };
        self.slots.tail = first.wrapping_add(count);
    }

    /// Prepares to hand everything pushed to the device; returns the new hardware tail, or
    /// `None` if nothing new was pushed. If descriptors since the last RS exist, RS is added to
    /// the batch's last frame (not yet visible to the device), so that a batch never strands
    /// unreported descriptors: they are reclaimed without waiting for a later push, and a flush
    /// reports `Flushed` only for frames the device really did not finish.
    #[inline]
    pub fn doorbell(&mut self) -> Option<u32> {
        if self.slots.notified == self.slots.tail {
            return None;
        }
        if self.since_rs != 0 {
            let first = self.last_frame;
            let meta = &mut self.meta[first & Self::MASK];
            *meta |= txm::RS;
            let last = first.wrapping_add((*meta & txm::NDESC) as usize - 1);
            let w1 = self.slots.ring.read(last, 1);
            self.slots.ring.write(last, 1, F::tx_with_rs(w1));
            self.since_rs = 0;
        }
        Some(self.slots.publish())
    }

    /// Moves `done` over every frame the device has finished (DD on an RS descriptor).
    #[inline]
    fn advance(&mut self) {
        let mut scan = self.scan;
        while scan != self.slots.notified {
            let meta = self.meta[scan & Self::MASK];
            let next = scan.wrapping_add((meta & txm::NDESC) as usize);
            if meta & txm::RS != 0 {
                match F::tx_writeback(self.slots.ring.read(next.wrapping_sub(1), 1)) {
                    TxWriteback::Pending => break,
                    TxWriteback::Done => {}
                    TxWriteback::Bad(raw) => self.mark_bad(scan, raw),
                }
                // Everything the device wrote before that DD is visible from here on.
                fence(Ordering::Acquire);
                self.done = next;
            }
            scan = next;
        }
        self.scan = scan;
    }

    #[cold]
    fn mark_bad(&mut self, first: usize, raw: u64) {
        let i = first & Self::MASK;
        self.meta[i] |= txm::BAD;
        self.raw[i] = raw;
    }

    /// Reclaims finished frames and writes completions into `out`; returns how many.
    /// Successful `ErrorsOnly` frames are reclaimed without a completion.
    #[inline]
    pub fn poll(&mut self, out: &mut [TxCompletion]) -> usize {
        let mut n = 0;
        // Fast path, while everything up to `head` is reclaimed (`head == done == scan`): a
        // one-descriptor `Always` frame with RS whose write-back is a clean DD completes `Ok`
        // — exactly what `poll_general` would decide for it, in one load and one mask test.
        // Anything else (no DD yet, a bad status, flushed, several descriptors, no RS) stops
        // it, and `poll_general` carries on from the same state.
        let head = self.slots.head;
        if head == self.scan {
            let ring = self.slots.ring.view();
            // Frames handed over and not yet looked at: at most one per descriptor.
            let ready = self.slots.notified.wrapping_sub(head).min(out.len());
            for entry in &mut out[..ready] {
                let i = head.wrapping_add(n) & Self::MASK;
                if self.meta[i] != 1 | txm::ALWAYS | txm::RS {
                    break;
                }
                if F::tx_writeback(ring.read(i, 1)) != TxWriteback::Done {
                    break;
                }
                // Everything the device wrote before that DD is visible from here on.
                fence(Ordering::Acquire);
                entry.token = self.slots.tokens[i];
                entry.status = Ok(());
                n += 1;
            }
            let head = head.wrapping_add(n);
            self.slots.head = head;
            self.done = head;
            self.scan = head;
        }
        if self.slots.head != self.done || self.scan != self.slots.notified {
            n += self.poll_general(&mut out[n..]);
        }
        n
    }

    /// `poll` by the full rules.
    #[inline(never)]
    fn poll_general(&mut self, out: &mut [TxCompletion]) -> usize {
        self.advance();
        let mut n = 0;
        let mut head = self.slots.head;
        while head != self.done {
            let i = head & Self::MASK;
            let meta = self.meta[i];
            if meta & (txm::ALWAYS | txm::FLUSHED | txm::BAD) != 0 {
                let Some(entry) = out.get_mut(n) else { break };
                let status = if meta & (txm::FLUSHED | txm::BAD) == 0 {
                    Ok(())
                } else {
                    self.failure(i)
                };
                *entry = TxCompletion {
                    token: self.slots.tokens[i],
                    status,
                };
                n += 1;
            }
            let ndesc = (meta & txm::NDESC) as usize;
            head = head.wrapping_add(ndesc);
            self.extra -= ndesc - 1;
        }
        self.slots.head = head;
        n
    }

    /// The error of the failed frame at slot `i`.
    #[cold]
    fn failure(&self, i: usize) -> Result<(), TxError> {
        if self.meta[i] & txm::BAD != 0 {
            Err(TxError::DeviceStatus { raw: self.raw[i] })
        } else {
            Err(TxError::Flushed)
        }
    }

    /// With the hardware queue stopped: frames the device finished complete normally, every
    /// other pushed frame completes with `Flushed` through later polls. The ring is left empty
    /// for the device from `hw_tail()` on.
    ///
    /// "Finished" includes frames whose own write-back never came but that precede an RS
    /// descriptor the device did write back: the device processes a queue's descriptors in order,
    /// so a later DD proves the earlier frames were sent. `poll` does not draw that conclusion
    /// while the queue runs — a write-back that is late rather than lost could then land on a
    /// descriptor already reused — so a lost write-back holds a running queue's completions
    /// until the flush, which is where it is safe (the device has stopped).
    pub fn flush(&mut self) {
        self.advance();
        let mut at = self.scan;
        let mut finished = self.done;
        while at != self.slots.notified {
            let meta = self.meta[at & Self::MASK];
            let next = at.wrapping_add((meta & txm::NDESC) as usize);
            if meta & txm::RS != 0 {
                match F::tx_writeback(self.slots.ring.read(next.wrapping_sub(1), 1)) {
                    TxWriteback::Pending => {}
                    TxWriteback::Done => finished = next,
                    TxWriteback::Bad(raw) => {
                        self.mark_bad(at, raw);
                        finished = next;
                    }
                }
            }
            at = next;
        }
        // Everything the device wrote before the DDs just read is visible from here on.
        fence(Ordering::Acquire);
        self.done = finished;
        let mut i = self.done;
        while i != self.slots.tail {
            let meta = &mut self.meta[i & Self::MASK];
            *meta = (*meta & !txm::BAD) | txm::FLUSHED;
            i = i.wrapping_add((*meta & txm::NDESC) as usize);
        }
        self.done = self.slots.tail;
        self.scan = self.slots.tail;
        self.slots.notified = self.slots.tail;
        self.since_rs = 0;
    }
}

#[cold]
fn checksum_error(checksum: TxChecksum) -> PushError {
    PushError::Checksum {
        start: checksum.start,
        offset: checksum.offset,
    }
}

#[cold]
fn segments_error(count: usize, max: usize) -> PushError {
    PushError::Segments { count, max }
}

#[cold]
fn length_error(len: usize, max: usize) -> PushError {
    PushError::FrameLength { len, max }
}

#[cold]
fn full_error(needed: usize, free: usize) -> PushError {
    PushError::Full { needed, free }
}

/// A receive ring of `N` descriptors: `[head, notified)` handed to the device, `[notified,
/// tail)` pushed but not yet rung.
pub struct RxRing<F: Format, D: DmaRegion, const N: usize> {
    /// Ring, tokens (of the buffer at each slot), `head`, `notified`, `tail`.
    slots: Slots<D, N>,
    /// Length of the buffer at each slot — so `reported <= limit` is the length check — or
    /// [`FLUSHED`](Self::FLUSHED) for a buffer that completes with `Flushed` without looking at
    /// the descriptor (no reported length passes that check, which sends it off the fast path).
    /// 64-bit to hold every buffer length and the mark: as `u32` (the length plus one, 0 for
    /// flushed) the check was one instruction shorter per completion and the saturating add
    /// four longer per posted buffer.
    limits: [i64; N],
    /// Slots from `head` on that hold the continuation pieces of a frame whose first buffer
    /// was already reported [`Truncated`](RxError::Truncated): each completes as a
    /// [`Continuation`](RxError::Continuation). Set only once the whole frame (its EOP) was
    /// seen, so it never waits on the device; every slot taken from `head` counts it down.
    continuing: usize,
    format: PhantomData<fn() -> F>,
}

impl<F: Format, D: DmaRegion, const N: usize> RxRing<F, D, N> {
    const MASK: usize = N - 1;
    /// `limits` entry of a flushed buffer: below every length.
    const FLUSHED: i64 = -1;
    /// `limits` entries below this one mark a buffer the flush found written back (DD set):
    /// [`settled`](Self::settled) of its length. Below every length too, so the fast path
    /// leaves them to `poll_general`, which must give them back whatever the device does to
    /// the descriptor after the flush.
    const SETTLED: i64 = -2;
    /// Added below [`settled`](Self::settled) for a later piece of a split frame (the flush
    /// saw the frame's first piece before it): such a buffer never starts a frame. Above every
    /// buffer length, so that [`capacity`](Self::capacity)'s cast to `u32` drops it.
    const PIECE: i64 = 1 << 32;

    /// The `limits` entry of a buffer of `cap` bytes that the flush found written back.
    #[inline]
    fn settled(cap: i64) -> i64 {
        Self::SETTLED - cap
    }

    /// Whether a settled `limits` entry is a later piece of a split frame.
    #[inline]
    fn is_piece(limit: i64) -> bool {
        limit <= Self::SETTLED - Self::PIECE
    }

    /// A ring over `ring` (whose size `DmaRing::new` checked).
    pub fn new(ring: DmaRing<D, N>) -> Self {
        RxRing {
            slots: Slots::new(ring),
            limits: [Self::FLUSHED; N],
            continuing: 0,
            format: PhantomData,
        }
    }

    /// The DMA memory (for its IOVA).
    pub fn dma(&self) -> &D {
        self.slots.dma()
    }

    /// Descriptors free for push.
    #[inline]
    pub fn free(&self) -> usize {
        self.slots.free()
    }

    /// Buffers whose token has not come back.
    #[inline]
    pub fn pending(&self) -> usize {
        self.slots.used()
    }

    /// The tail as the device numbers it.
    #[inline]
    pub fn hw_tail(&self) -> u32 {
        self.slots.hw_tail()
    }

    /// Queues one buffer of at least `min_len` bytes.
    #[inline]
    pub fn push(&mut self, buf: RxBuffer, token: Token, min_len: u32) -> Result<(), PushError> {
        if buf.len < min_len {
            return Err(small_error(buf.len, min_len));
        }
        let free = self.free();
        if free == 0 {
            return Err(full_error(1, free));
        }
        let tail = self.slots.tail;
        let [w0, w1] = F::rx_read(buf.iova.0);
        self.slots.ring.write(tail, 0, w0);
        self.slots.ring.write(tail, 1, w1);
        let i = tail & Self::MASK;
        self.slots.tokens[i] = token;
        self.limits[i] = i64::from(buf.len);
        self.slots.tail = tail.wrapping_add(1);
        Ok(())
    }

    /// The new hardware tail, or `None` if nothing new was pushed.
    #[inline]
    pub fn doorbell(&mut self) -> Option<u32> {
        if self.slots.notified == self.slots.tail {
            return None;
        }
        Some(self.slots.publish())
    }

    /// Writes completions for received (or flushed) buffers into `out`, oldest first.
    #[inline]
    pub fn poll(&mut self, out: &mut [RxCompletion]) -> usize {
        let mut n = 0;
        // The fast path (`clean`) in a loop of its own rather than `poll_each` with a closure
        // that stores: iterating `out` itself keeps it about six instructions per frame
        // shorter.
        if self.continuing == 0 {
            let ring = self.slots.ring.view();
            let head = self.slots.head;
            let ready = self.slots.notified.wrapping_sub(head).min(out.len());
            // One running index (not `head + n` per entry); `n` is its distance from `head`.
            let mut at = head;
            for entry in &mut out[..ready] {
                let i = at & Self::MASK;
                let Some((len, checksum)) = self.clean(ring, i) else {
                    break;
                };
                let w0 = ring.read(i, 0);
                entry.token = self.slots.tokens[i];
                entry.len = len;
                entry.status = Ok(());
                entry.checksum = checksum;
                // Most frames carry no hash (RSS off, or a protocol it does not cover): then
                // one byte-sized store, not the whole `RssInfo`.
                if F::rx_hashed(w0) {
                    entry.rss = F::rx_rss(w0);
                } else {
                    entry.rss = None;
                }
                at = at.wrapping_add(1);
            }
            n = at.wrapping_sub(head);
            self.slots.head = at;
        }
        if n < out.len() && self.slots.head != self.slots.tail {
            n += self.poll_general_into(&mut out[n..]);
        }
        n
    }

    /// Hands completions for up to `max` received (or flushed) buffers to `f`, oldest first,
    /// each once; returns how many. [`poll`](Self::poll) without the array: each completion
    /// is built where `f` can use it directly (in registers, once inlined).
    #[inline(always)]
    pub fn poll_each(&mut self, max: usize, f: &mut impl FnMut(&RxCompletion)) -> usize {
        self.poll_each_with::<true>(max, f)
    }

    /// [`poll_each`](Self::poll_each) without the RSS hash: on the fast path (a clean
    /// write-back) `rss` is `None` and the write-back word holding it is not read; a completion
    /// the general rules decide may still carry it, as the hal's `poll_each_unhashed` allows
    /// ("may be `None`").
    #[inline(always)]
    pub fn poll_each_unhashed(&mut self, max: usize, f: &mut impl FnMut(&RxCompletion)) -> usize {
        self.poll_each_with::<false>(max, f)
    }

    /// `RxQueue::poll_each_split`: the fast loop of
    /// [`poll_each_unhashed`](Self::poll_each_unhashed), handing each clean completion to
    /// `fast`; it stops at the one `fast` declines without taking it, and from there (as after
    /// any completion that is not clean) the rest go to `slow` out of line. So the fast loop
    /// holds neither the declined completion nor anything `slow` captures: the completion is
    /// read again from its slot, which the device has finished with.
    #[inline(always)]
    pub fn poll_each_split(
        &mut self,
        max: usize,
        fast: &mut impl FnMut(&RxCompletion) -> bool,
        slow: &mut impl FnMut(&RxCompletion),
    ) -> usize {
        let mut n = 0;
        if self.continuing == 0 {
            let ring = self.slots.ring.view();
            let head = self.slots.head;
            let ready = self.slots.notified.wrapping_sub(head).min(max);
            let mut at = head;
            let end = head.wrapping_add(ready);
            while at != end {
                let i = at & Self::MASK;
                let Some((len, checksum)) = self.clean(ring, i) else {
                    break;
                };
                let taken = fast(&RxCompletion {
                    token: self.slots.tokens[i],
                    len,
                    status: Ok(()),
                    rss: None,
                    checksum,
                });
                if !taken {
                    break;
                }
                at = at.wrapping_add(1);
            }
            n = at.wrapping_sub(head);
            self.slots.head = at;
        }
        if n < max && self.slots.head != self.slots.tail {
            n += self.poll_each_out_of_line(max - n, slow);
        }
        n
    }

    /// [`poll_each_unhashed`](Self::poll_each_unhashed) out of line: the rest of a
    /// [`poll_each_split`](Self::poll_each_split).
    #[inline(never)]
    fn poll_each_out_of_line(&mut self, max: usize, f: &mut impl FnMut(&RxCompletion)) -> usize {
        self.poll_each_with::<false>(max, f)
    }

    #[inline(always)]
    fn poll_each_with<const RSS: bool>(
        &mut self,
        max: usize,
        f: &mut impl FnMut(&RxCompletion),
    ) -> usize {
        let mut n = 0;
        if self.continuing == 0 {
            let ring = self.slots.ring.view();
            let head = self.slots.head;
            let ready = self.slots.notified.wrapping_sub(head).min(max);
            let mut at = head;
            let end = head.wrapping_add(ready);
            while at != end {
                let i = at & Self::MASK;
                let Some((len, checksum)) = self.clean(ring, i) else {
                    break;
                };
                let rss = if RSS {
                    let w0 = ring.read(i, 0);
                    if F::rx_hashed(w0) {
                        F::rx_rss(w0)
                    } else {
                        None
                    }
                } else {
                    None
                };
                f(&RxCompletion {
                    token: self.slots.tokens[i],
                    len,
                    status: Ok(()),
                    rss,
                    checksum,
                });
                at = at.wrapping_add(1);
            }
            n = at.wrapping_sub(head);
            self.slots.head = at;
        }
        if n < max && self.slots.head != self.slots.tail {
            n += self.poll_general(max - n, f);
        }
        n
    }

    /// The fast path's test of the handed-over buffer at slot `i` (outside a split frame): it
    /// completes `Ok` if it is live (a flushed one has limit -1), its write-back has DD and
    /// EOP and no error or undefined bit (one mask test) and its length is within the buffer
    /// — exactly what `poll_general` would decide for it. Returns that length and the
    /// checksums the write-back reports checked (bits of the word already loaded: a caller
    /// that does not look at them costs nothing); `None` for anything else, which
    /// `poll_general` then decides. After `Some`, the rest of the write-back and the frame
    /// data are visible (acquire).
    #[inline(always)]
    fn clean(&self, ring: DmaRingRef<'_, N>, i: usize) -> Option<(u32, RxChecksum)> {
        // `RX_CLEAN` is the mask's lowest bits, all set: then `w1 - RX_CLEAN` has no mask bit
        // set exactly when `w1`'s mask bits are `RX_CLEAN` (a write-back missing one of them
        // borrows into them), which is one instruction less than masking a copy and comparing.
        const {
            assert!(
                F::RX_CLEAN & F::RX_CLEAN.wrapping_add(1) == 0
                    && F::RX_CLEAN & F::RX_CLEAN_MASK == F::RX_CLEAN
            )
        };
        let w1 = ring.read(i, 1);
        let reported = F::rx_len(w1);
        if (w1 as u32).wrapping_sub(F::RX_CLEAN) & F::RX_CLEAN_MASK != 0
            || i64::from(reported) > self.limits[i]
        {
            return None;
        }
        fence(Ordering::Acquire);
        Some((reported, F::rx_checksum(w1)))
    }

    /// `poll_general` into an array, out of line (off `poll`'s fast path).
    #[inline(never)]
    fn poll_general_into(&mut self, out: &mut [RxCompletion]) -> usize {
        let max = out.len();
        let mut free = out.iter_mut();
        self.poll_general(max, &mut |c| {
            if let Some(entry) = free.next() {
                *entry = *c;
            }
        })
    }

    /// `poll_each` by the full rules. Inlined, so that `f` does not escape: a closure whose
    /// address reaches a call that is not inlined keeps everything it captures in memory.
    #[inline(always)]
    fn poll_general(&mut self, max: usize, f: &mut impl FnMut(&RxCompletion)) -> usize {
        let mut n = 0;
        while n < max {
            if self.slots.head == self.slots.tail {
                break;
            }
            let i = self.slots.head & Self::MASK;
            let limit = self.limits[i];
            let token = self.slots.tokens[i];
            if limit == Self::FLUSHED {
                f(&RxCompletion {
                    token,
                    len: 0,
                    status: Err(RxError::Flushed),
                    rss: None,
                    checksum: RxChecksum::NONE,
                });
            } else {
                // Settled by a flush: the flush saw DD, so the token comes back now whatever
                // the descriptor says (issue 14 item 10: a device that cleared DD after the
                // flush left it pending for ever; the stall check finds a healthy device).
                let settled = limit <= Self::SETTLED;
                if !settled && self.slots.head == self.slots.notified {
                    break;
                }
                let w1 = self.slots.ring.read(i, 1);
                if !F::rx_done(w1) {
                    if !settled {
                        break;
                    }
                    self.taken_back(token, w1, f);
                } else {
                    // The rest of the write-back (and the frame data) is visible after seeing
                    // DD.
                    fence(Ordering::Acquire);
                    let c = if self.continuing > 0 {
                        // A later piece of the frame reported truncated just before: nothing
                        // for the caller, who posts the buffer again.
                        RxCompletion {
                            token,
                            len: 0,
                            status: Err(RxError::Continuation),
                            rss: None,
                            checksum: RxChecksum::NONE,
                        }
                    } else if settled && Self::is_piece(limit) {
                        // A later piece of a frame whose earlier piece the device took back
                        // after the flush (so no `Truncated` first buffer counted it off): the
                        // rest of a cut frame, never a frame of its own.
                        RxCompletion {
                            token,
                            len: 0,
                            status: Err(RxError::Fragment),
                            rss: None,
                            checksum: RxChecksum::NONE,
                        }
                    } else {
                        let w0 = self.slots.ring.read(i, 0);
                        // A live limit is a buffer length, a `u32`; a settled one encodes it.
                        let cap = Self::capacity(limit);
                        let wb = F::rx_writeback(w0, w1);
                        if wb.eop {
                            Self::decode(token, cap, wb, w1)
                        } else {
                            // The first buffer of a frame longer than one buffer: reported
                            // once the device has written the whole frame.
                            match self.split_frame(token, cap, wb, w1) {
                                Some(c) => c,
                                // After a flush nothing more will be written: a piece the
                                // device took back cut the frame.
                                None if settled => RxCompletion {
                                    token,
                                    len: 0,
                                    status: Err(RxError::Fragment),
                                    rss: None,
                                    checksum: RxChecksum::NONE,
                                },
                                None => break,
                            }
                        }
                    };
                    f(&c);
                }
            }
            self.continuing = self.continuing.saturating_sub(1);
            self.slots.head = self.slots.head.wrapping_add(1);
            n += 1;
        }
        n
    }

    /// A buffer the flush found written back whose descriptor no longer has DD: the device
    /// took back a write-back it had made (after a stop it acknowledged). Its data is not
    /// trusted; the token comes back with the word the device left, as `DeviceStatus`.
    #[cold]
    #[inline(never)]
    fn taken_back(&mut self, token: Token, raw: u64, f: &mut impl FnMut(&RxCompletion)) {
        f(&RxCompletion {
            token,
            len: 0,
            status: Err(RxError::DeviceStatus { raw }),
            rss: None,
            checksum: RxChecksum::NONE,
        });
    }

    /// The buffer length a `limits` entry holds: a live one is the length, a settled one
    /// encodes it ([`settled`](Self::settled); the cast drops a [`PIECE`](Self::PIECE) mark).
    #[inline(always)]
    fn capacity(limit: i64) -> u32 {
        if limit <= Self::SETTLED {
            (Self::SETTLED - limit) as u32
        } else {
            limit as u32
        }
    }

    /// The first buffer of a frame the device split across buffers (82576 datasheet 7.1.4 and
    /// 82574 datasheet 7.1.4.2: a packet longer than the receive buffer size, SRRCTL.BSIZEPKT
    /// / RCTL.BSIZE, takes as many descriptors as it needs, EOP set on the last, each
    /// descriptor's length field the bytes posted to its own buffer). Looks ahead from `head`
    /// for the descriptor with EOP: until the device has written it, `None` (the caller waits;
    /// QEMU writes a frame only when it has every descriptor it needs, and the silicon writes
    /// them in order). Then the first buffer completes [`Truncated`](RxError::Truncated) with
    /// the sum of the pieces as the frame's length, or with the error a piece reported
    /// (errors are reported in the last descriptor, so a frame error there is the frame's),
    /// and [`continuing`](Self::continuing) makes the other pieces
    /// [`Continuation`](RxError::Continuation)s, so that no piece is taken for a frame of its
    /// own.
    #[cold]
    #[inline(never)]
    fn split_frame(
        &mut self,
        token: Token,
        cap: u32,
        first: RxWriteback,
        raw: u64,
    ) -> Option<RxCompletion> {
        let failed = |status| RxCompletion {
            token,
            len: 0,
            status: Err(status),
            rss: None,
            checksum: RxChecksum::NONE,
        };
        let mut bad = if first.len > cap {
            Some(RxError::Length {
                reported: first.len,
                capacity: cap,
            })
        } else if first.undefined {
            Some(RxError::DeviceStatus { raw })
        } else {
            None
        };
        let mut total = u64::from(first.len);
        let mut at = self.slots.head.wrapping_add(1);
        let errors = loop {
            if at == self.slots.notified {
                return None;
            }
            let i = at & Self::MASK;
            let limit = self.limits[i];
            if limit == Self::FLUSHED {
                // The frame was cut by a flush (`flush` marks such a frame's own buffers
                // flushed too, so only a device that wrote out of order gets here).
                return Some(failed(RxError::Fragment));
            }
            let w1 = self.slots.ring.read(at, 1);
            if !F::rx_done(w1) {
                return None;
            }
            fence(Ordering::Acquire);
            let wb = F::rx_writeback(self.slots.ring.read(at, 0), w1);
            let capacity = Self::capacity(limit);
            if wb.len > capacity {
                bad = bad.or(Some(RxError::Length {
                    reported: wb.len,
                    capacity,
                }));
            } else if wb.undefined {
                bad = bad.or(Some(RxError::DeviceStatus { raw: w1 }));
            }
            total += u64::from(wb.len);
            at = at.wrapping_add(1);
            if wb.eop {
                break wb.errors | first.errors;
            }
        };
        // The slots after this one up to the EOP; `poll_general` counts this one off too.
        self.continuing = at.wrapping_sub(self.slots.head);
        Some(match bad {
            Some(e) => failed(e),
            None if errors != 0 => RxCompletion {
                token,
                len: first.len,
                status: Err(RxError::Frame { bits: errors }),
                rss: None,
                checksum: RxChecksum::NONE,
            },
            None => RxCompletion {
                token,
                len: first.len,
                // Pieces of 0 bytes after a whole buffer: the frame did fit.
                status: if total > u64::from(first.len) {
                    Err(RxError::Truncated {
                        frame_len: u32::try_from(total).unwrap_or(u32::MAX),
                    })
                } else {
                    Ok(())
                },
                rss: None,
                checksum: RxChecksum::NONE,
            },
        })
    }

    fn decode(token: Token, cap: u32, wb: RxWriteback, raw: u64) -> RxCompletion {
        let reported = wb.len;
        let (len, status) = if reported > cap {
            (
                0,
                Err(RxError::Length {
                    reported,
                    capacity: cap,
                }),
            )
        } else if wb.undefined {
            (0, Err(RxError::DeviceStatus { raw }))
        } else if wb.errors != 0 {
            (reported, Err(RxError::Frame { bits: wb.errors }))
        } else {
            (reported, Ok(()))
        };
        let (rss, checksum) = if status.is_ok() {
            (wb.rss, wb.checksum)
        } else {
            (None, RxChecksum::NONE)
        };
        RxCompletion {
            token,
            len,
            status,
            rss,
            checksum,
        }
    }

    /// With the hardware queue stopped: every buffer handed to the device that it wrote back
    /// (DD set) completes normally — wherever it is, even after one whose write-back never came
    /// — and every other pushed buffer completes with `Flushed`. Each buffer's write-back is its
    /// own, so a filled buffer's frame is delivered even if an earlier write-back was lost. (While
    /// the queue runs, `poll` stays strictly in order: a missing write-back holds the queue's
    /// completions until this flush, for the reason given at `TxRing::flush`.)
    ///
    /// A frame the device split across buffers and had not finished (pieces written back, the
    /// one with EOP not) never arrived whole: its pieces complete with `Flushed` too, so that
    /// nothing of it waits for the rest after the restart or is taken for a new frame.
    ///
    /// Whether a buffer was filled is decided here, once: a filled buffer is marked settled,
    /// and `poll` gives its token back even if the device clears its DD afterwards (then as
    /// `RxError::DeviceStatus`), so every token comes back exactly once whatever the device
    /// does to the ring after the flush.
    pub fn flush(&mut self) {
        let mut i = self.slots.head;
        // The first slot of a split frame whose EOP has not been seen yet (none inside the
        // pieces `continuing` counts: that frame is whole).
        let mut open: Option<usize> = None;
        let mut whole = self.continuing;
        while i != self.slots.tail {
            let idx = i & Self::MASK;
            let handed_over =
                i.wrapping_sub(self.slots.head) < self.slots.notified.wrapping_sub(self.slots.head);
            let limit = self.limits[idx];
            if limit < 0 {
                // Decided by an earlier flush (settled or flushed): not decided again.
                whole = whole.saturating_sub(1);
                i = i.wrapping_add(1);
                continue;
            }
            let w1 = if handed_over {
                self.slots.ring.read(i, 1)
            } else {
                0
            };
            let filled = handed_over && F::rx_done(w1);
            // A filled buffer after the first piece of a frame is a piece of it (marked, so
            // that it is never taken for a frame of its own should the device take back an
            // earlier piece after this flush).
            let piece = filled && whole == 0 && open.is_some();
            if whole > 0 {
                whole -= 1;
            } else if filled && open.is_none() && !F::rx_writeback(0, w1).eop {
                open = Some(i);
            } else if filled && open.is_some() && F::rx_writeback(0, w1).eop {
                open = None;
            }
            if filled {
                self.limits[idx] = Self::settled(limit) - if piece { Self::PIECE } else { 0 };
            } else {
                if let Some(from) = open.take() {
                    self.flush_from(from, i);
                }
                self.limits[idx] = Self::FLUSHED;
            }
            i = i.wrapping_add(1);
        }
        if let Some(from) = open {
            self.flush_from(from, self.slots.tail);
        }
        // Everything the device wrote before the DDs just read is visible from here on.
        fence(Ordering::Acquire);
        self.slots.notified = self.slots.tail;
    }
}

impl<F: Format, D: DmaRegion, const N: usize> RxRing<F, D, N> {
    /// Marks slots `from..to` flushed: the pieces of a frame the device never finished.
    fn flush_from(&mut self, from: usize, to: usize) {
        let mut i = from;
        while i != to {
            self.limits[i & Self::MASK] = Self::FLUSHED;
            i = i.wrapping_add(1);
        }
    }
}

#[cold]
fn small_error(len: u32, min: u32) -> PushError {
    PushError::BufferTooSmall { len, min }
}

#[cfg(any(test, feature = "fake"))]
pub mod fake {
    //! A DMA region in ordinary memory, so tests can play the device by hand (feature `fake`;
    //! needs `std`).
    #![allow(
        unsafe_code,
        reason = "implements the hal's unsafe DmaRegion trait over owned memory"
    )]
    extern crate std;
    use core::ptr::NonNull;
    use std::boxed::Box;
    use std::vec;

    use ringfab_hal::{DmaRegion, Iova};

    /// Zeroed, 4096-aligned memory of whole pages.
    pub struct FakeDma {
        mem: NonNull<[Page]>,
        len: usize,
        iova: u64,
    }

    #[repr(C, align(4096))]
    #[derive(Clone, Copy)]
    struct Page([u8; 4096]);

    // SAFETY: FakeDma owns its allocation exclusively; it is plain memory.
    unsafe impl Send for FakeDma {}

    impl FakeDma {
        /// `len` bytes (rounded up to pages) at device address `iova`.
        pub fn new(len: usize, iova: u64) -> Self {
            let pages = len.div_ceil(4096).max(1);
            let mem = Box::into_raw(vec![Page([0; 4096]); pages].into_boxed_slice());
            // Box::into_raw never returns null.
            let mem = NonNull::new(mem).expect("box pointer");
            FakeDma {
                mem,
                len: pages * 4096,
                iova,
            }
        }
    }

    impl Drop for FakeDma {
        fn drop(&mut self) {
            // SAFETY: `mem` came from Box::into_raw in `new` and is dropped exactly once.
            drop(unsafe { Box::from_raw(self.mem.as_ptr()) });
        }
    }

    // SAFETY: `cpu()..cpu()+len()` is one live, 4096-aligned, zero-initialised allocation owned by
    // this value and by no other region; the "device" (the test) reaches it only through the
    // same accessors.
    unsafe impl DmaRegion for FakeDma {
        fn cpu(&self) -> NonNull<u8> {
            self.mem.cast::<u8>()
        }
        fn iova(&self) -> Iova {
            Iova(self.iova)
        }
        fn len(&self) -> usize {
            self.len
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use std::vec::Vec;

    use super::fake::FakeDma;
    use super::*;
    use ringfab_hal::{Iova, RssHashKind, RssInfo};

    /// Bytes per descriptor.
    const DESC_LEN: usize = 16;

    /// The test format: the Intel layout both drivers' formats share (the 82576's advanced
    /// descriptors), written out by hand so that the rings are tested on their own.
    enum Intel {}

    /// Transmit word 1: DTALEN 15:0, EOP 24, RS 27, DD 32; bits 45:33 unexpected in a write-back.
    const EOP: u64 = 1 << 24;
    const RS: u64 = 1 << 27;
    const DD: u64 = 1 << 32;
    /// POPTS.TXSM (41): a data descriptor of a frame behind a checksum context; the context
    /// descriptor is DTYP 0010 (bits 23:20) with the checksum's start and offset in word 0.
    const TXSM: u64 = 1 << 41;
    const CONTEXT: u64 = 0b0010 << 20;
    const TX_UNEXPECTED: u64 = (0x1FFF << 33) & !TXSM;
    /// Receive checked-status bits: IPCS 6, L4I 5.
    const RX_IPCS: u32 = 1 << 6;
    const RX_L4I: u32 = 1 << 5;
    /// Receive checksum error bits: IPE 30, L4E 29.
    const RX_IPE: u32 = 1 << 30;
    const RX_L4E: u32 = 1 << 29;
    /// Receive status (word 1, 31:0): DD 0, EOP 1, errors 31:23, undefined bits.
    const RX_DD: u32 = 1 << 0;
    const RX_EOP: u32 = 1 << 1;
    const RX_ERRORS: u32 = 0xFF80_0000;
    const RX_UNDEFINED: u32 = 0x0078_7104;

    impl Format for Intel {
        fn tx_data(addr: u64, len: u16, eop: bool, rs: bool, _frame_len: u32) -> [u64; 2] {
            let w1 = u64::from(len) | if eop { EOP } else { 0 } | if rs { RS } else { 0 };
            [addr, w1]
        }
        fn tx_with_rs(word1: u64) -> u64 {
            word1 | RS
        }
        fn tx_writeback(word1: u64) -> TxWriteback {
            if word1 & DD == 0 {
                TxWriteback::Pending
            } else if word1 & TX_UNEXPECTED != 0 {
                TxWriteback::Bad(word1)
            } else {
                TxWriteback::Done
            }
        }
        fn tx_checksum_context(checksum: TxChecksum) -> Option<[u64; 2]> {
            // Like the 82576's L4T: only UDP's and TCP's field places.
            matches!(checksum.offset, TxChecksum::UDP | TxChecksum::TCP).then_some([
                u64::from(checksum.start) | u64::from(checksum.offset) << 16,
                CONTEXT,
            ])
        }
        const TX_CHECKSUM_DATA: u64 = TXSM;
        fn rx_read(addr: u64) -> [u64; 2] {
            [addr, 0]
        }
        fn rx_checksum(word1: u64) -> RxChecksum {
            let status = word1 as u32;
            RxChecksum::verified(status & RX_IPCS != 0, status & RX_L4I != 0)
        }
        const RX_CLEAN_MASK: u32 = RX_DD | RX_EOP | RX_ERRORS | RX_UNDEFINED;
        const RX_CLEAN: u32 = RX_DD | RX_EOP;
        fn rx_done(word1: u64) -> bool {
            word1 as u32 & RX_DD != 0
        }
        fn rx_len(word1: u64) -> u32 {
            (word1 >> 32) as u32 & 0xFFFF
        }
        fn rx_hashed(word0: u64) -> bool {
            word0 & 0xF != 0
        }
        fn rx_rss(word0: u64) -> Option<RssInfo> {
            let kind = match word0 & 0xF {
                1 => RssHashKind::Ipv4Tcp,
                2 => RssHashKind::Ipv4,
                7 => RssHashKind::Ipv4Udp,
                _ => return None,
            };
            Some(RssInfo {
                hash: (word0 >> 32) as u32,
                kind,
            })
        }
        fn rx_writeback(word0: u64, word1: u64) -> RxWriteback {
            let status = word1 as u32;
            RxWriteback {
                len: Self::rx_len(word1),
                eop: status & RX_EOP != 0,
                // A checksum found wrong leaves the frame good and unmarked.
                errors: status & RX_ERRORS & !(RX_IPE | RX_L4E),
                undefined: status & RX_UNDEFINED != 0,
                rss: Self::rx_rss(word0),
                checksum: RxChecksum::verified(
                    status & (RX_IPCS | RX_IPE) == RX_IPCS,
                    status & (RX_L4I | RX_L4E) == RX_L4I,
                ),
            }
        }
    }

    /// A receive write-back as the test device writes it.
    #[derive(Clone, Copy)]
    struct Wb {
        status_error: u32,
        len: u16,
        rss_type: u8,
        rss_hash: u32,
    }

    impl Wb {
        fn emit(&self) -> [u64; 2] {
            [
                u64::from(self.rss_type & 0xF) | u64::from(self.rss_hash) << 32,
                u64::from(self.status_error) | u64::from(self.len) << 32,
            ]
        }
    }

    type Tx<const N: usize> = TxRing<Intel, FakeDma, N>;
    type Rx<const N: usize> = RxRing<Intel, FakeDma, N>;

    const MAX_SEGS: usize = 4;
    const MAX_LEN: usize = 9014;

    fn seg(len: u16) -> TxSegment {
        TxSegment {
            iova: Iova(0x10_0000),
            len,
        }
    }

    fn tx_ring<const N: usize>() -> Tx<N> {
        let dma = FakeDma::new(N * DESC_LEN, 0x8000);
        TxRing::new(DmaRing::new(dma).ok().expect("ring fits"))
    }

    fn rx_ring<const N: usize>() -> Rx<N> {
        let dma = FakeDma::new(N * DESC_LEN, 0x9000);
        RxRing::new(DmaRing::new(dma).ok().expect("ring fits"))
    }

    fn word1<D: DmaRegion>(dma: &D, index: usize, n: usize) -> u64 {
        dma.read_u64((index % n) * DESC_LEN + 8)
    }

    /// Plays the device: DD on every RS descriptor in `[from, to)`.
    fn device_completes<const N: usize>(r: &Tx<N>, from: usize, to: usize) {
        let mut i = from;
        while i != to {
            let w1 = word1(r.dma(), i, N);
            if w1 & RS != 0 {
                r.dma().write_u64((i % N) * DESC_LEN + 8, w1 | DD);
            }
            i += 1;
        }
    }

    fn drain_tx<const N: usize>(r: &mut Tx<N>) -> Vec<TxCompletion> {
        let mut all = Vec::new();
        let mut out = [TxCompletion {
            token: Token(0),
            status: Ok(()),
        }; 3];
        loop {
            let n = r.poll(&mut out);
            if n == 0 {
                return all;
            }
            all.extend_from_slice(&out[..n]);
        }
    }

    #[test]
    fn tx_push_refuses_bad_frames_without_writing() {
        let mut r = tx_ring::<8>();
        assert_eq!(
            r.push(&[], Token(1), Report::Always, MAX_SEGS, MAX_LEN),
            Err(PushError::Segments {
                count: 0,
                max: MAX_SEGS
            })
        );
        assert_eq!(
            r.push(&[seg(1); 5], Token(1), Report::Always, MAX_SEGS, MAX_LEN),
            Err(PushError::Segments {
                count: 5,
                max: MAX_SEGS
            })
        );
        assert_eq!(
            r.push(
                &[seg(60), seg(0)],
                Token(1),
                Report::Always,
                MAX_SEGS,
                MAX_LEN
            ),
            Err(PushError::FrameLength {
                len: 60,
                max: MAX_LEN
            })
        );
        assert_eq!(
            r.push(
                &[seg(9000), seg(15)],
                Token(1),
                Report::Always,
                MAX_SEGS,
                MAX_LEN
            ),
            Err(PushError::FrameLength {
                len: 9015,
                max: MAX_LEN
            })
        );
        assert_eq!((r.free(), r.pending(), r.doorbell()), (7, 0, None));
        assert_eq!(word1(r.dma(), 0, 8), 0, "nothing written");
    }

    const UDP_AT_34: TxChecksum = TxChecksum {
        start: 34,
        offset: TxChecksum::UDP,
    };

    #[test]
    fn tx_checksummed_frame_is_a_context_then_marked_data_descriptors_reclaimed_together() {
        let mut r = tx_ring::<8>();
        r.push_checksummed(
            &[seg(42), seg(21)],
            Token(7),
            Report::Always,
            UDP_AT_34,
            MAX_SEGS,
            MAX_LEN,
        )
        .unwrap();
        // Three descriptors for two segments; one frame pending.
        assert_eq!((r.free(), r.pending()), (4, 1));
        let ctx = [r.dma().read_u64(0), word1(r.dma(), 0, 8)];
        assert_eq!(ctx, [34 | 6 << 16, CONTEXT]);
        let (d1, d2) = (word1(r.dma(), 1, 8), word1(r.dma(), 2, 8));
        assert_eq!((d1 & 0xFFFF, d2 & 0xFFFF), (42, 21));
        assert!(
            d1 & TXSM != 0 && d2 & TXSM != 0,
            "every data descriptor asks"
        );
        assert!(
            d1 & RS == 0 && d2 & (RS | EOP) == RS | EOP,
            "RS on the last only"
        );
        assert_eq!(r.doorbell(), Some(3));
        device_completes(&r, 0, 3);
        let got = drain_tx(&mut r);
        assert_eq!(got.len(), 1);
        assert_eq!((got[0].token, got[0].status), (Token(7), Ok(())));
        assert_eq!((r.free(), r.pending()), (7, 0), "the context came back too");
    }

    #[test]
    fn tx_checksummed_push_counts_the_context_against_room_and_refuses_what_it_cannot_express() {
        let mut r = tx_ring::<8>();
        for t in 0..3 {
            r.push(&[seg(60)], Token(t), Report::ErrorsOnly, MAX_SEGS, MAX_LEN)
                .unwrap();
        }
        let push = |r: &mut Tx<8>, segs: &[TxSegment], checksum| {
            r.push_checksummed(segs, Token(9), Report::Always, checksum, MAX_SEGS, MAX_LEN)
        };
        // Four free: four segments and their context would need five.
        assert_eq!(
            push(&mut r, &[seg(60); 4], UDP_AT_34),
            Err(PushError::Full { needed: 5, free: 4 })
        );
        // An offset the format has no field place for; a field past the frame's end.
        let odd = TxChecksum {
            start: 34,
            offset: 10,
        };
        assert_eq!(
            push(&mut r, &[seg(60)], odd),
            Err(PushError::Checksum {
                start: 34,
                offset: 10
            })
        );
        assert_eq!(
            push(&mut r, &[seg(41)], UDP_AT_34),
            Err(PushError::Checksum {
                start: 34,
                offset: 6
            })
        );
        assert_eq!(
            push(&mut r, &[], UDP_AT_34),
            Err(PushError::Segments {
                count: 0,
                max: MAX_SEGS
            })
        );
        assert_eq!((r.free(), r.pending()), (4, 3), "nothing queued");
        // Exactly the room left: the ring's one empty slot is kept, and the push that fills
        // it carries RS so that everything is reclaimed.
        push(&mut r, &[seg(42); 3], UDP_AT_34).unwrap();
        assert_eq!(r.free(), 0);
        assert!(word1(r.dma(), 6, 8) & RS != 0);
        r.doorbell();
        device_completes(&r, 0, 7);
        let got = drain_tx(&mut r);
        assert_eq!(got.iter().map(|c| c.token).collect::<Vec<_>>(), [Token(9)]);
        assert_eq!((r.free(), r.pending()), (7, 0));
    }

    #[test]
    fn tx_flush_flushes_a_checksummed_frame_with_its_context() {
        let mut r = tx_ring::<8>();
        r.push_checksummed(
            &[seg(60)],
            Token(3),
            Report::ErrorsOnly,
            UDP_AT_34,
            MAX_SEGS,
            MAX_LEN,
        )
        .unwrap();
        r.doorbell();
        r.flush();
        let got = drain_tx(&mut r);
        assert_eq!(
            got,
            [TxCompletion {
                token: Token(3),
                status: Err(TxError::Flushed)
            }]
        );
        assert_eq!((r.free(), r.pending()), (7, 0));
    }

    #[test]
    fn rx_checksum_marks_come_from_the_writeback_on_both_paths_and_wrong_ones_are_not_errors() {
        let mut r = rx_ring::<8>();
        for t in 0..4 {
            r.push(buf(2048), Token(t), 2048).unwrap();
        }
        r.doorbell();
        let with = |bits: u32| {
            let mut wb = good(60);
            wb.status_error |= bits;
            wb
        };
        device_writes(&r, 0, with(RX_IPCS | RX_L4I));
        device_writes(&r, 1, with(RX_IPCS));
        // Found wrong: decoded by the full rules, good and unmarked where wrong.
        device_writes(&r, 2, with(RX_IPCS | RX_L4I | RX_L4E));
        device_writes(&r, 3, with(RX_IPCS | RX_IPE | RX_L4I));
        let got = drain_rx(&mut r);
        let marks: Vec<_> = got
            .iter()
            .map(|c| (c.status, c.checksum.ipv4_good(), c.checksum.l4_good()))
            .collect();
        assert_eq!(
            marks,
            [
                (Ok(()), true, true),
                (Ok(()), true, false),
                (Ok(()), true, false),
                (Ok(()), false, true)
            ]
        );
        // `poll_each` (the closure path) reports the same marks.
        for t in 0..2 {
            r.push(buf(2048), Token(10 + t), 2048).unwrap();
        }
        r.doorbell();
        device_writes(&r, 4, with(RX_IPCS | RX_L4I));
        device_writes(&r, 5, good(60));
        let mut seen = Vec::new();
        r.poll_each(8, &mut |c| seen.push(c.checksum));
        assert_eq!(seen, [RxChecksum::verified(true, true), RxChecksum::NONE]);
    }

    #[test]
    fn tx_full_ring_refuses_at_push_and_ends_in_rs() {
        let mut r = tx_ring::<8>();
        for t in 0..3 {
            r.push(
                &[seg(60), seg(40)],
                Token(t),
                Report::ErrorsOnly,
                MAX_SEGS,
                MAX_LEN,
            )
            .unwrap();
        }
        assert_eq!(r.free(), 1);
        assert_eq!(
            r.push(
                &[seg(60), seg(40)],
                Token(9),
                Report::ErrorsOnly,
                MAX_SEGS,
                MAX_LEN
            ),
            Err(PushError::Full { needed: 2, free: 1 })
        );
        r.push(&[seg(60)], Token(3), Report::ErrorsOnly, MAX_SEGS, MAX_LEN)
            .unwrap();
        assert_eq!(r.free(), 0);
        assert!(
            word1(r.dma(), 6, 8) & RS != 0,
            "the push that fills the ring sets RS"
        );
        assert_eq!(
            r.push(&[seg(60)], Token(4), Report::Always, MAX_SEGS, MAX_LEN),
            Err(PushError::Full { needed: 1, free: 0 })
        );
    }

    #[test]
    fn tx_rs_policy_marks_always_threshold_and_batch_end() {
        let mut r = tx_ring::<16>(); // threshold 4
        r.push(&[seg(60)], Token(0), Report::ErrorsOnly, MAX_SEGS, MAX_LEN)
            .unwrap();
        r.push(&[seg(60)], Token(1), Report::Always, MAX_SEGS, MAX_LEN)
            .unwrap();
        r.push(&[seg(60)], Token(2), Report::ErrorsOnly, MAX_SEGS, MAX_LEN)
            .unwrap();
        r.push(
            &[seg(60), seg(1)],
            Token(3),
            Report::ErrorsOnly,
            MAX_SEGS,
            MAX_LEN,
        )
        .unwrap();
        r.push(
            &[seg(60), seg(1), seg(1)],
            Token(4),
            Report::ErrorsOnly,
            MAX_SEGS,
            MAX_LEN,
        )
        .unwrap();
        r.push(&[seg(60)], Token(5), Report::ErrorsOnly, MAX_SEGS, MAX_LEN)
            .unwrap();
        let rs: Vec<bool> = (0..9).map(|i| (word1(r.dma(), i, 16)) & RS != 0).collect();
        // desc: 0 (t0) 1 (t1, Always) 2 (t2) 3-4 (t3) 5-7 (t4: 1+2+3 = 6 ≥ 4 → RS) 8 (t5)
        assert_eq!(
            rs,
            [false, true, false, false, false, false, false, true, false]
        );
        assert_eq!(r.doorbell(), Some(9));
        assert!(
            word1(r.dma(), 8, 16) & RS != 0,
            "doorbell marks the batch's last frame"
        );
        assert!(word1(r.dma(), 7, 16) & EOP != 0 && word1(r.dma(), 6, 16) & EOP == 0);
        assert_eq!(r.doorbell(), None, "nothing new");
    }

    #[test]
    fn tx_every_token_comes_back_exactly_once_across_wraparound() {
        let mut r = tx_ring::<8>();
        let mut seen = Vec::new();
        let mut next = 0u64;
        let mut device_at = 0usize;
        for round in 0..40 {
            while r.free() >= 2 {
                let report = if next % 3 == 0 {
                    Report::ErrorsOnly
                } else {
                    Report::Always
                };
                let segs = [seg(60), seg(20)];
                let n = 1 + (next as usize + round) % 2;
                r.push(&segs[..n], Token(next), report, MAX_SEGS, MAX_LEN)
                    .unwrap();
                next += 1;
            }
            r.doorbell();
            device_completes(&r, device_at, r.slots.tail);
            device_at = r.slots.tail;
            for c in drain_tx(&mut r) {
                assert_eq!(c.status, Ok(()));
                seen.push(c.token.0);
            }
        }
        assert_eq!(r.pending(), 0);
        let expected: Vec<u64> = (0..next).filter(|t| t % 3 != 0).collect();
        assert_eq!(
            seen, expected,
            "in order, once each, ErrorsOnly successes silent"
        );
    }

    #[test]
    fn tx_pending_counts_frames_not_descriptors_on_both_paths() {
        let mut r = tx_ring::<16>();
        r.push(&[seg(60)], Token(0), Report::Always, MAX_SEGS, MAX_LEN)
            .unwrap();
        r.push(
            &[seg(60), seg(1), seg(1)],
            Token(1),
            Report::Always,
            MAX_SEGS,
            MAX_LEN,
        )
        .unwrap();
        r.push(&[seg(60)], Token(2), Report::ErrorsOnly, MAX_SEGS, MAX_LEN)
            .unwrap();
        r.push(&[seg(60)], Token(3), Report::Always, MAX_SEGS, MAX_LEN)
            .unwrap();
        assert_eq!((r.pending(), r.free()), (4, 9));
        r.doorbell();
        device_completes(&r, 0, 1); // only the first frame: the fast path takes it
        assert_eq!(drain_tx(&mut r).len(), 1);
        assert_eq!(r.pending(), 3);
        device_completes(&r, 1, r.slots.tail);
        let got: Vec<u64> = drain_tx(&mut r).iter().map(|c| c.token.0).collect();
        assert_eq!(
            got,
            [1, 3],
            "multi-descriptor frame, silent success, fast again"
        );
        assert_eq!((r.pending(), r.free()), (0, 15));
    }

    #[test]
    fn tx_done_bit_beyond_what_was_rung_is_ignored() {
        let mut r = tx_ring::<8>();
        r.push(&[seg(60)], Token(1), Report::Always, MAX_SEGS, MAX_LEN)
            .unwrap();
        r.doorbell();
        r.push(&[seg(60)], Token(2), Report::Always, MAX_SEGS, MAX_LEN)
            .unwrap();
        // The device lies: DD on the pushed-but-not-rung descriptor and on one never pushed.
        r.dma().write_u64(DESC_LEN + 8, word1(r.dma(), 1, 8) | DD);
        r.dma().write_u64(2 * DESC_LEN + 8, DD | RS);
        assert!(drain_tx(&mut r).is_empty());
        assert_eq!(r.pending(), 2);
        // The next push overwrites the stale DD.
        r.push(&[seg(60)], Token(3), Report::Always, MAX_SEGS, MAX_LEN)
            .unwrap();
        assert!(word1(r.dma(), 2, 8) & DD == 0);
    }

    #[test]
    fn tx_garbage_writeback_is_a_device_status_error_for_that_token() {
        let mut r = tx_ring::<8>();
        r.push(&[seg(60)], Token(1), Report::ErrorsOnly, MAX_SEGS, MAX_LEN)
            .unwrap();
        r.push(&[seg(60)], Token(2), Report::ErrorsOnly, MAX_SEGS, MAX_LEN)
            .unwrap();
        r.doorbell();
        let raw = u64::MAX;
        r.dma().write_u64(DESC_LEN + 8, raw);
        let got = drain_tx(&mut r);
        assert_eq!(
            got,
            [TxCompletion {
                token: Token(2),
                status: Err(TxError::DeviceStatus { raw })
            }]
        );
        assert_eq!(r.pending(), 0);
    }

    #[test]
    fn tx_flush_completes_written_back_frames_and_flushes_the_rest() {
        let mut r = tx_ring::<16>();
        for t in 0..3 {
            r.push(&[seg(60)], Token(t), Report::Always, MAX_SEGS, MAX_LEN)
                .unwrap();
        }
        r.push(&[seg(60)], Token(3), Report::ErrorsOnly, MAX_SEGS, MAX_LEN)
            .unwrap();
        r.doorbell();
        r.push(&[seg(60)], Token(4), Report::ErrorsOnly, MAX_SEGS, MAX_LEN)
            .unwrap();
        device_completes(&r, 0, 1); // only token 0 was sent
        r.flush();
        let got = drain_tx(&mut r);
        let want: Vec<TxCompletion> = [
            (0, Ok(())),
            (1, Err(TxError::Flushed)),
            (2, Err(TxError::Flushed)),
            (3, Err(TxError::Flushed)),
            (4, Err(TxError::Flushed)),
        ]
        .into_iter()
        .map(|(t, status)| TxCompletion {
            token: Token(t),
            status,
        })
        .collect();
        assert_eq!(got, want);
        assert_eq!((r.pending(), r.free(), r.hw_tail()), (0, 15, 5));
        // The ring works on from where it stopped.
        r.push(&[seg(60)], Token(5), Report::Always, MAX_SEGS, MAX_LEN)
            .unwrap();
        assert_eq!(r.doorbell(), Some(6));
        device_completes(&r, 5, 6);
        assert_eq!(
            drain_tx(&mut r),
            [TxCompletion {
                token: Token(5),
                status: Ok(())
            }]
        );
    }

    #[test]
    fn tx_flush_counts_frames_before_a_later_writeback_as_sent() {
        let mut r = tx_ring::<16>();
        for t in 0..4 {
            r.push(&[seg(60)], Token(t), Report::Always, MAX_SEGS, MAX_LEN)
                .unwrap();
        }
        r.doorbell();
        // The device sent frames 0..3 in order but wrote back only frame 1's DD (0's was
        // lost); frames 2 and 3 were not reached before the queue stopped.
        device_completes(&r, 1, 2);
        assert!(
            drain_tx(&mut r).is_empty(),
            "a running queue stays in order"
        );
        r.flush();
        let got: Vec<_> = drain_tx(&mut r)
            .iter()
            .map(|c| (c.token.0, c.status))
            .collect();
        assert_eq!(
            got,
            [
                (0, Ok(())), // proven sent by frame 1's later write-back
                (1, Ok(())),
                (2, Err(TxError::Flushed)),
                (3, Err(TxError::Flushed)),
            ]
        );
        assert_eq!((r.pending(), r.free()), (0, 15));
    }

    #[test]
    fn tx_flush_does_not_count_unreported_frames_without_a_later_writeback_as_sent() {
        let mut r = tx_ring::<16>();
        // Three selective frames (no RS of their own) and a reported one that gets the RS.
        for t in 0..3 {
            r.push(&[seg(60)], Token(t), Report::ErrorsOnly, MAX_SEGS, MAX_LEN)
                .unwrap();
        }
        r.doorbell(); // the batch's last frame (token 2) gets RS
                      // The device sent nothing before the queue stopped: no DD anywhere.
        r.flush();
        let got: Vec<_> = drain_tx(&mut r)
            .iter()
            .map(|c| (c.token.0, c.status))
            .collect();
        assert_eq!(
            got,
            [
                (0, Err(TxError::Flushed)),
                (1, Err(TxError::Flushed)),
                (2, Err(TxError::Flushed)),
            ],
            "every unsent frame is reported, selective or not"
        );
        assert_eq!(r.pending(), 0);
    }

    fn buf(len: u32) -> RxBuffer {
        RxBuffer {
            iova: Iova(0x20_0000),
            len,
        }
    }

    fn device_writes<const N: usize>(r: &Rx<N>, index: usize, wb: Wb) {
        let [w0, w1] = wb.emit();
        r.dma().write_u64((index % N) * DESC_LEN, w0);
        r.dma().write_u64((index % N) * DESC_LEN + 8, w1);
    }

    fn good(len: u16) -> Wb {
        Wb {
            status_error: RX_DD | RX_EOP,
            len,
            rss_type: 0,
            rss_hash: 0,
        }
    }

    fn drain_rx<const N: usize>(r: &mut Rx<N>) -> Vec<RxCompletion> {
        let mut all = Vec::new();
        let mut out = [RxCompletion {
            token: Token(0),
            len: 0,
            status: Ok(()),
            rss: None,
            checksum: RxChecksum::NONE,
        }; 2];
        loop {
            let n = r.poll(&mut out);
            if n == 0 {
                return all;
            }
            all.extend_from_slice(&out[..n]);
        }
    }

    #[test]
    fn rx_push_refuses_small_buffers_and_full_ring() {
        let mut r = rx_ring::<8>();
        assert_eq!(
            r.push(buf(1000), Token(0), 2048),
            Err(PushError::BufferTooSmall {
                len: 1000,
                min: 2048
            })
        );
        for t in 0..7 {
            r.push(buf(2048), Token(t), 2048).unwrap();
        }
        assert_eq!(
            r.push(buf(2048), Token(7), 2048),
            Err(PushError::Full { needed: 1, free: 0 })
        );
        assert_eq!(r.pending(), 7);
    }

    #[test]
    fn rx_lying_length_is_a_length_error_not_a_panic() {
        let mut r = rx_ring::<8>();
        r.push(buf(2048), Token(1), 2048).unwrap();
        r.doorbell();
        device_writes(&r, 0, good(0xFFFF));
        let got = drain_rx(&mut r);
        assert_eq!(got.len(), 1);
        assert_eq!(
            got[0].status,
            Err(RxError::Length {
                reported: 0xFFFF,
                capacity: 2048
            })
        );
        assert_eq!(got[0].len, 0);
    }

    #[test]
    fn rx_garbage_status_is_device_status_and_errors_are_frame_errors() {
        let mut r = rx_ring::<8>();
        for t in 0..3 {
            r.push(buf(2048), Token(t), 2048).unwrap();
        }
        r.doorbell();
        let mut garbage = good(60);
        garbage.status_error |= 1 << 20;
        device_writes(&r, 0, garbage);
        let mut crc = good(60);
        crc.status_error |= 1 << 24;
        device_writes(&r, 1, crc);
        let mut hashed = good(98);
        hashed.rss_type = 2;
        hashed.rss_hash = 0x323E_8FC2;
        device_writes(&r, 2, hashed);
        let got = drain_rx(&mut r);
        assert_eq!(
            got[0].status,
            Err(RxError::DeviceStatus {
                raw: garbage.emit()[1]
            })
        );
        assert_eq!(
            (got[1].status, got[1].len),
            (Err(RxError::Frame { bits: 1 << 24 }), 60)
        );
        assert_eq!((got[2].status, got[2].len), (Ok(()), 98));
        assert_eq!(
            got[2].rss,
            Some(RssInfo {
                hash: 0x323E_8FC2,
                kind: RssHashKind::Ipv4
            })
        );
    }

    #[test]
    fn rx_one_poll_hands_over_between_fast_and_full_rules_in_order() {
        let mut r = rx_ring::<8>();
        for t in 0..6 {
            r.push(buf(2048), Token(t), 2048).unwrap();
        }
        r.doorbell();
        device_writes(&r, 0, good(60));
        device_writes(&r, 1, good(2048)); // exactly the buffer: still good
        device_writes(&r, 2, good(2049)); // one byte too many
        device_writes(&r, 3, good(61));
        let mut hashed = good(62);
        hashed.rss_type = 7;
        hashed.rss_hash = 0xDEAD_BEEF;
        device_writes(&r, 4, hashed);
        // 5: no write-back yet.
        let mut out = [RxCompletion {
            token: Token(99),
            len: 99,
            status: Err(RxError::Flushed),
            rss: None,
            checksum: RxChecksum::NONE,
        }; 8];
        assert_eq!(r.poll(&mut out), 5);
        let got: Vec<_> = out[..5]
            .iter()
            .map(|c| (c.token.0, c.len, c.status.is_ok(), c.rss.map(|h| h.hash)))
            .collect();
        assert_eq!(
            got,
            [
                (0, 60, true, None),
                (1, 2048, true, None),
                (2, 0, false, None),
                (3, 61, true, None),
                (4, 62, true, Some(0xDEAD_BEEF)),
            ]
        );
        assert_eq!(out[4].rss.map(|h| h.kind), Some(RssHashKind::Ipv4Udp));
        assert_eq!(r.pending(), 1);
    }

    #[test]
    fn rx_poll_each_split_hands_the_declined_completion_and_the_rest_to_slow_in_order() {
        let mut r = rx_ring::<8>();
        for t in 0..7 {
            r.push(buf(2048), Token(t), 2048).unwrap();
        }
        r.doorbell();
        device_writes(&r, 0, good(60));
        device_writes(&r, 1, good(61));
        device_writes(&r, 2, good(62)); // declined by `fast`
        device_writes(&r, 3, good(63));
        device_writes(&r, 4, good(2049)); // one byte too many: not clean
        device_writes(&r, 5, good(65));
        // 6: no write-back yet.
        let (mut fast_saw, mut slow_saw) = (Vec::new(), Vec::new());
        let n = r.poll_each_split(
            8,
            &mut |c| {
                fast_saw.push(c.token.0);
                c.token.0 < 2
            },
            &mut |c| slow_saw.push((c.token.0, c.len, c.status.is_ok())),
        );
        assert_eq!(n, 6);
        // `fast` saw the declined completion once; it went to `slow` as well, with every one
        // after it, exactly once each.
        assert_eq!(fast_saw, [0, 1, 2]);
        assert_eq!(
            slow_saw,
            [(2, 62, true), (3, 63, true), (4, 0, false), (5, 65, true)]
        );
        assert_eq!(r.pending(), 1);
        // `max` counts both; a completion `fast` takes is not handed out again.
        device_writes(&r, 6, good(66));
        let mut slow_saw = Vec::new();
        assert_eq!(
            r.poll_each_split(8, &mut |_| true, &mut |c| slow_saw.push(c.token.0)),
            1
        );
        assert!(slow_saw.is_empty());
        assert_eq!(r.pending(), 0);
    }

    fn piece(len: u16) -> Wb {
        let mut w = good(len);
        w.status_error = RX_DD;
        w
    }

    #[test]
    fn rx_split_frame_is_one_truncated_buffer_and_continuations() {
        let mut r = rx_ring::<8>();
        for t in 0..4 {
            r.push(buf(1024), Token(t), 1024).unwrap();
        }
        r.doorbell();
        device_writes(&r, 0, piece(1024));
        device_writes(&r, 1, piece(1024));
        // Not yet the EOP: the first buffer waits for the whole frame.
        assert!(drain_rx(&mut r).is_empty());
        device_writes(&r, 2, good(500));
        device_writes(&r, 3, good(64));
        let got: Vec<_> = drain_rx(&mut r)
            .iter()
            .map(|c| (c.token.0, c.status, c.len))
            .collect();
        assert_eq!(
            got,
            [
                (0, Err(RxError::Truncated { frame_len: 2548 }), 1024),
                (1, Err(RxError::Continuation), 0),
                (2, Err(RxError::Continuation), 0),
                (3, Ok(()), 64),
            ]
        );
        assert_eq!(r.pending(), 0);
    }

    #[test]
    fn rx_split_frame_continuations_survive_a_poll_cut_short_and_the_fast_paths() {
        let mut r = rx_ring::<8>();
        for t in 0..4 {
            r.push(buf(1024), Token(t), 1024).unwrap();
        }
        r.doorbell();
        device_writes(&r, 0, piece(1024));
        device_writes(&r, 1, good(100)); // the EOP piece: DD|EOP, clean to the fast path
        device_writes(&r, 2, good(64));
        let mut one = [RxCompletion::EMPTY; 1];
        assert_eq!(r.poll(&mut one), 1);
        assert_eq!(one[0].status, Err(RxError::Truncated { frame_len: 1124 }));
        let mut got = Vec::new();
        r.poll_each_split(8, &mut |_| false, &mut |c| got.push((c.token.0, c.status)));
        assert_eq!(
            got,
            [(1, Err(RxError::Continuation)), (2, Ok(()))],
            "the EOP piece is a continuation, not a frame of its own"
        );
    }

    #[test]
    fn rx_split_frame_with_an_error_or_a_lie_in_a_piece_fails_its_first_buffer_only() {
        let mut r = rx_ring::<8>();
        for t in 0..6 {
            r.push(buf(1024), Token(t), 1024).unwrap();
        }
        r.doorbell();
        device_writes(&r, 0, piece(1024));
        let mut crc = good(10);
        crc.status_error |= 1 << 24; // CRC error (82576 RXE)
        device_writes(&r, 1, crc);
        device_writes(&r, 2, piece(1024));
        device_writes(&r, 3, good(2000)); // longer than its buffer
        device_writes(&r, 4, good(64));
        let got: Vec<_> = drain_rx(&mut r)
            .iter()
            .map(|c| (c.token.0, c.status, c.len))
            .collect();
        assert_eq!(
            got,
            [
                (0, Err(RxError::Frame { bits: 1 << 24 }), 1024),
                (1, Err(RxError::Continuation), 0),
                (
                    2,
                    Err(RxError::Length {
                        reported: 2000,
                        capacity: 1024
                    }),
                    0
                ),
                (3, Err(RxError::Continuation), 0),
                (4, Ok(()), 64),
            ]
        );
    }

    /// Issue 14 item 11: a write-back without EOP before a flush left the ring expecting the
    /// rest of a frame, and the first good frame after the restart came back as a fragment.
    #[test]
    fn rx_an_unfinished_split_frame_is_flushed_and_the_next_frame_after_the_restart_is_good() {
        let mut r = rx_ring::<8>();
        for t in 0..3 {
            r.push(buf(1024), Token(t), 1024).unwrap();
        }
        r.doorbell();
        device_writes(&r, 0, good(60));
        device_writes(&r, 1, piece(1024));
        device_writes(&r, 2, piece(1024)); // the device stops before the EOP
        r.flush();
        let got: Vec<_> = drain_rx(&mut r)
            .iter()
            .map(|c| (c.token.0, c.status))
            .collect();
        assert_eq!(
            got,
            [
                (0, Ok(())),
                (1, Err(RxError::Flushed)),
                (2, Err(RxError::Flushed))
            ]
        );
        r.push(buf(1024), Token(3), 1024).unwrap();
        r.doorbell();
        device_writes(&r, 3, good(64));
        let got = drain_rx(&mut r);
        assert_eq!(
            (got[0].token, got[0].status, got[0].len),
            (Token(3), Ok(()), 64)
        );
    }

    #[test]
    fn rx_a_whole_split_frame_written_before_a_flush_still_completes_truncated() {
        let mut r = rx_ring::<8>();
        for t in 0..4 {
            r.push(buf(1024), Token(t), 1024).unwrap();
        }
        r.doorbell();
        device_writes(&r, 0, piece(1024));
        device_writes(&r, 1, good(30));
        r.flush();
        let got: Vec<_> = drain_rx(&mut r)
            .iter()
            .map(|c| (c.token.0, c.status))
            .collect();
        assert_eq!(
            got,
            [
                (0, Err(RxError::Truncated { frame_len: 1054 })),
                (1, Err(RxError::Continuation)),
                (2, Err(RxError::Flushed)),
                (3, Err(RxError::Flushed))
            ]
        );
    }

    #[test]
    fn rx_done_bit_beyond_what_was_rung_is_ignored() {
        let mut r = rx_ring::<8>();
        r.push(buf(2048), Token(1), 2048).unwrap();
        device_writes(&r, 0, good(60)); // pushed, not rung
        device_writes(&r, 1, good(60)); // never pushed
        assert!(drain_rx(&mut r).is_empty());
        r.doorbell();
        r.push(buf(2048), Token(2), 2048).unwrap();
        assert_eq!(word1(r.dma(), 1, 8), 0, "push clears a stale write-back");
        let got = drain_rx(&mut r);
        assert_eq!(got.iter().map(|c| c.token.0).collect::<Vec<_>>(), [1]);
    }

    #[test]
    fn rx_every_token_comes_back_exactly_once_across_wraparound() {
        let mut r = rx_ring::<8>();
        let (mut next, mut seen) = (0u64, Vec::new());
        for _ in 0..30 {
            while r.free() > 0 {
                r.push(buf(2048), Token(next), 2048).unwrap();
                next += 1;
            }
            r.doorbell();
            let from = r.slots.head;
            for i in 0..5 {
                device_writes(&r, from + i, good(60 + i as u16));
            }
            seen.extend(drain_rx(&mut r).iter().map(|c| {
                assert_eq!(c.status, Ok(()));
                c.token.0
            }));
        }
        assert_eq!(seen, (0..150).collect::<Vec<_>>());
    }

    #[test]
    fn rx_flush_returns_filled_buffers_then_flushed() {
        let mut r = rx_ring::<8>();
        for t in 0..5 {
            r.push(buf(2048), Token(t), 2048).unwrap();
        }
        r.doorbell();
        r.push(buf(2048), Token(5), 2048).unwrap();
        device_writes(&r, 0, good(60));
        device_writes(&r, 1, good(61));
        device_writes(&r, 3, good(63)); // after a write-back that never came
        r.flush();
        let got: Vec<_> = drain_rx(&mut r)
            .iter()
            .map(|c| (c.token.0, c.status, c.len))
            .collect();
        assert_eq!(
            got,
            [
                (0, Ok(()), 60),
                (1, Ok(()), 61),
                (2, Err(RxError::Flushed), 0),
                (3, Ok(()), 63), // its own write-back: the frame is delivered
                (4, Err(RxError::Flushed), 0),
                (5, Err(RxError::Flushed), 0), // pushed, never handed over
            ]
        );
        assert_eq!((r.pending(), r.hw_tail()), (0, 6));
        r.push(buf(2048), Token(6), 2048).unwrap();
        assert_eq!(r.doorbell(), Some(7));
        device_writes(&r, 6, good(70));
        assert_eq!(drain_rx(&mut r)[0].token, Token(6));
    }

    /// Issue 14 item 10: a lying device clears the done bits of buffers it had filled, after
    /// the flush (which saw them) and before the poll. Every token still comes back, exactly
    /// once: the ones it took back as `DeviceStatus` with the word it left, nothing held.
    #[test]
    fn rx_flush_gives_back_filled_buffers_whose_done_bit_the_device_clears_afterwards() {
        for each in [false, true] {
            let mut r = rx_ring::<8>();
            for t in 0..4 {
                r.push(buf(2048), Token(t), 2048).unwrap();
            }
            r.doorbell();
            device_writes(&r, 0, good(60));
            device_writes(&r, 1, good(61));
            device_writes(&r, 2, good(62));
            r.flush();
            // The lie: DD (and everything else) gone from 0 and 2, 1 rewritten longer.
            device_writes(
                &r,
                0,
                Wb {
                    status_error: 0,
                    ..good(0)
                },
            );
            device_writes(&r, 1, good(4000));
            device_writes(
                &r,
                2,
                Wb {
                    status_error: 0,
                    ..good(0)
                },
            );
            let got: Vec<_> = if each {
                let v = core::cell::RefCell::new(Vec::new());
                loop {
                    let n = r.poll_each_split(
                        3,
                        &mut |c| {
                            v.borrow_mut().push(*c);
                            true
                        },
                        &mut |c| v.borrow_mut().push(*c),
                    );
                    if n == 0 {
                        break;
                    }
                }
                v.into_inner()
            } else {
                drain_rx(&mut r)
            };
            let got: Vec<_> = got.iter().map(|c| (c.token.0, c.status, c.len)).collect();
            let lied = |raw| Err(RxError::DeviceStatus { raw });
            assert_eq!(
                got,
                [
                    (0, lied(0), 0),
                    (
                        1,
                        Err(RxError::Length {
                            reported: 4000,
                            capacity: 2048
                        }),
                        0
                    ),
                    (2, lied(0), 0),
                    (3, Err(RxError::Flushed), 0),
                ],
                "poll_each_split: {each}"
            );
            assert_eq!(r.pending(), 0);
            // A second flush before the poll decides nothing again.
            r.push(buf(2048), Token(4), 2048).unwrap();
            r.doorbell();
            device_writes(&r, 4, good(64));
            r.flush();
            r.flush();
            device_writes(
                &r,
                4,
                Wb {
                    status_error: 0,
                    ..good(0)
                },
            );
            assert_eq!(drain_rx(&mut r)[0].status, lied(0));
            assert_eq!(r.pending(), 0);
        }
    }

    /// Where the two fixes of issue 14 meet (items 10 and 11: settled limits and split
    /// frames): a frame split over three buffers is written back whole, with a good frame
    /// after it, before the flush; then a lying device clears the done bit of one of its
    /// pieces (the first, the middle or the EOP piece) between the flush and the poll. The
    /// hal's "Flush and quiet devices": "every token comes back exactly once, or is held while
    /// `fault` says why" — here nothing is faulted, so every token comes back once, none is
    /// left pending, no piece of the cut frame is delivered as a good frame, and the ring
    /// takes and completes a good frame after the restart; through `poll` and
    /// `poll_each_split` alike.
    #[test]
    fn rx_a_split_frame_written_whole_before_a_flush_whose_piece_the_device_takes_back_comes_back_once(
    ) {
        for each in [false, true] {
            for lied in 0..3 {
                let mut r = rx_ring::<8>();
                for t in 0..6 {
                    r.push(buf(1024), Token(t), 1024).unwrap();
                }
                r.doorbell();
                device_writes(&r, 0, piece(1024));
                device_writes(&r, 1, piece(1024));
                device_writes(&r, 2, good(100)); // EOP: the frame is whole
                device_writes(&r, 3, good(64));
                r.flush();
                // The lie: DD (and everything else) gone from one piece.
                device_writes(
                    &r,
                    lied,
                    Wb {
                        status_error: 0,
                        ..good(0)
                    },
                );
                let got: Vec<_> = if each {
                    let v = core::cell::RefCell::new(Vec::new());
                    loop {
                        let n = r.poll_each_split(
                            2,
                            &mut |c| {
                                v.borrow_mut().push(*c);
                                true
                            },
                            &mut |c| v.borrow_mut().push(*c),
                        );
                        if n == 0 {
                            break;
                        }
                    }
                    v.into_inner()
                } else {
                    drain_rx(&mut r)
                };
                let what = (each, lied);
                let mut tokens: Vec<_> = got.iter().map(|c| c.token.0).collect();
                tokens.sort_unstable();
                assert_eq!(
                    tokens,
                    [0, 1, 2, 3, 4, 5],
                    "each token once: {what:?} {got:?}"
                );
                assert_eq!(r.pending(), 0, "{what:?}");
                // The piece taken back comes back as `DeviceStatus` with the word left in
                // it; the frame's other pieces as `Fragment`, none as a frame of its own
                // (before the fix the EOP piece after a taken-back middle piece completed
                // `Ok`, and a middle piece after a taken-back first piece `Truncated`).
                let cut: Vec<_> = got
                    .iter()
                    .filter(|c| c.token.0 < 3)
                    .map(|c| (c.token.0, c.status))
                    .collect();
                let want: Vec<_> = (0..3u64)
                    .map(|t| {
                        if t as usize == lied {
                            (t, Err(RxError::DeviceStatus { raw: 0 }))
                        } else {
                            (t, Err(RxError::Fragment))
                        }
                    })
                    .collect();
                assert_eq!(cut, want, "{what:?}");
                let after: Vec<_> = got.iter().filter(|c| c.token.0 >= 3).collect();
                assert_eq!(
                    after
                        .iter()
                        .map(|c| (c.token.0, c.status, c.len))
                        .collect::<Vec<_>>(),
                    [
                        (3, Ok(()), 64),
                        (4, Err(RxError::Flushed), 0),
                        (5, Err(RxError::Flushed), 0)
                    ],
                    "the frame after it, and the unfilled buffers: {what:?}"
                );
                // After the restart the ring is whole again: the next frame is good.
                r.push(buf(1024), Token(6), 1024).unwrap();
                r.doorbell();
                device_writes(&r, 6, good(70));
                let next = drain_rx(&mut r);
                assert_eq!(
                    next.iter()
                        .map(|c| (c.token.0, c.status, c.len))
                        .collect::<Vec<_>>(),
                    [(6, Ok(()), 70)],
                    "{what:?}"
                );
                assert_eq!(r.pending(), 0);
            }
        }
    }
}
