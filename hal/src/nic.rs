//! The device side, control path: what core asks of a NIC outside the data path.
//!
//! Everything here may take locks, touch many registers and wait for the device; nothing here is
//! called per packet. Queues opened here borrow the NIC, so a NIC cannot be dropped, or reset,
//! under an open queue.

use core::ptr::NonNull;

use crate::{DmaMapping, DmaRegion, MacAddr, Result, RxQueue, TxQueue, Wait};

/// What a NIC can do. Fields are facts about the device as the driver brought it up.
///
/// `Default` (all zero/none) exists so that drivers, outside this crate, can build the
/// `#[non_exhaustive]` struct: start from `Capabilities::default()` and set every field.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
#[non_exhaustive]
pub struct Capabilities {
    /// Transmit queues the driver can open.
    pub tx_queues: u16,
    /// Receive queues the driver can open.
    pub rx_queues: u16,
    /// Smallest ring depth (descriptors) the device accepts. Depths are powers of two.
    pub min_depth: usize,
    /// Largest ring depth the device accepts.
    pub max_depth: usize,
    /// Most segments (descriptors) one transmitted frame may have.
    pub max_tx_segments: usize,
    /// Longest frame the NIC sends and receives, in bytes, **including** the 14-byte Ethernet
    /// header (destination, source, EtherType) and **excluding** the 4-byte FCS, which the NIC
    /// adds on transmit and strips on receive. Payload MTU is this minus 14.
    pub max_frame_len: usize,
    /// Largest receive buffer size a queue accepts ([`RxConfig::buf_len`]).
    pub max_rx_buf_len: u32,
    /// The station address the NIC filters unicast frames on.
    pub mac: MacAddr,
    /// Checksum and other offloads.
    pub offloads: Offloads,
    /// Receive-side scaling, if the device has it.
    pub rss: Option<RssCaps>,
    /// Whether completions on one queue come back in the order their descriptors were pushed.
    /// Descriptor rings with a done bit do; a virtqueue may complete out of order.
    pub in_order_completion: bool,
    /// Receive queues that can be given a destination MAC address of their own
    /// ([`Nic::set_rx_queue_mac`]): frames to that address land on that queue. 0 when the
    /// device cannot steer by address (then every frame the filter accepts goes to queue 0,
    /// or where RSS puts it).
    pub rx_mac_queues: u16,
}

/// Offloads the NIC performs. All are off unless a queue or frame asks for them.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
#[non_exhaustive]
pub struct Offloads {
    /// The NIC checks IPv4 header checksums on receive and reports failures.
    pub rx_ipv4_checksum: bool,
    /// The NIC checks TCP/UDP checksums on receive and reports failures.
    pub rx_l4_checksum: bool,
    /// The NIC inserts a TCP or UDP checksum as it sends a frame
    /// ([`TxQueue::push_checksummed`], the partial-checksum
    /// model of [`TxChecksum`](crate::TxChecksum)). It accepts at least every request whose
    /// offset is UDP's or TCP's checksum field ([`TxChecksum::UDP`](crate::TxChecksum::UDP),
    /// [`TxChecksum::TCP`](crate::TxChecksum::TCP)) and whose field ends within the first
    /// [`TxChecksum::MAX_FIELD_END`](crate::TxChecksum::MAX_FIELD_END) bytes of the frame.
    pub tx_l4_checksum: bool,
}

/// Receive-side scaling: a hash over packet headers picks the receive queue through a table.
/// (`Default` for drivers to build it, as for [`Capabilities`].)
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
#[non_exhaustive]
pub struct RssCaps {
    /// Entries in the redirection table.
    pub table_len: usize,
    /// Length of the hash key in bytes.
    pub key_len: usize,
    /// Header combinations the hash can cover.
    pub hashes: RssHashes,
}

/// Header combinations an RSS hash covers.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
#[non_exhaustive]
pub struct RssHashes {
    /// Source and destination IPv4 addresses.
    pub ipv4: bool,
    /// IPv4 addresses plus UDP source and destination ports.
    pub ipv4_udp: bool,
    /// IPv4 addresses plus TCP source and destination ports.
    pub ipv4_tcp: bool,
}

impl RssHashes {
    /// IPv4, IPv4/UDP and IPv4/TCP.
    pub const ALL_IPV4: RssHashes = RssHashes {
        ipv4: true,
        ipv4_udp: true,
        ipv4_tcp: true,
    };
}

