//! Completion-queue benchmark (not a test: it asserts only that every completion arrives).
//!
//! A real driver under a core [`Domain`], on the do-nothing device of `ringfab_emu::null` (a
//! device of the driver's NIC that completes every buffer the moment its doorbell is rung), one
//! receive path bound to one CQ. `--nic igb` (the default), `e1000e` or `virtio-net`. Receives are posted through the stand-in poster
//! (`Path::post_recvs`, one doorbell per call), so what is measured is core plus the driver.
//!
//! * **read**: post [`ROUND`] receives (not timed; the null device completes them in the
//!   doorbell), then time only `cq.read` in batches of 1, 16 or 64 entries until all are read.
//!   ns per entry.
//! * **cycle**: post a batch of receives (doorbell inside the poster, the device completes them),
//!   then read the whole batch back; ns per operation, everything timed.
//!
//! The timed work is in `#[inline(never)]` functions — `cq_read_all` (the reads),
//! `cq_post_batch` (the poster) and `cq_cycle` (both) — so that callgrind can attribute it;
//! `core/benches/instructions.sh` counts instructions per entry that way.
//!
//! `cargo bench -p ringfab --bench cq [-- --entries N] [-- --batch B] [-- --mode read|cycle]
//! [-- --format msg|data] [-- --nic igb|e1000e|virtio-net]`

use std::hint::black_box;
use std::time::{Duration, Instant};

use ringfab::cq::entry::{Data, Format, Msg, OpContext};
use ringfab::cq::{CompletionQueue, CqAttr};
use ringfab::domain::Domain;
use ringfab::flags::{BindFlags, OpFlags};
use ringfab::hal::{DmaRegion, Iova, Nic, RxBuffer, RxConfig};
use ringfab::path::{Path, RecvPost};
use ringfab::{Capacities, Error};
use ringfab_e1000e::E1000e;
use ringfab_emu::null::NullPlatform;
use ringfab_emu::{E1000e82574, Igb82576, VirtioNetPci};
use ringfab_igb::Igb;
use ringfab_virtio_net::VirtioNet;

/// Ring depth of the receive path (and size of its op table).
const D: usize = 256;
/// Receives posted before each timed drain in the read measurement: a multiple of every batch,
/// below the ring's capacity.
const ROUND: usize = 192;
/// Receive buffer size (the null device writes nothing into the buffers).
const SLOT: usize = 2048;
const BATCHES: [usize; 3] = [1, 16, 64];
const MAX_BATCH: usize = 64;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Read,
    Cycle,
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let entries: usize = value("--entries")
        .and_then(|v| v.parse().ok())
        .unwrap_or(4_000_000);
    let batches: Vec<usize> = value("--batch")
        .and_then(|v| v.parse().ok())
        .map_or(BATCHES.to_vec(), |b| vec![b]);
    if batches.iter().any(|&b| b == 0 || b > MAX_BATCH) {
        eprintln!("cq: --batch must be between 1 and {MAX_BATCH}");
        std::process::exit(2);
    }
    let modes = match value("--mode").as_deref() {
        None => vec![Mode::Read, Mode::Cycle],
        Some("read") => vec![Mode::Read],
        Some("cycle") => vec![Mode::Cycle],
        Some(m) => {
            eprintln!("cq: unknown --mode {m} (read, cycle)");
            std::process::exit(2);
        }
    };
    let formats: Vec<&str> = match value("--format").as_deref() {
        None => vec!["msg", "data"],
        Some("msg") => vec!["msg"],
        Some("data") => vec!["data"],
        Some(f) => {
            eprintln!("cq: unknown --format {f} (msg, data)");
            std::process::exit(2);
        }
    };

    let nic = value("--nic").unwrap_or_else(|| "igb".into());
    if !["igb", "e1000e", "virtio-net"].contains(&nic.as_str()) {
        eprintln!("cq: unknown --nic {nic} (igb, e1000e, virtio-net)");
        std::process::exit(2);
    }

    println!(
        "CQ on the null device ({nic} driver), receive completions, {entries} entries per figure"
    );
    println!(
        "{:<38} {:>6} {:>5} {:>12} {:>10}",
        "measurement", "format", "batch", "Mentries/s", "ns/entry"
    );
    for &mode in &modes {
        for &format in &formats {
            for &batch in &batches {
                let ns = match format {
                    "msg" => on_nic::<Msg>(&nic, mode, entries, batch),
                    _ => on_nic::<Data>(&nic, mode, entries, batch),
                };
                let what = match mode {
                    Mode::Read => "read (completed descriptors → entries)",
                    Mode::Cycle => "post → complete → read",
                };
                println!(
                    "{:<38} {:>6} {:>5} {:>12.2} {:>10.2}",
                    what,
                    format,
                    batch,
                    1e3 / ns,
                    ns
                );
            }
        }
    }
}

