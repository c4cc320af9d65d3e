//! Scalable endpoints on QEMU's igb: four transmit contexts on A's queues 0–3 reach four named
//! receive contexts on B's queues 0–3, which QEMU's model steers by destination address in
//! VMDq mode (`Nic::set_rx_queue_mac`), one thread per context.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use ringfab::av::{AvEntry, AvSlot, EpAddr, FiAddr};
use ringfab::cq::entry::{Msg, MsgEntry, OpContext};
use ringfab::cq::{AuxEntry, CqAttr, CqFormat, CqSlot};
use ringfab::domain::Domain;
use ringfab::flags::{BindFlags, CompletionFlags};
use ringfab::hal::Nic as _;
use ringfab::mr::{Buf, MrSlot};
use ringfab::path::PathSlot;
use ringfab::proto::{context_mac, HEADER_LEN};
use ringfab::sep::{CtxAttr, SepAttr};
use ringfab::Error;

use crate::ep::memory;
use crate::guest::{Ctx, Nic, Outcome};
use crate::nic::{BUF, DEPTH, PATIENCE};

/// Contexts each way.
const CTX: u16 = 4;
/// Bits of a handle that name a receive context.
const RX_BITS: u32 = 4;
/// Messages each transmit context sends to its receive context.
const MESSAGES: usize = 2000;
/// A transmit context stays at most this far ahead of its receiver (DGRAM has no flow
/// control, and a frame that finds its queue without a buffer is lost).
const WINDOW: usize = 16;
/// Receive buffers posted on each receive context (more than the window).
const POSTED: usize = 40;

fn attr() -> CqAttr {
    CqAttr {
        size: 256,
        format: CqFormat::Msg,
        ..CqAttr::default()
    }
}

