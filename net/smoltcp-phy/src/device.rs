//! [`RingDevice`]: smoltcp's [`Device`] over one receive and one transmit queue of a NIC.

use ringfab_hal::{
    MacAddr, Nic, Queue, QueueFault, Report, RxBuffer, RxCompletion, RxConfig, RxError, RxQueue,
    Token, TxCompletion, TxConfig, TxQueue, TxSegment,
};
use smoltcp::phy::{self, ChecksumCapabilities, Device, DeviceCapabilities, Medium};
use smoltcp::time::{Duration, Instant};

use crate::slots::Slots;
use crate::{Error, Result};

/// The shortest frame limit [`RingDevice::open`] accepts: the 14-byte Ethernet header and the
/// 576-byte datagram every IPv4 host must be able to receive (RFC 791, "Total Length";
/// RFC 1122 §3.3.2).
pub const MIN_FRAME_LEN: usize = 14 + 576;

/// Slots are a multiple of this many bytes apart, so that every buffer starts on a cache line
/// (and on any alignment a descriptor's buffer address needs).
const SLOT_ALIGN: usize = 128;

/// Completions a transmit reclaim asks the queue for at a time.
const RECLAIM_BATCH: usize = 16;

/// How to open a [`RingDevice`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub struct Config {
    /// The receive queue to open.
    pub rx_queue: u16,
    /// The transmit queue to open.
    pub tx_queue: u16,
    /// The longest frame to send and accept, in bytes, **including** the 14-byte Ethernet
    /// header and excluding the FCS (smoltcp's `max_transmission_unit` for Ethernet, the hal's
    /// `max_frame_len`). Cut to what the NIC and the receive buffers take. 1514 (an IP MTU of
    /// 1500) by default: what a peer on an ordinary Ethernet expects.
    pub max_frame_len: usize,
    /// Size of each receive buffer, in bytes; the driver rounds it up to its granularity.
    pub buf_len: u32,
    /// Frames in flight with no transmit completion for this long (in the time smoltcp
    /// passes): the transmit queue is flushed, as a driver's transmit watchdog resets a hung
    /// queue. What the device finished completes, the rest comes back unsent (`tx_failed`),
    /// and TCP retransmits it. It frees an in-order ring stuck behind a write-back the device
    /// never wrote (the hal's flush proves what was sent). `None`: never. 1 s by default: a
    /// NIC completes a frame in microseconds.
    pub tx_timeout: Option<Duration>,
    /// A receive queue that completed nothing for this long is flushed and its buffers
    /// posted again: what the device finished is delivered, and an in-order ring stuck
    /// behind a write-back the device never wrote moves again. A stuck ring cannot be told
    /// from a quiet link, so this costs a queue stop and restart per period of silence (a
    /// frame arriving in that moment is missed); `None` (the default) never flushes.
    pub rx_idle_flush: Option<Duration>,
}

impl Default for Config {
    /// Queue 0 both ways, 1514-byte frames, 2048-byte buffers, a transmit timeout of 1 s, no
    /// idle receive flush.
    fn default() -> Self {
        Config {
            rx_queue: 0,
            tx_queue: 0,
            max_frame_len: 1514,
            buf_len: 2048,
            tx_timeout: Some(Duration::from_secs(1)),
            rx_idle_flush: None,
        }
    }
}

/// What a [`RingDevice`] has done and dropped since it was opened. Every frame the receive
/// queue completes is counted once, in `rx_frames` or in one drop reason; every transmit
/// token once, in `tx_frames` or a failure.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
#[non_exhaustive]
pub struct Counters {
    /// Frames handed to smoltcp.
    pub rx_frames: u64,
    /// Of those, frames the NIC marked with a partial TCP/UDP checksum
    /// ([`RxChecksum::l4_partial`](ringfab_hal::RxChecksum::l4_partial): virtio-net's
    /// `NEEDS_CSUM`, a sender on the same host) whose checksum was completed before smoltcp
    /// checked it. A frame marked so that could not be completed (not IPv4 TCP/UDP, or
    /// malformed) is handed over as it is and not counted here.
    pub rx_checksums_completed: u64,
    /// Bytes of those frames (Ethernet header included).
    pub rx_bytes: u64,
    /// Frames the NIC reported bad (CRC, symbol, length errors: `RxError::Frame`), dropped.
    pub rx_bad_frames: u64,
    /// Frames longer than a receive buffer (`RxError::Truncated`), dropped; the buffers of
    /// their further pieces are posted again without a count of their own.
    pub rx_too_long: u64,
    /// Completions the driver refused to trust (a length beyond the buffer, a status it
    /// cannot read, a piece without its frame) or a token that names no posted buffer,
    /// dropped.
    pub rx_device_errors: u64,
    /// Receive buffers handed back by a flush (no frame in them).
    pub rx_flushed: u64,
    /// Receive queue flushes after [`Config::rx_idle_flush`] of silence.
    pub rx_idle_flushes: u64,
    /// Frames smoltcp wrote and the device reported sent.
    pub tx_frames: u64,
    /// Bytes of those frames.
    pub tx_bytes: u64,
    /// Frames the device failed (`TxError::DeviceStatus`) or a flush handed back unsent, or
    /// completions naming no frame in flight.
    pub tx_failed: u64,
    /// Frames smoltcp wrote that the queue refused (a fault) or that were longer than a
    /// transmit buffer: not sent.
    pub tx_refused: u64,
    /// Times [`Device::transmit`] (or `receive`, which needs a transmit token too) found no
    /// free transmit buffer or ring slot and returned `None`; smoltcp tries again later.
    pub tx_ring_full: u64,
    /// Transmit queue flushes after [`Config::tx_timeout`] without a completion.
    pub tx_timeouts: u64,
}

/// smoltcp's [`Device`] on receive queue `Config::rx_queue` and transmit queue
/// `Config::tx_queue` of a NIC, with rings of `D` descriptors and `D` buffers each way in
/// DMA memory the NIC allocated.
///
/// * **Receive**: every buffer is posted at open. [`Device::receive`] hands out the next good
///   frame's buffer as an [`RxToken`]; its `consume` gives smoltcp the frame **where the NIC
///   wrote it** (no copy), and the buffer is posted again when the token is consumed or
///   dropped. Completions that carry no good frame are dropped and counted ([`Counters`]),
///   their buffers posted again.
/// * **Transmit**: a [`TxToken`] holds one free transmit buffer; its `consume` gives smoltcp
///   that buffer to write the frame **in place**, then pushes it and rings the doorbell.
///   Buffers come back as the device completes them, reclaimed at the start of every
///   `receive` and `transmit`. No free buffer or ring slot: `transmit` returns `None`, and
///   smoltcp tries again at its next poll.
/// * **Checksums**: smoltcp computes and checks all of them ([`capabilities`](Device::capabilities)
///   says so): its checksum capabilities are the device's, while the NIC's receive verdicts
///   are a frame's (`RxCompletion::checksum`), and frames are sent as smoltcp wrote them. One
///   verdict is acted on: a frame whose TCP/UDP checksum field the NIC marked partial
///   ([`RxChecksum::l4_partial`](ringfab_hal::RxChecksum::l4_partial), virtio-net's
///   `NEEDS_CSUM` from a sender on the same host) has the checksum completed in the buffer
///   before smoltcp sees it, which would otherwise drop the segment as corrupt (docs/ip.md, the
///   smoltcp section's "Checksums").
///
/// * **Stuck queues**: frames in flight with no completion for [`Config::tx_timeout`], or
///   (if asked for) a receive queue silent for [`Config::rx_idle_flush`], get the queue
///   flushed — the hal's flush delivers what the device finished — unless reading the
///   device's state finds a critical fault, which [`fault`](Self::fault) then reports.
///
/// Nothing a device writes can make it panic or reach outside its buffers: the driver checks
/// every completion against its shadow, and this device checks every token it gets back.
pub struct RingDevice<'n, N: Nic + 'n, const D: usize> {
    rx: RxSide<'n, N, D>,
    tx: TxSide<'n, N, D>,
    /// The frame limit smoltcp is told (Ethernet header included).
    max_frame_len: usize,
    /// Receive buffers posted at open: the most frames a burst can land without a poll.
    rx_buffers: usize,
    /// The NIC's station address.
    mac: MacAddr,
}

