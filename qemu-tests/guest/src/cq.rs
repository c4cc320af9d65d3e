//! Core's hard completion queue on QEMU's rings: `read` and `readerr` take completions
//! straight from the igb descriptor rings that the device wrote through the IOMMU.

use std::time::Instant;

use ringfab::cq::CqAttr;
use ringfab::domain::Domain;
use ringfab::entry::{ErrEntry, Msg, MsgEntry, OpContext};
use ringfab::flags::{BindFlags, CompletionFlags, OpFlags};
use ringfab::hal::{DmaRegion, Nic as _, RxBuffer, RxConfig, TxConfig, TxSegment};
use ringfab::path::{RecvPost, SendPost};
use ringfab::{Capacities, Error};

use crate::frames::frame;
use crate::guest::{Ctx, Nic, Outcome};
use crate::nic::{iova_at, BUF, DEPTH, PATIENCE};

/// Frames sent: the last one is posted a receive shorter than it (a truncation error entry).
const LENS: [usize; 6] = [60, 114, 1514, 200, 61, 300];
/// The length the last receive accepts.
const SHORT: u32 = 100;
/// A domain of one hardware queue and one CQ of up to 16 entries.
const CAPS: Capacities = Capacities {
    queues: 1,
    cqs: 1,
    cq_size: 16,
    ..Capacities::DEFAULT
};

/// Everything the CQ gives until `want` entries (successes and errors) arrived or patience
/// ran out.
fn drain(
    dom: &Domain<'_, Nic, DEPTH>,
    cq: &mut ringfab::cq::CompletionQueue<Nic, Msg>,
    want: usize,
) -> Result<Vec<Result<MsgEntry, ErrEntry>>, String> {
    let mut all = Vec::new();
    let mut buf = [MsgEntry::default(); 8];
    let start = Instant::now();
    while all.len() < want {
        if start.elapsed() > PATIENCE {
            return Err(format!(
                "{} of {want} completions after {PATIENCE:?}",
                all.len()
            ));
        }
        match cq.read(dom, &mut buf) {
            Ok(n) => all.extend(buf[..n].iter().copied().map(Ok)),
            Err(Error::Avail) => {
                let mut e = ErrEntry::default();
                cq.readerr(dom, &mut e, None, 0)
                    .map_err(|e| format!("readerr: {e}"))?;
                all.push(Err(e));
            }
            Err(Error::Again) => std::hint::spin_loop(),
            Err(e) => return Err(format!("read: {e}")),
        }
    }
    Ok(all)
}

/// A sends six frames through core's poster on transmit queue 0, B receives them through
/// receive queue 0; each side's CQ (format MSG) reads its completions from the ring.
pub(crate) fn reads_completions_from_real_rings(ctx: &mut Ctx) -> Outcome {
    let (a, b) = ctx.nics()?;
    let err = |what: &'static str| move |e: Error| format!("{what}: {e}");
    let dom_a = Domain::<_, DEPTH>::with_capacities(a, &CAPS);
    let dom_b = Domain::<_, DEPTH>::with_capacities(b, &CAPS);
    let attr = CqAttr {
        size: 16,
        ..CqAttr::default()
    };
    let mut cq_a = dom_a.open_cq::<Msg>(&attr).map_err(err("open_cq A"))?;
    let mut cq_b = dom_b.open_cq::<Msg>(&attr).map_err(err("open_cq B"))?;
    let tx = dom_a
        .open_tx(0, TxConfig::default())
        .map_err(err("open_tx"))?;
    let rx = dom_b
        .open_rx(0, RxConfig::new(BUF as u32))
        .map_err(err("open_rx"))?;
    cq_a.bind(&dom_a, &tx, BindFlags::TRANSMIT)
        .map_err(err("bind TX"))?;
    cq_b.bind(&dom_b, &rx, BindFlags::RECV)
        .map_err(err("bind RX"))?;

    let rx_mem = b
        .platform()
        .alloc_dma_region(LENS.len() * BUF)
        .map_err(|e| e.to_string())?;
    let tx_mem = a
        .platform()
        .alloc_dma_region(LENS.len() * BUF)
        .map_err(|e| e.to_string())?;
    let last = LENS.len() - 1;
    let recvs: Vec<RecvPost> = (0..LENS.len())
        .map(|i| RecvPost {
            buf: RxBuffer {
                iova: iova_at(&rx_mem, i * BUF),
                len: BUF as u32,
            },
            len: if i == last { SHORT } else { BUF as u32 },
            context: OpContext(100 + i),
            flags: OpFlags::empty(),
        })
        .collect();
    if rx.post_recvs(&recvs) != Ok(recvs.len()) {
        return Err("posting the receives".into());
    }
    let (src, dst) = (a.capabilities().mac, b.capabilities().mac);
    let segs: Vec<[TxSegment; 1]> = LENS
        .iter()
        .enumerate()
        .map(|(i, &len)| {
            tx_mem.write_bytes(i * BUF, &frame(dst, src, i as u64, len));
            [TxSegment {
                iova: iova_at(&tx_mem, i * BUF),
                len: len as u16,
            }]
        })
        .collect();
    let sends: Vec<SendPost<'_>> = segs
        .iter()
        .enumerate()
        .map(|(i, s)| SendPost {
            segments: s,
            context: OpContext(1000 + i),
            flags: OpFlags::empty(),
        })
        .collect();
    if tx.post_sends(&sends) != Ok(sends.len()) {
        return Err("posting the sends".into());
    }

    let sent = drain(&dom_a, &mut cq_a, LENS.len())?;
    let got = drain(&dom_b, &mut cq_b, LENS.len())?;
    for (i, e) in sent.iter().enumerate() {
        match e {
            Ok(e)
                if e.op_context == OpContext(1000 + i)
                    && e.flags == CompletionFlags::SEND | CompletionFlags::MSG => {}
            other => return Err(format!("send completion {i}: {other:?}")),
        }
    }
    for (i, e) in got.iter().enumerate() {
        match e {
            Ok(e)
                if i != last
                    && e.op_context == OpContext(100 + i)
                    && e.flags == CompletionFlags::RECV | CompletionFlags::MSG
                    && e.len == LENS[i] => {}
            Err(e)
                if i == last
                    && e.op_context == OpContext(100 + i)
                    && e.err == Error::Trunc.errno()
                    && (e.len, e.olen) == (SHORT as usize, LENS[i] - SHORT as usize) => {}
            other => return Err(format!("receive completion {i}: {other:?}")),
        }
    }
    for (i, &len) in LENS.iter().enumerate().take(last) {
        let mut f = vec![0; len];
        rx_mem.read_bytes(i * BUF, &mut f);
        if f != frame(dst, src, i as u64, len) {
            return Err(format!("received frame {i} differs from what was sent"));
        }
    }
    if (cq_a.credits(&dom_a), cq_b.credits(&dom_b)) != (16, 16) {
        return Err(format!(
            "credits not all back: A {}, B {}",
            cq_a.credits(&dom_a),
            cq_b.credits(&dom_b)
        ));
    }
    cq_a.unbind(&dom_a, &tx).map_err(err("unbind TX"))?;
    cq_b.unbind(&dom_b, &rx).map_err(err("unbind RX"))?;
    Ok(format!(
        "{} sends and {} receives read from the rings in MSG format (contexts, flags, lengths, \
         data checked), the short receive as FI_ETRUNC via readerr (len {SHORT}, olen {}), \
         all credits back",
        sent.len(),
        got.len() - 1,
        LENS[last] - SHORT as usize
    ))
}

