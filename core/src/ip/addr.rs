//! IPv4 addressing: a peer's `sockaddr_in` ([`SockAddrIn`]) and the domain's own configuration
//! ([`Ipv4Config`]: address, prefix length, optional gateway), with the subnet arithmetic that
//! decides where a datagram goes (RFC 1122 §3.3.1.1) and which addresses a host may have or
//! accept (RFC 1122 §3.2.1.3).

use core::net::Ipv4Addr;

use crate::{Error, Result};

/// `AF_INET` (Linux `<sys/socket.h>`; the same value on every system libfabric runs on).
pub const AF_INET: u16 = 2;

/// An IPv4 address and a UDP port: a peer of a plain-UDP endpoint, or the endpoint itself.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct SockAddrIn {
    /// The IPv4 address.
    pub addr: Ipv4Addr,
    /// The UDP port.
    pub port: u16,
}

impl SockAddrIn {
    /// Bytes of the raw form: C's `struct sockaddr_in` (`ip(7)`), what `fi_getname` gives and
    /// `fi_av_insert` takes for `FI_SOCKADDR_IN`.
    pub const LEN: usize = 16;

    /// An address and port.
    pub const fn new(addr: Ipv4Addr, port: u16) -> Self {
        SockAddrIn { addr, port }
    }

    /// The raw form, `struct sockaddr_in`: `sin_family` (`AF_INET`) in the host's byte order,
    /// `sin_port` and `sin_addr` in network byte order, then eight zero bytes (`sin_zero`).
    pub fn to_bytes(self) -> [u8; Self::LEN] {
        let mut b = [0; Self::LEN];
        b[0..2].copy_from_slice(&AF_INET.to_ne_bytes());
        b[2..4].copy_from_slice(&self.port.to_be_bytes());
        b[4..8].copy_from_slice(&self.addr.octets());
        b
    }

    /// The address of a raw `struct sockaddr_in`.
    ///
    /// # Errors
    /// `Inval` unless `bytes` is [`LEN`](Self::LEN) long with the family `AF_INET`
    /// (`sin_zero` is not checked: `ip(7)` does not require it to be zero on input).
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let b: &[u8; Self::LEN] = bytes.try_into().map_err(|_| Error::Inval)?;
        if u16::from_ne_bytes([b[0], b[1]]) != AF_INET {
            return Err(Error::Inval);
        }
        Ok(SockAddrIn {
            addr: Ipv4Addr::new(b[4], b[5], b[6], b[7]),
            port: u16::from_be_bytes([b[2], b[3]]),
        })
    }

    /// The address as one number, as an address vector stores it: the IPv4 address in bits
    /// 47..16, the port in bits 15..0, the top 16 bits zero — so never all ones, the pattern
    /// that marks a free entry.
    pub const fn to_key(self) -> u64 {
        (self.addr.to_bits() as u64) << 16 | self.port as u64
    }

    /// The address a [`to_key`](Self::to_key) number stands for, if it is one (top 16 bits
    /// zero).
    pub const fn from_key(key: u64) -> Option<Self> {
        if key >> 48 != 0 {
            return None;
        }
        Some(SockAddrIn {
            addr: Ipv4Addr::from_bits((key >> 16) as u32),
            port: key as u16,
        })
    }
}

/// A domain's IPv4 configuration, given by the application (as to `ip addr add` and
/// `ip route add default via`): its address, the subnet's prefix length and, optionally, the
/// gateway to everything off the subnet.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Ipv4Config {
    /// The domain's own address.
    pub addr: Ipv4Addr,
    /// Bits of the subnet prefix, 0 to 32.
    pub prefix_len: u8,
    /// The router for destinations off the subnet; `None`: only the subnet is reachable.
    pub gateway: Option<Ipv4Addr>,
}

/// Where a datagram to some destination goes next on the link.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum NextHop {
    /// To this address's MAC, found by ARP: the destination itself on the subnet, else the
    /// gateway.
    Unicast(Ipv4Addr),
    /// To the Ethernet broadcast address, no ARP: the limited broadcast or the subnet's
    /// broadcast address (RFC 1122 §3.3.6).
    Broadcast,
}

impl Ipv4Config {
    /// The subnet mask as a number.
    pub const fn mask(&self) -> u32 {
        match self.prefix_len {
            0 => 0,
            n if n >= 32 => u32::MAX,
            n => u32::MAX << (32 - n),
        }
    }

