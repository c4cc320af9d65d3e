//! A tiny register-level stand-in for an 82576 behind a fake [`Platform`], for the control-path
//! tests in this crate. It models only what bring-up and queue set-up observe: CTRL.RST
//! self-clearing, MDIC/PHY with autonegotiation bringing STATUS.LU up, EIMS/EIMC, clear-on-read
//! statistics, and RXDCTL/TXDCTL enable bits that read back (or, on request, stick).
//! Everything else is plain storage. Descriptor memory is [`FakeDma`].
#![allow(
    unsafe_code,
    reason = "implements the hal's unsafe Platform trait for tests"
)]
extern crate std;

use core::ptr::NonNull;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use core::time::Duration;
use std::sync::{Arc, Mutex};
use std::vec;
use std::vec::Vec;

use ringfab_hal::{DmaMapping, Error, Iova, Mmio, Platform, Result, Wait, WaitOutcome};

use crate::regs as r;
use ringfab_ring::fake::FakeDma;

/// The MAC the fake device was "manufactured" with.
pub(crate) const MAC: [u8; 6] = [0x52, 0x54, 0x00, 0x12, 0x34, 0x56];

/// Knobs for misbehaviour.
#[derive(Default, Clone, Copy)]
pub(crate) struct Quirks {
    /// CTRL.RST never clears.
    pub(crate) stuck_reset: bool,
    /// Autonegotiation never completes.
    pub(crate) no_link: bool,
    /// RXDCTL/TXDCTL ENABLE never reads back as set.
    pub(crate) stuck_enable: bool,
}

/// The device: registers, PHY, a log of register writes.
pub(crate) struct FakeDevice {
    regs: Mutex<Vec<u32>>,
    phy: Mutex<[u16; 32]>,
    pub(crate) writes: Mutex<Vec<(usize, u32)>>,
    quirks: Quirks,
}

impl FakeDevice {
    fn reset(&self, regs: &mut [u32]) {
        regs.iter_mut().for_each(|v| *v = 0);
        regs[r::RAL0 / 4] = u32::from_le_bytes([MAC[0], MAC[1], MAC[2], MAC[3]]);
        regs[r::RAH0 / 4] = u32::from_le_bytes([MAC[4], MAC[5], 0, 0x80]);
        regs[r::rxdctl(0) / 4] = r::XDCTL::ENABLE::SET.value;
        regs[r::txdctl(0) / 4] = r::XDCTL::ENABLE::SET.value;
        *self.phy.lock().unwrap() = [0; 32];
    }

    /// Current value of a register, without read side effects.
    pub(crate) fn peek(&self, reg: usize) -> u32 {
        self.regs.lock().unwrap()[reg / 4]
    }

    /// Sets a register as the device would (e.g. a statistics counter).
    pub(crate) fn poke(&self, reg: usize, value: u32) {
        self.regs.lock().unwrap()[reg / 4] = value;
    }

    /// Writes to `reg` since the log was last taken.
    pub(crate) fn take_writes(&self, reg: usize) -> Vec<u32> {
        let mut log = self.writes.lock().unwrap();
        let (hit, rest): (Vec<_>, Vec<_>) = log.drain(..).partition(|(o, _)| *o == reg);
        *log = rest;
        hit.into_iter().map(|(_, v)| v).collect()
    }
}

/// BAR0 of the fake device.
pub(crate) struct FakeBar(Arc<FakeDevice>);

impl Mmio for FakeBar {
    fn read32(&self, offset: usize) -> u32 {
        let mut regs = self.0.regs.lock().unwrap();
        let Some(v) = regs.get(offset / 4).copied() else {
            return u32::MAX;
        };
        if [
            r::GPRC,
            r::GPTC,
            r::GORCH,
            r::GOTCH,
            r::MPC,
            r::ICR,
            r::EICR,
        ]
        .contains(&offset)
        {
            regs[offset / 4] = 0;
            if offset == r::GORCH || offset == r::GOTCH {
                regs[offset / 4 - 1] = 0;
            }
        }
        v
    }

    fn write32(&self, offset: usize, value: u32) {
        let dev = &self.0;
        dev.writes.lock().unwrap().push((offset, value));
        let mut regs = dev.regs.lock().unwrap();
        let i = offset / 4;
        if i >= regs.len() {
            return;
        }
        match offset {
            r::CTRL => {
                if r::CTRL::RST.is_set(value) && !dev.quirks.stuck_reset {
                    dev.reset(&mut regs);
                    regs[i] = r::CTRL::RST::CLEAR.modify(value);
                } else {
                    regs[i] = value;
                }
            }
            r::MDIC => {
                let mdic = r::reg::<r::MDIC::Register>(value);
                let reg = mdic.read(r::MDIC::REGADD) as usize;
                let mut phy = dev.phy.lock().unwrap();
                let mut out = mdic;
                out.modify(r::MDIC::READY::SET);
                if mdic.read(r::MDIC::PHYADD) != r::PHY_ADDR {
                    out.modify(r::MDIC::ERROR::SET);
                } else if mdic.matches_all(r::MDIC::OP::Read) {
                    out.modify(r::MDIC::DATA.val(u32::from(phy[reg])));
                } else {
                    let v = mdic.read(r::MDIC::DATA) as u16;
                    phy[reg] = (r::BMCR::RESET::CLEAR + r::BMCR::ANRESTART::CLEAR).modify(v);
                    let restart = r::BMCR::AUTOEN::SET + r::BMCR::ANRESTART::SET;
                    if reg == usize::from(r::PHY_BMCR)
                        && restart.matches_all(v)
                        && !dev.quirks.no_link
                    {
                        let up =
                            r::STATUS::LU::SET + r::STATUS::FD::SET + r::STATUS::SPEED::Mbps1000;
                        regs[r::STATUS / 4] = up.modify(regs[r::STATUS / 4]);
                    }
                }
                regs[i] = out.get();
            }
            r::EIMS => regs[i] |= value,
            r::EIMC => regs[r::EIMS / 4] &= !value,
            _ if (0xC000..0xC400).contains(&offset) || (0xE000..0xE400).contains(&offset) => {
                let is_ctl = offset & 0x3F == 0x28;
                regs[i] = if is_ctl && dev.quirks.stuck_enable {
                    r::XDCTL::ENABLE::CLEAR.modify(value)
                } else {
                    value
                };
            }
            _ => regs[i] = value,
        }
    }

