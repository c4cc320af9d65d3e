//! The hard CQ on every emulated NIC with its real driver — the 82576 (igb), the 82574 (e1000e)
//! and virtio-net, each test once per NIC (`igb::…`, `e1000e::…`, `virtio_net::…`): two NICs
//! on one wire, A sending, B receiving, completions read straight from the rings. Where NICs
//! differ (how a receive error is made and reported, how full a ring gets) [`TestNic`] says
//! what to expect.

mod common;
use common::*;
use ringfab::av::FiAddr;
use ringfab::cq::{CompletionQueue, CqAttr, CqFormat};
use ringfab::domain::Domain;
use ringfab::entry::{
    BufAddr, ContextEntry, Data, DataEntry, ErrEntry, Format, Msg, MsgEntry, OpContext,
    TaggedEntry, ADDR_NOTAVAIL,
};
use ringfab::errdata::ErrDataOut;
use ringfab::flags::{BindFlags, CompletionFlags, CqFlags, OpFlags};
use ringfab::hal::{DmaRegion, Iova, Nic, Platform, RxBuffer, RxConfig, TxConfig, TxSegment};
use ringfab::path::{Path, RecvPost, SendPost};
use ringfab::strerror::SliceWriter;
use ringfab::{cntr::WaitObj, Capacities, Capacity, Error};
use ringfab_emu::{CorruptMode, DeviceFault, EmuDma, WireFault};

/// Ring depth of every path.
const D: usize = 64;
/// Bytes of one buffer slot.
const BUF: usize = 2048;
/// Buffer slots per DMA region: more than can be outstanding (≤ D), so `seq % SLOTS` never
/// names a buffer still in use.
const SLOTS: usize = 128;
/// Length of the test frames: 14-byte header + 100 bytes of payload.
const FRAME: usize = 114;
/// The flags of every successful receive entry.
const RECV_MSG: CompletionFlags = CompletionFlags::RECV.union(CompletionFlags::MSG);

/// A domain over `nic` with rings of `D` descriptors, `queues` hardware queues and `cqs` CQs of
/// up to `cq_size` entries (the other capacities the defaults).
fn domain<N: Nic>(nic: &N, queues: usize, cqs: usize, cq_size: usize) -> Domain<'_, N, D> {
    Domain::with_capacities(
        nic,
        &Capacities {
            queues,
            cqs,
            cq_size,
            ..Capacities::DEFAULT
        },
    )
}

/// A frame from A to B whose payload starts with `seq` (little-endian).
fn frame(seq: u64) -> Vec<u8> {
    let mut f = Vec::with_capacity(FRAME);
    f.extend_from_slice(&MAC_B.0);
    f.extend_from_slice(&MAC_A.0);
    f.extend_from_slice(&[0x88, 0xB5]);
    f.extend_from_slice(&seq.to_le_bytes());
    f.resize(FRAME, 0x5a);
    f
}

fn write_bytes(dma: &EmuDma, offset: usize, bytes: &[u8]) {
    for (i, chunk) in bytes.chunks(8).enumerate() {
        let mut w = [0u8; 8];
        w[..chunk.len()].copy_from_slice(chunk);
        dma.write_u64(offset + 8 * i, u64::from_le_bytes(w));
    }
}

fn rx_buf(mem: &EmuDma, seq: u64) -> RxBuffer {
    RxBuffer {
        iova: Iova(mem.iova().0 + ((seq as usize % SLOTS) * BUF) as u64),
        len: BUF as u32,
    }
}

fn recv(mem: &EmuDma, seq: u64) -> RecvPost {
    RecvPost {
        buf: rx_buf(mem, seq),
        len: BUF as u32,
        context: OpContext(seq as usize),
        flags: OpFlags::empty(),
    }
}

impl<T: TestNic> RawSender<'_, T> {
    /// Sends the frames `frame` makes of `seqs` ([`RawSender::send`]).
    fn send_seq(&mut self, p: &Pair<T>, seqs: core::ops::Range<u64>) {
        let frames: Vec<_> = seqs.map(frame).collect();
        self.send(p, &frames);
    }
}

fn msg_attr(size: usize) -> CqAttr {
    CqAttr {
        size,
        ..CqAttr::default()
    }
}

/// Everything readable now, `Again` excluded: `Ok` entries and `Err` error entries in the
/// order the CQ delivered them.
fn drain<N: Nic, F: Format>(
    dom: &Domain<'_, N, D>,
    cq: &mut CompletionQueue<N, F>,
) -> Vec<Result<F::Entry, ErrEntry>> {
    let mut all = Vec::new();
    let mut buf = [F::Entry::default(); 8];
    loop {
        match cq.read(dom, &mut buf) {
            Ok(n) => all.extend(buf[..n].iter().copied().map(Ok)),
            Err(Error::Avail) => {
                let mut e = ErrEntry::default();
                cq.readerr(dom, &mut e, None, 0).unwrap();
                all.push(Err(e));
            }
            Err(Error::Again) => return all,
            Err(e) => panic!("read failed: {e}"),
        }
    }
}

// ---- formats ----

/// The fields an entry of any format has, `None` where the format has no such field.
trait View: Copy {
    fn ctx(&self) -> usize;
    fn flags(&self) -> Option<CompletionFlags>;
    fn len(&self) -> Option<usize>;
    fn buf_data(&self) -> Option<(BufAddr, u64)>;
    fn tag(&self) -> Option<u64>;
}

impl View for ContextEntry {
    fn ctx(&self) -> usize {
        self.op_context.0
    }
    fn flags(&self) -> Option<CompletionFlags> {
        None
    }
    fn len(&self) -> Option<usize> {
        None
    }
    fn buf_data(&self) -> Option<(BufAddr, u64)> {
        None
    }
    fn tag(&self) -> Option<u64> {
        None
    }
}

impl View for MsgEntry {
    fn ctx(&self) -> usize {
        self.op_context.0
    }
    fn flags(&self) -> Option<CompletionFlags> {
        Some(self.flags)
    }
    fn len(&self) -> Option<usize> {
        Some(self.len)
    }
    fn buf_data(&self) -> Option<(BufAddr, u64)> {
        None
    }
    fn tag(&self) -> Option<u64> {
        None
    }
}

impl View for DataEntry {
    fn ctx(&self) -> usize {
        self.op_context.0
    }
    fn flags(&self) -> Option<CompletionFlags> {
        Some(self.flags)
    }
    fn len(&self) -> Option<usize> {
        Some(self.len)
    }
    fn buf_data(&self) -> Option<(BufAddr, u64)> {
        Some((self.buf, self.data))
    }
    fn tag(&self) -> Option<u64> {
        None
    }
}

impl View for TaggedEntry {
    fn ctx(&self) -> usize {
        self.op_context.0
    }
    fn flags(&self) -> Option<CompletionFlags> {
        Some(self.flags)
    }
    fn len(&self) -> Option<usize> {
        Some(self.len)
    }
    fn buf_data(&self) -> Option<(BufAddr, u64)> {
        Some((self.buf, self.data))
    }
    fn tag(&self) -> Option<u64> {
        Some(self.tag)
    }
}

/// Sends 5 frames A→B through core's poster and checks both CQs' entries in format `F`.
fn sends_and_receives_read_correctly_in<T: TestNic, F: Format>()
where
    F::Entry: View,
{
    let p = pair_of::<T>();
    let dom_a = domain(&p.nic_a, 1, 1, 16);
    let dom_b = domain(&p.nic_b, 1, 1, 16);
    let attr = CqAttr {
        size: 16,
        ..CqAttr::default()
    };
    let mut cq_a = dom_a.open_cq::<F>(&attr).unwrap();
    let mut cq_b = dom_b.open_cq::<F>(&attr).unwrap();
    let tx = dom_a.open_tx(0, TxConfig::default()).unwrap();
    let rx = dom_b.open_rx(0, RxConfig::new(BUF as u32)).unwrap();
    cq_a.bind(&dom_a, &tx, BindFlags::TRANSMIT).unwrap();
    cq_b.bind(&dom_b, &rx, BindFlags::RECV).unwrap();

    let rx_mem = p.b.platform().alloc_dma(BUF * SLOTS).unwrap();
    let tx_mem = p.a.platform().alloc_dma(BUF * SLOTS).unwrap();
    let posts: Vec<_> = (0..5).map(|s| recv(&rx_mem, 100 + s)).collect();
    assert_eq!(rx.post_recvs(&posts), Ok(5));
    send_frames(&p, &tx, &tx_mem, 0..5, &[FRAME - 10, FRAME, 70, 200, 60]);

    let sent = drain(&dom_a, &mut cq_a);
    let got = drain(&dom_b, &mut cq_b);
    assert_eq!(sent.len(), 5);
    assert_eq!(got.len(), 5);
    for (i, e) in sent.iter().enumerate() {
        let e = e.expect("no send fails");
        assert_eq!(e.ctx(), 1000 + i);
        if let Some(f) = e.flags() {
            assert_eq!(f, CompletionFlags::SEND | CompletionFlags::MSG);
        }
        if let Some(len) = e.len() {
            assert_eq!(len, 0, "len applies to receives only");
        }
    }
    let lens = [FRAME - 10, FRAME, 70, 200, 60];
    for (i, e) in got.iter().enumerate() {
        let e = e.expect("no receive fails");
        assert_eq!(e.ctx(), 100 + i);
        if let Some(f) = e.flags() {
            assert_eq!(f, CompletionFlags::RECV | CompletionFlags::MSG);
        }
        if let Some(len) = e.len() {
            assert_eq!(len, lens[i], "len is the frame's bytes");
        }
        if let Some((buf, data)) = e.buf_data() {
            assert_eq!(
                (buf, data),
                (BufAddr::NULL, 0),
                "no multi-receive, no CQ data"
            );
        }
        if let Some(tag) = e.tag() {
            assert_eq!(tag, 0, "no tagged messages");
        }
    }
    assert_eq!(
        (cq_a.credits(&dom_a), cq_b.credits(&dom_b)),
        (16, 16),
        "all credits back"
    );
}

/// Sends one frame per `seq` (context 1000 + seq) of the given lengths through core's poster.
fn send_frames<T: TestNic>(
    p: &Pair<T>,
    tx: &Path<'_, '_, T::Nic, D>,
    mem: &EmuDma,
    seqs: core::ops::Range<u64>,
    lens: &[usize],
) {
    let mut segs = Vec::new();
    for (i, seq) in seqs.clone().enumerate() {
        let mut f = frame(seq);
        f.resize(lens.get(i).copied().unwrap_or(FRAME), 0x5a);
        let off = (seq as usize % SLOTS) * BUF;
        write_bytes(mem, off, &f);
        segs.push([TxSegment {
            iova: Iova(mem.iova().0 + off as u64),
            len: f.len() as u16,
        }]);
    }
    let posts: Vec<_> = seqs
        .zip(&segs)
        .map(|(seq, s)| SendPost {
            segments: s,
            context: OpContext(1000 + seq as usize),
            flags: OpFlags::empty(),
        })
        .collect();
    assert_eq!(tx.post_sends(&posts), Ok(posts.len()));
    p.wire.run_until_idle();
}

fn context_format_reads_the_context_of_sends_and_receives<T: TestNic>() {
    sends_and_receives_read_correctly_in::<T, ringfab::entry::Context>();
}

fn msg_format_reads_context_flags_and_receive_len<T: TestNic>() {
    sends_and_receives_read_correctly_in::<T, Msg>();
}

fn data_format_adds_null_buf_and_zero_data<T: TestNic>() {
    sends_and_receives_read_correctly_in::<T, Data>();
}

fn tagged_format_adds_zero_tag<T: TestNic>() {
    sends_and_receives_read_correctly_in::<T, ringfab::entry::Tagged>();
}

// ---- order and exactly-once under faults ----

fn a_hundred_thousand_mixed_completions_arrive_once_each_in_posting_order<T: TestNic>() {
    const TOTAL: u64 = 100_000;
    const BATCH: u64 = 32;
    let p = pair_of::<T>();
    let dom_a = domain(&p.nic_a, 1, 1, 64);
    let dom_b = domain(&p.nic_b, 1, 1, 64);
    let mut cq_a = dom_a.open_cq::<Msg>(&msg_attr(64)).unwrap();
    let mut cq_b = dom_b.open_cq::<Msg>(&msg_attr(64)).unwrap();
    let tx = dom_a.open_tx(0, TxConfig::default()).unwrap();
    let rx = dom_b.open_rx(0, RxConfig::new(BUF as u32)).unwrap();
    cq_a.bind(&dom_a, &tx, BindFlags::TRANSMIT).unwrap();
    cq_b.bind(&dom_b, &rx, BindFlags::RECV).unwrap();
    let rx_mem = p.b.platform().alloc_dma(BUF * SLOTS).unwrap();
    let tx_mem = p.a.platform().alloc_dma(BUF * SLOTS).unwrap();

    // Receive errors the device reports: random bad CRCs where the NIC reports them; where a
    // bad frame never arrives, a refused receive status on one frame in every seven batches.
    if T::RX_CRC_ERROR.is_some() {
        p.wire.inject(WireFault::Random {
            seed: 0x5eed_cafe,
            drop_per_mille: 0,
            corrupt_per_mille: 30,
            duplicate_per_mille: 0,
            mode: CorruptMode::BadCrc,
        });
    }

    let (mut rx_seen, mut tx_seen) = (0u64, 0u64);
    let (mut crc_errors, mut length_errors, mut oversize_injected) = (0u64, 0u64, 0u64);
    let (mut status_errors, mut status_injected) = (0u64, 0u64);
    let mut seq = 0;
    while seq < TOTAL {
        let n = BATCH.min(TOTAL - seq);
        let posts: Vec<_> = (seq..seq + n).map(|s| recv(&rx_mem, s)).collect();
        assert_eq!(rx.post_recvs(&posts), Ok(n as usize));
        if seq % (BATCH * 7) == 0 {
            // A device lie about the length of one of the next write-backs.
            p.b.inject(DeviceFault::OversizeLength {
                queue: Some(0),
                count: 1,
                extra: 64,
            });
            oversize_injected += 1;
        }
        if T::RX_CRC_ERROR.is_none() && seq % (BATCH * 7) == BATCH * 3 {
            // Never in a batch with a length lie, which the driver would report instead.
            T::rx_error_next(&p);
            status_injected += 1;
        }
        send_frames(&p, &tx, &tx_mem, seq..seq + n, &[]);
        seq += n;

        for e in drain(&dom_a, &mut cq_a) {
            let e = e.expect("no transmit fails");
            assert_eq!(
                e.op_context.0 as u64,
                1000 + tx_seen,
                "sends in order, once"
            );
            tx_seen += 1;
        }
        for e in drain(&dom_b, &mut cq_b) {
            let ctx = match e {
                Ok(ok) => {
                    assert_eq!(ok.len, FRAME);
                    ok.op_context.0
                }
                Err(err) => {
                    assert_eq!(err.err, Error::Io.errno());
                    match err.prov_errno {
                        1 => crc_errors += 1,
                        2 => length_errors += 1,
                        4 => status_errors += 1,
                        other => panic!("unexpected prov_errno {other}"),
                    }
                    err.op_context.0
                }
            };
            assert_eq!(ctx as u64, rx_seen, "receives in posting order, once each");
            rx_seen += 1;
        }
    }
    assert_eq!(
        (tx_seen, rx_seen),
        (TOTAL, TOTAL),
        "every completion arrived"
    );
    assert_eq!(length_errors, oversize_injected);
    if T::RX_CRC_ERROR.is_some() {
        assert!(crc_errors > 0 && length_errors > 0, "both error kinds met");
        assert_eq!(status_errors, 0);
        // A corrupted frame the device also lies about is reported as the lie (the driver
        // checks the length first), so CRC errors are the corrupted frames minus at most those.
        let corrupted = p.wire.stats().corrupted;
        assert!(crc_errors <= corrupted && corrupted - crc_errors <= length_errors);
        assert!(
            crc_errors > corrupted * 9 / 10,
            "{crc_errors} of {corrupted}"
        );
    } else {
        assert!(
            status_errors > 0 && length_errors > 0,
            "both error kinds met"
        );
        assert_eq!((crc_errors, status_errors), (0, status_injected));
    }
    assert_eq!(
        (cq_a.credits(&dom_a), cq_b.credits(&dom_b)),
        (64, 64),
        "no credit leaked"
    );
}

