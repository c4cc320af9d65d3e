//! libfabric's C types, generated at build time from the installed headers.
#![allow(
    missing_docs,
    non_camel_case_types,
    non_snake_case,
    non_upper_case_globals,
    unreachable_pub,
    clippy::all,
    clippy::undocumented_unsafe_blocks
)]
include!(concat!(env!("OUT_DIR"), "/sys.rs"));
