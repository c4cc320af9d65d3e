//! The two DMA paths of `ringfab-vfio` besides plain page-sized allocations: caller memory
//! mapped for the device (the basis of memory registration), and 2 MiB huge pages.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::ptr::NonNull;

use ringfab_hal::{DmaMapping, DmaRegion, Iova};
use ringfab_vfio::{VfioMapping, VfioPlatform};

use crate::guest::{Ctx, Outcome};
use crate::nic::{exchange_in, varied, Slots, BUF, DEPTH};

/// Page-aligned, zeroed heap memory that only raw pointers touch (the device may write it
/// while it is mapped, so no Rust reference into it is ever made).
struct PageMemory {
    ptr: NonNull<u8>,
    layout: Layout,
}

impl PageMemory {
    fn new(len: usize) -> Result<PageMemory, String> {
        let layout = Layout::from_size_align(len, 4096).map_err(|e| e.to_string())?;
        // SAFETY: the layout's size is not zero (callers ask for whole slots).
        let ptr = unsafe { alloc_zeroed(layout) };
        let ptr = NonNull::new(ptr).ok_or_else(|| format!("allocating {len} bytes"))?;
        Ok(PageMemory { ptr, layout })
    }
}

impl Drop for PageMemory {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout, freed once; the mappings of it were
        // dropped before (they borrow it, see `Mapped`).
        unsafe { dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

/// [`DEPTH`] slots of caller memory, starting `offset` bytes into a [`PageMemory`], mapped for
/// one NIC's device.
struct Mapped<'m> {
    base: NonNull<u8>,
    mapping: VfioMapping,
    _memory: &'m PageMemory,
}

impl<'m> Mapped<'m> {
    fn new(p: &VfioPlatform, memory: &'m PageMemory, offset: usize) -> Result<Self, String> {
        let len = DEPTH * BUF;
        if offset + len > memory.layout.size() {
            return Err("the slots do not fit the memory".into());
        }
        // SAFETY: in bounds, checked above.
        let base = unsafe { NonNull::new_unchecked(memory.ptr.as_ptr().add(offset)) };
        // SAFETY: the memory outlives the mapping (the borrow `'m`), and it is only reached
        // through raw pointers while mapped.
        let mapping = unsafe { p.map_memory(base, len) }.map_err(|e| e.to_string())?;
        Ok(Mapped {
            base,
            mapping,
            _memory: memory,
        })
    }
}

impl Slots for Mapped<'_> {
    fn slot_iova(&self, slot: usize) -> Iova {
        Iova(self.mapping.iova().0 + (slot * BUF) as u64)
    }
    fn put(&self, slot: usize, bytes: &[u8]) {
        assert!(
            slot < DEPTH && bytes.len() <= BUF,
            "slot {slot} / {} bytes",
            bytes.len()
        );
        // SAFETY: inside the slots (asserted); the source is a separate Rust slice.
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                self.base.as_ptr().add(slot * BUF),
                bytes.len(),
            )
        }
    }
    fn get(&self, slot: usize, len: usize) -> Vec<u8> {
        assert!(slot < DEPTH && len <= BUF, "slot {slot} / {len} bytes");
        let mut v = vec![0; len];
        // SAFETY: inside the slots (asserted); the destination is a separate Rust vector.
        unsafe {
            std::ptr::copy_nonoverlapping(self.base.as_ptr().add(slot * BUF), v.as_mut_ptr(), len)
        }
        v
    }
}

/// Frames sent from caller memory mapped on A and received into caller memory mapped on B,
/// both starting at an offset inside a page: the IOVA of a mapping names the exact byte.
pub(crate) fn caller_memory(ctx: &mut Ctx) -> Outcome {
    let (a, b) = ctx.nics()?;
    const TX_OFFSET: usize = 0x123;
    const RX_OFFSET: usize = 0x800;
    let tx_memory = PageMemory::new(DEPTH * BUF + 4096)?;
    let rx_memory = PageMemory::new(DEPTH * BUF + 4096)?;
    let tx = Mapped::new(a.platform(), &tx_memory, TX_OFFSET)?;
    let rx = Mapped::new(b.platform(), &rx_memory, RX_OFFSET)?;
    let (ti, ri) = (tx.mapping.iova().0, rx.mapping.iova().0);
    if ti % 4096 != TX_OFFSET as u64 || ri % 4096 != RX_OFFSET as u64 {
        return Err(format!(
            "mapping IOVAs {ti:#x} / {ri:#x} lost the offset in the page"
        ));
    }
    let x = exchange_in(a, b, 2 * DEPTH, varied, true, &tx, &rx)?;
    Ok(format!(
        "{} frames from heap memory mapped at IOVA {ti:#x} (A) into heap memory mapped at \
         {ri:#x} (B): intact",
        x.frames
    ))
}

/// The huge pages free, from /proc/meminfo.
fn huge_pages_free() -> Result<u64, String> {
    let m = std::fs::read_to_string("/proc/meminfo").map_err(|e| format!("/proc/meminfo: {e}"))?;
    m.lines()
        .find_map(|l| l.strip_prefix("HugePages_Free:")?.trim().parse().ok())
        .ok_or_else(|| "no HugePages_Free in /proc/meminfo".into())
}

/// With huge pages reserved, a 2 MiB allocation takes one (per NIC), gets a 2 MiB-aligned
/// IOVA, and carries frames.
pub(crate) fn huge_pages(ctx: &mut Ctx) -> Outcome {
    let (a, b) = ctx.nics()?;
    const HUGE: usize = 2 << 20;
    std::fs::write("/proc/sys/vm/nr_hugepages", "4")
        .map_err(|e| format!("reserving huge pages: {e}"))?;
    let before = huge_pages_free()?;
    if before < 2 {
        return Err(format!("only {before} huge pages could be reserved"));
    }
    let tx = a
        .platform()
        .alloc_dma_region(HUGE)
        .map_err(|e| e.to_string())?;
    let rx = b
        .platform()
        .alloc_dma_region(HUGE)
        .map_err(|e| e.to_string())?;
    let after = huge_pages_free()?;
    if before - after != 2 {
        return Err(format!(
            "huge pages free {before} -> {after}: not backed by huge pages"
        ));
    }
    for (side, m) in [("A", &tx), ("B", &rx)] {
        if m.iova().0 % HUGE as u64 != 0 || m.len() != HUGE {
            return Err(format!(
                "{side}: {} bytes at IOVA {:#x}",
                m.len(),
                m.iova().0
            ));
        }
    }
    let x = exchange_in(a, b, 2 * DEPTH, varied, false, &tx, &rx)?;
    let detail = format!(
        "two 2 MiB huge pages (free {before} -> {after}) at IOVAs {:#x} (A) and {:#x} (B) \
         carried {} frames intact",
        tx.iova().0,
        rx.iova().0,
        x.frames
    );
    drop((tx, rx));
    let freed = huge_pages_free()?;
    if freed != before {
        return Err(format!(
            "{detail}; but {freed} free after dropping them, not {before}"
        ));
    }
    Ok(detail)
}
