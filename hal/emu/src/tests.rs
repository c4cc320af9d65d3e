//! Register-level tests: a test drives the model through its platform exactly as a driver would
//! (MMIO, DMA memory, descriptors), with no driver crate involved.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ringfab_hal::{DmaRegion, Iova, MacAddr, Mmio, Platform, Wait};

use crate::igb::pci::{CMD_BUS_MASTER, COMMAND};
use crate::igb::regs::*;
use crate::*;

const MAC_A: MacAddr = MacAddr([0x52, 0x54, 0, 0, 0, 0xa]);
const MAC_B: MacAddr = MacAddr([0x52, 0x54, 0, 0, 0, 0xb]);
const RING: u32 = 16;
const BUF: usize = 2048;

fn dev(mac: MacAddr) -> EmuIgb {
    EmuIgb::new(IgbModelConfig {
        mac,
        ..IgbModelConfig::default()
    })
}

/// A test's stand-in for a driver: one platform, BAR0, and rings it set up itself.
struct Nic {
    dev: EmuIgb,
    p: EmuPlatform,
    bar: EmuMmio,
    tx: Vec<(EmuDma, EmuDma, u32)>,
    rx: Vec<(EmuDma, EmuDma)>,
}

impl Nic {
    fn new(dev: &EmuIgb) -> Nic {
        let p = dev.platform();
        let bar = p.bar(0).unwrap();
        Nic {
            dev: dev.clone(),
            p,
            bar,
            tx: Vec::new(),
            rx: Vec::new(),
        }
    }

    fn rd(&self, off: usize) -> u32 {
        self.bar.read32(off)
    }

    fn wr(&self, off: usize, v: u32) {
        self.bar.write32(off, v)
    }

    fn phy_write(&self, reg: u32, val: u16) {
        self.wr(
            MDIC,
            u32::from(val) | reg << 16 | PHY_ADDR << 21 | MDIC_OP_WRITE,
        );
        assert_ne!(self.rd(MDIC) & MDIC_READY, 0);
    }

    fn phy_read(&self, reg: u32) -> u32 {
        self.wr(MDIC, reg << 16 | PHY_ADDR << 21 | MDIC_OP_READ);
        self.rd(MDIC)
    }

    /// Link up, RX on (broadcast, CRC stripped), TX on, queue 0 both ways.
    fn up(dev: &EmuIgb) -> Nic {
        let mut n = Nic::new(dev);
        n.phy_write(0, 0x1340);
        n.p.delay(Duration::from_millis(600));
        assert_ne!(n.rd(STATUS) & STATUS_LU, 0);
        n.wr(RCTL, RCTL_EN | RCTL_BAM | RCTL_SECRC);
        n.wr(TCTL, TCTL_EN | 0xf0);
        n.add_tx();
        n.add_rx(RING - 1);
        n
    }

    fn add_tx(&mut self) {
        let q = self.tx.len();
        let ring = self.p.alloc_dma(16 * RING as usize).unwrap();
        let data = self.p.alloc_dma(RING as usize * BUF).unwrap();
        self.wr(txq(q, Q_DBAL), ring.iova().0 as u32);
        self.wr(txq(q, Q_DBAH), (ring.iova().0 >> 32) as u32);
        self.wr(txq(q, Q_DLEN), 16 * RING);
        self.wr(txq(q, Q_DH), 0);
        self.wr(txq(q, Q_DT), 0);
        self.wr(txq(q, Q_DCTL), DCTL_ENABLE | 1 << 16);
        self.tx.push((ring, data, 0));
    }

    fn add_rx(&mut self, post: u32) {
        let q = self.rx.len();
        let ring = self.p.alloc_dma(16 * RING as usize).unwrap();
        let bufs = self.p.alloc_dma(RING as usize * BUF).unwrap();
        self.wr(rxq(q, Q_DCTL), 0);
        self.wr(rxq(q, Q_DBAL), ring.iova().0 as u32);
        self.wr(rxq(q, Q_DBAH), (ring.iova().0 >> 32) as u32);
        self.wr(rxq(q, Q_DLEN), 16 * RING);
        self.wr(rxq(q, Q_SRRCTL), (BUF / 1024) as u32 | 1 << 25);
        self.wr(rxq(q, Q_DH), 0);
        self.wr(rxq(q, Q_DT), 0);
        self.wr(rxq(q, Q_DCTL), DCTL_ENABLE);
        for i in 0..RING as usize {
            ring.write_u64(16 * i, bufs.iova().0 + (i * BUF) as u64);
            ring.write_u64(16 * i + 8, 0);
        }
        self.wr(rxq(q, Q_DT), post);
        self.rx.push((ring, bufs));
    }

    /// Queues one single-descriptor frame on TX queue `q` and rings the doorbell.
    fn send_on(&mut self, q: usize, frame: &[u8], advanced: bool, rs: bool) -> usize {
        let (ring, data, tail) = &mut self.tx[q];
        let slot = *tail as usize;
        let off = slot * BUF;
        write_bytes(data, off, frame);
        let mut cmd = frame.len() as u32 | TXD_EOP | 1 << 25;
        if rs {
            cmd |= TXD_RS;
        }
        if advanced {
            cmd |= TXD_DEXT | TXD_DTYP_DATA;
        }
        ring.write_u64(16 * slot, data.iova().0 + off as u64);
        ring.write_u32(16 * slot + 8, cmd);
        ring.write_u32(16 * slot + 12, (frame.len() as u32) << 14);
        *tail = (*tail + 1) % RING;
        let t = *tail;
        self.wr(txq(q, Q_DT), t);
        slot
    }

    fn send(&mut self, frame: &[u8]) -> usize {
        self.send_on(0, frame, true, true)
    }

    /// The write-back of RX descriptor `i` of queue `q`: (status/error, length, rss hash, info).
    fn rx_wb(&self, q: usize, i: usize) -> (u32, u32, u32, u32) {
        let ring = &self.rx[q].0;
        let s = ring.read_u32(16 * i + 8);
        let l = ring.read_u32(16 * i + 12) & 0xffff;
        (s, l, ring.read_u32(16 * i + 4), ring.read_u32(16 * i))
    }

    fn rx_data(&self, q: usize, i: usize, len: usize) -> Vec<u8> {
        read_bytes(&self.rx[q].1, i * BUF, len)
    }

    fn tx_status(&self, q: usize, slot: usize) -> u32 {
        self.tx[q].0.read_u32(16 * slot + 12)
    }
}

fn write_bytes(d: &EmuDma, off: usize, bytes: &[u8]) {
    for (i, c) in bytes.chunks(4).enumerate() {
        let mut w = [0u8; 4];
        w[..c.len()].copy_from_slice(c);
        d.write_u32(off + 4 * i, u32::from_le_bytes(w));
    }
}

fn read_bytes(d: &EmuDma, off: usize, len: usize) -> Vec<u8> {
    let mut v = Vec::new();
    for i in 0..len.div_ceil(4) {
        v.extend_from_slice(&d.read_u32(off + 4 * i).to_le_bytes());
    }
    v.truncate(len);
    v
}

fn udp_frame(dst: MacAddr, src: MacAddr, sip: [u8; 4], dip: [u8; 4], sp: u16, dp: u16) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&dst.0);
    f.extend_from_slice(&src.0);
    f.extend_from_slice(&0x0800u16.to_be_bytes());
    let total = 20u16 + 8 + 32;
    f.extend_from_slice(&[0x45, 0, 0, 0]);
    f[16..18].copy_from_slice(&total.to_be_bytes());
    f.extend_from_slice(&[0, 1, 0, 0, 64, 17, 0, 0]);
    f.extend_from_slice(&sip);
    f.extend_from_slice(&dip);
    f.extend_from_slice(&sp.to_be_bytes());
    f.extend_from_slice(&dp.to_be_bytes());
    f.extend_from_slice(&(8u16 + 32).to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend((0..32).map(|i| i as u8));
    f
}

fn frame_to(dst: MacAddr, len: usize) -> Vec<u8> {
    let mut f = udp_frame(dst, MAC_A, [10, 0, 0, 1], [10, 0, 0, 2], 1000, 2000);
    f.resize(len, 0xab);
    f
}

fn pair() -> (Wire, Nic, Nic) {
    let wire = Wire::new();
    let (a, b) = (dev(MAC_A), dev(MAC_B));
    a.connect(&wire);
    b.connect(&wire);
    let (na, nb) = (Nic::up(&a), Nic::up(&b));
    (wire, na, nb)
}

// ---------------------------------------------------------------- registers, PHY, link, PCI

#[test]
fn pci_config_space_identifies_an_82576_with_bus_master_on() {
    let p = dev(MAC_A).platform();
    assert_eq!(p.config_read32(0), 0x10c9_8086);
    assert_ne!(p.config_read32(4) & u32::from(CMD_BUS_MASTER), 0);
    assert_eq!(p.config_read32(2), 0xffff_ffff);
    assert_eq!(p.irq_vectors(), 10);
    assert!(p.irq(10).is_err());
}

#[test]
fn mmio_outside_the_bar_or_misaligned_reads_all_ones_and_drops_writes() {
    let n = Nic::new(&dev(MAC_A));
    assert_eq!(n.bar.len(), 0x2_0000);
    assert_eq!(n.rd(0x2_0000), 0xffff_ffff);
    assert_eq!(n.rd(usize::MAX - 1), 0xffff_ffff);
    assert_eq!(n.rd(RCTL + 1), 0xffff_ffff);
    n.wr(RCTL + 2, 0xffff_ffff);
    assert_eq!(n.rd(RCTL), 0);
}

#[test]
fn reset_restores_defaults_and_reloads_the_mac() {
    let n = Nic::new(&dev(MAC_A));
    n.wr(RCTL, RCTL_EN);
    n.wr(RA, 0x1234_5678);
    n.wr(RA + 4, 0);
    n.wr(rxq(3, Q_DCTL), DCTL_ENABLE);
    n.wr(IMS, ICR_LSC);
    n.wr(CTRL, n.rd(CTRL) | CTRL_RST);
    assert_eq!(n.rd(CTRL) & CTRL_RST, 0, "RST is self-clearing");
    assert_eq!(n.rd(CTRL), 0x0010_0209);
    assert_eq!(n.rd(RCTL), 0);
    assert_eq!(n.rd(IMS), 0);
    assert_eq!(n.rd(TCTL), 0xa404_00f8);
    assert_eq!(n.rd(rxq(3, Q_DCTL)) & DCTL_ENABLE, 0);
    assert_ne!(n.rd(rxq(0, Q_DCTL)) & DCTL_ENABLE, 0);
    assert_eq!(n.rd(RA), u32::from_le_bytes([0x52, 0x54, 0, 0]));
    assert_eq!(n.rd(RA + 4), 0x0a00 | RAH_AV);
    assert_eq!(
        n.rd(STATUS) & STATUS_LU,
        0,
        "link is down until autonegotiation is restarted"
    );
}

#[test]
fn eeprom_read_returns_the_mac_words() {
    let n = Nic::new(&dev(MAC_A));
    n.wr(EERD, 1 << 2 | EERD_START);
    let v = n.rd(EERD);
    assert_ne!(v & EERD_DONE, 0);
    assert_eq!(v >> 16, 0);
    n.wr(EERD, 2 << 2 | EERD_START);
    assert_eq!(n.rd(EERD) >> 16, 0x0a00);
}

#[test]
fn mdic_reads_the_phy_id_and_rejects_other_phy_addresses() {
    let n = Nic::new(&dev(MAC_A));
    let id1 = n.phy_read(2);
    assert_ne!(id1 & MDIC_READY, 0);
    assert_eq!(id1 & MDIC_ERROR, 0);
    assert_eq!(id1 & 0xffff, 0x02a8);
    assert_eq!(n.phy_read(3) & 0xffff, 0x0391);
    n.wr(MDIC, 2 << 16 | 2 << 21 | MDIC_OP_READ);
    assert_ne!(n.rd(MDIC) & MDIC_ERROR, 0);
}

