//! TCP on ringfab's rings: a smoltcp TCP echo server on one emulated NIC, reached by a
//! smoltcp client on another NIC on the same wire.
//!
//! Each NIC is driven by its real ringfab driver (opened with `ringfab_nics::AnyNic`) and
//! carries a `ringfab_smoltcp::RingDevice` — smoltcp's `phy::Device` on one receive and one
//! transmit queue, frames read and written in place in the NIC's DMA buffers — with a smoltcp
//! interface on it. The client (192.0.2.1) connects to the server (192.0.2.2, port 7), sends
//! `--bytes` bytes, checks every byte that comes back, and closes. Time is emulated: it stands
//! still while frames move and jumps to the next moment an interface asked for (a delayed
//! ACK, a retransmission) when nothing does, so a run is deterministic.
//!
//! ```sh
//! cargo run --example tcp-echo                          # 64 KiB over two emulated 82576
//! cargo run --example tcp-echo -- --nic virtio-net --bytes 1048576
//! cargo run --example tcp-echo -- --loss 30 --pcap tcp.pcap   # 3% of frames dropped
//! ```

use std::process::ExitCode;

use ringfab_emu::{
    CorruptMode, EmuE1000e, EmuIgb, EmuNic, EmuPlatform, EmuVirtioNet, Kind, ModelConfig,
    VirtioNetModelConfig, Wire, WireFault,
};
use ringfab_hal::MacAddr;
use ringfab_nics::AnyNic;
use ringfab_smoltcp::echo::{ClientState, EchoClient, EchoServer, SocketMemory};
use ringfab_smoltcp::smoltcp::iface::SocketStorage;
use ringfab_smoltcp::smoltcp::time::{Duration, Instant};
use ringfab_smoltcp::smoltcp::wire::{Ipv4Address, Ipv4Cidr};
use ringfab_smoltcp::{Config, Counters, RingDevice};

/// Ring depth (and buffers) each way.
const D: usize = 64;
/// Socket buffer bytes each way (the largest TCP window without window scaling's help).
const SOCKET_BUFFER: usize = 32 * 1024;
const CLIENT: Ipv4Address = Ipv4Address::new(192, 0, 2, 1);
const SERVER: Ipv4Address = Ipv4Address::new(192, 0, 2, 2);
/// TCP echo's port (RFC 862).
const PORT: u16 = 7;
/// The client's port: the first of the dynamic range (RFC 6335 §6).
const CLIENT_PORT: u16 = 49152;
/// Emulated time after which the run is declared stuck.
const LIMIT: Duration = Duration::from_secs(600);

const USAGE: &str = "usage: tcp-echo [--nic igb|e1000e|virtio-net] [--bytes N] \
[--loss PER_MILLE] [--pcap FILE]";

struct Options {
    nic: String,
    bytes: u64,
    /// Frames dropped per thousand on the wire (and as many corrupted).
    loss: u16,
    pcap: Option<String>,
}

fn parse_args() -> Result<Options, String> {
    let mut o = Options {
        nic: "igb".into(),
        bytes: 64 * 1024,
        loss: 0,
        pcap: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |flag: &str| args.next().ok_or(format!("{flag} needs a value"));
        match arg.as_str() {
            "--nic" => o.nic = value("--nic")?,
            "--bytes" => {
                let v = value("--bytes")?;
                o.bytes = v
                    .parse()
                    .map_err(|_| format!("--bytes: not a number: {v}"))?;
            }
            "--loss" => {
                let v = value("--loss")?;
                o.loss = v
                    .parse()
                    .ok()
                    .filter(|&l| l < 500)
                    .ok_or(format!("--loss: a number below 500, not {v}"))?;
            }
            "--pcap" => o.pcap = Some(value("--pcap")?),
            "-h" | "--help" => return Err(USAGE.into()),
            other => return Err(format!("unknown argument {other}\n{USAGE}")),
        }
    }
    Ok(o)
}

