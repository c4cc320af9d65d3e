//! Aliases of an endpoint: `fi_ep_alias`, which is `fi_control(ep, FI_ALIAS, struct fi_alias *)`
//! (fi_endpoint(3), fi_control(3)).
//!
//! fi_endpoint(3): "An alias EP differs from its parent endpoint only by its default data
//! transfer flags." So an alias is a `fid_ep` of its own ([`AliasObj`]) with the endpoint's
//! tables for everything but `fi_close`, `fi_ep_bind` and `fi_control`: the message calls
//! ([`crate::msg`]) find the endpoint behind it and post with the alias's default flags in
//! place of the endpoint's; the other calls (`fi_cancel`, `fi_getopt`/`fi_setopt`,
//! `fi_getname`, the size calls, `fi_ep_bind`, `FI_ENABLE`) act on the endpoint.
//! `FI_GETOPSFLAG`/`FI_SETOPSFLAG` read and change the alias's flags ("An application can use
//! fi_control to modify the alias EP operational flags"), never the endpoint's.
//!
//! Which flags an alias takes is core's rule ([`ringfab::ep::Alias`]): the flags name exactly
//! one of `FI_TRANSMIT` and `FI_RECV` ("must include FI_TRANSMIT or FI_RECV (not both)";
//! else `-FI_EINVAL`), the others are that direction's op flags as `FI_SETOPSFLAG` takes them
//! (else `-FI_EBADFLAGS`), and the other direction inherits the parent's ("By default, an
//! alias EP inherits the same data transfer flags as the parent endpoint"). An alias of an
//! alias is an alias of the same endpoint that inherits its parent alias's flags.
//!
//! The endpoint counts its aliases: "All allocated aliases must be closed for the underlying
//! endpoint to be released", so `fi_close` of the endpoint is `-FI_EBUSY` while one is open.

use core::ffi::{c_int, c_void};
use std::sync::{Mutex, PoisonError};

use ringfab::ep::Endpoint;
use ringfab::flags::{BindFlags, OpFlags};
use ringfab::Error;

use crate::ep::EpObj;
use crate::ffi::{self, errno};
use crate::fid::{self, Ops};
use crate::nosys;
use crate::sys;

/// Default op flags for the data transfers of one fid: an endpoint's own, or an alias's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct DefaultFlags {
    /// For transmits (`FI_TRANSMIT`).
    pub(crate) tx: OpFlags,
    /// For receives (`FI_RECV`).
    pub(crate) rx: OpFlags,
}

impl DefaultFlags {
    /// The endpoint's own defaults.
    pub(crate) fn of(ep: &Endpoint) -> DefaultFlags {
        DefaultFlags {
            tx: ep.get_op_flags(BindFlags::TRANSMIT).unwrap_or_default(),
            rx: ep.get_op_flags(BindFlags::RECV).unwrap_or_default(),
        }
    }

    /// These flags with one direction's (`which`) set to `flags`, by core's rules for an
    /// alias ([`Endpoint::alias`], [`ringfab::ep::Alias::set_op_flags`]): `Inval` unless
    /// `which` is exactly one of `TRANSMIT` and `RECV`, `BadFlags` for op flags that
    /// direction does not take — or `FI_MULTI_RECV` on an endpoint not made for
    /// multi-receive buffers, which core refuses in an endpoint's own defaults.
    fn with(self, ep: &Endpoint, which: BindFlags, flags: OpFlags) -> Result<DefaultFlags, Error> {
        let mut alias = ep.alias(BindFlags::TRANSMIT, self.tx)?;
        alias.set_op_flags(BindFlags::RECV, self.rx)?;
        alias.set_op_flags(which, flags)?;
        let out = DefaultFlags {
            tx: alias.get_op_flags(BindFlags::TRANSMIT)?,
            rx: alias.get_op_flags(BindFlags::RECV)?,
        };
        if out.rx.contains(OpFlags::MULTI_RECV) && ep.attr().multi_recv_msgs == 0 {
            return Err(Error::BadFlags);
        }
        Ok(out)
    }
}

/// An alias as the provider allocates it.
#[repr(C)]
pub(crate) struct AliasObj {
    fid: sys::fid_ep,
    /// The endpoint it refers to, which stays open while the alias is (its close is
    /// `-FI_EBUSY` until then).
    ep: &'static EpObj,
    /// The defaults of the calls posted through the alias.
    flags: Mutex<DefaultFlags>,
}

// SAFETY: as `EpObj`'s: the fid's pointers are to static tables and the application's
// context, never dereferenced by the provider; the flags are behind a mutex, the endpoint is
// `Sync`.
unsafe impl Sync for AliasObj {}
// SAFETY: as for `Sync`.
unsafe impl Send for AliasObj {}

static FI_OPS: Ops<sys::fi_ops> = Ops(sys::fi_ops {
    size: core::mem::size_of::<sys::fi_ops>(),
    close: Some(close),
    bind: Some(bind),
    control: Some(control),
    ops_open: Some(nosys::ops_open),
    tostr: Some(nosys::tostr),
    ops_set: Some(nosys::ops_set),
});

