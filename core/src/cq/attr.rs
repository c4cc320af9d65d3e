//! Completion-queue attributes (`struct fi_cq_attr`) and the rules that turn a request into the
//! queue ringfab will actually build.
//!
//! [`CqAttr::validate`] is the whole of `fi_cq_open`'s argument checking. It never silently
//! changes a value the application chose: a request ringfab cannot honour is an error, and
//! every value the provider may choose (size 0, `FI_CQ_FORMAT_UNSPEC`, `FI_WAIT_UNSPEC`) is
//! reported back in the [`ResolvedCqAttr`]. The rules, checked in this order (the first one that
//! fails gives the error):
//!
//! | # | rule | outcome |
//! |---|---|---|
//! | 1 | a flag bit other than `FI_AFFINITY` | [`Error::BadFlags`] |
//! | 2 | `size` 0 | the limits' default (1024 unless the platform says otherwise), capped at its maximum |
//! | 3 | `size` above [`CqLimits::max_size`] | [`Error::Inval`] (as usNIC does; never shrunk) |
//! | 4 | `FI_AFFINITY` and `signaling_vector` < 0 or ≥ the CPU count | [`Error::Inval`] |
//! | 5 | no `FI_AFFINITY` | `signaling_vector` ignored, whatever it holds |
//! | 6 | `FI_WAIT_SET` without a wait set | [`Error::Inval`] (as libfabric's util CQ) |
//! | 7 | `FI_WAIT_SET` with a wait set, where the limits say wait sets do not exist | [`Error::NoSys`] |
//! | 8 | `FI_WAIT_FD` on a platform without file descriptors | [`Error::NoSys`] |
//! | 9 | `FI_WAIT_POLLFD` | [`Error::NoSys`] (valid value, not implemented; as counters) |
//! | 10 | a wait set given with a wait object other than `FI_WAIT_SET` | ignored (`fi_cq(3)`) |
//! | 11 | `wait_cond` with `FI_WAIT_NONE` | ignored, resolved to `FI_CQ_COND_NONE` (`fi_cq(3)`) |
//!
//! Values a C caller passes as integers go through [`CqFormat::from_raw`],
//! [`WaitObj::from_raw`] and [`WaitCond::from_raw`], which refuse numbers libfabric does not
//! define with [`Error::Inval`], and flags through
//! [`CqFlags::from_bits_retain`](crate::flags::CqFlags::from_bits_retain), so that rule 1 sees
//! unknown bits.
//!
//! libfabric's util code answers every bad attribute with `-FI_EINVAL`; ringfab keeps `Inval`
//! for bad values but answers unknown flag bits with `FI_EBADFLAGS` ("flags not supported"),
//! which says what is wrong, and valid-but-unimplemented wait objects with `FI_ENOSYS`, as its
//! counters do, so an application can fall back to another wait object.

pub use crate::cntr::WaitObj;
use crate::entry::CqFormat;
use crate::flags::CqFlags;
use crate::{Error, Result};

/// `enum fi_cq_wait_cond`: when a blocking read's wait is satisfied.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
#[repr(u32)]
pub enum WaitCond {
    /// `FI_CQ_COND_NONE`: any new entry satisfies the wait.
    #[default]
    None = 0,
    /// `FI_CQ_COND_THRESHOLD`: `sread`'s `cond` is a `size_t` count of entries to wait for
    /// (a hint: `fi_cq(3)` lets the provider wake earlier).
    Threshold = 1,
}

impl WaitCond {
    /// The condition for libfabric's `enum fi_cq_wait_cond` value `raw`.
    ///
    /// # Errors
    /// [`Error::Inval`] for a value libfabric does not define.
    pub const fn from_raw(raw: u32) -> Result<WaitCond> {
        match raw {
            0 => Ok(WaitCond::None),
            1 => Ok(WaitCond::Threshold),
            _ => Err(Error::Inval),
        }
    }

    /// libfabric's number for this condition.
    pub const fn raw(self) -> u32 {
        self as u32
    }
}

/// Names a wait set (`struct fid_wait *`) for [`WaitObj::Set`]: the
/// [`id`](crate::cq::WaitSet::id) of a [`WaitSet`](crate::cq::WaitSet). Ids are never reused.
/// A CQ naming one is opened through that set ([`WaitSet::open_cq`](crate::cq::WaitSet::open_cq));
/// anywhere else the id references no set at hand and the open is [`Error::Inval`].
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct WaitSetId(pub u32);

/// What the platform and device can give a completion queue; the bounds [`CqAttr::validate`]
/// checks against.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct CqLimits {
    /// The largest `size` a CQ can honour (at least 1).
    pub max_size: usize,
    /// The size used when the application asks for 0 (capped at `max_size`).
    pub default_size: usize,
    /// Logical CPUs interrupts can be steered to (`signaling_vector` must be below it), or
    /// `None` if the platform does not know; then only negative vectors are refused.
    pub cpus: Option<u32>,
    /// Whether the platform's wait handles are file descriptors (VFIO eventfds), so that
    /// `FI_WAIT_FD` can be honoured. `Domain::open_cq` validates with `true` and then checks
    /// the CQ's actual handle ([`Wait::raw`](crate::hal::Wait::raw)), with the same outcome.
    pub fd_wait: bool,
    /// Whether wait sets exist (they do: [`WaitSet`](crate::cq::WaitSet)).
    pub wait_sets: bool,
}

impl CqLimits {
    /// The default for [`default_size`](Self::default_size): 1024 entries, the size
    /// libfabric's util CQ picks for a size of 0.
    pub const DEFAULT_SIZE: usize = 1024;
}

impl Default for CqLimits {
    /// `max_size` 65536, `default_size` 1024, CPU count unknown, no FD waits, wait sets.
    fn default() -> Self {
        CqLimits {
            max_size: 1 << 16,
            default_size: Self::DEFAULT_SIZE,
            cpus: None,
            fd_wait: false,
            wait_sets: true,
        }
    }
}

/// A completion queue's attributes (`struct fi_cq_attr`). The default is libfabric's: size 0
/// (provider's choice), no flags, `FI_CQ_FORMAT_UNSPEC`, `FI_WAIT_NONE`, `FI_CQ_COND_NONE`.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct CqAttr {
    /// Minimum number of entries the CQ must hold; 0 lets ringfab choose.
    pub size: usize,
    /// `FI_AFFINITY` or nothing.
    pub flags: CqFlags,
    /// The entry format.
    pub format: CqFormat,
    /// How a thread waits for completions.
    pub wait_obj: WaitObj,
    /// With `FI_AFFINITY`: the logical CPU the CQ's interrupts should target.
    pub signaling_vector: i32,
    /// When a blocking read's wait is satisfied.
    pub wait_cond: WaitCond,
    /// The wait set for [`WaitObj::Set`]; ignored otherwise.
    pub wait_set: Option<WaitSetId>,
}

impl CqAttr {
    /// Checks the attributes against `limits` and resolves every value left to the provider.
    /// The rules and their order are in the [module documentation](self).
    ///
    /// # Errors
    /// * [`Error::BadFlags`]: a flag other than `FI_AFFINITY`.
    /// * [`Error::Inval`]: `size` above `limits.max_size`; `FI_AFFINITY` with a negative or
    ///   out-of-range `signaling_vector`; `FI_WAIT_SET` without a wait set; a `limits` whose
    ///   `max_size` is 0.
    /// * [`Error::NoSys`]: `FI_WAIT_POLLFD`; `FI_WAIT_FD` where the platform has no file
    ///   descriptors; `FI_WAIT_SET` where `limits` says wait sets do not exist.
    ///
    /// # Example
    /// ```
    /// use ringfab::cq::{CqAttr, CqFormat, CqLimits};
    /// use ringfab::flags::CqFlags;
    /// use ringfab::{Error, WaitObj};
    ///
    /// let attr = CqAttr { wait_obj: WaitObj::Yield, ..CqAttr::default() };
    /// let r = attr.validate(CqLimits::default())?;
    /// assert_eq!(r.size(), 1024); // size 0: the default
    /// assert_eq!(r.format(), CqFormat::Context); // FI_CQ_FORMAT_UNSPEC
    /// assert!(r.sread_allowed());
    ///
    /// let bad = CqAttr { flags: CqFlags::from_bits_retain(1 << 43), ..attr };
    /// assert_eq!(bad.validate(CqLimits::default()), Err(Error::BadFlags));
    /// # Ok::<(), Error>(())
    /// ```
    pub fn validate(&self, limits: CqLimits) -> Result<ResolvedCqAttr> {
        if self.flags.unknown() != 0 {
            return Err(Error::BadFlags);
        }

        let size = match self.size {
            0 => limits.default_size.min(limits.max_size),
            n if n > limits.max_size => return Err(Error::Inval),
            n => n,
        };
        if size == 0 {
            return Err(Error::Inval);
        }

        let affinity = if self.flags.contains(CqFlags::AFFINITY) {
            let cpu = u32::try_from(self.signaling_vector).map_err(|_| Error::Inval)?;
            if limits.cpus.is_some_and(|n| cpu >= n) {
                return Err(Error::Inval);
            }
            Some(cpu)
        } else {
            None
        };

        let wait_set = match self.wait_obj {
            WaitObj::Set => match self.wait_set {
                None => return Err(Error::Inval),
                Some(_) if !limits.wait_sets => return Err(Error::NoSys),
                some => some,
            },
            WaitObj::Fd if !limits.fd_wait => return Err(Error::NoSys),
            WaitObj::PollFd => return Err(Error::NoSys),
            _ => None,
        };

        let wait_cond = match self.wait_obj {
            WaitObj::None => WaitCond::None,
            _ => self.wait_cond,
        };

        Ok(ResolvedCqAttr {
            size,
            format: self.format.resolve(),
            wait_obj: self.wait_obj,
            wait_cond,
            wait_set,
            affinity,
        })
    }
}