/// Brings `nic`'s driver up on its null device and runs one measurement; ns per entry.
fn on_nic<F: Format>(nic: &str, mode: Mode, entries: usize, batch: usize) -> f64 {
    let up = "bring-up on the null device";
    match nic {
        "e1000e" => run::<_, F>(
            E1000e::new(NullPlatform::<E1000e82574>::new()).expect(up),
            mode,
            entries,
            batch,
        ),
        "virtio-net" => run::<_, F>(
            VirtioNet::new(NullPlatform::<VirtioNetPci>::new()).expect(up),
            mode,
            entries,
            batch,
        ),
        _ => run::<_, F>(
            Igb::new(NullPlatform::<Igb82576>::new()).expect(up),
            mode,
            entries,
            batch,
        ),
    }
}

/// Sets up a domain on `nic`, a receive path and a CQ of format `F`, and runs one measurement;
/// ns per entry.
fn run<N: Nic, F: Format>(nic: N, mode: Mode, entries: usize, batch: usize) -> f64 {
    let mem = nic.alloc_dma(SLOT * D).expect("buffers");
    // One hardware queue, one CQ of D entries.
    let caps = Capacities {
        queues: 1,
        cqs: 1,
        cq_size: D,
        ..Capacities::DEFAULT
    };
    let domain = Domain::<_, D>::with_capacities(&nic, &caps);
    let attr = CqAttr {
        size: D,
        ..CqAttr::default()
    };
    let cq = domain.open_cq::<F>(&attr).expect("open CQ");
    let rx = domain
        .open_rx(0, RxConfig::new(SLOT as u32))
        .expect("open RX path");
    cq.bind(&domain, &rx, BindFlags::RECV).expect("bind");

    // Posts are built once, as an application keeps its buffers: the loop should cost what core
    // and the driver cost, not what building the posts costs.
    let posts: Vec<RecvPost> = (0..ROUND)
        .map(|i| RecvPost {
            buf: RxBuffer {
                iova: at(&mem, i * SLOT),
                len: SLOT as u32,
            },
            len: SLOT as u32,
            context: OpContext(i),
            flags: OpFlags::empty(),
        })
        .collect();
    let mut out = [F::Entry::default(); MAX_BATCH];

    let ns = match mode {
        Mode::Read => {
            let mut timed = Duration::ZERO;
            let mut done = 0;
            while done < entries {
                cq_post_batch(&rx, &posts);
                let start = Instant::now();
                cq_read_all(&domain, &cq, &mut out[..batch], ROUND);
                timed += start.elapsed();
                done += ROUND;
            }
            timed.as_nanos() as f64 / done as f64
        }
        Mode::Cycle => {
            let start = Instant::now();
            let mut done = 0;
            while done < entries {
                cq_cycle(&domain, &rx, &cq, &posts[..batch], &mut out[..batch]);
                done += batch;
            }
            start.elapsed().as_nanos() as f64 / done as f64
        }
    };
    cq.unbind(&domain, &rx)
        .expect("unbind: nothing outstanding");
    ns
}

/// Posts every receive in `posts` with one `post_recvs` call (one doorbell; the null device
/// completes them all in it — its own cost is its `complete_rx`, to be subtracted).
#[inline(never)]
fn cq_post_batch<N: Nic>(rx: &Path<'_, '_, N, D>, posts: &[RecvPost]) {
    let n = rx.post_recvs(posts).expect("post receives");
    assert_eq!(n, posts.len(), "every receive posted");
}

/// Reads `total` entries from `cq`, `out.len()` at a time, as an application's completion loop
/// would (`Again` is not expected: every entry is already complete).
#[inline(never)]
fn cq_read_all<N: Nic, F: Format>(
    domain: &Domain<'_, N, D>,
    cq: &CompletionQueue<N, F>,
    out: &mut [F::Entry],
    total: usize,
) {
    let mut got = 0;
    while got < total {
        let want = out.len().min(total - got);
        match cq.read(domain, &mut out[..want]) {
            Ok(n) => got += n,
            Err(Error::Again) => panic!("cq: {got} of {total} entries read, then Again"),
            Err(e) => panic!("cq: read failed: {e}"),
        }
        black_box(&out[..want]);
    }
}

/// One post → complete → read cycle of `posts.len()` receives.
#[inline(never)]
fn cq_cycle<N: Nic, F: Format>(
    domain: &Domain<'_, N, D>,
    rx: &Path<'_, '_, N, D>,
    cq: &CompletionQueue<N, F>,
    posts: &[RecvPost],
    out: &mut [F::Entry],
) {
    cq_post_batch(rx, posts);
    cq_read_all(domain, cq, out, posts.len());
}

fn at(region: &impl DmaRegion, offset: usize) -> Iova {
    region
        .iova()
        .checked_add(offset as u64)
        .expect("offset inside the region")
}
