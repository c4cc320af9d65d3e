//! `--bench --perf`: where the host's CPU goes during each bench measurement (issue 17
//! item 3, "how often each makes QEMU's model run").
//!
//! Under TCG every cost of a measurement is a host thread's time: each vCPU thread runs the
//! guest's code translated (TCG's generated code) and, from inside it, QEMU — the softmmu's
//! slow paths, and every register access's device model, under QEMU's big lock — while the
//! main loop thread runs what is not tied to a vCPU: virtio-net's transmit bottom half and
//! receive, hub deliveries it starts, timers. On a 2-core host two polling vCPUs and the main
//! loop share two cores, so a device model that lives in the main loop gets what the vCPUs
//! leave it.
//!
//! Once the guest reports its set-up, `perf record` samples every thread of QEMU (software
//! `cpu-clock` samples at [`FREQUENCY`] Hz, timestamped with `CLOCK_MONOTONIC`), whose threads
//! are named (`-name …,debug-threads=on`: `CPU 0/TCG`, `CPU 1/TCG`; the main loop keeps the
//! process's name).
//! The runner notes the monotonic time of each `mark start` / `mark end` the guest prints
//! around a measurement's window, and afterwards sorts the window's samples by thread and by
//! where the sampled instruction was: the guest's translated code (anonymous executable memory:
//! perf names it `[unknown]`, `//anon` or QEMU's `perf-<pid>.map`), QEMU's binary (TCG's
//! runtime and the device models: Debian's QEMU is stripped, so the two cannot be told apart
//! by name), the host kernel, or a library (libc's mutexes and copies, GLib's main loop).
//!
//! A thread's share is its samples over the window's length times [`FREQUENCY`]: 100 % is a
//! host core for the whole window. Sampling slows QEMU little, but a `--perf` run's rates are
//! not the bench's figures: its point is the split.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use crate::cmd;
use crate::error::Result;

/// Samples per second and thread.
pub(crate) const FREQUENCY: u32 = 999;

/// The name QEMU's process (and so its main loop thread) has.
const MAIN_LOOP: &str = "qemu-system-x86";

/// Where a sample's instruction was.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub(crate) enum Place {
    /// The guest's code, translated by TCG.
    Guest,
    /// QEMU's binary: TCG's runtime and the device models.
    Qemu,
    /// The host kernel.
    Kernel,
    /// A shared library (libc, GLib, …).
    Library,
}

impl Place {
    fn name(self) -> &'static str {
        match self {
            Place::Guest => "guest code",
            Place::Qemu => "QEMU",
            Place::Kernel => "host kernel",
            Place::Library => "libraries",
        }
    }

    /// The place of a sample from the object perf resolved its address to.
    pub(crate) fn of(dso: &str) -> Place {
        if dso.contains("kernel.kallsyms") || dso.starts_with("[kernel") {
            Place::Kernel
        } else if dso.contains("qemu-system") {
            Place::Qemu
        } else if dso.contains(".so") || dso == "[vdso]" {
            Place::Library
        } else {
            // `[unknown]`, `//anon`, `/tmp/perf-<pid>.map`: TCG's generated code.
            Place::Guest
        }
    }
}

/// One sample: the thread's name, its time (s, `CLOCK_MONOTONIC`) and its place.
#[derive(Clone, PartialEq, Debug)]
pub(crate) struct Sample {
    pub(crate) thread: String,
    pub(crate) time: f64,
    pub(crate) place: Place,
}

/// Parses a line of `perf script -F comm,time,ip,dso`:
/// `CPU 0/TCG  1234.567890:  7f0838bf4b96 (/tmp/perf-30830.map)`. The thread's name may hold
/// spaces; the time is the field that ends in `:`.
pub(crate) fn parse(line: &str) -> Option<Sample> {
    let (head, dso) = line.trim_end().rsplit_once('(')?;
    let dso = dso.strip_suffix(')')?;
    let fields: Vec<&str> = head.split_whitespace().collect();
    let at = fields.iter().rposition(|f| f.ends_with(':'))?;
    let time = fields[at].strip_suffix(':')?.parse().ok()?;
    Some(Sample {
        thread: fields[..at].join(" "),
        time,
        place: Place::of(dso),
    })
}

/// `perf record`'s arguments but the process to sample (`-p <pid>`): every thread, into
/// `data`.
pub(crate) fn record_args(data: &Path) -> Vec<String> {
    [
        "record",
        "-q",
        "-e",
        "cpu-clock",
        "-F",
        &FREQUENCY.to_string(),
        "-k",
        "CLOCK_MONOTONIC",
        "-o",
        &data.display().to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// The time now on the clock perf stamps samples with, in seconds.
pub(crate) fn now() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given, which lives for the call.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// Every sample of `data`, read with `perf script`.
///
/// # Errors
/// As [`cmd::output`]'s.
pub(crate) fn samples(data: &Path) -> Result<Vec<Sample>> {
    let out = cmd::output(
        "reading perf's samples",
        Command::new("perf")
            .args(["script", "-F", "comm,time,ip,dso", "-i"])
            .arg(data),
    )?;
    Ok(out.lines().filter_map(parse).collect())
}

/// What a window's samples say, one line: each busy thread's share of a host core and where
/// it went, the main loop first and then the vCPUs in order.
pub(crate) fn split(samples: &[Sample], start: f64, end: f64) -> String {
    let mut threads: BTreeMap<(u8, &str), BTreeMap<Place, u64>> = BTreeMap::new();
    for s in samples.iter().filter(|s| s.time >= start && s.time < end) {
        let order = if s.thread == MAIN_LOOP {
            0
        } else if s.thread.starts_with("CPU ") {
            1
        } else {
            2
        };
        *threads
            .entry((order, &s.thread))
            .or_default()
            .entry(s.place)
            .or_default() += 1;
    }
    let possible = (end - start) * f64::from(FREQUENCY);
    let mut out = String::new();
    for ((_, thread), places) in &threads {
        let total: u64 = places.values().sum();
        let share = total as f64 / possible;
        if share < 0.02 {
            continue;
        }
        let name = if *thread == MAIN_LOOP {
            "main loop"
        } else {
            thread
        };
        let _ = write!(out, "{}{name} {:.0}% (", sep(&out), share * 100.0);
        let mut by: Vec<(&Place, &u64)> = places.iter().collect();
        by.sort_by(|a, b| b.1.cmp(a.1));
        for (i, (place, n)) in by.iter().enumerate() {
            let pct = **n as f64 * 100.0 / total as f64;
            let _ = write!(
                out,
                "{}{} {pct:.0}%",
                if i == 0 { "" } else { ", " },
                place.name()
            );
        }
        out.push(')');
    }
    if out.is_empty() {
        out.push_str("no samples");
    }
    out
}

fn sep(s: &str) -> &'static str {
    if s.is_empty() {
        ""
    } else {
        "; "
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_perf_script_line_gives_thread_time_and_place() {
        let s = parse("       CPU 0/TCG  11363.960537:      7f0838bf4b96 (/tmp/perf-30830.map)")
            .unwrap();
        assert_eq!(s.thread, "CPU 0/TCG");
        assert!((s.time - 11363.960537).abs() < 1e-9);
        assert_eq!(s.place, Place::Guest);
        let k = parse("qemu-system-x86  11363.9:  ffffffff821e8f67 ([kernel.kallsyms])").unwrap();
        assert_eq!((k.thread.as_str(), k.place), (MAIN_LOOP, Place::Kernel));
        assert_eq!(
            parse("CPU 1/TCG 1.5:  563548d832f9 (/usr/bin/qemu-system-x86_64)")
                .unwrap()
                .place,
            Place::Qemu
        );
        assert_eq!(
            parse("CPU 1/TCG 1.5:  7f08 (/usr/lib/x86_64-linux-gnu/libc.so.6)")
                .unwrap()
                .place,
            Place::Library
        );
        assert_eq!(
            parse("CPU 1/TCG 1.5:  ([unknown])").unwrap().place,
            Place::Guest
        );
        assert_eq!(parse("no time here (x)"), None);
    }

    #[test]
    fn a_window_is_split_by_thread_then_place_in_shares_of_a_core() {
        let f = f64::from(FREQUENCY);
        let mut samples = Vec::new();
        // One second: CPU 0 busy all of it, 3/4 in guest code; the main loop half of it.
        for i in 0..FREQUENCY {
            let t = 10.0 + f64::from(i) / f;
            let place = if i % 4 == 0 {
                Place::Qemu
            } else {
                Place::Guest
            };
            samples.push(Sample {
                thread: "CPU 0/TCG".into(),
                time: t,
                place,
            });
            if i % 2 == 0 {
                samples.push(Sample {
                    thread: MAIN_LOOP.into(),
                    time: t,
                    place: Place::Qemu,
                });
            }
        }
        // Outside the window.
        samples.push(Sample {
            thread: "CPU 1/TCG".into(),
            time: 12.0,
            place: Place::Guest,
        });
        assert_eq!(
            split(&samples, 10.0, 11.0),
            "main loop 50% (QEMU 100%); CPU 0/TCG 100% (guest code 75%, QEMU 25%)"
        );
        assert_eq!(split(&samples, 20.0, 21.0), "no samples");
    }
}
