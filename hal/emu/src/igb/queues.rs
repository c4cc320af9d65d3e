//! The DMA engine: transmit on a tail write, receive from the wire, descriptor write-back (with
//! the injected device faults), and queue selection: RSS, or VMDq pools by destination address.
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
use crate::engine::{le32, le64, parse, Irq, Parsed, Plan, Slot, Write, L4};
use crate::fault::Ring;
use crate::toeplitz;

#[derive(Clone, Copy, Default)]
struct Rss {
    enabled: bool,
    hash: u32,
    kind: u32,
    queue: usize,
}

/// The write-back's packet-type bit of a parsed layer-4 protocol.
fn l4_bits(l4: L4) -> u32 {
    match l4 {
        L4::Tcp => RXD_PKT_TCP,
        L4::Udp => RXD_PKT_UDP,
        L4::None => 0,
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

    /// Performs (or holds back) one write-back; returns the EICR causes to raise now.
    fn writeback(&mut self, ring: Ring, w: Write, plan: Plan) -> u32 {
        let eicr = self.ivar_bit(ring);
        let icr = if matches!(ring, Ring::Tx(_)) {
            ICR_TXDW
        } else {
            ICR_RXDW
        };
        if self.engine.writeback(ring, w, plan, Irq(eicr, icr)) {
            eicr
        } else {
            0
        }
    }

    /// One step of deferred work: delayed write-backs whose time has come, with their
    /// interrupts. Returns whether any deferred work remains.
    pub(crate) fn step(&mut self) -> bool {
        let (irqs, more) = self.engine.step();
        for Irq(eicr, icr) in irqs {
            self.raise_eicr(eicr);
            self.raise_icr(icr);
        }
        more
    }

    /// Every descriptor ring programmed (base and length in bytes, both directions, every
    /// queue with a length): the memory this device writes descriptors back into.
    pub(crate) fn rings(&self) -> Vec<(u64, u64)> {
        (0..QUEUES)
            .flat_map(|n| [rxq(n, Q_DBAL), txq(n, Q_DBAL)])
            .map(|off| self.ring(off))
            .filter(|&(_, size)| size > 0)
            .map(|(base, size)| (base, 16 * u64::from(size)))
            .collect()
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
            let mut csum = None;
            while idx != tail {
                let addr = base + 16 * u64::from(idx);
                let Some(desc) = self.engine.iommu.read(addr, 16) else {
                    break 'packets;
                };
                idx = (idx + 1) % size;
                let cmd = le32(&desc, 8);
                let buf = le64(&desc, 0);
                let is_data = cmd & TXD_DEXT == 0 || cmd & TXD_DTYP_MASK == TXD_DTYP_DATA;
                if cmd & TXD_DEXT != 0 && cmd & TXD_DTYP_MASK == TXD_DTYP_CTXT {
                    self.load_context(n, &desc);
                }
                if is_data && !data && cmd & TXD_DEXT != 0 {
                    // POPTS and IDX count in the frame's first data descriptor (7.2.2.3;
                    // QEMU `first_olinfo_status`).
                    let olinfo = le32(&desc, 12);
                    if olinfo & TXD_POPTS_TXSM != 0 {
                        csum = self.tx_ctx[n][(olinfo as usize >> 4) & 1];
                    }
                }
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
                    let Some(bytes) = self.engine.iommu.read(buf, len) else {
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
                if let Some((start, offset)) = csum {
                    let end = frame.len();
                    crate::csum::insert(&mut frame, start, start + offset, end);
                }
                self.send(frame);
            }
            self.w(txq(n, Q_DH), idx);
            let head_wb =
                u64::from(self.r(txq(n, Q_TDWBAH))) << 32 | u64::from(self.r(txq(n, Q_TDWBAL)));
            for (addr, mut desc) in used {
                if le32(&desc, 8) & TXD_RS == 0 {
                    continue;
                }
                let plan = self.engine.plan(ring);
                wrote = true;
                let w = if head_wb & 1 != 0 {
                    // Head write-back (TDWBAL bit 0): the new head instead of DD.
                    Write {
                        iova: head_wb & !3,
                        bytes: idx.to_le_bytes().to_vec(),
                        status_at: None,
                        slot: None,
                    }
                } else {
                    // QEMU igb_txdesc_writeback: the descriptor as read, with DD in dword 3.
                    let s = le32(&desc, 12) | DESC_DD;
                    desc[12..16].copy_from_slice(&s.to_le_bytes());
                    Write {
                        iova: addr,
                        bytes: desc,
                        status_at: Some(12),
                        slot: Some(Slot::of(base, size, addr, tail)),
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

    /// An advanced context descriptor (7.2.2.2; QEMU `igb_process_tx_desc`): kept in the slot
    /// `mss_l4len_idx` names (bit 4: QEMU keeps two), for the frames whose data descriptors
    /// ask for it. The L4 header starts at MACLEN (`vlan_macip_lens` 15:9) + IPLEN (8:0); L4T
    /// (`type_tucmd_mlhl` 12:11) places its checksum field: UDP's at 6, TCP's at 16.
    fn load_context(&mut self, n: usize, desc: &[u8]) {
        let macip = le32(desc, 0);
        let tucmd = le32(desc, 8);
        let slot = (le32(desc, 12) as usize >> 4) & 1;
        let start = ((macip >> 9) & 0x7f) as usize + (macip & 0x1ff) as usize;
        let offset = match (tucmd >> 11) & 3 {
            0 => Some(6),
            1 => Some(16),
            _ => None,
        };
        self.tx_ctx[n][slot] = offset.map(|o| (start, o));
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
        let ras: Vec<(u32, u32)> = (0..16)
            .map(|i| RA + 8 * i)
            .chain((0..8).map(|i| RA2 + 8 * i))
            .map(|ra| (self.r(ra), self.r(ra + 4)))
            .collect();
        crate::engine::accept(f, self.r(RCTL), &ras, |i| self.r(MTA + 4 * i))
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
            Some((sp, dp)) if p.l4 == L4::Tcp && mrqc & MRQC_TCPIPV4 != 0 => (
                RSS_TYPE_TCPV4,
                toeplitz::hash(&key, &toeplitz::ipv4_ports_input(src, dst, sp, dp)),
            ),
            Some((sp, dp)) if p.l4 == L4::Udp && mrqc & MRQC_UDPIPV4 != 0 => (
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

    /// The 12-bit MTA/UTA hash index of a destination address (RCTL.MO picks the bits;
    /// QEMU `ta_shift`).
    fn table_hit(&self, table: usize, dst: &[u8]) -> bool {
        let shift = [4, 3, 2, 0][((self.r(RCTL) >> RCTL_MO_SHIFT) & 3) as usize];
        let h = ((u32::from(dst[5]) << 8 | u32::from(dst[4])) >> shift) & 0xfff;
        self.r(table + 4 * (h as usize >> 5)) & (1 << (h & 31)) != 0
    }

    /// Pools `0..VM_POOLS` whose VMOLR has any of `bits`, as a queue mask.
    fn pools_with(&self, bits: u32) -> u16 {
        (0..VM_POOLS)
            .filter(|&i| self.r(VMOLR0 + 4 * i) & bits != 0)
            .fold(0, |m, i| m | 1 << i)
    }

    /// Whether `f` is too long for pool `pool` (QEMU igb_rx_is_oversized with VMOLR.LPE/RLPML).
    fn pool_oversized(&self, pool: usize, f: &[u8]) -> bool {
        let vmolr = self.r(VMOLR0 + 4 * pool);
        let vlan = u16::from_be_bytes([f[12], f[13]]) == self.r(VET) as u16;
        if vmolr & VMOLR_LPE != 0 {
            f.len() + 4 > (vmolr & VMOLR_RLPML_MASK) as usize
        } else {
            f.len() > 14 + 1500 + if vlan { 4 } else { 0 }
        }
    }

    /// VMDq pool selection (MRQC bit 0 set; QEMU igb_receive_assign, VMDq branch): the queues
    /// (pool n = queue n) a frame goes to, possibly several. RCTL.UPE/MPE/BAM are not
    /// consulted, as in QEMU: broadcast goes to the pools with VMOLR.BAM; an address matching
    /// a valid RAL/RAH entry (0..15, then RA2 16..23) to every pool in that entry's POOLSEL;
    /// an address matching none but hitting the MTA (multicast) or UTA (unicast) hash to the
    /// pools with VMOLR.ROMPE; unicast that found no pool to VT_CTL's default pool unless
    /// VT_CTL.DIS_DEF_POOL; then masked by VFRE, and pools for which the frame is too long
    /// (VMOLR.LPE/RLPML) dropped, ROC counted if that was all of them. RSS is never enabled in
    /// this mode (QEMU needs MRQC bits 1:0 = 10b for it), so queues 8..15 never receive. The
    /// VLAN pool filter (RCTL.VFE with VLVF/VMOLR.AUPE) is not modelled: the model does no
    /// VLAN filtering in either mode.
    fn vmdq_queues(&mut self, f: &[u8]) -> u16 {
        let dst = &f[..6];
        let multicast = dst[0] & 1 != 0;
        let mut queues = 0u16;
        if dst.iter().all(|&b| b == 0xff) {
            queues = self.pools_with(VMOLR_BAM);
        } else {
            let entries = (0..16)
                .map(|i| RA + 8 * i)
                .chain((0..8).map(|i| RA2 + 8 * i));
            for ra in entries {
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
                    queues |= ((hi & RAH_POOL_MASK) >> RAH_POOL_SHIFT) as u16;
                }
            }
            if queues == 0 && self.table_hit(if multicast { MTA } else { UTA }, dst) {
                queues = self.pools_with(VMOLR_ROMPE);
            }
        }
        let vt_ctl = self.r(VT_CTL);
        if !multicast && queues == 0 && vt_ctl & VT_CTL_DIS_DEF_POOL == 0 {
            queues = 1 << ((vt_ctl & VT_CTL_DEF_POOL_MASK) >> VT_CTL_DEF_POOL_SHIFT);
        }
        queues &= self.r(VFRE) as u16;
        if queues != 0 {
            let oversized = (0..VM_POOLS)
                .filter(|&i| queues & 1 << i != 0 && self.pool_oversized(i, f))
                .fold(0u16, |m, i| m | 1 << i);
            if oversized == queues {
                self.inc(ROC);
            }
            queues &= !oversized;
        }
        queues
    }

    /// The checksum status and error bits of a received frame's write-back (7.1.x, "Receive
    /// checksum offloading"; QEMU `igb_rx_checksum`): with RXCSUM.IPOFLD an IPv4 header's
    /// checksum is checked (IPCS, IPE if wrong); with RXCSUM.TUOFLD an unfragmented TCP or UDP
    /// packet's (L4I, and UDPCS for UDP; L4E if wrong) — not a UDP checksum of zero, which
    /// says none was computed. PCSD does not turn this off: it only puts the RSS hash where
    /// the write-back would carry the fragment checksum.
    fn rx_checksum(&self, f: &[u8], parsed: &Parsed) -> u32 {
        let rxcsum = self.r(RXCSUM);
        let Some(l3) = parsed.l3 else { return 0 };
        let mut status = 0;
        if rxcsum & RXCSUM_IPOFLD != 0 {
            if let Some(ok) = crate::csum::ipv4_ok(f, l3) {
                status |= RXD_IPCS | if ok { 0 } else { RXD_ERR_IPE };
            }
        }
        if rxcsum & RXCSUM_TUOFLD != 0 && parsed.l4 != L4::None {
            let udp = parsed.l4 == L4::Udp;
            if let Some(ok) = crate::csum::l4_ok(f, l3, udp) {
                status |= RXD_L4I | if ok { 0 } else { RXD_ERR_L4E };
                if udp {
                    status |= RXD_UDPCS;
                }
            }
        }
        status
    }

    /// A frame from the wire (QEMU igb_receive_internal): the queues it goes to are chosen by
    /// VMDq pools (MRQC bit 0) or by the accept filter and RSS, then written to each of them.
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
        let parsed = parse(&f, self.r(VET) as u16);
        let (queues, rss) = if self.r(MRQC) & MRQC_VMDQ != 0 {
            // The device-wide length check (RCTL.LPE/RLPML) comes first in both modes.
            if self.oversized(&f) {
                self.inc(ROC);
                return;
            }
            (self.vmdq_queues(&f), Rss::default())
        } else {
            if !self.accept(&f) {
                return;
            }
            if self.oversized(&f) {
                self.inc(ROC);
                return;
            }
            let rss = self.rss(&parsed);
            (1u16 << rss.queue, rss)
        };
        let mut data = f.clone();
        if self.r(RCTL) & RCTL_SECRC == 0 {
            // QEMU stores a fake all-zero FCS when CRC stripping is off.
            data.extend_from_slice(&[0; 4]);
        }
        let (mut eicr, mut icr) = (0, 0);
        for n in (0..QUEUES).filter(|&n| queues & 1 << n != 0) {
            if let Some(e) = self.deliver(n, &f, &data, &parsed, rss, crc_ok) {
                eicr |= e;
                icr |= ICR_RXDW;
            }
        }
        if eicr != 0 {
            self.raise_eicr(eicr);
        }
        if icr != 0 {
            self.raise_icr(icr);
        }
    }

    /// Writes one received frame to queue `n` (QEMU: one turn of the igb_receive_internal
    /// loop). Returns the EICR causes to raise if the frame was written, `None` if not: the
    /// queue is disabled (dropped silently, as QEMU does), has too few descriptors (MPC,
    /// RQDPC, ICR.RXO) or its DMA faulted (MPC).
    fn deliver(
        &mut self,
        n: usize,
        f: &[u8],
        data: &[u8],
        parsed: &Parsed,
        rss: Rss,
        crc_ok: bool,
    ) -> Option<u32> {
        if self.r(rxq(n, Q_DCTL)) & DCTL_ENABLE == 0 {
            return None;
        }
        let (base, size) = self.ring(rxq(n, Q_DBAL));
        let (head, tail) = (self.r(rxq(n, Q_DH)), self.r(rxq(n, Q_DT)));
        let buf_len = self.rx_buf_len(n);
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
            return None;
        }
        let mut descs = Vec::new();
        let mut idx = head;
        for _ in 0..need {
            let addr = base + 16 * u64::from(idx);
            let Some(d) = self.engine.iommu.read(addr, 16) else {
                self.inc(MPC);
                return None;
            };
            descs.push((addr, le64(&d, 0)));
            idx = (idx + 1) % size;
        }
        for (i, &(_, buf)) in descs.iter().enumerate() {
            let chunk = &data[i * buf_len..data.len().min((i + 1) * buf_len)];
            // A zero buffer address is skipped (QEMU, "as per intel docs").
            if buf != 0 && !self.engine.iommu.write(buf, chunk) {
                self.inc(MPC);
                return None;
            }
        }
        let ring = Ring::Rx(n as u16);
        let mut eicr = 0;
        let last = descs.len() - 1;
        // `DeviceFault::CutFrame`: the device stops before the piece with EOP.
        let cut = last > 0 && self.engine.take_cut_frame(ring);
        for (i, &(addr, buf)) in descs.iter().enumerate() {
            if cut && i == last {
                continue;
            }
            let plan = self.engine.plan(ring);
            let written = if buf == 0 {
                0
            } else {
                data.len().min((i + 1) * buf_len) - i * buf_len
            };
            let mut len = written as u16;
            if let Plan::Now {
                oversize, length, ..
            } = plan
            {
                if let Some(extra) = oversize {
                    len = (buf_len as u16).saturating_add(extra);
                }
                // `DeviceFault::ExactLength`: the length field says exactly this.
                len = length.unwrap_or(len);
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
                info |= l4_bits(parsed.l4);
                status |= self.rx_checksum(f, parsed);
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
                    slot: Some(Slot::of(base, size, addr, tail)),
                },
                plan,
            );
        }
        self.w(rxq(n, Q_DH), idx);
        // Counted per copy written, as QEMU's igb_update_rx_stats in igb_write_packet_to_guest.
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
        Some(eicr)
    }
}
