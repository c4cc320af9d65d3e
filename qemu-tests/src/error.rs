//! [`Error`]: what stops the harness before or while the guest runs, each naming the step that
//! failed and, where there is one, the fix.

use std::io;
use std::path::PathBuf;

/// A failure of the harness itself (a failing guest test is not an error: it is counted).
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    /// A program could not be started at all.
    #[error("could not run `{cmd}` ({what}): {source}")]
    Spawn {
        /// The step it was for.
        what: &'static str,
        /// The command line.
        cmd: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// A program ran and failed.
    #[error("`{cmd}` ({what}) failed with {status}{}", tail(.stderr))]
    Command {
        /// The step it was for.
        what: &'static str,
        /// The command line.
        cmd: String,
        /// Its exit status.
        status: std::process::ExitStatus,
        /// The end of what it printed on stderr.
        stderr: String,
    },
    /// A file or directory operation failed.
    #[error("{op} {}: {source}", .path.display())]
    Io {
        /// What was being done.
        op: &'static str,
        /// On what.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// Something the harness needs is missing and it may not install it itself.
    #[error("{what} is missing: {fix}")]
    Missing {
        /// What is missing.
        what: String,
        /// What to do.
        fix: String,
    },
    /// Output of a tool, or a file, was not what the harness expected.
    #[error("{what}: {detail}")]
    Unexpected {
        /// What was being read.
        what: &'static str,
        /// What was wrong with it.
        detail: String,
    },
}

fn tail(stderr: &str) -> String {
    let s = stderr.trim();
    if s.is_empty() {
        return String::new();
    }
    let lines: Vec<&str> = s.lines().collect();
    let from = lines.len().saturating_sub(8);
    format!(":\n  {}", lines[from..].join("\n  "))
}

/// The harness's result type.
pub(crate) type Result<T = ()> = std::result::Result<T, Error>;

/// Wraps an I/O result with the operation and path.
pub(crate) trait IoContext<T> {
    /// Names the failed operation and its path.
    fn ctx(self, op: &'static str, path: impl Into<PathBuf>) -> Result<T>;
}

impl<T> IoContext<T> for io::Result<T> {
    fn ctx(self, op: &'static str, path: impl Into<PathBuf>) -> Result<T> {
        self.map_err(|source| Error::Io {
            op,
            path: path.into(),
            source,
        })
    }
}
