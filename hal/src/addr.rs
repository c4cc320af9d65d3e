//! Address newtypes: device-visible I/O virtual addresses and Ethernet MAC addresses.

use core::fmt;

/// An I/O virtual address: where a device reaches memory through the IOMMU.
///
/// Distinct from a CPU pointer on purpose; the two meet only in a [`DmaRegion`](crate::DmaRegion)
/// or a [`DmaMapping`](crate::DmaMapping).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default)]
pub struct Iova(pub u64);

impl Iova {
    /// The address `offset` bytes further on, or `None` if that overflows 64 bits.
    pub const fn checked_add(self, offset: u64) -> Option<Iova> {
        match self.0.checked_add(offset) {
            Some(a) => Some(Iova(a)),
            None => None,
        }
    }
}

impl fmt::Display for Iova {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "iova {:#x}", self.0)
    }
}

/// A 48-bit IEEE 802 MAC address, in wire order.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct MacAddr(pub [u8; 6]);

impl MacAddr {
    /// The broadcast address ff:ff:ff:ff:ff:ff.
    pub const BROADCAST: MacAddr = MacAddr([0xff; 6]);

    /// True for group addresses (multicast and broadcast): the I/G bit, bit 0 of the first octet.
    pub const fn is_multicast(&self) -> bool {
        self.0[0] & 1 != 0
    }

    /// True for an address a station may have as its own: neither a group address nor all
    /// zeros (IEEE 802: the I/G bit names groups; 00:00:00:00:00:00 names nobody).
    pub const fn is_station(&self) -> bool {
        !self.is_multicast()
            && (self.0[0] | self.0[1] | self.0[2] | self.0[3] | self.0[4] | self.0[5]) != 0
    }

    /// True for ff:ff:ff:ff:ff:ff.
    pub fn is_broadcast(&self) -> bool {
        *self == Self::BROADCAST
    }
}

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = &self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            m[0], m[1], m[2], m[3], m[4], m[5]
        )
    }
}

impl fmt::Debug for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multicast_bit_is_the_low_bit_of_the_first_octet() {
        assert!(MacAddr([0x01, 0, 0x5e, 0, 0, 1]).is_multicast());
        assert!(MacAddr::BROADCAST.is_multicast());
        assert!(!MacAddr([0x52, 0x54, 0, 0x12, 0x34, 0x56]).is_multicast());
        assert!(MacAddr([0x52, 0x54, 0, 0x12, 0x34, 0x56]).is_station());
        assert!(!MacAddr([0; 6]).is_station());
        assert!(!MacAddr::BROADCAST.is_station());
        assert!(!MacAddr([0x01, 0, 0x5e, 0, 0, 1]).is_station());
    }

    #[test]
    fn mac_displays_colon_separated_lowercase_hex() {
        let mac = MacAddr([0x52, 0x54, 0, 0xab, 0xcd, 0xef]);
        let mut buf = [0u8; 17];
        let mut w = Cursor(&mut buf, 0);
        fmt::write(&mut w, format_args!("{mac}")).unwrap();
        assert_eq!(&buf, b"52:54:00:ab:cd:ef");
    }

    #[test]
    fn iova_checked_add_reports_overflow() {
        assert_eq!(Iova(0x1000).checked_add(0x10), Some(Iova(0x1010)));
        assert_eq!(Iova(u64::MAX).checked_add(1), None);
    }

    struct Cursor<'a>(&'a mut [u8], usize);
    impl fmt::Write for Cursor<'_> {
        fn write_str(&mut self, s: &str) -> fmt::Result {
            let end = self.1 + s.len();
            self.0
                .get_mut(self.1..end)
                .ok_or(fmt::Error)?
                .copy_from_slice(s.as_bytes());
            self.1 = end;
            Ok(())
        }
    }
}
