//! The NICs the provider offers — one libfabric domain each — and what each really offers,
//! measured on an endpoint opened on it (as `examples/info` does), never copied from a table.

use std::fmt;

use ringfab::av::{AddrFormat, AvAttr};
use ringfab::cq::CqAttr;
use ringfab::domain::Domain;
use ringfab::ep::EpAttr;
use ringfab::flags::BindFlags;
use ringfab::hal::{Capabilities, MacAddr, Nic};
use ringfab::info::EpInfo;
use ringfab::ip::Ipv4Config;
use ringfab::proto::Encap;
use ringfab::Capacities;
use ringfab_nics::AnyNic;

/// The emulated device models (`ringfab-emu`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum EmuKind {
    /// An Intel 82576 (`igb` driver).
    Igb,
    /// An Intel 82574 (`e1000e` driver).
    E1000e,
    /// A virtio-net device (`virtio-net` driver).
    VirtioNet,
}

impl EmuKind {
    /// The name `FI_RINGFAB_NICS` uses after `emu:`.
    pub const fn name(self) -> &'static str {
        match self {
            EmuKind::Igb => "igb",
            EmuKind::E1000e => "e1000e",
            EmuKind::VirtioNet => "virtio-net",
        }
    }
}

/// One entry of `FI_RINGFAB_NICS`.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum NicSpec {
    /// An emulated NIC of this process: `emu:igb`, `emu:e1000e`, `emu:virtio-net`.
    Emu(EmuKind),
    /// A PCI function bound to vfio-pci, by its address in the full form (`0000:03:00.0`).
    Vfio(String),
}

impl NicSpec {
    /// Parses one entry.
    ///
    /// # Errors
    /// What is wrong with it, for a person to read.
    pub fn parse(s: &str) -> Result<NicSpec, String> {
        if let Some(model) = s.strip_prefix("emu:") {
            return [EmuKind::Igb, EmuKind::E1000e, EmuKind::VirtioNet]
                .into_iter()
                .find(|k| k.name() == model)
                .map(NicSpec::Emu)
                .ok_or_else(|| format!("no emulated NIC '{model}' (igb, e1000e, virtio-net)"));
        }
        ringfab_vfio::Bdf::parse(s)
            .map(|bdf| NicSpec::Vfio(bdf.to_string()))
            .map_err(|e| e.to_string())
    }
}

/// The domain name (`fi_domain_attr::name`): the entry as `FI_RINGFAB_NICS` spells it,
/// a PCI address in its full form.
impl fmt::Display for NicSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NicSpec::Emu(k) => write!(f, "emu:{}", k.name()),
            NicSpec::Vfio(bdf) => f.write_str(bdf),
        }
    }
}

/// What the endpoint to be described is asked for (from the hints).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct Wanted {
    /// `tx_attr->iov_limit`: buffers of a gather send (0: the default, 1).
    pub tx_iov_limit: usize,
    /// `FI_MULTI_RECV`.
    pub multi_recv: bool,
    /// `FI_SOURCE_ERR`.
    pub source_err: bool,
    /// A plain-UDP endpoint (`FI_SOCKADDR_IN`) in a domain with this configuration; `None`:
    /// ringfab's own address format.
    pub plain_udp: Option<Plain>,
}

/// The IPv4 configuration a plain-UDP endpoint is measured in (a key of the measurements,
/// hence `Hash`, which core's [`Ipv4Config`] does not derive).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Plain(pub Ipv4Config);

impl std::hash::Hash for Plain {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        (self.0.addr, self.0.prefix_len, self.0.gateway).hash(h);
    }
}

/// Messages one `FI_MULTI_RECV` buffer may take when the capability is asked for
/// (`EpAttr::multi_recv_msgs`): a 64 KiB buffer of 2 KiB receive slots. Core makes the
/// receive `size` count receives of this many descriptors.
pub const MULTI_RECV_MSGS: u32 = 32;

/// The ring depth of every hardware queue of a domain (`Domain`'s `D`): what `tx_attr->size`
/// and `rx_attr->size` come from.
pub const RING_DEPTH: usize = 256;

