//! Register offsets (BAR0) and bits of the 82574 as the emulator models them.
//!
//! Section numbers are those of the *Intel 82574 GbE Controller Family Datasheet*, chapter 10
//! ("Programming Interface", register descriptions 10.2.x) and chapter 7 (descriptors,
//! interrupts); where QEMU's e1000e model differs it says so. Written from the datasheet layout
//! and QEMU's `e1000_regs.h` / `e1000x_regs.h`, independently of the driver.
#![allow(
    clippy::unreadable_literal,
    reason = "offsets are written as the datasheet prints them"
)]

/// Size of BAR0 (128 KiB, QEMU e1000e.c `E1000E_MMIO_SIZE`).
pub const BAR0_LEN: usize = 0x2_0000;

// ---- 10.2.2 General registers ----
/// Device Control.
pub const CTRL: usize = 0x0000;
/// Alias of CTRL.
pub const CTRL_DUP: usize = 0x0004;
/// Device Status.
pub const STATUS: usize = 0x0008;
/// EEPROM/Flash Control.
pub const EECD: usize = 0x0010;
/// EEPROM Read.
pub const EERD: usize = 0x0014;
/// Extended Device Control.
pub const CTRL_EXT: usize = 0x0018;
/// MDI Control.
pub const MDIC: usize = 0x0020;
/// VLAN Ether Type.
pub const VET: usize = 0x0038;

/// CTRL: full duplex.
pub const CTRL_FD: u32 = 1 << 0;
/// CTRL: GIO master disable.
pub const CTRL_GIO_MASTER_DISABLE: u32 = 1 << 2;
/// CTRL: set link up.
pub const CTRL_SLU: u32 = 1 << 6;
/// CTRL: speed selection 1000 Mb/s.
pub const CTRL_SPD_1000: u32 = 2 << 8;
/// CTRL: force duplex.
pub const CTRL_FRCDPX: u32 = 1 << 12;
/// CTRL: software-definable pin 0.
pub const CTRL_SWDPIN0: u32 = 1 << 18;
/// CTRL: software-definable pin 2.
pub const CTRL_SWDPIN2: u32 = 1 << 20;
/// CTRL: ADVD3WUC.
pub const CTRL_ADVD3WUC: u32 = 1 << 20;
/// CTRL: device reset, self-clearing.
pub const CTRL_RST: u32 = 1 << 26;
/// CTRL: receive flow control enable.
pub const CTRL_RFCE: u32 = 1 << 27;
/// CTRL: transmit flow control enable.
pub const CTRL_TFCE: u32 = 1 << 28;
/// CTRL: PHY reset.
pub const CTRL_PHY_RST: u32 = 1 << 31;

/// STATUS: full duplex.
pub const STATUS_FD: u32 = 1 << 0;
/// STATUS: link up.
pub const STATUS_LU: u32 = 1 << 1;
/// STATUS: speed 1000.
pub const STATUS_SPEED_1000: u32 = 2 << 6;
/// STATUS: auto-speed-detect value 1000.
pub const STATUS_ASDV_1000: u32 = 2 << 8;
/// STATUS: PHY reset asserted.
pub const STATUS_PHYRA: u32 = 1 << 10;
/// STATUS: GIO master enable.
pub const STATUS_GIO_MASTER_ENABLE: u32 = 1 << 19;

/// CTRL_EXT: auto-speed-detection check (self-clearing in QEMU).
pub const CTRL_EXT_ASDCHK: u32 = 1 << 12;
/// CTRL_EXT: EEPROM reset (self-clearing).
pub const CTRL_EXT_EE_RST: u32 = 1 << 13;
/// CTRL_EXT: extended interrupt auto-mask enable (IAM cleared by each MSI-X cause).
pub const CTRL_EXT_EIAME: u32 = 1 << 24;
/// CTRL_EXT: interrupt acknowledge auto-mask enable. **QEMU**: with it set, an MSI-X message
/// that auto-clears ICR (EIAC) leaves IMS alone; without it IMS loses the cause too.
pub const CTRL_EXT_IAME: u32 = 1 << 27;

