//! An endpoint's life: its state and bindings (`fi_ep_bind`), `fi_enable` and critical
//! faults, `fi_close`, and what it reports of itself.

use crate::addr::{AddrFormat, EpAddr};
use crate::av::AddressVector;
use crate::cntr::Counter;
use crate::cq::queue::CompletionQueue;
use crate::domain::Domain;
use crate::engine::NO_MR;
use crate::engine::{Framing, Outcome};
use crate::entry::Format;
use crate::flags::{BindFlags, CntrBindFlags, OpFlags};
use crate::hal::{Nic, QueueFault, RxConfig, TxConfig};
use crate::info::{EndpointAttr, EpInfo, Order, Protocol, RxAttr, TxAttr};
use crate::ip::SockAddrIn;
use crate::path::Path;
use crate::srx::SharedRxContext;
use crate::stx::SharedTxContext;
use crate::{Error, Result};
use core::sync::atomic::Ordering;

use super::*;

impl Endpoint {
    /// A disabled endpoint with the given directions and addresses (endpoints and the
    /// contexts of scalable endpoints).
    pub(crate) fn new<N: Nic, const D: usize>(
        domain: &Domain<'_, N, D>,
        attr: EpAttr,
        (sends, recvs): (bool, bool),
        local: EpAddr,
        source: EpAddr,
    ) -> Self {
        Endpoint {
            domain: domain.id(),
            attr,
            tx_cq: None,
            rx_cq: None,
            av: None,
            tx_cntr: None,
            rx_cntr: None,
            tx: None,
            rx: None,
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
            port: 0,
            owns_port: false,
            max_send: 0,
        }
    }

    /// The id of the domain it belongs to.
    pub(crate) fn domain_id(&self) -> u32 {
        self.domain
    }

