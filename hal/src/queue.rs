//! The device side, data path: push frames and buffers with tokens, ring once, poll completions.
//!
//! The cycle, for one batch:
//!
//! 1. [`push`](TxQueue::push) any number of frames (or [buffers](RxQueue::push)), each with a
//!    [`Token`] chosen by the caller. Push writes descriptors into the ring and the driver's private
//!    shadow; no register is touched. A full ring refuses here, never later.
//! 2. [`doorbell`](Queue::doorbell): one release fence and one tail write hand the whole batch to
//!    the device. Doorbell with nothing new pushed does nothing.
//! 3. [`poll`](TxQueue::poll) returns completed tokens with their status, oldest first when the
//!    device completes in order.
//!
//! Every token pushed comes back from `poll` exactly once — completed, failed, or
//! [`Flushed`](TxError::Flushed) after [`flush`](Queue::flush) — with one exception stated by
//! [`Report::ErrorsOnly`], or is held by a queue whose [`fault`](Queue::fault) says the
//! device did not acknowledge a stop ("Flush and quiet devices"). Drivers check everything the device writes against their shadow: a
//! length beyond the buffer, a status with undefined bits, or a completion for a descriptor the
//! device does not own become an error status on that token.
//!
//! # Critical faults
//!
//! A device can also stop honouring a ring altogether: it is removed (registers read
//! all-ones), it resets itself, it disables the queue, or (virtio) it asks for a reset. The
//! data path does not read a register per frame to find out. Instead, `poll` counts the calls
//! in a row that found nothing while work was pending — a ring that looks stuck — and after
//! [`STALL_POLLS`] of them reads the device's state once (a few register reads), then again
//! after periods that double up to [`STALL_POLLS_MAX`] ([`StallCount`]); a driver may also
//! check on a status interrupt. A fault found is recorded and sticky:
//! [`fault`](Queue::fault) returns it (a field read, cheap enough to ask after every short
//! poll), [`push`](TxQueue::push) refuses with [`PushError::Fault`], and
//! [`flush`](Queue::flush) hands tokens back as "Flush and quiet devices" says.
//! [`check`](Queue::check) runs the same check on demand. The queue is then closed, the
//! device recovered ([`Nic::recover`](crate::Nic::recover)), and a queue opened again.
//!
//! # Flush and quiet devices
//!
//! A buffer goes back to its owner only when the device can no longer write it. A token
//! comes back from `poll` either with the device's own completion (it wrote the buffer's
//! write-back: it is done with it) or as `Flushed` — and `Flushed` only once the device is
//! provably quiet on that queue:
//!
//! * **a stop the device acknowledged**: [`flush`](Queue::flush) asks the device to stop
//!   the queue and reads the stop back (82576 RXDCTL/TXDCTL.ENABLE, 82574 TARC.ENABLE or
//!   RCTL.EN reading clear; virtio `queue_reset` reading 0, virtio 1.2 §4.1.4.3.2) within a
//!   bounded number of register reads; or
//! * **a fault that proves it** ([`QueueFault::device_quiet`]): the device is gone, was
//!   reset, or stopped the queue itself. A flush then touches no register.
//!
//! If the stop is not acknowledged, the queue records the sticky fault
//! [`QueueFault::StopTimeout`] and **holds** every token the device has not completed:
//! [`pending`](Queue::pending) still counts them, `poll` goes on returning the device's own
//! completions of them and nothing else. Every later `flush` asks for the stop again; the
//! first one acknowledged hands the held tokens back as `Flushed` (the queue stays faulted:
//! a driver may program the emptied ring again, which gives the device nothing to write, but
//! pushes stay refused). A queue dropped while it holds tokens forgets them: its owner must
//! then keep the buffers, or their IOMMU mapping, away from reuse until the device is reset
//! or the mapping removed. After an acknowledged stop the queue is restarted; if the device
//! does not acknowledge the restart, the queue records [`QueueFault::StartTimeout`] (its
//! tokens had all come back) rather than take pushes that would never complete.
//!
//! So every token comes back exactly once, or is held while [`fault`](Queue::fault) says
//! why.

use crate::{Iova, PushError, QueueFault, Wait};

/// Calls of `poll` in a row that find nothing while work is pending, after which a driver
/// first checks the device's state ("Critical faults" above): a fault that comes soon after a
/// queue opens is found within this many empty polls.
pub const STALL_POLLS: u32 = 256;