/// EERD: start.
pub const EERD_START: u32 = 1 << 0;
/// EERD: done.
pub const EERD_DONE: u32 = 1 << 1;

/// MDIC: data.
pub const MDIC_DATA_MASK: u32 = 0xffff;
/// MDIC: register address shift.
pub const MDIC_REG_SHIFT: u32 = 16;
/// MDIC: PHY address shift.
pub const MDIC_PHY_SHIFT: u32 = 21;
/// MDIC: write.
pub const MDIC_OP_WRITE: u32 = 1 << 26;
/// MDIC: read.
pub const MDIC_OP_READ: u32 = 2 << 26;
/// MDIC: ready.
pub const MDIC_READY: u32 = 1 << 28;
/// MDIC: interrupt on completion.
pub const MDIC_INT_EN: u32 = 1 << 29;
/// MDIC: error.
pub const MDIC_ERROR: u32 = 1 << 30;
/// The PHY address QEMU's e1000e answers on (the 82574's internal PHY).
pub const PHY_ADDR: u32 = 1;

// ---- 10.2.4 Interrupt registers ----
/// Interrupt Cause Read.
pub const ICR: usize = 0x00c0;
/// Interrupt Throttling Rate.
pub const ITR: usize = 0x00c4;
/// Interrupt Cause Set.
pub const ICS: usize = 0x00c8;
/// Interrupt Mask Set/Read.
pub const IMS: usize = 0x00d0;
/// Interrupt Mask Clear.
pub const IMC: usize = 0x00d8;
/// Extended Interrupt Auto Clear: ICR bits cleared after their MSI-X message.
pub const EIAC: usize = 0x00dc;
/// Interrupt Acknowledge Auto Mask.
pub const IAM: usize = 0x00e0;
/// Interrupt Vector Allocation (one register, five 4-bit entries).
pub const IVAR: usize = 0x00e4;
/// Extended Interrupt Throttle Rate, vector 0 (+4 per vector).
pub const EITR0: usize = 0x00e8;

/// ICR: link status change.
pub const ICR_LSC: u32 = 1 << 2;
/// ICR: receiver overrun.
pub const ICR_RXO: u32 = 1 << 6;
/// ICR: MDI access complete.
pub const ICR_MDAC: u32 = 1 << 9;
/// ICR: small receive packet detected.
pub const ICR_SRPD: u32 = 1 << 16;
/// ICR: receive ACK frame.
pub const ICR_ACK: u32 = 1 << 17;
/// ICR: manageability event.
pub const ICR_MNG: u32 = 1 << 18;
/// ICR: transmit queue empty.
pub const ICR_TXQE: u32 = 1 << 1;
/// ICR: receive queue 0 (MSI-X).
pub const ICR_RXQ0: u32 = 1 << 20;
/// ICR: receive queue 1.
pub const ICR_RXQ1: u32 = 1 << 21;
/// ICR: transmit queue 0.
pub const ICR_TXQ0: u32 = 1 << 22;
/// ICR: transmit queue 1.
pub const ICR_TXQ1: u32 = 1 << 23;
/// ICR: other causes (MSI-X).
pub const ICR_OTHER: u32 = 1 << 24;
/// ICR: interrupt asserted.
pub const ICR_ASSERTED: u32 = 1 << 31;
/// Causes that set ICR.OTHER in MSI-X mode (QEMU `E1000_ICR_OTHER_CAUSES`).
pub const ICR_OTHER_CAUSES: u32 = ICR_LSC | ICR_RXO | ICR_MDAC | ICR_SRPD | ICR_ACK | ICR_MNG;
/// Bits IMS takes (QEMU `e1000e_set_ims`'s valid mask).
pub const IMS_VALID: u32 = 0x01f7_82d7;
/// IVAR: entry valid.
pub const IVAR_VALID: u32 = 0x8;
/// IVAR: entry vector.
pub const IVAR_VEC_MASK: u32 = 0x7;
/// IVAR: write back (and interrupt) on every transmit descriptor, RS or not.
pub const IVAR_TX_INT_EVERY_WB: u32 = 1 << 31;
/// MSI-X vectors (QEMU `E1000E_MSIX_VEC_NUM`, datasheet 7.4.2: five).
pub const MSIX_VECTORS: u16 = 5;
/// The smallest interval QEMU keeps in ITR (`E1000E_MIN_XITR`), in 256 ns units, and ITR's
/// reset value; a non-zero EITR throttles for at least this long (EITR resets to 0, §7.4.4).
pub const MIN_XITR: u32 = 500;
/// Nanoseconds per ITR/EITR unit.
pub const XITR_NS: u64 = 256;