#[test]
fn autoneg_restart_brings_the_link_up_after_500ms_of_emulated_delay() {
    let d = dev(MAC_A);
    let n = Nic::new(&d);
    n.wr(CTRL, CTRL_RST);
    assert_eq!(n.rd(STATUS) & STATUS_LU, 0);
    n.wr(GPIE, GPIE_MSIX_MODE);
    n.wr(IVAR_MISC, (IVAR_VALID | 3) << 8);
    n.wr(IMS, ICR_LSC);
    n.wr(EIMS, 1 << 3);
    n.phy_write(0, 0x1340);
    n.p.delay(Duration::from_millis(499));
    assert_eq!(n.rd(STATUS) & STATUS_LU, 0);
    assert_eq!(n.phy_read(1) & u32::from(BMSR_AN_COMP), 0);
    n.p.delay(Duration::from_millis(1));
    assert_ne!(n.rd(STATUS) & STATUS_LU, 0);
    assert_ne!(n.phy_read(1) & u32::from(BMSR_AN_COMP), 0);
    assert!(
        n.p.irq(3).unwrap().drain(),
        "LSC delivered on the 'other' vector"
    );
    assert_ne!(n.rd(ICR) & ICR_LSC, 0);
    assert_eq!(d.now(), Duration::from_millis(500));
}

#[test]
fn pulled_cable_drops_the_link_and_frames_sent_are_lost() {
    let (wire, mut a, b) = pair();
    a.dev.set_link(false);
    assert_eq!(a.rd(STATUS) & STATUS_LU, 0);
    let slot = a.send(&frame_to(MAC_B, 100));
    assert_ne!(
        a.tx_status(0, slot) & DESC_DD,
        0,
        "the descriptor still completes"
    );
    assert_eq!(wire.stats().sent, 0);
    assert_eq!(b.rd(rxq(0, Q_DH)), 0);
    a.dev.set_link(true);
    assert_eq!(
        a.rd(STATUS) & STATUS_LU,
        0,
        "link down cleared AN_COMP: autoneg runs again"
    );
    a.p.delay(Duration::from_millis(500));
    assert_ne!(a.rd(STATUS) & STATUS_LU, 0);
    assert_ne!(a.rd(ICR) & ICR_LSC, 0);
}

#[test]
fn queue_enable_bit_reads_back_set_and_cleared() {
    let n = Nic::new(&dev(MAC_A));
    for q in [0, 7, 15] {
        n.wr(txq(q, Q_DCTL), DCTL_ENABLE);
        assert_ne!(n.rd(txq(q, Q_DCTL)) & DCTL_ENABLE, 0);
        n.wr(txq(q, Q_DCTL), 0);
        assert_eq!(n.rd(txq(q, Q_DCTL)) & DCTL_ENABLE, 0);
    }
    // Legacy alias of RX queue 1 is the same register.
    n.wr(0x2800 + 0x100 + Q_DCTL, DCTL_ENABLE);
    assert_ne!(n.rd(rxq(1, Q_DCTL)) & DCTL_ENABLE, 0);
}

// ---------------------------------------------------------------- data path

#[test]
fn advanced_tx_descriptor_arrives_in_an_rx_descriptor_on_the_peer() {
    let (_wire, mut a, b) = pair();
    let f = frame_to(MAC_B, 100);
    let slot = a.send(&f);
    assert_eq!(a.rd(txq(0, Q_DH)), 1);
    assert_ne!(a.tx_status(0, slot) & DESC_DD, 0);
    let (status, len, _, info) = b.rx_wb(0, 0);
    assert_eq!(status & (DESC_DD | RXD_EOP), DESC_DD | RXD_EOP);
    assert_eq!(status & RXD_ERR_RXE, 0);
    assert_eq!(len, 100);
    assert_eq!(
        info & (RXD_PKT_IPV4 | RXD_PKT_UDP),
        RXD_PKT_IPV4 | RXD_PKT_UDP
    );
    assert_eq!(b.rx_data(0, 0, 100), f);
    assert_eq!(b.rd(rxq(0, Q_DH)), 1);
    assert_eq!(b.rd(GPRC), 1);
    assert_eq!(b.rd(GPRC), 0, "statistics clear on read");
    assert_eq!(a.rd(GPTC), 1);
    assert_eq!(a.rd(GOTCL), 104);
    assert_eq!(a.rd(GOTCH), 0);
    assert_eq!(a.rd(GOTCL), 0, "reading the high half cleared both");
}

#[test]
fn legacy_tx_descriptor_arrives_and_only_rs_descriptors_get_dd() {
    let (_wire, mut a, b) = pair();
    let s0 = a.send_on(0, &frame_to(MAC_B, 80), false, false);
    let s1 = a.send_on(0, &frame_to(MAC_B, 90), false, true);
    assert_eq!(a.tx_status(0, s0) & DESC_DD, 0, "no RS, no write-back");
    assert_ne!(a.tx_status(0, s1) & DESC_DD, 0);
    assert_eq!(b.rx_wb(0, 0).1, 80);
    assert_eq!(b.rx_wb(0, 1).1, 90);
}

#[test]
fn context_descriptor_is_consumed_without_sending() {
    let (wire, mut a, b) = pair();
    {
        let (ring, _, tail) = &mut a.tx[0];
        ring.write_u64(0, 0x00);
        ring.write_u32(8, TXD_DEXT | 0x2 << 20 | TXD_RS);
        ring.write_u32(12, 0);
        *tail = 1;
    }
    let f = frame_to(MAC_B, 64);
    a.send(&f);
    assert_eq!(a.rd(txq(0, Q_DH)), 2);
    assert_ne!(a.tx_status(0, 0) & DESC_DD, 0);
    assert_eq!(wire.stats().sent, 1);
    assert_eq!(b.rx_wb(0, 0).1, 64);
}

