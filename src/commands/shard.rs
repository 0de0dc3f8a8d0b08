//! `switchgnn shard`: cut a prepared plan's dataset into one file per worker, and save the
//! exchange plans a job needs, so that workers and the switch never load the whole graph.

use std::path::PathBuf;

use anyhow::{Context, Result};
use rayon::prelude::*;
use switchgnn_datasets::Progress;
use switchgnn_partition::shard::SHARDS_DIR;
use switchgnn_partition::size::format_bytes;
use switchgnn_transport::{ExchangeKind, PlanDir};

use crate::job_args::{check_plan_fits, load_dataset, parse_mode};
use crate::partition_args::parse_list;
use crate::progress::Bars;

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The plan directory written by `switchgnn prepare`; the shards go to its `shards/`.
    #[arg(long, value_name = "DIR")]
    pub(crate) plan: PathBuf,
    /// The dataset argument (default: the one the plan was prepared from).
    #[arg(long)]
    pub(crate) dataset: Option<String>,
    /// Exchanges to save plans for, comma-separated (switch, host, g3, host-reduce,
    /// host-hybrid, strawman, reduce, hybrid, auto): each worker's view of them (only the rows
    /// its engine reads), and for the kinds computed from the graph the whole plans for the
    /// switch process.
    #[arg(long, value_name = "KINDS", default_value = "switch,host,auto")]
    pub(crate) exchange: String,
}

pub(crate) fn run(args: Args) -> Result<()> {
    let dir = PlanDir::open(&args.plan)?;
    let plan = dir.plan();
    let kinds = parse_list::<String>(&args.exchange, "--exchange")?
        .iter()
        .map(|k| parse_mode(k))
        .collect::<Result<Vec<_>>>()?;
    let name = args
        .dataset
        .clone()
        .unwrap_or_else(|| plan.manifest.spec.dataset.clone());
    let dataset = load_dataset(&name)?;
    check_plan_fits(plan, &dataset.graph, &args.plan)?;

    let bars = Bars::new();
    let workers = plan.manifest.spec.workers;
    bars.stage("cutting shards", Some(u64::from(workers)));
    let bytes = dir
        .write_shards(&dataset, &|_| bars.advance(1))
        .with_context(|| format!("cannot write the shards of {}", args.plan.display()))?;
    let mut saved = Vec::new();
    for kind in kinds {
        if kind == ExchangeKind::Auto && plan.manifest.exchange.is_none() {
            tracing::warn!("the plan records no exchange per layer; no `auto` plans saved");
            continue;
        }
        saved.push(save_kind(&dir, &dataset, kind, &bars)?);
    }
    bars.finish();
    println!(
        "{workers} shards of `{}` in {}: {} in all, {} per worker on average (the dataset holds {})",
        dataset.name,
        args.plan.join(SHARDS_DIR).display(),
        format_bytes(bytes),
        format_bytes(bytes / u64::from(workers.max(1))),
        format_bytes(dataset_bytes(&dataset)),
    );
    println!("exchange plans saved: {}", saved.join(", "));
    Ok(())
}

/// Save the exchange plans of `kind`: the switch's copy, and every worker's view, several at
/// once; what was saved, for the summary line.
fn save_kind(
    dir: &PlanDir,
    dataset: &switchgnn_datasets::Dataset,
    kind: ExchangeKind,
    bars: &Bars,
) -> Result<String> {
    let workers = dir.workers();
    bars.stage(&format!("{} exchange plans", kind.name()), None);
    let session = dir
        .build_session(&dataset.graph, kind)
        .with_context(|| format!("cannot build the {} exchange plans", kind.name()))?;
    // The switch's copy (SwitchGNN's switch reads the plan directory itself).
    let switch = match dir.save_session(&session)? {
        Some(bytes) => format!("switch {}, ", format_bytes(bytes)),
        None => String::new(),
    };
    bars.stage(&format!("{} views", kind.name()), Some(u64::from(workers)));
    let views: u64 = (0..workers)
        .into_par_iter()
        .map(|rank| -> Result<u64> {
            let bytes = dir.save_view(&session, rank)?;
            bars.advance(1);
            Ok(bytes)
        })
        .sum::<Result<u64>>()?;
    Ok(format!(
        "{} ({switch}each worker's view {} on average)",
        kind.name(),
        format_bytes(views / u64::from(workers.max(1)))
    ))
}

/// The dataset's arrays in bytes, as a reader holds them.
fn dataset_bytes(d: &switchgnn_datasets::Dataset) -> u64 {
    let graph = d.graph.offsets().len() as u64 * 8 + d.graph.neighbor_ids().len() as u64 * 4;
    let features = d.features.as_ref().map_or(0, |f| f.memory_bytes());
    let labels = d.labels.as_ref().map_or(0, |l| l.values().len() as u64 * 4);
    graph + features + labels
}