// ---- the error queue ----

/// The capacities of the domains over B that [`rig_b`] opens in: two hardware queues, two CQs
/// of up to 2 × D entries.
const RIG_CAPS: Capacities = Capacities {
    queues: 2,
    cqs: 2,
    cq_size: 2 * D,
    ..Capacities::DEFAULT
};

/// Receive queue 0 of `dom` (a domain over B) bound to a new `Msg` CQ of `size`, and memory on
/// B for its buffers.
fn rig_b<'d, 'n, T: TestNic>(
    p: &Pair<T>,
    dom: &'d Domain<'n, T::Nic, D>,
    size: usize,
) -> (
    CompletionQueue<T::Nic, Msg>,
    Path<'d, 'n, T::Nic, D>,
    EmuDma,
) {
    let cq = dom.open_cq::<Msg>(&msg_attr(size)).unwrap();
    let rx = dom.open_rx(0, RxConfig::new(BUF as u32)).unwrap();
    cq.bind(dom, &rx, BindFlags::RECV).unwrap();
    (cq, rx, p.b.platform().alloc_dma(BUF * SLOTS).unwrap())
}

fn post_n<N: Nic>(rx: &Path<'_, '_, N, D>, mem: &EmuDma, seqs: core::ops::Range<u64>) {
    let posts: Vec<_> = seqs.map(|s| recv(mem, s)).collect();
    assert_eq!(rx.post_recvs(&posts), Ok(posts.len()));
}

fn contexts(entries: &[MsgEntry]) -> Vec<usize> {
    entries.iter().map(|e| e.op_context.0).collect()
}

fn error_at_head_gives_earlier_successes_then_avail_then_readerr_then_the_rest<T: TestNic>() {
    let p = pair_of::<T>();
    let dom = Domain::<_, D>::with_capacities(&p.nic_b, &RIG_CAPS);
    let (mut cq, rx, mem) = rig_b(&p, &dom, 16);
    let mut sender = RawSender::new(&p);
    post_n(&rx, &mem, 0..5);
    sender.send_seq(&p, 0..2);
    T::rx_error_next(&p);
    sender.send_seq(&p, 2..5);

    // One read polls all five: two delivered, the error and the two behind it kept in order.
    let mut out = [MsgEntry::default(); 8];
    assert_eq!(cq.read(&dom, &mut out), Ok(2));
    assert_eq!(contexts(&out[..2]), [0, 1]);
    assert_eq!(cq.read(&dom, &mut out), Err(Error::Avail));
    assert_eq!(
        cq.read(&dom, &mut out),
        Err(Error::Avail),
        "until readerr takes it"
    );
    let mut e = ErrEntry::default();
    cq.readerr(&dom, &mut e, None, 0).unwrap();
    assert_eq!(e.op_context, OpContext(2));
    assert_eq!(e.err, 5, "EIO, positive");
    assert_eq!(e.flags, CompletionFlags::RECV | CompletionFlags::MSG);
    assert_eq!(
        (e.prov_errno, e.len),
        (T::rx_error(FRAME).0, T::rx_error(FRAME).2),
        "a frame error keeps the checked length, a refused status none"
    );
    assert_eq!(cq.readerr(&dom, &mut e, None, 0).err(), Some(Error::Again));
    assert_eq!(cq.read(&dom, &mut out), Ok(2));
    assert_eq!(contexts(&out[..2]), [3, 4]);
    assert_eq!(cq.read(&dom, &mut out), Err(Error::Again));
}

fn readerr_is_again_while_a_success_is_at_the_head_and_badflags_with_flags<T: TestNic>() {
    let p = pair_of::<T>();
    let dom = Domain::<_, D>::with_capacities(&p.nic_b, &RIG_CAPS);
    let (mut cq, rx, mem) = rig_b(&p, &dom, 16);
    let mut sender = RawSender::new(&p);
    post_n(&rx, &mem, 0..2);
    sender.send_seq(&p, 0..1);
    T::rx_error_next(&p);
    sender.send_seq(&p, 1..2);
    let mut e = ErrEntry::default();
    assert_eq!(
        cq.readerr(&dom, &mut e, None, 1).err(),
        Some(Error::BadFlags)
    );
    // Count 0 moves the success into the aux queue: a success is now at the head.
    assert_eq!(cq.read(&dom, &mut []), Ok(0));
    assert_eq!(cq.readerr(&dom, &mut e, None, 0).err(), Some(Error::Again));
    let mut out = [MsgEntry::default(); 1];
    assert_eq!(cq.read(&dom, &mut out), Ok(1));
    assert_eq!(cq.read(&dom, &mut out), Err(Error::Avail));
    assert!(cq.readerr(&dom, &mut e, None, 0).is_ok());
}

