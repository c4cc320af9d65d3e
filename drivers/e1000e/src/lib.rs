//! ringfab driver for the Intel 82574 Gigabit Ethernet controller, as QEMU's `e1000e` device and
//! the silicon present it: two transmit and two receive queues, RSS over the two receive queues,
//! five MSI-X vectors, extended receive descriptors, legacy transmit descriptors.
//!
//! [`E1000e::new`] brings the device up over any [`Platform`]; [`E1000e`] then implements
//! [`Nic`] (control path, `&self`, state behind a `spin::Mutex`), and its queues [`E1000eTx`]
//! and [`E1000eRx`] implement [`TxQueue`] and [`RxQueue`] (data path, no lock, no register
//! read, one tail write per batch).
//!
//! What the driver guarantees on top of the `ringfab-hal` contract — the same as `ringfab-igb`:
//! * no `unsafe` here (`#![deny(unsafe_code)]`): registers go through [`Mmio`], descriptors
//!   through [`DmaRing`]'s volatile accessors (its size checked once, when the queue opens);
//! * every token pushed comes back once from `poll` — including after [`TxQueue::flush`] /
//!   [`RxQueue::flush`] — and a device that writes nonsense produces error completions, never a
//!   panic or an access outside the ring (see `ringfab-ring`, whose rings both Intel drivers
//!   share);
//! * a queue stops its hardware queue (bounded wait) before its ring memory is freed.
//!
//! Where the 82574 differs from the 82576, and what the driver does about it:
//! * **no per-queue enable.** A transmit queue is stopped and started with its TARC.ENABLE bit
//!   (QEMU sends only from an enabled queue); the receive side has only RCTL.EN, shared by both
//!   queues, so opening, flushing or closing a receive queue stops the whole receiver for the
//!   few register writes it takes (frames arriving meanwhile are dropped, as by any stopped
//!   receiver);
//! * **one receive buffer size** (RCTL) for both queues: the second receive queue gets the size
//!   the first one set, or larger requests are refused;
//! * **RSS** hashes IPv4 and TCP/IPv4 only (no UDP hash), over a 128-entry table whose entries
//!   name the queue in bit 7;
//! * **interrupts per cause**, not per vector: each queue has its own ICR/IMS bit, so arming
//!   one queue never disarms another even when both share a vector.
//!
//! Interrupts: a queue opened with a [`vector`](TxConfig::vector) is steered there through its
//! 4-bit IVAR entry; without one, queue pair `i` (RX `i` and TX `i`) uses MSI-X vector
//! `i % vectors`, where `vectors` is the platform's count capped at the 82574's five
//! ([`Nic::irq_vectors`]). A vector at or above that count is refused with
//! [`Error::InterruptUnavailable`].
//!
//! Transmit report policy ("RS") is `ringfab-igb`'s: a frame's last descriptor asks for a
//! write-back if its [`Report`] is `Always`, if a quarter of the ring has gone by without one,
//! if the push fills the ring, or if it is the last frame of a doorbell batch.
//!
//! Critical faults (`ringfab-hal`'s "Critical faults"): after
//! [`ringfab_hal::queue::STALL_POLLS`] empty polls with work pending, a queue
//! reads STATUS, its ring length and its enable bit (TARC.ENABLE for a transmit queue,
//! RCTL.EN for a receive queue, read under the state lock so that another queue's brief
//! receiver pause is not mistaken for one): STATUS all-ones is a device that is gone
//! ([`QueueFault::Removed`]), a ring length back at its power-on 0 a device that was reset
//! ([`QueueFault::Reset`]), a clear enable bit a queue the device disabled
//! ([`QueueFault::Disabled`]). [`Nic::recover`] brings the device up again if the reset
//! cleared its set-up (TCTL.EN reads 0).
#![no_std]
#![deny(unsafe_code)]

pub mod desc;
mod regs;
mod ring;

use core::ptr::NonNull;
use core::sync::atomic::{fence, Ordering};
use core::time::Duration;

use ringfab_hal::queue::StallCount;
use ringfab_hal::{
    Capabilities, DmaRegion, DmaRing, Error, Link, MacAddr, Mmio, Nic, Offloads, Platform,
    PushError, QueueFault, Report, Result, RssCaps, RssConfig, RssHashes, RssSaved, RxBuffer,
    RxCompletion, RxConfig, RxMode, RxQueue, Stats, Token, TxCompletion, TxConfig, TxQueue,
    TxSegment,
};
use spin::{Mutex, MutexGuard};
use tock_registers::fields::FieldValue;
use tock_registers::RegisterLongName;

use crate::desc::DESC_LEN;
use crate::regs as r;
use crate::ring::{RxRing, TxRing};

/// Smallest ring: TDLEN/RDLEN must be a multiple of 128 bytes (8 descriptors).
pub const MIN_DEPTH: usize = 8;
/// Largest ring this driver opens (the shadow lives inline in the queue value).
pub const MAX_DEPTH: usize = 4096;
/// Most descriptors per transmitted frame: the largest frame always fits the smallest ring.
pub const MAX_TX_SEGMENTS: usize = 4;
/// Longest frame, Ethernet header included, FCS excluded: the 82574's 9018-byte jumbo frames
/// (FCS included, datasheet §1.x) − 4.
pub const MAX_FRAME_LEN: usize = 9014;
/// Receive buffer granularity: RCTL.FLXBUF counts KiB.
pub const RX_BUF_UNIT: u32 = 1024;
/// Largest receive buffer: 16 KiB (RCTL.BSEX with BSIZE 01b); 1–15 KiB use RCTL.FLXBUF.
pub const MAX_RX_BUF_LEN: u32 = 16 * RX_BUF_UNIT;

