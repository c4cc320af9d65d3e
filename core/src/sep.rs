//! Scalable endpoints (`fi_scalable_ep`): one address, many transmit and receive contexts, each
//! a hardware queue of its own (DESIGN.md decision 8).
//!
//! A [`ScalableEndpoint`] owns no queue itself. [`ScalableEndpoint::tx_context`] and
//! [`ScalableEndpoint::rx_context`] hand out [`Context`]s — one-directional endpoints on NIC
//! queue *i* — each bound to its own CQ, enabled on its own, and used from its own thread:
//! contexts share no lock and no mutable state (the AV they share is read without a lock).
//!
//! # Addressing receive contexts
//!
//! The scalable endpoint's address is its NIC's station address with context 0. Receive
//! context *k* listens on its own MAC address, [`proto::context_mac`] of the station address,
//! and the NIC steers frames to that address to queue *k*
//! ([`Nic::set_rx_queue_mac`] — VMDq on the 82576). A sender
//! names context *k* with [`FiAddr::rx`](crate::av::FiAddr::rx) (`fi_rx_addr`) on an AV opened
//! with `rx_ctx_bits` (`FI_NAMED_RX_CTX`); a handle without context bits reaches context 0.
//! That is why more than one receive context needs a NIC that steers by address
//! ([`Capabilities::rx_mac_queues`](crate::hal::Capabilities::rx_mac_queues)): ringfab's
//! frames carry no IP header, so RSS cannot spread them.
//!
//! Frames sent by any transmit context carry the scalable endpoint's address as their source,
//! so a receiver that inserted that one address resolves all of them (`FI_SOURCE`).
//!
//! # Lifetime
//!
//! A context borrows its scalable endpoint, so the endpoint cannot be closed while a context
//! is open — fi_endpoint(3)'s `-FI_EBUSY`, enforced by the compiler. Dropping a context closes
//! it (its queue goes back to the NIC, a receive context's address is withdrawn).

use core::ops::{Deref, DerefMut};
use core::sync::atomic::{AtomicU32, Ordering};

use crate::av::{AddressVector, EpAddr};
use crate::cq::entry::OpContext;
use crate::domain::Domain;
use crate::ep::{Endpoint, EpAttr, EpType};
use crate::flags::OpFlags;
use crate::hal::Nic;
use crate::proto::{self, HEADER_LEN};
use crate::{Error, Result};

/// Most contexts of one direction (the bit masks that track them).
pub const MAX_CONTEXTS: u16 = 32;

/// Attributes of a scalable endpoint.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct SepAttr {
    /// Transmit contexts (`tx_ctx_cnt`): NIC transmit queues 0..n.
    pub tx_ctx_cnt: u16,
    /// Receive contexts (`rx_ctx_cnt`): NIC receive queues 0..n.
    pub rx_ctx_cnt: u16,
    /// Receive buffer size of every receive context's queue.
    pub rx_buf_len: u32,
    /// `FI_SOURCE_ERR` on every receive context.
    pub source_err: bool,
}

impl Default for SepAttr {
    /// One context each way, 2 KiB receive buffers.
    fn default() -> Self {
        SepAttr {
            tx_ctx_cnt: 1,
            rx_ctx_cnt: 1,
            rx_buf_len: 2048,
            source_err: false,
        }
    }
}

/// Per-context attributes (`fi_tx_attr`/`fi_rx_attr` of `fi_tx_context`/`fi_rx_context`).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct CtxAttr {
    /// Default operation flags of the context.
    pub op_flags: OpFlags,
    /// The context's own context (`fi_tx_context`/`fi_rx_context`'s `context` argument), for
    /// error entries that belong to no operation (as [`EpAttr::context`]).
    pub context: OpContext,
}

/// A scalable endpoint. See the [module documentation](self).
pub struct ScalableEndpoint<'d, 's, 'n, N: Nic + 'n, const D: usize> {
    domain: &'d Domain<'s, 'n, N, D>,
    attr: SepAttr,
    av: Option<usize>,
    /// Contexts open, one bit each.
    tx_open: AtomicU32,
    rx_open: AtomicU32,
}

