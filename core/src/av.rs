//! Address vectors (`fi_av`, `FI_AV_TABLE`): peers' endpoint addresses behind small handles.
//!
//! An endpoint address ([`EpAddr`]) is what [`Endpoint::name`](crate::ep::Endpoint::name)
//! returns and what ringfab's frame header carries: the NIC's MAC address and the endpoint's
//! receive-context number on that NIC. An [`AddressVector`] maps them to [`FiAddr`]s, which data
//! operations take as destinations and `readfrom` returns as sources.
//!
//! The table is one of the domain's [`Storage`](crate::storage::Storage) (`AV_ENTRIES`
//! addresses; [`AvAttr::count`] can ask for fewer), so nothing is allocated. `FiAddr`s are table indices, handed out lowest-free-first,
//! as `FI_AV_TABLE` asks. Reverse lookup (source address → `FiAddr`, for `FI_SOURCE`) scans the
//! table; docs/perf.md says what that costs, and a hashed index is the known next step for
//! large tables.
//!
//! # Lookups take no lock
//!
//! Every data operation looks its destination up, from as many threads as there are
//! endpoints and contexts, so an entry is one `AtomicU64` (the 8-byte raw address) read with
//! acquire ordering; only `insert` and `remove` serialise, on the AV's lock. The one address
//! that cannot be stored is the all-ones pattern (broadcast MAC with context `0xffff`), which
//! marks a free entry.
//!
//! # Receive contexts (`rx_ctx_bits`)
//!
//! An AV opened with `rx_ctx_bits` > 0 lets a sender name a receive context of a scalable
//! endpoint: [`FiAddr::rx`] (`fi_rx_addr`) puts the context index in the top `rx_ctx_bits` of
//! the handle, and the lookup gives the peer's address and that index.

use core::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};

use spin::Mutex;

use crate::domain::Domain;
use crate::hal::{MacAddr, Nic};
use crate::storage::Capacity;
use crate::{Error, Result};

/// Address-vector attributes (the parts of `fi_av_attr` ringfab uses; its type is always
/// `FI_AV_TABLE`).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct AvAttr {
    /// The addresses the AV can hold (`fi_av_attr::count`); 0 for the storage's `AV_ENTRIES`.
    pub count: usize,
    /// Bits of a handle that name a receive context of a scalable endpoint
    /// (`fi_av_attr::rx_ctx_bits`; see [`FiAddr::rx`]).
    pub rx_ctx_bits: u32,
}

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

/// One entry of an address vector's table.
pub(crate) struct AvEntry(AtomicU64);

/// The raw value of a free entry.
const FREE: u64 = u64::MAX;

impl AvEntry {
    /// An unused entry.
    #[allow(
        clippy::declare_interior_mutable_const,
        reason = "a fresh entry per use is the point: the storage's tables are built of them"
    )]
    pub(crate) const EMPTY: AvEntry = AvEntry(AtomicU64::new(FREE));

    fn get(&self) -> Option<EpAddr> {
        let v = self.0.load(Ordering::Acquire);
        (v != FREE).then(|| EpAddr::from_u64(v))
    }
}

impl EpAddr {
    /// The raw address as one number: MAC in the high 48 bits, context in the low 16.
    fn to_u64(self) -> u64 {
        u64::from_be_bytes(self.to_bytes())
    }

    fn from_u64(v: u64) -> EpAddr {
        let b = v.to_be_bytes();
        EpAddr {
            mac: MacAddr([b[0], b[1], b[2], b[3], b[4], b[5]]),
            ctx: u16::from_be_bytes([b[6], b[7]]),
        }
    }
}

impl FiAddr {
    /// The handle of receive context `index` of the peer behind `self` (`fi_rx_addr`), for an
    /// AV opened with `rx_ctx_bits` bits for it: the index goes in the top bits.
    pub const fn rx(self, index: u16, rx_ctx_bits: u32) -> FiAddr {
        if rx_ctx_bits == 0 {
            return self;
        }
        FiAddr(self.0 | ((index as u64) << (64 - rx_ctx_bits)))
    }
}

/// An open AV as a lookup sees it: its table (the first `count` entries of its row) and bits.
struct AvState<'a> {
    table: &'a [AvEntry],
    rx_ctx_bits: u32,
}

impl AvState<'_> {
    /// The entry index and receive-context index a handle names.
    fn split(&self, addr: FiAddr) -> Option<(usize, u16)> {
        if addr == FiAddr::NOTAVAIL {
            return None;
        }
        let (index, rx) = if self.rx_ctx_bits == 0 {
            (addr.0, 0)
        } else {
            let shift = 64 - self.rx_ctx_bits;
            (addr.0 & ((1u64 << shift) - 1), (addr.0 >> shift) as u16)
        };
        Some((usize::try_from(index).ok()?, rx))
    }

    fn get(&self, addr: FiAddr) -> Option<(EpAddr, u16)> {
        let (i, rx) = self.split(addr)?;
        self.table.get(i).and_then(AvEntry::get).map(|a| (a, rx))
    }

    fn find(&self, addr: EpAddr) -> Option<FiAddr> {
        self.table
            .iter()
            .position(|e| e.get() == Some(addr))
            .map(|i| FiAddr(i as u64))
    }
}

/// One slot of the domain's address-vector table ([`crate::storage`]). Its addresses are a row
/// of the domain's address table ([`AvRef`]).
pub(crate) struct AvSlot {
    /// Whether the AV is open; `insert`, `remove`, open and close serialise on this lock.
    state: Mutex<bool>,
    /// The open AV's length (0 while closed) and `rx_ctx_bits`, published under `state`'s lock
    /// so that lookups — every send, every received frame — take no lock.
    len: AtomicUsize,
    rx_ctx_bits: AtomicU32,
    /// Endpoints bound to it.
    binds: AtomicUsize,
}

impl AvSlot {
    /// A free slot.
    #[allow(
        clippy::declare_interior_mutable_const,
        reason = "a fresh slot per use is the point: the domain's table is built of them"
    )]
    pub(crate) const EMPTY: Self = AvSlot {
        state: Mutex::new(false),
        len: AtomicUsize::new(0),
        rx_ctx_bits: AtomicU32::new(0),
        binds: AtomicUsize::new(0),
    };
}

/// The domain's address vectors: their slots and the one table their rows share.
#[derive(Clone, Copy)]
pub(crate) struct AvTables<'a> {
    pub(crate) slots: &'a [AvSlot],
    pub(crate) entries: &'a [AvEntry],
    /// Entries per AV.
    pub(crate) size: usize,
}

impl<'a> AvTables<'a> {
    /// AV `index`, if the domain has one of that index.
    pub(crate) fn get(&self, index: usize) -> Option<AvRef<'a>> {
        let slot = self.slots.get(index)?;
        let row = self.entries.get(index * self.size..)?.get(..self.size)?;
        Some(AvRef { slot, row })
    }

    /// AV `index` of a handle or binding (in range: core made the index; were it not, a
    /// closed, empty AV, never a panic).
    pub(crate) fn at(&self, index: usize) -> AvRef<'a> {
        /// What an index out of range names: an AV that is never open.
        static NONE: AvSlot = AvSlot::EMPTY;
        self.get(index).unwrap_or(AvRef {
            slot: &NONE,
            row: &[],
        })
    }
}

/// One AV: its slot and its row of the domain's address table.
#[derive(Clone, Copy)]
pub(crate) struct AvRef<'a> {
    slot: &'a AvSlot,
    row: &'a [AvEntry],
}

impl<'a> AvRef<'a> {
    fn view(&self) -> Option<AvState<'a>> {
        let len = self.slot.len.load(Ordering::Acquire);
        let table = self.row.get(..len).filter(|t| !t.is_empty())?;
        Some(AvState {
            table,
            rx_ctx_bits: self.slot.rx_ctx_bits.load(Ordering::Relaxed),
        })
    }

    /// Publishes the open AV's length and bits for lookups (`None`: closed). Called under the
    /// slot's lock.
    fn publish(&self, open: Option<(usize, u32)>) {
        let (len, bits) = open.unwrap_or((0, 0));
        self.slot.rx_ctx_bits.store(bits, Ordering::Relaxed);
        self.slot.len.store(len, Ordering::Release);
    }

    /// The address behind `addr` and the receive context it names, if it is in the table.
    pub(crate) fn lookup(&self, addr: FiAddr) -> Option<(EpAddr, u16)> {
        self.view().and_then(|st| st.get(addr))
    }

    /// The `FiAddr` of `addr`, if it is in the table (the lowest, if inserted twice).
    pub(crate) fn reverse(&self, addr: EpAddr) -> Option<FiAddr> {
        self.view().and_then(|st| st.find(addr))
    }

    pub(crate) fn bind(&self) {
        self.slot.binds.fetch_add(1, Ordering::AcqRel);
    }

    pub(crate) fn unbind(&self) {
        self.slot.binds.fetch_sub(1, Ordering::AcqRel);
    }
}

impl<'n, N: Nic + 'n, const D: usize> Domain<'n, N, D> {
    /// Opens an address vector (`fi_av_open`, `FI_AV_TABLE`) of `attr.count` addresses (the
    /// storage's `AV_ENTRIES` for 0), whose handles name receive contexts in their top
    /// `attr.rx_ctx_bits` bits ([`FiAddr::rx`]).
    ///
    /// # Errors
    /// `Inval` for `rx_ctx_bits` above 16 or leaving too few bits for the table's indices;
    /// `Full(AvEntries)` for a count above the storage's `AV_ENTRIES`; `Full(Avs)` when every
    /// AV slot is taken.
    pub fn open_av(&self, attr: &AvAttr) -> Result<AddressVector> {
        let avs = self.avs();
        for index in 0..avs.slots.len() {
            let av = avs.at(index);
            let mut open = av.slot.state.lock();
            if *open {
                continue;
            }
            let count = if attr.count == 0 {
                av.row.len()
            } else {
                attr.count
            };
            let table = av
                .row
                .get(..count)
                .filter(|t| !t.is_empty())
                .ok_or(Error::Full(Capacity::AvEntries))?;
            let index_bits = usize::BITS - count.leading_zeros();
            let rx_ctx_bits = attr.rx_ctx_bits;
            if rx_ctx_bits > 16 || index_bits + rx_ctx_bits > 63 {
                return Err(Error::Inval);
            }
            for e in table {
                e.0.store(FREE, Ordering::Release);
            }
            av.slot.binds.store(0, Ordering::Release);
            *open = true;
            av.publish(Some((count, rx_ctx_bits)));
            return Ok(AddressVector {
                domain: self.id(),
                index,
            });
        }
        Err(Error::Full(Capacity::Avs))
    }
}

/// An open address vector (`fid_av`): an index into its domain's AV table. Its methods take the
/// domain it was opened in (another domain's is `Domain`).
///
/// Dropping the handle leaves the AV open until the domain goes; [`close`](Self::close) closes
/// it.
#[derive(Debug)]
pub struct AddressVector {
    domain: u32,
    index: usize,
}

impl AddressVector {
    fn av<'d, N: Nic, const D: usize>(&self, dom: &'d Domain<'_, N, D>) -> Result<AvRef<'d>> {
        dom.check(self.domain)?;
        Ok(dom.avs().at(self.index))
    }

    /// The id of the domain the AV belongs to.
    pub(crate) fn domain_id(&self) -> u32 {
        self.domain
    }

    /// The AV's index in the domain's AV table.
    pub fn index(&self) -> usize {
        self.index
    }

    /// The AV's `rx_ctx_bits` ([`AvAttr::rx_ctx_bits`]; 0 for another domain's AV).
    pub fn rx_ctx_bits<N: Nic, const D: usize>(&self, dom: &Domain<'_, N, D>) -> u32 {
        self.av(dom)
            .ok()
            .and_then(|av| av.view())
            .map_or(0, |st| st.rx_ctx_bits)
    }

