//! What `devbind` does: list network devices, and move one between drivers through sysfs.
//!
//! Binding follows the kernel's documented method (Documentation/ABI/testing/sysfs-bus-pci,
//! `driver_override`): write the driver's name to the device's `driver_override`, unbind it from
//! its current driver, and ask the bus to probe it again (`drivers_probe`); only the named driver
//! may then claim it. Unbinding clears the override, so that the next probe (or `--bind <host
//! driver>`) gives the device back. A device that carries the machine's default route is not
//! taken from its driver unless forced.

use std::fmt::Write as _;
use std::fs::OpenOptions;
use std::io::Write as _;
use std::path::Path;

use crate::error::{Error, Result};
use crate::sysfs::Sysfs;
use crate::Bdf;

/// One network-class PCI device, as `devbind --status` shows it.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct NetDevice {
    /// Its address.
    pub bdf: Bdf,
    /// Vendor id.
    pub vendor: u16,
    /// Device id.
    pub device: u16,
    /// The driver bound to it.
    pub driver: Option<String>,
    /// Its IOMMU group.
    pub iommu_group: Option<u32>,
    /// Its network interfaces (none when bound to vfio-pci).
    pub interfaces: Vec<String>,
    /// The interface that carries the default route, if one does.
    pub active_route: Option<String>,
}

/// PCI base class of network controllers (PCI Code and ID Assignment spec, class 02h).
const CLASS_NETWORK: u32 = 0x02;

/// Every network-class PCI device (class 0x02xxxx).
///
/// # Errors
/// [`Error::Sysfs`] if the device list cannot be read.
pub fn net_devices(sys: &Sysfs) -> Result<Vec<NetDevice>> {
    let mut out = Vec::new();
    for bdf in sys.devices()? {
        let Ok(class) = sys.class(bdf) else { continue };
        if class >> 16 != CLASS_NETWORK {
            continue;
        }
        let (vendor, device) = sys.ids(bdf).unwrap_or((0xffff, 0xffff));
        out.push(NetDevice {
            bdf,
            vendor,
            device,
            driver: sys.driver(bdf),
            iommu_group: sys.iommu_group(bdf),
            interfaces: sys.interfaces_of(bdf),
            active_route: sys.active_route_interface(bdf),
        });
    }
    Ok(out)
}

/// The `--status` table.
pub fn format_status(devices: &[NetDevice]) -> String {
    let mut s = format!(
        "{:<14} {:<10} {:<12} {:<6} {}\n",
        "BDF", "ID", "DRIVER", "GROUP", "INTERFACES"
    );
    if devices.is_empty() {
        s.push_str("(no network devices)\n");
    }
    for d in devices {
        let group = d
            .iommu_group
            .map_or_else(|| "none".to_owned(), |g| g.to_string());
        let mut ifs = d.interfaces.join(",");
        if let Some(r) = &d.active_route {
            let _ = write!(ifs, " *active default route via {r}*");
        }
        let _ = writeln!(
            s,
            "{:<14} {:04x}:{:04x}  {:<12} {:<6} {}",
            d.bdf.to_string(),
            d.vendor,
            d.device,
            d.driver.as_deref().unwrap_or("-"),
            group,
            ifs
        );
    }
    s
}

/// Writes `value` to an existing sysfs control file (never creates one), opened as the shell's
/// `echo value > file` opens it (O_TRUNC, which sysfs ignores and a plain file needs).
fn write_ctl(path: &Path, value: &str) -> Result<()> {
    OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(path)
        .and_then(|mut f| f.write_all(value.as_bytes()))
        .map_err(|source| Error::SysfsWrite {
            path: path.to_owned(),
            value: value.trim_end().to_owned(),
            source,
        })
}

fn refuse_active_route(sys: &Sysfs, bdf: Bdf, force: bool) -> Result<()> {
    match sys.active_route_interface(bdf) {
        Some(interface) if !force => Err(Error::ActiveRoute { bdf, interface }),
        _ => Ok(()),
    }
}

