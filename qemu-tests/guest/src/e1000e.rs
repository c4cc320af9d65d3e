//! The e1000e driver through VFIO on QEMU's 82574 (two on a hub of their own): bind, bring-up,
//! frames both ways and an MSI-X wake-up, with the same checks as the igb tests.

use ringfab_e1000e::E1000e;
use ringfab_hal::{Nic as _, Platform as _};
use ringfab_vfio::VfioPlatform;

use crate::guest::{Ctx, Outcome};
use crate::nic::{bind_all, frames_between, msix_wakes_wait_on};

type Nic82574 = E1000e<VfioPlatform>;

fn nics(ctx: &Ctx) -> Result<(&Nic82574, &Nic82574), String> {
    match &ctx.e1000e {
        Some([a, b]) => Ok((a, b)),
        None => Err("the e1000e NICs are not open (e1000e-open failed or did not run)".into()),
    }
}

/// Binds both 82574 to vfio-pci, opens them through VFIO, brings them up with the e1000e
/// driver, and checks MAC (as QEMU set it) and link.
pub(crate) fn open(ctx: &mut Ctx) -> Outcome {
    let bdfs = ctx
        .e1000e_bdfs
        .clone()
        .ok_or("no ringfab.e1000e= on the kernel command line")?;
    let bound = bind_all(&bdfs, ringfab_e1000e::PCI_IDS, "an 82574")?;
    let mut detail = vec![bound];
    detail.extend(bring_up(ctx)?);
    Ok(detail.join("; "))
}

/// Opens both (bound) 82574 through VFIO and brings them up, checking MAC and link; what
/// `open` does after binding, and what `e1000e-pingpong` does to get them back.
pub(crate) fn bring_up(ctx: &mut Ctx) -> Result<Vec<String>, String> {
    let bdfs = ctx
        .e1000e_bdfs
        .clone()
        .ok_or("no ringfab.e1000e= on the kernel command line")?;
    let mut nics = Vec::new();
    let mut detail = Vec::new();
    for (i, bdf) in bdfs.iter().enumerate() {
        let p = VfioPlatform::open(bdf).map_err(|e| format!("opening {bdf}: {e}"))?;
        let (group, vectors) = (p.iommu_group(), p.irq_vectors());
        let nic = Nic82574::new(p).map_err(|e| format!("bringing up {bdf}: {e}"))?;
        let caps = nic.capabilities();
        if let Some(want) = ctx.e1000e_macs.as_ref().map(|m| &m[i]) {
            if caps.mac.to_string() != *want {
                return Err(format!(
                    "{bdf}: the driver read MAC {}, QEMU set {want}",
                    caps.mac
                ));
            }
        }
        let link = nic.link();
        if !link.up {
            return Err(format!("{bdf}: link down after bring-up: {link:?}"));
        }
        detail.push(format!(
            "{bdf}: group {group}, {vectors} MSI-X vectors, MAC {} (as set), {}/{} queues, \
             link up {} Mb/s",
            caps.mac, caps.tx_queues, caps.rx_queues, link.speed_mbps
        ));
        nics.push(nic);
    }
    let pair = <[Nic82574; 2]>::try_from(nics).map_err(|_| "not two NICs".to_owned())?;
    ctx.e1000e = Some(pair);
    Ok(detail)
}

/// 300 frames each way between the two 82574, checked as for igb.
pub(crate) fn frames_both_ways(ctx: &mut Ctx) -> Outcome {
    let (a, b) = nics(ctx)?;
    let there = frames_between(a, b)?;
    let back = frames_between(b, a)?;
    Ok(format!("A → B: {there}; B → A: {back}"))
}

/// An armed receive interrupt of the 82574 wakes a thread blocked on its eventfd; a disarmed
/// one does not.
pub(crate) fn msix_wakes_wait(ctx: &mut Ctx) -> Outcome {
    let (a, b) = nics(ctx)?;
    msix_wakes_wait_on(a, b)
}

/// Core's blocking read on the 82574 (`cq-sread-wakes-on-msix`): an `FI_WAIT_FD` CQ times
/// out with nothing, and a reader blocked in `sread` is woken by the receive interrupt on
/// its MSI-X vectors (IVAR routes each queue to one).
pub(crate) fn cq_sread_wakes_on_msix(ctx: &mut Ctx) -> Outcome {
    let (a, b) = nics(ctx)?;
    crate::wait::sread_wakes_on_msix_on(a, b)
}

/// A wait set over a receive CQ and a transmit CQ of the 82574 on two vectors
/// (`cq-wait-set-epoll`): timeout, receive interrupt, send-completion interrupt, signal.
pub(crate) fn cq_wait_set_epoll(ctx: &mut Ctx) -> Outcome {
    let (a, b) = nics(ctx)?;
    crate::wait::wait_set_over_two_vectors_on(a, b)
}

/// The driver-level receive flush on the 82574 (RCTL.EN cleared and read back).
pub(crate) fn rx_flush(ctx: &mut Ctx) -> Outcome {
    let (a, b) = nics(ctx)?;
    crate::nic::rx_flush_on(a, b)
}

/// Core's endpoint workload (`core/tests/ep_nics.rs`) on the 82574 pair.
pub(crate) fn ep_workload(ctx: &mut Ctx) -> Outcome {
    let (a, b) = nics(ctx)?;
    crate::workload::run(a, b)
}
