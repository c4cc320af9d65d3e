//! Buffers of registered memory as values: the owned [`Buf`] an application holds, the
//! [`RawBuf`] an op table keeps while the buffer is posted, and the gather list [`Iov`].
//!
//! Registration itself — regions, carving, closing — is [`crate::mr`], the object; this module
//! knows nothing of regions but the count each buffer returns to (one `AtomicUsize` per
//! registration slot, a table of the domain's), so that the engine can hand a buffer back to
//! its owner without naming the region. `mr`'s documentation says why a buffer is owned (one
//! party at a time) and how it is reached (copies through the hal's `DmaSpan`, never `&[u8]`
//! into memory the device writes).

use core::sync::atomic::{AtomicUsize, Ordering};

use crate::hal::{DmaSpan, Iova, TxSegment};
use crate::{Error, Result};

/// A buffer's identity without its ownership: what an op table keeps while the buffer is
/// posted (see [`Buf::into_raw`]). Its span is touched only by whoever owns the buffer: the
/// application through its [`Buf`], or core once the buffer's completion has been observed.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct RawBuf {
    /// The bytes, as the CPU reaches them: [`DmaSpan::EMPTY`] for a buffer core never touches
    /// (the raw layer's, an inject bounce slot).
    pub(crate) span: DmaSpan,
    pub(crate) iova: Iova,
    pub(crate) len: u32,
    pub(crate) mr: u16,
}

/// An owned buffer of registered memory, carved from a region by
/// [`MemoryRegion::alloc`](crate::mr::MemoryRegion::alloc). See [`crate::mr`].
pub struct Buf<'s> {
    raw: RawBuf,
    owner: &'s AtomicUsize,
}

impl core::fmt::Debug for Buf<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Buf")
            .field("iova", &self.raw.iova)
            .field("len", &self.raw.len)
            .field("mr", &self.raw.mr)
            .finish()
    }
}

impl<'s> Buf<'s> {
    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.raw.len as usize
    }

    /// Whether the buffer is empty (never: `alloc` refuses zero).
    pub fn is_empty(&self) -> bool {
        self.raw.len == 0
    }

    /// Device address of the first byte.
    pub fn iova(&self) -> Iova {
        self.raw.iova
    }

    /// The region the buffer was carved from (its index in the MR slab).
    pub fn mr(&self) -> usize {
        usize::from(self.raw.mr)
    }

    /// Address of the first byte in the application's address space.
    pub fn addr(&self) -> usize {
        self.raw.span.addr()
    }

    /// Copies `src` into the buffer at `offset`.
    ///
    /// # Errors
    /// `Inval` if `offset + src.len()` passes the end.
    // Inlined: every send writes its header with it, from generic code in the caller's crate
    // that would otherwise call out for it (docs/perf.md).
    #[inline]
    pub fn write(&mut self, offset: usize, src: &[u8]) -> Result {
        // The buffer is owned here, so the device is not writing it.
        self.raw
            .span
            .write_bytes(offset, src)
            .map_err(|_| Error::Inval)
    }

    /// Copies bytes from the buffer at `offset` into `dst`.
    ///
    /// # Errors
    /// `Inval` if `offset + dst.len()` passes the end.
    pub fn read(&self, offset: usize, dst: &mut [u8]) -> Result {
        // What the device wrote was observed (with acquire ordering, by the driver) before the
        // completion that handed the buffer back.
        self.raw
            .span
            .read_bytes(offset, dst)
            .map_err(|_| Error::Inval)
    }

    /// Fills `len` bytes at `offset` with `byte`.
    ///
    /// # Errors
    /// `Inval` if the range passes the end.
    pub fn fill(&mut self, offset: usize, len: usize, byte: u8) -> Result {
        self.raw
            .span
            .fill(offset, len, byte)
            .map_err(|_| Error::Inval)
    }

    /// The first `len` bytes as one transmit segment (`len` ≤ the buffer, ≤ `u16::MAX`).
    // Inlined for every send, as `write`.
    #[inline]
    pub(crate) fn tx_segment(&self, len: usize) -> Option<TxSegment> {
        let len = u16::try_from(len)
            .ok()
            .filter(|&l| usize::from(l) <= self.len())?;
        Some(TxSegment {
            iova: self.raw.iova,
            len,
        })
    }

    /// Gives up the handle while the buffer is posted; its count stays with the region.
    pub(crate) fn into_raw(self) -> RawBuf {
        let raw = self.raw;
        core::mem::forget(self);
        raw
    }

    /// Takes a posted buffer back. `owner` is its region's count, which still includes it.
    pub(crate) fn from_raw(raw: RawBuf, owner: &'s AtomicUsize) -> Self {
        Buf { raw, owner }
    }

    pub(crate) fn raw(&self) -> RawBuf {
        self.raw
    }

    /// The outcome of posting this buffer: on success the handle is given up (the buffer
    /// stays posted, its count with its region), on failure it comes back with the error
    /// (DESIGN.md decision 6).
    pub(crate) fn posted(self, r: Result) -> core::result::Result<(), (Error, Self)> {
        match r {
            Ok(()) => {
                let _ = self.into_raw();
                Ok(())
            }
            Err(e) => Err((e, self)),
        }
    }
}