    fn len(&self) -> usize {
        r::BAR0_LEN
    }
}

/// A wait handle that counts notifications.
#[derive(Clone, Default)]
pub(crate) struct FakeWait(Arc<AtomicBool>);

impl Wait for FakeWait {
    fn drain(&self) -> bool {
        self.0.swap(false, Ordering::AcqRel)
    }
    fn wait(&self, _timeout: Option<Duration>) -> WaitOutcome {
        if self.drain() {
            WaitOutcome::Notified
        } else {
            WaitOutcome::TimedOut
        }
    }
    fn notify(&self) {
        self.0.store(true, Ordering::Release);
    }
}

/// A mapping the fake never needs.
pub(crate) struct FakeMapping;

impl DmaMapping for FakeMapping {
    fn iova(&self) -> Iova {
        Iova(0)
    }
    fn len(&self) -> usize {
        0
    }
}

/// One fake PCI function.
pub(crate) struct FakePlatform {
    pub(crate) dev: Arc<FakeDevice>,
    config: Mutex<[u32; 64]>,
    vectors: u16,
    next_iova: AtomicU64,
    /// Sum of all delays asked for.
    pub(crate) slept: Mutex<Duration>,
}

impl FakePlatform {
    /// An 82576 (0x8086:0x10C9) with `vectors` MSI-X vectors.
    pub(crate) fn new(vectors: u16, quirks: Quirks) -> Self {
        Self::with_id(0x10C9_8086, vectors, quirks)
    }

    /// A device with PCI id word `id` (device << 16 | vendor).
    pub(crate) fn with_id(id: u32, vectors: u16, quirks: Quirks) -> Self {
        let dev = FakeDevice {
            regs: Mutex::new(vec![0; r::BAR0_LEN / 4]),
            phy: Mutex::new([0; 32]),
            writes: Mutex::new(Vec::new()),
            quirks,
        };
        let mut regs = dev.regs.lock().unwrap();
        dev.reset(&mut regs);
        drop(regs);
        let mut config = [0; 64];
        config[0] = id;
        config[1] = 0x0010_0000; // status: capabilities list; command: nothing enabled
        FakePlatform {
            dev: Arc::new(dev),
            config: Mutex::new(config),
            vectors,
            next_iova: AtomicU64::new(0x10_0000),
            slept: Mutex::new(Duration::ZERO),
        }
    }

    /// The PCI command register.
    pub(crate) fn command(&self) -> u32 {
        self.config.lock().unwrap()[1] & 0xFFFF
    }
}

// SAFETY: the fake device reaches memory only through FakeDma regions handed out by
// `alloc_dma` (and the tests reading them), and BAR0 reaches only this fake's registers.
unsafe impl Platform for FakePlatform {
    type Mmio = FakeBar;
    type Dma = FakeDma;
    type Mapping = FakeMapping;
    type Wait = FakeWait;

    fn bar(&self, index: u8) -> Result<FakeBar> {
        if index != 0 {
            return Err(Error::BarUnavailable { index });
        }
        Ok(FakeBar(self.dev.clone()))
    }

    fn config_read32(&self, offset: u16) -> u32 {
        self.config
            .lock()
            .unwrap()
            .get(usize::from(offset / 4))
            .copied()
            .unwrap_or(u32::MAX)
    }

    fn config_write32(&self, offset: u16, value: u32) {
        if let Some(w) = self.config.lock().unwrap().get_mut(usize::from(offset / 4)) {
            *w = (*w & 0xFFFF_0000) | (value & 0xFFFF);
        }
    }

    fn alloc_dma(&self, len: usize) -> Result<FakeDma> {
        let iova = self.next_iova.fetch_add(0x10_0000, Ordering::Relaxed);
        Ok(FakeDma::new(len, iova))
    }

    unsafe fn map_dma(&self, _cpu: NonNull<u8>, len: usize) -> Result<FakeMapping> {
        Err(Error::DmaMap { len })
    }

    fn delay(&self, duration: Duration) {
        *self.slept.lock().unwrap() += duration;
    }

    fn irq_vectors(&self) -> u16 {
        self.vectors
    }

    fn irq(&self, vector: u16) -> Result<FakeWait> {
        if vector >= self.vectors {
            return Err(Error::InterruptUnavailable { vector });
        }
        Ok(FakeWait::default())
    }
}
