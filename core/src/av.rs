//! Address vectors (`fi_av`, `FI_AV_TABLE`): peers' endpoint addresses behind small handles.
//!
//! An endpoint address ([`EpAddr`]) is what [`Endpoint::name`](crate::ep::Endpoint::name)
//! returns and what ringfab's frame header carries: the NIC's MAC address and the endpoint's
//! receive-context number on that NIC. An [`AddressVector`] maps them to [`FiAddr`]s, which data
//! operations take as destinations and `readfrom` returns as sources.
//!
//! The table is the caller's storage (`&'s mut [AvEntry]`), so its capacity is the caller's
//! choice and nothing is allocated. `FiAddr`s are table indices, handed out lowest-free-first,
//! as `FI_AV_TABLE` asks. Reverse lookup (source address → `FiAddr`, for `FI_SOURCE`) scans the
//! table; docs/perf.md says what that costs, and a hashed index is the known next step for
//! large tables.

use core::sync::atomic::{AtomicUsize, Ordering};

use spin::Mutex;

use crate::domain::Domain;
use crate::hal::{MacAddr, Nic};
use crate::{Error, Result};

/// An endpoint's address: its NIC's MAC and its receive context on that NIC.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct EpAddr {
    /// The station address of the endpoint's NIC.
    pub mac: MacAddr,
    /// The endpoint's receive context on that NIC (the frame header's context field).
    pub ctx: u16,
}

impl EpAddr {
    /// Bytes of the raw form ([`to_bytes`](Self::to_bytes)): `FI_ADDR_…` `addrlen`.
    pub const LEN: usize = 8;

    /// The raw address as `fi_getname` and an `FI_EADDRNOTAVAIL` entry's `err_data` give it:
    /// the MAC, then the context big-endian.
    pub fn to_bytes(self) -> [u8; Self::LEN] {
        let mut b = [0; Self::LEN];
        b[..6].copy_from_slice(&self.mac.0);
        b[6..].copy_from_slice(&self.ctx.to_be_bytes());
        b
    }

    /// The address of a raw form made by [`to_bytes`](Self::to_bytes).
    ///
    /// # Errors
    /// `Inval` unless `bytes` is exactly [`LEN`](Self::LEN) long.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let b: &[u8; Self::LEN] = bytes.try_into().map_err(|_| Error::Inval)?;
        Ok(EpAddr {
            mac: MacAddr([b[0], b[1], b[2], b[3], b[4], b[5]]),
            ctx: u16::from_be_bytes([b[6], b[7]]),
        })
    }
}

/// A peer handle (`fi_addr_t`): an index into an address vector.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
#[repr(transparent)]
pub struct FiAddr(pub u64);

impl FiAddr {
    /// `FI_ADDR_NOTAVAIL`: no address (a failed insert, an unknown source).
    pub const NOTAVAIL: FiAddr = FiAddr(u64::MAX);
}

/// One entry of an address vector's table: `[AvEntry::EMPTY; 64]`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct AvEntry(Option<EpAddr>);

impl AvEntry {
    /// An unused entry.
    pub const EMPTY: AvEntry = AvEntry(None);
}

struct AvState<'s> {
    table: &'s mut [AvEntry],
}

impl AvState<'_> {
    fn get(&self, addr: FiAddr) -> Option<EpAddr> {
        let i = usize::try_from(addr.0).ok()?;
        self.table.get(i).and_then(|e| e.0)
    }

    fn find(&self, addr: EpAddr) -> Option<FiAddr> {
        self.table
            .iter()
            .position(|e| e.0 == Some(addr))
            .map(|i| FiAddr(i as u64))
    }
}

/// One slot of the domain's address-vector slab: `[AvSlot::EMPTY; 1]`.
pub struct AvSlot<'s> {
    state: Mutex<Option<AvState<'s>>>,
    /// Endpoints bound to it.
    binds: AtomicUsize,
}

impl<'s> AvSlot<'s> {
    /// A free slot.
    #[allow(
        clippy::declare_interior_mutable_const,
        reason = "a fresh slot per use is the point: `[AvSlot::EMPTY; N]` builds the slab"
    )]
    pub const EMPTY: Self = AvSlot {
        state: Mutex::new(None),
        binds: AtomicUsize::new(0),
    };

    /// The address behind `addr`, if it is in the table.
    pub(crate) fn lookup(&self, addr: FiAddr) -> Option<EpAddr> {
        self.state.lock().as_ref().and_then(|st| st.get(addr))
    }

    /// The `FiAddr` of `addr`, if it is in the table (the lowest, if inserted twice).
    pub(crate) fn reverse(&self, addr: EpAddr) -> Option<FiAddr> {
        self.state.lock().as_ref().and_then(|st| st.find(addr))
    }

    pub(crate) fn bind(&self) {
        self.binds.fetch_add(1, Ordering::AcqRel);
    }

    pub(crate) fn unbind(&self) {
        self.binds.fetch_sub(1, Ordering::AcqRel);
    }
}

