//! `api_sequence`: core's endpoints (`ringfab::Node`: a domain, a CQ, an AV and an endpoint)
//! on two emulated NICs on the deterministic wire (two 82576 under igb, two 82574 under
//! e1000e or two virtio-net devices, the first byte says which), driven by an operation
//! sequence from the fuzzer against a reference model that knows every operation posted.
//!
//! Operations: post a receive (owned buffer from a registered region), send one (a length of
//! the fuzzer's, to the other side), inject, cancel one of the side's outstanding operations
//! (or a context never posted), run the wire, read the CQ (successes, and the error queue with
//! `readerr_owned` when `read` says `Avail`), enable the endpoint, inject a device fault on
//! one side (write-backs withheld, delayed, lengths beyond the buffer, garbage status bits),
//! inject a wire fault (frames corrupted at a byte of the fuzzer's choice, the header
//! included, with a good or a bad FCS; dropped, duplicated, reordered: so the endpoint's
//! receive-side parse meets frames no ringfab sender wrote), and close a side's endpoint (its
//! outstanding operations are discarded without completions, as `fi_close` allows).
//!
//! Checked:
//! * no panic, and every call answers `Ok` or an error (never anything the model cannot
//!   account for);
//! * every completion, success or error, names an operation posted on that side and not yet
//!   completed: none completes twice, none that was never posted;
//! * an operation outstanding when its endpoint closed completes at most once (its completion
//!   may already be in the CQ, which stays open and readable);
//! * at the end, once every open side cancels what it still has outstanding and its CQ is
//!   drained, every operation posted on an open side has completed exactly once; after both
//!   endpoints close and both CQs are drained, every buffer is back in its region
//!   (`outstanding()` is 0).
//!
//! Faults that fail a path (a stop the device never acknowledges, a device reset or removal)
//! are not among the operations yet: the operations they discard complete as one `FI_EIO`
//! entry, which the model does not count (docs/reliability.md).

use std::collections::HashMap;

use ringfab::cq::CqAttr;
use ringfab::domain::Domain;
use ringfab::entry::{ErrEntry, Msg, MsgEntry, OpContext};
use ringfab::ep::EpAttr;
use ringfab::hal::{MacAddr, Nic};
use ringfab::{Capacities, Error, Node};
use ringfab_e1000e::E1000e;
use ringfab_emu::{
    CorruptMode, DeviceFault, E1000eModelConfig, EmuE1000e, EmuIgb, EmuNic, EmuVirtioNet,
    IgbModelConfig, Kind, Ring, VirtioNetModelConfig, Wire, WireFault,
};
use ringfab_igb::Igb;
use ringfab_virtio_net::VirtioNet;

use crate::Bytes;

/// Reads that drain a CQ at the end: `read` stops at the first empty read, so this only bounds
/// a CQ that never empties. Each read takes one error entry, and a sequence can leave more
/// error entries than 64 reads would take (a failed inject's each: the device's transmit
/// status spoiled, `DeviceFault::GarbageStatus`).
const DRAIN: usize = 100_000;

/// The rings' depth (and op tables').
const DEPTH: usize = 64;

/// What one side's domain holds: the endpoint's two queues, its CQ, the region, the AV.
const CAPS: Capacities = Capacities {
    queues: 2,
    cqs: 1,
    cq_size: 128,
    mrs: 1,
    avs: 1,
    av_entries: 4,
};

/// Receive buffers' length, and the region's: room for 16 buffers a side.
const BUF: usize = 2048;
const REGION: usize = 16 * BUF;

/// The `api_sequence` target's body.
pub fn run(data: &[u8]) {
    let mut b = Bytes::new(data);
    let Some(nic) = b.u8() else {
        return;
    };
    let mac = |last| MacAddr([0x52, 0x54, 0, 0, 0, last]);
    match nic % 3 {
        0 => {
            let dev = |m| {
                let mut c = IgbModelConfig::default();
                c.mac = m;
                EmuIgb::new(c)
            };
            drive(
                dev(mac(0xa)),
                dev(mac(0xb)),
                |d| Igb::new(d.platform()),
                &mut b,
            );
        }
        1 => {
            let dev = |m| {
                let mut c = E1000eModelConfig::default();
                c.mac = m;
                EmuE1000e::new(c)
            };
            drive(
                dev(mac(0xa)),
                dev(mac(0xb)),
                |d| E1000e::new(d.platform()),
                &mut b,
            );
        }
        _ => {
            let dev = |m| {
                let mut c = VirtioNetModelConfig::default();
                c.mac = m;
                EmuVirtioNet::new(c)
            };
            drive(
                dev(mac(0xa)),
                dev(mac(0xb)),
                |d| VirtioNet::new(d.platform()),
                &mut b,
            );
        }
    }
}

