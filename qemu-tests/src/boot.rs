//! The guest: its initramfs, the QEMU command line, and reading its serial console until the
//! guest program says it is done, the machine stops, or the hard timeout kills it.

use std::fs::{self, File};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::cmd;
use crate::cpio::Archive;
use crate::error::{Error, IoContext, Result};
use crate::netns;
use crate::setup::{GuestFiles, QEMU};

/// One emulated NIC of the guest.
#[derive(Clone, Copy, Debug)]
pub(crate) struct NicSpec {
    /// QEMU's device model.
    pub(crate) model: &'static str,
    /// PCI slot on the root bus.
    pub(crate) slot: &'static str,
    /// Its MAC.
    pub(crate) mac: &'static str,
    /// What it is plugged into.
    pub(crate) wire: WireSpec,
}

/// A NIC's network backend.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum WireSpec {
    /// A port of QEMU hub N: NICs on one hub see each other's frames.
    Hub(u8),
    /// A multiqueue tap of the run's network namespace ([`crate::netns`]), bridged to the
    /// other tap there.
    Tap(&'static str),
}

/// The guest's NICs: two 82576 (`igb`) on hub 0, two 82574 (`e1000e`) on hub 1, two modern
/// virtio-net (`virtio-net-pci`) on the bridged multiqueue taps of [`netns`]. The igb sit eight slots apart: QEMU's igb reserves
/// the functions after its own for its VFs (PF + 0x80…), so two igb in adjacent slots do not
/// fit. `romfile=` keeps QEMU from looking for an option ROM for e1000e and virtio-net (a
/// package the harness does not install); [`device_options`] has the rest.
pub(crate) const NICS: [NicSpec; 6] = [
    NicSpec {
        model: "igb",
        slot: "03.0",
        mac: "52:54:00:12:34:03",
        wire: WireSpec::Hub(0),
    },
    NicSpec {
        model: "igb",
        slot: "0b.0",
        mac: "52:54:00:12:34:0b",
        wire: WireSpec::Hub(0),
    },
    NicSpec {
        model: "e1000e",
        slot: "05.0",
        mac: "52:54:00:12:34:05",
        wire: WireSpec::Hub(1),
    },
    NicSpec {
        model: "e1000e",
        slot: "06.0",
        mac: "52:54:00:12:34:06",
        wire: WireSpec::Hub(1),
    },
    NicSpec {
        model: "virtio-net-pci",
        slot: "07.0",
        mac: "52:54:00:12:34:07",
        wire: WireSpec::Tap(netns::TAPS[0]),
    },
    NicSpec {
        model: "virtio-net-pci",
        slot: "08.0",
        mac: "52:54:00:12:34:08",
        wire: WireSpec::Tap(netns::TAPS[1]),
    },
];

/// The key under which the guest finds a model's NICs: `ringfab.<key>=` and
/// `ringfab.<key>_macs=`.
pub(crate) fn model_key(model: &str) -> &str {
    match model {
        "virtio-net-pci" => "virtio",
        other => other,
    }
}

/// What a model's `-device` gets after its MAC. virtio-net: `disable-legacy=on` makes it the
/// modern-only 1af4:1041 the driver expects, and `iommu_platform=on` offers
/// `VIRTIO_F_ACCESS_PLATFORM`, without which QEMU's virtio DMA bypasses the vIOMMU; `mq` and
/// `rss` offer `VIRTIO_NET_F_MQ` and `VIRTIO_NET_F_RSS`.
pub(crate) fn device_options(model: &str) -> &'static str {
    match model {
        "e1000e" => ",romfile=",
        // mq=on,rss=on: as many queue pairs as the tap has queues (netns::QUEUES), RSS in
        // QEMU (in software where its eBPF steering cannot load); vectors: one per virtqueue
        // (2 × 4 + the control queue) and one for configuration changes.
        "virtio-net-pci" => ",romfile=,disable-legacy=on,iommu_platform=on,mq=on,rss=on,vectors=10",
        _ => "",
    }
}

/// What each guest line starts with; the rest is `plan N`, `pass NAME DETAIL`,
/// `fail NAME REASON` or `done`.
pub(crate) const MARKER: &str = "ringfab-guest: ";

/// The initramfs: busybox, `/init`, the modules, the guest programs, and `extra` files at
/// the paths given (libfabric, its libraries and the provider: [`crate::libfabric`]), each
/// directory made before what is in it.
pub(crate) fn initramfs(
    files: &GuestFiles,
    programs: &[(String, PathBuf)],
    extra: &[(String, PathBuf)],
) -> Result<Vec<u8>> {
    let read = |p: &Path| fs::read(p).ctx("reading", p);
    let mut a = Archive::default();
    let mut dirs: Vec<String> = ["bin", "dev", "proc", "sys", "tmp", "modules", "modules/nic"]
        .map(String::from)
        .to_vec();
    for (name, _) in extra {
        let mut parent = Path::new(name).parent();
        let mut chain = Vec::new();
        while let Some(p) = parent.filter(|p| !p.as_os_str().is_empty()) {
            chain.push(p.to_string_lossy().into_owned());
            parent = p.parent();
        }
        for d in chain.into_iter().rev() {
            if !dirs.contains(&d) {
                dirs.push(d);
            }
        }
    }
    for d in &dirs {
        a.dir(d);
    }
    // The kernel opens /dev/console for init before devtmpfs is mounted.
    a.char_dev("dev/console", 0o600, 5, 1);
    a.file("bin/busybox", 0o755, &read(&files.busybox)?);
    a.file("init", 0o755, include_str!("../init.sh").as_bytes());
    for (name, path) in &files.modules {
        a.file(name, 0o644, &read(path)?);
    }
    for (name, path) in programs.iter().chain(extra) {
        a.file(name, 0o755, &read(path)?);
    }
    Ok(a.finish())
}

/// How to accelerate the guest.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Accel {
    /// QEMU's translator: works everywhere, the default.
    Tcg,
    /// KVM, for hosts where it works (nested KVM on some cloud machines cannot run the guest).
    Kvm,
}

/// The kernel command line: the console, the IOMMU, and for each NIC model its PCI addresses
/// and MACs (`ringfab.<model>=A,B`, `ringfab.<model>_macs=A,B`), which the guest program reads.
pub(crate) fn append(only: Option<&str>) -> String {
    // loglevel=1: only alerts reach the console, so kernel messages do not split the guest's
    // lines (the guest reads the kernel log itself through /dev/kmsg where a test needs it).
    let mut s = "console=ttyS0 intel_iommu=on loglevel=1 panic=-1".to_owned();
    for model in ["igb", "e1000e", "virtio-net-pci"] {
        let nics: Vec<&NicSpec> = NICS.iter().filter(|n| n.model == model).collect();
        let model = model_key(model);
        let bdfs: Vec<String> = nics.iter().map(|n| format!("0000:00:{}", n.slot)).collect();
        let macs: Vec<&str> = nics.iter().map(|n| n.mac).collect();
        s.push_str(&format!(
            " ringfab.{model}={} ringfab.{model}_macs={}",
            bdfs.join(","),
            macs.join(",")
        ));
    }
    if let Some(only) = only {
        s.push_str(&format!(" ringfab.only={only}"));
    }
    s
}

/// QEMU's arguments: q35 with an Intel vIOMMU (interrupt remapping; caching mode, so that
/// mappings the guest makes reach QEMU and vfio-pci accepts the IOMMU), the NICs on their wires,
/// serial console on stdio, no other devices.
pub(crate) fn qemu_args(kernel: &Path, initrd: &Path, accel: Accel, append: &str) -> Vec<String> {
    let mut a: Vec<String> = match accel {
        Accel::Tcg => vec!["-machine", "q35,accel=tcg", "-cpu", "max"],
        // intremap=on under KVM needs the split irqchip.
        Accel::Kvm => vec![
            "-machine",
            "q35,accel=kvm,kernel-irqchip=split",
            "-cpu",
            "host",
        ],
    }
    .into_iter()
    .map(String::from)
    .collect();
    a.extend(
        [
            "-m",
            "512M",
            "-smp",
            "1",
            "-nodefaults",
            "-display",
            "none",
            "-serial",
            "stdio",
            "-no-reboot",
            "-device",
            "intel-iommu,intremap=on,caching-mode=on",
        ]
        .map(String::from),
    );
    a.push("-kernel".into());
    a.push(kernel.display().to_string());
    a.push("-initrd".into());
    a.push(initrd.display().to_string());
    a.push("-append".into());
    a.push(append.into());
    for (i, n) in NICS.iter().enumerate() {
        a.push("-netdev".into());
        a.push(match n.wire {
            WireSpec::Hub(hub) => format!("hubport,id=nic{i},hubid={hub}"),
            // vhost=off: the device model in QEMU itself (what the tests look at), not the
            // host kernel's vhost-net.
            WireSpec::Tap(tap) => format!(
                "tap,id=nic{i},ifname={tap},queues={},script=no,downscript=no,vhost=off",
                netns::QUEUES
            ),
        });
        a.push("-device".into());
        a.push(format!(
            "{},netdev=nic{i},addr={},mac={}{}",
            n.model,
            n.slot,
            n.mac,
            device_options(n.model)
        ));
    }
    a
}

