//! DPDK for the bench's guest (`--bench`, [`crate::bench`]): the distribution's `dpdk-testpmd`
//! (package `dpdk-dev`), the poll-mode drivers the guest's NICs need, and every shared library
//! they need, fetched as libfabric's are ([`crate::libfabric::with_libraries`]: `apt-get
//! download` and `dpkg -x` into the cache, never installed).
//!
//! testpmd links most of DPDK, including the PCI bus, but not the drivers of the guest's NICs:
//! EAL loads those as plugins, by directory rather than by `DT_NEEDED` — every `*.so.<ABI>` in
//! the plugin directory compiled into it (`<libdir>/dpdk/pmds-<ABI>`), when that directory
//! exists. The guest's plugin directory holds exactly the drivers of [`PMDS`], so EAL loads
//! those and nothing else (the full set would pull in InfiniBand and crypto libraries).

use std::fs;
use std::path::{Path, PathBuf};

use crate::apt::Apt;
use crate::error::{Error, IoContext, Result};
use crate::libfabric::{resolve_in, with_libraries, Packages};

/// The package with `dpdk-testpmd` (Debian's `dpdk` package has only the scripts).
const TESTPMD_PACKAGE: &str = "dpdk-dev";
/// The package that recommends the drivers (and names their ABI-versioned packages).
const DRIVERS_OF: &str = "dpdk";
/// testpmd in the package and in the guest.
pub(crate) const GUEST_TESTPMD: &str = "usr/bin/dpdk-testpmd";
/// The plugins the bench needs, by package name without the ABI version: `net_e1000` (igb's
/// 82576 and e1000e's 82574), `net_virtio`, and the ring mempool every port's mbuf pool is
/// made with.
const PMDS: [&str; 3] = [
    "librte-net-e1000",
    "librte-net-virtio",
    "librte-mempool-ring",
];
/// Where Debian's packages put the plugin directory, relative to the package root.
const PLUGIN_PARENT: &str = "usr/lib/x86_64-linux-gnu/dpdk";

/// `(path in the initramfs, file on the host)` of testpmd, the plugins (in their directory)
/// and every library and the loader they need.
///
/// # Errors
/// A package that cannot be fetched or lacks what it should ship, a library no package ships.
pub(crate) fn guest_files(apt: &mut Apt, cache: &Path) -> Result<Vec<(String, PathBuf)>> {
    let packages = Packages::new(cache.join("dpdk"))?;
    packages.ensure(apt, TESTPMD_PACKAGE)?;
    let testpmd = resolve_in(&packages.root(TESTPMD_PACKAGE), Path::new(GUEST_TESTPMD))
        .ok_or_else(|| Error::Unexpected {
            what: TESTPMD_PACKAGE,
            detail: format!("no {GUEST_TESTPMD} in the package"),
        })?;
    let mut files = vec![(GUEST_TESTPMD.to_owned(), testpmd)];
    // Asked of apt only when a driver is not in the cache yet (apt-cache wants an update).
    let mut recommended: Option<Vec<String>> = None;
    for pmd in PMDS {
        let cached = packages.unpacked().into_iter().find(|root| {
            root.file_name()
                .is_some_and(|n| abi_suffix(&n.to_string_lossy(), pmd))
        });
        let root = match cached {
            Some(root) => root,
            None => {
                if recommended.is_none() {
                    recommended = Some(apt.related(DRIVERS_OF, "Recommends")?);
                }
                let package = recommended
                    .iter()
                    .flatten()
                    .find(|p| abi_suffix(p, pmd))
                    .ok_or_else(|| Error::Unexpected {
                        what: "apt-cache depends dpdk",
                        detail: format!("{DRIVERS_OF} recommends no {pmd}<ABI> package"),
                    })?;
                packages.ensure(apt, package)?;
                packages.root(package)
            }
        };
        files.push(plugin(&root)?);
    }
    with_libraries(apt, &packages, files)
}

/// Whether `package` is `name` followed by an ABI version (`23`, or `-23` after a digit).
fn abi_suffix(package: &str, name: &str) -> bool {
    package
        .strip_prefix(name)
        .map(|v| v.trim_start_matches('-'))
        .is_some_and(|v| !v.is_empty() && v.chars().all(|c| c.is_ascii_digit() || c == '.'))
}

/// The one plugin file of a driver package: the real file (not a link) in its
/// `<libdir>/dpdk/pmds-<ABI>/` directory, under the same path in the guest.
fn plugin(root: &Path) -> Result<(String, PathBuf)> {
    let parent = root.join(PLUGIN_PARENT);
    let missing = || Error::Unexpected {
        what: "a DPDK driver package",
        detail: format!("no plugin file under {}", parent.display()),
    };
    for dir in fs::read_dir(&parent).ctx("listing", &parent)?.flatten() {
        let name = dir.file_name().to_string_lossy().into_owned();
        if !name.starts_with("pmds-") {
            continue;
        }
        for f in fs::read_dir(dir.path())
            .ctx("listing", dir.path())?
            .flatten()
        {
            let meta = fs::symlink_metadata(f.path()).ctx("reading", f.path())?;
            if meta.is_file() {
                let file = f.file_name().to_string_lossy().into_owned();
                return Ok((format!("{PLUGIN_PARENT}/{name}/{file}"), f.path()));
            }
        }
    }
    Err(missing())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn driver_packages_are_found_whatever_their_abi_version() {
        assert!(abi_suffix("librte-net-e1000-23", "librte-net-e1000"));
        assert!(abi_suffix("librte-net-virtio23", "librte-net-virtio"));
        assert!(abi_suffix("librte-mempool-ring24", "librte-mempool-ring"));
        assert!(!abi_suffix("librte-net-virtio", "librte-net-virtio"));
        assert!(!abi_suffix("librte-net-e1000-dev", "librte-net-e1000"));
        assert!(!abi_suffix("librte-net-vmxnet3-23", "librte-net-v"));
    }

    #[test]
    fn the_plugin_is_the_real_file_in_the_plugin_directory() {
        let root = std::env::temp_dir().join(format!("ringfab-qt-pmd-{}", std::process::id()));
        let pmds = root.join(PLUGIN_PARENT).join("pmds-23.0");
        fs::create_dir_all(&pmds).unwrap();
        fs::write(pmds.join("librte_net_e1000.so.23.0"), "elf").unwrap();
        std::os::unix::fs::symlink(
            "librte_net_e1000.so.23.0",
            pmds.join("librte_net_e1000.so.23"),
        )
        .unwrap();
        let found = plugin(&root);
        fs::remove_dir_all(&root).unwrap();
        let (guest, host) = found.unwrap();
        assert_eq!(
            guest,
            "usr/lib/x86_64-linux-gnu/dpdk/pmds-23.0/librte_net_e1000.so.23.0"
        );
        assert_eq!(host, pmds.join("librte_net_e1000.so.23.0"));
    }
}
