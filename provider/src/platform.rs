//! [`ProvPlatform`]: the one platform every domain of the provider drives its NIC through —
//! an emulated device of this process (`ringfab-emu`) or a PCI function bound to vfio-pci
//! (`ringfab-vfio`), chosen per NIC when `FI_RINGFAB_NICS` is read.
//!
//! Why a platform that is either, rather than a NIC type or a domain per platform: core's
//! objects (domain, CQ, endpoint) are generic over the NIC, and the provider keeps them behind
//! C fids that have one Rust type each (`DomainObj`, `CqObj`, …). Making those generic would
//! make every fid's type, and every `fi_ops` table, one per platform; an enum over two
//! `AnyNic`s would need enums over the drivers' queue types as well. Below the platform there
//! are only five small traits (`Platform`, `Mmio`, `DmaRegion`, `DmaMapping`, `Wait`), so the
//! choice is made there, once: `AnyNic<ProvPlatform>` picks the driver by PCI ID as it does on
//! either platform alone, and everything above it keeps one type. What it costs is one branch
//! on the variant per register access (a doorbell, an interrupt mask) and per wait; descriptor
//! rings and buffers are reached through the CPU addresses the region gave when it was made,
//! with no dispatch at all.
//!
//! [`ProvWaitSet`] is the matching wait set (`FI_WAIT_SET`): its members may be of either kind,
//! so it is one epoll descriptor over their file descriptors — an emulated NIC's interrupt
//! handles mirror their pending flag into an eventfd in the provider (`table.rs`), VFIO's are
//! eventfds.

use core::ptr::NonNull;
use core::time::Duration;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use ringfab_emu::{EmuDma, EmuMapping, EmuMmio, EmuPlatform, EmuWait};
use ringfab_hal::{
    DmaMapping, DmaRegion, Iova, Mmio, Platform, RawWait, Result, Wait, WaitOutcome, WaitSet,
};
use ringfab_vfio::{EventFdWait, VfioDma, VfioMapping, VfioMmio, VfioPlatform};

/// `$body` with `$x` bound to what the two-variant value `$value` holds, and the result
/// wrapped back into `$enum`'s variant of the same name when `$wrap` is given.
macro_rules! either {
    ($value:expr, $x:ident => $body:expr) => {
        match $value {
            Self::Emu($x) => $body,
            Self::Vfio($x) => $body,
        }
    };
    ($value:expr, $x:ident => $body:expr, wrap $enum:ident) => {
        match $value {
            Self::Emu($x) => $body.map($enum::Emu),
            Self::Vfio($x) => $body.map($enum::Vfio),
        }
    };
}

/// A PCI function the provider drives: emulated, or bound to vfio-pci.
pub enum ProvPlatform {
    /// An emulated device of this process.
    Emu(EmuPlatform),
    /// A PCI function bound to vfio-pci.
    Vfio(VfioPlatform),
}

/// A BAR of a [`ProvPlatform`].
pub enum ProvMmio {
    /// An emulated device's registers.
    Emu(EmuMmio),
    /// A VFIO region mapped into the process.
    Vfio(VfioMmio),
}

/// DMA memory of a [`ProvPlatform`].
pub enum ProvDma {
    /// Memory the emulated IOMMU maps.
    Emu(EmuDma),
    /// Memory the VFIO container's IOMMU maps.
    Vfio(VfioDma),
}

/// A mapping of caller memory on a [`ProvPlatform`].
pub enum ProvMapping {
    /// In the emulated IOMMU.
    Emu(EmuMapping),
    /// In the VFIO container's IOMMU.
    Vfio(VfioMapping),
}

/// An interrupt wait handle of a [`ProvPlatform`].
#[derive(Clone, Debug)]
pub enum ProvWait {
    /// An emulated vector (mirrored into an eventfd by the provider).
    Emu(EmuWait),
    /// An MSI-X vector's eventfd.
    Vfio(EventFdWait),
}

impl Mmio for ProvMmio {
    #[inline]
    fn read32(&self, offset: usize) -> u32 {
        either!(self, m => m.read32(offset))
    }
    #[inline]
    fn write32(&self, offset: usize, value: u32) {
        either!(self, m => m.write32(offset, value))
    }
    #[inline]
    fn read16(&self, offset: usize) -> u16 {
        either!(self, m => m.read16(offset))
    }
    #[inline]
    fn write16(&self, offset: usize, value: u16) {
        either!(self, m => m.write16(offset, value))
    }
    #[inline]
    fn read8(&self, offset: usize) -> u8 {
        either!(self, m => m.read8(offset))
    }
    #[inline]
    fn write8(&self, offset: usize, value: u8) {
        either!(self, m => m.write8(offset, value))
    }
    fn len(&self) -> usize {
        either!(self, m => m.len())
    }
}

