//! One NIC type over every ringfab driver: [`AnyNic`] is an 82576 (`ringfab-igb`), an 82574
//! (`ringfab-e1000e`) or a virtio-net device (`ringfab-virtio-net`), the driver chosen by the
//! PCI ID the platform's configuration space holds.
//!
//! A program that takes a PCI function (a VFIO BDF, an emulated device) and does not care which
//! NIC it is opens it with [`AnyNic::open`] and is then generic over one [`Nic`] type instead
//! of matching on PCI IDs itself:
//!
//! ```
//! use ringfab_emu::{EmuE1000e, ModelConfig};
//! use ringfab_hal::Nic;
//! use ringfab_nics::{AnyNic, Driver};
//!
//! let dev = EmuE1000e::new(ModelConfig::default());
//! let nic = AnyNic::open(dev.platform()).unwrap();
//! assert_eq!(nic.driver(), Driver::E1000e);
//! assert_eq!(nic.capabilities().tx_queues, 2);
//! ```
//!
//! Which driver claims which function is each driver's own list (`ringfab_igb::PCI_IDS`, …),
//! asked through [`Driver::for_id`]; a function no driver claims is
//! [`Error::NoDriver`], which names its vendor and device ID and the IDs the drivers take.
//!
//! [`AnyNic`] implements [`Nic`] by dispatching each call to the driver it holds; its queues
//! [`AnyTx`] and [`AnyRx`] are enums over the three drivers' queue types and implement the hal's
//! queue traits the same way. The data-path methods are `#[inline]`: a caller generic over
//! `N: Nic` pays one predictable branch on the variant per call, and the driver's own code
//! inlines behind it.
//!
//! The crate is `#![no_std]`, needs no allocator and has no `unsafe` of its own beyond
//! forwarding [`Nic::map_dma`]'s contract.
#![no_std]
#![deny(unsafe_code)]

use core::ptr::NonNull;

use ringfab_e1000e::{E1000e, E1000eRx, E1000eTx};
use ringfab_hal::{
    Capabilities, Link, MacAddr, Nic, Platform, PushError, Queue, QueueFault, Report, RssConfig,
    RxBuffer, RxCompletion, RxConfig, RxMode, RxQueue, Stats, Token, TxChecksum, TxCompletion,
    TxConfig, TxQueue, TxSegment,
};
use ringfab_igb::{Igb, IgbRx, IgbTx};
use ringfab_virtio_net::{VirtioNet, VirtioNetRx, VirtioNetTx};

/// One of the drivers [`AnyNic`] can hold.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
#[non_exhaustive]
pub enum Driver {
    /// `ringfab-igb`: the Intel 82576 family.
    Igb,
    /// `ringfab-e1000e`: the Intel 82574.
    E1000e,
    /// `ringfab-virtio-net`: virtio 1.x network devices.
    VirtioNet,
}

impl Driver {
    /// Every driver, in the order [`for_id`](Self::for_id) asks them.
    pub const ALL: [Driver; 3] = [Driver::Igb, Driver::E1000e, Driver::VirtioNet];

    /// The driver's short name: `igb`, `e1000e`, `virtio-net` (also its `Display`).
    pub const fn name(self) -> &'static str {
        match self {
            Driver::Igb => "igb",
            Driver::E1000e => "e1000e",
            Driver::VirtioNet => "virtio-net",
        }
    }

    /// The devices the driver is for, as a person names them: `Intel 82576`, `Intel 82574`,
    /// `virtio-net`.
    pub const fn device(self) -> &'static str {
        match self {
            Driver::Igb => "Intel 82576",
            Driver::E1000e => "Intel 82574",
            Driver::VirtioNet => "virtio-net",
        }
    }

    /// The PCI functions the driver drives, `(vendor, device)`: the driver's own list.
    pub const fn pci_ids(self) -> &'static [(u16, u16)] {
        match self {
            Driver::Igb => ringfab_igb::PCI_IDS,
            Driver::E1000e => ringfab_e1000e::PCI_IDS,
            Driver::VirtioNet => ringfab_virtio_net::PCI_IDS,
        }
    }

    /// Whether the driver drives the PCI function `vendor:device` (the driver's own `drives`).
    pub fn drives(self, vendor: u16, device: u16) -> bool {
        match self {
            Driver::Igb => ringfab_igb::drives(vendor, device),
            Driver::E1000e => ringfab_e1000e::drives(vendor, device),
            Driver::VirtioNet => ringfab_virtio_net::drives(vendor, device),
        }
    }

    /// The driver that drives the PCI function `vendor:device`, if any does.
    pub fn for_id(vendor: u16, device: u16) -> Option<Driver> {
        Self::ALL.into_iter().find(|d| d.drives(vendor, device))
    }
}

