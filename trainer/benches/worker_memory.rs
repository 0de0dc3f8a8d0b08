//! Peak memory of one training worker that reads its shard, against one that loads the whole
//! dataset and keeps its part (what a worker does without shards), in the same run.
//!
//! ```sh
//! cargo bench -p switchgnn-trainer --bench worker_memory
//! ```
//!
//! The parent generates `reddit-like` (`SWITCHGNN_BENCH_SCALE`, default 1), writes it as a cache,
//! prepares an 8-worker plan (`SWITCHGNN_BENCH_WORKERS`) for a 2×16 GCN and writes the shards.
//! Each measurement is a child process of its own, so its peak resident memory (VmHWM) is its
//! own:
//! - `floor`: the same worker code on a graph of 200 vertices: libtorch's and the trainer's
//!   code and thread pools, the cost of any worker process whatever its data;
//! - `build`: worker 0 reads its shard and builds its training state (tensors, boundary);
//! - `shard-switchgnn`, `shard-host`: worker 0 reads the plan's summary, its view of the
//!   exchange plans and its shard, builds its state and trains 3 epochs;
//! - `whole`: worker 0 reads the whole dataset and the whole plan, cuts its part and its view,
//!   drops the rest and trains the same 3 epochs (a worker without shards).
//!
//! - `switchgnn-plans`, `host-plans`: the whole exchange plans (SwitchGNN's from the plan
//!   directory, the host exchange's saved by `switchgnn shard`), as the switch holds them.
//!
//! Training runs against peers that answer every exchange with zeros and every all-reduce with
//! the worker's own values: the worker's data, tensors, model and optimiser are all there, the
//! network buffers (a few MB of send windows) are not.

use std::path::Path;

use switchgnn_datasets::synthetic::{generate, Preset};
use switchgnn_datasets::testdata::{peak_rss_kib, run_bench_child_values};
use switchgnn_datasets::NoProgress;
use switchgnn_partition::shard::{shard_path, write_shards, Cutter, DataShard};
use switchgnn_partition::{Plan, PlanSpec};
use switchgnn_trainer::distributed::{RemoteSums, Shard, ShardBackend};
use switchgnn_trainer::train::{train_on, Traffic};
use switchgnn_trainer::TrainConfig;
use switchgnn_transport::{session_file, ExchangeKind, Session};

fn env<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

const EPOCHS: usize = 3;

fn config() -> TrainConfig {
    TrainConfig {
        epochs: EPOCHS,
        ..TrainConfig::default()
    }
}

/// Peers that contribute nothing.
#[derive(Debug)]
struct SilentPeers(usize);

impl RemoteSums for SilentPeers {
    fn workers(&self) -> usize {
        self.0
    }

    fn exchange(
        &mut self,
        _layer: usize,
        _backward: bool,
        _width: usize,
        rows: &[f32],
    ) -> switchgnn_trainer::Result<Vec<f32>> {
        Ok(vec![0.0; rows.len()])
    }

    fn all_reduce_sum(&mut self, _values: &mut [f32]) -> switchgnn_trainer::Result<()> {
        Ok(())
    }

    fn traffic(&self) -> Traffic {
        Traffic::default()
    }
}

/// Train worker `data`'s part for [`EPOCHS`] epochs (none: only build its training state).
fn train_worker(data: DataShard, epochs: usize) {
    let config = TrainConfig { epochs, ..config() };
    let shard = Shard::new(data, config.model.kind, config.feature_norm).expect("a shard");
    if epochs == 0 {
        return;
    }
    let mut peers = SilentPeers(shard.workers as usize);
    let mut backend = ShardBackend {
        shard: &shard,
        remote: &mut peers,
    };
    train_on(shard.local(), &mut backend, &config, &mut |_| {}).expect("training runs");
}

