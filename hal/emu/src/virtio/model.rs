//! The virtio-net-pci register file, virtqueues and network behaviour (QEMU `virtio-pci.c`,
//! `virtio.c`, `virtio-net.c`). One `VirtioNetModel` lives behind the device mutex; every guest
//! memory access goes through the shared IOMMU.

use ringfab_hal::{MacAddr, Wait};

use super::{VirtioNetModelConfig, CTRL_QUEUE_SIZE, MODERN_BAR, QUEUE_MAX_SIZE};
use crate::device::Model;
use crate::engine::{le32, parse, Engine, Plan, L4};
use crate::fault::{CriticalFault, Ring};
use crate::iommu::Iommu;
use crate::pci::{PciConfig, PciLayout};
use crate::toeplitz;
use crate::wait::EmuWait;

/// Feature bits (virtio 1.2 §5.1.3, §6).
pub(crate) mod feature {
    pub(crate) const CSUM: u64 = 1 << 0;
    pub(crate) const GUEST_CSUM: u64 = 1 << 1;
    pub(crate) const CTRL_GUEST_OFFLOADS: u64 = 1 << 2;
    pub(crate) const MTU: u64 = 1 << 3;
    pub(crate) const MAC: u64 = 1 << 5;
    pub(crate) const GUEST_TSO4: u64 = 1 << 7;
    pub(crate) const GUEST_TSO6: u64 = 1 << 8;
    pub(crate) const GUEST_ECN: u64 = 1 << 9;
    pub(crate) const GUEST_UFO: u64 = 1 << 10;
    pub(crate) const HOST_TSO4: u64 = 1 << 11;
    pub(crate) const HOST_TSO6: u64 = 1 << 12;
    pub(crate) const HOST_ECN: u64 = 1 << 13;
    pub(crate) const HOST_UFO: u64 = 1 << 14;
    pub(crate) const MRG_RXBUF: u64 = 1 << 15;
    pub(crate) const STATUS: u64 = 1 << 16;
    pub(crate) const CTRL_VQ: u64 = 1 << 17;
    pub(crate) const CTRL_RX: u64 = 1 << 18;
    pub(crate) const CTRL_VLAN: u64 = 1 << 19;
    pub(crate) const CTRL_RX_EXTRA: u64 = 1 << 20;
    pub(crate) const GUEST_ANNOUNCE: u64 = 1 << 21;
    pub(crate) const MQ: u64 = 1 << 22;
    pub(crate) const CTRL_MAC_ADDR: u64 = 1 << 23;
    pub(crate) const NOTIFY_ON_EMPTY: u64 = 1 << 24;
    pub(crate) const ANY_LAYOUT: u64 = 1 << 27;
    pub(crate) const INDIRECT_DESC: u64 = 1 << 28;
    pub(crate) const EVENT_IDX: u64 = 1 << 29;
    pub(crate) const VERSION_1: u64 = 1 << 32;
    pub(crate) const ACCESS_PLATFORM: u64 = 1 << 33;
    pub(crate) const RING_RESET: u64 = 1 << 40;
    pub(crate) const RSS: u64 = 1 << 60;
}

/// Device status bits (virtio 1.2 §2.1).
pub(crate) mod status {
    pub(crate) const DRIVER_OK: u8 = 4;
    pub(crate) const FEATURES_OK: u8 = 8;
    pub(crate) const NEEDS_RESET: u8 = 0x40;
}

/// Common configuration offsets (virtio 1.2 §4.1.4.3, `struct virtio_pci_common_cfg`).
mod common {
    pub(super) const DFSELECT: usize = 0x00;
    pub(super) const DF: usize = 0x04;
    pub(super) const GFSELECT: usize = 0x08;
    pub(super) const GF: usize = 0x0c;
    pub(super) const MSIX: usize = 0x10;
    pub(super) const NUMQ: usize = 0x12;
    pub(super) const STATUS: usize = 0x14;
    pub(super) const CFGGENERATION: usize = 0x15;
    pub(super) const Q_SELECT: usize = 0x16;
    pub(super) const Q_SIZE: usize = 0x18;
    pub(super) const Q_MSIX: usize = 0x1a;
    pub(super) const Q_ENABLE: usize = 0x1c;
    pub(super) const Q_NOFF: usize = 0x1e;
    pub(super) const Q_DESCLO: usize = 0x20;
    pub(super) const Q_DESCHI: usize = 0x24;
    pub(super) const Q_AVAILLO: usize = 0x28;
    pub(super) const Q_AVAILHI: usize = 0x2c;
    pub(super) const Q_USEDLO: usize = 0x30;
    pub(super) const Q_USEDHI: usize = 0x34;
    pub(super) const Q_RESET: usize = 0x3a;
}

/// Where the virtio structures sit in BAR4 (QEMU `virtio_pci_realize`).
const COMMON_AT: usize = 0x0000;
const ISR_AT: usize = 0x1000;
const DEVICE_AT: usize = 0x2000;
const NOTIFY_AT: usize = 0x3000;
const REGION_LEN: usize = 0x1000;
/// `virtio_pci_queue_mem_mult` without `page-per-vq`.
const NOTIFY_MULT: usize = 4;

/// "No vector" in the MSI-X vector fields.
const NO_VECTOR: u16 = 0xffff;
/// Descriptor flags (virtio 1.2 §2.7.5).
const DESC_F_NEXT: u16 = 1;
const DESC_F_WRITE: u16 = 2;
const DESC_F_INDIRECT: u16 = 4;
/// `VIRTQ_USED_F_NO_NOTIFY` and `VIRTQ_AVAIL_F_NO_INTERRUPT`.
const USED_F_NO_NOTIFY: u16 = 1;
const AVAIL_F_NO_INTERRUPT: u16 = 1;
/// `struct virtio_net_hdr_v1` (12 bytes with `VERSION_1`).
const HDR_LEN: usize = 12;
/// `virtio_net_hdr.flags` (virtio 1.2 §5.1.6): a partial checksum to complete (transmit), or
/// left partial by a sender on the same host (receive).
const HDR_F_NEEDS_CSUM: u8 = 1;
/// `virtio_net_hdr.flags`: the checksum was checked and is right (receive).
const HDR_F_DATA_VALID: u8 = 2;
/// `VIRTIO_NET_S_LINK_UP`.
const NET_S_LINK_UP: u16 = 1;
/// Control classes and commands (virtio 1.2 §5.1.6.5).
const CTRL_RX: u8 = 0;
const CTRL_MQ: u8 = 4;
const CTRL_MQ_VQ_PAIRS_SET: u8 = 0;
const CTRL_MQ_RSS_CONFIG: u8 = 1;
const NET_OK: u8 = 0;
const NET_ERR: u8 = 1;
/// `VIRTIO_NET_RSS_MAX_KEY_SIZE`, `VIRTIO_NET_RSS_MAX_TABLE_LEN`, and the hash types QEMU
/// reports (`VIRTIO_NET_RSS_SUPPORTED_HASHES`: IPv4/TCPv4/UDPv4, the IPv6 three and the _EX three).
const RSS_MAX_KEY: usize = 40;
const RSS_MAX_TABLE: usize = 128;
const RSS_SUPPORTED_HASHES: u32 = 0x1ff;
const HASH_IPV4: u32 = 1 << 0;
const HASH_TCPV4: u32 = 1 << 1;
const HASH_UDPV4: u32 = 1 << 2;

