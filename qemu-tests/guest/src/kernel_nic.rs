//! A NIC handed to the guest kernel's own driver: its modules loaded (the runner puts them in
//! `/modules/nic/`, numbered in load order), the device moved from vfio-pci to the kernel's
//! driver (`driver_override` + `drivers_probe`, what `ringfab_vfio::bind` does), and the
//! interface it becomes given an IPv4 address with busybox `ip` and brought up. The tests
//! against Linux hand NIC B of a pair over for good; the bench ([`crate::bench`]) hands both
//! NICs over and takes them back to vfio-pci (`nic::bind_all`) every round.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use ringfab_hal::MacAddr;
use ringfab_vfio::{bind, Bdf, Sysfs};

/// Where the runner puts the kernel's NIC drivers.
const NIC_MODULES: &str = "/modules/nic";
/// How long a probed device may take to show its interface, and a link to come up (QEMU's
/// PHY models finish autonegotiation in well under a second; TCG is slow).
const SETTLE: Duration = Duration::from_secs(10);

/// The Linux side of a pair: NIC B as the kernel's interface.
#[derive(Clone, Debug)]
pub(crate) struct LinuxIf {
    /// The interface's name (`eth0`).
    pub(crate) name: String,
    /// The address it was given.
    pub(crate) addr: Ipv4Addr,
    /// Its Ethernet address, as the kernel reports it.
    pub(crate) mac: MacAddr,
    /// Its IOMMU group and the group's domain type (`IOMMU group 6 identity`).
    pub(crate) iommu: String,
}

/// Loads every module in `/modules/nic/` not loaded yet, in name (= load) order, with busybox's
/// `insmod`; returns how many it loaded.
pub(crate) fn load_nic_drivers() -> Result<usize, String> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(NIC_MODULES)
        .map_err(|e| format!("listing {NIC_MODULES}: {e}"))?
        .flatten()
        .map(|e| e.path())
        .collect();
    files.sort();
    let mut loaded = 0;
    for f in files {
        // `02-igb.ko` → `igb`; the kernel lists a module under its name with `-` as `_`.
        let stem = f.file_stem().and_then(|s| s.to_str()).unwrap_or_default();
        let name = stem.split_once('-').map_or(stem, |(_, n)| n);
        if Path::new("/sys/module")
            .join(name.replace('-', "_"))
            .exists()
        {
            continue;
        }
        run("insmod", &[&f.to_string_lossy()])?;
        loaded += 1;
    }
    Ok(loaded)
}

/// Turns IPv6 off for every interface made from now on, so that the kernel sends nothing on
/// the test links but what the tests send (no router or neighbour solicitations, no MLD).
pub(crate) fn no_ipv6() -> Result<(), String> {
    for f in [
        "/proc/sys/net/ipv6/conf/default/disable_ipv6",
        "/proc/sys/net/ipv6/conf/all/disable_ipv6",
    ] {
        std::fs::write(f, "1").map_err(|e| format!("writing 1 to {f}: {e}"))?;
    }
    Ok(())
}

/// Moves `bdf` to the kernel's `driver` (from vfio-pci or from no driver), waits for its
/// network interface, gives it `addr`/`prefix_len` and brings it up; returns the interface once
/// its carrier is up.
pub(crate) fn hand_over(
    bdf: &str,
    driver: &str,
    addr: Ipv4Addr,
    prefix_len: u8,
) -> Result<LinuxIf, String> {
    let (name, iommu) = to_kernel(bdf, driver)?;
    run(
        "ip",
        &["addr", "add", &format!("{addr}/{prefix_len}"), "dev", &name],
    )?;
    run("ip", &["link", "set", &name, "up"])?;
    let carrier = format!("/sys/class/net/{name}/carrier");
    wait_for(
        || {
            let up = std::fs::read_to_string(&carrier).ok()?.trim() == "1";
            up.then_some(())
        },
        "its carrier",
    )
    .map_err(|e| format!("{name} ({bdf}, {driver}): {e}"))?;
    let address = format!("/sys/class/net/{name}/address");
    let text = std::fs::read_to_string(&address).map_err(|e| format!("reading {address}: {e}"))?;
    let mac = parse_mac(text.trim()).ok_or_else(|| format!("{address}: {text:?} is no MAC"))?;
    Ok(LinuxIf {
        name,
        addr,
        mac,
        iommu,
    })
}

/// Moves `bdf` to the kernel's `driver` (from vfio-pci or from no driver), its IOMMU group
/// given an identity domain first, and waits for its network interface, which it leaves without
/// an address and down. Returns the interface's name and the group as [`LinuxIf::iommu`] says
/// it.
pub(crate) fn to_kernel(bdf: &str, driver: &str) -> Result<(String, String), String> {
    let sys = Sysfs::default();
    let at: Bdf = bdf.parse().map_err(|e| format!("{bdf}: {e}"))?;
    bind::unbind(&sys, at, false).map_err(|e| format!("unbinding {bdf}: {e}"))?;
    let iommu = identity_domain(&sys, at)?;
    let out = bind::bind(&sys, at, driver, false).map_err(|e| format!("{bdf} to {driver}: {e}"))?;
    if out.after.as_deref() != Some(driver) {
        return Err(format!("{bdf} is bound to {:?}, not {driver}", out.after));
    }
    let name = wait_for(|| interface_of(bdf), "its network interface")
        .map_err(|e| format!("{bdf} ({driver}): {e}"))?;
    Ok((name, iommu))
}

