//! The data path makes no system call: each NIC's endpoints run their traffic in a forked child
//! that has entered seccomp's strict mode (`PR_SET_SECCOMP`, `SECCOMP_MODE_STRICT`), where the
//! kernel kills the process with `SIGKILL` on any system call but `read`, `write`, `_exit` and
//! `sigreturn` — and the child calls none of those either until it leaves with `_exit`. A child
//! that comes back with status 0 ran every operation without entering the kernel; one killed by
//! `SIGKILL` made a system call, and the step it was at (kept in memory shared with the parent)
//! names the operation.
//!
//! What "the data path" covers here: send, sendmsg with `FI_MORE` batches, senddata, inject,
//! injectdata, recv, recvmsg, multi-receive, cancel, progress, tx/rx_size_left, CQ read,
//! readfrom, read_owned, readerr_owned (an error completion) and a counter read. Bring-up,
//! registration and the blocking waits (`sread`, counter waits) are not on it: those may sleep
//! or map memory by design.
//!
//! The emulated devices run in this process and stand in for hardware. They make no system call
//! either in this configuration (no interrupt is armed, so no condition variable is signalled;
//! their locks are never contended in one thread), and their heap use is kept off the kernel by
//! growing the heap once, generously, before the child enters strict mode (`M_TOP_PAD`, no
//! trimming, no `mmap` for allocations). A system call the model made would fail this test just
//! the same; it would then be the model's to fix, not ringfab's — the step name tells which
//! call was running.
//!
//! `harness = false`: the test forks, and a child of a multithreaded process may find a lock
//! (the allocator's) held by a thread that does not exist in it. This binary has one thread.

mod common;

use std::sync::atomic::{AtomicU32, Ordering};

use common::*;
use ringfab::av::{AvAttr, FiAddr};
use ringfab::cntr::{Counter, CounterAttr};
use ringfab::cq::CqAttr;
use ringfab::domain::Domain;
use ringfab::entry::{Data, DataEntry, ErrEntry, OpContext};
use ringfab::ep::{EpAttr, EpOpt};
use ringfab::flags::{BindFlags, CntrBindFlags, CompletionFlags, OpFlags};
use ringfab::mr::Buf;
use ringfab::{Capacities, Error};

const D: usize = 64;
const BUF: usize = 2048;
/// Rounds of traffic in strict mode.
const ROUNDS: u64 = 200;
/// Messages A sends B per round: a batch of four (three with `FI_MORE`), senddata, inject and
/// injectdata.
const PER_ROUND: u64 = 7;
/// Multi-receive messages B takes per round in the second half.
const MULTI: u64 = 4;

/// The steps a child goes through; the parent names the one a `SIGKILL` interrupted.
#[derive(Clone, Copy, Debug)]
#[repr(u32)]
enum Step {
    SetUp,
    SendBatch,
    SendData,
    Inject,
    Wire,
    ReadRecv,
    Repost,
    ReadSend,
    SizeLeft,
    Cancel,
    ReadErr,
    Counter,
    MultiRecv,
    Done,
}

const STEPS: [Step; 14] = [
    Step::SetUp,
    Step::SendBatch,
    Step::SendData,
    Step::Inject,
    Step::Wire,
    Step::ReadRecv,
    Step::Repost,
    Step::ReadSend,
    Step::SizeLeft,
    Step::Cancel,
    Step::ReadErr,
    Step::Counter,
    Step::MultiRecv,
    Step::Done,
];

