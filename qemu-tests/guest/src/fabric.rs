//! libfabric's own `fi_pingpong` through ringfab's provider, between two processes of the
//! guest, each driving one NIC of a pair through VFIO (`FI_RINGFAB_NICS=<PCI address>`): an
//! unmodified libfabric program on QEMU's devices. The runner ships Debian's libfabric, the
//! libraries it needs, the dynamic loader and the provider (in libfabric's own provider
//! directory, so no `FI_PROVIDER_PATH` is set); `fi_pingpong` exchanges the endpoints'
//! addresses over TCP on the loopback interface `/init` brings up.
//!
//! The tests' own handles on the pair are closed first (a VFIO group has one owner at a
//! time) and the NICs brought up again after, as for the examples (`examples.rs`).

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

/// `fi_pingpong` with the provider offering the one NIC `bdf`.
fn fi_pingpong(bdf: &str, port: &str, peer: Option<&str>) -> Command {
    let mut c = Command::new(FI_PINGPONG);
    c.env("FI_RINGFAB_NICS", bdf)
        .env_remove("FI_PROVIDER_PATH")
        .env_remove("FI_PROVIDER")
        .args(["-p", "ringfab", "-e", "dgram", "-I", ITERATIONS, "-c"]);
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
    let port = free_port()?;
    let deadline = Instant::now() + TIMEOUT;
    let server = fi_pingpong(a, &port, None)
        .spawn()
        .map_err(|e| format!("running {FI_PINGPONG}: {e}"))?;
    // The client connects to the server's control port first, before it opens a NIC: retried
    // while the server is still starting.
    let connect_until = Instant::now() + CONNECT_FOR;
    let client = loop {
        let child = fi_pingpong(b, &port, Some("127.0.0.1"))
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
    let server = wait_until(server, deadline).map_err(|e| format!("server: {e}"))?;
    let mut rows = Vec::new();
    for (who, out) in [("server", &server), ("client", &client)] {
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
    Ok(format!(
        "{model} {a} (server) <-> {b} (client), {ITERATIONS} checked round trips per size: {}",
        rows.join(", ")
    ))
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