/// Vendor capability layout (virtio 1.2 §4.1.4): `(offset, next, cfg_type, region offset,
/// region length)`, in QEMU's order of addition (so each one's `next` is the one before).
const CAPS: [(u16, u8, u8, usize, usize); 5] = [
    (0x40, 0x00, 1, COMMON_AT, REGION_LEN),
    (0x50, 0x40, 3, ISR_AT, REGION_LEN),
    (0x60, 0x50, 4, DEVICE_AT, REGION_LEN),
    (0x70, 0x60, 2, NOTIFY_AT, NOTIFY_MULT * 1024),
    // VIRTIO_PCI_CAP_PCI_CFG: the configuration-space window onto the BARs (not modelled).
    (0x84, 0x70, 5, 0, 0),
];
const MSIX_CAP: u16 = 0x98;

/// virtio-net-pci's configuration space: BAR1 the MSI-X table (PBA at 0x800), BAR4/5 the
/// 64-bit prefetchable modern BAR; class 0200 (Ethernet), revision 1 (modern).
static LAYOUT: PciLayout = PciLayout {
    id: (super::DEVICE_VIRTIO_NET as u32) << 16 | super::VENDOR_VIRTIO as u32,
    class_rev: 0x0200_0001,
    subsystem: 0x1100_1af4,
    bars: &[(0x14, 0xfebf_1000), (0x20, 0xfe00_000c), (0x24, 0)],
    msix_cap: MSIX_CAP,
    // Replaced in `config_read`: the vector count depends on the queue pairs.
    msix_vectors: 1,
    msix_table: 1,
    msix_pba: 0x800 | 1,
};

/// One virtqueue: what QEMU keeps in `VirtQueue` and in the proxy's `VirtIOPCIQueue`.
#[derive(Clone, Debug, Default)]
pub(crate) struct Vq {
    /// `vring.num`: the queue size (0 for a queue that does not exist).
    size: u16,
    default_size: u16,
    /// The proxy's copies, applied on `queue_enable`.
    proxy_num: u16,
    proxy_desc: [u32; 2],
    proxy_avail: [u32; 2],
    proxy_used: [u32; 2],
    enabled: bool,
    reset: bool,
    desc: u64,
    avail: u64,
    used: u64,
    vector: u16,
    last_avail: u16,
    used_idx: u16,
    signalled_used: u16,
    signalled_valid: bool,
    inuse: u32,
    /// A used entry held back by `CompleteOutOfOrder`: `(id, len)`.
    held: Option<(u32, u32)>,
    /// Doorbell writes received (for tests of notification suppression).
    pub(crate) notifies: u64,
}

impl Vq {
    fn new(size: u16) -> Vq {
        Vq {
            size,
            default_size: size,
            vector: NO_VECTOR,
            ..Vq::default()
        }
    }

    /// QEMU `__virtio_queue_reset` plus the proxy's enable/reset flags.
    fn reset(&mut self) {
        *self = Vq {
            proxy_num: self.proxy_num,
            proxy_desc: self.proxy_desc,
            proxy_avail: self.proxy_avail,
            proxy_used: self.proxy_used,
            notifies: self.notifies,
            ..Vq::new(self.default_size)
        };
    }

    fn ready(&self) -> bool {
        self.desc != 0
    }
}

/// A popped descriptor chain (QEMU `VirtQueueElement`).
struct Elem {
    head: u16,
    /// Device-readable buffers `(addr, len)`, in order.
    out: Vec<(u64, u32)>,
    /// Device-writable buffers.
    inn: Vec<(u64, u32)>,
}

/// A used entry held back by `DelayWriteback`.
struct Delayed {
    vq: usize,
    id: u32,
    len: u32,
    steps: u32,
}

/// RSS state set by `VIRTIO_NET_CTRL_MQ_RSS_CONFIG` (QEMU `rss_data`).
struct Rss {
    hash_types: u32,
    table: Vec<u16>,
    default_queue: u16,
    key: [u8; toeplitz::KEY_LEN],
}

pub(crate) struct VirtioNetModel {
    cfg: VirtioNetModelConfig,
    pci: PciConfig,
    host_features: u64,
    dfselect: u32,
    gfselect: u32,
    guest_words: [u32; 2],
    guest_features: u64,
    pub(crate) status: u8,
    generation: u8,
    config_vector: u16,
    queue_sel: u16,
    isr: u8,
    broken: bool,
    pub(crate) vqs: Vec<Vq>,
    /// `VIRTIO_NET_S_LINK_UP` in the device configuration.
    link_up: bool,
    promisc: bool,
    allmulti: bool,
    alluni: bool,
    nomulti: bool,
    nouni: bool,
    nobcast: bool,
    pub(crate) curr_pairs: u16,
    rss: Option<Rss>,
    pub(crate) rx_dropped: u64,
    delayed: Vec<Delayed>,
    now_ns: u64,
    engine: Engine,
    vectors: Vec<EmuWait>,
    outbox: Vec<Vec<u8>>,
}

impl VirtioNetModel {
    pub(crate) fn new(
        cfg: VirtioNetModelConfig,
        iommu: Iommu,
        vectors: Vec<EmuWait>,
    ) -> VirtioNetModel {
        use feature::*;
        // QEMU virtio-net's default host features, plus the transport's.
        let mut host = CSUM
            | GUEST_CSUM
            | CTRL_GUEST_OFFLOADS
            | MAC
            | GUEST_TSO4
            | GUEST_TSO6
            | GUEST_ECN
            | GUEST_UFO
            | HOST_TSO4
            | HOST_TSO6
            | HOST_ECN
            | HOST_UFO
            | MRG_RXBUF
            | STATUS
            | CTRL_VQ
            | CTRL_RX
            | CTRL_VLAN
            | CTRL_RX_EXTRA
            | GUEST_ANNOUNCE
            | CTRL_MAC_ADDR
            | NOTIFY_ON_EMPTY
            | ANY_LAYOUT
            | VERSION_1;
        for (on, bit) in [
            (cfg.reported_pairs.unwrap_or(cfg.queue_pairs) > 1, MQ),
            (cfg.rss, RSS),
            (cfg.event_idx, EVENT_IDX),
            (cfg.indirect_desc, INDIRECT_DESC),
            (cfg.ring_reset, RING_RESET),
            (cfg.iommu_platform, ACCESS_PLATFORM),
            (cfg.mtu.is_some(), MTU),
        ] {
            if on {
                host |= bit;
            }
        }
        if let Some(offered) = cfg.offered_features {
            host = offered;
        }
        let pairs = usize::from(cfg.queue_pairs);
        let mut vqs: Vec<Vq> = (0..2 * pairs).map(|_| Vq::new(cfg.queue_size)).collect();
        vqs.push(Vq::new(CTRL_QUEUE_SIZE));
        let mut m = VirtioNetModel {
            cfg,
            pci: PciConfig::new(cfg.bus_master, &LAYOUT),
            host_features: host,
            dfselect: 0,
            gfselect: 0,
            guest_words: [0; 2],
            guest_features: 0,
            status: 0,
            generation: 0,
            config_vector: NO_VECTOR,
            queue_sel: 0,
            isr: 0,
            broken: false,
            vqs,
            link_up: cfg.link,
            promisc: true,
            allmulti: false,
            alluni: false,
            nomulti: false,
            nouni: false,
            nobcast: false,
            curr_pairs: 1,
            rss: None,
            rx_dropped: 0,
            delayed: Vec::new(),
            now_ns: 0,
            engine: Engine::new(iommu),
            vectors,
            outbox: Vec::new(),
        };
        m.reset();
        m
    }

    fn has(&self, f: u64) -> bool {
        self.guest_features & f != 0
    }

    fn max_pairs(&self) -> u16 {
        self.cfg.queue_pairs
    }

    fn ctrl_vq(&self) -> usize {
        self.vqs.len() - 1
    }

    /// Device reset: `virtio_reset` + `virtio_net_reset` + `virtio_pci_reset`.
    fn reset(&mut self) {
        self.status = 0;
        self.guest_features = 0;
        self.guest_words = [0; 2];
        self.queue_sel = 0;
        self.isr = 0;
        self.config_vector = NO_VECTOR;
        self.broken = false;
        for q in &mut self.vqs {
            q.reset();
            q.proxy_num = 0;
            q.proxy_desc = [0; 2];
            q.proxy_avail = [0; 2];
            q.proxy_used = [0; 2];
        }
        self.promisc = true;
        self.allmulti = false;
        self.alluni = false;
        self.nomulti = false;
        self.nouni = false;
        self.nobcast = false;
        self.curr_pairs = 1;
        self.rss = None;
        self.delayed.clear();
        self.engine.clear_delayed();
    }

    /// `virtio_error`: the device stops and asks for a reset.
    fn error(&mut self) {
        self.broken = true;
        if self.has(feature::VERSION_1) {
            self.status |= status::NEEDS_RESET;
            self.notify_config();
        }
    }

    fn notify_config(&mut self) {
        if self.status & status::DRIVER_OK == 0 {
            return;
        }
        self.isr |= 3;
        self.generation = self.generation.wrapping_add(1);
        self.msix(self.config_vector);
    }

    fn msix(&self, vector: u16) {
        if let Some(w) = self.vectors.get(usize::from(vector)) {
            w.notify();
        }
    }

    fn dma_ok(&self) -> bool {
        self.pci.bus_master()
    }

    // ---- guest memory ----------------------------------------------------------------------

    fn rd16(&self, at: u64) -> Option<u16> {
        let b = self.engine.iommu.read(at, 2)?;
        Some(u16::from_le_bytes([b[0], b[1]]))
    }

    fn wr16(&self, at: u64, v: u16) -> bool {
        self.engine.iommu.write(at, &v.to_le_bytes())
    }

    /// Copies `data` into the writable buffers of `inn` starting `skip` bytes in.
    fn write_iov(&self, inn: &[(u64, u32)], mut skip: usize, mut data: &[u8]) -> bool {
        for &(addr, len) in inn {
            let len = len as usize;
            if skip >= len {
                skip -= len;
                continue;
            }
            let n = data.len().min(len - skip);
            if n == 0 {
                break;
            }
            if !self.engine.iommu.write(addr + skip as u64, &data[..n]) {
                return false;
            }
            data = &data[n..];
            skip = 0;
        }
        data.is_empty()
    }

    // ---- common configuration --------------------------------------------------------------

    fn sel(&self) -> Option<&Vq> {
        self.vqs.get(usize::from(self.queue_sel))
    }

    fn common_read(&self, off: usize) -> u32 {
        use common::*;
        let q = self.sel();
        let qf = |f: fn(&Vq) -> u32| q.map_or(0, f);
        match off {
            DFSELECT => self.dfselect,
            DF if self.dfselect <= 1 => (self.host_features >> (32 * self.dfselect)) as u32,
            GFSELECT => self.gfselect,
            GF if self.gfselect <= 1 => self.guest_words[self.gfselect as usize],
            MSIX => self.config_vector.into(),
            NUMQ => self
                .vqs
                .iter()
                .rposition(|q| q.size != 0)
                .map_or(0, |i| i + 1) as u32,
            STATUS => self.status.into(),
            CFGGENERATION => self.generation.into(),
            Q_SELECT => self.queue_sel.into(),
            Q_SIZE => qf(|q| q.size.into()),
            Q_MSIX => q.map_or(NO_VECTOR, |q| q.vector).into(),
            Q_ENABLE => qf(|q| q.enabled.into()),
            Q_NOFF => self.queue_sel.into(),
            Q_DESCLO => qf(|q| q.proxy_desc[0]),
            Q_DESCHI => qf(|q| q.proxy_desc[1]),
            Q_AVAILLO => qf(|q| q.proxy_avail[0]),
            Q_AVAILHI => qf(|q| q.proxy_avail[1]),
            Q_USEDLO => qf(|q| q.proxy_used[0]),
            Q_USEDHI => qf(|q| q.proxy_used[1]),
            Q_RESET => qf(|q| q.reset.into()),
            _ => 0,
        }
    }