#[test]
fn frames_for_another_mac_are_filtered_unless_promiscuous() {
    let (_wire, mut a, b) = pair();
    let other = MacAddr([0x52, 0x54, 0, 0, 0, 0xc]);
    a.send(&frame_to(other, 64));
    assert_eq!(b.rd(rxq(0, Q_DH)), 0);
    a.send(&frame_to(MacAddr::BROADCAST, 64));
    assert_eq!(b.rd(rxq(0, Q_DH)), 1, "broadcast accepted with BAM");
    b.wr(RCTL, b.rd(RCTL) | RCTL_UPE);
    a.send(&frame_to(other, 64));
    assert_eq!(b.rd(rxq(0, Q_DH)), 2);
    // A second unicast filter entry.
    b.wr(RCTL, b.rd(RCTL) & !RCTL_UPE);
    b.wr(RA + 8 * 5, u32::from_le_bytes([0x52, 0x54, 0, 0]));
    b.wr(RA + 8 * 5 + 4, 0x0c00 | RAH_AV);
    a.send(&frame_to(other, 64));
    assert_eq!(b.rd(rxq(0, Q_DH)), 3);
}

#[test]
fn rss_puts_flows_on_the_reta_selected_queue() {
    let (_wire, mut a, mut b) = pair();
    for _ in 1..4 {
        b.add_rx(RING - 1);
    }
    for (i, c) in crate::toeplitz::tests::MS_KEY.chunks(4).enumerate() {
        b.wr(RSSRK + 4 * i, u32::from_le_bytes([c[0], c[1], c[2], c[3]]));
    }
    // Entry k -> queue k % 4.
    for i in 0..32 {
        b.wr(RETA + 4 * i, u32::from_le_bytes([0, 1, 2, 3]));
    }
    b.wr(MRQC, MRQC_MRQE_RSS | MRQC_IPV4 | MRQC_UDPIPV4);
    b.wr(RXCSUM, b.rd(RXCSUM) | RXCSUM_PCSD);
    // The first four of Microsoft's verification flows, with their IPv4/UDP (4-tuple) hashes.
    let flows = crate::toeplitz::tests::VECTORS[..4]
        .iter()
        .map(|&(sip, sp, dip, dp, _, with_ports)| (sip, sp, dip, dp, with_ports));
    let mut seen = [0usize; 4];
    for (sip, sp, dip, dp, hash) in flows {
        a.send(&udp_frame(MAC_B, MAC_A, sip, dip, sp, dp));
        let q = (hash & 0x7f) as usize % 4;
        let (status, _, got_hash, info) = b.rx_wb(q, seen[q]);
        assert_ne!(status & DESC_DD, 0, "flow {sip:?} expected on queue {q}");
        assert_eq!(got_hash, hash);
        assert_eq!(info & 0xf, RSS_TYPE_UDPV4);
        seen[q] += 1;
    }
    assert_eq!(seen.iter().sum::<usize>(), 4);
}

#[test]
fn rss_needs_pcsd_as_in_qemu() {
    let (_wire, mut a, mut b) = pair();
    b.add_rx(RING - 1);
    for i in 0..32 {
        b.wr(RETA + 4 * i, 0x0101_0101);
    }
    b.wr(MRQC, MRQC_MRQE_RSS | MRQC_IPV4);
    a.send(&frame_to(MAC_B, 64));
    assert_eq!(
        b.rd(rxq(0, Q_DH)),
        1,
        "without RXCSUM.PCSD everything lands on queue 0"
    );
    assert_eq!(b.rd(rxq(1, Q_DH)), 0);
}

// ---------------------------------------------------------------- VMDq (MRQC bit 0)

/// Station-like addresses for pools 1.. (`0x52:54:00:00:01:nn`).
fn pool_mac(n: u8) -> MacAddr {
    MacAddr([0x52, 0x54, 0, 0, 1, n])
}

/// Writes receive-address entry `i` (0..24: RA then RA2) with AV and POOLSEL `pools`.
fn set_ra(n: &Nic, i: usize, mac: MacAddr, pools: u32) {
    let ra = if i < 16 {
        RA + 8 * i
    } else {
        RA2 + 8 * (i - 16)
    };
    let m = mac.0;
    n.wr(ra, u32::from_le_bytes([m[0], m[1], m[2], m[3]]));
    n.wr(
        ra + 4,
        u32::from(m[4]) | u32::from(m[5]) << 8 | pools << RAH_POOL_SHIFT | RAH_AV,
    );
}

/// B with `queues` receive queues and VMDq on: MRQC = 011b, station address in pool 0.
fn vmdq_pair(queues: usize) -> (Wire, Nic, Nic) {
    let (wire, a, mut b) = pair();
    for _ in 1..queues {
        b.add_rx(RING - 1);
    }
    set_ra(&b, 0, MAC_B, 1);
    b.wr(MRQC, 0x3);
    (wire, a, b)
}

/// RDH of every queue of `n`.
fn heads(n: &Nic) -> Vec<u32> {
    (0..n.rx.len()).map(|q| n.rd(rxq(q, Q_DH))).collect()
}

#[test]
fn vmdq_resets_as_qemu_every_pool_enabled_with_crc_stripping_and_no_long_packets() {
    let d = dev(MAC_B);
    let n = Nic::new(&d);
    assert_eq!(n.rd(VFRE), 0xff);
    assert_eq!(n.rd(VT_CTL), 0);
    for pool in 0..VM_POOLS {
        assert_eq!(n.rd(VMOLR0 + 4 * pool), 0x2600 | VMOLR_STRCRC);
    }
    assert_eq!(
        n.rd(RA + 4) & RAH_POOL_MASK,
        0,
        "the station address selects no pool"
    );
}

