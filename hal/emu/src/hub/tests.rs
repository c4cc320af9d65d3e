//! The hub at the wire's level: recording ports stand in for devices, so that these tests
//! prove what crosses, what is lost and what is cleaned up, whatever the models do. The real
//! drivers over a hub are tested in `drivers/any/tests/hub.rs`.

use std::io::Write;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use super::members::valid_name;
use crate::wire::WirePort;
use crate::{CorruptMode, Wire, WireFault};

/// A port that records what reaches it.
#[derive(Default)]
struct Recorder(Mutex<Vec<(Vec<u8>, bool)>>);

impl WirePort for Recorder {
    fn receive(&self, frame: &[u8], crc_ok: bool) {
        self.0.lock().unwrap().push((frame.to_vec(), crc_ok));
    }
    fn step(&self) -> bool {
        false
    }
}

/// A wire on a hub with one recording port attached.
struct Member {
    wire: Wire,
    port: Arc<Recorder>,
    id: usize,
}

impl Member {
    fn join(dir: &Path) -> Member {
        let wire = Wire::join(dir).unwrap();
        let port = Arc::new(Recorder::default());
        let id = wire.attach(Arc::downgrade(&port) as Weak<dyn WirePort>);
        Member { wire, port, id }
    }

    fn send(&self, frames: &[Vec<u8>]) {
        self.wire.send(self.id, frames.to_vec());
    }

    fn got(&self) -> Vec<(Vec<u8>, bool)> {
        self.port.0.lock().unwrap().clone()
    }

    /// Waits (bounded) until `n` frames have reached the port; returns them.
    fn wait_for(&self, n: usize) -> Vec<(Vec<u8>, bool)> {
        assert!(
            eventually(|| self.got().len() >= n),
            "{} of {n} frames arrived",
            self.got().len()
        );
        self.got()
    }
}

/// A fresh hub directory of a test's own, removed when the test ends (declared before the
/// members, it is dropped after them).
struct HubDir(PathBuf);

