//! The IOMMU test: a transmit descriptor aimed at an IOVA that is no longer mapped.
//!
//! What QEMU 10's igb does then (hw/net/igb_core.c, `igb_process_tx_desc` →
//! `net_tx_pkt_add_raw_fragment_pci` → `pci_dma_map`): the vIOMMU finds no translation, logs a
//! DMAR fault to the guest, and the access resolves to unassigned memory, which `pci_dma_map`
//! serves from a zero-filled bounce buffer. So the map "succeeds", the frame goes out as that
//! many zero bytes, and the descriptor is written back with DD and no error bit
//! (`igb_txdesc_writeback` never reports a DMA failure). The data behind the IOVA never
//! leaves the machine. The test asserts exactly that; a real 82576 behind a real IOMMU gets a
//! failed PCIe read instead, and what it does then is the silicon's (`ringfab-emu` models a
//! stalled ring).

use std::time::{Duration, Instant};

use ringfab_hal::{
    DmaRegion, Iova, Nic as _, Queue, Report, RxBuffer, RxConfig, RxMode, RxQueue, Token, TxConfig,
    TxQueue, TxSegment,
};

use crate::frames::frame;
use crate::guest::{Ctx, Outcome};
use crate::kmsg::Kmsg;
use crate::nic::{iova_at, read, BUF, DEPTH, NO_RX, NO_TX, PATIENCE};

/// Which frame a received one is.
fn describe(f: &[u8], secret: &[u8], good: &[u8]) -> String {
    if f == secret {
        "the unmapped memory's frame".into()
    } else if f == good {
        "the good frame".into()
    } else if f.iter().all(|&x| x == 0) {
        format!("{} zero bytes", f.len())
    } else {
        format!("{} bytes {:02x?}…", f.len(), &f[..f.len().min(16)])
    }
}

/// A frame is sent from A whose descriptor points at memory that was mapped, filled with a
/// recognisable frame, and unmapped; then a good frame, then (after the fault) another. B
/// listens promiscuously, so it sees whatever reaches the wire.
pub(crate) fn unmapped_tx_is_blocked(ctx: &mut Ctx) -> Outcome {
    let (_, b) = ctx.nics()?;
    b.set_rx_mode(RxMode::PROMISCUOUS)
        .map_err(|e| format!("promiscuous mode on B: {e}"))?;
    let result = run(ctx);
    let restored = b.set_rx_mode(RxMode::default());
    let detail = result?;
    restored.map_err(|e| format!("restoring B's receive mode: {e}"))?;
    Ok(detail)
}

/// What [`probe`] saw.
pub(crate) struct Probe {
    /// The IOVA that was unmapped.
    pub(crate) gone: u64,
    /// The frames: the one behind the unmapped IOVA, the good one after it, the one after the
    /// fault.
    pub(crate) secret: Vec<u8>,
    pub(crate) good: Vec<u8>,
    pub(crate) after: Vec<u8>,
    /// Transmit completions, in order.
    pub(crate) sent: Vec<ringfab_hal::TxCompletion>,
    /// What B received.
    pub(crate) received: Received,
    /// DMAR fault lines of the kernel log meanwhile.
    pub(crate) faults: Vec<String>,
}

/// Sends from `a` (platform `pa`, transmit queue `txq`) a frame whose segment is an IOVA that
/// was mapped, filled with a recognisable frame and unmapped, then a good frame; after the
/// fault, another one. B (platform `pb`) listens on receive queue 0.
pub(crate) fn probe<N: ringfab_hal::Nic>(
    a: &N,
    b: &N,
    pa: &ringfab_vfio::VfioPlatform,
    pb: &ringfab_vfio::VfioPlatform,
    txq: u16,
) -> Result<Probe, String> {
    let err = |e: ringfab_hal::Error| format!("{e}");
    let (src, dst) = (a.capabilities().mac, b.capabilities().mac);
    let mut kmsg = Kmsg::open_at_end()?;
    let mut rx = b
        .open_rx::<DEPTH>(0, RxConfig::new(BUF as u32))
        .map_err(err)?;
    let rx_mem = pb
        .alloc_dma_region(DEPTH * BUF)
        .map_err(|e| e.to_string())?;
    for t in 0..8u64 {
        let buf = RxBuffer {
            iova: iova_at(&rx_mem, t as usize * BUF),
            len: BUF as u32,
        };
        rx.push(buf, Token(t)).map_err(|e| format!("{e}"))?;
    }
    rx.doorbell();
    let mut tx = a.open_tx::<DEPTH>(txq, TxConfig::default()).map_err(err)?;
    let tx_mem = pa.alloc_dma_region(2 * BUF).map_err(|e| e.to_string())?;

    let secret = frame(dst, src, 0x5EC7E7, 200);
    let doomed = pa.alloc_dma_region(4096).map_err(|e| e.to_string())?;
    doomed.write_bytes(0, &secret);
    let gone = doomed.iova();
    drop(doomed); // VFIO_IOMMU_UNMAP_DMA, then the memory is freed
    let good = frame(dst, src, 2, 100);
    let after = frame(dst, src, 3, 80);
    tx_mem.write_bytes(0, &good);
    tx_mem.write_bytes(BUF, &after);
    let push = |tx: &mut N::Tx<'_, DEPTH>, iova, len: usize, t| {
        let seg = [TxSegment {
            iova,
            len: len as u16,
        }];
        tx.push(&seg, Token(t), Report::Always)
            .map_err(|e| format!("push {t}: {e}"))
    };
    push(&mut tx, gone, secret.len(), 1)?;
    push(&mut tx, tx_mem.iova(), good.len(), 2)?;
    tx.doorbell();
    let (mut sent, mut received) = (Vec::new(), Vec::new());
    settle(&mut tx, &mut rx, &rx_mem, &mut sent, &mut received);
    let faults: Vec<String> = kmsg
        .new_messages()
        .into_iter()
        .filter(|m| m.contains("DMAR") && m.contains("fault addr"))
        .collect();
    // Whether the queue is wedged: the same queue sends again.
    push(&mut tx, iova_at(&tx_mem, BUF), after.len(), 3)?;
    tx.doorbell();
    settle(&mut tx, &mut rx, &rx_mem, &mut sent, &mut received);
    Ok(Probe {
        gone: gone.0,
        secret,
        good,
        after,
        sent,
        received,
        faults,
    })
}

