//! 82574 descriptor formats as Packet/Repr codecs.
//!
//! Every descriptor is 16 bytes, little-endian, moved as two `u64` words (bytes 0–7 and 8–15)
//! through [`DmaRegion`](ringfab_hal::DmaRegion)'s volatile accessors. [`Descriptor`] is a checked
//! view over 16 bytes (for tests and dumps); the `Repr` types are the small parsed structs the
//! driver builds and decodes. `parse` never panics on any input — a device may write anything.
//! Bit fields are `tock_registers::register_bitfields!` definitions, as in `ringfab-igb`.
//!
//! Layouts (82574 datasheet):
//! * legacy transmit descriptor — §7.2.10.1 (DEXT = 0): what the driver sends a frame with
//!   when it asks for no checksum. It needs no context descriptor, and without offloads it says
//!   everything an extended one would;
//! * TCP/IP context transmit descriptor — §7.2.10.2 (DEXT = 1, DTYP = 0000b): TUCSS/TUCSO
//!   for a frame whose TCP/UDP checksum the device inserts (**QEMU** honours POPTS.TXSM only
//!   behind a context and in extended data descriptors, not a legacy descriptor's CSO/CSS);
//! * extended transmit data descriptor — §7.2.10.3 (DEXT = 1, DTYP = 0001b, POPTS.TXSM): the
//!   data of such a frame — a legacy descriptor with [`TX_CHECKSUM_DATA`] ORed in, the fields
//!   being where the legacy ones are;
//! * transmit write-back — the status nibble (DD in bit 32 of the second word) in both
//!   formats; **QEMU** rewrites the descriptor's upper dword as the driver wrote it, DD ORed in;
//! * extended receive descriptor (RFCTL.EXSTEN), read format — §7.1.4.2: buffer address, then
//!   a reserved quadword whose bit 0 overlaps the write-back's DD (written as zero: that also
//!   clears a stale DD);
//! * extended receive descriptor, write-back format — §7.1.4.2: MRQ (RSS type, queue) and the
//!   RSS hash (with RXCSUM.PCSD) in the first word; extended status and errors, length and VLAN
//!   in the second — the same places as the 82576's advanced write-back.

use ringfab_hal::{RssHashKind, RssInfo, RxChecksum};
use tock_registers::LocalRegisterCopy;

/// Byte ranges inside a descriptor.
mod field {
    use core::ops::Range;
    /// Buffer address (read formats) / MRQ and RSS hash (RX write-back).
    pub(super) const WORD0: Range<usize> = 0..8;
    /// Command/length/status (TX) / reserved (RX read) / status, error, length (RX write-back).
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

    /// Both words, as the ring stores them.
    pub fn words(&self) -> [u64; 2] {
        [self.word(field::WORD0), self.word(field::WORD1)]
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
        /// Second word of a legacy transmit descriptor (§7.2.10.1): length, CSO, command byte
        /// (bits 31:24), status nibble (35:32), reserved (39:36), CSS, special.
        pub TXD [
            /// LENGTH: bytes in this descriptor's buffer.
            LENGTH OFFSET(0) NUMBITS(16) [],
            /// CSO: checksum offset (zero: no checksum insertion).
            CSO OFFSET(16) NUMBITS(8) [],
            /// CMD.EOP: last descriptor of the frame.
            EOP OFFSET(24) NUMBITS(1) [],
            /// CMD.IFCS: the MAC appends the FCS.
            IFCS OFFSET(25) NUMBITS(1) [],
            /// CMD.IC: insert checksum (zero).
            IC OFFSET(26) NUMBITS(1) [],
            /// CMD.RS: report status (write back DD).
            RS OFFSET(27) NUMBITS(1) [],
            /// CMD.DEXT: extended descriptor (clear in a legacy one).
            DEXT OFFSET(29) NUMBITS(1) [],
            /// CMD.VLE: insert the VLAN tag of `SPECIAL` (zero).
            VLE OFFSET(30) NUMBITS(1) [],
            /// CMD.IDE: interrupt delay enable (zero).
            IDE OFFSET(31) NUMBITS(1) [],
            /// STA.DD: descriptor done.
            DD OFFSET(32) NUMBITS(1) [],
            /// STA.EC / STA.LC: excess collisions, late collision (half duplex only); bit 35
            /// reserved.
            STA_ERR OFFSET(33) NUMBITS(3) [],
            /// Reserved bits 39:36.
            RSV OFFSET(36) NUMBITS(4) [],
            /// CSS: checksum start.
            CSS OFFSET(40) NUMBITS(8) [],
            /// Special: VLAN tag.
            SPECIAL OFFSET(48) NUMBITS(16) [],
        ],
        /// Second word of an extended transmit data descriptor (§7.2.10.3).
        pub TXD_EXT [
            /// DTALEN: bytes in this descriptor's buffer.
            DTALEN OFFSET(0) NUMBITS(20) [],
            /// DTYP: descriptor type.
            DTYP OFFSET(20) NUMBITS(4) [
                /// 0001b: data descriptor.
                Data = 0b0001,
            ],
            /// DCMD.EOP.
            EOP OFFSET(24) NUMBITS(1) [],
            /// DCMD.IFCS.
            IFCS OFFSET(25) NUMBITS(1) [],
            /// DCMD.TSE: TCP segmentation (zero).
            TSE OFFSET(26) NUMBITS(1) [],
            /// DCMD.RS.
            RS OFFSET(27) NUMBITS(1) [],
            /// DCMD.DEXT: set.
            DEXT OFFSET(29) NUMBITS(1) [],
            /// STA.DD.
            DD OFFSET(32) NUMBITS(1) [],
            /// POPTS: checksum insertion options (zero, or TXSM).
            POPTS OFFSET(40) NUMBITS(8) [],
            /// POPTS.TXSM: insert the TCP/UDP checksum the last context described.
            TXSM OFFSET(41) NUMBITS(1) [],
        ],
        /// First word of a TCP/IP context transmit descriptor (§7.2.10.2).
        pub TXCTX0 [
            /// IPCSS, IPCSO, IPCSE: the IPv4 header checksum (IXSM; zero).
            IP OFFSET(0) NUMBITS(32) [],
            /// TUCSS: first byte of the TCP/UDP checksum.
            TUCSS OFFSET(32) NUMBITS(8) [],
            /// TUCSO: where the TCP/UDP checksum goes, from the frame's start.
            TUCSO OFFSET(40) NUMBITS(8) [],
            /// TUCSE: last byte summed (0: the frame's end).
            TUCSE OFFSET(48) NUMBITS(16) [],
        ],
        /// Second word of a TCP/IP context transmit descriptor (§7.2.10.2).
        pub TXCTX1 [
            /// PAYLEN (TSO only; zero).
            PAYLEN OFFSET(0) NUMBITS(20) [],
            /// DTYP: 0000b, a context descriptor.
            DTYP OFFSET(20) NUMBITS(4) [],
            /// TUCMD.TCP: the L4 header is TCP's (else UDP's; used by TSO).
            TCP OFFSET(24) NUMBITS(1) [],
            /// TUCMD.RS: report status (zero: the frame's data descriptor reports).
            RS OFFSET(27) NUMBITS(1) [],
            /// TUCMD.DEXT: extended descriptor (set).
            DEXT OFFSET(29) NUMBITS(1) [],
            /// HDRLEN, MSS (TSO only; zero).
            TSO OFFSET(40) NUMBITS(24) [],
        ],
        /// First word of the extended receive write-back (§7.1.4.2).
        pub RXWB0 [
            /// MRQ.RSS type (0: no hash; see [`rx::RSS_TCP_IPV4`] and [`rx::RSS_IPV4`]).
            RSS_TYPE OFFSET(0) NUMBITS(4) [],
            /// MRQ.queue: the receive queue RSS chose.
            QUEUE OFFSET(8) NUMBITS(5) [],
            /// RSS hash (with RXCSUM.PCSD set; IP id and checksum otherwise).
            RSS_HASH OFFSET(32) NUMBITS(32) [],
        ],
        /// Second word of the extended receive write-back (§7.1.4.2).
        pub RXWB1 [
            /// Extended status (19:0) and extended errors (31:20), fields in [`RXSTAT`].
            STATUS_ERROR OFFSET(0) NUMBITS(32) [],
            /// Length: bytes written into this descriptor's buffer.
            PKT_LEN OFFSET(32) NUMBITS(16) [],
            /// VLAN tag (when status VP is set).
            VLAN OFFSET(48) NUMBITS(16) [],
        ],
    ];

