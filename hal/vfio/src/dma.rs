//! DMA memory and mappings: anonymous memory mapped through the IOMMU at an IOVA from the
//! [`IovaAllocator`], and caller memory mapped the same way for registration.
//!
//! The IOMMU itself is behind [`Mapper`] (VFIO_IOMMU_MAP_DMA / UNMAP_DMA on the container in
//! production, a recorder in tests), so page rounding, IOVA bookkeeping and the order of
//! teardown are tested without hardware.

use std::io;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex, PoisonError};

use ringfab_hal::{DmaMapping, DmaRegion, Iova};

use crate::error::{Error, Result};
use crate::iova::{IovaAllocator, IovaError};
use crate::mmio::Mapping;

/// Size of a huge page (x86_64's 2 MiB; the only size `MAP_HUGETLB` gives by default).
const HUGE_PAGE: usize = 2 << 20;

/// The IOMMU operations DMA needs.
pub(crate) trait Mapper: Send + Sync {
    /// Makes `len` bytes at `host` reachable by the device at `iova`. Both page-aligned.
    ///
    /// # Safety
    /// `host..host+len` stays valid until `unmap(iova, len)` succeeds, and nothing holds a Rust
    /// reference into it meanwhile.
    unsafe fn map(&self, iova: u64, len: u64, host: *mut u8) -> io::Result<()>;
    /// Removes the mapping made at `iova` of `len` bytes.
    fn unmap(&self, iova: u64, len: u64) -> io::Result<()>;
}

/// One IOMMU address space: the mapper and the IOVA allocator over its usable ranges.
pub(crate) struct DmaSpace {
    mapper: Box<dyn Mapper>,
    iova: Mutex<IovaAllocator>,
    page: usize,
    /// Try 2 MiB pages for allocations of at least that size.
    hugepages: bool,
}

impl std::fmt::Debug for DmaSpace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DmaSpace")
            .field("page", &self.page)
            .finish()
    }
}

fn round_up(v: usize, to: usize) -> Option<usize> {
    Some(v.checked_add(to - 1)? & !(to - 1))
}

impl DmaSpace {
    pub(crate) fn new(mapper: Box<dyn Mapper>, iova: IovaAllocator, page: usize) -> DmaSpace {
        DmaSpace {
            mapper,
            iova: Mutex::new(iova),
            page,
            hugepages: true,
        }
    }

    fn alloc_iova(&self, len: usize, align: usize) -> Result<u64> {
        let mut a = self.iova.lock().unwrap_or_else(PoisonError::into_inner);
        a.alloc(len as u64, align as u64).map_err(|e| match e {
            IovaError::Exhausted { len } => Error::IovaExhausted { len },
            IovaError::BadRequest => Error::DmaRequest { len },
        })
    }

    fn free_iova(&self, iova: u64) {
        let mut a = self.iova.lock().unwrap_or_else(PoisonError::into_inner);
        // Only this module allocates, and each value frees its own IOVA once.
        let _ = a.free(iova);
    }

    /// Zeroed memory of `len` bytes (rounded up to pages, or to 2 MiB pages when huge pages
    /// are available and `len` is at least one), mapped for the device.
    pub(crate) fn alloc(self: &Arc<Self>, len: usize) -> Result<VfioDma> {
        if len == 0 {
            return Err(Error::DmaRequest { len });
        }
        let mut mem = None;
        if self.hugepages && len >= HUGE_PAGE {
            if let Some(huge) = round_up(len, HUGE_PAGE) {
                mem = Mapping::anonymous(huge, true).ok();
            }
        }
        let mem = match mem {
            Some(m) => m,
            None => {
                let rounded = round_up(len, self.page).ok_or(Error::DmaRequest { len })?;
                Mapping::anonymous(rounded, false).map_err(|source| Error::Os {
                    op: "allocating DMA memory (mmap)",
                    source,
                })?
            }
        };
        // Align the IOVA like the memory, so the IOMMU can use a large page for a huge page.
        let align = if mem.len() % HUGE_PAGE == 0 {
            HUGE_PAGE
        } else {
            self.page
        };
        let iova = self.alloc_iova(mem.len(), align)?;
        // SAFETY: `mem` is owned by the `VfioDma` built below, which unmaps the IOVA before it
        // releases the memory, and no reference into it is ever made.
        if let Err(source) = unsafe { self.mapper.map(iova, mem.len() as u64, mem.ptr().as_ptr()) }
        {
            self.free_iova(iova);
            return Err(Error::DmaMap {
                len: mem.len() as u64,
                source,
            });
        }
        Ok(VfioDma {
            mem: Some(mem),
            iova,
            space: self.clone(),
        })
    }

