//! Register offsets and bit fields of the 82576, as the driver uses them.
//!
//! Offsets are plain `const`s (and `const fn`s for per-queue and per-vector registers): the
//! driver reaches every register through [`Mmio`](ringfab_hal::Mmio) by offset, so there is no
//! MMIO struct to lay out. Every offset is checked at compile time against the datasheet's table
//! (the `const _: () = assert!(…)` lines), so a typo in a per-queue formula cannot ship.
//!
//! Bit fields are `tock_registers::register_bitfields!` definitions, one module per register
//! layout, named like the register (`CTRL::RST`, `MDIC::OP::Read`, `SRRCTL::BSIZEPACKET`; the
//! offset `const CTRL` and the field module `CTRL` share the name — values and modules live in
//! different namespaces, so `r::CTRL` is the offset and `r::CTRL::RST` a field of it). Values
//! are built as `FieldValue`s joined with `+` and written with `.value`
//! (`(RCTL::EN::SET + RCTL::LPE::SET).value`), or merged into a read value with
//! `FieldValue::modify`; read values are asked by field, through `Field::is_set`/`read` or, when
//! several fields of one value are read, a [`LocalRegisterCopy`] ([`reg`]`::<MDIC::Register>(v)`).
//! Each field's offset and width are written once, next to the datasheet section that defines
//! them; a field of one register cannot be combined with, or read out of, another register's
//! value (the register type parameter differs); and enumerated values (`MDIC::OP::Read`,
//! `SRRCTL::DESCTYPE::AdvOneBuf`) replace `0b10 << 26`-style shifts. RXDCTL and TXDCTL share
//! one layout, [`XDCTL`], for the fields the driver uses.
//!
//! Where tock-registers reads worse: its `+` is not a `const fn`, so values needed in `const`
//! items (the queue thresholds, the compile-time layout checks) are spelled as `.value | .value`;
//! and an IVAR entry is a byte inside a 32-bit register at a queue-dependent place, which a
//! field definition cannot express — [`IVAR_ENTRY`] is a `u8` layout that [`ivar_shift`] places.
//!
//! Sources: *Intel 82576EB Gigabit Ethernet Controller Datasheet* (chapter 8, "Programming
//! Interface", for registers; chapter 7 for descriptors and interrupts). Section numbers are
//! those of the datasheet's table of contents; where QEMU's `hw/net/igb_core.c` model behaves
//! differently from the datasheet the field's comment says so (marked **QEMU**).

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
/// 82576 copper parts, `(vendor, device)` (datasheet §6.2.1 / EEPROM word 0x0D). QEMU's `igb`
/// presents 0x10C9; the others are the quad-port and "NS" copper parts, programmed identically.
pub(crate) const PCI_IDS: [(u16, u16); 4] = [
    (VENDOR_INTEL, 0x10C9),
    (VENDOR_INTEL, 0x10E8),
    (VENDOR_INTEL, 0x1526),
    (VENDOR_INTEL, 0x150A),
];

// --- General registers (§8.2) ------------------------------------------------------------------

/// Device Control (§8.2.1).
pub(crate) const CTRL: usize = 0x0000;
/// Device Status (§8.2.2).
pub(crate) const STATUS: usize = 0x0008;
/// MDI Control: PHY register access (§8.2.4).
pub(crate) const MDIC: usize = 0x0020;
/// The internal PHY's MDIO address (**QEMU** answers only address 1, as the silicon's PHY does).
pub(crate) const PHY_ADDR: u32 = 1;