/// The completion queue ringfab will build: [`CqAttr`] after [`validate`](CqAttr::validate),
/// with every provider choice made.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct ResolvedCqAttr {
    size: usize,
    format: CqFormat,
    wait_obj: WaitObj,
    wait_cond: WaitCond,
    wait_set: Option<WaitSetId>,
    affinity: Option<u32>,
}

impl ResolvedCqAttr {
    /// Entries the CQ holds: the size asked for, or the default for 0. Never rounded.
    pub const fn size(&self) -> usize {
        self.size
    }

    /// The entry format; never [`CqFormat::Unspec`].
    pub const fn format(&self) -> CqFormat {
        self.format
    }

    /// The wait object, as requested. [`WaitObj::Unspec`] stays `Unspec`: the CQ's vector's
    /// wait handle (eventfd under VFIO, a condition variable in emu) serves it — or spinning,
    /// when the NIC has no vector free — and `fi_cq(3)` does not promise that it can be
    /// retrieved (`crate::cq::wait` has the table).
    pub const fn wait_obj(&self) -> WaitObj {
        self.wait_obj
    }

    /// The wait condition; [`WaitCond::None`] whenever the wait object is `FI_WAIT_NONE`.
    pub const fn wait_cond(&self) -> WaitCond {
        self.wait_cond
    }

    /// The wait set, only for [`WaitObj::Set`].
    pub const fn wait_set(&self) -> Option<WaitSetId> {
        self.wait_set
    }

    /// `signaling_vector`, only with `FI_AFFINITY`: the MSI-X vector the CQ takes when the NIC
    /// has it and no other CQ holds it (as verbs passes it on as the completion vector);
    /// otherwise a hint that is ignored, as `fi_cq(3)` allows.
    pub const fn affinity(&self) -> Option<u32> {
        self.affinity
    }

    /// Whether `sread`/`sreadfrom` may be called: not for `FI_WAIT_NONE` or `FI_WAIT_SET`
    /// (`fi_cq(3)`).
    pub const fn sread_allowed(&self) -> bool {
        !matches!(self.wait_obj, WaitObj::None | WaitObj::Set)
    }

    /// Whether `signal` may be called: only with a wait object (not `FI_WAIT_NONE`).
    pub const fn signal_allowed(&self) -> bool {
        !matches!(self.wait_obj, WaitObj::None)
    }

