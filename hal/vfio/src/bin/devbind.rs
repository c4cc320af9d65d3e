//! devbind: list network PCI devices and move them between their kernel driver and vfio-pci.
//!
//! ```text
//! devbind --status
//! devbind --bind vfio-pci 0000:03:00.0      (refuses the device of the default route)
//! devbind --bind igb 0000:03:00.0           (gives it back)
//! devbind --unbind 0000:03:00.0
//! options: --force (take a device that carries the default route),
//!          --sysfs DIR --procfs DIR (roots other than /sys and /proc)
//! ```

#[cfg(target_os = "linux")]
fn main() -> std::process::ExitCode {
    match linux::run(std::env::args().skip(1).collect()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("devbind: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn main() -> std::process::ExitCode {
    eprintln!("devbind: VFIO exists on Linux only");
    std::process::ExitCode::FAILURE
}

#[cfg(target_os = "linux")]
mod linux {
    use ringfab_vfio::bind::{self, BindOutcome};
    use ringfab_vfio::{Bdf, Sysfs};

    const USAGE: &str = "usage: devbind --status\n       \
        devbind --bind <driver> <bdf> [--force]\n       \
        devbind --unbind <bdf> [--force]\n\
        options: --sysfs <dir> --procfs <dir> (default /sys, /proc)";

    enum Command {
        Status,
        Bind(String, String),
        Unbind(String),
    }

    fn describe(bdf: Bdf, out: &BindOutcome) -> String {
        let name = |d: &Option<String>| d.clone().unwrap_or_else(|| "no driver".into());
        format!("{bdf}: {} -> {}", name(&out.before), name(&out.after))
    }

    pub(super) fn run(args: Vec<String>) -> Result<(), Box<dyn std::error::Error>> {
        let mut sys = "/sys".to_owned();
        let mut proc = "/proc".to_owned();
        let mut force = false;
        let mut cmd = None;
        let mut it = args.into_iter();
        let next = |it: &mut std::vec::IntoIter<String>, what: &str| {
            it.next()
                .ok_or_else(|| format!("{what} needs an argument\n{USAGE}"))
        };
        while let Some(a) = it.next() {
            match a.as_str() {
                "--status" | "-s" => cmd = Some(Command::Status),
                "--bind" | "-b" => {
                    let driver = next(&mut it, "--bind")?;
                    cmd = Some(Command::Bind(driver, next(&mut it, "--bind")?));
                }
                "--unbind" | "-u" => cmd = Some(Command::Unbind(next(&mut it, "--unbind")?)),
                "--force" => force = true,
                "--sysfs" => sys = next(&mut it, "--sysfs")?,
                "--procfs" => proc = next(&mut it, "--procfs")?,
                "--help" | "-h" => {
                    println!("{USAGE}");
                    return Ok(());
                }
                other => return Err(format!("unknown argument '{other}'\n{USAGE}").into()),
            }
        }
        let sysfs = Sysfs::new(sys, proc);
        match cmd.ok_or(USAGE)? {
            Command::Status => print!("{}", bind::format_status(&bind::net_devices(&sysfs)?)),
            Command::Bind(driver, bdf) => {
                let bdf = Bdf::parse(&bdf)?;
                let out = bind::bind(&sysfs, bdf, &driver, force)?;
                println!("{}", describe(bdf, &out));
                if out.after.as_deref() != Some(driver.as_str()) {
                    return Err(format!(
                        "{bdf} is not bound to {driver} after the probe; `dmesg` says why"
                    )
                    .into());
                }
            }
            Command::Unbind(bdf) => {
                let bdf = Bdf::parse(&bdf)?;
                println!("{}", describe(bdf, &bind::unbind(&sysfs, bdf, force)?));
            }
        }
        Ok(())
    }
}