    /// The subnet's directed broadcast address (all host bits set), if the subnet has one: a
    /// /31 (RFC 3021) and a /32 have none.
    pub const fn broadcast(&self) -> Option<Ipv4Addr> {
        if self.prefix_len >= 31 {
            return None;
        }
        Some(Ipv4Addr::from_bits(self.addr.to_bits() | !self.mask()))
    }

    /// Whether `dst` is on the subnet (reached without the gateway).
    pub const fn on_link(&self, dst: Ipv4Addr) -> bool {
        (dst.to_bits() ^ self.addr.to_bits()) & self.mask() == 0
    }

    /// Whether a datagram to `dst` is for this host: its address, the limited broadcast, or
    /// the subnet's broadcast (RFC 1122 §3.2.1.3, §3.3.6).
    pub fn accepts(&self, dst: Ipv4Addr) -> bool {
        dst == self.addr || self.is_broadcast(dst)
    }

    /// Whether `dst` is a broadcast address from this host's point of view.
    pub fn is_broadcast(&self, dst: Ipv4Addr) -> bool {
        dst.is_broadcast() || Some(dst) == self.broadcast()
    }

    /// Where a datagram to `dst` goes next.
    ///
    /// # Errors
    /// `HostUnreach` for a destination off the subnet without a gateway; `Inval` for one no
    /// datagram may be sent to (0.0.0.0, loopback, multicast and class E: no groups are
    /// joined and nothing is looped back).
    pub fn next_hop(&self, dst: Ipv4Addr) -> Result<NextHop> {
        if self.is_broadcast(dst) {
            return Ok(NextHop::Broadcast);
        }
        if dst.is_unspecified() || dst.is_loopback() || dst.is_multicast() || is_class_e(dst) {
            return Err(Error::Inval);
        }
        if self.on_link(dst) {
            return Ok(NextHop::Unicast(dst));
        }
        self.gateway.map(NextHop::Unicast).ok_or(Error::HostUnreach)
    }

    /// Checks that the configuration can be a host's.
    ///
    /// # Errors
    /// `Inval` for a prefix length above 32; an address that cannot be a host's (RFC 1122
    /// §3.2.1.3: 0.0.0.0, the limited broadcast, loopback, multicast, class E) or that is the
    /// subnet's own network or broadcast address (on subnets that have them: /30 and wider);
    /// a gateway that is not a host's address on the subnet, or is the domain's own address.
    pub fn validate(&self) -> Result {
        if self.prefix_len > 32 || !is_host(self.addr) {
            return Err(Error::Inval);
        }
        if self.prefix_len <= 30 {
            let host = self.addr.to_bits() & !self.mask();
            if host == 0 || Some(self.addr) == self.broadcast() {
                return Err(Error::Inval);
            }
        }
        if let Some(gw) = self.gateway {
            if !is_host(gw) || !self.on_link(gw) || gw == self.addr || self.is_broadcast(gw) {
                return Err(Error::Inval);
            }
        }
        Ok(())
    }
}

/// 240.0.0.0/4, reserved (RFC 1112 §4), the limited broadcast among them.
const fn is_class_e(a: Ipv4Addr) -> bool {
    a.octets()[0] >= 240
}

