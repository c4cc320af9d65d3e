/work/main/target-a/release/deps/byteorder-62eb6aa590746b85.d: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/byteorder-1.5.0/src/lib.rs

/work/main/target-a/release/deps/libbyteorder-62eb6aa590746b85.rlib: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/byteorder-1.5.0/src/lib.rs

/work/main/target-a/release/deps/libbyteorder-62eb6aa590746b85.rmeta: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/byteorder-1.5.0/src/lib.rs

/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/byteorder-1.5.0/src/lib.rs:
