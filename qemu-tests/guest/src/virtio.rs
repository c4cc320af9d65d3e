//! The virtio-net driver through VFIO on QEMU's `virtio-net-pci` (two, modern only, behind the
//! vIOMMU, on a hub of their own): bind, bring-up and feature negotiation, frames both ways, an
//! MSI-X wake-up, the queue flush (a virtio queue reset) and core's endpoint workload.

use ringfab_hal::{Nic as _, Platform as _};
use ringfab_vfio::VfioPlatform;
use ringfab_virtio_net::VirtioNet;

use crate::guest::{Ctx, Outcome};
use crate::nic::{bind_all, frames_between, msix_wakes_wait_on};

pub(crate) type NicVirtio = VirtioNet<VfioPlatform>;

/// Feature bits the test expects negotiated on QEMU's device (virtio 1.2 §6, §5.1.3), by name.
const EXPECTED: [(&str, u64); 9] = [
    ("VERSION_1", 1 << 32),
    ("ACCESS_PLATFORM", 1 << 33),
    ("RING_RESET", 1 << 40),
    ("INDIRECT_DESC", 1 << 28),
    ("EVENT_IDX", 1 << 29),
    ("MAC", 1 << 5),
    ("STATUS", 1 << 16),
    ("CTRL_VQ", 1 << 17),
    ("CTRL_RX", 1 << 18),
];

pub(crate) fn nics(ctx: &Ctx) -> Result<(&NicVirtio, &NicVirtio), String> {
    match &ctx.virtio {
        Some([a, b]) => Ok((a, b)),
        None => Err("the virtio-net NICs are not open (virtio-open failed or did not run)".into()),
    }
}

/// Opens both virtio-net NICs through VFIO (binding them first) and brings them up.
pub(crate) fn bring_up(ctx: &mut Ctx) -> Result<Vec<String>, String> {
    let bdfs = ctx
        .virtio_bdfs
        .clone()
        .ok_or("no ringfab.virtio= on the kernel command line")?;
    let mut nics = Vec::new();
    let mut detail = Vec::new();
    for (i, bdf) in bdfs.iter().enumerate() {
        let p = VfioPlatform::open(bdf).map_err(|e| format!("opening {bdf}: {e}"))?;
        let (group, vectors) = (p.iommu_group(), p.irq_vectors());
        let nic = NicVirtio::new(p).map_err(|e| format!("bringing up {bdf}: {e}"))?;
        let caps = nic.capabilities();
        if let Some(want) = ctx.virtio_macs.as_ref().map(|m| &m[i]) {
            if caps.mac.to_string() != *want {
                return Err(format!(
                    "{bdf}: the driver read MAC {}, QEMU set {want}",
                    caps.mac
                ));
            }
        }
        let features = nic.features();
        let missing: Vec<&str> = EXPECTED
            .iter()
            .filter(|(_, bit)| features & bit == 0)
            .map(|(name, _)| *name)
            .collect();
        if !missing.is_empty() {
            return Err(format!(
                "{bdf}: features {features:#x} lack {}",
                missing.join(", ")
            ));
        }
        let link = nic.link();
        if !link.up {
            return Err(format!("{bdf}: link down after bring-up: {link:?}"));
        }
        detail.push(format!(
            "{bdf}: group {group}, {vectors} MSI-X vectors, MAC {} (as set), features {features:#x} \
             (VERSION_1, ACCESS_PLATFORM, RING_RESET, EVENT_IDX … negotiated), {}/{} queues, \
             link up",
            caps.mac, caps.tx_queues, caps.rx_queues
        ));
        nics.push(nic);
    }
    let pair = <[NicVirtio; 2]>::try_from(nics).map_err(|_| "not two NICs".to_owned())?;
    ctx.virtio = Some(pair);
    Ok(detail)
}

/// Binds both virtio-net functions (functions the driver drives; QEMU's are 1af4:1041, modern
/// only) to vfio-pci, opens them, brings them up with the virtio-net driver and checks MAC,
/// negotiated features and link.
pub(crate) fn open(ctx: &mut Ctx) -> Outcome {
    let bdfs = ctx
        .virtio_bdfs
        .clone()
        .ok_or("no ringfab.virtio= on the kernel command line")?;
    let bound = bind_all(&bdfs, ringfab_virtio_net::PCI_IDS, "a virtio-net device")?;
    let mut detail = vec![bound];
    detail.extend(bring_up(ctx)?);
    Ok(detail.join("; "))
}

/// 300 frames each way between the two virtio-net NICs, checked as for igb (the driver's
/// software statistics must count them).
pub(crate) fn frames_both_ways(ctx: &mut Ctx) -> Outcome {
    let (a, b) = nics(ctx)?;
    let there = frames_between(a, b)?;
    let back = frames_between(b, a)?;
    Ok(format!("A → B: {there}; B → A: {back}"))
}

/// An armed receive queue (`used_event` moved up) wakes a thread blocked on the vector's
/// eventfd; a disarmed one (`used_event` half the index space away) does not.
pub(crate) fn msix_wakes_wait(ctx: &mut Ctx) -> Outcome {
    let (a, b) = nics(ctx)?;
    msix_wakes_wait_on(a, b)
}

/// Core's blocking read on the virtio-net (`cq-sread-wakes-on-msix`): an `FI_WAIT_FD` CQ times
/// out with nothing, and a reader blocked in `sread` is woken by the receive interrupt on
/// its MSI-X vectors (one per virtqueue, interrupts asked for through `used_event`).
pub(crate) fn cq_sread_wakes_on_msix(ctx: &mut Ctx) -> Outcome {
    let (a, b) = nics(ctx)?;
    crate::wait::sread_wakes_on_msix_on(a, b)
}

/// A wait set over a receive CQ and a transmit CQ of the virtio-net on two vectors
/// (`cq-wait-set-epoll`): timeout, receive interrupt, send-completion interrupt, signal.
pub(crate) fn cq_wait_set_epoll(ctx: &mut Ctx) -> Outcome {
    let (a, b) = nics(ctx)?;
    crate::wait::wait_set_over_two_vectors_on(a, b)
}

/// The receive flush: on virtio a queue reset (`queue_reset` written and read back as 0),
/// then the queue programmed and enabled again.
pub(crate) fn rx_flush(ctx: &mut Ctx) -> Outcome {
    let (a, b) = nics(ctx)?;
    crate::nic::rx_flush_on(a, b)
}

/// RSS over four queue pairs (QEMU's `mq=on,rss=on` on a tap with `queues=4`): the driver
/// programs key, table and hash types through the control queue
/// (`VIRTIO_NET_CTRL_MQ_RSS_CONFIG`, virtio 1.2 §5.1.6.5.7.1), and QEMU steers each UDP flow to
/// the queue its Toeplitz hash selects, as on igb.
pub(crate) fn rss_four_queues(ctx: &mut Ctx) -> Outcome {
    let (a, b) = nics(ctx)?;
    let queues = b.capabilities().rx_queues;
    if queues < 4 {
        return Err(format!(
            "B offers {queues} receive queues; QEMU's virtio-net on a 4-queue tap offers 4"
        ));
    }
    crate::nic::rss_four_queues_on(a, b, false)
}

/// `sep-4-rss-rx-contexts` on the virtio-net pair: four receive contexts fed by QEMU's
/// software RSS (`virtio_net_process_rss`), programmed through the control queue.
pub(crate) fn sep_rss_contexts(ctx: &mut Ctx) -> Outcome {
    let (a, b) = nics(ctx)?;
    crate::sep::four_on(a, b, true)
}

/// Core's endpoint workload (as `core/tests/ep_nics.rs` runs it on the emulated NICs) on the
/// virtio-net pair.
pub(crate) fn ep_workload(ctx: &mut Ctx) -> Outcome {
    let (a, b) = nics(ctx)?;
    crate::workload::run(a, b)
}

/// The transmit buffer crossing a 4 KiB page that QEMU's igb drops (`qemu-tx-page-crossing`),
/// on virtio-net: QEMU's `virtqueue_map_desc` maps a buffer piece by piece, one
/// `dma_memory_map` per contiguous run, so both crossings — inside a huge page and between two
/// scattered heap pages — are sent intact.
pub(crate) fn tx_page_crossing(ctx: &mut Ctx) -> Outcome {
    let (a, b) = nics(ctx)?;
    let c = crate::dma::page_crossing_on(a, b, a.platform(), b.platform())?;
    if (c.in_huge, c.across) != ((true, true), (true, true)) {
        return Err(format!(
            "(token Ok, received): inside a huge page {:?}, across frames {:#x}|{:#x} {:?}; \
             expected both (true, true)",
            c.in_huge, c.frames.0, c.frames.1, c.across
        ));
    }
    Ok(format!(
        "a 200-byte transmit buffer crossing a 4 KiB boundary is sent intact both inside a huge \
         page and across heap pages at frames {:#x}|{:#x} (not adjacent): virtio maps a buffer \
         piece by piece, unlike QEMU's igb",
        c.frames.0, c.frames.1
    ))
}

/// A transmit buffer at an IOVA that is no longer mapped (as `iommu-blocks-unmapped-tx` on
/// igb): proves virtio-net's DMA goes through the vIOMMU (`ACCESS_PLATFORM`). QEMU 10 does what
/// it does for igb: `virtqueue_map_desc` → `dma_memory_map` finds no translation, the vIOMMU
/// logs a DMAR read fault, and `address_space_map` serves the unassigned memory from a
/// zero-filled bounce buffer — the frame goes out as 200 zero bytes (which the bridge between
/// the virtio pair drops: its source address is all zeros), the buffer is returned in the used
/// ring as usual, and the device is not marked `DEVICE_NEEDS_RESET`. The emulated
/// device is stricter (`virtio_error` on a refused buffer; docs/qemu-tests.md).
pub(crate) fn iommu_blocks_unmapped_tx(ctx: &mut Ctx) -> Outcome {
    use ringfab_hal::RxMode;
    let (a, b) = nics(ctx)?;
    b.set_rx_mode(RxMode::PROMISCUOUS)
        .map_err(|e| format!("promiscuous mode on B: {e}"))?;
    let p = crate::iommu::probe(a, b, a.platform(), b.platform(), 0);
    let restored = b.set_rx_mode(RxMode::default());
    let p = p?;
    restored.map_err(|e| format!("restoring B's receive mode: {e}"))?;
    let bdf = ctx.virtio_bdfs.as_ref().map_or("", |b| b[0].as_str());
    if p.leaked() {
        return Err(format!(
            "the unmapped memory's contents reached the wire: {}",
            p.context()
        ));
    }
    let fault = p.fault_of(bdf).ok_or_else(|| {
        format!(
            "no DMAR read fault of {bdf} at {:#x} logged: {}",
            p.gone,
            p.context()
        )
    })?;
    let tokens: Vec<(u64, bool)> = p
        .sent
        .iter()
        .map(|c| (c.token.0, c.status.is_ok()))
        .collect();
    // QEMU sends the unmapped buffer as zeros, but the zeros never reach B here: the pair's
    // wire is a Linux bridge, which drops a frame whose source address is not a valid unicast
    // one (all zeros). What must hold is what the IOMMU promises: nothing of the secret on the
    // wire, the frames around it intact.
    let frames: Vec<&[u8]> = p.received.iter().map(|(_, f)| f.as_slice()).collect();
    if tokens != [(1, true), (2, true), (3, true)]
        || frames != [p.good.as_slice(), p.after.as_slice()]
        || p.received.iter().any(|(s, _)| s.is_err())
        || a.needs_reset()
    {
        return Err(format!(
            "expected tokens 1, 2, 3 Ok, at B the good frame and the frame after (the bridge \
             drops QEMU's all-zero frame), and no DEVICE_NEEDS_RESET ({}): {}",
            a.needs_reset(),
            p.context()
        ));
    }
    Ok(format!(
        "IOVA {:#x} unmapped: the kernel logged '{}'; QEMU's virtio-net returned the buffer \
         without error and did not ask for a reset, nothing of the secret reached B (the bridge \
         drops the all-zero frame QEMU sends in its place); the frames before and after it \
         arrived intact",
        p.gone,
        fault.trim_start_matches("DMAR: "),
    ))
}