/// What the model knows of one side.
#[derive(Default)]
struct Side {
    /// Operations posted and not completed, by context.
    out: HashMap<usize, ()>,
    /// Operations outstanding when the endpoint closed: each may still complete, once.
    gone: HashMap<usize, ()>,
    /// The endpoint was closed.
    closed: bool,
}

fn drive<K: Kind, N: Nic>(
    dev_a: EmuNic<K>,
    dev_b: EmuNic<K>,
    driver: impl Fn(&EmuNic<K>) -> ringfab::hal::Result<N>,
    b: &mut Bytes<'_>,
) {
    let wire = Wire::new();
    dev_a.connect(&wire);
    dev_b.connect(&wire);
    let nics = [
        driver(&dev_a).expect("bring-up"),
        driver(&dev_b).expect("bring-up"),
    ];
    let devs = [&dev_a, &dev_b];
    // Domains as small as the sequence needs, with rings of 64: a domain's tables are made
    // whole at its start, and the default ones (rings of 256, 4 CQs of 1024 entries) cost
    // most of an execution; smaller rings also reach a full ring in fewer operations.
    let cq = CqAttr {
        size: 128,
        ..CqAttr::default()
    };
    let nodes = nics
        .iter()
        .map(|n| {
            let domain = Domain::<_, DEPTH>::with_capacities(n, &CAPS);
            Node::<_, Msg, DEPTH>::on(domain, &EpAttr::default(), &cq).expect("a node")
        })
        .collect::<Vec<_>>();
    let mut parts: Vec<_> = nodes
        .into_iter()
        .map(|n| (n.domain, Some(n.ep), n.cq, n.av))
        .collect();
    let peer = [
        parts[0]
            .3
            .insert_one(&parts[0].0, parts[1].1.as_ref().unwrap()),
        parts[1]
            .3
            .insert_one(&parts[1].0, parts[0].1.as_ref().unwrap()),
    ]
    .map(|r| r.expect("the peer's address"));
    let mrs: Vec<_> = parts
        .iter()
        .map(|p| p.0.register(vec![0u8; REGION]).expect("a region"))
        .collect();
    let mut model = [Side::default(), Side::default()];
    let mut next = 1usize;

    while let Some(op) = b.u8() {
        let s = usize::from(op >> 7);
        let (dom, ep, cq, _) = &mut parts[s];
        let side = &mut model[s];
        let op = op & 0x7f;
        // A closed side's CQ stays open: reads go on.
        if side.closed && !matches!(op % 11, 5 | 9) {
            continue;
        }
        // `None`: the operation's arguments ran out, which ends the sequence.
        let step = (|| -> Option<()> {
            match op % 11 {
                // Post a receive.
                0 => {
                    let ep = ep.as_ref()?;
                    let Ok(buf) = mrs[s].alloc(dom, BUF) else {
                        return Some(());
                    };
                    let ctx = next;
                    next += 1;
                    if ep.recv(dom, buf, OpContext(ctx)).is_ok() {
                        side.out.insert(ctx, ());
                    }
                }
                // Send to the other side.
                1 => {
                    let ep = ep.as_ref()?;
                    let len = usize::from(b.u16()?) % (BUF + 64);
                    let Ok(buf) = mrs[s].alloc(dom, BUF) else {
                        return Some(());
                    };
                    let ctx = next;
                    next += 1;
                    if ep.send(dom, buf, len, peer[s], OpContext(ctx)).is_ok() {
                        side.out.insert(ctx, ());
                    }
                }
                // Inject: no completion, no operation to count.
                2 => {
                    let ep = ep.as_ref()?;
                    let len = usize::from(b.u8()?);
                    let _ = ep.inject(dom, &[0x5a; 255][..len], peer[s]);
                }
                // Cancel the k-th outstanding operation (in context order), or one never posted.
                3 => {
                    let ep = ep.as_ref()?;
                    let k = usize::from(b.u8()?);
                    let mut ctxs: Vec<_> = side.out.keys().copied().collect();
                    ctxs.sort_unstable();
                    let ctx = ctxs.get(k).copied().unwrap_or(usize::MAX - k);
                    match ep.cancel(dom, OpContext(ctx)) {
                        Ok(found) => assert!(
                            !found || side.out.contains_key(&ctx),
                            "cancel found context {ctx}, which is not outstanding"
                        ),
                        Err(e) => {
                            let _ = format!("{e:?}");
                        }
                    }
                }
                4 => wire.run_until_idle(),
                5 => read(dom, cq, side, 1 + usize::from(b.u8()? % 8)),
                6 => {
                    if let Some(ep) = ep.as_mut() {
                        let _ = ep.enable(dom);
                    }
                }
                // Close this side's endpoint: what it had outstanding is discarded.
                7 => {
                    if let Some(ep) = ep.take() {
                        if ep.close(dom).is_err() {
                            panic!("close refused its own domain");
                        }
                        side.gone.extend(side.out.drain());
                        side.closed = true;
                    }
                }
                // A device fault on this side.
                8 => {
                    let kind = b.u8()?;
                    let count = usize::from(b.u8()? % 4) + 1;
                    let ring = if kind & 0x10 != 0 {
                        Some(Ring::Tx(0))
                    } else {
                        Some(Ring::Rx(0))
                    };
                    let fault = match kind % 4 {
                        0 => DeviceFault::WithholdWriteback { ring, count },
                        1 => DeviceFault::DelayWriteback {
                            ring,
                            count,
                            steps: u32::from(b.u8()?),
                        },
                        2 => DeviceFault::OversizeLength {
                            queue: Some(0),
                            count,
                            extra: b.u16()?,
                        },
                        _ => DeviceFault::GarbageStatus {
                            ring,
                            count,
                            bits: b.u32()?,
                        },
                    };
                    devs[s].inject(fault);
                }
                // A wire fault: what reaches the other side is no longer what was sent.
                10 => {
                    let kind = b.u8()?;
                    let count = usize::from(kind >> 4) + 1;
                    let fault = match kind % 4 {
                        0 => WireFault::Corrupt {
                            count,
                            offset: usize::from(b.u8()?),
                            mode: if kind & 4 != 0 {
                                CorruptMode::BadCrc
                            } else {
                                CorruptMode::Silent
                            },
                        },
                        1 => WireFault::Drop { count },
                        2 => WireFault::Duplicate { count },
                        _ => WireFault::Reorder { count },
                    };
                    wire.inject(fault);
                }
                // Progress without the wire: a poll through a read of nothing.
                _ => read(dom, cq, side, 1),
            }
            Some(())
        })();
        if step.is_none() {
            break;
        }
    }

    // The end: every open side cancels what it has outstanding and drains its CQ; then every
    // operation posted on it has completed.
    for s in 0..2 {
        let (dom, ep, cq, _) = &mut parts[s];
        let side = &mut model[s];
        let Some(ep) = ep.as_ref() else {
            continue;
        };
        wire.run_until_idle();
        read(dom, cq, side, DRAIN);
        let mut ctxs: Vec<_> = side.out.keys().copied().collect();
        ctxs.sort_unstable();
        for ctx in ctxs {
            if side.out.contains_key(&ctx) {
                let _ = ep.cancel(dom, OpContext(ctx));
            }
        }
        wire.run_until_idle();
        read(dom, cq, side, DRAIN);
        assert!(
            side.out.is_empty(),
            "side {s}: operations never completed after cancel: {:?}",
            side.out.keys().collect::<Vec<_>>()
        );
    }
    for (s, (dom, ep, cq, _)) in parts.iter_mut().enumerate() {
        if let Some(ep) = ep.take() {
            if ep.close(dom).is_err() {
                panic!("close refused its own domain");
            }
        }
        read(dom, cq, &mut model[s], DRAIN);
        assert_eq!(mrs[s].outstanding(dom), 0, "side {s}: buffers not back");
    }
}

