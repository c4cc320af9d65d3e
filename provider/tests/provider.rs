//! The provider as libfabric loads it: `fi_info` (libfabric-bin) lists it, C programs built
//! against libfabric-dev check fi_getinfo's hints and the objects and data path through
//! libfabric's C API, and `fi_pingpong` runs between two processes on each emulated NIC
//! model, on DGRAM endpoints and on RDM endpoints of libfabric's `ofi_rxd` layered over them. All find `libringfab-fi.so` through `FI_PROVIDER_PATH`, as an application would,
//! and meet on an emulated wire hub of their own (`FI_RINGFAB_HUB`).

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

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

/// A fresh hub directory for one test, so that tests running at once (and other programs of
/// the user's) are on wires of their own.
fn hub_dir(test: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("hub-{test}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `cmd` with the provider reachable, offering `nics` (`FI_RINGFAB_NICS`; `None`: the default
/// NICs), on the hub `hub`.
fn with_provider<'c>(cmd: &'c mut Command, nics: Option<&str>, hub: &Path) -> &'c mut Command {
    match nics {
        Some(n) => cmd.env("FI_RINGFAB_NICS", n),
        None => cmd.env_remove("FI_RINGFAB_NICS"),
    };
    cmd.env("FI_PROVIDER_PATH", provider_dir())
        .env("FI_RINGFAB_HUB", hub)
        .env_remove("FI_PROVIDER")
}

/// Runs `cmd` with the provider reachable, offering `nics` (`FI_RINGFAB_NICS`; `None`: the
/// default NICs).
fn run(cmd: &mut Command, nics: Option<&str>) -> Output {
    let hub = Path::new(env!("CARGO_TARGET_TMPDIR")).join("hub-run");
    let out = with_provider(cmd, nics, &hub)
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
    assert!(text.contains("# FI_RINGFAB_IPV4: String"));
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

/// Compiles `tests/c/<name>.c` against libfabric; the executable's path.
fn compile(name: &str) -> PathBuf {
    let exe = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/c/{name}.c"));
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
    exe
}

/// Compiles `provider/tests/c/<name>.c`, runs it with the provider on the emulated NICs `nics`
/// (`FI_RINGFAB_NICS`) on a hub of its own, and checks that it printed `N passed, 0 failed` and
/// exited 0 (its output shown either way).
fn run_c_program(name: &str, hub: &str, nics: &str) {
    run_c_program_with(name, hub, nics, &[]);
}

/// [`run_c_program`] with the environment variables `env` set too.
fn run_c_program_with(name: &str, hub: &str, nics: &str, env: &[(&str, &str)]) {
    let exe = compile(name);
    let hub = hub_dir(hub);
    let out = with_provider(&mut Command::new(&exe), Some(nics), &hub)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    println!("{text}");
    eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{text}");
    assert!(text.contains(" passed, 0 failed"), "{text}");
}

#[test]
fn c_program_checks_getinfo_hints_through_libfabric() {
    let exe = compile("getinfo_hints");
    let out = run(&mut Command::new(&exe), None);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success(), "{text}");
    assert!(text.contains(" passed, 0 failed"), "{text}");
}

#[test]
fn c_program_checks_domains_queues_and_messages_through_libfabric() {
    run_c_program("dgram_objects", "dgram-objects", "emu:igb,emu:e1000e");
}

#[test]
fn c_program_checks_counters_selective_completion_and_waiting_through_libfabric() {
    run_c_program(
        "completion_objects",
        "completion-objects",
        "emu:igb,emu:e1000e,emu:virtio-net",
    );
}

#[test]
fn c_program_checks_multi_receive_buffers_through_libfabric() {
    run_c_program("multi_recv", "multi-recv", "emu:igb,emu:e1000e");
}

#[test]
fn c_program_checks_scalable_and_shared_contexts_through_libfabric() {
    run_c_program("contexts", "contexts", "emu:igb,emu:e1000e");
}

#[test]
fn c_program_checks_endpoint_aliases_through_libfabric() {
    run_c_program("alias", "alias", "emu:igb,emu:e1000e");
}

#[test]
fn c_program_checks_the_prefix_mode_and_its_zero_copy_through_libfabric() {
    run_c_program("msg_prefix", "msg-prefix", "emu:igb,emu:e1000e");
}

/// FI_SOCKADDR_IN (plain UDP): fi_getinfo's formats and addresses, fi_getname, the AV's
/// sockaddr_in calls, datagrams both ways, FI_SOURCE and FI_SOURCE_ERR, the size limit, and
/// FI_EHOSTUNREACH for a peer nobody answers ARP for (emu:virtio-net is listed without an
/// address, to be refused).
#[test]
fn c_program_checks_sockaddr_in_endpoints_through_libfabric() {
    run_c_program_with(
        "sockaddr_in",
        "sockaddr-in",
        "emu:igb,emu:e1000e,emu:virtio-net",
        &[(
            "FI_RINGFAB_IPV4",
            "emu:igb=192.0.2.1/24,emu:e1000e=192.0.2.2/24",
        )],
    );
}

/// A TCP port nobody listens on now, for fi_pingpong's control connection.
fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// How `fi_pingpong` reaches ringfab.
#[derive(Clone, Copy)]
enum Layering {
    /// `-p ringfab -e dgram`: the provider alone.
    Dgram,
    /// `-p "ringfab;ofi_rxd" -e rdm`: libfabric's reliable-datagram utility provider over it.
    RdmOverRxd,
    /// `-p ringfab -e dgram` with `FI_RINGFAB_IPV4` giving each side an address: the first
    /// info is then `FI_SOCKADDR_IN` (plain UDP), which fi_pingpong takes.
    DgramSockaddrIn,
}

impl Layering {
    fn args(self) -> [&'static str; 4] {
        match self {
            Layering::Dgram | Layering::DgramSockaddrIn => ["-p", "ringfab", "-e", "dgram"],
            Layering::RdmOverRxd => ["-p", "ringfab;ofi_rxd", "-e", "rdm"],
        }
    }

    /// fi_pingpong's default message sizes for the endpoint type (one line each): 64, 256
    /// and 1k bytes for DGRAM (they fit a datagram); up to 1m for RDM, which rxd segments.
    fn sizes(self) -> usize {
        match self {
            Layering::Dgram | Layering::DgramSockaddrIn => 3,
            Layering::RdmOverRxd => 6,
        }
    }

    /// `FI_RINGFAB_IPV4` of the server and of the client (`nic` their NIC), and the line of
    /// fi_pingpong's `-v` banner that shows which address format it was given.
    fn ipv4(self, nic: &str) -> Option<([String; 2], &'static str)> {
        match self {
            Layering::DgramSockaddrIn => Some((
                [format!("{nic}=192.0.2.1/24"), format!("{nic}=192.0.2.2/24")],
                "addr_format: FI_SOCKADDR_IN",
            )),
            _ => None,
        }
    }
}

/// `fi_pingpong` under coreutils' `timeout`: its DGRAM test never retransmits, so a lost
/// datagram would otherwise hold the test for ever; two minutes is far beyond a run's seconds.
fn fi_pingpong() -> Command {
    let mut cmd = Command::new("timeout");
    cmd.args(["120", "fi_pingpong"]);
    cmd
}

