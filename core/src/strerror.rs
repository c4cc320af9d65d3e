//! `fi_cq_strerror`: ringfab's provider error encoding, and turning it back into readable text.
//!
//! # ringfab's `prov_errno` and `err_data`
//!
//! An error completion carries the general reason in `err` (a positive libfabric errno) and the
//! device-level detail in two fields, encoded as [`ProvError`]:
//!
//! * `prov_errno` is a small positive **kind** code saying where the error came from
//!   ([`ProvError::kind`]): 1 receive frame error, 2 receive length lie, 3 receive fragment,
//!   4 invalid receive status, 5 receive flushed, 6 transmit flushed, 7 invalid transmit status,
//!   8 critical queue fault (the endpoint was disabled; fi_endpoint(3) "critical error"),
//!   255 another device error. 0 means "no provider detail": the error was made by ringfab
//!   itself (truncation, cancellation, unknown source, overrun) and `err` says it all.
//! * `err_data` carries the kind's numbers, little-endian: the device's raw error bits (`u32`)
//!   for a frame error, `reported` then `capacity` (`u32`, `u32`) for a length lie, the raw
//!   status word (`u64`) for an invalid status, the fault's code (one byte,
//!   [`QueueFault::code`]) for a critical fault; nothing for the other kinds. (For an
//!   `FI_EADDRNOTAVAIL` completion `err_data` is the raw source address instead, as `fi_cq(3)`
//!   requires, and `prov_errno` is 0.)
//!
//! Keeping the device bits in `err_data` rather than in `prov_errno` keeps all 32 of them (a NIC
//! may use the sign bit; igb's receive errors are bits 23–31) and lets one code describe every
//! device. [`strerror`] names the bits with the device's own table
//! ([`Nic::rx_error_name`](ringfab_hal::Nic::rx_error_name)).

use core::fmt;

use super::errdata::ERR_DATA_MAX;
use crate::hal::{QueueFault, RxError, TxError};
use crate::Error;

/// Device-level detail of an error completion; see the [module documentation](self) for how it
/// is stored in `prov_errno` and `err_data`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ProvError {
    /// The NIC reported a bad frame; `bits` are its raw error bits.
    RxFrame {
        /// The device's error bits as it wrote them.
        bits: u32,
    },
    /// The NIC claimed to write `reported` bytes into a `capacity`-byte buffer.
    RxLength {
        /// Length the device wrote back.
        reported: u32,
        /// The buffer's length.
        capacity: u32,
    },
    /// A piece of a frame the NIC split across buffers and never ended (no end-of-packet): a
    /// device that lies. (A frame that does not fit its buffer is `FI_ETRUNC`, not this.)
    RxFragment,
    /// The NIC wrote a receive status the driver cannot interpret.
    RxDeviceStatus {
        /// The raw status word.
        raw: u64,
    },
    /// The receive queue was flushed before the buffer was filled.
    RxFlushed,
    /// The transmit queue was flushed before the frame was sent.
    TxFlushed,
    /// The NIC wrote a transmit status the driver cannot accept.
    TxDeviceStatus {
        /// The raw status word.
        raw: u64,
    },
    /// The queue met a critical fault and its endpoint was disabled (every pending operation
    /// discarded); the endpoint's `enable` tries to bring it back.
    QueueFault(QueueFault),
    /// A device error of a kind this version of ringfab does not know.
    Other,
}

impl ProvError {
    /// `prov_errno` of an error ringfab made itself: no provider detail.
    pub const NONE: i32 = 0;

    /// The detail of a receive error from the driver.
    pub const fn from_rx(e: RxError) -> ProvError {
        match e {
            RxError::Frame { bits } => ProvError::RxFrame { bits },
            RxError::Length { reported, capacity } => ProvError::RxLength { reported, capacity },
            RxError::Fragment => ProvError::RxFragment,
            RxError::DeviceStatus { raw } => ProvError::RxDeviceStatus { raw },
            RxError::Flushed => ProvError::RxFlushed,
            _ => ProvError::Other,
        }
    }

    /// The detail of a transmit error from the driver.
    pub const fn from_tx(e: TxError) -> ProvError {
        match e {
            TxError::Flushed => ProvError::TxFlushed,
            TxError::DeviceStatus { raw } => ProvError::TxDeviceStatus { raw },
            _ => ProvError::Other,
        }
    }

    /// The `prov_errno` kind code (1–8, or 255 for [`ProvError::Other`]).
    pub const fn kind(&self) -> i32 {
        match self {
            ProvError::RxFrame { .. } => 1,
            ProvError::RxLength { .. } => 2,
            ProvError::RxFragment => 3,
            ProvError::RxDeviceStatus { .. } => 4,
            ProvError::RxFlushed => 5,
            ProvError::TxFlushed => 6,
            ProvError::TxDeviceStatus { .. } => 7,
            ProvError::QueueFault(_) => 8,
            ProvError::Other => 255,
        }
    }

    /// Encodes `self` as `(prov_errno, err_data length)`, writing the `err_data` bytes into
    /// `out`.
    pub fn encode(&self, out: &mut [u8; ERR_DATA_MAX]) -> (i32, usize) {
        let len = match *self {
            ProvError::RxFrame { bits } => {
                out[..4].copy_from_slice(&bits.to_le_bytes());
                4
            }
            ProvError::RxLength { reported, capacity } => {
                out[..4].copy_from_slice(&reported.to_le_bytes());
                out[4..8].copy_from_slice(&capacity.to_le_bytes());
                8
            }
            ProvError::RxDeviceStatus { raw } | ProvError::TxDeviceStatus { raw } => {
                out[..8].copy_from_slice(&raw.to_le_bytes());
                8
            }
            ProvError::QueueFault(f) => {
                out[0] = f.code();
                1
            }
            ProvError::RxFragment
            | ProvError::RxFlushed
            | ProvError::TxFlushed
            | ProvError::Other => 0,
        };
        (self.kind(), len)
    }

    /// Decodes `prov_errno` and `err_data`. `None` for [`ProvError::NONE`], for an unknown
    /// kind, or when `err_data` is too short for the kind's numbers (a caller buffer that
    /// truncated it).
    pub fn decode(prov_errno: i32, err_data: &[u8]) -> Option<ProvError> {
        let u32_at = |off: usize| -> Option<u32> {
            Some(u32::from_le_bytes(
                err_data.get(off..off + 4)?.try_into().ok()?,
            ))
        };
        let u64_at0 =
            || -> Option<u64> { Some(u64::from_le_bytes(err_data.get(..8)?.try_into().ok()?)) };
        Some(match prov_errno {
            1 => ProvError::RxFrame { bits: u32_at(0)? },
            2 => ProvError::RxLength {
                reported: u32_at(0)?,
                capacity: u32_at(4)?,
            },
            3 => ProvError::RxFragment,
            4 => ProvError::RxDeviceStatus { raw: u64_at0()? },
            5 => ProvError::RxFlushed,
            6 => ProvError::TxFlushed,
            7 => ProvError::TxDeviceStatus { raw: u64_at0()? },
            8 => ProvError::QueueFault(QueueFault::from_code(*err_data.first()?)?),
            255 => ProvError::Other,
            _ => return None,
        })
    }
}

/// Writes a readable description of an error completion to `out`.
///
/// `err` is the completion's general reason if known (`fi_cq_strerror` is not given it; the
/// safe read path is), `prov_errno` and `err_data` are the completion's fields as ringfab
/// encodes them (see the [module documentation](self)), and `name_of_bit` names bit `n` of a
/// frame error as the device defines it — pass
/// [`Nic::rx_error_name`](ringfab_hal::Nic::rx_error_name). Bits without a name print as
/// `bit n`.
///
/// Examples of the output: `"input/output error: receive frame error: CRC error, receive data
/// error"`, `"truncation error"`, `"provider error 77"`.
///
/// # Errors
/// Only what `out` returns.
pub fn strerror(
    err: Option<Error>,
    prov_errno: i32,
    err_data: &[u8],
    name_of_bit: impl Fn(u32) -> Option<&'static str>,
    out: &mut impl fmt::Write,
) -> fmt::Result {
    if let Some(e) = err {
        write!(out, "{e}")?;
        if prov_errno == ProvError::NONE {
            return Ok(());
        }
        out.write_str(": ")?;
    } else if prov_errno == ProvError::NONE {
        return out.write_str("no provider error information");
    }

    let Some(detail) = ProvError::decode(prov_errno, err_data) else {
        return match prov_errno {
            1 => out.write_str("receive frame error (error bits unavailable)"),
            2 => out.write_str("device reported a bad receive length (lengths unavailable)"),
            4 => out.write_str("device wrote an invalid receive status"),
            7 => out.write_str("device wrote an invalid transmit status"),
            8 => out.write_str("critical queue fault: endpoint disabled"),
            n => write!(out, "provider error {n}"),
        };
    };
    match detail {
        ProvError::RxFrame { bits } => {
            out.write_str("receive frame error: ")?;
            if bits == 0 {
                return out.write_str("no error bits set");
            }
            let mut first = true;
            for bit in (0..32).filter(|b| bits & (1 << b) != 0) {
                if !first {
                    out.write_str(", ")?;
                }
                first = false;
                match name_of_bit(bit) {
                    Some(name) => out.write_str(name)?,
                    None => write!(out, "bit {bit}")?,
                }
            }
            Ok(())
        }
        ProvError::RxLength { reported, capacity } => write!(
            out,
            "device reported {reported} bytes written into a {capacity}-byte buffer"
        ),
        ProvError::RxFragment => out.write_str("frame split across receive buffers"),
        ProvError::RxDeviceStatus { raw } => {
            write!(out, "device wrote an invalid receive status {raw:#x}")
        }
        ProvError::RxFlushed => out.write_str("receive queue flushed before the buffer was filled"),
        ProvError::TxFlushed => out.write_str("transmit queue flushed before the frame was sent"),
        ProvError::TxDeviceStatus { raw } => {
            write!(out, "device wrote an invalid transmit status {raw:#x}")
        }
        ProvError::QueueFault(f) => write!(out, "critical queue fault, endpoint disabled: {f}"),
        ProvError::Other => out.write_str("unknown device error"),
    }
}

