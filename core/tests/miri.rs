//! Core's receive path, small enough to run under Miri with strict provenance
//! (`MIRIFLAGS=-Zmiri-strict-provenance cargo +nightly miri test -p ringfab --test miri`), and
//! run by `cargo test` as well.
//!
//! An endpoint on each driver over its null device (`ringfab_emu::null`: the device completes
//! every receive buffer at the doorbell with a 64-byte frame, synchronously, on the caller's
//! thread, and writes only descriptors and ring indices) posts receives into registered memory — owned (`Vec<u8>`),
//! lent (`register_raw`) and static — whose frames the test writes through the buffers before
//! posting, as a peer would have sent them. `cq.read` and `cq.read_owned` then take them through both lanes:
//! the framed lane (the header read in place through the buffer's `DmaHead`, the source from
//! it, the buffer handed back) and the general lane (the header copied out through the
//! buffer's `DmaSpan`: remote CQ data, a frame for another context, a broadcast). So Miri checks
//! every access core makes to registered memory, that owned memory is freed (Miri's leak check
//! is on: nothing here leaks), and the driver's and the null device's descriptor accesses —
//! each through a pointer that keeps its provenance.
//!
//! What it does not cover: the emulated devices with their background threads (their device
//! thread writes DMA memory the driver reads with volatile accesses, which Miri reports as the
//! data race real DMA formally is), interrupts and waiting, and transmit.

use std::ptr::{addr_of_mut, NonNull};
use std::sync::atomic::{AtomicUsize, Ordering};

use ringfab::av::{AvAttr, EpAddr, FiAddr};
use ringfab::cq::CqAttr;
use ringfab::domain::Domain;
use ringfab::entry::{Data, DataEntry, Msg, OpContext};
use ringfab::ep::EpAttr;
use ringfab::flags::{BindFlags, CompletionFlags, OpFlags};
use ringfab::hal::{MacAddr, Nic};
use ringfab::mr::Buf;
use ringfab::proto::{Encap, Header, ANY_CTX, HEADER_LEN, MAX_HEADER_LEN};
use ringfab::Capacities;
use ringfab_e1000e::E1000e;
use ringfab_emu::null::{NullPlatform, RX_FRAME_LEN};
use ringfab_emu::{E1000e82574, Igb82576, VirtioNetPci};
use ringfab_igb::Igb;
use ringfab_virtio_net::VirtioNet;

/// Ring depth: small, for Miri's sake.
const D: usize = 16;
/// Receive buffer size (the endpoint's `rx_buf_len`).
const SLOT: usize = 1024;
/// The payload of every frame the null device "receives" (64 bytes, less ringfab's header).
const PAYLOAD: usize = RX_FRAME_LEN as usize - HEADER_LEN;
/// The peer in the AV.
const PEER: EpAddr = EpAddr {
    mac: MacAddr([0x02, 0, 0, 0, 0, 0x01]),
    ctx: 3,
};
const RECV: CompletionFlags = CompletionFlags::RECV.union(CompletionFlags::MSG);
/// Bytes of each region: room for four buffers.
const REGION: usize = 4 * SLOT + 4096;

/// Memory that lives for ever, registered as such (`Memory::Static`): a piece per test.
static mut FOREVER: [[u8; REGION]; 3] = [[0; REGION]; 3];
/// Pieces of [`FOREVER`] handed out.
static PIECES: AtomicUsize = AtomicUsize::new(0);

/// A piece of [`FOREVER`] of its own.
fn forever() -> &'static mut [u8] {
    let i = PIECES.fetch_add(1, Ordering::Relaxed);
    assert!(i < 3, "a piece per test");
    // SAFETY: piece `i` is handed out once (the counter), so this is the only reference to it.
    unsafe { &mut *addr_of_mut!(FOREVER[i]) }
}

/// The frame `header` as a peer's NIC would have put it in a buffer.
fn frame(header: Header) -> Vec<u8> {
    let mut bytes = [0u8; MAX_HEADER_LEN];
    header.emit(Encap::Ethernet, &mut bytes).to_vec()
}

/// A plain message from [`PEER`] to `to`: what the framed lane takes.
fn plain(to: EpAddr) -> Header {
    Header {
        dst: to.mac,
        src: PEER.mac,
        dst_ctx: to.ctx,
        src_ctx: PEER.ctx,
        payload_len: PAYLOAD as u16,
        data: None,
        flow: 0,
    }
}

#[test]
fn igb_receives_into_registered_memory_complete_through_read_and_read_owned() {
    receives_complete(&Igb::new(NullPlatform::<Igb82576>::new()).unwrap());
}

#[test]
fn e1000e_receives_into_registered_memory_complete_through_read_and_read_owned() {
    receives_complete(&E1000e::new(NullPlatform::<E1000e82574>::new()).unwrap());
}

#[test]
fn virtio_net_receives_into_registered_memory_complete_through_read_and_read_owned() {
    receives_complete(&VirtioNet::new(NullPlatform::<VirtioNetPci>::new()).unwrap());
}

