//! The NIC-independent driver suite (`ringfab-nic-suite`) on the emulated virtio-net-pci: every
//! section, with the fixture saying where virtio behaves otherwise (see `fixture`).

mod fixture;

ringfab_nic_suite::suite!(fixture::VirtioNetFixture);
