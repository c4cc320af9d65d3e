//! ringfab driver for the Intel 82576 Gigabit Ethernet controller, as QEMU's `igb` device and the
//! silicon present it: 16 transmit and 16 receive queues, RSS, MSI-X.
//!
//! [`Igb::new`] brings the device up over any [`Platform`]; [`Igb`] then implements
//! [`Nic`] (control path, `&self`, state behind a `spin::Mutex`), and its queues [`IgbTx`] and
//! [`IgbRx`] implement [`TxQueue`](ringfab_hal::TxQueue) and [`RxQueue`](ringfab_hal::RxQueue)
//! (data path, no lock, no register read, one tail write per batch). The queues are
//! `ringfab-ring`'s, written once for both Intel drivers; what this driver gives them is
//! [`IgbQueue`] — the 82576's queue registers, enable bit, IVAR steering, per-vector arming and
//! receive buffer size — and the [`Advanced`] descriptor format.
//!
//! What the driver guarantees on top of the `ringfab-hal` contract:
//! * no `unsafe` here (`#![deny(unsafe_code)]`): registers go through [`Mmio`], descriptors
//!   through [`DmaRing`](ringfab_hal::DmaRing)'s volatile accessors (its size checked once,
//!   when the queue opens);
//! * every token pushed comes back once from `poll` — including after
//!   [`Queue::flush`](ringfab_hal::Queue::flush) — and a device that writes nonsense produces
//!   error completions, never a panic or an access outside the ring (see `ringfab-ring`, whose
//!   rings and queues both Intel drivers share);
//! * a queue stops its hardware queue (bounded wait) before its ring memory is freed.
//!
//! Transmit report policy ("RS"), as `ringfab-ring` implements it: a frame's last descriptor asks for
//! a write-back if its [`Report`](ringfab_hal::Report) is `Always`, if a quarter of the ring has gone by without one,
//! if the push fills the ring, or if it is the last frame of a doorbell batch. Successful
//! `ErrorsOnly` frames are reclaimed silently when a later write-back covers them.
//!
//! Checksum offload (all three [`Offloads`]): receive checking is on (RXCSUM.IPOFLD/TUOFLD,
//! §8.9.12) and a completion's [`checksum`](ringfab_hal::RxCompletion::checksum) marks IPCS
//! without IPE and L4I without L4E (§7.1.5.2); a checksum found wrong is no frame error — the
//! frame is delivered unmarked. [`push_checksummed`](ringfab_hal::TxQueue::push_checksummed)
//! writes an advanced context descriptor (§7.2.2.2: MACLEN + IPLEN is the request's start,
//! TUCMD.L4T its offset, UDP's 6 or TCP's 16) before the frame's data descriptors, each with
//! POPTS.TXSM (§7.2.2.3), as Linux's igb does for a partial checksum.
//!
//! Interrupts: a queue opened with a [`vector`](TxConfig::vector) is steered there through its
//! IVAR entry; without one, queue pair `i` (RX `i` and TX `i`) shares MSI-X vector
//! `i % vectors`, where `vectors` is the platform's count (capped at the 25 EICR can name). A
//! per-vector arm count keeps one queue's `set_interrupt(false)` from masking another queue
//! armed on the same vector.
//!
//! Critical faults (`ringfab-hal`'s "Critical faults"): after
//! [`ringfab_hal::queue::STALL_POLLS`] empty polls with work pending, a queue
//! reads STATUS, its ring length and its enable bit: STATUS all-ones is a device that is gone
//! ([`QueueFault::Removed`]), a ring length back at its power-on 0 a device that was reset
//! ([`QueueFault::Reset`]), a clear ENABLE a queue the device disabled
//! ([`QueueFault::Disabled`]). [`Nic::recover`] then brings the device up again if the reset
//! cleared its set-up (TCTL.EN/RCTL.EN read 0).
#![no_std]
#![deny(unsafe_code)]

pub mod desc;
mod regs;
mod ring;

pub use ring::Advanced;

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

/// The PCI functions this driver drives, `(vendor, device)`: the 82576 copper parts (datasheet
/// §6.2.1). QEMU's `igb` is 8086:10C9.
pub const PCI_IDS: &[(u16, u16)] = &r::PCI_IDS;

/// Whether this driver drives the PCI function `vendor:device` (one of [`PCI_IDS`]);
/// [`Igb::new`] opens it.
pub fn drives(vendor: u16, device: u16) -> bool {
    PCI_IDS.contains(&(vendor, device))
}

/// Smallest ring: TDLEN/RDLEN must be a multiple of 128 bytes (8 descriptors).
pub const MIN_DEPTH: usize = ringfab_ring::MIN_DEPTH;
/// Largest ring this driver opens (the shadow lives inline in the queue value).
pub const MAX_DEPTH: usize = ringfab_ring::MAX_DEPTH;
/// Most descriptors per transmitted frame: small enough that the largest frame always fits the
/// smallest ring (which holds `MIN_DEPTH - 1`).
pub const MAX_TX_SEGMENTS: usize = 4;
/// Longest frame, Ethernet header included, FCS excluded: RLPML (9018, FCS included) − 4.
pub const MAX_FRAME_LEN: usize = 9014;
/// Largest receive buffer: SRRCTL.BSIZEPACKET is 7 bits of 1 KiB.
pub const MAX_RX_BUF_LEN: u32 = r::SRRCTL::BSIZEPACKET.mask * r::SRRCTL_BSIZEPKT_UNIT;

/// Software reset: the datasheet asks for at least 1 ms before touching the device again.
const RESET_DELAY: Duration = Duration::from_millis(10);
/// Polls of CTRL.RST after [`RESET_DELAY`].
const RESET_POLLS: u32 = 100;
/// Link wait after restarting autonegotiation: up to 3 s in 10 ms steps (QEMU needs 500 ms).
const LINK_STEP: Duration = Duration::from_millis(10);
/// Steps of [`LINK_STEP`].
const LINK_POLLS: u32 = 300;
/// Queue enable/disable acknowledgement: up to 10 ms in 10 µs steps.
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
    tx_open: u16,
    /// Bit i: receive queue i is open.
    rx_open: u16,
    /// Per MSI-X vector: queues that armed it.
    armed: [u8; r::EICR_VECTORS as usize],
    /// Station address read at bring-up.
    mac: MacAddr,
    /// The receive filter mode last set.
    mode: RxMode,
    /// Whether [`Nic::set_rss`] left RSS programmed (MRQC.MRQE = RSS).
    rss: bool,
    /// The set-up [`Nic::set_rss`] last programmed, for [`Nic::recover`] to program again.
    rss_saved: Option<RssSaved>,
    /// Per VMDq pool (= receive queue), the destination address steered to it; entry `n` lives
    /// in receive-address entry `n`. Index 0 stays `None`: queue 0 keeps the station address.
    /// The device is in VMDq mode exactly while one is `Some`.
    rx_macs: [Option<MacAddr>; r::VM_POOLS as usize],
    /// Accumulated statistics.
    stats: Stats,
}

