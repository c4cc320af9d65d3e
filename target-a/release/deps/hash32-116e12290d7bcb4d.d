/work/main/target-a/release/deps/hash32-116e12290d7bcb4d.d: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/hash32-0.3.1/src/lib.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/hash32-0.3.1/src/fnv.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/hash32-0.3.1/src/murmur3.rs

/work/main/target-a/release/deps/libhash32-116e12290d7bcb4d.rlib: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/hash32-0.3.1/src/lib.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/hash32-0.3.1/src/fnv.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/hash32-0.3.1/src/murmur3.rs

/work/main/target-a/release/deps/libhash32-116e12290d7bcb4d.rmeta: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/hash32-0.3.1/src/lib.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/hash32-0.3.1/src/fnv.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/hash32-0.3.1/src/murmur3.rs

/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/hash32-0.3.1/src/lib.rs:
/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/hash32-0.3.1/src/fnv.rs:
/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/hash32-0.3.1/src/murmur3.rs:
