//! Endpoints (`fi_endpoint`, `FI_EP_DGRAM`): one transmit and one receive hardware queue that
//! speak ringfab's frame format ([`proto`](crate::proto)).
//!
//! # Lifecycle (fi_endpoint(3), "Active endpoints are created in the disabled state")
//!
//! [`Domain::endpoint`] creates an endpoint *disabled*: it holds no hardware queue yet. Bind a
//! CQ for each direction ([`Endpoint::bind_cq`]) and an address vector
//! ([`Endpoint::bind_av`]) — connectionless endpoints must have one — then
//! [`Endpoint::enable`] opens the NIC's queues, wires them to the CQs, and allocates the
//! inject bounce buffers (which live with the transmit queue). Data operations before that
//! return `OpBadState`. [`Endpoint::close`] discards every outstanding operation without a
//! completion, returns owned buffers to their regions, and gives the queues back; an endpoint
//! handle dropped without it leaves its queues to the domain's end. Every method that needs
//! the domain takes it (`&Domain`); another domain's gives `Domain`.
//!
//! # Critical errors (fi_endpoint(3): "If an endpoint experiences a critical error, it will
//! transition back into a disabled state")
//!
//! When the driver finds that the device no longer honours one of the endpoint's queues —
//! removed, reset behind its back, the queue disabled, virtio `DEVICE_NEEDS_RESET` — the
//! endpoint is disabled: [`Endpoint::is_enabled`] is false, [`Endpoint::fault`] says why, and
//! every data operation returns `OpBadState`. All pending operations are discarded: none
//! completes, and the buffers they owned go back to their memory regions (as on close), so
//! nothing leaks. ringfab has no event queue; the error is reported on the bound CQ instead,
//! one `FI_EIO` error entry per queue that found the fault (`prov_errno` 8, the fault in
//! `err_data`, NULL context, `FI_SEND` or `FI_RECV`), read with `readerr` like any other
//! error. The endpoint's other queue, if it had not found the fault itself, is discarded
//! without an entry of its own the next time the endpoint is used. [`Endpoint::enable`] on a
//! disabled endpoint closes the queues, has the driver recover the device
//! ([`Nic::recover`]) and opens them again; a device that is gone gives
//! `Device(DeviceRemoved)`. docs/semantics.md records why the CQ carries the report.
//!
//! # Addressing
//!
//! An endpoint's address ([`Endpoint::name`]) is its NIC's MAC and its receive queue's index as the
//! context. A send writes ringfab's header — destination from the AV, source this endpoint — into
//! the first [`Endpoint::payload_offset`] bytes of the buffer ([`HEADER_LEN`](crate::proto::HEADER_LEN) on
//! Ethernet encapsulation, [`MAX_HEADER_LEN`] on the UDP one: [`EpAttr::encap`]); the payload is
//! what follows. A receive completion reports the payload length; frames that are not ringfab
//! frames for this endpoint never reach the application: their buffers are posted again.
//!
//! What the NIC steers to this endpoint's receive queue is the NIC's business: with one
//! endpoint per NIC every frame reaches queue 0. Several receivers on one NIC are reached
//! through a scalable endpoint (named receive contexts steered by address, or contexts fed by
//! RSS: [`crate::sep`]) or a shared receive context ([`crate::srx`]); a plain endpoint on
//! another queue sees only what the NIC puts there.
//!
//! # Completion levels
//!
//! `FI_INJECT_COMPLETE` and `FI_TRANSMIT_COMPLETE` complete when the NIC writes the transmit
//! descriptor back (docs/architecture.md, "Completion levels"). `FI_DELIVERY_COMPLETE`,
//! `FI_MATCH_COMPLETE`, `FI_COMMIT_COMPLETE` and `FI_FENCE` need an acknowledgement a DGRAM
//! endpoint does not have: posting with them returns `BadFlags`.

use crate::addr::EpAddr;
use crate::av::AddressVector;
use crate::cq::queue::CompletionQueue;
use crate::domain::Domain;
use crate::entry::{Format, OpContext};
use crate::flags::{BindFlags, OpFlags};
use crate::hal::Nic;
use crate::proto::{Encap, MAX_HEADER_LEN};
use crate::{Error, Result};

/// `enum fi_ep_type`.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub enum EpType {
    /// `FI_EP_UNSPEC`: the provider's choice — DGRAM.
    Unspec,
    /// `FI_EP_MSG`: reliable, connected. Not supported.
    Msg,
    /// `FI_EP_DGRAM`: unreliable datagrams. What ringfab provides.
    #[default]
    Dgram,
    /// `FI_EP_RDM`: reliable datagrams. Not supported.
    Rdm,
    /// `FI_EP_SOCK_STREAM`. Not supported.
    SockStream,
    /// `FI_EP_SOCK_DGRAM`. Not supported.
    SockDgram,
}

