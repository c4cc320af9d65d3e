//! One side of the soak: a domain's endpoint with its CQ, AV and registered region, the
//! application's pool of buffers, and what a careful application does with them — post,
//! cancel, read every completion (handing each buffer back to the pool), and recover after a
//! critical fault as fi_endpoint(3) describes (re-enable, or close and open again).
//!
//! Every call checks what comes back against the [`Ledger`] and returns a description of the
//! first violation as its error.

use ringfab::av::{AddressVector, EpAddr, FiAddr};
use ringfab::cq::{CompletionQueue, CqAttr};
use ringfab::domain::Domain;
use ringfab::entry::{ErrEntry, Msg, MsgEntry, OpContext};
use ringfab::ep::{Endpoint, EpAttr};
use ringfab::flags::CompletionFlags;
use ringfab::hal::Nic;
use ringfab::mr::{Buf, MemoryRegion};
use ringfab::Error;

use crate::ledger::{Dir, Ledger, Op, ENDPOINT_CONTEXT_BASE};
use crate::tally::{errno_name, Tally};

/// Every buffer's length: one IOMMU page, so a buffer never straddles two mappings' pages.
pub const BUF: usize = 4096;
/// Buffers in a station's region.
pub const BUFS: usize = 512;
/// Bytes at the start of a buffer the pool fills with [`CANARY`] while the buffer is the
/// application's: a device writing a buffer it gave back (issue 14 item 9) spoils them. Every
/// receive writes from the buffer's first byte.
const CANARY_LEN: usize = 64;
const CANARY: u8 = 0xc5;
/// Completions taken per read.
const BATCH: usize = 16;

/// What the soak keeps across stations: the ledger, the totals and the operation index.
#[derive(Default)]
pub struct Books {
    /// Operations outstanding.
    pub ledger: Ledger,
    /// Totals.
    pub tally: Tally,
    /// Data operations issued so far (the index of the next).
    pub op: u64,
}

/// How a recovery ended.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Recovered {
    /// The endpoint is enabled again.
    Yes,
    /// The device is gone (`Device(DeviceRemoved)`): only new devices help.
    DeviceGone,
    /// The endpoint could not be brought back on this domain (a queue the device would not
    /// start): the domain must go.
    No,
}

/// One side: see the [module documentation](self).
pub struct Station<'d, 'n, N: Nic> {
    /// 0 or 1.
    pub id: usize,
    dom: &'d Domain<'n, N>,
    ep: Option<Endpoint>,
    cq: Option<CompletionQueue<N, Msg>>,
    av: Option<AddressVector>,
    peer: FiAddr,
    peer_name: EpAddr,
    mr: Option<MemoryRegion>,
    pool: Vec<Buf<'d>>,
    attr: EpAttr,
    /// The endpoint generation operations are posted on now.
    pub gen: u64,
    /// A data call answered `OpBadState` or a path's failure entry was read: the endpoint
    /// needs recovering.
    pub failed: bool,
}

fn cq_err(what: &str, e: Error) -> String {
    format!("{what}: {e:?}")
}

impl<'d, 'n, N: Nic> Station<'d, 'n, N> {
    /// Station `id` on `dom`: a region of [`BUFS`] buffers carved into the pool, and an endpoint
    /// with `attr` whose AV holds `peer_name`.
    ///
    /// # Errors
    /// The operation that failed, with core's error.
    pub fn open(
        id: usize,
        dom: &'d Domain<'n, N>,
        attr: EpAttr,
        peer_name: EpAddr,
        books: &mut Books,
    ) -> Result<Self, Error> {
        // One page more: the memory need not start on a page, and a buffer of a page is
        // carved on one (`MemoryRegion::alloc`).
        let mr = dom.register(vec![0u8; BUF * (BUFS + 1)])?;
        let mut st = Station {
            id,
            dom,
            ep: None,
            cq: None,
            av: None,
            peer: FiAddr::NOTAVAIL,
            peer_name,
            mr: None,
            pool: Vec::with_capacity(BUFS),
            attr,
            gen: 0,
            failed: false,
        };
        for _ in 0..BUFS {
            let mut b = mr.alloc(dom, BUF)?;
            b.fill(0, CANARY_LEN, CANARY)?;
            st.pool.push(b);
        }
        st.mr = Some(mr);
        books.tally.add("buffers.carved", BUFS as u64);
        st.open_endpoint()?;
        Ok(st)
    }

