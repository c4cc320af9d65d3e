//! The igb driver through VFIO on QEMU's 82576: bind, open, link, frames both ways, RSS over
//! four queues, MSI-X waking a wait, and the transmit/receive rate.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use ringfab_hal::{
    DmaRegion, Iova, MacAddr, Nic as HalNic, Platform, Queue, Report, RssConfig, RssHashKind,
    RssHashes, RxBuffer, RxCompletion, RxConfig, RxMode, RxQueue, Token, TxCompletion, TxConfig,
    TxQueue, TxSegment, Wait, WaitOutcome,
};
use ringfab_igb::IgbRx;
use ringfab_vfio::bind;
use ringfab_vfio::{Bdf, Sysfs, VfioDma, VfioPlatform};

use crate::frames::{frame, toeplitz, udp_frame, Flow, RSS_KEY};
use crate::guest::{Ctx, Nic, Outcome};

/// Ring depth of every queue the tests open.
pub(crate) const DEPTH: usize = 64;
/// Bytes of one buffer slot.
pub(crate) const BUF: usize = 2048;
/// Frames in flight at most: fewer than a receive ring holds.
const WINDOW: usize = 32;
/// How long a test waits for frames before it fails.
pub(crate) const PATIENCE: Duration = Duration::from_secs(10);

pub(crate) const NO_TX: TxCompletion = TxCompletion {
    token: Token(u64::MAX),
    status: Ok(()),
};
pub(crate) const NO_RX: RxCompletion = RxCompletion {
    token: Token(u64::MAX),
    len: 0,
    status: Ok(()),
    rss: None,
    checksum: ringfab_hal::RxChecksum::NONE,
};

/// Binds both igb NICs to vfio-pci with `ringfab_vfio::bind` (what `devbind --bind` does).
pub(crate) fn bind(ctx: &mut Ctx) -> Outcome {
    bind_all(&ctx.bdfs, ringfab_igb::PCI_IDS, "an 82576")
}

/// Binds each of `bdfs` to vfio-pci after checking it is one of the PCI functions `ids` (the
/// list the driver drives, `what`).
pub(crate) fn bind_all(bdfs: &[String], ids: &[(u16, u16)], what: &str) -> Outcome {
    let sys = Sysfs::default();
    let mut done = Vec::new();
    for bdf in bdfs {
        let addr: Bdf = bdf.parse().map_err(|e| format!("{e}"))?;
        let found = sys.ids(addr).map_err(|e| format!("{e}"))?;
        if !ids.contains(&found) {
            let listed: Vec<String> = ids
                .iter()
                .map(|(v, d)| format!("{v:04x}:{d:04x}"))
                .collect();
            return Err(format!(
                "{bdf} is {:04x}:{:04x}, not {what} ({})",
                found.0,
                found.1,
                listed.join(", ")
            ));
        }
        let out = bind::bind(&sys, addr, "vfio-pci", false).map_err(|e| format!("{bdf}: {e}"))?;
        if out.after.as_deref() != Some("vfio-pci") {
            return Err(format!("{bdf} is bound to {:?} after binding", out.after));
        }
        let group = sys
            .iommu_group(addr)
            .map_or("none".into(), |g| g.to_string());
        done.push(format!(
            "{bdf} {} -> vfio-pci (IOMMU group {group})",
            out.before.as_deref().unwrap_or("no driver")
        ));
    }
    Ok(done.join(", "))
}

/// Opens both NICs through VFIO and brings them up with the igb driver.
pub(crate) fn open(ctx: &mut Ctx) -> Outcome {
    let mut nics = Vec::new();
    let mut detail = Vec::new();
    for (i, bdf) in ctx.bdfs.iter().enumerate() {
        let p = VfioPlatform::open(bdf).map_err(|e| format!("opening {bdf}: {e}"))?;
        let (group, vectors) = (p.iommu_group(), p.irq_vectors());
        let nic = Nic::new(p).map_err(|e| format!("bringing up {bdf}: {e}"))?;
        let caps = nic.capabilities();
        if let Some(want) = ctx.macs.as_ref().map(|m| &m[i]) {
            if caps.mac.to_string() != *want {
                return Err(format!(
                    "{bdf}: the driver read MAC {}, QEMU set {want}",
                    caps.mac
                ));
            }
        }
        detail.push(format!(
            "{bdf}: group {group}, {vectors} MSI-X vectors, MAC {} (as set), {}/{} queues",
            caps.mac, caps.tx_queues, caps.rx_queues
        ));
        nics.push(nic);
    }
    let [a, b] = <[Nic; 2]>::try_from(nics).map_err(|_| "not two NICs".to_owned())?;
    if a.capabilities().mac == b.capabilities().mac {
        return Err("both NICs have the same MAC".into());
    }
    ctx.nics = Some([a, b]);
    Ok(detail.join("; "))
}

