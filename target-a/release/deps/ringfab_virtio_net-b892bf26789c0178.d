/work/main/target-a/release/deps/ringfab_virtio_net-b892bf26789c0178.d: drivers/virtio-net/src/lib.rs drivers/virtio-net/src/desc.rs drivers/virtio-net/src/regs.rs drivers/virtio-net/src/transport.rs drivers/virtio-net/src/virtq.rs

/work/main/target-a/release/deps/libringfab_virtio_net-b892bf26789c0178.rlib: drivers/virtio-net/src/lib.rs drivers/virtio-net/src/desc.rs drivers/virtio-net/src/regs.rs drivers/virtio-net/src/transport.rs drivers/virtio-net/src/virtq.rs

/work/main/target-a/release/deps/libringfab_virtio_net-b892bf26789c0178.rmeta: drivers/virtio-net/src/lib.rs drivers/virtio-net/src/desc.rs drivers/virtio-net/src/regs.rs drivers/virtio-net/src/transport.rs drivers/virtio-net/src/virtq.rs

drivers/virtio-net/src/lib.rs:
drivers/virtio-net/src/desc.rs:
drivers/virtio-net/src/regs.rs:
drivers/virtio-net/src/transport.rs:
drivers/virtio-net/src/virtq.rs:
