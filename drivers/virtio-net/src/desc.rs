//! Byte layouts of the split virtqueue (virtio 1.2 §2.7) and of the network header (§5.1.6),
//! with the offsets the rings use and tests against the specification's layouts.
//!
//! Everything is little-endian (§2.7, "le"). Descriptors are written as two `u64` words; the
//! rings' 16-bit fields through the hal's 16-bit DMA accessors.

/// `struct virtq_desc` flags (§2.7.5).
pub mod flags {
    /// The buffer continues via `next`.
    pub const NEXT: u16 = 1;
    /// Device-writable buffer (otherwise device-readable).
    pub const WRITE: u16 = 2;
    /// The buffer holds a table of indirect descriptors (§2.7.5.3).
    pub const INDIRECT: u16 = 4;
}

/// Bytes per `struct virtq_desc`.
pub const DESC_LEN: usize = 16;
/// Bytes per `struct virtq_used_elem`.
pub const USED_ELEM_LEN: usize = 8;
/// `struct virtio_net_hdr` with `VIRTIO_F_VERSION_1`: 12 bytes (§5.1.6: `num_buffers` is always
/// present in 1.x).
pub const NET_HDR_LEN: usize = 12;

/// `VIRTQ_AVAIL_F_NO_INTERRUPT` (§2.7.6).
pub const AVAIL_F_NO_INTERRUPT: u16 = 1;
/// `VIRTQ_USED_F_NO_NOTIFY` (§2.7.8).
pub const USED_F_NO_NOTIFY: u16 = 1;

/// One `struct virtq_desc`: `le64 addr; le32 len; le16 flags; le16 next;`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Desc {
    /// Device address of the buffer.
    pub addr: u64,
    /// Length in bytes.
    pub len: u32,
    /// [`flags`] bits.
    pub flags: u16,
    /// Next descriptor of the chain when `flags` has [`flags::NEXT`].
    pub next: u16,
}

impl Desc {
    /// The two little-endian `u64` words of the descriptor.
    pub const fn emit(&self) -> [u64; 2] {
        [
            self.addr,
            self.len as u64 | (self.flags as u64) << 32 | (self.next as u64) << 48,
        ]
    }

    /// The descriptor in two words (what a test playing the device reads).
    pub const fn parse(words: [u64; 2]) -> Desc {
        Desc {
            addr: words[0],
            len: words[1] as u32,
            flags: (words[1] >> 32) as u16,
            next: (words[1] >> 48) as u16,
        }
    }
}

/// Where each part of one queue lives in its DMA region, for a queue of `n` entries (§2.7:
/// descriptor table aligned 16, driver area 2, device area 4), followed by the driver's own
/// areas: an indirect table and a network header per descriptor id.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Layout {
    /// Entries.
    pub n: usize,
    /// Descriptor table (`16 n` bytes).
    pub desc: usize,
    /// Driver area, `struct virtq_avail`: flags, idx, `ring[n]`, used_event.
    pub avail: usize,
    /// Device area, `struct virtq_used`: flags, idx, `ring[n]`, avail_event.
    pub used: usize,
    /// Indirect tables, [`INDIRECT_ENTRIES`] descriptors per id.
    pub indirect: usize,
    /// Network headers, [`HDR_STRIDE`] bytes per id.
    pub hdr: usize,
    /// Total bytes.
    pub len: usize,
}

/// Descriptors in each id's indirect table: the header plus up to seven buffers.
pub const INDIRECT_ENTRIES: usize = 8;
/// Bytes reserved per id for its network header (12 used).
pub const HDR_STRIDE: usize = 16;

impl Layout {
    /// The layout of a queue of `n` entries, a power of two (§2.7: a split virtqueue's
    /// size is): ring positions then wrap with a mask, not a division.
    pub const fn new(n: usize) -> Layout {
        assert!(n.is_power_of_two(), "virtqueue size must be a power of two");
        let desc = 0;
        let avail = desc + DESC_LEN * n;
        let used = (avail + 6 + 2 * n).next_multiple_of(4);
        let indirect = (used + 6 + USED_ELEM_LEN * n).next_multiple_of(16);
        let hdr = indirect + INDIRECT_ENTRIES * DESC_LEN * n;
        Layout {
            n,
            desc,
            avail,
            used,
            indirect,
            hdr,
            len: hdr + HDR_STRIDE * n,
        }
    }

    /// `avail.idx`.
    pub const fn avail_idx(&self) -> usize {
        self.avail + 2
    }