fn main() -> ExitCode {
    match parse_args().and_then(|o| run(&o)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tcp-echo: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `dev` plugged into `wire`; the platform its driver runs on (which keeps the device alive).
fn plugged<K: Kind>(dev: EmuNic<K>, wire: &Wire) -> EmuPlatform {
    dev.connect(wire);
    dev.platform()
}

fn mac(last: u8) -> MacAddr {
    MacAddr([0x52, 0x54, 0, 0, 0, last])
}

fn run(o: &Options) -> Result<(), String> {
    let wire = Wire::new();
    if let Some(path) = &o.pcap {
        wire.capture(path)
            .map_err(|e| format!("opening pcap file {path}: {e}"))?;
    }
    let config = |last| {
        let mut c = ModelConfig::default();
        c.mac = mac(last);
        c
    };
    let vconfig = |last| {
        let mut c = VirtioNetModelConfig::default();
        c.mac = mac(last);
        c
    };
    let (pa, pb, what) = match o.nic.as_str() {
        "igb" => (
            plugged(EmuIgb::new(config(0x0a)), &wire),
            plugged(EmuIgb::new(config(0x0b)), &wire),
            "two emulated 82576",
        ),
        "e1000e" => (
            plugged(EmuE1000e::new(config(0x0a)), &wire),
            plugged(EmuE1000e::new(config(0x0b)), &wire),
            "two emulated 82574",
        ),
        "virtio-net" => (
            plugged(EmuVirtioNet::new(vconfig(0x0a)), &wire),
            plugged(EmuVirtioNet::new(vconfig(0x0b)), &wire),
            "two emulated virtio-net devices",
        ),
        other => return Err(format!("--nic {other}: igb, e1000e or virtio-net")),
    };
    let nic_a = AnyNic::open(pa).map_err(|e| format!("NIC A: {e}"))?;
    let nic_b = AnyNic::open(pb).map_err(|e| format!("NIC B: {e}"))?;
    let mut a = RingDevice::<_, D>::open(&nic_a, &Config::default())
        .map_err(|e| format!("device on NIC A: {e}"))?;
    let mut b = RingDevice::<_, D>::open(&nic_b, &Config::default())
        .map_err(|e| format!("device on NIC B: {e}"))?;
    println!(
        "# ringfab tcp-echo: {what} ({} driver) on one emulated wire, smoltcp on each",
        nic_a.driver()
    );
    println!(
        "client {CLIENT} on {} -> server {SERVER}:{PORT} on {}, {} bytes, frames up to {} bytes",
        a.mac(),
        b.mac(),
        o.bytes,
        a.max_frame_len()
    );
    if o.loss > 0 {
        wire.inject(WireFault::Random {
            seed: 16,
            drop_per_mille: o.loss,
            corrupt_per_mille: o.loss,
            duplicate_per_mille: 0,
            mode: CorruptMode::Silent,
        });
        println!(
            "the wire drops {0}‰ of frames and corrupts {0}‰ (with a good CRC: smoltcp's checksums catch it)",
            o.loss
        );
    }

    let (mut slots_a, mut slots_b) = ([SocketStorage::EMPTY; 1], [SocketStorage::EMPTY; 1]);
    let (mut rx_a, mut tx_a) = (vec![0u8; SOCKET_BUFFER], vec![0u8; SOCKET_BUFFER]);
    let (mut rx_b, mut tx_b) = (vec![0u8; SOCKET_BUFFER], vec![0u8; SOCKET_BUFFER]);
    let mut now = Instant::ZERO;
    let (mac_a, mac_b) = (a.mac(), b.mac());
    let memory_b = SocketMemory {
        sockets: &mut slots_b,
        rx: &mut rx_b,
        tx: &mut tx_b,
    };
    let mut server = EchoServer::new(
        &mut b,
        mac_b,
        Ipv4Cidr::new(SERVER, 24),
        PORT,
        memory_b,
        now,
    )
    .map_err(|e| format!("server: {e}"))?;
    let memory_a = SocketMemory {
        sockets: &mut slots_a,
        rx: &mut rx_a,
        tx: &mut tx_a,
    };
    let mut client = EchoClient::new(
        &mut a,
        mac_a,
        Ipv4Cidr::new(CLIENT, 24),
        CLIENT_PORT,
        (SERVER, PORT),
        o.bytes,
        memory_a,
        now,
    )
    .map_err(|e| format!("client: {e}"))?;

    let mut shown = ClientState::Connecting;
    println!("{:>10}  client", "t (ms)");
    println!("{:>10}  connecting (ARP for {SERVER}, then SYN)", 0);
    let state = loop {
        let before = activity(&a.counters()) + activity(&b.counters());
        server.poll(&mut b, now);
        let state = client.poll(&mut a, now);
        wire.run_until_idle();
        if describe(shown, o.bytes) != describe(state, o.bytes) {
            println!("{:>10}  {}", now.total_millis(), describe(state, o.bytes));
            shown = state;
        }
        if state.is_finished() {
            break state;
        }
        if now > Instant::ZERO + LIMIT {
            return Err(format!(
                "no progress after {} s of emulated time: client {state:?}",
                LIMIT.secs()
            ));
        }
        if activity(&a.counters()) + activity(&b.counters()) == before {
            let wait = [server.poll_delay(now), client.poll_delay(now)]
                .into_iter()
                .flatten()
                .min()
                .unwrap_or(Duration::from_millis(1000));
            now += wait.max(Duration::from_millis(1));
        }
    };

    println!();
    for (name, c) in [("A (client)", a.counters()), ("B (server)", b.counters())] {
        println!(
            "{name}: {} frames / {} bytes received in place, {} frames / {} bytes sent in place; \
             dropped: {} bad, {} too long, {} refused from the device; transmit ring full {} times",
            c.rx_frames,
            c.rx_bytes,
            c.tx_frames,
            c.tx_bytes,
            c.rx_bad_frames,
            c.rx_too_long,
            c.rx_device_errors,
            c.tx_ring_full
        );
    }
    let w = wire.stats();
    println!(
        "wire: {} frames sent, {} dropped, {} corrupted",
        w.sent, w.dropped, w.corrupted
    );
    let s = server.stats();
    println!(
        "server: {} connection(s), {} bytes echoed",
        s.connections, s.echoed
    );
    if let Some(path) = &o.pcap {
        wire.stop_capture();
        println!("every frame on the wire was written to {path}");
    }
    match state {
        ClientState::Done => {
            println!(
                "{} bytes sent, echoed and checked byte for byte in {} ms of emulated time",
                o.bytes,
                now.total_millis()
            );
            Ok(())
        }
        other => Err(format!("the exchange failed: {other:?}")),
    }
}

/// Frames seen moving on a device (received, sent, or dropped on receipt).
fn activity(c: &Counters) -> u64 {
    c.rx_frames + c.tx_bytes + c.rx_bad_frames + c.rx_too_long + c.rx_device_errors
}

/// A line for the client's state; `Exchanging` in steps of a quarter of the `total` bytes.
fn describe(state: ClientState, total: u64) -> String {
    match state {
        ClientState::Connecting => "connecting".into(),
        ClientState::Exchanging { received } => {
            let quarters = received * 4 / total.max(1);
            format!("connected; {quarters}/4 of the bytes echoed and checked")
        }
        ClientState::Closing => "every byte back and right; closing".into(),
        ClientState::Done => "closed".into(),
        ClientState::Mismatch { offset, got } => {
            format!("byte {offset} came back as {got:#04x}: wrong")
        }
        ClientState::Aborted { received } => {
            format!("connection closed after {received} bytes")
        }
    }
}