fn read_with_count_zero_is_zero_when_something_is_queued_and_again_when_not<T: TestNic>() {
    let p = pair_of::<T>();
    let dom = Domain::<_, D>::with_capacities(&p.nic_b, &RIG_CAPS);
    let (cq, rx, mem) = rig_b(&p, &dom, 16);
    let mut sender = RawSender::new(&p);
    assert_eq!(cq.read(&dom, &mut []), Err(Error::Again));
    post_n(&rx, &mem, 0..1);
    sender.send_seq(&p, 0..1);
    assert_eq!(cq.read(&dom, &mut []), Ok(0));
    assert_eq!(
        cq.read(&dom, &mut []),
        Ok(0),
        "still queued: nothing consumed"
    );
    let mut out = [MsgEntry::default(); 4];
    assert_eq!(cq.read(&dom, &mut out), Ok(1));
    assert_eq!(cq.read(&dom, &mut []), Err(Error::Again));
}

fn readerr_copies_err_data_into_the_callers_buffer_or_points_at_the_cqs_own<T: TestNic>() {
    let p = pair_of::<T>();
    let dom = Domain::<_, D>::with_capacities(&p.nic_b, &RIG_CAPS);
    let (mut cq, rx, mem) = rig_b(&p, &dom, 16);
    let mut sender = RawSender::new(&p);
    post_n(&rx, &mem, 0..2);
    T::rx_error_next(&p);
    sender.send_seq(&p, 0..1);
    T::rx_error_next(&p);
    sender.send_seq(&p, 1..2);
    let mut out = [MsgEntry::default(); 4];
    let (kind, bits, _) = T::rx_error(FRAME);
    let n = bits.len();

    // Caller buffer: a copy, err_data keeps the caller's pointer.
    assert_eq!(cq.read(&dom, &mut out), Err(Error::Avail));
    let mut user = [0xaau8; 16];
    let user_addr = user.as_ptr() as usize;
    let mut e = ErrEntry::default();
    assert_eq!(
        cq.readerr(&dom, &mut e, Some(&mut user), 0),
        Ok(ErrDataOut::Copied(n))
    );
    assert_eq!((e.err_data, e.err_data_size), (BufAddr(user_addr), n));
    assert_eq!(&user[..n], &bits);
    assert_eq!(user[n], 0xaa, "nothing past the data");
    assert_eq!(e.prov_errno, kind, "the receive error's kind");
    assert_eq!((e.olen, e.src_addr), (0, ADDR_NOTAVAIL));

    // No buffer: err_data points at the CQ's own copy, kept while the borrow lives.
    assert_eq!(cq.read(&dom, &mut out), Err(Error::Avail));
    let mut e = ErrEntry::default();
    let data = cq.readerr(&dom, &mut e, None, 0).unwrap();
    let ErrDataOut::Provider(s) = data else {
        panic!("expected the CQ's buffer, got {data:?}")
    };
    assert_eq!(s, &bits);
    assert_eq!(
        (e.err_data, e.err_data_size),
        (BufAddr(s.as_ptr() as usize), n)
    );
    let s = s.to_vec();

    // strerror names the bit with the NIC's table, or shows the status it refused.
    let mut text = [0u8; 128];
    let mut w = SliceWriter::new(&mut text);
    cq.strerror(&dom, Some(Error::Io), e.prov_errno, &s, &mut w)
        .unwrap();
    let want = match T::RX_CRC_ERROR {
        Some(bits) => {
            let name = p.nic_b.rx_error_name(bits.trailing_zeros()).unwrap();
            format!("input/output error: receive frame error: {name}")
        }
        None => format!(
            "input/output error: device wrote an invalid receive status {:#x}",
            T::RX_GARBAGE_STATUS
        ),
    };
    assert_eq!(w.finish(), want);
}

fn a_frame_longer_than_the_posted_length_is_etrunc_with_olen<T: TestNic>() {
    let p = pair_of::<T>();
    let dom = Domain::<_, D>::with_capacities(&p.nic_b, &RIG_CAPS);
    let (mut cq, rx, mem) = rig_b(&p, &dom, 16);
    let mut sender = RawSender::new(&p);
    let post = RecvPost {
        len: 50,
        ..recv(&mem, 7)
    };
    assert_eq!(rx.post_recvs(&[post]), Ok(1));
    sender.send_seq(&p, 0..1);
    let mut out = [MsgEntry::default(); 4];
    assert_eq!(cq.read(&dom, &mut out), Err(Error::Avail));
    let mut e = ErrEntry::default();
    let mut user = [0u8; 8];
    assert_eq!(
        cq.readerr(&dom, &mut e, Some(&mut user), 0),
        Ok(ErrDataOut::Copied(0))
    );
    assert_eq!(e.op_context, OpContext(7));
    assert_eq!(e.err, 265, "FI_ETRUNC");
    assert_eq!((e.len, e.olen), (50, FRAME - 50));
    assert_eq!(
        (e.prov_errno, e.err_data_size),
        (0, 0),
        "ringfab's own error"
    );
    assert_eq!(cq.credits(&dom), 16);
}

fn a_device_length_lie_is_an_eio_error_entry_with_both_lengths<T: TestNic>() {
    let p = pair_of::<T>();
    let dom = Domain::<_, D>::with_capacities(&p.nic_b, &RIG_CAPS);
    let (mut cq, rx, mem) = rig_b(&p, &dom, 16);
    let mut sender = RawSender::new(&p);
    post_n(&rx, &mem, 0..1);
    p.b.inject(DeviceFault::OversizeLength {
        queue: Some(0),
        count: 1,
        extra: 10,
    });
    sender.send_seq(&p, 0..1);
    let mut out = [MsgEntry::default(); 4];
    assert_eq!(cq.read(&dom, &mut out), Err(Error::Avail));
    let mut e = ErrEntry::default();
    let mut user = [0u8; 16];
    assert_eq!(
        cq.readerr(&dom, &mut e, Some(&mut user), 0),
        Ok(ErrDataOut::Copied(8))
    );
    assert_eq!((e.err, e.prov_errno, e.len), (5, 2, 0));
    let room = T::rx_room(BUF as u32);
    assert_eq!(user[..4], (room + 10).to_le_bytes());
    assert_eq!(user[4..8], room.to_le_bytes());
}

// ---- credits and overrun ----

fn posting_beyond_the_cqs_credits_is_again_and_no_completion_is_lost<T: TestNic>() {
    let p = pair_of::<T>();
    let dom = Domain::<_, D>::with_capacities(&p.nic_b, &RIG_CAPS);
    let (cq, rx, mem) = rig_b(&p, &dom, 4);
    let mut sender = RawSender::new(&p);
    let posts: Vec<_> = (0..6).map(|s| recv(&mem, s)).collect();
    assert_eq!(
        rx.post_recvs(&posts),
        Ok(4),
        "only as many as the CQ can owe"
    );
    assert_eq!(rx.post_recvs(&posts[4..]), Err(Error::Again));
    assert_eq!(cq.credits(&dom), 0);
    sender.send_seq(&p, 0..4);
    let mut out = [MsgEntry::default(); 8];
    assert_eq!(cq.read(&dom, &mut out), Ok(4));
    assert_eq!(contexts(&out[..4]), [0, 1, 2, 3]);
    assert_eq!(cq.credits(&dom), 4, "delivery releases the credits");
    assert_eq!(rx.post_recvs(&posts[4..]), Ok(2));
}