/// Payload bytes `inject` copies (`inject_size`).
pub const INJECT_SIZE: usize = 64;
/// One inject bounce slot: the longest header plus payload, rounded to cache lines — the
/// engine's bounce slot (control frames on plain UDP have a region of their own).
const INJECT_SLOT: usize = crate::engine::BOUNCE_SLOT;
const _: () = assert!(INJECT_SLOT >= (MAX_HEADER_LEN + INJECT_SIZE).next_multiple_of(64));

/// Transmit operation flags an endpoint accepts (`fi_sendmsg`).
pub(crate) const TX_FLAGS_OK: OpFlags = OpFlags::COMPLETION
    .union(OpFlags::INJECT_COMPLETE)
    .union(OpFlags::TRANSMIT_COMPLETE)
    .union(OpFlags::REMOTE_CQ_DATA)
    .union(OpFlags::MORE);
/// Receive operation flags an endpoint accepts (`fi_recvmsg`).
pub(crate) const RX_FLAGS_OK: OpFlags = OpFlags::COMPLETION
    .union(OpFlags::MORE)
    .union(OpFlags::MULTI_RECV);

/// Endpoint attributes (`fi_ep_attr` with the parts of `fi_tx_attr`/`fi_rx_attr` that apply).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct EpAttr {
    /// Endpoint type; only DGRAM (or UNSPEC, which becomes DGRAM) is supported.
    pub ep_type: EpType,
    /// The NIC transmit queue the endpoint uses.
    pub tx_queue: u16,
    /// The NIC receive queue the endpoint uses; also its context number on the wire.
    pub rx_queue: u16,
    /// Receive buffer size the NIC's queue is set up for: every posted receive buffer must be
    /// at least this long, and the largest message is this minus the header.
    pub rx_buf_len: u32,
    /// Default flags of transmit operations (`fi_tx_attr::op_flags`).
    pub tx_op_flags: OpFlags,
    /// Default flags of receive operations (`fi_rx_attr::op_flags`).
    pub rx_op_flags: OpFlags,
    /// `FI_SOURCE_ERR`: a receive from a sender not in the AV completes with
    /// `FI_EADDRNOTAVAIL`.
    pub source_err: bool,
    /// The endpoint's own context (`fi_endpoint`'s `context` argument): what an error entry
    /// carries as `op_context` when the error belongs to no operation of the application's —
    /// a failed `inject`, a critical fault of a queue (fi_endpoint(3) NOTES: "Operations that
    /// complete in error that are not associated with valid operational context will use the
    /// endpoint context").
    pub context: OpContext,
    /// How ringfab's header travels ([`Encap`]): straight on Ethernet (the default), or inside
    /// IPv4/UDP, which RSS can spread over a scalable endpoint's receive contexts
    /// ([`SepAttr::rss`](crate::sep::SepAttr::rss)). Both ends must use the same: a frame of the
    /// other encapsulation never reaches the application. The UDP encapsulation's header is 28
    /// bytes longer, so is [`payload_offset`](Endpoint::payload_offset), and `max_msg_size` 28
    /// shorter.
    pub encap: Encap,
    /// Buffers a gather send ([`Endpoint::sendv`]) may have (`fi_tx_attr::iov_limit`): 1 (the
    /// default) to [`IOV_MAX`](crate::buf::IOV_MAX), at most the NIC's segments per frame.
    /// A gather of `k` buffers takes `k` descriptors and, when `k` > 1, one of the path's
    /// gather records, so the transmit `size` and [`Endpoint::tx_size_left`] — lower bounds
    /// for whatever operation comes next (fi_endpoint(3)) — count operations of this many
    /// buffers: ask for more only to use them.
    pub tx_iov_limit: usize,
    /// Messages one multi-receive buffer (`FI_MULTI_RECV`, [`Endpoint::recvmsg`]) may take at
    /// most: 0 (the default) — the endpoint takes none (`FI_MULTI_RECV` is `BadFlags`, as in
    /// `rx_op_flags`); `k` — a buffer that would take more (its length over
    /// [`rx_buf_len`](Self::rx_buf_len), less what `FI_OPT_MIN_MULTI_RECV` keeps free) is
    /// `Inval`. A multi-receive buffer takes one descriptor per message and one of the queue's
    /// 8 multi-receive groups, so the receive `size` and [`Endpoint::rx_size_left`] — lower
    /// bounds for whatever receive comes next (fi_endpoint(3)) — count receives of `k`
    /// descriptors and a group each: at most 8, and the ring over `k`. At most the op table's
    /// depth.
    pub multi_recv_msgs: u32,
    /// The UDP port a [plain-UDP](Encap::PlainUdp) endpoint binds (`docs/ip.md`, "Ports"): 0
    /// (the default) for the lowest free one of the dynamic range (RFC 6335 §6). Bound when
    /// the endpoint is made, released when it closes. Ignored on ringfab's encapsulations.
    pub port: u16,
}

