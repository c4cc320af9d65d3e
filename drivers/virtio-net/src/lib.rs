//! ringfab driver for virtio 1.x network devices over PCI ("Virtual I/O Device (VIRTIO)
//! Version 1.2", §4.1 PCI transport, §2.7 split virtqueues, §5.1 network device), as QEMU's
//! `virtio-net-pci` presents it with `disable-legacy=on,iommu_platform=on`.
//!
//! [`VirtioNet::new`] brings the device up over any [`Platform`]; [`VirtioNet`] then implements
//! [`Nic`] (control path, `&self`, state behind a `spin::Mutex`), and its queues
//! [`VirtioNetTx`] and [`VirtioNetRx`] implement [`TxQueue`] and [`RxQueue`] (data path: no
//! lock, no register read; a doorbell is one release fence, one `avail.idx` store and a notify
//! write only when the device asked for one).
//!
//! What the driver guarantees on top of the `ringfab-hal` contract — as `ringfab-igb`:
//! * no `unsafe` here (`#![deny(unsafe_code)]`) but the one forwarding of
//!   [`Nic::map_dma`]'s contract; registers go through `Mmio` with each field's own access
//!   width, ring memory through [`DmaRegion`]'s volatile accessors;
//! * every token pushed comes back once from `poll` — including after a flush — and a device
//!   that writes nonsense produces error completions or refused entries, never a panic or an
//!   access outside the queue's memory (see the `virtq` module);
//! * a queue is reset on the device (`queue_reset`) before its memory is freed.
//!
//! How virtio differs from the Intel rings, and what the driver does about it:
//! * **completion by id, possibly out of order.** Each buffer gets a descriptor id from a free
//!   stack; the used ring names ids; the token is found by id. Capabilities say
//!   `in_order_completion: false`.
//! * **one descriptor per frame.** Every buffer is an indirect table (`INDIRECT_DESC`, required)
//!   holding the 12-byte `virtio_net_hdr` — kept by the driver in an area of its own, one per
//!   id, zero for transmit, checked on receive — and then the caller's segments. The hal's
//!   [`TxSegment`]/[`RxBuffer`] carry Ethernet frames only.
//! * **a frame longer than the buffer is truncated, not lost.** Without `MRG_RXBUF` a device
//!   drops a frame the buffer cannot hold whole (QEMU `virtio_net_receive_rcu`: "If buffers
//!   can't be merged, at this point we must have consumed the complete packet. Otherwise,
//!   drop it."), so a receive buffer's table ends with an overflow area of the queue's, shared
//!   by all its buffers and never read, that makes room for [`MAX_FRAME_LEN`]: the used length
//!   then says how long the frame was, and the buffer completes
//!   [`Truncated`](RxError::Truncated) with its first `buf_len` bytes (the rest landed in the
//!   overflow and is discarded, as `fi_cq(3)`'s `olen` describes). A receive queue writes every
//!   id's table (header, buffer, overflow) when it opens, so a post writes only the buffer's
//!   address: the overflow costs a post nothing, and the poll's length test stays one
//!   comparison against the buffer, the rest out of its way.
//! * **checksum offload both ways** when the device offers it (virtio 1.2 §5.1.6.2,
//!   §5.1.6.4): with `VIRTIO_NET_F_CSUM` [`push_checksummed`](TxQueue::push_checksummed) writes
//!   `NEEDS_CSUM`, `csum_start` and `csum_offset` into the id's transmit header (a plain
//!   `push` clears its flags); with `VIRTIO_NET_F_GUEST_CSUM` a received header may carry
//!   `DATA_VALID` (the TCP/UDP checksum checked right: marked in the completion's `checksum`;
//!   the IPv4 header's is never covered) or `NEEDS_CSUM` (a sender on the same host left the
//!   checksum partial: the frame crossed no wire, so it is marked verified as Linux takes it,
//!   and marked [`l4_partial`](RxChecksum::l4_partial), since its checksum field holds only
//!   the pseudo-header's sum — core's IPv4 path trusts the mark and never reads the field;
//!   `ringfab-smoltcp` completes the field before smoltcp sums the segment). Any other header
//!   flag or GSO type is a `DeviceStatus` (the checksum flags too, without `GUEST_CSUM`).
//! * **no selective write-back.** The device returns every buffer; a [`Report::ErrorsOnly`]
//!   frame that succeeded is reclaimed silently by `poll`.
//! * **notifications only when asked**: `avail_event` with `EVENT_IDX`, else
//!   `VIRTQ_USED_F_NO_NOTIFY`; interrupts are asked for with `used_event` (or by clearing
//!   `VIRTQ_AVAIL_F_NO_INTERRUPT`), so a disarmed queue costs the device nothing.
//! * **flush and close are a per-queue reset** (`VIRTIO_F_RING_RESET`, required): buffers the
//!   device used before the reset complete normally, the others flushed.
//! * **multiqueue through the control queue**: `VIRTIO_NET_CTRL_MQ_VQ_PAIRS_SET` at bring-up;
//!   with `VIRTIO_NET_F_RSS`, [`Nic::set_rss`] sends `VIRTIO_NET_CTRL_MQ_RSS_CONFIG`. Without
//!   RSS the device steers by its own rule (QEMU: the backend's queue; one-queue backends
//!   deliver everything to queue pair 0) and [`Nic::set_rss`] is `Unsupported`.
//! * **statistics are software counters**: virtio has no statistics registers; the driver
//!   counts what its queues complete.
//! * **critical faults** (`ringfab-hal`'s "Critical faults"): after
//!   [`ringfab_hal::queue::STALL_POLLS`] empty polls with work pending, a queue
//!   reads `device_status` and its `queue_enable` (§4.1.4.3): all-ones is a device that is gone
//!   ([`QueueFault::Removed`]), `DEVICE_NEEDS_RESET` (§2.1.2) a device that failed
//!   ([`QueueFault::NeedsReset`]), `DRIVER_OK` clear a device that was reset
//!   ([`QueueFault::Reset`], §2.1: a reset writes 0), a clear `queue_enable` a queue reset
//!   by someone else ([`QueueFault::Disabled`], §2.6.1). [`Nic::recover`] then resets the
//!   device and brings it up again (§2.1.2: "the driver MUST reset the device").
#![no_std]
#![deny(unsafe_code)]

pub mod desc;
mod regs;
mod transport;
mod virtq;

use core::ptr::NonNull;
// The statistics are 64-bit counts (`Stats`). Where the target has no 64-bit atomics (32-bit
// Arm) they are `portable-atomic`'s, which take a short lock; targets with them keep `core`'s
// type and its code (docs/architecture.md, "Targets without 64-bit atomics").
#[cfg(target_has_atomic = "64")]
use core::sync::atomic::AtomicU64;
use core::sync::atomic::Ordering;
use core::time::Duration;

#[cfg(not(target_has_atomic = "64"))]
use portable_atomic::AtomicU64;
use ringfab_hal::queue::StallCount;
use ringfab_hal::{
    Capabilities, DmaRegion, Error, Link, MacAddr, Nic, Offloads, Platform, PushError, Queue,
    QueueFault, Report, Result, RssCaps, RssConfig, RssHashes, RssSaved, RxBuffer, RxChecksum,
    RxCompletion, RxConfig, RxError, RxMode, RxQueue, Stats, Token, TxChecksum, TxCompletion,
    TxConfig, TxError, TxQueue, TxSegment,
};
use spin::Mutex;

use crate::desc::{Layout, NET_HDR_LEN};
use crate::regs::{self as r, common, ctrl, feature, netcfg, status};
use crate::transport::Transport;
use crate::virtq::{Hdr, Seg, Virtq};