/// The receive queue, its buffers and what is known of each.
struct RxSide<'n, N: Nic + 'n, const D: usize> {
    /// Declared before `slots`, so dropped first: the driver stops the queue before the
    /// buffers' memory is unmapped and freed.
    queue: N::Rx<'n, D>,
    slots: Slots<N::Dma>,
    /// The length given to the queue with each buffer (the queue's `buf_len`).
    buf_len: u32,
    /// `posted[i]`: slot `i` is on the ring (its token will come back).
    posted: [bool; D],
    /// Slots the ring refused (full, or faulted): posted again at the next chance.
    unposted: heapless::Vec<u16, D>,
    /// A good frame taken off the ring while no transmit token could be made: handed out
    /// first by the next `receive`.
    stashed: Option<Received>,
    /// [`Config::rx_idle_flush`].
    idle_flush: Option<Duration>,
    /// When the queue last completed anything (or the device was first polled).
    last_completion: Option<Instant>,
    counters: Counters,
}

/// A good frame on the receive ring's side: its slot, its length and whether the NIC marked
/// its TCP/UDP checksum field partial ([`RxChecksum::l4_partial`](ringfab_hal::RxChecksum::l4_partial)).
#[derive(Clone, Copy)]
struct Received {
    slot: u16,
    len: u32,
    l4_partial: bool,
}

/// The transmit queue, its buffers and which are free.
struct TxSide<'n, N: Nic + 'n, const D: usize> {
    /// Before `slots`, as in [`RxSide`].
    queue: N::Tx<'n, D>,
    slots: Slots<N::Dma>,
    /// Slots not on the ring and not held by a token.
    free: heapless::Vec<u16, D>,
    /// `in_flight[i]`: slot `i` was pushed and its token has not come back.
    in_flight: [bool; D],
    /// How many `in_flight` are set.
    in_flight_count: usize,
    /// [`Config::tx_timeout`].
    timeout: Option<Duration>,
    /// With frames in flight: when the last completion came, or the first of them was pushed.
    waiting_since: Option<Instant>,
    /// The time smoltcp passed with its last call (a push has none of its own).
    now: Instant,
    counters: Counters,
}

impl<'n, N: Nic + 'n, const D: usize> RingDevice<'n, N, D> {
    /// Opens the queues `config` names on `nic`, allocates `D` receive and `D` transmit
    /// buffers in DMA memory of the NIC's, and posts every receive buffer.
    ///
    /// The NIC's receive filter must pass broadcast frames (ARP requests are broadcast): the
    /// drivers' bring-up default ([`RxMode::default`](ringfab_hal::RxMode)).
    ///
    /// # Errors
    /// [`Error::OpenRx`] / [`Error::OpenTx`] if a queue does not open (its index, `D`, the
    /// buffer size); [`Error::FrameLength`] if the frame limit left is below
    /// [`MIN_FRAME_LEN`]; [`Error::AllocBuffers`] if the DMA memory cannot be had;
    /// [`Error::PostReceive`] if the ring takes no receive buffer at all.
    pub fn open(nic: &'n N, config: &Config) -> Result<Self> {
        let caps = nic.capabilities();
        let rx_queue = nic
            .open_rx::<D>(config.rx_queue, RxConfig::new(config.buf_len))
            .map_err(|error| Error::OpenRx {
                queue: config.rx_queue,
                error,
            })?;
        let tx_queue = nic
            .open_tx::<D>(config.tx_queue, TxConfig::default())
            .map_err(|error| Error::OpenTx {
                queue: config.tx_queue,
                error,
            })?;
        let buf_len = rx_queue.buf_len();
        let max_frame_len = config
            .max_frame_len
            .min(caps.max_frame_len)
            .min(buf_len as usize);
        if max_frame_len < MIN_FRAME_LEN {
            return Err(Error::FrameLength { max_frame_len });
        }
        let rx_stride = (buf_len as usize).next_multiple_of(SLOT_ALIGN);
        let tx_stride = max_frame_len.next_multiple_of(SLOT_ALIGN);
        let alloc = |stride: usize| -> Result<Slots<N::Dma>> {
            let len = stride
                .checked_mul(D)
                .ok_or(Error::AllocBuffers { error: None })?;
            let region = nic
                .alloc_dma(len)
                .map_err(|error| Error::AllocBuffers { error: Some(error) })?;
            Slots::new(region, stride, D).ok_or(Error::AllocBuffers { error: None })
        };
        let rx_slots = alloc(rx_stride)?;
        let tx_slots = alloc(tx_stride)?;

        let mut rx = RxSide {
            queue: rx_queue,
            slots: rx_slots,
            buf_len,
            posted: [false; D],
            unposted: heapless::Vec::new(),
            stashed: None,
            idle_flush: config.rx_idle_flush,
            last_completion: None,
            counters: Counters::default(),
        };
        for slot in 0..D {
            // `D` slots, `D` places: cannot be refused.
            let _ = rx.unposted.push(slot as u16);
        }
        rx.post_unposted();
        let rx_buffers = D - rx.unposted.len();
        if rx_buffers == 0 {
            return Err(Error::PostReceive {
                queue: config.rx_queue,
                fault: Queue::fault(&rx.queue),
            });
        }
        let mut free = heapless::Vec::new();
        for slot in (0..D).rev() {
            let _ = free.push(slot as u16);
        }
        let tx = TxSide {
            queue: tx_queue,
            slots: tx_slots,
            free,
            in_flight: [false; D],
            in_flight_count: 0,
            timeout: config.tx_timeout,
            waiting_since: None,
            now: Instant::ZERO,
            counters: Counters::default(),
        };
        Ok(RingDevice {
            rx,
            tx,
            max_frame_len,
            rx_buffers,
            mac: caps.mac,
        })
    }

    /// The frame limit smoltcp is told: the longest frame sent or accepted, Ethernet header
    /// included.
    pub fn max_frame_len(&self) -> usize {
        self.max_frame_len
    }

    /// The NIC's station address: the Ethernet address to give smoltcp's interface.
    pub fn mac(&self) -> MacAddr {
        self.mac
    }

    /// What the device has done and dropped since it was opened.
    pub fn counters(&self) -> Counters {
        let (r, t) = (&self.rx.counters, &self.tx.counters);
        Counters {
            rx_frames: r.rx_frames,
            rx_checksums_completed: r.rx_checksums_completed,
            rx_bytes: r.rx_bytes,
            rx_bad_frames: r.rx_bad_frames,
            rx_too_long: r.rx_too_long,
            rx_device_errors: r.rx_device_errors,
            rx_flushed: r.rx_flushed,
            rx_idle_flushes: r.rx_idle_flushes,
            tx_frames: t.tx_frames,
            tx_bytes: t.tx_bytes,
            tx_failed: t.tx_failed,
            tx_refused: t.tx_refused,
            tx_ring_full: t.tx_ring_full,
            tx_timeouts: t.tx_timeouts,
        }
    }

    /// The critical fault that stopped either queue, if one did (the queue's own
    /// [`fault`](Queue::fault), a field read). A faulted queue takes no more buffers: frames
    /// stop, smoltcp sees a silent link, and the owner drops this device, recovers the NIC
    /// ([`Nic::recover`]) and opens a new one. smoltcp's interface and sockets do not belong
    /// to the device: they carry on over the new one, and TCP retransmits what was lost.
    pub fn fault(&self) -> Option<QueueFault> {
        self.rx.queue.fault().or(self.tx.queue.fault())
    }

    /// Asks each queue's driver to read the device's state now (a few register reads: the
    /// control path, not for every poll) and returns [`fault`](Self::fault) after the check.
    /// The queues check by themselves after many empty polls with work pending; an owner
    /// that suspects the device sooner (a TCP connection that timed out) calls this.
    pub fn check(&mut self) -> Option<QueueFault> {
        let rx = self.rx.queue.check();
        let tx = self.tx.queue.check();
        rx.or(tx)
    }

    /// The CPU addresses of the receive buffers: every frame an [`RxToken`] hands smoltcp lies
    /// inside (the frame is read where the NIC wrote it).
    pub fn rx_buffer_addrs(&self) -> core::ops::Range<usize> {
        self.rx.slots.cpu_range()
    }

    /// The CPU addresses of the transmit buffers: every buffer a [`TxToken`] hands smoltcp
    /// lies inside (the frame is written where the NIC reads it).
    pub fn tx_buffer_addrs(&self) -> core::ops::Range<usize> {
        self.tx.slots.cpu_range()
    }
}

impl<'n, N: Nic + 'n, const D: usize> RxSide<'n, N, D> {
    /// Posts the slots waiting to be posted, in order, until the ring refuses one; rings the
    /// doorbell if it took any.
    fn post_unposted(&mut self) {
        let mut taken = 0;
        while let Some(&slot) = self.unposted.get(taken) {
            let Some(iova) = self.slots.iova(usize::from(slot)) else {
                taken += 1; // cannot happen: slots are made below `D`
                continue;
            };
            let buf = RxBuffer {
                iova,
                len: self.buf_len,
            };
            match self.queue.push(buf, Token(u64::from(slot))) {
                Ok(()) => {
                    self.posted[usize::from(slot)] = true;
                    taken += 1;
                }
                // Full, or a fault: the slot waits in the list for the next chance.
                Err(_) => break,
            }
        }
        if taken > 0 {
            // Order kept: the oldest refused slot is the first tried next time.
            let rest = self.unposted.len() - taken;
            self.unposted.copy_within(taken.., 0);
            self.unposted.truncate(rest);
            self.queue.doorbell();
        }
    }

    /// Gives `slot` back to the ring (or to the list of slots waiting for it).
    fn repost(&mut self, slot: u16) {
        // `D` places for `D` slots, and a slot is never in the list twice (it leaves the ring
        // once per completion): cannot be refused.
        let _ = self.unposted.push(slot);
        self.post_unposted();
    }

    /// The next good frame on the ring, with every completion before it that carries none
    /// dropped, counted and its buffer posted again. At most `D` completions are looked at per
    /// call, so a device that completes endlessly cannot hold the caller.
    fn next_frame(&mut self, now: Instant) -> Option<Received> {
        if let Some(frame) = self.stashed.take() {
            return Some(frame);
        }
        self.post_unposted();
        let last = *self.last_completion.get_or_insert(now);
        if let Some(idle) = self.idle_flush {
            // The device's state is read first (a few register reads, once per period): a
            // critical fault is the owner's to recover from, and a flush would hide it.
            if now >= last + idle && self.queue.fault().is_none() && self.queue.check().is_none() {
                // Everything comes back through `poll` below: what the device finished as
                // it is, the rest `Flushed`, posted again.
                self.queue.flush();
                self.counters.rx_idle_flushes += 1;
            }
            if now >= last + idle {
                self.last_completion = Some(now);
            }
        }
        for _ in 0..D {
            let mut done = [RxCompletion::EMPTY; 1];
            if self.queue.poll(&mut done) == 0 {
                return None;
            }
            self.last_completion = Some(now);
            let c = done[0];
            // The driver gives back the tokens it was given; checked anyway, so that no
            // completion can name a slot twice or one that is not on the ring.
            let slot = match usize::try_from(c.token.0) {
                Ok(s) if s < D && self.posted[s] => s as u16,
                _ => {
                    self.counters.rx_device_errors += 1;
                    continue;
                }
            };
            self.posted[usize::from(slot)] = false;
            match c.status {
                Ok(()) if c.len > 0 && c.len as usize <= self.slots.stride() => {
                    return Some(Received {
                        slot,
                        len: c.len,
                        l4_partial: c.checksum.l4_partial(),
                    });
                }
                Ok(()) => self.counters.rx_device_errors += 1,
                Err(RxError::Frame { .. }) => self.counters.rx_bad_frames += 1,
                Err(RxError::Truncated { .. }) => self.counters.rx_too_long += 1,
                Err(RxError::Continuation) => {}
                Err(RxError::Flushed) => self.counters.rx_flushed += 1,
                Err(_) => self.counters.rx_device_errors += 1,
            }
            self.repost(slot);
        }
        None
    }
}

