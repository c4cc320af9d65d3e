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
//! names context *k* with [`FiAddr::rx`](crate::addr::FiAddr::rx) (`fi_rx_addr`) on an AV opened
//! with `rx_ctx_bits` (`FI_NAMED_RX_CTX`); a handle without context bits reaches context 0.
//! That is why more than one named receive context needs a NIC that steers by address
//! ([`Capabilities::rx_mac_queues`](crate::hal::Capabilities::rx_mac_queues)): frames on
//! ringfab's own EtherType carry no IP header, so RSS cannot spread them.
//!
//! # Receive contexts fed by RSS
//!
//! With [`SepAttr::rss`] the receive contexts are not named (no `FI_NAMED_RX_CTX`: a handle made
//! with [`FiAddr::rx`](crate::addr::FiAddr::rx) reaches no context): the NIC's RSS picks one per
//! flow. This needs frames RSS can hash, so every context uses the [`Encap::Udp`] encapsulation
//! (ringfab's header inside IPv4/UDP), and so must the peers that send to it. All receive contexts
//! then listen on the scalable endpoint's own address (station MAC, context 0), and the redirection
//! table spreads its entries round-robin over the receive contexts that are enabled, programmed
//! again whenever one is enabled or closed. A flow is one sender's transmit queue and endpoint
//! ([`proto::flow`], the UDP source port) with its IPv4 addresses (derived from the MACs): its
//! frames all reach the same context, in order, while the table does not change. The 82576 and
//! virtio-net hash the UDP ports as well, so the transmit contexts of one peer spread; the 82574
//! hashes only the IPv4 addresses, so it spreads peers but not the flows of one peer. A frame that
//! arrives while no context is enabled goes to queue 0, and is dropped there if context 0 is not
//! listening, as a datagram to a closed endpoint is. A receive context a critical fault disabled
//! stays in the table (its queue takes no frames, so its flows are lost) until its `enable`
//! recovers it or it is closed. Closing the scalable endpoint turns RSS off again.
//!
//! # Plain UDP
//!
//! On [`Encap::PlainUdp`] (docs/ip.md) the scalable endpoint binds one UDP port
//! ([`SepAttr::port`], [`ScalableEndpoint::sockaddr`]): every transmit context sends from it and
//! every receive context takes datagrams to it. A datagram names only the domain's IPv4 address
//! and the port, so receive contexts cannot be named: more than one needs [`SepAttr::rss`], and
//! RSS spreads the flows — one per peer address and source port — over them. Non-IP frames (ARP)
//! are not hashed and reach queue 0, so receive context 0 is the one that answers ARP while it
//! is enabled. The port is released when the scalable endpoint closes.
//!
//! Frames sent by any transmit context carry the scalable endpoint's address as their source,
//! so a receiver that inserted that one address resolves all of them (`FI_SOURCE`).
//!
//! # Lifetime
//!
//! A context borrows its scalable endpoint, so the endpoint cannot be closed while a context
//! is open — fi_endpoint(3)'s `-FI_EBUSY`, enforced by the compiler. [`Context::close`]
//! closes a context (its queue goes back to the NIC, a receive context's address is
//! withdrawn, its index is free again); a context handle dropped without it keeps its index
//! and leaves its queue to the domain's end.

use core::ops::{Deref, DerefMut};
use core::sync::atomic::{AtomicU32, Ordering};

use spin::Mutex;

use crate::addr::EpAddr;
use crate::av::AddressVector;
use crate::domain::Domain;
use crate::entry::OpContext;
use crate::ep::{Endpoint, EpAttr, EpType};
use crate::flags::OpFlags;
use crate::hal::{Nic, RssConfig, RssHashes, RssSaved};
use crate::proto::{self, Encap};
use crate::{Error, Result};

/// Most contexts of one direction (the bit masks that track them).
pub const MAX_CONTEXTS: u16 = 32;

/// Attributes of a scalable endpoint.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct SepAttr {
    /// Transmit contexts (`tx_ctx_cnt`): NIC transmit queues 0..n; 0 for one.
    pub tx_ctx_cnt: u16,
    /// Receive contexts (`rx_ctx_cnt`): NIC receive queues 0..n; 0 for one.
    pub rx_ctx_cnt: u16,
    /// Receive buffer size of every receive context's queue.
    pub rx_buf_len: u32,
    /// `FI_SOURCE_ERR` on every receive context.
    pub source_err: bool,
    /// The encapsulation of every context ([`EpAttr::encap`]).
    pub encap: Encap,
    /// Receive contexts fed by RSS instead of named by address (module documentation):
    /// needs [`Encap::Udp`] or [`Encap::PlainUdp`] and a NIC with RSS.
    pub rss: bool,
    /// On [plain UDP](Encap::PlainUdp): the UDP port every context sends from and receives on
    /// (0: the lowest free one of the dynamic range, as [`EpAttr::port`]).
    pub port: u16,
}

impl Default for SepAttr {
    /// One context each way, 2 KiB receive buffers.
    fn default() -> Self {
        SepAttr {
            tx_ctx_cnt: 1,
            rx_ctx_cnt: 1,
            rx_buf_len: 2048,
            source_err: false,
            encap: Encap::Ethernet,
            rss: false,
            port: 0,
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
#[derive(Debug)]
pub struct ScalableEndpoint {
    /// The id of the domain it belongs to.
    domain: u32,
    attr: SepAttr,
    av: Option<usize>,
    /// Contexts open, one bit each.
    tx_open: AtomicU32,
    rx_open: AtomicU32,
    /// With RSS: the enabled receive contexts the redirection table spreads over, one bit
    /// each; the lock orders the programming of the table after each change.
    rss_fed: Mutex<u32>,
    /// On plain UDP, the port it bound (0: none).
    port: u16,
}

impl<'n, N: Nic + 'n, const D: usize> Domain<'n, N, D> {
    /// Creates a scalable endpoint (`fi_scalable_ep`).
    ///
    /// # Errors
    /// A count of 0 is one context (`fi_endpoint(3)`: "If not specified (0), 1 context will be
    /// assigned"), and [`ScalableEndpoint::attr`] reports the counts assigned.
    ///
    /// `Inval` for more contexts than the NIC has queues (or than
    /// [`MAX_CONTEXTS`]), a receive buffer size the NIC cannot take, or RSS without the UDP
    /// encapsulation; `OpNotSupp` for more than one named receive context on a NIC that cannot
    /// steer by address, or for RSS on a NIC without it (see the module documentation);
    /// `Device(Unsupported)` for RSS while the NIC steers by address for another user.
    /// On [plain UDP](Encap::PlainUdp) (module documentation, "Plain UDP"): `Inval` for more
    /// than one receive context without RSS; `AddrInUse` or `Full(Ports)` as
    /// [`Domain::endpoint`] for the port.
    pub fn scalable_endpoint(&self, attr: &SepAttr) -> Result<ScalableEndpoint> {
        if !attr.encap.is_built() {
            return Err(Error::OpNotSupp);
        }
        let plain = !attr.encap.is_ringfab();
        let caps = self.nic().capabilities();
        // fi_endpoint(3), tx_ctx_cnt: "If not specified (0), 1 context will be assigned"; the
        // same for rx_ctx_cnt. The attributes the endpoint keeps (and `attr` reports) are the
        // counts assigned.
        let attr = &SepAttr {
            tx_ctx_cnt: attr.tx_ctx_cnt.max(1),
            rx_ctx_cnt: attr.rx_ctx_cnt.max(1),
            ..*attr
        };
        let (tx, rx) = (attr.tx_ctx_cnt, attr.rx_ctx_cnt);
        if tx > caps.tx_queues.min(MAX_CONTEXTS) {
            return Err(Error::Inval);
        }
        if rx > caps.rx_queues.min(MAX_CONTEXTS) {
            return Err(Error::Inval);
        }
        if (attr.rx_buf_len as usize) <= attr.encap.header_len()
            || attr.rx_buf_len > caps.max_rx_buf_len
        {
            return Err(Error::Inval);
        }
        if plain && attr.rx_ctx_cnt > 1 && !attr.rss {
            // Named receive contexts are addressed by ringfab's header (a context number and
            // a MAC address of their own); a UDP datagram names only the domain's address.
            return Err(Error::Inval);
        }
        if attr.rss {
            if attr.encap == Encap::Ethernet {
                return Err(Error::Inval);
            }
            let fits = |r: &crate::hal::RssCaps| {
                (r.hashes.ipv4 || r.hashes.ipv4_udp)
                    && r.key_len <= RssSaved::MAX_KEY
                    && r.table_len <= RssSaved::MAX_TABLE
            };
            if !caps.rss.as_ref().is_some_and(fits) {
                return Err(Error::OpNotSupp);
            }
        } else if rx > 1 && caps.rx_mac_queues < rx {
            return Err(Error::OpNotSupp);
        }
        let mut sep = ScalableEndpoint {
            domain: self.id(),
            attr: *attr,
            av: None,
            tx_open: AtomicU32::new(0),
            rx_open: AtomicU32::new(0),
            rss_fed: Mutex::new(0),
            port: 0,
        };
        if attr.rss {
            // Off until a context is enabled; this also finds out now, not at the first
            // enable, whether the NIC takes RSS at all (it refuses while it steers by address).
            sep.feed(self, None)?;
        }
        if plain {
            sep.port = self.ip().bind_port(attr.port)?;
            sep.attr.port = sep.port;
        }
        Ok(sep)
    }
}

impl ScalableEndpoint {
    /// The attributes.
    pub fn attr(&self) -> &SepAttr {
        &self.attr
    }

    /// The scalable endpoint's address (`fi_getname`): the station address, context 0.
    pub fn name<N: Nic, const D: usize>(&self, dom: &Domain<'_, N, D>) -> EpAddr {
        EpAddr {
            mac: dom.nic().capabilities().mac,
            ctx: 0,
        }
    }

    /// The `sockaddr_in` of a [plain-UDP](Encap::PlainUdp) scalable endpoint (`fi_getname`), every
    /// context's: the domain's address and the endpoint's port. `None` on ringfab's
    /// encapsulations, or before the domain has an IPv4 configuration.
    pub fn sockaddr<N: Nic, const D: usize>(
        &self,
        dom: &Domain<'_, N, D>,
    ) -> Option<crate::ip::SockAddrIn> {
        if self.port == 0 || dom.check(self.domain).is_err() {
            return None;
        }
        dom.ipv4()
            .map(|c| crate::ip::SockAddrIn::new(c.addr, self.port))
    }

    /// Binds the address vector every context uses (`fi_scalable_ep_bind`).
    ///
    /// # Errors
    /// `Inval` if one is bound already; `Domain` for an AV of another domain.
    pub fn bind_av<'d, 'n, N: Nic + 'n, const D: usize>(
        &mut self,
        dom: &'d Domain<'n, N, D>,
        av: &AddressVector,
    ) -> Result {
        dom.check(self.domain)?;
        if av.domain_id() != self.domain {
            return Err(Error::Domain);
        }
        av.bind_into(dom, &mut self.av)
    }

    /// Opens transmit context `index` (`fi_tx_context`): NIC transmit queue `index`, disabled
    /// until its CQ is bound and [`enable`](Endpoint::enable)d.
    ///
    /// # Errors
    /// `NoAv` before [`bind_av`](Self::bind_av); `Inval` for an index at or above
    /// `tx_ctx_cnt`; `Busy` if that context is open; `BadFlags` for flags a transmit refuses.
    pub fn tx_context<'d, 'n, N: Nic + 'n, const D: usize>(
        &self,
        dom: &'d Domain<'n, N, D>,
        index: u16,
        attr: &CtxAttr,
    ) -> Result<Context<'_>> {
        self.context(dom, Dir::Tx, index, attr)
    }

    /// Opens receive context `index` (`fi_rx_context`): NIC receive queue `index`, listening
    /// on [`proto::context_mac`] of the station address (context 0: the station address).
    ///
    /// # Errors
    /// As [`tx_context`](Self::tx_context); `Device(_)` if the NIC refuses the address.
    pub fn rx_context<'d, 'n, N: Nic + 'n, const D: usize>(
        &self,
        dom: &'d Domain<'n, N, D>,
        index: u16,
        attr: &CtxAttr,
    ) -> Result<Context<'_>> {
        self.context(dom, Dir::Rx, index, attr)
    }

    fn context<'d, 'n, N: Nic + 'n, const D: usize>(
        &self,
        dom: &'d Domain<'n, N, D>,
        dir: Dir,
        index: u16,
        attr: &CtxAttr,
    ) -> Result<Context<'_>> {
        dom.check(self.domain)?;
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
        // From here on the bit is ours: `Context::shut` clears it, so build the context
        // first and let it undo everything on a later error.
        let base = self.name(dom);
        let mut ep_attr = EpAttr {
            ep_type: EpType::Dgram,
            tx_queue: index,
            rx_queue: index,
            rx_buf_len: self.attr.rx_buf_len,
            source_err: self.attr.source_err,
            context: attr.context,
            encap: self.attr.encap,
            ..EpAttr::default()
        };
        let (dirs, local) = match dir {
            Dir::Tx => {
                ep_attr.tx_op_flags = attr.op_flags;
                ((true, false), base)
            }
            Dir::Rx if self.attr.rss || self.port != 0 => {
                // Fed by RSS (or plain UDP, reached by the domain's address): every receive
                // context takes frames to the endpoint's address.
                ep_attr.rx_op_flags = attr.op_flags;
                ((false, true), base)
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
            ep: Endpoint::new(dom, ep_attr, dirs, local, base),
            sep: self,
            dir,
            index,
        };
        if self.port != 0 {
            ctx.ep.use_port(self.port);
        }
        let set_up = ctx.ep.check_op_flags().and_then(|()| {
            ctx.ep.bind_av_index(dom, av);
            if let (Dir::Rx, true, false) = (dir, index > 0, self.attr.rss) {
                dom.steer_queue(index, Some(local.mac))?;
                ctx.ep.set_steered(index);
            }
            Ok(())
        });
        match set_up {
            Ok(()) => Ok(ctx),
            Err(e) => {
                ctx.shut(dom);
                Err(e)
            }
        }
    }
}

