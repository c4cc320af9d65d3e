//! The 82574's descriptor layout for the shared rings of `ringfab-ring`: legacy transmit
//! descriptors (§7.2.10.1) and extended receive descriptors (§7.1.4.2), as the codecs of
//! [`desc`](crate::desc) define them. Everything else about the rings — shadow, report-status
//! policy, reclaim, flush, the fast paths — is `ringfab-ring`'s.

use ringfab_hal::{RssInfo, RxChecksum, TxChecksum};
use ringfab_ring::{Format, RxWriteback, TxWriteback};

use crate::desc::{
    self, rx, RxReadRepr, RxWritebackRepr, TxContextRepr, TxRepr, RXSTAT, RXWB0, RXWB1, TXD,
};

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

    #[inline]
    fn tx_checksum_context(checksum: TxChecksum) -> Option<[u64; 2]> {
        TxContextRepr::for_checksum(checksum.start, checksum.offset).map(|c| c.emit())
    }

    const TX_CHECKSUM_DATA: u64 = desc::TX_CHECKSUM_DATA;

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

    #[inline(always)]
    fn rx_checksum(word1: u64) -> RxChecksum {
        // The fast path took this write-back: IPE and TCPE are clear.
        let status = word1 as u32;
        RxChecksum::verified(RXSTAT::IPCS.is_set(status), RXSTAT::TCPCS.is_set(status))
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
                rss,
                checksum: RxChecksum::NONE,
            }
        );
    }

    #[test]
    fn checksum_status_marks_what_was_checked_right_and_a_wrong_one_is_no_frame_error() {
        let ipcs = RXSTAT::IPCS::SET.value;
        let tcpcs = RXSTAT::TCPCS::SET.value | RXSTAT::UDPCS::SET.value;
        let w1 = |status: u32| u64::from(RX_CLEAN | status) | 60 << 32;
        // A clean write-back, as the fast path takes it: both bits read from word 1.
        assert_eq!(w1(ipcs | tcpcs) as u32 & Extended::RX_CLEAN_MASK, RX_CLEAN);
        assert_eq!(
            Extended::rx_checksum(w1(ipcs | tcpcs)),
            RxChecksum::verified(true, true)
        );
        assert_eq!(
            Extended::rx_checksum(w1(ipcs)),
            RxChecksum::verified(true, false)
        );
        // TCPE or IPE: off the fast path, a good frame with that checksum unmarked.
        let bad_l4 = w1(ipcs | tcpcs | RXSTAT::TCPE::SET.value);
        assert_ne!(bad_l4 as u32 & Extended::RX_CLEAN_MASK, RX_CLEAN);
        let wb = Extended::rx_writeback(0, bad_l4);
        assert_eq!(
            (wb.errors, wb.checksum),
            (0, RxChecksum::verified(true, false))
        );
        let wb = Extended::rx_writeback(0, w1(ipcs | tcpcs | RXSTAT::IPE::SET.value));
        assert_eq!(
            (wb.errors, wb.checksum),
            (0, RxChecksum::verified(false, true))
        );
        // A CRC error stays one.
        let wb = Extended::rx_writeback(0, w1(ipcs | 1 << 24));
        assert_eq!(wb.errors, 1 << 24);
    }

    #[test]
    fn a_checksum_context_is_tucss_and_tucso_and_its_data_descriptors_are_extended_with_txsm() {
        let udp = TxChecksum {
            start: 34,
            offset: TxChecksum::UDP,
        };
        let [w0, w1] = Extended::tx_checksum_context(udp).expect("fits a byte each");
        assert_eq!(
            TxContextRepr::parse([w0, w1]),
            Some(TxContextRepr {
                tucss: 34,
                tucso: 40,
                tcp: false
            })
        );
        let far = TxChecksum {
            start: 250,
            offset: TxChecksum::TCP,
        };
        assert_eq!(
            Extended::tx_checksum_context(far),
            None,
            "TUCSO past a byte"
        );
        let [addr, d] = Extended::tx_data(0x1000, 60, true, true, 60);
        let ext = crate::desc::TxExtRepr::parse([addr, d | Extended::TX_CHECKSUM_DATA])
            .expect("an extended data descriptor");
        assert_eq!((ext.len, ext.eop, ext.rs), (60, true, true));
        assert!(crate::desc::TXD_EXT::TXSM.is_set(d | Extended::TX_CHECKSUM_DATA));
        // The write-back of such a descriptor (QEMU echoes POPTS) is a clean DD.
        let done = d | Extended::TX_CHECKSUM_DATA | TXD::DD::SET.value;
        assert_eq!(Extended::tx_writeback(done), TxWriteback::Done);
    }
}
