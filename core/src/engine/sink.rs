//! What a poll hands its reader: the [`Sink`] trait, the reader's [`Window`] into its arrays for
//! the fast lanes, and the [`Outcome`] of everything else — a [`Plain`] success, a whole
//! completion, or an [`ErrRecord`].

use crate::addr::FiAddr;
use crate::buf::Buf;
use crate::entry::{Completion, OpContext};
use crate::flags::CompletionFlags;
use crate::strerror::ProvError;
use crate::Error;

/// An error completion on its way to the application, with everything `readerr` reports.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct ErrRecord {
    pub(crate) completion: Completion,
    pub(crate) err: Error,
    pub(crate) olen: usize,
    pub(crate) prov: Option<ProvError>,
}

/// A success with nothing but a context, flags and a length: no buffer pointer, data, tag,
/// source or owned buffer — the common case, which the read path fills an entry from
/// directly, without building a [`Completion`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Plain {
    pub(crate) context: OpContext,
    pub(crate) flags: CompletionFlags,
    pub(crate) len: usize,
}

impl Plain {
    pub(super) const NONE: Plain = Plain {
        context: OpContext::NULL,
        flags: CompletionFlags::empty(),
        len: 0,
    };

    /// The same completion, whole (for the aux queue).
    pub(crate) fn completion(self) -> Completion {
        Completion {
            context: self.context,
            flags: self.flags,
            len: self.len,
            ..Completion::default()
        }
    }
}

/// What one hardware completion becomes, as handed to a sink: by reference, so that the
/// hot path builds each completion once, in place, and never moves it.
#[derive(Clone, Copy)]
pub(crate) enum Outcome<'a> {
    /// A successful completion the application asked for, with nothing but what [`Plain`]
    /// holds.
    Plain(Plain),
    /// A successful completion the application asked for.
    Done(&'a Completion),
    /// An error completion, for the error queue.
    Failed(&'a ErrRecord),
}

/// Where [`PathState::poll`](super::PathState::poll) hands what it completes.
///
/// The reader's array is open to the poll as a *window* ([`Window`]): successes found in the
/// driver's loop are written there directly ([`write`](Self::write), and on an endpoint's path
/// their sources and buffers beside them) and accepted with [`commit`](Self::commit) or
/// [`commit_filled`](Self::commit_filled) — no intermediate record, no call per entry.
/// Everything else goes through [`plain`](Self::plain) (runs of plain successes found off the
/// fast path) and [`outcome`](Self::outcome), which return `true` to stop after the current
/// chunk. `'s` is the storage's lifetime: the owned buffers a window hands back borrow it.
pub(crate) trait Sink<'s> {
    /// What a plain success becomes in the reader's array.
    type Entry;
    /// The entries the poll may write directly, the reader's next free ones (empty when the
    /// reader takes none that way), with the reader's arrays of sources and buffers.
    fn window(&mut self) -> Window<'_, 's, Self::Entry>;
    /// Writes plain success `p` as `entry`.
    fn write(entry: &mut Self::Entry, p: Plain);
    /// Accepts the first `k` entries of the window, written with [`write`](Self::write); they
    /// have no source and no buffer.
    fn commit(&mut self, k: usize);
    /// Accepts the first `k` entries of the window, written with [`write`](Self::write), whose
    /// sources and buffers (where the window has them) the poll wrote too.
    fn commit_filled(&mut self, k: usize);
    /// A run of plain successes, in order.
    fn plain(&mut self, run: &[Plain]) -> bool;
    /// Any other outcome.
    fn outcome(&mut self, o: Outcome<'_>) -> bool;
}

/// The two calls of a [`Sink`] the general lane makes, object-safe: the general lane
/// (`PathState::general_rx`, `general_tx`) takes its sink as `&mut dyn Deliver`, so that it is
/// compiled once per path type rather than once per sink.
pub(crate) trait Deliver<'s> {
    /// [`Sink::plain`].
    fn plain_run(&mut self, run: &[Plain]) -> bool;
    /// [`Sink::outcome`].
    fn deliver(&mut self, o: Outcome<'_>) -> bool;
}

impl<'s, S: Sink<'s>> Deliver<'s> for S {
    fn plain_run(&mut self, run: &[Plain]) -> bool {
        self.plain(run)
    }

    fn deliver(&mut self, o: Outcome<'_>) -> bool {
        self.outcome(o)
    }
}

/// The part of a reader's arrays a poll may write directly (see [`Sink`]): `entries`, and
/// beside them the entries' sources (`readfrom`) and owned buffers (`read_owned`) when the
/// reader takes them. `whole` is false when the reader wants something a window cannot hold
/// (every buffer of a gather send): then only entries without any buffer may be written.
pub(crate) struct Window<'w, 's, E> {
    pub(crate) entries: &'w mut [E],
    pub(crate) src: Option<&'w mut [FiAddr]>,
    pub(crate) bufs: Option<&'w mut [Option<Buf<'s>>]>,
    pub(crate) whole: bool,
}

impl<E> Window<'_, '_, E> {
    /// A window the poll writes nothing into.
    pub(crate) fn closed() -> Self {
        Window {
            entries: &mut [],
            src: None,
            bufs: None,
            whole: false,
        }
    }

    /// Entries a lane may write in one poll of at most `want`: as many as the entries, and the
    /// sources and buffers the reader takes beside them, have room for.
    #[inline(always)]
    pub(crate) fn room(&self, want: usize) -> usize {
        let mut room = self.entries.len().min(want);
        if let Some(src) = &self.src {
            room = room.min(src.len());
        }
        if let Some(bufs) = &self.bufs {
            room = room.min(bufs.len());
        }
        room
    }
}

/// A closure is a sink without a window.
impl<'s, T: FnMut(Outcome<'_>) -> bool> Sink<'s> for T {
    type Entry = Plain;

    fn window(&mut self) -> Window<'_, 's, Plain> {
        Window::closed()
    }

    fn write(entry: &mut Plain, p: Plain) {
        *entry = p;
    }

    fn commit(&mut self, _k: usize) {}

    fn commit_filled(&mut self, _k: usize) {}

    #[inline(always)]
    fn plain(&mut self, run: &[Plain]) -> bool {
        let mut stop = false;
        for p in run {
            stop |= self(Outcome::Plain(*p));
        }
        stop
    }

    #[inline(always)]
    fn outcome(&mut self, o: Outcome<'_>) -> bool {
        self(o)
    }
}
