//! The DMA engine: transmit on a tail write, receive from the wire, descriptor write-back (with
//! the injected device faults), and RSS queue selection.
//!
//! Descriptor layouts: advanced TX data/context descriptors (datasheet 7.2.2.3, QEMU
//! `igb_process_tx_desc`; a legacy descriptor, DEXT = 0, shares the address/length/EOP/RS
//! positions and is sent without offloads, as QEMU does), advanced one-buffer RX descriptors
//! with the advanced write-back (7.1.5, QEMU `igb_write_adv_rx_descr`).
//!
//! What happens on an IOMMU fault (the DMA fails, as with QEMU's intel-iommu): the model does
//! not act on the descriptor. A transmit ring stalls at the first descriptor of the packet whose
//! descriptor or buffer could not be read — TDH stays there, nothing is sent or written back,
//! and the next TDT write retries (faulting again until the mapping is fixed). A received frame
//! whose descriptor cannot be read or whose buffer cannot be written is dropped and counted in
//! MPC; RDH stays, so the ring stalls at that descriptor in the same way.

use super::model::IgbModel;
use super::regs::*;
use crate::fault::{DeviceFault, Ring};
use crate::toeplitz;

/// A write-back held back by [`DeviceFault::DelayWriteback`].
#[derive(Clone, Debug)]
pub(crate) struct Delayed {
    /// The ring the write-back belongs to.
    ring: Ring,
    steps: u32,
    writes: Vec<Write>,
    eicr: u32,
    icr: u32,
}

/// One descriptor write-back: the bytes, written with the status dword last.
#[derive(Clone, Debug)]
struct Write {
    iova: u64,
    bytes: Vec<u8>,
    /// Byte offset of the dword carrying DD, written after the rest; `None` writes all at once.
    status_at: Option<usize>,
}

enum Plan {
    Now { garbage: u32, oversize: Option<u16> },
    Withhold,
    Delay(u32),
}

#[derive(Clone, Copy, Default)]
struct Rss {
    enabled: bool,
    hash: u32,
    kind: u32,
    queue: usize,
}

/// IPv4 source and destination, and the (source, destination) ports when TCP/UDP was parsed.
type Tuple = ([u8; 4], [u8; 4], Option<(u16, u16)>);

struct Parsed {
    ipv4: bool,
    l4: u32,
    tuple: Option<Tuple>,
}

fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn le64(b: &[u8], at: usize) -> u64 {
    u64::from(le32(b, at)) | u64::from(le32(b, at + 4)) << 32
}

fn ring_matches(filter: Option<Ring>, ring: Ring) -> bool {
    filter.is_none_or(|f| f == ring)
}

/// Parses Ethernet (optionally one VLAN tag) / IPv4 / TCP-UDP far enough for RSS. Never panics.
fn parse(f: &[u8], vet: u16) -> Parsed {
    let none = Parsed {
        ipv4: false,
        l4: 0,
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
        (6, true) => RXD_PKT_TCP,
        (17, true) => RXD_PKT_UDP,
        _ => 0,
    };
    Parsed {
        ipv4: true,
        l4: l4kind,
        tuple: Some((src, dst, ports)),
    }
}

impl IgbModel {
    fn inc(&mut self, off: usize) {
        self.regs[off / 4] = self.regs[off / 4].saturating_add(1);
    }

    fn add64(&mut self, lo: usize, n: u64) {
        let v = (u64::from(self.r(lo + 4)) << 32 | u64::from(self.r(lo))).saturating_add(n);
        self.w(lo, v as u32);
        self.w(lo + 4, (v >> 32) as u32);
    }

    /// EICR bit of a queue's IVAR entry (datasheet 8.8.15; QEMU igb_ivar_entry_rx/tx):
    /// IVAR[n & 7] holds RX n in byte 0, TX n in byte 1, RX n+8 in byte 2, TX n+8 in byte 3.
    fn ivar_bit(&self, ring: Ring) -> u32 {
        let (n, tx) = match ring {
            Ring::Tx(n) => (usize::from(n), 1),
            Ring::Rx(n) => (usize::from(n), 0),
        };
        let byte = (n / 8) * 2 + tx;
        let ent = (self.r(IVAR0 + 4 * (n % 8)) >> (8 * byte)) & 0xff;
        if ent & IVAR_VALID != 0 {
            1 << (ent & 0x1f)
        } else {
            0
        }
    }

