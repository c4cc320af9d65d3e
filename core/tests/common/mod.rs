//! What core's integration tests share: two emulated NICs on one wire with their driver — the
//! 82576 (igb) unless a test names another [`TestNic`] — the MAC addresses they use, memory for
//! registration, a clock for waits, and [`on_every_nic!`], which runs a generic test on each NIC.
#![allow(dead_code, reason = "each test file uses the part it needs")]

pub(crate) mod counting;

use std::time::{Duration, Instant};

use ringfab::domain::Domain;
use ringfab::hal::{MacAddr, Mmio, Nic, Platform};
use ringfab::Capacities;
use ringfab_e1000e::E1000e;
use ringfab_emu::{
    DeviceFault, E1000e82574, E1000eModelConfig, EmuE1000e, EmuIgb, EmuNic, EmuPlatform,
    EmuVirtioNet, EmuWait, Igb82576, IgbModelConfig, Kind, Ring, VirtioNetModelConfig,
    VirtioNetPci, Wire, WireFault,
};
use ringfab_igb::Igb;
use ringfab_virtio_net::VirtioNet;

/// NIC A's station address.
pub(crate) const MAC_A: MacAddr = MacAddr([0x52, 0x54, 0x00, 0x00, 0x00, 0x0A]);
/// NIC B's station address.
pub(crate) const MAC_B: MacAddr = MacAddr([0x52, 0x54, 0x00, 0x00, 0x00, 0x0B]);

/// The igb driver on the emulated 82576.
pub(crate) type Igb0 = Igb<EmuPlatform>;

/// One NIC the tests run on: its emulated device, its driver, and what differs between NICs
/// where a test looks.
pub(crate) trait TestNic: 'static {
    /// The emulated device's kind.
    type Kind: Kind;
    /// The driver.
    type Nic: Nic<Wait = EmuWait>;

    /// A device with station address `mac`, not plugged in.
    fn device(mac: MacAddr) -> EmuNic<Self::Kind>;
    /// The driver brought up on `platform`.
    fn driver(platform: EmuPlatform) -> Self::Nic;

    /// The receive error bits a frame with a bad CRC completes with; `None` if such a frame
    /// never reaches the driver.
    const RX_CRC_ERROR: Option<u32>;

    /// Operations a ring of `d` descriptors holds: the Intel rings keep one empty (a full
    /// ring's tail would equal its head, which the device reads as empty); a virtqueue holds
    /// `d` (one descriptor id per buffer).
    const RING_HOLDS_ONE_FEWER: bool;

    /// Makes the next frame B receives complete with an error the device reports: a bad CRC on
    /// the wire where the NIC reports one, else a receive status the driver refuses.
    fn rx_error_next(p: &Pair<Self>)
    where
        Self: Sized,
    {
        match Self::RX_CRC_ERROR {
            Some(_) => p.wire.inject(WireFault::Corrupt {
                count: 1,
                offset: 30,
                mode: ringfab_emu::CorruptMode::BadCrc,
            }),
            None => p.b.inject(DeviceFault::GarbageStatus {
                ring: Some(Ring::Rx(0)),
                count: 1,
                bits: Self::RX_GARBAGE_STATUS,
            }),
        }
    }
    /// Status bits a lying device writes that the driver must refuse (for
    /// [`rx_error_next`](Self::rx_error_next) where bad CRCs never arrive).
    const RX_GARBAGE_STATUS: u32 = 0;

    /// The bytes a receive buffer of `buf_len` lets the device write: the buffer itself on the
    /// Intel NICs (a longer frame takes more buffers), more on virtio-net, whose driver gives
    /// the device an overflow area up to its longest frame so that a long frame is truncated
    /// rather than dropped.
    fn rx_room(buf_len: u32) -> u32 {
        buf_len
    }

    /// The `prov_errno` kind and `err_data` of the error [`rx_error_next`](Self::rx_error_next)
    /// makes, and the length its error entry keeps (`frame`: the frame's length).
    fn rx_error(frame: usize) -> (i32, Vec<u8>, usize) {
        match Self::RX_CRC_ERROR {
            // RxFrame: the error bits; the frame's checked length is kept.
            Some(bits) => (1, bits.to_le_bytes().to_vec(), frame),
            // RxDeviceStatus: the raw status, no length.
            None => (
                4,
                u64::from(Self::RX_GARBAGE_STATUS).to_le_bytes().to_vec(),
                0,
            ),
        }
    }

    /// Whether a ring of depth N takes only N − 1 buffers: the Intel rings tell full from empty
    /// by keeping one descriptor unused (head == tail is empty); a virtqueue's free-id stack
    /// hands out all N.
    const RING_KEEPS_ONE_EMPTY: bool;

    /// Whether a frame longer than a receive buffer is spread over the buffers after it (the
    /// Intel rings without long-packet buffers: the first buffer completes truncated, the
    /// others go back into the ring), rather than written into one buffer and the overflow
    /// area after it (virtio-net without `MRG_RXBUF`: QEMU puts a frame into one descriptor
    /// chain or drops it, `virtqueue_unpop`, so the driver makes the chain long enough).
    const SPLITS_LONG_FRAMES: bool = true;

    /// Whether B's interrupt vector `v` is unmasked, where the NIC has a register saying so
    /// (`None` elsewhere: the tests then see arming only through the interrupts that arrive).
    fn vector_unmasked(p: &Pair<Self>, v: u16) -> Option<bool>
    where
        Self: Sized,
    {
        let _ = (p, v);
        None
    }
}

