//! Memory mappings (BARs and anonymous DMA memory), and [`VfioMmio`], register access to a BAR.
//!
//! The one unsafe act here is dereferencing a pointer into a mapping: each access is checked to
//! lie inside it and to be aligned, goes through a raw pointer with a volatile operation, and the
//! mapping lives (an `Arc`) as long as any handle on it.

use std::io;
use std::os::fd::RawFd;
use std::ptr::NonNull;
use std::sync::Arc;

use ringfab_hal::Mmio;

/// A region of address space from mmap(2), unmapped on drop.
#[derive(Debug)]
pub(crate) struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: a `Mapping` is an address range owned by this value alone; it is reached only through
// raw-pointer volatile accesses (MMIO) or the `DmaRegion` accessors, never through references, so
// sharing or sending the owner between threads creates no aliasing of Rust references.
unsafe impl Send for Mapping {}
// SAFETY: as for `Send`: shared access is raw-pointer volatile access only.
unsafe impl Sync for Mapping {}

fn mmap(
    len: usize,
    prot: libc::c_int,
    flags: libc::c_int,
    fd: RawFd,
    offset: u64,
) -> io::Result<Mapping> {
    if len == 0 {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    let off =
        libc::off_t::try_from(offset).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: a fresh mapping chosen by the kernel (no MAP_FIXED), so no existing memory is
    // replaced; the arguments are plain values.
    let p = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, flags, fd, off) };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    let ptr = NonNull::new(p.cast::<u8>()).ok_or_else(|| io::Error::from(io::ErrorKind::Other))?;
    Ok(Mapping { ptr, len })
}

impl Mapping {
    /// Maps `len` bytes of `fd` at `offset`, shared, read/write: a BAR through the VFIO device fd.
    pub(crate) fn device(fd: RawFd, offset: u64, len: usize) -> io::Result<Mapping> {
        mmap(
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd,
            offset,
        )
    }

    /// `len` bytes of zeroed anonymous memory, from 2 MiB huge pages if `huge` (which fails when
    /// none are reserved: the caller falls back).
    pub(crate) fn anonymous(len: usize, huge: bool) -> io::Result<Mapping> {
        let mut flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS;
        if huge {
            flags |= libc::MAP_HUGETLB;
        }
        mmap(len, libc::PROT_READ | libc::PROT_WRITE, flags, -1, 0)
    }

    pub(crate) fn ptr(&self) -> NonNull<u8> {
        self.ptr
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `ptr..ptr+len` is exactly what mmap returned, unmapped once, here; every handle
        // that could reach it holds this value (through an `Arc`) and so is gone.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// Register access to one memory BAR, mapped from the VFIO device. Cheap to clone.
///
/// Each access is one volatile load or store of its width (32, 16 or 8 bits) through a raw
/// pointer into the mapping, never a reference. Offsets outside the BAR or not aligned to the
/// width read all ones and drop writes, as the `Mmio` contract says.
#[derive(Clone, Debug)]
pub struct VfioMmio {
    map: Arc<Mapping>,
}

impl VfioMmio {
    pub(crate) fn new(map: Arc<Mapping>) -> VfioMmio {
        VfioMmio { map }
    }

    /// Pointer to the register of type `T` at `offset`, if it is aligned and inside the BAR.
    fn reg<T>(&self, offset: usize) -> Option<*mut T> {
        let size = std::mem::size_of::<T>();
        if offset % size != 0 || offset.checked_add(size)? > self.map.len() {
            return None;
        }
        // SAFETY: offset + size <= len, so the pointer stays inside the mapping.
        Some(unsafe { self.map.ptr().as_ptr().add(offset) }.cast::<T>())
    }
}

impl Mmio for VfioMmio {
    fn read32(&self, offset: usize) -> u32 {
        match self.reg::<u32>(offset) {
            // SAFETY: `reg` checked the 4 bytes are inside the mapping and aligned; the mapping
            // lives while `self` does; the access is volatile through a raw pointer.
            Some(p) => unsafe { p.read_volatile() },
            None => 0xffff_ffff,
        }
    }

    fn write32(&self, offset: usize, value: u32) {
        if let Some(p) = self.reg::<u32>(offset) {
            // SAFETY: as in `read32`, for a volatile store.
            unsafe { p.write_volatile(value) }
        }
    }

    // Narrow registers (virtio's common configuration) need accesses of their own width: the
    // provided read-modify-write through 32 bits would also write the neighbouring field.
    fn read16(&self, offset: usize) -> u16 {
        match self.reg::<u16>(offset) {
            // SAFETY: as in `read32`, for 2 aligned bytes inside the mapping.
            Some(p) => unsafe { p.read_volatile() },
            None => 0xffff,
        }
    }

    fn write16(&self, offset: usize, value: u16) {
        if let Some(p) = self.reg::<u16>(offset) {
            // SAFETY: as in `read32`, for a volatile 16-bit store.
            unsafe { p.write_volatile(value) }
        }
    }

    fn read8(&self, offset: usize) -> u8 {
        match self.reg::<u8>(offset) {
            // SAFETY: as in `read32`, for one byte inside the mapping.
            Some(p) => unsafe { p.read_volatile() },
            None => 0xff,
        }
    }

    fn write8(&self, offset: usize, value: u8) {
        if let Some(p) = self.reg::<u8>(offset) {
            // SAFETY: as in `read32`, for a volatile byte store.
            unsafe { p.write_volatile(value) }
        }
    }

    fn len(&self) -> usize {
        self.map.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bar(len: usize) -> VfioMmio {
        VfioMmio::new(Arc::new(Mapping::anonymous(len, false).unwrap()))
    }

    #[test]
    fn registers_read_back_what_was_written() {
        let m = bar(4096);
        assert_eq!(m.len(), 4096);
        m.write32(0, 0x1234_5678);
        m.write32(4092, 0xdead_beef);
        assert_eq!(m.read32(0), 0x1234_5678);
        assert_eq!(m.read32(4092), 0xdead_beef, "the last whole register");
        assert_eq!(m.read32(8), 0, "anonymous memory starts zeroed");
    }

    #[test]
    fn out_of_range_or_misaligned_reads_are_all_ones_and_writes_are_dropped() {
        let m = bar(4096);
        for off in [4096, 4094, usize::MAX - 3, usize::MAX] {
            assert_eq!(m.read32(off), 0xffff_ffff, "offset {off}");
            m.write32(off, 0);
        }
        m.write32(2, 0xffff_ffff);
        assert_eq!(m.read32(0), 0, "misaligned write dropped");
        assert_eq!(m.read32(4), 0);
        assert_eq!(m.read32(1), 0xffff_ffff);
    }

    #[test]
    fn narrow_accesses_reach_only_their_own_lanes() {
        let m = bar(4096);
        m.write32(0x14, 0x1122_3344);
        m.write16(0x16, 0xabcd);
        m.write8(0x14, 0x0f);
        assert_eq!(m.read32(0x14), 0xabcd_330f);
        assert_eq!((m.read16(0x14), m.read8(0x15)), (0x330f, 0x33));
        assert_eq!(m.read16(0x15), 0xffff, "misaligned 16-bit read");
        m.write16(0x17, 0);
        assert_eq!(
            m.read32(0x14),
            0xabcd_330f,
            "misaligned 16-bit write dropped"
        );
        assert_eq!(m.read8(4096), 0xff);
    }

    #[test]
    fn an_empty_mapping_is_refused() {
        assert!(Mapping::anonymous(0, false).is_err());
    }
}
