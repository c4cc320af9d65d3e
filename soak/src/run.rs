//! The soak's loop for one NIC model: two devices on one wire, a station on each, random
//! operations and faults from one seeded PRNG; domains and devices made again when a fault
//! leaves no other way (an IOMMU mapping gone, a device removed), as an application would.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use ringfab::av::EpAddr;
use ringfab::domain::Domain;
use ringfab::entry::OpContext;
use ringfab::ep::EpAttr;
use ringfab::hal::{MacAddr, Nic};
use ringfab_e1000e::E1000e;
use ringfab_emu::{
    E1000eModelConfig, EmuE1000e, EmuIgb, EmuNic, EmuVirtioNet, IgbModelConfig, Kind, Prng,
    VirtioNetModelConfig, Wire,
};
use ringfab_igb::Igb;
use ringfab_virtio_net::VirtioNet;

use crate::faults::{below, draw, Fault, Model};
use crate::ledger::ENDPOINT_CONTEXT_BASE;
use crate::station::{Books, Recovered, Station, BUFS};
use crate::tally::Tally;

/// What a soak of one model is asked to do.
#[derive(Clone, Copy, Debug)]
pub struct Plan {
    /// The NIC model.
    pub model: Model,
    /// The PRNG's seed (the model's stream is derived from it and the model).
    pub seed: u64,
    /// Data operations (receives, sends, injects, cancels) to issue.
    pub ops: u64,
    /// Chance of a fault before each operation, per mille.
    pub fault_per_mille: u16,
}

/// An accounting violation (or a call that failed where it must not): where, and how to run
/// it again.
#[derive(Clone, Debug)]
pub struct Violation {
    /// The plan that found it.
    pub plan: Plan,
    /// The index of the data operation at or after which it was found.
    pub op: u64,
    /// What was wrong.
    pub what: String,
}

/// The operation index of the soak running now, for a panic or a hang report.
pub static PROGRESS: AtomicU64 = AtomicU64::new(0);

/// A recovery re-enables the endpoint this often (per mille); otherwise it closes and opens
/// the endpoint again.
const REENABLE_PER_MILLE: u16 = 650;
/// Surprise removals among critical faults, per mille: each ends the devices' life.
const REMOVAL_PER_MILLE: u16 = 20;
/// Operations between two settles (cancel everything, drain, check every operation is done).
const SETTLE_EVERY: u64 = 4096;
/// A domain ends when a station's pool has fewer buffers than this (discards never give
/// buffers back to the application: their memory returns with the region's close).
const LOW_POOL: usize = BUFS / 4;
/// Operations a station keeps outstanding at most, as an application keeps a window: beyond
/// it, a post becomes a read.
const WINDOW: usize = 96;

/// Runs one model's soak.
///
/// # Errors
/// The first violation.
pub fn soak(plan: Plan) -> Result<Tally, Violation> {
    let mac = |n: u8| MacAddr([0x52, 0x54, 0, 0x50, 0xa4, n]);
    match plan.model {
        Model::Igb => devices(
            plan,
            |n| {
                let mut c = IgbModelConfig::default();
                c.mac = mac(n);
                EmuIgb::new(c)
            },
            |d| Igb::new(d.platform()),
        ),
        Model::E1000e => devices(
            plan,
            |n| {
                let mut c = E1000eModelConfig::default();
                c.mac = mac(n);
                EmuE1000e::new(c)
            },
            |d| E1000e::new(d.platform()),
        ),
        Model::VirtioNet => devices(
            plan,
            |n| {
                let mut c = VirtioNetModelConfig::default();
                c.mac = mac(n);
                EmuVirtioNet::new(c)
            },
            |d| VirtioNet::new(d.platform()),
        ),
    }
}

/// How a domain's life ended.
enum End {
    /// Every operation was issued.
    Done,
    /// The domains go and come again on the same devices.
    Domain,
    /// A device is gone: new devices.
    Devices,
}

