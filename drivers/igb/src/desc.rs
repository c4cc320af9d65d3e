//! 82576 descriptor formats as Packet/Repr codecs.
//!
//! Every descriptor is 16 bytes, little-endian, and the ring module moves it as two `u64` words
//! (bytes 0–7 and 8–15) through [`DmaRegion`](ringfab_hal::DmaRegion)'s volatile accessors.
//! [`Descriptor`] is a checked view over 16 bytes (for tests and debugging dumps); the `Repr`
//! types are the small parsed structs the driver builds and decodes, with `emit` producing the
//! two words and `parse` taking them. Once [`Descriptor::new_checked`] succeeded no accessor
//! panics; `parse` never panics on any input — a device may write anything.
//!
//! The bit fields of each word are `tock_registers::register_bitfields!` definitions
//! ([`TXD`], [`LEGACY_TXD`], [`RXWB0`], [`RXWB1`], and [`RXSTAT`] for the receive status
//! dword), so each field's place and width is written once, next to its datasheet section, and
//! `emit`/`parse` read as lists of fields (`TXD::RS.val(…) + TXD::PAYLEN.val(…)`,
//! `LocalRegisterCopy::read(RXWB1::PKT_LEN)`). This costs the data path nothing: the field
//! operations are `#[inline]` shifts and masks of constants, and `instructions.sh` counts the
//! same instructions per frame as with hand-written masks. The exception is a test of several
//! fields at once — [`tx::WB_UNEXPECTED`], [`rx::ERRORS`] | [`rx::UNDEFINED`] — which stays a
//! `const` mask built from the fields' bits, because tock-registers' `+` is not a `const fn`.
//!
//! Layouts (82576 datasheet):
//! * advanced transmit data descriptor, read format — §7.2.2.3 (DTYP = 0011b, DEXT = 1);
//! * legacy transmit descriptor — §7.2.2.1 (DEXT = 0);
//! * transmit write-back — only the STA nibble (bits 35:32 of the second word, DD = bit 32) is
//!   defined; **QEMU** writes the whole descriptor back as read, with DD ORed in;
//! * advanced receive descriptor, read format — §7.1.5.1 (packet address, header address);
//! * advanced receive descriptor, write-back format — §7.1.5.2.

use ringfab_hal::{RssHashKind, RssInfo, RxChecksum};
use tock_registers::LocalRegisterCopy;

/// Byte ranges inside a descriptor.
mod field {
    use core::ops::Range;
    /// Buffer address (read formats) / RSS type, packet type, RSS hash (RX write-back).
    pub(super) const WORD0: Range<usize> = 0..8;
    /// Command/length/status (TX) / header address (RX read) / status, error, length (RX wb).
    pub(super) const WORD1: Range<usize> = 8..16;
}

/// Length of one descriptor in bytes.
pub const DESC_LEN: usize = 16;

/// A descriptor is too short (fewer than 16 bytes).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Truncated;

/// A checked view over the 16 bytes of one descriptor.
#[derive(Clone, Copy, Debug)]
pub struct Descriptor<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Descriptor<T> {
    /// Wraps `buffer` without checking its length; accessors may panic if it is short.
    pub const fn new_unchecked(buffer: T) -> Self {
        Descriptor { buffer }
    }

    /// Wraps `buffer` after [`check_len`](Self::check_len).
    pub fn new_checked(buffer: T) -> Result<Self, Truncated> {
        let d = Self::new_unchecked(buffer);
        d.check_len()?;
        Ok(d)
    }

    /// Ensures the buffer holds a whole descriptor; after success no accessor panics.
    pub fn check_len(&self) -> Result<(), Truncated> {
        if self.buffer.as_ref().len() < DESC_LEN {
            Err(Truncated)
        } else {
            Ok(())
        }
    }

    fn word(&self, range: core::ops::Range<usize>) -> u64 {
        let mut b = [0u8; 8];
        b.copy_from_slice(&self.buffer.as_ref()[range]);
        u64::from_le_bytes(b)
    }

    /// Bytes 0–7 as a little-endian word.
    pub fn word0(&self) -> u64 {
        self.word(field::WORD0)
    }

    /// Bytes 8–15 as a little-endian word.
    pub fn word1(&self) -> u64 {
        self.word(field::WORD1)
    }

