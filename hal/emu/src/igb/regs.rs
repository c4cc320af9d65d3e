//! Register offsets (BAR0) and bits of the 82576 as the emulator models them.
//!
//! Section numbers are those of the Intel 82576EB GbE Controller Datasheet, chapter 8
//! ("Programming Interface"); where QEMU's igb model differs it says so. Written from the
//! datasheet layout and QEMU's `igb_regs.h` / `e1000x_regs.h`, independently of the driver.
#![allow(
    clippy::unreadable_literal,
    reason = "offsets are written as the datasheet prints them"
)]

/// Size of BAR0 (128 KiB, QEMU igb.c `IGB_MMIO_SIZE`).
pub const BAR0_LEN: usize = 0x2_0000;

// ---- 8.2 General registers ----
/// Device Control (8.2.1).
pub const CTRL: usize = 0x0000;
/// Alias of CTRL (QEMU `CTRL_DUP`).
pub const CTRL_DUP: usize = 0x0004;
/// Device Status (8.2.2), read only.
pub const STATUS: usize = 0x0008;
/// EEPROM/Flash Control (8.2.3).
pub const EECD: usize = 0x0010;
/// EEPROM Read (8.2.4).
pub const EERD: usize = 0x0014;
/// Extended Device Control (8.2.5).
pub const CTRL_EXT: usize = 0x0018;
/// MDI Control: PHY register access (8.2.6).
pub const MDIC: usize = 0x0020;
/// VLAN Ether Type (8.2.9).
pub const VET: usize = 0x0038;

/// CTRL: full duplex.
pub const CTRL_FD: u32 = 1 << 0;
/// CTRL: GIO master disable.
pub const CTRL_GIO_MASTER_DISABLE: u32 = 1 << 2;
/// CTRL: link reset.
pub const CTRL_LRST: u32 = 1 << 3;
/// CTRL: set link up (no effect on link state in QEMU, nor here).
pub const CTRL_SLU: u32 = 1 << 6;
/// CTRL: speed 1000 Mb/s.
pub const CTRL_SPD_1000: u32 = 2 << 8;
/// CTRL: force speed.
pub const CTRL_FRCSPD: u32 = 1 << 11;
/// CTRL: force duplex.
pub const CTRL_FRCDPX: u32 = 1 << 12;
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
/// STATUS: PHY reset asserted (cleared by writing STATUS with this bit 0).
pub const STATUS_PHYRA: u32 = 1 << 10;
/// STATUS: GIO master enable.
pub const STATUS_GIO_MASTER_ENABLE: u32 = 1 << 19;

/// EERD: start read.
pub const EERD_START: u32 = 1 << 0;
/// EERD: read done.
pub const EERD_DONE: u32 = 1 << 1;

/// MDIC: data.
pub const MDIC_DATA_MASK: u32 = 0xffff;
/// MDIC: PHY register address shift.
pub const MDIC_REG_SHIFT: u32 = 16;
/// MDIC: PHY address shift.
pub const MDIC_PHY_SHIFT: u32 = 21;
/// MDIC: write opcode.
pub const MDIC_OP_WRITE: u32 = 1 << 26;
/// MDIC: read opcode.
pub const MDIC_OP_READ: u32 = 2 << 26;
/// MDIC: ready (access done).
pub const MDIC_READY: u32 = 1 << 28;
/// MDIC: interrupt on completion.
pub const MDIC_INT_EN: u32 = 1 << 29;
/// MDIC: error.
pub const MDIC_ERROR: u32 = 1 << 30;
/// The only PHY address QEMU's igb answers on.
pub const PHY_ADDR: u32 = 1;

