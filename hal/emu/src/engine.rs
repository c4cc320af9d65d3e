//! The parts of a DMA engine every model shares: device-fault planning per write-back, held-back
//! (delayed) write-backs and their release, descriptor writes through the IOMMU with the status
//! dword last, and the frame parsing RSS needs.
//!
//! A model asks [`Engine::plan`] what to do with each descriptor write-back, builds the bytes,
//! and hands both to [`Engine::writeback`] with the interrupt causes the write-back raises
//! ([`Irq`], whose meaning belongs to the model). Delayed write-backs come back from
//! [`Engine::step`] with their causes for the model to raise; [`Engine::flush`] performs a
//! ring's held write-backs at once when software stops that ring.

use crate::fault::{DeviceFault, Ring};
use crate::iommu::Iommu;

/// Interrupt causes a write-back raises, in the model's own terms (igb: EICR bits and ICR bits;
/// e1000e: ICR bits and nothing).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub(crate) struct Irq(pub(crate) u32, pub(crate) u32);

/// A write-back held back by [`DeviceFault::DelayWriteback`].
#[derive(Clone, Debug)]
struct Delayed {
    /// The ring the write-back belongs to.
    ring: Ring,
    steps: u32,
    write: Write,
    irq: Irq,
}

/// One descriptor write-back: the bytes, written with the status dword last.
#[derive(Clone, Debug)]
pub(crate) struct Write {
    pub(crate) iova: u64,
    pub(crate) bytes: Vec<u8>,
    /// Byte offset of the dword carrying DD (bit 0), written after the rest; `None` writes all
    /// at once.
    pub(crate) status_at: Option<usize>,
    /// Where the descriptor written back sits on its ring, for the faults that move or copy
    /// a write-back ([`DeviceFault::MisplaceWriteback`], [`DeviceFault::StrayWriteback`]);
    /// `None` for writes that are not a descriptor's (a head write-back).
    pub(crate) slot: Option<Slot>,
}

/// A descriptor's place on its ring: the ring's base and size, the descriptor's index and the
/// tail register when it was written back.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Slot {
    pub(crate) base: u64,
    pub(crate) size: u32,
    pub(crate) index: u32,
    pub(crate) tail: u32,
}

impl Slot {
    /// The place of the descriptor at `addr` on the ring of `size` descriptors at `base`, whose
    /// tail register reads `tail`.
    pub(crate) fn of(base: u64, size: u32, addr: u64, tail: u32) -> Slot {
        Slot {
            base,
            size,
            index: (addr.wrapping_sub(base) / 16) as u32,
            tail,
        }
    }

    /// The IOVA of descriptor `index` (modulo the ring size).
    fn at(&self, index: u32) -> u64 {
        self.base + 16 * u64::from(index % self.size.max(1))
    }
}

/// Used-ring faults for one used entry ([`Engine::take_used_fault`]).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct UsedFault {
    /// Hold the entry until the next one on its ring is written.
    pub(crate) hold: bool,
    /// Write this id instead of the entry's own.
    pub(crate) id: Option<u32>,
    /// Advance the used index this much further.
    pub(crate) jump: u16,
    /// Write the entry a second time as an extra entry.
    pub(crate) repeat: bool,
    /// Move the used index back this much instead of one forward.
    pub(crate) rewind: u16,
}

/// What to do with one write-back.
pub(crate) enum Plan {
    /// Write it now, with `garbage` ORed into the status dword; a receive write-back reports
    /// `oversize` extra bytes beyond the buffer when set, or exactly `length`; `misplace` moves
    /// it that many descriptors on, `stray` also writes a copy at the tail.
    Now {
        garbage: u32,
        oversize: Option<u16>,
        length: Option<u16>,
        misplace: Option<u16>,
        stray: bool,
    },
    /// Never write it.
    Withhold,
    /// Write it after this many steps.
    Delay(u32),
}

