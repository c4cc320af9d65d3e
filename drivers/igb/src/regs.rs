//! Register offsets and bit fields of the 82576, as the driver uses them.
//!
//! Written as plain `const`s rather than `tock-registers` bitfields: the driver touches a handful
//! of fields, mostly single bits it ORs together once at bring-up, and a named constant next to
//! its datasheet section reads more directly than a generated field type. Multi-bit fields get a
//! `_SHIFT`/`_MASK` pair. Every offset is checked at compile time against the datasheet's table
//! (the `const _: () = assert!(…)` lines), so a typo in a per-queue formula cannot ship.
//!
//! Sources: *Intel 82576EB Gigabit Ethernet Controller Datasheet* (chapter 8, "Programming
//! Interface", for registers; chapter 7 for descriptors and interrupts). Section numbers are
//! those of the datasheet's table of contents; where QEMU's `hw/net/igb_core.c` model behaves
//! differently from the datasheet the constant's comment says so (marked **QEMU**).

// --- PCI configuration space (PCI Local Bus Specification 3.0, §6.2) -------------------------

/// Vendor id (bits 15:0) and device id (bits 31:16).
pub(crate) const PCI_ID: u16 = 0x00;
/// Command (bits 15:0) and status (bits 31:16, write-1-to-clear) registers.
pub(crate) const PCI_COMMAND: u16 = 0x04;
/// Command: respond to memory-space accesses.
pub(crate) const PCI_COMMAND_MEMORY: u32 = 1 << 1;
/// Command: the function may master the bus (DMA).
pub(crate) const PCI_COMMAND_BUS_MASTER: u32 = 1 << 2;

/// Intel's PCI vendor id.
pub(crate) const VENDOR_INTEL: u16 = 0x8086;
/// 82576 copper device ids (datasheet §6.2.1 / EEPROM word 0x0D). QEMU's `igb` presents
/// 0x10C9; the others are the quad-port and "NS" copper parts, programmed identically.
pub(crate) const DEVICE_IDS: [u16; 4] = [0x10C9, 0x10E8, 0x1526, 0x150A];

// --- General registers (§8.2) ------------------------------------------------------------------

/// Device Control (§8.2.1).
pub(crate) const CTRL: usize = 0x0000;
/// CTRL.SLU: set link up (forces the MAC/PHY link; **QEMU** ignores it, link follows autoneg).
pub(crate) const CTRL_SLU: u32 = 1 << 6;
/// CTRL.RST (DEV_RST): software reset, self-clearing.
pub(crate) const CTRL_RST: u32 = 1 << 26;

/// Device Status (§8.2.2).
pub(crate) const STATUS: usize = 0x0008;
/// STATUS.FD: full duplex.
pub(crate) const STATUS_FD: u32 = 1 << 0;
/// STATUS.LU: link up.
pub(crate) const STATUS_LU: u32 = 1 << 1;
/// STATUS.SPEED, bits 7:6: 00 = 10, 01 = 100, 1x = 1000 Mb/s.
pub(crate) const STATUS_SPEED_SHIFT: u32 = 6;
/// Mask of STATUS.SPEED after shifting.
pub(crate) const STATUS_SPEED_MASK: u32 = 0b11;

/// MDI Control: PHY register access (§8.2.4).
pub(crate) const MDIC: usize = 0x0020;
/// MDIC.DATA, bits 15:0.
pub(crate) const MDIC_DATA_MASK: u32 = 0xFFFF;
/// MDIC.REGADD, bits 20:16.
pub(crate) const MDIC_REG_SHIFT: u32 = 16;
/// MDIC.PHYADD, bits 25:21.
pub(crate) const MDIC_PHY_SHIFT: u32 = 21;
/// MDIC.OP = 01b: write.
pub(crate) const MDIC_OP_WRITE: u32 = 0b01 << 26;
/// MDIC.OP = 10b: read.
pub(crate) const MDIC_OP_READ: u32 = 0b10 << 26;
/// MDIC.R: the access completed.
pub(crate) const MDIC_READY: u32 = 1 << 28;
/// MDIC.E: the access failed.
pub(crate) const MDIC_ERROR: u32 = 1 << 30;
/// The internal PHY's MDIO address (**QEMU** answers only address 1, as the silicon's PHY does).
pub(crate) const PHY_ADDR: u32 = 1;

/// PHY Control register (IEEE 802.3 clause 22 register 0; datasheet §8.24 PHY registers).
pub(crate) const PHY_BMCR: u8 = 0;
/// BMCR: PHY reset (self-clearing).
pub(crate) const BMCR_RESET: u16 = 1 << 15;
/// BMCR: auto-negotiation enable.
pub(crate) const BMCR_AUTOEN: u16 = 1 << 12;
/// BMCR: restart auto-negotiation (self-clearing).
pub(crate) const BMCR_ANRESTART: u16 = 1 << 9;
/// BMCR: full duplex (the forced value; autoneg overrides it).
pub(crate) const BMCR_FD: u16 = 1 << 8;
/// BMCR: speed selection MSB (1000 Mb/s together with bit 13 clear).
pub(crate) const BMCR_SPEED1000: u16 = 1 << 6;

// --- Interrupt registers (§8.8; MSI-X operation §7.3) ------------------------------------------

/// Interrupt Cause Read (legacy causes; read to clear) (§8.8.1).
pub(crate) const ICR: usize = 0x00C0;
/// Interrupt Mask Clear (§8.8.10).
pub(crate) const IMC: usize = 0x00D8;
/// General Purpose Interrupt Enable (§8.8.15).
pub(crate) const GPIE: usize = 0x1514;
/// GPIE.NSICR: clear ICR on read without INT_ASSERTED.
pub(crate) const GPIE_NSICR: u32 = 1 << 0;
/// GPIE.Multiple_MSIX: EICR bits are MSI-X vectors (vector n = bit n).
pub(crate) const GPIE_MSIX_MODE: u32 = 1 << 4;
/// GPIE.PBA_support: MSI-X pending bits reflect EICR.
pub(crate) const GPIE_PBA: u32 = 1 << 31;
/// Extended Interrupt Mask Set/Read (§8.8.5).
pub(crate) const EIMS: usize = 0x1524;
/// Extended Interrupt Mask Clear (§8.8.6).
pub(crate) const EIMC: usize = 0x1528;
/// Extended Interrupt Auto Clear (§8.8.7): EICR bit n clears when vector n's message is sent.
/// **QEMU** only takes the write while GPIE.MSIX_MODE is set, and only ever ORs bits in; without
/// it a vector whose EICR bit stays set never fires again (QEMU raises on the EICR&EIMS edge).
pub(crate) const EIAC: usize = 0x152C;
/// Extended Interrupt Cause Read (§8.8.3); read clears.
pub(crate) const EICR: usize = 0x1580;
/// Extended Interrupt Throttle for vector `v` (§8.8.12).
pub(crate) const fn eitr(v: u16) -> usize {
    0x1680 + 4 * v as usize
}
/// Interrupt Vector Allocation register `i` (0..8) (§8.8.16; layout §7.3.2.1). Each holds four
/// one-byte entries: bits 7:0 RX queue i, 15:8 TX queue i, 23:16 RX queue i+8, 31:24 TX queue i+8.
pub(crate) const fn ivar(i: u16) -> usize {
    0x1700 + 4 * i as usize
}
/// IVAR entry: valid bit; bits 4:0 name the MSI-X vector.
pub(crate) const IVAR_VALID: u32 = 0x80;
/// IVAR entry: vector field.
pub(crate) const IVAR_VECTOR_MASK: u32 = 0x1F;
/// MSI-X vectors EICR can name in MSI-X mode (bits 24:0).
pub(crate) const EICR_VECTORS: u16 = 25;

/// Bit position of queue `q`'s entry in IVAR register [`ivar`]`(q & 7)`.
pub(crate) const fn ivar_shift(q: u16, tx: bool) -> u32 {
    (if q >= 8 { 16 } else { 0 }) + if tx { 8 } else { 0 }
}

// --- Receive registers (§8.9) ------------------------------------------------------------------

/// Receive Control (§8.9.1).
pub(crate) const RCTL: usize = 0x0100;
/// RCTL.EN: receiver enable.
pub(crate) const RCTL_EN: u32 = 1 << 1;
/// RCTL.UPE: unicast promiscuous.
pub(crate) const RCTL_UPE: u32 = 1 << 3;
/// RCTL.MPE: multicast promiscuous.
pub(crate) const RCTL_MPE: u32 = 1 << 4;
/// RCTL.LPE: long packets (up to RLPML) accepted.
pub(crate) const RCTL_LPE: u32 = 1 << 5;
/// RCTL.BAM: accept broadcast.
pub(crate) const RCTL_BAM: u32 = 1 << 15;
/// RCTL.SECRC: strip the Ethernet CRC. **QEMU** otherwise appends 4 zero bytes and counts them.
pub(crate) const RCTL_SECRC: u32 = 1 << 26;

