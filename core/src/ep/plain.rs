//! Sends of a plain-UDP endpoint (`docs/ip.md`, "The send path"): the destination's
//! `sockaddr_in` from the AV, its next hop's MAC from the domain's ARP cache, the 42-byte
//! Ethernet/IPv4/UDP header (RFC 894, RFC 791, RFC 768) written in front of the payload with
//! the IPv4 checksum computed in software, and the UDP checksum inserted by the NIC where it
//! offers that (`Offloads::tx_l4_checksum`: the field gets the pseudo-header's sum and the
//! payload is not read) or computed in software from the payload. A send to a next hop being
//! resolved is held (its completion comes later: released by the progress of a CQ read, or
//! failed `FI_EHOSTUNREACH`); an inject to one is `Again`, its resolution started.

use crate::addr::FiAddr;
use crate::buf::{Buf, Iov, RawBuf, IOV_MAX};
use crate::domain::Domain;
use crate::engine::{udp_offload_request, HeldSend};
use crate::entry::OpContext;
use crate::flags::OpFlags;
use crate::hal::{Nic, TxSegment};
use crate::ip::checksum::Sum;
use crate::ip::emit::UdpChecksum;
use crate::ip::{SockAddrIn, UDP_HEADER_LEN};
use crate::{Error, Result};

use super::*;

/// Bytes of payload summed per read out of a buffer.
const SUM_CHUNK: usize = 256;

