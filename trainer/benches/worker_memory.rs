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
//! - `floor`: libtorch loaded and one tiny product, the cost of any process of this binary;
//! - `shard`: worker 0 reads its shard, builds its training state and trains 3 epochs;
//! - `whole`: worker 0 reads the whole dataset from the cache, cuts its part, drops the rest
//!   and trains the same 3 epochs.
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

/// Train worker `data`'s part for [`EPOCHS`] epochs.
fn train_worker(data: DataShard) {
    let config = config();
    let shard = Shard::new(&data, config.model.kind, config.feature_norm).expect("a shard");
    drop(data);
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
            let t = tch::Tensor::ones([4, 4], (tch::Kind::Float, tch::Device::Cpu));
            let _ = t.mm(&t);
        }
        "shard" => {
            let plan = Plan::read(&dir.join("plan")).expect("the plan");
            let path = shard_path(&dir.join("plan"), 0);
            let data = DataShard::read(&path).expect("the shard");
            data.check_plan(&plan, 0, &path).expect("the shard fits");
            drop(plan);
            train_worker(data);
        }
        "whole" => {
            let plan = Plan::read(&dir.join("plan")).expect("the plan");
            let dataset =
                switchgnn_datasets::cache::read(&dir.join("data.sgnn")).expect("the cache");
            let data = Cutter::new(
                &dataset,
                plan.assignment.parts(),
                plan.manifest.spec.workers,
            )
            .expect("the plan fits")
            .cut(0);
            drop(dataset);
            drop(plan);
            train_worker(data);
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
    let plan = Plan::prepare(&dataset, &plan_spec, &|_| {}).expect("a plan");
    plan.write(&dir.join("plan")).expect("the plan is written");
    write_shards(&dataset, &plan, &dir.join("plan"), &|_| {}).expect("the shards");
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
    let (shard_s, shard_peak) = run("shard");
    let (whole_s, whole_peak) = run("whole");
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    let budget = mib(shard_bytes + model_bytes);
    println!(
        "\nreddit-like at scale {scale}, worker 0 of {workers}, 2×16 GCN, {EPOCHS} epochs \
         (peak = VmHWM of a child process)"
    );
    println!(
        "dataset cache {:.1} MiB; worker 0's shard {:.1} MiB; model with gradients and Adam \
         {:.2} MiB; process floor (libtorch loaded) {floor:.1} MiB",
        mib(cache_bytes),
        mib(shard_bytes),
        mib(model_bytes)
    );
    println!(
        "{:<34} {:>9} {:>10} {:>16} {:>18}",
        "worker reads", "seconds", "peak MiB", "above floor MiB", "÷ (shard + model)"
    );
    for (name, seconds, peak) in [
        ("its shard", shard_s, shard_peak),
        ("the whole dataset, keeps its part", whole_s, whole_peak),
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
}
