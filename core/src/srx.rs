//! Shared receive contexts (`fi_srx_context`): one NIC receive queue, one pool of posted
//! receives, several endpoints.
//!
//! fi_endpoint(3), SHARED CONTEXTS: "Users post receive buffers directly to a shared receive
//! context, with the buffers usable by any endpoint bound to the shared receive context.
//! Shared receive contexts are not associated with completion queues or counters. Completed
//! receive operations are posted to the CQs bound to the endpoint. An endpoint may only be
//! associated with a single receive context, and all connectionless endpoints associated
//! with a shared receive context must also share the same address vector."
//!
//! Which endpoint a frame is for — and so which CQ completes it — is known only from the
//! frame's header (its destination context; on plain UDP, its destination port): a receive posted here holds no CQ credit while
//! it waits; its frame routes it, and it takes a credit of its endpoint's CQ when that CQ's
//! read delivers it (the engine's "Shared receive contexts"). A frame for no bound endpoint,
//! or one the device reports bad, is dropped and its buffer posted again.
//!
//! The context listens on the station address on receive queue 0 (and on plain UDP whatever its
//! queue: docs/ip.md, "Ports"), or on a locally administered address of its own on another queue (as a scalable endpoint's receive context
//! does: `proto::context_mac`, steered by the NIC). Endpoints bound to it are addressed by
//! that address and their own context number ([`EpAttr::rx_queue`](crate::ep::EpAttr)).
//!
//! Not built: multi-receive buffers on a shared receive context (`BadFlags`); the endpoints of one
//! context cannot block on an interrupt for it (its queue has none — a blocked `sread` finds its
//! completions by the 10 ms polling of its wait).

use crate::addr::EpAddr;
use crate::buf::{owner_of, Buf};
use crate::domain::Domain;
use crate::engine::{Framing, Queue};
use crate::entry::OpContext;
use crate::flags::OpFlags;
use crate::hal::{MacAddr, Nic, RxConfig, RxQueue};
use crate::path::SharedPath;
use crate::proto::{self, Encap};
use crate::{Error, Result};

/// Attributes of a shared receive context (the `fi_rx_attr` of `fi_srx_context`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct SrxAttr {
    /// The NIC receive queue it uses.
    pub rx_queue: u16,
    /// Receive buffer size of the queue (as [`EpAttr::rx_buf_len`](crate::ep::EpAttr)).
    pub rx_buf_len: u32,
    /// Default receive flags; an endpoint's `rx_op_flags` must be a subset.
    pub op_flags: OpFlags,
    /// The encapsulation its frames arrive on ([`EpAttr::encap`](crate::ep::EpAttr::encap)); its
    /// endpoints must use the same.
    pub encap: Encap,
}

impl Default for SrxAttr {
    /// Queue 0, 2 KiB buffers, no flags.
    fn default() -> Self {
        SrxAttr {
            rx_queue: 0,
            rx_buf_len: 2048,
            op_flags: OpFlags::empty(),
            encap: Encap::Ethernet,
        }
    }
}

/// Receive flags a shared receive context takes.
const SRX_FLAGS_OK: OpFlags = OpFlags::COMPLETION.union(OpFlags::MORE);

/// A shared receive context. See the [module documentation](self).
#[derive(Debug)]
pub struct SharedRxContext {
    queue: SharedPath,
    attr: SrxAttr,
    mac: MacAddr,
}

impl<'n, N: Nic + 'n, const D: usize> Domain<'n, N, D> {
    /// Opens a shared receive context on receive queue `attr.rx_queue` (`fi_srx_context`).
    ///
    /// # Errors
    /// `OpNotSupp` in a build without the `shared-contexts` feature (or plain UDP without
    /// `plain-udp`); `BadFlags` for flags other than `FI_COMPLETION`/`FI_MORE`; `Inval` for a buffer size
    /// outside `header + 1 ..= max_rx_buf_len` (the header of `attr.encap`); `NoMem` without a
    /// free path slot; `Device(_)` when the NIC refuses the queue or cannot steer an address to
    /// it.
    pub fn srx_context(&self, attr: &SrxAttr) -> Result<SharedRxContext> {
        if !cfg!(feature = "shared-contexts") || !attr.encap.is_built() {
            return Err(Error::OpNotSupp);
        }
        if !SRX_FLAGS_OK.contains(attr.op_flags) {
            return Err(Error::BadFlags);
        }
        let caps = self.nic().capabilities();
        if (attr.rx_buf_len as usize) <= attr.encap.header_len()
            || attr.rx_buf_len > caps.max_rx_buf_len
        {
            return Err(Error::Inval);
        }
        let path = self.open_rx(attr.rx_queue, RxConfig::new(attr.rx_buf_len))?;
        // Plain UDP is addressed by the domain's IPv4 address, which ARP ties to the station
        // address: the queue takes what the NIC gives it (all of it on queue 0 without RSS).
        let mac = if attr.rx_queue == 0 || !attr.encap.is_ringfab() {
            caps.mac
        } else {
            let mac = proto::context_mac(caps.mac, attr.rx_queue);
            self.steer_queue(attr.rx_queue, Some(mac))?;
            mac
        };
        path.make_shared(Framing {
            local: EpAddr { mac, ctx: 0 },
            av: None,
            source_err: false,
            context: OpContext::NULL,
            encap: attr.encap,
            port: 0,
            addr: crate::ip::Ipv4Addr::UNSPECIFIED,
            broadcast: crate::ip::Ipv4Addr::UNSPECIFIED,
        });
        Ok(SharedRxContext {
            queue: SharedPath {
                domain: self.id(),
                index: path.index,
            },
            attr: *attr,
            mac,
        })
    }
}