    fn common_write(&mut self, off: usize, val: u32) {
        use common::*;
        let sel = usize::from(self.queue_sel);
        let nvectors = self.vectors.len() as u32;
        match off {
            DFSELECT => self.dfselect = val,
            GFSELECT => self.gfselect = val,
            GF if self.gfselect <= 1 => {
                self.guest_words[self.gfselect as usize] = val;
                // virtio_set_features: refused once FEATURES_OK is set; bits the device does
                // not offer are dropped.
                if self.status & status::FEATURES_OK == 0 {
                    let want =
                        u64::from(self.guest_words[1]) << 32 | u64::from(self.guest_words[0]);
                    self.guest_features = want & self.host_features;
                }
            }
            MSIX => {
                self.config_vector = if val < nvectors {
                    val as u16
                } else {
                    NO_VECTOR
                }
            }
            STATUS => self.set_status(val as u8),
            Q_SELECT if val < 1024 => self.queue_sel = val as u16,
            _ if sel >= self.vqs.len() => {}
            Q_SIZE => {
                let q = &mut self.vqs[sel];
                q.proxy_num = val as u16;
                set_num(q, val);
            }
            Q_MSIX => {
                self.vqs[sel].vector = if val < nvectors {
                    val as u16
                } else {
                    NO_VECTOR
                }
            }
            Q_ENABLE if val == 1 && self.refused(false, sel) => {}
            Q_ENABLE if val == 1 => {
                let q = &mut self.vqs[sel];
                set_num(q, q.proxy_num.into());
                if q.size != 0 {
                    let join = |w: [u32; 2]| u64::from(w[1]) << 32 | u64::from(w[0]);
                    q.desc = join(q.proxy_desc);
                    q.avail = join(q.proxy_avail);
                    q.used = join(q.proxy_used);
                }
                q.enabled = true;
                q.reset = false;
            }
            Q_ENABLE => self.error(),
            Q_DESCLO => self.vqs[sel].proxy_desc[0] = val,
            Q_DESCHI => self.vqs[sel].proxy_desc[1] = val,
            Q_AVAILLO => self.vqs[sel].proxy_avail[0] = val,
            Q_AVAILHI => self.vqs[sel].proxy_avail[1] = val,
            Q_USEDLO => self.vqs[sel].proxy_used[0] = val,
            Q_USEDHI => self.vqs[sel].proxy_used[1] = val,
            // A refused reset: `queue_reset` reads 1 and the queue goes on running.
            Q_RESET if val == 1 && self.has(feature::RING_RESET) && self.refused(true, sel) => {
                self.vqs[sel].reset = true;
            }
            Q_RESET if val == 1 && self.has(feature::RING_RESET) => self.queue_reset(sel),
            _ => {}
        }
    }

    /// `virtio_set_status`, with `virtio_validate_features` on the way to `FEATURES_OK`.
    fn set_status(&mut self, val: u8) {
        if self.has(feature::VERSION_1)
            && self.status & status::FEATURES_OK == 0
            && val & status::FEATURES_OK != 0
        {
            let platform_refused = self.host_features & feature::ACCESS_PLATFORM != 0
                && !self.has(feature::ACCESS_PLATFORM);
            if platform_refused || self.cfg.refuse_features_ok {
                return;
            }
        }
        if val == 0 {
            self.reset();
            self.status = self.cfg.status_after_reset;
            return;
        }
        self.status = val & !self.cfg.status_ignores;
    }

    /// Whether the device ignores the driver's request to stop (`stop`: a queue reset) or
    /// enable data virtqueue `vq` (`DeviceFault::RefuseStop`/`RefuseStart`);
    /// the control queue is never refused.
    fn refused(&mut self, stop: bool, vq: usize) -> bool {
        if vq >= self.ctrl_vq() {
            return false;
        }
        let n = (vq / 2) as u16;
        let ring = if vq % 2 == 0 {
            Ring::Rx(n)
        } else {
            Ring::Tx(n)
        };
        self.engine.refuse(stop, |r| r == ring)
    }

    /// `VIRTIO_PCI_COMMON_Q_RESET`: held and delayed used entries of the queue land first (the
    /// device finishes what it started before it lets go of the ring), then the queue forgets
    /// its rings, indices and vector (`__virtio_queue_reset`).
    fn queue_reset(&mut self, vq: usize) {
        if let Some((id, len)) = self.vqs[vq].held.take() {
            self.write_used(vq, id, len, 0);
        }
        let mut due = Vec::new();
        self.delayed.retain(|d| {
            let hit = d.vq == vq;
            if hit {
                due.push((d.id, d.len));
            }
            !hit
        });
        for (id, len) in due {
            self.write_used(vq, id, len, 0);
        }
        let q = &mut self.vqs[vq];
        q.reset();
        q.reset = false;
        q.enabled = false;
    }

    // ---- device configuration (struct virtio_net_config) -----------------------------------

    fn net_config(&self) -> Vec<u8> {
        let mut c = Vec::with_capacity(24);
        c.extend_from_slice(&self.cfg.mac.0);
        let st = if self.link_up { NET_S_LINK_UP } else { 0 };
        c.extend_from_slice(&st.to_le_bytes());
        let reported = self.cfg.reported_pairs.unwrap_or(self.max_pairs());
        c.extend_from_slice(&reported.to_le_bytes());
        c.extend_from_slice(&self.cfg.mtu.unwrap_or(0).to_le_bytes()); // mtu (host_mtu)
        c.extend_from_slice(&u32::MAX.to_le_bytes()); // speed: SPEED_UNKNOWN
        c.push(0xff); // duplex: DUPLEX_UNKNOWN
        let (key, table, hashes) = self.cfg.rss_limits.unwrap_or((
            RSS_MAX_KEY as u8,
            RSS_MAX_TABLE as u16,
            RSS_SUPPORTED_HASHES,
        ));
        c.push(key);
        c.extend_from_slice(&table.to_le_bytes());
        c.extend_from_slice(&hashes.to_le_bytes());
        // virtio_net_config_size: up to the last field an offered feature needs.
        let len = if self.host_features & feature::RSS != 0 {
            24
        } else if self.host_features & feature::MTU != 0 {
            12
        } else if self.host_features & feature::MQ != 0 {
            10
        } else {
            8
        };
        c.truncate(len);
        c
    }

    fn device_read(&self, off: usize, size: usize) -> u32 {
        let c = self.net_config();
        match c.get(off..off + size) {
            Some(b) => b.iter().rev().fold(0, |a, &x| a << 8 | u32::from(x)),
            // virtio_config_modern_read*: past the configuration, all ones.
            None => u32::MAX >> (32 - 8 * size),
        }
    }

    // ---- virtqueues ----------------------------------------------------------------------

    /// `virtqueue_split_pop`: the next available chain, checked; `None` if the queue is empty
    /// or the device is (now) broken.
    fn pop(&mut self, vq: usize) -> Option<Elem> {
        if self.broken || !self.dma_ok() {
            return None;
        }
        let q = self.vqs[vq].clone();
        let Some(avail_idx) = self.rd16(q.avail + 2) else {
            self.error();
            return None;
        };
        if avail_idx == q.last_avail {
            return None;
        }
        if avail_idx.wrapping_sub(q.last_avail) > q.size {
            // virtqueue_num_heads: "Guest moved used index from %u to %u".
            self.error();
            return None;
        }
        let slot = u64::from(q.last_avail % q.size);
        let Some(head) = self.rd16(q.avail + 4 + 2 * slot) else {
            self.error();
            return None;
        };
        let last = q.last_avail.wrapping_add(1);
        self.vqs[vq].last_avail = last;
        if self.has(feature::EVENT_IDX) {
            // virtqueue_split_pop: "update avail event" to what the device has taken, so the
            // driver notifies again only once the device has caught up with it.
            self.wr16(q.used + 4 + 8 * u64::from(q.size), last);
        }
        match self.walk(q.desc, q.size, head) {
            Some(e) => {
                self.vqs[vq].inuse += 1;
                Some(e)
            }
            None => {
                self.error();
                None
            }
        }
    }