impl core::fmt::Display for Driver {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

/// Why [`AnyNic::open`] failed.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub enum Error {
    /// No driver drives the PCI function: its vendor and device ID as configuration space
    /// gave them (all-ones for a function that does not answer).
    NoDriver {
        /// PCI vendor ID.
        vendor: u16,
        /// PCI device ID.
        device: u16,
    },
    /// The driver that claims the function failed to bring it up.
    Driver {
        /// The driver.
        driver: Driver,
        /// What its bring-up returned.
        error: ringfab_hal::Error,
    },
}

impl core::fmt::Display for Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Error::NoDriver { vendor, device } => {
                write!(f, "PCI {vendor:04x}:{device:04x} has no ringfab driver (")?;
                for (i, driver) in Driver::ALL.iter().enumerate() {
                    f.write_str(if i == 0 { "" } else { "; " })?;
                    write!(f, "{driver}:")?;
                    for (v, d) in driver.pci_ids() {
                        write!(f, " {v:04x}:{d:04x}")?;
                    }
                }
                f.write_str(")")
            }
            Error::Driver { driver, error } => {
                write!(f, "bringing up the NIC with the {driver} driver: {error}")
            }
        }
    }
}

impl core::error::Error for Error {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            Error::NoDriver { .. } => None,
            Error::Driver { error, .. } => Some(error),
        }
    }
}

/// For callers that speak the hal's errors: no driver is the hal's
/// [`UnsupportedDevice`](ringfab_hal::Error::UnsupportedDevice), a bring-up failure the
/// driver's own error.
impl From<Error> for ringfab_hal::Error {
    fn from(e: Error) -> Self {
        match e {
            Error::NoDriver { vendor, device } => {
                ringfab_hal::Error::UnsupportedDevice { vendor, device }
            }
            Error::Driver { error, .. } => error,
        }
    }
}

/// `$body` with `$x` bound to what the `$enum` value `$value` holds, whichever driver's it is.
macro_rules! dispatch {
    ($value:expr, $enum:ident, $x:ident => $body:expr) => {
        match $value {
            $enum::Igb($x) => $body,
            $enum::E1000e($x) => $body,
            $enum::VirtioNet($x) => $body,
        }
    };
}

/// A NIC brought up by whichever ringfab driver drives it, over platform `P`.
#[allow(
    clippy::large_enum_variant,
    reason = "one value per NIC, and no allocator to box a driver in: the enum is the size of \
              the largest driver, as that driver alone would be"
)]
pub enum AnyNic<P: Platform> {
    /// An Intel 82576 under `ringfab-igb`.
    Igb(Igb<P>),
    /// An Intel 82574 under `ringfab-e1000e`.
    E1000e(E1000e<P>),
    /// A virtio network device under `ringfab-virtio-net`.
    VirtioNet(VirtioNet<P>),
}

impl<P: Platform> AnyNic<P> {
    /// Reads the PCI ID from `platform`'s configuration space and brings the function up with
    /// the driver that drives it ([`Driver::for_id`]).
    ///
    /// # Errors
    /// [`Error::NoDriver`] when no driver drives the ID; [`Error::Driver`] with what the
    /// driver's bring-up returned.
    pub fn open(platform: P) -> Result<Self, Error> {
        // Dword 0 of configuration space: vendor ID in bits 15:0, device ID in bits 31:16 (PCI
        // Local Bus Specification 3.0, §6.2.1).
        let id = platform.config_read32(0);
        let (vendor, device) = (id as u16, (id >> 16) as u16);
        let driver = Driver::for_id(vendor, device).ok_or(Error::NoDriver { vendor, device })?;
        let nic = match driver {
            Driver::Igb => Igb::new(platform).map(AnyNic::Igb),
            Driver::E1000e => E1000e::new(platform).map(AnyNic::E1000e),
            Driver::VirtioNet => VirtioNet::new(platform).map(AnyNic::VirtioNet),
        };
        nic.map_err(|error| Error::Driver { driver, error })
    }

    /// The driver that holds the NIC.
    pub fn driver(&self) -> Driver {
        match self {
            AnyNic::Igb(_) => Driver::Igb,
            AnyNic::E1000e(_) => Driver::E1000e,
            AnyNic::VirtioNet(_) => Driver::VirtioNet,
        }
    }

