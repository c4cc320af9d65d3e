//! Endpoints (`fi_endpoint`, `FI_EP_DGRAM`): one transmit and one receive hardware queue that
//! speak ringfab's frame format ([`proto`]).
//!
//! # Lifecycle (fi_endpoint(3), "Active endpoints are created in the disabled state")
//!
//! [`Domain::endpoint`] creates an endpoint *disabled*: it holds no hardware queue yet. Bind a
//! CQ for each direction ([`Endpoint::bind_cq`]) and an address vector
//! ([`Endpoint::bind_av`]) — connectionless endpoints must have one — then
//! [`Endpoint::enable`] opens the NIC's queues, wires them to the CQs, and allocates the
//! inject bounce buffers. Data operations before that return `OpBadState`.
//! [`Endpoint::close`] (or dropping the handle) discards every outstanding operation without a
//! completion, returns owned buffers to their regions, and gives the queues back.
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
//! the first [`Endpoint::payload_offset`] bytes of the buffer ([`HEADER_LEN`](proto::HEADER_LEN) on
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

use crate::av::{AddressVector, EpAddr, FiAddr};
use crate::cntr::Counter;
use crate::cq::entry::{Format, OpContext};
use crate::cq::queue::{CompletionQueue, CqSlot};
use crate::domain::Domain;
use crate::flags::{BindFlags, CntrBindFlags, OpFlags};
use crate::hal::{DmaRegion, Nic, QueueFault, RxConfig, RxQueue, TxConfig, TxSegment, Wait};
use crate::info::{EndpointAttr, EpInfo, Order, Protocol, RxAttr, TxAttr};
use crate::mr::{Buf, Iov, RawBuf};
use crate::path::{Framing, Outcome, Path, Poster, Queue, NO_MR};
use crate::proto::{self, Encap, Header, MAX_HEADER_LEN};
use crate::srx::SharedRxContext;
use crate::stx::SharedTxContext;
use crate::{Error, Result};
use core::sync::atomic::Ordering;

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
/// One inject bounce slot: the longest header plus payload, rounded to cache lines.
const INJECT_SLOT: usize = (MAX_HEADER_LEN + INJECT_SIZE).next_multiple_of(64);

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
}

impl Default for EpAttr {
    /// DGRAM on queue pair 0 with 2 KiB receive buffers.
    fn default() -> Self {
        EpAttr {
            ep_type: EpType::Dgram,
            tx_queue: 0,
            rx_queue: 0,
            rx_buf_len: 2048,
            tx_op_flags: OpFlags::empty(),
            rx_op_flags: OpFlags::empty(),
            source_err: false,
            context: OpContext::NULL,
            encap: Encap::Ethernet,
        }
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
pub struct Endpoint<'d, 's, 'n, N: Nic + 'n, const D: usize> {
    domain: &'d Domain<'s, 'n, N, D>,
    attr: EpAttr,
    tx_cq: Option<CqBinding>,
    rx_cq: Option<CqBinding>,
    av: Option<usize>,
    /// Counters (indices into the domain's) for sends and receives.
    tx_cntr: Option<usize>,
    rx_cntr: Option<usize>,
    tx: Option<Path<'d, 's, 'n, N, D>>,
    rx: Option<Path<'d, 's, 'n, N, D>>,
    /// Inject bounce buffers, one per transmit op-table slot.
    bounce: Option<N::Dma>,
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
}

impl<'s, 'n, N: Nic + 'n, const D: usize> Domain<'s, 'n, N, D> {
    /// Creates a disabled endpoint (`fi_endpoint`).
    ///
    /// # Errors
    /// `OpNotSupp` for an endpoint type other than DGRAM/UNSPEC; `Inval` for a queue the NIC
    /// does not have, or a receive buffer size outside `header + 1 ..= max_rx_buf_len` (the
    /// header of [`EpAttr::encap`]);
    /// `BadFlags` for unknown or unsupported default op flags.
    pub fn endpoint(&self, attr: &EpAttr) -> Result<Endpoint<'_, 's, 'n, N, D>> {
        let mut attr = *attr;
        match attr.ep_type {
            EpType::Dgram => {}
            EpType::Unspec => attr.ep_type = EpType::Dgram,
            _ => return Err(Error::OpNotSupp),
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
        let name = EpAddr {
            mac: caps.mac,
            ctx: attr.rx_queue,
        };
        let ep = Endpoint::new(self, attr, (true, true), name, name);
        ep.check_op_flags()?;
        Ok(ep)
    }
}

impl<'d, 's, 'n, N: Nic + 'n, const D: usize> Endpoint<'d, 's, 'n, N, D> {
    /// A disabled endpoint with the given directions and addresses (endpoints and the
    /// contexts of scalable endpoints).
    pub(crate) fn new(
        domain: &'d Domain<'s, 'n, N, D>,
        attr: EpAttr,
        (sends, recvs): (bool, bool),
        local: EpAddr,
        source: EpAddr,
    ) -> Self {
        Endpoint {
            domain,
            attr,
            tx_cq: None,
            rx_cq: None,
            av: None,
            tx_cntr: None,
            rx_cntr: None,
            tx: None,
            rx: None,
            bounce: None,
            min_multi_recv: 0,
            sends,
            recvs,
            enabled: false,
            recover: false,
            local,
            source,
            steered: None,
            stx: None,
            owner: 0,
            srx: None,
            srx_owner: 0,
        }
    }

    /// Binds AV `index` for a context (the scalable endpoint's AV).
    pub(crate) fn bind_av_index(&mut self, index: usize) {
        self.domain.avs()[index].bind();
        self.av = Some(index);
    }

    /// Records that receive queue `queue` was given this context's own MAC address.
    pub(crate) fn set_steered(&mut self, queue: u16) {
        self.steered = Some(queue);
    }

    /// Checks the default op flags of the attributes (as `Domain::endpoint` does).
    pub(crate) fn check_op_flags(&self) -> Result {
        if TX_FLAGS_OK.contains(self.attr.tx_op_flags)
            && RX_FLAGS_OK.contains(self.attr.rx_op_flags)
        {
            Ok(())
        } else {
            Err(Error::BadFlags)
        }
    }

    /// Closes the endpoint in place (what dropping it does; idempotent): outstanding operations
    /// are discarded, the queues given back, the bindings and a context's address released.
    pub(crate) fn shut(&mut self) {
        self.close_paths();
        self.leave_shared();
        for b in [self.tx_cq.take(), self.rx_cq.take()].into_iter().flatten() {
            self.domain.cqs()[b.cq].drop_bind();
        }
        if let Some(av) = self.av.take() {
            self.domain.avs()[av].unbind();
        }
        if let Some(q) = self.steered.take() {
            // The queue's address goes with the context; nothing to report from a drop.
            let _ = self.domain.nic().set_rx_queue_mac(q, None);
        }
        self.enabled = false;
    }

    /// Gives the queues back (outstanding operations discarded without completions), then
    /// the bounce buffers — after the queues that could read them are stopped.
    fn close_paths(&mut self) {
        if self.stx.is_some() {
            // The shared queue stays; only this endpoint's operations go. The handle does not
            // close a shared path when dropped.
            if let (Some(path), Ok(cq)) = (self.tx.take(), self.cq_slot(self.tx_cq)) {
                let ctx = self.poll_ctx(self.tx_cq);
                let _ = cq.with_sink(|_| {
                    path.with_state(|st| {
                        st.discard_owner(self.owner, &ctx);
                        Ok(())
                    })
                });
            }
        }
        if self.srx.is_some() {
            if let Some(path) = self.rx.take() {
                let ctx = self.poll_ctx(self.rx_cq);
                let _ = path.with_state(|st| {
                    st.leave_srx(self.srx_owner, &ctx);
                    Ok(())
                });
            }
        }
        for (path, binding) in [(self.tx.take(), self.tx_cq), (self.rx.take(), self.rx_cq)] {
            if let (Some(path), Some(b)) = (path, binding) {
                path.detach(b.cq);
            }
        }
        self.bounce = None;
    }

    /// Registers the endpoint on shared receive path `index` so that frames for its address
    /// are routed to `rx_cq`.
    fn join_srx(&self, index: usize, rx_cq: CqBinding, framing: Framing) -> Result {
        if rx_cq.cq >= 64 || self.rx_cntr.is_some_and(|c| c >= usize::from(u8::MAX)) {
            return Err(Error::Inval);
        }
        let slot = &self.domain.paths()[index];
        if slot.fault().is_some() {
            return Err(Error::OpBadState);
        }
        let mut guard = slot.state.lock();
        let st = guard.as_mut().ok_or(Error::OpBadState)?;
        // One AV for every endpoint of the context (fi_endpoint(3)); the first sets it.
        let shared = st.framing.get_or_insert(framing);
        match shared.av {
            None => shared.av = framing.av,
            Some(av) if Some(av) != framing.av => return Err(Error::Inval),
            Some(_) => {}
        }
        if st
            .srx
            .iter()
            .flatten()
            .any(|e| e.local.ctx == self.local.ctx)
        {
            return Err(Error::Inval);
        }
        st.srx[usize::from(self.srx_owner)] = Some(crate::path::SrxEp {
            local: self.local,
            cq: rx_cq.cq as u8,
            cntr: self.rx_cntr.map_or(u8::MAX, |c| c as u8),
            selective: rx_cq.flags.contains(BindFlags::SELECTIVE_COMPLETION),
            source_err: self.attr.source_err,
            context: self.attr.context,
        });
        slot.cq_mask.fetch_or(1 << rx_cq.cq, Ordering::AcqRel);
        Ok(())
    }

    /// Gives the endpoint's owner number on its shared transmit context back; the last
    /// endpoint to leave a context that was dropped closes its queue.
    fn leave_shared(&mut self) {
        for (index, owner) in [
            (self.stx.take(), self.owner),
            (self.srx.take(), self.srx_owner),
        ] {
            let Some(index) = index else {
                continue;
            };
            if self.domain.paths()[index].release_owner(owner) {
                Path::shared(self.domain, index).close_shared();
            }
        }
    }

    /// `Ok` if data operations may be posted: enabled, and not disabled by a critical fault
    /// (checked without a lock: one load per queue).
    #[inline]
    fn usable(&self) -> Result {
        if !self.enabled {
            return Err(Error::OpBadState);
        }
        if let Some(f) = self.fault() {
            self.settle_fault(f);
            return Err(Error::OpBadState);
        }
        Ok(())
    }

    /// After one queue of the endpoint failed: fails the other too (the whole endpoint is
    /// disabled), discarding its pending operations without an entry of its own. The driver
    /// checks the device first, so that closing the queue later does not wait on a device
    /// that is gone.
    #[cold]
    #[inline(never)]
    fn settle_fault(&self, fault: QueueFault) {
        for (path, binding) in [(&self.tx, self.tx_cq), (&self.rx, self.rx_cq)] {
            let (Some(path), Ok(cq)) = (path.as_ref(), self.cq_slot(binding)) else {
                continue;
            };
            if path.fault().is_some() {
                continue;
            }
            let ctx = self.poll_ctx(binding);
            // CQ lock first, then the path's: the order `read` takes them in.
            let _ = cq.with_sink(|sink| {
                path.with_state(|st| {
                    let found = st.check_queue().unwrap_or(fault);
                    st.fail(found, &ctx, false, &mut |o| sink(o));
                    Ok(())
                })
            });
            path.publish_fault();
        }
    }
}

