//! The guest half of ringfab's QEMU tests: runs inside the QEMU guest that `ringfab-qemu-tests`
//! boots, binds the NICs (two 82576, two 82574, two virtio-net) to vfio-pci, drives them with
//! `ringfab-igb`, `ringfab-e1000e` and `ringfab-virtio-net` over `ringfab-vfio`, and prints one
//! line per test on the serial console:
//!
//! ```text
//! ringfab-guest: plan N
//! ringfab-guest: pass NAME DETAIL
//! ringfab-guest: fail NAME REASON
//! ringfab-guest: done
//! ```
//!
//! The NICs' PCI addresses come from the kernel command line (`ringfab.igb=A,B`,
//! `ringfab.e1000e=A,B`, `ringfab.virtio=A,B`), their MACs as QEMU sets them from
//! `ringfab.<model>_macs=A,B`, and
//! `ringfab.only=NAME,NAME` limits the run to some tests (their prerequisites, such as `bind`
//! and `open`, are the caller's to include). Tests share one `Ctx`: the NICs, opened once.
//! A test that panics fails alone.

#[cfg(target_os = "linux")]
mod bench;
#[cfg(target_os = "linux")]
mod cq;
#[cfg(target_os = "linux")]
mod dma;
#[cfg(target_os = "linux")]
mod e1000e;
#[cfg(target_os = "linux")]
mod ep;
#[cfg(target_os = "linux")]
mod examples;
#[cfg(target_os = "linux")]
mod fabric;
#[cfg(target_os = "linux")]
mod flood;
#[cfg(target_os = "linux")]
mod frames;
#[cfg(target_os = "linux")]
mod iommu;
#[cfg(target_os = "linux")]
mod kernel_nic;
#[cfg(target_os = "linux")]
mod kernel_roles;
#[cfg(target_os = "linux")]
mod kmsg;
#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
mod nic;
#[cfg(target_os = "linux")]
mod roles;
#[cfg(target_os = "linux")]
mod sep;
#[cfg(target_os = "linux")]
mod shared;
#[cfg(target_os = "linux")]
mod udp_exchange;
#[cfg(target_os = "linux")]
mod virtio;
#[cfg(target_os = "linux")]
mod wait;
#[cfg(target_os = "linux")]
mod workload;

#[cfg(target_os = "linux")]
fn main() -> std::process::ExitCode {
    // The bench runs this program again as one side of an endpoint pair, or of a kernel
    // UDP pair.
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().is_some_and(|a| a == roles::ROLE) {
        return roles::main(&args[1..]);
    }
    if args.first().is_some_and(|a| a == kernel_roles::ROLE) {
        return kernel_roles::main(&args[1..]);
    }
    guest::run()
}

#[cfg(not(target_os = "linux"))]
fn main() -> std::process::ExitCode {
    eprintln!("ringfab-qemu-guest runs in the Linux guest of ringfab-qemu-tests only");
    std::process::ExitCode::FAILURE
}

#[cfg(target_os = "linux")]
mod guest {
    use std::panic::{catch_unwind, AssertUnwindSafe};
    use std::process::ExitCode;
    use std::time::Instant;

    use ringfab_e1000e::E1000e;
    use ringfab_igb::Igb;
    use ringfab_vfio::VfioPlatform;

    use crate::linux::{self, E1000eModel, Igb as IgbModel, Peer, Virtio as VirtioModel};
    use crate::virtio::NicVirtio;
    use crate::{cq, dma, e1000e, ep, examples, fabric, iommu, nic, sep, shared, virtio, wait};

    /// The driver over VFIO, as every test uses it.
    pub(crate) type Nic = Igb<VfioPlatform>;

    /// What a test returns: a one-line detail, or why it failed.
    pub(crate) type Outcome = Result<String, String>;