/// An 82576 brought up over platform `P`.
pub struct Igb<P: Platform> {
    platform: P,
    regs: P::Mmio,
    /// MSI-X vectors the driver uses (0: no interrupts).
    vectors: u16,
    state: Mutex<State>,
}

impl<P: Platform> core::fmt::Debug for Igb<P> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Igb")
            .field("vectors", &self.vectors)
            .finish_non_exhaustive()
    }
}

impl<P: Platform> Igb<P> {
    /// Brings the device up: checks the PCI id, enables memory space and bus mastering, maps
    /// BAR0, masks interrupts, resets the MAC, restarts PHY autonegotiation, waits (bounded) for
    /// the link, and programs the receiver (broadcast on, CRC stripped, long packets up to
    /// [`MAX_FRAME_LEN`]), the transmitter and MSI-X mode. A link that is not up after ~3 s is
    /// not an error: [`Nic::link`] reports it.
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
        let vectors = platform.irq_vectors().min(r::EICR_VECTORS);
        let nic = Igb {
            platform,
            regs,
            vectors,
            state: Mutex::new(State {
                tx_open: 0,
                rx_open: 0,
                armed: [0; r::EICR_VECTORS as usize],
                mac: MacAddr::default(),
                mode: RxMode::default(),
                rss: false,
                rss_saved: None,
                rx_macs: [None; r::VM_POOLS as usize],
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
        self.wr(r::EIMC, u32::MAX);
        let _ = self.rd(r::ICR);
        let _ = self.rd(r::EICR);
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
        // Reset unmasks nothing, but a cause latched across it would fire on the first EIMS.
        self.mask_interrupts();
        // Queue 0 comes out of reset enabled (QEMU igb_mac_reg_init, datasheet RXDCTL/TXDCTL
        // defaults); nothing runs until a queue is opened.
        for q in 0..r::QUEUES {
            self.wr(r::rxdctl(q), 0);
            self.wr(r::txdctl(q), 0);
        }

        // PHY: reset, then autonegotiation enabled and restarted. QEMU ignores the reset bit and
        // restarts the (500 ms) autonegotiation only on a write with AUTOEN and ANRESTART.
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

        // MSI-X mode; EIAC must follow GPIE (QEMU ignores EIAC writes outside MSI-X mode).
        self.wr(
            r::GPIE,
            (r::GPIE::MSIX_MODE::SET + r::GPIE::PBA::SET + r::GPIE::NSICR::SET).value,
        );
        let vector_bits = if self.vectors >= 32 {
            u32::MAX
        } else {
            (1u32 << self.vectors) - 1
        };
        self.wr(r::EIAC, vector_bits);
        for v in 0..self.vectors {
            self.wr(r::eitr(v), 0);
        }
        for i in 0..8 {
            self.wr(r::ivar(i), 0);
        }
        st.armed = [0; r::EICR_VECTORS as usize];

        // Receive: RSS off until set_rss; write-back carries the RSS hash (PCSD) where the
        // fragment checksum would be, and the checked-checksum status and error bits (IPOFLD,
        // TUOFLD, §7.1.x "Receive checksum offloading"); long packets up to RLPML.
        // The reset cleared every receive-address entry but 0, and MRQC: no queue addresses,
        // not in VMDq mode.
        self.wr(r::MRQC, 0);
        st.rss = false;
        st.rx_macs = [None; r::VM_POOLS as usize];
        self.wr(
            r::RXCSUM,
            (r::RXCSUM::PCSD::SET + r::RXCSUM::IPOFLD::SET + r::RXCSUM::TUOFLD::SET).value,
        );
        self.wr(r::RLPML, (MAX_FRAME_LEN + 4) as u32);
        st.mode = RxMode::default();
        self.wr(r::RCTL, rctl_for(st.mode));
        let tctl =
            r::TCTL::EN::SET + r::TCTL::PSP::SET + r::TCTL::CT::Default + r::TCTL::COLD::FullDuplex;
        self.wr(r::TCTL, tctl.value);
        Ok(())
    }

    /// Whether any receive queue has an address of its own (the device is in VMDq mode).
    fn vmdq(st: &State) -> bool {
        st.rx_macs.iter().any(Option::is_some)
    }

    /// Switches the device into VMDq mode (§7.10.3): every pool takes frames up to
    /// [`MAX_FRAME_LEN`] (VMOLR.LPE/RLPML, which **QEMU** checks per pool after RCTL.LPE),
    /// all eight receive-enabled (VFRE), pool 0 gets the station address (RAH0.POOLSEL bit 0),
    /// the mode's broadcast/multicast/promiscuous choices go to pool 0 ([`Self::program_vmdq_mode`]),
    /// and last MRQC.MRQE = VMDq, so no frame is steered before the pools are set up.
    fn enter_vmdq(&self, mode: RxMode) {
        for pool in 1..usize::from(r::VM_POOLS) {
            self.wr(r::vmolr(pool), vmolr_for(pool, mode));
        }
        self.wr(r::VFRE, (1 << r::VM_POOLS) - 1);
        self.program_vmdq_mode(mode);
        self.modify(r::RAH0, r::RAH::POOLSEL.val(1));
        self.wr(r::MRQC, r::MRQC::MRQE::Vmdq.value);
    }

    /// Leaves VMDq mode (the last queue address is gone): MRQC, VT_CTL, the VMOLRs, RAH0's
    /// pool and the MTA back to what bring-up leaves — RSS off, everything the filter accepts
    /// to queue 0.
    fn leave_vmdq(&self) {
        self.wr(r::MRQC, 0);
        self.modify(r::RAH0, r::RAH::POOLSEL.val(0));
        self.wr(r::VT_CTL, 0);
        for pool in 0..usize::from(r::VM_POOLS) {
            self.wr(r::vmolr(pool), VMOLR_RESET);
        }
        self.fill_mta(false);
    }

    /// The receive filter `mode` in VMDq mode, where **QEMU** does not consult RCTL.UPE/MPE/BAM
    /// (the driver still sets them, as the silicon's L2 filter wants): broadcast reaches pool 0
    /// through VMOLR0.BAM; promiscuous lets unicast to no known address reach the default pool
    /// 0 (VT_CTL.Dis_Def_Pool clear), otherwise it is dropped; all-multicast sets VMOLR0.MPME
    /// (silicon) and, for QEMU, VMOLR0.ROMPE with every MTA bit set.
    fn program_vmdq_mode(&self, mode: RxMode) {
        self.wr(r::vmolr(0), vmolr_for(0, mode));
        let vt_ctl =
            r::VT_CTL::DEF_PL.val(0) + r::VT_CTL::DIS_DEF_PL.val((!mode.promiscuous).into());
        self.wr(r::VT_CTL, vt_ctl.value);
        self.fill_mta(mode.all_multicast);
    }

    /// Every MTA bit set (`true`) or clear.
    fn fill_mta(&self, set: bool) {
        let v = if set { u32::MAX } else { 0 };
        for i in 0..r::MTA_REGS {
            self.wr(r::mta(i), v);
        }
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

    /// Writes `value` to RXDCTL/TXDCTL at `reg` and waits for its ENABLE bit to read back.
    fn set_queue_enable(&self, reg: usize, value: u32, index: u16) -> Result {
        self.wr(reg, value);
        let want = r::XDCTL::ENABLE.is_set(value);
        for _ in 0..QUEUE_POLLS {
            if r::XDCTL::ENABLE.is_set(self.rd(reg)) == want {
                return Ok(());
            }
            self.platform.delay(QUEUE_STEP);
        }
        Err(Error::QueueTimeout { index })
    }

    /// Whether the device still holds the queue at `regs` over a ring of `len` bytes, or the
    /// critical fault that took it.
    fn queue_fault(&self, regs: &QueueRegs, len: u32) -> Option<QueueFault> {
        // STATUS (§8.2.2) has reserved bits that read 0: all-ones is no device answering (a
        // PCIe read of a removed function completes as Unsupported Request, returned as
        // all-ones data).
        if self.rd(r::STATUS) == u32::MAX {
            return Some(QueueFault::Removed);
        }
        // RDLEN/TDLEN (§8.9.x, §8.12.x) read 0 after any reset; the driver never opens a queue
        // of 0 bytes.
        if self.rd(regs.base[2]) != len {
            return Some(QueueFault::Reset);
        }
        // RXDCTL/TXDCTL.ENABLE (§8.9.10, §8.12.15): the driver set it and has not cleared it.
        if !r::XDCTL::ENABLE.is_set(self.rd(regs.ctl)) {
            return Some(QueueFault::Disabled);
        }
        None
    }

    /// Claims queue `index` in `open` (TX or RX bitmap) or says why not.
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

    fn release(&self, index: u16, tx: bool) {
        let mut st = self.state.lock();
        let open = if tx { &mut st.tx_open } else { &mut st.rx_open };
        *open &= !(1 << index);
    }

    /// Steers queue `index` to `vector` (or, for `None`, to its pair's default vector) and
    /// returns the vector and its wait handle.
    fn wire_interrupt(&self, index: u16, tx: bool, vector: Option<u16>) -> Result<(u16, P::Wait)> {
        let vector = ringfab_ring::pick_vector(index, vector, self.vectors)?;
        let wait = self.platform.irq(vector)?;
        let _st = self.state.lock();
        let reg = r::ivar(index & 7);
        let shift = r::ivar_shift(index, tx);
        let entry = r::IVAR_ENTRY::VALID::SET + r::IVAR_ENTRY::VECTOR.val(vector as u8);
        self.wr(
            reg,
            self.rd(reg) & !(0xFF << shift) | u32::from(entry.value) << shift,
        );
        Ok((vector, wait))
    }

    fn unwire_interrupt(&self, index: u16, tx: bool) {
        let _st = self.state.lock();
        let reg = r::ivar(index & 7);
        self.wr(reg, self.rd(reg) & !(0xFF << r::ivar_shift(index, tx)));
    }

    /// Counts one queue arming or disarming `vector`; writes EIMS/EIMC on the 0↔1 edges.
    fn arm(&self, vector: u16, armed: bool) {
        let mut st = self.state.lock();
        let count = &mut st.armed[usize::from(vector)];
        if armed {
            *count += 1;
            if *count == 1 {
                self.wr(r::EIMS, 1 << vector);
            }
        } else if *count > 0 {
            *count -= 1;
            if *count == 0 {
                self.wr(r::EIMC, 1 << vector);
            }
        }
    }
}

/// RCTL for a receive mode: receiver on, CRC stripped, long packets, the mode's filters.
fn rctl_for(mode: RxMode) -> u32 {
    let v = r::RCTL::EN::SET
        + r::RCTL::SECRC::SET
        + r::RCTL::LPE::SET
        + r::RCTL::UPE.val(mode.promiscuous.into())
        + r::RCTL::MPE.val(mode.all_multicast.into())
        + r::RCTL::BAM.val(mode.broadcast.into());
    v.value
}

/// VMOLR's reset value (**QEMU** igb_mac_reg_init: RLPML 0x2600, STRCRC).
const VMOLR_RESET: u32 = r::VMOLR::RLPML.val(0x2600).value | r::VMOLR::STRCRC::SET.value;

/// VMOLR of pool `pool` in VMDq mode: frames up to [`MAX_FRAME_LEN`], untagged frames
/// accepted, CRC stripped (as RCTL.SECRC); pool 0 also carries `mode`'s broadcast and
/// multicast choices.
fn vmolr_for(pool: usize, mode: RxMode) -> u32 {
    let mut v = r::VMOLR::RLPML.val((MAX_FRAME_LEN + 4) as u32)
        + r::VMOLR::LPE::SET
        + r::VMOLR::AUPE::SET
        + r::VMOLR::STRCRC::SET;
    if pool == 0 {
        v += r::VMOLR::BAM.val(mode.broadcast.into())
            + r::VMOLR::ROMPE.val(mode.all_multicast.into())
            + r::VMOLR::MPME.val(mode.all_multicast.into());
    }
    v.value
}

/// Names of the 82576 receive error bits (advanced write-back, §7.1.5.2).
const RX_ERROR_NAMES: [(u32, &str); 9] = [
    (23, "header buffer overflow"),
    (24, "CRC error"),
    (25, "symbol error"),
    (26, "sequence error"),
    (27, "security (LinkSec) error"),
    (28, "carrier extension / security error"),
    (29, "TCP/UDP checksum error"),
    (30, "IPv4 checksum error"),
    (31, "receive data error"),
];

impl<P: Platform> Nic for Igb<P> {
    type Wait = P::Wait;
    type Dma = P::Dma;
    type Mapping = P::Mapping;
    type Tx<'a, const N: usize>
        = IgbTx<'a, P, N>
    where
        Self: 'a;
    type Rx<'a, const N: usize>
        = IgbRx<'a, P, N>
    where
        Self: 'a;

    fn capabilities(&self) -> Capabilities {
        let mut rss = RssCaps::default();
        rss.table_len = r::RETA_ENTRIES;
        rss.key_len = r::RSS_KEY_LEN;
        rss.hashes = RssHashes::ALL_IPV4;
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
        caps.rx_mac_queues = r::VM_POOLS;
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
            // 10b, and 11b, which the datasheet also reads as 1000 Mb/s.
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
        let (mode, macs, rss) = {
            let mut st = self.state.lock();
            if self.rd(r::STATUS) == u32::MAX {
                return Err(Error::DeviceRemoved);
            }
            // The driver keeps TCTL.EN and RCTL.EN set from bring-up on; both are 0 after any
            // reset (§8.9.1, §8.12.1). With them set only queues were lost: nothing to do.
            if r::TCTL::EN.is_set(self.rd(r::TCTL)) && r::RCTL::EN.is_set(self.rd(r::RCTL)) {
                return Ok(());
            }
            let kept = (st.mode, st.rx_macs, st.rss_saved);
            self.bring_up(&mut st)?;
            kept
        };
        // What the application configured outside the queues, programmed again the way it
        // was programmed first.
        self.set_rx_mode(mode)?;
        for (queue, mac) in macs.iter().enumerate() {
            if let Some(mac) = mac {
                self.set_rx_queue_mac(queue as u16, Some(*mac))?;
            }
        }
        if let Some(rss) = rss {
            self.set_rss(&rss.config())?;
        }
        Ok(())
    }

    fn open_tx<const N: usize>(&self, index: u16, config: TxConfig) -> Result<IgbTx<'_, P, N>> {
        IgbTx::open_tx(IgbQueue::new(self, index, true), config)
    }

    fn open_rx<const N: usize>(&self, index: u16, config: RxConfig) -> Result<IgbRx<'_, P, N>> {
        IgbRx::open_rx(IgbQueue::new(self, index, false), config)
    }

    fn set_rss(&self, rss: &RssConfig<'_>) -> Result {
        if rss.key.len() != r::RSS_KEY_LEN
            || rss.table.len() != r::RETA_ENTRIES
            || rss.table.iter().any(|&q| q >= r::QUEUES)
        {
            return Err(Error::RssConfig);
        }
        let mut st = self.state.lock();
        // QEMU runs no RSS in VMDq mode (MRQC bit 0 set); the two exclude each other.
        if Self::vmdq(&st) {
            return Err(Error::Unsupported);
        }
        // Key byte 4i+j is byte j (little-endian) of RSSRK[i] (§8.9.25; QEMU hashes with
        // `(uint8_t *)&mac[RSSRK]`).
        for (i, k) in rss.key.chunks_exact(4).enumerate() {
            self.wr(r::rssrk(i), u32::from_le_bytes([k[0], k[1], k[2], k[3]]));
        }
        // Entry 4i+j is byte j of RETA[i]; the byte holds the queue number (QEMU uses its low
        // four bits, as does the 82576 in RSS-only mode).
        for (i, e) in rss.table.chunks_exact(4).enumerate() {
            self.wr(
                r::reta(i),
                u32::from_le_bytes([e[0] as u8, e[1] as u8, e[2] as u8, e[3] as u8]),
            );
        }
        let h = rss.hashes;
        let hashing = h.ipv4 || h.ipv4_udp || h.ipv4_tcp;
        let mrqc = if hashing {
            r::MRQC::MRQE::Rss
                + r::MRQC::IPV4.val(h.ipv4.into())
                + r::MRQC::UDP_IPV4.val(h.ipv4_udp.into())
                + r::MRQC::TCP_IPV4.val(h.ipv4_tcp.into())
        } else {
            r::MRQC::MRQE::CLEAR
        };
        self.wr(r::MRQC, mrqc.value);
        st.rss = hashing;
        st.rss_saved = RssSaved::of(rss);
        Ok(())
    }

    fn set_rx_mode(&self, mode: RxMode) -> Result {
        let mut st = self.state.lock();
        st.mode = mode;
        self.wr(r::RCTL, rctl_for(mode));
        if Self::vmdq(&st) {
            self.program_vmdq_mode(mode);
        }
        Ok(())
    }

    /// VMDq (§7.10.3): queue `q` (1..8) is pool `q`, reached through receive-address entry `q`
    /// (RAL/RAH `q` = address, AV, POOLSEL bit `q`); entries 1..=7 are reserved for this, entry
    /// 0 keeps the station address in pool 0. The first address switches the device into VMDq
    /// mode, removing the last one switches it back (RSS off, every accepted frame to queue 0).
    /// A frame to a queue's address goes to that queue only; if the queue is closed it is
    /// dropped (QEMU).
    fn set_rx_queue_mac(&self, queue: u16, mac: Option<MacAddr>) -> Result {
        if queue == 0 || queue >= r::VM_POOLS {
            return Err(Error::QueueIndex {
                index: queue,
                count: r::VM_POOLS,
            });
        }
        let mut st = self.state.lock();
        if st.rss {
            return Err(Error::Unsupported);
        }
        let q = usize::from(queue);
        let Some(mac) = mac else {
            if st.rx_macs[q].take().is_some() {
                self.wr(r::rah(q), 0);
                self.wr(r::ral(q), 0);
                if !Self::vmdq(&st) {
                    self.leave_vmdq();
                }
            }
            return Ok(());
        };
        let taken = st
            .rx_macs
            .iter()
            .enumerate()
            .any(|(i, a)| i != q && *a == Some(mac));
        if mac.is_multicast() || mac.0 == [0; 6] || mac == st.mac || taken {
            return Err(Error::RxMacAddress);
        }
        if !Self::vmdq(&st) {
            self.enter_vmdq(st.mode);
        }
        let m = mac.0;
        // Invalidate the entry while its address changes (AV last, §8.9.19).
        self.wr(r::rah(q), 0);
        self.wr(r::ral(q), u32::from_le_bytes([m[0], m[1], m[2], m[3]]));
        let rah = r::RAH::ADDR.val(u16::from_le_bytes([m[4], m[5]]).into())
            + r::RAH::POOLSEL.val(1 << q)
            + r::RAH::AV::SET;
        self.wr(r::rah(q), rah.value);
        st.rx_macs[q] = Some(mac);
        Ok(())
    }

    fn stats(&self) -> Stats {
        let mut st = self.state.lock();
        // Clear-on-read counters (§8.19); the low half of each 64-bit pair first.
        let rx_packets = u64::from(self.rd(r::GPRC));
        let tx_packets = u64::from(self.rd(r::GPTC));
        let rx_lo = u64::from(self.rd(r::GORCL));
        let rx_bytes = rx_lo | u64::from(self.rd(r::GORCH)) << 32;
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

/// The registers of one hardware queue (§8.9 receive, §8.12 transmit; same layout).
#[derive(Clone, Copy)]
struct QueueRegs {
    /// Descriptor base low, base high, length.
    base: [usize; 3],
    /// Descriptor head.
    head: usize,
    /// Descriptor tail.
    tail: usize,
    /// RXDCTL / TXDCTL.
    ctl: usize,
    /// The thresholds written to `ctl` with ENABLE.
    thresh: u32,
}

impl QueueRegs {
    fn new(index: u16, tx: bool) -> Self {
        if tx {
            QueueRegs {
                base: [r::tdbal(index), r::tdbah(index), r::tdlen(index)],
                head: r::tdh(index),
                tail: r::tdt(index),
                ctl: r::txdctl(index),
                thresh: r::TXDCTL_THRESH,
            }
        } else {
            QueueRegs {
                base: [r::rdbal(index), r::rdbah(index), r::rdlen(index)],
                head: r::rdh(index),
                tail: r::rdt(index),
                ctl: r::rxdctl(index),
                thresh: r::RXDCTL_THRESH,
            }
        }
    }
}

/// The 82576 half of one open queue ([`QueueHw`]): the queue's registers and enable bit, its
/// IVAR entry and per-vector arming, its receive buffer size in SRRCTL — what `ringfab-ring`'s
/// queue types ask of the device. The rest of a queue ([`IgbTx`], [`IgbRx`]) is
/// `ringfab-ring`'s.
pub struct IgbQueue<'a, P: Platform> {
    nic: &'a Igb<P>,
    index: u16,
    tx: bool,
    regs: QueueRegs,
    /// SRRCTL of a receive queue, settled by the claim.
    srrctl: u32,
}

impl<'a, P: Platform> IgbQueue<'a, P> {
    fn new(nic: &'a Igb<P>, index: u16, tx: bool) -> Self {
        IgbQueue {
            nic,
            index,
            tx,
            regs: QueueRegs::new(index, tx),
            srrctl: 0,
        }
    }

    /// Clears ENABLE and waits (bounded) for the queue to stop.
    fn stop(&self) -> Result {
        self.nic.set_queue_enable(self.regs.ctl, 0, self.index)
    }
}

impl<P: Platform> QueueHw for IgbQueue<'_, P> {
    type Format = Advanced;
    type Dma = P::Dma;
    type Wait = P::Wait;

    const MAX_TX_SEGMENTS: usize = MAX_TX_SEGMENTS;
    const MAX_FRAME_LEN: usize = MAX_FRAME_LEN;
    const DEVICE: &'static str = "82576";

    fn index(&self) -> u16 {
        self.index
    }

    /// A receive queue's buffer size is its own (SRRCTL.BSIZEPACKET, 1 KiB units), checked
    /// before the index is claimed.
    fn claim(&mut self, buf_len: u32) -> Result<u32> {
        let mut rounded = 0;
        if !self.tx {
            rounded = buf_len.div_ceil(r::SRRCTL_BSIZEPKT_UNIT) * r::SRRCTL_BSIZEPKT_UNIT;
            if buf_len == 0 || rounded > MAX_RX_BUF_LEN {
                return Err(Error::BufferSize {
                    len: buf_len,
                    max: MAX_RX_BUF_LEN,
                });
            }
            let srrctl = r::SRRCTL::BSIZEPACKET.val(rounded / r::SRRCTL_BSIZEPKT_UNIT)
                + r::SRRCTL::DESCTYPE::AdvOneBuf
                + r::SRRCTL::DROP_EN::SET;
            self.srrctl = srrctl.value;
        }
        self.nic.claim(self.index, self.tx)?;
        Ok(rounded)
    }

    fn release(&mut self) {
        self.nic.release(self.index, self.tx);
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

    fn arm(&self, vector: u16, armed: bool) {
        self.nic.arm(vector, armed);
    }

    #[inline]
    fn write_tail(&self, tail: u32) {
        self.nic.wr(self.regs.tail, tail);
    }

    /// Clears ENABLE and waits (bounded) for it to read back clear — the 82576's
    /// acknowledgement that the queue stopped: the device clears the bit only once the queue
    /// has finished its outstanding descriptor work (RXDCTL §8.9.10, TXDCTL §8.12.15) —
    /// then programs base, length, SRRCTL
    /// (receive), head = tail = the flushed ring's tail, and sets ENABLE with the thresholds,
    /// again waiting for the read-back. A stop not read back programs nothing.
    fn restart(&self, iova: Iova, len: u32, flush: impl FnOnce(bool) -> Option<u32>) -> Result {
        let (nic, regs) = (self.nic, &self.regs);
        let stopped = self.stop();
        let head = flush(stopped.is_ok());
        stopped?;
        let Some(head) = head else { return Ok(()) };
        nic.wr(regs.base[0], iova.0 as u32);
        nic.wr(regs.base[1], (iova.0 >> 32) as u32);
        nic.wr(regs.base[2], len);
        if !self.tx {
            nic.wr(r::srrctl(self.index), self.srrctl);
        }
        nic.wr(regs.head, head);
        nic.wr(regs.tail, head);
        let ctl = regs.thresh | r::XDCTL::ENABLE::SET.value;
        nic.set_queue_enable(regs.ctl, ctl, self.index)
    }

    fn shut(&self, removed: bool) {
        if !removed {
            let _ = self.stop();
        }
        self.nic.wr(self.regs.base[2], 0);
    }

    fn fault(&self, len: u32) -> Option<QueueFault> {
        self.nic.queue_fault(&self.regs, len)
    }
}

/// An open transmit queue of depth `N` (a power of two in [`MIN_DEPTH`]..=[`MAX_DEPTH`]):
/// `ringfab-ring`'s queue over the 82576's registers and advanced descriptors.
pub type IgbTx<'a, P, const N: usize> = IntelTx<IgbQueue<'a, P>, N>;

/// An open receive queue of depth `N`.
pub type IgbRx<'a, P, const N: usize> = IntelRx<IgbQueue<'a, P>, N>;

#[cfg(test)]
mod fake;

#[cfg(test)]
mod tests {
    extern crate std;
    use std::vec::Vec;

    use super::*;
    use crate::fake::{FakePlatform, Quirks, MAC};
    use ringfab_hal::{
        Queue, Report, RxBuffer, RxCompletion, RxError, RxQueue, Token, TxCompletion, TxError,
        TxQueue, TxSegment,
    };

    fn igb(vectors: u16) -> Igb<FakePlatform> {
        Igb::new(FakePlatform::new(vectors, Quirks::default())).unwrap()
    }

    fn dev(nic: &Igb<FakePlatform>) -> &fake::FakeDevice {
        &nic.platform().dev
    }

    #[test]
    fn bring_up_enables_pci_reads_mac_and_link_and_programs_the_mac() {
        let nic = igb(4);
        let cmd = nic.platform().command();
        assert_eq!(cmd & 0b110, 0b110, "memory space and bus master");
        let caps = nic.capabilities();
        assert_eq!(caps.mac, MacAddr(MAC));
        assert_eq!(
            (caps.tx_queues, caps.rx_queues, caps.max_frame_len),
            (16, 16, 9014)
        );
        assert!(caps.in_order_completion);
        assert_eq!(
            nic.link(),
            Link {
                up: true,
                speed_mbps: 1000,
                full_duplex: true
            }
        );
        let d = dev(&nic);
        // EN (1), BAM (15), SECRC (26), LPE (5).
        assert_eq!(d.peek(r::RCTL), 1 << 1 | 1 << 15 | 1 << 26 | 1 << 5);
        // EN (1), PSP (3), CT 0xF (11:4), COLD 0x3F (21:12).
        assert_eq!(d.peek(r::TCTL), 1 << 1 | 1 << 3 | 0xF << 4 | 0x3F << 12);
        assert!(r::GPIE::MSIX_MODE.is_set(d.peek(r::GPIE)));
        assert_eq!(d.peek(r::EIAC), 0b1111);
        assert_eq!(
            d.peek(r::RXCSUM),
            1 << 13 | 1 << 9 | 1 << 8,
            "PCSD, TUOFLD, IPOFLD"
        );
        assert_eq!(d.peek(r::RLPML), 9018);
        assert!(
            !r::XDCTL::ENABLE.is_set(d.peek(r::rxdctl(0))),
            "queue 0 is stopped until opened"
        );
        assert_eq!(d.peek(r::EIMS), 0, "all interrupts masked");
    }

    #[test]
    fn every_listed_pci_id_is_driven_and_brought_up() {
        for &(vendor, device) in PCI_IDS {
            assert!(drives(vendor, device));
            let id = u32::from(device) << 16 | u32::from(vendor);
            let p = FakePlatform::with_id(id, 4, Quirks::default());
            assert!(Igb::new(p).is_ok(), "{vendor:04x}:{device:04x}");
        }
        assert!(!drives(0x8086, 0x10D3), "the 82574 is e1000e's");
        assert!(
            !drives(0x1af4, 0x10C9),
            "Intel's device ids only under Intel's vendor id"
        );
    }

    #[test]
    fn other_devices_are_refused() {
        let p = FakePlatform::with_id(0x10D3_8086, 4, Quirks::default());
        assert_eq!(
            Igb::new(p).err(),
            Some(Error::UnsupportedDevice {
                vendor: 0x8086,
                device: 0x10D3
            })
        );
    }

    #[test]
    fn a_reset_that_never_clears_is_a_timeout() {
        let p = FakePlatform::new(
            4,
            Quirks {
                stuck_reset: true,
                ..Quirks::default()
            },
        );
        assert_eq!(Igb::new(p).err(), Some(Error::ResetTimeout));
    }

    #[test]
    fn no_link_is_not_an_error_and_the_wait_is_bounded() {
        let nic = Igb::new(FakePlatform::new(
            4,
            Quirks {
                no_link: true,
                ..Quirks::default()
            },
        ))
        .unwrap();
        assert_eq!(nic.link(), Link::default());
        let slept = *nic.platform().slept.lock().unwrap();
        assert!(
            slept >= Duration::from_secs(3) && slept < Duration::from_secs(4),
            "{slept:?}"
        );
    }

    #[test]
    fn open_validates_index_depth_use_and_buffer_size() {
        let nic = igb(4);
        assert_eq!(
            nic.open_tx::<64>(16, TxConfig::default()).err(),
            Some(Error::QueueIndex {
                index: 16,
                count: 16
            })
        );
        assert_eq!(
            nic.open_tx::<4>(0, TxConfig::default()).err(),
            Some(Error::QueueDepth {
                depth: 4,
                min: MIN_DEPTH,
                max: MAX_DEPTH
            })
        );
        assert!(matches!(
            nic.open_tx::<48>(0, TxConfig::default()),
            Err(Error::QueueDepth { .. })
        ));
        assert!(matches!(
            nic.open_rx::<8192>(0, RxConfig::new(2048)),
            Err(Error::QueueDepth { .. })
        ));
        assert_eq!(
            nic.open_rx::<64>(0, RxConfig::new(0)).err(),
            Some(Error::BufferSize {
                len: 0,
                max: MAX_RX_BUF_LEN
            })
        );
        assert!(matches!(
            nic.open_rx::<64>(0, RxConfig::new(MAX_RX_BUF_LEN + 1)),
            Err(Error::BufferSize { .. })
        ));
        let tx = nic.open_tx::<64>(3, TxConfig::default()).unwrap();
        assert_eq!(
            nic.open_tx::<64>(3, TxConfig::default()).err(),
            Some(Error::QueueInUse { index: 3 })
        );
        let rx = nic.open_rx::<64>(3, RxConfig::new(1500)).unwrap();
        assert_eq!(rx.buf_len(), 2048, "rounded up to SRRCTL's 1 KiB unit");
        assert_eq!(nic.reset(), Err(Error::QueuesOpen));
        drop(tx);
        drop(rx);
        assert!(
            nic.open_tx::<64>(3, TxConfig::default()).is_ok(),
            "index free again after drop"
        );
        assert_eq!(nic.reset(), Ok(()));
    }

    #[test]
    fn open_programs_the_ring_and_drop_stops_the_queue() {
        let nic = igb(4);
        let rx = nic.open_rx::<32>(5, RxConfig::new(2048)).unwrap();
        let d = dev(&nic);
        let iova = rx.ring_iova().0;
        assert_eq!(
            u64::from(d.peek(r::rdbal(5))) | u64::from(d.peek(r::rdbah(5))) << 32,
            iova
        );
        assert_eq!(d.peek(r::rdlen(5)), 32 * 16);
        // BSIZEPACKET 2 KiB, DESCTYPE 001b (27:25), Drop_En (31).
        assert_eq!(d.peek(r::srrctl(5)), 2 | 0b001 << 25 | 1 << 31);
        assert!(r::XDCTL::ENABLE.is_set(d.peek(r::rxdctl(5))));
        drop(rx);
        assert!(!r::XDCTL::ENABLE.is_set(d.peek(r::rxdctl(5))));
        assert_eq!(d.peek(r::rdlen(5)), 0);
    }

    #[test]
    fn a_queue_that_never_enables_is_a_timeout_and_frees_its_index() {
        let nic = Igb::new(FakePlatform::new(
            4,
            Quirks {
                stuck_enable: true,
                ..Quirks::default()
            },
        ))
        .unwrap();
        assert_eq!(
            nic.open_tx::<8>(1, TxConfig::default()).err(),
            Some(Error::QueueTimeout { index: 1 })
        );
        assert_eq!(nic.state.lock().tx_open, 0);
    }

    #[test]
    fn interrupt_needs_a_vector() {
        let nic = igb(0);
        assert_eq!(
            nic.open_rx::<8>(2, RxConfig::new(2048).with_interrupt(true))
                .err(),
            Some(Error::InterruptUnavailable { vector: 2 })
        );
        assert!(nic.open_rx::<8>(2, RxConfig::new(2048)).is_ok());
    }

    #[test]
    fn queue_pair_shares_a_vector_and_one_disarm_keeps_the_other_armed() {
        let nic = igb(2);
        let mut rx = nic
            .open_rx::<8>(3, RxConfig::new(2048).with_interrupt(true))
            .unwrap();
        let mut tx = nic.open_tx::<8>(3, TxConfig::with_interrupt(true)).unwrap();
        assert!(rx.interrupt().is_some() && tx.interrupt().is_some());
        let d = dev(&nic);
        // Queue 3 → vector 3 % 2 = 1; RX entry bits 7:0, TX entry bits 15:8 of IVAR3.
        assert_eq!(d.peek(r::ivar(3)), 0x8181);
        rx.set_interrupt(true);
        tx.set_interrupt(true);
        tx.set_interrupt(true);
        assert_eq!(d.peek(r::EIMS), 0b10);
        assert_eq!(
            d.take_writes(r::EIMS),
            [0b10],
            "written on the first arm only"
        );
        tx.set_interrupt(false);
        assert_eq!(d.peek(r::EIMS), 0b10, "RX still armed");
        rx.set_interrupt(false);
        assert_eq!(d.peek(r::EIMS), 0);
        rx.set_interrupt(true);
        drop(rx);
        assert_eq!(d.peek(r::EIMS), 0, "dropping an armed queue disarms");
        assert_eq!(
            d.peek(r::ivar(3)),
            0x8100,
            "RX entry cleared, TX entry kept"
        );
    }

    #[test]
    fn a_chosen_vector_steers_the_queue_there_and_an_absent_one_is_refused() {
        let nic = igb(4);
        assert_eq!(nic.irq_vectors(), 4);
        let rx = nic
            .open_rx::<8>(1, RxConfig::new(2048).with_vector(3))
            .unwrap();
        let tx = nic.open_tx::<8>(5, TxConfig::with_vector(3)).unwrap();
        assert_eq!(
            (rx.interrupt_vector(), tx.interrupt_vector()),
            (Some(3), Some(3))
        );
        let d = dev(&nic);
        // RX 1 → IVAR1 bits 7:0; TX 5 → IVAR5 bits 15:8; both vector 3, valid.
        assert_eq!(d.peek(r::ivar(1)) & 0xff, 0x83);
        assert_eq!(d.peek(r::ivar(5)) >> 8 & 0xff, 0x83);
        assert!(nic.irq(3).is_ok());
        assert_eq!(
            nic.irq(4).err(),
            Some(Error::InterruptUnavailable { vector: 4 })
        );
        assert_eq!(
            nic.open_tx::<8>(2, TxConfig::with_vector(4)).err(),
            Some(Error::InterruptUnavailable { vector: 4 })
        );
        assert_eq!(
            nic.state.lock().tx_open,
            1 << 5,
            "the refused queue is free again"
        );
        let plain = nic.open_tx::<8>(2, TxConfig::default()).unwrap();
        assert_eq!(plain.interrupt_vector(), None);
    }

    #[test]
    fn rss_is_validated_then_programmed() {
        let nic = igb(4);
        let key: Vec<u8> = (0..40).collect();
        let mut table = [0u16; 128];
        table
            .iter_mut()
            .enumerate()
            .for_each(|(i, e)| *e = (i % 4) as u16);
        let cfg = RssConfig {
            key: &key,
            table: &table,
            hashes: RssHashes::ALL_IPV4,
        };
        assert_eq!(
            nic.set_rss(&RssConfig {
                key: &key[..39],
                ..cfg
            }),
            Err(Error::RssConfig)
        );
        assert_eq!(
            nic.set_rss(&RssConfig {
                table: &table[..64],
                ..cfg
            }),
            Err(Error::RssConfig)
        );
        let mut bad = table;
        bad[7] = 16;
        assert_eq!(
            nic.set_rss(&RssConfig { table: &bad, ..cfg }),
            Err(Error::RssConfig)
        );
        nic.set_rss(&cfg).unwrap();
        let d = dev(&nic);
        assert_eq!(d.peek(r::rssrk(0)), 0x0302_0100);
        assert_eq!(d.peek(r::rssrk(9)), 0x2726_2524);
        assert_eq!(d.peek(r::reta(0)), 0x0302_0100);
        assert_eq!(d.peek(r::MRQC), 0x0043_0002);
    }

    #[test]
    fn a_queue_address_programs_vmdq_and_removing_the_last_one_undoes_it() {
        let nic = igb(4);
        let d = dev(&nic);
        let mac = MacAddr([0x02, 0x11, 0x22, 0x33, 0x44, 0x55]);
        nic.set_rx_queue_mac(3, Some(mac)).unwrap();
        assert_eq!(d.peek(r::MRQC), 0b011, "MRQE = VMDq");
        assert_eq!(d.peek(r::ral(3)), 0x3322_1102);
        assert_eq!(d.peek(r::rah(3)), 1 << 31 | 1 << (18 + 3) | 0x5544);
        assert_eq!(d.peek(r::RAH0) >> 18 & 0xFF, 1, "station address in pool 0");
        assert_eq!(d.peek(r::VFRE), 0xFF);
        assert_eq!(
            d.peek(r::VT_CTL),
            1 << 29,
            "default pool 0, disabled (not promiscuous)"
        );
        let long = (MAX_FRAME_LEN + 4) as u32 | 1 << 16 | 1 << 24 | 1 << 31;
        assert_eq!(
            d.peek(r::vmolr(0)),
            long | 1 << 27,
            "pool 0 takes broadcast"
        );
        assert_eq!(d.peek(r::vmolr(7)), long);
        assert_eq!(d.peek(r::mta(0)), 0);
        nic.set_rx_mode(RxMode::PROMISCUOUS).unwrap();
        assert_eq!(d.peek(r::VT_CTL), 0, "default pool 0 enabled");
        assert_eq!(d.peek(r::vmolr(0)), long | 1 << 27 | 1 << 25 | 1 << 28);
        assert_eq!(d.peek(r::mta(127)), u32::MAX);
        nic.set_rx_queue_mac(3, None).unwrap();
        assert_eq!(
            (d.peek(r::MRQC), d.peek(r::rah(3)), d.peek(r::VT_CTL)),
            (0, 0, 0)
        );
        assert_eq!(d.peek(r::RAH0) >> 18 & 0xFF, 0);
        assert_eq!(d.peek(r::vmolr(0)), 0x2600 | 1 << 31);
        assert_eq!(d.peek(r::mta(127)), 0);
    }

    #[test]
    fn rx_mode_sets_filter_bits() {
        let nic = igb(4);
        nic.set_rx_mode(RxMode::PROMISCUOUS).unwrap();
        let rctl = r::reg::<r::RCTL::Register>(dev(&nic).peek(r::RCTL));
        assert!(
            rctl.is_set(r::RCTL::UPE) && rctl.is_set(r::RCTL::MPE) && rctl.is_set(r::RCTL::BAM)
        );
    }

    #[test]
    fn stats_accumulate_clear_on_read_counters() {
        let nic = igb(4);
        let d = dev(&nic);
        d.poke(r::GPRC, 3);
        d.poke(r::GORCL, 0xFFFF_FFFF);
        d.poke(r::GORCH, 1);
        let s = nic.stats();
        assert_eq!((s.rx_packets, s.rx_bytes), (3, 0x1_FFFF_FFFF));
        d.poke(r::GPRC, 2);
        d.poke(r::GPTC, 1);
        let s = nic.stats();
        assert_eq!(
            (s.rx_packets, s.tx_packets, s.rx_bytes),
            (5, 1, 0x1_FFFF_FFFF)
        );
    }

    #[test]
    fn rx_error_bits_have_names() {
        let nic = igb(1);
        assert_eq!(nic.rx_error_name(30), Some("IPv4 checksum error"));
        assert_eq!(nic.rx_error_name(0), None);
    }

    #[test]
    fn doorbell_writes_the_tail_once_per_batch() {
        let nic = igb(1);
        let mut tx = nic.open_tx::<16>(0, TxConfig::default()).unwrap();
        let d = dev(&nic);
        d.take_writes(r::tdt(0));
        tx.doorbell();
        assert!(
            d.take_writes(r::tdt(0)).is_empty(),
            "nothing pushed, nothing written"
        );
        let seg = TxSegment {
            iova: Iova(0x4000),
            len: 60,
        };
        for t in 0..5 {
            tx.push(&[seg], Token(t), Report::ErrorsOnly).unwrap();
        }
        tx.doorbell();
        tx.doorbell();
        assert_eq!(d.take_writes(r::tdt(0)), [5]);
    }

    #[test]
    fn flush_returns_every_token_and_restarts_the_queue_at_the_tail() {
        let nic = igb(1);
        let mut tx = nic.open_tx::<16>(1, TxConfig::default()).unwrap();
        let mut rx = nic.open_rx::<16>(1, RxConfig::new(2048)).unwrap();
        let seg = TxSegment {
            iova: Iova(0x4000),
            len: 60,
        };
        for t in 0..3 {
            tx.push(&[seg], Token(t), Report::Always).unwrap();
            rx.push(
                RxBuffer {
                    iova: Iova(0x8000),
                    len: 2048,
                },
                Token(t),
            )
            .unwrap();
        }
        tx.doorbell();
        rx.doorbell();
        tx.flush();
        rx.flush();
        let d = dev(&nic);
        assert_eq!((d.peek(r::tdh(1)), d.peek(r::tdt(1))), (3, 3));
        assert_eq!((d.peek(r::rdh(1)), d.peek(r::rdt(1))), (3, 3));
        assert!(r::XDCTL::ENABLE.is_set(d.peek(r::txdctl(1))));
        let mut out = [TxCompletion {
            token: Token(9),
            status: Ok(()),
        }; 8];
        assert_eq!(tx.poll(&mut out), 3);
        assert!(out[..3].iter().all(|c| c.status == Err(TxError::Flushed)));
        let mut out = [RxCompletion {
            token: Token(9),
            len: 0,
            status: Ok(()),
            rss: None,
            checksum: ringfab_hal::RxChecksum::NONE,
        }; 8];
        assert_eq!(rx.poll(&mut out), 3);
        assert!(out[..3].iter().all(|c| c.status == Err(RxError::Flushed)));
        assert_eq!(
            (tx.pending(), rx.pending(), tx.free(), rx.free()),
            (0, 0, 15, 15)
        );
    }
}
