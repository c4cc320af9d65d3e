//! Shared transmit contexts (`fi_stx_context`): one NIC transmit queue carrying the sends of
//! several endpoints.
//!
//! fi_endpoint(3), SHARED CONTEXTS: "Applications must allocate and bind shared transmit
//! contexts to endpoints, but operations are posted directly to the endpoint. Shared transmit
//! contexts are not associated with completion queues or counters. Completed operations are
//! posted to the CQs bound to the endpoint. An endpoint may only be associated with a single
//! shared transmit context." And: "Endpoints associated with a shared transmit context must
//! use a subset of the transmit context's attributes."
//!
//! A [`SharedTxContext`] opens its queue as a *shared path* (the engine's "Shared paths"):
//! every operation records its endpoint's CQ, counter and owner number, a CQ's read delivers
//! its own and leaves the others' finished operations in their op-table slots for their CQs,
//! credits go back to each operation's own CQ. An endpoint binds it with
//! [`Endpoint::bind_stx`](crate::ep::Endpoint::bind_stx) before `enable`; closing an
//! endpoint discards only its own operations (the queue is flushed and the others are posted
//! again in their slots).
//!
//! Limits, as built: up to 32 endpoints per context; their CQs must have indices below 64
//! and their counters below 255 in the domain's slabs; the shared queue has no interrupt, so
//! a CQ of such an endpoint that blocks (`sread`) finds these completions by polling every
//! `WAIT_QUANTUM` (10 ms), not by an interrupt; a critical fault of the shared queue disables
//! every endpoint on it, and they come back only with a new shared context. Shared receive
//! contexts are not built (docs/architecture.md says how they would be).

use crate::domain::Domain;
use crate::engine::Framing;
use crate::ep::TX_FLAGS_OK;
use crate::flags::OpFlags;
use crate::hal::{Nic, TxConfig};
use crate::path::SharedPath;
use crate::{Error, Result};

/// Endpoints a shared transmit or receive context takes (owner numbers are bits of a `u32`).
pub const MAX_SHARED_ENDPOINTS: usize = crate::engine::MAX_SHARED;

/// Attributes of a shared transmit context (the `fi_tx_attr` of `fi_stx_context`).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct StxAttr {
    /// The NIC transmit queue it uses.
    pub tx_queue: u16,
    /// Transmit operation flags its endpoints may have as defaults: an endpoint's
    /// `tx_op_flags` must be a subset (fi_endpoint(3)).
    pub op_flags: OpFlags,
    /// The encapsulation its endpoints send on ([`EpAttr::encap`](crate::ep::EpAttr::encap)): all
    /// of them use the same.
    pub encap: crate::proto::Encap,
}

/// A shared transmit context. See the [module documentation](self).
#[derive(Debug)]
pub struct SharedTxContext {
    queue: SharedPath,
    attr: StxAttr,
}

impl<'n, N: Nic + 'n, const D: usize> Domain<'n, N, D> {
    /// Opens a shared transmit context on transmit queue `attr.tx_queue` (`fi_stx_context`).
    ///
    /// # Errors
    /// `BadFlags` for op flags no DGRAM transmit takes; `OpNotSupp` in a build without the
    /// `shared-contexts` feature (or, for plain UDP, the `plain-udp` feature); `NoMem` without a free path slot; `Device(_)` when the NIC
    /// refuses the queue.
    pub fn stx_context(&self, attr: &StxAttr) -> Result<SharedTxContext> {
        if !cfg!(feature = "shared-contexts") {
            return Err(Error::OpNotSupp);
        }
        if !TX_FLAGS_OK.contains(attr.op_flags) {
            return Err(Error::BadFlags);
        }
        if !attr.encap.is_built() {
            return Err(Error::OpNotSupp);
        }
        // No interrupt: the queue serves several CQs, and a vector belongs to one.
        let path = self.open_tx(attr.tx_queue, TxConfig::default())?;
        let station = self.nic().capabilities().mac;
        path.make_shared(Framing {
            local: crate::addr::EpAddr {
                mac: station,
                ctx: 0,
            },
            av: None,
            source_err: false,
            context: crate::entry::OpContext::NULL,
            encap: attr.encap,
            port: 0,
            addr: crate::ip::Ipv4Addr::UNSPECIFIED,
            broadcast: crate::ip::Ipv4Addr::UNSPECIFIED,
        });
        Ok(SharedTxContext {
            queue: SharedPath {
                domain: self.id(),
                index: path.index,
            },
            attr: *attr,
        })
    }
}

impl SharedTxContext {
    /// The attributes it was opened with.
    pub fn attr(&self) -> &StxAttr {
        &self.attr
    }

    /// Endpoints bound to it now.
    pub fn endpoints<N: Nic, const D: usize>(&self, dom: &Domain<'_, N, D>) -> usize {
        self.queue.endpoints(dom)
    }

    /// Closes it (`fi_close`).
    ///
    /// # Errors
    /// `Err((Error::Busy, self))` while an endpoint is bound: it stays usable; `Domain` for
    /// another domain.
    pub fn close<N: Nic, const D: usize>(
        self,
        dom: &Domain<'_, N, D>,
    ) -> core::result::Result<(), (Error, Self)> {
        if let Err(e) = dom.check(self.queue.domain) {
            return Err((e, self));
        }
        if self.endpoints(dom) != 0 {
            return Err((Error::Busy, self));
        }
        self.queue.release(dom);
        Ok(())
    }

    /// Lets it go whether or not endpoints are bound: closed now if none is, otherwise by the
    /// last of them to close.
    ///
    /// # Errors
    /// `Err((Domain, self))` for another domain's context.
    pub fn release<N: Nic, const D: usize>(
        self,
        dom: &Domain<'_, N, D>,
    ) -> core::result::Result<(), (Error, Self)> {
        if let Err(e) = dom.check(self.queue.domain) {
            return Err((e, self));
        }
        self.queue.release(dom);
        Ok(())
    }

    /// The id of the domain it belongs to.
    pub(crate) fn domain_id(&self) -> u32 {
        self.queue.domain
    }

    /// The path slot index of its queue.
    pub(crate) fn path_index(&self) -> usize {
        self.queue.index
    }
}