/// The PCI functions this driver drives, `(vendor, device)`: a modern virtio network device
/// (0x1040 + device type 1, virtio 1.2 §4.1.2.1) and a transitional one (§4.1.2.3), which also
/// has the modern interface the driver uses. QEMU's `virtio-net-pci,disable-legacy=on` is
/// 1af4:1041.
pub const PCI_IDS: &[(u16, u16)] = &[
    (r::VENDOR_VIRTIO, r::DEVICE_NET_MODERN),
    (r::VENDOR_VIRTIO, r::DEVICE_NET_TRANSITIONAL),
];

/// Whether this driver drives the PCI function `vendor:device` (one of [`PCI_IDS`]);
/// [`VirtioNet::new`] opens it.
pub fn drives(vendor: u16, device: u16) -> bool {
    PCI_IDS.contains(&(vendor, device))
}

/// Smallest ring the driver opens.
pub const MIN_DEPTH: usize = 2;
/// Largest ring: QEMU's `VIRTQUEUE_MAX_SIZE`, and the most a queue's shadow is sized for here.
pub const MAX_DEPTH: usize = 1024;
/// Most segments per transmitted frame: an indirect table of eight, one for the header.
pub const MAX_TX_SEGMENTS: usize = desc::INDIRECT_ENTRIES - 1;
/// Longest frame, Ethernet header included, FCS excluded. A virtio-net device without
/// `VIRTIO_NET_F_MTU` states no limit; ringfab keeps the Intel drivers' jumbo size so that
/// frames stay exchangeable between its NICs.
pub const MAX_FRAME_LEN: usize = 9014;
/// Largest receive buffer a queue accepts.
pub const MAX_RX_BUF_LEN: u32 = 65536;
/// Queue pairs the driver uses at most (its open-queue bitmaps are 64 bits).
pub const MAX_QUEUE_PAIRS: u16 = 64;

/// Device reset: polls of `device_status` for 0, 1 ms apart (§4.1.4.3.2).
const RESET_POLLS: u32 = 100;
const RESET_STEP: Duration = Duration::from_millis(1);
/// Queue reset and control commands: polls 10 µs apart, up to 10 ms.
const QUEUE_POLLS: u32 = 1000;
const QUEUE_STEP: Duration = Duration::from_micros(10);
/// Control queue depth.
const CTRL_DEPTH: usize = 8;
/// Where the control command's `ack` byte sits in its buffer page.
const CTRL_ACK_AT: usize = 1024;

/// The control queue: a virtqueue and a page for commands.
struct Ctrl<D: DmaRegion> {
    vq: Virtq<D, CTRL_DEPTH>,
    buf: D,
    notify_at: usize,
    index: u16,
}

/// Control-path state, behind the NIC's lock.
struct State<D: DmaRegion> {
    /// Bit i: transmit queue i is open.
    tx_open: u64,
    /// Bit i: receive queue i is open.
    rx_open: u64,
    /// The control queue, when `CTRL_VQ` was negotiated.
    ctrl: Option<Ctrl<D>>,
    /// What bring-up read and negotiated.
    dev: DevInfo,
    /// The receive filter mode last set (restored by [`Nic::recover`]).
    mode: RxMode,
    /// The set-up [`Nic::set_rss`] last programmed (restored by [`Nic::recover`]).
    rss_saved: Option<RssSaved>,
}

/// Facts from feature negotiation and the device configuration.
#[derive(Clone, Copy, Debug, Default)]
struct DevInfo {
    features: u64,
    mac: MacAddr,
    /// Queue pairs the driver uses.
    pairs: u16,
    /// Largest size of data queue 0.
    max_depth: usize,
    /// RSS key and table length and the hash types the device supports.
    rss: Option<(usize, usize, u32)>,
}

/// Software statistics, counted by the queues.
#[derive(Default)]
struct Counters {
    rx_packets: AtomicU64,
    rx_bytes: AtomicU64,
    tx_packets: AtomicU64,
    tx_bytes: AtomicU64,
}

/// A virtio-net device brought up over platform `P`.
pub struct VirtioNet<P: Platform> {
    platform: P,
    t: Transport<P::Mmio>,
    vectors: u16,
    state: Mutex<State<P::Dma>>,
    counters: Counters,
}

impl<P: Platform> core::fmt::Debug for VirtioNet<P> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let dev = self.state.lock().dev;
        f.debug_struct("VirtioNet")
            .field("features", &format_args!("{:#x}", dev.features))
            .field("pairs", &dev.pairs)
            .field("vectors", &self.vectors)
            .finish_non_exhaustive()
    }
}

impl<P: Platform> VirtioNet<P> {
    /// Brings the device up (§3.1.1): checks the PCI id, enables memory space and bus
    /// mastering, finds the virtio structures, resets the device, negotiates features
    /// (`VERSION_1`, `ACCESS_PLATFORM`, `MAC`, `INDIRECT_DESC` and `RING_RESET` required;
    /// `STATUS`, `CTRL_VQ`, `CTRL_RX`, `CTRL_RX_EXTRA`, `MQ`, `EVENT_IDX` and `RSS` taken when
    /// offered; checksum offloads taken, segmentation offloads left off), reads the MAC and queue pairs,
    /// sets up the control queue, sets `DRIVER_OK`, activates every queue pair and the
    /// default receive filter (own unicast and broadcast). Data queues are set up when opened.
    ///
    /// # Errors
    /// [`Error::UnsupportedDevice`] for a PCI id not in [`PCI_IDS`]; [`Error::Unsupported`]
    /// when the virtio structures are missing; [`Error::BarUnavailable`] from the platform;
    /// [`Error::ResetTimeout`] if the device does not finish its reset;
    /// [`Error::StationAddress`] if its `mac` is a group or all-zero address (or not offered);
    /// [`Error::FeaturesRefused`] if a required feature is missing or `FEATURES_OK` is
    /// refused (the device is then left with `FAILED` set); [`Error::DmaAlloc`] for the
    /// control queue; [`Error::DeviceCommand`] if a control command fails.
    pub fn new(platform: P) -> Result<Self> {
        let id = platform.config_read32(r::PCI_ID);
        let (vendor, device) = (id as u16, (id >> 16) as u16);
        if !drives(vendor, device) {
            return Err(Error::UnsupportedDevice { vendor, device });
        }
        let cmd = platform.config_read32(r::PCI_COMMAND);
        // The status half is write-1-to-clear: write it as zero.
        platform.config_write32(
            r::PCI_COMMAND,
            cmd & 0xffff | r::CMD_MEMORY | r::CMD_BUS_MASTER,
        );
        let caps = transport::find_caps(&platform)?;
        let t = Transport::new(&platform, caps)?;
        let vectors = platform.irq_vectors();
        let nic = VirtioNet {
            platform,
            t,
            vectors,
            state: Mutex::new(State {
                tx_open: 0,
                rx_open: 0,
                ctrl: None,
                dev: DevInfo::default(),
                mode: RxMode::default(),
                rss_saved: None,
            }),
            counters: Counters::default(),
        };
        {
            let mut st = nic.state.lock();
            nic.bring_up(&mut st)?;
        }
        Ok(nic)
    }

    /// The platform the device lives on.
    pub fn platform(&self) -> &P {
        &self.platform
    }

    /// The feature bits negotiated with the device.
    pub fn features(&self) -> u64 {
        self.state.lock().dev.features
    }

    /// Whether the device has set `DEVICE_NEEDS_RESET` (§2.1.2): it met an error (a malformed
    /// descriptor, a buffer the IOMMU refused) and processes nothing until [`Nic::reset`].
    pub fn needs_reset(&self) -> bool {
        self.t.status() & status::NEEDS_RESET != 0
    }

