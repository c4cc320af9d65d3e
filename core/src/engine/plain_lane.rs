//! The plain-UDP lane: a plain-UDP endpoint's receives into owned buffers, written into the
//! reader's array inside the driver's loop ([`PlainLane`]), as the framed lane does for
//! ringfab's header (`framed.rs`). It reads the 42 bytes of Ethernet, IPv4 and UDP header in
//! place and takes a datagram only when the general lane (`verdict::classify_plain`, on
//! smoltcp's `wire`) would complete it `Done` with nothing but a context, flags, a length and a
//! source: anything it is not sure of — broadcast, options, fragments, a checksum nobody has
//! verified, a payload longer than the receive accepted — it leaves to the general lane, which
//! decides and counts (docs/ip.md, "The receive path").

use core::sync::atomic::AtomicUsize;

use super::op::{FrameHead, Lane, LaneKey};
use super::sink::{Plain, Sink, Window};
use super::state::CHUNK;
use super::verdict::RECV_FLAGS;
use super::OpTable;
use crate::addr::{AvRef, FiAddr, RawAddr};
use crate::buf::owner_of;
use crate::hal::{MacAddr, Nic, RxChecksum, RxCompletion, RxQueue};
use crate::ip::{Ipv4Addr, SockAddrIn, MAX_CLASSIFIED, UDP_HEADER_LEN};

/// The word at byte 0 shifted left by this keeps its low 49 bits: the destination MAC (bytes
/// 0..6, as a little-endian number) and the group bit of the source MAC (byte 6's low bit) —
/// one shift instead of a 64-bit mask, which x86-64 has to load.
const STATION_SHIFT: u32 = 64 - 49;
/// Bytes 12..15 of an IPv4 frame without options as a little-endian number: EtherType
/// 0x0800, version 4 and a 20-byte header (RFC 791 §3.1).
const IPV4_NO_OPTIONS: u64 = 0x45_00_08;
/// In the word at byte 20: the fragment offset and MF (bytes 20..22 less DF and the reserved
/// bit's neighbour, RFC 791 §3.1 "Flags"/"Fragment Offset") and the protocol (byte 23).
const FRAG_AND_PROTOCOL: u64 = 0xff00_ff3f;
/// The same bits of an unfragmented UDP datagram (protocol 17).
const UNFRAGMENTED_UDP: u64 = 0x1100_0000;
/// In the word at byte 30: the destination address (bytes 30..34) and port (36..38).
const DST_ADDR_AND_PORT: u64 = 0xffff_0000_ffff_ffff;

/// The plain-UDP lane of one poll: what it compares a datagram's headers with, and the region
/// of the buffers it takes (as [`FramedLane`](super::FramedLane)).
#[derive(Clone, Copy)]
pub(super) struct PlainLane<'s> {
    /// The station address as a little-endian number, shifted left by [`STATION_SHIFT`]: the
    /// only destination MAC it takes (a broadcast carries `FI_MULTICAST`: the general lane's),
    /// with the source's group bit clear.
    mac: u64,
    /// Bytes 30..38 of a datagram for this endpoint, masked with [`DST_ADDR_AND_PORT`]: the
    /// domain's IPv4 address and the endpoint's port.
    dst: u64,
    /// The subnet's broadcast address as a little-endian number (0 where there is none): a
    /// source the lane must refuse although its first byte looks like a host's.
    broadcast: u32,
    /// `LaneKey::of(Lane::PlainRecv, mr)`.
    key: LaneKey,
    owner: &'s AtomicUsize,
}

impl<'s> PlainLane<'s> {
    /// The lane of an endpoint at `mac`, `addr`:`port`, for buffers of region `mr`, if it is one
    /// of `owners`.
    pub(super) fn new(
        mac: MacAddr,
        addr: Ipv4Addr,
        broadcast: Ipv4Addr,
        port: u16,
        mr: u16,
        owners: &'s [AtomicUsize],
    ) -> Option<Self> {
        let mut w = [0u8; 8];
        w[..6].copy_from_slice(&mac.0);
        let [a, b, c, d] = addr.octets();
        let [p0, p1] = port.to_be_bytes();
        owner_of(owners, mr).map(|owner| PlainLane {
            mac: u64::from_le_bytes(w) << STATION_SHIFT,
            dst: u64::from_le_bytes([a, b, c, d, 0, 0, p0, p1]),
            broadcast: u32::from_le_bytes(broadcast.octets()),
            key: LaneKey::of(Lane::PlainRecv, mr),
            owner,
        })
    }

    /// Runs the lane over one poll of `q` (as [`FramedLane::poll`](super::FramedLane)).
    #[inline(always)]
    pub(super) fn poll<N: Nic, const D: usize, S: Sink<'s>>(
        self,
        q: &mut N::Rx<'_, D>,
        table: &mut OpTable<D>,
        scratch: &mut [RxCompletion; CHUNK],
        win: &mut Window<'_, 's, S::Entry>,
        want: usize,
        counted: bool,
    ) -> (usize, usize, usize, u64) {
        let room = win.room(want);
        let entries = &mut win.entries[..room];
        if counted {
            Self::fast_lane_plain::<N, D, S, true>(q, table, scratch, entries, self, want)
        } else {
            Self::fast_lane_plain::<N, D, S, false>(q, table, scratch, entries, self, want)
        }
    }

    /// After the lane took `direct` operations from slot `head` on: their sources (one AV
    /// lookup per run of datagrams from the same address and port) and buffers, as
    /// [`FramedLane::settle`](super::FramedLane).
    #[inline(always)]
    pub(super) fn settle<const D: usize, E>(
        self,
        table: &OpTable<D>,
        head: usize,
        win: &mut Window<'_, 's, E>,
        direct: usize,
        av: Option<AvRef<'_>>,
    ) {
        if direct == 0 {
            return;
        }
        let taken = |i: usize| &table.ops[head.wrapping_add(i) % D];
        if let Some(src) = win.src.as_deref_mut() {
            let (mut last_key, mut last) = (u64::MAX, FiAddr::NOTAVAIL);
            for (i, a) in src[..direct].iter_mut().enumerate() {
                // The buffer, written by the device before its completion was observed, is
                // still the operation's. Bytes 26..30 are the source address, 34..36 the
                // source port (in the word at 26, bytes 0..4 and 8..10).
                let h = taken(i).head;
                let key =
                    h.read_u64_le::<26>() & 0xffff_ffff | u64::from(h.read_u16_le::<34>()) << 32;
                if key != last_key {
                    (last_key, last) = (key, resolve_source(key, av));
                }
                *a = last;
            }
        }
        super::framed::hand_back(self.owner, table, head, win, direct);
    }

    /// The payload length of the datagram whose buffer starts with `h`, `frame_len` bytes
    /// long, if the general lane would deliver it to this endpoint as a plain success with
    /// the device's checksum marks `checked`; `None` for anything else (which the general lane
    /// then decides). What it checks, in the order of `ip::classify`:
    ///
    /// * Ethernet (IEEE 802.3): to the station address (a broadcast is `FI_MULTICAST`'s), from
    ///   an individual address; EtherType IPv4.
    /// * IPv4 (RFC 791): version 4 without options; the header checksum right (the device's
    ///   mark, or summed here: 20 bytes); no fragment; to the domain's unicast address; from an
    ///   address a host may have (not 0.0.0.0 — here: no address in 0/8 —, loopback,
    ///   multicast, class E or the subnet's broadcast: RFC 1122 §3.2.1.3); protocol UDP; total
    ///   length inside the frame.
    /// * UDP (RFC 768): to the endpoint's port; length = the IPv4 payload; checksum 0 (none) or
    ///   marked right by the device — one nobody verified is the general lane's, which sums
    ///   the payload.
    /// * The frame not longer than what the general lane classifies.
    #[inline(always)]
    fn payload(&self, h: FrameHead, frame_len: u32, checked: RxChecksum) -> Option<u32> {
        let w0 = h.read_u64_le::<0>();
        let w12 = h.read_u64_le::<12>();
        let w20 = h.read_u64_le::<20>();
        let w30 = h.read_u64_le::<30>();
        // Bytes 16..18, the total length, in the word at 12.
        let total = ((w12 >> 32) as u16).swap_bytes();
        let udp_len = h.read_u16_be::<38>();
        // The source address, bytes 26..30.
        let src = u32::from_le_bytes(h.read_array::<26, 4>());
        // The length checks, as two unsigned comparisons of differences: the frame is 42 to
        // MAX_CLASSIFIED bytes long (below 42 the difference wraps above the limit), and the
        // IPv4 datagram holds a UDP header and fits in it — `total - 28`, which wraps when the
        // total is below 28, is at most the frame's bytes after the 42 of headers. With
        // `total == udp_len + 20` (the UDP length is the IPv4 payload) that difference is the
        // UDP payload's length, and `udp_len >= 8` holds: `total >= 28`. (The sum is taken in
        // 16 bits: a UDP length that wraps makes it a total below 20, which the payload check
        // refuses.)
        let after_headers = frame_len.wrapping_sub(UDP_HEADER_LEN as u32);
        let payload = u32::from(total).wrapping_sub(UDP_HEADER_LEN as u32 - 14);
        // The tests in the order that compiles to the fewest instructions per datagram taken
        // (the optimiser keeps fewer values in registers across them: 96 against 99 per entry
        // of the CQ read at batch 64, core/benches/instructions.sh --plain); all of them run
        // for every datagram the lane takes.
        let ok = w0 << STATION_SHIFT == self.mac
            && w12 & 0xff_ffff == IPV4_NO_OPTIONS
            && after_headers <= (MAX_CLASSIFIED - UDP_HEADER_LEN) as u32
            && payload <= after_headers
            && total == udp_len.wrapping_add(20)
            && w20 & FRAG_AND_PROTOCOL == UNFRAGMENTED_UDP
            && w30 & DST_ADDR_AND_PORT == self.dst
            && src != self.broadcast
            && !NO_HOST_FIRST_OCTET[src as u8 as usize]
            && (h.read_u16_le::<40>() == 0 || checked.l4_good())
            && (checked.ipv4_good() || ipv4_header_sums_right(h));
        ok.then_some(payload)
    }

    /// The plain-UDP lane inside the driver's loop: a receive of the next slot in order whose
    /// operation is [`Lane::PlainRecv`] of the lane's region, whose frame is a plain success
    /// ([`payload`](Self::payload)) and whose payload fits what the receive accepted, is written
    /// straight into `entries` and its slot freed; the first completion that is anything else,
    /// and every one after it, is kept in `scratch` for the general lane. Never inlined, as
    /// [`FramedLane::fast_lane_framed`](super::FramedLane).
    #[inline(never)]
    fn fast_lane_plain<N: Nic, const D: usize, S: Sink<'s>, const BYTES: bool>(
        q: &mut N::Rx<'_, D>,
        table: &mut OpTable<D>,
        scratch: &mut [RxCompletion; CHUNK],
        entries: &mut [S::Entry],
        lane: PlainLane<'s>,
        want: usize,
    ) -> (usize, usize, usize, u64) {
        let (mut kept, mut bytes) = (0u32, 0u64);
        let mut free = entries.iter_mut();
        let mut next = table.head;
        let got = q.poll_each_split(
            want,
            &mut |c| {
                if free.len() == 0 || c.token.0 != (next % D) as u64 {
                    return false;
                }
                let op = &mut table.ops[next % D];
                if c.status.is_err() || op.plain != lane.key {
                    return false;
                }
                // A `Lane::PlainRecv` operation owns a registered buffer whose head was taken
                // at posting; the driver reported it `Ok`, having observed its write-back with
                // acquire ordering.
                let Some(len) = lane.payload(op.head, c.len, c.checksum) else {
                    return false;
                };
                // Never longer than the receive accepted (`FI_ETRUNC`, the general lane's), as in
                // the framed lane: the payload is at most the frame's bytes after the 42 of
                // headers, the driver checked the frame to be at most the buffer's length, and
                // `recv_lane` gives a receive this lane only if it accepts all of its buffer
                // but those 42 bytes.
                debug_assert!(
                    len <= op.len,
                    "a plain-UDP receive accepts its buffer's payload"
                );
                if let Some(entry) = free.next() {
                    S::write(
                        entry,
                        Plain {
                            context: op.context,
                            flags: RECV_FLAGS,
                            len: len as usize,
                        },
                    );
                }
                op.free();
                if BYTES {
                    bytes += u64::from(len);
                }
                next = next.wrapping_add(1);
                true
            },
            &mut |c| {
                if let Some(slot) = scratch.get_mut(kept as usize) {
                    *slot = *c;
                    kept += 1;
                }
            },
        );
        (got, next, kept as usize, bytes)
    }
}

/// Whether the 20-byte IPv4 header at byte 14 sums to all ones (RFC 791 §3.1), for a header
/// that is not all zeros (the caller has checked version 4). RFC 1071 §2: the one's-complement
/// sum does not depend on byte order, so the words are added as the machine reads them, 64
/// bits at a time with the carry added back in (end-around carry, (B)); and a sum of 16-bit
/// words, folded to 16 bits, is all ones exactly when the unfolded sum is a non-zero multiple
/// of 0xffff. The 64-bit sum with end-around carry is the 16-bit words' sum modulo
/// 2^64 - 1, itself a multiple of 0xffff, and zero only when every word is: so instead of
/// folding, one remainder (a multiplication: LLVM's divisibility test).
#[inline(always)]
fn ipv4_header_sums_right(h: FrameHead) -> bool {
    // Bytes 14..22, 26..34 and 22..26 (not 30..34: the lane is done with the word at 30
    // before it sums, and need not keep it).
    let a = h.read_u64_le::<14>();
    let b = h.read_u64_le::<26>();
    let c = u64::from(u32::from_le_bytes(h.read_array::<22, 4>()));
    let (s, carry) = a.overflowing_add(b);
    // `c` is below 2^32: adding it and the carry overflows at most once, leaving less than
    // 2^32, to which the second carry adds without overflowing.
    let (s, carry2) = s.overflowing_add(c + u64::from(carry));
    let s = s + u64::from(carry2);
    s % 0xffff == 0
}

