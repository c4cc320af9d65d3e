//! The NIC-independent driver suite (`ringfab-nic-suite`) on the emulated 82574.

mod fixture;

ringfab_nic_suite::suite!(fixture::E1000e82574Fixture);
