//! The emulated virtio-net device, as QEMU's `virtio-net-pci` presents it with
//! `disable-legacy=on,iommu_platform=on` (`hw/virtio/virtio-pci.c`, `hw/virtio/virtio.c`,
//! `hw/net/virtio-net.c`): a modern-only virtio 1.x PCI function whose common, ISR, device and
//! notify structures live in BAR4 and whose MSI-X table is BAR1, with split virtqueues — a
//! receive and a transmit queue per queue pair, then the control queue — behind the shared
//! IOMMU, wire and fault engine.
//!
//! What the model does as QEMU does, and where it departs:
//!
//! * **Transport.** Common configuration at BAR4 0x0000, ISR at 0x1000, device configuration at
//!   0x2000, notifications at 0x3000 with `notify_off_multiplier` 4 and `queue_notify_off` equal
//!   to the queue index; every field answers only at its own offset, at any access width, as
//!   QEMU's `virtio_pci_common_read/write` switch on the address. Capabilities are chained in
//!   QEMU's order (MSI-X at 0x98 first, then the vendor capabilities at 0x84 … 0x40).
//! * **Features.** `VERSION_1`, `ACCESS_PLATFORM`, `MAC`, `STATUS`, `CTRL_VQ`, `CTRL_RX`,
//!   `CTRL_RX_EXTRA`, `INDIRECT_DESC`, `EVENT_IDX`, `RING_RESET`, `ANY_LAYOUT`,
//!   `NOTIFY_ON_EMPTY`, and the offloads QEMU offers by default (`CSUM`, `GUEST_CSUM`, the TSO
//!   family, `MRG_RXBUF`); `MQ` with more than one queue pair, `RSS` when asked for
//!   ([`VirtioNetModelConfig`], like QEMU's `mq=`/`rss=` properties). Setting `FEATURES_OK`
//!   is refused when `ACCESS_PLATFORM` is offered and not accepted (QEMU
//!   `virtio_validate_features`), or always with
//!   [`refuse_features_ok`](VirtioNetModelConfig::refuse_features_ok). Of the offloads, the
//!   checksum ones do what they say: with `CSUM` a transmit header's `NEEDS_CSUM` is completed
//!   before the frame goes on the wire (the wire carries whole frames), and with `GUEST_CSUM` a
//!   received unfragmented IPv4 TCP/UDP frame whose checksum is right gets `DATA_VALID`, as a
//!   backend whose host checked it would (§5.1.6.2, §5.1.6.4).
//! * **Virtqueues.** Descriptor chains (direct and indirect) are walked and checked as QEMU's
//!   `virtqueue_split_pop` does; a malformed chain or a buffer the IOMMU refuses marks the
//!   device broken (`virtio_error`: `DEVICE_NEEDS_RESET` set, nothing more is processed until a
//!   device reset). Notification suppression follows QEMU: `VIRTQ_USED_F_NO_NOTIFY` or the
//!   `avail_event` written by `virtio_queue_set_notification`, interrupts through
//!   `virtio_should_notify` (`used_event`, `VIRTQ_AVAIL_F_NO_INTERRUPT`, the first one after a
//!   reset always sent).
//! * **Receive.** The header QEMU writes without a vnet-header backend (10 zero bytes; the
//!   12-byte header's `num_buffers` is not written without `MRG_RXBUF`), then the frame; a
//!   frame that does not fit the buffer is dropped and the buffer stays available. Frames
//!   arrive on queue pair 0, as from a single-queue backend, unless RSS redirects them
//!   (QEMU's software RSS, `virtio_net_process_rss`). *Departure:* with no buffer available
//!   QEMU keeps the frame in its net queue and delivers it when buffers come; the model drops
//!   it and counts it ([`EmuVirtioNet::rx_dropped`]), as the Intel models count a missed
//!   packet. A frame with a bad FCS never reaches a virtio device (the host side drops it), so
//!   the model drops it too.
//! * **Transmit** happens on the notify write (QEMU defers it to a bottom half) and ends with
//!   notifications re-enabled, as QEMU's `virtio_net_tx_bh` leaves them.
//! * **Faults.** The shared [`DeviceFault`](crate::DeviceFault)s act on used-ring entries:
//!   withheld or delayed entries, a length beyond the buffer, garbage in the header (RX) or the
//!   used length (TX), plus the virtqueue ones — out-of-order completion, lying ids, used-index
//!   jumps.

pub(crate) mod model;
#[cfg(test)]
mod tests;

use ringfab_hal::MacAddr;

use crate::device::{EmuNic, Kind};
use crate::iommu::Iommu;
use crate::wait::EmuWait;
use model::VirtioNetModel;

