//! The datagrams a hub's members exchange: an 8-byte header, then a frame or a member's name.
//!
//! ```text
//! 0..4  magic "RFWH"
//! 4     version, 1
//! 5     kind: 0 a frame, 1 hello (a member joined), 2 bye (a member left)
//! 6     flags: bit 0 set when the frame's check sequence is bad (a `CorruptMode::BadCrc` fault
//!       of the sender's wire); 0 for hello and bye
//! 7     0
//! 8..   the frame's bytes (kind 0), or the member's socket file name (kinds 1 and 2)
//! ```
//!
//! A member's name is carried in the payload, not taken from the datagram's source address,
//! because members send from unbound sockets (see `members`). Anything else — a short datagram,
//! another magic or version, an unknown kind or flag, a name that is not a member's — parses to
//! `None` and is ignored: any process allowed to write the hub directory can send to a member,
//! and a stray datagram must not reach a device or make a member send elsewhere.

use super::members;

/// Bytes before the payload.
pub(crate) const HEADER: usize = 8;
/// The longest frame a hub carries: what a 16-bit length can say, as pcap's snap length. A
/// longer frame (a virtio-net chain can be) is not sent to other members and is counted
/// dropped.
pub(crate) const MAX_FRAME: usize = 65535;

const MAGIC: [u8; 4] = *b"RFWH";
const VERSION: u8 = 1;
const KIND_FRAME: u8 = 0;
const KIND_HELLO: u8 = 1;
const KIND_BYE: u8 = 2;
const FLAG_BAD_CRC: u8 = 1;

/// One parsed datagram, borrowing its payload.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Msg<'a> {
    /// A frame a member's device sent, after the sender's wire faults.
    Frame {
        /// The frame, destination MAC first, no check sequence.
        frame: &'a [u8],
        /// False when the frame was corrupted in transit so that its check sequence is bad.
        crc_ok: bool,
    },
    /// A member joined; its socket file name.
    Hello(&'a str),
    /// A member left; its socket file name.
    Bye(&'a str),
}

impl<'a> Msg<'a> {
    /// Parses a datagram; `None` for anything that is not one of a member's.
    pub(crate) fn parse(d: &'a [u8]) -> Option<Msg<'a>> {
        let (h, payload) = d.split_at_checked(HEADER)?;
        if h[0..4] != MAGIC || h[4] != VERSION || h[7] != 0 {
            return None;
        }
        let name = || {
            let n = std::str::from_utf8(payload).ok()?;
            members::valid_name(n).then_some(n)
        };
        match (h[5], h[6]) {
            (KIND_FRAME, flags) if flags & !FLAG_BAD_CRC == 0 && payload.len() <= MAX_FRAME => {
                Some(Msg::Frame {
                    frame: payload,
                    crc_ok: flags & FLAG_BAD_CRC == 0,
                })
            }
            (KIND_HELLO, 0) => name().map(Msg::Hello),
            (KIND_BYE, 0) => name().map(Msg::Bye),
            _ => None,
        }
    }

    /// Writes the datagram into `out` (cleared first).
    pub(crate) fn emit(&self, out: &mut Vec<u8>) {
        let (kind, flags, payload) = match *self {
            Msg::Frame { frame, crc_ok } => {
                (KIND_FRAME, if crc_ok { 0 } else { FLAG_BAD_CRC }, frame)
            }
            Msg::Hello(n) => (KIND_HELLO, 0, n.as_bytes()),
            Msg::Bye(n) => (KIND_BYE, 0, n.as_bytes()),
        };
        out.clear();
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&[VERSION, kind, flags, 0]);
        out.extend_from_slice(payload);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(m: Msg<'_>) -> Vec<u8> {
        let mut out = Vec::new();
        m.emit(&mut out);
        assert_eq!(Msg::parse(&out), Some(m));
        out
    }

    #[test]
    fn frames_and_names_parse_back_as_emitted() {
        let f = [0xabu8; 60];
        let d = round_trip(Msg::Frame {
            frame: &f,
            crc_ok: true,
        });
        assert_eq!(&d[..HEADER], b"RFWH\x01\x00\x00\x00");
        let d = round_trip(Msg::Frame {
            frame: &f,
            crc_ok: false,
        });
        assert_eq!(d[6], FLAG_BAD_CRC);
        round_trip(Msg::Hello("m1-2-3.sock"));
        round_trip(Msg::Bye("m1-2-3.sock"));
        round_trip(Msg::Frame {
            frame: &[],
            crc_ok: true,
        });
    }

    #[test]
    fn stray_datagrams_parse_to_nothing() {
        let mut good = Vec::new();
        Msg::Hello("m1-2-3.sock").emit(&mut good);
        for i in 0..HEADER {
            let mut bad = good.clone();
            bad[i] ^= 0x40;
            assert_eq!(Msg::parse(&bad), None, "header byte {i} spoiled");
        }
        assert_eq!(Msg::parse(&good[..HEADER - 1]), None);
        assert_eq!(Msg::parse(&[]), None);
        // Names that would point outside the hub directory, or are not a member's.
        for name in ["../x.sock", "a/b.sock", "x", ".sock", ""] {
            let mut d = good[..HEADER].to_vec();
            d.extend_from_slice(name.as_bytes());
            assert_eq!(Msg::parse(&d), None, "{name:?}");
        }
        let mut d = good[..HEADER].to_vec();
        d.extend_from_slice(&[0xff, 0xfe]);
        assert_eq!(Msg::parse(&d), None, "not UTF-8");
        let mut long = vec![0u8; HEADER + MAX_FRAME + 1];
        long[..HEADER].copy_from_slice(b"RFWH\x01\x00\x00\x00");
        assert_eq!(Msg::parse(&long), None, "longer than a hub carries");
    }
}