fn a_full_ring_is_again_and_gives_the_credit_back<T: TestNic>() {
    let p = pair_of::<T>();
    let dom = Domain::<_, D>::with_capacities(&p.nic_b, &RIG_CAPS);
    let (cq, rx, mem) = rig_b(&p, &dom, 2 * D);
    let posts: Vec<_> = (0..D as u64 + 1).map(|s| recv(&mem, s)).collect();
    let posted = rx.post_recvs(&posts).unwrap();
    if T::RING_KEEPS_ONE_EMPTY {
        assert_eq!(posted, D - 1, "the ring keeps one descriptor empty");
    } else {
        assert_eq!(posted, D, "every descriptor id is one buffer");
    }
    assert_eq!(rx.post_recvs(&posts[posted..]), Err(Error::Again));
    assert_eq!(
        cq.credits(&dom),
        2 * D - posted,
        "the refused post holds no credit"
    );
}

/// fi_cq(3): "Read operations will continue to return any valid, non-corrupted completions,
/// if available. After all valid completions have been retrieved, any attempt to read the CQ
/// will result in it returning an FI_EOVERRUN error event. Overrun completion queues are
/// considered fatal and may not be used to report additional completions once the overrun
/// occurs." A receive posted before the overrun whose frame arrives after it is such an
/// additional completion: it is never reported.
fn an_overrun_cq_reports_nothing_that_completed_after_the_overrun<T: TestNic>() {
    let p = pair_of::<T>();
    let dom = Domain::<_, D>::with_capacities(&p.nic_b, &RIG_CAPS);
    let (mut cq, rx, mem) = rig_b(&p, &dom, 4);
    let mut sender = RawSender::new(&p);
    post_n(&rx, &mem, 0..3);
    // Two frames complete before the overrun; the third receive is still posted.
    sender.send_seq(&p, 0..2);
    // Three receives owe three credits; one uncredited entry fits, the next overruns.
    assert_eq!(
        cq.report_uncredited(&dom, OpContext::NULL, Error::AddrNotAvail),
        Ok(())
    );
    assert_eq!(
        cq.report_uncredited(&dom, OpContext::NULL, Error::AddrNotAvail),
        Err(Error::Overrun)
    );
    // After the overrun: the third frame arrives.
    sender.send_seq(&p, 2..3);

    let mut got = Vec::new();
    let mut out = [MsgEntry::default(); 8];
    let mut e = ErrEntry::default();
    loop {
        match cq.read(&dom, &mut out) {
            Ok(n) => got.extend(contexts(&out[..n])),
            Err(Error::Avail) => {
                cq.readerr(&dom, &mut e, None, 0).unwrap();
                assert_eq!(e.op_context, OpContext::NULL);
            }
            Err(Error::Overrun) => break,
            other => panic!("read: {other:?}"),
        }
    }
    assert_eq!(
        got,
        [0, 1],
        "what completed before the overrun, and nothing after"
    );
    assert_eq!(cq.read(&dom, &mut out), Err(Error::Overrun), "for good");
}

fn an_uncredited_entry_finding_no_room_overruns_valid_entries_first_then_overrun_for_good<
    T: TestNic,
>() {
    let p = pair_of::<T>();
    let dom = Domain::<_, D>::with_capacities(&p.nic_b, &RIG_CAPS);
    let (mut cq, rx, mem) = rig_b(&p, &dom, 4);
    let mut sender = RawSender::new(&p);
    post_n(&rx, &mem, 0..2);
    sender.send_seq(&p, 0..2);
    // Two receives owe two slots; two more fit, the fifth entry overruns.
    assert_eq!(
        cq.report_uncredited(&dom, OpContext::NULL, Error::AddrNotAvail),
        Ok(())
    );
    assert_eq!(
        cq.report_uncredited(&dom, OpContext::NULL, Error::AddrNotAvail),
        Ok(())
    );
    assert!(!cq.is_overrun(&dom));
    assert_eq!(
        cq.report_uncredited(&dom, OpContext::NULL, Error::AddrNotAvail),
        Err(Error::Overrun)
    );
    assert!(cq.is_overrun(&dom));
    assert_eq!(
        rx.post_recvs(&[recv(&mem, 9)]),
        Err(Error::OpBadState),
        "an overrun CQ takes no new operations"
    );

    // Everything valid comes out first, in order.
    let mut out = [MsgEntry::default(); 8];
    let mut e = ErrEntry::default();
    for _ in 0..2 {
        assert_eq!(cq.read(&dom, &mut out), Err(Error::Avail));
        cq.readerr(&dom, &mut e, None, 0).unwrap();
        assert_eq!((e.err, e.op_context), (99, OpContext::NULL));
    }
    assert_eq!(
        cq.read(&dom, &mut out),
        Ok(2),
        "receives posted before the overrun"
    );
    assert_eq!(contexts(&out[..2]), [0, 1]);
    for _ in 0..3 {
        assert_eq!(cq.read(&dom, &mut out), Err(Error::Overrun));
        assert_eq!(cq.read(&dom, &mut []), Err(Error::Overrun));
        assert_eq!(
            cq.readerr(&dom, &mut e, None, 0).err(),
            Some(Error::Overrun)
        );
    }
}

// ---- selective completion ----

fn selective_completion_reports_only_requested_sends_and_releases_every_credit<T: TestNic>() {
    let p = pair_of::<T>();
    let dom = domain(&p.nic_a, 1, 1, 64);
    let cq = dom.open_cq::<Msg>(&msg_attr(64)).unwrap();
    let tx = dom.open_tx(0, TxConfig::default()).unwrap();
    cq.bind(
        &dom,
        &tx,
        BindFlags::TRANSMIT | BindFlags::SELECTIVE_COMPLETION,
    )
    .unwrap();
    let mem = p.a.platform().alloc_dma(BUF * SLOTS).unwrap();
    write_bytes(&mem, 0, &frame(0));
    let seg = [TxSegment {
        iova: mem.iova(),
        len: FRAME as u16,
    }];
    let mut reported = Vec::new();
    let mut out = [MsgEntry::default(); 64];
    for round in 0..20u64 {
        // Every fifth send asks for its completion.
        let posts: Vec<_> = (0..40u64)
            .map(|i| SendPost {
                segments: &seg,
                context: OpContext((round * 40 + i) as usize),
                flags: if i % 5 == 4 {
                    OpFlags::COMPLETION
                } else {
                    OpFlags::empty()
                },
            })
            .collect();
        assert_eq!(tx.post_sends(&posts), Ok(40));
        p.wire.run_until_idle();
        while let Ok(n) = cq.read(&dom, &mut out) {
            reported.extend(contexts(&out[..n]));
        }
    }
    let want: Vec<usize> = (0..800).filter(|i| i % 5 == 4).collect();
    assert_eq!(reported, want);
    assert_eq!(
        cq.credits(&dom),
        64,
        "silent successes gave their credits back"
    );
}

// ---- round robin over several paths ----

