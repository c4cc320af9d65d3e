//! Fault injection: what can go wrong on the wire and in the device, chosen per test.
//!
//! Every fault is deterministic: explicit counts ("the next N"), periods ("every Kth"), or a
//! seeded PRNG ([`Prng`]); nothing depends on the wall clock or on thread timing.

/// What a corrupted frame looks like to the receiving NIC.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum CorruptMode {
    /// The byte is flipped and the frame check sequence is recomputed: the receiver sees a good
    /// CRC and delivers the corrupted frame with no error (silent corruption, as a bad switch).
    Silent,
    /// The byte is flipped in transit: the receiver's CRC check fails. The emulated 82576
    /// counts CRCERRS and delivers the frame with RXE (CRC error) set in the write-back, as the
    /// silicon does with RCTL.SBP; it does not drop it, so drivers see their error path.
    BadCrc,
}

/// A fault on a [`Wire`](crate::Wire). Counts are frames entering the wire (one per frame sent,
/// whatever the number of receivers), counted from when the fault is injected.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub enum WireFault {
    /// Drop the next `count` frames.
    Drop {
        /// Frames to drop.
        count: usize,
    },
    /// Drop every `k`th frame (the `k`th, `2k`th, ...) for ever. `k` of 0 does nothing.
    DropEvery {
        /// Period.
        k: usize,
    },
    /// Flip (XOR 0xff) the byte at `offset` (modulo the frame length) of the next `count` frames.
    Corrupt {
        /// Frames to corrupt.
        count: usize,
        /// Byte to flip.
        offset: usize,
        /// Whether the receiver notices.
        mode: CorruptMode,
    },
    /// Corrupt every `k`th frame as [`Corrupt`](Self::Corrupt) does, for ever.
    CorruptEvery {
        /// Period.
        k: usize,
        /// Byte to flip.
        offset: usize,
        /// Whether the receiver notices.
        mode: CorruptMode,
    },
    /// Deliver each of the next `count` frames twice.
    Duplicate {
        /// Frames to duplicate.
        count: usize,
    },
    /// Hold each of the next `count` frames back and deliver it right after the frame that
    /// follows it (swapping neighbours). A held frame is also released by
    /// [`Wire::release_held`](crate::Wire::release_held).
    Reorder {
        /// Frames to hold back.
        count: usize,
    },
    /// Per-frame random faults from a seeded PRNG; probabilities in parts per thousand.
    Random {
        /// PRNG seed; the same seed gives the same faults for the same traffic.
        seed: u64,
        /// Probability of dropping a frame.
        drop_per_mille: u16,
        /// Probability of corrupting a frame (byte chosen by the PRNG, at or after byte 14).
        corrupt_per_mille: u16,
        /// Probability of duplicating a frame.
        duplicate_per_mille: u16,
        /// How corruption shows.
        mode: CorruptMode,
    },
}

/// A descriptor ring of the device, to aim a [`DeviceFault`] at.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Ring {
    /// Transmit queue `n`.
    Tx(u16),
    /// Receive queue `n`.
    Rx(u16),
}