    /// Whether the device still holds virtqueue `vq_index`, or the critical fault that took
    /// it.
    fn queue_fault(&self, vq_index: u16) -> Option<QueueFault> {
        // `queue_select` is shared: the state lock.
        let _st = self.state.lock();
        let s = self.t.status();
        // No status has every bit set (FAILED and DRIVER_OK together mean nothing, §2.1): an
        // all-ones read is a device that no longer answers (surprise removal).
        if s == u8::MAX {
            return Some(QueueFault::Removed);
        }
        // §2.1.2: DEVICE_NEEDS_RESET, the device met an error and stopped.
        if s & status::NEEDS_RESET != 0 {
            return Some(QueueFault::NeedsReset);
        }
        // The driver set DRIVER_OK at bring-up; only a reset clears it (§2.1, §4.1.4.3.2).
        if s & status::DRIVER_OK == 0 {
            return Some(QueueFault::Reset);
        }
        // §4.1.4.3: queue_enable reads 0 after a queue reset (§2.6.1) the driver did not ask for.
        self.t.w16(common::QUEUE_SELECT, vq_index);
        (self.t.c16(common::QUEUE_ENABLE) == 0).then_some(QueueFault::Disabled)
    }

    /// Resets the device and waits for `device_status` to read 0 (§4.1.4.3.2).
    fn device_reset(&self) -> Result {
        self.t.set_status(0);
        for _ in 0..RESET_POLLS {
            if self.t.status() == 0 {
                return Ok(());
            }
            self.platform.delay(RESET_STEP);
        }
        Err(Error::ResetTimeout)
    }

    /// Negotiates features (§3.1.1 steps 4–6); returns the accepted set.
    fn negotiate(&self) -> Result<u64> {
        let read = |sel: u32| {
            self.t.w32(common::DEVICE_FEATURE_SELECT, sel);
            u64::from(self.t.c32(common::DEVICE_FEATURE))
        };
        let offered = read(0) | read(1) << 32;
        let fail = |e| {
            self.t.set_status(self.t.status() | status::FAILED);
            Err(e)
        };
        let missing = feature::REQUIRED & !offered;
        if missing != 0 {
            return fail(Error::FeaturesRefused { missing });
        }
        let accepted = offered & feature::WANTED;
        for sel in 0..2u32 {
            self.t.w32(common::DRIVER_FEATURE_SELECT, sel);
            self.t
                .w32(common::DRIVER_FEATURE, (accepted >> (32 * sel)) as u32);
        }
        self.t.set_status(self.t.status() | status::FEATURES_OK);
        if self.t.status() & status::FEATURES_OK == 0 {
            return fail(Error::FeaturesRefused { missing: 0 });
        }
        Ok(accepted)
    }

    /// Reset, negotiation, configuration, control queue, `DRIVER_OK`, queue pairs, filter.
    fn bring_up(&self, st: &mut State<P::Dma>) -> Result {
        st.ctrl = None;
        self.device_reset()?;
        self.t.set_status(status::ACKNOWLEDGE);
        self.t.set_status(status::ACKNOWLEDGE | status::DRIVER);
        let features = self.negotiate()?;
        self.t.w16(common::CONFIG_MSIX_VECTOR, r::NO_VECTOR);

        let mut mac = [0u8; 6];
        for (i, b) in mac.iter_mut().enumerate() {
            *b = self.t.d8(netcfg::MAC + i).unwrap_or(0);
        }
        if !MacAddr(mac).is_station() {
            // A group or zero address (or none offered, VIRTIO_NET_F_MAC): no frame may carry it
            // as its source, and this driver has no randomness to make one (§5.1.5). §3.1.1: a
            // driver that cannot go on sets FAILED.
            self.t.set_status(self.t.status() | status::FAILED);
            return Err(Error::StationAddress { mac: MacAddr(mac) });
        }
        let num_queues = self.t.c16(common::NUM_QUEUES);
        let device_pairs = if features & feature::MQ != 0 {
            self.t.d16(netcfg::MAX_VIRTQUEUE_PAIRS).unwrap_or(1).max(1)
        } else {
            1
        };
        // Data queues the device really has (the control queue is the last one).
        let present = num_queues.saturating_sub(1) / 2;
        let pairs = device_pairs.min(present).clamp(1, MAX_QUEUE_PAIRS);
        self.t.w16(common::QUEUE_SELECT, 0);
        let max_depth = usize::from(self.t.c16(common::QUEUE_SIZE)).min(MAX_DEPTH);
        let rss = (features & feature::RSS != 0)
            .then(|| {
                let key = usize::from(self.t.d8(netcfg::RSS_MAX_KEY_SIZE)?);
                let table = usize::from(self.t.d16(netcfg::RSS_MAX_INDIRECTION_TABLE_LENGTH)?);
                let hashes = self.t.d32(netcfg::SUPPORTED_HASH_TYPES)?;
                (key > 0 && table.is_power_of_two()).then_some((key, table, hashes))
            })
            .flatten();
        st.dev = DevInfo {
            features,
            mac: MacAddr(mac),
            pairs,
            max_depth,
            rss,
        };

        if features & feature::CTRL_VQ != 0 {
            // §5.1.2: the control queue follows the 2N data queues of max_virtqueue_pairs,
            // which §5.1.4 allows up to 0x8000: 2N does not fit `queue_select` (16 bits,
            // §4.1.4.3) there, and a device may report more. Computed wide and checked
            // against num_queues, so that the control queue never lands on a data queue.
            let Some(index) = u16::try_from(2 * u32::from(device_pairs))
                .ok()
                .filter(|&i| i < num_queues)
            else {
                // §3.1.1: a driver that cannot go on sets FAILED.
                self.t.set_status(self.t.status() | status::FAILED);
                return Err(Error::ControlQueueIndex {
                    pairs: device_pairs,
                    queues: num_queues,
                });
            };
            let len = Layout::new(CTRL_DEPTH).len;
            let mem = self.platform.alloc_dma(len)?;
            let buf = self.platform.alloc_dma(4096)?;
            let mut vq = Virtq::new(mem, features & feature::EVENT_IDX != 0)?;
            let notify_at = self.setup_queue(index, &mut vq, None)?;
            st.ctrl = Some(Ctrl {
                vq,
                buf,
                notify_at,
                index,
            });
        }
        self.t.set_status(self.t.status() | status::DRIVER_OK);

        if features & feature::MQ != 0 && pairs > 1 {
            self.command(
                st,
                ctrl::CLASS_MQ,
                ctrl::MQ_VQ_PAIRS_SET,
                &pairs.to_le_bytes(),
            )?;
        }
        if let Some((key_len, table_len, _)) = st.dev.rss {
            // Until RSS is programmed the device steers by its own rule — QEMU by the
            // backend's queue, which a multiqueue tap picks by its own flow hash — so frames
            // would land on any pair. RSS with no hash type sends every frame to
            // `unclassified_queue` 0 (§5.1.6.5.7.1): what "no RSS" means on every ringfab NIC.
            let (key, table) = ([0u8; 255], [0u16; 128]);
            self.program_rss(
                st,
                &RssConfig {
                    key: &key[..key_len.min(key.len())],
                    table: &table[..table_len.min(table.len())],
                    hashes: RssHashes::default(),
                },
            )?;
        }
        if features & feature::CTRL_RX != 0 {
            self.apply_rx_mode(st, RxMode::default())?;
        }
        Ok(())
    }

