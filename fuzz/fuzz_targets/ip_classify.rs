//! `ip_classify`: see `ringfab_fuzz_targets::ip_classify` for what it drives and checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ringfab_fuzz_targets::ip_classify::run(data));
