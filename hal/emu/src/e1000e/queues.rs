//! The 82574's DMA engine: transmit on a tail write, receive from the wire into extended
//! receive descriptors, descriptor write-back (with the injected device faults), and RSS over
//! the two receive queues.
//!
//! Descriptor layouts (datasheet 7.2.10 transmit, 7.1.5 receive; QEMU
//! `e1000e_process_tx_desc`, `e1000e_write_ext_rx_descr`): legacy transmit descriptors
//! (DEXT = 0) and extended data descriptors (DEXT = 1, DTYP bit 20 set) carry data; an extended
//! descriptor without DTYP bit 20 is a context descriptor, consumed without data. A transmit
//! write-back rewrites only the descriptor's upper dword, DD ORed into what the driver wrote.
//! Receive uses the extended descriptor (RFCTL.EXSTEN) — or the legacy one without it —, one
//! buffer per descriptor, of the size RCTL.FLXBUF or RCTL.BSIZE/BSEX gives; packet split
//! (RCTL.DTYP) is not modelled.
//!
//! As in the igb model, what happens on an IOMMU fault: a transmit ring stalls at the first
//! descriptor of the packet whose descriptor or buffer could not be read (nothing sent, nothing
//! written back, TDH stays); a received frame whose descriptor cannot be read or whose buffer
//! cannot be written is dropped and counted in MPC, RDH staying. (QEMU goes on with whatever
//! the failed DMA read returned; the model prefers a stall a flush can recover from.) A packet
//! without EOP before the tail waits for the rest, where QEMU would keep the pieces it has.

use super::model::{E1000eModel, TxCsum};
use super::regs::*;
use crate::csum;
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

impl E1000eModel {
    fn inc(&mut self, off: usize) {
        self.regs[off / 4] = self.regs[off / 4].saturating_add(1);
    }

    fn add64(&mut self, lo: usize, n: u64) {
        let v = (u64::from(self.r(lo + 4)) << 32 | u64::from(self.r(lo))).saturating_add(n);
        self.w(lo, v as u32);
        self.w(lo + 4, (v >> 32) as u32);
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

    fn ring(&self, dbal: usize) -> (u64, u32) {
        let base = u64::from(self.r(dbal + Q_DBAH - Q_DBAL)) << 32 | u64::from(self.r(dbal));
        (base, self.r(dbal + Q_DLEN) / 16)
    }

    /// Transmits everything between TDH and TDT on queue `n` (QEMU e1000e_start_xmit).
    pub(crate) fn transmit(&mut self, n: usize) {
        if self.r(TCTL) & TCTL_EN == 0 || !self.pci.bus_master() {
            return;
        }
        let ring = Ring::Tx(n as u16);
        let (base, size) = self.ring(txq(n, Q_DBAL));
        let tail = self.r(txq(n, Q_DT));
        let every_wb = self.r(IVAR) & IVAR_TX_INT_EVERY_WB != 0;
        // e1000e_start_xmit raises TXQE whenever it ran, and the queue's cause per write-back.
        let mut causes = ICR_TXQE;
        'packets: loop {
            let head = self.r(txq(n, Q_DH));
            // e1000e_ring_empty: head == tail, or a tail beyond the ring.
            if size == 0 || head == tail || tail >= size || head >= size {
                break;
            }
            let (mut idx, mut frame, mut used, mut done, mut data) =
                (head, Vec::new(), Vec::new(), false, false);
            let mut txsm = false;
            while idx != tail {
                let addr = base + 16 * u64::from(idx);
                let Some(desc) = self.engine.iommu.read(addr, 16) else {
                    break 'packets;
                };
                idx = (idx + 1) % size;
                let lower = le32(&desc, 8);
                used.push((addr, desc.clone()));
                if lower & (TXD_DEXT | TXD_DTYP_D) == TXD_DEXT {
                    // A context descriptor (7.2.10.2): consumed, no data, its checksum fields
                    // kept for the frames after it. Alone, it is done.
                    self.tx_csum[n] = Some(TxCsum {
                        start: usize::from(desc[4]),
                        field: usize::from(desc[5]),
                        end: usize::from(u16::from_le_bytes([desc[6], desc[7]])),
                    });
                    if used.len() == 1 {
                        done = true;
                        break;
                    }
                    continue;
                }
                if !data {
                    // POPTS is read from the frame's first data descriptor, and only from
                    // an extended one (a legacy descriptor's CSO/CSS are not modelled, as
                    // QEMU's e1000e ignores them).
                    txsm = lower & (TXD_DEXT | TXD_DTYP_D) == TXD_DEXT | TXD_DTYP_D
                        && le32(&desc, 12) & TXD_POPTS_TXSM != 0;
                }
                data = true;
                let len = (lower & 0xffff) as usize;
                if len > 0 {
                    let Some(bytes) = self.engine.iommu.read(le64(&desc, 0), len) else {
                        break 'packets;
                    };
                    frame.extend_from_slice(&bytes);
                }
                if lower & TXD_EOP != 0 {
                    done = true;
                    break;
                }
            }
            if !done {
                break;
            }
            if data {
                if let (true, Some(c)) = (txsm, self.tx_csum[n]) {
                    // TUCSE = 0 sums to the frame's end; otherwise through byte TUCSE.
                    let end = if c.end == 0 { frame.len() } else { c.end + 1 };
                    crate::csum::insert(&mut frame, c.start, c.field, end);
                }
                self.send(frame);
            }
            self.w(txq(n, Q_DH), idx);
            for (addr, desc) in used {
                if le32(&desc, 8) & TXD_RS == 0 && !every_wb {
                    continue;
                }
                let plan = self.engine.plan(ring);
                // e1000e_txdesc_writeback: the upper dword as read, DD ORed in, written alone.
                let upper = le32(&desc, 12) | DESC_DD;
                let w = Write {
                    iova: addr + 12,
                    bytes: upper.to_le_bytes().to_vec(),
                    status_at: Some(0),
                    slot: Some(Slot::of(base, size, addr, tail)),
                };
                let cause = Self::queue_cause(ring);
                if self.engine.writeback(ring, w, plan, Irq(cause, 0)) {
                    causes |= cause;
                }
            }
        }
        self.raise(ICR, causes);
    }

