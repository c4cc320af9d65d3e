//! What core's integration tests share: two emulated 82576 on one wire with the igb driver, the
//! MAC addresses they use, memory for registration, and a clock for waits.
#![allow(dead_code, reason = "each test file uses the part it needs")]

use std::time::{Duration, Instant};

use ringfab::hal::MacAddr;
use ringfab_emu::{EmuIgb, EmuPlatform, IgbModelConfig, Wire};
use ringfab_igb::Igb;

/// NIC A's station address.
pub(crate) const MAC_A: MacAddr = MacAddr([0x52, 0x54, 0x00, 0x00, 0x00, 0x0A]);
/// NIC B's station address.
pub(crate) const MAC_B: MacAddr = MacAddr([0x52, 0x54, 0x00, 0x00, 0x00, 0x0B]);

/// The igb driver on the emulated 82576.
pub(crate) type Igb0 = Igb<EmuPlatform>;

/// Two emulated 82576 on one wire, brought up by the igb driver.
pub(crate) struct Pair {
    pub(crate) wire: Wire,
    pub(crate) a: EmuIgb,
    pub(crate) b: EmuIgb,
    pub(crate) nic_a: Igb0,
    pub(crate) nic_b: Igb0,
}

/// An emulated 82576 with station address `mac`, plugged into `wire`.
pub(crate) fn device(mac: MacAddr, wire: &Wire) -> EmuIgb {
    let mut config = IgbModelConfig::default();
    config.mac = mac;
    let dev = EmuIgb::new(config);
    dev.connect(wire);
    dev
}

/// A and B on a fresh wire.
pub(crate) fn pair() -> Pair {
    let wire = Wire::new();
    let (a, b) = (device(MAC_A, &wire), device(MAC_B, &wire));
    let nic_a = Igb::new(a.platform()).unwrap();
    let nic_b = Igb::new(b.platform()).unwrap();
    Pair {
        wire,
        a,
        b,
        nic_a,
        nic_b,
    }
}

/// Memory that lives for ever, as safe registration asks.
pub(crate) fn memory(len: usize) -> &'static mut [u8] {
    Box::leak(vec![0u8; len].into_boxed_slice())
}

/// Wall-clock time since the clock was made (`ringfab::Clock` for waits).
pub(crate) struct StdClock(pub(crate) Instant);

impl ringfab::Clock for StdClock {
    fn now(&self) -> Duration {
        self.0.elapsed()
    }
}

/// A clock starting now.
pub(crate) fn clock() -> StdClock {
    StdClock(Instant::now())
}
