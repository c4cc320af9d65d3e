//! Multi-receive buffers (`FI_MULTI_RECV`, fi_msg(3)): one buffer of the application's that
//! takes message after message until less than `FI_OPT_MIN_MULTI_RECV` bytes are left, then
//! is released — its last completion carries `FI_MULTI_RECV` (fi_cq(3)).
//!
//! The provider's receives copy (docs/libfabric.md, "Buffers"), so a multi-receive buffer is
//! a [`Multi`]: the application's buffer, how much of it is used, and the *slots* — ordinary
//! receives of the endpoint's own buffers — posted for it. Each slot's completion copies its
//! payload to the next free byte of the application's buffer (messages are packed one after
//! another) and reports it there. Slots are kept posted while the buffer could still take
//! one more message of the endpoint's largest size beyond those the posted slots could
//! bring, and at least `FI_OPT_MIN_MULTI_RECV` bytes would be left ([`Multi::fill`]), at most
//! [`MULTI_RECV_MSGS`](crate::nic::MULTI_RECV_MSGS) at once (what core counts a receive as,
//! so that `fi_rx_size_left` stays a lower bound); the completion after which no slot is
//! posted and none can be releases the buffer. A message longer than what is left completes
//! as `FI_ETRUNC` with `olen`, as any receive.
//!
//! A slot posted after the buffer's first ones sits in the receive ring behind receives the
//! application posted meanwhile, which take the messages that reach the ring first: the
//! buffer keeps its own messages in order, but an `fi_recv` posted after it may be filled
//! before it is released.
//!
//! `fi_cancel` of the buffer's context cancels every slot; the cancellations of all but the
//! last are not reported, and the last is an `FI_ECANCELED` error entry with `FI_MULTI_RECV`.

use core::ffi::c_void;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use ringfab::entry::OpContext;
use ringfab::ep::Endpoint;
use ringfab::flags::OpFlags;
use ringfab::mr::Buf;

use crate::ep::{EpObj, Shared};
use crate::ops;

