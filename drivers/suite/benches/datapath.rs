//! Data-path benchmark of the drivers (not a test: it asserts only that frames arrive), one NIC
//! per run: `--nic igb` (the default), `e1000e` or `virtio-net`.
//!
//! Two measurements, 64-byte frames, batch 1, 8 and 32:
//!
//! * **emu**: TX on one emulated NIC, across the `ringfab-emu` wire, RX on another — what
//!   `cargo test` runs against. Its figure is dominated by the model's own cost.
//! * **null device**: the same driver calls against a *do-nothing device* of the same kind that
//!   completes every buffer the moment its doorbell is rung (Intel: DD on RS descriptors, RX a
//!   64-byte frame with DD|EOP; virtio: every available buffer used, by id, RX with a 64-byte
//!   frame), `ringfab_emu::null`. What remains is the driver's cost per frame: push + its share
//!   of the doorbell + poll. Run under `valgrind --tool=callgrind` (`instructions.sh` next to this
//!   file, docs/perf.md) to get instructions per frame with the device's own instructions
//!   subtracted.
//!
//! `cargo bench -p ringfab-nic-suite --bench datapath [-- --nic N] [-- --frames N] [-- --batch B]
//! [-- --null-only]`

use std::hint::black_box;
use std::time::Instant;

use ringfab_e1000e::E1000e;
use ringfab_emu::null::{NullPlatform, RX_FRAME_LEN};
use ringfab_emu::{
    E1000e82574, EmuE1000e, EmuIgb, EmuVirtioNet, Igb82576, ModelConfig, VirtioNetModelConfig,
    VirtioNetPci, Wire,
};
use ringfab_hal::{
    DmaRegion, Iova, MacAddr, Nic, Queue, Report, RxBuffer, RxCompletion, RxConfig, RxQueue, Token,
    TxCompletion, TxConfig, TxQueue, TxSegment,
};
use ringfab_igb::Igb;
use ringfab_nic_suite::{NO_RX, NO_TX};
use ringfab_virtio_net::VirtioNet;

/// The null device's RX frames are this long too; TX frames are made this long.
const FRAME: usize = RX_FRAME_LEN as usize;
const DEPTH: usize = 256;
const SLOT: usize = 2048;
const BATCHES: [usize; 3] = [1, 8, 32];

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
    };
    let value = |flag: &str| arg(flag).and_then(|v| v.parse().ok());
    let frames: usize = value("--frames").unwrap_or(2_000_000);
    let batches: Vec<usize> = value("--batch").map_or(BATCHES.to_vec(), |b| vec![b]);
    if batches.iter().any(|&b| b == 0 || b > 32) {
        eprintln!("datapath: --batch must be between 1 and 32");
        std::process::exit(2);
    }
    let null_only = args.iter().any(|a| a == "--null-only");
    let nic = arg("--nic").map_or("igb", String::as_str);
    let mac = |last: u8| MacAddr([0x52, 0x54, 0, 0, 0, last]);
    let config = |last: u8| {
        let mut c = ModelConfig::default();
        c.mac = mac(last);
        c
    };
    let wire = Wire::new();
    match nic {
        "igb" => {
            let null = || Igb::new(NullPlatform::<Igb82576>::new()).expect("null bring-up");
            let emu = |last| {
                let d = EmuIgb::new(config(last));
                d.connect(&wire);
                Igb::new(d.platform()).expect("emu bring-up")
            };
            run(nic, frames, &batches, null_only, null, emu, &wire);
        }
        "e1000e" => {
            let null = || E1000e::new(NullPlatform::<E1000e82574>::new()).expect("null bring-up");
            let emu = |last| {
                let d = EmuE1000e::new(config(last));
                d.connect(&wire);
                E1000e::new(d.platform()).expect("emu bring-up")
            };
            run(nic, frames, &batches, null_only, null, emu, &wire);
        }
        "virtio-net" => {
            let null =
                || VirtioNet::new(NullPlatform::<VirtioNetPci>::new()).expect("null bring-up");
            let emu = |last| {
                let mut c = VirtioNetModelConfig::default();
                c.mac = mac(last);
                let d = EmuVirtioNet::new(c);
                d.connect(&wire);
                VirtioNet::new(d.platform()).expect("emu bring-up")
            };
            run(nic, frames, &batches, null_only, null, emu, &wire);
        }
        other => {
            eprintln!("datapath: --nic {other}: igb, e1000e or virtio-net");
            std::process::exit(2);
        }
    }
}

