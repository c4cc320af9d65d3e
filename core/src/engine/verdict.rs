//! What one driver completion becomes in the general lane, a [`Verdict`]: [`rx_outcome`] for a
//! receive (ringfab's header checked on an endpoint's path, truncation, `FI_SOURCE` and
//! `FI_SOURCE_ERR`), [`tx_outcome`] for a send; and the flags and lengths their entries carry.

use super::header::parse_header;
use super::ip::{ControlIn, IpCtx};
use super::multi::NO_GROUP;
use super::op::{Op, OpKind};
use super::sink::ErrRecord;
use super::state::Framing;
use crate::addr::{AvTables, EpAddr, RawAddr};
use crate::entry::{BufAddr, Completion};
use crate::flags::CompletionFlags;
use crate::hal::{RxChecksum, RxCompletion, RxError, TxCompletion, TxError};
use crate::ip::parse::Frame;
use crate::ip::{classify, SockAddrIn, Verify, ETH_LEN, MAX_CLASSIFIED, UDP_HEADER_LEN, UDP_LEN};
use crate::proto::{self, Header};
use crate::strerror::ProvError;
use crate::Error;

/// What one hardware completion becomes, before it is handed on.
pub(super) enum Verdict {
    /// A successful completion the application asked for.
    Done(Completion),
    /// An error completion, for the error queue.
    Failed(ErrRecord),
    /// A success nobody asked for: its credit goes back. The payload bytes a counter counts
    /// (a receive's; 0 for a send, whose caller knows its own).
    Silent(usize),
    /// Not a frame for this endpoint, or a continuation piece of a frame the driver split
    /// ([`RxError::Continuation`]): the buffer is posted again, nothing is reported. The path
    /// counts the first as a dropped frame, not the second (see [`is_drop`]).
    Repost,
    /// A frame for the domain's IPv4 host (ARP, an ICMP echo request), taken by it: the buffer
    /// is posted again, nothing is reported, nothing counts as dropped.
    Consumed,
}

/// Whether a receive that becomes [`Verdict::Repost`] is a dropped frame of its own (counted
/// in `Endpoint::dropped_frames`), rather than a later piece of a frame the driver split across
/// buffers, whose first buffer was already counted or reported.
#[inline]
pub(super) fn is_drop(c: &RxCompletion) -> bool {
    c.status != Err(RxError::Continuation)
}

/// The completion flags of a receive and of a send (`fi_cq(3)`, as libfabric's util CQ).
pub(super) const RECV_FLAGS: CompletionFlags = CompletionFlags::RECV.union(CompletionFlags::MSG);

pub(super) const SEND_FLAGS: CompletionFlags = CompletionFlags::SEND.union(CompletionFlags::MSG);

/// The flags of a canceled operation's entry.
pub(super) fn completion_flags(kind: OpKind, multi: bool) -> CompletionFlags {
    match (kind, multi) {
        (OpKind::Send, _) => SEND_FLAGS,
        (_, true) => RECV_FLAGS.union(CompletionFlags::MULTI_RECV),
        (_, false) => RECV_FLAGS,
    }
}

pub(super) fn canceled_recv(op: &Op) -> ErrRecord {
    ErrRecord {
        completion: Completion {
            context: op.context,
            flags: RECV_FLAGS,
            owned: op.owned(),
            ..Completion::default()
        },
        err: Error::Canceled,
        olen: 0,
        prov: Some(ProvError::RxFlushed),
    }
}

/// The payload bytes of a send (`FI_CNTR_EVENTS_BYTES` counts user bytes): the frame less
/// ringfab's header on an endpoint's path, the whole frame on a raw one.
pub(super) fn tx_payload(header: usize, frame_len: u32) -> usize {
    (frame_len as usize).saturating_sub(header)
}

/// Reads the ringfab header of a received frame out of its buffer and decides what the frame
/// is: `Ok((header, payload offset))`, or `Err(())` when it is not a well-formed frame for
/// `local`.
#[inline(always)]
fn parse_framed(f: &Framing, op: &Op, frame_len: u32) -> core::result::Result<Header, ()> {
    let local = f.local;
    let h = parse_header(f.encap, op, frame_len)?;
    let for_us = h.dst_ctx == local.ctx || h.dst_ctx == proto::ANY_CTX;
    if !for_us {
        return Err(());
    }
    Ok(h)
}

