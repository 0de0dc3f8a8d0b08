// The `switchgnn` binary links libtorch through the trainer; give it the same rpath as the
// trainer's own test binaries (see trainer/build.rs).
include!("trainer/build.rs");
