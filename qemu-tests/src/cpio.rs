//! A writer of the cpio "newc" format the kernel unpacks as its initramfs
//! (Documentation/driver-api/early-userspace/buffer-format.rst): a 110-byte ASCII header per
//! entry, the name NUL-terminated, name and data each padded to 4 bytes, and a `TRAILER!!!`
//! entry at the end. Uncompressed: the kernel takes it as it is, and no host tool is needed.

/// File type bits of `mode`.
const S_IFDIR: u32 = 0o040000;
const S_IFREG: u32 = 0o100000;
const S_IFCHR: u32 = 0o020000;

/// An archive being built in memory.
#[derive(Debug, Default)]
pub(crate) struct Archive {
    bytes: Vec<u8>,
    next_ino: u32,
}

impl Archive {
    fn entry(&mut self, name: &str, mode: u32, rdev: (u32, u32), data: &[u8]) {
        self.next_ino += 1;
        let nlink = if mode & S_IFDIR != 0 { 2 } else { 1 };
        let fields = [
            self.next_ino,
            mode,
            0, // uid
            0, // gid
            nlink,
            0, // mtime: fixed, so the same inputs give the same archive
            u32::try_from(data.len()).expect("initramfs files are far below 4 GiB"),
            0, // devmajor
            0, // devminor
            rdev.0,
            rdev.1,
            u32::try_from(name.len() + 1).expect("short names"),
            0, // check
        ];
        self.bytes.extend_from_slice(b"070701");
        for f in fields {
            self.bytes.extend_from_slice(format!("{f:08x}").as_bytes());
        }
        self.bytes.extend_from_slice(name.as_bytes());
        self.bytes.push(0);
        self.pad();
        self.bytes.extend_from_slice(data);
        self.pad();
    }

    fn pad(&mut self) {
        while self.bytes.len() % 4 != 0 {
            self.bytes.push(0);
        }
    }

    /// A directory (its parent must come first).
    pub(crate) fn dir(&mut self, name: &str) {
        self.entry(name, S_IFDIR | 0o755, (0, 0), &[]);
    }

    /// A regular file with permission bits `perm`.
    pub(crate) fn file(&mut self, name: &str, perm: u32, data: &[u8]) {
        self.entry(name, S_IFREG | (perm & 0o7777), (0, 0), data);
    }

    /// A character device node.
    pub(crate) fn char_dev(&mut self, name: &str, perm: u32, major: u32, minor: u32) {
        self.entry(name, S_IFCHR | (perm & 0o7777), (major, minor), &[]);
    }

    /// The finished archive.
    pub(crate) fn finish(mut self) -> Vec<u8> {
        self.next_ino = u32::MAX - 1; // the trailer's inode number does not matter
        self.entry("TRAILER!!!", 0, (0, 0), &[]);
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(header: &[u8], i: usize) -> u32 {
        let s = std::str::from_utf8(&header[6 + 8 * i..14 + 8 * i]).unwrap();
        u32::from_str_radix(s, 16).unwrap()
    }

    #[test]
    fn a_file_entry_has_the_newc_header_name_and_data_each_padded_to_four() {
        let mut a = Archive::default();
        a.file("init", 0o755, b"#!/bin/sh\n");
        let out = a.finish();
        assert_eq!(&out[..6], b"070701");
        assert_eq!(field(&out, 1), S_IFREG | 0o755, "mode");
        assert_eq!(field(&out, 6), 10, "filesize");
        assert_eq!(field(&out, 11), 5, "namesize counts the NUL");
        // 110 + "init\0" = 115 → padded to 116; data 10 → padded to 12.
        assert_eq!(&out[110..116], b"init\0\0");
        assert_eq!(&out[116..126], b"#!/bin/sh\n");
        assert_eq!(&out[126..128], b"\0\0");
        assert_eq!(&out[128..134], b"070701", "the trailer follows");
        assert_eq!(&out[238..249], b"TRAILER!!!\0");
        assert_eq!(out.len() % 4, 0);
    }

    #[test]
    fn device_nodes_carry_their_numbers_and_directories_two_links() {
        let mut a = Archive::default();
        a.dir("dev");
        a.char_dev("dev/console", 0o600, 5, 1);
        let out = a.finish();
        assert_eq!(field(&out, 1), S_IFDIR | 0o755);
        assert_eq!(field(&out, 4), 2, "nlink of a directory");
        let second = 112 + 4; // "dev\0" after the header: 114, padded to 116
        let h = &out[second..];
        assert_eq!(&h[..6], b"070701");
        assert_eq!(field(h, 1), S_IFCHR | 0o600);
        assert_eq!((field(h, 9), field(h, 10)), (5, 1), "rdevmajor/minor");
        assert_eq!(field(h, 0), 2, "inode numbers differ");
    }
}
