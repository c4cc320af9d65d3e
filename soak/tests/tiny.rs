//! A tiny soak per NIC, so that `cargo test --workspace` runs the soak's whole loop — faults,
//! recoveries, new domains and devices, the ledger's checks — on every emulated NIC.

use ringfab_soak::{soak, Model, Plan};

fn tiny(model: Model, fault_per_mille: u16) -> ringfab_soak::Tally {
    let plan = Plan {
        model,
        seed: 14,
        ops: 12_000,
        fault_per_mille,
    };
    match soak(plan) {
        Ok(t) => t,
        Err(v) => panic!("{} at operation {}: {}", model.name(), v.op, v.what),
    }
}

fn every_operation_is_accounted_for_under_faults(model: Model) {
    let t = tiny(model, 40);
    assert_eq!(t.get("ops"), 12_000);
    assert!(t.sum("completed.") > 0 && t.sum("wire.") > 0 && t.sum("device.") > 0);
    assert!(t.sum("critical.") > 0, "critical faults were injected");
    assert!(t.get("buffers.regions-closed-with-every-buffer-back") > 0);
}

/// Without faults nothing is discarded: every operation completes (a success, a truncation,
/// or a cancel's `FI_ECANCELED`) and the endpoints never fail.
fn without_faults_every_operation_completes(model: Model) {
    let t = tiny(model, 0);
    assert_eq!(t.sum("discarded."), 0, "{t}");
    assert_eq!(t.sum("completed.path-failure."), 0);
    let posted = t.get("posted.send") + t.get("posted.recv");
    let completed = t.sum("completed.send.") + t.sum("completed.recv.");
    assert_eq!(posted, completed, "{t}");
}

#[test]
fn igb_every_operation_is_accounted_for_under_faults() {
    every_operation_is_accounted_for_under_faults(Model::Igb);
}

#[test]
fn e1000e_every_operation_is_accounted_for_under_faults() {
    every_operation_is_accounted_for_under_faults(Model::E1000e);
}

#[test]
fn virtio_net_every_operation_is_accounted_for_under_faults() {
    every_operation_is_accounted_for_under_faults(Model::VirtioNet);
}

#[test]
fn igb_without_faults_every_operation_completes() {
    without_faults_every_operation_completes(Model::Igb);
}

#[test]
fn e1000e_without_faults_every_operation_completes() {
    without_faults_every_operation_completes(Model::E1000e);
}

#[test]
fn virtio_net_without_faults_every_operation_completes() {
    without_faults_every_operation_completes(Model::VirtioNet);
}