/// Memory shared by parent and child: the child's current step.
struct Progress(&'static AtomicU32);

impl Progress {
    fn new() -> Self {
        // SAFETY: an anonymous shared mapping of one page, checked below; it is never unmapped,
        // so the `'static` reference stays valid in parent and children.
        let page = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                4096,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(page, libc::MAP_FAILED, "mmap of the progress page");
        // SAFETY: the page is zeroed, aligned for `AtomicU32`, and lives for ever.
        Progress(unsafe { &*page.cast::<AtomicU32>() })
    }

    fn at(&self, step: Step) {
        self.0.store(step as u32, Ordering::SeqCst);
    }

    fn step(&self) -> Step {
        STEPS[self.0.load(Ordering::SeqCst) as usize]
    }
}

/// Enters seccomp strict mode: from here on, any system call but `read`, `write`, `_exit` and
/// `sigreturn` kills the process.
fn enter_strict_mode() {
    // SAFETY: prctl with integer arguments; no memory is passed.
    let r = unsafe {
        libc::prctl(
            libc::PR_SET_SECCOMP,
            libc::SECCOMP_MODE_STRICT as libc::c_ulong,
        )
    };
    assert_eq!(r, 0, "prctl(PR_SET_SECCOMP, SECCOMP_MODE_STRICT)");
}

/// Leaves the child with the `_exit` system call itself — the one call strict mode allows
/// (`exit_group`, which `std::process::exit` uses, is not).
fn leave(status: i32) -> ! {
    // SAFETY: `exit` ends this (the only) thread and so the process; nothing runs after it.
    unsafe { libc::syscall(libc::SYS_exit, status as libc::c_long) };
    unreachable!("exit returned")
}

/// The control: a child in strict mode that makes one system call (`getpid`) must be killed, or
/// the test could not see one.
fn a_system_call(progress: &Progress) {
    enter_strict_mode();
    progress.at(Step::Done);
    // SAFETY: getpid takes no arguments.
    unsafe { libc::syscall(libc::SYS_getpid) };
}

/// Runs `data_path::<T>` in a strict-mode child; `Err` says what went wrong.
fn in_strict_child<T: TestNic>(progress: &Progress) -> Result<(), String> {
    in_child(progress, data_path::<T>)
}

/// Runs `body` in a forked child; `Err` says what went wrong.
fn in_child(progress: &Progress, body: fn(&Progress)) -> Result<(), String> {
    progress.at(Step::SetUp);
    // SAFETY: this binary has one thread, so the child inherits no lock held by another.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork");
    if pid == 0 {
        let ok = std::panic::catch_unwind(|| body(progress)).is_ok();
        leave(if ok { 0 } else { 2 });
    }
    let mut status = 0;
    // SAFETY: `status` is a valid out-pointer; `pid` is our child.
    let r = unsafe { libc::waitpid(pid, &mut status, 0) };
    assert_eq!(r, pid, "waitpid");
    if libc::WIFEXITED(status) {
        match libc::WEXITSTATUS(status) {
            0 => Ok(()),
            2 => Err(format!(
                "a check failed in {:?} (panic message above)",
                progress.step()
            )),
            code => Err(format!("child exited with {code}")),
        }
    } else if libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGKILL {
        Err(format!(
            "a system call during {:?} (seccomp strict mode killed the child)",
            progress.step()
        ))
    } else {
        Err(format!("child ended with wait status {status:#x}"))
    }
}

fn cq_attr() -> CqAttr {
    CqAttr {
        size: 256,
        ..CqAttr::default()
    }
}

/// Two endpoints on NIC pair `T`, A sending to B; traffic in strict mode; checks of what
/// arrived. Panics (caught by the caller) on a wrong result.
fn data_path<T: TestNic>(progress: &Progress) {
    let p = pair_of::<T>();
    let received = Counter::open(&CounterAttr::default(), None).unwrap();
    let counters = [&received];
    // One endpoint (two queues), one CQ of 256 entries, one MR and one AV of one address each;
    // the domains allocate their tables here, before strict mode.
    let caps = Capacities {
        queues: 2,
        cqs: 1,
        cq_size: 256,
        mrs: 1,
        avs: 1,
        av_entries: 1,
    };
    let da = Domain::<_, D>::with_capacities(&p.nic_a, &caps);
    let db = Domain::<_, D>::with_capacities(&p.nic_b, &caps).with_counters(&counters);
    let mut cq_a = da.open_cq::<Data>(&cq_attr()).unwrap();
    let cq_b = db.open_cq::<Data>(&cq_attr()).unwrap();
    let av_a = da.open_av(&AvAttr::default()).unwrap();
    let av_b = db.open_av(&AvAttr::default()).unwrap();
    let mut ep_a = da.endpoint(&EpAttr::default()).unwrap();
    let mut ep_b = db
        .endpoint(&EpAttr {
            multi_recv_msgs: 4,
            ..EpAttr::default()
        })
        .unwrap();
    ep_b.bind_cntr(&db, &received, CntrBindFlags::RECV).unwrap();
    for (d, ep, cq, av) in [
        (&da, &mut ep_a, &cq_a, &av_a),
        (&db, &mut ep_b, &cq_b, &av_b),
    ] {
        ep.bind_cq(d, cq, BindFlags::TRANSMIT | BindFlags::RECV)
            .unwrap();
        ep.bind_av(d, av).unwrap();
        ep.enable(d).unwrap();
    }
    let (mut to_b, mut to_a) = ([FiAddr::NOTAVAIL], [FiAddr::NOTAVAIL]);
    av_a.insert(&da, &[ep_b.name()], &mut to_b).unwrap();
    av_b.insert(&db, &[ep_a.name()], &mut to_a).unwrap();
    let (to_b, from_a) = (to_b[0], to_a[0]);
    let mr_a = da.register(memory(32 * BUF)).unwrap();
    let mr_b = db.register(memory(32 * BUF)).unwrap();
    // A's send buffers, in a fixed-capacity pool that never grows.
    let mut pool: Vec<Buf<'_>> = (0..8).map(|_| mr_a.alloc(&da, BUF).unwrap()).collect();
    pool.reserve(8);
    for _ in 0..12 {
        ep_b.recv(&db, mr_b.alloc(&db, BUF).unwrap(), OpContext(1))
            .unwrap();
    }
    // A receive on A to cancel every round (A receives nothing).
    let mut cancel_me = Some(mr_a.alloc(&da, BUF).unwrap());
    // Four slots of B's receive size in one buffer, for the multi-receive rounds.
    let mut multi = Some(mr_b.alloc(&db, 4 * BUF).unwrap());
    let min = BUF;
    ep_b.setopt(EpOpt::MinMultiRecv, min).unwrap();

    enter_strict_mode();

    let mut expect_data = 0u64;
    let mut multi_slots = 0u64;
    for round in 0..ROUNDS {
        let multi_round = round >= ROUNDS / 2;
        if multi_round {
            progress.at(Step::MultiRecv);
            if let Some(buf) = multi.take() {
                ep_b.recvmsg(&db, buf, OpContext(7), OpFlags::MULTI_RECV)
                    .map_err(|(e, _)| e)
                    .unwrap();
            }
        }
        progress.at(Step::SendBatch);
        let count = if multi_round { MULTI } else { 4 };
        for i in 0..count {
            let mut buf = pool.pop().expect("a send buffer");
            let payload = (round * 16 + i).to_le_bytes();
            buf.write(ep_a.payload_offset(), &payload).unwrap();
            let flags = if i + 1 < count {
                OpFlags::MORE
            } else {
                OpFlags::empty()
            };
            ep_a.sendmsg(&da, buf, 8, to_b, None, OpContext(2), flags)
                .map_err(|(e, _)| e)
                .unwrap();
        }
        if !multi_round {
            progress.at(Step::SendData);
            let buf = pool.pop().expect("a send buffer");
            ep_a.senddata(&da, buf, 8, round, to_b, OpContext(3))
                .map_err(|(e, _)| e)
                .unwrap();
            progress.at(Step::Inject);
            ep_a.inject(&da, &round.to_le_bytes(), to_b).unwrap();
            ep_a.injectdata(&da, &round.to_le_bytes(), round, to_b)
                .unwrap();
            expect_data += 2 * round;
        }

        progress.at(Step::Wire);
        p.wire.run_until_idle();
        ep_a.progress(&da).unwrap();
        ep_b.progress(&db).unwrap();

        let want = if multi_round { MULTI } else { PER_ROUND };
        let mut got = 0;
        let mut data_sum = 0;
        let mut entries = [DataEntry::default(); 8];
        let mut src = [FiAddr::NOTAVAIL; 8];
        let mut bufs: [Option<Buf<'_>>; 8] = Default::default();
        while got < want {
            progress.at(Step::ReadRecv);
            let n = match cq_b.read_owned(&db, &mut entries, &mut src, &mut bufs) {
                Ok(n) => n,
                Err(Error::Again) => {
                    p.wire.run_until_idle();
                    continue;
                }
                Err(e) => panic!("read_owned on B: {e:?}"),
            };
            progress.at(Step::Repost);
            for ((e, s), b) in entries[..n].iter().zip(src).zip(bufs.iter_mut()) {
                assert!(e.flags.contains(CompletionFlags::RECV));
                assert_eq!(s, from_a, "FI_SOURCE of B's receive");
                if e.flags.contains(CompletionFlags::REMOTE_CQ_DATA) {
                    data_sum += e.data;
                }
                match b.take() {
                    Some(b) if e.flags.contains(CompletionFlags::MULTI_RECV) => {
                        multi_slots += 1;
                        multi = Some(b);
                    }
                    Some(b) => ep_b.recv(&db, b, OpContext(1)).map_err(|(e, _)| e).unwrap(),
                    None => {
                        assert_eq!(e.op_context, OpContext(7), "only multi-recv slots");
                        multi_slots += 1;
                    }
                }
            }
            got += n as u64;
        }
        assert_eq!(got, want, "round {round}: every message once");
        if !multi_round {
            assert_eq!(data_sum, 2 * round, "round {round}: remote CQ data");
        }

        progress.at(Step::ReadSend);
        let mut sent = 0;
        let sends = if multi_round { MULTI } else { 5 };
        while sent < sends {
            match cq_a.read_owned(&da, &mut entries, &mut src, &mut bufs) {
                Ok(n) => {
                    for (e, b) in entries[..n].iter().zip(bufs.iter_mut()) {
                        assert!(e.flags.contains(CompletionFlags::SEND));
                        pool.push(b.take().expect("a send gives its buffer back"));
                    }
                    sent += n as u64;
                }
                Err(Error::Again) => p.wire.run_until_idle(),
                Err(e) => panic!("read_owned on A: {e:?}"),
            }
        }

        progress.at(Step::SizeLeft);
        assert!(ep_a.tx_size_left(&da).unwrap() > 0);
        assert!(ep_b.rx_size_left(&db).unwrap() > 0);

        progress.at(Step::Cancel);
        ep_a.recv(&da, cancel_me.take().unwrap(), OpContext(9))
            .map_err(|(e, _)| e)
            .unwrap();
        assert_eq!(ep_a.cancel(&da, OpContext(9)), Ok(true));
        assert_eq!(ep_a.cancel(&da, OpContext(9)), Ok(false));
        progress.at(Step::ReadErr);
        assert_eq!(cq_a.read(&da, &mut entries), Err(Error::Avail));
        let mut err = ErrEntry::default();
        let (_, buf) = cq_a.readerr_owned(&da, &mut err, None, 0).unwrap();
        assert_eq!(err.op_context, OpContext(9));
        assert_eq!(err.err, Error::Canceled.errno());
        cancel_me = Some(buf.expect("the cancelled receive's buffer"));
    }

    progress.at(Step::Counter);
    let half = ROUNDS / 2;
    assert_eq!(received.read(), half * PER_ROUND + half * MULTI);
    assert_eq!(expect_data, (0..half).map(|r| 2 * r).sum::<u64>());
    assert!(multi_slots > 0, "the multi-receive buffer took messages");
    progress.at(Step::Done);
    // Still in strict mode: closing the handles (the buffers held here first go back to their
    // regions; the endpoints' posted receives go back as they close) and dropping the domains
    // at the end (stopping their queues, freeing their tables on the heap) make no system call
    // either; one would show as a system call during `Done`.
    drop((pool, cancel_me, multi));
    ep_a.close(&da).map_err(|(e, _)| e).unwrap();
    ep_b.close(&db).map_err(|(e, _)| e).unwrap();
    cq_a.close(&da).map_err(|(e, _)| e).unwrap();
    cq_b.close(&db).map_err(|(e, _)| e).unwrap();
    av_a.close(&da).map_err(|(e, _)| e).unwrap();
    av_b.close(&db).map_err(|(e, _)| e).unwrap();
    mr_a.close(&da).map_err(|(e, _)| e).unwrap();
    mr_b.close(&db).map_err(|(e, _)| e).unwrap();
}

/// One NIC's run.
type Run = fn(&Progress) -> Result<(), String>;

fn main() {
    // The heap grows once, by far more than the children will use, and never shrinks or maps:
    // the emulated devices allocate frames as they go, and they must not need the kernel for it.
    // SAFETY: mallopt only changes the allocator's tunables; called before any other thread
    // exists.
    unsafe {
        libc::mallopt(libc::M_TOP_PAD, 256 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, i32::MAX);
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
    }
    // Grow the heap now, in the parent (chunks under the mmap threshold come from the heap), so
    // the children inherit the room.
    drop((0..8).map(|_| vec![0u8; 16 << 20]).collect::<Vec<_>>());

    let progress = Progress::new();
    let runs: [(&str, Run); 3] = [
        ("igb", in_strict_child::<IgbNic>),
        ("e1000e", in_strict_child::<E1000eNic>),
        ("virtio_net", in_strict_child::<VirtioNic>),
    ];
    let mut failed = 0;
    for (nic, run) in runs {
        let name = format!("{nic}::the_data_path_makes_no_system_call");
        match run(&progress) {
            Ok(()) => println!("test {name} ... ok"),
            Err(why) => {
                println!("test {name} ... FAILED: {why}");
                failed += 1;
            }
        }
    }
    let name = "strict_mode_kills_a_system_call";
    match in_child(&progress, a_system_call) {
        Err(why) if why.starts_with("a system call during Done") => println!("test {name} ... ok"),
        other => {
            println!("test {name} ... FAILED: the control child ended with {other:?}");
            failed += 1;
        }
    }
    let passed = runs.len() + 1 - failed;
    let result = if failed == 0 { "ok" } else { "FAILED" };
    println!("\ntest result: {result}. {passed} passed; {failed} failed");
    if failed > 0 {
        std::process::exit(1);
    }
}
