//! Benchmark: the whole `prepare` (worker partition, boundary analysis, block partitioning)
//! against METIS alone on the same graph, in the same run, with peak memory against the size of
//! the graph's CSR arrays.
//!
//! `cargo bench -p switchgnn-partition --bench prepare`
//! Environment: `SWITCHGNN_BENCH_SCALE` (default 1) scales the presets,
//! `SWITCHGNN_BENCH_WORKERS` (default 128), `SWITCHGNN_BENCH_WIDTH` (default 128, the hidden
//! width a 4-layer GCN exchanges), `SWITCHGNN_BENCH_GRAPHS` (default
//! `reddit-like,products-like`).
//!
//! Each measurement runs in its own child process on a graph-only cache (features dropped),
//! so the peak memory is the partitioner's.

use std::path::Path;
use std::time::Instant;

use switchgnn_datasets::synthetic::{generate, Preset};
use switchgnn_datasets::testdata::{peak_rss_kib, run_bench_child};
use switchgnn_datasets::{cache, load_path, LoadOptions, NoProgress};
use switchgnn_partition::size::format_bytes;
use switchgnn_partition::{Assignment, BlockMethod, Method, MetisOptions, Plan, PlanSpec};

fn env<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--item") {
        child(
            &args[i + 1],
            Path::new(&args[i + 2]),
            args.get(i + 3),
            args.get(i + 4),
        );
        return;
    }
    let scale: f64 = env("SWITCHGNN_BENCH_SCALE", 1.0);
    let workers: u32 = env("SWITCHGNN_BENCH_WORKERS", 128);
    let width: usize = env("SWITCHGNN_BENCH_WIDTH", 128);
    println!("prepare vs METIS alone: {workers} workers, width {width}, scale {scale}");
    println!(
        "{:<14} {:>9} {:>8} {:>10} {:>8} {:>7} {:>9} {:>10} {:>9}",
        "graph",
        "memory",
        "METIS s",
        "prepare s",
        "ratio",
        "blocks",
        "CSR MiB",
        "peak MiB",
        "peak/CSR"
    );
    let tmp = tempfile::tempdir().unwrap();
    let graphs: String = env(
        "SWITCHGNN_BENCH_GRAPHS",
        "reddit-like,products-like".to_string(),
    );
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
        println!(
            "{preset:<14} {:>9} {metis_s:>8.1} {:>10} {:>8} {:>7} {csr_mib:>9.0} {metis_mib:>10.0} {:>9.2}",
            "-", "-", "-", "-", metis_mib / csr_mib
        );
        for memory in ["100MB", "10MB"] {
            for method in ["vertices", "parts"] {
                let (prep_s, prep_mib) = run_bench_child(&["prepare", g, memory, method]);
                let blocks =
                    std::fs::read_to_string(tmp.path().join("blocks.txt")).unwrap_or_default();
                println!(
                    "{preset:<14} {:>9} {metis_s:>8.1} {prep_s:>10.1} {:>7.2}x {:>7} {csr_mib:>9.0} {prep_mib:>10.0} {:>9.2}",
                    format!("{memory}/{method}"),
                    prep_s / metis_s,
                    blocks.trim(),
                    prep_mib / csr_mib
                );
            }
        }
    }
    println!("(ratio = prepare time / METIS time; peak = VmHWM of a child that loads the graph and runs the step)");
}

fn child(kind: &str, graph: &Path, memory: Option<&String>, method: Option<&String>) {
    let workers: u32 = env("SWITCHGNN_BENCH_WORKERS", 128);
    let width: usize = env("SWITCHGNN_BENCH_WIDTH", 128);
    let d = load_path(graph, &LoadOptions::default()).unwrap();
    let started = Instant::now();
    match kind {
        "metis" => {
            let a = Assignment::compute(&d.graph, workers, &Method::Metis(MetisOptions::default()))
                .unwrap();
            std::hint::black_box(a);
        }
        "prepare" => {
            let memory = switchgnn_partition::size::parse_bytes(memory.unwrap()).unwrap();
            let method = match method.map(String::as_str) {
                Some("parts") => BlockMethod::Parts,
                _ => BlockMethod::Vertices,
            };
            let spec = PlanSpec::new(graph.display().to_string(), workers, vec![width])
                .switch_memory(memory)
                .block_method(method);
            let plan = Plan::prepare(&d, &spec, &|_| {}).unwrap();
            let info = &plan.manifest.block_sets[0];
            let note = format!(
                "{} ({})",
                info.blocks,
                format_bytes(plan.manifest.traffic[0].plan_bytes)
            );
            std::fs::write(graph.with_file_name("blocks.txt"), note).unwrap();
        }
        other => panic!("unknown bench item {other}"),
    }
    println!("{} {}", started.elapsed().as_secs_f64(), peak_rss_kib());
}