/// Every measurement on one kind of NIC: `null` brings one up on a null device, `emu(last)` one
/// on an emulated device on `wire` with MAC ending in `last`.
fn run<N: Nic, M: Nic>(
    name: &str,
    frames: usize,
    batches: &[usize],
    null_only: bool,
    null: impl Fn() -> N,
    emu: impl Fn(u8) -> M,
    wire: &Wire,
) {
    println!("{name} data path, {FRAME}-byte frames, {frames} frames per figure");
    println!(
        "{:<12} {:>5} {:>12} {:>10}",
        "device", "batch", "Mframes/s", "ns/frame"
    );
    for &batch in batches {
        let ns = null_device_cycle(&null(), frames, batch);
        println!(
            "{:<12} {:>5} {:>12.2} {:>10.1}",
            "null (TX+RX)",
            batch,
            1e3 / ns,
            ns
        );
    }
    if null_only {
        return;
    }
    for &batch in batches {
        let ns = emu_cycle(&emu(0xa), &emu(0xb), wire, frames / 10, batch);
        println!(
            "{:<12} {:>5} {:>12.2} {:>10.1}",
            "emu (TX+RX)",
            batch,
            1e3 / ns,
            ns
        );
    }
}

/// TX then RX of `frames` frames in batches against the do-nothing device; ns per frame (both
/// directions together).
#[inline(never)]
fn null_device_cycle<N: Nic>(nic: &N, frames: usize, batch: usize) -> f64 {
    let mut tx = nic
        .open_tx::<DEPTH>(0, TxConfig::default())
        .expect("open TX");
    let mut rx = nic
        .open_rx::<DEPTH>(0, RxConfig::new(SLOT as u32))
        .expect("open RX");
    let mem = nic.alloc_dma(SLOT * batch).expect("buffers");
    // Segments and buffers are computed once: an application keeps its buffers' addresses, and
    // the loop below should cost what the driver costs, not what building them costs.
    let segs: [TxSegment; 32] = core::array::from_fn(|i| TxSegment {
        iova: at(&mem, (i % batch) * SLOT),
        len: FRAME as u16,
    });
    let bufs: [RxBuffer; 32] = core::array::from_fn(|i| RxBuffer {
        iova: at(&mem, (i % batch) * SLOT),
        len: SLOT as u32,
    });
    let mut txc = [NO_TX; 32];
    let mut rxc = [NO_RX; 32];

    let start = Instant::now();
    let mut done = 0;
    while done < frames {
        driver_batch(
            &mut tx,
            &mut rx,
            &segs[..batch],
            &bufs[..batch],
            &mut txc,
            &mut rxc,
        );
        done += batch;
    }
    start.elapsed().as_nanos() as f64 / done as f64
}

/// One batch through the driver in each direction. The two halves are separate functions so
/// that a profiler (callgrind) can attribute each direction's cost; the do-nothing device's own
/// work is in its `complete_tx` / `complete_rx` (`ringfab_emu::null`), to be subtracted.
fn driver_batch<T: TxQueue, R: RxQueue>(
    tx: &mut T,
    rx: &mut R,
    segs: &[TxSegment],
    bufs: &[RxBuffer],
    txc: &mut [TxCompletion],
    rxc: &mut [RxCompletion],
) {
    tx_batch(tx, segs, txc);
    rx_batch(rx, bufs, rxc);
}