impl<'d, 's, 'n, N: Nic + 'n, const D: usize> Endpoint<'d, 's, 'n, N, D> {
    /// Bytes before the payload in a send or receive buffer: ringfab's header on the endpoint's
    /// [encapsulation](EpAttr::encap) — [`HEADER_LEN`](proto::HEADER_LEN) on Ethernet,
    /// [`MAX_HEADER_LEN`] on UDP.
    pub fn payload_offset(&self) -> usize {
        self.attr.encap.header_len()
    }

    /// The attributes, as resolved.
    pub fn attr(&self) -> &EpAttr {
        &self.attr
    }

    /// Whether the endpoint is enabled: [`enable`](Self::enable)d, and not disabled since by a
    /// critical fault ([`fault`](Self::fault)).
    pub fn is_enabled(&self) -> bool {
        self.enabled && self.fault().is_none()
    }

    /// The critical fault that disabled the endpoint (module documentation, "Critical
    /// errors"), if one did since it was last enabled.
    pub fn fault(&self) -> Option<QueueFault> {
        [&self.tx, &self.rx]
            .into_iter()
            .flatten()
            .find_map(|p| p.fault())
    }

    /// The endpoint's address (`fi_getname`): its NIC's MAC and its receive queue; for a
    /// receive context of a scalable endpoint, the context's own address.
    pub fn name(&self) -> EpAddr {
        self.local
    }

    /// The largest message payload (`max_msg_size`): the receive buffer or the NIC's frame,
    /// whichever is smaller, less the header.
    pub fn max_msg_size(&self) -> usize {
        let frame = self.domain.nic().capabilities().max_frame_len;
        frame.min(self.attr.rx_buf_len as usize) - self.payload_offset()
    }

    /// The endpoint's attributes as `fi_info` reports them (`ep_attr`, `tx_attr`, `rx_attr`),
    /// computed from the NIC and this endpoint's configuration; see [`crate::info`].
    pub fn info(&self) -> EpInfo {
        let comp_order = if self.domain.nic().capabilities().in_order_completion {
            Order::Strict
        } else {
            Order::None
        };
        EpInfo {
            ep: EndpointAttr {
                ep_type: self.attr.ep_type,
                protocol: Protocol::of(self.attr.encap),
                protocol_version: u32::from(crate::proto::VERSION),
                max_msg_size: self.max_msg_size(),
                msg_prefix_size: 0,
                max_order_size: 0,
                mem_tag_format: 0,
                tx_ctx_cnt: 1,
                rx_ctx_cnt: 1,
                auth_key_size: 0,
            },
            tx: TxAttr {
                op_flags: self.attr.tx_op_flags,
                msg_order: Order::None,
                comp_order,
                inject_size: self.inject_size(),
                size: D,
                iov_limit: self.iov_limit(),
                rma_iov_limit: 0,
            },
            rx: RxAttr {
                op_flags: self.attr.rx_op_flags,
                msg_order: Order::None,
                comp_order,
                total_buffered_recv: 0,
                size: D,
                iov_limit: 1,
            },
        }
    }

    /// Payload bytes [`inject`](Self::inject) accepts (`inject_size`).
    pub fn inject_size(&self) -> usize {
        INJECT_SIZE
    }

    /// Binds a CQ (`fi_ep_bind`): `flags` holds `TRANSMIT`, `RECV` or both, optionally with
    /// `SELECTIVE_COMPLETION`.
    ///
    /// # Errors
    /// `BadFlags` for other bits; `Inval` without a direction or when a direction already has
    /// a CQ; `Domain` for a CQ of another domain; `OpBadState` once enabled.
    pub fn bind_cq<F: Format>(
        &mut self,
        cq: &CompletionQueue<'_, 's, 'n, N, D, F>,
        flags: BindFlags,
    ) -> Result {
        if flags.unknown() != 0 {
            return Err(Error::BadFlags);
        }
        if !cq.in_domain(self.domain) {
            return Err(Error::Domain);
        }
        if self.is_enabled() {
            return Err(Error::OpBadState);
        }
        // A context binds only its own direction; the other bit is ignored.
        let tx = flags.contains(BindFlags::TRANSMIT) && self.sends;
        let rx = flags.contains(BindFlags::RECV) && self.recvs;
        if !(tx || rx) || (tx && self.tx_cq.is_some()) || (rx && self.rx_cq.is_some()) {
            return Err(Error::Inval);
        }
        let binding = Some(CqBinding {
            cq: cq.index(),
            flags,
        });
        let slot = &self.domain.cqs()[cq.index()];
        if tx {
            self.tx_cq = binding;
            slot.add_bind();
        }
        if rx {
            self.rx_cq = binding;
            slot.add_bind();
        }
        Ok(())
    }

    /// Binds a shared transmit context (`fi_ep_bind` with an `fid_stx`): the endpoint's sends
    /// go through its queue instead of one of the endpoint's own ([`EpAttr::tx_queue`] is then
    /// not used), completing on the endpoint's CQ as always.
    ///
    /// # Errors
    /// `OpBadState` after enable; `Inval` for a second shared context, an endpoint that does
    /// not send (a receive context), or a context full of endpoints
    /// ([`MAX_SHARED_ENDPOINTS`](crate::stx::MAX_SHARED_ENDPOINTS)), or another
    /// [encapsulation](EpAttr::encap) than the context's; `Domain` for a context of another domain;
    /// `BadFlags` if the endpoint's default transmit flags are not a subset of the context's
    /// (fi_endpoint(3): "must use a subset of the transmit context's attributes").
    pub fn bind_stx(&mut self, stx: &SharedTxContext<'_, 's, 'n, N, D>) -> Result {
        if self.enabled {
            return Err(Error::OpBadState);
        }
        if self.stx.is_some() || !self.sends || stx.attr().encap != self.attr.encap {
            return Err(Error::Inval);
        }
        if !core::ptr::eq(stx.domain(), self.domain) {
            return Err(Error::Domain);
        }
        if !stx.attr().op_flags.contains(self.attr.tx_op_flags) {
            return Err(Error::BadFlags);
        }
        let slot = &self.domain.paths()[stx.path_index()];
        self.owner = slot.claim_owner().ok_or(Error::Inval)?;
        self.stx = Some(stx.path_index());
        Ok(())
    }

    /// Binds a shared receive context (`fi_ep_bind` with an `fid_srx`): the endpoint receives
    /// from the context's queue, into the receives posted to the context
    /// ([`SharedRxContext::recv`]), completing on the endpoint's CQ. Its address becomes the
    /// context's receive address with the endpoint's own context number
    /// ([`EpAttr::rx_queue`]), which must differ from every other endpoint's on the context;
    /// all of them must use the same AV (fi_endpoint(3)). Receives are not posted to the
    /// endpoint itself then (`OpNotSupp`).
    ///
    /// # Errors
    /// `OpBadState` after enable; `Inval` for a second shared receive context, an endpoint
    /// that does not receive, a context full of endpoints, or another
    /// [encapsulation](EpAttr::encap) than the context's; `Domain` for a context of
    /// another domain; `BadFlags` if the endpoint's default receive flags are not a subset of
    /// the context's.
    pub fn bind_srx(&mut self, srx: &SharedRxContext<'_, 's, 'n, N, D>) -> Result {
        if self.enabled {
            return Err(Error::OpBadState);
        }
        if self.srx.is_some() || !self.recvs || srx.attr().encap != self.attr.encap {
            return Err(Error::Inval);
        }
        if !core::ptr::eq(srx.domain(), self.domain) {
            return Err(Error::Domain);
        }
        if !srx.attr().op_flags.contains(self.attr.rx_op_flags) {
            return Err(Error::BadFlags);
        }
        let slot = &self.domain.paths()[srx.path_index()];
        self.srx_owner = slot.claim_owner().ok_or(Error::Inval)?;
        self.srx = Some(srx.path_index());
        self.local = EpAddr {
            mac: srx.mac(),
            ctx: self.attr.rx_queue,
        };
        self.source = self.local;
        Ok(())
    }

    /// Binds the address vector (`fi_ep_bind` with an AV).
    ///
    /// # Errors
    /// `Inval` if one is already bound; `Domain` for an AV of another domain; `OpBadState`
    /// once enabled.
    pub fn bind_av(&mut self, av: &AddressVector<'_, 's, 'n, N, D>) -> Result {
        if !core::ptr::eq(av.domain(), self.domain) {
            return Err(Error::Domain);
        }
        if self.is_enabled() {
            return Err(Error::OpBadState);
        }
        if self.av.is_some() {
            return Err(Error::Inval);
        }
        self.domain.avs()[av.index()].bind();
        self.av = Some(av.index());
        Ok(())
    }

    /// Binds a counter (`fi_ep_bind` with a counter): `flags` names the operation classes it
    /// counts — `SEND`, `RECV` or both. The counter must be one of the domain's
    /// ([`Domain::with_counters`]). Successes count whether or not they produce a CQ entry
    /// (selective completion); failures count in its error value.
    ///
    /// # Errors
    /// `BadFlags` for unknown bits; `OpNotSupp` for `READ`, `WRITE`, `REMOTE_READ`,
    /// `REMOTE_WRITE` (a DGRAM endpoint has no RMA); `Inval` without a class or when a class
    /// already has a counter; `Domain` for a counter the domain does not hold; `OpBadState`
    /// once enabled.
    pub fn bind_cntr(&mut self, cntr: &Counter<N::Wait>, flags: CntrBindFlags) -> Result {
        if flags.unknown() != 0 {
            return Err(Error::BadFlags);
        }
        let rma = CntrBindFlags::READ
            | CntrBindFlags::WRITE
            | CntrBindFlags::REMOTE_READ
            | CntrBindFlags::REMOTE_WRITE;
        if flags.intersects(rma) {
            return Err(Error::OpNotSupp);
        }
        let index = self
            .domain
            .cntrs()
            .iter()
            .position(|c| core::ptr::eq(*c, cntr))
            .ok_or(Error::Domain)?;
        if self.is_enabled() {
            return Err(Error::OpBadState);
        }
        let send = flags.contains(CntrBindFlags::SEND);
        let recv = flags.contains(CntrBindFlags::RECV);
        if !(send || recv) || (send && self.tx_cntr.is_some()) || (recv && self.rx_cntr.is_some()) {
            return Err(Error::Inval);
        }
        if send {
            self.tx_cntr = Some(index);
        }
        if recv {
            self.rx_cntr = Some(index);
        }
        Ok(())
    }

    /// Drives progress (libfabric's `FI_PROGRESS_MANUAL`): polls both queues, moving what
    /// completed into the CQs' queues (credits guarantee the room) and counting it on the
    /// bound counters. A CQ read does this for its own queues; an application that waits on a
    /// counter calls it, e.g. as the progress hook of
    /// [`Counter::wait_with_progress`](crate::cntr::Counter::wait_with_progress).
    ///
    /// # Errors
    /// `OpBadState` before enable.
    pub fn progress(&self) -> Result {
        self.usable()?;
        for (path, binding) in [(&self.tx, self.tx_cq), (&self.rx, self.rx_cq)] {
            let Some(path) = path.as_ref() else {
                continue;
            };
            let cq = self.cq_slot(binding)?;
            let ctx = self.poll_ctx(binding);
            cq.with_sink(|sink| {
                path.with_state(|st| {
                    st.poll(D, &ctx, &mut |o: Outcome<'_>| {
                        sink(o);
                        false
                    });
                    Ok(())
                })
            })??;
            path.publish_fault();
        }
        // A fault found by this progress disables the endpoint now.
        self.usable()
    }

    /// Enables the endpoint (`fi_enable`): opens its NIC queues and wires them to the CQs.
    ///
    /// It also re-enables an endpoint a critical fault disabled (fi_endpoint(3): "fi_enable
    /// may also be used to re-enable an endpoint that has been disabled as a result of
    /// experiencing a critical error"): the old queues are closed (anything still pending on
    /// them discarded), the driver recovers the device ([`Nic::recover`]: a reset device is
    /// brought up again), and the queues are opened afresh with the same bindings.
    ///
    /// # Errors
    /// `OpBadState` if already enabled (and not disabled by a fault); `NoCq` without a CQ for
    /// each direction; `NoAv` without an address vector; `NoMem` when the domain has no free
    /// path slots; `Device(DeviceRemoved)` when re-enabling after a fault finds the device
    /// gone; `Device(_)` when the NIC refuses a queue (in use, …) or fails to come back. On
    /// error the endpoint stays disabled and can be enabled again.
    pub fn enable(&mut self) -> Result {
        if self.enabled {
            if self.fault().is_none() {
                return Err(Error::OpBadState);
            }
            // Disabled by a critical fault: the old queues go, the device is recovered below.
            self.close_paths();
            self.enabled = false;
            self.recover = true;
        }
        if (self.sends && self.tx_cq.is_none()) || (self.recvs && self.rx_cq.is_none()) {
            return Err(Error::NoCq);
        }
        let Some(av) = self.av else {
            return Err(Error::NoAv);
        };
        if self.recover {
            self.domain.nic().recover()?;
            self.recover = false;
        }
        let framing = Framing {
            local: self.local,
            av: Some(av),
            source_err: self.attr.source_err,
            context: self.attr.context,
            encap: self.attr.encap,
        };
        let mut tx = None;
        let mut bounce = None;
        if let (true, Some(tx_cq), Some(index)) = (self.sends, self.tx_cq, self.stx) {
            // Sends go through the shared context's queue, which reports to each operation's
            // own CQ: the CQ must fit the path's mask and the counter the op table's byte.
            if tx_cq.cq >= 64 || self.tx_cntr.is_some_and(|c| c >= usize::from(u8::MAX)) {
                return Err(Error::Inval);
            }
            let slot = &self.domain.paths()[index];
            if slot.fault().is_some() {
                return Err(Error::OpBadState);
            }
            bounce = Some(self.domain.nic().alloc_dma(D * INJECT_SLOT)?);
            slot.cq_mask.fetch_or(1 << tx_cq.cq, Ordering::AcqRel);
            tx = Some(Path::shared(self.domain, index));
        } else if let (true, Some(tx_cq)) = (self.sends, self.tx_cq) {
            bounce = Some(self.domain.nic().alloc_dma(D * INJECT_SLOT)?);
            // A blocking CQ owns an interrupt vector: its queues are steered there, so that
            // one wait handle covers them (docs/architecture.md, "Waiting").
            let config = match self.domain.cqs()[tx_cq.cq].interrupt_vector() {
                Some(v) => TxConfig::with_vector(v),
                None => TxConfig::default(),
            };
            let path = self.domain.open_tx(self.attr.tx_queue, config)?;
            path.attach(tx_cq.cq, tx_cq.flags, framing, self.tx_cntr);
            tx = Some(path);
        }
        if let (true, Some(rx_cq), Some(index)) = (self.recvs, self.rx_cq, self.srx) {
            if let Err(e) = self.join_srx(index, rx_cq, framing) {
                if let (Some(p), Some(b)) = (tx, self.tx_cq) {
                    if self.stx.is_none() {
                        p.detach(b.cq);
                    }
                }
                return Err(e);
            }
            self.rx = Some(Path::shared(self.domain, index));
        } else if let (true, Some(rx_cq)) = (self.recvs, self.rx_cq) {
            let mut config = RxConfig::new(self.attr.rx_buf_len);
            if let Some(v) = self.domain.cqs()[rx_cq.cq].interrupt_vector() {
                config = config.with_vector(v);
            }
            let path = match self.domain.open_rx(self.attr.rx_queue, config) {
                Ok(p) => p,
                Err(e) => {
                    // Give the transmit queue back: the endpoint stays disabled.
                    if let (Some(p), Some(b)) = (tx, self.tx_cq) {
                        p.detach(b.cq);
                    }
                    return Err(e);
                }
            };
            path.attach(rx_cq.cq, rx_cq.flags, framing, self.rx_cntr);
            self.rx = Some(path);
        }
        self.tx = tx;
        self.bounce = bounce;
        self.enabled = true;
        Ok(())
    }

    /// Sends `len` payload bytes of `buf` (written at [`payload_offset`](Self::payload_offset))
    /// to `dest` (`fi_send`), with the endpoint's default transmit flags. The buffer comes back
    /// with the completion ([`CompletionQueue::read_owned`]), or with the error.
    ///
    /// # Errors
    /// See [`sendmsg`](Self::sendmsg).
    pub fn send(
        &self,
        buf: Buf<'s>,
        len: usize,
        dest: FiAddr,
        context: OpContext,
    ) -> core::result::Result<(), (Error, Buf<'s>)> {
        self.sendmsg(buf, len, dest, None, context, self.attr.tx_op_flags)
    }

    /// [`send`](Self::send) with remote CQ data (`fi_senddata`): the receiver's completion
    /// carries `data` with `FI_REMOTE_CQ_DATA`.
    ///
    /// # Errors
    /// See [`sendmsg`](Self::sendmsg).
    pub fn senddata(
        &self,
        buf: Buf<'s>,
        len: usize,
        data: u64,
        dest: FiAddr,
        context: OpContext,
    ) -> core::result::Result<(), (Error, Buf<'s>)> {
        let flags = self.attr.tx_op_flags | OpFlags::REMOTE_CQ_DATA;
        self.sendmsg(buf, len, dest, Some(data), context, flags)
    }

    /// Sends with explicit flags (`fi_sendmsg`). `FI_MORE` defers the doorbell to a later call
    /// without it — the way to send a batch with one doorbell; a call that fails rings it
    /// too, so deferred posts never wait for a call that may not come. `data` is sent with
    /// `FI_REMOTE_CQ_DATA` (which must then be in `flags`).
    ///
    /// # Errors
    /// The buffer comes back with the error, and nothing was posted:
    /// `OpBadState` before [`enable`](Self::enable); `BadFlags` for flags a DGRAM endpoint
    /// cannot honour (`FI_DELIVERY_COMPLETE`, `FI_MATCH_COMPLETE`, `FI_COMMIT_COMPLETE`,
    /// `FI_FENCE`, unknown bits) or `REMOTE_CQ_DATA` without data; `MsgSize` for a payload
    /// over [`max_msg_size`](Self::max_msg_size); `Inval` for a buffer too short for header
    /// and payload or a destination not in the AV; `Again` when the ring, the op table or the
    /// CQ's credits are full (retry after reading completions).
    pub fn sendmsg(
        &self,
        mut buf: Buf<'s>,
        len: usize,
        dest: FiAddr,
        data: Option<u64>,
        context: OpContext,
        flags: OpFlags,
    ) -> core::result::Result<(), (Error, Buf<'s>)> {
        let header = match self.check_send(len, dest, data, flags) {
            Ok(h) => h,
            Err(e) => return Err((e, buf)),
        };
        let Some(segment) = buf.tx_segment(self.payload_offset() + len) else {
            return Err((Error::Inval, buf));
        };
        let mut bytes = [0u8; MAX_HEADER_LEN];
        if let Err(e) = buf.write(0, header.emit(self.attr.encap, &mut bytes)) {
            return Err((e, buf));
        }
        let r = self.post_tx(&[segment], buf.raw(), context, flags);
        buf.posted(r)
    }

    /// Buffers a gather send may have: [`IOV_MAX`](crate::mr::IOV_MAX), or fewer where the
    /// NIC takes fewer segments per frame (one goes to ringfab's header).
    pub fn iov_limit(&self) -> usize {
        crate::mr::IOV_MAX.min(
            self.domain
                .nic()
                .capabilities()
                .max_tx_segments
                .saturating_sub(1),
        )
    }

    /// Sends the buffers of `iov` as one message, in order (`fi_sendv`), with the endpoint's
    /// default transmit flags: each contributes the bytes [`Iov::push`] said, from its start.
    /// ringfab's header goes out of the endpoint's own bounce memory in front of them, so
    /// nothing is copied. The buffers come back together with the completion
    /// ([`CompletionQueue::read_owned_iov`]), or with the error.
    ///
    /// # Errors
    /// See [`sendmsgv`](Self::sendmsgv).
    #[allow(
        clippy::result_large_err,
        reason = "decision 6: the buffers come back with the error; no allocator to box them"
    )]
    pub fn sendv(
        &self,
        iov: Iov<'s>,
        dest: FiAddr,
        context: OpContext,
    ) -> core::result::Result<(), (Error, Iov<'s>)> {
        self.sendmsgv(iov, dest, None, context, self.attr.tx_op_flags)
    }

    /// [`sendv`](Self::sendv) with explicit flags and remote CQ data (`fi_sendmsg` with an
    /// iov).
    ///
    /// # Errors
    /// The buffers come back with the error and nothing was posted: `Inval` for an empty
    /// list, more buffers than [`iov_limit`](Self::iov_limit), or an empty buffer; `Again`
    /// when the path's gather records, the ring, the op table or the CQ's credits are full;
    /// otherwise as [`sendmsg`](Self::sendmsg).
    #[allow(
        clippy::result_large_err,
        reason = "decision 6: the buffers come back with the error; no allocator to box them"
    )]
    pub fn sendmsgv(
        &self,
        iov: Iov<'s>,
        dest: FiAddr,
        data: Option<u64>,
        context: OpContext,
        flags: OpFlags,
    ) -> core::result::Result<(), (Error, Iov<'s>)> {
        let n = iov.len();
        if n == 0 || n > self.iov_limit() || (0..n).any(|i| iov.get(i).is_some_and(|b| b.1 == 0)) {
            return Err((Error::Inval, iov));
        }
        let header = match self.check_send(iov.total(), dest, data, flags) {
            Ok(h) => h,
            Err(e) => return Err((e, iov)),
        };
        let (Some(tx), Some(bounce)) = (&self.tx, &self.bounce) else {
            return Err((Error::OpBadState, iov));
        };
        let cq = match self.cq_slot(self.tx_cq) {
            Ok(cq) => cq,
            Err(e) => return Err((e, iov)),
        };
        let mut bytes = [0u8; MAX_HEADER_LEN];
        let bytes = header.emit(self.attr.encap, &mut bytes);
        let mut segs = [TxSegment {
            iova: crate::hal::Iova(0),
            len: 0,
        }; crate::mr::IOV_MAX + 1];
        let mut raws = [None; crate::mr::IOV_MAX];
        for i in 0..n {
            let Some((b, len)) = iov.get(i) else {
                return Err((Error::Inval, iov));
            };
            let Some(seg) = b.tx_segment(len) else {
                return Err((Error::Inval, iov));
            };
            segs[i + 1] = seg;
            raws[i] = Some(b.raw());
        }
        let r = tx.with_state(|st| {
            // The header goes out of the bounce slot of the op-table slot the post takes, as
            // an inject's frame does: free exactly as long as that slot is.
            let slot = st.next_slot().ok_or(Error::Again)?;
            let offset = slot * INJECT_SLOT;
            bounce.write_bytes(offset, bytes);
            segs[0] = TxSegment {
                iova: crate::hal::Iova(bounce.iova().0 + offset as u64),
                len: bytes.len() as u16,
            };
            let first = raws[0].ok_or(Error::Inval)?;
            let mut extra = [None; crate::mr::IOV_MAX - 1];
            extra.copy_from_slice(&raws[1..]);
            let r = st.post_send_iov(
                cq,
                &segs[..n + 1],
                first,
                extra,
                context,
                flags,
                self.poster(),
            );
            if !flags.contains(OpFlags::MORE) || r.is_err() {
                st.doorbell();
            }
            r
        });
        iov.posted(r)
    }

    /// Sends `payload` without a buffer of the application's (`fi_inject`): it is copied into
    /// one of the endpoint's bounce buffers, so `payload` may be reused at once, and no
    /// completion is generated for success (an error still reaches the CQ, with a NULL
    /// context).
    ///
    /// # Errors
    /// `MsgSize` over [`inject_size`](Self::inject_size); otherwise as
    /// [`sendmsg`](Self::sendmsg).
    pub fn inject(&self, payload: &[u8], dest: FiAddr) -> Result {
        self.inject_inner(payload, None, dest)
    }

    /// [`inject`](Self::inject) with remote CQ data (`fi_injectdata`).
    ///
    /// # Errors
    /// As [`inject`](Self::inject).
    pub fn injectdata(&self, payload: &[u8], data: u64, dest: FiAddr) -> Result {
        self.inject_inner(payload, Some(data), dest)
    }

    fn inject_inner(&self, payload: &[u8], data: Option<u64>, dest: FiAddr) -> Result {
        if payload.len() > INJECT_SIZE {
            return Err(Error::MsgSize);
        }
        let flags = if data.is_some() {
            OpFlags::REMOTE_CQ_DATA
        } else {
            OpFlags::empty()
        };
        let header = self.check_send(payload.len(), dest, data, flags)?;
        let (Some(tx), Some(bounce)) = (&self.tx, &self.bounce) else {
            return Err(Error::OpBadState);
        };
        let mut bytes = [0u8; MAX_HEADER_LEN];
        let bytes = header.emit(self.attr.encap, &mut bytes);
        let cq = self.cq_slot(self.tx_cq)?;
        tx.with_state(|st| {
            // The bounce slot belongs to the op-table slot the post will take: it is free
            // exactly as long as that slot is.
            let slot = st.next_slot().ok_or(Error::Again)?;
            let offset = slot * INJECT_SLOT;
            bounce.write_bytes(offset, bytes);
            bounce.write_bytes(offset + bytes.len(), payload);
            let len = bytes.len() + payload.len();
            let segment = TxSegment {
                iova: crate::hal::Iova(bounce.iova().0 + offset as u64),
                len: len as u16,
            };
            let raw = RawBuf {
                cpu: 0,
                iova: segment.iova,
                len: len as u32,
                mr: NO_MR,
            };
            // No operation context of the application's: an error reports the endpoint's.
            st.post_send_with(cq, &[segment], raw, self.attr.context, false, self.poster())?;
            st.doorbell();
            Ok(())
        })
    }

    /// Checks a send and builds its header.
    fn check_send(
        &self,
        len: usize,
        dest: FiAddr,
        data: Option<u64>,
        flags: OpFlags,
    ) -> Result<Header> {
        self.usable()?;
        if !TX_FLAGS_OK.contains(flags) || flags.contains(OpFlags::REMOTE_CQ_DATA) != data.is_some()
        {
            return Err(Error::BadFlags);
        }
        if len > self.max_msg_size() {
            return Err(Error::MsgSize);
        }
        let av = self
            .av
            .and_then(|i| self.domain.avs().get(i))
            .ok_or(Error::NoAv)?;
        let (peer, rx) = av.lookup(dest).ok_or(Error::Inval)?;
        let (dst, dst_ctx) = if peer.mac.is_multicast() {
            (peer.mac, proto::ANY_CTX)
        } else if rx > 0 {
            // A named receive context of a scalable endpoint (`fi_rx_addr`).
            (proto::context_mac(peer.mac, rx), rx)
        } else {
            (peer.mac, peer.ctx)
        };
        Ok(Header {
            dst,
            src: self.source.mac,
            dst_ctx,
            src_ctx: self.source.ctx,
            payload_len: len as u16,
            data,
            flow: proto::flow(self.attr.tx_queue, self.source.ctx),
        })
    }

    /// Who posts, on a shared transmit path: `None` on the endpoint's own queue.
    fn poster(&self) -> Option<Poster> {
        self.stx?;
        let b = self.tx_cq?;
        Some(Poster {
            cq: b.cq,
            bind: b.flags,
            owner: self.owner,
            cntr: self.tx_cntr,
        })
    }

    /// What polling one of the endpoint's paths on behalf of `binding`'s CQ needs (the CQ
    /// exists: `cq_slot` was asked first).
    fn poll_ctx(&self, binding: Option<CqBinding>) -> crate::path::PollCtx<'s, N> {
        let mut ctx = self.domain.poll_ctx(binding.map_or(0, |b| b.cq));
        ctx.owner = self.owner;
        ctx
    }

    fn cq_slot(&self, binding: Option<CqBinding>) -> Result<&'s CqSlot<'s>> {
        let b = binding.ok_or(Error::NoCq)?;
        self.domain.cqs().get(b.cq).ok_or(Error::NoCq)
    }

    fn post_tx(
        &self,
        segments: &[TxSegment],
        raw: RawBuf,
        context: OpContext,
        flags: OpFlags,
    ) -> Result {
        let tx = self.tx.as_ref().ok_or(Error::OpBadState)?;
        let cq = self.cq_slot(self.tx_cq)?;
        tx.with_state(|st| {
            let r = st.post_send(cq, segments, raw, context, flags, self.poster());
            // A refused post rings too: earlier FI_MORE posts must not wait for a call that
            // may never come.
            if !flags.contains(OpFlags::MORE) || r.is_err() {
                st.doorbell();
            }
            r
        })
    }

    /// Posts `buf` to receive one message (`fi_recv`) with the endpoint's default receive
    /// flags. The payload lands at [`payload_offset`](Self::payload_offset); the completion's
    /// `len` is its length and the buffer comes back with it.
    ///
    /// # Errors
    /// See [`recvmsg`](Self::recvmsg).
    pub fn recv(
        &self,
        buf: Buf<'s>,
        context: OpContext,
    ) -> core::result::Result<(), (Error, Buf<'s>)> {
        self.recvmsg(buf, context, self.attr.rx_op_flags)
    }

    /// Posts the buffers of `iov` to receive one message (`fi_recvv`), with the endpoint's
    /// default receive flags. A receive descriptor of these NICs takes one buffer, so the
    /// receive `iov_limit` is 1 ([`Endpoint::info`]): `iov` holds exactly one, posted as by
    /// [`recv`](Self::recv) (its length in the list is not used: the whole buffer receives).
    ///
    /// # Errors
    /// `Inval` with the list back for an empty list or more than one buffer; otherwise as
    /// [`recvmsg`](Self::recvmsg), the list back.
    #[allow(
        clippy::result_large_err,
        reason = "decision 6: the buffers come back with the error; no allocator to box them"
    )]
    pub fn recvv(
        &self,
        iov: Iov<'s>,
        context: OpContext,
    ) -> core::result::Result<(), (Error, Iov<'s>)> {
        if iov.len() != 1 {
            return Err((Error::Inval, iov));
        }
        let Some(buf) = iov.into_bufs().next() else {
            return Err((Error::Inval, Iov::new()));
        };
        self.recv(buf, context)
            .map_err(|(e, buf)| (e, Iov::from_bufs([buf])))
    }

    /// Posts a receive with explicit flags (`fi_recvmsg`); `FI_MORE` defers the doorbell.
    ///
    /// `FI_MULTI_RECV`: the buffer takes many messages. A descriptor ring places one frame per
    /// descriptor, so the buffer is carved into slots of the queue's buffer size
    /// ([`EpAttr::rx_buf_len`]), one message each; every completion's `buf` points at its
    /// payload inside the buffer, and the buffer is released — the completion carries
    /// `FI_MULTI_RECV` and hands the `Buf` back — with the message after which the free space
    /// left would be below `MIN_MULTI_RECV` ([`EpOpt::MinMultiRecv`]), so only that many slots
    /// are posted (never more than the buffer holds). Every slot reports its completion, even
    /// under selective completion (the application needs each `buf`).
    ///
    /// # Errors
    /// The buffer comes back with the error: `OpBadState` before enable; `BadFlags` for flags
    /// other than `COMPLETION`/`MORE`/`MULTI_RECV`; `Inval` for a buffer shorter than the
    /// receive queue's buffer size (the NIC may write that much), or a multi-receive buffer
    /// that needs more slots than the ring has descriptors; `Again` when the ring, the op
    /// table, the CQ's credits (a multi-receive buffer needs one per slot) or the path's
    /// multi-receive table are full.
    pub fn recvmsg(
        &self,
        buf: Buf<'s>,
        context: OpContext,
        flags: OpFlags,
    ) -> core::result::Result<(), (Error, Buf<'s>)> {
        if let Err(e) = self.usable() {
            return Err((e, buf));
        }
        if self.srx.is_some() {
            // Receives go to the shared receive context (fi_endpoint(3)).
            return Err((Error::OpNotSupp, buf));
        }
        let Some(rx) = self.rx.as_ref() else {
            return Err((Error::OpBadState, buf));
        };
        if !RX_FLAGS_OK.contains(flags) {
            return Err((Error::BadFlags, buf));
        }
        let cq = match self.cq_slot(self.rx_cq) {
            Ok(cq) => cq,
            Err(e) => return Err((e, buf)),
        };
        let raw = buf.raw();
        let min_multi_recv = self.min_multi_recv;
        let header = self.payload_offset() as u32;
        let r = rx.with_state(|st| {
            let Queue::Rx(q) = &st.queue else {
                return Err(Error::OpBadState);
            };
            let dev_len = q.buf_len();
            if flags.contains(OpFlags::MULTI_RECV) {
                let slots = multi_recv_slots(raw.len, dev_len, min_multi_recv)?;
                if slots as usize > D {
                    // More messages than the ring has descriptors: it could never be posted.
                    return Err(Error::Inval);
                }
                let accepted = dev_len - header;
                let r = st.post_multi_recv(cq, raw, dev_len, slots, accepted, context);
                if !flags.contains(OpFlags::MORE) || r.is_err() {
                    st.doorbell();
                }
                return r;
            }
            if raw.len < dev_len {
                return Err(Error::Inval);
            }
            let accepted = dev_len.min(raw.len) - header;
            let r = st.post_recv_one(cq, raw, accepted, context, flags);
            if !flags.contains(OpFlags::MORE) || r.is_err() {
                st.doorbell();
            }
            r
        });
        buf.posted(r)
    }

    /// Cancels the outstanding operation posted with `context` (`fi_cancel`): receives first,
    /// then sends. It completes with an `FI_ECANCELED` error entry (its owned buffer comes back
    /// through [`readerr_owned`](crate::cq::CompletionQueue::readerr_owned)); operations the
    /// NIC had already finished complete normally, and every other operation is untouched (it
    /// is reposted in its order after the queue flush a descriptor ring needs, and completes
    /// later, exactly once). Bounded time: one queue flush. Returns whether an operation was
    /// found; an unknown context changes nothing.
    ///
    /// # Errors
    /// `OpBadState` before enable.
    pub fn cancel(&self, context: OpContext) -> Result<bool> {
        self.usable()?;
        for (path, binding) in [(&self.rx, self.rx_cq), (&self.tx, self.tx_cq)] {
            let Some(path) = path.as_ref() else {
                continue;
            };
            let cq = self.cq_slot(binding)?;
            let ctx = self.poll_ctx(binding);
            // CQ lock first, then the path's: the order `read` takes them in.
            let found =
                cq.with_sink(|sink| path.with_state(|st| Ok(st.cancel(context, &ctx, sink))))??;
            if found {
                self.wake_readers(cq);
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// A software insertion raises no interrupt: wake a reader blocked on `cq` through its
    /// vector's handle.
    fn wake_readers(&self, cq: &CqSlot<'_>) {
        if let Some(v) = cq.interrupt_vector() {
            if cq.has_sleepers() {
                if let Ok(w) = self.domain.nic().irq(v) {
                    w.notify();
                }
            }
        }
    }

    /// Transmit operations that can be posted now (`fi_tx_size_left`).
    ///
    /// # Errors
    /// `OpBadState` before enable.
    pub fn tx_size_left(&self) -> Result<usize> {
        self.size_left(self.tx.as_ref(), self.tx_cq)
    }

    /// Receive operations that can be posted now (`fi_rx_size_left`).
    ///
    /// # Errors
    /// `OpBadState` before enable.
    pub fn rx_size_left(&self) -> Result<usize> {
        self.size_left(self.rx.as_ref(), self.rx_cq)
    }

    fn size_left(
        &self,
        path: Option<&Path<'d, 's, 'n, N, D>>,
        b: Option<CqBinding>,
    ) -> Result<usize> {
        self.usable()?;
        let path = path.ok_or(Error::OpBadState)?;
        let credits = self.cq_slot(b)?.credits();
        path.with_state(|st| Ok(st.free_slots().min(credits)))
    }

    /// Frames received on this endpoint's queue that were not ringfab frames for it (other
    /// protocols, other contexts, malformed headers) and were dropped, their buffers reposted.
    pub fn dropped_frames(&self) -> u64 {
        self.rx
            .as_ref()
            .and_then(|rx| rx.with_state(|st| Ok(st.dropped)).ok())
            .unwrap_or(0)
    }

    /// `fi_getopt` at level `FI_OPT_ENDPOINT`.
    ///
    /// # Errors
    /// `NoProtoOpt` for an unknown option.
    pub fn getopt(&self, opt: EpOpt) -> Result<usize> {
        match opt {
            EpOpt::MinMultiRecv => Ok(self.min_multi_recv),
            EpOpt::CmDataSize => Ok(0),
            EpOpt::Other(_) => Err(Error::NoProtoOpt),
        }
    }

    /// `fi_setopt` at level `FI_OPT_ENDPOINT`.
    ///
    /// # Errors
    /// `NoProtoOpt` for an unknown or read-only option (`CM_DATA_SIZE`).
    pub fn setopt(&mut self, opt: EpOpt, value: usize) -> Result {
        match opt {
            EpOpt::MinMultiRecv => {
                self.min_multi_recv = value;
                Ok(())
            }
            EpOpt::CmDataSize | EpOpt::Other(_) => Err(Error::NoProtoOpt),
        }
    }

    /// `fi_control(FI_GETOPSFLAG)`: the default op flags of one direction; `which` holds
    /// exactly one of `TRANSMIT` and `RECV`.
    ///
    /// # Errors
    /// `Inval` unless exactly one direction is named.
    pub fn get_op_flags(&self, which: BindFlags) -> Result<OpFlags> {
        op_flags_of(self.attr.tx_op_flags, self.attr.rx_op_flags, which)
    }

    /// `fi_control(FI_SETOPSFLAG)`: sets the default op flags of one direction.
    ///
    /// # Errors
    /// `Inval` unless exactly one direction is named; `BadFlags` for flags that direction
    /// does not accept.
    pub fn set_op_flags(&mut self, which: BindFlags, flags: OpFlags) -> Result {
        let attr = &mut self.attr;
        set_op_flags_in(&mut attr.tx_op_flags, &mut attr.rx_op_flags, which, flags)
    }

    /// Closes the endpoint (`fi_close`): outstanding operations are discarded without
    /// completions (owned buffers return to their regions), the queues go back to the NIC,
    /// and the CQs and AV are unbound.
    pub fn close(self) {
        drop(self);
    }
}

/// How many slots of `slot_len` bytes a multi-receive buffer of `len` bytes gets: the message
/// after which less than `min` bytes (at least 1) would be left is the last.
fn multi_recv_slots(len: u32, slot_len: u32, min: usize) -> Result<u32> {
    let fit = len / slot_len;
    if fit == 0 {
        return Err(Error::Inval);
    }
    let min = min.max(1) as u64;
    // Release after message j when (fit - j) * slot_len < min: the smallest such j.
    let keep = (min - 1) / u64::from(slot_len); // slots whose room must stay free
    let slots = u64::from(fit).saturating_sub(keep).max(1);
    Ok(slots as u32)
}

/// An alias of an endpoint (`fi_ep_alias`): the same queues, its own default flags for one
/// direction. It borrows the endpoint, so the endpoint cannot be closed — released — while an
/// alias lives (fi_endpoint(3): "all allocated aliases must be closed for the underlying
/// endpoint to be released"), and aliases need no bookkeeping of their own.
pub struct Alias<'e, 'd, 's, 'n, N: Nic + 'n, const D: usize> {
    ep: &'e Endpoint<'d, 's, 'n, N, D>,
    tx_op_flags: OpFlags,
    rx_op_flags: OpFlags,
}

impl<'d, 's, 'n, N: Nic + 'n, const D: usize> Endpoint<'d, 's, 'n, N, D> {
    /// Creates an alias (`fi_ep_alias`): `flags` holds exactly one of `TRANSMIT` and `RECV`,
    /// and `op_flags` become that direction's defaults for operations posted through the alias;
    /// the other direction inherits the endpoint's.
    ///
    /// # Errors
    /// `Inval` unless exactly one direction is named; `BadFlags` for op flags that direction
    /// does not accept.
    pub fn alias(
        &self,
        which: BindFlags,
        op_flags: OpFlags,
    ) -> Result<Alias<'_, 'd, 's, 'n, N, D>> {
        let (mut tx, mut rx) = (self.attr.tx_op_flags, self.attr.rx_op_flags);
        set_op_flags_in(&mut tx, &mut rx, which, op_flags)?;
        Ok(Alias {
            ep: self,
            tx_op_flags: tx,
            rx_op_flags: rx,
        })
    }
}

