/work/main/target-a/release/deps/ringfab_e1000e-f6f3ef1a80850817.d: drivers/e1000e/src/lib.rs drivers/e1000e/src/desc.rs drivers/e1000e/src/regs.rs drivers/e1000e/src/ring.rs

/work/main/target-a/release/deps/libringfab_e1000e-f6f3ef1a80850817.rlib: drivers/e1000e/src/lib.rs drivers/e1000e/src/desc.rs drivers/e1000e/src/regs.rs drivers/e1000e/src/ring.rs

/work/main/target-a/release/deps/libringfab_e1000e-f6f3ef1a80850817.rmeta: drivers/e1000e/src/lib.rs drivers/e1000e/src/desc.rs drivers/e1000e/src/regs.rs drivers/e1000e/src/ring.rs

drivers/e1000e/src/lib.rs:
drivers/e1000e/src/desc.rs:
drivers/e1000e/src/regs.rs:
drivers/e1000e/src/ring.rs:
