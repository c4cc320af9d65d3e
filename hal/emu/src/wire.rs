//! [`Wire`]: a hub joining emulated NICs, as a QEMU hub does — a frame sent by one port is
//! delivered to every other port.
//!
//! Frames enter the wire when a device transmits (after the device has released its own lock,
//! so a transmit on A never holds A while B is locked), go through the active [`WireFault`]s, are
//! optionally captured to pcap, and are delivered to the receivers. By default delivery happens
//! at once in the sending thread ("auto deliver"), so a doorbell on A has filled B's ring when
//! the doorbell write returns; with auto delivery off, frames wait until
//! [`deliver_pending`](Wire::deliver_pending) or [`run_until_idle`](Wire::run_until_idle).
//! [`spawn_pump`](Wire::spawn_pump) adds a background thread for latency-style use.
//!
//! A wire made with [`Wire::join`] is also a member of a hub that crosses process boundaries
//! (see [`join`](Wire::join)): what its devices send also goes to the other members' wires,
//! and what they send arrives here as if from one more port.

use std::collections::VecDeque;
use std::io::{self, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::fault::{CorruptMode, Prng, WireFault};
#[cfg(unix)]
use crate::hub::{members::Members, msg::Msg, Link};
use crate::pcap::PcapWriter;

/// Stands in for the hub's member list where there are no Unix sockets: never made.
#[cfg(not(unix))]
enum Members {}

/// What the wire needs from a device attached to it.
pub(crate) trait WirePort: Send + Sync {
    /// A frame arrives; `crc_ok` is false when it was corrupted in transit.
    fn receive(&self, frame: &[u8], crc_ok: bool);
    /// Advances the device one step; returns whether it still has deferred work.
    fn step(&self) -> bool;
}

/// Counters of what the wire did.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
#[non_exhaustive]
pub struct WireStats {
    /// Frames sent onto the wire.
    pub sent: u64,
    /// Frames dropped by faults.
    pub dropped: u64,
    /// Frames corrupted by faults.
    pub corrupted: u64,
    /// Extra copies made by duplication.
    pub duplicated: u64,
    /// Frames held back by reordering.
    pub reordered: u64,
    /// Frame deliveries (one per frame per receiving port), frames from other hub members
    /// included.
    pub deliveries: u64,
    /// Frames sent to other members of the hub ([`Wire::join`]): one per frame per member.
    pub hub_sent: u64,
    /// Frames that did not reach a member of the hub: one per frame per member whose socket
    /// stayed full, that had gone, or that could not take the frame (longer than 65535 bytes).
    pub hub_dropped: u64,
    /// Frames that arrived from other members of the hub.
    pub hub_received: u64,
}

struct ActiveFault {
    fault: WireFault,
    seen: usize,
    remaining: usize,
    prng: Prng,
}

/// Where a queued frame came from.
#[derive(Clone, Copy)]
enum Source {
    /// A device attached here: the frame still goes through the faults.
    Port(usize),
    /// Another member of the hub: its wire's faults have acted already.
    Hub {
        /// Whether the frame's check sequence is good.
        crc_ok: bool,
    },
}

/// A frame to deliver: the port it came from (`None`: another hub member, so every port gets
/// it and it is not sent back to the hub), the frame, and whether its CRC is good.
type Delivery = (Option<usize>, Vec<u8>, bool);

struct State {
    ports: Vec<Weak<dyn WirePort>>,
    queue: VecDeque<(Source, Vec<u8>)>,
    faults: Vec<ActiveFault>,
    held: Option<Delivery>,
    pcap: Option<PcapWriter<Box<dyn Write + Send>>>,
    auto: bool,
    stats: WireStats,
    /// Membership of a cross-process hub, if the wire joined one.
    #[cfg(unix)]
    hub: Option<Link>,
}

struct Inner {
    state: Mutex<State>,
    /// Serialises delivery so frames arrive in the order they left, whoever pumps.
    delivering: Mutex<()>,
}

/// A hub between emulated NICs. Cheap to clone; clones are the same wire.
#[derive(Clone)]
pub struct Wire {
    inner: Arc<Inner>,
}

impl Default for Wire {
    fn default() -> Self {
        Wire::new()
    }
}

impl std::fmt::Debug for Wire {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wire")
            .field("stats", &self.stats())
            .finish()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Wire state is a queue and counters; a panic elsewhere leaves it usable.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Wire {
    /// A wire with no ports, no faults, auto delivery on and no capture.
    pub fn new() -> Wire {
        Wire {
            inner: Arc::new(Inner {
                state: Mutex::new(State {
                    ports: Vec::new(),
                    queue: VecDeque::new(),
                    faults: Vec::new(),
                    held: None,
                    pcap: None,
                    auto: true,
                    stats: WireStats::default(),
                    #[cfg(unix)]
                    hub: None,
                }),
                delivering: Mutex::new(()),
            }),
        }
    }

    pub(crate) fn attach(&self, port: Weak<dyn WirePort>) -> usize {
        let mut s = lock(&self.inner.state);
        s.ports.push(port);
        s.ports.len() - 1
    }

    /// Captures every frame sent onto the wire (as the sender sent it, before faults) to a pcap
    /// file at `path`, replacing any earlier capture. On a wire that joined a hub, frames from
    /// the other members are captured too, as they arrived (after their sender's faults).
    ///
    /// # Errors
    /// Creating the file or writing its header failed.
    pub fn capture(&self, path: impl AsRef<Path>) -> io::Result<()> {
        self.capture_to(std::fs::File::create(path)?)
    }

    /// As [`capture`](Self::capture), into any writer.
    ///
    /// # Errors
    /// Writing the pcap header failed.
    pub fn capture_to(&self, out: impl Write + Send + 'static) -> io::Result<()> {
        let w = PcapWriter::new(Box::new(out) as Box<dyn Write + Send>)?;
        lock(&self.inner.state).pcap = Some(w);
        Ok(())
    }

    /// Stops capturing and closes the capture.
    pub fn stop_capture(&self) {
        lock(&self.inner.state).pcap = None;
    }

    /// Turns delivery in the sending thread on (default) or off.
    pub fn set_auto_deliver(&self, on: bool) {
        lock(&self.inner.state).auto = on;
    }

    /// Adds a fault; faults act in the order they were injected.
    pub fn inject(&self, fault: WireFault) {
        let (remaining, seed) = match fault {
            WireFault::Drop { count }
            | WireFault::Corrupt { count, .. }
            | WireFault::Duplicate { count }
            | WireFault::Reorder { count } => (count, 0),
            WireFault::Random { seed, .. } => (usize::MAX, seed),
            WireFault::DropEvery { .. } | WireFault::CorruptEvery { .. } => (usize::MAX, 0),
        };
        lock(&self.inner.state).faults.push(ActiveFault {
            fault,
            seen: 0,
            remaining,
            prng: Prng::new(seed),
        });
    }

    /// Removes every fault (a held frame stays held until released).
    pub fn clear_faults(&self) {
        lock(&self.inner.state).faults.clear();
    }

    /// What the wire has done so far.
    pub fn stats(&self) -> WireStats {
        lock(&self.inner.state).stats
    }

    /// Frames queued and not yet delivered.
    pub fn pending(&self) -> usize {
        lock(&self.inner.state).queue.len()
    }

    pub(crate) fn send(&self, from: usize, frames: Vec<Vec<u8>>) {
        if frames.is_empty() {
            return;
        }
        let auto = {
            let mut s = lock(&self.inner.state);
            for f in frames {
                capture(&mut s, &f);
                s.stats.sent += 1;
                s.queue.push_back((Source::Port(from), f));
            }
            s.auto
        };
        if auto {
            self.deliver_pending();
        }
    }

    /// A frame from another member of the hub, on its receiver thread: queued as one from a
    /// port of its own and, if auto delivery is on, delivered now — unless another thread is
    /// delivering, which then delivers it too (`deliver_pending` looks again after letting go
    /// of the lock). The receiver never waits for the delivery lock, and never sends to the
    /// hub itself (it stops at a local frame, which its sender is about to deliver): it must go
    /// back to draining its socket, or two members sending to each other could each wait for
    /// the other's full socket while its own receiver waits for it.
    #[cfg(unix)]
    fn arrive(&self, frame: &[u8], crc_ok: bool) {
        let auto = {
            let mut s = lock(&self.inner.state);
            capture(&mut s, frame);
            s.stats.hub_received += 1;
            s.queue.push_back((Source::Hub { crc_ok }, frame.to_vec()));
            s.auto
        };
        if !auto {
            return;
        }
        let order = match self.inner.delivering.try_lock() {
            Ok(g) => g,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return,
        };
        self.deliver_queued(&order, true);
    }

    /// Delivers every queued frame; returns how many frames left the queue.
    pub fn deliver_pending(&self) -> usize {
        let mut n = 0;
        loop {
            n += self.deliver_queued(&lock(&self.inner.delivering), false);
            // The hub's receiver does not wait for the delivery lock (see `arrive`): a frame it
            // queued while this thread held the lock is this thread's to deliver.
            if self.pending() == 0 {
                return n;
            }
        }
    }

    /// Delivers queued frames in order until the queue is empty — or, with `hub_only`, until a
    /// frame from a local port is next. The caller holds the delivery lock (`_order`).
    fn deliver_queued(&self, _order: &MutexGuard<'_, ()>, hub_only: bool) -> usize {
        let mut n = 0;
        loop {
            let (deliveries, ports, hub) = {
                let mut s = lock(&self.inner.state);
                if hub_only && matches!(s.queue.front(), Some((Source::Port(_), _))) {
                    break;
                }
                let Some((source, frame)) = s.queue.pop_front() else {
                    break;
                };
                n += 1;
                let d = match source {
                    Source::Port(from) => apply_faults(&mut s, from, frame),
                    Source::Hub { crc_ok } => vec![(None, frame, crc_ok)],
                };
                (d, s.ports.clone(), hub_members(&s))
            };
            // The wire lock is released: receivers may take their own locks freely.
            self.deliver(&ports, deliveries, hub.as_deref());
        }
        n
    }

    /// Delivers a frame held back by [`WireFault::Reorder`], if any.
    pub fn release_held(&self) {
        {
            let _order = lock(&self.inner.delivering);
            let (held, ports, hub) = {
                let mut s = lock(&self.inner.state);
                (s.held.take(), s.ports.clone(), hub_members(&s))
            };
            self.deliver(&ports, held.into_iter().collect(), hub.as_deref());
        }
        // As in deliver_pending: what the hub's receiver queued meanwhile is ours.
        if lock(&self.inner.state).auto && self.pending() > 0 {
            self.deliver_pending();
        }
    }

    fn deliver(
        &self,
        ports: &[Weak<dyn WirePort>],
        deliveries: Vec<Delivery>,
        hub: Option<&Members>,
    ) {
        for (from, frame, crc_ok) in deliveries {
            for (i, p) in ports.iter().enumerate() {
                if Some(i) == from {
                    continue;
                }
                if let Some(port) = p.upgrade() {
                    port.receive(&frame, crc_ok);
                    lock(&self.inner.state).stats.deliveries += 1;
                }
            }
            // Frames from the hub are not sent back to it: every member sends to every other
            // itself, so relaying would deliver twice (and loop).
            if let (Some(_), Some(members)) = (from, hub) {
                let sent = send_to_hub(members, &frame, crc_ok);
                let mut s = lock(&self.inner.state);
                s.stats.hub_sent += sent.0;
                s.stats.hub_dropped += sent.1;
            }
        }
    }

    /// Delivers every queued frame and steps every attached device until no frame is queued and
    /// no device has deferred work (bounded, so a device that never settles cannot hang it).
    pub fn run_until_idle(&self) {
        for _ in 0..10_000 {
            self.deliver_pending();
            let ports = lock(&self.inner.state).ports.clone();
            let mut busy = false;
            for p in ports.iter().filter_map(Weak::upgrade) {
                busy |= p.step();
            }
            if !busy && self.pending() == 0 {
                return;
            }
        }
    }

    /// Starts a background thread that keeps delivering frames and stepping the attached devices
    /// every `period`; it stops when the returned [`Pump`] is dropped or stopped.
    pub fn spawn_pump(&self, period: Duration) -> Pump {
        let stop = Arc::new(AtomicBool::new(false));
        let (wire, flag) = (self.clone(), stop.clone());
        let handle = std::thread::spawn(move || {
            while !flag.load(Ordering::Acquire) {
                wire.run_until_idle();
                std::thread::sleep(period);
            }
        });
        Pump {
            stop,
            handle: Some(handle),
        }
    }
}

/// Joining a hub that crosses process boundaries.
#[cfg(unix)]
impl Wire {
    /// A new wire that is a member of the hub in directory `hub`, as a QEMU netdev joins a
    /// hub: every frame a device on this wire sends also goes to the wires of the hub's other
    /// members — in this process or any other — and their frames reach the devices here.
    /// Any process that can write the directory can join; no daemon runs, and no root is
    /// needed.
    ///
    /// ```
    /// use ringfab_emu::{EmuIgb, IgbModelConfig, Wire};
    ///
    /// let hub = std::env::temp_dir().join(format!("ringfab-doc-hub-{}", std::process::id()));
    /// let wire = Wire::join(&hub)?; // another process joins the same directory
    /// let nic = EmuIgb::new(IgbModelConfig::default());
    /// nic.connect(&wire); // then hand nic.platform() to a driver, as on any wire
    /// # drop((nic, wire));
    /// # std::fs::remove_dir(&hub)?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    ///
    /// How it works: the member binds a Unix datagram socket in `hub` (created if missing) and
    /// sends each frame, one datagram per frame, to every other member's socket there. A
    /// thread of the member's own takes frames from its socket and hands them to the wire,
    /// which delivers them as its delivery mode says: at once by default, so a process that
    /// only polls its completion queues gets them; with auto delivery off they wait, counted in
    /// [`pending`](Self::pending), for [`deliver_pending`](Self::deliver_pending),
    /// [`run_until_idle`](Self::run_until_idle) or a [`Pump`].
    ///
    /// What crosses and what stays:
    ///
    /// * **Faults act on frames leaving a process**: a frame a local device sends goes through
    ///   this wire's [`WireFault`]s once, and what comes out (dropped, corrupted, duplicated,
    ///   reordered) goes both to the local ports and to the other members. Frames arriving from
    ///   other members are delivered as their sender's wire left them (a `BadCrc` corruption
    ///   arrives with a bad check sequence), not faulted again.
    /// * **The wire is lossy, never stuck**: a member's socket holds few frames; a send waits a
    ///   short while (a quarter of a second) for a full one to drain and then drops the frame
    ///   ([`WireStats::hub_dropped`]), and does not wait for that member again until it takes a
    ///   frame. Frames longer than 65535 bytes stay local (and are counted dropped).
    /// * **Members come and go**: a new member is known to the others when its hello arrives
    ///   or their next rescan of the directory (every 250 ms) finds it —
    ///   [`wait_for_hub_peers`](Self::wait_for_hub_peers) waits for that; one that leaves says
    ///   bye; the socket file of one that crashed is removed by the first member that finds
    ///   nobody bound to it — sending to it, or finding the file in a rescan or on joining —
    ///   and a file found so is never counted a member.
    /// * Capture ([`capture`](Self::capture)) records frames from other members as well;
    ///   [`stats`](Self::stats) counts them in [`WireStats::hub_received`].
    ///
    /// The wire leaves the hub when [`leave`](Self::leave) is called or when its last clone
    /// is dropped (connected devices hold clones): its thread is stopped and joined, its
    /// socket file removed. The directory itself is left in place.
    ///
    /// # Errors
    /// Creating or reading `hub`, binding the member's socket in it (its path must fit a Unix
    /// socket address, about 100 bytes), or starting the thread failed; the error names the
    /// path.
    pub fn join(hub: impl AsRef<Path>) -> io::Result<Wire> {
        let wire = Wire::new();
        let weak = Arc::downgrade(&wire.inner);
        let link = Link::join(
            hub.as_ref(),
            Box::new(move |frame, crc_ok| match weak.upgrade() {
                Some(inner) => {
                    Wire { inner }.arrive(frame, crc_ok);
                    true
                }
                None => false,
            }),
        )?;
        lock(&wire.inner.state).hub = Some(link);
        Ok(wire)
    }

    /// Leaves the hub, if the wire joined one: the other members hear bye, the receiving thread
    /// is stopped and joined, the socket file removed. The wire and its local ports go on
    /// working as a wire of this process only.
    pub fn leave(&self) {
        // Taken out under the lock, dropped after it: the thread being joined may be waiting
        // for this lock to deliver a frame.
        let link = lock(&self.inner.state).hub.take();
        drop(link);
    }

    /// How many other members of the hub this wire knows (and sends to); 0 when it joined
    /// none.
    pub fn hub_peers(&self) -> usize {
        hub_members(&lock(&self.inner.state)).map_or(0, |m| m.count())
    }

    /// Waits until this wire knows at least `n` other members of its hub, rescanning the hub
    /// directory meanwhile; returns whether it does within `timeout`. A program that is about
    /// to send to a process that has just joined calls this first: frames sent before a member
    /// is known do not reach it.
    pub fn wait_for_hub_peers(&self, n: usize, timeout: Duration) -> bool {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let Some(members) = hub_members(&lock(&self.inner.state)) else {
                return n == 0;
            };
            if members.count() >= n {
                return true;
            }
            if std::time::Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(5));
            // A failed scan leaves the list as it was; the receiver's own rescans go on.
            let _ = members.rescan();
        }
    }

    /// The path of this wire's socket in its hub, if it joined one.
    pub fn hub_socket(&self) -> Option<std::path::PathBuf> {
        lock(&self.inner.state).hub.as_ref().map(Link::socket_path)
    }
}

/// The members a wire sends to, if it joined a hub.
#[cfg(unix)]
fn hub_members(s: &State) -> Option<Arc<Members>> {
    s.hub.as_ref().map(|l| l.members().clone())
}

#[cfg(not(unix))]
fn hub_members(_: &State) -> Option<Arc<Members>> {
    None
}

/// Sends one frame to every other member; returns (members reached, members not reached).
#[cfg(unix)]
fn send_to_hub(members: &Members, frame: &[u8], crc_ok: bool) -> (u64, u64) {
    if frame.len() > crate::hub::msg::MAX_FRAME {
        return (0, members.count() as u64);
    }
    let mut datagram = Vec::with_capacity(crate::hub::msg::HEADER + frame.len());
    Msg::Frame { frame, crc_ok }.emit(&mut datagram);
    let sent = members.broadcast(&datagram);
    (sent.sent, sent.dropped)
}

#[cfg(not(unix))]
fn send_to_hub(members: &Members, _: &[u8], _: bool) -> (u64, u64) {
    match *members {}
}

/// Writes `frame` to the capture, if any. Emulated timestamps: the nth frame captured (sent
/// here or arrived from the hub) at n microseconds. A failing capture must not change what the
/// devices see, so its error is dropped (and the capture stopped).
fn capture(s: &mut State, frame: &[u8]) {
    let n = s.stats.sent + s.stats.hub_received;
    if let Some(p) = s.pcap.as_mut() {
        if p.write_frame(n, frame).is_err() {
            s.pcap = None;
        }
    }
}

