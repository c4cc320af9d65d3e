//! Core's DGRAM endpoints on QEMU's igb: registered memory mapped through the vIOMMU, address
//! vectors, ringfab's frame header on the wire, and the three ways to send.

use std::time::Instant;

use ringfab::av::{AddressVector, AvAttr, EpAddr, FiAddr};
use ringfab::cq::{CompletionQueue, CqAttr, CqFormat};
use ringfab::domain::Domain;
use ringfab::entry::{
    BufAddr, Context, ContextEntry, Data, DataEntry, ErrEntry, Format, Msg, MsgEntry, OpContext,
    Tagged, TaggedEntry,
};
use ringfab::ep::{Endpoint, EpAttr, EpOpt};
use ringfab::flags::{BindFlags, CompletionFlags, OpFlags};
use ringfab::hal::Nic as _;
use ringfab::mr::{Buf, MemoryRegion};
use ringfab::proto::HEADER_LEN;
use ringfab::{Capacities, Error};

use crate::guest::{Ctx, Nic, Outcome};
use crate::nic::{BUF, DEPTH, PATIENCE};

/// Memory that lives for ever (a few pages per run), **page-aligned**, which a `Vec` the region
/// would own is not, so it is registered as `&'static mut [u8]`:
/// buffers are carved from it in 2 KiB steps, so none straddles a 4 KiB page. On QEMU's igb a
/// transmit buffer that crosses into a page not physically adjacent is silently dropped (test
/// `qemu-tx-page-crossing`); with heap memory at an arbitrary offset, whether a message is
/// lost would depend on where the allocator put it.
pub(crate) fn memory(len: usize) -> Result<&'static mut [u8], String> {
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

/// One side's capacities: an endpoint's two queues, one CQ of up to 64 entries, one
/// registration, one address vector of 4 addresses.
const EP_CAPS: Capacities = Capacities {
    queues: 2,
    cqs: 1,
    cq_size: 64,
    mrs: 1,
    avs: 1,
    av_entries: 4,
};

type Dom<'n> = Domain<'n, Nic, DEPTH>;
type Cq = CompletionQueue<Nic, Data>;
/// One completion: entry, source address, buffer.
type Got<'d> = (DataEntry, FiAddr, Option<Buf<'d>>);

