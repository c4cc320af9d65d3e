//! The 82574 register file, PHY, link, reset and MSI-X interrupt logic (QEMU `e1000e_core.c`).
//!
//! One `E1000eModel` lives behind the device mutex. DMA goes through the shared [`Engine`]
//! (IOMMU and device faults); the DMA engine proper is in `queues.rs`.
//!
//! MSI-X is always enabled: a VFIO platform enables it when it wires vectors, which is the only
//! way ringfab drives the device, so the legacy/MSI interrupt paths and their delay timers
//! (RDTR, RADV, TIDV, TADV, ITR) — QEMU uses them only without MSI-X — are not modelled.

use ringfab_hal::{MacAddr, Wait};

use super::regs::*;
use crate::device::Model;
use crate::engine::Engine;
use crate::fault::{CriticalFault, Ring};
use crate::iommu::Iommu;
use crate::pci::PciConfig;
use crate::wait::EmuWait;

const WORDS: usize = BAR0_LEN / 4;
/// PHY pages QEMU implements (`E1000E_PHY_PAGES`).
const PHY_PAGES: usize = 7;

/// Readable (`r`) and writable (`w`) PHY registers per page, and whether a register is the same
/// on every page (QEMU `e1000e_phy_regcap`): `(page, reg, r, w, any_page)`.
const PHY_CAPS: [(usize, usize, bool, bool, bool); 30] = [
    (0, 0x00, true, true, true),
    (0, 0x01, true, false, true),
    (0, 0x02, true, false, true),
    (0, 0x03, true, false, true),
    (0, 0x04, true, true, true),
    (0, 0x05, true, false, true),
    (0, 0x06, true, false, true),
    (0, 0x07, true, true, true),
    (0, 0x08, true, false, true),
    (0, 0x09, true, true, true),
    (0, 0x0a, true, false, true),
    (0, 0x0f, true, false, true),
    (0, PHY_PAGE, true, true, true),
    (0, 0x10, true, true, false),
    (0, 0x11, true, false, false),
    (0, 0x14, true, true, false),
    (0, 0x15, true, false, false),
    (0, PHY_OEM_BITS, true, true, false),
    (0, 0x1d, true, true, false),
    (0, 0x1e, true, true, false),
    (0, 0x12, true, true, false),
    (0, 0x13, true, false, false),
    (0, 0x1a, true, true, false),
    (2, 0x10, true, true, false),
    (2, 0x12, true, true, false),
    (2, 0x13, true, false, false),
    (2, 0x15, true, true, false),
    (3, 0x10, true, true, false),
    (5, 0x14, true, false, false),
    (6, 0x11, true, false, false),
];

pub(crate) struct E1000eModel {
    pub(crate) regs: Box<[u32]>,
    phy: [[u16; 32]; PHY_PAGES],
    mac: MacAddr,
    pub(crate) pci: PciConfig,
    /// Emulated time in nanoseconds; advanced only by `Platform::delay` and `advance_clock`.
    now_ns: u64,
    autoneg_due: Option<u64>,
    cable: bool,
    /// Per MSI-X vector: when its EITR throttling timer expires, if running.
    eitr_due: [Option<u64>; MSIX_VECTORS as usize],
    /// ITR/EITR as the driver wrote them (QEMU reads back the guest value, not the clamped one).
    eitr_guest: [u32; MSIX_VECTORS as usize],
    pub(crate) engine: Engine,
    vectors: Vec<EmuWait>,
    pub(crate) outbox: Vec<Vec<u8>>,
    /// Per transmit queue, the TCP/UDP checksum the last context descriptor described
    /// (TUCSS, TUCSO, TUCSE; QEMU keeps `tx[i].props` per queue in the same way): used by
    /// every later frame whose first data descriptor has POPTS.TXSM.
    pub(crate) tx_csum: [Option<TxCsum>; QUEUES],
}

/// A TCP/IP context descriptor's TCP/UDP checksum fields (datasheet 7.2.10.2).
#[derive(Clone, Copy, Debug)]
pub(crate) struct TxCsum {
    /// TUCSS: first byte summed.
    pub(crate) start: usize,
    /// TUCSO: where the checksum goes.
    pub(crate) field: usize,
    /// TUCSE: last byte summed (0: the frame's end).
    pub(crate) end: usize,
}

impl E1000eModel {
    pub(crate) fn new(
        mac: MacAddr,
        bus_master: bool,
        cable: bool,
        iommu: Iommu,
        vectors: Vec<EmuWait>,
    ) -> E1000eModel {
        let mut m = E1000eModel {
            regs: vec![0; WORDS].into_boxed_slice(),
            phy: [[0; 32]; PHY_PAGES],
            mac,
            pci: PciConfig::new(bus_master, &super::pci::LAYOUT),
            now_ns: 0,
            autoneg_due: None,
            cable,
            eitr_due: [None; MSIX_VECTORS as usize],
            eitr_guest: [0; MSIX_VECTORS as usize],
            engine: Engine::new(iommu),
            vectors,
            outbox: Vec::new(),
            tx_csum: [None; QUEUES],
        };
        m.reset(false);
        // QEMU resumes autonegotiation when the VM starts (e1000e_autoneg_resume): 500 ms of
        // virtual time after power-on it completes and raises LSC.
        if m.phy[0][PHY_BMCR] & BMCR_AUTOEN != 0 {
            m.autoneg_due = Some(AUTONEG_NS);
        }
        m
    }

    pub(crate) fn r(&self, off: usize) -> u32 {
        self.regs[off / 4]
    }

    pub(crate) fn w(&mut self, off: usize, v: u32) {
        self.regs[off / 4] = v;
    }

    pub(crate) fn or(&mut self, off: usize, bits: u32) {
        self.regs[off / 4] |= bits;
    }

    fn clear(&mut self, off: usize, bits: u32) {
        self.regs[off / 4] &= !bits;
    }

    pub(crate) fn link_up(&self) -> bool {
        self.r(STATUS) & STATUS_LU != 0
    }

    /// Device reset (QEMU `e1000e_reset`): every register to its power-on value — a software
    /// reset keeps PBA and PBS —, PHY to defaults, autonegotiation and interrupt timers stopped,
    /// MAC reloaded into RAL0/RAH0. STATUS.LU comes out of reset **set** (QEMU
    /// `e1000e_mac_reg_init`) unless the cable is out: the link reads up until software restarts
    /// autonegotiation.
    pub(crate) fn reset(&mut self, software: bool) {
        let keep = [(PBA, self.r(PBA)), (PBS, self.r(PBS))];
        self.regs.fill(0);
        self.tx_csum = [None; QUEUES];
        self.w(PBA, 0x0014_0014);
        self.w(PBS, 0x028);
        if software {
            for (off, v) in keep {
                self.w(off, v);
            }
        }
        self.w(
            CTRL,
            CTRL_FD | CTRL_SWDPIN2 | CTRL_SWDPIN0 | CTRL_SPD_1000 | CTRL_SLU | CTRL_ADVD3WUC,
        );
        self.w(CTRL_DUP, self.r(CTRL));
        self.w(STATUS, STATUS_ASDV_1000 | STATUS_LU);
        self.w(EECD, 0x0300);
        self.w(EERD, EERD_DONE);
        self.w(rxq(0, Q_DCTL), 1 << 16);
        self.w(rxq(1, Q_DCTL), 1 << 16);
        self.w(TIPG, 0x8 | 0x8 << 10 | 0x6 << 20);
        self.w(txq(0, Q_TARC), 0x3 | TARC_ENABLE);
        self.w(txq(1, Q_TARC), 0x3 | TARC_ENABLE);
        self.w(RXCSUM, RXCSUM_IPOFLD | RXCSUM_TUOFLD);
        self.w(ITR, MIN_XITR);
        // EITR resets to 0, throttling off (datasheet §7.4.4; §10.2.4.2: an interval of 0
        // disables it), not to QEMU's 500: a driver that never programs EITR is not throttled.
        self.eitr_guest = [0; MSIX_VECTORS as usize];
        self.eitr_due = [None; MSIX_VECTORS as usize];
        self.phy = [[0; 32]; PHY_PAGES];
        let p = &mut self.phy[0];
        p[PHY_BMCR] = 0x1140; // 1000 Mb/s, full duplex, autonegotiation enabled
        p[PHY_BMSR] = 0x794d;
        p[2] = 0x0141;
        p[3] = 0x0cb1; // E1000_PHY_ID2_82574x
        p[4] = 0x0de1;
        p[PHY_ANLPAR] = 0x07e0;
        p[6] = 0x0005;
        p[7] = 0x2001;
        p[9] = 0x0f00;
        p[10] = 0x3c00;
        p[15] = 0x3000;
        p[0x10] = 1 << 5 | 1 << 6 | 1 << 8 | 1 << 9 | 1 << 12 | 1 << 13;
        p[0x11] = 1 << 3 | 1 << 10 | 1 << 11 | 1 << 13 | 1 << 15;
        self.phy[2][0x10] = 1 << 3 | 1 << 7;
        self.phy[2][0x15] = 1 << 1 | 1 << 2 | 1 << 6 | 1 << 12;
        self.phy[3][0x12] = 1 << 0 | 1 << 2 | 1 << 14;
        self.autoneg_due = None;
        if !self.cable {
            self.link_down_regs();
        }
        let m = self.mac.0;
        self.w(RA, u32::from_le_bytes([m[0], m[1], m[2], m[3]]));
        self.w(RA + 4, u32::from(m[4]) | u32::from(m[5]) << 8 | RAH_AV);
        self.engine.clear_delayed();
    }

    fn eeprom(&self, word: u32) -> u16 {
        let m = self.mac.0;
        let id = super::pci::DEVICE_82574L;
        match word {
            0..=2 => u16::from_le_bytes([m[2 * word as usize], m[2 * word as usize + 1]]),
            11 | 13 => id,
            0x3f => {
                let sum = (0..3).fold(0u16, |a, w| a.wrapping_add(self.eeprom(w)));
                0xbaba_u16.wrapping_sub(sum.wrapping_add(2 * id))
            }
            _ => 0,
        }
    }

    // ---- link (e1000x_update_regs_on_link_down/up, e1000e_autoneg_timer) ----

    fn link_down_regs(&mut self) {
        self.clear(STATUS, STATUS_LU);
        let p = &mut self.phy[0];
        p[PHY_BMSR] &= !(BMSR_LINK_ST | BMSR_AN_COMP);
        p[PHY_ANLPAR] &= !ANLPAR_ACK;
    }

    fn restart_autoneg(&mut self) {
        self.link_down_regs();
        self.autoneg_due = Some(self.now_ns + AUTONEG_NS);
    }

    /// Advances emulated time: completes autonegotiation whose 500 ms have passed and fires the
    /// EITR throttling timers that expired.
    fn advance(&mut self, ns: u64) {
        self.now_ns = self.now_ns.saturating_add(ns);
        if self.autoneg_due.is_some_and(|due| due <= self.now_ns) {
            self.autoneg_due = None;
            if self.cable {
                self.or(STATUS, STATUS_LU);
                let p = &mut self.phy[0];
                p[PHY_BMSR] |= BMSR_LINK_ST | BMSR_AN_COMP;
                p[PHY_ANLPAR] |= ANLPAR_ACK;
                if p[PHY_BMCR] & BMCR_AUTOEN != 0 {
                    self.or(CTRL, CTRL_RFCE | CTRL_TFCE);
                }
                self.raise(ICR, ICR_LSC);
            }
        }
        for v in 0..usize::from(MSIX_VECTORS) {
            if self.eitr_due[v].is_some_and(|due| due <= self.now_ns) {
                // e1000e_intrmgr_on_msix_throttling_timer: the vector is notified when its
                // timer expires, whether or not a cause was postponed meanwhile.
                self.eitr_due[v] = None;
                self.vectors[v].notify();
            }
        }
    }

    fn set_cable(&mut self, up: bool) {
        self.cable = up;
        let old = self.r(STATUS);
        if !up {
            self.link_down_regs();
        } else if self.phy[0][PHY_BMCR] & BMCR_AUTOEN != 0
            && self.phy[0][PHY_BMSR] & BMSR_AN_COMP == 0
        {
            self.restart_autoneg();
        } else {
            self.or(STATUS, STATUS_LU);
            self.phy[0][PHY_BMSR] |= BMSR_LINK_ST;
        }
        if self.r(STATUS) != old {
            self.raise(ICR, ICR_LSC);
        }
    }

    /// The page a PHY register access goes to, and whether it is allowed.
    fn phy_cap(&self, reg: usize, write: bool) -> Option<usize> {
        let any = PHY_CAPS.iter().any(|c| c.0 == 0 && c.1 == reg && c.4);
        let page = if any {
            0
        } else {
            usize::from(self.phy[0][PHY_PAGE])
        };
        PHY_CAPS
            .iter()
            .find(|c| c.0 == page && c.1 == reg)
            .filter(|c| if write { c.3 } else { c.2 })
            .map(|_| page)
    }