/// The core test `four_transmit_contexts_reach_four_named_receive_contexts_from_four_threads`
/// on QEMU's igb: transmit context *i* of A's scalable endpoint sends [`MESSAGES`] tagged
/// messages to receive context *i* of B's (`fi_rx_addr`); each of the eight contexts runs in
/// its own thread. Every receive context must get exactly its own sender's messages, all of
/// them, in order — which only the NIC's steering by destination address can do, since every
/// frame carries the same source. No wire pump: QEMU moves the frames.
pub(crate) fn four_contexts(ctx: &mut Ctx) -> Outcome {
    let (nic_a, nic_b) = ctx.nics()?;
    let fail = |what: &'static str| move |err: Error| format!("{what}: {err}");
    let caps = nic_b.capabilities();
    if caps.rx_mac_queues < CTX {
        return Err(format!("B steers {} queues by address", caps.rx_mac_queues));
    }
    let (pa, pb) = (
        [PathSlot::<Nic, DEPTH>::EMPTY; 8],
        [PathSlot::<Nic, DEPTH>::EMPTY; 8],
    );
    let (ca, cb) = ([CqSlot::EMPTY; 4], [CqSlot::EMPTY; 4]);
    let (ma, mb) = ([MrSlot::<Nic>::EMPTY; 1], [MrSlot::<Nic>::EMPTY; 1]);
    let (va, vb) = ([AvSlot::EMPTY; 1], [AvSlot::EMPTY; 1]);
    let (ta, tb) = ([AvEntry::EMPTY; 4], [AvEntry::EMPTY; 4]);
    let mut aux_a: Vec<Vec<AuxEntry>> = (0..CTX).map(|_| vec![AuxEntry::EMPTY; 256]).collect();
    let mut aux_b: Vec<Vec<AuxEntry>> = (0..CTX).map(|_| vec![AuxEntry::EMPTY; 256]).collect();
    let da = Domain::new(nic_a, &pa, &ca).with_mrs(&ma).with_avs(&va);
    let db = Domain::new(nic_b, &pb, &cb).with_mrs(&mb).with_avs(&vb);
    let av_a = da.open_av_rx(&ta, RX_BITS).map_err(fail("AV A"))?;
    let av_b = db.open_av(&tb).map_err(fail("AV B"))?;
    let sep_attr = SepAttr {
        tx_ctx_cnt: CTX,
        rx_ctx_cnt: CTX,
        ..SepAttr::default()
    };
    let mut sep_a = da.scalable_endpoint(&sep_attr).map_err(fail("SEP A"))?;
    let mut sep_b = db.scalable_endpoint(&sep_attr).map_err(fail("SEP B"))?;
    sep_a.bind_av(&av_a).map_err(fail("bind_av A"))?;
    sep_b.bind_av(&av_b).map_err(fail("bind_av B"))?;
    let (mut to_b, mut to_a) = ([FiAddr::NOTAVAIL], [FiAddr::NOTAVAIL]);
    av_a.insert(&[sep_b.name()], &mut to_b)
        .map_err(fail("AV insert on A"))?;
    av_b.insert(&[sep_a.name()], &mut to_a)
        .map_err(fail("AV insert on B"))?;
    let (to_b, to_a) = (to_b[0], to_a[0]);

    let mut cqs_a = Vec::new();
    for aux in &mut aux_a {
        cqs_a.push(da.open_cq::<Msg>(&attr(), aux).map_err(fail("CQ A"))?);
    }
    let mut cqs_b = Vec::new();
    for aux in &mut aux_b {
        cqs_b.push(db.open_cq::<Msg>(&attr(), aux).map_err(fail("CQ B"))?);
    }
    let (mut txs, mut rxs) = (Vec::new(), Vec::new());
    for i in 0..CTX {
        let k = usize::from(i);
        let mut tx = sep_a
            .tx_context(i, &CtxAttr::default())
            .map_err(fail("tx_context"))?;
        tx.bind_cq(&cqs_a[k], BindFlags::TRANSMIT)
            .map_err(fail("bind tx"))?;
        tx.enable().map_err(fail("enable tx"))?;
        txs.push(tx);
        let mut rx = sep_b
            .rx_context(i, &CtxAttr::default())
            .map_err(fail("rx_context"))?;
        rx.bind_cq(&cqs_b[k], BindFlags::RECV)
            .map_err(fail("bind rx"))?;
        rx.enable().map_err(fail("enable rx"))?;
        let name = EpAddr {
            mac: context_mac(caps.mac, i),
            ctx: i,
        };
        if rx.name() != name {
            return Err(format!("rx context {i} is {:?}, not {name:?}", rx.name()));
        }
        rxs.push(rx);
    }
    let mr_a = da
        .register(memory(usize::from(CTX) * 32 * BUF)?)
        .map_err(fail("MR A"))?;
    let mr_b = db
        .register(memory(usize::from(CTX) * (POSTED + 8) * BUF)?)
        .map_err(fail("MR B"))?;
    // Every receive context has its buffers posted before anything is sent.
    for (i, rx) in rxs.iter().enumerate() {
        for _ in 0..POSTED {
            let buf = mr_b.alloc(BUF).map_err(fail("a receive buffer"))?;
            rx.recv(buf, OpContext(i))
                .map_err(|(err, _)| format!("recv: {err}"))?;
        }
    }
    let mut pools: Vec<Vec<Buf<'_>>> = Vec::new();
    for _ in 0..CTX {
        let mut pool = Vec::new();
        for _ in 0..24 {
            pool.push(mr_a.alloc(BUF).map_err(fail("a send buffer"))?);
        }
        pools.push(pool);
    }

    let received: Vec<AtomicUsize> = (0..CTX).map(|_| AtomicUsize::new(0)).collect();
    let (stats_a, stats_b) = (nic_a.stats(), nic_b.stats());
    let start = Instant::now();
    let outcomes: Vec<Result<(), String>> = std::thread::scope(|s| {
        let mut handles = Vec::new();
        for (i, ((tx, cq), mut pool)) in txs.into_iter().zip(&cqs_a).zip(pools).enumerate() {
            let received = &received[i];
            let dest = to_b.rx(i as u16, RX_BITS);
            handles.push(s.spawn(move || -> Result<(), String> {
                let mut sent = 0;
                let mut e = [MsgEntry::default(); 8];
                let mut src = [FiAddr::NOTAVAIL; 8];
                let mut bufs: [Option<Buf<'_>>; 8] = Default::default();
                let mut progress = Instant::now();
                while sent < MESSAGES {
                    if progress.elapsed() > PATIENCE {
                        return Err(format!(
                            "tx {i}: stalled at {sent}, receiver at {}",
                            received.load(Ordering::Acquire)
                        ));
                    }
                    match cq.read_owned(&mut e, &mut src, &mut bufs) {
                        Ok(n) => {
                            for (k, b) in bufs[..n].iter_mut().enumerate() {
                                if e[k].flags != CompletionFlags::SEND | CompletionFlags::MSG {
                                    return Err(format!("tx {i}: {:?}", e[k]));
                                }
                                pool.extend(b.take());
                            }
                        }
                        Err(Error::Again) => {}
                        Err(err) => return Err(format!("tx {i}: CQ: {err}")),
                    }
                    if sent >= received.load(Ordering::Acquire) + WINDOW {
                        std::thread::yield_now();
                        continue;
                    }
                    let Some(mut buf) = pool.pop() else {
                        std::thread::yield_now();
                        continue;
                    };
                    let tag = ((i as u64) << 32) | sent as u64;
                    buf.write(HEADER_LEN, &tag.to_le_bytes())
                        .map_err(|err| format!("tx {i}: {err}"))?;
                    match tx.send(buf, 8, dest, OpContext(sent)) {
                        Ok(()) => {
                            sent += 1;
                            progress = Instant::now();
                        }
                        Err((Error::Again, b)) => pool.push(b),
                        Err((err, _)) => return Err(format!("tx {i}: send: {err}")),
                    }
                }
                Ok(())
            }));
        }
        for (i, (rx, cq)) in rxs.into_iter().zip(&cqs_b).enumerate() {
            let received = &received[i];
            handles.push(s.spawn(move || -> Result<(), String> {
                let mut e = [MsgEntry::default(); 8];
                let mut src = [FiAddr::NOTAVAIL; 8];
                let mut bufs: [Option<Buf<'_>>; 8] = Default::default();
                let mut expect = 0u64;
                let mut progress = Instant::now();
                while (expect as usize) < MESSAGES {
                    if progress.elapsed() > PATIENCE {
                        return Err(format!("rx {i}: stalled at {expect}"));
                    }
                    let n = match cq.read_owned(&mut e, &mut src, &mut bufs) {
                        Ok(n) => n,
                        Err(Error::Again) => {
                            std::thread::yield_now();
                            continue;
                        }
                        Err(err) => return Err(format!("rx {i}: CQ: {err}")),
                    };
                    progress = Instant::now();
                    for k in 0..n {
                        let buf = bufs[k].take().ok_or(format!("rx {i}: no buffer"))?;
                        let mut tag = [0u8; 8];
                        buf.read(HEADER_LEN, &mut tag)
                            .map_err(|err| format!("rx {i}: {err}"))?;
                        let tag = u64::from_le_bytes(tag);
                        if e[k].flags != CompletionFlags::RECV | CompletionFlags::MSG
                            || e[k].len != 8
                            || src[k] != to_a
                        {
                            return Err(format!("rx {i}: {:?} from {:?}", e[k], src[k]));
                        }
                        if tag >> 32 != i as u64 {
                            return Err(format!(
                                "rx {i}: message {} of tx {} arrived here",
                                tag & 0xffff_ffff,
                                tag >> 32
                            ));
                        }
                        if tag & 0xffff_ffff != expect {
                            return Err(format!(
                                "rx {i}: message {} where {expect} was due (lost or reordered)",
                                tag & 0xffff_ffff
                            ));
                        }
                        expect += 1;
                        received.fetch_add(1, Ordering::AcqRel);
                        rx.recv(buf, OpContext(i))
                            .map_err(|(err, _)| format!("rx {i}: recv: {err}"))?;
                    }
                }
                Ok(())
            }));
        }
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("a context's thread panicked".into()))
            })
            .collect()
    });
    let elapsed = start.elapsed();
    let errors: Vec<String> = outcomes.into_iter().filter_map(Result::err).collect();
    let (sa, sb) = (nic_a.stats(), nic_b.stats());
    let (sent, got, missed) = (
        sa.tx_packets - stats_a.tx_packets,
        sb.rx_packets - stats_b.rx_packets,
        sb.rx_missed - stats_b.rx_missed,
    );
    if !errors.is_empty() {
        return Err(format!(
            "{}; device statistics: A sent {sent}, B received {got}, missed {missed}",
            errors.join("; ")
        ));
    }
    let total = usize::from(CTX) * MESSAGES;
    for (i, r) in received.iter().enumerate() {
        if r.load(Ordering::Acquire) != MESSAGES {
            return Err(format!(
                "context {i}: {} messages",
                r.load(Ordering::Acquire)
            ));
        }
    }
    // QEMU counts no MPC for a frame whose queue has no descriptor (it raises RXO only), so
    // GPRC, which counts frames written, is what shows that nothing was lost.
    if (sent, got, missed) != (total as u64, total as u64, 0) {
        return Err(format!(
            "device statistics: A sent {sent}, B received {got}, missed {missed}; {total} expected"
        ));
    }
    Ok(format!(
        "{CTX} tx contexts on A's queues 0-3, {CTX} named rx contexts on B's queues 0-3 (station \
         address and 3 context MACs, VMDq pools), 8 threads: {MESSAGES} messages per context, \
         each on its own context, in order, none lost ({total} in {:.2} s; A's GPTC and B's \
         GPRC count {total} each)",
        elapsed.as_secs_f64()
    ))
}
