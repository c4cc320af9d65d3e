//! The NIC-independent driver suite (`ringfab-nic-suite`) on the emulated 82576, plus the
//! exchanges over more queue pairs than every NIC has.

mod common;

use common::Igb82576Fixture;
use ringfab_nic_suite::queues::exchange;

ringfab_nic_suite::suite!(Igb82576Fixture);

#[test]
fn four_queue_pairs_carry_every_frame_once_with_rss_keeping_each_flow_on_its_queue() {
    exchange::<Igb82576Fixture>(4, false);
}

#[test]
fn eight_queue_pairs_carry_every_frame_once_with_rss_keeping_each_flow_on_its_queue() {
    exchange::<Igb82576Fixture>(8, false);
}

#[test]
fn four_queue_pairs_carry_frames_both_ways_at_once() {
    exchange::<Igb82576Fixture>(4, true);
}

#[test]
fn eight_queue_pairs_carry_frames_both_ways_at_once() {
    exchange::<Igb82576Fixture>(8, true);
}
