//! The driver tests that do not depend on the NIC, written once and run against every driver.
//!
//! A driver's integration tests instantiate the suite with a [`Fixture`] — its driver type, its
//! emulated device, and the few device facts a test needs (which error bit a bad CRC sets, which
//! status bits a lying device can write, how long the device throttles interrupts):
//!
//! ```text
//! // drivers/<nic>/tests/suite.rs
//! struct MyNic;
//! impl ringfab_nic_suite::Fixture for MyNic { /* … */ }
//! ringfab_nic_suite::suite!(MyNic);
//! ```
//!
//! [`suite!`] expands to one `#[test]` per test of the suite, each calling the generic test
//! function of the same name with the fixture; `cargo test` then runs the whole suite on every
//! NIC that has a fixture (igb, e1000e, virtio-net). Where a device behaves otherwise than the
//! Intel rings (a bad FCS never delivered, a status for every frame, completion by id, …) its
//! fixture says so with one of the [`Fixture`] constants and the tests check that behaviour
//! instead. A NIC whose emulated device lacks a feature (RSS, say) names the sections it runs
//! instead: `suite!(MyNic: basics, queues, wire, device, iommu, link, interrupts)`. The
//! sections:
//!
//! * `basics` ([`basics`]): bring-up, link, MAC, frames across the wire with their contents
//!   checked, flush, receive interrupts, a lying length and garbage status, a bad CRC;
//! * `queues` ([`queues`]): one queue pair in one direction and in both at once from two
//!   threads, a million frames through 64-entry rings;
//! * `rss` ([`queues`], [`faults`]): RSS spreading flows over two receive queues with each flow
//!   kept on the queue the emu's own Toeplitz hash picks, both directions, and a lying length
//!   on one queue sparing the other;
//! * `wire`, `device`, `iommu`, `link`, `interrupts` ([`faults`]): every fault of the wire, the
//!   device's DMA engine and its IOMMU, the cable, and interrupt arming;
//! * `critical` ([`critical`]): a device that is removed, resets itself or disables a queue,
//!   found by the stall check and recovered through `Nic::recover`;
//! * `checksum` ([`checksum`]): what the device marks verified on receive (good and bad IPv4
//!   and UDP checksums, a UDP checksum of zero, a non-IP frame, a fragment) and the UDP
//!   checksum it inserts on transmit (gathered segments, odd lengths, a wrapping ring);
//! * `hostile` ([`hostile`]): issue 14's hostile device — lengths at their limits, all-ones
//!   status, done bits on descriptors never posted, write-backs in the wrong slot, used ids out
//!   of range or repeated, used index jumps and rewinds, bits flipped from a second thread —
//!   with every token back exactly once and no buffer written after it was handed back.
//!
//! NIC-specific tests (register values, queue counts beyond two, a device's own quirks) stay in
//! the drivers; they can reuse this crate's helpers ([`pair`], [`frame`], …).

use std::time::Duration;

use ringfab_emu::{EmuNic, EmuPlatform, EmuWait, Kind, ModelConfig, Wire};
use ringfab_hal::{
    DmaRegion, Iova, MacAddr, Nic, Platform, Queue, Report, RssHashKind, RxBuffer, RxCompletion,
    RxQueue, Token, TxCompletion, TxConfig, TxQueue, TxSegment,
};

pub mod basics;
pub mod checksum;
pub mod critical;
pub mod faults;
pub mod hostile;
pub mod queues;