/// One multi-receive buffer of the application's.
pub(crate) struct Multi {
    /// The endpoint the slots are posted on. It outlives every record of its operations
    /// (closing it purges them), and a slot's completion is handled while its record is
    /// held, so it is alive whenever this is used.
    ep: &'static EpObj,
    /// The application's buffer.
    pub(crate) app: usize,
    len: usize,
    /// `FI_OPT_MIN_MULTI_RECV` when it was posted (at least 1).
    min: usize,
    /// The largest payload a slot can bring.
    max_payload: usize,
    /// The flags slots are posted with (the call's, without `FI_MULTI_RECV`).
    flags: OpFlags,
    /// Posted without `FI_COMPLETION` under selective completion: only the release and
    /// errors are reported (as core does for its own multi-receive buffers).
    pub(crate) silent: bool,
    /// The application's context.
    pub(crate) context: usize,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Bytes of the buffer used.
    used: usize,
    /// The ids of the slots posted and not completed.
    slots: Vec<OpContext>,
    /// `fi_cancel` was called: no more slots.
    cancelled: bool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Plain values: consistent whatever panicked while they were held.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Where a slot's payload went.
pub(crate) struct Placed {
    /// The address in the application's buffer.
    pub(crate) buf: usize,
    /// Bytes placed.
    pub(crate) len: usize,
    /// Bytes that did not fit (`FI_ETRUNC`'s `olen`).
    pub(crate) olen: usize,
    /// This completion releases the buffer (`FI_MULTI_RECV`).
    pub(crate) release: bool,
}

impl Multi {
    /// A multi-receive buffer of the application's at `app`, `len` bytes, for endpoint `e`.
    #[allow(
        clippy::too_many_arguments,
        reason = "the endpoint, the application's buffer and context, and how it is posted"
    )]
    pub(crate) fn new(
        e: &'static EpObj,
        app: usize,
        len: usize,
        min: usize,
        max_payload: usize,
        flags: OpFlags,
        silent: bool,
        context: *mut c_void,
    ) -> Arc<Multi> {
        Arc::new(Multi {
            ep: e,
            app,
            len,
            min: min.max(1),
            max_payload: max_payload.max(1),
            flags: flags.difference(OpFlags::MULTI_RECV),
            silent,
            context: context as usize,
            state: Mutex::new(State::default()),
        })
    }

    /// Posts slots while the buffer can take more (module documentation): how many slots
    /// are posted now, or core's error if the first one could not be posted.
    pub(crate) fn fill(
        self: &Arc<Self>,
        ep: &Endpoint,
        shared: &Arc<Shared>,
    ) -> Result<usize, ringfab::Error> {
        let mut st = lock(&self.state);
        let dom = self.ep.domain().core();
        let mut posted = 0;
        while !st.cancelled && st.slots.len() < crate::nic::MULTI_RECV_MSGS as usize {
            let reserved = st.slots.len().saturating_mul(self.max_payload);
            let left = self.len.saturating_sub(st.used).saturating_sub(reserved);
            if left < self.min {
                break;
            }
            let Some(buf) = EpObj::take_buf(shared, true) else {
                break;
            };
            let rec = ops::Record {
                multi: Some(self.clone()),
                ..self
                    .ep
                    .record(shared, self.context as *mut c_void, None, false)
            };
            let id = ops::insert(rec);
            match ep.recvmsg(dom, buf, id, self.flags) {
                Ok(()) => {
                    st.slots.push(id);
                    posted += 1;
                }
                Err((err, buf)) => {
                    drop(ops::take(id));
                    shared.give_back(buf, true);
                    if posted == 0 && st.slots.is_empty() {
                        return Err(err);
                    }
                    break;
                }
            }
        }
        Ok(posted)
    }

    /// Slot `id` completed with a message of `len` bytes in `buf` (at `payload_offset`):
    /// copies what fits to the next free byte of the application's buffer, posts more
    /// slots, and says where it went and whether the buffer is released.
    pub(crate) fn place(
        self: &Arc<Self>,
        id: OpContext,
        buf: &Buf<'static>,
        payload_offset: usize,
        len: usize,
    ) -> Placed {
        let (at, n, olen) = {
            let mut st = lock(&self.state);
            st.slots.retain(|s| *s != id);
            let room = self.len.saturating_sub(st.used);
            let n = len.min(room);
            let at = self.app + st.used;
            if n > 0 {
                // SAFETY: fi_msg(3): the application's buffer holds `len` bytes and is the
                // provider's until it is released; `used + n` <= `len`.
                let dst = unsafe { core::slice::from_raw_parts_mut(at as *mut u8, n) };
                if buf.read(payload_offset, dst).is_err() {
                    dst.fill(0);
                }
            }
            st.used += n;
            (at, n, len - n)
        };
        self.top_up();
        Placed {
            buf: at,
            len: n,
            olen,
            release: self.released(),
        }
    }

    /// Slot `id` completed with no buffer to copy from (core always hands a receive's back;
    /// kept total): as a message of no bytes.
    pub(crate) fn place_nothing(self: &Arc<Self>, id: OpContext) -> Placed {
        let at = {
            let mut st = lock(&self.state);
            st.slots.retain(|s| *s != id);
            self.app + st.used
        };
        self.top_up();
        Placed {
            buf: at,
            len: 0,
            olen: 0,
            release: self.released(),
        }
    }

    /// Slot `id` completed in error: whether its error is reported (the last cancelled slot,
    /// or any other error), and whether the buffer is released with it.
    pub(crate) fn failed(self: &Arc<Self>, id: OpContext) -> (bool, bool) {
        let cancelled = {
            let mut st = lock(&self.state);
            st.slots.retain(|s| *s != id);
            st.cancelled
        };
        if !cancelled {
            self.top_up();
        }
        let release = self.released();
        (!cancelled || release, release)
    }

    /// `fi_cancel` of the buffer: cancels every slot (each completes `FI_ECANCELED`).
    pub(crate) fn cancel(&self, ep: &Endpoint) -> Result<bool, ringfab::Error> {
        let slots = {
            let mut st = lock(&self.state);
            st.cancelled = true;
            st.slots.clone()
        };
        let dom = self.ep.domain().core();
        let mut any = false;
        for id in slots {
            any |= ep.cancel(dom, id)?;
        }
        Ok(any)
    }

    /// Posts what the buffer can take now, through the endpoint (nothing if it is not
    /// enabled).
    fn top_up(self: &Arc<Self>) {
        let _: isize = self.ep.with_enabled(|ep, shared, _| {
            // A slot that cannot be posted now (no buffer, a full ring) leaves the buffer to be
            // released when its last slot completes.
            let _ = self.fill(ep, shared);
            0
        });
    }

    /// No slot is posted and none will be: the buffer is the application's again.
    fn released(&self) -> bool {
        lock(&self.state).slots.is_empty()
    }
}