/// The next completion of `cq`, waiting at most [`PATIENCE`].
fn read_one<'d>(dom: &'d Dom<'_>, cq: &Cq) -> Result<Got<'d>, String> {
    let mut e = [DataEntry::default(); 1];
    let mut src = [FiAddr::NOTAVAIL; 1];
    let mut bufs = [None];
    let start = Instant::now();
    loop {
        match cq.read_owned(dom, &mut e, &mut src, &mut bufs) {
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
        ..CqAttr::default()
    };
    let da = Dom::with_capacities(nic_a, &EP_CAPS);
    let db = Dom::with_capacities(nic_b, &EP_CAPS);
    let cq_a = da.open_cq::<Data>(&attr).map_err(e("CQ A"))?;
    let cq_b = db.open_cq::<Data>(&attr).map_err(e("CQ B"))?;
    let av_a = da.open_av(&AvAttr::default()).map_err(e("AV A"))?;
    let av_b = db.open_av(&AvAttr::default()).map_err(e("AV B"))?;
    let mut ep_a = da.endpoint(&EpAttr::default()).map_err(e("endpoint A"))?;
    let mut ep_b = db.endpoint(&EpAttr::default()).map_err(e("endpoint B"))?;
    for (d, ep, cq) in [(&da, &mut ep_a, &cq_a), (&db, &mut ep_b, &cq_b)] {
        ep.bind_cq(d, cq, BindFlags::TRANSMIT | BindFlags::RECV)
            .map_err(e("bind_cq"))?;
    }
    ep_a.bind_av(&da, &av_a).map_err(e("bind_av A"))?;
    ep_b.bind_av(&db, &av_b).map_err(e("bind_av B"))?;
    ep_a.enable(&da).map_err(e("enable A"))?;
    ep_b.enable(&db).map_err(e("enable B"))?;
    let (mut to_b, mut to_a) = ([FiAddr::NOTAVAIL], [FiAddr::NOTAVAIL]);
    av_a.insert(&da, &[ep_b.name()], &mut to_b)
        .map_err(e("AV insert on A"))?;
    av_b.insert(&db, &[ep_a.name()], &mut to_a)
        .map_err(e("AV insert on B"))?;
    let mr_a = da
        .register(memory(4 * BUF)?)
        .map_err(e("registering A's memory"))?;
    let mr_b = db
        .register(memory(4 * BUF)?)
        .map_err(e("registering B's memory"))?;
    for i in 0..3 {
        let buf = mr_b.alloc(&db, BUF).map_err(e("a receive buffer"))?;
        ep_b.recv(&db, buf, OpContext(10 + i))
            .map_err(|(err, _)| format!("recv: {err}"))?;
    }

    let (stats_a, stats_b) = (nic_a.stats(), nic_b.stats());
    let messages: [&[u8]; 3] = [b"hello over VFIO", b"with data", b"injected"];
    let mut s = mr_a.alloc(&da, BUF).map_err(e("a send buffer"))?;
    s.write(HEADER_LEN, messages[0]).map_err(e("filling"))?;
    ep_a.send(&da, s, messages[0].len(), to_b[0], OpContext(20))
        .map_err(|(err, _)| format!("send: {err}"))?;
    let mut s = mr_a.alloc(&da, BUF).map_err(e("a send buffer"))?;
    s.write(HEADER_LEN, messages[1]).map_err(e("filling"))?;
    ep_a.senddata(
        &da,
        s,
        messages[1].len(),
        0xfeed_f00d,
        to_b[0],
        OpContext(21),
    )
    .map_err(|(err, _)| format!("senddata: {err}"))?;
    ep_a.inject(&da, messages[2], to_b[0])
        .map_err(e("inject"))?;

    let recv = CompletionFlags::RECV | CompletionFlags::MSG;
    let mut seen = Vec::new();
    for _ in 0..messages.len() {
        let (entry, src, buf) = match read_one(&db, &cq_b) {
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
        while let Ok((entry, _, _)) = read_one(&da, &cq_a) {
            sends.push(format!("ctx {} {:?}", entry.op_context.0, entry.flags));
        }
        let buf = mr_b.alloc(&db, BUF).map_err(e("a receive buffer"))?;
        ep_b.recv(&db, buf, OpContext(13))
            .map_err(|(err, _)| format!("recv: {err}"))?;
        let late = read_one(&db, &cq_b).map(|(entry, _, buf)| {
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
            ep_b.dropped_frames(&db),
            nic_a.stats().tx_packets - stats_a.tx_packets,
            nic_b.stats().rx_packets - stats_b.rx_packets,
        ));
    }
    for i in 0..2 {
        let (entry, _, buf) = read_one(&da, &cq_a)?;
        if entry.op_context != OpContext(20 + i)
            || entry.flags != CompletionFlags::SEND | CompletionFlags::MSG
            || buf.is_none()
        {
            return Err(format!("send completion {i}: {entry:?}"));
        }
    }
    let mut more = [DataEntry::default(); 2];
    match cq_a.read(&da, &mut more) {
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

// ------------------------------------------------------------------ the CQ/endpoint subset

/// What a test step failed at, as the one-line reason.
fn fail(what: &'static str) -> impl Fn(Error) -> String {
    move |err: Error| format!("{what}: {err}")
}

/// A CQ of 64 entries (its format is the one `open_cq` names).
fn cq_attr() -> CqAttr {
    CqAttr {
        size: 64,
        ..CqAttr::default()
    }
}

/// Inserts `addr` into `av`: its handle.
fn insert(dom: &Dom<'_>, av: &AddressVector, addr: EpAddr) -> Result<FiAddr, String> {
    let mut out = [FiAddr::NOTAVAIL];
    match av.insert(dom, &[addr], &mut out) {
        Ok(1) => Ok(out[0]),
        other => Err(format!("AV insert of {addr:?}: {other:?}")),
    }
}

/// A domain on each NIC, each holding [`EP_CAPS`].
fn domains(ctx: &Ctx) -> Result<(Dom<'_>, Dom<'_>), String> {
    let (nic_a, nic_b) = ctx.nics()?;
    Ok((
        Domain::with_capacities(nic_a, &EP_CAPS),
        Domain::with_capacities(nic_b, &EP_CAPS),
    ))
}

/// What [`endpoints`] opens on the two domains. They stay open until their domains drop.
struct Endpoints<F: Format> {
    /// A's CQ, in DATA format.
    cq_a: Cq,
    /// B's CQ, in format `F`.
    cq_b: CompletionQueue<Nic, F>,
    av_a: AddressVector,
    av_b: AddressVector,
    ep_a: Endpoint,
    ep_b: Endpoint,
    /// B's address in A's AV.
    to_b: FiAddr,
    /// A's address in B's AV.
    to_a: FiAddr,
}

/// One endpoint on each domain, A's CQ in DATA format and B's in format `F` (both bound for
/// both directions), B's endpoint opened with `attr_b`, both enabled, each side's AV holding
/// the other's address.
fn endpoints<F: Format>(
    da: &Dom<'_>,
    db: &Dom<'_>,
    attr_b: &EpAttr,
) -> Result<Endpoints<F>, String> {
    let cq_a = da.open_cq::<Data>(&cq_attr()).map_err(fail("CQ A"))?;
    let cq_b = db.open_cq::<F>(&cq_attr()).map_err(fail("CQ B"))?;
    let av_a = da.open_av(&AvAttr::default()).map_err(fail("AV A"))?;
    let av_b = db.open_av(&AvAttr::default()).map_err(fail("AV B"))?;
    let mut ep_a = da
        .endpoint(&EpAttr::default())
        .map_err(fail("endpoint A"))?;
    let mut ep_b = db.endpoint(attr_b).map_err(fail("endpoint B"))?;
    let both = BindFlags::TRANSMIT | BindFlags::RECV;
    ep_a.bind_cq(da, &cq_a, both).map_err(fail("bind_cq A"))?;
    ep_b.bind_cq(db, &cq_b, both).map_err(fail("bind_cq B"))?;
    ep_a.bind_av(da, &av_a).map_err(fail("bind_av A"))?;
    ep_b.bind_av(db, &av_b).map_err(fail("bind_av B"))?;
    ep_a.enable(da).map_err(fail("enable A"))?;
    ep_b.enable(db).map_err(fail("enable B"))?;
    let to_b = insert(da, &av_a, ep_b.name())?;
    let to_a = insert(db, &av_b, ep_a.name())?;
    Ok(Endpoints {
        cq_a,
        cq_b,
        av_a,
        av_b,
        ep_a,
        ep_b,
        to_b,
        to_a,
    })
}

/// One completion as a CQ of any format gives it.
enum Done<'d, E> {
    /// A success: the entry, its source, its buffer.
    Ok(E, FiAddr, Option<Buf<'d>>),
    /// An error entry, with the buffer `readerr_owned` hands back.
    Err(ErrEntry, Option<Buf<'d>>),
}

impl<E: std::fmt::Debug> std::fmt::Debug for Done<'_, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Done::Ok(e, src, buf) => write!(f, "ok {e:?} src {src:?} buf {}", buf.is_some()),
            Done::Err(e, buf) => write!(
                f,
                "err ctx {} errno {} prov {} len {} olen {} buf {}",
                e.op_context.0,
                e.err,
                e.prov_errno,
                e.len,
                e.olen,
                buf.is_some()
            ),
        }
    }
}

/// The next `want` completions of `cq`, successes and errors in the order the CQ gives them,
/// waiting at most [`PATIENCE`]; then checks that nothing more arrives for [`QUIET`].
fn collect<'d, F: Format>(
    dom: &'d Dom<'_>,
    cq: &mut CompletionQueue<Nic, F>,
    want: usize,
) -> Result<Vec<Done<'d, F::Entry>>, String> {
    let mut all = Vec::new();
    let start = Instant::now();
    let mut quiet_since: Option<Instant> = None;
    loop {
        let mut e = [F::Entry::default(); 1];
        let mut src = [FiAddr::NOTAVAIL; 1];
        let mut bufs = [None];
        match cq.read_owned(dom, &mut e, &mut src, &mut bufs) {
            Ok(_) => all.push(Done::Ok(e[0], src[0], bufs[0].take())),
            Err(Error::Avail) => {
                let mut entry = ErrEntry::default();
                let (_, buf) = cq
                    .readerr_owned(dom, &mut entry, None, 0)
                    .map_err(fail("readerr_owned"))?;
                all.push(Done::Err(entry, buf));
            }
            Err(Error::Again) if all.len() < want => {
                if start.elapsed() > PATIENCE {
                    return Err(format!(
                        "{} of {want} completions after {PATIENCE:?}: {all:?}",
                        all.len()
                    ));
                }
                std::hint::spin_loop();
                continue;
            }
            Err(Error::Again) => {
                let since = *quiet_since.get_or_insert_with(Instant::now);
                if since.elapsed() >= QUIET {
                    return Ok(all);
                }
                std::thread::yield_now();
                continue;
            }
            Err(other) => return Err(format!("read_owned: {other}")),
        }
        if all.len() > want {
            return Err(format!(
                "more than the {want} completions expected: {all:?}"
            ));
        }
    }
}