    /// Maps caller memory `cpu..cpu+len`: the whole pages that hold it, so that the device
    /// reaches the exact sub-range at the returned mapping's IOVA.
    ///
    /// # Safety
    /// As `Platform::map_dma`: the memory stays valid and unreferenced until the mapping drops.
    pub(crate) unsafe fn map(
        self: &Arc<Self>,
        cpu: NonNull<u8>,
        len: usize,
    ) -> Result<VfioMapping> {
        let addr = cpu.as_ptr() as usize;
        let end = addr.checked_add(len).filter(|_| len > 0);
        let end = end
            .and_then(|e| round_up(e, self.page))
            .ok_or(Error::DmaRequest { len })?;
        let start = addr & !(self.page - 1);
        let map_len = end - start;
        let map_iova = self.alloc_iova(map_len, self.page)?;
        // SAFETY: the caller keeps `cpu..cpu+len` valid until the mapping drops, and the mapping
        // unmaps before it goes. The rounding exposes the rest of the first and last pages too;
        // those pages are the caller's memory as well (documented on `map_dma`).
        if let Err(source) = unsafe { self.mapper.map(map_iova, map_len as u64, start as *mut u8) }
        {
            self.free_iova(map_iova);
            return Err(Error::DmaMap {
                len: map_len as u64,
                source,
            });
        }
        Ok(VfioMapping {
            iova: map_iova + (addr - start) as u64,
            len,
            map_iova,
            map_len: map_len as u64,
            space: self.clone(),
        })
    }
}

/// DMA-coherent memory from [`VfioPlatform::alloc_dma`](crate::VfioPlatform): anonymous memory,
/// zeroed, page-aligned, mapped for the device at [`iova`](DmaRegion::iova). Dropping it unmaps
/// the IOVA first and frees the memory after.
#[derive(Debug)]
pub struct VfioDma {
    /// `None` only once leaked in `drop`.
    mem: Option<Mapping>,
    iova: u64,
    space: Arc<DmaSpace>,
}

impl VfioDma {
    fn mem(&self) -> &Mapping {
        // Always `Some` while the value is alive; taken only in `drop`.
        self.mem.as_ref().expect("DMA memory present until drop")
    }
}

// SAFETY: `cpu()..cpu()+len()` is an anonymous mmap owned by this value (zeroed by the kernel,
// page-aligned, never referenced), mapped by the IOMMU at `iova()` only, for as long as the value
// lives; neither address changes when the value moves; the IOVA allocator never hands out an
// overlapping range, and each mmap is distinct.
unsafe impl DmaRegion for VfioDma {
    fn cpu(&self) -> NonNull<u8> {
        self.mem().ptr()
    }
    fn iova(&self) -> Iova {
        Iova(self.iova)
    }
    fn len(&self) -> usize {
        self.mem().len()
    }
}

