//! The error model: one enum, and [`Error::errno`] giving libfabric's `FI_*` value.

use core::fmt;

/// `Result` with ringfab's [`Error`].
pub type Result<T = ()> = core::result::Result<T, Error>;

/// Which fixed capacity of a domain an open or a registration found used up.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub enum Capacity {
    /// `Capacities::queues`: hardware queues (endpoints, contexts, shared contexts).
    Queues,
    /// `Capacities::cqs`: completion queues.
    Cqs,
    /// `Capacities::cq_size`: a CQ asked for more entries than an aux queue holds.
    CqSize,
    /// `Capacities::mrs`: memory registrations.
    Mrs,
    /// `Capacities::avs`: address vectors.
    Avs,
    /// `Capacities::av_entries`: addresses in one address vector.
    AvEntries,
    /// The NIC's interrupt vectors (a blocking CQ takes one of its own).
    Vectors,
    /// UDP ports bound at once by a domain's plain-UDP endpoints.
    Ports,
}

impl Capacity {
    /// The name of the capacity (or NIC resource) that bounds it.
    pub const fn name(self) -> &'static str {
        match self {
            Capacity::Queues => "queues (hardware queues)",
            Capacity::Cqs => "cqs (completion queues)",
            Capacity::CqSize => "cq_size (entries of one completion queue)",
            Capacity::Mrs => "mrs (memory registrations)",
            Capacity::Avs => "avs (address vectors)",
            Capacity::AvEntries => "av_entries (addresses of one address vector)",
            Capacity::Vectors => "the NIC's interrupt vectors",
            Capacity::Ports => "UDP ports bound in one domain",
        }
    }
}

/// A ringfab failure, named after the libfabric error it reports.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub enum Error {
    /// `FI_EAGAIN`: nothing available now, or no room now; try again.
    Again,
    /// `FI_EAVAIL`: an error completion is waiting to be read with `readerr`.
    Avail,
    /// `FI_EINVAL`: an invalid argument.
    Inval,
    /// `FI_ENOSYS`: not implemented.
    NoSys,
    /// `FI_EOPNOTSUPP`: operation not supported.
    OpNotSupp,
    /// `FI_EBUSY`: the object is in use (bound, or with open children).
    Busy,
    /// `FI_ENOMEM`: out of memory (a DMA allocation the platform refused).
    NoMem,
    /// `FI_ENOMEM`: a fixed capacity of the domain's tables ([`crate::storage`]) is used up;
    /// the [`Capacity`] says which.
    Full(Capacity),
    /// `FI_EOVERRUN`: the queue overran; entries were lost.
    Overrun,
    /// `FI_ECANCELED`: the operation was cancelled.
    Canceled,
    /// `FI_ETRUNC`: the message was truncated.
    Trunc,
    /// `FI_EOPBADSTATE`: the object is not in a state that allows the operation.
    OpBadState,
    /// `FI_ENOCQ`: the endpoint has no completion queue bound.
    NoCq,
    /// `FI_ENOAV`: the endpoint has no address vector bound.
    NoAv,
    /// `FI_ENOPROTOOPT`: unknown option.
    NoProtoOpt,
    /// `FI_EADDRNOTAVAIL`: the address is not known.
    AddrNotAvail,
    /// `FI_EBADFLAGS`: flags not supported.
    BadFlags,
    /// `FI_EDOMAIN`: objects from different domains.
    Domain,
    /// `FI_ETOOSMALL`: the provided buffer is too small.
    TooSmall,
    /// `FI_EMSGSIZE`: message too long.
    MsgSize,
    /// `FI_ETIMEDOUT`: a wait ended because its timeout passed (`fi_cntr_wait`).
    TimedOut,
    /// `FI_EIO`: the device failed.
    Io,
    /// `FI_EHOSTUNREACH`: no route to the destination (an IPv4 destination off the subnet
    /// with no gateway configured, or a next hop ARP could not resolve).
    HostUnreach,
    /// `FI_EADDRINUSE`: the UDP port is bound already (`EpAttr::port`).
    AddrInUse,
    /// `FI_ENODATA`: there is nothing of that kind to return (`fi_control(FI_GETWAIT)` on a
    /// queue without a wait object an application can use).
    NoData,
    /// A device or platform control-path failure, with its cause (`FI_EIO`).
    Device(ringfab_hal::Error),
}

