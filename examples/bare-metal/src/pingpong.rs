//! The program: two 82576 functions, a ringfab endpoint on each, and a ping-pong between them
//! in which every message is checked, byte by byte, on both sides.
//!
//! A (the first NIC found) sends message `i` — [`len`]`(i)` bytes of [`pattern`]`(i)` — to B;
//! B receives it, checks it and sends the very buffer back (zero copy: its payload stays
//! where it landed, core writes B's header in front of it); A receives the echo and checks it
//! again. One message is in flight at a time, so any extra, missing, late or altered message
//! is a failure. QEMU joins the two NICs on one hub (`-netdev hubport`), so what one sends the
//! other receives.
//!
//! Everything lives in statics: the NICs (set once they are brought up), each domain's tables
//! (a ringfab `Storage`: `Domain::from_storage`) and the memory each side registers. Nothing
//! is allocated.

use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicBool, Ordering};
use core::time::Duration;

use ringfab::av::FiAddr;
use ringfab::cq::CqAttr;
use ringfab::domain::Domain;
use ringfab::entry::{Msg, MsgEntry, OpContext};
use ringfab::ep::EpAttr;
use ringfab::flags::CompletionFlags;
use ringfab::hal::Nic as _;
use ringfab::mr::Buf;
use ringfab::{Node, Storage};
use ringfab_igb::Igb;
use spin::Once;

use crate::pci::{self, Function};
use crate::platform::BarePlatform;
use crate::serial;

/// The NIC type: the igb driver over this machine's platform.
type Nic = Igb<BarePlatform>;

/// Ring depth of each hardware queue.
const D: usize = 64;
/// Receive buffers each side keeps posted, and A's send buffers.
const BUFS: usize = 16;
/// Bytes per buffer: the endpoint's receive buffer size (`EpAttr::default().rx_buf_len`).
const BUF: usize = 2048;
/// Completion-queue entries: every receive and send one side can have outstanding, twice.
const CQ_SIZE: usize = 4 * BUFS;
/// Round trips.
const ROUND_TRIPS: u32 = 1000;
/// The longest message: a standard Ethernet frame's payload less ringfab's 30-byte header.
const MAX_LEN: usize = 1470;
/// Empty polls between two looks at the clock while waiting.
const POLLS_PER_TICK: u32 = 256;
/// Time each look at the clock waits.
const TICK: Duration = Duration::from_millis(1);
/// Ticks without progress before a wait gives up (about two seconds).
const STALL_TICKS: u32 = 2000;

/// One domain's tables: two hardware queues (one endpoint), one CQ, one memory registration,
/// one AV of two addresses.
type Tables = Storage<'static, Nic, D, 2, 1, CQ_SIZE, 1, 1, 2>;
/// Registered memory per side: its buffers, and a page for alignment.
const MEMORY: usize = 2 * BUFS * BUF + 4096;

static NICS: [Once<Nic>; 2] = [Once::new(), Once::new()];
static TABLES: [Tables; 2] = [Tables::new(), Tables::new()];
static MEMORIES: [Memory; 2] = [Memory::new(), Memory::new()];

/// Memory a side registers, handed out once as `&'static mut`.
#[repr(C, align(4096))]
struct Memory {
    taken: AtomicBool,
    bytes: UnsafeCell<[u8; MEMORY]>,
}

// SAFETY: the bytes are reachable only through the one `&mut` that `take` hands out, once.
unsafe impl Sync for Memory {}

impl Memory {
    const fn new() -> Self {
        Memory {
            taken: AtomicBool::new(false),
            bytes: UnsafeCell::new([0; MEMORY]),
        }
    }

