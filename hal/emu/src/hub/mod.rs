//! A wire that crosses process boundaries: [`Wire::join`](crate::Wire::join) makes a wire a
//! member of a *hub*, a directory that any process may join, and every frame a device on one
//! member's wire sends reaches the devices on every other member's wire.
//!
//! QEMU joins two netdevs across processes with `-netdev dgram` (a Unix or UDP datagram socket
//! each side) and many with `-netdev socket,mcast=` (a multicast group). A hub here is the
//! second shape built from the first: each member binds one Unix datagram socket in the hub
//! directory and sends every frame to each other member's socket ([`members`]), so there is no
//! daemon to start and nothing that the last member out must stop. Datagrams keep frame
//! boundaries, need no root, and hold a jumbo frame (up to [`msg::MAX_FRAME`] bytes) whole.
//!
//! A member's receiver is a thread ([`Link`]): it takes datagrams off the member's socket and
//! hands each frame to the wire, which delivers it to the local devices as its delivery mode
//! says (at once by default, so a process that only polls its completion queues gets its
//! frames). Dropping the [`Link`] stops the thread, removes the socket file and says bye.

pub(crate) mod members;
pub(crate) mod msg;

use std::io::{self, ErrorKind};
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use members::Members;
use msg::Msg;

/// How often a member's receiver rescans the hub directory (and, at most, how long it takes
/// to notice it is asked to stop if its wake-up datagram was lost).
const RESCAN: Duration = Duration::from_millis(250);
/// Binding attempts with fresh names before joining gives up (a name is taken only if another
/// member picked the same pid, nanoseconds and counter).
const BIND_ATTEMPTS: u32 = 8;

/// Where a member's receiver hands frames: the frame and whether its check sequence is good;
/// returns false when the wire is gone and the receiver should stop.
pub(crate) type Deliver = Box<dyn Fn(&[u8], bool) -> bool + Send>;

/// One wire's membership of a hub: the members it sends to and its receiver thread. Dropping
/// it leaves the hub.
pub(crate) struct Link {
    members: Arc<Members>,
    stop: Arc<AtomicBool>,
    receiver: Option<JoinHandle<()>>,
}

fn context(e: io::Error, what: String) -> io::Error {
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

impl Link {
    /// Joins the hub in directory `dir` (created if missing) and starts the receiver, which
    /// gives every frame from another member to `deliver`.
    ///
    /// # Errors
    /// Creating or reading the directory, binding the member's socket in it, or starting the
    /// thread failed; each error names the path.
    pub(crate) fn join(dir: &Path, deliver: Deliver) -> io::Result<Link> {
        std::fs::create_dir_all(dir).map_err(|e| {
            context(
                e,
                format!("creating the wire hub directory {}", dir.display()),
            )
        })?;
        let (me, sock) = bind(dir)?;
        let path = dir.join(&me);
        let cleanup = |e: io::Error| {
            let _ = std::fs::remove_file(&path);
            e
        };
        sock.set_read_timeout(Some(RESCAN))
            .map_err(|e| context(e, format!("setting up {}", path.display())))
            .map_err(cleanup)?;
        let members = Arc::new(
            Members::new(dir, &me)
                .map_err(|e| context(e, "opening the wire hub's sending sockets".into()))
                .map_err(cleanup)?,
        );
        members
            .rescan()
            .map_err(|e| {
                context(
                    e,
                    format!("reading the wire hub directory {}", dir.display()),
                )
            })
            .map_err(cleanup)?;
        // The rescan has removed the files of members that died; a member that dies now is
        // found by the hello.
        let mut hello = Vec::new();
        Msg::Hello(&me).emit(&mut hello);
        members.broadcast(&hello);
        let stop = Arc::new(AtomicBool::new(false));
        let (m, flag) = (members.clone(), stop.clone());
        let receiver = std::thread::Builder::new()
            .name("ringfab-wire-hub".into())
            .spawn(move || receive(&sock, &m, &flag, &*deliver))
            .map_err(|e| context(e, format!("starting the receiver of {}", path.display())))
            .map_err(cleanup)?;
        Ok(Link {
            members,
            stop,
            receiver: Some(receiver),
        })
    }

    /// The members this member sends to.
    pub(crate) fn members(&self) -> &Arc<Members> {
        &self.members
    }

    /// The path of this member's socket.
    pub(crate) fn socket_path(&self) -> PathBuf {
        self.members.path(self.members.me())
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        self.members.wake_self();
        if let Some(h) = self.receiver.take() {
            // The receiver itself drops the link when it held the wire's last reference; it
            // stops on its own once it sees the flag, and cannot wait for itself.
            if h.thread().id() != std::thread::current().id() {
                // A panic in the receiver has been reported already; nothing to add here.
                let _ = h.join();
            }
        }
        // Gone from the directory first, so that a member rescanning on our bye does not find
        // us again.
        let _ = std::fs::remove_file(self.socket_path());
        let mut bye = Vec::new();
        Msg::Bye(self.members.me()).emit(&mut bye);
        self.members.broadcast(&bye);
    }
}

/// Binds a new member's socket in `dir` under a fresh name.
fn bind(dir: &Path) -> io::Result<(String, UnixDatagram)> {
    let mut attempt = 0;
    loop {
        let name = members::new_name(attempt);
        let path = dir.join(&name);
        match UnixDatagram::bind(&path) {
            Ok(s) => return Ok((name, s)),
            Err(e) if e.kind() == ErrorKind::AddrInUse && attempt + 1 < BIND_ATTEMPTS => {
                attempt += 1;
            }
            Err(e) => {
                return Err(context(
                    e,
                    format!("binding the wire hub socket {}", path.display()),
                ))
            }
        }
    }
}

/// The receiver thread: datagrams in, frames to the wire, membership news to the list.
fn receive(
    sock: &UnixDatagram,
    members: &Members,
    stop: &AtomicBool,
    deliver: &dyn Fn(&[u8], bool) -> bool,
) {
    let mut buf = vec![0u8; msg::HEADER + msg::MAX_FRAME];
    let mut scanned = Instant::now();
    while !stop.load(Ordering::Acquire) {
        match sock.recv(&mut buf) {
            Ok(n) => match Msg::parse(&buf[..n]) {
                Some(Msg::Frame { frame, crc_ok }) => {
                    // Once asked to stop, a frame still queued is not delivered: the wire is
                    // leaving the hub, or gone.
                    let wire_alive = stop.load(Ordering::Acquire) || deliver(frame, crc_ok);
                    if !wire_alive {
                        return;
                    }
                }
                Some(Msg::Hello(name)) => members.add(name),
                Some(Msg::Bye(name)) => members.remove(name),
                // A wake-up (empty) or a stray datagram.
                None => {}
            },
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            // The socket is broken (it should not be); do not spin on it.
            Err(_) => std::thread::sleep(RESCAN),
        }
        if scanned.elapsed() >= RESCAN {
            // A failed rescan keeps the list as it was; the next one may succeed.
            let _ = members.rescan();
            scanned = Instant::now();
        }
    }
}

#[cfg(test)]
mod tests;