/// Fault state and held write-backs of one device.
pub(crate) struct Engine {
    pub(crate) iommu: Iommu,
    pub(crate) faults: Vec<DeviceFault>,
    delayed: Vec<Delayed>,
}

fn ring_matches(filter: Option<Ring>, ring: Ring) -> bool {
    filter.is_none_or(|f| f == ring)
}

impl Engine {
    pub(crate) fn new(iommu: Iommu) -> Engine {
        Engine {
            iommu,
            faults: Vec::new(),
            delayed: Vec::new(),
        }
    }

    /// Consumes the faults aimed at this write-back on `ring` and says what to do with it.
    pub(crate) fn plan(&mut self, ring: Ring) -> Plan {
        let (mut garbage, mut oversize, mut delay, mut withhold) = (0, None, None, false);
        let (mut length, mut misplace, mut stray) = (None, None, false);
        for f in self.faults.iter_mut() {
            let take = |count: &mut usize| {
                let hit = *count > 0;
                if hit && *count != usize::MAX {
                    *count -= 1;
                }
                hit
            };
            let aimed = match f {
                DeviceFault::WithholdWriteback { ring: r, .. }
                | DeviceFault::DelayWriteback { ring: r, .. }
                | DeviceFault::GarbageStatus { ring: r, .. }
                | DeviceFault::MisplaceWriteback { ring: r, .. }
                | DeviceFault::StrayWriteback { ring: r, .. } => ring_matches(*r, ring),
                DeviceFault::OversizeLength { queue, .. }
                | DeviceFault::ExactLength { queue, .. } => {
                    matches!(ring, Ring::Rx(n) if queue.is_none_or(|q| q == n))
                }
                // Used-ring faults: taken by the virtqueue models themselves (`take_used_fault`);
                // stop and start refusals by their register writes (`refuse`); cut frames by the
                // Intel models' receive (`take_cut_frame`).
                DeviceFault::CutFrame { .. }
                | DeviceFault::CompleteOutOfOrder { .. }
                | DeviceFault::LieUsedId { .. }
                | DeviceFault::JumpUsedIdx { .. }
                | DeviceFault::RepeatUsedId { .. }
                | DeviceFault::RewindUsedIdx { .. }
                | DeviceFault::RefuseStop { .. }
                | DeviceFault::RefuseStart { .. } => false,
            };
            if !aimed {
                continue;
            }
            match f {
                DeviceFault::WithholdWriteback { count, .. } => withhold |= take(count),
                DeviceFault::DelayWriteback { count, steps, .. } => {
                    delay = take(count).then_some(*steps).or(delay);
                }
                DeviceFault::GarbageStatus { count, bits, .. } => {
                    garbage |= if take(count) { *bits } else { 0 };
                }
                DeviceFault::OversizeLength { count, extra, .. } => {
                    oversize = take(count).then_some(*extra).or(oversize);
                }
                DeviceFault::ExactLength { count, len, .. } => {
                    length = take(count).then_some(*len).or(length);
                }
                DeviceFault::MisplaceWriteback { count, offset, .. } => {
                    misplace = take(count).then_some(*offset).or(misplace);
                }
                DeviceFault::StrayWriteback { count, .. } => stray |= take(count),
                DeviceFault::CutFrame { .. }
                | DeviceFault::CompleteOutOfOrder { .. }
                | DeviceFault::LieUsedId { .. }
                | DeviceFault::JumpUsedIdx { .. }
                | DeviceFault::RepeatUsedId { .. }
                | DeviceFault::RewindUsedIdx { .. }
                | DeviceFault::RefuseStop { .. }
                | DeviceFault::RefuseStart { .. } => {}
            }
        }
        self.faults.retain(Self::live);
        match (withhold, delay) {
            (true, _) => Plan::Withhold,
            (false, Some(steps)) => Plan::Delay(steps),
            (false, None) => Plan::Now {
                garbage,
                oversize,
                length,
                misplace,
                stray,
            },
        }
    }

    /// Whether a fault still has uses left.
    fn live(f: &DeviceFault) -> bool {
        match f {
            DeviceFault::WithholdWriteback { count, .. }
            | DeviceFault::DelayWriteback { count, .. }
            | DeviceFault::GarbageStatus { count, .. }
            | DeviceFault::OversizeLength { count, .. }
            | DeviceFault::ExactLength { count, .. }
            | DeviceFault::MisplaceWriteback { count, .. }
            | DeviceFault::StrayWriteback { count, .. }
            | DeviceFault::RepeatUsedId { count, .. }
            | DeviceFault::CompleteOutOfOrder { count, .. }
            | DeviceFault::LieUsedId { count, .. }
            | DeviceFault::RefuseStop { count, .. }
            | DeviceFault::RefuseStart { count, .. }
            | DeviceFault::CutFrame { count, .. } => *count > 0,
            DeviceFault::JumpUsedIdx { by, .. } | DeviceFault::RewindUsedIdx { by, .. } => *by > 0,
        }
    }

    /// Consumes one [`DeviceFault::CutFrame`] aimed at receive ring `ring`: whether the frame
    /// being written, one that takes more than one descriptor, loses its last write-back.
    pub(crate) fn take_cut_frame(&mut self, ring: Ring) -> bool {
        let mut cut = false;
        for f in self.faults.iter_mut() {
            if let DeviceFault::CutFrame { queue, count } = f {
                if *count > 0 && matches!(ring, Ring::Rx(n) if queue.is_none_or(|q| q == n)) {
                    if *count != usize::MAX {
                        *count -= 1;
                    }
                    cut = true;
                    break;
                }
            }
        }
        self.faults.retain(Self::live);
        cut
    }

    /// Consumes one [`DeviceFault::RefuseStop`] (`stop`) or [`DeviceFault::RefuseStart`]
    /// whose ring is any, or one for which `hit` holds; whether the device ignores this
    /// request.
    pub(crate) fn refuse(&mut self, stop: bool, hit: impl Fn(Ring) -> bool) -> bool {
        let mut refused = false;
        for f in self.faults.iter_mut() {
            let (ring, count) = match f {
                DeviceFault::RefuseStop { ring, count } if stop => (ring, count),
                DeviceFault::RefuseStart { ring, count } if !stop => (ring, count),
                _ => continue,
            };
            if *count > 0 && ring.is_none_or(&hit) {
                if *count != usize::MAX {
                    *count -= 1;
                }
                refused = true;
                break;
            }
        }
        self.faults.retain(Self::live);
        refused
    }

    /// Consumes the used-ring faults aimed at the next used entry on `ring` (virtqueue models):
    /// whether to hold it back (out of order; asked only when `may_hold`, i.e. no entry of the
    /// ring is held already), the id to write instead of its own, and extra steps of the used
    /// index.
    pub(crate) fn take_used_fault(&mut self, ring: Ring, may_hold: bool) -> UsedFault {
        let mut out = UsedFault::default();
        for f in self.faults.iter_mut() {
            match f {
                DeviceFault::CompleteOutOfOrder { ring: r, count }
                    if may_hold && ring_matches(*r, ring) && *count > 0 =>
                {
                    out.hold = true;
                    *count -= 1;
                }
                DeviceFault::LieUsedId { ring: r, count, id }
                    if ring_matches(*r, ring) && *count > 0 =>
                {
                    out.id = Some(*id);
                    *count -= 1;
                }
                DeviceFault::JumpUsedIdx { ring: r, by } if ring_matches(*r, ring) && *by > 0 => {
                    out.jump = *by;
                    *by = 0;
                }
                DeviceFault::RepeatUsedId { ring: r, count }
                    if ring_matches(*r, ring) && *count > 0 =>
                {
                    out.repeat = true;
                    *count -= 1;
                }
                DeviceFault::RewindUsedIdx { ring: r, by } if ring_matches(*r, ring) && *by > 0 => {
                    out.rewind = *by;
                    *by = 0;
                }
                _ => {}
            }
        }
        self.faults.retain(Self::live);
        out
    }

