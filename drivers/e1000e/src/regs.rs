//! Register offsets and bit fields of the 82574, as the driver uses them.
//!
//! Same conventions as `ringfab-igb`'s `regs.rs`: offsets are `const`s (and `const fn`s for the
//! two queues), checked at compile time against the datasheet's register summary; bit fields
//! are `tock_registers::register_bitfields!` definitions named like the register (`r::RCTL` the
//! offset, `r::RCTL::EN` a field). The IVAR register packs five 4-bit entries at fixed places,
//! which a field definition of one register expresses directly ([`IVAR`]).
//!
//! Sources: *Intel 82574 GbE Controller Family Datasheet* — chapter 10 "Programming
//! Interface" for registers (10.2.2 general, 10.2.4 interrupt, 10.2.5 receive, 10.2.6
//! transmit, 10.2.7 statistics), chapter 7 for descriptors (7.1 receive, 7.2 transmit) and
//! interrupts (7.4). Section numbers are as recalled; the datasheet was not at hand to check
//! them. Where QEMU's `hw/net/e1000e_core.c` behaves differently the comment says so
//! (**QEMU**).

use tock_registers::register_bitfields;
use tock_registers::{LocalRegisterCopy, RegisterLongName};

/// Wraps a 32-bit value of register `R` for reading by field.
#[inline]
pub(crate) const fn reg<R: RegisterLongName>(value: u32) -> LocalRegisterCopy<u32, R> {
    LocalRegisterCopy::new(value)
}

// --- PCI configuration space (PCI Local Bus Specification 3.0, §6.2) -------------------------

/// Vendor id (bits 15:0) and device id (bits 31:16).
pub(crate) const PCI_ID: u16 = 0x00;
/// Command (bits 15:0) and status (bits 31:16, write-1-to-clear) registers.
pub(crate) const PCI_COMMAND: u16 = 0x04;

register_bitfields![u32,
    /// The identification dword at [`PCI_ID`](const@PCI_ID).
    pub(crate) PCI_ID [
        /// Vendor id.
        VENDOR OFFSET(0) NUMBITS(16) [],
        /// Device id.
        DEVICE OFFSET(16) NUMBITS(16) [],
    ],
    /// The command/status dword at [`PCI_COMMAND`](const@PCI_COMMAND).
    pub(crate) PCI_COMMAND [
        /// Command: respond to memory-space accesses.
        MEMORY OFFSET(1) NUMBITS(1) [],
        /// Command: the function may master the bus (DMA).
        BUS_MASTER OFFSET(2) NUMBITS(1) [],
        /// The status half (write-1-to-clear): written back as zero.
        STATUS OFFSET(16) NUMBITS(16) [],
    ],
];

/// Intel's PCI vendor id.
pub(crate) const VENDOR_INTEL: u16 = 0x8086;
/// 82574 parts, `(vendor, device)` (datasheet §9.3.x / NVM word 0x0D): 82574L (what QEMU's
/// `e1000e` presents) and 82574IT; programmed identically.
pub(crate) const PCI_IDS: [(u16, u16); 2] = [(VENDOR_INTEL, 0x10D3), (VENDOR_INTEL, 0x10F6)];

// --- General registers (§10.2.2) ---------------------------------------------------------------

/// Device Control (§10.2.2.1).
pub(crate) const CTRL: usize = 0x0000;
/// Device Status (§10.2.2.2).
pub(crate) const STATUS: usize = 0x0008;
/// Extended Device Control (§10.2.2.5).
pub(crate) const CTRL_EXT: usize = 0x0018;
/// MDI Control: PHY register access (§10.2.2.7).
pub(crate) const MDIC: usize = 0x0020;
/// The internal PHY's MDIO address (**QEMU** answers only address 1, as the silicon's PHY does).
pub(crate) const PHY_ADDR: u32 = 1;

