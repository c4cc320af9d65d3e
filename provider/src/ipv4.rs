//! Plain IPv4/UDP (`FI_SOCKADDR_IN`, docs/ip.md) as the provider offers it: the NICs' IPv4
//! configurations from `FI_RINGFAB_IPV4`, the addresses an application names with
//! `fi_getinfo`'s and `fi_av_insertsvc`'s `node` and `service`, the text `fi_av_straddr`
//! prints, and the clock a domain with a configuration needs (core's ARP measures its retries
//! and its cache's expiry with it).
//!
//! `FI_RINGFAB_IPV4` is a comma-separated list of `<nic>=<address>/<prefix length>[/<gateway>]`
//! entries, `<nic>` spelt as in `FI_RINGFAB_NICS` (`emu:igb=192.0.2.1/24`,
//! `0000:03:00.0=10.0.0.2/24/10.0.0.1`). Only numeric addresses: the provider resolves no
//! names.

use std::net::Ipv4Addr;

use ringfab::ip::{Ipv4Config, SockAddrIn};

use crate::nic::NicSpec;

/// One entry of `FI_RINGFAB_IPV4`: the NIC it names and its configuration.
///
/// # Errors
/// What is wrong with it, for a person to read (the caller names the entry).
pub fn parse_entry(entry: &str) -> Result<(NicSpec, Ipv4Config), String> {
    let Some((nic, config)) = entry.split_once('=') else {
        return Err("not <nic>=<address>/<prefix length>[/<gateway>]".into());
    };
    let spec = NicSpec::parse(nic.trim())?;
    let mut parts = config.trim().split('/');
    let addr = parts.next().unwrap_or_default();
    let addr: Ipv4Addr = addr
        .parse()
        .map_err(|_| format!("'{addr}' is not a numeric IPv4 address"))?;
    let prefix_len = match parts.next() {
        None => return Err("no prefix length (address/prefix, as `ip addr add` takes)".into()),
        Some(p) => p
            .parse::<u8>()
            .ok()
            .filter(|&n| n <= 32)
            .ok_or_else(|| format!("'{p}' is not a prefix length (0 to 32)"))?,
    };
    let gateway = match parts.next() {
        None => None,
        Some(g) => Some(
            g.parse::<Ipv4Addr>()
                .map_err(|_| format!("gateway '{g}' is not a numeric IPv4 address"))?,
        ),
    };
    if parts.next().is_some() {
        return Err("more than address/prefix/gateway".into());
    }
    let config = Ipv4Config {
        addr,
        prefix_len,
        gateway,
    };
    // Core's rules (RFC 1122 §3.2.1.3): an address a host may have, a gateway on the subnet.
    config.validate().map_err(|_| {
        format!(
            "{addr}/{prefix_len} is not an address a host may have on that subnet, or the \
             gateway is off it (RFC 1122 §3.2.1.3)"
        )
    })?;
    Ok((spec, config))
}

/// The entries of a `FI_RINGFAB_IPV4` value, each error given to `bad` with the entry it is
/// about; a NIC named twice keeps its first configuration.
pub fn parse_list(list: &str, mut bad: impl FnMut(&str)) -> Vec<(NicSpec, Ipv4Config)> {
    let mut out: Vec<(NicSpec, Ipv4Config)> = Vec::new();
    for entry in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        match parse_entry(entry) {
            Ok((spec, _)) if out.iter().any(|(s, _)| *s == spec) => {
                bad(&format!("'{entry}': {spec} is named twice"));
            }
            Ok(found) => out.push(found),
            Err(e) => bad(&format!("'{entry}': {e}")),
        }
    }
    out
}

/// The address `node` and `service` name, as `fi_getinfo` and `fi_av_insertsvc` take them
/// for `FI_SOCKADDR_IN`: a numeric IPv4 address (no host names: nothing is resolved) and a
/// UDP port number (none: 0, a free port for a local address).
pub fn parse_node(node: &str, service: Option<&str>) -> Option<SockAddrIn> {
    let addr: Ipv4Addr = node.parse().ok()?;
    let port = match service {
        None => 0,
        Some(s) => s.parse().ok()?,
    };
    Some(SockAddrIn::new(addr, port))
}

/// The text `fi_av_straddr` gives for a `sockaddr_in`: libfabric's own form for the format
/// (`fi_sockaddr_in://192.0.2.1:49152`), which `FI_ADDR_STR` parsers read back.
pub fn straddr(a: SockAddrIn) -> String {
    format!("fi_sockaddr_in://{}:{}", a.addr, a.port)
}

