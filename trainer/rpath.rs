// Give the test and bench binaries of this crate an rpath to libtorch's libraries, so they run
// without LD_LIBRARY_PATH. torch-sys links against `$LIBTORCH/lib` (or `$LIBTORCH_LIB/lib`) but
// leaves the run-time search path to the user; this repeats its lookup. The build scripts of
// this crate and of the root crate (for the `switchgnn` binary) both include this file, which
// therefore holds no crate-level attributes or docs of its own.

fn main() {
    println!("cargo:rerun-if-env-changed=LIBTORCH");
    println!("cargo:rerun-if-env-changed=LIBTORCH_LIB");
    let base = std::env::var("LIBTORCH_LIB").or_else(|_| std::env::var("LIBTORCH"));
    if let Ok(base) = base {
        let lib = std::path::Path::new(&base).join("lib");
        if std::env::var("CARGO_CFG_TARGET_OS").as_deref() != Ok("windows") {
            println!("cargo:rustc-link-arg=-Wl,-rpath,{}", lib.display());
        }
    }
}