/// A fault of the emulated device's DMA engine. `ring: None` means any ring. Counts are
/// descriptor write-backs (one per RX descriptor filled, one per TX descriptor with RS).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub enum DeviceFault {
    /// Never write back the next `count` descriptors (`usize::MAX`: never again). Data still
    /// moves and the head register advances; only DD (and the rest of the write-back) is lost.
    WithholdWriteback {
        /// Which ring, or any.
        ring: Option<Ring>,
        /// Write-backs to withhold.
        count: usize,
    },
    /// Hold the next `count` write-backs and perform them (with their interrupt) only after
    /// `steps` further calls of [`EmuIgb::step`](crate::EmuIgb::step).
    DelayWriteback {
        /// Which ring, or any.
        ring: Option<Ring>,
        /// Write-backs to delay.
        count: usize,
        /// Steps to wait.
        steps: u32,
    },
    /// Write back a packet length `extra` bytes larger than the receive buffer for the next
    /// `count` RX descriptors (the data written stays within the buffer).
    OversizeLength {
        /// Which receive queue, or any.
        queue: Option<u16>,
        /// Descriptors to lie about.
        count: usize,
        /// Bytes beyond the buffer length to report.
        extra: u16,
    },
    /// OR `bits` into the status word of the next `count` write-backs (RX: status/error dword;
    /// TX: the STA dword; virtio-net: RX the first dword of the `virtio_net_hdr`, TX the used
    /// element's length).
    GarbageStatus {
        /// Which ring, or any.
        ring: Option<Ring>,
        /// Write-backs to spoil.
        count: usize,
        /// Bits to set.
        bits: u32,
    },
    /// Virtqueue devices (virtio-net) only: hold each of the next `count` used-ring entries and
    /// write it right after the entry that follows it on the same virtqueue, so buffers
    /// complete out of order, as a virtio device may (virtio 1.2 §2.7.13). A held entry with
    /// no successor is written by the next [`EmuNic::step`](crate::EmuNic::step) or when the
    /// queue is reset.
    CompleteOutOfOrder {
        /// Which ring, or any.
        ring: Option<Ring>,
        /// Used entries to hold back.
        count: usize,
    },
    /// Virtqueue devices only: write `id` instead of the buffer's own descriptor id into the
    /// next `count` used-ring entries (an id out of range, or one the driver did not make
    /// available). The real buffer is never returned: only a queue reset gives it back.
    LieUsedId {
        /// Which ring, or any.
        ring: Option<Ring>,
        /// Used entries to falsify.
        count: usize,
        /// The id to write.
        id: u32,
    },
    /// Ignore the next `count` requests to stop a queue (`usize::MAX`: for ever), neither
    /// obeying nor acknowledging them: the queue keeps running and writing back, and its
    /// stop bit reads as before — the 82576's RXDCTL/TXDCTL.ENABLE, the 82574's TARC.ENABLE
    /// (transmit) or RCTL.EN (the receiver both receive queues share: a fault aimed at either
    /// receive queue refuses it) stay set, virtio-net's `queue_reset` reads 1 and the
    /// virtqueue stays enabled. A device that will not let go of a ring.
    RefuseStop {
        /// Which ring, or any.
        ring: Option<Ring>,
        /// Stop requests to ignore.
        count: usize,
    },
    /// Ignore the next `count` requests to start (enable) a queue: the enable bit (virtio:
    /// `queue_enable`) reads clear and the queue takes nothing. Targets as
    /// [`RefuseStop`](Self::RefuseStop).
    RefuseStart {
        /// Which ring, or any.
        ring: Option<Ring>,
        /// Start requests to ignore.
        count: usize,
    },
    /// Intel models (82576, 82574) only: of the next `count` frames on a receive queue that
    /// take more than one descriptor (longer than its buffer size), write back every piece but
    /// the last (DD without EOP) and never the last — a device that stops in the middle of a
    /// frame. The last piece's data still moves and the head register advances past it, as
    /// with [`WithholdWriteback`](Self::WithholdWriteback).
    CutFrame {
        /// Which receive queue, or any.
        queue: Option<u16>,
        /// Split frames to cut.
        count: usize,
    },
    /// Virtqueue devices only: with the next used-ring entry, advance the used index by `by`
    /// more than the entries written, as if the device had used buffers it was never given.
    JumpUsedIdx {
        /// Which ring, or any.
        ring: Option<Ring>,
        /// Extra steps of the used index.
        by: u16,
    },
    /// Receive write-backs report exactly `len` as the packet length for the next `count`
    /// descriptors (the data written is the frame's, within the buffer): the limits a length
    /// field can hold, 0 and 65535, or any value beyond the buffer. On virtio-net the used
    /// element's `len` is `len` (header included).
    ExactLength {
        /// Which receive queue, or any.
        queue: Option<u16>,
        /// Write-backs to lie in.
        count: usize,
        /// The length to report.
        len: u16,
    },
    /// Intel models (82576, 82574) only: the next `count` descriptor write-backs land `offset`
    /// descriptors further on the ring (modulo its size) instead of on their own descriptor —
    /// a device writing back into the wrong slot. The own descriptor keeps what the driver
    /// wrote (no done bit); a head write-back (TDWBAL) is not moved.
    MisplaceWriteback {
        /// Which ring, or any.
        ring: Option<Ring>,
        /// Write-backs to misplace.
        count: usize,
        /// Descriptors further on.
        offset: u16,
    },
    /// Intel models only: with each of the next `count` descriptor write-backs, a copy of it
    /// (done bit set) is also written on the descriptor at the ring's tail register — the first
    /// descriptor software owns and has not handed over (both datasheets' descriptor rings: the
    /// device owns the descriptors from the head register up to, not including, the tail
    /// register). Done bits on descriptors never posted.
    StrayWriteback {
        /// Which ring, or any.
        ring: Option<Ring>,
        /// Write-backs to copy.
        count: usize,
    },
    /// Virtqueue devices only: each of the next `count` used entries is written twice, the
    /// second time as an extra entry with the same id and length (the used index advancing by
    /// two): an id repeated.
    RepeatUsedId {
        /// Which ring, or any.
        ring: Option<Ring>,
        /// Used entries to repeat.
        count: usize,
    },
    /// Virtqueue devices only: with the next used entry, the used index goes back `by` steps
    /// from where it was instead of one forward, and the device goes on from there (virtio 1.2
    /// §2.7.8: the device only ever increments `idx`).
    RewindUsedIdx {
        /// Which ring, or any.
        ring: Option<Ring>,
        /// Steps back.
        by: u16,
    },
}