/// An RSS set-up: the key, the redirection table (a receive queue index per entry) and which
/// headers to hash. Frames the hash does not cover go to queue 0.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct RssConfig<'a> {
    /// The Toeplitz key, [`RssCaps::key_len`] bytes.
    pub key: &'a [u8],
    /// Receive queue for each table entry, [`RssCaps::table_len`] entries.
    pub table: &'a [u16],
    /// Which headers the hash covers.
    pub hashes: RssHashes,
}

/// An owned copy of an [`RssConfig`], which a driver keeps of the last one it programmed so that
/// [`Nic::recover`] can program it again after the device lost it (a reset): RSS belongs to
/// the application, and a recovery the application did not ask for must not change where its
/// frames go.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct RssSaved {
    key: [u8; RssSaved::MAX_KEY],
    key_len: usize,
    table: [u16; RssSaved::MAX_TABLE],
    table_len: usize,
    hashes: RssHashes,
}

impl RssSaved {
    /// The longest key a copy holds (virtio's `rss_max_key_size` is a byte).
    pub const MAX_KEY: usize = 255;
    /// The longest table a copy holds (every NIC here has 128 entries at most).
    pub const MAX_TABLE: usize = 128;

    /// A copy of `rss`; `None` if its key or table is longer than a copy holds.
    pub fn of(rss: &RssConfig<'_>) -> Option<RssSaved> {
        if rss.key.len() > Self::MAX_KEY || rss.table.len() > Self::MAX_TABLE {
            return None;
        }
        let mut saved = RssSaved {
            key: [0; Self::MAX_KEY],
            key_len: rss.key.len(),
            table: [0; Self::MAX_TABLE],
            table_len: rss.table.len(),
            hashes: rss.hashes,
        };
        saved.key[..rss.key.len()].copy_from_slice(rss.key);
        saved.table[..rss.table.len()].copy_from_slice(rss.table);
        Some(saved)
    }

    /// The configuration again, to program.
    pub fn config(&self) -> RssConfig<'_> {
        RssConfig {
            key: &self.key[..self.key_len],
            table: &self.table[..self.table_len],
            hashes: self.hashes,
        }
    }
}

/// Link state as the NIC reports it.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct Link {
    /// Carrier present and autonegotiation (if any) complete.
    pub up: bool,
    /// Speed in Mb/s; 0 when down.
    pub speed_mbps: u32,
    /// Full duplex.
    pub full_duplex: bool,
}

/// Which frames the receive filter accepts besides unicast to [`Capabilities::mac`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub struct RxMode {
    /// Accept every unicast frame.
    pub promiscuous: bool,
    /// Accept every multicast frame.
    pub all_multicast: bool,
    /// Accept broadcast frames.
    pub broadcast: bool,
}

impl Default for RxMode {
    /// Own unicast and broadcast: what an endpoint needs.
    fn default() -> Self {
        RxMode {
            promiscuous: false,
            all_multicast: false,
            broadcast: true,
        }
    }
}

impl RxMode {
    /// Accept every frame.
    pub const PROMISCUOUS: RxMode = RxMode {
        promiscuous: true,
        all_multicast: true,
        broadcast: true,
    };
}

/// Device statistics, accumulated by the driver since bring-up (the registers behind them may
/// clear on read; these never go backwards).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
#[non_exhaustive]
pub struct Stats {
    /// Good frames received.
    pub rx_packets: u64,
    /// Good frames transmitted.
    pub tx_packets: u64,
    /// Bytes of good frames received (as the NIC counts them, FCS included where it does).
    pub rx_bytes: u64,
    /// Bytes of good frames transmitted.
    pub tx_bytes: u64,
    /// Frames dropped because no receive descriptor was free.
    pub rx_missed: u64,
}

/// How to open a transmit queue.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
#[non_exhaustive]
pub struct TxConfig {
    /// Wire the queue's completions to an interrupt vector, so that [`Queue::interrupt`](crate::Queue::interrupt)
    /// returns a wait handle.
    pub interrupt: bool,
    /// With `interrupt`: the MSI-X vector to steer the queue to, below
    /// [`Nic::irq_vectors`]; `None` lets the driver choose (its documented default). Steering
    /// every queue bound to one completion queue to one vector is what gives that CQ a single
    /// wait handle. Ignored without `interrupt`.
    pub vector: Option<u16>,
}

