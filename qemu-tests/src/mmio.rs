//! `--bench --mmio`: the register accesses behind each bench measurement (issue 17 item 3).
//!
//! QEMU logs every access to a device's registers through its `memory_region_ops_read` and
//! `memory_region_ops_write` trace events (`-trace`, the log backend Debian's QEMU is built
//! with), one line each: the vCPU that made it (`-1` for the device itself: an MSI is a write
//! to `apic-msi`), the region's name (`igb-mmio`, `e1000e-mmio`, `virtio-pci-notify-…`) and
//! whether it read or wrote. The guest marks the window each measurement counts over
//! (`mark start`, `mark end` on the console, from the process that measures); this module
//! counts the trace's lines between the two marks, and the runner divides by the frames (or
//! round trips) of that window — the measurement's rate times the window's length as the host
//! saw it, or the window's length over a round trip's.
//!
//! Every access is a call into QEMU's device model under its big lock, so this is where a
//! driver's cost under TCG hides that no instruction count shows. Tracing slows QEMU, so a run
//! with `--mmio` counts and does not time: its rates are not the bench's figures.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The `-trace` argument: both events, logged to `file`.
pub(crate) fn trace_arg(file: &Path) -> String {
    format!("enable=memory_region_ops_*,file={}", file.display())
}

/// One kind of access: the vCPU (`-1`: the device), the region, a write or a read.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub(crate) struct Access {
    pub(crate) cpu: i32,
    pub(crate) region: String,
    pub(crate) write: bool,
}

/// Parses one trace line: `memory_region_ops_write cpu 0 mr 0x… addr 0x… value 0x… size 4
/// name 'igb-mmio'`.
pub(crate) fn parse(line: &str) -> Option<Access> {
    let line = line.trim_end();
    let (event, rest) = line.split_once(' ')?;
    let write = match event {
        "memory_region_ops_write" => true,
        "memory_region_ops_read" => false,
        _ => return None,
    };
    let cpu = rest.strip_prefix("cpu ")?.split(' ').next()?.parse().ok()?;
    let region = rest.rsplit_once(" name '")?.1.strip_suffix('\'')?;
    Some(Access {
        cpu,
        region: region.to_owned(),
        write,
    })
}

/// Accesses of a window, by kind.
pub(crate) type Counts = BTreeMap<Access, u64>;

/// The trace file, read as QEMU appends to it.
pub(crate) struct Trace {
    path: PathBuf,
    file: Option<File>,
    /// The start of a line QEMU has not finished writing.
    partial: Vec<u8>,
    /// When the open window started.
    since: Option<Instant>,
}

impl Trace {
    pub(crate) fn new(path: PathBuf) -> Trace {
        Trace {
            path,
            file: None,
            partial: Vec::new(),
            since: None,
        }
    }

    /// Reads what QEMU wrote since the last call, counting whole lines.
    fn read_new(&mut self) -> Counts {
        let mut counts = Counts::new();
        if self.file.is_none() {
            self.file = File::open(&self.path).ok();
        }
        let Some(f) = self.file.as_mut() else {
            return counts;
        };
        let mut bytes = std::mem::take(&mut self.partial);
        if f.read_to_end(&mut bytes).is_err() {
            return counts;
        }
        let complete = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        self.partial = bytes.split_off(complete);
        for line in String::from_utf8_lossy(&bytes).lines() {
            if let Some(a) = parse(line) {
                *counts.entry(a).or_default() += 1;
            }
        }
        counts
    }

    /// `mark start`: what came before is not counted.
    pub(crate) fn start(&mut self) {
        self.read_new();
        self.since = Some(Instant::now());
    }

    /// `mark end`: the accesses since `start` and the window's length in seconds (`None`
    /// without a start).
    pub(crate) fn end(&mut self) -> Option<(Counts, f64)> {
        let since = self.since.take()?;
        let counts = self.read_new();
        Some((counts, since.elapsed().as_secs_f64()))
    }
}

/// How many units a window of `secs` held, from its measurement: frames (or messages,
/// datagrams) for a rate, round trips for a time per round trip.
pub(crate) fn units(value: f64, unit: &str, secs: f64) -> Option<(f64, &'static str)> {
    match unit {
        "µs" if value > 0.0 => Some((secs * 1e6 / value, "round trip")),
        "frames/s" | "messages/s" | "datagrams/s" => Some((value * secs, "frame")),
        _ => None,
    }
}

/// The accesses per unit, most frequent first, those of at least one per thousand units:
/// `igb-mmio CPU1 write 0.031, …`.
pub(crate) fn per_unit(counts: &Counts, units: f64) -> String {
    let mut v: Vec<(&Access, f64)> = counts
        .iter()
        .map(|(a, &n)| (a, n as f64 / units))
        .filter(|&(_, r)| r >= 0.001)
        .collect();
    v.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(b.0)));
    if v.is_empty() {
        return "none".into();
    }
    v.iter()
        .map(|(a, r)| {
            let who = if a.cpu < 0 {
                "device".to_owned()
            } else {
                format!("CPU{}", a.cpu)
            };
            let op = if a.write { "write" } else { "read" };
            format!("{} {who} {op} {r:.3}", a.region)
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trace_lines_parse_into_accesses() {
        let w = "memory_region_ops_write cpu 1 mr 0x55d0 addr 0x2818 value 0x1f size 4 \
                 name 'igb-mmio'";
        assert_eq!(
            parse(w),
            Some(Access {
                cpu: 1,
                region: "igb-mmio".into(),
                write: true
            })
        );
        let msi = "memory_region_ops_write cpu -1 mr 0x55 addr 0xfee00000 value 0x0 size 4 \
                   name 'apic-msi'\n";
        assert_eq!(parse(msi).map(|a| (a.cpu, a.write)), Some((-1, true)));
        let r = "memory_region_ops_read cpu 0 mr 0x1 addr 0x8 value 0x0 size 4 name 'e1000e-mmio'";
        assert_eq!(parse(r).map(|a| a.write), Some(false));
        assert_eq!(parse("memory_region_sync_dirty mr 'pc.ram'"), None);
        assert_eq!(parse("memory_region_ops_write cpu 0 mr 0x1 truncat"), None);
    }

    #[test]
    fn a_window_counts_only_what_qemu_wrote_after_its_start() {
        let dir = std::env::temp_dir().join(format!("ringfab-mmio-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("trace");
        let line = |cpu: i32| {
            format!(
                "memory_region_ops_write cpu {cpu} mr 0x1 addr 0x0 value 0x0 size 4 name 'igb-mmio'\n"
            )
        };
        std::fs::write(&path, line(0)).unwrap();
        let mut t = Trace::new(path.clone());
        assert!(t.end().is_none(), "no window without a start");
        t.start();
        // Two lines, the second written in two pieces.
        let second = line(1);
        let (a, b) = second.split_at(20);
        let append = |s: &str| {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new()
                .append(true)
                .open(&path)
                .unwrap();
            f.write_all(s.as_bytes()).unwrap();
        };
        append(&line(1));
        append(a);
        let (counts, _) = t.end().unwrap();
        assert_eq!(counts.values().sum::<u64>(), 1, "the unfinished line waits");
        t.start();
        append(b);
        let (counts, _) = t.end().unwrap();
        assert_eq!(
            counts.values().sum::<u64>(),
            1,
            "and is counted once finished"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn accesses_are_given_per_frame_or_per_round_trip() {
        assert_eq!(units(1000.0, "frames/s", 2.0), Some((2000.0, "frame")));
        assert_eq!(units(50.0, "µs", 1.0), Some((20_000.0, "round trip")));
        assert_eq!(units(0.0, "µs", 1.0), None);
        let mut c = Counts::new();
        let a = |cpu, write| Access {
            cpu,
            region: "igb-mmio".into(),
            write,
        };
        c.insert(a(1, true), 64);
        c.insert(a(0, false), 2000);
        c.insert(a(-1, true), 1);
        assert_eq!(
            per_unit(&c, 2000.0),
            "igb-mmio CPU0 read 1.000, igb-mmio CPU1 write 0.032"
        );
        assert_eq!(per_unit(&Counts::new(), 1.0), "none");
    }
}
