//! `ringfab-soak`: issue 14's soak on the emulated NICs (crate documentation of
//! `ringfab_soak`). Prints each NIC's totals and the sum; exits 1 on a violation, naming the
//! seed, the NIC and the operation index and the command that reproduces it; 2 on a bad
//! command line; 3 when no operation is issued for a minute (a hang).

use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::Duration;

use ringfab_soak::args::Args;
use ringfab_soak::{soak, Plan, Tally, PROGRESS};

fn main() -> ExitCode {
    let args = match Args::parse(std::env::args().skip(1)) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let seed = args.seed;
    std::panic::set_hook(Box::new(move |info| {
        eprintln!(
            "PANIC at operation {} (seed {seed}): {info}",
            PROGRESS.load(Ordering::Relaxed)
        );
    }));
    watchdog(seed);
    println!(
        "ringfab soak: {} operations, seed {seed}, faults {}/1000 before an operation",
        args.ops, args.fault_per_mille
    );
    let mut total = Tally::default();
    for (i, &model) in args.models.iter().enumerate() {
        let plan = Plan {
            model,
            seed,
            ops: args.ops_of(i),
            fault_per_mille: args.fault_per_mille,
        };
        match soak(plan) {
            Ok(t) => {
                println!("\n{} ({} operations):\n{t}", model.name(), plan.ops);
                total.merge(&t);
            }
            Err(v) => {
                eprintln!(
                    "\nVIOLATION on {} at operation {} (seed {seed}): {}\nreproduce: \
                     cargo run --release -p ringfab-soak -- --nic {} --seed {seed} --ops {} \
                     --faults {}",
                    model.name(),
                    v.op,
                    v.what,
                    model.name(),
                    v.op + 1,
                    v.plan.fault_per_mille
                );
                return ExitCode::FAILURE;
            }
        }
    }
    if args.models.len() > 1 {
        println!("\nall NICs:\n{total}");
    }
    println!("\nno violation: every operation accounted for exactly once, every buffer back");
    ExitCode::SUCCESS
}

/// Ends the process (status 3) if no operation is issued for a minute: a hang in a loop the
/// soak cannot see into.
fn watchdog(seed: u64) {
    std::thread::spawn(move || {
        let mut last = u64::MAX;
        loop {
            std::thread::sleep(Duration::from_secs(60));
            let now = PROGRESS.load(Ordering::Relaxed);
            if now == last {
                eprintln!("HANG: no operation for 60 s, at operation {now} (seed {seed})");
                std::process::exit(3);
            }
            last = now;
        }
    });
}