#[test]
fn vmdq_steers_each_address_to_the_pools_in_its_poolsel() {
    let (_wire, mut a, b) = vmdq_pair(5);
    set_ra(&b, 1, pool_mac(1), 1 << 1);
    set_ra(&b, 7, pool_mac(3), 1 << 3);
    // An RA2 entry (index 16 and up) steers too.
    set_ra(&b, 20, pool_mac(4), 1 << 4);
    // RSS fields and PCSD set: ignored in VMDq mode (QEMU hashes only with MRQC bits 1:0 = 10b).
    b.wr(MRQC, 0x3 | MRQC_IPV4 | MRQC_UDPIPV4);
    b.wr(RXCSUM, b.rd(RXCSUM) | RXCSUM_PCSD);
    a.send(&frame_to(pool_mac(3), 64));
    assert_eq!(heads(&b), [0, 0, 0, 1, 0]);
    a.send(&frame_to(pool_mac(1), 64));
    a.send(&frame_to(pool_mac(4), 64));
    assert_eq!(heads(&b), [0, 1, 0, 1, 1]);
    a.send(&frame_to(MAC_B, 64));
    assert_eq!(heads(&b), [1, 1, 0, 1, 1], "station address: pool 0");
    let (status, len, hash, info) = b.rx_wb(3, 0);
    assert_ne!(status & DESC_DD, 0);
    assert_eq!(len, 64);
    assert_eq!((hash, info & 0xf), (0, 0), "no RSS hash in VMDq mode");
    assert_eq!(b.rx_data(3, 0, 64), frame_to(pool_mac(3), 64));
}

#[test]
fn vmdq_replicates_to_every_selected_pool_and_broadcast_follows_vmolr_bam_not_rctl() {
    let (_wire, mut a, b) = vmdq_pair(3);
    // Two pools in one entry: one copy each.
    set_ra(&b, 2, pool_mac(9), 1 << 1 | 1 << 2);
    a.send(&frame_to(pool_mac(9), 64));
    assert_eq!(heads(&b), [0, 1, 1]);
    assert_eq!(b.rd(GPRC), 2, "counted per copy, as QEMU");
    // RCTL.BAM is set (Nic::up) but no pool has VMOLR.BAM: broadcast is dropped.
    a.send(&frame_to(MacAddr::BROADCAST, 64));
    assert_eq!(heads(&b), [0, 1, 1]);
    b.wr(VMOLR0, b.rd(VMOLR0) | VMOLR_BAM);
    b.wr(VMOLR0 + 8, b.rd(VMOLR0 + 8) | VMOLR_BAM);
    a.send(&frame_to(MacAddr::BROADCAST, 64));
    assert_eq!(heads(&b), [1, 1, 2]);
}

#[test]
fn vmdq_unmatched_unicast_goes_to_the_default_pool_unless_disabled_whatever_rctl_upe_says() {
    let (_wire, mut a, b) = vmdq_pair(3);
    let other = MacAddr([0x52, 0x54, 0, 0, 0, 0xc]);
    // VT_CTL = 0: default pool 0, enabled — even without RCTL.UPE.
    a.send(&frame_to(other, 64));
    assert_eq!(heads(&b), [1, 0, 0]);
    b.wr(VT_CTL, 2 << VT_CTL_DEF_POOL_SHIFT);
    a.send(&frame_to(other, 64));
    assert_eq!(heads(&b), [1, 0, 1]);
    b.wr(VT_CTL, VT_CTL_DIS_DEF_POOL);
    b.wr(RCTL, b.rd(RCTL) | RCTL_UPE | RCTL_MPE);
    a.send(&frame_to(other, 64));
    assert_eq!(
        heads(&b),
        [1, 0, 1],
        "dropped: no pool, default pool disabled"
    );
    // A multicast address never goes to the default pool; an MTA hit reaches ROMPE pools.
    let group = MacAddr([0x01, 0, 0x5e, 0, 0, 0x42]);
    a.send(&frame_to(group, 64));
    assert_eq!(heads(&b), [1, 0, 1]);
    let h = (u32::from(group.0[5]) << 8 | u32::from(group.0[4])) >> 4 & 0xfff;
    b.wr(MTA + 4 * (h as usize >> 5), 1 << (h & 31));
    b.wr(VMOLR0 + 4, b.rd(VMOLR0 + 4) | VMOLR_ROMPE);
    a.send(&frame_to(group, 64));
    assert_eq!(heads(&b), [1, 1, 1]);
}

#[test]
fn vmdq_vfre_masks_pools_and_a_disabled_queue_drops_its_copy() {
    let (_wire, mut a, b) = vmdq_pair(2);
    set_ra(&b, 1, pool_mac(1), 1 << 1);
    b.wr(VFRE, 0xff & !(1 << 1));
    a.send(&frame_to(pool_mac(1), 64));
    assert_eq!(heads(&b), [0, 0], "pool 1 not receive-enabled");
    b.wr(VFRE, 0xff);
    a.send(&frame_to(pool_mac(1), 64));
    assert_eq!(heads(&b), [0, 1]);
    // Queue 1 disabled: the frame is dropped, not sent to queue 0.
    b.wr(rxq(1, Q_DCTL), 0);
    a.send(&frame_to(pool_mac(1), 64));
    assert_eq!(heads(&b), [0, 1]);
}

#[test]
fn vmdq_applies_each_pools_long_packet_limit_after_the_device_wide_one() {
    let (_wire, mut a, b) = vmdq_pair(1);
    b.wr(RCTL, b.rd(RCTL) | RCTL_LPE);
    let long = frame_to(MAC_B, 2000);
    a.send(&long);
    assert_eq!(
        heads(&b),
        [0],
        "VMOLR0.LPE clear: 2000 bytes is too long for pool 0"
    );
    assert_eq!(b.rd(ROC), 1);
    b.wr(VMOLR0, b.rd(VMOLR0) | VMOLR_LPE);
    a.send(&long);
    assert_eq!(heads(&b), [1]);
    assert_eq!(b.rx_data(0, 0, long.len()), long);
}

#[test]
fn leaving_vmdq_mode_restores_the_accept_filter_and_queue_0() {
    let (_wire, mut a, b) = vmdq_pair(2);
    set_ra(&b, 1, pool_mac(1), 1 << 1);
    b.wr(MRQC, 0);
    // Entry 1 is still valid: accepted by the filter, delivered to queue 0 (RSS off).
    a.send(&frame_to(pool_mac(1), 64));
    a.send(&frame_to(MacAddr([0x52, 0x54, 0, 0, 0, 0xc]), 64));
    assert_eq!(heads(&b), [1, 0]);
}

