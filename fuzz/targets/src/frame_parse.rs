//! `frame_parse`: ringfab's header parser ([`Header::parse`], `core/src/proto.rs`) on the
//! fuzzer's bytes, on both encapsulations — the code every received frame from any station on
//! the network goes through before an endpoint looks at it.
//!
//! Input: one byte choosing how the frame's length relates to the bytes (the bytes' own
//! length, or a length of its own the next two bytes give: a driver reports the frame's length
//! apart from the bytes the buffer holds), then the frame's bytes.
//!
//! Checked, on each encapsulation:
//! * no panic, whatever the bytes and the length;
//! * the answer depends only on the header's bytes: parsing exactly the first
//!   [`Encap::header_len`] bytes gives the same answer as parsing them all;
//! * a frame accepted claims no more payload than the frame (and, on UDP, the datagram) holds;
//! * padding does not change an accepted frame's meaning: the same bytes with a longer frame
//!   length parse to the same header;
//! * what is accepted round-trips: [`Header::emit`] of the parsed header parses back to the
//!   same header, and on [`Encap::Ethernet`] emits the accepted bytes themselves (the remote CQ
//!   data field only when the flag says it is valid; the other bytes of that field mean
//!   nothing).

use ringfab::proto::{Encap, Header, ETH_LEN, MAX_HEADER_LEN};

use crate::Bytes;

/// The `frame_parse` target's body.
pub fn run(data: &[u8]) {
    let mut b = Bytes::new(data);
    let Some(mode) = b.u8() else {
        return;
    };
    let frame_len = if mode & 1 == 0 {
        b.rest().len()
    } else {
        match b.u16() {
            Some(l) => usize::from(l),
            None => return,
        }
    };
    let bytes = b.rest();
    for encap in [Encap::Ethernet, Encap::Udp] {
        check(encap, bytes, frame_len);
    }
}

fn check(encap: Encap, bytes: &[u8], frame_len: usize) {
    let len = encap.header_len();
    let got = Header::parse(encap, bytes, frame_len);
    if bytes.len() >= len {
        assert_eq!(
            Header::parse(encap, &bytes[..len], frame_len),
            got,
            "{encap:?}: the answer depends on bytes after the header"
        );
    }
    let Ok(h) = got else {
        return;
    };
    assert!(
        bytes.len() >= len && frame_len >= len,
        "{encap:?}: accepted short"
    );
    let payload = usize::from(h.payload_len);
    assert!(
        len + payload <= frame_len,
        "{encap:?}: payload {payload} beyond a frame of {frame_len}"
    );
    if encap == Encap::Udp {
        // The datagram (IPv4 total length) holds the payload and lies inside the frame.
        let total = usize::from(u16::from_be_bytes([bytes[16], bytes[17]]));
        assert!(ETH_LEN + total <= frame_len && len + payload <= ETH_LEN + total);
    } else {
        assert_eq!(h.flow, 0, "no flow on Ethernet encapsulation");
    }
    for longer in [frame_len + 1, frame_len + 4096, usize::MAX] {
        assert_eq!(
            Header::parse(encap, bytes, longer),
            Ok(h),
            "{encap:?}: padding changed the frame's meaning"
        );
    }
    let mut out = [0u8; MAX_HEADER_LEN];
    let emitted = h.emit(encap, &mut out);
    assert_eq!(emitted.len(), len);
    assert_eq!(
        Header::parse(encap, emitted, len + payload),
        Ok(h),
        "{encap:?}: emit(parse(x)) does not parse back"
    );
    if encap == Encap::Ethernet {
        // Addresses, EtherType, version, flags, contexts and length: the bytes accepted; the
        // remote CQ data too when the flag says it is there.
        let exact = if h.data.is_some() { len } else { len - 8 };
        assert_eq!(
            &emitted[..exact],
            &bytes[..exact],
            "emit(parse(x)) differs from x"
        );
    }
}
