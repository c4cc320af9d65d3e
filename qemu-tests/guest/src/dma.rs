//! The two DMA paths of `ringfab-vfio` besides plain page-sized allocations: caller memory
//! mapped for the device (the basis of memory registration), and 2 MiB huge pages.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::ptr::NonNull;

use ringfab_hal::{DmaMapping, DmaRegion, Iova, Queue};
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

/// The guest-physical page frame of each of `pages` virtual pages from `base`
/// (`/proc/self/pagemap`: 8 bytes per page, bit 63 present, bits 0–54 the frame; root sees
/// frames). The pages must be resident (VFIO pins mapped pages).
fn page_frames(base: NonNull<u8>, pages: usize) -> Result<Vec<u64>, String> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = std::fs::File::open("/proc/self/pagemap").map_err(|e| format!("pagemap: {e}"))?;
    f.seek(SeekFrom::Start((base.as_ptr() as u64 / 4096) * 8))
        .map_err(|e| format!("pagemap: {e}"))?;
    let mut raw = vec![0u8; pages * 8];
    f.read_exact(&mut raw)
        .map_err(|e| format!("pagemap: {e}"))?;
    raw.chunks(8)
        .map(|c| {
            let v = u64::from_le_bytes(c.try_into().expect("8 bytes"));
            (v >> 63 == 1)
                .then_some(v & ((1 << 55) - 1))
                .ok_or_else(|| "a mapped page is not resident".to_owned())
        })
        .collect()
}

/// What QEMU's igb does with a transmit buffer that crosses a 4 KiB page boundary, through the
/// vIOMMU: `net_tx_pkt_add_raw_fragment_pci` maps the buffer with `pci_dma_map`, and
/// `address_space_map` extends a mapping across an IOMMU page only while the guest-physical
/// addresses stay contiguous. Inside a huge page (physically contiguous) a crossing frame goes
/// out; across two pages that are not contiguous the map comes back short, the frame is
/// dropped without a trace, and the descriptor is still written back with DD and no error. A
/// real 82576 reads the buffer page by page and has no such limit. The test asserts both: a
/// crossing inside a 2 MiB huge page, and one between two heap pages whose frames
/// (`/proc/self/pagemap`) are not adjacent.
pub(crate) fn tx_page_crossing(ctx: &mut Ctx) -> Outcome {
    let (a, b) = ctx.nics()?;
    let c = page_crossing_on(a, b, a.platform(), b.platform())?;
    if c.in_huge != (true, true) {
        return Err(format!(
            "inside a huge page: (token Ok, received) = {:?}, expected (true, true)",
            c.in_huge
        ));
    }
    if c.across != (true, false) {
        return Err(format!(
            "across frames {:#x}|{:#x}: (token Ok, received) = {:?}, expected QEMU's \
             (true, false)",
            c.frames.0, c.frames.1, c.across
        ));
    }
    Ok(format!(
        "a 200-byte transmit buffer crossing a 4 KiB boundary inside a huge page is sent; \
         across heap pages at frames {:#x}|{:#x} (not adjacent) the token comes back Ok and the \
         frame is never sent, as QEMU's pci_dma_map path does",
        c.frames.0, c.frames.1
    ))
}

/// What [`page_crossing_on`] saw: (token `Ok`, received intact) for the crossing inside a huge
/// page and for the one between two scattered heap pages, and those pages' frames.
pub(crate) struct Crossing {
    pub(crate) in_huge: (bool, bool),
    pub(crate) across: (bool, bool),
    pub(crate) frames: (u64, u64),
}

