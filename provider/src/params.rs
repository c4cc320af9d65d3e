//! The provider's parameters, declared with `fi_param_define` so that `fi_info -e` lists them
//! and read from the environment with `fi_param_get` (fi_provider(3), `fi_param_define` and
//! `fi_param_get`):
//! libfabric spells them `FI_RINGFAB_<NAME>`: `FI_RINGFAB_NICS` (which NICs),
//! `FI_RINGFAB_HUB` (where emulated NICs of several processes meet) and `FI_RINGFAB_IPV4`
//! (the NICs' IPv4 configurations, for `FI_SOCKADDR_IN` endpoints: [`crate::ipv4`]).

use core::ffi::{c_char, CStr};

use crate::nic::NicSpec;
use crate::sys;

/// `FI_RINGFAB_NICS`: the NICs the provider offers, one domain each.
const NICS: &CStr = c"nics";

/// What `FI_RINGFAB_NICS` means when it is not set: the three emulated NICs, so that
/// `fi_info -p ringfab` works on any machine.
pub(crate) const DEFAULT_NICS: &str = "emu:igb,emu:e1000e,emu:virtio-net";

/// `FI_RINGFAB_HUB`: the directory where emulated NICs of several processes meet.
const HUB: &CStr = c"hub";

/// `FI_RINGFAB_IPV4`: the IPv4 configuration of each NIC that offers `FI_SOCKADDR_IN`.
const IPV4: &CStr = c"ipv4";

/// Declares the parameters (called once, from `fi_prov_ini`).
pub(crate) fn define() {
    let nics = format!(
        "Comma-separated NICs to offer, one domain each: emu:igb, emu:e1000e, emu:virtio-net \
         (an emulated Intel 82576, Intel 82574 or virtio-net device in this process) or a PCI \
         address bound to vfio-pci (0000:03:00.0). (default: {DEFAULT_NICS})"
    );
    let hub = format!(
        "Directory of the emulated wire's hub: emulated NICs of every process that names the \
         same directory are on one wire while a domain is open on them. (default: {})",
        default_hub().display()
    );
    let ipv4 = "Comma-separated IPv4 configurations of NICs, each <nic>=<address>/<prefix \
                length>[/<gateway>] with <nic> as in FI_RINGFAB_NICS (emu:igb=192.0.2.1/24, \
                0000:03:00.0=10.0.0.2/24/10.0.0.1); numeric addresses only. A NIC with one \
                offers FI_SOCKADDR_IN (plain UDP) endpoints. (default: none)";
    declare(NICS, &nics);
    declare(HUB, &hub);
    declare(IPV4, ipv4);
}

fn declare(name: &CStr, help: &str) {
    let help = std::ffi::CString::new(help).unwrap_or_default();
    const FMT: &CStr = c"%s";
    // SAFETY: the provider structure lives as long as the library; every string is
    // NUL-terminated and alive for the call (libfabric copies what it keeps); the format takes
    // the one string given.
    let ret = unsafe {
        sys::fi_param_define(
            crate::provider(),
            name.as_ptr(),
            sys::FI_PARAM_STRING,
            FMT.as_ptr(),
            help.as_ptr(),
        )
    };
    if ret != 0 {
        crate::log::warn(&format!("declaring parameter {name:?} failed ({ret})"));
    }
}

/// A string parameter's value, if it is set and not blank.
fn get(name: &CStr) -> Option<String> {
    let mut value: *mut c_char = core::ptr::null_mut();
    // SAFETY: a string parameter is returned as a `char *` into the environment, which the
    // pointer given has room for; the provider structure lives as long as the library.
    let ret = unsafe {
        sys::fi_param_get(
            crate::provider(),
            name.as_ptr(),
            (&mut value as *mut *mut c_char).cast(),
        )
    };
    // SAFETY: on success libfabric points `value` at the variable's NUL-terminated value in
    // the environment, which nothing changes while this runs.
    let set = (ret == 0)
        .then(|| unsafe { crate::ffi::str_at(value) })
        .flatten();
    set.filter(|s| !s.trim().is_empty()).map(str::to_owned)
}

/// The NICs to offer: `FI_RINGFAB_NICS` parsed, or [`DEFAULT_NICS`] when it is unset or
/// empty. Entries that do not parse are logged and left out.
pub(crate) fn nics() -> Vec<NicSpec> {
    let list = get(NICS).unwrap_or_else(|| DEFAULT_NICS.to_owned());
    parse_list(&list, |bad| {
        crate::log::warn(&format!("FI_RINGFAB_NICS: {bad}; left out"));
    })
}

/// The IPv4 configuration `FI_RINGFAB_IPV4` gives the NIC `spec`, if any. Entries that do
/// not parse are logged (naming the entry) and left out.
pub(crate) fn ipv4_of(spec: &NicSpec) -> Option<ringfab::ip::Ipv4Config> {
    let list = get(IPV4)?;
    let configs = crate::ipv4::parse_list(&list, |bad| {
        crate::log::warn(&format!("FI_RINGFAB_IPV4: {bad}; left out"));
    });
    configs
        .into_iter()
        .find_map(|(s, c)| (s == *spec).then_some(c))
}

/// The hub directory: `FI_RINGFAB_HUB`, or [`default_hub`].
pub(crate) fn hub() -> std::path::PathBuf {
    get(HUB).map_or_else(default_hub, Into::into)
}

/// A directory of the user's own under the system's temporary directory, so that two
/// processes of one user meet with no configuration and other users' processes do not.
pub(crate) fn default_hub() -> std::path::PathBuf {
    // SAFETY: getuid(2) cannot fail and touches no memory of ours.
    let uid = unsafe { libc::getuid() };
    std::env::temp_dir().join(format!("ringfab-hub-{uid}"))
}

/// The entries of a `FI_RINGFAB_NICS` value, each error given to `bad`; a NIC named twice is
/// offered once.
pub(crate) fn parse_list(list: &str, mut bad: impl FnMut(&str)) -> Vec<NicSpec> {
    let mut out: Vec<NicSpec> = Vec::new();
    for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        match NicSpec::parse(item) {
            Ok(spec) if out.contains(&spec) => bad(&format!("{item} is named twice")),
            Ok(spec) => out.push(spec),
            Err(e) => bad(&format!("{item}: {e}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nic::EmuKind;

    #[test]
    fn default_list_is_the_three_emulated_nics() {
        let nics = parse_list(DEFAULT_NICS, |e| panic!("{e}"));
        assert_eq!(
            nics,
            [
                NicSpec::Emu(EmuKind::Igb),
                NicSpec::Emu(EmuKind::E1000e),
                NicSpec::Emu(EmuKind::VirtioNet)
            ]
        );
    }

    #[test]
    fn bad_and_repeated_entries_are_reported_and_left_out() {
        let mut errors = Vec::new();
        let nics = parse_list(" emu:igb, emu:foo,,0000:03:00.1,emu:igb, 3:00", |e| {
            errors.push(e.to_string())
        });
        assert_eq!(
            nics,
            [
                NicSpec::Emu(EmuKind::Igb),
                NicSpec::Vfio("0000:03:00.1".into())
            ]
        );
        assert_eq!(errors.len(), 3, "{errors:?}");
    }
}
