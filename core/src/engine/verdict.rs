//! What one driver completion becomes in the general lane, a [`Verdict`]: [`rx_outcome`] for a
//! receive (ringfab's header checked on an endpoint's path, truncation, `FI_SOURCE` and
//! `FI_SOURCE_ERR`), [`tx_outcome`] for a send; and the flags and lengths their entries carry.

use super::header::parse_header;
use super::multi::NO_GROUP;
use super::op::{Op, OpKind};
use super::sink::ErrRecord;
use super::state::Framing;
use crate::addr::{AvTables, EpAddr};
use crate::entry::{BufAddr, Completion};
use crate::flags::CompletionFlags;
use crate::hal::{RxCompletion, RxError, TxCompletion, TxError};
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
                done.src_raw = Some(src);
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