/// Both links up (QEMU brings a link up ~0.5 s after autonegotiation restarts; bring-up waits
/// for it, this test allows 3 s more).
pub(crate) fn link(ctx: &mut Ctx) -> Outcome {
    let (a, b) = ctx.nics()?;
    let start = Instant::now();
    loop {
        let (la, lb) = (a.link(), b.link());
        if la.up && lb.up {
            return Ok(format!(
                "both up, {} Mb/s {} duplex",
                la.speed_mbps,
                if la.full_duplex { "full" } else { "half" }
            ));
        }
        if start.elapsed() > Duration::from_secs(3) {
            return Err(format!("link A {la:?}, B {lb:?}"));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Buffer slots of [`BUF`] bytes in memory the device reaches: DMA memory of the platform, or
/// caller memory mapped for the device.
pub(crate) trait Slots {
    /// The IOVA of slot `slot`.
    fn slot_iova(&self, slot: usize) -> Iova;
    /// Copies `bytes` into slot `slot`.
    fn put(&self, slot: usize, bytes: &[u8]);
    /// The first `len` bytes of slot `slot`.
    fn get(&self, slot: usize, len: usize) -> Vec<u8>;
}

impl<D: DmaRegion> Slots for D {
    fn slot_iova(&self, slot: usize) -> Iova {
        iova_at(self, slot * BUF)
    }
    fn put(&self, slot: usize, bytes: &[u8]) {
        self.write_bytes(slot * BUF, bytes);
    }
    fn get(&self, slot: usize, len: usize) -> Vec<u8> {
        read(self, slot * BUF, len)
    }
}

/// The IOVA of byte `offset` of `mem`.
pub(crate) fn iova_at<D: DmaRegion>(mem: &D, offset: usize) -> Iova {
    Iova(mem.iova().0 + offset as u64)
}

/// `len` bytes of `mem` at `offset`.
pub(crate) fn read<D: DmaRegion>(mem: &D, offset: usize, len: usize) -> Vec<u8> {
    let mut v = vec![0; len];
    mem.read_bytes(offset, &mut v);
    v
}

/// The MAC of a NIC.
fn mac<N: HalNic>(n: &N) -> MacAddr {
    n.capabilities().mac
}

/// Pushes frame `f` as token `token` from slot `slot` of `mem`: one descriptor, or two (the
/// 14-byte header apart) when `split`.
fn push_frame<Q: TxQueue>(
    tx: &mut Q,
    mem: &impl Slots,
    slot: usize,
    f: &[u8],
    token: u64,
    split: bool,
) -> Result<(), String> {
    mem.put(slot, f);
    let base = mem.slot_iova(slot);
    let whole = [TxSegment {
        iova: base,
        len: f.len() as u16,
    }];
    let two = [
        TxSegment {
            iova: base,
            len: 14,
        },
        TxSegment {
            iova: Iova(base.0 + 14),
            len: (f.len() - 14) as u16,
        },
    ];
    let segs: &[TxSegment] = if split { &two } else { &whole };
    tx.push(segs, Token(token), Report::Always)
        .map_err(|e| format!("push of frame {token}: {e}"))
}

/// Posts receive token `t` in slot `t % DEPTH` of `mem`.
fn post_rx<Q: RxQueue>(rx: &mut Q, mem: &impl Slots, t: u64) -> Result<(), String> {
    let slot = t as usize % DEPTH;
    rx.push(
        RxBuffer {
            iova: mem.slot_iova(slot),
            len: BUF as u32,
        },
        Token(t),
    )
    .map_err(|e| format!("posting receive buffer {t}: {e}"))
}

/// Sends single frames from one NIC to another on a transmit queue of its own, each one
/// waited for until its transmit completion.
pub(crate) struct Sender<Q, D> {
    tx: Q,
    mem: D,
    src: MacAddr,
    dst: MacAddr,
    /// Length of every frame sent.
    pub(crate) len: usize,
}

/// A sender on transmit queue `queue` of `from`, addressing `to`.
pub(crate) fn sender<'n, N: HalNic>(
    from: &'n N,
    to: &N,
    queue: u16,
) -> Result<Sender<N::Tx<'n, DEPTH>, N::Dma>, String> {
    Ok(Sender {
        tx: from
            .open_tx::<DEPTH>(queue, TxConfig::default())
            .map_err(|e| format!("opening transmit queue {queue}: {e}"))?,
        mem: from.alloc_dma(BUF).map_err(|e| e.to_string())?,
        src: mac(from),
        dst: mac(to),
        len: 100,
    })
}

impl<Q: TxQueue, D: DmaRegion> Sender<Q, D> {
    /// Sends frame `seq` and waits for its completion.
    pub(crate) fn send(&mut self, seq: u64) -> Result<(), String> {
        self.send_to(self.dst, seq).map(drop)
    }

    /// Sends frame `seq` to `dst` and waits for its completion; the frame sent.
    pub(crate) fn send_to(&mut self, dst: MacAddr, seq: u64) -> Result<Vec<u8>, String> {
        let f = frame(dst, self.src, seq, self.len);
        push_frame(&mut self.tx, &self.mem, 0, &f, seq, false)?;
        self.tx.doorbell();
        let mut out = [NO_TX; 2];
        let start = Instant::now();
        loop {
            match self.tx.poll(&mut out) {
                0 if start.elapsed() > PATIENCE => {
                    return Err(format!("frame {seq} not sent after {PATIENCE:?}"))
                }
                0 => std::hint::spin_loop(),
                _ if out[0].status.is_ok() => return Ok(f),
                _ => return Err(format!("frame {seq}: {:?}", out[0])),
            }
        }
    }
}

/// What an exchange measured.
pub(crate) struct Exchanged {
    /// Frames received and checked.
    pub(crate) frames: usize,
    /// Their bytes.
    pub(crate) bytes: usize,
    /// From the first push to the last completion.
    pub(crate) elapsed: Duration,
}

/// Sends `count` frames from `from` (transmit queue 0) to `to` (receive queue 0), frame `i`
/// `len(i)` bytes, every third one in two descriptors when `split`, at most [`WINDOW`] in
/// flight; checks that every frame arrives once, in order, byte for byte, and that every
/// transmit token comes back `Ok`.
fn exchange<N: HalNic>(
    from: &N,
    to: &N,
    count: usize,
    len: impl Fn(usize) -> usize,
    split: bool,
) -> Result<Exchanged, String> {
    let tx_mem = from.alloc_dma(DEPTH * BUF).map_err(|e| e.to_string())?;
    let rx_mem = to.alloc_dma(DEPTH * BUF).map_err(|e| e.to_string())?;
    exchange_in(from, to, count, len, split, &tx_mem, &rx_mem)
}

/// [`exchange`] with the frames in `tx_mem` (reached by `from`) and the receive buffers in
/// `rx_mem` (reached by `to`), [`DEPTH`] slots each.
pub(crate) fn exchange_in<N: HalNic>(
    from: &N,
    to: &N,
    count: usize,
    len: impl Fn(usize) -> usize,
    split: bool,
    tx_mem: &impl Slots,
    rx_mem: &impl Slots,
) -> Result<Exchanged, String> {
    let err = |e: ringfab_hal::Error| format!("{e}");
    let mut tx = from.open_tx::<DEPTH>(0, TxConfig::default()).map_err(err)?;
    let mut rx = to
        .open_rx::<DEPTH>(0, RxConfig::new(BUF as u32))
        .map_err(err)?;
    let (src, dst) = (mac(from), mac(to));
    let mut next_rx = 0u64;
    while rx.free() > 0 {
        post_rx(&mut rx, rx_mem, next_rx)?;
        next_rx += 1;
    }
    rx.doorbell();
    let (mut sent, mut tx_done, mut received, mut bytes) = (0usize, 0usize, 0usize, 0usize);
    let mut out_tx = [NO_TX; 32];
    let mut out_rx = [NO_RX; 32];
    let start = Instant::now();
    while received < count || tx_done < count {
        if start.elapsed() > PATIENCE {
            return Err(format!(
                "after {PATIENCE:?}: {sent} sent, {tx_done} transmit completions, {received} \
                 of {count} received"
            ));
        }
        let before = sent;
        while sent < count && sent - tx_done < WINDOW && tx.free() >= 2 {
            let f = frame(dst, src, sent as u64, len(sent));
            push_frame(
                &mut tx,
                tx_mem,
                sent % DEPTH,
                &f,
                sent as u64,
                split && sent % 3 == 0,
            )?;
            sent += 1;
        }
        if sent > before {
            tx.doorbell();
        }
        let n = tx.poll(&mut out_tx);
        for c in &out_tx[..n] {
            if c.token != Token(tx_done as u64) || c.status.is_err() {
                return Err(format!(
                    "transmit completion {c:?}, expected token {tx_done} Ok"
                ));
            }
            tx_done += 1;
        }
        let n = rx.poll(&mut out_rx);
        for c in &out_rx[..n] {
            let seq = received;
            if c.token != Token(seq as u64) {
                return Err(format!("receive completion {c:?}, expected token {seq}"));
            }
            c.status
                .map_err(|e| format!("frame {seq} received with {e:?}"))?;
            let got = rx_mem.get(seq % DEPTH, c.len as usize);
            let want = frame(dst, src, seq as u64, len(seq));
            if got != want {
                return Err(format!(
                    "frame {seq} differs: {} bytes received, {} sent; first bytes {:02x?}",
                    got.len(),
                    want.len(),
                    &got[..got.len().min(24)]
                ));
            }
            bytes += got.len();
            received += 1;
            post_rx(&mut rx, rx_mem, next_rx)?;
            next_rx += 1;
        }
        if n > 0 {
            rx.doorbell();
        }
    }
    Ok(Exchanged {
        frames: received,
        bytes,
        elapsed: start.elapsed(),
    })
}

/// Frame lengths from 60 to 1514 bytes, varied.
pub(crate) fn varied(i: usize) -> usize {
    60 + (i * 97) % 1455
}

/// 300 frames `from` → `to`, checked, with the device statistics.
pub(crate) fn frames_between<N: HalNic>(from: &N, to: &N) -> Outcome {
    let (tx0, rx0) = (from.stats(), to.stats());
    let x = exchange(from, to, 300, varied, true)?;
    let (tx1, rx1) = (from.stats(), to.stats());
    let counted = (
        tx1.tx_packets - tx0.tx_packets,
        rx1.rx_packets - rx0.rx_packets,
    );
    if counted != (300, 300) {
        return Err(format!(
            "statistics count {counted:?} frames, not 300 each way"
        ));
    }
    Ok(format!(
        "{} frames, {} bytes (60..1514, a third in two descriptors), in order and intact; \
         statistics agree",
        x.frames, x.bytes
    ))
}

/// 300 frames A → B.
pub(crate) fn frames_a_to_b(ctx: &mut Ctx) -> Outcome {
    let (a, b) = ctx.nics()?;
    frames_between(a, b)
}

/// 300 frames B → A.
pub(crate) fn frames_b_to_a(ctx: &mut Ctx) -> Outcome {
    let (a, b) = ctx.nics()?;
    frames_between(b, a)
}

/// Minimum-size and full-size frames A → B, every one checked: the rate through the driver
/// (both NICs, one thread) on QEMU's igb.
pub(crate) fn rate_a_to_b(ctx: &mut Ctx) -> Outcome {
    let (a, b) = ctx.nics()?;
    let mut parts = Vec::new();
    for (frames, len) in [(100_000, 60), (20_000, 1514)] {
        let x = exchange(a, b, frames, |_| len, false)?;
        let secs = x.elapsed.as_secs_f64();
        parts.push(format!(
            "{} × {len} B in {secs:.2} s = {:.0} frames/s ({:.0} Mb/s)",
            x.frames,
            x.frames as f64 / secs,
            x.bytes as f64 * 8.0 / secs / 1e6
        ));
    }
    Ok(format!("{}; sent, received and checked", parts.join(", ")))
}

/// RSS on B over receive queues 0–3: UDP flows from A land on the queue the redirection table
/// names for their Toeplitz hash (computed here), with that hash in the completion.
pub(crate) fn rss_four_queues(ctx: &mut Ctx) -> Outcome {
    let (a, b) = ctx.nics()?;
    rss_four_queues_on(a, b, true)
}

/// RSS on B over receive queues 0–3, on any NIC: each UDP flow from A lands on the queue the
/// redirection table names for its Toeplitz hash (computed here); `hash_reported`: the
/// completion carries that hash (else it must carry none — a virtio device reports it only with
/// `VIRTIO_NET_F_HASH_REPORT`, which the driver does not negotiate).
pub(crate) fn rss_four_queues_on<N: HalNic>(a: &N, b: &N, hash_reported: bool) -> Outcome {
    const QUEUES: usize = 4;
    const FLOWS: usize = 16;
    const PER_FLOW: usize = 3;
    let err = |e: ringfab_hal::Error| format!("{e}");
    let table: [u16; 128] = std::array::from_fn(|i| (i % QUEUES) as u16);
    b.set_rss(&RssConfig {
        key: &RSS_KEY,
        table: &table,
        hashes: RssHashes::ALL_IPV4,
    })
    .map_err(err)?;
    let result = (|| {
        let mut rxs = Vec::new();
        let mut mems = Vec::new();
        for q in 0..QUEUES {
            let mut rx = b
                .open_rx::<DEPTH>(q as u16, RxConfig::new(BUF as u32))
                .map_err(err)?;
            let mem = b.alloc_dma(DEPTH * BUF).map_err(|e| e.to_string())?;
            for t in 0..PER_FLOW * FLOWS {
                post_rx(&mut rx, &mem, t as u64)?;
            }
            rx.doorbell();
            rxs.push(rx);
            mems.push(mem);
        }
        let mut tx = a.open_tx::<DEPTH>(0, TxConfig::default()).map_err(err)?;
        let tx_mem = a.alloc_dma(DEPTH * BUF).map_err(|e| e.to_string())?;
        let flow = |i: usize| Flow {
            src: [10, 1, 0, 1],
            dst: [10, 1, 0, 2],
            sport: 1024 + 97 * (i % FLOWS) as u16,
            dport: 4791,
        };
        let total = FLOWS * PER_FLOW;
        for i in 0..total {
            let payload = (i as u32).to_le_bytes();
            let f = udp_frame(mac(b), mac(a), flow(i), &payload);
            push_frame(&mut tx, &tx_mem, i, &f, i as u64, false)?;
        }
        tx.doorbell();
        let mut per_queue = [0usize; QUEUES];
        let mut flow_queue: HashMap<Flow, usize> = HashMap::new();
        let mut got = 0;
        let mut out = [NO_RX; 32];
        let start = Instant::now();
        while got < total {
            if start.elapsed() > PATIENCE {
                return Err(format!(
                    "{got} of {total} frames arrived, per queue {per_queue:?}"
                ));
            }
            for (q, (rx, mem)) in rxs.iter_mut().zip(&mems).enumerate() {
                let n = rx.poll(&mut out);
                for c in &out[..n] {
                    c.status.map_err(|e| format!("queue {q}: {e:?}"))?;
                    let f = read(mem, (c.token.0 as usize % DEPTH) * BUF, c.len as usize);
                    let fl = Flow::of(&f).ok_or("a short frame")?;
                    let hash = toeplitz(&RSS_KEY, &fl.hash_input());
                    let want = table[(hash & 127) as usize] as usize;
                    if q != want {
                        return Err(format!(
                            "flow {fl:?} (hash {hash:#010x}) on queue {q}, the table says {want}"
                        ));
                    }
                    match c.rss {
                        Some(r)
                            if hash_reported
                                && r.hash == hash
                                && r.kind == RssHashKind::Ipv4Udp => {}
                        None if !hash_reported => {}
                        other => {
                            return Err(format!(
                                "flow {fl:?}: completion reports {other:?}, computed hash \
                                 {hash:#010x} (IPv4/UDP)"
                            ))
                        }
                    }
                    if *flow_queue.entry(fl).or_insert(q) != q {
                        return Err(format!("flow {fl:?} on two queues"));
                    }
                    per_queue[q] += 1;
                    got += 1;
                }
            }
        }
        let used = per_queue.iter().filter(|&&n| n > 0).count();
        if used < 2 {
            return Err(format!("{total} frames all on one queue: {per_queue:?}"));
        }
        let mut tx_out = [NO_TX; 64];
        let mut tx_ok = 0;
        while tx_ok < total && start.elapsed() < PATIENCE {
            let n = tx.poll(&mut tx_out);
            if let Some(bad) = tx_out[..n].iter().find(|c| c.status.is_err()) {
                return Err(format!("transmit {bad:?}"));
            }
            tx_ok += n;
        }
        let report = if hash_reported {
            "hash reported as computed"
        } else {
            "no hash reported (not negotiated)"
        };
        Ok(format!(
            "{total} frames of {FLOWS} UDP flows over queues {per_queue:?}: each on the queue \
             its Toeplitz hash selects, {report}"
        ))
    })();
    // RSS off (every frame to queue 0) for the tests after this one, whatever happened: a
    // table of zeros with hashing on would still count as RSS programmed, which the driver
    // keeps apart from queue addresses (VMDq), so `vmdq-steering` and the scalable endpoint
    // could not run.
    let zero = [0u16; 128];
    let reset = b.set_rss(&RssConfig {
        key: &RSS_KEY,
        table: &zero,
        hashes: RssHashes::default(),
    });
    let detail = result?;
    reset.map_err(|e| format!("resetting RSS: {e}"))?;
    Ok(detail)
}

/// An armed receive interrupt (MSI-X through VFIO to an eventfd) wakes a thread blocked in
/// `Wait::wait` when a frame arrives; a disarmed one does not.
pub(crate) fn msix_wakes_wait(ctx: &mut Ctx) -> Outcome {
    let (a, b) = ctx.nics()?;
    msix_wakes_wait_on(a, b)
}

/// [`msix_wakes_wait`] on any pair of NICs: B's receive queue 0 with its interrupt, frames
/// from A's last transmit queue.
pub(crate) fn msix_wakes_wait_on<N: HalNic>(a: &N, b: &N) -> Outcome
where
    N::Wait: Clone,
{
    let err = |e: ringfab_hal::Error| format!("{e}");
    let mut rx = b
        .open_rx::<DEPTH>(0, RxConfig::new(BUF as u32).with_interrupt(true))
        .map_err(err)?;
    let mem = b.alloc_dma(DEPTH * BUF).map_err(|e| e.to_string())?;
    for t in 0..8 {
        post_rx(&mut rx, &mem, t)?;
    }
    rx.doorbell();
    let wait = rx
        .interrupt()
        .ok_or("the receive queue has no interrupt vector")?
        .clone();
    let txq = a.capabilities().tx_queues.saturating_sub(1).min(2);
    let send = |seq: u64| -> Result<(), String> {
        let mut tx = a.open_tx::<DEPTH>(txq, TxConfig::default()).map_err(err)?;
        let tx_mem = a.alloc_dma(BUF).map_err(|e| e.to_string())?;
        let flow = Flow {
            src: [10, 2, 0, 1],
            dst: [10, 2, 0, 2],
            sport: 5000,
            dport: 4791,
        };
        let f = udp_frame(mac(b), mac(a), flow, &seq.to_le_bytes());
        push_frame(&mut tx, &tx_mem, 0, &f, seq, false)?;
        tx.doorbell();
        let mut out = [NO_TX; 2];
        let t = Instant::now();
        while tx.poll(&mut out) == 0 {
            if t.elapsed() > PATIENCE {
                return Err("the frame was never sent".into());
            }
        }
        Ok(())
    };
    // Armed: a thread sends after 100 ms; this one must wake on the interrupt.
    wait.drain();
    rx.set_interrupt(true);
    let (woke, latency) = std::thread::scope(|s| {
        let sender = s.spawn(|| {
            std::thread::sleep(Duration::from_millis(100));
            let t = Instant::now();
            send(1).map(|()| t)
        });
        let outcome = wait.wait(Some(Duration::from_secs(5)));
        let woke_at = Instant::now();
        let sent_at = sender
            .join()
            .map_err(|_| "the sender panicked".to_owned())??;
        Ok::<_, String>((outcome, woke_at.saturating_duration_since(sent_at)))
    })?;
    if woke != WaitOutcome::Notified {
        return Err("armed: no interrupt within 5 s of the frame".into());
    }
    let mut out = [NO_RX; 8];
    let n = rx.poll(&mut out);
    if n != 1 || out[0].status.is_err() {
        return Err(format!("armed: woke, then polled {:?}", &out[..n]));
    }
    // Disarmed: a frame arrives and nobody is woken. An interrupt raised before the disarm may
    // still be on its way (QEMU's e1000e delivers one more when its throttle timer expires, and
    // a TCG guest under load sees timers late): let it land, then drain, then send.
    rx.set_interrupt(false);
    std::thread::sleep(Duration::from_millis(50));
    wait.drain();
    send(2)?;
    let quiet = wait.wait(Some(Duration::from_millis(300)));
    let t = Instant::now();
    let mut n = 0;
    while n == 0 && t.elapsed() < PATIENCE {
        n = rx.poll(&mut out);
    }
    if quiet != WaitOutcome::TimedOut {
        return Err("disarmed: the wait was notified anyway".into());
    }
    if n != 1 {
        return Err("disarmed: the second frame did not arrive".into());
    }
    Ok(format!(
        "armed: woken {:.1} ms after the send started; disarmed: no wake-up, frame polled",
        latency.as_secs_f64() * 1e3
    ))
}

/// A receive flush on the device model, driver level: four buffers posted on B, one frame
/// from A; the filled buffer completes `Ok`, `flush` hands the three others back `Flushed`
/// exactly once, and the restarted queue receives the next frame into a new buffer. On igb
/// that is RXDCTL.ENABLE cleared and read back; on e1000e, RCTL.EN (no per-queue enable).
pub(crate) fn rx_flush_on<N: HalNic>(a: &N, b: &N) -> Outcome {
    let err = |e: ringfab_hal::Error| format!("{e}");
    let mut rx = b
        .open_rx::<DEPTH>(0, RxConfig::new(BUF as u32))
        .map_err(err)?;
    let mut tx = a.open_tx::<DEPTH>(0, TxConfig::default()).map_err(err)?;
    let rx_mem = b.alloc_dma(8 * BUF).map_err(|e| e.to_string())?;
    let tx_mem = a.alloc_dma(2 * BUF).map_err(|e| e.to_string())?;
    for t in 0..4 {
        post_rx(&mut rx, &rx_mem, t)?;
    }
    rx.doorbell();
    let (src, dst) = (mac(a), mac(b));
    let mut send = |seq: u64| -> Result<Vec<u8>, String> {
        let f = frame(dst, src, seq, 100);
        push_frame(&mut tx, &tx_mem, seq as usize % 2, &f, seq, false)?;
        tx.doorbell();
        let mut out = [NO_TX; 2];
        let start = Instant::now();
        while tx.poll(&mut out) == 0 {
            if start.elapsed() > PATIENCE {
                return Err(format!("frame {seq} never sent"));
            }
        }
        Ok(f)
    };
    let poll_some = |rx: &mut N::Rx<'_, DEPTH>, want: usize| {
        let mut got = Vec::new();
        let mut out = [NO_RX; 8];
        let start = Instant::now();
        while got.len() < want && start.elapsed() < PATIENCE {
            let n = rx.poll(&mut out);
            got.extend_from_slice(&out[..n]);
        }
        got
    };
    let first = send(1)?;
    let filled = poll_some(&mut rx, 1);
    match filled.as_slice() {
        [c] if c.token == Token(0) && c.status.is_ok() && c.len as usize == first.len() => {}
        other => return Err(format!("before the flush: {other:?}")),
    }
    rx.flush();
    let flushed = poll_some(&mut rx, 3);
    let tokens: Vec<(u64, bool)> = flushed
        .iter()
        .map(|c| (c.token.0, c.status == Err(ringfab_hal::RxError::Flushed)))
        .collect();
    if tokens != [(1, true), (2, true), (3, true)] || rx.pending() != 0 {
        return Err(format!(
            "flush gave {flushed:?}, {} still pending",
            rx.pending()
        ));
    }
    let mut more = [NO_RX; 2];
    if rx.poll(&mut more) != 0 {
        return Err(format!("a token came back twice: {:?}", more[0]));
    }
    post_rx(&mut rx, &rx_mem, 4)?;
    rx.doorbell();
    let second = send(2)?;
    match poll_some(&mut rx, 1).as_slice() {
        [c] if c.token == Token(4) && c.status.is_ok() => {
            if rx_mem.get(4, c.len as usize) != second {
                return Err("the frame after the flush differs".into());
            }
        }
        other => return Err(format!("after the flush: {other:?}")),
    }
    Ok(
        "1 buffer filled, 3 handed back Flushed exactly once, the restarted queue received the \
        next frame intact"
            .into(),
    )
}

