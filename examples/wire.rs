//! Two emulated Intel 82576 NICs on one wire, each driven by the real `igb` driver.
//!
//! NIC A sends IPv4/UDP frames from several source ports; NIC B receives them on four queues
//! spread by RSS. Every frame that crosses is printed with the queue it landed on and its
//! Toeplitz hash, then both NICs' statistics.
//!
//! ```sh
//! cargo run --example wire                        # 16 frames
//! cargo run --example wire -- --frames 64 --pcap wire.pcap
//! ```

use std::process::ExitCode;

use ringfab_emu::{EmuIgb, IgbModelConfig, Wire};
use ringfab_hal::{
    DmaRegion, MacAddr, Nic, Platform, Queue, Report, RssConfig, RssHashes, RxBuffer, RxCompletion,
    RxConfig, RxQueue, Token, TxCompletion, TxConfig, TxQueue, TxSegment,
};
use ringfab_igb::Igb;

/// Receive queues on B that RSS spreads over.
const RX_QUEUES: u16 = 4;
/// Ring depth of every queue.
const DEPTH: usize = 64;
/// Bytes per buffer slot.
const SLOT: usize = 2048;
/// The Microsoft RSS verification key, so the hashes printed can be checked by hand.
const RSS_KEY: [u8; 40] = [
    0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0,
    0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30, 0xf2, 0x0c,
    0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
];

struct Options {
    frames: usize,
    pcap: Option<String>,
}

fn parse_args() -> Result<Options, String> {
    let mut opts = Options {
        frames: 16,
        pcap: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--frames" | "-n" => {
                let v = args.next().ok_or("--frames needs a number")?;
                opts.frames = v
                    .parse()
                    .map_err(|_| format!("--frames: not a number: {v}"))?;
                if opts.frames == 0 || opts.frames > DEPTH / 2 * usize::from(RX_QUEUES) {
                    return Err(format!(
                        "--frames must be between 1 and {}",
                        DEPTH / 2 * usize::from(RX_QUEUES)
                    ));
                }
            }
            "--pcap" => opts.pcap = Some(args.next().ok_or("--pcap needs a file name")?),
            "-h" | "--help" => {
                return Err("usage: wire [--frames N] [--pcap FILE]".to_string());
            }
            other => return Err(format!("unknown argument {other}; try --help")),
        }
    }
    Ok(opts)
}

fn main() -> ExitCode {
    match parse_args().and_then(|o| run(&o)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("wire: {e}");
            ExitCode::FAILURE
        }
    }
}

fn nic(mac: [u8; 6], wire: &Wire) -> EmuIgb {
    let mut config = IgbModelConfig::default();
    config.mac = MacAddr(mac);
    let dev = EmuIgb::new(config);
    dev.connect(wire);
    dev
}