/// The 82576 under the igb driver.
pub(crate) enum IgbNic {}
/// The 82574 under the e1000e driver.
pub(crate) enum E1000eNic {}
/// virtio-net-pci under the virtio-net driver.
pub(crate) enum VirtioNic {}

impl TestNic for IgbNic {
    type Kind = Igb82576;
    type Nic = Igb0;

    fn device(mac: MacAddr) -> EmuIgb {
        let mut config = IgbModelConfig::default();
        config.mac = mac;
        EmuIgb::new(config)
    }

    fn driver(platform: EmuPlatform) -> Igb0 {
        Igb::new(platform).unwrap()
    }

    const RX_CRC_ERROR: Option<u32> = Some(ringfab_emu::igb::regs::RXD_ERR_RXE);
    const RING_HOLDS_ONE_FEWER: bool = true;
    const RING_KEEPS_ONE_EMPTY: bool = true;

    /// EIMS: one mask bit per MSI-X vector (82576 datasheet, Extended Interrupt Mask Set).
    fn vector_unmasked(p: &Pair<Self>, v: u16) -> Option<bool> {
        let eims =
            p.b.platform()
                .bar(0)
                .unwrap()
                .read32(ringfab_emu::igb::regs::EIMS);
        Some(eims & 1 << v != 0)
    }
}

impl TestNic for E1000eNic {
    type Kind = E1000e82574;
    type Nic = E1000e<EmuPlatform>;

    fn device(mac: MacAddr) -> EmuE1000e {
        let mut config = E1000eModelConfig::default();
        config.mac = mac;
        EmuE1000e::new(config)
    }

    fn driver(platform: EmuPlatform) -> E1000e<EmuPlatform> {
        E1000e::new(platform).unwrap()
    }

    const RX_CRC_ERROR: Option<u32> = Some(ringfab_emu::e1000e::regs::RXD_ERR_RXE);
    const RING_HOLDS_ONE_FEWER: bool = true;
    const RING_KEEPS_ONE_EMPTY: bool = true;
    // vector_unmasked: the 82574 masks interrupt causes (IMS), routed to vectors by IVAR, not
    // vectors.
}

impl TestNic for VirtioNic {
    type Kind = VirtioNetPci;
    type Nic = VirtioNet<EmuPlatform>;

    /// Two queue pairs (`mq=on`, `queues=2`), so that tests may use transmit queue 1 as the
    /// Intel NICs do.
    fn device(mac: MacAddr) -> EmuVirtioNet {
        let mut config = VirtioNetModelConfig::default();
        config.mac = mac;
        config.queue_pairs = 2;
        EmuVirtioNet::new(config)
    }

    fn driver(platform: EmuPlatform) -> VirtioNet<EmuPlatform> {
        VirtioNet::new(platform).unwrap()
    }

    /// A frame with a bad FCS never reaches a virtio device (the host drops it).
    const RX_CRC_ERROR: Option<u32> = None;
    const RING_HOLDS_ONE_FEWER: bool = false;
    /// `gso_type` `VIRTIO_NET_HDR_GSO_TCPV4` in the receive header, which the driver never
    /// negotiates (the checksum flags it does: `GUEST_CSUM`).
    const RX_GARBAGE_STATUS: u32 = 0x0100;