impl ScalableEndpoint {
    /// Changes the set of receive contexts RSS feeds — `Some((index, true))` adds one,
    /// `Some((index, false))` takes one out — and programs the NIC's redirection table over
    /// the contexts then fed (RSS off when none is). On error the set is left as it was.
    fn feed<'d, 'n, N: Nic + 'n, const D: usize>(
        &self,
        dom: &'d Domain<'n, N, D>,
        change: Option<(u16, bool)>,
    ) -> Result {
        let Some(caps) = dom.nic().capabilities().rss else {
            return Err(Error::OpNotSupp);
        };
        let mut fed = self.rss_fed.lock();
        let mask = match change {
            Some((i, true)) => *fed | 1 << i,
            Some((i, false)) => *fed & !(1 << i),
            None => *fed,
        };
        let mut key = [0u8; RssSaved::MAX_KEY];
        let key = &mut key[..caps.key_len];
        rss_key(key);
        let mut table = [0u16; RssSaved::MAX_TABLE];
        let table = &mut table[..caps.table_len];
        let queues = (0..MAX_CONTEXTS).filter(|q| mask & 1 << q != 0);
        for (entry, q) in table.iter_mut().zip(queues.cycle()) {
            *entry = q;
        }
        let hashes = if mask == 0 {
            RssHashes::default()
        } else {
            let mut h = RssHashes::default();
            h.ipv4 = caps.hashes.ipv4;
            h.ipv4_udp = caps.hashes.ipv4_udp;
            h
        };
        dom.program_rss(&RssConfig { key, table, hashes })?;
        *fed = mask;
        Ok(())
    }
}