register_bitfields![u32,
    /// Device Control (§10.2.2.1).
    pub(crate) CTRL [
        /// SLU: set link up (**QEMU** ignores it; the link follows autonegotiation).
        SLU OFFSET(6) NUMBITS(1) [],
        /// RST: software reset, self-clearing.
        RST OFFSET(26) NUMBITS(1) [],
    ],
    /// Device Status (§10.2.2.2).
    pub(crate) STATUS [
        /// FD: full duplex.
        FD OFFSET(0) NUMBITS(1) [],
        /// LU: link up.
        LU OFFSET(1) NUMBITS(1) [],
        /// SPEED: 00 = 10, 01 = 100, 1x = 1000 Mb/s.
        SPEED OFFSET(6) NUMBITS(2) [
            /// 10 Mb/s.
            Mbps10 = 0b00,
            /// 100 Mb/s.
            Mbps100 = 0b01,
            /// 1000 Mb/s (11b means the same).
            Mbps1000 = 0b10,
        ],
    ],
    /// Extended Device Control (§10.2.2.5).
    pub(crate) CTRL_EXT [
        /// IAME: interrupt acknowledge auto-mask enable. **QEMU**: with it set, an MSI-X
        /// message that auto-clears its ICR cause (EIAC) leaves the cause's IMS bit alone;
        /// without it the cause masks itself after every message.
        IAME OFFSET(27) NUMBITS(1) [],
        /// PBA_CLR: unmasking a cause (IMS) clears its vector's pending bit.
        PBA_CLR OFFSET(31) NUMBITS(1) [],
    ],
    /// MDI Control (§10.2.2.7).
    pub(crate) MDIC [
        /// DATA: the PHY register value written, or read back.
        DATA OFFSET(0) NUMBITS(16) [],
        /// REGADD: PHY register number.
        REGADD OFFSET(16) NUMBITS(5) [],
        /// PHYADD: PHY address on the MDIO bus.
        PHYADD OFFSET(21) NUMBITS(5) [],
        /// OP: the access.
        OP OFFSET(26) NUMBITS(2) [
            /// 01b: write.
            Write = 0b01,
            /// 10b: read.
            Read = 0b10,
        ],
        /// R: the access completed.
        READY OFFSET(28) NUMBITS(1) [],
        /// E: the access failed.
        ERROR OFFSET(30) NUMBITS(1) [],
    ],
];

/// PHY Control register (IEEE 802.3 clause 22 register 0; datasheet §10.3 PHY registers).
pub(crate) const PHY_BMCR: u8 = 0;

register_bitfields![u16,
    /// PHY Control (IEEE 802.3 clause 22 register 0).
    pub(crate) BMCR [
        /// Speed selection MSB (1000 Mb/s together with bit 13 clear).
        SPEED1000 OFFSET(6) NUMBITS(1) [],
        /// Full duplex (the forced value; autonegotiation overrides it).
        FD OFFSET(8) NUMBITS(1) [],
        /// Restart auto-negotiation (self-clearing).
        ANRESTART OFFSET(9) NUMBITS(1) [],
        /// Auto-negotiation enable.
        AUTOEN OFFSET(12) NUMBITS(1) [],
        /// PHY reset (self-clearing).
        RESET OFFSET(15) NUMBITS(1) [],
    ],
];

// --- Interrupt registers (§10.2.4; MSI-X operation §7.4.2) -------------------------------------

/// Interrupt Cause Read (§10.2.4.1); read clears (under the conditions of §7.4.x).
pub(crate) const ICR: usize = 0x00C0;
/// Interrupt Mask Set/Read (§10.2.4.4).
pub(crate) const IMS: usize = 0x00D0;
/// Interrupt Mask Clear (§10.2.4.5).
pub(crate) const IMC: usize = 0x00D8;
/// Extended Interrupt Auto Clear (§10.2.4.6): ICR causes cleared once their MSI-X message is
/// sent. Without it a cause that stays set never raises its vector again (**QEMU** signals only
/// newly pending ICR & IMS bits).
pub(crate) const EIAC: usize = 0x00DC;
/// Interrupt Acknowledge Auto Mask (§10.2.4.7).
pub(crate) const IAM: usize = 0x00E0;
/// Interrupt Vector Allocation (§10.2.4.9), fields in [`IVAR`](mod@IVAR).
pub(crate) const IVAR: usize = 0x00E4;
/// MSI-X vectors of the 82574 (§7.4.2: five).
pub(crate) const MSIX_VECTORS: u16 = 5;

