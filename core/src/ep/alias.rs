//! Aliases of an endpoint (`fi_ep_alias`), and the op-flag rules they share with it.

use crate::addr::FiAddr;
use crate::buf::Buf;
use crate::domain::Domain;
use crate::entry::OpContext;
use crate::flags::{BindFlags, OpFlags};
use crate::hal::Nic;
use crate::{Error, Result};

use super::*;

/// An alias of an endpoint (`fi_ep_alias`): the same queues, its own default flags for one
/// direction. It borrows the endpoint, so the endpoint cannot be closed — released — while an
/// alias lives (fi_endpoint(3): "all allocated aliases must be closed for the underlying
/// endpoint to be released"), and aliases need no bookkeeping of their own.
#[derive(Debug)]
pub struct Alias<'e> {
    ep: &'e Endpoint,
    tx_op_flags: OpFlags,
    rx_op_flags: OpFlags,
}

impl Endpoint {
    /// Creates an alias (`fi_ep_alias`): `flags` holds exactly one of `TRANSMIT` and `RECV`,
    /// and `op_flags` become that direction's defaults for operations posted through the alias;
    /// the other direction inherits the endpoint's.
    ///
    /// # Errors
    /// `Inval` unless exactly one direction is named; `BadFlags` for op flags that direction
    /// does not accept.
    pub fn alias(&self, which: BindFlags, op_flags: OpFlags) -> Result<Alias<'_>> {
        let (mut tx, mut rx) = (self.attr.tx_op_flags, self.attr.rx_op_flags);
        set_op_flags_in(&mut tx, &mut rx, which, op_flags)?;
        Ok(Alias {
            ep: self,
            tx_op_flags: tx,
            rx_op_flags: rx,
        })
    }
}

impl<'e> Alias<'e> {
    /// [`Endpoint::send`] with the alias's transmit flags.
    ///
    /// # Errors
    /// As [`Endpoint::sendmsg`].
    pub fn send<'d, N: Nic, const D: usize>(
        &self,
        dom: &'d Domain<'_, N, D>,
        buf: Buf<'d>,
        len: usize,
        dest: FiAddr,
        context: OpContext,
    ) -> core::result::Result<(), (Error, Buf<'d>)> {
        self.ep
            .sendmsg(dom, buf, len, dest, None, context, self.tx_op_flags)
    }

    /// [`Endpoint::recv`] with the alias's receive flags.
    ///
    /// # Errors
    /// As [`Endpoint::recvmsg`].
    pub fn recv<'d, N: Nic, const D: usize>(
        &self,
        dom: &'d Domain<'_, N, D>,
        buf: Buf<'d>,
        context: OpContext,
    ) -> core::result::Result<(), (Error, Buf<'d>)> {
        self.ep.recvmsg(dom, buf, context, self.rx_op_flags)
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
    pub fn endpoint(&self) -> &'e Endpoint {
        self.ep
    }
}

enum Dir {
    Tx,
    Rx,
}

/// `fi_control(FI_GETOPSFLAG)` over a pair of default op flags: `which` names exactly one
/// direction (`Inval` otherwise).
pub(super) fn op_flags_of(tx: OpFlags, rx: OpFlags, which: BindFlags) -> Result<OpFlags> {
    match direction(which)? {
        Dir::Tx => Ok(tx),
        Dir::Rx => Ok(rx),
    }
}

/// `fi_control(FI_SETOPSFLAG)` over a pair of default op flags: `Inval` unless `which` names
/// exactly one direction, `BadFlags` for flags that direction does not accept.
pub(super) fn set_op_flags_in(
    tx: &mut OpFlags,
    rx: &mut OpFlags,
    which: BindFlags,
    flags: OpFlags,
) -> Result {
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
