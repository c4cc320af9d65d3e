//! Core's endpoint workload on any NIC pair, as `core/tests/ep_nics.rs` runs it on the three
//! emulated NICs: eight messages each way with contents, remote CQ data and sources; a canceled
//! receive; a multi-receive buffer taking three messages. On a real device nothing drives a
//! wire, so each step reads its CQ until it has what it expects (at most [`PATIENCE`]) and then
//! stays quiet for [`QUIET`] to show nothing more arrives.

use std::time::{Duration, Instant};

use ringfab::av::{AvAttr, FiAddr};
use ringfab::cq::{CompletionQueue, CqAttr};
use ringfab::domain::Domain;
use ringfab::entry::{Data, DataEntry, ErrEntry, OpContext};
use ringfab::ep::{EpAttr, EpOpt};
use ringfab::flags::{BindFlags, OpFlags};
use ringfab::hal::Nic;
use ringfab::mr::Buf;
use ringfab::proto::HEADER_LEN;
use ringfab::{Capacities, Error};

use crate::ep::memory;
use crate::guest::Outcome;
use crate::nic::{BUF, DEPTH, PATIENCE};

/// How long a CQ must stay empty after the expected completions.
const QUIET: Duration = Duration::from_millis(50);

/// A successful completion: context, length, data, source, buffer.
type Got<'d> = (usize, usize, u64, FiAddr, Option<Buf<'d>>);
/// What a CQ gave: successes, and errors as (context, errno).
type Drained<'d> = (Vec<Got<'d>>, Vec<(usize, i32)>);

/// Reads `cq` until `want` completions (successes and errors) have come, then for [`QUIET`].
fn drain<'d, N: Nic>(
    dom: &'d Domain<'_, N, DEPTH>,
    cq: &mut CompletionQueue<N, Data>,
    want: usize,
) -> Result<Drained<'d>, String> {
    let (mut ok, mut err) = (Vec::new(), Vec::new());
    let start = Instant::now();
    let mut quiet_since: Option<Instant> = None;
    loop {
        let mut e = [DataEntry::default(); 8];
        let mut src = [FiAddr::NOTAVAIL; 8];
        let mut bufs: [Option<Buf<'d>>; 8] = Default::default();
        match cq.read_owned(dom, &mut e, &mut src, &mut bufs) {
            Ok(n) => {
                for k in 0..n {
                    ok.push((
                        e[k].op_context.0,
                        e[k].len,
                        e[k].data,
                        src[k],
                        bufs[k].take(),
                    ));
                }
            }
            Err(Error::Avail) => {
                let mut entry = ErrEntry::default();
                let (_, buf) = cq
                    .readerr_owned(dom, &mut entry, None, 0)
                    .map_err(|e| format!("readerr: {e}"))?;
                if buf.is_none() {
                    return Err(format!("error entry {entry:?} without its buffer"));
                }
                err.push((entry.op_context.0, entry.err));
            }
            Err(Error::Again) => {}
            Err(other) => return Err(format!("read: {other:?}")),
        }
        if ok.len() + err.len() >= want {
            let since = *quiet_since.get_or_insert_with(Instant::now);
            if since.elapsed() >= QUIET {
                return Ok((ok, err));
            }
        } else if start.elapsed() > PATIENCE {
            return Err(format!(
                "after {PATIENCE:?}: {} of {want} completions: {:?}, errors {err:?}",
                ok.len() + err.len(),
                ok.iter().map(|g| (g.0, g.1)).collect::<Vec<_>>()
            ));
        }
    }
}

