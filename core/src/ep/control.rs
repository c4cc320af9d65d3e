//! What an endpoint answers besides data: `fi_cancel`, the `size_left` calls, dropped frames,
//! `fi_getopt`/`fi_setopt`, and the default operation flags (`FI_GETOPSFLAG`/`FI_SETOPSFLAG`).

use crate::cq::slot::CqSlot;
use crate::domain::Domain;
use crate::entry::OpContext;
use crate::flags::{BindFlags, OpFlags};
use crate::hal::{Nic, Wait};
use crate::path::Path;
use crate::{Error, Result};

use super::alias::{op_flags_of, set_op_flags_in};
use super::*;

impl Endpoint {
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
    pub fn cancel<'d, 'n, N: Nic + 'n, const D: usize>(
        &self,
        dom: &'d Domain<'n, N, D>,
        context: OpContext,
    ) -> Result<bool> {
        self.usable(dom)?;
        for (path, binding) in [
            (self.rx_path(dom), self.rx_cq),
            (self.tx_path(dom), self.tx_cq),
        ] {
            let Some(path) = path.as_ref() else {
                continue;
            };
            let cq = self.cq_slot(dom, binding)?;
            let ctx = self.poll_ctx(dom, binding);
            // CQ lock first, then the path's: the order `read` takes them in.
            let found =
                cq.with_sink(|sink| path.with_state(|st| Ok(st.cancel(context, &ctx, sink))))??;
            if found {
                self.wake_readers(dom, &cq);
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// A software insertion raises no interrupt: wake a reader blocked on `cq` through its
    /// vector's handle.
    pub(super) fn wake_readers<'d, 'n, N: Nic + 'n, const D: usize>(
        &self,
        dom: &'d Domain<'n, N, D>,
        cq: &CqSlot,
    ) {
        if let Some(v) = cq.interrupt_vector() {
            if cq.has_sleepers() {
                if let Ok(w) = dom.nic().irq(v) {
                    w.notify();
                }
            }
        }
    }

    /// Transmit operations that can be posted now (`fi_tx_size_left`): a lower bound for
    /// operations of up to [`EpAttr::tx_iov_limit`] buffers each, within the CQ's room.
    ///
    /// # Errors
    /// `OpBadState` before enable.
    pub fn tx_size_left<'d, 'n, N: Nic + 'n, const D: usize>(
        &self,
        dom: &'d Domain<'n, N, D>,
    ) -> Result<usize> {
        self.size_left(dom, self.tx_path(dom), self.tx_cq, self.tx_cost())
    }

    /// Receive operations that can be posted now (`fi_rx_size_left`): a lower bound for
    /// receives of one buffer and, on an endpoint that takes them
    /// ([`EpAttr::multi_recv_msgs`]), multi-receive buffers; within the CQ's room.
    ///
    /// # Errors
    /// `OpBadState` before enable.
    pub fn rx_size_left<'d, 'n, N: Nic + 'n, const D: usize>(
        &self,
        dom: &'d Domain<'n, N, D>,
    ) -> Result<usize> {
        self.size_left(dom, self.rx_path(dom), self.rx_cq, self.rx_cost())
    }

    pub(super) fn size_left<'d, 'n, N: Nic + 'n, const D: usize>(
        &self,
        dom: &'d Domain<'n, N, D>,
        path: Option<Path<'d, 'n, N, D>>,
        b: Option<CqBinding>,
        cost: OpCost,
    ) -> Result<usize> {
        self.usable(dom)?;
        let path = path.ok_or(Error::OpBadState)?;
        let credits = self.cq_slot(dom, b)?.credits.credits();
        path.with_state(|st| Ok(st.room(cost.descs, cost.record).min(credits / cost.credits)))
    }

    /// Frames received on this endpoint's queue that were not ringfab frames for it (other
    /// protocols, other contexts, malformed headers) and were dropped, their buffers reposted.
    pub fn dropped_frames<'d, 'n, N: Nic + 'n, const D: usize>(
        &self,
        dom: &'d Domain<'n, N, D>,
    ) -> u64 {
        if dom.id() != self.domain {
            return 0;
        }
        self.rx_path(dom)
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
}
