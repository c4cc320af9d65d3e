//! The Intel null register file, shared by the 82576 (igb) and the 82574 (e1000e): both have
//! per-queue register blocks of the same shape (BAL, BAH, LEN, HEAD, TAIL at 0x00 … 0x18) and
//! 16-byte descriptors whose completion bits sit in the same places, so only the blocks' base,
//! stride and count and the PCI id differ ([`IntelLayout`]).

use std::marker::PhantomData;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use ringfab_hal::{Mmio, RxChecksum};

use super::{DmaTable, NullKind, NullPlatform, RX_FRAME_LEN};
use crate::{E1000e82574, Igb82576};

/// Size of the register BAR (both NICs' BAR 0 is 128 KiB).
const BAR0: usize = 128 * 1024;
const CTRL: usize = 0x0000;
const STATUS: usize = 0x0008;
const MDIC: usize = 0x0020;
/// Receive address 0 (both NICs): the station address the drivers read at bring-up.
const RAL0: usize = 0x5400;
const RAH0: usize = 0x5404;
/// Receive Checksum Control (82576 §8.9.12, 82574 §10.2.5.15; both at 0x5000): IPOFLD (bit
/// 8) and TUOFLD (bit 9) turn the checks on whose results the write-back reports.
const RXCSUM: usize = 0x5000;
const RXCSUM_IPOFLD: u32 = 1 << 8;
const RXCSUM_TUOFLD: u32 = 1 << 9;
/// Receive write-back status bits (82576 §7.1.5.2, 82574 §7.1.4.2, the same places): UDPCS
/// (4), L4I/TCPCS (5: the TCP/UDP checksum was checked) and IPCS (6: the IPv4 header checksum
/// was checked); no error bit with them is "checked and right".
const RX_UDPCS: u64 = 1 << 4;
const RX_L4I: u64 = 1 << 5;
const RX_IPCS: u64 = 1 << 6;
/// The station address RAL0/RAH0 hold at power-on (a locally administered unicast address;
/// the drivers refuse a group or all-zero one).
const MAC: [u8; 6] = [0x52, 0x54, 0x00, 0x00, 0x00, 0x01];
/// Offsets inside one queue's register block.
const BAL: usize = 0x00;
const BAH: usize = 0x04;
const LEN: usize = 0x08;
const HEAD: usize = 0x10;
const TAIL: usize = 0x18;

/// Where an Intel NIC's queue register blocks are.
pub trait IntelLayout: 'static {
    /// First receive queue's block.
    const RXQ: usize;
    /// First transmit queue's block.
    const TXQ: usize;
    /// Distance between two queues' blocks.
    const STRIDE: usize;
    /// Queues per direction.
    const QUEUES: usize;
    /// Configuration space dword 0: device id (high half), vendor id (low half).
    const PCI_ID: u32;
}

/// 82576 datasheet §8.9 (the driver's regs.rs): RX queues 0–15 at 0xC000, TX at 0xE000, 0x40
/// apart.
impl IntelLayout for Igb82576 {
    const RXQ: usize = 0xC000;
    const TXQ: usize = 0xE000;
    const STRIDE: usize = 0x40;
    const QUEUES: usize = 16;
    const PCI_ID: u32 = 0x10c9_8086; // as QEMU's igb
}

/// 82574 datasheet §10.2.5 and §10.2.6: RX queues 0–1 at 0x2800, TX at 0x3800, 0x100 apart.
impl IntelLayout for E1000e82574 {
    const RXQ: usize = 0x2800;
    const TXQ: usize = 0x3800;
    const STRIDE: usize = 0x100;
    const QUEUES: usize = 2;
    const PCI_ID: u32 = 0x10d3_8086; // 82574L, as QEMU's e1000e
}

impl NullKind for Igb82576 {
    type Mmio = NullRegs<Igb82576>;
    const BAR: u8 = 0;
    fn regs(dma: Arc<DmaTable>) -> Self::Mmio {
        NullRegs::new(dma)
    }
    fn config_read32(offset: u16) -> u32 {
        id_only::<Self>(offset)
    }
}

impl NullKind for E1000e82574 {
    type Mmio = NullRegs<E1000e82574>;
    const BAR: u8 = 0;
    fn regs(dma: Arc<DmaTable>) -> Self::Mmio {
        NullRegs::new(dma)
    }
    fn config_read32(offset: u16) -> u32 {
        id_only::<Self>(offset)
    }
}

