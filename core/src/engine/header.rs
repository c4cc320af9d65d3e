//! Reading ringfab's header out of a received buffer: [`parse_header`] copies and checks a whole
//! header (the general lane, a shared receive context's routing); [`FramedHead`] reads, in place,
//! the few fields the framed lane compares.

use super::op::{FrameHead, Op};
use crate::proto::{self, Encap, Header};

/// The low 48 bits of a `u64`: a MAC address read as a little-endian number.
const MAC_MASK: u64 = (1 << 48) - 1;

/// The part of a received frame's header the framed lane reads, in place: the first byte of
/// the Ethernet destination, bytes 10..18 (the end of the source MAC, EtherType, ringfab's
/// version, flags and destination context) and the payload length.
pub(super) struct FramedHead {
    dst0: u8,
    w10: u64,
    payload_len: u16,
}

impl FramedHead {
    /// Reads the header of the frame whose buffer starts with `head`, which the device has
    /// finished writing (its completion was observed with acquire ordering) and the operation
    /// being completed owns.
    #[inline(always)]
    pub(super) fn read(head: FrameHead) -> FramedHead {
        FramedHead {
            dst0: head.read_u8::<0>(),
            w10: head.read_u64_le::<10>(),
            payload_len: head.read_u16_be::<20>(),
        }
    }

    /// The sender's raw address in the frame whose buffer starts with `head`, as an opaque
    /// key: the source MAC in bytes 0..6 and the source context (big-endian) in bytes 6..8 of
    /// its little-endian form. As [`read`](Self::read).
    #[inline(always)]
    pub(super) fn source(head: FrameHead) -> u64 {
        head.read_u64_le::<6>() & MAC_MASK | u64::from(head.read_u16_le::<18>()) << 48
    }

    /// The payload length, if the frame is a plain success for the endpoint that expects
    /// `expect` ([`FramedLane::expect`]): ringfab's EtherType, version and context, no flags
    /// (remote CQ data takes the general lane), a unicast destination (a group frame carries
    /// `FI_MULTICAST`) and a payload inside the frame's `frame_len` bytes (so inside what a
    /// [`Lane::OwnedRecv`] operation accepted). Exactly the frames `rx_outcome` completes
    /// `Done` with nothing but a context, flags and a length (and the source it finds the same
    /// way).
    ///
    /// [`FramedLane::expect`]: super::FramedLane::expect
    /// [`Lane::OwnedRecv`]: super::op::Lane::OwnedRecv
    #[inline(always)]
    pub(super) fn payload(&self, expect: u64, frame_len: u32) -> Option<u32> {
        let len = u32::from(self.payload_len);
        // A shift, not a mask: a 64-bit mask would need one more register in a loop that has
        // none to spare.
        (self.w10 >> 16 == expect
            && len + proto::HEADER_LEN as u32 <= frame_len
            && self.dst0 & 1 == 0)
            .then_some(len)
    }
}

/// Reads and checks the ringfab header of a received frame out of its buffer (whoever it is
/// for).
#[inline(always)]
pub(super) fn parse_header(
    encap: Encap,
    op: &Op,
    frame_len: u32,
) -> core::result::Result<Header, ()> {
    let mut bytes = [0u8; proto::MAX_HEADER_LEN];
    let n = (frame_len as usize)
        .min(encap.header_len())
        .min(op.buf.span.len());
    // The operation owns the buffer, and the device has finished writing it: the driver
    // observed its write-back with acquire ordering before reporting the token. A buffer
    // without a CPU address (empty span) has no header to read.
    if n == 0 || op.buf.span.read_bytes(0, &mut bytes[..n]).is_err() {
        return Err(());
    }
    Header::parse(encap, &bytes[..n], frame_len as usize).map_err(|_| ())
}
