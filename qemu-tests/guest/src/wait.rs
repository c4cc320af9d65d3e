//! Core's blocking waits on real interrupts: `sread` on an `FI_WAIT_FD` CQ sleeping on its
//! MSI-X vector's eventfd, and a wait set (`EpollWaitSet`) over two CQs.

use std::thread;
use std::time::{Duration, Instant};

use ringfab::cntr::{Clock, WaitObj};
use ringfab::cq::{CompletionQueue, CqAttr, CqControl, WaitSet};
use ringfab::domain::Domain;
use ringfab::entry::{Msg, MsgEntry, OpContext};
use ringfab::flags::{BindFlags, OpFlags};
use ringfab::hal::{MacAddr, Nic as HalNic, RawWait, RxBuffer, RxConfig, TxConfig, TxSegment};
use ringfab::path::{Path, RecvPost, SendPost};
use ringfab::{Capacities, Error};
use ringfab_vfio::{EpollWaitSet, EventFdWait};

use crate::frames::frame;
use crate::guest::{Ctx, Outcome};
use crate::nic::{iova_at, sender, Slots, BUF, DEPTH, PATIENCE};

/// Time as `std` measures it, for core's waits.
/// Time since the clock was made: the `Clock` a domain's waits (and ARP's retries) read.
pub(crate) struct StdClock(Instant);

impl StdClock {
    pub(crate) fn new() -> Self {
        StdClock(Instant::now())
    }
}

impl Clock for StdClock {
    fn now(&self) -> Duration {
        self.0.elapsed()
    }
}

type Cq<N> = CompletionQueue<N, Msg>;

fn err(what: &'static str) -> impl Fn(Error) -> String {
    move |e| format!("{what}: {e}")
}

fn msg_attr(wait_obj: WaitObj) -> CqAttr {
    CqAttr {
        size: 64,
        wait_obj,
        ..CqAttr::default()
    }
}

/// Opens receive queue 0 steered to `cq`'s vector, binds it and posts `n` receives.
fn bound_rx<'d, 'n, N: HalNic>(
    dom: &'d Domain<'n, N, DEPTH>,
    cq: &Cq<N>,
    mem: &N::Dma,
    n: usize,
) -> Result<Path<'d, 'n, N, DEPTH>, String> {
    let v = cq
        .interrupt_vector(dom)
        .ok_or("the CQ holds no MSI-X vector")?;
    let rx = dom
        .open_rx(0, RxConfig::new(BUF as u32).with_vector(v))
        .map_err(err("open_rx"))?;
    cq.bind(dom, &rx, BindFlags::RECV).map_err(err("bind RX"))?;
    let posts: Vec<RecvPost> = (0..n)
        .map(|i| RecvPost {
            buf: RxBuffer {
                iova: iova_at(mem, i * BUF),
                len: BUF as u32,
            },
            len: BUF as u32,
            context: OpContext(i),
            flags: OpFlags::empty(),
        })
        .collect();
    match rx.post_recvs(&posts) {
        Ok(k) if k == n => Ok(rx),
        other => Err(format!("posting receives: {other:?}")),
    }
}

/// Waits until `cq` has a sleeper, then a little longer for it to reach the block.
fn until_blocked<N: HalNic>(dom: &Domain<'_, N, DEPTH>, cq: &Cq<N>) -> Result<(), String> {
    let start = Instant::now();
    while cq.sleepers(dom) == 0 {
        if start.elapsed() > PATIENCE {
            return Err("the reader never blocked".into());
        }
        thread::yield_now();
    }
    thread::sleep(Duration::from_millis(50));
    Ok(())
}

/// An `FI_WAIT_FD` CQ on B: `control(GetWait)` hands out an eventfd; `sread` with nothing to
/// read times out with `Again`, never early; a reader blocked in `sread` sleeps until A's
/// frame arrives and B's MSI-X vector fires, then returns it.
pub(crate) fn sread_wakes_on_msix(ctx: &mut Ctx) -> Outcome {
    let (a, b) = ctx.nics()?;
    sread_wakes_on_msix_on(a, b)
}