impl Drop for VfioDma {
    fn drop(&mut self) {
        let Some(mem) = self.mem.take() else { return };
        match self.space.mapper.unmap(self.iova, mem.len() as u64) {
            Ok(()) => {
                self.space.free_iova(self.iova);
                drop(mem);
            }
            Err(e) => {
                // The device may still reach these pages: neither free them (they could be
                // reused for something else) nor reuse the IOVA. A leak, reported.
                eprintln!(
                    "ringfab-vfio: unmapping DMA memory at {:#x} failed ({e}); leaking it",
                    self.iova
                );
                std::mem::forget(mem);
            }
        }
    }
}

/// Caller memory mapped for the device, from [`VfioPlatform::map_dma`](crate::VfioPlatform).
/// Unmapped when dropped.
#[derive(Debug)]
pub struct VfioMapping {
    iova: u64,
    len: usize,
    map_iova: u64,
    map_len: u64,
    space: Arc<DmaSpace>,
}

impl DmaMapping for VfioMapping {
    fn iova(&self) -> Iova {
        Iova(self.iova)
    }
    fn len(&self) -> usize {
        self.len
    }
}

impl Drop for VfioMapping {
    fn drop(&mut self) {
        match self.space.mapper.unmap(self.map_iova, self.map_len) {
            Ok(()) => self.space.free_iova(self.map_iova),
            Err(e) => eprintln!(
                "ringfab-vfio: unmapping registered memory at {:#x} failed ({e}); IOVA not reused",
                self.map_iova
            ),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::iova::IovaRange;

    /// An IOMMU that records what is mapped and can be told to fail.
    #[derive(Default)]
    pub(crate) struct Recorder {
        pub(crate) live: Mutex<Vec<(u64, u64, usize)>>,
        pub(crate) fail_map: std::sync::atomic::AtomicBool,
        pub(crate) fail_unmap: std::sync::atomic::AtomicBool,
    }

    impl Mapper for Arc<Recorder> {
        unsafe fn map(&self, iova: u64, len: u64, host: *mut u8) -> io::Result<()> {
            use std::sync::atomic::Ordering;
            if self.fail_map.load(Ordering::SeqCst) {
                return Err(io::Error::from_raw_os_error(libc::ENOMEM));
            }
            assert_eq!(iova % 4096, 0);
            assert_eq!(len % 4096, 0);
            assert_eq!(host as usize % 4096, 0, "VFIO needs page-aligned vaddr");
            self.live.lock().unwrap().push((iova, len, host as usize));
            Ok(())
        }
        fn unmap(&self, iova: u64, len: u64) -> io::Result<()> {
            use std::sync::atomic::Ordering;
            if self.fail_unmap.load(Ordering::SeqCst) {
                return Err(io::Error::from_raw_os_error(libc::EINVAL));
            }
            let mut live = self.live.lock().unwrap();
            let i = live
                .iter()
                .position(|&(i, l, _)| i == iova && l == len)
                .expect("unmap of exactly what was mapped");
            live.remove(i);
            Ok(())
        }
    }

    fn space(ranges: &[IovaRange]) -> (Arc<DmaSpace>, Arc<Recorder>) {
        let rec = Arc::new(Recorder::default());
        let s = DmaSpace::new(
            Box::new(rec.clone()),
            IovaAllocator::new(ranges, 4096, 48),
            4096,
        );
        (Arc::new(s), rec)
    }

    #[test]
    fn alloc_maps_zeroed_pages_and_drop_unmaps_and_frees_the_iova() {
        let (s, rec) = space(&crate::iova::tests::qemu_ranges());
        let d = s.alloc(100).unwrap();
        assert_eq!(d.len(), 4096, "rounded up to a page");
        assert_eq!(d.cpu().as_ptr() as usize % 4096, 0);
        assert_eq!(d.read_u64(4088), 0, "zeroed");
        d.write_u32(0, 7);
        assert_eq!(d.read_u32(0), 7);
        assert_eq!(
            *rec.live.lock().unwrap(),
            [(d.iova().0, 4096, d.cpu().as_ptr() as usize)]
        );
        let first = d.iova();
        drop(d);
        assert!(rec.live.lock().unwrap().is_empty());
        assert_eq!(s.alloc(1).unwrap().iova(), first, "IOVA reused after free");
    }

    #[test]
    fn regions_get_disjoint_iovas() {
        let (s, _) = space(&crate::iova::tests::qemu_ranges());
        let a = s.alloc(3 * 4096).unwrap();
        let b = s.alloc(4096).unwrap();
        assert!(b.iova().0 >= a.iova().0 + 3 * 4096 || b.iova().0 + 4096 <= a.iova().0);
    }

    #[test]
    fn map_reports_the_exact_sub_range_of_the_mapped_pages() {
        let (s, rec) = space(&crate::iova::tests::qemu_ranges());
        let buf = Mapping::anonymous(3 * 4096, false).unwrap();
        // 5000 bytes starting 100 bytes into the first page: spans pages 0 and 1.
        // SAFETY: `buf` outlives the mapping and is not referenced.
        let cpu = unsafe { NonNull::new_unchecked(buf.ptr().as_ptr().add(100)) };
        // SAFETY: as above.
        let m = unsafe { s.map(cpu, 5000) }.unwrap();
        assert_eq!(m.len(), 5000);
        let (iova, len, host) = rec.live.lock().unwrap()[0];
        assert_eq!((len, host), (2 * 4096, buf.ptr().as_ptr() as usize));
        assert_eq!(m.iova().0, iova + 100);
        drop(m);
        assert!(rec.live.lock().unwrap().is_empty());
    }

    #[test]
    fn zero_length_or_wrapping_requests_are_refused() {
        let (s, _) = space(&crate::iova::tests::qemu_ranges());
        assert!(matches!(s.alloc(0), Err(Error::DmaRequest { len: 0 })));
        let p = NonNull::new(usize::MAX as *mut u8).unwrap();
        // SAFETY: refused before anything is mapped.
        let wrapping = unsafe { s.map(p, 16) };
        assert!(matches!(wrapping, Err(Error::DmaRequest { .. })));
        // SAFETY: as above.
        let empty = unsafe { s.map(NonNull::dangling(), 0) };
        assert!(matches!(empty, Err(Error::DmaRequest { .. })));
    }

    #[test]
    fn running_out_of_iova_space_is_an_error_not_an_overlap() {
        let (s, _) = space(&[IovaRange {
            start: 0,
            last: 3 * 4096 - 1,
        }]);
        let _a = s.alloc(2 * 4096).unwrap();
        let e = s.alloc(1).unwrap_err();
        assert!(matches!(e, Error::IovaExhausted { len: 4096 }), "{e:?}");
        assert!(e
            .to_string()
            .starts_with("no IOVA space left for 4096 bytes"));
    }

    #[test]
    fn a_refused_map_returns_the_iova_and_says_how_to_fix_memlock() {
        let (s, rec) = space(&crate::iova::tests::qemu_ranges());
        rec.fail_map
            .store(true, std::sync::atomic::Ordering::SeqCst);
        let e = s.alloc(4096).unwrap_err();
        assert!(e.to_string().contains("raise the memlock limit"), "{e}");
        rec.fail_map
            .store(false, std::sync::atomic::Ordering::SeqCst);
        assert_eq!(s.alloc(4096).unwrap().iova(), Iova(4096), "IOVA given back");
    }

    #[test]
    fn a_failed_unmap_leaks_rather_than_reusing_memory_the_device_may_reach() {
        let (s, rec) = space(&crate::iova::tests::qemu_ranges());
        let d = s.alloc(4096).unwrap();
        let iova = d.iova();
        rec.fail_unmap
            .store(true, std::sync::atomic::Ordering::SeqCst);
        drop(d);
        rec.fail_unmap
            .store(false, std::sync::atomic::Ordering::SeqCst);
        assert_ne!(s.alloc(4096).unwrap().iova(), iova, "the IOVA stays taken");
    }
}