    /// `avail.ring[i % n]`.
    pub const fn avail_ring(&self, i: usize) -> usize {
        self.avail + 4 + 2 * (i & (self.n - 1))
    }

    /// `avail.used_event` (§2.7.10).
    pub const fn used_event(&self) -> usize {
        self.avail + 4 + 2 * self.n
    }

    /// `used.idx`.
    pub const fn used_idx(&self) -> usize {
        self.used + 2
    }

    /// `used.ring[i % n]`: `le32 id; le32 len;`.
    pub const fn used_ring(&self, i: usize) -> usize {
        self.used + 4 + USED_ELEM_LEN * (i & (self.n - 1))
    }

    /// `used.avail_event` (§2.7.10).
    pub const fn avail_event(&self) -> usize {
        self.used + 4 + USED_ELEM_LEN * self.n
    }

    /// Ring descriptor `id % n`.
    pub const fn ring_desc(&self, id: usize) -> usize {
        self.desc + DESC_LEN * (id & (self.n - 1))
    }

    /// Descriptor `k % 8` of id `id % n`'s indirect table. (Ids wrap as ring positions do:
    /// whatever the id, the offset lies inside the table area.)
    pub const fn indirect_desc(&self, id: usize, k: usize) -> usize {
        self.indirect
            + ((id & (self.n - 1)) * INDIRECT_ENTRIES + (k & (INDIRECT_ENTRIES - 1))) * DESC_LEN
    }

    /// Id `id % n`'s network header.
    pub const fn hdr_of(&self, id: usize) -> usize {
        self.hdr + (id & (self.n - 1)) * HDR_STRIDE
    }
}

/// `vring_need_event` (§2.7.10): whether moving the index from `old` to `new` passes `event`.
#[inline]
pub const fn need_event(event: u16, new: u16, old: u16) -> bool {
    new.wrapping_sub(event).wrapping_sub(1) < new.wrapping_sub(old)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_descriptor_is_addr_len_flags_next_little_endian() {
        let d = Desc {
            addr: 0x1122_3344_5566_7788,
            len: 0x99aa_bbcc,
            flags: flags::NEXT | flags::WRITE,
            next: 0x0102,
        };
        let w = d.emit();
        let mut bytes = [0u8; 16];
        bytes[..8].copy_from_slice(&w[0].to_le_bytes());
        bytes[8..].copy_from_slice(&w[1].to_le_bytes());
        assert_eq!(
            bytes,
            [
                0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, 0xcc, 0xbb, 0xaa, 0x99, 0x03, 0x00,
                0x02, 0x01
            ]
        );
        assert_eq!(Desc::parse(w), d);
    }

    #[test]
    fn the_layout_aligns_each_area_as_the_specification_asks() {
        // §2.7 Table "Virtqueue Part Alignment": descriptors 16, available 2, used 4.
        for n in [1usize, 2, 4, 64, 256, 1024] {
            let l = Layout::new(n);
            assert_eq!(l.desc % 16, 0);
            assert_eq!(l.avail, 16 * n);
            assert_eq!(l.used % 4, 0);
            assert!(
                l.used >= l.avail + 6 + 2 * n,
                "avail ring and used_event fit"
            );
            assert!(
                l.indirect >= l.used + 6 + 8 * n,
                "used ring and avail_event fit"
            );
            assert_eq!(l.indirect % 16, 0);
            assert_eq!(l.len, l.hdr + 16 * n);
        }
        let l = Layout::new(256);
        assert_eq!(l.indirect_desc(3, 2), l.indirect + (3 * 8 + 2) * 16);
        assert_eq!(
            l.indirect_desc(256 + 3, 8 + 2),
            l.indirect_desc(3, 2),
            "ids wrap"
        );
        assert_eq!(
            l.indirect_desc(255, 7) + 16,
            l.hdr,
            "the last table ends at the headers"
        );
        assert_eq!(l.hdr_of(255) + 16, l.len);
        assert_eq!(l.ring_desc(257), l.desc + 16);
        assert_eq!(l.used_event(), 4096 + 4 + 512);
        assert_eq!(l.used_ring(257), l.used + 4 + 8);
        assert_eq!(l.avail_event(), l.used + 4 + 2048);
    }

    #[test]
    fn need_event_is_the_specifications_wrapping_comparison() {
        assert!(need_event(10, 11, 10));
        assert!(need_event(10, 20, 5));
        assert!(!need_event(10, 10, 5), "event not yet reached");
        assert!(!need_event(10, 20, 15), "event already passed before");
        assert!(need_event(0xfffe, 2, 0xfff0), "across the 16-bit wrap");
    }
}