register_bitfields![u32,
    /// The MSI-X queue causes of ICR/IMS/IMC/EIAC (§10.2.4.1, bits 24:20).
    pub(crate) ICR [
        /// RxQ0: receive queue 0 wrote back.
        RXQ0 OFFSET(20) NUMBITS(1) [],
        /// RxQ1: receive queue 1 wrote back.
        RXQ1 OFFSET(21) NUMBITS(1) [],
        /// TxQ0: transmit queue 0 wrote back.
        TXQ0 OFFSET(22) NUMBITS(1) [],
        /// TxQ1: transmit queue 1 wrote back.
        TXQ1 OFFSET(23) NUMBITS(1) [],
        /// Other: any non-queue cause.
        OTHER OFFSET(24) NUMBITS(1) [],
    ],
    /// Interrupt Vector Allocation (§10.2.4.9): a 4-bit entry per cause, vector in bits 2:0 and
    /// valid in bit 3.
    pub(crate) IVAR [
        /// Receive queue 0's entry.
        RXQ0 OFFSET(0) NUMBITS(4) [],
        /// Receive queue 1's entry.
        RXQ1 OFFSET(4) NUMBITS(4) [],
        /// Transmit queue 0's entry.
        TXQ0 OFFSET(8) NUMBITS(4) [],
        /// Transmit queue 1's entry.
        TXQ1 OFFSET(12) NUMBITS(4) [],
        /// Other causes' entry.
        OTHER OFFSET(16) NUMBITS(4) [],
    ],
];

/// The ICR cause bit of a queue: receive queue `q`, or transmit queue `q`.
pub(crate) const fn queue_cause(q: u16, tx: bool) -> u32 {
    1 << (20 + q + if tx { 2 } else { 0 })
}

/// An IVAR entry (vector, valid) for `vector`, shifted into the queue's place.
pub(crate) const fn ivar_entry(q: u16, tx: bool, vector: u16) -> u32 {
    ((vector as u32 & 0x7) | IVAR_VALID) << ivar_shift(q, tx)
}

/// Bit position of a queue's entry in IVAR.
pub(crate) const fn ivar_shift(q: u16, tx: bool) -> u32 {
    4 * (q as u32 + if tx { 2 } else { 0 })
}

/// IVAR entry: valid.
pub(crate) const IVAR_VALID: u32 = 0x8;

// --- Receive registers (§10.2.5) ---------------------------------------------------------------

/// Receive Control (§10.2.5.1), shared by both receive queues.
pub(crate) const RCTL: usize = 0x0100;
/// Receive Checksum Control (§10.2.5.15).
pub(crate) const RXCSUM: usize = 0x5000;
/// Receive Filter Control (§10.2.5.16).
pub(crate) const RFCTL: usize = 0x5008;
/// Receive Address Low 0 (§10.2.5.18): MAC bytes 0..=3, byte 0 in bits 7:0.
pub(crate) const RAL0: usize = 0x5400;
/// Receive Address High 0 (§10.2.5.19), fields in [`RAH`](mod@RAH).
pub(crate) const RAH0: usize = 0x5404;
/// Multiple Receive Queues Command (§10.2.5.21).
pub(crate) const MRQC: usize = 0x5818;
/// Redirection Table register `i` (0..32) (§10.2.5.22): entries 4i..4i+3, entry 4i in bits
/// 7:0; an entry's bit 7 is the receive queue.
pub(crate) const fn reta(i: usize) -> usize {
    0x5C00 + 4 * i
}
/// RSS Random Key register `i` (0..10) (§10.2.5.23): key byte 4i in bits 7:0.
pub(crate) const fn rssrk(i: usize) -> usize {
    0x5C80 + 4 * i
}
/// RETA entries.
pub(crate) const RETA_ENTRIES: usize = 128;
/// RSS key bytes.
pub(crate) const RSS_KEY_LEN: usize = 40;
/// The queue bit of a RETA entry (§10.2.5.22; **QEMU** `E1000_RSS_QUEUE`).
pub(crate) const RETA_QUEUE_BIT: u8 = 1 << 7;

