//! Memory registration (`fi_mr`, local access): caller memory mapped for the NIC, and the owned
//! buffers carved from it.
//!
//! A [`MemoryRegion`] is caller memory the NIC can reach: registering it asks the NIC for an
//! IOMMU mapping ([`Nic::map_dma`]). Buffers are carved from it with
//! [`MemoryRegion::alloc`] as [`Buf`]s — owned handles, neither `Copy` nor `Clone`, so that
//! exactly one party holds a buffer at a time (DESIGN.md decision 6): the application while it
//! fills or reads it, the endpoint (and the NIC) from posting until the completion hands it back.
//!
//! # What the safe registration takes: [`Memory`]
//!
//! A posted buffer is written by the device at a time of the device's choosing, so registered
//! memory must outlive every queue that could name it, whatever the application does with its
//! handles. Two kinds of memory make that true without trusting a destructor to run:
//!
//! * memory the region **owns** (`Vec<u8>` or `Box<[u8]>`, with the `alloc` feature): it lives
//!   in the domain's [`Storage`](crate::storage::Storage), which stops the hardware queues
//!   before it unmaps and frees it (its fields drop in that order), and a leaked storage leaks
//!   the memory with it;
//! * memory that lives **for ever** (`&'static mut [u8]`: a `static` on bare metal).
//!
//! Borrowed memory could be freed while the domain (and with it the running queues) is leaked
//! with `mem::forget` — the same reason `std::thread::scope` cannot rely on a destructor — so
//! [`Domain::register_raw`] takes it only with that promise made by the caller in an `unsafe`
//! block.
//!
//! # Access without references
//!
//! The device can write registered memory, so [`Buf`] offers copies ([`Buf::write`],
//! [`Buf::read`], [`Buf::fill`]) rather than `&[u8]` into it. They go through the hal's checked
//! accessor for mapped memory ([`DmaSpan`]): bounds-checked, and through the pointer the memory
//! was registered with, so the address keeps its provenance — core never turns an integer back
//! into a pointer. [`Buf::as_slice`] exists for zero-copy readers, as an `unsafe` promise that
//! the device is done with the buffer. What registering trusts, and that promise, live in
//! core's one `unsafe` module (`raw.rs`).
//!
//! # Lifetime of a region
//!
//! Every `Buf` counts against its region; [`MemoryRegion::close`] returns `Busy` while any is
//! alive — held by the application or posted — so the mapping (and its IOVA range) can never be
//! released under a descriptor that still names it.

use core::sync::atomic::{AtomicUsize, Ordering};

use spin::Mutex;

use crate::domain::Domain;
use crate::hal::{DmaMapping, DmaSpan, Iova, Nic, TxSegment};
use crate::raw::{Mappable, Registered};
use crate::storage::Capacity;
use crate::{Error, Result};

/// Buffers start on this boundary (a cache line), so that two buffers never share a line the
/// device and the CPU write at once.
pub const BUF_ALIGN: usize = 64;

/// The IOMMU page: a buffer of at most this many bytes is carved inside one.
pub const PAGE: usize = 4096;

/// Memory to register: owned by the region, or living for ever. See the
/// [module documentation](self).
#[derive(Debug)]
pub enum Memory {
    /// Memory that lives for ever (a `static`).
    Static(&'static mut [u8]),
    /// Memory the region owns and frees after unmapping it.
    #[cfg(feature = "alloc")]
    Owned(alloc::boxed::Box<[u8]>),
}

impl From<&'static mut [u8]> for Memory {
    fn from(mem: &'static mut [u8]) -> Self {
        Memory::Static(mem)
    }
}

#[cfg(feature = "alloc")]
impl From<alloc::boxed::Box<[u8]>> for Memory {
    fn from(mem: alloc::boxed::Box<[u8]>) -> Self {
        Memory::Owned(mem)
    }
}

#[cfg(feature = "alloc")]
impl From<alloc::vec::Vec<u8>> for Memory {
    fn from(mem: alloc::vec::Vec<u8>) -> Self {
        Memory::Owned(mem.into_boxed_slice())
    }
}

/// A registered region as its slot keeps it.
struct MrState<M> {
    /// The mapping and the memory (unmapped, then freed, when dropped).
    mem: Registered<M>,
    /// Bytes handed out so far by [`MemoryRegion::alloc`].
    used: usize,
}

/// One slot of the domain's memory-registration table (in its
/// [`Storage`](crate::storage::Storage)).
pub(crate) struct MrSlot<N: Nic> {
    state: Mutex<Option<MrState<N::Mapping>>>,
    /// Live [`Buf`]s carved from the region (held or posted).
    outstanding: AtomicUsize,
}

