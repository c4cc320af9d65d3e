//! `fi_getinfo` (fi_getinfo(3)): one `fi_info` per NIC that can meet the hints, its
//! attributes measured on an endpoint opened on that NIC ([`crate::nic::describe`]).
//!
//! The hints are first copied out of C into `Hints`; the decision whether a NIC matches and
//! what it offers (`offer`) is plain Rust, tested without libfabric; only `fill` writes C.
//!
//! A NIC offers ringfab's own address format (`FI_FORMAT_UNSPEC`) and, when
//! `FI_RINGFAB_IPV4` gives it an IPv4 configuration, `FI_SOCKADDR_IN` (plain UDP,
//! [`crate::ipv4`]): `Format`, `Hints::formats`.

use core::ffi::{c_char, c_int};

use ringfab::av::EpAddr;
use ringfab::hal::MacAddr;
use ringfab::ip::SockAddrIn;

use crate::ffi::{self, errno};
use crate::nic::{Description, NicSpec, Plain, Wanted};
use crate::sys;

/// `FI_VERSION(major, minor)` (the header's macro).
pub(crate) const fn fi_version(major: u32, minor: u32) -> u32 {
    (major << 16) | minor
}

/// The fabric name of every ringfab NIC (`fi_fabric_attr::name`).
pub(crate) const FABRIC_NAME: &str = "ringfab";

const MSG: u64 = sys::FI_MSG;
const SEND: u64 = sys::FI_SEND;
const RECV: u64 = sys::FI_RECV;
const MULTI_RECV: u64 = sys::FI_MULTI_RECV;
const SOURCE: u64 = sys::FI_SOURCE;
const SOURCE_ERR: u64 = sys::FI_SOURCE_ERR;
const REMOTE_COMM: u64 = sys::FI_REMOTE_COMM;
const NAMED_RX_CTX: u64 = sys::FI_NAMED_RX_CTX;
/// Secondary capabilities ringfab can give when asked (fi_getinfo(3), "CAPABILITIES").
/// `FI_MULTI_RECV` only when asked: an endpoint made for multi-receive buffers counts a
/// receive as many descriptors (`nic::MULTI_RECV_MSGS`), which shrinks `rx_attr->size`.
/// `FI_NAMED_RX_CTX`: a scalable endpoint's receive contexts are reached by `fi_rx_addr`
/// (`crate::sep`; how many, `max_ep_rx_ctx` says).
const SECONDARY: u64 = SOURCE | SOURCE_ERR | REMOTE_COMM | MULTI_RECV | NAMED_RX_CTX;
/// Everything a hint may ask for and get.
const OFFERED: u64 = MSG | SEND | RECV | SECONDARY;
/// The capabilities of a transmit and of a receive context.
const TX_CAPS: u64 = MSG | SEND | REMOTE_COMM;
const RX_CAPS: u64 = MSG | RECV | SOURCE | SOURCE_ERR | REMOTE_COMM | MULTI_RECV | NAMED_RX_CTX;

/// What plain UDP cannot give (docs/ip.md): a datagram names no receive context
/// (`FI_NAMED_RX_CTX`), and multi-receive buffers are not offered on it yet.
const NOT_ON_PLAIN_UDP: u64 = MULTI_RECV | NAMED_RX_CTX;

/// The address format of an `fi_info`, and with it the endpoint's encapsulation.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Format {
    /// `FI_FORMAT_UNSPEC`: ringfab's own 8 bytes, ringfab's header on Ethernet.
    Native,
    /// `FI_SOCKADDR_IN`: plain IPv4/UDP, the message the whole UDP payload (docs/ip.md).
    SockaddrIn,
}

impl Format {
    /// `fi_info::addr_format`.
    pub(crate) const fn addr_format(self) -> u32 {
        match self {
            Format::Native => sys::FI_FORMAT_UNSPEC,
            Format::SockaddrIn => sys::FI_SOCKADDR_IN,
        }
    }

    /// `ep_attr->protocol`.
    pub(crate) const fn protocol(self) -> u32 {
        match self {
            Format::Native => PROTOCOL,
            Format::SockaddrIn => sys::FI_PROTO_UDP,
        }
    }
}

/// `ep_attr->protocol`: ringfab's frame format has no libfabric number; fi_endpoint(3)
/// reserves the values with `FI_PROV_SPECIFIC` set for such protocols. The low bits are its
/// EtherType.
pub(crate) const PROTOCOL: u32 = sys::FI_PROV_SPECIFIC | ringfab::proto::ETHERTYPE as u32;

/// The hints, as far as ringfab looks at them, copied out of C. A zero means "not given",
/// as in the C structures.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Hints {
    pub(crate) caps: u64,
    pub(crate) mode: u64,
    pub(crate) addr_format: u32,
    pub(crate) src_addr: Option<Vec<u8>>,
    pub(crate) dest_addr: Option<Vec<u8>>,
    pub(crate) ep_type: u32,
    pub(crate) protocol: u32,
    pub(crate) max_msg_size: usize,
    pub(crate) tx_ctx_cnt: usize,
    pub(crate) rx_ctx_cnt: usize,
    pub(crate) auth_key_size: usize,
    pub(crate) fabric_name: Option<String>,
    pub(crate) prov_name: Option<String>,
    pub(crate) domain_name: Option<String>,
    /// `domain_attr->mr_mode`, with `FI_MR_LOCAL` added for an old `mode`'s `FI_LOCAL_MR`;
    /// `None` when the hints have no domain attributes.
    pub(crate) mr_mode: Option<u64>,
    pub(crate) av_type: u32,
    pub(crate) data_progress: u32,
    pub(crate) control_progress: u32,
    pub(crate) cq_data_size: usize,
    pub(crate) tx_caps: u64,
    /// `tx_attr->mode` and `rx_attr->mode` (0: the info's `mode`, fi_endpoint(3)).
    pub(crate) tx_mode: u64,
    pub(crate) rx_mode: u64,
    pub(crate) tx_size: usize,
    pub(crate) tx_iov_limit: usize,
    pub(crate) inject_size: usize,
    pub(crate) tx_msg_order: u64,
    pub(crate) tx_comp_order: u64,
    pub(crate) rx_caps: u64,
    pub(crate) rx_size: usize,
    pub(crate) rx_iov_limit: usize,
    pub(crate) rx_msg_order: u64,
    pub(crate) rx_comp_order: u64,
}