    /// State the tests share.
    pub(crate) struct Ctx {
        /// The two igb NICs' PCI addresses: A (sends first) and B.
        pub(crate) bdfs: [String; 2],
        /// The MACs QEMU gave them (`ringfab.igb_macs=`), if the command line says.
        pub(crate) macs: Option<[String; 2]>,
        /// Both igb NICs, once `open` has run.
        pub(crate) nics: Option<[Nic; 2]>,
        /// The two e1000e NICs' PCI addresses (`ringfab.e1000e=`), if the machine has them.
        pub(crate) e1000e_bdfs: Option<[String; 2]>,
        /// Their MACs (`ringfab.e1000e_macs=`).
        pub(crate) e1000e_macs: Option<[String; 2]>,
        /// Both e1000e NICs, once `e1000e-open` has run.
        pub(crate) e1000e: Option<[E1000e<VfioPlatform>; 2]>,
        /// The two virtio-net NICs' PCI addresses (`ringfab.virtio=`), if the machine has them.
        pub(crate) virtio_bdfs: Option<[String; 2]>,
        /// Their MACs (`ringfab.virtio_macs=`).
        pub(crate) virtio_macs: Option<[String; 2]>,
        /// Both virtio-net NICs, once `virtio-open` has run.
        pub(crate) virtio: Option<[NicVirtio; 2]>,
        /// igb A on ringfab and igb B on Linux's driver, once `linux-nic-b` has run.
        pub(crate) linux_igb: Option<Peer<Nic>>,
        /// The same for the 82574s (`e1000e-linux-nic-b`).
        pub(crate) linux_e1000e: Option<Peer<E1000e<VfioPlatform>>>,
        /// The same for virtio-net (`virtio-linux-nic-b`).
        pub(crate) linux_virtio: Option<Peer<NicVirtio>>,
    }

    impl Ctx {
        /// Both NICs, or the reason there are none.
        pub(crate) fn nics(&self) -> Result<(&Nic, &Nic), String> {
            match &self.nics {
                Some([a, b]) => Ok((a, b)),
                None => Err("the NICs are not open (the open test failed or did not run)".into()),
            }
        }

