//! `virtio_used_ring`: see `ringfab_fuzz_targets::virtio_used` for what it drives and checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ringfab_fuzz_targets::virtio_used::run(data));
