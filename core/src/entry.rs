//! Completion entries, laid out exactly as libfabric's on x86_64 so that a C caller's buffer can
//! be written directly, and the [`Format`] types that choose one of them.
//!
//! | type | libfabric struct | size |
//! |---|---|---|
//! | [`ContextEntry`] | `struct fi_cq_entry` | 8 |
//! | [`MsgEntry`] | `struct fi_cq_msg_entry` | 24 |
//! | [`DataEntry`] | `struct fi_cq_data_entry` | 40 |
//! | [`TaggedEntry`] | `struct fi_cq_tagged_entry` | 48 |
//! | [`ErrEntry`] | `struct fi_cq_err_entry` (API ≥ 1.20; see [`ErrEntryAbi`]) | 88 |
//!
//! Pointer-typed C fields are `usize` newtypes ([`OpContext`], [`BufAddr`]): the same size,
//! alignment and call ABI as `void *`, while the entries stay plain data that is `Send`, `Sync`,
//! `Copy` and comparable. ringfab never dereferences an [`OpContext`]; it only hands back the
//! value the application gave.
//!
//! The sizes and every offset are checked at compile time against the values libfabric's own
//! headers give (`offsetof` on x86_64 gcc, libfabric 2.x HEAD); the unit tests repeat them.

use core::mem::{offset_of, size_of};

use crate::flags::CompletionFlags;
use crate::{Error, Result};

/// The application's context for an operation (C `void *op_context`), returned unchanged in its
/// completion. Zero is C's `NULL`: completions not tied to a posted operation carry it.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
#[repr(transparent)]
pub struct OpContext(pub usize);

impl OpContext {
    /// `NULL`: no context.
    pub const NULL: OpContext = OpContext(0);

    /// True for `NULL`.
    pub const fn is_null(self) -> bool {
        self.0 == 0
    }
}

/// An address in the application's address space (C `void *`), as a number: the `buf` of a
/// receive completion, or the `err_data` of an error entry. Zero is `NULL`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
#[repr(transparent)]
pub struct BufAddr(pub usize);

impl BufAddr {
    /// `NULL`.
    pub const NULL: BufAddr = BufAddr(0);

    /// True for `NULL`.
    pub const fn is_null(self) -> bool {
        self.0 == 0
    }
}

/// `FI_ADDR_NOTAVAIL` (`(fi_addr_t)-1`): no source address is known.
pub const ADDR_NOTAVAIL: u64 = u64::MAX;

/// `struct fi_cq_entry` ([`CqFormat::Context`]): only the operation's context.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
#[repr(C)]
pub struct ContextEntry {
    /// The operation's context.
    pub op_context: OpContext,
}

/// `struct fi_cq_msg_entry` ([`CqFormat::Msg`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
#[repr(C)]
pub struct MsgEntry {
    /// The operation's context.
    pub op_context: OpContext,
    /// What completed.
    pub flags: CompletionFlags,
    /// Bytes received (receive completions only).
    pub len: usize,
}

/// `struct fi_cq_data_entry` ([`CqFormat::Data`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
#[repr(C)]
pub struct DataEntry {
    /// The operation's context.
    pub op_context: OpContext,
    /// What completed.
    pub flags: CompletionFlags,
    /// Bytes received (receive completions only).
    pub len: usize,
    /// Where the data was placed (multi-receive buffers only).
    pub buf: BufAddr,
    /// Remote CQ data, host byte order (valid with [`CompletionFlags::REMOTE_CQ_DATA`]).
    pub data: u64,
}

/// `struct fi_cq_tagged_entry` ([`CqFormat::Tagged`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
#[repr(C)]
pub struct TaggedEntry {
    /// The operation's context.
    pub op_context: OpContext,
    /// What completed.
    pub flags: CompletionFlags,
    /// Bytes received (receive completions only).
    pub len: usize,
    /// Where the data was placed (multi-receive buffers only).
    pub buf: BufAddr,
    /// Remote CQ data, host byte order (valid with [`CompletionFlags::REMOTE_CQ_DATA`]).
    pub data: u64,
    /// The received tag, host byte order (tagged receives only).
    pub tag: u64,
}