    fn read_desc(&self, at: u64) -> Option<(u64, u32, u16, u16)> {
        let d = self.engine.iommu.read(at, 16)?;
        let addr = u64::from(le32(&d, 0)) | u64::from(le32(&d, 4)) << 32;
        Some((
            addr,
            le32(&d, 8),
            u16::from_le_bytes([d[12], d[13]]),
            u16::from_le_bytes([d[14], d[15]]),
        ))
    }

    /// Walks the chain at `head` of the table at `table` (`size` entries), as QEMU does: any
    /// violation is `None` (the caller marks the device broken).
    fn walk(&self, table: u64, size: u16, head: u16) -> Option<Elem> {
        if head >= size {
            return None; // "Guest says index %u is available"
        }
        let (mut base, mut max) = (table, u32::from(size));
        let mut d = self.read_desc(base + 16 * u64::from(head))?;
        if d.2 & DESC_F_INDIRECT != 0 {
            if !self.has(feature::INDIRECT_DESC) || d.1 == 0 || d.1 % 16 != 0 {
                return None; // "Invalid size for indirect buffer table"
            }
            base = d.0;
            max = d.1 / 16;
            d = self.read_desc(base)?;
        }
        let mut e = Elem {
            head,
            out: Vec::new(),
            inn: Vec::new(),
        };
        for _ in 0..max {
            let (addr, len, flags, next) = d;
            if len == 0 || flags & DESC_F_INDIRECT != 0 {
                return None; // zero-sized buffer, or nested indirect table
            }
            // virtqueue_map_desc: the buffer must be reachable (a refused mapping is "bogus
            // descriptor or out of resources").
            let write = flags & DESC_F_WRITE != 0;
            if !self.engine.iommu.check(addr, len as usize, write) {
                return None;
            }
            if write {
                e.inn.push((addr, len));
            } else if !e.inn.is_empty() {
                return None; // "Incorrect order for descriptors"
            } else {
                e.out.push((addr, len));
            }
            if flags & DESC_F_NEXT == 0 {
                return Some(e);
            }
            if u32::from(next) >= max {
                return None; // "Desc next is %u"
            }
            d = self.read_desc(base + 16 * u64::from(next))?;
        }
        None // "Looped descriptor"
    }

    /// Gives a popped element back (`virtqueue_unpop`).
    fn unpop(&mut self, vq: usize) {
        let q = &mut self.vqs[vq];
        q.last_avail = q.last_avail.wrapping_sub(1);
        q.inuse = q.inuse.saturating_sub(1);
    }

    /// `virtqueue_fill` + `virtqueue_flush` of one entry, with `jump` extra steps of the index
    /// (a wrapping negative `jump` moves it back: `DeviceFault::RewindUsedIdx`).
    fn write_used(&mut self, vq: usize, id: u32, len: u32, jump: u16) {
        let q = &self.vqs[vq];
        if !q.ready() {
            return;
        }
        let at = q.used + 4 + 8 * u64::from(q.used_idx % q.size);
        let mut elem = [0u8; 8];
        elem[..4].copy_from_slice(&id.to_le_bytes());
        elem[4..].copy_from_slice(&len.to_le_bytes());
        let (used, idx) = (q.used, q.used_idx.wrapping_add(1).wrapping_add(jump));
        if self.engine.iommu.write(at, &elem) && self.wr16(used + 2, idx) {
            let q = &mut self.vqs[vq];
            q.used_idx = idx;
            q.inuse = q.inuse.saturating_sub(1);
        } else {
            self.error();
        }
    }

    /// Returns a finished element to the driver as the fault plan says, then interrupts.
    fn complete(&mut self, vq: usize, ring: Ring, id: u32, len: u32, plan: Plan) {
        match plan {
            Plan::Withhold => {
                self.vqs[vq].inuse = self.vqs[vq].inuse.saturating_sub(1);
                return;
            }
            Plan::Delay(steps) => {
                self.delayed.push(Delayed { vq, id, len, steps });
                return;
            }
            Plan::Now { .. } => {}
        }
        self.land(vq, ring, id, len);
    }

    /// Writes a used entry now, applying the used-ring faults, and interrupts.
    fn land(&mut self, vq: usize, ring: Ring, id: u32, len: u32) {
        let may_hold = self.vqs[vq].held.is_none();
        let f = self.engine.take_used_fault(ring, may_hold);
        let id = f.id.unwrap_or(id);
        // `RewindUsedIdx`: the entry's own step forward, then `rewind + 1` back.
        let back = if f.rewind > 0 {
            f.rewind.wrapping_add(1)
        } else {
            0
        };
        let jump = f.jump.wrapping_sub(back);
        if let Some((hid, hlen)) = self.vqs[vq].held.take() {
            self.write_used(vq, id, len, jump);
            self.write_used(vq, hid, hlen, 0);
        } else if f.hold {
            self.vqs[vq].held = Some((id, len));
            return;
        } else {
            self.write_used(vq, id, len, jump);
        }
        if f.repeat {
            // `RepeatUsedId`: the same id once more, as an entry of its own.
            self.write_used(vq, id, len, 0);
        }
        self.notify_irq(vq);
    }

    /// `virtio_notify`: interrupts unless the driver suppressed it (`virtio_should_notify`).
    fn notify_irq(&mut self, vq: usize) {
        let empty_notify = self.has(feature::NOTIFY_ON_EMPTY) && self.vqs[vq].inuse == 0 && {
            let q = &self.vqs[vq];
            self.rd16(q.avail + 2) == Some(q.last_avail)
        };
        let q = self.vqs[vq].clone();
        let fire = if empty_notify {
            true
        } else if !self.has(feature::EVENT_IDX) {
            self.rd16(q.avail)
                .is_some_and(|f| f & AVAIL_F_NO_INTERRUPT == 0)
        } else {
            let used_event = self.rd16(q.avail + 4 + 2 * u64::from(q.size));
            let (old, new) = (q.signalled_used, q.used_idx);
            let qm = &mut self.vqs[vq];
            qm.signalled_valid = true;
            qm.signalled_used = new;
            !q.signalled_valid || used_event.is_some_and(|e| need_event(e, new, old))
        };
        if fire {
            self.isr |= 1;
            self.msix(q.vector);
        }
    }

    /// `virtio_queue_set_notification`: with `EVENT_IDX` the avail event follows the avail
    /// index either way; without it, `VIRTQ_USED_F_NO_NOTIFY` is cleared or set.
    fn set_notification(&mut self, vq: usize, enable: bool) {
        let q = self.vqs[vq].clone();
        if !q.ready() {
            return;
        }
        if self.has(feature::EVENT_IDX) {
            if let Some(idx) = self.rd16(q.avail + 2) {
                self.wr16(q.used + 4 + 8 * u64::from(q.size), idx);
            }
        } else if let Some(flags) = self.rd16(q.used) {
            let f = if enable {
                flags & !USED_F_NO_NOTIFY
            } else {
                flags | USED_F_NO_NOTIFY
            };
            self.wr16(q.used, f);
        }
    }