/// The Toeplitz key ringfab programs: bytes of a fixed xorshift sequence, so that every run
/// spreads alike (a test can predict it) while the key has no structure that maps many flows
/// to one entry.
fn rss_key(key: &mut [u8]) {
    let mut x: u32 = 0x9e37_79b9;
    for b in key {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        *b = (x >> 24) as u8;
    }
}

impl ScalableEndpoint {
    /// Closes the scalable endpoint (`fi_close`): RSS off, the AV unbound. Its contexts must
    /// be closed first (they borrow it). (Dropping the handle instead leaves that to the
    /// domain's end.)
    ///
    /// # Errors
    /// `Err((Domain, self))` for another domain's endpoint.
    pub fn close<N: Nic, const D: usize>(
        mut self,
        dom: &Domain<'_, N, D>,
    ) -> core::result::Result<(), (Error, Self)> {
        if let Err(e) = dom.check(self.domain) {
            return Err((e, self));
        }
        if self.attr.rss {
            // Every context is closed (they borrow the endpoint): the set is empty, RSS off.
            let _ = self.feed(dom, None);
        }
        if let Some(av) = self.av.take() {
            dom.avs().at(av).unbind();
        }
        if self.port != 0 {
            dom.ip().unbind_port(self.port);
            self.port = 0;
        }
        Ok(())
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
#[derive(Debug)]
pub struct Context<'e> {
    ep: Endpoint,
    sep: &'e ScalableEndpoint,
    dir: Dir,
    index: u16,
}

impl Context<'_> {
    /// The context's index.
    pub fn index(&self) -> u16 {
        self.index
    }

