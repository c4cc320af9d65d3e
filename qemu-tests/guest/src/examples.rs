//! The workspace's examples, run as programs in the guest on the two NICs.

use std::process::Command;

use crate::guest::{Ctx, Outcome};
use crate::nic;

/// Iterations per pingpong measurement: enough for a stable figure under TCG, few enough to
/// keep the run short.
const PINGPONG_ITERATIONS: &str = "5000";

/// One result row of `pingpong`: `mode bytes window iters time MB/sec usec/xfer Mxfers/sec`,
/// condensed to the figures that matter.
pub(crate) fn pingpong_row(line: &str) -> Option<String> {
    let w: Vec<&str> = line.split_whitespace().collect();
    let [mode, bytes, window, _iters, _time, mbs, usec, mxfers] = w.as_slice() else {
        return None;
    };
    let _: f64 = usec.parse().ok()?;
    Some(match *mode {
        "pingpong" => format!("ping-pong {bytes} B: {usec} µs/xfer"),
        _ => format!("stream {bytes} B ×{window}: {mxfers} Mxfers/s ({mbs} MB/s)"),
    })
}

/// `pingpong --vfio A B` (examples/pingpong.rs): both endpoints in one process on the two NICs,
/// ping-pong and streaming at 64 B and 1 KiB. The tests' own handles on the NICs are closed
/// first (a VFIO group has one owner) and reopened after, which also proves a NIC comes back
/// after another program drove it.
pub(crate) fn pingpong(ctx: &mut Ctx) -> Outcome {
    ctx.release();
    let [a, b] = ctx.bdfs.clone();
    let out = run_pingpong(&a, &b);
    let reopened = nic::open(ctx);
    let detail = out?;
    reopened.map_err(|e| format!("pingpong passed, but reopening the NICs failed: {e}"))?;
    Ok(detail)
}

/// `pingpong --vfio A B` on the two virtio-net NICs: the example picks the virtio-net driver
/// by the PCI ID (1af4:1041). The test's handles are released first and reopened after.
pub(crate) fn virtio_pingpong(ctx: &mut Ctx) -> Outcome {
    let [a, b] = ctx
        .virtio_bdfs
        .clone()
        .ok_or("no ringfab.virtio= on the kernel command line")?;
    ctx.virtio = None;
    let out = run_pingpong(&a, &b);
    let reopened = crate::virtio::bring_up(ctx);
    let detail = out?;
    reopened.map_err(|e| format!("pingpong passed, but reopening the NICs failed: {e}"))?;
    Ok(detail)
}

/// `pingpong --vfio A B` on the two 82574: the example picks the e1000e driver by the PCI ID
/// (8086:10d3). The test's handles are released first and the NICs brought up again after.
pub(crate) fn e1000e_pingpong(ctx: &mut Ctx) -> Outcome {
    let [a, b] = ctx
        .e1000e_bdfs
        .clone()
        .ok_or("no ringfab.e1000e= on the kernel command line")?;
    ctx.e1000e = None;
    let out = run_pingpong(&a, &b);
    let reopened = crate::e1000e::bring_up(ctx);
    let detail = out?;
    reopened.map_err(|e| format!("pingpong passed, but reopening the NICs failed: {e}"))?;
    Ok(detail)
}

/// Runs `/pingpong --vfio a b` and condenses its four result rows.
fn run_pingpong(a: &str, b: &str) -> Outcome {
    let out = Command::new("/pingpong")
        .args(["--vfio", a, b, "-I", PINGPONG_ITERATIONS])
        .output()
        .map_err(|e| format!("running /pingpong: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!(
            "pingpong exited with {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let driver = stdout
        .lines()
        .find_map(|l| l.split_once("through VFIO (")?.1.strip_suffix(')'))
        .unwrap_or("?")
        .to_owned();
    let rows: Vec<String> = stdout.lines().filter_map(pingpong_row).collect();
    if rows.len() != 4 {
        return Err(format!(
            "expected 4 result rows from pingpong, got: {stdout}"
        ));
    }
    Ok(format!(
        "{driver}, {} iterations each: {}",
        PINGPONG_ITERATIONS,
        rows.join("; ")
    ))
}

/// `info --vfio A B` (examples/info.rs): the fi_info-style description of both NICs as the
/// driver reports them through VFIO — each block must name the NIC, its MAC, the igb driver and
/// an up link. The tests' handles are released first and the NICs reopened after, as for
/// `pingpong`.
pub(crate) fn info(ctx: &mut Ctx) -> Outcome {
    ctx.release();
    let [a, b] = ctx.bdfs.clone();
    let out = Command::new("/info")
        .args(["--vfio", &a, &b])
        .output()
        .map_err(|e| format!("running /info: {e}"));
    let reopened = nic::open(ctx);
    let out = out?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!(
            "info exited with {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let blocks: Vec<&str> = stdout.split("provider: ringfab").skip(1).collect();
    let macs = ctx.macs.clone().unwrap_or_default();
    for (i, bdf) in [&a, &b].into_iter().enumerate() {
        let block = blocks
            .iter()
            .find(|blk| blk.contains(bdf.as_str()))
            .ok_or_else(|| format!("no description of {bdf} in: {stdout}"))?;
        let want = ["igb driver", "link: up, 1000 Mb/s", "interrupt vectors: 10"];
        if let Some(missing) = want.iter().find(|w| !block.contains(*w)) {
            return Err(format!("{bdf}: no '{missing}' in: {block}"));
        }
        if !macs[i].is_empty() && !block.contains(&macs[i]) {
            return Err(format!("{bdf}: MAC {} not in: {block}", macs[i]));
        }
    }
    reopened.map_err(|e| format!("info passed, but reopening the NICs failed: {e}"))?;
    let size = stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix("max_msg_size: "))
        .unwrap_or("?");
    Ok(format!(
        "both NICs described (igb driver, MAC as set, link up at 1000 Mb/s, 10 MSI-X vectors, \
         max_msg_size {size})"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pingpong_rows_condense_and_headers_do_not() {
        assert_eq!(
            pingpong_row(
                "pingpong      64        1    5000     0.512s      1.25      51.20       0.020"
            )
            .as_deref(),
            Some("ping-pong 64 B: 51.20 µs/xfer")
        );
        assert_eq!(
            pingpong_row(
                "stream      1024       32    5000     0.300s     17.07      60.00       0.017"
            )
            .as_deref(),
            Some("stream 1024 B ×32: 0.017 Mxfers/s (17.07 MB/s)")
        );
        assert_eq!(
            pingpong_row(
                "mode       bytes   window   iters       time    MB/sec  usec/xfer  Mxfers/sec"
            ),
            None
        );
        assert_eq!(
            pingpong_row("# ringfab pingpong: a <-> b through VFIO (igb driver)"),
            None
        );
    }
}
