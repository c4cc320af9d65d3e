//! One DMA region cut into equal buffer slots, and the crate's one `unsafe` act: a slice of a
//! slot's bytes, handed to smoltcp in place.
//!
//! The hal reaches DMA memory only through copies and volatile accessors (DESIGN.md decision
//! 5: no reference into memory a device can write). smoltcp's tokens, though, take a `&[u8]`
//! (receive) or a `&mut [u8]` (transmit): giving it one without a copy means forming a
//! reference into the region. That is sound exactly while the device has no descriptor naming
//! the slot — a receive buffer after its completion was observed (the driver's `poll` reads the
//! done bit with acquire ordering) and before it is posted again; a transmit buffer before it
//! is posted, or after its completion came back. [`crate::RingDevice`] keeps that rule by
//! ownership: each slot is in exactly one place at a time (posted on the ring, or held by the
//! device), a token takes the slot it names out of the device for its lifetime, and the slice
//! lives only inside the token's `consume`. A device that writes memory no descriptor gives
//! it breaks the IOMMU contract every ringfab platform rests on; it is outside what this crate
//! (or core's zero-copy `Buf::as_slice`) can defend against.
#![allow(
    unsafe_code,
    reason = "the in-place views of slots (see the module documentation)"
)]

use ringfab_hal::{DmaRegion, Iova};

/// `count` slots of `stride` bytes in one region, slot `i` at byte `i * stride`.
pub(crate) struct Slots<R: DmaRegion> {
    region: R,
    stride: usize,
    count: usize,
}

impl<R: DmaRegion> Slots<R> {
    /// `region` as `count` slots of `stride` bytes; `None` if it is too short (or the product
    /// overflows).
    pub(crate) fn new(region: R, stride: usize, count: usize) -> Option<Slots<R>> {
        let need = stride.checked_mul(count)?;
        (region.len() >= need && stride > 0).then_some(Slots {
            region,
            stride,
            count,
        })
    }

    /// Bytes per slot.
    pub(crate) fn stride(&self) -> usize {
        self.stride
    }

    /// The device's address of slot `slot`'s first byte; `None` for a slot that does not
    /// exist.
    pub(crate) fn iova(&self, slot: usize) -> Option<Iova> {
        if slot >= self.count {
            return None;
        }
        // `stride * count` fit the region (checked in `new`), so this cannot overflow; the
        // region's IOVA range is the platform's and as long as the region.
        self.region.iova().checked_add((slot * self.stride) as u64)
    }

    /// The CPU addresses the slots occupy (for a caller that checks a slice lies inside).
    pub(crate) fn cpu_range(&self) -> core::ops::Range<usize> {
        let start = self.region.cpu().as_ptr().addr();
        start..start + self.stride * self.count
    }

    /// The first `len` bytes of slot `slot` (at most `stride`; `len` beyond it is cut to it),
    /// or an empty slice for a slot that does not exist.
    ///
    /// # Safety
    /// The device must not be able to write the slot while the slice lives: the slot is not
    /// posted on a ring (module documentation).
    pub(crate) unsafe fn bytes(&self, slot: usize, len: usize) -> &[u8] {
        if slot >= self.count {
            return &[];
        }
        let len = len.min(self.stride);
        // SAFETY: slot `slot` is `stride` bytes at `slot * stride` inside the region (`new`
        // checked `stride * count` fit), which is valid for reads while `self.region` lives —
        // as long as the borrow of `self`. The caller promises the device does not write it
        // meanwhile, and nothing else in this crate reaches a slot it does not hold.
        unsafe {
            let start = self.region.cpu().as_ptr().add(slot * self.stride);
            core::slice::from_raw_parts(start, len)
        }
    }

    /// As [`bytes`](Self::bytes), writable: the first `len` bytes of slot `slot`.
    ///
    /// # Safety
    /// The device must neither read nor write the slot while the slice lives: the slot is not
    /// posted on a ring.
    pub(crate) unsafe fn bytes_mut(&mut self, slot: usize, len: usize) -> &mut [u8] {
        if slot >= self.count {
            return &mut [];
        }
        let len = len.min(self.stride);
        // SAFETY: as in `bytes`, for writes: the region is valid for writes, `&mut self` rules
        // out any other slice of it formed by this crate, and the caller promises the device
        // does not touch the slot meanwhile.
        unsafe {
            let start = self.region.cpu().as_ptr().add(slot * self.stride);
            core::slice::from_raw_parts_mut(start, len)
        }
    }
}
