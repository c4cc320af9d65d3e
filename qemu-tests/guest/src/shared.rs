//! Shared contexts on QEMU's igb: two endpoints of A send through one shared transmit context
//! (one queue), two endpoints of B receive through one shared receive context (one queue and
//! one pool of receives); every endpoint completes on its own CQ.

use std::time::Instant;

use ringfab::av::{AvAttr, FiAddr};
use ringfab::cq::{CompletionQueue, CqAttr};
use ringfab::domain::Domain;
use ringfab::entry::{Data, DataEntry, OpContext};
use ringfab::ep::EpAttr;
use ringfab::flags::BindFlags;
use ringfab::proto::HEADER_LEN;
use ringfab::srx::SrxAttr;
use ringfab::stx::StxAttr;
use ringfab::{Capacities, Error};

use crate::ep::memory;
use crate::guest::{Ctx, Nic, Outcome};
use crate::nic::{BUF, DEPTH, PATIENCE};

/// Endpoints on each side.
const EPS: usize = 2;
/// Messages each sending endpoint sends to its peer.
const MESSAGES: usize = 300;
/// Messages in flight per endpoint at most (a frame that finds no buffer is lost).
const WINDOW: usize = 8;

type Cq = CompletionQueue<Nic, Data>;

/// Reads what `cq` has now, as (context, len, first two payload bytes); receive buffers are
/// handed to `give_back`.
fn read_now<'d>(
    dom: &'d Domain<'_, Nic, DEPTH>,
    cq: &Cq,
    mut give_back: impl FnMut(ringfab::mr::Buf<'d>),
) -> Result<Vec<(usize, usize, [u8; 2])>, String> {
    let mut got = Vec::new();
    loop {
        let mut e = [DataEntry::default(); 8];
        let mut src = [FiAddr::NOTAVAIL; 8];
        let mut bufs: [Option<ringfab::mr::Buf<'d>>; 8] = Default::default();
        match cq.read_owned(dom, &mut e, &mut src, &mut bufs) {
            Ok(n) => {
                for k in 0..n {
                    let mut head = [0u8; 2];
                    if let Some(b) = bufs[k].take() {
                        b.read(HEADER_LEN, &mut head).map_err(|e| e.to_string())?;
                        give_back(b);
                    }
                    got.push((e[k].op_context.0, e[k].len, head));
                }
            }
            Err(Error::Again) => return Ok(got),
            Err(e) => return Err(format!("read: {e}")),
        }
    }
}

/// Endpoint *i* of A sends [`MESSAGES`] tagged messages to endpoint *i* of B; A's two share
/// one transmit queue, B's two one receive queue and its receives. Each B endpoint must get
/// exactly its sender's messages, in order, on its own CQ, and each A endpoint exactly its
/// own send completions, in order.
pub(crate) fn shared_contexts(ctx: &mut Ctx) -> Outcome {
    let (nic_a, nic_b) = ctx.nics()?;
    let fail = |what: &'static str| move |err: Error| format!("{what}: {err}");
    let caps = Capacities {
        queues: 8,
        cqs: EPS,
        cq_size: 64,
        mrs: 1,
        avs: 1,
        av_entries: 4,
    };
    let da = Domain::<_, DEPTH>::with_capacities(nic_a, &caps);
    let db = Domain::<_, DEPTH>::with_capacities(nic_b, &caps);
    let attr = CqAttr {
        size: 64,
        ..CqAttr::default()
    };
    let mut cqs_a = Vec::new();
    for _ in 0..EPS {
        cqs_a.push(da.open_cq::<Data>(&attr).map_err(fail("CQ A"))?);
    }
    let mut cqs_b = Vec::new();
    for _ in 0..EPS {
        cqs_b.push(db.open_cq::<Data>(&attr).map_err(fail("CQ B"))?);
    }
    let av_a = da.open_av(&AvAttr::default()).map_err(fail("AV A"))?;
    let av_b = db.open_av(&AvAttr::default()).map_err(fail("AV B"))?;
    let stx = da.stx_context(&StxAttr::default()).map_err(fail("stx"))?;
    let srx = db.srx_context(&SrxAttr::default()).map_err(fail("srx"))?;
    let (mut eps_a, mut eps_b) = (Vec::new(), Vec::new());
    for i in 0..EPS {
        let mut a = da
            .endpoint(&EpAttr {
                rx_queue: 1 + i as u16,
                ..EpAttr::default()
            })
            .map_err(fail("endpoint A"))?;
        a.bind_cq(&da, &cqs_a[i], BindFlags::TRANSMIT | BindFlags::RECV)
            .map_err(fail("bind CQ A"))?;
        a.bind_av(&da, &av_a).map_err(fail("bind AV A"))?;
        a.bind_stx(&da, &stx).map_err(fail("bind stx"))?;
        a.enable(&da).map_err(fail("enable A"))?;
        eps_a.push(a);
        let mut b = db
            .endpoint(&EpAttr {
                tx_queue: 1 + i as u16,
                rx_queue: 5 + i as u16,
                ..EpAttr::default()
            })
            .map_err(fail("endpoint B"))?;
        b.bind_cq(&db, &cqs_b[i], BindFlags::TRANSMIT | BindFlags::RECV)
            .map_err(fail("bind CQ B"))?;
        b.bind_av(&db, &av_b).map_err(fail("bind AV B"))?;
        b.bind_srx(&db, &srx).map_err(fail("bind srx"))?;
        b.enable(&db).map_err(fail("enable B"))?;
        eps_b.push(b);
    }
    let names_b: Vec<_> = eps_b.iter().map(|e| e.name()).collect();
    let names_a: Vec<_> = eps_a.iter().map(|e| e.name()).collect();
    let mut to_b = [FiAddr::NOTAVAIL; EPS];
    let mut from_a = [FiAddr::NOTAVAIL; EPS];
    av_a.insert(&da, &names_b, &mut to_b)
        .map_err(fail("AV insert A"))?;
    av_b.insert(&db, &names_a, &mut from_a)
        .map_err(fail("AV insert B"))?;
    let mr_a = da
        .register(memory(EPS * (WINDOW + 4) * BUF)?)
        .map_err(fail("MR A"))?;
    let mr_b = db.register(memory(48 * BUF)?).map_err(fail("MR B"))?;
    for _ in 0..40 {
        let b = mr_b.alloc(&db, BUF).map_err(fail("receive buffer"))?;
        srx.recv(&db, b, OpContext(0))
            .map_err(|(e, _)| format!("srx recv: {e}"))?;
    }
    let mut pool: Vec<_> = (0..EPS * (WINDOW + 2))
        .map(|_| mr_a.alloc(&da, BUF))
        .collect::<Result<_, _>>()
        .map_err(fail("send buffer"))?;

    let (mut sent, mut sent_done, mut received) = ([0usize; EPS], [0usize; EPS], [0usize; EPS]);
    let start = Instant::now();
    while received.iter().any(|&r| r < MESSAGES) || sent_done.iter().any(|&d| d < MESSAGES) {
        if start.elapsed() > PATIENCE * 6 {
            return Err(format!(
                "stuck: sent {sent:?}, completed {sent_done:?}, received {received:?}"
            ));
        }
        for i in 0..EPS {
            while sent[i] < MESSAGES && sent[i] - received[i] < WINDOW {
                let Some(mut buf) = pool.pop() else { break };
                buf.write(HEADER_LEN, &[i as u8, sent[i] as u8])
                    .map_err(fail("write"))?;
                match eps_a[i].send(&da, buf, 2, to_b[i], OpContext(i * 1000 + sent[i])) {
                    Ok(()) => sent[i] += 1,
                    Err((Error::Again, buf)) => {
                        pool.push(buf);
                        break;
                    }
                    Err((e, _)) => return Err(format!("send: {e}")),
                }
            }
        }
        // A's CQs: each its own completions, in posting order (buffers back to the pool).
        for i in 0..EPS {
            for (c, _, _) in read_now(&da, &cqs_a[i], |b| pool.push(b))? {
                if c != i * 1000 + sent_done[i] {
                    return Err(format!(
                        "A CQ {i}: completion {c}, expected {}",
                        i * 1000 + sent_done[i]
                    ));
                }
                sent_done[i] += 1;
            }
        }
        // B's CQs: each its own sender's messages, in order (buffers back to the context).
        for i in 0..EPS {
            let mut back = Vec::new();
            for (_, len, head) in read_now(&db, &cqs_b[i], |b| back.push(b))? {
                let want = [i as u8, received[i] as u8];
                if len != 2 || head != want {
                    return Err(format!(
                        "B CQ {i}: got {head:?} ({len} bytes), expected {want:?}"
                    ));
                }
                received[i] += 1;
            }
            for b in back {
                srx.recv(&db, b, OpContext(0))
                    .map_err(|(e, _)| format!("srx recv again: {e}"))?;
            }
        }
    }
    Ok(format!(
        "{EPS} endpoints through one shared transmit queue, {EPS} through one shared receive \
         queue: {MESSAGES} messages each, every one on its own endpoint's CQ, in order"
    ))
}
