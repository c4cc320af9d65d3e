//! [`Sysfs`]: what the kernel says about PCI devices, IOMMU groups and routes, read from a
//! configurable root so that tests run on a fake tree.
//!
//! Everything `open` checks before it touches `/dev/vfio` lives here, as pure reads of
//! files and symlinks: the device exists, has an IOMMU group, is bound to vfio-pci, and its group
//! is viable. The layout used is the kernel's (Documentation/ABI/testing/sysfs-bus-pci):
//!
//! ```text
//! <sys>/bus/pci/devices/<bdf>/{class,vendor,device}   "0x020000\n", "0x8086\n", …
//! <sys>/bus/pci/devices/<bdf>/iommu_group -> …/kernel/iommu_groups/<n>
//! <sys>/bus/pci/devices/<bdf>/driver      -> …/bus/pci/drivers/<name>
//! <sys>/kernel/iommu_groups/<n>/devices/<bdf>
//! <sys>/class/net/<ifname>/device         -> …/<bdf>
//! <proc>/net/route, <proc>/net/ipv6_route
//! ```

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::error::{Error, GroupMember, Result};
use crate::Bdf;

/// The driver VFIO devices are bound to.
pub const VFIO_PCI: &str = "vfio-pci";

/// Roots of sysfs and procfs (`/sys` and `/proc` on a real machine).
#[derive(Clone, Debug)]
pub struct Sysfs {
    sys: PathBuf,
    proc: PathBuf,
}

impl Default for Sysfs {
    fn default() -> Sysfs {
        Sysfs::new("/sys", "/proc")
    }
}

/// Last path component of a symlink's target (a driver or group name), if the link exists.
fn link_name(path: &Path) -> Option<String> {
    let target = fs::read_link(path).ok()?;
    Some(target.file_name()?.to_string_lossy().into_owned())
}

fn read_hex(path: &Path) -> Result<u32> {
    let text = fs::read_to_string(path).map_err(|source| Error::Sysfs {
        path: path.to_owned(),
        source,
    })?;
    let t = text.trim();
    u32::from_str_radix(t.trim_start_matches("0x"), 16).map_err(|_| Error::Sysfs {
        path: path.to_owned(),
        source: io::Error::new(io::ErrorKind::InvalidData, format!("not hex: '{t}'")),
    })
}

impl Sysfs {
    /// Roots at `sys` (for `/sys`) and `proc` (for `/proc`).
    pub fn new(sys: impl Into<PathBuf>, proc: impl Into<PathBuf>) -> Sysfs {
        Sysfs {
            sys: sys.into(),
            proc: proc.into(),
        }
    }

    /// The sysfs root.
    pub fn root(&self) -> &Path {
        &self.sys
    }

    /// `<sys>/bus/pci/devices/<bdf>`.
    pub fn device_dir(&self, bdf: Bdf) -> PathBuf {
        self.sys.join("bus/pci/devices").join(bdf.to_string())
    }

    /// `<sys>/bus/pci/drivers/<driver>`.
    pub fn driver_dir(&self, driver: &str) -> PathBuf {
        self.sys.join("bus/pci/drivers").join(driver)
    }

    /// The device's directory, or [`Error::DeviceNotFound`].
    ///
    /// # Errors
    /// [`Error::DeviceNotFound`] if the directory is absent.
    pub fn existing_device(&self, bdf: Bdf) -> Result<PathBuf> {
        let path = self.device_dir(bdf);
        if path.exists() {
            Ok(path)
        } else {
            Err(Error::DeviceNotFound { bdf, path })
        }
    }

    /// Every PCI device, sorted by address (names that are not PCI addresses are skipped).
    ///
    /// # Errors
    /// [`Error::Sysfs`] if the device directory cannot be listed.
    pub fn devices(&self) -> Result<Vec<Bdf>> {
        let dir = self.sys.join("bus/pci/devices");
        let entries = fs::read_dir(&dir).map_err(|source| Error::Sysfs { path: dir, source })?;
        let mut v: Vec<Bdf> = entries
            .filter_map(|e| Bdf::parse(&e.ok()?.file_name().to_string_lossy()).ok())
            .collect();
        v.sort();
        Ok(v)
    }