    /// The bytes, the first time; `None` after.
    #[allow(
        clippy::mut_from_ref,
        reason = "the `taken` flag makes the one `&mut` handed out unique"
    )]
    fn take(&'static self) -> Option<&'static mut [u8]> {
        if self.taken.swap(true, Ordering::AcqRel) {
            return None;
        }
        // SAFETY: `taken` was false, so no reference to the bytes exists, and it is true now, so
        // no other will: this is the only one, and the memory is static.
        Some(unsafe { &mut *self.bytes.get() })
    }
}

/// Why the run failed: what went wrong, and a number that says more (a ringfab or hal error
/// code, an index, a length) — printed without `core::fmt`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Failure {
    what: &'static str,
    value: Option<i64>,
}

impl Failure {
    fn new(what: &'static str) -> Self {
        Failure { what, value: None }
    }

    fn with(what: &'static str, value: i64) -> Self {
        Failure {
            what,
            value: Some(value),
        }
    }

    /// A ringfab error: its libfabric error number (`fi_errno(3)`).
    fn core(what: &'static str) -> impl Fn(ringfab::Error) -> Failure {
        move |e| Failure::with(what, i64::from(e.errno()))
    }

    /// Writes the failure to the console.
    pub(crate) fn print(&self) {
        serial::str(self.what);
        if let Some(v) = self.value {
            serial::str(" (");
            if v < 0 {
                serial::str("-");
            }
            serial::dec(v.unsigned_abs());
            serial::str(")");
        }
    }
}

type Result<T = ()> = core::result::Result<T, Failure>;

/// Message `i`'s length: every length from 1 to [`MAX_LEN`] comes up, in a scattered order.
fn len(i: u32) -> usize {
    1 + (i as usize * 613) % MAX_LEN
}

/// Byte `j` of message `i`: differs between consecutive messages, so a stale or repeated
/// frame does not pass for the expected one.
fn pattern(i: u32, j: usize) -> u8 {
    (i as usize * 31 + j * 7 + (j >> 8)) as u8
}

/// What happens to a buffer whose send completed.
#[derive(Clone, Copy, PartialEq, Eq)]
enum AfterSend {
    /// Back to the side's pool of send buffers (A).
    Pool,
    /// Posted again as a receive (B, which sends back the buffers it received).
    Receive,
}

/// One side: a node (domain, endpoint, CQ, AV), the peer's address, its send buffers.
struct Side<'d> {
    name: &'static str,
    node: &'d Node<'static, Nic, Msg, D>,
    peer: FiAddr,
    after_send: AfterSend,
    pool: [Option<Buf<'d>>; BUFS],
}

impl<'d> Side<'d> {
    /// Posts `buf` as a receive.
    fn post_receive(&self, buf: Buf<'d>) -> Result {
        let n = self.node;
        n.ep.recv(&n.domain, buf, OpContext(0))
            .map_err(|(e, _)| Failure::core("posting a receive")(e))
    }

