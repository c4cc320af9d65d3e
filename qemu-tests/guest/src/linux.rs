//! ringfab against the Linux kernel (issue 16: "Under QEMU, against the Linux kernel: a NIC
//! driven by the guest's own Linux driver on the same hub as a ringfab NIC"). For each NIC
//! model, `*linux-nic-b` hands NIC B of the pair to the kernel's driver and opens NIC A with
//! ringfab's; the tests after it need that and nothing else: `ping` from Linux answered by
//! ringfab, 100 000 UDP datagrams each way between a kernel socket and a plain-UDP endpoint,
//! busybox `nc` through the kernel's TCP to `ringfab_smoltcp::echo::serve`, and the same UDP
//! exchange under a flood of malformed frames from an `AF_PACKET` socket.
//!
//! ringfab has no thread of its own: while Linux works, the test's thread reads ringfab's CQ
//! (which answers ARP and ICMP, docs/ip.md) or polls smoltcp's interface.

use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use ringfab::domain::Domain;
use ringfab::hal::Nic as HalNic;
use ringfab::ip::{Discard, Ipv4Config, SockAddrIn};
use ringfab::Capacities;
use ringfab_e1000e::E1000e;
use ringfab_smoltcp::echo::{self, ServeConfig};
use ringfab_smoltcp::smoltcp::time::Instant as SmolInstant;
use ringfab_smoltcp::smoltcp::wire::Ipv4Cidr;
use ringfab_smoltcp::Counters;
use ringfab_vfio::VfioPlatform;

use crate::flood::{self, Expect, Link, PacketSocket};
use crate::guest::{Ctx, Nic, Outcome};
use crate::kernel_nic::{self, LinuxIf};
use crate::nic::{bind_all, DEPTH};
use crate::udp_exchange::{self, datagram, exchange, plain_host, read_once, Way, RING};
use crate::virtio::NicVirtio;
use crate::wait::StdClock;

/// The ringfab endpoint's UDP port, and the Linux socket's.
const RINGFAB_PORT: u16 = 7000;
const LINUX_PORT: u16 = 7001;
/// TCP echo's port (RFC 862).
const ECHO_PORT: u16 = 7;
/// Datagrams each way in `*linux-udp-100k` (the figure), and under the flood.
const EXCHANGE: u64 = 100_000;
const FLOOD_EXCHANGE: u64 = 10_000;
/// Bytes `nc` sends through the echo server: several KiB, many segments.
const ECHO_BYTES: usize = 64 * 1024;
/// How long `ping` and `nc` may take.
const CHILD_PATIENCE: Duration = Duration::from_secs(30);
/// How long the drop counts must stay still after the flood before they are read.
const QUIET: Duration = Duration::from_millis(300);

/// A NIC pair's ringfab half (NIC A, ringfab's driver through VFIO) and Linux half (NIC B).
pub(crate) struct Peer<N> {
    nic: N,
    linux: LinuxIf,
    /// The pair's subnet (one per model: the three Linux interfaces share one kernel).
    subnet: [u8; 3],
}

impl<N: HalNic> Peer<N> {
    fn ringfab_ip(&self) -> Ipv4Addr {
        let [a, b, c] = self.subnet;
        Ipv4Addr::new(a, b, c, 1)
    }

    fn broadcast_ip(&self) -> Ipv4Addr {
        let [a, b, c] = self.subnet;
        Ipv4Addr::new(a, b, c, 255)
    }

    /// A domain on NIC A with the pair's address (docs/ip.md "The domain's IPv4
    /// configuration").
    fn domain<'n>(&'n self, clock: &'n StdClock) -> Result<Domain<'n, N, RING>, String> {
        let caps = Capacities {
            queues: 2,
            cqs: 1,
            cq_size: udp_exchange::CQ_SIZE,
            mrs: 1,
            avs: 1,
            av_entries: 4,
        };
        let dom = Domain::<_, RING>::with_capacities(&self.nic, &caps).with_clock(clock);
        dom.set_ipv4(Ipv4Config {
            addr: self.ringfab_ip(),
            prefix_len: 24,
            gateway: None,
        })
        .map_err(|e| format!("set_ipv4: {e}"))?;
        Ok(dom)
    }

    /// What the NIC offers for checksums, as the pass lines say it.
    fn offloads(&self) -> String {
        let o = self.nic.capabilities().offloads;
        let yes = |b: bool| if b { "yes" } else { "no" };
        format!(
            "offloads: UDP checksum inserted on transmit {}, IPv4/UDP checked on receive {}/{}",
            yes(o.tx_l4_checksum),
            yes(o.rx_ipv4_checksum),
            yes(o.rx_l4_checksum)
        )
    }
}

/// One NIC model: how its pair is found, released and opened, and which kernel driver takes
/// NIC B.
pub(crate) trait Model {
    type N: HalNic;
    /// The kernel's PCI driver for the model (`virtio-pci` carries `virtio_net`).
    const KERNEL_DRIVER: &'static str;
    /// The PCI functions ringfab's driver drives, to check NIC A against.
    const PCI_IDS: &'static [(u16, u16)];
    /// The pair's /24: documentation networks, RFC 5737 §3.
    const SUBNET: [u8; 3];
    /// The pair's link is a bridge on the host (virtio-net's taps), not a QEMU hub.
    const BRIDGED: bool;
    fn bdfs(ctx: &Ctx) -> Option<[String; 2]>;
    /// Closes the earlier tests' handles on both NICs of the pair.
    fn release(ctx: &mut Ctx);
    fn open(p: VfioPlatform) -> Result<Self::N, String>;
    fn peer(ctx: &Ctx) -> Option<&Peer<Self::N>>;
    fn set_peer(ctx: &mut Ctx, peer: Option<Peer<Self::N>>);
    fn take_peer(ctx: &mut Ctx) -> Option<Peer<Self::N>>;
}

pub(crate) struct Igb;
pub(crate) struct E1000eModel;
pub(crate) struct Virtio;

impl Model for Igb {
    type N = Nic;
    const KERNEL_DRIVER: &'static str = "igb";
    const PCI_IDS: &'static [(u16, u16)] = ringfab_igb::PCI_IDS;
    const SUBNET: [u8; 3] = [192, 0, 2];
    const BRIDGED: bool = false;
    fn bdfs(ctx: &Ctx) -> Option<[String; 2]> {
        Some(ctx.bdfs.clone())
    }
    fn release(ctx: &mut Ctx) {
        ctx.release();
    }
    fn open(p: VfioPlatform) -> Result<Nic, String> {
        Nic::new(p).map_err(|e| e.to_string())
    }
    fn peer(ctx: &Ctx) -> Option<&Peer<Nic>> {
        ctx.linux_igb.as_ref()
    }
    fn set_peer(ctx: &mut Ctx, peer: Option<Peer<Nic>>) {
        ctx.linux_igb = peer;
    }
    fn take_peer(ctx: &mut Ctx) -> Option<Peer<Nic>> {
        ctx.linux_igb.take()
    }
}

impl Model for E1000eModel {
    type N = E1000e<VfioPlatform>;
    const KERNEL_DRIVER: &'static str = "e1000e";
    const PCI_IDS: &'static [(u16, u16)] = ringfab_e1000e::PCI_IDS;
    const SUBNET: [u8; 3] = [198, 51, 100];
    const BRIDGED: bool = false;
    fn bdfs(ctx: &Ctx) -> Option<[String; 2]> {
        ctx.e1000e_bdfs.clone()
    }
    fn release(ctx: &mut Ctx) {
        ctx.e1000e = None;
    }
    fn open(p: VfioPlatform) -> Result<Self::N, String> {
        E1000e::new(p).map_err(|e| e.to_string())
    }
    fn peer(ctx: &Ctx) -> Option<&Peer<Self::N>> {
        ctx.linux_e1000e.as_ref()
    }
    fn set_peer(ctx: &mut Ctx, peer: Option<Peer<Self::N>>) {
        ctx.linux_e1000e = peer;
    }
    fn take_peer(ctx: &mut Ctx) -> Option<Peer<Self::N>> {
        ctx.linux_e1000e.take()
    }
}

impl Model for Virtio {
    type N = NicVirtio;
    const KERNEL_DRIVER: &'static str = "virtio-pci";
    const PCI_IDS: &'static [(u16, u16)] = ringfab_virtio_net::PCI_IDS;
    const SUBNET: [u8; 3] = [203, 0, 113];
    const BRIDGED: bool = true;
    fn bdfs(ctx: &Ctx) -> Option<[String; 2]> {
        ctx.virtio_bdfs.clone()
    }
    fn release(ctx: &mut Ctx) {
        ctx.virtio = None;
    }
    fn open(p: VfioPlatform) -> Result<Self::N, String> {
        NicVirtio::new(p).map_err(|e| e.to_string())
    }
    fn peer(ctx: &Ctx) -> Option<&Peer<Self::N>> {
        ctx.linux_virtio.as_ref()
    }
    fn set_peer(ctx: &mut Ctx, peer: Option<Peer<Self::N>>) {
        ctx.linux_virtio = peer;
    }
    fn take_peer(ctx: &mut Ctx) -> Option<Peer<Self::N>> {
        ctx.linux_virtio.take()
    }
}

fn peer<M: Model>(ctx: &Ctx) -> Result<&Peer<M::N>, String> {
    M::peer(ctx).ok_or_else(|| {
        format!(
            "NIC B is not on Linux's {} driver (its linux-nic-b test failed or did not run)",
            M::KERNEL_DRIVER
        )
    })
}

/// Hands NIC B to the kernel's driver (its modules loaded first, IPv6 off), gives the
/// interface `<subnet>.2/24`, and opens NIC A (bound to vfio-pci if it is not yet) with
/// ringfab's driver. The earlier tests' handles on the pair are closed: the tests of a model
/// that use both NICs through ringfab come before this one.
pub(crate) fn nic_b<M: Model>(ctx: &mut Ctx) -> Outcome {
    let [a, b] = M::bdfs(ctx).ok_or("the kernel command line names no such pair")?;
    M::release(ctx);
    M::set_peer(ctx, None);
    kernel_nic::no_ipv6()?;
    let loaded = kernel_nic::load_nic_drivers()?;
    let bound = bind_all(std::slice::from_ref(&a), M::PCI_IDS, "a NIC ringfab drives")?;
    let [x, y, z] = M::SUBNET;
    let start = Instant::now();
    let linux = kernel_nic::hand_over(&b, M::KERNEL_DRIVER, Ipv4Addr::new(x, y, z, 2), 24)?;
    let up = start.elapsed();
    let linux_mac = linux.mac;
    let p = VfioPlatform::open(&a).map_err(|e| format!("opening {a}: {e}"))?;
    let nic = M::open(p).map_err(|e| format!("bringing up {a}: {e}"))?;
    let peer = Peer {
        nic,
        linux,
        subnet: M::SUBNET,
    };
    let detail = format!(
        "{loaded} kernel modules loaded; {b} on Linux's {} driver as {} ({}/24, MAC {linux_mac}, \
         {}, carrier up {} ms after the bind); {bound}, ringfab at {}/24; {}",
        M::KERNEL_DRIVER,
        peer.linux.name,
        peer.linux.addr,
        peer.linux.iommu,
        up.as_millis(),
        peer.ringfab_ip(),
        peer.offloads()
    );
    M::set_peer(ctx, Some(peer));
    Ok(detail)
}

/// RFC 1122 §3.2.2.6: "Every host MUST implement an ICMP Echo server function that receives
/// Echo Requests and sends corresponding Echo Replies." busybox `ping` from the Linux
/// interface to ringfab's address: the kernel resolves it with ARP, which ringfab answers
/// (RFC 826), and every echo request is answered — both driven by reading ringfab's CQ.
pub(crate) fn ping<M: Model>(ctx: &mut Ctx) -> Outcome {
    let peer = peer::<M>(ctx)?;
    let clock = StdClock::new();
    let dom = peer.domain(&clock)?;
    let mut host = plain_host(&dom, RINGFAB_PORT)?;
    let target = peer.ringfab_ip().to_string();
    let mut child = Command::new("ping")
        .args(["-c", "3", "-w", "20", &target])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("running ping: {e}"))?;
    let start = Instant::now();
    while child.try_wait().map_err(|e| e.to_string())?.is_none() {
        if let Some((ctx, len, _)) = read_once(&dom, &mut host)?.into_iter().next() {
            return Err(format!(
                "a completion for {ctx:#x} ({len} bytes) during ping"
            ));
        }
        if start.elapsed() > CHILD_PATIENCE {
            let _ = child.kill();
            return Err(format!("ping still running after {CHILD_PATIENCE:?}"));
        }
        std::thread::yield_now();
    }
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let summary = stdout
        .lines()
        .find(|l| l.contains("packets transmitted"))
        .unwrap_or_default();
    if !out.status.success() || !summary.contains("3 packets received") {
        return Err(format!(
            "ping exited with {}: {} {}",
            out.status,
            stdout.trim(),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let rtt = stdout
        .lines()
        .find_map(|l| l.strip_prefix("round-trip "))
        .unwrap_or("?");
    Ok(format!(
        "{} → {target}: {summary}; round-trip {rtt}",
        peer.linux.addr
    ))
}

/// Issue 16's cross test: libfabric's own udp provider (`fi_pingpong -p udp`, the kernel's
/// sockets on NIC B's interface) against ringfab's provider over `FI_SOCKADDR_IN` on NIC A
/// (`fi_pingpong -p ringfab`, `FI_RINGFAB_IPV4`), each as server and as client, every byte
/// checked ([`crate::fabric::against_udp_provider`]). The test's own handle on NIC A is closed
/// for the run (a VFIO group has one owner) and opened again after.
pub(crate) fn fi_pingpong_udp<M: Model>(ctx: &mut Ctx) -> Outcome {
    let [a, _] = M::bdfs(ctx).ok_or("the kernel command line names no such pair")?;
    let (ipv4, ifname, linux_addr) = {
        let p = peer::<M>(ctx)?;
        (
            format!("{}/24", p.ringfab_ip()),
            p.linux.name.clone(),
            p.linux.addr.to_string(),
        )
    };
    let Some(Peer { nic, linux, subnet }) = M::take_peer(ctx) else {
        return Err("NIC B's peer went away".into());
    };
    drop(nic);
    let out = crate::fabric::against_udp_provider(&a, &ipv4, &ifname, &linux_addr).map_err(|e| {
        let arp = std::fs::read_to_string("/proc/net/arp").unwrap_or_default();
        let udp = std::fs::read_to_string("/proc/net/snmp").unwrap_or_default();
        let udp: Vec<&str> = udp.lines().filter(|l| l.starts_with("Udp:")).collect();
        format!(
            "{e}; {}; the kernel's neighbours: {}; {}",
            linux_counters(&ifname),
            arp.trim().replace('\n', " | "),
            udp.join(" / ")
        )
    });
    let reopened = VfioPlatform::open(&a)
        .map_err(|e| format!("opening {a}: {e}"))
        .and_then(|p| M::open(p).map_err(|e| format!("bringing up {a}: {e}")));
    match reopened {
        Ok(nic) => M::set_peer(ctx, Some(Peer { nic, linux, subnet })),
        Err(e) => {
            let detail = out?;
            return Err(format!("{detail}; but then {e}"));
        }
    }
    out
}

/// `(InCsumErrors, RcvbufErrors)` of the kernel's UDP counters (`/proc/net/snmp`): a datagram
/// with a wrong checksum, or one its socket had no room for, counts there.
pub(crate) fn kernel_udp_errors() -> Result<(u64, u64), String> {
    let snmp = std::fs::read_to_string("/proc/net/snmp").map_err(|e| e.to_string())?;
    let mut udp = snmp.lines().filter(|l| l.starts_with("Udp:"));
    let (names, values) = (udp.next(), udp.next());
    let (Some(names), Some(values)) = (names, values) else {
        return Err("no Udp: lines in /proc/net/snmp".into());
    };
    let value = |name: &str| {
        let at = names.split_whitespace().position(|n| n == name)?;
        values.split_whitespace().nth(at)?.parse::<u64>().ok()
    };
    match (value("InCsumErrors"), value("RcvbufErrors")) {
        (Some(c), Some(r)) => Ok((c, r)),
        _ => Err(format!("no InCsumErrors/RcvbufErrors in {names}")),
    }
}

/// The Linux socket and ringfab's address for it, and the socket's address in ringfab's AV.
fn linux_socket<N: HalNic>(
    peer: &Peer<N>,
    dom: &Domain<'_, N, RING>,
    host: &udp_exchange::PlainHost<N>,
) -> Result<(UdpSocket, SocketAddr, ringfab::av::FiAddr), String> {
    let sock = UdpSocket::bind((peer.linux.addr, LINUX_PORT))
        .map_err(|e| format!("binding {}:{LINUX_PORT}: {e}", peer.linux.addr))?;
    let to_linux = host
        .av
        .insert_sockaddr_one(dom, SockAddrIn::new(peer.linux.addr, LINUX_PORT))
        .map_err(|e| format!("insert_sockaddr: {e}"))?;
    Ok((
        sock,
        SocketAddr::from((peer.ringfab_ip(), RINGFAB_PORT)),
        to_linux,
    ))
}

/// The issue's "a Linux UDP socket program and a ringfab endpoint exchange 100,000 datagrams
/// of mixed sizes both ways, checked byte for byte, none lost on a quiet link". The kernel
/// drops a datagram whose UDP checksum is wrong (RFC 1122 §4.1.3.4: "If a UDP datagram is
/// received with a checksum that is non-zero and invalid, UDP MUST silently discard the
/// datagram"), so its taking all of ringfab's proves the checksums ringfab's NIC inserted.
pub(crate) fn udp_100k<M: Model>(ctx: &mut Ctx) -> Outcome {
    let peer = peer::<M>(ctx)?;
    let clock = StdClock::new();
    let dom = peer.domain(&clock)?;
    let mut host = plain_host(&dom, RINGFAB_PORT)?;
    let (sock, ringfab, to_linux) = linux_socket(peer, &dom, &host)?;
    let before = kernel_udp_errors()?;
    let done = exchange(&dom, &mut host, &sock, ringfab, to_linux, EXCHANGE)
        .map_err(|e| format!("{e}; {}", linux_counters(&peer.linux.name)))?;
    let after = kernel_udp_errors()?;
    if after != before {
        return Err(format!(
            "the kernel's InCsumErrors/RcvbufErrors went from {before:?} to {after:?}"
        ));
    }
    let bytes: usize = (0..EXCHANGE)
        .map(|s| datagram(Way::RingfabToLinux, s).len())
        .sum();
    let secs = done.elapsed.as_secs_f64();
    Ok(format!(
        "{EXCHANGE} datagrams of 1–{} bytes each way at once ({:.1} MB each way), byte for \
         byte, none lost, {}, in {secs:.1} s ({:.0} datagrams/s each way); the kernel counted \
         no checksum or buffer error; {}; ringfab dropped {}",
        udp_exchange::MAX_PAYLOAD,
        bytes as f64 / 1e6,
        done.order(),
        EXCHANGE as f64 / secs,
        peer.offloads(),
        drops_line(&dom.ip_drops())
    ))
}

/// The Linux interface's counters, for a failure's message.
fn linux_counters(ifname: &str) -> String {
    let stats = [
        "tx_packets",
        "tx_dropped",
        "rx_packets",
        "rx_dropped",
        "rx_missed_errors",
    ]
    .iter()
    .map(|s| {
        let f = format!("/sys/class/net/{ifname}/statistics/{s}");
        let v = std::fs::read_to_string(f).unwrap_or_default();
        format!("{s} {}", v.trim())
    })
    .collect::<Vec<_>>()
    .join(", ");
    format!(
        "{ifname}: {stats}; kernel UDP (InCsumErrors, RcvbufErrors) {:?}",
        kernel_udp_errors()
    )
}

/// Frames the Linux interface has sent.
fn linux_tx_packets(ifname: &str) -> u64 {
    let f = format!("/sys/class/net/{ifname}/statistics/tx_packets");
    std::fs::read_to_string(f)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// The nonzero drop counts of a domain, by reason.
fn drops_line(d: &ringfab::ip::IpDrops) -> String {
    let mut parts: Vec<String> = Discard::ALL
        .iter()
        .filter(|r| d.of(**r) > 0)
        .map(|r| format!("{r:?} {}", d.of(*r)))
        .collect();
    for (name, n) in [
        ("port", d.port),
        ("too_long", d.too_long),
        ("control", d.control),
    ] {
        if n > 0 {
            parts.push(format!("{name} {n}"));
        }
    }
    if parts.is_empty() {
        "nothing".into()
    } else {
        parts.join(", ")
    }
}

/// The "TCP echo through the smoltcp device with busybox `nc`": `nc` sends
/// [`ECHO_BYTES`] through the kernel's TCP to `echo::serve` on NIC A (RFC 862: "Once a
/// connection is established any data received is sent back"), closes its sending half at
/// the end of its input, and exits when the server has closed; what it printed must be what
/// it read.
///
/// The kernel's interface keeps its transmit checksum offload on: on virtio-net its segments
/// arrive with `NEEDS_CSUM` and a partial checksum (across the host's bridge and taps), which
/// the smoltcp device completes before smoltcp checks it; the pass line says how many.
pub(crate) fn tcp_echo<M: Model>(ctx: &mut Ctx) -> Outcome {
    let peer = peer::<M>(ctx)?;
    let input: Vec<u8> = (0..ECHO_BYTES as u64).map(echo::pattern).collect();
    let (in_path, out_path) = ("/tmp/tcp-echo-in", "/tmp/tcp-echo-out");
    std::fs::write(in_path, &input).map_err(|e| format!("writing {in_path}: {e}"))?;
    let stdin = std::fs::File::open(in_path).map_err(|e| format!("{in_path}: {e}"))?;
    let stdout = std::fs::File::create(out_path).map_err(|e| format!("{out_path}: {e}"))?;
    let target = peer.ringfab_ip().to_string();
    let mut child = Command::new("nc")
        .args([target.as_str(), &ECHO_PORT.to_string()])
        .stdin(stdin)
        .stdout(stdout)
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("running nc: {e}"))?;
    let start = Instant::now();
    let now = || SmolInstant::from_millis(start.elapsed().as_millis() as i64);
    let mut exited = None;
    let config = ServeConfig::new(Ipv4Cidr::new(peer.ringfab_ip(), 24), ECHO_PORT);
    let mut device = Counters::default();
    let served = echo::serve::<M::N, DEPTH>(&peer.nic, &config, now, |_, dev| {
        device = dev.counters();
        match child.try_wait() {
            Ok(Some(status)) => exited = Some(Ok(status)),
            Ok(None) if start.elapsed() > CHILD_PATIENCE => {
                exited = Some(Err(format!("nc still running after {CHILD_PATIENCE:?}")))
            }
            Ok(None) => std::thread::yield_now(),
            Err(e) => exited = Some(Err(format!("waiting for nc: {e}"))),
        }
        exited.is_none()
    });
    let took = start.elapsed();
    let stats = served.map_err(|e| format!("echo::serve: {e}"))?;
    let status = match exited {
        Some(Ok(status)) => status,
        Some(Err(why)) => {
            let _ = child.kill();
            return Err(why);
        }
        None => return Err("echo::serve returned before nc exited".into()),
    };
    let output = std::fs::read(out_path).map_err(|e| format!("reading {out_path}: {e}"))?;
    if !status.success() || output != input {
        let first_diff = output.iter().zip(&input).position(|(a, b)| a != b);
        let mut err = String::new();
        if let Some(mut e) = child.stderr.take() {
            use std::io::Read;
            let _ = e.read_to_string(&mut err);
        }
        return Err(format!(
            "nc exited with {status} having printed {} of {ECHO_BYTES} bytes (first \
             difference at {first_diff:?}): {}",
            output.len(),
            err.trim()
        ));
    }
    Ok(format!(
        "busybox nc {target} {ECHO_PORT}: {ECHO_BYTES} bytes echoed byte for byte in {} ms \
         ({} connection, {} bytes echoed by the server; of {} frames received, {} with a \
         partial checksum the device completed)",
        took.as_millis(),
        stats.connections,
        stats.echoed,
        device.rx_frames,
        device.rx_checksums_completed
    ))
}

/// The issue's "the kernel side floods malformed frames (AF_PACKET) while a ringfab exchange
/// runs, and the exchange completes". [`FLOOD_EXCHANGE`] datagrams each way, checked as in
/// `*linux-udp-100k`, while a thread sends every frame of [`flood::malformed`] round after
/// round; then each reason's count in `Domain::ip_drops` must be what the frames sent for it
/// add up to (frames a NIC or a bridge may filter by address: at most that).
pub(crate) fn packet_flood<M: Model>(ctx: &mut Ctx) -> Outcome {
    let peer = peer::<M>(ctx)?;
    let clock = StdClock::new();
    let dom = peer.domain(&clock)?;
    let mut host = plain_host(&dom, RINGFAB_PORT)?;
    let (sock, ringfab, to_linux) = linux_socket(peer, &dom, &host)?;
    let frames = flood::malformed(&Link {
        ringfab_mac: peer.nic.capabilities().mac,
        linux_mac: peer.linux.mac,
        ringfab_ip: peer.ringfab_ip(),
        linux_ip: peer.linux.addr,
        broadcast_ip: peer.broadcast_ip(),
        port: RINGFAB_PORT,
        bridged: M::BRIDGED,
    });
    let raw = PacketSocket::open(&peer.linux.name)?;
    let stop = AtomicBool::new(false);
    let (nic_before, linux_before) = (peer.nic.stats(), linux_tx_packets(&peer.linux.name));
    let (done, sent) = std::thread::scope(|s| {
        let ports = || dom.ip_drops().port;
        let (raw, frames, stop) = (&raw, &frames, &stop);
        let flooder = s.spawn(move || flood::flood(raw, frames, stop, ports));
        let done = exchange(&dom, &mut host, &sock, ringfab, to_linux, FLOOD_EXCHANGE);
        stop.store(true, Ordering::SeqCst);
        (done, flooder.join())
    });
    let sent = sent.map_err(|_| "the flooding thread panicked".to_owned())?;
    let done = done.map_err(|e| {
        let nic = peer.nic.stats();
        format!(
            "{e}; {}; flood frames sent {}; meanwhile Linux's NIC sent {} frames and ringfab's \
             NIC received {} (missed {})",
            linux_counters(&peer.linux.name),
            sent.iter().sum::<u64>(),
            linux_tx_packets(&peer.linux.name) - linux_before,
            nic.rx_packets - nic_before.rx_packets,
            nic.rx_missed - nic_before.rx_missed
        )
    })?;
    // The last frames of the flood are still arriving: read until the counts stay still.
    let mut last = (Instant::now(), dom.ip_drops());
    while last.0.elapsed() < QUIET {
        if let Some((ctx, len, _)) = read_once(&dom, &mut host)?.into_iter().next() {
            return Err(format!(
                "a completion for {ctx:#x} ({len} bytes) after the exchange"
            ));
        }
        let now = dom.ip_drops();
        if now != last.1 {
            last = (Instant::now(), now);
        }
        std::thread::yield_now();
    }
    let drops = last.1;
    let unsent: Vec<&str> = frames
        .iter()
        .zip(&sent)
        .filter(|(_, n)| **n == 0)
        .map(|(m, _)| m.name)
        .collect();
    if !unsent.is_empty() {
        return Err(format!("the kernel sent none of: {}", unsent.join(", ")));
    }
    let mut want = [0u64; Discard::ALL.len()];
    let mut at_most = [0u64; Discard::ALL.len()];
    let mut port = 0;
    for (m, n) in frames.iter().zip(&sent) {
        match m.expect {
            Expect::Counted(r) => want[r.index()] += n,
            Expect::MaybeFiltered(r) => at_most[r.index()] += n,
            Expect::Port => port += n,
        }
    }
    let mut wrong = Vec::new();
    for r in Discard::ALL {
        let (got, exact, filtered) = (drops.of(r), want[r.index()], at_most[r.index()]);
        if got < exact || got > exact + filtered {
            wrong.push(format!(
                "{r:?}: {got}, sent {exact} (+{filtered} filterable)"
            ));
        }
    }
    if drops.port != port {
        wrong.push(format!("port: {}, sent {port}", drops.port));
    }
    if !wrong.is_empty() {
        return Err(format!(
            "the exchange completed, but the drop counts are off: {}",
            wrong.join("; ")
        ));
    }
    let total: u64 = sent.iter().sum();
    Ok(format!(
        "{FLOOD_EXCHANGE} datagrams each way byte for byte, none lost, {}, in {:.1} s while \
         Linux sent {total} malformed frames of {} kinds; ringfab counted them by reason: {}",
        done.order(),
        done.elapsed.as_secs_f64(),
        frames.len(),
        drops_line(&drops)
    ))
}