impl Hints {
    /// The formats a NIC offers under the hints, in the order its infos are listed;
    /// `configured`: the NIC has an IPv4 configuration.
    ///
    /// `FI_SOCKADDR_IN` asked for, or an address in the hints (`src_addr`, `dest_addr`, a
    /// numeric IPv4 `node`) that is a `sockaddr_in`: plain UDP only. An address of ringfab's
    /// own: ringfab's format only. Neither: both where the NIC has a configuration, the
    /// `sockaddr_in` info first — an IPv4 configuration is the user's explicit choice to speak
    /// UDP on that NIC, and programs that take the first info (`fi_pingpong`) then do.
    pub(crate) fn formats(&self, configured: bool) -> Vec<Format> {
        let named = self.src_addr.as_ref().or(self.dest_addr.as_ref());
        let sockaddr = match self.addr_format {
            sys::FI_SOCKADDR_IN => Some(true),
            sys::FI_FORMAT_UNSPEC => named.map(|a| crate::ipv4::is_sockaddr_in(a)),
            _ => Some(false),
        };
        match (sockaddr, configured) {
            (Some(true), true) => vec![Format::SockaddrIn],
            (Some(true), false) => Vec::new(),
            (Some(false), _) | (None, false) => vec![Format::Native],
            (None, true) => vec![Format::SockaddrIn, Format::Native],
        }
    }

    /// What the endpoint to be measured must be made with.
    pub(crate) fn wanted(&self) -> Wanted {
        let caps = self.caps | self.rx_caps;
        Wanted {
            tx_iov_limit: self.tx_iov_limit,
            multi_recv: caps & MULTI_RECV != 0,
            source_err: caps & SOURCE_ERR != 0,
            plain_udp: None,
        }
    }
}

/// What one NIC offers under the hints: the capabilities and where the endpoint's addresses
/// come from; the rest is the [`Description`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Offer {
    pub(crate) caps: u64,
    pub(crate) format: Format,
    pub(crate) src_addr: Vec<u8>,
    pub(crate) dest_addr: Option<Vec<u8>>,
    pub(crate) av_type: u32,
    /// `ep_attr->tx_ctx_cnt`, `rx_ctx_cnt`: as asked (for a scalable endpoint), else the
    /// endpoint's.
    pub(crate) ctx_cnt: (usize, usize),
    /// `mode` `FI_MSG_PREFIX`, with `ep_attr->msg_prefix_size` ([`crate::prefix`]).
    pub(crate) msg_prefix: bool,
}

/// The most transmit and receive contexts a scalable endpoint on a NIC with `caps` can have
/// (`fi_scalable_ep`, core's `Domain::scalable_endpoint`): a queue each, at most
/// `MAX_CONTEXTS`; more than one receive context only where the NIC steers frames to queues
/// by address (named receive contexts).
pub(crate) fn max_contexts(caps: &ringfab::hal::Capabilities, queues: usize) -> (usize, usize) {
    let most = usize::from(ringfab::sep::MAX_CONTEXTS).min(queues);
    let tx = usize::from(caps.tx_queues).min(most);
    let rx = if caps.rx_mac_queues > 1 {
        usize::from(caps.rx_queues.min(caps.rx_mac_queues)).min(most)
    } else {
        1
    };
    (tx.max(1), rx.max(1))
}

/// Whether the hints can be met by any ringfab NIC, before one is opened.
///
/// # Errors
/// Why not (for the log).
pub(crate) fn check_provider(h: &Hints) -> Result<(), String> {
    if let Some(p) = &h.prov_name {
        if !p.split(';').any(|n| n.eq_ignore_ascii_case("ringfab")) {
            return Err(format!("provider '{p}' asked for"));
        }
    }
    if let Some(f) = &h.fabric_name {
        if f != FABRIC_NAME {
            return Err(format!("fabric '{f}' asked for"));
        }
    }
    if !matches!(h.ep_type, sys::FI_EP_UNSPEC | sys::FI_EP_DGRAM) {
        return Err("only FI_EP_DGRAM endpoints".into());
    }
    let caps = h.caps | h.tx_caps | h.rx_caps;
    if caps & !OFFERED != 0 {
        return Err(format!("capabilities {:#x} not offered", caps & !OFFERED));
    }
    if h.caps & SOURCE_ERR != 0 && h.caps & SOURCE == 0 {
        // fi_getinfo(3): FI_SOURCE_ERR "must be paired with FI_SOURCE".
        return Err("FI_SOURCE_ERR without FI_SOURCE".into());
    }
    if !matches!(h.addr_format, sys::FI_FORMAT_UNSPEC | sys::FI_SOCKADDR_IN) {
        return Err("only FI_FORMAT_UNSPEC (ringfab's own) and FI_SOCKADDR_IN addresses".into());
    }
    if !matches!(h.protocol, 0 | PROTOCOL | sys::FI_PROTO_UDP) {
        return Err("another protocol asked for".into());
    }
    if h.auth_key_size > 0 {
        return Err("no authorization keys".into());
    }
    if let Some(mr_mode) = h.mr_mode {
        // ringfab needs every buffer registered (FI_MR_LOCAL) and nothing more.
        if mr_mode & sys::FI_MR_LOCAL == 0 {
            return Err("the application does not register local buffers (FI_MR_LOCAL)".into());
        }
    }
    if !matches!(
        h.av_type,
        sys::FI_AV_UNSPEC | sys::FI_AV_TABLE | sys::FI_AV_MAP
    ) {
        return Err("unknown av_type".into());
    }
    for p in [h.data_progress, h.control_progress] {
        if !matches!(p, sys::FI_PROGRESS_UNSPEC | sys::FI_PROGRESS_MANUAL) {
            return Err("only FI_PROGRESS_MANUAL".into());
        }
    }
    if h.cq_data_size > 8 {
        return Err("remote CQ data is 8 bytes".into());
    }
    Ok(())
}