register_bitfields![u32,
    /// Receive Control (§10.2.5.1).
    pub(crate) RCTL [
        /// EN: receiver enable (both queues).
        EN OFFSET(1) NUMBITS(1) [],
        /// UPE: unicast promiscuous.
        UPE OFFSET(3) NUMBITS(1) [],
        /// MPE: multicast promiscuous.
        MPE OFFSET(4) NUMBITS(1) [],
        /// LPE: long packets accepted.
        LPE OFFSET(5) NUMBITS(1) [],
        /// BAM: accept broadcast.
        BAM OFFSET(15) NUMBITS(1) [],
        /// BSIZE: buffer size (with BSEX: 01b = 16384).
        BSIZE OFFSET(16) NUMBITS(2) [
            /// With BSEX: 16384 bytes.
            Bytes16384 = 0b01,
        ],
        /// BSEX: buffer size extension (×16).
        BSEX OFFSET(25) NUMBITS(1) [],
        /// SECRC: strip the Ethernet CRC. **QEMU** otherwise writes 4 zero bytes and counts
        /// them.
        SECRC OFFSET(26) NUMBITS(1) [],
        /// FLXBUF: buffer size in KiB (1..=15); 0 uses BSIZE/BSEX.
        FLXBUF OFFSET(27) NUMBITS(4) [],
    ],
    /// Receive Checksum Control (§10.2.5.15).
    pub(crate) RXCSUM [
        /// IPOFLD: check IPv4 header checksums, reported by IPCS/IPE in the write-back.
        IPOFLD OFFSET(8) NUMBITS(1) [],
        /// TUOFLD: check TCP/UDP checksums, reported by TCPCS (UDPCS)/TCPE.
        TUOFLD OFFSET(9) NUMBITS(1) [],
        /// PCSD: the write-back carries the RSS hash instead of the IP id/checksum.
        /// **QEMU** computes RSS only with PCSD set.
        PCSD OFFSET(13) NUMBITS(1) [],
    ],
    /// Receive Filter Control (§10.2.5.16).
    pub(crate) RFCTL [
        /// EXSTEN: extended status, i.e. extended receive descriptors (§7.1.4.2). **QEMU**
        /// computes RSS only with it.
        EXSTEN OFFSET(15) NUMBITS(1) [],
    ],
    /// Receive Address High (§10.2.5.19).
    pub(crate) RAH [
        /// RAH: MAC bytes 4 (bits 7:0) and 5 (bits 15:8).
        ADDR OFFSET(0) NUMBITS(16) [],
        /// AV: the address is valid.
        AV OFFSET(31) NUMBITS(1) [],
    ],
    /// Multiple Receive Queues Command (§10.2.5.21).
    pub(crate) MRQC [
        /// Multiple receive queues enable: 01b = RSS on two queues.
        ENABLE OFFSET(0) NUMBITS(2) [
            /// 01b: RSS.
            Rss = 0b01,
        ],
        /// Hash TCP/IPv4.
        TCP_IPV4 OFFSET(16) NUMBITS(1) [],
        /// Hash IPv4.
        IPV4 OFFSET(17) NUMBITS(1) [],
    ],
];