    /// Programs virtqueue `index` over `vq`'s memory and enables it (§4.1.5.1.3); returns the
    /// offset of its doorbell. The queue is reset first, so that enabling it after
    /// `DRIVER_OK` is the re-enable `VIRTIO_F_RING_RESET` allows (§2.6.1). The caller holds
    /// the state lock (`queue_select` is shared).
    fn setup_queue<const N: usize>(
        &self,
        index: u16,
        vq: &mut Virtq<P::Dma, N>,
        vector: Option<u16>,
    ) -> Result<usize> {
        self.t.w16(common::QUEUE_SELECT, index);
        let max = usize::from(self.t.c16(common::QUEUE_SIZE));
        if max == 0 {
            return Err(Error::QueueIndex {
                index,
                count: self.t.c16(common::NUM_QUEUES),
            });
        }
        if N > max {
            return Err(Error::QueueDepth {
                depth: N,
                min: MIN_DEPTH,
                max: max.min(MAX_DEPTH),
            });
        }
        self.queue_reset(index)?;
        self.t.w16(common::QUEUE_SIZE, N as u16);
        let want = vector.unwrap_or(r::NO_VECTOR);
        self.t.w16(common::QUEUE_MSIX_VECTOR, want);
        if self.t.c16(common::QUEUE_MSIX_VECTOR) != want {
            return Err(Error::InterruptUnavailable { vector: want });
        }
        let base = vq.mem().iova().0;
        let l = vq.layout();
        self.t.w64(common::QUEUE_DESC, base + l.desc as u64);
        self.t.w64(common::QUEUE_DRIVER, base + l.avail as u64);
        self.t.w64(common::QUEUE_DEVICE, base + l.used as u64);
        let notify_at = self
            .t
            .notify_at(self.t.c16(common::QUEUE_NOTIFY_OFF))
            .ok_or(Error::Unsupported)?;
        self.t.w16(common::QUEUE_ENABLE, 1);
        Ok(notify_at)
    }

    /// Resets the selected queue `index` and waits for `queue_reset` to read 0 (§4.1.4.3.2).
    fn queue_reset(&self, index: u16) -> Result {
        self.t.w16(common::QUEUE_RESET, 1);
        for _ in 0..QUEUE_POLLS {
            if self.t.c16(common::QUEUE_RESET) == 0 {
                return Ok(());
            }
            self.platform.delay(QUEUE_STEP);
        }
        Err(Error::QueueTimeout { index })
    }

    /// Flush: reset queue `index` and, once the device acknowledges the reset
    /// (`queue_reset` reading 0, §2.6.1 / §4.1.4.3.2: the device has stopped using the
    /// virtqueue), take every buffer back and, with `again`, set the queue up again. A reset
    /// not acknowledged takes nothing back: the device may still use every buffer it holds
    /// (the hal's "Flush and quiet devices").
    ///
    /// # Errors
    /// The fault to record: [`QueueFault::StopTimeout`] for a reset not acknowledged,
    /// [`QueueFault::StartTimeout`] for a set-up the device refused (its `queue_enable`
    /// not reading back 1).
    fn restart<const N: usize>(
        &self,
        index: u16,
        vq: &mut Virtq<P::Dma, N>,
        vector: Option<u16>,
        again: bool,
    ) -> core::result::Result<(), QueueFault> {
        let _st = self.state.lock();
        self.t.w16(common::QUEUE_SELECT, index);
        if self.queue_reset(index).is_err() {
            return Err(QueueFault::StopTimeout);
        }
        vq.take_back();
        if !again {
            return Ok(());
        }
        self.setup_queue(index, vq, vector)
            .map_err(|_| QueueFault::StartTimeout)?;
        self.t.w16(common::QUEUE_SELECT, index);
        if self.t.c16(common::QUEUE_ENABLE) != 1 {
            return Err(QueueFault::StartTimeout);
        }
        Ok(())
    }

    /// Close: reset queue `index` so the device lets go of its memory.
    fn stop(&self, index: u16) {
        let _st = self.state.lock();
        self.t.w16(common::QUEUE_SELECT, index);
        let _ = self.queue_reset(index);
    }

    /// Sends one control command (§5.1.6.5) and waits for its `ack`.
    fn command(&self, st: &mut State<P::Dma>, class: u8, command: u8, data: &[u8]) -> Result {
        let err = Error::DeviceCommand { class, command };
        let c = st.ctrl.as_mut().ok_or(Error::Unsupported)?;
        if 2 + data.len() > CTRL_ACK_AT {
            return Err(err);
        }
        c.buf.write_bytes(0, &[class, command]);
        c.buf.write_bytes(2, data);
        c.buf.write_bytes(CTRL_ACK_AT, &[0xff]);
        let iova = c.buf.iova().0;
        let segs = [
            Seg {
                addr: iova,
                len: (2 + data.len()) as u32,
                write: false,
            },
            Seg {
                addr: iova + CTRL_ACK_AT as u64,
                len: 1,
                write: true,
            },
        ];
        let id = c.vq.push(&segs, Token(0)).map_err(|_| err)?;
        if c.vq.publish() {
            self.t.notify(c.notify_at, c.index);
        }
        for _ in 0..QUEUE_POLLS {
            while let Some(u) = c.vq.next() {
                // An answer to an earlier command that timed out is dropped here.
                if u.id == id {
                    let mut ack = [0xffu8];
                    c.buf.read_bytes(CTRL_ACK_AT, &mut ack);
                    return if u.len >= 1 && ack[0] == ctrl::OK {
                        Ok(())
                    } else {
                        Err(err)
                    };
                }
            }
            self.platform.delay(QUEUE_STEP);
        }
        Err(err)
    }

    /// Sends `VIRTIO_NET_CTRL_MQ_RSS_CONFIG` for `rss` (§5.1.6.5.7.1). The caller holds the
    /// state lock.
    fn program_rss(&self, st: &mut State<P::Dma>, rss: &RssConfig<'_>) -> Result {
        let Some((key_len, table_len, types)) = st.dev.rss else {
            return Err(Error::Unsupported);
        };
        let h = rss.hashes;
        let mut hash_types = 0;
        for (on, bit) in [
            (h.ipv4, r::hash::IPV4),
            (h.ipv4_tcp, r::hash::TCPV4),
            (h.ipv4_udp, r::hash::UDPV4),
        ] {
            if on {
                hash_types |= bit;
            }
        }
        let pairs = st.dev.pairs;
        if rss.key.len() != key_len
            || rss.table.len() != table_len
            || rss.table.iter().any(|&q| q >= pairs)
            || hash_types & !types != 0
        {
            return Err(Error::RssConfig);
        }
        // struct virtio_net_rss_config (§5.1.6.5.7.1).
        let mut cmd = [0u8; 8 + 2 * 128 + 3 + 255];
        let mut n = 0;
        let mut put = |b: &[u8]| {
            cmd[n..n + b.len()].copy_from_slice(b);
            n += b.len();
        };
        if table_len > 128 {
            return Err(Error::RssConfig);
        }
        put(&hash_types.to_le_bytes());
        put(&((table_len - 1) as u16).to_le_bytes());
        put(&0u16.to_le_bytes()); // unclassified_queue: frames the hash skips go to queue 0
        for &q in rss.table {
            put(&q.to_le_bytes());
        }
        put(&pairs.to_le_bytes()); // max_tx_vq
        put(&[key_len as u8]);
        put(rss.key);
        self.command(st, ctrl::CLASS_MQ, ctrl::MQ_RSS_CONFIG, &cmd[..n])
            .map_err(|_| Error::RssConfig)
    }