    /// Both words, as the ring stores them.
    pub fn words(&self) -> [u64; 2] {
        [self.word0(), self.word1()]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Descriptor<T> {
    /// Writes both words little-endian.
    pub fn set_words(&mut self, words: [u64; 2]) {
        let b = self.buffer.as_mut();
        b[field::WORD0].copy_from_slice(&words[0].to_le_bytes());
        b[field::WORD1].copy_from_slice(&words[1].to_le_bytes());
    }
}

/// The 16 bytes of a descriptor given as its two words.
pub fn to_bytes(words: [u64; 2]) -> [u8; DESC_LEN] {
    let mut out = [0u8; DESC_LEN];
    Descriptor::new_unchecked(&mut out[..]).set_words(words);
    out
}

/// The descriptor bit fields, defined in a private module and re-exported so that one
/// `allow` covers what the macro generates.
#[allow(
    missing_docs,
    reason = "register_bitfields! emits each register's `Register` marker, each field's `Field` \
              constant and its SET/CLEAR values without docs; the field's doc is on its module"
)]
mod layout {
    use tock_registers::register_bitfields;

    register_bitfields![u64,
        /// Second word of an advanced transmit data descriptor (§7.2.2.3): `cmd_type_len` in bits
        /// 31:0 (the command byte DCMD is bits 31:24), `olinfo_status` in bits 63:32. The device's
        /// write-back sets STA.DD in place.
        pub TXD [
            /// DTALEN: bytes in this descriptor's buffer.
            DTALEN OFFSET(0) NUMBITS(16) [],
            /// DTYP: descriptor type.
            DTYP OFFSET(20) NUMBITS(4) [
                /// 0011b: advanced data descriptor.
                Data = 0b0011,
            ],
            /// DCMD.EOP: last descriptor of the frame.
            EOP OFFSET(24) NUMBITS(1) [],
            /// DCMD.IFCS: the MAC appends the FCS.
            IFCS OFFSET(25) NUMBITS(1) [],
            /// DCMD.RS: report status (write back DD).
            RS OFFSET(27) NUMBITS(1) [],
            /// DCMD.DEXT: advanced (extended) descriptor.
            DEXT OFFSET(29) NUMBITS(1) [],
            /// STA.DD: descriptor done (byte 12 bit 0).
            DD OFFSET(32) NUMBITS(1) [],
            /// STA bits 3:1: reserved.
            STA_RSV OFFSET(33) NUMBITS(3) [],
            /// IDX: offload context index (the driver uses context 0 only).
            IDX OFFSET(36) NUMBITS(3) [],
            /// CC: check context (zero, as Linux's igb writes it for the 82576).
            CC OFFSET(39) NUMBITS(1) [],
            /// POPTS: offload options (zero, or [`TXSM`](mod@TXD::TXSM) alone).
            POPTS OFFSET(40) NUMBITS(6) [],
            /// POPTS.TXSM: insert the TCP/UDP checksum the context describes (§7.2.2.3.x,
            /// "POPTS"; the device reads it from the frame's first data descriptor, the driver
            /// writes it in every one).
            TXSM OFFSET(41) NUMBITS(1) [],
            /// PAYLEN: length of the whole frame (olinfo_status bits 31:14).
            PAYLEN OFFSET(46) NUMBITS(18) [],
        ],
        /// First word of an advanced transmit context descriptor (§7.2.2.2): `vlan_macip_lens`
        /// in bits 31:0, the IPsec/sequence dword (zero) in 63:32.
        pub TXCTX0 [
            /// IPLEN: IP header length; the L4 header starts at MACLEN + IPLEN.
            IPLEN OFFSET(0) NUMBITS(9) [],
            /// MACLEN: bytes before the IP header.
            MACLEN OFFSET(9) NUMBITS(7) [],
            /// VLAN tag to insert (zero).
            VLAN OFFSET(16) NUMBITS(16) [],
        ],
        /// Second word of an advanced transmit context descriptor (§7.2.2.2):
        /// `type_tucmd_mlhl` in bits 31:0, `mss_l4len_idx` in 63:32.
        pub TXCTX1 [
            /// TUCMD.IPV4: the packet is IPv4 (needed for IXSM and TSO only; zero).
            IPV4 OFFSET(10) NUMBITS(1) [],
            /// TUCMD.L4T: the L4 header's type, which says where its checksum field is.
            L4T OFFSET(11) NUMBITS(2) [
                /// UDP: the field at offset 6.
                Udp = 0,
                /// TCP: the field at offset 16.
                Tcp = 1,
            ],
            /// DTYP: descriptor type.
            DTYP OFFSET(20) NUMBITS(4) [
                /// 0010b: context descriptor.
                Context = 0b0010,
            ],
            /// DCMD.DEXT: advanced descriptor (set).
            DEXT OFFSET(29) NUMBITS(1) [],
            /// IDX: the context slot this descriptor loads (0).
            IDX OFFSET(36) NUMBITS(3) [],
            /// L4LEN: L4 header length (TSO only; zero).
            L4LEN OFFSET(40) NUMBITS(8) [],
            /// MSS (TSO only; zero).
            MSS OFFSET(48) NUMBITS(16) [],
        ],
        /// Second word of a legacy transmit descriptor (§7.2.2.1).
        pub LEGACY_TXD [
            /// LENGTH: bytes in this descriptor's buffer.
            LENGTH OFFSET(0) NUMBITS(16) [],
            /// CSO: checksum offset.
            CSO OFFSET(16) NUMBITS(8) [],
            /// CMD.EOP: last descriptor of the frame.
            EOP OFFSET(24) NUMBITS(1) [],
            /// CMD.IFCS: insert FCS.
            IFCS OFFSET(25) NUMBITS(1) [],
            /// CMD.RS: report status.
            RS OFFSET(27) NUMBITS(1) [],
            /// CMD.DEXT: clear in a legacy descriptor.
            DEXT OFFSET(29) NUMBITS(1) [],
            /// STA: status nibble (DD in bit 0).
            STA OFFSET(32) NUMBITS(4) [],
            /// CSS: checksum start.
            CSS OFFSET(40) NUMBITS(8) [],
            /// Special (VLAN tag).
            SPECIAL OFFSET(48) NUMBITS(16) [],
        ],
        /// First word of the advanced receive write-back (§7.1.5.2).
        pub RXWB0 [
            /// RSS type (0: no hash; see [`rx::RSS_IPV4`] and its neighbours).
            RSS_TYPE OFFSET(0) NUMBITS(4) [],
            /// Packet type.
            PKT_TYPE OFFSET(4) NUMBITS(13) [],
            /// RSS hash (with RXCSUM.PCSD set).
            RSS_HASH OFFSET(32) NUMBITS(32) [],
        ],
        /// Second word of the advanced receive write-back (§7.1.5.2).
        pub RXWB1 [
            /// Extended status (19:0) and extended errors (31:20), fields in [`RXSTAT`].
            STATUS_ERROR OFFSET(0) NUMBITS(32) [],
            /// PKT_LEN: bytes written into this descriptor's buffer.
            PKT_LEN OFFSET(32) NUMBITS(16) [],
            /// VLAN tag (when status VP is set).
            VLAN OFFSET(48) NUMBITS(16) [],
        ],
    ];

