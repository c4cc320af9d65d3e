//! Where core trusts what a caller or the allocator promises: the one module of core allowed
//! `unsafe` (the crate is `#![deny(unsafe_code)]`).
//!
//! Everything else in core is safe Rust over the hal's safe interfaces — descriptor rings, DMA
//! regions and mapped memory are reached through the hal's checked accessors
//! ([`DmaRegion`](crate::hal::DmaRegion), [`DmaSpan`], [`DmaHead`](crate::hal::DmaHead)). What
//! is left cannot be checked by core at all, because it rests on a promise made outside it:
//!
//! * **Registered memory stays put while the NIC can reach it.** Mapping memory for the device
//!   ([`Nic::map_dma`]) and making the CPU's [`DmaSpan`] of it are sound only if the memory
//!   lives, and is touched only through the region's buffers, until the mapping is gone.
//!   [`Memory`] holds that promise: for memory that lives for ever (`&'static mut [u8]`) and
//!   memory the region owns (a `Box<[u8]>` from the allocator, freed by [`OwnedMemory`] only
//!   after the unmapping) it is kept by construction here; for
//!   [`Memory::from_raw_parts`] it is the caller's. A [`Registered`] region drops its mapping
//!   before its memory.
//! * **A zero-copy view of a buffer** ([`Buf::as_slice`]): a reference into memory a device
//!   can write, sound only while the device does not — the caller's promise.
//! * **C's `struct fi_cq_err_entry`** ([`write_err_entry_raw`]): a caller's raw pointer to an
//!   entry of the size its API version has, and the `err_data` buffer it names.
//!
//! A buffer's span is a copy of its region's, and the hal's accessors take the aliasing rules
//! of a raw pointer from the span's maker ([`DmaSpan::new`]): each buffer's bytes are touched
//! only by whoever owns the buffer. Core keeps that rule by ownership: buffers are carved once,
//! without overlap ([`MemoryRegion::alloc`](crate::mr::MemoryRegion::alloc)); a [`Buf`] is
//! neither `Copy` nor `Clone`, and copies and fills through `&mut`; its span travels in the
//! crate-private `RawBuf` only while the buffer is posted, and is read there only after the
//! buffer's completion has been observed (the engine), before the buffer is handed back.
#![allow(
    unsafe_code,
    reason = "core's one module of promises it cannot check (see the module documentation)"
)]

use core::mem::offset_of;
use core::ptr::{self, addr_of, NonNull};

use crate::buf::Buf;
use crate::entry::{BufAddr, ErrEntry, ErrEntryAbi};
use crate::errdata::{deliver_err_data, ErrDataOut, ERR_DATA_MAX};
use crate::hal::{self, DmaSpan, Nic};

/// Owned registered memory, held as a pointer from `Box::into_raw` (not as a `Box`, whose
/// moves would assert uniqueness over memory the region's buffers point into); freed on drop.
#[cfg(feature = "alloc")]
pub(crate) struct OwnedMemory(NonNull<[u8]>);

// SAFETY: the memory is a plain byte allocation owned by this value; which thread frees it does
// not matter.
#[cfg(feature = "alloc")]
unsafe impl Send for OwnedMemory {}

#[cfg(feature = "alloc")]
impl Drop for OwnedMemory {
    fn drop(&mut self) {
        // SAFETY: the pointer came from `Box::into_raw` in `Memory::from(Box<[u8]>)` and is freed only
        // here, once. A `Registered` region drops its mapping before this field, so no
        // descriptor can name the memory any more.
        drop(unsafe { alloc::boxed::Box::from_raw(self.0.as_ptr()) });
    }
}

/// Memory to register ([`Domain::register`](crate::domain::Domain::register)): `len` bytes
/// that stay valid, and are touched only through the region's buffers, until the region made
/// of it is closed and no descriptor can name them. Three kinds keep that promise:
///
/// * memory that lives for ever — `&'static mut [u8]` (a `static` on bare metal): by
///   construction;
/// * memory the region owns — `Vec<u8>` or `Box<[u8]>` (the `alloc` feature): by construction,
///   freed only after the mapping is gone;
/// * memory lent by a caller who promises it — [`Memory::from_raw_parts`] (a C caller's buffer,
///   a test's array).
///
/// See [`crate::mr`]'s "What the safe registration takes".
pub struct Memory {
    ptr: NonNull<u8>,
    len: usize,
    /// The memory itself, when the region owns it.
    #[cfg(feature = "alloc")]
    owned: Option<OwnedMemory>,
}

