//! The queues both Intel drivers hand out: a ring ([`TxRing`] / [`RxRing`]) with what a hardware
//! queue needs around it — the claimed index, the interrupt, the stall check and the sticky
//! fault, the open, flush and close sequences, and the `ringfab-hal` queue traits — written
//! once, generic over [`QueueHw`]: the registers and rules in which the 82576 and the 82574
//! differ.
//!
//! What differs, and so what a driver implements:
//!
//! | | 82576 (`ringfab-igb`) | 82574 (`ringfab-e1000e`) |
//! |---|---|---|
//! | descriptors ([`QueueHw::Format`]) | advanced transmit and receive | legacy transmit, extended receive |
//! | stop and start ([`QueueHw::restart`], [`QueueHw::shut`]) | RXDCTL/TXDCTL.ENABLE of the queue | TARC.ENABLE (transmit); RCTL.EN, shared by both receive queues, under the driver's lock |
//! | receive buffer size ([`QueueHw::claim`]) | SRRCTL per queue | RCTL, one size for both queues |
//! | interrupt steering ([`QueueHw::wire`]) | 8-bit IVAR entries, 25 vectors | 4-bit entries of one IVAR, 5 vectors |
//! | interrupt arming ([`QueueHw::arm`]) | EIMS/EIMC of the vector, counted per vector | IMS/IMC of the queue's own cause bit |
//! | critical-fault check ([`QueueHw::fault`]) | STATUS, RDLEN/TDLEN, the queue's ENABLE | STATUS, RDLEN/TDLEN, TARC.ENABLE or RCTL.EN |
//!
//! Everything else is here: a queue refuses pushes once it has a fault; it counts empty polls
//! with work pending and after [`STALL_POLLS`](ringfab_hal::queue::STALL_POLLS) of them (then
//! at periods growing to [`STALL_POLLS_MAX`](ringfab_hal::queue::STALL_POLLS_MAX)) asks the
//! device for a fault; a doorbell is one release fence and one tail write; a flush stops
//! the queue and, once the device has acknowledged the stop, takes every token back through
//! the ring and starts the queue again at the ring's tail — a stop not acknowledged records
//! `QueueFault::StopTimeout` and holds the tokens, a start not acknowledged
//! `QueueFault::StartTimeout` (a faulted queue takes its tokens back touching nothing if the
//! fault proves the device quiet, else only after a stop acknowledged now); dropping a queue disarms its interrupt,
//! stops the queue before its ring memory goes back to the platform (without waiting on a
//! removed device), unwires the interrupt and releases the index.
//!
//! The wrapper costs nothing on the data path: [`QueueHw`] is a type parameter, so
//! [`write_tail`](QueueHw::write_tail) and the format's codecs inline into the monomorphised
//! queue as the drivers' own copies did.

use core::sync::atomic::{fence, Ordering};

use ringfab_hal::queue::StallCount;
use ringfab_hal::{
    DmaRegion, DmaRing, Error, Iova, PushError, Queue, QueueFault, Report, Result, RxBuffer,
    RxCompletion, RxConfig, RxQueue, Token, TxChecksum, TxCompletion, TxConfig, TxQueue, TxSegment,
    Wait,
};

use crate::{Format, RxRing, TxRing};

/// Bytes per descriptor: every descriptor of both devices is 16 bytes.
pub const DESC_LEN: usize = 16;

/// Smallest ring: TDLEN/RDLEN must be a multiple of 128 bytes (8 descriptors) on both devices
/// (82576 §8.9.x/§8.12.x, 82574 §10.2.5.x/§10.2.6.x).
pub const MIN_DEPTH: usize = 8;

/// Largest ring a queue opens (the shadow lives inline in the queue value).
pub const MAX_DEPTH: usize = 4096;

/// The device half of one Intel hardware queue: what the 82576 and the 82574 do differently.
/// A value is made by the driver for one queue index and direction before the queue opens;
/// [`IntelQueue`] owns it from then on and call it in this order: [`claim`], then
/// [`alloc`] and (with an interrupt) [`wire`], then [`restart`] with an empty flush; on the
/// data path [`write_tail`], and [`fault`] after many empty polls; at close [`arm`] (`false`),
/// [`shut`], [`unwire`] and [`release`]. A failed open calls [`release`] (and the closing
/// half if it got as far as [`restart`]).
///
/// [`claim`]: Self::claim
/// [`alloc`]: Self::alloc
/// [`wire`]: Self::wire
/// [`restart`]: Self::restart
/// [`write_tail`]: Self::write_tail
/// [`fault`]: Self::fault
/// [`arm`]: Self::arm
/// [`shut`]: Self::shut
/// [`unwire`]: Self::unwire
/// [`release`]: Self::release
pub trait QueueHw: Send {
    /// The device's descriptor layout.
    type Format: Format;
    /// DMA memory the ring lives in (the platform's).
    type Dma: DmaRegion;
    /// The wait handle an interrupt vector delivers to (the platform's).
    type Wait: Wait;

    /// Most descriptors per transmitted frame.
    const MAX_TX_SEGMENTS: usize;
    /// Longest frame, Ethernet header included, FCS excluded.
    const MAX_FRAME_LEN: usize;
    /// A short name of the device, for `Debug`.
    const DEVICE: &'static str;

    /// The queue's index on the device.
    fn index(&self) -> u16;

    /// Claims the queue's index on the device. For a receive queue it also settles the buffer
    /// size: `buf_len` is what the caller asked for, the return value what every buffer must
    /// have from now on (a transmit queue is asked with 0 and its answer is not used).
    ///
    /// # Errors
    /// [`Error::QueueIndex`], [`Error::QueueInUse`], [`Error::BufferSize`]; on error nothing
    /// was claimed.
    fn claim(&mut self, buf_len: u32) -> Result<u32>;

    /// Gives the index back (after a failed open, or as the queue closes).
    fn release(&mut self);

    /// `len` bytes of zeroed DMA memory for the ring.
    ///
    /// # Errors
    /// [`Error::DmaAlloc`].
    fn alloc(&self, len: usize) -> Result<Self::Dma>;

    /// Steers the queue's interrupt to `vector`, or for `None` to the driver's default for
    /// the index; returns the vector and its wait handle.
    ///
    /// # Errors
    /// [`Error::InterruptUnavailable`]; on error nothing was steered.
    fn wire(&mut self, vector: Option<u16>) -> Result<(u16, Self::Wait)>;

    /// Removes the queue's interrupt steering.
    fn unwire(&mut self);

    /// Unmasks (`true`) or masks the queue's interrupt on `vector`; called only on a change.
    fn arm(&self, vector: u16, armed: bool);

    /// Writes the queue's tail register (the wrapper has already fenced).
    fn write_tail(&self, tail: u32);

    /// Stops the hardware queue and waits (bounded) for the device to acknowledge the stop by
    /// its read-back, then calls `flush` with whether it did. Only after an acknowledged stop
    /// may `flush` take tokens back; it returns the index the device is to start from, and the
    /// ring of `len` bytes at `iova` is programmed empty from there and the queue started —
    /// or `None`, and the queue is left stopped and unprogrammed. After a stop that was not
    /// acknowledged nothing is programmed whatever `flush` returns.
    ///
    /// # Errors
    /// [`Error::QueueTimeout`] if the queue does not stop, or (programmed) does not start,
    /// within the driver's bound; `flush` says which.
    fn restart(&self, iova: Iova, len: u32, flush: impl FnOnce(bool) -> Option<u32>) -> Result;

    /// Stops the queue for good before its ring memory goes back to the platform, and clears
    /// its ring length; `removed`: the device is gone, do not wait for it.
    fn shut(&self, removed: bool);

    /// Reads the device's state: `None` if it still holds the queue over a ring of `len` bytes,
    /// else the critical fault that took it.
    fn fault(&self, len: u32) -> Option<QueueFault>;
}

/// Checks a ring depth: a power of two in [`MIN_DEPTH`]..=[`MAX_DEPTH`].
///
/// # Errors
/// [`Error::QueueDepth`] otherwise.
pub fn check_depth<const N: usize>() -> Result {
    if !N.is_power_of_two() || !(MIN_DEPTH..=MAX_DEPTH).contains(&N) {
        return Err(Error::QueueDepth {
            depth: N,
            min: MIN_DEPTH,
            max: MAX_DEPTH,
        });
    }
    Ok(())
}

/// The vector a queue at `index` is steered to: `choice` if the device has it, else for `None`
/// its pair's default `index % vectors` (queue pair `i`, RX `i` and TX `i`, share a vector).
///
/// # Errors
/// [`Error::InterruptUnavailable`] for a chosen vector at or above `vectors`, or when the
/// device has no vectors at all.
pub fn pick_vector(index: u16, choice: Option<u16>, vectors: u16) -> Result<u16> {
    match choice {
        Some(v) if v < vectors => Ok(v),
        Some(v) => Err(Error::InterruptUnavailable { vector: v }),
        None if vectors == 0 => Err(Error::InterruptUnavailable { vector: index }),
        None => Ok(index % vectors),
    }
}

/// What a transmit and a receive queue hold alike around their ring. Dropping it closes the
/// hardware queue — so the queue types declare it *before* their ring, whose memory goes back
/// to the platform only after the device has stopped (fields drop in order).
struct Common<H: QueueHw> {
    hw: H,
    vector: Option<u16>,
    wait: Option<H::Wait>,
    armed: bool,
    /// The critical fault found, sticky.
    fault: Option<QueueFault>,
    /// Empty polls in a row with work pending.
    stalls: StallCount,
}

impl<H: QueueHw> Common<H> {
    /// Claims the queue and gets its ring memory and (if asked: `Some(vector choice)`) its
    /// interrupt; on failure the index is free again. Returns the settled buffer size too.
    fn open<const N: usize>(
        mut hw: H,
        buf_len: u32,
        interrupt: Option<Option<u16>>,
    ) -> Result<(Self, DmaRing<H::Dma, N>, u32)> {
        check_depth::<N>()?;
        let buf_len = hw.claim(buf_len)?;
        match Self::resources::<N>(&mut hw, interrupt) {
            Ok((ring, irq)) => {
                let (vector, wait) = irq.unzip();
                let q = Common {
                    hw,
                    vector,
                    wait,
                    armed: false,
                    fault: None,
                    stalls: StallCount::NONE,
                };
                Ok((q, ring, buf_len))
            }
            Err(e) => {
                hw.release();
                Err(e)
            }
        }
    }

    /// Ring memory and (if asked) the interrupt vector; on failure nothing is wired.
    #[allow(clippy::type_complexity, reason = "a private pair, named once")]
    fn resources<const N: usize>(
        hw: &mut H,
        interrupt: Option<Option<u16>>,
    ) -> Result<(DmaRing<H::Dma, N>, Option<(u16, H::Wait)>)> {
        let len = N * DESC_LEN;
        let dma = hw.alloc(len)?;
        // The rings' base: the 82576's base registers ignore the low 7 bits (128-byte
        // alignment, §8.9.x/§8.12.x); the 82574 asks for 16-byte alignment (§10.2.5.x RDBAL)
        // but counts TDLEN/RDLEN in 128-byte units, so both keep 128-byte alignment.
        if dma.iova().0 & 127 != 0 {
            return Err(Error::DmaAlloc { len });
        }
        // The one check of the ring's size: from here on every descriptor access is in bounds
        // by construction (`DmaRing` reduces indices modulo N).
        let ring = DmaRing::new(dma).map_err(|_| Error::DmaAlloc { len })?;
        let irq = match interrupt {
            Some(vector) => Some(hw.wire(vector)?),
            None => None,
        };
        Ok((ring, irq))
    }

    /// A push is refused once the queue has a fault.
    #[inline]
    fn refuse(&self) -> core::result::Result<(), PushError> {
        match self.fault {
            Some(f) => Err(PushError::Fault(f)),
            None => Ok(()),
        }
    }

    /// Counts a poll: `stuck` if it found nothing while work was pending, and checks the device
    /// when [`StallCount`] says so (after [`STALL_POLLS`](ringfab_hal::queue::STALL_POLLS)
    /// stuck polls in a row, then at longer periods).
    #[inline]
    fn after_poll(&mut self, stuck: bool, len: u32) {
        if self.stalls.poll(stuck) {
            self.check(len);
        }
    }

    /// Reads the device's state and records a fault (once: faults are sticky).
    #[cold]
    fn check(&mut self, len: u32) -> Option<QueueFault> {
        if self.fault.is_none() {
            self.fault = self.hw.fault(len);
        }
        self.fault
    }

    /// Hands the device everything up to `tail`.
    #[inline]
    fn doorbell(&self, tail: u32) {
        // Descriptors must be in memory before the device can see the new tail.
        fence(Ordering::Release);
        self.hw.write_tail(tail);
    }

    fn set_interrupt(&mut self, armed: bool) {
        if let Some(v) = self.vector {
            if armed != self.armed {
                self.armed = armed;
                self.hw.arm(v, armed);
                self.stalls.interrupt_armed(armed);
            }
        }
    }
}

impl<H: QueueHw> Drop for Common<H> {
    fn drop(&mut self) {
        self.set_interrupt(false);
        // Stop the device before the ring memory goes back to the platform (the ring field
        // drops after this one). A removed device does nothing any more and would only make
        // the stop wait out its bound.
        self.hw.shut(self.fault == Some(QueueFault::Removed));
        if self.vector.is_some() {
            self.hw.unwire();
        }
        self.hw.release();
    }
}

/// What [`IntelQueue`] needs of its ring, whichever way the ring's frames go: [`TxRing`] and
/// [`RxRing`] implement it with the inherent methods of the same names.
pub trait Ring: Send {
    /// The ring's DMA memory.
    type Dma: DmaRegion;
    /// Descriptors in the ring.
    const DEPTH: usize;

    /// The DMA memory (for its IOVA).
    fn dma(&self) -> &Self::Dma;
    /// Descriptors free for push.
    fn free(&self) -> usize;
    /// Tokens that have not come back.
    fn pending(&self) -> usize;
    /// The new hardware tail, or `None` if nothing new was pushed.
    fn doorbell(&mut self) -> Option<u32>;
    /// With the hardware queue stopped (acknowledged by the device): takes every token back
    /// (module documentation of the ring types).
    fn flush(&mut self);
    /// The tail as the device numbers it.
    fn hw_tail(&self) -> u32;
}

/// [`Ring`] for a ring type whose inherent methods have the trait's names.
macro_rules! impl_ring {
    ($ring:ident) => {
        impl<F: Format, D: DmaRegion, const N: usize> Ring for $ring<F, D, N> {
            type Dma = D;
            const DEPTH: usize = N;

            fn dma(&self) -> &D {
                $ring::dma(self)
            }
            #[inline(always)]
            fn free(&self) -> usize {
                $ring::free(self)
            }
            #[inline(always)]
            fn pending(&self) -> usize {
                $ring::pending(self)
            }
            #[inline(always)]
            fn doorbell(&mut self) -> Option<u32> {
                $ring::doorbell(self)
            }
            fn flush(&mut self) {
                $ring::flush(self)
            }
            fn hw_tail(&self) -> u32 {
                $ring::hw_tail(self)
            }
        }
    };
}

impl_ring!(TxRing);
impl_ring!(RxRing);

/// An open hardware queue of the device `H` describes over the ring `R`: [`IntelTx`] over a
/// [`TxRing`], [`IntelRx`] over an [`RxRing`] — `ringfab-igb`'s `IgbTx`/`IgbRx` and
/// `ringfab-e1000e`'s `E1000eTx`/`E1000eRx`. Depths are powers of two in
/// [`MIN_DEPTH`]..=[`MAX_DEPTH`].
pub struct IntelQueue<H: QueueHw, R: Ring<Dma = H::Dma>> {
    /// Declared before `ring`: its drop stops the hardware queue before the ring is freed.
    q: Common<H>,
    /// The buffer size the device was programmed with (receive queues).
    buf_len: u32,
    ring: R,
}

/// An open transmit queue of depth `N`.
pub type IntelTx<H, const N: usize> =
    IntelQueue<H, TxRing<<H as QueueHw>::Format, <H as QueueHw>::Dma, N>>;

/// An open receive queue of depth `N`.
pub type IntelRx<H, const N: usize> =
    IntelQueue<H, RxRing<<H as QueueHw>::Format, <H as QueueHw>::Dma, N>>;

impl<H: QueueHw, R: Ring<Dma = H::Dma>> IntelQueue<H, R> {
    /// Ring length in bytes, as programmed in TDLEN/RDLEN.
    const LEN: u32 = (R::DEPTH * DESC_LEN) as u32;

    /// Claims, gets the resources of, and starts the queue `hw` names over the ring `ring`
    /// makes of its memory.
    fn open<const N: usize>(
        hw: H,
        buf_len: u32,
        interrupt: Option<Option<u16>>,
        ring: impl FnOnce(DmaRing<H::Dma, N>) -> R,
    ) -> Result<Self> {
        let (q, memory, buf_len) = Common::open::<N>(hw, buf_len, interrupt)?;
        // From here on the queue's drop stops it and releases the index.
        let queue = IntelQueue {
            q,
            buf_len,
            ring: ring(memory),
        };
        queue
            .q
            .hw
            .restart(queue.ring_iova(), Self::LEN, |stopped| stopped.then_some(0))?;
        Ok(queue)
    }

    /// The device address of the ring (what TDBAL/TDBAH or RDBAL/RDBAH hold).
    pub fn ring_iova(&self) -> Iova {
        self.ring.dma().iova()
    }
}

impl<H: QueueHw, const N: usize> IntelTx<H, N> {
    /// Opens the transmit queue `hw` names: checks the depth, claims the index, gets the ring
    /// memory and (with `config.interrupt`) the interrupt vector, programs the ring and starts
    /// the queue.
    ///
    /// # Errors
    /// [`Error::QueueDepth`], what [`QueueHw::claim`], [`QueueHw::alloc`] and
    /// [`QueueHw::wire`] return, [`Error::DmaAlloc`] for memory not 128-byte aligned, and
    /// [`Error::QueueTimeout`] if the queue does not start. On error the index is free again.
    pub fn open_tx(hw: H, config: TxConfig) -> Result<Self> {
        let irq = config.interrupt.then_some(config.vector);
        Self::open::<N>(hw, 0, irq, TxRing::new)
    }
}

impl<H: QueueHw, const N: usize> IntelRx<H, N> {
    /// Opens the receive queue `hw` names as [`open_tx`](IntelTx::open_tx) does, with the
    /// buffer size `config.buf_len` settled by [`QueueHw::claim`]
    /// ([`buf_len`](RxQueue::buf_len) tells the result).
    ///
    /// # Errors
    /// As [`open_tx`](IntelTx::open_tx); [`Error::BufferSize`] from the claim.
    pub fn open_rx(hw: H, config: RxConfig) -> Result<Self> {
        let irq = config.interrupt.then_some(config.vector);
        Self::open::<N>(hw, config.buf_len, irq, RxRing::new)
    }
}

impl<H: QueueHw, R: Ring<Dma = H::Dma>> core::fmt::Debug for IntelQueue<H, R> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("IntelQueue")
            .field("device", &H::DEVICE)
            .field("index", &self.q.hw.index())
            .field("depth", &R::DEPTH)
            .field("buf_len", &self.buf_len)
            .field("pending", &self.ring.pending())
            .finish_non_exhaustive()
    }
}

impl<H: QueueHw, R: Ring<Dma = H::Dma>> Queue for IntelQueue<H, R> {
    type Wait = H::Wait;

    fn index(&self) -> u16 {
        self.q.hw.index()
    }

    fn depth(&self) -> usize {
        R::DEPTH
    }

    #[inline]
    fn free(&self) -> usize {
        self.ring.free()
    }

    #[inline]
    fn pending(&self) -> usize {
        self.ring.pending()
    }

    #[inline]
    fn doorbell(&mut self) {
        if let Some(tail) = self.ring.doorbell() {
            self.q.doorbell(tail);
        }
    }

    fn fault(&self) -> Option<QueueFault> {
        self.q.fault
    }

    fn check(&mut self) -> Option<QueueFault> {
        self.q.check(Self::LEN)
    }