/// How to open a receive queue.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub struct RxConfig {
    /// Size of every buffer the queue will be given, in bytes. The driver rounds it up to the
    /// device's granularity ([`RxQueue::buf_len`] tells the result); pushed buffers must be at
    /// least that long, and the device never writes more than that into one.
    pub buf_len: u32,
    /// Wire the queue's completions to an interrupt vector.
    pub interrupt: bool,
    /// With `interrupt`: the MSI-X vector to steer the queue to (as [`TxConfig::vector`]);
    /// `None` lets the driver choose.
    pub vector: Option<u16>,
}

impl RxConfig {
    /// A queue of `buf_len`-byte buffers, without interrupt.
    pub const fn new(buf_len: u32) -> Self {
        RxConfig {
            buf_len,
            interrupt: false,
            vector: None,
        }
    }
}

impl TxConfig {
    /// A transmit queue with or without its interrupt vector (the driver's choice of vector).
    pub const fn with_interrupt(interrupt: bool) -> Self {
        TxConfig {
            interrupt,
            vector: None,
        }
    }

    /// A transmit queue whose interrupt is wired to MSI-X vector `vector`.
    pub const fn with_vector(vector: u16) -> Self {
        TxConfig {
            interrupt: true,
            vector: Some(vector),
        }
    }
}

impl RxConfig {
    /// The same configuration with the interrupt vector wired or not.
    pub const fn with_interrupt(mut self, interrupt: bool) -> Self {
        self.interrupt = interrupt;
        self
    }

    /// The same configuration with the interrupt wired to MSI-X vector `vector`.
    pub const fn with_vector(mut self, vector: u16) -> Self {
        self.interrupt = true;
        self.vector = Some(vector);
        self
    }
}

/// A NIC driver's control path.
///
/// Methods take `&self`: a driver serialises its control state internally, so that queues — which
/// borrow the NIC — can be used from their own threads while the control path stays usable.
pub trait Nic: Sync {
    /// The wait handle queue interrupts deliver to.
    type Wait: Wait;
    /// DMA memory from [`alloc_dma`](Self::alloc_dma).
    type Dma: DmaRegion;
    /// A mapping of caller memory from [`map_dma`](Self::map_dma).
    type Mapping: DmaMapping;
    /// An open transmit queue of depth `N`.
    type Tx<'a, const N: usize>: TxQueue<Wait = Self::Wait>
    where
        Self: 'a;
    /// An open receive queue of depth `N`.
    type Rx<'a, const N: usize>: RxQueue<Wait = Self::Wait>
    where
        Self: 'a;

    /// What the device can do.
    fn capabilities(&self) -> Capabilities;

    /// Current link state, read from the device.
    fn link(&self) -> Link;

    /// Resets the device and brings it up again as after construction (link, MAC, filters).
    ///
    /// # Errors
    /// [`Error::QueuesOpen`](crate::Error::QueuesOpen) while any queue is open;
    /// [`Error::ResetTimeout`](crate::Error::ResetTimeout) if the device does not come back.
    fn reset(&self) -> Result;

    /// Brings the device back after a queue reported a critical
    /// [`QueueFault`](crate::QueueFault), while queues may still be open: if the device lost
    /// its set-up (it was reset, or asks for a reset), the driver resets it and programs it
    /// again as [`reset`](Self::reset) does, keeping the receive mode, the queue addresses and
    /// the RSS set-up it was given ([`RssSaved`]); if only a queue was disabled, nothing is
    /// done.
    /// Queues that faulted stay faulted: close them and open them again. Queues open across a
    /// recovery that resets the device fault too (their rings are gone).
    ///
    /// The default, for a driver that detects no faults, does nothing.
    ///
    /// # Errors
    /// [`Error::DeviceRemoved`](crate::Error::DeviceRemoved) if the device does not answer;
    /// what [`reset`](Self::reset) returns if bring-up fails.
    fn recover(&self) -> Result {
        Ok(())
    }

    /// Opens transmit queue `index` with a ring of `N` descriptors.
    ///
    /// # Errors
    /// `QueueIndex`, `QueueInUse`, `QueueDepth` (N not a power of two in range), `DmaAlloc`,
    /// `InterruptUnavailable`, `QueueTimeout`.
    fn open_tx<const N: usize>(&self, index: u16, config: TxConfig) -> Result<Self::Tx<'_, N>>;

