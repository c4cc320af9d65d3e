//! Core is built in floors, and no module imports from a floor above its own
//! (docs/architecture.md, "Core: a map"):
//!
//! 1. **values** — addresses, buffers, entries, flags, errors, the frame formats (ringfab's and
//!    IPv4/UDP's, `ip/`), the target's `AtomicU64` (`atomic.rs`), the `Clock` trait, and `raw.rs`,
//!    the promises they rest on: they know no queue and no object;
//! 2. **the engine** (`src/engine/`) — queues and their operations: values and the hal, and
//!    what it needs of CQs and counters through its own narrow interfaces (`credit.rs`);
//! 3. **objects** — what an application opens (domain, cq, ep, av, mr, cntr, sep, stx, srx,
//!    path, node) and what describes them (info, storage).
//!
//! The test reads every source file of the crate and checks each `crate::…` path outside
//! comments and unit tests against that order (`crate::{…}` groups item by item).

use std::fs;
use std::path::{Path, PathBuf};

/// The floor of a module, by its path below `src/` (`engine/poll`, `cq/read`, `buf`, …).
fn floor(module: &str) -> u8 {
    const VALUES: &[&str] = &[
        "addr", "atomic", "buf", "clock", "entry", "errdata", "error", "flags", "ip", "proto",
        "raw", "strerror",
    ];
    let top = module.split('/').next().unwrap_or(module);
    if VALUES.contains(&top) {
        1
    } else if top == "engine" {
        2
    } else {
        3
    }
}

const NAMES: [&str; 4] = ["", "values", "engine", "objects"];

/// The module a `crate::` path names: its first segment, or an item the crate root
/// re-exports mapped to the module that defines it.
fn target(path: &str) -> Option<&'static str> {
    let first = path.split("::").next()?;
    Some(match first {
        "hal" => return None, // the hal is below every floor
        "Error" | "Result" | "error" => "error",
        "Capacities" | "Capacity" | "Storage" | "storage" => "storage",
        "Clock" | "clock" => "clock",
        "Counter" | "CounterAttr" | "CounterEvents" | "WaitObj" | "cntr" => "cntr",
        "Node" | "node" => "node",
        "addr" => "addr",
        "atomic" => "atomic",
        "av" => "av",
        "buf" => "buf",
        "cq" => "cq",
        "domain" => "domain",
        "engine" => "engine",
        "entry" => "entry",
        "ep" => "ep",
        "errdata" => "errdata",
        "flags" => "flags",
        "info" => "info",
        "ip" => "ip",
        "mr" => "mr",
        "path" => "path",
        "proto" => "proto",
        "raw" => "raw",
        "sep" => "sep",
        "srx" => "srx",
        "strerror" => "strerror",
        "stx" => "stx",
        other => panic!("a crate path this test does not know: crate::{other} (add it)"),
    })
}

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).expect("read src") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `crate::a::b` paths in `code` with the byte offset of each; a group
/// (`crate::{a, b::{c, d}}`, on one line or several) gives each of its items.
fn crate_paths(code: &str) -> Vec<(usize, &str)> {
    let mut found = Vec::new();
    let mut at = 0;
    while let Some(i) = code[at..].find("crate::") {
        let start = at + i + "crate::".len();
        let after = &code[start..];
        if after.starts_with('{') {
            // The group's top-level items, up to its matching brace.
            let (mut depth, mut item) = (0, start + 1);
            for (j, c) in after.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' | ',' if depth == 1 => {
                        let path = code[item..start + j].trim();
                        if !path.is_empty() {
                            found.push((item, path));
                        }
                        item = start + j + 1;
                        if c == '}' {
                            break;
                        }
                    }
                    '}' => depth -= 1,
                    _ => {}
                }
            }
            at = item;
            continue;
        }
        let end = after
            .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
            .unwrap_or(after.len());
        found.push((start, &after[..end]));
        at = start + end;
    }
    found
}

/// `text` with every `//` comment blanked (line breaks kept, so offsets give line numbers).
fn without_comments(text: &str) -> String {
    text.lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn no_module_imports_from_a_floor_above_its_own() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    assert!(files.len() > 40, "found {} source files", files.len());
    let mut wrong = Vec::new();
    for file in &files {
        let rel = file.strip_prefix(&src).expect("under src");
        let module = rel.with_extension("").to_string_lossy().replace('\\', "/");
        let module = module.trim_end_matches("/mod").to_string();
        if module == "lib" {
            continue; // the crate root declares and re-exports every floor
        }
        let text = fs::read_to_string(file).expect("read source");
        // Unit tests may use anything.
        let code = text
            .split("#[cfg(test)]\nmod tests")
            .next()
            .unwrap_or(&text);
        let code = without_comments(code);
        for (offset, path) in crate_paths(&code) {
            let Some(to) = target(path) else { continue };
            if floor(to) > floor(&module) {
                wrong.push(format!(
                    "{}:{}: {} ({}) imports crate::{} ({})",
                    rel.display(),
                    code[..offset].lines().count(),
                    module,
                    NAMES[usize::from(floor(&module))],
                    path,
                    NAMES[usize::from(floor(to))],
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "imports from a floor above:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_checker_sees_an_upward_import() {
    // The rule's own test: what the check above would refuse, and what it would let pass.
    let code = without_comments("use crate::domain::Domain; // crate::engine in a comment");
    let paths: Vec<_> = crate_paths(&code).into_iter().map(|(_, p)| p).collect();
    assert_eq!(paths, ["domain::Domain"]);
    let code = "use crate::{\n    a::{B, C},\n    Error,\n};\nuse crate::{Result};";
    let paths: Vec<_> = crate_paths(code).into_iter().map(|(_, p)| p).collect();
    assert_eq!(paths, ["a::{B, C}", "Error", "Result"]);
    assert!(floor(target("domain::Domain").unwrap()) > floor("engine/poll"));
    assert!(floor(target("entry::OpContext").unwrap()) < floor("engine/poll"));
    assert!(floor(target("engine::Credits").unwrap()) > floor("buf"));
    assert_eq!(target("hal::Nic"), None);
}