    fn rx_room(buf_len: u32) -> u32 {
        buf_len.max(ringfab_virtio_net::MAX_FRAME_LEN as u32)
    }
    const RING_KEEPS_ONE_EMPTY: bool = false;
    const SPLITS_LONG_FRAMES: bool = false;
    // vector_unmasked: a virtqueue asks for interrupts in ring memory (`used_event`), there is
    // no mask register.
}

/// Two emulated NICs of kind `T` on one wire, brought up by their driver.
pub(crate) struct Pair<T: TestNic = IgbNic> {
    pub(crate) wire: Wire,
    pub(crate) a: EmuNic<T::Kind>,
    pub(crate) b: EmuNic<T::Kind>,
    pub(crate) nic_a: T::Nic,
    pub(crate) nic_b: T::Nic,
}

/// An emulated 82576 with station address `mac`, plugged into `wire`.
pub(crate) fn device(mac: MacAddr, wire: &Wire) -> EmuIgb {
    let dev = IgbNic::device(mac);
    dev.connect(wire);
    dev
}

/// Two 82576, A and B, on a fresh wire.
pub(crate) fn pair() -> Pair {
    pair_of::<IgbNic>()
}

/// Two NICs of kind `T`, A and B, on a fresh wire.
pub(crate) fn pair_of<T: TestNic>() -> Pair<T> {
    let wire = Wire::new();
    let (a, b) = (T::device(MAC_A), T::device(MAC_B));
    a.connect(&wire);
    b.connect(&wire);
    let nic_a = T::driver(a.platform());
    let nic_b = T::driver(b.platform());
    Pair {
        wire,
        a,
        b,
        nic_a,
        nic_b,
    }
}

/// For each named generic test `fn name<T: TestNic>()`, a module per NIC — `igb`, `e1000e`,
/// `virtio_net` — holding `#[test] fn name()` that runs it there, so that a failure names the
/// NIC (`virtio_net::name`).
#[allow(
    unused_macros,
    reason = "only the test files with per-NIC tests use it"
)]
macro_rules! on_every_nic {
    ($($name:ident),+ $(,)?) => {
        mod igb {
            $( #[test] fn $name() { super::$name::<super::IgbNic>(); } )+
        }
        mod e1000e {
            $( #[test] fn $name() { super::$name::<super::E1000eNic>(); } )+
        }
        mod virtio_net {
            $( #[test] fn $name() { super::$name::<super::VirtioNic>(); } )+
        }
    };
}
#[allow(
    unused_imports,
    reason = "only the test files with per-NIC tests use it"
)]
pub(crate) use on_every_nic;

/// Unwraps what a handle's `close(&d)` returned: panics with the error (the handle it hands
/// back is dropped, left to the domain's end). The handles are not `Debug`, so `unwrap` is
/// not there for them.
#[track_caller]
pub(crate) fn closed<T>(r: Result<(), (ringfab::Error, T)>) {
    if let Err((e, _)) = r {
        panic!("close: {e}");
    }
}

/// Memory for a registration to own.
pub(crate) fn memory(len: usize) -> Vec<u8> {
    vec![0u8; len]
}

/// Wall-clock time since the clock was made (`ringfab::Clock` for waits).
pub(crate) struct StdClock(pub(crate) Instant);

impl ringfab::Clock for StdClock {
    fn now(&self) -> Duration {
        self.0.elapsed()
    }
}

/// A clock starting now.
pub(crate) fn clock() -> StdClock {
    StdClock(Instant::now())
}

/// Domains over `p.nic_a` and `p.nic_b` (82576s) with the capacities the shared-context tests
/// use: 8 hardware queues each, `cqs_a` and `cqs_b` CQs of up to 1024 entries, one MR and one
/// AV each. Counters, where a test binds some, go on with `.with_counters(..)`.
pub(crate) fn two_domains<const D: usize>(
    p: &Pair,
    cqs_a: usize,
    cqs_b: usize,
) -> (Domain<'_, Igb0, D>, Domain<'_, Igb0, D>) {
    let caps = |cqs| Capacities {
        queues: 8,
        cqs,
        cq_size: 1024,
        mrs: 1,
        avs: 1,
        ..Capacities::DEFAULT
    };
    (
        Domain::with_capacities(&p.nic_a, &caps(cqs_a)),
        Domain::with_capacities(&p.nic_b, &caps(cqs_b)),
    )
}

/// The sending side of the threaded context tests: `messages` messages from `tx` (of domain
/// `dom`) to `dest`, each carrying `(flow << 32) | seq` as its 8 payload bytes, never more than
/// `window` ahead of `received` (DGRAM has no flow control: a frame that finds no receive
/// buffer is lost), buffers taken from `pool` and given back by `cq`'s completions. Panics
/// after 60 s without finishing.
#[allow(clippy::too_many_arguments, reason = "a test's sender, spelled out")]
pub(crate) fn send_windowed<'d, N: Nic, const D: usize>(
    dom: &'d Domain<'_, N, D>,
    tx: &ringfab::ep::Endpoint,
    cq: &ringfab::cq::CompletionQueue<N, ringfab::entry::Msg>,
    mut pool: Vec<ringfab::mr::Buf<'d>>,
    dest: ringfab::av::FiAddr,
    flow: usize,
    messages: usize,
    window: usize,
    received: &std::sync::atomic::AtomicUsize,
) {
    use ringfab::av::FiAddr;
    use ringfab::entry::{MsgEntry, OpContext};
    let mut sent = 0;
    let mut e = [MsgEntry::default(); 8];
    let mut src = [FiAddr::NOTAVAIL; 8];
    let mut bufs: [Option<ringfab::mr::Buf<'d>>; 8] = Default::default();
    let deadline = Instant::now() + Duration::from_secs(60);
    while sent < messages {
        assert!(Instant::now() < deadline, "flow {flow}: stalled at {sent}");
        if let Ok(n) = cq.read_owned(dom, &mut e, &mut src, &mut bufs) {
            pool.extend(bufs[..n].iter_mut().map(|b| b.take().unwrap()));
        }
        if sent >= received.load(std::sync::atomic::Ordering::Acquire) + window {
            std::thread::yield_now();
            continue;
        }
        let Some(mut buf) = pool.pop() else {
            std::thread::yield_now();
            continue;
        };
        let tag = ((flow as u64) << 32) | sent as u64;
        buf.write(tx.payload_offset(), &tag.to_le_bytes()).unwrap();
        match tx.send(dom, buf, 8, dest, OpContext(sent)) {
            Ok(()) => sent += 1,
            Err((ringfab::Error::Again, b)) => pool.push(b),
            Err((err, _)) => panic!("flow {flow}: {err}"),
        }
    }
}

/// Frame slots of a [`RawSender`]'s memory, and their size: one per transmit descriptor.
const RAW_SLOTS: usize = 64;
const RAW_SLOT_LEN: usize = 2048;

/// Sends raw frames from A's transmit queue 1 with the driver alone, outside any domain (for
/// tests about what B's CQ makes of frames), and runs the wire.
pub(crate) struct RawSender<'n, T: TestNic> {
    tx: <T::Nic as Nic>::Tx<'n, 64>,
    mem: ringfab_emu::EmuDma,
    next: u64,
}

impl<'n, T: TestNic> RawSender<'n, T> {
    pub(crate) fn new(p: &'n Pair<T>) -> Self {
        RawSender {
            tx: p
                .nic_a
                .open_tx::<64>(1, ringfab::hal::TxConfig::default())
                .unwrap(),
            mem: p.a.platform().alloc_dma(RAW_SLOT_LEN * RAW_SLOTS).unwrap(),
            next: 0,
        }
    }

    /// Sends one frame of up to 64 KiB (a jumbo one), lets the wire deliver it, and takes the
    /// transmit completion back.
    pub(crate) fn send_long(&mut self, p: &Pair<T>, frame: &[u8]) {
        use ringfab::hal::{DmaRegion, Queue, Token, TxQueue, TxSegment};
        self.mem.write_bytes(0, frame);
        let seg = TxSegment {
            iova: self.mem.iova(),
            len: frame.len() as u16,
        };
        self.tx
            .push(&[seg], Token(self.next), ringfab::hal::Report::Always)
            .unwrap();
        self.next += 1;
        self.tx.doorbell();
        p.wire.run_until_idle();
        let mut out = [ringfab::hal::TxCompletion {
            token: Token(0),
            status: Ok(()),
        }; 64];
        while self.tx.poll(&mut out) > 0 {}
    }