fn child(what: &str, dir: &Path) {
    switchgnn_trainer::set_threads(1);
    let started = std::time::Instant::now();
    match what {
        "floor" => {
            // The same code on a graph of a few hundred vertices: libtorch's and the
            // trainer's code and thread pools, next to no data.
            let spec = Preset::Small.spec(0.05, 0).expect("a preset");
            let tiny = generate(&spec, &NoProgress).expect("generation");
            let parts: Vec<u32> = (0..tiny.num_vertices() as u32).map(|v| v % 2).collect();
            let data = Cutter::new(&tiny, &parts, 2).expect("a cut").cut(0);
            drop(tiny);
            train_worker(data, EPOCHS);
        }
        "build" => {
            let data = DataShard::read(&shard_path(&dir.join("plan"), 0)).expect("the shard");
            train_worker(data, 0);
        }
        "shard-switchgnn" | "shard-host" => {
            let kind = if what == "shard-host" {
                ExchangeKind::Host
            } else {
                ExchangeKind::Switchgnn
            };
            let plan = Plan::read_summary(&dir.join("plan")).expect("the plan's summary");
            let path = session_file::view_path(&dir.join("plan"), kind, 0);
            let view = session_file::read_view(&path, &plan, kind, 0).expect("the view");
            let data = DataShard::read(&shard_path(&dir.join("plan"), 0)).expect("the shard");
            train_worker(data, EPOCHS);
            std::hint::black_box(view);
        }
        "whole" => {
            let plan = Plan::read(&dir.join("plan")).expect("the plan");
            let dataset =
                switchgnn_datasets::cache::read(&dir.join("data.sgnn")).expect("the cache");
            let session = Session::switchgnn(&plan).expect("the exchange plans");
            let view = session.for_worker(0);
            drop(session);
            let data = Cutter::new(
                &dataset,
                plan.assignment.parts(),
                plan.manifest.spec.workers,
            )
            .expect("the plan fits")
            .cut(0);
            drop(dataset);
            drop(plan);
            train_worker(data, EPOCHS);
            std::hint::black_box(view);
        }
        "switchgnn-plans" => {
            let plan = Plan::read(&dir.join("plan")).expect("the plan");
            let session = Session::switchgnn(&plan).expect("the exchange plans");
            drop(plan);
            std::hint::black_box(session);
        }
        "host-plans" => {
            let plan = Plan::read(&dir.join("plan")).expect("the plan");
            let path = session_file::session_path(&dir.join("plan"), ExchangeKind::Host);
            let session = session_file::read(&path, &plan, ExchangeKind::Host).expect("saved");
            drop(plan);
            std::hint::black_box(session);
        }
        other => panic!("unknown item {other}"),
    }
    println!("{} {}", started.elapsed().as_secs_f64(), peak_rss_kib());
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--item") {
        child(&args[i + 1], Path::new(&args[i + 2]));
        return;
    }
    let scale: f64 = env("SWITCHGNN_BENCH_SCALE", 1.0);
    let workers: u32 = env("SWITCHGNN_BENCH_WORKERS", 8);
    let tmp = tempfile::tempdir().expect("a temporary folder");
    let dir = tmp.path();
    let spec = Preset::RedditLike.spec(scale, 0).expect("a preset");
    let dataset = generate(&spec, &NoProgress).expect("generation");
    switchgnn_datasets::cache::write(&dataset, &dir.join("data.sgnn")).expect("the cache");
    let config = config();
    let widths = config.model.aggregated_widths(
        dataset.features.as_ref().expect("features").cols(),
        dataset.labels.as_ref().expect("labels").num_classes() as usize,
    );
    let plan_spec = PlanSpec::new("bench", workers, widths);
    let mut plan = Plan::prepare(&dataset, &plan_spec, &|_| {}).expect("a plan");
    plan.write(&dir.join("plan")).expect("the plan is written");
    write_shards(&dataset, &plan, &dir.join("plan"), &|_| {}).expect("the shards");
    let host = Session::new(&plan, &dataset.graph, ExchangeKind::Host).expect("host plans");
    let host_path = session_file::session_path(&dir.join("plan"), ExchangeKind::Host);
    session_file::write(&host, &plan, &host_path).expect("the host plans are saved");
    let switchgnn = Session::switchgnn(&plan).expect("switchgnn plans");
    for (kind, session) in [
        (ExchangeKind::Host, &host),
        (ExchangeKind::Switchgnn, &switchgnn),
    ] {
        let path = session_file::view_path(&dir.join("plan"), kind, 0);
        session_file::write_view(&session.for_worker(0), 0, &plan, &path).expect("a view");
    }
    drop((host, switchgnn));
    let shard0 = shard_path(&dir.join("plan"), 0);
    DataShard::read(&shard0)
        .expect("the shard")
        .check_plan(&plan, 0, &shard0)
        .expect("the shard fits the plan");
    let parameters = config.model.parameter_count(
        dataset.features.as_ref().expect("features").cols(),
        dataset.labels.as_ref().expect("labels").num_classes() as usize,
    );
    let cache_bytes = std::fs::metadata(dir.join("data.sgnn"))
        .expect("cache")
        .len();
    drop((dataset, plan));
    let shard_bytes = std::fs::metadata(shard_path(&dir.join("plan"), 0))
        .expect("a shard")
        .len();
    // Weights, their gradients and Adam's two moments.
    let model_bytes = parameters as u64 * 4 * 4;

    let dir_arg = dir.to_str().expect("a UTF-8 path");
    let run = |what: &str| {
        let v = run_bench_child_values(&[what, dir_arg]);
        (v[0], v[1] / 1024.0)
    };
    let (_, floor) = run("floor");
    let (build_s, build_peak) = run("build");
    let (shard_s, shard_peak) = run("shard-switchgnn");
    let (host_s, host_peak) = run("shard-host");
    let (whole_s, whole_peak) = run("whole");
    let (_, switchgnn_plans) = run("switchgnn-plans");
    let (_, host_plans) = run("host-plans");
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    let budget = mib(shard_bytes + model_bytes);
    println!("(÷ (shard + model) counts the view in the peak but not in the budget)");
    println!(
        "\nreddit-like at scale {scale}, worker 0 of {workers}, 2×16 GCN, {EPOCHS} epochs \
         (peak = VmHWM of a child process)"
    );
    println!(
        "dataset cache {:.1} MiB; worker 0's shard {:.1} MiB; model with gradients and Adam \
         {:.2} MiB; process floor (a 200-vertex worker) {floor:.1} MiB",
        mib(cache_bytes),
        mib(shard_bytes),
        mib(model_bytes)
    );
    println!(
        "{:<34} {:>9} {:>10} {:>16} {:>18}",
        "worker reads", "seconds", "peak MiB", "above floor MiB", "÷ (shard + model)"
    );
    for (name, seconds, peak) in [
        ("its shard, builds its state only", build_s, build_peak),
        ("its shard + switchgnn view", shard_s, shard_peak),
        ("its shard + host view", host_s, host_peak),
        ("whole dataset + switchgnn plans", whole_s, whole_peak),
    ] {
        println!(
            "{name:<34} {seconds:>9.2} {peak:>10.1} {:>16.1} {:>18.2}",
            peak - floor,
            (peak - floor) / budget
        );
    }
    println!(
        "shard ÷ whole peak: {:.2} ({:.2} above the floor)",
        shard_peak / whole_peak,
        (shard_peak - floor) / (whole_peak - floor)
    );
    let view_mib = |kind| {
        mib(
            std::fs::metadata(session_file::view_path(&dir.join("plan"), kind, 0))
                .expect("a view")
                .len(),
        )
    };
    println!(
        "exchange plans: worker 0's views {:.1} MiB (switchgnn) and {:.1} MiB (host); the whole \
         plans, as the switch holds them: loading switchgnn's from the plan peaks {:.1} MiB \
         above the floor, the saved host exchange's {:.1} MiB (file {:.1} MiB)",
        view_mib(ExchangeKind::Switchgnn),
        view_mib(ExchangeKind::Host),
        switchgnn_plans - floor,
        host_plans - floor,
        mib(std::fs::metadata(&host_path).expect("saved").len())
    );
}
