//! libfabric in the guest, for `fi_pingpong` through the provider: Debian's `libfabric1` and
//! `libfabric-bin`, the shared libraries they and the provider need (found by reading each
//! file's `DT_NEEDED`, [`crate::elf`]), and the dynamic loader. The guest's other programs are
//! static; these are the only dynamic ones.
//!
//! Packages are fetched as the kernel and busybox are: `apt-get download` and `dpkg -x` into
//! the cache, never installed. Which package ships a library the packages unpacked so far lack
//! is asked of the host's dpkg database (`dpkg -S`): the host builds the provider, so it has
//! libfabric and its dependencies installed (docs/libfabric.md, "Building"), and the guest
//! gets the same packages. The same resolver ([`with_libraries`]) serves DPDK for `--bench`
//! ([`crate::dpdk`]), whose libraries the host does not have: those are found among the
//! dependencies of the package that needs them ([`policy_names`]).

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::apt::{self, Apt};
use crate::cmd;
use crate::elf;
use crate::error::{Error, IoContext, Result};

/// Where the guest's shared libraries go: a directory of the loader's built-in search path
/// (Debian's glibc searches `/lib/x86_64-linux-gnu` and `/usr/lib/x86_64-linux-gnu` with no
/// `ld.so.cache`).
pub(crate) const GUEST_LIB_DIR: &str = "usr/lib/x86_64-linux-gnu";
/// `fi_pingpong` in the guest.
pub(crate) const GUEST_FI_PINGPONG: &str = "usr/bin/fi_pingpong";
/// The provider in the guest: libfabric's own provider directory (`<libdir>/libfabric`), where
/// an installed provider is found without `FI_PROVIDER_PATH`.
pub(crate) const GUEST_PROVIDER: &str = "usr/lib/x86_64-linux-gnu/libfabric/libringfab-fi.so";

/// The packages the guest's libfabric starts from.
const ROOT_PACKAGES: [&str; 2] = ["libfabric1", "libfabric-bin"];
/// Where in an unpacked package a library may be.
const LIB_DIRS: [&str; 5] = [
    "usr/lib/x86_64-linux-gnu",
    "lib/x86_64-linux-gnu",
    "lib64",
    "usr/lib",
    "lib",
];

/// The cache of unpacked packages: one directory per package, with a stamp once unpacked.
pub(crate) struct Packages {
    dir: PathBuf,
}

impl Packages {
    /// The cache in `dir` (made if missing).
    pub(crate) fn new(dir: PathBuf) -> Result<Packages> {
        fs::create_dir_all(&dir).ctx("creating", &dir)?;
        Ok(Packages { dir })
    }

    /// Where `package` is unpacked.
    pub(crate) fn root(&self, package: &str) -> PathBuf {
        self.dir.join(package)
    }

    /// The packages unpacked so far.
    pub(crate) fn unpacked(&self) -> Vec<PathBuf> {
        let mut roots: Vec<PathBuf> = fs::read_dir(&self.dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.join(".unpacked").exists())
            .collect();
        roots.sort();
        roots
    }

    /// Downloads and unpacks `package` unless it is already.
    pub(crate) fn ensure(&self, apt: &mut Apt, package: &str) -> Result {
        let root = self.root(package);
        if root.join(".unpacked").exists() {
            return Ok(());
        }
        let work = self.dir.join(format!("{package}.download"));
        let _ = fs::remove_dir_all(&work);
        let _ = fs::remove_dir_all(&root);
        let deb = apt.download(&work, package)?;
        apt::unpack(&deb, &root)?;
        fs::write(root.join(".unpacked"), package).ctx("writing", root.join(".unpacked"))?;
        fs::remove_dir_all(&work).ctx("removing", &work)
    }

    /// The file a library `name` is in any unpacked package, symbolic links followed inside
    /// the package.
    fn find_library(&self, name: &str) -> Option<PathBuf> {
        self.unpacked().iter().find_map(|root| {
            LIB_DIRS
                .iter()
                .find_map(|d| resolve_in(root, &Path::new(d).join(name)))
        })
    }