/// What one operation of an endpoint's costliest kind takes: the unit of `size` and
/// `size_left`, which must be lower bounds whatever operation comes next (fi_endpoint(3)).
#[derive(Clone, Copy, Debug)]
pub(crate) struct OpCost {
    /// Ring descriptors (and op-table slots).
    pub(crate) descs: usize,
    /// Whether it takes a gather record (transmit) or a multi-receive group (receive).
    pub(crate) record: bool,
    /// CQ credits.
    pub(crate) credits: usize,
}

impl EpAttr {
    /// DGRAM on queue pair 0 with 2 KiB receive buffers, gather sends of one buffer and no
    /// multi-receive buffers: [`Default`], usable in a `const`.
    pub const DEFAULT: EpAttr = EpAttr {
        ep_type: EpType::Dgram,
        tx_queue: 0,
        rx_queue: 0,
        rx_buf_len: 2048,
        tx_op_flags: OpFlags::empty(),
        rx_op_flags: OpFlags::empty(),
        source_err: false,
        context: OpContext::NULL,
        encap: Encap::Ethernet,
        tx_iov_limit: 1,
        multi_recv_msgs: 0,
        port: 0,
    };
}

impl Default for EpAttr {
    /// [`EpAttr::DEFAULT`].
    fn default() -> Self {
        EpAttr::DEFAULT
    }
}

/// `fi_getopt`/`fi_setopt` options at level `FI_OPT_ENDPOINT`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum EpOpt {
    /// `FI_OPT_MIN_MULTI_RECV` (read/write).
    MinMultiRecv,
    /// `FI_OPT_CM_DATA_SIZE` (read only; 0: DGRAM has no connection data).
    CmDataSize,
    /// Any other option number: `NoProtoOpt`.
    Other(i32),
}

/// A CQ binding of one direction.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct CqBinding {
    cq: usize,
    flags: BindFlags,
}

/// An endpoint. See the [module documentation](self).
#[derive(Debug)]
pub struct Endpoint {
    /// The id of the domain it belongs to.
    domain: u32,
    attr: EpAttr,
    tx_cq: Option<CqBinding>,
    rx_cq: Option<CqBinding>,
    av: Option<usize>,
    /// Counters (indices into the domain's) for sends and receives.
    tx_cntr: Option<usize>,
    rx_cntr: Option<usize>,
    /// Its queues once enabled (indices into the domain's path table): its own, or a shared
    /// context's.
    tx: Option<usize>,
    rx: Option<usize>,
    min_multi_recv: usize,
    /// Which directions the endpoint has: both for an endpoint, one for a scalable
    /// endpoint's transmit or receive context.
    sends: bool,
    recvs: bool,
    enabled: bool,
    /// A critical fault disabled the endpoint: its next `enable` recovers the device first.
    recover: bool,
    /// The address it receives on (and its name); for a send-only context, the scalable
    /// endpoint's.
    local: EpAddr,
    /// The address its frames carry as their source.
    source: EpAddr,
    /// The receive queue this context gave its own MAC address ([`Nic::set_rx_queue_mac`]);
    /// taken back when it closes.
    steered: Option<u16>,
    /// The shared transmit context it sends through (its path slot), if bound
    /// ([`bind_stx`](Self::bind_stx)), and its owner number there.
    stx: Option<usize>,
    owner: u8,
    /// The shared receive context it receives through, and its owner number there.
    srx: Option<usize>,
    srx_owner: u8,
    /// A plain-UDP endpoint's bound UDP port (0: none).
    port: u16,
    /// Whether it bound `port` itself (an endpoint) rather than using its scalable
    /// endpoint's (a context): only the binder releases it.
    owns_port: bool,
    /// [`max_msg_size`](Self::max_msg_size) as it was when the endpoint was last enabled: what
    /// a send checks its payload against, without asking the NIC (whose `capabilities` takes
    /// the driver's lock) on every send. Nothing sends before `enable`.
    max_send: usize,
}