#[inline(always)]
pub(super) fn rx_outcome(
    framing: Option<&Framing>,
    op: &Op,
    c: &RxCompletion,
    avs: AvTables<'_>,
    ip: Option<IpCtx<'_>>,
) -> Verdict {
    let completion = |len: u32| Completion {
        context: op.context,
        flags: RECV_FLAGS,
        len: len as usize,
        buf: BufAddr::NULL,
        owned: op.owned(),
        ..Completion::default()
    };
    let failed = Verdict::Failed;
    // The frame's whole length, and the bytes of it the buffer holds: the same for a frame
    // that fit; for one the NIC split across buffers (or could not give whole), its header is
    // in the buffer and the rest of the payload is what did not fit.
    let (frame_len, fit) = match c.status {
        Ok(()) => (c.len, c.len),
        Err(RxError::Truncated { frame_len }) => (frame_len, c.len),
        Err(RxError::Continuation) => return Verdict::Repost,
        Err(e) => return rx_failed(op, c, e),
    };
    let (mut done, payload) = match framing {
        None => (completion(fit), frame_len),
        Some(f) if !f.encap.is_ringfab() => match plain_udp(f, op, c, frame_len, fit, avs, ip) {
            Ok((src, src_fi, payload, broadcast)) => {
                let mut done = completion(payload);
                if broadcast {
                    done.flags |= CompletionFlags::MULTICAST;
                }
                done.src_raw = Some(RawAddr::In(src));
                done.src = src_fi;
                (done, payload)
            }
            Err(NotDelivered::Dropped) => return Verdict::Repost,
            Err(NotDelivered::Consumed) => return Verdict::Consumed,
        },
        Some(f) => match parse_framed(f, op, frame_len) {
            Err(()) => return Verdict::Repost,
            Ok(h) => {
                let mut done = completion(u32::from(h.payload_len));
                if h.dst.is_multicast() {
                    // Sent to a group (broadcast included); every endpoint has
                    // FI_SOURCE, which fi_cq(3) requires for this flag on a receive.
                    done.flags |= CompletionFlags::MULTICAST;
                }
                if let Some(data) = h.data {
                    done.data = data;
                    done.flags |= CompletionFlags::REMOTE_CQ_DATA;
                }
                let src = EpAddr {
                    mac: h.src,
                    ctx: h.src_ctx,
                };
                done.src_raw = Some(RawAddr::Ep(src));
                done.src = f.av.and_then(|i| avs.get(i)).and_then(|av| av.reverse(src));
                (done, u32::from(h.payload_len))
            }
        },
    };
    // A frame longer than the application accepted, or than the buffer held: the bytes
    // accepted are its, the rest is reported as discarded (olen), as fi_cq(3) defines
    // truncation ("The olen specifies the amount of data that did not fit into the
    // available receive buffer and was discarded").
    let offset = framing.map_or(0, |f| f.encap.header_len() as u32);
    // (Plain UDP: a datagram that did not fit its buffer was not delivered, so `fit` holds
    // it whole and only the application's accepted length can truncate it.)
    let accepted = op.len.min(fit.saturating_sub(offset));
    if payload > accepted {
        done.len = accepted as usize;
        return failed(ErrRecord {
            completion: done,
            err: Error::Trunc,
            olen: (payload - accepted) as usize,
            prov: None,
        });
    }
    if framing.is_some_and(|f| f.source_err) && done.src.is_none() {
        // FI_SOURCE_ERR: an unknown sender turns the success into FI_EADDRNOTAVAIL
        // with the raw address as err_data (fi_cq(3)).
        return failed(ErrRecord {
            completion: done,
            err: Error::AddrNotAvail,
            olen: 0,
            prov: None,
        });
    }
    // A multi-receive slot's success is settled by the poll, which knows whether it releases
    // the buffer (`multi::settle_success`).
    if op.report || op.group != NO_GROUP {
        Verdict::Done(done)
    } else {
        Verdict::Silent(payload as usize)
    }
}