/// The alias `fid` is, if it is one of this provider's.
///
/// # Safety
/// `fid` is null or points to a `struct fid`.
pub(crate) unsafe fn ours<'a>(fid: *const sys::fid) -> Option<&'a AliasObj> {
    // SAFETY: null or a valid fid; fids of these classes with this table are `AliasObj`s,
    // alive until fi_close.
    unsafe {
        fid::ours(fid, sys::FI_CLASS_EP, &FI_OPS)
            .or_else(|| fid::ours(fid, sys::FI_CLASS_TX_CTX, &FI_OPS))
            .or_else(|| fid::ours(fid, sys::FI_CLASS_RX_CTX, &FI_OPS))
    }
}

impl AliasObj {
    /// The endpoint behind the alias.
    pub(crate) fn endpoint(&self) -> &'static EpObj {
        self.ep
    }

    /// The alias's default op flags now.
    pub(crate) fn flags(&self) -> DefaultFlags {
        *self.flags.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// `fi_control(FI_ALIAS)` on `ep`, or on an alias of it whose defaults are `parent` (`None`:
/// the endpoint's own): `arg` is the application's `struct fi_alias`, whose `fid` receives
/// the new alias.
pub(crate) fn open(ep: &'static EpObj, parent: Option<DefaultFlags>, arg: *mut c_void) -> c_int {
    if arg.is_null() {
        return errno::INVAL;
    }
    // SAFETY: fi_control(3): FI_ALIAS takes a `struct fi_alias *`, checked not null.
    let req = unsafe { &*arg.cast::<sys::fi_alias>() };
    if req.fid.is_null() {
        return errno::INVAL;
    }
    let dirs = sys::FI_TRANSMIT | sys::FI_RECV;
    let which = BindFlags::from_bits_retain(req.flags & dirs);
    let op = OpFlags::from_bits_retain(req.flags & !dirs);
    let flags = ep.open_alias(|core| {
        parent
            .unwrap_or_else(|| DefaultFlags::of(core))
            .with(core, which, op)
    });
    let flags = match flags {
        Ok(f) => f,
        Err(err) => return err,
    };
    let obj = Box::new(AliasObj {
        fid: ep.fid_for_alias(&FI_OPS),
        ep,
        flags: Mutex::new(flags),
    });
    // SAFETY: checked not null: where the application wants the alias's fid; it is the
    // application's until fi_close.
    unsafe { *req.fid = Box::into_raw(obj).cast() };
    0
}

/// `fi_ops::close` of an alias: the endpoint is one alias freer.
unsafe extern "C" fn close(fid: *mut sys::fid) -> c_int {
    ffi::guard("fi_close(alias)", || {
        // SAFETY: libfabric passes the fid it was given, or null.
        let Some(a) = (unsafe { ours(fid) }) else {
            return errno::INVAL;
        };
        let ep = a.ep;
        // SAFETY: made by Box::into_raw in `open`, closed once.
        unsafe { fid::free(a) };
        ep.alias_closed();
        0
    })
}

/// `fi_ops::bind` of an alias (`fi_ep_bind`): binds the endpoint.
unsafe extern "C" fn bind(fid: *mut sys::fid, bfid: *mut sys::fid, flags: u64) -> c_int {
    ffi::guard("fi_ep_bind(alias)", || {
        // SAFETY: libfabric passes the fid it was given, or null.
        let Some(a) = (unsafe { ours(fid) }) else {
            return errno::INVAL;
        };
        a.ep.bind(bfid, flags)
    })
}

/// `fi_ops::control` of an alias: `FI_GETOPSFLAG` and `FI_SETOPSFLAG` on the alias's flags,
/// `FI_ALIAS` (an alias inheriting them), `FI_ENABLE` (the endpoint's).
unsafe extern "C" fn control(fid: *mut sys::fid, command: c_int, arg: *mut c_void) -> c_int {
    ffi::guard("fi_control(alias)", || {
        // SAFETY: libfabric passes the fid it was given, or null.
        let Some(a) = (unsafe { ours(fid) }) else {
            return errno::INVAL;
        };
        match command as u32 {
            sys::FI_ENABLE => a.ep.enable(),
            sys::FI_ALIAS => open(a.ep, Some(a.flags()), arg),
            sys::FI_GETOPSFLAG | sys::FI_SETOPSFLAG => {
                if arg.is_null() {
                    return errno::INVAL;
                }
                // SAFETY: fi_endpoint(3): the argument is a `uint64_t *` holding FI_TRANSMIT
                // or FI_RECV and, for FI_SETOPSFLAG, the flags.
                let flags = unsafe { &mut *arg.cast::<u64>() };
                let dirs = sys::FI_TRANSMIT | sys::FI_RECV;
                let which = BindFlags::from_bits_retain(*flags & dirs);
                let mut mine = a.flags.lock().unwrap_or_else(PoisonError::into_inner);
                if command as u32 == sys::FI_GETOPSFLAG {
                    // "must include FI_TRANSMIT or FI_RECV (not both)".
                    *flags = if which == BindFlags::TRANSMIT {
                        mine.tx.bits()
                    } else if which == BindFlags::RECV {
                        mine.rx.bits()
                    } else {
                        return errno::INVAL;
                    };
                    return 0;
                }
                let op = OpFlags::from_bits_retain(*flags & !dirs);
                match a.ep.with_core(|core| (*mine).with(core, which, op)) {
                    Some(Ok(f)) => {
                        *mine = f;
                        0
                    }
                    Some(Err(err)) => ffi::fail(err),
                    None => errno::INVAL,
                }
            }
            _ => errno::NOSYS,
        }
    })
}
