//! The virtio-net null register file: the modern PCI transport (virtio 1.2 §4.1) with the
//! structures where QEMU's `virtio-net-pci` puts them in BAR 4 — common configuration at
//! 0x0000, device configuration at 0x2000, notifications at 0x3000 (`notify_off_multiplier` 4,
//! `queue_notify_off` = queue index) — one queue pair and no control queue.
//!
//! Features offered: `VERSION_1`, `ACCESS_PLATFORM`, `INDIRECT_DESC`, `RING_RESET` (what the
//! driver requires), `MAC` and `EVENT_IDX` (as QEMU, so that the driver's notification
//! suppression runs as it does there). Without `CTRL_VQ` the driver sends no control command,
//! so the device never has to read a descriptor.
//!
//! A notification of queue `q` completes every entry of its available ring since the last
//! one, in ring order, by writing the entry's id to the used ring (§2.7.8) — the driver finds
//! its buffer by that id, as it must for any virtio device. Receive buffers report the 12-byte
//! network header plus a [`RX_FRAME_LEN`]-byte frame (the header is left as the driver's memory
//! holds it, zero); transmit buffers report length 0. With `EVENT_IDX` negotiated the device
//! then sets `avail_event` to the new available index, so the driver notifies at its next
//! doorbell (§2.7.10).

use std::sync::atomic::{fence, AtomicU32, Ordering};
use std::sync::Arc;

use ringfab_hal::Mmio;

use super::{DmaTable, NullKind, RX_FRAME_LEN};
use crate::virtio::{DEVICE_VIRTIO_NET, MODERN_BAR, MODERN_BAR_LEN, QUEUE_SIZE, VENDOR_VIRTIO};
use crate::VirtioNetPci;

/// Where the structures are in the BAR, and each one's length.
const COMMON_AT: usize = 0x0000;
const DEVICE_AT: usize = 0x2000;
const NOTIFY_AT: usize = 0x3000;
const REGION_LEN: u32 = 0x1000;
/// `notify_off_multiplier`: queue `q`'s doorbell is at `NOTIFY_AT + 4 q`.
const NOTIFY_MULT: usize = 4;

/// `struct virtio_pci_common_cfg` dwords (§4.1.4.3): the device-wide ones, then the ones that
/// `queue_select` banks (from `queue_size` to `queue_reset`).
const DFSELECT: usize = 0x00;
const DF: usize = 0x04;
const GFSELECT: usize = 0x08;
const GF: usize = 0x0c;
/// `config_msix_vector` (low half), `num_queues` (high half, read-only).
const MSIX_NUMQ: usize = 0x10;
/// `device_status` (byte 0), `config_generation` (byte 1), `queue_select` (high half).
const STATUS_QSEL: usize = 0x14;
const QUEUE_FIRST: usize = 0x18;
/// `queue_enable` (low half), `queue_notify_off` (high half, read-only).
const QUEUE_ENABLE: usize = 0x1c;
// queue_desc (0x20) is not needed: the device never reads a descriptor.
const QUEUE_DRIVER: usize = 0x28;
const QUEUE_DEVICE: usize = 0x30;
/// `queue_notify_config_data` (low half), `queue_reset` (high half).
const QUEUE_RESET: usize = 0x38;
const COMMON_LEN: usize = 0x3c;
const QUEUE_DWORDS: usize = (COMMON_LEN - QUEUE_FIRST) / 4;

/// Virtqueues: receive 0 and transmit 1 of the one queue pair.
const QUEUES: usize = 2;
/// The 12-byte `virtio_net_hdr` of virtio 1.x (§5.1.6).
const NET_HDR_LEN: u32 = 12;
/// `VIRTIO_RING_F_EVENT_IDX` (§6), bit 29 of the first feature word.
const EVENT_IDX: u32 = 1 << 29;
/// Offered feature words: MAC (5), INDIRECT_DESC (28), EVENT_IDX (29); VERSION_1 (32),
/// ACCESS_PLATFORM (33), RING_RESET (40).
const FEATURES: [u32; 2] = [1 << 5 | 1 << 28 | EVENT_IDX, 1 | 1 << 1 | 1 << 8];
/// The device's MAC address (device configuration bytes 0–5, §5.1.4).
const MAC: [u8; 6] = [0x52, 0x54, 0x00, 0x00, 0x00, 0x01];

impl NullKind for VirtioNetPci {
    type Mmio = NullVirtioRegs;
    const BAR: u8 = MODERN_BAR;
    fn regs(dma: Arc<DmaTable>) -> Self::Mmio {
        let regs = NullVirtioRegs {
            file: Arc::new(VirtioFile {
                dma,
                common: Default::default(),
                guest_features: Default::default(),
                queues: Default::default(),
            }),
        };
        regs.reset();
        regs
    }