/// What the suite needs to know about one NIC: its driver, its emulated device, and the device
/// facts the tests check against.
pub trait Fixture: 'static {
    /// The emulated device's kind (`ringfab_emu::Igb82576`, …).
    type Kind: Kind;
    /// The driver under test (on the emulated platform, whose wait handles are `EmuWait`s).
    type Nic: Nic<Wait = EmuWait>;

    /// A new emulated device built from `config`, plugged into nothing.
    fn device(config: ModelConfig) -> EmuNic<Self::Kind>;

    /// The driver brought up over `platform`.
    ///
    /// # Errors
    /// Whatever bring-up returns.
    fn driver(platform: EmuPlatform) -> ringfab_hal::Result<Self::Nic>;

    /// The [`RxError::Frame`](ringfab_hal::RxError::Frame) bits a frame with a bad CRC
    /// completes with (exactly these); `None` if such a frame never reaches the driver (the
    /// tests then check that it is not delivered and takes no buffer).
    const RX_CRC_ERROR: Option<u32>;

    /// The bytes a receive buffer of `buf_len` lets the device write, which a length lie is
    /// reported against: the buffer itself, unless the driver gives the device more (virtio-net
    /// adds an overflow area up to its longest frame, so that a long frame is truncated rather
    /// than dropped).
    fn rx_room(buf_len: u32) -> u32 {
        buf_len
    }
    /// Bits a lying device ORs into a receive write-back
    /// ([`DeviceFault::GarbageStatus`](ringfab_emu::DeviceFault::GarbageStatus)) that no
    /// write-back defines, so that the driver reports `DeviceStatus`.
    const RX_GARBAGE_STATUS: u32;
    /// Bits ORed into a transmit write-back that the driver must report as `DeviceStatus`.
    const TX_GARBAGE_STATUS: u32;
    /// How long the device may hold back an interrupt message after the previous one on the
    /// same vector (zero if it does not throttle).
    const INTERRUPT_THROTTLE: Duration;
    /// Whether the first completion after a queue is opened (or reset) interrupts even when
    /// the queue's interrupt is disarmed.
    const FIRST_COMPLETION_INTERRUPTS: bool;

    /// Speed (Mb/s) and duplex the link reports when up; `None` if the device reports
    /// neither (the tests then only check that the link is up).
    const LINK_SPEED: Option<(u32, bool)>;
    /// How long after the cable is plugged in the link reports up (autonegotiation).
    const LINK_UP_DELAY: Duration;

    /// Whether the device tells the status of every transmitted frame. `false`: it writes
    /// back only frames that asked for it (the Intel RS bit), so a
    /// [`Report::ErrorsOnly`] frame is reclaimed by a later frame's write-back, whose
    /// status is all the driver learns.
    const TX_STATUS_OF_EVERY_FRAME: bool;
    /// Whether receive completions carry the RSS hash ([`RxCompletion::rss`]). Where they do
    /// not, the RSS tests still check that each flow lands on the queue its hash picks.
    const RSS_HASH_REPORTED: bool;
    /// Whether a DMA fault stops the whole device until [`Nic::reset`], rather than only
    /// stalling the queue until its flush.
    const DMA_FAULT_NEEDS_DEVICE_RESET: bool;
}

/// Whether `nic` completes each queue's descriptors in the order they were pushed
/// ([`Capabilities::in_order_completion`](ringfab_hal::Capabilities::in_order_completion)):
/// the tests that check the order of tokens check it only then, and otherwise that every token
/// comes back once.
pub fn in_order<N: Nic>(nic: &N) -> bool {
    nic.capabilities().in_order_completion
}

/// Station address of device A.
pub const MAC_A: MacAddr = MacAddr([0x52, 0x54, 0x00, 0x00, 0x00, 0x0A]);
/// Station address of device B.
pub const MAC_B: MacAddr = MacAddr([0x52, 0x54, 0x00, 0x00, 0x00, 0x0B]);

/// Bytes of one receive or transmit buffer slot in the tests' DMA memory.
pub const BUF: usize = 2048;

/// A transmit completion to fill `poll` arrays with.
pub const NO_TX: TxCompletion = TxCompletion {
    token: Token(u64::MAX),
    status: Ok(()),
};
/// A receive completion to fill `poll` arrays with.
pub const NO_RX: RxCompletion = RxCompletion {
    token: Token(u64::MAX),
    len: 0,
    status: Ok(()),
    rss: None,
    checksum: ringfab_hal::RxChecksum::NONE,
};

/// An emulated device of fixture `F` with MAC `mac`, plugged into `wire`.
pub fn device<F: Fixture>(mac: MacAddr, wire: &Wire) -> EmuNic<F::Kind> {
    let mut config = ModelConfig::default();
    config.mac = mac;
    let dev = F::device(config);
    dev.connect(wire);
    dev
}

/// Copies `bytes` into DMA memory at `offset` (8-byte words; the tail zero-padded).
pub fn write_bytes<D: DmaRegion>(dma: &D, offset: usize, bytes: &[u8]) {
    for (i, chunk) in bytes.chunks(8).enumerate() {
        let mut w = [0u8; 8];
        w[..chunk.len()].copy_from_slice(chunk);
        dma.write_u64(offset + 8 * i, u64::from_le_bytes(w));
    }
}

/// `len` bytes of DMA memory at `offset`.
pub fn read_bytes<D: DmaRegion>(dma: &D, offset: usize, len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 8);
    for i in 0..len.div_ceil(8) {
        out.extend_from_slice(&dma.read_u64(offset + 8 * i).to_le_bytes());
    }
    out.truncate(len);
    out
}

