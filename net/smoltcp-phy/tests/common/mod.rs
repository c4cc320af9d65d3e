//! Two emulated NICs of one model on one wire, and the loop that runs an echo exchange
//! between a client on the first and a server on the second in emulated time.

#![allow(
    dead_code,
    reason = "each test file uses the part of the common code it needs"
)]

use ringfab_emu::{
    CriticalFault, DeviceFault, EmuE1000e, EmuIgb, EmuPlatform, EmuVirtioNet, ModelConfig,
    VirtioNetModelConfig, Wire,
};
use ringfab_hal::{MacAddr, QueueFault};
use ringfab_nics::AnyNic;
use ringfab_smoltcp::echo::{ClientState, EchoClient, EchoServer, ServerStats, SocketMemory};
use ringfab_smoltcp::{Config, Counters, RingDevice};
use smoltcp::iface::SocketStorage;
use smoltcp::time::{Duration, Instant};
use smoltcp::wire::{Ipv4Address, Ipv4Cidr};

/// Ring depth (and buffers) each way.
pub(crate) const D: usize = 64;
/// The client's and the server's addresses and the server's port.
pub(crate) const CLIENT_IP: Ipv4Address = Ipv4Address::new(192, 0, 2, 1);
pub(crate) const SERVER_IP: Ipv4Address = Ipv4Address::new(192, 0, 2, 2);
pub(crate) const PORT: u16 = 7;
/// Socket buffer bytes each way: a 256 KiB transfer is eight windows and more.
pub(crate) const SOCKET_BUFFER: usize = 32 * 1024;

/// The three emulated NIC models.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Model {
    Igb,
    E1000e,
    VirtioNet,
}

impl Model {
    pub(crate) const ALL: [Model; 3] = [Model::Igb, Model::E1000e, Model::VirtioNet];
}

/// An emulated NIC of any model: its fault injection and the platform its driver runs on.
#[derive(Clone)]
pub(crate) enum Emu {
    Igb(EmuIgb),
    E1000e(EmuE1000e),
    VirtioNet(EmuVirtioNet),
}

impl Emu {
    pub(crate) fn new(model: Model, last_mac_byte: u8, wire: &Wire) -> Emu {
        let mac = MacAddr([0x52, 0x54, 0, 0, 0, last_mac_byte]);
        let emu = match model {
            Model::Igb => {
                let mut c = ModelConfig::default();
                c.mac = mac;
                Emu::Igb(EmuIgb::new(c))
            }
            Model::E1000e => {
                let mut c = ModelConfig::default();
                c.mac = mac;
                Emu::E1000e(EmuE1000e::new(c))
            }
            Model::VirtioNet => {
                let mut c = VirtioNetModelConfig::default();
                c.mac = mac;
                Emu::VirtioNet(EmuVirtioNet::new(c))
            }
        };
        match &emu {
            Emu::Igb(d) => d.connect(wire),
            Emu::E1000e(d) => d.connect(wire),
            Emu::VirtioNet(d) => d.connect(wire),
        }
        emu
    }

    pub(crate) fn platform(&self) -> EmuPlatform {
        match self {
            Emu::Igb(d) => d.platform(),
            Emu::E1000e(d) => d.platform(),
            Emu::VirtioNet(d) => d.platform(),
        }
    }

    pub(crate) fn inject(&self, fault: DeviceFault) {
        match self {
            Emu::Igb(d) => d.inject(fault),
            Emu::E1000e(d) => d.inject(fault),
            Emu::VirtioNet(d) => d.inject(fault),
        }
    }

    pub(crate) fn inject_critical(&self, fault: CriticalFault) {
        match self {
            Emu::Igb(d) => d.inject_critical(fault),
            Emu::E1000e(d) => d.inject_critical(fault),
            Emu::VirtioNet(d) => d.inject_critical(fault),
        }
    }

    /// Runs the device's deferred work (delayed write-backs) until none is left.
    pub(crate) fn run_until_idle(&self) {
        match self {
            Emu::Igb(d) => d.run_until_idle(),
            Emu::E1000e(d) => d.run_until_idle(),
            Emu::VirtioNet(d) => d.run_until_idle(),
        }
    }

    pub(crate) fn clear_faults(&self) {
        match self {
            Emu::Igb(d) => d.clear_faults(),
            Emu::E1000e(d) => d.clear_faults(),
            Emu::VirtioNet(d) => d.clear_faults(),
        }
    }
}

/// Two NICs of `model` on one wire: A (the client's) and B (the server's).
pub(crate) struct Pair {
    pub(crate) wire: Wire,
    pub(crate) emu_a: Emu,
    pub(crate) emu_b: Emu,
    pub(crate) nic_a: AnyNic<EmuPlatform>,
    pub(crate) nic_b: AnyNic<EmuPlatform>,
}

impl Pair {
    pub(crate) fn new(model: Model) -> Pair {
        let wire = Wire::new();
        let emu_a = Emu::new(model, 0x0a, &wire);
        let emu_b = Emu::new(model, 0x0b, &wire);
        let nic_a = AnyNic::open(emu_a.platform()).expect("bringing up NIC A");
        let nic_b = AnyNic::open(emu_b.platform()).expect("bringing up NIC B");
        Pair {
            wire,
            emu_a,
            emu_b,
            nic_a,
            nic_b,
        }
    }

    /// Two virtio-net NICs whose model plays a sender on the same host with its checksum
    /// offload on: every frame arrives with `NEEDS_CSUM`, a TCP/UDP one with the checksum
    /// field holding the pseudo-header's sum (`VirtioNetModelConfig::partial_checksums`).
    pub(crate) fn virtio_net_partial_checksums() -> Pair {
        let wire = Wire::new();
        let device = |last_mac_byte: u8| {
            let mut c = VirtioNetModelConfig::default();
            c.mac = MacAddr([0x52, 0x54, 0, 0, 0, last_mac_byte]);
            c.partial_checksums = true;
            let d = EmuVirtioNet::new(c);
            d.connect(&wire);
            Emu::VirtioNet(d)
        };
        let (emu_a, emu_b) = (device(0x0a), device(0x0b));
        let nic_a = AnyNic::open(emu_a.platform()).expect("bringing up NIC A");
        let nic_b = AnyNic::open(emu_b.platform()).expect("bringing up NIC B");
        Pair {
            wire,
            emu_a,
            emu_b,
            nic_a,
            nic_b,
        }
    }

    pub(crate) fn devices(&self) -> (Dev<'_>, Dev<'_>) {
        self.devices_with(&Config::default())
    }

    pub(crate) fn devices_with(&self, config: &Config) -> (Dev<'_>, Dev<'_>) {
        let a = RingDevice::open(&self.nic_a, config).expect("device on NIC A");
        let b = RingDevice::open(&self.nic_b, config).expect("device on NIC B");
        (a, b)
    }
}

pub(crate) type Dev<'n> = RingDevice<'n, AnyNic<EmuPlatform>, D>;

/// Everything a device did that shows frames moving.
fn activity(c: &Counters) -> u64 {
    c.rx_frames + c.tx_bytes + c.rx_bad_frames + c.rx_too_long + c.rx_device_errors
}

/// How an exchange ended.
#[derive(Debug)]
pub(crate) struct Outcome {
    pub(crate) client: ClientState,
    pub(crate) server: ServerStats,
    /// Emulated time it took.
    pub(crate) elapsed: Duration,
    pub(crate) counters_a: Counters,
    pub(crate) counters_b: Counters,
    /// The queue faults the devices ended with.
    pub(crate) fault_a: Option<QueueFault>,
    pub(crate) fault_b: Option<QueueFault>,
}

/// A server on `b`, a client on `a` sending `total` bytes, polled in emulated time until the
/// client finishes or `limit` passes. Time stands still while frames move and jumps to the
/// next moment an interface asked to be polled at when nothing moved, so a run is
/// deterministic and a retransmission timeout costs no real time. `between` runs after
/// every round (to inject faults at a moment of the test's choosing).
pub(crate) fn exchange(
    wire: &Wire,
    a: &mut Dev<'_>,
    b: &mut Dev<'_>,
    total: u64,
    limit: Duration,
    mut between: impl FnMut(u64),
) -> Outcome {
    let mut now = Instant::from_millis(0);
    let (mut slots_a, mut slots_b) = ([SocketStorage::EMPTY; 1], [SocketStorage::EMPTY; 1]);
    let (mut rx_a, mut tx_a) = (vec![0u8; SOCKET_BUFFER], vec![0u8; SOCKET_BUFFER]);
    let (mut rx_b, mut tx_b) = (vec![0u8; SOCKET_BUFFER], vec![0u8; SOCKET_BUFFER]);
    let mem_a = SocketMemory {
        sockets: &mut slots_a,
        rx: &mut rx_a,
        tx: &mut tx_a,
    };
    let mem_b = SocketMemory {
        sockets: &mut slots_b,
        rx: &mut rx_b,
        tx: &mut tx_b,
    };
    let server_cidr = Ipv4Cidr::new(SERVER_IP, 24);
    let client_cidr = Ipv4Cidr::new(CLIENT_IP, 24);
    let (mac_a, mac_b) = (a.mac(), b.mac());
    let mut server =
        EchoServer::new(b, mac_b, server_cidr, PORT, mem_b, now).expect("making the server");
    let mut client = EchoClient::new(
        a,
        mac_a,
        client_cidr,
        49152,
        (SERVER_IP, PORT),
        total,
        mem_a,
        now,
    )
    .expect("making the client");
    let start = now;
    let mut round = 0;
    let state = loop {
        let before = activity(&a.counters()) + activity(&b.counters());
        server.poll(b, now);
        let state = client.poll(a, now);
        wire.run_until_idle();
        between(round);
        round += 1;
        if state.is_finished() || now - start > limit {
            break state;
        }
        if activity(&a.counters()) + activity(&b.counters()) == before {
            let wait = [server.poll_delay(now), client.poll_delay(now)]
                .into_iter()
                .flatten()
                .min()
                .unwrap_or(Duration::from_millis(1000));
            now += wait.max(Duration::from_millis(1));
        }
    };
    Outcome {
        client: state,
        server: server.stats(),
        elapsed: now - start,
        counters_a: a.counters(),
        counters_b: b.counters(),
        fault_a: a.fault(),
        fault_b: b.fault(),
    }
}

/// The devices' time limit for an exchange in emulated time.
pub(crate) const LIMIT: Duration = Duration::from_secs(300);
