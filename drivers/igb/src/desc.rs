//! 82576 descriptor formats as Packet/Repr codecs.
//!
//! Every descriptor is 16 bytes, little-endian, and the ring module moves it as two `u64` words
//! (bytes 0–7 and 8–15) through [`DmaRegion`](ringfab_hal::DmaRegion)'s volatile accessors.
//! [`Descriptor`] is a checked view over 16 bytes (for tests and debugging dumps); the `Repr`
//! types are the small parsed structs the driver builds and decodes, with `emit` producing the
//! two words and `parse` taking them. Once [`Descriptor::new_checked`] succeeded no accessor
//! panics; `parse` never panics on any input — a device may write anything.
//!
//! Layouts (82576 datasheet):
//! * advanced transmit data descriptor, read format — §7.2.2.3 (DTYP = 0011b, DEXT = 1);
//! * legacy transmit descriptor — §7.2.2.1 (DEXT = 0);
//! * transmit write-back — only the STA nibble (bits 35:32 of the second word, DD = bit 32) is
//!   defined; **QEMU** writes the whole descriptor back as read, with DD ORed in;
//! * advanced receive descriptor, read format — §7.1.5.1 (packet address, header address);
//! * advanced receive descriptor, write-back format — §7.1.5.2.

use ringfab_hal::{RssHashKind, RssInfo};

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

/// Transmit command and status bits (second word; the command byte is bits 31:24, §7.2.2.3).
pub mod tx {
    /// DTALEN / legacy LENGTH: buffer length, bits 15:0.
    pub const LEN_MASK: u64 = 0xFFFF;
    /// DTYP = 0011b: advanced data descriptor (bits 23:20).
    pub const DTYP_DATA: u64 = 0b0011 << 20;
    /// DTYP field mask.
    pub const DTYP_MASK: u64 = 0xF << 20;
    /// DCMD.EOP: last descriptor of the frame.
    pub const EOP: u64 = 1 << 24;
    /// DCMD.IFCS: the MAC appends the FCS.
    pub const IFCS: u64 = 1 << 25;
    /// DCMD.RS: report status (write back DD).
    pub const RS: u64 = 1 << 27;
    /// DCMD.DEXT: advanced (extended) descriptor.
    pub const DEXT: u64 = 1 << 29;
    /// STA.DD: descriptor done (byte 12 bit 0).
    pub const DD: u64 = 1 << 32;
    /// PAYLEN: bits 63:46 (olinfo_status bits 31:14).
    pub const PAYLEN_SHIFT: u32 = 46;
    /// Largest PAYLEN (18 bits).
    pub const PAYLEN_MAX: u32 = (1 << 18) - 1;
    /// Legacy CSO: checksum offset, bits 23:16.
    pub const LEGACY_CSO_SHIFT: u32 = 16;
    /// Legacy CSS: checksum start, bits 47:40.
    pub const LEGACY_CSS_SHIFT: u32 = 40;
    /// Legacy special (VLAN), bits 63:48.
    pub const LEGACY_SPECIAL_SHIFT: u32 = 48;
    /// Status-dword bits a write-back may not set for descriptors this driver writes: STA
    /// bits 3:1 (reserved), IDX, CC and POPTS (bits 45:33), which the driver writes as zero.
    /// Bits 31:0 and 63:46 are ignored: the datasheet calls them reserved in the write-back,
    /// and **QEMU** echoes what the driver wrote there (command/length, PAYLEN).
    pub const WB_UNEXPECTED: u64 = 0x1FFF << 33;
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
    /// The descriptor as two words: FCS insertion always on, no offloads, status zero.
    #[inline]
    pub const fn emit(&self) -> [u64; 2] {
        let mut w1 = self.len as u64 | tx::DTYP_DATA | tx::DEXT | tx::IFCS;
        if self.eop {
            w1 |= tx::EOP;
        }
        if self.rs {
            w1 |= tx::RS;
        }
        w1 |= ((self.paylen & tx::PAYLEN_MAX) as u64) << tx::PAYLEN_SHIFT;
        [self.addr, w1]
    }

