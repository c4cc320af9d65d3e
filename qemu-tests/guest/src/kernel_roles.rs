//! One side of a kernel UDP pair, as a process of its own: what the bench ([`crate::bench`])
//! runs for its `kernel-*` kinds, the kernel's counterpart of [`crate::roles`].
//!
//! `ringfab-qemu-guest bench-kernel ROLE OWN PEER CPU [BDF]` pins itself to `CPU`, binds a UDP
//! socket to `OWN`:[`PORT`] and plays `ROLE` against `PEER`:[`PORT`]:
//!
//! * `send`: `sendmmsg` of 32 datagrams of [`PAYLOAD`] bytes (64-byte frames) a call, until
//!   SIGTERM;
//! * `recv`: `recvmmsg` of up to 32 a call; counts datagrams from the first one plus the
//!   warm-up for the measuring time and prints `result <datagrams/s>`;
//! * `ping`: sends a datagram and waits for it back, prints `result <µs per round trip>`;
//! * `pong`: sends back every datagram it receives, until SIGTERM.
//!
//! With `BDF`, the process first takes that NIC's interface (on the kernel's driver, no
//! address) into a network namespace of its own and gives it `OWN`/24 there. Both NICs of a
//! pair are on one kernel, and with both addresses in one namespace the kernel would deliver a
//! datagram from one to the other through its loopback (the destination is a local address:
//! the `local` routing table is looked up first), never through the NICs. In two namespaces
//! each has one address and one route to the other, out of its NIC. When the process exits its
//! namespace goes, and the kernel moves the interface back to the first one, without address.

use std::net::{Ipv4Addr, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitCode};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::bench::{mark, pin, BURST, MEASURE, PINGS, PING_WARMUP, PLAIN_MESSAGE, STARTUP, WARMUP};
use crate::kernel_nic::{interface_of, no_ipv6, run, steer_irqs, wait_for};
use crate::roles::{stop_on_sigterm, LOST, MAX_LOST, STOP};
use crate::udp_exchange::set_int;

/// The first argument that makes the guest program play a kernel role.
pub(crate) const ROLE: &str = "bench-kernel";
/// Both sockets' UDP port, and testpmd txonly's destination port in `kernel-rx` (the same as
/// ringfab's plain-UDP endpoints').
pub(crate) const PORT: u16 = crate::roles::PORT;
/// Bytes of each datagram: a 64-byte frame, as ringfab's plain-UDP messages in the bench.
const PAYLOAD: usize = PLAIN_MESSAGE;
/// The receiving socket's buffer (`SO_RCVBUFFORCE`, socket(7)): a flood of small datagrams
/// should find room, each charged its whole receive buffer (2–4 KiB).
const RCVBUF: i32 = 4 << 20;
/// How long a blocked receive waits before the role looks at the time again.
const TICK: Duration = Duration::from_millis(100);

/// `bench-kernel ROLE OWN PEER CPU [BDF]`: prints `result …` and exits 0, or the error on
/// stderr and exits 1.
pub(crate) fn main(args: &[String]) -> ExitCode {
    match play(args) {
        Ok(result) => {
            println!("result {result}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{ROLE}: {e}");
            ExitCode::FAILURE
        }
    }
}

fn play(args: &[String]) -> Result<String, String> {
    let (role, own, peer, cpu, take) = match args {
        [r, o, p, c] => (r, o, p, c, None),
        [r, o, p, c, bdf] => (r, o, p, c, Some(bdf)),
        _ => {
            return Err(format!(
                "usage: {ROLE} send|recv|ping|pong OWN_IPV4 PEER_IPV4 CPU [BDF]"
            ))
        }
    };
    let own: Ipv4Addr = own.parse().map_err(|_| format!("bad address {own}"))?;
    let peer: Ipv4Addr = peer.parse().map_err(|_| format!("bad address {peer}"))?;
    let cpu: usize = cpu.parse().map_err(|_| format!("bad CPU {cpu}"))?;
    stop_on_sigterm()?;
    if let Some(bdf) = take {
        take_interface(bdf, own, cpu)?;
    }
    pin(cpu)?;
    let sock = UdpSocket::bind((own, PORT)).map_err(|e| format!("binding {own}:{PORT}: {e}"))?;
    match role.as_str() {
        "send" => send(&sock, peer),
        "recv" => recv(&sock),
        "ping" => ping(&sock, peer),
        "pong" => pong(&sock),
        other => Err(format!("no role {other}")),
    }
}

/// Takes the interface of `bdf` into a new network namespace of this process, gives it
/// `addr`/24, brings it up and waits for its carrier; its interrupts then go to `cpu`.
fn take_interface(bdf: &str, addr: Ipv4Addr, cpu: usize) -> Result<(), String> {
    // The interface of a namespace that is going away comes back after a moment.
    let name =
        wait_for(|| interface_of(bdf), "network interface").map_err(|e| format!("{bdf}: {e}"))?;
    let first = std::fs::File::open("/proc/self/ns/net")
        .map_err(|e| format!("opening /proc/self/ns/net: {e}"))?;
    // SAFETY: unshare(2) with CLONE_NEWNET only moves this (single-threaded) process into a
    // new network namespace; no memory is touched.
    if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
        return Err(format!(
            "unshare(CLONE_NEWNET): {}",
            std::io::Error::last_os_error()
        ));
    }
    // The namespace's own settings: IPv6 off, as in the first one (no router or neighbour
    // solicitations on the link).
    no_ipv6()?;
    // `ip` moves the interface from the namespace it runs in, which must be the first one
    // (where the interface is), into this process's (RTM_NEWLINK with IFLA_NET_NS_PID).
    let first_fd: RawFd = first.as_raw_fd();
    let mut mv = Command::new("ip");
    mv.args([
        "link",
        "set",
        &name,
        "netns",
        &std::process::id().to_string(),
    ]);
    // SAFETY: the hook runs in the forked child before exec and only makes setns(2), a
    // system call, on a descriptor the child inherited open.
    unsafe {
        mv.pre_exec(move || {
            if libc::setns(first_fd, libc::CLONE_NEWNET) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let status = mv
        .status()
        .map_err(|e| format!("running ip link set {name} netns: {e}"))?;
    if !status.success() {
        return Err(format!("ip link set {name} netns: {status}"));
    }
    drop(first);
    run("ip", &["addr", "add", &format!("{addr}/24"), "dev", &name])?;
    run("ip", &["link", "set", &name, "up"])?;
    wait_for(|| running(&name).then_some(()), "carrier")
        .map_err(|e| format!("{name} ({bdf}) in its namespace: {e}"))?;
    steer_irqs(bdf, cpu)?;
    Ok(())
}

/// Whether interface `name` of this process's namespace is up with its carrier
/// (`IFF_RUNNING` of `SIOCGIFFLAGS`, netdevice(7)): sysfs as mounted shows the first
/// namespace's interfaces only.
fn running(name: &str) -> bool {
    let Ok(sock) = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)) else {
        return false;
    };
    // SAFETY: all-zero is a valid `ifreq` (a name of NULs and a union of plain data).
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    if name.len() >= req.ifr_name.len() {
        return false;
    }
    for (d, s) in req.ifr_name.iter_mut().zip(name.as_bytes()) {
        *d = *s as libc::c_char;
    }
    // SAFETY: SIOCGIFFLAGS reads the NUL-terminated name in `req` and writes its flags field;
    // `req` lives on this stack frame for the call.
    let r = unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) };
    // SAFETY: after a successful SIOCGIFFLAGS the union holds the flags.
    let flags = i32::from(unsafe { req.ifr_ifru.ifru_flags });
    r == 0 && flags & libc::IFF_UP != 0 && flags & libc::IFF_RUNNING != 0
}

/// [`BURST`] buffers and the `mmsghdr`s that point at them, for `sendmmsg`/`recvmmsg`.
struct Batch {
    bufs: Vec<[u8; 2048]>,
    iovs: Vec<libc::iovec>,
    hdrs: Vec<libc::mmsghdr>,
}

impl Batch {
    /// `len` bytes of each buffer go out, or up to its whole size comes in.
    fn new(len: usize) -> Batch {
        let mut b = Batch {
            bufs: vec![[0u8; 2048]; BURST],
            iovs: Vec::with_capacity(BURST),
            hdrs: Vec::with_capacity(BURST),
        };
        for i in 0..BURST {
            let base = b.bufs[i].as_mut_ptr().cast();
            b.iovs.push(libc::iovec {
                iov_base: base,
                iov_len: len,
            });
        }
        for i in 0..BURST {
            // SAFETY: all-zero is a valid `mmsghdr` (null pointers, zero lengths).
            let mut h: libc::mmsghdr = unsafe { std::mem::zeroed() };
            h.msg_hdr.msg_iov = std::ptr::addr_of_mut!(b.iovs[i]);
            h.msg_hdr.msg_iovlen = 1;
            b.hdrs.push(h);
        }
        b
    }

    /// `recvmmsg` with `MSG_WAITFORONE`: the datagrams waiting, at least one, up to
    /// [`BURST`]; 0 when none came within the socket's receive timeout.
    fn recv(&mut self, sock: &UdpSocket) -> Result<usize, String> {
        // SAFETY: the headers point at this batch's iovecs and buffers, heap memory of its
        // vectors that lives, unmoved, as long as the batch; the kernel writes at most `iov_len` bytes to each.
        let n = unsafe {
            libc::recvmmsg(
                sock.as_raw_fd(),
                self.hdrs.as_mut_ptr(),
                BURST as u32,
                libc::MSG_WAITFORONE,
                std::ptr::null_mut(),
            )
        };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::EAGAIN | libc::EINTR) => Ok(0),
                _ => Err(format!("recvmmsg: {e}")),
            };
        }
        Ok(n as usize)
    }

    /// `sendmmsg` of the batch on a connected socket: how many the kernel took (0 when its
    /// interface's queue refused them, `ENOBUFS`).
    fn send(&mut self, sock: &UdpSocket) -> Result<usize, String> {
        // SAFETY: as in `recv`; the kernel reads `iov_len` bytes of each buffer.
        let n =
            unsafe { libc::sendmmsg(sock.as_raw_fd(), self.hdrs.as_mut_ptr(), BURST as u32, 0) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            return match e.raw_os_error() {
                // ECONNREFUSED: an ICMP port unreachable for an earlier datagram, sent before
                // the receiver bound its socket.
                Some(libc::ENOBUFS | libc::EAGAIN | libc::EINTR | libc::ECONNREFUSED) => Ok(0),
                _ => Err(format!("sendmmsg: {e}")),
            };
        }
        Ok(n as usize)
    }
}

/// Batches of [`BURST`] datagrams to `peer` until SIGTERM.
fn send(sock: &UdpSocket, peer: Ipv4Addr) -> Result<String, String> {
    sock.connect((peer, PORT))
        .map_err(|e| format!("connecting to {peer}:{PORT}: {e}"))?;
    let mut batch = Batch::new(PAYLOAD);
    let mut sent = 0u64;
    while !STOP.load(Ordering::Relaxed) {
        sent += batch.send(sock)? as u64;
    }
    Ok(format!("stopped after {sent}"))
}

/// Datagrams per second from the first one plus [`WARMUP`] for [`MEASURE`].
fn recv(sock: &UdpSocket) -> Result<String, String> {
    set_int(
        sock,
        libc::SOL_SOCKET,
        libc::SO_RCVBUFFORCE,
        RCVBUF,
        "SO_RCVBUFFORCE",
    )?;
    sock.set_read_timeout(Some(TICK))
        .map_err(|e| format!("SO_RCVTIMEO: {e}"))?;
    let mut batch = Batch::new(2048);
    let start = Instant::now();
    while batch.recv(sock)? == 0 {
        if start.elapsed() > STARTUP {
            return Err(format!("no datagram in {STARTUP:?}"));
        }
    }
    let warm = Instant::now();
    while warm.elapsed() < WARMUP {
        batch.recv(sock)?;
    }
    mark(true);
    let (mut got, t) = (0, Instant::now());
    while t.elapsed() < MEASURE {
        got += batch.recv(sock)?;
    }
    let secs = t.elapsed().as_secs_f64();
    mark(false);
    Ok(format!("{:.1}", got as f64 / secs))
}

/// One round trip of datagram `seq`: it out, then receives until it comes back (an answer to
/// an earlier, lost one is skipped) or `patience` passes.
fn trip(sock: &UdpSocket, seq: u64, patience: Duration) -> Result<bool, String> {
    let mut out = [0u8; PAYLOAD];
    out[..8].copy_from_slice(&seq.to_le_bytes());
    let start = Instant::now();
    match sock.send(&out) {
        Ok(_) => {}
        // The ICMP port unreachable of an earlier datagram, sent before the pong bound its
        // socket, reported by this send, which then sends nothing (udp(7), ECONNREFUSED:
        // "This might be caused by a previous packet sent over the socket").
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
            std::thread::sleep(patience);
            return Ok(false);
        }
        Err(e) => return Err(format!("send of datagram {seq}: {e}")),
    }
    let mut back = [0u8; 2048];
    loop {
        let left = patience.saturating_sub(start.elapsed());
        if left.is_zero() {
            return Ok(false);
        }
        sock.set_read_timeout(Some(left))
            .map_err(|e| format!("SO_RCVTIMEO: {e}"))?;
        match sock.recv(&mut back) {
            Ok(n) if n == PAYLOAD && back[..8] == out[..8] => return Ok(true),
            Ok(_) => {}
            // An ICMP port unreachable: the pong had not bound its socket yet when this
            // datagram (or an earlier one) came. Unanswered, like a lost one.
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                std::thread::sleep(left);
                return Ok(false);
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(e) => return Err(format!("recv of datagram {seq}: {e}")),
        }
    }
}

/// µs per round trip, measured as [`crate::roles`]' `ping` does: the mean over [`PINGS`]
/// answered ones after [`PING_WARMUP`]; a datagram every 100 ms until the peer answers (the
/// first waits for ARP); one not answered within [`LOST`] counts as lost, more than
/// [`MAX_LOST`] fail.
fn ping(sock: &UdpSocket, peer: Ipv4Addr) -> Result<String, String> {
    sock.connect((peer, PORT))
        .map_err(|e| format!("connecting to {peer}:{PORT}: {e}"))?;
    let mut seq = 0u64;
    let start = Instant::now();
    loop {
        seq += 1;
        if trip(sock, seq, TICK)? {
            break;
        }
        if start.elapsed() > STARTUP {
            return Err(format!("no answer in {STARTUP:?}"));
        }
    }
    let mut lost = 0;
    let mut answered = |seq: u64| -> Result<Option<Duration>, String> {
        let t = Instant::now();
        if trip(sock, seq, LOST)? {
            return Ok(Some(t.elapsed()));
        }
        lost += 1;
        if lost > MAX_LOST {
            return Err(format!("more than {MAX_LOST} datagrams lost"));
        }
        Ok(None)
    };
    let mut warm = 0;
    while warm < PING_WARMUP {
        seq += 1;
        warm += usize::from(answered(seq)?.is_some());
    }
    let (mut total, mut trips) = (Duration::ZERO, 0);
    mark(true);
    while trips < PINGS {
        seq += 1;
        if let Some(t) = answered(seq)? {
            total += t;
            trips += 1;
        }
    }
    mark(false);
    Ok(format!(
        "{:.2} lost {lost}",
        total.as_secs_f64() * 1e6 / PINGS as f64
    ))
}

/// Every datagram received goes back to where it came from, until SIGTERM.
fn pong(sock: &UdpSocket) -> Result<String, String> {
    sock.set_read_timeout(Some(TICK))
        .map_err(|e| format!("SO_RCVTIMEO: {e}"))?;
    let mut buf = [0u8; 2048];
    let mut answered = 0u64;
    while !STOP.load(Ordering::Relaxed) {
        match sock.recv_from(&mut buf) {
            Ok((n, from)) => {
                sock.send_to(&buf[..n], from)
                    .map_err(|e| format!("send_to {from}: {e}"))?;
                answered += 1;
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                        | std::io::ErrorKind::Interrupted
                ) => {}
            Err(e) => return Err(format!("recv_from: {e}")),
        }
    }
    Ok(format!("stopped after {answered}"))
}
