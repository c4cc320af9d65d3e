//! The process's NICs: each entry of `FI_RINGFAB_NICS` is opened once, the first time
//! `fi_getinfo` or `fi_domain` names it, and stays open for the life of the process, so that
//! what `fi_getinfo` measured is the NIC a domain then drives (the same MAC, the same device).
//!
//! An emulated NIC joins the emulated wire's hub (`FI_RINGFAB_HUB`, `params::hub`)
//! while a domain is open on it, and leaves it when the last domain closes (or the provider is
//! unloaded), so that two processes with emulated NICs meet on one wire with no configuration,
//! and `fi_info`, which opens no domain, never joins it. docs/architecture.md, "The emulated
//! wire across processes", says how the hub works.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use ringfab_emu::{EmuE1000e, EmuIgb, EmuVirtioNet, ModelConfig, VirtioNetModelConfig, Wire};
use ringfab_nics::AnyNic;

use crate::nic::{Description, EmuKind, NicSpec, Wanted};
use crate::platform::ProvPlatform;

/// The NIC type every domain of the provider drives: an emulated NIC or one bound to
/// vfio-pci, under the driver its PCI ID calls for (`platform.rs` says why the choice is made
/// in the platform).
pub type ProvNic = AnyNic<ProvPlatform>;

/// The emulated device behind an emulated NIC, kept to plug it into a wire.
enum EmuDev {
    Igb(EmuIgb),
    E1000e(EmuE1000e),
    VirtioNet(EmuVirtioNet),
}

impl EmuDev {
    fn connect(&self, wire: &Wire) {
        match self {
            EmuDev::Igb(d) => d.connect(wire),
            EmuDev::E1000e(d) => d.connect(wire),
            EmuDev::VirtioNet(d) => d.connect(wire),
        }
    }
}

/// One NIC of the table.
pub struct Opened {
    /// The entry that named it.
    pub spec: NicSpec,
    /// Its position in `FI_RINGFAB_NICS` when it was opened (an emulated NIC's MAC holds it).
    pub index: usize,
    /// The NIC under its driver.
    pub nic: ProvNic,
    /// The device model behind an emulated NIC (to plug into the hub's wire); none for a
    /// PCI function bound to vfio-pci, which has a real wire.
    emu: Option<EmuDev>,
    state: Mutex<State>,
}

/// What changes while the NIC is in use.
#[derive(Default)]
struct State {
    /// Domains open on the NIC.
    domains: usize,
    /// The hub's wire, while a domain is open on an emulated NIC.
    wire: Option<Wire>,
    /// Endpoints measured so far, by what they were asked for: a NIC with a domain open
    /// cannot be measured again (its queue pair is taken), so `fi_getinfo` answers from here.
    measured: HashMap<Wanted, Description>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // The table holds plain data; a panic while it was held leaves it consistent.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Every NIC opened so far. Entries are leaked on purpose: domains and the buffers of their
/// endpoints borrow the NIC for as long as the process may call in.
static TABLE: Mutex<Vec<&'static Opened>> = Mutex::new(Vec::new());

/// The NIC `spec` names, opened now if it is not open yet (as the `index`th of the list).
///
/// # Errors
/// Why it cannot be opened, for a person to read.
pub fn open(spec: &NicSpec, index: usize) -> Result<&'static Opened, String> {
    let mut table = lock(&TABLE);
    if let Some(o) = table.iter().find(|o| o.spec == *spec) {
        return Ok(o);
    }
    let (platform, emu) = match spec {
        NicSpec::Emu(kind) => {
            let (dev, platform) = open_emu(*kind, index).map_err(|e| format!("{spec}: {e}"))?;
            (platform, Some(dev))
        }
        NicSpec::Vfio(bdf) => {
            let platform =
                ringfab_vfio::VfioPlatform::open(bdf).map_err(|e| format!("{spec}: {e}"))?;
            (ProvPlatform::Vfio(platform), None)
        }
    };
    let nic = AnyNic::open(platform).map_err(|e| format!("{spec}: {e}"))?;
    let opened: &'static Opened = Box::leak(Box::new(Opened {
        spec: spec.clone(),
        index,
        nic,
        emu,
        state: Mutex::new(State::default()),
    }));
    table.push(opened);
    Ok(opened)
}

