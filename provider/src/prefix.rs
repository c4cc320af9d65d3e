//! Prefix mode (`FI_MSG_PREFIX`, fi_getinfo(3)): "an application will provide buffer space in
//! front of all message send and receive buffers for use by the provider". ringfab's frame
//! header is what goes there, so the application's own registered buffer can be handed to
//! the NIC: a send lends core the application's bytes (header room and payload) and posts
//! them without a copy, core writing the header into the prefix; a receive long enough for
//! the receive queue's buffers is lent too, and the NIC writes the frame — header in the
//! prefix, payload behind it — straight into the application's memory (docs/libfabric.md,
//! "Buffers").
//!
//! fi_getinfo(3): "Providers are required to define a msg_prefix_size that is a multiple of 8
//! bytes." ringfab's Ethernet header is 30 bytes, so the prefix is 32 and the header sits in
//! its last 30 bytes, right in front of the payload ([`Geometry`]); the first 2 are unused.
//! On plain UDP (`FI_SOCKADDR_IN`) the header is Ethernet, IPv4 and UDP's 42 bytes: the prefix
//! is 48, the first 6 unused.

use ringfab::ep::Endpoint;
use ringfab::mr::Buf;

use crate::domain::DomainObj;
use crate::ep::Shared;
use crate::ffi::Ret;
use crate::msg::AppBuf;
use crate::ops::PrefixOp;
use crate::sys;

/// `ep_attr->msg_prefix_size` of an endpoint whose header is `header` bytes long: the header,
/// rounded up to a multiple of 8 (fi_endpoint(3): "If msg_prefix_size is > 0 the specified
/// value will be a multiple of 8-bytes").
pub(crate) const fn prefix_size(header: usize) -> usize {
    header.next_multiple_of(8)
}

/// Where the header and the payload lie in an application's buffer in prefix mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Geometry {
    /// `msg_prefix_size`: the payload starts this many bytes into the buffer.
    pub(crate) size: usize,
    /// The endpoint's header length: the header takes the prefix's last bytes.
    header: usize,
}

impl Geometry {
    /// The geometry of endpoint `ep`'s buffers.
    pub(crate) fn of(ep: &Endpoint) -> Geometry {
        let header = ep.payload_offset();
        Geometry {
            size: prefix_size(header),
            header,
        }
    }

    /// Bytes at the start of the prefix that the header does not use: the buffer core is lent
    /// starts behind them, so that its header ends where the payload starts.
    pub(crate) fn pad(self) -> usize {
        self.size - self.header
    }

    /// The payload of a message the application gave as `bufs`: the first buffer without its
    /// prefix, then the others. fi_msg(3): "The prefix buffer must occur at the start of the
    /// data referenced by the buf parameter, or be referenced by the first IO vector. Message
    /// prefix space cannot be split between multiple IO vectors."
    ///
    /// # Errors
    /// `-FI_EINVAL` if there is no first buffer or it is shorter than the prefix.
    pub(crate) fn payload(self, bufs: &[AppBuf]) -> Result<Vec<AppBuf>, isize> {
        let Some((first, rest)) = bufs.split_first() else {
            return Err(isize::neg(sys::FI_EINVAL));
        };
        let mut out = Vec::with_capacity(bufs.len());
        out.push(self.strip(first)?);
        out.extend_from_slice(rest);
        Ok(out)
    }

    /// The payload's part of the application's buffer `whole`: what follows the prefix.
    /// fi_getinfo(3): "Prefix buffer space must be provided with all sends and receives,
    /// regardless of the size of the transfer".
    ///
    /// # Errors
    /// `-FI_EINVAL` if `whole` is shorter than the prefix.
    pub(crate) fn strip(self, whole: &AppBuf) -> Result<AppBuf, isize> {
        if whole.len < self.size {
            return Err(isize::neg(sys::FI_EINVAL));
        }
        Ok(whole.tail(self.size))
    }
}

/// Which directions of an endpoint work in prefix mode.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Modes {
    pub(crate) tx: bool,
    pub(crate) rx: bool,
}

impl Modes {
    /// Whether either does.
    pub(crate) fn any(self) -> bool {
        self.tx || self.rx
    }
}

/// The directions in prefix mode for an endpoint made from `info`: each by its own
/// attributes' `mode`, or the info's where that is 0 — fi_endpoint(3), of `tx_attr->mode`:
/// "A mode value of 0 will be ignored on input to fi_getinfo(3), with the mode value of the
/// fi_info structure used instead. On return from fi_getinfo(3), the mode will be set only to
/// those constraints specific to transmit operations." (`ofi_rxd` reads the prefix of each
/// direction from these.)
///
/// # Safety
/// `info` is a valid `fi_info` (null attribute pointers allowed).
pub(crate) unsafe fn modes(info: &sys::fi_info) -> Modes {
    // SAFETY: null or valid attribute structures of the caller's fi_info.
    let (tx, rx) = unsafe { (info.tx_attr.as_ref(), info.rx_attr.as_ref()) };
    let of = |m: Option<u64>| match m {
        Some(m) if m != 0 => m & sys::FI_MSG_PREFIX != 0,
        _ => info.mode & sys::FI_MSG_PREFIX != 0,
    };
    Modes {
        tx: of(tx.map(|t| t.mode)),
        rx: of(rx.map(|r| r.mode)),
    }
}