impl<'s, 'n, N: Nic + 'n, const D: usize> Domain<'s, 'n, N, D> {
    /// Creates a scalable endpoint (`fi_scalable_ep`).
    ///
    /// # Errors
    /// `Inval` for no context, more contexts than the NIC has queues (or than
    /// [`MAX_CONTEXTS`]), or a receive buffer size the NIC cannot take; `OpNotSupp` for more
    /// than one receive context on a NIC that cannot steer by address (see the module
    /// documentation).
    pub fn scalable_endpoint(&self, attr: &SepAttr) -> Result<ScalableEndpoint<'_, 's, 'n, N, D>> {
        let caps = self.nic().capabilities();
        let (tx, rx) = (attr.tx_ctx_cnt, attr.rx_ctx_cnt);
        if tx == 0 || rx == 0 || tx > caps.tx_queues.min(MAX_CONTEXTS) {
            return Err(Error::Inval);
        }
        if rx > caps.rx_queues.min(MAX_CONTEXTS) {
            return Err(Error::Inval);
        }
        if rx > 1 && caps.rx_mac_queues < rx {
            return Err(Error::OpNotSupp);
        }
        if (attr.rx_buf_len as usize) <= HEADER_LEN || attr.rx_buf_len > caps.max_rx_buf_len {
            return Err(Error::Inval);
        }
        Ok(ScalableEndpoint {
            domain: self,
            attr: *attr,
            av: None,
            tx_open: AtomicU32::new(0),
            rx_open: AtomicU32::new(0),
        })
    }
}

impl<'d, 's, 'n, N: Nic + 'n, const D: usize> ScalableEndpoint<'d, 's, 'n, N, D> {
    /// The attributes.
    pub fn attr(&self) -> &SepAttr {
        &self.attr
    }

    /// The scalable endpoint's address (`fi_getname`): the station address, context 0.
    pub fn name(&self) -> EpAddr {
        EpAddr {
            mac: self.domain.nic().capabilities().mac,
            ctx: 0,
        }
    }

    /// Binds the address vector every context uses (`fi_scalable_ep_bind`).
    ///
    /// # Errors
    /// `Inval` if one is bound already; `Domain` for an AV of another domain.
    pub fn bind_av(&mut self, av: &AddressVector<'_, 's, 'n, N, D>) -> Result {
        if !core::ptr::eq(av.domain(), self.domain) {
            return Err(Error::Domain);
        }
        if self.av.is_some() {
            return Err(Error::Inval);
        }
        self.domain.avs()[av.index()].bind();
        self.av = Some(av.index());
        Ok(())
    }

    /// Opens transmit context `index` (`fi_tx_context`): NIC transmit queue `index`, disabled
    /// until its CQ is bound and [`enable`](Endpoint::enable)d.
    ///
    /// # Errors
    /// `NoAv` before [`bind_av`](Self::bind_av); `Inval` for an index at or above
    /// `tx_ctx_cnt`; `Busy` if that context is open; `BadFlags` for flags a transmit refuses.
    pub fn tx_context(&self, index: u16, attr: &CtxAttr) -> Result<Context<'_, 'd, 's, 'n, N, D>> {
        self.context(Dir::Tx, index, attr)
    }

    /// Opens receive context `index` (`fi_rx_context`): NIC receive queue `index`, listening
    /// on [`proto::context_mac`] of the station address (context 0: the station address).
    ///
    /// # Errors
    /// As [`tx_context`](Self::tx_context); `Device(_)` if the NIC refuses the address.
    pub fn rx_context(&self, index: u16, attr: &CtxAttr) -> Result<Context<'_, 'd, 's, 'n, N, D>> {
        self.context(Dir::Rx, index, attr)
    }

    fn context(
        &self,
        dir: Dir,
        index: u16,
        attr: &CtxAttr,
    ) -> Result<Context<'_, 'd, 's, 'n, N, D>> {
        let av = self.av.ok_or(Error::NoAv)?;
        let (count, open) = match dir {
            Dir::Tx => (self.attr.tx_ctx_cnt, &self.tx_open),
            Dir::Rx => (self.attr.rx_ctx_cnt, &self.rx_open),
        };
        if index >= count {
            return Err(Error::Inval);
        }
        let bit = 1u32 << index;
        if open.fetch_or(bit, Ordering::AcqRel) & bit != 0 {
            return Err(Error::Busy);
        }
        // From here on the bit is ours: `Context::drop` clears it, so build the context
        // first and let its drop undo everything on a later error.
        let base = self.name();
        let mut ep_attr = EpAttr {
            ep_type: EpType::Dgram,
            tx_queue: index,
            rx_queue: index,
            rx_buf_len: self.attr.rx_buf_len,
            source_err: self.attr.source_err,
            context: attr.context,
            ..EpAttr::default()
        };
        let (dirs, local) = match dir {
            Dir::Tx => {
                ep_attr.tx_op_flags = attr.op_flags;
                ((true, false), base)
            }
            Dir::Rx => {
                ep_attr.rx_op_flags = attr.op_flags;
                let local = EpAddr {
                    mac: proto::context_mac(base.mac, index),
                    ctx: index,
                };
                ((false, true), local)
            }
        };
        let mut ctx = Context {
            ep: Endpoint::new(self.domain, ep_attr, dirs, local, base),
            sep: self,
            dir,
            index,
        };
        ctx.ep.check_op_flags()?;
        ctx.ep.bind_av_index(av);
        if let (Dir::Rx, true) = (dir, index > 0) {
            self.domain.nic().set_rx_queue_mac(index, Some(local.mac))?;
            ctx.ep.set_steered(index);
        }
        Ok(ctx)
    }
}