// ---- 8.8 Interrupt registers ----
/// Interrupt Cause Read (8.8.1).
pub const ICR: usize = 0x00c0;
/// Interrupt Cause Set.
pub const ICS: usize = 0x00c8;
/// Interrupt Mask Set/Read.
pub const IMS: usize = 0x00d0;
/// Interrupt Mask Clear.
pub const IMC: usize = 0x00d8;
/// Interrupt Acknowledge Auto Mask.
pub const IAM: usize = 0x00e0;
/// General Purpose Interrupt Enable (8.8.12).
pub const GPIE: usize = 0x1514;
/// Extended Interrupt Cause Set.
pub const EICS: usize = 0x1520;
/// Extended Interrupt Mask Set/Read.
pub const EIMS: usize = 0x1524;
/// Extended Interrupt Mask Clear.
pub const EIMC: usize = 0x1528;
/// Extended Interrupt Auto Clear.
pub const EIAC: usize = 0x152c;
/// Extended Interrupt Auto Mask.
pub const EIAM: usize = 0x1530;
/// Extended Interrupt Cause Read.
pub const EICR: usize = 0x1580;
/// Extended Interrupt Throttle, vector 0 (+4 per vector).
pub const EITR0: usize = 0x1680;
/// Interrupt Vector Allocation, IVAR0..7 (8.8.15).
pub const IVAR0: usize = 0x1700;
/// IVAR for other causes.
pub const IVAR_MISC: usize = 0x1740;

/// ICR: transmit descriptor written back.
pub const ICR_TXDW: u32 = 1 << 0;
/// ICR: link status change.
pub const ICR_LSC: u32 = 1 << 2;
/// ICR: receive overrun (frame dropped for lack of descriptors).
pub const ICR_RXO: u32 = 1 << 6;
/// ICR: receive descriptor written back.
pub const ICR_RXDW: u32 = 1 << 7;
/// ICR: MDI access complete.
pub const ICR_MDAC: u32 = 1 << 9;
/// ICR: device reset asserted.
pub const ICR_DRSTA: u32 = 1 << 30;
/// ICR: interrupt asserted.
pub const ICR_INT_ASSERTED: u32 = 1 << 31;
/// IMS write mask (QEMU `igb_set_ims`).
pub const IMS_VALID: u32 = 0x77d4_fbfd;
/// GPIE: non-selective interrupt clear on read.
pub const GPIE_NSICR: u32 = 1 << 0;
/// GPIE: MSI-X mode (EICR bits are vectors).
pub const GPIE_MSIX_MODE: u32 = 1 << 4;
/// GPIE: extended interrupt auto-mask enable.
pub const GPIE_EIAME: u32 = 1 << 30;
/// EICR bits that exist in MSI-X mode (25 vectors).
pub const EICR_MSIX_MASK: u32 = 0x01ff_ffff;
/// EICR: other causes (non-MSI-X mode).
pub const EICR_OTHER: u32 = 1 << 31;
/// IVAR entry valid bit.
pub const IVAR_VALID: u32 = 0x80;
/// MSI-X vectors the physical function has (QEMU `IGB_MSIX_VEC_NUM`).
pub const MSIX_VECTORS: u16 = 10;

// ---- 8.9 Receive registers ----
/// Receive Control (8.9.1).
pub const RCTL: usize = 0x0100;
/// Receive Checksum Control (8.9.13).
pub const RXCSUM: usize = 0x5000;
/// Receive Long Packet Maximum Length.
pub const RLPML: usize = 0x5004;
/// Receive Filter Control.
pub const RFCTL: usize = 0x5008;
/// Multicast Table Array, 128 words.
pub const MTA: usize = 0x5200;
/// Receive Address Low/High, entries 0..15, 8 bytes each (8.9.x RAL/RAH).
pub const RA: usize = 0x5400;
/// Receive Address entries 16..23.
pub const RA2: usize = 0x54e0;
/// Legacy alias of RAL0 (e1000 layout).
pub const RA_ALIAS: usize = 0x0040;
/// Multiple Receive Queues Command (8.9.x MRQC).
pub const MRQC: usize = 0x5818;
/// Redirection table, 32 words of four 1-byte entries.
pub const RETA: usize = 0x5c00;
/// RSS random key, 10 words.
pub const RSSRK: usize = 0x5c80;
/// Receive packet buffer size (kept over software reset).
pub const RXPBS: usize = 0x2404;
/// Unicast Table Array, 128 words (VMDq: unicast hash filter; QEMU `E1000_UTA`).
pub const UTA: usize = 0xa000;