fn read_takes_turns_between_bound_paths_and_keeps_each_ones_order<T: TestNic>() {
    let p = pair_of::<T>();
    let dom = domain(&p.nic_a, 2, 1, 64);
    let cq = dom.open_cq::<Msg>(&msg_attr(64)).unwrap();
    let tx0 = dom.open_tx(0, TxConfig::default()).unwrap();
    let tx1 = dom.open_tx(1, TxConfig::default()).unwrap();
    cq.bind(&dom, &tx0, BindFlags::TRANSMIT).unwrap();
    cq.bind(&dom, &tx1, BindFlags::TRANSMIT).unwrap();
    let mem = p.a.platform().alloc_dma(BUF).unwrap();
    write_bytes(&mem, 0, &frame(0));
    let seg = [TxSegment {
        iova: mem.iova(),
        len: FRAME as u16,
    }];
    for (tx, base) in [(&tx0, 0), (&tx1, 100)] {
        let posts: Vec<_> = (0..8)
            .map(|i| SendPost {
                segments: &seg,
                context: OpContext(base + i),
                flags: OpFlags::empty(),
            })
            .collect();
        assert_eq!(tx.post_sends(&posts), Ok(8));
    }
    p.wire.run_until_idle();
    let mut out = [MsgEntry::default(); 4];
    let mut batches = Vec::new();
    while let Ok(n) = cq.read(&dom, &mut out) {
        batches.push(contexts(&out[..n]));
    }
    assert_eq!(
        batches,
        [
            vec![0, 1, 2, 3],
            vec![100, 101, 102, 103],
            vec![4, 5, 6, 7],
            vec![104, 105, 106, 107]
        ]
    );
}

/// fi_endpoint(3): "An endpoint may only be bound to a single CQ or counter for a given type
/// of operation." A receive path unbound from one CQ and bound to another reports to the
/// second alone — also what each CQ's mask of serving paths (`CqSlot::paths`) must follow
/// through an unbind.
fn a_path_bound_again_to_another_cq_is_read_by_that_cq_and_not_the_first<T: TestNic>() {
    let p = pair_of::<T>();
    let dom = domain(&p.nic_b, 4, 2, 16);
    let mut first = dom.open_cq::<Msg>(&msg_attr(16)).unwrap();
    let mut second = dom.open_cq::<Msg>(&msg_attr(16)).unwrap();
    // A path slot other than the first: the receive queue is the domain's second path.
    let tx = dom.open_tx(0, TxConfig::default()).unwrap();
    let rx = dom.open_rx(0, RxConfig::new(BUF as u32)).unwrap();
    first.bind(&dom, &tx, BindFlags::TRANSMIT).unwrap();
    first.bind(&dom, &rx, BindFlags::RECV).unwrap();
    first.unbind(&dom, &rx).unwrap();
    second.bind(&dom, &rx, BindFlags::RECV).unwrap();
    let mem = p.b.platform().alloc_dma(BUF * SLOTS).unwrap();
    post_n(&rx, &mem, 0..3);
    RawSender::new(&p).send_seq(&p, 0..3);
    assert_eq!(
        drain(&dom, &mut first).len(),
        0,
        "the first CQ no longer reads it"
    );
    let got = drain(&dom, &mut second);
    assert_eq!(
        got.iter()
            .map(|e| e.map(|e| e.op_context.0))
            .collect::<Vec<_>>(),
        [Ok(0), Ok(1), Ok(2)]
    );
}

// ---- bind, close ----

fn close_while_bound_is_busy_and_after_unbind_succeeds_discarding_what_is_left<T: TestNic>() {
    let p = pair_of::<T>();
    let dom = domain(&p.nic_b, 1, 1, 16);
    let cq = dom.open_cq::<Msg>(&msg_attr(16)).unwrap();
    let rx = dom.open_rx(0, RxConfig::new(BUF as u32)).unwrap();
    cq.bind(&dom, &rx, BindFlags::RECV).unwrap();
    let mem = p.b.platform().alloc_dma(BUF * SLOTS).unwrap();
    let mut sender = RawSender::new(&p);
    post_n(&rx, &mem, 0..3);
    assert_eq!(
        cq.unbind(&dom, &rx),
        Err(Error::Busy),
        "operations outstanding"
    );
    T::rx_error_next(&p);
    sender.send_seq(&p, 0..3);
    let mut out = [MsgEntry::default(); 4];
    assert_eq!(
        cq.read(&dom, &mut out),
        Err(Error::Avail),
        "three entries queued"
    );
    let (err, cq) = cq.close(&dom).unwrap_err();
    assert_eq!(err, Error::Busy);
    assert_eq!(
        cq.read(&dom, &mut out),
        Err(Error::Avail),
        "still usable after Busy"
    );
    let (err, rx) = rx.close().unwrap_err();
    assert_eq!(err, Error::Busy, "a bound path is busy too");
    assert_eq!(
        cq.bind(&dom, &rx, BindFlags::RECV),
        Err(Error::Inval),
        "bound twice"
    );
    assert_eq!(
        dom.open_rx(1, RxConfig::new(BUF as u32)).err(),
        Some(Error::Full(Capacity::Queues)),
        "the domain's one hardware queue is taken"
    );

    assert_eq!(
        cq.unbind(&dom, &rx),
        Ok(()),
        "every operation has completed"
    );
    assert!(
        cq.close(&dom).is_ok(),
        "closed, the three entries discarded"
    );

    let cq = dom.open_cq::<Msg>(&msg_attr(16)).unwrap();
    assert_eq!(cq.index(), 0, "the same slot");
    assert_eq!(
        cq.read(&dom, &mut out),
        Err(Error::Again),
        "nothing carried over"
    );
    assert_eq!(cq.credits(&dom), 16);
    assert!(rx.close().is_ok(), "an unbound path closes");
}

fn bind_needs_the_paths_direction_and_posting_needs_a_binding<T: TestNic>() {
    let p = pair_of::<T>();
    let dom = domain(&p.nic_b, 1, 1, 16);
    let cq = dom.open_cq::<Msg>(&msg_attr(16)).unwrap();
    let rx = dom.open_rx(0, RxConfig::new(BUF as u32)).unwrap();
    let mem = p.b.platform().alloc_dma(BUF * SLOTS).unwrap();
    assert_eq!(rx.post_recvs(&[recv(&mem, 0)]), Err(Error::NoCq));
    assert_eq!(cq.bind(&dom, &rx, BindFlags::TRANSMIT), Err(Error::Inval));
    assert_eq!(
        cq.read(&dom, &mut [MsgEntry::default()]),
        Err(Error::Again),
        "unbound: Again"
    );
    cq.bind(&dom, &rx, BindFlags::TRANSMIT | BindFlags::RECV)
        .unwrap();
    assert_eq!(rx.post_recvs(&[recv(&mem, 0)]), Ok(1));
}

// ---- open ----

/// What opening a CQ of format `F` with `attr` returns (its size, or the error), on a fresh
/// domain over B that holds one CQ of up to `cq_size` entries.
fn open_result<T: TestNic, F: Format>(
    p: &Pair<T>,
    cq_size: usize,
    attr: &CqAttr,
) -> Result<usize, Error> {
    let caps = Capacities {
        queues: 1,
        cqs: 1,
        cq_size,
        ..Capacities::DEFAULT
    };
    let dom = Domain::<_, D>::with_capacities(&p.nic_b, &caps);
    dom.open_cq::<F>(attr).map(|cq| cq.attr().size())
}