/// Whether an endpoint made from `info` can work in prefix mode: not with multi-receive
/// buffers or a shared receive context, whose receives are posted into the endpoint's own
/// buffers and placed elsewhere ([`crate::multi`], [`crate::srx`]). `fi_getinfo` offers the
/// mode only where this holds.
///
/// # Safety
/// `info` is a valid `fi_info` (null attribute pointers allowed).
pub(crate) unsafe fn allowed(info: &sys::fi_info) -> bool {
    // SAFETY: null or valid attribute structures of the caller's fi_info.
    let (ep, rx) = unsafe { (info.ep_attr.as_ref(), info.rx_attr.as_ref()) };
    let caps = info.caps | rx.map_or(0, |r| r.caps);
    let shared_rx = ep.is_some_and(|e| e.rx_ctx_cnt == sys::FI_SHARED_CONTEXT as usize);
    caps & sys::FI_MULTI_RECV == 0 && !shared_rx
}

/// The buffer a send of the application's one buffer `whole` (prefix and payload) is posted
/// in: the application's own bytes from the header's start to the payload's end, lent from
/// the registration its descriptor names, with the record's part. `Ok(None)` if they overlap
/// a lent operation in flight ([`crate::mr::lend`]): the caller copies.
///
/// # Errors
/// As [`crate::mr::lend`].
///
/// # Safety
/// `whole` was checked against its descriptor ([`crate::msg::check`]) and is at least
/// `g.size` long.
pub(crate) unsafe fn lend_send(
    domain: &'static DomainObj,
    g: Geometry,
    whole: &AppBuf,
) -> Result<Option<(Buf<'static>, PrefixOp)>, isize> {
    let lent = (whole.addr + g.pad(), whole.len - g.pad());
    // SAFETY: the caller's promise; `lent` lies inside the buffer.
    let r = unsafe { crate::mr::lend(whole.desc(), domain, (whole.addr, whole.len), lent) };
    Ok(r.map_err(|e| e as isize)?
        .map(|(buf, lease)| (buf, in_place(g, lease))))
}

/// The record's part of a lent operation.
fn in_place(g: Geometry, lease: crate::mr::Lease) -> PrefixOp {
    PrefixOp {
        size: g.size,
        in_place: true,
        lease: Some(lease),
    }
}

/// The buffer a receive into the application's one buffer `whole` is posted in, the payload
/// part of `whole` (what the completion reports against) and the record's part. A buffer
/// with room for the whole receive buffer the NIC may fill (`rx_buf_len` bytes behind the
/// pad: core's receive queue takes buffers of one size) is lent in place, unless it overlaps
/// a lent operation in flight; otherwise it gets one of the endpoint's buffers, its payload
/// copied into `whole` behind the prefix when the completion is read.
///
/// # Errors
/// `-FI_EINVAL` for a buffer shorter than the prefix; `-FI_EAGAIN` when one that is not lent
/// finds none of the endpoint's free; as [`crate::mr::lend`].
///
/// # Safety
/// As [`lend_send`], but `whole` may be shorter.
pub(crate) unsafe fn recv_buf(
    domain: &'static DomainObj,
    g: Geometry,
    whole: &AppBuf,
    rx_buf_len: usize,
    shared: &Shared,
) -> Result<(Buf<'static>, AppBuf, PrefixOp), isize> {
    let payload = g.strip(whole)?;
    if whole.len - g.pad() >= rx_buf_len {
        let lent = (whole.addr + g.pad(), rx_buf_len);
        // SAFETY: the caller's promise; `lent` lies inside the buffer.
        let r = unsafe { crate::mr::lend(whole.desc(), domain, (whole.addr, whole.len), lent) };
        if let Some((buf, lease)) = r.map_err(|e| e as isize)? {
            return Ok((buf, payload, in_place(g, lease)));
        }
    }
    let Some(buf) = crate::ep::EpObj::take_buf(shared, true) else {
        return Err(isize::neg(sys::FI_EAGAIN));
    };
    let op = PrefixOp {
        size: g.size,
        in_place: false,
        lease: None,
    };
    Ok((buf, payload, op))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prefix_is_the_header_rounded_up_to_a_multiple_of_eight() {
        assert_eq!(ringfab::proto::HEADER_LEN, 30);
        assert_eq!(prefix_size(ringfab::proto::HEADER_LEN), 32);
        // Plain UDP: Ethernet, IPv4 and UDP headers (docs/ip.md).
        assert_eq!(prefix_size(42), 48);
        assert_eq!(prefix_size(32), 32);
        let g = Geometry {
            size: 32,
            header: 30,
        };
        assert_eq!(g.pad(), 2);
    }

    #[test]
    fn the_payload_is_the_first_buffer_behind_its_prefix_then_the_others() {
        let g = Geometry {
            size: 32,
            header: 30,
        };
        let null = core::ptr::null_mut();
        let bufs = [AppBuf::new(0x1000, 40, null), AppBuf::new(0x2000, 5, null)];
        let p = g.payload(&bufs).unwrap();
        assert_eq!(
            p.iter().map(|b| (b.addr, b.len)).collect::<Vec<_>>(),
            [(0x1020, 8), (0x2000, 5)]
        );
        let short = [AppBuf::new(0x1000, 31, null)];
        assert_eq!(g.payload(&short).err(), Some(isize::neg(sys::FI_EINVAL)));
        assert_eq!(g.payload(&[]).err(), Some(isize::neg(sys::FI_EINVAL)));
    }
}