impl<'n, N: Nic + 'n, const D: usize> Domain<'n, N, D> {
    /// Creates a disabled endpoint (`fi_endpoint`).
    ///
    /// # Errors
    /// `OpNotSupp` for an endpoint type other than DGRAM/UNSPEC, or for plain UDP or
    /// `multi_recv_msgs` in a build without the `plain-udp` or `multi-recv` feature; `Inval` for a queue the NIC
    /// does not have, a receive buffer size outside `header + 1 ..= max_rx_buf_len` (the
    /// header of [`EpAttr::encap`]), a `tx_iov_limit` outside 1 ..= the buffers a gather
    /// send can have on the NIC ([`EpAttr::tx_iov_limit`]), or a `multi_recv_msgs` over the
    /// op table's depth `D`;
    /// `BadFlags` for unknown or unsupported default op flags (`FI_MULTI_RECV` without
    /// `multi_recv_msgs`); on [plain UDP](Encap::PlainUdp), `AddrInUse` for a port bound
    /// already (or, for port 0, no free one) and `Full(Ports)` when the domain's port table is
    /// full.
    pub fn endpoint(&self, attr: &EpAttr) -> Result<Endpoint> {
        let mut attr = *attr;
        match attr.ep_type {
            EpType::Dgram => {}
            EpType::Unspec => attr.ep_type = EpType::Dgram,
            _ => return Err(Error::OpNotSupp),
        }
        if !attr.encap.is_built() || (attr.multi_recv_msgs > 0 && !cfg!(feature = "multi-recv")) {
            return Err(Error::OpNotSupp);
        }
        let caps = self.nic().capabilities();
        if attr.tx_queue >= caps.tx_queues || attr.rx_queue >= caps.rx_queues {
            return Err(Error::Inval);
        }
        if (attr.rx_buf_len as usize) <= attr.encap.header_len()
            || attr.rx_buf_len > caps.max_rx_buf_len
        {
            return Err(Error::Inval);
        }
        if !(1..=crate::buf::IOV_MAX.min(caps.max_tx_segments)).contains(&attr.tx_iov_limit)
            || attr.multi_recv_msgs as usize > D
        {
            return Err(Error::Inval);
        }
        let name = EpAddr {
            mac: caps.mac,
            ctx: attr.rx_queue,
        };
        let mut ep = Endpoint::new(self, attr, (true, true), name, name);
        ep.check_op_flags()?;
        if !attr.encap.is_ringfab() {
            ep.port = self.ip().bind_port(attr.port)?;
            ep.owns_port = true;
        }
        Ok(ep)
    }

    /// An enabled endpoint with a completion queue of format `F` for both directions and an
    /// address vector of its own: what most programs set up first (fabtests'
    /// `ft_init_fabric` does the same). It is [`open_cq`](Self::open_cq) with `cq`,
    /// [`open_av`](Self::open_av) with the default attributes, [`endpoint`](Self::endpoint)
    /// with `attr`, [`Endpoint::bind_cq`] with `TRANSMIT | RECV`, [`Endpoint::bind_av`] and
    /// [`Endpoint::enable`].
    ///
    /// # Errors
    /// What those return; nothing stays open then.
    pub fn ready_endpoint<F: Format>(
        &self,
        attr: &EpAttr,
        cq: &crate::cq::CqAttr,
    ) -> Result<(Endpoint, CompletionQueue<N, F>, AddressVector)> {
        let cq = self.open_cq::<F>(cq)?;
        let av = match self.open_av(&crate::av::AvAttr::default()) {
            Ok(av) => av,
            Err(e) => {
                let _ = cq.close(self);
                return Err(e);
            }
        };
        let ep = self.endpoint(attr).and_then(|mut ep| {
            let set_up = ep
                .bind_cq(self, &cq, BindFlags::TRANSMIT | BindFlags::RECV)
                .and_then(|()| ep.bind_av(self, &av))
                .and_then(|()| ep.enable(self));
            match set_up {
                Ok(()) => Ok(ep),
                Err(e) => {
                    // Unbinds the CQ and the AV, so that they close below.
                    let _ = ep.close(self);
                    Err(e)
                }
            }
        });
        match ep {
            Ok(ep) => Ok((ep, cq, av)),
            Err(e) => {
                let _ = av.close(self);
                let _ = cq.close(self);
                Err(e)
            }
        }
    }
}

/// An endpoint names its own address, so that it can be given wherever one is taken
/// ([`AddressVector::insert_one`](crate::av::AddressVector::insert_one)).
impl From<&Endpoint> for EpAddr {
    fn from(ep: &Endpoint) -> EpAddr {
        ep.name()
    }
}

mod alias;
mod control;
mod plain;
mod recv;
mod send;
mod setup;

pub use alias::Alias;
