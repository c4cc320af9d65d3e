//! Debian packages: the backports suite (added by reusing the machine's own mirror), installs,
//! and downloads that are unpacked rather than installed.
//!
//! No host name is written here: the backports source is built from the `URIs:` the machine's
//! apt configuration already uses.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::cmd;
use crate::error::{Error, IoContext, Result};

/// Where apt keeps its sources.
const SOURCES_DIR: &str = "/etc/apt/sources.list.d";
/// The one-line-format sources file.
const SOURCES_LIST: &str = "/etc/apt/sources.list";
/// The file this harness writes when the backports suite is missing.
const BACKPORTS_FILE: &str = "ringfab-backports.sources";

/// apt, with `apt-get update` run at most once per harness run (and only if something needs it).
#[derive(Debug, Default)]
pub(crate) struct Apt {
    updated: bool,
}

fn apt_get() -> Command {
    let mut c = Command::new("apt-get");
    // Wait for another apt or dpkg run (an unattended upgrade, another user) instead of failing.
    c.env("DEBIAN_FRONTEND", "noninteractive")
        .args(["-o", "DPkg::Lock::Timeout=300"]);
    c
}

/// Whether this process runs as root (apt needs it to install).
pub(crate) fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

impl Apt {
    fn require_root(what: &str) -> Result {
        if is_root() {
            Ok(())
        } else {
            Err(Error::Missing {
                what: what.to_owned(),
                fix: "run the harness as root so that it can install it with apt-get, or \
                      install it yourself (docs/qemu-tests.md lists the packages)"
                    .to_owned(),
            })
        }
    }

    /// `apt-get update`, once.
    pub(crate) fn update(&mut self) -> Result {
        if !self.updated {
            Apt::require_root("an up-to-date apt package list")?;
            println!("setup: apt-get update");
            cmd::output(
                "refreshing the package lists",
                apt_get().args(["update", "-q"]),
            )?;
            self.updated = true;
        }
        Ok(())
    }

    /// Installs `packages` (from suite `release` if given), without recommended packages.
    pub(crate) fn install(&mut self, release: Option<&str>, packages: &[&str]) -> Result {
        Apt::require_root(&packages.join(" "))?;
        self.update()?;
        println!("setup: apt-get install {}", packages.join(" "));
        let mut c = apt_get();
        c.args(["install", "-y", "-q", "--no-install-recommends"]);
        if let Some(r) = release {
            c.args(["-t", r]);
        }
        cmd::output("installing packages", c.args(packages))?;
        Ok(())
    }

    /// Downloads the `.deb` of `package` into `dir` (not installed); returns its path.
    pub(crate) fn download(&mut self, dir: &Path, package: &str) -> Result<PathBuf> {
        self.update()?;
        fs::create_dir_all(dir).ctx("creating", dir)?;
        println!("setup: apt-get download {package}");
        cmd::output(
            "downloading a package",
            apt_get().current_dir(dir).args(["download", "-q", package]),
        )?;
        let prefix = format!("{package}_");
        for e in fs::read_dir(dir).ctx("listing", dir)? {
            let p = e.ctx("listing", dir)?.path();
            let name = p.file_name().map(|n| n.to_string_lossy().into_owned());
            if name.is_some_and(|n| n.starts_with(&prefix) && n.ends_with(".deb")) {
                return Ok(p);
            }
        }
        Err(Error::Unexpected {
            what: "apt-get download",
            detail: format!("no {prefix}*.deb in {} afterwards", dir.display()),
        })
    }

    /// The package that `meta` (a metapackage such as `linux-image-amd64`) depends on whose
    /// name starts with `prefix`.
    pub(crate) fn dependency(&mut self, meta: &str, prefix: &str) -> Result<String> {
        self.update()?;
        let out = cmd::output(
            "reading a package's dependencies",
            Command::new("apt-cache").args(["depends", meta]),
        )?;
        first_dependency(&out, prefix).ok_or_else(|| Error::Unexpected {
            what: "apt-cache depends",
            detail: format!("{meta} depends on no {prefix}* package:\n{out}"),
        })
    }
}

impl Apt {
    /// Every package `package` names in its `field` (`Depends`, `Recommends`; alternatives
    /// included, virtual packages left out), as `apt-cache depends` lists them.
    pub(crate) fn related(&mut self, package: &str, field: &str) -> Result<Vec<String>> {
        self.update()?;
        let out = cmd::output(
            "reading a package's dependencies",
            Command::new("apt-cache").args(["depends", package]),
        )?;
        Ok(dependencies(&out, field))
    }
}