    /// Sends `frames` (each at most 2 KiB) in one burst, lets the wire deliver them, and takes
    /// the transmit completions back.
    pub(crate) fn send(&mut self, p: &Pair<T>, frames: &[Vec<u8>]) {
        use ringfab::hal::{DmaRegion, Iova, Queue, Report, Token, TxQueue, TxSegment};
        for f in frames {
            let off = (self.next as usize % RAW_SLOTS) * RAW_SLOT_LEN;
            self.mem.write_bytes(off, f);
            let seg = TxSegment {
                iova: Iova(self.mem.iova().0 + off as u64),
                len: f.len() as u16,
            };
            self.tx
                .push(&[seg], Token(self.next), Report::Always)
                .unwrap();
            self.next += 1;
        }
        self.tx.doorbell();
        p.wire.run_until_idle();
        let mut out = [ringfab::hal::TxCompletion {
            token: Token(0),
            status: Ok(()),
        }; 64];
        while self.tx.poll(&mut out) > 0 {}
    }
}

/// Operations a ring of `d` descriptors of NIC `T` holds ([`TestNic::RING_HOLDS_ONE_FEWER`]):
/// what `size_left` says of an empty queue.
pub(crate) fn ring_room<T: TestNic>(d: usize) -> usize {
    if T::RING_HOLDS_ONE_FEWER {
        d - 1
    } else {
        d
    }
}

/// One completion as the application sees it: context, flags, length, which of the buffers
/// of interest it came with (its place among their addresses; `None` for another) and, on a
/// receive, the payload's bytes.
pub(crate) type Seen = (
    usize,
    ringfab::flags::CompletionFlags,
    usize,
    Option<usize>,
    Vec<u8>,
);

/// The IPv4 address `addr` on a /24 with no gateway: the plain-UDP tests' configuration.
pub(crate) fn ipv4_config(addr: ringfab::ip::Ipv4Addr) -> ringfab::ip::Ipv4Config {
    ringfab::ip::Ipv4Config {
        addr,
        prefix_len: 24,
        gateway: None,
    }
}

/// A domain over `nic` with `caps`, `clock` for its timers and [`ipv4_config`]`(addr)`: what
/// the plain-UDP tests (`ip.rs`, `recv_batch.rs`, `send_batch.rs`) start from.
pub(crate) fn ip_domain<'n, N: Nic, const D: usize>(
    nic: &'n N,
    clock: &'n (dyn ringfab::Clock + Sync),
    addr: ringfab::ip::Ipv4Addr,
    caps: &Capacities,
) -> Domain<'n, N, D> {
    let d = Domain::<_, D>::with_capacities(nic, caps).with_clock(clock);
    d.set_ipv4(ipv4_config(addr)).unwrap();
    d
}

/// Reads every completion `cq` has now with `read_owned`, each buffer taken back; `addrs` are
/// the addresses of the buffers of interest, `payload_offset` where a receive's payload starts.
pub(crate) fn read_seen<'d, N: Nic, const D: usize>(
    d: &'d Domain<'_, N, D>,
    cq: &ringfab::cq::CompletionQueue<N, ringfab::entry::Msg>,
    payload_offset: usize,
    addrs: &[usize],
) -> Vec<Seen> {
    use ringfab::av::FiAddr;
    use ringfab::entry::MsgEntry;
    use ringfab::flags::CompletionFlags;
    use ringfab::mr::Buf;
    let mut seen = Vec::new();
    loop {
        let mut e = [MsgEntry::default(); 8];
        let mut src = [FiAddr::NOTAVAIL; 8];
        let mut bufs: [Option<Buf<'d>>; 8] = Default::default();
        match cq.read_owned(d, &mut e, &mut src, &mut bufs) {
            Ok(n) => {
                for k in 0..n {
                    let buf = bufs[k].take().expect("an owned operation's buffer");
                    let mut data = Vec::new();
                    if e[k].flags.contains(CompletionFlags::RECV) {
                        data = vec![0u8; e[k].len];
                        buf.read(payload_offset, &mut data).unwrap();
                    }
                    seen.push((
                        e[k].op_context.0,
                        e[k].flags,
                        e[k].len,
                        addrs.iter().position(|&a| a == buf.addr()),
                        data,
                    ));
                }
            }
            Err(ringfab::Error::Again) => return seen,
            Err(other) => panic!("read: {other:?}"),
        }
    }
}