/// The endpoint's address under the hints in ringfab's format: the hints' `src_addr` if it
/// is this NIC's (its receive context one the NIC has), else the NIC's.
fn native_src(h: &Hints, d: &Description, name: &str) -> Result<Vec<u8>, String> {
    if let Some(a) = &h.dest_addr {
        EpAddr::from_bytes(a).map_err(|_| format!("{name}: dest_addr not ringfab's"))?;
    }
    let Some(a) = &h.src_addr else {
        return Ok(d.addr.clone());
    };
    let a = EpAddr::from_bytes(a).map_err(|_| format!("{name}: src_addr not ringfab's"))?;
    if a.mac.0 != d.addr[..6] || a.ctx >= d.caps.rx_queues {
        return Err(format!("{name}: src_addr is another NIC's"));
    }
    Ok(a.to_bytes().to_vec())
}

/// What plain UDP cannot give, asked for in the hints (`NOT_ON_PLAIN_UDP`, contexts, remote
/// CQ data): why not, for the log.
fn refused_on_plain_udp(h: &Hints, name: &str) -> Result<(), String> {
    let asked = h.caps | h.tx_caps | h.rx_caps;
    if asked & NOT_ON_PLAIN_UDP != 0 {
        return Err(format!(
            "{name}: capabilities {:#x} not offered on FI_SOCKADDR_IN",
            asked & NOT_ON_PLAIN_UDP
        ));
    }
    // A datagram names no receive context; shared contexts are not offered on plain UDP.
    if h.tx_ctx_cnt > 1 || h.rx_ctx_cnt > 1 {
        return Err(format!("{name}: one context per FI_SOCKADDR_IN endpoint"));
    }
    // docs/ip.md: "a UDP datagram has no field for it".
    if h.cq_data_size > 0 {
        return Err(format!("{name}: no remote CQ data on FI_SOCKADDR_IN"));
    }
    Ok(())
}

/// The endpoint's `sockaddr_in` under the hints: the hints' `src_addr` if its address is
/// the domain's (its port is the one the endpoint binds; 0: a free one), else the domain's
/// address with port 0.
fn sockaddr_src(h: &Hints, d: &Description, name: &str) -> Result<Vec<u8>, String> {
    let ours = SockAddrIn::from_bytes(&d.addr).map_err(|_| format!("{name}: no sockaddr_in"))?;
    if let Some(a) = &h.dest_addr {
        SockAddrIn::from_bytes(a).map_err(|_| format!("{name}: dest_addr not a sockaddr_in"))?;
    }
    let Some(a) = &h.src_addr else {
        return Ok(d.addr.clone());
    };
    let a = SockAddrIn::from_bytes(a).map_err(|_| format!("{name}: src_addr not a sockaddr_in"))?;
    if a.addr != ours.addr {
        return Err(format!("{name}: src_addr {} is not its address", a.addr));
    }
    Ok(a.to_bytes().to_vec())
}