// SAFETY: each variant is a `DmaRegion` whose implementation upholds the contract (valid,
// aligned, zeroed, reachable at `iova()` only, stable `cpu()`/`len()`, no overlap); this type
// only forwards to the one it holds, which never changes.
unsafe impl DmaRegion for ProvDma {
    fn cpu(&self) -> NonNull<u8> {
        either!(self, d => d.cpu())
    }
    fn iova(&self) -> Iova {
        either!(self, d => d.iova())
    }
    fn len(&self) -> usize {
        either!(self, d => d.len())
    }
}

impl DmaMapping for ProvMapping {
    fn iova(&self) -> Iova {
        either!(self, m => m.iova())
    }
    fn len(&self) -> usize {
        either!(self, m => m.len())
    }
}

impl Wait for ProvWait {
    fn drain(&self) -> bool {
        either!(self, w => w.drain())
    }
    fn wait(&self, timeout: Option<Duration>) -> WaitOutcome {
        either!(self, w => w.wait(timeout))
    }
    fn notify(&self) {
        either!(self, w => w.notify())
    }
    fn raw(&self) -> Option<RawWait> {
        either!(self, w => w.raw())
    }
}

// SAFETY: each variant is a `Platform` that confines its device to the memory of its own
// `alloc_dma` and `map_dma` and its BARs to its own function; every method forwards to the one
// platform held, and the regions, mappings and BARs it returns are that platform's.
unsafe impl Platform for ProvPlatform {
    type Mmio = ProvMmio;
    type Dma = ProvDma;
    type Mapping = ProvMapping;
    type Wait = ProvWait;

    fn bar(&self, index: u8) -> Result<ProvMmio> {
        either!(self, p => p.bar(index), wrap ProvMmio)
    }

    fn config_read32(&self, offset: u16) -> u32 {
        either!(self, p => p.config_read32(offset))
    }

    fn config_write32(&self, offset: u16, value: u32) {
        either!(self, p => p.config_write32(offset, value))
    }

    fn alloc_dma(&self, len: usize) -> Result<ProvDma> {
        either!(self, p => p.alloc_dma(len), wrap ProvDma)
    }

    unsafe fn map_dma(&self, cpu: NonNull<u8>, len: usize) -> Result<ProvMapping> {
        // SAFETY: the caller's promise (memory valid and unreferenced while mapped) is the one
        // the held platform's `map_dma` asks for.
        either!(self, p => unsafe { p.map_dma(cpu, len) }, wrap ProvMapping)
    }

    fn delay(&self, duration: Duration) {
        either!(self, p => p.delay(duration))
    }

    fn irq_vectors(&self) -> u16 {
        either!(self, p => p.irq_vectors())
    }

    fn irq(&self, vector: u16) -> Result<ProvWait> {
        either!(self, p => p.irq(vector), wrap ProvWait)
    }
}

/// A wait over [`ProvWait`]s of either kind: one epoll descriptor, level-triggered, over each
/// member's file descriptor ([`Wait::raw`]) and the set's own eventfd. Draining goes through
/// the members' own `drain`, which clears an emulated handle's pending flag with its eventfd.
#[derive(Debug)]
pub struct ProvWaitSet {
    epoll: OwnedFd,
    own: EventFdWait,
    members: Mutex<Vec<ProvWait>>,
}

fn lock(m: &Mutex<Vec<ProvWait>>) -> MutexGuard<'_, Vec<ProvWait>> {
    // The list holds handles only; a panic elsewhere leaves it consistent.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The file descriptor a member polls readable on while a notification is pending.
fn member_fd(w: &ProvWait) -> Option<i32> {
    match w.raw() {
        Some(RawWait::Fd(fd)) => Some(fd),
        _ => None,
    }
}

