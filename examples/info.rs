//! What ringfab offers on each NIC, like libfabric's `fi_info`: the endpoint, transmit, receive
//! and completion-queue attributes an application would get, as the driver reports them.
//!
//! By default it describes two emulated NICs — an Intel 82576 (igb driver) and an Intel 82574
//! (e1000e driver) — so it runs anywhere. `--vfio BDF…` describes real (or QEMU-emulated)
//! functions bound to vfio-pci instead. Either way the NICs are opened with
//! `ringfab_nics::AnyNic`, which picks the driver from the PCI ID.
//!
//! ```sh
//! cargo run --example info
//! cargo run --example info -- --vfio 0000:00:03.0
//! ```

use std::process::ExitCode;

use ringfab::av::AvAttr;
use ringfab::cq::CqAttr;
use ringfab::domain::Domain;
use ringfab::ep::EpAttr;
use ringfab::flags::BindFlags;
use ringfab::hal::{MacAddr, Nic, Platform};
use ringfab::info::Order;
use ringfab_emu::{EmuE1000e, EmuIgb, ModelConfig};
use ringfab_nics::AnyNic;

/// Ring depth the description assumes (`tx_attr.size`/`rx_attr.size`); endpoints choose it.
const D: usize = 256;

/// Prints the fi_info-style description of one NIC.
fn describe<N: Nic>(name: &str, nic: &N) -> Result<(), String> {
    let caps = nic.capabilities();
    let link = nic.link();

    // Open a real endpoint so every figure printed is one the code computes, not a copy.
    // The default capacities: their cq_size (1024) holds the 2 × D-entry CQ.
    let domain = Domain::new(nic);
    let attr = CqAttr {
        size: 2 * D,
        ..CqAttr::default()
    };
    let cq = domain
        .open_cq::<ringfab::entry::Msg>(&attr)
        .map_err(|e| format!("{name}: opening a CQ: {e}"))?;
    let av = domain
        .open_av(&AvAttr {
            count: 1,
            ..AvAttr::default()
        })
        .map_err(|e| format!("{name}: opening an AV: {e}"))?;
    let mut ep = domain
        .endpoint(&EpAttr::default())
        .map_err(|e| format!("{name}: creating an endpoint: {e}"))?;
    ep.bind_cq(&domain, &cq, BindFlags::TRANSMIT | BindFlags::RECV)
        .and_then(|()| ep.bind_av(&domain, &av))
        .and_then(|()| ep.enable(&domain))
        .map_err(|e| format!("{name}: enabling an endpoint: {e}"))?;

    let info = ep.info(&domain);
    let order = |o: Order| match o {
        Order::Strict => "FI_ORDER_STRICT (completions in posting order, per queue)",
        Order::None if caps.in_order_completion => "FI_ORDER_NONE",
        Order::None => "FI_ORDER_NONE (the device completes by id)",
    };
    let rss = caps.rss.map_or("none".to_string(), |r| {
        format!("{}-entry table, {}-byte key", r.table_len, r.key_len)
    });
    println!("provider: ringfab");
    println!("    domain: {name}");
    println!(
        "    type: FI_EP_{}",
        format!("{:?}", info.ep.ep_type).to_uppercase()
    );
    println!(
        "    protocol: ringfab raw Ethernet (EtherType {:#06x}, {}-byte header), version {}",
        info.ep.protocol.ethertype, info.ep.protocol.header_len, info.ep.protocol_version
    );
    println!("    caps: FI_MSG | FI_SEND | FI_RECV | FI_SOURCE | FI_SOURCE_ERR");
    println!("    mode: 0");
    println!("    addr_format: ringfab (MAC + context, 8 bytes)");
    println!("    src_addr: {}/{}", mac(ep.name().mac), ep.name().ctx);
    println!("    progress: FI_PROGRESS_MANUAL");
    println!("    threading: FI_THREAD_SAFE (each queue and CQ has its own spin lock, taken once per batch)");
    println!("    ep_attr:");
    println!("        max_msg_size: {}", info.ep.max_msg_size);
    println!("        msg_prefix_size: {}", info.ep.msg_prefix_size);
    println!(
        "        max_order_raw/war/waw_size: {}  mem_tag_format: {}  auth_key_size: {}",
        info.ep.max_order_size, info.ep.mem_tag_format, info.ep.auth_key_size
    );
    println!(
        "        tx_ctx_cnt: {}   rx_ctx_cnt: {}   (a scalable endpoint: up to {} / {}, the \
         hardware queues)",
        info.ep.tx_ctx_cnt, info.ep.rx_ctx_cnt, caps.tx_queues, caps.rx_queues
    );
    println!("        rss: {rss}");
    println!("    tx_attr:");
    println!(
        "        size: {} (ring depth {}..={})",
        info.tx.size, caps.min_depth, caps.max_depth
    );
    println!("        inject_size: {}", info.tx.inject_size);
    println!(
        "        iov_limit: {}  rma_iov_limit: {}",
        info.tx.iov_limit, info.tx.rma_iov_limit
    );
    println!(
        "        msg_order: {} (unreliable datagrams)",
        order(info.tx.msg_order)
    );
    println!("        comp_order: {}", order(info.tx.comp_order));
    println!("        op_flags: {:?}", info.tx.op_flags);
    println!("    rx_attr:");
    println!("        size: {}", info.rx.size);
    println!(
        "        buffer size: {} (EpAttr::rx_buf_len)",
        EpAttr::default().rx_buf_len
    );
    println!("        iov_limit: {}", info.rx.iov_limit);
    println!(
        "        total_buffered_recv: {}",
        info.rx.total_buffered_recv
    );
    println!("        msg_order: {}", order(info.rx.msg_order));
    println!("        comp_order: {}", order(info.rx.comp_order));
    println!("        op_flags: {:?}", info.rx.op_flags);
    println!("    cq_attr:");
    println!(
        "        size: default {}, max {}",
        domain.cq_limits().default_size,
        domain.max_cq_size()
    );
    println!("        format: FI_CQ_FORMAT_CONTEXT | MSG | DATA | TAGGED (UNSPEC = CONTEXT)");
    println!("        wait_obj: NONE | UNSPEC | FD (file-descriptor handles only) | MUTEX_COND | YIELD | SET");
    println!("        interrupt vectors: {}", nic.irq_vectors());
    println!("    nic:");
    println!("        mac: {}", mac(caps.mac));
    println!(
        "        max frame: {} bytes (Ethernet header included, FCS excluded)",
        caps.max_frame_len
    );
    println!(
        "        link: {}",
        if link.up {
            format!(
                "up, {} Mb/s, {} duplex",
                link.speed_mbps,
                if link.full_duplex { "full" } else { "half" }
            )
        } else {
            "down".to_string()
        }
    );
    println!();
    Ok(())
}

