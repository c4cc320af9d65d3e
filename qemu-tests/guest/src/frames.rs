//! Frames the tests send, and the Toeplitz hash to check RSS against (computed here, apart
//! from the driver and the device).

use ringfab_hal::MacAddr;

/// The IEEE "local experimental" EtherType.
pub(crate) const ETHERTYPE_EXPERIMENTAL: [u8; 2] = [0x88, 0xB5];

/// Frame `seq` from `src` to `dst`: `len` bytes (≥ 22), the EtherType above, `seq` as the first
/// 8 payload bytes, then a pattern that differs per sequence number.
pub(crate) fn frame(dst: MacAddr, src: MacAddr, seq: u64, len: usize) -> Vec<u8> {
    let mut f = Vec::with_capacity(len);
    f.extend_from_slice(&dst.0);
    f.extend_from_slice(&src.0);
    f.extend_from_slice(&ETHERTYPE_EXPERIMENTAL);
    f.extend_from_slice(&seq.to_le_bytes());
    let mut x = seq as u8;
    while f.len() < len {
        x = x.wrapping_mul(13).wrapping_add(7);
        f.push(x);
    }
    f.truncate(len);
    f
}

/// IPv4 addresses and UDP ports of one flow.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(crate) struct Flow {
    pub(crate) src: [u8; 4],
    pub(crate) dst: [u8; 4],
    pub(crate) sport: u16,
    pub(crate) dport: u16,
}

impl Flow {
    /// The bytes the IPv4/UDP RSS hash covers: source and destination address, then ports.
    pub(crate) fn hash_input(&self) -> [u8; 12] {
        let mut b = [0u8; 12];
        b[..4].copy_from_slice(&self.src);
        b[4..8].copy_from_slice(&self.dst);
        b[8..10].copy_from_slice(&self.sport.to_be_bytes());
        b[10..].copy_from_slice(&self.dport.to_be_bytes());
        b
    }

    /// The flow of a frame built by [`udp_frame`].
    pub(crate) fn of(f: &[u8]) -> Option<Flow> {
        let be16 = |at: usize| Some(u16::from_be_bytes([*f.get(at)?, *f.get(at + 1)?]));
        Some(Flow {
            src: f.get(26..30)?.try_into().ok()?,
            dst: f.get(30..34)?.try_into().ok()?,
            sport: be16(34)?,
            dport: be16(36)?,
        })
    }
}

/// An Ethernet/IPv4/UDP frame of `flow` carrying `payload` (IPv4 checksum filled in, UDP
/// checksum 0: "none").
pub(crate) fn udp_frame(dst: MacAddr, src: MacAddr, flow: Flow, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(42 + payload.len());
    f.extend_from_slice(&dst.0);
    f.extend_from_slice(&src.0);
    f.extend_from_slice(&[0x08, 0x00]);
    let udp_len = 8 + payload.len() as u16;
    f.extend_from_slice(&[0x45, 0]);
    f.extend_from_slice(&(20 + udp_len).to_be_bytes());
    f.extend_from_slice(&[0, 1, 0x40, 0, 64, 17, 0, 0]);
    f.extend_from_slice(&flow.src);
    f.extend_from_slice(&flow.dst);
    f.extend_from_slice(&flow.sport.to_be_bytes());
    f.extend_from_slice(&flow.dport.to_be_bytes());
    f.extend_from_slice(&udp_len.to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(payload);
    let mut sum: u32 = f[14..34]
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
        .sum();
    while sum > 0xFFFF {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    f[24..26].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    f
}

/// Microsoft's RSS verification key, which the RSS test programs.
pub(crate) const RSS_KEY: [u8; 40] = [
    0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0,
    0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30, 0xf2, 0x0c,
    0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
];

/// The Toeplitz hash of `input` under `key`: for every set bit of the input (most significant
/// first), XOR in the 32 key bits that start at that bit's position.
pub(crate) fn toeplitz(key: &[u8], input: &[u8]) -> u32 {
    let key_bit = |i: usize| {
        key.get(i / 8)
            .map_or(0, |b| u32::from(b >> (7 - i % 8)) & 1)
    };
    let mut window = (0..32).fold(0u32, |w, i| (w << 1) | key_bit(i));
    let mut hash = 0;
    for (n, byte) in input.iter().enumerate() {
        for b in 0..8 {
            if byte & (0x80 >> b) != 0 {
                hash ^= window;
            }
            window = (window << 1) | key_bit(n * 8 + b + 32);
        }
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toeplitz_matches_microsofts_verification_suite() {
        // "Verifying the RSS hash calculation", IPv4 with ports, first two rows.
        let flow = Flow {
            src: [66, 9, 149, 187],
            dst: [161, 142, 100, 80],
            sport: 2794,
            dport: 1766,
        };
        assert_eq!(toeplitz(&RSS_KEY, &flow.hash_input()), 0x51cc_c178);
        assert_eq!(toeplitz(&RSS_KEY, &flow.hash_input()[..8]), 0x323e_8fc2);
        let flow = Flow {
            src: [199, 92, 111, 2],
            dst: [65, 69, 140, 83],
            sport: 14230,
            dport: 4739,
        };
        assert_eq!(toeplitz(&RSS_KEY, &flow.hash_input()), 0xc626_b0ea);
    }

    #[test]
    fn frames_carry_their_sequence_number_and_length() {
        let a = MacAddr([2, 0, 0, 0, 0, 1]);
        let b = MacAddr([2, 0, 0, 0, 0, 2]);
        let f = frame(b, a, 0x0102, 60);
        assert_eq!(f.len(), 60);
        assert_eq!(&f[..6], &b.0);
        assert_eq!(&f[12..16], &[0x88, 0xB5, 0x02, 0x01]);
        assert_ne!(frame(b, a, 3, 60), frame(b, a, 4, 60));
    }

    #[test]
    fn udp_frames_parse_back_to_their_flow_with_a_valid_ip_checksum() {
        let flow = Flow {
            src: [10, 0, 0, 1],
            dst: [10, 0, 0, 2],
            sport: 1000,
            dport: 4791,
        };
        let f = udp_frame(MacAddr([2; 6]), MacAddr([4; 6]), flow, b"hello");
        assert_eq!(Flow::of(&f), Some(flow));
        let sum: u32 = f[14..34]
            .chunks(2)
            .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
            .sum();
        assert_eq!((sum & 0xFFFF) + (sum >> 16), 0xFFFF, "checksum verifies");
        assert_eq!(Flow::of(&f[..30]), None);
    }
}