    /// The 24-bit class code (0x02xxxx for network controllers).
    ///
    /// # Errors
    /// [`Error::Sysfs`] if the `class` file is missing or malformed.
    pub fn class(&self, bdf: Bdf) -> Result<u32> {
        read_hex(&self.device_dir(bdf).join("class"))
    }

    /// Vendor and device ids.
    ///
    /// # Errors
    /// [`Error::Sysfs`] if the `vendor` or `device` file is missing or malformed.
    pub fn ids(&self, bdf: Bdf) -> Result<(u16, u16)> {
        let dir = self.device_dir(bdf);
        Ok((
            read_hex(&dir.join("vendor"))? as u16,
            read_hex(&dir.join("device"))? as u16,
        ))
    }

    /// The driver bound to the device, if any.
    pub fn driver(&self, bdf: Bdf) -> Option<String> {
        link_name(&self.device_dir(bdf).join("driver"))
    }

    /// The device's IOMMU group, `None` when it has none (no IOMMU).
    pub fn iommu_group(&self, bdf: Bdf) -> Option<u32> {
        link_name(&self.device_dir(bdf).join("iommu_group"))?
            .parse()
            .ok()
    }

    /// The sysfs names of the devices in IOMMU group `group`, sorted.
    ///
    /// # Errors
    /// [`Error::Sysfs`] if the group's device directory cannot be listed.
    pub fn group_devices(&self, group: u32) -> Result<Vec<String>> {
        let dir = self
            .sys
            .join("kernel/iommu_groups")
            .join(group.to_string())
            .join("devices");
        let entries = fs::read_dir(&dir).map_err(|source| Error::Sysfs { path: dir, source })?;
        let mut v: Vec<String> = entries
            .filter_map(|e| Some(e.ok()?.file_name().to_string_lossy().into_owned()))
            .collect();
        v.sort();
        Ok(v)
    }

    /// Everything `open` checks before touching `/dev/vfio`: the device exists, has an IOMMU
    /// group, is bound to vfio-pci, and every other device in its group is bound to vfio-pci or
    /// to no driver (what the kernel calls a viable group). Returns the group.
    ///
    /// # Errors
    /// [`Error::DeviceNotFound`], [`Error::NoIommuGroup`], [`Error::NotBoundToVfio`],
    /// [`Error::GroupNotViable`] (listing the offending devices), or [`Error::Sysfs`].
    pub fn check_vfio_ready(&self, bdf: Bdf) -> Result<u32> {
        self.existing_device(bdf)?;
        let group = self.iommu_group(bdf).ok_or(Error::NoIommuGroup { bdf })?;
        let driver = self.driver(bdf);
        if driver.as_deref() != Some(VFIO_PCI) {
            return Err(Error::NotBoundToVfio { bdf, driver });
        }
        let others = self.non_viable_members(group)?;
        if others.is_empty() {
            Ok(group)
        } else {
            Err(Error::GroupNotViable { bdf, group, others })
        }
    }

    /// The devices of `group` that make it non-viable: bound to a driver other than vfio-pci.
    /// As the kernel does (`vfio_dev_driver_allowed`, drivers/vfio/group.c), pci-stub is
    /// accepted, and so is pcieport, the driver of bridges, whose own DMA is no threat.
    ///
    /// # Errors
    /// [`Error::Sysfs`] if the group's device directory cannot be listed.
    pub fn non_viable_members(&self, group: u32) -> Result<Vec<GroupMember>> {
        let mut out = Vec::new();
        for name in self.group_devices(group)? {
            let driver = link_name(&self.sys.join("bus/pci/devices").join(&name).join("driver"));
            let ok = matches!(
                driver.as_deref(),
                None | Some(VFIO_PCI) | Some("pci-stub") | Some("pcieport")
            );
            if !ok {
                out.push(GroupMember { name, driver });
            }
        }
        Ok(out)
    }

