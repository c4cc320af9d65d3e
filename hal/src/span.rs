//! Caller memory the device has mapped, as the CPU reaches it: [`DmaSpan`].
//!
//! [`DmaRegion`](crate::DmaRegion) is memory the platform allocates for a device (its rings);
//! [`DmaMapping`](crate::DmaMapping) makes *caller* memory reachable by a device — memory
//! registration. A `DmaSpan` is the CPU's side of such memory: a pointer that keeps the
//! provenance of the allocation it was made from (it is never rebuilt from an integer) and a
//! length, with copies in and out, a fill and small reads, each checked against the length.
//!
//! None of the accessors forms a reference into the memory (the device may write it at other
//! times: DESIGN.md decision 5), and none panics: an access that would reach outside the span
//! does nothing and says so ([`OutOfSpan`], or `None`).
//!
//! A span is to its memory what a raw pointer is: `Copy`, with no lifetime. What the accessors
//! add is the bound and the provenance. Which bytes may be touched, and when — that the memory
//! is still there, that the device is not writing it, that no other thread is — stays the
//! promise of whoever made the span ([`DmaSpan::new`]), for every copy of it. That is why making
//! one is `unsafe` and using one is not: make spans only where every copy stays under your
//! control (ringfab's core keeps them in crate-private types and touches a buffer's bytes only
//! while it owns the buffer).
//!
//! A hot loop that reads the same few bytes of many buffers — a receive path reading frame
//! headers — checks each buffer's length once, when it takes a [`DmaHead`] of it
//! ([`DmaSpan::head`]): the head's reads are at offsets fixed at compile time and checked
//! there, so they carry no check at run time, the way [`DmaRing`](crate::DmaRing) checks its
//! region once and then cannot reach outside it.

use core::ptr::NonNull;

use crate::OutOfSpan;

