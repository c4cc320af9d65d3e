//! Core's DGRAM endpoints on QEMU's igb: registered memory mapped through the vIOMMU, address
//! vectors, ringfab's frame header on the wire, and the three ways to send.

use std::time::Instant;

use ringfab::av::{AvEntry, AvSlot, FiAddr};
use ringfab::cq::entry::{Data, DataEntry, OpContext};
use ringfab::cq::{AuxEntry, CompletionQueue, CqAttr, CqFormat, CqSlot};
use ringfab::domain::Domain;
use ringfab::ep::EpAttr;
use ringfab::flags::{BindFlags, CompletionFlags};
use ringfab::hal::Nic as _;
use ringfab::mr::{Buf, MrSlot};
use ringfab::path::PathSlot;
use ringfab::proto::HEADER_LEN;
use ringfab::Error;

use crate::guest::{Ctx, Nic, Outcome};
use crate::nic::{BUF, DEPTH, PATIENCE};

/// Memory that lives for ever, as safe registration asks (a few pages per run), **page-aligned**:
/// buffers are carved from it in 2 KiB steps, so none straddles a 4 KiB page. On QEMU's igb a
/// transmit buffer that crosses into a page not physically adjacent is silently dropped (test
/// `qemu-tx-page-crossing`); with heap memory at an arbitrary offset, whether a message is
/// lost would depend on where the allocator put it.
fn memory(len: usize) -> Result<&'static mut [u8], String> {
    let layout = std::alloc::Layout::from_size_align(len, 4096).map_err(|e| e.to_string())?;
    // SAFETY: `len` is not zero (callers ask for whole buffers).
    let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
    if ptr.is_null() {
        return Err(format!("allocating {len} bytes"));
    }
    // SAFETY: `ptr` is a fresh, zeroed allocation of `len` bytes that is never freed, so the
    // slice may live for ever; nothing else refers to it.
    Ok(unsafe { std::slice::from_raw_parts_mut(ptr, len) })
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
    let (ta, tb) = ([AvEntry::EMPTY; 4], [AvEntry::EMPTY; 4]);
    let da = Domain::new(nic_a, &pa, &ca).with_mrs(&ma).with_avs(&va);
    let db = Domain::new(nic_b, &pb, &cb).with_mrs(&mb).with_avs(&vb);
    let cq_a = da.open_cq::<Data>(&attr, &mut auxa).map_err(e("CQ A"))?;
    let cq_b = db.open_cq::<Data>(&attr, &mut auxb).map_err(e("CQ B"))?;
    let av_a = da.open_av(&ta).map_err(e("AV A"))?;
    let av_b = db.open_av(&tb).map_err(e("AV B"))?;
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
        .register(memory(4 * BUF)?)
        .map_err(e("registering A's memory"))?;
    let mr_b = db
        .register(memory(4 * BUF)?)
        .map_err(e("registering B's memory"))?;
    for i in 0..3 {
        let buf = mr_b.alloc(BUF).map_err(e("a receive buffer"))?;
        ep_b.recv(buf, OpContext(10 + i))
            .map_err(|(err, _)| format!("recv: {err}"))?;
    }

    let (stats_a, stats_b) = (nic_a.stats(), nic_b.stats());
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
    let mut seen = Vec::new();
    for _ in 0..messages.len() {
        let (entry, src, buf) = match read_one(&cq_b) {
            Ok(got) => got,
            Err(why) => {
                seen.push(why);
                break;
            }
        };
        let mut got = vec![0u8; entry.len.min(64)];
        if let Some(buf) = &buf {
            buf.read(HEADER_LEN, &mut got)
                .map_err(e("reading the payload"))?;
        }
        seen.push(format!(
            "ctx {} len {} flags {:?} data {:#x} src {:?} {:?}",
            entry.op_context.0,
            entry.len,
            entry.flags,
            entry.data,
            src,
            String::from_utf8_lossy(&got)
        ));
        let i = seen.len() - 1;
        let (flags, data) = if i == 1 {
            (recv | CompletionFlags::REMOTE_CQ_DATA, 0xfeed_f00d)
        } else {
            (recv, 0)
        };
        let ok = entry.op_context == OpContext(10 + i)
            && entry.len == messages[i].len()
            && entry.flags == flags
            && entry.data == data
            && src == to_a[0]
            && buf.is_some()
            && got == messages[i];
        if !ok {
            if let Some(l) = seen.last_mut() {
                l.push_str(" <- not as sent");
            }
        }
    }
    if seen
        .iter()
        .any(|l| !l.starts_with("ctx") || l.ends_with("<- not as sent"))
    {
        // What A's CQ says about its sends, and whether a frame turns up late once B rings
        // its doorbell again (QEMU holds frames for a NIC that could not take them until
        // that NIC writes RDT).
        let mut sends = Vec::new();
        while let Ok((entry, _, _)) = read_one(&cq_a) {
            sends.push(format!("ctx {} {:?}", entry.op_context.0, entry.flags));
        }
        let buf = mr_b.alloc(BUF).map_err(e("a receive buffer"))?;
        ep_b.recv(buf, OpContext(13))
            .map_err(|(err, _)| format!("recv: {err}"))?;
        let late = read_one(&cq_b).map(|(entry, _, buf)| {
            let mut got = vec![0u8; entry.len.min(64)];
            if let Some(buf) = &buf {
                let _ = buf.read(HEADER_LEN, &mut got);
            }
            format!(
                "ctx {} {:?}",
                entry.op_context.0,
                String::from_utf8_lossy(&got)
            )
        });
        seen.push(format!(
            "A's CQ: {sends:?}; after one more receive on B: {late:?}"
        ));
        return Err(format!(
            "B received: [{}]; B's endpoint dropped {} frames; during the test A sent {} and B \
             received {} frames (device statistics)",
            seen.join("; "),
            ep_b.dropped_frames(),
            nic_a.stats().tx_packets - stats_a.tx_packets,
            nic_b.stats().rx_packets - stats_b.rx_packets,
        ));
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
