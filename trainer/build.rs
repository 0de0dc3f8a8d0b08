//! The trainer's build script: an rpath to libtorch for its test and bench binaries.

include!("rpath.rs");