/// The test itself, on `nic`.
fn receives_complete<N: Nic>(nic: &N) {
    let caps = Capacities {
        queues: 2,
        cqs: 2,
        cq_size: 2 * D,
        mrs: 3,
        avs: 1,
        av_entries: 4,
    };
    let domain = Domain::<_, D>::with_capacities(nic, &caps);
    let attr = CqAttr {
        size: 2 * D,
        ..CqAttr::default()
    };
    let cq = domain.open_cq::<Data>(&attr).unwrap();
    let tx_cq = domain.open_cq::<Msg>(&attr).unwrap();
    let av = domain.open_av(&AvAttr::default()).unwrap();
    let mut peer = [FiAddr::NOTAVAIL];
    assert_eq!(av.insert(&domain, &[PEER], &mut peer), Ok(1));
    let mut ep = domain
        .endpoint(&EpAttr {
            rx_buf_len: SLOT as u32,
            ..EpAttr::default()
        })
        .unwrap();
    ep.bind_cq(&domain, &tx_cq, BindFlags::TRANSMIT).unwrap();
    ep.bind_cq(&domain, &cq, BindFlags::RECV).unwrap();
    ep.bind_av(&domain, &av).unwrap();
    ep.enable(&domain).unwrap();
    let me = ep.name();

    // Owned memory (freed by the region after it unmaps), lent memory (the test's, which
    // outlives the domain) and memory that lives for ever.
    let owned = domain.register(vec![0u8; REGION]).unwrap();
    let mut lent_mem = vec![0u8; REGION];
    // SAFETY: `lent_mem` is dropped after `domain` (declared after it: see the end of the
    // test) and touched only through the region's buffers meanwhile.
    let lent_ptr = NonNull::from(&mut lent_mem[..]).cast();
    let lent = domain
        // SAFETY: as above: `lent_mem` outlives the domain and is reached only through the
        // region's buffers.
        .register(unsafe { ringfab::mr::Memory::from_raw_parts(lent_ptr, REGION) })
        .unwrap();
    let forever = domain.register(forever()).unwrap();
    let alloc = |from: &ringfab::mr::MemoryRegion| from.alloc(&domain, SLOT).unwrap();
    let post = |mut buf: Buf<'_>, header: Header, context: usize| {
        buf.fill(0, SLOT, 0xee).unwrap();
        buf.write(0, &frame(header)).unwrap();
        ep.recvmsg(&domain, buf, OpContext(context), OpFlags::empty())
            .map_err(|(e, _)| e)
            .unwrap();
    };

    // Round 1, `read`: three plain frames (the framed lane), then one with remote CQ data
    // (the general lane: the header copied out), then a plain one again.
    for i in 0..3 {
        post(alloc(&owned), plain(me), 10 + i);
    }
    post(
        alloc(&lent),
        Header {
            data: Some(0xdead_beef),
            ..plain(me)
        },
        13,
    );
    post(alloc(&forever), plain(me), 14);
    let mut out = [DataEntry::default(); 8];
    assert_eq!(cq.read(&domain, &mut out), Ok(5));
    for (i, e) in out[..5].iter().enumerate() {
        assert_eq!(
            (e.op_context, e.len),
            (OpContext(10 + i), PAYLOAD),
            "entry {i}"
        );
    }
    assert_eq!(out[0].flags, RECV);
    assert_eq!(out[3].flags, RECV | CompletionFlags::REMOTE_CQ_DATA);
    assert_eq!(out[3].data, 0xdead_beef);
    assert_eq!(owned.outstanding(&domain), 0, "read dropped the buffers");

    // Round 2, `read_owned`: a frame for another context (posted again, never seen), a
    // broadcast (the general lane, FI_MULTICAST), and plain frames: the buffers come back with
    // their sources, holding what the device left in them.
    let other = EpAddr { ctx: 9, ..me };
    post(alloc(&owned), plain(other), 20);
    post(
        alloc(&owned),
        Header {
            dst: MacAddr::BROADCAST,
            dst_ctx: ANY_CTX,
            ..plain(me)
        },
        21,
    );
    post(alloc(&lent), plain(me), 22);
    let mut src = [FiAddr::NOTAVAIL; 8];
    let mut bufs: [Option<Buf<'_>>; 8] = Default::default();
    assert_eq!(cq.read_owned(&domain, &mut out, &mut src, &mut bufs), Ok(2));
    assert_eq!(
        (out[0].op_context, out[1].op_context),
        (OpContext(21), OpContext(22))
    );
    assert_eq!(out[0].flags, RECV | CompletionFlags::MULTICAST);
    assert_eq!(&src[..2], &[peer[0]; 2]);
    for b in bufs[..2].iter() {
        let b = b.as_ref().expect("a buffer back");
        let mut head = [0u8; HEADER_LEN];
        b.read(0, &mut head).unwrap();
        assert_eq!(
            Header::parse(Encap::Ethernet, &head, RX_FRAME_LEN as usize)
                .unwrap()
                .src,
            PEER.mac
        );
        let mut tail = [0u8; 4];
        b.read(SLOT - 4, &mut tail).unwrap();
        assert_eq!(tail, [0xee; 4], "the rest as written before posting");
        assert!(b.read(SLOT - 3, &mut tail).is_err(), "past the end");
    }
    // SAFETY: the buffer is owned here and the null device never writes a buffer.
    let bytes = unsafe { bufs[1].as_ref().unwrap().as_slice() };
    assert_eq!((bytes.len(), bytes[SLOT - 1]), (SLOT, 0xee));
    drop(bufs);

    // The frame for another context is still posted; closing the endpoint gives it back.
    ep.close(&domain).map_err(|(e, _)| e).unwrap();
    for mr in [owned, lent, forever] {
        assert_eq!(mr.outstanding(&domain), 0);
        mr.close(&domain).map_err(|(e, _)| e).unwrap();
    }
    drop(domain);
    drop(lent_mem);
}