/// First octets of a source address no host may have (RFC 1122 §3.2.1.3): 0 ("this host"; the
/// lane refuses all of 0/8 as `ip::classify` does), 127 (loopback), 224 and up (multicast,
/// class E and the limited broadcast). A table: one load instead of three comparisons.
const NO_HOST_FIRST_OCTET: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = matches!(i, 0 | 127 | 224..);
        i += 1;
    }
    t
};

/// The handle of the sender whose address and port are `key` (as [`PlainLane::settle`]
/// reads them) in `av`, or `FI_ADDR_NOTAVAIL`: what the general lane finds for the datagram.
#[cold]
fn resolve_source(key: u64, av: Option<AvRef<'_>>) -> FiAddr {
    let b = key.to_le_bytes();
    let src = SockAddrIn::new(
        Ipv4Addr::new(b[0], b[1], b[2], b[3]),
        u16::from_be_bytes([b[4], b[5]]),
    );
    av.and_then(|av| av.reverse_raw(RawAddr::In(src)))
        .unwrap_or(FiAddr::NOTAVAIL)
}

// The lane reads bytes 0..42 of a buffer in place: the head every operation keeps covers them.
const _: () = assert!(UDP_HEADER_LEN <= super::op::FRAMED_HEAD);

#[cfg(test)]
mod tests {
    //! The lane against the general lane's classifier: for well-formed datagrams and for
    //! every one of thousands of corruptions of them, whatever the lane takes, `ip::classify`
    //! delivers to the same endpoint as a plain unicast datagram of the same payload length —
    //! the lane is only a shortcut, never a second opinion.

    extern crate std;

    use std::boxed::Box;
    use std::vec::Vec;

    use super::*;
    use crate::engine::op::FRAMED_HEAD;
    use crate::hal::DmaHead;
    use crate::ip::emit::{udp_frame, UdpHeader};
    use crate::ip::parse::{classify, Frame, Local, Verify};
    use crate::ip::Ipv4Config;

