//! The real drivers on either side of a hub that crosses process boundaries
//! (`ringfab_emu::Wire::join`): each NIC on a wire of its own, the two wires members of one hub
//! — as two processes would be; then two processes indeed.
//!
//! No test here calls the wire to move frames: a member's receiver thread delivers them, so a
//! side that only polls its receive queue gets them, as a program polling its CQ would.

mod common;
use common::{e1000e, igb, virtio_net, Make};

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ringfab_emu::{EmuPlatform, Kind, Wire};
use ringfab_hal::{MacAddr, Nic, Queue, Report, RxConfig, TxConfig};
use ringfab_nic_suite::{drain_rx, drain_tx, frame, post, push_frame, BUF, MAC_A, MAC_B};
use ringfab_nics::AnyNic;

type Any = AnyNic<EmuPlatform>;

const WAIT: Duration = Duration::from_secs(20);
const RING: usize = 64;
/// Frames each way: fewer than the receive buffers posted, so none is lost for want of one.
const FRAMES: usize = 40;

/// A hub directory of a test's own, removed when the test ends.
struct HubDir(PathBuf);

impl HubDir {
    fn new(test: &str) -> HubDir {
        let dir = std::env::temp_dir().join(format!("ringfab-hub-{}-{test}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        HubDir(dir)
    }
}

impl Drop for HubDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A NIC of `make` with MAC `mac`, alone on a wire that joined the hub in `dir`, opened
/// through `AnyNic` (the driver picked by PCI ID).
fn member<K: Kind>(make: Make<K>, mac: MacAddr, dir: &Path) -> (Wire, Any) {
    let wire = Wire::join(dir).unwrap();
    let dev = make(mac);
    dev.connect(&wire);
    (wire, AnyNic::open(dev.platform()).unwrap())
}

/// The frames `src` sends `dst` in a test: lengths from 60 bytes to a full buffer.
fn frames(dst: MacAddr, src: MacAddr, seed: u8) -> Vec<Vec<u8>> {
    (0..FRAMES)
        .map(|i| {
            frame(
                dst,
                src,
                46 + i * (BUF - 14 - 46) / (FRAMES - 1),
                seed.wrapping_add(i as u8),
            )
        })
        .collect()
}

/// Sends `frames` from `nic` (one doorbell) and waits for every transmit completion.
fn send(nic: &Any, frames: &[Vec<u8>]) {
    let mut tx = nic.open_tx::<RING>(0, TxConfig::default()).unwrap();
    let mem = nic.alloc_dma(BUF * RING).unwrap();
    for (i, f) in frames.iter().enumerate() {
        push_frame(&mut tx, &mem, i, f, i as u64, Report::Always);
    }
    tx.doorbell();
    let mut done = Vec::new();
    let deadline = Instant::now() + WAIT;
    while done.len() < frames.len() && Instant::now() < deadline {
        done.extend(drain_tx(&mut tx));
    }
    assert_eq!(done.len(), frames.len());
    assert!(done.iter().all(|c| c.status.is_ok()));
}

/// A receive queue with buffers posted, polled until `expect` arrived; checks them byte for
/// byte and in order.
struct Receiver<'n> {
    rx: ringfab_nics::AnyRx<'n, EmuPlatform, RING>,
    mem: <EmuPlatform as ringfab_hal::Platform>::Dma,
}

impl<'n> Receiver<'n> {
    fn post(nic: &'n Any) -> Receiver<'n> {
        let mut rx = nic.open_rx::<RING>(0, RxConfig::new(BUF as u32)).unwrap();
        let mem = nic.alloc_dma(BUF * RING).unwrap();
        post(&mut rx, &mem, RING - 8);
        Receiver { rx, mem }
    }

    fn expect(&mut self, expect: &[Vec<u8>]) {
        let mut got = Vec::new();
        let deadline = Instant::now() + WAIT;
        while got.len() < expect.len() && Instant::now() < deadline {
            got.extend(drain_rx(&mut self.rx, &self.mem));
            std::thread::yield_now();
        }
        assert_eq!(got.len(), expect.len(), "frames arrived");
        got.sort_by_key(|(c, _)| c.token.0);
        for ((c, bytes), f) in got.iter().zip(expect) {
            assert_eq!(c.status, Ok(()));
            assert_eq!(c.len as usize, f.len());
            assert_eq!(bytes, f, "byte for byte");
        }
    }
}

/// A NIC of `make_a` and one of `make_b`, each on a wire of its own joined to one hub, send
/// each other frames through their drivers, both ways.
fn frames_cross_a_hub<KA: Kind, KB: Kind>(test: &str, make_a: Make<KA>, make_b: Make<KB>) {
    let dir = HubDir::new(test);
    let (wire_a, a) = member(make_a, MAC_A, &dir.0);
    let (wire_b, b) = member(make_b, MAC_B, &dir.0);
    assert!(wire_a.wait_for_hub_peers(1, WAIT) && wire_b.wait_for_hub_peers(1, WAIT));
    let (mut rx_a, mut rx_b) = (Receiver::post(&a), Receiver::post(&b));
    let there = frames(MAC_B, MAC_A, 1);
    send(&a, &there);
    rx_b.expect(&there);
    let back = frames(MAC_A, MAC_B, 101);
    send(&b, &back);
    rx_a.expect(&back);
    let (sa, sb) = (wire_a.stats(), wire_b.stats());
    assert_eq!((sa.hub_sent, sa.hub_received, sa.hub_dropped), (40, 40, 0));
    assert_eq!((sb.hub_sent, sb.hub_received, sb.hub_dropped), (40, 40, 0));
}

#[test]
fn igb_and_igb_exchange_frames_across_a_hub() {
    frames_cross_a_hub("igb-igb", igb, igb);
}

#[test]
fn e1000e_and_e1000e_exchange_frames_across_a_hub() {
    frames_cross_a_hub("e1000e-e1000e", e1000e, e1000e);
}

#[test]
fn virtio_net_and_virtio_net_exchange_frames_across_a_hub() {
    frames_cross_a_hub("virtio-virtio", virtio_net, virtio_net);
}

#[test]
fn different_nics_exchange_frames_across_a_hub() {
    frames_cross_a_hub("igb-virtio", igb, virtio_net);
    frames_cross_a_hub("e1000e-igb", e1000e, igb);
    frames_cross_a_hub("virtio-e1000e", virtio_net, e1000e);
}

/// The hub directory [`other_process_side`] joins, when it is the other process of
/// [`two_processes_exchange_frames_through_their_drivers`].
const CHILD_HUB: &str = "RINGFAB_NICS_HUB_CHILD";

#[test]
fn two_processes_exchange_frames_through_their_drivers() {
    let dir = HubDir::new("processes");
    // This process: a virtio-net device; the other: an 82576 (see `other_process_side`).
    let (wire, nic) = member(virtio_net, MAC_B, &dir.0);
    let mut rx = Receiver::post(&nic);
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "other_process_side", "--nocapture"])
        .env(CHILD_HUB, &dir.0)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    rx.expect(&frames(MAC_B, MAC_A, 1));
    assert!(wire.wait_for_hub_peers(1, WAIT));
    send(&nic, &frames(MAC_A, MAC_B, 101));
    let deadline = Instant::now() + WAIT;
    while child.try_wait().unwrap().is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    if child.try_wait().unwrap().is_none() {
        // Started above: ours to end.
        let _ = child.kill();
    }
    let out = child.wait_with_output().unwrap();
    let log =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the other process failed:\n{log}");
    assert!(
        log.contains("1 passed"),
        "the other process ran nothing:\n{log}"
    );
    let s = wire.stats();
    assert_eq!((s.hub_received, s.hub_sent, s.hub_dropped), (40, 40, 0));
}

/// The other process of [`two_processes_exchange_frames_through_their_drivers`]: an 82576
/// through igb, sending first, then receiving. Does nothing when run as a test of its own.
#[test]
fn other_process_side() {
    let Some(dir) = std::env::var_os(CHILD_HUB) else {
        return;
    };
    let (wire, nic) = member(igb, MAC_A, Path::new(&dir));
    let mut rx = Receiver::post(&nic);
    assert!(wire.wait_for_hub_peers(1, WAIT), "the parent is there");
    send(&nic, &frames(MAC_B, MAC_A, 1));
    rx.expect(&frames(MAC_A, MAC_B, 101));
}
