//! The `devbind` binary end to end, on a fake sysfs/procfs tree (never the real /sys).
#![cfg(target_os = "linux")]

use std::fs;
use std::os::unix::fs::symlink;
use std::path::PathBuf;
use std::process::Command;

struct Tree(PathBuf);

impl Drop for Tree {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// One igb NIC at 0000:03:00.0 in group 3, interface eth0, carrying the default route; vfio-pci
/// registered.
fn tree(name: &str) -> Tree {
    let t =
        Tree(std::env::temp_dir().join(format!("ringfab-devbind-{name}-{}", std::process::id())));
    let _ = fs::remove_dir_all(&t.0);
    let sys = t.0.join("sys");
    let dev = sys.join("devices/pci0000:00/0000:03:00.0");
    for d in [
        "bus/pci/devices",
        "bus/pci/drivers/igb",
        "bus/pci/drivers/vfio-pci",
        "class/net/eth0",
        "kernel/iommu_groups/3",
    ] {
        fs::create_dir_all(sys.join(d)).unwrap();
    }
    fs::create_dir_all(&dev).unwrap();
    fs::create_dir_all(t.0.join("proc/net")).unwrap();
    for (f, v) in [
        ("class", "0x020000\n"),
        ("vendor", "0x8086\n"),
        ("device", "0x10c9\n"),
        ("driver_override", "(null)\n"),
    ] {
        fs::write(dev.join(f), v).unwrap();
    }
    fs::write(sys.join("bus/pci/drivers/igb/unbind"), "").unwrap();
    fs::write(sys.join("bus/pci/drivers_probe"), "").unwrap();
    symlink(&dev, sys.join("bus/pci/devices/0000:03:00.0")).unwrap();
    symlink(sys.join("bus/pci/drivers/igb"), dev.join("driver")).unwrap();
    symlink(sys.join("kernel/iommu_groups/3"), dev.join("iommu_group")).unwrap();
    symlink(&dev, sys.join("class/net/eth0/device")).unwrap();
    fs::write(
        t.0.join("proc/net/route"),
        "Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\tMTU\tWindow\tIRTT\n\
         eth0\t00000000\t0102A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0\n",
    )
    .unwrap();
    t
}

fn devbind(t: &Tree, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_devbind"))
        .arg("--sysfs")
        .arg(t.0.join("sys"))
        .arg("--procfs")
        .arg(t.0.join("proc"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn status_shows_the_nic_its_driver_group_and_active_route() {
    let t = tree("status");
    let out = devbind(&t, &["--status"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains(
            "0000:03:00.0   8086:10c9  igb          3      eth0 *active default route via eth0*"
        ),
        "{text}"
    );
}

#[test]
fn bind_refuses_the_route_carrying_nic_and_force_overrides() {
    let t = tree("refuse");
    let out = devbind(&t, &["--bind", "vfio-pci", "03:00.0"]);
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.starts_with("devbind: refusing to take 0000:03:00.0"),
        "{err}"
    );
    let probe = t.0.join("sys/bus/pci/drivers_probe");
    assert_eq!(fs::read_to_string(&probe).unwrap(), "");

    // Forced: the writes happen; the fake kernel does not rebind, so devbind reports that.
    let out = devbind(&t, &["--bind", "vfio-pci", "03:00.0", "--force"]);
    assert_eq!(fs::read_to_string(&probe).unwrap(), "0000:03:00.0");
    assert!(!out.status.success(), "still igb after the probe");
    assert!(String::from_utf8(out.stderr)
        .unwrap()
        .contains("is not bound to vfio-pci after the probe"));
}

#[test]
fn bad_arguments_print_usage() {
    let t = tree("usage");
    let out = devbind(&t, &["--frobnicate"]);
    assert!(!out.status.success());
    assert!(String::from_utf8(out.stderr)
        .unwrap()
        .contains("usage: devbind --status"));
}
