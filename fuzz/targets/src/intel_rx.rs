//! `intel_rx_writeback`: the Intel receive ring (`ringfab_ring::RxRing`, which igb and e1000e
//! share) with the real descriptor formats of both drivers ([`Advanced`], [`Extended`]) over the
//! ring crate's fake DMA region, where the fuzzer plays the device: it writes back descriptors
//! (done and end-of-packet bits, lengths, error and undefined bits, RSS words, whole raw
//! words, into any slot, including slots never handed over), takes write-backs back, and
//! interleaves that with the driver's pushes, doorbells, polls (all three poll entry points)
//! and flushes.
//!
//! Input: one byte choosing the format and the ring size (8, 16 or 64), then operations of
//! one byte each followed by their arguments. One operation is the final flush: after it only
//! the device's operations run (a device that goes on writing the ring after the flush); when
//! the bytes run out the ring is flushed if that operation never came, and drained.
//!
//! Checked:
//! * no panic;
//! * every completion's token is one pushed and not yet back: none comes back twice, none
//!   that was never pushed;
//! * the hal's length rules: a completion's length is at most its buffer's; zero for an error
//!   other than `Frame` and `Truncated`;
//! * after the final flush every pushed token has come back (`pending()` is 0), whatever the
//!   device wrote, including after the flush (the flush decides once which buffers were
//!   filled, issue 14 item 10).

use std::collections::HashMap;

use ringfab_e1000e::Extended;
use ringfab_hal::{DmaRegion, DmaRing, Iova, RxBuffer, RxCompletion, RxError, Token};
use ringfab_igb::Advanced;
use ringfab_ring::fake::FakeDma;
use ringfab_ring::{Format, RxRing};

use crate::Bytes;

/// Bytes per descriptor.
const DESC_LEN: usize = 16;
/// Receive write-back status bits both formats share: done (bit 0), end of packet (bit 1).
const DD: u64 = 1 << 0;
const EOP: u64 = 1 << 1;

/// The `intel_rx_writeback` target's body.
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

/// The ring under test and what the test knows it holds.
struct Model<F: Format, const N: usize> {
    ring: RxRing<F, FakeDma, N>,
    /// Tokens pushed and not come back, with their buffer's length.
    out: HashMap<u64, u32>,
    /// Next token to push; pushes so far (the ring's tail, as the device numbers slots).
    next: u64,
    pushed: usize,
    /// The slot the well-behaved part of the device writes next.
    dev: usize,
}

impl<F: Format, const N: usize> Model<F, N> {
    fn new() -> Self {
        let dma = FakeDma::new(N * DESC_LEN, 0x9000);
        let ring = RxRing::new(DmaRing::new(dma).ok().expect("the ring fits its region"));
        Model {
            ring,
            out: HashMap::new(),
            next: 0,
            pushed: 0,
            dev: 0,
        }
    }

    fn write(&self, slot: usize, w0: u64, w1: u64) {
        let at = (slot % N) * DESC_LEN;
        self.ring.dma().write_u64(at, w0);
        self.ring.dma().write_u64(at + 8, w1);
    }