fn run(opts: &Options) -> Result<(), String> {
    let wire = Wire::new();
    if let Some(path) = &opts.pcap {
        wire.capture(path)
            .map_err(|e| format!("opening pcap file {path}: {e}"))?;
    }
    let dev_a = nic([0x52, 0x54, 0, 0, 0, 0x0a], &wire);
    let dev_b = nic([0x52, 0x54, 0, 0, 0, 0x0b], &wire);
    let a = Igb::new(dev_a.platform()).map_err(|e| format!("bringing up NIC A: {e}"))?;
    let b = Igb::new(dev_b.platform()).map_err(|e| format!("bringing up NIC B: {e}"))?;
    for (name, n) in [("A", &a as &dyn Describe), ("B", &b)] {
        println!("NIC {name}: {}", n.describe());
    }

    // B: four receive queues, RSS over IPv4/UDP spreading flows across them.
    let mut rx = Vec::new();
    for q in 0..RX_QUEUES {
        rx.push(
            b.open_rx::<DEPTH>(q, RxConfig::new(SLOT as u32))
                .map_err(|e| format!("opening RX queue {q} on B: {e}"))?,
        );
    }
    let table: Vec<u16> = (0..b.capabilities().rss.map_or(0, |r| r.table_len))
        .map(|i| (i % usize::from(RX_QUEUES)) as u16)
        .collect();
    let mut hashes = RssHashes::default();
    hashes.ipv4 = true;
    hashes.ipv4_udp = true;
    b.set_rss(&RssConfig {
        key: &RSS_KEY,
        table: &table,
        hashes,
    })
    .map_err(|e| format!("programming RSS on B: {e}"))?;

    // Receive buffers: one DMA region on B, DEPTH/2 slots per queue.
    let per_queue = DEPTH / 2;
    let rx_mem = b
        .platform()
        .alloc_dma(SLOT * per_queue * usize::from(RX_QUEUES))
        .map_err(|e| format!("allocating receive buffers: {e}"))?;
    for (q, queue) in rx.iter_mut().enumerate() {
        for s in 0..per_queue {
            let slot = q * per_queue + s;
            let buf = RxBuffer {
                iova: iova_of(&rx_mem, slot * SLOT),
                len: SLOT as u32,
            };
            queue
                .push(buf, Token(slot as u64))
                .map_err(|e| format!("posting a receive: {e}"))?;
        }
        queue.doorbell();
    }

    // A: one transmit queue; frames built in its own DMA memory.
    let mut tx = a
        .open_tx::<DEPTH>(0, TxConfig::default())
        .map_err(|e| format!("opening TX queue 0 on A: {e}"))?;
    let tx_mem = a
        .platform()
        .alloc_dma(SLOT * opts.frames)
        .map_err(|e| format!("allocating transmit buffers: {e}"))?;
    let (mac_a, mac_b) = (a.capabilities().mac, b.capabilities().mac);
    for i in 0..opts.frames {
        let frame = udp_frame(mac_b, mac_a, 10_000 + i as u16, 4791, i);
        tx_mem.write_bytes(i * SLOT, &frame);
        let seg = TxSegment {
            iova: iova_of(&tx_mem, i * SLOT),
            len: frame.len() as u16,
        };
        tx.push(&[seg], Token(i as u64), Report::Always)
            .map_err(|e| format!("sending frame {i}: {e}"))?;
    }
    tx.doorbell(); // one doorbell for the whole batch
    wire.run_until_idle();

    let mut sent = [TxCompletion {
        token: Token(0),
        status: Ok(()),
    }; DEPTH];
    let n = tx.poll(&mut sent);
    let failed = sent[..n].iter().filter(|c| c.status.is_err()).count();
    println!("\nA sent {n} frames ({failed} failed); B received:");
    println!(
        "{:>5} {:>5} {:>6} {:>10}  {:<17} -> {:<17}  udp ports",
        "frame", "queue", "bytes", "rss hash", "from", "to"
    );

    let mut received = 0;
    let mut done = [RxCompletion {
        token: Token(0),
        len: 0,
        status: Ok(()),
        rss: None,
        checksum: ringfab_hal::RxChecksum::NONE,
    }; DEPTH];
    for queue in rx.iter_mut() {
        let n = queue.poll(&mut done);
        for c in &done[..n] {
            received += 1;
            let slot = c.token.0 as usize;
            let mut bytes = vec![0u8; c.len as usize];
            rx_mem.read_bytes(slot * SLOT, &mut bytes);
            print_frame(queue.index(), c, &bytes);
        }
    }
    println!("\n{received} of {} frames crossed the wire", opts.frames);
    let (sa, sb) = (a.stats(), b.stats());
    println!("A: tx_packets {} tx_bytes {}", sa.tx_packets, sa.tx_bytes);
    println!(
        "B: rx_packets {} rx_bytes {} rx_missed {}",
        sb.rx_packets, sb.rx_bytes, sb.rx_missed
    );
    if let Some(path) = &opts.pcap {
        wire.stop_capture();
        println!("every frame on the wire was written to {path}");
    }
    if received != opts.frames || failed != 0 {
        return Err(format!(
            "{received} of {} frames arrived, {failed} sends failed",
            opts.frames
        ));
    }
    Ok(())
}

