//! Errors of the control path ([`Error`]), of posting on the data path ([`PushError`]), of an
//! access outside a span of mapped memory ([`OutOfSpan`]), and the critical device conditions
//! that stop a queue ([`QueueFault`]).
//!
//! Every variant names the operation that failed and carries the values that explain why, so that
//! a caller several layers up can still tell the user what to change. No strings: this is `no_std`.

use core::fmt;

/// `Result` with this crate's [`Error`].
pub type Result<T = ()> = core::result::Result<T, Error>;

/// A control-path failure of a platform or a driver.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub enum Error {
    /// Mapping BAR `index` failed: the device has no such memory BAR, or it cannot be mapped.
    BarUnavailable {
        /// The BAR number asked for (0..=5).
        index: u8,
    },
    /// Allocating `len` bytes of DMA memory failed (out of memory or of IOVA space).
    DmaAlloc {
        /// Bytes requested.
        len: usize,
    },
    /// Mapping caller memory for DMA failed: the IOMMU refused it, or `len` is zero or too large.
    DmaMap {
        /// Bytes of caller memory to map.
        len: usize,
    },
    /// Interrupt vector `vector` does not exist or could not be wired to a wait handle.
    InterruptUnavailable {
        /// The vector asked for.
        vector: u16,
    },
    /// The PCI vendor/device id is not one this driver drives.
    UnsupportedDevice {
        /// PCI vendor id read from configuration space.
        vendor: u16,
        /// PCI device id read from configuration space.
        device: u16,
    },
    /// The device did not finish a reset within the driver's bound.
    ResetTimeout,
    /// A PHY register access through the MDIO interface did not complete, or reported an error.
    PhyAccess {
        /// PHY register number.
        reg: u8,
    },
    /// Queue `index` does not exist on this device.
    QueueIndex {
        /// The index asked for.
        index: u16,
        /// How many queues of that direction the device has.
        count: u16,
    },
    /// Bring-up: the device's `max_virtqueue_pairs` places its control queue (virtqueue
    /// `2 × pairs`, virtio 1.2 §5.1.2) at or beyond its `num_queues` virtqueues — for
    /// `pairs` ≥ 0x8000, beyond any 16-bit `queue_select` — so the control queue cannot be
    /// set up.
    ControlQueueIndex {
        /// `max_virtqueue_pairs` as the device reported it.
        pairs: u16,
        /// The device's `num_queues`.
        queues: u16,
    },
    /// Queue `index` is already open.
    QueueInUse {
        /// The index asked for.
        index: u16,
    },
    /// A ring depth the device cannot honour (depths are powers of two within the device's range).
    QueueDepth {
        /// The depth asked for.
        depth: usize,
        /// Smallest depth the device accepts.
        min: usize,
        /// Largest depth the device accepts.
        max: usize,
    },
    /// A receive buffer size the device cannot honour.
    BufferSize {
        /// The size asked for, in bytes.
        len: u32,
        /// Largest size the device accepts, in bytes.
        max: u32,
    },
    /// The device did not acknowledge enabling or disabling queue `index` within the driver's bound.
    QueueTimeout {
        /// The queue's index.
        index: u16,
    },
    /// The operation needs every queue closed first (a reset, for instance).
    QueuesOpen,
    /// An RSS configuration the device cannot take: key or table length, or a queue index in the
    /// table that is not open for receive.
    RssConfig,
    /// The device has no such feature.
    Unsupported,
    /// A MAC address a receive queue cannot be given: a group address, all zeros, the station
    /// address, or one another queue already has.
    RxMacAddress,
    /// Feature negotiation failed: the device does not offer the feature bits in `missing`
    /// that the driver requires, or (with `missing` zero) it refused the features the driver
    /// accepted (a virtio device that does not set `FEATURES_OK`).
    FeaturesRefused {
        /// Required feature bits the device does not offer (0: all offered, yet refused).
        missing: u64,
    },
    /// The device refused, or did not answer within the driver's bound, a command sent on its
    /// control queue (a virtio-net control command, by class and command number).
    DeviceCommand {
        /// Command class.
        class: u8,
        /// Command within the class.
        command: u8,
    },
    /// The device's station address (its permanent MAC: the Intel NICs' RAL0/RAH0 as loaded
    /// from the NVM, virtio-net's `mac` field) is a group address or all zeros, which no
    /// station may send from; bring-up stops rather than make every frame it sends carry it.
    StationAddress {
        /// The address the device reported.
        mac: crate::MacAddr,
    },
    /// The device does not answer: its registers read all-ones, as a PCIe read of a function
    /// that is gone completes (surprise removal, link down). Nothing brings it back but
    /// re-attaching the device.
    DeviceRemoved,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Error::BarUnavailable { index } => write!(f, "mapping BAR {index} failed"),
            Error::DmaAlloc { len } => write!(f, "allocating {len} bytes of DMA memory failed"),
            Error::DmaMap { len } => write!(f, "mapping {len} bytes of memory for DMA failed"),
            Error::InterruptUnavailable { vector } => {
                write!(f, "interrupt vector {vector} is not available")
            }
            Error::UnsupportedDevice { vendor, device } => {
                write!(
                    f,
                    "device {vendor:04x}:{device:04x} is not supported by this driver"
                )
            }
            Error::ResetTimeout => write!(f, "device reset did not complete"),
            Error::PhyAccess { reg } => write!(f, "PHY register {reg} access failed"),
            Error::QueueIndex { index, count } => {
                write!(f, "queue {index} does not exist (the device has {count})")
            }
            Error::ControlQueueIndex { pairs, queues } => write!(
                f,
                "virtio-net bring-up: control queue at virtqueue 2 × {pairs} (max_virtqueue_pairs) \
                 is beyond the device's {queues} virtqueues"
            ),
            Error::QueueInUse { index } => write!(f, "queue {index} is already open"),
            Error::QueueDepth { depth, min, max } => write!(
                f,
                "ring depth {depth} is not a power of two between {min} and {max}"
            ),
            Error::BufferSize { len, max } => {
                write!(
                    f,
                    "receive buffer size {len} is not between 1 and {max} bytes"
                )
            }
            Error::QueueTimeout { index } => {
                write!(f, "queue {index} did not acknowledge enable/disable")
            }
            Error::QueuesOpen => write!(f, "operation needs all queues closed"),
            Error::RssConfig => write!(f, "RSS configuration rejected"),
            Error::Unsupported => write!(f, "operation not supported by this device"),
            Error::RxMacAddress => write!(
                f,
                "a receive queue cannot be given that MAC address (group, zero, or taken)"
            ),
            Error::FeaturesRefused { missing: 0 } => {
                write!(
                    f,
                    "feature negotiation failed: the device refused FEATURES_OK"
                )
            }
            Error::FeaturesRefused { missing } => write!(
                f,
                "feature negotiation failed: required features {missing:#x} not offered"
            ),
            Error::DeviceCommand { class, command } => write!(
                f,
                "control command class {class} command {command} refused or unanswered"
            ),
            Error::StationAddress { mac } => write!(
                f,
                "the device's station address {mac} is a group or all-zero address"
            ),
            Error::DeviceRemoved => {
                write!(f, "device removed: its registers read all-ones")
            }
        }
    }
}

