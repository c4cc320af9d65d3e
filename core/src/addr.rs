//! Endpoint addresses and the address table behind address vectors: values every floor of
//! core uses, with no queue and no object in them.
//!
//! An endpoint address ([`EpAddr`]) is what [`Endpoint::name`](crate::ep::Endpoint::name)
//! returns and what ringfab's frame header carries: the NIC's MAC address and the endpoint's
//! receive-context number on that NIC. A [`FiAddr`] (`fi_addr_t`) is a handle an address vector
//! ([`crate::av`], the object) hands out for one. The table those handles index is kept here
//! (`AvSlot`, `AvEntry`, read through `AvTables`/`AvRef`), because the engine reads it on
//! every received frame for `FI_SOURCE`, without a lock and without knowing the AV object:
//! an entry is one `AtomicU64` (the 8-byte raw address) read with acquire ordering; only the
//! AV's `insert` and `remove` serialise, on its lock. The one address that cannot be stored is
//! the all-ones pattern (broadcast MAC with context `0xffff`), which marks a free entry.

use core::sync::atomic::{AtomicU32, AtomicU8, AtomicUsize, Ordering};

use spin::Mutex;

use crate::atomic::AtomicU64;
use crate::hal::MacAddr;
use crate::ip::SockAddrIn;
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

/// The address format of an address vector (`fi_av_attr`'s, from `fi_info::addr_format`):
/// every address in one AV is of its format.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
#[repr(u8)]
pub enum AddrFormat {
    /// ringfab's own 8-byte address ([`EpAddr`]): endpoints on ringfab's encapsulations.
    #[default]
    Ringfab,
    /// `FI_SOCKADDR_IN` ([`SockAddrIn`]): plain-UDP endpoints (`docs/ip.md`).
    SockaddrIn,
}

impl AddrFormat {
    pub(crate) fn from_u8(v: u8) -> AddrFormat {
        if v == AddrFormat::SockaddrIn as u8 {
            AddrFormat::SockaddrIn
        } else {
            AddrFormat::Ringfab
        }
    }
}

/// A peer's raw address in either format: what a received frame names as its sender
/// (`FI_SOURCE`, and `err_data` under `FI_SOURCE_ERR`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum RawAddr {
    /// A ringfab endpoint.
    Ep(EpAddr),
    /// A UDP sender.
    In(SockAddrIn),
}

impl RawAddr {
    /// The number an address vector stores for it (its format's).
    pub(crate) fn key(self) -> u64 {
        match self {
            RawAddr::Ep(a) => a.to_u64(),
            RawAddr::In(a) => a.to_key(),
        }
    }

    /// Writes the raw form (`fi_getname`'s, `fi_av_insert`'s) into `out`; returns its length.
    pub(crate) fn write(self, out: &mut [u8]) -> usize {
        match self {
            RawAddr::Ep(a) => copy(out, &a.to_bytes()),
            RawAddr::In(a) => copy(out, &a.to_bytes()),
        }
    }
}

fn copy(out: &mut [u8], b: &[u8]) -> usize {
    let n = b.len().min(out.len());
    out[..n].copy_from_slice(&b[..n]);
    n
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
pub(crate) struct AvEntry(pub(crate) AtomicU64);

/// The raw value of a free entry.
pub(crate) const FREE: u64 = u64::MAX;

impl AvEntry {
    /// An unused entry.
    #[allow(
        clippy::declare_interior_mutable_const,
        reason = "a fresh entry per use is the point: the storage's tables are built of them"
    )]
    pub(crate) const EMPTY: AvEntry = AvEntry(AtomicU64::new(FREE));

    pub(crate) fn get(&self) -> Option<EpAddr> {
        self.key().map(EpAddr::from_u64)
    }

    /// The stored number, whatever the AV's format.
    pub(crate) fn key(&self) -> Option<u64> {
        let v = self.0.load(Ordering::Acquire);
        (v != FREE).then_some(v)
    }
}

impl EpAddr {
    /// The raw address as one number: MAC in the high 48 bits, context in the low 16.
    pub(crate) fn to_u64(self) -> u64 {
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
pub(crate) struct AvState<'a> {
    pub(crate) table: &'a [AvEntry],
    pub(crate) rx_ctx_bits: u32,
    pub(crate) format: AddrFormat,
}

impl AvState<'_> {
    /// The entry index and receive-context index a handle names.
    pub(crate) fn split(&self, addr: FiAddr) -> Option<(usize, u16)> {
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

    pub(crate) fn get(&self, addr: FiAddr) -> Option<(EpAddr, u16)> {
        let (i, rx) = self.split(addr)?;
        self.table.get(i).and_then(AvEntry::get).map(|a| (a, rx))
    }

    pub(crate) fn find(&self, addr: EpAddr) -> Option<FiAddr> {
        self.find_key(addr.to_u64())
    }

    /// The handle of the entry storing `key` (the lowest, if inserted twice).
    pub(crate) fn find_key(&self, key: u64) -> Option<FiAddr> {
        self.table
            .iter()
            .position(|e| e.key() == Some(key))
            .map(|i| FiAddr(i as u64))
    }

    /// The `sockaddr_in` behind `addr` in an AV of that format.
    pub(crate) fn get_in(&self, addr: FiAddr) -> Option<SockAddrIn> {
        if self.format != AddrFormat::SockaddrIn {
            return None;
        }
        let (i, _) = self.split(addr)?;
        self.table
            .get(i)
            .and_then(AvEntry::key)
            .and_then(SockAddrIn::from_key)
    }
}

/// One slot of the domain's address-vector table (`crate::storage`). Its addresses are a row
/// of the domain's address table ([`AvRef`]).
pub(crate) struct AvSlot {
    /// Whether the AV is open; `insert`, `remove`, open and close serialise on this lock.
    pub(crate) state: Mutex<bool>,
    /// The open AV's length (0 while closed) and `rx_ctx_bits`, published under `state`'s lock
    /// so that lookups — every send, every received frame — take no lock.
    len: AtomicUsize,
    rx_ctx_bits: AtomicU32,
    /// Its [`AddrFormat`], published with the length.
    format: AtomicU8,
    /// Endpoints bound to it.
    pub(crate) binds: AtomicUsize,
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
        format: AtomicU8::new(0),
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
    pub(crate) slot: &'a AvSlot,
    pub(crate) row: &'a [AvEntry],
}

impl<'a> AvRef<'a> {
    pub(crate) fn view(&self) -> Option<AvState<'a>> {
        let len = self.slot.len.load(Ordering::Acquire);
        let table = self.row.get(..len).filter(|t| !t.is_empty())?;
        Some(AvState {
            table,
            rx_ctx_bits: self.slot.rx_ctx_bits.load(Ordering::Relaxed),
            format: AddrFormat::from_u8(self.slot.format.load(Ordering::Relaxed)),
        })
    }

    /// Publishes the open AV's length, bits and format for lookups (`None`: closed). Called
    /// under the slot's lock.
    pub(crate) fn publish(&self, open: Option<(usize, u32, AddrFormat)>) {
        let (len, bits, format) = open.unwrap_or((0, 0, AddrFormat::Ringfab));
        self.slot.rx_ctx_bits.store(bits, Ordering::Relaxed);
        self.slot.format.store(format as u8, Ordering::Relaxed);
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

    /// The `FiAddr` of a raw address, if the AV is of its format and holds it.
    pub(crate) fn reverse_raw(&self, addr: RawAddr) -> Option<FiAddr> {
        let st = self.view()?;
        let format = match addr {
            RawAddr::Ep(_) => AddrFormat::Ringfab,
            RawAddr::In(_) => AddrFormat::SockaddrIn,
        };
        (st.format == format).then(|| st.find_key(addr.key()))?
    }

    /// The `sockaddr_in` behind `addr`, in an AV of that format.
    pub(crate) fn lookup_in(&self, addr: FiAddr) -> Option<SockAddrIn> {
        self.view().and_then(|st| st.get_in(addr))
    }

    pub(crate) fn bind(&self) {
        self.slot.binds.fetch_add(1, Ordering::AcqRel);
    }

    pub(crate) fn unbind(&self) {
        self.slot.binds.fetch_sub(1, Ordering::AcqRel);
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
