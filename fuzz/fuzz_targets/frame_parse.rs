//! `frame_parse`: see `ringfab_fuzz_targets::frame_parse` for what it drives and checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ringfab_fuzz_targets::frame_parse::run(data));
