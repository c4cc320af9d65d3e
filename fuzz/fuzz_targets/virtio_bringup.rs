//! `virtio_bringup`: see `ringfab_fuzz_targets::virtio_bringup` for what it drives and checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ringfab_fuzz_targets::virtio_bringup::run(data));