register_bitfields![u32,
    /// Device Control (§8.2.1).
    pub(crate) CTRL [
        /// SLU: set link up (forces the MAC/PHY link; **QEMU** ignores it, link follows autoneg).
        SLU OFFSET(6) NUMBITS(1) [],
        /// RST (DEV_RST): software reset, self-clearing.
        RST OFFSET(26) NUMBITS(1) [],
    ],
    /// Device Status (§8.2.2).
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
    /// MDI Control (§8.2.4).
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

/// PHY Control register (IEEE 802.3 clause 22 register 0; datasheet §8.24 PHY registers).
pub(crate) const PHY_BMCR: u8 = 0;

register_bitfields![u16,
    /// PHY Control (IEEE 802.3 clause 22 register 0; datasheet §8.24).
    pub(crate) BMCR [
        /// Speed selection MSB (1000 Mb/s together with bit 13 clear).
        SPEED1000 OFFSET(6) NUMBITS(1) [],
        /// Full duplex (the forced value; autoneg overrides it).
        FD OFFSET(8) NUMBITS(1) [],
        /// Restart auto-negotiation (self-clearing).
        ANRESTART OFFSET(9) NUMBITS(1) [],
        /// Auto-negotiation enable.
        AUTOEN OFFSET(12) NUMBITS(1) [],
        /// PHY reset (self-clearing).
        RESET OFFSET(15) NUMBITS(1) [],
    ],
];

// --- Interrupt registers (§8.8; MSI-X operation §7.3) ------------------------------------------

/// Interrupt Cause Read (legacy causes; read to clear) (§8.8.1).
pub(crate) const ICR: usize = 0x00C0;
/// Interrupt Mask Clear (§8.8.10).
pub(crate) const IMC: usize = 0x00D8;
/// General Purpose Interrupt Enable (§8.8.15).
pub(crate) const GPIE: usize = 0x1514;
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
/// one-byte [`IVAR_ENTRY`]s: bits 7:0 RX queue i, 15:8 TX queue i, 23:16 RX queue i+8, 31:24 TX
/// queue i+8.
pub(crate) const fn ivar(i: u16) -> usize {
    0x1700 + 4 * i as usize
}
/// MSI-X vectors EICR can name in MSI-X mode (bits 24:0).
pub(crate) const EICR_VECTORS: u16 = 25;

/// Bit position of queue `q`'s entry in IVAR register [`ivar`]`(q & 7)`.
pub(crate) const fn ivar_shift(q: u16, tx: bool) -> u32 {
    (if q >= 8 { 16 } else { 0 }) + if tx { 8 } else { 0 }
}

register_bitfields![u32,
    /// General Purpose Interrupt Enable (§8.8.15).
    pub(crate) GPIE [
        /// NSICR: clear ICR on read without INT_ASSERTED.
        NSICR OFFSET(0) NUMBITS(1) [],
        /// Multiple_MSIX: EICR bits are MSI-X vectors (vector n = bit n).
        MSIX_MODE OFFSET(4) NUMBITS(1) [],
        /// PBA_support: MSI-X pending bits reflect EICR.
        PBA OFFSET(31) NUMBITS(1) [],
    ],
];

register_bitfields![u8,
    /// One byte-wide entry of an IVAR register (§7.3.2.1), placed by [`ivar_shift`].
    pub(crate) IVAR_ENTRY [
        /// The MSI-X vector the queue's cause raises.
        VECTOR OFFSET(0) NUMBITS(5) [],
        /// The entry is valid.
        VALID OFFSET(7) NUMBITS(1) [],
    ],
];

// --- Receive registers (§8.9) ------------------------------------------------------------------

/// Receive Control (§8.9.1).
pub(crate) const RCTL: usize = 0x0100;
/// Receive Checksum Control (§8.9.12).
pub(crate) const RXCSUM: usize = 0x5000;
/// Receive Long Packet Maximum Length (§8.9.13), frame length including FCS.
pub(crate) const RLPML: usize = 0x5004;
/// Receive Address Low 0 (§8.9.18): MAC bytes 0..=3, byte 0 in bits 7:0.
pub(crate) const RAL0: usize = 0x5400;
/// Receive Address High 0 (§8.9.19), fields in [`RAH`].
pub(crate) const RAH0: usize = 0x5404;
/// Receive Address Low of entry `i` (0..[`RA_ENTRIES`]): entries 0..=15 at 0x5400 + 8i
/// (§8.9.18), entries 16..=23 in the second array ("RA2") at 0x54E0 + 8(i − 16). **QEMU**
/// (`E1000_RA2`) filters on all 24.
pub(crate) const fn ral(i: usize) -> usize {
    if i < 16 {
        RAL0 + 8 * i
    } else {
        0x54E0 + 8 * (i - 16)
    }
}
/// Receive Address High of entry `i`, fields in [`RAH`].
pub(crate) const fn rah(i: usize) -> usize {
    ral(i) + 4
}
/// Receive address entries (16 + 8).
pub(crate) const RA_ENTRIES: usize = 24;
/// Multiple Receive Queues Command (§8.9.23).
pub(crate) const MRQC: usize = 0x5818;
/// Multicast Table Array register `i` (0..128): one bit per 12-bit hash of a group address
/// (§8.9.17; hash bits chosen by RCTL.MO, which this driver leaves 0).
pub(crate) const fn mta(i: usize) -> usize {
    0x5200 + 4 * i
}
/// MTA registers.
pub(crate) const MTA_REGS: usize = 128;
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

register_bitfields![u32,
    /// Receive Control (§8.9.1).
    pub(crate) RCTL [
        /// EN: receiver enable.
        EN OFFSET(1) NUMBITS(1) [],
        /// UPE: unicast promiscuous.
        UPE OFFSET(3) NUMBITS(1) [],
        /// MPE: multicast promiscuous.
        MPE OFFSET(4) NUMBITS(1) [],
        /// LPE: long packets (up to RLPML) accepted.
        LPE OFFSET(5) NUMBITS(1) [],
        /// BAM: accept broadcast.
        BAM OFFSET(15) NUMBITS(1) [],
        /// SECRC: strip the Ethernet CRC. **QEMU** otherwise appends 4 zero bytes and counts
        /// them.
        SECRC OFFSET(26) NUMBITS(1) [],
    ],
    /// Receive Checksum Control (§8.9.12).
    pub(crate) RXCSUM [
        /// IPOFLD: check IPv4 header checksums, reported by IPCS/IPE in the write-back.
        IPOFLD OFFSET(8) NUMBITS(1) [],
        /// TUOFLD: check TCP/UDP checksums, reported by L4I (UDPCS)/L4E.
        TUOFLD OFFSET(9) NUMBITS(1) [],
        /// PCSD: write-back dword 1 carries the RSS hash instead of the IP id/checksum.
        /// **QEMU** computes RSS at all only with PCSD set.
        PCSD OFFSET(13) NUMBITS(1) [],
    ],
    /// Receive Address High (§8.9.19).
    pub(crate) RAH [
        /// RAH: MAC bytes 4 (bits 7:0) and 5 (bits 15:8).
        ADDR OFFSET(0) NUMBITS(16) [],
        /// POOLSEL: in VMDq mode, the pools (bit n = pool n = receive queue n) a frame to
        /// this address goes to; ignored outside VMDq mode (§7.10.3; **QEMU**
        /// `E1000_RAH_POOL_MASK`, bits 25:18).
        POOLSEL OFFSET(18) NUMBITS(8) [],
        /// AV: the address is valid (filters).
        AV OFFSET(31) NUMBITS(1) [],
    ],
    /// Multiple Receive Queues Command (§8.9.23).
    pub(crate) MRQC [
        /// MRQE: multiple receive queues mode.
        MRQE OFFSET(0) NUMBITS(3) [
            /// 010b: RSS only.
            Rss = 0b010,
            /// 011b: VMDq, pools chosen by destination address (and VLAN). **QEMU** enters
            /// VMDq mode on bit 0 alone and then never runs RSS (it needs bits 1:0 = 10b).
            Vmdq = 0b011,
        ],
        /// Field enable: TCP/IPv4.
        TCP_IPV4 OFFSET(16) NUMBITS(1) [],
        /// Field enable: IPv4.
        IPV4 OFFSET(17) NUMBITS(1) [],
        /// Field enable: UDP/IPv4.
        UDP_IPV4 OFFSET(22) NUMBITS(1) [],
    ],
];

// --- VMDq (§7.10 virtualization; registers in the datasheet's virtualization section, offsets
// as **QEMU**'s igb_regs.h has them) -------------------------------------------------------------

/// VMDq Control: default pool and its disable (`E1000_VT_CTL`).
pub(crate) const VT_CTL: usize = 0x581C;
/// VF Receive Enables: bit n lets pool n receive (`E1000_VFRE`; reset 0xFF).
pub(crate) const VFRE: usize = 0x0C8C;
/// VM Offload register of pool `n` (0..[`VM_POOLS`]) (`E1000_VMOLR(n)`), fields in [`VMOLR`].
pub(crate) const fn vmolr(n: usize) -> usize {
    0x5AD0 + 4 * n
}
/// VMDq pools: pool n receives on queue n (**QEMU** `IGB_NUM_VM_POOLS`; queues 8..15 would
/// take a pool's RSS half, which QEMU never reaches).
pub(crate) const VM_POOLS: u16 = 8;

register_bitfields![u32,
    /// VMDq Control (§7.10.3).
    pub(crate) VT_CTL [
        /// DEF_PL: the pool unicast frames matching no address go to.
        DEF_PL OFFSET(7) NUMBITS(3) [],
        /// Dis_Def_Pool: unicast frames matching no address are dropped instead.
        DIS_DEF_PL OFFSET(29) NUMBITS(1) [],
    ],
    /// VM Offload register, one per pool (§7.10.3). **QEMU** reset value: RLPML 0x2600 and
    /// STRCRC, everything else clear.
    pub(crate) VMOLR [
        /// RLPML: longest frame (FCS included) the pool takes with LPE.
        RLPML OFFSET(0) NUMBITS(14) [],
        /// LPE: the pool takes frames up to RLPML; without it, up to 1518 (1522 tagged).
        /// **QEMU** checks this per pool after RCTL.LPE/RLPML.
        LPE OFFSET(16) NUMBITS(1) [],
        /// AUPE: the pool takes untagged frames (consulted when VLAN filtering is on).
        AUPE OFFSET(24) NUMBITS(1) [],
        /// ROMPE: the pool takes group frames that hit the MTA but no address entry.
        /// **QEMU** applies it to unicast hitting the UTA as well.
        ROMPE OFFSET(25) NUMBITS(1) [],
        /// BAM: the pool takes broadcast frames. **QEMU**'s only broadcast accept in VMDq mode
        /// (RCTL.BAM is not consulted there).
        BAM OFFSET(27) NUMBITS(1) [],
        /// MPME: multicast promiscuous for the pool (silicon; **QEMU** ignores it).
        MPME OFFSET(28) NUMBITS(1) [],
        /// STRCRC: strip the CRC of frames to the pool.
        STRCRC OFFSET(31) NUMBITS(1) [],
    ],
];

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

register_bitfields![u32,
    /// Split and Replication Receive Control (§8.9.7).
    pub(crate) SRRCTL [
        /// BSIZEPACKET: packet buffer size in [`SRRCTL_BSIZEPKT_UNIT`]s (1..=127).
        BSIZEPACKET OFFSET(0) NUMBITS(7) [],
        /// DESCTYPE: receive descriptor format.
        DESCTYPE OFFSET(25) NUMBITS(3) [
            /// 001b: advanced descriptors, one buffer.
            AdvOneBuf = 0b001,
        ],
        /// Drop_En: drop frames for this queue when it has no descriptors, rather than stalling
        /// the shared packet buffer (**QEMU** drops either way).
        DROP_EN OFFSET(31) NUMBITS(1) [],
    ],
    /// Receive and Transmit Descriptor Control, RXDCTL (§8.9.10) and TXDCTL (§8.12.15): the
    /// fields this driver uses sit at the same places in both.
    pub(crate) XDCTL [
        /// PTHRESH: prefetch threshold.
        PTHRESH OFFSET(0) NUMBITS(5) [],
        /// HTHRESH: host threshold.
        HTHRESH OFFSET(8) NUMBITS(5) [],
        /// WTHRESH: write-back threshold.
        WTHRESH OFFSET(16) NUMBITS(5) [],
        /// ENABLE: the queue runs; reads back once the hardware has (dis)armed it.
        ENABLE OFFSET(25) NUMBITS(1) [],
    ],
];

/// One SRRCTL.BSIZEPACKET unit in bytes.
pub(crate) const SRRCTL_BSIZEPKT_UNIT: u32 = 1024;
/// TXDCTL thresholds: PTHRESH 8, HTHRESH 1, WTHRESH 1 — write back each RS descriptor promptly
/// (the values Linux's igb uses on the 82576 with MSI-X).
pub(crate) const TXDCTL_THRESH: u32 =
    XDCTL::PTHRESH.val(8).value | XDCTL::HTHRESH.val(1).value | XDCTL::WTHRESH.val(1).value;
/// RXDCTL thresholds: PTHRESH 8, HTHRESH 8, WTHRESH 1.
pub(crate) const RXDCTL_THRESH: u32 =
    XDCTL::PTHRESH.val(8).value | XDCTL::HTHRESH.val(8).value | XDCTL::WTHRESH.val(1).value;

// --- Transmit registers (§8.12) ----------------------------------------------------------------

/// Transmit Control (§8.12.1).
pub(crate) const TCTL: usize = 0x0400;

register_bitfields![u32,
    /// Transmit Control (§8.12.1).
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
];

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
/// Transmit Descriptor Control (§8.12.15), fields in [`XDCTL`].
pub(crate) const fn txdctl(n: u16) -> usize {
    txq(n) + 0x28
}

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
const _: () = assert!(ral(0) == RAL0 && rah(0) == RAH0 && rah(15) == 0x547C);
const _: () = assert!(ral(16) == 0x54E0 && rah(RA_ENTRIES - 1) == 0x551C);
const _: () = assert!(mta(MTA_REGS - 1) == 0x53FC && vmolr(7) == 0x5AEC);
const _: () = assert!(RAH::POOLSEL.mask << RAH::POOLSEL.shift == 0x03FC_0000);
const _: () = assert!(VT_CTL::DIS_DEF_PL::SET.value == 1 << 29 && VMOLR::BAM::SET.value == 1 << 27);
const _: () =
    assert!(VMOLR::RLPML.mask == 0x3FFF && VM_POOLS as u32 == RAH::POOLSEL.mask.count_ones());
const _: () = assert!(RETA_ENTRIES == 4 * 32 && RSS_KEY_LEN == 4 * 10);
const _: () = assert!(txdctl(QUEUES - 1) + 4 <= BAR0_LEN && rxdctl(QUEUES - 1) + 4 <= BAR0_LEN);
const _: () = assert!(ivar_shift(0, false) == 0 && ivar_shift(0, true) == 8);
const _: () = assert!(ivar_shift(8, false) == 16 && ivar_shift(9, true) == 24);
const _: () = assert!(GORCH == GORCL + 4 && GOTCH == GOTCL + 4);
// Field layouts the datasheet gives as whole-register values, checked against the definitions.
const _: () = assert!(TXDCTL_THRESH == 0x0001_0108 && RXDCTL_THRESH == 0x0001_0808);
const _: () = assert!(XDCTL::ENABLE::SET.value == 1 << 25 && CTRL::RST::SET.value == 1 << 26);
const _: () = assert!(MDIC::OP::Read.value == 0b10 << 26 && MDIC::READY::SET.value == 1 << 28);
const _: () = assert!(SRRCTL::DESCTYPE::AdvOneBuf.value == 1 << 25);
