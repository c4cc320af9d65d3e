//! The operations in flight: what the provider must remember of a posted operation until its
//! completion is read — the application's context, and for a receive the application's
//! buffer, into which the payload is copied then (docs/libfabric.md, "Buffers").
//!
//! Core carries one word with every operation (`OpContext`) and gives it back in the
//! completion; the provider gives core the id of a record here. An id holds a tag in its top
//! 16 bits that no user-space pointer has on x86-64, a generation and a slot, so that a
//! completion naming a record that is gone (its endpoint closed) is recognised as such, and a
//! context core reports on its own (the endpoint's, for an error that belongs to no operation)
//! is told from an id.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use ringfab::entry::OpContext;

use crate::ep::Shared;
use crate::mr::Lease;
use crate::multi::Multi;

/// What the provider keeps of one posted operation.
pub(crate) struct Record {
    /// The endpoint's serial number (its records go when it closes).
    pub(crate) ep: u64,
    /// The application's context (`void *context` of the call).
    pub(crate) context: usize,
    /// For a receive: the application's buffer and its length.
    pub(crate) recv: Option<(usize, usize)>,
    /// Its success is not reported (selective completion: `crate::ep::Selective`); its
    /// buffer still comes back and an error is still reported.
    pub(crate) silent: bool,
    /// Where the operation's bounce buffer goes back to.
    pub(crate) shared: Arc<Shared>,
    /// For a slot of a multi-receive buffer: the buffer ([`crate::multi`]).
    pub(crate) multi: Option<Arc<Multi>>,
    /// For an operation of an endpoint in prefix mode: how it uses the application's buffer
    /// ([`crate::prefix`]).
    pub(crate) prefix: Option<PrefixOp>,
    /// A buffer of a plain-UDP endpoint's receive pool ([`crate::rxpool`]): no operation of
    /// the application's; its datagram is matched with one when it completes.
    pub(crate) pooled: bool,
}

/// What the record of an operation in prefix mode (`FI_MSG_PREFIX`) keeps.
pub(crate) struct PrefixOp {
    /// `msg_prefix_size`: the application's buffer starts this many bytes before the payload
    /// (`Record::recv` is the payload's part), and a receive's reported `len` counts them
    /// (fi_cq(3)).
    pub(crate) size: usize,
    /// The buffer core was given is the application's own, lent from its registration: the
    /// completion drops it (back to the registration) instead of giving it to the endpoint,
    /// and a receive's payload is already in place.
    pub(crate) in_place: bool,
    /// The application's bytes the operation holds until it completes.
    pub(crate) lease: Option<Lease>,
}

/// The tag in an id's top 16 bits.
const TAG: usize = 0xf1ab << 48;
const TAG_MASK: usize = 0xffff << 48;

#[derive(Default)]
struct Slab {
    slots: Vec<(u16, Option<Record>)>,
    free: Vec<u32>,
}

static SLAB: Mutex<Slab> = Mutex::new(Slab {
    slots: Vec::new(),
    free: Vec::new(),
});

/// Leases of lent buffers core kept when it reported their operations (a fault whose flush
/// the device did not acknowledge hands no buffer back): held, with their endpoint's serial
/// number, until the endpoint closes and core drops the buffers with it.
static STRANDED: Mutex<Vec<(u64, Lease)>> = Mutex::new(Vec::new());

/// Keeps `lease` until endpoint `ep` closes ([`STRANDED`]).
pub(crate) fn strand(ep: u64, lease: Lease) {
    STRANDED
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push((ep, lease));
}

fn lock() -> MutexGuard<'static, Slab> {
    // The slab is plain data: consistent whatever panicked while it was held.
    SLAB.lock().unwrap_or_else(PoisonError::into_inner)
}

fn id(generation: u16, slot: u32) -> OpContext {
    OpContext(TAG | (usize::from(generation) << 32) | slot as usize)
}

/// Whether `ctx` is an id made by [`insert`] (gone or not), rather than a context core
/// reports of its own.
pub(crate) fn is_id(ctx: OpContext) -> bool {
    ctx.0 & TAG_MASK == TAG
}

/// Keeps `r` until its completion; the id to give core as the operation's context.
pub(crate) fn insert(r: Record) -> OpContext {
    let mut s = lock();
    if let Some(slot) = s.free.pop() {
        let e = &mut s.slots[slot as usize];
        e.1 = Some(r);
        return id(e.0, slot);
    }
    let slot = s.slots.len() as u32;
    s.slots.push((0, Some(r)));
    id(0, slot)
}

/// Takes the record `ctx` names, if it is still there.
pub(crate) fn take(ctx: OpContext) -> Option<Record> {
    if !is_id(ctx) {
        return None;
    }
    let (generation, slot) = ((ctx.0 >> 32) as u16, ctx.0 as u32);
    let mut s = lock();
    let e = s.slots.get_mut(slot as usize)?;
    if e.0 != generation || e.1.is_none() {
        return None;
    }
    let r = e.1.take();
    e.0 = e.0.wrapping_add(1);
    s.free.push(slot);
    r
}

/// The id of endpoint `ep`'s operation posted with the application's `context` (the oldest
/// such one, for `fi_cancel`).
pub(crate) fn find(ep: u64, context: usize) -> Option<OpContext> {
    let s = lock();
    s.slots.iter().enumerate().find_map(|(slot, (g, r))| {
        r.as_ref()
            .filter(|r| r.ep == ep && r.context == context && !r.pooled)
            .map(|_| id(*g, slot as u32))
    })
}

/// The multi-receive buffer of the record `ctx` names, if it is a slot of one.
pub(crate) fn multi_of(ctx: OpContext) -> Option<Arc<Multi>> {
    if !is_id(ctx) {
        return None;
    }
    let (generation, slot) = ((ctx.0 >> 32) as u16, ctx.0 as u32);
    let s = lock();
    let (g, r) = s.slots.get(slot as usize)?;
    (*g == generation).then(|| r.as_ref()?.multi.clone())?
}

/// Drops every record of endpoint `ep` (it closed: core discarded its operations without
/// completions).
pub(crate) fn purge(ep: u64) {
    let gone: Vec<Record> = {
        let mut s = lock();
        let mut gone = Vec::new();
        let mut freed = Vec::new();
        for (slot, e) in s.slots.iter_mut().enumerate() {
            if e.1.as_ref().is_some_and(|r| r.ep == ep) {
                gone.extend(e.1.take());
                e.0 = e.0.wrapping_add(1);
                freed.push(slot as u32);
            }
        }
        s.free.extend(freed);
        gone
    };
    // Dropped outside the lock: a record may hold the last reference to its endpoint's
    // buffers.
    drop(gone);
    // Core's endpoint is closed: the buffers these leases covered are gone with it.
    STRANDED
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .retain(|(e, _)| *e != ep);
}
