//! The emulated IOMMU: the only way an emulated device reaches memory.
//!
//! Every mapping joins an IOVA range to host memory, either memory the IOMMU allocated itself
//! ([`EmuDma`], from `Platform::alloc_dma`) or caller memory ([`EmuMapping`], from
//! `Platform::map_dma`). Dropping either unmaps it. A device access that does not lie wholly
//! inside one mapping is refused, recorded as an [`IommuFault`], and the device model does not
//! act on it (as a DMA that QEMU's intel-iommu refuses: the transaction fails).
//!
//! IOVAs are handed out by a bump allocator that never reuses an address and leaves an unmapped
//! guard page between mappings, so a stale IOVA or an access running off the end of a buffer
//! always faults instead of silently reaching a neighbour.
//!
//! The one unsafe act of this module is copying bytes between a device buffer and host memory
//! through a mapping. It rests on one invariant: a mapping is present in the table only while its
//! host memory is valid. `EmuDma` removes its mapping (under the table lock) before freeing, and
//! `map_dma`'s caller promises the same for caller memory; every copy runs under the table lock.

use std::alloc::Layout;
use std::collections::BTreeMap;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use ringfab_hal::{DmaMapping, DmaRegion, Iova};

/// Page size of the emulated IOMMU.
pub const PAGE: u64 = 4096;
/// First IOVA handed out: low addresses stay unmapped so that a zero or small IOVA faults.
pub const IOVA_BASE: u64 = 0x1_0000_0000;

/// A device access the IOMMU refused.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct IommuFault {
    /// First address of the access.
    pub iova: Iova,
    /// Bytes the device tried to access.
    pub len: usize,
    /// `true` for a device write to memory, `false` for a read.
    pub write: bool,
}

/// One device write to memory, as the IOMMU's write log keeps it ([`Iommu::record_writes`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct DmaWrite {
    /// The write's number: writes are numbered 1, 2, … in the order the IOMMU let them
    /// through ([`Iommu::write_seq`] is the number of the last one).
    pub seq: u64,
    /// First address written.
    pub iova: Iova,
    /// Bytes written.
    pub len: usize,
}

/// One mapping: host memory reachable at an IOVA. `host` is a pointer that keeps the provenance
/// of the memory it was made from (a device access goes through it, not through an address made
/// from an integer), so strict-provenance checkers (Miri's `-Zmiri-strict-provenance`) can follow
/// the emulated device's DMA.
#[derive(Clone, Copy, Debug)]
struct Map {
    len: u64,
    host: *mut u8,
}

// SAFETY: `Map` is an entry of the IOMMU's table, only read and written under its lock; `host`
// is an address the device copies to and from under that lock, never dereferenced elsewhere.
unsafe impl Send for Map {}

#[derive(Default)]
struct State {
    maps: BTreeMap<u64, Map>,
    next: u64,
    faults: Vec<IommuFault>,
    /// Device writes let through so far (every one, logged or not).
    writes: u64,
    /// The write log, while recording.
    log: Option<Vec<DmaWrite>>,
}

/// The IOMMU one emulated PCI function sits behind. Cheap to clone; clones share the table.
#[derive(Clone)]
pub struct Iommu {
    state: Arc<Mutex<State>>,
}

impl Default for Iommu {
    fn default() -> Self {
        Iommu::new()
    }
}

impl std::fmt::Debug for Iommu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self.lock();
        f.debug_struct("Iommu")
            .field("mappings", &s.maps.len())
            .field("faults", &s.faults)
            .finish()
    }
}

impl Iommu {
    /// An IOMMU with no mappings.
    pub fn new() -> Iommu {
        Iommu {
            state: Arc::new(Mutex::new(State {
                next: IOVA_BASE,
                ..State::default()
            })),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // The table stays consistent across a panic: each update is a single insert or remove.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Maps `len` bytes of host memory at `host`, returning the IOVA. The IOVA keeps the host
    /// address's offset within its page (as VFIO's page-granular mappings do), but only the exact
    /// bytes given are reachable.
    fn map(&self, host: *mut u8, len: usize) -> Iova {
        let mut s = self.lock();
        let in_page = host.addr() as u64 % PAGE;
        let iova = s.next + in_page;
        let pages = (in_page + len as u64).div_ceil(PAGE);
        // One unmapped guard page after every mapping.
        s.next += (pages + 1) * PAGE;
        s.maps.insert(
            iova,
            Map {
                len: len as u64,
                host,
            },
        );
        Iova(iova)
    }

    fn unmap(&self, iova: Iova) -> bool {
        self.lock().maps.remove(&iova.0).is_some()
    }

    /// Removes the mapping that contains `iova`, as if the platform revoked it, while its memory
    /// stays with its owner (dropping the owner later is harmless). The device faults on it from
    /// now on. Returns whether a mapping was found.
    pub fn revoke(&self, iova: Iova) -> bool {
        let mut s = self.lock();
        let Some((&start, _)) = find(&s.maps, iova.0, 1) else {
            return false;
        };
        s.maps.remove(&start).is_some()
    }

    /// Number of live mappings.
    pub fn mappings(&self) -> usize {
        self.lock().maps.len()
    }

    /// Faults recorded so far, oldest first.
    pub fn faults(&self) -> Vec<IommuFault> {
        self.lock().faults.clone()
    }

    /// The number of device writes the IOMMU has let through so far (the sequence number of the
    /// last one, 0 before any). Taken right after the driver hands a buffer back, it divides
    /// the device's writes into those before and those after.
    pub fn write_seq(&self) -> u64 {
        self.lock().writes
    }

    /// Starts keeping a log of every device write let through from now on (descriptor
    /// write-backs, used-ring entries, frame data — everything), so that a test can ask which
    /// writes landed in a buffer after the driver handed it back
    /// ([`writes_into`](Self::writes_into)). The log grows with every write: record only in
    /// tests that move a bounded amount of data.
    pub fn record_writes(&self) {
        let mut s = self.lock();
        if s.log.is_none() {
            s.log = Some(Vec::new());
        }
    }

    /// The logged device writes numbered after `after` that touched any of the `len` bytes at
    /// `iova`, oldest first (nothing if the log is not being kept).
    pub fn writes_into(&self, iova: Iova, len: usize, after: u64) -> Vec<DmaWrite> {
        let s = self.lock();
        let end = iova.0.saturating_add(len as u64);
        s.log
            .iter()
            .flatten()
            .filter(|w| {
                w.seq > after && w.iova.0 < end && iova.0 < w.iova.0.saturating_add(w.len as u64)
            })
            .copied()
            .collect()
    }

    /// Returns and forgets the faults recorded so far.
    pub fn take_faults(&self) -> Vec<IommuFault> {
        std::mem::take(&mut self.lock().faults)
    }

    /// Device read of `len` bytes at `iova`; `None` (and a recorded fault) if not wholly mapped.
    pub(crate) fn read(&self, iova: u64, len: usize) -> Option<Vec<u8>> {
        let mut s = self.lock();
        let Some(host) = resolve(&s.maps, iova, len) else {
            s.faults.push(IommuFault {
                iova: Iova(iova),
                len,
                write: false,
            });
            return None;
        };
        let mut buf = vec![0u8; len];
        // SAFETY: `resolve` proved `host..host+len` lies inside one live mapping, and a mapping is
        // in the table only while its host memory is valid (module invariant); the table lock is
        // held, so it cannot be unmapped and freed during the copy. `buf` is a fresh allocation.
        unsafe { std::ptr::copy_nonoverlapping(host.cast_const(), buf.as_mut_ptr(), len) };
        Some(buf)
    }

    /// Whether a device access of `len` bytes at `iova` would be allowed, as a device that maps
    /// a buffer before using it asks (QEMU's `dma_memory_map`); records a fault if not.
    pub(crate) fn check(&self, iova: u64, len: usize, write: bool) -> bool {
        let mut s = self.lock();
        if resolve(&s.maps, iova, len).is_some() {
            return true;
        }
        s.faults.push(IommuFault {
            iova: Iova(iova),
            len,
            write,
        });
        false
    }

    /// Device write of `data` at `iova`; `false` (and a recorded fault) if not wholly mapped.
    pub(crate) fn write(&self, iova: u64, data: &[u8]) -> bool {
        let mut s = self.lock();
        let Some(host) = resolve(&s.maps, iova, data.len()) else {
            s.faults.push(IommuFault {
                iova: Iova(iova),
                len: data.len(),
                write: true,
            });
            return false;
        };
        // SAFETY: as in `read`: the destination lies inside one live mapping whose memory stays
        // valid while the lock is held. The driver reaches that memory only through raw
        // pointers (hal decision 5), so no Rust reference is invalidated by this write.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), host, data.len()) };
        s.writes += 1;
        let seq = s.writes;
        if let Some(log) = &mut s.log {
            log.push(DmaWrite {
                seq,
                iova: Iova(iova),
                len: data.len(),
            });
        }
        true
    }
}

fn find(maps: &BTreeMap<u64, Map>, iova: u64, len: usize) -> Option<(&u64, &Map)> {
    let (start, m) = maps.range(..=iova).next_back()?;
    let end = iova.checked_add(len as u64)?;
    (end <= start + m.len).then_some((start, m))
}

fn resolve(maps: &BTreeMap<u64, Map>, iova: u64, len: usize) -> Option<*mut u8> {
    if len == 0 {
        return None;
    }
    let (start, m) = find(maps, iova, len)?;
    // Inside the mapping (`find` checked the end): an offset from the mapped pointer.
    Some(m.host.wrapping_add((iova - start) as usize))
}

/// DMA-coherent memory from the emulated platform: zeroed, 4096-aligned host memory mapped at an
/// IOVA. Unmapped, then freed, on drop.
pub struct EmuDma {
    cpu: NonNull<u8>,
    layout: Layout,
    iova: Iova,
    iommu: Iommu,
}

// SAFETY: `EmuDma` owns its allocation exclusively; the raw pointer is only an address that the
// owner and the IOMMU (under its lock) use. Moving it to another thread moves that ownership.
unsafe impl Send for EmuDma {}

impl EmuDma {
    /// Allocates `len` bytes rounded up to whole pages; `None` if the allocation fails or `len`
    /// is zero.
    pub(crate) fn alloc(iommu: &Iommu, len: usize) -> Option<EmuDma> {
        let size = len.checked_next_multiple_of(PAGE as usize)?;
        if size == 0 {
            return None;
        }
        let layout = Layout::from_size_align(size, PAGE as usize).ok()?;
        // SAFETY: `layout` has a non-zero size (checked above).
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        let cpu = NonNull::new(ptr)?;
        let iova = iommu.map(cpu.as_ptr(), size);
        Some(EmuDma {
            cpu,
            layout,
            iova,
            iommu: iommu.clone(),
        })
    }
}

impl Drop for EmuDma {
    fn drop(&mut self) {
        // Unmap first, under the IOMMU lock: from here on the device cannot reach the memory.
        self.iommu.unmap(self.iova);
        // SAFETY: `cpu` came from `alloc_zeroed(self.layout)` and is freed exactly once, here, after
        // the mapping is gone (a revoked mapping was already gone).
        unsafe { std::alloc::dealloc(self.cpu.as_ptr(), self.layout) };
    }
}

// SAFETY: `cpu()..cpu()+len()` is a live, zero-initialised allocation aligned to 4096 bytes that
// this value owns alone until drop; the device reaches it only at `iova()` through the IOMMU (the
// guard pages make other IOVAs fault), and allocations never overlap.
unsafe impl DmaRegion for EmuDma {
    fn cpu(&self) -> NonNull<u8> {
        self.cpu
    }
    fn iova(&self) -> Iova {
        self.iova
    }
    fn len(&self) -> usize {
        self.layout.size()
    }
}

impl std::fmt::Debug for EmuDma {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "EmuDma({}, {} bytes)", self.iova, self.layout.size())
    }
}

/// Caller memory mapped for the emulated device; unmapped on drop.
#[derive(Debug)]
pub struct EmuMapping {
    iova: Iova,
    len: usize,
    iommu: Iommu,
}

impl EmuMapping {
    pub(crate) fn new(iommu: &Iommu, host: *mut u8, len: usize) -> EmuMapping {
        EmuMapping {
            iova: iommu.map(host, len),
            len,
            iommu: iommu.clone(),
        }
    }
}

impl Drop for EmuMapping {
    fn drop(&mut self) {
        self.iommu.unmap(self.iova);
    }
}

impl DmaMapping for EmuMapping {
    fn iova(&self) -> Iova {
        self.iova
    }
    fn len(&self) -> usize {
        self.len
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mapped_access_reaches_the_memory() {
        let mmu = Iommu::new();
        let dma = EmuDma::alloc(&mmu, 100).unwrap();
        assert_eq!(dma.len(), 4096);
        assert_eq!(dma.cpu().as_ptr() as usize % 4096, 0);
        assert!(mmu.write(dma.iova().0 + 8, &[1, 2, 3, 4]));
        assert_eq!(dma.read_u32(8), u32::from_le_bytes([1, 2, 3, 4]));
        dma.write_u32(4096 - 4, 0xdead_beef);
        assert_eq!(
            mmu.read(dma.iova().0 + 4092, 4).unwrap(),
            0xdead_beef_u32.to_le_bytes()
        );
        assert!(mmu.faults().is_empty());
    }

    #[test]
    fn unmapped_access_is_recorded_as_a_fault() {
        let mmu = Iommu::new();
        let dma = EmuDma::alloc(&mmu, 4096).unwrap();
        // One byte past the end lands in the guard page.
        assert!(mmu.read(dma.iova().0 + 4093, 4).is_none());
        assert!(!mmu.write(0, &[0]));
        assert_eq!(
            mmu.faults(),
            vec![
                IommuFault {
                    iova: Iova(dma.iova().0 + 4093),
                    len: 4,
                    write: false
                },
                IommuFault {
                    iova: Iova(0),
                    len: 1,
                    write: true
                },
            ]
        );
    }

    #[test]
    fn dropping_a_region_unmaps_it() {
        let mmu = Iommu::new();
        let dma = EmuDma::alloc(&mmu, 4096).unwrap();
        let iova = dma.iova().0;
        drop(dma);
        assert_eq!(mmu.mappings(), 0);
        assert!(mmu.read(iova, 4).is_none());
        assert_eq!(mmu.take_faults().len(), 1);
    }

    #[test]
    fn caller_mapping_keeps_page_offset_and_exact_bounds() {
        let mmu = Iommu::new();
        let mut buf = vec![0u8; 64];
        let host = buf.as_mut_ptr();
        let m = EmuMapping::new(&mmu, host.wrapping_add(3), 10);
        assert_eq!(m.iova().0 % PAGE, (host.addr() as u64 + 3) % PAGE);
        assert!(mmu.write(m.iova().0, &[7; 10]));
        assert!(!mmu.write(m.iova().0, &[7; 11]));
        drop(m);
        assert_eq!(&buf[3..13], &[7; 10]);
        assert_eq!(buf[13], 0);
    }

    #[test]
    fn revoked_mapping_faults_and_later_drop_is_harmless() {
        let mmu = Iommu::new();
        let dma = EmuDma::alloc(&mmu, 8192).unwrap();
        assert!(mmu.revoke(Iova(dma.iova().0 + 5000)));
        assert!(mmu.read(dma.iova().0, 4).is_none());
        drop(dma);
        assert_eq!(mmu.faults().len(), 1);
    }
}