/// Whether `bytes` is a `struct sockaddr_in` (16 bytes, `AF_INET`).
pub fn is_sockaddr_in(bytes: &[u8]) -> bool {
    SockAddrIn::from_bytes(bytes).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nic::EmuKind;

    #[test]
    fn an_entry_is_a_nic_an_address_a_prefix_and_an_optional_gateway() {
        let (spec, c) = parse_entry("emu:igb=192.0.2.1/24").unwrap();
        assert_eq!(spec, NicSpec::Emu(EmuKind::Igb));
        assert_eq!(c.addr, Ipv4Addr::new(192, 0, 2, 1));
        assert_eq!(c.prefix_len, 24);
        assert_eq!(c.gateway, None);
        let (spec, c) = parse_entry(" 03:00.0 = 10.0.0.2/8/10.0.0.1 ").unwrap();
        assert_eq!(spec, NicSpec::Vfio("0000:03:00.0".into()));
        assert_eq!(c.gateway, Some(Ipv4Addr::new(10, 0, 0, 1)));
    }

    #[test]
    fn bad_entries_say_what_is_wrong() {
        let cases = [
            ("emu:igb", "not <nic>="),
            ("emu:foo=192.0.2.1/24", "no emulated NIC"),
            ("emu:igb=192.0.2.1", "no prefix length"),
            ("emu:igb=192.0.2/24", "not a numeric IPv4 address"),
            ("emu:igb=host.example/24", "not a numeric IPv4 address"),
            ("emu:igb=192.0.2.1/33", "not a prefix length"),
            ("emu:igb=192.0.2.1/x", "not a prefix length"),
            ("emu:igb=192.0.2.1/24/gw", "gateway 'gw'"),
            ("emu:igb=192.0.2.1/24/192.0.2.254/1", "more than"),
            // RFC 1122 §3.2.1.3: loopback, the subnet's broadcast, a gateway off the subnet.
            ("emu:igb=127.0.0.1/8", "RFC 1122"),
            ("emu:igb=192.0.2.255/24", "RFC 1122"),
            ("emu:igb=192.0.2.1/24/198.51.100.1", "RFC 1122"),
        ];
        for (entry, why) in cases {
            let err = parse_entry(entry).unwrap_err();
            assert!(err.contains(why), "{entry}: {err}");
        }
    }

    #[test]
    fn a_list_keeps_good_entries_and_names_each_bad_one() {
        let mut errors = Vec::new();
        let list = "emu:igb=192.0.2.1/24,, emu:e1000e=192.0.2.300/24,emu:igb=192.0.2.9/24, \
                    emu:virtio-net=192.0.2.3/24/192.0.2.254";
        let got = parse_list(list, |e| errors.push(e.to_owned()));
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(got[0].0, NicSpec::Emu(EmuKind::Igb));
        assert_eq!(
            got[0].1.addr,
            Ipv4Addr::new(192, 0, 2, 1),
            "the first one stays"
        );
        assert_eq!(got[1].0, NicSpec::Emu(EmuKind::VirtioNet));
        assert_eq!(errors.len(), 2, "{errors:?}");
        assert!(
            errors[0].contains("'emu:e1000e=192.0.2.300/24'"),
            "{errors:?}"
        );
        assert!(errors[1].contains("named twice"), "{errors:?}");
    }

    #[test]
    fn node_and_service_are_a_numeric_address_and_port() {
        let a = parse_node("192.0.2.7", Some("4791")).unwrap();
        assert_eq!(a, SockAddrIn::new(Ipv4Addr::new(192, 0, 2, 7), 4791));
        assert_eq!(parse_node("192.0.2.7", None).unwrap().port, 0);
        assert!(
            parse_node("localhost", None).is_none(),
            "no name resolution"
        );
        assert!(parse_node("02:52:00:00:00:01", None).is_none());
        assert!(parse_node("192.0.2.7", Some("http")).is_none());
        assert!(parse_node("192.0.2.7", Some("65536")).is_none());
    }

    #[test]
    fn straddr_is_libfabrics_form() {
        let a = SockAddrIn::new(Ipv4Addr::new(192, 0, 2, 1), 49152);
        assert_eq!(straddr(a), "fi_sockaddr_in://192.0.2.1:49152");
        assert!(is_sockaddr_in(&a.to_bytes()));
        assert!(!is_sockaddr_in(&a.to_bytes()[..8]));
    }
}