/// Receive Checksum Control (§8.9.12).
pub(crate) const RXCSUM: usize = 0x5000;
/// RXCSUM.PCSD: write-back dword 1 carries the RSS hash instead of the IP id/checksum.
/// **QEMU** computes RSS at all only with PCSD set.
pub(crate) const RXCSUM_PCSD: u32 = 1 << 13;
/// Receive Long Packet Maximum Length (§8.9.13), frame length including FCS.
pub(crate) const RLPML: usize = 0x5004;
/// Receive Address Low 0 (§8.9.18): MAC bytes 0..=3, byte 0 in bits 7:0.
pub(crate) const RAL0: usize = 0x5400;
/// Receive Address High 0 (§8.9.19): MAC bytes 4, 5 in bits 15:0; AV in bit 31.
pub(crate) const RAH0: usize = 0x5404;
/// Multiple Receive Queues Command (§8.9.23).
pub(crate) const MRQC: usize = 0x5818;
/// MRQC.MRQE = 010b: RSS only.
pub(crate) const MRQC_RSS: u32 = 0b010;
/// MRQC field enable: TCP/IPv4.
pub(crate) const MRQC_TCP_IPV4: u32 = 1 << 16;
/// MRQC field enable: IPv4.
pub(crate) const MRQC_IPV4: u32 = 1 << 17;
/// MRQC field enable: UDP/IPv4.
pub(crate) const MRQC_UDP_IPV4: u32 = 1 << 22;
/// Redirection Table register `i` (0..32) (§8.9.24): entries 4i..4i+3, entry 4i in bits 7:0.
pub(crate) const fn reta(i: usize) -> usize {
    0x5C00 + 4 * i
}
/// RSS Random Key register `i` (0..10) (§8.9.25): key byte 4i in bits 7:0 (little-endian).
pub(crate) const fn rssrk(i: usize) -> usize {
    0x5C80 + 4 * i
}
/// RETA entries.
pub(crate) const RETA_ENTRIES: usize = 128;
/// RSS key bytes.
pub(crate) const RSS_KEY_LEN: usize = 40;

/// Per-queue receive register block (§8.9.x): queue n at 0xC000 + 0x40·n. (Queues 0..=3 are also
/// reachable at the legacy 0x2800 + 0x100·n aliases; this driver uses the uniform block.)
const fn rxq(n: u16) -> usize {
    0xC000 + 0x40 * n as usize
}
/// RX Descriptor Base Low of queue `n`.
pub(crate) const fn rdbal(n: u16) -> usize {
    rxq(n)
}
/// RX Descriptor Base High.
pub(crate) const fn rdbah(n: u16) -> usize {
    rxq(n) + 0x04
}
/// RX Descriptor Length in bytes (multiple of 128).
pub(crate) const fn rdlen(n: u16) -> usize {
    rxq(n) + 0x08
}
/// Split and Replication Receive Control (§8.9.7).
pub(crate) const fn srrctl(n: u16) -> usize {
    rxq(n) + 0x0C
}
/// RX Descriptor Head.
pub(crate) const fn rdh(n: u16) -> usize {
    rxq(n) + 0x10
}
/// RX Descriptor Tail.
pub(crate) const fn rdt(n: u16) -> usize {
    rxq(n) + 0x18
}
/// Receive Descriptor Control (§8.9.10).
pub(crate) const fn rxdctl(n: u16) -> usize {
    rxq(n) + 0x28
}
/// SRRCTL.BSIZEPACKET, bits 6:0, in 1 KiB units (1..=127).
pub(crate) const SRRCTL_BSIZEPKT_MASK: u32 = 0x7F;
/// One BSIZEPACKET unit in bytes.
pub(crate) const SRRCTL_BSIZEPKT_UNIT: u32 = 1024;
/// SRRCTL.DESCTYPE = 001b: advanced descriptors, one buffer.
pub(crate) const SRRCTL_DESCTYPE_ADV_ONEBUF: u32 = 0b001 << 25;
/// SRRCTL.Drop_En: drop frames for this queue when it has no descriptors, rather than stalling
/// the shared packet buffer (**QEMU** drops either way).
pub(crate) const SRRCTL_DROP_EN: u32 = 1 << 31;

// --- Transmit registers (§8.12) ----------------------------------------------------------------

/// Transmit Control (§8.12.1).
pub(crate) const TCTL: usize = 0x0400;
/// TCTL.EN: transmitter enable.
pub(crate) const TCTL_EN: u32 = 1 << 1;
/// TCTL.PSP: pad short packets to 64 bytes.
pub(crate) const TCTL_PSP: u32 = 1 << 3;
/// TCTL.CT, bits 11:4: collision threshold (the datasheet's recommended 0xF).
pub(crate) const TCTL_CT_DEFAULT: u32 = 0xF << 4;
/// TCTL.COLD, bits 21:12: collision distance (0x3F for full duplex).
pub(crate) const TCTL_COLD_FD: u32 = 0x3F << 12;