// ---- Virtualization / VMDq (datasheet 7.10; QEMU igb_regs.h) ----
/// VMDq Control (QEMU `E1000_VT_CTL`).
pub const VT_CTL: usize = 0x581c;
/// VF Receive Enables: bit n lets pool n receive (QEMU `E1000_VFRE`, reset 0xFF).
pub const VFRE: usize = 0x0c8c;
/// VM Offload register of pool 0 (+4 per pool, 8 pools; QEMU `E1000_VMOLR(n)`).
pub const VMOLR0: usize = 0x5ad0;
/// VMDq pools (QEMU `IGB_NUM_VM_POOLS`): pool n is receive queue n.
pub const VM_POOLS: usize = 8;
/// MRQC bit 0: VMDq mode (QEMU `if (core->mac[MRQC] & 1)`; MRQE 011b / 101b).
pub const MRQC_VMDQ: u32 = 1 << 0;
/// RAH: pool select, bits 25:18 (QEMU `E1000_RAH_POOL_MASK`); pool n is bit 18 + n.
pub const RAH_POOL_MASK: u32 = 0x03fc_0000;
/// RAH: shift of the pool-select field (QEMU `E1000_RAH_POOL_1` = 1 << 18).
pub const RAH_POOL_SHIFT: u32 = 18;
/// VT_CTL: default pool, bits 9:7.
pub const VT_CTL_DEF_POOL_SHIFT: u32 = 7;
/// VT_CTL: default pool mask.
pub const VT_CTL_DEF_POOL_MASK: u32 = 0x7 << VT_CTL_DEF_POOL_SHIFT;
/// VT_CTL: unmatched unicast is not sent to the default pool.
pub const VT_CTL_DIS_DEF_POOL: u32 = 1 << 29;
/// VMOLR: long packet maximum length, bits 13:0 (FCS included).
pub const VMOLR_RLPML_MASK: u32 = 0x3fff;
/// VMOLR: accept long packets (up to RLPML) into this pool.
pub const VMOLR_LPE: u32 = 1 << 16;
/// VMOLR: accept untagged packets (only with RCTL.VFE, which the model does not filter on).
pub const VMOLR_AUPE: u32 = 1 << 24;
/// VMOLR: accept frames that hit the MTA/UTA hash but no exact address (QEMU uses it for
/// multicast and unicast alike).
pub const VMOLR_ROMPE: u32 = 1 << 25;
/// VMOLR: accept broadcast into this pool.
pub const VMOLR_BAM: u32 = 1 << 27;
/// VMOLR: strip CRC (set at reset; the model strips by RCTL.SECRC only, as QEMU's
/// `e1000x_fcs_len`).
pub const VMOLR_STRCRC: u32 = 1 << 31;

/// RCTL: receiver enable.
pub const RCTL_EN: u32 = 1 << 1;
/// RCTL: store bad packets.
pub const RCTL_SBP: u32 = 1 << 2;
/// RCTL: unicast promiscuous.
pub const RCTL_UPE: u32 = 1 << 3;
/// RCTL: multicast promiscuous.
pub const RCTL_MPE: u32 = 1 << 4;
/// RCTL: long packet enable.
pub const RCTL_LPE: u32 = 1 << 5;
/// RCTL: multicast offset shift.
pub const RCTL_MO_SHIFT: u32 = 12;
/// RCTL: broadcast accept.
pub const RCTL_BAM: u32 = 1 << 15;
/// RCTL: buffer size shift (2 bits).
pub const RCTL_BSIZE_SHIFT: u32 = 16;
/// RCTL: buffer size extension.
pub const RCTL_BSEX: u32 = 1 << 25;
/// RCTL: strip Ethernet CRC.
pub const RCTL_SECRC: u32 = 1 << 26;
/// RXCSUM: IPv4 header checksum offload (IPCS/IPE in the write-back).
pub const RXCSUM_IPOFLD: u32 = 1 << 8;
/// RXCSUM: TCP/UDP checksum offload (L4I, UDPCS/L4E in the write-back).
pub const RXCSUM_TUOFLD: u32 = 1 << 9;
/// RXCSUM: packet checksum disable (write back the RSS hash instead).
pub const RXCSUM_PCSD: u32 = 1 << 13;
/// RAH: address valid.
pub const RAH_AV: u32 = 1 << 31;
/// MRQC: multiple receive queues enable field.
pub const MRQC_MRQE_MASK: u32 = 0x7;
/// MRQC: MRQE value for RSS.
pub const MRQC_MRQE_RSS: u32 = 0x2;
/// MRQC: hash TCP/IPv4.
pub const MRQC_TCPIPV4: u32 = 1 << 16;
/// MRQC: hash IPv4.
pub const MRQC_IPV4: u32 = 1 << 17;
/// MRQC: hash UDP/IPv4.
pub const MRQC_UDPIPV4: u32 = 1 << 22;