/// The most empty polls in a row between two checks of the device. Each check doubles the
/// period, from [`STALL_POLLS`] to this: a receive queue with buffers posted counts every
/// empty poll as stuck, so an idle or bursty receive loop would otherwise read the device
/// (three registers on igb and e1000e) every 256 empty polls for as long as it runs — on a
/// busy-polling core an empty poll costs a few nanoseconds and a register read about a
/// microsecond over PCIe, so that was most of an idle loop's time, and under QEMU each read
/// is a call into the device model under its big lock, which the frame's sender needs too
/// (docs/perf.md, "Register accesses per frame"). At this period a check costs an idle loop
/// a few percent, and a fault is still found within 16 384 empty polls: well under a
/// millisecond on hardware.
pub const STALL_POLLS_MAX: u32 = STALL_POLLS << 6;

/// How many buffers a busy receive ring of `depth` descriptors takes back between doorbells:
/// a quarter of the ring, at least 32 (DPDK's default `rx_free_thresh`). A doorbell is a
/// register write — on a virtual NIC a trap into the device model; on QEMU's igb and e1000e
/// one that waits for the lock the frames' sender holds while the models move them — and a
/// device that still holds three quarters of the ring does not run short (docs/perf.md, "The
/// receive doorbell's batch"). Core's endpoints ring their receive queues this way.
///
/// ```
/// use ringfab_hal::queue::rx_doorbell_batch;
/// assert_eq!(rx_doorbell_batch(512), 128);
/// assert_eq!(rx_doorbell_batch(256), 64);
/// assert_eq!(rx_doorbell_batch(128), 32);
/// assert_eq!(rx_doorbell_batch(64), 32);
/// ```
pub const fn rx_doorbell_batch(depth: usize) -> usize {
    if depth / 4 > 32 {
        depth / 4
    } else {
        32
    }
}

/// Counts a queue's empty polls with work pending and says when a check of the device is due:
/// after [`STALL_POLLS`] of them in a row, then after twice as many as the last time, up to
/// [`STALL_POLLS_MAX`] — the one piece of the stall check every driver shares. A poll that
/// finds work starts the count again but keeps the period: a queue whose device was found
/// healthy many times does not go back to checking often because frames came.
///
/// Except while the queue's interrupt is armed ([`interrupt_armed`](Self::interrupt_armed)):
/// then a waiter is blocked on it and polls once per wake-up — ten milliseconds apart when
/// nothing comes (core's `WAIT_QUANTUM`) — so the period stays [`STALL_POLLS`] (2.56 s of
/// such wake-ups), as a device that died under a blocked waiter raises no interrupt and would
/// otherwise be found minutes later.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StallCount {
    /// Empty polls in a row with work pending.
    stuck: u32,
    /// Empty polls in a row that call for the next check.
    period: u32,
    /// The interrupt is armed: the period does not grow.
    armed: bool,
}

impl StallCount {
    /// No empty poll yet; the first check after [`STALL_POLLS`].
    pub const NONE: StallCount = StallCount {
        stuck: 0,
        period: STALL_POLLS,
        armed: false,
    };

    /// Counts one poll (`stuck`: it found nothing while work was pending); `true` when the
    /// driver should now check the device (the count then starts again, and the next check
    /// waits twice as long, up to [`STALL_POLLS_MAX`], unless the interrupt is armed).
    #[inline]
    pub fn poll(&mut self, stuck: bool) -> bool {
        if !stuck {
            self.stuck = 0;
            return false;
        }
        self.stuck += 1;
        if self.stuck >= self.period {
            self.stuck = 0;
            if !self.armed {
                self.period = (self.period * 2).min(STALL_POLLS_MAX);
            }
            return true;
        }
        false
    }

    /// The driver armed (`true`) or disarmed the queue's interrupt. Arming goes back to checks
    /// every [`STALL_POLLS`] stuck polls for as long as it stays armed; disarming lets the
    /// period grow again from there.
    #[inline]
    pub fn interrupt_armed(&mut self, armed: bool) {
        self.armed = armed;
        if armed {
            self.period = STALL_POLLS;
        }
    }
}

impl Default for StallCount {
    fn default() -> StallCount {
        StallCount::NONE
    }
}

/// The caller's name for one pushed frame or buffer, returned with its completion.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default)]
pub struct Token(pub u64);

