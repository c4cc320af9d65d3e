//! Core's DGRAM endpoints on QEMU's igb: registered memory mapped through the vIOMMU, address
//! vectors, ringfab's frame header on the wire, and the three ways to send.

use std::time::Instant;

use ringfab::av::{AvEntry, AvSlot, FiAddr};
use ringfab::cq::entry::{Data, DataEntry, OpContext};
use ringfab::cq::{AuxEntry, CompletionQueue, CqAttr, CqFormat, CqSlot};
use ringfab::domain::Domain;
use ringfab::ep::EpAttr;
use ringfab::flags::{BindFlags, CompletionFlags};
use ringfab::mr::{Buf, MrSlot};
use ringfab::path::PathSlot;
use ringfab::proto::HEADER_LEN;
use ringfab::Error;

use crate::guest::{Ctx, Nic, Outcome};
use crate::nic::{BUF, DEPTH, PATIENCE};

/// Memory that lives for ever, as safe registration asks (a few pages per run).
fn memory(len: usize) -> &'static mut [u8] {
    Box::leak(vec![0u8; len].into_boxed_slice())
}

type Cq<'d, 's, 'n> = CompletionQueue<'d, 's, 'n, Nic, DEPTH, Data>;
/// One completion: entry, source address, buffer.
type Got<'s> = (DataEntry, FiAddr, Option<Buf<'s>>);

/// The next completion of `cq`, waiting at most [`PATIENCE`].
fn read_one<'s>(cq: &Cq<'_, 's, '_>) -> Result<Got<'s>, String> {
    let mut e = [DataEntry::default(); 1];
    let mut src = [FiAddr::NOTAVAIL; 1];
    let mut bufs = [None];
    let start = Instant::now();
    loop {
        match cq.read_owned(&mut e, &mut src, &mut bufs) {
            Ok(1) => return Ok((e[0], src[0], bufs[0].take())),
            Err(Error::Again) if start.elapsed() < PATIENCE => std::hint::spin_loop(),
            other => return Err(format!("read_owned: {other:?}")),
        }
    }
}

/// A sends to B's endpoint with `send`, `senddata` (remote CQ data) and `inject` (payload
/// copied, no completion); B's CQ (format DATA) gives each message with its length, payload,
/// the data and flags, and the source resolved through B's address vector; A's CQ gives the
/// two sends back with their buffers and nothing for the inject.
pub(crate) fn messages(ctx: &mut Ctx) -> Outcome {
    let (nic_a, nic_b) = ctx.nics()?;
    let e = |what: &'static str| move |err: Error| format!("{what}: {err}");
    let attr = CqAttr {
        size: 64,
        format: CqFormat::Data,
        ..CqAttr::default()
    };
    let (pa, pb) = (
        [PathSlot::<Nic, DEPTH>::EMPTY; 2],
        [PathSlot::<Nic, DEPTH>::EMPTY; 2],
    );
    let (ca, cb) = ([CqSlot::EMPTY; 1], [CqSlot::EMPTY; 1]);
    let (ma, mb) = ([MrSlot::<Nic>::EMPTY; 1], [MrSlot::<Nic>::EMPTY; 1]);
    let (va, vb) = ([AvSlot::EMPTY; 1], [AvSlot::EMPTY; 1]);
    let (mut auxa, mut auxb) = ([AuxEntry::EMPTY; 64], [AuxEntry::EMPTY; 64]);
    let (mut ta, mut tb) = ([AvEntry::EMPTY; 4], [AvEntry::EMPTY; 4]);
    let da = Domain::new(nic_a, &pa, &ca).with_mrs(&ma).with_avs(&va);
    let db = Domain::new(nic_b, &pb, &cb).with_mrs(&mb).with_avs(&vb);
    let cq_a = da.open_cq::<Data>(&attr, &mut auxa).map_err(e("CQ A"))?;
    let cq_b = db.open_cq::<Data>(&attr, &mut auxb).map_err(e("CQ B"))?;
    let av_a = da.open_av(&mut ta).map_err(e("AV A"))?;
    let av_b = db.open_av(&mut tb).map_err(e("AV B"))?;
    let mut ep_a = da.endpoint(&EpAttr::default()).map_err(e("endpoint A"))?;
    let mut ep_b = db.endpoint(&EpAttr::default()).map_err(e("endpoint B"))?;
    for (ep, cq) in [(&mut ep_a, &cq_a), (&mut ep_b, &cq_b)] {
        ep.bind_cq(cq, BindFlags::TRANSMIT | BindFlags::RECV)
            .map_err(e("bind_cq"))?;
    }
    ep_a.bind_av(&av_a).map_err(e("bind_av A"))?;
    ep_b.bind_av(&av_b).map_err(e("bind_av B"))?;
    ep_a.enable().map_err(e("enable A"))?;
    ep_b.enable().map_err(e("enable B"))?;
    let (mut to_b, mut to_a) = ([FiAddr::NOTAVAIL], [FiAddr::NOTAVAIL]);
    av_a.insert(&[ep_b.name()], &mut to_b)
        .map_err(e("AV insert on A"))?;
    av_b.insert(&[ep_a.name()], &mut to_a)
        .map_err(e("AV insert on B"))?;
    let mr_a = da
        .register(memory(4 * BUF))
        .map_err(e("registering A's memory"))?;
    let mr_b = db
        .register(memory(4 * BUF))
        .map_err(e("registering B's memory"))?;
    for i in 0..3 {
        let buf = mr_b.alloc(BUF).map_err(e("a receive buffer"))?;
        ep_b.recv(buf, OpContext(10 + i))
            .map_err(|(err, _)| format!("recv: {err}"))?;
    }

    let messages: [&[u8]; 3] = [b"hello over VFIO", b"with data", b"injected"];
    let mut s = mr_a.alloc(BUF).map_err(e("a send buffer"))?;
    s.write(HEADER_LEN, messages[0]).map_err(e("filling"))?;
    ep_a.send(s, messages[0].len(), to_b[0], OpContext(20))
        .map_err(|(err, _)| format!("send: {err}"))?;
    let mut s = mr_a.alloc(BUF).map_err(e("a send buffer"))?;
    s.write(HEADER_LEN, messages[1]).map_err(e("filling"))?;
    ep_a.senddata(s, messages[1].len(), 0xfeed_f00d, to_b[0], OpContext(21))
        .map_err(|(err, _)| format!("senddata: {err}"))?;
    ep_a.inject(messages[2], to_b[0]).map_err(e("inject"))?;

    let recv = CompletionFlags::RECV | CompletionFlags::MSG;
    for (i, msg) in messages.iter().enumerate() {
        let (entry, src, buf) = read_one(&cq_b)?;
        let buf = buf.ok_or("a receive came back without its buffer")?;
        let mut got = vec![0u8; msg.len()];
        buf.read(HEADER_LEN, &mut got)
            .map_err(e("reading the payload"))?;
        let (flags, data) = if i == 1 {
            (recv | CompletionFlags::REMOTE_CQ_DATA, 0xfeed_f00d)
        } else {
            (recv, 0)
        };
        if entry.op_context != OpContext(10 + i)
            || entry.len != msg.len()
            || entry.flags != flags
            || entry.data != data
            || src != to_a[0]
            || got != *msg
        {
            return Err(format!(
                "message {i}: {entry:?} from {src:?} carrying {:?}",
                String::from_utf8_lossy(&got)
            ));
        }
    }
    for i in 0..2 {
        let (entry, _, buf) = read_one(&cq_a)?;
        if entry.op_context != OpContext(20 + i)
            || entry.flags != CompletionFlags::SEND | CompletionFlags::MSG
            || buf.is_none()
        {
            return Err(format!("send completion {i}: {entry:?}"));
        }
    }
    let mut more = [DataEntry::default(); 2];
    match cq_a.read(&mut more) {
        Err(Error::Again) => {}
        other => return Err(format!("the inject reported a completion: {other:?}")),
    }
    Ok(
        "send, senddata (remote CQ data 0xfeedf00d) and inject from A's endpoint arrived at \
        B's with payloads intact, the source resolved through B's AV; A got both sends back \
        with their buffers and nothing for the inject"
            .into(),
    )
}
