//! Distributed training on loopback: the SwitchGNN exchange against the host exchange (the
//! baseline) and the strawman, and against the single-process reference, in one run.
//!
//! ```sh
//! cargo bench -p switchgnn-trainer --bench distributed
//! ```
//!
//! For each graph (synthetic `small`, then Cora and Amazon-Computers from `../shared/datasets`
//! when present) and each exchange: the mean epoch time (training step and evaluation pass), the
//! slowest worker's communication time per epoch, and the UDP bytes all workers sent and
//! received per epoch at their sockets (dataplane and control; the all-reduce's TCP traffic is
//! the same for every exchange and left out), each also as a ratio to the host exchange.
//! `SWITCHGNN_BENCH_WORKERS` (default 4) and `SWITCHGNN_BENCH_EPOCHS` (default 30) set the
//! run. On one machine the workers share its cores, so epoch times say more about the
//! protocol's round trips than about a cluster; bytes are what a cluster would carry.

use std::path::PathBuf;
use std::sync::Arc;

use switchgnn_datasets::synthetic::{generate, Preset};
use switchgnn_datasets::testdata::shared_dataset;
use switchgnn_datasets::{load_path, Dataset, LoadOptions, NoProgress};
use switchgnn_partition::shard::Cutter;
use switchgnn_partition::{Plan, PlanSpec};
use switchgnn_trainer::distributed::cluster::run_loopback;
use switchgnn_trainer::{train, Prepared, RunReport, TrainConfig};
use switchgnn_transport::{ExchangeKind, JobFile, Session};

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Mean seconds of training step plus evaluation, leaving out the first epoch.
fn epoch_seconds(r: &RunReport) -> f64 {
    let timed = &r.epochs[1.min(r.epochs.len() - 1)..];
    timed
        .iter()
        .map(|e| e.train_seconds + e.eval_seconds)
        .sum::<f64>()
        / timed.len() as f64
}

fn bench(d: &Dataset, workers: u32, epochs: usize) {
    switchgnn_trainer::set_threads(1);
    let config = TrainConfig {
        epochs,
        ..TrainConfig::default()
    };
    let mut data = Prepared::new(d, &config).expect("trainable");
    let reference = epoch_seconds(&train(&mut data, &config, &mut |_| {}).expect("trains"));
    let inputs = d.features.as_ref().expect("features").cols();
    let classes = d.labels.as_ref().expect("labels").num_classes() as usize;
    let spec = PlanSpec::new(
        d.name.clone(),
        workers,
        config.model.aggregated_widths(inputs, classes),
    )
    .switch_memory(100 << 20);
    let plan = Plan::prepare(d, &spec, &|_| {}).expect("a plan");
    let cutter = Cutter::new(d, plan.assignment.parts(), workers).expect("the plan fits");
    let shards: Vec<_> = (0..workers).map(|r| cutter.cut(r)).collect();
    println!(
        "\n{} ({} vertices), {workers} workers, {epochs} epochs; reference {:.2} ms/epoch",
        d.name,
        d.num_vertices(),
        1e3 * reference
    );
    println!(
        "{:<10} {:>10} {:>9} {:>10} {:>12} {:>9} {:>9} {:>9}",
        "exchange",
        "ms/epoch",
        "vs ref",
        "comm ms",
        "UDP MB/ep",
        "time/host",
        "comm/host",
        "MB/host"
    );
    let mut host: Option<(f64, f64, f64)> = None;
    for mode in [
        ExchangeKind::Host,
        ExchangeKind::Switchgnn,
        ExchangeKind::Strawman,
    ] {
        let session = Arc::new(Session::new(&plan, &d.graph, mode).expect("exchange plans"));
        let job = JobFile::loopback(
            PathBuf::new(),
            mode,
            "127.0.0.1:0".parse().unwrap(),
            workers as u16,
        );
        let out = run_loopback(
            &shards,
            session,
            &job,
            (100 << 20) / switchgnn_dataplane::switch::AGGREGATOR_BYTES as usize,
            &config,
            1,
            &mut |_| {},
        )
        .expect("the job runs");
        let n = out.workers[0].report.epochs.len() as f64;
        let time = epoch_seconds(&out.workers[0].report);
        let comm = out
            .workers
            .iter()
            .map(|w| w.report.epochs.iter().map(|e| e.comm_seconds).sum::<f64>() / n)
            .fold(0.0, f64::max);
        let bytes = out
            .workers
            .iter()
            .map(|w| (w.wire.to_switch.bytes_sent + w.wire.to_switch.bytes_received) as f64)
            .sum::<f64>()
            / n;
        let (ht, hc, hb) = *host.get_or_insert((time, comm, bytes));
        println!(
            "{:<10} {:>10.2} {:>8.1}× {:>10.2} {:>12.3} {:>8.3}× {:>8.3}× {:>8.3}×",
            mode.name(),
            1e3 * time,
            time / reference,
            1e3 * comm,
            bytes / 1e6,
            time / ht,
            comm / hc,
            bytes / hb
        );
    }
}

fn main() {
    let workers = env_or("SWITCHGNN_BENCH_WORKERS", 4u32);
    let epochs = env_or("SWITCHGNN_BENCH_EPOCHS", 30usize);
    let spec = Preset::from_name("small").unwrap().spec(1.0, 1).unwrap();
    bench(&generate(&spec, &NoProgress).unwrap(), workers, epochs);
    for file in ["cora.npz", "amazon-computers.npz"] {
        match shared_dataset(file) {
            Some(path) => bench(
                &load_path(&path, &LoadOptions::default()).expect("loads"),
                workers,
                epochs,
            ),
            None => println!("\n{file}: not found, skipped"),
        }
    }
}