/// What NIC `d`, measured in `format`, offers under the hints, or why it cannot meet them
/// (for the log).
pub(crate) fn offer(h: &Hints, d: &Description, format: Format) -> Result<Offer, String> {
    let name = d.spec.to_string();
    if h.domain_name.as_deref().is_some_and(|n| n != name) {
        return Err(format!("{name}: another domain asked for"));
    }
    if h.protocol != 0 && h.protocol != format.protocol() {
        return Err(format!("{name}: another protocol asked for"));
    }
    let src_addr = match format {
        Format::Native => native_src(h, d, &name)?,
        Format::SockaddrIn => {
            refused_on_plain_udp(h, &name)?;
            sockaddr_src(h, d, &name)?
        }
    };
    let ep = &d.ep;
    let (max_tx, max_rx) = max_contexts(&d.caps, d.capacities.queues);
    // FI_SHARED_CONTEXT asks for a shared context (crate::stx, crate::srx), not a count.
    let count = |n: usize| {
        if n == sys::FI_SHARED_CONTEXT as usize {
            0
        } else {
            n
        }
    };
    let (tx_asked, rx_asked) = (count(h.tx_ctx_cnt), count(h.rx_ctx_cnt));
    let too_big = [
        (h.max_msg_size, ep.ep.max_msg_size, "max_msg_size"),
        (h.tx_size, ep.tx.size, "tx_attr->size"),
        (h.tx_iov_limit, ep.tx.iov_limit, "tx_attr->iov_limit"),
        (h.inject_size, ep.tx.inject_size, "tx_attr->inject_size"),
        (h.rx_size, ep.rx.size, "rx_attr->size"),
        (h.rx_iov_limit, ep.rx.iov_limit, "rx_attr->iov_limit"),
        (tx_asked, max_tx, "ep_attr->tx_ctx_cnt"),
        (rx_asked, max_rx, "ep_attr->rx_ctx_cnt"),
    ];
    for (asked, has, what) in too_big {
        if asked > has {
            return Err(format!("{name}: {what} {asked} asked for, {has} offered"));
        }
    }
    // No message order is promised (info::TxAttr::msg_order); completion order is strict only
    // where the NIC completes in ring order.
    let strict = sys::FI_ORDER_STRICT;
    let comp_ok = |asked: u64, order| {
        asked == 0 || (asked == strict && order == ringfab::info::Order::Strict)
    };
    if h.tx_msg_order != 0 || h.rx_msg_order != 0 {
        return Err(format!("{name}: no message order is promised"));
    }
    if !comp_ok(h.tx_comp_order, ep.tx.comp_order) || !comp_ok(h.rx_comp_order, ep.rx.comp_order) {
        return Err(format!("{name}: completion order asked for"));
    }
    // Primary: FI_MSG, restricted to the modifiers asked for (none: both). Secondary: those
    // asked for, and FI_REMOTE_COMM, which costs nothing (fi_getinfo(3) lets a provider
    // report non-selected secondary capabilities then).
    let asked = h.caps | h.tx_caps | h.rx_caps;
    let modifiers = match asked & (SEND | RECV) {
        0 => SEND | RECV,
        m => m,
    };
    let caps = MSG | modifiers | (asked & SECONDARY) | REMOTE_COMM;
    // fi_getinfo(3): "On input to fi_getinfo, applications set the mode bits that they
    // support. On output, providers will clear mode bits that are not necessary to achieve
    // high-performance." FI_MSG_PREFIX is what lets the provider post the application's own
    // buffers, so it stays when the application supports it — but not for an endpoint whose
    // receives are placed by copying (multi-receive buffers, a shared receive context) or a
    // scalable endpoint's contexts (crate::prefix::allowed).
    // fi_endpoint(3), of the transmit and receive attributes' `mode`: "A mode value of 0 will
    // be ignored on input to fi_getinfo(3), with the mode value of the fi_info structure used
    // instead."
    let supports = |m: u64| (if m == 0 { h.mode } else { m }) & sys::FI_MSG_PREFIX != 0;
    let msg_prefix = supports(h.mode)
        && supports(h.tx_mode)
        && supports(h.rx_mode)
        && caps & MULTI_RECV == 0
        && h.rx_ctx_cnt != sys::FI_SHARED_CONTEXT as usize
        && tx_asked <= 1
        && rx_asked <= 1;
    Ok(Offer {
        msg_prefix,
        caps,
        format,
        src_addr,
        dest_addr: h.dest_addr.clone(),
        av_type: if h.av_type == sys::FI_AV_UNSPEC {
            sys::FI_AV_TABLE
        } else {
            h.av_type
        },
        ctx_cnt: (
            if h.tx_ctx_cnt > 0 {
                h.tx_ctx_cnt
            } else {
                ep.ep.tx_ctx_cnt
            },
            if h.rx_ctx_cnt > 0 {
                h.rx_ctx_cnt
            } else {
                ep.ep.rx_ctx_cnt
            },
        ),
    })
}

/// A MAC address as `node` names it (`02:52:00:00:00:01`), with the context `service` names
/// (a number; none: 0).
pub(crate) fn parse_node(node: &str, service: Option<&str>) -> Option<EpAddr> {
    let mut mac = [0u8; 6];
    let mut parts = node.split(':');
    for b in &mut mac {
        *b = u8::from_str_radix(parts.next()?, 16).ok()?;
    }
    if parts.next().is_some() {
        return None;
    }
    let ctx = match service {
        None => 0,
        Some(s) => s.parse().ok()?,
    };
    Some(EpAddr {
        mac: MacAddr(mac),
        ctx,
    })
}

/// Bytes at `p`, `len` long, or `None` for a null pointer or a zero length.
///
/// # Safety
/// `p` is null or valid for reading `len` bytes.
unsafe fn bytes_at(p: *const core::ffi::c_void, len: usize) -> Option<Vec<u8>> {
    if p.is_null() || len == 0 {
        return None;
    }
    // SAFETY: the caller promises `len` readable bytes at `p`.
    Some(unsafe { core::slice::from_raw_parts(p.cast::<u8>(), len) }.to_vec())
}

/// The hints at `hints` (null: none), copied.
///
/// # Safety
/// `hints` is null or a valid `fi_info` whose non-null pointers are valid (as libfabric
/// passes it).
pub(crate) unsafe fn read_hints(hints: *const sys::fi_info) -> Hints {
    let mut h = Hints::default();
    // SAFETY: valid or null, as the caller promises; every pointer inside is checked for null
    // before it is followed.
    unsafe {
        let Some(hi) = hints.as_ref() else {
            return h;
        };
        h.caps = hi.caps;
        h.mode = hi.mode;
        h.addr_format = hi.addr_format;
        h.src_addr = bytes_at(hi.src_addr, hi.src_addrlen);
        h.dest_addr = bytes_at(hi.dest_addr, hi.dest_addrlen);
        if let Some(ep) = hi.ep_attr.as_ref() {
            h.ep_type = ep.type_;
            h.protocol = ep.protocol;
            h.max_msg_size = ep.max_msg_size;
            h.tx_ctx_cnt = ep.tx_ctx_cnt;
            h.rx_ctx_cnt = ep.rx_ctx_cnt;
            h.auth_key_size = ep.auth_key_size;
        }
        if let Some(f) = hi.fabric_attr.as_ref() {
            h.fabric_name = ffi::str_at(f.name).map(str::to_owned);
            h.prov_name = ffi::str_at(f.prov_name).map(str::to_owned);
        }
        if let Some(d) = hi.domain_attr.as_ref() {
            h.domain_name = ffi::str_at(d.name).map(str::to_owned);
            let local = if hi.mode & sys::FI_LOCAL_MR != 0 {
                sys::FI_MR_LOCAL
            } else {
                0
            };
            h.mr_mode = Some(d.mr_mode as u64 | local);
            h.av_type = d.av_type;
            h.data_progress = d.data_progress;
            h.control_progress = d.control_progress;
            h.cq_data_size = d.cq_data_size;
        }
        if let Some(t) = hi.tx_attr.as_ref() {
            h.tx_caps = t.caps;
            h.tx_mode = t.mode;
            h.tx_size = t.size;
            h.tx_iov_limit = t.iov_limit;
            h.inject_size = t.inject_size;
            h.tx_msg_order = t.msg_order;
            h.tx_comp_order = t.comp_order;
        }
        if let Some(r) = hi.rx_attr.as_ref() {
            h.rx_caps = r.caps;
            h.rx_mode = r.mode;
            h.rx_size = r.size;
            h.rx_iov_limit = r.iov_limit;
            h.rx_msg_order = r.msg_order;
            h.rx_comp_order = r.comp_order;
        }
    }
    h
}

