//! QEMU's human monitor on a Unix socket: what the machine is doing when the guest falls
//! silent, asked before QEMU is killed. A guest whose own watchdog cannot speak is either
//! stopped (`info status`), spinning somewhere (`info registers`: RIP), or halted with no
//! interrupt coming (`HLT=1` with a timer that never fires: `info lapic`) — each a different
//! bug (docs/perf.md, "A bench run sometimes stops").

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

/// The arguments that give QEMU a monitor at `socket` (QEMU listens; nobody has to connect).
pub(crate) fn args(socket: &Path) -> [String; 2] {
    [
        "-monitor".into(),
        format!("unix:{},server=on,wait=off", socket.display()),
    ]
}

/// The commands asked of a silent guest's machine, for `cpus` vCPUs.
pub(crate) fn stuck_commands(cpus: usize) -> Vec<String> {
    let mut c = vec!["info status".to_owned(), "info cpus".to_owned()];
    for n in 0..cpus {
        c.extend([
            format!("cpu {n}"),
            "info registers".into(),
            "info lapic".into(),
        ]);
    }
    c.push("info pic".into());
    c
}

/// How long one command's answer may take.
const PATIENCE: Duration = Duration::from_secs(5);

/// The monitor's prompt, after its banner and after each answer.
const PROMPT: &str = "(qemu) ";

/// Connects to the monitor at `socket`, sends each command and returns what it answered,
/// each answer after its command. A monitor that does not answer ends the transcript with
/// what came, and why.
pub(crate) fn ask(socket: &Path, commands: &[String]) -> String {
    let mut s = match UnixStream::connect(socket) {
        Ok(s) => s,
        Err(e) => return format!("monitor {}: not reached: {e}", socket.display()),
    };
    let _ = s.set_read_timeout(Some(Duration::from_millis(200)));
    let mut out = String::new();
    if let Err(e) = until_prompt(&mut s) {
        return format!("monitor: no prompt: {e}");
    }
    for c in commands {
        out.push_str(&format!("> {c}\n"));
        if let Err(e) = s.write_all(format!("{c}\n").as_bytes()) {
            out.push_str(&format!("monitor: sending: {e}\n"));
            break;
        }
        match until_prompt(&mut s) {
            // The first line is the monitor's echo of the command, redrawn keystroke by
            // keystroke: left out.
            Ok(answer) => out.push_str(answer.split_once('\n').map_or("", |(_, rest)| rest)),
            Err(e) => {
                out.push_str(&format!("monitor: {e}\n"));
                break;
            }
        }
    }
    out
}

/// Reads until the prompt: what came before it, its terminal escapes left out.
fn until_prompt(s: &mut impl Read) -> Result<String, String> {
    let start = Instant::now();
    let mut got = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let text = String::from_utf8_lossy(&got);
        if let Some(at) = text
            .rfind(PROMPT)
            .filter(|&at| at + PROMPT.len() == text.len())
        {
            return Ok(clean(&text[..at]));
        }
        if start.elapsed() > PATIENCE {
            return Err(format!("no answer in {PATIENCE:?}; got {:?}", clean(&text)));
        }
        match s.read(&mut chunk) {
            Ok(0) => return Err(format!("closed; got {:?}", clean(&text))),
            Ok(n) => got.extend_from_slice(&chunk[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(e) => return Err(e.to_string()),
        }
    }
}

/// The monitor's output without terminal escapes and carriage returns.
fn clean(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            // ESC [ … final byte: a cursor or erase sequence.
            '\u{1b}' => {
                if chars.peek() == Some(&'[') {
                    chars.next();
                    for f in chars.by_ref() {
                        if ('@'..='~').contains(&f) {
                            break;
                        }
                    }
                }
            }
            '\r' => {}
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader};
    use std::os::unix::net::UnixListener;

    /// A stand-in monitor: a banner and prompt, then for each command line an echo with a
    /// terminal escape, an answer and the prompt; it stops answering at `mute`.
    fn fake(socket: &Path, mute: &'static str) -> std::thread::JoinHandle<()> {
        let l = UnixListener::bind(socket).unwrap();
        std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            s.write_all(b"QEMU 10.0.2 monitor - type 'help' for more information\r\n(qemu) ")
                .unwrap();
            let r = BufReader::new(s.try_clone().unwrap());
            for line in r.lines() {
                let line = line.unwrap();
                if line == mute {
                    std::thread::sleep(PATIENCE + Duration::from_secs(1));
                    return;
                }
                write!(s, "{line}\u{1b}[K\r\nanswer to {line}\r\n(qemu) ").unwrap();
            }
        })
    }

    #[test]
    fn each_command_gets_its_answer_and_a_mute_monitor_ends_the_transcript() {
        let socket = std::env::temp_dir().join(format!("ringfab-mon-{}", std::process::id()));
        let _ = std::fs::remove_file(&socket);
        let server = fake(&socket, "info pic");
        let t = ask(&socket, &stuck_commands(1));
        server.join().unwrap();
        let _ = std::fs::remove_file(&socket);
        assert!(
            t.starts_with("> info status\nanswer to info status\n> info cpus\n"),
            "{t}"
        );
        assert!(t.contains("> cpu 0\nanswer to cpu 0\n"), "{t}");
        assert!(
            t.contains("answer to info lapic\n> info pic\nmonitor: no answer"),
            "{t}"
        );
        assert!(!t.contains('\u{1b}') && !t.contains('\r'), "{t:?}");
    }

    #[test]
    fn no_monitor_is_said_not_hidden() {
        let t = ask(
            Path::new("/nonexistent/ringfab-monitor"),
            &stuck_commands(2),
        );
        assert!(
            t.starts_with("monitor /nonexistent/ringfab-monitor: not reached"),
            "{t}"
        );
    }

    #[test]
    fn the_silent_guest_questions_cover_every_cpu() {
        let c = stuck_commands(2);
        assert_eq!(c.iter().filter(|c| *c == "info lapic").count(), 2);
        assert!(c.contains(&"cpu 1".to_owned()));
        assert_eq!(
            args(Path::new("/t/m.sock"))[1],
            "unix:/t/m.sock,server=on,wait=off"
        );
    }
}
