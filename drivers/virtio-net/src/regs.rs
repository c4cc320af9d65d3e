//! Register layout of a modern virtio PCI device and the virtio-net constants, each with the
//! section of "Virtual I/O Device (VIRTIO) Version 1.2" that defines it.
//!
//! virtio fields are whole values (a feature word, a queue size, an index), not bit fields in
//! device registers, so they are plain constants rather than `tock-registers` fields; the two
//! bit sets (device status, feature bits) are named constants of their own width.

/// PCI vendor id of virtio devices (§4.1.2.1).
pub(crate) const VENDOR_VIRTIO: u16 = 0x1af4;
/// Modern virtio PCI device ids are 0x1040 + device type (§4.1.2.1); network is type 1.
pub(crate) const DEVICE_NET_MODERN: u16 = 0x1041;
/// Transitional network device id (§4.1.2.3): it also has the modern interface.
pub(crate) const DEVICE_NET_TRANSITIONAL: u16 = 0x1000;

/// PCI configuration space: vendor/device id dword, command/status dword, capability pointer.
pub(crate) const PCI_ID: u16 = 0x00;
pub(crate) const PCI_COMMAND: u16 = 0x04;
pub(crate) const PCI_CAP_PTR: u16 = 0x34;
/// Command register: memory space enable, bus master enable (PCI 3.0 §6.2.2).
pub(crate) const CMD_MEMORY: u32 = 1 << 1;
pub(crate) const CMD_BUS_MASTER: u32 = 1 << 2;
/// Status register (upper half of the command dword): capabilities list present.
pub(crate) const STATUS_CAP_LIST: u32 = 1 << 20;
/// Vendor-specific capability id, the one virtio structures use (§4.1.4).
pub(crate) const CAP_VNDR: u8 = 0x09;

/// `cfg_type` of `struct virtio_pci_cap` (§4.1.4).
pub(crate) mod cap {
    /// Common configuration.
    pub(crate) const COMMON: u8 = 1;
    /// Notifications.
    pub(crate) const NOTIFY: u8 = 2;
    // 3, ISR status, is not used: with MSI-X every queue has its own vector (§4.1.4.5).
    /// Device-specific configuration.
    pub(crate) const DEVICE: u8 = 4;
}

/// `struct virtio_pci_common_cfg` offsets (§4.1.4.3). Each field is accessed with its own
/// width: 32-bit fields with 32-bit accesses, 16-bit with 16-bit, 8-bit with 8-bit.
pub(crate) mod common {
    pub(crate) const DEVICE_FEATURE_SELECT: usize = 0x00; // u32
    pub(crate) const DEVICE_FEATURE: usize = 0x04; // u32, read-only
    pub(crate) const DRIVER_FEATURE_SELECT: usize = 0x08; // u32
    pub(crate) const DRIVER_FEATURE: usize = 0x0c; // u32
    pub(crate) const CONFIG_MSIX_VECTOR: usize = 0x10; // u16
    pub(crate) const NUM_QUEUES: usize = 0x12; // u16, read-only
    pub(crate) const DEVICE_STATUS: usize = 0x14; // u8
    pub(crate) const QUEUE_SELECT: usize = 0x16; // u16
    pub(crate) const QUEUE_SIZE: usize = 0x18; // u16
    pub(crate) const QUEUE_MSIX_VECTOR: usize = 0x1a; // u16
    pub(crate) const QUEUE_ENABLE: usize = 0x1c; // u16
    pub(crate) const QUEUE_NOTIFY_OFF: usize = 0x1e; // u16, read-only
    pub(crate) const QUEUE_DESC: usize = 0x20; // u64, as two u32
    pub(crate) const QUEUE_DRIVER: usize = 0x28; // u64
    pub(crate) const QUEUE_DEVICE: usize = 0x30; // u64
    pub(crate) const QUEUE_RESET: usize = 0x3a; // u16 (VIRTIO_F_RING_RESET)
    /// Bytes the driver needs the common structure to span (through `queue_reset`).
    pub(crate) const LEN: usize = 0x3c;
}

/// "No vector" in `config_msix_vector` / `queue_msix_vector` (§4.1.4.3, §4.1.5.1.2).
pub(crate) const NO_VECTOR: u16 = 0xffff;

/// Device status bits (§2.1).
pub(crate) mod status {
    pub(crate) const ACKNOWLEDGE: u8 = 1;
    pub(crate) const DRIVER: u8 = 2;
    pub(crate) const DRIVER_OK: u8 = 4;
    pub(crate) const FEATURES_OK: u8 = 8;
    pub(crate) const NEEDS_RESET: u8 = 0x40;
    pub(crate) const FAILED: u8 = 0x80;
}

/// Feature bits (§5.1.3 network, §6 reserved/transport).
pub(crate) mod feature {
    /// Device has a given MAC address (§5.1.3).
    pub(crate) const MAC: u64 = 1 << 5;
    /// Configuration `status` field is valid (link state).
    pub(crate) const STATUS: u64 = 1 << 16;
    /// The device completes a partial checksum the driver asks for in the transmit header
    /// (`VIRTIO_NET_HDR_F_NEEDS_CSUM`, §5.1.6.2).
    pub(crate) const CSUM: u64 = 1 << 0;
    /// The device may hand over frames whose checksum it checked (`DATA_VALID`) or that a
    /// local sender left partial (`NEEDS_CSUM`) (§5.1.6.4).
    pub(crate) const GUEST_CSUM: u64 = 1 << 1;
    /// Control virtqueue.
    pub(crate) const CTRL_VQ: u64 = 1 << 17;
    /// Control channel RX mode (promiscuous, all-multicast).
    pub(crate) const CTRL_RX: u64 = 1 << 18;
    /// Control channel RX extra modes (no-broadcast and friends).
    pub(crate) const CTRL_RX_EXTRA: u64 = 1 << 20;
    /// Multiqueue with automatic receive steering.
    pub(crate) const MQ: u64 = 1 << 22;
    /// Indirect descriptor tables (§2.7.5.3).
    pub(crate) const INDIRECT_DESC: u64 = 1 << 28;
    /// `used_event` / `avail_event` notification suppression (§2.7.7, §2.7.10).
    pub(crate) const EVENT_IDX: u64 = 1 << 29;
    /// virtio 1.x (§6).
    pub(crate) const VERSION_1: u64 = 1 << 32;
    /// The device is behind an IOMMU and uses addresses the platform translates (§6).
    pub(crate) const ACCESS_PLATFORM: u64 = 1 << 33;
    /// Per-queue reset (§2.6.1).
    pub(crate) const RING_RESET: u64 = 1 << 40;
    /// Receive-side scaling (§5.1.6.5.7).
    pub(crate) const RSS: u64 = 1 << 60;

    /// What the driver cannot work without: a modern device behind the IOMMU; one descriptor
    /// per frame through indirect tables; per-queue reset for flush and close.
    pub(crate) const REQUIRED: u64 = VERSION_1 | ACCESS_PLATFORM | INDIRECT_DESC | RING_RESET;
    /// Accepted when offered: checksum offloads both ways; segmentation offloads stay off.
    pub(crate) const WANTED: u64 = REQUIRED
        | CSUM
        | GUEST_CSUM
        | MAC
        | STATUS
        | CTRL_VQ
        | CTRL_RX
        | CTRL_RX_EXTRA
        | MQ
        | EVENT_IDX
        | RSS;
}

/// `virtio_net_hdr.flags` (§5.1.6).
pub(crate) mod hdr {
    /// Transmit: complete the checksum from `csum_start` and store it at `csum_start +
    /// csum_offset`. Receive: the checksum is partial, as a local sender left it.
    pub(crate) const F_NEEDS_CSUM: u8 = 1;
    /// Receive: the device checked the frame's checksum and found it right.
    pub(crate) const F_DATA_VALID: u8 = 2;
}

/// `struct virtio_net_config` offsets (§5.1.4).
pub(crate) mod netcfg {
    pub(crate) const MAC: usize = 0;
    pub(crate) const STATUS: usize = 6; // u16
    pub(crate) const MAX_VIRTQUEUE_PAIRS: usize = 8; // u16
    pub(crate) const RSS_MAX_KEY_SIZE: usize = 17; // u8
    pub(crate) const RSS_MAX_INDIRECTION_TABLE_LENGTH: usize = 18; // u16
    pub(crate) const SUPPORTED_HASH_TYPES: usize = 20; // u32
    /// `VIRTIO_NET_S_LINK_UP`.
    pub(crate) const S_LINK_UP: u16 = 1;
}

/// RSS hash types (§5.1.6.5.7.1, `VIRTIO_NET_RSS_HASH_TYPE_*`).
pub(crate) mod hash {
    pub(crate) const IPV4: u32 = 1 << 0;
    pub(crate) const TCPV4: u32 = 1 << 1;
    pub(crate) const UDPV4: u32 = 1 << 2;
}

/// Control queue classes and commands (§5.1.6.5).
pub(crate) mod ctrl {
    pub(crate) const CLASS_RX: u8 = 0;
    pub(crate) const RX_PROMISC: u8 = 0;
    pub(crate) const RX_ALLMULTI: u8 = 1;
    pub(crate) const RX_NOBCAST: u8 = 5;
    pub(crate) const CLASS_MQ: u8 = 4;
    pub(crate) const MQ_VQ_PAIRS_SET: u8 = 0;
    pub(crate) const MQ_RSS_CONFIG: u8 = 1;
    /// `VIRTIO_NET_OK`.
    pub(crate) const OK: u8 = 0;
}

const _: () = {
    // The common structure's fields are naturally aligned (§4.1.4.3).
    assert!(common::QUEUE_SELECT % 2 == 0 && common::QUEUE_DESC % 4 == 0);
    assert!(common::LEN == common::QUEUE_RESET + 2);
    assert!(netcfg::MAX_VIRTQUEUE_PAIRS == netcfg::STATUS + 2);
};