    /// The NIC's PCI vendor and device ID, read from configuration space now.
    pub fn pci_id(&self) -> (u16, u16) {
        let id = self.platform().config_read32(0);
        (id as u16, (id >> 16) as u16)
    }

    /// The platform the device lives on.
    pub fn platform(&self) -> &P {
        dispatch!(self, AnyNic, n => n.platform())
    }
}

impl<P: Platform> core::fmt::Debug for AnyNic<P> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        dispatch!(self, AnyNic, n => n.fmt(f))
    }
}

impl<P: Platform> Nic for AnyNic<P> {
    type Wait = P::Wait;
    type Dma = P::Dma;
    type Mapping = P::Mapping;
    type Tx<'a, const N: usize>
        = AnyTx<'a, P, N>
    where
        Self: 'a;
    type Rx<'a, const N: usize>
        = AnyRx<'a, P, N>
    where
        Self: 'a;

    fn capabilities(&self) -> Capabilities {
        dispatch!(self, AnyNic, n => n.capabilities())
    }

    fn link(&self) -> Link {
        dispatch!(self, AnyNic, n => n.link())
    }

    fn reset(&self) -> ringfab_hal::Result {
        dispatch!(self, AnyNic, n => n.reset())
    }

    fn recover(&self) -> ringfab_hal::Result {
        dispatch!(self, AnyNic, n => n.recover())
    }

    fn open_tx<const N: usize>(
        &self,
        index: u16,
        config: TxConfig,
    ) -> ringfab_hal::Result<AnyTx<'_, P, N>> {
        Ok(match self {
            AnyNic::Igb(n) => AnyTx::Igb(n.open_tx::<N>(index, config)?),
            AnyNic::E1000e(n) => AnyTx::E1000e(n.open_tx::<N>(index, config)?),
            AnyNic::VirtioNet(n) => AnyTx::VirtioNet(n.open_tx::<N>(index, config)?),
        })
    }

    fn open_rx<const N: usize>(
        &self,
        index: u16,
        config: RxConfig,
    ) -> ringfab_hal::Result<AnyRx<'_, P, N>> {
        Ok(match self {
            AnyNic::Igb(n) => AnyRx::Igb(n.open_rx::<N>(index, config)?),
            AnyNic::E1000e(n) => AnyRx::E1000e(n.open_rx::<N>(index, config)?),
            AnyNic::VirtioNet(n) => AnyRx::VirtioNet(n.open_rx::<N>(index, config)?),
        })
    }

    fn set_rss(&self, rss: &RssConfig<'_>) -> ringfab_hal::Result {
        dispatch!(self, AnyNic, n => n.set_rss(rss))
    }

    fn set_rx_mode(&self, mode: RxMode) -> ringfab_hal::Result {
        dispatch!(self, AnyNic, n => n.set_rx_mode(mode))
    }

    fn set_rx_queue_mac(&self, queue: u16, mac: Option<MacAddr>) -> ringfab_hal::Result {
        dispatch!(self, AnyNic, n => n.set_rx_queue_mac(queue, mac))
    }

    fn stats(&self) -> Stats {
        dispatch!(self, AnyNic, n => n.stats())
    }

    fn rx_error_name(&self, bit: u32) -> Option<&'static str> {
        dispatch!(self, AnyNic, n => n.rx_error_name(bit))
    }

    fn alloc_dma(&self, len: usize) -> ringfab_hal::Result<P::Dma> {
        dispatch!(self, AnyNic, n => n.alloc_dma(len))
    }

    // The crate's one unsafe item: it only forwards the caller's promise to the driver.
    #[allow(
        unsafe_code,
        reason = "forwards Nic::map_dma's contract to the driver's Nic::map_dma"
    )]
    unsafe fn map_dma(&self, cpu: NonNull<u8>, len: usize) -> ringfab_hal::Result<P::Mapping> {
        // SAFETY: the driver's `Nic::map_dma` requires of us exactly what ours requires of our
        // caller (memory valid and unreferenced while mapped).
        dispatch!(self, AnyNic, n => unsafe { n.map_dma(cpu, len) })
    }

    fn irq_vectors(&self) -> u16 {
        dispatch!(self, AnyNic, n => n.irq_vectors())
    }

    fn irq(&self, vector: u16) -> ringfab_hal::Result<P::Wait> {
        dispatch!(self, AnyNic, n => n.irq(vector))
    }
}

/// An open transmit queue of an [`AnyNic`], of depth `N`: the driver's own queue type.
pub enum AnyTx<'a, P: Platform, const N: usize> {
    /// An 82576 transmit queue.
    Igb(IgbTx<'a, P, N>),
    /// An 82574 transmit queue.
    E1000e(E1000eTx<'a, P, N>),
    /// A virtio-net transmit virtqueue.
    VirtioNet(VirtioNetTx<'a, P, N>),
}

/// An open receive queue of an [`AnyNic`], of depth `N`: the driver's own queue type.
pub enum AnyRx<'a, P: Platform, const N: usize> {
    /// An 82576 receive queue.
    Igb(IgbRx<'a, P, N>),
    /// An 82574 receive queue.
    E1000e(E1000eRx<'a, P, N>),
    /// A virtio-net receive virtqueue.
    VirtioNet(VirtioNetRx<'a, P, N>),
}

/// [`Queue`] and `Debug` for a queue enum, by dispatch; both enums share them word for word.
macro_rules! any_queue {
    ($queue:ident) => {
        impl<P: Platform, const N: usize> core::fmt::Debug for $queue<'_, P, N> {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                dispatch!(self, $queue, q => q.fmt(f))
            }
        }

        impl<P: Platform, const N: usize> Queue for $queue<'_, P, N> {
            type Wait = P::Wait;

            fn index(&self) -> u16 {
                dispatch!(self, $queue, q => q.index())
            }

            fn depth(&self) -> usize {
                N
            }

            #[inline]
            fn free(&self) -> usize {
                dispatch!(self, $queue, q => q.free())
            }

            #[inline]
            fn pending(&self) -> usize {
                dispatch!(self, $queue, q => q.pending())
            }

            #[inline]
            fn doorbell(&mut self) {
                dispatch!(self, $queue, q => q.doorbell())
            }

            #[inline]
            fn fault(&self) -> Option<QueueFault> {
                dispatch!(self, $queue, q => q.fault())
            }

            fn check(&mut self) -> Option<QueueFault> {
                dispatch!(self, $queue, q => q.check())
            }

            fn flush(&mut self) {
                dispatch!(self, $queue, q => q.flush())
            }

            fn interrupt(&self) -> Option<&P::Wait> {
                dispatch!(self, $queue, q => q.interrupt())
            }

            fn set_interrupt(&mut self, armed: bool) {
                dispatch!(self, $queue, q => q.set_interrupt(armed))
            }

            fn interrupt_vector(&self) -> Option<u16> {
                dispatch!(self, $queue, q => q.interrupt_vector())
            }
        }
    };
}

any_queue!(AnyTx);
any_queue!(AnyRx);

impl<P: Platform, const N: usize> TxQueue for AnyTx<'_, P, N> {
    #[inline]
    fn push(
        &mut self,
        segments: &[TxSegment],
        token: Token,
        report: Report,
    ) -> Result<(), PushError> {
        dispatch!(self, AnyTx, q => q.push(segments, token, report))
    }

    #[inline]
    fn push_checksummed(
        &mut self,
        segments: &[TxSegment],
        token: Token,
        report: Report,
        checksum: TxChecksum,
    ) -> Result<(), PushError> {
        dispatch!(self, AnyTx, q => q.push_checksummed(segments, token, report, checksum))
    }

    #[inline]
    fn poll(&mut self, out: &mut [TxCompletion]) -> usize {
        dispatch!(self, AnyTx, q => q.poll(out))
    }
}

impl<P: Platform, const N: usize> RxQueue for AnyRx<'_, P, N> {
    fn buf_len(&self) -> u32 {
        dispatch!(self, AnyRx, q => q.buf_len())
    }

    #[inline]
    fn push(&mut self, buf: RxBuffer, token: Token) -> Result<(), PushError> {
        dispatch!(self, AnyRx, q => q.push(buf, token))
    }

    #[inline]
    fn poll(&mut self, out: &mut [RxCompletion]) -> usize {
        dispatch!(self, AnyRx, q => q.poll(out))
    }

    #[inline]
    fn poll_each(&mut self, max: usize, f: &mut impl FnMut(&RxCompletion)) -> usize {
        dispatch!(self, AnyRx, q => q.poll_each(max, f))
    }

    #[inline]
    fn poll_each_unhashed(&mut self, max: usize, f: &mut impl FnMut(&RxCompletion)) -> usize {
        dispatch!(self, AnyRx, q => q.poll_each_unhashed(max, f))
    }

    #[inline]
    fn poll_each_split(
        &mut self,
        max: usize,
        fast: &mut impl FnMut(&RxCompletion) -> bool,
        slow: &mut impl FnMut(&RxCompletion),
    ) -> usize {
        dispatch!(self, AnyRx, q => q.poll_each_split(max, fast, slow))
    }
}