    register_bitfields![u32,
        /// Extended status and errors of the advanced receive write-back: bits 31:0 of its second
        /// word (§7.1.5.2).
        pub RXSTAT [
            /// DD: the device is done with the descriptor.
            DD OFFSET(0) NUMBITS(1) [],
            /// EOP: last descriptor of a frame.
            EOP OFFSET(1) NUMBITS(1) [],
            /// Bit 2: reserved.
            RSV2 OFFSET(2) NUMBITS(1) [],
            /// UDPCS: the UDP checksum was checked (§7.1.5.2; with RXCSUM.TUOFLD).
            UDPCS OFFSET(4) NUMBITS(1) [],
            /// L4I: the TCP/UDP checksum was checked (L4 integrity; with RXCSUM.TUOFLD).
            L4I OFFSET(5) NUMBITS(1) [],
            /// IPCS: the IPv4 header checksum was checked (with RXCSUM.IPOFLD).
            IPCS OFFSET(6) NUMBITS(1) [],
            /// Bit 8: reserved.
            RSV8 OFFSET(8) NUMBITS(1) [],
            /// Bits 14:12: not defined by any 82576 write-back. (Bit 15 is left alone: **QEMU**
            /// reports a TCP ACK there.)
            RSV12 OFFSET(12) NUMBITS(3) [],
            /// Bits 22:19: not defined by any 82576 write-back.
            RSV19 OFFSET(19) NUMBITS(4) [],
            /// Error bits 31:23: HBO (23), CE/SE/SEQ (24–26), SECERR/CXE (27–28), L4E (29), IPE
            /// (30), RXE (31). Any set but L4E and IPE makes the frame bad.
            ERRORS OFFSET(23) NUMBITS(9) [],
            /// L4E: the TCP/UDP checksum was checked and found wrong.
            L4E OFFSET(29) NUMBITS(1) [],
            /// IPE: the IPv4 header checksum was checked and found wrong.
            IPE OFFSET(30) NUMBITS(1) [],
        ],
    ];
}

