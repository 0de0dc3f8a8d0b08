//! Benchmark: the simulator's speed and memory on one layer of `reddit-like` at 128 workers,
//! per mode, against the bare event queue measured in the same run.
//!
//! The parent generates the graph and prepares the plan once (written to a temporary folder);
//! each mode then runs in a fresh child process (this binary with `--item`), so its wall time
//! and peak resident memory (VmHWM) are its own. The baseline child pushes and pops the same
//! number of events through the event queue alone: events/s of the simulator ÷ that is the
//! share of the raw queue rate left after the protocol work.
//!
//! `cargo bench -p switchgnn-sim --bench simulator`
//! Environment: `SWITCHGNN_BENCH_SCALE` (default 1) scales reddit-like;
//! `SWITCHGNN_BENCH_WORKERS` (default 128); `SWITCHGNN_BENCH_MEMORY` (default 100MB).

use std::path::Path;
use std::time::Instant;
use switchgnn_chip::ChipChoice;

use switchgnn_datasets::synthetic::{generate, Preset};
use switchgnn_datasets::testdata::{peak_rss_kib, run_bench_child_values};
use switchgnn_datasets::{cache, load_path, LoadOptions, NoProgress};
use switchgnn_partition::blocks::BlockMethod;
use switchgnn_partition::size::parse_bytes;
use switchgnn_partition::{Plan, PlanSpec};
use switchgnn_sim::modes::{exchange_plan, scale_for, simulate_exchange, ExchangeSetup};
use switchgnn_sim::queue::EventQueue;
use switchgnn_sim::sweep::SweepSpec;
use switchgnn_sim::SimMode;

const WIDTH: usize = 128;

fn env<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn memory() -> u64 {
    parse_bytes(&std::env::var("SWITCHGNN_BENCH_MEMORY").unwrap_or("100MB".into())).unwrap()
}

fn spec(workers: u16) -> SweepSpec {
    // The ideal chip (free recirculation), as the paper's reproduction runs: on a real chip
    // the in-network modes are recirculation-bound on Reddit's degrees, and their timeouts
    // then dominate the event count. This bench measures the simulator, not the chip.
    SweepSpec::paper(
        "reddit-like",
        vec![workers],
        vec![memory()],
        SimMode::ALL.to_vec(),
        vec![WIDTH],
        ChipChoice {
            preset: Some(switchgnn_chip::Preset::Ideal),
            ..ChipChoice::default()
        },
    )
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--item") {
        child(&args[i + 1], &args[i + 2], &args[i + 3]);
        return;
    }
    parent();
}

/// One measurement; prints `wall_seconds peak_kib events comm_ns link_bytes`.
fn child(kind: &str, cache_path: &str, plan_dir: &str) {
    if kind == "queue" {
        let n: u64 = plan_dir.parse().unwrap();
        let started = Instant::now();
        let mut q = EventQueue::default();
        // The simulator's queue holds about one event per packet in flight; keep ~100k.
        let mut x = 1u64;
        for i in 0..100_000u64 {
            q.push(i, i);
        }
        for _ in 0..n {
            let (t, e) = q.pop().unwrap();
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            q.push(t + 1 + (x >> 54), e);
        }
        std::hint::black_box(&q);
        println!(
            "{} {} {n} 0 0",
            started.elapsed().as_secs_f64(),
            peak_rss_kib()
        );
        return;
    }
    let mode = SimMode::from_name(kind).unwrap();
    let d = load_path(Path::new(cache_path), &LoadOptions::default()).unwrap();
    let plan = Plan::read(Path::new(plan_dir)).unwrap();
    let workers = plan.manifest.spec.workers as u16;
    let s = spec(workers);
    let xplan = exchange_plan(mode, &d.graph, &plan, 0, 0, None).unwrap();
    let setup = ExchangeSetup {
        mode,
        switch_memory: memory(),
        bundle: true,
        window: s.window,
        timers: s.timers,
        layer: 0,
        backward: false,
        control: None,
        rate_control: Default::default(),
        two_level: false,
        chip_floor: true,
        framing: Default::default(),
    };
    let (sim, _) = simulate_exchange(
        xplan,
        &s.config(workers).unwrap(),
        &setup,
        scale_for(&d.graph),
    )
    .unwrap();
    println!(
        "{} {} {} {} {}",
        sim.run.wall_seconds,
        peak_rss_kib(),
        sim.run.events,
        sim.run.finish_ns,
        sim.run.link_bytes()
    );
}

fn parent() {
    let scale: f64 = env("SWITCHGNN_BENCH_SCALE", 1.0);
    let workers: u16 = env("SWITCHGNN_BENCH_WORKERS", 128);
    let tmp = tempfile::tempdir().unwrap();
    println!(
        "switchgnn-sim benchmark: reddit-like ×{scale}, {workers} workers, width {WIDTH}, {} of aggregators",
        switchgnn_partition::size::format_bytes(memory())
    );
    let t = Instant::now();
    let d = generate(&Preset::RedditLike.spec(scale, 0).unwrap(), &NoProgress).unwrap();
    let cache_path = tmp.path().join("reddit-like.sgnn");
    cache::write(&d, &cache_path).unwrap();
    let spec = PlanSpec::new("synthetic:reddit-like", u32::from(workers), vec![WIDTH])
        .switch_memory(memory())
        .block_method(BlockMethod::Vertices);
    let mut plan = Plan::prepare(&d, &spec, &|_| {}).unwrap();
    let plan_dir = tmp.path().join("plan");
    plan.write(&plan_dir).unwrap();
    drop((d, plan));
    println!("graph and plan: {:.1} s\n", t.elapsed().as_secs_f64());
    let cache_s = cache_path.to_string_lossy().into_owned();
    let plan_s = plan_dir.to_string_lossy().into_owned();
    println!(
        "{:<18} {:>10} {:>10} {:>12} {:>10} {:>11} {:>12} {:>12}",
        "mode", "wall s", "peak MiB", "events", "M ev/s", "÷ queue", "sim comm ms", "traffic GB"
    );
    let mut rows = Vec::new();
    for mode in SimMode::ALL {
        let r = run_bench_child_values(&[mode.name(), &cache_s, &plan_s]);
        rows.push((mode, r));
    }
    let most = rows.iter().map(|(_, r)| r[2] as u64).max().unwrap_or(1);
    let q = run_bench_child_values(&["queue", &cache_s, &most.to_string()]);
    let queue_rate = q[2] / q[0];
    for (mode, r) in &rows {
        let rate = r[2] / r[0];
        println!(
            "{:<18} {:>10.2} {:>10.0} {:>12.0} {:>10.2} {:>11.3} {:>12.3} {:>12.2}",
            mode.name(),
            r[0],
            r[1] / 1024.0,
            r[2],
            rate / 1e6,
            rate / queue_rate,
            r[3] / 1e6,
            r[4] / 1e9
        );
    }
    println!(
        "{:<18} {:>10.2} {:>10.0} {:>12.0} {:>10.2} {:>11.3}",
        "event queue alone",
        q[0],
        q[1] / 1024.0,
        q[2],
        queue_rate / 1e6,
        1.0
    );
}