    /// The network interfaces whose device is `bdf` or sits below it: `<sys>/class/net/*/device`
    /// resolved, so that virtio-net (whose interface hangs off `<bdf>/virtioN`) is found too.
    pub fn interfaces_of(&self, bdf: Bdf) -> Vec<String> {
        let dir = self.sys.join("class/net");
        let Ok(entries) = fs::read_dir(&dir) else {
            return Vec::new();
        };
        let want = bdf.to_string();
        let mut v: Vec<String> = entries
            .filter_map(|e| {
                let e = e.ok()?;
                let dev = fs::canonicalize(e.path().join("device")).ok()?;
                dev.components()
                    .any(|c| c.as_os_str() == want.as_str())
                    .then(|| e.file_name().to_string_lossy().into_owned())
            })
            .collect();
        v.sort();
        v
    }

    /// The interfaces that carry a default route (IPv4 `<proc>/net/route`, IPv6
    /// `<proc>/net/ipv6_route`), routes that are up only.
    pub fn default_route_interfaces(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Ok(text) = fs::read_to_string(self.proc.join("net/route")) {
            out.extend(parse_ipv4_default_routes(&text));
        }
        if let Ok(text) = fs::read_to_string(self.proc.join("net/ipv6_route")) {
            out.extend(parse_ipv6_default_routes(&text));
        }
        out.sort();
        out.dedup();
        out
    }

    /// The interface of `bdf` that carries a default route, if one does.
    pub fn active_route_interface(&self, bdf: Bdf) -> Option<String> {
        let routes = self.default_route_interfaces();
        self.interfaces_of(bdf)
            .into_iter()
            .find(|i| routes.contains(i))
    }
}

/// `RTF_UP` in the routes' flags column (include/uapi/linux/route.h).
const RTF_UP: u32 = 0x1;

/// Interfaces with an up IPv4 route of destination 0 and mask 0. Columns (tab-separated, hex):
/// Iface Destination Gateway Flags RefCnt Use Metric Mask MTU Window IRTT.
fn parse_ipv4_default_routes(text: &str) -> Vec<String> {
    text.lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let (iface, dest, flags, mask) = (f.first()?, f.get(1)?, f.get(3)?, f.get(7)?);
            let flags = u32::from_str_radix(flags, 16).ok()?;
            let zero = |s: &str| u32::from_str_radix(s, 16).ok() == Some(0);
            (zero(dest) && zero(mask) && flags & RTF_UP != 0).then(|| (*iface).to_owned())
        })
        .collect()
}

/// Interfaces with an up IPv6 route to ::/0, other than `lo` (where the kernel parks unreachable
/// defaults). Columns: dest plen src splen nexthop metric refcnt use flags iface.
fn parse_ipv6_default_routes(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let (dest, plen, flags, iface) = (f.first()?, f.get(1)?, f.get(8)?, f.get(9)?);
            let flags = u32::from_str_radix(flags, 16).ok()?;
            let default = dest.bytes().all(|b| b == b'0') && *plen == "00";
            (default && flags & RTF_UP != 0 && *iface != "lo").then(|| (*iface).to_owned())
        })
        .collect()
}

#[cfg(test)]
pub(crate) mod fake {
    //! A fake sysfs/procfs tree in a temporary directory, removed on drop.

    use std::fs;
    use std::os::unix::fs::symlink;
    use std::path::{Path, PathBuf};
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::Sysfs;

    pub(crate) struct FakeSys {
        pub(crate) dir: PathBuf,
    }