#[test]
fn mpc_counts_frames_missed_for_lack_of_rx_descriptors() {
    let (_wire, mut a, b) = pair();
    b.wr(rxq(0, Q_DT), 2);
    for _ in 0..5 {
        a.send(&frame_to(MAC_B, 64));
    }
    assert_eq!(b.rd(rxq(0, Q_DH)), 2);
    assert_eq!(b.rd(MPC), 3);
    assert_eq!(b.rd(MPC), 0, "MPC clears on read");
    assert_eq!(b.rd(rxq(0, Q_RQDPC)), 3);
    assert_ne!(b.rd(ICR) & ICR_RXO, 0);
}

#[test]
fn frames_longer_than_one_buffer_span_descriptors() {
    let (_wire, mut a, b) = pair();
    b.wr(rxq(0, Q_SRRCTL), 1 | 1 << 25);
    let f = frame_to(MAC_B, 1500);
    a.send(&f);
    let (s0, l0, _, _) = b.rx_wb(0, 0);
    let (s1, l1, _, _) = b.rx_wb(0, 1);
    assert_eq!((s0 & RXD_EOP, l0), (0, 1024));
    assert_eq!((s1 & RXD_EOP, l1), (RXD_EOP, 1500 - 1024));
    assert_eq!(b.rx_data(0, 0, 1024), f[..1024]);
}

#[test]
fn no_dma_while_bus_master_is_clear() {
    let (wire, mut a, _b) = pair();
    let cmd = a.p.config_read32(COMMAND);
    a.p.config_write32(COMMAND, cmd & !u32::from(CMD_BUS_MASTER));
    a.send(&frame_to(MAC_B, 64));
    assert_eq!(a.rd(txq(0, Q_DH)), 0);
    assert_eq!(wire.stats().sent, 0);
    a.p.config_write32(COMMAND, cmd);
    a.wr(txq(0, Q_DT), 1);
    assert_eq!(wire.stats().sent, 1);
}

// ---------------------------------------------------------------- interrupts

fn msix(n: &Nic) {
    n.wr(GPIE, GPIE_MSIX_MODE | GPIE_NSICR);
    // RX0 -> vector 1, TX0 -> vector 2.
    n.wr(IVAR0, (IVAR_VALID | 1) | (IVAR_VALID | 2) << 8);
}

#[test]
fn eicr_eims_and_ivar_fire_the_mapped_vector() {
    let (_wire, mut a, b) = pair();
    msix(&a);
    msix(&b);
    a.wr(EIMS, 1 << 2);
    b.wr(EIMS, 1 << 1);
    let (atx, brx, b_other) = (
        a.p.irq(2).unwrap(),
        b.p.irq(1).unwrap(),
        b.p.irq(2).unwrap(),
    );
    a.send(&frame_to(MAC_B, 64));
    assert!(atx.drain(), "TX write-back fires A's vector 2");
    assert!(brx.drain(), "RX fires B's vector 1");
    assert!(!b_other.drain());
    assert_eq!(b.rd(EICR), 1 << 1, "EICR has the cause; reading clears it");
    assert_eq!(b.rd(EICR), 0);
}

#[test]
fn masked_vector_does_not_fire_until_unmasked() {
    let (_wire, mut a, b) = pair();
    msix(&b);
    let v = b.p.irq(1).unwrap();
    a.send(&frame_to(MAC_B, 64));
    assert!(!v.drain());
    b.wr(EIMS, 1 << 1);
    assert!(v.drain(), "unmasking a pending cause fires it");
    b.wr(EIMC, 1 << 1);
    assert_eq!(b.rd(EIMS), 0);
}

#[test]
fn eiac_auto_clears_and_eiam_auto_masks() {
    let (_wire, mut a, b) = pair();
    msix(&b);
    b.wr(GPIE, b.rd(GPIE) | GPIE_EIAME);
    b.wr(EIAC, 1 << 1);
    b.wr(EIAM, 1 << 1);
    b.wr(EIMS, 1 << 1);
    let v = b.p.irq(1).unwrap();
    a.send(&frame_to(MAC_B, 64));
    assert_eq!(v.notifications(), 1);
    assert_eq!(b.rd(EICR), 0, "auto-cleared after the message");
    assert_eq!(b.rd(EIMS), 0, "auto-masked after the message");
    a.send(&frame_to(MAC_B, 64));
    assert_eq!(v.notifications(), 1);
    b.wr(EIMS, 1 << 1);
    a.send(&frame_to(MAC_B, 64));
    assert_eq!(v.notifications(), 2);
}

#[test]
fn without_eiac_a_vector_fires_again_only_after_eicr_is_cleared() {
    let (_wire, mut a, b) = pair();
    msix(&b);
    b.wr(EIMS, 1 << 1);
    let v = b.p.irq(1).unwrap();
    a.send(&frame_to(MAC_B, 64));
    a.send(&frame_to(MAC_B, 64));
    assert_eq!(
        v.notifications(),
        1,
        "no new edge while EICR bit 1 stays set (QEMU)"
    );
    b.wr(EICR, 1 << 1);
    a.send(&frame_to(MAC_B, 64));
    assert_eq!(v.notifications(), 2);
}

#[test]
fn eics_sets_causes_by_software() {
    let n = Nic::new(&dev(MAC_A));
    msix(&n);
    n.wr(EIMS, 1 << 5);
    n.wr(EICS, 1 << 5);
    assert!(n.p.irq(5).unwrap().drain());
}

// ---------------------------------------------------------------- IOMMU

#[test]
fn unmapped_tx_descriptor_is_a_fault_and_the_ring_stalls_there() {
    let (wire, mut a, _b) = pair();
    a.wr(txq(0, Q_DBAL), 0x1000);
    a.wr(txq(0, Q_DBAH), 0);
    a.send(&frame_to(MAC_B, 64));
    let faults = a.dev.iommu_faults();
    assert_eq!(
        faults,
        vec![IommuFault {
            iova: Iova(0x1000),
            len: 16,
            write: false
        }]
    );
    assert_eq!(a.rd(txq(0, Q_DH)), 0);
    assert_eq!(wire.stats().sent, 0);
}