impl<'e, 'd, 's, 'n, N: Nic + 'n, const D: usize> Alias<'e, 'd, 's, 'n, N, D> {
    /// [`Endpoint::send`] with the alias's transmit flags.
    ///
    /// # Errors
    /// As [`Endpoint::sendmsg`].
    pub fn send(
        &self,
        buf: Buf<'s>,
        len: usize,
        dest: FiAddr,
        context: OpContext,
    ) -> core::result::Result<(), (Error, Buf<'s>)> {
        self.ep
            .sendmsg(buf, len, dest, None, context, self.tx_op_flags)
    }

    /// [`Endpoint::recv`] with the alias's receive flags.
    ///
    /// # Errors
    /// As [`Endpoint::recvmsg`].
    pub fn recv(
        &self,
        buf: Buf<'s>,
        context: OpContext,
    ) -> core::result::Result<(), (Error, Buf<'s>)> {
        self.ep.recvmsg(buf, context, self.rx_op_flags)
    }

    /// `fi_control(FI_GETOPSFLAG)` on the alias.
    ///
    /// # Errors
    /// `Inval` unless exactly one direction is named.
    pub fn get_op_flags(&self, which: BindFlags) -> Result<OpFlags> {
        op_flags_of(self.tx_op_flags, self.rx_op_flags, which)
    }

    /// `fi_control(FI_SETOPSFLAG)` on the alias (the endpoint's own flags do not change).
    ///
    /// # Errors
    /// `Inval` unless exactly one direction is named; `BadFlags` for flags that direction
    /// does not accept.
    pub fn set_op_flags(&mut self, which: BindFlags, flags: OpFlags) -> Result {
        set_op_flags_in(&mut self.tx_op_flags, &mut self.rx_op_flags, which, flags)
    }

    /// The endpoint the alias belongs to.
    pub fn endpoint(&self) -> &'e Endpoint<'d, 's, 'n, N, D> {
        self.ep
    }
}