impl<L: IntelLayout + NullKind<Mmio = NullRegs<L>>> NullPlatform<L> {
    /// The device reports every frame it completes with the checksums `marks` names checked
    /// and right — as the 82576 and 82574 report an IPv4/UDP frame whose checksums they
    /// verified (IPCS, and L4I with UDPCS, without IPE or L4E), each only where the driver
    /// turned that check on (RXCSUM.IPOFLD, TUOFLD). The device writes no frame data and
    /// checks nothing: the caller says what its buffers' frames would have been found to be.
    /// The model verifies the IPv4 header checksum of every IPv4 frame, and the UDP checksum
    /// of a datagram that has one (a zero checksum is not marked): a benchmark of IPv4/UDP
    /// receives on these NICs takes the path of their users with `verified(true, …)`.
    pub fn with_rx_checksum(self, marks: RxChecksum) -> Self {
        let bits = u32::from(marks.ipv4_good()) | u32::from(marks.l4_good()) << 1;
        self.regs.file.marks.store(bits, Ordering::Relaxed);
        self
    }
}

/// Configuration space of an Intel null device: the id, then zeros.
fn id_only<L: IntelLayout>(offset: u16) -> u32 {
    match offset {
        0 => L::PCI_ID,
        _ => 0,
    }
}

/// An Intel null device's register file (BAR 0), shared by its handles (the platform's and
/// the driver's); its tail writes complete descriptors.
pub struct NullRegs<L: IntelLayout = Igb82576> {
    file: Arc<IntelFile>,
    // `fn() -> L`: the layout is only a name, and the register file is Send and Sync whatever L is.
    layout: PhantomData<fn() -> L>,
}

/// What the handles of one [`NullRegs`] share.
struct IntelFile {
    words: Vec<AtomicU32>,
    /// The checksums every frame the device completes is reported checked and right
    /// ([`NullPlatform::with_rx_checksum`]), as `RxChecksum::verified`'s bits: IPv4 (1), L4 (2).
    marks: AtomicU32,
    /// Where the rings the driver programs are.
    dma: Arc<DmaTable>,
}

impl<L: IntelLayout> Clone for NullRegs<L> {
    fn clone(&self) -> Self {
        NullRegs {
            file: self.file.clone(),
            layout: PhantomData,
        }
    }
}

impl<L: IntelLayout> NullRegs<L> {
    fn new(dma: Arc<DmaTable>) -> Self {
        let words = (0..BAR0 / 4).map(|_| AtomicU32::new(0)).collect();
        let regs = NullRegs {
            file: Arc::new(IntelFile {
                words,
                marks: AtomicU32::new(0),
                dma,
            }),
            layout: PhantomData,
        };
        regs.set(RAL0, u32::from_le_bytes([MAC[0], MAC[1], MAC[2], MAC[3]]));
        // RAH0: the last two bytes, and Address Valid (bit 31).
        let rah = u32::from(u16::from_le_bytes([MAC[4], MAC[5]])) | 1 << 31;
        regs.set(RAH0, rah);
        regs
    }

    #[inline]
    fn get(&self, offset: usize) -> u32 {
        self.file.words[offset / 4].load(Ordering::Relaxed)
    }

    #[inline]
    fn set(&self, offset: usize, value: u32) {
        self.file.words[offset / 4].store(value, Ordering::Relaxed);
    }

    /// Completes transmit descriptors up to `tail` (the device's cost, for the profiler).
    #[inline(never)]
    pub fn complete_tx(&self, base: usize, tail: u32) {
        self.complete(base, tail, false);
    }

    /// Completes receive descriptors up to `tail` (the device's cost, for the profiler).
    #[inline(never)]
    pub fn complete_rx(&self, base: usize, tail: u32) {
        self.complete(base, tail, true);
    }

    /// The write-back status bits of the checksums the device was told its frames have
    /// right ([`NullPlatform::with_rx_checksum`]), each only where the driver turned its check
    /// on in RXCSUM, as the device reports a check only then.
    fn rx_marks(&self) -> u64 {
        let marks = self.file.marks.load(Ordering::Relaxed);
        let rxcsum = self.get(RXCSUM);
        let mut bits = 0;
        if marks & 1 != 0 && rxcsum & RXCSUM_IPOFLD != 0 {
            bits |= RX_IPCS;
        }
        if marks & 2 != 0 && rxcsum & RXCSUM_TUOFLD != 0 {
            bits |= RX_L4I | RX_UDPCS;
        }
        bits
    }