impl<N: Nic> MrSlot<N> {
    /// A free slot.
    #[allow(
        clippy::declare_interior_mutable_const,
        reason = "a fresh slot per use is the point: the storage's table is built of them"
    )]
    pub(crate) const EMPTY: Self = MrSlot {
        state: Mutex::new(None),
        outstanding: AtomicUsize::new(0),
    };
}

impl<'n, N: Nic + 'n, const D: usize> Domain<'n, N, D> {
    /// Registers `mem` (`fi_mr_reg` for local send/receive access): maps it for the NIC. The
    /// region keeps owned memory (`Vec<u8>`, `Box<[u8]>`) until it is closed.
    ///
    /// ```
    /// # use ringfab::{domain::Domain, storage::Storage};
    /// # fn f<N: ringfab::hal::Nic>(d: &Domain<'_, N>) -> ringfab::Result {
    /// let mr = d.register(vec![0u8; 64 * 2048])?;
    /// let buf = mr.alloc(d, 2048)?;
    /// # let _ = buf; Ok(()) }
    /// ```
    ///
    /// # Errors
    /// `Inval` for empty memory; `Full(Mrs)` when every MR slot is taken; `Device(_)` when the
    /// platform refuses the mapping (owned memory is freed then).
    pub fn register(&self, mem: impl Into<Memory>) -> Result<MemoryRegion> {
        self.map(match mem.into() {
            Memory::Static(mem) => Mappable::forever(mem),
            #[cfg(feature = "alloc")]
            Memory::Owned(mem) => Mappable::owned(mem),
        })
    }

    /// What `register` and `register_raw` share: maps `mem` into a free slot, which keeps it
    /// (and frees memory the region owns) until the region is closed.
    pub(crate) fn map(&self, mem: Mappable) -> Result<MemoryRegion> {
        if mem.len() == 0 {
            return Err(Error::Inval);
        }
        for (index, slot) in self.mrs().iter().enumerate() {
            let mut guard = slot.state.lock();
            if guard.is_some() {
                continue;
            }
            let mem = Registered::map(self.nic(), mem)?;
            slot.outstanding.store(0, Ordering::Release);
            *guard = Some(MrState { mem, used: 0 });
            return Ok(MemoryRegion {
                domain: self.id(),
                index,
            });
        }
        Err(Error::Full(Capacity::Mrs))
    }
}

/// A registered region (`fid_mr`): an index into its domain's MR table. Its methods take the
/// domain it was registered in (another domain's is `Domain`).
///
/// Dropping the handle leaves the region registered until the domain goes; [`close`](Self::close)
/// unmaps it.
#[derive(Debug)]
pub struct MemoryRegion {
    domain: u32,
    index: usize,
}

impl MemoryRegion {
    fn slot<'d, N: Nic, const D: usize>(&self, dom: &'d Domain<'_, N, D>) -> Result<&'d MrSlot<N>> {
        dom.check(self.domain)?;
        dom.mrs().get(self.index).ok_or(Error::Domain)
    }

    /// The region's index in the domain's MR table.
    pub fn index(&self) -> usize {
        self.index
    }

    /// Bytes registered (0 for another domain's region).
    pub fn len<N: Nic, const D: usize>(&self, dom: &Domain<'_, N, D>) -> usize {
        self.slot(dom)
            .ok()
            .and_then(|s| s.state.lock().as_ref().map(|st| st.mem.span().len()))
            .unwrap_or(0)
    }

    /// Device address of the region's first byte.
    ///
    /// # Errors
    /// `Domain` for another domain; `OpBadState` if the region is closed.
    pub fn iova<N: Nic, const D: usize>(&self, dom: &Domain<'_, N, D>) -> Result<Iova> {
        self.slot(dom)?
            .state
            .lock()
            .as_ref()
            .map(|st| st.mem.mapping().iova())
            .ok_or(Error::OpBadState)
    }

