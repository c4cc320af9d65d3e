//! What the host needs, installed or fetched when missing: QEMU with the `igb` model, the
//! guest's Rust target and static C library, and the guest's kernel and busybox (downloaded and
//! unpacked under the target directory, never installed; reused on later runs).

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::apt::{self, Apt};
use crate::cmd;
use crate::elf;
use crate::error::{Error, IoContext, Result};

/// The QEMU binary.
pub(crate) const QEMU: &str = "qemu-system-x86_64";
/// Oldest QEMU whose `igb` model the tests know (igb appeared in 8.0).
const QEMU_MIN_MAJOR: u32 = 8;
/// The Rust target of the guest binaries (built with `+crt-static`).
pub(crate) const GUEST_TARGET: &str = "x86_64-unknown-linux-gnu";
/// glibc's static archive, needed to link `+crt-static` binaries.
const STATIC_LIBC: &str = "/usr/lib/x86_64-linux-gnu/libc.a";

/// The kernel modules `/init` loads at boot, in load order: vfio-pci and what it needs. The
/// Intel IOMMU driver is built into Debian's kernel.
pub(crate) const BOOT_MODULES: &[&str] = &[
    "virt/lib/irqbypass",
    "drivers/vfio/vfio",
    "drivers/vfio/vfio_virqfd",
    "drivers/vfio/vfio_iommu_type1",
    "drivers/vfio/pci/vfio-pci-core",
    "drivers/vfio/pci/vfio-pci",
];

/// The kernel's own drivers of the three NIC models and what they need, in load order, for the
/// tests that hand one NIC of a pair to Linux (`linux-nic-b`…). The guest program loads them
/// there, not `/init` at boot: loaded at boot they would take every NIC before the tests bind
/// them to vfio-pci. The order follows each module's `depends=` (checked when the kernel is
/// unpacked, [`check_load_order`]); `virtio_pci` is the transport `virtio_net` needs
/// without naming it.
pub(crate) const NIC_MODULES: &[&str] = &[
    "drivers/dca/dca",
    "drivers/i2c/algos/i2c-algo-bit",
    "drivers/net/ethernet/intel/igb/igb",
    "drivers/net/ethernet/intel/e1000e/e1000e",
    "drivers/virtio/virtio_ring",
    "drivers/virtio/virtio",
    "drivers/virtio/virtio_pci_modern_dev",
    "drivers/virtio/virtio_pci_legacy_dev",
    "drivers/virtio/virtio_pci",
    "net/core/failover",
    "drivers/net/net_failover",
    "drivers/net/virtio_net",
];

/// A module's name as the kernel and `depends=` spell it: its file name.
fn module_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// Every kept module with its path inside the initramfs: the boot modules as
/// `modules/N-name.ko` (`/init` loads `/modules/*.ko` in name order), the NIC drivers as
/// `modules/nic/NN-name.ko` (two digits, so that name order is load order).
fn initramfs_modules() -> Vec<(String, &'static str)> {
    let boot = BOOT_MODULES
        .iter()
        .enumerate()
        .map(|(i, m)| (format!("modules/{i}-{}.ko", module_name(m)), *m));
    let nic = NIC_MODULES
        .iter()
        .enumerate()
        .map(|(i, m)| (format!("modules/nic/{i:02}-{}.ko", module_name(m)), *m));
    boot.chain(nic).collect()
}

/// Checks that every module in `order` (boot modules, then NIC drivers) comes after the modules
/// its `depends=` names, reading each from `dir/<name>.ko`.
fn check_load_order(dir: &Path, order: &[&str]) -> Result {
    for (i, m) in order.iter().enumerate() {
        let name = module_name(m);
        let path = dir.join(format!("{name}.ko"));
        let bytes = fs::read(&path).ctx("reading", &path)?;
        let modinfo = elf::section(&bytes, ".modinfo")
            .map_err(|detail| Error::Unexpected {
                what: "a kernel module",
                detail: format!("{}: {detail}", path.display()),
            })?
            .unwrap_or_default();
        let earlier: Vec<&str> = order[..i].iter().map(|m| module_name(m)).collect();
        // `depends=` spells names as the module files do, except that the kernel takes `-` and
        // `_` as the same character in module names.
        let same = |a: &str, b: &str| a.replace('-', "_") == b.replace('-', "_");
        if let Some(missing) = elf::module_depends(modinfo)
            .into_iter()
            .find(|d| !earlier.iter().any(|e| same(e, d)))
        {
            return Err(Error::Unexpected {
                what: "the guest's kernel modules",
                detail: format!(
                    "{name} needs {missing}, which is not loaded before it: add it to \
                     BOOT_MODULES or NIC_MODULES"
                ),
            });
        }
    }
    Ok(())
}