/// Whether a transmitted frame's completion is reported.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Report {
    /// Report the token from `poll` whether it succeeded or failed. The driver asks the device for
    /// a write-back (on igb, the RS bit) on this frame.
    Always,
    /// Report the token only if it fails (including [`TxError::Flushed`]). The driver asks for no
    /// write-back for this frame, except when it needs one to reclaim descriptors; a frame that
    /// succeeds is reclaimed silently. This is selective completion done in hardware.
    ErrorsOnly,
}

/// One piece of a frame to transmit: `len` bytes the device reads at `iova`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct TxSegment {
    /// Device address of the first byte.
    pub iova: Iova,
    /// Length in bytes (at least 1).
    pub len: u16,
}

/// A checksum the device computes and inserts as it sends a frame — the partial-checksum model
/// both the Intel context descriptors (82576 MACLEN/IPLEN and L4T, 82574 TUCSS/TUCSO, with
/// POPTS.TXSM in the data descriptors) and virtio-net's `VIRTIO_NET_HDR_F_NEEDS_CSUM`
/// (`csum_start`, `csum_offset`; virtio 1.2 §5.1.6.2) implement: the device sums the frame
/// from byte [`start`](Self::start) to its end in one's complement, **including** the 16-bit
/// field at `start + offset`, and stores the complement of the sum there (0 sent as 0xFFFF,
/// which means the same in one's complement and is UDP's "checksum present").
///
/// So the caller writes the sum of the pseudo-header (not complemented) into the field before
/// pushing, and the device adds the header and payload to it: for UDP over IPv4, `start` is
/// where the UDP header begins, `offset` is [`UDP`](Self::UDP), and the field holds the folded
/// sum of the source and destination addresses, the protocol and the UDP length.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct TxChecksum {
    /// Frame byte (from the Ethernet header's first) where the summed bytes begin.
    pub start: u16,
    /// Where the 16-bit checksum field is, counted from `start`.
    pub offset: u16,
}

impl TxChecksum {
    /// The checksum field's offset in a UDP header (RFC 768).
    pub const UDP: u16 = 6;
    /// The checksum field's offset in a TCP header (RFC 9293).
    pub const TCP: u16 = 16;
    /// How far into the frame the checksum field may end on every NIC that offers the
    /// offload: the 82574 counts the start and the field's place in a byte each (TUCSS,
    /// TUCSO).
    pub const MAX_FIELD_END: usize = 256;

    /// The frame byte just past the checksum field.
    #[inline]
    pub const fn field_end(self) -> usize {
        self.start as usize + self.offset as usize + 2
    }
}

/// A buffer for the device to receive one frame into.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct RxBuffer {
    /// Device address of the first byte.
    pub iova: Iova,
    /// Length in bytes; at least the queue's [`buf_len`](RxQueue::buf_len).
    pub len: u32,
}

/// Why a transmit failed.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub enum TxError {
    /// The queue was flushed (a stop the device acknowledged, or a fault that proves it
    /// quiet) before the device reported the frame sent: the device no longer reads it.
    Flushed,
    /// The device wrote a completion the driver cannot accept (undefined status bits, or a
    /// completion for a descriptor the device was not given); `raw` is what it wrote.
    DeviceStatus {
        /// The raw status word the device wrote.
        raw: u64,
    },
}

/// Why a receive failed.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub enum RxError {
    /// The device reported the frame bad (CRC, symbol, length or checksum errors). `bits` are the
    /// device's error bits; [`Nic::rx_error_name`](crate::Nic::rx_error_name) names them.
    Frame {
        /// The device's error bits as it wrote them.
        bits: u32,
    },
    /// The device reported writing `reported` bytes into a buffer of `capacity`: it lies, or
    /// wrote past the buffer; the data is not trusted.
    Length {
        /// Length the device wrote back.
        reported: u32,
        /// The buffer's length.
        capacity: u32,
    },
    /// A piece of a frame whose end the driver could not find: the device left a frame split
    /// across buffers without its end-of-packet (a device that lies; a frame that did not fit
    /// one buffer and ended properly is [`Truncated`](Self::Truncated) and
    /// [`Continuation`](Self::Continuation)s). The data is not trusted.
    Fragment,
    /// The frame was longer than this buffer: the buffer holds its first `len` bytes (the
    /// completion's [`len`](RxCompletion::len)), and the device discarded the rest, or wrote
    /// it into buffers that come back as [`Continuation`](Self::Continuation)s after this one.
    /// `frame_len` is the whole frame's length, as the device reported it (checked to be more
    /// than `len`). The bytes in the buffer are good: a caller reads its header from them and
    /// reports the truncation (`FI_ETRUNC`, `olen` = what did not fit) or drops the frame.
    Truncated {
        /// The whole frame's length in bytes (Ethernet header included, FCS stripped).
        frame_len: u32,
    },
    /// The buffer holds a later piece of the frame reported [`Truncated`](Self::Truncated) just
    /// before it: it carries nothing for the caller, and was not consumed by a frame of its
    /// own — the caller may post it again as if it had never been filled. `len` is 0.
    Continuation,
    /// The device wrote a status the driver cannot interpret; `raw` is what it wrote.
    DeviceStatus {
        /// The raw status word the device wrote.
        raw: u64,
    },
    /// The queue was flushed (a stop the device acknowledged, or a fault that proves it
    /// quiet) before the device filled this buffer: the device can no longer write it.
    Flushed,
}

/// The header combination an RSS hash was computed over.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub enum RssHashKind {
    /// IPv4 source and destination addresses.
    Ipv4,
    /// IPv4 addresses and UDP ports.
    Ipv4Udp,
    /// IPv4 addresses and TCP ports.
    Ipv4Tcp,
    /// A kind this crate does not name; the device's own code.
    Other(u8),
}

/// The RSS hash the device computed for a received frame.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct RssInfo {
    /// The 32-bit Toeplitz hash.
    pub hash: u32,
    /// What it covers.
    pub kind: RssHashKind,
}

/// What the device verified of a received frame's checksums
/// ([`Offloads::rx_ipv4_checksum`](crate::Offloads), `rx_l4_checksum`): only a checksum the
/// device checked **and found right** is marked. Anything else — not checked, not an IPv4 or
/// UDP/TCP frame, or found wrong — is unmarked, and whoever needs it checked checks it in
/// software (which also tells a wrong checksum from a missing one). A device that marks a wrong
/// checksum right cannot be caught here: that is a device lying about data it owns
/// (docs/reliability.md, "Where the promise stops").
///
/// One more mark says the TCP/UDP checksum **field** is not filled in
/// ([`l4_partial`](Self::l4_partial)): virtio-net's `VIRTIO_NET_HDR_F_NEEDS_CSUM` on a
/// received frame (virtio 1.2 §5.1.6.4), a frame from a sender on the same host that left its
/// checksum for the NIC to complete. It never crossed a wire, so its data is trusted and
/// [`l4_good`](Self::l4_good) says so too; but the field holds only the pseudo-header's sum,
/// so whoever checks the checksum from the frame's bytes (a TCP/IP stack that sums every
/// segment) must complete it first — the sum from the TCP/UDP header to the end of the IP
/// payload, complemented, into the field — or find it wrong.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct RxChecksum(u8);

impl RxChecksum {
    /// Nothing verified.
    pub const NONE: RxChecksum = RxChecksum(0);
    // The bits are placed where the devices report them, so that a driver's translation is a
    // mask: `L4_PARTIAL` and `L4` are virtio's `NEEDS_CSUM` and `DATA_VALID`, `L4` and `IPV4`
    // the Intel write-back's `L4I`/`TCPCS` and `IPCS` shifted by four. A partial checksum is a
    // trusted one, so `l4_good` tests both bits.
    const L4_PARTIAL: u8 = 1;
    const L4: u8 = 2;
    const IPV4: u8 = 4;

    /// The marks of a frame whose IPv4 header checksum (`ipv4`) and TCP/UDP checksum (`l4`) the
    /// device found right.
    #[inline]
    pub const fn verified(ipv4: bool, l4: bool) -> Self {
        RxChecksum(((ipv4 as u8) * Self::IPV4) | ((l4 as u8) * Self::L4))
    }

    /// The marks of a frame whose TCP/UDP checksum field is partial (`partial`: it holds the
    /// pseudo-header's sum only, virtio 1.2 §5.1.6.4 "the device MUST set the packet checksum
    /// stored in the receive buffer to the TCP/UDP pseudo header"), added to `self`'s.
    /// A partial frame's data is trusted: [`l4_good`](Self::l4_good) reports it too.
    ///
    /// ```
    /// use ringfab_hal::RxChecksum;
    /// // virtio-net's NEEDS_CSUM: trusted, the field not filled in, no IPv4 header verdict.
    /// let needs_csum = RxChecksum::verified(false, true).with_l4_partial(true);
    /// assert!(needs_csum.l4_good() && needs_csum.l4_partial() && !needs_csum.ipv4_good());
    /// // A checksum a device checked and found right is whole.
    /// assert!(!RxChecksum::verified(true, true).with_l4_partial(false).l4_partial());
    /// ```
    #[inline]
    pub const fn with_l4_partial(self, partial: bool) -> Self {
        RxChecksum(self.0 | ((partial as u8) * Self::L4_PARTIAL))
    }

    /// The device found the IPv4 header checksum right.
    #[inline]
    pub const fn ipv4_good(self) -> bool {
        self.0 & Self::IPV4 != 0
    }

    /// The device found the TCP or UDP checksum right (a UDP datagram without a checksum, 0,
    /// is not marked: there was nothing to verify).
    #[inline]
    pub const fn l4_good(self) -> bool {
        self.0 & (Self::L4 | Self::L4_PARTIAL) != 0
    }

    /// The TCP/UDP checksum field holds only the pseudo-header's sum (a partial checksum a
    /// sender on the same host left; virtio-net's `NEEDS_CSUM`): the data is trusted
    /// ([`l4_good`](Self::l4_good) says so as well), the field is not the checksum. A consumer
    /// that never reads the field needs nothing more; one that sums the segment itself
    /// completes the field first (`ringfab-smoltcp` does, before smoltcp checks it).
    #[inline]
    pub const fn l4_partial(self) -> bool {
        self.0 & Self::L4_PARTIAL != 0
    }
}

/// A transmit token back from the device.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct TxCompletion {
    /// The token given to [`TxQueue::push`].
    pub token: Token,
    /// `Ok` once the device has read the whole frame and reported it sent.
    pub status: Result<(), TxError>,
}

/// A receive token back from the device.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct RxCompletion {
    /// The token given to [`RxQueue::push`].
    pub token: Token,
    /// Bytes of frame in the buffer (Ethernet header included, FCS stripped); checked by the driver
    /// to be at most the buffer's length. Zero when `status` is an error other than `Frame` or
    /// [`Truncated`](RxError::Truncated).
    pub len: u32,
    /// `Ok` for a good frame.
    pub status: Result<(), RxError>,
    /// The RSS hash, when the device computed one.
    pub rss: Option<RssInfo>,
    /// The checksums the device verified (none unless it offers
    /// [`Offloads::rx_ipv4_checksum`](crate::Offloads) or `rx_l4_checksum`).
    pub checksum: RxChecksum,
}

impl RxCompletion {
    /// A placeholder (token 0, no frame) for arrays a driver's `poll` fills.
    pub const EMPTY: RxCompletion = RxCompletion {
        token: Token(0),
        len: 0,
        status: Ok(()),
        rss: None,
        checksum: RxChecksum::NONE,
    };
}

/// Completions the default [`RxQueue::poll_each`] asks `poll` for at a time.
const POLL_EACH_CHUNK: usize = 16;

/// What every queue has, whichever way its frames go: its place on the device, its ring's
/// occupancy, the doorbell, the critical-fault state, the flush, and its interrupt.
///
/// [`TxQueue`] and [`RxQueue`] add what differs — what a push takes and what a poll gives
/// back. A caller that only manages queues (checks them for faults, flushes them, arms their
/// interrupts) can be generic over `Queue` and serve both directions.
pub trait Queue: Send {
    /// The wait handle this queue's interrupt delivers to.
    type Wait: Wait;

    /// The queue's index on the device.
    fn index(&self) -> u16;

    /// Ring depth in descriptors.
    fn depth(&self) -> usize;

    /// Descriptors free for a push now (a transmitted frame takes one per segment, plus one on
    /// the Intel devices when it asks for a checksum, [`TxQueue::push_checksummed`]; a receive
    /// buffer one).
    fn free(&self) -> usize;

    /// Frames or buffers pushed whose token has not yet come back from `poll` (transmitted
    /// frames pushed with [`Report::ErrorsOnly`] count until the driver reclaims them).
    fn pending(&self) -> usize;

    /// Hands everything pushed since the last doorbell to the device: one release fence, one
    /// register write. Does nothing if nothing was pushed.
    fn doorbell(&mut self);

    /// The critical fault that stopped the queue, once the driver found one; `None` while the
    /// queue is healthy (or the driver does not detect faults: the default). Reads a field.
    fn fault(&self) -> Option<QueueFault> {
        None
    }

    /// Reads the device's state now (control path: a few register reads) and records a fault
    /// if there is one; returns [`fault`](Self::fault) after the check.
    fn check(&mut self) -> Option<QueueFault> {
        self.fault()
    }

    /// Stops the hardware queue and, once the device has acknowledged the stop, takes back
    /// every descriptor: what the device finished (frames reported sent, frames received)
    /// completes normally, everything else with [`TxError::Flushed`] / [`RxError::Flushed`],
    /// through later calls to `poll`, each exactly once whatever the device writes to the
    /// ring afterwards. The queue is then restarted empty and accepts pushes again. Bounded
    /// in time: the driver waits a bounded number of register reads for the stop and for the
    /// start.
    ///
    /// A stop not acknowledged records [`QueueFault::StopTimeout`] and hands nothing back
    /// that the device may still write: those tokens are held (still
    /// [`pending`](Self::pending)) until a later `flush` sees the stop acknowledged. A start
    /// not acknowledged records [`QueueFault::StartTimeout`]. A queue with a
    /// [`fault`](Self::fault) takes no pushes after the flush: if the fault is
    /// [`device_quiet`](QueueFault::device_quiet) it hands its tokens back touching no
    /// register, otherwise it asks for the stop again first (module documentation, "Flush
    /// and quiet devices").
    fn flush(&mut self);

    /// The wait handle the queue's interrupt notifies, if it was opened with one.
    fn interrupt(&self) -> Option<&Self::Wait>;

    /// Unmasks (`true`) or masks (`false`) the queue's interrupt. After unmasking, the next
    /// completion notifies [`interrupt`](Self::interrupt)'s handle.
    fn set_interrupt(&mut self, armed: bool);

    /// The interrupt vector the queue is steered to, if it has one and the driver says which
    /// (`None` by default: a caller can then not check the steering).
    fn interrupt_vector(&self) -> Option<u16> {
        None
    }
}

/// A transmit ring: the data path of one hardware transmit queue. What it shares with a
/// receive ring is [`Queue`]'s.
pub trait TxQueue: Queue {
    /// Queues one frame made of `segments`, to be reported as `report` says. Touches no register.
    ///
    /// # Errors
    /// [`PushError`]; on error nothing was queued.
    fn push(
        &mut self,
        segments: &[TxSegment],
        token: Token,
        report: Report,
    ) -> Result<(), PushError>;

    /// [`push`](Self::push) with the device computing and inserting a checksum into the frame
    /// as it sends it ([`TxChecksum`]: the caller has written the pseudo-header's sum into the
    /// field). A frame may take one descriptor more than its segments (the Intel devices'
    /// context descriptor). The default refuses: a driver whose device offers
    /// [`Offloads::tx_l4_checksum`](crate::Offloads) overrides it.
    ///
    /// # Errors
    /// As [`push`](Self::push), and [`PushError::Checksum`] for an insertion the queue cannot
    /// do (none offered, offsets the device cannot express, or a field not inside the frame);
    /// on error nothing was queued.
    fn push_checksummed(
        &mut self,
        segments: &[TxSegment],
        token: Token,
        report: Report,
        checksum: TxChecksum,
    ) -> Result<(), PushError> {
        let _ = (segments, token, report);
        Err(PushError::Checksum {
            start: checksum.start,
            offset: checksum.offset,
        })
    }

    /// Reclaims what the device finished and writes up to `out.len()` completions into `out`,
    /// oldest first; returns how many. Reads no register, except the state check after
    /// [`STALL_POLLS`] empty polls with work pending (module documentation, "Critical
    /// faults"), which records a fault for [`fault`](Queue::fault).
    fn poll(&mut self, out: &mut [TxCompletion]) -> usize;
}

/// A receive ring: the data path of one hardware receive queue. What it shares with a
/// transmit ring is [`Queue`]'s.
pub trait RxQueue: Queue {
    /// The buffer size every pushed buffer must have at least, in bytes.
    fn buf_len(&self) -> u32;

    /// Queues one receive buffer. Touches no register.
    ///
    /// # Errors
    /// [`PushError::Full`] or [`PushError::BufferTooSmall`]; on error nothing was queued.
    fn push(&mut self, buf: RxBuffer, token: Token) -> Result<(), PushError>;

