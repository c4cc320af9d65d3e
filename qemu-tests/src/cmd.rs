//! Running host programs with their failures named.

use std::process::{Command, Stdio};

use crate::error::{Error, Result};

/// `cmd` as a shell-like line, for messages.
pub(crate) fn line(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().into_owned();
    for a in cmd.get_args() {
        s.push(' ');
        s.push_str(&a.to_string_lossy());
    }
    s
}

/// Runs `cmd` to completion with its output captured; returns stdout.
///
/// # Errors
/// [`Error::Spawn`] if it cannot start, [`Error::Command`] if it exits non-zero.
pub(crate) fn output(what: &'static str, cmd: &mut Command) -> Result<String> {
    output_bytes(what, cmd).map(|b| String::from_utf8_lossy(&b).into_owned())
}

/// [`output`], stdout as bytes.
///
/// # Errors
/// As [`output`].
pub(crate) fn output_bytes(what: &'static str, cmd: &mut Command) -> Result<Vec<u8>> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|source| Error::Spawn {
            what,
            cmd: line(cmd),
            source,
        })?;
    if !out.status.success() {
        return Err(Error::Command {
            what,
            cmd: line(cmd),
            status: out.status,
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        });
    }
    Ok(out.stdout)
}

/// Runs `cmd` to completion, its stdout and stderr going to ours (long steps show progress).
///
/// # Errors
/// As [`output`]; the error carries no stderr (it was shown).
pub(crate) fn run(what: &'static str, cmd: &mut Command) -> Result {
    let status = cmd
        .stdin(Stdio::null())
        .status()
        .map_err(|source| Error::Spawn {
            what,
            cmd: line(cmd),
            source,
        })?;
    if !status.success() {
        return Err(Error::Command {
            what,
            cmd: line(cmd),
            status,
            stderr: String::new(),
        });
    }
    Ok(())
}
