//! The 82576 register file, PHY, link, reset and interrupt logic.
//!
//! One `IgbModel` lives behind the device mutex; every method runs with it held. DMA goes
//! through the [`Iommu`](crate::Iommu); frames the model transmits collect in `outbox` and
//! leave for the wire after the lock is released (see `device.rs`).

use ringfab_hal::{MacAddr, Wait};

use super::regs::*;
use crate::device::Model;
use crate::engine::Engine;
use crate::fault::{CriticalFault, Ring};
use crate::iommu::Iommu;
use crate::pci::PciConfig;
use crate::wait::EmuWait;

const WORDS: usize = BAR0_LEN / 4;

/// PHY registers QEMU implements, readable (`igb_phy_regcap`).
const PHY_READABLE: [usize; 17] = [
    0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 15, 0x10, 0x11, 0x12, 0x13, 0x19,
];
/// PHY registers QEMU implements, writable.
const PHY_WRITABLE: [usize; 8] = [0, 4, 7, 9, 0x10, 0x12, 0x19, 0x1f];

pub(crate) struct IgbModel {
    pub(crate) regs: Box<[u32]>,
    phy: [u16; 32],
    mac: MacAddr,
    pub(crate) pci: PciConfig,
    /// Emulated time in nanoseconds; advanced only by `Platform::delay` and `advance_clock`.
    now_ns: u64,
    autoneg_due: Option<u64>,
    /// Whether a link partner is present (tests force it with `set_link`).
    cable: bool,
    pub(crate) engine: Engine,
    pub(crate) vectors: Vec<EmuWait>,
    pub(crate) outbox: Vec<Vec<u8>>,
    /// Per transmit queue, the two context slots (IDX 0 and 1; QEMU `tx[i].ctx`): where the
    /// L4 header starts (MACLEN + IPLEN) and its checksum field's offset (by TUCMD.L4T), or
    /// `None` for an L4 type without one the model inserts (SCTP, reserved).
    pub(crate) tx_ctx: [[Option<(usize, usize)>; 2]; QUEUES],
}

impl IgbModel {
    pub(crate) fn new(
        mac: MacAddr,
        bus_master: bool,
        cable: bool,
        iommu: Iommu,
        vectors: Vec<EmuWait>,
    ) -> IgbModel {
        let mut m = IgbModel {
            regs: vec![0; WORDS].into_boxed_slice(),
            phy: [0; 32],
            mac,
            pci: PciConfig::new(bus_master, &super::pci::LAYOUT),
            now_ns: 0,
            autoneg_due: None,
            cable,
            engine: Engine::new(iommu),
            vectors,
            outbox: Vec::new(),
            tx_ctx: [[None; 2]; QUEUES],
        };
        m.reset(false);
        // QEMU starts autonegotiation when the VM starts running (igb_vm_state_change →
        // igb_autoneg_resume): at power-on the link comes up 500 ms of virtual time later.
        m.autoneg_due = Some(AUTONEG_NS);
        m
    }

    pub(crate) fn r(&self, off: usize) -> u32 {
        self.regs[off / 4]
    }

    pub(crate) fn w(&mut self, off: usize, v: u32) {
        self.regs[off / 4] = v;
    }

    fn or(&mut self, off: usize, bits: u32) {
        self.regs[off / 4] |= bits;
    }

    fn clear(&mut self, off: usize, bits: u32) {
        self.regs[off / 4] &= !bits;
    }

    pub(crate) fn link_up(&self) -> bool {
        self.r(STATUS) & STATUS_LU != 0
    }