/// [`rx_flush_on`] on the igb pair.
pub(crate) fn rx_flush(ctx: &mut Ctx) -> Outcome {
    let (a, b) = ctx.nics()?;
    rx_flush_on(a, b)
}

/// The address B's queue `q` gets in [`vmdq_steering`].
fn queue_mac(q: u16) -> MacAddr {
    MacAddr([0x52, 0x54, 0x00, 0x00, 0x01, q as u8])
}

/// Takes B's queue addresses away and its receive mode back to the default when dropped, so
/// a failed step leaves no VMDq mode behind for the tests after it.
struct VmdqGuard<'n>(&'n Nic, &'static [u16]);

impl Drop for VmdqGuard<'_> {
    fn drop(&mut self) {
        let _ = self.0.set_rx_mode(RxMode::default());
        for &q in self.1 {
            let _ = self.0.set_rx_queue_mac(q, None);
        }
    }
}

/// The queues of B that [`vmdq_steering`] opens; all but 0 get an address.
const VMDQ_QUEUES: [u16; 5] = [0, 1, 3, 6, 7];

/// `Nic::set_rx_queue_mac` (VMDq pools) on QEMU's igb, driver level — the emulator's cases
/// from `drivers/igb/tests/vmdq.rs`, sent over the wire from A: frames to each queue's
/// address land on that queue, station address and broadcast on queue 0, unknown unicast and
/// multicast nowhere; promiscuous mode sends unknown unicast to queue 0 but a queue's address
/// still only to its queue; all-multicast lets a group address reach queue 0; with every
/// address removed the device is out of VMDq mode: station and broadcast on queue 0, a former
/// queue address dropped.
pub(crate) fn vmdq_steering(ctx: &mut Ctx) -> Outcome {
    let (a, b) = ctx.nics()?;
    let err = |e: ringfab_hal::Error| format!("{e}");
    let station = mac(b);
    let stranger = MacAddr([0x52, 0x54, 0x00, 0x00, 0x00, 0x0C]);
    let group = MacAddr([0x01, 0x00, 0x5E, 0x00, 0x00, 0x42]);
    let mut queues = Vec::new();
    for &q in &VMDQ_QUEUES {
        let mut rx = b
            .open_rx::<DEPTH>(q, RxConfig::new(BUF as u32))
            .map_err(err)?;
        let mem = b
            .platform()
            .alloc_dma_region(16 * BUF)
            .map_err(|e| e.to_string())?;
        for t in 0..16 {
            post_rx(&mut rx, &mem, t)?;
        }
        rx.doorbell();
        queues.push((q, rx, mem));
    }
    let guard = VmdqGuard(b, &VMDQ_QUEUES[1..]);
    for &q in &VMDQ_QUEUES[1..] {
        b.set_rx_queue_mac(q, Some(queue_mac(q))).map_err(err)?;
    }
    let mut sender = sender(a, b, 0)?;
    let mut seq = 0;
    let mut send = |dst: MacAddr| {
        seq += 1;
        sender.send_to(dst, seq)
    };
    // What each queue received since the last call, after a moment for stragglers (QEMU
    // writes a frame to the receiving NIC before the sender's descriptor is written back, so
    // everything sent is in place already).
    let drain = |queues: &mut Vec<(u16, IgbRx<'_, VfioPlatform, DEPTH>, VfioDma)>| {
        std::thread::sleep(Duration::from_millis(20));
        let mut got: Vec<(u16, Vec<Vec<u8>>)> = Vec::new();
        for (q, rx, mem) in queues.iter_mut() {
            let mut out = [NO_RX; 16];
            let n = rx.poll(&mut out);
            let frames = out[..n]
                .iter()
                .map(|c| {
                    let slot = c.token.0 as usize % DEPTH;
                    if c.status.is_ok() {
                        mem.get(slot, c.len as usize)
                    } else {
                        format!("{:?}", c.status).into_bytes()
                    }
                })
                .collect();
            got.push((*q, frames));
        }
        got
    };
    let expect = |pairs: &[(u16, Vec<Vec<u8>>)]| -> Vec<(u16, Vec<Vec<u8>>)> {
        VMDQ_QUEUES
            .iter()
            .map(|&q| {
                let frames = pairs
                    .iter()
                    .filter(|(p, _)| *p == q)
                    .flat_map(|(_, f)| f.clone())
                    .collect();
                (q, frames)
            })
            .collect()
    };
    let check = |step: &str, got: Vec<(u16, Vec<Vec<u8>>)>, want: Vec<(u16, Vec<Vec<u8>>)>| {
        if got == want {
            return Ok(());
        }
        let count = |v: &[(u16, Vec<Vec<u8>>)]| -> Vec<(u16, usize)> {
            v.iter().map(|(q, f)| (*q, f.len())).collect()
        };
        Err(format!(
            "{step}: frames per queue {:?}, expected {:?}{}",
            count(&got),
            count(&want),
            if count(&got) == count(&want) {
                " (contents differ)"
            } else {
                ""
            }
        ))
    };

    // 1. Each queue its address, twice round; broadcast to queue 0; the others nowhere.
    let mut sent = Vec::new();
    for _ in 0..2 {
        for &q in VMDQ_QUEUES.iter().rev() {
            let dst = if q == 0 { station } else { queue_mac(q) };
            sent.push((q, vec![send(dst)?]));
        }
        sent.push((0, vec![send(MacAddr::BROADCAST)?]));
        send(stranger)?;
        send(group)?;
    }
    check("addresses", drain(&mut queues), expect(&sent))?;
    // 2. Promiscuous: unknown unicast to the default pool, queue 0; a queue's address still
    // only to its queue.
    b.set_rx_mode(RxMode::PROMISCUOUS).map_err(err)?;
    let sent = [(0, vec![send(stranger)?]), (1, vec![send(queue_mac(1))?])];
    check("promiscuous", drain(&mut queues), expect(&sent))?;
    // 3. All-multicast (not promiscuous): a group address reaches queue 0.
    let mut mode = RxMode::default();
    mode.all_multicast = true;
    b.set_rx_mode(mode).map_err(err)?;
    let sent = [(0, vec![send(group)?])];
    send(stranger)?;
    check("all-multicast", drain(&mut queues), expect(&sent))?;
    b.set_rx_mode(RxMode::default()).map_err(err)?;
    // 4. Every address removed: out of VMDq mode.
    for &q in &VMDQ_QUEUES[1..] {
        b.set_rx_queue_mac(q, None).map_err(err)?;
    }
    send(queue_mac(3))?;
    let sent = [
        (0, vec![send(station)?]),
        (0, vec![send(MacAddr::BROADCAST)?]),
    ];
    check("addresses removed", drain(&mut queues), expect(&sent))?;
    drop(guard);
    Ok(format!(
        "B's queues 1, 3, 6, 7 given addresses: {seq} frames from A, each queue got exactly \
         its address's frames in order, station address and broadcast on queue 0, unknown \
         unicast and multicast dropped; promiscuous: unknown unicast to queue 0, a queue \
         address still only to its queue; all-multicast: a group to queue 0; addresses \
         removed: station and broadcast on queue 0, a former queue address dropped"
    ))
}
