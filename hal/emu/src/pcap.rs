//! A minimal pcap writer (and reader, for checking what was written).
//!
//! Classic libpcap format: a 24-byte global header (magic `0xa1b2c3d4` written in little-endian,
//! version 2.4, snaplen 65535, link type 1 = Ethernet), then per frame a 16-byte record header
//! (seconds, microseconds, captured length, original length) and the frame bytes. Timestamps are
//! emulated, not wall-clock, so captures are reproducible.

use std::io::{self, Write};

/// Link type of Ethernet frames (LINKTYPE_ETHERNET).
pub const LINKTYPE_ETHERNET: u32 = 1;
const MAGIC: u32 = 0xa1b2_c3d4;
const SNAPLEN: u32 = 65535;

/// Writes frames to `W` in pcap format.
pub struct PcapWriter<W: Write> {
    out: W,
}

impl<W: Write> PcapWriter<W> {
    /// Writes the global header and returns the writer.
    ///
    /// # Errors
    /// Any I/O error of `out`.
    pub fn new(mut out: W) -> io::Result<Self> {
        let mut h = Vec::with_capacity(24);
        h.extend_from_slice(&MAGIC.to_le_bytes());
        h.extend_from_slice(&2u16.to_le_bytes());
        h.extend_from_slice(&4u16.to_le_bytes());
        h.extend_from_slice(&0i32.to_le_bytes()); // thiszone
        h.extend_from_slice(&0u32.to_le_bytes()); // sigfigs
        h.extend_from_slice(&SNAPLEN.to_le_bytes());
        h.extend_from_slice(&LINKTYPE_ETHERNET.to_le_bytes());
        out.write_all(&h)?;
        Ok(PcapWriter { out })
    }

    /// Appends one frame stamped `micros` microseconds after the epoch.
    ///
    /// # Errors
    /// Any I/O error of the underlying writer.
    pub fn write_frame(&mut self, micros: u64, frame: &[u8]) -> io::Result<()> {
        let caplen = frame.len().min(SNAPLEN as usize);
        let mut h = Vec::with_capacity(16);
        h.extend_from_slice(&((micros / 1_000_000) as u32).to_le_bytes());
        h.extend_from_slice(&((micros % 1_000_000) as u32).to_le_bytes());
        h.extend_from_slice(&(caplen as u32).to_le_bytes());
        h.extend_from_slice(&(frame.len() as u32).to_le_bytes());
        self.out.write_all(&h)?;
        self.out.write_all(&frame[..caplen])?;
        self.out.flush()
    }

    /// Gives the underlying writer back.
    pub fn into_inner(self) -> W {
        self.out
    }
}

/// One record read back from a pcap file.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct PcapRecord {
    /// Timestamp in microseconds.
    pub micros: u64,
    /// Length of the frame on the wire.
    pub orig_len: u32,
    /// The captured bytes.
    pub data: Vec<u8>,
}

/// Parses a little-endian pcap file with link type Ethernet; `None` if it is not one, or if it is
/// truncated.
pub fn parse(bytes: &[u8]) -> Option<Vec<PcapRecord>> {
    let u32_at = |off: usize| -> Option<u32> {
        Some(u32::from_le_bytes(
            bytes.get(off..off + 4)?.try_into().ok()?,
        ))
    };
    if u32_at(0)? != MAGIC || u32_at(20)? != LINKTYPE_ETHERNET {
        return None;
    }
    let mut records = Vec::new();
    let mut off = 24;
    while off < bytes.len() {
        let secs = u64::from(u32_at(off)?);
        let usecs = u64::from(u32_at(off + 4)?);
        let caplen = u32_at(off + 8)? as usize;
        let orig_len = u32_at(off + 12)?;
        let data = bytes.get(off + 16..off + 16 + caplen)?.to_vec();
        records.push(PcapRecord {
            micros: secs * 1_000_000 + usecs,
            orig_len,
            data,
        });
        off += 16 + caplen;
    }
    Some(records)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_pcap_parses_back_with_the_same_frames() {
        let mut w = PcapWriter::new(Vec::new()).unwrap();
        w.write_frame(1, &[1, 2, 3]).unwrap();
        w.write_frame(2_000_001, &[0xff; 60]).unwrap();
        let bytes = w.into_inner();
        assert_eq!(bytes.len(), 24 + 16 + 3 + 16 + 60);
        let recs = parse(&bytes).unwrap();
        assert_eq!(recs.len(), 2);
        assert_eq!(
            recs[0],
            PcapRecord {
                micros: 1,
                orig_len: 3,
                data: vec![1, 2, 3]
            }
        );
        assert_eq!(recs[1].micros, 2_000_001);
        assert_eq!(recs[1].data, vec![0xff; 60]);
    }

    #[test]
    fn truncated_pcap_is_refused() {
        let mut w = PcapWriter::new(Vec::new()).unwrap();
        w.write_frame(0, &[1, 2, 3, 4]).unwrap();
        let bytes = w.into_inner();
        assert!(parse(&bytes[..bytes.len() - 1]).is_none());
        assert!(parse(&bytes[..10]).is_none());
    }
}