    /// The package `file` was unpacked from, if it is in this cache.
    fn package_of(&self, file: &Path) -> Option<String> {
        let inside = file.strip_prefix(&self.dir).ok()?;
        let first = inside.components().next()?;
        Some(first.as_os_str().to_string_lossy().into_owned())
    }

    /// Fetches the package that ships `soname`, which `needed_by` needs, and returns the
    /// library in it. The host's dpkg database is asked first ([`owner`]: the host that builds
    /// the provider has libfabric's libraries installed); for a library the host lacks (DPDK's
    /// are not installed on the host), the package is the dependency of `needed_by`'s package
    /// that Debian's naming policy gives the library ([`policy_names`]) — a package that links
    /// a library depends on the package shipping it.
    fn fetch_owner(&self, apt: &mut Apt, soname: &str, needed_by: &Path) -> Result<PathBuf> {
        let (package, target) = match owner(soname) {
            Ok(found) => found,
            Err(host_lacks) => {
                let dependent = self.package_of(needed_by).ok_or(host_lacks)?;
                let names = policy_names(soname).unwrap_or_default();
                let package = apt
                    .related(&dependent, "Depends")?
                    .into_iter()
                    .find(|d| names.contains(d))
                    .ok_or_else(|| Error::Missing {
                        what: format!("the package that ships {soname}"),
                        fix: format!(
                            "neither the host's dpkg database nor the dependencies of \
                             {dependent} name it"
                        ),
                    })?;
                (package, None)
            }
        };
        self.ensure(apt, &package)?;
        let root = self.root(&package);
        target
            .and_then(|t| resolve_in(&root, t.strip_prefix("/").ok()?))
            .or_else(|| self.find_library(soname))
            .ok_or_else(|| Error::Unexpected {
                what: "a package dpkg named",
                detail: format!("{package} has no {soname} after unpacking"),
            })
    }
}

/// `path` (relative to the unpacked package `root`) with its symbolic links followed inside
/// `root`: an absolute target names a file of the package, not of the host. `None` if there
/// is no such file.
pub(crate) fn resolve_in(root: &Path, path: &Path) -> Option<PathBuf> {
    let mut p = root.join(path);
    for _ in 0..16 {
        let meta = fs::symlink_metadata(&p).ok()?;
        if !meta.file_type().is_symlink() {
            return meta.is_file().then_some(p);
        }
        let target = fs::read_link(&p).ok()?;
        p = match target.strip_prefix("/") {
            Ok(inside) => root.join(inside),
            Err(_) => p.parent()?.join(target),
        };
    }
    None
}

/// Where the host's loader finds a library (its built-in search path).
const HOST_LIB_DIRS: [&str; 3] = [
    "/lib/x86_64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu",
    "/lib64",
];

/// The package that ships `soname`, and where in it the library is: `dpkg -S` of the name in a
/// multiarch directory; or, for a library that is a link the package's maintainer script made
/// (libpsm-infinipath1's `libpsm_infinipath.so.1` is an alternative through `/etc/alternatives`),
/// of the file the host's link leads to.
fn owner(soname: &str) -> Result<(String, Option<PathBuf>)> {
    let by_name = Command::new("dpkg")
        .args(["-S", &format!("*/{soname}")])
        .output();
    if let Ok(out) = &by_name {
        if let Some(p) = owner_in(&String::from_utf8_lossy(&out.stdout), soname) {
            return Ok((p, None));
        }
    }
    let missing = || Error::Missing {
        what: format!("the package that ships {soname}"),
        fix: "install libfabric1 and libfabric-dev on the host (docs/libfabric.md)".into(),
    };
    let target = HOST_LIB_DIRS
        .iter()
        .find_map(|d| fs::canonicalize(Path::new(d).join(soname)).ok())
        .ok_or_else(missing)?;
    let out = cmd::output(
        "asking dpkg which package ships a library",
        Command::new("dpkg").arg("-S").arg(&target),
    )?;
    let package = out
        .lines()
        .find_map(|l| {
            let (packages, path) = l.split_once(": ")?;
            (Path::new(path.trim()) == target).then(|| first_package(packages))
        })
        .ok_or_else(missing)?;
    Ok((package, Some(target)))
}

/// The first package of `dpkg -S`'s `pkg:arch, pkg2` list, without its architecture.
fn first_package(packages: &str) -> String {
    let first = packages.split(',').next().unwrap_or(packages).trim();
    first.split(':').next().unwrap_or(first).to_owned()
}

/// From `dpkg -S` output (`pkg:arch, pkg2: /path`), the first package of the line whose path
/// is `…/x86_64-linux-gnu/<soname>` or `/lib64/<soname>`.
pub(crate) fn owner_in(dpkg_s: &str, soname: &str) -> Option<String> {
    dpkg_s.lines().find_map(|l| {
        let (packages, path) = l.split_once(": ")?;
        let dir = Path::new(path.trim()).parent()?;
        let multiarch = dir.ends_with("x86_64-linux-gnu") || dir == Path::new("/lib64");
        let named = Path::new(path.trim()).file_name()? == soname;
        (multiarch && named).then(|| first_package(packages))
    })
}

/// Every file the guest needs to run `fi_pingpong` with the provider at `provider`:
/// `(path in the initramfs, file on the host)`, the loader and libraries in the order found.
///
/// # Errors
/// A package that cannot be fetched, a library no package ships, a file that is not ELF.
pub(crate) fn guest_files(
    apt: &mut Apt,
    cache: &Path,
    provider: &Path,
) -> Result<Vec<(String, PathBuf)>> {
    let packages = Packages::new(cache.join("libfabric"))?;
    for p in ROOT_PACKAGES {
        packages.ensure(apt, p)?;
    }
    let fi_pingpong = resolve_in(
        &packages.root("libfabric-bin"),
        Path::new(GUEST_FI_PINGPONG),
    )
    .ok_or_else(|| Error::Unexpected {
        what: "libfabric-bin",
        detail: format!("no {GUEST_FI_PINGPONG} in the package"),
    })?;
    let files = vec![
        (GUEST_FI_PINGPONG.to_owned(), fi_pingpong),
        (GUEST_PROVIDER.to_owned(), provider.to_owned()),
    ];
    with_libraries(apt, &packages, files)
}

/// `files` (`(path in the initramfs, file on the host)`) followed by the loader and every
/// shared library they need, transitively, each found in an unpacked package of `packages`
/// (fetched when missing, [`Packages::fetch_owner`]); libraries go to [`GUEST_LIB_DIR`].
///
/// # Errors
/// A package that cannot be fetched, a library no package ships, a file that is not ELF.
pub(crate) fn with_libraries(
    apt: &mut Apt,
    packages: &Packages,
    mut files: Vec<(String, PathBuf)>,
) -> Result<Vec<(String, PathBuf)>> {
    let mut placed: BTreeSet<String> = files.iter().map(|(g, _)| g.clone()).collect();
    let mut next = 0;
    while next < files.len() {
        let file = files[next].1.clone();
        next += 1;
        let bytes = fs::read(&file).ctx("reading", &file)?;
        let d = elf::dynamic(&bytes).map_err(|detail| Error::Unexpected {
            what: "an ELF file for the guest",
            detail: format!("{}: {detail}", file.display()),
        })?;
        // The loader goes where the interpreter path names it; libraries to one directory.
        let wanted = d
            .interp
            .iter()
            .map(|i| (i.trim_start_matches('/').to_owned(), i.clone()))
            .chain(
                d.needed
                    .iter()
                    .map(|n| (format!("{GUEST_LIB_DIR}/{n}"), n.clone())),
            );
        for (guest, name) in wanted {
            if !placed.insert(guest.clone()) {
                continue;
            }
            let soname = Path::new(&name)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or(name);
            let host = match packages.find_library(&soname) {
                Some(p) => p,
                None => packages.fetch_owner(apt, &soname, &file)?,
            };
            files.push((guest, host));
        }
    }
    Ok(files)
}