/// `len` bytes of mapped caller memory at a pointer that keeps its provenance; checked copies
/// and reads. See the [module documentation](self).
///
/// # Implementation safety
///
/// What the accessors guarantee, given [`new`](Self::new)'s promise: every access lies inside
/// the span's `len` bytes (checked on every call: an access that would not is refused, never a
/// panic and never a partial copy), goes through the pointer `new` was given (so it has that
/// pointer's provenance, and Miri checks it as such under strict provenance), and never forms a
/// `&`/`&mut` to the memory. Copies are plain (not volatile): they are for bytes the device
/// does not own at that moment, as [`DmaRegion::read_bytes`](crate::DmaRegion::read_bytes)'s.
///
/// ```
/// use core::ptr::NonNull;
/// use ringfab_hal::DmaSpan;
///
/// let mut mem = [0u8; 64];
/// // SAFETY: `mem` outlives the span and is touched only through it (and its copies) while
/// // the span is used; no device.
/// let span = unsafe { DmaSpan::new(NonNull::from(&mut mem).cast(), 64) };
/// span.write_bytes(12, &0x88b5u16.to_be_bytes()).unwrap();
/// assert_eq!(span.read_u16_be(12), Some(0x88b5));
/// assert!(span.write_bytes(60, &[0; 8]).is_err(), "past the end: refused, nothing written");
/// let tail = span.sub(32, 32).unwrap();
/// assert_eq!(tail.addr(), span.addr() + 32);
/// assert_eq!(tail.read_u64_le(32), None);
/// ```
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct DmaSpan {
    /// First byte; `len` bytes from it are valid ([`new`](Self::new)'s promise).
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: a span is a pointer and a length. Sending one to another thread is sound because
// `new`'s promise covers every copy wherever it is used: the bytes stay valid, and accesses
// through copies never race with each other, a reference, or the device.
unsafe impl Send for DmaSpan {}

// SAFETY: every accessor takes the span by value, so `&DmaSpan` on another thread gives exactly
// what a copy sent there gives (see `Send`).
unsafe impl Sync for DmaSpan {}

impl DmaSpan {
    /// No memory: every non-empty access is refused. What a buffer without a CPU address
    /// carries.
    pub const EMPTY: DmaSpan = DmaSpan {
        ptr: NonNull::dangling(),
        len: 0,
    };

    /// The `len` bytes at `ptr`.
    ///
    /// # Safety
    /// For as long as the span or any copy of it (or any span taken from it with
    /// [`sub`](Self::sub)) is used, the caller guarantees:
    ///
    /// * that `ptr..ptr + len` lies inside one live allocation that `ptr`'s provenance allows
    ///   reading and writing, and that it is neither freed nor reused for anything else — for
    ///   memory a device may write, that it stays mapped as
    ///   [`Platform::map_dma`](crate::Platform::map_dma)'s caller promises;
    /// * that no access through the span overlaps in time with a conflicting access to the
    ///   same bytes by anyone else: nothing (the device, another thread, a Rust reference)
    ///   reads or writes bytes while they are written through the span, and nothing writes
    ///   them while they are read through it. For a device's buffer: the span is used only
    ///   while the CPU owns the buffer — before it is posted, and after its completion has
    ///   been observed with acquire ordering.
    #[inline(always)]
    pub const unsafe fn new(ptr: NonNull<u8>, len: usize) -> DmaSpan {
        DmaSpan { ptr, len }
    }

    /// Length in bytes.
    #[inline(always)]
    pub const fn len(self) -> usize {
        self.len
    }

    /// True for a span of no bytes.
    #[inline(always)]
    pub const fn is_empty(self) -> bool {
        self.len == 0
    }

    /// Address of the first byte, as a number (for reports to an application; it cannot be
    /// turned back into a pointer that reaches the memory).
    #[inline(always)]
    pub fn addr(self) -> usize {
        self.ptr.as_ptr().addr()
    }

    /// The pointer the span was made from, with its provenance: for code that makes its own
    /// promises about the memory (a zero-copy view under an `unsafe` contract of its own).
    #[inline(always)]
    pub const fn as_ptr(self) -> NonNull<u8> {
        self.ptr
    }

    /// The `len` bytes at `offset` as a span of their own, if they lie inside this one. The
    /// promise made for this span covers it.
    #[inline]
    pub fn sub(self, offset: usize, len: usize) -> Option<DmaSpan> {
        let ptr = self.at(offset, len)?;
        Some(DmaSpan { ptr, len })
    }

    /// Copies `src` into the span at `offset`.
    ///
    /// # Errors
    /// [`OutOfSpan`] if `offset + src.len()` passes the end; nothing is written then.
    #[inline]
    pub fn write_bytes(self, offset: usize, src: &[u8]) -> Result<(), OutOfSpan> {
        let dst = self
            .at(offset, src.len())
            .ok_or(self.outside(offset, src.len()))?;
        // SAFETY: `at` proved the `src.len()` bytes at `dst` lie inside the span, which `new`'s
        // promise makes valid for writes that nothing else overlaps. `src` cannot overlap them:
        // a reference to those bytes would be a conflicting access, which the promise excludes.
        unsafe { core::ptr::copy_nonoverlapping(src.as_ptr(), dst.as_ptr(), src.len()) };
        Ok(())
    }

    /// Copies `dst.len()` bytes of the span at `offset` into `dst`.
    ///
    /// # Errors
    /// [`OutOfSpan`] if `offset + dst.len()` passes the end; `dst` is untouched then.
    #[inline]
    pub fn read_bytes(self, offset: usize, dst: &mut [u8]) -> Result<(), OutOfSpan> {
        let src = self
            .at(offset, dst.len())
            .ok_or(self.outside(offset, dst.len()))?;
        // SAFETY: as in `write_bytes`, for reads; `dst` is a unique reference, so it cannot
        // overlap bytes the promise lets this span read.
        unsafe { core::ptr::copy_nonoverlapping(src.as_ptr(), dst.as_mut_ptr(), dst.len()) };
        Ok(())
    }

    /// Sets the `len` bytes at `offset` to `byte`.
    ///
    /// # Errors
    /// [`OutOfSpan`] if `offset + len` passes the end; nothing is written then.
    #[inline]
    pub fn fill(self, offset: usize, len: usize, byte: u8) -> Result<(), OutOfSpan> {
        let dst = self.at(offset, len).ok_or(self.outside(offset, len))?;
        // SAFETY: `at` proved the `len` bytes at `dst` lie inside the span, valid for writes
        // that nothing else overlaps (`new`'s promise).
        unsafe { dst.write_bytes(byte, len) };
        Ok(())
    }

    /// The `L` bytes at `offset`, if they lie inside the span (one unaligned load for the
    /// sizes of integers).
    #[inline(always)]
    pub fn read_array<const L: usize>(self, offset: usize) -> Option<[u8; L]> {
        let src = self.at(offset, L)?;
        // SAFETY: `at` proved the `L` bytes at `src` lie inside the span, valid for reads that
        // nothing writes meanwhile (`new`'s promise); `[u8; L]` has no invalid values and
        // `read_unaligned` needs no alignment.
        Some(unsafe { src.cast::<[u8; L]>().read_unaligned() })
    }

    /// The byte at `offset`, if it lies inside the span.
    #[inline(always)]
    pub fn read_u8(self, offset: usize) -> Option<u8> {
        self.read_array::<1>(offset).map(|[b]| b)
    }

    /// The big-endian `u16` at `offset` (network order: an EtherType, a length), if its two
    /// bytes lie inside the span.
    #[inline(always)]
    pub fn read_u16_be(self, offset: usize) -> Option<u16> {
        self.read_array(offset).map(u16::from_be_bytes)
    }

    /// The little-endian `u16` at `offset`, if its two bytes lie inside the span.
    #[inline(always)]
    pub fn read_u16_le(self, offset: usize) -> Option<u16> {
        self.read_array(offset).map(u16::from_le_bytes)
    }

    /// The little-endian `u64` at `offset`, if its eight bytes lie inside the span.
    #[inline(always)]
    pub fn read_u64_le(self, offset: usize) -> Option<u64> {
        self.read_array(offset).map(u64::from_le_bytes)
    }

    /// The span's first `N` bytes as a [`DmaHead`], if it has that many: the one check its
    /// reads need.
    #[inline(always)]
    pub fn head<const N: usize>(self) -> Option<DmaHead<N>> {
        (self.len >= N).then_some(DmaHead { ptr: self.ptr })
    }

    /// The pointer to the `count` bytes at `offset`, if they lie inside the span.
    #[inline(always)]
    fn at(self, offset: usize, count: usize) -> Option<NonNull<u8>> {
        if offset > self.len || count > self.len - offset {
            return None;
        }
        // SAFETY: `offset <= len`, so the result is inside the span or one past its end: in
        // bounds of the allocation `new`'s promise names (for `EMPTY`, an offset of 0).
        Some(unsafe { self.ptr.add(offset) })
    }

    fn outside(self, offset: usize, len: usize) -> OutOfSpan {
        OutOfSpan {
            offset,
            len,
            span: self.len,
        }
    }
}

impl core::fmt::Debug for DmaSpan {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("DmaSpan")
            .field("addr", &format_args!("{:#x}", self.addr()))
            .field("len", &self.len)
            .finish()
    }
}

