//! The 82574's descriptor layout for the shared rings of `ringfab-ring`: legacy transmit
//! descriptors (§7.2.10.1) and extended receive descriptors (§7.1.4.2), as the codecs of
//! [`desc`](crate::desc) define them. Everything else about the rings — shadow, report-status
//! policy, reclaim, flush, the fast paths — is `ringfab-ring`'s.

use ringfab_hal::RssInfo;
use ringfab_ring::{Format, RxWriteback, TxWriteback};

use crate::desc::{self, rx, RxReadRepr, RxWritebackRepr, TxRepr, RXSTAT, RXWB0, RXWB1, TXD};

/// The 82574's legacy transmit and extended receive descriptors: the [`Format`] of its queues
/// ([`E1000eQueue`](crate::E1000eQueue)).
pub enum Extended {}

/// Receive write-back status bits the fast path looks at: a clean frame has exactly DD and EOP
/// of these (no error, no undefined bit). (A `const` mask rather than tock-registers'
/// `matches_all`: it spans several fields, and `FieldValue`'s `+` is not a `const fn`.)
const RX_CLEAN: u32 = RXSTAT::DD::SET.value | RXSTAT::EOP::SET.value;

impl Format for Extended {
    #[inline(always)]
    fn tx_data(addr: u64, len: u16, eop: bool, rs: bool, _frame_len: u32) -> [u64; 2] {
        // A legacy descriptor has no frame length: each says only its own buffer's.
        TxRepr { addr, len, eop, rs }.emit()
    }

    #[inline(always)]
    fn tx_with_rs(word1: u64) -> u64 {
        TXD::RS::SET.modify(word1)
    }

    #[inline(always)]
    fn tx_writeback(word1: u64) -> TxWriteback {
        match desc::TxWriteback::parse(word1) {
            desc::TxWriteback::Pending => TxWriteback::Pending,
            desc::TxWriteback::Done => TxWriteback::Done,
            desc::TxWriteback::Bad(raw) => TxWriteback::Bad(raw),
        }
    }

    #[inline(always)]
    fn rx_read(addr: u64) -> [u64; 2] {
        RxReadRepr { addr }.emit()
    }

    const RX_CLEAN_MASK: u32 = RX_CLEAN | rx::ERRORS | rx::UNDEFINED;
    const RX_CLEAN: u32 = RX_CLEAN;

    #[inline(always)]
    fn rx_done(word1: u64) -> bool {
        RXSTAT::DD.is_set(word1 as u32)
    }

    #[inline(always)]
    fn rx_len(word1: u64) -> u32 {
        // PKT_LEN is 16 bits wide.
        RXWB1::PKT_LEN.read(word1) as u32
    }

    #[inline(always)]
    fn rx_hashed(word0: u64) -> bool {
        RXWB0::RSS_TYPE.is_set(word0)
    }

    #[inline(always)]
    fn rx_rss(word0: u64) -> Option<RssInfo> {
        RxWritebackRepr::parse([word0, 0]).rss()
    }

    #[inline]
    fn rx_writeback(word0: u64, word1: u64) -> RxWriteback {
        let wb = RxWritebackRepr::parse([word0, word1]);
        RxWriteback {
            len: u32::from(wb.len),
            eop: wb.eop(),
            errors: wb.errors(),
            undefined: wb.has_undefined_bits(),
            rss: wb.rss(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringfab_hal::RssHashKind;

    #[test]
    fn the_format_writes_legacy_transmit_descriptors_and_reads_extended_writebacks() {
        let [addr, w1] = Extended::tx_data(0x1000, 60, true, false, 60);
        assert_eq!(addr, 0x1000);
        assert_eq!(w1 & 0xFFFF, 60);
        assert!(!TXD::DEXT.is_set(w1), "legacy: DEXT clear");
        assert!(TXD::RS.is_set(Extended::tx_with_rs(w1)));
        assert_eq!(Extended::tx_writeback(w1), TxWriteback::Pending);
        assert_eq!(
            Extended::tx_writeback(w1 | TXD::DD::SET.value),
            TxWriteback::Done
        );
        assert_eq!(Extended::rx_read(0x2000), [0x2000, 0]);
        // MRQ RSS type 1 is TCP/IPv4 on the 82574 (the 82576's 1 is the same, its 7 is UDP).
        let wb = RxWritebackRepr {
            status_error: RX_CLEAN,
            len: 98,
            vlan: 0,
            rss_type: rx::RSS_TCP_IPV4,
            queue: 1,
            rss_hash: 0xABCD,
        };
        let [w0, w1] = wb.emit();
        assert!(Extended::rx_done(w1) && Extended::rx_hashed(w0));
        assert_eq!(w1 as u32 & Extended::RX_CLEAN_MASK, Extended::RX_CLEAN);
        assert_eq!(Extended::rx_len(w1), 98);
        let rss = Some(RssInfo {
            hash: 0xABCD,
            kind: RssHashKind::Ipv4Tcp,
        });
        assert_eq!(Extended::rx_rss(w0), rss);
        assert_eq!(
            Extended::rx_writeback(w0, w1),
            RxWriteback {
                len: 98,
                eop: true,
                errors: 0,
                undefined: false,
                rss
            }
        );
    }
}