#[test]
fn revoked_tx_buffer_faults_and_a_later_doorbell_retries() {
    let (wire, mut a, _b) = pair();
    let data_iova = a.tx[0].1.iova();
    assert!(a.dev.revoke_dma(data_iova));
    a.send(&frame_to(MAC_B, 64));
    let f = a.dev.iommu_faults();
    assert_eq!(
        f,
        vec![IommuFault {
            iova: data_iova,
            len: 64,
            write: false
        }]
    );
    assert_eq!(a.tx_status(0, 0) & DESC_DD, 0);
    a.wr(txq(0, Q_DT), 1);
    assert_eq!(a.dev.iommu_faults().len(), 2, "retried and faulted again");
    assert_eq!(wire.stats().sent, 0);
}

#[test]
fn revoked_rx_buffer_faults_drops_the_frame_and_keeps_the_head() {
    let (_wire, mut a, b) = pair();
    let bufs = b.rx[0].1.iova();
    b.dev.revoke_dma(bufs);
    a.send(&frame_to(MAC_B, 64));
    assert_eq!(
        b.dev.iommu_faults(),
        vec![IommuFault {
            iova: bufs,
            len: 64,
            write: true
        }]
    );
    assert_eq!(b.rd(rxq(0, Q_DH)), 0);
    assert_eq!(b.rx_wb(0, 0).0 & DESC_DD, 0);
    assert_eq!(b.rd(MPC), 1);
}

#[test]
fn map_dma_makes_caller_memory_reachable_and_drop_unmaps_it() {
    let (_wire, mut a, b) = pair();
    let mut mem = vec![0u8; 4096];
    let ptr = std::ptr::NonNull::new(mem.as_mut_ptr()).unwrap();
    // SAFETY: `mem` outlives the mapping (dropped below) and no reference into it is used
    // while the device may write it.
    let m = unsafe { b.p.map_dma(ptr, 4096) }.unwrap();
    use ringfab_hal::DmaMapping;
    b.rx[0].0.write_u64(0, m.iova().0);
    a.send(&frame_to(MAC_B, 64));
    assert_ne!(b.rx_wb(0, 0).0 & DESC_DD, 0);
    drop(m);
    assert_eq!(&mem[..6], &MAC_B.0);
    b.rx[0].0.write_u64(16, mem.as_ptr() as u64);
    a.send(&frame_to(MAC_B, 64));
    assert_eq!(
        b.dev.iommu_faults().len(),
        1,
        "a CPU address is not an IOVA"
    );
}

// ---------------------------------------------------------------- wire, pcap, wire faults

#[test]
fn hub_delivers_to_every_other_port() {
    let wire = Wire::new();
    let devs: Vec<EmuIgb> = (0..3u8)
        .map(|i| dev(MacAddr([0x52, 0x54, 0, 0, 1, i])))
        .collect();
    for d in &devs {
        d.connect(&wire);
    }
    let mut nics: Vec<Nic> = devs.iter().map(Nic::up).collect();
    nics[0].send(&frame_to(MacAddr::BROADCAST, 64));
    assert_eq!(nics[0].rd(rxq(0, Q_DH)), 0, "not back to the sender");
    assert_eq!(nics[1].rd(rxq(0, Q_DH)), 1);
    assert_eq!(nics[2].rd(rxq(0, Q_DH)), 1);
    assert_eq!(wire.stats().deliveries, 2);
}