/// `fi_pingpong` through `layering` with data checks between a server and a client process,
/// each with an emulated `nic`, on a hub of their own.
fn pingpong(nic: &str, layering: Layering) {
    let format = match layering {
        Layering::DgramSockaddrIn => "-sockaddr-in",
        _ => "",
    };
    let name = format!("pingpong-{}{format}-{nic}", layering.args()[3]);
    let hub = hub_dir(&name);
    let nics = format!("emu:{nic}");
    let port = free_port().to_string();
    let ipv4 = layering.ipv4(&nics);
    let args: &[&str] = if ipv4.is_some() {
        &["-I", "20", "-c", "-v"]
    } else {
        &["-I", "20", "-c"]
    };
    let env = |side: usize| {
        ipv4.as_ref()
            .map(|(configs, _)| ("FI_RINGFAB_IPV4", configs[side].clone()))
    };
    let server = with_provider(&mut fi_pingpong(), Some(&nics), &hub)
        .envs(env(0))
        .args(layering.args())
        .args(args)
        .args(["-B", &port])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running fi_pingpong (install libfabric-bin)");
    // Read while the client runs: with `-v` the server writes more than a pipe holds, and a
    // server blocked on its full stdout stops answering.
    let server = std::thread::spawn(move || server.wait_with_output());
    // The client connects to the server's control port: retried until the server listens.
    let deadline = Instant::now() + Duration::from_secs(10);
    let client = loop {
        let out = with_provider(&mut fi_pingpong(), Some(&nics), &hub)
            .envs(env(1))
            .args(layering.args())
            .args(args)
            .args(["-P", &port, "127.0.0.1"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        if out.status.success() || !err.contains("failed to connect") || Instant::now() > deadline {
            break out;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let server = server.join().unwrap().unwrap();
    for (who, out) in [("client", &client), ("server", &server)] {
        println!("{who}:\n{}", String::from_utf8_lossy(&out.stdout));
        eprintln!("{who}:\n{}", String::from_utf8_lossy(&out.stderr));
    }
    for (who, out) in [("client", client), ("server", server)] {
        assert!(out.status.success(), "{name}: fi_pingpong {who} failed");
        let text = String::from_utf8(out.stdout).unwrap();
        // One line per size, every message acknowledged.
        let acked = text.matches("=20 ").count();
        assert_eq!(acked, layering.sizes(), "{name}: {who}: {text}");
        if let Some((_, format)) = &ipv4 {
            // `-v` writes the info it runs with to stderr.
            let banner = String::from_utf8_lossy(&out.stderr);
            assert!(
                banner.contains(format),
                "{name}: {who} did not use {format}"
            );
        }
    }
    let left: Vec<_> = std::fs::read_dir(&hub).unwrap().collect();
    assert!(left.is_empty(), "{name}: the hub keeps {left:?}");
}

#[test]
fn fi_pingpong_dgram_between_two_processes_on_igb() {
    pingpong("igb", Layering::Dgram);
}

#[test]
fn fi_pingpong_dgram_between_two_processes_on_e1000e() {
    pingpong("e1000e", Layering::Dgram);
}

#[test]
fn fi_pingpong_dgram_between_two_processes_on_virtio_net() {
    pingpong("virtio-net", Layering::Dgram);
}

/// FI_SOCKADDR_IN between two processes: each side's NIC has an IPv4 address
/// (`FI_RINGFAB_IPV4`), the names exchanged are `sockaddr_in`, address resolution is ARP, the
/// messages are plain UDP payloads (in fi_pingpong's prefix mode, `msg_prefix_size` 48).
///
///
/// fi_pingpong keeps two receives posted, and the address exchange reaches a receiver as a
/// burst of ARP frames with the first datagram behind them; its DGRAM test never
/// retransmits. The endpoint's receive pool keeps the ring full whatever the application
/// posted (docs/libfabric.md, "FI_SOCKADDR_IN (plain UDP)"), so no datagram is missed.
#[test]
fn fi_pingpong_dgram_over_sockaddr_in_between_two_processes_on_igb() {
    pingpong("igb", Layering::DgramSockaddrIn);
}

#[test]
fn fi_pingpong_dgram_over_sockaddr_in_between_two_processes_on_e1000e() {
    pingpong("e1000e", Layering::DgramSockaddrIn);
}

#[test]
fn fi_pingpong_dgram_over_sockaddr_in_between_two_processes_on_virtio_net() {
    pingpong("virtio-net", Layering::DgramSockaddrIn);
}

/// ofi_rxd asks the core provider for `FI_MSG` DGRAM endpoints under `FI_MR_LOCAL` and
/// registers its packet pools with `OFI_MR_NOCACHE` (docs/libfabric.md, "RDM through
/// ofi_rxd"); messages up to 1 MiB are segmented, acknowledged and retransmitted by rxd.
#[test]
fn fi_pingpong_rdm_over_ofi_rxd_between_two_processes_on_igb() {
    pingpong("igb", Layering::RdmOverRxd);
}

#[test]
fn fi_pingpong_rdm_over_ofi_rxd_between_two_processes_on_e1000e() {
    pingpong("e1000e", Layering::RdmOverRxd);
}

#[test]
fn fi_pingpong_rdm_over_ofi_rxd_between_two_processes_on_virtio_net() {
    pingpong("virtio-net", Layering::RdmOverRxd);
}