// ---- 8.10/8.12 Per-queue registers: n = 0..15 at 0xC000/0xE000 + 0x40·n ----
/// Number of queue pairs (QEMU `IGB_NUM_QUEUES`).
pub const QUEUES: usize = 16;
/// First RX queue block.
pub const RXQ_BASE: usize = 0xc000;
/// First TX queue block.
pub const TXQ_BASE: usize = 0xe000;
/// Stride between queue blocks.
pub const Q_STRIDE: usize = 0x40;
/// Legacy location of RX queues 0..3 (0x2800 + 0x100·n).
pub const RXQ_LEGACY: usize = 0x2800;
/// Legacy location of TX queues 0..3 (0x3800 + 0x100·n).
pub const TXQ_LEGACY: usize = 0x3800;
/// Queue block: descriptor base low.
pub const Q_DBAL: usize = 0x00;
/// Queue block: descriptor base high.
pub const Q_DBAH: usize = 0x04;
/// Queue block: ring length in bytes.
pub const Q_DLEN: usize = 0x08;
/// RX queue block: split and replication control.
pub const Q_SRRCTL: usize = 0x0c;
/// Queue block: head.
pub const Q_DH: usize = 0x10;
/// Queue block: tail (the doorbell).
pub const Q_DT: usize = 0x18;
/// Queue block: RXDCTL/TXDCTL.
pub const Q_DCTL: usize = 0x28;
/// RX queue block: per-queue drop count.
pub const Q_RQDPC: usize = 0x30;
/// TX queue block: head write-back address low (bit 0 enables).
pub const Q_TDWBAL: usize = 0x38;
/// TX queue block: head write-back address high.
pub const Q_TDWBAH: usize = 0x3c;
/// RXDCTL/TXDCTL: queue enable.
pub const DCTL_ENABLE: u32 = 1 << 25;
/// SRRCTL: packet buffer size in KiB.
pub const SRRCTL_BSIZEPKT_MASK: u32 = 0x7f;

/// Transmit Control (8.12.1).
pub const TCTL: usize = 0x0400;
/// Extended transmit control.
pub const TCTL_EXT: usize = 0x0404;
/// Transmit IPG.
pub const TIPG: usize = 0x0410;
/// Transmit packet buffer size (kept over software reset).
pub const TXPBS: usize = 0x3404;
/// TCTL: transmit enable.
pub const TCTL_EN: u32 = 1 << 1;

// ---- 8.19 Statistics: clear on read (datasheet) ----
/// CRC error count.
pub const CRCERRS: usize = 0x4000;
/// Missed packets count.
pub const MPC: usize = 0x4010;
/// Good packets received.
pub const GPRC: usize = 0x4074;
/// Broadcast packets received.
pub const BPRC: usize = 0x4078;
/// Multicast packets received.
pub const MPRC: usize = 0x407c;
/// Good packets transmitted.
pub const GPTC: usize = 0x4080;
/// Good octets received, low.
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