fn devices<K: Kind, N: Nic>(
    plan: Plan,
    make: impl Fn(u8) -> EmuNic<K>,
    driver: impl Fn(&EmuNic<K>) -> ringfab::hal::Result<N>,
) -> Result<Tally, Violation> {
    let start = Instant::now();
    let mut rng = Prng::new(plan.seed ^ (plan.model as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let mut books = Books::default();
    let mut n = 0u8;
    let fail = |books: &Books, what: String| Violation {
        plan,
        op: books.op,
        what,
    };
    'devices: loop {
        let wire = Wire::new();
        let devs = [make(n), make(n.wrapping_add(1))];
        n = n.wrapping_add(2);
        for d in &devs {
            d.connect(&wire);
        }
        let nics = [driver(&devs[0]), driver(&devs[1])];
        let [Ok(a), Ok(b)] = nics else {
            return Err(fail(&books, "bring-up of a new device failed".into()));
        };
        let nics = [a, b];
        books.tally.add("recovery.devices-brought-up", 2);
        loop {
            match domains(&plan, &wire, &devs, &nics, &mut rng, &mut books) {
                Ok(End::Done) => break 'devices,
                Ok(End::Domain) => books.tally.bump("recovery.domains-made-again"),
                Ok(End::Devices) => continue 'devices,
                Err(what) => return Err(fail(&books, what)),
            }
        }
    }
    if !books.ledger.is_empty() {
        return Err(fail(
            &books,
            format!("{} operations outstanding at the end", books.ledger.len()),
        ));
    }
    books.tally.add("ops", books.op);
    books.tally.elapsed = start.elapsed();
    Ok(books.tally)
}

fn attr(id: usize) -> EpAttr {
    EpAttr {
        // Station 0 accepts messages up to 4 KiB and may send them; station 1's 2 KiB
        // receive buffers truncate them (FI_ETRUNC with olen, issue 14 item 2).
        rx_buf_len: if id == 0 { 4096 } else { 2048 },
        context: OpContext(ENDPOINT_CONTEXT_BASE + id),
        ..EpAttr::default()
    }
}

/// One life of the two domains: stations opened, operations until the plan is done or a
/// fault needs new domains or devices, every station closed and checked.
fn domains<K: Kind, N: Nic>(
    plan: &Plan,
    wire: &Wire,
    devs: &[EmuNic<K>; 2],
    nics: &[N; 2],
    rng: &mut Prng,
    books: &mut Books,
) -> Result<End, String> {
    let doms = [Domain::new(&nics[0]), Domain::new(&nics[1])];
    let names = devs.each_ref().map(|d| EpAddr {
        mac: d.mac(),
        ctx: 0,
    });
    let mut st = Vec::with_capacity(2);
    for id in 0..2 {
        match Station::open(id, &doms[id], attr(id), names[1 - id], books) {
            Ok(s) => st.push(s),
            Err(ringfab::Error::Device(e)) => {
                // A device that refuses its queues at bring-up (a start it will not
                // acknowledge, a removal): new devices.
                books.tally.bump("recovery.open-refused");
                let _ = e;
                for s in st {
                    s.finish(books)?;
                }
                return Ok(End::Devices);
            }
            Err(e) => return Err(format!("opening station {id}: {e:?}")),
        }
    }
    let mut poisoned: Option<u64> = None;
    let end = loop {
        if books.op >= plan.ops {
            break End::Done;
        }
        if let Some(left) = poisoned.as_mut() {
            if *left == 0 {
                break End::Domain;
            }
            *left -= 1;
        }
        if rng.chance(plan.fault_per_mille) {
            let s = below(rng, 2) as usize;
            let (fault, name) = draw(rng, plan.model, REMOVAL_PER_MILLE);
            books.tally.bump(name);
            match fault {
                Fault::Wire(f) => wire.inject(f),
                Fault::Device(f) => devs[s].inject(f),
                Fault::Critical(f) => devs[s].inject_critical(f),
                Fault::Iommu => {
                    if let Some(iova) = st[s].region_iova() {
                        devs[s].revoke_dma(iova);
                        // The application notices its buffers no longer move and makes its
                        // domain again, within a few dozen operations.
                        poisoned.get_or_insert(below(rng, 64));
                    }
                }
            }
        }
        let s = below(rng, 2) as usize;
        let stn = &mut st[s];
        PROGRESS.store(books.op, Ordering::Relaxed);
        let mut step = below(rng, 1000);
        if step < 520 && books.ledger.holding(s) >= WINDOW {
            step = 630;
        }
        match step {
            0..280 => {
                books.op += 1;
                stn.recv(books)?;
            }
            280..520 => {
                books.op += 1;
                let len = match below(rng, 100) {
                    0..70 => below(rng, 128),
                    _ => below(rng, 4096),
                } as usize;
                stn.send(books, len)?;
            }
            520..590 => {
                books.op += 1;
                stn.inject(books, below(rng, 65) as usize)?;
            }
            590..630 => {
                books.op += 1;
                let k = below(rng, 256) as usize;
                stn.cancel(books, k, rng.chance(100))?;
            }
            630..880 => {
                stn.drain(books, 1 + below(rng, 4) as usize)?;
            }
            _ => wire.run_until_idle(),
        }
        if books.op % SETTLE_EVERY == 0 && books.op > 0 {
            wire.run_until_idle();
            for s in &mut st {
                s.settle(books)?;
            }
        }
        let mut end = None;
        for s in &mut st {
            if !(s.failed || s.disabled()) {
                continue;
            }
            wire.run_until_idle();
            match s.recover(books, rng.chance(REENABLE_PER_MILLE))? {
                Recovered::Yes => {}
                Recovered::No => end = Some(End::Domain),
                Recovered::DeviceGone => end = Some(End::Devices),
            }
        }
        if let Some(end) = end {
            break end;
        }
        if st.iter().any(|s| s.pool_len() < LOW_POOL) {
            break End::Domain;
        }
    };
    // Before the domain goes, what can complete does (a cancel of everything): closing
    // discards only what a failed endpoint still holds.
    wire.run_until_idle();
    for s in &mut st {
        s.settle(books)?;
    }
    for s in st {
        s.finish(books)?;
    }
    if !books.ledger.is_empty() {
        return Err(format!(
            "{} operations outstanding after both endpoints closed",
            books.ledger.len()
        ));
    }
    Ok(end)
}