fn mac(m: MacAddr) -> String {
    m.0.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// What `nic` is and which driver holds it: `Intel 82576, igb driver`.
fn label<P: Platform>(nic: &AnyNic<P>) -> String {
    let driver = nic.driver();
    format!("{}, {driver} driver", driver.device())
}

fn emulated() -> Result<(), String> {
    let mut config = ModelConfig::default();
    config.mac = MacAddr([0x52, 0x54, 0x00, 0x00, 0x00, 0x0a]);
    let igb_dev = EmuIgb::new(config);
    config.mac = MacAddr([0x52, 0x54, 0x00, 0x00, 0x00, 0x0b]);
    let e1000e_dev = EmuE1000e::new(config);
    let igb = AnyNic::open(igb_dev.platform()).map_err(|e| format!("emulated 82576: {e}"))?;
    describe(&format!("emu0 (emulated {})", label(&igb)), &igb)?;
    let e1000e = AnyNic::open(e1000e_dev.platform()).map_err(|e| format!("emulated 82574: {e}"))?;
    describe(&format!("emu1 (emulated {})", label(&e1000e)), &e1000e)
}

fn vfio(bdfs: &[String]) -> Result<(), String> {
    for bdf in bdfs {
        let platform = ringfab_vfio::VfioPlatform::open(bdf).map_err(|e| format!("{bdf}: {e}"))?;
        let nic = AnyNic::open(platform).map_err(|e| format!("{bdf}: {e}"))?;
        describe(&format!("{bdf} ({})", label(&nic)), &nic)?;
    }
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let r = match args.first().map(String::as_str) {
        None => emulated(),
        Some("--vfio") if args.len() > 1 => vfio(&args[1..]),
        Some("-h" | "--help") | Some(_) => {
            eprintln!("usage: info [--vfio BDF…]");
            return ExitCode::from(2);
        }
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("info: {e}");
            ExitCode::FAILURE
        }
    }
}