    register_bitfields![u32,
        /// Extended status and errors of the receive write-back (§7.1.4.2, bits 31:0 of the
        /// second word).
        pub RXSTAT [
            /// DD: the device is done with the descriptor.
            DD OFFSET(0) NUMBITS(1) [],
            /// EOP: last descriptor of a frame.
            EOP OFFSET(1) NUMBITS(1) [],
            /// Bit 2: reserved (IXSM on older parts).
            RSV2 OFFSET(2) NUMBITS(1) [],
            /// UDPCS: the UDP checksum was checked (§7.1.4.2, with RXCSUM.TUOFLD).
            UDPCS OFFSET(4) NUMBITS(1) [],
            /// TCPCS: the TCP or UDP checksum was checked (with RXCSUM.TUOFLD).
            TCPCS OFFSET(5) NUMBITS(1) [],
            /// IPCS: the IPv4 header checksum was checked (with RXCSUM.IPOFLD).
            IPCS OFFSET(6) NUMBITS(1) [],
            /// Bit 8: reserved.
            RSV8 OFFSET(8) NUMBITS(1) [],
            /// Bits 14:11: reserved. (Bit 15 is ACK, bits 19:16 the packet type **QEMU**
            /// reports; both are accepted.)
            RSV11 OFFSET(11) NUMBITS(4) [],
            /// Bits 23:20: reserved.
            RSV20 OFFSET(20) NUMBITS(4) [],
            /// Bit 27: reserved.
            RSV27 OFFSET(27) NUMBITS(1) [],
            /// Error bits: CE (24), SE (25), SEQ (26).
            ERR_LO OFFSET(24) NUMBITS(3) [],
            /// Error bits: CXE (28), TCPE (29), IPE (30), RXE (31).
            ERR_HI OFFSET(28) NUMBITS(4) [],
            /// TCPE: the TCP/UDP checksum was checked and found wrong.
            TCPE OFFSET(29) NUMBITS(1) [],
            /// IPE: the IPv4 header checksum was checked and found wrong.
            IPE OFFSET(30) NUMBITS(1) [],
        ],
    ];
}

pub use layout::{RXSTAT, RXWB0, RXWB1, TXCTX0, TXCTX1, TXD, TXD_EXT};

/// Transmit write-back bits tested as one mask.
pub mod tx {
    use super::TXD;

    /// Second-word bits a write-back may not set: STA bits 3:1 (EC, LC — a frame the MAC gave
    /// up on — and a reserved bit) and the reserved bits 39:36. Bits 31:0 and 63:40 are
    /// ignored: **QEMU** echoes what the driver wrote there.
    pub const WB_UNEXPECTED: u64 = TXD::STA_ERR::SET.value | TXD::RSV::SET.value;
    const _: () = assert!(WB_UNEXPECTED == 0x7F << 33);
}

/// A legacy transmit descriptor (§7.2.10.1), as the driver writes it: FCS insertion on, no
/// checksum, no VLAN, status zero.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct TxRepr {
    /// Buffer address.
    pub addr: u64,
    /// Bytes in this buffer.
    pub len: u16,
    /// Last descriptor of the frame.
    pub eop: bool,
    /// Ask for a DD write-back.
    pub rs: bool,
}

impl TxRepr {
    /// The descriptor as two words.
    #[inline]
    pub fn emit(&self) -> [u64; 2] {
        let w1 = TXD::LENGTH.val(self.len.into())
            + TXD::IFCS::SET
            + TXD::EOP.val(self.eop.into())
            + TXD::RS.val(self.rs.into());
        [self.addr, w1.value]
    }

    /// Parses a legacy descriptor, or `None` if DEXT is set.
    pub fn parse(words: [u64; 2]) -> Option<Self> {
        let w1 = LocalRegisterCopy::<u64, TXD::Register>::new(words[1]);
        if w1.is_set(TXD::DEXT) {
            return None;
        }
        Some(TxRepr {
            addr: words[0],
            len: w1.read(TXD::LENGTH) as u16,
            eop: w1.is_set(TXD::EOP),
            rs: w1.is_set(TXD::RS),
        })
    }
}

/// An extended transmit data descriptor (§7.2.10.3). The driver sends with legacy ones; this
/// codec documents the other format the 82574 offers and is tested against its byte layout.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct TxExtRepr {
    /// Buffer address.
    pub addr: u64,
    /// Bytes in this buffer (20 bits).
    pub len: u32,
    /// Last descriptor of the frame.
    pub eop: bool,
    /// Ask for a DD write-back.
    pub rs: bool,
}

