//! Replays every fuzz corpus on stable: each file under `fuzz/corpus/<target>/` runs through
//! the body its libFuzzer target runs (`ringfab_fuzz_targets::TARGETS`), so that what the
//! fuzzer once found interesting — and every crash it found, kept there once fixed — stays
//! checked by `cargo test` without nightly or libFuzzer.

use std::fs;
use std::path::{Path, PathBuf};

fn corpus(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../corpus")
        .join(target)
}

#[test]
fn every_corpus_file_replays_without_a_finding() {
    for &(target, body) in ringfab_fuzz_targets::TARGETS {
        let dir = corpus(target);
        let mut files: Vec<_> = fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.expect("a directory entry").path())
            .collect();
        files.sort();
        assert!(!files.is_empty(), "{}: an empty corpus", dir.display());
        for f in &files {
            let bytes = fs::read(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            // A finding names its file: run it again with `cargo +nightly fuzz run <target>
            // <file>`, or here.
            if std::panic::catch_unwind(|| body(&bytes)).is_err() {
                panic!("{target}: a finding on {}", f.display());
            }
        }
        println!("{target}: {} inputs replayed", files.len());
    }
}

#[test]
fn empty_and_short_inputs_are_no_finding() {
    for &(_, body) in ringfab_fuzz_targets::TARGETS {
        for len in 0..8 {
            body(&vec![0u8; len]);
            body(&vec![0xffu8; len]);
        }
    }
}