/// Whether `a` may be a host's own address, or the source of a datagram a host accepts
/// (RFC 1122 §3.2.1.3): not 0.0.0.0, loopback, multicast or class E (broadcast included).
pub fn is_host(a: Ipv4Addr) -> bool {
    !(a.is_unspecified() || a.is_loopback() || a.is_multicast() || is_class_e(a))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(prefix_len: u8, gateway: Option<Ipv4Addr>) -> Ipv4Config {
        Ipv4Config {
            addr: Ipv4Addr::new(192, 0, 2, 10),
            prefix_len,
            gateway,
        }
    }

    #[test]
    fn sockaddr_in_has_c_layout_and_round_trips() {
        let a = SockAddrIn::new(Ipv4Addr::new(192, 0, 2, 7), 0x1234);
        let b = a.to_bytes();
        assert_eq!(u16::from_ne_bytes([b[0], b[1]]), AF_INET);
        assert_eq!(&b[2..], &[0x12, 0x34, 192, 0, 2, 7, 0, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(SockAddrIn::from_bytes(&b), Ok(a));
        assert_eq!(SockAddrIn::from_bytes(&b[..15]), Err(Error::Inval));
        let mut inet6 = b;
        inet6[..2].copy_from_slice(&10u16.to_ne_bytes());
        assert_eq!(SockAddrIn::from_bytes(&inet6), Err(Error::Inval));
    }

    #[test]
    fn the_av_key_round_trips_and_is_never_the_free_pattern() {
        let a = SockAddrIn::new(Ipv4Addr::BROADCAST, u16::MAX);
        assert_eq!(a.to_key(), 0x0000_ffff_ffff_ffff);
        assert_ne!(a.to_key(), u64::MAX);
        assert_eq!(SockAddrIn::from_key(a.to_key()), Some(a));
        assert_eq!(SockAddrIn::from_key(u64::MAX), None);
    }

    #[test]
    fn next_hop_is_the_peer_on_link_the_gateway_off_it_and_broadcast_without_arp() {
        let gw = Ipv4Addr::new(192, 0, 2, 1);
        let c = config(24, Some(gw));
        let peer = Ipv4Addr::new(192, 0, 2, 99);
        assert_eq!(c.next_hop(peer), Ok(NextHop::Unicast(peer)));
        assert_eq!(
            c.next_hop(Ipv4Addr::new(198, 51, 100, 1)),
            Ok(NextHop::Unicast(gw))
        );
        assert_eq!(c.next_hop(Ipv4Addr::BROADCAST), Ok(NextHop::Broadcast));
        assert_eq!(
            c.next_hop(Ipv4Addr::new(192, 0, 2, 255)),
            Ok(NextHop::Broadcast)
        );
        assert_eq!(
            config(24, None).next_hop(Ipv4Addr::new(198, 51, 100, 1)),
            Err(Error::HostUnreach)
        );
        for bad in [
            Ipv4Addr::UNSPECIFIED,
            Ipv4Addr::LOCALHOST,
            Ipv4Addr::new(224, 0, 0, 1),
            Ipv4Addr::new(240, 0, 0, 1),
        ] {
            assert_eq!(c.next_hop(bad), Err(Error::Inval), "{bad}");
        }
    }

    #[test]
    fn a_host_accepts_its_address_and_the_broadcasts_only() {
        let c = config(24, None);
        assert!(c.accepts(c.addr));
        assert!(c.accepts(Ipv4Addr::BROADCAST));
        assert!(c.accepts(Ipv4Addr::new(192, 0, 2, 255)));
        assert!(!c.accepts(Ipv4Addr::new(192, 0, 2, 11)));
        // A /31 has no broadcast address (RFC 3021): .11 is the other host.
        let p2p = config(31, None);
        assert_eq!(p2p.broadcast(), None);
        assert!(!p2p.accepts(Ipv4Addr::new(192, 0, 2, 11)));
        assert!(p2p.on_link(Ipv4Addr::new(192, 0, 2, 11)));
    }

    #[test]
    fn validate_refuses_what_cannot_be_a_host() {
        assert_eq!(
            config(24, Some(Ipv4Addr::new(192, 0, 2, 1))).validate(),
            Ok(())
        );
        assert_eq!(config(0, None).validate(), Ok(()));
        assert_eq!(config(32, None).validate(), Ok(()));
        assert_eq!(config(33, None).validate(), Err(Error::Inval));
        let with_addr = |a: Ipv4Addr, prefix_len| Ipv4Config {
            addr: a,
            prefix_len,
            gateway: None,
        };
        for a in [
            Ipv4Addr::UNSPECIFIED,
            Ipv4Addr::BROADCAST,
            Ipv4Addr::LOCALHOST,
            Ipv4Addr::new(224, 0, 0, 5),
            Ipv4Addr::new(250, 1, 2, 3),
        ] {
            assert_eq!(with_addr(a, 24).validate(), Err(Error::Inval), "{a}");
        }
        // The subnet's own network and broadcast addresses.
        assert_eq!(
            with_addr(Ipv4Addr::new(192, 0, 2, 0), 24).validate(),
            Err(Error::Inval)
        );
        assert_eq!(
            with_addr(Ipv4Addr::new(192, 0, 2, 255), 24).validate(),
            Err(Error::Inval)
        );
        // Both addresses of a /31 are hosts (RFC 3021).
        assert_eq!(
            with_addr(Ipv4Addr::new(192, 0, 2, 0), 31).validate(),
            Ok(())
        );
        // A gateway off the subnet, the host itself, or the broadcast.
        for gw in [
            Ipv4Addr::new(198, 51, 100, 1),
            Ipv4Addr::new(192, 0, 2, 10),
            Ipv4Addr::new(192, 0, 2, 255),
        ] {
            assert_eq!(config(24, Some(gw)).validate(), Err(Error::Inval), "{gw}");
        }
    }
}
