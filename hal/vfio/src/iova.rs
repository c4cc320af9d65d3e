//! The IOVA allocator and what the IOMMU reports about its address space.
//!
//! Pure logic, no syscalls: [`IovaAllocator`] hands out page-aligned device addresses that lie
//! inside the usable ranges the IOMMU reported (VFIO_IOMMU_GET_INFO, capability
//! VFIO_IOMMU_TYPE1_INFO_CAP_IOVA_RANGE), never overlapping, and takes them back on free.
//! [`parse_iommu_info`] decodes the kernel's answer, trusting none of its offsets.

use std::collections::BTreeMap;

/// One usable IOVA range, both ends inclusive (as the kernel reports them: `end` may be
/// `u64::MAX`, which an exclusive end could not express).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct IovaRange {
    /// First usable address.
    pub start: u64,
    /// Last usable address (inclusive).
    pub last: u64,
}

/// What VFIO_IOMMU_GET_INFO told us.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct IommuInfo {
    /// Page sizes the IOMMU supports, as a bitmap (bit n set: 2^n-byte pages).
    pub page_sizes: u64,
    /// Usable ranges, or `None` on a kernel too old to report them (before 5.4).
    pub ranges: Option<Vec<IovaRange>>,
}

impl IommuInfo {
    /// The smallest IOMMU page size (4096 when the kernel reported none).
    pub fn min_page(&self) -> u64 {
        if self.page_sizes == 0 {
            4096
        } else {
            1 << self.page_sizes.trailing_zeros()
        }
    }

    /// The usable ranges, or, for a kernel that reports none, the conservative guess: the
    /// 39 bits of address every Intel VT-d implementation supports, less the x86 MSI window
    /// 0xfee00000–0xfeefffff that interrupt remapping reserves.
    pub fn ranges_or_default(&self) -> Vec<IovaRange> {
        self.ranges.clone().unwrap_or_else(|| {
            vec![
                IovaRange {
                    start: 0,
                    last: 0xfedf_ffff,
                },
                IovaRange {
                    start: 0xfef0_0000,
                    last: (1 << 39) - 1,
                },
            ]
        })
    }
}

/// `VFIO_IOMMU_INFO_PGSIZES`: `iova_pgsizes` is valid.
const INFO_PGSIZES: u32 = 1 << 0;
/// `VFIO_IOMMU_INFO_CAPS`: `cap_offset` is valid.
const INFO_CAPS: u32 = 1 << 1;
/// `VFIO_IOMMU_TYPE1_INFO_CAP_IOVA_RANGE`.
const CAP_IOVA_RANGE: u16 = 1;
/// `sizeof(struct vfio_iommu_type1_info)`: argsz, flags, iova_pgsizes, cap_offset, pad.
pub(crate) const INFO_LEN: usize = 24;

fn u16_at(buf: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(
        buf.get(at..at.checked_add(2)?)?.try_into().ok()?,
    ))
}
fn u32_at(buf: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(
        buf.get(at..at.checked_add(4)?)?.try_into().ok()?,
    ))
}
fn u64_at(buf: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(
        buf.get(at..at.checked_add(8)?)?.try_into().ok()?,
    ))
}

/// Decodes a `struct vfio_iommu_type1_info` and its capability chain from `buf`, the bytes the
/// kernel filled in. Offsets that point outside `buf`, or a chain that loops, end the walk
/// (`None` for a malformed buffer shorter than the fixed header).
pub fn parse_iommu_info(buf: &[u8]) -> Option<IommuInfo> {
    let flags = u32_at(buf, 4)?;
    let page_sizes = if flags & INFO_PGSIZES != 0 {
        u64_at(buf, 8)?
    } else {
        0
    };
    let mut ranges = None;
    if flags & INFO_CAPS != 0 {
        let mut next = u32_at(buf, 16)? as usize;
        // Each capability lies after the fixed header; offsets only grow in a well-formed
        // chain, and a bounded number of hops guards against one that loops.
        let mut hops = 0;
        while next >= INFO_LEN && hops < 64 {
            hops += 1;
            let (Some(id), Some(following)) = (u16_at(buf, next), u32_at(buf, next + 4)) else {
                break;
            };
            if id == CAP_IOVA_RANGE {
                let Some(count) = u32_at(buf, next + 8) else {
                    break;
                };
                let mut found = Vec::new();
                for i in 0..count as usize {
                    let at = next + 16 + i * 16;
                    match (u64_at(buf, at), u64_at(buf, at + 8)) {
                        (Some(start), Some(last)) if start <= last => {
                            found.push(IovaRange { start, last })
                        }
                        (Some(_), Some(_)) => {}
                        _ => break,
                    }
                }
                ranges = Some(found);
            }
            next = following as usize;
        }
    }
    Some(IommuInfo { page_sizes, ranges })
}

