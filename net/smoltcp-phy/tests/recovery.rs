//! A critical device fault in the middle of a TCP exchange (the device resets itself, or
//! virtio-net asks for a reset): the device reports it, its owner drops it, recovers the NIC
//! and opens a new device, and the connection — smoltcp's interface and sockets, which do not
//! belong to the device — carries on over the new one.

mod common;

use common::{Dev, Model, Pair, CLIENT_IP, PORT, SERVER_IP, SOCKET_BUFFER};
use ringfab_emu::CriticalFault;
use ringfab_hal::{Nic, QueueFault};
use ringfab_smoltcp::echo::{ClientState, EchoClient, EchoServer, SocketMemory};
use ringfab_smoltcp::{Config, RingDevice};
use smoltcp::iface::SocketStorage;
use smoltcp::time::{Duration, Instant};
use smoltcp::wire::Ipv4Cidr;

const TOTAL: u64 = 128 * 1024;

fn critical_fault_recovered_and_tcp_goes_on(model: Model, fault: CriticalFault) {
    let pair = Pair::new(model);
    let mut a: Dev<'_> = RingDevice::open(&pair.nic_a, &Config::default()).expect("device A");
    let mut b: Option<Dev<'_>> =
        Some(RingDevice::open(&pair.nic_b, &Config::default()).expect("device B"));
    let (mut slots_a, mut slots_b) = ([SocketStorage::EMPTY; 1], [SocketStorage::EMPTY; 1]);
    let (mut rx_a, mut tx_a) = (vec![0u8; SOCKET_BUFFER], vec![0u8; SOCKET_BUFFER]);
    let (mut rx_b, mut tx_b) = (vec![0u8; SOCKET_BUFFER], vec![0u8; SOCKET_BUFFER]);
    let mut now = Instant::ZERO;
    let mac_b = pair.nic_b.capabilities().mac;
    let mut server = EchoServer::new(
        b.as_mut().expect("device B is open"),
        mac_b,
        Ipv4Cidr::new(SERVER_IP, 24),
        PORT,
        SocketMemory {
            sockets: &mut slots_b,
            rx: &mut rx_b,
            tx: &mut tx_b,
        },
        now,
    )
    .expect("making the server");
    let mac_a = a.mac();
    let mut client = EchoClient::new(
        &mut a,
        mac_a,
        Ipv4Cidr::new(CLIENT_IP, 24),
        49152,
        (SERVER_IP, PORT),
        TOTAL,
        SocketMemory {
            sockets: &mut slots_a,
            rx: &mut rx_a,
            tx: &mut tx_a,
        },
        now,
    )
    .expect("making the client");

    let mut faults: Vec<QueueFault> = Vec::new();
    let mut injected = false;
    let state = loop {
        let dev_b = b
            .as_mut()
            .expect("device B is reopened in the round it is dropped");
        let before = dev_b.counters().rx_frames + a.counters().rx_frames;
        server.poll(dev_b, now);
        let state = client.poll(&mut a, now);
        pair.wire.run_until_idle();
        // Strike once data is flowing.
        if !injected && matches!(state, ClientState::Exchanging { received } if received > 0) {
            pair.emu_b.inject_critical(fault);
            injected = true;
        }
        if let Some(found) = dev_b.fault() {
            faults.push(found);
            drop(b.take()); // queues closed, buffers freed
            pair.nic_b.recover().expect("recovering NIC B");
            b = Some(RingDevice::open(&pair.nic_b, &Config::default()).expect("reopening B"));
        }
        if state.is_finished() || now.total_millis() > 300_000 {
            break state;
        }
        let dev_b = b.as_mut().expect("device B is open");
        if dev_b.counters().rx_frames + a.counters().rx_frames == before {
            let wait = [server.poll_delay(now), client.poll_delay(now)]
                .into_iter()
                .flatten()
                .min()
                .unwrap_or(Duration::from_millis(1000));
            now += wait.max(Duration::from_millis(1));
        }
    };
    assert!(injected, "{model:?}: the fault was injected");
    assert!(!faults.is_empty(), "{model:?} {fault:?}: reported");
    assert_eq!(state, ClientState::Done, "{model:?} {fault:?}: {faults:?}");
    assert_eq!(server.stats().echoed, TOTAL);
    assert_eq!(server.stats().connections, 1, "the same connection went on");
}

#[test]
fn device_reset_recovered_and_tcp_goes_on_on_igb() {
    critical_fault_recovered_and_tcp_goes_on(Model::Igb, CriticalFault::Reset);
}

#[test]
fn device_reset_recovered_and_tcp_goes_on_on_e1000e() {
    critical_fault_recovered_and_tcp_goes_on(Model::E1000e, CriticalFault::Reset);
}

#[test]
fn device_reset_recovered_and_tcp_goes_on_on_virtio_net() {
    critical_fault_recovered_and_tcp_goes_on(Model::VirtioNet, CriticalFault::Reset);
}

#[test]
fn needs_reset_recovered_and_tcp_goes_on_on_virtio_net() {
    critical_fault_recovered_and_tcp_goes_on(Model::VirtioNet, CriticalFault::NeedsReset);
}

/// `check` reads the device's state at once: a device gone from the bus is reported without
/// waiting for the queues' own stall check, and the device refuses to hand out tokens.
fn check_reports_a_removed_device_at_once(model: Model) {
    let pair = Pair::new(model);
    let (_a, mut b) = pair.devices();
    assert_eq!(b.check(), None, "{model:?}: healthy");
    pair.emu_b.inject_critical(CriticalFault::SurpriseRemoval);
    assert_eq!(b.check(), Some(QueueFault::Removed), "{model:?}");
    assert_eq!(b.fault(), Some(QueueFault::Removed));
    assert!(smoltcp::phy::Device::transmit(&mut b, Instant::ZERO).is_none());
    assert!(smoltcp::phy::Device::receive(&mut b, Instant::ZERO).is_none());
}

#[test]
fn check_reports_a_removed_device_at_once_on_igb() {
    check_reports_a_removed_device_at_once(Model::Igb);
}

#[test]
fn check_reports_a_removed_device_at_once_on_e1000e() {
    check_reports_a_removed_device_at_once(Model::E1000e);
}

#[test]
fn check_reports_a_removed_device_at_once_on_virtio_net() {
    check_reports_a_removed_device_at_once(Model::VirtioNet);
}
