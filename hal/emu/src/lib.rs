//! Emulated NICs for ringfab (work in progress).
