//! The engine: paths — one hardware queue and the table of the operations posted on it — and
//! everything done to them (posting, polling, faults, cancel, shared paths, multi-receive, the
//! gather pool). It knows values (`crate::entry`, `crate::buf`, `crate::addr`, …) and the hal,
//! and takes what it needs of completion queues and counters through `credit.rs`'s narrow
//! interfaces; it never names an object an application opens. Its handle for applications
//! and objects is [`crate::path::Path`].
//!
//! A *path* is one transmit or receive queue of the NIC (`N::Tx<'n, D>` / `N::Rx<'n, D>`) plus
//! the core's op table, `[Op; D]`, indexed by the [`Token`] the driver carries: the token *is*
//! the slot index, so a completion finds its operation without a search. Slots are handed out
//! in ring order (`tail`), and `head` follows the oldest operation still outstanding. The driver
//! returns every token exactly once, so a slot is free again when its completion is taken; on a
//! device that completes out of order a freed slot in the middle waits until `head` passes it
//! (posting returns `Again` meanwhile), which costs capacity, never correctness.
//!
//! A path is of one kind (`Kind`): raw (whole frames, the raw layer), an endpoint's own queue,
//! or a shared transmit or receive context's queue — each kind with what only it keeps (the
//! framing, a shared receive context's endpoints), none selected by a flag. Multi-receive
//! groups and the gather pool are what a receive and a transmit path of an endpoint use.
//!
//! A path is guarded by one `spin::Mutex`, taken once per CQ read and once per posting batch
//! (the slot in `PathSlot`). The CQ a path reports to is also kept in an atomic outside the
//! lock so that a CQ's read can skip paths bound elsewhere without locking them.
//!
//! # Selective completion in hardware
//!
//! An operation that needs no successful completion (`FI_SELECTIVE_COMPLETION` bind without
//! `FI_COMPLETION`) is pushed with [`Report::ErrorsOnly`] when the device completes in order
//! ([`Capabilities::in_order_completion`](crate::hal::Capabilities::in_order_completion)): the
//! driver then reclaims it silently, and the core learns that it is done only from the driver's
//! [`pending`](crate::hal::Queue::pending) count. After each poll, the oldest live operations beyond that
//! count are the silently reclaimed ones (in order, every such frame is older than any frame the
//! driver still holds), and their CQ credits are released. On an out-of-order device that
//! inference is unsound, so every frame is pushed with [`Report::Always`] and the unrequested
//! successes are dropped in software.
//!
//! # Critical faults
//!
//! A driver reports a queue the device no longer honours — removed, reset, queue disabled,
//! needs reset — as a sticky [`QueueFault`] ([`TxQueue::fault`](crate::hal::Queue::fault)), found by its own stall check
//! inside `poll`. A poll that comes back short asks for it (a field read, once per poll, never
//! per completion); the first time it is there the path *fails* (`PathState::fail`): every
//! outstanding operation is discarded without a completion (credits released, owned buffers
//! returned to their regions), one error entry reports the fault on the bound CQ, and every
//! later post returns `OpBadState`. The fault is published in the slot
//! (`PathSlot::fault`) for the endpoint, which reads it without the path lock.
//!
//! # Shared paths
//!
//! A shared transmit context (`crate::stx`) is one path carrying the sends of several
//! endpoints, each reporting to its own CQ. Every operation records its CQ, its counter and
//! its endpoint's owner number; each of those CQs polls the path (`PathSlot::cq_mask`). A
//! read takes the reader's *held* operations first, oldest first — finished operations
//! another CQ's read found and left in their op-table slots (`OpTable::held`) — then polls the
//! ring, holding what belongs to other CQs. So each endpoint's completions keep their order,
//! no read takes another CQ's lock, and nothing needs more room than the ring's depth.
//! Successes nobody asked for are settled at once (credit back to the operation's own CQ),
//! counters count each operation when it is found, whoever finds it, and every frame is pushed
//! `Report::Always` (the silent-reclaim inference assumes one CQ). The read's fast lane is
//! off on a shared path. Closing one endpoint flushes the queue, discards that endpoint's
//! operations and posts the others back into their slots (`discard_owner`); `cancel` does
//! the same for one operation of the acting endpoint (`cancel_shared`).
//!
//! # Shared receive contexts
//!
//! A shared receive context (`crate::srx`) is a shared path whose receives the application
//! posts to the context; which endpoint a frame is for — and so its CQ — is known only from
//! the frame's header. Such a receive holds no CQ credit while posted; when its frame arrives
//! it is routed (its owner and CQ recorded in its slot) and takes a credit of that CQ when the
//! CQ's read delivers it — a CQ with no free credit leaves it held, so nothing is lost and
//! nothing overruns. A frame for no bound endpoint, or one the device reports bad (its header
//! cannot be trusted), is dropped and its buffer posted again, as a foreign frame is on an
//! endpoint's own queue. An endpoint that leaves puts the receives its frames filled, unread,
//! back into the ring: they are the context's buffers.
//!
//! [`Token`]: crate::hal::Token
//! [`Report::ErrorsOnly`]: crate::hal::Report::ErrorsOnly
//! [`Report::Always`]: crate::hal::Report::Always

// The code, one job per file. The types whose methods are generic code not inlined into every
// caller — `PathState`, `OpTable`, `PathSlot`, `Tally`, `FramedLane` — and the function
// `release` are defined here in `mod.rs`, whatever file implements them: rustc compiles a
// generic function in the codegen unit of the module that defines it (for a method, of the
// module that defines its type), and LLVM optimises across functions — inlining, fitting a
// callee to its one caller — within a codegen unit far more than across them. Defined in one
// module, the read's and the post's functions (`PathState::poll`, the lanes, `OpTable`'s,
// `PathState::post_recv_one`) are compiled together, as when the path was one file; split by
// module, the CQ read cost 2 instructions more per entry and posting a receive 11 more
// (core/benches/instructions.sh). For the same reason the lanes are associated functions
// (`PathState::fast_lane`, `FramedLane::fast_lane_framed`), not free ones. The handle on a path
// (`crate::path::Path`) lives in the objects' floor; its small methods are `#[inline]`, which
// compiles them into their callers' units instead.
mod cancel; // `fi_cancel` on a path of one endpoint
mod credit; // what the engine takes from a CQ (credits) and a counter (counts)
mod fast_lane; // the raw layer's fast lane
mod fault; // critical faults; discarding operations
mod framed; // the framed lane (an endpoint's receives)
mod gather; // the gather pool (`Endpoint::sendv`)
mod header; // reading ringfab's header out of a received buffer
mod ip; // the domain's IPv4 host: ARP, the control outbox, held sends, ports
mod multi; // multi-receive buffers
mod op; // the op table
mod plain_lane; // the plain-UDP lane (an endpoint's receives of IPv4/UDP datagrams)
mod poll; // `PathState::poll` and its general lane
mod post; // posting one receive or send
mod send_lane; // the send lane (an endpoint's sends of owned buffers)
mod shared; // shared transmit paths
mod sink; // what a poll hands its reader
mod slot; // `PathSlot`, a path's slot in the domain's table
mod srx; // shared receive contexts
mod state; // `PathState`'s queue, framing and accessors
mod tables; // the domain's tables a poll reads (`PollTables`), and `Table`
mod verdict; // what one completion becomes (the general lane)

pub(crate) use credit::{Count, Counters, Credits};
pub(crate) use ip::{udp_offload_request, HeldSend, IpCtx, IpHost, BOUNCE_SLOT, CONTROL_REGION};
pub(crate) use op::NO_MR;
pub(crate) use post::Poster;
pub(crate) use sink::{ErrRecord, Outcome, Plain, Sink, Window};
pub(crate) use slot::NO_CQ;
pub(crate) use srx::{SrxEp, SRX_MAX as MAX_SHARED};
pub(crate) use state::{Framing, Kind, PollCtx, Queue};
pub(crate) use tables::{PollTables, Table};

use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU8, AtomicUsize};

use spin::Mutex;

use self::gather::{IovRec, IOV_POOL};
use self::multi::{Group, MAX_GROUPS};
use self::op::{Held, LaneKey, Op};
use self::state::{RxLane, CHUNK};
use crate::atomic::AtomicU64;
use crate::buf::{owner_of, Buf, RawBuf};
use crate::flags::BindFlags;
use crate::hal::{Nic, QueueFault, RxCompletion, TxCompletion};

