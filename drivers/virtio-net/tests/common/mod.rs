//! Helpers shared by the integration tests: emulated virtio-net devices on a wire, DMA byte
//! copies, frame builders, and empty completion values to size `poll` arrays with.
//!
//! Each test file compiles this module on its own and uses a different part of it.
#![allow(
    dead_code,
    reason = "each integration test crate uses its own subset of these helpers"
)]

use ringfab_emu::{EmuPlatform, EmuVirtioNet, VirtioNetModelConfig, Wire};
use ringfab_hal::{
    DmaRegion, Iova, MacAddr, Nic, Platform, Report, RxBuffer, RxCompletion, RxQueue, Token,
    TxCompletion, TxConfig, TxQueue, TxSegment,
};
use ringfab_virtio_net::VirtioNet;

pub(crate) const MAC_A: MacAddr = MacAddr([0x52, 0x54, 0x00, 0x00, 0x00, 0x0A]);
pub(crate) const MAC_B: MacAddr = MacAddr([0x52, 0x54, 0x00, 0x00, 0x00, 0x0B]);

/// Bytes of one receive or transmit buffer slot in the tests' DMA memory.
pub(crate) const BUF: usize = 2048;

pub(crate) const NO_TX: TxCompletion = TxCompletion {
    token: Token(u64::MAX),
    status: Ok(()),
};
pub(crate) const NO_RX: RxCompletion = RxCompletion {
    token: Token(u64::MAX),
    len: 0,
    status: Ok(()),
    rss: None,
};

/// The device configuration the tests start from: MAC `mac`, QEMU's defaults otherwise.
pub(crate) fn config(mac: MacAddr) -> VirtioNetModelConfig {
    let mut c = VirtioNetModelConfig::default();
    c.mac = mac;
    c
}

/// An emulated virtio-net device built from `config`, plugged into `wire`.
pub(crate) fn device_with(config: VirtioNetModelConfig, wire: &Wire) -> EmuVirtioNet {
    let dev = EmuVirtioNet::new(config);
    dev.connect(wire);
    dev
}

/// An emulated virtio-net device with MAC `mac`, plugged into `wire`.
pub(crate) fn device(mac: MacAddr, wire: &Wire) -> EmuVirtioNet {
    device_with(config(mac), wire)
}

/// Copies `bytes` into DMA memory at `offset` (8-byte words; the tail zero-padded).
pub(crate) fn write_bytes<D: DmaRegion>(dma: &D, offset: usize, bytes: &[u8]) {
    for (i, chunk) in bytes.chunks(8).enumerate() {
        let mut w = [0u8; 8];
        w[..chunk.len()].copy_from_slice(chunk);
        dma.write_u64(offset + 8 * i, u64::from_le_bytes(w));
    }
}

/// `len` bytes of DMA memory at `offset`.
pub(crate) fn read_bytes<D: DmaRegion>(dma: &D, offset: usize, len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 8);
    for i in 0..len.div_ceil(8) {
        out.extend_from_slice(&dma.read_u64(offset + 8 * i).to_le_bytes());
    }
    out.truncate(len);
    out
}

/// An Ethernet frame of the IEEE local experimental EtherType with a patterned payload.
pub(crate) fn frame(dst: MacAddr, src: MacAddr, payload_len: usize, seed: u8) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&dst.0);
    f.extend_from_slice(&src.0);
    f.extend_from_slice(&[0x88, 0xB5]); // IEEE local experimental EtherType
    f.extend((0..payload_len).map(|i| (i as u8).wrapping_mul(7).wrapping_add(seed)));
    f
}

/// IPv4 addresses and UDP ports of one flow.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(crate) struct Udp {
    pub(crate) src: [u8; 4],
    pub(crate) dst: [u8; 4],
    pub(crate) sport: u16,
    pub(crate) dport: u16,
}

impl Udp {
    /// The flow 10.0.0.1:`sport` → 10.0.0.2:`dport`.
    pub(crate) const fn ports(sport: u16, dport: u16) -> Udp {
        Udp {
            src: [10, 0, 0, 1],
            dst: [10, 0, 0, 2],
            sport,
            dport,
        }
    }

    /// The flow a received Ethernet/IPv4/UDP frame (no options, no VLAN) belongs to.
    pub(crate) fn of(f: &[u8]) -> Udp {
        let be16 = |at: usize| u16::from_be_bytes([f[at], f[at + 1]]);
        Udp {
            src: f[26..30].try_into().unwrap(),
            dst: f[30..34].try_into().unwrap(),
            sport: be16(34),
            dport: be16(36),
        }
    }
}

/// Offset of the UDP payload in a frame from [`udp_frame`].
pub(crate) const UDP_PAYLOAD: usize = 14 + 20 + 8;

