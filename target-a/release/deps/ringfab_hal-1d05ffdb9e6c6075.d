/work/main/target-a/release/deps/ringfab_hal-1d05ffdb9e6c6075.d: hal/src/lib.rs hal/src/addr.rs hal/src/error.rs hal/src/nic.rs hal/src/platform.rs hal/src/queue.rs hal/src/span.rs hal/src/wait.rs

/work/main/target-a/release/deps/libringfab_hal-1d05ffdb9e6c6075.rlib: hal/src/lib.rs hal/src/addr.rs hal/src/error.rs hal/src/nic.rs hal/src/platform.rs hal/src/queue.rs hal/src/span.rs hal/src/wait.rs

/work/main/target-a/release/deps/libringfab_hal-1d05ffdb9e6c6075.rmeta: hal/src/lib.rs hal/src/addr.rs hal/src/error.rs hal/src/nic.rs hal/src/platform.rs hal/src/queue.rs hal/src/span.rs hal/src/wait.rs

hal/src/lib.rs:
hal/src/addr.rs:
hal/src/error.rs:
hal/src/nic.rs:
hal/src/platform.rs:
hal/src/queue.rs:
hal/src/span.rs:
hal/src/wait.rs:
