//! The virtio-net pair's wire: two multiqueue taps joined by a Linux bridge, inside a network
//! namespace the runner makes for the run and removes after it, so the host's own network is
//! never touched.
//!
//! Why not a hub as for the other NICs: QEMU's virtio-net offers as many queue pairs as its
//! backend has queues (`max_queue_pairs` comes from the peer's `queues`), and a hub port has
//! one. A tap opened with `IFF_MULTI_QUEUE` has as many as QEMU asks for (`queues=4`), which is
//! what multiqueue and RSS need. QEMU runs inside the namespace (`ip netns exec`) so that it
//! finds the taps there.
//!
//! Nothing else speaks on this wire: the taps and the bridge carry no address, IPv6 is off in
//! the namespace (no router or neighbour solicitations, no MLD), and the bridge runs no
//! spanning tree — the guest's tests see only their own frames.

use std::process::Command;

use crate::apt::Apt;
use crate::cmd;
use crate::error::Result;

/// Queues of each tap, and so queue pairs of each virtio-net device.
pub(crate) const QUEUES: u16 = 4;

/// The taps, one per virtio-net device, in [`crate::boot::NICS`] order.
pub(crate) const TAPS: [&str; 2] = ["rftap0", "rftap1"];

/// The bridge joining them.
const BRIDGE: &str = "rfbr0";

/// MTU of taps and bridge: above any frame the tests send, so the bridge never drops one as too
/// long (it forwards only frames that fit the outgoing port's MTU).
const MTU: &str = "9000";

/// A network namespace holding the taps and their bridge; removed (with them) when dropped.
pub(crate) struct Netns {
    name: String,
}

/// `ip` with `args`.
fn ip(args: &[&str]) -> Command {
    let mut c = Command::new("ip");
    c.args(args);
    c
}

impl Netns {
    /// Makes the namespace, the bridge and the taps (installing iproute2 if `ip` is missing).
    pub(crate) fn create(apt: &mut Apt) -> Result<Netns> {
        if Command::new("ip").arg("-V").output().is_err() {
            apt.install(None, &["iproute2"])?;
        }
        let name = format!("ringfab-qemu-{}", std::process::id());
        cmd::run(
            "making the virtio-net wire's network namespace",
            &mut ip(&["netns", "add", &name]),
        )?;
        // From here on, dropping `ns` removes what was made, also on an error below.
        let ns = Netns { name };
        ns.exec(
            "switching IPv6 off in the namespace",
            &[
                "sh",
                "-c",
                "for f in all default; do \
                 p=/proc/sys/net/ipv6/conf/$f/disable_ipv6; [ ! -e $p ] || echo 1 > $p; done",
            ],
        )?;
        ns.exec(
            "making the bridge",
            &[
                "ip",
                "link",
                "add",
                BRIDGE,
                "mtu",
                MTU,
                "type",
                "bridge",
                "stp_state",
                "0",
            ],
        )?;
        for tap in TAPS {
            ns.exec(
                "making a multiqueue tap",
                &[
                    "ip",
                    "tuntap",
                    "add",
                    "dev",
                    tap,
                    "mode",
                    "tap",
                    "multi_queue",
                ],
            )?;
            ns.exec(
                "joining the tap to the bridge",
                &["ip", "link", "set", tap, "mtu", MTU, "master", BRIDGE, "up"],
            )?;
        }
        ns.exec(
            "bringing the bridge up",
            &["ip", "link", "set", BRIDGE, "up"],
        )?;
        Ok(ns)
    }

    /// Runs `argv` inside the namespace.
    fn exec(&self, what: &'static str, argv: &[&str]) -> Result {
        cmd::run(what, &mut self.command(argv[0], &argv[1..]))
    }

    /// `program args` to be run inside the namespace.
    pub(crate) fn command(&self, program: &str, args: &[&str]) -> Command {
        let mut c = ip(&["netns", "exec", &self.name, program]);
        c.args(args);
        c
    }

    /// The namespace's name.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        // Deleting the namespace deletes its taps and bridge with it.
        if let Err(e) = cmd::run(
            "removing the virtio-net wire's network namespace",
            &mut ip(&["netns", "del", &self.name]),
        ) {
            eprintln!("warning: {e}");
        }
    }
}