impl core::fmt::Debug for Memory {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let mut d = f.debug_struct("Memory");
        d.field("len", &self.len);
        #[cfg(feature = "alloc")]
        d.field("owned", &self.owned.is_some());
        d.finish()
    }
}

impl From<&'static mut [u8]> for Memory {
    /// Memory that lives for ever.
    fn from(mem: &'static mut [u8]) -> Memory {
        let len = mem.len();
        Memory {
            // The unique borrow ends here, for ever: nothing but the region reaches the memory.
            ptr: NonNull::from(mem).cast(),
            len,
            #[cfg(feature = "alloc")]
            owned: None,
        }
    }
}

#[cfg(feature = "alloc")]
impl From<alloc::boxed::Box<[u8]>> for Memory {
    /// Memory the region will own (and free after unmapping it).
    fn from(mem: alloc::boxed::Box<[u8]>) -> Memory {
        let len = mem.len();
        let owned = OwnedMemory(NonNull::from(alloc::boxed::Box::leak(mem)));
        Memory {
            ptr: owned.0.cast(),
            len,
            owned: Some(owned),
        }
    }
}

#[cfg(feature = "alloc")]
impl From<alloc::vec::Vec<u8>> for Memory {
    /// Memory the region will own, as a `Box<[u8]>`.
    fn from(mem: alloc::vec::Vec<u8>) -> Memory {
        Memory::from(mem.into_boxed_slice())
    }
}

impl Memory {
    /// `len` bytes at `ptr`, lent: memory that does not live for ever and that the region does
    /// not own (a C caller's buffer, a test's stack array).
    ///
    /// # Safety
    /// `ptr..ptr+len` must stay valid, and be accessed only through the [`Buf`]s of the region
    /// it is registered as, until the domain's paths are closed and the region is closed — that
    /// is, until no descriptor of the NIC can name it any more.
    pub unsafe fn from_raw_parts(ptr: NonNull<u8>, len: usize) -> Memory {
        Memory {
            ptr,
            len,
            #[cfg(feature = "alloc")]
            owned: None,
        }
    }

    /// Bytes of memory.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there is none (registering it is `Inval`).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// A registered region's memory: the NIC's mapping of it, the CPU's span of it, and the memory
/// itself when the region owns it. Fields drop in declaration order: unmap, then free.
pub(crate) struct Registered<M> {
    /// Keeps the device's view of the memory alive; dropping it unmaps.
    mapping: M,
    /// The memory, as the CPU reaches it.
    span: DmaSpan,
    /// The memory, when the region owns it: freed after the mapping is gone.
    #[cfg(feature = "alloc")]
    #[allow(
        dead_code,
        reason = "held for its drop: frees the memory after the mapping is gone"
    )]
    owned: Option<OwnedMemory>,
}

impl<M> Registered<M> {
    /// Maps `mem` for `nic`'s device. On failure `mem` is dropped (owned memory freed): nothing
    /// maps it.
    ///
    /// # Errors
    /// The platform's refusal ([`Nic::map_dma`]).
    pub(crate) fn map<N: Nic<Mapping = M>>(nic: &N, mem: Memory) -> hal::Result<Registered<M>> {
        // SAFETY: `Memory`'s invariant is `map_dma`'s contract: the memory stays valid and
        // unreferenced until the mapping drops — for ever, or until `owned` (declared after
        // `mapping`, so dropped after it) frees it, or as `from_raw_parts`'s caller promised.
        let mapping = unsafe { nic.map_dma(mem.ptr, mem.len) }?;
        Ok(Registered {
            mapping,
            // SAFETY: the same invariant keeps the memory valid while this span (or a buffer's
            // span carved from it) is used, and touched only through the region's buffers,
            // each by its owner alone (the module documentation says how core keeps that).
            span: unsafe { DmaSpan::new(mem.ptr, mem.len) },
            #[cfg(feature = "alloc")]
            owned: mem.owned,
        })
    }

