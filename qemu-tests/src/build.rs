//! Building the guest programs: statically linked (`+crt-static`, glibc) for the guest's target,
//! so the initramfs needs no shared library — and the libfabric provider, which cannot be: it
//! is a shared library that libfabric loads (its libraries: [`crate::libfabric`]).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::cmd;
use crate::error::{Error, Result};
use crate::setup::GUEST_TARGET;

/// A program that goes into the guest's initramfs as `/<name>`.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Program {
    /// A `[[bin]]` target of a workspace package.
    Bin {
        /// The package.
        package: &'static str,
        /// The binary.
        name: &'static str,
    },
    /// An `[[example]]` of a workspace package (the pingpong example, when it exists).
    #[allow(
        dead_code,
        reason = "no example runs in the guest yet: see docs/qemu-tests.md"
    )]
    Example {
        /// The package.
        package: &'static str,
        /// The example.
        name: &'static str,
    },
}

impl Program {
    /// The name it has in the guest (and as a build artifact).
    pub(crate) fn name(self) -> &'static str {
        match self {
            Program::Bin { name, .. } | Program::Example { name, .. } => name,
        }
    }
}

/// Every program the guest runs: the test program, and the examples it runs as tests (each
/// one line here plus its entry in the guest's test table, qemu-tests/guest/src/main.rs).
pub(crate) const GUEST_PROGRAMS: &[Program] = &[
    Program::Bin {
        package: "ringfab-qemu-guest",
        name: "ringfab-qemu-guest",
    },
    Program::Example {
        package: "ringfab-examples",
        name: "pingpong",
    },
    Program::Example {
        package: "ringfab-examples",
        name: "info",
    },
];

/// `cargo build` arguments for `programs` (release, the guest target).
pub(crate) fn cargo_args(programs: &[Program]) -> Vec<String> {
    let mut args: Vec<String> = ["build", "--release", "--target", GUEST_TARGET]
        .map(String::from)
        .to_vec();
    for p in programs {
        let (package, kind, name) = match *p {
            Program::Bin { package, name } => (package, "--bin", name),
            Program::Example { package, name } => (package, "--example", name),
        };
        args.extend(["-p", package, kind, name].map(String::from));
    }
    args
}

/// Builds the guest programs; returns `(name, path)` of each.
///
/// # Errors
/// [`Error::Command`] if cargo fails, [`Error::Unexpected`] if an artifact is not where cargo
/// puts it.
pub(crate) fn guest_programs(
    workspace: &Path,
    target_dir: &Path,
) -> Result<Vec<(String, PathBuf)>> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut flags = std::env::var("RUSTFLAGS").unwrap_or_default();
    // Static, so the initramfs needs no shared library; without debug info (the release
    // profile keeps some), so the initramfs stays small: symbols stay for backtraces.
    flags.push_str(" -C target-feature=+crt-static -C strip=debuginfo");
    let mut c = Command::new(cargo);
    c.current_dir(workspace)
        .args(cargo_args(GUEST_PROGRAMS))
        .env("CARGO_TARGET_DIR", target_dir)
        .env("RUSTFLAGS", flags.trim())
        .env_remove("CARGO_ENCODED_RUSTFLAGS");
    cmd::run("building the guest programs", &mut c)?;
    let out = target_dir.join(GUEST_TARGET).join("release");
    GUEST_PROGRAMS
        .iter()
        .map(|p| {
            let path = match p {
                Program::Bin { name, .. } => out.join(name),
                Program::Example { name, .. } => out.join("examples").join(name),
            };
            if path.exists() {
                Ok((p.name().to_owned(), path))
            } else {
                Err(Error::Unexpected {
                    what: "the guest build",
                    detail: format!("{} was not built", path.display()),
                })
            }
        })
        .collect()
}

/// Builds the libfabric provider (`cargo build --release -p ringfab-fi`) for the host, whose
/// target is the guest's (`x86_64-unknown-linux-gnu`), without `+crt-static` — a `cdylib`
/// cannot link the C library statically; returns `libringfab_fi.so`.
///
/// # Errors
/// [`Error::Command`] if cargo fails, [`Error::Unexpected`] if the library is not where cargo
/// puts it.
pub(crate) fn provider(workspace: &Path, target_dir: &Path) -> Result<PathBuf> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut c = Command::new(cargo);
    c.current_dir(workspace)
        .args(["build", "--release", "-p", "ringfab-fi"])
        .env("CARGO_TARGET_DIR", target_dir)
        .env_remove("CARGO_ENCODED_RUSTFLAGS");
    cmd::run("building the libfabric provider", &mut c)?;
    let so = target_dir.join("release").join("libringfab_fi.so");
    if so.exists() {
        Ok(so)
    } else {
        Err(Error::Unexpected {
            what: "the provider build",
            detail: format!("{} was not built", so.display()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_cargo_build_covers_bins_and_examples() {
        let args = cargo_args(&[
            Program::Bin {
                package: "p",
                name: "b",
            },
            Program::Example {
                package: "e",
                name: "pingpong",
            },
        ]);
        assert_eq!(
            args.join(" "),
            "build --release --target x86_64-unknown-linux-gnu -p p --bin b \
             -p e --example pingpong"
        );
    }
}
