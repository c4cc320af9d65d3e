//! The hostile-device suite (issue 14): a device that writes adversarial values into its rings
//! — lengths of 0, 65535 and beyond the buffer, all-ones status, done bits on descriptors never
//! posted, write-backs in the wrong slot, virtqueue used entries with ids out of range or
//! repeated, a used index jumping or going backwards, and bits flipped from a second thread
//! while the driver polls — against every driver, asserting:
//!
//! * **no panic**;
//! * **every token exactly once**: each completion names a token pushed and not yet back (none
//!   twice, none never pushed), and after the last flush every token is back;
//! * **no buffer handed back while the device may write it**: the device's IOMMU logs every
//!   write ([`Iommu::record_writes`](ringfab_emu::Iommu::record_writes)), every receive
//!   buffer is used once, and no device write lands in a buffer after the driver handed it
//!   back. For a buffer the driver took back itself (`Flushed`) this holds whatever the device
//!   did; for one the device reported done it holds unless the device forged that report (a
//!   write-back moved onto a slot it still held, an id it still held, a flipped bit) — then
//!   the device itself said the buffer was done, and no driver can tell.
//!
//! Each run is one seed of the emu's [`Prng`], printed before it runs (`hostile: … seed N`), so
//! a failure names what reproduces it; `RINGFAB_HOSTILE_SEED=N` runs that seed alone. The
//! seed fixes every fault, frame, batch size and flush; only the scribbler thread's timing
//! against the driver is the scheduler's.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use ringfab_emu::{DeviceFault, Iommu, ModelConfig, Prng, Ring};
use ringfab_hal::{
    DmaRegion, Error, Iova, MacAddr, Nic, Platform, Queue, Report, RxBuffer, RxCompletion,
    RxConfig, RxError, RxQueue, Token, TxConfig, TxError, TxQueue,
};

use crate::{frame, pair, push_frame, Fixture, BUF, MAC_A, MAC_B, NO_RX, NO_TX};

/// Ring depth of the queues under test.
const DEPTH: usize = 16;
/// Receive buffers one run may post (each used once).
const RX_BUFFERS: usize = 640;

/// Which of the device's lies a run may tell: the faults it draws from.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Menu {
    /// Lengths of 0, 65535, one past the buffer and far past it; all-ones and garbage status on
    /// both rings. No completion is forged.
    Lengths,
    /// Done bits on descriptors never posted (Intel), used ids out of range or repeated, used
    /// index jumps and rewinds (virtio). No completion is forged: a repeated id names a buffer
    /// already back, or one posted again under that id after the entry was written, which the
    /// driver must tell apart.
    NeverPosted,
    /// Write-backs in the wrong slot (Intel), used ids naming another buffer the device holds
    /// (virtio): completions forged.
    WrongSlot,
    /// All of the above, with write-backs withheld, delayed and frames cut.
    Everything,
}

impl Menu {
    /// Whether the device may report a buffer done that it still holds.
    fn forges(self) -> bool {
        matches!(self, Menu::WrongSlot | Menu::Everything)
    }