impl TxExtRepr {
    /// The descriptor as two words (FCS insertion on, no offloads, status zero).
    pub fn emit(&self) -> [u64; 2] {
        let w1 = TXD_EXT::DTALEN.val(self.len.into())
            + TXD_EXT::DTYP::Data
            + TXD_EXT::DEXT::SET
            + TXD_EXT::IFCS::SET
            + TXD_EXT::EOP.val(self.eop.into())
            + TXD_EXT::RS.val(self.rs.into());
        [self.addr, w1.value]
    }

    /// Parses an extended data descriptor, or `None` if it is not one.
    pub fn parse(words: [u64; 2]) -> Option<Self> {
        let w1 = LocalRegisterCopy::<u64, TXD_EXT::Register>::new(words[1]);
        if !w1.is_set(TXD_EXT::DEXT) || !w1.matches_all(TXD_EXT::DTYP::Data) {
            return None;
        }
        Some(TxExtRepr {
            addr: words[0],
            len: w1.read(TXD_EXT::DTALEN) as u32,
            eop: w1.is_set(TXD_EXT::EOP),
            rs: w1.is_set(TXD_EXT::RS),
        })
    }
}

/// Word-1 bits that turn a legacy data descriptor [`TxRepr`] wrote into the extended data
/// descriptor of a frame behind a checksum context (§7.2.10.3): DEXT, DTYP = 0001b and
/// POPTS.TXSM. The legacy fields the driver writes sit where the extended ones are — LENGTH in
/// DTALEN's low bits, CSO (zero) under DTALEN's high bits and DTYP, the command byte's EOP,
/// IFCS and RS in DCMD's places, CSS (zero) under POPTS — so an OR converts one to the other.
pub const TX_CHECKSUM_DATA: u64 =
    TXD_EXT::DEXT::SET.value | TXD_EXT::DTYP::Data.value | TXD_EXT::TXSM::SET.value;

/// A TCP/IP context transmit descriptor (§7.2.10.2) for checksum insertion alone: sum from
/// `tucss` to the frame's end, store at `tucso`; no IP checksum, no TSO.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct TxContextRepr {
    /// First byte summed.
    pub tucss: u8,
    /// Where the checksum goes (from the frame's start).
    pub tucso: u8,
    /// The L4 header is TCP's (TUCMD.TCP; else UDP's).
    pub tcp: bool,
}

impl TxContextRepr {
    /// The context for a partial checksum from frame byte `start` stored at `start + offset`:
    /// `None` if either does not fit TUCSS's or TUCSO's byte.
    pub fn for_checksum(start: u16, offset: u16) -> Option<Self> {
        let tucss = u8::try_from(start).ok()?;
        let tucso = u8::try_from(start.checked_add(offset)?).ok()?;
        Some(TxContextRepr {
            tucss,
            tucso,
            tcp: offset == 16,
        })
    }

    /// The descriptor as two words.
    pub fn emit(&self) -> [u64; 2] {
        let w0 = TXCTX0::TUCSS.val(self.tucss.into()) + TXCTX0::TUCSO.val(self.tucso.into());
        let w1 = TXCTX1::DEXT::SET + TXCTX1::TCP.val(self.tcp.into());
        [w0.value, w1.value]
    }

    /// Parses a context descriptor, or `None` if it is not one.
    pub fn parse(words: [u64; 2]) -> Option<Self> {
        let w0 = LocalRegisterCopy::<u64, TXCTX0::Register>::new(words[0]);
        let w1 = LocalRegisterCopy::<u64, TXCTX1::Register>::new(words[1]);
        if !w1.is_set(TXCTX1::DEXT) || w1.read(TXCTX1::DTYP) != 0 {
            return None;
        }
        Some(TxContextRepr {
            tucss: w0.read(TXCTX0::TUCSS) as u8,
            tucso: w0.read(TXCTX0::TUCSO) as u8,
            tcp: w1.is_set(TXCTX1::TCP),
        })
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

/// The extended receive descriptor, read format (§7.1.4.2).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct RxReadRepr {
    /// Buffer address.
    pub addr: u64,
}

impl RxReadRepr {
    /// The descriptor as two words; the reserved second word is zero, which also clears a
    /// stale DD.
    #[inline]
    pub const fn emit(&self) -> [u64; 2] {
        [self.addr, 0]
    }
}

/// Receive write-back status bits tested as one mask, and the RSS type values of
/// [`RXWB0::RSS_TYPE`](mod@RXWB0::RSS_TYPE).
pub mod rx {
    use super::RXSTAT;

