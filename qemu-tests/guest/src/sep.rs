//! Scalable endpoints on QEMU's igb: four transmit contexts on A's queues 0–3 reach four
//! receive contexts on B's queues 0–3, one thread per context — named contexts, which QEMU's
//! model steers by destination address in VMDq mode (`Nic::set_rx_queue_mac`), or contexts fed
//! by the model's RSS over UDP encapsulation (`SepAttr::rss`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use ringfab::av::{AvAttr, EpAddr, FiAddr};
use ringfab::cq::CqAttr;
use ringfab::domain::Domain;
use ringfab::entry::{Msg, MsgEntry, OpContext};
use ringfab::flags::{BindFlags, CompletionFlags};
use ringfab::hal::Nic;
use ringfab::mr::Buf;
use ringfab::proto::{context_mac, Encap};
use ringfab::sep::{CtxAttr, SepAttr};
use ringfab::{Capacities, Error};

use crate::ep::memory;
use crate::guest::{Ctx, Outcome};
use crate::nic::{BUF, DEPTH, PATIENCE};

/// Contexts each way.
const CTX: u16 = 4;
/// Bits of a handle that name a receive context.
const RX_BITS: u32 = 4;
/// Messages each transmit context sends to its receive context.
const MESSAGES: usize = 2000;
/// A transmit context stays at most this far ahead of its receiver (DGRAM has no flow
/// control, and a frame that finds its queue without a buffer is lost). With RSS all four
/// flows may reach one context: 4 × 8 stays under [`POSTED`].
const WINDOW: usize = 8;
/// Receive buffers posted on each receive context: more than all flows' windows together plus
/// a CQ read's batch (4 × 8 + 8), so that no context ever runs out. That matters on
/// virtio-net: QEMU's software RSS holds a frame whose target queue has no buffer in the net
/// queue of the queue it *arrived* on, and retries it only when that queue is given buffers —
/// so a flow's last frames could wait for ever behind a context that receives nothing more.
const POSTED: usize = 56;

fn attr() -> CqAttr {
    CqAttr {
        size: 256,
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
    let (a, b) = ctx.nics()?;
    four_on(a, b, false)
}

/// The core test `four_flows_spread_over_four_rss_fed_receive_contexts_each_whole_and_in_order`
/// on QEMU's igb: the same eight threads, in UDP encapsulation, every transmit context sending
/// to B's one address; QEMU's RSS (Toeplitz over the IPv4 addresses and UDP ports, then the
/// redirection table ringfab programmed over the enabled contexts) picks the receive context.
/// Each flow must arrive whole and in order on one context, and the flows must spread.
pub(crate) fn four_rss_contexts(ctx: &mut Ctx) -> Outcome {
    let (a, b) = ctx.nics()?;
    four_on(a, b, true)
}

/// Four transmit contexts of `nic_a` to four receive contexts of `nic_b`: named ones, or with
/// `rss` fed by RSS (then A's scalable endpoint has a single receive context, which needs no
/// address steering: virtio-net has none).
pub(crate) fn four_on<N: Nic>(nic_a: &N, nic_b: &N, rss: bool) -> Outcome {
    let fail = |what: &'static str| move |err: Error| format!("{what}: {err}");
    let caps = nic_b.capabilities();
    if !rss && caps.rx_mac_queues < CTX {
        return Err(format!("B steers {} queues by address", caps.rx_mac_queues));
    }
    // Each side: 8 queues (4 contexts each way), 4 CQs of 256, 1 MR, 1 AV of 4 addresses.
    let capacities = Capacities {
        queues: 8,
        cqs: 4,
        cq_size: 256,
        mrs: 1,
        avs: 1,
        av_entries: 4,
    };
    let da = Domain::<_, DEPTH>::with_capacities(nic_a, &capacities);
    let db = Domain::<_, DEPTH>::with_capacities(nic_b, &capacities);
    let av_a = da
        .open_av(&AvAttr {
            count: 4,
            rx_ctx_bits: RX_BITS,
            ..AvAttr::default()
        })
        .map_err(fail("AV A"))?;
    let av_b = db
        .open_av(&AvAttr {
            count: 4,
            ..AvAttr::default()
        })
        .map_err(fail("AV B"))?;
    let sep_attr = SepAttr {
        tx_ctx_cnt: CTX,
        rx_ctx_cnt: CTX,
        encap: if rss { Encap::Udp } else { Encap::Ethernet },
        ..SepAttr::default()
    };
    let sender = SepAttr {
        rx_ctx_cnt: if rss { 1 } else { CTX },
        ..sep_attr
    };
    let mut sep_a = da.scalable_endpoint(&sender).map_err(fail("SEP A"))?;
    let mut sep_b = db
        .scalable_endpoint(&SepAttr { rss, ..sep_attr })
        .map_err(fail("SEP B"))?;
    sep_a.bind_av(&da, &av_a).map_err(fail("bind_av A"))?;
    sep_b.bind_av(&db, &av_b).map_err(fail("bind_av B"))?;
    let (mut to_b, mut to_a) = ([FiAddr::NOTAVAIL], [FiAddr::NOTAVAIL]);
    av_a.insert(&da, &[sep_b.name(&db)], &mut to_b)
        .map_err(fail("AV insert on A"))?;
    av_b.insert(&db, &[sep_a.name(&da)], &mut to_a)
        .map_err(fail("AV insert on B"))?;
    let (to_b, to_a) = (to_b[0], to_a[0]);

    let mut cqs_a = Vec::new();
    for _ in 0..CTX {
        cqs_a.push(da.open_cq::<Msg>(&attr()).map_err(fail("CQ A"))?);
    }
    let mut cqs_b = Vec::new();
    for _ in 0..CTX {
        cqs_b.push(db.open_cq::<Msg>(&attr()).map_err(fail("CQ B"))?);
    }
    let (mut txs, mut rxs) = (Vec::new(), Vec::new());
    for i in 0..CTX {
        let k = usize::from(i);
        let mut tx = sep_a
            .tx_context(&da, i, &CtxAttr::default())
            .map_err(fail("tx_context"))?;
        tx.bind_cq(&da, &cqs_a[k], BindFlags::TRANSMIT)
            .map_err(fail("bind tx"))?;
        tx.enable(&da).map_err(fail("enable tx"))?;
        txs.push(tx);
        let mut rx = sep_b
            .rx_context(&db, i, &CtxAttr::default())
            .map_err(fail("rx_context"))?;
        rx.bind_cq(&db, &cqs_b[k], BindFlags::RECV)
            .map_err(fail("bind rx"))?;
        rx.enable(&db).map_err(fail("enable rx"))?;
        let name = if rss {
            sep_b.name(&db)
        } else {
            EpAddr {
                mac: context_mac(caps.mac, i),
                ctx: i,
            }
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
            let buf = mr_b.alloc(&db, BUF).map_err(fail("a receive buffer"))?;
            rx.recv(&db, buf, OpContext(i))
                .map_err(|(err, _)| format!("recv: {err}"))?;
        }
    }
    let mut pools: Vec<Vec<Buf<'_>>> = Vec::new();
    for _ in 0..CTX {
        let mut pool = Vec::new();
        for _ in 0..24 {
            pool.push(mr_a.alloc(&da, BUF).map_err(fail("a send buffer"))?);
        }
        pools.push(pool);
    }

    let total = usize::from(CTX) * MESSAGES;
    // Per flow (transmit context): messages received. Per receive context: messages taken.
    let received: Vec<AtomicUsize> = (0..CTX).map(|_| AtomicUsize::new(0)).collect();
    let taken: Vec<AtomicUsize> = (0..CTX).map(|_| AtomicUsize::new(0)).collect();
    let all = AtomicUsize::new(0);
    // The receive context each flow reached first: it must reach no other.
    let landed: Mutex<HashMap<u64, usize>> = Mutex::new(HashMap::new());
    let (stats_a, stats_b) = (nic_a.stats(), nic_b.stats());
    let start = Instant::now();
    let outcomes: Vec<Result<(), String>> = std::thread::scope(|s| {
        let mut handles = Vec::new();
        for (i, ((tx, cq), mut pool)) in txs.iter().zip(&cqs_a).zip(pools).enumerate() {
            let (d, received) = (&da, &received[i]);
            let dest = if rss {
                to_b
            } else {
                to_b.rx(i as u16, RX_BITS)
            };
            handles.push(s.spawn(move || -> Result<(), String> {
                let (mut sent, mut completed) = (0, 0);
                let mut e = [MsgEntry::default(); 8];
                let mut src = [FiAddr::NOTAVAIL; 8];
                let mut bufs: [Option<Buf<'_>>; 8] = Default::default();
                let mut progress = Instant::now();
                // Every send completes once: the thread ends when the last one has.
                while completed < MESSAGES {
                    if progress.elapsed() > PATIENCE {
                        return Err(format!(
                            "tx {i}: stalled at {sent} sent, {completed} completed, receiver \
                             at {}",
                            received.load(Ordering::Acquire)
                        ));
                    }
                    match cq.read_owned(d, &mut e, &mut src, &mut bufs) {
                        Ok(n) => {
                            for (k, b) in bufs[..n].iter_mut().enumerate() {
                                if e[k].flags != CompletionFlags::SEND | CompletionFlags::MSG {
                                    return Err(format!("tx {i}: {:?}", e[k]));
                                }
                                pool.extend(b.take());
                            }
                            completed += n;
                        }
                        Err(Error::Again) => {}
                        Err(err) => return Err(format!("tx {i}: CQ: {err}")),
                    }
                    if sent == MESSAGES || sent >= received.load(Ordering::Acquire) + WINDOW {
                        std::thread::yield_now();
                        continue;
                    }
                    let Some(mut buf) = pool.pop() else {
                        std::thread::yield_now();
                        continue;
                    };
                    let tag = ((i as u64) << 32) | sent as u64;
                    buf.write(tx.payload_offset(), &tag.to_le_bytes())
                        .map_err(|err| format!("tx {i}: {err}"))?;
                    match tx.send(d, buf, 8, dest, OpContext(sent)) {
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
        for (i, (rx, cq)) in rxs.iter().zip(&cqs_b).enumerate() {
            let (d, received, mine, all, landed) = (&db, &received, &taken[i], &all, &landed);
            handles.push(s.spawn(move || -> Result<(), String> {
                let mut e = [MsgEntry::default(); 8];
                let mut src = [FiAddr::NOTAVAIL; 8];
                let mut bufs: [Option<Buf<'_>>; 8] = Default::default();
                let mut expect: HashMap<u64, u64> = HashMap::new();
                let mut progress = Instant::now();
                while all.load(Ordering::Acquire) < total {
                    if progress.elapsed() > PATIENCE {
                        let flows: Vec<usize> =
                            received.iter().map(|r| r.load(Ordering::Acquire)).collect();
                        return Err(format!(
                            "rx {i}: stalled at {} of {total} in all (per flow {flows:?})",
                            all.load(Ordering::Acquire)
                        ));
                    }
                    let n = match cq.read_owned(d, &mut e, &mut src, &mut bufs) {
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
                        buf.read(rx.payload_offset(), &mut tag)
                            .map_err(|err| format!("rx {i}: {err}"))?;
                        let tag = u64::from_le_bytes(tag);
                        if e[k].flags != CompletionFlags::RECV | CompletionFlags::MSG
                            || e[k].len != 8
                            || src[k] != to_a
                        {
                            return Err(format!("rx {i}: {:?} from {:?}", e[k], src[k]));
                        }
                        let (flow, seq) = (tag >> 32, tag & 0xffff_ffff);
                        let first = *landed.lock().unwrap().entry(flow).or_insert(i);
                        if (!rss && flow != i as u64) || first != i || flow >= u64::from(CTX) {
                            return Err(format!(
                                "rx {i}: message {seq} of tx {flow} arrived here (its flow \
                                 reached context {first} first)"
                            ));
                        }
                        let due = expect.entry(flow).or_insert(0);
                        if seq != *due {
                            return Err(format!(
                                "rx {i}: message {seq} of tx {flow} where {due} was due (lost \
                                 or reordered)"
                            ));
                        }
                        *due += 1;
                        received[flow as usize].fetch_add(1, Ordering::AcqRel);
                        mine.fetch_add(1, Ordering::AcqRel);
                        all.fetch_add(1, Ordering::AcqRel);
                        rx.recv(d, buf, OpContext(i))
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
    // Closing the contexts takes B's context addresses and RSS table back off the NIC (the
    // next test finds it as it was); the scalable endpoints go after their contexts.
    for tx in txs {
        tx.close(&da)
            .map_err(|(err, _)| format!("closing a tx context: {err}"))?;
    }
    for rx in rxs {
        rx.close(&db)
            .map_err(|(err, _)| format!("closing an rx context: {err}"))?;
    }
    sep_a
        .close(&da)
        .map_err(|(err, _)| format!("closing SEP A: {err}"))?;
    sep_b
        .close(&db)
        .map_err(|(err, _)| format!("closing SEP B: {err}"))?;
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
    for (i, r) in received.iter().enumerate() {
        if r.load(Ordering::Acquire) != MESSAGES {
            return Err(format!("flow {i}: {} messages", r.load(Ordering::Acquire)));
        }
    }
    let spread: Vec<usize> = taken.iter().map(|t| t.load(Ordering::Acquire)).collect();
    if rss && spread.iter().filter(|&&n| n > 0).count() < 2 {
        return Err(format!("RSS put every flow on one context: {spread:?}"));
    }
    // QEMU counts no MPC for a frame whose queue has no descriptor (it raises RXO only), so
    // GPRC, which counts frames written, is what shows that nothing was lost.
    if (sent, got, missed) != (total as u64, total as u64, 0) {
        return Err(format!(
            "device statistics: A sent {sent}, B received {got}, missed {missed}; {total} expected"
        ));
    }
    if rss {
        return Ok(format!(
            "{CTX} tx contexts on A's queues 0-3, {CTX} rx contexts on B's queues 0-3 fed by RSS \
             (UDP encapsulation, one address), 8 threads: {MESSAGES} messages per flow, each \
             flow whole and in order on one context, per context {spread:?}, none lost \
             ({total} in {:.2} s; A's GPTC and B's GPRC count {total} each)",
            elapsed.as_secs_f64()
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