    /// Inserts `addrs` (`fi_av_insert`), writing each one's handle to `out` (which must be as
    /// long): the lowest free table entries, in order. An address that finds no free entry
    /// gets [`FiAddr::NOTAVAIL`]. Returns how many were inserted.
    ///
    /// # Errors
    /// `Inval` if `out` is shorter than `addrs`, or for the one address that cannot be stored
    /// (broadcast with context `0xffff`; nothing is inserted then); `Domain` for another
    /// domain.
    pub fn insert<N: Nic, const D: usize>(
        &self,
        dom: &Domain<'_, N, D>,
        addrs: &[EpAddr],
        out: &mut [FiAddr],
    ) -> Result<usize> {
        if out.len() < addrs.len() || addrs.iter().any(|a| a.to_u64() == FREE) {
            return Err(Error::Inval);
        }
        let av = self.av(dom)?;
        let open = av.slot.state.lock();
        let st = av.view().filter(|_| *open).ok_or(Error::OpBadState)?;
        let mut inserted = 0;
        for (addr, handle) in addrs.iter().zip(out.iter_mut()) {
            *handle = match st.table.iter().position(|e| e.get().is_none()) {
                Some(i) => {
                    st.table[i].0.store(addr.to_u64(), Ordering::Release);
                    inserted += 1;
                    FiAddr(i as u64)
                }
                None => FiAddr::NOTAVAIL,
            };
        }
        Ok(inserted)
    }

    /// Inserts one address (`fi_av_insert` with a count of 1) and returns its handle: an
    /// [`EpAddr`], or anything that names one (`&Endpoint` gives the endpoint's own address,
    /// as `fi_getname` would).
    ///
    /// # Errors
    /// `Full(AvEntries)` when the table has no free entry; what [`insert`](Self::insert)
    /// returns otherwise.
    pub fn insert_one<N: Nic, const D: usize>(
        &self,
        dom: &Domain<'_, N, D>,
        addr: impl Into<EpAddr>,
    ) -> Result<FiAddr> {
        let mut out = [FiAddr::NOTAVAIL];
        match self.insert(dom, &[addr.into()], &mut out)? {
            1 => Ok(out[0]),
            _ => Err(Error::Full(Capacity::AvEntries)),
        }
    }

    /// Removes `handles` (`fi_av_remove`). Either all are removed or none.
    ///
    /// # Errors
    /// `Inval` if any handle names no entry (nothing is removed then); `Domain` for another
    /// domain.
    pub fn remove<N: Nic, const D: usize>(
        &self,
        dom: &Domain<'_, N, D>,
        handles: &[FiAddr],
    ) -> Result {
        let av = self.av(dom)?;
        let open = av.slot.state.lock();
        let st = av.view().filter(|_| *open).ok_or(Error::OpBadState)?;
        if handles.iter().any(|&h| st.get(h).is_none()) {
            return Err(Error::Inval);
        }
        for &h in handles {
            if let Some((i, _)) = st.split(h) {
                st.table[i].0.store(FREE, Ordering::Release);
            }
        }
        Ok(())
    }

    /// The address behind `handle` (`fi_av_lookup`).
    ///
    /// # Errors
    /// `Inval` if it names no entry; `Domain` for another domain.
    pub fn lookup<N: Nic, const D: usize>(
        &self,
        dom: &Domain<'_, N, D>,
        handle: FiAddr,
    ) -> Result<EpAddr> {
        self.av(dom)?
            .lookup(handle)
            .map(|(a, _)| a)
            .ok_or(Error::Inval)
    }

    /// The handle of `addr`, if it is in the table (the reverse of [`lookup`](Self::lookup);
    /// what `FI_SOURCE` does for every received frame).
    pub fn reverse_lookup<N: Nic, const D: usize>(
        &self,
        dom: &Domain<'_, N, D>,
        addr: EpAddr,
    ) -> Option<FiAddr> {
        self.av(dom).ok()?.reverse(addr)
    }

    /// Closes the AV (`fi_close`).
    ///
    /// # Errors
    /// `Err((Error::Busy, self))` while an endpoint is bound to it; `Domain` for another
    /// domain.
    pub fn close<N: Nic, const D: usize>(
        self,
        dom: &Domain<'_, N, D>,
    ) -> core::result::Result<(), (Error, Self)> {
        let av = match self.av(dom) {
            Ok(av) => av,
            Err(e) => return Err((e, self)),
        };
        let mut open = av.slot.state.lock();
        if av.slot.binds.load(Ordering::Acquire) > 0 {
            drop(open);
            return Err((Error::Busy, self));
        }
        av.publish(None);
        *open = false;
        Ok(())
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