    fn send(&mut self, frame: Vec<u8>) {
        // e1000e_on_tx_done_update_stats: FCS included.
        let octets = frame.len() as u64 + 4;
        self.inc(TPT);
        self.add64(TOTL, octets);
        if frame[0] & 1 != 0 {
            self.inc(if frame[..6].iter().all(|&b| b == 0xff) {
                BPTC
            } else {
                MPTC
            });
        }
        self.inc(GPTC);
        self.add64(GOTCL, octets);
        // With the link down the frame is lost on the way out (QEMU's net layer drops it).
        if self.link_up() {
            self.outbox.push(frame);
        }
    }

    /// The receive filter (e1000e_receive_filter): VLAN table for tagged frames when RCTL.VFE
    /// is set, then broadcast, promiscuous, the 16 receive addresses and the multicast table.
    fn accept(&self, f: &[u8]) -> bool {
        let rctl = self.r(RCTL);
        let tagged = u16::from_be_bytes([f[12], f[13]]) == self.r(VET) as u16;
        if tagged && rctl & RCTL_VFE != 0 && f.len() >= 16 {
            let vid = usize::from(u16::from_be_bytes([f[14], f[15]]) & 0xfff);
            if self.r(VFTA + 4 * (vid >> 5)) & (1 << (vid & 31)) == 0 {
                return false;
            }
        }
        let ras: Vec<(u32, u32)> = (0..16)
            .map(|i| (self.r(RA + 8 * i), self.r(RA + 8 * i + 4)))
            .collect();
        crate::engine::accept(f, rctl, &ras, |i| self.r(MTA + 4 * i))
    }

    /// e1000x_is_oversized: past 16 KiB, or past 1522 bytes without RCTL.LPE, unless RCTL.SBP.
    fn oversized(&self, len: usize) -> bool {
        let rctl = self.r(RCTL);
        (len > 16 * 1024 || (len > 1522 && rctl & RCTL_LPE == 0)) && rctl & RCTL_SBP == 0
    }

    /// RSS (datasheet 7.1.2.10; QEMU e1000e_rss_parse_packet). Enabled only with MRQC = RSS,
    /// RXCSUM.PCSD and extended descriptors. IPv4 and TCP/IPv4 only: the 82574 has no UDP hash,
    /// and IPv6 is not modelled. The queue is bit 7 of the RETA byte the hash's low 7 bits pick.
    fn rss(&self, p: &Parsed) -> Rss {
        let mrqc = self.r(MRQC);
        let enabled = mrqc & MRQC_ENABLE_MASK == MRQC_ENABLE_RSS
            && self.r(RXCSUM) & RXCSUM_PCSD != 0
            && self.r(RFCTL) & RFCTL_EXTEN != 0;
        if !enabled {
            return Rss::default();
        }
        let none = Rss {
            enabled: true,
            ..Rss::default()
        };
        let Some((src, dst, ports)) = p.tuple else {
            return none;
        };
        let mut key = [0u8; toeplitz::KEY_LEN];
        for (i, chunk) in key.chunks_mut(4).enumerate() {
            chunk.copy_from_slice(&self.r(RSSRK + 4 * i).to_le_bytes());
        }
        let (kind, hash) = match ports {
            Some((sp, dp)) if p.l4 == L4::Tcp && mrqc & MRQC_TCPIPV4 != 0 => (
                RSS_TYPE_TCPV4,
                toeplitz::hash(&key, &toeplitz::ipv4_ports_input(src, dst, sp, dp)),
            ),
            _ if mrqc & MRQC_IPV4 != 0 => (
                RSS_TYPE_IPV4,
                toeplitz::hash(&key, &toeplitz::ipv4_input(src, dst)),
            ),
            _ => return none,
        };
        let idx = (hash & 0x7f) as usize;
        let entry = (self.r(RETA + 4 * (idx / 4)) >> (8 * (idx % 4))) & 0xff;
        Rss {
            enabled: true,
            hash,
            kind,
            queue: (entry >> 7) as usize,
        }
    }

