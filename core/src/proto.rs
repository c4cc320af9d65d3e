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
//!   ([`EpAddr`](crate::addr::EpAddr): source MAC + source context).
//! * The payload length is explicit because Ethernet pads short frames to 60 bytes: the receiver
//!   must not report the padding as data.
//! * Flag bit 0 says the remote CQ data field is valid (`FI_REMOTE_CQ_DATA`).
//!
//! The same 16 bytes can also travel inside IPv4 and UDP ([`Encap::Udp`]: 58 bytes of header
//! before the payload instead of 30), for NICs to spread them over receive queues by RSS:
//!
//! ```text
//! | Ethernet (14), EtherType 0x0800 | IPv4 (20): 0x45, DF, TTL 1, UDP, link-local addresses |
//! | UDP (8): source FLOW_BASE + tx queue, destination UDP_PORT, checksum 0 | ringfab (16) | payload
//! ```
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

/// The MAC address receive context `ctx` of a scalable endpoint listens on, given its NIC's
/// station address `base`: context 0 is `base` itself; context *k* > 0 is `base` with the
/// locally-administered bit set (IEEE 802 §8.4: never equal to a vendor-assigned address) and
/// *k* XORed into the fourth byte. The NIC steers frames to the context's queue by this
/// address (`Nic::set_rx_queue_mac`), and a sender computes it from the peer's address and the
/// context index alone — so two ringfab NICs on one network must not have station addresses
/// that differ only in their fourth byte.
pub fn context_mac(base: MacAddr, ctx: u16) -> MacAddr {
    if ctx == 0 {
        return base;
    }
    let mut m = base.0;
    m[0] |= 0x02;
    m[3] ^= ctx as u8;
    MacAddr(m)
}

/// Bytes of the Ethernet header.
pub const ETH_LEN: usize = 14;

/// Bytes of ringfab's own header, after Ethernet (or after IPv4/UDP).
pub const RINGFAB_LEN: usize = 16;

/// Bytes of the IPv4 header ringfab writes (no options) and of the UDP header.
const IPV4_LEN: usize = 20;
const UDP_LEN: usize = 8;

/// Bytes of a whole header on the [`Encap::Ethernet`] encapsulation, Ethernet included: where the
/// payload starts in such a frame.
pub const HEADER_LEN: usize = Encap::Ethernet.header_len();

/// The longest header of any encapsulation ([`Encap::Udp`]'s).
pub const MAX_HEADER_LEN: usize = Encap::Udp.header_len();

/// EtherType of IPv4.
const ETHERTYPE_IPV4: u16 = 0x0800;
/// IPv4's protocol number of UDP (RFC 768).
const IPPROTO_UDP: u8 = 17;

/// The UDP destination port of ringfab frames on the [`Encap::Udp`] encapsulation. 51381 (0xC8B5)
/// lies in the dynamic range (RFC 6335 §6), which IANA never assigns; like [`ETHERTYPE`], a site
/// that uses it already can rebuild with another value.
pub const UDP_PORT: u16 = 0xC8B5;

/// The first UDP source port of ringfab's flows: a sender's transmit queue *q* sends from
/// `FLOW_BASE + q` (RFC 6335's dynamic range), so that RSS at the receiver can tell the flows
/// of one NIC's transmit queues apart.
pub const FLOW_BASE: u16 = 0xC000;

/// How ringfab's header travels: straight after Ethernet, or inside IPv4/UDP.
///
/// NICs hash only IP headers for RSS (82576 datasheet §7.1.2.8, 82574 §7.1.2.10, virtio 1.2
/// §5.1.6.5.7): a frame of ringfab's own EtherType always lands on receive queue 0. The
/// [`Encap::Udp`] encapsulation wraps the same header in IPv4 and UDP, which the NIC does hash, so
/// that the receive contexts of a scalable endpoint can be fed by RSS
/// ([`SepAttr::rss`](crate::sep::SepAttr::rss)). Both ends of a conversation must use the same
/// encapsulation; a frame of the other one is not a ringfab frame for the receiver.
///
/// On UDP encapsulation the IPv4 addresses are derived from the MAC addresses
/// ([`ipv4_of`]) — they address nothing (ringfab addresses by MAC and context), they give the
/// NIC's hash something that differs per peer — the TTL is 1 (never routed), the UDP checksum
/// is 0 (none, which IPv4 allows: RFC 768) and the IPv4 header checksum is valid.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub enum Encap {
    /// Ethernet with ringfab's EtherType, then ringfab's 16 bytes: [`HEADER_LEN`] (30) bytes.
    #[default]
    Ethernet,
    /// Ethernet, IPv4 (no options), UDP to [`UDP_PORT`], then ringfab's 16 bytes:
    /// [`MAX_HEADER_LEN`] (58) bytes.
    Udp,
    /// Plain UDP over IPv4 (`docs/ip.md`): Ethernet, IPv4 (no options), UDP, then the payload
    /// and nothing else — no ringfab header — so that the endpoint talks to any UDP socket.
    /// Peers are `sockaddr_in` addresses, the domain needs an IPv4 configuration
    /// (`Domain::set_ipv4`) and the endpoint a UDP port (`EpAttr::port`): 42 bytes
    /// ([`ip::UDP_HEADER_LEN`](crate::ip::UDP_HEADER_LEN)).
    PlainUdp,
}

impl Encap {
    /// Bytes before the payload in a frame of this encapsulation.
    pub const fn header_len(self) -> usize {
        match self {
            Encap::Ethernet => ETH_LEN + RINGFAB_LEN,
            Encap::Udp => ETH_LEN + IPV4_LEN + UDP_LEN + RINGFAB_LEN,
            Encap::PlainUdp => ETH_LEN + IPV4_LEN + UDP_LEN,
        }
    }

    /// Whether frames of this encapsulation carry ringfab's own header (not plain UDP).
    ///
    /// Without the `plain-udp` feature no path or endpoint is ever plain UDP (they are refused
    /// when made), and this says `true` for every encapsulation, so that the compiler leaves the
    /// plain-UDP code out of every path (core/Cargo.toml, "features").
    pub const fn is_ringfab(self) -> bool {
        !(cfg!(feature = "plain-udp") && matches!(self, Encap::PlainUdp))
    }

    /// Whether this encapsulation is offered in this build (`plain-udp` for [`Encap::PlainUdp`]).
    pub const fn is_built(self) -> bool {
        cfg!(feature = "plain-udp") || !matches!(self, Encap::PlainUdp)
    }

    /// Where ringfab's own 16 bytes start.
    const fn ringfab_at(self) -> usize {
        self.header_len() - RINGFAB_LEN
    }
}

/// The UDP source port of the frames an endpoint sends on the [`Encap::Udp`] encapsulation: its
/// transmit queue and source context folded into the dynamic range above [`FLOW_BASE`], so
/// that the frames of one sender (one queue, one endpoint) hash alike and stay in order on one
/// receive queue, while different senders spread.
pub fn flow(tx_queue: u16, src_ctx: u16) -> u16 {
    FLOW_BASE | ((tx_queue & 0x3f) << 8) | (src_ctx & 0xff)
}

/// The IPv4 address a MAC address stands for on the [`Encap::Udp`] encapsulation: a link-local
/// address (RFC 3927, 169.254.1.0–169.254.254.255) from the MAC's last two bytes, or the limited
/// broadcast address for a group (multicast or broadcast) MAC. Two NICs may share one; that only
/// makes their flows hash alike.
pub fn ipv4_of(mac: MacAddr) -> [u8; 4] {
    if mac.is_multicast() {
        return [255; 4];
    }
    [169, 254, 1 + mac.0[4] % 254, mac.0[5]]
}

/// Flag: the remote CQ data field is valid.
const FLAG_CQ_DATA: u8 = 1 << 0;
/// Flags this version defines; a frame with any other bit set is refused.
const FLAGS_KNOWN: u8 = FLAG_CQ_DATA;

/// Byte offsets in a frame: Ethernet, then (UDP encapsulation) IPv4 and UDP.
mod field {
    use core::ops::Range;
    pub(super) const DST: Range<usize> = 0..6;
    pub(super) const SRC: Range<usize> = 6..12;
    pub(super) const ETHERTYPE: Range<usize> = 12..14;
    pub(super) const IP_VER_IHL: usize = 14;
    pub(super) const IP_TOTAL_LEN: Range<usize> = 16..18;
    pub(super) const IP_FRAG: Range<usize> = 20..22;
    pub(super) const IP_TTL: usize = 22;
    pub(super) const IP_PROTO: usize = 23;
    pub(super) const IP_CHECKSUM: Range<usize> = 24..26;
    pub(super) const IP_SRC: Range<usize> = 26..30;
    pub(super) const IP_DST: Range<usize> = 30..34;
    pub(super) const IP: Range<usize> = 14..34;
    pub(super) const UDP_SRC: Range<usize> = 34..36;
    pub(super) const UDP_DST: Range<usize> = 36..38;
    pub(super) const UDP_LEN: Range<usize> = 38..40;
}

/// Byte offsets in ringfab's own 16 bytes.
mod ringfab {
    use core::ops::Range;
    pub(super) const VERSION: usize = 0;
    pub(super) const FLAGS: usize = 1;
    pub(super) const DST_CTX: Range<usize> = 2..4;
    pub(super) const SRC_CTX: Range<usize> = 4..6;
    pub(super) const LEN: Range<usize> = 6..8;
    pub(super) const DATA: Range<usize> = 8..16;
}

/// IPv4 "don't fragment": ringfab frames are never fragmented.
const IP_DF: u16 = 0x4000;
/// The fragment offset and "more fragments" bits: a fragment is not a ringfab frame.
const IP_FRAGMENT: u16 = 0x3fff;

