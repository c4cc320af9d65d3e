//! `cargo run --release -p ringfab-qemu-tests`: ringfab against QEMU's 82576 (`igb`), 82574
//! (`e1000e`) and virtio-net (`virtio-net-pci`) through VFIO, behind an emulated Intel IOMMU.
//!
//! On the host it installs what is missing (QEMU ≥ 8 from the release's backports suite, the
//! guest's Rust target and static libc), downloads the distribution's kernel, static busybox
//! and libfabric with the libraries it needs into the target directory (once), builds the guest
//! programs statically and the libfabric provider as the shared library it is, packs an
//! initramfs, and boots q35 + intel-iommu under TCG with two NICs of each model, each pair on
//! a wire of its own. In the guest, the guest
//! program (`qemu-tests/guest`) binds the NICs to vfio-pci and runs its tests; each prints one
//! line on the serial console, which this program reads and repeats. It ends with
//! `N passed, N failed` and exits non-zero on any failure, on a guest that stops early, or on
//! one that does not finish within the timeout. docs/qemu-tests.md has the details.
//!
//! `--bare-metal` instead boots ringfab's bare-metal image alone (`bare_metal.rs`,
//! docs/bare-metal.md): no Linux, two igb, a ping-pong.

mod apt;
mod bare_metal;
mod bench;
mod boot;
mod build;
mod cmd;
mod cpio;
mod cpu;
mod dpdk;
mod elf;
mod error;
mod libfabric;
mod mmio;
mod monitor;
mod netns;
mod setup;

use std::cell::{Cell, RefCell};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode};
use std::time::{Duration, Instant};

use boot::{Accel, End};
use error::{IoContext, Result};

/// The trace QEMU writes under `--mmio`, in the runner's cache.
const MMIO_TRACE: &str = "mmio.trace";
/// The samples `perf record` writes under `--perf`, in the runner's cache.
const PERF_DATA: &str = "perf.data";

const USAGE: &str = "usage: ringfab-qemu-tests [--timeout SECONDS] [--kvm] [--only TEST,TEST…] \
    [--verbose] [--bare-metal]\n  --timeout  hard limit for boot + guest tests (default 600)\n  \
    --kvm      use KVM instead of TCG (where nested KVM can run a stock kernel)\n  \
    --only     run only these guest tests (names as printed); with --bench, only these \
    kinds (testpmd-rx, ringfab-rtt, …)\n  \
    --verbose  echo the whole guest console\n  \
    --bare-metal  boot the bare-metal image (examples/bare-metal) instead of the Linux guest\n  \
    --bench    ringfab side by side with DPDK's testpmd (docs/perf.md); with --rounds N \
    (default 3) and --nics igb,e1000e,virtio; with --mmio, the register accesses per frame \
    of each measurement instead of its timing; with --perf, where the host's CPU went during \
    each (docs/perf.md)";

/// Command-line options.
#[derive(Debug)]
struct Options {
    timeout: Duration,
    accel: Accel,
    only: Option<String>,
    verbose: bool,
    /// Boot the bare-metal image instead of the Linux guest.
    bare_metal: bool,
    /// Run the side-by-side benchmark instead of the tests: (rounds, pairs).
    bench: Option<(usize, String)>,
    /// With the bench: trace register accesses and report them per frame.
    mmio: bool,
    /// With the bench: sample QEMU's threads and report where each measurement's CPU went.
    perf: bool,
}

fn parse_args(args: impl IntoIterator<Item = String>) -> std::result::Result<Options, String> {
    let mut o = Options {
        timeout: Duration::from_secs(600),
        accel: Accel::Tcg,
        only: None,
        verbose: false,
        bare_metal: false,
        bench: None,
        mmio: false,
        perf: false,
    };
    let (mut bench, mut rounds, mut pairs, mut timeout) = (false, None, None, false);
    let mut it = args.into_iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--timeout" => {
                let v = it.next().ok_or("--timeout needs a number of seconds")?;
                let s: u64 = v.parse().map_err(|_| format!("bad --timeout '{v}'"))?;
                o.timeout = Duration::from_secs(s);
                timeout = true;
            }
            "--bench" => bench = true,
            "--mmio" => o.mmio = true,
            "--perf" => o.perf = true,
            "--rounds" => {
                let v = it.next().ok_or("--rounds needs a number")?;
                rounds = Some(v.parse().map_err(|_| format!("bad --rounds '{v}'"))?);
            }
            "--nics" => pairs = Some(it.next().ok_or("--nics needs igb,e1000e,virtio")?),
            "--kvm" => o.accel = Accel::Kvm,
            "--only" => o.only = Some(it.next().ok_or("--only needs test names")?),
            "--verbose" | "-v" => o.verbose = true,
            "--bare-metal" => o.bare_metal = true,
            "--help" | "-h" => return Err(USAGE.into()),
            other => return Err(format!("unknown argument '{other}'\n{USAGE}")),
        }
    }
    if bench {
        if !timeout {
            o.timeout = Duration::from_secs(bench::DEFAULT_TIMEOUT_S);
        }
        let pairs = pairs.unwrap_or_else(|| bench::DEFAULT_PAIRS.into());
        if let Some(bad) = pairs
            .split(',')
            .find(|p| !bench::DEFAULT_PAIRS.split(',').any(|d| d == *p))
        {
            return Err(format!("--nics: no pair '{bad}' (igb, e1000e, virtio)"));
        }
        o.bench = Some((rounds.unwrap_or(bench::DEFAULT_ROUNDS), pairs));
    } else if rounds.is_some() || pairs.is_some() || o.mmio || o.perf {
        return Err(format!(
            "--rounds, --nics, --mmio and --perf go with --bench\n{USAGE}"
        ));
    }
    if o.mmio && o.perf {
        // Tracing every register access would be most of what the samples see.
        return Err(format!("--mmio and --perf exclude each other\n{USAGE}"));
    }
    Ok(o)
}

/// The workspace root (this package's parent) and the target directory (where this binary is:
/// `<target>/<profile>/ringfab-qemu-tests`).
fn locations() -> (PathBuf, PathBuf) {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("qemu-tests sits in the workspace")
        .to_path_buf();
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .or_else(|| {
            let exe = std::env::current_exe().ok()?;
            Some(exe.parent()?.parent()?.to_path_buf())
        })
        .unwrap_or_else(|| workspace.join("target"));
    (workspace, target)
}

/// Everything before the boot: prerequisites, guest programs, initramfs, the virtio-net wire.
/// Returns QEMU's arguments and the network namespace QEMU runs in.
fn prepare(
    o: &Options,
    workspace: &Path,
    target: &Path,
    cache: &Path,
) -> Result<(Vec<String>, netns::Netns)> {
    let t = Instant::now();
    let mut apt = apt::Apt::default();
    let (major, minor) = setup::ensure_qemu(&mut apt)?;
    setup::ensure_guest_toolchain(&mut apt)?;
    let files = setup::guest_files(&mut apt, cache)?;
    println!(
        "setup: QEMU {major}.{minor}, guest kernel {} ({}), {:.1} s",
        files.release,
        files
            .kernel
            .file_name()
            .unwrap_or_default()
            .to_string_lossy(),
        t.elapsed().as_secs_f64()
    );
    let t = Instant::now();
    let programs = build::guest_programs(workspace, target)?;
    let provider = build::provider(workspace, target)?;
    let mut fabric = libfabric::guest_files(&mut apt, cache, &provider)?;
    if o.bench.is_some() {
        fabric.extend(dpdk::guest_files(&mut apt, cache)?);
    }
    if o.perf {
        setup::ensure_perf(&mut apt)?;
    }
    let initrd = cache.join("initramfs.cpio");
    let image = boot::initramfs(&files, &programs, &fabric)?;
    std::fs::write(&initrd, &image).ctx("writing", &initrd)?;
    println!(
        "build: guest programs, provider, libfabric{} ({} files) and initramfs ({} KiB), {:.1} s",
        if o.bench.is_some() { ", DPDK" } else { "" },
        fabric.len(),
        image.len() / 1024,
        t.elapsed().as_secs_f64()
    );
    let ns = netns::Netns::create(&mut apt)?;
    println!(
        "wire: network namespace {} with taps {} ({} queues each) on one bridge",
        ns.name(),
        netns::TAPS.join(", "),
        netns::QUEUES
    );
    let mut append = boot::append(o.only.as_deref());
    if let Some((rounds, pairs)) = &o.bench {
        append = bench::append(&append, *rounds, pairs);
    }
    let mut args = boot::qemu_args(&files.kernel, &initrd, o.accel, &append);
    if o.bench.is_some() {
        args = bench::machine(args);
    }
    if o.mmio {
        args.push("-trace".into());
        args.push(mmio::trace_arg(&cache.join(MMIO_TRACE)));
    }
    if o.perf {
        // Threads named for the samples: `CPU 0/TCG`, `CPU 1/TCG`.
        args.push("-name".into());
        args.push("ringfab-bench,debug-threads=on".into());
    }
    Ok((args, ns))
}

/// The last `n` lines of the guest console, for a run that went wrong (CI logs then show why
/// without the file).
fn print_tail(log: &Path, n: usize) {
    if let Ok(text) = std::fs::read_to_string(log) {
        let lines: Vec<&str> = text.lines().collect();
        println!("guest console, last {} lines:", n.min(lines.len()));
        for l in &lines[lines.len().saturating_sub(n)..] {
            println!("  | {l}");
        }
    }
}

/// Stops `perf record` (QEMU has exited) and prints where the CPU went in each window.
fn cpu_report(mut perf: Child, data: &Path, windows: &[(String, f64, f64)]) {
    // SAFETY: kill on the pid of a child this process spawned and has not yet waited for.
    unsafe { libc::kill(perf.id() as libc::pid_t, libc::SIGINT) };
    let _ = perf.wait();
    let samples = match cpu::samples(data) {
        Ok(s) => s,
        Err(e) => {
            println!("cpu: {e}");
            return;
        }
    };
    println!("cpu: share of a host core and where it went, per measured window");
    for (name, start, end) in windows {
        println!(
            "  {name} ({:.2} s): {}",
            end - start,
            cpu::split(&samples, *start, *end)
        );
    }
}

fn summary(passed: usize, failed: usize) -> ExitCode {
    println!("{passed} passed, {failed} failed");
    if failed == 0 && passed > 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn main() -> ExitCode {
    let o = match parse_args(std::env::args().skip(1)) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let (workspace, target) = locations();
    let cache = target.join("qemu-tests");
    if let Err(e) = std::fs::create_dir_all(&cache) {
        eprintln!("error: creating {}: {e}", cache.display());
        return summary(0, 1);
    }
    if o.bare_metal {
        let (passed, failed) = bare_metal::run(&workspace, &target, &cache, o.timeout, o.verbose);
        return summary(passed, failed);
    }
    let (args, ns) = match prepare(&o, &workspace, &target, &cache) {
        Ok(a) => a,
        Err(e) => {
            println!("FAIL setup: {e}");
            return summary(0, 1);
        }
    };
    let log = cache.join("console.log");
    let virtio_wire = if o.bench.is_some() {
        format!("hub {}, one queue pair", bench::VIRTIO_HUB)
    } else {
        format!("bridged {}-queue taps", netns::QUEUES)
    };
    println!(
        "boot: q35 + intel-iommu, 2 × igb (hub 0), 2 × e1000e (hub 1), 2 × virtio-net \
         ({virtio_wire}), {:?}, timeout {} s (console: {})",
        o.accel,
        o.timeout.as_secs(),
        log.display()
    );
    let mut trace = mmio::Trace::new(cache.join(MMIO_TRACE));
    let mut window = None;
    let perf_data = cache.join(PERF_DATA);
    let qemu_pid = Cell::new(0);
    let profiler: RefCell<Option<Child>> = RefCell::new(None);
    let mut perf_start = None;
    let mut perf_window = None;
    let perf_windows: RefCell<Vec<(String, f64, f64)>> = RefCell::new(Vec::new());
    let show = |line: &boot::Line| {
        let r = match line {
            boot::Line::Outcome(r) => r,
            boot::Line::Mark(start) => {
                if o.mmio {
                    if *start {
                        trace.start();
                    } else {
                        window = trace.end();
                    }
                }
                if o.perf {
                    if *start {
                        perf_start = Some(cpu::now());
                    } else if let Some(s) = perf_start.take() {
                        perf_window = Some((s, cpu::now()));
                    }
                }
                return;
            }
            _ => return,
        };
        // Sampling starts with the first outcome (bench-setup), when QEMU has its threads.
        if o.perf && profiler.borrow().is_none() {
            let started = Command::new("perf")
                .args(cpu::record_args(&perf_data))
                .args(["-p", &qemu_pid.get().to_string()])
                .spawn();
            match started {
                Ok(c) => *profiler.borrow_mut() = Some(c),
                Err(e) => println!("  perf: not started: {e}"),
            }
        }
        if let (Some((s, e)), true) = (perf_window.take(), r.passed) {
            perf_windows.borrow_mut().push((r.name.clone(), s, e));
        }
        let verdict = if r.passed { "PASS" } else { "FAIL" };
        if o.bench.is_some() {
            // The load beside each figure: the host is shared, and the guest's vCPUs are its
            // threads.
            println!(
                "{verdict} {}: {} (host load {})",
                r.name,
                r.detail,
                bench::host_load()
            );
        } else {
            println!("{verdict} {}: {}", r.name, r.detail);
        }
        // The accesses of the window the measurement counted over.
        if let (Some((counts, secs)), Some(m)) = (window.take(), bench::measurement(r)) {
            if let Some((n, unit)) = mmio::units(m.value, &m.unit, secs) {
                println!(
                    "  mmio per {unit} ({n:.0} in {secs:.1} s): {}",
                    mmio::per_unit(&counts, n)
                );
            }
        }
    };
    // The bench's machine has a monitor, asked what it is doing if the guest falls silent.
    let monitor_socket = cache.join("monitor.sock");
    let mut args = args;
    if o.bench.is_some() {
        let _ = std::fs::remove_file(&monitor_socket);
        args.extend(monitor::args(&monitor_socket));
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let qemu = ns.command(setup::QEMU, &args);
    // The bench prints a line at least every minute or so (each kind, each mark); a guest
    // silent for longer is stuck where its own watchdog cannot tell (docs/perf.md).
    let ask = || monitor::ask(&monitor_socket, &monitor::stuck_commands(bench::CPUS));
    let silence = o.bench.is_some().then_some(boot::Silence {
        after: bench::SILENCE,
        ask: &ask,
    });
    let spawned = |pid| qemu_pid.set(pid);
    let run = boot::run(qemu, o.timeout, silence, &log, o.verbose, spawned, show);
    if let Some(p) = profiler.borrow_mut().take() {
        cpu_report(p, &perf_data, &perf_windows.borrow());
    }
    let (report, end, took) = match run {
        Ok(r) => r,
        Err(e) => {
            println!("FAIL boot: {e}");
            return summary(0, 1);
        }
    };
    let passed = report.outcomes.iter().filter(|r| r.passed).count();
    let mut failed = report.outcomes.len() - passed;
    if let Some(plan) = report.plan {
        if plan > report.outcomes.len() {
            let missing = plan - report.outcomes.len();
            println!("FAIL guest: {missing} of {plan} planned tests never reported");
            failed += missing;
        }
    }
    match &end {
        End::Finished => println!(
            "guest: booted, tested and powered off in {:.1} s",
            took.as_secs_f64()
        ),
        End::Exited(status) => {
            println!(
                "FAIL guest: QEMU exited ({status}) before the guest program finished; see {}",
                log.display()
            );
            failed += 1;
        }
        End::Silent(s) => {
            println!(
                "FAIL guest: no console line for {} s, QEMU killed; see {}",
                s.as_secs(),
                log.display()
            );
            failed += 1;
        }
        End::TimedOut => {
            println!(
                "FAIL guest: not finished after {} s, QEMU killed; see {}",
                o.timeout.as_secs(),
                log.display()
            );
            failed += 1;
        }
    }
    if end != End::Finished {
        print_tail(&log, 25);
    }
    if o.bench.is_some() {
        let ms: Vec<bench::Measurement> = report
            .outcomes
            .iter()
            .filter_map(bench::measurement)
            .collect();
        println!(
            "bench: median [min–max] over rounds\n{}",
            bench::summary(&ms)
        );
    }
    if report.plan.is_none() && end == End::Finished {
        println!("FAIL guest: the guest program announced no tests");
        failed += 1;
    }
    summary(passed, failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> std::result::Result<Options, String> {
        parse_args(s.split_whitespace().map(String::from))
    }

    #[test]
    fn options_default_to_tcg_and_ten_minutes() {
        let o = args("").unwrap();
        assert_eq!(
            (o.accel, o.timeout.as_secs(), o.verbose),
            (Accel::Tcg, 600, false)
        );
        let o = args("--kvm --timeout 60 --only link,cq -v").unwrap();
        assert_eq!(o.accel, Accel::Kvm);
        assert_eq!(o.timeout.as_secs(), 60);
        assert_eq!(o.only.as_deref(), Some("link,cq"));
        assert!(o.verbose);
        assert!(args("--timeout x").is_err());
        assert!(args("--frobnicate").unwrap_err().contains("usage"));
        assert!(args("").unwrap().bench.is_none());
        let b = args("--bench --rounds 2 --nics igb").unwrap();
        assert_eq!(b.bench, Some((2, "igb".into())));
        assert_eq!(b.timeout.as_secs(), bench::DEFAULT_TIMEOUT_S);
        assert_eq!(
            args("--bench").unwrap().bench,
            Some((3, "igb,e1000e,virtio".into()))
        );
        assert!(args("--rounds 2").is_err(), "--rounds without --bench");
        assert!(args("--bench --nics igb,e1000").is_err());
        assert!(args("--bench --mmio").unwrap().mmio);
        assert!(args("--mmio").is_err(), "--mmio without --bench");
        assert!(args("--bench --perf").unwrap().perf);
        assert!(args("--perf").is_err(), "--perf without --bench");
        assert!(args("--bench --perf --mmio").is_err());
    }
}