    /// Bytes per receive buffer (e1000e_parse_rxbufsize without packet split).
    fn rx_buf_len(&self) -> usize {
        let rctl = self.r(RCTL);
        let flx = (rctl >> RCTL_FLXBUF_SHIFT) & 0xf;
        if flx != 0 {
            return flx as usize * 1024;
        }
        let code = (rctl >> RCTL_BSIZE_SHIFT) & 3;
        match (rctl & RCTL_BSEX != 0, code) {
            (true, 1) => 16384,
            (true, 2) => 8192,
            (true, 3) => 4096,
            (false, 1) => 1024,
            (false, 2) => 512,
            (false, 3) => 256,
            _ => 2048,
        }
    }

    /// Status, MRQ and high dword of a frame's last write-back (e1000e_build_rx_metadata, no
    /// virtio header, no VLAN stripping).
    fn metadata(&self, f: &[u8], p: &Parsed, rss: &Rss) -> (u32, u32, u32) {
        let mut status = DESC_DD | RXD_EOP;
        let (mut mrq, mut hi) = (0, 0);
        let l3 = if u16::from_be_bytes([f[12], f[13]]) == self.r(VET) as u16 {
            18
        } else {
            14
        };
        if self.r(RXCSUM) & RXCSUM_PCSD != 0 {
            if rss.enabled {
                hi = rss.hash;
                mrq = rss.kind | (rss.queue as u32) << 8;
            }
        } else if p.ipv4 {
            status |= RXD_IPIDV;
            hi = u32::from(u16::from_be_bytes([f[l3 + 4], f[l3 + 5]]));
        }
        let tcp_ack = p.l4 == L4::Tcp && {
            // The ACK flag, and (with RFCTL.ACK_DATA_DIS) no payload.
            let ihl = usize::from(f[l3] & 0xf) * 4;
            let tcp = l3 + ihl;
            let ack = f.get(tcp + 13).is_some_and(|&fl| fl & 0x10 != 0);
            let data_off = f.get(tcp + 12).map_or(20, |&o| usize::from(o >> 4) * 4);
            let total = usize::from(u16::from_be_bytes([f[l3 + 2], f[l3 + 3]]));
            let has_data = total > ihl + data_off;
            ack && (self.r(RFCTL) & RFCTL_ACK_DATA_DIS == 0 || !has_data)
        };
        if tcp_ack {
            status |= RXD_ACK;
        }
        let pkt_type = match (p.ipv4, p.l4) {
            (true, L4::Tcp | L4::Udp) => PKT_IP4_XDP,
            (true, L4::None) => PKT_IP4,
            _ => 0,
        };
        status |= pkt_type << RXD_PKT_TYPE_SHIFT;
        // e1000e_verify_csum_in_sw: checksums are checked only when offloaded.
        let rxcsum = self.r(RXCSUM);
        if p.ipv4 && rxcsum & RXCSUM_IPOFLD != 0 {
            if let Some(ok) = csum::ipv4_ok(f, l3) {
                status |= RXD_IPCS | if ok { 0 } else { RXD_ERR_IPE };
            }
        }
        if rxcsum & RXCSUM_TUOFLD != 0 && p.l4 != L4::None {
            if let Some(ok) = csum::l4_ok(f, l3, p.l4 == L4::Udp) {
                status |= RXD_TCPCS | if ok { 0 } else { RXD_ERR_TCPE };
                if p.l4 == L4::Udp {
                    status |= RXD_UDPCS;
                }
            }
        }
        (status, mrq, hi)
    }

