//! Register-level tests of the 82574 model's QEMU behaviours that a driver must cope with,
//! driven through the platform exactly as a driver would, with no driver crate involved.

use std::time::Duration;

use ringfab_hal::{DmaRegion, MacAddr, Mmio, Platform};

use super::regs::*;
use crate::{E1000eModelConfig, EmuE1000e, Wire};

fn dev(mac: u8) -> EmuE1000e {
    EmuE1000e::new(E1000eModelConfig {
        mac: MacAddr([0x52, 0x54, 0, 0, 0, mac]),
        ..E1000eModelConfig::default()
    })
}

/// Programs transmit queue 0 with one descriptor sending `len` bytes from `buf`; returns the
/// ring memory.
fn one_tx(p: &crate::EmuPlatform, bar: &crate::EmuMmio, buf: u64, len: u16) -> crate::EmuDma {
    let ring = p.alloc_dma(4096).unwrap();
    ring.write_u64(0, buf);
    ring.write_u64(8, u64::from(len) | u64::from(TXD_EOP | TXD_RS | 1 << 25));
    bar.write32(txq(0, Q_DBAL), ring.iova().0 as u32);
    bar.write32(txq(0, Q_DBAH), (ring.iova().0 >> 32) as u32);
    bar.write32(txq(0, Q_DLEN), 8 * 16);
    bar.write32(TCTL, TCTL_EN);
    ring
}

#[test]
fn reset_leaves_the_link_up_and_the_mac_in_ral0_rah0() {
    let d = dev(0xa);
    let bar = d.platform().bar(0).unwrap();
    assert_ne!(bar.read32(STATUS) & STATUS_LU, 0, "QEMU's reset value");
    assert_eq!(bar.read32(RA), 0x0000_5452);
    assert_eq!(bar.read32(RA + 4), 0x0a00 | RAH_AV);
    assert_eq!(bar.read32(EITR0), 0, "EITR reads back the guest value");
    assert_eq!(d.platform().config_read32(0) >> 16, 0x10d3);
}

#[test]
fn a_queue_transmits_only_while_tarc_enable_is_set() {
    let wire = Wire::new();
    let d = dev(0xa);
    d.connect(&wire);
    d.advance_clock(Duration::from_millis(500));
    let p = d.platform();
    let bar = p.bar(0).unwrap();
    let buf = p.alloc_dma(4096).unwrap();
    buf.write_bytes(0, &[0xff; 60]);
    let ring = one_tx(&p, &bar, buf.iova().0, 60);
    let tarc = bar.read32(txq(0, Q_TARC));
    bar.write32(txq(0, Q_TARC), tarc & !TARC_ENABLE);
    bar.write32(txq(0, Q_DT), 1);
    assert_eq!((bar.read32(txq(0, Q_DH)), wire.stats().sent), (0, 0));
    bar.write32(txq(0, Q_TARC), tarc);
    bar.write32(txq(0, Q_DT), 1);
    assert_eq!((bar.read32(txq(0, Q_DH)), wire.stats().sent), (1, 1));
    // The write-back is the upper dword as written, DD ORed in.
    assert_eq!(ring.read_u32(12), DESC_DD);
    assert_eq!(bar.read32(GPTC), 1);
}

#[test]
fn eitr_resets_to_zero_and_a_second_message_is_not_held_back() {
    // §7.4.4: EITR is 0 after reset, throttling off; nothing moves the emulated clock here.
    let d = dev(0xa);
    let bar = d.platform().bar(0).unwrap();
    bar.write32(CTRL_EXT, CTRL_EXT_IAME);
    bar.write32(IVAR, (IVAR_VALID | 2) << 8); // TXQ0 → vector 2
    bar.write32(EIAC, ICR_TXQ0);
    bar.write32(IMS, ICR_TXQ0);
    let v = d.vector(2).unwrap();
    bar.write32(ICS, ICR_TXQ0);
    assert_eq!(v.notifications(), 1);
    bar.write32(ICS, ICR_TXQ0);
    assert_eq!(v.notifications(), 2, "no throttle timer holds the second");
}

#[test]
fn without_iame_an_auto_cleared_cause_masks_itself_and_eitr_throttles_the_vector() {
    let d = dev(0xa);
    d.advance_clock(Duration::from_millis(500));
    let p = d.platform();
    let bar = p.bar(0).unwrap();
    let buf = p.alloc_dma(4096).unwrap();
    let _ring = one_tx(&p, &bar, buf.iova().0, 60);
    bar.write32(IVAR, (IVAR_VALID | 2) << 8); // TXQ0 → vector 2
    bar.write32(EITR0 + 4 * 2, 1); // throttled (reset: 0, off), for at least 500 units
    bar.write32(EIAC, ICR_TXQ0);
    bar.write32(IMS, ICR_TXQ0);
    let v = d.vector(2).unwrap();
    bar.write32(txq(0, Q_DT), 1);
    assert_eq!(v.notifications(), 1);
    assert_eq!(
        bar.read32(IMS) & ICR_TXQ0,
        0,
        "auto-masked: CTRL_EXT.IAME is clear"
    );
    assert_eq!(bar.read32(ICR) & ICR_TXQ0, 0, "auto-cleared by EIAC");
    // The throttle timer (500 × 256 ns) notifies once more when it expires.
    d.advance_clock(Duration::from_micros(128));
    assert_eq!(v.notifications(), 2);
    // With IAME the mask stays; a second cause within 128 µs waits for the timer.
    bar.write32(CTRL_EXT, CTRL_EXT_IAME);
    bar.write32(IMS, ICR_TXQ0);
    bar.write32(ICS, ICR_TXQ0);
    assert_eq!(v.notifications(), 3);
    bar.write32(ICS, ICR_TXQ0);
    assert_eq!(v.notifications(), 3, "the second is postponed");
    assert_ne!(bar.read32(IMS) & ICR_TXQ0, 0);
    d.advance_clock(Duration::from_micros(128));
    assert_eq!(v.notifications(), 4);
}

#[test]
fn gprc_is_a_copy_of_tpr_as_in_qemu() {
    let d = dev(0xb);
    d.advance_clock(Duration::from_millis(500));
    let p = d.platform();
    let bar = p.bar(0).unwrap();
    let ring = p.alloc_dma(4096).unwrap();
    let bufs = p.alloc_dma(8 * 2048).unwrap();
    for i in 0..8u64 {
        ring.write_u64(16 * i as usize, bufs.iova().0 + 2048 * i);
    }
    bar.write32(rxq(0, Q_DBAL), ring.iova().0 as u32);
    bar.write32(rxq(0, Q_DBAH), (ring.iova().0 >> 32) as u32);
    bar.write32(rxq(0, Q_DLEN), 8 * 16);
    bar.write32(rxq(0, Q_DT), 7);
    bar.write32(RFCTL, RFCTL_EXTEN);
    bar.write32(RCTL, RCTL_EN | 1 << 15 | RCTL_SECRC);
    let frame = [0xffu8; 64];
    d.receive(&frame);
    assert_eq!(bar.read32(GPRC), 1);
    d.receive(&frame);
    assert_eq!(
        bar.read32(GPRC),
        2,
        "TPR was not read: the copy counts frame 1 again"
    );
    assert_eq!(bar.read32(TPR), 2);
    d.receive(&frame);
    assert_eq!(bar.read32(GPRC), 1);
    // Extended write-back: DD|EOP, packet type 0 (not IP), length 64.
    assert_eq!(ring.read_u64(8), 64 << 32 | u64::from(DESC_DD | RXD_EOP));
}