    fn do_write(&self, w: &Write) {
        // A failed write-back is recorded by the IOMMU; the model carries on (the descriptor is
        // already consumed, as on hardware whose posted write is lost).
        match w.status_at {
            Some(at) => {
                let mut first = w.bytes.clone();
                first[at] &= !1;
                if self.iommu.write(w.iova, &first) {
                    self.iommu.write(w.iova + at as u64, &w.bytes[at..at + 4]);
                }
            }
            None => {
                self.iommu.write(w.iova, &w.bytes);
            }
        }
    }

    /// Performs or holds back one write-back as `plan` says; returns whether it was performed
    /// now (the caller then raises `irq` itself; a delayed one raises it when it lands).
    pub(crate) fn writeback(&mut self, ring: Ring, mut w: Write, plan: Plan, irq: Irq) -> bool {
        match plan {
            Plan::Withhold => false,
            Plan::Delay(steps) => {
                self.delayed.push(Delayed {
                    ring,
                    steps,
                    write: w,
                    irq,
                });
                false
            }
            Plan::Now {
                garbage,
                misplace,
                stray,
                ..
            } => {
                if let Some(at) = w.status_at {
                    let s = le32(&w.bytes, at) | garbage;
                    w.bytes[at..at + 4].copy_from_slice(&s.to_le_bytes());
                }
                // The write's offset within its descriptor (the 82574 writes back one dword).
                let within = w
                    .slot
                    .map_or(0, |slot| w.iova.wrapping_sub(slot.at(slot.index)));
                if let (Some(by), Some(slot)) = (misplace, w.slot) {
                    let to = slot.at(slot.index.wrapping_add(u32::from(by)));
                    w.iova = to.wrapping_add(within);
                }
                self.do_write(&w);
                if let (true, Some(slot)) = (stray, w.slot) {
                    if slot.tail < slot.size {
                        let iova = slot.at(slot.tail).wrapping_add(within);
                        self.do_write(&Write { iova, ..w.clone() });
                    }
                }
                true
            }
        }
    }

    /// Performs at once every write-back still held back for `ring`. Stopping a queue is how
    /// software takes its ring back before reusing it; a device that let a held-back write-back
    /// land after that would scribble on descriptors the driver has reprogrammed. The models
    /// therefore complete them first — the same outcome as a device that writes back in order
    /// and finishes its pending write-backs before the stop reads back.
    pub(crate) fn flush(&mut self, ring: Ring) {
        let mut due = Vec::new();
        self.delayed.retain(|d| {
            if d.ring == ring {
                due.push(d.clone());
                false
            } else {
                true
            }
        });
        for d in due {
            self.do_write(&d.write);
        }
    }

    /// One step of deferred work: performs the delayed write-backs whose time has come and
    /// returns their interrupt causes, and whether any deferred work remains.
    pub(crate) fn step(&mut self) -> (Vec<Irq>, bool) {
        let mut due = Vec::new();
        self.delayed.retain_mut(|d| {
            if d.steps <= 1 {
                due.push(d.clone());
                false
            } else {
                d.steps -= 1;
                true
            }
        });
        let mut irqs = Vec::with_capacity(due.len());
        for d in due {
            self.do_write(&d.write);
            irqs.push(d.irq);
        }
        (irqs, !self.delayed.is_empty())
    }

    /// Forgets every held write-back (in-flight DMA is lost in a reset).
    pub(crate) fn clear_delayed(&mut self) {
        self.delayed.clear();
    }
}

pub(crate) fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

pub(crate) fn le64(b: &[u8], at: usize) -> u64 {
    u64::from(le32(b, at)) | u64::from(le32(b, at + 4)) << 32
}

/// The layer-4 protocol of a parsed frame.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum L4 {
    /// None, or not parsed (a fragment, or the header is cut short).
    None,
    /// TCP, ports parsed.
    Tcp,
    /// UDP, ports parsed.
    Udp,
}