/// `QEMU emulator version 10.0.2 (…)` → (10, 0).
pub(crate) fn parse_qemu_version(out: &str) -> Option<(u32, u32)> {
    let v = out.split("version ").nth(1)?.split_whitespace().next()?;
    let mut it = v.split('.').map(|n| n.parse::<u32>().ok());
    Some((it.next()??, it.next().flatten().unwrap_or(0)))
}

/// The installed QEMU's version if it is new enough and has `igb`.
fn usable_qemu() -> Option<(u32, u32)> {
    let out = cmd::output(
        "asking QEMU its version",
        Command::new(QEMU).arg("--version"),
    )
    .ok()?;
    let v = parse_qemu_version(&out)?;
    if v.0 < QEMU_MIN_MAJOR {
        return None;
    }
    let devices = cmd::output(
        "listing QEMU's devices",
        Command::new(QEMU).args(["-machine", "none", "-device", "help"]),
    )
    .ok()?;
    devices.contains("name \"igb\"").then_some(v)
}

/// Makes sure QEMU ≥ 8 with `igb` is installed (from the release's backports suite when the
/// release's own QEMU is older, as Debian 12's 7.2 is). Returns its version.
pub(crate) fn ensure_qemu(apt: &mut Apt) -> Result<(u32, u32)> {
    if let Some(v) = usable_qemu() {
        return Ok(v);
    }
    let suite = apt::ensure_backports(apt)?;
    apt.install(Some(&suite), &["qemu-system-x86"])?;
    usable_qemu().ok_or_else(|| Error::Missing {
        what: format!("QEMU {QEMU_MIN_MAJOR} or newer with the igb device"),
        fix: format!(
            "`{QEMU} --version` / `-device help` still disagree after installing \
             qemu-system-x86 from {suite}; install a QEMU with igb yourself"
        ),
    })
}

/// Whether `perf` runs.
fn usable_perf() -> bool {
    cmd::output(
        "asking perf its version",
        Command::new("perf").arg("--version"),
    )
    .is_ok()
}

/// Makes sure `perf` runs, for `--bench --perf` (Debian's `linux-perf`, installed if missing).
pub(crate) fn ensure_perf(apt: &mut Apt) -> Result {
    if usable_perf() {
        return Ok(());
    }
    apt.install(None, &["linux-perf"])?;
    if usable_perf() {
        Ok(())
    } else {
        Err(Error::Missing {
            what: "perf".into(),
            fix: "`perf --version` still fails after installing linux-perf (Debian's perf \
                  runs the build for the running kernel); install a perf that runs here"
                .into(),
        })
    }
}

/// Makes sure the guest binaries can be built: the Rust target and glibc's static archive.
pub(crate) fn ensure_guest_toolchain(apt: &mut Apt) -> Result {
    let installed = cmd::output(
        "listing installed Rust targets",
        Command::new("rustup").args(["target", "list", "--installed"]),
    );
    match installed {
        Ok(list) if list.lines().any(|l| l.trim() == GUEST_TARGET) => {}
        // No rustup: assume a toolchain whose host is the guest target (cargo will say if not).
        Err(Error::Spawn { .. }) => {}
        _ => {
            println!("setup: rustup target add {GUEST_TARGET}");
            cmd::output(
                "adding the guest's Rust target",
                Command::new("rustup").args(["target", "add", GUEST_TARGET]),
            )?;
        }
    }
    if !Path::new(STATIC_LIBC).exists() {
        apt.install(None, &["libc6-dev"])?;
    }
    Ok(())
}

/// The guest's kernel and userland, unpacked in the cache.
#[derive(Debug)]
pub(crate) struct GuestFiles {
    /// The kernel image to boot: the uncompressed `vmlinux` if it could be extracted (boots
    /// several seconds faster under TCG through its PVH entry), else the distribution's bzImage.
    pub(crate) kernel: PathBuf,
    /// `(path inside the initramfs, file)` for each module of [`BOOT_MODULES`] and
    /// [`NIC_MODULES`], in order.
    pub(crate) modules: Vec<(String, PathBuf)>,
    /// Static busybox.
    pub(crate) busybox: PathBuf,
    /// The kernel's release string (`6.1.0-40-amd64`).
    pub(crate) release: String,
}