    /// The endpoint's transmit queue once enabled, as a view of its path.
    pub(super) fn tx_path<'d, 'n, N: Nic + 'n, const D: usize>(
        &self,
        dom: &'d Domain<'n, N, D>,
    ) -> Option<Path<'d, 'n, N, D>> {
        self.tx.map(|i| Path::at(dom, i))
    }

    /// The endpoint's receive queue once enabled, as a view of its path.
    pub(super) fn rx_path<'d, 'n, N: Nic + 'n, const D: usize>(
        &self,
        dom: &'d Domain<'n, N, D>,
    ) -> Option<Path<'d, 'n, N, D>> {
        self.rx.map(|i| Path::at(dom, i))
    }

    /// Binds AV `index` for a context (the scalable endpoint's AV).
    pub(crate) fn bind_av_index<'d, 'n, N: Nic + 'n, const D: usize>(
        &mut self,
        dom: &'d Domain<'n, N, D>,
        index: usize,
    ) {
        dom.avs().at(index).bind();
        self.av = Some(index);
    }

    /// Gives a plain-UDP context its scalable endpoint's port (bound and released by that).
    pub(crate) fn use_port(&mut self, port: u16) {
        self.port = port;
        self.owns_port = false;
    }

    /// Records that receive queue `queue` was given this context's own MAC address.
    pub(crate) fn set_steered(&mut self, queue: u16) {
        self.steered = Some(queue);
    }

    /// Checks the default op flags of the attributes (as `Domain::endpoint` does).
    pub(crate) fn check_op_flags(&self) -> Result {
        let multi_recv_ok =
            self.attr.multi_recv_msgs > 0 || !self.attr.rx_op_flags.contains(OpFlags::MULTI_RECV);
        if TX_FLAGS_OK.contains(self.attr.tx_op_flags)
            && RX_FLAGS_OK.contains(self.attr.rx_op_flags)
            && multi_recv_ok
        {
            Ok(())
        } else {
            Err(Error::BadFlags)
        }
    }

    /// What the costliest transmit operation the endpoint takes uses
    /// ([`EpAttr::tx_iov_limit`]): a descriptor per buffer, a gather record above one, one
    /// CQ credit.
    pub(super) fn tx_cost(&self) -> OpCost {
        OpCost {
            descs: self.attr.tx_iov_limit,
            record: self.attr.tx_iov_limit > 1,
            credits: 1,
        }
    }

    /// What the costliest receive operation the endpoint takes uses
    /// ([`EpAttr::multi_recv_msgs`]): a descriptor and a CQ credit per message, and a
    /// multi-receive group.
    pub(super) fn rx_cost(&self) -> OpCost {
        let msgs = (self.attr.multi_recv_msgs as usize).max(1);
        OpCost {
            descs: msgs,
            record: self.attr.multi_recv_msgs > 0,
            credits: msgs,
        }
    }

    /// Closes the endpoint in place (what `close` does; idempotent): outstanding operations
    /// are discarded, the queues given back, the bindings and a context's address released.
    pub(crate) fn shut<'d, 'n, N: Nic + 'n, const D: usize>(&mut self, dom: &'d Domain<'n, N, D>) {
        self.close_paths(dom);
        if self.port != 0 && self.owns_port {
            dom.ip().unbind_port(self.port);
        }
        self.port = 0;
        self.leave_shared(dom);
        for b in [self.tx_cq.take(), self.rx_cq.take()].into_iter().flatten() {
            dom.cqs()[b.cq].drop_bind();
        }
        if let Some(av) = self.av.take() {
            dom.avs().at(av).unbind();
        }
        if let Some(q) = self.steered.take() {
            // The queue's address goes with the context; nothing to report from a drop.
            let _ = dom.steer_queue(q, None);
        }
        self.enabled = false;
    }

    /// Gives the queues back (outstanding operations discarded without completions; a path's
    /// bounce buffers go with it, after its queue has stopped).
    pub(super) fn close_paths<'d, 'n, N: Nic + 'n, const D: usize>(
        &mut self,
        dom: &'d Domain<'n, N, D>,
    ) {
        if let (Some(tx), false) = (self.tx, self.attr.encap.is_ringfab()) {
            // Sends held for address resolution go with the queue, as its posted ones do:
            // no completion, credits and buffers back.
            let credits = self.cq_slot(dom, self.tx_cq).ok().map(|cq| cq.credits);
            let owner = self.poster().map(|w| w.owner);
            dom.ip().forget_held(tx, owner, |h| {
                if let Some(c) = credits {
                    c.release_credit();
                }
                crate::engine::release(dom.owners(), (h.buf.mr != NO_MR).then_some(h.buf));
                for raw in h.extra {
                    crate::engine::release(dom.owners(), raw);
                }
            });
        }
        if shared(self.stx).is_some() {
            // The shared queue stays; only this endpoint's operations go. The handle does not
            // close a shared path when dropped.
            if let (Some(path), Ok(cq)) = (
                self.tx.take().map(|i| Path::at(dom, i)),
                self.cq_slot(dom, self.tx_cq),
            ) {
                let ctx = self.poll_ctx(dom, self.tx_cq);
                let _ = cq.with_sink(|_| {
                    path.with_state(|st| {
                        st.discard_owner(self.owner, &ctx);
                        Ok(())
                    })
                });
            }
        }
        if shared(self.srx).is_some() {
            if let Some(path) = self.rx.take().map(|i| Path::at(dom, i)) {
                let ctx = self.poll_ctx(dom, self.rx_cq);
                let _ = path.with_state(|st| {
                    st.leave_srx(self.srx_owner, &ctx);
                    Ok(())
                });
            }
        }
        for (path, binding) in [
            (self.tx.take().map(|i| Path::at(dom, i)), self.tx_cq),
            (self.rx.take().map(|i| Path::at(dom, i)), self.rx_cq),
        ] {
            if let (Some(path), Some(b)) = (path, binding) {
                path.detach(b.cq);
            }
        }
    }

    /// Registers the endpoint on shared receive path `index` so that frames for its address
    /// are routed to `rx_cq`.
    pub(super) fn join_srx<'d, 'n, N: Nic + 'n, const D: usize>(
        &self,
        dom: &'d Domain<'n, N, D>,
        index: usize,
        rx_cq: CqBinding,
        framing: Framing,
    ) -> Result {
        if rx_cq.cq >= 64 || self.rx_cntr.is_some_and(|c| c >= usize::from(u8::MAX)) {
            return Err(Error::Inval);
        }
        let slot = &dom.paths()[index];
        if slot.fault().is_some() {
            return Err(Error::OpBadState);
        }
        let mut guard = slot.state.lock();
        let st = guard.as_mut().ok_or(Error::OpBadState)?;
        let ep = crate::engine::SrxEp {
            local: self.local,
            cq: rx_cq.cq as u8,
            cntr: self.rx_cntr.map_or(u8::MAX, |c| c as u8),
            selective: rx_cq.flags.contains(BindFlags::SELECTIVE_COMPLETION),
            source_err: self.attr.source_err,
            context: self.attr.context,
            port: self.port,
        };
        st.join_srx(self.srx_owner, ep, framing.av)?;
        dom.mark_serving(rx_cq.cq, index, true);
        slot.cq_mask.fetch_or(1 << rx_cq.cq, Ordering::AcqRel);
        Ok(())
    }

    /// Gives the endpoint's owner number on its shared transmit context back; the last
    /// endpoint to leave a context that was dropped closes its queue.
    pub(super) fn leave_shared<'d, 'n, N: Nic + 'n, const D: usize>(
        &mut self,
        dom: &'d Domain<'n, N, D>,
    ) {
        for (index, owner) in [
            (self.stx.take(), self.owner),
            (self.srx.take(), self.srx_owner),
        ] {
            let Some(index) = index else {
                continue;
            };
            if dom.paths()[index].release_owner(owner) {
                Path::shared(dom, index).close_shared();
            }
        }
    }

    /// `Ok` if data operations may be posted: enabled, and not disabled by a critical fault
    /// (checked without a lock: one load per queue).
    #[inline]
    pub(super) fn usable<'d, 'n, N: Nic + 'n, const D: usize>(
        &self,
        dom: &'d Domain<'n, N, D>,
    ) -> Result {
        dom.check(self.domain)?;
        if !self.enabled {
            return Err(Error::OpBadState);
        }
        if let Some(f) = self.fault(dom) {
            self.settle_fault(dom, f);
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
    pub(super) fn settle_fault<'d, 'n, N: Nic + 'n, const D: usize>(
        &self,
        dom: &'d Domain<'n, N, D>,
        fault: QueueFault,
    ) {
        for (path, binding) in [
            (self.tx_path(dom), self.tx_cq),
            (self.rx_path(dom), self.rx_cq),
        ] {
            let (Some(path), Ok(cq)) = (path.as_ref(), self.cq_slot(dom, binding)) else {
                continue;
            };
            if path.fault().is_some() {
                continue;
            }
            let ctx = self.poll_ctx(dom, binding);
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

    /// Bytes before the payload in a send or receive buffer: ringfab's header on the endpoint's
    /// [encapsulation](EpAttr::encap) — [`HEADER_LEN`](crate::proto::HEADER_LEN) on Ethernet,
    /// [`MAX_HEADER_LEN`] on UDP — or Ethernet, IPv4 and UDP's 42 bytes on plain UDP.
    pub fn payload_offset(&self) -> usize {
        self.attr.encap.header_len()
    }

    /// The attributes, as resolved.
    pub fn attr(&self) -> &EpAttr {
        &self.attr
    }

    /// Whether the endpoint is enabled: [`enable`](Self::enable)d, and not disabled since by a
    /// critical fault ([`fault`](Self::fault)).
    pub fn is_enabled<'d, 'n, N: Nic + 'n, const D: usize>(
        &self,
        dom: &'d Domain<'n, N, D>,
    ) -> bool {
        self.enabled && self.fault(dom).is_none()
    }

    /// The critical fault that disabled the endpoint (module documentation, "Critical
    /// errors"), if one did since it was last enabled.
    pub fn fault<'d, 'n, N: Nic + 'n, const D: usize>(
        &self,
        dom: &'d Domain<'n, N, D>,
    ) -> Option<QueueFault> {
        if dom.id() != self.domain {
            return None;
        }
        // Straight from the path table's published faults (one load per queue): every post
        // checks this, and views of the paths (`Path::at`, which has a `Drop`) would keep the
        // loop out of line (about 170 instructions a receive, measured).
        let paths = dom.paths();
        [self.tx, self.rx]
            .into_iter()
            .flatten()
            .find_map(|i| paths.get(i).and_then(|p| p.fault()))
    }

    /// The endpoint's address (`fi_getname`): its NIC's MAC and its receive queue; for a
    /// receive context of a scalable endpoint, the context's own address.
    pub fn name(&self) -> EpAddr {
        self.local
    }

    /// The `sockaddr_in` of a [plain-UDP](Encap::PlainUdp) endpoint (`fi_getname` with
    /// `FI_SOCKADDR_IN`): the domain's IPv4 address and the endpoint's port. `None` on ringfab's
    /// encapsulations, or before the domain has an IPv4 configuration.
    pub fn sockaddr<'d, 'n, N: Nic + 'n, const D: usize>(
        &self,
        dom: &'d Domain<'n, N, D>,
    ) -> Option<SockAddrIn> {
        if self.port == 0 || dom.check(self.domain).is_err() {
            return None;
        }
        dom.ipv4().map(|c| SockAddrIn::new(c.addr, self.port))
    }

    /// The UDP port a [plain-UDP](Encap::PlainUdp) endpoint bound (0 on ringfab's
    /// encapsulations).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The largest message payload (`max_msg_size`): the receive buffer or the NIC's frame,
    /// whichever is smaller, less the header — on plain UDP, MTU − 28 (IPv4 and UDP; the
    /// 14-byte Ethernet header is not part of the MTU), at most the receive buffer's room.
    pub fn max_msg_size<'d, 'n, N: Nic + 'n, const D: usize>(
        &self,
        dom: &'d Domain<'n, N, D>,
    ) -> usize {
        let mut frame = dom.nic().capabilities().max_frame_len;
        if !self.attr.encap.is_ringfab() {
            // What the receive path classifies (jumbo frames are not offered on plain UDP).
            frame = frame.min(crate::ip::MAX_CLASSIFIED);
        }
        frame.min(self.attr.rx_buf_len as usize) - self.payload_offset()
    }

    /// The endpoint's attributes as `fi_info` reports them (`ep_attr`, `tx_attr`, `rx_attr`),
    /// computed from the NIC and this endpoint's configuration; see [`crate::info`].
    pub fn info<'d, 'n, N: Nic + 'n, const D: usize>(&self, dom: &'d Domain<'n, N, D>) -> EpInfo {
        let comp_order = if dom.nic().capabilities().in_order_completion {
            Order::Strict
        } else {
            Order::None
        };
        // What the queues hold, once enabled (an Intel ring one operation fewer than the op
        // table); the op table's depth before.
        // In operations of the costliest kind the endpoint takes (`tx_cost`, `rx_cost`).
        let size = |path: Option<Path<'d, 'n, N, D>>, cost: OpCost| {
            path.and_then(|p| {
                p.with_state(|st| Ok(st.capacity(cost.descs, cost.record)))
                    .ok()
            })
            .unwrap_or(D / cost.descs)
        };
        let tx_size = size(self.tx_path(dom), self.tx_cost());
        let rx_size = size(self.rx_path(dom), self.rx_cost());
        EpInfo {
            ep: EndpointAttr {
                ep_type: self.attr.ep_type,
                protocol: Protocol::of(self.attr.encap),
                protocol_version: u32::from(crate::proto::VERSION),
                max_msg_size: self.max_msg_size(dom),
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
                size: tx_size,
                iov_limit: self.iov_limit(dom),
                rma_iov_limit: 0,
            },
            rx: RxAttr {
                op_flags: self.attr.rx_op_flags,
                msg_order: Order::None,
                comp_order,
                total_buffered_recv: 0,
                size: rx_size,
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
    pub fn bind_cq<'d, 'n, N: Nic + 'n, const D: usize, F: Format>(
        &mut self,
        dom: &'d Domain<'n, N, D>,
        cq: &CompletionQueue<N, F>,
        flags: BindFlags,
    ) -> Result {
        if flags.unknown() != 0 {
            return Err(Error::BadFlags);
        }
        if cq.domain_id() != self.domain || dom.check(self.domain).is_err() {
            return Err(Error::Domain);
        }
        if self.is_enabled(dom) {
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
        let slot = &dom.cqs()[cq.index()];
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
    pub fn bind_stx<'d, 'n, N: Nic + 'n, const D: usize>(
        &mut self,
        dom: &'d Domain<'n, N, D>,
        stx: &SharedTxContext,
    ) -> Result {
        if self.enabled {
            return Err(Error::OpBadState);
        }
        if self.stx.is_some() || !self.sends || stx.attr().encap != self.attr.encap {
            return Err(Error::Inval);
        }
        dom.check(self.domain)?;
        if stx.domain_id() != self.domain {
            return Err(Error::Domain);
        }
        if !stx.attr().op_flags.contains(self.attr.tx_op_flags) {
            return Err(Error::BadFlags);
        }
        let slot = &dom.paths()[stx.path_index()];
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
    pub fn bind_srx<'d, 'n, N: Nic + 'n, const D: usize>(
        &mut self,
        dom: &'d Domain<'n, N, D>,
        srx: &SharedRxContext,
    ) -> Result {
        if self.enabled {
            return Err(Error::OpBadState);
        }
        if self.srx.is_some() || !self.recvs || srx.attr().encap != self.attr.encap {
            return Err(Error::Inval);
        }
        dom.check(self.domain)?;
        if srx.domain_id() != self.domain {
            return Err(Error::Domain);
        }
        if !srx.attr().op_flags.contains(self.attr.rx_op_flags) {
            return Err(Error::BadFlags);
        }
        let slot = &dom.paths()[srx.path_index()];
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
    pub fn bind_av<'d, 'n, N: Nic + 'n, const D: usize>(
        &mut self,
        dom: &'d Domain<'n, N, D>,
        av: &AddressVector,
    ) -> Result {
        dom.check(self.domain)?;
        if av.domain_id() != self.domain {
            return Err(Error::Domain);
        }
        if self.is_enabled(dom) {
            return Err(Error::OpBadState);
        }
        av.bind_into(dom, &mut self.av)
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
    pub fn bind_cntr<'d, 'n, N: Nic + 'n, const D: usize>(
        &mut self,
        dom: &'d Domain<'n, N, D>,
        cntr: &Counter<N::Wait>,
        flags: CntrBindFlags,
    ) -> Result {
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
        dom.check(self.domain)?;
        let index = dom
            .cntrs()
            .iter()
            .position(|c| core::ptr::eq(*c, cntr))
            .ok_or(Error::Domain)?;
        if self.is_enabled(dom) {
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
    pub fn progress<'d, 'n, N: Nic + 'n, const D: usize>(
        &self,
        dom: &'d Domain<'n, N, D>,
    ) -> Result {
        self.usable(dom)?;
        for (path, binding) in [
            (self.tx_path(dom), self.tx_cq),
            (self.rx_path(dom), self.rx_cq),
        ] {
            let Some(path) = path.as_ref() else {
                continue;
            };
            let cq = self.cq_slot(dom, binding)?;
            let ctx = self.poll_ctx(dom, binding);
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
        self.usable(dom)
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
    /// each direction; `NoAv` without an address vector; `Inval` for an address vector of
    /// another [format](crate::av::AvAttr::format) than the encapsulation's;
    /// `AddrNotAvail` for a plain-UDP endpoint in a domain without an IPv4 configuration; `NoMem` when the domain has no free
    /// path slots; `Device(DeviceRemoved)` when re-enabling after a fault finds the device
    /// gone; `Device(_)` when the NIC refuses a queue (in use, …) or fails to come back. On
    /// error the endpoint stays disabled and can be enabled again.
    pub fn enable<'d, 'n, N: Nic + 'n, const D: usize>(
        &mut self,
        dom: &'d Domain<'n, N, D>,
    ) -> Result {
        dom.check(self.domain)?;
        if self.enabled {
            if self.fault(dom).is_none() {
                return Err(Error::OpBadState);
            }
            // Disabled by a critical fault: the old queues go, the device is recovered below.
            self.close_paths(dom);
            self.enabled = false;
            self.recover = true;
        }
        if (self.sends && self.tx_cq.is_none()) || (self.recvs && self.rx_cq.is_none()) {
            return Err(Error::NoCq);
        }
        let Some(av) = self.av else {
            return Err(Error::NoAv);
        };
        // An endpoint takes addresses of its encapsulation's format; plain UDP needs an
        // address of the domain's own.
        let format = dom.avs().at(av).view().map(|st| st.format);
        let wanted = if self.attr.encap.is_ringfab() {
            AddrFormat::Ringfab
        } else {
            if dom.ipv4().is_none() {
                return Err(Error::AddrNotAvail);
            }
            AddrFormat::SockaddrIn
        };
        if format.is_some_and(|f| f != wanted) {
            return Err(Error::Inval);
        }
        if self.recover {
            dom.nic().recover()?;
            self.recover = false;
        }
        let framing = Framing {
            local: self.local,
            av: Some(av),
            source_err: self.attr.source_err,
            context: self.attr.context,
            encap: self.attr.encap,
            port: self.port,
            addr: dom
                .ipv4()
                .map_or(crate::ip::Ipv4Addr::UNSPECIFIED, |c| c.addr),
            broadcast: dom
                .ipv4()
                .and_then(|c| c.broadcast())
                .unwrap_or(crate::ip::Ipv4Addr::UNSPECIFIED),
        };
        let mut tx = None;
        if let (true, Some(tx_cq), Some(index)) = (self.sends, self.tx_cq, shared(self.stx)) {
            // Sends go through the shared context's queue, which reports to each operation's
            // own CQ: the CQ must fit the path's mask and the counter the op table's byte.
            if tx_cq.cq >= 64 || self.tx_cntr.is_some_and(|c| c >= usize::from(u8::MAX)) {
                return Err(Error::Inval);
            }
            let slot = &dom.paths()[index];
            if slot.fault().is_some() {
                return Err(Error::OpBadState);
            }
            let path = Path::shared(dom, index);
            // One bounce slot per op-table slot serves every endpoint of the context (and, on
            // plain UDP, one control region the domain's ARP and ICMP frames).
            let control = if self.attr.encap.is_ringfab() {
                0
            } else {
                crate::engine::CONTROL_REGION
            };
            path.with_state(|st| {
                if st.bounce.is_none() {
                    st.bounce = Some(dom.nic().alloc_dma(D * INJECT_SLOT + control)?);
                }
                Ok(())
            })?;
            dom.mark_serving(tx_cq.cq, index, true);
            slot.cq_mask.fetch_or(1 << tx_cq.cq, Ordering::AcqRel);
            tx = Some(path);
        } else if let (true, Some(tx_cq)) = (self.sends, self.tx_cq) {
            // A plain-UDP endpoint's queue also sends the domain's ARP and ICMP frames, from
            // a control region after the bounce slots (`engine/ip.rs`).
            let control = if self.attr.encap.is_ringfab() {
                0
            } else {
                crate::engine::CONTROL_REGION
            };
            let bounce = dom.nic().alloc_dma(D * INJECT_SLOT + control)?;
            // A blocking CQ owns an interrupt vector: its queues are steered there, so that
            // one wait handle covers them (docs/architecture.md, "Waiting").
            let config = match dom.cqs()[tx_cq.cq].interrupt_vector() {
                Some(v) => TxConfig::with_vector(v),
                None => TxConfig::default(),
            };
            let path = dom.open_tx(self.attr.tx_queue, config)?;
            path.with_state(|st| {
                st.bounce = Some(bounce);
                Ok(())
            })?;
            path.attach(tx_cq.cq, tx_cq.flags, framing, self.tx_cntr);
            tx = Some(path);
        }
        if let (true, Some(rx_cq), Some(index)) = (self.recvs, self.rx_cq, shared(self.srx)) {
            if let Err(e) = self.join_srx(dom, index, rx_cq, framing) {
                if let (Some(p), Some(b)) = (tx, self.tx_cq) {
                    if self.stx.is_none() {
                        p.detach(b.cq);
                    }
                }
                return Err(e);
            }
            self.rx = Some(index);
        } else if let (true, Some(rx_cq)) = (self.recvs, self.rx_cq) {
            let mut config = RxConfig::new(self.attr.rx_buf_len);
            if let Some(v) = dom.cqs()[rx_cq.cq].interrupt_vector() {
                config = config.with_vector(v);
            }
            let path = match dom.open_rx(self.attr.rx_queue, config) {
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
            self.rx = Some(path.index);
        }
        self.tx = tx.map(|p| p.index);
        self.max_send = self.max_msg_size(dom);
        self.enabled = true;
        if !self.attr.encap.is_ringfab() {
            // RFC 5227 §2.3: the link learns where the address is.
            dom.ip().announce();
        }
        Ok(())
    }

    /// Closes the endpoint (`fi_close`): outstanding operations are discarded without
    /// completions (owned buffers return to their regions), the queues go back to the NIC,
    /// and the CQs and AV are unbound. (Dropping the handle instead leaves all of that to
    /// the domain's end.)
    ///
    /// # Errors
    /// `Err((Domain, self))` for another domain's endpoint.
    #[allow(
        clippy::result_large_err,
        reason = "fi_close hands the handle back on error, as every close does; without an \
                  allocator there is no box to put it in, and close is not on the data path"
    )]
    pub fn close<N: Nic, const D: usize>(
        mut self,
        dom: &Domain<'_, N, D>,
    ) -> core::result::Result<(), (Error, Self)> {
        if let Err(e) = dom.check(self.domain) {
            return Err((e, self));
        }
        self.shut(dom);
        Ok(())
    }
}

/// A shared context's path slot as the endpoint keeps it: always `None` in a build without the
/// `shared-contexts` feature (where no context can be opened to bind), so that the compiler
/// leaves the shared branches out.
#[inline(always)]
fn shared(slot: Option<usize>) -> Option<usize> {
    slot.filter(|_| cfg!(feature = "shared-contexts"))
}