/// [`sread_wakes_on_msix`] on any NIC pair.
pub(crate) fn sread_wakes_on_msix_on<N: HalNic<Wait = EventFdWait>>(a: &N, b: &N) -> Outcome {
    let caps = Capacities {
        queues: 1,
        cqs: 1,
        cq_size: 64,
        ..Capacities::DEFAULT
    };
    let dom = Domain::<_, DEPTH>::with_capacities(b, &caps);
    let mut cq = dom
        .open_cq::<Msg>(&msg_attr(WaitObj::Fd))
        .map_err(err("open_cq FD"))?;
    let fd = match cq.control(CqControl::GetWait).map_err(err("GetWait"))? {
        RawWait::Fd(fd) => fd,
        other => return Err(format!("GetWait gave {other:?}, not a file descriptor")),
    };
    let kind =
        std::fs::read_link(format!("/proc/self/fd/{fd}")).map_err(|e| format!("fd {fd}: {e}"))?;
    if !kind.to_string_lossy().contains("eventfd") {
        return Err(format!("GetWait gave fd {fd}, which is {}", kind.display()));
    }
    let v = cq
        .interrupt_vector(&dom)
        .ok_or("the FD CQ holds no vector")?;
    let mem = b.alloc_dma(4 * BUF).map_err(|e| e.to_string())?;
    let rx = bound_rx(&dom, &cq, &mem, 4)?;
    let clock = StdClock(Instant::now());
    let mut out = [MsgEntry::default(); 4];

    let t = Duration::from_millis(200);
    let start = Instant::now();
    match cq.sread(&dom, &mut out, None, Some(t), &clock) {
        Err(Error::Again) if start.elapsed() >= t => {}
        other => {
            return Err(format!(
                "sread with nothing to read: {other:?} after {:?}",
                start.elapsed()
            ))
        }
    }
    let mut sender = sender(a, b, 1)?;
    let (got, latency) = thread::scope(|s| {
        let reader = s.spawn(|| {
            let got = cq.sread(&dom, &mut out, None, Some(Duration::from_secs(5)), &clock);
            (got, Instant::now(), out)
        });
        until_blocked(&dom, &cq)?;
        let sent = Instant::now();
        sender.send(7)?;
        let (got, woke, out) = reader.join().map_err(|_| "the reader panicked")?;
        Ok::<_, String>(((got, out), woke.saturating_duration_since(sent)))
    })?;
    match got {
        (Ok(1), out) if out[0].op_context == OpContext(0) && out[0].len == sender.len => {}
        other => return Err(format!("the blocked sread returned {other:?}")),
    }
    cq.unbind(&dom, &rx).map_err(err("unbind")).ok();
    Ok(format!(
        "FD CQ on MSI-X vector {v} (GetWait: eventfd {fd}); sread timed out after ≥ 200 ms with \
         nothing; a blocked sread woke {:.1} ms after A began sending and returned the frame",
        latency.as_secs_f64() * 1e3
    ))
}

/// Runs `wait` on a thread of its own, lets it block, does `act`, and checks that the wait
/// returned `Ok` (woken) rather than timing out.
fn woken(
    what: &str,
    wait: impl FnOnce() -> ringfab::Result + Send,
    act: impl FnOnce() -> Result<(), String>,
) -> Result<(), String> {
    thread::scope(|s| {
        let waiter = s.spawn(wait);
        thread::sleep(Duration::from_millis(50));
        act()?;
        match waiter.join().map_err(|_| "the waiter panicked")? {
            Ok(()) => Ok(()),
            other => Err(format!("{what}: the set's wait gave {other:?}")),
        }
    })
}

/// A wait set (one epoll descriptor, `EpollWaitSet`) over a receive CQ and a transmit CQ of B,
/// each on its own MSI-X vector: it times out with nothing, wakes on a receive interrupt, on a
/// send-completion interrupt, and on `signal`.
pub(crate) fn wait_set_over_two_vectors(ctx: &mut Ctx) -> Outcome {
    let (a, b) = ctx.nics()?;
    wait_set_over_two_vectors_on(a, b)
}