// ---- 10.2.5 Receive registers ----
/// Receive Control.
pub const RCTL: usize = 0x0100;
/// Receive queue 0 block (RDBAL0), queue 1 at +0x100.
pub const RXQ_BASE: usize = 0x2800;
/// Transmit queue 0 block (TDBAL), queue 1 at +0x100.
pub const TXQ_BASE: usize = 0x3800;
/// Stride between the two queues' blocks.
pub const Q_STRIDE: usize = 0x100;
/// Queue block: descriptor base low.
pub const Q_DBAL: usize = 0x00;
/// Queue block: descriptor base high.
pub const Q_DBAH: usize = 0x04;
/// Queue block: ring length in bytes.
pub const Q_DLEN: usize = 0x08;
/// Queue block: head.
pub const Q_DH: usize = 0x10;
/// Queue block: tail.
pub const Q_DT: usize = 0x18;
/// Queue block: RXDCTL / TXDCTL.
pub const Q_DCTL: usize = 0x28;
/// TX queue block: TARC (transmit arbitration count; bit 10 enables the queue).
pub const Q_TARC: usize = 0x40;
/// TARC: queue enable. **QEMU** sends from a queue only while it is set.
pub const TARC_ENABLE: u32 = 1 << 10;
/// Receive Checksum Control.
pub const RXCSUM: usize = 0x5000;
/// Receive Filter Control.
pub const RFCTL: usize = 0x5008;
/// Multicast Table Array, 128 words.
pub const MTA: usize = 0x5200;
/// Receive Address Low/High, 16 entries of 8 bytes.
pub const RA: usize = 0x5400;
/// VLAN Filter Table Array, 128 words.
pub const VFTA: usize = 0x5600;
/// Multiple Receive Queues Command.
pub const MRQC: usize = 0x5818;
/// Redirection table, 32 words of four 1-byte entries (queue in bit 7).
pub const RETA: usize = 0x5c00;
/// RSS random key, 10 words.
pub const RSSRK: usize = 0x5c80;
/// Receive small packet detect (bits 11:0).
pub const RSRPD: usize = 0x2c00;
/// Packet buffer allocation (kept over software reset).
pub const PBA: usize = 0x1000;
/// Packet buffer size (kept over software reset).
pub const PBS: usize = 0x1008;

/// RCTL: receiver enable.
pub const RCTL_EN: u32 = 1 << 1;
/// RCTL: store bad packets.
pub const RCTL_SBP: u32 = 1 << 2;
/// RCTL: long packet enable.
pub const RCTL_LPE: u32 = 1 << 5;
/// RCTL: descriptor type (01b: packet split).
pub const RCTL_DTYP_MASK: u32 = 3 << 10;
/// RCTL: VLAN filter enable.
pub const RCTL_VFE: u32 = 1 << 18;
/// RCTL: buffer size field shift (2 bits).
pub const RCTL_BSIZE_SHIFT: u32 = 16;
/// RCTL: buffer size extension.
pub const RCTL_BSEX: u32 = 1 << 25;
/// RCTL: strip the Ethernet CRC.
pub const RCTL_SECRC: u32 = 1 << 26;
/// RCTL: flexible buffer size, KiB (bits 30:27); 0 uses BSIZE.
pub const RCTL_FLXBUF_SHIFT: u32 = 27;
/// RXCSUM: IPv4 checksum offload.
pub const RXCSUM_IPOFLD: u32 = 1 << 8;
/// RXCSUM: TCP/UDP checksum offload.
pub const RXCSUM_TUOFLD: u32 = 1 << 9;
/// RXCSUM: packet checksum disable (write back the RSS hash instead of IP id/checksum).
pub const RXCSUM_PCSD: u32 = 1 << 13;
/// RFCTL: ACK interrupt disable.
pub const RFCTL_ACK_DIS: u32 = 1 << 12;
/// RFCTL: ACK only for TCP segments without data.
pub const RFCTL_ACK_DATA_DIS: u32 = 1 << 13;
/// RFCTL: extended status (extended receive descriptors).
pub const RFCTL_EXTEN: u32 = 1 << 15;
/// RAH: address valid.
pub const RAH_AV: u32 = 1 << 31;
/// MRQC: multiple-queue enable field (bits 1:0; 01b = RSS).
pub const MRQC_ENABLE_MASK: u32 = 0x3;
/// MRQC: RSS on two queues.
pub const MRQC_ENABLE_RSS: u32 = 0x1;
/// MRQC: hash TCP/IPv4.
pub const MRQC_TCPIPV4: u32 = 1 << 16;
/// MRQC: hash IPv4.
pub const MRQC_IPV4: u32 = 1 << 17;

// ---- 10.2.6 Transmit registers ----
/// Transmit Control.
pub const TCTL: usize = 0x0400;
/// Transmit IPG.
pub const TIPG: usize = 0x0410;
/// TCTL: transmit enable.
pub const TCTL_EN: u32 = 1 << 1;

// ---- 10.2.7 Statistics ----
/// CRC error count.
pub const CRCERRS: usize = 0x4000;
/// Missed packets count.
pub const MPC: usize = 0x4010;
/// Good packets received (**QEMU**: a copy of TPR).
pub const GPRC: usize = 0x4074;
/// Broadcast packets received.
pub const BPRC: usize = 0x4078;
/// Multicast packets received.
pub const MPRC: usize = 0x407c;
/// Good packets transmitted.
pub const GPTC: usize = 0x4080;
/// Good octets received, low (**QEMU**: a copy of TORL).
pub const GORCL: usize = 0x4088;
/// Good octets received, high.
pub const GORCH: usize = 0x408c;
/// Good octets transmitted, low.
pub const GOTCL: usize = 0x4090;
/// Good octets transmitted, high.
pub const GOTCH: usize = 0x4094;
/// Receive undersize count.
pub const RUC: usize = 0x40a4;
/// Receive oversize count.
pub const ROC: usize = 0x40ac;
/// Total octets received, low.
pub const TORL: usize = 0x40c0;
/// Total octets received, high.
pub const TORH: usize = 0x40c4;
/// Total octets transmitted, low.
pub const TOTL: usize = 0x40c8;
/// Total octets transmitted, high.
pub const TOTH: usize = 0x40cc;
/// Total packets received.
pub const TPR: usize = 0x40d0;
/// Total packets transmitted.
pub const TPT: usize = 0x40d4;
/// Multicast packets transmitted.
pub const MPTC: usize = 0x40f0;
/// Broadcast packets transmitted.
pub const BPTC: usize = 0x40f4;

