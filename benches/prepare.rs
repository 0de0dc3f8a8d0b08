//! Benchmark: the whole `switchgnn prepare` command (worker partition, boundary analysis, blocks,
//! send orders, the exchange planner's verdict, writing the plan) against METIS alone on the
//! same graph, in the same run: wall time as a ratio, peak resident memory as the excess over
//! METIS's own peak in units of the graph's CSR arrays.
//!
//! `cargo bench -p switchgnn --bench prepare`
//! Environment: `SWITCHGNN_BENCH_SCALE` (default 1) scales the presets,
//! `SWITCHGNN_BENCH_WORKERS` (default 128), `SWITCHGNN_BENCH_WIDTH` (default 128, the hidden
//! width a 4-layer GCN exchanges), `SWITCHGNN_BENCH_GRAPHS` (default
//! `reddit-like,products-like`), `SWITCHGNN_BENCH_MEMORIES` (default `100MB,10MB`),
//! `SWITCHGNN_BENCH_METHODS` (default `vertices,parts`), `SWITCHGNN_BENCH_BASELINE_BIN` (another
//! `switchgnn` binary, e.g. a build of an earlier commit, measured beside this one row by row).
//!
//! Every measurement is a process of its own on a graph-only cache: METIS alone runs in a child
//! of this binary, `prepare` is the release binary itself, and each peak is that process's
//! maximum resident set as the kernel reports it to its parent.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use switchgnn_datasets::synthetic::{generate, Preset};
use switchgnn_datasets::testdata::{peak_rss_kib, run_bench_child};
use switchgnn_datasets::{cache, load_path, LoadOptions, NoProgress};
use switchgnn_partition::{Assignment, Method, MetisOptions};

fn env<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--item") {
        match args[i + 1].as_str() {
            "metis" => metis(Path::new(&args[i + 2])),
            "floor" => println!("0 {}", peak_rss_kib()),
            "cli" => cli(&args[i + 2..]),
            other => panic!("unknown bench item {other}"),
        }
        return;
    }
    let scale: f64 = env("SWITCHGNN_BENCH_SCALE", 1.0);
    let workers: u32 = env("SWITCHGNN_BENCH_WORKERS", 128);
    let width: usize = env("SWITCHGNN_BENCH_WIDTH", 128);
    let graphs: String = env(
        "SWITCHGNN_BENCH_GRAPHS",
        "reddit-like,products-like".to_string(),
    );
    let memories: String = env("SWITCHGNN_BENCH_MEMORIES", "100MB,10MB".to_string());
    let methods: String = env("SWITCHGNN_BENCH_METHODS", "vertices,parts".to_string());
    let baseline: String = env("SWITCHGNN_BENCH_BASELINE_BIN", String::new());
    println!("switchgnn prepare vs METIS alone: {workers} workers, width {width}, scale {scale}");
    println!(
        "{:<14} {:>22} {:>8} {:>9} {:>6} {:>8} {:>8} {:>9} {:>9} {:>11}",
        "graph",
        "memory/blocks",
        "CSR MiB",
        "time s",
        "÷METIS",
        "peak MiB",
        "work MiB",
        "work÷CSR",
        "-METIS",
        "-METIS ÷CSR"
    );
    let tmp = tempfile::tempdir().unwrap();
    for preset in graphs.split(',') {
        let mut d = generate(
            &Preset::from_name(preset).unwrap().spec(scale, 0).unwrap(),
            &NoProgress,
        )
        .unwrap();
        d.features = None;
        let csr_mib = (d.graph.offsets().len() * 8 + d.graph.neighbor_ids().len() * 4) as f64
            / (1 << 20) as f64;
        let graph = tmp.path().join(format!("{preset}.sgnn"));
        cache::write(&d, &graph).unwrap();
        drop(d);
        let g = graph.to_str().unwrap();
        let (metis_s, metis_mib) = run_bench_child(&["metis", g]);
        // Each process's own floor (the binary and its libraries, libtorch's for `switchgnn`)
        // is taken off its peak, so the comparison is of the work's memory.
        let (_, bench_floor) = run_bench_child(&["floor"]);
        let metis_work = metis_mib - bench_floor;
        let row = |what: &str, seconds: f64, mib: f64, floor: f64| {
            let work = mib - floor;
            println!(
                "{preset:<14} {what:>22} {csr_mib:>8.0} {seconds:>9.1} {:>6.2} {mib:>8.0} {:>8.0} {:>9.2} {:>9.0} {:>11.2}",
                seconds / metis_s,
                work,
                work / csr_mib,
                work - metis_work,
                (work - metis_work) / csr_mib
            );
        };
        row("METIS alone", metis_s, metis_mib, bench_floor);
        for memory in memories.split(',') {
            for method in methods.split(',') {
                let out = tmp.path().join("plan");
                let workers = workers.to_string();
                let width = width.to_string();
                let prepare = [
                    "prepare",
                    g,
                    "--workers",
                    &workers,
                    "--feature-dims",
                    &width,
                    "--switch-memory",
                    memory,
                    "--block-method",
                    method,
                    "--out",
                    out.to_str().unwrap(),
                ];
                for (bin, tag) in [
                    (env!("CARGO_BIN_EXE_switchgnn"), ""),
                    (&baseline, " (base)"),
                ] {
                    if bin.is_empty() {
                        continue;
                    }
                    let (_, floor) = run_bench_child(&["cli", bin, "--version"]);
                    let args: Vec<&str> = ["cli", bin].into_iter().chain(prepare).collect();
                    let (seconds, mib) = run_bench_child(&args);
                    row(&format!("{memory}/{method}{tag}"), seconds, mib, floor);
                    let manifest: serde_json::Value =
                        serde_json::from_slice(&std::fs::read(out.join("manifest.json")).unwrap())
                            .unwrap();
                    println!(
                        "{:>38} {} blocks in {} levels, block plan {:.1} MB ({:.1}% below the host exchange)",
                        "",
                        manifest["block_sets"][0]["blocks"],
                        manifest["block_sets"][0]["levels"],
                        manifest["traffic"][0]["plan_bytes"].as_f64().unwrap() / 1e6,
                        100.0 * manifest["traffic"][0]["plan_reduction"].as_f64().unwrap()
                    );
                    std::fs::remove_dir_all(&out).unwrap();
                }
            }
        }
    }
    println!(
        "(time ÷METIS: prepare's wall time, loading included, over METIS alone's; work: the peak \
         less the process's floor before any work (libtorch's, for switchgnn); -METIS: \
         prepare's work memory less METIS's, MiB and in CSRs; the goal is at most one CSR)"
    );
}

/// METIS alone, in this process: load the graph, partition it, report time and peak.
fn metis(graph: &Path) {
    let workers: u32 = env("SWITCHGNN_BENCH_WORKERS", 128);
    let d = load_path(graph, &LoadOptions::default()).unwrap();
    let started = Instant::now();
    let a =
        Assignment::compute(&d.graph, workers, &Method::Metis(MetisOptions::default())).unwrap();
    std::hint::black_box(a);
    // Loading is left out here but timed for `prepare`: the ratio errs against `prepare`.
    println!("{} {}", started.elapsed().as_secs_f64(), peak_rss_kib());
}

/// Run the `switchgnn` binary `args[0]` with the rest of `args` and report its wall time and
/// peak resident set (this process has no other child, so the children's high-water mark is
/// its own).
fn cli(args: &[String]) {
    let started = Instant::now();
    let out = Command::new(&args[0])
        .args(&args[1..])
        .env("RUST_LOG", "warn")
        .output()
        .expect("switchgnn runs");
    let seconds = started.elapsed().as_secs_f64();
    assert!(
        out.status.success(),
        "switchgnn {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage fills the struct it is given; RUSAGE_CHILDREN is a valid selector.
    let usage = unsafe {
        assert_eq!(
            libc::getrusage(libc::RUSAGE_CHILDREN, usage.as_mut_ptr()),
            0
        );
        usage.assume_init()
    };
    // ru_maxrss is in KiB on Linux.
    println!("{seconds} {}", usage.ru_maxrss);
}