/// `struct fi_cq_err_entry`: an operation that completed in error, as `fi_cq_readerr` returns it.
///
/// # Size depends on the application's API version
///
/// This type is the newest layout, 88 bytes with `src_addr` at offset 80 (libfabric ≥ 1.20).
/// An application built against older headers passes a shorter buffer: 80 bytes for API
/// 1.5 – 1.19 (no `src_addr`), 72 bytes before 1.5 (no `err_data_size` either). Whoever writes
/// into a C caller's buffer must write only [`ErrEntryAbi::size`] bytes for the caller's version —
/// see [`write_err_entry_raw`](crate::cq::write_err_entry_raw).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(C)]
pub struct ErrEntry {
    /// The operation's context, or `NULL` when the operation gave none (for instance a
    /// selective-completion operation that did not ask for a completion).
    pub op_context: OpContext,
    /// What completed.
    pub flags: CompletionFlags,
    /// Bytes received.
    pub len: usize,
    /// Receive data buffer.
    pub buf: BufAddr,
    /// Completion data.
    pub data: u64,
    /// Message tag.
    pub tag: u64,
    /// Bytes of a received message that did not fit the buffer and were discarded.
    pub olen: usize,
    /// The error, as a **positive** libfabric errno (`FI_ETRUNC` = 265, …).
    pub err: i32,
    /// The provider's own error code (see [`strerror`](super::strerror) for ringfab's
    /// encoding).
    pub prov_errno: i32,
    /// On input, the caller's buffer for error data; on output, where the error data is.
    pub err_data: BufAddr,
    /// On input, the size of `err_data`; on output, the bytes of error data (API ≥ 1.5).
    pub err_data_size: usize,
    /// The source address, or [`ADDR_NOTAVAIL`] (API ≥ 1.20).
    pub src_addr: u64,
}

impl Default for ErrEntry {
    fn default() -> Self {
        ErrEntry {
            op_context: OpContext::NULL,
            flags: CompletionFlags::empty(),
            len: 0,
            buf: BufAddr::NULL,
            data: 0,
            tag: 0,
            olen: 0,
            err: 0,
            prov_errno: 0,
            err_data: BufAddr::NULL,
            err_data_size: 0,
            src_addr: ADDR_NOTAVAIL,
        }
    }
}

impl ErrEntry {
    /// The error entry for completion `c` that failed with `err`. `olen`, `err_data`,
    /// `err_data_size` are zero and `src_addr` is [`ADDR_NOTAVAIL`]; the read path fills them.
    #[doc(hidden)]
    pub fn from_completion(c: &Completion, err: Error, prov_errno: i32) -> ErrEntry {
        ErrEntry {
            op_context: c.context,
            flags: c.flags,
            len: c.len,
            buf: c.buf,
            data: c.data,
            tag: c.tag,
            err: err.errno(),
            prov_errno,
            ..ErrEntry::default()
        }
    }
}

/// Which `struct fi_cq_err_entry` an application was built against, from the API version it
/// passed to `fi_getinfo`/`fi_fabric`.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub enum ErrEntryAbi {
    /// API < 1.5: 72 bytes, ends with `err_data`; the caller cannot supply an error buffer.
    V1_0,
    /// API 1.5 – 1.19: 80 bytes, adds `err_data_size`.
    V1_5,
    /// API ≥ 1.20: 88 bytes, adds `src_addr` ([`ErrEntry`]).
    V1_20,
}

impl ErrEntryAbi {
    /// The layout used by an application that requested API `major.minor`.
    pub const fn for_api(major: u32, minor: u32) -> ErrEntryAbi {
        if major > 1 || (major == 1 && minor >= 20) {
            ErrEntryAbi::V1_20
        } else if major == 1 && minor >= 5 {
            ErrEntryAbi::V1_5
        } else {
            ErrEntryAbi::V1_0
        }
    }

    /// Bytes of `fi_cq_err_entry` in this layout: what may be written into the caller's buffer.
    pub const fn size(self) -> usize {
        match self {
            ErrEntryAbi::V1_0 => offset_of!(ErrEntry, err_data_size),
            ErrEntryAbi::V1_5 => offset_of!(ErrEntry, src_addr),
            ErrEntryAbi::V1_20 => size_of::<ErrEntry>(),
        }
    }

    /// Whether the caller may pass its own error-data buffer (`err_data_size` exists).
    pub const fn has_err_data_size(self) -> bool {
        !matches!(self, ErrEntryAbi::V1_0)
    }
}

/// `enum fi_cq_format`: which entry type a CQ returns.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
#[repr(u32)]
pub enum CqFormat {
    /// `FI_CQ_FORMAT_UNSPEC`: the provider chooses; ringfab chooses
    /// [`CqFormat::UNSPEC_DEFAULT`] (`Context`).
    #[default]
    Unspec = 0,
    /// `FI_CQ_FORMAT_CONTEXT`: [`ContextEntry`].
    Context = 1,
    /// `FI_CQ_FORMAT_MSG`: [`MsgEntry`].
    Msg = 2,
    /// `FI_CQ_FORMAT_DATA`: [`DataEntry`].
    Data = 3,
    /// `FI_CQ_FORMAT_TAGGED`: [`TaggedEntry`].
    Tagged = 4,
}