/// The names Debian's library packaging policy gives the package of `soname`: the library's
/// name, lower case with `_` as `-`, then its version, after a `-` when the name ends in a
/// digit (`librte_net_e1000.so.23` → `librte-net-e1000-23`, `libpcap.so.0.8` → `libpcap0.8`).
/// Both spellings are returned; which one a package uses is read from its dependencies.
pub(crate) fn policy_names(soname: &str) -> Option<[String; 2]> {
    let (name, version) = soname.split_once(".so.")?;
    let name = name.to_lowercase().replace('_', "-");
    Some([format!("{name}{version}"), format!("{name}-{version}")])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dpkg_names_the_package_of_the_multiarch_library() {
        let out = "libc6-i386: /lib32/libc.so.6\n\
                   libc6:amd64: /lib/x86_64-linux-gnu/libc.so.6\n";
        assert_eq!(owner_in(out, "libc.so.6").as_deref(), Some("libc6"));
        let out = "ibverbs-providers:amd64, other: /usr/lib/x86_64-linux-gnu/libefa.so.1\n";
        assert_eq!(
            owner_in(out, "libefa.so.1").as_deref(),
            Some("ibverbs-providers")
        );
        let out = "libc6:amd64: /lib64/ld-linux-x86-64.so.2\n";
        assert_eq!(
            owner_in(out, "ld-linux-x86-64.so.2").as_deref(),
            Some("libc6")
        );
        assert_eq!(
            owner_in("libc6-i386: /lib32/libc.so.6\n", "libc.so.6"),
            None
        );
        assert_eq!(
            owner_in("x: /usr/lib/x86_64-linux-gnu/libc.so.6.bak\n", "libc.so.6"),
            None
        );
    }

    #[test]
    fn library_packages_are_named_by_debian_policy() {
        assert_eq!(
            policy_names("librte_net_e1000.so.23").unwrap(),
            ["librte-net-e100023", "librte-net-e1000-23"]
        );
        assert!(policy_names("libpcap.so.0.8")
            .unwrap()
            .contains(&"libpcap0.8".to_owned()));
        assert!(policy_names("librte_eal.so.23")
            .unwrap()
            .contains(&"librte-eal23".to_owned()));
        assert_eq!(policy_names("ld-linux-x86-64.so"), None);
    }

    #[test]
    fn links_resolve_inside_the_package_even_when_absolute() {
        let root = std::env::temp_dir().join(format!("ringfab-qt-links-{}", std::process::id()));
        let lib = root.join("lib/x86_64-linux-gnu");
        fs::create_dir_all(&lib).unwrap();
        fs::create_dir_all(root.join("lib64")).unwrap();
        fs::write(lib.join("ld-linux-x86-64.so.2"), "loader").unwrap();
        std::os::unix::fs::symlink(
            "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2",
            root.join("lib64/ld-linux-x86-64.so.2"),
        )
        .unwrap();
        std::os::unix::fs::symlink("ld-linux-x86-64.so.2", lib.join("relative.so")).unwrap();
        std::os::unix::fs::symlink("/nonexistent", lib.join("dangling.so")).unwrap();
        let found = resolve_in(&root, Path::new("lib64/ld-linux-x86-64.so.2"));
        let relative = resolve_in(&root, Path::new("lib/x86_64-linux-gnu/relative.so"));
        let dangling = resolve_in(&root, Path::new("lib/x86_64-linux-gnu/dangling.so"));
        fs::remove_dir_all(&root).unwrap();
        assert_eq!(found, Some(lib.join("ld-linux-x86-64.so.2")));
        assert_eq!(relative, Some(lib.join("ld-linux-x86-64.so.2")));
        assert_eq!(
            dangling, None,
            "an absolute link resolves in the package, not the host"
        );
    }
}
