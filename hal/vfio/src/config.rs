//! PCI configuration space through VFIO's config region: positioned reads and writes on the
//! device fd at the region's offset (vfio-pci virtualises what it must, such as BARs and the
//! MSI-X capability, and passes the rest through).

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

/// PCI COMMAND register offset (PCI Local Bus spec 3.0, §6.2.2).
pub(crate) const COMMAND: u64 = 0x04;
/// COMMAND bit 1, Memory Space Enable.
pub(crate) const COMMAND_MEMORY: u16 = 1 << 1;
/// COMMAND bit 2, Bus Master Enable: without it the device's DMA is refused.
pub(crate) const COMMAND_BUS_MASTER: u16 = 1 << 2;
/// First BAR register (§6.2.5); BAR n at 0x10 + 4n.
pub(crate) const BAR0: u64 = 0x10;
/// BAR bit 0: 1 for an I/O-space BAR.
pub(crate) const BAR_IO_SPACE: u32 = 1;

/// The config region of one device.
#[derive(Debug)]
pub(crate) struct ConfigSpace {
    file: File,
    /// Region offset in the device fd.
    offset: u64,
    /// Region size (256 for conventional PCI, 4096 for PCIe).
    size: u64,
}

impl ConfigSpace {
    pub(crate) fn new(file: File, offset: u64, size: u64) -> ConfigSpace {
        ConfigSpace { file, offset, size }
    }

    /// File position of `width` bytes at `at`, if aligned and inside the region.
    fn pos(&self, at: u64, width: u64) -> Option<u64> {
        (at % width == 0 && at.checked_add(width)? <= self.size).then(|| self.offset + at)
    }

    /// The 32-bit word at `at`; `0xffff_ffff` if out of range, misaligned, or unreadable.
    pub(crate) fn read32(&self, at: u64) -> u32 {
        let mut b = [0u8; 4];
        match self.pos(at, 4).map(|p| self.file.read_exact_at(&mut b, p)) {
            Some(Ok(())) => u32::from_le_bytes(b),
            _ => 0xffff_ffff,
        }
    }

    /// Writes the 32-bit word at `at`; dropped if out of range or misaligned.
    pub(crate) fn write32(&self, at: u64, value: u32) -> io::Result<()> {
        let p = self
            .pos(at, 4)
            .ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
        self.file.write_all_at(&value.to_le_bytes(), p)
    }

    /// The 16-bit word at `at`.
    pub(crate) fn read16(&self, at: u64) -> io::Result<u16> {
        let p = self
            .pos(at, 2)
            .ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
        let mut b = [0u8; 2];
        self.file.read_exact_at(&mut b, p)?;
        Ok(u16::from_le_bytes(b))
    }

    /// Writes the 16-bit word at `at` (a 16-bit write, so that COMMAND can be set without
    /// writing STATUS, whose error bits are write-one-to-clear).
    pub(crate) fn write16(&self, at: u64, value: u16) -> io::Result<()> {
        let p = self
            .pos(at, 2)
            .ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
        self.file.write_all_at(&value.to_le_bytes(), p)
    }

    /// Sets Memory Space and Bus Master Enable in COMMAND, leaving the other bits as they are;
    /// vfio-pci enables neither (notes/qemu-vfio.md). Returns the new COMMAND value.
    pub(crate) fn enable_memory_and_bus_master(&self) -> io::Result<u16> {
        let cmd = self.read16(COMMAND)? | COMMAND_MEMORY | COMMAND_BUS_MASTER;
        self.write16(COMMAND, cmd)?;
        Ok(cmd)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file standing in for the device fd: 0x1000 bytes of something else, then a 256-byte
    /// config space with COMMAND = 0x0400 (INTx disabled) and STATUS = 0xffff.
    fn fake() -> (ConfigSpace, std::path::PathBuf) {
        let path = std::env::temp_dir().join(format!(
            "ringfab-vfio-config-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let mut bytes = vec![0xaau8; 0x1000];
        let mut cfg = vec![0u8; 256];
        cfg[0..4].copy_from_slice(&0x10c9_8086u32.to_le_bytes());
        cfg[4..6].copy_from_slice(&0x0400u16.to_le_bytes());
        cfg[6..8].copy_from_slice(&0xffffu16.to_le_bytes());
        bytes.extend_from_slice(&cfg);
        std::fs::write(&path, bytes).unwrap();
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .unwrap();
        (ConfigSpace::new(file, 0x1000, 256), path)
    }

    #[test]
    fn reads_and_writes_land_at_the_region_offset() {
        let (c, path) = fake();
        assert_eq!(c.read32(0), 0x10c9_8086);
        c.write32(0x40, 0x1234_5678).unwrap();
        assert_eq!(c.read32(0x40), 0x1234_5678);
        let raw = std::fs::read(&path).unwrap();
        assert_eq!(&raw[0x1040..0x1044], &0x1234_5678u32.to_le_bytes());
        std::fs::remove_file(path).unwrap();
    }

    #[test]
    fn out_of_range_or_misaligned_access_reads_all_ones_and_writes_fail() {
        let (c, path) = fake();
        assert_eq!(c.read32(256), 0xffff_ffff);
        assert_eq!(c.read32(2), 0xffff_ffff);
        assert_eq!(c.read32(u64::MAX - 1), 0xffff_ffff);
        assert!(c.write32(254, 0).is_err());
        assert!(c.write16(1, 0).is_err());
        std::fs::remove_file(path).unwrap();
    }

    #[test]
    fn bus_mastering_sets_mem_and_bme_keeps_other_bits_and_leaves_status_alone() {
        let (c, path) = fake();
        assert_eq!(c.enable_memory_and_bus_master().unwrap(), 0x0406);
        assert_eq!(
            c.read32(4),
            0xffff_0406,
            "STATUS untouched by a 16-bit write"
        );
        std::fs::remove_file(path).unwrap();
    }
}
