//! The kernel log, read through `/dev/kmsg` (the console shows only alerts: the harness boots
//! with `loglevel=1`).

use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Read};
use std::os::unix::fs::OpenOptionsExt;

/// A reader positioned at the end of the kernel log when it was opened.
pub(crate) struct Kmsg {
    file: File,
}

impl Kmsg {
    /// Opens `/dev/kmsg` and skips what is already logged.
    ///
    /// # Errors
    /// The OS error, with the path.
    pub(crate) fn open_at_end() -> Result<Kmsg, String> {
        let mut k = Kmsg {
            file: OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NONBLOCK)
                .open("/dev/kmsg")
                .map_err(|e| format!("opening /dev/kmsg: {e}"))?,
        };
        k.new_messages();
        Ok(k)
    }

    /// The messages logged since the last call (text only, without the record prefix).
    pub(crate) fn new_messages(&mut self) -> Vec<String> {
        let mut out = Vec::new();
        let mut buf = vec![0u8; 8192];
        loop {
            // One read returns one record; EAGAIN once there are no more; EPIPE when records
            // were overwritten before we read them (the next read continues).
            match self.file.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => out.push(record_text(&String::from_utf8_lossy(&buf[..n]))),
                Err(e) if e.kind() == ErrorKind::BrokenPipe => continue,
                Err(_) => break,
            }
        }
        out
    }
}

/// The text of a `/dev/kmsg` record: `prio,seq,time,flags;text\n` plus continuation lines.
pub(crate) fn record_text(record: &str) -> String {
    let line = record.lines().next().unwrap_or("");
    line.split_once(';').map_or(line, |(_, t)| t).to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_gives_its_text() {
        let r = "3,512,4096000,-;DMAR: [DMA Read NO_PASID] Request device [00:03.0] fault addr \
                 0x1000 [fault reason 0x06] PTE Read access is not set\n SUBSYSTEM=pci\n";
        assert_eq!(
            record_text(r),
            "DMAR: [DMA Read NO_PASID] Request device [00:03.0] fault addr 0x1000 \
             [fault reason 0x06] PTE Read access is not set"
        );
    }
}
