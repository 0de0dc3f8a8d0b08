//! Locating the shared real datasets (`../shared/datasets` beside the repository) for tests and
//! benchmarks. Outside CI a missing folder means "skip, and say why"; under `CI=true` it is an
//! error, so CI never passes by skipping.

use std::path::PathBuf;

/// The shared datasets folder: `$SWITCHGNN_DATASETS` if set, else `<repo>/../shared/datasets`.
pub fn shared_datasets_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("SWITCHGNN_DATASETS") {
        return PathBuf::from(dir);
    }
    // This crate lives in `<repo>/datasets`.
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/datasets")
}

/// `Some(path)` of a file under the shared datasets folder, or `None` after printing why the
/// caller skips. Panics under `CI=true` when the file is missing.
pub fn shared_dataset(relative: &str) -> Option<PathBuf> {
    let path = shared_datasets_dir().join(relative);
    if path.exists() {
        return Some(path);
    }
    let in_ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
    assert!(
        !in_ci,
        "CI=true but the shared dataset {} is missing; CI must not skip real-data tests",
        path.display()
    );
    eprintln!(
        "SKIPPED: {} not found (set SWITCHGNN_DATASETS to the shared datasets folder)",
        path.display()
    );
    None
}