impl<N: Nic, const D: usize> Drop for ScalableEndpoint<'_, '_, '_, N, D> {
    fn drop(&mut self) {
        if let Some(av) = self.av.take() {
            self.domain.avs()[av].unbind();
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Dir {
    Tx,
    Rx,
}

/// A transmit or receive context of a scalable endpoint: a one-directional [`Endpoint`] (it
/// dereferences to one: bind its CQ, enable it, post on it) that borrows its scalable
/// endpoint.
pub struct Context<'e, 'd, 's, 'n, N: Nic + 'n, const D: usize> {
    ep: Endpoint<'d, 's, 'n, N, D>,
    sep: &'e ScalableEndpoint<'d, 's, 'n, N, D>,
    dir: Dir,
    index: u16,
}

impl<'d, 's, 'n, N: Nic + 'n, const D: usize> Context<'_, 'd, 's, 'n, N, D> {
    /// The context's index.
    pub fn index(&self) -> u16 {
        self.index
    }

    /// Whether it is a transmit context.
    pub fn is_tx(&self) -> bool {
        self.dir == Dir::Tx
    }
}

impl<'d, 's, 'n, N: Nic + 'n, const D: usize> Deref for Context<'_, 'd, 's, 'n, N, D> {
    type Target = Endpoint<'d, 's, 'n, N, D>;
    fn deref(&self) -> &Self::Target {
        &self.ep
    }
}

impl<N: Nic, const D: usize> DerefMut for Context<'_, '_, '_, '_, N, D> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.ep
    }
}

impl<N: Nic, const D: usize> Drop for Context<'_, '_, '_, '_, N, D> {
    fn drop(&mut self) {
        // Close the context's queues first, so the index is free only once they are.
        self.ep.shut();
        let open = match self.dir {
            Dir::Tx => &self.sep.tx_open,
            Dir::Rx => &self.sep.rx_open,
        };
        open.fetch_and(!(1u32 << self.index), Ordering::AcqRel);
    }
}
