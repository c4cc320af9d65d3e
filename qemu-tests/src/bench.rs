//! `--bench`: ringfab side by side with DPDK on the same emulated NICs (docs/perf.md, "Side by
//! side with DPDK"). The guest is the test guest with DPDK's `dpdk-testpmd` added
//! ([`crate::dpdk`]), two vCPUs, more memory and huge pages; its program runs the bench
//! (`qemu-tests/guest/src/bench.rs`) instead of the tests and reports one measurement per
//! protocol line, which this module prints with the host's load average and condenses into
//! ratios.

use std::time::Duration;

use crate::boot::Outcome;

/// Rounds by default: each round measures every kind on every pair once, interleaved.
pub(crate) const DEFAULT_ROUNDS: usize = 3;
/// The pairs measured by default (the guest's names: `ringfab.<name>=`).
pub(crate) const DEFAULT_PAIRS: &str = "igb,e1000e,virtio";
/// Hard limit of a bench run by default (a run of three rounds on the three pairs takes about 25
/// minutes on a loaded host).
pub(crate) const DEFAULT_TIMEOUT_S: u64 = 2700;
/// How long the bench's guest may print nothing before the runner gives it up for stuck: the
/// guest's own per-kind watchdog (240 s) reports a stuck kind itself, unless the guest's
/// timers stop too — which one 3-round run showed on 2026-11-26 (a ping that never started,
/// the watchdog silent, one vCPU idle).
pub(crate) const SILENCE: Duration = Duration::from_secs(300);
/// Guest memory: two testpmd processes with their huge pages, and ringfab's rings.
const MEMORY: &str = "2G";
/// Two vCPUs: the frame source and the frame sink each poll on one (testpmd's two lcores, and
/// ringfab's two sides pinned the same way), instead of taking turns on one.
pub(crate) const CPUS: usize = 2;
/// 2 MiB huge pages reserved at boot for testpmd (512 MiB).
const HUGEPAGES: usize = 256;

/// The test guest's kernel command line with the bench's additions: huge pages, the TSC as
/// the clock, and the rounds and pairs the guest program reads (`ringfab.bench=`,
/// `ringfab.bench_nics=`).
///
/// The clock: under TCG the guest kernel does not trust the TSC and reads the HPET, so every
/// `clock_gettime` is a system call and a read of the HPET's counter — a trip into QEMU's
/// device model under its big lock, like a NIC register's (`--mmio` counted 1.2 HPET reads a
/// frame in ringfab's receive loop, which checks its deadline on each poll, and on both sides
/// of a plain-UDP stream, whose domain reads its clock on each CQ read). testpmd reads the
/// TSC itself and never paid it. `tsc=reliable` keeps the TSC (TCG derives every vCPU's from
/// one host counter), so that the clock costs every program what it costs on hardware: a `rdtsc` in the
/// vDSO.
pub(crate) fn append(base: &str, rounds: usize, pairs: &str) -> String {
    format!(
        "{base} default_hugepagesz=2M hugepagesz=2M hugepages={HUGEPAGES} \
         clocksource=tsc tsc=reliable ringfab.bench={rounds} ringfab.bench_nics={pairs}"
    )
}

/// The hub the bench puts the two virtio-net on (the tests' hubs are 0 and 1).
pub(crate) const VIRTIO_HUB: u8 = 2;

/// The test guest's QEMU arguments with the bench's memory and vCPUs, and the two virtio-net
/// on a hub of their own, like the other pairs, instead of the tests' bridged taps: the tests
/// need the taps for four queue pairs (a hub port has one), the bench uses one, and on the
/// taps every frame also crossed the host's bridge and QEMU's reads of the tap, which held
/// testpmd's sender to about 54 000 frames/s (97 000 on a hub, 2026-11-26) and made every
/// virtio-net figure partly the host's. Without `mq`, the device offers one queue pair.
pub(crate) fn machine(mut args: Vec<String>) -> Vec<String> {
    for (flag, value) in [("-m", MEMORY.to_owned()), ("-smp", CPUS.to_string())] {
        if let Some(i) = args.iter().position(|a| a == flag) {
            if let Some(v) = args.get_mut(i + 1) {
                *v = value.clone();
            }
        }
    }
    for a in &mut args {
        if let Some(rest) = a.strip_prefix("tap,id=") {
            let id = rest.split(',').next().unwrap_or_default();
            *a = format!("hubport,id={id},hubid={VIRTIO_HUB}");
        } else if a.starts_with("virtio-net-pci,") {
            *a = a.replace(",mq=on,rss=on", "");
        }
    }
    args
}