/// Red Hat / Qumranet, the virtio PCI vendor id.
pub const VENDOR_VIRTIO: u16 = 0x1af4;
/// A modern (virtio 1.x) network device: 0x1040 + device type 1.
pub const DEVICE_VIRTIO_NET: u16 = 0x1041;
/// BAR holding the MSI-X table and PBA (QEMU `msix_bar_idx`).
pub const MSIX_BAR: u8 = 1;
/// BAR holding the virtio structures (QEMU `modern_mem_bar_idx`).
pub const MODERN_BAR: u8 = 4;
/// Size of [`MODERN_BAR`]: `pow2ceil(notify.offset + notify.size)` = 0x4000.
pub const MODERN_BAR_LEN: usize = 0x4000;
/// Entries of every data virtqueue at reset (QEMU `rx_queue_size`/`tx_queue_size`).
pub const QUEUE_SIZE: u16 = 256;
/// Entries of the control virtqueue (QEMU `virtio_add_queue(vdev, 64, …)`).
pub const CTRL_QUEUE_SIZE: u16 = 64;
/// Largest queue size a driver may write (QEMU `VIRTQUEUE_MAX_SIZE`).
pub const QUEUE_MAX_SIZE: u16 = 1024;

/// How to build an emulated virtio-net device: QEMU's properties, by their meaning.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub struct VirtioNetModelConfig {
    /// The MAC address (`mac=`), in the device configuration and used by the receive filter.
    pub mac: MacAddr,
    /// Whether PCI Bus Master Enable starts set (as VFIO leaves it).
    pub bus_master: bool,
    /// Whether the link is up (the backend connected).
    pub link: bool,
    /// Queue pairs (`-netdev …,queues=` with `mq=on`); more than one offers `VIRTIO_NET_F_MQ`.
    pub queue_pairs: u16,
    /// Offer `VIRTIO_NET_F_RSS` (`rss=on`; QEMU then steers in software).
    pub rss: bool,
    /// Offer `VIRTIO_RING_F_EVENT_IDX` (`event_idx=`, on by default).
    pub event_idx: bool,
    /// Offer `VIRTIO_RING_F_INDIRECT_DESC` (`indirect_desc=`, on by default).
    pub indirect_desc: bool,
    /// Offer `VIRTIO_F_RING_RESET` (`queue_reset=`, on by default since QEMU 7.2).
    pub ring_reset: bool,
    /// Offer `VIRTIO_F_ACCESS_PLATFORM` (`iommu_platform=on`).
    pub iommu_platform: bool,
    /// Refuse every `FEATURES_OK` (a device whose feature validation fails).
    pub refuse_features_ok: bool,
    /// The backend has a queue per pair, as a tap opened with `queues=N`: until RSS is
    /// programmed, QEMU delivers a frame to the pair of the backend queue it came in on, and the
    /// host's tap picks that queue by its own flow hash — modelled as a hash of the frame's
    /// first 38 bytes (addresses, IPv4 header, ports) over the active pairs. Off: a
    /// single-queue backend (a hub), everything to pair 0.
    pub multiqueue_backend: bool,
    /// The `max_virtqueue_pairs` the device configuration reports instead of `queue_pairs`
    /// (which stays what the device has; `VIRTIO_NET_F_MQ` is offered when it is above 1):
    /// a device at or beyond the spec's limit of 0x8000 (virtio 1.2 §5.1.4), whose control
    /// queue index `2 × max_virtqueue_pairs` (§5.1.2) no 16-bit `queue_select` reaches.
    pub reported_pairs: Option<u16>,
    /// The feature bits the device offers, instead of those QEMU's defaults and the fields
    /// above imply: a device missing bits the driver needs, or offering bits the model does
    /// not implement (which the driver must not accept). The model behaves as the bits say
    /// where it implements them (the device configuration's length, `FEATURES_OK`'s checks).
    /// For hostile-device tests and the `virtio_bringup` fuzz target.
    pub offered_features: Option<u64>,
    /// `mtu` in the device configuration, with `VIRTIO_NET_F_MTU` offered (QEMU's `host_mtu=`).
    pub mtu: Option<u16>,
    /// `rss_max_key_size`, `rss_max_indirection_table_length` and `supported_hash_types` the
    /// device configuration reports instead of QEMU's (40, 128, 0x1ff); the model still checks
    /// RSS commands against QEMU's limits, so a driver that believes a larger figure has its
    /// command refused.
    pub rss_limits: Option<(u8, u16, u32)>,
    /// Entries of every data virtqueue at reset (`queue_size` before the driver writes it;
    /// QEMU's `rx_queue_size`/`tx_queue_size`): [`QUEUE_SIZE`] by default; 0 makes the data
    /// queues unavailable, a value that is not a power of two is what a buggy device reports.
    pub queue_size: u16,
    /// Bits of `device_status` the device never stores when the driver writes them: a device
    /// that does not acknowledge `FEATURES_OK` (a silent refusal) or `DRIVER_OK`.
    pub status_ignores: u8,
    /// Bits `device_status` holds after a device reset, instead of 0: a device that never
    /// acknowledges a reset (virtio 1.2 §4.1.4.3.2: the driver waits for 0).
    pub status_after_reset: u8,
    /// Answer every control command with `VIRTIO_NET_ERR`.
    pub ctrl_refuses: bool,
    /// Once `VIRTIO_NET_F_GUEST_CSUM` is negotiated, hand every received frame over with
    /// `VIRTIO_NET_HDR_F_NEEDS_CSUM` (virtio 1.2 §5.1.6.4), as QEMU does for a sender on the
    /// same host whose checksum offload is on (a guest's virtio_net across the host's bridge):
    /// an IPv4 TCP/UDP frame whose checksum is right has its checksum field replaced by the
    /// pseudo-header's sum and `csum_start`/`csum_offset` set to complete it. Any other frame
    /// keeps its bytes and gets `NEEDS_CSUM` with `csum_start`/`csum_offset` 0 — what a
    /// faithful device never sends (it "MUST validate the packet checksum"), here so that tests
    /// see a consumer leave alone a partial frame it cannot complete. Off by default: the
    /// model checks the checksum and marks `DATA_VALID`.
    pub partial_checksums: bool,
}