/// Writes what NIC `d` offers into `info`, fresh from [`ffi::alloc_info`].
///
/// # Errors
/// `-FI_ENOMEM` if a string or an address could not be allocated (what was allocated stays
/// in `info`, for `fi_freeinfo`).
///
/// # Safety
/// `info` is a valid `fi_info` with every attribute structure, as `fi_dupinfo(NULL)` makes
/// it.
pub(crate) unsafe fn fill(info: *mut sys::fi_info, o: &Offer, d: &Description) -> c_int {
    let ep = &d.ep;
    let order = |o: ringfab::info::Order| match o {
        ringfab::info::Order::Strict => sys::FI_ORDER_STRICT,
        ringfab::info::Order::None => sys::FI_ORDER_NONE,
    };
    // SAFETY: the caller promises `info` and its attribute structures are valid and ours.
    unsafe {
        let i = &mut *info;
        i.caps = o.caps;
        i.mode = if o.msg_prefix { sys::FI_MSG_PREFIX } else { 0 };
        i.addr_format = o.format.addr_format();
        let plain = o.format == Format::SockaddrIn;
        i.src_addr = ffi::c_memdup(&o.src_addr);
        i.src_addrlen = if i.src_addr.is_null() {
            0
        } else {
            o.src_addr.len()
        };
        if let Some(dest) = &o.dest_addr {
            i.dest_addr = ffi::c_memdup(dest);
            i.dest_addrlen = if i.dest_addr.is_null() { 0 } else { dest.len() };
        }

        // fi_endpoint(3): "On return from fi_getinfo(3), the mode will be set only to those
        // constraints specific to transmit operations" — the prefix is one, for sends and
        // receives alike.
        let mode = i.mode;
        let t = &mut *i.tx_attr;
        t.caps = o.caps & TX_CAPS;
        t.mode = mode;
        t.op_flags = ep.tx.op_flags.bits();
        t.msg_order = order(ep.tx.msg_order);
        t.comp_order = order(ep.tx.comp_order);
        t.inject_size = ep.tx.inject_size;
        t.size = ep.tx.size;
        t.iov_limit = ep.tx.iov_limit;
        t.rma_iov_limit = ep.tx.rma_iov_limit;

        let r = &mut *i.rx_attr;
        r.caps = o.caps & RX_CAPS;
        r.mode = mode;
        r.op_flags = ep.rx.op_flags.bits();
        r.msg_order = order(ep.rx.msg_order);
        r.comp_order = order(ep.rx.comp_order);
        r.total_buffered_recv = ep.rx.total_buffered_recv;
        r.size = ep.rx.size;
        r.iov_limit = ep.rx.iov_limit;

        let e = &mut *i.ep_attr;
        e.type_ = sys::FI_EP_DGRAM;
        e.protocol = o.format.protocol();
        e.protocol_version = ep.ep.protocol_version;
        e.max_msg_size = ep.ep.max_msg_size;
        // fi_endpoint(3): "This field will be 0 unless the FI_MSG_PREFIX mode is enabled."
        e.msg_prefix_size = if o.msg_prefix {
            crate::prefix::prefix_size(d.header_len)
        } else {
            ep.ep.msg_prefix_size
        };
        e.max_order_raw_size = ep.ep.max_order_size;
        e.max_order_war_size = ep.ep.max_order_size;
        e.max_order_waw_size = ep.ep.max_order_size;
        e.mem_tag_format = ep.ep.mem_tag_format;
        (e.tx_ctx_cnt, e.rx_ctx_cnt) = o.ctx_cnt;
        e.auth_key_size = ep.ep.auth_key_size;

        let dom = &mut *i.domain_attr;
        dom.name = ffi::c_strdup(&d.spec.to_string());
        // Each queue and CQ has its own lock, taken once per batch (examples/info).
        dom.threading = sys::FI_THREAD_SAFE;
        // Nothing progresses unless the application calls in (no thread of ringfab's).
        dom.control_progress = sys::FI_PROGRESS_MANUAL;
        dom.data_progress = sys::FI_PROGRESS_MANUAL;
        // Credits: posting returns -FI_EAGAIN when the CQ could not take the completion, so a
        // CQ never overruns (docs/architecture.md, "Credits and overrun").
        dom.resource_mgmt = sys::FI_RM_ENABLED;
        dom.av_type = o.av_type;
        dom.mr_mode = sys::FI_MR_LOCAL as c_int; // mr_mode is an int in fi_domain_attr
        dom.mr_key_size = 0;
        // docs/ip.md: a UDP datagram has no field for remote CQ data.
        dom.cq_data_size = if plain { 0 } else { 8 };
        dom.cq_cnt = d.capacities.cqs;
        // An endpoint takes a transmit and a receive queue of the NIC.
        let pairs = usize::from(d.caps.tx_queues.min(d.caps.rx_queues));
        dom.ep_cnt = pairs.min(d.capacities.queues / 2);
        dom.tx_ctx_cnt = usize::from(d.caps.tx_queues).min(d.capacities.queues);
        dom.rx_ctx_cnt = usize::from(d.caps.rx_queues).min(d.capacities.queues);
        let (max_tx, max_rx) = max_contexts(&d.caps, d.capacities.queues);
        // An endpoint binds one shared transmit and one shared receive context (crate::stx,
        // crate::srx); on plain UDP neither, nor a scalable endpoint's contexts.
        (dom.max_ep_tx_ctx, dom.max_ep_rx_ctx) = if plain { (1, 1) } else { (max_tx, max_rx) };
        dom.max_ep_stx_ctx = usize::from(!plain);
        dom.max_ep_srx_ctx = usize::from(!plain);
        dom.cntr_cnt = crate::cntr::POOL_PER_KIND;
        dom.mr_iov_limit = 1;
        dom.caps = o.caps & REMOTE_COMM;
        dom.mode = 0;
        dom.max_err_data = ringfab::errdata::ERR_DATA_MAX;
        dom.mr_cnt = d.capacities.mrs;

        let f = &mut *i.fabric_attr;
        f.name = ffi::c_strdup(FABRIC_NAME);
        // prov_name and prov_version are libfabric's to set (it appends a utility provider's
        // name to a core provider's): left null and 0.

        if i.src_addr.is_null() || dom.name.is_null() || f.name.is_null() {
            return errno::NOMEM;
        }
        if o.dest_addr.is_some() && i.dest_addr.is_null() {
            return errno::NOMEM;
        }
    }
    0
}

/// `fi_provider::getinfo`.
///
/// # Safety
/// As libfabric calls it: `node` and `service` null or strings, `hints` null or a valid
/// `fi_info`, `info` valid for writing.
pub(crate) unsafe extern "C" fn getinfo(
    version: u32,
    node: *const c_char,
    service: *const c_char,
    flags: u64,
    hints: *const sys::fi_info,
    info: *mut *mut sys::fi_info,
) -> c_int {
    ffi::guard("fi_getinfo", || {
        if info.is_null() {
            return errno::INVAL;
        }
        // SAFETY: checked not null; libfabric passes a place for the list.
        unsafe { *info = core::ptr::null_mut() };
        if version < fi_version(1, 5) {
            crate::log::info("API versions before 1.5 are not supported");
            return errno::NODATA;
        }
        // SAFETY: as libfabric passes them (this function's contract).
        let (mut h, node, service) =
            unsafe { (read_hints(hints), ffi::str_at(node), ffi::str_at(service)) };
        if let Some(node) = node {
            // A MAC (ringfab's format) or a numeric IPv4 address (FI_SOCKADDR_IN); no name
            // is resolved.
            let bytes = match (
                parse_node(node, service),
                crate::ipv4::parse_node(node, service),
            ) {
                (Some(mac), _) => mac.to_bytes().to_vec(),
                (None, Some(ip)) => ip.to_bytes().to_vec(),
                (None, None) => {
                    crate::log::info(&format!(
                        "node '{node}' is neither a ringfab address nor a numeric IPv4 address"
                    ));
                    return errno::NODATA;
                }
            };
            let bytes = Some(bytes);
            if flags & sys::FI_SOURCE != 0 {
                h.src_addr = bytes;
            } else {
                h.dest_addr = bytes;
            }
        }
        if let Err(why) = check_provider(&h) {
            crate::log::info(&format!("fi_getinfo: {why}"));
            return errno::NODATA;
        }
        let mut head: *mut sys::fi_info = core::ptr::null_mut();
        let mut tail: *mut sys::fi_info = core::ptr::null_mut();
        for (index, spec) in crate::params::nics().iter().enumerate() {
            let config = crate::params::ipv4_of(spec);
            for format in h.formats(config.is_some()) {
                let plain = match format {
                    Format::Native => None,
                    Format::SockaddrIn => config.map(Plain),
                };
                match one(&h, spec, index, format, plain) {
                    Ok(None) => {}
                    Ok(Some(i)) => {
                        if tail.is_null() {
                            head = i;
                        } else {
                            // SAFETY: `tail` is the last fi_info made here, valid and ours.
                            unsafe { (*tail).next = i };
                        }
                        tail = i;
                    }
                    Err(e) => {
                        // SAFETY: `head` is null or the list made here; libfabric's freeinfo
                        // frees what its allocator and malloc gave.
                        unsafe { sys::fi_freeinfo(head) };
                        return e;
                    }
                }
            }
        }
        if head.is_null() {
            return errno::NODATA;
        }
        // SAFETY: checked not null above.
        unsafe { *info = head };
        0
    })
}

