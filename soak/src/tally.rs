//! The soak's totals: named counts, printed grouped by the part of the name before its first
//! dot (`posted.send`, `completed.recv.FI_ETRUNC`, `fault.wire.drop`, …).

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

/// Named counts of one NIC's run (or of several, [`merge`](Self::merge)d).
#[derive(Clone, Default, Debug)]
pub struct Tally {
    counts: BTreeMap<&'static str, u64>,
    /// Wall-clock time of the run.
    pub elapsed: Duration,
}

impl Tally {
    /// Adds `n` to the count `name`.
    pub fn add(&mut self, name: &'static str, n: u64) {
        if n > 0 {
            *self.counts.entry(name).or_default() += n;
        }
    }

    /// Adds one to the count `name`.
    pub fn bump(&mut self, name: &'static str) {
        self.add(name, 1);
    }

    /// The count `name` (0 if never counted).
    pub fn get(&self, name: &str) -> u64 {
        self.counts.get(name).copied().unwrap_or(0)
    }

    /// The sum of every count whose name starts with `prefix`.
    pub fn sum(&self, prefix: &str) -> u64 {
        self.counts
            .iter()
            .filter(|(k, _)| k.starts_with(prefix))
            .map(|(_, v)| v)
            .sum()
    }

    /// Adds every count of `other` (and its time) to this one.
    pub fn merge(&mut self, other: &Tally) {
        for (k, v) in &other.counts {
            self.add(k, *v);
        }
        self.elapsed += other.elapsed;
    }
}

/// The libfabric name of a completion error's `err` (a positive errno).
pub fn errno_name(err: i32) -> &'static str {
    match err {
        5 => "FI_EIO",
        125 => "FI_ECANCELED",
        265 => "FI_ETRUNC",
        _ => "other",
    }
}

impl fmt::Display for Tally {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut group = "";
        for (name, v) in &self.counts {
            let Some((g, rest)) = name.split_once('.') else {
                writeln!(f, "  {name}: {v}")?;
                group = "";
                continue;
            };
            if g != group {
                writeln!(f, "  {g}: {}", self.sum(&format!("{g}.")))?;
                group = g;
            }
            writeln!(f, "    {rest:<40} {v:>12}")?;
        }
        let ops = self.get("ops");
        let secs = self.elapsed.as_secs_f64();
        write!(
            f,
            "  elapsed {secs:.1} s, {:.0} operations/s",
            if secs > 0.0 { ops as f64 / secs } else { 0.0 }
        )
    }
}
