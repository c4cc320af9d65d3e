//! Sends: `fi_send`, `fi_senddata`, `fi_sendmsg`, gather sends (`fi_sendv`) and `fi_inject`,
//! with the checks and the header every one of them shares.

use crate::addr::FiAddr;
use crate::buf::{Buf, Iov, RawBuf};
use crate::cq::slot::CqRef;
use crate::domain::Domain;
use crate::engine::{Credits, Poster, NO_MR};
use crate::entry::OpContext;
use crate::flags::OpFlags;
use crate::hal::{DmaRegion, Nic, TxChecksum, TxSegment};
use crate::path::Path;
use crate::proto::{self, Header, MAX_HEADER_LEN};
use crate::{Error, Result};

use super::*;

impl Endpoint {
    /// Sends `len` payload bytes of `buf` (written at [`payload_offset`](Self::payload_offset))
    /// to `dest` (`fi_send`), with the endpoint's default transmit flags. The buffer comes back
    /// with the completion ([`CompletionQueue::read_owned`]), or with the error.
    ///
    /// # Errors
    /// See [`sendmsg`](Self::sendmsg).
    pub fn send<'d, 'n, N: Nic + 'n, const D: usize>(
        &self,
        dom: &'d Domain<'n, N, D>,
        buf: Buf<'d>,
        len: usize,
        dest: FiAddr,
        context: OpContext,
    ) -> core::result::Result<(), (Error, Buf<'d>)> {
        self.sendmsg(dom, buf, len, dest, None, context, self.attr.tx_op_flags)
    }

    /// [`send`](Self::send) with remote CQ data (`fi_senddata`): the receiver's completion
    /// carries `data` with `FI_REMOTE_CQ_DATA`.
    ///
    /// # Errors
    /// See [`sendmsg`](Self::sendmsg).
    pub fn senddata<'d, 'n, N: Nic + 'n, const D: usize>(
        &self,
        dom: &'d Domain<'n, N, D>,
        buf: Buf<'d>,
        len: usize,
        data: u64,
        dest: FiAddr,
        context: OpContext,
    ) -> core::result::Result<(), (Error, Buf<'d>)> {
        let flags = self.attr.tx_op_flags | OpFlags::REMOTE_CQ_DATA;
        self.sendmsg(dom, buf, len, dest, Some(data), context, flags)
    }

    /// Sends with explicit flags (`fi_sendmsg`). `FI_MORE` defers the doorbell to a later call
    /// without it — the way to send a batch with one doorbell; a call that fails rings it
    /// too, so deferred posts never wait for a call that may not come. `data` is sent with
    /// `FI_REMOTE_CQ_DATA` (which must then be in `flags`).
    ///
    /// # Errors
    /// The buffer comes back with the error, and nothing was posted:
    /// `OpBadState` before [`enable`](Self::enable); `BadFlags` for flags a DGRAM endpoint
    /// cannot honour (`FI_DELIVERY_COMPLETE`, `FI_MATCH_COMPLETE`, `FI_COMMIT_COMPLETE`,
    /// `FI_FENCE`, unknown bits) or `REMOTE_CQ_DATA` without data; `MsgSize` for a payload
    /// over [`max_msg_size`](Self::max_msg_size); `Inval` for a buffer too short for header
    /// and payload or a destination not in the AV; `Again` when the ring, the op table or the
    /// CQ's credits are full (retry after reading completions).
    #[allow(
        clippy::too_many_arguments,
        reason = "fi_sendmsg's message fields, its flags, and the domain the endpoint is in"
    )]
    pub fn sendmsg<'d, 'n, N: Nic + 'n, const D: usize>(
        &self,
        dom: &'d Domain<'n, N, D>,
        mut buf: Buf<'d>,
        len: usize,
        dest: FiAddr,
        data: Option<u64>,
        context: OpContext,
        flags: OpFlags,
    ) -> core::result::Result<(), (Error, Buf<'d>)> {
        if !self.attr.encap.is_ringfab() {
            return self
                .send_plain(dom, buf, len, dest, data, context, flags)
                .inspect_err(|_| self.ring_refused(dom));
        }
        // A refusal rings what earlier FI_MORE sends deferred: `framed` for its checks,
        // `post_tx` for a refused post.
        let segment = match self.framed(dom, &mut buf, len, dest, data, flags) {
            Ok(s) => s,
            Err(e) => return Err((e, buf)),
        };
        let r = self.post_tx(dom, &[segment], buf.raw(), context, flags, None);
        buf.posted(r)
    }

    /// Checks a send of `len` payload bytes of `buf` and writes ringfab's header in front of
    /// them: the segment to post. A refusal rings the doorbell (`refused`).
    #[inline(always)]
    fn framed<'d, 'n, N: Nic + 'n, const D: usize>(
        &self,
        dom: &'d Domain<'n, N, D>,
        buf: &mut Buf<'d>,
        len: usize,
        dest: FiAddr,
        data: Option<u64>,
        flags: OpFlags,
    ) -> Result<TxSegment> {
        let header = match self.check_send(dom, len, dest, data, flags) {
            Ok(h) => h,
            Err(e) => return Err(self.refused(dom, e)),
        };
        let Some(segment) = buf.tx_segment(self.payload_offset() + len) else {
            return Err(self.refused(dom, Error::Inval));
        };
        let mut bytes = [0u8; MAX_HEADER_LEN];
        buf.write(0, header.emit(self.attr.encap, &mut bytes))
            .map_err(|e| self.refused(dom, e))?;
        Ok(segment)
    }

    /// Sends each buffer of `bufs` as a message of `len` payload bytes to `dest`, in order —
    /// the send side of [`recv_batch`](Self::recv_batch): a program streaming to one peer
    /// hands back in the buffers [`read_owned`](crate::cq::CompletionQueue::read_owned)
    /// returned, their payloads written at [`payload_offset`](Self::payload_offset). Every
    /// send of the batch carries `len`, `dest`, `context` and `flags` (a program that needs
    /// them per message, or remote CQ data, sends with [`sendmsg`](Self::sendmsg)).
    ///
    /// What each buffer gets is exactly what `sendmsg(dom, buf, len, dest, None, context,
    /// flags)` on each in turn would give it — the same frame on the wire, the same errors,
    /// completions, lanes, credits and counters — except that the checks, the destination's
    /// lookup and the header are made once for the batch (ringfab's encapsulations: the header
    /// is the same for every message, and is copied in front of each payload), the path's lock
    /// is taken once, and the call rings the doorbell at most once: after the last buffer, or
    /// with `FI_MORE` in `flags` not at all (a later send rings for them). A batch that stops
    /// at a buffer it cannot send rings for those it sent, as a refused `sendmsg` does. On plain
    /// UDP each datagram is built by its own `sendmsg` (its checksum covers its payload, its next
    /// hop may need ARP), with `FI_MORE` on all but the call's own decision for the last: the
    /// doorbell is still rung once. Returns the number sent: every buffer of the slice, whose
    /// slots are all `None` now. A slice with no buffer is `Ok(0)`: nothing is checked, sent or
    /// rung, as no call would.
    ///
    /// # Errors
    /// `Err((error, sent))`: `sent` buffers were posted (their slots are now `None`); the
    /// buffer after them could not be, and it and every slot after it are untouched, still the
    /// caller's. `error` is the one `sendmsg` gives for that buffer: `OpBadState` before enable
    /// or after a critical fault; `BadFlags` for flags a DGRAM endpoint cannot honour or
    /// `REMOTE_CQ_DATA` (a batch carries no data); `MsgSize` over
    /// [`max_msg_size`](Self::max_msg_size); `Inval` for a destination not in the AV (these
    /// with `sent` = 0) or a buffer too short for the header and `len`; `Again` when the ring,
    /// the op table or the CQ's credits are full.
    #[allow(
        clippy::too_many_arguments,
        reason = "fi_sendmsg's message fields for every buffer, its flags, and the domain"
    )]
    pub fn send_batch<'d, 'n, N: Nic + 'n, const D: usize>(
        &self,
        dom: &'d Domain<'n, N, D>,
        bufs: &mut [Option<Buf<'d>>],
        len: usize,
        dest: FiAddr,
        context: OpContext,
        flags: OpFlags,
    ) -> core::result::Result<usize, (Error, usize)> {
        // No buffer, no call: nothing to check or ring.
        let Some(first) = bufs.iter().position(Option::is_some) else {
            return Ok(0);
        };
        let bufs = &mut bufs[first..];
        if !self.attr.encap.is_ringfab() {
            return self.send_batch_plain(dom, bufs, len, dest, context, flags);
        }
        // `sendmsg`'s checks, in its order, once.
        let header = match self.check_send(dom, len, dest, None, flags) {
            Ok(h) => h,
            Err(e) => return Err((self.refused(dom, e), 0)),
        };
        let mut bytes = [0u8; MAX_HEADER_LEN];
        let head = header.emit(self.attr.encap, &mut bytes);
        let tx = self.tx_path(dom).ok_or((Error::OpBadState, 0))?;
        let cq = self.cq_slot(dom, self.tx_cq).map_err(|e| (e, 0))?;
        let frame = self.payload_offset() + len;
        // The lock taken here rather than through `Path::with_state`, as `recv_batch` does.
        let mut guard = tx.slot().state.lock();
        let Some(st) = guard.as_mut() else {
            return Err((Error::OpBadState, 0));
        };
        let who = self.poster();
        let report = st.reports(flags, who);
        let (sent, r) = send_each(st, cq.credits, bufs, frame, head, context, report, who);
        if !flags.contains(OpFlags::MORE) || r.is_err() {
            // After a refusal too: earlier FI_MORE sends must not wait for a call that may
            // never come (`ring_deferred` rings only if posts wait).
            st.ring_deferred();
        }
        match r {
            Ok(()) => Ok(sent),
            Err(e) => Err((e, sent)),
        }
    }

    /// [`send_batch`](Self::send_batch) on plain UDP: `sendmsg` on each buffer, `FI_MORE` on
    /// each, then the doorbell as the call's flags decide (and on a refusal).
    fn send_batch_plain<'d, 'n, N: Nic + 'n, const D: usize>(
        &self,
        dom: &'d Domain<'n, N, D>,
        bufs: &mut [Option<Buf<'d>>],
        len: usize,
        dest: FiAddr,
        context: OpContext,
        flags: OpFlags,
    ) -> core::result::Result<usize, (Error, usize)> {
        let more = flags | OpFlags::MORE;
        let mut sent = 0;
        let mut r = Ok(());
        for slot in bufs.iter_mut() {
            let Some(buf) = slot.take() else {
                continue;
            };
            match self.send_plain(dom, buf, len, dest, None, context, more) {
                Ok(()) => sent += 1,
                Err((e, buf)) => {
                    *slot = Some(buf);
                    r = Err(e);
                    break;
                }
            }
        }
        if !flags.contains(OpFlags::MORE) || r.is_err() {
            self.ring_refused(dom);
        }
        r.map(|()| sent).map_err(|e| (e, sent))
    }

    /// Buffers a gather send may have (`fi_tx_attr::iov_limit`): [`EpAttr::tx_iov_limit`],
    /// checked against the NIC when the endpoint was made.
    pub fn iov_limit<'d, 'n, N: Nic + 'n, const D: usize>(
        &self,
        _dom: &'d Domain<'n, N, D>,
    ) -> usize {
        self.attr.tx_iov_limit
    }

    /// Sends the buffers of `iov` as one message, in order (`fi_sendv`), with the endpoint's
    /// default transmit flags. The first buffer is laid out as [`send`](Self::send)'s: its
    /// payload at [`payload_offset`](Self::payload_offset), ringfab's header (or, on plain
    /// UDP, the Ethernet/IPv4/UDP header, its checksum over every buffer) written in front of
    /// it; each further buffer contributes the bytes [`Iov::push`] said, from its start.
    /// Nothing is copied, and a list of `k` buffers takes `k` descriptors (so `sendv` of one
    /// buffer is `send`). At most [`iov_limit`](Self::iov_limit) buffers
    /// ([`EpAttr::tx_iov_limit`]). The buffers come back together with the completion
    /// ([`CompletionQueue::read_owned_iov`]), or with the error.
    ///
    /// # Errors
    /// See [`sendmsgv`](Self::sendmsgv).
    #[allow(
        clippy::result_large_err,
        reason = "decision 6: the buffers come back with the error; no allocator to box them"
    )]
    pub fn sendv<'d, 'n, N: Nic + 'n, const D: usize>(
        &self,
        dom: &'d Domain<'n, N, D>,
        iov: Iov<'d>,
        dest: FiAddr,
        context: OpContext,
    ) -> core::result::Result<(), (Error, Iov<'d>)> {
        self.sendmsgv(dom, iov, dest, None, context, self.attr.tx_op_flags)
    }

    /// [`sendv`](Self::sendv) with explicit flags and remote CQ data (`fi_sendmsg` with an
    /// iov).
    ///
    /// # Errors
    /// The buffers come back with the error and nothing was posted: `Inval` for an empty
    /// list, more buffers than [`iov_limit`](Self::iov_limit), an empty buffer after the
    /// first, or a first buffer too short for the header and its payload; `Again` when the
    /// path's gather records, the ring, the op table or the CQ's credits are full; otherwise
    /// as [`sendmsg`](Self::sendmsg).
    #[allow(
        clippy::result_large_err,
        reason = "decision 6: the buffers come back with the error; no allocator to box them"
    )]
    pub fn sendmsgv<'d, 'n, N: Nic + 'n, const D: usize>(
        &self,
        dom: &'d Domain<'n, N, D>,
        iov: Iov<'d>,
        dest: FiAddr,
        data: Option<u64>,
        context: OpContext,
        flags: OpFlags,
    ) -> core::result::Result<(), (Error, Iov<'d>)> {
        let r = self.sendmsgv_once(dom, iov, dest, data, context, flags);
        if r.is_err() {
            self.ring_refused(dom);
        }
        r
    }

    /// [`sendmsgv`](Self::sendmsgv) but for the doorbell of a refused call.
    #[allow(
        clippy::result_large_err,
        reason = "decision 6: the buffers come back with the error; no allocator to box them"
    )]
    fn sendmsgv_once<'d, 'n, N: Nic + 'n, const D: usize>(
        &self,
        dom: &'d Domain<'n, N, D>,
        mut iov: Iov<'d>,
        dest: FiAddr,
        data: Option<u64>,
        context: OpContext,
        flags: OpFlags,
    ) -> core::result::Result<(), (Error, Iov<'d>)> {
        let n = iov.len();
        if !self.attr.encap.is_ringfab() {
            return self.sendv_plain(dom, iov, dest, data, context, flags);
        }
        if n == 0 || n > self.iov_limit(dom) || (1..n).any(|i| iov.get(i).is_some_and(|b| b.1 == 0))
        {
            return Err((Error::Inval, iov));
        }
        let header = match self.check_send(dom, iov.total(), dest, data, flags) {
            Ok(h) => h,
            Err(e) => return Err((e, iov)),
        };
        let mut segs = [TxSegment {
            iova: crate::hal::Iova(0),
            len: 0,
        }; crate::buf::IOV_MAX];
        let mut raws = [None; crate::buf::IOV_MAX];
        for i in 0..n {
            let Some((b, len)) = iov.get(i) else {
                return Err((Error::Inval, iov));
            };
            let front = if i == 0 { self.payload_offset() } else { 0 };
            let Some(seg) = b.tx_segment(front + len) else {
                return Err((Error::Inval, iov));
            };
            segs[i] = seg;
            raws[i] = Some(b.raw());
        }
        let mut bytes = [0u8; MAX_HEADER_LEN];
        let bytes = header.emit(self.attr.encap, &mut bytes);
        if let Err(e) = iov
            .first_mut()
            .map_or(Err(Error::Inval), |b| b.write(0, bytes))
        {
            return Err((e, iov));
        }
        let Some(first) = raws[0] else {
            return Err((Error::Inval, iov));
        };
        if n == 1 {
            // A gather of one is a send: no gather record.
            let r = self.post_tx(dom, &segs[..1], first, context, flags, None);
            return iov.posted(r);
        }
        let Some(tx) = self.tx_path(dom) else {
            return Err((Error::OpBadState, iov));
        };
        let cq = match self.cq_slot(dom, self.tx_cq) {
            Ok(cq) => cq,
            Err(e) => return Err((e, iov)),
        };
        let mut extra = [None; crate::buf::IOV_MAX - 1];
        extra.copy_from_slice(&raws[1..]);
        let r = tx.with_state(|st| {
            let who = self.poster();
            let report = st.reports(flags, who);
            let r = st.post_send_iov(
                cq.credits,
                &segs[..n],
                first,
                extra,
                context,
                report,
                who,
                None,
            );
            if !flags.contains(OpFlags::MORE) || r.is_err() {
                st.doorbell();
            }
            r
        });
        iov.posted(r)
    }

    /// Sends `payload` without a buffer of the application's (`fi_inject`): it is copied into
    /// one of the endpoint's bounce buffers, so `payload` may be reused at once, and no
    /// completion is generated for success (an error still reaches the CQ, with a NULL
    /// context).
    ///
    /// # Errors
    /// `MsgSize` over [`inject_size`](Self::inject_size); otherwise as
    /// [`sendmsg`](Self::sendmsg).
    pub fn inject<'d, 'n, N: Nic + 'n, const D: usize>(
        &self,
        dom: &'d Domain<'n, N, D>,
        payload: &[u8],
        dest: FiAddr,
    ) -> Result {
        self.inject_inner(dom, payload, None, dest)
    }

    /// [`inject`](Self::inject) with remote CQ data (`fi_injectdata`).
    ///
    /// # Errors
    /// As [`inject`](Self::inject).
    pub fn injectdata<'d, 'n, N: Nic + 'n, const D: usize>(
        &self,
        dom: &'d Domain<'n, N, D>,
        payload: &[u8],
        data: u64,
        dest: FiAddr,
    ) -> Result {
        self.inject_inner(dom, payload, Some(data), dest)
    }

    /// Sends `payload` as `fi_sendmsg` with `FI_INJECT` does (fi_endpoint(3): "FI_INJECT:
    /// Indicates that all outbound data buffers should be returned to the user's control
    /// immediately after a data transfer call returns"): the bytes — the application's own,
    /// registered or not — are copied into one of the endpoint's bounce buffers before the call
    /// returns. Unlike [`inject`](Self::inject) the operation is an ordinary send otherwise: it
    /// completes as `flags` and the binding say (`FI_COMPLETION` under
    /// `FI_SELECTIVE_COMPLETION`, the completion levels, `FI_MORE`), with `context`, and
    /// carries `data` as remote CQ data with `FI_REMOTE_CQ_DATA`. `FI_INJECT` in `flags` is
    /// what the call does anyway, so it may be given or not.
    ///
    /// [`sendmsg`](Self::sendmsg) takes an owned [`Buf`] and keeps it until the send
    /// completes, so it cannot hand it back at once: it refuses `FI_INJECT` (`BadFlags`).
    ///
    /// # Errors
    /// `MsgSize` over [`inject_size`](Self::inject_size); otherwise as
    /// [`sendmsg`](Self::sendmsg).
    #[allow(
        clippy::too_many_arguments,
        reason = "fi_sendmsg's message fields, its flags, and the domain the endpoint is in"
    )]
    pub fn injectmsg<'d, 'n, N: Nic + 'n, const D: usize>(
        &self,
        dom: &'d Domain<'n, N, D>,
        payload: &[u8],
        dest: FiAddr,
        data: Option<u64>,
        context: OpContext,
        flags: OpFlags,
    ) -> Result {
        let flags = flags.difference(OpFlags::INJECT);
        self.send_copy(dom, payload, data, dest, context, Some(flags))
    }

    pub(super) fn inject_inner<'d, 'n, N: Nic + 'n, const D: usize>(
        &self,
        dom: &'d Domain<'n, N, D>,
        payload: &[u8],
        data: Option<u64>,
        dest: FiAddr,
    ) -> Result {
        // No operation context of the application's: an error reports the endpoint's; no
        // completion for success.
        self.send_copy(dom, payload, data, dest, self.attr.context, None)
    }

    /// A send out of one of the endpoint's bounce buffers: `flags` for an operation that
    /// completes as its flags say, `None` for `fi_inject`'s (no success reported).
    fn send_copy<'d, 'n, N: Nic + 'n, const D: usize>(
        &self,
        dom: &'d Domain<'n, N, D>,
        payload: &[u8],
        data: Option<u64>,
        dest: FiAddr,
        context: OpContext,
        flags: Option<OpFlags>,
    ) -> Result {
        let r = self.send_copy_once(dom, payload, data, dest, context, flags);
        if r.is_err() {
            self.ring_refused(dom);
        }
        r
    }

    /// [`send_copy`](Self::send_copy) but for the doorbell of a refused call.
    fn send_copy_once<'d, 'n, N: Nic + 'n, const D: usize>(
        &self,
        dom: &'d Domain<'n, N, D>,
        payload: &[u8],
        data: Option<u64>,
        dest: FiAddr,
        context: OpContext,
        flags: Option<OpFlags>,
    ) -> Result {
        let check = flags.unwrap_or(if data.is_some() {
            OpFlags::REMOTE_CQ_DATA
        } else {
            OpFlags::empty()
        });
        if payload.len() > INJECT_SIZE {
            return Err(Error::MsgSize);
        }
        if !self.attr.encap.is_ringfab() {
            return self.inject_plain(dom, payload, data, dest, context, flags);
        }
        let header = self.check_send(dom, payload.len(), dest, data, check)?;
        let tx = self.tx_path(dom).ok_or(Error::OpBadState)?;
        let mut bytes = [0u8; MAX_HEADER_LEN];
        let bytes = header.emit(self.attr.encap, &mut bytes);
        let cq = self.cq_slot(dom, self.tx_cq)?;
        self.post_copied(&tx, cq.credits, bytes, payload, context, flags, None)
    }

    /// Posts `head` then `payload`, copied into the bounce slot of the op-table slot the post
    /// takes (free exactly as long as that slot is), as one segment: `flags` for an operation
    /// that completes as its flags say, `None` for `fi_inject`'s (no success reported). Rings
    /// the doorbell unless `FI_MORE`, and on a refused post too. `checksum`: the NIC inserts
    /// it (a plain-UDP datagram on a NIC with the offload).
    #[allow(
        clippy::too_many_arguments,
        reason = "the path, its credits, the two pieces copied, the operation's context and \
                  flags, and the checksum request"
    )]
    pub(super) fn post_copied<'d, 'n, N: Nic + 'n, const D: usize>(
        &self,
        tx: &Path<'d, 'n, N, D>,
        credits: &Credits,
        head: &[u8],
        payload: &[u8],
        context: OpContext,
        flags: Option<OpFlags>,
        checksum: Option<TxChecksum>,
    ) -> Result {
        tx.with_state(|st| {
            let slot = st.next_slot().ok_or(Error::Again)?;
            let offset = slot * INJECT_SLOT;
            let bounce = st.bounce.as_ref().ok_or(Error::OpBadState)?;
            bounce.write_bytes(offset, head);
            bounce.write_bytes(offset + head.len(), payload);
            let len = head.len() + payload.len();
            let segment = TxSegment {
                iova: crate::hal::Iova(bounce.iova().0 + offset as u64),
                len: len as u16,
            };
            let raw = RawBuf {
                span: crate::hal::DmaSpan::EMPTY,
                iova: segment.iova,
                len: len as u32,
                mr: NO_MR,
            };
            let who = self.poster();
            let report = flags.is_some_and(|f| st.reports(f, who));
            let r =
                st.post_send_checksummed(credits, &[segment], raw, context, report, who, checksum);
            // A refused post rings too: earlier FI_MORE posts must not wait for a call that
            // may never come.
            if !flags.is_some_and(|f| f.contains(OpFlags::MORE)) || r.is_err() {
                st.doorbell();
            }
            r
        })
    }

    /// The doorbell of a send call that failed, whatever refused it (its checks, the buffer,
    /// the ring, a held send's route): earlier `FI_MORE` sends must not wait for a call that
    /// may never come (fi_msg(3): `FI_MORE` "Indicates that the user has additional requests
    /// that will immediately be posted after the current call returns"). Rings only if posts
    /// wait for it. Cold: the refused call pays for it, a send that goes never does.
    #[cold]
    #[inline(never)]
    pub(super) fn ring_refused<'d, 'n, N: Nic + 'n, const D: usize>(
        &self,
        dom: &'d Domain<'n, N, D>,
    ) {
        if let Some(tx) = self.tx_path(dom) {
            // A path already closed has nothing to ring.
            let _ = tx.with_state(|st| {
                st.ring_deferred();
                Ok(())
            });
        }
    }

    /// [`ring_refused`](Self::ring_refused), then `e`.
    #[cold]
    #[inline(never)]
    fn refused<'d, 'n, N: Nic + 'n, const D: usize>(
        &self,
        dom: &'d Domain<'n, N, D>,
        e: Error,
    ) -> Error {
        self.ring_refused(dom);
        e
    }

    /// Checks a send and builds its header. Always inlined: out of line (as LLVM left it once
    /// `send_batch` became its second caller in a program) `sendmsg` took 45 instructions more
    /// a message (igb, batch 64: 570.0 against 525.0).
    #[inline(always)]
    pub(super) fn check_send<'d, 'n, N: Nic + 'n, const D: usize>(
        &self,
        dom: &'d Domain<'n, N, D>,
        len: usize,
        dest: FiAddr,
        data: Option<u64>,
        flags: OpFlags,
    ) -> Result<Header> {
        self.usable(dom)?;
        if !TX_FLAGS_OK.contains(flags) || flags.contains(OpFlags::REMOTE_CQ_DATA) != data.is_some()
        {
            return Err(Error::BadFlags);
        }
        // `usable` found the endpoint enabled: `max_send` is its `max_msg_size`.
        if len > self.max_send {
            return Err(Error::MsgSize);
        }
        let av = self.av.and_then(|i| dom.avs().get(i)).ok_or(Error::NoAv)?;
        let (peer, rx) = av.lookup(dest).ok_or(Error::Inval)?;
        let (dst, dst_ctx) = if peer.mac.is_multicast() {
            (peer.mac, proto::ANY_CTX)
        } else if rx > 0 {
            // A named receive context of a scalable endpoint (`fi_rx_addr`).
            (proto::context_mac(peer.mac, rx), rx)
        } else {
            (peer.mac, peer.ctx)
        };
        Ok(Header {
            dst,
            src: self.source.mac,
            dst_ctx,
            src_ctx: self.source.ctx,
            payload_len: len as u16,
            data,
            flow: proto::flow(self.attr.tx_queue, self.source.ctx),
        })
    }

    /// Who posts, on a shared transmit path: `None` on the endpoint's own queue.
    pub(super) fn poster(&self) -> Option<Poster> {
        self.stx?;
        let b = self.tx_cq?;
        Some(Poster {
            cq: b.cq,
            bind: b.flags,
            owner: self.owner,
            cntr: self.tx_cntr,
        })
    }

    /// What polling one of the endpoint's paths on behalf of `binding`'s CQ needs (the CQ
    /// exists: `cq_slot` was asked first).
    pub(super) fn poll_ctx<'d, 'n, N: Nic + 'n, const D: usize>(
        &self,
        dom: &'d Domain<'n, N, D>,
        binding: Option<CqBinding>,
    ) -> crate::engine::PollCtx<'d> {
        let mut ctx = dom.poll_ctx(binding.map_or(0, |b| b.cq));
        ctx.owner = self.owner;
        ctx
    }

    pub(super) fn cq_slot<'d, 'n, N: Nic + 'n, const D: usize>(
        &self,
        dom: &'d Domain<'n, N, D>,
        binding: Option<CqBinding>,
    ) -> Result<CqRef<'d>> {
        let b = binding.ok_or(Error::NoCq)?;
        dom.cq(b.cq).ok_or(Error::NoCq)
    }

    pub(super) fn post_tx<'d, 'n, N: Nic + 'n, const D: usize>(
        &self,
        dom: &'d Domain<'n, N, D>,
        segments: &[TxSegment],
        raw: RawBuf,
        context: OpContext,
        flags: OpFlags,
        checksum: Option<TxChecksum>,
    ) -> Result {
        let tx = self.tx_path(dom).ok_or(Error::OpBadState)?;
        let cq = self.cq_slot(dom, self.tx_cq)?;
        tx.with_state(|st| {
            let who = self.poster();
            let report = st.reports(flags, who);
            let r = st.post_send_inline(cq.credits, segments, raw, context, report, who, checksum);
            // A refused post rings too: earlier FI_MORE posts must not wait for a call that
            // may never come.
            if !flags.contains(OpFlags::MORE) || r.is_err() {
                st.doorbell();
            }
            r
        })
    }
}