    /// A doorbell write for virtqueue `vq` (`virtio_queue_notify`).
    fn notify(&mut self, vq: usize) {
        let Some(q) = self.vqs.get_mut(vq) else {
            return;
        };
        q.notifies += 1;
        if !q.ready() || self.broken {
            return;
        }
        if vq == self.ctrl_vq() {
            self.handle_ctrl();
        } else if vq % 2 == 1 {
            self.handle_tx(vq);
        }
        // A receive queue's doorbell only matters to frames QEMU queued while it had no
        // buffer; the model dropped those (see the module docs).
    }

    // ---- transmit ----------------------------------------------------------------------

    /// `virtio_net_handle_tx_bh` + `virtio_net_tx_bh` + `virtio_net_flush_tx`, at once.
    fn handle_tx(&mut self, vq: usize) {
        let pair = (vq / 2) as u16;
        if self.status & status::DRIVER_OK == 0 || pair >= self.curr_pairs {
            return;
        }
        self.set_notification(vq, false);
        while let Some(e) = self.pop(vq) {
            let mut data = Vec::new();
            for &(addr, len) in &e.out {
                match self.engine.iommu.read(addr, len as usize) {
                    Some(b) => data.extend_from_slice(&b),
                    None => {
                        self.error();
                        return;
                    }
                }
            }
            if e.out.is_empty() || data.len() < HDR_LEN {
                // "virtio-net header not in first element" / "virtio-net header incorrect".
                self.error();
                return;
            }
            let ring = Ring::Tx(pair);
            let plan = self.engine.plan(ring);
            // A link that is down drops what is sent (virtio_net_drop_tx_queue_data; the
            // backend's link_down): completed, never on the wire.
            if self.link_up && data.len() > HDR_LEN {
                let mut frame = data[HDR_LEN..].to_vec();
                if self.has(feature::CSUM) && data[0] & HDR_F_NEEDS_CSUM != 0 {
                    // The partial checksum the driver asked for (§5.1.6.2), completed here
                    // as a backend without offloads completes it (QEMU
                    // `net_tx_pkt_do_sw_csum` / the host's `skb_checksum_help`).
                    let start = usize::from(u16::from_le_bytes([data[6], data[7]]));
                    let offset = usize::from(u16::from_le_bytes([data[8], data[9]]));
                    let end = frame.len();
                    crate::csum::insert(&mut frame, start, start + offset, end);
                }
                self.outbox.push(frame);
            }
            let garbage = match plan {
                Plan::Now { garbage, .. } => garbage,
                _ => 0,
            };
            self.complete(vq, ring, u32::from(e.head), garbage, plan);
        }
        self.set_notification(vq, true);
    }

    // ---- receive -----------------------------------------------------------------------

    /// `receive_filter`.
    fn accept(&self, f: &[u8]) -> bool {
        if self.promisc {
            return true;
        }
        let dst = &f[..6];
        if dst[0] & 1 != 0 {
            if dst.iter().all(|&b| b == 0xff) {
                return !self.nobcast;
            }
            return !self.nomulti && self.allmulti;
        }
        !self.nouni && (self.alluni || dst == self.cfg.mac.0)
    }

    /// `virtio_net_process_rss`: the queue pair a frame goes to.
    fn rss_pair(&self, f: &[u8]) -> u16 {
        let Some(rss) = &self.rss else {
            return self.backend_pair(f);
        };
        let p = parse(f, 0x8100);
        let Some((src, dst, ports)) = p.tuple else {
            return rss.default_queue;
        };
        let t = rss.hash_types;
        let input = match (p.l4, ports) {
            (L4::Tcp, Some((s, d))) if t & HASH_TCPV4 != 0 => {
                toeplitz::ipv4_ports_input(src, dst, s, d).to_vec()
            }
            (L4::Udp, Some((s, d))) if t & HASH_UDPV4 != 0 => {
                toeplitz::ipv4_ports_input(src, dst, s, d).to_vec()
            }
            _ if t & HASH_IPV4 != 0 => toeplitz::ipv4_input(src, dst).to_vec(),
            _ => return rss.default_queue,
        };
        let hash = toeplitz::hash(&rss.key, &input);
        rss.table[hash as usize & (rss.table.len() - 1)]
    }