    /// One fault of the menu, aimed at one of the two devices (`true`: the receiver B).
    fn draw(self, prng: &mut Prng) -> (bool, DeviceFault) {
        let r = prng.next_u64();
        let pick = |n: u64| (r >> 8) % n;
        let count = 1 + (r >> 40) as usize % 3;
        let rx = Some(Ring::Rx(0));
        let tx = Some(Ring::Tx(0));
        let lengths = || -> (bool, DeviceFault) {
            match pick(6) {
                0..=3 => {
                    let len = [0, 0xFFFF, BUF as u16 + 1, 9000][(r >> 16) as usize % 4];
                    (
                        true,
                        DeviceFault::ExactLength {
                            queue: Some(0),
                            count,
                            len,
                        },
                    )
                }
                4 => (
                    true,
                    DeviceFault::GarbageStatus {
                        ring: rx,
                        count,
                        bits: u32::MAX,
                    },
                ),
                _ => (
                    false,
                    DeviceFault::GarbageStatus {
                        ring: tx,
                        count,
                        bits: u32::MAX,
                    },
                ),
            }
        };
        let never_posted = || -> (bool, DeviceFault) {
            let on_rx = r & 1 == 0;
            let ring = if on_rx { rx } else { tx };
            let fault = match pick(6) {
                0 | 1 => DeviceFault::StrayWriteback { ring, count },
                5 => DeviceFault::RepeatUsedId { ring, count },
                2 => DeviceFault::LieUsedId {
                    ring,
                    count: 1,
                    id: [DEPTH as u32, 999, u32::MAX][(r >> 16) as usize % 3],
                },
                3 => DeviceFault::JumpUsedIdx {
                    ring,
                    by: 1 + (r >> 16) as u16 % 40_000,
                },
                _ => DeviceFault::RewindUsedIdx {
                    ring,
                    by: 1 + (r >> 16) as u16 % 20,
                },
            };
            (on_rx, fault)
        };
        let wrong_slot = || -> (bool, DeviceFault) {
            let on_rx = r & 1 == 0;
            let ring = if on_rx { rx } else { tx };
            let fault = match pick(3) {
                0 | 1 => DeviceFault::MisplaceWriteback {
                    ring,
                    count,
                    offset: [1, 2, DEPTH as u16 - 1, 7][(r >> 16) as usize % 4],
                },
                _ => DeviceFault::LieUsedId {
                    ring,
                    count: 1,
                    id: (r >> 16) as u32 % DEPTH as u32,
                },
            };
            (on_rx, fault)
        };
        match self {
            Menu::Lengths => lengths(),
            Menu::NeverPosted => never_posted(),
            Menu::WrongSlot => wrong_slot(),
            Menu::Everything => match pick(7) {
                0 => lengths(),
                1 => never_posted(),
                2 => wrong_slot(),
                3 => (
                    r & 1 == 0,
                    DeviceFault::WithholdWriteback { ring: None, count },
                ),
                4 => (
                    r & 1 == 0,
                    DeviceFault::DelayWriteback {
                        ring: None,
                        count,
                        steps: 1 + (r >> 16) as u32 % 4,
                    },
                ),
                5 => (
                    true,
                    DeviceFault::CutFrame {
                        queue: Some(0),
                        count: 1,
                    },
                ),
                _ => (
                    r & 1 == 0,
                    DeviceFault::CompleteOutOfOrder { ring: None, count },
                ),
            },
        }
    }
}

/// How a token came back.
#[derive(Clone, Copy, Debug)]
struct Back {
    /// The device's write count right after the hand-back.
    seq: u64,
    /// The driver took it back itself (a flush), not on the device's word.
    by_driver: bool,
}

/// Every token pushed on one queue: which are out, how each came back.
#[derive(Default)]
struct Ledger {
    next: u64,
    /// Pushed, owed a completion.
    out: HashSet<u64>,
    /// Pushed `Report::ErrorsOnly`: owed nothing, allowed one completion (an error).
    quiet: HashSet<u64>,
    back: HashMap<u64, Back>,
    /// Completions with an error other than `Flushed`: the device's lies, caught.
    errors: usize,
}

impl Ledger {
    fn issue(&mut self, quiet: bool) -> u64 {
        let t = self.next;
        self.next += 1;
        if quiet {
            self.quiet.insert(t);
        } else {
            self.out.insert(t);
        }
        t
    }

    /// A push refused: the token never reached the driver.
    fn unissue(&mut self, t: u64) {
        self.out.remove(&t);
        self.quiet.remove(&t);
        self.next -= 1;
    }

    fn returned(&mut self, what: &str, token: Token, back: Back, seed: u64) {
        let t = token.0;
        assert!(
            !self.back.contains_key(&t),
            "seed {seed}: {what} token {t} came back twice"
        );
        assert!(
            self.out.remove(&t) || self.quiet.remove(&t),
            "seed {seed}: {what} token {t} was never pushed"
        );
        self.back.insert(t, back);
    }
}

/// Polls up to `max` receive completions, checking each against the hal's rules and the
/// ledger; returns how many.
fn take_rx<Q: RxQueue>(rx: &mut Q, l: &mut Ledger, max: usize, iommu: &Iommu, seed: u64) -> usize {
    let mut out = [NO_RX; 8];
    let n = rx.poll(&mut out[..max.min(8)]);
    for c in &out[..n] {
        check_rx(c, BUF as u32, seed);
        let by_driver = c.status == Err(RxError::Flushed);
        l.errors += usize::from(c.status.is_err() && !by_driver);
        let seq = iommu.write_seq();
        l.returned("receive", c.token, Back { seq, by_driver }, seed);
    }
    n
}

/// Polls up to `max` transmit completions into the ledger; returns how many.
fn take_tx<Q: TxQueue>(tx: &mut Q, l: &mut Ledger, max: usize, seed: u64) -> usize {
    let mut out = [NO_TX; 8];
    let n = tx.poll(&mut out[..max.min(8)]);
    for c in &out[..n] {
        let by_driver = c.status == Err(TxError::Flushed);
        l.errors += usize::from(c.status.is_err() && !by_driver);
        l.returned("transmit", c.token, Back { seq: 0, by_driver }, seed);
    }
    n
}