impl CqFormat {
    /// What `Unspec` resolves to: `Context`, the smallest entry.
    ///
    /// An application that asks for "any format" cannot know an entry's size ahead of the
    /// call that opens the CQ, so the only choice that cannot overrun a buffer sized for any
    /// format is the smallest one. libfabric's util CQ and the usNIC provider make the same
    /// choice, so code written against them behaves the same here.
    pub const UNSPEC_DEFAULT: CqFormat = CqFormat::Context;

    /// The format for libfabric's `enum fi_cq_format` value `raw`.
    ///
    /// # Errors
    /// [`Error::Inval`] for a value libfabric does not define (libfabric's util CQ does the same).
    pub const fn from_raw(raw: u32) -> Result<CqFormat> {
        Ok(match raw {
            0 => CqFormat::Unspec,
            1 => CqFormat::Context,
            2 => CqFormat::Msg,
            3 => CqFormat::Data,
            4 => CqFormat::Tagged,
            _ => return Err(Error::Inval),
        })
    }

    /// libfabric's number for this format.
    pub const fn raw(self) -> u32 {
        self as u32
    }

    /// The format actually used: `self`, or [`UNSPEC_DEFAULT`](Self::UNSPEC_DEFAULT) for
    /// `Unspec`.
    pub const fn resolve(self) -> CqFormat {
        match self {
            CqFormat::Unspec => Self::UNSPEC_DEFAULT,
            f => f,
        }
    }

    /// Bytes of one entry in this format (after resolving `Unspec`).
    pub const fn entry_size(self) -> usize {
        match self.resolve() {
            CqFormat::Unspec | CqFormat::Context => size_of::<ContextEntry>(),
            CqFormat::Msg => size_of::<MsgEntry>(),
            CqFormat::Data => size_of::<DataEntry>(),
            CqFormat::Tagged => size_of::<TaggedEntry>(),
        }
    }
}

/// One completion in ringfab's normalized form, before it is written in a CQ's format.
///
/// Internal to ringfab (the read path builds it from a ring's completion); public only because
/// [`Format`]'s hidden method takes it.
#[doc(hidden)]
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct Completion {
    /// The operation's context.
    pub context: OpContext,
    /// What completed.
    pub flags: CompletionFlags,
    /// Bytes received.
    pub len: usize,
    /// Receive data buffer (multi-receive).
    pub buf: BufAddr,
    /// Remote CQ data.
    pub data: u64,
    /// Tag.
    pub tag: u64,
    /// The sender's raw address, for a framed or plain-UDP receive (`FI_SOURCE`).
    pub(crate) src_raw: Option<crate::addr::RawAddr>,
    /// The sender's handle in the endpoint's address vector, when it is there.
    pub(crate) src: Option<crate::addr::FiAddr>,
    /// The owned buffer the operation was posted with, on its way back to the application.
    pub(crate) owned: Option<crate::buf::RawBuf>,
    /// A gather send's further buffers (`Endpoint::sendv`), on their way back with `owned`.
    pub(crate) extra: [Option<crate::buf::RawBuf>; crate::buf::IOV_MAX - 1],
}

mod sealed {
    pub trait Sealed {}
}

/// A CQ format as a type: `CompletionQueue<F: Format>` returns `F::Entry`s.
///
/// Sealed: the four formats of `fi_cq(3)` are the only ones.
pub trait Format: sealed::Sealed + Copy + Default + Send + Sync + 'static {
    /// The entry this format returns.
    type Entry: Copy + Default + PartialEq + core::fmt::Debug + Send + Sync + 'static;
    /// The matching `fi_cq_attr::format` value.
    const FORMAT: CqFormat;
    /// The entry for completion `c`: the fields this format has, copied.
    #[doc(hidden)]
    fn fill(c: &Completion) -> Self::Entry;
    /// The entry for a completion that has only a context, flags and a length (the read
    /// path's common case): the other fields zero, as `fill` would give them.
    #[doc(hidden)]
    #[inline(always)]
    fn plain(context: OpContext, flags: CompletionFlags, len: usize) -> Self::Entry {
        Self::fill(&Completion {
            context,
            flags,
            len,
            ..Completion::default()
        })
    }
}

/// [`CqFormat::Context`] as a type.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct Context;
/// [`CqFormat::Msg`] as a type.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct Msg;
/// [`CqFormat::Data`] as a type.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct Data;
/// [`CqFormat::Tagged`] as a type.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct Tagged;