/// The workload on two brought-up NICs of one kind wired together.
pub(crate) fn run<N: Nic>(nic_a: &N, nic_b: &N) -> Outcome {
    let e = |what: &'static str| move |err: Error| format!("{what}: {err}");
    let caps = Capacities {
        queues: 2,
        cqs: 1,
        cq_size: 256,
        mrs: 1,
        avs: 1,
        av_entries: 2,
    };
    let da = Domain::<_, DEPTH>::with_capacities(nic_a, &caps);
    let db = Domain::<_, DEPTH>::with_capacities(nic_b, &caps);
    let attr = CqAttr {
        size: 256,
        ..CqAttr::default()
    };
    let mut cq_a = da.open_cq::<Data>(&attr).map_err(e("CQ A"))?;
    let mut cq_b = db.open_cq::<Data>(&attr).map_err(e("CQ B"))?;
    let av_a = da.open_av(&AvAttr::default()).map_err(e("AV A"))?;
    let av_b = db.open_av(&AvAttr::default()).map_err(e("AV B"))?;
    let mut ep_a = da.endpoint(&EpAttr::default()).map_err(e("endpoint A"))?;
    let mut ep_b = db
        .endpoint(&EpAttr {
            multi_recv_msgs: 4,
            ..EpAttr::default()
        })
        .map_err(e("endpoint B"))?;
    for (d, ep, cq, av) in [
        (&da, &mut ep_a, &cq_a, &av_a),
        (&db, &mut ep_b, &cq_b, &av_b),
    ] {
        ep.bind_cq(d, cq, BindFlags::TRANSMIT | BindFlags::RECV)
            .map_err(e("bind_cq"))?;
        ep.bind_av(d, av).map_err(e("bind_av"))?;
        ep.enable(d).map_err(e("enable"))?;
    }
    let (mut to_b, mut to_a) = ([FiAddr::NOTAVAIL], [FiAddr::NOTAVAIL]);
    av_a.insert(&da, &[ep_b.name()], &mut to_b)
        .map_err(e("AV insert on A"))?;
    av_b.insert(&db, &[ep_a.name()], &mut to_a)
        .map_err(e("AV insert on B"))?;
    let mr_a = da.register(memory(40 * BUF)?).map_err(e("registering A"))?;
    let mr_b = db.register(memory(40 * BUF)?).map_err(e("registering B"))?;

    // 8 messages each way, with contents and remote CQ data.
    for (dir, a_to_b) in [("A → B", true), ("B → A", false)] {
        let (d_from, d_to) = if a_to_b { (&da, &db) } else { (&db, &da) };
        let (from, to, mr_from, mr_to, dest, src) = if a_to_b {
            (&ep_a, &ep_b, &mr_a, &mr_b, to_b[0], to_a[0])
        } else {
            (&ep_b, &ep_a, &mr_b, &mr_a, to_a[0], to_b[0])
        };
        for i in 0..8 {
            let buf = mr_to.alloc(d_to, BUF).map_err(e("a receive buffer"))?;
            to.recv(d_to, buf, OpContext(100 + i))
                .map_err(|(err, _)| format!("recv: {err}"))?;
        }
        for i in 0..8u64 {
            let mut buf = mr_from.alloc(d_from, BUF).map_err(e("a send buffer"))?;
            buf.write(HEADER_LEN, &[i as u8; 16])
                .map_err(e("filling"))?;
            from.senddata(
                d_from,
                buf,
                16 + i as usize,
                0xd00d + i,
                dest,
                OpContext(i as usize),
            )
            .map_err(|(err, _)| format!("senddata: {err}"))?;
        }
        let (cq_to, cq_from) = if a_to_b {
            (&mut cq_b, &mut cq_a)
        } else {
            (&mut cq_a, &mut cq_b)
        };
        let (got, err) = drain(d_to, cq_to, 8)?;
        if !err.is_empty() {
            return Err(format!("{dir}: receive errors {err:?}"));
        }
        if got.len() != 8 {
            return Err(format!("{dir}: {} receives, not 8", got.len()));
        }
        for (k, (ctx, len, data, s, buf)) in got.iter().enumerate() {
            if (*ctx, *len, *data, *s) != (100 + k, 16 + k, 0xd00d + k as u64, src) {
                return Err(format!(
                    "{dir}: receive {k} is (context {ctx}, {len} B, data {data:#x}, source \
                     {s:?}), not ({}, {}, {:#x}, {src:?})",
                    100 + k,
                    16 + k,
                    0xd00d + k
                ));
            }
            let mut b = [0u8; 16];
            buf.as_ref()
                .ok_or("a receive without its buffer")?
                .read(HEADER_LEN, &mut b)
                .map_err(e("reading"))?;
            if b != [k as u8; 16] {
                return Err(format!("{dir}: message {k} carries {b:02x?}"));
            }
        }
        let (sent, err) = drain(d_from, cq_from, 8)?;
        if !err.is_empty() || sent.iter().filter(|g| g.0 < 100).count() != 8 {
            return Err(format!(
                "{dir}: send completions {:?}, errors {err:?}",
                sent.iter().map(|g| g.0).collect::<Vec<_>>()
            ));
        }
    }

    // A canceled receive: FI_ECANCELED with its buffer; the next receive still works.
    for c in [7, 8] {
        let buf = mr_b.alloc(&db, BUF).map_err(e("a receive buffer"))?;
        ep_b.recv(&db, buf, OpContext(c))
            .map_err(|(err, _)| format!("recv: {err}"))?;
    }
    if ep_b.cancel(&db, OpContext(7)) != Ok(true) {
        return Err("cancel of receive 7 found nothing".into());
    }
    let buf = mr_a.alloc(&da, BUF).map_err(e("a send buffer"))?;
    ep_a.send(&da, buf, 5, to_b[0], OpContext(9))
        .map_err(|(err, _)| format!("send: {err}"))?;
    let (ok, err) = drain(&db, &mut cq_b, 2)?;
    let ok: Vec<(usize, usize)> = ok.iter().map(|g| (g.0, g.1)).collect();
    if err != [(7, 125)] || ok != [(8, 5)] {
        return Err(format!(
            "cancel: errors {err:?} (want [(7, ECANCELED)]), completions {ok:?} (want [(8, 5)])"
        ));
    }
    drain(&da, &mut cq_a, 1)?;

    // A multi-receive buffer of three slots takes three messages, released with the last.
    ep_b.setopt(EpOpt::MinMultiRecv, 1).map_err(e("setopt"))?;
    let buf = mr_b
        .alloc(&db, 3 * BUF)
        .map_err(e("a multi-receive buffer"))?;
    ep_b.recvmsg(&db, buf, OpContext(50), OpFlags::MULTI_RECV)
        .map_err(|(err, _)| format!("recvmsg: {err}"))?;
    for i in 0..3 {
        let buf = mr_a.alloc(&da, BUF).map_err(e("a send buffer"))?;
        ep_a.send(&da, buf, 10 + i, to_b[0], OpContext(60 + i))
            .map_err(|(err, _)| format!("send: {err}"))?;
    }
    let (got, err) = drain(&db, &mut cq_b, 3)?;
    let mut lens: Vec<usize> = got.iter().map(|g| g.1).collect();
    lens.sort_unstable();
    let released = got.iter().filter(|g| g.4.is_some()).count();
    if !err.is_empty() || lens != [10, 11, 12] || released != 1 {
        return Err(format!(
            "multi-receive: lengths {lens:?}, {released} buffers released, errors {err:?}"
        ));
    }
    drain(&da, &mut cq_a, 3)?;
    Ok(
        "8 messages each way with payload, remote CQ data and source; a canceled receive \
         FI_ECANCELED with its buffer and the next one filled; a 3-slot multi-receive buffer \
         took 3 messages and came back once"
            .into(),
    )
}