/// The `fi_info` of NIC `spec` in `format` under the hints (`plain`: the NIC's IPv4
/// configuration, for `FI_SOCKADDR_IN`), `None` if it cannot meet them or cannot be opened
/// (logged).
fn one(
    h: &Hints,
    spec: &NicSpec,
    index: usize,
    format: Format,
    plain: Option<Plain>,
) -> Result<Option<*mut sys::fi_info>, c_int> {
    // A domain name asked for is checked before the NIC is opened.
    if h.domain_name
        .as_deref()
        .is_some_and(|n| n != spec.to_string())
    {
        return Ok(None);
    }
    let wanted = Wanted {
        plain_udp: plain,
        ..h.wanted()
    };
    let d = match crate::nic::describe(spec, index, wanted) {
        Ok(d) => d,
        Err(e) => {
            crate::log::warn(&e);
            return Ok(None);
        }
    };
    let o = match offer(h, &d, format) {
        Ok(o) => o,
        Err(why) => {
            crate::log::info(&format!("fi_getinfo: {why}"));
            return Ok(None);
        }
    };
    let info = ffi::alloc_info();
    if info.is_null() {
        return Err(errno::NOMEM);
    }
    // SAFETY: `info` is fresh from fi_dupinfo(NULL), with every attribute structure.
    let r = unsafe { fill(info, &o, &d) };
    if r != 0 {
        // SAFETY: `info` is ours, allocated by libfabric and malloc.
        unsafe { sys::fi_freeinfo(info) };
        return Err(r);
    }
    Ok(Some(info))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nic::{describe, EmuKind};

    fn igb(wanted: Wanted) -> Description {
        describe(&NicSpec::Emu(EmuKind::Igb), 0, wanted).unwrap()
    }

    #[test]
    fn no_hints_offer_msg_send_recv() {
        let h = Hints::default();
        check_provider(&h).unwrap();
        let d = igb(h.wanted());
        let o = offer(&h, &d, Format::Native).unwrap();
        assert_eq!(o.caps, MSG | SEND | RECV | REMOTE_COMM);
        assert_eq!(o.src_addr, d.addr);
        assert_eq!(o.av_type, sys::FI_AV_TABLE);
    }

    #[test]
    fn unsupported_hints_match_nothing() {
        let refused = [
            Hints {
                ep_type: sys::FI_EP_RDM,
                ..Hints::default()
            },
            Hints {
                caps: sys::FI_TAGGED,
                ..Hints::default()
            },
            Hints {
                caps: MSG | SOURCE_ERR,
                ..Hints::default()
            },
            Hints {
                addr_format: sys::FI_SOCKADDR_IN6,
                ..Hints::default()
            },
            Hints {
                protocol: sys::FI_PROTO_RXD,
                ..Hints::default()
            },
            Hints {
                mr_mode: Some(0),
                ..Hints::default()
            },
            Hints {
                fabric_name: Some("udp".into()),
                ..Hints::default()
            },
            Hints {
                prov_name: Some("tcp".into()),
                ..Hints::default()
            },
            Hints {
                data_progress: sys::FI_PROGRESS_AUTO,
                ..Hints::default()
            },
        ];
        for h in refused {
            assert!(check_provider(&h).is_err(), "{h:?}");
        }
        let layered = Hints {
            prov_name: Some("ringfab;ofi_rxd".into()),
            ..Hints::default()
        };
        check_provider(&layered).unwrap();
    }

    #[test]
    fn sizes_beyond_the_endpoint_match_nothing() {
        let d = igb(Wanted::default());
        let ok = Hints {
            tx_size: d.ep.tx.size,
            rx_size: d.ep.rx.size,
            ..Hints::default()
        };
        offer(&ok, &d, Format::Native).unwrap();
        for h in [
            Hints {
                tx_size: d.ep.tx.size + 1,
                ..Hints::default()
            },
            Hints {
                rx_iov_limit: 2,
                ..Hints::default()
            },
            Hints {
                max_msg_size: d.ep.ep.max_msg_size + 1,
                ..Hints::default()
            },
            Hints {
                domain_name: Some("emu:e1000e".into()),
                ..Hints::default()
            },
        ] {
            assert!(offer(&h, &d, Format::Native).is_err(), "{h:?}");
        }
    }

    #[test]
    fn secondary_caps_asked_for_are_given_and_measured() {
        let h = Hints {
            caps: MSG | SOURCE | SOURCE_ERR,
            tx_iov_limit: 2,
            ..Hints::default()
        };
        check_provider(&h).unwrap();
        let d = igb(h.wanted());
        assert_eq!(d.ep.tx.iov_limit, 2);
        let o = offer(&h, &d, Format::Native).unwrap();
        assert_eq!(o.caps & SECONDARY, SOURCE | SOURCE_ERR | REMOTE_COMM);
        assert_eq!(o.caps & MULTI_RECV, 0, "multi-receive only when asked for");
        let multi = Hints {
            caps: MSG | MULTI_RECV,
            ..Hints::default()
        };
        check_provider(&multi).unwrap();
        let d = igb(multi.wanted());
        assert_eq!(
            offer(&multi, &d, Format::Native).unwrap().caps & MULTI_RECV,
            MULTI_RECV
        );
    }

    #[test]
    fn the_prefix_mode_stays_when_the_application_supports_it_and_its_endpoint_can() {
        let d = igb(Wanted::default());
        assert!(
            !offer(&Hints::default(), &d, Format::Native)
                .unwrap()
                .msg_prefix
        );
        let prefix = Hints {
            mode: sys::FI_MSG_PREFIX | sys::FI_CONTEXT,
            ..Hints::default()
        };
        assert!(offer(&prefix, &d, Format::Native).unwrap().msg_prefix);
        let shared = sys::FI_SHARED_CONTEXT as usize;
        let refused = [
            Hints {
                caps: MSG | MULTI_RECV,
                ..prefix.clone()
            },
            Hints {
                rx_ctx_cnt: shared,
                ..prefix.clone()
            },
            Hints {
                tx_ctx_cnt: 2,
                ..prefix.clone()
            },
        ];
        for h in refused {
            assert!(!offer(&h, &d, Format::Native).unwrap().msg_prefix, "{h:?}");
        }
        let stx = Hints {
            tx_ctx_cnt: shared,
            ..prefix
        };
        assert!(
            offer(&stx, &d, Format::Native).unwrap().msg_prefix,
            "a shared transmit context sends as any"
        );
    }

    #[test]
    fn context_counts_are_the_nics_and_shared_contexts_are_kept() {
        let d = igb(Wanted::default());
        let (tx, rx) = max_contexts(&d.caps, d.capacities.queues);
        assert!(tx > 1 && rx > 1, "the 82576 steers by address: {tx}, {rx}");
        let within = Hints {
            tx_ctx_cnt: tx,
            rx_ctx_cnt: rx,
            ..Hints::default()
        };
        assert_eq!(
            offer(&within, &d, Format::Native).unwrap().ctx_cnt,
            (tx, rx)
        );
        let beyond = Hints {
            rx_ctx_cnt: rx + 1,
            ..Hints::default()
        };
        assert!(offer(&beyond, &d, Format::Native).is_err());
        let shared = sys::FI_SHARED_CONTEXT as usize;
        let sharing = Hints {
            tx_ctx_cnt: shared,
            rx_ctx_cnt: shared,
            ..Hints::default()
        };
        check_provider(&sharing).unwrap();
        assert_eq!(
            offer(&sharing, &d, Format::Native).unwrap().ctx_cnt,
            (shared, shared)
        );
        let unasked = offer(&Hints::default(), &d, Format::Native).unwrap();
        assert_eq!(unasked.ctx_cnt, (1, 1));
    }

    #[test]
    fn src_addr_picks_the_nic_with_that_address() {
        let d = igb(Wanted::default());
        let mine = Hints {
            src_addr: Some(d.addr.to_vec()),
            ..Hints::default()
        };
        assert_eq!(offer(&mine, &d, Format::Native).unwrap().src_addr, d.addr);
        let mut other = d.addr.clone();
        other[5] ^= 1;
        let theirs = Hints {
            src_addr: Some(other.to_vec()),
            ..Hints::default()
        };
        assert!(offer(&theirs, &d, Format::Native).is_err());
    }

    #[test]
    fn node_is_a_mac_and_service_a_context() {
        let a = parse_node("02:52:00:00:00:01", Some("3")).unwrap();
        assert_eq!(a.mac.0, [2, 0x52, 0, 0, 0, 1]);
        assert_eq!(a.ctx, 3);
        assert!(parse_node("10.0.0.1", None).is_none());
        assert!(parse_node("02:52:00:00:00:01:07", None).is_none());
    }

    fn plain_igb(wanted: Wanted) -> Description {
        let config = ringfab::ip::Ipv4Config {
            addr: std::net::Ipv4Addr::new(192, 0, 2, 1),
            prefix_len: 24,
            gateway: None,
        };
        let wanted = Wanted {
            plain_udp: Some(Plain(config)),
            ..wanted
        };
        describe(&NicSpec::Emu(EmuKind::Igb), 0, wanted).unwrap()
    }

    fn sockaddr(a: [u8; 4], port: u16) -> Vec<u8> {
        SockAddrIn::new(a.into(), port).to_bytes().to_vec()
    }

    #[test]
    fn sockaddr_in_is_offered_first_where_configured_and_alone_when_asked_for() {
        use Format::{Native, SockaddrIn as In};
        let none = Hints::default();
        assert_eq!(none.formats(true), [In, Native]);
        assert_eq!(none.formats(false), [Native]);
        let asked = Hints {
            addr_format: sys::FI_SOCKADDR_IN,
            ..Hints::default()
        };
        assert_eq!(asked.formats(true), [In]);
        assert!(asked.formats(false).is_empty());
        let named = Hints {
            dest_addr: Some(sockaddr([192, 0, 2, 2], 7)),
            ..Hints::default()
        };
        assert_eq!(named.formats(true), [In]);
        let native = Hints {
            src_addr: Some(vec![2, 0x52, 0, 0, 0, 1, 0, 0]),
            ..Hints::default()
        };
        assert_eq!(native.formats(true), [Native]);
        check_provider(&asked).unwrap();
    }

    #[test]
    fn a_sockaddr_in_offer_names_the_domains_address_and_the_port_asked_for() {
        let h = Hints {
            addr_format: sys::FI_SOCKADDR_IN,
            ..Hints::default()
        };
        let d = plain_igb(h.wanted());
        let o = offer(&h, &d, Format::SockaddrIn).unwrap();
        assert_eq!(o.src_addr, sockaddr([192, 0, 2, 1], 0));
        assert_eq!(o.caps, MSG | SEND | RECV | REMOTE_COMM);
        // fi_getinfo(3), FI_SOURCE: "the node and service parameters specify the local
        // source address": its port is the endpoint's.
        let bound = Hints {
            src_addr: Some(sockaddr([192, 0, 2, 1], 4791)),
            ..h.clone()
        };
        assert_eq!(
            offer(&bound, &d, Format::SockaddrIn).unwrap().src_addr,
            sockaddr([192, 0, 2, 1], 4791)
        );
        let prefix = Hints {
            mode: sys::FI_MSG_PREFIX,
            ..h.clone()
        };
        assert!(offer(&prefix, &d, Format::SockaddrIn).unwrap().msg_prefix);
        let source = Hints {
            caps: MSG | SOURCE | SOURCE_ERR,
            ..h.clone()
        };
        let ds = plain_igb(source.wanted());
        let o = offer(&source, &ds, Format::SockaddrIn).unwrap();
        assert_eq!(o.caps & (SOURCE | SOURCE_ERR), SOURCE | SOURCE_ERR);
    }

    #[test]
    fn what_plain_udp_cannot_give_matches_nothing() {
        let h = Hints {
            addr_format: sys::FI_SOCKADDR_IN,
            ..Hints::default()
        };
        let d = plain_igb(h.wanted());
        let refused = [
            Hints {
                src_addr: Some(sockaddr([192, 0, 2, 9], 0)),
                ..h.clone()
            },
            Hints {
                src_addr: Some(vec![2, 0x52, 0, 0, 0, 1, 0, 0]),
                ..h.clone()
            },
            Hints {
                dest_addr: Some(vec![2, 0x52, 0, 0, 0, 1, 0, 0]),
                ..h.clone()
            },
            Hints {
                caps: MSG | MULTI_RECV,
                ..h.clone()
            },
            Hints {
                caps: MSG | NAMED_RX_CTX,
                ..h.clone()
            },
            Hints {
                rx_ctx_cnt: 2,
                ..h.clone()
            },
            Hints {
                tx_ctx_cnt: sys::FI_SHARED_CONTEXT as usize,
                ..h.clone()
            },
            Hints {
                cq_data_size: 8,
                ..h.clone()
            },
            Hints {
                protocol: PROTOCOL,
                ..h.clone()
            },
            Hints {
                max_msg_size: d.ep.ep.max_msg_size + 1,
                ..h.clone()
            },
        ];
        for r in refused {
            assert!(offer(&r, &d, Format::SockaddrIn).is_err(), "{r:?}");
        }
        let udp = Hints {
            protocol: sys::FI_PROTO_UDP,
            ..h
        };
        offer(&udp, &d, Format::SockaddrIn).unwrap();
    }
}
