//! `switchgnn prepare`: partition the graph, cut the boundary into blocks and write the plan.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use comfy_table::{presets::UTF8_BORDERS_ONLY, Table};
use switchgnn_datasets::Progress;
use switchgnn_partition::size::{format_bytes, parse_bytes};
use switchgnn_partition::traffic::aggregators_per_vertex;
use switchgnn_partition::Plan;
use switchgnn_scheduler::blocks::set_plan_orders;
use switchgnn_scheduler::planner::choose_exchanges;
use switchgnn_scheduler::OrderKind;

use switchgnn_dataplane::ExchangeKind;
use switchgnn_partition::{ExchangeChoice, LayerChoice};

use crate::chip_args::{note_spare, LoopedPorts, VerdictArgs};
use crate::partition_args::{default_width, parse_list, PlanInputs};
use crate::progress::Bars;

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    pub(crate) input: PlanInputs,
    /// Number of workers.
    #[arg(long)]
    pub(crate) workers: u32,
    /// Aggregator memory of the switch (e.g. 100MB, 10MiB).
    #[arg(long, default_value = "100MB")]
    pub(crate) switch_memory: String,
    /// Width exchanged at each layer, comma-separated (default: the dataset's feature width).
    #[arg(long)]
    pub(crate) feature_dims: Option<String>,
    /// Send order of every block: priority-bfs (graph-aware reordering), priority-bfs-maxdeg,
    /// random, bfs or degree.
    #[arg(long, default_value = "priority-bfs")]
    pub(crate) order: String,
    /// Seed of the send order (block b uses seed + b).
    #[arg(long, default_value_t = 0)]
    pub(crate) order_seed: u64,
    /// The exchange each layer runs, recorded in the plan for `--exchange auto` at run time:
    /// auto (per layer, the kind with the least predicted time on the chip among host,
    /// switchgnn and reduce), switch, reduce or host.
    #[arg(long, default_value = "auto")]
    pub(crate) exchange: String,
    #[command(flatten)]
    pub(crate) verdict: VerdictArgs,
    /// The plan directory to write.
    #[arg(long, short)]
    pub(crate) out: PathBuf,
}

pub(crate) fn run(args: Args) -> Result<()> {
    let mut dataset = args.input.dataset.load()?;
    let feature_dims = match &args.feature_dims {
        Some(text) => parse_list(text, "--feature-dims")?,
        None => vec![default_width(&dataset)],
    };
    // A plan is made from the graph alone: the features go before METIS sets the peak memory.
    dataset.features = None;
    let spec = args.input.partition.plan_spec(
        &args.input.dataset.dataset,
        args.workers,
        parse_bytes(&args.switch_memory)?,
        feature_dims,
    );
    let kind = order_kind(&args.order)?;
    let exchange = match ExchangeKind::parse(&args.exchange) {
        Some(
            k @ (ExchangeKind::Auto
            | ExchangeKind::Switchgnn
            | ExchangeKind::Reduce
            | ExchangeKind::Hybrid
            | ExchangeKind::Host),
        ) => k,
        _ => bail!(
            "unknown exchange `{}` for a plan (one of: auto, switch (or multicast), reduce, \
             hybrid, host)",
            args.exchange
        ),
    };
    // The verdict needs a chip; without one named and none big enough, the plan is still made.
    let cost = args.verdict.cost()?;
    let choice = args.verdict.chip.choice(LoopedPorts::Spare)?;
    let chip = match choice.resolve(args.workers, cost.link_gbps) {
        Ok(chip) => {
            note_spare(&choice, &chip, args.workers);
            Some(chip)
        }
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
    set_plan_orders(&mut plan, kind, args.order_seed)?;
    let predicted = match &chip {
        Some(chip) => {
            bars.stage("weighing the exchange kinds", None);
            let choice = choose_exchanges(&plan, &dataset.graph, exchange, chip, &cost)?;
            plan.set_exchange(choice.clone())?;
            Some(choice)
        }
        None if exchange == ExchangeKind::Auto => None,
        None => {
            let layers = spec.feature_dims.len();
            let choice = ExchangeChoice {
                by: exchange.name().to_string(),
                chip: "none".into(),
                layers: vec![
                    LayerChoice {
                        kind: exchange.name().to_string(),
                        predicted_s: Default::default(),
                    };
                    layers
                ],
                planned_on: None,
            };
            plan.set_exchange(choice)?;
            None
        }
    };
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
    match predicted {
        Some(choice) => {
            for (layer, l) in choice.layers.iter().enumerate() {
                let mut others: Vec<String> = l
                    .predicted_s
                    .iter()
                    .filter(|(k, _)| **k != l.kind)
                    .map(|(k, s)| format!("{k} {:.3} ms", s * 1e3))
                    .collect();
                others.sort();
                println!(
                    "layer {layer} on {}: {} {} (predicted {:.3} ms; {})",
                    choice.chip,
                    if choice.by == "auto" {
                        "auto chose"
                    } else {
                        "runs"
                    },
                    l.kind,
                    l.predicted_s.get(&l.kind).copied().unwrap_or(f64::NAN) * 1e3,
                    others.join(", ")
                );
            }
        }
        None if exchange == ExchangeKind::Auto => {
            println!("no exchange kind recorded (no chip to predict on): name one at run time")
        }
        None => println!("every layer runs {}", exchange.name()),
    }
    Ok(())
}

/// Parse an order name, listing the valid ones on error.
pub(crate) fn order_kind(name: &str) -> Result<OrderKind> {
    OrderKind::from_name(name).with_context(|| {
        let names: Vec<_> = OrderKind::ALL.iter().map(|k| k.name()).collect();
        format!("unknown order `{name}` (one of: {})", names.join(", "))
    })
}

pub(crate) fn summary(plan: &Plan) -> Table {
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