    /// The NIC's mapping.
    pub(crate) fn mapping(&self) -> &M {
        &self.mapping
    }

    /// The CPU's span of the whole region.
    pub(crate) fn span(&self) -> DmaSpan {
        self.span
    }
}

/// A caller's promise that the bytes it lends from a registered region
/// ([`MemoryRegion::lend`](crate::mr::MemoryRegion::lend)) overlap no other live buffer of that
/// region — lent, or handed out by `alloc` — for as long as the lent buffer lives. Core's rule
/// that a buffer's bytes are touched only by its owner (this module's documentation) is the
/// caller's to keep there, since core cannot see where the caller's buffers are. One promise
/// per lent buffer: neither `Copy` nor `Clone`.
#[derive(Debug)]
pub struct NoOverlap(());

impl NoOverlap {
    /// Makes the promise for one lent buffer.
    ///
    /// # Safety
    /// The buffer lent with it overlaps no other live buffer of its region while it lives.
    pub unsafe fn promise() -> NoOverlap {
        NoOverlap(())
    }
}

impl Buf<'_> {
    /// The buffer's bytes, without a copy.
    ///
    /// # Safety
    /// The device must not write the buffer while the slice lives. That holds for an owned
    /// buffer of a well-behaved device; a device that writes memory it was never handed (a
    /// stale descriptor) would break it, which is why the copying accessors exist.
    pub unsafe fn as_slice(&self) -> &[u8] {
        let span = self.raw().span;
        // SAFETY: the span is `len` bytes of registered memory, valid while the region is
        // (this buffer keeps it open); the buffer is owned here, so core does not touch it, and
        // the caller promises that the device does not write it while the borrow lives.
        unsafe { core::slice::from_raw_parts(span.as_ptr().as_ptr(), span.len()) }
    }
}

