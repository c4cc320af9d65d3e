//! `api_sequence`: see `ringfab_fuzz_targets::api_sequence` for what it drives and checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ringfab_fuzz_targets::api_sequence::run(data));