/// The packages of `field` (`Depends`, `Recommends`) in `apt-cache depends` output (`|Depends:`
/// alternatives included, virtual `<names>` left out).
pub(crate) fn dependencies(apt_cache_depends: &str, field: &str) -> Vec<String> {
    apt_cache_depends
        .lines()
        .filter_map(|l| {
            let dep = l
                .trim()
                .trim_start_matches('|')
                .strip_prefix(field)?
                .strip_prefix(':')?;
            let name = dep.split_whitespace().next()?;
            (!name.starts_with('<')).then(|| name.to_owned())
        })
        .collect()
}

/// Unpacks a `.deb` into `dir` (`dpkg -x`: files only, nothing installed).
pub(crate) fn unpack(deb: &Path, dir: &Path) -> Result {
    fs::create_dir_all(dir).ctx("creating", dir)?;
    cmd::output(
        "unpacking a package",
        Command::new("dpkg").arg("-x").arg(deb).arg(dir),
    )?;
    Ok(())
}

/// The first `Depends: <prefix>…` package of `apt-cache depends` output.
pub(crate) fn first_dependency(apt_cache_depends: &str, prefix: &str) -> Option<String> {
    apt_cache_depends.lines().find_map(|l| {
        let dep = l.trim().strip_prefix("Depends:")?.trim();
        let name = dep.split_whitespace().next()?;
        name.starts_with(prefix)
            .then(|| name.trim_matches(|c| c == '<' || c == '>').to_owned())
    })
}

/// The machine's release codename (`VERSION_CODENAME` of os-release).
pub(crate) fn codename() -> Result<String> {
    let text = fs::read_to_string("/etc/os-release").ctx("reading", "/etc/os-release")?;
    os_release_codename(&text).ok_or_else(|| Error::Unexpected {
        what: "/etc/os-release",
        detail: "no VERSION_CODENAME: not a Debian-based system?".into(),
    })
}

fn os_release_codename(text: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let v = l.strip_prefix("VERSION_CODENAME=")?.trim_matches('"');
        (!v.is_empty()).then(|| v.to_owned())
    })
}

/// Whether any apt source already names `suite`.
fn suite_configured(suite: &str) -> bool {
    let mut files = vec![PathBuf::from(SOURCES_LIST)];
    if let Ok(rd) = fs::read_dir(SOURCES_DIR) {
        files.extend(
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "sources" || x == "list")),
        );
    }
    files.iter().any(|f| {
        fs::read_to_string(f).is_ok_and(|t| {
            t.lines().any(|l| {
                let l = l.trim();
                !l.starts_with('#') && l.split_whitespace().any(|w| w == suite)
            })
        })
    })
}

/// Adds `<codename>-backports` to apt's sources if no source names it, reusing the mirror of
/// the machine's main suite. Returns the suite name.
pub(crate) fn ensure_backports(apt: &mut Apt) -> Result<String> {
    let codename = codename()?;
    let suite = format!("{codename}-backports");
    if suite_configured(&suite) {
        return Ok(suite);
    }
    Apt::require_root(&format!("the apt suite {suite}"))?;
    let mut stanza = None;
    if let Ok(rd) = fs::read_dir(SOURCES_DIR) {
        let mut paths: Vec<_> = rd.flatten().map(|e| e.path()).collect();
        paths.sort();
        for p in paths
            .iter()
            .filter(|p| p.extension().is_some_and(|x| x == "sources"))
        {
            if let Ok(text) = fs::read_to_string(p) {
                stanza = stanza.or_else(|| backports_stanza(&text, &codename));
            }
        }
    }
    if stanza.is_none() {
        if let Ok(text) = fs::read_to_string(SOURCES_LIST) {
            stanza = backports_from_list(&text, &codename);
        }
    }
    let stanza = stanza.ok_or_else(|| Error::Missing {
        what: format!("an apt source for {codename} to take the mirror from"),
        fix: format!("add the {suite} suite to apt's sources yourself"),
    })?;
    let path = Path::new(SOURCES_DIR).join(BACKPORTS_FILE);
    println!(
        "setup: adding {suite} to apt's sources ({})",
        path.display()
    );
    fs::write(&path, stanza).ctx("writing", &path)?;
    apt.updated = false;
    Ok(suite)
}

/// A deb822 stanza for `<codename>-backports` built from the first stanza of `sources` whose
/// `Suites:` include `codename` (same URIs, keyring and type).
pub(crate) fn backports_stanza(sources: &str, codename: &str) -> Option<String> {
    for block in sources.split("\n\n") {
        let field = |name: &str| {
            block.lines().find_map(|l| {
                let (k, v) = l.split_once(':')?;
                (k.trim().eq_ignore_ascii_case(name)).then(|| v.trim().to_owned())
            })
        };
        let enabled = field("Enabled").is_none_or(|v| !v.eq_ignore_ascii_case("no"));
        let suites = field("Suites").unwrap_or_default();
        if !enabled || !suites.split_whitespace().any(|s| s == codename) {
            continue;
        }
        let uris = field("URIs")?;
        let mut out =
            format!("Types: deb\nURIs: {uris}\nSuites: {codename}-backports\nComponents: main\n");
        if let Some(k) = field("Signed-By") {
            out.push_str(&format!("Signed-By: {k}\n"));
        }
        return Some(out);
    }
    None
}

/// The same from a one-line-format `sources.list`: the first `deb URI <codename> …` line.
pub(crate) fn backports_from_list(list: &str, codename: &str) -> Option<String> {
    list.lines().find_map(|l| {
        let mut w = l.split_whitespace().filter(|w| !w.starts_with('['));
        if w.next()? != "deb" {
            return None;
        }
        let uri = w.next()?;
        (w.next()? == codename).then(|| {
            format!("Types: deb\nURIs: {uri}\nSuites: {codename}-backports\nComponents: main\n")
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SOURCES: &str = "Types: deb\n# a comment\nURIs: http://mirror.example/debian\n\
        Suites: bookworm bookworm-updates\nComponents: main\n\
        Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\n\
        Types: deb\nURIs: http://mirror.example/debian-security\nSuites: bookworm-security\n\
        Components: main\n";

    #[test]
    fn backports_reuse_the_mirror_and_keyring_of_the_main_suite() {
        assert_eq!(
            backports_stanza(SOURCES, "bookworm").unwrap(),
            "Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm-backports\n\
             Components: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n"
        );
    }

    #[test]
    fn a_security_only_or_disabled_source_gives_no_backports() {
        let security = SOURCES.split("\n\n").nth(1).unwrap();
        assert_eq!(backports_stanza(security, "bookworm"), None);
        let disabled = SOURCES.replace("Types: deb\n# a", "Enabled: no\nTypes: deb\n# a");
        assert_eq!(backports_stanza(&disabled, "bookworm"), None);
    }

    #[test]
    fn a_one_line_sources_list_gives_the_same_stanza() {
        let list = "# deb http://old.example/debian bookworm main\n\
            deb [arch=amd64] http://mirror.example/debian bookworm main contrib\n";
        assert_eq!(
            backports_from_list(list, "bookworm").unwrap(),
            "Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm-backports\n\
             Components: main\n"
        );
    }

    #[test]
    fn the_kernel_package_is_the_metapackages_versioned_dependency() {
        let out = "linux-image-amd64\n  Depends: linux-image-6.1.0-40-amd64\n  \
                   Recommends: firmware-linux-free\n";
        assert_eq!(
            first_dependency(out, "linux-image-").as_deref(),
            Some("linux-image-6.1.0-40-amd64")
        );
        assert_eq!(first_dependency(out, "busybox"), None);
    }

    #[test]
    fn dependencies_are_the_depends_lines_without_virtual_packages() {
        let out = "dpdk-dev\n  Depends: libdpdk-dev\n |Depends: libpcap0.8\n  Depends: <python3:any>\n    \
                   python3\n  Recommends: librte-net-e1000-23\n  Depends: librte-net-e1000-23\n";
        assert_eq!(
            dependencies(out, "Depends"),
            ["libdpdk-dev", "libpcap0.8", "librte-net-e1000-23"]
        );
        assert_eq!(dependencies(out, "Recommends"), ["librte-net-e1000-23"]);
    }

    #[test]
    fn the_codename_comes_from_os_release() {
        let text = "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nVERSION_CODENAME=bookworm\n";
        assert_eq!(os_release_codename(text).as_deref(), Some("bookworm"));
        assert_eq!(os_release_codename("ID=debian\n"), None);
    }
}