impl SharedRxContext {
    /// The attributes it was opened with.
    pub fn attr(&self) -> &SrxAttr {
        &self.attr
    }

    /// The address its endpoints are reached at (with their own context numbers).
    pub fn mac(&self) -> MacAddr {
        self.mac
    }

    /// Endpoints bound to it now.
    pub fn endpoints<N: Nic, const D: usize>(&self, dom: &Domain<'_, N, D>) -> usize {
        self.queue.endpoints(dom)
    }

    /// Posts `buf` for any endpoint bound to the context (`fi_recv` on the `fid_srx`), with
    /// the context's default flags. The payload lands after the header of the context's
    /// [encapsulation](SrxAttr::encap) ([`Encap::header_len`]); the completion goes to the CQ
    /// of the endpoint the frame was for, with the buffer.
    ///
    /// # Errors
    /// See [`recvmsg`](Self::recvmsg).
    pub fn recv<'d, N: Nic, const D: usize>(
        &self,
        dom: &'d Domain<'_, N, D>,
        buf: Buf<'d>,
        context: OpContext,
    ) -> core::result::Result<(), (Error, Buf<'d>)> {
        self.recvmsg(dom, buf, context, self.attr.op_flags)
    }

    /// [`recv`](Self::recv) with explicit flags (`fi_recvmsg`): `FI_COMPLETION` (for
    /// endpoints bound with `FI_SELECTIVE_COMPLETION`), `FI_MORE` (defers the doorbell).
    ///
    /// # Errors
    /// The buffer comes back with the error: `BadFlags` for other flags (`FI_MULTI_RECV` is
    /// not built here); `Inval` for a buffer shorter than the queue's buffer size;
    /// `OpBadState` after a critical fault of the queue; `Again` when the ring is full.
    pub fn recvmsg<'d, N: Nic, const D: usize>(
        &self,
        dom: &'d Domain<'_, N, D>,
        buf: Buf<'d>,
        context: OpContext,
        flags: OpFlags,
    ) -> core::result::Result<(), (Error, Buf<'d>)> {
        if !SRX_FLAGS_OK.contains(flags) {
            return Err((Error::BadFlags, buf));
        }
        let path = match self.queue.path(dom) {
            Ok(path) => path,
            Err(e) => return Err((e, buf)),
        };
        let raw = buf.raw();
        let r = path.with_state(|st| {
            let Queue::Rx(q) = &st.queue else {
                return Err(Error::OpBadState);
            };
            let dev_len = q.buf_len();
            if raw.len < dev_len {
                return Err(Error::Inval);
            }
            let accepted = dev_len - self.attr.encap.header_len() as u32;
            let r = st.post_recv_srx(raw, accepted, context, flags.contains(OpFlags::COMPLETION));
            if !flags.contains(OpFlags::MORE) || r.is_err() {
                st.doorbell();
            }
            r
        });
        buf.posted(r)
    }

    /// Cancels the receive posted with `context` that is still waiting for a frame
    /// (`fi_cancel` on the `fid_srx`), handing its buffer back. A shared receive context has
    /// no CQ of its own, and the receive belongs to no endpoint yet, so there is no
    /// `FI_ECANCELED` entry: the buffer comes back from the call. One receive per call; one
    /// that a frame already filled is not canceled (it completes on its endpoint's CQ).
    ///
    /// # Errors
    /// `OpBadState` after the queue was closed. `Ok(None)`: no such receive waits.
    pub fn cancel<'d, N: Nic, const D: usize>(
        &self,
        dom: &'d Domain<'_, N, D>,
        context: OpContext,
    ) -> Result<Option<Buf<'d>>> {
        let owners = dom.owners();
        let raw = self
            .queue
            .path(dom)?
            .with_state(|st| Ok(st.cancel_srx(context, owners, dom.ip_ctx())))?;
        Ok(raw.and_then(|raw| owner_of(owners, raw.mr).map(|o| Buf::from_raw(raw, o))))
    }

    /// Receives that can be posted now (`fi_rx_size_left` on the context).
    ///
    /// # Errors
    /// `OpBadState` after the queue was closed.
    pub fn rx_size_left<N: Nic, const D: usize>(&self, dom: &Domain<'_, N, D>) -> Result<usize> {
        self.queue.path(dom)?.with_state(|st| Ok(st.room(1, false)))
    }

    /// Closes it (`fi_close`): the receives still posted are discarded, their buffers back
    /// to their regions.
    ///
    /// # Errors
    /// `Err((Error::Busy, self))` while an endpoint is bound: it stays usable.
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

    /// Lets it go whether or not endpoints are bound: closed now if none is; otherwise
    /// endpoints still bound keep the queue (and its address), and the last one to leave
    /// closes the queue, the address going with it (`SharedPath::close_shared`).
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
