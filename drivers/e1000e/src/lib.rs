//! ringfab driver for the Intel 82574 Gigabit Ethernet controller, as QEMU's `e1000e` device and
//! the silicon present it: two transmit and two receive queues, RSS over the two receive queues,
//! five MSI-X vectors, extended receive descriptors, legacy transmit descriptors.
//!
//! [`E1000e::new`] brings the device up over any [`Platform`]; [`E1000e`] then implements
//! [`Nic`] (control path, `&self`, state behind a `spin::Mutex`), and its queues [`E1000eTx`]
//! and [`E1000eRx`] implement [`TxQueue`](ringfab_hal::TxQueue) and
//! [`RxQueue`](ringfab_hal::RxQueue) (data path, no lock, no register read, one tail write per
//! batch). The queues are `ringfab-ring`'s, the same code as `ringfab-igb`'s; what this driver
//! gives them is [`E1000eQueue`] — the 82574's queue registers, its ways of stopping and
//! starting a queue, IVAR steering, per-cause arming and the shared receive buffer size — and
//! the [`Extended`] descriptor format.
//!
//! What the driver guarantees on top of the `ringfab-hal` contract — the same as `ringfab-igb`:
//! * no `unsafe` here (`#![deny(unsafe_code)]`): registers go through [`Mmio`], descriptors
//!   through [`DmaRing`](ringfab_hal::DmaRing)'s volatile accessors (its size checked once,
//!   when the queue opens);
//! * every token pushed comes back once from `poll` — including after
//!   [`Queue::flush`](ringfab_hal::Queue::flush) — and a device that writes nonsense produces
//!   error completions, never a panic or an access outside the ring (see `ringfab-ring`, whose
//!   rings and queues both Intel drivers share);
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
//! Checksum offload (all three [`Offloads`]): receive checking is on (RXCSUM.IPOFLD/TUOFLD,
//! §10.2.5.15) and a completion's [`checksum`](ringfab_hal::RxCompletion::checksum) marks IPCS
//! without IPE and TCPCS without TCPE (extended write-back, §7.1.4.2); a checksum found wrong
//! is no frame error. [`push_checksummed`](ringfab_hal::TxQueue::push_checksummed) writes a
//! TCP/IP context descriptor (§7.2.10.2: TUCSS = start, TUCSO = start + offset, each a byte)
//! before the frame, whose data descriptors become extended ones with POPTS.TXSM (§7.2.10.3);
//! frames without it keep their legacy descriptors.
//!
//! Transmit report policy ("RS") is `ringfab-igb`'s: a frame's last descriptor asks for a
//! write-back if its [`Report`](ringfab_hal::Report) is `Always`, if a quarter of the ring has gone by without one,
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

pub use ring::Extended;

use core::ptr::NonNull;
use core::time::Duration;

use ringfab_hal::{
    Capabilities, Error, Iova, Link, MacAddr, Mmio, Nic, Offloads, Platform, QueueFault, Result,
    RssCaps, RssConfig, RssHashes, RssSaved, RxConfig, RxMode, Stats, TxConfig,
};
use ringfab_ring::{IntelRx, IntelTx, QueueHw};
use spin::Mutex;
use tock_registers::fields::FieldValue;
use tock_registers::RegisterLongName;

use crate::regs as r;

/// The PCI functions this driver drives, `(vendor, device)`: the 82574L and 82574IT (datasheet
/// §9.3.x). QEMU's `e1000e` is 8086:10D3.
pub const PCI_IDS: &[(u16, u16)] = &r::PCI_IDS;

/// Whether this driver drives the PCI function `vendor:device` (one of [`PCI_IDS`]);
/// [`E1000e::new`] opens it.
pub fn drives(vendor: u16, device: u16) -> bool {
    PCI_IDS.contains(&(vendor, device))
}

