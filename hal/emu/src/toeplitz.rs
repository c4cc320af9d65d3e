//! The Toeplitz hash of receive-side scaling (Microsoft RSS; 82576 datasheet section 7.1.2.8,
//! "RSS hash function"), as QEMU's `net_toeplitz` computes it.
//!
//! The 40-byte key is a 320-bit big-endian bit string. For every set bit `i` of the input (most
//! significant bit of byte 0 first) the 32-bit window of the key starting at bit `i` is XORed into
//! the result. Inputs are in network byte order: IPv4 source, IPv4 destination, then (for TCP/UDP)
//! source port and destination port.

/// Length of an RSS key in bytes (RSSRK0..9 hold 40 bytes).
pub const KEY_LEN: usize = 40;

/// Toeplitz hash of `input` under `key`. Inputs longer than the key allows (more than 36 bytes)
/// use only the first 36, the longest input a 40-byte key has windows for; that covers IPv6 with
/// ports, the longest tuple RSS hashes.
pub fn hash(key: &[u8; KEY_LEN], input: &[u8]) -> u32 {
    let mut result = 0u32;
    // The window holds key bits [i, i+32) in its high half and the next 32 bits below them.
    let mut window = u64::from_be_bytes([
        key[0], key[1], key[2], key[3], key[4], key[5], key[6], key[7],
    ]);
    for (next, &byte) in (8usize..).zip(input.iter().take(KEY_LEN - 4)) {
        for bit in 0..8 {
            if byte & (0x80 >> bit) != 0 {
                result ^= (window >> 32) as u32;
            }
            window <<= 1;
        }
        // After 8 shifts the low 8 bits are free for the next key byte.
        window |= u64::from(key.get(next).copied().unwrap_or(0));
    }
    result
}

/// Bytes of the IPv4 2-tuple input: source address then destination address.
pub fn ipv4_input(src: [u8; 4], dst: [u8; 4]) -> [u8; 8] {
    let mut b = [0u8; 8];
    b[..4].copy_from_slice(&src);
    b[4..].copy_from_slice(&dst);
    b
}

/// Bytes of the IPv4 4-tuple input: addresses, then source port and destination port.
pub fn ipv4_ports_input(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16) -> [u8; 12] {
    let mut b = [0u8; 12];
    b[..8].copy_from_slice(&ipv4_input(src, dst));
    b[8..10].copy_from_slice(&sport.to_be_bytes());
    b[10..].copy_from_slice(&dport.to_be_bytes());
    b
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The key of Microsoft's "Verifying the RSS Hash Calculation".
    pub(crate) const MS_KEY: [u8; 40] = [
        0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f,
        0xb0, 0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30,
        0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
    ];

    /// (source, source port, destination, destination port, IPv4 hash, IPv4-with-ports hash).
    pub(crate) type Vector = ([u8; 4], u16, [u8; 4], u16, u32, u32);
    pub(crate) const VECTORS: [Vector; 5] = [
        (
            [66, 9, 149, 187],
            2794,
            [161, 142, 100, 80],
            1766,
            0x323e_8fc2,
            0x51cc_c178,
        ),
        (
            [199, 92, 111, 2],
            14230,
            [65, 69, 140, 83],
            4739,
            0xd718_262a,
            0xc626_b0ea,
        ),
        (
            [24, 19, 198, 95],
            12898,
            [12, 22, 207, 184],
            38024,
            0xd2d0_a5de,
            0x5c2b_394a,
        ),
        (
            [38, 27, 205, 30],
            48228,
            [209, 142, 163, 6],
            2217,
            0x8298_9176,
            0xafc7_327f,
        ),
        (
            [153, 39, 163, 191],
            44251,
            [202, 188, 127, 2],
            1303,
            0x5d18_09c5,
            0x10e8_28a2,
        ),
    ];

    #[test]
    fn ipv4_hashes_match_microsoft_verification_vectors() {
        for (src, _, dst, _, want, _) in VECTORS {
            assert_eq!(
                hash(&MS_KEY, &ipv4_input(src, dst)),
                want,
                "{src:?} -> {dst:?}"
            );
        }
    }

    #[test]
    fn ipv4_with_ports_hashes_match_microsoft_verification_vectors() {
        for (src, sp, dst, dp, _, want) in VECTORS {
            assert_eq!(hash(&MS_KEY, &ipv4_ports_input(src, dst, sp, dp)), want);
        }
    }

    #[test]
    fn empty_input_hashes_to_zero() {
        assert_eq!(hash(&MS_KEY, &[]), 0);
    }
}