/// Software reset: the datasheet asks for at least 1 ms before touching the device again.
const RESET_DELAY: Duration = Duration::from_millis(10);
/// Polls of CTRL.RST after [`RESET_DELAY`].
const RESET_POLLS: u32 = 100;
/// Link wait after restarting autonegotiation: up to 3 s in 10 ms steps (QEMU needs 500 ms).
const LINK_STEP: Duration = Duration::from_millis(10);
/// Steps of [`LINK_STEP`].
const LINK_POLLS: u32 = 300;
/// Queue stop/start acknowledgement: up to 10 ms in 10 µs steps.
const QUEUE_STEP: Duration = Duration::from_micros(10);
/// Steps of [`QUEUE_STEP`].
const QUEUE_POLLS: u32 = 1000;
/// MDIC completion: up to ~6 ms in 50 µs steps.
const MDIC_STEP: Duration = Duration::from_micros(50);
/// Steps of [`MDIC_STEP`].
const MDIC_POLLS: u32 = 128;

/// Control-path state, behind the NIC's lock.
struct State {
    /// Bit i: transmit queue i is open.
    tx_open: u8,
    /// Bit i: receive queue i is open.
    rx_open: u8,
    /// The receive buffer size programmed in RCTL while any receive queue is open (else 0).
    rx_buf_len: u32,
    /// The receive filter mode.
    mode: RxMode,
    /// The set-up [`Nic::set_rss`] last programmed, for [`Nic::recover`] to program again.
    rss_saved: Option<RssSaved>,
    /// Station address read at bring-up.
    mac: MacAddr,
    /// Accumulated statistics.
    stats: Stats,
}

/// An 82574 brought up over platform `P`.
pub struct E1000e<P: Platform> {
    platform: P,
    regs: P::Mmio,
    /// MSI-X vectors the driver uses (0: no interrupts).
    vectors: u16,
    state: Mutex<State>,
}

impl<P: Platform> core::fmt::Debug for E1000e<P> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("E1000e")
            .field("vectors", &self.vectors)
            .finish_non_exhaustive()
    }
}