/// IPv4 source and destination, and the (source, destination) ports when TCP/UDP was parsed.
pub(crate) type Tuple = ([u8; 4], [u8; 4], Option<(u16, u16)>);

/// What RSS and the write-back need of a frame's headers.
pub(crate) struct Parsed {
    pub(crate) ipv4: bool,
    /// Where the IPv4 header starts, when there is one.
    pub(crate) l3: Option<usize>,
    pub(crate) l4: L4,
    pub(crate) tuple: Option<Tuple>,
}

/// Parses Ethernet (optionally one VLAN tag of EtherType `vet`) / IPv4 / TCP-UDP far enough for
/// RSS. Never panics.
pub(crate) fn parse(f: &[u8], vet: u16) -> Parsed {
    let none = Parsed {
        ipv4: false,
        l3: None,
        l4: L4::None,
        tuple: None,
    };
    let be16 = |at: usize| f.get(at..at + 2).map(|b| u16::from_be_bytes([b[0], b[1]]));
    let mut l3 = 14;
    let mut ethertype = be16(12);
    if ethertype == Some(vet) {
        ethertype = be16(16);
        l3 = 18;
    }
    if ethertype != Some(0x0800) {
        return none;
    }
    let Some(ip) = f.get(l3..l3 + 20) else {
        return none;
    };
    if ip[0] >> 4 != 4 {
        return none;
    }
    let ihl = usize::from(ip[0] & 0xf) * 4;
    let src = [ip[12], ip[13], ip[14], ip[15]];
    let dst = [ip[16], ip[17], ip[18], ip[19]];
    let frag = u16::from_be_bytes([ip[6], ip[7]]);
    let fragmented = frag & 0x2000 != 0 || frag & 0x1fff != 0;
    let proto = ip[9];
    let l4 = l3 + ihl;
    let ports = match (proto, fragmented) {
        (6 | 17, false) => f.get(l4..l4 + 4).map(|p| {
            (
                u16::from_be_bytes([p[0], p[1]]),
                u16::from_be_bytes([p[2], p[3]]),
            )
        }),
        _ => None,
    };
    let l4kind = match (proto, ports.is_some()) {
        (6, true) => L4::Tcp,
        (17, true) => L4::Udp,
        _ => L4::None,
    };
    Parsed {
        ipv4: true,
        l3: Some(l3),
        l4: l4kind,
        tuple: Some((src, dst, ports)),
    }
}

/// Whether `f`'s destination address passes a receive filter of `RCTL` value `rctl` (bits as
/// both models share them: UPE 3, MPE 4, MO 13:12, BAM 15), the valid receive addresses `ras`
/// (each `(RAL, RAH)`) and the multicast table `mta` (e1000x_rx_group_filter).
pub(crate) fn accept(f: &[u8], rctl: u32, ras: &[(u32, u32)], mta: impl Fn(usize) -> u32) -> bool {
    const UPE: u32 = 1 << 3;
    const MPE: u32 = 1 << 4;
    const BAM: u32 = 1 << 15;
    const AV: u32 = 1 << 31;
    let dst = &f[..6];
    let multicast = dst[0] & 1 != 0;
    let broadcast = dst.iter().all(|&b| b == 0xff);
    if broadcast && rctl & BAM != 0 {
        return true;
    }
    if rctl & if multicast { MPE } else { UPE } != 0 {
        return true;
    }
    for &(lo, hi) in ras {
        let mac = [
            lo as u8,
            (lo >> 8) as u8,
            (lo >> 16) as u8,
            (lo >> 24) as u8,
            hi as u8,
            (hi >> 8) as u8,
        ];
        if hi & AV != 0 && mac == dst {
            return true;
        }
    }
    if multicast {
        let shift = [4, 3, 2, 0][((rctl >> 12) & 3) as usize];
        let h = ((u32::from(dst[5]) << 8 | u32::from(dst[4])) >> shift) & 0xfff;
        return mta(h as usize >> 5) & (1 << (h & 31)) != 0;
    }
    false
}