/// A critical device event: not a fault of one write-back but a change of the whole device (or
/// of one queue) that a driver must notice and recover from. Injected with
/// [`EmuNic::inject_critical`](crate::EmuNic::inject_critical); it acts at once.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub enum CriticalFault {
    /// Surprise removal: from now on every register and configuration read returns all-ones
    /// (what a PCIe read of a function that is gone completes with), writes are ignored, and
    /// the device does no DMA, raises no interrupt and takes no frame from the wire. For ever.
    SurpriseRemoval,
    /// The device resets itself (as a function-level or hot reset behind the driver's back):
    /// every register back at its power-on value, queues disabled, rings forgotten, in-flight
    /// DMA lost. For virtio-net, `device_status` reads 0 (virtio 1.2 §2.1).
    Reset,
    /// virtio-net only: the device enters `DEVICE_NEEDS_RESET` (virtio 1.2 §2.1.2), stops
    /// processing its queues, and sends a configuration-change interrupt. Ignored by the other
    /// models.
    NeedsReset,
    /// The device disables one queue on its own: on the 82576 RXDCTL/TXDCTL.ENABLE clears; on
    /// the 82574 a transmit queue's TARC.ENABLE clears, and for a receive queue RCTL.EN (the
    /// receiver both queues share); on virtio-net the virtqueue is reset (virtio 1.2 §2.6.1).
    DisableQueue(Ring),
}

/// A small deterministic PRNG (SplitMix64): reproducible from its seed on every platform.
#[derive(Clone, Debug)]
pub struct Prng(u64);

impl Prng {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Prng {
        Prng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// True with probability `per_mille`/1000.
    pub fn chance(&mut self, per_mille: u16) -> bool {
        self.next_u64() % 1000 < u64::from(per_mille)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prng_is_reproducible_from_its_seed() {
        let a: Vec<u64> = (0..4)
            .scan(Prng::new(7), |p, _| Some(p.next_u64()))
            .collect();
        let b: Vec<u64> = (0..4)
            .scan(Prng::new(7), |p, _| Some(p.next_u64()))
            .collect();
        assert_eq!(a, b);
        assert_ne!(a[0], a[1]);
    }

    #[test]
    fn chance_extremes_are_never_and_always() {
        let mut p = Prng::new(1);
        assert!((0..100).all(|_| !p.chance(0)));
        assert!((0..100).all(|_| p.chance(1000)));
    }
}