    /// Reads the CQ: sent buffers go back ([`AfterSend`]), a received message is returned with
    /// its buffer and length. More than one received at once is a failure: only one is ever
    /// in flight.
    fn poll(&mut self) -> Result<Option<(Buf<'d>, usize)>> {
        let n = self.node;
        let mut entries = [MsgEntry::default(); 4];
        let mut sources = [FiAddr::NOTAVAIL; 4];
        let mut bufs: [Option<Buf<'d>>; 4] = [None, None, None, None];
        let got = match n
            .cq
            .read_owned(&n.domain, &mut entries, &mut sources, &mut bufs)
        {
            Ok(got) => got,
            Err(ringfab::Error::Again) => 0,
            Err(e) => return Err(Failure::core("reading a completion queue")(e)),
        };
        let mut received = None;
        for (entry, buf) in entries[..got].iter().zip(bufs.iter_mut()) {
            let buf = buf
                .take()
                .ok_or(Failure::new("a completion came without its buffer"))?;
            if entry.flags.contains(CompletionFlags::RECV) {
                if received.is_some() {
                    return Err(Failure::new("two messages arrived where one was sent"));
                }
                received = Some((buf, entry.len));
            } else if self.after_send == AfterSend::Receive {
                self.post_receive(buf)?;
            } else {
                let free = self.pool.iter_mut().find(|b| b.is_none());
                *free.ok_or(Failure::new("more send buffers came back than were sent"))? =
                    Some(buf);
            }
        }
        Ok(received)
    }

    /// Sends `len` bytes of `buf`'s payload to the peer.
    fn send(&self, buf: Buf<'d>, len: usize) -> Result {
        let n = self.node;
        n.ep.send(&n.domain, buf, len, self.peer, OpContext(1))
            .map_err(|(e, _)| Failure::core("sending")(e))
    }
}

/// Polls `waiting` until a message arrives, polling `other` meanwhile (for its send
/// completions; a message arriving there is a failure); gives up after about two seconds of
/// nothing.
fn wait_message<'d>(waiting: &mut Side<'d>, other: &mut Side<'d>) -> Result<(Buf<'d>, usize)> {
    for _ in 0..STALL_TICKS {
        for _ in 0..POLLS_PER_TICK {
            if let Some(message) = waiting.poll()? {
                return Ok(message);
            }
            if other.poll()?.is_some() {
                return Err(Failure::new("a message arrived at its own sender"));
            }
        }
        crate::time::delay(TICK);
    }
    Err(Failure::new(if waiting.name == "A" {
        "the echo never came back to A"
    } else {
        "the message never reached B"
    }))
}

/// Checks that `buf` holds message `i`: its length and every payload byte.
fn check(side: &Side<'_>, buf: &Buf<'_>, got_len: usize, i: u32) -> Result {
    let want = len(i);
    if got_len != want {
        return Err(Failure::with(
            if side.name == "A" {
                "A: the echo has the wrong length"
            } else {
                "B: the message has the wrong length"
            },
            got_len as i64,
        ));
    }
    let offset = side.node.ep.payload_offset();
    let mut chunk = [0u8; 64];
    for start in (0..want).step_by(chunk.len()) {
        let part = &mut chunk[..(want - start).min(64)];
        buf.read(offset + start, part)
            .map_err(Failure::core("reading a received buffer"))?;
        if let Some(k) = (0..part.len()).find(|&k| part[k] != pattern(i, start + k)) {
            return Err(Failure::with(
                if side.name == "A" {
                    "A: the echo differs from what was sent, at byte"
                } else {
                    "B: the message differs from what was sent, at byte"
                },
                (start + k) as i64,
            ));
        }
    }
    Ok(())
}

/// Brings up the NIC at `function` and keeps it in `NICS[which]` for good.
fn bring_up(which: usize, function: Function) -> Result<&'static Nic> {
    let bar = function
        .memory_bar0()
        .ok_or(Failure::new("BAR 0 is not a memory BAR below 4 GiB"))?;
    let nic = Igb::new(BarePlatform::new(function, bar)).map_err(|_| {
        Failure::with(
            "bringing up an 82576 failed; PCI device",
            i64::from(function.device),
        )
    })?;
    let nic = NICS[which].call_once(|| nic);
    crate::line("NIC ");
    serial::str(if which == 0 { "A" } else { "B" });
    serial::str(" at ");
    serial::hex(u64::from(function.bus), 2);
    serial::str(":");
    serial::hex(u64::from(function.device), 2);
    serial::str(".");
    serial::hex(u64::from(function.function), 1);
    serial::str(", MAC ");
    serial::mac(nic.capabilities().mac.0);
    serial::str(if nic.link().up {
        ", link up\n"
    } else {
        ", link down\n"
    });
    Ok(nic)
}