#[derive(Clone, Default)]
struct Shared(Arc<Mutex<Vec<u8>>>);
impl std::io::Write for Shared {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn pcap_capture_of_the_wire_parses_back() {
    let (wire, mut a, _b) = pair();
    let buf = Shared::default();
    wire.capture_to(buf.clone()).unwrap();
    let f1 = frame_to(MAC_B, 64);
    let f2 = frame_to(MAC_B, 200);
    a.send(&f1);
    a.send(&f2);
    let recs = crate::pcap::parse(&buf.0.lock().unwrap()).unwrap();
    assert_eq!(recs.len(), 2);
    assert_eq!(recs[0].data, f1);
    assert_eq!(recs[1].data, f2);
    assert!(recs[0].micros < recs[1].micros);
}

#[test]
fn pcap_capture_to_a_file_parses_back() {
    let (wire, mut a, _b) = pair();
    let path = std::env::temp_dir().join(format!("ringfab-emu-{}.pcap", std::process::id()));
    wire.capture(&path).unwrap();
    a.send(&frame_to(MAC_B, 64));
    wire.stop_capture();
    let recs = crate::pcap::parse(&std::fs::read(&path).unwrap()).unwrap();
    std::fs::remove_file(&path).unwrap();
    assert_eq!(recs.len(), 1);
    assert_eq!(recs[0].orig_len, 64);
}

#[test]
fn wire_drop_loses_the_next_frames_only() {
    let (wire, mut a, b) = pair();
    wire.inject(WireFault::Drop { count: 2 });
    for _ in 0..3 {
        a.send(&frame_to(MAC_B, 64));
    }
    assert_eq!(b.rd(rxq(0, Q_DH)), 1);
    assert_eq!(wire.stats().dropped, 2);
}

#[test]
fn wire_drop_every_kth_frame() {
    let (wire, mut a, b) = pair();
    wire.inject(WireFault::DropEvery { k: 3 });
    for _ in 0..9 {
        a.send(&frame_to(MAC_B, 64));
    }
    assert_eq!(b.rd(rxq(0, Q_DH)), 6);
}

#[test]
fn bad_crc_corruption_sets_rxe_and_counts_crcerrs() {
    let (wire, mut a, b) = pair();
    wire.inject(WireFault::Corrupt {
        count: 1,
        offset: 40,
        mode: CorruptMode::BadCrc,
    });
    let f = frame_to(MAC_B, 64);
    a.send(&f);
    a.send(&f);
    assert_ne!(b.rx_wb(0, 0).0 & RXD_ERR_RXE, 0);
    assert_eq!(b.rx_data(0, 0, 64)[40], f[40] ^ 0xff);
    assert_eq!(b.rx_wb(0, 1).0 & RXD_ERR_RXE, 0);
    assert_eq!(b.rd(CRCERRS), 1);
}

#[test]
fn silent_corruption_delivers_a_good_looking_frame() {
    let (wire, mut a, b) = pair();
    wire.inject(WireFault::CorruptEvery {
        k: 1,
        offset: 50,
        mode: CorruptMode::Silent,
    });
    let f = frame_to(MAC_B, 64);
    a.send(&f);
    assert_eq!(b.rx_wb(0, 0).0 & RXD_ERR_RXE, 0);
    assert_eq!(b.rx_data(0, 0, 64)[50], f[50] ^ 0xff);
}

#[test]
fn duplicate_delivers_a_frame_twice() {
    let (wire, mut a, b) = pair();
    wire.inject(WireFault::Duplicate { count: 1 });
    a.send(&frame_to(MAC_B, 64));
    assert_eq!(b.rd(rxq(0, Q_DH)), 2);
    assert_eq!(b.rx_data(0, 0, 64), b.rx_data(0, 1, 64));
}

#[test]
fn reorder_swaps_a_frame_with_the_next_one() {
    let (wire, mut a, b) = pair();
    wire.inject(WireFault::Reorder { count: 1 });
    let (f1, f2) = (frame_to(MAC_B, 70), frame_to(MAC_B, 80));
    a.send(&f1);
    assert_eq!(b.rd(rxq(0, Q_DH)), 0, "held back");
    a.send(&f2);
    assert_eq!(b.rx_wb(0, 0).1, 80);
    assert_eq!(b.rx_wb(0, 1).1, 70);
}

#[test]
fn seeded_random_faults_are_reproducible() {
    let run = || {
        let (wire, mut a, b) = pair();
        wire.inject(WireFault::Random {
            seed: 42,
            drop_per_mille: 300,
            corrupt_per_mille: 0,
            duplicate_per_mille: 0,
            mode: CorruptMode::Silent,
        });
        for _ in 0..10 {
            a.send(&frame_to(MAC_B, 64));
        }
        (b.rd(rxq(0, Q_DH)), wire.stats().dropped)
    };
    let first = run();
    assert_eq!(first, run());
    assert!(first.1 > 0 && first.1 < 10);
}

#[test]
fn manual_delivery_holds_frames_until_run_until_idle() {
    let (wire, mut a, b) = pair();
    wire.set_auto_deliver(false);
    a.send(&frame_to(MAC_B, 64));
    assert_eq!(wire.pending(), 1);
    assert_eq!(b.rd(rxq(0, Q_DH)), 0);
    wire.run_until_idle();
    assert_eq!(b.rd(rxq(0, Q_DH)), 1);
}

// ---------------------------------------------------------------- device faults

#[test]
fn withheld_writeback_never_sets_dd_but_moves_the_head() {
    let (_wire, mut a, b) = pair();
    b.dev.inject(DeviceFault::WithholdWriteback {
        ring: Some(Ring::Rx(0)),
        count: 1,
    });
    a.send(&frame_to(MAC_B, 64));
    a.send(&frame_to(MAC_B, 64));
    assert_eq!(b.rd(rxq(0, Q_DH)), 2);
    assert_eq!(b.rx_wb(0, 0).0 & DESC_DD, 0);
    assert_ne!(b.rx_wb(0, 1).0 & DESC_DD, 0);
}

#[test]
fn withheld_tx_writeback_on_one_queue_only() {
    let (_wire, mut a, _b) = pair();
    a.dev.inject(DeviceFault::WithholdWriteback {
        ring: Some(Ring::Tx(0)),
        count: usize::MAX,
    });
    for _ in 0..3 {
        let s = a.send(&frame_to(MAC_B, 64));
        assert_eq!(a.tx_status(0, s) & DESC_DD, 0);
    }
    assert_eq!(a.rd(txq(0, Q_DH)), 3);
}

#[test]
fn delayed_writeback_appears_after_the_given_steps() {
    let (_wire, mut a, b) = pair();
    msix(&b);
    b.wr(EIMS, 1 << 1);
    b.dev.inject(DeviceFault::DelayWriteback {
        ring: None,
        count: 1,
        steps: 2,
    });
    a.send(&frame_to(MAC_B, 64));
    let v = b.p.irq(1).unwrap();
    assert_eq!(b.rx_wb(0, 0).0 & DESC_DD, 0);
    assert!(b.dev.step());
    assert_eq!(b.rx_wb(0, 0).0 & DESC_DD, 0);
    assert!(!v.drain());
    assert!(!b.dev.step());
    assert_ne!(b.rx_wb(0, 0).0 & DESC_DD, 0);
    assert!(v.drain(), "the interrupt comes with the write-back");
}

#[test]
fn oversize_length_fault_reports_more_than_the_buffer() {
    let (_wire, mut a, b) = pair();
    b.dev.inject(DeviceFault::OversizeLength {
        queue: Some(0),
        count: 1,
        extra: 100,
    });
    a.send(&frame_to(MAC_B, 64));
    assert_eq!(b.rx_wb(0, 0).1, BUF as u32 + 100);
}

#[test]
fn garbage_status_bits_are_written_back() {
    let (_wire, mut a, b) = pair();
    a.dev.inject(DeviceFault::GarbageStatus {
        ring: Some(Ring::Tx(0)),
        count: 1,
        bits: 0xf0,
    });
    b.dev.inject(DeviceFault::GarbageStatus {
        ring: Some(Ring::Rx(0)),
        count: 1,
        bits: 1 << 20,
    });
    let s = a.send(&frame_to(MAC_B, 64));
    assert_eq!(a.tx_status(0, s) & 0xf1, 0xf1);
    assert_ne!(b.rx_wb(0, 0).0 & 1 << 20, 0);
}

#[test]
fn background_pump_performs_delayed_writebacks() {
    let (wire, mut a, b) = pair();
    b.dev.inject(DeviceFault::DelayWriteback {
        ring: None,
        count: 1,
        steps: 3,
    });
    let pump = wire.spawn_pump(Duration::from_micros(50));
    a.send(&frame_to(MAC_B, 64));
    let mut done = false;
    for _ in 0..2000 {
        if b.rx_wb(0, 0).0 & DESC_DD != 0 {
            done = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    pump.stop();
    assert!(done);
}