impl<'n, N: Nic + 'n, const D: usize> TxSide<'n, N, D> {
    /// Takes back every transmit buffer the device is done with, at time `now`; flushes the
    /// queue first if its frames waited longer than the timeout.
    fn reclaim(&mut self, now: Instant) {
        self.now = now;
        self.take_completions();
        if let (Some(timeout), Some(since)) = (self.timeout, self.waiting_since) {
            if now >= since + timeout {
                // As for the receive queue's idle flush: a critical fault found by reading
                // the device's state is left for the owner (`fault`), not flushed over.
                if self.queue.fault().is_none() && self.queue.check().is_none() {
                    self.queue.flush();
                    self.counters.tx_timeouts += 1;
                    self.take_completions();
                }
                // A flush the device did not acknowledge holds the frames (a fault the
                // owner sees); the next timeout asks again.
                self.waiting_since = Some(now);
            }
        }
    }

    /// Takes every completion the queue has.
    fn take_completions(&mut self) {
        let mut done = [TxCompletion {
            token: Token(0),
            status: Ok(()),
        }; RECLAIM_BATCH];
        loop {
            let n = self.queue.poll(&mut done).min(RECLAIM_BATCH);
            if n > 0 {
                self.waiting_since = Some(self.now);
            }
            for c in &done[..n] {
                let slot = match usize::try_from(c.token.0) {
                    Ok(s) if s < D && self.in_flight[s] => s,
                    _ => {
                        self.counters.tx_failed += 1;
                        continue;
                    }
                };
                self.in_flight[slot] = false;
                self.in_flight_count -= 1;
                match c.status {
                    Ok(()) => self.counters.tx_frames += 1,
                    // `Flushed`, `DeviceStatus`, or a reason a later hal adds.
                    Err(_) => self.counters.tx_failed += 1,
                }
                let _ = self.free.push(slot as u16); // `D` places for `D` slots
            }
            if n < RECLAIM_BATCH {
                if self.in_flight_count == 0 {
                    self.waiting_since = None;
                }
                return;
            }
        }
    }

    /// Whether a frame can be sent now: a free buffer and a free ring slot, on a queue that
    /// has not faulted.
    fn ready(&self) -> bool {
        !self.free.is_empty() && self.queue.free() > 0 && self.queue.fault().is_none()
    }

    /// A free buffer for a token, if one can be sent now; counts the refusal otherwise.
    fn take(&mut self) -> Option<u16> {
        if !self.ready() {
            self.counters.tx_ring_full += 1;
            return None;
        }
        self.free.pop()
    }

    /// Pushes the `len` bytes smoltcp wrote into `slot` and rings the doorbell; a frame the
    /// queue refuses (or one longer than the buffer) is counted and its buffer freed.
    fn send(&mut self, slot: u16, len: usize) {
        let seg = match (self.slots.iova(usize::from(slot)), u16::try_from(len)) {
            (Some(iova), Ok(len)) if len > 0 && usize::from(len) <= self.slots.stride() => {
                TxSegment { iova, len }
            }
            _ => {
                self.counters.tx_refused += 1;
                let _ = self.free.push(slot);
                return;
            }
        };
        match self
            .queue
            .push(&[seg], Token(u64::from(slot)), Report::Always)
        {
            Ok(()) => {
                self.in_flight[usize::from(slot)] = true;
                self.in_flight_count += 1;
                self.waiting_since.get_or_insert(self.now);
                self.counters.tx_bytes += u64::from(seg.len);
                // One doorbell per frame: smoltcp has no end-of-batch call to ring it at, and a
                // frame left behind a silent doorbell would wait for the next poll.
                self.queue.doorbell();
            }
            Err(_) => {
                self.counters.tx_refused += 1;
                let _ = self.free.push(slot);
            }
        }
    }
}

impl<'n, N: Nic + 'n, const D: usize> Device for RingDevice<'n, N, D> {
    type RxToken<'a>
        = RxToken<'a, 'n, N, D>
    where
        Self: 'a;
    type TxToken<'a>
        = TxToken<'a, 'n, N, D>
    where
        Self: 'a;

    fn receive(&mut self, timestamp: Instant) -> Option<(Self::RxToken<'_>, Self::TxToken<'_>)> {
        self.tx.reclaim(timestamp);
        // smoltcp may answer the frame at once (an ARP reply, an ACK): the pair comes with a
        // transmit buffer or not at all, and a frame is taken off the ring only with one.
        if !self.tx.ready() {
            self.tx.counters.tx_ring_full += 1;
            return None;
        }
        let frame = self.rx.next_frame(timestamp)?;
        let Some(tx_slot) = self.tx.take() else {
            self.rx.stashed = Some(frame); // cannot happen: `ready` said yes
            return None;
        };
        self.rx.counters.rx_frames += 1;
        self.rx.counters.rx_bytes += u64::from(frame.len);
        Some((
            RxToken {
                side: &mut self.rx,
                frame,
            },
            TxToken {
                side: &mut self.tx,
                slot: tx_slot,
                consumed: false,
            },
        ))
    }

    fn transmit(&mut self, timestamp: Instant) -> Option<Self::TxToken<'_>> {
        self.tx.reclaim(timestamp);
        let slot = self.tx.take()?;
        Some(TxToken {
            side: &mut self.tx,
            slot,
            consumed: false,
        })
    }

    fn capabilities(&self) -> DeviceCapabilities {
        let mut caps = DeviceCapabilities::default();
        caps.medium = Medium::Ethernet;
        caps.max_transmission_unit = self.max_frame_len;
        // A peer's burst lands in the posted buffers: smoltcp caps its advertised TCP window
        // at this many segments.
        caps.max_burst_size = Some(self.rx_buffers);
        // Computed on transmit and checked on receive by smoltcp, for every protocol: these
        // capabilities hold for every frame, the NIC's receive verdicts are per frame. A frame
        // whose checksum field the NIC marked partial is completed before smoltcp checks it
        // (`RxToken::consume`).
        caps.checksum = ChecksumCapabilities::default();
        caps
    }
}