impl ProvWaitSet {
    /// An empty set: a new epoll descriptor watching only the set's own eventfd.
    ///
    /// # Errors
    /// The OS error from epoll_create1(2), eventfd(2) or epoll_ctl(2).
    pub fn new() -> std::io::Result<ProvWaitSet> {
        // SAFETY: epoll_create1(2) takes no pointers; a non-negative result is a new
        // descriptor nothing else owns.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let set = ProvWaitSet {
            // SAFETY: as above: `fd` is open and owned by nobody else.
            epoll: unsafe { OwnedFd::from_raw_fd(fd) },
            own: EventFdWait::new()?,
            members: Mutex::new(Vec::new()),
        };
        set.ctl(libc::EPOLL_CTL_ADD, set.own.as_raw_fd())?;
        Ok(set)
    }

    fn ctl(&self, op: libc::c_int, fd: i32) -> std::io::Result<()> {
        // Level-triggered EPOLLIN: readable for as long as the eventfd's count is not zero.
        let mut event = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: u64::try_from(fd).unwrap_or(0),
        };
        // SAFETY: `event` is a valid epoll_event living across the call; the epoll descriptor
        // is ours and open; a bad `fd` is an error return, not undefined behaviour.
        let r = unsafe { libc::epoll_ctl(self.epoll.as_raw_fd(), op, fd, &mut event) };
        if r < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }

    /// Blocks in epoll_wait(2) for at most `ms` milliseconds (-1: for ever).
    fn block(&self, ms: libc::c_int) {
        let mut event = libc::epoll_event { events: 0, u64: 0 };
        // SAFETY: room for one event, living across the call; the descriptor is ours. The
        // result does not matter: the caller drains and re-checks its deadline either way.
        let _ = unsafe { libc::epoll_wait(self.epoll.as_raw_fd(), &mut event, 1, ms) };
    }
}

impl WaitSet for ProvWaitSet {
    type Wait = ProvWait;

    fn add(&self, member: &ProvWait) -> Result {
        let unavailable = ringfab_hal::Error::InterruptUnavailable { vector: u16::MAX };
        let fd = member_fd(member).ok_or(unavailable)?;
        let mut members = lock(&self.members);
        if members.iter().any(|m| member_fd(m) == Some(fd)) {
            return Ok(());
        }
        self.ctl(libc::EPOLL_CTL_ADD, fd).map_err(|_| unavailable)?;
        members.push(member.clone());
        Ok(())
    }

    fn remove(&self, member: &ProvWait) {
        let mut members = lock(&self.members);
        let fd = member_fd(member);
        if let Some(i) = members.iter().position(|m| member_fd(m) == fd) {
            // The descriptor is open (the list holds a clone of its handle).
            let _ = fd.map(|fd| self.ctl(libc::EPOLL_CTL_DEL, fd));
            members.swap_remove(i);
        }
    }

    fn drain(&self) -> bool {
        let mut any = self.own.drain();
        for m in lock(&self.members).iter() {
            any |= m.drain();
        }
        any
    }

    fn wait(&self, timeout: Option<Duration>) -> WaitOutcome {
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        loop {
            if self.drain() {
                return WaitOutcome::Notified;
            }
            let ms = match deadline {
                None => -1,
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        return WaitOutcome::TimedOut;
                    }
                    // Rounded up, so that the wait is never shorter than asked.
                    let ms = (d - now).as_nanos().div_ceil(1_000_000);
                    libc::c_int::try_from(ms).unwrap_or(libc::c_int::MAX)
                }
            };
            self.block(ms);
        }
    }

    fn notify(&self) {
        self.own.notify();
    }

    fn raw(&self) -> Option<RawWait> {
        Some(RawWait::Fd(self.epoll.as_raw_fd()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn emu_wait() -> ProvWait {
        let w = EmuWait::new();
        w.attach_eventfd().unwrap();
        ProvWait::Emu(w)
    }

    #[test]
    fn a_set_wakes_for_a_member_of_either_kind_and_drains_it() {
        let set = ProvWaitSet::new().unwrap();
        let emu = emu_wait();
        let vfio = ProvWait::Vfio(EventFdWait::new().unwrap());
        set.add(&emu).unwrap();
        set.add(&vfio).unwrap();
        set.add(&emu).unwrap();
        assert_eq!(lock(&set.members).len(), 2, "a member added twice is one");
        for member in [&emu, &vfio] {
            assert_eq!(set.wait(Some(Duration::ZERO)), WaitOutcome::TimedOut);
            member.notify();
            assert_eq!(
                set.wait(Some(Duration::from_secs(5))),
                WaitOutcome::Notified
            );
            assert!(!member.drain(), "the set consumed the notification");
        }
        set.notify();
        assert_eq!(set.wait(None), WaitOutcome::Notified);
    }

    #[test]
    fn a_removed_member_no_longer_wakes_the_set() {
        let set = ProvWaitSet::new().unwrap();
        let emu = emu_wait();
        set.add(&emu).unwrap();
        set.remove(&emu);
        emu.notify();
        assert_eq!(
            set.wait(Some(Duration::from_millis(10))),
            WaitOutcome::TimedOut
        );
        assert!(emu.drain(), "the member kept its notification");
    }

    #[test]
    fn a_handle_without_a_descriptor_cannot_join() {
        let set = ProvWaitSet::new().unwrap();
        let bare = ProvWait::Emu(EmuWait::new());
        assert!(set.add(&bare).is_err());
    }
}