/// One measurement as the guest reported it (`bench/<pair>/<kind>/<round> <value> <unit> …`).
#[derive(Clone, PartialEq, Debug)]
pub(crate) struct Measurement {
    pub(crate) pair: String,
    pub(crate) kind: String,
    pub(crate) round: usize,
    pub(crate) value: f64,
    pub(crate) unit: String,
    /// What the kind's sender said it sent over about the same window, per second, where the
    /// detail says (`… sent N frames/s` or `… sent N messages/s`): testpmd's txonly or
    /// ringfab's sender.
    pub(crate) sent: Option<f64>,
}

/// The rate in a detail's first `sent N frames/s` or `sent N messages/s`.
fn sent_rate(detail: &str) -> Option<f64> {
    let words: Vec<&str> = detail.split_whitespace().collect();
    words.windows(3).find_map(|w| {
        (w[0] == "sent" && (w[2] == "frames/s" || w[2] == "messages/s"))
            .then(|| w[1].parse().ok())
            .flatten()
    })
}

/// The measurement in a guest outcome, if it is one that passed.
pub(crate) fn measurement(o: &Outcome) -> Option<Measurement> {
    let mut name = o.name.strip_prefix("bench/")?.split('/');
    let (pair, kind, round) = (name.next()?, name.next()?, name.next()?.parse().ok()?);
    let mut detail = o.detail.split_whitespace();
    let value = detail.next()?.parse().ok()?;
    let unit = detail.next()?.to_owned();
    o.passed.then(|| Measurement {
        pair: pair.to_owned(),
        kind: kind.to_owned(),
        round,
        value,
        unit,
        sent: sent_rate(&o.detail),
    })
}

/// The host's one-minute load average (the guest's vCPUs are threads of the host).
pub(crate) fn host_load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "?".into())
}

/// The ratios the bench reports: a name, the numerator's kind and the denominator's. Above 1
/// a rate ratio favours the numerator, a round-trip ratio the denominator.
const RATIOS: [(&str, &str, &str); 15] = [
    (
        "driver receive (ringfab-rx ÷ testpmd-rx)",
        "ringfab-rx",
        "testpmd-rx",
    ),
    (
        "endpoint streaming (ringfab-stream ÷ testpmd-rx)",
        "ringfab-stream",
        "testpmd-rx",
    ),
    (
        "endpoint receiver against rxonly, both fed by ringfab's sender \
         (ringfab-stream ÷ rxonly-ringfab-tx)",
        "ringfab-stream",
        "rxonly-ringfab-tx",
    ),
    (
        "driver receive against rxonly, both fed by ringfab's sender \
         (ringfab-rx-ringfab-tx ÷ rxonly-ringfab-tx)",
        "ringfab-rx-ringfab-tx",
        "rxonly-ringfab-tx",
    ),
    (
        "round trip (ringfab-rtt ÷ macswap-rtt)",
        "ringfab-rtt",
        "macswap-rtt",
    ),
    (
        "driver receive, blocking when idle (ringfab-rx-wait ÷ testpmd-rx)",
        "ringfab-rx-wait",
        "testpmd-rx",
    ),
    (
        "endpoint streaming, both sides blocking when idle (ringfab-stream-wait ÷ testpmd-rx)",
        "ringfab-stream-wait",
        "testpmd-rx",
    ),
    (
        "round trip, both sides blocking when idle (ringfab-rtt-wait ÷ macswap-rtt)",
        "ringfab-rtt-wait",
        "macswap-rtt",
    ),
    (
        "driver receive against Linux (ringfab-rx ÷ kernel-rx)",
        "ringfab-rx",
        "kernel-rx",
    ),
    (
        "round trip against Linux (ringfab-rtt ÷ kernel-rtt)",
        "ringfab-rtt",
        "kernel-rtt",
    ),
    (
        "round trip against Linux, blocking when idle (ringfab-rtt-wait ÷ kernel-rtt)",
        "ringfab-rtt-wait",
        "kernel-rtt",
    ),
    (
        "plain UDP's round trip (plain-rtt ÷ ringfab-rtt)",
        "plain-rtt",
        "ringfab-rtt",
    ),
    (
        "plain UDP's stream (plain-stream ÷ ringfab-stream)",
        "plain-stream",
        "ringfab-stream",
    ),
    (
        "plain UDP's round trip against Linux (plain-rtt ÷ kernel-rtt)",
        "plain-rtt",
        "kernel-rtt",
    ),
    (
        "plain UDP's stream against Linux (plain-stream ÷ kernel-stream)",
        "plain-stream",
        "kernel-stream",
    ),
];

/// The median and range of `v` (not empty).
fn median_range(v: &mut [f64]) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let median = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    (median, v[0], v[n - 1])
}

/// The summary: each kind's median [min–max] over rounds per pair, then each ratio computed
/// round by round (both figures of one round on one pair) and summarised the same way.
pub(crate) fn summary(ms: &[Measurement]) -> String {
    let mut pairs: Vec<&str> = Vec::new();
    let mut kinds: Vec<(&str, &str)> = Vec::new();
    for m in ms {
        if !pairs.contains(&m.pair.as_str()) {
            pairs.push(&m.pair);
        }
        if !kinds.iter().any(|(k, _)| *k == m.kind) {
            kinds.push((&m.kind, &m.unit));
        }
    }
    let mut out = String::from("| measurement | unit |");
    for p in &pairs {
        out.push_str(&format!(" {p} |"));
    }
    out.push_str(&format!("\n|---|---|{}\n", "---:|".repeat(pairs.len())));
    let cell = |v: &mut Vec<f64>, digits: usize| {
        if v.is_empty() {
            return "–".to_owned();
        }
        let (m, lo, hi) = median_range(v);
        format!(
            "{m:.digits$} [{lo:.digits$}–{hi:.digits$}] ({} rounds)",
            v.len()
        )
    };
    for (kind, unit) in &kinds {
        out.push_str(&format!("| {kind} | {unit} |"));
        for p in &pairs {
            let mut v: Vec<f64> = ms
                .iter()
                .filter(|m| m.pair == *p && m.kind == *kind)
                .map(|m| m.value)
                .collect();
            out.push_str(&format!(" {} |", cell(&mut v, 1)));
        }
        out.push('\n');
    }
    // What each receiver took of what its sender sent, where the sender said: which of the
    // two set a figure (docs/perf.md, "What the sender sent").
    for (kind, _) in &kinds {
        let mut cells = Vec::new();
        for p in &pairs {
            let mut v: Vec<f64> = ms
                .iter()
                .filter(|m| m.pair == *p && m.kind == *kind)
                .filter_map(|m| Some(m.value / m.sent.filter(|&s| s > 0.0)?))
                .collect();
            cells.push(cell(&mut v, 2));
        }
        if cells.iter().any(|c| c != "–") {
            out.push_str(&format!("| received ÷ sent, {kind} | × |"));
            for c in cells {
                out.push_str(&format!(" {c} |"));
            }
            out.push('\n');
        }
    }
    for (name, num, den) in RATIOS {
        out.push_str(&format!("| {name} | × |"));
        for p in &pairs {
            let of = |kind: &str, round: usize| {
                ms.iter()
                    .find(|m| m.pair == *p && m.kind == kind && m.round == round)
                    .map(|m| m.value)
            };
            let mut v: Vec<f64> = ms
                .iter()
                .filter(|m| m.pair == *p && m.kind == num)
                .filter_map(|m| Some(m.value / of(den, m.round)?))
                .collect();
            out.push_str(&format!(" {} |", cell(&mut v, 2)));
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(name: &str, detail: &str) -> Outcome {
        Outcome {
            name: name.into(),
            passed: true,
            detail: detail.into(),
        }
    }

    #[test]
    fn measurements_are_read_from_bench_outcomes_only() {
        let m = measurement(&outcome(
            "bench/igb/testpmd-rx/2",
            "41234.500 frames/s mean Rx-pps of 4 periods",
        ))
        .unwrap();
        assert_eq!(
            m,
            Measurement {
                pair: "igb".into(),
                kind: "testpmd-rx".into(),
                round: 2,
                value: 41234.5,
                unit: "frames/s".into(),
                sent: None,
            }
        );
        let fed = measurement(&outcome(
            "bench/e1000e/ringfab-rx/1",
            "592000.5 frames/s 2959897 frames in 5.00 s (first frame 0.8 s after opening); \
             testpmd's txonly sent 602419 frames/s (mean Tx-pps of its last 5 one-second periods)",
        ))
        .unwrap();
        assert_eq!(fed.sent, Some(602419.0));
        let stream = measurement(&outcome(
            "bench/igb/ringfab-stream/1",
            "290456.000 frames/s 34-byte messages, bursts of 32; the sender sent 574653 \
             messages/s (sent 4104992 in 7.1 s)",
        ))
        .unwrap();
        assert_eq!(stream.sent, Some(574653.0), "the rate, not the count");
        assert_eq!(measurement(&outcome("bench-setup", "pairs igb")), None);
        assert_eq!(measurement(&outcome("link", "1000 Mb/s")), None);
        let mut failed = outcome("bench/igb/ringfab-rx/1", "1 frames/s");
        failed.passed = false;
        assert_eq!(measurement(&failed), None);
    }

    #[test]
    fn ratios_pair_figures_of_the_same_round() {
        let m = |kind: &str, round, value| Measurement {
            pair: "igb".into(),
            kind: kind.into(),
            round,
            value,
            unit: "frames/s".into(),
            sent: None,
        };
        let fed = |kind: &str, round, value, sent| Measurement {
            sent: Some(sent),
            ..m(kind, round, value)
        };
        let ms = [
            fed("testpmd-rx", 1, 100.0, 200.0),
            m("ringfab-rx", 1, 80.0),
            fed("testpmd-rx", 2, 50.0, 200.0),
            m("ringfab-rx", 2, 45.0),
            m("kernel-rx", 2, 4.5),
        ];
        let s = summary(&ms);
        assert!(
            s.contains("| received ÷ sent, testpmd-rx | × | 0.38 [0.25–0.50] (2 rounds) |"),
            "{s}"
        );
        assert!(
            !s.contains("received ÷ sent, ringfab-rx"),
            "no row for a kind whose sender said nothing: {s}"
        );
        assert!(
            s.contains("| testpmd-rx | frames/s | 75.0 [50.0–100.0] (2 rounds) |"),
            "{s}"
        );
        assert!(
            s.contains(
                "| driver receive (ringfab-rx ÷ testpmd-rx) | × | 0.85 [0.80–0.90] (2 rounds) |"
            ),
            "{s}"
        );
        assert!(
            s.contains("| round trip (ringfab-rtt ÷ macswap-rtt) | × | – |"),
            "{s}"
        );
        assert!(
            s.contains(
                "| driver receive against Linux (ringfab-rx ÷ kernel-rx) | × | 10.00 \
                 [10.00–10.00] (1 rounds) |"
            ),
            "a round without the denominator has no ratio: {s}"
        );
    }

    #[test]
    fn the_bench_machine_has_two_cpus_and_more_memory() {
        let args: Vec<String> = ["-m", "512M", "-smp", "1", "-kernel", "k"]
            .map(String::from)
            .to_vec();
        assert_eq!(machine(args).join(" "), "-m 2G -smp 2 -kernel k");
        let virtio: Vec<String> = [
            "-netdev",
            "tap,id=nic4,ifname=rftap0,queues=4,script=no,downscript=no,vhost=off",
            "-device",
            "virtio-net-pci,netdev=nic4,addr=07.0,mac=m,romfile=,disable-legacy=on,\
             iommu_platform=on,mq=on,rss=on,vectors=10",
            "-netdev",
            "hubport,id=nic0,hubid=0",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(
            machine(virtio).join(" "),
            "-netdev hubport,id=nic4,hubid=2 -device virtio-net-pci,netdev=nic4,addr=07.0,\
             mac=m,romfile=,disable-legacy=on,iommu_platform=on,vectors=10 \
             -netdev hubport,id=nic0,hubid=0",
            "the virtio-net pair on a hub of its own, one queue pair"
        );
        // The test machine's own arguments, not a copy of them: what the rewrite looks for is
        // still there to find.
        let real = machine(crate::boot::qemu_args(
            std::path::Path::new("k"),
            std::path::Path::new("i"),
            crate::boot::Accel::Tcg,
            "x",
        ))
        .join(" ");
        assert!(!real.contains("tap,") && !real.contains("mq=on"), "{real}");
        assert_eq!(
            real.matches(&format!("hubid={VIRTIO_HUB}")).count(),
            2,
            "{real}"
        );
        assert!(append("console=ttyS0", 3, "igb").ends_with(
            "hugepages=256 clocksource=tsc tsc=reliable ringfab.bench=3 ringfab.bench_nics=igb"
        ));
    }
}