impl<'s, 'n, N: Nic + 'n, const D: usize> Domain<'s, 'n, N, D> {
    /// Opens an address vector (`fi_av_open`, `FI_AV_TABLE`) over `table`, whose length is its
    /// capacity.
    ///
    /// # Errors
    /// `Inval` for an empty table; `NoMem` when every AV slot is taken.
    pub fn open_av(&self, table: &'s mut [AvEntry]) -> Result<AddressVector<'_, 's, 'n, N, D>> {
        if table.is_empty() {
            return Err(Error::Inval);
        }
        table.fill(AvEntry::EMPTY);
        let mut table = Some(table);
        for (index, slot) in self.avs().iter().enumerate() {
            let mut guard = slot.state.lock();
            if guard.is_none() {
                slot.binds.store(0, Ordering::Release);
                *guard = table.take().map(|table| AvState { table });
                return Ok(AddressVector {
                    domain: self,
                    index,
                });
            }
        }
        Err(Error::NoMem)
    }
}

/// An open address vector (`fid_av`): an index into the domain's AV slab.
///
/// Dropping the handle closes the AV if no endpoint is bound to it.
pub struct AddressVector<'d, 's, 'n, N: Nic + 'n, const D: usize> {
    domain: &'d Domain<'s, 'n, N, D>,
    index: usize,
}

impl<'d, 's, 'n, N: Nic + 'n, const D: usize> AddressVector<'d, 's, 'n, N, D> {
    fn slot(&self) -> &'s AvSlot<'s> {
        &self.domain.avs()[self.index]
    }

    pub(crate) fn domain(&self) -> &'d Domain<'s, 'n, N, D> {
        self.domain
    }

    /// The AV's index in the domain's AV slab.
    pub fn index(&self) -> usize {
        self.index
    }

    /// Inserts `addrs` (`fi_av_insert`), writing each one's handle to `out` (which must be as
    /// long): the lowest free table entries, in order. An address that finds no free entry
    /// gets [`FiAddr::NOTAVAIL`]. Returns how many were inserted.
    ///
    /// # Errors
    /// `Inval` if `out` is shorter than `addrs`.
    pub fn insert(&self, addrs: &[EpAddr], out: &mut [FiAddr]) -> Result<usize> {
        if out.len() < addrs.len() {
            return Err(Error::Inval);
        }
        let mut guard = self.slot().state.lock();
        let st = guard.as_mut().ok_or(Error::OpBadState)?;
        let mut inserted = 0;
        for (addr, handle) in addrs.iter().zip(out.iter_mut()) {
            *handle = match st.table.iter().position(|e| e.0.is_none()) {
                Some(i) => {
                    st.table[i] = AvEntry(Some(*addr));
                    inserted += 1;
                    FiAddr(i as u64)
                }
                None => FiAddr::NOTAVAIL,
            };
        }
        Ok(inserted)
    }

    /// Removes `handles` (`fi_av_remove`). Either all are removed or none.
    ///
    /// # Errors
    /// `Inval` if any handle names no entry (nothing is removed then).
    pub fn remove(&self, handles: &[FiAddr]) -> Result {
        let mut guard = self.slot().state.lock();
        let st = guard.as_mut().ok_or(Error::OpBadState)?;
        if handles.iter().any(|&h| st.get(h).is_none()) {
            return Err(Error::Inval);
        }
        for h in handles {
            st.table[h.0 as usize] = AvEntry::EMPTY;
        }
        Ok(())
    }

    /// The address behind `handle` (`fi_av_lookup`).
    ///
    /// # Errors
    /// `Inval` if it names no entry.
    pub fn lookup(&self, handle: FiAddr) -> Result<EpAddr> {
        self.slot().lookup(handle).ok_or(Error::Inval)
    }

    /// The handle of `addr`, if it is in the table (the reverse of [`lookup`](Self::lookup);
    /// what `FI_SOURCE` does for every received frame).
    pub fn reverse_lookup(&self, addr: EpAddr) -> Option<FiAddr> {
        self.slot().reverse(addr)
    }

    /// Closes the AV (`fi_close`).
    ///
    /// # Errors
    /// `Err((Error::Busy, self))` while an endpoint is bound to it.
    pub fn close(self) -> core::result::Result<(), (Error, Self)> {
        if self.slot().binds.load(Ordering::Acquire) > 0 {
            return Err((Error::Busy, self));
        }
        drop(self);
        Ok(())
    }
}

impl<N: Nic, const D: usize> Drop for AddressVector<'_, '_, '_, N, D> {
    fn drop(&mut self) {
        let slot = self.slot();
        let mut guard = slot.state.lock();
        if slot.binds.load(Ordering::Acquire) == 0 {
            *guard = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_address_round_trips_and_refuses_other_lengths() {
        let a = EpAddr {
            mac: MacAddr([2, 0, 0, 0, 0, 7]),
            ctx: 0x0102,
        };
        assert_eq!(a.to_bytes(), [2, 0, 0, 0, 0, 7, 1, 2]);
        assert_eq!(EpAddr::from_bytes(&a.to_bytes()), Ok(a));
        assert_eq!(EpAddr::from_bytes(&[0; 7]), Err(Error::Inval));
        assert_eq!(EpAddr::from_bytes(&[0; 9]), Err(Error::Inval));
    }
}
