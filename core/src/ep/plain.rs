//! Sends of a plain-UDP endpoint (`docs/ip.md`, "The send path"): the destination's
//! `sockaddr_in` from the AV, its next hop's MAC from the domain's ARP cache, the 42-byte
//! Ethernet/IPv4/UDP header (RFC 894, RFC 791, RFC 768) written in front of the payload with
//! the IPv4 checksum computed in software, and the UDP checksum inserted by the NIC where it
//! offers that (`Offloads::tx_l4_checksum`: the field gets the pseudo-header's sum and the
//! payload is not read) or computed in software from the payload. A send to a next hop being
//! resolved is held (its completion comes later: released by the progress of a CQ read, or
//! failed `FI_EHOSTUNREACH`); an inject to one is `Again`, its resolution started.

use crate::addr::FiAddr;
use crate::buf::Buf;
use crate::domain::Domain;
use crate::engine::{udp_offload_request, HeldSend};
use crate::entry::OpContext;
use crate::flags::OpFlags;
use crate::hal::Nic;
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
        if len > self.max_msg_size(dom) {
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
            let mut chunk = [0u8; SUM_CHUNK];
            let mut at = 0;
            while at < len {
                let n = (len - at).min(SUM_CHUNK);
                buf.read(UDP_HEADER_LEN + at, &mut chunk[..n])?;
                sum.add(&chunk[..n]);
                at += n;
            }
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
        // A plain-UDP endpoint is on no shared transmit context: the post has no poster.
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