    /// Device reset (QEMU `igb_reset`): every register to its power-on value, except that a
    /// software reset (CTRL.RST) keeps RXPBS, TXPBS and EITR; PHY to defaults, autonegotiation
    /// cancelled (so the link is down until the driver restarts it), MAC reloaded into RAL0/RAH0.
    pub(crate) fn reset(&mut self, software: bool) {
        let keep_rxpbs = self.r(RXPBS);
        let keep_txpbs = self.r(TXPBS);
        let keep_eitr: Vec<u32> = (0..25).map(|v| self.r(EITR0 + 4 * v)).collect();
        self.regs.fill(0);
        self.tx_ctx = [[None; 2]; QUEUES];
        self.w(CTRL, CTRL_FD | CTRL_LRST | CTRL_SPD_1000 | CTRL_ADVD3WUC);
        self.w(CTRL_DUP, self.r(CTRL));
        self.w(STATUS, STATUS_PHYRA | 1 << 31);
        self.w(EECD, 0x1110);
        self.w(RXCSUM, 0x300);
        self.w(RXPBS, 0x40);
        self.w(TXPBS, 0x28);
        self.w(TCTL, 0xa404_00f8);
        self.w(TCTL_EXT, 0x40 | 0x42 << 10);
        self.w(TIPG, 0x08 | 0x04 << 10 | 0x06 << 20);
        self.w(VET, 0x8100_8100);
        self.w(RLPML, 0x2600);
        // VMDq registers (QEMU igb_mac_reg_init): every pool may receive, each pool's long
        // packet limit 0x2600 with LPE clear, CRC stripping on.
        self.w(VFRE, 0xff);
        for pool in 0..VM_POOLS {
            self.w(VMOLR0 + 4 * pool, 0x2600 | VMOLR_STRCRC);
        }
        // Queue 0 comes out of reset enabled (QEMU igb_mac_reg_init), the others disabled.
        self.w(txq(0, Q_DCTL), DCTL_ENABLE);
        for n in 0..QUEUES {
            let en = if n == 0 { DCTL_ENABLE } else { 0 };
            self.w(rxq(n, Q_DCTL), en | 1 << 16);
        }
        if software {
            self.w(RXPBS, keep_rxpbs);
            self.w(TXPBS, keep_txpbs);
            for (v, val) in keep_eitr.into_iter().enumerate() {
                self.w(EITR0 + 4 * v, val);
            }
        }
        self.phy = [0; 32];
        self.phy[PHY_BMCR] = 0x1140;
        self.phy[PHY_BMSR] = 0x794d;
        self.phy[PHY_ID1] = (PHY_ID >> 16) as u16;
        self.phy[PHY_ID2] = PHY_ID as u16;
        self.phy[4] = 0x0de1;
        self.phy[PHY_ANLPAR] = 0x07e0;
        self.phy[6] = 0x0005;
        self.phy[7] = 0x2001;
        self.phy[9] = 0x0f00;
        self.phy[10] = 0x3c00;
        self.phy[15] = 0x3000;
        self.phy[0x10] = 0x0120;
        self.phy[0x11] = 0xc000;
        self.phy[0x19] = 0x008d;
        self.autoneg_due = None;
        if !self.cable {
            self.link_down_regs();
        }
        let m = self.mac.0;
        self.w(RA, u32::from_le_bytes([m[0], m[1], m[2], m[3]]));
        self.w(RA + 4, u32::from(m[4]) | u32::from(m[5]) << 8 | RAH_AV);
        // In-flight DMA is lost in a reset.
        self.engine.clear_delayed();
    }

    fn eeprom(&self, word: u32) -> u16 {
        let m = self.mac.0;
        match word {
            0..=2 => u16::from_le_bytes([m[2 * word as usize], m[2 * word as usize + 1]]),
            0x0b | 0x0d => super::pci::DEVICE_82576,
            0x3f => {
                let sum = (0..3).fold(0u16, |a, w| a.wrapping_add(self.eeprom(w)));
                0xbaba_u16.wrapping_sub(sum.wrapping_add(2 * super::pci::DEVICE_82576))
            }
            _ => 0,
        }
    }

    // ---- link ----

    fn link_down_regs(&mut self) {
        self.clear(STATUS, STATUS_LU);
        self.phy[PHY_BMSR] &= !(BMSR_LINK_ST | BMSR_AN_COMP);
        self.phy[PHY_ANLPAR] &= !ANLPAR_ACK;
    }

    fn restart_autoneg(&mut self) {
        // e1000x_restart_autoneg: link drops now, comes back when the timer expires.
        self.link_down_regs();
        self.autoneg_due = Some(self.now_ns + AUTONEG_NS);
    }

    /// Advances emulated time; completes autonegotiation whose 500 ms have passed.
    pub(crate) fn advance(&mut self, ns: u64) {
        self.now_ns = self.now_ns.saturating_add(ns);
        if self.autoneg_due.is_some_and(|due| due <= self.now_ns) {
            self.autoneg_due = None;
            // igb_autoneg_timer: only if the link partner is there.
            if self.cable {
                self.or(STATUS, STATUS_LU);
                self.phy[PHY_BMSR] |= BMSR_LINK_ST | BMSR_AN_COMP;
                self.phy[PHY_ANLPAR] |= ANLPAR_ACK;
                self.or(CTRL, CTRL_RFCE | CTRL_TFCE);
                self.raise_icr(ICR_LSC);
            }
        }
    }

    /// Plugs or pulls the cable (QEMU `igb_core_set_link_status`).
    pub(crate) fn set_cable(&mut self, up: bool) {
        self.cable = up;
        let old = self.r(STATUS);
        if !up {
            self.link_down_regs();
        } else if self.phy[PHY_BMCR] & BMCR_AUTOEN != 0 && self.phy[PHY_BMSR] & BMSR_AN_COMP == 0 {
            self.restart_autoneg();
        } else {
            self.or(STATUS, STATUS_LU);
            self.phy[PHY_BMSR] |= BMSR_LINK_ST;
        }
        if self.r(STATUS) != old {
            self.raise_icr(ICR_LSC);
        }
    }

    fn mdic_write(&mut self, val: u32) {
        let data = (val & MDIC_DATA_MASK) as u16;
        let reg = ((val >> MDIC_REG_SHIFT) & 0x1f) as usize;
        let phy = (val >> MDIC_PHY_SHIFT) & 0x1f;
        let mut out = val;
        if phy != PHY_ADDR {
            out = self.r(MDIC) | MDIC_ERROR;
        } else if val & MDIC_OP_READ != 0 {
            if PHY_READABLE.contains(&reg) {
                out = (val & !MDIC_DATA_MASK) | u32::from(self.phy[reg]);
            } else {
                out |= MDIC_ERROR;
            }
        } else if val & MDIC_OP_WRITE != 0 {
            if !PHY_WRITABLE.contains(&reg) {
                out |= MDIC_ERROR;
            } else if reg == PHY_BMCR {
                // igb_set_phy_ctrl: bits 5:0 reserved, RESET and ANRESTART self-clearing.
                self.phy[PHY_BMCR] = data & !(0x3f | BMCR_RESET | BMCR_ANRESTART);
                if data & BMCR_ANRESTART != 0 && data & BMCR_AUTOEN != 0 {
                    self.restart_autoneg();
                }
            } else {
                self.phy[reg] = data;
            }
        }
        // QEMU completes the access within the write: READY reads back at once.
        self.w(MDIC, out | MDIC_READY);
        if out & MDIC_INT_EN != 0 {
            self.raise_icr(ICR_MDAC);
        }
    }

    // ---- interrupts (QEMU igb_raise_interrupts / igb_msix_notify) ----

    fn msix_mode(&self) -> bool {
        self.r(GPIE) & GPIE_MSIX_MODE != 0
    }

    pub(crate) fn raise_icr(&mut self, causes: u32) {
        let old = self.r(ICR) & self.r(IMS);
        self.or(ICR, causes);
        self.icr_changed(old);
    }

    /// Delivers what became pending in ICR & IMS since `old`.
    fn icr_changed(&mut self, old: u32) {
        if self.msix_mode() {
            let raised = self.r(ICR) & self.r(IMS) & !old;
            let misc = self.r(IVAR_MISC);
            let mut ecauses = 0;
            if raised & ICR_DRSTA != 0 && misc & IVAR_VALID != 0 {
                ecauses |= 1 << (misc & 0x1f);
            }
            let other = misc >> 8;
            if raised & !ICR_DRSTA != 0 && other & IVAR_VALID != 0 {
                ecauses |= 1 << (other & 0x1f);
            }
            self.raise_eicr(ecauses);
        } else {
            self.clear(ICR, ICR_INT_ASSERTED);
            if self.r(ICR) != 0 {
                self.or(ICR, ICR_INT_ASSERTED);
            }
            let raised = self.r(ICR) & self.r(IMS) & !old;
            if raised != 0 {
                // Without MSI-X mode every cause goes to vector 0 (QEMU: msix_notify(0)).
                self.or(EICR, EICR_OTHER);
                self.notify(0);
            }
        }
    }

    pub(crate) fn raise_eicr(&mut self, causes: u32) {
        let old = self.r(EICR) & self.r(EIMS);
        self.or(EICR, causes);
        if self.msix_mode() {
            let raised = self.r(EICR) & self.r(EIMS) & !old;
            self.fire(raised);
        }
    }

    fn fire(&mut self, raised: u32) {
        for v in 0..25u32 {
            let bit = 1u32 << v;
            if raised & bit == 0 {
                continue;
            }
            if v < u32::from(MSIX_VECTORS) {
                self.notify(v as usize);
            }
            // Auto-clear after the message (igb_msix_notify).
            let eiac = self.r(EIAC);
            self.clear(EICR, eiac & bit);
            // Auto-mask (datasheet 7.3.2.x, with GPIE.EIAME). QEMU does not implement it; the
            // model does, so a driver that relies on QEMU never masking still works, and one
            // that forgets to re-arm after auto-mask is caught here.
            if self.r(GPIE) & GPIE_EIAME != 0 {
                let eiam = self.r(EIAM);
                self.clear(EIMS, eiam & bit);
            }
        }
    }