/// A [`fmt::Write`] into a fixed byte buffer that keeps room for a terminating NUL and cuts
/// overlong text at a character boundary, as `snprintf` does: what `fi_cq_strerror`'s
/// `buf`/`len` need.
#[derive(Debug)]
pub struct SliceWriter<'a> {
    buf: &'a mut [u8],
    len: usize,
    truncated: bool,
}

impl<'a> SliceWriter<'a> {
    /// A writer into `buf` (which holds at most `buf.len() - 1` bytes of text plus NUL).
    pub fn new(buf: &'a mut [u8]) -> SliceWriter<'a> {
        SliceWriter {
            buf,
            len: 0,
            truncated: false,
        }
    }

    /// The text written so far.
    pub fn as_str(&self) -> &str {
        // Only whole characters of `&str`s are ever copied in, so this cannot fail; fall back
        // to "" rather than panic.
        core::str::from_utf8(&self.buf[..self.len]).unwrap_or("")
    }

    /// Whether some text did not fit.
    pub fn truncated(&self) -> bool {
        self.truncated
    }

    /// Writes the terminating NUL (if the buffer is not empty) and returns the text.
    pub fn finish(self) -> &'a str {
        if let Some(b) = self.buf.get_mut(self.len) {
            *b = 0;
        }
        let text: &'a [u8] = &self.buf[..self.len];
        core::str::from_utf8(text).unwrap_or("")
    }
}