    const US_MAC: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x0a]);
    const PEER_MAC: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x0b]);
    const US: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 10);
    const PEER: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 11);
    const PORT: u16 = 5000;

    fn local() -> Local {
        Local {
            mac: US_MAC,
            ip: Ipv4Config {
                addr: US,
                prefix_len: 24,
                gateway: None,
            },
        }
    }

    fn lane() -> PlainLane<'static> {
        static OWNER: AtomicUsize = AtomicUsize::new(0);
        let owners = core::slice::from_ref(&OWNER);
        PlainLane::new(US_MAC, US, Ipv4Addr::new(192, 0, 2, 255), PORT, 0, owners).unwrap()
    }

    /// A datagram from the peer to us carrying `len` bytes, its UDP checksum cleared (none)
    /// when `no_sum`.
    fn datagram(len: usize, no_sum: bool) -> Vec<u8> {
        let header = UdpHeader {
            src_mac: PEER_MAC,
            dst_mac: US_MAC,
            src: SockAddrIn::new(PEER, 40000),
            dst: SockAddrIn::new(US, PORT),
        };
        let payload: Vec<u8> = (0..len).map(|i| i as u8).collect();
        let mut out = std::vec![0u8; UDP_HEADER_LEN + len + 64];
        let n = udp_frame(&header, &payload, &mut out).unwrap();
        out.truncate(n.max(60)); // Ethernet's minimum frame, padded as a NIC would
        if no_sum {
            out[40..42].fill(0);
        }
        out
    }

    /// What the lane says of `frame` (its first 42 bytes read in place) with marks `checked`.
    fn lane_says(frame: &[u8], checked: RxChecksum) -> Option<u32> {
        let mut head = [0u8; FRAMED_HEAD];
        head.copy_from_slice(&frame[..FRAMED_HEAD]);
        let head: &'static [u8; FRAMED_HEAD] = Box::leak(Box::new(head));
        lane().payload(DmaHead::from_static(head), frame.len() as u32, checked)
    }

    /// What the general lane delivers to this endpoint as a plain success: the payload length.
    fn general_says(frame: &[u8], verify: Verify) -> Option<u32> {
        match classify(frame, &local(), verify) {
            Ok(Frame::Udp(d)) if d.dst.port == PORT && !d.broadcast => Some(d.payload.len() as u32),
            _ => None,
        }
    }

    // Not under Miri: each head is leaked (`DmaHead::from_static` takes `'static` bytes, and
    // core's tests make no `DmaSpan`), which Miri's leak check reports. The lane's reads are the
    // same `DmaHead` loads the framed lane makes, which Miri checks in core's integration tests.
    #[test]
    #[cfg_attr(miri, ignore = "leaks a head per frame; see above")]
    fn the_lane_takes_well_formed_datagrams_without_a_checksum_or_with_a_verified_one() {
        for len in [0, 1, 18, 100, 1472] {
            let f = datagram(len, true);
            assert_eq!(lane_says(&f, RxChecksum::NONE), Some(len as u32));
            let f = datagram(len, false);
            assert_eq!(
                lane_says(&f, RxChecksum::NONE),
                None,
                "a checksum nobody verified: the general lane sums it"
            );
            assert_eq!(
                lane_says(&f, RxChecksum::verified(false, true)),
                Some(len as u32)
            );
            assert_eq!(
                lane_says(&f, RxChecksum::verified(true, true)),
                Some(len as u32)
            );
        }
        // RFC 791 §3.1: "Total Length is the length of the datagram, measured in octets,
        // including internet header and data." A frame shorter than that (the device's length
        // below the headers' 42 bytes too, where the lane's difference wraps) or longer than
        // the general lane classifies is not the lane's.
        let f = datagram(0, true);
        let mut head = [0u8; FRAMED_HEAD];
        head.copy_from_slice(&f[..FRAMED_HEAD]);
        let head = DmaHead::from_static(Box::leak(Box::new(head)));
        for frame_len in [0, 1, 27, 41] {
            assert_eq!(lane().payload(head, frame_len, RxChecksum::NONE), None);
        }
        assert_eq!(lane().payload(head, 42, RxChecksum::NONE), Some(0));
        let longest = MAX_CLASSIFIED as u32;
        assert_eq!(lane().payload(head, longest, RxChecksum::NONE), Some(0));
        assert_eq!(lane().payload(head, longest + 1, RxChecksum::NONE), None);
        assert_eq!(lane().payload(head, u32::MAX, RxChecksum::NONE), None);
    }

    /// RFC 791 §3.1: "The checksum field is the 16 bit one's complement of the one's
    /// complement sum of all 16 bit words in the header." The lane's remainder test against
    /// that sum folded word by word, over random headers of version 4 — each also with its
    /// checksum field set right, and with the field's two spellings of zero.
    #[test]
    #[cfg_attr(miri, ignore = "leaks a head per frame")]
    fn the_header_sum_is_the_ones_complement_sum_folded_word_by_word() {
        let folded = |hdr: &[u8]| {
            let mut s: u32 = hdr
                .chunks(2)
                .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
                .sum();
            while s > 0xffff {
                s = (s & 0xffff) + (s >> 16);
            }
            s
        };
        let sums_right = |hdr: &[u8; 20]| {
            let mut head = [0u8; FRAMED_HEAD];
            head[14..34].copy_from_slice(hdr);
            let head: &'static [u8; FRAMED_HEAD] = Box::leak(Box::new(head));
            ipv4_header_sums_right(DmaHead::from_static(head))
        };
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut rand = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut right = 0;
        for i in 0..20_000 {
            let mut hdr = [0u8; 20];
            for b in hdr.iter_mut() {
                // Mostly 0x00 and 0xff now and then: carries and all-ones words.
                *b = match rand() % 4 {
                    0 => 0,
                    1 => 0xff,
                    _ => rand() as u8,
                };
            }
            hdr[0] = 0x45;
            if i % 2 == 0 {
                hdr[10..12].fill(0);
                let sum = !(folded(&hdr) as u16);
                hdr[10..12].copy_from_slice(&sum.to_be_bytes());
                if rand() % 4 == 0 && sum == 0 {
                    hdr[10..12].fill(0xff); // the other zero
                }
            }
            let want = folded(&hdr) == 0xffff;
            right += usize::from(want);
            assert_eq!(sums_right(&hdr), want, "header {hdr:02x?}");
        }
        assert!(right >= 10_000, "half the headers were summed right");
    }

    /// Every byte of the headers changed to every value that matters, and random changes of
    /// several bytes with random frame lengths: the lane never takes what the general lane
    /// would not deliver as the same plain success.
    #[test]
    #[cfg_attr(miri, ignore = "leaks a head per frame, and 20 000 classifications")]
    fn whatever_the_lane_takes_the_general_lane_delivers_alike() {
        let mut taken = 0;
        let mut check = |f: &[u8], checked: RxChecksum| {
            // The device's marks stand for the checks it did: the general lane then skips them.
            let verify = Verify {
                ipv4: !checked.ipv4_good(),
                l4: !checked.l4_good(),
            };
            if let Some(len) = lane_says(f, checked) {
                taken += 1;
                assert_eq!(general_says(f, verify), Some(len), "frame {f:02x?}");
            }
        };
        for no_sum in [true, false] {
            let base = datagram(22, no_sum);
            for at in 0..FRAMED_HEAD {
                for v in [
                    0u8, 1, 0x08, 0x11, 0x20, 0x40, 0x45, 0x46, 0x7f, 0x80, 0xe0, 0xff,
                ] {
                    let mut f = base.clone();
                    f[at] = v;
                    check(&f, RxChecksum::NONE);
                    check(&f, RxChecksum::verified(false, true));
                }
                let mut f = base.clone();
                f[at] ^= 0xff;
                check(&f, RxChecksum::NONE);
            }
        }
        let mut x: u32 = 0x2545_f491;
        let mut rand = || {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x
        };
        for _ in 0..20_000 {
            let mut f = datagram((rand() % 64) as usize, rand() % 2 == 0);
            for _ in 0..(rand() % 3 + 1) {
                let at = rand() as usize % FRAMED_HEAD;
                f[at] = rand() as u8;
            }
            let cut = (rand() as usize % f.len()).max(FRAMED_HEAD);
            if rand() % 4 == 0 {
                f.truncate(cut);
            }
            check(&f, RxChecksum::NONE);
        }
        assert!(
            taken > 0,
            "the lane took some: the comparison compared something"
        );
    }
}