impl sealed::Sealed for Context {}
impl sealed::Sealed for Msg {}
impl sealed::Sealed for Data {}
impl sealed::Sealed for Tagged {}

impl Format for Context {
    type Entry = ContextEntry;
    const FORMAT: CqFormat = CqFormat::Context;
    fn fill(c: &Completion) -> ContextEntry {
        ContextEntry {
            op_context: c.context,
        }
    }
}

impl Format for Msg {
    type Entry = MsgEntry;
    const FORMAT: CqFormat = CqFormat::Msg;
    fn fill(c: &Completion) -> MsgEntry {
        MsgEntry {
            op_context: c.context,
            flags: c.flags,
            len: c.len,
        }
    }
}

impl Format for Data {
    type Entry = DataEntry;
    const FORMAT: CqFormat = CqFormat::Data;
    fn fill(c: &Completion) -> DataEntry {
        DataEntry {
            op_context: c.context,
            flags: c.flags,
            len: c.len,
            buf: c.buf,
            data: c.data,
        }
    }
}

impl Format for Tagged {
    type Entry = TaggedEntry;
    const FORMAT: CqFormat = CqFormat::Tagged;
    fn fill(c: &Completion) -> TaggedEntry {
        TaggedEntry {
            op_context: c.context,
            flags: c.flags,
            len: c.len,
            buf: c.buf,
            data: c.data,
            tag: c.tag,
        }
    }
}

// The x86_64 layouts of libfabric's headers (fact sheet §3). The pointer-sized fields make these
// hold on every 64-bit target; 32-bit targets have their own C layout and are not checked here.
#[cfg(target_pointer_width = "64")]
const _: () = {
    assert!(size_of::<OpContext>() == size_of::<*mut u8>());
    assert!(size_of::<BufAddr>() == size_of::<*mut u8>());
    assert!(size_of::<ContextEntry>() == 8);
    assert!(size_of::<MsgEntry>() == 24);
    assert!(size_of::<DataEntry>() == 40);
    assert!(size_of::<TaggedEntry>() == 48);
    assert!(size_of::<ErrEntry>() == 88);
    assert!(offset_of!(ErrEntry, olen) == 48);
    assert!(offset_of!(ErrEntry, err) == 56);
    assert!(offset_of!(ErrEntry, prov_errno) == 60);
    assert!(offset_of!(ErrEntry, err_data) == 64);
    assert!(offset_of!(ErrEntry, err_data_size) == 72);
    assert!(offset_of!(ErrEntry, src_addr) == 80);
    assert!(Context::FORMAT.entry_size() == size_of::<ContextEntry>());
    assert!(Msg::FORMAT.entry_size() == size_of::<MsgEntry>());
    assert!(Data::FORMAT.entry_size() == size_of::<DataEntry>());
    assert!(Tagged::FORMAT.entry_size() == size_of::<TaggedEntry>());
};

#[cfg(all(test, target_pointer_width = "64"))]
mod tests {
    use super::*;
    use core::mem::align_of;

    #[test]
    fn entry_layouts_match_libfabric_x86_64() {
        assert_eq!(
            (size_of::<ContextEntry>(), align_of::<ContextEntry>()),
            (8, 8)
        );
        assert_eq!(offset_of!(ContextEntry, op_context), 0);

        assert_eq!((size_of::<MsgEntry>(), align_of::<MsgEntry>()), (24, 8));
        assert_eq!(offset_of!(MsgEntry, op_context), 0);
        assert_eq!(offset_of!(MsgEntry, flags), 8);
        assert_eq!(offset_of!(MsgEntry, len), 16);

        assert_eq!((size_of::<DataEntry>(), align_of::<DataEntry>()), (40, 8));
        assert_eq!(offset_of!(DataEntry, op_context), 0);
        assert_eq!(offset_of!(DataEntry, flags), 8);
        assert_eq!(offset_of!(DataEntry, len), 16);
        assert_eq!(offset_of!(DataEntry, buf), 24);
        assert_eq!(offset_of!(DataEntry, data), 32);

        assert_eq!(
            (size_of::<TaggedEntry>(), align_of::<TaggedEntry>()),
            (48, 8)
        );
        assert_eq!(offset_of!(TaggedEntry, op_context), 0);
        assert_eq!(offset_of!(TaggedEntry, flags), 8);
        assert_eq!(offset_of!(TaggedEntry, len), 16);
        assert_eq!(offset_of!(TaggedEntry, buf), 24);
        assert_eq!(offset_of!(TaggedEntry, data), 32);
        assert_eq!(offset_of!(TaggedEntry, tag), 40);
    }