    fn run(mut self, b: &mut Bytes<'_>) {
        let mut ended = false;
        while let Some(op) = b.u8() {
            let op = op % 11;
            if op == 10 && !ended {
                self.ring.flush();
                ended = true;
                continue;
            }
            // After the final flush, only what the device does.
            if ended && !matches!(op, 2 | 3 | 4 | 9) {
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
        assert!(
            self.out.is_empty(),
            "tokens never came back after the final flush: {:?}",
            self.out
        );
        assert_eq!(self.ring.pending(), 0);
    }

    /// One operation; `None` when its arguments ran out.
    fn step(&mut self, op: u8, b: &mut Bytes<'_>) -> Option<()> {
        match op {
            // Push a buffer of 64..=4159 bytes (some below the queue's minimum).
            0 => {
                let len = 64 + u32::from(b.u16()? % 4096);
                let min = if b.bool()? { len } else { len + 1 };
                let token = self.next;
                let buf = RxBuffer {
                    iova: Iova(0x100_0000 + token * 0x1_0000),
                    len,
                };
                if self.ring.push(buf, Token(token), min).is_ok() {
                    self.out.insert(token, len);
                    self.next += 1;
                    self.pushed += 1;
                }
            }
            1 => {
                self.ring.doorbell();
            }
            // The device writes the next slot back: done, end of packet, a length, sometimes
            // other status bits and an RSS word.
            2 => {
                let flags = b.u8()?;
                let len = b.u16()?;
                let mut w1 = u64::from(len) << 32;
                if flags & 1 != 0 {
                    w1 |= DD;
                }
                if flags & 2 != 0 {
                    w1 |= EOP;
                }
                if flags & 4 != 0 {
                    w1 |= u64::from(b.u32()?);
                }
                let w0 = if flags & 8 != 0 { b.u64()? } else { 0 };
                let slot = self.dev;
                self.write(slot, w0, w1);
                self.dev = self.dev.wrapping_add(1);
            }
            // The device writes raw words into any slot.
            3 => {
                let slot = usize::from(b.u8()?);
                let (w0, w1) = (b.u64()?, b.u64()?);
                self.write(slot, w0, w1);
            }
            // The device takes a write-back back: clears a slot's status word.
            4 => {
                let slot = usize::from(b.u8()?);
                let at = (slot % N) * DESC_LEN + 8;
                let w1 = self.ring.dma().read_u64(at);
                let keep = u64::from(b.u32()?) << 32 | u64::from(b.u16()?);
                self.ring.dma().write_u64(at, w1 & keep & !DD);
            }
            5 => {
                let max = usize::from(b.u8()? % 9);
                let mut got = [RxCompletion::EMPTY; 8];
                let n = self.ring.poll(&mut got[..max]);
                assert!(n <= max);
                for c in &got[..n] {
                    self.back(c);
                }
            }
            6 => {
                let max = usize::from(b.u8()? % 9);
                let decline = usize::from(b.u8()? % 9);
                let mut got = Vec::new();
                let mut fast = 0;
                let n = {
                    let got = std::cell::RefCell::new(&mut got);
                    self.ring.poll_each_split(
                        max,
                        &mut |c| {
                            if fast == decline {
                                return false;
                            }
                            fast += 1;
                            got.borrow_mut().push(*c);
                            true
                        },
                        &mut |c| got.borrow_mut().push(*c),
                    )
                };
                assert_eq!(n, got.len(), "poll_each_split's count");
                assert!(n <= max);
                for c in &got {
                    self.back(c);
                }
            }
            7 => {
                let max = usize::from(b.u8()? % 9);
                let hashed = b.bool()?;
                let mut got = Vec::new();
                let n = if hashed {
                    self.ring.poll_each(max, &mut |c| got.push(*c))
                } else {
                    self.ring.poll_each_unhashed(max, &mut |c| got.push(*c))
                };
                assert_eq!(n, got.len(), "poll_each's count");
                assert!(n <= max);
                // Unhashed, `rss` may be `None` (the hal's `poll_each_unhashed`); it need not.
                for c in &got {
                    self.back(c);
                }
            }
            // Flush (the queue stopped and restarted): the device starts again at the tail.
            8 => {
                self.ring.flush();
                self.dev = self.pushed;
            }
            // The device jumps: its next write-back goes elsewhere.
            9 => {
                self.dev = self.dev.wrapping_add(usize::from(b.u8()?));
            }
            _ => unreachable!("operations are taken modulo 11, 10 by the caller"),
        }
        Some(())
    }

    /// Polls until nothing more comes back, checking each completion.
    fn drain(&mut self) {
        let mut got = [RxCompletion::EMPTY; 4];
        // Each poll that returns something returns a token that was out; a bound anyway, so
        // that a ring that kept returning would be a finding, not a hang.
        for _ in 0..=N + 1 {
            let n = self.ring.poll(&mut got);
            if n == 0 {
                return;
            }
            for c in &got[..n] {
                self.back(c);
            }
        }
        panic!("the ring went on returning completions after every token was back");
    }

    fn back(&mut self, c: &RxCompletion) {
        let Some(cap) = self.out.remove(&c.token.0) else {
            panic!(
                "token {} came back twice or was never pushed: {c:?}",
                c.token.0
            );
        };
        assert!(
            c.len <= cap,
            "length {} beyond the buffer's {cap}: {c:?}",
            c.len
        );
        match c.status {
            Ok(()) | Err(RxError::Frame { .. }) | Err(RxError::Truncated { .. }) => {}
            Err(_) => assert_eq!(c.len, 0, "an error completion with a length: {c:?}"),
        }
    }
}