    /// Vendor and device id, a capability list (§4.1.4: common, notify, device structures in
    /// BAR 4) and zeros.
    fn config_read32(offset: u16) -> u32 {
        let bar = u32::from(MODERN_BAR);
        // A vendor capability's first dword: id 0x09, next, length, cfg_type.
        let cap =
            |next: u32, len: u32, cfg_type: u32| 0x09 | next << 8 | len << 16 | cfg_type << 24;
        match offset {
            0x00 => u32::from(DEVICE_VIRTIO_NET) << 16 | u32::from(VENDOR_VIRTIO),
            0x04 => 1 << 20, // status: capabilities list
            0x34 => 0x40,
            0x40 => cap(0x50, 16, 1), // common configuration
            0x44 => bar,
            0x48 => COMMON_AT as u32,
            0x4c => REGION_LEN,
            0x50 => cap(0x64, 20, 2), // notifications
            0x54 => bar,
            0x58 => NOTIFY_AT as u32,
            0x5c => REGION_LEN,
            0x60 => NOTIFY_MULT as u32,
            0x64 => cap(0, 16, 4), // device configuration
            0x68 => bar,
            0x6c => DEVICE_AT as u32,
            0x70 => REGION_LEN,
            _ => 0,
        }
    }
}

/// One virtqueue's state: its banked common-configuration dwords and the next available index
/// to complete.
#[derive(Default)]
struct Queue {
    regs: [AtomicU32; QUEUE_DWORDS],
    next: AtomicU32,
}

/// A virtio-net null device's register file (BAR 4), shared by its handles (the platform's
/// and the driver's); its notifications complete buffers.
#[derive(Clone)]
pub struct NullVirtioRegs {
    file: Arc<VirtioFile>,
}

/// What the handles of one [`NullVirtioRegs`] share.
struct VirtioFile {
    /// Where the virtqueues the driver programs are.
    dma: Arc<DmaTable>,
    /// Common configuration dwords 0x00–0x14.
    common: [AtomicU32; QUEUE_FIRST / 4],
    /// The driver's feature words, by `driver_feature_select`.
    guest_features: [AtomicU32; 2],
    queues: [Queue; QUEUES],
}

impl NullVirtioRegs {
    #[inline]
    fn word(&self, offset: usize) -> u32 {
        self.file.common[offset / 4].load(Ordering::Relaxed)
    }

    /// The queue `queue_select` names, if any.
    fn selected(&self) -> Option<&Queue> {
        self.file
            .queues
            .get((self.word(STATUS_QSEL) >> 16) as usize)
    }

    /// Device reset (status 0, §4.1.4.3.1): every queue reset.
    fn reset(&self) {
        for q in &self.file.queues {
            Self::reset_queue(q);
        }
        for w in &self.file.guest_features {
            w.store(0, Ordering::Relaxed);
        }
    }

    /// Queue reset (§2.6.1): disabled, size back to the maximum, indices back to 0.
    fn reset_queue(q: &Queue) {
        for w in &q.regs {
            w.store(0, Ordering::Relaxed);
        }
        q.regs[0].store(0xffff << 16 | u32::from(QUEUE_SIZE), Ordering::Relaxed);
        q.next.store(0, Ordering::Relaxed);
    }

    /// Completes transmit buffers of virtqueue `vq` (the device's cost, for the profiler).
    #[inline(never)]
    pub fn complete_tx(&self, vq: usize) {
        self.complete(vq, 0);
    }

    /// Completes receive buffers of virtqueue `vq` (the device's cost, for the profiler).
    #[inline(never)]
    pub fn complete_rx(&self, vq: usize) {
        self.complete(vq, NET_HDR_LEN + RX_FRAME_LEN);
    }

