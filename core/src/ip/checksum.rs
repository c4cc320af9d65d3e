//! The Internet checksum (RFC 1071) over pieces that need not be contiguous: a datagram's
//! header is written in front of a payload that stays in the application's buffer, and a
//! received payload is read out of registered memory in chunks, so the sum is accumulated
//! ([`Sum::add`]) and finished once ([`Sum::finish`]). smoltcp's own checksum helpers are
//! private to it, and want the datagram in one slice.

use core::net::Ipv4Addr;

/// IPv4's protocol number of UDP (RFC 768).
pub const IPPROTO_UDP: u8 = 17;
/// IPv4's protocol number of ICMP (RFC 792).
pub const IPPROTO_ICMP: u8 = 1;

/// A running one's-complement sum of 16-bit big-endian words (RFC 1071 §4.1), accumulated over
/// byte pieces of any length: an odd piece leaves its last byte waiting for the next piece's
/// first, as if the pieces were one.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct Sum {
    /// The sum so far, folded lazily (a `u64` takes 2^32 words before it could overflow).
    acc: u64,
    /// The high byte of a word whose low byte is still to come.
    odd: Option<u8>,
}

impl Sum {
    /// An empty sum.
    pub const fn new() -> Self {
        Sum { acc: 0, odd: None }
    }

    /// Adds `bytes`, continuing where the previous piece ended.
    pub fn add(&mut self, mut bytes: &[u8]) -> &mut Self {
        if let (Some(hi), Some((&lo, rest))) = (self.odd, bytes.split_first()) {
            self.acc += u64::from(u16::from_be_bytes([hi, lo]));
            self.odd = None;
            bytes = rest;
        }
        let mut words = bytes.chunks_exact(2);
        for w in &mut words {
            self.acc += u64::from(u16::from_be_bytes([w[0], w[1]]));
        }
        if let [last] = words.remainder() {
            self.odd = Some(*last);
        }
        self
    }

    /// Adds one 16-bit word (at an even offset of the data summed so far).
    pub fn add_u16(&mut self, word: u16) -> &mut Self {
        self.acc += u64::from(word);
        self
    }

    /// Adds the IPv4 pseudo-header of a UDP datagram (RFC 768): source and destination
    /// address, protocol, and `len`, the UDP length (header and data).
    pub fn add_pseudo_header(
        &mut self,
        src: Ipv4Addr,
        dst: Ipv4Addr,
        protocol: u8,
        len: u16,
    ) -> &mut Self {
        self.add(&src.octets())
            .add(&dst.octets())
            .add_u16(u16::from(protocol))
            .add_u16(len)
    }

    /// The sum folded to 16 bits (a trailing odd byte is padded with a zero, RFC 1071 §4.1).
    pub fn folded(&self) -> u16 {
        let mut acc = self.acc;
        if let Some(hi) = self.odd {
            acc += u64::from(hi) << 8;
        }
        while acc > 0xffff {
            acc = (acc & 0xffff) + (acc >> 16);
        }
        acc as u16
    }

    /// The checksum to write: the complement of the folded sum.
    pub fn finish(&self) -> u16 {
        !self.folded()
    }

    /// Whether data that includes its own checksum field sums correctly (to all ones).
    pub fn verifies(&self) -> bool {
        self.folded() == 0xffff
    }
}

/// The checksum of `bytes` alone (an IPv4 header, an ICMP message).
pub fn of(bytes: &[u8]) -> u16 {
    Sum::new().add(bytes).finish()
}

/// The value a UDP checksum field carries for a computed checksum: 0 means "none" (RFC 768),
/// so a computed 0 is sent as its other one's-complement form, all ones.
pub const fn udp_field(checksum: u16) -> u16 {
    if checksum == 0 {
        0xffff
    } else {
        checksum
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc_1071_example_sums_as_the_rfc_says() {
        // RFC 1071 §3's example: the words 0001 f203 f4f5 f6f7 sum to ddf2 (after the carry).
        let bytes = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(Sum::new().add(&bytes).folded(), 0xddf2);
        assert_eq!(of(&bytes), !0xddf2);
    }

    #[test]
    fn pieces_of_odd_length_sum_as_one_piece() {
        let data: [u8; 11] = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11];
        let whole = Sum::new().add(&data).folded();
        for cut in 0..=data.len() {
            let (a, b) = data.split_at(cut);
            assert_eq!(Sum::new().add(a).add(b).folded(), whole, "cut at {cut}");
        }
        let mut three = Sum::new();
        three.add(&data[..3]).add(&data[3..4]).add(&data[4..]);
        assert_eq!(three.folded(), whole);
        // A trailing odd byte is the high byte of a word padded with zero.
        assert_eq!(Sum::new().add(&[0xab]).folded(), 0xab00);
    }

    #[test]
    fn a_header_with_its_checksum_verifies() {
        // A widely used worked example of an IPv4 header (RFC 791 layout), checksum b861.
        let mut h = [
            0x45, 0, 0, 0x73, 0, 0, 0x40, 0, 0x40, 0x11, 0, 0, 0xc0, 0xa8, 0, 1, 0xc0, 0xa8, 0,
            0xc7,
        ];
        let c = of(&h);
        assert_eq!(c, 0xb861);
        h[10..12].copy_from_slice(&c.to_be_bytes());
        assert!(Sum::new().add(&h).verifies());
        h[15] ^= 1;
        assert!(!Sum::new().add(&h).verifies());
    }

    #[test]
    fn a_computed_zero_udp_checksum_is_sent_as_all_ones() {
        assert_eq!(udp_field(0), 0xffff);
        assert_eq!(udp_field(0x1234), 0x1234);
    }
}