    fn apply_rx_mode(&self, st: &mut State<P::Dma>, mode: RxMode) -> Result {
        let f = st.dev.features;
        if f & feature::CTRL_RX == 0 {
            // The device filters nothing it is not told to: it stays promiscuous.
            return if mode.promiscuous {
                Ok(())
            } else {
                Err(Error::Unsupported)
            };
        }
        if !mode.broadcast && f & feature::CTRL_RX_EXTRA == 0 {
            return Err(Error::Unsupported);
        }
        let rx = ctrl::CLASS_RX;
        self.command(st, rx, ctrl::RX_PROMISC, &[mode.promiscuous.into()])?;
        self.command(st, rx, ctrl::RX_ALLMULTI, &[mode.all_multicast.into()])?;
        if f & feature::CTRL_RX_EXTRA != 0 {
            self.command(st, rx, ctrl::RX_NOBCAST, &[(!mode.broadcast).into()])?;
        }
        Ok(())
    }

    fn check_depth<const N: usize>(max: usize) -> Result {
        if !N.is_power_of_two() || N < MIN_DEPTH || N > max {
            return Err(Error::QueueDepth {
                depth: N,
                min: MIN_DEPTH,
                max,
            });
        }
        Ok(())
    }

    /// Claims queue `index` of one direction or says why not.
    fn claim(&self, index: u16, tx: bool) -> Result {
        let mut st = self.state.lock();
        let pairs = st.dev.pairs;
        if index >= pairs {
            return Err(Error::QueueIndex {
                index,
                count: pairs,
            });
        }
        let open = if tx { &mut st.tx_open } else { &mut st.rx_open };
        if *open & (1 << index) != 0 {
            return Err(Error::QueueInUse { index });
        }
        *open |= 1 << index;
        Ok(())
    }

    fn release(&self, index: u16, tx: bool) {
        let mut st = self.state.lock();
        let open = if tx { &mut st.tx_open } else { &mut st.rx_open };
        *open &= !(1 << index);
    }

    /// The vector for a queue of pair `index` asking `interrupt`/`vector`, and its handle.
    fn interrupt_for(
        &self,
        index: u16,
        interrupt: bool,
        vector: Option<u16>,
    ) -> Result<Option<(u16, P::Wait)>> {
        if !interrupt {
            return Ok(None);
        }
        if self.vectors == 0 {
            return Err(Error::InterruptUnavailable {
                vector: vector.unwrap_or(index),
            });
        }
        // Default: pair i on vector i (modulo the vectors there are).
        let v = vector.unwrap_or(index % self.vectors);
        if v >= self.vectors {
            return Err(Error::InterruptUnavailable { vector: v });
        }
        Ok(Some((v, self.platform.irq(v)?)))
    }

    /// Claims, allocates and sets up the virtqueue of one direction of pair `index`.
    fn open_queue<const N: usize>(
        &self,
        index: u16,
        tx: bool,
        interrupt: bool,
        vector: Option<u16>,
    ) -> Result<(QueueCore<'_, P>, Virtq<P::Dma, N>)> {
        let dev = self.state.lock().dev;
        Self::check_depth::<N>(dev.max_depth)?;
        self.claim(index, tx)?;
        let vq_index = 2 * index + u16::from(tx);
        let made = (|| {
            let irq = self.interrupt_for(index, interrupt, vector)?;
            let mem = self.platform.alloc_dma(Layout::new(N).len)?;
            let mut vq = Virtq::new(mem, dev.features & feature::EVENT_IDX != 0)?;
            let v = irq.as_ref().map(|(v, _)| *v);
            let notify_at = {
                let _st = self.state.lock();
                self.setup_queue(vq_index, &mut vq, v)?
            };
            Ok((irq, vq, notify_at))
        })();
        match made {
            Ok((irq, vq, notify_at)) => {
                let (vector, wait) = irq.unzip();
                Ok((
                    QueueCore {
                        nic: self,
                        index,
                        vq_index,
                        tx,
                        notify_at,
                        vector,
                        wait,
                        fault: None,
                        stalls: StallCount::NONE,
                    },
                    vq,
                ))
            }
            Err(e) => {
                self.release(index, tx);
                Err(e)
            }
        }
    }
}

impl<P: Platform> Nic for VirtioNet<P> {
    type Wait = P::Wait;
    type Dma = P::Dma;
    type Mapping = P::Mapping;
    type Tx<'a, const N: usize>
        = VirtioNetTx<'a, P, N>
    where
        Self: 'a;
    type Rx<'a, const N: usize>
        = VirtioNetRx<'a, P, N>
    where
        Self: 'a;

    fn capabilities(&self) -> Capabilities {
        let dev = self.state.lock().dev;
        let mut caps = Capabilities::default();
        caps.tx_queues = dev.pairs;
        caps.rx_queues = dev.pairs;
        caps.min_depth = MIN_DEPTH;
        caps.max_depth = dev.max_depth;
        caps.max_tx_segments = MAX_TX_SEGMENTS;
        caps.max_frame_len = MAX_FRAME_LEN;
        caps.max_rx_buf_len = MAX_RX_BUF_LEN;
        caps.mac = dev.mac;
        // DATA_VALID covers the TCP/UDP checksum only: the IPv4 header's stays software's.
        let mut offloads = Offloads::default();
        offloads.rx_l4_checksum = dev.features & feature::GUEST_CSUM != 0;
        offloads.tx_l4_checksum = dev.features & feature::CSUM != 0;
        caps.offloads = offloads;
        caps.rss = dev.rss.map(|(key, table, types)| {
            let mut hashes = RssHashes::default();
            hashes.ipv4 = types & r::hash::IPV4 != 0;
            hashes.ipv4_tcp = types & r::hash::TCPV4 != 0;
            hashes.ipv4_udp = types & r::hash::UDPV4 != 0;
            let mut rss = RssCaps::default();
            rss.key_len = key;
            rss.table_len = table;
            rss.hashes = hashes;
            rss
        });
        caps.in_order_completion = false;
        caps
    }

    /// Link state from the configuration `status` field (`VIRTIO_NET_F_STATUS`; without it
    /// the link is always up). virtio does not report speed or duplex without
    /// `VIRTIO_NET_F_SPEED_DUPLEX`, which the driver does not negotiate: they read 0 / false.
    fn link(&self) -> Link {
        let f = self.state.lock().dev.features;
        let up = f & feature::STATUS == 0
            || self
                .t
                .d16(netcfg::STATUS)
                .is_some_and(|s| s & netcfg::S_LINK_UP != 0);
        Link {
            up,
            speed_mbps: 0,
            full_duplex: false,
        }
    }

    fn reset(&self) -> Result {
        let mut st = self.state.lock();
        if st.tx_open != 0 || st.rx_open != 0 {
            return Err(Error::QueuesOpen);
        }
        st.mode = RxMode::default();
        st.rss_saved = None;
        self.bring_up(&mut st)
    }

    fn recover(&self) -> Result {
        let mut st = self.state.lock();
        let s = self.t.status();
        if s == u8::MAX {
            return Err(Error::DeviceRemoved);
        }
        // §2.1.2: a device with DEVICE_NEEDS_RESET must be reset; one without DRIVER_OK was
        // reset. Otherwise only a queue was lost and the device is fine as it is.
        if s & status::NEEDS_RESET == 0 && s & status::DRIVER_OK != 0 {
            return Ok(());
        }
        self.bring_up(&mut st)?;
        let mode = st.mode;
        if st.dev.features & feature::CTRL_RX != 0 && mode != RxMode::default() {
            self.apply_rx_mode(&mut st, mode)?;
        }
        if let Some(rss) = st.rss_saved {
            self.program_rss(&mut st, &rss.config())?;
        }
        Ok(())
    }

