//! The two ways `fi_cq_readerr` hands back provider error data (`err_data`, `err_data_size`).
//!
//! `fi_cq(3)`, *err_data_size*:
//!
//! * **The caller supplies a buffer** (`err_data_size` > 0 on input, API ≥ 1.5): the provider
//!   copies as much of its error data as fits into that buffer and sets `err_data_size` to the
//!   bytes copied. `err_data` keeps pointing at the caller's buffer.
//! * **It does not** (`err_data_size` = 0, or API < 1.5 where the field does not exist): the
//!   caller's `err_data` is ignored; the provider points `err_data` at a buffer *it* owns and
//!   sets `err_data_size` to the data's length. That buffer stays valid until the next read
//!   call on the CQ (`read`, `readfrom`, `readerr`, `sread`, `sreadfrom`) — the CQ owns one
//!   buffer of [`ERR_DATA_MAX`] bytes and overwrites it on the next error.
//!
//! With no error data at all, the first path reports 0 bytes copied and the second sets
//! `err_data` to `NULL` and `err_data_size` to 0, as libfabric's util CQ leaves them.
//!
//! [`deliver_err_data`] is the rule as a safe function; [`write_err_entry_raw`] applies it to a C
//! caller's `struct fi_cq_err_entry` of whichever size the caller's API version has.

use core::ptr::{self, addr_of};

use super::entry::{BufAddr, ErrEntry, ErrEntryAbi};

/// Bytes of error data a CQ can hold for the provider-owned path: enough for ringfab's largest
/// error data — a raw source address (Ethernet + IPv4/UDP + context) for `FI_EADDRNOTAVAIL`,
/// or a NIC's raw status words.
pub const ERR_DATA_MAX: usize = 64;

/// Where [`deliver_err_data`] put the error data.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ErrDataOut<'p> {
    /// Copied into the caller's buffer: this many bytes (the new `err_data_size`; may be less
    /// than the data if the buffer was smaller). `err_data` stays the caller's.
    Copied(usize),
    /// In the CQ's own buffer: `err_data` becomes this slice's address (`NULL` if empty) and
    /// `err_data_size` its length.
    Provider(&'p [u8]),
}

/// Delivers the provider's error bytes `data` to a caller of `fi_cq_readerr`.
///
/// `caller` is the caller's buffer: `Some` with a non-empty slice for "`err_data_size` > 0",
/// `None` or an empty slice for "`err_data_size` = 0". `cq_buf` is the CQ's own buffer, used
/// only in the second case; data longer than [`ERR_DATA_MAX`] is cut to it there (ringfab never
/// produces such data).
pub fn deliver_err_data<'p>(
    data: &[u8],
    caller: Option<&mut [u8]>,
    cq_buf: &'p mut [u8; ERR_DATA_MAX],
) -> ErrDataOut<'p> {
    match caller {
        Some(buf) if !buf.is_empty() => {
            let n = data.len().min(buf.len());
            buf[..n].copy_from_slice(&data[..n]);
            ErrDataOut::Copied(n)
        }
        _ => {
            let n = data.len().min(ERR_DATA_MAX);
            cq_buf[..n].copy_from_slice(&data[..n]);
            ErrDataOut::Provider(&cq_buf[..n])
        }
    }
}

