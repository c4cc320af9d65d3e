//! A hostile device's second hand: bits flipped in the ring memory the device writes — the Intel
//! models' descriptor rings, the virtqueues' used rings — at any moment, while the driver polls.
//!
//! The models write rings only at defined points (a write-back, a used entry); real hardware,
//! or a broken or malicious one, may write them whenever it likes, and DESIGN decision 4 says
//! nothing it writes is trusted. A flip goes through the device's own IOMMU like any device
//! write, so it reaches only memory mapped for the device, and only the rings the device was
//! given ([`EmuNic::scribble`] asks the model where they are at each flip): the driver's own
//! memory outside them is never touched. Each flip is a one-byte read-modify-write, which a
//! driver store to the same byte between the two may undo or be undone by — also what a
//! device may do.
//!
//! Two ways to use it:
//! * [`EmuNic::scribble`] flips one bit now, on the calling thread, from a [`Prng`]: fully
//!   deterministic, for a test that interleaves flips with driver calls itself;
//! * [`EmuNic::spawn_scribbler`] flips from a thread of its own until the [`Scribbler`] is
//!   dropped: the flips are the seed's, their timing against the driver is the scheduler's.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use ringfab_hal::Iova;

use crate::device::{EmuNic, Kind};
use crate::fault::Prng;

/// One bit the device flipped.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Flip {
    /// The byte's address.
    pub iova: Iova,
    /// The bit flipped in it (0–7).
    pub bit: u8,
}

impl<K: Kind> EmuNic<K> {
    /// The ring memory the device writes, as programmed now: `(iova, bytes)` of each Intel
    /// descriptor ring programmed (receive and transmit of each queue, in queue order) or each
    /// ready virtqueue's used ring (in virtqueue order), for a test that plays the device's
    /// writes itself ([`device_write`](Self::device_write)).
    pub fn rings(&self) -> Vec<(Iova, u64)> {
        self.with_model(|m| m.rings())
            .into_iter()
            .map(|(iova, len)| (Iova(iova), len))
            .collect()
    }

    /// Writes `bytes` at `iova` as the device would, through its IOMMU (refused and recorded
    /// as a fault outside the live mappings); whether it was written. For a test that plays a
    /// hostile device's ring writes byte by byte.
    pub fn device_write(&self, iova: Iova, bytes: &[u8]) -> bool {
        self.iommu().write(iova.0, bytes)
    }

    /// Flips one bit, chosen by `prng`, in the ring memory the device writes (every area
    /// equally likely per byte); `None` if no ring is programmed (or the IOMMU refused the
    /// access, which it records as a fault).
    pub fn scribble(&self, prng: &mut Prng) -> Option<Flip> {
        let rings = self.with_model(|m| m.rings());
        let total: u64 = rings.iter().map(|&(_, len)| len).sum();
        if total == 0 {
            return None;
        }
        let r = prng.next_u64();
        let mut at = r % total;
        let bit = ((r >> 56) & 7) as u8;
        let (base, _) = *rings.iter().find(|&&(_, len)| {
            let inside = at < len;
            if !inside {
                at -= len;
            }
            inside
        })?;
        let iova = base + at;
        let iommu = self.iommu();
        let byte = iommu.read(iova, 1)?;
        iommu.write(iova, &[byte[0] ^ (1 << bit)]).then_some(Flip {
            iova: Iova(iova),
            bit,
        })
    }

    /// Starts a thread that flips a bit in the device's rings ([`scribble`](Self::scribble))
    /// from a [`Prng`] seeded with `seed`, then sleeps `pause` (nothing if zero: it yields),
    /// until the returned [`Scribbler`] is stopped or dropped.
    pub fn spawn_scribbler(&self, seed: u64, pause: Duration) -> Scribbler {
        let nic = self.clone();
        let stop = Arc::new(AtomicBool::new(false));
        let flips = Arc::new(AtomicU64::new(0));
        let thread = {
            let (stop, flips) = (stop.clone(), flips.clone());
            std::thread::spawn(move || {
                let mut prng = Prng::new(seed);
                while !stop.load(Ordering::Acquire) {
                    if nic.scribble(&mut prng).is_some() {
                        flips.fetch_add(1, Ordering::Relaxed);
                    }
                    if pause.is_zero() {
                        std::thread::yield_now();
                    } else {
                        std::thread::sleep(pause);
                    }
                }
            })
        };
        Scribbler {
            stop,
            flips,
            thread: Some(thread),
        }
    }
}

/// A thread flipping bits in one device's rings ([`EmuNic::spawn_scribbler`]). Dropping it
/// stops the thread and waits for it.
#[derive(Debug)]
pub struct Scribbler {
    stop: Arc<AtomicBool>,
    flips: Arc<AtomicU64>,
    thread: Option<JoinHandle<()>>,
}

impl Scribbler {
    /// Bits flipped so far.
    pub fn flips(&self) -> u64 {
        self.flips.load(Ordering::Relaxed)
    }

    /// Stops the thread, waits for it, and returns how many bits it flipped: after this the
    /// device writes nothing more on its own.
    pub fn stop(mut self) -> u64 {
        self.halt();
        self.flips()
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            // A panic in the thread is the emulator's bug: surface it in the test.
            if let Err(e) = t.join() {
                std::panic::resume_unwind(e);
            }
        }
    }
}

impl Drop for Scribbler {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            self.halt();
        } else {
            self.stop.store(true, Ordering::Release);
        }
    }
}