/// Sends from `a` (on platform `pa`) to `b` (on `pb`) a 200-byte frame crossing a 4 KiB
/// boundary inside a huge page, then one crossing between two heap pages that are not
/// adjacent in guest memory, and reports what happened to each.
pub(crate) fn page_crossing_on<N: ringfab_hal::Nic>(
    a: &N,
    b: &N,
    pa: &VfioPlatform,
    pb: &VfioPlatform,
) -> Result<Crossing, String> {
    use ringfab_hal::{Report, RxBuffer, RxConfig, RxQueue, Token, TxConfig, TxQueue};
    use ringfab_hal::{RxCompletion, TxCompletion, TxSegment};
    const PAGES: usize = 32;
    const HUGE: usize = 2 << 20;
    let err = |e: ringfab_hal::Error| e.to_string();

    // Heap pages, resident and mapped; find two neighbours that are not adjacent in memory.
    let memory = PageMemory::new(PAGES * 4096)?;
    for p in 0..PAGES {
        // SAFETY: inside the allocation; nothing is mapped yet, so no device writes it.
        unsafe { memory.ptr.as_ptr().add(p * 4096).write_volatile(1) };
    }
    // SAFETY: `memory` outlives the mapping (dropped after it, declared before), and is only
    // reached through raw pointers while mapped.
    let mapping = unsafe { pa.map_memory(memory.ptr, PAGES * 4096) }.map_err(|e| e.to_string())?;
    let frames = page_frames(memory.ptr, PAGES)?;
    let scattered = (0..PAGES - 1)
        .find(|&p| frames[p + 1] != frames[p] + 1)
        .ok_or("32 heap pages, all physically contiguous: no boundary to test")?;
    // A huge page: physically contiguous by construction.
    std::fs::write("/proc/sys/vm/nr_hugepages", "4")
        .map_err(|e| format!("reserving huge pages: {e}"))?;
    let huge = pa.alloc_dma_region(HUGE).map_err(|e| e.to_string())?;

    let mut tx = a.open_tx::<DEPTH>(0, TxConfig::default()).map_err(err)?;
    let mut rx = b
        .open_rx::<DEPTH>(0, RxConfig::new(BUF as u32))
        .map_err(err)?;
    let rx_mem = pb.alloc_dma_region(8 * BUF).map_err(|e| e.to_string())?;
    for t in 0..8u64 {
        let buf = RxBuffer {
            iova: Iova(rx_mem.iova().0 + t * BUF as u64),
            len: BUF as u32,
        };
        rx.push(buf, Token(t)).map_err(|e| e.to_string())?;
    }
    rx.doorbell();
    let (src, dst) = (a.capabilities().mac, b.capabilities().mac);
    // Sends a 200-byte frame written at `cpu`, reached by the device at `iova`; returns whether
    // its token came back Ok and whether B received it intact.
    let mut seq = 0u64;
    let mut send = |cpu: *mut u8, iova: u64| -> Result<(bool, bool), String> {
        seq += 1;
        let f = crate::frames::frame(dst, src, seq, 200);
        // SAFETY: `cpu..cpu+200` is inside memory mapped for A (the callers' offsets); the
        // source is a separate Rust vector.
        unsafe { std::ptr::copy_nonoverlapping(f.as_ptr(), cpu, f.len()) };
        let seg = TxSegment {
            iova: Iova(iova),
            len: f.len() as u16,
        };
        tx.push(&[seg], Token(seq), Report::Always)
            .map_err(|e| e.to_string())?;
        tx.doorbell();
        let mut out_tx = [TxCompletion {
            token: Token(0),
            status: Ok(()),
        }; 2];
        let mut out_rx = [crate::nic::NO_RX; 2];
        let (mut sent_ok, mut got) = (None, None::<RxCompletion>);
        let start = std::time::Instant::now();
        while start.elapsed() < std::time::Duration::from_millis(500) {
            if sent_ok.is_none() && tx.poll(&mut out_tx) > 0 {
                sent_ok = Some(out_tx[0].status.is_ok());
            }
            // virtio-net may write the receive side's used entry before the transmit side's
            // (QEMU delivers through the hub before it returns the transmit buffer): wait
            // for both.
            if got.is_none() && rx.poll(&mut out_rx) > 0 {
                got = Some(out_rx[0]);
            }
            if got.is_some() && sent_ok.is_some() {
                break;
            }
        }
        let received = match got {
            Some(c) => {
                let slot = c.token.0 as usize;
                let mut v = vec![0; c.len as usize];
                rx_mem.read_bytes(slot * BUF, &mut v);
                let again = RxBuffer {
                    iova: Iova(rx_mem.iova().0 + (slot * BUF) as u64),
                    len: BUF as u32,
                };
                rx.push(again, Token(c.token.0))
                    .map_err(|e| e.to_string())?;
                rx.doorbell();
                v == f
            }
            None => false,
        };
        Ok((sent_ok == Some(true), received))
    };
    // 100 bytes before the end of the first 4 KiB page of the huge page.
    let at = 4096 - 100;
    // SAFETY: `at + 200` is far inside the 2 MiB region.
    let in_huge = send(
        unsafe { huge.cpu().as_ptr().add(at) },
        huge.iova().0 + at as u64,
    )?;
    let at = (scattered + 1) * 4096 - 100;
    // SAFETY: `at + 200` is inside the `PAGES` pages of `memory` (scattered < PAGES - 1).
    let across = send(
        unsafe { memory.ptr.as_ptr().add(at) },
        mapping.iova().0 + at as u64,
    )?;
    drop((tx, rx, mapping));
    Ok(Crossing {
        in_huge,
        across,
        frames: (frames[scattered], frames[scattered + 1]),
    })
}