impl Default for VirtioNetModelConfig {
    fn default() -> Self {
        VirtioNetModelConfig {
            mac: MacAddr([0x52, 0x54, 0, 0x12, 0x34, 0x56]),
            bus_master: true,
            link: true,
            queue_pairs: 1,
            rss: false,
            event_idx: true,
            indirect_desc: true,
            ring_reset: true,
            iommu_platform: true,
            refuse_features_ok: false,
            multiqueue_backend: false,
            reported_pairs: None,
            offered_features: None,
            mtu: None,
            rss_limits: None,
            queue_size: QUEUE_SIZE,
            status_ignores: 0,
            status_after_reset: 0,
            ctrl_refuses: false,
            partial_checksums: false,
        }
    }
}

/// The [`Kind`] of an emulated virtio-net-pci device.
#[derive(Debug)]
pub enum VirtioNetPci {}

impl Kind for VirtioNetPci {
    const NAME: &'static str = "EmuVirtioNet";
}

/// An emulated virtio-net-pci device. Cheap to clone; clones are the same device.
pub type EmuVirtioNet = EmuNic<VirtioNetPci>;

impl EmuNic<VirtioNetPci> {
    /// A device after PCI reset: status 0, every queue disabled, `2 × queue_pairs + 2` MSI-X
    /// vectors (QEMU's default for virtio-net-pci with a control queue).
    ///
    /// # Panics
    /// If `config.queue_pairs` is 0 or above 256.
    pub fn new(config: VirtioNetModelConfig) -> EmuVirtioNet {
        assert!(
            (1..=256).contains(&config.queue_pairs),
            "virtio-net queue pairs must be 1..=256"
        );
        let iommu = Iommu::new();
        let nvectors = 2 * usize::from(config.queue_pairs) + 2;
        let vectors: Vec<EmuWait> = (0..nvectors).map(|_| EmuWait::new()).collect();
        let model = VirtioNetModel::new(config, iommu.clone(), vectors.clone());
        let mut bars = [0; 6];
        bars[usize::from(MODERN_BAR)] = MODERN_BAR_LEN;
        EmuNic::from_model_bars(Box::new(model), iommu, vectors, bars)
    }

    /// Frames the device dropped because the target receive queue had no buffer (or a buffer
    /// too small for the frame), since creation.
    pub fn rx_dropped(&self) -> u64 {
        self.with_model(|m| m.as_virtio().map_or(0, |v| v.rx_dropped))
    }

    /// The device status register as the device holds it (`DEVICE_NEEDS_RESET` is 0x40).
    pub fn device_status(&self) -> u8 {
        self.with_model(|m| m.as_virtio().map_or(0, |v| v.status))
    }

    /// The number of queue pairs the driver has made active (`VIRTIO_NET_CTRL_MQ`).
    pub fn active_queue_pairs(&self) -> u16 {
        self.with_model(|m| m.as_virtio().map_or(0, |v| v.curr_pairs))
    }

    /// Notifications (doorbell writes) the device received on virtqueue `vq` since creation.
    pub fn notifications(&self, vq: u16) -> u64 {
        self.with_model(|m| {
            m.as_virtio()
                .and_then(|v| v.vqs.get(usize::from(vq)))
                .map_or(0, |q| q.notifies)
        })
    }
}