// ---- 7.2 transmit and 7.1.5 extended receive descriptors ----
/// TX: end of packet (lower dword).
pub const TXD_EOP: u32 = 1 << 24;
/// TX: report status.
pub const TXD_RS: u32 = 1 << 27;
/// TX: descriptor extension.
pub const TXD_DEXT: u32 = 1 << 29;
/// TX: data descriptor type (with DEXT); DEXT without it is a context descriptor.
pub const TXD_DTYP_D: u32 = 1 << 20;
/// TX: POPTS.TXSM of an extended data descriptor (upper dword, bit 9): insert the TCP/UDP
/// checksum the context describes.
pub const TXD_POPTS_TXSM: u32 = 1 << 9;
/// TX/RX status: descriptor done.
pub const DESC_DD: u32 = 1 << 0;
/// RX status: end of packet.
pub const RXD_EOP: u32 = 1 << 1;
/// RX status: TCP/UDP checksum: UDP.
pub const RXD_UDPCS: u32 = 1 << 4;
/// RX status: TCP checksum calculated.
pub const RXD_TCPCS: u32 = 1 << 5;
/// RX status: IPv4 checksum calculated.
pub const RXD_IPCS: u32 = 1 << 6;
/// RX status: IP identification valid.
pub const RXD_IPIDV: u32 = 1 << 9;
/// RX status: ACK packet.
pub const RXD_ACK: u32 = 1 << 15;
/// RX status: packet type shift (bits 19:16).
pub const RXD_PKT_TYPE_SHIFT: u32 = 16;
/// Packet type: IPv4 only.
pub const PKT_IP4: u32 = 1;
/// Packet type: IPv4 with TCP or UDP.
pub const PKT_IP4_XDP: u32 = 2;
/// RX error: TCP/UDP checksum.
pub const RXD_ERR_TCPE: u32 = 1 << 29;
/// RX error: IPv4 checksum.
pub const RXD_ERR_IPE: u32 = 1 << 30;
/// RX error: data error (CRC).
pub const RXD_ERR_RXE: u32 = 1 << 31;
/// RSS type: TCP/IPv4.
pub const RSS_TYPE_TCPV4: u32 = 1;
/// RSS type: IPv4.
pub const RSS_TYPE_IPV4: u32 = 2;

// ---- PHY (IEEE 802.3 clause 22 and the 82574's pages) ----
/// PHY control.
pub const PHY_BMCR: usize = 0;
/// PHY status.
pub const PHY_BMSR: usize = 1;
/// Link partner ability.
pub const PHY_ANLPAR: usize = 5;
/// Page select (any page).
pub const PHY_PAGE: usize = 0x16;
/// OEM bits (page 0); bit 10 restarts autonegotiation.
pub const PHY_OEM_BITS: usize = 0x19;
/// BMCR: reset (self-clearing).
pub const BMCR_RESET: u16 = 1 << 15;
/// BMCR: autonegotiation enable.
pub const BMCR_AUTOEN: u16 = 1 << 12;
/// BMCR: restart autonegotiation (self-clearing).
pub const BMCR_ANRESTART: u16 = 1 << 9;
/// BMSR: link status.
pub const BMSR_LINK_ST: u16 = 1 << 2;
/// BMSR: autonegotiation complete.
pub const BMSR_AN_COMP: u16 = 1 << 5;
/// ANLPAR: acknowledge.
pub const ANLPAR_ACK: u16 = 1 << 14;
/// Autonegotiation time of QEMU's timer (500 ms virtual).
pub const AUTONEG_NS: u64 = 500_000_000;

/// Byte offset of RX queue `n`'s register `reg`.
pub const fn rxq(n: usize, reg: usize) -> usize {
    RXQ_BASE + Q_STRIDE * n + reg
}

/// Byte offset of TX queue `n`'s register `reg`.
pub const fn txq(n: usize, reg: usize) -> usize {
    TXQ_BASE + Q_STRIDE * n + reg
}

/// Queues of each direction (QEMU `E1000E_NUM_QUEUES`).
pub const QUEUES: usize = 2;

const _: () = assert!(rxq(1, Q_DT) == 0x2918 && txq(1, Q_TARC) == 0x3940);
const _: () = assert!(EITR0 + 4 * (MSIX_VECTORS as usize - 1) == 0xf8);