/// An Ethernet frame of the IEEE local experimental EtherType with a patterned payload.
pub fn frame(dst: MacAddr, src: MacAddr, payload_len: usize, seed: u8) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&dst.0);
    f.extend_from_slice(&src.0);
    f.extend_from_slice(&[0x88, 0xB5]); // IEEE local experimental EtherType
    f.extend((0..payload_len).map(|i| (i as u8).wrapping_mul(7).wrapping_add(seed)));
    f
}

/// IPv4 addresses and UDP ports of one flow.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Udp {
    /// Source IPv4 address.
    pub src: [u8; 4],
    /// Destination IPv4 address.
    pub dst: [u8; 4],
    /// Source port.
    pub sport: u16,
    /// Destination port.
    pub dport: u16,
}

impl Udp {
    /// The flow 10.0.0.1:`sport` → 10.0.0.2:`dport`.
    pub const fn ports(sport: u16, dport: u16) -> Udp {
        Udp {
            src: [10, 0, 0, 1],
            dst: [10, 0, 0, 2],
            sport,
            dport,
        }
    }

    /// The flow a received Ethernet/IPv4/UDP frame (no options, no VLAN) belongs to.
    pub fn of(f: &[u8]) -> Udp {
        let be16 = |at: usize| u16::from_be_bytes([f[at], f[at + 1]]);
        Udp {
            src: f[26..30].try_into().unwrap(),
            dst: f[30..34].try_into().unwrap(),
            sport: be16(34),
            dport: be16(36),
        }
    }
}

/// Offset of the UDP payload in a frame from [`udp_frame`].
pub const UDP_PAYLOAD: usize = 14 + 20 + 8;

/// An Ethernet/IPv4/UDP frame of `flow` carrying `payload` (IPv4 header checksum filled in,
/// UDP checksum zero: "not computed").
pub fn udp_frame(dst: MacAddr, src: MacAddr, flow: Udp, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&dst.0);
    f.extend_from_slice(&src.0);
    f.extend_from_slice(&[0x08, 0x00]);
    let udp_len = 8 + payload.len() as u16;
    let total = 20 + udp_len;
    f.extend_from_slice(&[0x45, 0]);
    f.extend_from_slice(&total.to_be_bytes());
    f.extend_from_slice(&[0, 1, 0x40, 0, 64, 17, 0, 0]);
    f.extend_from_slice(&flow.src);
    f.extend_from_slice(&flow.dst);
    f.extend_from_slice(&flow.sport.to_be_bytes());
    f.extend_from_slice(&flow.dport.to_be_bytes());
    f.extend_from_slice(&udp_len.to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(payload);
    // IPv4 header checksum.
    let mut sum = 0u32;
    for w in f[14..34].chunks(2) {
        sum += u32::from(u16::from_be_bytes([w[0], w[1]]));
    }
    while sum > 0xFFFF {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    let csum = !(sum as u16);
    f[24..26].copy_from_slice(&csum.to_be_bytes());
    f
}

/// The RSS hash the device computes for a UDP `flow` under `key`, by the emu's own Toeplitz
/// code, and the hash kind it reports: over addresses and ports if the NIC hashes UDP, else
/// over the addresses only (the 82574 has no UDP hash).
pub fn expected_hash<N: Nic>(
    nic: &N,
    key: &[u8; ringfab_emu::toeplitz::KEY_LEN],
    flow: Udp,
) -> (u32, RssHashKind) {
    use ringfab_emu::toeplitz;
    let hashes = nic.capabilities().rss.expect("RSS").hashes;
    if hashes.ipv4_udp {
        let input = toeplitz::ipv4_ports_input(flow.src, flow.dst, flow.sport, flow.dport);
        (toeplitz::hash(key, &input), RssHashKind::Ipv4Udp)
    } else {
        let input = toeplitz::ipv4_input(flow.src, flow.dst);
        (toeplitz::hash(key, &input), RssHashKind::Ipv4)
    }
}

/// Two devices of fixture `F` on one wire, each brought up by its driver.
pub struct Pair<F: Fixture> {
    /// The wire both are plugged into.
    pub wire: Wire,
    /// Device A (MAC [`MAC_A`]).
    pub a: EmuNic<F::Kind>,
    /// Device B (MAC [`MAC_B`]).
    pub b: EmuNic<F::Kind>,
    /// A's driver.
    pub nic_a: F::Nic,
    /// B's driver.
    pub nic_b: F::Nic,
}

/// Two devices of fixture `F` on one wire, brought up.
pub fn pair<F: Fixture>() -> Pair<F> {
    let wire = Wire::new();
    let (a, b) = (device::<F>(MAC_A, &wire), device::<F>(MAC_B, &wire));
    let (nic_a, nic_b) = (
        F::driver(a.platform()).unwrap(),
        F::driver(b.platform()).unwrap(),
    );
    Pair {
        wire,
        a,
        b,
        nic_a,
        nic_b,
    }
}

/// Sends each frame from A (queue 0) and runs the wire; every token comes back `Ok`.
pub fn send_all<F: Fixture>(p: &Pair<F>, frames: &[Vec<u8>]) {
    let mut tx = p.nic_a.open_tx::<64>(0, TxConfig::default()).unwrap();
    let mem = p.a.platform().alloc_dma(BUF * frames.len()).unwrap();
    for (i, f) in frames.iter().enumerate() {
        write_bytes(&mem, i * BUF, f);
        let seg = TxSegment {
            iova: Iova(mem.iova().0 + (i * BUF) as u64),
            len: f.len() as u16,
        };
        tx.push(&[seg], Token(i as u64), Report::Always).unwrap();
    }
    tx.doorbell();
    p.wire.run_until_idle();
    let mut out = [NO_TX; 64];
    assert_eq!(tx.poll(&mut out), frames.len());
    assert!(out[..frames.len()].iter().all(|c| c.status == Ok(())));
}

/// The receive buffer of slot `slot` in `mem` (slots of [`BUF`] bytes).
pub fn rx_buf<D: DmaRegion>(mem: &D, slot: usize) -> RxBuffer {
    RxBuffer {
        iova: Iova(mem.iova().0 + (slot * BUF) as u64),
        len: BUF as u32,
    }
}

/// Posts `count` buffers of [`BUF`] bytes on `rx`, tokens 0.., token t in slot t of `mem`.
pub fn post<D: DmaRegion, Q: RxQueue>(rx: &mut Q, mem: &D, count: usize) {
    for t in 0..count {
        rx.push(rx_buf(mem, t), Token(t as u64)).unwrap();
    }
    rx.doorbell();
}

/// Every completion `tx` has now, in the order `poll` gives them.
pub fn drain_tx<Q: TxQueue>(tx: &mut Q) -> Vec<TxCompletion> {
    let mut all = Vec::new();
    let mut out = [NO_TX; 8];
    loop {
        let n = tx.poll(&mut out);
        if n == 0 {
            return all;
        }
        all.extend_from_slice(&out[..n]);
    }
}

/// Every completion `rx` has now, in the order `poll` gives them, each with the bytes its
/// buffer holds (token t's buffer is slot t of `mem`, as [`post`] lays them out).
pub fn drain_rx<Q: RxQueue, D: DmaRegion>(rx: &mut Q, mem: &D) -> Vec<(RxCompletion, Vec<u8>)> {
    let mut all = Vec::new();
    let mut out = [NO_RX; 8];
    loop {
        let n = rx.poll(&mut out);
        if n == 0 {
            return all;
        }
        for c in &out[..n] {
            let bytes = read_bytes(mem, c.token.0 as usize * BUF, c.len as usize);
            all.push((*c, bytes));
        }
    }
}

/// Writes `f` into slot `slot` of `mem` and pushes it on `tx` as one segment.
pub fn push_frame<Q: TxQueue, D: DmaRegion>(
    tx: &mut Q,
    mem: &D,
    slot: usize,
    f: &[u8],
    token: u64,
    report: Report,
) {
    write_bytes(mem, slot * BUF, f);
    let seg = TxSegment {
        iova: Iova(mem.iova().0 + (slot * BUF) as u64),
        len: f.len() as u16,
    };
    tx.push(&[seg], Token(token), report).unwrap();
}

/// `items` in the order of their `key` (a token or a sequence number). Where `nic` completes in
/// order they must already be in that order (checked); where it completes by id they may come
/// in any order, and are sorted.
pub fn in_key_order<N: Nic, T>(nic: &N, mut items: Vec<T>, key: impl Fn(&T) -> u64) -> Vec<T> {
    if in_order(nic) {
        assert!(
            items.windows(2).all(|w| key(&w[0]) < key(&w[1])),
            "an in-order NIC completed out of order"
        );
    } else {
        items.sort_by_key(|i| key(i));
    }
    items
}

/// Receive buffers of [`BUF`] bytes in the slots of one DMA region, handed out as slots come
/// back, so that buffers may complete in any order. Each buffer's token names its slot and a
/// sequence number counting the buffers posted: `seq << 16 | slot`.
pub struct RxSlots<D: DmaRegion> {
    mem: D,
    free: Vec<usize>,
    next: u64,
}

impl<D: DmaRegion> RxSlots<D> {
    /// `slots` buffers in `mem` (at least `slots * BUF` bytes), all free.
    pub fn new(mem: D, slots: usize) -> Self {
        assert!(slots <= 1 << 16 && mem.len() >= slots * BUF);
        RxSlots {
            mem,
            free: (0..slots).rev().collect(),
            next: 0,
        }
    }

    /// The DMA region the buffers are in.
    pub fn mem(&self) -> &D {
        &self.mem
    }

    /// Pushes free buffers on `rx` while it has room, then rings; returns how many.
    pub fn refill<Q: RxQueue>(&mut self, rx: &mut Q) -> usize {
        let mut n = 0;
        while rx.free() > 0 {
            let Some(slot) = self.free.pop() else { break };
            rx.push(
                rx_buf(&self.mem, slot),
                Token(self.next << 16 | slot as u64),
            )
            .unwrap();
            self.next += 1;
            n += 1;
        }
        rx.doorbell();
        n
    }

    /// The sequence number of the buffer `token` names.
    pub fn seq(token: Token) -> u64 {
        token.0 >> 16
    }

    /// Offset in [`mem`](Self::mem) of the buffer `token` names.
    pub fn offset(token: Token) -> usize {
        (token.0 & 0xFFFF) as usize * BUF
    }

    /// The bytes `c` says its buffer holds; the buffer's slot is free again.
    pub fn take(&mut self, c: &RxCompletion) -> Vec<u8> {
        let bytes = read_bytes(&self.mem, Self::offset(c.token), c.len as usize);
        self.release(c.token);
        bytes
    }

    /// Frees the slot of the buffer `token` names.
    pub fn release(&mut self, token: Token) {
        let slot = (token.0 & 0xFFFF) as usize;
        assert!(!self.free.contains(&slot), "{token:?} came back twice");
        self.free.push(slot);
    }
}

/// One `#[test]` per suite test of the named sections (all of them if none are named), each
/// running the generic test of the same name with the fixture type. See the crate docs.
#[macro_export]
macro_rules! suite {
    ($fixture:ty) => {
        $crate::suite!(
            $fixture: basics, checksum, queues, rss, wire, device, iommu, link, interrupts,
            critical, hostile
        );
    };
    ($fixture:ty: $($section:ident),+ $(,)?) => {
        $( $crate::__suite_section!($section, $fixture); )+
    };
}

/// The tests of one section (for [`suite!`]).
#[doc(hidden)]
#[macro_export]
macro_rules! __suite_section {
    (basics, $f:ty) => {
        $crate::__suite_tests!($f, basics:
            bring_up_reads_the_mac_and_brings_the_link_up,
            bring_up_without_a_cable_succeeds_with_the_link_down,
            frames_cross_the_wire_with_their_contents_and_every_token_comes_back,
            receive_interrupt_notifies_when_armed,
            flush_gives_back_unfilled_buffers_and_unsent_frames,
            a_lying_receive_length_and_garbage_status_become_error_completions,
            a_bad_crc_is_a_frame_error_with_a_named_bit,
            a_garbage_transmit_status_is_a_device_status_error_for_that_token,
        );
    };
    (checksum, $f:ty) => {
        $crate::__suite_tests!($f, checksum:
            receive_marks_only_the_checksums_the_device_checked_and_found_right,
            transmit_with_the_checksum_offload_puts_the_right_udp_checksum_on_the_wire,
            a_checksum_field_outside_the_frame_is_refused_and_nothing_is_queued,
        );
    };
    (queues, $f:ty) => {
        $crate::__suite_tests!($f, queues:
            one_queue_pair_carries_every_frame_once_and_intact,
            one_queue_pair_carries_frames_both_ways_at_once,
            a_million_frames_wrap_64_descriptor_rings_with_every_token_back_once_and_in_order,
        );
    };
    (rss, $f:ty) => {
        $crate::__suite_tests!($f, queues:
            rss_spreads_flows_over_receive_queues_and_reports_the_hash,
            two_queue_pairs_carry_every_frame_once_with_rss_keeping_each_flow_on_its_queue,
            two_queue_pairs_carry_frames_both_ways_at_once,
        );
        $crate::__suite_tests!($f, faults:
            an_oversize_length_on_one_queue_is_a_length_error_there_and_spares_the_others,
        );
    };
    (wire, $f:ty) => {
        $crate::__suite_tests!($f, faults:
            a_dropped_frame_never_arrives_and_its_buffer_comes_back_flushed,
            silent_corruption_delivers_the_frame_with_its_byte_flipped_and_no_error,
            a_bad_crc_is_a_frame_error_carrying_exactly_the_crc_bit,
            a_duplicated_frame_fills_two_buffers_and_each_token_comes_back_once,
            reordered_frames_arrive_swapped_and_a_lone_held_frame_waits_for_release_held,
            random_drops_and_bad_crcs_follow_the_seed_and_every_frame_is_accounted_for,
            random_duplicates_follow_the_seed_and_every_copy_fills_its_own_buffer,
            random_drops_corruption_and_duplicates_together_account_for_every_frame,
        );
    };
    (device, $f:ty) => {
        $crate::__suite_tests!($f, faults:
            a_withheld_transmit_writeback_keeps_the_token_until_flush_returns_it_once,
            a_withheld_transmit_writeback_returns_nothing_before_flush,
            a_withheld_receive_writeback_leaves_the_buffer_pending_until_flush,
            a_lost_transmit_writeback_before_a_later_one_holds_completions_until_flush_calls_both_sent,
            a_lost_receive_writeback_before_a_later_one_delivers_the_later_frame_at_flush,
            a_delayed_transmit_writeback_is_made_when_the_queue_stops_so_flush_reports_it_sent,
            a_delayed_transmit_writeback_completes_only_after_the_steps,
            a_delayed_receive_writeback_completes_and_interrupts_only_after_the_steps,
        );
    };
    (iommu, $f:ty) => {
        $crate::__suite_tests!($f, faults:
            a_transmit_from_an_unmapped_iova_faults_stalls_the_ring_and_flush_recovers_it,
            a_receive_buffer_whose_mapping_was_revoked_faults_as_a_write_and_flush_recovers,
        );
    };
    (link, $f:ty) => {
        $crate::__suite_tests!($f, faults:
            frames_sent_while_the_receiver_link_is_down_are_lost_quietly_and_flow_after_link_up,
            frames_sent_while_the_sender_link_is_down_complete_but_never_reach_the_wire,
        );
    };
    (critical, $f:ty) => {
        $crate::__suite_tests!($f, critical:
            a_device_reset_is_found_by_the_stall_check_and_recover_brings_the_queue_back,
            recover_after_a_reset_programs_rss_again,
            check_finds_a_device_reset_on_an_idle_transmit_queue,
            a_removed_device_is_found_and_recover_says_it_is_gone,
            a_queue_disabled_by_the_device_is_found_and_reopening_it_recovers,
            a_healthy_idle_queue_is_never_reported_faulted,
            a_reset_after_a_long_idle_is_found_within_the_longest_period,
            a_receive_stop_the_device_does_not_acknowledge_holds_the_buffers_until_one_it_does,
            a_transmit_stop_the_device_does_not_acknowledge_holds_the_frames_until_one_it_does,
            a_restart_the_device_does_not_acknowledge_is_a_fault_not_a_silent_stall,
        );
    };
    (hostile, $f:ty) => {
        $crate::__suite_tests!($f, hostile:
            hostile_lengths_and_all_ones_status_never_panic_and_every_token_comes_back_once,
            hostile_done_bits_never_posted_and_used_ids_out_of_range_never_complete_a_token,
            hostile_write_backs_in_the_wrong_slot_and_lying_ids_never_return_a_token_twice,
            hostile_every_lie_at_once_returns_every_token_exactly_once,
            hostile_bits_flipped_from_a_second_thread_never_panic_nor_lose_a_token,
            hostile_a_station_address_no_station_may_have_stops_bring_up_by_name,
        );
    };
    (interrupts, $f:ty) => {
        $crate::__suite_tests!($f, faults:
            the_transmit_completion_interrupt_fires_when_armed_and_not_when_disarmed,
        );
    };
}

/// `#[test] fn name() { module::name::<Fixture>() }` for each name (for [`suite!`]).
#[doc(hidden)]
#[macro_export]
macro_rules! __suite_tests {
    ($f:ty, $module:ident: $($name:ident),+ $(,)?) => {
        $(
            #[test]
            fn $name() {
                $crate::$module::$name::<$f>();
            }
        )+
    };
}
