//! The provider as libfabric loads it: `fi_info` (libfabric-bin) lists it, and a C program
//! built against libfabric-dev checks fi_getinfo's hints through libfabric's C API. Both find
//! `libringfab-fi.so` through `FI_PROVIDER_PATH`, as an application would.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A directory holding only the provider this test run built, under the name libfabric
/// expects (`lib<name>-fi.so`; Cargo names the file `libringfab_fi.so`).
fn provider_dir() -> &'static Path {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(make_provider_dir)
}

fn make_provider_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's own path");
    let deps = exe.parent().expect("tests run from target/<profile>/deps");
    let so = [
        deps.join("libringfab_fi.so"),
        deps.join("../libringfab_fi.so"),
    ]
    .into_iter()
    .find(|p| p.exists())
    .expect("cargo builds the cdylib with the crate");
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("ringfab-fi-provider");
    std::fs::create_dir_all(&dir).unwrap();
    let link = dir.join("libringfab-fi.so");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(so.canonicalize().unwrap(), &link).unwrap();
    dir
}

/// Runs `cmd` with the provider reachable, offering `nics` (`FI_RINGFAB_NICS`; `None`: the
/// default NICs).
fn run(cmd: &mut Command, nics: Option<&str>) -> Output {
    match nics {
        Some(n) => cmd.env("FI_RINGFAB_NICS", n),
        None => cmd.env_remove("FI_RINGFAB_NICS"),
    };
    let out = cmd
        .env("FI_PROVIDER_PATH", provider_dir())
        .env_remove("FI_PROVIDER")
        .output()
        .unwrap_or_else(|e| panic!("running {cmd:?}: {e} (install libfabric-bin and gcc)"));
    println!("{}", String::from_utf8_lossy(&out.stdout));
    eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    out
}

#[test]
fn fi_info_lists_one_dgram_domain_per_default_nic() {
    let out = run(
        Command::new("fi_info").args(["-p", "ringfab", "-t", "FI_EP_DGRAM"]),
        None,
    );
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    for nic in ["emu:igb", "emu:e1000e", "emu:virtio-net"] {
        assert!(text.contains(&format!("domain: {nic}\n")), "{nic} missing");
    }
    assert_eq!(text.matches("provider: ringfab\n").count(), 3);
    assert_eq!(text.matches("type: FI_EP_DGRAM").count(), 3);
}

#[test]
fn fi_info_verbose_shows_the_measured_attributes() {
    let out = run(
        Command::new("fi_info").args(["-p", "ringfab", "-t", "FI_EP_DGRAM", "-v"]),
        Some("emu:igb"),
    );
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    for line in [
        "caps: [ FI_MSG, FI_RECV, FI_SEND, FI_REMOTE_COMM ]",
        "mode: [  ]",
        "addr_format: FI_FORMAT_UNSPEC",
        "src_addrlen: 8",
        "inject_size: 64",
        "iov_limit: 1",
        "comp_order: [ FI_ORDER_STRICT ]",
        "mr_mode: [ FI_MR_LOCAL ]",
        "threading: FI_THREAD_SAFE",
        "data_progress: FI_PROGRESS_MANUAL",
        "max_err_data: 64",
        "name: emu:igb",
        "prov_name: ringfab",
        "prov_version: 0.1",
    ] {
        assert!(text.contains(line), "fi_info -v lacks '{line}'");
    }
}

#[test]
fn fi_info_env_lists_the_nics_parameter() {
    let out = run(Command::new("fi_info").arg("-e"), None);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("# FI_RINGFAB_NICS: String"));
}

#[test]
fn a_nic_that_cannot_be_opened_is_left_out() {
    let out = run(
        Command::new("fi_info").args(["-p", "ringfab", "-t", "FI_EP_DGRAM"]),
        Some("emu:e1000e,emu:nothing,0000:ff:1f.7"),
    );
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.matches("provider: ringfab\n").count(), 1, "{text}");
    assert!(text.contains("domain: emu:e1000e\n"));
}

#[test]
fn c_program_checks_getinfo_hints_through_libfabric() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let exe = dir.join("getinfo_hints");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/getinfo_hints.c");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let built = run(
        Command::new(&cc)
            .args(["-std=gnu11", "-Wall", "-Werror", "-o"])
            .arg(&exe)
            .arg(&src)
            .arg("-lfabric"),
        None,
    );
    assert!(built.status.success(), "compiling {}", src.display());
    let out = run(&mut Command::new(&exe), None);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success(), "{text}");
    assert!(text.contains(" passed, 0 failed"), "{text}");
}