/// Runs `rounds` rounds of traffic from A to B with faults from `menu` injected at random
/// (and, with `scribble`, a thread flipping bits in both devices' rings throughout), checking
/// the three promises at every completion and at the end. Prints the seed first.
pub fn run<F: Fixture>(name: &str, menu: Menu, scribble: bool, seed: u64, rounds: usize) {
    println!("hostile: {name} seed {seed} (RINGFAB_HOSTILE_SEED={seed} to rerun it alone)");
    let p = pair::<F>();
    let mut prng = Prng::new(seed);
    p.b.iommu().record_writes();
    let mut rx = p
        .nic_b
        .open_rx::<DEPTH>(0, RxConfig::new(BUF as u32))
        .unwrap();
    let mut tx = p.nic_a.open_tx::<DEPTH>(0, TxConfig::default()).unwrap();
    let rx_mem = p.b.platform().alloc_dma(BUF * RX_BUFFERS).unwrap();
    let tx_mem = p.a.platform().alloc_dma(BUF * DEPTH).unwrap();
    let rx_buf = |t: u64| RxBuffer {
        iova: Iova(rx_mem.iova().0 + t * BUF as u64),
        len: BUF as u32,
    };
    let scribblers = scribble.then(|| {
        (
            p.a.spawn_scribbler(seed ^ 0xA, Duration::from_micros(20)),
            p.b.spawn_scribbler(seed ^ 0xB, Duration::from_micros(20)),
        )
    });
    let (mut rxl, mut txl) = (Ledger::default(), Ledger::default());
    let iommu = p.b.iommu();
    for round in 0..rounds {
        if prng.chance(300) {
            let (on_b, fault) = menu.draw(&mut prng);
            let dev = if on_b { &p.b } else { &p.a };
            dev.inject(fault);
        }
        // Receive buffers, each used once, while the region lasts.
        while rx.free() > 0 && (rxl.next as usize) < RX_BUFFERS {
            let t = rxl.issue(false);
            if rx.push(rx_buf(t), Token(t)).is_err() {
                rxl.unissue(t);
                break;
            }
        }
        rx.doorbell();
        for _ in 0..prng.next_u64() % 4 {
            if tx.free() == 0 {
                break;
            }
            // `ErrorsOnly`: a success is not reported, an error (or a flush) once.
            let quiet = prng.chance(200);
            let report = if quiet {
                Report::ErrorsOnly
            } else {
                Report::Always
            };
            let t = txl.issue(quiet);
            let slot = (t as usize) % DEPTH;
            let f = frame(
                MAC_B,
                MAC_A,
                46 + (prng.next_u64() % 1400) as usize,
                t as u8,
            );
            push_frame(&mut tx, &tx_mem, slot, &f, t, report);
        }
        tx.doorbell();
        p.wire.run_until_idle();
        // Often one at a time, so that the driver posts again between two entries of a batch.
        let max = if prng.chance(500) {
            1
        } else {
            1 + (prng.next_u64() % 8) as usize
        };
        take_rx(&mut rx, &mut rxl, max, iommu, seed);
        take_tx(&mut tx, &mut txl, max, seed);
        if prng.chance(120) {
            rx.flush();
        }
        if prng.chance(120) {
            tx.flush();
        }
        if round % 64 == 63 {
            p.a.step();
            p.b.step();
        }
    }
    let flipped = scribblers.map(|(a, b)| a.stop() + b.stop());
    // The device's lies end; whatever it left in the rings stays.
    p.a.clear_faults();
    p.b.clear_faults();
    p.wire.run_until_idle();
    for _ in 0..2 {
        rx.flush();
        tx.flush();
        while take_rx(&mut rx, &mut rxl, 8, iommu, seed) + take_tx(&mut tx, &mut txl, 8, seed) > 0 {
        }
    }
    let (rx_fault, tx_fault) = (rx.fault(), tx.fault());
    if rx_fault.is_none() {
        assert_eq!(rx.pending(), 0, "seed {seed}: receive tokens left");
        assert!(
            rxl.out.is_empty(),
            "seed {seed}: receive tokens never back: {:?}",
            rxl.out
        );
    }
    if tx_fault.is_none() {
        assert_eq!(tx.pending(), 0, "seed {seed}: transmit tokens left");
        let mut left: Vec<_> = txl.out.iter().copied().collect();
        left.sort_unstable();
        assert!(
            left.is_empty(),
            "seed {seed}: transmit tokens never back: {left:?}"
        );
    }
    // No device write after a hand-back: always for a buffer the driver took back itself,
    // for every buffer when the device forged no completion. Not with the scribbler: a flipped
    // buffer address sends the device's writes anywhere mapped.
    for (&t, back) in &rxl.back {
        if !scribble && (back.by_driver || !menu.forges()) {
            let late = p.b.iommu().writes_into(rx_buf(t).iova, BUF, back.seq);
            assert!(
                late.is_empty(),
                "seed {seed}: the device wrote receive buffer {t} after it was handed back \
                 ({}): {late:?}",
                if back.by_driver {
                    "flushed"
                } else {
                    "completed"
                }
            );
        }
    }
    println!(
        "hostile: {name} seed {seed}: {} receive and {} transmit tokens, each back once; \
         {} and {} error completions; {} bits flipped; queue faults {rx_fault:?} {tx_fault:?}",
        rxl.back.len(),
        txl.back.len(),
        rxl.errors,
        txl.errors,
        flipped.unwrap_or(0)
    );
    if menu == Menu::Lengths && !scribble {
        assert!(
            rxl.errors > 0,
            "seed {seed}: the device's lies were never caught"
        );
    }
}