/// The Internet checksum's one's-complement sum (RFC 1071) of `bytes`, an even number of them,
/// folded to 16 bits.
fn ones_sum(bytes: &[u8]) -> u16 {
    let mut sum: u32 = bytes
        .chunks_exact(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// Why a received frame is not a ringfab frame for this endpoint.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Malformed {
    /// Shorter than the header.
    Short,
    /// Another protocol's EtherType.
    EtherType,
    /// (UDP encapsulation) Not IPv4 without options carrying UDP, or a fragment.
    Ip,
    /// (UDP encapsulation) The IPv4 header checksum is wrong.
    Checksum,
    /// (UDP encapsulation) UDP to another port than [`UDP_PORT`].
    Port,
    /// A header version this code does not speak.
    Version,
    /// Flag bits this version does not define.
    Flags,
    /// The payload length claims more bytes than the frame (or its IPv4/UDP lengths) has.
    Length,
    /// Asked of [`Encap::PlainUdp`], whose frames carry no ringfab header.
    NotRingfab,
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
    /// (UDP encapsulation) The UDP source port: which of the sender's flows the frame belongs to
    /// ([`FLOW_BASE`] + its transmit queue). Not on Ethernet encapsulation, where it parses as 0.
    pub flow: u16,
}

impl Header {
    /// Parses the header at the start of a frame of `frame_len` bytes (FCS excluded) on
    /// `encap`, of which `bytes` holds at least the first [`Encap::header_len`].
    ///
    /// # Errors
    /// Every way a frame can fail to be a well-formed ringfab frame ([`Malformed`]).
    pub fn parse(encap: Encap, bytes: &[u8], frame_len: usize) -> Result<Header, Malformed> {
        if !encap.is_ringfab() {
            return Err(Malformed::NotRingfab);
        }
        let len = encap.header_len();
        if frame_len < len || bytes.len() < len {
            return Err(Malformed::Short);
        }
        let be16 =
            |r: core::ops::Range<usize>| u16::from_be_bytes([bytes[r.start], bytes[r.start + 1]]);
        // The payload may not run past the frame, nor (UDP encapsulation) past the datagram.
        let mut room = frame_len - len;
        let mut flow = 0;
        match encap {
            Encap::Ethernet => {
                if be16(field::ETHERTYPE) != ETHERTYPE {
                    return Err(Malformed::EtherType);
                }
            }
            Encap::PlainUdp => return Err(Malformed::NotRingfab),
            Encap::Udp => {
                if be16(field::ETHERTYPE) != ETHERTYPE_IPV4 {
                    return Err(Malformed::EtherType);
                }
                if bytes[field::IP_VER_IHL] != 0x45
                    || bytes[field::IP_PROTO] != IPPROTO_UDP
                    || be16(field::IP_FRAG) & IP_FRAGMENT != 0
                {
                    return Err(Malformed::Ip);
                }
                if ones_sum(&bytes[field::IP]) != 0xffff {
                    return Err(Malformed::Checksum);
                }
                if be16(field::UDP_DST) != UDP_PORT {
                    return Err(Malformed::Port);
                }
                let total = usize::from(be16(field::IP_TOTAL_LEN));
                let udp = usize::from(be16(field::UDP_LEN));
                if total > frame_len - ETH_LEN
                    || udp != total.saturating_sub(IPV4_LEN)
                    || udp < UDP_LEN + RINGFAB_LEN
                {
                    return Err(Malformed::Length);
                }
                room = udp - UDP_LEN - RINGFAB_LEN;
                flow = be16(field::UDP_SRC);
            }
        }
        let at = encap.ringfab_at();
        let rf = |r: core::ops::Range<usize>| (r.start + at)..(r.end + at);
        if bytes[at + ringfab::VERSION] != VERSION {
            return Err(Malformed::Version);
        }
        let flags = bytes[at + ringfab::FLAGS];
        if flags & !FLAGS_KNOWN != 0 {
            return Err(Malformed::Flags);
        }
        let payload_len = be16(rf(ringfab::LEN));
        if usize::from(payload_len) > room {
            return Err(Malformed::Length);
        }
        let mac = |r: core::ops::Range<usize>| {
            let mut m = [0; 6];
            m.copy_from_slice(&bytes[r]);
            MacAddr(m)
        };
        let mut data = [0; 8];
        data.copy_from_slice(&bytes[rf(ringfab::DATA)]);
        Ok(Header {
            dst: mac(field::DST),
            src: mac(field::SRC),
            dst_ctx: be16(rf(ringfab::DST_CTX)),
            src_ctx: be16(rf(ringfab::SRC_CTX)),
            payload_len,
            data: (flags & FLAG_CQ_DATA != 0).then(|| u64::from_be_bytes(data)),
            flow,
        })
    }

    /// Writes the header for `encap` into `out`; returns the bytes written, the first
    /// [`Encap::header_len`] — none for [`Encap::PlainUdp`], which has no ringfab header
    /// (`ip::emit` writes its frames).
    pub fn emit<'o>(&self, encap: Encap, out: &'o mut [u8; MAX_HEADER_LEN]) -> &'o [u8] {
        if !encap.is_ringfab() {
            return &out[..0];
        }
        out[field::DST].copy_from_slice(&self.dst.0);
        out[field::SRC].copy_from_slice(&self.src.0);
        let ethertype = match encap {
            Encap::Ethernet => ETHERTYPE,
            Encap::Udp | Encap::PlainUdp => ETHERTYPE_IPV4,
        };
        out[field::ETHERTYPE].copy_from_slice(&ethertype.to_be_bytes());
        if encap == Encap::Udp {
            // Saturating: no NIC's frame comes near 64 KiB (`max_msg_size` is far below).
            let udp = ((UDP_LEN + RINGFAB_LEN) as u16).saturating_add(self.payload_len);
            let put16 = |out: &mut [u8; MAX_HEADER_LEN], r: core::ops::Range<usize>, v: u16| {
                out[r].copy_from_slice(&v.to_be_bytes());
            };
            out[field::IP_VER_IHL] = 0x45;
            out[field::IP_VER_IHL + 1] = 0; // DSCP/ECN
            put16(
                out,
                field::IP_TOTAL_LEN,
                udp.saturating_add(IPV4_LEN as u16),
            );
            // Identification 0: allowed for an atomic datagram, DF set and never fragmented
            // (RFC 6864 §4.1).
            put16(out, 18..20, 0);
            put16(out, field::IP_FRAG, IP_DF);
            out[field::IP_TTL] = 1;
            out[field::IP_PROTO] = IPPROTO_UDP;
            put16(out, field::IP_CHECKSUM, 0);
            out[field::IP_SRC].copy_from_slice(&ipv4_of(self.src));
            out[field::IP_DST].copy_from_slice(&ipv4_of(self.dst));
            let checksum = !ones_sum(&out[field::IP]);
            put16(out, field::IP_CHECKSUM, checksum);
            put16(out, field::UDP_SRC, self.flow);
            put16(out, field::UDP_DST, UDP_PORT);
            put16(out, field::UDP_LEN, udp);
            put16(out, 40..42, 0); // UDP checksum: none
        }
        let at = encap.ringfab_at();
        let o = &mut out[at..at + RINGFAB_LEN];
        o[ringfab::VERSION] = VERSION;
        o[ringfab::FLAGS] = if self.data.is_some() { FLAG_CQ_DATA } else { 0 };
        o[ringfab::DST_CTX].copy_from_slice(&self.dst_ctx.to_be_bytes());
        o[ringfab::SRC_CTX].copy_from_slice(&self.src_ctx.to_be_bytes());
        o[ringfab::LEN].copy_from_slice(&self.payload_len.to_be_bytes());
        o[ringfab::DATA].copy_from_slice(&self.data.unwrap_or(0).to_be_bytes());
        &out[..encap.header_len()]
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
            flow: 0,
        }
    }

    fn emitted(h: Header, encap: Encap) -> [u8; MAX_HEADER_LEN] {
        let mut b = [0; MAX_HEADER_LEN];
        h.emit(encap, &mut b);
        b
    }

    #[test]
    fn emits_the_documented_byte_layout() {
        let mut b = [0; MAX_HEADER_LEN];
        assert_eq!(
            sample().emit(Encap::Ethernet, &mut b),
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
    fn emits_the_documented_udp_layout_with_a_hand_computed_checksum() {
        let h = Header {
            flow: FLOW_BASE + 1,
            ..sample()
        };
        let mut b = [0; MAX_HEADER_LEN];
        assert_eq!(
            h.emit(Encap::Udp, &mut b),
            [
                0x02, 0, 0, 0, 0, 0x0b, // destination MAC
                0x02, 0, 0, 0, 0, 0x0a, // source MAC
                0x08, 0x00, // EtherType IPv4
                0x45, 0, // version 4, 20-byte header; DSCP/ECN
                0, 49, // total length: 20 + 8 + 16 + 5
                0, 0, 0x40, 0, // identification; don't fragment
                1, 17, // TTL, protocol UDP
                0x23, 0xab, // header checksum (RFC 1071, by hand)
                169, 254, 1, 0x0a, // source: link-local of the source MAC
                169, 254, 1, 0x0b, // destination
                0xc0, 0x01, // UDP source port: FLOW_BASE + 1
                0xc8, 0xb5, // UDP destination port: UDP_PORT
                0, 29, // UDP length: 8 + 16 + 5
                0, 0, // no UDP checksum
                1, 1, 0, 3, 1, 2, 0, 5, // ringfab: version, flags, contexts, length
                0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, // remote CQ data
            ]
        );
    }

    #[test]
    fn group_destinations_get_the_limited_broadcast_address() {
        assert_eq!(ipv4_of(MacAddr([0xff; 6])), [255; 4]);
        assert_eq!(ipv4_of(MacAddr([0x01, 0, 0x5e, 0, 0, 1])), [255; 4]);
        // Never 169.254.0.x or 169.254.255.x (RFC 3927 §2.1 reserves them).
        assert_eq!(ipv4_of(MacAddr([2, 0, 0, 0, 0, 7]))[2], 1);
        assert_eq!(ipv4_of(MacAddr([2, 0, 0, 0, 253, 7]))[2], 254);
        assert_eq!(ipv4_of(MacAddr([2, 0, 0, 0, 254, 7]))[2], 1);
        assert_eq!(ipv4_of(MacAddr([2, 0, 0, 0, 255, 7]))[2], 2);
    }

    #[test]
    fn parse_inverts_emit_on_both_encapsulations_with_and_without_cq_data() {
        for encap in [Encap::Ethernet, Encap::Udp] {
            for h in [
                sample(),
                Header {
                    data: None,
                    ..sample()
                },
            ] {
                let h = Header {
                    flow: if encap == Encap::Udp {
                        FLOW_BASE + 7
                    } else {
                        0
                    },
                    ..h
                };
                let b = emitted(h, encap);
                assert_eq!(Header::parse(encap, &b, encap.header_len() + 5), Ok(h));
            }
        }
    }

    #[test]
    fn a_frame_of_one_encapsulation_is_malformed_on_the_other() {
        let eth = emitted(sample(), Encap::Ethernet);
        let udp = emitted(sample(), Encap::Udp);
        assert_eq!(
            Header::parse(Encap::Udp, &eth, 64),
            Err(Malformed::EtherType)
        );
        assert_eq!(
            Header::parse(Encap::Ethernet, &udp, 64),
            Err(Malformed::EtherType)
        );
    }

    #[test]
    fn parse_refuses_every_malformation() {
        let good = emitted(sample(), Encap::Ethernet);
        let parse = |b: &[u8], len| Header::parse(Encap::Ethernet, b, len);
        assert_eq!(parse(&good[..29], 29), Err(Malformed::Short));
        assert_eq!(parse(&good, 29), Err(Malformed::Short));
        let mut b = good;
        b[13] = 0x00;
        assert_eq!(parse(&b, 60), Err(Malformed::EtherType));
        let mut b = good;
        b[14] = 2;
        assert_eq!(parse(&b, 60), Err(Malformed::Version));
        let mut b = good;
        b[15] = 0x80;
        assert_eq!(parse(&b, 60), Err(Malformed::Flags));
        // Payload length 5 in a frame with only 4 payload bytes.
        assert_eq!(parse(&good, HEADER_LEN + 4), Err(Malformed::Length));
        // Ethernet padding after the payload is fine.
        assert!(parse(&good, 60).is_ok());
    }

    #[test]
    fn parse_refuses_every_udp_malformation() {
        let good = emitted(sample(), Encap::Udp);
        let frame = MAX_HEADER_LEN + 5;
        let parse = |b: &[u8], len| Header::parse(Encap::Udp, b, len);
        assert_eq!(
            parse(&good, frame),
            Ok(Header {
                flow: 0,
                ..sample()
            })
        );
        assert_eq!(parse(&good[..57], frame), Err(Malformed::Short));
        assert_eq!(parse(&good, 57), Err(Malformed::Short));
        // Edits that keep the checksum right, so each reaches the check it is meant for.
        let with = |i: usize, v: u8| {
            let mut b = good;
            b[i] = v;
            if (14..34).contains(&i) {
                b[24..26].copy_from_slice(&[0, 0]);
                let c = !ones_sum(&b[14..34]);
                b[24..26].copy_from_slice(&c.to_be_bytes());
            }
            b
        };
        assert_eq!(parse(&with(13, 0xdd), frame), Err(Malformed::EtherType)); // IPv6
        assert_eq!(parse(&with(14, 0x46), frame), Err(Malformed::Ip)); // IPv4 options
        assert_eq!(parse(&with(23, 6), frame), Err(Malformed::Ip)); // TCP
        assert_eq!(parse(&with(21, 1), frame), Err(Malformed::Ip)); // a fragment
        assert_eq!(parse(&with(20, 0x60), frame), Err(Malformed::Ip)); // more fragments
        let mut b = good;
        b[25] ^= 1;
        assert_eq!(parse(&b, frame), Err(Malformed::Checksum));
        assert_eq!(parse(&with(37, 0xb6), frame), Err(Malformed::Port));
        // IPv4 total length beyond the frame; UDP length disagreeing with it.
        assert_eq!(parse(&with(17, 50), frame), Err(Malformed::Length));
        assert_eq!(parse(&with(39, 30), frame), Err(Malformed::Length));
        // ringfab's own checks, after IPv4/UDP.
        assert_eq!(parse(&with(42, 2), frame), Err(Malformed::Version));
        assert_eq!(parse(&with(43, 0x80), frame), Err(Malformed::Flags));
        // A payload length beyond the datagram, though inside the (padded) frame.
        assert_eq!(parse(&with(49, 6), 64), Err(Malformed::Length));
        // Ethernet padding after the datagram is fine.
        assert!(parse(&good, 64).is_ok());
    }
}