pub use layout::{LEGACY_TXD, RXSTAT, RXWB0, RXWB1, TXCTX0, TXCTX1, TXD};

/// Transmit write-back bits tested as one mask.
pub mod tx {
    use super::TXD;

    /// Status-dword bits a write-back may not set for descriptors this driver writes: STA
    /// bits 3:1 (reserved), IDX, CC and POPTS (bits 45:33), which the driver writes as zero —
    /// but for POPTS.TXSM, which **QEMU** echoes from a checksummed frame's descriptor. Bits
    /// 31:0 and 63:46 are ignored: the datasheet calls them reserved in the write-back, and
    /// QEMU echoes what the driver wrote there (command/length, PAYLEN). A `const` of the
    /// fields' bits: tock-registers' `+` on field values is not a `const fn`.
    pub const WB_UNEXPECTED: u64 = (TXD::STA_RSV::SET.value
        | TXD::IDX::SET.value
        | TXD::CC::SET.value
        | TXD::POPTS::SET.value)
        & !TXD::TXSM::SET.value;
    const _: () = assert!(WB_UNEXPECTED == (0x1FFF << 33) & !(1 << 41));
}

/// An advanced transmit data descriptor, read format (§7.2.2.3).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct TxDataRepr {
    /// Buffer address.
    pub addr: u64,
    /// Bytes in this buffer.
    pub len: u16,
    /// Last descriptor of the frame.
    pub eop: bool,
    /// Ask for a DD write-back.
    pub rs: bool,
    /// Length of the whole frame (PAYLEN; without offloads, all of it).
    pub paylen: u32,
}

impl TxDataRepr {
    /// The descriptor as two words: FCS insertion always on, no offloads, status zero. A
    /// `paylen` wider than PAYLEN's 18 bits is truncated to them.
    #[inline]
    pub fn emit(&self) -> [u64; 2] {
        let w1 = TXD::DTALEN.val(self.len.into())
            + TXD::DTYP::Data
            + TXD::DEXT::SET
            + TXD::IFCS::SET
            + TXD::EOP.val(self.eop.into())
            + TXD::RS.val(self.rs.into())
            + TXD::PAYLEN.val(self.paylen.into());
        [self.addr, w1.value]
    }

    /// Parses a descriptor in advanced data read format, or `None` if it is not one.
    pub fn parse(words: [u64; 2]) -> Option<Self> {
        let w1 = LocalRegisterCopy::<u64, TXD::Register>::new(words[1]);
        if !w1.is_set(TXD::DEXT) || !w1.matches_all(TXD::DTYP::Data) {
            return None;
        }
        Some(TxDataRepr {
            addr: words[0],
            len: w1.read(TXD::DTALEN) as u16,
            eop: w1.is_set(TXD::EOP),
            rs: w1.is_set(TXD::RS),
            paylen: w1.read(TXD::PAYLEN) as u32,
        })
    }
}

/// The L4 header an advanced context descriptor describes (TUCMD.L4T), which places its
/// checksum field.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum L4Type {
    /// UDP: checksum at offset 6.
    Udp,
    /// TCP: checksum at offset 16.
    Tcp,
}

/// An advanced transmit context descriptor (§7.2.2.2) for checksum insertion alone: the L4
/// header starts at `maclen + iplen`, its type places the checksum field, and the data
/// descriptors that follow with POPTS.TXSM ask for it. No VLAN insertion, no TSO, context 0.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct TxContextRepr {
    /// Bytes before the IP header (7 bits).
    pub maclen: u8,
    /// IP header length (9 bits).
    pub iplen: u16,
    /// The L4 header's type.
    pub l4: L4Type,
}