    /// Whether blocking needs a platform wait handle at open (`Unspec`, `Fd`, `MutexCond`);
    /// `FI_WAIT_YIELD` spins and needs none.
    pub const fn needs_wait_handle(&self) -> bool {
        matches!(
            self.wait_obj,
            WaitObj::Unspec | WaitObj::Fd | WaitObj::MutexCond
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> CqLimits {
        CqLimits {
            max_size: 4096,
            default_size: 1024,
            cpus: Some(4),
            fd_wait: true,
            wait_sets: false,
        }
    }

    fn ok(attr: CqAttr) -> ResolvedCqAttr {
        attr.validate(limits()).unwrap()
    }

    fn err(attr: CqAttr) -> Error {
        attr.validate(limits()).unwrap_err()
    }

    #[test]
    fn wait_values_match_libfabric_and_reject_unknown() {
        assert_eq!(WaitCond::from_raw(0), Ok(WaitCond::None));
        assert_eq!(WaitCond::from_raw(1), Ok(WaitCond::Threshold));
        assert_eq!(WaitCond::from_raw(2), Err(Error::Inval));
        assert_eq!(WaitCond::Threshold.raw(), 1);
        for (raw, w) in [
            (0, WaitObj::None),
            (1, WaitObj::Unspec),
            (2, WaitObj::Set),
            (3, WaitObj::Fd),
            (4, WaitObj::MutexCond),
            (5, WaitObj::Yield),
            (6, WaitObj::PollFd),
        ] {
            assert_eq!(WaitObj::from_raw(raw), Ok(w));
        }
        assert_eq!(WaitObj::from_raw(7), Err(Error::Inval));
    }

    #[test]
    fn default_attr_is_libfabrics_default() {
        let a = CqAttr::default();
        assert_eq!(a.size, 0);
        assert_eq!(a.format, CqFormat::Unspec);
        assert_eq!(a.wait_obj, WaitObj::None);
        assert_eq!(a.wait_cond, WaitCond::None);
        assert!(a.flags.is_empty());
    }

    #[test]
    fn size_zero_takes_the_default() {
        assert_eq!(ok(CqAttr::default()).size(), 1024);
        assert_eq!(
            CqAttr::default()
                .validate(CqLimits::default())
                .unwrap()
                .size(),
            CqLimits::DEFAULT_SIZE
        );
    }

    #[test]
    fn size_zero_default_is_capped_at_the_maximum() {
        let l = CqLimits {
            max_size: 256,
            ..limits()
        };
        assert_eq!(CqAttr::default().validate(l).unwrap().size(), 256);
    }

    #[test]
    fn size_is_used_exactly_as_asked() {
        let a = CqAttr {
            size: 1000,
            ..CqAttr::default()
        };
        assert_eq!(ok(a).size(), 1000);
        let max = CqAttr {
            size: 4096,
            ..CqAttr::default()
        };
        assert_eq!(ok(max).size(), 4096);
    }

    #[test]
    fn size_above_maximum_is_inval_not_shrunk() {
        let a = CqAttr {
            size: 4097,
            ..CqAttr::default()
        };
        assert_eq!(err(a), Error::Inval);
    }

    #[test]
    fn limits_with_no_room_refuse_every_cq() {
        let l = CqLimits {
            max_size: 0,
            ..limits()
        };
        assert_eq!(CqAttr::default().validate(l), Err(Error::Inval));
    }

    #[test]
    fn unknown_flag_bits_are_badflags() {
        let a = CqAttr {
            flags: CqFlags::from_bits_retain(1 << 43), // FI_PEER
            ..CqAttr::default()
        };
        assert_eq!(err(a), Error::BadFlags);
        // Checked before anything else: a bad size with bad flags still reports the flags.
        let b = CqAttr {
            size: usize::MAX,
            ..a
        };
        assert_eq!(err(b), Error::BadFlags);
    }

    #[test]
    fn affinity_with_valid_vector_is_kept() {
        let a = CqAttr {
            flags: CqFlags::AFFINITY,
            signaling_vector: 3,
            ..CqAttr::default()
        };
        assert_eq!(ok(a).affinity(), Some(3));
    }

    #[test]
    fn affinity_with_negative_or_out_of_range_vector_is_inval() {
        for v in [-1, i32::MIN, 4, i32::MAX] {
            let a = CqAttr {
                flags: CqFlags::AFFINITY,
                signaling_vector: v,
                ..CqAttr::default()
            };
            assert_eq!(err(a), Error::Inval, "vector {v}");
        }
    }

    #[test]
    fn affinity_with_unknown_cpu_count_refuses_only_negative_vectors() {
        let l = CqLimits {
            cpus: None,
            ..limits()
        };
        let mut a = CqAttr {
            flags: CqFlags::AFFINITY,
            signaling_vector: 1000,
            ..CqAttr::default()
        };
        assert_eq!(a.validate(l).unwrap().affinity(), Some(1000));
        a.signaling_vector = -1;
        assert_eq!(a.validate(l), Err(Error::Inval));
    }

    #[test]
    fn signaling_vector_is_ignored_without_affinity() {
        let a = CqAttr {
            signaling_vector: -7,
            ..CqAttr::default()
        };
        assert_eq!(ok(a).affinity(), None);
    }

    #[test]
    fn unspec_format_resolves_to_context_in_validate() {
        assert_eq!(ok(CqAttr::default()).format(), CqFormat::Context);
        let t = CqAttr {
            format: CqFormat::Tagged,
            ..CqAttr::default()
        };
        assert_eq!(ok(t).format(), CqFormat::Tagged);
    }

    #[test]
    fn wait_set_without_a_set_is_inval() {
        let a = CqAttr {
            wait_obj: WaitObj::Set,
            ..CqAttr::default()
        };
        assert_eq!(err(a), Error::Inval);
    }

    #[test]
    fn wait_set_with_a_set_is_nosys_until_wait_sets_exist() {
        let a = CqAttr {
            wait_obj: WaitObj::Set,
            wait_set: Some(WaitSetId(1)),
            ..CqAttr::default()
        };
        assert_eq!(err(a), Error::NoSys);
        let l = CqLimits {
            wait_sets: true,
            ..limits()
        };
        let r = a.validate(l).unwrap();
        assert_eq!(r.wait_set(), Some(WaitSetId(1)));
        assert!(!r.sread_allowed());
        assert!(r.signal_allowed());
    }

    #[test]
    fn wait_set_is_ignored_unless_wait_obj_is_set() {
        let a = CqAttr {
            wait_obj: WaitObj::Fd,
            wait_set: Some(WaitSetId(9)),
            ..CqAttr::default()
        };
        assert_eq!(ok(a).wait_set(), None);
    }

    #[test]
    fn pollfd_is_nosys() {
        let a = CqAttr {
            wait_obj: WaitObj::PollFd,
            ..CqAttr::default()
        };
        assert_eq!(err(a), Error::NoSys);
    }

    #[test]
    fn wait_fd_needs_a_platform_with_file_descriptors() {
        let a = CqAttr {
            wait_obj: WaitObj::Fd,
            ..CqAttr::default()
        };
        assert!(ok(a).needs_wait_handle());
        let l = CqLimits {
            fd_wait: false,
            ..limits()
        };
        assert_eq!(a.validate(l), Err(Error::NoSys));
    }

    #[test]
    fn wait_cond_is_ignored_with_wait_none() {
        let a = CqAttr {
            wait_obj: WaitObj::None,
            wait_cond: WaitCond::Threshold,
            ..CqAttr::default()
        };
        let r = ok(a);
        assert_eq!(r.wait_cond(), WaitCond::None);
        assert!(!r.sread_allowed());
        assert!(!r.signal_allowed());
    }

    #[test]
    fn threshold_is_kept_with_a_wait_object() {
        let a = CqAttr {
            wait_obj: WaitObj::Unspec,
            wait_cond: WaitCond::Threshold,
            ..CqAttr::default()
        };
        let r = ok(a);
        assert_eq!(r.wait_cond(), WaitCond::Threshold);
        assert_eq!(r.wait_obj(), WaitObj::Unspec);
        assert!(r.sread_allowed());
    }

    #[test]
    fn sread_is_allowed_only_with_a_blocking_wait_object() {
        for (w, sread, handle) in [
            (WaitObj::None, false, false),
            (WaitObj::Unspec, true, true),
            (WaitObj::Fd, true, true),
            (WaitObj::MutexCond, true, true),
            (WaitObj::Yield, true, false),
        ] {
            let r = ok(CqAttr {
                wait_obj: w,
                ..CqAttr::default()
            });
            assert_eq!(r.sread_allowed(), sread, "{w:?}");
            assert_eq!(r.needs_wait_handle(), handle, "{w:?}");
        }
    }
}
