//! ringfab's frame format on the wire: Ethernet with its own EtherType and a 16-byte header.
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |   Ethernet destination (6) ... source (6) ... EtherType 0x88B5 |  14 bytes
//! +---------------+---------------+-------------------------------+
//! |  version (1)  |    flags      |   destination context         |
//! +---------------+---------------+-------------------------------+
//! |      source context           |   payload length              |
//! +---------------+---------------+-------------------------------+
//! |              remote CQ data (64 bits), big-endian             |
//! +---------------------------------------------------------------+
//! |  payload ...                                                  |
//! ```
//!
//! * EtherType `0x88B5` is IEEE 802's *Local Experimental EtherType 1* (IEEE Std 802-2014,
//!   §9.2.2), meant for exactly this: a protocol private to one network. A site that already uses
//!   it can rebuild with another value.
//! * *Contexts* name endpoints on a NIC: the destination context picks the receiving endpoint
//!   (or receive context), the source context lets the receiver name the sender
//!   ([`EpAddr`](crate::av::EpAddr): source MAC + source context).
//! * The payload length is explicit because Ethernet pads short frames to 60 bytes: the receiver
//!   must not report the padding as data.
//! * Flag bit 0 says the remote CQ data field is valid (`FI_REMOTE_CQ_DATA`).
//!
//! The module follows the Packet/Repr pattern (smoltcp): [`Header`] is the parsed form with
//! [`Header::parse`] (which checks everything a peer could get wrong) and [`Header::emit`].

use crate::hal::MacAddr;

/// ringfab's EtherType (IEEE 802 Local Experimental EtherType 1).
pub const ETHERTYPE: u16 = 0x88B5;

/// The header version this code writes and accepts.
pub const VERSION: u8 = 1;

/// Destination context meaning "every endpoint on the NIC" (broadcast and multicast frames).
pub const ANY_CTX: u16 = 0xffff;

/// Bytes of the Ethernet header.
pub const ETH_LEN: usize = 14;

/// Bytes of a whole header, Ethernet included: where the payload starts in a frame.
pub const HEADER_LEN: usize = ETH_LEN + 16;

/// Flag: the remote CQ data field is valid.
const FLAG_CQ_DATA: u8 = 1 << 0;
/// Flags this version defines; a frame with any other bit set is refused.
const FLAGS_KNOWN: u8 = FLAG_CQ_DATA;

mod field {
    use core::ops::Range;
    pub(super) const DST: Range<usize> = 0..6;
    pub(super) const SRC: Range<usize> = 6..12;
    pub(super) const ETHERTYPE: Range<usize> = 12..14;
    pub(super) const VERSION: usize = 14;
    pub(super) const FLAGS: usize = 15;
    pub(super) const DST_CTX: Range<usize> = 16..18;
    pub(super) const SRC_CTX: Range<usize> = 18..20;
    pub(super) const LEN: Range<usize> = 20..22;
    pub(super) const DATA: Range<usize> = 22..30;
}

/// Why a received frame is not a ringfab frame for this endpoint.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Malformed {
    /// Shorter than the header.
    Short,
    /// Another protocol's EtherType.
    EtherType,
    /// A header version this code does not speak.
    Version,
    /// Flag bits this version does not define.
    Flags,
    /// The payload length claims more bytes than the frame has.
    Length,
}

/// A parsed ringfab header.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Header {
    /// Ethernet destination.
    pub dst: MacAddr,
    /// Ethernet source.
    pub src: MacAddr,
    /// Receiving context.
    pub dst_ctx: u16,
    /// Sending context.
    pub src_ctx: u16,
    /// Payload bytes after the header.
    pub payload_len: u16,
    /// Remote CQ data, if the sender attached any.
    pub data: Option<u64>,
}

impl Header {
    /// Parses the header at the start of a frame of `frame_len` bytes (FCS excluded), of
    /// which `bytes` holds at least the first [`HEADER_LEN`].
    ///
    /// # Errors
    /// Every way a frame can fail to be a well-formed ringfab frame ([`Malformed`]).
    pub fn parse(bytes: &[u8], frame_len: usize) -> Result<Header, Malformed> {
        if frame_len < HEADER_LEN || bytes.len() < HEADER_LEN {
            return Err(Malformed::Short);
        }
        let be16 =
            |r: core::ops::Range<usize>| u16::from_be_bytes([bytes[r.start], bytes[r.start + 1]]);
        if be16(field::ETHERTYPE) != ETHERTYPE {
            return Err(Malformed::EtherType);
        }
        if bytes[field::VERSION] != VERSION {
            return Err(Malformed::Version);
        }
        let flags = bytes[field::FLAGS];
        if flags & !FLAGS_KNOWN != 0 {
            return Err(Malformed::Flags);
        }
        let payload_len = be16(field::LEN);
        if usize::from(payload_len) > frame_len - HEADER_LEN {
            return Err(Malformed::Length);
        }
        let mac = |r: core::ops::Range<usize>| {
            let mut m = [0; 6];
            m.copy_from_slice(&bytes[r]);
            MacAddr(m)
        };
        let mut data = [0; 8];
        data.copy_from_slice(&bytes[field::DATA]);
        Ok(Header {
            dst: mac(field::DST),
            src: mac(field::SRC),
            dst_ctx: be16(field::DST_CTX),
            src_ctx: be16(field::SRC_CTX),
            payload_len,
            data: (flags & FLAG_CQ_DATA != 0).then(|| u64::from_be_bytes(data)),
        })
    }

    /// Writes the header into `out`.
    pub fn emit(&self, out: &mut [u8; HEADER_LEN]) {
        out[field::DST].copy_from_slice(&self.dst.0);
        out[field::SRC].copy_from_slice(&self.src.0);
        out[field::ETHERTYPE].copy_from_slice(&ETHERTYPE.to_be_bytes());
        out[field::VERSION] = VERSION;
        out[field::FLAGS] = if self.data.is_some() { FLAG_CQ_DATA } else { 0 };
        out[field::DST_CTX].copy_from_slice(&self.dst_ctx.to_be_bytes());
        out[field::SRC_CTX].copy_from_slice(&self.src_ctx.to_be_bytes());
        out[field::LEN].copy_from_slice(&self.payload_len.to_be_bytes());
        out[field::DATA].copy_from_slice(&self.data.unwrap_or(0).to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Header {
        Header {
            dst: MacAddr([0x02, 0, 0, 0, 0, 0x0b]),
            src: MacAddr([0x02, 0, 0, 0, 0, 0x0a]),
            dst_ctx: 3,
            src_ctx: 0x0102,
            payload_len: 5,
            data: Some(0x1122_3344_5566_7788),
        }
    }

    #[test]
    fn emits_the_documented_byte_layout() {
        let mut b = [0; HEADER_LEN];
        sample().emit(&mut b);
        assert_eq!(
            b,
            [
                0x02, 0, 0, 0, 0, 0x0b, // destination MAC
                0x02, 0, 0, 0, 0, 0x0a, // source MAC
                0x88, 0xb5, // EtherType
                1, 1, // version, flags (CQ data)
                0, 3, // destination context
                1, 2, // source context
                0, 5, // payload length
                0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, // remote CQ data
            ]
        );
    }

    #[test]
    fn parse_inverts_emit_with_and_without_cq_data() {
        for h in [
            sample(),
            Header {
                data: None,
                ..sample()
            },
        ] {
            let mut b = [0; HEADER_LEN];
            h.emit(&mut b);
            assert_eq!(Header::parse(&b, HEADER_LEN + 5), Ok(h));
        }
    }

    #[test]
    fn parse_refuses_every_malformation() {
        let mut good = [0; HEADER_LEN];
        sample().emit(&mut good);
        assert_eq!(Header::parse(&good[..29], 29), Err(Malformed::Short));
        assert_eq!(Header::parse(&good, 29), Err(Malformed::Short));
        let mut b = good;
        b[13] = 0x00;
        assert_eq!(Header::parse(&b, 60), Err(Malformed::EtherType));
        let mut b = good;
        b[14] = 2;
        assert_eq!(Header::parse(&b, 60), Err(Malformed::Version));
        let mut b = good;
        b[15] = 0x80;
        assert_eq!(Header::parse(&b, 60), Err(Malformed::Flags));
        // Payload length 5 in a frame with only 4 payload bytes.
        assert_eq!(Header::parse(&good, HEADER_LEN + 4), Err(Malformed::Length));
        // Ethernet padding after the payload is fine.
        assert!(Header::parse(&good, 60).is_ok());
    }
}