/// Per-queue transmit register block: queue n at 0xE000 + 0x40·n (legacy aliases for 0..=3 at
/// 0x3800 + 0x100·n).
const fn txq(n: u16) -> usize {
    0xE000 + 0x40 * n as usize
}
/// TX Descriptor Base Low of queue `n`.
pub(crate) const fn tdbal(n: u16) -> usize {
    txq(n)
}
/// TX Descriptor Base High.
pub(crate) const fn tdbah(n: u16) -> usize {
    txq(n) + 0x04
}
/// TX Descriptor Length in bytes (multiple of 128).
pub(crate) const fn tdlen(n: u16) -> usize {
    txq(n) + 0x08
}
/// TX Descriptor Head.
pub(crate) const fn tdh(n: u16) -> usize {
    txq(n) + 0x10
}
/// TX Descriptor Tail.
pub(crate) const fn tdt(n: u16) -> usize {
    txq(n) + 0x18
}
/// Transmit Descriptor Control (§8.12.15).
pub(crate) const fn txdctl(n: u16) -> usize {
    txq(n) + 0x28
}
/// RXDCTL/TXDCTL.ENABLE (bit 25): the queue runs; reads back once the hardware has (dis)armed it.
pub(crate) const XDCTL_ENABLE: u32 = 1 << 25;
/// TXDCTL thresholds: PTHRESH 8, HTHRESH 1, WTHRESH 1 — write back each RS descriptor promptly
/// (the values Linux's igb uses on the 82576 with MSI-X).
pub(crate) const TXDCTL_THRESH: u32 = 8 | (1 << 8) | (1 << 16);
/// RXDCTL thresholds: PTHRESH 8, HTHRESH 8, WTHRESH 1.
pub(crate) const RXDCTL_THRESH: u32 = 8 | (8 << 8) | (1 << 16);

// --- Statistics (§8.19; all clear on read on the silicon) --------------------------------------

/// Missed Packets Count. **QEMU** neither clears it on read nor increments it.
pub(crate) const MPC: usize = 0x4010;
/// Good Packets Received Count.
pub(crate) const GPRC: usize = 0x4074;
/// Good Packets Transmitted Count.
pub(crate) const GPTC: usize = 0x4080;
/// Good Octets Received Count, low half (read before the high half; reading high clears both).
pub(crate) const GORCL: usize = 0x4088;
/// Good Octets Received Count, high half.
pub(crate) const GORCH: usize = 0x408C;
/// Good Octets Transmitted Count, low half.
pub(crate) const GOTCL: usize = 0x4090;
/// Good Octets Transmitted Count, high half.
pub(crate) const GOTCH: usize = 0x4094;

/// Queues of each direction (§7.1.1: 16 receive and 16 transmit queues; **QEMU** IGB_NUM_QUEUES).
pub(crate) const QUEUES: u16 = 16;
/// Size of BAR0 (128 KiB).
pub(crate) const BAR0_LEN: usize = 128 * 1024;

// Layout facts from the datasheet's register summary (§8.1.3), checked at compile time.
const _: () = assert!(rdbal(0) == 0xC000 && rdt(0) == 0xC018 && rxdctl(0) == 0xC028);
const _: () = assert!(rdbal(15) == 0xC3C0 && srrctl(1) == 0xC04C && rdh(2) == 0xC090);
const _: () = assert!(tdbal(0) == 0xE000 && tdt(0) == 0xE018 && txdctl(0) == 0xE028);
const _: () = assert!(tdbal(15) == 0xE3C0 && tdlen(1) == 0xE048 && tdh(3) == 0xE0D0);
const _: () = assert!(ivar(7) == 0x171C && eitr(24) == 0x16E0);
const _: () = assert!(reta(31) == 0x5C7C && rssrk(9) == 0x5CA4);
const _: () = assert!(RETA_ENTRIES == 4 * 32 && RSS_KEY_LEN == 4 * 10);
const _: () = assert!(txdctl(QUEUES - 1) + 4 <= BAR0_LEN && rxdctl(QUEUES - 1) + 4 <= BAR0_LEN);
const _: () = assert!(ivar_shift(0, false) == 0 && ivar_shift(0, true) == 8);
const _: () = assert!(ivar_shift(8, false) == 16 && ivar_shift(9, true) == 24);
const _: () = assert!(GORCH == GORCL + 4 && GOTCH == GOTCL + 4);
