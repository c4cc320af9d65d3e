/work/main/target-a/release/deps/ringfab_igb-9717201935940011.d: drivers/igb/src/lib.rs drivers/igb/src/desc.rs drivers/igb/src/regs.rs drivers/igb/src/ring.rs

/work/main/target-a/release/deps/libringfab_igb-9717201935940011.rlib: drivers/igb/src/lib.rs drivers/igb/src/desc.rs drivers/igb/src/regs.rs drivers/igb/src/ring.rs

/work/main/target-a/release/deps/libringfab_igb-9717201935940011.rmeta: drivers/igb/src/lib.rs drivers/igb/src/desc.rs drivers/igb/src/regs.rs drivers/igb/src/ring.rs

drivers/igb/src/lib.rs:
drivers/igb/src/desc.rs:
drivers/igb/src/regs.rs:
drivers/igb/src/ring.rs:
