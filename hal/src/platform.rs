//! The platform side: what a driver needs from the machine it runs on.
//!
//! A platform gives a driver one PCI function: its BARs as [`Mmio`] handles, DMA-coherent memory
//! ([`DmaRegion`]), mappings of caller memory for DMA ([`DmaMapping`]), configuration space, and
//! MSI-X vectors that each deliver to a [`Wait`] handle.
//!
//! Nothing here hands out a reference into memory the device can write. Registers are reached by
//! offset through [`Mmio`]; DMA memory through the bounds-checked volatile accessors of
//! [`DmaRegion`]. That is where this crate's unsafety lives, once, documented below — with
//! [`DmaSpan`](crate::DmaSpan) (`span.rs`), the CPU's checked view of mapped caller memory.

use core::marker::PhantomData;
use core::ptr::NonNull;
use core::time::Duration;

use crate::{Iova, Result, Wait};

/// Register access to one memory BAR, by byte offset from its start.
///
/// # Implementation requirements
///
/// Each call is exactly one access of its width (32, 16 or 8 bits) to the device, in program
/// order with the others on the same handle. An offset outside the BAR, or not aligned to the
/// access width, never reaches memory: a read returns all ones (what a PCI master abort returns)
/// and a write is dropped.
///
/// The 16- and 8-bit accesses exist for devices whose registers are narrower than 32 bits and
/// packed side by side: virtio's common configuration structure (virtio 1.2 §4.1.4.3) puts the
/// 8-bit `device_status` next to the 16-bit `queue_select` and requires each field to be reached
/// with its own width. Their provided implementations go through the containing 32-bit register
/// (a read shifts it, a write reads it, replaces the lanes and writes it back), which is right
/// only for registers without access side effects; a platform that maps real device memory
/// overrides them with accesses of the true width.
pub trait Mmio: Send + Sync {
    /// Reads the 32-bit register at `offset`.
    fn read32(&self, offset: usize) -> u32;
    /// Writes `value` to the 32-bit register at `offset`.
    fn write32(&self, offset: usize, value: u32);
    /// Reads the 16-bit register at `offset` (2-byte aligned).
    fn read16(&self, offset: usize) -> u16 {
        if offset % 2 != 0 {
            return 0xffff;
        }
        (self.read32(offset & !3) >> ((offset & 2) * 8)) as u16
    }
    /// Writes `value` to the 16-bit register at `offset` (2-byte aligned).
    fn write16(&self, offset: usize, value: u16) {
        if offset % 2 != 0 {
            return;
        }
        let shift = (offset & 2) * 8;
        let old = self.read32(offset & !3) & !(0xffff << shift);
        self.write32(offset & !3, old | u32::from(value) << shift);
    }
    /// Reads the 8-bit register at `offset`.
    fn read8(&self, offset: usize) -> u8 {
        (self.read32(offset & !3) >> ((offset & 3) * 8)) as u8
    }
    /// Writes `value` to the 8-bit register at `offset`.
    fn write8(&self, offset: usize, value: u8) {
        let shift = (offset & 3) * 8;
        let old = self.read32(offset & !3) & !(0xff << shift);
        self.write32(offset & !3, old | u32::from(value) << shift);
    }
    /// Size of the BAR in bytes.
    fn len(&self) -> usize;
    /// True for a BAR of size zero.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Memory both the CPU and the device reach: the CPU at [`cpu`](Self::cpu), the device at
/// [`iova`](Self::iova). It is released (unmapped and freed) when dropped.
///
/// The provided accessors are the only way a driver reads or writes it. They are volatile, so the
/// compiler neither elides nor merges them, and they check bounds against [`len`](Self::len), so a
/// wrong offset is a panic in the driver, never a stray write. Ordering against the device is the
/// driver's job: a release fence before the doorbell, an acquire fence after seeing a done bit.
///
/// # Implementation safety
///
/// Implementors guarantee that `cpu()..cpu()+len()` is valid for volatile reads and writes, aligned
/// to at least 4096 bytes, zeroed when handed out, and reachable by the device at `iova()` and
/// nowhere else, for as long as the value lives; that `cpu()` and `len()` return the same values
/// for as long as the value lives (moving it does not change them — [`DmaRing`] and
/// [`DmaBlock`] rely on this); and that no other `DmaRegion` overlaps it.
pub unsafe trait DmaRegion: Send {
    /// CPU address of the first byte.
    fn cpu(&self) -> NonNull<u8>;
    /// Device address of the first byte.
    fn iova(&self) -> Iova;
    /// Length in bytes.
    fn len(&self) -> usize;
    /// True for an empty region.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Reads the `u32` at byte `offset`.
    ///
    /// # Panics
    /// If `offset` is not 4-byte aligned or `offset + 4 > len()`.
    fn read_u32(&self, offset: usize) -> u32 {
        let p = checked_ptr::<u32>(self.cpu(), self.len(), offset);
        // SAFETY: `checked_ptr` proved the 4 bytes lie inside the region and are aligned; the trait's
        // implementation contract makes the region valid for volatile reads while `self` lives.
        unsafe { p.read_volatile() }
    }

    /// Reads the `u16` at byte `offset`: the width of virtqueue ring indices and entries
    /// (virtio 1.2 §2.7), which a device writes as 16-bit quantities.
    ///
    /// # Panics
    /// If `offset` is not 2-byte aligned or `offset + 2 > len()`.
    fn read_u16(&self, offset: usize) -> u16 {
        let p = checked_ptr::<u16>(self.cpu(), self.len(), offset);
        // SAFETY: as in `read_u32`, for 2 aligned bytes inside the region.
        unsafe { p.read_volatile() }
    }

    /// Writes `value` as the `u16` at byte `offset`.
    ///
    /// # Panics
    /// If `offset` is not 2-byte aligned or `offset + 2 > len()`.
    // Inline hint (as on `write_u64`): without it LLVM left the call out of line in
    // virtio-net's receive post, whose only device writes are one `u64` and one `u16`
    // (31 instructions more per post in the CQ benchmark's cycle).
    #[inline]
    fn write_u16(&self, offset: usize, value: u16) {
        let p = checked_ptr::<u16>(self.cpu(), self.len(), offset);
        // SAFETY: as in `write_u32`, for 2 aligned bytes inside the region.
        unsafe { p.write_volatile(value) }
    }

    /// Reads the `u64` at byte `offset` (one 64-bit access on 64-bit targets).
    ///
    /// # Panics
    /// If `offset` is not 8-byte aligned or `offset + 8 > len()`.
    fn read_u64(&self, offset: usize) -> u64 {
        let p = checked_ptr::<u64>(self.cpu(), self.len(), offset);
        // SAFETY: as in `read_u32`, for 8 aligned bytes inside the region.
        unsafe { p.read_volatile() }
    }

    /// Writes `value` as the `u32` at byte `offset`.
    ///
    /// # Panics
    /// If `offset` is not 4-byte aligned or `offset + 4 > len()`.
    fn write_u32(&self, offset: usize, value: u32) {
        let p = checked_ptr::<u32>(self.cpu(), self.len(), offset);
        // SAFETY: `checked_ptr` proved the 4 bytes lie inside the region and are aligned; the region
        // is valid for volatile writes while `self` lives and no Rust reference points into it.
        unsafe { p.write_volatile(value) }
    }

    /// Writes `value` as the `u64` at byte `offset`.
    ///
    /// # Panics
    /// If `offset` is not 8-byte aligned or `offset + 8 > len()`.
    // Inline hint: see `write_u16`.
    #[inline]
    fn write_u64(&self, offset: usize, value: u64) {
        let p = checked_ptr::<u64>(self.cpu(), self.len(), offset);
        // SAFETY: as in `write_u32`, for 8 aligned bytes inside the region.
        unsafe { p.write_volatile(value) }
    }

    /// Copies `src` into the region at byte `offset`: a frame into a transmit buffer, say.
    ///
    /// Not volatile: use it only on bytes the device does not own now (a buffer not posted, or
    /// already completed); ordering against the device comes from the release fence before the
    /// doorbell, as for descriptors.
    ///
    /// # Panics
    /// If `offset + src.len() > len()`.
    fn write_bytes(&self, offset: usize, src: &[u8]) {
        let dst = checked_range(self.cpu(), self.len(), offset, src.len());
        // SAFETY: `checked_range` proved `src.len()` bytes at `dst` lie inside the region, which is
        // valid for writes while `self` lives; `src` is ordinary memory and cannot overlap DMA
        // memory that no Rust reference may point into.
        unsafe { core::ptr::copy_nonoverlapping(src.as_ptr(), dst, src.len()) }
    }

    /// Copies `dst.len()` bytes from the region at byte `offset` into `dst`: a received frame
    /// out of its buffer, say. Same ownership rule as [`write_bytes`](Self::write_bytes).
    ///
    /// # Panics
    /// If `offset + dst.len() > len()`.
    fn read_bytes(&self, offset: usize, dst: &mut [u8]) {
        let src = checked_range(self.cpu(), self.len(), offset, dst.len());
        // SAFETY: as in `write_bytes`, for reads; `dst` is ordinary memory, so no overlap.
        unsafe { core::ptr::copy_nonoverlapping(src, dst.as_mut_ptr(), dst.len()) }
    }
}

/// `N` 16-byte descriptors at the start of a [`DmaRegion`], read and written by index as two
/// `u64` words each: the accessor for a driver's hot path.
///
/// [`DmaRegion`]'s accessors check bounds and alignment on every call. A descriptor ring does not
/// need that: [`new`](Self::new) checks once that `N` is a power of two and that the region holds
/// `N * 16` bytes, and every access afterwards reduces its index modulo `N` (`index & (N - 1)`)
/// and its word number modulo 2. So there is no check left that can fail, no panic on the data
/// path, and still no index — however wrong — that reaches outside the ring. Accesses are volatile
/// and go through a raw pointer, never a reference, as with [`DmaRegion`]; ordering against the
/// device (release fence before the doorbell, acquire after a done bit) stays the driver's job.
///
/// ```
/// # use core::ptr::NonNull;
/// # use ringfab_hal::{DmaRegion, DmaRing, Iova};
/// # #[repr(C, align(4096))] struct Page([u8; 4096]);
/// # struct Mem(NonNull<Page>);
/// # unsafe impl Send for Mem {}
/// # // SAFETY: a boxed, zeroed, 4096-aligned page owned by this value alone until drop.
/// # unsafe impl DmaRegion for Mem {
/// #     fn cpu(&self) -> NonNull<u8> { self.0.cast() }
/// #     fn iova(&self) -> Iova { Iova(0x1000) }
/// #     fn len(&self) -> usize { 4096 }
/// # }
/// # impl Drop for Mem {
/// #     // SAFETY: from `Box::into_raw` below, freed once.
/// #     fn drop(&mut self) { drop(unsafe { Box::from_raw(self.0.as_ptr()) }) }
/// # }
/// # let region = Mem(NonNull::new(Box::into_raw(Box::new(Page([0; 4096])))).unwrap());
/// let ring = DmaRing::<_, 8>::new(region).ok().expect("8 descriptors fit a page");
/// ring.write(3, 1, 0xAB);
/// assert_eq!(ring.read(3 + 8, 1), 0xAB, "indices wrap modulo N");
/// assert_eq!(ring.region().read_u64(3 * 16 + 8), 0xAB);
/// ```
pub struct DmaRing<D: DmaRegion, const N: usize> {
    /// First descriptor; `base..base + N` lies inside `region`.
    base: NonNull<[u64; 2]>,
    region: D,
}

// SAFETY: `base` points into memory owned by `region` (which is `Send`) and is used only as that
// region's own accessors would use `cpu()`; moving the ring moves that ownership with it.
unsafe impl<D: DmaRegion, const N: usize> Send for DmaRing<D, N> {}

// SAFETY: shared access only ever makes volatile reads and writes through `base`, exactly what
// `&D`'s accessors do, so sharing the ring is as sound as sharing `D`.
unsafe impl<D: DmaRegion + Sync, const N: usize> Sync for DmaRing<D, N> {}

impl<D: DmaRegion, const N: usize> DmaRing<D, N> {
    /// Bytes per descriptor.
    pub const DESC_LEN: usize = 16;

    /// Views the first `N * 16` bytes of `region` as `N` descriptors.
    ///
    /// # Errors
    /// Gives `region` back if `N` is not a power of two or the region is shorter than `N * 16`.
    pub fn new(region: D) -> core::result::Result<Self, D> {
        let fits = N
            .checked_mul(Self::DESC_LEN)
            .is_some_and(|len| len <= region.len());
        if !N.is_power_of_two() || !fits {
            return Err(region);
        }
        Ok(DmaRing {
            // Aligned for `[u64; 2]`: the region is aligned to 4096 bytes.
            base: region.cpu().cast::<[u64; 2]>(),
            region,
        })
    }

    /// The region underneath (for its IOVA, or for tests that play the device).
    pub fn region(&self) -> &D {
        &self.region
    }

    /// Gives the region back.
    pub fn into_region(self) -> D {
        self.region
    }

    /// A copyable handle on the descriptors, for a hot loop: it lives in a register, so an
    /// acquire fence in the loop (a compiler barrier for all memory) does not force the ring's
    /// address to be loaded again from wherever the `DmaRing` is stored.
    #[inline(always)]
    pub fn view(&self) -> DmaRingRef<'_, N> {
        DmaRingRef {
            base: self.base,
            _ring: PhantomData,
        }
    }

    /// Reads word `word % 2` (0: bytes 0–7, 1: bytes 8–15) of descriptor `index % N`.
    #[inline(always)]
    pub fn read(&self, index: usize, word: usize) -> u64 {
        self.view().read(index, word)
    }

    /// Writes word `word % 2` of descriptor `index % N`.
    #[inline(always)]
    pub fn write(&self, index: usize, word: usize, value: u64) {
        self.view().write(index, word, value)
    }
}

/// The descriptors of a [`DmaRing`], borrowed: the same accessors, as a `Copy` value.
#[derive(Clone, Copy)]
pub struct DmaRingRef<'a, const N: usize> {
    /// First descriptor; `base..base + N` lies inside the borrowed ring's region.
    base: NonNull<[u64; 2]>,
    _ring: PhantomData<&'a ()>,
}

impl<const N: usize> DmaRingRef<'_, N> {
    /// Pointer to word `word % 2` of descriptor `index % N`.
    #[inline(always)]
    fn word_ptr(self, index: usize, word: usize) -> *mut u64 {
        let desc = index & (N - 1);
        // SAFETY: `desc < N`, and `DmaRing::new` checked that `N` descriptors lie inside the
        // region, which (by `DmaRegion`'s contract) stays at `cpu()` for as long as it lives —
        // at least as long as the borrow this value carries; so the descriptor, and each of its
        // two 8-byte-aligned words, is inside the allocation.
        unsafe { self.base.as_ptr().add(desc).cast::<u64>().add(word & 1) }
    }

    /// Reads word `word % 2` (0: bytes 0–7, 1: bytes 8–15) of descriptor `index % N`.
    ///
    /// On a 64-bit target this is one 64-bit access. On a 32-bit target (32-bit Arm, where a
    /// 64-bit volatile read is two 32-bit ones in an order the compiler picks) it reads bytes
    /// 0–3 first and bytes 4–7 after an acquire fence, as Linux's Intel drivers read the status
    /// dword before the rest: a write-back word whose done bit is in its first four bytes (the
    /// Intel receive formats: DD in bit 0, the length in bits 47:32) is then never seen with
    /// DD set and the length of before the write-back. Formats that test bits of one half
    /// only (the Intel transmit write-back) are indifferent to the order.
    #[inline(always)]
    pub fn read(self, index: usize, word: usize) -> u64 {
        let p = self.word_ptr(index, word);
        #[cfg(target_pointer_width = "64")]
        {
            // SAFETY: `word_ptr` is aligned and inside the region, which is valid for volatile
            // reads while the ring is borrowed; no reference into it is formed.
            unsafe { p.read_volatile() }
        }
        #[cfg(not(target_pointer_width = "64"))]
        {
            // SAFETY: as above: the aligned 8-byte word lies inside the region.
            unsafe { read_halves_in_order(p) }
        }
    }

    /// Writes word `word % 2` of descriptor `index % N`.
    #[inline(always)]
    pub fn write(self, index: usize, word: usize, value: u64) {
        // SAFETY: as in `read`, for a volatile write.
        unsafe { self.word_ptr(index, word).write_volatile(value) }
    }
}

/// A byte length fixed at compile time: what a [`DmaBlock`] is checked against. A driver
/// implements it on a type of its own that names a layout (a virtqueue of `N` entries, say),
/// its `LEN` a `const fn` of the layout's parameters.
pub trait FixedLen {
    /// The length in bytes.
    const LEN: usize;
}

/// A [`DmaRegion`] checked once to hold at least `L::LEN` bytes, whose accessors then check
/// each offset against that constant instead of against [`DmaRegion::len`]: the accessor for a
/// hot path that reaches several areas of one region by computed offsets (a virtqueue's
/// descriptor tables, rings and headers).
///
/// The checks stay, and a wrong offset is still a panic (out of line), never a stray access;
/// but they compare with a constant, and the base address is a field rather than a call, so
/// where the compiler knows an offset's range — an index reduced modulo a power of two times a
/// stride, plus a constant — it proves the access inside and the check costs nothing. The
/// region's `len` is not read again after [`new`](Self::new). Accesses are volatile and go
/// through a raw pointer, never a reference, as with [`DmaRegion`]; ordering against the device
/// stays the driver's job.
///
/// ```
/// # use core::ptr::NonNull;
/// # use ringfab_hal::{DmaBlock, DmaRegion, FixedLen, Iova};
/// # #[repr(C, align(4096))] struct Page([u8; 4096]);
/// # struct Mem(NonNull<Page>);
/// # unsafe impl Send for Mem {}
/// # // SAFETY: a boxed, zeroed, 4096-aligned page owned by this value alone until drop.
/// # unsafe impl DmaRegion for Mem {
/// #     fn cpu(&self) -> NonNull<u8> { self.0.cast() }
/// #     fn iova(&self) -> Iova { Iova(0x1000) }
/// #     fn len(&self) -> usize { 4096 }
/// # }
/// # impl Drop for Mem {
/// #     // SAFETY: from `Box::into_raw` below, freed once.
/// #     fn drop(&mut self) { drop(unsafe { Box::from_raw(self.0.as_ptr()) }) }
/// # }
/// # let region = Mem(NonNull::new(Box::into_raw(Box::new(Page([0; 4096])))).unwrap());
/// /// Eight 16-byte entries.
/// struct Table;
/// impl FixedLen for Table {
///     const LEN: usize = 8 * 16;
/// }
/// let block = DmaBlock::<_, Table>::new(region).ok().expect("128 bytes fit a page");
/// let entry = |i: usize| 16 * (i % 8);
/// block.write_u64(entry(11) + 8, 0xAB);
/// assert_eq!(block.read_u32(entry(3) + 8), 0xAB);
/// assert_eq!(block.region().read_u64(3 * 16 + 8), 0xAB);
/// ```
pub struct DmaBlock<D: DmaRegion, L: FixedLen> {
    /// First byte; `base..base + L::LEN` lies inside `region`.
    base: NonNull<u8>,
    region: D,
    _len: PhantomData<fn() -> L>,
}

// SAFETY: as `DmaRing`'s: `base` points into memory owned by `region` and is used only as that
// region's own accessors would use `cpu()`.
unsafe impl<D: DmaRegion, L: FixedLen> Send for DmaBlock<D, L> {}

// SAFETY: as `DmaRing`'s: shared access only makes volatile reads and writes through `base`.
unsafe impl<D: DmaRegion + Sync, L: FixedLen> Sync for DmaBlock<D, L> {}

impl<D: DmaRegion, L: FixedLen> DmaBlock<D, L> {
    /// Views `region` as the first `L::LEN` bytes of it.
    ///
    /// # Errors
    /// Gives `region` back if it is shorter than `L::LEN` bytes.
    pub fn new(region: D) -> core::result::Result<Self, D> {
        if region.len() < L::LEN {
            return Err(region);
        }
        Ok(DmaBlock {
            base: region.cpu(),
            region,
            _len: PhantomData,
        })
    }

    /// The region underneath (for its IOVA, or for tests that play the device).
    pub fn region(&self) -> &D {
        &self.region
    }

    /// Reads the `u16` at byte `offset`.
    ///
    /// # Panics
    /// If `offset` is not 2-byte aligned or `offset + 2 > L::LEN`.
    #[inline(always)]
    pub fn read_u16(&self, offset: usize) -> u16 {
        // SAFETY: `at` proved the 2 aligned bytes inside the first `L::LEN` bytes of the
        // region, which `new` checked it holds and which stay valid while `self` lives.
        unsafe { self.at::<u16>(offset).read_volatile() }
    }

    /// Reads the `u32` at byte `offset`.
    ///
    /// # Panics
    /// If `offset` is not 4-byte aligned or `offset + 4 > L::LEN`.
    #[inline(always)]
    pub fn read_u32(&self, offset: usize) -> u32 {
        // SAFETY: as in `read_u16`, for 4 bytes.
        unsafe { self.at::<u32>(offset).read_volatile() }
    }

    /// Reads the `u64` at byte `offset` (one 64-bit access on 64-bit targets).
    ///
    /// # Panics
    /// If `offset` is not 8-byte aligned or `offset + 8 > L::LEN`.
    #[inline(always)]
    pub fn read_u64(&self, offset: usize) -> u64 {
        // SAFETY: as in `read_u16`, for 8 bytes.
        unsafe { self.at::<u64>(offset).read_volatile() }
    }

    /// Writes `value` as the `u16` at byte `offset`.
    ///
    /// # Panics
    /// If `offset` is not 2-byte aligned or `offset + 2 > L::LEN`.
    #[inline(always)]
    pub fn write_u16(&self, offset: usize, value: u16) {
        // SAFETY: as in `read_u16`, for a volatile write; no reference points into the region.
        unsafe { self.at::<u16>(offset).write_volatile(value) }
    }

    /// Writes `value` as the `u32` at byte `offset`.
    ///
    /// # Panics
    /// If `offset` is not 4-byte aligned or `offset + 4 > L::LEN`.
    #[inline(always)]
    pub fn write_u32(&self, offset: usize, value: u32) {
        // SAFETY: as in `write_u16`, for 4 bytes.
        unsafe { self.at::<u32>(offset).write_volatile(value) }
    }

    /// Writes `value` as the `u64` at byte `offset`.
    ///
    /// # Panics
    /// If `offset` is not 8-byte aligned or `offset + 8 > L::LEN`.
    #[inline(always)]
    pub fn write_u64(&self, offset: usize, value: u64) {
        // SAFETY: as in `write_u16`, for 8 bytes.
        unsafe { self.at::<u64>(offset).write_volatile(value) }
    }

    /// Checked pointer to the `T` at `offset`: aligned, and inside the first `L::LEN` bytes.
    #[inline(always)]
    fn at<T>(&self, offset: usize) -> *mut T {
        checked_ptr::<T>(self.base, L::LEN, offset)
    }
}

impl<D: DmaRegion, L: FixedLen> core::fmt::Debug for DmaBlock<D, L> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("DmaBlock")
            .field("iova", &self.region.iova())
            .field("len", &L::LEN)
            .finish()
    }
}

/// Reads the 8 bytes at `p` as two 4-byte volatile reads, bytes 0–3 first and bytes 4–7 after
/// an acquire fence: [`DmaRingRef::read`] on a 32-bit target (compiled on every target for its
/// test).
///
/// # Safety
/// `p` is 8-byte aligned and valid for volatile reads of 8 bytes, with no reference into them.
#[cfg(any(test, not(target_pointer_width = "64")))]
#[inline(always)]
unsafe fn read_halves_in_order(p: *mut u64) -> u64 {
    let halves = p.cast::<u32>();
    // SAFETY: the caller's 8 aligned bytes hold two aligned 4-byte halves, at `halves` and
    // one `u32` past it.
    let (first, second) = unsafe {
        let first = halves.read_volatile();
        core::sync::atomic::fence(core::sync::atomic::Ordering::Acquire);
        (first, halves.add(1).read_volatile())
    };
    // `first` is bytes 0–3: the low half on a little-endian target.
    if cfg!(target_endian = "little") {
        u64::from(second) << 32 | u64::from(first)
    } else {
        u64::from(first) << 32 | u64::from(second)
    }
}

impl<D: DmaRegion, const N: usize> core::fmt::Debug for DmaRing<D, N> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("DmaRing")
            .field("iova", &self.region.iova())
            .field("descriptors", &N)
            .finish()
    }
}

/// Bounds-checked pointer to `count` bytes at `offset` inside `len` bytes from `base`.
fn checked_range(base: NonNull<u8>, len: usize, offset: usize, count: usize) -> *mut u8 {
    assert!(
        offset.checked_add(count).is_some_and(|end| end <= len),
        "DMA copy of {count} bytes at offset {offset} outside a region of {len} bytes"
    );
    // SAFETY: offset + count <= len, so the result stays inside (or one past) the allocation.
    unsafe { base.as_ptr().add(offset) }
}

/// Bounds- and alignment-checked pointer to a `T` at `offset` inside `len` bytes from `base`.
///
/// The test is three comparisons and the panic lives out of line ([`outside_region`]): a
/// driver's hot loop reading the region carries no formatting arguments (building them before
/// the branch cost a virtio-net receive about ten instructions per read).
#[inline(always)]
fn checked_ptr<T>(base: NonNull<u8>, len: usize, offset: usize) -> *mut T {
    let size = core::mem::size_of::<T>();
    if offset % size != 0 || len < size || offset > len - size {
        outside_region(size, offset, len);
    }
    // SAFETY: offset + size <= len, so the result stays inside (or one past) the allocation.
    unsafe { base.as_ptr().add(offset).cast::<T>() }
}

/// The panic of [`checked_ptr`]: a driver bug (an offset its own layout should never give).
#[cold]
#[inline(never)]
fn outside_region(size: usize, offset: usize, len: usize) -> ! {
    panic!("DMA access of {size} bytes at offset {offset} outside a region of {len} bytes")
}

/// Caller memory made reachable by the device; unmapped when dropped.
///
/// This is what memory registration rests on: the device reaches `len()` bytes at `iova()`.
pub trait DmaMapping: Send {
    /// Device address of the first mapped byte.
    fn iova(&self) -> Iova;
    /// Mapped length in bytes.
    fn len(&self) -> usize;
    /// True for an empty mapping.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One PCI function, as a driver sees it.
///
/// # Implementation safety
///
/// Implementors guarantee that the device can reach only memory handed out by
/// [`alloc_dma`](Self::alloc_dma) or [`map_dma`](Self::map_dma) while it is alive — with an IOMMU
/// (VFIO) or a model of one (`ringfab-emu`) — so that a device, or a driver, that programs a wrong
/// address faults instead of corrupting memory; and that [`Mmio`] handles from [`bar`](Self::bar)
/// reach this function's registers only.
pub unsafe trait Platform: Send + Sync {
    /// Register access to one BAR.
    type Mmio: Mmio;
    /// DMA-coherent memory from [`alloc_dma`](Self::alloc_dma).
    type Dma: DmaRegion;
    /// A mapping of caller memory from [`map_dma`](Self::map_dma).
    type Mapping: DmaMapping;
    /// The wait handle an interrupt vector delivers to.
    type Wait: Wait;

    /// Register access to memory BAR `index`.
    ///
    /// # Errors
    /// [`Error::BarUnavailable`](crate::Error::BarUnavailable) if the BAR does not exist, is not a
    /// memory BAR, or cannot be mapped.
    fn bar(&self, index: u8) -> Result<Self::Mmio>;

    /// Reads the 32-bit word of PCI configuration space at `offset` (4-byte aligned; an offset
    /// outside configuration space reads `0xffff_ffff`).
    fn config_read32(&self, offset: u16) -> u32;

    /// Writes the 32-bit word of PCI configuration space at `offset` (4-byte aligned). The
    /// platform may refuse writes that would break its own management of the function (BARs,
    /// MSI-X capability); those are dropped.
    fn config_write32(&self, offset: u16, value: u32);

    /// Allocates `len` bytes (rounded up to whole pages) of zeroed DMA-coherent memory.
    ///
    /// # Errors
    /// [`Error::DmaAlloc`](crate::Error::DmaAlloc) when memory or IOVA space runs out.
    fn alloc_dma(&self, len: usize) -> Result<Self::Dma>;

    /// Makes `len` bytes of caller memory at `cpu` reachable by the device.
    ///
    /// # Errors
    /// [`Error::DmaMap`](crate::Error::DmaMap) if `len` is zero or the IOMMU refuses the mapping.
    ///
    /// # Safety
    /// The caller guarantees that `cpu..cpu+len` stays valid, and is neither freed nor reused for
    /// anything else, until the returned mapping is dropped; and that it holds no Rust reference
    /// into that memory while the device may write it.
    unsafe fn map_dma(&self, cpu: NonNull<u8>, len: usize) -> Result<Self::Mapping>;

    /// Waits at least `duration` before returning: the delays a datasheet asks for after a reset
    /// or while autonegotiation runs. A real platform sleeps or spins; an emulated one may advance
    /// its model's clock instead, so that bring-up stays fast and deterministic.
    fn delay(&self, duration: Duration);

    /// How many interrupt (MSI-X) vectors the platform can wire for this function.
    fn irq_vectors(&self) -> u16;

    /// Wires MSI-X vector `vector` to a wait handle and returns it; each interrupt on that vector
    /// notifies the handle. Calling it again for the same vector returns a handle to the same
    /// notifications.
    ///
    /// # Errors
    /// [`Error::InterruptUnavailable`](crate::Error::InterruptUnavailable) if the vector is out of
    /// range or cannot be wired.
    fn irq(&self, vector: u16) -> Result<Self::Wait>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[should_panic(expected = "outside a region")]
    fn checked_ptr_refuses_access_past_the_end() {
        let base = NonNull::<u64>::dangling().cast::<u8>();
        let _ = checked_ptr::<u64>(base, 16, 16);
    }

    #[test]
    #[should_panic(expected = "outside a region")]
    fn checked_ptr_refuses_misaligned_offsets() {
        let base = NonNull::<u64>::dangling().cast::<u8>();
        let _ = checked_ptr::<u32>(base, 16, 2);
    }

    #[test]
    #[should_panic(expected = "outside a region")]
    fn checked_range_refuses_a_copy_past_the_end() {
        let base = NonNull::<u64>::dangling().cast::<u8>();
        let _ = checked_range(base, 16, 10, 7);
    }

    #[repr(C, align(4096))]
    struct Page([u64; 512]);

    /// 64 zeroed bytes, 4096-aligned, as a region (IOVA 0); enough for 4 descriptors. Owns a
    /// boxed page, freed on drop.
    struct Words(NonNull<Page>);

    // SAFETY: owns its allocation alone.
    unsafe impl Send for Words {}

    impl Drop for Words {
        fn drop(&mut self) {
            extern crate std;
            // SAFETY: the pointer came from `Box::into_raw` in `words()` and is freed once, here.
            drop(unsafe { std::boxed::Box::from_raw(self.0.as_ptr()) });
        }
    }

    // SAFETY: a zeroed allocation, 4096-aligned, owned by this value alone until drop; `cpu()`
    // and `len()` never change; no device.
    unsafe impl DmaRegion for Words {
        fn cpu(&self) -> NonNull<u8> {
            self.0.cast()
        }
        fn iova(&self) -> Iova {
            Iova(0)
        }
        fn len(&self) -> usize {
            64
        }
    }

    fn words() -> Words {
        extern crate std;
        let page = std::boxed::Box::into_raw(std::boxed::Box::new(Page([0; 512])));
        // Box::into_raw never returns null.
        Words(NonNull::new(page).expect("box pointer"))
    }

    #[test]
    fn dma_ring_refuses_a_region_too_short_or_a_depth_not_a_power_of_two() {
        assert!(DmaRing::<_, 8>::new(words()).is_err(), "8 × 16 > 64 bytes");
        assert!(DmaRing::<_, 3>::new(words()).is_err());
        assert!(DmaRing::<_, 0>::new(words()).is_err());
        assert!(DmaRing::<_, 4>::new(words()).is_ok());
    }

    #[test]
    fn dma_ring_wraps_every_index_and_word_inside_the_ring() {
        let ring = DmaRing::<_, 4>::new(words()).ok().unwrap();
        ring.write(5, 3, 0xAB); // descriptor 1, word 1
        assert_eq!(ring.region().read_u64(16 + 8), 0xAB);
        assert_eq!(ring.read(usize::MAX, 0), 0, "descriptor 3, word 0");
        ring.write(usize::MAX, usize::MAX, 0xCD); // descriptor 3, word 1: the last word
        assert_eq!(ring.region().read_u64(56), 0xCD);
        assert_eq!(ring.view().read(1, 1), 0xAB);
    }

    /// 64 bytes, as `Words` holds.
    struct SixtyFour;
    impl FixedLen for SixtyFour {
        const LEN: usize = 64;
    }

    /// More than `Words` holds.
    struct SixtyFive;
    impl FixedLen for SixtyFive {
        const LEN: usize = 65;
    }

    #[test]
    fn dma_block_refuses_a_region_shorter_than_its_length() {
        assert!(DmaBlock::<_, SixtyFive>::new(words()).is_err());
        let block = DmaBlock::<_, SixtyFour>::new(words()).ok().unwrap();
        block.write_u64(56, 0x1122_3344_5566_7788);
        assert_eq!(block.read_u32(60), 0x1122_3344);
        assert_eq!(block.read_u16(56), 0x7788);
        block.write_u16(2, 0xAB);
        block.write_u32(4, 0xCD);
        assert_eq!(block.region().read_u64(0), 0xCD_00AB_0000);
        assert_eq!(block.read_u64(56), 0x1122_3344_5566_7788);
    }

    #[test]
    #[should_panic(expected = "outside a region")]
    fn dma_block_refuses_an_access_past_its_length() {
        let block = DmaBlock::<_, SixtyFour>::new(words()).ok().unwrap();
        let _ = block.read_u32(62);
    }

    #[test]
    #[should_panic(expected = "outside a region")]
    fn dma_block_refuses_a_misaligned_access() {
        let block = DmaBlock::<_, SixtyFour>::new(words()).ok().unwrap();
        block.write_u64(4, 0);
    }

    #[test]
    fn halves_read_in_order_give_the_whole_word() {
        let mut word = 0x1122_3344_5566_7788_u64;
        // SAFETY: a local, aligned u64, read through its raw pointer only.
        let read = unsafe { read_halves_in_order(&raw mut word) };
        assert_eq!(read, 0x1122_3344_5566_7788);
    }

    #[test]
    fn checked_ptr_allows_the_last_whole_word() {
        let mut words = [0u64; 2];
        let base = NonNull::from(&mut words).cast::<u8>();
        let p = checked_ptr::<u64>(base, 16, 8);
        assert_eq!(p as usize, base.as_ptr() as usize + 8);
    }
}
