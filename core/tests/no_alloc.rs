//! The data path allocates nothing: a counting global allocator watches every ringfab call of a
//! ping-pong (send, recv, read) — and only ringfab: the emulated device and wire, which stand in
//! for hardware, allocate as they like (between the calls, and inside them while the model
//! handles a register access: `ringfab_emu::in_device`).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

use ringfab::av::{AvAttr, FiAddr};
use ringfab::cq::CqAttr;
use ringfab::domain::Domain;
use ringfab::entry::{Msg, MsgEntry, OpContext};
use ringfab::ep::EpAttr;
use ringfab::flags::{BindFlags, CompletionFlags};
use ringfab::hal::MacAddr;
use ringfab::mr::Buf;
use ringfab::Capacities;
use ringfab_emu::{EmuIgb, EmuPlatform, IgbModelConfig, Wire};
use ringfab_igb::Igb;

struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static WATCHING: Cell<bool> = const { Cell::new(false) };
}

// SAFETY: every call is forwarded to the system allocator unchanged; the counter only reads a
// thread-local flag (const-initialised, so reading it never allocates).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if counted() {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded; `ptr` came from `System.alloc` above.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if counted() {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: forwarded.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// An allocation ringfab made: inside a watched call, outside the emulated device.
fn counted() -> bool {
    WATCHING.with(Cell::get) && !ringfab_emu::in_device()
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Runs `f` with allocations counted.
fn watched<T>(f: impl FnOnce() -> T) -> T {
    WATCHING.with(|w| w.set(true));
    let r = f();
    WATCHING.with(|w| w.set(false));
    r
}

type Nic0 = Igb<EmuPlatform>;
const D: usize = 64;
const BUF: usize = 2048;

#[test]
fn a_ping_pong_on_the_data_path_allocates_nothing() {
    let wire = Wire::new();
    let dev = |last| {
        let mut c = IgbModelConfig::default();
        c.mac = MacAddr([0x52, 0x54, 0, 0, 0, last]);
        let d = EmuIgb::new(c);
        d.connect(&wire);
        d
    };
    let (dev_a, dev_b) = (dev(0x0a), dev(0x0b));
    let nic_a = Igb::new(dev_a.platform()).unwrap();
    let nic_b = Igb::new(dev_b.platform()).unwrap();
    // Set-up, before anything is counted: each domain allocates its tables here, in
    // `with_capacities`, and never again. One endpoint (two queues), one CQ of 256 entries, one
    // MR and one AV of one address each.
    let caps = Capacities {
        queues: 2,
        cqs: 1,
        cq_size: 256,
        mrs: 1,
        avs: 1,
        av_entries: 1,
    };
    let da = Domain::<_, D>::with_capacities(&nic_a, &caps);
    let db = Domain::<_, D>::with_capacities(&nic_b, &caps);
    let attr = CqAttr {
        size: 256,
        ..CqAttr::default()
    };
    let cq_a = da.open_cq::<Msg>(&attr).unwrap();
    let cq_b = db.open_cq::<Msg>(&attr).unwrap();
    let av_a = da.open_av(&AvAttr::default()).unwrap();
    let av_b = db.open_av(&AvAttr::default()).unwrap();
    let mut ep_a = da.endpoint(&EpAttr::default()).unwrap();
    let mut ep_b = db.endpoint(&EpAttr::default()).unwrap();
    for (d, ep, cq, av) in [
        (&da, &mut ep_a, &cq_a, &av_a),
        (&db, &mut ep_b, &cq_b, &av_b),
    ] {
        ep.bind_cq(d, cq, BindFlags::TRANSMIT | BindFlags::RECV)
            .unwrap();
        ep.bind_av(d, av).unwrap();
        ep.enable(d).unwrap();
    }
    let (mut to_b, mut to_a) = ([FiAddr::NOTAVAIL], [FiAddr::NOTAVAIL]);
    av_a.insert(&da, &[ep_b.name()], &mut to_b).unwrap();
    av_b.insert(&db, &[ep_a.name()], &mut to_a).unwrap();
    let mr_a = da.register(vec![0u8; 16 * BUF]).unwrap();
    let mr_b = db.register(vec![0u8; 16 * BUF]).unwrap();
    let mut pool_a: Vec<Buf<'_>> = (0..8).map(|_| mr_a.alloc(&da, BUF).unwrap()).collect();
    let mut pool_b: Vec<Buf<'_>> = (0..8).map(|_| mr_b.alloc(&db, BUF).unwrap()).collect();
    for _ in 0..4 {
        ep_a.recv(&da, mr_a.alloc(&da, BUF).unwrap(), OpContext(1))
            .unwrap();
        ep_b.recv(&db, mr_b.alloc(&db, BUF).unwrap(), OpContext(1))
            .unwrap();
    }
    // Pools never grow past their capacity, so pushing back does not allocate either.
    pool_a.reserve(16);
    pool_b.reserve(16);

    let before = ALLOCATIONS.load(Ordering::Relaxed);
    let mut round_trips = 0;
    for _ in 0..1000 {
        for (from, to) in [(0, 1), (1, 0)] {
            let (doms, eps, cqs) = ([&da, &db], [&ep_a, &ep_b], [&cq_a, &cq_b]);
            let peers = [to_b[0], to_a[0]];
            let pools = [&mut pool_a, &mut pool_b];
            let buf = pools[from].pop().expect("a send buffer");
            watched(|| eps[from].send(doms[from], buf, 64, peers[from], OpContext(2))).unwrap();
            let mut received = 0;
            while received == 0 {
                wire.run_until_idle();
                received += drain(doms[to], cqs[to], eps[to], &mut *pools[to]);
                drain(doms[from], cqs[from], eps[from], &mut *pools[from]);
            }
        }
        round_trips += 1;
    }
    assert_eq!(round_trips, 1000);
    assert_eq!(
        ALLOCATIONS.load(Ordering::Relaxed) - before,
        0,
        "send, recv and read_owned allocated"
    );
}

/// Reads `cq` (of domain `d`) with allocations counted: receive buffers are posted again, send
/// buffers go to `pool`. Returns the receives.
fn drain<'d>(
    d: &'d Domain<'_, Nic0, D>,
    cq: &ringfab::cq::CompletionQueue<Nic0, Msg>,
    ep: &ringfab::ep::Endpoint,
    pool: &mut Vec<Buf<'d>>,
) -> usize {
    let mut entries = [MsgEntry::default(); 8];
    let mut src = [FiAddr::NOTAVAIL; 8];
    let mut bufs: [Option<Buf<'d>>; 8] = Default::default();
    let n = watched(|| cq.read_owned(d, &mut entries, &mut src, &mut bufs)).unwrap_or(0);
    let mut recvs = 0;
    for (e, b) in entries[..n].iter().zip(bufs.iter_mut()) {
        let b = b.take().expect("every operation was posted with a buffer");
        if e.flags.contains(CompletionFlags::RECV) {
            recvs += 1;
            watched(|| ep.recv(d, b, OpContext(1))).unwrap();
        } else {
            pool.push(b);
        }
    }
    recvs
}
