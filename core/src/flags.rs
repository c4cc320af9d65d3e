//! libfabric's flag bits, one type per field they belong to.
//!
//! libfabric packs many namespaces into `u64` bit masks and lets them overlap on purpose: bit 59
//! is `FI_DIRECTED_RECV` in capabilities, `FI_CLAIM` in operation flags, `FI_SELECTIVE_COMPLETION`
//! in bind flags and `FI_CONTEXT` in mode bits; bit 58 is `FI_NAMED_RX_CTX`, `FI_DISCARD` and
//! `FI_MSG_PREFIX`. A bare `u64` therefore cannot be decoded without knowing which field it came
//! from, so each field gets its own newtype here and the compiler keeps them apart:
//!
//! | type | libfabric field |
//! |---|---|
//! | [`CompletionFlags`] | `flags` of a CQ entry (`fi_cq_*_entry`, `fi_cq_err_entry`) |
//! | [`OpFlags`] | `flags` of a data transfer call, `op_flags` of `fi_tx_attr`/`fi_rx_attr` |
//! | [`BindFlags`] | `flags` of `fi_ep_bind` when binding a completion queue |
//! | [`CqFlags`] | `fi_cq_attr::flags` |
//! | [`Mode`] | `fi_info::mode`, `fi_tx_attr::mode`, `fi_rx_attr::mode` |
//!
//! Values are those of `include/rdma/fabric.h` at libfabric 2.x HEAD (plus the one 1.x mode bit
//! ringfab keeps, [`Mode::NOTIFY_FLAGS_ONLY`]). Bits 60–63 are provider-private in libfabric
//! (its util code marks internal queue slots with them), so no public type here names them.
//!
//! Every type has the same small API: associated constants, [`contains`](CompletionFlags::contains),
//! `|`, [`bits`](CompletionFlags::bits), [`from_bits`](CompletionFlags::from_bits) (which refuses
//! bits the type does not name), [`from_bits_truncate`](CompletionFlags::from_bits_truncate) and
//! [`from_bits_retain`](CompletionFlags::from_bits_retain) (which keeps them, for a validator that
//! must report them as `FI_EBADFLAGS` rather than lose them).

use core::fmt;
use core::ops::{BitAnd, BitOr, BitOrAssign};

