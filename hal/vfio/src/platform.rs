//! [`VfioPlatform`]: `ringfab_hal::Platform` for one PCI function bound to vfio-pci.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};
use std::ptr::NonNull;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use ringfab_hal::{Platform, Result as HalResult};
use vfio_bindings::bindings::vfio::{
    VFIO_PCI_CONFIG_REGION_INDEX, VFIO_PCI_MSIX_IRQ_INDEX, VFIO_REGION_INFO_FLAG_MMAP,
};
use vfio_ioctls::{VfioContainer, VfioDevice, VfioError, VfioOps};

use crate::config::{ConfigSpace, BAR0, BAR_IO_SPACE};
use crate::dma::{DmaSpace, Mapper, VfioDma, VfioMapping};
use crate::error::{Error, Result};
use crate::iova::{parse_iommu_info, IommuInfo, IovaAllocator, INFO_LEN};
use crate::mmio::{Mapping, VfioMmio};
use crate::sysfs::Sysfs;
use crate::wait::EventFdWait;
use crate::Bdf;

/// `VFIO_IOMMU_GET_INFO`: `_IO(VFIO_TYPE, VFIO_BASE + 12)` with VFIO_TYPE ';' (0x3b) and
/// VFIO_BASE 100 (include/uapi/linux/vfio.h).
const VFIO_IOMMU_GET_INFO: u64 = (0x3b << 8) | (100 + 12);

/// The IOMMU of a container, through vfio-ioctls. Holds the device too: the container loses its
/// IOMMU when the last device's group leaves it, and DMA memory must be unmapped before that.
struct ContainerMapper {
    container: Arc<VfioContainer>,
    _device: Arc<VfioDevice>,
}

fn vfio_io(e: VfioError) -> io::Error {
    match e {
        VfioError::IommuDmaMap(s) | VfioError::IommuDmaUnmap(s) => {
            io::Error::from_raw_os_error(s.errno())
        }
        other => io::Error::other(other.to_string()),
    }
}

impl Mapper for ContainerMapper {
    unsafe fn map(&self, iova: u64, len: u64, host: *mut u8) -> io::Result<()> {
        let len = usize::try_from(len).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        // SAFETY: forwarded from this method's contract, which is vfio_dma_map's.
        unsafe { self.container.vfio_dma_map(iova, len, host) }.map_err(vfio_io)
    }

    fn unmap(&self, iova: u64, len: u64) -> io::Result<()> {
        let len = usize::try_from(len).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        self.container.vfio_dma_unmap(iova, len).map_err(vfio_io)
    }
}

/// VFIO_IOMMU_GET_INFO on the container, with its capability chain (two calls: the first
/// learns the size the kernel needs).
fn iommu_info(fd: RawFd) -> io::Result<IommuInfo> {
    let mut argsz = INFO_LEN;
    for _ in 0..2 {
        // u64 words: the kernel's struct holds u64 fields, so the buffer must be 8-aligned.
        let mut buf = vec![0u64; argsz.div_ceil(8)];
        let mut bytes_len = buf.len() * 8;
        // `argsz` is the struct's first u32: the first four bytes of the first word.
        let mut first = [0u8; 8];
        first[..4].copy_from_slice(&u32::try_from(bytes_len).unwrap_or(u32::MAX).to_ne_bytes());
        buf[0] = u64::from_ne_bytes(first);
        // SAFETY: the request takes a `struct vfio_iommu_type1_info` whose `argsz` (its first
        // u32, set above) tells the kernel how many bytes of `buf` it may write; `buf` is that
        // long, aligned for the struct, and lives across the call.
        let r = unsafe { libc::ioctl(fd, VFIO_IOMMU_GET_INFO as _, buf.as_mut_ptr()) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        let bytes: Vec<u8> = buf.iter().flat_map(|w| w.to_ne_bytes()).collect();
        let need = u32::from_ne_bytes(bytes[0..4].try_into().expect("4 bytes")) as usize;
        if need <= bytes_len {
            bytes_len = bytes_len.min(need.max(INFO_LEN));
            return parse_iommu_info(&bytes[..bytes_len])
                .ok_or_else(|| io::Error::from(io::ErrorKind::InvalidData));
        }
        argsz = need;
    }
    Err(io::Error::other("VFIO_IOMMU_GET_INFO kept growing"))
}

/// One PCI function bound to vfio-pci, opened for a driver: its own IOMMU container (TYPE1v2),
/// mapped BARs, DMA memory at IOVAs inside the IOMMU's usable ranges, and MSI-X vectors on
/// eventfds. Memory Space and Bus Master Enable are set when it opens.
///
/// The inherent methods ([`map_bar`](Self::map_bar), [`alloc_dma_region`](Self::alloc_dma_region),
/// [`irq_wait`](Self::irq_wait)) give the full [`Error`]; the [`Platform`] methods give the
/// `ringfab_hal::Error` their trait asks for.
pub struct VfioPlatform {
    bdf: Bdf,
    group: u32,
    device: Arc<VfioDevice>,
    config: ConfigSpace,
    dma: Arc<DmaSpace>,
    bars: Mutex<[Option<Arc<Mapping>>; 6]>,
    msix: u16,
    vectors: Mutex<Option<Vec<EventFdWait>>>,
}

impl std::fmt::Debug for VfioPlatform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VfioPlatform")
            .field("bdf", &self.bdf)
            .field("group", &self.group)
            .field("msix_vectors", &self.msix)
            .finish()
    }
}