impl Default for DmaSpan {
    fn default() -> Self {
        DmaSpan::EMPTY
    }
}

/// The first `N` bytes of a [`DmaSpan`], taken once with [`DmaSpan::head`]; reads at offsets
/// fixed at compile time, which check there that they lie inside the `N` bytes and carry no
/// check at run time. For the hot loop of a receive path, which reads a few header bytes of
/// every buffer it completes: the length is checked when the buffer is posted, not per read.
///
/// # Implementation safety
///
/// A head is a pointer only; its existence proves that `N` bytes at it are readable. Made from
/// a span ([`DmaSpan::head`]) it is a copy of that span's first `N` bytes, which that span's
/// promise covers ([`DmaSpan::new`]); made from a static ([`from_static`](Self::from_static)),
/// immutable memory that lives for ever. It only reads: plain, unaligned loads through the
/// pointer, with its provenance, never a reference into the memory, never a panic.
///
/// ```
/// use core::ptr::NonNull;
/// use ringfab_hal::{DmaHead, DmaSpan};
///
/// let mut frame = [0u8; 64];
/// frame[12..14].copy_from_slice(&0x88b5u16.to_be_bytes());
/// // SAFETY: `frame` outlives the span and is touched only through it while it is used.
/// let span = unsafe { DmaSpan::new(NonNull::from(&mut frame).cast(), 64) };
/// let head: DmaHead<14> = span.head().expect("64 bytes hold 14");
/// assert_eq!(head.read_u16_be::<12>(), 0x88b5);
/// assert!(span.sub(0, 13).unwrap().head::<14>().is_none());
/// const NOTHING: DmaHead<14> = DmaHead::from_static(&[0; 14]);
/// assert_eq!(NOTHING.read_u64_le::<6>(), 0);
/// ```
///
/// A read that would reach outside the head does not compile:
///
/// ```compile_fail
/// # use ringfab_hal::DmaHead;
/// const HEAD: DmaHead<14> = DmaHead::from_static(&[0; 14]);
/// let _ = HEAD.read_u16_be::<13>(); // bytes 13..15 are not inside the 14
/// ```
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct DmaHead<const N: usize> {
    /// First byte; `N` bytes from it are readable.
    ptr: NonNull<u8>,
}

