/work/main/target-a/release/deps/ringfab_ring-1ead8401d06741e9.d: drivers/ring/src/lib.rs drivers/ring/src/queue.rs

/work/main/target-a/release/deps/libringfab_ring-1ead8401d06741e9.rlib: drivers/ring/src/lib.rs drivers/ring/src/queue.rs

/work/main/target-a/release/deps/libringfab_ring-1ead8401d06741e9.rmeta: drivers/ring/src/lib.rs drivers/ring/src/queue.rs

drivers/ring/src/lib.rs:
drivers/ring/src/queue.rs:
