//! What a dynamically linked ELF file asks of the loader: its interpreter (`PT_INTERP`) and the
//! shared libraries it needs (`DT_NEEDED`), read from the file itself so that the runner needs
//! neither `ldd` (which runs the host's loader) nor binutils' `readelf`; and what a kernel module
//! needs loaded before it (`depends=` in its `.modinfo` section), without `modinfo`.
//!
//! Only what the guest's files are is read: 64-bit little-endian ELF (System V ABI, "ELF
//! Header", "Program Header", "Sections", "Dynamic Section"; the x86-64 psABI fixes the
//! class and byte order). Every offset is checked against the file: a malformed file is an
//! error, never a panic.

/// The dynamic-linking facts of one ELF file.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub(crate) struct Dynamic {
    /// The program interpreter (`/lib64/ld-linux-x86-64.so.2`); none for a shared library.
    pub(crate) interp: Option<String>,
    /// The sonames of `DT_NEEDED`, in the file's order.
    pub(crate) needed: Vec<String>,
}

const PT_INTERP: u32 = 3;
const SHT_DYNAMIC: u32 = 6;
const DT_NULL: u64 = 0;
const DT_NEEDED: u64 = 1;

/// Bytes `[at, at + len)` of `b`, if they are all inside it.
fn slice(b: &[u8], at: u64, len: u64) -> Result<&[u8], String> {
    let start = usize::try_from(at).map_err(|_| "offset too large")?;
    let len = usize::try_from(len).map_err(|_| "length too large")?;
    start
        .checked_add(len)
        .and_then(|end| b.get(start..end))
        .ok_or_else(|| format!("{len} bytes at {start} lie outside the file ({})", b.len()))
}

fn u16_at(b: &[u8], at: u64) -> Result<u16, String> {
    Ok(u16::from_le_bytes(
        slice(b, at, 2)?.try_into().expect("2 bytes"),
    ))
}

fn u32_at(b: &[u8], at: u64) -> Result<u32, String> {
    Ok(u32::from_le_bytes(
        slice(b, at, 4)?.try_into().expect("4 bytes"),
    ))
}

fn u64_at(b: &[u8], at: u64) -> Result<u64, String> {
    Ok(u64::from_le_bytes(
        slice(b, at, 8)?.try_into().expect("8 bytes"),
    ))
}

/// The NUL-terminated string at `at` in `b`.
fn c_str(b: &[u8], at: u64) -> Result<String, String> {
    let rest = slice(b, at, 0).map(|_| &b[at as usize..])?;
    let end = rest
        .iter()
        .position(|&c| c == 0)
        .ok_or("a string without its NUL")?;
    Ok(String::from_utf8_lossy(&rest[..end]).into_owned())
}

/// Reads the interpreter and the needed libraries of the ELF file `b`.
///
/// # Errors
/// What is wrong with the file: not 64-bit little-endian ELF, or a header, segment or section
/// that points outside it.
pub(crate) fn dynamic(b: &[u8]) -> Result<Dynamic, String> {
    // e_ident: magic, EI_CLASS 2 (64-bit), EI_DATA 1 (little-endian).
    if b.get(..6) != Some(b"\x7fELF\x02\x01".as_slice()) {
        return Err("not a 64-bit little-endian ELF file".into());
    }
    let (phoff, shoff) = (u64_at(b, 0x20)?, u64_at(b, 0x28)?);
    let (phentsize, phnum) = (u16_at(b, 0x36)?, u16_at(b, 0x38)?);
    let (shentsize, shnum) = (u16_at(b, 0x3a)?, u16_at(b, 0x3c)?);
    let mut out = Dynamic::default();
    for i in 0..u64::from(phnum) {
        let ph = phoff + i * u64::from(phentsize);
        if u32_at(b, ph)? == PT_INTERP {
            out.interp = Some(c_str(b, u64_at(b, ph + 8)?)?);
        }
    }
    let section = |i: u64| shoff + i * u64::from(shentsize);
    for i in 0..u64::from(shnum) {
        let sh = section(i);
        if u32_at(b, sh + 4)? != SHT_DYNAMIC {
            continue;
        }
        let (offset, size) = (u64_at(b, sh + 24)?, u64_at(b, sh + 32)?);
        // sh_link of the dynamic section: its string table.
        let strtab = u64_at(b, section(u64::from(u32_at(b, sh + 40)?)) + 24)?;
        for e in (0..size / 16).map(|k| offset + 16 * k) {
            match u64_at(b, e)? {
                DT_NULL => break,
                DT_NEEDED => out.needed.push(c_str(b, strtab + u64_at(b, e + 8)?)?),
                _ => {}
            }
        }
    }
    Ok(out)
}

/// The bytes of the section named `name` (`.modinfo`, `.interp`), if the file has one: section
/// names are offsets into the section-name string table that `e_shstrndx` indexes.
///
/// # Errors
/// What is wrong with the file, as for [`dynamic`].
pub(crate) fn section<'b>(b: &'b [u8], name: &str) -> Result<Option<&'b [u8]>, String> {
    if b.get(..6) != Some(b"\x7fELF\x02\x01".as_slice()) {
        return Err("not a 64-bit little-endian ELF file".into());
    }
    let shoff = u64_at(b, 0x28)?;
    let (shentsize, shnum, shstrndx) = (u16_at(b, 0x3a)?, u16_at(b, 0x3c)?, u16_at(b, 0x3e)?);
    let section = |i: u64| shoff + i * u64::from(shentsize);
    let names = u64_at(b, section(u64::from(shstrndx)) + 24)?;
    for i in 0..u64::from(shnum) {
        let sh = section(i);
        if c_str(b, names + u64::from(u32_at(b, sh)?))? == name {
            let (offset, size) = (u64_at(b, sh + 24)?, u64_at(b, sh + 32)?);
            return slice(b, offset, size).map(Some);
        }
    }
    Ok(None)
}

/// The modules a kernel module needs loaded before it: the `depends=` entry of its `.modinfo`
/// section (NUL-separated `key=value` strings, what `modinfo -F depends` prints), comma-separated
/// names as the kernel spells them (`i2c-algo-bit`, `virtio_ring`).
pub(crate) fn module_depends(modinfo: &[u8]) -> Vec<String> {
    modinfo
        .split(|&c| c == 0)
        .filter_map(|kv| kv.strip_prefix(b"depends="))
        .flat_map(|v| {
            String::from_utf8_lossy(v)
                .split(',')
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .filter(|d| !d.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_runners_own_binary_needs_libc_through_the_system_loader() {
        let exe = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        let d = dynamic(&exe).unwrap();
        assert!(d.needed.iter().any(|n| n == "libc.so.6"), "{d:?}");
        let interp = d.interp.unwrap_or_default();
        assert!(interp.ends_with("ld-linux-x86-64.so.2"), "{interp}");
    }

    #[test]
    fn a_truncated_or_foreign_file_is_an_error() {
        let exe = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        assert!(dynamic(&exe[..100]).is_err(), "headers point past the end");
        assert!(dynamic(b"#!/bin/sh\n").is_err());
        let mut big_endian = exe[..64].to_vec();
        big_endian[5] = 2;
        assert!(dynamic(&big_endian).is_err());
    }

    #[test]
    fn sections_are_found_by_name() {
        let exe = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        let interp = section(&exe, ".interp").unwrap().expect(".interp");
        let d = dynamic(&exe).unwrap();
        assert_eq!(
            interp.strip_suffix(b"\0"),
            d.interp.as_deref().map(str::as_bytes),
            "the section PT_INTERP points into"
        );
        assert_eq!(section(&exe, ".no-such-section").unwrap(), None);
        assert!(section(b"#!/bin/sh\n", ".modinfo").is_err());
    }

    #[test]
    fn a_module_s_dependencies_come_from_its_modinfo() {
        let igb = b"license=GPL v2\0srcversion=ABC\0depends=dca,i2c-algo-bit\0retpoline=Y\0";
        assert_eq!(module_depends(igb), ["dca", "i2c-algo-bit"]);
        assert!(module_depends(b"license=GPL v2\0depends=\0intree=Y\0").is_empty());
        assert!(module_depends(b"").is_empty());
    }
}