/// `cancel_all` on a receive path of QEMU's igb: the driver disables the queue (RXDCTL), the
/// filled receive completes normally, the three unfilled ones come back as `FI_ECANCELED`
/// error entries, and the restarted queue receives again.
pub(crate) fn cancel_flushes_a_real_queue(ctx: &mut Ctx) -> Outcome {
    let (a, b) = ctx.nics()?;
    let err = |what: &'static str| move |e: Error| format!("{what}: {e}");
    let dom = Domain::<_, DEPTH>::with_capacities(b, &CAPS);
    let attr = CqAttr {
        size: 16,
        ..CqAttr::default()
    };
    let mut cq = dom.open_cq::<Msg>(&attr).map_err(err("open_cq"))?;
    let rx = dom
        .open_rx(0, RxConfig::new(BUF as u32))
        .map_err(err("open_rx"))?;
    cq.bind(&dom, &rx, BindFlags::RECV).map_err(err("bind"))?;
    let mem = b
        .platform()
        .alloc_dma_region(8 * BUF)
        .map_err(|e| e.to_string())?;
    let post = |ids: std::ops::Range<usize>| {
        let posts: Vec<RecvPost> = ids
            .map(|i| RecvPost {
                buf: RxBuffer {
                    iova: iova_at(&mem, i * BUF),
                    len: BUF as u32,
                },
                len: BUF as u32,
                context: OpContext(i),
                flags: OpFlags::empty(),
            })
            .collect();
        match rx.post_recvs(&posts) {
            Ok(n) if n == posts.len() => Ok(()),
            other => Err(format!("posting receives: {other:?}")),
        }
    };
    let mut sender = crate::nic::sender(a, b, 1)?;
    post(0..4)?;
    sender.send(1)?;
    // The one frame must have landed before the cancel, or it would be canceled too.
    let first = drain(&dom, &mut cq, 1)?;
    rx.cancel_all();
    let rest = drain(&dom, &mut cq, 3)?;
    match first.as_slice() {
        [Ok(e)] if e.op_context == OpContext(0) => {}
        other => return Err(format!("the filled receive: {other:?}")),
    }
    for (i, e) in rest.iter().enumerate() {
        match e {
            Err(e)
                if e.op_context == OpContext(i + 1)
                    && e.err == Error::Canceled.errno()
                    && e.len == 0 => {}
            other => return Err(format!("receive {} after cancel: {other:?}", i + 1)),
        }
    }
    post(4..5)?;
    sender.send(2)?;
    match drain(&dom, &mut cq, 1)?.as_slice() {
        [Ok(e)] if e.op_context == OpContext(4) && e.len == sender.len => {}
        other => return Err(format!("receive after the restart: {other:?}")),
    }
    if cq.credits(&dom) != 16 {
        return Err(format!("{} credits of 16 back", cq.credits(&dom)));
    }
    cq.unbind(&dom, &rx).map_err(err("unbind"))?;
    Ok(
        "1 receive completed, 3 canceled with FI_ECANCELED from the flushed queue, the \
        restarted queue received the next frame; all credits back"
            .into(),
    )
}
