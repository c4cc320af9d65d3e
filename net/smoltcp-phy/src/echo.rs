//! A TCP echo server and a client that checks the echo, on smoltcp's interface and sockets.
//!
//! Both are state machines the caller polls with the time (no thread, no timer, no
//! allocator), over any smoltcp [`Device`] — a [`RingDevice`] in
//! practice. [`EchoServer`] listens on a port, sends back every byte it receives (RFC 862),
//! and listens again once the peer has closed. [`EchoClient`] connects, sends a stream of
//! bytes made by [`pattern`], checks every byte that comes back against it, and closes. The
//! interface under each answers ARP and ICMP echo requests for its address by itself.
//!
//! [`serve`] runs a server on a NIC until the caller says stop: what a guest program (or a
//! bare-metal one) calls to be reached by another host's TCP stack.
//!
//! What is copied: smoltcp copies a segment's payload between the frame and the socket's
//! buffer (its sockets own their buffers), and the server copies what it echoes from the
//! socket's receive buffer to its transmit buffer through a small chunk on the stack.
//! The device itself copies nothing.

use smoltcp::iface::{Config as IfaceConfig, Interface, SocketHandle, SocketSet, SocketStorage};
use smoltcp::phy::Device;
use smoltcp::socket::tcp;
use smoltcp::time::{Duration, Instant};
use smoltcp::wire::{EthernetAddress, HardwareAddress, IpCidr, Ipv4Address, Ipv4Cidr};

use ringfab_hal::{MacAddr, Nic};

use crate::device::{Config, RingDevice};
use crate::{Error, Result};

/// Bytes the echo server moves from its receive to its transmit buffer per copy.
const CHUNK: usize = 1024;

/// Byte `offset` of the stream an [`EchoClient`] sends: a multiplicative hash of the offset,
/// so that a byte lost, repeated or moved anywhere in a long stream changes what arrives
/// there (a stream that repeated every 256 bytes would hide a shift by a multiple of 256).
pub fn pattern(offset: u64) -> u8 {
    (offset.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 56) as u8
}

/// The memory a TCP socket runs in: a slot in the socket set and the socket's receive and
/// transmit buffers (their sizes bound the TCP window each way).
pub struct SocketMemory<'s> {
    /// The socket set's slots (at least one).
    pub sockets: &'s mut [SocketStorage<'s>],
    /// The socket's receive buffer.
    pub rx: &'s mut [u8],
    /// The socket's transmit buffer.
    pub tx: &'s mut [u8],
}

/// An interface with one TCP socket.
struct Stack<'s> {
    iface: Interface,
    sockets: SocketSet<'s>,
    handle: SocketHandle,
}

impl<'s> Stack<'s> {
    fn new<Dev: Device + ?Sized>(
        device: &mut Dev,
        mac: MacAddr,
        addr: Ipv4Cidr,
        seed: u64,
        memory: SocketMemory<'s>,
        now: Instant,
    ) -> Result<Stack<'s>> {
        let ethernet = EthernetAddress(mac.0);
        // smoltcp's `Interface::new` panics on a group address; refused here instead.
        if !ethernet.is_unicast() {
            return Err(Error::NotUnicast { mac });
        }
        if memory.sockets.is_empty() || memory.rx.is_empty() || memory.tx.is_empty() {
            return Err(Error::SocketMemory);
        }
        let mut config = IfaceConfig::new(HardwareAddress::Ethernet(ethernet));
        config.random_seed = seed;
        let mut iface = Interface::new(config, device, now);
        iface.update_ip_addrs(|addrs| {
            // One address in an empty list: cannot be refused.
            let _ = addrs.push(IpCidr::Ipv4(addr));
        });
        let socket = tcp::Socket::new(
            tcp::SocketBuffer::new(memory.rx),
            tcp::SocketBuffer::new(memory.tx),
        );
        let mut sockets = SocketSet::new(memory.sockets);
        let handle = sockets.add(socket);
        Ok(Stack {
            iface,
            sockets,
            handle,
        })
    }

    fn socket(&mut self) -> &mut tcp::Socket<'s> {
        self.sockets.get_mut::<tcp::Socket<'s>>(self.handle)
    }

    fn poll<Dev: Device + ?Sized>(&mut self, device: &mut Dev, now: Instant) {
        self.iface.poll(now, device, &mut self.sockets);
    }

    fn poll_delay(&mut self, now: Instant) -> Option<Duration> {
        self.iface.poll_delay(now, &self.sockets)
    }
}

/// What an [`EchoServer`] has done.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
#[non_exhaustive]
pub struct ServerStats {
    /// Connections accepted.
    pub connections: u64,
    /// Bytes received and queued to be sent back.
    pub echoed: u64,
}

/// A TCP echo server (RFC 862) on one socket: one connection at a time.
pub struct EchoServer<'s> {
    stack: Stack<'s>,
    port: u16,
    stats: ServerStats,
    /// The socket was connected at the last poll (to count connections once).
    connected: bool,
}

impl<'s> EchoServer<'s> {
    /// An interface with address `addr` on `device` (whose station address is `mac`) and a
    /// socket listening on TCP port `port`.
    ///
    /// # Errors
    /// [`Error::NotUnicast`] for a group `mac`, [`Error::SocketMemory`] for empty memory,
    /// [`Error::Socket`] for port 0.
    pub fn new<Dev: Device + ?Sized>(
        device: &mut Dev,
        mac: MacAddr,
        addr: Ipv4Cidr,
        port: u16,
        memory: SocketMemory<'s>,
        now: Instant,
    ) -> Result<EchoServer<'s>> {
        let mut stack = Stack::new(device, mac, addr, u64::from(port), memory, now)?;
        stack
            .socket()
            .listen(port)
            .map_err(|_| Error::Socket { port })?;
        Ok(EchoServer {
            stack,
            port,
            stats: ServerStats::default(),
            connected: false,
        })
    }

    /// Moves frames (smoltcp's interface poll) and echoes what arrived; listens again once a
    /// connection is closed.
    pub fn poll<Dev: Device + ?Sized>(&mut self, device: &mut Dev, now: Instant) {
        self.stack.poll(device, now);
        let port = self.port;
        let socket = self.stack.socket();
        if socket.is_active() && !self.connected {
            self.connected = true;
            self.stats.connections += 1;
        }
        let mut chunk = [0u8; CHUNK];
        while socket.can_recv() {
            let room = socket.send_capacity() - socket.send_queue();
            if room == 0 {
                break;
            }
            let want = room.min(CHUNK);
            let Ok(n) = socket.recv_slice(&mut chunk[..want]) else {
                break;
            };
            if n == 0 {
                break;
            }
            // `room` bytes are free in the transmit buffer: all `n` are taken.
            let _ = socket.send_slice(&chunk[..n]);
            self.stats.echoed += n as u64;
        }
        // The peer closed its side and everything it sent is queued back: close ours.
        if socket.state() == tcp::State::CloseWait && !socket.can_recv() {
            socket.close();
        }
        if !socket.is_open() {
            self.connected = false;
            // Port `port` was accepted at `new`; a closed socket listens again.
            let _ = socket.listen(port);
        }
        // Push what was queued out now rather than at the next call.
        self.stack.poll(device, now);
    }

    /// How long the interface can wait before it must be polled again (a retransmission, a
    /// delayed ACK), if it has anything to wait for.
    pub fn poll_delay(&mut self, now: Instant) -> Option<Duration> {
        self.stack.poll_delay(now)
    }

    /// What the server has done.
    pub fn stats(&self) -> ServerStats {
        self.stats
    }

    /// The socket's TCP state (`Listen` while waiting for a connection).
    pub fn state(&mut self) -> tcp::State {
        self.stack.socket().state()
    }
}

/// Where an [`EchoClient`] is.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ClientState {
    /// Waiting for the connection to be established.
    Connecting,
    /// Sending and checking; `received` bytes have come back so far.
    Exchanging {
        /// Bytes echoed and checked so far.
        received: u64,
    },
    /// Every byte came back right; the connection is being closed.
    Closing,
    /// Done: every byte came back right and the connection is closed.
    Done,
    /// Byte `offset` came back as `got` instead of [`pattern`]`(offset)`.
    Mismatch {
        /// Offset in the stream.
        offset: u64,
        /// What arrived.
        got: u8,
    },
    /// The connection closed (a reset, a refusal, a timeout) after `received` bytes came
    /// back, before the exchange was done.
    Aborted {
        /// Bytes echoed and checked before the end.
        received: u64,
    },
}

impl ClientState {
    /// Whether the client has stopped (done, or failed).
    pub fn is_finished(self) -> bool {
        matches!(
            self,
            ClientState::Done | ClientState::Mismatch { .. } | ClientState::Aborted { .. }
        )
    }
}

/// A TCP client that sends `total` bytes of [`pattern`] to an echo server, checks every byte
/// that comes back, and closes.
pub struct EchoClient<'s> {
    stack: Stack<'s>,
    total: u64,
    sent: u64,
    received: u64,
    state: ClientState,
}

impl<'s> EchoClient<'s> {
    /// An interface with address `addr` on `device` (station address `mac`) and a socket
    /// connecting from `local_port` to `server`'s port `port`, to send `total` bytes.
    ///
    /// # Errors
    /// As [`EchoServer::new`]; [`Error::Socket`] if smoltcp refuses the connection's
    /// endpoints (a port 0, an unspecified address).
    #[allow(
        clippy::too_many_arguments,
        reason = "each is one fact of the connection; a struct would only rename them"
    )]
    pub fn new<Dev: Device + ?Sized>(
        device: &mut Dev,
        mac: MacAddr,
        addr: Ipv4Cidr,
        local_port: u16,
        server: (Ipv4Address, u16),
        total: u64,
        memory: SocketMemory<'s>,
        now: Instant,
    ) -> Result<EchoClient<'s>> {
        let mut stack = Stack::new(device, mac, addr, u64::from(local_port), memory, now)?;
        let Stack {
            iface,
            sockets,
            handle,
        } = &mut stack;
        sockets
            .get_mut::<tcp::Socket<'s>>(*handle)
            .connect(iface.context(), server, local_port)
            .map_err(|_| Error::Socket { port: server.1 })?;
        Ok(EchoClient {
            stack,
            total,
            sent: 0,
            received: 0,
            state: ClientState::Connecting,
        })
    }

    /// Moves frames, sends what fits, checks what came back; returns where the client is.
    pub fn poll<Dev: Device + ?Sized>(&mut self, device: &mut Dev, now: Instant) -> ClientState {
        self.stack.poll(device, now);
        if !self.state.is_finished() {
            self.step();
        }
        self.stack.poll(device, now);
        self.state
    }

    /// One step of the exchange on the socket as the last poll left it.
    fn step(&mut self) {
        let (total, received) = (self.total, self.received);
        let socket = self.stack.socket();
        let state = socket.state();
        match self.state {
            ClientState::Connecting if state == tcp::State::Established => {
                self.state = ClientState::Exchanging { received: 0 };
            }
            ClientState::Closing if matches!(state, tcp::State::TimeWait | tcp::State::Closed) => {
                self.state = ClientState::Done;
                return;
            }
            _ if !socket.is_open() => {
                self.state = ClientState::Aborted { received };
                return;
            }
            _ => {}
        }
        if !matches!(self.state, ClientState::Exchanging { .. }) {
            return;
        }
        let mut chunk = [0u8; CHUNK];
        while self.sent < total && socket.can_send() {
            let n = (total - self.sent).min(CHUNK as u64) as usize;
            for (i, b) in chunk[..n].iter_mut().enumerate() {
                *b = pattern(self.sent + i as u64);
            }
            match socket.send_slice(&chunk[..n]) {
                Ok(0) | Err(_) => break,
                Ok(k) => self.sent += k as u64,
            }
        }
        while socket.can_recv() {
            let Ok(n) = socket.recv_slice(&mut chunk) else {
                break;
            };
            if n == 0 {
                break;
            }
            for (i, &got) in chunk[..n].iter().enumerate() {
                let offset = self.received + i as u64;
                if offset >= total || got != pattern(offset) {
                    self.state = ClientState::Mismatch { offset, got };
                    socket.abort();
                    return;
                }
            }
            self.received += n as u64;
        }
        self.state = ClientState::Exchanging {
            received: self.received,
        };
        if self.received == total {
            socket.close();
            self.state = ClientState::Closing;
        }
    }

    /// How long the interface can wait before it must be polled again, if it has anything to
    /// wait for.
    pub fn poll_delay(&mut self, now: Instant) -> Option<Duration> {
        self.stack.poll_delay(now)
    }

    /// Bytes sent so far (queued to smoltcp's socket).
    pub fn sent(&self) -> u64 {
        self.sent
    }
}

/// Where and how [`serve`] runs its server.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub struct ServeConfig {
    /// The device's queues and frame size.
    pub device: Config,
    /// The server's address and prefix.
    pub addr: Ipv4Cidr,
    /// The TCP port to listen on (7 is echo's, RFC 862).
    pub port: u16,
}

impl ServeConfig {
    /// A server at `addr` on `port`, on queue 0 of the NIC with the device's defaults.
    pub fn new(addr: Ipv4Cidr, port: u16) -> ServeConfig {
        ServeConfig {
            device: Config::default(),
            addr,
            port,
        }
    }
}

/// Socket buffer bytes each way for the server [`serve`] runs (on its stack).
pub const SERVE_BUFFER: usize = 16 * 1024;

/// Runs a TCP echo server on `nic` (a [`RingDevice`] of `D` descriptors each way on the
/// queues `config` names) until `keep_going` says stop; returns what it did. `now` is the
/// clock (milliseconds that only grow); `keep_going` is asked after every poll with the
/// server's statistics and the device — a place to bound the run, to wait, or to pump an
/// emulated wire.
///
/// # Errors
/// What [`RingDevice::open`] and [`EchoServer::new`] return.
pub fn serve<N: Nic, const D: usize>(
    nic: &N,
    config: &ServeConfig,
    mut now: impl FnMut() -> Instant,
    mut keep_going: impl FnMut(&ServerStats, &RingDevice<'_, N, D>) -> bool,
) -> Result<ServerStats> {
    let mut device = RingDevice::<N, D>::open(nic, &config.device)?;
    let mut slots = [SocketStorage::EMPTY; 1];
    let mut rx = [0u8; SERVE_BUFFER];
    let mut tx = [0u8; SERVE_BUFFER];
    let memory = SocketMemory {
        sockets: &mut slots,
        rx: &mut rx,
        tx: &mut tx,
    };
    let mac = device.mac();
    let mut server = EchoServer::new(&mut device, mac, config.addr, config.port, memory, now())?;
    loop {
        server.poll(&mut device, now());
        if !keep_going(&server.stats(), &device) {
            return Ok(server.stats());
        }
    }
}