/// The tables of every domain the provider opens (and measures): room for a few endpoints,
/// each with the provider's own buffer registration beside the application's.
pub const CAPACITIES: Capacities = Capacities {
    queues: 8,
    cqs: 8,
    cq_size: 1024,
    mrs: 16,
    avs: 4,
    av_entries: 256,
};

/// A NIC as an endpoint on it measured it.
#[derive(Clone, Debug)]
pub struct Description {
    /// Which NIC.
    pub spec: NicSpec,
    /// The device, as a person names it (`Intel 82576, igb driver`).
    pub device: String,
    /// What the driver reports.
    pub caps: Capabilities,
    /// The endpoint's attributes.
    pub ep: EpInfo,
    /// The endpoint's address (`fi_getname`): the NIC's MAC and its receive queue (8 bytes),
    /// or on plain UDP its `struct sockaddr_in` (16 bytes; the port the one it was given).
    pub addr: Vec<u8>,
    /// Where the payload starts in a frame: the header in front of it (`Endpoint::
    /// payload_offset`), which the `FI_MSG_PREFIX` prefix holds.
    pub header_len: usize,
    /// The largest CQ a domain holds.
    pub max_cq_size: usize,
    /// The domain's tables.
    pub capacities: Capacities,
    /// Interrupt vectors (one per CQ that waits).
    pub irq_vectors: u16,
}

/// The MAC address of the `index`th emulated NIC of this process: locally administered
/// (`02:…`), the process id in the middle so that two processes' NICs on one wire differ.
pub fn emu_mac(index: usize) -> MacAddr {
    let pid = std::process::id();
    MacAddr([
        0x02,
        0x52, // 'R'
        (pid >> 16) as u8,
        (pid >> 8) as u8,
        pid as u8,
        index as u8,
    ])
}

/// Describes an endpoint made as `wanted` says on the NIC `spec` (the `index`th of the
/// list), opening the NIC into the process's table ([`crate::table`]) if it is not open yet.
///
/// # Errors
/// Why the NIC could not be opened or the endpoint not made, for a person to read.
pub fn describe(spec: &NicSpec, index: usize, wanted: Wanted) -> Result<Description, String> {
    crate::table::open(spec, index)?.describe(wanted)
}

/// Opens an endpoint as `wanted` on `nic` and reads its attributes.
pub(crate) fn measure<P: ringfab::hal::Platform>(
    spec: &NicSpec,
    nic: &AnyNic<P>,
    wanted: Wanted,
) -> Result<Description, String> {
    let capacities = CAPACITIES;
    let mut domain: Domain<'_, _, RING_DEPTH> = Domain::with_capacities(nic, &capacities);
    if let Some(Plain(config)) = wanted.plain_udp {
        domain = domain.with_clock(&crate::clock::CLOCK);
        domain
            .set_ipv4(config)
            .map_err(|e| format!("{spec}: giving the domain its IPv4 configuration: {e}"))?;
    }
    let plain = wanted.plain_udp.is_some();
    let attr = EpAttr {
        encap: if plain {
            Encap::PlainUdp
        } else {
            Encap::Ethernet
        },
        tx_iov_limit: wanted.tx_iov_limit.max(1),
        multi_recv_msgs: if wanted.multi_recv {
            MULTI_RECV_MSGS
        } else {
            0
        },
        source_err: wanted.source_err,
        ..EpAttr::default()
    };
    let cq = domain
        .open_cq::<ringfab::entry::Msg>(&CqAttr::default())
        .map_err(|e| format!("{spec}: opening a CQ: {e}"))?;
    let av = domain
        .open_av(&AvAttr {
            count: 1,
            format: if plain {
                AddrFormat::SockaddrIn
            } else {
                AddrFormat::Ringfab
            },
            ..AvAttr::default()
        })
        .map_err(|e| format!("{spec}: opening an AV: {e}"))?;
    let mut ep = domain
        .endpoint(&attr)
        .map_err(|e| format!("{spec}: creating an endpoint: {e}"))?;
    ep.bind_cq(&domain, &cq, BindFlags::TRANSMIT | BindFlags::RECV)
        .and_then(|()| ep.bind_av(&domain, &av))
        .and_then(|()| ep.enable(&domain))
        .map_err(|e| format!("{spec}: enabling an endpoint: {e}"))?;
    let described = Description {
        spec: spec.clone(),
        device: format!("{}, {} driver", nic.driver().device(), nic.driver()),
        caps: nic.capabilities(),
        ep: ep.info(&domain),
        addr: match ep.sockaddr(&domain) {
            // Bound to a free port for the measurement: an endpoint made from the info binds
            // the port its src_addr names, or a free one for 0.
            Some(a) => ringfab::ip::SockAddrIn::new(a.addr, 0).to_bytes().to_vec(),
            None => ep.name().to_bytes().to_vec(),
        },
        header_len: ep.payload_offset(),
        max_cq_size: domain.max_cq_size(),
        capacities,
        irq_vectors: nic.irq_vectors(),
    };
    let _ = ep.close(&domain);
    Ok(described)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_and_print_as_domain_names() {
        for s in ["emu:igb", "emu:e1000e", "emu:virtio-net", "0000:03:00.1"] {
            assert_eq!(NicSpec::parse(s).unwrap().to_string(), s);
        }
        assert_eq!(
            NicSpec::parse("03:00.1").unwrap().to_string(),
            "0000:03:00.1"
        );
        assert!(NicSpec::parse("emu:e1000").is_err());
        assert!(NicSpec::parse("eth0").is_err());
    }

    #[test]
    fn every_emulated_nic_is_described_from_a_real_endpoint() {
        for (i, kind) in [EmuKind::Igb, EmuKind::E1000e, EmuKind::VirtioNet]
            .into_iter()
            .enumerate()
        {
            let d = describe(&NicSpec::Emu(kind), i, Wanted::default()).unwrap();
            assert_eq!(&d.addr[..6], &emu_mac(i).0);
            assert!(d.ep.tx.size > 0 && d.ep.rx.size > 0, "{d:?}");
            assert_eq!(d.ep.tx.iov_limit, 1);
        }
    }

    #[test]
    fn a_plain_udp_endpoint_is_measured_in_a_domain_with_the_configuration() {
        let config = Ipv4Config {
            addr: std::net::Ipv4Addr::new(192, 0, 2, 1),
            prefix_len: 24,
            gateway: None,
        };
        let spec = NicSpec::Emu(EmuKind::Igb);
        let native = describe(&spec, 0, Wanted::default()).unwrap();
        let wanted = Wanted {
            source_err: true,
            plain_udp: Some(Plain(config)),
            ..Wanted::default()
        };
        let d = describe(&spec, 0, wanted).unwrap();
        let name = ringfab::ip::SockAddrIn::from_bytes(&d.addr).unwrap();
        assert_eq!((name.addr, name.port), (config.addr, 0));
        // docs/ip.md, "Sizes": max_msg_size = MTU - 28 (the MTU the NIC's largest frame less
        // the 14-byte Ethernet header), at most what a 2 KiB receive buffer holds behind the
        // 42 bytes of headers.
        let mtu = d.caps.max_frame_len - 14;
        assert_eq!(d.ep.ep.max_msg_size, (mtu - 28).min(2048 - 42));
        assert_eq!(d.header_len, 42, "Ethernet, IPv4 and UDP headers");
        assert_eq!(native.header_len, ringfab::proto::HEADER_LEN);
    }

    #[test]
    fn multi_recv_and_gather_change_what_is_measured() {
        let spec = NicSpec::Emu(EmuKind::Igb);
        let plain = describe(&spec, 0, Wanted::default()).unwrap();
        let asked = Wanted {
            tx_iov_limit: 2,
            multi_recv: true,
            source_err: true,
            plain_udp: None,
        };
        let d = describe(&spec, 0, asked).unwrap();
        assert_eq!(d.ep.tx.iov_limit, 2);
        assert!(d.ep.rx.size < plain.ep.rx.size, "{d:?}");
    }
}