/// Writes error entry `entry` into a C caller's `struct fi_cq_err_entry` at `dst`, delivering
/// `data` as `err_data` by the rules of [`deliver_err_data`].
///
/// Reads the caller's `err_data` and `err_data_size` first (only for
/// [`ErrEntryAbi::V1_5`] and later; before 1.5 the caller cannot supply a buffer), then writes
/// exactly `abi.size()` bytes: every field of `entry` that layout has, with `err_data` and
/// `err_data_size` replaced by where the data went. `entry`'s own `err_data`/`err_data_size`
/// are ignored. Nothing past `abi.size()` is touched, so a 72- or 80-byte caller buffer is safe.
///
/// A caller that passes `err_data_size` > 0 with a `NULL` `err_data` is treated as passing
/// no buffer (size 0).
///
/// # Safety
/// * `dst` must be valid for reads and writes of `abi.size()` bytes (no alignment needed).
/// * If the caller's `err_data_size` (API ≥ 1.5) is non-zero and its `err_data` non-`NULL`,
///   `err_data` must be valid for writes of `err_data_size` bytes and must not overlap `dst`,
///   `data` or `cq_buf`.
/// * After return, the caller's `err_data` may point into `cq_buf`; that pointer is valid only
///   while `cq_buf` is neither moved nor written — the CQ keeps it until its next read call.
pub unsafe fn write_err_entry_raw(
    dst: *mut ErrEntry,
    abi: ErrEntryAbi,
    entry: &ErrEntry,
    data: &[u8],
    cq_buf: &mut [u8; ERR_DATA_MAX],
) {
    let (user_ptr, user_size) = if abi.has_err_data_size() {
        // SAFETY: `dst` is valid for reads of `abi.size()` bytes, which for V1_5 and later
        // includes `err_data` (offset 64) and `err_data_size` (offset 72); read_unaligned needs
        // no alignment.
        unsafe {
            (
                ptr::read_unaligned(addr_of!((*dst).err_data)),
                ptr::read_unaligned(addr_of!((*dst).err_data_size)),
            )
        }
    } else {
        (BufAddr::NULL, 0)
    };

    let caller = if user_size > 0 && !user_ptr.is_null() {
        // SAFETY: the caller guarantees that a non-NULL `err_data` with non-zero size is
        // writable for `err_data_size` bytes and overlaps nothing else used here.
        Some(unsafe { core::slice::from_raw_parts_mut(user_ptr.0 as *mut u8, user_size) })
    } else {
        None
    };

    let mut out = *entry;
    match deliver_err_data(data, caller, cq_buf) {
        ErrDataOut::Copied(n) => {
            out.err_data = user_ptr;
            out.err_data_size = n;
        }
        ErrDataOut::Provider(s) => {
            out.err_data = if s.is_empty() {
                BufAddr::NULL
            } else {
                BufAddr(s.as_ptr() as usize)
            };
            out.err_data_size = s.len();
        }
    }

    // SAFETY: `out` is a live local of size_of::<ErrEntry>() >= abi.size() bytes; `dst` is
    // valid for writes of abi.size() bytes and cannot overlap a local. A byte copy needs no
    // alignment.
    unsafe {
        ptr::copy_nonoverlapping(
            ptr::from_ref(&out).cast::<u8>(),
            dst.cast::<u8>(),
            abi.size(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cq::entry::OpContext;
    use core::mem::size_of;

    const DATA: [u8; 6] = [0x02, 0x00, 0x5e, 0x10, 0x20, 0x30];

    #[test]
    fn caller_buffer_receives_a_copy_and_the_byte_count() {
        let mut cq = [0u8; ERR_DATA_MAX];
        let mut user = [0xaau8; 16];
        let out = deliver_err_data(&DATA, Some(&mut user), &mut cq);
        assert_eq!(out, ErrDataOut::Copied(6));
        assert_eq!(&user[..6], &DATA);
        assert_eq!(user[6], 0xaa, "nothing written past the data");
        assert_eq!(cq, [0; ERR_DATA_MAX], "CQ buffer untouched");
    }

    #[test]
    fn caller_buffer_smaller_than_data_truncates_to_its_size() {
        let mut cq = [0u8; ERR_DATA_MAX];
        let mut user = [0u8; 4];
        assert_eq!(
            deliver_err_data(&DATA, Some(&mut user), &mut cq),
            ErrDataOut::Copied(4)
        );
        assert_eq!(user, DATA[..4]);
    }

    #[test]
    fn no_caller_buffer_points_at_the_cq_buffer() {
        let mut cq = [0u8; ERR_DATA_MAX];
        let cq_addr = cq.as_ptr();
        let out = deliver_err_data(&DATA, None, &mut cq);
        let ErrDataOut::Provider(s) = out else {
            panic!("expected provider buffer, got {out:?}")
        };
        assert_eq!(s, &DATA);
        assert_eq!(s.as_ptr(), cq_addr);
    }

    #[test]
    fn empty_caller_buffer_means_size_zero() {
        let mut cq = [0u8; ERR_DATA_MAX];
        let mut user: [u8; 0] = [];
        assert_eq!(
            deliver_err_data(&DATA, Some(&mut user), &mut cq),
            ErrDataOut::Provider(&DATA)
        );
    }

    #[test]
    fn zero_length_data_copies_nothing_on_both_paths() {
        let mut cq = [0u8; ERR_DATA_MAX];
        let mut user = [0xaau8; 8];
        assert_eq!(
            deliver_err_data(&[], Some(&mut user), &mut cq),
            ErrDataOut::Copied(0)
        );
        assert_eq!(user, [0xaa; 8]);
        assert_eq!(
            deliver_err_data(&[], None, &mut cq),
            ErrDataOut::Provider(&[])
        );
    }

    #[test]
    fn provider_buffer_cuts_oversized_data() {
        let mut cq = [0u8; ERR_DATA_MAX];
        let big = [7u8; ERR_DATA_MAX + 10];
        let out = deliver_err_data(&big, None, &mut cq);
        assert_eq!(out, ErrDataOut::Provider(&[7u8; ERR_DATA_MAX]));
    }

    fn sample() -> ErrEntry {
        ErrEntry {
            op_context: OpContext(0x1234),
            len: 60,
            err: 99,
            prov_errno: 7,
            src_addr: 42,
            ..ErrEntry::default()
        }
    }

    /// A C caller's buffer: room for the largest entry plus a canary tail.
    #[repr(C, align(8))]
    struct CBuf([u8; 96]);

    impl CBuf {
        fn with_input(err_data: usize, err_data_size: usize) -> CBuf {
            let mut b = CBuf([0xcc; 96]);
            b.0[64..72].copy_from_slice(&err_data.to_ne_bytes());
            b.0[72..80].copy_from_slice(&err_data_size.to_ne_bytes());
            b
        }
        fn usize_at(&self, off: usize) -> usize {
            usize::from_ne_bytes(self.0[off..off + 8].try_into().unwrap())
        }
    }

    #[test]
    fn raw_entry_with_caller_buffer_copies_into_it() {
        let mut user = [0u8; 4];
        let mut c = CBuf::with_input(user.as_mut_ptr() as usize, user.len());
        let mut cq = [0u8; ERR_DATA_MAX];
        // SAFETY: `c` holds 96 bytes >= 88; `user` is a live 4-byte buffer apart from the rest.
        unsafe {
            write_err_entry_raw(
                c.0.as_mut_ptr().cast(),
                ErrEntryAbi::V1_20,
                &sample(),
                &DATA,
                &mut cq,
            );
        }
        assert_eq!(user, DATA[..4]);
        assert_eq!(
            c.usize_at(64),
            user.as_ptr() as usize,
            "err_data stays the caller's"
        );
        assert_eq!(c.usize_at(72), 4, "err_data_size = bytes copied");
        assert_eq!(c.usize_at(80), 42, "src_addr written for API >= 1.20");
        assert_eq!(c.usize_at(0), 0x1234);
        assert_eq!(&c.0[88..], &[0xcc; 8], "nothing past the entry");
    }

    #[test]
    fn raw_entry_with_size_zero_points_at_the_cq_buffer() {
        let mut c = CBuf::with_input(0xdead_0000, 0);
        let mut cq = [0u8; ERR_DATA_MAX];
        // SAFETY: `c` holds 96 bytes >= 80; size 0 means the caller's pointer is not used.
        unsafe {
            write_err_entry_raw(
                c.0.as_mut_ptr().cast(),
                ErrEntryAbi::V1_5,
                &sample(),
                &DATA,
                &mut cq,
            );
        }
        assert_eq!(c.usize_at(64), cq.as_ptr() as usize);
        assert_eq!(c.usize_at(72), DATA.len());
        assert_eq!(&cq[..6], &DATA);
        assert_eq!(
            &c.0[80..],
            &[0xcc; 16],
            "an 80-byte caller gets no src_addr"
        );
    }

    #[test]
    fn raw_entry_before_api_1_5_ignores_the_caller_pointer_and_writes_72_bytes() {
        let mut user = [0u8; 8];
        let mut c = CBuf::with_input(user.as_mut_ptr() as usize, 0xcccc_cccc_cccc_cccc);
        let mut cq = [0u8; ERR_DATA_MAX];
        // SAFETY: `c` holds 96 bytes >= 72; before 1.5 the caller's pointer is never written.
        unsafe {
            write_err_entry_raw(
                c.0.as_mut_ptr().cast(),
                ErrEntryAbi::V1_0,
                &sample(),
                &DATA,
                &mut cq,
            );
        }
        assert_eq!(user, [0; 8]);
        assert_eq!(c.usize_at(64), cq.as_ptr() as usize);
        assert_eq!(&c.0[72..], &[0xcc; 24], "no err_data_size before API 1.5");
        assert_eq!(ErrEntryAbi::V1_0.size(), 72);
        assert_eq!(size_of::<ErrEntry>(), 88);
    }

    #[test]
    fn raw_entry_without_error_data_gives_null_and_zero() {
        let mut c = CBuf::with_input(0, 0);
        let mut cq = [0u8; ERR_DATA_MAX];
        // SAFETY: `c` holds 96 bytes >= 88; no caller buffer.
        unsafe {
            write_err_entry_raw(
                c.0.as_mut_ptr().cast(),
                ErrEntryAbi::V1_20,
                &sample(),
                &[],
                &mut cq,
            );
        }
        assert_eq!(c.usize_at(64), 0);
        assert_eq!(c.usize_at(72), 0);
    }

    #[test]
    fn raw_entry_with_size_but_null_pointer_uses_the_cq_buffer() {
        let mut c = CBuf::with_input(0, 16);
        let mut cq = [0u8; ERR_DATA_MAX];
        // SAFETY: `c` holds 96 bytes >= 88; the NULL caller pointer is never dereferenced.
        unsafe {
            write_err_entry_raw(
                c.0.as_mut_ptr().cast(),
                ErrEntryAbi::V1_20,
                &sample(),
                &DATA,
                &mut cq,
            );
        }
        assert_eq!(c.usize_at(64), cq.as_ptr() as usize);
        assert_eq!(c.usize_at(72), 6);
    }
}