    #[test]
    fn err_entry_layout_matches_libfabric_x86_64() {
        assert_eq!((size_of::<ErrEntry>(), align_of::<ErrEntry>()), (88, 8));
        let offsets = [
            offset_of!(ErrEntry, op_context),
            offset_of!(ErrEntry, flags),
            offset_of!(ErrEntry, len),
            offset_of!(ErrEntry, buf),
            offset_of!(ErrEntry, data),
            offset_of!(ErrEntry, tag),
            offset_of!(ErrEntry, olen),
            offset_of!(ErrEntry, err),
            offset_of!(ErrEntry, prov_errno),
            offset_of!(ErrEntry, err_data),
            offset_of!(ErrEntry, err_data_size),
            offset_of!(ErrEntry, src_addr),
        ];
        assert_eq!(offsets, [0, 8, 16, 24, 32, 40, 48, 56, 60, 64, 72, 80]);
    }

    #[test]
    fn err_entry_size_follows_api_version() {
        assert_eq!(ErrEntryAbi::for_api(1, 0), ErrEntryAbi::V1_0);
        assert_eq!(ErrEntryAbi::for_api(1, 4), ErrEntryAbi::V1_0);
        assert_eq!(ErrEntryAbi::for_api(1, 5), ErrEntryAbi::V1_5);
        assert_eq!(ErrEntryAbi::for_api(1, 19), ErrEntryAbi::V1_5);
        assert_eq!(ErrEntryAbi::for_api(1, 20), ErrEntryAbi::V1_20);
        assert_eq!(ErrEntryAbi::for_api(2, 0), ErrEntryAbi::V1_20);
        assert_eq!(ErrEntryAbi::V1_0.size(), 72);
        assert_eq!(ErrEntryAbi::V1_5.size(), 80);
        assert_eq!(ErrEntryAbi::V1_20.size(), 88);
        assert!(!ErrEntryAbi::V1_0.has_err_data_size());
        assert!(ErrEntryAbi::V1_5.has_err_data_size());
    }

    #[test]
    fn cq_format_values_match_libfabric_and_reject_unknown() {
        for (raw, f) in [
            (0, CqFormat::Unspec),
            (1, CqFormat::Context),
            (2, CqFormat::Msg),
            (3, CqFormat::Data),
            (4, CqFormat::Tagged),
        ] {
            assert_eq!(CqFormat::from_raw(raw), Ok(f));
            assert_eq!(f.raw(), raw);
        }
        assert_eq!(CqFormat::from_raw(5), Err(Error::Inval));
        assert_eq!(CqFormat::from_raw(u32::MAX), Err(Error::Inval));
    }

    #[test]
    fn unspec_format_resolves_to_context() {
        assert_eq!(CqFormat::Unspec.resolve(), CqFormat::Context);
        assert_eq!(CqFormat::Unspec.entry_size(), 8);
        assert_eq!(CqFormat::Tagged.resolve(), CqFormat::Tagged);
    }

    fn sample() -> Completion {
        Completion {
            context: OpContext(0x1000),
            flags: CompletionFlags::RECV | CompletionFlags::MSG | CompletionFlags::REMOTE_CQ_DATA,
            len: 60,
            buf: BufAddr(0x2000),
            data: 0xdead_beef,
            tag: 0x7,
            ..Completion::default()
        }
    }

    #[test]
    fn each_format_copies_exactly_its_fields() {
        let c = sample();
        assert_eq!(
            Context::fill(&c),
            ContextEntry {
                op_context: OpContext(0x1000)
            }
        );
        assert_eq!(
            Msg::fill(&c),
            MsgEntry {
                op_context: c.context,
                flags: c.flags,
                len: 60
            }
        );
        let d = Data::fill(&c);
        assert_eq!((d.buf, d.data), (BufAddr(0x2000), 0xdead_beef));
        let t = Tagged::fill(&c);
        assert_eq!((t.len, t.tag), (60, 7));
        assert_eq!(Tagged::FORMAT, CqFormat::Tagged);
    }

    #[test]
    fn err_entry_from_completion_carries_positive_errno_and_no_source() {
        let e = ErrEntry::from_completion(&sample(), Error::Trunc, 3);
        assert_eq!(e.err, 265);
        assert_eq!(e.prov_errno, 3);
        assert_eq!(e.op_context, OpContext(0x1000));
        assert_eq!(e.src_addr, ADDR_NOTAVAIL);
        assert!(e.err_data.is_null());
        assert_eq!(e.err_data_size, 0);
    }

    #[test]
    fn entries_are_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<ContextEntry>();
        check::<TaggedEntry>();
        check::<ErrEntry>();
    }
}
