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

/// Peak resident memory of this process so far (VmHWM), in KiB; 0 where /proc is missing.
/// Benchmarks run each measurement in a child process and report this at its end.
pub fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Run this benchmark binary again as `--item <args>` and parse the `seconds peak_kib` line it
/// prints, so each measurement has a fresh process and a peak memory of its own.
pub fn run_bench_child(args: &[&str]) -> (f64, f64) {
    let values = run_bench_child_values(args);
    let seconds = *values.first().expect("seconds");
    let kib = *values.get(1).expect("peak KiB");
    (seconds, kib / 1024.0)
}

/// Run this benchmark binary again as `--item <args>` and parse the numbers it prints on
/// stdout, whitespace-separated.
pub fn run_bench_child_values(args: &[&str]) -> Vec<f64> {
    let exe = std::env::current_exe().expect("own executable");
    let out = std::process::Command::new(exe)
        .arg("--item")
        .args(args)
        .output()
        .expect("child benchmark runs");
    assert!(
        out.status.success(),
        "bench item {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .expect("utf-8 output")
        .split_whitespace()
        .map(|x| {
            x.parse()
                .unwrap_or_else(|_| panic!("bench item {args:?} printed `{x}`"))
        })
        .collect()
}