impl core::error::Error for Error {}

/// Why [`TxQueue::push`](crate::TxQueue::push) or [`RxQueue::push`](crate::RxQueue::push)
/// refused. Nothing was queued: the ring is exactly as it was, and the caller keeps its buffer.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub enum PushError {
    /// The ring has fewer free descriptors than the frame needs.
    Full {
        /// Descriptors the frame needs.
        needed: usize,
        /// Descriptors free now.
        free: usize,
    },
    /// A frame with no segments, or with more than the device accepts per frame.
    Segments {
        /// Segments given.
        count: usize,
        /// Most segments the device accepts in one frame.
        max: usize,
    },
    /// A frame longer than the device can send, or a zero-length segment.
    FrameLength {
        /// Frame length in bytes (sum of the segments).
        len: usize,
        /// Longest frame the device sends, in bytes ([`Capabilities::max_frame_len`](crate::Capabilities::max_frame_len)).
        max: usize,
    },
    /// A receive buffer shorter than the queue's buffer size: the device could write past its end.
    BufferTooSmall {
        /// Length of the buffer given.
        len: u32,
        /// The queue's buffer size ([`RxQueue::buf_len`](crate::RxQueue::buf_len)).
        min: u32,
    },
    /// A checksum insertion ([`TxQueue::push_checksummed`](crate::TxQueue::push_checksummed))
    /// the queue cannot do: the device offers none ([`Offloads::tx_l4_checksum`] is off), or
    /// not at these offsets, or the checksum field does not lie inside the frame.
    ///
    /// [`Offloads::tx_l4_checksum`]: crate::Offloads::tx_l4_checksum
    Checksum {
        /// Where the summed bytes begin ([`TxChecksum::start`](crate::TxChecksum::start)).
        start: u16,
        /// Where the checksum goes, from `start` ([`TxChecksum::offset`](crate::TxChecksum::offset)).
        offset: u16,
    },
    /// The queue is stopped (closed, flushed and not restarted, or the device was reset).
    Stopped,
    /// The queue met a critical fault ([`QueueFault`]) and takes nothing more until it is
    /// closed and opened again (after [`Nic::recover`](crate::Nic::recover)).
    Fault(QueueFault),
}

impl fmt::Display for PushError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            PushError::Full { needed, free } => {
                write!(f, "ring full: {needed} descriptors needed, {free} free")
            }
            PushError::Segments { count, max } => {
                write!(f, "{count} segments in one frame (1 to {max} allowed)")
            }
            PushError::FrameLength { len, max } => {
                write!(
                    f,
                    "frame of {len} bytes (1 to {max} allowed, no empty segment)"
                )
            }
            PushError::BufferTooSmall { len, min } => {
                write!(
                    f,
                    "receive buffer of {len} bytes is shorter than the queue's {min}"
                )
            }
            PushError::Checksum { start, offset } => write!(
                f,
                "no checksum insertion from byte {start} at offset {offset} on this queue"
            ),
            PushError::Stopped => write!(f, "queue is stopped"),
            PushError::Fault(fault) => write!(f, "queue stopped by a critical fault: {fault}"),
        }
    }
}

impl core::error::Error for PushError {}

/// An access through a [`DmaSpan`](crate::DmaSpan) that would reach outside it: nothing was read
/// or written.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct OutOfSpan {
    /// Offset of the first byte asked for.
    pub offset: usize,
    /// Bytes asked for.
    pub len: usize,
    /// Length of the span.
    pub span: usize,
}

impl fmt::Display for OutOfSpan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let OutOfSpan { offset, len, span } = *self;
        write!(
            f,
            "{len} bytes at offset {offset} reach outside a span of {span} bytes"
        )
    }
}

impl core::error::Error for OutOfSpan {}

/// A critical condition of the device that stops a queue for good: the ring the driver set up
/// is no longer the device's, or the device no longer obeys the driver's stop and start, so
/// nothing pushed on it will complete. The queue records it
/// ([`Queue::fault`](crate::Queue::fault)) and refuses pushes with [`PushError::Fault`].
/// [`flush`](crate::Queue::flush) hands a token back only when the device can no longer
/// write its buffer ([`device_quiet`](Self::device_quiet), or a stop the device has since
/// acknowledged); until then the queue holds it ("Flush and quiet devices" in
/// [`queue`](crate::queue)). Recovery is a control-path act: close the queue,
/// [`Nic::recover`](crate::Nic::recover), open it again.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub enum QueueFault {
    /// The device does not answer: register reads return all-ones (surprise removal, PCIe
    /// link down). A PCIe read of a function that is gone completes as Unsupported Request,
    /// which the root complex returns as all-ones data.
    Removed,
    /// The device was reset behind the driver's back (a reset it initiated, a function-level
    /// reset, a hot reset): the queue's registers are back at their power-on values and the
    /// device has forgotten the ring.
    Reset,
    /// The device disabled the queue: its enable bit reads clear while the driver had set it.
    Disabled,
    /// The device reports an error it cannot recover from by itself and asks for a reset
    /// (virtio's `DEVICE_NEEDS_RESET`, virtio 1.2 §2.1.2).
    NeedsReset,
    /// The device did not acknowledge stopping the queue within the driver's bound (the
    /// 82576's RXDCTL/TXDCTL.ENABLE, the 82574's TARC.ENABLE or RCTL.EN still read set;
    /// virtio's `queue_reset` still reads 1): it may still be using the ring, so the queue
    /// holds every buffer it has not finished instead of handing it back.
    StopTimeout,
    /// The device acknowledged stopping the queue but not starting it again after a flush
    /// (the enable bit, or virtio's `queue_enable`, does not read back set): the queue would
    /// take pushes that never complete, so it takes none. Every token had come back first.
    StartTimeout,
}

impl QueueFault {
    /// A small stable number per fault (1 `Removed`, 2 `Reset`, 3 `Disabled`, 4
    /// `NeedsReset`, 5 `StopTimeout`, 6 `StartTimeout`), for error codes that must be
    /// integers (core's `prov_errno`).
    pub const fn code(self) -> u8 {
        match self {
            QueueFault::Removed => 1,
            QueueFault::Reset => 2,
            QueueFault::Disabled => 3,
            QueueFault::NeedsReset => 4,
            QueueFault::StopTimeout => 5,
            QueueFault::StartTimeout => 6,
        }
    }

    /// Whether the fault itself proves that the device can no longer write the queue's
    /// buffers, so that a flush may hand them back without stopping the queue first:
    /// `Removed` (a function that is gone masters no DMA), `Reset` (the device forgot the
    /// ring), `Disabled` (the device stopped the queue: what a driver's own stop waits to
    /// read back), and `StartTimeout` (the stop was acknowledged and the ring is empty). Not
    /// `NeedsReset` (virtio 1.2 §2.1.2 promises nothing about a device in that state until it
    /// is reset) nor `StopTimeout`: for those a flush asks for the stop again and holds the
    /// buffers until the device acknowledges it.
    pub const fn device_quiet(self) -> bool {
        match self {
            QueueFault::Removed
            | QueueFault::Reset
            | QueueFault::Disabled
            | QueueFault::StartTimeout => true,
            QueueFault::NeedsReset | QueueFault::StopTimeout => false,
        }
    }

    /// The fault with [`code`](Self::code) `code`, if there is one.
    pub const fn from_code(code: u8) -> Option<QueueFault> {
        match code {
            1 => Some(QueueFault::Removed),
            2 => Some(QueueFault::Reset),
            3 => Some(QueueFault::Disabled),
            4 => Some(QueueFault::NeedsReset),
            5 => Some(QueueFault::StopTimeout),
            6 => Some(QueueFault::StartTimeout),
            _ => None,
        }
    }
}

impl fmt::Display for QueueFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            QueueFault::Removed => "device removed (registers read all-ones)",
            QueueFault::Reset => "device reset behind the driver's back",
            QueueFault::Disabled => "queue disabled by the device",
            QueueFault::NeedsReset => "device needs a reset",
            QueueFault::StopTimeout => {
                "queue stop not acknowledged by the device (its buffers are held)"
            }
            QueueFault::StartTimeout => "queue restart not acknowledged by the device",
        })
    }
}