    /// Uses every buffer made available on `vq` since the last call, with length `len`.
    #[inline(always)]
    fn complete(&self, vq: usize, len: u32) {
        let q = &self.file.queues[vq];
        let reg = |off: usize| q.regs[(off - QUEUE_FIRST) / 4].load(Ordering::Relaxed);
        let addr = |off: usize| u64::from(reg(off + 4)) << 32 | u64::from(reg(off));
        let n = (reg(QUEUE_FIRST) & 0xffff).max(1) as usize;
        if reg(QUEUE_ENABLE) & 0xffff == 0 {
            return;
        }
        // §2.7: the driver area is flags, idx, ring[n], used_event; the device area flags, idx,
        // ring[n] of 8 bytes, avail_event. Areas outside the platform's DMA memory are not the
        // device's to touch.
        let (Some(avail), Some(used)) = (
            self.file.dma.find(addr(QUEUE_DRIVER), 6 + 2 * n),
            self.file.dma.find(addr(QUEUE_DEVICE), 6 + 8 * n),
        ) else {
            return;
        };
        let (avail, used) = (avail.as_ptr(), used.as_ptr());
        let mut i = q.next.load(Ordering::Relaxed) as u16;
        // SAFETY: `avail` and `used` are the driver and device areas of a virtqueue of `n`
        // entries, each found whole inside one live allocation of this platform; every offset
        // below is inside them (see above) and aligned (the areas are 2- and 4-aligned, §2.7).
        unsafe {
            let avail_idx = avail.add(2).cast::<u16>().read_volatile();
            // The ring entries after the index that covers them (§2.7.13.3, device side).
            fence(Ordering::Acquire);
            while i != avail_idx {
                let slot = usize::from(i) % n;
                let id = avail.add(4 + 2 * slot).cast::<u16>().read_volatile();
                let elem = used.add(4 + 8 * slot).cast::<u32>();
                elem.write_volatile(u32::from(id));
                elem.add(1).write_volatile(len);
                i = i.wrapping_add(1);
            }
            // The elements before the index the driver reads them by (§2.7.8).
            fence(Ordering::Release);
            used.add(2).cast::<u16>().write_volatile(i);
            if self.file.guest_features[0].load(Ordering::Relaxed) & EVENT_IDX != 0 {
                used.add(4 + 8 * n).cast::<u16>().write_volatile(i);
            }
        }
        q.next.store(u32::from(i), Ordering::Relaxed);
    }
}

impl Mmio for NullVirtioRegs {
    fn read32(&self, offset: usize) -> u32 {
        if offset % 4 != 0 || offset >= MODERN_BAR_LEN {
            return u32::MAX;
        }
        match offset {
            DF => {
                let sel = self.word(DFSELECT) as usize;
                FEATURES.get(sel).copied().unwrap_or(0)
            }
            GF => {
                let sel = self.word(GFSELECT) as usize;
                self.file
                    .guest_features
                    .get(sel)
                    .map_or(0, |w| w.load(Ordering::Relaxed))
            }
            MSIX_NUMQ => self.word(MSIX_NUMQ) & 0xffff | (QUEUES as u32) << 16,
            0..QUEUE_FIRST => self.word(offset),
            QUEUE_FIRST..COMMON_LEN => {
                let Some(q) = self.selected() else { return 0 };
                let v = q.regs[(offset - QUEUE_FIRST) / 4].load(Ordering::Relaxed);
                match offset {
                    // queue_notify_off: the queue's index.
                    QUEUE_ENABLE => v & 0xffff | (self.word(STATUS_QSEL) >> 16) << 16,
                    // A queue reset completes at once: queue_reset reads 0.
                    QUEUE_RESET => v & 0xffff,
                    _ => v,
                }
            }
            DEVICE_AT => u32::from_le_bytes([MAC[0], MAC[1], MAC[2], MAC[3]]),
            o if o == DEVICE_AT + 4 => u32::from_le_bytes([MAC[4], MAC[5], 0, 0]),
            _ => 0,
        }
    }

    fn write32(&self, offset: usize, value: u32) {
        if offset % 4 != 0 || offset >= MODERN_BAR_LEN {
            return;
        }
        match offset {
            DFSELECT | GFSELECT | MSIX_NUMQ => {
                self.file.common[offset / 4].store(value, Ordering::Relaxed);
            }
            GF => {
                let sel = self.word(GFSELECT) as usize;
                if let Some(w) = self.file.guest_features.get(sel) {
                    w.store(value, Ordering::Relaxed);
                }
            }
            STATUS_QSEL => {
                let old = self.file.common[STATUS_QSEL / 4].swap(value, Ordering::Relaxed);
                if value & 0xff == 0 && old & 0xff != 0 {
                    self.reset();
                }
            }
            QUEUE_FIRST..COMMON_LEN => {
                let Some(q) = self.selected() else { return };
                if offset == QUEUE_RESET && value >> 16 == 1 {
                    NullVirtioRegs::reset_queue(q);
                } else {
                    q.regs[(offset - QUEUE_FIRST) / 4].store(value, Ordering::Relaxed);
                }
            }
            _ => {}
        }
    }

    /// 16-bit writes: a notification (§4.1.5.2: the queue index written to the queue's
    /// doorbell) completes that queue's buffers; anything else is a read-modify-write of the
    /// containing dword, as [`Mmio`]'s provided method does.
    #[inline]
    fn write16(&self, offset: usize, value: u16) {
        if (NOTIFY_AT..NOTIFY_AT + NOTIFY_MULT * QUEUES).contains(&offset) {
            match usize::from(value) {
                0 => self.complete_rx(0),
                1 => self.complete_tx(1),
                _ => {}
            }
            return;
        }
        if offset % 2 != 0 {
            return;
        }
        let shift = (offset & 2) * 8;
        let old = self.read32(offset & !3) & !(0xffff << shift);
        self.write32(offset & !3, old | u32::from(value) << shift);
    }

    fn len(&self) -> usize {
        MODERN_BAR_LEN
    }
}
