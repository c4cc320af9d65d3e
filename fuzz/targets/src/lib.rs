//! The bodies of ringfab's fuzz targets, one public function per target, each taking the
//! fuzzer's bytes and panicking on a finding.
//!
//! Two callers share them: the libFuzzer targets in `fuzz/fuzz_targets/` (`cargo +nightly fuzz
//! run <target>`, a project of its own outside the workspace) and this crate's corpus replay
//! (`tests/replay.rs`, plain `cargo test` on stable), which runs every file under
//! `fuzz/corpus/<target>/` through the same function. `docs/reliability.md` says what each
//! target checks and how long it ran.
//!
//! The functions accept any input, however short: a target reads its operations from the
//! bytes with [`Bytes`], and stops (after its final checks) when they run out.

pub mod api_sequence;
pub mod frame_parse;
pub mod intel_rx;
pub mod intel_tx;
pub mod ip_classify;
pub mod virtio_bringup;
pub mod virtio_used;

/// A reader of fuzzer bytes: each value is taken from the front, little-endian; `None` once
/// the bytes run out (a value cut short reads as `None` too, never a partial value).
pub struct Bytes<'a> {
    rest: &'a [u8],
}

impl<'a> Bytes<'a> {
    /// A reader over `data`.
    pub fn new(data: &'a [u8]) -> Self {
        Bytes { rest: data }
    }

    /// Bytes not read yet.
    pub fn rest(&self) -> &'a [u8] {
        self.rest
    }

    /// Whether every byte was read.
    pub fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    fn take<const K: usize>(&mut self) -> Option<[u8; K]> {
        let (head, tail) = self.rest.split_first_chunk::<K>()?;
        self.rest = tail;
        Some(*head)
    }

    /// The next byte.
    pub fn u8(&mut self) -> Option<u8> {
        self.take::<1>().map(|b| b[0])
    }

    /// The next two bytes.
    pub fn u16(&mut self) -> Option<u16> {
        self.take().map(u16::from_le_bytes)
    }

    /// The next four bytes.
    pub fn u32(&mut self) -> Option<u32> {
        self.take().map(u32::from_le_bytes)
    }

    /// The next eight bytes.
    pub fn u64(&mut self) -> Option<u64> {
        self.take().map(u64::from_le_bytes)
    }

    /// The next byte as a flag (its low bit).
    pub fn bool(&mut self) -> Option<bool> {
        self.u8().map(|b| b & 1 != 0)
    }
}

/// A target's body: the fuzzer's bytes in, a panic on a finding.
pub type Body = fn(&[u8]);

/// Every target by its name (the `fuzz/fuzz_targets/<name>.rs` file and the corpus folder
/// `fuzz/corpus/<name>/`) with its body: what the replay runs.
pub const TARGETS: &[(&str, Body)] = &[
    ("frame_parse", frame_parse::run),
    ("intel_rx_writeback", intel_rx::run),
    ("intel_tx_writeback", intel_tx::run),
    ("virtio_bringup", virtio_bringup::run),
    ("api_sequence", api_sequence::run),
    ("virtio_used_ring", virtio_used::run),
    ("ip_classify", ip_classify::run),
];