/// One guest test's outcome.
#[derive(Clone, PartialEq, Eq, Debug)]
pub(crate) struct Outcome {
    /// The test.
    pub(crate) name: String,
    /// Whether it passed.
    pub(crate) passed: bool,
    /// Its one-line detail or failure reason.
    pub(crate) detail: String,
}

/// What the guest reported.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub(crate) struct Report {
    /// How many tests it announced.
    pub(crate) plan: Option<usize>,
    /// The outcomes, in order.
    pub(crate) outcomes: Vec<Outcome>,
    /// Whether it said it was done.
    pub(crate) done: bool,
}

/// A guest line parsed.
#[derive(Clone, PartialEq, Eq, Debug)]
pub(crate) enum Line {
    /// `plan N`.
    Plan(usize),
    /// `pass`/`fail`.
    Outcome(Outcome),
    /// `done`.
    Done,
    /// `mark start` (`true`) or `mark end`: the window a bench measurement counts over
    /// ([`crate::mmio`]).
    Mark(bool),
}

/// Parses one console line; `None` for anything that is not a guest protocol line. The marker
/// may follow other text (a kernel message that was being printed when the line began).
pub(crate) fn parse_line(line: &str) -> Option<Line> {
    let at = line.find(MARKER)?;
    let rest = line[at + MARKER.len()..].trim_end();
    let (word, rest) = rest.split_once(' ').unwrap_or((rest, ""));
    match word {
        "plan" => rest.trim().parse().ok().map(Line::Plan),
        "done" => Some(Line::Done),
        "mark" => match rest.trim() {
            "start" => Some(Line::Mark(true)),
            "end" => Some(Line::Mark(false)),
            _ => None,
        },
        "pass" | "fail" => {
            let (name, detail) = rest.split_once(' ').unwrap_or((rest, ""));
            (!name.is_empty()).then(|| {
                Line::Outcome(Outcome {
                    name: name.to_owned(),
                    passed: word == "pass",
                    detail: detail.trim().to_owned(),
                })
            })
        }
        _ => None,
    }
}

/// How the guest run ended.
#[derive(Clone, PartialEq, Eq, Debug)]
pub(crate) enum End {
    /// The guest program said `done` and QEMU exited.
    Finished,
    /// QEMU exited before `done`.
    Exited(String),
    /// The hard timeout passed; QEMU was killed.
    TimedOut,
    /// The guest printed nothing for this long; QEMU was killed.
    Silent(Duration),
}

enum Event {
    Console(String),
    Stderr(String),
    Closed,
}

/// When to give up on a guest that stops printing, and what to ask first.
pub(crate) struct Silence<'a> {
    /// How long without a console line.
    pub(crate) after: Duration,
    /// Asked before QEMU is killed (what its monitor says the machine is doing); the answer
    /// goes to the log and is printed.
    pub(crate) ask: &'a dyn Fn() -> String,
}

/// Boots the guest and reads its console. `show` is called with each outcome and mark as it
/// arrives; `verbose` echoes every console line. The whole console goes to `log`. `silence`:
/// the guest is given up for stuck (asked, QEMU killed, [`End::Silent`]) after that long
/// without a console line.
pub(crate) fn run(
    mut c: Command,
    timeout: Duration,
    silence: Option<Silence<'_>>,
    log: &Path,
    verbose: bool,
    spawned: impl FnOnce(u32),
    mut show: impl FnMut(&Line),
) -> Result<(Report, End, Duration)> {
    c.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let started = Instant::now();
    let mut child = c.spawn().map_err(|source| Error::Spawn {
        what: "booting the guest",
        cmd: cmd::line(&c),
        source,
    })?;
    spawned(child.id());
    let mut log_file = File::create(log).ctx("creating", log)?;
    let (tx, rx) = mpsc::channel();
    let out = child.stdout.take().expect("piped");
    let err = child.stderr.take().expect("piped");
    let tx2 = tx.clone();
    std::thread::spawn(move || {
        for l in BufReader::new(out)
            .split(b'\n')
            .map_while(std::result::Result::ok)
        {
            let l = String::from_utf8_lossy(&l)
                .trim_end_matches('\r')
                .to_owned();
            if tx.send(Event::Console(l)).is_err() {
                return;
            }
        }
        let _ = tx.send(Event::Closed);
    });
    std::thread::spawn(move || {
        for l in BufReader::new(err)
            .lines()
            .map_while(std::result::Result::ok)
        {
            if tx2.send(Event::Stderr(l)).is_err() {
                return;
            }
        }
    });
    let deadline = started + timeout;
    let mut report = Report::default();
    let mut heard = Instant::now();
    let end = loop {
        let now = Instant::now();
        let left = deadline.saturating_duration_since(now);
        let quiet = silence
            .as_ref()
            .map(|s| s.after.saturating_sub(now - heard));
        match rx.recv_timeout(quiet.map_or(left, |q| q.min(left))) {
            Ok(Event::Console(l)) => {
                heard = Instant::now();
                let _ = writeln!(log_file, "{l}");
                if verbose {
                    println!("  | {l}");
                }
                match parse_line(&l) {
                    Some(Line::Plan(n)) => report.plan = Some(n),
                    Some(Line::Done) => report.done = true,
                    // An outcome or a mark.
                    Some(line) => {
                        show(&line);
                        if let Line::Outcome(o) = line {
                            report.outcomes.push(o);
                        }
                    }
                    None if l.starts_with("ringfab-init: ") && !verbose => {
                        println!("  {l}");
                    }
                    None => {}
                }
            }
            Ok(Event::Stderr(l)) => {
                let _ = writeln!(log_file, "qemu: {l}");
                // The hub joins the two NICs and nothing else, on purpose.
                if !l.contains("is not connected to host network") {
                    println!("  qemu: {l}");
                }
            }
            Ok(Event::Closed) => {
                let status = child.wait().ctx("waiting for", QEMU)?;
                break if report.done {
                    End::Finished
                } else {
                    End::Exited(status.to_string())
                };
            }
            Err(_) => {
                let silent = silence
                    .as_ref()
                    .filter(|s| heard.elapsed() >= s.after && Instant::now() < deadline);
                if let Some(s) = silent {
                    let answer = (s.ask)();
                    let _ = writeln!(log_file, "{answer}");
                    println!("  silent guest, before QEMU is killed:");
                    for l in answer.lines() {
                        println!("  | {l}");
                    }
                }
                let _ = child.kill();
                let _ = child.wait();
                break match silent {
                    Some(s) => End::Silent(s.after),
                    None => End::TimedOut,
                };
            }
        }
    };
    Ok((report, end, started.elapsed()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A program standing in for QEMU: prints `lines` a line every `gap` seconds, then sleeps.
    fn chatter(lines: usize, gap: &str) -> Command {
        let mut c = Command::new("sh");
        c.arg("-c").arg(format!(
            "for i in $(seq {lines}); do echo ringfab-guest: plan $i; sleep {gap}; done; sleep 30"
        ));
        c
    }

    #[test]
    fn a_guest_silent_for_longer_than_allowed_is_given_up_and_said_so() {
        let log = std::env::temp_dir().join(format!("ringfab-silence-{}", std::process::id()));
        let t = Instant::now();
        let asked = std::cell::Cell::new(false);
        let (report, end, _) = run(
            chatter(3, "0.3"),
            Duration::from_secs(60),
            Some(Silence {
                after: Duration::from_secs(2),
                ask: &|| {
                    asked.set(true);
                    "the machine's answer".into()
                },
            }),
            &log,
            false,
            |_| {},
            |_| {},
        )
        .unwrap();
        assert_eq!(end, End::Silent(Duration::from_secs(2)));
        assert_eq!(
            report.plan,
            Some(3),
            "every line before the silence was read"
        );
        assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
        assert!(asked.get(), "asked before it was killed");
        assert!(std::fs::read_to_string(&log)
            .unwrap()
            .contains("the machine's answer"));
        let _ = std::fs::remove_file(&log);
    }

    #[test]
    fn without_a_silence_limit_only_the_timeout_ends_a_quiet_guest() {
        let log = std::env::temp_dir().join(format!("ringfab-quiet-{}", std::process::id()));
        let (_, end, took) = run(
            chatter(1, "0"),
            Duration::from_secs(3),
            None,
            &log,
            false,
            |_| {},
            |_| {},
        )
        .unwrap();
        assert_eq!(end, End::TimedOut);
        assert!(took >= Duration::from_secs(3));
        let _ = std::fs::remove_file(&log);
    }

    #[test]
    fn guest_lines_parse_and_other_console_lines_do_not() {
        assert_eq!(parse_line("ringfab-guest: plan 9"), Some(Line::Plan(9)));
        assert_eq!(parse_line("ringfab-guest: done\r"), Some(Line::Done));
        assert_eq!(
            parse_line("ringfab-guest: pass link 1000 Mb/s full duplex after 0.52 s"),
            Some(Line::Outcome(Outcome {
                name: "link".into(),
                passed: true,
                detail: "1000 Mb/s full duplex after 0.52 s".into()
            }))
        );
        assert_eq!(
            parse_line("[    3.1] DMAR: fault ringfab-guest: fail iommu no fault logged"),
            Some(Line::Outcome(Outcome {
                name: "iommu".into(),
                passed: false,
                detail: "no fault logged".into()
            })),
            "a kernel message in front of the marker"
        );
        assert_eq!(parse_line("ringfab-guest: fail"), None, "no name");
        assert_eq!(parse_line("ringfab-guest: plan x"), None);
        assert_eq!(
            parse_line("ringfab-guest: mark start"),
            Some(Line::Mark(true))
        );
        assert_eq!(
            parse_line("ringfab-guest: mark end\r"),
            Some(Line::Mark(false))
        );
        assert_eq!(parse_line("ringfab-guest: mark middle"), None);
        assert_eq!(parse_line("ringfab-init: userspace after 3.2 s"), None);
        assert_eq!(parse_line("Linux version 6.1.0"), None);
    }

    #[test]
    fn the_machine_has_an_iommu_and_two_nics_of_each_model_on_a_wire_of_their_own() {
        let a = qemu_args(Path::new("k"), Path::new("i"), Accel::Tcg, "x").join(" ");
        assert!(a.starts_with("-machine q35,accel=tcg -cpu max "), "{a}");
        assert!(a.contains("-device intel-iommu,intremap=on,caching-mode=on"));
        assert!(a.contains(
            "-netdev hubport,id=nic0,hubid=0 -device igb,netdev=nic0,addr=03.0,\
             mac=52:54:00:12:34:03 -netdev hubport,id=nic1,hubid=0 \
             -device igb,netdev=nic1,addr=0b.0,mac=52:54:00:12:34:0b"
        ));
        assert!(a.contains(
            "-netdev hubport,id=nic2,hubid=1 -device e1000e,netdev=nic2,addr=05.0,\
             mac=52:54:00:12:34:05,romfile= -netdev hubport,id=nic3,hubid=1 \
             -device e1000e,netdev=nic3,addr=06.0,mac=52:54:00:12:34:06,romfile="
        ));
        assert!(a.contains(
            "-netdev tap,id=nic4,ifname=rftap0,queues=4,script=no,downscript=no,vhost=off \
             -device virtio-net-pci,netdev=nic4,addr=07.0,mac=52:54:00:12:34:07,romfile=,\
             disable-legacy=on,iommu_platform=on,mq=on,rss=on,vectors=10 \
             -netdev tap,id=nic5,ifname=rftap1,queues=4,script=no,downscript=no,vhost=off \
             -device virtio-net-pci,netdev=nic5,addr=08.0,mac=52:54:00:12:34:08,romfile=,\
             disable-legacy=on,iommu_platform=on,mq=on,rss=on,vectors=10"
        ));
        assert!(a.contains("-kernel k -initrd i -append x"));
        let k = qemu_args(Path::new("k"), Path::new("i"), Accel::Kvm, "x").join(" ");
        assert!(k.starts_with("-machine q35,accel=kvm,kernel-irqchip=split -cpu host "));
    }

    #[test]
    fn the_guest_learns_its_nics_and_test_filter_from_the_command_line() {
        assert_eq!(
            append(None),
            "console=ttyS0 intel_iommu=on loglevel=1 panic=-1 \
             ringfab.igb=0000:00:03.0,0000:00:0b.0 \
             ringfab.igb_macs=52:54:00:12:34:03,52:54:00:12:34:0b \
             ringfab.e1000e=0000:00:05.0,0000:00:06.0 \
             ringfab.e1000e_macs=52:54:00:12:34:05,52:54:00:12:34:06 \
             ringfab.virtio=0000:00:07.0,0000:00:08.0 \
             ringfab.virtio_macs=52:54:00:12:34:07,52:54:00:12:34:08"
        );
        assert!(append(Some("link,cq")).ends_with(" ringfab.only=link,cq"));
    }
}