/// One received frame, in the receive buffer the NIC wrote it to. Consuming it hands smoltcp
/// the frame in place; consumed or dropped, the buffer goes back to the ring.
pub struct RxToken<'a, 'n, N: Nic + 'n, const D: usize> {
    side: &'a mut RxSide<'n, N, D>,
    frame: Received,
}

impl<N: Nic, const D: usize> phy::RxToken for RxToken<'_, '_, N, D> {
    #[allow(
        unsafe_code,
        reason = "the in-place view of a received frame (the `slots` module's rule)"
    )]
    fn consume<R, F>(self, f: F) -> R
    where
        F: FnOnce(&[u8]) -> R,
    {
        let (slot, len) = (usize::from(self.frame.slot), self.frame.len as usize);
        if self.frame.l4_partial {
            // SAFETY: the slot's completion was observed (`next_frame`) and it is posted again
            // only when this token drops: the device neither reads nor writes it while the
            // slice lives (the `slots` module's rule), and the token holds the side by `&mut`,
            // so no other slice of it exists. The slice ends before the one below is formed.
            let frame = unsafe { self.side.slots.bytes_mut(slot, len) };
            // The field holds the pseudo-header's sum only (virtio 1.2 §5.1.6.4.1): completed
            // here, or smoltcp, which sums every segment, drops it as corrupt.
            if crate::partial::complete_l4_checksum(frame) {
                self.side.counters.rx_checksums_completed += 1;
            }
        }
        // SAFETY: the slot's completion was observed (`next_frame`) and it is posted again only
        // when this token drops, after `f` returns: the device has no descriptor naming it
        // while the slice lives (the `slots` module's rule).
        let frame = unsafe { self.side.slots.bytes(slot, len) };
        f(frame)
        // `self` drops here: the buffer is posted again.
    }
}

impl<N: Nic, const D: usize> Drop for RxToken<'_, '_, N, D> {
    fn drop(&mut self) {
        self.side.repost(self.frame.slot);
    }
}

/// One free transmit buffer. Consuming it lets smoltcp write a frame into the buffer in place
/// and sends it; dropped unconsumed, the buffer stays free.
pub struct TxToken<'a, 'n, N: Nic + 'n, const D: usize> {
    side: &'a mut TxSide<'n, N, D>,
    slot: u16,
    consumed: bool,
}

impl<N: Nic, const D: usize> phy::TxToken for TxToken<'_, '_, N, D> {
    #[allow(
        unsafe_code,
        reason = "the in-place view of a transmit buffer (the `slots` module's rule)"
    )]
    fn consume<R, F>(mut self, len: usize, f: F) -> R
    where
        F: FnOnce(&mut [u8]) -> R,
    {
        // SAFETY: the slot is free (never pushed, or its completion came back in `reclaim`),
        // and is pushed only below, after `f` returns: the device neither reads nor writes it
        // while the slice lives.
        let buf = unsafe { self.side.slots.bytes_mut(usize::from(self.slot), len) };
        // smoltcp never asks for more than `max_transmission_unit`, which the buffer holds; a
        // longer request gets the buffer's length, and `send` refuses the frame.
        let result = f(buf);
        self.consumed = true;
        self.side.send(self.slot, len);
        result
    }
}

impl<N: Nic, const D: usize> Drop for TxToken<'_, '_, N, D> {
    fn drop(&mut self) {
        if !self.consumed {
            let _ = self.side.free.push(self.slot); // `D` places for `D` slots
        }
    }
}
