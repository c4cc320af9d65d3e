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

use core::sync::atomic::Ordering;

pub use crate::addr::{AddrFormat, EpAddr, FiAddr};
use crate::addr::{AvRef, FREE};
use crate::domain::Domain;
use crate::hal::Nic;
use crate::ip::SockAddrIn;
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
    /// The format of every address it holds (libfabric's `addr_format`, which an AV takes
    /// from the `fi_info` it was opened with): ringfab's (the default), or `FI_SOCKADDR_IN`
    /// for plain-UDP endpoints (`docs/ip.md`). An endpoint binds an AV of its
    /// encapsulation's format.
    pub format: AddrFormat,
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
            av.publish(Some((count, rx_ctx_bits, attr.format)));
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

    /// Binds the AV into `binding`, an endpoint's (or scalable endpoint's) one AV
    /// (`fi_ep_bind` with an AV): counted, so that `close` is `Busy` while it is bound.
    ///
    /// # Errors
    /// `Inval` if `binding` already holds one.
    pub(crate) fn bind_into<N: Nic, const D: usize>(
        &self,
        dom: &Domain<'_, N, D>,
        binding: &mut Option<usize>,
    ) -> Result {
        if binding.is_some() {
            return Err(Error::Inval);
        }
        dom.avs().at(self.index).bind();
        *binding = Some(self.index);
        Ok(())
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
    /// `Inval` if `out` is shorter than `addrs`, for an AV of another [format](AvAttr::format),
    /// or for the one address that cannot be stored (broadcast with context `0xffff`; nothing
    /// is inserted then); `Domain` for another domain.
    pub fn insert<N: Nic, const D: usize>(
        &self,
        dom: &Domain<'_, N, D>,
        addrs: &[EpAddr],
        out: &mut [FiAddr],
    ) -> Result<usize> {
        if addrs.iter().any(|a| a.to_u64() == FREE) {
            return Err(Error::Inval);
        }
        self.insert_keys(
            dom,
            AddrFormat::Ringfab,
            addrs.iter().map(|a| a.to_u64()),
            out,
        )
    }

    /// Inserts `sockaddr_in` addresses (`fi_av_insert` on an AV of format
    /// [`AddrFormat::SockaddrIn`]), as [`insert`](Self::insert) does. Each peer's address
    /// resolution starts now (`docs/ip.md`, "ARP"), if the domain has its IPv4 configuration:
    /// its ARP request goes out with the next progress of a plain-UDP endpoint.
    ///
    /// # Errors
    /// `Inval` if `out` is shorter than `addrs` or for an AV of another format; `Domain` for
    /// another domain.
    pub fn insert_sockaddr<N: Nic, const D: usize>(
        &self,
        dom: &Domain<'_, N, D>,
        addrs: &[SockAddrIn],
        out: &mut [FiAddr],
    ) -> Result<usize> {
        let n = self.insert_keys(
            dom,
            AddrFormat::SockaddrIn,
            addrs.iter().map(|a| a.to_key()),
            out,
        )?;
        for a in addrs {
            dom.ip_prefetch(a.addr);
        }
        Ok(n)
    }

    /// [`insert_sockaddr`](Self::insert_sockaddr) of one address; returns its handle.
    ///
    /// # Errors
    /// `Full(AvEntries)` when the table has no free entry; what
    /// [`insert_sockaddr`](Self::insert_sockaddr) returns otherwise.
    pub fn insert_sockaddr_one<N: Nic, const D: usize>(
        &self,
        dom: &Domain<'_, N, D>,
        addr: SockAddrIn,
    ) -> Result<FiAddr> {
        let mut out = [FiAddr::NOTAVAIL];
        match self.insert_sockaddr(dom, &[addr], &mut out)? {
            1 => Ok(out[0]),
            _ => Err(Error::Full(Capacity::AvEntries)),
        }
    }

    fn insert_keys<N: Nic, const D: usize>(
        &self,
        dom: &Domain<'_, N, D>,
        format: AddrFormat,
        keys: impl ExactSizeIterator<Item = u64>,
        out: &mut [FiAddr],
    ) -> Result<usize> {
        if out.len() < keys.len() {
            return Err(Error::Inval);
        }
        let av = self.av(dom)?;
        let open = av.slot.state.lock();
        let st = av.view().filter(|_| *open).ok_or(Error::OpBadState)?;
        if st.format != format {
            return Err(Error::Inval);
        }
        let mut inserted = 0;
        for (key, handle) in keys.zip(out.iter_mut()) {
            *handle = match st.table.iter().position(|e| e.key().is_none()) {
                Some(i) => {
                    st.table[i].0.store(key, Ordering::Release);
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
        if handles.iter().any(|&h| {
            st.split(h)
                .and_then(|(i, _)| st.table.get(i)?.key())
                .is_none()
        }) {
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
        let av = self.av(dom)?;
        if av.view().is_some_and(|st| st.format != AddrFormat::Ringfab) {
            return Err(Error::Inval);
        }
        av.lookup(handle).map(|(a, _)| a).ok_or(Error::Inval)
    }

    /// The `sockaddr_in` behind `handle` (`fi_av_lookup` on an AV of format
    /// [`AddrFormat::SockaddrIn`]).
    ///
    /// # Errors
    /// `Inval` if it names no entry or the AV is of another format; `Domain` for another
    /// domain.
    pub fn lookup_sockaddr<N: Nic, const D: usize>(
        &self,
        dom: &Domain<'_, N, D>,
        handle: FiAddr,
    ) -> Result<SockAddrIn> {
        self.av(dom)?.lookup_in(handle).ok_or(Error::Inval)
    }

    /// The handle of `addr`, if it is in the table (what `FI_SOURCE` does for every datagram
    /// received).
    pub fn reverse_lookup_sockaddr<N: Nic, const D: usize>(
        &self,
        dom: &Domain<'_, N, D>,
        addr: SockAddrIn,
    ) -> Option<FiAddr> {
        self.av(dom)
            .ok()?
            .reverse_raw(crate::addr::RawAddr::In(addr))
    }

    /// The AV's address format ([`AvAttr::format`]; the default for another domain's AV).
    pub fn format<N: Nic, const D: usize>(&self, dom: &Domain<'_, N, D>) -> AddrFormat {
        self.av(dom)
            .ok()
            .and_then(|av| av.view())
            .map_or(AddrFormat::Ringfab, |st| st.format)
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