    /// Opens receive queue `index` with a ring of `N` descriptors.
    ///
    /// # Errors
    /// As [`open_tx`](Self::open_tx), plus `BufferSize`.
    fn open_rx<const N: usize>(&self, index: u16, config: RxConfig) -> Result<Self::Rx<'_, N>>;

    /// Programs RSS. Until called, every frame goes to receive queue 0.
    ///
    /// # Errors
    /// [`Error::Unsupported`](crate::Error::Unsupported) without RSS;
    /// [`Error::RssConfig`](crate::Error::RssConfig) for a key or table of the wrong length, or a
    /// table entry naming a queue that does not exist.
    fn set_rss(&self, rss: &RssConfig<'_>) -> Result;

    /// Sets which frames the receive filter accepts.
    ///
    /// # Errors
    /// [`Error::Unsupported`](crate::Error::Unsupported) for a mode the device cannot do.
    fn set_rx_mode(&self, mode: RxMode) -> Result;

    /// Steers frames addressed to `mac` to receive queue `queue` (`Some`), or removes the
    /// queue's address (`None`): how named receive contexts are reached on a device that
    /// cannot hash ringfab's frames. Queue 0 keeps the station address
    /// ([`Capabilities::mac`]) and cannot be given another; broadcast frames go to queue 0.
    ///
    /// On the 82576 this is VMDq (pool *n* = queue *n*, by destination address), which QEMU's
    /// model does not combine with RSS: the driver refuses one while the other is set up.
    ///
    /// # Errors
    /// [`Error::Unsupported`](crate::Error::Unsupported) on a device without address steering
    /// (the default), or while RSS is programmed; [`Error::QueueIndex`](crate::Error::QueueIndex)
    /// for queue 0 or a queue at or above [`Capabilities::rx_mac_queues`];
    /// [`Error::RxMacAddress`](crate::Error::RxMacAddress) for a group or zero address, the
    /// station address, or one another queue already has.
    fn set_rx_queue_mac(&self, queue: u16, mac: Option<MacAddr>) -> Result {
        let _ = (queue, mac);
        Err(crate::Error::Unsupported)
    }

    /// Statistics accumulated since bring-up.
    fn stats(&self) -> Stats;

    /// A short name for bit `bit` (0..32) of [`RxError::Frame`](crate::RxError::Frame)'s `bits`
    /// as this device defines them (for `fi_cq_strerror`), or `None` if the bit has no meaning.
    fn rx_error_name(&self, bit: u32) -> Option<&'static str>;

    /// Allocates `len` bytes of zeroed DMA memory this device can reach (the platform's
    /// [`alloc_dma`](crate::Platform::alloc_dma)): what core's bounce buffers live in.
    ///
    /// # Errors
    /// [`Error::DmaAlloc`](crate::Error::DmaAlloc) when memory or IOVA space runs out.
    fn alloc_dma(&self, len: usize) -> Result<Self::Dma>;

    /// Makes caller memory reachable by this device (the platform's
    /// [`map_dma`](crate::Platform::map_dma)): what memory registration rests on. Mapping is a
    /// property of the device (on VFIO, of its IOMMU container), so it is asked of the NIC and
    /// core never needs to name a platform.
    ///
    /// # Errors
    /// [`Error::DmaMap`](crate::Error::DmaMap) if `len` is zero or the IOMMU refuses.
    ///
    /// # Safety
    /// As [`Platform::map_dma`](crate::Platform::map_dma): `cpu..cpu+len` stays valid and is
    /// not reused until the mapping drops, and no Rust reference into it is held while the
    /// device may write it.
    unsafe fn map_dma(&self, cpu: NonNull<u8>, len: usize) -> Result<Self::Mapping>;

    /// How many interrupt vectors queues can be steered to ([`TxConfig::vector`]); 0 (the
    /// default) for a driver without interrupts.
    fn irq_vectors(&self) -> u16 {
        0
    }

    /// The wait handle interrupt vector `vector` notifies: the same notifications as the
    /// [`interrupt`](crate::Queue::interrupt) handle of every queue steered to it. This is
    /// how a completion queue waits on one handle for all the queues bound to it.
    ///
    /// # Errors
    /// [`Error::InterruptUnavailable`](crate::Error::InterruptUnavailable) for a vector at or
    /// above [`irq_vectors`](Self::irq_vectors) (every vector, by default).
    fn irq(&self, vector: u16) -> Result<Self::Wait> {
        Err(crate::Error::InterruptUnavailable { vector })
    }
}