fn invalid_attributes_at_open_return_the_specs_errors<T: TestNic>() {
    let p = pair_of::<T>();
    let base = msg_attr(16);
    let max = ringfab::cq::CqLimits::default().max_size;
    let cases = [
        (
            "unknown flag bit",
            CqAttr {
                flags: CqFlags::from_bits_retain(1 << 43),
                ..base
            },
            Error::BadFlags,
        ),
        (
            "size above the maximum",
            CqAttr {
                size: max + 1,
                ..base
            },
            Error::Inval,
        ),
        (
            "negative affinity vector",
            CqAttr {
                flags: CqFlags::AFFINITY,
                signaling_vector: -1,
                ..base
            },
            Error::Inval,
        ),
        (
            "wait set without a set",
            CqAttr {
                wait_obj: WaitObj::Set,
                ..base
            },
            Error::Inval,
        ),
        (
            "fd wait without fds",
            CqAttr {
                wait_obj: WaitObj::Fd,
                ..base
            },
            Error::NoSys,
        ),
        (
            "FI_WAIT_SET opened outside a wait set",
            CqAttr {
                wait_obj: WaitObj::Set,
                wait_set: Some(ringfab::cq::WaitSetId(1)),
                ..base
            },
            Error::Inval,
        ),
        (
            "format other than the queue's",
            CqAttr {
                format: CqFormat::Data,
                ..base
            },
            Error::Inval,
        ),
        (
            "size above the domain's cq_size",
            CqAttr { size: 17, ..base },
            Error::Full(Capacity::CqSize),
        ),
    ];
    for (what, attr, want) in cases {
        assert_eq!(open_result::<T, Msg>(&p, 16, &attr), Err(want), "{what}");
    }
    assert_eq!(
        open_result::<T, ringfab::entry::Context>(&p, 1025, &CqAttr::default()),
        Ok(1024),
        "size 0 means the default 1024 entries"
    );
    assert_eq!(
        open_result::<T, ringfab::entry::Context>(&p, 16, &CqAttr::default()),
        Ok(16),
        "…or the domain's cq_size where that is smaller"
    );
    assert_eq!(
        open_result::<T, ringfab::entry::Context>(&p, 1024, &CqAttr::default()),
        Ok(1024),
        "UNSPEC is the context format"
    );
    assert_eq!(open_result::<T, Msg>(&p, 16, &base), Ok(16));
}

fn cancel_all_turns_unfilled_receives_into_ecanceled_entries_and_frees_the_path<T: TestNic>() {
    let p = pair_of::<T>();
    let dom = Domain::<_, D>::with_capacities(&p.nic_b, &RIG_CAPS);
    let (mut cq, rx, mem) = rig_b(&p, &dom, 16);
    let mut sender = RawSender::new(&p);
    post_n(&rx, &mem, 0..4);
    sender.send_seq(&p, 0..1);
    assert_eq!(
        cq.unbind(&dom, &rx),
        Err(Error::Busy),
        "four receives outstanding"
    );
    rx.cancel_all();
    let got = drain(&dom, &mut cq);
    assert_eq!(got.len(), 4);
    assert_eq!(
        got[0].map(|e| e.op_context),
        Ok(OpContext(0)),
        "the filled one completes"
    );
    for (i, e) in got[1..].iter().enumerate() {
        let e = e.expect_err("unfilled receives are canceled");
        assert_eq!(e.op_context, OpContext(i + 1));
        assert_eq!(
            (e.err, e.prov_errno, e.len),
            (125, 5, 0),
            "FI_ECANCELED, receive flushed"
        );
    }
    assert_eq!(cq.credits(&dom), 16);
    assert_eq!(cq.unbind(&dom, &rx), Ok(()));
    post_n_fails_without_cq(&rx, &mem);
}

fn post_n_fails_without_cq<N: Nic>(rx: &Path<'_, '_, N, D>, mem: &EmuDma) {
    assert_eq!(rx.post_recvs(&[recv(mem, 0)]), Err(Error::NoCq));
}

fn domain_and_handles_can_be_shared_between_threads<T: TestNic>() {
    fn shared<T: Send + Sync>() {}
    shared::<Domain<'static, T::Nic, D>>();
    shared::<Path<'static, 'static, T::Nic, D>>();
    shared::<CompletionQueue<T::Nic, Msg>>();
}

fn a_failed_send_that_asked_for_no_completion_still_reports_its_error_with_context<T: TestNic>() {
    let p = pair_of::<T>();
    let dom = domain(&p.nic_a, 1, 1, 16);
    let mut cq = dom.open_cq::<Msg>(&msg_attr(16)).unwrap();
    let tx = dom.open_tx(0, TxConfig::default()).unwrap();
    cq.bind(
        &dom,
        &tx,
        BindFlags::TRANSMIT | BindFlags::SELECTIVE_COMPLETION,
    )
    .unwrap();
    let mem = p.a.platform().alloc_dma(BUF).unwrap();
    // The guard page after `mem` is never mapped: the device's read faults and the ring stalls
    // (the Intel NICs) or the device stops until a reset (virtio), as the driver suite's IOMMU
    // tests show, so none of the frames is ever sent.
    let seg = [TxSegment {
        iova: Iova(mem.iova().0 + mem.len() as u64),
        len: FRAME as u16,
    }];
    let posts: Vec<_> = (0..3)
        .map(|i| SendPost {
            segments: &seg,
            context: OpContext(50 + i),
            flags: OpFlags::empty(),
        })
        .collect();
    assert_eq!(tx.post_sends(&posts), Ok(3));
    p.wire.run_until_idle();
    tx.cancel_all();
    let got = drain(&dom, &mut cq);
    let errs: Vec<_> = got
        .iter()
        .map(|e| e.map_err(|e| (e.op_context.0, e.err, e.prov_errno, e.flags)))
        .collect();
    let flags = CompletionFlags::SEND | CompletionFlags::MSG;
    assert_eq!(
        errs,
        [
            Err((50, 125, 6, flags)),
            Err((51, 125, 6, flags)),
            Err((52, 125, 6, flags))
        ]
    );
    assert_eq!(cq.credits(&dom), 16);
}

fn a_failed_receive_that_asked_for_no_completion_still_reports_its_error_with_context<
    T: TestNic,
