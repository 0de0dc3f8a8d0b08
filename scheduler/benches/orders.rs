//! Benchmark: send-order throughput (vertices/s and adjacency entries/s) on `products-like`,
//! against one sequential pass over the adjacency in the same run (the memory-bound floor of
//! any order that looks at every edge), plus the time-slot evaluation itself.
//!
//! `cargo bench -p switchgnn-scheduler --bench orders` (`SWITCHGNN_BENCH_SCALE`, default 1).

use std::time::Instant;

use switchgnn_datasets::synthetic::{generate, Preset};
use switchgnn_datasets::NoProgress;
use switchgnn_scheduler::{evaluate, order, Adjacency, OrderKind};

fn main() {
    let scale: f64 = std::env::var("SWITCHGNN_BENCH_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1.0);
    let mut d = generate(&Preset::ProductsLike.spec(scale, 0).unwrap(), &NoProgress).unwrap();
    d.features = None;
    let adj = Adjacency::of_graph(&d.graph);
    let (n, entries) = (adj.num_vertices() as f64, adj.neighbors.len() as f64);
    println!(
        "products-like at scale {scale}: {n} vertices, {entries} adjacency entries (one thread)"
    );

    let t = Instant::now();
    let mut checksum = 0u64;
    for v in 0..n as u32 {
        for &u in adj.row(v) {
            checksum = checksum.wrapping_add(u64::from(u));
        }
    }
    std::hint::black_box(checksum);
    let scan = t.elapsed().as_secs_f64();
    println!(
        "adjacency scan: {scan:.3} s ({:.0} M entries/s)",
        entries / scan / 1e6
    );
    println!(
        "{:<22} {:>9} {:>14} {:>15} {:>12}",
        "order", "seconds", "M vertices/s", "M entries/s", "x scan time"
    );
    let mut pbfs = Vec::new();
    for kind in [
        OrderKind::PriorityBfs,
        OrderKind::Bfs,
        OrderKind::Degree,
        OrderKind::Random,
    ] {
        let t = Instant::now();
        let o = order(adj, kind, 1);
        let s = t.elapsed().as_secs_f64();
        println!(
            "{:<22} {s:>9.3} {:>14.2} {:>15.1} {:>11.1}x",
            kind.name(),
            n / s / 1e6,
            entries / s / 1e6,
            s / scan
        );
        if kind == OrderKind::PriorityBfs {
            pbfs = o;
        }
    }
    let t = Instant::now();
    let r = evaluate(adj, &pbfs, 1);
    let s = t.elapsed().as_secs_f64();
    println!(
        "time-slot evaluation   {s:>9.3} {:>14.2} {:>15.1} {:>11.1}x   (z = {}, max queue {})",
        n / s / 1e6,
        entries / s / 1e6,
        s / scan,
        r.completion,
        r.max_queue
    );
}
