//! Cora and Amazon-Computers from `../shared/datasets`: the exchange of a hidden layer (real
//! features through a seeded random projection, as a first GCN layer would produce) is exact
//! under loss, duplication and reordering, with blocks and with the strawman.

mod common;

use std::sync::Arc;

use common::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use switchgnn_dataplane::fixed::Scale;
use switchgnn_dataplane::network::Faults;
use switchgnn_dataplane::plan::{ExchangePlan, Mode};
use switchgnn_datasets::testdata::shared_dataset;
use switchgnn_datasets::{load_path, Dataset, LoadOptions};
use switchgnn_partition::Assignment;
use switchgnn_scheduler::exchange::ExchangePlans;
use switchgnn_scheduler::OrderKind;

fn load(file: &str) -> Option<Dataset> {
    let path = shared_dataset(file)?;
    Some(load_path(&path, &LoadOptions::default()).unwrap())
}

/// `X · W` for a seeded `W` of `width` columns, and the no-overflow scale for it.
fn hidden(d: &Dataset, width: usize) -> (Vec<f32>, Scale) {
    let x = d
        .features
        .as_ref()
        .expect("the dataset has features")
        .to_dense();
    let cols = x.row(0).len();
    let mut rng = ChaCha8Rng::seed_from_u64(42);
    let w: Vec<f32> = (0..cols * width)
        .map(|_| rng.random_range(-1.0..=1.0f32) / (cols as f32).sqrt())
        .collect();
    let n = d.graph.num_vertices();
    let mut h = vec![0f32; n * width];
    for v in 0..n {
        let row = x.row(v);
        let out = &mut h[v * width..(v + 1) * width];
        for (k, &a) in row.iter().enumerate() {
            if a != 0.0 {
                for (o, &b) in out.iter_mut().zip(&w[k * width..(k + 1) * width]) {
                    *o += a * b;
                }
            }
        }
    }
    let bound = h.iter().fold(0f32, |m, x| m.max(x.abs()));
    let most = (0..n as u32).map(|v| d.graph.degree(v)).max().unwrap();
    (h, Scale::for_bound(bound, most).unwrap())
}

fn exact_on(d: &Dataset, workers: u32, width: usize, memory: u64) {
    let (values, scale) = hidden(d, width);
    let plan = block_plan(d, workers, width, memory, metis());
    assert!(
        plan.blocks.len() > 1,
        "memory small enough for several blocks"
    );
    let cases = [
        Faults::none(),
        Faults::lossy(0.01),
        Faults::lossy(0.05),
        Faults {
            loss: 0.01,
            duplicate: 0.02,
            reorder: 0.05,
            reorder_delay: 30_000,
            ..Faults::none()
        },
    ];
    for (i, faults) in cases.into_iter().enumerate() {
        let backward = i % 2 == 1;
        run_exact(
            &d.graph,
            &plan,
            &values,
            &setup(scale, memory, faults, i as u64, backward),
        );
    }
    // The strawman with a pool a tenth of the boundary's needs overflows and stays exact.
    let a = Assignment::new(plan.owner.iter().map(|&w| u32::from(w)).collect(), workers).unwrap();
    let strawman = Arc::new(
        ExchangePlan::whole_graph(&d.graph, &a, width, Mode::Strawman, OrderKind::Random, 1)
            .unwrap(),
    );
    let pool = (strawman.peak_aggregators() / 10).max(1) as u64
        * switchgnn_dataplane::switch::AGGREGATOR_BYTES;
    let run = run_exact(
        &d.graph,
        &strawman,
        &values,
        &setup(scale, pool, Faults::lossy(0.01), 9, false),
    );
    assert!(run.switch.raw_forwarded > 0);
}

#[test]
fn cora_exchange_is_exact() {
    let Some(d) = load("cora.npz") else { return };
    exact_on(&d, 4, 48, 64 * 1024);
}

#[test]
fn amazon_computers_exchange_is_exact() {
    let Some(d) = load("amazon-computers.npz") else {
        return;
    };
    exact_on(&d, 8, 32, 256 * 1024);
}