    /// Carves the next `len` bytes (from a [`BUF_ALIGN`] boundary, and inside one [`PAGE`] of
    /// device addresses when `len` ≤ `PAGE`) off the region as an owned buffer. Regions are
    /// carved once, front to back: a buffer's memory returns to the region only when the region
    /// is closed.
    ///
    /// # Errors
    /// `Inval` for a zero or over-`u32` length; `NoMem` when the region has no room left;
    /// `Domain` for another domain.
    pub fn alloc<'d, N: Nic, const D: usize>(
        &self,
        dom: &'d Domain<'_, N, D>,
        len: usize,
    ) -> Result<Buf<'d>> {
        let len32 = u32::try_from(len).map_err(|_| Error::Inval)?;
        if len == 0 {
            return Err(Error::Inval);
        }
        let slot = self.slot(dom)?;
        let mut guard = slot.state.lock();
        let st = guard.as_mut().ok_or(Error::OpBadState)?;
        // Alignment is of device addresses (the region's memory need not be page-aligned).
        // A buffer that fits in a page never straddles one: behind an IOMMU two pages adjacent
        // in IOVA need not be adjacent in memory, and QEMU's igb and e1000e silently drop a
        // transmit buffer that crosses into a page that is not (docs/qemu-tests.md). Larger
        // buffers cannot avoid it; see docs/architecture.md.
        let iova = st.mem.mapping().iova().0 as usize;
        let mut at = (iova + st.used).next_multiple_of(BUF_ALIGN);
        if len <= PAGE && at % PAGE + len > PAGE {
            at = at.next_multiple_of(PAGE);
        }
        let start = at - iova;
        let span = st.mem.span().sub(start, len).ok_or(Error::NoMem)?;
        st.used = start + len;
        slot.outstanding.fetch_add(1, Ordering::AcqRel);
        Ok(Buf {
            raw: RawBuf {
                span,
                iova: Iova(st.mem.mapping().iova().0 + start as u64),
                len: len32,
                mr: self.index as u16,
            },
            owner: &slot.outstanding,
        })
    }

    /// Buffers of this region still alive (held by the application or posted).
    pub fn outstanding<N: Nic, const D: usize>(&self, dom: &Domain<'_, N, D>) -> usize {
        self.slot(dom)
            .map_or(0, |s| s.outstanding.load(Ordering::Acquire))
    }

    /// Closes the region (`fi_close`): unmaps it (and frees memory it owns).
    ///
    /// # Errors
    /// `Err((Error::Busy, self))` while any of its buffers is alive; `Domain` for another
    /// domain.
    pub fn close<N: Nic, const D: usize>(
        self,
        dom: &Domain<'_, N, D>,
    ) -> core::result::Result<(), (Error, Self)> {
        let slot = match self.slot(dom) {
            Ok(slot) => slot,
            Err(e) => return Err((e, self)),
        };
        let mut guard = slot.state.lock();
        if slot.outstanding.load(Ordering::Acquire) > 0 {
            drop(guard);
            return Err((Error::Busy, self));
        }
        // Dropping the mapping unmaps the memory.
        *guard = None;
        Ok(())
    }
}

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

/// An owned buffer of registered memory. See the [module documentation](self).
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

/// The count a posted buffer of region `mr` returns to, for [`Buf::from_raw`].
pub(crate) fn owner_of<N: Nic>(mrs: &[MrSlot<N>], mr: u16) -> Option<&AtomicUsize> {
    mrs.get(usize::from(mr)).map(|s| &s.outstanding)
}

/// Buffers one gather send takes at most ([`Endpoint::sendv`](crate::ep::Endpoint::sendv));
/// a NIC may allow fewer (`iov_limit` in [`Endpoint::info`](crate::ep::Endpoint::info)).
pub const IOV_MAX: usize = 3;

/// The owned buffers of one gather send (`fi_sendv`'s `iov`): each with the number of bytes
/// of it to send, from its start. Taken by value, handed back whole — with the error, or
/// with the completion ([`CompletionQueue::read_owned_iov`](crate::cq::CompletionQueue::read_owned_iov)).
/// A fixed array: no allocation.
#[derive(Debug, Default)]
pub struct Iov<'s> {
    bufs: [Option<Buf<'s>>; IOV_MAX],
    lens: [usize; IOV_MAX],
    n: usize,
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
        if self.n == IOV_MAX || len > buf.len() {
            return Err((Error::Inval, buf));
        }
        self.bufs[self.n] = Some(buf);
        self.lens[self.n] = len;
        self.n += 1;
        Ok(())
    }

    /// Buffers in the list.
    pub fn len(&self) -> usize {
        self.n
    }

    /// Whether the list is empty.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Bytes sent from all of them.
    pub fn total(&self) -> usize {
        self.lens[..self.n].iter().sum()
    }

    /// Buffer `i` and its length, if there is one.
    pub fn get(&self, i: usize) -> Option<(&Buf<'s>, usize)> {
        self.bufs.get(i)?.as_ref().map(|b| (b, self.lens[i]))
    }

    /// Takes the buffers out, first first.
    pub fn into_bufs(self) -> impl Iterator<Item = Buf<'s>> {
        self.bufs.into_iter().flatten()
    }

    /// The buffers as posted: their identities, the list left empty (their counts stay with
    /// their regions until they come back).
    pub(crate) fn into_raw(mut self) -> ([Option<RawBuf>; IOV_MAX], [usize; IOV_MAX]) {
        let mut raw = [None; IOV_MAX];
        for (r, b) in raw.iter_mut().zip(self.bufs.iter_mut()) {
            *r = b.take().map(Buf::into_raw);
        }
        (raw, self.lens)
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
            iov.bufs[iov.n] = Some(b);
            iov.n += 1;
        }
        iov
    }
}