    fn open_tx<const N: usize>(
        &self,
        index: u16,
        config: TxConfig,
    ) -> Result<VirtioNetTx<'_, P, N>> {
        let csum = self.state.lock().dev.features & feature::CSUM != 0;
        let (q, mut vq) = self.open_queue::<N>(index, true, config.interrupt, config.vector)?;
        // Every chain's fixed parts, written once: the avail ring is empty, so the device
        // reads none of them yet (§2.7.13).
        vq.set_tx_chains();
        Ok(VirtioNetTx { q, vq, csum })
    }

    fn open_rx<const N: usize>(
        &self,
        index: u16,
        config: RxConfig,
    ) -> Result<VirtioNetRx<'_, P, N>> {
        if config.buf_len == 0 || config.buf_len > MAX_RX_BUF_LEN {
            return Err(Error::BufferSize {
                len: config.buf_len,
                max: MAX_RX_BUF_LEN,
            });
        }
        let (q, mut vq) = self.open_queue::<N>(index, false, config.interrupt, config.vector)?;
        let spill = (MAX_FRAME_LEN as u32).saturating_sub(config.buf_len);
        let overflow_mem = if spill > 0 {
            // On error `q` is dropped, which resets the virtqueue and frees the index.
            Some(self.platform.alloc_dma(spill as usize)?)
        } else {
            None
        };
        // Every chain's fixed parts, written once: the avail ring is empty, so the device
        // reads none of them yet (§2.7.13).
        let tail = overflow_mem.as_ref().map(|m| Seg {
            addr: m.iova().0,
            len: spill,
            write: true,
        });
        vq.set_rx_chains(config.buf_len, tail);
        let hdr_reject = if self.state.lock().dev.features & feature::GUEST_CSUM != 0 {
            0xffff & !u32::from(r::hdr::F_DATA_VALID | r::hdr::F_NEEDS_CSUM)
        } else {
            0xffff
        };
        Ok(VirtioNetRx {
            q,
            buf_len: config.buf_len,
            vq,
            room: config.buf_len + spill,
            hdr_reject,
            _overflow_mem: overflow_mem,
        })
    }

    fn set_rss(&self, rss: &RssConfig<'_>) -> Result {
        let mut st = self.state.lock();
        self.program_rss(&mut st, rss)?;
        st.rss_saved = RssSaved::of(rss);
        Ok(())
    }

    fn set_rx_mode(&self, mode: RxMode) -> Result {
        let mut st = self.state.lock();
        self.apply_rx_mode(&mut st, mode)?;
        st.mode = mode;
        Ok(())
    }

    fn stats(&self) -> Stats {
        let c = &self.counters;
        let mut s = Stats::default();
        s.rx_packets = c.rx_packets.load(Ordering::Relaxed);
        s.rx_bytes = c.rx_bytes.load(Ordering::Relaxed);
        s.tx_packets = c.tx_packets.load(Ordering::Relaxed);
        s.tx_bytes = c.tx_bytes.load(Ordering::Relaxed);
        s
    }

    /// virtio reports no receive error bits: a frame it cannot deliver it does not deliver.
    fn rx_error_name(&self, _bit: u32) -> Option<&'static str> {
        None
    }

    fn alloc_dma(&self, len: usize) -> Result<P::Dma> {
        self.platform.alloc_dma(len)
    }

    // The crate's one unsafe item: it only forwards the caller's promise to the platform.
    #[allow(
        unsafe_code,
        reason = "forwards Nic::map_dma's contract to Platform::map_dma"
    )]
    unsafe fn map_dma(&self, cpu: NonNull<u8>, len: usize) -> Result<P::Mapping> {
        // SAFETY: `Nic::map_dma` requires of our caller exactly what `Platform::map_dma`
        // requires of us (memory valid and unreferenced while mapped).
        unsafe { self.platform.map_dma(cpu, len) }
    }

    fn irq_vectors(&self) -> u16 {
        self.vectors
    }

    fn irq(&self, vector: u16) -> Result<P::Wait> {
        if vector >= self.vectors {
            return Err(Error::InterruptUnavailable { vector });
        }
        self.platform.irq(vector)
    }
}

/// What both queue types share: the claimed pair, the virtqueue index, its doorbell and its
/// interrupt. Dropping it releases the index (after the queue type reset the virtqueue).
struct QueueCore<'a, P: Platform> {
    nic: &'a VirtioNet<P>,
    index: u16,
    vq_index: u16,
    tx: bool,
    notify_at: usize,
    vector: Option<u16>,
    wait: Option<P::Wait>,
    /// The critical fault found, sticky.
    fault: Option<QueueFault>,
    /// Empty polls in a row with work pending.
    stalls: StallCount,
}

impl<P: Platform> QueueCore<'_, P> {
    #[inline]
    fn kick(&self) {
        self.nic.t.notify(self.notify_at, self.vq_index);
    }

    /// Counts a poll: `stuck` if it found nothing while work was pending, and checks the device
    /// when [`StallCount`] says so (after [`STALL_POLLS`](ringfab_hal::queue::STALL_POLLS)
    /// stuck polls in a row, then at longer periods).
    #[inline]
    fn after_poll(&mut self, stuck: bool) {
        if self.stalls.poll(stuck) {
            self.check();
        }
    }

    /// Reads the device's state and records a fault (once: faults are sticky).
    #[cold]
    fn check(&mut self) -> Option<QueueFault> {
        if self.fault.is_none() {
            self.fault = self.nic.queue_fault(self.vq_index);
        }
        self.fault
    }

    /// Flush (the hal's "Flush and quiet devices"): a healthy queue is reset and, the reset
    /// acknowledged, has its buffers taken back and is set up again; a queue whose fault
    /// proves the device quiet only has its buffers taken back; any other faulted queue is
    /// reset again and has its buffers taken back only if the device acknowledges it. A reset
    /// not acknowledged records [`QueueFault::StopTimeout`] and holds the buffers; a set-up
    /// not acknowledged records [`QueueFault::StartTimeout`].
    fn restart<const N: usize>(&mut self, vq: &mut Virtq<P::Dma, N>) {
        match self.fault {
            Some(f) if f.device_quiet() => vq.take_back(),
            Some(_) => {
                let _ = self.nic.restart(self.vq_index, vq, self.vector, false);
            }
            None => {
                if let Err(f) = self.nic.restart(self.vq_index, vq, self.vector, true) {
                    self.fault = Some(f);
                }
            }
        }
    }

    /// Close: reset the virtqueue unless the device is gone (then it would only wait out
    /// the bound).
    fn stop(&self) {
        if self.fault != Some(QueueFault::Removed) {
            self.nic.stop(self.vq_index);
        }
    }
}

impl<P: Platform> Drop for QueueCore<'_, P> {
    fn drop(&mut self) {
        self.nic.release(self.index, self.tx);
    }
}

/// [`Queue`] for a queue type: both are a `QueueCore` `q` over a virtqueue `vq`, so what they
/// share is the same text.
macro_rules! impl_queue {
    ($queue:ident) => {
        impl<P: Platform, const N: usize> Queue for $queue<'_, P, N> {
            type Wait = P::Wait;

            fn index(&self) -> u16 {
                self.q.index
            }

            fn depth(&self) -> usize {
                N
            }

            #[inline]
            fn free(&self) -> usize {
                self.vq.free()
            }

            #[inline]
            fn pending(&self) -> usize {
                self.vq.pending()
            }

            #[inline]
            fn doorbell(&mut self) {
                if self.vq.publish() {
                    self.q.kick();
                }
            }

            fn flush(&mut self) {
                self.q.restart(&mut self.vq);
            }

            fn fault(&self) -> Option<QueueFault> {
                self.q.fault
            }

            fn check(&mut self) -> Option<QueueFault> {
                self.q.check()
            }

            fn interrupt(&self) -> Option<&P::Wait> {
                self.q.wait.as_ref()
            }

            fn set_interrupt(&mut self, armed: bool) {
                if self.q.vector.is_some() {
                    self.vq.arm(armed);
                    self.q.stalls.interrupt_armed(armed);
                }
            }

            fn interrupt_vector(&self) -> Option<u16> {
                self.q.vector
            }
        }
    };
}