impl<P: Platform> E1000e<P> {
    /// Brings the device up: checks the PCI id, enables memory space and bus mastering, maps
    /// BAR0, masks interrupts, resets the MAC, resets the PHY and restarts autonegotiation,
    /// waits (bounded) for the link, reads the MAC from RAL0/RAH0, and programs extended
    /// receive descriptors, the transmitter and MSI-X causes. The receiver is enabled when the
    /// first receive queue opens. A link that is not up after ~3 s is not an error:
    /// [`Nic::link`] reports it.
    ///
    /// # Errors
    /// [`Error::UnsupportedDevice`] for another PCI id; [`Error::BarUnavailable`] from the
    /// platform; [`Error::ResetTimeout`] if CTRL.RST does not clear; [`Error::PhyAccess`] if an
    /// MDIO access fails.
    pub fn new(platform: P) -> Result<Self> {
        let id = r::reg::<r::PCI_ID::Register>(platform.config_read32(r::PCI_ID));
        let (vendor, device) = (
            id.read(r::PCI_ID::VENDOR) as u16,
            id.read(r::PCI_ID::DEVICE) as u16,
        );
        if vendor != r::VENDOR_INTEL || !r::DEVICE_IDS.contains(&device) {
            return Err(Error::UnsupportedDevice { vendor, device });
        }
        let cmd = platform.config_read32(r::PCI_COMMAND);
        platform.config_write32(
            r::PCI_COMMAND,
            (r::PCI_COMMAND::STATUS::CLEAR
                + r::PCI_COMMAND::MEMORY::SET
                + r::PCI_COMMAND::BUS_MASTER::SET)
                .modify(cmd),
        );
        let regs = platform.bar(0)?;
        let vectors = platform.irq_vectors().min(r::MSIX_VECTORS);
        let nic = E1000e {
            platform,
            regs,
            vectors,
            state: Mutex::new(State {
                tx_open: 0,
                rx_open: 0,
                rx_buf_len: 0,
                mode: RxMode::default(),
                rss_saved: None,
                mac: MacAddr::default(),
                stats: Stats::default(),
            }),
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

    #[inline]
    fn rd(&self, reg: usize) -> u32 {
        self.regs.read32(reg)
    }

    #[inline]
    fn wr(&self, reg: usize, value: u32) {
        self.regs.write32(reg, value)
    }

    /// Read-modify-write: sets the fields of `value` in register `reg`, keeping the others.
    fn modify<R: RegisterLongName>(&self, reg: usize, value: FieldValue<u32, R>) {
        self.wr(reg, value.modify(self.rd(reg)));
    }

    fn mask_interrupts(&self) {
        self.wr(r::IMC, u32::MAX);
        let _ = self.rd(r::ICR);
    }

    /// Reset and programme everything but the queues (all closed when this runs).
    fn bring_up(&self, st: &mut State) -> Result {
        self.mask_interrupts();
        self.modify(r::CTRL, r::CTRL::RST::SET);
        self.platform.delay(RESET_DELAY);
        let mut polls = 0;
        while r::CTRL::RST.is_set(self.rd(r::CTRL)) {
            polls += 1;
            if polls > RESET_POLLS {
                return Err(Error::ResetTimeout);
            }
            self.platform.delay(Duration::from_millis(1));
        }
        self.mask_interrupts();
        // Both transmit queues come out of reset enabled in TARC (QEMU e1000e_mac_reg_init);
        // nothing is sent until a queue is opened.
        for q in 0..r::QUEUES {
            self.modify(r::tarc(q), r::TARC::ENABLE::CLEAR);
        }

        // PHY: reset, then autonegotiation enabled and restarted. QEMU ignores the reset bit and
        // restarts the (500 ms) autonegotiation only on a write with AUTOEN and ANRESTART; its
        // reset leaves STATUS.LU set, so the wait below starts after the restart cleared it.
        self.phy_write(r::PHY_BMCR, r::BMCR::RESET::SET + r::BMCR::AUTOEN::SET)?;
        let mut polls = 0;
        while r::BMCR::RESET.is_set(self.phy_read(r::PHY_BMCR)?) {
            polls += 1;
            if polls > MDIC_POLLS {
                return Err(Error::PhyAccess { reg: r::PHY_BMCR });
            }
            self.platform.delay(Duration::from_millis(1));
        }
        self.phy_write(
            r::PHY_BMCR,
            r::BMCR::AUTOEN::SET
                + r::BMCR::ANRESTART::SET
                + r::BMCR::FD::SET
                + r::BMCR::SPEED1000::SET,
        )?;
        self.modify(r::CTRL, r::CTRL::SLU::SET);
        for _ in 0..LINK_POLLS {
            if r::STATUS::LU.is_set(self.rd(r::STATUS)) {
                break;
            }
            self.platform.delay(LINK_STEP);
        }

        let ral = self.rd(r::RAL0).to_le_bytes();
        let rah = (r::RAH::ADDR.read(self.rd(r::RAH0)) as u16).to_le_bytes();
        st.mac = MacAddr([ral[0], ral[1], ral[2], ral[3], rah[0], rah[1]]);

        // MSI-X causes: each queue cause auto-clears after its message (EIAC) and stays
        // unmasked (IAME; IAM empty), so an armed queue keeps interrupting until disarmed.
        // EITR stays at its reset value (QEMU clamps it to at least 500 × 256 ns anyway).
        self.modify(
            r::CTRL_EXT,
            r::CTRL_EXT::IAME::SET + r::CTRL_EXT::PBA_CLR::SET,
        );
        self.wr(r::IAM, 0);
        let queue_causes = r::ICR::RXQ0::SET + r::ICR::RXQ1::SET + r::ICR::TXQ0::SET;
        self.wr(r::EIAC, (queue_causes + r::ICR::TXQ1::SET).value);
        self.wr(r::IVAR, 0);

        // Receive: extended descriptors, RSS off until set_rss, the write-back carrying the
        // RSS hash (PCSD), no checksum offload (on at reset); receiver off until a queue opens.
        st.rx_open = 0;
        st.tx_open = 0;
        st.rx_buf_len = 0;
        self.wr(r::RFCTL, r::RFCTL::EXSTEN::SET.value);
        self.wr(r::RXCSUM, r::RXCSUM::PCSD::SET.value);
        self.wr(r::MRQC, 0);
        self.wr(r::RCTL, rctl_for(st, false));
        let tctl =
            r::TCTL::EN::SET + r::TCTL::PSP::SET + r::TCTL::CT::Default + r::TCTL::COLD::FullDuplex;
        self.wr(r::TCTL, tctl.value);
        Ok(())
    }

    fn mdic(&self, reg: u8, command: FieldValue<u32, r::MDIC::Register>) -> Result<u16> {
        let address = r::MDIC::REGADD.val(u32::from(reg)) + r::MDIC::PHYADD.val(r::PHY_ADDR);
        self.wr(r::MDIC, (command + address).value);
        for _ in 0..MDIC_POLLS {
            let v = r::reg::<r::MDIC::Register>(self.rd(r::MDIC));
            if v.is_set(r::MDIC::ERROR) {
                break;
            }
            if v.is_set(r::MDIC::READY) {
                return Ok(v.read(r::MDIC::DATA) as u16);
            }
            self.platform.delay(MDIC_STEP);
        }
        Err(Error::PhyAccess { reg })
    }

    fn phy_read(&self, reg: u8) -> Result<u16> {
        self.mdic(reg, r::MDIC::OP::Read)
    }

    fn phy_write<R: RegisterLongName>(&self, reg: u8, value: FieldValue<u16, R>) -> Result {
        let data = r::MDIC::DATA.val(u32::from(value.value));
        self.mdic(reg, r::MDIC::OP::Write + data).map(|_| ())
    }

    /// Writes `value` to `reg` and waits until `bit` of `reg` reads back as in `value`.
    fn write_and_wait(&self, reg: usize, value: u32, bit: u32, index: u16) -> Result {
        self.wr(reg, value);
        for _ in 0..QUEUE_POLLS {
            if self.rd(reg) & bit == value & bit {
                return Ok(());
            }
            self.platform.delay(QUEUE_STEP);
        }
        Err(Error::QueueTimeout { index })
    }

    /// Sets or clears transmit queue `q`'s TARC.ENABLE and waits for it to read back.
    fn set_tx_enable(&self, q: u16, on: bool) -> Result {
        let reg = r::tarc(q);
        let value = r::TARC::ENABLE.val(on.into()).modify(self.rd(reg));
        self.write_and_wait(reg, value, r::TARC::ENABLE::SET.value, q)
    }

    /// Stops the receiver (both queues) and waits for RCTL.EN to read back clear. The caller
    /// holds the state lock and restarts it with [`rx_resume`](Self::rx_resume).
    fn rx_pause(&self, st: &State, q: u16) -> Result {
        self.write_and_wait(r::RCTL, rctl_for(st, false), r::RCTL::EN::SET.value, q)
    }

    /// Restarts the receiver if any receive queue is open.
    fn rx_resume(&self, st: &State) {
        self.wr(r::RCTL, rctl_for(st, st.rx_open != 0));
    }

    /// Whether the device still holds queue `index` (`tx`) over a ring of `len` bytes, or the
    /// critical fault that took it.
    fn queue_fault(&self, index: u16, tx: bool, len: u32) -> Option<QueueFault> {
        // The state lock: a receive queue's open, flush or close pauses the shared receiver
        // under it, and that pause is not a fault.
        let st = self.state.lock();
        // STATUS (§10.2.2.2) has reserved bits that read 0: all-ones is no device answering
        // (a PCIe read of a removed function completes as Unsupported Request, all-ones data).
        if self.rd(r::STATUS) == u32::MAX {
            return Some(QueueFault::Removed);
        }
        // RDLEN/TDLEN (§10.2.5.x, §10.2.6.x) read 0 after any reset; no open queue has 0 bytes.
        let len_reg = if tx { r::tdlen(index) } else { r::rdlen(index) };
        if self.rd(len_reg) != len {
            return Some(QueueFault::Reset);
        }
        // TARC.ENABLE for a transmit queue; for a receive queue RCTL.EN, which the driver keeps
        // set while any receive queue is open.
        let enabled = if tx {
            r::TARC::ENABLE.is_set(self.rd(r::tarc(index)))
        } else {
            st.rx_open == 0 || r::RCTL::EN.is_set(self.rd(r::RCTL))
        };
        (!enabled).then_some(QueueFault::Disabled)
    }

    fn check_depth<const N: usize>() -> Result {
        if !N.is_power_of_two() || !(MIN_DEPTH..=MAX_DEPTH).contains(&N) {
            return Err(Error::QueueDepth {
                depth: N,
                min: MIN_DEPTH,
                max: MAX_DEPTH,
            });
        }
        Ok(())
    }

    /// Claims queue `index` of one direction or says why not.
    fn claim(&self, index: u16, tx: bool) -> Result {
        if index >= r::QUEUES {
            return Err(Error::QueueIndex {
                index,
                count: r::QUEUES,
            });
        }
        let mut st = self.state.lock();
        let open = if tx { &mut st.tx_open } else { &mut st.rx_open };
        if *open & (1 << index) != 0 {
            return Err(Error::QueueInUse { index });
        }
        *open |= 1 << index;
        Ok(())
    }

    fn release(&self, st: &mut State, index: u16, tx: bool) {
        let open = if tx { &mut st.tx_open } else { &mut st.rx_open };
        *open &= !(1 << index);
        if st.rx_open == 0 {
            st.rx_buf_len = 0;
        }
    }

    /// Steers queue `index` to `vector` (or, for `None`, to its pair's default vector
    /// `index % vectors`) through its IVAR entry and returns the vector and its wait handle.
    fn wire_interrupt(&self, index: u16, tx: bool, vector: Option<u16>) -> Result<(u16, P::Wait)> {
        let vector = match vector {
            Some(v) if v < self.vectors => v,
            Some(v) => return Err(Error::InterruptUnavailable { vector: v }),
            None if self.vectors == 0 => return Err(Error::InterruptUnavailable { vector: index }),
            None => index % self.vectors,
        };
        let wait = self.platform.irq(vector)?;
        let _st = self.state.lock();
        let shift = r::ivar_shift(index, tx);
        self.wr(
            r::IVAR,
            self.rd(r::IVAR) & !(0xF << shift) | r::ivar_entry(index, tx, vector),
        );
        Ok((vector, wait))
    }

    fn unwire_interrupt(&self, index: u16, tx: bool) {
        let _st = self.state.lock();
        self.wr(
            r::IVAR,
            self.rd(r::IVAR) & !(0xF << r::ivar_shift(index, tx)),
        );
    }

    /// Claims queue `index` and gets its ring memory and (if asked: `Some(vector choice)`) its
    /// interrupt vector; on failure the index is free again and no register was touched.
    fn open_queue<const N: usize>(
        &self,
        index: u16,
        tx: bool,
        interrupt: Option<Option<u16>>,
    ) -> Result<(QueueCore<'_, P>, DmaRing<P::Dma, N>)> {
        self.claim(index, tx)?;
        match self.queue_resources::<N>(index, tx, interrupt) {
            Ok((dma, irq)) => Ok((QueueCore::new(self, index, tx, irq, N * DESC_LEN), dma)),
            Err(e) => {
                let mut st = self.state.lock();
                self.release(&mut st, index, tx);
                Err(e)
            }
        }
    }

    /// Ring memory and (if asked) the interrupt vector for queue `index`.
    #[allow(clippy::type_complexity, reason = "a private pair, named once")]
    fn queue_resources<const N: usize>(
        &self,
        index: u16,
        tx: bool,
        interrupt: Option<Option<u16>>,
    ) -> Result<(DmaRing<P::Dma, N>, Option<(u16, P::Wait)>)> {
        let len = N * DESC_LEN;
        let dma = self.platform.alloc_dma(len)?;
        // The rings' base must be 16-byte aligned (§10.2.5.x RDBAL); TDLEN/RDLEN count 128-byte
        // units, so the driver keeps 128-byte alignment as on the 82576.
        if dma.iova().0 & 127 != 0 {
            return Err(Error::DmaAlloc { len });
        }
        let dma = DmaRing::new(dma).map_err(|_| Error::DmaAlloc { len })?;
        let irq = match interrupt {
            Some(vector) => Some(self.wire_interrupt(index, tx, vector)?),
            None => None,
        };
        Ok((dma, irq))
    }

    /// Settles the receive buffer size for a new receive queue asking for `len` bytes: the
    /// size already programmed if one is and it is large enough, else `len` rounded up to
    /// [`RX_BUF_UNIT`].
    fn rx_buf_size(st: &State, len: u32) -> Result<u32> {
        let rounded = len.div_ceil(RX_BUF_UNIT) * RX_BUF_UNIT;
        if len == 0 || rounded > MAX_RX_BUF_LEN {
            return Err(Error::BufferSize {
                len,
                max: MAX_RX_BUF_LEN,
            });
        }
        match st.rx_buf_len {
            0 => Ok(rounded),
            programmed if rounded <= programmed => Ok(programmed),
            programmed => Err(Error::BufferSize {
                len,
                max: programmed,
            }),
        }
    }
}

/// RCTL for the current state: receiver on or off, CRC stripped, long packets, the mode's
/// filters, the buffer size.
fn rctl_for(st: &State, enable: bool) -> u32 {
    let kib = st.rx_buf_len / RX_BUF_UNIT;
    let size = if kib == 0 {
        // No queue open: BSIZE 00b (2048), as at reset.
        r::RCTL::FLXBUF.val(0)
    } else if kib <= 15 {
        r::RCTL::FLXBUF.val(kib)
    } else {
        r::RCTL::BSEX::SET + r::RCTL::BSIZE::Bytes16384
    };
    let v = r::RCTL::EN.val(enable.into())
        + r::RCTL::SECRC::SET
        + r::RCTL::LPE::SET
        + r::RCTL::UPE.val(st.mode.promiscuous.into())
        + r::RCTL::MPE.val(st.mode.all_multicast.into())
        + r::RCTL::BAM.val(st.mode.broadcast.into())
        + size;
    v.value
}

/// Names of the 82574 receive error bits (extended write-back, §7.1.4.2).
const RX_ERROR_NAMES: [(u32, &str); 7] = [
    (24, "CRC error"),
    (25, "symbol error"),
    (26, "sequence error"),
    (28, "carrier extension error"),
    (29, "TCP/UDP checksum error"),
    (30, "IPv4 checksum error"),
    (31, "receive data error"),
];

impl<P: Platform> Nic for E1000e<P> {
    type Wait = P::Wait;
    type Dma = P::Dma;
    type Mapping = P::Mapping;
    type Tx<'a, const N: usize>
        = E1000eTx<'a, P, N>
    where
        Self: 'a;
    type Rx<'a, const N: usize>
        = E1000eRx<'a, P, N>
    where
        Self: 'a;

    fn capabilities(&self) -> Capabilities {
        let mut hashes = RssHashes::default();
        hashes.ipv4 = true;
        hashes.ipv4_tcp = true;
        let mut rss = RssCaps::default();
        rss.table_len = r::RETA_ENTRIES;
        rss.key_len = r::RSS_KEY_LEN;
        rss.hashes = hashes;
        let mut caps = Capabilities::default();
        caps.tx_queues = r::QUEUES;
        caps.rx_queues = r::QUEUES;
        caps.min_depth = MIN_DEPTH;
        caps.max_depth = MAX_DEPTH;
        caps.max_tx_segments = MAX_TX_SEGMENTS;
        caps.max_frame_len = MAX_FRAME_LEN;
        caps.max_rx_buf_len = MAX_RX_BUF_LEN;
        caps.mac = self.state.lock().mac;
        caps.offloads = Offloads::default();
        caps.rss = Some(rss);
        caps.in_order_completion = true;
        caps
    }

    fn link(&self) -> Link {
        let status = r::reg::<r::STATUS::Register>(self.rd(r::STATUS));
        if !status.is_set(r::STATUS::LU) {
            return Link::default();
        }
        let speed_mbps = match status.read_as_enum(r::STATUS::SPEED) {
            Some(r::STATUS::SPEED::Value::Mbps10) => 10,
            Some(r::STATUS::SPEED::Value::Mbps100) => 100,
            Some(r::STATUS::SPEED::Value::Mbps1000) | None => 1000,
        };
        Link {
            up: true,
            speed_mbps,
            full_duplex: status.is_set(r::STATUS::FD),
        }
    }

    fn reset(&self) -> Result {
        let mut st = self.state.lock();
        if st.tx_open != 0 || st.rx_open != 0 {
            return Err(Error::QueuesOpen);
        }
        st.rss_saved = None;
        self.bring_up(&mut st)
    }

    fn recover(&self) -> Result {
        let (mode, rss) = {
            let mut st = self.state.lock();
            if self.rd(r::STATUS) == u32::MAX {
                return Err(Error::DeviceRemoved);
            }
            // The driver keeps TCTL.EN set from bring-up on; it is 0 after any reset
            // (§10.2.6.1). With it set only queues were lost: nothing to do.
            if r::TCTL::EN.is_set(self.rd(r::TCTL)) {
                return Ok(());
            }
            // Queues still open (faulted, not yet closed) keep their indices and the receive
            // buffer size they share: bring-up forgets both, and reopening an index still
            // held would let the old queue's close stop the new one.
            let kept = (st.tx_open, st.rx_open, st.rx_buf_len, st.mode, st.rss_saved);
            self.bring_up(&mut st)?;
            (st.tx_open, st.rx_open, st.rx_buf_len) = (kept.0, kept.1, kept.2);
            (kept.3, kept.4)
        };
        self.set_rx_mode(mode)?;
        if let Some(rss) = rss {
            self.set_rss(&rss.config())?;
        }
        Ok(())
    }

    fn open_tx<const N: usize>(&self, index: u16, config: TxConfig) -> Result<E1000eTx<'_, P, N>> {
        Self::check_depth::<N>()?;
        let irq = config.interrupt.then_some(config.vector);
        let (q, dma) = self.open_queue::<N>(index, true, irq)?;
        // From here on the queue's Drop stops it and releases the index.
        let mut tx = E1000eTx {
            q,
            ring: TxRing::new(dma),
        };
        tx.start(0)?;
        Ok(tx)
    }

    fn open_rx<const N: usize>(&self, index: u16, config: RxConfig) -> Result<E1000eRx<'_, P, N>> {
        Self::check_depth::<N>()?;
        // Checked before claiming, so that a refused size leaves nothing behind.
        Self::rx_buf_size(&self.state.lock(), config.buf_len)?;
        let irq = config.interrupt.then_some(config.vector);
        let (q, dma) = self.open_queue::<N>(index, false, irq)?;
        let mut rx = E1000eRx {
            q,
            buf_len: 0,
            ring: RxRing::new(dma),
        };
        {
            let mut st = self.state.lock();
            // Another receive queue may have opened meanwhile: settle the size again.
            rx.buf_len = Self::rx_buf_size(&st, config.buf_len)?;
            st.rx_buf_len = rx.buf_len;
        }
        rx.start(0)?;
        Ok(rx)
    }