impl TxContextRepr {
    /// The context for a partial checksum from frame byte `start`, stored at `start + offset`:
    /// `None` unless `offset` is UDP's or TCP's field (the 82576 places the field by L4T, not
    /// by an offset) and `start` splits into MACLEN and IPLEN. The split is the Ethernet
    /// header's 14 bytes and the rest: the device adds them (its checksum starts at MACLEN +
    /// IPLEN) and, without IXSM or TSO, uses them for nothing else.
    pub fn for_checksum(start: u16, offset: u16) -> Option<Self> {
        let l4 = match offset {
            6 => L4Type::Udp,
            16 => L4Type::Tcp,
            _ => return None,
        };
        let maclen = start.min(14);
        let iplen = start - maclen;
        if iplen > TXCTX0::IPLEN.mask as u16 {
            return None;
        }
        Some(TxContextRepr {
            maclen: maclen as u8,
            iplen,
            l4,
        })
    }

    /// The descriptor as two words.
    pub fn emit(&self) -> [u64; 2] {
        let w0 = TXCTX0::MACLEN.val(self.maclen.into()) + TXCTX0::IPLEN.val(self.iplen.into());
        let l4t = match self.l4 {
            L4Type::Udp => TXCTX1::L4T::Udp,
            L4Type::Tcp => TXCTX1::L4T::Tcp,
        };
        let w1 = l4t + TXCTX1::DTYP::Context + TXCTX1::DEXT::SET;
        [w0.value, w1.value]
    }

    /// Parses an advanced context descriptor, or `None` if it is not one (or its L4T is
    /// SCTP's or reserved).
    pub fn parse(words: [u64; 2]) -> Option<Self> {
        let w0 = LocalRegisterCopy::<u64, TXCTX0::Register>::new(words[0]);
        let w1 = LocalRegisterCopy::<u64, TXCTX1::Register>::new(words[1]);
        if !w1.is_set(TXCTX1::DEXT) || !w1.matches_all(TXCTX1::DTYP::Context) {
            return None;
        }
        let l4 = match w1.read_as_enum(TXCTX1::L4T)? {
            TXCTX1::L4T::Value::Udp => L4Type::Udp,
            TXCTX1::L4T::Value::Tcp => L4Type::Tcp,
        };
        Some(TxContextRepr {
            maclen: w0.read(TXCTX0::MACLEN) as u8,
            iplen: w0.read(TXCTX0::IPLEN) as u16,
            l4,
        })
    }
}

/// A legacy transmit descriptor (§7.2.2.1). The driver sends with advanced descriptors (QEMU's
/// igb implements legacy ones only partially); this codec exists for completeness and tests.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct LegacyTxRepr {
    /// Buffer address.
    pub addr: u64,
    /// Bytes in this buffer.
    pub len: u16,
    /// Checksum offset.
    pub cso: u8,
    /// Last descriptor of the frame.
    pub eop: bool,
    /// Insert FCS.
    pub ifcs: bool,
    /// Report status.
    pub rs: bool,
    /// Checksum start.
    pub css: u8,
    /// VLAN tag (special field).
    pub special: u16,
}

impl LegacyTxRepr {
    /// The descriptor as two words (DEXT clear, status zero).
    pub fn emit(&self) -> [u64; 2] {
        let w1 = LEGACY_TXD::LENGTH.val(self.len.into())
            + LEGACY_TXD::CSO.val(self.cso.into())
            + LEGACY_TXD::EOP.val(self.eop.into())
            + LEGACY_TXD::IFCS.val(self.ifcs.into())
            + LEGACY_TXD::RS.val(self.rs.into())
            + LEGACY_TXD::CSS.val(self.css.into())
            + LEGACY_TXD::SPECIAL.val(self.special.into());
        [self.addr, w1.value]
    }
}

/// What a transmit write-back says about one RS descriptor.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum TxWriteback {
    /// DD is clear: the device has not finished.
    Pending,
    /// DD set, nothing unexpected.
    Done,
    /// DD set with bits the driver did not expect; the raw second word.
    Bad(u64),
}

impl TxWriteback {
    /// Decodes the second word of a transmit descriptor the driver wrote with RS.
    #[inline]
    pub fn parse(word1: u64) -> Self {
        if !TXD::DD.is_set(word1) {
            TxWriteback::Pending
        } else if word1 & tx::WB_UNEXPECTED != 0 {
            TxWriteback::Bad(word1)
        } else {
            TxWriteback::Done
        }
    }
}

/// The advanced receive descriptor, read format (§7.1.5.1).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct RxReadRepr {
    /// Packet buffer address.
    pub pkt_addr: u64,
    /// Header buffer address: zero in one-buffer mode. Its bit 0 overlaps the write-back DD
    /// bit, so writing zero here is also what clears a stale DD.
    pub hdr_addr: u64,
}

impl RxReadRepr {
    /// The descriptor as two words.
    #[inline]
    pub const fn emit(&self) -> [u64; 2] {
        [self.pkt_addr, self.hdr_addr]
    }
}

/// Receive write-back status bits tested as one mask, and the RSS type values of
/// [`RXWB0::RSS_TYPE`](mod@RXWB0::RSS_TYPE).
pub mod rx {
    use super::RXSTAT;

    /// Error bits 31:23 ([`RXSTAT::ERRORS`](mod@RXSTAT::ERRORS)), the checksum errors among
    /// them: the fast path leaves every one of them to the full decode.
    pub const ERRORS: u32 = RXSTAT::ERRORS::SET.value;
    /// The checksum errors, L4E and IPE: not errors of the frame, which is delivered with
    /// the checksum unmarked (software checks it again, and drops and counts it).
    pub const CHECKSUM_ERRORS: u32 = RXSTAT::L4E::SET.value | RXSTAT::IPE::SET.value;
    /// Bits no 82576 write-back defines: 2 and 8 (reserved), 12–14, 19–22 (the `RSV` fields of
    /// [`RXSTAT`]).
    pub const UNDEFINED: u32 = RXSTAT::RSV2::SET.value
        | RXSTAT::RSV8::SET.value
        | RXSTAT::RSV12::SET.value
        | RXSTAT::RSV19::SET.value;
    /// RSS type 1: TCP/IPv4.
    pub const RSS_TCP_IPV4: u8 = 1;
    /// RSS type 2: IPv4.
    pub const RSS_IPV4: u8 = 2;
    /// RSS type 7: UDP/IPv4.
    pub const RSS_UDP_IPV4: u8 = 7;
    const _: () = assert!(ERRORS == 0xFF80_0000 && UNDEFINED == 0x0078_7104);
}

/// The advanced receive descriptor, write-back format (§7.1.5.2), as the device wrote it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct RxWritebackRepr {
    /// Extended status and errors (bits 31:0 of the second word).
    pub status_error: u32,
    /// Bytes written into this descriptor's buffer.
    pub len: u16,
    /// VLAN tag (when status VP is set).
    pub vlan: u16,
    /// RSS type (0: no hash).
    pub rss_type: u8,
    /// Packet type bits.
    pub pkt_type: u16,
    /// RSS hash (with RXCSUM.PCSD set).
    pub rss_hash: u32,
}

impl RxWritebackRepr {
    /// Splits the two words the device wrote. Never fails: every bit pattern is a value; the
    /// judgement (errors, undefined bits) is in the accessors.
    #[inline]
    pub fn parse(words: [u64; 2]) -> Self {
        let w0 = LocalRegisterCopy::<u64, RXWB0::Register>::new(words[0]);
        let w1 = LocalRegisterCopy::<u64, RXWB1::Register>::new(words[1]);
        RxWritebackRepr {
            status_error: w1.read(RXWB1::STATUS_ERROR) as u32,
            len: w1.read(RXWB1::PKT_LEN) as u16,
            vlan: w1.read(RXWB1::VLAN) as u16,
            rss_type: w0.read(RXWB0::RSS_TYPE) as u8,
            pkt_type: w0.read(RXWB0::PKT_TYPE) as u16,
            rss_hash: w0.read(RXWB0::RSS_HASH) as u32,
        }
    }

    /// The two words (for tests that play the device). Fields wider than the descriptor's
    /// (`rss_type` above 4 bits, `pkt_type` above 13) are truncated.
    pub fn emit(&self) -> [u64; 2] {
        let w0 = RXWB0::RSS_TYPE.val(self.rss_type.into())
            + RXWB0::PKT_TYPE.val(self.pkt_type.into())
            + RXWB0::RSS_HASH.val(self.rss_hash.into());
        let w1 = RXWB1::STATUS_ERROR.val(self.status_error.into())
            + RXWB1::PKT_LEN.val(self.len.into())
            + RXWB1::VLAN.val(self.vlan.into());
        [w0.value, w1.value]
    }

    /// DD: the device is done with the descriptor.
    pub fn done(&self) -> bool {
        RXSTAT::DD.is_set(self.status_error)
    }

    /// EOP: last descriptor of a frame.
    pub fn eop(&self) -> bool {
        RXSTAT::EOP.is_set(self.status_error)
    }

    /// Error bits that make the frame bad, in place (not the checksum errors:
    /// [`checksum`](Self::checksum)).
    pub const fn errors(&self) -> u32 {
        self.status_error & rx::ERRORS & !rx::CHECKSUM_ERRORS
    }

    /// The checksums the device checked and found right: IPCS without IPE, L4I without L4E.
    pub const fn checksum(&self) -> RxChecksum {
        let s = self.status_error;
        RxChecksum::verified(
            s & (RXSTAT::IPCS::SET.value | RXSTAT::IPE::SET.value) == RXSTAT::IPCS::SET.value,
            s & (RXSTAT::L4I::SET.value | RXSTAT::L4E::SET.value) == RXSTAT::L4I::SET.value,
        )
    }

    /// Whether the device set bits no write-back defines.
    pub const fn has_undefined_bits(&self) -> bool {
        self.status_error & rx::UNDEFINED != 0
    }

    /// The RSS hash, if the device computed one.
    #[inline]
    pub const fn rss(&self) -> Option<RssInfo> {
        // A table lookup rather than a `match`: this runs for every received frame, and a
        // four-way match compiles to a jump table.
        match RSS_KINDS[(self.rss_type & RXWB0::RSS_TYPE.mask as u8) as usize] {
            None => None,
            Some(kind) => Some(RssInfo {
                hash: self.rss_hash,
                kind,
            }),
        }
    }
}

/// The hash kind of each 4-bit RSS type (`None`: no hash).
const RSS_KINDS: [Option<RssHashKind>; 16] = {
    let mut kinds = [None; 16];
    let mut t = 1;
    while t < 16 {
        kinds[t] = Some(match t as u8 {
            rx::RSS_TCP_IPV4 => RssHashKind::Ipv4Tcp,
            rx::RSS_IPV4 => RssHashKind::Ipv4,
            rx::RSS_UDP_IPV4 => RssHashKind::Ipv4Udp,
            other => RssHashKind::Other(other),
        });
        t += 1;
    }
    kinds
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advanced_tx_data_descriptor_has_datasheet_byte_layout() {
        let d = TxDataRepr {
            addr: 0x1122_3344_5566_7788,
            len: 0x05EA,
            eop: true,
            rs: true,
            paylen: 1514,
        };
        let bytes = to_bytes(d.emit());
        // Bytes 0–7: address, little-endian.
        assert_eq!(
            &bytes[0..8],
            &[0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11]
        );
        // Bytes 8–9: DTALEN; byte 10: MAC = 0, DTYP (bits 23:20) = 0011b → 0x30;
        // byte 11: DCMD = DEXT (0x20) | RS (0x08) | IFCS (0x02) | EOP (0x01) = 0x2B.
        assert_eq!(&bytes[8..12], &[0xEA, 0x05, 0x30, 0x2B]);
        // Bytes 12–15: STA/IDX/CC/POPTS zero, PAYLEN in bits 31:14: 1514 << 14 = 0x017A_8000.
        assert_eq!(&bytes[12..16], &[0x00, 0x80, 0x7A, 0x01]);
        assert_eq!(TxDataRepr::parse(d.emit()), Some(d));
    }

    #[test]
    fn advanced_tx_middle_segment_has_neither_eop_nor_rs() {
        let d = TxDataRepr {
            addr: 0x1000,
            len: 64,
            eop: false,
            rs: false,
            paylen: 100,
        };
        let bytes = to_bytes(d.emit());
        assert_eq!(&bytes[8..12], &[64, 0, 0x30, 0x22]);
    }

    #[test]
    fn legacy_tx_descriptor_has_datasheet_byte_layout() {
        let d = LegacyTxRepr {
            addr: 0xABCD_0000,
            len: 60,
            cso: 0x24,
            eop: true,
            ifcs: true,
            rs: true,
            css: 0x0E,
            special: 0x0123,
        };
        let bytes = to_bytes(d.emit());
        assert_eq!(&bytes[0..8], &[0x00, 0x00, 0xCD, 0xAB, 0, 0, 0, 0]);
        // LENGTH, CSO, CMD (RS | IFCS | EOP, DEXT clear), STA, CSS, special.
        assert_eq!(&bytes[8..16], &[60, 0, 0x24, 0x0B, 0x00, 0x0E, 0x23, 0x01]);
        assert_eq!(
            TxDataRepr::parse(d.emit()),
            None,
            "a legacy descriptor is not advanced"
        );
    }

    #[test]
    fn tx_writeback_distinguishes_pending_done_and_bad() {
        let sent = TxDataRepr {
            addr: 1,
            len: 60,
            eop: true,
            rs: true,
            paylen: 60,
        }
        .emit();
        assert_eq!(TxWriteback::parse(sent[1]), TxWriteback::Pending);
        // QEMU echoes the descriptor and ORs DD in: still a clean completion.
        assert_eq!(
            TxWriteback::parse(sent[1] | TXD::DD::SET.value),
            TxWriteback::Done
        );
        // Silicon zeroes the reserved fields: also clean.
        assert_eq!(TxWriteback::parse(TXD::DD::SET.value), TxWriteback::Done);
        let bad = sent[1] | TXD::DD::SET.value | 1 << 34;
        assert_eq!(TxWriteback::parse(bad), TxWriteback::Bad(bad));
    }

    #[test]
    fn rx_read_descriptor_has_packet_then_header_address() {
        let bytes = to_bytes(
            RxReadRepr {
                pkt_addr: 0x0000_0001_2345_6000,
                hdr_addr: 0,
            }
            .emit(),
        );
        assert_eq!(
            bytes,
            [0x00, 0x60, 0x45, 0x23, 0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
        );
    }

    #[test]
    fn rx_writeback_parses_hand_made_bytes() {
        // RSS type 7 (UDP/IPv4), packet type IPv4|UDP (0x021 << 4), hash 0x51CCC178;
        // status DD|EOP, no errors, length 98, VLAN 0.
        let bytes: [u8; 16] = [
            0x17, 0x02, 0x00, 0x00, 0x78, 0xC1, 0xCC, 0x51, // word 0
            0x03, 0x00, 0x00, 0x00, 0x62, 0x00, 0x00, 0x00, // word 1
        ];
        let view = Descriptor::new_checked(&bytes[..]).unwrap();
        let wb = RxWritebackRepr::parse(view.words());
        assert!(wb.done() && wb.eop());
        assert_eq!(wb.len, 98);
        assert_eq!(wb.errors(), 0);
        assert!(!wb.has_undefined_bits());
        assert_eq!(wb.pkt_type, 0x021);
        assert_eq!(
            wb.rss(),
            Some(RssInfo {
                hash: 0x51CC_C178,
                kind: RssHashKind::Ipv4Udp
            })
        );
        assert_eq!(to_bytes(wb.emit()), bytes);
    }

    #[test]
    fn rx_writeback_reports_error_and_undefined_bits() {
        let wb = RxWritebackRepr::parse([0, 0x8000_0003 | 40 << 32]);
        assert_eq!(wb.errors(), 0x8000_0000);
        assert_eq!(wb.rss(), None);
        let wb = RxWritebackRepr::parse([0x3, 0x0010_0003]);
        assert!(wb.has_undefined_bits());
        assert_eq!(wb.rss().map(|r| r.kind), Some(RssHashKind::Other(3)));
    }

    #[test]
    fn short_buffers_are_refused_by_the_checked_view() {
        assert_eq!(
            Descriptor::new_checked(&[0u8; 15][..]).err(),
            Some(Truncated)
        );
    }
}