/// Translates vfio-ioctls' errors from opening a group and device into ones with a fix.
fn open_error(e: VfioError, sys: &Sysfs, bdf: Bdf, group: u32) -> Error {
    match e {
        VfioError::OpenContainer(source) => Error::VfioUnavailable { source },
        VfioError::VfioExtension | VfioError::VfioInvalidType | VfioError::VfioType1V2 => {
            Error::NoType1Iommu
        }
        VfioError::OpenGroup(source, _) => match (source.kind(), source.raw_os_error()) {
            (io::ErrorKind::PermissionDenied, _) => Error::Permission { group, source },
            (_, Some(libc::EBUSY)) => Error::GroupBusy { group },
            _ => Error::Os {
                op: "opening the VFIO group file",
                source,
            },
        },
        VfioError::GroupViable => Error::GroupNotViable {
            bdf,
            group,
            others: sys.non_viable_members(group).unwrap_or_default(),
        },
        source => Error::Vfio {
            op: "opening the device",
            source,
        },
    }
}

impl VfioPlatform {
    /// Opens the PCI function at `bdf` (`0000:03:00.0` or `03:00.0`), which must be bound to
    /// vfio-pci, reading sysfs at `/sys`.
    ///
    /// # Errors
    /// Each [`Error`] says what to do: [`Error::BadAddress`], [`Error::DeviceNotFound`],
    /// [`Error::NoIommuGroup`], [`Error::NotBoundToVfio`], [`Error::GroupNotViable`],
    /// [`Error::VfioUnavailable`], [`Error::Permission`], [`Error::GroupBusy`],
    /// [`Error::NoType1Iommu`], or [`Error::Vfio`] / [`Error::Os`] for what is left.
    pub fn open(bdf: &str) -> Result<VfioPlatform> {
        VfioPlatform::open_with(&Sysfs::default(), bdf)
    }