    /// Error bits: CE, SE, SEQ (26:24) and CXE, TCPE, IPE, RXE (31:28). Any set but TCPE and
    /// IPE makes the frame bad; the fast path leaves all of them to the full decode.
    pub const ERRORS: u32 = RXSTAT::ERR_LO::SET.value | RXSTAT::ERR_HI::SET.value;
    /// The checksum errors, TCPE and IPE: not errors of the frame, which is delivered with
    /// the checksum unmarked (software checks it again, and drops and counts it).
    pub const CHECKSUM_ERRORS: u32 = RXSTAT::TCPE::SET.value | RXSTAT::IPE::SET.value;
    /// Bits no 82574 write-back defines: 2, 8, 14:11, 23:20 and 27.
    pub const UNDEFINED: u32 = RXSTAT::RSV2::SET.value
        | RXSTAT::RSV8::SET.value
        | RXSTAT::RSV11::SET.value
        | RXSTAT::RSV20::SET.value
        | RXSTAT::RSV27::SET.value;
    /// RSS type 1: TCP/IPv4.
    pub const RSS_TCP_IPV4: u8 = 1;
    /// RSS type 2: IPv4.
    pub const RSS_IPV4: u8 = 2;
    const _: () = assert!(ERRORS == 0xF700_0000 && UNDEFINED == 0x08F0_7904);
}

/// The extended receive descriptor, write-back format (§7.1.4.2), as the device wrote it.
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
    /// The queue RSS chose (MRQ bits 12:8).
    pub queue: u8,
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
            queue: w0.read(RXWB0::QUEUE) as u8,
            rss_hash: w0.read(RXWB0::RSS_HASH) as u32,
        }
    }

    /// The two words (for tests that play the device). Fields wider than the descriptor's are
    /// truncated.
    pub fn emit(&self) -> [u64; 2] {
        let w0 = RXWB0::RSS_TYPE.val(self.rss_type.into())
            + RXWB0::QUEUE.val(self.queue.into())
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

    /// The checksums the device checked and found right: IPCS without IPE, TCPCS without
    /// TCPE.
    pub const fn checksum(&self) -> RxChecksum {
        let s = self.status_error;
        RxChecksum::verified(
            s & (RXSTAT::IPCS::SET.value | RXSTAT::IPE::SET.value) == RXSTAT::IPCS::SET.value,
            s & (RXSTAT::TCPCS::SET.value | RXSTAT::TCPE::SET.value) == RXSTAT::TCPCS::SET.value,
        )
    }

    /// Whether the device set bits no write-back defines.
    pub const fn has_undefined_bits(&self) -> bool {
        self.status_error & rx::UNDEFINED != 0
    }

    /// The RSS hash, if the device computed one.
    #[inline]
    pub const fn rss(&self) -> Option<RssInfo> {
        match RSS_KINDS[(self.rss_type & RXWB0::RSS_TYPE.mask as u8) as usize] {
            None => None,
            Some(kind) => Some(RssInfo {
                hash: self.rss_hash,
                kind,
            }),
        }
    }
}

