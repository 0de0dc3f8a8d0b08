//! The `switchgnn` binary's build script: it links libtorch through the trainer, so it gets the
//! same rpath as the trainer's own test binaries (see trainer/rpath.rs).

include!("trainer/rpath.rs");