/// The stamp written once a kernel is unpacked: the package it came from.
const KERNEL_STAMP: &str = "package";

/// Fetches (or finds in `cache`) the distribution's kernel and static busybox.
pub(crate) fn guest_files(apt: &mut Apt, cache: &Path) -> Result<GuestFiles> {
    let kdir = cache.join("kernel");
    let modules: Vec<(String, PathBuf)> = initramfs_modules()
        .into_iter()
        .map(|(at, m)| (at, kdir.join(format!("{}.ko", module_name(m)))))
        .collect();
    // A cache from before a module was added to the lists is fetched again.
    if !kdir.join(KERNEL_STAMP).exists() || modules.iter().any(|(_, f)| !f.exists()) {
        fetch_kernel(apt, cache, &kdir)?;
    }
    let busybox = cache.join("busybox");
    if !busybox.exists() {
        let work = cache.join("busybox-pkg");
        let _ = fs::remove_dir_all(&work);
        let deb = apt.download(&work, "busybox-static")?;
        apt::unpack(&deb, &work.join("x"))?;
        let bin = work.join("x/bin/busybox");
        // Copied under another name and renamed, so an interrupted run leaves no partial file
        // that a later run would take for the cache.
        let part = cache.join("busybox.part");
        fs::copy(&bin, &part).ctx("copying", &bin)?;
        fs::rename(&part, &busybox).ctx("renaming", &part)?;
        fs::remove_dir_all(&work).ctx("removing", &work)?;
    }
    let release = fs::read_to_string(kdir.join("release"))
        .ctx("reading", kdir.join("release"))?
        .trim()
        .to_owned();
    let vmlinux = kdir.join("vmlinux");
    let kernel = if vmlinux.exists() {
        vmlinux
    } else {
        kdir.join("vmlinuz")
    };
    Ok(GuestFiles {
        kernel,
        modules,
        busybox,
        release,
    })
}

/// Downloads the kernel package `linux-image-amd64` points at, keeps the image and the modules
/// the guest loads, and drops the rest (the unpacked package is ~500 MB).
fn fetch_kernel(apt: &mut Apt, cache: &Path, kdir: &Path) -> Result {
    let package = apt.dependency("linux-image-amd64", "linux-image-")?;
    let work = cache.join("kernel-pkg");
    let _ = fs::remove_dir_all(&work);
    let _ = fs::remove_dir_all(kdir);
    let deb = apt.download(&work, &package)?;
    let x = work.join("x");
    apt::unpack(&deb, &x)?;
    let mods = x.join("lib/modules");
    let release = fs::read_dir(&mods)
        .ctx("listing", &mods)?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .next()
        .ok_or_else(|| Error::Unexpected {
            what: "the kernel package",
            detail: format!("no directory under {}", mods.display()),
        })?;
    fs::create_dir_all(kdir).ctx("creating", kdir)?;
    let vmlinuz = x.join(format!("boot/vmlinuz-{release}"));
    fs::copy(&vmlinuz, kdir.join("vmlinuz")).ctx("copying", &vmlinuz)?;
    for m in BOOT_MODULES.iter().chain(NIC_MODULES) {
        let name = module_name(m);
        let dst = kdir.join(format!("{name}.ko"));
        let src = mods.join(&release).join(format!("kernel/{m}.ko"));
        let xz = src.with_extension("ko.xz");
        if src.exists() {
            fs::copy(&src, &dst).ctx("copying the module", &src)?;
        } else if xz.exists() {
            // Newer kernels ship xz-compressed modules; busybox's insmod wants them plain.
            let plain = cmd::output_bytes(
                "decompressing a kernel module",
                Command::new("xz").arg("-dc").arg(&xz),
            )?;
            fs::write(&dst, plain).ctx("writing", &dst)?;
        } else {
            return Err(Error::Unexpected {
                what: "the kernel package",
                detail: format!("neither {} nor {} exists", src.display(), xz.display()),
            });
        }
    }
    let order: Vec<&str> = BOOT_MODULES.iter().chain(NIC_MODULES).copied().collect();
    check_load_order(kdir, &order)?;
    match extract_vmlinux(&vmlinuz, &kdir.join("vmlinux")) {
        Ok(()) => {}
        Err(e) => println!("setup: booting the compressed kernel ({e})"),
    }
    fs::write(kdir.join("release"), &release).ctx("writing", kdir.join("release"))?;
    fs::remove_dir_all(&work).ctx("removing", &work)?;
    fs::write(kdir.join(KERNEL_STAMP), &package).ctx("writing", kdir.join(KERNEL_STAMP))?;
    Ok(())
}