    /// The pair of the backend queue a frame arrives on without RSS: 0 on a single-queue
    /// backend; on a multiqueue one a flow hash (FNV-1a here; the host kernel's own in QEMU)
    /// over the active pairs, so that one flow keeps its pair and flows spread.
    fn backend_pair(&self, f: &[u8]) -> u16 {
        if !self.cfg.multiqueue_backend || self.curr_pairs <= 1 {
            return 0;
        }
        let hash = f[..f.len().min(38)].iter().fold(0x811c_9dc5u32, |h, &b| {
            (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
        });
        (hash % u32::from(self.curr_pairs)) as u16
    }

    /// Whether `frame` is an unfragmented IPv4 TCP/UDP packet whose checksum is right: the
    /// model's wire carries whole frames, and the model plays a backend that checked them (a
    /// host whose NIC verified the checksum hands the frame on with `DATA_VALID`, §5.1.6.4).
    /// A UDP checksum of zero is not checked, so not marked.
    fn l4_checksum_right(frame: &[u8]) -> bool {
        let p = crate::engine::parse(frame, 0x8100);
        match (p.l3, p.l4) {
            (Some(l3), crate::engine::L4::Tcp | crate::engine::L4::Udp) => {
                crate::csum::l4_ok(frame, l3, p.l4 == crate::engine::L4::Udp) == Some(true)
            }
            _ => false,
        }
    }

    /// `frame` as a sender on the same host hands it over with its checksum offload on
    /// ([`VirtioNetModelConfig::partial_checksums`]), with `csum_start` and `csum_offset`: an
    /// unfragmented IPv4 TCP/UDP frame whose checksum is right, the checksum field holding the
    /// pseudo-header's sum. `None` for any other frame.
    fn partial_of(frame: &[u8]) -> Option<(Vec<u8>, u16, u16)> {
        if !Self::l4_checksum_right(frame) {
            return None;
        }
        let p = parse(frame, 0x8100);
        let mut f = frame.to_vec();
        let (start, offset) = crate::csum::make_partial(&mut f, p.l3?, p.l4 == L4::Udp)?;
        Some((f, start, offset))
    }

    /// `virtio_net_receive_rcu`, non-mergeable buffers, no vnet-header backend.
    fn receive(&mut self, frame: &[u8], crc_ok: bool) {
        if !crc_ok || frame.len() < 14 {
            return;
        }
        if self.status & status::DRIVER_OK == 0 || self.broken || !self.link_up || !self.dma_ok() {
            return;
        }
        if !self.accept(frame) {
            return;
        }
        let pair = self.rss_pair(frame);
        let vq = 2 * usize::from(pair);
        if pair >= self.curr_pairs || !self.vqs[vq].ready() {
            return;
        }
        // virtio_net_has_buffers: an empty queue turns notifications on, a non-empty one off.
        let q = self.vqs[vq].clone();
        let empty = self.rd16(q.avail + 2).is_none_or(|i| i == q.last_avail);
        self.set_notification(vq, empty);
        if empty {
            self.rx_dropped += 1;
            return;
        }
        let ring = Ring::Rx(pair);
        let Some(e) = self.pop(vq) else { return };
        if e.inn.is_empty() {
            // "virtio-net receive queue contains no in buffers".
            self.error();
            return;
        }
        let capacity: usize = e.inn.iter().map(|&(_, l)| l as usize).sum();
        if capacity < HDR_LEN + frame.len() {
            // "truncated non-mergeable packet": dropped, the buffer stays available.
            self.unpop(vq);
            self.rx_dropped += 1;
            return;
        }
        let plan = self.engine.plan(ring);
        let (garbage, oversize, length) = match plan {
            Plan::Now {
                garbage,
                oversize,
                length,
                ..
            } => (garbage, oversize, length),
            _ => (0, None, None),
        };
        // receive_header: a zero struct virtio_net_hdr (10 bytes); num_buffers is written
        // only with MRG_RXBUF.
        let mut hdr = [0u8; 10];
        hdr[..4].copy_from_slice(&garbage.to_le_bytes());
        let partial;
        let mut frame = frame;
        if self.has(feature::GUEST_CSUM) && self.cfg.partial_checksums {
            hdr[0] |= HDR_F_NEEDS_CSUM;
            if let Some((f, start, offset)) = Self::partial_of(frame) {
                hdr[6..8].copy_from_slice(&start.to_le_bytes());
                hdr[8..10].copy_from_slice(&offset.to_le_bytes());
                partial = f;
                frame = &partial;
            }
        } else if self.has(feature::GUEST_CSUM) && Self::l4_checksum_right(frame) {
            hdr[0] |= HDR_F_DATA_VALID;
        }
        if !self.write_iov(&e.inn, 0, &hdr) || !self.write_iov(&e.inn, HDR_LEN, frame) {
            self.error();
            return;
        }
        let len = match (length, oversize) {
            // `DeviceFault::ExactLength`.
            (Some(len), _) => u32::from(len),
            (None, Some(extra)) => (capacity + usize::from(extra)) as u32,
            (None, None) => (HDR_LEN + frame.len()) as u32,
        };
        self.complete(vq, ring, u32::from(e.head), len, plan);
    }

    // ---- control queue -------------------------------------------------------------------

    /// `virtio_net_handle_ctrl`.
    fn handle_ctrl(&mut self) {
        let vq = self.ctrl_vq();
        while let Some(e) = self.pop(vq) {
            let mut out = Vec::new();
            for &(addr, len) in &e.out {
                match self.engine.iommu.read(addr, len as usize) {
                    Some(b) => out.extend_from_slice(&b),
                    None => {
                        self.error();
                        return;
                    }
                }
            }
            if out.len() < 2 || e.inn.is_empty() {
                // "virtio-net ctrl missing headers".
                self.error();
                return;
            }
            let (class, cmd, data) = (out[0], out[1], &out[2..]);
            let ack = match class {
                _ if self.cfg.ctrl_refuses => NET_ERR,
                CTRL_RX => self.ctrl_rx(cmd, data),
                CTRL_MQ => self.ctrl_mq(cmd, data),
                _ => NET_ERR,
            };
            if !self.write_iov(&e.inn, 0, &[ack]) {
                self.error();
                return;
            }
            self.write_used(vq, u32::from(e.head), 1, 0);
            self.notify_irq(vq);
        }
    }

    /// `virtio_net_handle_rx_mode`.
    fn ctrl_rx(&mut self, cmd: u8, data: &[u8]) -> u8 {
        let [on] = data else { return NET_ERR };
        let on = *on != 0;
        match cmd {
            0 => self.promisc = on,
            1 => self.allmulti = on,
            2 => self.alluni = on,
            3 => self.nomulti = on,
            4 => self.nouni = on,
            5 => self.nobcast = on,
            _ => return NET_ERR,
        }
        NET_OK
    }

    /// `virtio_net_handle_mq` (and `virtio_net_handle_rss` for `RSS_CONFIG`).
    fn ctrl_mq(&mut self, cmd: u8, data: &[u8]) -> u8 {
        // Any MQ command first turns RSS off (virtio_net_disable_rss).
        self.rss = None;
        let pairs = match cmd {
            CTRL_MQ_VQ_PAIRS_SET if self.has(feature::MQ) => match data {
                [a, b] => u16::from_le_bytes([*a, *b]),
                _ => return NET_ERR,
            },
            CTRL_MQ_RSS_CONFIG if self.has(feature::RSS) => match self.parse_rss(data) {
                Some((rss, pairs, key_len)) => {
                    // QEMU switches RSS off only for a command with neither hash types nor a
                    // key; with a key and no hash type it stays on and sends every frame to
                    // `unclassified_queue` (what the driver's bring-up relies on, and what the
                    // QEMU test `virtio-rss-four-queues` saw).
                    let enabled = rss.hash_types != 0 || key_len != 0;
                    self.rss = enabled.then_some(rss);
                    pairs
                }
                None => return NET_ERR,
            },
            _ => return NET_ERR,
        };
        let multiqueue = self.has(feature::MQ) || self.has(feature::RSS);
        if pairs == 0 || pairs > 0x8000 || pairs > self.max_pairs() || !multiqueue {
            self.rss = None;
            return NET_ERR;
        }
        self.curr_pairs = pairs;
        NET_OK
    }

    /// `struct virtio_net_rss_config` (virtio 1.2 §5.1.6.5.7.1), checked as QEMU does.
    fn parse_rss(&self, d: &[u8]) -> Option<(Rss, u16, usize)> {
        let u16_at = |at: usize| d.get(at..at + 2).map(|b| u16::from_le_bytes([b[0], b[1]]));
        let hash_types = u32::from_le_bytes(d.get(..4)?.try_into().ok()?);
        let table_len = usize::from(u16_at(4)?) + 1;
        if !table_len.is_power_of_two() || table_len > RSS_MAX_TABLE {
            return None;
        }
        let default_queue = u16_at(6)?;
        if default_queue >= self.max_pairs() {
            return None;
        }
        let table: Vec<u16> = (0..table_len)
            .map(|i| u16_at(8 + 2 * i))
            .collect::<Option<_>>()?;
        if table.iter().any(|&q| q >= self.max_pairs()) {
            return None;
        }
        let at = 8 + 2 * table_len;
        let max_tx_vq = u16_at(at)?;
        let key_len = usize::from(*d.get(at + 2)?);
        if max_tx_vq == 0 || max_tx_vq > self.max_pairs() || key_len > RSS_MAX_KEY {
            return None;
        }
        if key_len == 0 && hash_types != 0 {
            return None; // "No key provided"
        }
        let mut key = [0u8; toeplitz::KEY_LEN];
        key[..key_len].copy_from_slice(d.get(at + 3..at + 3 + key_len)?);
        Some((
            Rss {
                hash_types,
                table,
                default_queue,
                key,
            },
            max_tx_vq,
            key_len,
        ))
    }

    // ---- configuration space ---------------------------------------------------------------

    fn vendor_cap(&self, off: u16) -> Option<u32> {
        for &(at, next, ty, region, len) in &CAPS {
            let cap_len: u32 = if ty == 2 || ty == 5 { 20 } else { 16 };
            let rel = match off.checked_sub(at) {
                Some(rel) if u32::from(rel) < cap_len => rel,
                _ => continue,
            };
            let dword = match rel {
                0 => 0x09 | u32::from(next) << 8 | cap_len << 16 | u32::from(ty) << 24,
                4 if ty != 5 => u32::from(MODERN_BAR),
                8 if ty != 5 => region as u32,
                12 if ty != 5 => len as u32,
                16 if ty == 2 => NOTIFY_MULT as u32,
                _ => 0,
            };
            return Some(dword);
        }
        None
    }
}

/// `virtio_queue_set_num`: a size is taken only for an existing queue, up to the maximum.
fn set_num(q: &mut Vq, val: u32) {
    if val != 0 && q.size != 0 && val <= u32::from(QUEUE_MAX_SIZE) {
        q.size = val as u16;
    }
}

/// `vring_need_event` (virtio 1.2 §2.7.10): whether moving an index from `old` to `new`
/// crosses `event`.
fn need_event(event: u16, new: u16, old: u16) -> bool {
    new.wrapping_sub(event).wrapping_sub(1) < new.wrapping_sub(old)
}

impl Model for VirtioNetModel {
    fn read(&mut self, _off: usize) -> u32 {
        // No BAR0: the legacy I/O BAR is disabled (disable-legacy=on).
        u32::MAX
    }

