//! `intel_rx_writeback`: see `ringfab_fuzz_targets::intel_rx` for what it drives and checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ringfab_fuzz_targets::intel_rx::run(data));