    /// Whether it is a transmit context.
    pub fn is_tx(&self) -> bool {
        self.dir == Dir::Tx
    }

    /// Enables the context ([`Endpoint::enable`]); a receive context of a scalable endpoint
    /// with [`SepAttr::rss`] then joins the redirection table (module documentation).
    ///
    /// # Errors
    /// As [`Endpoint::enable`], plus the NIC's error programming RSS — the context is enabled
    /// then, but RSS does not feed it until an `enable` succeeds.
    pub fn enable<N: Nic, const D: usize>(&mut self, dom: &Domain<'_, N, D>) -> Result {
        self.ep.enable(dom)?;
        if self.dir == Dir::Rx && self.sep.attr.rss {
            self.sep.feed(dom, Some((self.index, true)))?;
        }
        Ok(())
    }

    /// Closes the context (`fi_close`): out of the RSS table first (a receive context fed by
    /// RSS), then as [`Endpoint::close`]; its index can be opened again. (Dropping the handle
    /// instead keeps the index taken and leaves the queues to the domain's end.)
    ///
    /// # Errors
    /// `Err((Domain, self))` for another domain's context.
    #[allow(
        clippy::result_large_err,
        reason = "fi_close hands the handle back on error, as every close does; without an \
                  allocator there is no box to put it in, and close is not on the data path"
    )]
    pub fn close<N: Nic, const D: usize>(
        mut self,
        dom: &Domain<'_, N, D>,
    ) -> core::result::Result<(), (Error, Self)> {
        if let Err(e) = dom.check(self.ep.domain_id()) {
            return Err((e, self));
        }
        self.shut(dom);
        Ok(())
    }

    /// What `close` does, in place.
    fn shut<N: Nic, const D: usize>(&mut self, dom: &Domain<'_, N, D>) {
        if self.dir == Dir::Rx && self.sep.attr.rss {
            // Out of the table before its queue closes. Should the NIC refuse, frames hashed
            // here are dropped at the closed queue, as at any closed endpoint.
            let _ = self.sep.feed(dom, Some((self.index, false)));
        }
        // Close the context's queues first, so the index is free only once they are.
        self.ep.shut(dom);
        let open = match self.dir {
            Dir::Tx => &self.sep.tx_open,
            Dir::Rx => &self.sep.rx_open,
        };
        open.fetch_and(!(1u32 << self.index), Ordering::AcqRel);
    }
}

impl Deref for Context<'_> {
    type Target = Endpoint;
    fn deref(&self) -> &Self::Target {
        &self.ep
    }
}

impl DerefMut for Context<'_> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.ep
    }
}