    /// A frame from the wire (QEMU e1000e_receive_internal).
    pub(crate) fn receive(&mut self, frame: &[u8], crc_ok: bool) {
        // e1000x_hw_rx_enabled / e1000x_rx_ready: link, receiver and bus mastering.
        if self.r(RCTL) & RCTL_EN == 0 || !self.link_up() || frame.len() < 14 {
            return;
        }
        if !self.pci.bus_master() {
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
        if self.oversized(f.len()) {
            self.inc(ROC);
            return;
        }
        if !self.accept(&f) {
            return;
        }
        if f[0] & 1 != 0 && f[..6].iter().any(|&b| b != 0xff) {
            self.inc(MPRC);
        }
        let parsed = parse(&f, self.r(VET) as u16);
        let rss = self.rss(&parsed);
        let n = rss.queue;
        let (base, size) = self.ring(rxq(n, Q_DBAL));
        let (head, tail) = (self.r(rxq(n, Q_DH)), self.r(rxq(n, Q_DT)));
        let buf_len = self.rx_buf_len();
        let mut data = f.clone();
        if self.r(RCTL) & RCTL_SECRC == 0 {
            // QEMU writes a zero FCS when CRC stripping is off, and counts it in the length.
            data.extend_from_slice(&[0; 4]);
        }
        // e1000e_has_rxbufs: the free descriptors (tail - head, no slot kept empty) must hold
        // the whole frame.
        let free = if head <= tail {
            tail - head
        } else {
            size + tail - head
        };
        let need = data.len().div_ceil(buf_len) as u32;
        if free < need || size == 0 || tail >= size || head >= size {
            // No descriptors: the silicon counts a missed packet (QEMU only raises RXO).
            self.inc(MPC);
            self.raise(ICR, ICR_RXO);
            return;
        }
        let mut descs = Vec::new();
        let mut idx = head;
        for _ in 0..need {
            let addr = base + 16 * u64::from(idx);
            let Some(d) = self.engine.iommu.read(addr, 16) else {
                self.inc(MPC);
                return;
            };
            descs.push((addr, le64(&d, 0)));
            idx = (idx + 1) % size;
        }
        for (i, &(_, buf)) in descs.iter().enumerate() {
            let chunk = &data[i * buf_len..data.len().min((i + 1) * buf_len)];
            // A zero buffer address is skipped ("as per intel docs", QEMU).
            if buf != 0 && !self.engine.iommu.write(buf, chunk) {
                self.inc(MPC);
                return;
            }
        }
        let ring = Ring::Rx(n as u16);
        let cause = Self::queue_cause(ring);
        let extended = self.r(RFCTL) & RFCTL_EXTEN != 0;
        let mut causes = 0;
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
            let (mut status, mut mrq, mut hi) = (DESC_DD, 0, 0);
            if i == last {
                (status, mrq, hi) = self.metadata(&f, &parsed, &rss);
                if !crc_ok {
                    status |= RXD_ERR_RXE;
                }
            }
            let (bytes, status_at) = if extended {
                // Extended write-back: MRQ, RSS hash (or IP id), status/errors, length, VLAN.
                let mut b = Vec::with_capacity(16);
                for dw in [mrq, hi, status, u32::from(len)] {
                    b.extend_from_slice(&dw.to_le_bytes());
                }
                (b, 8)
            } else {
                // Legacy write-back: buffer address kept, length, checksum 0, status byte,
                // errors byte (bits 31:24), special 0.
                let mut b = buf.to_le_bytes().to_vec();
                b.extend_from_slice(&len.to_le_bytes());
                b.extend_from_slice(&[0, 0, status as u8, (status >> 24) as u8, 0, 0]);
                (b, 12)
            };
            let w = Write {
                iova: addr,
                bytes,
                status_at: Some(status_at),
                slot: Some(Slot::of(base, size, addr, tail)),
            };
            if self.engine.writeback(ring, w, plan, Irq(cause, 0)) {
                causes |= cause;
            }
        }
        self.w(rxq(n, Q_DH), idx);
        // e1000x_update_rx_total_stats: QEMU copies TPR into GPRC and TOR into GORC.
        let octets = f.len() as u64 + 4;
        self.inc(TPR);
        self.add64(TORL, octets);
        self.w(GPRC, self.r(TPR));
        self.w(GORCL, self.r(TORL));
        self.w(GORCH, self.r(TORH));
        if f[..6].iter().all(|&b| b == 0xff) {
            self.inc(BPRC);
        }
        if (data.len() as u32) < self.r(RSRPD) {
            causes |= ICR_SRPD;
        }
        if self.r(RFCTL) & RFCTL_ACK_DIS == 0 && parsed.l4 == L4::Tcp {
            // ACK detection shares the metadata's test.
            let (status, _, _) = self.metadata(&f, &parsed, &rss);
            if status & RXD_ACK != 0 {
                causes |= ICR_ACK;
            }
        }
        self.raise(ICR, causes);
    }
}
