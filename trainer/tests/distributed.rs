//! Distributed training over real UDP on loopback (the switch, its collective service and the
//! workers as threads of the test process) against the single-process reference.

use std::path::PathBuf;
use std::sync::Arc;

use switchgnn_datasets::synthetic::{generate, Preset};
use switchgnn_datasets::{Dataset, NoProgress};
use switchgnn_partition::{Method, MetisOptions, Plan, PlanSpec};
use switchgnn_trainer::distributed::cluster::{run_loopback, ClusterOutcome};
use switchgnn_trainer::{train, Prepared, RunReport, TrainConfig};
use switchgnn_transport::socket::ShimConfig;
use switchgnn_transport::{ExchangeMode, JobFile, Session, Timeouts};

fn synthetic() -> Dataset {
    let spec = Preset::from_name("small").unwrap().spec(0.25, 1).unwrap();
    generate(&spec, &NoProgress).unwrap()
}

fn plan(dataset: &Dataset, workers: u32, config: &TrainConfig, memory: u64) -> Plan {
    let inputs = dataset.features.as_ref().unwrap().cols();
    let classes = dataset.labels.as_ref().unwrap().num_classes() as usize;
    let spec = PlanSpec {
        dataset: dataset.name.clone(),
        workers,
        partitioner: Method::Metis(MetisOptions::default()),
        switch_memory: memory,
        feature_dims: config.model.aggregated_widths(inputs, classes),
        fill_target: 0.9,
        block_metis: MetisOptions::default(),
        block_method: Default::default(),
    };
    Plan::prepare(dataset, &spec, &|_| {}).unwrap()
}

fn reference(dataset: &Dataset, config: &TrainConfig) -> RunReport {
    switchgnn_trainer::set_threads(1);
    let mut data = Prepared::new(dataset, config).unwrap();
    train(&mut data, config, &mut |_| {}).unwrap()
}

fn distributed(
    dataset: &Dataset,
    plan: &Plan,
    mode: ExchangeMode,
    config: &TrainConfig,
    loss: f64,
) -> ClusterOutcome {
    let session = Arc::new(Session::new(plan, &dataset.graph, mode).unwrap());
    let world = plan.manifest.spec.workers as u16;
    let mut job = JobFile::loopback(PathBuf::new(), mode, "127.0.0.1:0".parse().unwrap(), world);
    job.timeouts = Timeouts {
        join_ms: 20_000,
        peer_ms: 10_000,
        ..Timeouts::default()
    };
    job.faults = ShimConfig {
        loss,
        seed: 7,
        ..ShimConfig::default()
    };
    let owner: Vec<u16> = plan.assignment.parts().iter().map(|&p| p as u16).collect();
    let aggregators = (plan.manifest.spec.switch_memory / 128) as usize;
    run_loopback(
        dataset,
        &owner,
        session,
        &job,
        aggregators,
        config,
        1,
        &mut |_| {},
    )
    .unwrap()
}

fn losses(r: &RunReport) -> Vec<f64> {
    r.epochs.iter().map(|e| e.train_loss).collect()
}

#[test]
fn two_workers_follow_the_reference() {
    let d = synthetic();
    let config = TrainConfig {
        epochs: 30,
        ..TrainConfig::default()
    };
    let want = reference(&d, &config);
    let p = plan(&d, 2, &config, 1 << 20);
    for mode in [ExchangeMode::Switchgnn, ExchangeMode::Host] {
        let got = distributed(&d, &p, mode, &config, 0.0);
        let r0 = &got.workers[0];
        for w in &got.workers {
            assert_eq!(
                losses(&w.report),
                losses(&r0.report),
                "every worker sees the same figures"
            );
        }
        let worst = losses(&r0.report)
            .iter()
            .zip(losses(&want))
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max);
        eprintln!(
            "{mode:?}: worst loss difference {worst:e}; error bound per sum {:e}; {} exchanges",
            r0.totals.worst_error_bound, r0.totals.exchanges
        );
        for (a, b) in losses(&r0.report).iter().zip(losses(&want)) {
            eprintln!("  {a:.8} {b:.8} {:e}", a - b);
        }
    }
}
