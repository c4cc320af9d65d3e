//! The send lane: an endpoint's reported sends of owned buffers, their completions written into
//! the reader's array and their buffers handed back without building a `Completion`
//! ([`PathState::send_lane`]), the transmit side of what the framed lane is for receives.

use core::sync::atomic::AtomicUsize;

use super::framed::hand_back;
use super::op::{Lane, LaneKey};
use super::sink::{Plain, Sink, Window};
use super::verdict::{tx_payload, SEND_FLAGS};
use super::{OpTable, PathState};
use crate::addr::FiAddr;
use crate::buf::owner_of;
use crate::hal::{Nic, TxCompletion};

/// What the send lane took of one poll: the operations from `head` on (`direct` of them), and
/// the payload bytes they sent (for a counter).
pub(super) struct SendTaken {
    pub(super) direct: usize,
    pub(super) bytes: u64,
}

impl<'n, N: Nic + 'n, const D: usize> PathState<'n, N, D> {
    /// The send lane over the completions `cs` the driver gave, oldest first: a success for the
    /// next slot in order whose operation is [`Lane::OwnedSend`] of the region of the oldest
    /// operation is written straight into `win` — the entry the general lane writes for it
    /// (`tx_outcome`: its context, `FI_SEND | FI_MSG`, nothing else), no source, its buffer —
    /// and its slot freed. Stops at the first completion that is anything else (an error, a
    /// send of another lane or region, a device that completed out of order, no room left):
    /// that one and every one after it go to the general lane, so the order is the device's.
    ///
    /// The buffers go back once the device reported their frames sent, as the general lane's:
    /// into the reader's array (`read_owned`), or to their region's count in one subtraction
    /// (`read`). `header` is the path's header length (a counter counts the payload, as
    /// `tx_payload`); `counted`, whether a counter may want the bytes.
    ///
    /// Never inlined, as the receive lanes: a function of its own keeps its loop's registers
    /// (igb, batch 64: 66.4 instructions per entry against 69.6 inlined, though 46 more a call
    /// at batch 1), and the bare-metal image holds one copy of it.
    #[inline(never)]
    pub(super) fn send_lane<'s, S: Sink<'s>>(
        table: &mut OpTable<D>,
        cs: &[TxCompletion],
        win: &mut Window<'_, 's, S::Entry>,
        owners: &'s [AtomicUsize],
        header: usize,
        counted: bool,
    ) -> SendTaken {
        let none = SendTaken {
            direct: 0,
            bytes: 0,
        };
        // A reader that takes every buffer of a gather send (`read_owned_iov`) needs what a
        // window cannot hold: the general lane serves it.
        if !win.whole {
            return none;
        }
        let head = table.head;
        let mr = table.ops[head % D].buf.mr;
        let Some(owner) = owner_of(owners, mr) else {
            return none;
        };
        let key = LaneKey::of(Lane::OwnedSend, mr);
        let room = win.room(cs.len());
        let mut next = head;
        let mut bytes = 0u64;
        for (c, entry) in cs[..room].iter().zip(win.entries.iter_mut()) {
            let op = &mut table.ops[next % D];
            if c.token.0 != (next % D) as u64 || c.status.is_err() || op.plain != key {
                break;
            }
            S::write(
                entry,
                Plain {
                    context: op.context,
                    flags: SEND_FLAGS,
                    len: 0,
                },
            );
            if counted {
                bytes += tx_payload(header, op.len) as u64;
            }
            op.free();
            next = next.wrapping_add(1);
        }
        let direct = next.wrapping_sub(head);
        if direct == 0 {
            return none;
        }
        if let Some(src) = win.src.as_deref_mut() {
            // A send has no source (the general lane's entry has none either).
            src[..direct].fill(FiAddr::NOTAVAIL);
        }
        // The freed slots still hold their buffers: nothing posts before this returns.
        hand_back(owner, table, head, win, direct);
        table.live -= direct;
        table.head = next;
        SendTaken { direct, bytes }
    }
}