/// An Ethernet/IPv4/UDP frame of `flow` carrying `payload` (IPv4 header checksum filled in,
/// UDP checksum zero: "not computed").
pub(crate) fn udp_frame(dst: MacAddr, src: MacAddr, flow: Udp, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&dst.0);
    f.extend_from_slice(&src.0);
    f.extend_from_slice(&[0x08, 0x00]);
    let udp_len = 8 + payload.len() as u16;
    let total = 20 + udp_len;
    f.extend_from_slice(&[0x45, 0]);
    f.extend_from_slice(&total.to_be_bytes());
    f.extend_from_slice(&[0, 1, 0x40, 0, 64, 17, 0, 0]);
    f.extend_from_slice(&flow.src);
    f.extend_from_slice(&flow.dst);
    f.extend_from_slice(&flow.sport.to_be_bytes());
    f.extend_from_slice(&flow.dport.to_be_bytes());
    f.extend_from_slice(&udp_len.to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(payload);
    // IPv4 header checksum.
    let mut sum = 0u32;
    for w in f[14..34].chunks(2) {
        sum += u32::from(u16::from_be_bytes([w[0], w[1]]));
    }
    while sum > 0xFFFF {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    let csum = !(sum as u16);
    f[24..26].copy_from_slice(&csum.to_be_bytes());
    f
}

/// Two devices on one wire, brought up.
pub(crate) struct Pair {
    pub(crate) wire: Wire,
    pub(crate) a: EmuVirtioNet,
    pub(crate) b: EmuVirtioNet,
    pub(crate) nic_a: VirtioNet<EmuPlatform>,
    pub(crate) nic_b: VirtioNet<EmuPlatform>,
}

/// Two devices built from `ca` and `cb` on one wire, brought up.
pub(crate) fn pair_with(ca: VirtioNetModelConfig, cb: VirtioNetModelConfig) -> Pair {
    let wire = Wire::new();
    let (a, b) = (device_with(ca, &wire), device_with(cb, &wire));
    let (nic_a, nic_b) = (
        VirtioNet::new(a.platform()).unwrap(),
        VirtioNet::new(b.platform()).unwrap(),
    );
    Pair {
        wire,
        a,
        b,
        nic_a,
        nic_b,
    }
}

/// Two devices with QEMU's defaults on one wire, brought up.
pub(crate) fn pair() -> Pair {
    pair_with(config(MAC_A), config(MAC_B))
}

/// Writes `f` into slot `slot` of `mem` and pushes it on `tx` as one segment.
pub(crate) fn push_frame<Q: TxQueue, D: DmaRegion>(
    tx: &mut Q,
    mem: &D,
    slot: usize,
    f: &[u8],
    token: u64,
    report: Report,
) {
    write_bytes(mem, slot * BUF, f);
    let seg = TxSegment {
        iova: Iova(mem.iova().0 + (slot * BUF) as u64),
        len: f.len() as u16,
    };
    tx.push(&[seg], Token(token), report).unwrap();
}

/// Sends each frame from A (queue 0) and runs the wire; every token comes back `Ok`.
pub(crate) fn send_all(p: &Pair, frames: &[Vec<u8>]) {
    let mut tx = p.nic_a.open_tx::<64>(0, TxConfig::default()).unwrap();
    let mem = p.nic_a.platform().alloc_dma(BUF * frames.len()).unwrap();
    for (i, f) in frames.iter().enumerate() {
        push_frame(&mut tx, &mem, i, f, i as u64, Report::Always);
    }
    tx.doorbell();
    p.wire.run_until_idle();
    let out = drain_tx(&mut tx);
    assert_eq!(out.len(), frames.len());
    assert!(out.iter().all(|c| c.status == Ok(())), "{out:?}");
}

/// The receive buffer of slot `slot` in `mem` (slots of [`BUF`] bytes).
pub(crate) fn rx_buf<D: DmaRegion>(mem: &D, slot: usize) -> RxBuffer {
    RxBuffer {
        iova: Iova(mem.iova().0 + (slot * BUF) as u64),
        len: BUF as u32,
    }
}

/// Posts `count` buffers of [`BUF`] bytes on `rx`, tokens 0.., token t in slot t of `mem`.
pub(crate) fn post<D: DmaRegion, Q: RxQueue>(rx: &mut Q, mem: &D, count: usize) {
    for t in 0..count {
        rx.push(rx_buf(mem, t), Token(t as u64)).unwrap();
    }
    rx.doorbell();
}

/// Every completion `tx` has now.
pub(crate) fn drain_tx<Q: TxQueue>(tx: &mut Q) -> Vec<TxCompletion> {
    let mut all = Vec::new();
    let mut out = [NO_TX; 16];
    loop {
        let n = tx.poll(&mut out);
        all.extend_from_slice(&out[..n]);
        if n < out.len() {
            return all;
        }
    }
}

/// Every completion `rx` has now, with the bytes of each good one (token t in slot t).
pub(crate) fn drain_rx<Q: RxQueue, D: DmaRegion>(
    rx: &mut Q,
    mem: &D,
) -> Vec<(RxCompletion, Vec<u8>)> {
    let mut all = Vec::new();
    let mut out = [NO_RX; 16];
    loop {
        let n = rx.poll(&mut out);
        for c in &out[..n] {
            let bytes = if c.status.is_ok() {
                read_bytes(mem, c.token.0 as usize * BUF, c.len as usize)
            } else {
                Vec::new()
            };
            all.push((*c, bytes));
        }
        if n < out.len() {
            return all;
        }
    }
}

/// `Nic` is used through the pair's drivers; this keeps the import honest in every test crate.
pub(crate) fn caps(nic: &VirtioNet<EmuPlatform>) -> ringfab_hal::Capabilities {
    nic.capabilities()
}
