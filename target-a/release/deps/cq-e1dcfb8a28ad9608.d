/work/main/target-a/release/deps/cq-e1dcfb8a28ad9608.d: core/benches/cq.rs

/work/main/target-a/release/deps/cq-e1dcfb8a28ad9608: core/benches/cq.rs

core/benches/cq.rs:
