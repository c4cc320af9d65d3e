//! libfabric's own `fi_pingpong` through ringfab's provider, between two processes of the
//! guest, each driving one NIC of a pair through VFIO (`FI_RINGFAB_NICS=<PCI address>`): an
//! unmodified libfabric program on QEMU's devices. The runner ships Debian's libfabric, the
//! libraries it needs, the dynamic loader and the provider (in libfabric's own provider
//! directory, so no `FI_PROVIDER_PATH` is set); `fi_pingpong` exchanges the endpoints'
//! addresses over TCP on the loopback interface `/init` brings up.
//!
//! The tests' own handles on the pair are closed first (a VFIO group has one owner at a
//! time) and the NICs brought up again after, as for the examples (`examples.rs`).
//!
//! Against the kernel ([`against_udp_provider`]): with NIC B on Linux's driver
//! ([`crate::linux`]), `fi_pingpong -p udp` (libfabric's udp provider: kernel sockets on NIC B's
//! interface) and `fi_pingpong -p ringfab` over `FI_SOCKADDR_IN` on NIC A, each as server and
//! as client: plain UDP datagrams between libfabric's two providers.

use std::io::Read;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::guest::{Ctx, Outcome};

/// `fi_pingpong` in the guest.
const FI_PINGPONG: &str = "/usr/bin/fi_pingpong";
/// Iterations per message size: a handful of round trips per size keeps the run short under
/// TCG; `-c` checks every byte of each.
const ITERATIONS: &str = "20";
/// Message sizes fi_pingpong runs on a DGRAM endpoint by default (64, 256, 1k): one result
/// row each.
const SIZES: usize = 3;
/// How long both processes may take together (library loading, NIC bring-up, the run).
const TIMEOUT: Duration = Duration::from_secs(120);
/// How long the client retries its control connection while the server starts.
const CONNECT_FOR: Duration = Duration::from_secs(60);

/// `fi_pingpong -p ringfab -e dgram -c` between the two igb.
pub(crate) fn igb(ctx: &mut Ctx) -> Outcome {
    ctx.release();
    let [a, b] = ctx.bdfs.clone();
    let out = pingpong("igb", &a, &b);
    let reopened = crate::nic::open(ctx);
    let detail = out?;
    reopened.map_err(|e| format!("fi_pingpong passed, but reopening the NICs failed: {e}"))?;
    Ok(detail)
}

/// `fi_pingpong -p ringfab -e dgram -c` between the two e1000e.
pub(crate) fn e1000e(ctx: &mut Ctx) -> Outcome {
    let [a, b] = ctx
        .e1000e_bdfs
        .clone()
        .ok_or("no ringfab.e1000e= on the kernel command line")?;
    ctx.e1000e = None;
    let out = pingpong("e1000e", &a, &b);
    let reopened = crate::e1000e::bring_up(ctx);
    let detail = out?;
    reopened.map_err(|e| format!("fi_pingpong passed, but reopening the NICs failed: {e}"))?;
    Ok(detail)
}

/// `fi_pingpong -p ringfab -e dgram -c` between the two virtio-net.
pub(crate) fn virtio(ctx: &mut Ctx) -> Outcome {
    let [a, b] = ctx
        .virtio_bdfs
        .clone()
        .ok_or("no ringfab.virtio= on the kernel command line")?;
    ctx.virtio = None;
    let out = pingpong("virtio-net", &a, &b);
    let reopened = crate::virtio::bring_up(ctx);
    let detail = out?;
    reopened.map_err(|e| format!("fi_pingpong passed, but reopening the NICs failed: {e}"))?;
    Ok(detail)
}

/// One side of a `fi_pingpong` run.
#[derive(Clone, Copy)]
pub(crate) enum Side<'a> {
    /// ringfab's provider offering the one NIC `bdf`, with `FI_RINGFAB_IPV4`'s
    /// `<addr>/<prefix>` for it if `ipv4` (then its first info is `FI_SOCKADDR_IN`).
    Ringfab { bdf: &'a str, ipv4: Option<&'a str> },
    /// libfabric's udp provider (kernel sockets) on the interface `ifname`, whose address is
    /// `addr`: `-d` (it lists one domain per interface) and `FI_UDP_IFACE`. With `-d` alone,
    /// libfabric 1.17's udp provider named another interface's address as its endpoint's when
    /// the guest had several (192.0.2.2, of igb's pair, for `-d` of virtio-net's interface),
    /// and ringfab's send to it, off ringfab's subnet, failed with `FI_EHOSTUNREACH`.
    Udp { ifname: &'a str, addr: &'a str },
}

impl Side<'_> {
    fn name(&self) -> String {
        match self {
            Side::Ringfab { bdf, .. } => format!("ringfab on {bdf}"),
            Side::Udp { ifname, addr } => format!("udp on {ifname} ({addr})"),
        }
    }
}

/// `fi_pingpong` on `side`, the server (`peer` `None`) or the client of `peer`.
fn fi_pingpong(side: Side<'_>, port: &str, peer: Option<&str>) -> Command {
    let mut c = Command::new(FI_PINGPONG);
    c.env_remove("FI_PROVIDER_PATH").env_remove("FI_PROVIDER");
    match side {
        Side::Ringfab { bdf, ipv4 } => {
            c.env_remove("FI_UDP_IFACE");
            // Info: the NIC's and the IPv4 host's counts at the domain's close, for a
            // failure's message.
            c.env("FI_RINGFAB_NICS", bdf)
                .env("FI_LOG_LEVEL", "info")
                .env("FI_LOG_PROV", "ringfab")
                .args(["-p", "ringfab"]);
            match ipv4 {
                Some(a) => c.env("FI_RINGFAB_IPV4", format!("{bdf}={a}")),
                None => c.env_remove("FI_RINGFAB_IPV4"),
            };
        }
        Side::Udp { ifname, .. } => {
            c.env_remove("FI_RINGFAB_NICS")
                .env("FI_UDP_IFACE", ifname)
                .args(["-p", "udp", "-d", ifname]);
        }
    }
    c.args(["-e", "dgram", "-I", ITERATIONS, "-c"]);
    match peer {
        None => c.args(["-B", port]),
        Some(server) => c.args(["-P", port, server]),
    };
    c.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// Waits for `child` until `deadline`, then kills it; its output either way.
fn wait_until(mut child: Child, deadline: Instant) -> Result<Output, String> {
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                let mut err = String::new();
                if let Some(mut e) = child.stderr.take() {
                    let _ = e.read_to_string(&mut err);
                }
                return Err(format!(
                    "killed after {} s: {}",
                    TIMEOUT.as_secs(),
                    err.trim()
                ));
            }
            Err(e) => return Err(format!("waiting for fi_pingpong: {e}")),
        }
    }
    child
        .wait_with_output()
        .map_err(|e| format!("reading fi_pingpong's output: {e}"))
}

/// A TCP port nobody listens on now, for fi_pingpong's control connection.
fn free_port() -> Result<String, String> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")
        .map_err(|e| format!("binding a loopback port (is lo up?): {e}"))?;
    let port = l.local_addr().map_err(|e| e.to_string())?.port();
    Ok(port.to_string())
}

/// From fi_pingpong's result rows (`bytes #sent #ack total time MB/sec usec/xfer
/// Mxfers/sec`), each size that had every message acknowledged, with its latency.
pub(crate) fn acked_rows(stdout: &str, iterations: &str) -> Vec<String> {
    let ack = format!("={iterations}");
    stdout
        .lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            let [bytes, sent, acked, _total, _time, _mbs, usec, _mx] = w.as_slice() else {
                return None;
            };
            let _: f64 = usec.parse().ok()?;
            (*sent == iterations && *acked == ack).then(|| format!("{bytes} B {usec} µs/xfer"))
        })
        .collect()
}

/// Runs a server on NIC `a` and a client on NIC `b` and checks both.
fn pingpong(model: &str, a: &str, b: &str) -> Outcome {
    let server = Side::Ringfab { bdf: a, ipv4: None };
    let client = Side::Ringfab { bdf: b, ipv4: None };
    let rows = run(server, client)?;
    Ok(format!(
        "{model} {a} (server) <-> {b} (client), {ITERATIONS} checked round trips per size: {}",
        rows.join(", ")
    ))
}

/// `fi_pingpong -p ringfab` over `FI_SOCKADDR_IN` on NIC `bdf` (address `ipv4`,
/// `<addr>/<prefix>`) against `fi_pingpong -p udp` on the kernel's interface `ifname`, on one
/// link: ringfab as server, then as client (docs/libfabric.md, "Against libfabric's udp
/// provider").
pub(crate) fn against_udp_provider(bdf: &str, ipv4: &str, ifname: &str, addr: &str) -> Outcome {
    let ringfab = Side::Ringfab {
        bdf,
        ipv4: Some(ipv4),
    };
    let udp = Side::Udp { ifname, addr };
    let served = run(ringfab, udp).map_err(|e| format!("ringfab serving udp: {e}"))?;
    let client = run(udp, ringfab).map_err(|e| format!("udp serving ringfab: {e}"))?;
    Ok(format!(
        "{ITERATIONS} checked round trips per size, ringfab ({bdf}, {ipv4}) server ↔ udp \
         ({ifname}) client: {}; udp server ↔ ringfab client: {}",
        served.join(", "),
        client.join(", ")
    ))
}

/// Runs `server` and a client of it on `client`, checks both: each size's result row with
/// every message acknowledged (the client's rows).
fn run(server: Side<'_>, client: Side<'_>) -> Result<Vec<String>, String> {
    let port = free_port()?;
    let deadline = Instant::now() + TIMEOUT;
    let server_side = server;
    let server = fi_pingpong(server, &port, None)
        .spawn()
        .map_err(|e| format!("running {FI_PINGPONG}: {e}"))?;
    // The client connects to the server's control port first, before it opens a NIC: retried
    // while the server is still starting.
    let connect_until = Instant::now() + CONNECT_FOR;
    let client_out = loop {
        let child = fi_pingpong(client, &port, Some("127.0.0.1"))
            .spawn()
            .map_err(|e| format!("running {FI_PINGPONG}: {e}"))?;
        let out = wait_until(child, deadline)?;
        let err = String::from_utf8_lossy(&out.stderr);
        if out.status.success()
            || !err.contains("failed to connect")
            || Instant::now() > connect_until
        {
            break out;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let server = wait_until(server, deadline).map_err(|e| {
        format!(
            "server: {e}; the client exited with {}: {} {}",
            client_out.status,
            String::from_utf8_lossy(&client_out.stdout).trim(),
            String::from_utf8_lossy(&client_out.stderr).trim()
        )
    })?;
    let mut rows = Vec::new();
    let who = [
        format!("server ({})", server_side.name()),
        format!("client ({})", client.name()),
    ];
    for (who, out) in who.iter().zip([&server, &client_out]) {
        let stdout = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() {
            return Err(format!(
                "{who} exited with {}: {} {}",
                out.status,
                stdout.trim(),
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        rows = acked_rows(&stdout, ITERATIONS);
        if rows.len() != SIZES {
            return Err(format!(
                "{who}: {} of {SIZES} sizes with every message acknowledged: {stdout}",
                rows.len()
            ));
        }
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_rows_with_every_message_acknowledged_count() {
        let out =
            "bytes   #sent   #ack     total       time     MB/sec    usec/xfer   Mxfers/sec\n\
                   64      20      =20      2.5k        0.02s      0.10     660.00       0.00\n\
                   256     20      =19      10k         0.02s      0.41     620.10       0.00\n\
                   1k      20      =20      40k         0.03s      1.50     680.00       0.00\n";
        assert_eq!(
            acked_rows(out, "20"),
            ["64 B 660.00 µs/xfer", "1k B 680.00 µs/xfer"]
        );
    }
}
