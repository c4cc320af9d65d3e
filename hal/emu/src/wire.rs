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

use std::collections::VecDeque;
use std::io::{self, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::fault::{CorruptMode, Prng, WireFault};
use crate::pcap::PcapWriter;

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
    /// Frame deliveries (one per frame per receiving port).
    pub deliveries: u64,
}

struct ActiveFault {
    fault: WireFault,
    seen: usize,
    remaining: usize,
    prng: Prng,
}

type Delivery = (usize, Vec<u8>, bool);

struct State {
    ports: Vec<Weak<dyn WirePort>>,
    queue: VecDeque<(usize, Vec<u8>)>,
    faults: Vec<ActiveFault>,
    held: Option<Delivery>,
    pcap: Option<PcapWriter<Box<dyn Write + Send>>>,
    auto: bool,
    stats: WireStats,
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
    /// file at `path`, replacing any earlier capture.
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
                let n = s.stats.sent;
                s.stats.sent += 1;
                if let Some(p) = s.pcap.as_mut() {
                    // Emulated timestamps: frame n at n microseconds. A failing capture must not
                    // change what the devices see, so its error is dropped (and the capture
                    // stopped).
                    if p.write_frame(n, &f).is_err() {
                        s.pcap = None;
                    }
                }
                s.queue.push_back((from, f));
            }
            s.auto
        };
        if auto {
            self.deliver_pending();
        }
    }

    /// Delivers every queued frame; returns how many frames left the queue.
    pub fn deliver_pending(&self) -> usize {
        let _order = lock(&self.inner.delivering);
        let mut n = 0;
        loop {
            let (deliveries, ports) = {
                let mut s = lock(&self.inner.state);
                let Some((from, frame)) = s.queue.pop_front() else {
                    break;
                };
                n += 1;
                let d = apply_faults(&mut s, from, frame);
                (d, s.ports.clone())
            };
            // The wire lock is released: receivers may take their own locks freely.
            self.deliver(&ports, deliveries);
        }
        n
    }

    /// Delivers a frame held back by [`WireFault::Reorder`], if any.
    pub fn release_held(&self) {
        let _order = lock(&self.inner.delivering);
        let (held, ports) = {
            let mut s = lock(&self.inner.state);
            (s.held.take(), s.ports.clone())
        };
        self.deliver(&ports, held.into_iter().collect());
    }

    fn deliver(&self, ports: &[Weak<dyn WirePort>], deliveries: Vec<Delivery>) {
        for (from, frame, crc_ok) in deliveries {
            for (i, p) in ports.iter().enumerate() {
                if i == from {
                    continue;
                }
                if let Some(port) = p.upgrade() {
                    port.receive(&frame, crc_ok);
                    lock(&self.inner.state).stats.deliveries += 1;
                }
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
    let mut out: Vec<Delivery> = (0..copies).map(|_| (from, frame.clone(), crc_ok)).collect();
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