/// The xz stream header magic.
const XZ_MAGIC: &[u8] = b"\xfd7zXZ\x00";
/// The ELF magic.
const ELF_MAGIC: &[u8] = b"\x7fELF";

/// Decompresses the xz payload of a bzImage into an ELF `vmlinux` with the host's `xz`.
fn extract_vmlinux(vmlinuz: &Path, out: &Path) -> Result {
    let image = fs::read(vmlinuz).ctx("reading", vmlinuz)?;
    let at = image
        .windows(XZ_MAGIC.len())
        .position(|w| w == XZ_MAGIC)
        .ok_or_else(|| Error::Unexpected {
            what: "the kernel image",
            detail: "no xz payload".into(),
        })?;
    let mut child = Command::new("xz")
        .args(["-dc", "--single-stream"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|source| Error::Spawn {
            what: "decompressing the kernel",
            cmd: "xz -dc --single-stream".into(),
            source,
        })?;
    let mut stdin = child.stdin.take().expect("piped");
    let payload = image[at..].to_vec();
    let feeder = std::thread::spawn(move || {
        use std::io::Write;
        // xz stops reading after the stream; a broken pipe here is expected.
        let _ = stdin.write_all(&payload);
    });
    let mut elf = Vec::new();
    child
        .stdout
        .take()
        .expect("piped")
        .read_to_end(&mut elf)
        .ctx("reading xz's output for", vmlinuz)?;
    let _ = feeder.join();
    let status = child.wait().ctx("waiting for xz on", vmlinuz)?;
    if !elf.starts_with(ELF_MAGIC) {
        return Err(Error::Unexpected {
            what: "the decompressed kernel",
            detail: format!("not an ELF image (xz: {status})"),
        });
    }
    fs::write(out, elf).ctx("writing", out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qemu_versions_parse_from_the_version_banner() {
        let out = "QEMU emulator version 10.0.2 (Debian 1:10.0.2+ds-2~bpo12+1)\nCopyright …\n";
        assert_eq!(parse_qemu_version(out), Some((10, 0)));
        assert_eq!(
            parse_qemu_version("QEMU emulator version 7.2.15\n"),
            Some((7, 2))
        );
        assert_eq!(parse_qemu_version("something else"), None);
    }

    #[test]
    fn modules_go_into_the_initramfs_numbered_in_load_order() {
        let dir = std::env::temp_dir().join(format!("ringfab-qt-{}", std::process::id()));
        let kdir = dir.join("kernel");
        fs::create_dir_all(&kdir).unwrap();
        fs::write(kdir.join(KERNEL_STAMP), "linux-image-x").unwrap();
        fs::write(kdir.join("release"), "6.1.0-x-amd64\n").unwrap();
        fs::write(dir.join("busybox"), "").unwrap();
        for m in BOOT_MODULES.iter().chain(NIC_MODULES) {
            fs::write(kdir.join(format!("{}.ko", module_name(m))), "").unwrap();
        }
        let files = guest_files(&mut Apt::default(), &dir).unwrap();
        fs::remove_dir_all(&dir).unwrap();
        assert_eq!(files.release, "6.1.0-x-amd64");
        assert_eq!(
            files.kernel,
            kdir.join("vmlinuz"),
            "no vmlinux: the bzImage"
        );
        let names: Vec<&str> = files.modules.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names[..6],
            [
                "modules/0-irqbypass.ko",
                "modules/1-vfio.ko",
                "modules/2-vfio_virqfd.ko",
                "modules/3-vfio_iommu_type1.ko",
                "modules/4-vfio-pci-core.ko",
                "modules/5-vfio-pci.ko"
            ]
        );
        assert_eq!(files.modules[5].1, kdir.join("vfio-pci.ko"));
        assert_eq!(
            names[6..9],
            [
                "modules/nic/00-dca.ko",
                "modules/nic/01-i2c-algo-bit.ko",
                "modules/nic/02-igb.ko"
            ]
        );
        assert_eq!(names[17], "modules/nic/11-virtio_net.ko");
        assert_eq!(files.modules[17].1, kdir.join("virtio_net.ko"));
    }
}
