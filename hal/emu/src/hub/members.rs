//! Who else is on the hub, and sending to all of them: the hub directory holds one Unix
//! datagram socket file per member, and a member sends each datagram to every other member's
//! file.
//!
//! The member list is a cache of the directory, kept fresh three ways: a member that joins says
//! hello to every member it finds, one that leaves says bye, and every member rescans the
//! directory now and then (a hello can be lost to a full socket). A member that died without
//! leaving leaves its file behind with nobody bound to it; connecting or sending to it fails
//! with `ECONNREFUSED`, and the member that finds out removes the file — a rescan probes every
//! file new to it, a send finds a member that died since — so a crashed process is cleaned up
//! by the first member to look, no daemon needed.
//!
//! Sending never blocks for long: a member's socket holds only a few datagrams
//! (`net.unix.max_dgram_qlen`, 10 by default on Linux, whatever its buffer size), so a burst
//! waits up to [`SEND_WAIT`] for the receiver to drain it; a member that still has no room
//! loses the frame (counted), and is sent to without waiting until it takes one again, so that
//! a stopped process costs each sender one wait, not one per frame. That is a lossy Ethernet,
//! as the hub is meant to be.

use std::io::{self, ErrorKind};
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

/// How long a send waits for a full member's socket to make room before the frame is dropped.
pub(crate) const SEND_WAIT: Duration = Duration::from_millis(250);

const SUFFIX: &str = ".sock";
/// Longer names are not a member's (ours are about 30 bytes); `sun_path` holds 108 with the
/// directory.
const MAX_NAME: usize = 64;

/// Whether `name` may be a member's socket file name: ours end in `.sock`, and a name must
/// stay inside the hub directory.
pub(crate) fn valid_name(name: &str) -> bool {
    name.len() > SUFFIX.len()
        && name.len() <= MAX_NAME
        && name.ends_with(SUFFIX)
        && !name.starts_with('.')
        && !name.contains('/')
        && !name.contains('\0')
}

/// A name for a new member: the process, the time and a counter, so that a process that
/// reuses a crashed one's pid does not pick the name the crashed one left behind.
pub(crate) fn new_name(attempt: u32) -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("m{}-{nanos:x}-{n}-{attempt}{SUFFIX}", std::process::id())
}

/// Whether someone is bound to the socket file at `path`, found by connecting to it (which
/// sends nothing); if nobody is — its process died — the file is removed. A probe that fails
/// otherwise (out of descriptors, say) counts the member alive: sending will tell.
fn alive(path: &Path) -> bool {
    let Ok(probe) = UnixDatagram::unbound() else {
        return true;
    };
    match probe.connect(path) {
        Err(e) if e.kind() == ErrorKind::ConnectionRefused => {
            // Another member may be removing it at the same moment; either removal will do.
            let _ = std::fs::remove_file(path);
            false
        }
        Err(e) if e.kind() == ErrorKind::NotFound => false,
        _ => true,
    }
}

/// What one datagram sent to every member came to.
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug)]
pub(crate) struct Sent {
    /// Members it reached.
    pub(crate) sent: u64,
    /// Members it did not reach (full past the wait, gone, or the datagram refused).
    pub(crate) dropped: u64,
}

struct Peer {
    name: String,
    /// The last send to it found its socket full: do not wait for it again until a send
    /// succeeds.
    congested: bool,
}

/// The other members of a hub, as this member knows them, and the sockets it sends from.
pub(crate) struct Members {
    dir: PathBuf,
    me: String,
    peers: Mutex<Vec<Peer>>,
    /// Unbound, blocking with a write timeout of [`SEND_WAIT`]: for members with room.
    patient: UnixDatagram,
    /// Unbound, non-blocking: for congested members, and to wake this member's own receiver.
    hasty: UnixDatagram,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // The list is names and flags; a panic elsewhere leaves it usable.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Members {
    /// The member `me` of the hub in `dir`, knowing no other member yet.
    pub(crate) fn new(dir: &Path, me: &str) -> io::Result<Members> {
        let patient = UnixDatagram::unbound()?;
        patient.set_write_timeout(Some(SEND_WAIT))?;
        let hasty = UnixDatagram::unbound()?;
        hasty.set_nonblocking(true)?;
        Ok(Members {
            dir: dir.to_path_buf(),
            me: me.to_owned(),
            peers: Mutex::new(Vec::new()),
            patient,
            hasty,
        })
    }