// SAFETY: a head is a copy of (the start of) a span, or of immutable static memory, and only
// reads: sending one is sound exactly when sending the span is (see `DmaSpan`'s `Send`).
unsafe impl<const N: usize> Send for DmaHead<N> {}

// SAFETY: every accessor takes the head by value (see `DmaSpan`'s `Sync`).
unsafe impl<const N: usize> Sync for DmaHead<N> {}

impl<const N: usize> DmaHead<N> {
    /// A head over static bytes, which never change: for a value that must always be readable
    /// (a default, an empty slot) but names no buffer.
    pub const fn from_static(bytes: &'static [u8; N]) -> DmaHead<N> {
        // SAFETY: a reference is never null.
        let ptr = unsafe { NonNull::new_unchecked(bytes.as_ptr().cast_mut()) };
        DmaHead { ptr }
    }

    /// Address of the first byte, as a number.
    #[inline(always)]
    pub fn addr(self) -> usize {
        self.ptr.as_ptr().addr()
    }

    /// The `L` bytes at `OFFSET` (checked at compile time to lie inside the `N`).
    #[inline(always)]
    pub fn read_array<const OFFSET: usize, const L: usize>(self) -> [u8; L] {
        const { assert!(OFFSET <= N && L <= N - OFFSET, "a read outside the head") };
        // SAFETY: `OFFSET + L <= N` (checked above, at compile time), and the `N` bytes at
        // `ptr` are readable and not written meanwhile (`DmaSpan::new`'s promise, or immutable
        // static memory); `[u8; L]` has no invalid values; `read_unaligned` needs no alignment.
        unsafe { self.ptr.add(OFFSET).cast::<[u8; L]>().read_unaligned() }
    }

    /// The byte at `OFFSET`.
    #[inline(always)]
    pub fn read_u8<const OFFSET: usize>(self) -> u8 {
        let [b] = self.read_array::<OFFSET, 1>();
        b
    }

    /// The big-endian `u16` at `OFFSET`.
    #[inline(always)]
    pub fn read_u16_be<const OFFSET: usize>(self) -> u16 {
        u16::from_be_bytes(self.read_array::<OFFSET, 2>())
    }

    /// The little-endian `u16` at `OFFSET`.
    #[inline(always)]
    pub fn read_u16_le<const OFFSET: usize>(self) -> u16 {
        u16::from_le_bytes(self.read_array::<OFFSET, 2>())
    }

    /// The little-endian `u64` at `OFFSET`.
    #[inline(always)]
    pub fn read_u64_le<const OFFSET: usize>(self) -> u64 {
        u64::from_le_bytes(self.read_array::<OFFSET, 8>())
    }
}