/// Classifies a frame received on a plain-UDP endpoint's path (`ip::classify`): a datagram to
/// the endpoint's port gives its sender, the sender's handle in the AV, the payload length and
/// whether it was broadcast; ARP and echo requests go to the domain's host (consumed);
/// everything else is counted by reason and dropped (posted again).
fn plain_udp(
    f: &Framing,
    op: &Op,
    c: &RxCompletion,
    frame_len: u32,
    fit: u32,
    avs: AvTables<'_>,
    ip: Option<IpCtx<'_>>,
) -> core::result::Result<(SockAddrIn, Option<crate::addr::FiAddr>, u32, bool), NotDelivered> {
    let d = classify_plain(op, c.checksum, frame_len, fit, ip)?;
    if d.dst_port != f.port {
        unbound_port(op, fit, ip);
        return Err(NotDelivered::Dropped);
    }
    if d.payload_at != UDP_HEADER_LEN as u32 && lower_payload(op, &d).is_err() {
        return Err(NotDelivered::Dropped);
    }
    let src_fi =
        f.av.and_then(|i| avs.get(i))
            .and_then(|av| av.reverse_raw(RawAddr::In(d.src)));
    Ok((d.src, src_fi, d.payload_len, d.broadcast))
}

/// A datagram [`classify_plain`] passed, in `op`'s buffer (`fit` bytes), to a port no endpoint
/// on its queue bound: counted (`IpDrops::port`) and, where the host may, answered with an ICMP
/// port unreachable (`IpHost::port_unreachable`: RFC 1122 §4.1.3.1 and the cases §3.2.2
/// excludes). Reads only the headers the answer quotes; out of line, as the drop is rare.
#[inline(never)]
pub(super) fn unbound_port(op: &Op, fit: u32, ip: Option<IpCtx<'_>>) {
    let Some(ip) = ip else {
        return;
    };
    ip.host.count_port();
    // Ethernet, the longest IPv4 header, the UDP header.
    let mut head = [0u8; ETH_LEN + 60 + UDP_LEN];
    let n = (fit as usize).min(head.len());
    if op.buf.span.read_bytes(0, &mut head[..n]).is_ok() {
        ip.host.port_unreachable(&head[..n], ip.now());
    }
}

/// Moves the payload of a datagram with IPv4 options (`d.payload_at` past 42) down to
/// [`UDP_HEADER_LEN`] in `op`'s buffer, where a completion promises it (`payload_offset()`):
/// RFC 1122 §3.2.1.8 has hosts accept options they ignore, and only this rare path pays for
/// them (the plain-UDP lane leaves such datagrams to the general lane). Done once, as the
/// datagram is delivered: the header behind it is not read again. The bytes move forward
/// (to a lower offset), a chunk at a time, so no chunk overwrites one not yet read.
#[inline(never)]
fn lower_payload(op: &Op, d: &PlainDatagram) -> Result<(), ()> {
    let mut chunk = [0u8; 256];
    let (from, len) = (d.payload_at as usize, d.payload_len as usize);
    let mut at = 0;
    while at < len {
        let n = (len - at).min(chunk.len());
        op.buf
            .span
            .read_bytes(from + at, &mut chunk[..n])
            .map_err(|_| ())?;
        op.buf
            .span
            .write_bytes(UDP_HEADER_LEN + at, &chunk[..n])
            .map_err(|_| ())?;
        at += n;
    }
    Ok(())
}

/// What the receive path keeps of a UDP datagram [`classify_plain`] passed.
#[derive(Clone, Copy, Debug)]
pub(super) struct PlainDatagram {
    pub(super) src: SockAddrIn,
    pub(super) dst_port: u16,
    pub(super) payload_len: u32,
    /// Where the payload starts in the frame: [`UDP_HEADER_LEN`], or more after IPv4 options.
    pub(super) payload_at: u32,
    pub(super) broadcast: bool,
}

/// Classifies the frame in `op`'s buffer for the domain's IPv4 host (`ip::classify`, every
/// check of docs/ip.md's receive path): a UDP datagram for the host, whatever its port; ARP
/// and echo requests taken by the host (`Consumed`); everything else counted by reason and
/// `Dropped`. The checksums the device verified (`checksum`, `RxCompletion::checksum`: checked
/// and found right) are not checked again; every other one is, in software. Out of line: the
/// copy of the frame it classifies is a stack array no other lane should carry.
#[inline(never)]
pub(super) fn classify_plain(
    op: &Op,
    checksum: RxChecksum,
    frame_len: u32,
    fit: u32,
    ip: Option<IpCtx<'_>>,
) -> core::result::Result<PlainDatagram, NotDelivered> {
    let Some(ip) = ip else {
        return Err(NotDelivered::Dropped);
    };
    let n = fit as usize;
    // A frame split across buffers, or longer than what is classified: its checksum cannot be
    // checked, so it is not delivered.
    if frame_len != fit || n > MAX_CLASSIFIED {
        ip.host.count_too_long();
        return Err(NotDelivered::Dropped);
    }
    let mut bytes = [0u8; MAX_CLASSIFIED];
    // The operation owns the buffer and the device has finished writing it (as
    // `parse_header`).
    if op.buf.span.read_bytes(0, &mut bytes[..n]).is_err() {
        return Err(NotDelivered::Dropped);
    }
    let Some(local) = ip.host.local() else {
        return Err(NotDelivered::Dropped);
    };
    let verify = Verify {
        ipv4: !checksum.ipv4_good(),
        l4: !checksum.l4_good(),
    };
    match classify(&bytes[..n], &local, verify) {
        Err(reason) => {
            ip.host.count(reason);
            Err(NotDelivered::Dropped)
        }
        Ok(Frame::Arp(a)) => {
            ip.host.take_control(ControlIn::Arp(a), ip.now());
            Err(NotDelivered::Consumed)
        }
        Ok(Frame::EchoRequest(e)) => {
            ip.host.take_control(ControlIn::Echo(e), ip.now());
            Err(NotDelivered::Consumed)
        }
        Ok(Frame::Udp(d)) => Ok(PlainDatagram {
            src: d.src,
            dst_port: d.dst.port,
            payload_len: d.payload.len() as u32,
            // `classify` checked the IPv4 header length (20 to 60) against the frame.
            payload_at: (ETH_LEN + usize::from(bytes[ETH_LEN] & 0x0f) * 4 + UDP_LEN) as u32,
            broadcast: d.broadcast,
        }),
    }
}

/// Why a plain-UDP frame is not delivered: [`Verdict::Repost`] or [`Verdict::Consumed`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum NotDelivered {
    Dropped,
    Consumed,
}

/// A receive the driver failed: `FI_ECANCELED` for a flushed buffer, `FI_EIO` for what the
/// device did wrong, with the driver's detail.
#[cold]
fn rx_failed(op: &Op, c: &RxCompletion, e: RxError) -> Verdict {
    Verdict::Failed(ErrRecord {
        // Only a frame error carries a (device-checked) length; the driver gives 0
        // otherwise. Never more than the application accepted.
        completion: Completion {
            context: op.context,
            flags: RECV_FLAGS,
            len: c.len.min(op.len) as usize,
            buf: BufAddr::NULL,
            owned: op.owned(),
            ..Completion::default()
        },
        err: match e {
            RxError::Flushed => Error::Canceled,
            _ => Error::Io,
        },
        olen: 0,
        prov: Some(ProvError::from_rx(e)),
    })
}

#[inline(always)]
pub(super) fn tx_outcome(op: &Op, c: &TxCompletion) -> Verdict {
    let completion = Completion {
        context: op.context,
        flags: SEND_FLAGS,
        owned: op.owned(),
        ..Completion::default()
    };
    match c.status {
        Ok(()) if op.report => Verdict::Done(completion),
        Ok(()) => Verdict::Silent(0),
        Err(e) => Verdict::Failed(ErrRecord {
            completion,
            err: match e {
                TxError::Flushed => Error::Canceled,
                _ => Error::Io,
            },
            olen: 0,
            prov: Some(ProvError::from_tx(e)),
        }),
    }
}