impl Probe {
    /// Whether the unmapped memory's contents reached the wire.
    pub(crate) fn leaked(&self) -> bool {
        self.received
            .iter()
            .any(|(_, f)| f.windows(8).any(|w| w == &self.secret[14..22]))
    }

    /// The kernel's DMAR read fault for `bdf` at the unmapped IOVA, if logged.
    pub(crate) fn fault_of(&self, bdf: &str) -> Option<&String> {
        let fault = format!("fault addr {:#x}", self.gone);
        // The kernel names the requester without the PCI domain: [00:03.0].
        let requester = format!("[{}]", bdf.trim_start_matches("0000:"));
        self.faults
            .iter()
            .find(|m| m.contains("[DMA Read") && m.contains(&requester) && m.contains(&fault))
    }

    /// Everything seen, for a failure message.
    pub(crate) fn context(&self) -> String {
        let seen: Vec<String> = self
            .received
            .iter()
            .map(|(s, f)| format!("{} ({s:?})", describe(f, &self.secret, &self.good)))
            .collect();
        format!(
            "transmit {:?}; received [{}]; kernel: {:?}",
            self.sent,
            seen.join(", "),
            self.faults
        )
    }
}

fn run(ctx: &Ctx) -> Outcome {
    let (a, b) = ctx.nics()?;
    let p = probe(a, b, a.platform(), b.platform(), 3)?;
    let Probe {
        gone,
        secret,
        good,
        after,
        sent,
        received,
        faults,
    } = &p;
    let gone = Iova(*gone);
    let context = || p.context();
    if p.leaked() {
        return Err(format!(
            "the unmapped memory's contents reached the wire: {}",
            context()
        ));
    }
    let fault = format!("fault addr {:#x}", gone.0);
    let requester = format!("[{}]", ctx.bdfs[0].trim_start_matches("0000:"));
    if p.fault_of(&ctx.bdfs[0]).is_none() {
        return Err(format!(
            "no DMAR read fault of {requester} at {:#x} logged: {}",
            gone.0,
            context()
        ));
    }
    let tokens: Vec<(u64, bool)> = sent.iter().map(|c| (c.token.0, c.status.is_ok())).collect();
    if tokens != [(1, true), (2, true), (3, true)] {
        return Err(format!(
            "transmit completions are not tokens 1, 2, 3 all Ok: {}",
            context()
        ));
    }
    let zeros = vec![0u8; secret.len()];
    let frames: Vec<&[u8]> = received.iter().map(|(_, f)| f.as_slice()).collect();
    if frames != [zeros.as_slice(), good.as_slice(), after.as_slice()]
        || received.iter().any(|(s, _)| s.is_err())
    {
        return Err(format!(
            "expected on the wire: {} zero bytes, the good frame, the frame after: {}",
            secret.len(),
            context()
        ));
    }
    Ok(format!(
        "IOVA {:#x} unmapped: the kernel logged '{}'; QEMU's igb sent {} zero bytes in place \
         of the data and wrote the descriptor back without error (token 1 Ok, as \
         igb_core.c does); the frames before and after it arrived intact",
        gone.0,
        faults
            .iter()
            .find(|m| m.contains(&fault))
            .map_or("", |m| m.trim_start_matches("DMAR: ")),
        secret.len()
    ))
}

type Received = Vec<(Result<(), ringfab_hal::RxError>, Vec<u8>)>;

/// Polls both queues until nothing has happened for half a second (so that a frame which
/// should not arrive has had time to), or patience runs out.
fn settle<T: TxQueue, R: RxQueue>(
    tx: &mut T,
    rx: &mut R,
    rx_mem: &ringfab_vfio::VfioDma,
    sent: &mut Vec<ringfab_hal::TxCompletion>,
    received: &mut Received,
) {
    let mut out_tx = [NO_TX; 4];
    let mut out_rx = [NO_RX; 8];
    let start = Instant::now();
    let mut last_event = Instant::now();
    while start.elapsed() < PATIENCE && last_event.elapsed() < Duration::from_millis(500) {
        let n = tx.poll(&mut out_tx);
        if n > 0 {
            last_event = Instant::now();
        }
        sent.extend_from_slice(&out_tx[..n]);
        let n = rx.poll(&mut out_rx);
        for c in &out_rx[..n] {
            last_event = Instant::now();
            let f = read(rx_mem, c.token.0 as usize * BUF, c.len as usize);
            received.push((c.status, f));
        }
    }
}