/// Receive queue `n`'s register block (§10.2.5.x): 0x2800 + 0x100·n.
const fn rxq(n: u16) -> usize {
    0x2800 + 0x100 * n as usize
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
/// RX Descriptor Head.
pub(crate) const fn rdh(n: u16) -> usize {
    rxq(n) + 0x10
}
/// RX Descriptor Tail.
pub(crate) const fn rdt(n: u16) -> usize {
    rxq(n) + 0x18
}

// --- Transmit registers (§10.2.6) --------------------------------------------------------------

/// Transmit Control (§10.2.6.1).
pub(crate) const TCTL: usize = 0x0400;

register_bitfields![u32,
    /// Transmit Control (§10.2.6.1).
    pub(crate) TCTL [
        /// EN: transmitter enable.
        EN OFFSET(1) NUMBITS(1) [],
        /// PSP: pad short packets to 64 bytes.
        PSP OFFSET(3) NUMBITS(1) [],
        /// CT: collision threshold.
        CT OFFSET(4) NUMBITS(8) [
            /// The datasheet's recommended 0xF.
            Default = 0xF,
        ],
        /// COLD: collision distance.
        COLD OFFSET(12) NUMBITS(10) [
            /// 0x3F for full duplex.
            FullDuplex = 0x3F,
        ],
    ],
    /// Transmit Arbitration Count (§10.2.6.10).
    pub(crate) TARC [
        /// ENABLE: the queue may transmit. **QEMU** sends from a queue only while it is set
        /// (it is set at reset); the driver uses it to stop and start a transmit queue, the
        /// 82574 having no per-queue enable in TXDCTL.
        ENABLE OFFSET(10) NUMBITS(1) [],
    ],
];

/// Transmit queue `n`'s register block (§10.2.6.x): 0x3800 + 0x100·n.
const fn txq(n: u16) -> usize {
    0x3800 + 0x100 * n as usize
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
/// Transmit Arbitration Count of queue `n`, fields in [`TARC`](mod@TARC).
pub(crate) const fn tarc(n: u16) -> usize {
    txq(n) + 0x40
}

// --- Statistics (§10.2.7; clear on read on the silicon) ----------------------------------------

/// Missed Packets Count. **QEMU** neither clears it on read nor increments it.
pub(crate) const MPC: usize = 0x4010;
/// Good Packets Received Count. **QEMU** sets it to a copy of TPR on every frame, so the
/// driver reads TPR (clearing it) right after it.
pub(crate) const GPRC: usize = 0x4074;
/// Good Packets Transmitted Count.
pub(crate) const GPTC: usize = 0x4080;
/// Good Octets Received Count, low half. **QEMU**: a copy of TORL/TORH, like GPRC of TPR.
pub(crate) const GORCL: usize = 0x4088;
/// Good Octets Received Count, high half (reading it clears both).
pub(crate) const GORCH: usize = 0x408C;
/// Good Octets Transmitted Count, low half.
pub(crate) const GOTCL: usize = 0x4090;
/// Good Octets Transmitted Count, high half.
pub(crate) const GOTCH: usize = 0x4094;
/// Total Octets Received, low half.
pub(crate) const TORL: usize = 0x40C0;
/// Total Octets Received, high half (reading it clears both).
pub(crate) const TORH: usize = 0x40C4;
/// Total Packets Received.
pub(crate) const TPR: usize = 0x40D0;

/// Queues of each direction (§1.x: two receive and two transmit queues; **QEMU**
/// `E1000E_NUM_QUEUES`).
pub(crate) const QUEUES: u16 = 2;
/// Size of BAR0 (128 KiB).
pub(crate) const BAR0_LEN: usize = 128 * 1024;

// Layout facts from the datasheet's register summary (§10.1), checked at compile time.
const _: () = assert!(rdbal(0) == 0x2800 && rdt(0) == 0x2818 && rdh(1) == 0x2910);
const _: () = assert!(tdbal(0) == 0x3800 && tdt(1) == 0x3918 && tarc(0) == 0x3840);
const _: () = assert!(tarc(1) == 0x3940 && tdlen(1) == 0x3908 && rdlen(1) == 0x2908);
const _: () = assert!(reta(31) == 0x5C7C && rssrk(9) == 0x5CA4);
const _: () = assert!(RETA_ENTRIES == 4 * 32 && RSS_KEY_LEN == 4 * 10);
const _: () = assert!(tarc(QUEUES - 1) + 4 <= BAR0_LEN);
const _: () = assert!(GORCH == GORCL + 4 && GOTCH == GOTCL + 4 && TORH == TORL + 4);
const _: () = assert!(queue_cause(0, false) == ICR::RXQ0::SET.value);
const _: () = assert!(queue_cause(1, true) == ICR::TXQ1::SET.value);
const _: () = assert!(ivar_shift(1, false) == IVAR::RXQ1.shift as u32);
const _: () = assert!(ivar_shift(0, true) == IVAR::TXQ0.shift as u32);
const _: () = assert!(ivar_entry(1, true, 4) == 0xC << 12);
const _: () = assert!(MDIC::OP::Read.value == 0b10 << 26 && MDIC::READY::SET.value == 1 << 28);
const _: () = assert!(RFCTL::EXSTEN::SET.value == 0x8000 && TARC::ENABLE::SET.value == 0x400);
