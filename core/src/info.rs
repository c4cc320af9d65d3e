//! What an endpoint really offers, as `struct fi_ep_attr`, `fi_tx_attr` and `fi_rx_attr` report
//! it (fi_endpoint(3), "ENDPOINT ATTRIBUTES", "TRANSMIT CONTEXT ATTRIBUTES", "RECEIVE CONTEXT
//! ATTRIBUTES"): computed from the NIC's capabilities and the endpoint's configuration by
//! [`Endpoint::info`](crate::ep::Endpoint::info), never copied from a table.
//!
//! Every value is what the code does, not what it might: an attribute ringfab has no use for
//! (RMA ordering, tags, authorization keys) is reported as 0, which fi_endpoint(3) reads as
//! "An order size value of 0 indicates that ordering is not guaranteed" and, for the key,
//! "This field will be 0 if authorization keys are not available or used" (a tag format of 0:
//! no tag bits).

use crate::ep::EpType;
use crate::flags::OpFlags;

/// `ep_attr.protocol`: ringfab's own frame format on raw Ethernet ([`crate::proto`]). libfabric
/// has no number for it (`FI_PROTO_UNSPEC` would hide it); the EtherType names it on the wire.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Protocol {
    /// The EtherType of every ringfab frame.
    pub ethertype: u16,
    /// Bytes of ringfab header in front of every payload.
    pub header_len: usize,
}

impl Protocol {
    /// The protocol of an endpoint on `encap`: its frames' EtherType (ringfab's, or IPv4's on the
    /// UDP encapsulation) and header length.
    pub fn of(encap: crate::proto::Encap) -> Protocol {
        Protocol {
            ethertype: match encap {
                crate::proto::Encap::Ethernet => crate::proto::ETHERTYPE,
                crate::proto::Encap::Udp | crate::proto::Encap::PlainUdp => 0x0800,
            },
            header_len: encap.header_len(),
        }
    }
}

/// Ordering of messages (`msg_order`) or of completions (`comp_order`), as far as ringfab
/// reports either.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Order {
    /// `FI_ORDER_NONE`: no order is promised.
    None,
    /// `FI_ORDER_STRICT` (`comp_order` only): completions are written in the order the
    /// operations were posted, per queue.
    Strict,
}

/// `struct fi_ep_attr`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct EndpointAttr {
    /// `type`: always DGRAM (the others are refused at creation).
    pub ep_type: EpType,
    /// `protocol`.
    pub protocol: Protocol,
    /// `protocol_version`: the header version written and accepted ([`crate::proto::VERSION`]).
    pub protocol_version: u32,
    /// `max_msg_size`: the NIC's frame or the receive buffer, less the header.
    pub max_msg_size: usize,
    /// `msg_prefix_size`: 0 — the header is ringfab's, written behind the payload offset the
    /// application uses ([`Endpoint::payload_offset`](crate::ep::Endpoint::payload_offset)),
    /// not an `FI_MSG_PREFIX` area.
    pub msg_prefix_size: usize,
    /// `max_order_raw_size`, `max_order_war_size`, `max_order_waw_size`: 0, no RMA.
    pub max_order_size: usize,
    /// `mem_tag_format`: 0, no tagged messages.
    pub mem_tag_format: u64,
    /// `tx_ctx_cnt`: 1 — a plain endpoint has one transmit queue (scalable endpoints have more:
    /// [`crate::sep`]).
    pub tx_ctx_cnt: usize,
    /// `rx_ctx_cnt`: 1.
    pub rx_ctx_cnt: usize,
    /// `auth_key_size`: 0, no authorization keys.
    pub auth_key_size: usize,
}

/// `struct fi_tx_attr`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct TxAttr {
    /// `op_flags`: the endpoint's default transmit flags (as `FI_GETOPSFLAG` returns them).
    pub op_flags: OpFlags,
    /// `msg_order`: none. Frames leave in ring order, but nothing on an Ethernet wire, nor a
    /// receiver spreading them over queues, promises that they arrive so.
    pub msg_order: Order,
    /// `comp_order`: strict where the NIC completes in ring order (the Intel rings), none where
    /// it completes by id (virtio).
    pub comp_order: Order,
    /// `inject_size`.
    pub inject_size: usize,
    /// `size`: operations the queue can hold (its op-table depth).
    pub size: usize,
    /// `iov_limit`: the buffers a gather send may have
    /// ([`Endpoint::iov_limit`](crate::ep::Endpoint::iov_limit)).
    pub iov_limit: usize,
    /// `rma_iov_limit`: 0, no RMA.
    pub rma_iov_limit: usize,
}

/// `struct fi_rx_attr`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct RxAttr {
    /// `op_flags`: the endpoint's default receive flags.
    pub op_flags: OpFlags,
    /// `msg_order`: none (as [`TxAttr::msg_order`]).
    pub msg_order: Order,
    /// `comp_order`: as [`TxAttr::comp_order`].
    pub comp_order: Order,
    /// `total_buffered_recv`: 0 — ringfab buffers nothing for a message that finds no posted
    /// receive: the NIC drops it (real NICs; QEMU's models hold it until buffers come).
    pub total_buffered_recv: usize,
    /// `size`: receives the queue can hold.
    pub size: usize,
    /// `iov_limit`: 1 — a receive descriptor takes one buffer on these NICs.
    pub iov_limit: usize,
}

/// An endpoint's attributes (`fi_info`'s `ep_attr`, `tx_attr`, `rx_attr`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct EpInfo {
    /// `ep_attr`.
    pub ep: EndpointAttr,
    /// `tx_attr`.
    pub tx: TxAttr,
    /// `rx_attr`.
    pub rx: RxAttr,
}
