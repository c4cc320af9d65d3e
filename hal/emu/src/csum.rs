//! The checksum work the models' DMA engines share: checking a received frame's IPv4 header
//! and TCP/UDP checksums, as the 82576's and 82574's receive checksum offload (RXCSUM.IPOFLD,
//! TUOFLD) and a virtio-net backend that sets `DATA_VALID` do, and inserting a transmitted
//! frame's checksum in the partial-checksum model all three devices' transmit offloads use
//! (Intel context descriptors, virtio `NEEDS_CSUM`).
//!
//! Never panics: every offset comes from the frame or from a descriptor the driver wrote, so
//! anything out of range means "not checked" or "not inserted".

/// The ones' complement sum of `data` (big-endian 16-bit words, an odd byte padded), added to
/// `sum` and not fully folded (the result is congruent to the sum modulo 0xFFFF, which is all
/// [`fold`] needs).
///
/// Sums 32-bit words into a 64-bit accumulator and folds once at the end (RFC 1071 §2: the sum
/// may be computed over wider words and folded, since 2^16 ≡ 1 modulo 0xFFFF): the models
/// check and insert the checksum of every frame they carry, so this is on every emulated
/// plain-UDP frame's path, and a word at a time made it most of the model's cost.
pub(crate) fn ones_sum(data: &[u8], sum: u32) -> u32 {
    let mut acc = u64::from(sum);
    let mut words = data.chunks_exact(4);
    for w in &mut words {
        acc += u64::from(u32::from_be_bytes([w[0], w[1], w[2], w[3]]));
    }
    let mut tail = [0u8; 4];
    tail[..words.remainder().len()].copy_from_slice(words.remainder());
    acc += u64::from(u32::from_be_bytes(tail));
    while acc > u64::from(u32::MAX) {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u32
}

/// `sum` folded to 16 bits.
pub(crate) fn fold(mut sum: u32) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// Whether the IPv4 header at `l3` has a good checksum (`None` if it cannot be checked).
pub(crate) fn ipv4_ok(f: &[u8], l3: usize) -> Option<bool> {
    let ihl = usize::from(f.get(l3)? & 0xf) * 4;
    if ihl < 20 {
        return None;
    }
    let hdr = f.get(l3..l3 + ihl)?;
    Some(fold(ones_sum(hdr, 0)) == 0xffff)
}

/// Whether the TCP/UDP checksum of an unfragmented IPv4 packet at `l3` is good (`None` if it
/// cannot be checked: the IP total length reaches past the frame, or a UDP checksum of zero,
/// "none computed" — QEMU `net_rx_pkt_validate_l4_csum`).
pub(crate) fn l4_ok(f: &[u8], l3: usize, udp: bool) -> Option<bool> {
    let ip = f.get(l3..l3 + 20)?;
    let ihl = usize::from(ip[0] & 0xf) * 4;
    let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
    let seg = f.get(l3 + ihl..l3 + total.max(ihl))?;
    if udp && seg.get(6..8)? == [0, 0] {
        return None;
    }
    // RFC 768's pseudo-header: source, destination, zero, protocol, length.
    let mut pseudo = [0u8; 12];
    pseudo[..8].copy_from_slice(&ip[12..20]);
    pseudo[9] = ip[9];
    pseudo[10..].copy_from_slice(&(seg.len() as u16).to_be_bytes());
    Some(fold(ones_sum(seg, ones_sum(&pseudo, 0))) == 0xffff)
}

/// Completes a partial checksum as the devices' transmit offloads do: sums `frame[start..end]`
/// — the checksum field at `field` included, holding the pseudo-header's sum the driver put
/// there — and stores the complement at `field`, 0 as 0xFFFF (the same value in one's
/// complement, and UDP's "checksum present"). `end` is the frame's length unless a device
/// bounds the sum (82574 TUCSE). Returns `false` and changes nothing if the field or the range
/// is not inside the frame.
///
/// QEMU's models (`net_tx_pkt_do_sw_csum`) instead zero the field and add a pseudo-header of
/// their own parsing of the IP header; for a driver that stored the pseudo-header's sum, as
/// the partial model asks, both give the same checksum.
pub(crate) fn insert(frame: &mut [u8], start: usize, field: usize, end: usize) -> bool {
    let end = end.min(frame.len());
    if start > end || field < start || field + 2 > end {
        return false;
    }
    let sum = !fold(ones_sum(&frame[start..end], 0));
    let sum = if sum == 0 { 0xffff } else { sum };
    frame[field..field + 2].copy_from_slice(&sum.to_be_bytes());
    true
}

/// Makes the TCP (`udp` false) or UDP checksum of the unfragmented IPv4 packet at `l3` partial,
/// as a sender on the same host leaves it for its NIC (Linux's `CHECKSUM_PARTIAL`) and a
/// virtio-net device hands it on with `NEEDS_CSUM`: the field gets the pseudo-header's sum,
/// folded and not complemented (virtio 1.2 §5.1.6.4.1: "the device MUST set the packet
/// checksum stored in the receive buffer to the TCP/UDP pseudo header"). Returns `csum_start`
/// and `csum_offset` — the L4 header's place in the frame and the field's in the header, so
/// that [`insert`] over `start..` completes it — or `None`, changing nothing, when the IPv4
/// header or the segment does not hold what that needs.
pub(crate) fn make_partial(f: &mut [u8], l3: usize, udp: bool) -> Option<(u16, u16)> {
    let ip = f.get(l3..l3 + 20)?;
    let ihl = usize::from(ip[0] & 0xf) * 4;
    let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
    let field = if udp { 6 } else { 16 };
    if ihl < 20 || total < ihl + field + 2 || f.len() < l3 + total {
        return None;
    }
    // RFC 768's pseudo-header, as `l4_ok` builds it: the segment's length from the IPv4 header.
    let mut pseudo = [0u8; 12];
    pseudo[..8].copy_from_slice(&ip[12..20]);
    pseudo[9] = ip[9];
    pseudo[10..].copy_from_slice(&((total - ihl) as u16).to_be_bytes());
    let sum = fold(ones_sum(&pseudo, 0));
    let start = l3 + ihl;
    f[start + field..start + field + 2].copy_from_slice(&sum.to_be_bytes());
    Some((u16::try_from(start).ok()?, field as u16))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An Ethernet/IPv4/UDP frame with a right IPv4 header checksum and the UDP checksum
    /// field holding the pseudo-header's sum (the partial model's starting point).
    fn partial_udp(payload: &[u8]) -> Vec<u8> {
        let mut f = vec![0u8; 14];
        f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        let total = (20 + 8 + payload.len()) as u16;
        let mut ip = [0u8; 20];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&total.to_be_bytes());
        ip[8] = 64;
        ip[9] = 17;
        ip[12..16].copy_from_slice(&[10, 0, 0, 1]);
        ip[16..20].copy_from_slice(&[10, 0, 0, 2]);
        let c = !fold(ones_sum(&ip, 0));
        ip[10..12].copy_from_slice(&c.to_be_bytes());
        f.extend_from_slice(&ip);
        let ulen = (8 + payload.len()) as u16;
        let mut pseudo = Vec::new();
        pseudo.extend_from_slice(&ip[12..20]);
        pseudo.extend_from_slice(&[0, 17]);
        pseudo.extend_from_slice(&ulen.to_be_bytes());
        let seed = fold(ones_sum(&pseudo, 0));
        f.extend_from_slice(&1234u16.to_be_bytes());
        f.extend_from_slice(&5678u16.to_be_bytes());
        f.extend_from_slice(&ulen.to_be_bytes());
        f.extend_from_slice(&seed.to_be_bytes());
        f.extend_from_slice(payload);
        f
    }

    #[test]
    fn inserting_a_partial_udp_checksum_gives_one_the_receive_check_finds_right() {
        for payload in [&b""[..], b"odd", b"even", &[0xffu8; 101][..]] {
            let mut f = partial_udp(payload);
            let len = f.len();
            assert!(insert(&mut f, 34, 40, len));
            assert_eq!(ipv4_ok(&f, 14), Some(true));
            assert_eq!(l4_ok(&f, 14, true), Some(true), "payload {payload:?}");
            f[len - 1] ^= 1;
            if !payload.is_empty() {
                assert_eq!(l4_ok(&f, 14, true), Some(false));
            }
        }
    }

    /// RFC 1071 §1: "adjacent octets to be checksummed are paired to form 16-bit integers, and
    /// the 1's complement sum of these 16-bit integers is formed" (an odd octet padded with
    /// zero). The wide-word sum must fold to the same value for every length and start.
    #[test]
    fn the_wide_sum_folds_to_the_sum_of_16_bit_words() {
        fn by_words(data: &[u8], mut sum: u32) -> u16 {
            for w in data.chunks(2) {
                sum += u32::from(w[0]) << 8 | w.get(1).map_or(0, |&b| u32::from(b));
                sum = (sum & 0xffff) + (sum >> 16);
            }
            fold(sum)
        }
        let data: Vec<u8> = (0..1600u32)
            .map(|i| (i * 7919 % 251) as u8 | 0x80)
            .collect();
        for len in (0..64).chain([1471, 1472, 1473, 1599, 1600]) {
            for seed in [0, 0xffff, 0x1_2345] {
                let d = &data[..len];
                assert_eq!(fold(ones_sum(d, seed)), by_words(d, seed), "len {len}");
            }
        }
        assert_eq!(fold(ones_sum(&[0xff; 1600], 0)), 0xffff);
    }

    #[test]
    fn a_checksum_made_partial_is_completed_by_an_insertion_at_the_offsets_it_gives() {
        for payload in [&b""[..], b"odd", &[0x5au8; 300][..]] {
            let mut whole = partial_udp(payload);
            let len = whole.len();
            assert!(insert(&mut whole, 34, 40, len));
            let mut f = whole.clone();
            assert_eq!(make_partial(&mut f, 14, true), Some((34, 6)));
            assert_eq!(
                l4_ok(&f, 14, true),
                Some(false),
                "the field is only the pseudo-header's"
            );
            assert!(insert(&mut f, 34, 40, len));
            assert_eq!(f, whole, "payload {payload:?}");
        }
        // A total length past the frame, or one too short for the field: nothing changed.
        let mut f = partial_udp(b"abc");
        f[16..18].copy_from_slice(&200u16.to_be_bytes());
        let before = f.clone();
        assert_eq!(make_partial(&mut f, 14, true), None);
        assert_eq!(make_partial(&mut f, 14, false), None);
        assert_eq!(f, before);
    }

    #[test]
    fn a_zero_udp_checksum_is_not_checked_and_an_insertion_outside_the_frame_changes_nothing() {
        let mut f = partial_udp(b"abc");
        f[40..42].copy_from_slice(&[0, 0]);
        assert_eq!(l4_ok(&f, 14, true), None);
        let before = f.clone();
        let len = f.len();
        assert!(!insert(&mut f, 34, len - 1, len));
        assert!(!insert(&mut f, 50, 40, len));
        assert_eq!(f, before);
    }
}
