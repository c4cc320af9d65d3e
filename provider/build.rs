//! Generates the libfabric C types from the installed headers (`wrapper.h`) with bindgen, and
//! links libfabric. docs/architecture.md ("The libfabric provider") says why at build time.

use std::env;
use std::path::PathBuf;

/// Gives the `#define`d constants one type per kind, whatever their value: libfabric's error
/// numbers `i32` (returned negated as `int`), the version and `FI_PROV_SPECIFIC` `u32` (as
/// the fields they go into), and every other one — capability, mode, flag and order bits,
/// which live in `uint64_t` fields — `u64`. bindgen would otherwise pick by the value.
#[derive(Debug)]
struct MacroTypes;

impl bindgen::callbacks::ParseCallbacks for MacroTypes {
    fn int_macro(&self, name: &str, value: i64) -> Option<bindgen::callbacks::IntKind> {
        use bindgen::callbacks::IntKind;
        if !name.starts_with("FI_") {
            return None;
        }
        Some(match name {
            "FI_MAJOR_VERSION" | "FI_MINOR_VERSION" | "FI_PROV_SPECIFIC" => IntKind::U32,
            _ if name.starts_with("FI_E") && (0..256).contains(&value) => IntKind::I32,
            _ => IntKind::U64,
        })
    }
}

fn main() {
    println!("cargo:rerun-if-changed=wrapper.h");
    println!("cargo:rerun-if-changed=build.rs");
    // The provider calls back into libfabric (fi_dupinfo, fi_param_define, fi_log): the library
    // that loads it, and the one this crate's tests run it under.
    println!("cargo:rustc-link-lib=fabric");
    // libfabric looks for `lib<provider>-fi.so`; Cargo can only name the file
    // `libringfab_fi.so` (which libfabric's FI_PROVIDER_PATH scan, matching `*fi.so`, accepts
    // too). The installed name is the soname.
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libringfab-fi.so");

    let bindings = bindgen::Builder::default()
        .header("wrapper.h")
        .allowlist_type("fi_.*|fid.*")
        .allowlist_var("FI_.*")
        .allowlist_function(
            "fi_dupinfo|fi_freeinfo|fi_param_define|fi_param_get|fi_log|fi_log_enabled|fi_strerror",
        )
        // enum fi_ep_type { FI_EP_DGRAM, … } as `pub const FI_EP_DGRAM: fi_ep_type`, as C
        // spells them.
        .default_enum_style(bindgen::EnumVariation::Consts)
        .prepend_enum_name(false)
        .derive_default(true)
        // The workspace denies unsafe_op_in_unsafe_fn; generated helpers comply.
        .wrap_unsafe_ops(true)
        .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()))
        .parse_callbacks(Box::new(MacroTypes))
        .generate()
        .expect(
            "bindgen could not read the libfabric headers: install libfabric-dev and libclang-dev \
             (docs/libfabric.md)",
        );
    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    bindings
        .write_to_file(out.join("sys.rs"))
        .expect("writing the generated bindings");
}