/// The hash kind of each 4-bit RSS type (`None`: no hash). Types 3–5 are the IPv6 hashes,
/// which this driver never enables.
const RSS_KINDS: [Option<RssHashKind>; 16] = {
    let mut kinds = [None; 16];
    let mut t = 1;
    while t < 16 {
        kinds[t] = Some(match t as u8 {
            rx::RSS_TCP_IPV4 => RssHashKind::Ipv4Tcp,
            rx::RSS_IPV4 => RssHashKind::Ipv4,
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
    fn legacy_tx_descriptor_has_datasheet_byte_layout() {
        let d = TxRepr {
            addr: 0x1122_3344_5566_7788,
            len: 0x05EA,
            eop: true,
            rs: true,
        };
        let bytes = to_bytes(d.emit());
        assert_eq!(
            &bytes[0..8],
            &[0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11]
        );
        // Bytes 8–9: length; byte 10: CSO 0; byte 11: CMD = RS (0x08) | IFCS (0x02) |
        // EOP (0x01), DEXT clear; bytes 12–15: STA, CSS, special all zero.
        assert_eq!(&bytes[8..16], &[0xEA, 0x05, 0x00, 0x0B, 0, 0, 0, 0]);
        assert_eq!(TxRepr::parse(d.emit()), Some(d));
    }

    #[test]
    fn legacy_tx_middle_segment_has_neither_eop_nor_rs() {
        let d = TxRepr {
            addr: 0x1000,
            len: 64,
            eop: false,
            rs: false,
        };
        assert_eq!(&to_bytes(d.emit())[8..12], &[64, 0, 0, 0x02]);
    }

    #[test]
    fn extended_tx_data_descriptor_has_datasheet_byte_layout() {
        let d = TxExtRepr {
            addr: 0xABCD_0000,
            len: 60,
            eop: true,
            rs: true,
        };
        let bytes = to_bytes(d.emit());
        assert_eq!(&bytes[0..8], &[0x00, 0x00, 0xCD, 0xAB, 0, 0, 0, 0]);
        // DTALEN 60 (bits 19:0), DTYP 0001b (23:20) → byte 10 = 0x10; DCMD = DEXT (0x20) |
        // RS (0x08) | IFCS (0x02) | EOP (0x01) = 0x2B; STA, POPTS, special zero.
        assert_eq!(&bytes[8..16], &[60, 0, 0x10, 0x2B, 0, 0, 0, 0]);
        assert_eq!(TxExtRepr::parse(d.emit()), Some(d));
        assert_eq!(TxRepr::parse(d.emit()), None, "not a legacy descriptor");
        assert_eq!(
            TxExtRepr::parse(
                TxRepr {
                    addr: 0,
                    len: 1,
                    eop: true,
                    rs: false
                }
                .emit()
            ),
            None
        );
    }

    #[test]
    fn tx_writeback_distinguishes_pending_done_and_bad() {
        let sent = TxRepr {
            addr: 1,
            len: 60,
            eop: true,
            rs: true,
        }
        .emit();
        assert_eq!(TxWriteback::parse(sent[1]), TxWriteback::Pending);
        // QEMU echoes the upper dword and ORs DD in: still a clean completion.
        assert_eq!(
            TxWriteback::parse(sent[1] | TXD::DD::SET.value),
            TxWriteback::Done
        );
        // Excess collisions (STA.EC, byte 12 bit 1): the frame was not sent.
        let bad = sent[1] | TXD::DD::SET.value | 1 << 33;
        assert_eq!(TxWriteback::parse(bad), TxWriteback::Bad(bad));
        // A CSS byte the device scribbled on is not judged (QEMU echoes it).
        let css = sent[1] | TXD::DD::SET.value | 0xFF << 40;
        assert_eq!(TxWriteback::parse(css), TxWriteback::Done);
    }

    #[test]
    fn rx_read_descriptor_is_the_address_then_a_zero_word() {
        let bytes = to_bytes(
            RxReadRepr {
                addr: 0x0000_0001_2345_6000,
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
        // MRQ: RSS type 1 (TCP/IPv4), queue 1 (bits 12:8); hash 0x51CCC178; status DD|EOP and
        // packet type 2 (IPv4 + TCP/UDP, bits 19:16), no errors; length 98; VLAN 0.
        let bytes: [u8; 16] = [
            0x01, 0x01, 0x00, 0x00, 0x78, 0xC1, 0xCC, 0x51, // word 0
            0x03, 0x00, 0x02, 0x00, 0x62, 0x00, 0x00, 0x00, // word 1
        ];
        let view = Descriptor::new_checked(&bytes[..]).unwrap();
        let wb = RxWritebackRepr::parse(view.words());
        assert!(wb.done() && wb.eop());
        assert_eq!((wb.len, wb.queue, wb.errors()), (98, 1, 0));
        assert!(!wb.has_undefined_bits(), "packet type bits are defined");
        assert_eq!(
            wb.rss(),
            Some(RssInfo {
                hash: 0x51CC_C178,
                kind: RssHashKind::Ipv4Tcp
            })
        );
        assert_eq!(to_bytes(wb.emit()), bytes);
    }

    #[test]
    fn rx_writeback_reports_error_and_undefined_bits() {
        let wb = RxWritebackRepr::parse([0, 0x8000_0003 | 40 << 32]);
        assert_eq!(wb.errors(), 0x8000_0000);
        assert_eq!(wb.rss(), None);
        let wb = RxWritebackRepr::parse([0x5, 0x0010_0003]);
        assert!(wb.has_undefined_bits());
        assert_eq!(wb.rss().map(|r| r.kind), Some(RssHashKind::Other(5)));
        assert!(RxWritebackRepr::parse([0, 1 << 27 | 3]).has_undefined_bits());
    }

    #[test]
    fn short_buffers_are_refused_by_the_checked_view() {
        assert_eq!(
            Descriptor::new_checked(&[0u8; 15][..]).err(),
            Some(Truncated)
        );
    }
}