    fn set_rss(&self, rss: &RssConfig<'_>) -> Result {
        let h = rss.hashes;
        if rss.key.len() != r::RSS_KEY_LEN
            || rss.table.len() != r::RETA_ENTRIES
            || rss.table.iter().any(|&q| q >= r::QUEUES)
            || h.ipv4_udp
        {
            return Err(Error::RssConfig);
        }
        let mut st = self.state.lock();
        // Key byte 4i+j is byte j (little-endian) of RSSRK[i] (§10.2.5.23; QEMU hashes with
        // `(uint8_t *)&mac[RSSRK]`).
        for (i, k) in rss.key.chunks_exact(4).enumerate() {
            self.wr(r::rssrk(i), u32::from_le_bytes([k[0], k[1], k[2], k[3]]));
        }
        // Entry 4i+j is byte j of RETA[i]; the queue is the byte's bit 7.
        let entry = |q: u16| if q == 1 { r::RETA_QUEUE_BIT } else { 0 };
        for (i, e) in rss.table.chunks_exact(4).enumerate() {
            self.wr(
                r::reta(i),
                u32::from_le_bytes([entry(e[0]), entry(e[1]), entry(e[2]), entry(e[3])]),
            );
        }
        let mrqc = if h.ipv4 || h.ipv4_tcp {
            r::MRQC::ENABLE::Rss
                + r::MRQC::IPV4.val(h.ipv4.into())
                + r::MRQC::TCP_IPV4.val(h.ipv4_tcp.into())
        } else {
            r::MRQC::ENABLE::CLEAR
        };
        self.wr(r::MRQC, mrqc.value);
        st.rss_saved = RssSaved::of(rss);
        Ok(())
    }