// ---- Descriptors (7.1.5 advanced RX, 7.2.2 TX) ----
/// TX: end of packet (dword 2).
pub const TXD_EOP: u32 = 1 << 24;
/// TX: report status.
pub const TXD_RS: u32 = 1 << 27;
/// TX: descriptor extension (advanced).
pub const TXD_DEXT: u32 = 1 << 29;
/// TX: descriptor type field (advanced).
pub const TXD_DTYP_MASK: u32 = 0xf << 20;
/// TX: advanced data descriptor type.
pub const TXD_DTYP_DATA: u32 = 0x3 << 20;
/// TX/RX write-back: descriptor done.
pub const DESC_DD: u32 = 1 << 0;
/// RX write-back status: end of packet.
pub const RXD_EOP: u32 = 1 << 1;
/// RX write-back error: RX data error (CRC).
pub const RXD_ERR_RXE: u32 = 1 << 31;
/// RX status: UDP checksum checked (7.1.5.2).
pub const RXD_UDPCS: u32 = 1 << 4;
/// RX status: L4I, the TCP/UDP checksum checked.
pub const RXD_L4I: u32 = 1 << 5;
/// RX status: IPv4 header checksum checked.
pub const RXD_IPCS: u32 = 1 << 6;
/// RX error: L4E, the TCP/UDP checksum found wrong.
pub const RXD_ERR_L4E: u32 = 1 << 29;
/// RX error: IPE, the IPv4 header checksum found wrong.
pub const RXD_ERR_IPE: u32 = 1 << 30;
/// TX data descriptor, `olinfo_status` (upper dword): POPTS.TXSM, insert the L4 checksum.
pub const TXD_POPTS_TXSM: u32 = 1 << 9;
/// TX descriptor type: advanced context descriptor (7.2.2.2).
pub const TXD_DTYP_CTXT: u32 = 0x2 << 20;
/// RX write-back packet type: IPv4 (pkt_info bit 4).
pub const RXD_PKT_IPV4: u32 = 1 << 4;
/// RX write-back packet type: TCP.
pub const RXD_PKT_TCP: u32 = 1 << 8;
/// RX write-back packet type: UDP.
pub const RXD_PKT_UDP: u32 = 1 << 9;
/// RSS type: TCP/IPv4.
pub const RSS_TYPE_TCPV4: u32 = 1;
/// RSS type: IPv4.
pub const RSS_TYPE_IPV4: u32 = 2;
/// RSS type: UDP/IPv4.
pub const RSS_TYPE_UDPV4: u32 = 7;

// ---- PHY (IEEE 802.3 clause 22 registers, IGP03 PHY as QEMU presents it) ----
/// PHY control.
pub const PHY_BMCR: usize = 0;
/// PHY status.
pub const PHY_BMSR: usize = 1;
/// PHY identifier 1.
pub const PHY_ID1: usize = 2;
/// PHY identifier 2.
pub const PHY_ID2: usize = 3;
/// Link partner ability.
pub const PHY_ANLPAR: usize = 5;
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
/// IGP03E1000_E PHY id, revision 1, as QEMU reports it.
pub const PHY_ID: u32 = 0x02a8_0391;
/// Autonegotiation time QEMU's timer takes (`e1000x_restart_autoneg`: 500 ms virtual).
pub const AUTONEG_NS: u64 = 500_000_000;

/// Byte offset of RX queue `n`'s register `reg`.
pub const fn rxq(n: usize, reg: usize) -> usize {
    RXQ_BASE + Q_STRIDE * n + reg
}

/// Byte offset of TX queue `n`'s register `reg`.
pub const fn txq(n: usize, reg: usize) -> usize {
    TXQ_BASE + Q_STRIDE * n + reg
}

const _: () = assert!(txq(QUEUES - 1, Q_TDWBAH) < BAR0_LEN);
const _: () = assert!(rxq(QUEUES - 1, Q_RQDPC) < TXQ_BASE);
const _: () = assert!(RA + 16 * 8 == RA2 - 0x60);
const _: () = assert!(RAH_POOL_MASK >> RAH_POOL_SHIFT == (1 << VM_POOLS) - 1);
