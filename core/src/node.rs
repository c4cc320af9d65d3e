//! A [`Node`]: a domain with one endpoint ready — what a program on one host opens first.
//!
//! Most programs (libfabric's fabtests open theirs the same way in `ft_init_fabric`) want one
//! enabled endpoint on a NIC with a completion queue for both directions and an address vector.
//! A node is exactly that, as plain fields: the [`Domain`] and the three handles
//! [`Domain::ready_endpoint`] gives. Nothing is hidden behind it — every operation is the
//! handle's own, given `&node.domain` — so a program can grow from a node to several endpoints
//! on the same domain without rewriting what it has.
//!
//! ```
//! # use ringfab::entry::Msg;
//! # fn f<N: ringfab::hal::Nic>(nic: &N) -> ringfab::Result {
//! let node = ringfab::Node::<_, Msg>::open(nic)?;
//! let second = node.domain.ready_endpoint::<Msg>(&Default::default(), &Default::default())?;
//! # let _ = second; Ok(()) }
//! ```

use crate::av::AddressVector;
use crate::cq::queue::CompletionQueue;
use crate::cq::CqAttr;
use crate::domain::Domain;
use crate::entry::Format;
use crate::ep::{Endpoint, EpAttr};
use crate::hal::Nic;
use crate::Result;

/// A domain and one enabled endpoint on it, with its CQ (format `F`, both directions) and its
/// AV. See the [module documentation](self).
pub struct Node<'n, N: Nic + 'n, F: Format, const D: usize = 256> {
    /// The domain every handle below belongs to (their methods take it).
    pub domain: Domain<'n, N, D>,
    /// The endpoint: enabled, bound to `cq` for transmit and receive and to `av`.
    pub ep: Endpoint,
    /// Its completion queue.
    pub cq: CompletionQueue<N, F>,
    /// Its address vector.
    pub av: AddressVector,
}

#[cfg(feature = "alloc")]
impl<'n, N: Nic + 'n, F: Format> Node<'n, N, F> {
    /// A node on `nic` with the default attributes: [`Domain::new`], then
    /// [`Domain::ready_endpoint`] with `EpAttr::default()` and `CqAttr::default()`.
    ///
    /// # Errors
    /// What [`Domain::ready_endpoint`] returns.
    pub fn open(nic: &'n N) -> Result<Self> {
        Self::open_with(nic, &EpAttr::default(), &CqAttr::default())
    }

    /// A node on `nic` whose endpoint and CQ have the attributes given.
    ///
    /// # Errors
    /// What [`Domain::ready_endpoint`] returns.
    pub fn open_with(nic: &'n N, ep: &EpAttr, cq: &CqAttr) -> Result<Self> {
        Self::on(Domain::new(nic), ep, cq)
    }
}

impl<'n, N: Nic + 'n, F: Format, const D: usize> Node<'n, N, F, D> {
    /// A node on a domain already made (a domain over a `static` storage on bare metal, or one
    /// with counters).
    ///
    /// # Errors
    /// What [`Domain::ready_endpoint`] returns (the domain is dropped with the error).
    pub fn on(domain: Domain<'n, N, D>, ep: &EpAttr, cq: &CqAttr) -> Result<Self> {
        let (ep, cq, av) = domain.ready_endpoint::<F>(ep, cq)?;
        Ok(Node { domain, ep, cq, av })
    }
}