    fn set_rx_mode(&self, mode: RxMode) -> Result {
        let mut st = self.state.lock();
        st.mode = mode;
        self.rx_resume(&st);
        Ok(())
    }

    fn stats(&self) -> Stats {
        let mut st = self.state.lock();
        // Clear-on-read counters (§10.2.7); the low half of each 64-bit pair first. QEMU makes
        // GPRC a copy of TPR and GORC of TOR on every received frame, so TPR and TOR are read
        // (cleared) right after: otherwise the next copy would count old frames again.
        let rx_packets = u64::from(self.rd(r::GPRC));
        let _ = self.rd(r::TPR);
        let rx_lo = u64::from(self.rd(r::GORCL));
        let rx_bytes = rx_lo | u64::from(self.rd(r::GORCH)) << 32;
        let _ = self.rd(r::TORL);
        let _ = self.rd(r::TORH);
        let tx_packets = u64::from(self.rd(r::GPTC));
        let tx_lo = u64::from(self.rd(r::GOTCL));
        let tx_bytes = tx_lo | u64::from(self.rd(r::GOTCH)) << 32;
        let rx_missed = u64::from(self.rd(r::MPC));
        let s = &mut st.stats;
        s.rx_packets = s.rx_packets.wrapping_add(rx_packets);
        s.tx_packets = s.tx_packets.wrapping_add(tx_packets);
        s.rx_bytes = s.rx_bytes.wrapping_add(rx_bytes);
        s.tx_bytes = s.tx_bytes.wrapping_add(tx_bytes);
        s.rx_missed = s.rx_missed.wrapping_add(rx_missed);
        *s
    }

