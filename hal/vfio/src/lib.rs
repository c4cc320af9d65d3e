//! ringfab's VFIO platform: a PCI NIC driven from userspace on Linux.
//!
//! [`VfioPlatform::open`] takes a PCI function bound to vfio-pci and gives a driver what
//! `ringfab_hal::Platform` promises:
//!
//! * **registers** — memory BARs mmapped from the VFIO device, reached by offset with volatile
//!   32-bit accesses through raw pointers ([`VfioMmio`]);
//! * **DMA memory** — anonymous (or 2 MiB huge-page) memory mapped with VFIO_IOMMU_MAP_DMA at an
//!   IOVA inside the ranges the IOMMU reports as usable ([`VfioDma`]; caller memory:
//!   [`VfioMapping`]). The device reaches that memory and nothing else: it is alone in its own
//!   container, and every mapping is unmapped before its memory is released;
//! * **configuration space** through VFIO's config region, with Memory Space and Bus Master
//!   Enable set at open (vfio-pci sets neither);
//! * **interrupts** — each MSI-X vector delivers to an eventfd, waited on through
//!   `ringfab_hal::Wait` ([`EventFdWait`]).
//!
//! Every failure is an [`Error`] whose message says what to do (bind the device, enable the
//! IOMMU, fix permissions, raise the memlock limit …). The `devbind` binary of this crate binds
//! and unbinds devices ([`bind`]).
//!
//! Every OS touchpoint sits behind a seam, so the logic is tested without hardware: sysfs and
//! procfs are read from a configurable root ([`Sysfs`]), the IOMMU sits behind a mapper
//! interface, config space is positioned I/O on a file, and the IOVA allocator ([`iova`]) and
//! the IOMMU-info parser are pure. What needs a real device (the ioctls, BAR mmap, interrupts)
//! is tested under QEMU (docs/vfio.md).
#![cfg(target_os = "linux")]

pub mod bdf;
pub mod bind;
mod config;
mod dma;
pub mod error;
pub mod iova;
mod mmio;
mod platform;
pub mod sysfs;
mod wait;

pub use bdf::Bdf;
pub use dma::{VfioDma, VfioMapping};
pub use error::{Error, GroupMember, Result};
pub use mmio::VfioMmio;
pub use platform::VfioPlatform;
pub use sysfs::Sysfs;
pub use wait::{EpollWaitSet, EventFdWait};