    fn mdic_write(&mut self, val: u32) {
        let data = (val & MDIC_DATA_MASK) as u16;
        let reg = ((val >> MDIC_REG_SHIFT) & 0x1f) as usize;
        let mut out = val;
        if (val >> MDIC_PHY_SHIFT) & 0x1f != PHY_ADDR {
            out = self.r(MDIC) | MDIC_ERROR;
        } else if val & MDIC_OP_READ != 0 {
            match self.phy_cap(reg, false) {
                Some(page) => out = (val & !MDIC_DATA_MASK) | u32::from(self.phy[page][reg]),
                None => out |= MDIC_ERROR,
            }
        } else if val & MDIC_OP_WRITE != 0 {
            match self.phy_cap(reg, true) {
                None => out |= MDIC_ERROR,
                Some(0) if reg == PHY_BMCR => {
                    // e1000e_set_phy_ctrl: bits 5:0 reserved, RESET and ANRESTART
                    // self-clearing; a restart needs autonegotiation enabled.
                    let p = &mut self.phy[0];
                    p[PHY_BMCR] = data & !(0x3f | BMCR_RESET | BMCR_ANRESTART);
                    if data & BMCR_ANRESTART != 0 && p[PHY_BMCR] & BMCR_AUTOEN != 0 {
                        self.restart_autoneg();
                    }
                }
                Some(0) if reg == PHY_PAGE => self.phy[0][PHY_PAGE] = data & 0x7f,
                Some(0) if reg == PHY_OEM_BITS => {
                    self.phy[0][PHY_OEM_BITS] = data & !(1 << 10);
                    if data & 1 << 10 != 0 {
                        self.restart_autoneg();
                    }
                }
                Some(page) => self.phy[page][reg] = data,
            }
        }
        // QEMU completes the access within the write: READY reads back at once.
        self.w(MDIC, out | MDIC_READY);
        if out & MDIC_INT_EN != 0 {
            self.raise(ICR, ICR_MDAC);
        }
    }

    // ---- interrupts (QEMU e1000e_raise_interrupts / e1000e_msix_notify) ----

    /// Sets `causes` in ICR (or IMS), then signals what became pending in ICR & IMS.
    pub(crate) fn raise(&mut self, index: usize, causes: u32) {
        let old = self.r(IMS) & self.r(ICR);
        self.or(index, causes);
        if self.r(ICR) & ICR_OTHER_CAUSES != 0 {
            self.or(ICR, ICR_OTHER);
        }
        self.clear(ICR, ICR_ASSERTED);
        if self.r(ICR) != 0 {
            self.or(ICR, ICR_ASSERTED);
        }
        self.w(ICS, self.r(ICR));
        let raised = self.r(IMS) & self.r(ICR) & !old & !ICR_ASSERTED;
        // Queue causes in IVAR order, then OTHER (e1000e_msix_notify).
        for (cause, shift) in [
            (ICR_RXQ0, 0),
            (ICR_RXQ1, 4),
            (ICR_TXQ0, 8),
            (ICR_TXQ1, 12),
            (ICR_OTHER, 16),
        ] {
            if raised & cause != 0 {
                let entry = (self.r(IVAR) >> shift) & 0xf;
                self.notify_one(cause, entry);
            }
        }
    }

    fn lower(&mut self, index: usize, causes: u32) {
        self.clear(index, causes);
        self.w(ICS, self.r(ICR));
    }

    fn notify_one(&mut self, cause: u32, entry: u32) {
        if entry & IVAR_VALID != 0 {
            let v = (entry & IVAR_VEC_MASK) as usize;
            if v < usize::from(MSIX_VECTORS) && !self.eitr_postpone(v) {
                self.vectors[v].notify();
            }
        }
        if self.r(CTRL_EXT) & CTRL_EXT_EIAME != 0 {
            self.clear(IAM, cause);
        }
        let auto = self.r(EIAC) & cause;
        self.clear(ICR, auto);
        if self.r(CTRL_EXT) & CTRL_EXT_IAME == 0 {
            self.clear(IMS, auto);
        }
    }

    /// EITR throttling (e1000e_postpone_interrupt): while a vector's timer runs its messages
    /// are postponed to the timer's expiry; a message sent starts the timer when EITR is
    /// non-zero (§7.4.4: zero, the reset value, disables throttling), for at least 500 units
    /// (128 µs, QEMU's floor). The timer runs on emulated time: a postponed message waits for
    /// `Platform::delay` or `advance_clock` to pass its expiry.
    fn eitr_postpone(&mut self, v: usize) -> bool {
        if self.eitr_due[v].is_some() {
            return true;
        }
        let interval = u64::from(self.r(EITR0 + 4 * v));
        if interval != 0 {
            let interval = interval.max(u64::from(MIN_XITR));
            self.eitr_due[v] = Some(self.now_ns + interval * XITR_NS);
        }
        false
    }

    /// Causes a write-back on `ring` raises (MSI-X: the queue's own cause).
    pub(crate) fn queue_cause(ring: Ring) -> u32 {
        match ring {
            Ring::Rx(0) => ICR_RXQ0,
            Ring::Rx(_) => ICR_RXQ1,
            Ring::Tx(0) => ICR_TXQ0,
            Ring::Tx(_) => ICR_TXQ1,
        }
    }

    // ---- register access ----

    /// Maps the aliases QEMU implements onto the primary register (`mac_reg_access`).
    fn canonical(off: usize) -> usize {
        match off {
            0x0040..=0x00bc => RA + (off - 0x0040),
            0x0110..=0x0128 => RXQ_BASE + (off - 0x0110),
            0x0420..=0x0438 => TXQ_BASE + (off - 0x0420),
            _ => off,
        }
    }

    fn queue_reg(off: usize, base: usize) -> Option<(usize, usize)> {
        (base..base + QUEUES * Q_STRIDE)
            .contains(&off)
            .then(|| ((off - base) / Q_STRIDE, (off - base) % Q_STRIDE))
    }

    fn read(&mut self, off: usize) -> u32 {
        let off = Self::canonical(off);
        match off {
            STATUS => {
                // e1000e_get_status: GIO master enable follows CTRL, duplex and speed computed.
                let ctrl = self.r(CTRL);
                let mut s = self.r(STATUS) | STATUS_SPEED_1000;
                if ctrl & CTRL_GIO_MASTER_DISABLE == 0 {
                    s |= STATUS_GIO_MASTER_ENABLE;
                }
                if ctrl & CTRL_FRCDPX == 0 || ctrl & CTRL_FD != 0 {
                    s |= STATUS_FD;
                }
                s
            }
            ICR => {
                // e1000e_mac_icr_read (MSI-X enabled).
                let v = self.r(ICR);
                if self.r(IMS) == 0 {
                    self.lower(ICR, u32::MAX);
                }
                if self.r(ICR) & ICR_ASSERTED != 0 {
                    if self.r(CTRL_EXT) & CTRL_EXT_IAME != 0 {
                        self.lower(ICR, u32::MAX);
                        let iam = self.r(IAM);
                        self.lower(IMS, iam);
                    }
                    if self.r(ICR) & self.r(IMS) != 0 {
                        self.lower(ICR, u32::MAX);
                    }
                }
                v
            }
            ITR => self.eitr_guest[0],
            o if (EITR0..EITR0 + 4 * usize::from(MSIX_VECTORS)).contains(&o) => {
                self.eitr_guest[(o - EITR0) / 4]
            }
            o if o == txq(0, Q_TARC) || o == txq(1, Q_TARC) => {
                self.r(o) & (((1 << 11) - 1) | (0xf << 27))
            }
            // Clear on read (QEMU e1000e_mac_read_clr4). CRCERRS and MPC are clear-on-read on
            // the silicon; QEMU reads them plainly and never counts them — the model counts and
            // clears them.
            CRCERRS | MPC | GPRC | BPRC | MPRC | GPTC | RUC | ROC | TPR | TPT | MPTC | BPTC => {
                std::mem::take(&mut self.regs[off / 4])
            }
            // 64-bit counters: reading the high half clears both (e1000e_mac_read_clr8).
            GORCH | GOTCH | TORH | TOTH => {
                let v = self.r(off);
                self.w(off, 0);
                self.w(off - 4, 0);
                v
            }
            _ => self.r(off),
        }
    }

    fn write(&mut self, off: usize, val: u32) {
        let off = Self::canonical(off);
        match off {
            CTRL | CTRL_DUP => {
                self.w(CTRL, val & !CTRL_RST);
                self.w(CTRL_DUP, val & !CTRL_RST);
                if val & CTRL_RST != 0 {
                    self.reset(true);
                }
                if val & CTRL_PHY_RST != 0 {
                    self.or(STATUS, STATUS_PHYRA);
                }
            }
            STATUS => {
                if val & STATUS_PHYRA == 0 {
                    self.clear(STATUS, STATUS_PHYRA);
                }
            }
            EECD => {
                let ro = 0x0100 | 0x0200 | 0x7800;
                let v = (self.r(EECD) & ro) | (val & !ro);
                self.w(EECD, v);
            }
            EERD => {
                let addr = (val >> 2) & 0x3fff;
                let v = if val & EERD_START != 0 && addr < 64 {
                    EERD_DONE | addr << 2 | u32::from(self.eeprom(addr)) << 16
                } else {
                    addr << 2
                };
                self.w(EERD, v);
            }
            CTRL_EXT => self.w(CTRL_EXT, val & !(CTRL_EXT_ASDCHK | CTRL_EXT_EE_RST)),
            MDIC => self.mdic_write(val),
            VET => self.w(VET, val & 0xffff),
            ICS => self.raise(ICR, val),
            IMS => self.raise(IMS, val & IMS_VALID),
            IMC => self.lower(IMS, val),
            ICR => {
                // e1000e_set_icr.
                if self.r(ICR) & ICR_ASSERTED != 0 && self.r(CTRL_EXT) & CTRL_EXT_IAME != 0 {
                    let iam = self.r(IAM);
                    self.lower(IMS, iam);
                }
                let val = if val & ICR_OTHER != 0 {
                    val | ICR_OTHER_CAUSES
                } else {
                    val
                };
                self.lower(ICR, val);
            }
            ITR => {
                self.eitr_guest[0] = val & 0xffff;
                self.w(ITR, (val & 0xffff).max(MIN_XITR));
            }
            o if (EITR0..EITR0 + 4 * usize::from(MSIX_VECTORS)).contains(&o) => {
                // e1000e_set_eitr: the guest value reads back; 0 disables throttling
                // (§10.2.4.2), any other interval is used as at least 500 (`eitr_postpone`).
                self.eitr_guest[(o - EITR0) / 4] = val & 0xffff;
                self.w(o, val & 0xffff);
            }
            RCTL => {
                // A refused stop or start (`DeviceFault::RefuseStop`/`RefuseStart`, aimed at
                // either receive queue: the receiver is theirs together).
                let on = self.r(RCTL) & RCTL_EN != 0;
                let rx = |r| matches!(r, Ring::Rx(_));
                if on && val & RCTL_EN == 0 && self.engine.refuse(true, rx) {
                    return;
                }
                let val = if !on && val & RCTL_EN != 0 && self.engine.refuse(false, rx) {
                    val & !RCTL_EN
                } else {
                    val
                };
                // Clearing EN stops the receiver: write-backs held back for its rings are made
                // first (see `Engine::flush`).
                if self.r(RCTL) & RCTL_EN != 0 && val & RCTL_EN == 0 {
                    for n in 0..QUEUES as u16 {
                        self.engine.flush(Ring::Rx(n));
                    }
                }
                self.w(RCTL, val);
            }
            TCTL => {
                if self.r(TCTL) & TCTL_EN != 0 && val & TCTL_EN == 0 {
                    for n in 0..QUEUES as u16 {
                        self.engine.flush(Ring::Tx(n));
                    }
                }
                self.w(TCTL, val);
                // e1000e_set_tctl: both enabled queues are kicked.
                for n in 0..QUEUES {
                    if self.r(txq(n, Q_TARC)) & TARC_ENABLE != 0 {
                        self.transmit(n);
                    }
                }
            }
            RSRPD => self.w(RSRPD, val & 0xfff),
            _ => {
                if let Some((n, reg)) = Self::queue_reg(off, RXQ_BASE) {
                    self.write_rxq(n, reg, off, val);
                } else if let Some((n, reg)) = Self::queue_reg(off, TXQ_BASE) {
                    self.write_txq(n, reg, off, val);
                } else if off < BAR0_LEN {
                    // Anything else is a plain read/write register in the model.
                    self.w(off, val);
                }
            }
        }
    }