    fn rx_error_name(&self, bit: u32) -> Option<&'static str> {
        RX_ERROR_NAMES
            .iter()
            .find(|(b, _)| *b == bit)
            .map(|(_, n)| *n)
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

/// What an open transmit and an open receive queue share: the claimed index, its interrupt
/// vector and cause. Dropping it disarms and unwires the interrupt and releases the index after
/// the queue type stopped its hardware queue — so the queue types declare it *before* their
/// ring, whose memory goes back to the platform only after the device has stopped.
struct QueueCore<'a, P: Platform> {
    nic: &'a E1000e<P>,
    index: u16,
    tx: bool,
    vector: Option<u16>,
    wait: Option<P::Wait>,
    armed: bool,
    /// Ring length in bytes, as programmed in RDLEN/TDLEN.
    len: u32,
    /// The critical fault found, sticky.
    fault: Option<QueueFault>,
    /// Empty polls in a row with work pending.
    stalls: StallCount,
}

impl<'a, P: Platform> QueueCore<'a, P> {
    fn new(
        nic: &'a E1000e<P>,
        index: u16,
        tx: bool,
        irq: Option<(u16, P::Wait)>,
        len: usize,
    ) -> Self {
        let (vector, wait) = irq.unzip();
        QueueCore {
            nic,
            index,
            tx,
            vector,
            wait,
            armed: false,
            len: len as u32,
            fault: None,
            stalls: StallCount::NONE,
        }
    }

    /// Counts a poll: `stuck` if it found nothing while work was pending. Every
    /// [`STALL_POLLS`](ringfab_hal::queue::STALL_POLLS)th stuck poll in a row checks the device.
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
            self.fault = self.nic.queue_fault(self.index, self.tx, self.len);
        }
        self.fault
    }

    /// Whether the device is gone (then stopping it would only wait out the bound).
    fn removed(&self) -> bool {
        self.fault == Some(QueueFault::Removed)
    }

    /// Hands the device everything up to `tail` (TDT or RDT).
    #[inline]
    fn doorbell(&self, tail: u32) {
        // Descriptors must be in memory before the device can see the new tail.
        fence(Ordering::Release);
        let reg = if self.tx {
            r::tdt(self.index)
        } else {
            r::rdt(self.index)
        };
        self.nic.wr(reg, tail);
    }

    fn interrupt(&self) -> Option<&P::Wait> {
        self.wait.as_ref()
    }

    fn interrupt_vector(&self) -> Option<u16> {
        self.vector
    }

    /// IMS / IMC of the queue's own cause: write-1-to-set and write-1-to-clear, so no lock.
    fn set_interrupt(&mut self, armed: bool) {
        if self.vector.is_some() && armed != self.armed {
            self.armed = armed;
            let cause = r::queue_cause(self.index, self.tx);
            self.nic.wr(if armed { r::IMS } else { r::IMC }, cause);
        }
    }
}