    /// The hal's "Flush and quiet devices": a token goes back only once the device can no
    /// longer write its buffer — a stop it acknowledged, or a fault that proves it quiet.
    fn flush(&mut self) {
        let fault = self.q.fault;
        if fault.is_some_and(QueueFault::device_quiet) {
            // The device no longer holds the ring: take the tokens back, touch nothing.
            self.ring.flush();
            return;
        }
        let iova = self.ring_iova();
        let ring = &mut self.ring;
        let mut stopped = false;
        let started = self.q.hw.restart(iova, Self::LEN, |acked| {
            stopped = acked;
            if !acked {
                // The device may still be using every descriptor it was given: hold them.
                return None;
            }
            ring.flush();
            // Started again empty even when faulted (a stop acknowledged at last): an empty
            // ring gives the device nothing to write, pushes stay refused, and on the 82574
            // the receiver both receive queues share runs again for the other one.
            Some(ring.hw_tail())
        });
        if self.q.fault.is_none() {
            self.q.fault = match (stopped, started) {
                (false, _) => Some(QueueFault::StopTimeout),
                (true, Err(_)) => Some(QueueFault::StartTimeout),
                (true, Ok(())) => None,
            };
        }
    }

    fn interrupt(&self) -> Option<&H::Wait> {
        self.q.wait.as_ref()
    }

    fn set_interrupt(&mut self, armed: bool) {
        self.q.set_interrupt(armed);
    }

    fn interrupt_vector(&self) -> Option<u16> {
        self.q.vector
    }
}

impl<H: QueueHw, const N: usize> TxQueue for IntelTx<H, N> {
    #[inline]
    fn push(
        &mut self,
        segments: &[TxSegment],
        token: Token,
        report: Report,
    ) -> core::result::Result<(), PushError> {
        self.q.refuse()?;
        self.ring.push(
            segments,
            token,
            report,
            H::MAX_TX_SEGMENTS,
            H::MAX_FRAME_LEN,
        )
    }

    fn push_checksummed(
        &mut self,
        segments: &[TxSegment],
        token: Token,
        report: Report,
        checksum: TxChecksum,
    ) -> core::result::Result<(), PushError> {
        self.q.refuse()?;
        self.ring.push_checksummed(
            segments,
            token,
            report,
            checksum,
            H::MAX_TX_SEGMENTS,
            H::MAX_FRAME_LEN,
        )
    }

    #[inline]
    fn poll(&mut self, out: &mut [TxCompletion]) -> usize {
        let n = self.ring.poll(out);
        self.q
            .after_poll(n == 0 && self.ring.pending() != 0, Self::LEN);
        n
    }
}

impl<H: QueueHw, const N: usize> RxQueue for IntelRx<H, N> {
    fn buf_len(&self) -> u32 {
        self.buf_len
    }

    #[inline]
    fn push(&mut self, buf: RxBuffer, token: Token) -> core::result::Result<(), PushError> {
        self.q.refuse()?;
        self.ring.push(buf, token, self.buf_len)
    }

    #[inline]
    fn poll(&mut self, out: &mut [RxCompletion]) -> usize {
        let n = self.ring.poll(out);
        self.q
            .after_poll(n == 0 && self.ring.pending() != 0, Self::LEN);
        n
    }

    // Always inlined: the closure is core's read loop, whose captures stay in registers only
    // while no call it reaches is left out of line.
    #[inline(always)]
    fn poll_each(&mut self, max: usize, f: &mut impl FnMut(&RxCompletion)) -> usize {
        let n = self.ring.poll_each(max, f);
        self.q
            .after_poll(n == 0 && self.ring.pending() != 0, Self::LEN);
        n
    }

    // Always inlined, as `poll_each`: `fast` is core's read loop.
    #[inline(always)]
    fn poll_each_split(
        &mut self,
        max: usize,
        fast: &mut impl FnMut(&RxCompletion) -> bool,
        slow: &mut impl FnMut(&RxCompletion),
    ) -> usize {
        let n = self.ring.poll_each_split(max, fast, slow);
        self.q
            .after_poll(n == 0 && self.ring.pending() != 0, Self::LEN);
        n
    }

    // Always inlined: the closure is core's read loop, whose captures stay in registers only
    // while no call it reaches is left out of line.
    #[inline(always)]
    fn poll_each_unhashed(&mut self, max: usize, f: &mut impl FnMut(&RxCompletion)) -> usize {
        let n = self.ring.poll_each_unhashed(max, f);
        self.q
            .after_poll(n == 0 && self.ring.pending() != 0, Self::LEN);
        n
    }
}