/// A node on `nic` over `NICS[which]`'s tables, its receives posted, its pool filled.
fn open(which: usize, nic: &'static Nic) -> Result<Node<'static, Nic, Msg, D>> {
    let domain = Domain::from_storage(nic, &TABLES[which]).map_err(Failure::core("domain"))?;
    Node::on(domain, &EpAttr::default(), &CqAttr::default())
        .map_err(Failure::core("opening an endpoint"))
}

/// Finds the NICs, opens an endpoint on each and runs the ping-pong.
pub(crate) fn run() -> Result {
    let mut found = [Function {
        bus: 0,
        device: 0,
        function: 0,
    }; 2];
    let n = pci::find(ringfab_igb::drives, &mut found);
    if n < 2 {
        return Err(Failure::with(
            "two 82576 (igb) functions are needed; found",
            n as i64,
        ));
    }
    let (nic_a, nic_b) = (bring_up(0, found[0])?, bring_up(1, found[1])?);
    let (node_a, node_b) = (open(0, nic_a)?, open(1, nic_b)?);
    let to_b = node_a
        .av
        .insert_one(&node_a.domain, node_b.ep.name())
        .map_err(Failure::core("inserting B's address"))?;
    let to_a = node_b
        .av
        .insert_one(&node_b.domain, node_a.ep.name())
        .map_err(Failure::core("inserting A's address"))?;
    let mut a = Side {
        name: "A",
        node: &node_a,
        peer: to_b,
        after_send: AfterSend::Pool,
        pool: [const { None }; BUFS],
    };
    let mut b = Side {
        name: "B",
        node: &node_b,
        peer: to_a,
        after_send: AfterSend::Receive,
        pool: [const { None }; BUFS],
    };
    for (which, side) in [&mut a, &mut b].into_iter().enumerate() {
        let memory = MEMORIES[which]
            .take()
            .ok_or(Failure::new("registered memory taken twice"))?;
        let n = side.node;
        let mr = n
            .domain
            .register(memory)
            .map_err(Failure::core("registering memory"))?;
        for k in 0..2 * BUFS {
            let buf = mr
                .alloc(&n.domain, BUF)
                .map_err(Failure::core("carving a buffer"))?;
            if k < BUFS {
                side.post_receive(buf)?;
            } else {
                side.pool[k - BUFS] = Some(buf);
            }
        }
    }
    crate::line("endpoints open, ping-pong of ");
    serial::dec(u64::from(ROUND_TRIPS));
    serial::str(" messages, 1 to ");
    serial::dec(MAX_LEN as u64);
    serial::str(" bytes\n");

    let mut bytes = 0u64;
    for i in 0..ROUND_TRIPS {
        let len = len(i);
        // A: a send buffer (they come back as A's sends complete), message i in it.
        let mut buf = loop {
            if let Some(buf) = a.pool.iter_mut().find_map(Option::take) {
                break buf;
            }
            if a.poll()?.is_some() {
                return Err(Failure::new("A received a message nobody sent"));
            }
        };
        let offset = a.node.ep.payload_offset();
        let mut chunk = [0u8; 64];
        for start in (0..len).step_by(chunk.len()) {
            let part = &mut chunk[..(len - start).min(64)];
            part.iter_mut()
                .enumerate()
                .for_each(|(k, byte)| *byte = pattern(i, start + k));
            buf.write(offset + start, part)
                .map_err(Failure::core("writing a message"))?;
        }
        a.send(buf, len)?;
        // B: receive, check, send the same buffer back.
        let (buf, got) = wait_message(&mut b, &mut a)?;
        check(&b, &buf, got, i)?;
        b.send(buf, got)?;
        // A: receive the echo, check it, post the buffer again.
        let (buf, got) = wait_message(&mut a, &mut b)?;
        check(&a, &buf, got, i)?;
        a.post_receive(buf)?;
        bytes += 2 * len as u64;
    }
    crate::line("ping-pong done: ");
    serial::dec(u64::from(ROUND_TRIPS));
    serial::str(" round trips, ");
    serial::dec(bytes);
    serial::str(" payload bytes, every byte checked on both sides\n");
    Ok(())
}
