//! `intel_tx_writeback`: the Intel transmit ring (`ringfab_ring::TxRing`, which igb and e1000e
//! share) with both drivers' descriptor formats ([`Advanced`], [`Extended`]) over the ring
//! crate's fake DMA region, the fuzzer playing the device: done bits written back in order
//! (on any descriptor, report-status asked or not), raw status words into any slot (undefined
//! bits, done bits on descriptors never handed over), write-backs taken back, interleaved
//! with the driver's pushes (1–5 segments of any length, either report mode, some beyond the
//! device's limits), doorbells, polls and flushes; a final flush after which only the device
//! acts.
//!
//! Input: one byte choosing the format and the ring size (8, 16 or 64), then operations of
//! one byte each followed by their arguments.
//!
//! Checked:
//! * no panic;
//! * every completion names a token pushed and not yet reported: none twice, none never
//!   pushed; a frame pushed with `Report::ErrorsOnly` is reported only with an error;
//! * after the final flush every frame pushed with `Report::Always` has been reported, the
//!   ring holds nothing (`pending()` 0) and every descriptor is free again.

use std::collections::HashMap;

use ringfab_e1000e::Extended;
use ringfab_hal::{DmaRegion, DmaRing, Iova, Report, Token, TxCompletion, TxSegment};
use ringfab_igb::Advanced;
use ringfab_ring::fake::FakeDma;
use ringfab_ring::{Format, TxRing};

use crate::Bytes;

/// Bytes per descriptor.
const DESC_LEN: usize = 16;
/// The transmit write-back's done bit, in word 1, for both formats (advanced STA.DD, legacy
/// STA.DD: bit 32).
const DD: u64 = 1 << 32;
/// The device's limits passed to `push`: 4 segments (a push of 5 is refused) and the Intel
/// drivers' longest frame.
const MAX_SEGMENTS: usize = 4;
const MAX_LEN: usize = 9014;

/// The `intel_tx_writeback` target's body.
pub fn run(data: &[u8]) {
    let mut b = Bytes::new(data);
    let Some(sel) = b.u8() else {
        return;
    };
    match sel % 6 {
        0 => Model::<Advanced, 8>::new().run(&mut b),
        1 => Model::<Extended, 8>::new().run(&mut b),
        2 => Model::<Advanced, 16>::new().run(&mut b),
        3 => Model::<Extended, 16>::new().run(&mut b),
        4 => Model::<Advanced, 64>::new().run(&mut b),
        _ => Model::<Extended, 64>::new().run(&mut b),
    }
}

struct Model<F: Format, const N: usize> {
    ring: TxRing<F, FakeDma, N>,
    /// Tokens pushed and not reported, with whether they asked for a report always.
    out: HashMap<u64, bool>,
    next: u64,
    /// The slot the in-order part of the device writes back next.
    dev: usize,
    /// Descriptors pushed so far (the ring's tail).
    pushed: usize,
}

impl<F: Format, const N: usize> Model<F, N> {
    fn new() -> Self {
        let dma = FakeDma::new(N * DESC_LEN, 0x8000);
        let ring = TxRing::new(DmaRing::new(dma).ok().expect("the ring fits its region"));
        Model {
            ring,
            out: HashMap::new(),
            next: 0,
            dev: 0,
            pushed: 0,
        }
    }

    fn word1(&self, slot: usize) -> usize {
        (slot % N) * DESC_LEN + 8
    }

    fn run(mut self, b: &mut Bytes<'_>) {
        let mut ended = false;
        while let Some(op) = b.u8() {
            let op = op % 9;
            if op == 8 && !ended {
                self.ring.flush();
                ended = true;
                continue;
            }
            if ended && !matches!(op, 2..=4) {
                continue;
            }
            if self.step(op, b).is_none() {
                break;
            }
        }
        if !ended {
            self.ring.flush();
        }
        self.drain();
        let unreported: Vec<_> = self.out.iter().filter(|(_, &a)| a).collect();
        assert!(
            unreported.is_empty(),
            "frames asking for a report never reported after the final flush: {unreported:?}"
        );
        assert_eq!(self.ring.pending(), 0);
        assert_eq!(self.ring.free(), N - 1);
    }

    fn step(&mut self, op: u8, b: &mut Bytes<'_>) -> Option<()> {
        match op {
            // Push a frame of 1–5 segments (5 is beyond the limit).
            0 => {
                let shape = b.u8()?;
                let count = 1 + usize::from(shape % 5);
                let report = if shape & 0x80 != 0 {
                    Report::ErrorsOnly
                } else {
                    Report::Always
                };
                let mut segs = [TxSegment {
                    iova: Iova(0),
                    len: 0,
                }; 5];
                for (i, s) in segs[..count].iter_mut().enumerate() {
                    *s = TxSegment {
                        iova: Iova(0x100_0000 + (self.next * 8 + i as u64) * 0x4000),
                        len: b.u16()? % 0x2400,
                    };
                }
                let token = self.next;
                if self
                    .ring
                    .push(&segs[..count], Token(token), report, MAX_SEGMENTS, MAX_LEN)
                    .is_ok()
                {
                    self.out.insert(token, report == Report::Always);
                    self.next += 1;
                    self.pushed += count;
                }
            }
            1 => {
                self.ring.doorbell();
            }
            // The device writes DD on its next descriptor(s), in order.
            2 => {
                for _ in 0..=b.u8()? % 8 {
                    let at = self.word1(self.dev);
                    let w1 = self.ring.dma().read_u64(at);
                    self.ring.dma().write_u64(at, w1 | DD);
                    self.dev = self.dev.wrapping_add(1);
                }
            }
            // The device writes a raw status word (the upper half of word 1) into any slot.
            3 => {
                let at = self.word1(usize::from(b.u8()?));
                let w1 = self.ring.dma().read_u64(at);
                let hi = u64::from(b.u32()?) << 32;
                self.ring.dma().write_u64(at, w1 & 0xffff_ffff | hi);
            }
            // The device jumps, or takes a write-back back.
            4 => {
                let k = b.u8()?;
                if k & 1 == 0 {
                    self.dev = self.dev.wrapping_add(usize::from(k >> 1));
                } else {
                    let at = self.word1(usize::from(k >> 1));
                    let w1 = self.ring.dma().read_u64(at);
                    self.ring.dma().write_u64(at, w1 & !DD);
                }
            }
            5 | 6 => {
                let max = usize::from(b.u8()? % 9);
                let mut got = [TxCompletion {
                    token: Token(0),
                    status: Ok(()),
                }; 8];
                let n = self.ring.poll(&mut got[..max]);
                assert!(n <= max);
                for c in &got[..n] {
                    self.back(c);
                }
            }
            // Flush (the queue stopped and restarted): the device starts again at the tail.
            7 => {
                self.ring.flush();
                self.dev = self.pushed;
            }
            _ => unreachable!("operations are taken modulo 9, 8 by the caller"),
        }
        Some(())
    }

    fn drain(&mut self) {
        let mut got = [TxCompletion {
            token: Token(0),
            status: Ok(()),
        }; 4];
        for _ in 0..=N + 1 {
            let n = self.ring.poll(&mut got);
            if n == 0 {
                return;
            }
            for c in &got[..n] {
                self.back(c);
            }
        }
        panic!("the ring went on reporting after every frame was back");
    }

    fn back(&mut self, c: &TxCompletion) {
        let Some(always) = self.out.remove(&c.token.0) else {
            panic!("token {} reported twice or never pushed: {c:?}", c.token.0);
        };
        assert!(
            always || c.status.is_err(),
            "a frame pushed ErrorsOnly reported a success: {c:?}"
        );
    }
}