/// One line about a NIC, for the banner.
trait Describe {
    fn describe(&self) -> String;
}

impl<P: Platform> Describe for Igb<P> {
    fn describe(&self) -> String {
        let caps = self.capabilities();
        let link = self.link();
        format!(
            "82576 {} link {} {} Mb/s, {} tx / {} rx queues, max frame {} bytes",
            caps.mac,
            if link.up { "up" } else { "down" },
            link.speed_mbps,
            caps.tx_queues,
            caps.rx_queues,
            caps.max_frame_len
        )
    }
}

fn iova_of(region: &impl DmaRegion, offset: usize) -> ringfab_hal::Iova {
    region
        .iova()
        .checked_add(offset as u64)
        .expect("offset inside a region fits in 64 bits")
}

fn print_frame(queue: u16, c: &RxCompletion, bytes: &[u8]) {
    let (hash, ports) = match (&c.rss, bytes.get(34..38)) {
        (Some(r), Some(p)) => (
            format!("{:#010x}", r.hash),
            format!(
                "{} -> {}",
                u16::from_be_bytes([p[0], p[1]]),
                u16::from_be_bytes([p[2], p[3]])
            ),
        ),
        (None, _) => ("-".into(), String::new()),
        (Some(r), None) => (format!("{:#010x}", r.hash), String::new()),
    };
    let mac = |r: std::ops::Range<usize>| {
        bytes.get(r).map_or("?".to_string(), |m| {
            MacAddr(m.try_into().unwrap_or([0; 6])).to_string()
        })
    };
    let status = match c.status {
        Ok(()) => String::new(),
        Err(e) => format!("  error: {e:?}"),
    };
    // The payload names the frame's sequence number ("ringfab       12").
    let seq = bytes
        .get(42..58)
        .and_then(|p| std::str::from_utf8(p).ok())
        .and_then(|p| p.strip_prefix("ringfab"))
        .map_or("?".to_string(), |n| n.trim().to_string());
    println!(
        "{:>5} {:>5} {:>6} {:>10}  {:<17} -> {:<17}  {}{}",
        seq,
        queue,
        c.len,
        hash,
        mac(6..12),
        mac(0..6),
        ports,
        status
    );
}

/// An Ethernet/IPv4/UDP frame with a 16-byte payload naming frame `seq`.
fn udp_frame(dst: MacAddr, src: MacAddr, sport: u16, dport: u16, seq: usize) -> Vec<u8> {
    let payload = format!("ringfab {seq:>8}");
    let udp_len = 8 + payload.len() as u16;
    let ip_len = 20 + udp_len;
    let mut f = Vec::with_capacity(14 + ip_len as usize);
    f.extend_from_slice(&dst.0);
    f.extend_from_slice(&src.0);
    f.extend_from_slice(&0x0800u16.to_be_bytes());
    let ip_start = f.len();
    f.extend_from_slice(&[
        0x45,
        0,
        (ip_len >> 8) as u8,
        ip_len as u8,
        0,
        0,
        0x40,
        0,
        64,
        17,
        0,
        0,
    ]);
    f.extend_from_slice(&[192, 168, 1, 10]); // source address
    f.extend_from_slice(&[192, 168, 1, 11]); // destination address
    let csum = ipv4_checksum(&f[ip_start..ip_start + 20]);
    f[ip_start + 10..ip_start + 12].copy_from_slice(&csum.to_be_bytes());
    f.extend_from_slice(&sport.to_be_bytes());
    f.extend_from_slice(&dport.to_be_bytes());
    f.extend_from_slice(&udp_len.to_be_bytes());
    f.extend_from_slice(&[0, 0]); // UDP checksum 0: not computed (allowed over IPv4)
    f.extend_from_slice(payload.as_bytes());
    f
}

fn ipv4_checksum(header: &[u8]) -> u16 {
    let mut sum: u32 = header
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}