/// Successes as `(context, len)` and errors as `(context, errno)`, in CQ order. Every
/// error must hand its buffer back (all these tests post owned buffers); successes are
/// listed whether or not they carry one.
#[allow(clippy::type_complexity, reason = "two plain lists")]
fn split<E: Fields>(
    got: &[Done<'_, E>],
) -> Result<(Vec<(usize, usize)>, Vec<(usize, i32)>), String> {
    let (mut ok, mut err) = (Vec::new(), Vec::new());
    for d in got {
        match d {
            Done::Ok(e, _, _) => {
                let (c, m, _, _) = e.fields();
                ok.push((c.0, m.map_or(0, |m| m.1)));
            }
            Done::Err(e, Some(_)) => err.push((e.op_context.0, e.err)),
            Done::Err(e, None) => {
                return Err(format!(
                    "error entry for context {} without its buffer",
                    e.op_context.0
                ))
            }
        }
    }
    Ok((ok, err))
}

/// How long a CQ must stay empty to count as having given everything.
const QUIET: std::time::Duration = std::time::Duration::from_millis(50);

/// Waits until A's CQ gave the send completions of `contexts`, in order, each `Ok` with its
/// buffer.
fn sends_done(dom: &Dom<'_>, cq: &mut Cq, contexts: &[usize]) -> Result<(), String> {
    let got = collect(dom, cq, contexts.len())?;
    for (done, &want) in got.iter().zip(contexts) {
        match done {
            Done::Ok(e, _, Some(_))
                if e.op_context == OpContext(want)
                    && e.flags == CompletionFlags::SEND | CompletionFlags::MSG => {}
            other => return Err(format!("send {want}: {other:?}")),
        }
    }
    Ok(())
}

/// A message with `payload` from `ep` in a fresh buffer of `mr`.
fn send_bytes(
    dom: &Dom<'_>,
    ep: &Endpoint,
    mr: &MemoryRegion,
    payload: &[u8],
    dest: FiAddr,
    context: usize,
) -> Result<(), String> {
    let mut s = mr.alloc(dom, BUF).map_err(fail("a send buffer"))?;
    s.write(HEADER_LEN, payload).map_err(fail("filling"))?;
    ep.send(dom, s, payload.len(), dest, OpContext(context))
        .map_err(|(err, _)| format!("send {context}: {err}"))
}

/// The fields a CQ format carries, the missing ones `None`.
trait Fields {
    /// Context; flags and length (MSG and up); buffer and data (DATA and up); tag (TAGGED).
    #[allow(clippy::type_complexity, reason = "one tuple per format level")]
    fn fields(
        &self,
    ) -> (
        OpContext,
        Option<(CompletionFlags, usize)>,
        Option<(BufAddr, u64)>,
        Option<u64>,
    );
}

impl Fields for ContextEntry {
    fn fields(
        &self,
    ) -> (
        OpContext,
        Option<(CompletionFlags, usize)>,
        Option<(BufAddr, u64)>,
        Option<u64>,
    ) {
        (self.op_context, None, None, None)
    }
}

impl Fields for MsgEntry {
    fn fields(
        &self,
    ) -> (
        OpContext,
        Option<(CompletionFlags, usize)>,
        Option<(BufAddr, u64)>,
        Option<u64>,
    ) {
        (self.op_context, Some((self.flags, self.len)), None, None)
    }
}

impl Fields for DataEntry {
    fn fields(
        &self,
    ) -> (
        OpContext,
        Option<(CompletionFlags, usize)>,
        Option<(BufAddr, u64)>,
        Option<u64>,
    ) {
        (
            self.op_context,
            Some((self.flags, self.len)),
            Some((self.buf, self.data)),
            None,
        )
    }
}

impl Fields for TaggedEntry {
    fn fields(
        &self,
    ) -> (
        OpContext,
        Option<(CompletionFlags, usize)>,
        Option<(BufAddr, u64)>,
        Option<u64>,
    ) {
        (
            self.op_context,
            Some((self.flags, self.len)),
            Some((self.buf, self.data)),
            Some(self.tag),
        )
    }
}

/// B's endpoint on a CQ of format `F` receives a `send` and a `senddata` from A: each entry
/// carries exactly the fields of its format, right; payloads and sources are checked too.
fn formats_with<F: Format>(ctx: &mut Ctx) -> Result<&'static str, String>
where
    F::Entry: Fields,
{
    let (da, db) = domains(ctx)?;
    let Endpoints {
        mut cq_a,
        mut cq_b,
        av_a: _av_a,
        av_b: _av_b,
        ep_a,
        ep_b,
        to_b,
        to_a,
    } = endpoints::<F>(&da, &db, &EpAttr::default())?;
    let mr_a = da.register(memory(4 * BUF)?).map_err(fail("MR A"))?;
    let mr_b = db.register(memory(4 * BUF)?).map_err(fail("MR B"))?;
    for i in 0..2 {
        let buf = mr_b.alloc(&db, BUF).map_err(fail("a receive buffer"))?;
        ep_b.recv(&db, buf, OpContext(10 + i))
            .map_err(|(err, _)| format!("recv: {err}"))?;
    }
    let name = format!("{:?}", F::FORMAT);
    let data = 0xda7a_0000 + F::FORMAT.raw() as u64;
    send_bytes(&da, &ep_a, &mr_a, name.as_bytes(), to_b, 20)?;
    let mut s = mr_a.alloc(&da, BUF).map_err(fail("a send buffer"))?;
    s.write(HEADER_LEN, b"with data").map_err(fail("filling"))?;
    ep_a.senddata(&da, s, 9, data, to_b, OpContext(21))
        .map_err(|(err, _)| format!("senddata: {err}"))?;
    let got = collect(&db, &mut cq_b, 2)?;
    let recv = CompletionFlags::RECV | CompletionFlags::MSG;
    let want: [(&[u8], CompletionFlags, u64); 2] = [
        (name.as_bytes(), recv, 0),
        (b"with data", recv | CompletionFlags::REMOTE_CQ_DATA, data),
    ];
    for (i, (done, (bytes, flags, d))) in got.iter().zip(want).enumerate() {
        let Done::Ok(e, src, Some(buf)) = done else {
            return Err(format!("{name}: receive {i}: {done:?}"));
        };
        let (context, msg, dat, tag) = e.fields();
        let level = match F::FORMAT {
            CqFormat::Context => 0,
            CqFormat::Msg => 1,
            CqFormat::Data => 2,
            _ => 3,
        };
        let ok = context == OpContext(10 + i)
            && msg.is_some() == (level >= 1)
            && msg.is_none_or(|m| m == (flags, bytes.len()))
            && dat.is_some() == (level >= 2)
            && dat.is_none_or(|x| x == (BufAddr::NULL, d))
            && tag.is_some() == (level >= 3)
            && tag.is_none_or(|t| t == 0)
            && *src == to_a;
        let mut payload = vec![0; bytes.len()];
        buf.read(HEADER_LEN, &mut payload)
            .map_err(fail("reading the payload"))?;
        if !ok || payload != bytes {
            return Err(format!(
                "{name}: receive {i}: {e:?} from {src:?}, payload {:?}",
                String::from_utf8_lossy(&payload)
            ));
        }
    }
    sends_done(&da, &mut cq_a, &[20, 21])?;
    drop(got);
    if (mr_a.outstanding(&da), mr_b.outstanding(&db)) != (0, 0) {
        return Err(format!(
            "{name}: buffers not back: A {}, B {}",
            mr_a.outstanding(&da),
            mr_b.outstanding(&db)
        ));
    }
    Ok(match F::FORMAT {
        CqFormat::Context => "CONTEXT (context)",
        CqFormat::Msg => "MSG (+ flags, len)",
        CqFormat::Data => "DATA (+ buf, remote CQ data)",
        _ => "TAGGED (+ tag 0)",
    })
}

/// The four CQ formats reading an endpoint's receives from QEMU's rings.
pub(crate) fn cq_formats(ctx: &mut Ctx) -> Outcome {
    let done = [
        formats_with::<Context>(ctx)?,
        formats_with::<Msg>(ctx)?,
        formats_with::<Data>(ctx)?,
        formats_with::<Tagged>(ctx)?,
    ];
    Ok(format!(
        "a send and a senddata read by B's endpoint through a CQ of each format, every field \
         the format has checked, payloads and FI_SOURCE intact: {}",
        done.join(", ")
    ))
}

/// Sends and receives the endpoint refuses hand their buffer back and post nothing: the rings
/// stay as they were, and the handed-back buffer then goes out and arrives.
pub(crate) fn send_errors(ctx: &mut Ctx) -> Outcome {
    let (da, db) = domains(ctx)?;
    let nic_a = da.nic();
    let Endpoints {
        mut cq_a,
        mut cq_b,
        av_a: _av_a,
        av_b: _av_b,
        ep_a,
        ep_b,
        to_b,
        to_a: _,
    } = endpoints::<Data>(&da, &db, &EpAttr::default())?;
    let mr_a = da.register(memory(4 * BUF)?).map_err(fail("MR A"))?;
    let mr_b = db.register(memory(4 * BUF)?).map_err(fail("MR B"))?;
    let max = ep_a.max_msg_size(&da);
    let frame = nic_a.capabilities().max_frame_len.min(BUF);
    if max != frame - HEADER_LEN {
        return Err(format!("max_msg_size {max}, frame {frame}"));
    }
    let (tx_left, rx_left) = (
        ep_a.tx_size_left(&da).map_err(fail("tx_size_left"))?,
        ep_b.rx_size_left(&db).map_err(fail("rx_size_left"))?,
    );
    let cases: [(OpFlags, usize, FiAddr, Error); 7] = [
        (OpFlags::DELIVERY_COMPLETE, 4, to_b, Error::BadFlags),
        (OpFlags::MATCH_COMPLETE, 4, to_b, Error::BadFlags),
        (OpFlags::COMMIT_COMPLETE, 4, to_b, Error::BadFlags),
        (OpFlags::FENCE, 4, to_b, Error::BadFlags),
        (OpFlags::REMOTE_CQ_DATA, 4, to_b, Error::BadFlags),
        (OpFlags::empty(), max + 1, to_b, Error::MsgSize),
        (OpFlags::empty(), 4, FiAddr(5), Error::Inval),
    ];
    let mut buf = mr_a.alloc(&da, BUF).map_err(fail("a send buffer"))?;
    buf.write(HEADER_LEN, b"refused, then sent")
        .map_err(fail("filling"))?;
    let addr = buf.addr();
    for (flags, len, dest, want) in cases {
        match ep_a.sendmsg(&da, buf, len, dest, None, OpContext(1), flags) {
            Err((e, b)) if e == want && b.addr() == addr => buf = b,
            Err((e, _)) => return Err(format!("{flags:?} len {len}: {e}, not {want}")),
            Ok(()) => return Err(format!("{flags:?} len {len} was posted")),
        }
    }
    let small = mr_a.alloc(&da, 40).map_err(fail("a small buffer"))?;
    match ep_a.send(&da, small, 20, to_b, OpContext(1)) {
        Err((Error::Inval, _)) => {}
        other => {
            return Err(format!(
                "a buffer too short for header + payload: {other:?}"
            ))
        }
    }
    match ep_b.recv(
        &db,
        mr_b.alloc(&db, 1024).map_err(fail("alloc"))?,
        OpContext(1),
    ) {
        Err((Error::Inval, _)) => {}
        other => {
            return Err(format!(
                "a receive buffer shorter than the queue's: {other:?}"
            ))
        }
    }
    let rbuf = mr_b.alloc(&db, BUF).map_err(fail("alloc"))?;
    let rbuf = match ep_b.recvmsg(&db, rbuf, OpContext(1), OpFlags::FENCE) {
        Err((Error::BadFlags, b)) => b,
        other => {
            return Err(format!(
                "a receive with FI_FENCE: {:?}",
                other.map_err(|e| e.0)
            ))
        }
    };
    if ep_a.tx_size_left(&da) != Ok(tx_left) || ep_b.rx_size_left(&db) != Ok(rx_left) {
        return Err(format!(
            "something was posted: tx_size_left {:?} (was {tx_left}), rx_size_left {:?} (was \
             {rx_left})",
            ep_a.tx_size_left(&da),
            ep_b.rx_size_left(&db)
        ));
    }
    // The short buffer was dropped with its error; the handed-back one is still out.
    if mr_a.outstanding(&da) != 1 {
        return Err(format!(
            "{} of A's buffers out, not 1",
            mr_a.outstanding(&da)
        ));
    }
    // Nothing reached either ring: no completion on either side.
    if let Some(done) = collect(&da, &mut cq_a, 0)?.first() {
        return Err(format!("A's CQ: {done:?}"));
    }
    ep_b.recv(&db, rbuf, OpContext(30))
        .map_err(|(err, _)| format!("recv: {err}"))?;
    ep_a.send(&da, buf, 18, to_b, OpContext(31))
        .map_err(|(err, _)| format!("the handed-back buffer: {err}"))?;
    let got = collect(&db, &mut cq_b, 1)?;
    match got.as_slice() {
        [Done::Ok(e, _, Some(b))] if e.op_context == OpContext(30) && e.len == 18 => {
            let mut p = [0; 18];
            b.read(HEADER_LEN, &mut p).map_err(fail("reading"))?;
            if &p != b"refused, then sent" {
                return Err(format!("payload {:?}", String::from_utf8_lossy(&p)));
            }
        }
        other => return Err(format!("B's CQ: {other:?}")),
    }
    sends_done(&da, &mut cq_a, &[31])?;
    Ok(format!(
        "7 sends refused with their buffer handed back (FI_DELIVERY/MATCH/COMMIT_COMPLETE, \
         FI_FENCE, FI_REMOTE_CQ_DATA: FI_EBADFLAGS; {} bytes: FI_EMSGSIZE; unknown address: \
         FI_EINVAL), a too-short send buffer and receive buffer FI_EINVAL, a receive with \
         FI_FENCE FI_EBADFLAGS; nothing posted on either ring; the handed-back buffer then \
         sent and received intact",
        max + 1
    ))
}

/// `fi_cancel` of one posted receive among four on QEMU's igb: it completes with
/// `FI_ECANCELED` and its buffer; the others (reposted after the queue flush) take the next
/// three messages, in order.
pub(crate) fn cancel_recv(ctx: &mut Ctx) -> Outcome {
    let (da, db) = domains(ctx)?;
    let Endpoints {
        mut cq_a,
        mut cq_b,
        av_a: _av_a,
        av_b: _av_b,
        ep_a,
        ep_b,
        to_b,
        to_a: _,
    } = endpoints::<Data>(&da, &db, &EpAttr::default())?;
    let mr_a = da.register(memory(8 * BUF)?).map_err(fail("MR A"))?;
    let mr_b = db.register(memory(8 * BUF)?).map_err(fail("MR B"))?;
    for i in 0..4 {
        let buf = mr_b.alloc(&db, BUF).map_err(fail("a receive buffer"))?;
        ep_b.recv(&db, buf, OpContext(i))
            .map_err(|(err, _)| format!("recv: {err}"))?;
    }
    if ep_b.cancel(&db, OpContext(99)) != Ok(false) {
        return Err("cancel of an unknown context found something".into());
    }
    // What the queue holds (`size`: one fewer than the ring depth on the Intel rings) less
    // the four posted.
    let room = ep_b.info(&db).rx.size;
    if ep_b.rx_size_left(&db) != Ok(room - 4) {
        return Err(format!(
            "rx_size_left {:?} of {room}",
            ep_b.rx_size_left(&db)
        ));
    }
    if ep_b.cancel(&db, OpContext(2)) != Ok(true) {
        return Err("cancel of receive 2 found nothing".into());
    }
    for i in 0..3 {
        send_bytes(
            &da,
            &ep_a,
            &mr_a,
            &[0x40 + i as u8; 12][..10 + i],
            to_b,
            50 + i,
        )?;
    }
    let got = collect(&db, &mut cq_b, 4)?;
    let canceled = Error::Canceled.errno();
    let (ok, err) = split(&got)?;
    if ok != [(0, 10), (1, 11), (3, 12)] || err != [(2, canceled)] {
        return Err(format!("B's CQ gave {got:?}"));
    }
    sends_done(&da, &mut cq_a, &[50, 51, 52])?;
    drop(got);
    if mr_b.outstanding(&db) != 0 {
        return Err(format!(
            "{} receive buffers not back",
            mr_b.outstanding(&db)
        ));
    }
    Ok(format!(
        "receive 2 of 4 canceled: FI_ECANCELED ({canceled}) with its buffer; receives 0, 1, 3 \
         took the three messages in order; cancel of an unknown context found nothing; every \
         buffer back"
    ))
}

/// `fi_cancel` of a send still in the ring (posted with `FI_MORE`, so QEMU's igb never saw
/// it): `FI_ECANCELED`; the other two are sent, and only they arrive.
pub(crate) fn cancel_send(ctx: &mut Ctx) -> Outcome {
    let (da, db) = domains(ctx)?;
    let Endpoints {
        mut cq_a,
        mut cq_b,
        av_a: _av_a,
        av_b: _av_b,
        ep_a,
        ep_b,
        to_b,
        to_a: _,
    } = endpoints::<Data>(&da, &db, &EpAttr::default())?;
    let mr_a = da.register(memory(8 * BUF)?).map_err(fail("MR A"))?;
    let mr_b = db.register(memory(8 * BUF)?).map_err(fail("MR B"))?;
    for i in 0..4 {
        let buf = mr_b.alloc(&db, BUF).map_err(fail("a receive buffer"))?;
        ep_b.recv(&db, buf, OpContext(i))
            .map_err(|(err, _)| format!("recv: {err}"))?;
    }
    for i in 0..3 {
        let mut s = mr_a.alloc(&da, BUF).map_err(fail("a send buffer"))?;
        s.write(HEADER_LEN, &[0x70 + i as u8; 22])
            .map_err(fail("filling"))?;
        ep_a.sendmsg(&da, s, 20 + i, to_b, None, OpContext(70 + i), OpFlags::MORE)
            .map_err(|(err, _)| format!("sendmsg: {err}"))?;
    }
    if ep_a.cancel(&da, OpContext(71)) != Ok(true) {
        return Err("cancel of send 71 found nothing".into());
    }
    let canceled = Error::Canceled.errno();
    let sent = collect(&da, &mut cq_a, 3)?;
    let (ok, err) = split(&sent)?;
    if ok != [(70, 0), (72, 0)] || err != [(71, canceled)] {
        return Err(format!("A's CQ gave {sent:?}"));
    }
    drop(sent);
    let got = collect(&db, &mut cq_b, 2)?;
    let mut first = Vec::new();
    for d in &got {
        if let Done::Ok(_, _, Some(b)) = d {
            let mut p = [0; 1];
            b.read(HEADER_LEN, &mut p).map_err(fail("reading"))?;
            first.push(p[0]);
        }
    }
    let (ok, err) = split(&got)?;
    if ok != [(0, 20), (1, 22)] || !err.is_empty() || first != [0x70, 0x72] {
        return Err(format!("B's CQ gave {got:?}, payloads {first:x?}"));
    }
    drop(got);
    if mr_a.outstanding(&da) != 0 {
        return Err(format!("{} send buffers not back", mr_a.outstanding(&da)));
    }
    Ok(format!(
        "three sends with FI_MORE held in the ring, the middle one canceled: FI_ECANCELED \
         ({canceled}) with its buffer, the other two sent and completed; B received exactly \
         those two, in order"
    ))
}

/// A message longer than B's receive buffers (1 KiB, `EpAttr::rx_buf_len`). fi_cq(3),
/// *olen*: "The olen specifies the amount of data that did not fit into the available receive
/// buffer and was discarded." The receive it reached completes with `FI_ETRUNC`, `len` what the
/// endpoint accepted (1024 less the 30-byte header) and `olen` the rest; a buffer the NIC
/// spilled the frame into (QEMU's igb and e1000e split it over two descriptors; virtio-net
/// writes the rest into the driver's overflow area) goes back into the ring, so the next
/// message arrives in the receive after it and one receive stays posted (then canceled). No
/// frame counts as dropped.
pub(crate) fn oversized_message(ctx: &mut Ctx) -> Outcome {
    let attr_b = EpAttr {
        rx_buf_len: 1024,
        ..EpAttr::default()
    };
    let (da, db) = domains(ctx)?;
    let Endpoints {
        mut cq_a,
        mut cq_b,
        av_a: _av_a,
        av_b: _av_b,
        ep_a,
        ep_b,
        to_b,
        to_a: _,
    } = endpoints::<Data>(&da, &db, &attr_b)?;
    let mr_a = da.register(memory(4 * BUF)?).map_err(fail("MR A"))?;
    let mr_b = db.register(memory(4 * BUF)?).map_err(fail("MR B"))?;
    for i in 0..3 {
        let buf = mr_b.alloc(&db, 1024).map_err(fail("a receive buffer"))?;
        ep_b.recv(&db, buf, OpContext(i))
            .map_err(|(err, _)| format!("recv: {err}"))?;
    }
    let long = 1400;
    let accepted = 1024 - HEADER_LEN;
    send_bytes(&da, &ep_a, &mr_a, &vec![0x55; long], to_b, 40)?;
    send_bytes(&da, &ep_a, &mr_a, &[0x66; 100], to_b, 41)?;
    let got = collect(&db, &mut cq_b, 2)?;
    let trunc = matches!(&got[0], Done::Err(e, Some(_))
        if e.op_context == OpContext(0)
            && e.err == Error::Trunc.errno()
            && (e.len, e.olen) == (accepted, long - accepted));
    // igb/e1000e: receive 1 took the spilled piece and went back behind receive 2.
    let took = match &got[1] {
        Done::Ok(e, _, Some(_)) if e.len == 100 => e.op_context.0,
        _ => usize::MAX,
    };
    if !trunc || !(took == 1 || took == 2) {
        return Err(format!("B's CQ gave {got:?}"));
    }
    let left = 3 - took;
    if ep_b.dropped_frames(&db) != 0 {
        return Err(format!(
            "{} frames counted as dropped",
            ep_b.dropped_frames(&db)
        ));
    }
    if ep_b.cancel(&db, OpContext(left)) != Ok(true) {
        return Err(format!("receive {left} was not still posted"));
    }
    let canceled = collect(&db, &mut cq_b, 1)?;
    if !matches!(&canceled[0], Done::Err(e, Some(_))
        if e.op_context == OpContext(left) && e.err == Error::Canceled.errno())
    {
        return Err(format!("cancel gave {canceled:?}"));
    }
    sends_done(&da, &mut cq_a, &[40, 41])?;
    drop(got);
    drop(canceled);
    if mr_b.outstanding(&db) != 0 {
        return Err(format!(
            "{} receive buffers not back",
            mr_b.outstanding(&db)
        ));
    }
    Ok(format!(
        "a {long}-byte message to 1 KiB receive buffers: FI_ETRUNC on receive 0, len \
         {accepted}, olen {}; the next 100-byte message arrived in receive {took}, receive \
         {left} still posted (canceled); no frame dropped, buffers back",
        long - accepted
    ))
}

/// An endpoint made for multi-receive buffers of up to 4 messages.
const MULTI_RECV_EP: EpAttr = EpAttr {
    multi_recv_msgs: 4,
    ..EpAttr::DEFAULT
};

/// One `FI_MULTI_RECV` buffer (four 2 KiB slots, `FI_OPT_MIN_MULTI_RECV` 3 KiB) takes three
/// messages: every completion's `buf` points at its payload inside the buffer, the third
/// carries `FI_MULTI_RECV` and hands the buffer back.
pub(crate) fn multi_recv(ctx: &mut Ctx) -> Outcome {
    let (da, db) = domains(ctx)?;
    let Endpoints {
        mut cq_a,
        mut cq_b,
        av_a: _av_a,
        av_b: _av_b,
        ep_a,
        mut ep_b,
        to_b,
        to_a: _,
    } = endpoints::<Data>(&da, &db, &MULTI_RECV_EP)?;
    let mr_a = da.register(memory(8 * BUF)?).map_err(fail("MR A"))?;
    let mr_b = db.register(memory(8 * BUF)?).map_err(fail("MR B"))?;
    ep_b.setopt(EpOpt::MinMultiRecv, 3 * BUF / 2)
        .map_err(fail("MIN_MULTI_RECV"))?;
    let multi = mr_b
        .alloc(&db, 4 * BUF)
        .map_err(fail("the multi-receive buffer"))?;
    let base = multi.addr();
    ep_b.recvmsg(&db, multi, OpContext(5), OpFlags::MULTI_RECV)
        .map_err(|(err, _)| format!("recvmsg: {err}"))?;
    // Receives are counted as multi-receive buffers of 4 messages: 4 descriptors and one of
    // the queue's 8 groups each. With three descriptors and a group taken, the groups bound
    // the count (these rings hold far more than 4 × 8 descriptors).
    let room = ep_b.info(&db).rx.size;
    if room != 8 || ep_b.rx_size_left(&db) != Ok(7) {
        return Err(format!(
            "rx_size_left {:?} of {room}: not one of 8 multi-receive groups taken",
            ep_b.rx_size_left(&db)
        ));
    }
    for i in 0..3 {
        send_bytes(
            &da,
            &ep_a,
            &mr_a,
            &[0x10 + i as u8; 42][..40 + i],
            to_b,
            60 + i,
        )?;
    }
    let got = collect(&db, &mut cq_b, 3)?;
    let recv = CompletionFlags::RECV | CompletionFlags::MSG;
    let mut whole = None;
    for (i, d) in got.into_iter().enumerate() {
        let last = i == 2;
        match d {
            Done::Ok(e, _, buf)
                if e.op_context == OpContext(5)
                    && e.len == 40 + i
                    && e.buf.0 == base + i * BUF + HEADER_LEN
                    && e.flags
                        == if last {
                            recv | CompletionFlags::MULTI_RECV
                        } else {
                            recv
                        }
                    && buf.is_some() == last =>
            {
                whole = buf;
            }
            other => return Err(format!("completion {i}: {other:?}")),
        }
    }
    let whole = whole.ok_or("the buffer did not come back")?;
    if whole.addr() != base || whole.len() != 4 * BUF {
        return Err(format!(
            "the buffer came back as {:#x}+{}, posted as {base:#x}+{}",
            whole.addr(),
            whole.len(),
            4 * BUF
        ));
    }
    for i in 0..3 {
        let mut p = vec![0; 40 + i];
        whole
            .read(i * BUF + HEADER_LEN, &mut p)
            .map_err(fail("reading"))?;
        if p.iter().any(|&b| b != 0x10 + i as u8) {
            return Err(format!("message {i} is not where its completion points"));
        }
    }
    sends_done(&da, &mut cq_a, &[60, 61, 62])?;
    drop(whole);
    if mr_b.outstanding(&db) != 0 {
        return Err("the multi-receive buffer is still out".into());
    }
    Ok(format!(
        "one {} KiB FI_MULTI_RECV buffer (MIN_MULTI_RECV {} B: 3 slots posted) took 3 messages \
         from QEMU's ring; each completion's buf pointed at its payload (+{HEADER_LEN}, \
         +{}, +{}), the third carried FI_MULTI_RECV and handed the buffer back",
        4 * BUF / 1024,
        3 * BUF / 2,
        BUF + HEADER_LEN,
        2 * BUF + HEADER_LEN
    ))
}

/// `fi_cancel` of a multi-receive buffer that has taken one message: that message is
/// delivered, one `FI_ECANCELED` entry releases the rest of the buffer, with it, and the
/// plain receive posted after it takes the next message.
pub(crate) fn multi_recv_cancel(ctx: &mut Ctx) -> Outcome {
    let (da, db) = domains(ctx)?;
    let Endpoints {
        mut cq_a,
        mut cq_b,
        av_a: _av_a,
        av_b: _av_b,
        ep_a,
        ep_b,
        to_b,
        to_a: _,
    } = endpoints::<Data>(&da, &db, &MULTI_RECV_EP)?;
    let mr_a = da.register(memory(8 * BUF)?).map_err(fail("MR A"))?;
    let mr_b = db.register(memory(8 * BUF)?).map_err(fail("MR B"))?;
    let multi = mr_b
        .alloc(&db, 4 * BUF)
        .map_err(fail("the multi-receive buffer"))?;
    ep_b.recvmsg(&db, multi, OpContext(5), OpFlags::MULTI_RECV)
        .map_err(|(err, _)| format!("recvmsg: {err}"))?;
    let buf = mr_b.alloc(&db, BUF).map_err(fail("a receive buffer"))?;
    ep_b.recv(&db, buf, OpContext(6))
        .map_err(|(err, _)| format!("recv: {err}"))?;
    send_bytes(&da, &ep_a, &mr_a, &[1; 9], to_b, 1)?;
    // QEMU delivers a frame to the hub's other port while it processes the transmit
    // descriptor: once A's completion is there, B's ring holds the message.
    sends_done(&da, &mut cq_a, &[1])?;
    if ep_b.cancel(&db, OpContext(5)) != Ok(true) {
        return Err("cancel of the multi-receive buffer found nothing".into());
    }
    let got = collect(&db, &mut cq_b, 2)?;
    let canceled = Error::Canceled.errno();
    let (ok, err) = split(&got)?;
    if ok != [(5, 9)] || err != [(5, canceled)] {
        return Err(format!("B's CQ after the cancel: {got:?}"));
    }
    // The message's completion is not the buffer's last: the error entry releases it.
    if !got.iter().any(|d| matches!(d, Done::Err(_, Some(_)))) {
        return Err(format!("the buffer did not come back: {got:?}"));
    }
    drop(got);
    send_bytes(&da, &ep_a, &mr_a, &[2; 7], to_b, 2)?;
    match collect(&db, &mut cq_b, 1)?.as_slice() {
        [Done::Ok(e, _, Some(_))] if e.op_context == OpContext(6) && e.len == 7 => {}
        other => return Err(format!("the receive after it: {other:?}")),
    }
    sends_done(&da, &mut cq_a, &[2])?;
    if mr_b.outstanding(&db) != 0 {
        return Err(format!(
            "{} receive buffers not back",
            mr_b.outstanding(&db)
        ));
    }
    Ok(format!(
        "the multi-receive buffer canceled after one message: the message delivered, one \
         FI_ECANCELED ({canceled}) entry handed the buffer back; the plain receive behind it \
         took the next message"
    ))
}