impl Drop for Buf<'_> {
    fn drop(&mut self) {
        self.owner.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Drops `n` posted buffers of the region whose count is `owner` without rebuilding them:
/// what dropping each of them (`Buf::from_raw(raw, owner)`, then `Drop`) does, in one atomic
/// subtraction — for a read that does not hand buffers back.
pub(crate) fn forget_posted(owner: &AtomicUsize, n: usize) {
    if n > 0 {
        owner.fetch_sub(n, Ordering::AcqRel);
    }
}

/// The count a posted buffer of region `mr` returns to, for [`Buf::from_raw`]: `owners` is the
/// domain's table of them, one per registration slot.
pub(crate) fn owner_of(owners: &[AtomicUsize], mr: u16) -> Option<&AtomicUsize> {
    owners.get(usize::from(mr))
}

/// Buffers one gather send takes at most ([`Endpoint::sendv`](crate::ep::Endpoint::sendv));
/// an endpoint takes as many as its [`EpAttr::tx_iov_limit`](crate::ep::EpAttr::tx_iov_limit)
/// says, and a NIC may allow fewer.
pub const IOV_MAX: usize = 3;

/// The owned buffers of one gather send (`fi_sendv`'s `iov`): each with the number of bytes
/// of it to send — the first's at the endpoint's payload offset, behind ringfab's header as
/// for a send, the others' from their start. Taken by value, handed back whole — with the error, or
/// with the completion ([`CompletionQueue::read_owned_iov`](crate::cq::CompletionQueue::read_owned_iov)).
/// A `heapless::Vec` of at most [`IOV_MAX`]: no allocation.
#[derive(Debug, Default)]
pub struct Iov<'s> {
    entries: heapless::Vec<(Buf<'s>, usize), IOV_MAX>,
}

impl<'s> Iov<'s> {
    /// An empty list.
    pub fn new() -> Self {
        Iov::default()
    }

    /// Appends `buf`, of which `len` bytes are sent.
    ///
    /// # Errors
    /// `Inval` with the buffer back if the list is full ([`IOV_MAX`]) or `len` is more than
    /// the buffer holds.
    pub fn push(&mut self, buf: Buf<'s>, len: usize) -> core::result::Result<(), (Error, Buf<'s>)> {
        if len > buf.len() {
            return Err((Error::Inval, buf));
        }
        self.entries
            .push((buf, len))
            .map_err(|(buf, _)| (Error::Inval, buf))
    }

    /// Buffers in the list.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the list is empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Bytes sent from all of them.
    pub fn total(&self) -> usize {
        self.entries.iter().map(|(_, len)| len).sum()
    }

    /// Buffer `i` and its length, if there is one.
    pub fn get(&self, i: usize) -> Option<(&Buf<'s>, usize)> {
        self.entries.get(i).map(|(b, len)| (b, *len))
    }

    /// The first buffer, where a gather send writes ringfab's header.
    pub(crate) fn first_mut(&mut self) -> Option<&mut Buf<'s>> {
        self.entries.first_mut().map(|(b, _)| b)
    }

    /// Takes the buffers out, first first.
    pub fn into_bufs(self) -> impl Iterator<Item = Buf<'s>> {
        self.entries.into_iter().map(|(b, _)| b)
    }

    /// The buffers as posted: their identities and lengths, first first (their counts stay
    /// with their regions until they come back).
    pub(crate) fn into_raw(self) -> ([Option<RawBuf>; IOV_MAX], [usize; IOV_MAX]) {
        let (mut raw, mut lens) = ([None; IOV_MAX], [0; IOV_MAX]);
        for ((r, l), (b, len)) in raw.iter_mut().zip(lens.iter_mut()).zip(self.entries) {
            (*r, *l) = (Some(b.into_raw()), len);
        }
        (raw, lens)
    }

    /// [`Buf::posted`] for the whole list.
    #[allow(
        clippy::result_large_err,
        reason = "decision 6: the buffers come back with the error; no allocator to box them"
    )]
    pub(crate) fn posted(self, r: Result) -> core::result::Result<(), (Error, Self)> {
        match r {
            Ok(()) => {
                let _ = self.into_raw();
                Ok(())
            }
            Err(e) => Err((e, self)),
        }
    }

    /// A list of buffers coming back (a completion's, with their lengths unknown: 0).
    pub(crate) fn from_bufs(bufs: impl IntoIterator<Item = Buf<'s>>) -> Self {
        let mut iov = Iov::new();
        for b in bufs.into_iter().take(IOV_MAX) {
            // At most IOV_MAX: the push cannot fail.
            let _ = iov.entries.push((b, 0));
        }
        iov
    }
}
