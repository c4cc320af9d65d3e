//! `intel_tx_writeback`: see `ringfab_fuzz_targets::intel_tx` for what it drives and checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ringfab_fuzz_targets::intel_tx::run(data));