    /// Parses a descriptor in advanced data read format, or `None` if it is not one.
    pub const fn parse(words: [u64; 2]) -> Option<Self> {
        let w1 = words[1];
        if w1 & tx::DEXT == 0 || w1 & tx::DTYP_MASK != tx::DTYP_DATA {
            return None;
        }
        Some(TxDataRepr {
            addr: words[0],
            len: (w1 & tx::LEN_MASK) as u16,
            eop: w1 & tx::EOP != 0,
            rs: w1 & tx::RS != 0,
            paylen: (w1 >> tx::PAYLEN_SHIFT) as u32 & tx::PAYLEN_MAX,
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
    pub const fn emit(&self) -> [u64; 2] {
        let mut w1 = self.len as u64
            | (self.cso as u64) << tx::LEGACY_CSO_SHIFT
            | (self.css as u64) << tx::LEGACY_CSS_SHIFT
            | (self.special as u64) << tx::LEGACY_SPECIAL_SHIFT;
        if self.eop {
            w1 |= tx::EOP;
        }
        if self.ifcs {
            w1 |= tx::IFCS;
        }
        if self.rs {
            w1 |= tx::RS;
        }
        [self.addr, w1]
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
    pub const fn parse(word1: u64) -> Self {
        if word1 & tx::DD == 0 {
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

/// Receive write-back bits (second word: extended status 19:0, extended errors 31:20, packet
/// length 47:32, VLAN 63:48; first word: RSS type 3:0, packet type 16:4, RSS hash 63:32).
pub mod rx {
    /// STATUS.DD.
    pub const DD: u32 = 1 << 0;
    /// STATUS.EOP.
    pub const EOP: u32 = 1 << 1;
    /// Error bits 31:23: HBO (23), CE/SE/SEQ (24–26), SECERR/CXE (27–28), L4E (29), IPE (30),
    /// RXE (31). Any set makes the frame bad.
    pub const ERRORS: u32 = 0xFF80_0000;
    /// Bits no 82576 write-back defines: 2 and 8 (reserved), 12–14, 19–22. (Bit 15 is left
    /// alone: **QEMU** reports a TCP ACK there.)
    pub const UNDEFINED: u32 = (1 << 2) | (1 << 8) | (0b111 << 12) | (0b1111 << 19);
    /// PKT_LEN: bits 47:32 of the second word.
    pub const LEN_SHIFT: u32 = 32;
    /// RSS type: bits 3:0 of the first word.
    pub const RSS_TYPE_MASK: u64 = 0xF;
    /// RSS hash: bits 63:32 of the first word.
    pub const RSS_HASH_SHIFT: u32 = 32;
    /// RSS type 1: TCP/IPv4.
    pub const RSS_TCP_IPV4: u8 = 1;
    /// RSS type 2: IPv4.
    pub const RSS_IPV4: u8 = 2;
    /// RSS type 7: UDP/IPv4.
    pub const RSS_UDP_IPV4: u8 = 7;
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
    pub const fn parse(words: [u64; 2]) -> Self {
        RxWritebackRepr {
            status_error: words[1] as u32,
            len: (words[1] >> rx::LEN_SHIFT) as u16,
            vlan: (words[1] >> 48) as u16,
            rss_type: (words[0] & rx::RSS_TYPE_MASK) as u8,
            pkt_type: ((words[0] >> 4) & 0x1FFF) as u16,
            rss_hash: (words[0] >> rx::RSS_HASH_SHIFT) as u32,
        }
    }

    /// The two words (for tests that play the device).
    pub const fn emit(&self) -> [u64; 2] {
        let w0 = self.rss_type as u64 & rx::RSS_TYPE_MASK
            | ((self.pkt_type as u64 & 0x1FFF) << 4)
            | (self.rss_hash as u64) << rx::RSS_HASH_SHIFT;
        let w1 = self.status_error as u64
            | (self.len as u64) << rx::LEN_SHIFT
            | (self.vlan as u64) << 48;
        [w0, w1]
    }

    /// DD: the device is done with the descriptor.
    pub const fn done(&self) -> bool {
        self.status_error & rx::DD != 0
    }

    /// EOP: last descriptor of a frame.
    pub const fn eop(&self) -> bool {
        self.status_error & rx::EOP != 0
    }

    /// Error bits, in place.
    pub const fn errors(&self) -> u32 {
        self.status_error & rx::ERRORS
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
        match RSS_KINDS[(self.rss_type as u64 & rx::RSS_TYPE_MASK) as usize] {
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
        assert_eq!(TxWriteback::parse(sent[1] | tx::DD), TxWriteback::Done);
        // Silicon zeroes the reserved fields: also clean.
        assert_eq!(TxWriteback::parse(tx::DD), TxWriteback::Done);
        let bad = sent[1] | tx::DD | 1 << 34;
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