        /// Closes both NICs, releasing their VFIO groups: what a test that runs another
        /// program on the NICs (the pingpong example, later) calls first.
        #[allow(
            dead_code,
            reason = "for the pingpong test to come: docs/qemu-tests.md"
        )]
        pub(crate) fn release(&mut self) {
            self.nics = None;
        }
    }

    /// One test: its name (as printed and as `ringfab.only` names it) and its body.
    pub(crate) struct Test {
        pub(crate) name: &'static str,
        pub(crate) run: fn(&mut Ctx) -> Outcome,
    }

    /// Every test, in the order they run. A test that runs another program on the NICs (as
    /// `pingpong` does) calls `ctx.release()` first and reopens them after; the program itself
    /// is listed in the runner's `GUEST_PROGRAMS` (docs/qemu-tests.md).
    pub(crate) const TESTS: &[Test] = &[
        test("bind", nic::bind),
        test("open", nic::open),
        test("link", nic::link),
        test("frames-a-to-b", nic::frames_a_to_b),
        test("frames-b-to-a", nic::frames_b_to_a),
        test("rss-4-queues", nic::rss_four_queues),
        test("msix-wakes-wait", nic::msix_wakes_wait),
        test("dma-caller-memory", dma::caller_memory),
        test("dma-huge-pages", dma::huge_pages),
        test("qemu-tx-page-crossing", dma::tx_page_crossing),
        test("rx-flush", nic::rx_flush),
        test("cq-reads-rings", cq::reads_completions_from_real_rings),
        test("cq-cancel-flushes-queue", cq::cancel_flushes_a_real_queue),
        test("cq-sread-wakes-on-msix", wait::sread_wakes_on_msix),
        test("cq-wait-set-epoll", wait::wait_set_over_two_vectors),
        test("ep-messages", ep::messages),
        test("ep-cq-formats", ep::cq_formats),
        test("ep-send-errors", ep::send_errors),
        test("ep-cancel-recv", ep::cancel_recv),
        test("ep-cancel-send", ep::cancel_send),
        test("ep-oversized-message", ep::oversized_message),
        test("ep-multi-recv", ep::multi_recv),
        test("ep-multi-recv-cancel", ep::multi_recv_cancel),
        test("vmdq-steering", nic::vmdq_steering),
        test("sep-4-named-rx-contexts", sep::four_contexts),
        test("sep-4-rss-rx-contexts", sep::four_rss_contexts),
        test("shared-contexts", shared::shared_contexts),
        test("rate-a-to-b", nic::rate_a_to_b),
        test("info", examples::info),
        test("pingpong", examples::pingpong),
        test("fi-pingpong", fabric::igb),
        test("iommu-blocks-unmapped-tx", iommu::unmapped_tx_is_blocked),
        test("e1000e-open", e1000e::open),
        test("e1000e-frames-both-ways", e1000e::frames_both_ways),
        test("e1000e-msix-wakes-wait", e1000e::msix_wakes_wait),
        test("e1000e-rx-flush", e1000e::rx_flush),
        test(
            "e1000e-cq-sread-wakes-on-msix",
            e1000e::cq_sread_wakes_on_msix,
        ),
        test("e1000e-cq-wait-set-epoll", e1000e::cq_wait_set_epoll),
        test("e1000e-ep-workload", e1000e::ep_workload),
        test("e1000e-pingpong", examples::e1000e_pingpong),
        test("e1000e-fi-pingpong", fabric::e1000e),
        test("virtio-open", virtio::open),
        test("virtio-frames-both-ways", virtio::frames_both_ways),
        test("virtio-msix-wakes-wait", virtio::msix_wakes_wait),
        test("virtio-rx-flush", virtio::rx_flush),
        test(
            "virtio-cq-sread-wakes-on-msix",
            virtio::cq_sread_wakes_on_msix,
        ),
        test("virtio-cq-wait-set-epoll", virtio::cq_wait_set_epoll),
        test("virtio-rss-four-queues", virtio::rss_four_queues),
        test("virtio-tx-page-crossing", virtio::tx_page_crossing),
        test("virtio-ep-workload", virtio::ep_workload),
        test("virtio-sep-4-rss-rx-contexts", virtio::sep_rss_contexts),
        test(
            "virtio-iommu-blocks-unmapped-tx",
            virtio::iommu_blocks_unmapped_tx,
        ),
        test("virtio-pingpong", examples::virtio_pingpong),
        test("virtio-fi-pingpong", fabric::virtio),
        // NIC B of each pair on the kernel's own driver: after every test that uses it
        // through ringfab (docs/qemu-tests.md, "ringfab against Linux").
        test("linux-nic-b", linux::nic_b::<IgbModel>),
        test("linux-ping", linux::ping::<IgbModel>),
        test("linux-udp-100k", linux::udp_100k::<IgbModel>),
        test("linux-tcp-echo", linux::tcp_echo::<IgbModel>),
        test("linux-packet-flood", linux::packet_flood::<IgbModel>),
        test("linux-fi-pingpong-udp", linux::fi_pingpong_udp::<IgbModel>),
        test("e1000e-linux-nic-b", linux::nic_b::<E1000eModel>),
        test("e1000e-linux-ping", linux::ping::<E1000eModel>),
        test("e1000e-linux-udp-100k", linux::udp_100k::<E1000eModel>),
        test("e1000e-linux-tcp-echo", linux::tcp_echo::<E1000eModel>),
        test(
            "e1000e-linux-packet-flood",
            linux::packet_flood::<E1000eModel>,
        ),
        test(
            "e1000e-linux-fi-pingpong-udp",
            linux::fi_pingpong_udp::<E1000eModel>,
        ),
        test("virtio-linux-nic-b", linux::nic_b::<VirtioModel>),
        test("virtio-linux-ping", linux::ping::<VirtioModel>),
        test("virtio-linux-udp-100k", linux::udp_100k::<VirtioModel>),
        test("virtio-linux-tcp-echo", linux::tcp_echo::<VirtioModel>),
        test(
            "virtio-linux-packet-flood",
            linux::packet_flood::<VirtioModel>,
        ),
        test(
            "virtio-linux-fi-pingpong-udp",
            linux::fi_pingpong_udp::<VirtioModel>,
        ),
    ];

    const fn test(name: &'static str, run: fn(&mut Ctx) -> Outcome) -> Test {
        Test { name, run }
    }

    /// The value of `key=` on the kernel command line.
    pub(crate) fn cmdline_value(cmdline: &str, key: &str) -> Option<String> {
        cmdline.split_whitespace().find_map(|w| {
            let v = w.strip_prefix(key)?.strip_prefix('=')?;
            Some(v.to_owned())
        })
    }

    /// `key=A,B` on the kernel command line, as two strings.
    pub(crate) fn cmdline_pair(cmdline: &str, key: &str) -> Option<[String; 2]> {
        let v = cmdline_value(cmdline, key)?;
        <[String; 2]>::try_from(v.split(',').map(String::from).collect::<Vec<_>>()).ok()
    }

    pub(crate) fn say(line: &str) {
        // One write per line, so a line reaches the console whole.
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(format!("ringfab-guest: {line}\n").as_bytes());
        let _ = out.flush();
    }

    fn one_line(s: &str) -> String {
        s.split_whitespace().collect::<Vec<_>>().join(" ")
    }

    pub(crate) fn run() -> ExitCode {
        let cmdline = std::fs::read_to_string("/proc/cmdline").unwrap_or_default();
        // `ringfab-qemu-tests --bench` boots the same guest to run the benchmark instead.
        if cmdline_value(&cmdline, "ringfab.bench").is_some() {
            return crate::bench::run(&cmdline);
        }
        let bdfs: Vec<String> = cmdline_value(&cmdline, "ringfab.igb")
            .map(|v| v.split(',').map(String::from).collect())
            .unwrap_or_default();
        let only: Option<Vec<String>> = cmdline_value(&cmdline, "ringfab.only")
            .map(|v| v.split(',').map(String::from).collect());
        let selected: Vec<&Test> = TESTS
            .iter()
            .filter(|t| only.as_ref().is_none_or(|o| o.iter().any(|n| n == t.name)))
            .collect();
        let unknown: Vec<&String> = only
            .iter()
            .flatten()
            .filter(|n| !TESTS.iter().any(|t| t.name == n.as_str()))
            .collect();
        say(&format!(
            "plan {}",
            selected.len() + usize::from(!unknown.is_empty())
        ));
        let mut failed = 0;
        if !unknown.is_empty() {
            failed += 1;
            let names: Vec<&str> = TESTS.iter().map(|t| t.name).collect();
            say(&format!(
                "fail only no such test: {unknown:?}; the tests are {}",
                names.join(",")
            ));
        }
        let [a, b] = <[String; 2]>::try_from(bdfs).unwrap_or_else(|v| {
            say(&format!(
                "fail setup ringfab.igb= on the kernel command line names {} NICs, not 2",
                v.len()
            ));
            [String::new(), String::new()]
        });
        let mut ctx = Ctx {
            bdfs: [a, b],
            macs: cmdline_pair(&cmdline, "ringfab.igb_macs"),
            nics: None,
            e1000e_bdfs: cmdline_pair(&cmdline, "ringfab.e1000e"),
            e1000e_macs: cmdline_pair(&cmdline, "ringfab.e1000e_macs"),
            e1000e: None,
            virtio_bdfs: cmdline_pair(&cmdline, "ringfab.virtio"),
            virtio_macs: cmdline_pair(&cmdline, "ringfab.virtio_macs"),
            virtio: None,
            linux_igb: None,
            linux_e1000e: None,
            linux_virtio: None,
        };
        for t in selected {
            let start = Instant::now();
            let r = catch_unwind(AssertUnwindSafe(|| (t.run)(&mut ctx))).unwrap_or_else(|p| {
                let msg = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                    .unwrap_or_else(|| "(no message)".into());
                Err(format!("panicked: {msg}"))
            });
            let ms = start.elapsed().as_millis();
            match r {
                Ok(detail) => say(&format!("pass {} {} [{ms} ms]", t.name, one_line(&detail))),
                Err(why) => {
                    failed += 1;
                    say(&format!("fail {} {} [{ms} ms]", t.name, one_line(&why)));
                }
            }
        }
        drop(ctx);
        say("done");
        if failed == 0 {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn kernel_parameters_are_found_by_exact_key() {
            let c = "console=ttyS0 ringfab.igb=0000:00:03.0,0000:00:0b.0 ringfab.only=link\n";
            assert_eq!(
                cmdline_pair(c, "ringfab.igb"),
                Some(["0000:00:03.0".to_owned(), "0000:00:0b.0".to_owned()])
            );
            assert_eq!(cmdline_pair(c, "ringfab.only"), None, "one value, not two");
            assert_eq!(
                cmdline_value(c, "ringfab.igb").as_deref(),
                Some("0000:00:03.0,0000:00:0b.0")
            );
            assert_eq!(cmdline_value(c, "ringfab.only").as_deref(), Some("link"));
            assert_eq!(cmdline_value(c, "ringfab"), None);
            assert_eq!(cmdline_value(c, "ringfab.igb_macs"), None);
            assert_eq!(cmdline_value(c, "quiet"), None);
        }

        #[test]
        fn test_names_are_unique_single_words() {
            for (i, t) in TESTS.iter().enumerate() {
                assert!(!t.name.contains(char::is_whitespace), "{}", t.name);
                assert!(TESTS[..i].iter().all(|u| u.name != t.name), "{}", t.name);
            }
        }
    }
}