/// Reads `side`'s CQ until it is empty (or `rounds` reads), checking each completion against
/// the model.
fn read<N: Nic, const D: usize>(
    dom: &Domain<'_, N, D>,
    cq: &mut ringfab::cq::CompletionQueue<N, Msg>,
    side: &mut Side,
    rounds: usize,
) {
    for _ in 0..rounds {
        let mut e = [MsgEntry::default(); 8];
        match cq.read(dom, &mut e) {
            Ok(n) => {
                for e in &e[..n] {
                    done(side, e.op_context.0, "success");
                }
            }
            Err(Error::Avail) => {
                let mut entry = ErrEntry::default();
                let (_, buf) = cq
                    .readerr_owned(dom, &mut entry, None, 0)
                    .expect("readerr after Avail");
                drop(buf);
                // A path failure's one entry names no operation.
                if entry.op_context.0 != 0 {
                    done(side, entry.op_context.0, "error");
                }
            }
            Err(Error::Again) => return,
            Err(other) => panic!("read: {other:?}"),
        }
    }
}

fn done(side: &mut Side, ctx: usize, what: &str) {
    assert!(
        side.out.remove(&ctx).is_some() || side.gone.remove(&ctx).is_some(),
        "a {what} completion for context {ctx}, which is not outstanding (twice, or never posted)"
    );
}
