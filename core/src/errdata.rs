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
//! [`deliver_err_data`] is the rule as a safe function;
//! [`write_err_entry_raw`](crate::cq::write_err_entry_raw) applies it to a C
//! caller's `struct fi_cq_err_entry` of whichever size the caller's API version has (an `unsafe`
//! function, defined with core's other promises in `raw.rs`).

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