/// Writes error entry `entry` into a C caller's `struct fi_cq_err_entry` at `dst`, delivering
/// `data` as `err_data` by the rules of [`deliver_err_data`].
///
/// Reads the caller's `err_data` and `err_data_size` first (only for
/// [`ErrEntryAbi::V1_5`] and later; before 1.5 the caller cannot supply a buffer), then writes
/// exactly `abi.size()` bytes: every field of `entry` that layout has, with `err_data` and
/// `err_data_size` replaced by where the data went. `entry`'s own `err_data`/`err_data_size`
/// are ignored. Nothing past `abi.size()` is touched, so a 72- or 80-byte caller buffer is safe.
/// `err_data` is read and written as the pointer it is in C, so the caller's pointer (or the
/// CQ buffer's) keeps its provenance.
///
/// A caller that passes `err_data_size` > 0 with a `NULL` `err_data` is treated as passing
/// no buffer (size 0).
///
/// # Safety
/// * `dst` must be valid for reads and writes of `abi.size()` bytes (no alignment needed).
/// * If the caller's `err_data_size` (API ≥ 1.5) is non-zero and its `err_data` non-`NULL`,
///   `err_data` must be valid for writes of `err_data_size` bytes and must not overlap `dst`,
///   `data` or `cq_buf`.
/// * After return, the caller's `err_data` may point into `cq_buf`; that pointer is valid only
///   while `cq_buf` is neither moved nor written — the CQ keeps it until its next read call.
pub unsafe fn write_err_entry_raw(
    dst: *mut ErrEntry,
    abi: ErrEntryAbi,
    entry: &ErrEntry,
    data: &[u8],
    cq_buf: &mut [u8; ERR_DATA_MAX],
) {
    // `err_data` as C has it: a pointer (`BufAddr` is its number).
    let err_data = dst
        .cast::<u8>()
        .wrapping_add(offset_of!(ErrEntry, err_data))
        .cast::<*mut u8>();
    let (user_ptr, user_size) = if abi.has_err_data_size() {
        // SAFETY: `dst` is valid for reads of `abi.size()` bytes, which for V1_5 and later
        // includes `err_data` (offset 64) and `err_data_size` (offset 72); read_unaligned needs
        // no alignment.
        unsafe {
            (
                ptr::read_unaligned(err_data),
                ptr::read_unaligned(addr_of!((*dst).err_data_size)),
            )
        }
    } else {
        (ptr::null_mut(), 0)
    };

    let caller = if user_size > 0 && !user_ptr.is_null() {
        // SAFETY: the caller guarantees that a non-NULL `err_data` with non-zero size is
        // writable for `err_data_size` bytes and overlaps nothing else used here.
        Some(unsafe { core::slice::from_raw_parts_mut(user_ptr, user_size) })
    } else {
        None
    };

    let mut out = *entry;
    let out_ptr = match deliver_err_data(data, caller, cq_buf) {
        ErrDataOut::Copied(n) => {
            out.err_data_size = n;
            user_ptr
        }
        ErrDataOut::Provider(s) => {
            out.err_data_size = s.len();
            if s.is_empty() {
                ptr::null_mut()
            } else {
                s.as_ptr().cast_mut()
            }
        }
    };
    out.err_data = BufAddr(out_ptr.addr());

    // SAFETY: `out` is a live local of size_of::<ErrEntry>() >= abi.size() bytes; `dst` is
    // valid for writes of abi.size() bytes and cannot overlap a local. A byte copy needs no
    // alignment. Every layout holds `err_data` (bytes 64..72, inside the smallest size, 72):
    // it is written again as a pointer, so that it carries the pointer's provenance, not only
    // its address.
    unsafe {
        ptr::copy_nonoverlapping(
            ptr::from_ref(&out).cast::<u8>(),
            dst.cast::<u8>(),
            abi.size(),
        );
        ptr::write_unaligned(err_data, out_ptr);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entry::OpContext;
    use core::mem::size_of;

    const DATA: [u8; 6] = [0x02, 0x00, 0x5e, 0x10, 0x20, 0x30];

    fn sample() -> ErrEntry {
        ErrEntry {
            op_context: OpContext(0x1234),
            len: 60,
            err: 99,
            prov_errno: 7,
            src_addr: 42,
            ..ErrEntry::default()
        }
    }

    /// A C caller's buffer: room for the largest entry plus a canary tail.
    #[repr(C, align(8))]
    struct CBuf([u8; 96]);

    impl CBuf {
        /// The caller's input: `err_data` stored as a pointer (as C stores a `void *`), in
        /// place — moving the buffer would copy it as bytes, which carry no provenance.
        fn input(&mut self, err_data: *mut u8, err_data_size: usize) {
            // SAFETY: bytes 64..72 of the 96 hold a pointer; no alignment needed.
            unsafe { ptr::write_unaligned(self.0.as_mut_ptr().add(64).cast(), err_data) };
            self.0[72..80].copy_from_slice(&err_data_size.to_ne_bytes());
        }
        fn usize_at(&self, off: usize) -> usize {
            usize::from_ne_bytes(self.0[off..off + 8].try_into().unwrap())
        }
        /// `err_data` as a caller reads it back: a pointer.
        fn err_data(&self) -> *const u8 {
            // SAFETY: bytes 64..72 of the 96; no alignment needed.
            unsafe { ptr::read_unaligned(self.0.as_ptr().add(64).cast()) }
        }
        fn entry(&mut self) -> *mut ErrEntry {
            self.0.as_mut_ptr().cast()
        }
    }

    #[test]
    fn raw_entry_with_caller_buffer_copies_into_it() {
        let mut user = [0u8; 4];
        let mut c = CBuf([0xcc; 96]);
        c.input(user.as_mut_ptr(), user.len());
        let mut cq = [0u8; ERR_DATA_MAX];
        // SAFETY: `c` holds 96 bytes >= 88; `user` is a live 4-byte buffer apart from the rest.
        unsafe { write_err_entry_raw(c.entry(), ErrEntryAbi::V1_20, &sample(), &DATA, &mut cq) };
        assert_eq!(c.err_data(), user.as_ptr(), "err_data stays the caller's");
        // SAFETY: the caller's pointer, read back, still reaches its buffer (its provenance
        // kept): 4 bytes of `user`, not borrowed elsewhere now.
        let through_entry = unsafe { core::slice::from_raw_parts(c.err_data(), 4) };
        assert_eq!(through_entry, &DATA[..4]);
        assert_eq!(user, DATA[..4]);
        assert_eq!(c.usize_at(72), 4, "err_data_size = bytes copied");
        assert_eq!(c.usize_at(80), 42, "src_addr written for API >= 1.20");
        assert_eq!(c.usize_at(0), 0x1234);
        assert_eq!(&c.0[88..], &[0xcc; 8], "nothing past the entry");
    }

    #[test]
    fn raw_entry_with_size_zero_points_at_the_cq_buffer() {
        let mut other = [0u8; 8];
        let mut c = CBuf([0xcc; 96]);
        c.input(other.as_mut_ptr(), 0);
        let mut cq = [0u8; ERR_DATA_MAX];
        // SAFETY: `c` holds 96 bytes >= 80; size 0 means the caller's pointer is not used.
        unsafe { write_err_entry_raw(c.entry(), ErrEntryAbi::V1_5, &sample(), &DATA, &mut cq) };
        assert_eq!(c.err_data(), cq.as_ptr());
        // SAFETY: `err_data` points at the CQ buffer (its provenance kept), 6 bytes written.
        let through_entry = unsafe { core::slice::from_raw_parts(c.err_data(), 6) };
        assert_eq!(through_entry, &DATA);
        assert_eq!(c.usize_at(72), DATA.len());
        assert_eq!(other, [0; 8], "the caller's pointer was not used");
        assert_eq!(
            &c.0[80..],
            &[0xcc; 16],
            "an 80-byte caller gets no src_addr"
        );
    }

    #[test]
    fn raw_entry_before_api_1_5_ignores_the_caller_pointer_and_writes_72_bytes() {
        let mut user = [0u8; 8];
        let mut c = CBuf([0xcc; 96]);
        c.input(user.as_mut_ptr(), 0xcccc_cccc_cccc_cccc);
        let mut cq = [0u8; ERR_DATA_MAX];
        // SAFETY: `c` holds 96 bytes >= 72; before 1.5 the caller's pointer is never written.
        unsafe { write_err_entry_raw(c.entry(), ErrEntryAbi::V1_0, &sample(), &DATA, &mut cq) };
        assert_eq!(user, [0; 8]);
        assert_eq!(c.err_data(), cq.as_ptr());
        assert_eq!(&c.0[72..], &[0xcc; 24], "no err_data_size before API 1.5");
        assert_eq!(ErrEntryAbi::V1_0.size(), 72);
        assert_eq!(size_of::<ErrEntry>(), 88);
    }

    #[test]
    fn raw_entry_without_error_data_gives_null_and_zero() {
        let mut c = CBuf([0xcc; 96]);
        c.input(ptr::null_mut(), 0);
        let mut cq = [0u8; ERR_DATA_MAX];
        // SAFETY: `c` holds 96 bytes >= 88; no caller buffer.
        unsafe { write_err_entry_raw(c.entry(), ErrEntryAbi::V1_20, &sample(), &[], &mut cq) };
        assert!(c.err_data().is_null());
        assert_eq!(c.usize_at(72), 0);
    }

    #[test]
    fn raw_entry_with_size_but_null_pointer_uses_the_cq_buffer() {
        let mut c = CBuf([0xcc; 96]);
        c.input(ptr::null_mut(), 16);
        let mut cq = [0u8; ERR_DATA_MAX];
        // SAFETY: `c` holds 96 bytes >= 88; the NULL caller pointer is never dereferenced.
        unsafe { write_err_entry_raw(c.entry(), ErrEntryAbi::V1_20, &sample(), &DATA, &mut cq) };
        assert_eq!(c.err_data(), cq.as_ptr());
        assert_eq!(c.usize_at(72), 6);
    }
}