impl Error {
    /// libfabric's positive error number for this error (`FI_EAGAIN` = 11, …), as `fi_errno.h`
    /// defines them: Linux's POSIX values for the ones it borrows, 256 and up for its own.
    pub const fn errno(&self) -> i32 {
        match self {
            Error::Again => 11,
            Error::Avail => 259,
            Error::Inval => 22,
            Error::NoSys => 38,
            Error::OpNotSupp => 95,
            Error::Busy => 16,
            Error::NoMem | Error::Full(_) => 12,
            Error::Overrun => 268,
            Error::Canceled => 125,
            Error::Trunc => 265,
            Error::OpBadState => 258,
            Error::NoCq => 263,
            Error::NoAv => 267,
            Error::NoProtoOpt => 92,
            Error::AddrNotAvail => 99,
            Error::BadFlags => 260,
            Error::Domain => 262,
            Error::TooSmall => 257,
            Error::MsgSize => 90,
            Error::TimedOut => 110,
            Error::NoData => 61,
            Error::HostUnreach => 113,
            Error::AddrInUse => 98,
            Error::Io | Error::Device(_) => 5,
        }
    }
}

impl From<ringfab_hal::Error> for Error {
    fn from(e: ringfab_hal::Error) -> Self {
        Error::Device(e)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = match self {
            Error::Again => "resource temporarily unavailable",
            Error::Avail => "error available",
            Error::Inval => "invalid argument",
            Error::NoSys => "function not implemented",
            Error::OpNotSupp => "operation not supported",
            Error::Busy => "device or resource busy",
            Error::NoMem => "cannot allocate memory",
            Error::Overrun => "queue has been overrun",
            Error::Canceled => "operation canceled",
            Error::Trunc => "truncation error",
            Error::OpBadState => "operation not permitted in current state",
            Error::NoCq => "missing or unavailable event queue",
            Error::NoAv => "missing or unavailable address vector",
            Error::NoProtoOpt => "protocol not available",
            Error::AddrNotAvail => "cannot assign requested address",
            Error::BadFlags => "flags not supported",
            Error::Domain => "invalid resource domain",
            Error::TooSmall => "provided buffer is too small",
            Error::MsgSize => "message too long",
            Error::TimedOut => "connection timed out",
            Error::Io => "input/output error",
            Error::NoData => "no data available",
            Error::HostUnreach => "no route to host",
            Error::AddrInUse => "address already in use",
            Error::Device(e) => return write!(f, "device error: {e}"),
            Error::Full(c) => return write!(f, "storage full: {}", c.name()),
        };
        f.write_str(text)
    }
}

impl core::error::Error for Error {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errno_matches_libfabric_fi_errno_values() {
        assert_eq!(Error::Again.errno(), 11);
        assert_eq!(Error::Avail.errno(), 259);
        assert_eq!(Error::OpBadState.errno(), 258);
        assert_eq!(Error::Overrun.errno(), 268);
        assert_eq!(Error::Trunc.errno(), 265);
        assert_eq!(Error::NoCq.errno(), 263);
        assert_eq!(Error::NoAv.errno(), 267);
        assert_eq!(Error::HostUnreach.errno(), 113);
        assert_eq!(Error::AddrInUse.errno(), 98);
        assert_eq!(Error::TimedOut.errno(), 110);
        assert_eq!(Error::NoData.errno(), 61);
        assert_eq!(Error::Device(ringfab_hal::Error::ResetTimeout).errno(), 5);
        assert_eq!(Error::Full(Capacity::Cqs).errno(), 12);
    }
}