/// Why an allocation failed.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum IovaError {
    /// No free span of the usable ranges holds `len` bytes at the asked alignment.
    Exhausted {
        /// Bytes asked for (after rounding).
        len: u64,
    },
    /// A zero length, or an alignment that is not a power of two of at least a page.
    BadRequest,
}

/// Hands out device addresses inside the IOMMU's usable ranges.
///
/// Every allocation is a multiple of the page size and aligned to at least a page. Address 0 is
/// never handed out, so that a zeroed descriptor never points at memory the device may reach.
///
/// ```
/// use ringfab_vfio::iova::{IovaAllocator, IovaRange};
/// let mut a = IovaAllocator::new(&[IovaRange { start: 0, last: 0xffff }], 4096, 48);
/// let x = a.alloc(100, 4096).unwrap();
/// assert_eq!((x, a.alloc(4096, 4096).unwrap()), (0x1000, 0x2000));
/// a.free(x).unwrap();
/// assert_eq!(a.alloc(1, 4096).unwrap(), 0x1000, "freed space is reused");
/// ```
#[derive(Clone, Debug)]
pub struct IovaAllocator {
    page: u64,
    /// Free spans, start → last (inclusive), disjoint and not adjacent.
    free: BTreeMap<u64, u64>,
    /// Live allocations, start → length.
    used: BTreeMap<u64, u64>,
}

impl IovaAllocator {
    /// An allocator over `ranges`, clipped to `address_bits` bits (the IOMMU's or the device's
    /// address width, whichever is smaller) and shrunk to whole pages of `page` bytes (a power
    /// of two). Address 0's page is left out.
    ///
    /// # Panics
    /// If `page` is not a power of two.
    pub fn new(ranges: &[IovaRange], page: u64, address_bits: u32) -> IovaAllocator {
        assert!(
            page.is_power_of_two(),
            "page size {page} is not a power of two"
        );
        let limit = if address_bits >= 64 {
            u64::MAX
        } else {
            (1u64 << address_bits) - 1
        };
        let mut a = IovaAllocator {
            page,
            free: BTreeMap::new(),
            used: BTreeMap::new(),
        };
        for r in ranges {
            let start = align_up(r.start.max(page), page);
            let last = r.last.min(limit);
            let Some(start) = start else { continue };
            // Last whole page: round `last + 1` down to a page, minus one.
            let end_excl = (u128::from(last) + 1) & !u128::from(page - 1);
            if u128::from(start) < end_excl {
                a.insert_free(start, (end_excl - 1) as u64);
            }
        }
        a
    }

    /// Total free bytes.
    pub fn free_bytes(&self) -> u128 {
        self.free.iter().map(|(&s, &l)| u128::from(l - s) + 1).sum()
    }

    /// Allocates `len` bytes (rounded up to whole pages) aligned to `align` (a power of two; at
    /// least a page is used), lowest address first; returns the IOVA.
    ///
    /// # Errors
    /// [`IovaError::BadRequest`] for a zero `len` or an `align` not a power of two;
    /// [`IovaError::Exhausted`] when no free span fits.
    pub fn alloc(&mut self, len: u64, align: u64) -> Result<u64, IovaError> {
        if len == 0 || !align.is_power_of_two() {
            return Err(IovaError::BadRequest);
        }
        let align = align.max(self.page);
        let len = align_up(len, self.page).ok_or(IovaError::BadRequest)?;
        let found = self.free.iter().find_map(|(&s, &l)| {
            let a = align_up(s, align)?;
            let last = a.checked_add(len - 1)?;
            (a >= s && last <= l).then_some((s, l, a, last))
        });
        let (s, l, a, last) = found.ok_or(IovaError::Exhausted { len })?;
        self.free.remove(&s);
        if a > s {
            self.free.insert(s, a - 1);
        }
        if last < l {
            self.free.insert(last + 1, l);
        }
        self.used.insert(a, len);
        Ok(a)
    }