    fn plan(&mut self, ring: Ring) -> Plan {
        let (mut garbage, mut oversize, mut delay, mut withhold) = (0, None, None, false);
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
                | DeviceFault::GarbageStatus { ring: r, .. } => ring_matches(*r, ring),
                DeviceFault::OversizeLength { queue, .. } => {
                    matches!(ring, Ring::Rx(n) if queue.is_none_or(|q| q == n))
                }
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
            }
        }
        self.faults.retain(|f| match f {
            DeviceFault::WithholdWriteback { count, .. }
            | DeviceFault::DelayWriteback { count, .. }
            | DeviceFault::GarbageStatus { count, .. }
            | DeviceFault::OversizeLength { count, .. } => *count > 0,
        });
        match (withhold, delay) {
            (true, _) => Plan::Withhold,
            (false, Some(steps)) => Plan::Delay(steps),
            (false, None) => Plan::Now { garbage, oversize },
        }
    }

    fn do_write(&mut self, w: &Write) {
        // A failed write-back is recorded by the IOMMU; the model carries on (the descriptor is
        // already consumed, as on hardware whose posted write is lost).
        match w.status_at {
            Some(at) => {
                let mut first = w.bytes.clone();
                first[at] &= !(DESC_DD as u8);
                if self.iommu.write(w.iova, &first) {
                    self.iommu.write(w.iova + at as u64, &w.bytes[at..at + 4]);
                }
            }
            None => {
                self.iommu.write(w.iova, &w.bytes);
            }
        }
    }

    /// Performs (or holds back) one write-back; returns the interrupt causes to raise now.
    fn writeback(&mut self, ring: Ring, mut w: Write, plan: Plan) -> u32 {
        let eicr = self.ivar_bit(ring);
        match plan {
            Plan::Withhold => 0,
            Plan::Delay(steps) => {
                let icr = if matches!(ring, Ring::Tx(_)) {
                    ICR_TXDW
                } else {
                    ICR_RXDW
                };
                self.delayed.push(Delayed {
                    ring,
                    steps,
                    writes: vec![w],
                    eicr,
                    icr,
                });
                0
            }
            Plan::Now { garbage, .. } => {
                if let Some(at) = w.status_at {
                    let s = le32(&w.bytes, at) | garbage;
                    w.bytes[at..at + 4].copy_from_slice(&s.to_le_bytes());
                }
                self.do_write(&w);
                eicr
            }
        }
    }

    /// Performs at once every write-back still held back for `ring`. Clearing a queue's ENABLE
    /// bit is how software stops a queue before it reuses the ring; a device that let a held-back
    /// write-back land after that would scribble on descriptors the driver has reprogrammed. The
    /// model therefore completes them first — the same outcome as a device that writes back
    /// in order and finishes its pending write-backs before the ENABLE bit reads back clear.
    pub(crate) fn flush_delayed(&mut self, ring: Ring) {
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
            for w in &d.writes {
                self.do_write(w);
            }
        }
    }

    /// One step of deferred work: delayed write-backs whose time has come. Returns whether any
    /// deferred work remains.
    pub(crate) fn step(&mut self) -> bool {
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
        for d in due {
            for w in &d.writes {
                self.do_write(w);
            }
            self.raise_eicr(d.eicr);
            self.raise_icr(d.icr);
        }
        !self.delayed.is_empty()
    }

    fn ring(&self, off_dbal: usize) -> (u64, u32) {
        let base = u64::from(self.r(off_dbal + 4)) << 32 | u64::from(self.r(off_dbal));
        (base, self.r(off_dbal + Q_DLEN) / 16)
    }

    /// Transmits everything between TDH and TDT on queue `n` (QEMU igb_start_xmit).
    pub(crate) fn transmit(&mut self, n: usize) {
        if self.r(TCTL) & TCTL_EN == 0
            || self.r(txq(n, Q_DCTL)) & DCTL_ENABLE == 0
            || !self.pci.bus_master()
        {
            return;
        }
        let ring = Ring::Tx(n as u16);
        let (base, size) = self.ring(txq(n, Q_DBAL));
        let tail = self.r(txq(n, Q_DT));
        let (mut eicr, mut wrote) = (0, false);
        'packets: loop {
            let head = self.r(txq(n, Q_DH));
            if size == 0 || head == tail || tail >= size || head >= size {
                break;
            }
            let (mut idx, mut frame, mut used, mut done, mut data) =
                (head, Vec::new(), Vec::new(), false, false);
            while idx != tail {
                let addr = base + 16 * u64::from(idx);
                let Some(desc) = self.iommu.read(addr, 16) else {
                    break 'packets;
                };
                idx = (idx + 1) % size;
                let cmd = le32(&desc, 8);
                let buf = le64(&desc, 0);
                let is_data = cmd & TXD_DEXT == 0 || cmd & TXD_DTYP_MASK == TXD_DTYP_DATA;
                used.push((addr, desc));
                if !is_data {
                    // A context (or unknown) descriptor: consumed, no data. Alone, it is done.
                    if used.len() == 1 {
                        done = true;
                        break;
                    }
                    continue;
                }
                data = true;
                let len = (cmd & 0xffff) as usize;
                if len > 0 {
                    let Some(bytes) = self.iommu.read(buf, len) else {
                        break 'packets;
                    };
                    frame.extend_from_slice(&bytes);
                }
                if cmd & TXD_EOP != 0 {
                    done = true;
                    break;
                }
            }
            if !done {
                // No EOP before the tail: wait for the rest of the packet.
                break;
            }
            if data {
                self.send(frame);
            }
            self.w(txq(n, Q_DH), idx);
            let head_wb =
                u64::from(self.r(txq(n, Q_TDWBAH))) << 32 | u64::from(self.r(txq(n, Q_TDWBAL)));
            for (addr, mut desc) in used {
                if le32(&desc, 8) & TXD_RS == 0 {
                    continue;
                }
                let plan = self.plan(ring);
                wrote = true;
                let w = if head_wb & 1 != 0 {
                    // Head write-back (TDWBAL bit 0): the new head instead of DD.
                    Write {
                        iova: head_wb & !3,
                        bytes: idx.to_le_bytes().to_vec(),
                        status_at: None,
                    }
                } else {
                    // QEMU igb_txdesc_writeback: the descriptor as read, with DD in dword 3.
                    let s = le32(&desc, 12) | DESC_DD;
                    desc[12..16].copy_from_slice(&s.to_le_bytes());
                    Write {
                        iova: addr,
                        bytes: desc,
                        status_at: Some(12),
                    }
                };
                eicr |= self.writeback(ring, w, plan);
            }
        }
        if eicr != 0 {
            self.raise_eicr(eicr);
        }
        if wrote {
            self.raise_icr(ICR_TXDW);
        }
    }

    fn send(&mut self, frame: Vec<u8>) {
        let octets = frame.len() as u64 + 4;
        self.inc(GPTC);
        self.inc(TPT);
        self.add64(GOTCL, octets);
        self.add64(TOTL, octets);
        // With the link down the frame is lost on the way out (QEMU's net layer drops it).
        if self.link_up() {
            self.outbox.push(frame);
        }
    }

    fn accept(&self, f: &[u8]) -> bool {
        let rctl = self.r(RCTL);
        let dst = &f[..6];
        let multicast = dst[0] & 1 != 0;
        let broadcast = dst.iter().all(|&b| b == 0xff);
        if broadcast && rctl & RCTL_BAM != 0 {
            return true;
        }
        if rctl & if multicast { RCTL_MPE } else { RCTL_UPE } != 0 {
            return true;
        }
        let slots = (0..16)
            .map(|i| RA + 8 * i)
            .chain((0..8).map(|i| RA2 + 8 * i));
        for ra in slots {
            let (lo, hi) = (self.r(ra), self.r(ra + 4));
            let mac = [
                lo as u8,
                (lo >> 8) as u8,
                (lo >> 16) as u8,
                (lo >> 24) as u8,
                hi as u8,
                (hi >> 8) as u8,
            ];
            if hi & RAH_AV != 0 && mac == dst {
                return true;
            }
        }
        if multicast {
            // Multicast table hash (e1000x_rx_group_filter).
            let shift = [4, 3, 2, 0][((rctl >> RCTL_MO_SHIFT) & 3) as usize];
            let h = ((u32::from(dst[5]) << 8 | u32::from(dst[4])) >> shift) & 0xfff;
            return self.r(MTA + 4 * (h as usize >> 5)) & (1 << (h & 31)) != 0;
        }
        false
    }

    fn oversized(&self, f: &[u8]) -> bool {
        let rctl = self.r(RCTL);
        if rctl & RCTL_SBP != 0 {
            return false;
        }
        let vlan = u16::from_be_bytes([f[12], f[13]]) == self.r(VET) as u16;
        if rctl & RCTL_LPE != 0 {
            f.len() + 4 > self.r(RLPML) as usize
        } else {
            f.len() > 14 + 1500 + if vlan { 4 } else { 0 }
        }
    }

    /// RSS (datasheet 7.1.2.8; QEMU igb_rss_parse_packet). QEMU hashes only when
    /// MRQC.MRQE = RSS **and** RXCSUM.PCSD is set; the model keeps that quirk so that a driver
    /// that works here works there.
    fn rss(&self, p: &Parsed) -> Rss {
        let mrqc = self.r(MRQC);
        if mrqc & MRQC_MRQE_MASK != MRQC_MRQE_RSS || self.r(RXCSUM) & RXCSUM_PCSD == 0 {
            return Rss::default();
        }
        let mut key = [0u8; toeplitz::KEY_LEN];
        for (i, chunk) in key.chunks_mut(4).enumerate() {
            chunk.copy_from_slice(&self.r(RSSRK + 4 * i).to_le_bytes());
        }
        let Some((src, dst, ports)) = p.tuple else {
            return Rss {
                enabled: true,
                ..Rss::default()
            };
        };
        let (kind, hash) = match ports {
            Some((sp, dp)) if p.l4 == RXD_PKT_TCP && mrqc & MRQC_TCPIPV4 != 0 => (
                RSS_TYPE_TCPV4,
                toeplitz::hash(&key, &toeplitz::ipv4_ports_input(src, dst, sp, dp)),
            ),
            Some((sp, dp)) if p.l4 == RXD_PKT_UDP && mrqc & MRQC_UDPIPV4 != 0 => (
                RSS_TYPE_UDPV4,
                toeplitz::hash(&key, &toeplitz::ipv4_ports_input(src, dst, sp, dp)),
            ),
            _ if mrqc & MRQC_IPV4 != 0 => (
                RSS_TYPE_IPV4,
                toeplitz::hash(&key, &toeplitz::ipv4_input(src, dst)),
            ),
            _ => {
                return Rss {
                    enabled: true,
                    ..Rss::default()
                }
            }
        };
        // 128-entry table indexed by the hash's low 7 bits; QEMU takes the entry's low 4 bits.
        let idx = (hash & 0x7f) as usize;
        let entry = (self.r(RETA + 4 * (idx / 4)) >> (8 * (idx % 4))) & 0xf;
        Rss {
            enabled: true,
            hash,
            kind,
            queue: entry as usize,
        }
    }

    fn rx_buf_len(&self, n: usize) -> usize {
        let pkt = self.r(rxq(n, Q_SRRCTL)) & SRRCTL_BSIZEPKT_MASK;
        if pkt != 0 {
            return pkt as usize * 1024;
        }
        let rctl = self.r(RCTL);
        let code = (rctl >> RCTL_BSIZE_SHIFT) & 3;
        let base = [2048, 1024, 512, 256][code as usize];
        if rctl & RCTL_BSEX != 0 && code != 0 {
            base * 16
        } else {
            base
        }
    }

    /// A frame from the wire (QEMU igb_receive_internal, one queue, no VMDq).
    pub(crate) fn receive(&mut self, frame: &[u8], crc_ok: bool) {
        // QEMU refuses frames while RX is off or the link is down.
        if self.r(RCTL) & RCTL_EN == 0 || !self.link_up() || frame.len() < 14 {
            return;
        }
        if !self.pci.bus_master() {
            // No DMA without bus mastering: the frame is missed.
            self.inc(MPC);
            return;
        }
        let mut f = frame.to_vec();
        if f.len() < 60 {
            // QEMU pads short frames to the Ethernet minimum and counts them undersize.
            f.resize(60, 0);
            self.inc(RUC);
        }
        if !crc_ok {
            self.inc(CRCERRS);
        }
        if !self.accept(&f) {
            return;
        }
        if self.oversized(&f) {
            self.inc(ROC);
            return;
        }
        let parsed = parse(&f, self.r(VET) as u16);
        let rss = self.rss(&parsed);
        let n = rss.queue;
        // A disabled target queue drops the frame silently (QEMU).
        if self.r(rxq(n, Q_DCTL)) & DCTL_ENABLE == 0 {
            return;
        }
        let (base, size) = self.ring(rxq(n, Q_DBAL));
        let (head, tail) = (self.r(rxq(n, Q_DH)), self.r(rxq(n, Q_DT)));
        let buf_len = self.rx_buf_len(n);
        let mut data = f.clone();
        if self.r(RCTL) & RCTL_SECRC == 0 {
            // QEMU stores a fake all-zero FCS when CRC stripping is off.
            data.extend_from_slice(&[0; 4]);
        }
        let need = data.len().div_ceil(buf_len) as u32;
        let free = if size == 0 || head >= size || tail >= size {
            0
        } else {
            (tail + size - head) % size
        };
        if free < need {
            // No descriptors: the silicon counts a missed packet (QEMU only raises RXO).
            self.inc(MPC);
            self.inc(rxq(n, Q_RQDPC));
            self.raise_icr(ICR_RXO);
            return;
        }
        let mut descs = Vec::new();
        let mut idx = head;
        for _ in 0..need {
            let addr = base + 16 * u64::from(idx);
            let Some(d) = self.iommu.read(addr, 16) else {
                self.inc(MPC);
                return;
            };
            descs.push((addr, le64(&d, 0)));
            idx = (idx + 1) % size;
        }
        for (i, &(_, buf)) in descs.iter().enumerate() {
            let chunk = &data[i * buf_len..data.len().min((i + 1) * buf_len)];
            // A zero buffer address is skipped (QEMU, "as per intel docs").
            if buf != 0 && !self.iommu.write(buf, chunk) {
                self.inc(MPC);
                return;
            }
        }
        let ring = Ring::Rx(n as u16);
        let mut eicr = 0;
        let last = descs.len() - 1;
        for (i, &(addr, buf)) in descs.iter().enumerate() {
            let plan = self.plan(ring);
            let written = if buf == 0 {
                0
            } else {
                data.len().min((i + 1) * buf_len) - i * buf_len
            };
            let mut len = written as u16;
            if let Plan::Now {
                oversize: Some(extra),
                ..
            } = plan
            {
                len = (buf_len as u16).saturating_add(extra);
            }
            let (mut info, mut hash, mut status) = (0u32, 0u32, DESC_DD);
            if i == last {
                status |= RXD_EOP;
                if !crc_ok {
                    status |= RXD_ERR_RXE;
                }
                if rss.enabled {
                    info |= rss.kind;
                    hash = rss.hash;
                }
                if parsed.ipv4 {
                    info |= RXD_PKT_IPV4;
                }
                info |= parsed.l4;
            }
            let mut bytes = Vec::with_capacity(16);
            for dw in [info, hash, status, u32::from(len)] {
                bytes.extend_from_slice(&dw.to_le_bytes());
            }
            eicr |= self.writeback(
                ring,
                Write {
                    iova: addr,
                    bytes,
                    status_at: Some(8),
                },
                plan,
            );
        }
        self.w(rxq(n, Q_DH), idx);
        let octets = f.len() as u64 + 4;
        self.inc(GPRC);
        self.inc(TPR);
        self.add64(GORCL, octets);
        self.add64(TORL, octets);
        if f[0] & 1 != 0 {
            self.inc(if f[..6].iter().all(|&b| b == 0xff) {
                BPRC
            } else {
                MPRC
            });
        }
        if eicr != 0 {
            self.raise_eicr(eicr);
        }
        self.raise_icr(ICR_RXDW);
    }
}
