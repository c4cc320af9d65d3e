//! The side-by-side benchmark against DPDK and the kernel (`ringfab-qemu-tests --bench`,
//! docs/perf.md "Side by side with DPDK"): on each NIC pair, in interleaved rounds, DPDK's
//! `dpdk-testpmd`, the guest kernel's drivers and UDP sockets, and ringfab (on its own header
//! and on plain UDP) measure the same things on the same device models.
//!
//! Each measurement is one protocol line, `pass bench/<pair>/<kind>/<round> <value> <unit>
//! <detail>` (or `fail …` with the reason), which the runner prints with the host's load and
//! turns into the ratio table. The guest is booted with two vCPUs: every program that polls is
//! pinned to one of them, the frame source on CPU 0 and the frame sink (or the reflector) on
//! CPU 1, ringfab's as testpmd's (`-l 0,1 --main-lcore <the other>`: testpmd's main lcore only
//! sleeps and prints statistics); the kernel's processes are pinned the same way, and a NIC on
//! the kernel's driver has its interrupts on its side's CPU.

use std::io::Read;
use std::net::Ipv4Addr;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use ringfab_hal::queue::rx_doorbell_batch;
use ringfab_hal::{MacAddr, Nic as HalNic, Queue, RxBuffer, RxConfig, RxQueue, Token, Wait};
use ringfab_nics::AnyNic;
use ringfab_vfio::VfioPlatform;

use crate::guest::{cmdline_pair, cmdline_value, say};
use crate::kernel_nic;
use crate::kernel_roles::PORT;
use crate::linux::{E1000eModel, Igb, Model, Virtio};
use crate::nic::{bind_all, iova_at, BUF, NO_RX};

/// testpmd in the initramfs (the runner's `dpdk::GUEST_TESTPMD`).
const TESTPMD: &str = "/usr/bin/dpdk-testpmd";
/// Bytes of every frame sent, without the frame check sequence (testpmd's `--txpkts=64`).
pub(crate) const FRAME: usize = 64;
/// ringfab's message size that makes a 64-byte frame: its Ethernet encapsulation has 30 bytes
/// of headers (docs/ip.md, "header before the payload").
pub(crate) const MESSAGE: usize = FRAME - 30;
/// The UDP payload that makes a 64-byte frame: Ethernet's, IPv4's and UDP's headers are 42
/// bytes (ringfab's plain-UDP messages, the kernel's datagrams, testpmd txonly's).
pub(crate) const PLAIN_MESSAGE: usize = FRAME - 42;
/// Frames per burst, testpmd's `--burst` and ringfab's window.
pub(crate) const BURST: usize = 32;
/// The longest a side that blocks when idle (`ringfab-rx-wait`, the roles' `+wait`) waits at a
/// time before it checks its deadlines (and SIGTERM) and waits again.
pub(crate) const IDLE_WAIT: Duration = Duration::from_millis(1);
/// How long a throughput is measured, after [`WARMUP`].
pub(crate) const MEASURE: Duration = Duration::from_secs(5);
/// How long a flood runs before it is measured.
pub(crate) const WARMUP: Duration = Duration::from_secs(2);
/// How long testpmd may take to start forwarding (EAL and the port under TCG take seconds).
pub(crate) const STARTUP: Duration = Duration::from_secs(30);
/// How long testpmd-rx waits for rxonly's statistics to show the flood's warm-up and
/// measurement: rxonly reads its port's statistics once a second, and EAL and the port take
/// 10 – 20 s to start under TCG on a loaded host. Its output is read as it comes (through a
/// pipe, so in chunks), and the flood stops once enough periods were flooded.
const TESTPMD_PATIENCE: Duration = Duration::from_secs(60);
/// Round trips measured per ping round (after [`PING_WARMUP`]).
pub(crate) const PINGS: usize = 2000;
/// Round trips before measuring.
pub(crate) const PING_WARMUP: usize = 100;
/// The CPU of the frame source (testpmd txonly, ringfab's sender and pinger).
const SOURCE_CPU: usize = 0;
/// The CPU of the frame sink and the reflector (testpmd rxonly and macswap, ringfab's receiver).
const SINK_CPU: usize = 1;

/// One NIC pair: the name the runner knows it by, its PCI addresses and MACs, the PCI IDs
/// its driver drives, the ring depth both DPDK and ringfab use on it (testpmd's defaults), the
/// kernel's driver for it and its /24 (the tests against Linux's: [`Model`]).
struct Pair {
    name: &'static str,
    bdfs: [String; 2],
    macs: [String; 2],
    ids: &'static [(u16, u16)],
    depth: usize,
    kernel_driver: &'static str,
    subnet: [u8; 3],
    /// Whether ringfab's driver has the device check received checksums (testpmd is asked
    /// for the same: `--enable-rx-cksum`).
    rx_checksum: bool,
}

impl Pair {
    /// NIC `nic`'s IPv4 address, for every kind that uses one (ringfab's plain-UDP endpoints,
    /// the kernel's interfaces, testpmd txonly's UDP): `.1` for A, `.2` for B.
    fn addr(&self, nic: usize) -> Ipv4Addr {
        let [a, b, c] = self.subnet;
        Ipv4Addr::new(a, b, c, 1 + nic as u8)
    }
}

/// Which driver each NIC of a pair is on.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Drivers {
    /// Both on vfio-pci: ringfab's and testpmd's kinds.
    Vfio,
    /// B on the kernel's driver with its address, A on vfio-pci: `kernel-rx`, where testpmd
    /// floods from A.
    KernelB,
    /// Both on the kernel's driver: B with its address, A without, for a role to take into
    /// a network namespace of its own ([`crate::kernel_roles`]).
    Kernel,
}

/// What one round measures on a pair, in the order it runs.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    /// testpmd txonly on A → testpmd rxonly on B: frames/s received.
    TestpmdRx,
    /// testpmd txonly on A → ringfab's driver receive loop on B: frames/s received.
    RingfabRx,
    /// `ringfab-rx` with the receive loop blocking on the queue's interrupt when a poll finds
    /// nothing: frames/s received.
    RingfabRxWait,
    /// ringfab's endpoint sender on A → endpoint receiver on B, two processes: messages/s.
    RingfabStream,
    /// The same ringfab endpoint sender on A → testpmd rxonly on B: frames/s received. Where
    /// testpmd's txonly sends slower than both receivers take (igb), `testpmd-rx` and
    /// `ringfab-rx` measure the sender; ringfab's sender sends faster, so this and
    /// `ringfab-stream` compare the two receivers.
    RxonlyRingfabTx,
    /// The same ringfab endpoint sender on A → ringfab's driver receive loop on B: frames/s
    /// received. With `rxonly-ringfab-tx`, the driver-level receivers compared where testpmd's
    /// txonly cannot feed them faster than they take.
    RingfabRxRingfabTx,
    /// `ringfab-stream` with both sides blocking in `fi_cq_sread` when idle (the roles'
    /// `+wait`): messages/s.
    RingfabStreamWait,
    /// ringfab's endpoint ping on A against its endpoint pong on B, two processes: µs per
    /// round trip.
    RingfabRtt,
    /// `ringfab-rtt` with both sides blocking in `fi_cq_sread` when idle: µs per round trip.
    RingfabRttWait,
    /// The same ping on A against testpmd's macswap on B: µs per round trip.
    MacswapRtt,
    /// ringfab-stream with plain IPv4/UDP endpoints: messages/s.
    PlainStream,
    /// ringfab-rtt with plain IPv4/UDP endpoints: µs per round trip.
    PlainRtt,
    /// testpmd txonly's UDP on A → the kernel's driver on B and a socket's `recvmmsg`:
    /// datagrams/s the socket got.
    KernelRx,
    /// The kernel's UDP ping on A against its pong on B, two processes: µs per round trip.
    KernelRtt,
    /// The kernel's `sendmmsg` on A → `recvmmsg` on B, two processes: datagrams/s.
    KernelStream,
}