/// [`Endpoint::send_batch`]'s loop: sends the buffers of `bufs` in order as `sendmsg` would,
/// each a frame of `frame` bytes with `head` written at its start, taking each out of its slot,
/// until one is refused; how many were sent and the refusal. No doorbell. Out of line, as
/// `recv_batch`'s loop (`post_each` in `recv.rs`).
#[allow(
    clippy::too_many_arguments,
    reason = "the path, its credits, the buffers, and what each send of the batch shares"
)]
#[inline(never)]
fn send_each<'d, N: Nic, const D: usize>(
    st: &mut crate::engine::PathState<'_, N, D>,
    cq: &Credits,
    bufs: &mut [Option<Buf<'d>>],
    frame: usize,
    head: &[u8],
    context: OpContext,
    report: bool,
    who: Option<Poster>,
) -> (usize, Result) {
    let mut sent = 0;
    for slot in bufs.iter_mut() {
        let Some(buf) = slot.as_mut() else {
            continue;
        };
        let Some(segment) = buf.tx_segment(frame) else {
            return (sent, Err(Error::Inval));
        };
        if let Err(e) = buf.write(0, head) {
            return (sent, Err(e));
        }
        // The post `sendmsg` makes (`post_tx`), inlined into the loop.
        if let Err(e) = st.post_send_inline(cq, &[segment], buf.raw(), context, report, who, None) {
            return (sent, Err(e));
        }
        if let Some(buf) = slot.take() {
            // Posted: its count stays with its region until it comes back.
            let _ = buf.into_raw();
        }
        sent += 1;
    }
    (sent, Ok(()))
}