/// Push one frame per segment in `segs` (a batch), one doorbell, poll all their completions
/// back — what an application does, through the public `TxQueue` methods only.
///
/// The loop's own cost, counted in `instructions.sh`'s figures, is about 4 instructions per frame
/// (loop counter, segment load, the `expect` test) plus, per batch, the poll loop and the call.
#[inline(never)]
fn tx_batch<T: TxQueue>(tx: &mut T, segs: &[TxSegment], txc: &mut [TxCompletion]) {
    for (i, seg) in segs.iter().enumerate() {
        tx.push(core::slice::from_ref(seg), Token(i as u64), Report::Always)
            .expect("TX push");
    }
    tx.doorbell();
    let batch = segs.len();
    let mut got = 0;
    while got < batch {
        got += tx.poll(&mut txc[..batch - got]);
    }
}

/// Post the buffers in `bufs` (a batch), one doorbell, poll all their completions back, reading
/// each completion's length as an application would.
///
/// The loop's own cost (read off its callgrind profile) is 4 instructions per frame for the pushes
/// and 1.4 for reading the lengths, plus, per batch, the poll loop and the call. Also counted, per
/// batch: the null device's MMIO decode of the tail write (~35 instructions, outside
/// `complete_rx`), about 1 per frame at batch 32.
#[inline(never)]
fn rx_batch<R: RxQueue>(rx: &mut R, bufs: &[RxBuffer], rxc: &mut [RxCompletion]) {
    for (i, &buf) in bufs.iter().enumerate() {
        rx.push(buf, Token(i as u64)).expect("RX push");
    }
    rx.doorbell();
    let batch = bufs.len();
    let mut got = 0;
    let mut bytes = 0u32;
    while got < batch {
        let n = rx.poll(&mut rxc[..batch - got]);
        for c in &rxc[..n] {
            bytes = bytes.wrapping_add(c.len);
        }
        got += n;
    }
    black_box(bytes);
}

/// TX on emulated NIC `a`, RX on `b` across `wire`; ns per frame.
fn emu_cycle<N: Nic>(a: &N, b: &N, wire: &Wire, frames: usize, batch: usize) -> f64 {
    let mut tx = a.open_tx::<DEPTH>(0, TxConfig::default()).expect("open TX");
    let mut rx = b
        .open_rx::<DEPTH>(0, RxConfig::new(SLOT as u32))
        .expect("open RX");
    let txmem = a.alloc_dma(SLOT * batch).expect("TX buffers");
    let rxmem = b.alloc_dma(SLOT * batch).expect("RX buffers");
    let mut frame = [0u8; FRAME];
    frame[..6].copy_from_slice(&b.capabilities().mac.0);
    frame[6..12].copy_from_slice(&a.capabilities().mac.0);
    frame[12..14].copy_from_slice(&0x88b5u16.to_be_bytes()); // IEEE local experimental EtherType
    for i in 0..batch {
        txmem.write_bytes(i * SLOT, &frame);
    }
    let mut txc = [NO_TX; 32];
    let mut rxc = [NO_RX; 32];

    let start = Instant::now();
    let mut done = 0;
    while done < frames {
        for i in 0..batch {
            let buf = RxBuffer {
                iova: at(&rxmem, i * SLOT),
                len: SLOT as u32,
            };
            rx.push(buf, Token(i as u64)).expect("RX push");
        }
        rx.doorbell();
        for i in 0..batch {
            let seg = TxSegment {
                iova: at(&txmem, i * SLOT),
                len: FRAME as u16,
            };
            tx.push(&[seg], Token(i as u64), Report::Always)
                .expect("TX push");
        }
        tx.doorbell();
        let (mut sent, mut received) = (0, 0);
        while sent < batch || received < batch {
            sent += tx.poll(&mut txc[..batch - sent]);
            let n = rx.poll(&mut rxc[..batch - received]);
            assert!(
                rxc[..n].iter().all(|c| c.status.is_ok()),
                "emu frame arrived bad"
            );
            received += n;
            if n == 0 && received < batch {
                // Deferred work of a model (none when the doorbell delivered everything).
                wire.run_until_idle();
            }
        }
        done += batch;
    }
    start.elapsed().as_nanos() as f64 / done as f64
}

fn at(region: &impl DmaRegion, offset: usize) -> Iova {
    region
        .iova()
        .checked_add(offset as u64)
        .expect("offset inside the region")
}