    /// Writes up to `out.len()` completions into `out`, oldest first; returns how many. As
    /// [`TxQueue::poll`], reads a register only for the stall check.
    fn poll(&mut self, out: &mut [RxCompletion]) -> usize;

    /// [`poll_each`](Self::poll_each) for a caller that does not use the RSS hash: every
    /// completion's `rss` may be `None`, which spares a driver reading the part of the
    /// write-back that holds it. The default is `poll_each`.
    #[inline]
    fn poll_each_unhashed(&mut self, max: usize, f: &mut impl FnMut(&RxCompletion)) -> usize {
        self.poll_each(max, f)
    }

    /// [`poll_each_unhashed`](Self::poll_each_unhashed) for a caller with a fast path: each
    /// completion goes to `fast` until `fast` declines one (returns `false`); that one and
    /// every one after it go to `slow`, oldest first, each to exactly one of the two. Returns
    /// how many completions were handed out (to either). The default is `poll_each_unhashed`
    /// with a flag; a driver overrides it when its own loop can stop at the declined
    /// completion and hand the rest to `slow` out of its fast loop, so that nothing `slow`
    /// needs (the declined completion, `slow`'s captures) is held in registers across `fast`
    /// — the completion queue's read, whose fast lane runs inside `fast`.
    #[inline]
    fn poll_each_split(
        &mut self,
        max: usize,
        fast: &mut impl FnMut(&RxCompletion) -> bool,
        slow: &mut impl FnMut(&RxCompletion),
    ) -> usize {
        let mut declined = false;
        self.poll_each_unhashed(max, &mut |c| {
            if declined || !fast(c) {
                declined = true;
                slow(c);
            }
        })
    }

    /// [`poll`](Self::poll) without the array: hands each of up to `max` completions to `f`,
    /// oldest first, exactly once, and returns how many (the same completions, the same stall
    /// check). For a caller that turns completions straight into records of its own — the
    /// completion queue's read. The default polls into a small array; a driver overrides it
    /// with a loop that builds each completion where `f`, inlined, uses it.
    #[inline]
    fn poll_each(&mut self, max: usize, f: &mut impl FnMut(&RxCompletion)) -> usize {
        let mut buf = [RxCompletion::EMPTY; POLL_EACH_CHUNK];
        let mut n = 0;
        while n < max {
            let want = (max - n).min(POLL_EACH_CHUNK);
            let got = self.poll(&mut buf[..want]).min(want);
            buf[..got].iter().for_each(&mut *f);
            n += got;
            if got < want {
                break;
            }
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The polls, from now, until the count calls for a check (all of them stuck).
    fn polls_to_check(c: &mut StallCount) -> u32 {
        (1..=STALL_POLLS_MAX).find(|_| c.poll(true)).unwrap()
    }

    #[test]
    fn checks_come_after_stall_polls_then_twice_as_many_up_to_the_cap() {
        let mut c = StallCount::default();
        let periods: [u32; 9] = core::array::from_fn(|_| polls_to_check(&mut c));
        assert_eq!(
            periods,
            [256, 512, 1024, 2048, 4096, 8192, 16384, 16384, 16384]
        );
        assert_eq!(STALL_POLLS_MAX, 16384);
    }

    #[test]
    fn a_poll_that_finds_work_restarts_the_count_but_keeps_the_period() {
        let mut c = StallCount::NONE;
        assert_eq!(polls_to_check(&mut c), STALL_POLLS);
        for _ in 0..2 * STALL_POLLS - 1 {
            assert!(!c.poll(true));
        }
        assert!(!c.poll(false), "work found: no check");
        for _ in 0..2 * STALL_POLLS - 1 {
            assert!(!c.poll(true), "counted again from zero");
        }
        assert!(c.poll(true), "the doubled period, not the first one");
    }

    #[test]
    fn an_armed_interrupt_keeps_checks_every_stall_polls() {
        let mut c = StallCount::NONE;
        for _ in 0..4 {
            polls_to_check(&mut c);
        }
        assert_eq!(polls_to_check(&mut c), 16 * STALL_POLLS);
        c.interrupt_armed(true);
        for _ in 0..3 {
            assert_eq!(
                polls_to_check(&mut c),
                STALL_POLLS,
                "a blocked waiter's pace"
            );
        }
        c.interrupt_armed(false);
        assert_eq!(polls_to_check(&mut c), STALL_POLLS);
        assert_eq!(polls_to_check(&mut c), 2 * STALL_POLLS, "growing again");
    }
}
