//! `--bare-metal`: builds ringfab's bare-metal image (`examples/bare-metal`, docs/bare-metal.md)
//! and boots it with QEMU's `-kernel` on a q35 machine with two `igb` on one hub, no operating
//! system, no IOMMU. The image finds both NICs, opens a ringfab endpoint on each, runs a
//! ping-pong with every byte checked and ends QEMU through `isa-debug-exit`.
//!
//! The test passes when the console says the ping-pong completed (`ping-pong done`, then
//! `PASS`) **and** QEMU exits with status 33, the image's success code 0x10 as
//! `isa-debug-exit` reports it (`(0x10 << 1) | 1`): either alone could come from something
//! else — a failure after the line, a status from a reset (QEMU exits 0 on a triple fault with
//! `-no-reboot`).

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::apt::Apt;
use crate::boot::Outcome;
use crate::cmd;
use crate::error::{Error, IoContext, Result};
use crate::setup::{self, QEMU};

/// The image's Rust target.
const TARGET: &str = "x86_64-unknown-none";
/// What each console line of the image starts with (`examples/bare-metal/src/main.rs`).
const MARKER: &str = "ringfab-bare-metal: ";
/// QEMU's exit status for the image's success code (`exit.rs` there).
const SUCCESS_STATUS: i32 = 33;
/// The two NICs: PCI slot and MAC. Eight slots apart, as in the Linux guest (QEMU's igb keeps
/// the functions after its own for its VFs).
const NICS: [(&str, &str); 2] = [("03.0", "52:54:00:12:34:03"), ("0b.0", "52:54:00:12:34:0b")];

/// Builds the image (release: the size-tuned profile) from its own directory, where its
/// `.cargo/config.toml` gives the target and the relocation model, into
/// `<target>/bare-metal`; returns the ELF's path.
///
/// # Errors
/// [`Error::Command`] if rustup or cargo fails, [`Error::Unexpected`] if the ELF is not where
/// cargo puts it.
pub(crate) fn build_image(workspace: &Path, target_dir: &Path) -> Result<PathBuf> {
    let installed = cmd::output(
        "listing installed Rust targets",
        Command::new("rustup").args(["target", "list", "--installed"]),
    )?;
    if !installed.lines().any(|l| l.trim() == TARGET) {
        cmd::run(
            "adding the image's Rust target",
            Command::new("rustup").args(["target", "add", TARGET]),
        )?;
    }
    let out = target_dir.join("bare-metal");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut c = Command::new(cargo);
    // Flags from the environment would replace the image's own (its relocation model).
    c.current_dir(workspace.join("examples/bare-metal"))
        .args(["build", "--release"])
        .env("CARGO_TARGET_DIR", &out)
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("CARGO_BUILD_TARGET");
    cmd::run("building the bare-metal image", &mut c)?;
    let elf = out.join(TARGET).join("release").join("ringfab-bare-metal");
    if elf.exists() {
        Ok(elf)
    } else {
        Err(Error::Unexpected {
            what: "the bare-metal build",
            detail: format!("{} was not built", elf.display()),
        })
    }
}

/// QEMU's arguments: q35 under TCG, the image as `-kernel` (PVH), COM1 on stdout, the exit
/// device at 0xf4, and the two igb on hub 0.
pub(crate) fn qemu_args(image: &Path) -> Vec<String> {
    let mut a: Vec<String> = [
        "-machine",
        "q35,accel=tcg",
        "-cpu",
        "max",
        "-m",
        "64M",
        "-smp",
        "1",
        "-nodefaults",
        "-display",
        "none",
        "-serial",
        "stdio",
        "-no-reboot",
        "-device",
        "isa-debug-exit,iobase=0xf4,iosize=0x04",
        "-kernel",
    ]
    .map(String::from)
    .to_vec();
    a.push(image.display().to_string());
    for (i, (slot, mac)) in NICS.iter().enumerate() {
        a.push("-netdev".into());
        a.push(format!("hubport,id=bm{i},hubid=0"));
        a.push("-device".into());
        a.push(format!("igb,netdev=bm{i},addr={slot},mac={mac}"));
    }
    a
}

/// The test's outcome from the image's console lines and QEMU's exit status (`None`: killed
/// at the timeout).
pub(crate) fn verdict(console: &[String], status: Option<i32>) -> Outcome {
    let said = |what: &str| {
        console
            .iter()
            .filter_map(|l| l.strip_prefix(MARKER))
            .find(|l| l.starts_with(what))
            .map(str::to_owned)
    };
    let (passed, detail) = match (said("ping-pong done"), said("PASS"), status) {
        (Some(done), Some(_), Some(SUCCESS_STATUS)) => (true, done),
        (_, _, None) => (false, "not finished before the timeout, QEMU killed".into()),
        (_, _, Some(code)) => {
            let why = said("FAIL")
                .or_else(|| said("PANIC"))
                .unwrap_or_else(|| "no ping-pong result on the console".into());
            (false, format!("{why} (QEMU exit status {code})"))
        }
    };
    Outcome {
        name: "bare-metal-pingpong".into(),
        passed,
        detail,
    }
}

/// Boots `image`, echoes its console (every line with `verbose`, else only the image's), writes
/// it to `log`, and returns the verdict and how long it took.
///
/// # Errors
/// [`Error::Spawn`] if QEMU cannot start; [`Error::Io`] for the log.
pub(crate) fn boot(
    image: &Path,
    timeout: Duration,
    log: &Path,
    verbose: bool,
) -> Result<(Outcome, Duration)> {
    let args = qemu_args(image);
    let mut c = Command::new(QEMU);
    c.args(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let started = Instant::now();
    let mut child = c.spawn().map_err(|source| Error::Spawn {
        what: "booting the bare-metal image",
        cmd: cmd::line(&c),
        source,
    })?;
    let mut log_file = std::fs::File::create(log).ctx("creating", log)?;
    let (tx, rx) = mpsc::channel();
    let out = child.stdout.take().expect("piped");
    std::thread::spawn(move || {
        for l in BufReader::new(out)
            .split(b'\n')
            .map_while(std::io::Result::ok)
        {
            let l = String::from_utf8_lossy(&l)
                .trim_end_matches('\r')
                .to_owned();
            if tx.send(l).is_err() {
                return;
            }
        }
    });
    let err = child.stderr.take().expect("piped");
    let stderr = std::thread::spawn(move || {
        BufReader::new(err)
            .lines()
            .map_while(std::io::Result::ok)
            .collect::<Vec<_>>()
    });
    let deadline = started + timeout;
    let mut console = Vec::new();
    // The reader ends (the channel closes) when QEMU closes its stdout, that is when it exits.
    while let Ok(l) = rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
        let _ = writeln!(log_file, "{l}");
        if verbose || l.starts_with(MARKER) {
            println!("  | {l}");
        }
        console.push(l);
    }
    let status = if Instant::now() >= deadline {
        let _ = child.kill();
        let _ = child.wait();
        None
    } else {
        let s: ExitStatus = child.wait().ctx("waiting for", QEMU)?;
        s.code()
    };
    for l in stderr.join().unwrap_or_default() {
        let _ = writeln!(log_file, "qemu: {l}");
        // The hub joins the two NICs and nothing else, on purpose.
        if !l.contains("is not connected to host network") {
            println!("  qemu: {l}");
        }
    }
    Ok((verdict(&console, status), started.elapsed()))
}

/// The whole `--bare-metal` run: QEMU if it is missing, the image, one boot under TCG; prints
/// the steps and one test line. Returns `(passed, failed)`.
pub(crate) fn run(
    workspace: &Path,
    target_dir: &Path,
    cache: &Path,
    timeout: Duration,
    verbose: bool,
) -> (usize, usize) {
    let log = cache.join("bare-metal-console.log");
    let steps = || -> Result<(Outcome, Duration)> {
        let (major, minor) = setup::ensure_qemu(&mut Apt::default())?;
        let t = Instant::now();
        let image = build_image(workspace, target_dir)?;
        println!(
            "build: bare-metal image {}, {:.1} s",
            image.display(),
            t.elapsed().as_secs_f64()
        );
        println!(
            "boot: QEMU {major}.{minor}, q35 under TCG, -kernel (PVH), 2 × igb (hub 0), no \
             IOMMU, timeout {} s (console: {})",
            timeout.as_secs(),
            log.display()
        );
        boot(&image, timeout, &log, verbose)
    };
    match steps() {
        Ok((r, took)) => {
            let verdict = if r.passed { "PASS" } else { "FAIL" };
            println!(
                "{verdict} {}: {} ({:.1} s)",
                r.name,
                r.detail,
                took.as_secs_f64()
            );
            (usize::from(r.passed), usize::from(!r.passed))
        }
        Err(e) => {
            println!("FAIL bare-metal: {e}");
            (0, 1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(s: &[&str]) -> Vec<String> {
        s.iter().map(|l| (*l).to_owned()).collect()
    }

    #[test]
    fn qemu_gets_the_image_the_exit_device_and_two_igb_on_one_hub() {
        let a = qemu_args(Path::new("img")).join(" ");
        assert!(a.contains("-kernel img"), "{a}");
        assert!(a.contains("isa-debug-exit,iobase=0xf4,iosize=0x04"), "{a}");
        assert!(a.contains("-no-reboot"), "{a}");
        assert_eq!(a.matches("hubport,id=bm").count(), 2);
        assert_eq!(a.matches(",hubid=0").count(), 2);
        assert!(a.contains("igb,netdev=bm0,addr=03.0"), "{a}");
        assert!(a.contains("igb,netdev=bm1,addr=0b.0"), "{a}");
    }

    #[test]
    fn passes_only_with_the_result_line_and_the_success_status() {
        let done = lines(&[
            "SeaBIOS noise",
            "ringfab-bare-metal: ping-pong done: 1000 round trips",
            "ringfab-bare-metal: PASS",
        ]);
        let v = verdict(&done, Some(33));
        assert!(v.passed);
        assert_eq!(v.detail, "ping-pong done: 1000 round trips");
        // The right lines with another status (a reset after them exits 0), or the right
        // status without the lines, or a timeout: failures.
        assert!(!verdict(&done, Some(0)).passed);
        assert!(!verdict(&done, None).passed);
        assert!(!verdict(&lines(&["ringfab-bare-metal: PASS"]), Some(33)).passed);
    }

    #[test]
    fn a_failure_says_what_the_image_said() {
        let failed = lines(&["ringfab-bare-metal: FAIL the message never reached B"]);
        let v = verdict(&failed, Some(35));
        assert!(!v.passed);
        assert_eq!(
            v.detail,
            "FAIL the message never reached B (QEMU exit status 35)"
        );
        let panicked = lines(&["ringfab-bare-metal: PANIC at src/x.rs:3"]);
        assert!(verdict(&panicked, Some(35)).detail.starts_with("PANIC at"));
        assert!(verdict(&[], None).detail.contains("timeout"));
    }
}
