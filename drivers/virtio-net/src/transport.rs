//! The modern virtio PCI transport (virtio 1.2 §4.1): finding the virtio structures through
//! the vendor capabilities in configuration space, and reaching their fields with accesses of
//! each field's own width.

use ringfab_hal::{Error, Mmio, Platform, Result};

use crate::regs::{self as r, common};

/// One virtio structure: a BAR and a window in it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Window {
    pub(crate) bar: u8,
    pub(crate) offset: usize,
    pub(crate) len: usize,
}

/// What the capability list gave (§4.1.4): the first capability of each type the driver uses.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Caps {
    pub(crate) common: Window,
    pub(crate) notify: Window,
    pub(crate) notify_mult: u32,
    pub(crate) device: Window,
}

/// At most this many capabilities are followed: a list that loops ends here.
const MAX_CAPS: usize = 48;

/// Walks the capability list of `platform`'s configuration space (§4.1.4: "The driver SHOULD
/// use the first instance of each virtio structure type it can support"; structures in BARs
/// other than 0–5 are ignored, as §4.1.4 reserves them).
///
/// # Errors
/// [`Error::Unsupported`] when the common, notify or device structure is missing or too small.
pub(crate) fn find_caps<P: Platform>(platform: &P) -> Result<Caps> {
    let mut common_w = None;
    let mut notify = None;
    let mut device = None;
    if platform.config_read32(r::PCI_COMMAND) & r::STATUS_CAP_LIST != 0 {
        let mut at = (platform.config_read32(r::PCI_CAP_PTR) & 0xfc) as u16;
        for _ in 0..MAX_CAPS {
            if at < 0x40 {
                break;
            }
            let head = platform.config_read32(at);
            let (id, next, cfg_type) = (head as u8, (head >> 8) as u8 & 0xfc, (head >> 24) as u8);
            if id == r::CAP_VNDR {
                let bar = platform.config_read32(at + 4) as u8;
                let w = Window {
                    bar,
                    offset: platform.config_read32(at + 8) as usize,
                    len: platform.config_read32(at + 12) as usize,
                };
                if bar <= 5 {
                    match cfg_type {
                        r::cap::COMMON if common_w.is_none() => common_w = Some(w),
                        r::cap::NOTIFY if notify.is_none() => {
                            notify = Some((w, platform.config_read32(at + 16)));
                        }
                        r::cap::DEVICE if device.is_none() => device = Some(w),
                        _ => {}
                    }
                }
            }
            at = u16::from(next);
        }
    }
    match (common_w, notify, device) {
        (Some(c), Some((n, mult)), Some(d)) if c.len >= common::LEN && n.len >= 2 => Ok(Caps {
            common: c,
            notify: n,
            notify_mult: mult,
            device: d,
        }),
        _ => Err(Error::Unsupported),
    }
}

/// Register access to the three structures, each through its BAR's handle.
pub(crate) struct Transport<M: Mmio> {
    /// One handle per BAR 0–5 that a structure lives in.
    bars: [Option<M>; 6],
    pub(crate) caps: Caps,
}

impl<M: Mmio> Transport<M> {
    /// Maps the BARs the structures live in, each once.
    ///
    /// # Errors
    /// [`Error::BarUnavailable`] from the platform; [`Error::Unsupported`] when a window does
    /// not lie inside its BAR.
    pub(crate) fn new<P: Platform<Mmio = M>>(platform: &P, caps: Caps) -> Result<Self> {
        let mut bars: [Option<M>; 6] = Default::default();
        for w in [caps.common, caps.notify, caps.device] {
            let slot = &mut bars[usize::from(w.bar)];
            if slot.is_none() {
                *slot = Some(platform.bar(w.bar)?);
            }
            let bar_len = slot.as_ref().map_or(0, |m| m.len());
            if w.offset.checked_add(w.len).is_none_or(|end| end > bar_len) {
                return Err(Error::Unsupported);
            }
        }
        Ok(Transport { bars, caps })
    }

    fn at(&self, w: Window) -> &M {
        // `new` mapped every window's BAR.
        self.bars[usize::from(w.bar)]
            .as_ref()
            .expect("BAR mapped at bring-up")
    }

    pub(crate) fn c8(&self, off: usize) -> u8 {
        self.at(self.caps.common)
            .read8(self.caps.common.offset + off)
    }
    pub(crate) fn c16(&self, off: usize) -> u16 {
        self.at(self.caps.common)
            .read16(self.caps.common.offset + off)
    }
    pub(crate) fn c32(&self, off: usize) -> u32 {
        self.at(self.caps.common)
            .read32(self.caps.common.offset + off)
    }
    pub(crate) fn w8(&self, off: usize, v: u8) {
        self.at(self.caps.common)
            .write8(self.caps.common.offset + off, v)
    }
    pub(crate) fn w16(&self, off: usize, v: u16) {
        self.at(self.caps.common)
            .write16(self.caps.common.offset + off, v)
    }
    pub(crate) fn w32(&self, off: usize, v: u32) {
        self.at(self.caps.common)
            .write32(self.caps.common.offset + off, v)
    }
    /// A 64-bit field as two 32-bit writes, low half first (§4.1.3.1: 64-bit fields may be
    /// written as two 32-bit halves).
    pub(crate) fn w64(&self, off: usize, v: u64) {
        self.w32(off, v as u32);
        self.w32(off + 4, (v >> 32) as u32);
    }

    pub(crate) fn status(&self) -> u8 {
        self.c8(common::DEVICE_STATUS)
    }

    pub(crate) fn set_status(&self, s: u8) {
        self.w8(common::DEVICE_STATUS, s)
    }

    /// Device configuration: byte, 16- and 32-bit reads (`None` past the structure).
    pub(crate) fn d8(&self, off: usize) -> Option<u8> {
        let w = self.caps.device;
        (off < w.len).then(|| self.at(w).read8(w.offset + off))
    }
    pub(crate) fn d16(&self, off: usize) -> Option<u16> {
        let w = self.caps.device;
        (off + 2 <= w.len).then(|| self.at(w).read16(w.offset + off))
    }
    pub(crate) fn d32(&self, off: usize) -> Option<u32> {
        let w = self.caps.device;
        (off + 4 <= w.len).then(|| self.at(w).read32(w.offset + off))
    }

    /// Where queue `notify_off`'s doorbell is, if inside the notify structure (§4.1.4.4: the
    /// driver must not write outside it).
    pub(crate) fn notify_at(&self, notify_off: u16) -> Option<usize> {
        let w = self.caps.notify;
        let off = usize::from(notify_off).checked_mul(self.caps.notify_mult as usize)?;
        (off.checked_add(2)? <= w.len).then_some(w.offset + off)
    }

    /// Writes queue `index` to its doorbell at `at` (from [`notify_at`](Self::notify_at)): the
    /// queue index as the 16-bit value, without `VIRTIO_F_NOTIFICATION_DATA` (§4.1.5.2).
    #[inline]
    pub(crate) fn notify(&self, at: usize, index: u16) {
        self.at(self.caps.notify).write16(at, index)
    }
}