impl std::ops::Deref for HubDir {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for HubDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn hub(test: &str) -> HubDir {
    let dir = std::env::temp_dir().join(format!("ringfab-hub-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    HubDir(dir)
}

/// Whether `f` holds within ten seconds (generous: the machine may be busy).
fn eventually(mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    f()
}

/// Frame `i` of a test, `len` bytes, distinct from every other.
fn frame(i: u32, len: usize) -> Vec<u8> {
    let mut f: Vec<u8> = (0..len).map(|b| (b as u32 * 7 + i) as u8).collect();
    f[..4.min(len)].copy_from_slice(&i.to_be_bytes()[..4.min(len)]);
    f
}

const WAIT: Duration = Duration::from_secs(10);

#[test]
fn two_members_exchange_frames_both_ways_byte_for_byte() {
    let dir = hub("both-ways");
    let (a, b) = (Member::join(&dir), Member::join(&dir));
    assert!(a.wire.wait_for_hub_peers(1, WAIT) && b.wire.wait_for_hub_peers(1, WAIT));
    // From the shortest to the longest a hub carries, a jumbo frame between.
    let sizes = [14, 60, 1514, 9018, 65535];
    let there: Vec<Vec<u8>> = sizes.iter().zip(0..).map(|(&n, i)| frame(i, n)).collect();
    a.send(&there);
    let got = b.wait_for(there.len());
    assert_eq!(
        got,
        there.iter().map(|f| (f.clone(), true)).collect::<Vec<_>>()
    );
    let back: Vec<Vec<u8>> = sizes.iter().zip(100..).map(|(&n, i)| frame(i, n)).collect();
    b.send(&back);
    let got = a.wait_for(back.len());
    assert_eq!(
        got,
        back.iter().map(|f| (f.clone(), true)).collect::<Vec<_>>()
    );
    let (sa, sb) = (a.wire.stats(), b.wire.stats());
    assert_eq!(
        (sa.sent, sa.hub_sent, sa.hub_received, sa.hub_dropped),
        (5, 5, 5, 0)
    );
    assert_eq!(
        (sb.sent, sb.hub_sent, sb.hub_received, sb.hub_dropped),
        (5, 5, 5, 0)
    );
    assert_eq!(sb.deliveries, 5, "one per frame that reached a port here");
}

#[test]
fn local_ports_and_other_members_each_get_a_frame_once() {
    let dir = hub("fan-out");
    let (a, b, c) = (Member::join(&dir), Member::join(&dir), Member::join(&dir));
    // A second port on a's wire: a local neighbour of the sender.
    let neighbour = Arc::new(Recorder::default());
    a.wire
        .attach(Arc::downgrade(&neighbour) as Weak<dyn WirePort>);
    assert!([&a, &b, &c]
        .iter()
        .all(|m| m.wire.wait_for_hub_peers(2, WAIT)));
    a.send(&[frame(1, 60)]);
    assert_eq!(b.wait_for(1), [(frame(1, 60), true)]);
    assert_eq!(c.wait_for(1), [(frame(1, 60), true)]);
    assert_eq!(neighbour.0.lock().unwrap().len(), 1);
    assert!(a.got().is_empty(), "never back to the sender");
    // Nothing relayed: a moment later still one each.
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!((b.got().len(), c.got().len()), (1, 1));
    assert_eq!(a.wire.stats().hub_sent, 2);
}

#[test]
fn a_member_that_leaves_is_forgotten_and_one_that_joins_gets_what_follows() {
    let dir = hub("leave-join");
    let (a, b) = (Member::join(&dir), Member::join(&dir));
    assert!(a.wire.wait_for_hub_peers(1, WAIT));
    let b_socket = b.wire.hub_socket().unwrap();
    assert!(b_socket.exists());
    b.wire.leave();
    assert!(!b_socket.exists(), "leaving removes the member's socket");
    assert_eq!(b.wire.hub_socket(), None);
    assert!(eventually(|| a.wire.hub_peers() == 0), "a heard bye");
    a.send(&[frame(1, 60)]);
    assert_eq!(a.wire.stats().hub_sent, 0);
    // b's wire goes on as a wire of its own; its port got nothing after it left.
    b.send(&[frame(2, 60)]);
    assert!(b.got().is_empty() && a.got().is_empty());

    let c = Member::join(&dir);
    assert!(a.wire.wait_for_hub_peers(1, WAIT) && c.wire.wait_for_hub_peers(1, WAIT));
    a.send(&[frame(3, 60)]);
    c.send(&[frame(4, 60)]);
    assert_eq!(c.wait_for(1), [(frame(3, 60), true)]);
    assert_eq!(a.wait_for(1), [(frame(4, 60), true)]);
}

#[test]
fn dropping_the_last_clone_of_a_wire_leaves_the_hub() {
    let dir = hub("drop");
    let a = Member::join(&dir);
    let b = Member::join(&dir);
    assert!(a.wire.wait_for_hub_peers(1, WAIT));
    let socket = b.wire.hub_socket().unwrap();
    let clone = b.wire.clone();
    drop(b);
    assert!(
        socket.exists(),
        "a clone keeps the wire, and its membership"
    );
    drop(clone);
    assert!(!socket.exists());
    assert!(eventually(|| a.wire.hub_peers() == 0));
}

#[test]
fn a_full_member_loses_frames_counted_and_never_stalls_the_sender() {
    let dir = hub("full");
    let a = Member::join(&dir);
    // A member whose process has stopped: bound, never reading.
    let stuck = UnixDatagram::bind(dir.join("mstuck-0-0-0.sock")).unwrap();
    assert!(a.wire.wait_for_hub_peers(1, WAIT));
    let frames: Vec<Vec<u8>> = (0..200).map(|i| frame(i, 1514)).collect();
    let start = Instant::now();
    a.send(&frames);
    let took = start.elapsed();
    let s = a.wire.stats();
    assert_eq!(s.hub_sent + s.hub_dropped, 200);
    assert!(s.hub_sent >= 1 && s.hub_dropped >= 150, "{s:?}");
    // One wait for the full socket, then no more: far less than a wait per frame.
    assert!(took < Duration::from_secs(5), "sending took {took:?}");
    assert_eq!(a.wire.hub_peers(), 1, "a full member is still a member");

    // Once it reads again it gets frames again, without a wait first.
    stuck.set_nonblocking(true).unwrap();
    let mut buf = vec![0u8; 2048];
    let mut drained = 0;
    while stuck.recv(&mut buf).is_ok() {
        drained += 1;
    }
    assert_eq!(drained, s.hub_sent);
    a.send(&[frame(500, 60)]);
    assert_eq!(a.wire.stats().hub_sent, s.hub_sent + 1);
    let n = stuck.recv(&mut buf).unwrap();
    assert_eq!(&buf[super::msg::HEADER..n], &frame(500, 60)[..]);
}

#[test]
fn members_flooding_each_other_at_once_lose_nothing() {
    // Each sender waits for the other's full socket while the other's receiver must still
    // drain its own: a receiver that waited for its wire's delivery lock (held by its sender)
    // would make both wait out the send timeout and drop.
    let dir = hub("flood");
    let (a, b) = (Member::join(&dir), Member::join(&dir));
    assert!(a.wire.wait_for_hub_peers(1, WAIT) && b.wire.wait_for_hub_peers(1, WAIT));
    const N: u32 = 2000;
    let start = Instant::now();
    std::thread::scope(|t| {
        for (m, base) in [(&a, 0), (&b, N)] {
            t.spawn(move || {
                for i in 0..N {
                    m.send(&[frame(base + i, 256)]);
                }
            });
        }
    });
    let (ga, gb) = (a.wait_for(N as usize), b.wait_for(N as usize));
    assert_eq!(
        gb,
        (0..N).map(|i| (frame(i, 256), true)).collect::<Vec<_>>()
    );
    assert_eq!(
        ga,
        (N..2 * N)
            .map(|i| (frame(i, 256), true))
            .collect::<Vec<_>>()
    );
    assert_eq!(
        (a.wire.stats().hub_dropped, b.wire.stats().hub_dropped),
        (0, 0)
    );
    assert!(start.elapsed() < Duration::from_secs(20));
}

#[test]
fn a_crashed_members_socket_file_is_removed() {
    let dir = hub("stale");
    std::fs::create_dir_all(&*dir).unwrap();
    // A process that crashed leaves its bound socket's file behind, with nobody bound to it.
    let stale = |name: &str| {
        let path = dir.join(name);
        drop(UnixDatagram::bind(&path).unwrap());
        assert!(path.exists());
        path
    };
    let before = stale("mdead-1-1-0.sock");
    let a = Member::join(&dir);
    assert!(
        !before.exists(),
        "the hello of a joining member finds it dead"
    );
    assert_eq!(a.wire.hub_peers(), 0);

    // One that crashes after the others found it: the first send to it finds it dead.
    let crashing = UnixDatagram::bind(dir.join("mdead-2-2-0.sock")).unwrap();
    assert!(a.wire.wait_for_hub_peers(1, WAIT));
    drop(crashing);
    let after = dir.join("mdead-2-2-0.sock");
    assert!(after.exists());
    a.send(&[frame(1, 60)]);
    assert!(!after.exists());
    assert_eq!(a.wire.hub_peers(), 0);
    let s = a.wire.stats();
    assert_eq!((s.hub_sent, s.hub_dropped), (0, 1));

    // One that is found dead by a rescan is never counted a member.
    let found = stale("mdead-3-3-0.sock");
    assert!(!a.wire.wait_for_hub_peers(1, Duration::from_millis(50)));
    assert!(!found.exists());

    // A file that is not a socket is not a member, and is left alone.
    let not_socket = dir.join("mfile-0-0-0.sock");
    std::fs::write(&not_socket, b"x").unwrap();
    assert!(!a.wire.wait_for_hub_peers(1, Duration::from_millis(50)));
    assert!(not_socket.exists());
}

#[test]
fn faults_act_on_frames_leaving_and_arrive_as_the_sender_left_them() {
    let dir = hub("faults");
    let (a, b) = (Member::join(&dir), Member::join(&dir));
    assert!(a.wire.wait_for_hub_peers(1, WAIT));
    a.wire.inject(WireFault::Drop { count: 1 });
    a.wire.inject(WireFault::Corrupt {
        count: 1,
        offset: 20,
        mode: CorruptMode::BadCrc,
    });
    // The receiving wire's faults are for what its own ports send.
    b.wire.inject(WireFault::Drop { count: 10 });
    a.send(&[frame(1, 60), frame(2, 60), frame(3, 60)]);
    let got = b.wait_for(2);
    let mut corrupted = frame(2, 60);
    corrupted[20] ^= 0xff;
    assert_eq!(got, [(corrupted, false), (frame(3, 60), true)]);
    let (sa, sb) = (a.wire.stats(), b.wire.stats());
    assert_eq!((sa.dropped, sa.corrupted, sa.hub_sent), (1, 1, 2));
    assert_eq!((sb.dropped, sb.hub_received), (0, 2));
}

#[test]
fn capture_records_frames_from_other_members() {
    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);
    impl Write for Shared {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let dir = hub("capture");
    let (a, b) = (Member::join(&dir), Member::join(&dir));
    assert!(a.wire.wait_for_hub_peers(1, WAIT) && b.wire.wait_for_hub_peers(1, WAIT));
    let buf = Shared::default();
    b.wire.capture_to(buf.clone()).unwrap();
    b.send(&[frame(1, 64)]);
    a.send(&[frame(2, 1000)]);
    b.wait_for(1);
    let recs = crate::pcap::parse(&buf.0.lock().unwrap()).unwrap();
    let data: Vec<Vec<u8>> = recs.iter().map(|r| r.data.clone()).collect();
    assert_eq!(data, [frame(1, 64), frame(2, 1000)]);
    assert!(recs[0].micros < recs[1].micros);
}

#[test]
fn with_auto_delivery_off_frames_from_the_hub_wait_to_be_delivered() {
    let dir = hub("deferred");
    let (a, b) = (Member::join(&dir), Member::join(&dir));
    assert!(a.wire.wait_for_hub_peers(1, WAIT));
    b.wire.set_auto_deliver(false);
    a.send(&[frame(1, 60), frame(2, 60)]);
    assert!(eventually(|| b.wire.pending() == 2));
    assert!(b.got().is_empty());
    b.wire.run_until_idle();
    assert_eq!(b.got(), [(frame(1, 60), true), (frame(2, 60), true)]);

    // A pump delivers them in the background.
    let pump = b.wire.spawn_pump(Duration::from_millis(1));
    a.send(&[frame(3, 60)]);
    assert_eq!(b.wait_for(3)[2], (frame(3, 60), true));
    pump.stop();
}

#[test]
fn stray_datagrams_reach_no_port() {
    let dir = hub("stray");
    let (a, b) = (Member::join(&dir), Member::join(&dir));
    assert!(a.wire.wait_for_hub_peers(1, WAIT));
    let s = UnixDatagram::unbound().unwrap();
    let to = b.wire.hub_socket().unwrap();
    s.send_to(b"not a hub datagram at all", &to).unwrap();
    s.send_to(b"RFWH\x01\x01\x00\x00../../etc/x.sock", &to)
        .unwrap();
    s.send_to(b"RFWH\x02\x00\x00\x00newer version", &to)
        .unwrap();
    a.send(&[frame(1, 60)]);
    assert_eq!(b.wait_for(1), [(frame(1, 60), true)]);
    assert_eq!(b.wire.stats().hub_received, 1);
    assert_eq!(b.wire.hub_peers(), 1, "the bogus hello added nobody");
}

#[test]
fn joining_where_no_directory_can_be_fails_naming_the_path() {
    let dir = hub("not-a-dir");
    std::fs::write(&*dir, b"a file").unwrap();
    let err = Wire::join(dir.join("hub")).unwrap_err();
    assert!(err.to_string().contains(&*dir.to_string_lossy()), "{err}");
    std::fs::remove_file(&*dir).unwrap();
}

#[test]
fn member_names_stay_inside_the_hub_directory() {
    for attempt in 0..3 {
        assert!(valid_name(&super::members::new_name(attempt)));
    }
    assert!(!valid_name("../m.sock") && !valid_name(".sock") && !valid_name("m"));
}

/// The environment variable that makes [`other_process_side`] the other process of
/// [`another_process_exchanges_frames_over_a_hub`]: the hub directory.
const CHILD_HUB: &str = "RINGFAB_EMU_HUB_CHILD";
const CROSS: u32 = 64;

#[test]
fn another_process_exchanges_frames_over_a_hub() {
    let dir = hub("process");
    let parent = Member::join(&dir);
    // The child is this test binary running only `other_process_side`.
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "hub::tests::other_process_side", "--nocapture"])
        .env(CHILD_HUB, &*dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let got = parent.wait_for(CROSS as usize);
    let expect: Vec<_> = (0..CROSS)
        .map(|i| (frame(i, 60 + i as usize * 100), true))
        .collect();
    assert_eq!(got, expect, "the child's frames, byte for byte, in order");
    assert!(parent.wire.wait_for_hub_peers(1, WAIT));
    let back: Vec<Vec<u8>> = (0..CROSS).map(|i| frame(1000 + i, 9018)).collect();
    parent.send(&back);
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            // Ours to end: started above.
            let _ = child.kill();
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = child.wait_with_output().unwrap();
    let log =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the other process failed:\n{log}");
    assert!(
        log.contains("1 passed"),
        "the other process ran nothing:\n{log}"
    );
    assert_eq!(parent.wire.stats().hub_dropped, 0);
    assert!(
        eventually(|| parent.wire.hub_peers() == 0),
        "the child left"
    );
}

/// The other process of [`another_process_exchanges_frames_over_a_hub`]; does nothing when run
/// as a test of its own.
#[test]
fn other_process_side() {
    let Some(dir) = std::env::var_os(CHILD_HUB) else {
        return;
    };
    let me = Member::join(Path::new(&dir));
    assert!(me.wire.wait_for_hub_peers(1, WAIT), "the parent is there");
    let frames: Vec<Vec<u8>> = (0..CROSS)
        .map(|i| frame(i, 60 + i as usize * 100))
        .collect();
    me.send(&frames);
    let got = me.wait_for(CROSS as usize);
    let expect: Vec<_> = (0..CROSS).map(|i| (frame(1000 + i, 9018), true)).collect();
    assert_eq!(got, expect);
    assert_eq!(me.wire.stats().hub_dropped, 0);
}