/// [`wait_set_over_two_vectors`] on any NIC pair.
pub(crate) fn wait_set_over_two_vectors_on<N: HalNic<Wait = EventFdWait>>(a: &N, b: &N) -> Outcome {
    let caps = Capacities {
        queues: 2,
        cqs: 2,
        cq_size: 64,
        ..Capacities::DEFAULT
    };
    let dom = Domain::<_, DEPTH>::with_capacities(b, &caps);
    let epoll = EpollWaitSet::new().map_err(|e| format!("epoll: {e}"))?;
    let set = WaitSet::new(&dom, epoll);
    let in_set = CqAttr {
        wait_set: Some(set.id()),
        ..msg_attr(WaitObj::Set)
    };
    let rx_cq = set
        .open_cq::<Msg, DEPTH>(&dom, &in_set)
        .map_err(err("open_cq RX"))?;
    let tx_cq = set
        .open_cq::<Msg, DEPTH>(&dom, &in_set)
        .map_err(err("open_cq TX"))?;
    let (vr, vt) = (rx_cq.interrupt_vector(&dom), tx_cq.interrupt_vector(&dom));
    let (Some(vr), Some(vt)) = (vr, vt) else {
        return Err(format!("vectors {vr:?} / {vt:?}"));
    };
    if vr == vt {
        return Err(format!("both CQs on vector {vr}"));
    }
    let mem = b.alloc_dma(8 * BUF).map_err(|e| e.to_string())?;
    let rx = bound_rx(&dom, &rx_cq, &mem, 4)?;
    let tx = dom
        .open_tx(0, TxConfig::with_vector(vt))
        .map_err(err("open_tx"))?;
    tx_cq
        .bind(&dom, &tx, BindFlags::TRANSMIT)
        .map_err(err("bind TX"))?;
    let clock = StdClock(Instant::now());
    let mut out = [MsgEntry::default(); 4];
    let wait = || set.wait(&dom, Some(Duration::from_secs(5)), &clock);

    let t = Duration::from_millis(100);
    let start = Instant::now();
    match set.wait(&dom, Some(t), &clock) {
        Err(Error::TimedOut) if start.elapsed() >= t => {}
        other => {
            return Err(format!(
                "an idle set: {other:?} after {:?}",
                start.elapsed()
            ))
        }
    }
    let mut sender = sender(a, b, 1)?;
    woken("receive", wait, || sender.send(1))?;
    if rx_cq.read(&dom, &mut out) != Ok(1) || tx_cq.read(&dom, &mut out) != Err(Error::Again) {
        return Err("after the receive interrupt: not exactly one receive entry".into());
    }
    // To an address no NIC has: a frame to A would wait for A's next receive buffers (QEMU
    // holds a frame while the receiver has none) and fill one of a later test's; every NIC's
    // filter drops this one without taking a buffer.
    let nobody = MacAddr([0x02, 0, 0, 0, 0, 0x99]);
    let f = frame(nobody, b.capabilities().mac, 100, 80);
    mem.put(4, &f);
    let seg = [TxSegment {
        iova: iova_at(&mem, 4 * BUF),
        len: f.len() as u16,
    }];
    woken("send completion", wait, || {
        let send = SendPost {
            segments: &seg,
            context: OpContext(100),
            flags: OpFlags::empty(),
        };
        match tx.post_sends(&[send]) {
            Ok(1) => Ok(()),
            other => Err(format!("post_sends: {other:?}")),
        }
    })?;
    match tx_cq.read(&dom, &mut out) {
        Ok(1) if out[0].op_context == OpContext(100) => {}
        other => return Err(format!("after the send interrupt: {other:?}")),
    }
    woken("signal", wait, || tx_cq.signal(&dom).map_err(err("signal")))?;
    rx_cq.unbind(&dom, &rx).ok();
    tx_cq.unbind(&dom, &tx).ok();
    Ok(format!(
        "epoll set over the RX CQ (vector {vr}) and TX CQ (vector {vt}) of B: timed out idle, \
         woke on a receive interrupt, on a send-completion interrupt, and on signal"
    ))
}
