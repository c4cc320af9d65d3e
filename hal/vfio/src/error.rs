//! [`Error`]: everything that can go wrong opening and driving a device through VFIO, each variant
//! naming the failed operation and saying what to do about it.

use std::fmt::Write as _;
use std::io;
use std::path::PathBuf;

use crate::Bdf;

/// One device of an IOMMU group and the driver it is bound to.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct GroupMember {
    /// The device's sysfs name (a PCI address).
    pub name: String,
    /// The driver bound to it, if any.
    pub driver: Option<String>,
}

fn members(list: &[GroupMember]) -> String {
    let mut s = String::new();
    for m in list {
        let _ = write!(
            s,
            "\n  {} (driver: {})",
            m.name,
            m.driver.as_deref().unwrap_or("none")
        );
    }
    s
}

fn driver_name(d: &Option<String>) -> &str {
    d.as_deref().unwrap_or("no driver")
}

/// A failure of this crate, with the fix in its message.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The text given as a PCI address is not one.
    #[error("'{input}' is not a PCI address: expected DDDD:BB:DD.F (as 0000:03:00.0) or BB:DD.F")]
    BadAddress {
        /// What was given.
        input: String,
    },
    /// No such PCI device in sysfs.
    #[error(
        "no PCI device {bdf} ({path} does not exist); `devbind --status` or `lspci -D` lists the \
         devices present"
    )]
    DeviceNotFound {
        /// The address asked for.
        bdf: Bdf,
        /// The sysfs directory that is missing.
        path: PathBuf,
    },
    /// The device has no IOMMU group: the IOMMU is off or absent.
    #[error(
        "{bdf} has no IOMMU group: the IOMMU is off or missing. Turn it on in the firmware \
         (VT-d / AMD-Vi) and on the kernel command line (intel_iommu=on, or amd_iommu=on), then \
         reboot. vfio's no-IOMMU mode is not supported: it lets the device write anywhere in memory"
    )]
    NoIommuGroup {
        /// The device.
        bdf: Bdf,
    },
    /// The device is not bound to vfio-pci.
    #[error(
        "{bdf} is bound to {}, not vfio-pci. Bind it with `devbind --bind vfio-pci {bdf}`, or by \
         hand as root: `modprobe vfio-pci; echo vfio-pci > /sys/bus/pci/devices/{bdf}/driver_override; \
         echo {bdf} > /sys/bus/pci/devices/{bdf}/driver/unbind; echo {bdf} > /sys/bus/pci/drivers_probe`",
        driver_name(.driver)
    )]
    NotBoundToVfio {
        /// The device.
        bdf: Bdf,
        /// The driver it is bound to now (`None`: unbound).
        driver: Option<String>,
    },
    /// Another device of the IOMMU group is bound to a host driver.
    #[error(
        "IOMMU group {group} of {bdf} is not viable: every device in a group must be bound to \
         vfio-pci or to no driver, and these are not:{}\nBind each to vfio-pci \
         (`devbind --bind vfio-pci <bdf>`) or unbind it (`devbind --unbind <bdf>`); a PCIe \
         bridge or root port in the group is a platform limit (try another slot)",
        members(.others)
    )]
    GroupNotViable {
        /// The device asked for.
        bdf: Bdf,
        /// Its IOMMU group.
        group: u32,
        /// The devices of the group bound to other drivers.
        others: Vec<GroupMember>,
    },
    /// `/dev/vfio/vfio` could not be opened.
    #[error(
        "cannot open /dev/vfio/vfio: {source}. Load the VFIO modules (`modprobe vfio-pci`) and run \
         as root or with access to /dev/vfio"
    )]
    VfioUnavailable {
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The container does not offer the type-1 v2 IOMMU backend.
    #[error(
        "the VFIO container offers no TYPE1v2 IOMMU backend: load vfio_iommu_type1 \
         (`modprobe vfio_iommu_type1`) and check the IOMMU is on (intel_iommu=on / amd_iommu=on)"
    )]
    NoType1Iommu,
    /// No permission to open the group's device file.
    #[error(
        "no permission to open /dev/vfio/{group}: run as root, or give your user the group file \
         (`chown $USER /dev/vfio/{group}`) and a memlock limit large enough for the DMA memory \
         (`ulimit -l`)"
    )]
    Permission {
        /// The IOMMU group.
        group: u32,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The group's device file is held by another process (or another container).
    #[error(
        "/dev/vfio/{group} is busy: another process (a VM, another ringfab program) holds the \
         group; close it first"
    )]
    GroupBusy {
        /// The IOMMU group.
        group: u32,
    },
    /// A VFIO operation failed.
    #[error("VFIO: {op} failed: {source}")]
    Vfio {
        /// The operation.
        op: &'static str,
        /// What vfio-ioctls reported.
        #[source]
        source: vfio_ioctls::VfioError,
    },
    /// A system call failed.
    #[error("{op} failed: {source}")]
    Os {
        /// The operation.
        op: &'static str,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The BAR does not exist on this device (size 0).
    #[error("BAR {index} of {bdf} does not exist; `lspci -v -s {bdf}` lists the device's BARs")]
    BarMissing {
        /// The device.
        bdf: Bdf,
        /// The BAR number.
        index: u8,
    },
    /// The BAR is an I/O-port BAR, or VFIO does not allow mapping it.
    #[error(
        "BAR {index} of {bdf} is not a mappable memory BAR (an I/O-port BAR, or one vfio-pci \
         will not mmap); registers are reached through memory BARs only"
    )]
    BarNotMemory {
        /// The device.
        bdf: Bdf,
        /// The BAR number.
        index: u8,
    },
    /// Reading sysfs failed.
    #[error("reading {path} failed: {source}")]
    Sysfs {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// Writing a sysfs control file failed.
    #[error("writing '{value}' to {path} failed: {source} (run as root)")]
    SysfsWrite {
        /// The file.
        path: PathBuf,
        /// What was written.
        value: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// No IOVA space left for an allocation or mapping.
    #[error(
        "no IOVA space left for {len} bytes inside the ranges the IOMMU allows; free DMA memory or \
         map less"
    )]
    IovaExhausted {
        /// Bytes asked for.
        len: u64,
    },
    /// A zero-length or overflowing DMA request.
    #[error("invalid DMA request of {len} bytes")]
    DmaRequest {
        /// Bytes asked for.
        len: usize,
    },
    /// The IOMMU refused a mapping.
    #[error(
        "VFIO_IOMMU_MAP_DMA of {len} bytes failed: {source}; if it is ENOMEM, raise the memlock \
         limit (`ulimit -l`, or LimitMEMLOCK= in a systemd unit): VFIO pins DMA memory"
    )]
    DmaMap {
        /// Bytes asked for.
        len: u64,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The vector is beyond the device's MSI-X table, or the device has no MSI-X.
    #[error("MSI-X vector {vector} does not exist: the device has {count}")]
    NoSuchVector {
        /// The vector asked for.
        vector: u16,
        /// How many it has.
        count: u16,
    },
    /// `devbind` refused to take a device that carries the machine's default route.
    #[error(
        "refusing to take {bdf} from its driver: its interface {interface} carries this machine's \
         default route, so unbinding it would cut the network (and a remote session). Pass \
         --force if you mean it"
    )]
    ActiveRoute {
        /// The device.
        bdf: Bdf,
        /// Its network interface.
        interface: String,
    },
    /// The driver to bind to is not loaded.
    #[error(
        "no driver '{driver}' is registered with the PCI bus: load it first (`modprobe {driver}`)"
    )]
    DriverNotLoaded {
        /// The driver asked for.
        driver: String,
    },
}

impl Error {
    /// The nearest `ringfab_hal::Error`, for the [`Platform`](ringfab_hal::Platform) methods,
    /// whose error type carries no strings; `fallback` is what the operation maps to.
    pub(crate) fn to_hal(&self, fallback: ringfab_hal::Error) -> ringfab_hal::Error {
        match *self {
            Error::BarMissing { index, .. } | Error::BarNotMemory { index, .. } => {
                ringfab_hal::Error::BarUnavailable { index }
            }
            Error::NoSuchVector { vector, .. } => {
                ringfab_hal::Error::InterruptUnavailable { vector }
            }
            _ => fallback,
        }
    }
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