    /// This member's socket file name.
    pub(crate) fn me(&self) -> &str {
        &self.me
    }

    /// The path of member `name`'s socket.
    pub(crate) fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// How many other members this member knows.
    pub(crate) fn count(&self) -> usize {
        lock(&self.peers).len()
    }

    /// Member `name` said hello.
    pub(crate) fn add(&self, name: &str) {
        let mut peers = lock(&self.peers);
        if name != self.me && !peers.iter().any(|p| p.name == name) {
            peers.push(Peer {
                name: name.to_owned(),
                congested: false,
            });
        }
    }

    /// Member `name` said bye.
    pub(crate) fn remove(&self, name: &str) {
        lock(&self.peers).retain(|p| p.name != name);
    }

    /// Makes the list what the directory holds now: every member socket file but this
    /// member's own. A file new to the list is probed first, and removed if nobody is bound
    /// to it (a member that crashed), so that a stale file is never counted as a member.
    ///
    /// # Errors
    /// Reading the directory failed; the list is left as it was.
    pub(crate) fn rescan(&self) -> io::Result<()> {
        let known: Vec<String> = lock(&self.peers).iter().map(|p| p.name.clone()).collect();
        let mut found = Vec::new();
        for entry in std::fs::read_dir(&self.dir)? {
            let entry = entry?;
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            // A file of another type with a member's name is not a member: sending to it
            // would fail like a stale socket and get it removed.
            if !valid_name(&name) || name == self.me || !entry.file_type()?.is_socket() {
                continue;
            }
            if known.contains(&name) || alive(&entry.path()) {
                found.push(name);
            }
        }
        let mut peers = lock(&self.peers);
        let old = std::mem::take(&mut *peers);
        *peers = found
            .into_iter()
            .map(|name| {
                let congested = old.iter().any(|p| p.name == name && p.congested);
                Peer { name, congested }
            })
            .collect();
        Ok(())
    }

    /// Sends `datagram` to every other member. A member whose socket file has nobody bound to
    /// it (its process died) has its file removed; one whose file is gone is forgotten.
    pub(crate) fn broadcast(&self, datagram: &[u8]) -> Sent {
        let mut out = Sent::default();
        let mut peers = lock(&self.peers);
        peers.retain_mut(|p| {
            let path = self.dir.join(&p.name);
            let sock = if p.congested {
                &self.hasty
            } else {
                &self.patient
            };
            match sock.send_to(datagram, &path) {
                Ok(_) => {
                    out.sent += 1;
                    p.congested = false;
                    true
                }
                Err(e) => {
                    out.dropped += 1;
                    match e.kind() {
                        ErrorKind::WouldBlock | ErrorKind::TimedOut => {
                            p.congested = true;
                            true
                        }
                        ErrorKind::ConnectionRefused => {
                            // Nobody is bound to it: a member that crashed. Another member
                            // may be removing it at the same moment; either removal will do.
                            let _ = std::fs::remove_file(&path);
                            false
                        }
                        ErrorKind::NotFound => false,
                        // Anything else (the datagram too large for the sender's buffer, say)
                        // is about this datagram, not the member.
                        _ => true,
                    }
                }
            }
        });
        out
    }

    /// Sends an empty datagram to this member's own socket without waiting, so that its
    /// receiver wakes from `recv` (and sees that it is asked to stop). If the socket is full
    /// the receiver is awake anyway.
    pub(crate) fn wake_self(&self) {
        let _ = self.hasty.send_to(&[], self.dir.join(&self.me));
    }
}