enum Dir {
    Tx,
    Rx,
}

/// `fi_control(FI_GETOPSFLAG)` over a pair of default op flags: `which` names exactly one
/// direction (`Inval` otherwise).
fn op_flags_of(tx: OpFlags, rx: OpFlags, which: BindFlags) -> Result<OpFlags> {
    match direction(which)? {
        Dir::Tx => Ok(tx),
        Dir::Rx => Ok(rx),
    }
}

/// `fi_control(FI_SETOPSFLAG)` over a pair of default op flags: `Inval` unless `which` names
/// exactly one direction, `BadFlags` for flags that direction does not accept.
fn set_op_flags_in(tx: &mut OpFlags, rx: &mut OpFlags, which: BindFlags, flags: OpFlags) -> Result {
    match direction(which)? {
        Dir::Tx if TX_FLAGS_OK.contains(flags) => *tx = flags,
        Dir::Rx if RX_FLAGS_OK.contains(flags) => *rx = flags,
        _ => return Err(Error::BadFlags),
    }
    Ok(())
}

fn direction(which: BindFlags) -> Result<Dir> {
    let tx = which.contains(BindFlags::TRANSMIT);
    let rx = which.contains(BindFlags::RECV);
    match (tx, rx, which.unknown()) {
        (true, false, 0) => Ok(Dir::Tx),
        (false, true, 0) => Ok(Dir::Rx),
        _ => Err(Error::Inval),
    }
}

impl<N: Nic, const D: usize> Drop for Endpoint<'_, '_, '_, N, D> {
    fn drop(&mut self) {
        self.shut();
    }
}