    impl Drop for FakeSys {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.dir);
        }
    }

    impl FakeSys {
        pub(crate) fn new() -> FakeSys {
            static N: AtomicU32 = AtomicU32::new(0);
            let dir = std::env::temp_dir().join(format!(
                "ringfab-vfio-sysfs-{}-{}",
                std::process::id(),
                N.fetch_add(1, Ordering::SeqCst)
            ));
            let _ = fs::remove_dir_all(&dir);
            for d in [
                "sys/bus/pci/devices",
                "sys/devices/pci0000:00",
                "sys/class/net",
                "sys/kernel/iommu_groups",
                "proc/net",
            ] {
                fs::create_dir_all(dir.join(d)).unwrap();
            }
            fs::write(dir.join("sys/bus/pci/drivers_probe"), "").unwrap();
            fs::write(
                dir.join("proc/net/route"),
                "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n",
            )
            .unwrap();
            FakeSys { dir }
        }

        pub(crate) fn sysfs(&self) -> Sysfs {
            Sysfs::new(self.dir.join("sys"), self.dir.join("proc"))
        }

        pub(crate) fn sys(&self, rel: &str) -> PathBuf {
            self.dir.join("sys").join(rel)
        }

        /// A driver directory with `bind`/`unbind` files, as the kernel has.
        pub(crate) fn driver(&self, name: &str) -> PathBuf {
            let d = self.sys(&format!("bus/pci/drivers/{name}"));
            if !d.exists() {
                fs::create_dir_all(&d).unwrap();
                fs::write(d.join("bind"), "").unwrap();
                fs::write(d.join("unbind"), "").unwrap();
            }
            d
        }

        /// A PCI device with class/vendor/device, in `group` (if any), bound to `driver`.
        pub(crate) fn device(
            &self,
            bdf: &str,
            class: u32,
            ids: (u16, u16),
            group: Option<u32>,
            driver: Option<&str>,
        ) {
            let real = self.sys(&format!("devices/pci0000:00/{bdf}"));
            fs::create_dir_all(&real).unwrap();
            fs::write(real.join("class"), format!("0x{class:06x}\n")).unwrap();
            fs::write(real.join("vendor"), format!("0x{:04x}\n", ids.0)).unwrap();
            fs::write(real.join("device"), format!("0x{:04x}\n", ids.1)).unwrap();
            fs::write(real.join("driver_override"), "(null)\n").unwrap();
            symlink(&real, self.sys(&format!("bus/pci/devices/{bdf}"))).unwrap();
            if let Some(g) = group {
                let gdir = self.sys(&format!("kernel/iommu_groups/{g}/devices"));
                fs::create_dir_all(&gdir).unwrap();
                symlink(&real, gdir.join(bdf)).unwrap();
                symlink(
                    self.sys(&format!("kernel/iommu_groups/{g}")),
                    real.join("iommu_group"),
                )
                .unwrap();
            }
            if let Some(d) = driver {
                self.bind_link(bdf, Some(d));
            }
        }

        /// Points the device's `driver` link at `driver` (or removes it), as the kernel would.
        pub(crate) fn bind_link(&self, bdf: &str, driver: Option<&str>) {
            let link = self.sys(&format!("devices/pci0000:00/{bdf}/driver"));
            let _ = fs::remove_file(&link);
            if let Some(d) = driver {
                symlink(self.driver(d), link).unwrap();
            }
        }

        pub(crate) fn interface(&self, name: &str, bdf: &str) {
            self.interface_at(name, &format!("devices/pci0000:00/{bdf}"));
        }

        /// An interface whose `device` link points at `rel` (below the sysfs root).
        pub(crate) fn interface_at(&self, name: &str, rel: &str) {
            let d = self.sys(&format!("class/net/{name}"));
            fs::create_dir_all(&d).unwrap();
            fs::create_dir_all(self.sys(rel)).unwrap();
            symlink(self.sys(rel), d.join("device")).unwrap();
        }

        pub(crate) fn default_route(&self, iface: &str) {
            let p = self.dir.join("proc/net/route");
            let mut s = fs::read_to_string(&p).unwrap();
            s.push_str(&format!(
                "{iface}\t00000000\t0102A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0\n"
            ));
            fs::write(p, s).unwrap();
        }

        pub(crate) fn read(&self, rel: &Path) -> String {
            fs::read_to_string(self.dir.join("sys").join(rel)).unwrap()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fake::FakeSys;
    use super::*;

    fn bdf(s: &str) -> Bdf {
        s.parse().unwrap()
    }

    #[test]
    fn group_driver_and_ids_are_read_from_the_links_and_files() {
        let f = FakeSys::new();
        f.device(
            "0000:03:00.0",
            0x020000,
            (0x8086, 0x10c9),
            Some(7),
            Some("igb"),
        );
        let s = f.sysfs();
        let d = bdf("03:00.0");
        assert_eq!(s.iommu_group(d), Some(7));
        assert_eq!(s.driver(d).as_deref(), Some("igb"));
        assert_eq!(s.ids(d).unwrap(), (0x8086, 0x10c9));
        assert_eq!(s.class(d).unwrap(), 0x020000);
        assert_eq!(s.group_devices(7).unwrap(), vec!["0000:03:00.0"]);
        assert_eq!(s.devices().unwrap(), vec![d]);
    }

    #[test]
    fn a_ready_device_yields_its_group() {
        let f = FakeSys::new();
        f.device(
            "0000:03:00.0",
            0x020000,
            (0x8086, 0x10c9),
            Some(4),
            Some("vfio-pci"),
        );
        assert_eq!(f.sysfs().check_vfio_ready(bdf("03:00.0")).unwrap(), 4);
    }

    #[test]
    fn a_missing_device_is_reported_with_where_to_look() {
        let f = FakeSys::new();
        let e = f.sysfs().check_vfio_ready(bdf("0000:09:00.0")).unwrap_err();
        assert!(matches!(e, Error::DeviceNotFound { .. }));
        let msg = e.to_string();
        assert!(msg.starts_with("no PCI device 0000:09:00.0 ("), "{msg}");
        assert!(msg.ends_with("`devbind --status` or `lspci -D` lists the devices present"));
    }

    #[test]
    fn no_iommu_group_says_to_enable_the_iommu() {
        let f = FakeSys::new();
        f.device(
            "0000:03:00.0",
            0x020000,
            (0x8086, 0x10c9),
            None,
            Some("vfio-pci"),
        );
        let e = f.sysfs().check_vfio_ready(bdf("03:00.0")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "0000:03:00.0 has no IOMMU group: the IOMMU is off or missing. Turn it on in the \
             firmware (VT-d / AMD-Vi) and on the kernel command line (intel_iommu=on, or \
             amd_iommu=on), then reboot. vfio's no-IOMMU mode is not supported: it lets the \
             device write anywhere in memory"
        );
    }

    #[test]
    fn a_device_on_a_host_driver_or_none_is_not_ready_and_the_message_says_how_to_bind() {
        let f = FakeSys::new();
        f.device(
            "0000:03:00.0",
            0x020000,
            (0x8086, 0x10c9),
            Some(4),
            Some("igb"),
        );
        f.device("0000:04:00.0", 0x020000, (0x8086, 0x10c9), Some(5), None);
        let s = f.sysfs();
        let e = s.check_vfio_ready(bdf("03:00.0")).unwrap_err();
        assert!(matches!(&e, Error::NotBoundToVfio { driver: Some(d), .. } if d == "igb"));
        assert_eq!(
            e.to_string(),
            "0000:03:00.0 is bound to igb, not vfio-pci. Bind it with `devbind --bind vfio-pci \
             0000:03:00.0`, or by hand as root: `modprobe vfio-pci; echo vfio-pci > \
             /sys/bus/pci/devices/0000:03:00.0/driver_override; echo 0000:03:00.0 > \
             /sys/bus/pci/devices/0000:03:00.0/driver/unbind; echo 0000:03:00.0 > \
             /sys/bus/pci/drivers_probe`"
        );
        let e = s.check_vfio_ready(bdf("04:00.0")).unwrap_err();
        assert!(e
            .to_string()
            .starts_with("0000:04:00.0 is bound to no driver, not vfio-pci."));
    }

    #[test]
    fn a_group_with_a_device_on_a_host_driver_is_not_viable_and_lists_it() {
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
        f.device("0000:03:00.2", 0x020000, (0x8086, 0x10c9), Some(9), None);
        f.device(
            "0000:00:1c.0",
            0x060400,
            (0x8086, 0x2448),
            Some(9),
            Some("pcieport"),
        );
        f.device(
            "0000:03:00.3",
            0x0c0330,
            (0x8086, 0x1234),
            Some(9),
            Some("xhci_hcd"),
        );
        let e = f.sysfs().check_vfio_ready(bdf("03:00.0")).unwrap_err();
        let Error::GroupNotViable { group, others, .. } = &e else {
            panic!("{e:?}")
        };
        assert_eq!(*group, 9);
        assert_eq!(
            others.iter().map(|m| m.name.as_str()).collect::<Vec<_>>(),
            ["0000:03:00.1", "0000:03:00.3"]
        );
        assert_eq!(
            e.to_string(),
            "IOMMU group 9 of 0000:03:00.0 is not viable: every device in a group must be bound \
             to vfio-pci or to no driver, and these are not:\n  0000:03:00.1 (driver: igb)\n  \
             0000:03:00.3 (driver: xhci_hcd)\nBind each to vfio-pci (`devbind --bind vfio-pci \
             <bdf>`) or unbind it (`devbind --unbind <bdf>`); a PCIe bridge or root port in the \
             group is a platform limit (try another slot)"
        );
    }

    #[test]
    fn default_routes_come_from_ipv4_and_ipv6_tables_and_map_to_the_device() {
        let f = FakeSys::new();
        f.device(
            "0000:03:00.0",
            0x020000,
            (0x8086, 0x10c9),
            Some(1),
            Some("igb"),
        );
        f.device(
            "0000:04:00.0",
            0x020000,
            (0x8086, 0x10c9),
            Some(2),
            Some("igb"),
        );
        f.interface("eth0", "0000:03:00.0");
        f.interface("eth1", "0000:04:00.0");
        let s = f.sysfs();
        assert_eq!(s.active_route_interface(bdf("03:00.0")), None);
        f.default_route("eth0");
        // A non-default route through eth1 does not count.
        let p = f.dir.join("proc/net/route");
        let mut t = std::fs::read_to_string(&p).unwrap();
        t.push_str("eth1\t0000A8C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n");
        std::fs::write(&p, t).unwrap();
        assert_eq!(
            s.active_route_interface(bdf("03:00.0")).as_deref(),
            Some("eth0")
        );
        assert_eq!(s.active_route_interface(bdf("04:00.0")), None);
        std::fs::write(
            f.dir.join("proc/net/ipv6_route"),
            "00000000000000000000000000000000 00 00000000000000000000000000000000 00 \
             fe800000000000000000000000000001 00000400 00000001 00000000 00000003 eth1\n\
             00000000000000000000000000000000 00 00000000000000000000000000000000 00 \
             00000000000000000000000000000000 ffffffff 00000001 00000000 00200200 lo\n",
        )
        .unwrap();
        assert_eq!(s.default_route_interfaces(), ["eth0", "eth1"]);
        assert_eq!(
            s.active_route_interface(bdf("04:00.0")).as_deref(),
            Some("eth1")
        );
    }

    #[test]
    fn a_virtio_interface_below_the_pci_device_is_found() {
        // virtio-net: /sys/class/net/eth0/device -> …/0000:00:03.0/virtio2
        let f = FakeSys::new();
        f.device(
            "0000:00:03.0",
            0x020000,
            (0x1af4, 0x1041),
            None,
            Some("virtio-pci"),
        );
        f.interface_at("eth0", "devices/pci0000:00/0000:00:03.0/virtio2");
        f.default_route("eth0");
        let s = f.sysfs();
        assert_eq!(s.interfaces_of(bdf("00:03.0")), ["eth0"]);
        assert_eq!(
            s.active_route_interface(bdf("00:03.0")).as_deref(),
            Some("eth0")
        );
    }
}
