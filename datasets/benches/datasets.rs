//! Benchmark: time and peak memory to generate the paper-sized synthetic graphs and to load each
//! real dataset, and how loading switchgnn's binary cache compares with parsing the original
//! file, measured in the same run.
//!
//! Every measurement runs in a fresh child process (this binary re-invoked with `--item`), so
//! the peak resident memory it reports (VmHWM) belongs to that one job.
//!
//! `cargo bench -p switchgnn-datasets --bench datasets`
//! Environment: `SWITCHGNN_BENCH_SCALE` (default 1) scales the synthetic presets;
//! `SWITCHGNN_BENCH_SKIP_SYNTHETIC=1` measures only the real datasets.

use std::path::{Path, PathBuf};
use std::time::Instant;

use switchgnn_datasets::synthetic::{generate, Preset};
use switchgnn_datasets::testdata::{peak_rss_kib, run_bench_child, shared_datasets_dir};
use switchgnn_datasets::{cache, load_path, LoadOptions, NoProgress};

const REAL: [&str; 12] = [
    "cora.npz",
    "citeseer.npz",
    "amazon-computers.npz",
    "amazon-photo.npz",
    "amazon-photo-ogb",
    "coauthor-cs.npz",
    "yandex/squirrel.npz",
    "yandex/chameleon.npz",
    "yandex/tolokers.npz",
    "yandex/actor.npz",
    "yandex/minesweeper.npz",
    "musae/facebook",
];

/// Repeats of a load inside one child; the fastest counts (small files are noisy).
const REPEATS: usize = 3;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--item") {
        child(
            &args[i + 1],
            &args[i + 2],
            args.get(i + 3).map(String::as_str),
        );
        return;
    }
    parent();
}

/// One measurement; prints `seconds peak_kib` on stdout.
fn child(kind: &str, what: &str, cache_path: Option<&str>) {
    let started = Instant::now();
    let seconds = match kind {
        "generate" => {
            let scale = bench_scale();
            let d = generate(
                &Preset::from_name(what).unwrap().spec(scale, 0).unwrap(),
                &NoProgress,
            )
            .unwrap();
            let secs = started.elapsed().as_secs_f64();
            if let Some(out) = cache_path {
                cache::write(&d, Path::new(out)).unwrap();
            }
            secs
        }
        "parse" | "cache" => {
            let path = if kind == "parse" {
                PathBuf::from(what)
            } else {
                PathBuf::from(cache_path.unwrap())
            };
            let mut best = f64::INFINITY;
            for _ in 0..REPEATS {
                let t = Instant::now();
                let d = load_path(&path, &LoadOptions::default()).unwrap();
                best = best.min(t.elapsed().as_secs_f64());
                std::hint::black_box(&d);
            }
            best
        }
        "write-cache" => {
            let d = load_path(Path::new(what), &LoadOptions::default()).unwrap();
            cache::write(&d, Path::new(cache_path.unwrap())).unwrap();
            started.elapsed().as_secs_f64()
        }
        other => panic!("unknown bench item {other}"),
    };
    println!("{seconds} {}", peak_rss_kib());
}

fn bench_scale() -> f64 {
    std::env::var("SWITCHGNN_BENCH_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1.0)
}

fn run(kind: &str, what: &str, cache: Option<&Path>) -> (f64, f64) {
    let cache = cache.map(|c| c.to_string_lossy().into_owned());
    let mut args = vec![kind, what];
    args.extend(cache.as_deref());
    run_bench_child(&args)
}

fn parent() {
    let tmp = tempfile::tempdir().unwrap();
    println!(
        "switchgnn-datasets benchmark ({} threads)",
        rayon::current_num_threads()
    );
    let (idle_s, idle_mib) = run("cache", "", Some(&write_tiny_cache(tmp.path())));
    println!(
        "baseline: a child that loads a tiny cache peaks at {idle_mib:.1} MiB ({:.4} s)\n",
        idle_s
    );

    if std::env::var("SWITCHGNN_BENCH_SKIP_SYNTHETIC").is_err() {
        println!(
            "{:<16} {:>7} {:>11} {:>11} {:>13} {:>13} {:>8}",
            "synthetic", "scale", "generate s", "peak MiB", "load cache s", "peak MiB", "ratio"
        );
        for preset in ["reddit-like", "products-like"] {
            let cache = tmp.path().join(format!("{preset}.sgnn"));
            let (gen_s, gen_mib) = run("generate", preset, Some(&cache));
            let (load_s, load_mib) = run("cache", "", Some(&cache));
            println!(
                "{preset:<16} {:>7} {gen_s:>11.2} {gen_mib:>11.0} {load_s:>13.2} {load_mib:>13.0} {:>7.1}x",
                bench_scale(),
                gen_s / load_s
            );
            std::fs::remove_file(&cache).ok();
        }
        println!("(ratio = generation time / cache load time)\n");
    }

    let root = shared_datasets_dir();
    if !root.exists() {
        println!("real datasets: SKIPPED, {} not found", root.display());
        return;
    }
    println!(
        "{:<24} {:>9} {:>10} {:>13} {:>10} {:>8}",
        "real dataset", "parse s", "peak MiB", "load cache s", "peak MiB", "ratio"
    );
    for file in REAL {
        let src = root.join(file);
        let cache = tmp.path().join("real.sgnn");
        run("write-cache", src.to_str().unwrap(), Some(&cache));
        let (parse_s, parse_mib) = run("parse", src.to_str().unwrap(), None);
        let (load_s, load_mib) = run("cache", "", Some(&cache));
        println!(
            "{file:<24} {parse_s:>9.4} {parse_mib:>10.1} {load_s:>13.4} {load_mib:>10.1} {:>7.1}x",
            parse_s / load_s
        );
    }
    println!("(ratio = parse time / cache load time; best of {REPEATS} loads per child process)");
}

fn write_tiny_cache(dir: &Path) -> PathBuf {
    let d = generate(&Preset::Small.spec(0.01, 0).unwrap(), &NoProgress).unwrap();
    let path = dir.join("tiny.sgnn");
    cache::write(&d, &path).unwrap();
    path
}