impl fmt::Write for SliceWriter<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let room = self.buf.len().saturating_sub(1).saturating_sub(self.len);
        let mut n = s.len().min(room);
        while !s.is_char_boundary(n) {
            n -= 1;
        }
        if n < s.len() {
            self.truncated = true;
        }
        self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same names as drivers/igb's `RX_ERROR_NAMES` (82576 datasheet, RDESC.ERRORS), kept
    /// here so that core does not depend on a driver.
    fn igb_names(bit: u32) -> Option<&'static str> {
        const NAMES: [(u32, &str); 9] = [
            (23, "header buffer overflow"),
            (24, "CRC error"),
            (25, "symbol error"),
            (26, "sequence error"),
            (27, "security (LinkSec) error"),
            (28, "carrier extension / security error"),
            (29, "TCP/UDP checksum error"),
            (30, "IPv4 checksum error"),
            (31, "receive data error"),
        ];
        NAMES.iter().find(|(b, _)| *b == bit).map(|(_, n)| *n)
    }

    fn render(err: Option<Error>, prov_errno: i32, data: &[u8]) -> ([u8; 256], usize) {
        let mut buf = [0u8; 256];
        let mut w = SliceWriter::new(&mut buf);
        strerror(err, prov_errno, data, igb_names, &mut w).unwrap();
        let n = w.as_str().len();
        (buf, n)
    }

    fn text(r: &([u8; 256], usize)) -> &str {
        core::str::from_utf8(&r.0[..r.1]).unwrap()
    }

    fn encoded(p: ProvError) -> (i32, [u8; ERR_DATA_MAX], usize) {
        let mut data = [0u8; ERR_DATA_MAX];
        let (errno, len) = p.encode(&mut data);
        (errno, data, len)
    }

    #[test]
    fn strerror_names_igb_frame_error_bits() {
        let (e, d, n) = encoded(ProvError::RxFrame {
            bits: (1 << 24) | (1 << 31),
        });
        let r = render(None, e, &d[..n]);
        assert_eq!(
            text(&r),
            "receive frame error: CRC error, receive data error"
        );
        let r = render(Some(Error::Io), e, &d[..n]);
        assert_eq!(
            text(&r),
            "input/output error: receive frame error: CRC error, receive data error"
        );
    }

    #[test]
    fn strerror_prints_unnamed_bits_by_number() {
        let (e, d, n) = encoded(ProvError::RxFrame {
            bits: (1 << 3) | (1 << 30),
        });
        assert_eq!(
            text(&render(None, e, &d[..n])),
            "receive frame error: bit 3, IPv4 checksum error"
        );
    }

    #[test]
    fn strerror_without_provider_detail_prints_err_only() {
        assert_eq!(
            text(&render(Some(Error::Trunc), 0, &[])),
            "truncation error"
        );
        assert_eq!(text(&render(None, 0, &[])), "no provider error information");
    }

    #[test]
    fn strerror_with_truncated_err_data_says_so() {
        let (e, d, _) = encoded(ProvError::RxFrame { bits: 1 << 24 });
        assert_eq!(
            text(&render(None, e, &d[..2])),
            "receive frame error (error bits unavailable)"
        );
        assert_eq!(text(&render(None, 77, &[])), "provider error 77");
    }

    #[test]
    fn strerror_describes_every_kind() {
        let cases = [
            (
                ProvError::RxLength {
                    reported: 3000,
                    capacity: 2048,
                },
                "device reported 3000 bytes written into a 2048-byte buffer",
            ),
            (ProvError::RxFragment, "frame split across receive buffers"),
            (
                ProvError::RxDeviceStatus { raw: 0xdead },
                "device wrote an invalid receive status 0xdead",
            ),
            (
                ProvError::RxFlushed,
                "receive queue flushed before the buffer was filled",
            ),
            (
                ProvError::TxFlushed,
                "transmit queue flushed before the frame was sent",
            ),
            (
                ProvError::TxDeviceStatus { raw: 0x1_0000_0000 },
                "device wrote an invalid transmit status 0x100000000",
            ),
            (ProvError::Other, "unknown device error"),
        ];
        for (p, want) in cases {
            let (e, d, n) = encoded(p);
            assert_eq!(text(&render(None, e, &d[..n])), want, "{p:?}");
        }
    }

    #[test]
    fn prov_errno_encoding_round_trips() {
        for p in [
            ProvError::RxFrame { bits: u32::MAX },
            ProvError::RxLength {
                reported: 9,
                capacity: 8,
            },
            ProvError::RxFragment,
            ProvError::RxDeviceStatus { raw: u64::MAX },
            ProvError::RxFlushed,
            ProvError::TxFlushed,
            ProvError::TxDeviceStatus { raw: 1 },
            ProvError::Other,
        ] {
            let (e, d, n) = encoded(p);
            assert!(e > 0);
            assert_eq!(ProvError::decode(e, &d[..n]), Some(p));
        }
        assert_eq!(ProvError::decode(ProvError::NONE, &[]), None);
        // err_data is little-endian.
        let (_, d, n) = encoded(ProvError::RxFrame { bits: 0x8100_0000 });
        assert_eq!(&d[..n], &[0, 0, 0, 0x81]);
    }

    #[test]
    fn hal_errors_map_to_their_kinds() {
        assert_eq!(
            ProvError::from_rx(RxError::Frame { bits: 1 << 24 }),
            ProvError::RxFrame { bits: 1 << 24 }
        );
        assert_eq!(ProvError::from_rx(RxError::Flushed).kind(), 5);
        assert_eq!(ProvError::from_tx(TxError::Flushed).kind(), 6);
        assert_eq!(
            ProvError::from_tx(TxError::DeviceStatus { raw: 3 }),
            ProvError::TxDeviceStatus { raw: 3 }
        );
    }

    #[test]
    fn slice_writer_truncates_at_a_char_boundary_and_terminates() {
        use core::fmt::Write;
        let mut buf = [0xffu8; 8];
        let mut w = SliceWriter::new(&mut buf);
        write!(w, "abcdé€x").unwrap(); // é is 2 bytes, € 3
        assert!(w.truncated());
        assert_eq!(w.finish(), "abcdé");
        assert_eq!(buf[6], 0, "NUL after the text");
        let mut empty: [u8; 0] = [];
        let mut w = SliceWriter::new(&mut empty);
        w.write_str("x").unwrap();
        assert_eq!(w.finish(), "");
    }
}