    /// [`open`](Self::open), with sysfs read through `sys` (the device files under `/dev/vfio`
    /// are always the real ones).
    ///
    /// # Errors
    /// As [`open`](Self::open).
    pub fn open_with(sys: &Sysfs, bdf: &str) -> Result<VfioPlatform> {
        let bdf = Bdf::parse(bdf)?;
        let group = sys.check_vfio_ready(bdf)?;
        let container =
            Arc::new(VfioContainer::new(None).map_err(|e| open_error(e, sys, bdf, group))?);
        let ops: Arc<dyn VfioOps> = container.clone();
        let device = Arc::new(
            VfioDevice::new(&sys.device_dir(bdf), ops, false)
                .map_err(|e| open_error(e, sys, bdf, group))?,
        );

        let info = iommu_info(container.as_raw_fd()).map_err(|source| Error::Os {
            op: "reading the IOMMU's IOVA ranges (VFIO_IOMMU_GET_INFO)",
            source,
        })?;
        let page = info.min_page().max(4096);
        let alloc = IovaAllocator::new(&info.ranges_or_default(), page, 64);
        let mapper = ContainerMapper {
            container,
            _device: device.clone(),
        };
        let dma = Arc::new(DmaSpace::new(Box::new(mapper), alloc, page as usize));

        // SAFETY: the device fd is open for as long as `device` lives, which outlives this call;
        // the borrow is only used to duplicate it.
        let fd = unsafe { BorrowedFd::borrow_raw(device.as_raw_fd()) };
        let file = File::from(fd.try_clone_to_owned().map_err(|source| Error::Os {
            op: "duplicating the device fd",
            source,
        })?);
        let config = ConfigSpace::new(
            file,
            device.get_region_offset(VFIO_PCI_CONFIG_REGION_INDEX),
            device.get_region_size(VFIO_PCI_CONFIG_REGION_INDEX),
        );
        config
            .enable_memory_and_bus_master()
            .map_err(|source| Error::Os {
                op: "setting Memory Space and Bus Master Enable in PCI COMMAND",
                source,
            })?;
        let msix = device
            .get_irq_info(VFIO_PCI_MSIX_IRQ_INDEX)
            .map_or(0, |i| u16::try_from(i.count).unwrap_or(u16::MAX));

        Ok(VfioPlatform {
            bdf,
            group,
            device,
            config,
            dma,
            bars: Mutex::new(Default::default()),
            msix,
            vectors: Mutex::new(None),
        })
    }

    /// The device's PCI address.
    pub fn bdf(&self) -> Bdf {
        self.bdf
    }

    /// The device's IOMMU group.
    pub fn iommu_group(&self) -> u32 {
        self.group
    }

    /// Maps memory BAR `index` (once; later calls share the mapping).
    ///
    /// # Errors
    /// [`Error::BarMissing`] for a BAR of size 0 or an index above 5; [`Error::BarNotMemory`] for
    /// an I/O BAR or one vfio-pci will not mmap; [`Error::Os`] if mmap fails.
    pub fn map_bar(&self, index: u8) -> Result<VfioMmio> {
        if index > 5 {
            return Err(Error::BarMissing {
                bdf: self.bdf,
                index,
            });
        }
        let mut bars = self.bars.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(m) = &bars[usize::from(index)] {
            return Ok(VfioMmio::new(m.clone()));
        }
        let region = u32::from(index);
        let size = self.device.get_region_size(region);
        if size == 0 {
            return Err(Error::BarMissing {
                bdf: self.bdf,
                index,
            });
        }
        let bar = self.config.read32(BAR0 + 4 * u64::from(index));
        if bar & BAR_IO_SPACE != 0
            || self.device.get_region_flags(region) & VFIO_REGION_INFO_FLAG_MMAP == 0
        {
            return Err(Error::BarNotMemory {
                bdf: self.bdf,
                index,
            });
        }
        let len = usize::try_from(size).map_err(|_| Error::BarNotMemory {
            bdf: self.bdf,
            index,
        })?;
        let map = Arc::new(
            Mapping::device(
                self.device.as_raw_fd(),
                self.device.get_region_offset(region),
                len,
            )
            .map_err(|source| Error::Os {
                op: "mapping the BAR (mmap of the VFIO region)",
                source,
            })?,
        );
        bars[usize::from(index)] = Some(map.clone());
        Ok(VfioMmio::new(map))
    }

    /// Allocates DMA memory, as [`Platform::alloc_dma`].
    ///
    /// # Errors
    /// [`Error::DmaRequest`] for a zero length, [`Error::IovaExhausted`], [`Error::DmaMap`]
    /// (often the memlock limit), [`Error::Os`] if the memory cannot be allocated.
    pub fn alloc_dma_region(&self, len: usize) -> Result<VfioDma> {
        self.dma.alloc(len)
    }

    /// Maps caller memory, as [`Platform::map_dma`].
    ///
    /// # Errors
    /// [`Error::DmaRequest`], [`Error::IovaExhausted`], [`Error::DmaMap`].
    ///
    /// # Safety
    /// As [`Platform::map_dma`]. The device reaches the whole pages that hold `cpu..cpu+len`, so
    /// the caller also keeps the rest of those pages valid (heap neighbours become
    /// device-reachable: map page-aligned buffers when that matters).
    pub unsafe fn map_memory(&self, cpu: NonNull<u8>, len: usize) -> Result<VfioMapping> {
        // SAFETY: the caller's contract is the one `DmaSpace::map` needs.
        unsafe { self.dma.map(cpu, len) }
    }

    /// The wait handle of MSI-X vector `vector`. The first call wires every vector of the
    /// device to its own eventfd in one VFIO_DEVICE_SET_IRQS: vfio-pci before Linux 6.5 cannot
    /// add vectors to an enabled MSI-X set without disabling it first, and a driver asks for its
    /// vectors one by one.
    ///
    /// # Errors
    /// [`Error::NoSuchVector`]; [`Error::Os`] if eventfds cannot be made; [`Error::Vfio`] if
    /// VFIO refuses to enable MSI-X.
    pub fn irq_wait(&self, vector: u16) -> Result<EventFdWait> {
        if vector >= self.msix {
            return Err(Error::NoSuchVector {
                vector,
                count: self.msix,
            });
        }
        let mut vectors = self.vectors.lock().unwrap_or_else(PoisonError::into_inner);
        if vectors.is_none() {
            let waits = (0..self.msix)
                .map(|_| EventFdWait::new())
                .collect::<io::Result<Vec<_>>>()
                .map_err(|source| Error::Os {
                    op: "creating eventfds for MSI-X",
                    source,
                })?;
            self.device
                .enable_msix(waits.iter().map(EventFdWait::eventfd).collect())
                .map_err(|source| Error::Vfio {
                    op: "enabling MSI-X (VFIO_DEVICE_SET_IRQS)",
                    source,
                })?;
            *vectors = Some(waits);
        }
        Ok(vectors.as_ref().expect("set above")[usize::from(vector)].clone())
    }
}

impl Drop for VfioPlatform {
    fn drop(&mut self) {
        let enabled = self
            .vectors
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some();
        if enabled {
            // Best effort: closing the device fd disables them as well.
            let _ = self.device.disable_msix();
        }
    }
}

// SAFETY: the container's IOMMU maps exactly the regions of `alloc_dma` and `map_dma` while they
// live (each unmaps before its memory goes, and leaks rather than frees when unmapping fails);
// the device sits alone in this container, so nothing else is mapped for it; `bar` maps this
// function's own VFIO regions only.
unsafe impl Platform for VfioPlatform {
    type Mmio = VfioMmio;
    type Dma = VfioDma;
    type Mapping = VfioMapping;
    type Wait = EventFdWait;

    fn bar(&self, index: u8) -> HalResult<VfioMmio> {
        self.map_bar(index)
            .map_err(|e| e.to_hal(ringfab_hal::Error::BarUnavailable { index }))
    }

    fn config_read32(&self, offset: u16) -> u32 {
        self.config.read32(u64::from(offset))
    }

    fn config_write32(&self, offset: u16, value: u32) {
        // Refused (out of range, misaligned) or failed writes are dropped, as the contract says.
        let _ = self.config.write32(u64::from(offset), value);
    }

    fn alloc_dma(&self, len: usize) -> HalResult<VfioDma> {
        self.alloc_dma_region(len)
            .map_err(|e| e.to_hal(ringfab_hal::Error::DmaAlloc { len }))
    }

    unsafe fn map_dma(&self, cpu: NonNull<u8>, len: usize) -> HalResult<VfioMapping> {
        // SAFETY: forwarded from the trait method's contract.
        unsafe { self.map_memory(cpu, len) }
            .map_err(|e| e.to_hal(ringfab_hal::Error::DmaMap { len }))
    }

    fn delay(&self, duration: Duration) {
        std::thread::sleep(duration);
    }

    fn irq_vectors(&self) -> u16 {
        self.msix
    }