    fn open_endpoint(&mut self) -> Result<(), Error> {
        let (ep, cq, av) = self
            .dom
            .ready_endpoint::<Msg>(&self.attr, &CqAttr::default())?;
        self.peer = av.insert_one(self.dom, self.peer_name)?;
        (self.ep, self.cq, self.av) = (Some(ep), Some(cq), Some(av));
        Ok(())
    }

    /// The endpoint's own context: what its failure entries carry.
    fn ep_context(&self) -> OpContext {
        OpContext(ENDPOINT_CONTEXT_BASE + self.id)
    }

    /// Buffers the application holds.
    pub fn pool_len(&self) -> usize {
        self.pool.len()
    }

    /// The registered region's device address (for an IOMMU fault aimed at it).
    pub fn region_iova(&self) -> Option<ringfab::hal::Iova> {
        self.mr.as_ref().and_then(|mr| mr.iova(self.dom).ok())
    }

    /// Whether the endpoint is disabled (a fault published, or not enabled).
    pub fn disabled(&self) -> bool {
        self.ep.as_ref().is_none_or(|ep| !ep.is_enabled(self.dom))
    }

    /// A buffer from the pool, its canary checked.
    fn take_buf(&mut self) -> Result<Option<Buf<'d>>, String> {
        let Some(b) = self.pool.pop() else {
            return Ok(None);
        };
        let mut head = [0u8; CANARY_LEN];
        b.read(0, &mut head).map_err(|e| cq_err("buffer read", e))?;
        if head.iter().any(|&x| x != CANARY) {
            return Err(format!(
                "a buffer in the application's hands (iova {:#x}) was written: a device wrote \
                 into a buffer core had handed back",
                b.iova().0
            ));
        }
        Ok(Some(b))
    }

    fn give_buf(&mut self, mut b: Buf<'d>) -> Result<(), String> {
        b.fill(0, CANARY_LEN, CANARY)
            .map_err(|e| cq_err("buffer fill", e))?;
        self.pool.push(b);
        Ok(())
    }

    /// A post refused with `e`: `Again` (full) and `OpBadState` (disabled) are the answers a
    /// healthy or failed endpoint gives; anything else is a violation.
    fn refused(&mut self, books: &mut Books, what: &str, e: Error) -> Result<(), String> {
        match e {
            Error::Again => books.tally.bump("refused.again"),
            Error::OpBadState => {
                books.tally.bump("refused.op-bad-state");
                self.failed = true;
            }
            e => return Err(format!("{what} refused with {e:?}")),
        }
        Ok(())
    }

    fn post(&mut self, books: &mut Books, dir: Dir, len: usize) -> Result<(), String> {
        let Some(buf) = self.take_buf()? else {
            books.tally.bump("refused.no-buffer");
            return Ok(());
        };
        let Some(ep) = self.ep.as_ref() else {
            return self.give_buf(buf);
        };
        let ctx = books.ledger.fresh();
        let (r, name) = match dir {
            Dir::Recv => (ep.recv(self.dom, buf, ctx), "posted.recv"),
            Dir::Send => {
                let len = len.min(ep.max_msg_size(self.dom));
                (ep.send(self.dom, buf, len, self.peer, ctx), "posted.send")
            }
        };
        match r {
            Ok(()) => {
                books.tally.bump(name);
                let op = Op {
                    station: self.id,
                    gen: self.gen,
                    dir,
                    posted_at: books.op,
                };
                books.ledger.posted(ctx, op);
                Ok(())
            }
            Err((e, buf)) => {
                books.tally.bump("buffers.back-from-refused-post");
                self.give_buf(buf)?;
                self.refused(books, name, e)
            }
        }
    }

    /// Posts a receive of a pool buffer.
    ///
    /// # Errors
    /// A violation.
    pub fn recv(&mut self, books: &mut Books) -> Result<(), String> {
        self.post(books, Dir::Recv, 0)
    }

    /// Sends `len` bytes (at most the endpoint's `max_msg_size`) of a pool buffer to the peer.
    ///
    /// # Errors
    /// A violation.
    pub fn send(&mut self, books: &mut Books, len: usize) -> Result<(), String> {
        self.post(books, Dir::Send, len)
    }

    /// Injects `len` bytes (at most the inject size) to the peer: no completion on success.
    ///
    /// # Errors
    /// A violation.
    pub fn inject(&mut self, books: &mut Books, len: usize) -> Result<(), String> {
        let Some(ep) = self.ep.as_ref() else {
            return Ok(());
        };
        let payload = [0x5a; 256];
        match ep.inject(self.dom, &payload[..len.min(ep.inject_size())], self.peer) {
            Ok(()) => {
                books.tally.bump("posted.inject");
                Ok(())
            }
            Err(e) => self.refused(books, "inject", e),
        }
    }

    /// Cancels the `k`-th outstanding operation, or (`bogus`) a context never posted. A cancel
    /// that does not find an outstanding operation is checked: after a drain the operation must
    /// have completed (it had finished before the cancel) or its path failed.
    ///
    /// # Errors
    /// A violation.
    pub fn cancel(&mut self, books: &mut Books, k: usize, bogus: bool) -> Result<(), String> {
        let Some(ep) = self.ep.as_ref() else {
            return Ok(());
        };
        let target = match books.ledger.pick(self.id, k) {
            Some(c) if !bogus => c,
            _ => OpContext(ENDPOINT_CONTEXT_BASE - 1 - k),
        };
        match ep.cancel(self.dom, target) {
            Ok(true) => {
                books.tally.bump("posted.cancel.found");
                if books.ledger.get(target).is_none() {
                    return Err(format!(
                        "cancel found context {}, which is not outstanding",
                        target.0
                    ));
                }
            }
            Ok(false) => {
                books.tally.bump("posted.cancel.not-found");
                if books.ledger.get(target).is_some() {
                    self.drain(books, usize::MAX)?;
                    if let Some(op) = books.ledger.get(target) {
                        if !self.disabled() && !self.failed {
                            return Err(format!(
                                "cancel answered not-found for context {} ({:?} posted at \
                                 operation {}), still outstanding: nothing completed it and \
                                 the endpoint is healthy",
                                target.0, op.dir, op.posted_at
                            ));
                        }
                    }
                }
            }
            Err(e) => {
                books.tally.bump("posted.cancel.refused");
                self.refused(books, "cancel", e)?;
            }
        }
        Ok(())
    }

    /// Reads the CQ until it answers `Again` or `rounds` reads, checking every completion
    /// against the ledger and putting every buffer back in the pool. Returns the entries read.
    ///
    /// # Errors
    /// A violation.
    pub fn drain(&mut self, books: &mut Books, rounds: usize) -> Result<usize, String> {
        let mut n = 0;
        for _ in 0..rounds {
            let Some(cq) = self.cq.as_mut() else {
                return Ok(n);
            };
            let mut e = [MsgEntry::default(); BATCH];
            let mut src = [FiAddr::NOTAVAIL; BATCH];
            let mut bufs: [Option<Buf<'d>>; BATCH] = Default::default();
            match cq.read_owned(self.dom, &mut e, &mut src, &mut bufs) {
                Ok(got) => {
                    n += got;
                    for (e, buf) in e[..got].iter().zip(bufs.iter_mut()) {
                        self.success(books, e, buf.take())?;
                    }
                }
                Err(Error::Avail) => {
                    let mut entry = ErrEntry::default();
                    let buf = match cq.readerr_owned(self.dom, &mut entry, None, 0) {
                        Ok((_, buf)) => buf,
                        Err(e) => return Err(cq_err("readerr after Avail", e)),
                    };
                    n += 1;
                    self.error(books, &entry, buf)?;
                }
                Err(Error::Again) => break,
                Err(e) => return Err(cq_err("CQ read", e)),
            }
        }
        Ok(n)
    }

    fn dir_of(flags: CompletionFlags) -> Result<Dir, String> {
        match (
            flags.contains(CompletionFlags::SEND),
            flags.contains(CompletionFlags::RECV),
        ) {
            (true, false) => Ok(Dir::Send),
            (false, true) => Ok(Dir::Recv),
            _ => Err(format!(
                "a completion with flags {flags:?}: neither send nor receive"
            )),
        }
    }

    fn success(
        &mut self,
        books: &mut Books,
        e: &MsgEntry,
        buf: Option<Buf<'d>>,
    ) -> Result<(), String> {
        let dir = Self::dir_of(e.flags)?;
        books.ledger.completed(self.id, e.op_context, dir)?;
        let max = self
            .ep
            .as_ref()
            .map_or(usize::MAX, |ep| ep.max_msg_size(self.dom));
        if dir == Dir::Recv && e.len > max {
            return Err(format!(
                "a receive of {} bytes completed, beyond the {max} the endpoint accepts",
                e.len
            ));
        }
        books.tally.bump(match dir {
            Dir::Send => "completed.send.success",
            Dir::Recv => "completed.recv.success",
        });
        self.returned(books, e.op_context, buf)
    }

    fn returned(
        &mut self,
        books: &mut Books,
        ctx: OpContext,
        buf: Option<Buf<'d>>,
    ) -> Result<(), String> {
        let Some(buf) = buf else {
            return Err(format!(
                "the completion of context {} handed no buffer back",
                ctx.0
            ));
        };
        books.tally.bump("buffers.back-with-completion");
        self.give_buf(buf)
    }

    fn error(
        &mut self,
        books: &mut Books,
        entry: &ErrEntry,
        buf: Option<Buf<'d>>,
    ) -> Result<(), String> {
        let dir = Self::dir_of(entry.flags)?;
        let name = errno_name(entry.err);
        if entry.op_context.0 >= ENDPOINT_CONTEXT_BASE || entry.op_context == OpContext::NULL {
            // No operation's context: fi_endpoint(3) NOTES, "Operations that complete in error
            // that are not associated with valid operational context will use the endpoint
            // context in any error reporting structures" — a path's failure or a
            // failed inject (docs/semantics.md). The endpoint was opened with one, so NULL
            // is never right.
            if entry.op_context != self.ep_context() {
                return Err(format!(
                    "an error entry with no operation's context: {entry:?}"
                ));
            }
            if buf.is_some() {
                return Err(format!(
                    "an error entry without an operation gave a buffer: {entry:?}"
                ));
            }
            if entry.prov_errno == 8 {
                // A path's failure (the critical-error row): FI_EIO, prov_errno 8; the path's
                // pending operations were discarded.
                if entry.err != 5 {
                    return Err(format!("a path failure that is not FI_EIO: {entry:?}"));
                }
                let n = books.ledger.path_failed(self.id, self.gen, dir);
                books.tally.bump(match dir {
                    Dir::Send => "completed.path-failure.send.FI_EIO",
                    Dir::Recv => "completed.path-failure.recv.FI_EIO",
                });
                books.tally.add("discarded.by-path-failure", n);
                self.failed = true;
                return Ok(());
            }
            if dir != Dir::Send {
                return Err(format!("a receive error without an operation: {entry:?}"));
            }
            books.tally.bump(match name {
                "FI_EIO" => "completed.inject.FI_EIO",
                "FI_ECANCELED" => "completed.inject.FI_ECANCELED",
                _ => "completed.inject.other",
            });
            return Ok(());
        }
        books.ledger.completed(self.id, entry.op_context, dir)?;
        if name == "FI_ETRUNC" && (dir != Dir::Recv || entry.olen == 0) {
            return Err(format!("FI_ETRUNC without a receive's olen: {entry:?}"));
        }
        books.tally.bump(match (dir, name) {
            (Dir::Send, "FI_EIO") => "completed.send.FI_EIO",
            (Dir::Send, "FI_ECANCELED") => "completed.send.FI_ECANCELED",
            (Dir::Send, "FI_ETRUNC") => "completed.send.FI_ETRUNC",
            (Dir::Send, _) => "completed.send.other",
            (Dir::Recv, "FI_EIO") => "completed.recv.FI_EIO",
            (Dir::Recv, "FI_ECANCELED") => "completed.recv.FI_ECANCELED",
            (Dir::Recv, "FI_ETRUNC") => "completed.recv.FI_ETRUNC",
            (Dir::Recv, _) => "completed.recv.other",
        });
        if name == "other" {
            return Err(format!("an error completion core does not give: {entry:?}"));
        }
        self.returned(books, entry.op_context, buf)
    }

    /// What the region counts must be what the application holds plus one buffer per
    /// outstanding operation (a healthy endpoint: nothing was discarded behind the ledger).
    ///
    /// # Errors
    /// A violation.
    pub fn check_buffers(&self, books: &Books) -> Result<(), String> {
        let Some(mr) = self.mr.as_ref() else {
            return Ok(());
        };
        let (region, pool, out) = (
            mr.outstanding(self.dom),
            self.pool.len(),
            books.ledger.holding(self.id),
        );
        if region != pool + out {
            return Err(format!(
                "station {}: the region counts {region} live buffers, the application holds \
                 {pool} and {out} operations are outstanding",
                self.id
            ));
        }
        Ok(())
    }

    /// Cancels every outstanding operation and drains: then, on a healthy endpoint, every
    /// operation posted has completed exactly once (fi_cancel(3)).
    ///
    /// # Errors
    /// A violation.
    pub fn settle(&mut self, books: &mut Books) -> Result<(), String> {
        if self.failed || self.disabled() {
            return Ok(());
        }
        self.drain(books, usize::MAX)?;
        for ctx in books.ledger.contexts(self.id) {
            let Some(ep) = self.ep.as_ref() else {
                break;
            };
            if books.ledger.get(ctx).is_none() {
                continue;
            }
            match ep.cancel(self.dom, ctx) {
                Ok(_) => books.tally.bump("settle.cancel"),
                Err(e) => {
                    self.refused(books, "cancel", e)?;
                    break;
                }
            }
        }
        self.drain(books, usize::MAX)?;
        if self.failed || self.disabled() {
            return Ok(());
        }
        if let Some(ctx) = books.ledger.contexts(self.id).first() {
            let op = books.ledger.get(*ctx);
            return Err(format!(
                "after every outstanding operation was canceled and the CQ drained, {} are \
                 still outstanding on a healthy endpoint, the first context {} ({op:?})",
                books.ledger.holding(self.id),
                ctx.0
            ));
        }
        books.tally.bump("settle.clean");
        self.check_buffers(books)
    }

    /// Brings a failed endpoint back as an application would: drain its CQ (the path's
    /// failure entry and what completed before it), then `enable` again (`reenable`) or
    /// close the endpoint and open a new one.
    ///
    /// # Errors
    /// A violation.
    pub fn recover(&mut self, books: &mut Books, reenable: bool) -> Result<Recovered, String> {
        self.drain(books, usize::MAX)?;
        let outcome = if reenable {
            self.reenable(books)?
        } else {
            self.reopen(books)?
        };
        if outcome == Recovered::Yes {
            self.failed = false;
            self.check_buffers(books)?;
        }
        Ok(outcome)
    }

    fn reenable(&mut self, books: &mut Books) -> Result<Recovered, String> {
        let Some(ep) = self.ep.as_mut() else {
            return self.reopen(books);
        };
        if ep.is_enabled(self.dom) {
            // `failed` from an entry of a path already recovered: nothing to do.
            return Ok(Recovered::Yes);
        }
        let r = ep.enable(self.dom);
        // Enabling a disabled endpoint closes its old queues first, discarding what they
        // held (whatever the answer): the ledger follows.
        let n = books.ledger.endpoint_gone(self.id, self.gen);
        books.tally.add("discarded.by-re-enable", n);
        self.gen += 1;
        match r {
            Ok(()) => {
                books.tally.bump("recovery.re-enabled");
                Ok(Recovered::Yes)
            }
            Err(Error::Device(ringfab::hal::Error::DeviceRemoved)) => {
                books.tally.bump("recovery.device-gone");
                Ok(Recovered::DeviceGone)
            }
            Err(Error::Device(_)) => {
                books.tally.bump("recovery.enable-refused");
                self.reopen(books)
            }
            Err(e) => Err(format!("enable after a fault: {e:?}")),
        }
    }

    /// Closes the endpoint, its CQ and AV (draining the CQ first: fi_close(3) loses what a CQ
    /// still holds), accounting what the close discarded.
    ///
    /// # Errors
    /// A violation.
    pub fn close_endpoint(&mut self, books: &mut Books) -> Result<(), String> {
        self.drain(books, usize::MAX)?;
        if let Some(ep) = self.ep.take() {
            if let Err((e, _)) = ep.close(self.dom) {
                return Err(format!("endpoint close: {e:?}"));
            }
        }
        // What completed before the close and was already queued is still the CQ's.
        self.drain(books, usize::MAX)?;
        let n = books.ledger.endpoint_gone(self.id, self.gen);
        books.tally.add("discarded.by-close", n);
        self.gen += 1;
        if let Some(cq) = self.cq.take() {
            if let Err((e, _)) = cq.close(self.dom) {
                return Err(format!("CQ close after its endpoint's: {e:?}"));
            }
        }
        if let Some(av) = self.av.take() {
            if let Err((e, _)) = av.close(self.dom) {
                return Err(format!("AV close after its endpoint's: {e:?}"));
            }
        }
        Ok(())
    }

    fn reopen(&mut self, books: &mut Books) -> Result<Recovered, String> {
        self.close_endpoint(books)?;
        match self.open_endpoint() {
            Ok(()) => {
                books.tally.bump("recovery.reopened");
                Ok(Recovered::Yes)
            }
            Err(Error::Device(ringfab::hal::Error::DeviceRemoved)) => {
                books.tally.bump("recovery.device-gone");
                Ok(Recovered::DeviceGone)
            }
            Err(Error::Device(_)) => {
                books.tally.bump("recovery.reopen-refused");
                Ok(Recovered::No)
            }
            Err(e) => Err(format!("opening an endpoint again: {e:?}")),
        }
    }

    /// Closes everything (the domain's end): the endpoint, then the region, which must have
    /// every buffer back once the application drops its pool.
    ///
    /// # Errors
    /// A violation.
    pub fn finish(mut self, books: &mut Books) -> Result<(), String> {
        self.close_endpoint(books)?;
        if books.ledger.holding(self.id) != 0 {
            return Err(format!(
                "station {}: {} operations outstanding after its endpoint's close",
                self.id,
                books.ledger.holding(self.id)
            ));
        }
        let held = self.pool.len();
        self.pool.clear();
        let Some(mr) = self.mr.take() else {
            return Ok(());
        };
        let left = mr.outstanding(self.dom);
        if left != 0 {
            return Err(format!(
                "station {}: {left} buffers not back in the region after the endpoint closed",
                self.id
            ));
        }
        books.tally.add("buffers.in-pool-at-close", held as u64);
        if let Err((e, _)) = mr.close(self.dom) {
            return Err(format!("region close: {e:?}"));
        }
        books
            .tally
            .bump("buffers.regions-closed-with-every-buffer-back");
        Ok(())
    }
}