/// An open transmit queue of depth `N`.
pub struct VirtioNetTx<'a, P: Platform, const N: usize> {
    /// Declared before `vq`: released after `Drop for VirtioNetTx` reset the virtqueue.
    q: QueueCore<'a, P>,
    vq: Virtq<P::Dma, N>,
    /// `VIRTIO_NET_F_CSUM` was negotiated: the device completes partial checksums.
    csum: bool,
}

impl<P: Platform, const N: usize> core::fmt::Debug for VirtioNetTx<'_, P, N> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("VirtioNetTx")
            .field("index", &self.q.index)
            .field("depth", &N)
            .field("pending", &self.vq.pending())
            .finish_non_exhaustive()
    }
}

impl<P: Platform, const N: usize> VirtioNetTx<'_, P, N> {
    /// Used-ring entries this queue refused: ids out of range or not held by the device, and
    /// used-index jumps. Zero for an honest device.
    pub fn device_errors(&self) -> u64 {
        self.vq.errors()
    }
}

impl<P: Platform, const N: usize> Drop for VirtioNetTx<'_, P, N> {
    fn drop(&mut self) {
        self.q.stop();
    }
}

impl_queue!(VirtioNetTx);

impl<P: Platform, const N: usize> VirtioNetTx<'_, P, N> {
    /// `push` and `push_checksummed`: one frame behind a transmit header `hdr`.
    #[inline(always)]
    fn push_with(
        &mut self,
        segments: &[TxSegment],
        token: Token,
        report: Report,
        hdr: Hdr,
    ) -> core::result::Result<(), PushError> {
        if let Some(f) = self.q.fault {
            return Err(PushError::Fault(f));
        }
        let count = segments.len();
        if count.wrapping_sub(1) >= MAX_TX_SEGMENTS {
            return Err(PushError::Segments {
                count,
                max: MAX_TX_SEGMENTS,
            });
        }
        let mut total = 0usize;
        let mut empty = false;
        for s in segments {
            total += usize::from(s.len);
            empty |= s.len == 0;
        }
        if empty || total > MAX_FRAME_LEN {
            return Err(PushError::FrameLength {
                len: total,
                max: MAX_FRAME_LEN,
            });
        }
        if let Hdr::Checksum { start, offset } = hdr {
            if usize::from(start) + usize::from(offset) + 2 > total {
                return Err(PushError::Checksum { start, offset });
            }
        }
        let always = matches!(report, Report::Always);
        // `cap` carries the frame length for the statistics: the device writes nothing.
        self.vq
            .push_tx(segments, hdr, token, always, total as u32)
            .map(|_| ())
    }
}

impl<P: Platform, const N: usize> TxQueue for VirtioNetTx<'_, P, N> {
    #[inline]
    fn push(
        &mut self,
        segments: &[TxSegment],
        token: Token,
        report: Report,
    ) -> core::result::Result<(), PushError> {
        self.push_with(segments, token, report, Hdr::Out)
    }

    /// The header asks for `NEEDS_CSUM` at `checksum`'s offsets (§5.1.6.2): any offsets
    /// whose field lies inside the frame, once `VIRTIO_NET_F_CSUM` was negotiated.
    fn push_checksummed(
        &mut self,
        segments: &[TxSegment],
        token: Token,
        report: Report,
        checksum: TxChecksum,
    ) -> core::result::Result<(), PushError> {
        if !self.csum {
            return Err(PushError::Checksum {
                start: checksum.start,
                offset: checksum.offset,
            });
        }
        let hdr = Hdr::Checksum {
            start: checksum.start,
            offset: checksum.offset,
        };
        self.push_with(segments, token, report, hdr)
    }

    #[inline]
    fn poll(&mut self, out: &mut [TxCompletion]) -> usize {
        let (mut n, mut packets, mut bytes) = (0, 0u64, 0u64);
        while n < out.len() {
            let Some(u) = self.vq.next() else { break };
            let status = if u.flushed {
                Err(TxError::Flushed)
            } else if u.len != 0 {
                // The device wrote into a frame that has no device-writable buffer.
                Err(TxError::DeviceStatus { raw: u.len.into() })
            } else {
                packets += 1;
                bytes += u64::from(u.cap);
                if !u.always {
                    continue;
                }
                Ok(())
            };
            out[n] = TxCompletion {
                token: u.token,
                status,
            };
            n += 1;
        }
        self.vq.end_poll();
        self.q
            .after_poll(n == 0 && packets == 0 && self.vq.pending() != 0);
        if packets != 0 {
            let c = &self.q.nic.counters;
            c.tx_packets.fetch_add(packets, Ordering::Relaxed);
            c.tx_bytes.fetch_add(bytes, Ordering::Relaxed);
        }
        n
    }
}

/// An open receive queue of depth `N`.
pub struct VirtioNetRx<'a, P: Platform, const N: usize> {
    /// Declared before `vq`: released after `Drop for VirtioNetRx` reset the virtqueue.
    q: QueueCore<'a, P>,
    buf_len: u32,
    vq: Virtq<P::Dma, N>,
    /// What the device may write after the header: the buffer and the overflow area, at
    /// least [`MAX_FRAME_LEN`] (a longer used length is a lie).
    room: u32,
    /// The bits of the receive header's first dword (`flags`, `gso_type`; `hdr_len` is not
    /// looked at) the device may not set: every one but `DATA_VALID` and `NEEDS_CSUM` once
    /// `VIRTIO_NET_F_GUEST_CSUM` was negotiated, all of them otherwise (§5.1.6.4). A field
    /// rather than a constant mask with the negotiation tested apart: measured, the constant
    /// cost the CQ read on virtio-net 17 instructions per entry, the field 2.
    hdr_reject: u32,
    /// Where the device writes what of a frame does not fit the buffer (module documentation),
    /// the last descriptor of every receive chain (`Virtq::set_rx_chains`); `None` when the
    /// buffer holds a [`MAX_FRAME_LEN`] frame. Only the device touches it. Declared after
    /// `vq`: freed after the queue reset in `Drop`.
    _overflow_mem: Option<P::Dma>,
}

impl<P: Platform, const N: usize> core::fmt::Debug for VirtioNetRx<'_, P, N> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("VirtioNetRx")
            .field("index", &self.q.index)
            .field("depth", &N)
            .field("buf_len", &self.buf_len)
            .field("pending", &self.vq.pending())
            .finish_non_exhaustive()
    }
}

impl<P: Platform, const N: usize> VirtioNetRx<'_, P, N> {
    /// Used-ring entries this queue refused, as [`VirtioNetTx::device_errors`].
    pub fn device_errors(&self) -> u64 {
        self.vq.errors()
    }
}

impl<P: Platform, const N: usize> Drop for VirtioNetRx<'_, P, N> {
    fn drop(&mut self) {
        self.q.stop();
    }
}

impl_queue!(VirtioNetRx);