    fn irq(&self, vector: u16) -> HalResult<EventFdWait> {
        self.irq_wait(vector)
            .map_err(|e| e.to_hal(ringfab_hal::Error::InterruptUnavailable { vector }))
    }
}

const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<VfioPlatform>();
    send_sync::<VfioMmio>();
    send_sync::<EventFdWait>();
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sysfs::fake::FakeSys;

    #[test]
    fn open_checks_sysfs_before_touching_dev_vfio() {
        let f = FakeSys::new();
        f.device(
            "0000:03:00.0",
            0x020000,
            (0x8086, 0x10c9),
            Some(3),
            Some("igb"),
        );
        let e = VfioPlatform::open_with(&f.sysfs(), "03:00.0").unwrap_err();
        assert!(matches!(e, Error::NotBoundToVfio { .. }), "{e}");
        let e = VfioPlatform::open_with(&f.sysfs(), "03:00").unwrap_err();
        assert!(matches!(e, Error::BadAddress { .. }), "{e}");
    }

    #[test]
    fn a_group_file_without_permission_says_to_run_as_root_or_chown() {
        let e = open_error(
            VfioError::OpenGroup(io::Error::from_raw_os_error(libc::EACCES), "12".into()),
            &Sysfs::default(),
            "03:00.0".parse().unwrap(),
            12,
        );
        assert_eq!(
            e.to_string(),
            "no permission to open /dev/vfio/12: run as root, or give your user the group file \
             (`chown $USER /dev/vfio/12`) and a memlock limit large enough for the DMA memory \
             (`ulimit -l`)"
        );
        let e = open_error(
            VfioError::OpenGroup(io::Error::from_raw_os_error(libc::EBUSY), "12".into()),
            &Sysfs::default(),
            "03:00.0".parse().unwrap(),
            12,
        );
        assert!(matches!(e, Error::GroupBusy { group: 12 }));
    }

    #[test]
    fn a_missing_container_says_to_load_vfio_pci() {
        let e = open_error(
            VfioError::OpenContainer(io::Error::from_raw_os_error(libc::ENOENT)),
            &Sysfs::default(),
            "03:00.0".parse().unwrap(),
            1,
        );
        assert!(e.to_string().contains("`modprobe vfio-pci`"), "{e}");
        assert!(
            std::error::Error::source(&e).is_some(),
            "the OS error is kept"
        );
    }

    #[test]
    fn a_group_found_non_viable_by_the_kernel_lists_the_culprits_from_sysfs() {
        let f = FakeSys::new();
        f.device(
            "0000:03:00.0",
            0x020000,
            (0x8086, 0x10c9),
            Some(9),
            Some("vfio-pci"),
        );
        f.device(
            "0000:03:00.1",
            0x020000,
            (0x8086, 0x10c9),
            Some(9),
            Some("igb"),
        );
        let e = open_error(
            VfioError::GroupViable,
            &f.sysfs(),
            "03:00.0".parse().unwrap(),
            9,
        );
        assert!(
            e.to_string().contains("\n  0000:03:00.1 (driver: igb)\n"),
            "{e}"
        );
    }

    #[test]
    fn rich_errors_map_onto_the_hal_errors_the_trait_promises() {
        let bdf: Bdf = "03:00.0".parse().unwrap();
        let fallback = ringfab_hal::Error::Unsupported;
        assert_eq!(
            Error::BarNotMemory { bdf, index: 2 }.to_hal(fallback),
            ringfab_hal::Error::BarUnavailable { index: 2 }
        );
        assert_eq!(
            Error::NoSuchVector {
                vector: 9,
                count: 4
            }
            .to_hal(fallback),
            ringfab_hal::Error::InterruptUnavailable { vector: 9 }
        );
        assert_eq!(
            Error::IovaExhausted { len: 1 }.to_hal(ringfab_hal::Error::DmaAlloc { len: 1 }),
            ringfab_hal::Error::DmaAlloc { len: 1 }
        );
    }

    #[test]
    fn the_get_info_request_number_matches_the_kernel_header() {
        // _IO(';', 112): no direction, no size.
        assert_eq!(VFIO_IOMMU_GET_INFO, 0x3b70);
    }
}