/// Makes the emulated device `kind` with the `index`th MAC of the process.
fn open_emu(kind: EmuKind, index: usize) -> Result<(EmuDev, ProvPlatform), String> {
    let mac = crate::nic::emu_mac(index);
    let model = || {
        let mut c = ModelConfig::default();
        c.mac = mac;
        c
    };
    let dev = match kind {
        EmuKind::Igb => EmuDev::Igb(EmuIgb::new(model())),
        EmuKind::E1000e => EmuDev::E1000e(EmuE1000e::new(model())),
        EmuKind::VirtioNet => {
            let mut c = VirtioNetModelConfig::default();
            c.mac = mac;
            EmuDev::VirtioNet(EmuVirtioNet::new(c))
        }
    };
    // Interrupt vectors mirrored into eventfds, so that a CQ with FI_WAIT_FD has a descriptor
    // to give through FI_GETWAIT (fi_cq(3)), as under VFIO.
    let (platform, fds) = match &dev {
        EmuDev::Igb(d) => (d.platform(), d.use_eventfds()),
        EmuDev::E1000e(d) => (d.platform(), d.use_eventfds()),
        EmuDev::VirtioNet(d) => (d.platform(), d.use_eventfds()),
    };
    fds.map_err(|e| format!("eventfd: {e}"))?;
    Ok((dev, ProvPlatform::Emu(platform)))
}

impl Opened {
    /// What an endpoint made as `wanted` offers on this NIC: measured now, or as measured
    /// before if a domain holds the NIC.
    ///
    /// # Errors
    /// Why it could not be measured.
    pub fn describe(&self, wanted: Wanted) -> Result<Description, String> {
        let mut st = lock(&self.state);
        if let Some(d) = st.measured.get(&wanted) {
            return Ok(d.clone());
        }
        if st.domains > 0 {
            return Err(format!(
                "{}: in use by a domain, and not yet measured with these attributes",
                self.spec
            ));
        }
        let d = crate::nic::measure(&self.spec, &self.nic, wanted)?;
        st.measured.insert(wanted, d.clone());
        Ok(d)
    }

    /// Starts a domain on the NIC: the first one on an emulated NIC joins the emulated wire's
    /// hub at `hub`. Returns the NIC a domain drives.
    ///
    /// # Errors
    /// Why the hub could not be joined.
    pub fn start_domain(&self, hub: &std::path::Path) -> Result<&ProvNic, String> {
        let mut st = lock(&self.state);
        if let (Some(dev), None) = (&self.emu, &st.wire) {
            let wire = Wire::join(hub).map_err(|e| format!("{}: {e}", self.spec))?;
            dev.connect(&wire);
            st.wire = Some(wire);
        }
        st.domains += 1;
        Ok(&self.nic)
    }

    /// Ends a domain started by [`start_domain`](Self::start_domain): the last one leaves the
    /// hub.
    pub fn end_domain(&self) {
        let mut st = lock(&self.state);
        st.domains = st.domains.saturating_sub(1);
        if st.domains == 0 {
            if let Some(wire) = st.wire.take() {
                wire.leave();
            }
        }
    }

    /// Waits (up to `timeout`) until the hub's wire knows another member: a process about to
    /// send to a peer that has just joined calls this, since frames sent before a member is
    /// known do not reach it (`Wire::wait_for_hub_peers`). True at once for a NIC on no hub.
    pub fn wait_for_peer(&self, timeout: std::time::Duration) -> bool {
        let wire = lock(&self.state).wire.clone();
        wire.is_none_or(|w| w.wait_for_hub_peers(1, timeout))
    }
}

/// Leaves every hub (the provider is being unloaded; its domains are gone with the process).
pub fn leave_hubs() {
    for o in lock(&TABLE).iter() {
        if let Some(wire) = lock(&o.state).wire.take() {
            wire.leave();
        }
    }
}
