//! The library in a few lines: plan a small graph, run one SwitchGNN exchange through the
//! in-memory network with 2 % loss, and check every worker's sums against the direct ones.
//! `cargo run --example exchange`
use std::sync::Arc;

use switchgnn_dataplane::network::{run_exchange, Faults, RunSetup};
use switchgnn_dataplane::{fixed::Scale, plan::ExchangePlan, reference::encode_matrix};
use switchgnn_datasets::{LoadOptions, NoProgress, Source};
use switchgnn_partition::{Plan, PlanSpec};
use switchgnn_scheduler::exchange::{remote_sums, ExchangePlans};

fn main() -> anyhow::Result<()> {
    let (name, width, memory) = ("synthetic:small,scale=0.1", 64, 16 << 10);
    let data = name
        .parse::<Source>()?
        .load(&LoadOptions::default(), &NoProgress)?;
    let spec = PlanSpec::new(name, 4, vec![width]).switch_memory(memory);
    let plan = Plan::prepare(&data, &spec, &|_| {})?;
    let exchange = Arc::new(ExchangePlan::from_plan(&plan, 0)?);
    let n = data.graph.num_vertices() * width;
    let features: Vec<f32> = (0..n).map(|i| (i % 29) as f32 / 14.0 - 1.0).collect();
    let scale = Scale::for_bound(1.0, exchange.most_contributions())?;
    let setup = RunSetup::new(scale, memory, Faults::lossy(0.02), 7);
    let run = run_exchange(exchange.clone(), &features, &setup)?;
    let (encoded, _) = encode_matrix(&scale, &features, width);
    let want = remote_sums(&data.graph, &plan.assignment, width, &encoded);
    anyhow::ensure!(
        run.outputs == want,
        "an exchange differs from the direct sums"
    );
    let (blocks, lost) = (exchange.blocks.len(), run.network.lost);
    println!("{blocks} blocks, {lost} packets lost and recovered, every sum exact");
    Ok(())
}