    fn write_rxq(&mut self, _n: usize, reg: usize, off: usize, val: u32) {
        match reg {
            // E1000_XDBAL_MASK: 16-byte aligned; E1000_XDLEN_MASK: bits 19:7.
            Q_DBAL => self.w(off, val & !0xf),
            Q_DLEN => self.w(off, val & 0xf_ff80),
            Q_DH | Q_DT => self.w(off, val & 0xffff),
            // e1000e_set_rxdctl: a write to either queue's RXDCTL sets both.
            Q_DCTL => {
                self.w(rxq(0, Q_DCTL), val);
                self.w(rxq(1, Q_DCTL), val);
            }
            _ => self.w(off, val),
        }
    }

    fn write_txq(&mut self, n: usize, reg: usize, off: usize, val: u32) {
        match reg {
            Q_DBAL => self.w(off, val & !0xf),
            Q_DLEN => self.w(off, val & 0xf_ff80),
            Q_DH => self.w(off, val & 0xffff),
            Q_DT => {
                self.w(off, val & 0xffff);
                // The doorbell: QEMU e1000e_set_tdt transmits synchronously from an enabled
                // queue.
                if self.r(txq(n, Q_TARC)) & TARC_ENABLE != 0 {
                    self.transmit(n);
                }
            }
            Q_TARC => {
                // A refused stop or start (`DeviceFault::RefuseStop`/`RefuseStart`).
                let on = self.r(off) & TARC_ENABLE != 0;
                let ring = Ring::Tx(n as u16);
                if on && val & TARC_ENABLE == 0 && self.engine.refuse(true, |r| r == ring) {
                    return;
                }
                let val =
                    if !on && val & TARC_ENABLE != 0 && self.engine.refuse(false, |r| r == ring) {
                        val & !TARC_ENABLE
                    } else {
                        val
                    };
                // Clearing the enable bit stops the queue; held-back write-backs land first.
                if self.r(off) & TARC_ENABLE != 0 && val & TARC_ENABLE == 0 {
                    self.engine.flush(Ring::Tx(n as u16));
                }
                self.w(off, val);
            }
            _ => self.w(off, val),
        }
    }
}

impl Model for E1000eModel {
    fn read(&mut self, off: usize) -> u32 {
        E1000eModel::read(self, off)
    }

    fn write(&mut self, off: usize, val: u32) {
        E1000eModel::write(self, off, val)
    }

    fn config_read(&self, off: u16) -> u32 {
        self.pci.read32(off)
    }

    fn config_write(&mut self, off: u16, val: u32) {
        self.pci.write32(off, val)
    }

    fn receive(&mut self, frame: &[u8], crc_ok: bool) {
        E1000eModel::receive(self, frame, crc_ok)
    }

    fn step(&mut self) -> bool {
        let (irqs, more) = self.engine.step();
        for irq in irqs {
            self.raise(ICR, irq.0);
        }
        more
    }

    fn advance(&mut self, ns: u64) {
        E1000eModel::advance(self, ns)
    }

    fn now_ns(&self) -> u64 {
        self.now_ns
    }

    fn mac(&self) -> MacAddr {
        self.mac
    }

    fn set_cable(&mut self, up: bool) {
        E1000eModel::set_cable(self, up)
    }

    fn engine(&mut self) -> &mut Engine {
        &mut self.engine
    }

    fn rings(&self) -> Vec<(u64, u64)> {
        E1000eModel::rings(self)
    }

    fn take_outbox(&mut self) -> Vec<Vec<u8>> {
        std::mem::take(&mut self.outbox)
    }
    fn critical(&mut self, fault: CriticalFault) {
        match fault {
            // A reset the driver did not ask for: power-on values, CTRL.RST never seen set.
            CriticalFault::Reset => self.reset(false),
            CriticalFault::DisableQueue(Ring::Tx(n)) => {
                let off = txq(usize::from(n), Q_TARC);
                let val = self.r(off) & !TARC_ENABLE;
                E1000eModel::write(self, off, val);
            }
            CriticalFault::DisableQueue(Ring::Rx(_)) => {
                let val = self.r(RCTL) & !RCTL_EN;
                E1000eModel::write(self, RCTL, val);
            }
            _ => {}
        }
    }
}
