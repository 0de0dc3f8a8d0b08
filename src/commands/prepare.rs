//! `switchgnn prepare`: partition the graph, cut the boundary into blocks and write the plan.

use std::path::PathBuf;

use anyhow::{Context, Result};
use comfy_table::{presets::UTF8_BORDERS_ONLY, Table};
use switchgnn_datasets::Progress;
use switchgnn_partition::size::{format_bytes, parse_bytes};
use switchgnn_partition::traffic::aggregators_per_vertex;
use switchgnn_partition::{OrderInfo, Plan};
use switchgnn_scheduler::blocks::block_orders;
use switchgnn_scheduler::OrderKind;

use crate::chip_args::{plan_verdicts, VerdictArgs};
use crate::partition_args::{default_width, parse_list, PlanInputs};
use crate::progress::Bars;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub input: PlanInputs,
    /// Number of workers.
    #[arg(long)]
    pub workers: u32,
    /// Aggregator memory of the switch (e.g. 100MB, 10MiB).
    #[arg(long, default_value = "100MB")]
    pub switch_memory: String,
    /// Width exchanged at each layer, comma-separated (default: the dataset's feature width).
    #[arg(long)]
    pub feature_dims: Option<String>,
    /// Send order of every block: priority-bfs (graph-aware reordering), priority-bfs-maxdeg,
    /// random, bfs or degree.
    #[arg(long, default_value = "priority-bfs")]
    pub order: String,
    /// Seed of the send order (block b uses seed + b).
    #[arg(long, default_value_t = 0)]
    pub order_seed: u64,
    #[command(flatten)]
    pub verdict: VerdictArgs,
    /// The plan directory to write.
    #[arg(long, short)]
    pub out: PathBuf,
}

pub fn run(args: Args) -> Result<()> {
    let dataset = args.input.dataset.load()?;
    let feature_dims = match &args.feature_dims {
        Some(text) => parse_list(text, "--feature-dims")?,
        None => vec![default_width(&dataset)],
    };
    let spec = args.input.partition.plan_spec(
        &args.input.dataset.dataset,
        args.workers,
        parse_bytes(&args.switch_memory)?,
        feature_dims,
    );
    let kind = order_kind(&args.order)?;
    // The verdict needs a chip; without one named and none big enough, the plan is still made.
    let cost = args.verdict.cost()?;
    let chip = match args
        .verdict
        .chip
        .choice()?
        .resolve(args.workers, cost.link_gbps)
    {
        Ok(chip) => Some(chip),
        Err(e) if args.verdict.chip.chip.is_none() => {
            eprintln!("no verdict: {e}");
            None
        }
        Err(e) => return Err(e.into()),
    };
    let bars = Bars::new();
    let started = std::time::Instant::now();
    let mut plan = Plan::prepare(&dataset, &spec, &|stage| bars.stage(stage, None))?;
    bars.stage(&format!("{} send orders", kind.name()), None);
    let orders = plan
        .block_sets
        .iter()
        .map(|set| block_orders(set, &plan.assignment, kind, args.order_seed))
        .collect();
    let info = OrderInfo {
        kind: kind.name().to_string(),
        seed: args.order_seed,
    };
    plan.set_orders(info, orders)?;
    bars.stage("writing the plan", None);
    plan.write(&args.out)
        .with_context(|| format!("cannot write the plan to {}", args.out.display()))?;
    bars.finish();
    println!(
        "plan for {} on {} workers with {} of aggregator memory written to {} in {:.1?}",
        dataset.name,
        spec.workers,
        format_bytes(spec.switch_memory),
        args.out.display(),
        started.elapsed()
    );
    println!("{}", summary(&plan));
    if let Some(chip) = chip {
        for (layer, v) in plan_verdicts(&plan, &dataset.graph, &chip, &cost)?
            .iter()
            .enumerate()
        {
            println!("layer {layer} on {}: {}", v.chip, v.sentence());
        }
    }
    Ok(())
}

/// Parse an order name, listing the valid ones on error.
pub fn order_kind(name: &str) -> Result<OrderKind> {
    OrderKind::from_name(name).with_context(|| {
        let names: Vec<_> = OrderKind::ALL.iter().map(|k| k.name()).collect();
        format!("unknown order `{name}` (one of: {})", names.join(", "))
    })
}

pub fn summary(plan: &Plan) -> Table {
    let m = &plan.manifest;
    let mut t = Table::new();
    t.load_preset(UTF8_BORDERS_ONLY);
    t.set_header(vec![
        "layer",
        "width",
        "blocks (levels)",
        "mean fill",
        "host exchange",
        "in-network ideal",
        "block plan",
        "plan saving",
    ]);
    for l in &m.traffic {
        let set = m
            .block_sets
            .iter()
            .find(|s| s.aggregators_per_vertex == aggregators_per_vertex(l.width))
            .expect("a block set per width");
        t.add_row(vec![
            l.layer.to_string(),
            l.width.to_string(),
            format!("{} ({})", set.blocks, set.levels),
            format!("{:.2}", set.mean_fill),
            format_bytes(l.host_bytes),
            format_bytes(l.ideal_bytes),
            format_bytes(l.plan_bytes),
            format!("{:.1}%", 100.0 * l.plan_reduction),
        ]);
    }
    t
}