    fn notify(&self, v: usize) {
        if let Some(w) = self.vectors.get(v) {
            w.notify();
        }
    }

    // ---- register access ----

    /// Maps legacy aliases onto the primary register (QEMU `mac_reg_access`).
    fn canonical(off: usize) -> usize {
        let in_block = |base: usize| off >= base && off < base + 4 * 0x100;
        if in_block(RXQ_LEGACY) && (off - RXQ_LEGACY) % 0x100 < Q_STRIDE {
            let n = (off - RXQ_LEGACY) / 0x100;
            return rxq(n, (off - RXQ_LEGACY) % 0x100);
        }
        if in_block(TXQ_LEGACY) && (off - TXQ_LEGACY) % 0x100 < Q_STRIDE {
            let n = (off - TXQ_LEGACY) / 0x100;
            return txq(n, (off - TXQ_LEGACY) % 0x100);
        }
        if (RA_ALIAS..RA_ALIAS + 16 * 8).contains(&off) {
            return RA + (off - RA_ALIAS);
        }
        off
    }

    fn queue_reg(off: usize, base: usize) -> Option<(usize, usize)> {
        (base..base + QUEUES * Q_STRIDE)
            .contains(&off)
            .then(|| ((off - base) / Q_STRIDE, (off - base) % Q_STRIDE))
    }

    pub(crate) fn read(&mut self, off: usize) -> u32 {
        let off = Self::canonical(off);
        match off {
            STATUS => {
                // igb_get_status: duplex and speed are computed, GIO master enable follows CTRL.
                let ctrl = self.r(CTRL);
                let mut s = self.r(STATUS) | STATUS_SPEED_1000;
                if ctrl & CTRL_FRCDPX == 0 || ctrl & CTRL_FD != 0 {
                    s |= STATUS_FD;
                }
                if ctrl & (CTRL_GIO_MASTER_DISABLE | CTRL_LRST) == 0 {
                    s |= STATUS_GIO_MASTER_ENABLE;
                }
                s
            }
            ICR => {
                let v = self.r(ICR);
                if self.r(GPIE) & GPIE_NSICR != 0
                    || self.r(IMS) == 0
                    || v & ICR_INT_ASSERTED != 0
                    || !self.msix_mode()
                {
                    self.w(ICR, 0);
                }
                v
            }
            IMC => self.r(IMS),
            // Clear on read (datasheet 8.19; QEMU read_clr4). MPC is clear-on-read on the
            // silicon; QEMU reads it plainly and never counts it — the model counts and clears.
            EICR | CRCERRS | MPC | GPRC | BPRC | MPRC | GPTC | RUC | ROC | TPR | TPT => {
                std::mem::take(&mut self.regs[off / 4])
            }
            // 64-bit counters: reading the high half clears both (QEMU read_clr8).
            GORCH | GOTCH | TORH | TOTH => {
                let v = self.r(off);
                self.w(off, 0);
                self.w(off - 4, 0);
                v
            }
            _ => match Self::queue_reg(off, RXQ_BASE) {
                Some((_, Q_RQDPC)) => std::mem::take(&mut self.regs[off / 4]),
                _ => self.r(off),
            },
        }
    }

    pub(crate) fn write(&mut self, off: usize, val: u32) {
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
            CTRL_EXT => self.w(CTRL_EXT, val & !(1 << 12 | 1 << 13)),
            MDIC => self.mdic_write(val),
            ICR => self.clear(ICR, val),
            ICS => self.raise_icr(val),
            IMS => {
                // Unmasking a pending cause fires it (QEMU igb_raise_interrupts on IMS).
                let old = self.r(ICR) & self.r(IMS);
                self.or(IMS, val & IMS_VALID);
                self.icr_changed(old);
            }
            IMC => self.clear(IMS, val),
            EICS => self.raise_eicr(val & self.eicr_mask()),
            EIMS => {
                let old = self.r(EICR) & self.r(EIMS);
                let mask = self.eicr_mask();
                self.or(EIMS, val & mask);
                if self.msix_mode() {
                    let raised = self.r(EICR) & self.r(EIMS) & !old;
                    self.fire(raised);
                }
            }
            EIMC => {
                let mask = self.eicr_mask();
                self.clear(EIMS, val & mask);
            }
            // Plain registers on the silicon. QEMU makes EIAC OR-only and stores EIAM inverted;
            // the model follows the datasheet.
            EIAC | EIAM => self.w(off, val & self.eicr_mask()),
            EICR => {
                let mask = self.eicr_mask();
                self.clear(EICR, val & mask);
            }
            o if (EITR0..EITR0 + 25 * 4).contains(&o) => self.w(o, val & 0x7ffe),
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

    fn eicr_mask(&self) -> u32 {
        if self.msix_mode() {
            EICR_MSIX_MASK
        } else {
            0x4000_ffff | EICR_OTHER
        }
    }

    fn write_rxq(&mut self, n: usize, reg: usize, off: usize, val: u32) {
        match reg {
            Q_DCTL => self.request_dctl(Ring::Rx(n as u16), off, val),
            Q_DBAL => self.w(off, val & !0x7f),
            Q_DLEN => self.w(off, val & 0xf_ff80),
            Q_DH | Q_DT => self.w(off, val & 0xffff),
            _ => self.w(off, val),
        }
    }

    fn write_txq(&mut self, n: usize, reg: usize, off: usize, val: u32) {
        match reg {
            Q_DCTL => self.request_dctl(Ring::Tx(n as u16), off, val),
            Q_DBAL => self.w(off, val & !0x7f),
            Q_DLEN => self.w(off, val & 0xf_ff80),
            Q_DH => self.w(off, val & 0xffff),
            Q_DT => {
                self.w(off, val & 0xffff);
                // The doorbell: QEMU igb_set_tdt transmits synchronously.
                self.transmit(n);
            }
            _ => self.w(off, val),
        }
    }

    /// The driver's write of RXDCTL/TXDCTL, which `DeviceFault::RefuseStop` / `RefuseStart`
    /// can make the device ignore: a refused stop leaves the register (ENABLE set) and the
    /// queue running; a refused start writes the rest with ENABLE clear.
    fn request_dctl(&mut self, ring: Ring, off: usize, val: u32) {
        let on = self.r(off) & DCTL_ENABLE != 0;
        let hit = |r| r == ring;
        if on && val & DCTL_ENABLE == 0 && self.engine.refuse(true, hit) {
            return;
        }
        if !on && val & DCTL_ENABLE != 0 && self.engine.refuse(false, hit) {
            return self.write_dctl(ring, off, val & !DCTL_ENABLE);
        }
        self.write_dctl(ring, off, val);
    }

    /// RXDCTL/TXDCTL: clearing ENABLE stops the queue, and write-backs held back for it are
    /// made first.
    fn write_dctl(&mut self, ring: Ring, off: usize, val: u32) {
        if self.r(off) & DCTL_ENABLE != 0 && val & DCTL_ENABLE == 0 {
            self.engine.flush(ring);
        }
        self.w(off, val);
    }
}

impl Model for IgbModel {
    fn read(&mut self, off: usize) -> u32 {
        IgbModel::read(self, off)
    }

    fn write(&mut self, off: usize, val: u32) {
        IgbModel::write(self, off, val)
    }

    fn config_read(&self, off: u16) -> u32 {
        self.pci.read32(off)
    }

    fn config_write(&mut self, off: u16, val: u32) {
        self.pci.write32(off, val)
    }

    fn receive(&mut self, frame: &[u8], crc_ok: bool) {
        IgbModel::receive(self, frame, crc_ok)
    }

    fn step(&mut self) -> bool {
        IgbModel::step(self)
    }

    fn advance(&mut self, ns: u64) {
        IgbModel::advance(self, ns)
    }

    fn now_ns(&self) -> u64 {
        self.now_ns
    }

    fn mac(&self) -> MacAddr {
        self.mac
    }

    fn set_cable(&mut self, up: bool) {
        IgbModel::set_cable(self, up)
    }

    fn engine(&mut self) -> &mut Engine {
        &mut self.engine
    }

    fn rings(&self) -> Vec<(u64, u64)> {
        IgbModel::rings(self)
    }

    fn take_outbox(&mut self) -> Vec<Vec<u8>> {
        std::mem::take(&mut self.outbox)
    }
    fn critical(&mut self, fault: CriticalFault) {
        match fault {
            // A reset the driver did not ask for: power-on values (QEMU `igb_reset` without
            // the software-reset exceptions), CTRL.RST never seen set.
            CriticalFault::Reset => self.reset(false),
            CriticalFault::DisableQueue(ring) => {
                let off = match ring {
                    Ring::Tx(n) => txq(usize::from(n), Q_DCTL),
                    Ring::Rx(n) => rxq(usize::from(n), Q_DCTL),
                };
                let val = self.r(off) & !DCTL_ENABLE;
                self.write_dctl(ring, off, val);
            }
            _ => {}
        }
    }
}