>() {
    let p = pair_of::<T>();
    let dom = domain(&p.nic_b, 1, 1, 16);
    let mut cq = dom.open_cq::<Msg>(&msg_attr(16)).unwrap();
    let rx = dom.open_rx(0, RxConfig::new(BUF as u32)).unwrap();
    cq.bind(&dom, &rx, BindFlags::RECV | BindFlags::SELECTIVE_COMPLETION)
        .unwrap();
    let mem = p.b.platform().alloc_dma(BUF * SLOTS).unwrap();
    let mut sender = RawSender::new(&p);
    // Receives 0 and 2 ask for no completion; 1 and 3 do.
    let posts: Vec<_> = (0..4)
        .map(|s| RecvPost {
            flags: if s % 2 == 1 {
                OpFlags::COMPLETION
            } else {
                OpFlags::empty()
            },
            ..recv(&mem, s)
        })
        .collect();
    assert_eq!(rx.post_recvs(&posts), Ok(4));
    sender.send_seq(&p, 0..2);
    T::rx_error_next(&p);
    sender.send_seq(&p, 2..4);
    let got: Vec<_> = drain(&dom, &mut cq)
        .iter()
        .map(|e| match e {
            Ok(ok) => Ok(ok.op_context.0),
            Err(err) => Err((err.op_context.0, err.err, err.prov_errno)),
        })
        .collect();
    assert_eq!(got, [Ok(1), Err((2, 5, T::rx_error(FRAME).0)), Ok(3)]);
    assert_eq!(
        cq.credits(&dom),
        16,
        "the silent success gave its credit back"
    );
}

/// The read path's fast lane (a plain success for the next slot, written straight into the
/// caller's array) and its general lane (anything else: here a receive that accepts less than
/// its buffer, and an error) interleaved: every entry once, in posting order, with its own
/// context and length, through arrays of 1, 3 and 64 entries, with sources for `readfrom`.
fn fast_and_general_completions_interleaved_keep_order_and_fields<T: TestNic>() {
    let p = pair_of::<T>();
    let dom = Domain::<_, D>::with_capacities(&p.nic_b, &RIG_CAPS);
    let (mut cq, rx, mem) = rig_b(&p, &dom, 64);
    let mut sender = RawSender::new(&p);
    for round in 0..3u64 {
        let base = round * 20;
        // Every third receive accepts less than its buffer (still more than the frame): not
        // plain, so it takes the general lane and must not be overtaken.
        let posts: Vec<_> = (base..base + 20)
            .map(|s| RecvPost {
                len: if s % 3 == 0 {
                    FRAME as u32 + 1
                } else {
                    BUF as u32
                },
                ..recv(&mem, s)
            })
            .collect();
        assert_eq!(rx.post_recvs(&posts), Ok(20));
        sender.send_seq(&p, base..base + 7);
        T::rx_error_next(&p);
        sender.send_seq(&p, base + 7..base + 20);

        let width = [1, 3, 64][round as usize];
        let (mut got, mut errors) = (Vec::new(), Vec::new());
        let mut out = vec![MsgEntry::default(); width];
        let mut src = vec![FiAddr(7); width];
        loop {
            match cq.readfrom(&dom, &mut out, &mut src) {
                Ok(n) => {
                    assert!(n <= width);
                    for (e, a) in out[..n].iter().zip(&src[..n]) {
                        assert_eq!((e.flags, e.len), (RECV_MSG, FRAME), "entry {e:?}");
                        assert_eq!(*a, FiAddr::NOTAVAIL, "an unframed receive has no source");
                        got.push(e.op_context.0 as u64);
                    }
                }
                Err(Error::Avail) => {
                    let mut e = ErrEntry::default();
                    cq.readerr(&dom, &mut e, None, 0).unwrap();
                    errors.push(e.op_context.0 as u64);
                    got.push(e.op_context.0 as u64);
                }
                Err(Error::Again) => break,
                Err(e) => panic!("readfrom: {e}"),
            }
        }
        assert_eq!(got, (base..base + 20).collect::<Vec<_>>(), "width {width}");
        assert_eq!(errors, [base + 7]);
    }
    assert_eq!(cq.credits(&dom), 64, "every credit back");
}

/// A device that completes receives out of order (virtio may, §2.7.13) takes the general
/// lane for whatever is not next in line, and everything after it in the same poll: every
/// buffer completes once, with its own context, in the order the device returned them.
#[test]
fn out_of_order_receives_on_virtio_each_complete_once_with_their_own_context() {
    out_of_order_receives_each_complete_once::<VirtioNic>();
}

fn out_of_order_receives_each_complete_once<T: TestNic>() {
    let p = pair_of::<T>();
    let dom = Domain::<_, D>::with_capacities(&p.nic_b, &RIG_CAPS);
    let (cq, rx, mem) = rig_b(&p, &dom, 64);
    let mut sender = RawSender::new(&p);
    p.b.inject(DeviceFault::CompleteOutOfOrder {
        ring: Some(ringfab_emu::Ring::Rx(0)),
        count: usize::MAX,
    });
    let mut got = Vec::new();
    for round in 0..4u64 {
        let seqs = round * 40..round * 40 + 40;
        post_n(&rx, &mem, seqs.clone());
        sender.send_seq(&p, seqs);
        p.b.step();
        let mut out = [MsgEntry::default(); 16];
        while let Ok(n) = cq.read(&dom, &mut out) {
            for e in &out[..n] {
                assert_eq!((e.flags, e.len), (RECV_MSG, FRAME));
                got.push(e.op_context.0 as u64);
            }
        }
    }
    // The emulated device holds each used entry back until the next one is written: it
    // returns 1, 0, 3, 2, … — and so must the CQ (order per queue is completion order).
    let device_order: Vec<u64> = (0..160).map(|i| i ^ 1).collect();
    assert_eq!(got, device_order);
    assert_eq!(cq.credits(&dom), 64);
}

on_every_nic!(
    context_format_reads_the_context_of_sends_and_receives,
    msg_format_reads_context_flags_and_receive_len,
    data_format_adds_null_buf_and_zero_data,
    tagged_format_adds_zero_tag,
    a_hundred_thousand_mixed_completions_arrive_once_each_in_posting_order,
    error_at_head_gives_earlier_successes_then_avail_then_readerr_then_the_rest,
    readerr_is_again_while_a_success_is_at_the_head_and_badflags_with_flags,
    read_with_count_zero_is_zero_when_something_is_queued_and_again_when_not,
    readerr_copies_err_data_into_the_callers_buffer_or_points_at_the_cqs_own,
    a_frame_longer_than_the_posted_length_is_etrunc_with_olen,
    a_device_length_lie_is_an_eio_error_entry_with_both_lengths,
    posting_beyond_the_cqs_credits_is_again_and_no_completion_is_lost,
    a_full_ring_is_again_and_gives_the_credit_back,
    an_uncredited_entry_finding_no_room_overruns_valid_entries_first_then_overrun_for_good,
    an_overrun_cq_reports_nothing_that_completed_after_the_overrun,
    selective_completion_reports_only_requested_sends_and_releases_every_credit,
    read_takes_turns_between_bound_paths_and_keeps_each_ones_order,
    a_path_bound_again_to_another_cq_is_read_by_that_cq_and_not_the_first,
    close_while_bound_is_busy_and_after_unbind_succeeds_discarding_what_is_left,
    bind_needs_the_paths_direction_and_posting_needs_a_binding,
    invalid_attributes_at_open_return_the_specs_errors,
    cancel_all_turns_unfilled_receives_into_ecanceled_entries_and_frees_the_path,
    domain_and_handles_can_be_shared_between_threads,
    a_failed_send_that_asked_for_no_completion_still_reports_its_error_with_context,
    a_failed_receive_that_asked_for_no_completion_still_reports_its_error_with_context,
    fast_and_general_completions_interleaved_keep_order_and_fields,
);