impl<P: Platform, const N: usize> RxQueue for VirtioNetRx<'_, P, N> {
    fn buf_len(&self) -> u32 {
        self.buf_len
    }

    #[inline]
    fn push(&mut self, buf: RxBuffer, token: Token) -> core::result::Result<(), PushError> {
        if let Some(f) = self.q.fault {
            return Err(PushError::Fault(f));
        }
        if buf.len < self.buf_len {
            return Err(PushError::BufferTooSmall {
                len: buf.len,
                min: self.buf_len,
            });
        }
        // The device gets exactly `buf_len` bytes of the buffer (the chain `open_rx` wrote),
        // so it never writes more than that into it; the rest of a longer frame goes to the
        // queue's overflow area.
        self.vq.push_rx(buf.iova.0, token).map(|_| ())
    }

    #[inline]
    fn poll(&mut self, out: &mut [RxCompletion]) -> usize {
        let max = out.len();
        let mut free = out.iter_mut();
        self.poll_each(max, &mut |c| {
            if let Some(entry) = free.next() {
                *entry = *c;
            }
        });
        max - free.len()
    }

    // As the default (virtio-net reads no hash), but always inlined, as `poll_each`.
    #[inline(always)]
    fn poll_each_unhashed(&mut self, max: usize, f: &mut impl FnMut(&RxCompletion)) -> usize {
        self.poll_each(max, f)
    }

    // Always inlined: the closure is core's read loop, whose captures stay in registers only
    // while no call it reaches is left out of line.
    #[inline(always)]
    fn poll_each(&mut self, max: usize, f: &mut impl FnMut(&RxCompletion)) -> usize {
        // The failures are counted, not the good frames: the rare path pays for the count.
        let (mut n, mut failed, mut bytes) = (0, 0usize, 0u64);
        while n < max {
            let Some(u) = self.vq.next() else { break };
            let (len, status, checksum) = if u.flushed {
                (0, Err(RxError::Flushed), RxChecksum::NONE)
            } else {
                self.check_used(u.id, u.len)
            };
            if status.is_ok() {
                bytes += u64::from(len);
            } else {
                failed += 1;
            }
            f(&RxCompletion {
                token: u.token,
                len,
                status,
                rss: None,
                checksum,
            });
            n += 1;
        }
        self.vq.end_poll();
        self.q.after_poll(n == 0 && self.vq.pending() != 0);
        let good = (n - failed) as u64;
        if good != 0 {
            let c = &self.q.nic.counters;
            c.rx_packets.fetch_add(good, Ordering::Relaxed);
            c.rx_bytes.fetch_add(bytes, Ordering::Relaxed);
        }
        n
    }
}

impl<P: Platform, const N: usize> VirtioNetRx<'_, P, N> {
    /// Checks what the device wrote for buffer `id`: the used length covers the header and at
    /// most the buffer (§2.7.8: `len` counts the bytes written), and the header says nothing
    /// the driver did not negotiate (§5.1.6.4: `flags` only `DATA_VALID` and `NEEDS_CSUM`, and
    /// only with `GUEST_CSUM`; `gso_type` NONE without the GUEST_TSO/UFO features). Anything
    /// else, rare, is [`check_rare`](Self::check_rare)'s. Returns the frame's length, its status and the
    /// checksum marks the header gives.
    #[inline(always)]
    fn check_used(
        &self,
        id: u16,
        len: u32,
    ) -> (u32, core::result::Result<(), RxError>, RxChecksum) {
        // One comparison for both bounds: a length short of the header wraps past any buffer.
        let frame = len.wrapping_sub(NET_HDR_LEN as u32);
        let h = self.vq.rx_hdr(id);
        if frame <= self.buf_len && h & self.hdr_reject == 0 {
            return (frame, Ok(()), Self::checksum_of(h));
        }
        // A truncated frame fills the buffer; an error has no length.
        match self.check_rare(id, len) {
            Ok((frame, checksum)) => (frame, Ok(()), checksum),
            Err(e @ RxError::Truncated { .. }) => (self.buf_len, Err(e), RxChecksum::NONE),
            Err(e) => (0, Err(e), RxChecksum::NONE),
        }
    }

    /// The marks of a header (its first dword `h`) that passed `hdr_reject`, so whose flags
    /// are 0 without `GUEST_CSUM`. `DATA_VALID`: the device checked the TCP/UDP checksum and
    /// found it right (never the IPv4 header's: §5.1.6.4 speaks of the packet's checksum, and
    /// Linux's driver checks the IP header itself). `NEEDS_CSUM`: the frame comes from a
    /// sender on the same host that left the checksum partial, to be completed by whoever
    /// sends it on a wire — it crossed none ("the device MUST validate the packet checksum at
    /// offset csum_offset from csum_start as well as all preceding offsets", §5.1.6.4.1), so
    /// it is marked right, as Linux takes such a frame (`CHECKSUM_PARTIAL`): a consumer that
    /// trusts the mark never reads the field (core's IPv4 path). The field itself holds only
    /// the pseudo-header's sum ("the device MUST set the packet checksum stored in the receive
    /// buffer to the TCP/UDP pseudo header"), so the frame is marked partial as well
    /// ([`RxChecksum::l4_partial`]): a consumer that sums the segment itself completes the
    /// field first (`ringfab-smoltcp`). `csum_start`/`csum_offset` are not passed on: for the
    /// IPv4 TCP/UDP frames a consumer can use, the IPv4 header says the same.
    #[inline(always)]
    fn checksum_of(h: u32) -> RxChecksum {
        // The hal's bits are these flags' (a mask, no branch): `hdr_reject` left no other.
        RxChecksum::verified(false, h & u32::from(r::hdr::F_DATA_VALID) != 0)
            .with_l4_partial(h & u32::from(r::hdr::F_NEEDS_CSUM) != 0)
    }

    /// [`check_used`](Self::check_used)'s rare cases, where its test fails: a length short of
    /// the header or past the buffer and its overflow is a lie, a header field not negotiated
    /// a device status, and a frame past the buffer (§2.7.8: the used length counts what went
    /// into the overflow too) is [`Truncated`](RxError::Truncated) (its completion's `len` the
    /// buffer's). `Ok` holds the frame's length and its checksum marks.
    ///
    /// Inlined all the same: out of line (`#[cold]`), its result came back through memory and
    /// the poll's loop copied it into every completion, the good ones too (the CQ read on an
    /// endpoint, batch 64: 1 to 3 instructions per entry more).
    #[inline(always)]
    fn check_rare(&self, id: u16, len: u32) -> core::result::Result<(u32, RxChecksum), RxError> {
        let hdr = NET_HDR_LEN as u32;
        if len < hdr {
            return Err(RxError::DeviceStatus { raw: len.into() });
        }
        let frame = len - hdr;
        if frame > self.room {
            return Err(RxError::Length {
                reported: frame,
                capacity: self.room,
            });
        }
        let h = self.vq.rx_hdr(id);
        if h & self.hdr_reject != 0 {
            return Err(RxError::DeviceStatus {
                raw: (h & 0xffff).into(),
            });
        }
        if frame > self.buf_len {
            return Err(RxError::Truncated { frame_len: frame });
        }
        // The header changed between the two reads (the device is writing it): as read now.
        Ok((frame, Self::checksum_of(h)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modern_and_transitional_network_devices_are_driven_and_nothing_else() {
        assert!(PCI_IDS.iter().all(|&(v, d)| drives(v, d)));
        assert!(drives(0x1af4, 0x1041) && drives(0x1af4, 0x1000));
        assert!(!drives(0x1af4, 0x1042), "a modern virtio block device");
        assert!(
            !drives(0x8086, 0x1041),
            "virtio's device ids only under its vendor id"
        );
    }
}
