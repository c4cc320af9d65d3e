//! The crate's errors, one variant per operation that can fail.

use core::fmt;

use ringfab_hal::{MacAddr, QueueFault};

/// Why an operation of this crate failed.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub enum Error {
    /// Opening the receive queue failed.
    OpenRx {
        /// The queue asked for.
        queue: u16,
        /// What the driver said.
        error: ringfab_hal::Error,
    },
    /// Opening the transmit queue failed.
    OpenTx {
        /// The queue asked for.
        queue: u16,
        /// What the driver said.
        error: ringfab_hal::Error,
    },
    /// The frame limit left after the NIC's and the buffers' (Ethernet header included) is
    /// below [`MIN_FRAME_LEN`](crate::MIN_FRAME_LEN).
    FrameLength {
        /// The limit that was left.
        max_frame_len: usize,
    },
    /// Allocating the buffers' DMA memory failed: the platform's refusal, or `None` when the
    /// size asked for overflows or the region given is too short.
    AllocBuffers {
        /// What the NIC said, if it said anything.
        error: Option<ringfab_hal::Error>,
    },
    /// The receive ring took no buffer at open.
    PostReceive {
        /// The receive queue.
        queue: u16,
        /// The queue's fault, if it has one.
        fault: Option<QueueFault>,
    },
    /// smoltcp's interface needs a unicast station address; this is a group address.
    NotUnicast {
        /// The address given.
        mac: MacAddr,
    },
    /// A TCP socket needs at least one socket slot and receive and transmit buffers that
    /// are not empty.
    SocketMemory,
    /// smoltcp refused to listen on or connect to the port (0, or the socket is busy).
    Socket {
        /// The port.
        port: u16,
    },
}

/// This crate's results.
pub type Result<T = ()> = core::result::Result<T, Error>;

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::OpenRx { queue, error } => write!(f, "opening receive queue {queue}: {error}"),
            Error::OpenTx { queue, error } => {
                write!(f, "opening transmit queue {queue}: {error}")
            }
            Error::FrameLength { max_frame_len } => write!(
                f,
                "opening the device: frames of at most {max_frame_len} bytes, fewer than the \
                 {} an IPv4 host needs",
                crate::MIN_FRAME_LEN
            ),
            Error::AllocBuffers { error: Some(e) } => {
                write!(f, "allocating the device's buffers: {e}")
            }
            Error::AllocBuffers { error: None } => {
                f.write_str("allocating the device's buffers: size out of range")
            }
            Error::PostReceive { queue, fault } => {
                write!(f, "posting receive buffers on queue {queue}: refused")?;
                match fault {
                    Some(fault) => write!(f, " ({fault})"),
                    None => Ok(()),
                }
            }
            Error::NotUnicast { mac } => {
                write!(f, "making the interface: {mac} is not a unicast address")
            }
            Error::SocketMemory => {
                f.write_str("making the TCP socket: no socket slot or an empty buffer")
            }
            Error::Socket { port } => write!(f, "opening a TCP socket on port {port}: refused"),
        }
    }
}

impl core::error::Error for Error {}