/// An open path: its queue, its op table and its binding.
pub(crate) struct PathState<'n, N: Nic + 'n, const D: usize> {
    pub(crate) queue: Queue<'n, N, D>,
    /// Its index in the domain's path table (what a held send names its path by).
    pub(crate) index: usize,
    table: OpTable<D>,
    /// The CQ this path reports to.
    pub(crate) cq: Option<usize>,
    /// The bind flags (`SELECTIVE_COMPLETION` matters).
    bind: BindFlags,
    /// Whether unrequested transmit successes may be left to the hardware (in-order device).
    hw_selective: bool,
    /// What the path is for: raw frames, one endpoint's queue, or a shared context's
    /// (`Kind`): how it frames, whom it serves, and what a shared one keeps.
    pub(crate) kind: Kind,
    /// The fast lane a receive poll of the path runs, decided from `kind` when it is set
    /// (an endpoint's framing does not change while it is attached): not decoded again on
    /// every poll.
    rx_lane: RxLane,
    /// Frames received and dropped because they were not well-formed ringfab frames for this
    /// endpoint (their buffers were posted again).
    pub(crate) dropped: u64,
    /// The counter (an index into the domain's counters) this path's completions count into.
    pub(crate) cntr: Option<usize>,
    /// Multi-receive buffers posted on this path.
    groups: [Group; MAX_GROUPS],
    /// The critical fault that failed the path (module documentation, "Critical faults").
    pub(crate) fault: Option<QueueFault>,
    /// Where the driver's `poll` writes completions: kept here, not on the stack, so that a
    /// poll does not zero a fresh array each time (whatever is in it is overwritten first).
    rx_scratch: [RxCompletion; CHUNK],
    tx_scratch: [TxCompletion; CHUNK],
    /// Where the fast path puts a run of plain successes for the sink (likewise reused).
    plains: [Plain; CHUNK],
    /// Gather sends in flight (`Op::iov`).
    iov: [IovRec; IOV_POOL],
    /// A transmit path of endpoints: one inject bounce slot per op-table slot (an inject's
    /// frame, a gather send's header), free exactly as long as that slot is. Declared after
    /// `queue`, so it is freed only once the queue that could read it has stopped — and it
    /// lives with the path, not with an endpoint handle that could be dropped first.
    ///
    /// On a plain-UDP endpoint's path the region also holds, after the `D` bounce slots, the
    /// control region ([`CONTROL_REGION`]) the domain's IPv4 host's frames (ARP, ICMP) are
    /// sent from (`engine/ip.rs`).
    pub(crate) bounce: Option<N::Dma>,
}

/// The op table of a path of depth `D`: slots handed out in ring order.
struct OpTable<const D: usize> {
    ops: [Op; D],
    /// On a shared path: the status of a finished operation that belongs to another CQ than
    /// the one whose read found it, kept until that CQ reads (its slot stays live).
    held: [Option<Held>; D],
    /// Slots with a `held` status: 0 lets a read skip the walk over the live span.
    holding: usize,
    /// Oldest slot still live (a wrapping count; the slot is `head % D`).
    head: usize,
    /// Next slot to hand out.
    tail: usize,
    /// Live slots.
    live: usize,
    /// `tail` when the queue's doorbell was last rung: the slots after it are posted but not
    /// yet given to the device (`PathState::recv_doorbell`).
    rung: usize,
}

/// What one poll completed, for the path's counter: added once per poll, not per operation.
#[derive(Default)]
struct Tally {
    ok: u64,
    bytes: u64,
    err: u64,
}

/// The framed lane of one poll: an endpoint's receives into owned buffers, on the Ethernet
/// encapsulation, read with `read`, `readfrom` or `read_owned` (docs/architecture.md, "The
/// hard CQ read path"). What it compares a header with, and the region of the buffers it takes.
#[derive(Clone, Copy)]
struct FramedLane<'s> {
    /// Bytes 12..18 of a frame for this endpoint as a little-endian number: ringfab's
    /// EtherType, its version, no flags (no remote CQ data), the endpoint's context.
    expect: u64,
    /// `LaneKey::of(Lane::OwnedRecv, mr)`: what an operation the lane takes has as `plain`.
    /// `mr` is the region of the buffers the lane takes in this poll, the oldest operation's.
    /// A buffer of another region ends the lane for the rest of the poll (the general lane
    /// takes it), so that the buffers a `read` drops go back to their region in one atomic
    /// subtraction, and a `read_owned` finds the region's count (`owner`) without a lookup per
    /// entry.
    key: LaneKey,
    owner: &'s AtomicUsize,
}

/// One slot of the domain's hardware-queue table (in its [`Storage`](crate::storage::Storage)).
pub(crate) struct PathSlot<'n, N: Nic + 'n, const D: usize> {
    pub(crate) state: Mutex<Option<PathState<'n, N, D>>>,
    /// The bound CQ's index, or [`NO_CQ`]; written under the lock, read without it.
    pub(crate) cq: AtomicUsize,
    /// The path state's `fault` as its [`QueueFault::code`] (0: none), published for readers
    /// that do not take the lock (an endpoint checking whether it is still enabled).
    fault: AtomicU8,
    /// A shared path: bit `i` set when CQ `i` (< 64) may find work in it.
    pub(crate) cq_mask: AtomicU64,
    /// A shared path: the owner numbers of the endpoints bound to it, one bit each.
    pub(crate) owners: AtomicU32,
    /// A shared path whose context was dropped while endpoints were bound: the last one to
    /// leave closes it.
    pub(crate) orphaned: AtomicBool,
}

/// Returns an owned buffer that will not reach the application to its region's count.
pub(crate) fn release(owners: &[AtomicUsize], owned: Option<RawBuf>) {
    if let Some(raw) = owned {
        if let Some(owner) = owner_of(owners, raw.mr) {
            drop(Buf::from_raw(raw, owner));
        }
    }
}
