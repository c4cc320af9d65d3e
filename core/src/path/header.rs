//! Reading ringfab's header out of a received buffer: [`parse_header`] copies and checks a whole
//! header (the general lane, a shared receive context's routing); [`FramedHead`] reads, in place,
//! the few fields the framed lane compares.

use super::op::Op;
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
    /// Reads the header of the frame in the buffer at `cpu`.
    ///
    /// # Safety
    /// `cpu` is the address of a buffer of at least 22 bytes of registered memory that the
    /// device has finished writing (its completion was observed with acquire ordering), owned
    /// by the operation being completed.
    #[inline(always)]
    pub(super) unsafe fn read(cpu: usize) -> FramedHead {
        let at = |offset: usize| (cpu + offset) as *const u8;
        // SAFETY: every read lies inside the buffer's first 22 bytes (the caller's promise);
        // unaligned reads of plain integers through raw pointers, no reference into memory a
        // device can write (DESIGN.md decision 5), as `parse_header`'s copy.
        unsafe {
            FramedHead {
                dst0: at(0).read(),
                w10: u64::from_le(at(10).cast::<u64>().read_unaligned()),
                payload_len: u16::from_be(at(20).cast::<u16>().read_unaligned()),
            }
        }
    }

    /// The sender's raw address in the frame at `cpu`, as an opaque key: the source MAC in
    /// bytes 0..6 and the source context (big-endian) in bytes 6..8 of its little-endian form.
    ///
    /// # Safety
    /// As [`read`](Self::read).
    #[inline(always)]
    pub(super) unsafe fn source(cpu: usize) -> u64 {
        let at = |offset: usize| (cpu + offset) as *const u8;
        // SAFETY: as in `read`: bytes 6..14 and 18..20 of the buffer.
        let (mac, ctx) = unsafe {
            (
                u64::from_le(at(6).cast::<u64>().read_unaligned()) & MAC_MASK,
                u64::from(u16::from_le(at(18).cast::<u16>().read_unaligned())),
            )
        };
        mac | ctx << 48
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
    if op.buf.cpu == 0 {
        return Err(());
    }
    let mut bytes = [0u8; proto::MAX_HEADER_LEN];
    let n = (frame_len as usize)
        .min(encap.header_len())
        .min(op.buf.len as usize);
    // SAFETY: `op.buf` is registered memory of at least `op.buf.len` bytes that this operation
    // owns (an owned `Buf`, or the raw poster's promise); the device has finished writing it —
    // the driver observed its write-back with acquire ordering before reporting the token.
    // `n` stays inside the buffer and inside `bytes`.
    unsafe {
        core::ptr::copy_nonoverlapping(op.buf.cpu as *const u8, bytes.as_mut_ptr(), n);
    }
    Header::parse(encap, &bytes[..n], frame_len as usize).map_err(|_| ())
}
