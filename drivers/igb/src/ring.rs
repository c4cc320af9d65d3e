//! The 82576's descriptor layout for the shared rings of `ringfab-ring`: advanced transmit data
//! descriptors (§7.2.2.3) and advanced one-buffer receive descriptors (§7.1.5), as the codecs of
//! [`desc`](crate::desc) define them. Everything else about the rings — shadow, report-status
//! policy, reclaim, flush, the fast paths — is `ringfab-ring`'s.

use ringfab_hal::{RssInfo, RxChecksum, TxChecksum};
use ringfab_ring::{Format, RxWriteback, TxWriteback};

use crate::desc::{
    self, rx, RxReadRepr, RxWritebackRepr, TxContextRepr, TxDataRepr, RXSTAT, RXWB0, RXWB1, TXD,
};

/// The 82576's advanced descriptors: the [`Format`] of its queues ([`IgbQueue`](crate::IgbQueue)).
pub enum Advanced {}

/// Receive write-back status bits the fast path looks at: a clean frame has exactly DD and EOP
/// of these (no error, no undefined bit). (A `const` mask rather than tock-registers'
/// `matches_all`: it spans several fields, and `FieldValue`'s `+` is not a `const fn`.)
const RX_CLEAN: u32 = RXSTAT::DD::SET.value | RXSTAT::EOP::SET.value;

impl Format for Advanced {
    #[inline(always)]
    fn tx_data(addr: u64, len: u16, eop: bool, rs: bool, frame_len: u32) -> [u64; 2] {
        TxDataRepr {
            addr,
            len,
            eop,
            rs,
            paylen: frame_len,
        }
        .emit()
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

    #[inline]
    fn tx_checksum_context(checksum: TxChecksum) -> Option<[u64; 2]> {
        TxContextRepr::for_checksum(checksum.start, checksum.offset).map(|c| c.emit())
    }

    const TX_CHECKSUM_DATA: u64 = TXD::TXSM::SET.value;

    #[inline(always)]
    fn rx_read(addr: u64) -> [u64; 2] {
        RxReadRepr {
            pkt_addr: addr,
            hdr_addr: 0,
        }
        .emit()
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

    #[inline(always)]
    fn rx_checksum(word1: u64) -> RxChecksum {
        // The fast path took this write-back: IPE and L4E are clear.
        let status = word1 as u32;
        RxChecksum::verified(RXSTAT::IPCS.is_set(status), RXSTAT::L4I.is_set(status))
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
            checksum: wb.checksum(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringfab_hal::RssHashKind;

    #[test]
    fn the_format_writes_advanced_transmit_descriptors_and_reads_advanced_writebacks() {
        let [addr, w1] = Advanced::tx_data(0x1000, 14, false, false, 114);
        assert_eq!(addr, 0x1000);
        assert_eq!(TXD::DTALEN.read(w1), 14);
        assert_eq!(TXD::PAYLEN.read(w1), 114, "the whole frame's length");
        assert!(TXD::DEXT.is_set(w1) && !TXD::EOP.is_set(w1));
        assert!(TXD::RS.is_set(Advanced::tx_with_rs(w1)));
        assert_eq!(Advanced::tx_writeback(w1), TxWriteback::Pending);
        assert_eq!(
            Advanced::tx_writeback(w1 | TXD::DD::SET.value),
            TxWriteback::Done
        );
        assert_eq!(Advanced::rx_read(0x2000), [0x2000, 0]);
        let wb = RxWritebackRepr {
            status_error: RX_CLEAN | 1 << 24,
            len: 98,
            vlan: 0,
            rss_type: rx::RSS_UDP_IPV4,
            pkt_type: 0,
            rss_hash: 0xABCD,
        };
        let [w0, w1] = wb.emit();
        assert!(Advanced::rx_done(w1) && Advanced::rx_hashed(w0));
        assert_ne!(
            w1 as u32 & Advanced::RX_CLEAN_MASK,
            Advanced::RX_CLEAN,
            "CE"
        );
        assert_eq!(Advanced::rx_len(w1), 98);
        let rss = Some(RssInfo {
            hash: 0xABCD,
            kind: RssHashKind::Ipv4Udp,
        });
        assert_eq!(Advanced::rx_rss(w0), rss);
        assert_eq!(
            Advanced::rx_writeback(w0, w1),
            RxWriteback {
                len: 98,
                eop: true,
                errors: 1 << 24,
                undefined: false,
                rss,
                checksum: RxChecksum::NONE,
            }
        );
    }

    #[test]
    fn checksum_status_marks_what_was_checked_right_and_a_wrong_one_is_no_frame_error() {
        let ipcs = RXSTAT::IPCS::SET.value;
        let l4i = RXSTAT::L4I::SET.value | RXSTAT::UDPCS::SET.value;
        let w1 = |status: u32| u64::from(RX_CLEAN | status) | 60 << 32;
        assert_eq!(w1(ipcs | l4i) as u32 & Advanced::RX_CLEAN_MASK, RX_CLEAN);
        assert_eq!(
            Advanced::rx_checksum(w1(ipcs | l4i)),
            RxChecksum::verified(true, true)
        );
        assert_eq!(Advanced::rx_checksum(w1(0)), RxChecksum::NONE);
        let bad_l4 = w1(ipcs | l4i | RXSTAT::L4E::SET.value);
        assert_ne!(bad_l4 as u32 & Advanced::RX_CLEAN_MASK, RX_CLEAN);
        let wb = Advanced::rx_writeback(0, bad_l4);
        assert_eq!(
            (wb.errors, wb.checksum),
            (0, RxChecksum::verified(true, false))
        );
        let wb = Advanced::rx_writeback(0, w1(ipcs | l4i | RXSTAT::IPE::SET.value));
        assert_eq!(
            (wb.errors, wb.checksum),
            (0, RxChecksum::verified(false, true))
        );
        let wb = Advanced::rx_writeback(0, w1(1 << 31));
        assert_eq!(wb.errors, 1 << 31, "RXE stays a frame error");
    }

    #[test]
    fn a_checksum_context_places_the_l4_header_and_its_data_descriptors_carry_txsm() {
        use crate::desc::{L4Type, TxContextRepr};
        let udp = TxChecksum {
            start: 34,
            offset: TxChecksum::UDP,
        };
        let ctx = Advanced::tx_checksum_context(udp).expect("UDP's field");
        assert_eq!(
            TxContextRepr::parse(ctx),
            Some(TxContextRepr {
                maclen: 14,
                iplen: 20,
                l4: L4Type::Udp
            })
        );
        let tcp = TxChecksum {
            start: 54,
            offset: TxChecksum::TCP,
        };
        assert_eq!(
            TxContextRepr::parse(Advanced::tx_checksum_context(tcp).unwrap()).map(|c| c.l4),
            Some(L4Type::Tcp)
        );
        let odd = TxChecksum {
            start: 34,
            offset: 4,
        };
        assert_eq!(Advanced::tx_checksum_context(odd), None, "no L4T has it");
        let [_, d] = Advanced::tx_data(0x1000, 60, true, true, 60);
        let done = d | Advanced::TX_CHECKSUM_DATA | TXD::DD::SET.value;
        assert!(TXD::TXSM.is_set(done));
        assert_eq!(Advanced::tx_writeback(done), TxWriteback::Done);
    }
}