    fn write(&mut self, _off: usize, _val: u32) {}

    fn read_bar(&mut self, bar: u8, off: usize, size: usize) -> u32 {
        if bar != MODERN_BAR {
            return u32::MAX;
        }
        match off {
            o if o < ISR_AT => self.common_read(o - COMMON_AT),
            o if o < DEVICE_AT => {
                // virtio_pci_isr_read: read and clear.
                std::mem::take(&mut self.isr).into()
            }
            o if o < NOTIFY_AT => self.device_read(o - DEVICE_AT, size),
            _ => 0,
        }
    }

    fn write_bar(&mut self, bar: u8, off: usize, _size: usize, val: u32) {
        if bar != MODERN_BAR {
            return;
        }
        match off {
            o if o < ISR_AT => self.common_write(o - COMMON_AT, val),
            // ISR and device configuration: virtio-net has no writable configuration field
            // with VERSION_1 (the MAC is set through the control queue).
            o if o < NOTIFY_AT => {}
            o => {
                let vq = (o - NOTIFY_AT) / NOTIFY_MULT;
                if vq < 1024 {
                    self.notify(vq);
                }
            }
        }
    }

    fn config_read(&self, off: u16) -> u32 {
        if off == MSIX_CAP {
            // MSI-X, next → the PCI-config-access capability; table size N-1; enabled.
            let n = self.vectors.len() as u32 - 1;
            return 0x11 | 0x84 << 8 | (n | 1 << 15) << 16;
        }
        self.vendor_cap(off).unwrap_or_else(|| self.pci.read32(off))
    }

    fn config_write(&mut self, off: u16, val: u32) {
        self.pci.write32(off, val)
    }

    fn receive(&mut self, frame: &[u8], crc_ok: bool) {
        VirtioNetModel::receive(self, frame, crc_ok)
    }

    fn step(&mut self) -> bool {
        let mut due = Vec::new();
        self.delayed.retain_mut(|d| {
            if d.steps <= 1 {
                due.push((d.vq, d.id, d.len));
                false
            } else {
                d.steps -= 1;
                true
            }
        });
        for (vq, id, len) in due {
            let ring = ring_of(vq);
            self.land(vq, ring, id, len);
        }
        // A held entry with nobody after it is released here (as Wire::release_held).
        for vq in 0..self.vqs.len() {
            if let Some((id, len)) = self.vqs[vq].held.take() {
                self.write_used(vq, id, len, 0);
                self.notify_irq(vq);
            }
        }
        !self.delayed.is_empty()
    }

    fn advance(&mut self, ns: u64) {
        self.now_ns = self.now_ns.saturating_add(ns);
    }

    fn now_ns(&self) -> u64 {
        self.now_ns
    }

    fn mac(&self) -> MacAddr {
        self.cfg.mac
    }

    fn set_cable(&mut self, up: bool) {
        // virtio_net_set_link_status: the status field follows, and the driver is told.
        if self.link_up != up {
            self.link_up = up;
            self.notify_config();
        }
    }

    fn engine(&mut self) -> &mut Engine {
        &mut self.engine
    }

    fn rings(&self) -> Vec<(u64, u64)> {
        // The used rings (flags, idx, the elements and avail_event, virtio 1.2 §2.7.8): the
        // only ring memory a virtio device writes.
        self.vqs
            .iter()
            .filter(|q| q.ready() && q.size > 0)
            .map(|q| (q.used, 6 + 8 * u64::from(q.size)))
            .collect()
    }

    fn take_outbox(&mut self) -> Vec<Vec<u8>> {
        std::mem::take(&mut self.outbox)
    }

    fn critical(&mut self, fault: CriticalFault) {
        match fault {
            // A reset the driver did not ask for: device_status reads 0 (virtio 1.2 §2.1).
            CriticalFault::Reset => self.reset(),
            // virtio_error: DEVICE_NEEDS_RESET and a configuration-change notification.
            CriticalFault::NeedsReset => self.error(),
            CriticalFault::DisableQueue(ring) => {
                let vq = match ring {
                    Ring::Rx(n) => 2 * usize::from(n),
                    Ring::Tx(n) => 2 * usize::from(n) + 1,
                };
                if vq < self.vqs.len() {
                    self.queue_reset(vq);
                }
            }
            CriticalFault::SurpriseRemoval => {}
        }
    }

    fn as_virtio(&self) -> Option<&VirtioNetModel> {
        Some(self)
    }
}

/// The fault-engine ring of data virtqueue `vq`.
fn ring_of(vq: usize) -> Ring {
    let pair = (vq / 2) as u16;
    if vq % 2 == 0 {
        Ring::Rx(pair)
    } else {
        Ring::Tx(pair)
    }
}

#[cfg(test)]
mod unit {
    use super::need_event;

    #[test]
    fn need_event_fires_only_when_the_event_index_is_crossed() {
        assert!(need_event(5, 6, 5), "5 → 6 crosses 5");
        assert!(!need_event(7, 6, 5), "event ahead");
        assert!(!need_event(4, 6, 5), "event behind");
        assert!(need_event(0xffff, 1, 0xfffe), "across the wrap");
    }
}