    /// Gives back the allocation that starts at `iova`; returns its length.
    ///
    /// # Errors
    /// `Err(())` if `iova` is not the start of a live allocation (a double free).
    #[allow(clippy::result_unit_err)] // Reason: the only failure is "not allocated"; nothing to carry.
    pub fn free(&mut self, iova: u64) -> Result<u64, ()> {
        let len = self.used.remove(&iova).ok_or(())?;
        self.insert_free(iova, iova + (len - 1));
        Ok(len)
    }

    /// Inserts `start..=last` into the free map, merging with adjacent or overlapping spans.
    fn insert_free(&mut self, mut start: u64, mut last: u64) {
        if let Some((&ps, &pl)) = self.free.range(..start).next_back() {
            if pl.saturating_add(1) >= start {
                self.free.remove(&ps);
                start = ps;
                last = last.max(pl);
            }
        }
        while let Some((&ns, &nl)) = self.free.range(start..).next() {
            if ns > last.saturating_add(1) {
                break;
            }
            self.free.remove(&ns);
            last = last.max(nl);
        }
        self.free.insert(start, last);
    }
}

fn align_up(v: u64, align: u64) -> Option<u64> {
    Some(v.checked_add(align - 1)? & !(align - 1))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    const PAGE: u64 = 4096;

    /// The ranges QEMU's intel-iommu reports (notes/qemu-vfio.md): a hole for the MSI window.
    pub(crate) fn qemu_ranges() -> Vec<IovaRange> {
        vec![
            IovaRange {
                start: 0,
                last: 0xfedf_ffff,
            },
            IovaRange {
                start: 0xfef0_0000,
                last: (1 << 48) - 1,
            },
        ]
    }

    #[test]
    fn allocations_are_page_aligned_disjoint_and_skip_page_zero() {
        let mut a = IovaAllocator::new(&qemu_ranges(), PAGE, 48);
        let x = a.alloc(1, PAGE).unwrap();
        let y = a.alloc(PAGE + 1, PAGE).unwrap();
        let z = a.alloc(10, PAGE).unwrap();
        assert_eq!(x, PAGE, "page 0 is never handed out");
        assert_eq!(y, 2 * PAGE);
        assert_eq!(z, 4 * PAGE, "y took two pages");
        for v in [x, y, z] {
            assert_eq!(v % PAGE, 0);
        }
    }

    #[test]
    fn larger_alignment_is_honoured_and_the_gap_stays_free() {
        let mut a = IovaAllocator::new(&qemu_ranges(), PAGE, 48);
        let x = a.alloc(PAGE, PAGE).unwrap();
        let big = a.alloc(2 << 20, 2 << 20).unwrap();
        assert_eq!(big % (2 << 20), 0);
        assert_eq!(big, 2 << 20);
        // The pages between x and the 2 MiB boundary are still there.
        assert_eq!(a.alloc(PAGE, PAGE).unwrap(), x + PAGE);
    }

    #[test]
    fn nothing_is_handed_out_inside_the_msi_hole() {
        // Only the ranges around the hole, small enough to exhaust: 0xfed00000..=0xfedfffff and
        // 0xfef00000..=0xfeffffff.
        let ranges = [
            IovaRange {
                start: 0xfed0_0000,
                last: 0xfedf_ffff,
            },
            IovaRange {
                start: 0xfef0_0000,
                last: 0xfeff_ffff,
            },
        ];
        let mut a = IovaAllocator::new(&ranges, PAGE, 48);
        let mut got = Vec::new();
        while let Ok(v) = a.alloc(64 * 1024, PAGE) {
            got.push(v);
        }
        assert_eq!(got.len(), 32, "two 1 MiB ranges of 64 KiB pieces");
        for v in got {
            let last = v + 64 * 1024 - 1;
            assert!(
                last < 0xfee0_0000 || v > 0xfeef_ffff,
                "{v:#x} touches the MSI window"
            );
        }
    }

    #[test]
    fn a_request_larger_than_the_first_range_goes_past_the_hole() {
        let ranges = [
            IovaRange {
                start: 0,
                last: 0xf_ffff,
            },
            IovaRange {
                start: 0x20_0000,
                last: 0x3f_ffff,
            },
        ];
        let mut a = IovaAllocator::new(&ranges, PAGE, 48);
        assert_eq!(a.alloc(0x10_0000, PAGE).unwrap(), 0x20_0000);
    }

    #[test]
    fn exhaustion_is_an_error_and_free_makes_room_again() {
        let ranges = [IovaRange {
            start: 0,
            last: 4 * PAGE - 1,
        }];
        let mut a = IovaAllocator::new(&ranges, PAGE, 48);
        let x = a.alloc(2 * PAGE, PAGE).unwrap();
        let y = a.alloc(PAGE, PAGE).unwrap();
        assert_eq!(
            a.alloc(PAGE, PAGE),
            Err(IovaError::Exhausted { len: PAGE }),
            "page 0 excluded: 3 pages usable"
        );
        assert_eq!(a.free(x), Ok(2 * PAGE));
        assert_eq!(a.alloc(2 * PAGE, PAGE).unwrap(), x, "reused");
        assert_eq!(a.free(y), Ok(PAGE));
        assert_eq!(a.free(y), Err(()), "double free is refused");
        assert_eq!(a.free(x + PAGE), Err(()), "not the start of an allocation");
    }

    #[test]
    fn freeing_everything_coalesces_back_to_the_original_spans() {
        let mut a = IovaAllocator::new(&qemu_ranges(), PAGE, 48);
        let before = a.free_bytes();
        let v: Vec<u64> = (1..20).map(|i| a.alloc(i * 1000, PAGE).unwrap()).collect();
        for (i, x) in v.iter().enumerate() {
            if i % 2 == 0 {
                a.free(*x).unwrap();
            }
        }
        for (i, x) in v.iter().enumerate() {
            if i % 2 == 1 {
                a.free(*x).unwrap();
            }
        }
        assert_eq!(a.free_bytes(), before);
        assert_eq!(a.free.len(), 2, "one span per usable range: {:x?}", a.free);
    }

    #[test]
    fn a_39_bit_iommu_caps_every_address_below_2_pow_39() {
        let mut a = IovaAllocator::new(&qemu_ranges(), PAGE, 39);
        let all = a.free_bytes();
        assert_eq!(
            all,
            (1u128 << 39) - PAGE as u128 - 0x10_0000,
            "less page 0 and the hole"
        );
        // A request that fits only above 2^39 fails.
        assert!(matches!(
            a.alloc(1 << 39, PAGE),
            Err(IovaError::Exhausted { .. })
        ));
        let big = a.alloc(1 << 38, 1 << 38).unwrap();
        assert_eq!(big, 1 << 38);
        assert!(big + (1 << 38) - 1 < 1 << 39);
    }

    #[test]
    fn a_range_ending_at_u64_max_does_not_overflow() {
        let ranges = [IovaRange {
            start: u64::MAX - 4 * PAGE + 1,
            last: u64::MAX,
        }];
        let mut a = IovaAllocator::new(&ranges, PAGE, 64);
        assert_eq!(a.free_bytes(), 4 * PAGE as u128);
        let x = a.alloc(4 * PAGE, PAGE).unwrap();
        assert_eq!(x, u64::MAX - 4 * PAGE + 1);
        assert!(a.alloc(PAGE, PAGE).is_err());
        a.free(x).unwrap();
        assert_eq!(a.free_bytes(), 4 * PAGE as u128);
    }

    #[test]
    fn zero_length_and_bad_alignment_are_refused() {
        let mut a = IovaAllocator::new(&qemu_ranges(), PAGE, 48);
        assert_eq!(a.alloc(0, PAGE), Err(IovaError::BadRequest));
        assert_eq!(a.alloc(PAGE, 3 * PAGE), Err(IovaError::BadRequest));
    }

    #[test]
    fn unaligned_range_edges_shrink_to_whole_pages() {
        let ranges = [IovaRange {
            start: 0x1001,
            last: 0x4ffe,
        }];
        let a = IovaAllocator::new(&ranges, PAGE, 48);
        // 0x2000..=0x3fff: the partial pages at both ends are dropped.
        assert_eq!(a.free_bytes(), 2 * PAGE as u128);
    }

    fn info_bytes(flags: u32, pgsizes: u64, caps: &[(u16, Vec<u8>)]) -> Vec<u8> {
        let mut b = vec![0u8; INFO_LEN];
        b[4..8].copy_from_slice(&flags.to_ne_bytes());
        b[8..16].copy_from_slice(&pgsizes.to_ne_bytes());
        let mut at = INFO_LEN;
        if !caps.is_empty() {
            b[16..20].copy_from_slice(&(at as u32).to_ne_bytes());
        }
        for (i, (id, body)) in caps.iter().enumerate() {
            let next = if i + 1 == caps.len() {
                0
            } else {
                at + 8 + body.len()
            };
            b.extend_from_slice(&id.to_ne_bytes());
            b.extend_from_slice(&1u16.to_ne_bytes());
            b.extend_from_slice(&(next as u32).to_ne_bytes());
            b.extend_from_slice(body);
            at = b.len();
        }
        let total = b.len() as u32;
        b[0..4].copy_from_slice(&total.to_ne_bytes());
        b
    }

    fn range_cap(ranges: &[(u64, u64)]) -> Vec<u8> {
        let mut body = Vec::new();
        body.extend_from_slice(&(ranges.len() as u32).to_ne_bytes());
        body.extend_from_slice(&0u32.to_ne_bytes());
        for (s, l) in ranges {
            body.extend_from_slice(&s.to_ne_bytes());
            body.extend_from_slice(&l.to_ne_bytes());
        }
        body
    }

    #[test]
    fn iommu_info_yields_page_sizes_and_the_iova_ranges_past_other_caps() {
        let buf = info_bytes(
            INFO_PGSIZES | INFO_CAPS,
            0x4020_1000,
            &[
                (2, vec![0u8; 8]), // migration cap: skipped
                (
                    CAP_IOVA_RANGE,
                    range_cap(&[(0, 0xfedf_ffff), (0xfef0_0000, (1 << 48) - 1)]),
                ),
            ],
        );
        let info = parse_iommu_info(&buf).unwrap();
        assert_eq!(info.min_page(), 4096);
        assert_eq!(info.ranges.unwrap(), qemu_ranges());
    }

    #[test]
    fn iommu_info_without_caps_falls_back_to_39_bits_around_the_msi_window() {
        let info = parse_iommu_info(&info_bytes(INFO_PGSIZES, 0x1000, &[])).unwrap();
        assert_eq!(info.ranges, None);
        let r = info.ranges_or_default();
        assert_eq!(r[1].last, (1 << 39) - 1);
        assert_eq!(r[0].last, 0xfedf_ffff);
    }

    #[test]
    fn a_truncated_or_looping_cap_chain_is_survived() {
        let mut buf = info_bytes(
            INFO_CAPS,
            0,
            &[(
                CAP_IOVA_RANGE,
                range_cap(&[(0, 0xffff), (0x10000, 0x1ffff)]),
            )],
        );
        buf.truncate(buf.len() - 4); // second range cut short
        let info = parse_iommu_info(&buf).unwrap();
        assert_eq!(info.ranges.unwrap().len(), 1);
        // A cap whose `next` points at itself.
        let mut buf = info_bytes(INFO_CAPS, 0, &[(7, vec![0u8; 8])]);
        buf[INFO_LEN + 4..INFO_LEN + 8].copy_from_slice(&(INFO_LEN as u32).to_ne_bytes());
        assert_eq!(parse_iommu_info(&buf).unwrap().ranges, None);
        assert_eq!(parse_iommu_info(&[0u8; 4]), None);
    }
}
