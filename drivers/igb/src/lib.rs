//! ringfab driver for the Intel 82576 (work in progress).
#![no_std]