/// The background thread of [`Wire::spawn_pump`]; stopped and joined on drop.
#[derive(Debug)]
pub struct Pump {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl Pump {
    /// Stops the thread and waits for it.
    pub fn stop(mut self) {
        self.halt();
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(h) = self.handle.take() {
            // A panic in the pump thread has already been reported; nothing to add here.
            let _ = h.join();
        }
    }
}

impl Drop for Pump {
    fn drop(&mut self) {
        self.halt();
    }
}

fn corrupt(frame: &mut [u8], offset: usize, mode: CorruptMode) -> bool {
    if let Some(len) = std::num::NonZeroUsize::new(frame.len()) {
        frame[offset % len] ^= 0xff;
    }
    mode == CorruptMode::Silent
}

/// Runs one frame through the faults; returns what to deliver, in order.
fn apply_faults(s: &mut State, from: usize, mut frame: Vec<u8>) -> Vec<Delivery> {
    let mut crc_ok = true;
    let mut copies = 1usize;
    let mut hold = false;
    for f in s.faults.iter_mut() {
        f.seen += 1;
        let periodic = |k: usize, seen: usize| k != 0 && seen % k == 0;
        match f.fault {
            WireFault::Drop { .. } if f.remaining > 0 => {
                f.remaining -= 1;
                copies = 0;
            }
            WireFault::DropEvery { k } if periodic(k, f.seen) => copies = 0,
            WireFault::Corrupt { offset, mode, .. } if f.remaining > 0 => {
                f.remaining -= 1;
                crc_ok &= corrupt(&mut frame, offset, mode);
                s.stats.corrupted += 1;
            }
            WireFault::CorruptEvery { k, offset, mode } if periodic(k, f.seen) => {
                crc_ok &= corrupt(&mut frame, offset, mode);
                s.stats.corrupted += 1;
            }
            WireFault::Duplicate { .. } if f.remaining > 0 => {
                f.remaining -= 1;
                copies += 1;
                s.stats.duplicated += 1;
            }
            WireFault::Reorder { .. } if f.remaining > 0 && s.held.is_none() => {
                f.remaining -= 1;
                hold = true;
            }
            WireFault::Random {
                drop_per_mille,
                corrupt_per_mille,
                duplicate_per_mille,
                mode,
                ..
            } => {
                // Every draw is made for every frame, so a seed gives the same sequence whatever
                // the outcomes; a dropped frame is then neither corrupted nor duplicated (it does
                // not exist to be), and only what happened is counted.
                let dropped = f.prng.chance(drop_per_mille);
                let corrupted = f.prng.chance(corrupt_per_mille);
                let at = 14 + f.prng.next_u64() as usize % frame.len().saturating_sub(14).max(1);
                let duplicated = f.prng.chance(duplicate_per_mille);
                if dropped {
                    copies = 0;
                } else {
                    if corrupted {
                        crc_ok &= corrupt(&mut frame, at, mode);
                        s.stats.corrupted += 1;
                    }
                    if duplicated {
                        copies += 1;
                        s.stats.duplicated += 1;
                    }
                }
            }
            _ => {}
        }
        if copies == 0 {
            break;
        }
    }
    s.faults.retain(|f| f.remaining > 0);
    if copies == 0 {
        s.stats.dropped += 1;
        return Vec::new();
    }
    let mut out: Vec<Delivery> = (0..copies)
        .map(|_| (Some(from), frame.clone(), crc_ok))
        .collect();
    if hold {
        s.stats.reordered += 1;
        let first = out.remove(0);
        s.held = Some(first);
        return out;
    }
    // A frame passes: a frame held back before it now follows it.
    out.extend(s.held.take());
    out
}