/// Sends the interrupts of `bdf` (its MSI and MSI-X vectors, or its INTx line) to `cpu` alone
/// (`/proc/irq/N/smp_affinity_list`, Documentation/core-api/irq/irq-affinity.rst), so that the
/// kernel's receive work runs on the CPU the bench gives that side. Vectors the kernel has not
/// requested yet (no `/proc/irq/N`) are left out. Returns how many it steered.
pub(crate) fn steer_irqs(bdf: &str, cpu: usize) -> Result<usize, String> {
    let dev = Path::new("/sys/bus/pci/devices").join(bdf);
    let mut irqs: Vec<String> = std::fs::read_dir(dev.join("msi_irqs"))
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().into_string().ok())
                .collect()
        })
        .unwrap_or_default();
    if irqs.is_empty() {
        let line = dev.join("irq");
        let irq = std::fs::read_to_string(&line)
            .map_err(|e| format!("reading {}: {e}", line.display()))?;
        irqs.push(irq.trim().to_owned());
    }
    let mut steered = 0;
    for irq in irqs {
        let f = format!("/proc/irq/{irq}/smp_affinity_list");
        if !Path::new(&f).exists() {
            continue;
        }
        std::fs::write(&f, cpu.to_string()).map_err(|e| format!("writing {cpu} to {f}: {e}"))?;
        steered += 1;
    }
    Ok(steered)
}

/// Gives `bdf`'s IOMMU group (no driver bound) an identity domain (sysfs-kernel-iommu_groups:
/// `type`, writable since Linux 5.11), as `iommu=pt` does for every device: the kernel driver's
/// DMA is then not translated. Translated, every map and unmap of the kernel's DMA API is an
/// invalidation QEMU's vIOMMU emulates (`caching-mode=on`), which made the kernel's side of
/// the UDP exchange the slow one. ringfab's NIC keeps its VFIO domain. Returns the group and
/// its type, as the pass line says it.
fn identity_domain(sys: &Sysfs, bdf: Bdf) -> Result<String, String> {
    let group = sys
        .iommu_group(bdf)
        .ok_or_else(|| format!("{bdf} has no IOMMU group"))?;
    let path = format!("/sys/kernel/iommu_groups/{group}/type");
    std::fs::write(&path, "identity").map_err(|e| format!("writing identity to {path}: {e}"))?;
    let ty = std::fs::read_to_string(&path).map_err(|e| format!("reading {path}: {e}"))?;
    Ok(format!("IOMMU group {group} {}", ty.trim()))
}

/// `52:54:00:12:34:0b` as six bytes.
fn parse_mac(s: &str) -> Option<MacAddr> {
    let bytes: Vec<u8> = s
        .split(':')
        .map(|h| u8::from_str_radix(h, 16).ok())
        .collect::<Option<_>>()?;
    Some(MacAddr(bytes.try_into().ok()?))
}

/// The network interface of PCI function `bdf`: under the function itself (igb, e1000e), or
/// under the virtio device the function carries (`virtio_pci` → `virtioN` → `virtio_net`).
pub(crate) fn interface_of(bdf: &str) -> Option<String> {
    let dev = Path::new("/sys/bus/pci/devices").join(bdf);
    let first = |dir: PathBuf| {
        std::fs::read_dir(dir)
            .ok()?
            .flatten()
            .find_map(|e| e.file_name().into_string().ok())
    };
    if let Some(name) = first(dev.join("net")) {
        return Some(name);
    }
    std::fs::read_dir(&dev)
        .ok()?
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("virtio"))
        .find_map(|e| first(e.path().join("net")))
}

/// Asks `f` every 10 ms until it answers, for at most [`SETTLE`].
pub(crate) fn wait_for<T>(mut f: impl FnMut() -> Option<T>, what: &str) -> Result<T, String> {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return Ok(v);
        }
        if start.elapsed() > SETTLE {
            return Err(format!("no {what} after {SETTLE:?}"));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Runs busybox's `cmd` with `args`; its stderr is the error if it fails.
pub(crate) fn run(cmd: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .map_err(|e| format!("running {cmd}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{cmd} {} exited with {}: {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn macs_parse_as_sysfs_writes_them() {
        assert_eq!(
            parse_mac("52:54:00:12:34:0b"),
            Some(MacAddr([0x52, 0x54, 0, 0x12, 0x34, 0x0b]))
        );
        assert_eq!(parse_mac("52:54:00:12:34"), None);
        assert_eq!(parse_mac("52:54:00:12:34:zz"), None);
    }
}