/// The hal's rules for a receive completion: `len` at most the buffer, and 0 for an error
/// other than a frame error or a truncation.
fn check_rx(c: &RxCompletion, cap: u32, seed: u64) {
    assert!(c.len <= cap, "seed {seed}: {c:?} longer than its buffer");
    match c.status {
        Ok(()) | Err(RxError::Frame { .. }) | Err(RxError::Truncated { .. }) => {}
        Err(_) => assert_eq!(c.len, 0, "seed {seed}: {c:?}: an error has no length"),
    }
}

/// The seeds a test runs: `RINGFAB_HOSTILE_SEED` alone if set, else `count` seeds from `base`.
pub fn seeds(base: u64, count: u64) -> Vec<u64> {
    match std::env::var("RINGFAB_HOSTILE_SEED") {
        Ok(s) => vec![s.parse().expect("RINGFAB_HOSTILE_SEED: a number")],
        Err(_) => (base..base + count).collect(),
    }
}

/// Lengths of 0, 65535 and beyond the buffer, and all-ones status, never panic the driver;
/// every token comes back once and no buffer is written after it came back.
pub fn hostile_lengths_and_all_ones_status_never_panic_and_every_token_comes_back_once<
    F: Fixture,
>() {
    for seed in seeds(0x1E4, 4) {
        run::<F>("lengths", Menu::Lengths, false, seed, 400);
    }
}

/// Done bits on descriptors never posted, used ids out of range or repeated and a used index
/// that jumps or goes back are refused: every token comes back once and no buffer is written
/// after it came back.
pub fn hostile_done_bits_never_posted_and_used_ids_out_of_range_never_complete_a_token<
    F: Fixture,
>() {
    for seed in seeds(0x2E4, 4) {
        run::<F>("never-posted", Menu::NeverPosted, false, seed, 400);
    }
}

/// Write-backs in the wrong slot and used ids naming another buffer never return a token twice
/// nor one never pushed, and a flushed buffer is never written after the flush.
pub fn hostile_write_backs_in_the_wrong_slot_and_lying_ids_never_return_a_token_twice<
    F: Fixture,
>() {
    for seed in seeds(0x3E4, 4) {
        run::<F>("wrong-slot", Menu::WrongSlot, false, seed, 400);
    }
}

/// Every lie at once, with withheld, delayed and cut write-backs.
pub fn hostile_every_lie_at_once_returns_every_token_exactly_once<F: Fixture>() {
    for seed in seeds(0x4E4, 6) {
        run::<F>("everything", Menu::Everything, false, seed, 500);
    }
}

/// The device's configuration at its limits: a station address that is a group address
/// (broadcast, all-ones as a removed device's registers read, an IPv4 multicast MAC) or all
/// zeros. Bring-up stops with `StationAddress` naming it — every frame would carry it as its
/// source — and never panics.
pub fn hostile_a_station_address_no_station_may_have_stops_bring_up_by_name<F: Fixture>() {
    for mac in [
        MacAddr([0; 6]),
        MacAddr::BROADCAST,
        MacAddr([0x01, 0x00, 0x5e, 0x00, 0x00, 0x01]),
        MacAddr([0x53, 0x54, 0, 0, 0, 1]),
    ] {
        let mut config = ModelConfig::default();
        config.mac = mac;
        let dev = F::device(config);
        match F::driver(dev.platform()) {
            Err(e) => assert_eq!(e, Error::StationAddress { mac }, "{mac}"),
            Ok(_) => panic!("{mac}: brought up with a station address no station may have"),
        }
    }
}

/// A second thread flipping bits in the rings while the driver polls: no panic, every token
/// once.
pub fn hostile_bits_flipped_from_a_second_thread_never_panic_nor_lose_a_token<F: Fixture>() {
    for seed in seeds(0x5E4, 3) {
        run::<F>("scribbler", Menu::Lengths, true, seed, 400);
    }
}