    /// Completes ring descriptors `head..tail` of the queue at `base`, as the device would. RX
    /// write-back (82576 §7.1.5.2, 82574 §7.1.4.2): length in bits 47:32 of the second word,
    /// status DD bit 0 and EOP bit 1. TX (82576 §7.2.2.3, 82574 §7.2.10.1): RS is bit 27 of the
    /// second word, DD bit 32.
    #[inline(always)]
    fn complete(&self, base: usize, tail: u32, rx: bool) {
        let iova = u64::from(self.get(base + BAH)) << 32 | u64::from(self.get(base + BAL));
        let n = (self.get(base + LEN) / 16).max(1);
        // A ring outside the platform's DMA memory is not the device's to write.
        let Some(ring) = self.file.dma.find(iova, 16 * n as usize) else {
            return;
        };
        let marks = if rx { self.rx_marks() } else { 0 };
        let mut head = self.get(base + HEAD) % n;
        while head != tail % n {
            // SAFETY: descriptor `head < n` of the `n` the table found inside one live
            // allocation of this platform, which the driver programmed into BAL/BAH/LEN.
            let desc = unsafe { ring.as_ptr().add(16 * head as usize).cast::<u64>() };
            // SAFETY: an aligned (the ring is 16-byte aligned) descriptor inside the ring, which
            // the driver reaches only with volatile accesses and not while the device runs (it
            // runs inside the driver's doorbell).
            unsafe {
                let w1 = desc.add(1);
                if rx {
                    desc.write_volatile(0);
                    // length, the checksum marks, EOP | DD
                    w1.write_volatile(u64::from(RX_FRAME_LEN) << 32 | marks | 0b11);
                } else if w1.read_volatile() & (1 << 27) != 0 {
                    w1.write_volatile(w1.read_volatile() | 1 << 32); // RS → DD
                }
            }
            head = (head + 1) % n;
        }
        self.set(base + HEAD, head);
    }
}

impl<L: IntelLayout> Mmio for NullRegs<L> {
    #[inline]
    fn read32(&self, offset: usize) -> u32 {
        if offset % 4 != 0 || offset >= BAR0 {
            return u32::MAX;
        }
        match offset {
            CTRL => self.get(CTRL) & !(1 << 26),
            STATUS => 0b11 | 0b10 << 6, // FD, LU, 1000 Mb/s
            MDIC => self.get(MDIC) | 1 << 28,
            _ => self.get(offset),
        }
    }

    #[inline]
    fn write32(&self, offset: usize, value: u32) {
        if offset % 4 != 0 || offset >= BAR0 {
            return;
        }
        self.set(offset, value);
        if offset % L::STRIDE == TAIL {
            if (L::RXQ..L::RXQ + L::QUEUES * L::STRIDE).contains(&offset) {
                self.complete_rx(offset - TAIL, value);
            } else if (L::TXQ..L::TXQ + L::QUEUES * L::STRIDE).contains(&offset) {
                self.complete_tx(offset - TAIL, value);
            }
        }
    }

    fn len(&self) -> usize {
        BAR0
    }
}

#[cfg(test)]
mod tests {
    use ringfab_hal::{DmaRegion, Platform};

    use super::*;

    /// The write-back's second word of the one receive descriptor completed on a null device
    /// of kind `K` that marks `marks`, with RXCSUM set to `rxcsum` by the "driver".
    fn written_back<K>(marks: RxChecksum, rxcsum: u32) -> u64
    where
        K: IntelLayout + NullKind<Mmio = NullRegs<K>>,
    {
        let platform = NullPlatform::<K>::new().with_rx_checksum(marks);
        let regs = platform.bar(0).unwrap();
        let ring = platform.alloc_dma(16 * 8).unwrap();
        let iova = ring.iova().0;
        regs.write32(RXCSUM, rxcsum);
        regs.write32(K::RXQ + BAL, iova as u32);
        regs.write32(K::RXQ + BAH, (iova >> 32) as u32);
        regs.write32(K::RXQ + LEN, 16 * 8);
        regs.write32(K::RXQ + TAIL, 1);
        // SAFETY: descriptor 0 of the ring, 16-byte aligned inside the live allocation; the
        // device wrote it inside the tail write above, which has returned.
        unsafe { ring.cpu().as_ptr().cast::<u64>().add(1).read_volatile() }
    }

    /// 82576 §7.1.5.2 and 82574 §7.1.4.2: IPCS "IPv4 checksum calculated on packet", L4I
    /// (TCPCS) and UDPCS "UDP checksum calculated on packet" — reported only with the check
    /// on in RXCSUM (IPOFLD, TUOFLD).
    #[test]
    fn the_null_intel_devices_mark_what_they_are_told_where_the_driver_turned_the_check_on() {
        let both = RXCSUM_IPOFLD | RXCSUM_TUOFLD;
        for wb in [written_back::<Igb82576>, written_back::<E1000e82574>] {
            let base = u64::from(RX_FRAME_LEN) << 32 | 0b11;
            assert_eq!(wb(RxChecksum::NONE, both), base);
            assert_eq!(wb(RxChecksum::verified(true, false), both), base | RX_IPCS);
            assert_eq!(
                wb(RxChecksum::verified(true, true), both),
                base | RX_IPCS | RX_L4I | RX_UDPCS
            );
            assert_eq!(wb(RxChecksum::verified(true, true), 0), base);
            assert_eq!(
                wb(RxChecksum::verified(true, true), RXCSUM_TUOFLD),
                base | RX_L4I | RX_UDPCS
            );
        }
    }
}