/// What a bind or unbind did.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct BindOutcome {
    /// The driver before.
    pub before: Option<String>,
    /// The driver after, as sysfs shows it once the probe returned.
    pub after: Option<String>,
}

/// Binds `bdf` to `driver` (vfio-pci, or a host driver to give it back).
///
/// # Errors
/// [`Error::DeviceNotFound`]; [`Error::DriverNotLoaded`] if `driver` is not registered (checked
/// before the device leaves its current driver); [`Error::ActiveRoute`] if the device carries the
/// default route and `force` is false; [`Error::SysfsWrite`] if a control file refuses the write
/// (not root).
pub fn bind(sys: &Sysfs, bdf: Bdf, driver: &str, force: bool) -> Result<BindOutcome> {
    let dev = sys.existing_device(bdf)?;
    let before = sys.driver(bdf);
    if before.as_deref() == Some(driver) {
        return Ok(BindOutcome {
            after: before.clone(),
            before,
        });
    }
    if !sys.driver_dir(driver).exists() {
        return Err(Error::DriverNotLoaded {
            driver: driver.to_owned(),
        });
    }
    if before.is_some() {
        refuse_active_route(sys, bdf, force)?;
    }
    let name = bdf.to_string();
    write_ctl(&dev.join("driver_override"), driver)?;
    if before.is_some() {
        write_ctl(&dev.join("driver/unbind"), &name)?;
    }
    write_ctl(&sys.root().join("bus/pci/drivers_probe"), &name)?;
    Ok(BindOutcome {
        before,
        after: sys.driver(bdf),
    })
}

/// Unbinds `bdf` from its driver and clears its `driver_override`.
///
/// # Errors
/// [`Error::DeviceNotFound`]; [`Error::ActiveRoute`] if the device carries the default route and
/// `force` is false; [`Error::SysfsWrite`] if a control file refuses the write (not root).
pub fn unbind(sys: &Sysfs, bdf: Bdf, force: bool) -> Result<BindOutcome> {
    let dev = sys.existing_device(bdf)?;
    let before = sys.driver(bdf);
    if before.is_some() {
        refuse_active_route(sys, bdf, force)?;
    }
    // A newline clears the override (drivers/pci/pci-sysfs.c, driver_override_store).
    write_ctl(&dev.join("driver_override"), "\n")?;
    if before.is_some() {
        write_ctl(&dev.join("driver/unbind"), &bdf.to_string())?;
    }
    Ok(BindOutcome {
        before,
        after: sys.driver(bdf),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sysfs::fake::FakeSys;

    fn bdf(s: &str) -> Bdf {
        s.parse().unwrap()
    }

    fn two_nics() -> FakeSys {
        let f = FakeSys::new();
        f.device(
            "0000:03:00.0",
            0x020000,
            (0x8086, 0x10c9),
            Some(3),
            Some("igb"),
        );
        f.device(
            "0000:0b:00.0",
            0x020000,
            (0x8086, 0x10d3),
            Some(11),
            Some("vfio-pci"),
        );
        f.device(
            "0000:00:1f.2",
            0x010601,
            (0x8086, 0x2922),
            Some(2),
            Some("ahci"),
        );
        f.interface("eth0", "0000:03:00.0");
        f.driver("vfio-pci");
        f
    }

    #[test]
    fn status_lists_network_devices_only_with_driver_group_and_route() {
        let f = two_nics();
        f.default_route("eth0");
        let devs = net_devices(&f.sysfs()).unwrap();
        assert_eq!(devs.len(), 2, "the SATA controller is not listed");
        assert_eq!(devs[0].bdf, bdf("03:00.0"));
        assert_eq!(devs[0].driver.as_deref(), Some("igb"));
        assert_eq!(devs[0].iommu_group, Some(3));
        assert_eq!(devs[0].active_route.as_deref(), Some("eth0"));
        assert_eq!(devs[1].active_route, None);
        let table = format_status(&devs);
        assert_eq!(
            table,
            "BDF            ID         DRIVER       GROUP  INTERFACES\n\
             0000:03:00.0   8086:10c9  igb          3      eth0 *active default route via eth0*\n\
             0000:0b:00.0   8086:10d3  vfio-pci     11     \n"
        );
    }

    #[test]
    fn bind_writes_override_unbind_and_probe() {
        let f = two_nics();
        let out = bind(&f.sysfs(), bdf("03:00.0"), "vfio-pci", false).unwrap();
        assert_eq!(out.before.as_deref(), Some("igb"));
        let dev = Path::new("devices/pci0000:00/0000:03:00.0");
        assert_eq!(f.read(&dev.join("driver_override")), "vfio-pci");
        assert_eq!(
            f.read(Path::new("bus/pci/drivers/igb/unbind")),
            "0000:03:00.0"
        );
        assert_eq!(f.read(Path::new("bus/pci/drivers_probe")), "0000:03:00.0");
    }

    #[test]
    fn bind_refuses_the_device_that_carries_the_default_route_unless_forced() {
        let f = two_nics();
        f.default_route("eth0");
        let e = bind(&f.sysfs(), bdf("03:00.0"), "vfio-pci", false).unwrap_err();
        assert_eq!(
            e.to_string(),
            "refusing to take 0000:03:00.0 from its driver: its interface eth0 carries this \
             machine's default route, so unbinding it would cut the network (and a remote \
             session). Pass --force if you mean it"
        );
        // Nothing was written.
        let dev = Path::new("devices/pci0000:00/0000:03:00.0");
        assert_eq!(f.read(&dev.join("driver_override")), "(null)\n");
        assert_eq!(f.read(Path::new("bus/pci/drivers/igb/unbind")), "");
        assert_eq!(f.read(Path::new("bus/pci/drivers_probe")), "");
        let e = unbind(&f.sysfs(), bdf("03:00.0"), false).unwrap_err();
        assert!(matches!(e, Error::ActiveRoute { .. }));
        bind(&f.sysfs(), bdf("03:00.0"), "vfio-pci", true).unwrap();
        assert_eq!(
            f.read(Path::new("bus/pci/drivers/igb/unbind")),
            "0000:03:00.0"
        );
    }

    #[test]
    fn bind_to_a_driver_that_is_not_loaded_leaves_the_device_alone() {
        let f = two_nics();
        let e = bind(&f.sysfs(), bdf("03:00.0"), "e1000e", false).unwrap_err();
        assert_eq!(
            e.to_string(),
            "no driver 'e1000e' is registered with the PCI bus: load it first (`modprobe e1000e`)"
        );
        assert_eq!(f.read(Path::new("bus/pci/drivers/igb/unbind")), "");
    }

    #[test]
    fn binding_to_the_current_driver_writes_nothing() {
        let f = two_nics();
        let out = bind(&f.sysfs(), bdf("0b:00.0"), "vfio-pci", false).unwrap();
        assert_eq!(out.before, out.after);
        assert_eq!(f.read(Path::new("bus/pci/drivers_probe")), "");
    }

    #[test]
    fn unbind_clears_the_override_and_gives_back_with_bind() {
        let f = two_nics();
        unbind(&f.sysfs(), bdf("0b:00.0"), false).unwrap();
        let dev = Path::new("devices/pci0000:00/0000:0b:00.0");
        assert_eq!(f.read(&dev.join("driver_override")), "\n");
        assert_eq!(
            f.read(Path::new("bus/pci/drivers/vfio-pci/unbind")),
            "0000:0b:00.0"
        );
        // The kernel would now leave it unbound; give it to igb.
        f.bind_link("0000:0b:00.0", None);
        let out = bind(&f.sysfs(), bdf("0b:00.0"), "igb", false).unwrap();
        assert_eq!(out.before, None);
        assert_eq!(f.read(&dev.join("driver_override")), "igb");
        assert_eq!(f.read(Path::new("bus/pci/drivers_probe")), "0000:0b:00.0");
    }

    #[test]
    fn an_unknown_device_is_not_found() {
        let f = two_nics();
        assert!(matches!(
            bind(&f.sysfs(), bdf("05:00.0"), "vfio-pci", false),
            Err(Error::DeviceNotFound { .. })
        ));
    }
}