macro_rules! flag_type {
    (
        $(#[$meta:meta])*
        pub struct $name:ident;
        $( $(#[$cmeta:meta])* const $flag:ident = $value:expr; )+
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
        #[repr(transparent)]
        pub struct $name(u64);

        impl $name {
            $( $(#[$cmeta])* pub const $flag: $name = $name($value); )+

            /// Every bit this type names, with its libfabric name, in declaration order.
            pub const NAMED: &'static [(&'static str, $name)] = &[
                $( (concat!("FI_", stringify!($flag)), $name($value)), )+
            ];

            /// The union of every bit this type names.
            pub const ALL: $name = $name(0 $( | $value )+);

            /// No bits set.
            pub const fn empty() -> $name {
                $name(0)
            }

            /// The raw `u64`, as libfabric's field holds it.
            pub const fn bits(self) -> u64 {
                self.0
            }

            /// `bits` as flags, or `None` if a bit is set that this type does not name.
            pub const fn from_bits(bits: u64) -> Option<$name> {
                if bits & !Self::ALL.0 == 0 {
                    Some($name(bits))
                } else {
                    None
                }
            }

            /// `bits` as flags, dropping every bit this type does not name.
            pub const fn from_bits_truncate(bits: u64) -> $name {
                $name(bits & Self::ALL.0)
            }

            /// `bits` as flags, unknown bits kept: for a validator that must report them
            /// (see [`unknown`](Self::unknown)) instead of silently losing them.
            pub const fn from_bits_retain(bits: u64) -> $name {
                $name(bits)
            }

            /// The bits set that this type does not name (zero for values from
            /// [`from_bits`](Self::from_bits) or [`from_bits_truncate`](Self::from_bits_truncate)).
            pub const fn unknown(self) -> u64 {
                self.0 & !Self::ALL.0
            }

            /// True if every bit of `other` is set in `self`.
            pub const fn contains(self, other: $name) -> bool {
                self.0 & other.0 == other.0
            }

            /// True if any bit of `other` is set in `self`.
            pub const fn intersects(self, other: $name) -> bool {
                self.0 & other.0 != 0
            }

            /// True if no bit is set.
            pub const fn is_empty(self) -> bool {
                self.0 == 0
            }

            /// `self | other`, usable in `const` contexts.
            pub const fn union(self, other: $name) -> $name {
                $name(self.0 | other.0)
            }

            /// `self & other`, usable in `const` contexts.
            pub const fn intersection(self, other: $name) -> $name {
                $name(self.0 & other.0)
            }

            /// `self` without the bits of `other`.
            pub const fn difference(self, other: $name) -> $name {
                $name(self.0 & !other.0)
            }
        }

        impl BitOr for $name {
            type Output = $name;
            fn bitor(self, rhs: $name) -> $name {
                self.union(rhs)
            }
        }

        impl BitOrAssign for $name {
            fn bitor_assign(&mut self, rhs: $name) {
                self.0 |= rhs.0;
            }
        }

        impl BitAnd for $name {
            type Output = $name;
            fn bitand(self, rhs: $name) -> $name {
                self.intersection(rhs)
            }
        }

        /// Prints the libfabric names joined by `|`, unknown bits in hex: `FI_MSG | FI_RECV`.
        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write_names(f, self.0, Self::NAMED.iter().map(|(n, v)| (*n, v.0)))
            }
        }
    };
}

/// Writes `bits` as `NAME | NAME | 0x…`, or `(empty)`.
fn write_names(
    f: &mut fmt::Formatter<'_>,
    bits: u64,
    named: impl Iterator<Item = (&'static str, u64)>,
) -> fmt::Result {
    if bits == 0 {
        return f.write_str("(empty)");
    }
    let mut rest = bits;
    let mut first = true;
    for (name, value) in named {
        if bits & value == value && rest & value != 0 {
            if !first {
                f.write_str(" | ")?;
            }
            f.write_str(name)?;
            first = false;
            rest &= !value;
        }
    }
    if rest != 0 {
        if !first {
            f.write_str(" | ")?;
        }
        write!(f, "{rest:#x}")?;
    }
    Ok(())
}

flag_type! {
    /// The `flags` of a completion entry: what kind of operation completed (`COMPLETION FLAGS`
    /// in `fi_cq(3)`). A send completion is `SEND | MSG`, a receive `RECV | MSG`, a receive that
    /// carried remote CQ data adds `REMOTE_CQ_DATA`.
    pub struct CompletionFlags;
    /// `FI_MSG`: a message operation (with `SEND` or `RECV`).
    const MSG = 1 << 1;
    /// `FI_RMA`: an RMA operation (with `READ`, `WRITE`, `REMOTE_READ` or `REMOTE_WRITE`).
    const RMA = 1 << 2;
    /// `FI_TAGGED`: a tagged message operation (with `SEND` or `RECV`).
    const TAGGED = 1 << 3;
    /// `FI_ATOMIC`: an atomic operation.
    const ATOMIC = 1 << 4;
    /// `FI_MULTICAST`: a multicast operation (valid on receive only with `FI_SOURCE`).
    const MULTICAST = 1 << 5;
    /// `FI_READ`: a locally initiated RMA or atomic read.
    const READ = 1 << 8;
    /// `FI_WRITE`: a locally initiated RMA or atomic write.
    const WRITE = 1 << 9;
    /// `FI_RECV`: a receive.
    const RECV = 1 << 10;
    /// `FI_SEND`: a send.
    const SEND = 1 << 11;
    /// `FI_REMOTE_READ`: a remotely initiated RMA or atomic read.
    const REMOTE_READ = 1 << 12;
    /// `FI_REMOTE_WRITE`: a remotely initiated RMA or atomic write.
    const REMOTE_WRITE = 1 << 13;
    /// `FI_MULTI_RECV`: the multi-receive buffer was consumed and released.
    const MULTI_RECV = 1 << 16;
    /// `FI_REMOTE_CQ_DATA`: the entry's `data` holds the peer's remote CQ data.
    const REMOTE_CQ_DATA = 1 << 17;
    /// `FI_MORE`: buffered receive; more data must be claimed with `FI_CLAIM`.
    const MORE = 1 << 18;
    /// `FI_CLAIM`: the completion of a receive that claimed buffered data (bit 59, shared with
    /// `FI_DIRECTED_RECV` in capabilities).
    const CLAIM = 1 << 59;
}

impl CompletionFlags {
    /// The flags `fi_cq(3)` NOTES still guarantee when the application set
    /// [`Mode::NOTIFY_FLAGS_ONLY`]: `FI_REMOTE_READ`, `FI_REMOTE_WRITE` (with `FI_RMA_EVENT`),
    /// `FI_REMOTE_CQ_DATA` and `FI_MULTI_RECV`. ringfab reports every flag anyway (see
    /// [`Mode::NOTIFY_FLAGS_ONLY`]); this is the set an application in that mode may rely on.
    pub const NOTIFY_FLAGS_ONLY_GUARANTEED: CompletionFlags = CompletionFlags::REMOTE_READ
        .union(CompletionFlags::REMOTE_WRITE)
        .union(CompletionFlags::REMOTE_CQ_DATA)
        .union(CompletionFlags::MULTI_RECV);
}

flag_type! {
    /// Operation flags: the `flags` of `fi_sendmsg`-style calls and the default `op_flags` of
    /// transmit and receive attributes. Completion levels live here.
    pub struct OpFlags;
    /// `FI_MULTI_RECV`: the receive buffer takes many messages.
    const MULTI_RECV = 1 << 16;
    /// `FI_REMOTE_CQ_DATA`: the transfer carries remote CQ data.
    const REMOTE_CQ_DATA = 1 << 17;
    /// `FI_MORE`: more operations follow at once; the provider may defer the doorbell.
    const MORE = 1 << 18;
    /// `FI_PEEK`: look for a matching buffered message without receiving it.
    const PEEK = 1 << 19;
    /// `FI_TRIGGER`: a triggered operation.
    const TRIGGER = 1 << 20;
    /// `FI_FENCE`: defer until earlier operations to the same peer have completed.
    const FENCE = 1 << 21;
    /// `FI_COMPLETION` (= `FI_EVENT`): generate a completion even under selective completion.
    const COMPLETION = 1 << 24;
    /// `FI_INJECT`: the source buffer may be reused as soon as the call returns.
    const INJECT = 1 << 25;
    /// `FI_INJECT_COMPLETE`: complete when the source buffer may be reused.
    const INJECT_COMPLETE = 1 << 26;
    /// `FI_TRANSMIT_COMPLETE`: complete when the operation left local resources.
    const TRANSMIT_COMPLETE = 1 << 27;
    /// `FI_DELIVERY_COMPLETE`: complete when the target has processed the operation.
    const DELIVERY_COMPLETE = 1 << 28;
    /// `FI_COMMIT_COMPLETE`: complete when the result is persistent.
    const COMMIT_COMPLETE = 1 << 30;
    /// `FI_MATCH_COMPLETE`: complete when the target matched the message to a buffer.
    const MATCH_COMPLETE = 1 << 31;
    /// `FI_DISCARD`: discard a buffered message (bit 58, `FI_NAMED_RX_CTX` in capabilities).
    const DISCARD = 1 << 58;
    /// `FI_CLAIM`: claim a buffered or peeked message (bit 59, `FI_DIRECTED_RECV` in
    /// capabilities).
    const CLAIM = 1 << 59;
}

impl OpFlags {
    /// `FI_EVENT`: libfabric's older name for [`OpFlags::COMPLETION`].
    pub const EVENT: OpFlags = OpFlags::COMPLETION;

    /// The completion-level flags: `FI_INJECT_COMPLETE`, `FI_TRANSMIT_COMPLETE`,
    /// `FI_DELIVERY_COMPLETE`, `FI_MATCH_COMPLETE`, `FI_COMMIT_COMPLETE`.
    pub const COMPLETION_LEVELS: OpFlags = OpFlags::INJECT_COMPLETE
        .union(OpFlags::TRANSMIT_COMPLETE)
        .union(OpFlags::DELIVERY_COMPLETE)
        .union(OpFlags::MATCH_COMPLETE)
        .union(OpFlags::COMMIT_COMPLETE);

    /// Whether an operation posted with these flags must generate a completion entry on a CQ
    /// bound with `bind`: always without `FI_SELECTIVE_COMPLETION`; with it, only when the
    /// operation asks for `FI_COMPLETION` or names a completion level (libfabric's
    /// `ofi_need_completion`). Error completions are generated regardless (`fi_cq(3)`).
    pub const fn needs_completion(self, bind: BindFlags) -> bool {
        !bind.contains(BindFlags::SELECTIVE_COMPLETION)
            || self.intersects(OpFlags::COMPLETION.union(OpFlags::COMPLETION_LEVELS))
    }
}

flag_type! {
    /// The flags of `fi_ep_bind` when an endpoint is bound to a completion queue. (Counter
    /// bindings take more bits — `FI_READ`, `FI_WRITE`, … — and are not this type.)
    pub struct BindFlags;
    /// `FI_RECV`: report receive completions to this CQ.
    const RECV = 1 << 10;
    /// `FI_TRANSMIT` (= `FI_SEND`): report transmit completions to this CQ.
    const TRANSMIT = 1 << 11;
    /// `FI_SELECTIVE_COMPLETION`: only operations that ask for it generate a successful
    /// completion (bit 59, shared with `FI_CLAIM` and `FI_CONTEXT`).
    const SELECTIVE_COMPLETION = 1 << 59;
}

flag_type! {
    /// The flags of `fi_ep_bind` when an endpoint is bound to a counter: which operation class
    /// it counts.
    pub struct CntrBindFlags;
    /// `FI_READ`: RMA reads initiated by the endpoint.
    const READ = 1 << 8;
    /// `FI_WRITE`: RMA writes initiated by the endpoint.
    const WRITE = 1 << 9;
    /// `FI_RECV`: receives.
    const RECV = 1 << 10;
    /// `FI_SEND` (= `FI_TRANSMIT`): sends.
    const SEND = 1 << 11;
    /// `FI_REMOTE_READ`: RMA reads of the endpoint's memory by peers.
    const REMOTE_READ = 1 << 12;
    /// `FI_REMOTE_WRITE`: RMA writes into the endpoint's memory by peers.
    const REMOTE_WRITE = 1 << 13;
}

flag_type! {
    /// `fi_cq_attr::flags`.
    pub struct CqFlags;
    /// `FI_AFFINITY`: `signaling_vector` is valid.
    const AFFINITY = 1 << 29;
}

flag_type! {
    /// Mode bits: requirements a provider places on the application (`fi_getinfo(3)`).
    pub struct Mode;
    /// `FI_CONTEXT2`: the application passes a `struct fi_context2` (64 bytes) as each
    /// operation's context, which the provider may use until the operation completes.
    const CONTEXT2 = 1 << 52;
    /// `FI_NOTIFY_FLAGS_ONLY`, **libfabric 1.x value** (1.5 – 1.x; 2.x defines it as 0).
    ///
    /// In libfabric 1.x an application that sets this mode bit accepts that completion entries
    /// carry only the flags listed in [`CompletionFlags::NOTIFY_FLAGS_ONLY_GUARANTEED`];
    /// the provider may leave every other flag (`SEND`, `RECV`, `MSG`, …) clear. libfabric 2.x
    /// removed the mode and `#define`s `FI_NOTIFY_FLAGS_ONLY` to `0`, so a 2.x application
    /// cannot set it and bit 54 is unused in the mode field.
    ///
    /// ringfab keeps the 1.x bit so that a 1.x application that offers it is understood rather
    /// than refused as an unknown mode. ringfab never *requires* the mode and never suppresses
    /// flags: every completion carries its full flags, which meets the mode's promise (the
    /// guaranteed flags are present) and the 2.x behaviour at once.
    const NOTIFY_FLAGS_ONLY = 1 << 54;
    /// `FI_RX_CQ_DATA`: remote CQ data consumes a posted receive buffer.
    const RX_CQ_DATA = 1 << 56;
    /// `FI_ASYNC_IOV`: the application keeps IO vectors valid until completion.
    const ASYNC_IOV = 1 << 57;
    /// `FI_MSG_PREFIX`: the application reserves a prefix in each message buffer for the
    /// provider's header.
    const MSG_PREFIX = 1 << 58;
    /// `FI_CONTEXT`: the application passes a `struct fi_context` (32 bytes) as each
    /// operation's context, which the provider may use until the operation completes.
    const CONTEXT = 1 << 59;
}

// Facts the rest of the crate relies on, checked at compile time.
const _: () = assert!(BindFlags::TRANSMIT.bits() == CompletionFlags::SEND.bits()); // FI_TRANSMIT = FI_SEND
const _: () = assert!(BindFlags::RECV.bits() == CompletionFlags::RECV.bits());
const _: () = assert!(CntrBindFlags::SEND.bits() == BindFlags::TRANSMIT.bits());
const _: () = assert!(CntrBindFlags::RECV.bits() == BindFlags::RECV.bits());
const _: () = assert!(OpFlags::EVENT.bits() == OpFlags::COMPLETION.bits());
// Bits 60..63 are provider-private in libfabric; no public field may use them.
const PROVIDER_PRIVATE: u64 = 0xf << 60;
const _: () = assert!(CompletionFlags::ALL.bits() & PROVIDER_PRIVATE == 0);
const _: () = assert!(OpFlags::ALL.bits() & PROVIDER_PRIVATE == 0);
const _: () = assert!(BindFlags::ALL.bits() & PROVIDER_PRIVATE == 0);
const _: () = assert!(CqFlags::ALL.bits() & PROVIDER_PRIVATE == 0);
const _: () = assert!(Mode::ALL.bits() & PROVIDER_PRIVATE == 0);

#[cfg(test)]
mod tests {
    use super::*;

    /// Each named bit is a single bit and no two names in one type share it (aliases such as
    /// `FI_EVENT` are associated constants outside `NAMED`).
    fn assert_distinct_single_bits(named: &[(&str, u64)]) {
        let mut seen = 0u64;
        for (name, v) in named {
            assert_eq!(v.count_ones(), 1, "{name} is not one bit");
            assert_eq!(
                seen & v,
                0,
                "{name} shares a bit with another flag of its type"
            );
            seen |= v;
        }
    }

    #[test]
    fn completion_flags_have_libfabric_values() {
        use CompletionFlags as F;
        let expect: [(F, u64); 15] = [
            (F::MSG, 1 << 1),
            (F::RMA, 1 << 2),
            (F::TAGGED, 1 << 3),
            (F::ATOMIC, 1 << 4),
            (F::MULTICAST, 1 << 5),
            (F::READ, 1 << 8),
            (F::WRITE, 1 << 9),
            (F::RECV, 1 << 10),
            (F::SEND, 1 << 11),
            (F::REMOTE_READ, 1 << 12),
            (F::REMOTE_WRITE, 1 << 13),
            (F::MULTI_RECV, 1 << 16),
            (F::REMOTE_CQ_DATA, 1 << 17),
            (F::MORE, 1 << 18),
            (F::CLAIM, 1 << 59),
        ];
        for (f, v) in expect {
            assert_eq!(f.bits(), v, "{f:?}");
        }
        assert_eq!(F::NAMED.len(), expect.len());
        assert_eq!(F::MSG.bits(), 0x2);
        assert_eq!(F::CLAIM.bits(), 0x0800_0000_0000_0000);
        let named: [(&str, u64); 15] =
            core::array::from_fn(|i| (F::NAMED[i].0, F::NAMED[i].1.bits()));
        assert_distinct_single_bits(&named);
        assert_eq!(
            F::NOTIFY_FLAGS_ONLY_GUARANTEED.bits(),
            (1 << 12) | (1 << 13) | (1 << 16) | (1 << 17)
        );
    }

    #[test]
    fn op_flags_have_libfabric_values() {
        use OpFlags as F;
        let expect: [(F, u64); 15] = [
            (F::MULTI_RECV, 1 << 16),
            (F::REMOTE_CQ_DATA, 1 << 17),
            (F::MORE, 1 << 18),
            (F::PEEK, 1 << 19),
            (F::TRIGGER, 1 << 20),
            (F::FENCE, 1 << 21),
            (F::COMPLETION, 1 << 24),
            (F::INJECT, 1 << 25),
            (F::INJECT_COMPLETE, 1 << 26),
            (F::TRANSMIT_COMPLETE, 1 << 27),
            (F::DELIVERY_COMPLETE, 1 << 28),
            (F::COMMIT_COMPLETE, 1 << 30),
            (F::MATCH_COMPLETE, 1 << 31),
            (F::DISCARD, 1 << 58),
            (F::CLAIM, 1 << 59),
        ];
        for (f, v) in expect {
            assert_eq!(f.bits(), v, "{f:?}");
        }
        assert_eq!(F::NAMED.len(), expect.len());
        assert_eq!(F::EVENT, F::COMPLETION);
        assert_eq!(F::COMPLETION.bits(), 0x0100_0000);
        assert_eq!(F::MATCH_COMPLETE.bits(), 0x8000_0000);
        let named: [(&str, u64); 15] =
            core::array::from_fn(|i| (F::NAMED[i].0, F::NAMED[i].1.bits()));
        assert_distinct_single_bits(&named);
    }

    #[test]
    fn bind_flags_have_libfabric_values() {
        assert_eq!(BindFlags::RECV.bits(), 1 << 10);
        assert_eq!(BindFlags::TRANSMIT.bits(), 1 << 11);
        assert_eq!(BindFlags::SELECTIVE_COMPLETION.bits(), 1 << 59);
        assert_eq!(BindFlags::ALL.bits(), (1 << 10) | (1 << 11) | (1 << 59));
    }

    #[test]
    fn cq_flags_have_libfabric_values() {
        assert_eq!(CqFlags::AFFINITY.bits(), 1 << 29);
        assert_eq!(CqFlags::ALL, CqFlags::AFFINITY);
    }

    #[test]
    fn mode_bits_have_libfabric_values() {
        assert_eq!(Mode::CONTEXT.bits(), 1 << 59);
        assert_eq!(Mode::MSG_PREFIX.bits(), 1 << 58);
        assert_eq!(Mode::ASYNC_IOV.bits(), 1 << 57);
        assert_eq!(Mode::RX_CQ_DATA.bits(), 1 << 56);
        assert_eq!(Mode::NOTIFY_FLAGS_ONLY.bits(), 1 << 54);
        assert_eq!(Mode::CONTEXT2.bits(), 1 << 52);
        let named: [(&str, u64); 6] =
            core::array::from_fn(|i| (Mode::NAMED[i].0, Mode::NAMED[i].1.bits()));
        assert_distinct_single_bits(&named);
    }

    #[test]
    fn shared_bits_mean_different_things_per_field() {
        // Bit 59 decodes as a different flag depending on the field it came from.
        let bit59 = 1u64 << 59;
        assert_eq!(
            CompletionFlags::from_bits(bit59),
            Some(CompletionFlags::CLAIM)
        );
        assert_eq!(OpFlags::from_bits(bit59), Some(OpFlags::CLAIM));
        assert_eq!(
            BindFlags::from_bits(bit59),
            Some(BindFlags::SELECTIVE_COMPLETION)
        );
        assert_eq!(Mode::from_bits(bit59), Some(Mode::CONTEXT));
        assert_eq!(CqFlags::from_bits(bit59), None);
    }

    #[test]
    fn from_bits_rejects_unknown_bits_and_truncate_drops_them() {
        let raw = CqFlags::AFFINITY.bits() | (1 << 43); // FI_PEER: not supported by ringfab
        assert_eq!(CqFlags::from_bits(raw), None);
        assert_eq!(CqFlags::from_bits_truncate(raw), CqFlags::AFFINITY);
        let kept = CqFlags::from_bits_retain(raw);
        assert_eq!(kept.bits(), raw);
        assert_eq!(kept.unknown(), 1 << 43);
        assert_eq!(CompletionFlags::from_bits(1 << 60), None);
        assert_eq!(BindFlags::from_bits(0), Some(BindFlags::empty()));
    }

    #[test]
    fn contains_and_or_combine_flags() {
        let f = CompletionFlags::RECV | CompletionFlags::MSG;
        assert!(f.contains(CompletionFlags::RECV));
        assert!(f.contains(CompletionFlags::RECV | CompletionFlags::MSG));
        assert!(!f.contains(CompletionFlags::RECV | CompletionFlags::TAGGED));
        let mut g = f;
        g |= CompletionFlags::REMOTE_CQ_DATA;
        assert_eq!(g.bits(), (1 << 10) | (1 << 1) | (1 << 17));
        assert_eq!((g & CompletionFlags::MSG), CompletionFlags::MSG);
    }

    #[test]
    fn debug_names_the_flags() {
        use crate::strerror::SliceWriter;
        use core::fmt::Write;
        let mut buf = [0u8; 128];
        let mut out = SliceWriter::new(&mut buf);
        write!(out, "{:?}", CompletionFlags::RECV | CompletionFlags::MSG).unwrap();
        assert_eq!(out.as_str(), "FI_MSG | FI_RECV");
        let mut buf = [0u8; 128];
        let mut out = SliceWriter::new(&mut buf);
        write!(
            out,
            "{:?}",
            CqFlags::from_bits_retain(CqFlags::AFFINITY.bits() | 1)
        )
        .unwrap();
        assert_eq!(out.as_str(), "FI_AFFINITY | 0x1");
        let mut buf = [0u8; 128];
        let mut out = SliceWriter::new(&mut buf);
        write!(out, "{:?}", OpFlags::empty()).unwrap();
        assert_eq!(out.as_str(), "(empty)");
    }

    #[test]
    fn needs_completion_follows_selective_completion() {
        let sel = BindFlags::TRANSMIT | BindFlags::SELECTIVE_COMPLETION;
        assert!(OpFlags::empty().needs_completion(BindFlags::TRANSMIT));
        assert!(!OpFlags::empty().needs_completion(sel));
        assert!(OpFlags::COMPLETION.needs_completion(sel));
        assert!(OpFlags::DELIVERY_COMPLETE.needs_completion(sel));
        assert!(!OpFlags::INJECT.needs_completion(sel));
    }
}
