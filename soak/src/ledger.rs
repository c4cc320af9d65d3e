//! The reference model: every operation posted and not yet accounted for, by context.
//!
//! An operation leaves the ledger exactly once, in one of the ways the man pages and
//! `docs/semantics.md` allow:
//!
//! * its completion, success or error (`FI_ECANCELED` included), read from its CQ;
//! * its path's failure: a critical fault discards every pending operation of the path and
//!   reports it as one `FI_EIO` entry with the endpoint's context (fi_endpoint(3), "all
//!   pending operations are discarded"; docs/semantics.md, the critical-error row) — the
//!   ledger discards what it still holds of that endpoint and direction when it reads that
//!   entry;
//! * the endpoint's close or its re-enable after a fault (fi_close(3): outstanding operations
//!   are discarded; `fi_enable` closes the failed queues first), after its CQ was drained, so
//!   that nothing the CQ still held is mistaken for a discard.
//!
//! A completion for a context the ledger does not hold is a violation: completed twice, after
//! its discard, or never posted.

use std::collections::BTreeMap;

use ringfab::entry::OpContext;

/// An operation's direction (a receive, or a send: the ones that complete).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Dir {
    /// `fi_send`.
    Send,
    /// `fi_recv`.
    Recv,
}

/// What the ledger knows of one outstanding operation.
#[derive(Clone, Copy, Debug)]
pub struct Op {
    /// The station (0 or 1) that posted it.
    pub station: usize,
    /// The station's endpoint generation it was posted on (a new one after every recovery).
    pub gen: u64,
    /// Its direction.
    pub dir: Dir,
    /// The soak's operation index when it was posted.
    pub posted_at: u64,
}

/// Contexts from here up are endpoints' own (`EpAttr::context`): what a path's failure entry
/// carries. Operations' contexts stay below.
pub const ENDPOINT_CONTEXT_BASE: usize = 1 << 60;

/// The ledger of outstanding operations.
#[derive(Default)]
pub struct Ledger {
    out: BTreeMap<usize, Op>,
    last: usize,
}

impl Ledger {
    /// A context never given before (never NULL, below [`ENDPOINT_CONTEXT_BASE`]).
    pub fn fresh(&mut self) -> OpContext {
        self.last += 1;
        OpContext(self.last)
    }

    /// Records `ctx` as posted (the post returned `Ok`).
    pub fn posted(&mut self, ctx: OpContext, op: Op) {
        self.out.insert(ctx.0, op);
    }

    /// Takes `ctx` out on its completion, read from `station`'s CQ in direction `dir`.
    ///
    /// # Errors
    /// What is wrong with the completion: a context not outstanding (twice, after its
    /// discard, or never posted), another station's, or the other direction's.
    pub fn completed(&mut self, station: usize, ctx: OpContext, dir: Dir) -> Result<Op, String> {
        let Some(op) = self.out.get(&ctx.0).copied() else {
            return Err(format!(
                "a completion for context {} on station {station}, which is not outstanding \
                 (completed twice, completed after its discard, or never posted)",
                ctx.0
            ));
        };
        if op.station != station || op.dir != dir {
            return Err(format!(
                "a {dir:?} completion on station {station} for context {}, a {:?} of station {}",
                ctx.0, op.dir, op.station
            ));
        }
        self.out.remove(&ctx.0);
        Ok(op)
    }

    /// Discards what `station`'s endpoint generation `gen` still has outstanding in `dir`
    /// (its path failed); returns how many.
    pub fn path_failed(&mut self, station: usize, gen: u64, dir: Dir) -> u64 {
        self.discard(|op| op.station == station && op.gen == gen && op.dir == dir)
    }

    /// Discards everything `station`'s endpoint generation `gen` still has outstanding (the
    /// endpoint was closed, or re-enabled after a fault); returns how many.
    pub fn endpoint_gone(&mut self, station: usize, gen: u64) -> u64 {
        self.discard(|op| op.station == station && op.gen == gen)
    }

    fn discard(&mut self, which: impl Fn(&Op) -> bool) -> u64 {
        let before = self.out.len();
        self.out.retain(|_, op| !which(op));
        (before - self.out.len()) as u64
    }

    /// Operations outstanding on `station` (each holds one owned buffer).
    pub fn holding(&self, station: usize) -> usize {
        self.out.values().filter(|op| op.station == station).count()
    }

    /// The `k`-th (modulo their number) operation outstanding on `station`, in context order.
    pub fn pick(&self, station: usize, k: usize) -> Option<OpContext> {
        let n = self.holding(station);
        (n > 0).then(|| {
            self.out
                .iter()
                .filter(|(_, op)| op.station == station)
                .nth(k % n)
                .map(|(&c, _)| OpContext(c))
        })?
    }

    /// Every context outstanding on `station`, in order.
    pub fn contexts(&self, station: usize) -> Vec<OpContext> {
        self.out
            .iter()
            .filter(|(_, op)| op.station == station)
            .map(|(&c, _)| OpContext(c))
            .collect()
    }

    /// The outstanding operation `ctx`, if it is.
    pub fn get(&self, ctx: OpContext) -> Option<Op> {
        self.out.get(&ctx.0).copied()
    }

    /// Operations outstanding anywhere.
    pub fn len(&self) -> usize {
        self.out.len()
    }

    /// Whether nothing is outstanding.
    pub fn is_empty(&self) -> bool {
        self.out.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(station: usize, gen: u64, dir: Dir) -> Op {
        Op {
            station,
            gen,
            dir,
            posted_at: 0,
        }
    }

    #[test]
    fn a_completion_takes_its_operation_once() {
        let mut l = Ledger::default();
        let c = l.fresh();
        l.posted(c, op(0, 0, Dir::Recv));
        assert!(l.completed(0, c, Dir::Recv).is_ok());
        assert!(l.completed(0, c, Dir::Recv).is_err());
    }

    #[test]
    fn a_completion_on_the_wrong_station_or_direction_is_refused() {
        let mut l = Ledger::default();
        let c = l.fresh();
        l.posted(c, op(1, 0, Dir::Send));
        assert!(l.completed(0, c, Dir::Send).is_err());
        assert!(l.completed(1, c, Dir::Recv).is_err());
        assert!(l.completed(1, c, Dir::Send).is_ok());
    }

    #[test]
    fn a_path_failure_discards_its_direction_of_its_generation_only() {
        let mut l = Ledger::default();
        let (a, b, c, d) = (l.fresh(), l.fresh(), l.fresh(), l.fresh());
        l.posted(a, op(0, 1, Dir::Recv));
        l.posted(b, op(0, 1, Dir::Send));
        l.posted(c, op(0, 2, Dir::Recv));
        l.posted(d, op(1, 1, Dir::Recv));
        assert_eq!(l.path_failed(0, 1, Dir::Recv), 1);
        assert!(
            l.completed(0, a, Dir::Recv).is_err(),
            "discarded: no completion after"
        );
        assert_eq!(l.endpoint_gone(0, 1), 1);
        assert_eq!(l.len(), 2);
    }
}