impl Endpoint {
    /// Checks a plain-UDP send of `len` bytes and gives its source and destination.
    fn check_plain<'d, 'n, N: Nic + 'n, const D: usize>(
        &self,
        dom: &'d Domain<'n, N, D>,
        len: usize,
        dest: FiAddr,
        data: Option<u64>,
        flags: OpFlags,
    ) -> Result<(SockAddrIn, SockAddrIn)> {
        self.usable(dom)?;
        // A UDP datagram has no field for remote CQ data.
        if !TX_FLAGS_OK.contains(flags) || flags.contains(OpFlags::REMOTE_CQ_DATA) || data.is_some()
        {
            return Err(Error::BadFlags);
        }
        // `usable` found the endpoint enabled: `max_send` is its `max_msg_size`.
        if len > self.max_send {
            return Err(Error::MsgSize);
        }
        let av = self.av.and_then(|i| dom.avs().get(i)).ok_or(Error::NoAv)?;
        let dst = av.lookup_in(dest).ok_or(Error::Inval)?;
        let src = self.sockaddr(dom).ok_or(Error::AddrNotAvail)?;
        Ok((src, dst))
    }

    /// [`sendmsg`](Self::sendmsg) on plain UDP.
    #[allow(
        clippy::too_many_arguments,
        reason = "fi_sendmsg's message fields, its flags, and the domain the endpoint is in"
    )]
    pub(super) fn send_plain<'d, 'n, N: Nic + 'n, const D: usize>(
        &self,
        dom: &'d Domain<'n, N, D>,
        mut buf: Buf<'d>,
        len: usize,
        dest: FiAddr,
        data: Option<u64>,
        context: OpContext,
        flags: OpFlags,
    ) -> core::result::Result<(), (Error, Buf<'d>)> {
        let (src, dst) = match self.check_plain(dom, len, dest, data, flags) {
            Ok(a) => a,
            Err(e) => return Err((e, buf)),
        };
        let Some(segment) = buf.tx_segment(UDP_HEADER_LEN + len) else {
            return Err((Error::Inval, buf));
        };
        let checksum = dom.ip().udp_checksum(|| {
            let mut sum = Sum::new();
            sum_into(&mut sum, &buf, UDP_HEADER_LEN, len)?;
            Ok(sum)
        });
        let checksum = match checksum {
            Ok(c) => c,
            Err(e) => return Err((e, buf)),
        };
        let (tx, cq) = match (self.tx_path(dom), self.cq_slot(dom, self.tx_cq)) {
            (Some(tx), Ok(cq)) => (tx, cq),
            (None, _) => return Err((Error::OpBadState, buf)),
            (_, Err(e)) => return Err((e, buf)),
        };
        let report = flags.needs_completion(self.tx_cq.map_or(BindFlags::empty(), |b| b.flags));
        // The held send's credit: its completion, success or error, must find room.
        if let Err(e) = cq.credits.reserve_credit() {
            return Err((e, buf));
        }
        let held = HeldSend {
            path: tx.index,
            buf: buf.raw(),
            payload_len: len as u16,
            src,
            dst,
            checksum,
            context,
            report,
            who: self.poster(),
            extra: [None; IOV_MAX - 1],
            extra_lens: [0; IOV_MAX - 1],
        };
        match dom.ip().route(dst.addr, Some(held), dom.now()) {
            Ok(None) => {
                // Held: the ARP request it asked for goes out now.
                self.drain_control(dom);
                buf.posted(Ok(()))
            }
            Ok(Some(mac)) => {
                cq.credits.release_credit();
                let written = header(self.source.mac, mac, src, dst, len, checksum)
                    .and_then(|head| buf.write(0, &head));
                if let Err(e) = written {
                    return Err((e, buf));
                }
                let offload = udp_offload_request(checksum);
                let r = self.post_tx(dom, &[segment], buf.raw(), context, flags, offload);
                self.drain_control(dom);
                buf.posted(r)
            }
            Err(e) => {
                cq.credits.release_credit();
                Err((e, buf))
            }
        }
    }

    /// [`sendmsgv`](Self::sendmsgv) on plain UDP: one datagram of the buffers' bytes, in
    /// order. The 42-byte header goes in front of the first buffer's payload (at
    /// [`payload_offset`](Self::payload_offset)), as a [`send`](Self::send)'s does; each further
    /// buffer is sent from its start, with no copy. The UDP checksum covers every piece: summed
    /// in software across them (RFC 1071's sum is the same over pieces as over the whole), or
    /// inserted by the NIC, which sums the whole frame it gathers. A next hop not yet resolved
    /// holds the send, all its buffers with it, as a send of one buffer is held.
    #[allow(
        clippy::result_large_err,
        reason = "decision 6: the buffers come back with the error; no allocator to box them"
    )]
    pub(super) fn sendv_plain<'d, 'n, N: Nic + 'n, const D: usize>(
        &self,
        dom: &'d Domain<'n, N, D>,
        mut iov: Iov<'d>,
        dest: FiAddr,
        data: Option<u64>,
        context: OpContext,
        flags: OpFlags,
    ) -> core::result::Result<(), (Error, Iov<'d>)> {
        let n = iov.len();
        if n == 0 || n > self.iov_limit(dom) || (1..n).any(|i| iov.get(i).is_some_and(|b| b.1 == 0))
        {
            return Err((Error::Inval, iov));
        }
        let total = iov.total();
        let (src, dst) = match self.check_plain(dom, total, dest, data, flags) {
            Ok(a) => a,
            Err(e) => return Err((e, iov)),
        };
        let mut segs = [TxSegment {
            iova: crate::hal::Iova(0),
            len: 0,
        }; IOV_MAX];
        let mut raws: [Option<RawBuf>; IOV_MAX] = [None; IOV_MAX];
        let mut lens = [0u16; IOV_MAX];
        for i in 0..n {
            let Some((b, len)) = iov.get(i) else {
                return Err((Error::Inval, iov));
            };
            let front = if i == 0 { UDP_HEADER_LEN } else { 0 };
            let Some(seg) = b.tx_segment(front + len) else {
                return Err((Error::Inval, iov));
            };
            segs[i] = seg;
            raws[i] = Some(b.raw());
            lens[i] = len as u16;
        }
        let checksum = dom.ip().udp_checksum(|| {
            let mut sum = Sum::new();
            for i in 0..n {
                let (b, len) = iov.get(i).ok_or(Error::Inval)?;
                let front = if i == 0 { UDP_HEADER_LEN } else { 0 };
                sum_into(&mut sum, b, front, len)?;
            }
            Ok(sum)
        });
        let checksum = match checksum {
            Ok(c) => c,
            Err(e) => return Err((e, iov)),
        };
        let (Some(first), Some(tx), Ok(cq)) =
            (raws[0], self.tx_path(dom), self.cq_slot(dom, self.tx_cq))
        else {
            return Err((Error::OpBadState, iov));
        };
        let report = flags.needs_completion(self.tx_cq.map_or(BindFlags::empty(), |b| b.flags));
        // The held send's credit: its completion, success or error, must find room.
        if let Err(e) = cq.credits.reserve_credit() {
            return Err((e, iov));
        }
        let mut extra = [None; IOV_MAX - 1];
        extra.copy_from_slice(&raws[1..]);
        let mut extra_lens = [0; IOV_MAX - 1];
        extra_lens.copy_from_slice(&lens[1..]);
        let held = HeldSend {
            path: tx.index,
            buf: first,
            payload_len: total as u16,
            src,
            dst,
            checksum,
            context,
            report,
            who: self.poster(),
            extra,
            extra_lens,
        };
        match dom.ip().route(dst.addr, Some(held), dom.now()) {
            Ok(None) => {
                // Held: the ARP request it asked for goes out now.
                self.drain_control(dom);
                iov.posted(Ok(()))
            }
            Ok(Some(mac)) => {
                cq.credits.release_credit();
                let written =
                    header(self.source.mac, mac, src, dst, total, checksum).and_then(|head| {
                        iov.first_mut()
                            .map_or(Err(Error::Inval), |b| b.write(0, &head))
                    });
                if let Err(e) = written {
                    return Err((e, iov));
                }
                let offload = udp_offload_request(checksum);
                let r = if n == 1 {
                    self.post_tx(dom, &segs[..1], first, context, flags, offload)
                } else {
                    tx.with_state(|st| {
                        let r = st.post_send_iov(
                            cq.credits,
                            &segs[..n],
                            first,
                            extra,
                            context,
                            report,
                            self.poster(),
                            offload,
                        );
                        if !flags.contains(OpFlags::MORE) || r.is_err() {
                            st.doorbell();
                        }
                        r
                    })
                };
                self.drain_control(dom);
                iov.posted(r)
            }
            Err(e) => {
                cq.credits.release_credit();
                Err((e, iov))
            }
        }
    }

    /// [`inject`](Self::inject) and [`injectmsg`](Self::injectmsg) on plain UDP: `Again` to a
    /// next hop not yet resolved (its resolution started; no bounce slot is held for it).
    pub(super) fn inject_plain<'d, 'n, N: Nic + 'n, const D: usize>(
        &self,
        dom: &'d Domain<'n, N, D>,
        payload: &[u8],
        data: Option<u64>,
        dest: FiAddr,
        context: OpContext,
        flags: Option<OpFlags>,
    ) -> Result {
        let (src, dst) = self.check_plain(
            dom,
            payload.len(),
            dest,
            data,
            flags.unwrap_or(OpFlags::empty()),
        )?;
        let mac = match dom.ip().route(dst.addr, None, dom.now()) {
            Ok(Some(mac)) => mac,
            Ok(None) | Err(Error::Again) => {
                // Not resolved: the ARP request it asked for goes out now.
                self.drain_control(dom);
                return Err(Error::Again);
            }
            Err(e) => return Err(e),
        };
        let tx = self.tx_path(dom).ok_or(Error::OpBadState)?;
        let cq = self.cq_slot(dom, self.tx_cq)?;
        let checksum = dom.ip().udp_checksum(|| {
            let mut sum = Sum::new();
            sum.add(payload);
            Ok(sum)
        })?;
        let head = header(self.source.mac, mac, src, dst, payload.len(), checksum)?;
        let offload = udp_offload_request(checksum);
        let r = self.post_copied(&tx, cq.credits, &head, payload, context, flags, offload);
        self.drain_control(dom);
        r
    }

    /// A send's share of the domain's IPv4 progress (`docs/ip.md`, "ARP, ICMP answers and the
    /// control outbox"): what the control outbox holds goes out on this endpoint's transmit
    /// path. One load when it holds nothing, which is nearly always.
    fn drain_control<'d, 'n, N: Nic + 'n, const D: usize>(&self, dom: &'d Domain<'n, N, D>) {
        if !dom.ip().has_control() {
            return;
        }
        if let Some(tx) = self.tx_path(dom) {
            // A path closed meanwhile has nothing to drain into: the next poll will.
            let _ = tx.with_state(|st| {
                st.drain_outbox(dom.ip());
                Ok(())
            });
        }
    }
}

/// Adds `len` bytes of `buf` from `from` to `sum`, read a chunk at a time.
fn sum_into(sum: &mut Sum, buf: &Buf<'_>, from: usize, len: usize) -> Result {
    let mut chunk = [0u8; SUM_CHUNK];
    let mut at = 0;
    while at < len {
        let n = (len - at).min(SUM_CHUNK);
        buf.read(from + at, &mut chunk[..n])?;
        sum.add(&chunk[..n]);
        at += n;
    }
    Ok(())
}

/// The 42-byte header of a datagram of `len` payload bytes, its UDP checksum field as
/// `checksum` says.
fn header(
    src_mac: crate::hal::MacAddr,
    dst_mac: crate::hal::MacAddr,
    src: SockAddrIn,
    dst: SockAddrIn,
    len: usize,
    checksum: UdpChecksum,
) -> Result<[u8; UDP_HEADER_LEN]> {
    let mut head = [0u8; UDP_HEADER_LEN];
    crate::ip::emit::UdpHeader {
        src_mac,
        dst_mac,
        src,
        dst,
    }
    .emit(&mut head, len, checksum)
    .map_err(|_| Error::MsgSize)?;
    Ok(head)
}
