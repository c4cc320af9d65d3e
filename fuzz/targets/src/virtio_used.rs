//! `virtio_used_ring`: virtio-net's receive queue against a device whose used ring the fuzzer
//! writes.
//!
//! One emulated virtio-net-pci (`ringfab-emu`) brought up by the real driver, receive queue 0
//! opened (8 entries, 2 KiB buffers). The fuzzer interleaves the driver's pushes (a fresh token
//! each), doorbells, polls of any batch size and flushes (a queue reset the device
//! acknowledges) with the device's used-ring writes: an element at any slot with any id (in
//! range, out of range, one already back, one repeated) and any length, the used index moved
//! forward, backwards or far, and honest frames from the device model itself. Checked: no
//! panic; every completion names a token pushed and not yet back (none twice, none never
//! pushed), its length at most the buffer, 0 for an error other than a truncation; after a
//! last flush, every token pushed is back and nothing is pending.

use std::collections::HashSet;

use ringfab_emu::{EmuVirtioNet, VirtioNetModelConfig};
use ringfab_hal::{
    DmaRegion, Iova, Nic, Platform, Queue, RxBuffer, RxCompletion, RxConfig, RxError, RxQueue,
    Token,
};
use ringfab_virtio_net::VirtioNet;

use crate::Bytes;

const DEPTH: usize = 8;
const BUF: u32 = 2048;

/// Runs one input (see the module docs).
pub fn run(data: &[u8]) {
    let mut b = Bytes::new(data);
    let dev = EmuVirtioNet::new(VirtioNetModelConfig::default());
    let nic = VirtioNet::new(dev.platform()).expect("the default device comes up");
    let before = dev.rings();
    let mut rx = nic
        .open_rx::<DEPTH>(0, RxConfig::new(BUF))
        .expect("queue 0");
    // The used ring that appeared with the queue: receive queue 0's.
    let Some(&(used, _)) = dev.rings().iter().find(|r| !before.contains(r)) else {
        panic!("receive queue 0 has no used ring");
    };
    let mem = nic
        .platform()
        .alloc_dma(BUF as usize * 256)
        .expect("buffers");
    let mut next = 0u64;
    let mut out_set = HashSet::new();
    let mut back = HashSet::new();
    let mut out = [RxCompletion {
        token: Token(u64::MAX),
        len: 0,
        status: Ok(()),
        rss: None,
        checksum: ringfab_hal::RxChecksum::NONE,
    }; DEPTH];
    let mut take = |rx: &mut _, max: usize, out_set: &mut HashSet<u64>| {
        let n = RxQueue::poll(rx, &mut out[..max.clamp(1, DEPTH)]);
        for c in &out[..n] {
            let t = c.token.0;
            assert!(back.insert(t), "token {t} came back twice");
            assert!(out_set.remove(&t), "token {t} was never pushed");
            assert!(c.len <= BUF, "{c:?}: longer than its buffer");
            if !matches!(c.status, Ok(()) | Err(RxError::Truncated { .. })) {
                assert_eq!(c.len, 0, "{c:?}: an error has no length");
            }
        }
        n
    };
    let mut used_idx = 0u16;
    while let Some(op) = b.u8() {
        match op % 7 {
            0 | 1 => {
                if rx.free() > 0 && next < 256 {
                    let buf = RxBuffer {
                        iova: Iova(mem.iova().0 + next * u64::from(BUF)),
                        len: BUF,
                    };
                    if rx.push(buf, Token(next)).is_ok() {
                        out_set.insert(next);
                        next += 1;
                    }
                }
                if op & 0x80 != 0 {
                    rx.doorbell();
                }
            }
            2 => {
                let max = usize::from(b.u8().unwrap_or(8));
                take(&mut rx, max, &mut out_set);
            }
            3 => {
                rx.flush();
                used_idx = 0;
            }
            4 => {
                // A used element: slot, id, length.
                let (Some(slot), Some(id), Some(len)) = (b.u8(), b.u8(), b.u32()) else {
                    break;
                };
                let id = match id >> 6 {
                    0 => u32::from(id) % DEPTH as u32,
                    1 => DEPTH as u32 + u32::from(id & 0x3f),
                    2 => u32::from(id) << 24,
                    _ => u32::MAX,
                };
                let at = 4 + 8 * u64::from(slot % DEPTH as u8);
                let mut elem = [0u8; 8];
                elem[..4].copy_from_slice(&id.to_le_bytes());
                elem[4..].copy_from_slice(&len.to_le_bytes());
                dev.device_write(Iova(used.0 + at), &elem);
            }
            5 => {
                // The used index: forward, backwards or anywhere.
                let Some(d) = b.u16() else { break };
                used_idx = match d >> 14 {
                    0 => used_idx.wrapping_add(d & 0xf),
                    1 => used_idx.wrapping_sub(d & 0xf),
                    _ => d,
                };
                dev.device_write(Iova(used.0 + 2), &used_idx.to_le_bytes());
            }
            _ => {
                // An honest frame from the device model, of the fuzzer's length.
                let len = 14 + usize::from(b.u8().unwrap_or(0)) * 8;
                let mut f = vec![0x5au8; len];
                f[..6].copy_from_slice(&dev.mac().0);
                dev.receive(&f);
            }
        }
    }
    // The device's lies end; a flush takes everything back, once.
    rx.flush();
    while take(&mut rx, DEPTH, &mut out_set) > 0 {}
    assert_eq!(rx.pending(), 0, "tokens left after the flush");
    assert!(out_set.is_empty(), "tokens never back: {out_set:?}");
}