impl<P: Platform> Drop for QueueCore<'_, P> {
    fn drop(&mut self) {
        self.set_interrupt(false);
        if self.vector.is_some() {
            self.nic.unwire_interrupt(self.index, self.tx);
        }
        let mut st = self.nic.state.lock();
        self.nic.release(&mut st, self.index, self.tx);
        if !self.tx {
            // The receiver was paused by the queue's drop; restart it for the other queue.
            self.nic.rx_resume(&st);
        }
    }
}

/// An open transmit queue of depth `N` (a power of two in [`MIN_DEPTH`]..=[`MAX_DEPTH`]).
pub struct E1000eTx<'a, P: Platform, const N: usize> {
    /// Declared before `ring`: its drop releases the queue after `Drop for E1000eTx` stopped it.
    q: QueueCore<'a, P>,
    ring: TxRing<P::Dma, N>,
}

impl<P: Platform, const N: usize> core::fmt::Debug for E1000eTx<'_, P, N> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("E1000eTx")
            .field("index", &self.q.index)
            .field("depth", &N)
            .field("pending", &self.ring.pending())
            .finish_non_exhaustive()
    }
}

impl<P: Platform, const N: usize> E1000eTx<'_, P, N> {
    /// Stops the queue, programs it empty at `head` over the ring, and enables it.
    fn start(&mut self, head: u32) -> Result {
        let (nic, q) = (self.q.nic, self.q.index);
        nic.set_tx_enable(q, false)?;
        let iova = self.ring.dma().iova();
        nic.wr(r::tdbal(q), iova.0 as u32);
        nic.wr(r::tdbah(q), (iova.0 >> 32) as u32);
        nic.wr(r::tdlen(q), (N * DESC_LEN) as u32);
        nic.wr(r::tdh(q), head);
        nic.wr(r::tdt(q), head);
        nic.set_tx_enable(q, true)
    }
}

impl<P: Platform, const N: usize> Drop for E1000eTx<'_, P, N> {
    fn drop(&mut self) {
        // Stop the device before the ring memory goes back to the platform.
        let (nic, q) = (self.q.nic, self.q.index);
        if !self.q.removed() {
            let _ = nic.set_tx_enable(q, false);
        }
        nic.wr(r::tdlen(q), 0);
    }
}

impl<P: Platform, const N: usize> TxQueue for E1000eTx<'_, P, N> {
    type Wait = P::Wait;

    fn index(&self) -> u16 {
        self.q.index
    }

    fn depth(&self) -> usize {
        N
    }

    #[inline]
    fn free(&self) -> usize {
        self.ring.free()
    }

    #[inline]
    fn pending(&self) -> usize {
        self.ring.pending()
    }

    #[inline]
    fn push(
        &mut self,
        segments: &[TxSegment],
        token: Token,
        report: Report,
    ) -> core::result::Result<(), PushError> {
        if let Some(f) = self.q.fault {
            return Err(PushError::Fault(f));
        }
        self.ring
            .push(segments, token, report, MAX_TX_SEGMENTS, MAX_FRAME_LEN)
    }

    #[inline]
    fn doorbell(&mut self) {
        if let Some(tail) = self.ring.doorbell() {
            self.q.doorbell(tail);
        }
    }

    #[inline]
    fn poll(&mut self, out: &mut [TxCompletion]) -> usize {
        let n = self.ring.poll(out);
        self.q.after_poll(n == 0 && self.ring.pending() != 0);
        n
    }

    fn fault(&self) -> Option<QueueFault> {
        self.q.fault
    }

    fn check(&mut self) -> Option<QueueFault> {
        self.q.check()
    }

    fn flush(&mut self) {
        if self.q.fault.is_some() {
            // The device no longer holds the ring: take the tokens back, touch nothing.
            self.ring.flush();
            return;
        }
        // A timeout leaves nothing better to do than to go on: the tokens must come back.
        let _ = self.q.nic.set_tx_enable(self.q.index, false);
        self.ring.flush();
        let _ = self.start(self.ring.hw_tail());
    }

    fn interrupt(&self) -> Option<&P::Wait> {
        self.q.interrupt()
    }

    fn set_interrupt(&mut self, armed: bool) {
        self.q.set_interrupt(armed);
    }

    fn interrupt_vector(&self) -> Option<u16> {
        self.q.interrupt_vector()
    }
}

/// An open receive queue of depth `N`.
pub struct E1000eRx<'a, P: Platform, const N: usize> {
    /// Declared before `ring`: its drop releases the queue after `Drop for E1000eRx` stopped it.
    q: QueueCore<'a, P>,
    /// The receive buffer size programmed in RCTL.
    buf_len: u32,
    ring: RxRing<P::Dma, N>,
}

impl<P: Platform, const N: usize> core::fmt::Debug for E1000eRx<'_, P, N> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("E1000eRx")
            .field("index", &self.q.index)
            .field("depth", &N)
            .field("buf_len", &self.buf_len)
            .field("pending", &self.ring.pending())
            .finish_non_exhaustive()
    }
}

impl<P: Platform, const N: usize> E1000eRx<'_, P, N> {
    /// Programs the ring of a receive queue with the receiver paused (`st` held), empty at
    /// `head`, then restarts the receiver.
    fn program(&self, st: &MutexGuard<'_, State>, head: u32) -> Result {
        let (nic, q) = (self.q.nic, self.q.index);
        nic.rx_pause(st, q)?;
        let iova = self.ring.dma().iova();
        nic.wr(r::rdbal(q), iova.0 as u32);
        nic.wr(r::rdbah(q), (iova.0 >> 32) as u32);
        nic.wr(r::rdlen(q), (N * DESC_LEN) as u32);
        nic.wr(r::rdh(q), head);
        nic.wr(r::rdt(q), head);
        nic.rx_resume(st);
        Ok(())
    }

    fn start(&mut self, head: u32) -> Result {
        let st = self.q.nic.state.lock();
        self.program(&st, head)
    }
}

impl<P: Platform, const N: usize> Drop for E1000eRx<'_, P, N> {
    fn drop(&mut self) {
        // Stop the receiver before the ring memory goes back to the platform; the queue core's
        // drop (after this) releases the index and restarts the receiver for the other queue.
        let (nic, q) = (self.q.nic, self.q.index);
        let st = nic.state.lock();
        if !self.q.removed() {
            let _ = nic.rx_pause(&st, q);
        }
        nic.wr(r::rdlen(q), 0);
        nic.wr(r::rdh(q), 0);
        nic.wr(r::rdt(q), 0);
    }
}

impl<P: Platform, const N: usize> RxQueue for E1000eRx<'_, P, N> {
    type Wait = P::Wait;

    fn index(&self) -> u16 {
        self.q.index
    }

    fn depth(&self) -> usize {
        N
    }

    fn buf_len(&self) -> u32 {
        self.buf_len
    }

    #[inline]
    fn free(&self) -> usize {
        self.ring.free()
    }

    #[inline]
    fn pending(&self) -> usize {
        self.ring.pending()
    }

    #[inline]
    fn push(&mut self, buf: RxBuffer, token: Token) -> core::result::Result<(), PushError> {
        if let Some(f) = self.q.fault {
            return Err(PushError::Fault(f));
        }
        self.ring.push(buf, token, self.buf_len)
    }

    #[inline]
    fn doorbell(&mut self) {
        if let Some(tail) = self.ring.doorbell() {
            self.q.doorbell(tail);
        }
    }

    #[inline]
    fn poll(&mut self, out: &mut [RxCompletion]) -> usize {
        let n = self.ring.poll(out);
        self.q.after_poll(n == 0 && self.ring.pending() != 0);
        n
    }

    // Always inlined: the closure is core's read loop, whose captures stay in registers only
    // while no call it reaches is left out of line.
    #[inline(always)]
    fn poll_each(&mut self, max: usize, f: &mut impl FnMut(&RxCompletion)) -> usize {
        let n = self.ring.poll_each(max, f);
        self.q.after_poll(n == 0 && self.ring.pending() != 0);
        n
    }

    // Always inlined: the closure is core's read loop, whose captures stay in registers only
    // while no call it reaches is left out of line.
    #[inline(always)]
    fn poll_each_unhashed(&mut self, max: usize, f: &mut impl FnMut(&RxCompletion)) -> usize {
        let n = self.ring.poll_each_unhashed(max, f);
        self.q.after_poll(n == 0 && self.ring.pending() != 0);
        n
    }

    fn fault(&self) -> Option<QueueFault> {
        self.q.fault
    }

    fn check(&mut self) -> Option<QueueFault> {
        self.q.check()
    }

    fn flush(&mut self) {
        if self.q.fault.is_some() {
            self.ring.flush();
            return;
        }
        let st = self.q.nic.state.lock();
        let _ = self.q.nic.rx_pause(&st, self.q.index);
        self.ring.flush();
        let _ = self.program(&st, self.ring.hw_tail());
    }

    fn interrupt(&self) -> Option<&P::Wait> {
        self.q.interrupt()
    }

    fn set_interrupt(&mut self, armed: bool) {
        self.q.set_interrupt(armed);
    }

    fn interrupt_vector(&self) -> Option<u16> {
        self.q.interrupt_vector()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(rx_buf_len: u32) -> State {
        State {
            tx_open: 0,
            rx_open: 0,
            rx_buf_len,
            mode: RxMode::default(),
            rss_saved: None,
            mac: MacAddr::default(),
            stats: Stats::default(),
        }
    }

    type Nic = E1000e<ringfab_emu::EmuPlatform>;

    #[test]
    fn receive_buffers_round_to_kib_and_the_second_queue_shares_the_first_size() {
        assert_eq!(Nic::rx_buf_size(&state(0), 1500), Ok(2048));
        assert_eq!(Nic::rx_buf_size(&state(0), 16384), Ok(16384));
        assert_eq!(
            Nic::rx_buf_size(&state(0), 0),
            Err(Error::BufferSize {
                len: 0,
                max: MAX_RX_BUF_LEN
            })
        );
        assert!(Nic::rx_buf_size(&state(0), 16385).is_err());
        assert_eq!(Nic::rx_buf_size(&state(4096), 1000), Ok(4096), "rounded up");
        assert_eq!(
            Nic::rx_buf_size(&state(2048), 3000),
            Err(Error::BufferSize {
                len: 3000,
                max: 2048
            })
        );
    }

    #[test]
    fn rctl_encodes_the_buffer_size_in_flxbuf_or_bsex() {
        let mut st = state(2048);
        let v = r::reg::<r::RCTL::Register>(rctl_for(&st, true));
        assert_eq!(v.read(r::RCTL::FLXBUF), 2);
        assert!(v.is_set(r::RCTL::EN) && v.is_set(r::RCTL::SECRC) && v.is_set(r::RCTL::BAM));
        st.rx_buf_len = 16384;
        let v = r::reg::<r::RCTL::Register>(rctl_for(&st, false));
        assert_eq!(
            (
                v.read(r::RCTL::FLXBUF),
                v.is_set(r::RCTL::BSEX),
                v.read(r::RCTL::BSIZE)
            ),
            (0, true, 1)
        );
        assert!(!v.is_set(r::RCTL::EN));
    }
}
