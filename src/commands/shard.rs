//! `switchgnn shard`: cut a prepared plan's dataset into one file per worker, and save the
//! exchange plans a job needs, so that workers and the switch never load the whole graph.

use std::path::PathBuf;

use anyhow::{Context, Result};
use rayon::prelude::*;
use switchgnn_datasets::Progress;
use switchgnn_partition::shard::{write_shards, SHARDS_DIR};
use switchgnn_partition::size::format_bytes;
use switchgnn_transport::{session_file, ExchangeKind, Session};

use crate::job_args::{check_plan_fits, load_dataset, parse_mode, read_plan};
use crate::partition_args::parse_list;
use crate::progress::Bars;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The plan directory written by `switchgnn prepare`; the shards go to its `shards/`.
    #[arg(long, value_name = "DIR")]
    pub plan: PathBuf,
    /// The dataset argument (default: the one the plan was prepared from).
    #[arg(long)]
    pub dataset: Option<String>,
    /// Exchanges to save plans for, comma-separated (switch, host, g3, host-reduce,
    /// host-hybrid, strawman, reduce, hybrid, auto): each worker's view of them (only the rows
    /// its engine reads), and for the kinds computed from the graph the whole plans for the
    /// switch process.
    #[arg(long, value_name = "KINDS", default_value = "switch,host,auto")]
    pub exchange: String,
}

pub fn run(args: Args) -> Result<()> {
    let plan = read_plan(&args.plan)?;
    let kinds = parse_list::<String>(&args.exchange, "--exchange")?
        .iter()
        .map(|k| parse_mode(k))
        .collect::<Result<Vec<_>>>()?;
    let name = args
        .dataset
        .clone()
        .unwrap_or_else(|| plan.manifest.spec.dataset.clone());
    let dataset = load_dataset(&name)?;
    check_plan_fits(&plan, &dataset.graph, &args.plan)?;

    let bars = Bars::new();
    let workers = plan.manifest.spec.workers;
    bars.stage("cutting shards", Some(u64::from(workers)));
    let bytes = write_shards(&dataset, &plan, &args.plan, &|_| bars.advance(1))
        .with_context(|| format!("cannot write the shards of {}", args.plan.display()))?;
    let mut saved = Vec::new();
    for kind in kinds {
        if kind == ExchangeKind::Auto && plan.manifest.exchange.is_none() {
            tracing::warn!("the plan records no exchange per layer; no `auto` plans saved");
            continue;
        }
        bars.stage(&format!("{} exchange plans", kind.name()), None);
        let session = if kind == ExchangeKind::Switchgnn {
            Session::switchgnn(&plan)
        } else {
            Session::new(&plan, &dataset.graph, kind)
        }
        .with_context(|| format!("cannot build the {} exchange plans", kind.name()))?;
        // The switch's copy (SwitchGNN's switch reads the plan directory itself).
        let switch = if kind == ExchangeKind::Switchgnn {
            String::new()
        } else {
            let path = session_file::session_path(&args.plan, kind);
            session_file::write(&session, &plan, &path)?;
            format!("switch {}, ", format_bytes(std::fs::metadata(&path)?.len()))
        };
        bars.stage(&format!("{} views", kind.name()), Some(u64::from(workers)));
        let views: u64 = (0..workers as u16)
            .into_par_iter()
            .map(|rank| -> Result<u64> {
                let path = session_file::view_path(&args.plan, kind, rank);
                session_file::write_view(&session.for_worker(rank), rank, &plan, &path)?;
                bars.advance(1);
                Ok(std::fs::metadata(&path)?.len())
            })
            .sum::<Result<u64>>()?;
        saved.push(format!(
            "{} ({switch}each worker's view {} on average)",
            kind.name(),
            format_bytes(views / u64::from(workers.max(1)))
        ));
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

/// The dataset's arrays in bytes, as a reader holds them.
fn dataset_bytes(d: &switchgnn_datasets::Dataset) -> u64 {
    let graph = d.graph.offsets().len() as u64 * 8 + d.graph.neighbor_ids().len() as u64 * 4;
    let features = d.features.as_ref().map_or(0, |f| f.memory_bytes());
    let labels = d.labels.as_ref().map_or(0, |l| l.values().len() as u64 * 4);
    graph + features + labels
}