impl<const N: usize> core::fmt::Debug for DmaHead<N> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("DmaHead")
            .field("addr", &format_args!("{:#x}", self.addr()))
            .field("len", &N)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    extern crate std;

    use super::*;

    /// A span over `mem`, which the test touches only through it while it is used.
    fn span_of(mem: &mut [u8]) -> DmaSpan {
        let len = mem.len();
        // SAFETY: each test keeps `mem` alive while it uses the span and reads `mem` directly
        // only after its last use of the span.
        unsafe { DmaSpan::new(NonNull::from(mem).cast(), len) }
    }

    #[test]
    fn copies_in_and_out_stay_inside_the_span() {
        let mut mem = [0u8; 32];
        let span = span_of(&mut mem);
        assert_eq!(span.write_bytes(30, &[1, 2]), Ok(()));
        let mut two = [0; 2];
        assert_eq!(span.read_bytes(30, &mut two), Ok(()));
        assert_eq!(two, [1, 2]);
        assert_eq!(span.fill(0, 4, 0xee), Ok(()));
        assert_eq!(
            span.write_bytes(32, &[]),
            Ok(()),
            "an empty copy at the end"
        );
        assert_eq!(mem[..4], [0xee; 4]);
        assert_eq!(mem[30..], [1, 2]);
    }

    #[test]
    fn an_access_past_the_end_is_refused_and_touches_nothing() {
        let mut mem = [7u8; 16];
        let span = span_of(&mut mem);
        let refused = OutOfSpan {
            offset: 10,
            len: 7,
            span: 16,
        };
        assert_eq!(span.write_bytes(10, &[0; 7]), Err(refused));
        assert_eq!(span.fill(10, 7, 0), Err(refused));
        let mut dst = [0xaa; 7];
        assert_eq!(span.read_bytes(10, &mut dst), Err(refused));
        assert_eq!(dst, [0xaa; 7], "dst untouched");
        assert!(span.write_bytes(usize::MAX, &[0]).is_err(), "no overflow");
        assert!(span.fill(1, usize::MAX, 0).is_err(), "no overflow");
        assert_eq!(span.read_u64_le(9), None);
        assert_eq!(span.read_u8(16), None);
        assert_eq!(mem, [7; 16], "nothing written");
    }

    #[test]
    fn small_reads_follow_their_byte_order() {
        let mut mem = [0u8; 16];
        let span = span_of(&mut mem);
        span.write_bytes(3, &[1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
        assert_eq!(
            span.read_u64_le(3),
            Some(0x0807_0605_0403_0201),
            "unaligned"
        );
        assert_eq!(span.read_u16_be(3), Some(0x0102));
        assert_eq!(span.read_u16_le(3), Some(0x0201));
        assert_eq!(span.read_u8(10), Some(8));
        assert_eq!(span.read_u64_le(8), Some(0x08_0706), "the last whole word");
        assert_eq!(span.read_array::<3>(4), Some([2, 3, 4]));
    }

    #[test]
    fn a_sub_span_is_the_bytes_it_names_and_no_more() {
        let mut mem = [0u8; 64];
        let span = span_of(&mut mem);
        let sub = span.sub(16, 8).expect("inside");
        assert_eq!((sub.addr(), sub.len()), (span.addr() + 16, 8));
        assert!(
            sub.write_bytes(4, &[9; 5]).is_err(),
            "bounded by its own length"
        );
        sub.write_bytes(4, &[9; 4]).unwrap();
        assert_eq!(span.sub(60, 5), None);
        assert_eq!(span.sub(usize::MAX, 2), None);
        assert_eq!(span.sub(64, 0).map(DmaSpan::len), Some(0));
        assert_eq!(span.read_bytes(20, &mut [0; 4]), Ok(()));
        assert_eq!(mem[20..24], [9; 4]);
    }

    #[test]
    fn the_empty_span_refuses_everything_but_nothing() {
        let span = DmaSpan::EMPTY;
        assert!(span.is_empty());
        assert_eq!(span.read_bytes(0, &mut []), Ok(()));
        assert_eq!(span.write_bytes(0, &[]), Ok(()));
        assert!(span.write_bytes(0, &[1]).is_err());
        assert_eq!(span.read_u8(0), None);
        assert_eq!(DmaSpan::default(), DmaSpan::EMPTY);
    }

    #[test]
    fn a_head_is_taken_only_from_a_span_long_enough_and_reads_its_bytes() {
        let mut mem = [0u8; 24];
        for (i, b) in mem.iter_mut().enumerate() {
            *b = i as u8;
        }
        let span = span_of(&mut mem);
        assert!(span.head::<25>().is_none());
        assert!(span.sub(1, 22).unwrap().head::<23>().is_none());
        let head = span.head::<24>().expect("24 bytes");
        assert_eq!(head.addr(), span.addr());
        assert_eq!(head.read_u8::<0>(), 0);
        assert_eq!(head.read_u16_be::<22>(), 0x1617, "the last two bytes");
        assert_eq!(head.read_u16_le::<22>(), 0x1716);
        assert_eq!(head.read_u64_le::<10>(), 0x1110_0f0e_0d0c_0b0a, "unaligned");
        assert_eq!(head.read_array::<3, 2>(), [3, 4]);
        let tail = span.sub(16, 8).unwrap().head::<8>().unwrap();
        assert_eq!(tail.read_u64_le::<0>(), span.read_u64_le(16).unwrap());
    }

    #[test]
    fn a_head_of_static_bytes_reads_them() {
        static BYTES: [u8; 4] = [1, 2, 3, 4];
        const HEAD: DmaHead<4> = DmaHead::from_static(&BYTES);
        assert_eq!(HEAD.read_u16_be::<2>(), 0x0304);
        assert_eq!(HEAD.addr(), BYTES.as_ptr().addr());
    }

    #[test]
    fn a_span_sent_to_another_thread_writes_the_memory_it_came_from() {
        let mut mem = std::vec![0u8; 256];
        let span = span_of(&mut mem);
        std::thread::spawn(move || span.fill(128, 128, 0x5a).unwrap())
            .join()
            .unwrap();
        // The thread's writes happen before `join` returns.
        assert!(mem[..128].iter().all(|&b| b == 0));
        assert!(mem[128..].iter().all(|&b| b == 0x5a));
    }
}