/// Smallest ring: TDLEN/RDLEN must be a multiple of 128 bytes (8 descriptors).
pub const MIN_DEPTH: usize = ringfab_ring::MIN_DEPTH;
/// Largest ring this driver opens (the shadow lives inline in the queue value).
pub const MAX_DEPTH: usize = ringfab_ring::MAX_DEPTH;
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
    /// [`Error::UnsupportedDevice`] for a PCI id not in [`PCI_IDS`]; [`Error::BarUnavailable`]
    /// from the platform; [`Error::ResetTimeout`] if CTRL.RST does not clear;
    /// [`Error::StationAddress`] if RAL0/RAH0 hold a group or all-zero address;
    /// [`Error::PhyAccess`] if an MDIO access fails.
    pub fn new(platform: P) -> Result<Self> {
        let id = r::reg::<r::PCI_ID::Register>(platform.config_read32(r::PCI_ID));
        let (vendor, device) = (
            id.read(r::PCI_ID::VENDOR) as u16,
            id.read(r::PCI_ID::DEVICE) as u16,
        );
        if !drives(vendor, device) {
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
        if !st.mac.is_station() {
            // A group or zero address from the NVM: no frame may carry it as its source.
            return Err(Error::StationAddress { mac: st.mac });
        }

        // MSI-X causes: each queue cause auto-clears after its message (EIAC) and stays
        // unmasked (IAME; IAM empty), so an armed queue keeps interrupting until disarmed.
        // EITR stays at its reset value, 0: no throttling (§7.4.4; older QEMU resets it to 500).
        self.modify(
            r::CTRL_EXT,
            r::CTRL_EXT::IAME::SET + r::CTRL_EXT::PBA_CLR::SET,
        );
        self.wr(r::IAM, 0);
        let queue_causes = r::ICR::RXQ0::SET + r::ICR::RXQ1::SET + r::ICR::TXQ0::SET;
        self.wr(r::EIAC, (queue_causes + r::ICR::TXQ1::SET).value);
        self.wr(r::IVAR, 0);

        // Receive: extended descriptors, RSS off until set_rss, the write-back carrying the
        // RSS hash (PCSD) and the checked-checksum status and error bits (IPOFLD, TUOFLD,
        // §7.1.4.2 / §10.2.5.15); receiver off until a queue opens.
        st.rx_open = 0;
        st.tx_open = 0;
        st.rx_buf_len = 0;
        self.wr(r::RFCTL, r::RFCTL::EXSTEN::SET.value);
        self.wr(
            r::RXCSUM,
            (r::RXCSUM::PCSD::SET + r::RXCSUM::IPOFLD::SET + r::RXCSUM::TUOFLD::SET).value,
        );
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

    /// Waits (bounded) for RCTL.EN to read back as [`rx_resume`](Self::rx_resume) wrote it:
    /// the receiver's acknowledgement that receive queue `q`'s restart took.
    fn rx_resumed(&self, st: &State, q: u16) -> Result {
        let want = rctl_for(st, st.rx_open != 0) & r::RCTL::EN::SET.value;
        for _ in 0..QUEUE_POLLS {
            if self.rd(r::RCTL) & r::RCTL::EN::SET.value == want {
                return Ok(());
            }
            self.platform.delay(QUEUE_STEP);
        }
        Err(Error::QueueTimeout { index: q })
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

    /// Claims queue `index` of one direction or says why not. A receive queue also settles
    /// the receive buffer size for `buf_len` ([`rx_buf_size`](Self::rx_buf_size)) — checked
    /// before claiming, so that a refused size leaves nothing behind — and records it for
    /// RCTL, under the same lock, so that two receive queues opening at once agree on it.
    /// Returns the size (0 for a transmit queue).
    fn claim(&self, index: u16, tx: bool, buf_len: u32) -> Result<u32> {
        let mut st = self.state.lock();
        let size = if tx {
            0
        } else {
            Self::rx_buf_size(&st, buf_len)?
        };
        if index >= r::QUEUES {
            return Err(Error::QueueIndex {
                index,
                count: r::QUEUES,
            });
        }
        let open = if tx { &mut st.tx_open } else { &mut st.rx_open };
        if *open & (1 << index) != 0 {
            return Err(Error::QueueInUse { index });
        }
        *open |= 1 << index;
        if !tx {
            st.rx_buf_len = size;
        }
        Ok(size)
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
        let vector = ringfab_ring::pick_vector(index, vector, self.vectors)?;
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
        let mut offloads = Offloads::default();
        offloads.rx_ipv4_checksum = true;
        offloads.rx_l4_checksum = true;
        offloads.tx_l4_checksum = true;
        caps.offloads = offloads;
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
        E1000eTx::open_tx(E1000eQueue::new(self, index, true), config)
    }

    fn open_rx<const N: usize>(&self, index: u16, config: RxConfig) -> Result<E1000eRx<'_, P, N>> {
        E1000eRx::open_rx(E1000eQueue::new(self, index, false), config)
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

/// The 82574 half of one open queue ([`QueueHw`]): the queue's registers, its start and stop
/// (TARC.ENABLE for a transmit queue; RCTL.EN, shared by both receive queues, under the state
/// lock for a receive queue), its IVAR entry, its own interrupt cause, and the receive buffer
/// size the two receive queues share — what `ringfab-ring`'s queue types ask of the device.
/// The rest of a queue ([`E1000eTx`], [`E1000eRx`]) is `ringfab-ring`'s.
pub struct E1000eQueue<'a, P: Platform> {
    nic: &'a E1000e<P>,
    index: u16,
    tx: bool,
    /// TDT or RDT.
    tail: usize,
}

impl<'a, P: Platform> E1000eQueue<'a, P> {
    fn new(nic: &'a E1000e<P>, index: u16, tx: bool) -> Self {
        let tail = if tx { r::tdt(index) } else { r::rdt(index) };
        E1000eQueue {
            nic,
            index,
            tx,
            tail,
        }
    }

    /// Writes the stopped queue's ring: base, length, and head = tail = `head`.
    fn program(&self, iova: Iova, len: u32, head: u32) {
        let (nic, q) = (self.nic, self.index);
        let [bal, bah, dlen, dh] = if self.tx {
            [r::tdbal(q), r::tdbah(q), r::tdlen(q), r::tdh(q)]
        } else {
            [r::rdbal(q), r::rdbah(q), r::rdlen(q), r::rdh(q)]
        };
        nic.wr(bal, iova.0 as u32);
        nic.wr(bah, (iova.0 >> 32) as u32);
        nic.wr(dlen, len);
        nic.wr(dh, head);
        nic.wr(self.tail, head);
    }
}

impl<P: Platform> QueueHw for E1000eQueue<'_, P> {
    type Format = Extended;
    type Dma = P::Dma;
    type Wait = P::Wait;

    const MAX_TX_SEGMENTS: usize = MAX_TX_SEGMENTS;
    const MAX_FRAME_LEN: usize = MAX_FRAME_LEN;
    const DEVICE: &'static str = "82574";

    fn index(&self) -> u16 {
        self.index
    }

    /// A receive queue's buffer size is RCTL's, shared with the other receive queue.
    fn claim(&mut self, buf_len: u32) -> Result<u32> {
        self.nic.claim(self.index, self.tx, buf_len)
    }

    /// For a receive queue, also restarts the receiver for the other queue: closing paused it
    /// (after a failed open this writes RCTL as it already is).
    fn release(&mut self) {
        let mut st = self.nic.state.lock();
        self.nic.release(&mut st, self.index, self.tx);
        if !self.tx {
            self.nic.rx_resume(&st);
        }
    }

    fn alloc(&self, len: usize) -> Result<P::Dma> {
        self.nic.platform.alloc_dma(len)
    }

    fn wire(&mut self, vector: Option<u16>) -> Result<(u16, P::Wait)> {
        self.nic.wire_interrupt(self.index, self.tx, vector)
    }

    fn unwire(&mut self) {
        self.nic.unwire_interrupt(self.index, self.tx);
    }

    /// IMS / IMC of the queue's own cause: write-1-to-set and write-1-to-clear, so no lock and
    /// no count per vector.
    fn arm(&self, _vector: u16, armed: bool) {
        let cause = r::queue_cause(self.index, self.tx);
        self.nic.wr(if armed { r::IMS } else { r::IMC }, cause);
    }

    #[inline]
    fn write_tail(&self, tail: u32) {
        self.nic.wr(self.tail, tail);
    }

    /// Transmit: TARC.ENABLE cleared and read back, the ring programmed, ENABLE set and read
    /// back. Receive: with the state lock held throughout, the receiver paused (RCTL.EN clear,
    /// read back), the ring programmed, the receiver restarted — the lock keeps another
    /// queue's open or close from restarting the receiver while the flushed ring is still the
    /// device's.
    ///
    /// The stop is acknowledged only by its read-back (TARC.ENABLE, or RCTL.EN, reading
    /// clear); without it `flush` is told so and nothing is programmed. The start is
    /// acknowledged the same way: TARC.ENABLE, or RCTL.EN, reading back set.
    fn restart(&self, iova: Iova, len: u32, flush: impl FnOnce(bool) -> Option<u32>) -> Result {
        let (nic, q) = (self.nic, self.index);
        if self.tx {
            let stopped = nic.set_tx_enable(q, false);
            let head = flush(stopped.is_ok());
            stopped?;
            let Some(head) = head else { return Ok(()) };
            self.program(iova, len, head);
            nic.set_tx_enable(q, true)
        } else {
            let st = nic.state.lock();
            let paused = nic.rx_pause(&st, q);
            let head = flush(paused.is_ok());
            paused?;
            let Some(head) = head else { return Ok(()) };
            self.program(iova, len, head);
            nic.rx_resume(&st);
            nic.rx_resumed(&st, q)
        }
    }

    /// The receiver stays paused until [`release`](QueueHw::release) restarts it for the other
    /// queue.
    fn shut(&self, removed: bool) {
        let (nic, q) = (self.nic, self.index);
        if self.tx {
            if !removed {
                let _ = nic.set_tx_enable(q, false);
            }
            nic.wr(r::tdlen(q), 0);
        } else {
            let st = nic.state.lock();
            if !removed {
                let _ = nic.rx_pause(&st, q);
            }
            nic.wr(r::rdlen(q), 0);
            nic.wr(r::rdh(q), 0);
            nic.wr(r::rdt(q), 0);
        }
    }

    fn fault(&self, len: u32) -> Option<QueueFault> {
        self.nic.queue_fault(self.index, self.tx, len)
    }
}

/// An open transmit queue of depth `N` (a power of two in [`MIN_DEPTH`]..=[`MAX_DEPTH`]):
/// `ringfab-ring`'s queue over the 82574's registers, legacy transmit descriptors.
pub type E1000eTx<'a, P, const N: usize> = IntelTx<E1000eQueue<'a, P>, N>;

/// An open receive queue of depth `N`: extended receive descriptors.
pub type E1000eRx<'a, P, const N: usize> = IntelRx<E1000eQueue<'a, P>, N>;

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
    fn the_82574l_and_82574it_are_driven_and_nothing_else() {
        assert_eq!(PCI_IDS, [(0x8086, 0x10D3), (0x8086, 0x10F6)]);
        assert!(PCI_IDS.iter().all(|&(v, d)| drives(v, d)));
        assert!(!drives(0x8086, 0x10C9), "the 82576 is igb's");
        assert!(!drives(0x1af4, 0x10D3));
    }

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
