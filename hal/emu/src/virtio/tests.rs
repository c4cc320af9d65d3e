//! Register-level tests of the virtio-net-pci model's QEMU behaviours.

use ringfab_hal::{Mmio, Platform};

use super::{EmuVirtioNet, VirtioNetModelConfig, MODERN_BAR};

fn dev() -> EmuVirtioNet {
    EmuVirtioNet::new(VirtioNetModelConfig::default())
}

#[test]
fn capabilities_chain_msix_first_then_the_virtio_structures_in_bar4() {
    let d = dev();
    let p = d.platform();
    assert_eq!(p.config_read32(0), 0x1041_1af4);
    let mut at = p.config_read32(0x34) as u16;
    let mut seen = Vec::new();
    while at != 0 {
        let head = p.config_read32(at);
        let id = head as u8;
        if id == 0x09 {
            let ty = (head >> 24) as u8;
            seen.push((
                at,
                ty,
                p.config_read32(at + 4) as u8,
                p.config_read32(at + 8),
            ));
        } else {
            seen.push((at, id, 0, 0));
        }
        at = u16::from((head >> 8) as u8);
    }
    assert_eq!(
        seen,
        vec![
            (0x98, 0x11, 0, 0),
            (0x84, 5, 0, 0),
            (0x70, 2, MODERN_BAR, 0x3000),
            (0x60, 4, MODERN_BAR, 0x2000),
            (0x50, 3, MODERN_BAR, 0x1000),
            (0x40, 1, MODERN_BAR, 0),
        ]
    );
    assert_eq!(p.config_read32(0x70 + 16), 4, "notify_off_multiplier");
    assert!(p.bar(0).is_err(), "no legacy BAR with disable-legacy=on");
}

#[test]
fn a_common_field_answers_only_at_its_own_offset_whatever_the_width() {
    let d = dev();
    let bar = d.platform().bar(MODERN_BAR).unwrap();
    bar.write16(0x16, 1); // queue_select
    bar.write32(0x14, 0x0005_0001); // device_status only: QEMU switches on the address
    assert_eq!(bar.read8(0x14), 1);
    assert_eq!(
        bar.read16(0x16),
        1,
        "queue_select untouched by the status write"
    );
    assert_eq!(
        bar.read16(0x12),
        3,
        "num_queues: one pair and the control queue"
    );
    assert_eq!(bar.read16(0x18), 256, "queue_size of queue 1");
    bar.write16(0x16, 2);
    assert_eq!(bar.read16(0x18), 64, "the control queue");
    assert_eq!(bar.read16(0x1e), 2, "queue_notify_off is the index");
}

#[test]
fn features_ok_is_refused_when_access_platform_is_not_accepted() {
    let d = dev();
    let bar = d.platform().bar(MODERN_BAR).unwrap();
    bar.write8(0x14, 1 | 2);
    bar.write32(0x08, 1);
    bar.write32(0x0c, 1); // VERSION_1 only, no ACCESS_PLATFORM
    bar.write8(0x14, 1 | 2 | 8);
    assert_eq!(bar.read8(0x14), 3, "FEATURES_OK not set");
    bar.write32(0x0c, 1 | 2); // VERSION_1 | ACCESS_PLATFORM
    bar.write8(0x14, 1 | 2 | 8);
    assert_eq!(bar.read8(0x14), 11);
    bar.write32(0x0c, 0);
    assert_eq!(bar.read32(0x0c), 0, "the register keeps what was written");
    bar.write8(0x14, 0);
    assert_eq!(bar.read8(0x14), 0, "reset");
}

#[test]
fn queue_reset_reads_back_zero_and_forgets_the_vector_and_enable() {
    let d = dev();
    let bar = d.platform().bar(MODERN_BAR).unwrap();
    bar.write8(0x14, 1 | 2);
    bar.write32(0x08, 1);
    bar.write32(0x0c, 1 << 8 | 1 | 2); // RING_RESET (bit 40), VERSION_1, ACCESS_PLATFORM
    bar.write8(0x14, 1 | 2 | 8);
    bar.write16(0x16, 0);
    bar.write16(0x18, 16);
    bar.write16(0x1a, 2);
    assert_eq!(bar.read16(0x1a), 2);
    bar.write16(0x1a, 99);
    assert_eq!(
        bar.read16(0x1a),
        0xffff,
        "a vector past the table is refused"
    );
    bar.write16(0x1a, 1);
    bar.write16(0x1c, 1);
    assert_eq!(bar.read16(0x1c), 1);
    bar.write16(0x3a, 1);
    assert_eq!(bar.read16(0x3a), 0, "reset complete at once");
    assert_eq!(bar.read16(0x1c), 0);
    assert_eq!(bar.read16(0x1a), 0xffff);
    assert_eq!(bar.read16(0x18), 256, "size back to the default");
}