/// The kinds in the order a round runs them on a pair: every kind on vfio-pci first, then NIC
/// B to the kernel, then NIC A; the next round's first kind takes both back to vfio-pci. So
/// each NIC moves to the kernel and back once a round.
const KINDS: [Kind; 15] = [
    Kind::TestpmdRx,
    Kind::RingfabRx,
    Kind::RingfabRxWait,
    Kind::RingfabStream,
    Kind::RxonlyRingfabTx,
    Kind::RingfabRxRingfabTx,
    Kind::RingfabStreamWait,
    Kind::PlainStream,
    Kind::RingfabRtt,
    Kind::RingfabRttWait,
    Kind::PlainRtt,
    Kind::MacswapRtt,
    Kind::KernelRx,
    Kind::KernelRtt,
    Kind::KernelStream,
];

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::TestpmdRx => "testpmd-rx",
            Kind::RingfabRx => "ringfab-rx",
            Kind::RingfabRxWait => "ringfab-rx-wait",
            Kind::RingfabStream => "ringfab-stream",
            Kind::RxonlyRingfabTx => "rxonly-ringfab-tx",
            Kind::RingfabRxRingfabTx => "ringfab-rx-ringfab-tx",
            Kind::RingfabStreamWait => "ringfab-stream-wait",
            Kind::RingfabRtt => "ringfab-rtt",
            Kind::RingfabRttWait => "ringfab-rtt-wait",
            Kind::MacswapRtt => "macswap-rtt",
            Kind::PlainStream => "plain-stream",
            Kind::PlainRtt => "plain-rtt",
            Kind::KernelRx => "kernel-rx",
            Kind::KernelRtt => "kernel-rtt",
            Kind::KernelStream => "kernel-stream",
        }
    }

    /// Whether a round runs the kind on `pair`. The `-wait` kinds run on virtio-net only:
    /// there the device model runs in QEMU's main loop, which a polling vCPU starves; on igb
    /// and e1000e, where the models run in the vCPUs' threads, they gave no consistent gain
    /// (docs/perf.md, "Blocking when idle").
    fn runs_on(self, pair: &str) -> bool {
        match self {
            Kind::RingfabRxWait | Kind::RingfabStreamWait | Kind::RingfabRttWait => {
                pair == "virtio"
            }
            _ => true,
        }
    }

    /// The drivers the kind runs on.
    fn drivers(self) -> Drivers {
        match self {
            Kind::KernelRx => Drivers::KernelB,
            Kind::KernelRtt | Kind::KernelStream => Drivers::Kernel,
            _ => Drivers::Vfio,
        }
    }
}

/// A measurement: its value, its unit, and a short detail.
struct Measured {
    value: f64,
    unit: &'static str,
    detail: String,
}

/// Runs the bench the kernel command line asks for (`ringfab.bench=ROUNDS`,
/// `ringfab.bench_nics=igb,e1000e,virtio`) and says `done`.
pub(crate) fn run(cmdline: &str) -> std::process::ExitCode {
    let rounds: usize = cmdline_value(cmdline, "ringfab.bench")
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let wanted =
        cmdline_value(cmdline, "ringfab.bench_nics").unwrap_or_else(|| "igb,e1000e,virtio".into());
    let pairs: Vec<Pair> = wanted
        .split(',')
        .filter_map(|name| pair(cmdline, name))
        .collect();
    let kinds = match kinds(cmdline_value(cmdline, "ringfab.only").as_deref()) {
        Ok(k) => k,
        Err(e) => {
            say("plan 1");
            say(&format!("fail bench-setup {e}"));
            say("done");
            return std::process::ExitCode::FAILURE;
        }
    };
    let per_round: usize = pairs
        .iter()
        .map(|p| kinds.iter().filter(|k| k.runs_on(p.name)).count())
        .sum();
    say(&format!("plan {}", 1 + rounds * per_round));
    match prepare(&pairs) {
        Ok(d) => say(&format!("pass bench-setup {d}")),
        Err(e) => {
            say(&format!("fail bench-setup {e}"));
            say("done");
            return std::process::ExitCode::FAILURE;
        }
    }
    // Every NIC is on vfio-pci after `prepare`.
    let mut drivers: Vec<Drivers> = pairs.iter().map(|_| Drivers::Vfio).collect();
    let watchdog = watchdog();
    for round in 1..=rounds {
        for (p, on) in pairs.iter().zip(&mut drivers) {
            for &kind in kinds.iter().filter(|k| k.runs_on(p.name)) {
                let name = format!("bench/{}/{}/{round}", p.name, kind.name());
                let _ = watchdog.send(Some((name.clone(), "moving the NICs between drivers")));
                let placed = place(p, on, kind.drivers());
                let _ = watchdog.send(Some((name.clone(), "measuring")));
                let measured = placed.and_then(|()| measure(p, kind));
                let _ = watchdog.send(None);
                match measured {
                    Ok(m) => say(&format!(
                        "pass {name} {:.3} {} {}",
                        m.value,
                        m.unit,
                        one_line(&m.detail)
                    )),
                    Err(e) => say(&format!("fail {name} {}", one_line(&e))),
                }
            }
        }
    }
    say("done");
    std::process::ExitCode::SUCCESS
}

/// The kinds a round runs: every one, or those `only` names (the runner's `--only`), in
/// [`KINDS`]' order.
fn kinds(only: Option<&str>) -> Result<Vec<Kind>, String> {
    let Some(only) = only else {
        return Ok(KINDS.to_vec());
    };
    if let Some(bad) = only
        .split(',')
        .find(|n| !KINDS.iter().any(|k| k.name() == *n))
    {
        let names: Vec<&str> = KINDS.iter().map(|k| k.name()).collect();
        return Err(format!("--only: no kind '{bad}' ({})", names.join(", ")));
    }
    Ok(KINDS
        .into_iter()
        .filter(|k| only.split(',').any(|n| n == k.name()))
        .collect())
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The pair `name` as the kernel command line describes it.
fn pair(cmdline: &str, name: &str) -> Option<Pair> {
    let (ids, depth, kernel_driver, subnet): (&'static [(u16, u16)], usize, _, _) = match name {
        "igb" => (ringfab_igb::PCI_IDS, 512, Igb::KERNEL_DRIVER, Igb::SUBNET),
        "e1000e" => (
            ringfab_e1000e::PCI_IDS,
            512,
            E1000eModel::KERNEL_DRIVER,
            E1000eModel::SUBNET,
        ),
        "virtio" => (
            ringfab_virtio_net::PCI_IDS,
            256,
            Virtio::KERNEL_DRIVER,
            Virtio::SUBNET,
        ),
        _ => return None,
    };
    let name = match name {
        "igb" => "igb",
        "e1000e" => "e1000e",
        _ => "virtio",
    };
    Some(Pair {
        name,
        bdfs: cmdline_pair(cmdline, &format!("ringfab.{name}"))?,
        macs: cmdline_pair(cmdline, &format!("ringfab.{name}_macs"))?,
        ids,
        depth,
        kernel_driver,
        subnet,
        rx_checksum: name != "virtio",
    })
}

/// Binds every NIC to vfio-pci, loads the kernel's NIC drivers (which take no NIC bound to
/// vfio-pci) with IPv6 off, mounts hugetlbfs for testpmd and makes its runtime directory.
fn prepare(pairs: &[Pair]) -> Result<String, String> {
    for p in pairs {
        bind_all(&p.bdfs, p.ids, p.name)?;
    }
    kernel_nic::no_ipv6()?;
    let modules = kernel_nic::load_nic_drivers()?;
    // EAL refuses to load plugins from a directory with a world-writable ancestor, and the
    // initramfs's root (the kernel's rootfs) is world-writable.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions("/", std::fs::Permissions::from_mode(0o755))
        .map_err(|e| format!("chmod 755 /: {e}"))?;
    std::fs::create_dir_all("/dev/hugepages").map_err(|e| format!("mkdir /dev/hugepages: {e}"))?;
    std::fs::create_dir_all("/var/run").map_err(|e| format!("mkdir /var/run: {e}"))?;
    let status = Command::new("/bin/mount")
        .args(["-t", "hugetlbfs", "nodev", "/dev/hugepages"])
        .status()
        .map_err(|e| format!("running mount: {e}"))?;
    if !status.success() {
        return Err(format!("mount -t hugetlbfs: {status}"));
    }
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let huge = meminfo
        .lines()
        .find(|l| l.starts_with("HugePages_Total"))
        .unwrap_or("HugePages_Total: ?");
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let names: Vec<&str> = pairs.iter().map(|p| p.name).collect();
    // Every program here reads the clock while it polls: which clock the kernel reads decides
    // whether that is a few instructions or a trip into QEMU (docs/perf.md).
    let clock =
        std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/current_clocksource")
            .unwrap_or_else(|e| format!("unknown ({e})"));
    Ok(format!(
        "pairs {} bound to vfio-pci, {modules} kernel NIC modules loaded, {cpus} CPUs, {}, \
         clocksource {}",
        names.join(","),
        one_line(huge),
        clock.trim()
    ))
}

/// Moves the pair's NICs to the drivers `want` (bind_all and the kernel's bind are no-ops for
/// a NIC already there); `on` is where they are, updated when the move succeeds. NIC B on the
/// kernel gets its address and its interrupts on the sink's CPU; NIC A's address and
/// interrupts are set by the role that takes it ([`crate::kernel_roles`]).
fn place(p: &Pair, on: &mut Drivers, want: Drivers) -> Result<(), String> {
    if *on == want {
        return Ok(());
    }
    let (a, b) = (&p.bdfs[0], &p.bdfs[1]);
    if want != Drivers::Kernel {
        bind_all(std::slice::from_ref(a), p.ids, p.name)?;
    }
    match want {
        Drivers::Vfio => {
            bind_all(std::slice::from_ref(b), p.ids, p.name)?;
        }
        Drivers::KernelB | Drivers::Kernel if *on == Drivers::Vfio => {
            kernel_nic::hand_over(b, p.kernel_driver, p.addr(1), 24)?;
            kernel_nic::steer_irqs(b, SINK_CPU)?;
        }
        Drivers::KernelB | Drivers::Kernel => {}
    }
    if want == Drivers::Kernel {
        kernel_nic::to_kernel(a, p.kernel_driver)?;
    }
    *on = want;
    Ok(())
}

/// How long one kind may take, moving the NICs included: the longest take well under a
/// minute (testpmd's start, warm-up and measurement, or a NIC handed to the kernel and back).
const KIND_DEADLINE: Duration = Duration::from_secs(240);

/// A thread that ends the bench when a kind outlasts [`KIND_DEADLINE`]: it reports the kind
/// as failed, with the step it was in, and exits, so that a stuck kind (a process that never
/// ends, a driver unbind the kernel never finishes) costs one kind and says where, instead of
/// holding the run to the runner's timeout with nothing printed. The bench sends each kind's
/// name and step as it begins it (a kind's later step keeps its start), and `None` when it is
/// done.
fn watchdog() -> mpsc::Sender<Option<(String, &'static str)>> {
    let (tx, rx) = mpsc::channel::<Option<(String, &'static str)>>();
    std::thread::spawn(move || {
        let mut current: Option<(String, &'static str, Instant)> = None;
        loop {
            let wait = current.as_ref().map_or(KIND_DEADLINE, |(_, _, t)| {
                KIND_DEADLINE.saturating_sub(t.elapsed())
            });
            match rx.recv_timeout(wait) {
                Ok(Some((name, step))) => {
                    let since = match current {
                        Some((was, _, t)) if was == name => t,
                        _ => Instant::now(),
                    };
                    current = Some((name, step, since));
                }
                Ok(None) => current = None,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    if let Some((name, step, _)) = &current {
                        say(&format!(
                            "fail {name} stuck: no result after {} s, {step}; the bench stops; \
                             {}",
                            KIND_DEADLINE.as_secs(),
                            stuck_processes()
                        ));
                        say("done");
                        std::process::exit(1);
                    }
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => return,
            }
        }
    });
    tx
}

/// Where the bench's processes are, for a stuck kind: each process of this program (the bench
/// and its roles) and each testpmd, with its state, the kernel function it sleeps in
/// (`/proc/PID/wchan`) and its system call (`/proc/PID/syscall`: number and arguments).
fn stuck_processes() -> String {
    let me = std::process::id().to_string();
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return "no /proc".into();
    };
    for e in dir.flatten() {
        let pid = e.file_name().to_string_lossy().into_owned();
        if !pid.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let read =
            |f: &str| std::fs::read_to_string(format!("/proc/{pid}/{f}")).unwrap_or_default();
        let cmdline = read("cmdline").replace('\0', " ");
        if !(cmdline.contains("ringfab-qemu-guest") || cmdline.contains("testpmd")) {
            continue;
        }
        let state = read("stat")
            .rsplit_once(") ")
            .and_then(|(_, rest)| rest.split(' ').next().map(str::to_owned))
            .unwrap_or_default();
        let who = if pid == me { "bench" } else { cmdline.trim() };
        // Each thread of the process: the stuck one may not be the main thread.
        let mut threads = Vec::new();
        if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
            for t in tasks.flatten() {
                let tid = t.file_name().to_string_lossy().into_owned();
                let tread = |f: &str| {
                    std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/{f}"))
                        .unwrap_or_default()
                };
                let syscall = tread("syscall");
                threads.push(format!(
                    "{tid} wchan {} syscall {}",
                    tread("wchan"),
                    syscall
                        .split(' ')
                        .take(3)
                        .collect::<Vec<_>>()
                        .join(" ")
                        .trim()
                ));
            }
        }
        out.push(format!("[{pid} {state} {who}: {}]", threads.join(", ")));
    }
    out.join(" ")
}

/// Measures `kind` on `p`; a `kernel-*` kind's detail says what NIC B's kernel interface and
/// the kernel's UDP counted meanwhile, which shows the traffic went through the NIC.
fn measure(p: &Pair, kind: Kind) -> Result<Measured, String> {
    if kind.drivers() == Drivers::Vfio {
        return measure_kind(p, kind);
    }
    let before = KernelCounts::read(p)?;
    let mut m = measure_kind(p, kind)?;
    let after = KernelCounts::read(p)?;
    m.detail = format!("{}; {}", m.detail, after.since(&before));
    Ok(m)
}

/// NIC B's interface counters and the kernel's UDP errors.
struct KernelCounts {
    rx_packets: u64,
    rx_missed: u64,
    tx_packets: u64,
    /// `RcvbufErrors` of `/proc/net/snmp`: datagrams for a socket that had no room.
    rcvbuf_errors: u64,
}

impl KernelCounts {
    fn read(p: &Pair) -> Result<KernelCounts, String> {
        let name = kernel_nic::interface_of(&p.bdfs[1])
            .ok_or_else(|| format!("{} has no network interface", p.bdfs[1]))?;
        let stat = |s: &str| {
            let f = format!("/sys/class/net/{name}/statistics/{s}");
            std::fs::read_to_string(&f)
                .map_err(|e| format!("reading {f}: {e}"))?
                .trim()
                .parse::<u64>()
                .map_err(|e| format!("{f}: {e}"))
        };
        Ok(KernelCounts {
            rx_packets: stat("rx_packets")?,
            rx_missed: stat("rx_missed_errors")?,
            tx_packets: stat("tx_packets")?,
            rcvbuf_errors: crate::linux::kernel_udp_errors()?.1,
        })
    }

    /// What changed since `before`, as a detail says it.
    fn since(&self, before: &KernelCounts) -> String {
        format!(
            "meanwhile B's interface received {} frames ({} missed) and sent {}, and {} \
             datagrams found no room in their socket",
            self.rx_packets.saturating_sub(before.rx_packets),
            self.rx_missed.saturating_sub(before.rx_missed),
            self.tx_packets.saturating_sub(before.tx_packets),
            self.rcvbuf_errors.saturating_sub(before.rcvbuf_errors)
        )
    }
}

fn measure_kind(p: &Pair, kind: Kind) -> Result<Measured, String> {
    match kind {
        Kind::TestpmdRx => testpmd_rx(p, Source::Txonly),
        Kind::RxonlyRingfabTx => testpmd_rx(p, Source::RingfabSender),
        Kind::RingfabRx => ringfab_rx(p, Source::Txonly, false),
        Kind::RingfabRxWait => ringfab_rx(p, Source::Txonly, true),
        Kind::RingfabRxRingfabTx => ringfab_rx(p, Source::RingfabSender, false),
        Kind::RingfabStream => stream(p, Encapsulation::Ringfab, ""),
        Kind::RingfabStreamWait => stream(p, Encapsulation::Ringfab, "+wait"),
        Kind::PlainStream => stream(p, Encapsulation::Plain, ""),
        Kind::RingfabRtt => rtt(p, Encapsulation::Ringfab, ""),
        Kind::RingfabRttWait => rtt(p, Encapsulation::Ringfab, "+wait"),
        Kind::PlainRtt => rtt(p, Encapsulation::Plain, ""),
        Kind::KernelRx => kernel_rx(p),
        Kind::KernelRtt => {
            let reflector = kernel_role(p, "pong", 1, SINK_CPU)?;
            let pinger = kernel_role(p, "ping", 0, SOURCE_CPU);
            let rtt = pinger.and_then(result);
            let pong = finish(reflector);
            let back = interface_back(p);
            let (value, lost) = rtt.map_err(|e| format!("{e}; pong: {pong}"))?;
            back?;
            Ok(Measured {
                value,
                unit: "µs",
                detail: format!(
                    "{PINGS} round trips of {PLAIN_MESSAGE}-byte datagrams, blocking sockets, {lost}"
                ),
            })
        }
        Kind::KernelStream => {
            let sink = kernel_role(p, "recv", 1, SINK_CPU)?;
            let source = match kernel_role(p, "send", 0, SOURCE_CPU) {
                Ok(s) => s,
                Err(e) => {
                    finish(sink);
                    return Err(e);
                }
            };
            let got = result(sink);
            let sent = finish(source);
            let back = interface_back(p);
            let (value, _) = got.map_err(|e| format!("{e}; sender: {sent}"))?;
            back?;
            Ok(Measured {
                value,
                unit: "frames/s",
                detail: format!("{PLAIN_MESSAGE}-byte datagrams, sendmmsg and recvmmsg of {BURST}"),
            })
        }
        Kind::MacswapRtt => {
            let reflector = testpmd(p, 1, "macswap", SINK_CPU, &[])?;
            let pinger = role(p, "ping", 0, SOURCE_CPU, Encapsulation::Ringfab);
            let rtt = pinger.and_then(result);
            let macswap = stop(reflector);
            let (value, lost) = rtt.map_err(|e| format!("{e}; macswap: {}", tail(&macswap)))?;
            Ok(Measured {
                value,
                unit: "µs",
                detail: format!("{PINGS} round trips of {MESSAGE}-byte messages, {lost}"),
            })
        }
    }
}

/// A testpmd process on one NIC: forwarding mode `mode` on `cpu` (its main lcore on the other
/// CPU), the pair's ring depth, bursts of 32, statistics every second.
fn testpmd(
    p: &Pair,
    nic: usize,
    mode: &str,
    cpu: usize,
    extra: &[String],
) -> Result<Child, String> {
    let main = 1 - cpu;
    let mut c = Command::new(TESTPMD);
    c.args([
        "-l",
        "0,1",
        "--main-lcore",
        &main.to_string(),
        "-n",
        "1",
        "--file-prefix",
        &format!("rf{mode}"),
        "-a",
        &p.bdfs[nic],
        "--iova-mode=pa",
        "--log-level=*:warning",
        "--",
        &format!("--forward-mode={mode}"),
        "--port-topology=loop",
        "--nb-cores=1",
        &format!("--txd={}", p.depth),
        &format!("--rxd={}", p.depth),
        &format!("--burst={BURST}"),
        &format!("--txpkts={FRAME}"),
        "--stats-period=1",
        "--total-num-mbufs=8192",
        // No link state change interrupt: on the e1000e pair testpmd's port printed "link
        // state change event" about 200 times a second under a flood, each handled by its
        // interrupt thread on the CPU it shares with the frame source (docs/perf.md). The
        // link is still checked once at start (testpmd waits for it).
        "--no-lsc-interrupt",
    ])
    .args(extra)
    // Receive checksum checking on where ringfab's driver has it on (RXCSUM.IPOFLD/TUOFLD on
    // igb and e1000e): the device model then checks each IPv4/UDP frame it receives, in the
    // sender's vCPU thread. QEMU's virtio-net here offers no receive checksum feature, to
    // either driver (the PMD refuses the offload).
    .args(p.rx_checksum.then_some("--enable-rx-cksum"))
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    c.spawn().map_err(|e| format!("running {TESTPMD}: {e}"))
}

/// Sends `signal` to `child` and gives it `grace` to exit, then SIGKILL (a no-op if it has
/// exited). The caller still reaps it and reads its output.
fn signal_then_kill(child: &mut Child, signal: libc::c_int, grace: Duration) {
    // SAFETY: kill on the pid of a child this process spawned and has not yet waited for.
    unsafe { libc::kill(child.id() as libc::pid_t, signal) };
    let start = Instant::now();
    while start.elapsed() < grace {
        if let Ok(Some(_)) = child.try_wait() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
}

/// Stops a testpmd with SIGINT (it then stops forwarding, prints its totals and exits) and
/// returns what it printed; SIGKILL if it has not exited after ten seconds.
fn stop(mut child: Child) -> String {
    signal_then_kill(&mut child, libc::SIGINT, Duration::from_secs(10));
    let _ = child.wait();
    let mut out = String::new();
    if let Some(mut s) = child.stdout.take() {
        let _ = s.read_to_string(&mut out);
    }
    if let Some(mut s) = child.stderr.take() {
        let _ = s.read_to_string(&mut out);
    }
    out
}

/// The `Rx-pps:` figures of testpmd's periodic port statistics: each is the rate over the
/// last period as testpmd measured it with its own clock (so the pipe's buffering of its
/// output does not matter).
fn rx_pps(out: &str) -> Vec<f64> {
    pps(out, "Rx-pps:")
}

/// The figures after `key` (`Rx-pps:` or `Tx-pps:`) in testpmd's periodic port statistics.
fn pps(out: &str, key: &str) -> Vec<f64> {
    out.lines()
        .filter_map(|l| {
            let v = l.split(key).nth(1)?.split_whitespace().next()?;
            v.parse().ok()
        })
        .collect()
}

/// What testpmd's txonly says it sent: the mean `Tx-pps` of its last [`MEASURE_PERIODS`]
/// one-second periods with frames, leaving out the first (partly before the flood). The
/// sender is stopped right after the receiver's window, so these periods are about that
/// window: beside the receiver's figure they say whether the sender or the receiver set it.
/// `None` with fewer than two such periods.
fn txonly_sent(out: &str) -> Option<(f64, usize)> {
    let flooded: Vec<f64> = pps(out, "Tx-pps:")
        .into_iter()
        .skip_while(|&v| v == 0.0)
        .skip(1)
        .collect();
    let last = &flooded[flooded.len().saturating_sub(MEASURE_PERIODS)..];
    (last.len() >= 2).then(|| (last.iter().sum::<f64>() / last.len() as f64, last.len()))
}

/// [`txonly_sent`] for a measurement's detail.
fn txonly_said(out: &str) -> String {
    match txonly_sent(out) {
        Some((rate, n)) => format!(
            "; testpmd's txonly sent {rate:.0} frames/s (mean Tx-pps of its last {n} one-second \
             periods)"
        ),
        None => "; testpmd's txonly printed too few periods to say what it sent".to_string(),
    }
}

/// A running frame source: what [`Source::start`] started, or `kernel-rx`'s txonly.
enum Sending {
    /// testpmd's txonly, its output read as it comes (on a thread, so that a long run cannot
    /// fill the pipe and block its statistics).
    Txonly(Child, Output),
    /// ringfab's endpoint sender.
    Ringfab(Child),
}

impl Sending {
    /// A testpmd txonly just started.
    fn txonly(mut child: Child) -> Sending {
        let output = Output::read(&mut child);
        Sending::Txonly(child, output)
    }

    /// Stops the sender: its output, for an error (testpmd's, or why ringfab's sender
    /// failed), and what it says it sent, for a measurement's detail.
    fn stop(self) -> (String, String) {
        match self {
            Sending::Txonly(child, output) => {
                let out = output.finish(stop(child));
                let sent = txonly_said(&out);
                (out, sent)
            }
            Sending::Ringfab(child) => match stop_role(child) {
                Ok((rate, detail)) => (
                    String::new(),
                    format!("; ringfab's sender sent {rate:.0} messages/s ({detail})"),
                ),
                Err(e) => (e, String::new()),
            },
        }
    }
}

/// The sender that floods a receiver (testpmd's rxonly, or ringfab's driver receive loop).
#[derive(Clone, Copy, PartialEq, Debug)]
enum Source {
    /// testpmd txonly (`testpmd-rx`).
    Txonly,
    /// ringfab's endpoint sender, the `ringfab-stream` one (`rxonly-ringfab-tx`,
    /// `ringfab-rx-ringfab-tx`).
    RingfabSender,
}

impl Source {
    /// Starts the sender on NIC A, on the source CPU, flooding NIC B.
    fn start(self, p: &Pair) -> Result<Sending, String> {
        Ok(match self {
            Source::Txonly => Sending::txonly(testpmd(
                p,
                0,
                "txonly",
                SOURCE_CPU,
                &[format!("--eth-peer=0,{}", p.macs[1])],
            )?),
            Source::RingfabSender => {
                Sending::Ringfab(role(p, "send", 0, SOURCE_CPU, Encapsulation::Ringfab)?)
            }
        })
    }
}

/// testpmd txonly or ringfab's sender on A → testpmd rxonly on B: the mean of rxonly's
/// `Rx-pps` over [`MEASURE`]'s worth of one-second periods, after the first period with
/// frames (partly before the flood) and [`WARMUP`]'s worth — the window of ringfab's kinds.
fn testpmd_rx(p: &Pair, source: Source) -> Result<Measured, String> {
    let mut rx = testpmd(p, 1, "rxonly", SINK_CPU, &[])?;
    let output = Output::read(&mut rx);
    let tx = match source.start(p) {
        Ok(t) => t,
        Err(e) => {
            stop(rx);
            return Err(e);
        }
    };
    let (warm, want) = (WARM_PERIODS, WARM_PERIODS + MEASURE_PERIODS);
    let start = Instant::now();
    let mut marked = false;
    loop {
        let flooded = flooded_periods(&output.so_far()).len();
        if !marked && flooded >= warm {
            mark(true);
            marked = true;
        }
        if flooded >= want || start.elapsed() > TESTPMD_PATIENCE {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    if marked {
        mark(false);
    }
    // The receiver first, so that its last period is still under the flood.
    let rx_out = output.finish(stop(rx));
    let (tx_out, sent) = tx.stop();
    let window = measured_periods(&rx_out);
    if window.len() < 3 {
        return Err(format!(
            "{} periods of traffic in rxonly's statistics after {:.0} s, too few to measure; \
             rxonly: {} …; sender: {}",
            flooded_periods(&rx_out).len(),
            start.elapsed().as_secs_f64(),
            tail(&rx_out),
            tail(&tx_out)
        ));
    }
    let mean = window.iter().sum::<f64>() / window.len() as f64;
    Ok(Measured {
        value: mean,
        unit: "frames/s",
        detail: format!(
            "mean Rx-pps of {} one-second periods after {warm}{sent}",
            window.len()
        ),
    })
}

/// rxonly's `Rx-pps` from the first period with frames on.
fn flooded_periods(out: &str) -> Vec<f64> {
    rx_pps(out).into_iter().skip_while(|&v| v == 0.0).collect()
}

/// Periods of rxonly's statistics from the first with frames to the end of the warm-up: that
/// first one (partly before the flood) and [`WARMUP`]'s worth.
const WARM_PERIODS: usize = 1 + WARMUP.as_secs() as usize;
/// Periods measured after them: [`MEASURE`]'s worth.
const MEASURE_PERIODS: usize = MEASURE.as_secs() as usize;

/// The `Rx-pps` figures a testpmd-rx measurement averages: [`MEASURE_PERIODS`] after the
/// [`WARM_PERIODS`] (fewer if rxonly printed fewer).
fn measured_periods(out: &str) -> Vec<f64> {
    flooded_periods(out)
        .into_iter()
        .skip(WARM_PERIODS)
        .take(MEASURE_PERIODS)
        .collect()
}

/// A child's standard output, read by a thread as it comes.
struct Output {
    text: std::sync::Arc<std::sync::Mutex<String>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Output {
    /// Takes `child`'s standard output and reads it on a thread.
    fn read(child: &mut Child) -> Output {
        let text = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let reader = child.stdout.take().map(|mut out| {
            let text = text.clone();
            std::thread::spawn(move || {
                let mut chunk = [0u8; 4096];
                while let Ok(n @ 1..) = out.read(&mut chunk) {
                    let mut t = text.lock().unwrap_or_else(|e| e.into_inner());
                    t.push_str(&String::from_utf8_lossy(&chunk[..n]));
                }
            })
        });
        Output { text, reader }
    }

    /// What it has printed so far.
    fn so_far(&self) -> String {
        self.text.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Everything it printed, once it has exited, followed by `rest` (what [`stop`] read: its
    /// standard error).
    fn finish(mut self, rest: String) -> String {
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
        self.so_far() + &rest
    }
}

/// The last lines of a program's output, for an error.
fn tail(out: &str) -> String {
    let lines: Vec<&str> = out.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(6)..].join(" | ")
}

/// Marks the start (`true`) or the end of the window a measurement counts over, on the
/// console: under `--mmio` the runner counts the register accesses QEMU traced between the two
/// (`qemu-tests/src/mmio.rs`). Written to `/dev/console` whole, in one write, so that the roles
/// (whose output the bench reads through pipes) can mark too.
pub(crate) fn mark(start: bool) {
    use std::io::Write;
    let line = if start {
        "ringfab-guest: mark start\n"
    } else {
        "ringfab-guest: mark end\n"
    };
    if let Ok(mut c) = std::fs::OpenOptions::new().write(true).open("/dev/console") {
        let _ = c.write_all(line.as_bytes());
    }
}

/// Pins the calling thread to `cpu`.
pub(crate) fn pin(cpu: usize) -> Result<(), String> {
    // SAFETY: a zeroed cpu_set_t is the empty set; CPU_SET writes inside it for cpu < 1024.
    let rc = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(format!(
            "sched_setaffinity to CPU {cpu}: {}",
            std::io::Error::last_os_error()
        ))
    }
}

/// Lets the calling thread run on every CPU again.
fn unpin() {
    // SAFETY: as in `pin`, with both CPUs set.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(SOURCE_CPU, &mut set);
        libc::CPU_SET(SINK_CPU, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// Opens one NIC through VFIO with the driver its PCI ID names.
pub(crate) fn open(bdf: &str) -> Result<AnyNic<VfioPlatform>, String> {
    let platform = VfioPlatform::open(bdf).map_err(|e| format!("{bdf}: {e}"))?;
    AnyNic::open(platform).map_err(|e| format!("{bdf}: {e}"))
}

/// testpmd txonly (or ringfab's endpoint sender) on A → ringfab's driver receive loop on B,
/// pinned to the sink CPU; with `wait`, blocking on the queue's interrupt when idle.
fn ringfab_rx(p: &Pair, source: Source, wait: bool) -> Result<Measured, String> {
    let tx = source.start(p)?;
    pin(SINK_CPU)?;
    let r = (|| {
        let b = open(&p.bdfs[1])?;
        match p.depth {
            512 => receive::<_, 512>(&b, wait),
            _ => receive::<_, 256>(&b, wait),
        }
    })();
    unpin();
    let (tx_out, sent) = tx.stop();
    // A failed measurement keeps what ringfab's sender says it sent (nothing for txonly).
    let mut m = r.map_err(|e| format!("{e}; sender: {}{sent}", tail(&tx_out)))?;
    m.detail.push_str(&sent);
    Ok(m)
}

/// ringfab's receive loop on queue 0 of `nic`, `D` descriptors: every buffer posted, then poll
/// a burst and post the same buffers again, one doorbell per [`rx_doorbell_batch`] buffers
/// posted (as core's endpoints ring). Counts frames from the first one plus [`WARMUP`] for [`MEASURE`].
///
/// With `wait` the queue is steered to vector 0, and a poll that finds nothing unmasks its
/// interrupt, polls once more (a frame may have come before the unmasking) and, if that finds
/// nothing either, blocks on the vector for up to [`IDLE_WAIT`], then masks it again: the
/// receiver's vCPU idles instead of spinning.
fn receive<N: HalNic, const D: usize>(nic: &N, wait: bool) -> Result<Measured, String> {
    // The buffers before the queue, so that the queue is dropped (and stops) before they
    // are unmapped: the flood goes on after the measurement.
    let mem = nic
        .alloc_dma(D * BUF)
        .map_err(|e| format!("allocating receive buffers: {e}"))?;
    let config = if wait {
        RxConfig::new(BUF as u32).with_vector(0)
    } else {
        RxConfig::new(BUF as u32)
    };
    let mut rx = nic
        .open_rx::<D>(0, config)
        .map_err(|e| format!("opening receive queue 0: {e}"))?;
    let buffer = |t: u64| RxBuffer {
        iova: iova_at(&mem, t as usize * BUF),
        len: BUF as u32,
    };
    for t in 0..D as u64 {
        if rx.push(buffer(t), Token(t)).is_err() {
            break;
        }
    }
    rx.doorbell();
    let mut out = [NO_RX; BURST];
    // Buffers posted again since the last doorbell: the tail is written once per
    // `rx_doorbell_batch(D)` of them (a tail write is a call into QEMU's device model; the
    // device holds at least `D - rx_doorbell_batch(D)` buffers).
    let mut unrung = 0;
    let mut count = |rx: &mut N::Rx<'_, D>| -> Result<usize, String> {
        let mut n = rx.poll(&mut out);
        if n == 0 && wait {
            rx.set_interrupt(true);
            n = rx.poll(&mut out);
            if n == 0 {
                if let Some(w) = rx.interrupt() {
                    w.wait(Some(IDLE_WAIT));
                }
            }
            rx.set_interrupt(false);
        }
        for c in &out[..n] {
            rx.push(buffer(c.token.0), c.token)
                .map_err(|e| format!("posting buffer {} again: {e:?}", c.token.0))?;
        }
        unrung += n;
        if unrung >= rx_doorbell_batch(D) {
            rx.doorbell();
            unrung = 0;
        }
        Ok(out[..n].iter().filter(|c| c.status.is_ok()).count())
    };
    let start = Instant::now();
    while count(&mut rx)? == 0 {
        if start.elapsed() > STARTUP {
            return Err(format!("no frame from testpmd txonly in {STARTUP:?}"));
        }
    }
    let first = start.elapsed();
    let warm = Instant::now();
    while warm.elapsed() < WARMUP {
        count(&mut rx)?;
    }
    let mut frames = 0;
    mark(true);
    let t = Instant::now();
    while t.elapsed() < MEASURE {
        frames += count(&mut rx)?;
    }
    let secs = t.elapsed().as_secs_f64();
    mark(false);
    Ok(Measured {
        value: frames as f64 / secs,
        unit: "frames/s",
        detail: format!(
            "{frames} frames in {secs:.2} s (first frame {:.1} s after opening)",
            first.as_secs_f64()
        ),
    })
}

/// The encapsulation of ringfab's endpoints in a kind.
#[derive(Clone, Copy, Debug)]
enum Encapsulation {
    /// ringfab's header on Ethernet (the `ringfab-*` kinds).
    Ringfab,
    /// Plain IPv4/UDP (the `plain-*` kinds), each NIC at its [`Pair::addr`].
    Plain,
}

impl Encapsulation {
    /// The message that makes a [`FRAME`]-byte frame.
    fn message(self) -> usize {
        match self {
            Encapsulation::Ringfab => MESSAGE,
            Encapsulation::Plain => PLAIN_MESSAGE,
        }
    }
}

/// ringfab's endpoint sender on A → receiver on B, two processes: messages/s. `mode` is
/// appended to both roles' names (`+wait`: they block when idle).
fn stream(p: &Pair, encap: Encapsulation, mode: &str) -> Result<Measured, String> {
    let sink = role(p, &format!("recv{mode}"), 1, SINK_CPU, encap)?;
    let source = match role(p, &format!("send{mode}"), 0, SOURCE_CPU, encap) {
        Ok(s) => s,
        Err(e) => {
            finish(sink);
            return Err(e);
        }
    };
    let got = result(sink);
    let sent = stop_role(source);
    let (value, _) = got.map_err(|e| format!("{e}; sender: {sent:?}"))?;
    let sender = match sent {
        Ok((rate, detail)) => format!("the sender sent {rate:.0} messages/s ({detail})"),
        Err(e) => format!("the sender said no rate: {e}"),
    };
    Ok(Measured {
        value,
        unit: "frames/s",
        detail: format!(
            "{}-byte messages, bursts of {BURST}; {sender}",
            encap.message()
        ),
    })
}

/// ringfab's endpoint ping on A against its pong on B, two processes: µs per round trip.
/// `mode` as [`stream`]'s.
fn rtt(p: &Pair, encap: Encapsulation, mode: &str) -> Result<Measured, String> {
    let reflector = role(p, &format!("pong{mode}"), 1, SINK_CPU, encap)?;
    let pinger = role(p, &format!("ping{mode}"), 0, SOURCE_CPU, encap);
    let rtt = pinger.and_then(result);
    let pong = finish(reflector);
    let (value, lost) = rtt.map_err(|e| format!("{e}; pong: {pong}"))?;
    Ok(Measured {
        value,
        unit: "µs",
        detail: format!(
            "{PINGS} round trips of {}-byte messages, {lost}",
            encap.message()
        ),
    })
}

/// testpmd txonly on A, its frames UDP datagrams to B's address, MAC and port → the kernel's
/// driver on B and a socket's `recvmmsg` ([`crate::kernel_roles`] `recv`), pinned to the sink
/// CPU like B's interrupts: datagrams/s the socket got, counted as `ringfab-rx` counts frames.
fn kernel_rx(p: &Pair) -> Result<Measured, String> {
    let sink = kernel_role(p, "recv", 1, SINK_CPU)?;
    let tx = testpmd(
        p,
        0,
        "txonly",
        SOURCE_CPU,
        &[
            format!("--eth-peer=0,{}", p.macs[1]),
            format!("--tx-ip={},{}", p.addr(0), p.addr(1)),
            format!("--tx-udp={PORT},{PORT}"),
        ],
    );
    let tx = match tx {
        Ok(t) => Sending::txonly(t),
        Err(e) => {
            finish(sink);
            return Err(e);
        }
    };
    let got = result(sink);
    let (tx_out, sent) = tx.stop();
    let (value, _) = got.map_err(|e| format!("{e}; txonly: {}", tail(&tx_out)))?;
    Ok(Measured {
        value,
        unit: "frames/s",
        detail: format!(
            "{PLAIN_MESSAGE}-byte UDP datagrams, recvmmsg of up to {BURST}, over {:.0} s after \
             the first and {:.0} s of warm-up{sent}",
            MEASURE.as_secs_f64(),
            WARMUP.as_secs_f64()
        ),
    })
}

/// This program again as one side of a kernel UDP pair ([`crate::kernel_roles`]) at NIC
/// `nic`'s address, its peer the other NIC's, pinned to `cpu`; on NIC A the role takes the
/// interface into a network namespace of its own.
fn kernel_role(p: &Pair, role: &str, nic: usize, cpu: usize) -> Result<Child, String> {
    let exe = std::env::current_exe().map_err(|e| format!("finding this program: {e}"))?;
    let (own, peer) = (p.addr(nic).to_string(), p.addr(1 - nic).to_string());
    let mut c = Command::new(exe);
    c.args([
        crate::kernel_roles::ROLE,
        role,
        &own,
        &peer,
        &cpu.to_string(),
    ]);
    if nic == 0 {
        c.arg(&p.bdfs[0]);
    }
    c.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("running kernel {role}: {e}"))
}

/// Waits until NIC A's interface is back in the first network namespace (the kernel moves it
/// there when the role's namespace goes, after the role has exited).
fn interface_back(p: &Pair) -> Result<(), String> {
    kernel_nic::wait_for(|| kernel_nic::interface_of(&p.bdfs[0]), "interface back")
        .map(|_| ())
        .map_err(|e| format!("{} after its role's namespace: {e}", p.bdfs[0]))
}

/// This program again as one side of an endpoint pair ([`crate::roles`]) on NIC `nic` of
/// the pair, its peer the other NIC, pinned to `cpu`.
fn role(
    p: &Pair,
    role: &str,
    nic: usize,
    cpu: usize,
    encap: Encapsulation,
) -> Result<Child, String> {
    let exe = std::env::current_exe().map_err(|e| format!("finding this program: {e}"))?;
    let peer = match encap {
        Encapsulation::Ringfab => p.macs[1 - nic].clone(),
        Encapsulation::Plain => format!("plain:{},{}", p.addr(nic), p.addr(1 - nic)),
    };
    Command::new(exe)
        .args([crate::roles::ROLE, role, &p.bdfs[nic], &peer])
        .args([p.depth.to_string(), cpu.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("running {role}: {e}"))
}

/// Waits for a role that ends by itself and reads its result ([`parse_result`]).
fn result(child: Child) -> Result<(f64, String), String> {
    let out = child
        .wait_with_output()
        .map_err(|e| format!("waiting for a role: {e}"))?;
    parse_result(&String::from_utf8_lossy(&out.stdout)).ok_or_else(|| {
        format!(
            "{}: {}",
            out.status,
            one_line(&String::from_utf8_lossy(&out.stderr))
        )
    })
}

/// The `result <value> [detail]` line of a role's output.
fn parse_result(stdout: &str) -> Option<(f64, String)> {
    stdout.lines().find_map(|l| {
        let rest = l.strip_prefix("result ")?.trim();
        let (value, detail) = rest.split_once(' ').unwrap_or((rest, ""));
        Some((value.parse().ok()?, detail.to_owned()))
    })
}

/// Stops a role that runs until SIGTERM (`send`, `pong`): SIGTERM, then SIGKILL if it has not
/// exited after five seconds. Returns what it said on stderr (empty unless it failed).
fn finish(mut child: Child) -> String {
    signal_then_kill(&mut child, libc::SIGTERM, Duration::from_secs(5));
    let mut err = String::new();
    if let Some(mut s) = child.stderr.take() {
        let _ = s.read_to_string(&mut err);
    }
    let _ = child.wait();
    one_line(&err)
}

/// Stops a role that runs until SIGTERM and reports a result then (`send`): SIGTERM, SIGKILL
/// after five seconds, then its `result` line ([`parse_result`]).
fn stop_role(mut child: Child) -> Result<(f64, String), String> {
    signal_then_kill(&mut child, libc::SIGTERM, Duration::from_secs(5));
    result(child)
}

/// `52:54:00:12:34:0b` as a MAC.
pub(crate) fn parse_mac(s: &str) -> Option<MacAddr> {
    let bytes: Vec<u8> = s
        .split(':')
        .map(|b| u8::from_str_radix(b, 16).ok())
        .collect::<Option<_>>()?;
    Some(MacAddr(bytes.try_into().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rx_pps_is_read_from_testpmds_port_statistics() {
        let out = "  ######## NIC statistics for port 0 ########\n  \
                   RX-packets: 120  RX-missed: 0  RX-bytes: 7680\n  \
                   Throughput (since last show)\n  Rx-pps:        41234          Rx-bps: 21111808\n  \
                   Tx-pps:            0          Tx-bps:            0\n  Rx-pps:  0  Rx-bps: 0\n";
        assert_eq!(rx_pps(out), [41234.0, 0.0]);
    }

    #[test]
    fn what_txonly_sent_is_the_mean_of_its_last_full_periods() {
        // txonly's port statistics: Rx-pps 0 (it receives nothing), Tx-pps per period.
        let out: String = [0, 0, 7, 100, 100, 200, 300, 400, 500, 600]
            .iter()
            .map(|v| format!("  Rx-pps: 0  Rx-bps: 0\n  Tx-pps: {v}  Tx-bps: 0\n"))
            .collect();
        assert_eq!(txonly_sent(&out), Some((400.0, 5)), "the last five");
        // The first period with frames is partly before the flood: left out.
        let short: String = [0, 7, 100, 300]
            .iter()
            .map(|v| format!("  Tx-pps: {v}  Tx-bps: 0\n"))
            .collect();
        assert_eq!(txonly_sent(&short), Some((200.0, 2)));
        assert_eq!(txonly_sent("  Tx-pps: 0\n  Tx-pps: 7\n  Tx-pps: 9\n"), None);
        assert!(txonly_said("").contains("too few"));
    }

    #[test]
    fn only_picks_kinds_by_name_in_round_order_and_refuses_unknown_ones() {
        assert_eq!(kinds(None).unwrap(), KINDS);
        assert_eq!(
            kinds(Some("macswap-rtt,ringfab-rtt")).unwrap(),
            [Kind::RingfabRtt, Kind::MacswapRtt]
        );
        assert!(kinds(Some("ringfab-rtt,rtt"))
            .unwrap_err()
            .contains("'rtt'"));
    }

    #[test]
    fn the_measured_periods_follow_the_first_with_frames_and_the_warm_up() {
        let periods = [0, 0, 5, 10, 20, 100, 101, 102, 103, 104, 105, 106];
        let out: String = periods
            .iter()
            .map(|v| format!("  Rx-pps: {v}  Rx-bps: 0\n"))
            .collect();
        assert_eq!(WARM_PERIODS, 3, "the partial period and 2 s of warm-up");
        assert_eq!(measured_periods(&out), [100.0, 101.0, 102.0, 103.0, 104.0]);
        // A late start leaves fewer, which the caller refuses below 3.
        assert_eq!(
            measured_periods(&out[..out.find("102").unwrap()]),
            [100.0, 101.0]
        );
    }

    #[test]
    fn a_role_result_is_a_value_and_an_optional_detail() {
        assert_eq!(
            parse_result("result 13284.1\n"),
            Some((13284.1, String::new()))
        );
        assert_eq!(
            parse_result("# ready\nresult 274.75 lost 0\n"),
            Some((274.75, "lost 0".into()))
        );
        assert_eq!(parse_result("result x\n"), None);
    }

    #[test]
    fn macs_parse_from_the_command_line_form() {
        assert_eq!(
            parse_mac("52:54:00:12:34:0b"),
            Some(MacAddr([0x52, 0x54, 0, 0x12, 0x34, 0x0b]))
        );
        assert_eq!(parse_mac("52:54:00"), None);
        assert_eq!(parse_mac("52:54:00:12:34:zz"), None);
    }

    #[test]
    fn the_message_makes_a_64_byte_frame() {
        assert_eq!(MESSAGE + 30, FRAME);
    }
}
