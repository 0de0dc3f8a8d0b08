//! `switchgnn shard`: cut a prepared plan's dataset into one file per worker, and save the
//! exchange plans a job needs, so that workers and the switch never load the whole graph.

use std::path::PathBuf;

use anyhow::{Context, Result};
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
    /// Exchanges to save plans for, comma-separated (host, g3, strawman, reduce, hybrid,
    /// auto): the kinds computed from the graph, which a worker holding only its shard could
    /// not build. SwitchGNN's plans are the plan directory's own and need nothing here.
    #[arg(long, value_name = "KINDS", default_value = "host,auto")]
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
        if kind == ExchangeKind::Switchgnn {
            continue;
        }
        if kind == ExchangeKind::Auto && plan.manifest.exchange.is_none() {
            tracing::warn!("the plan records no exchange per layer; no `auto` session saved");
            continue;
        }
        bars.stage(&format!("{} exchange plans", kind.name()), None);
        let session = Session::new(&plan, &dataset.graph, kind)
            .with_context(|| format!("cannot build the {} exchange plans", kind.name()))?;
        let path = session_file::session_path(&args.plan, kind);
        session_file::write(&session, &plan, &path)?;
        let size = std::fs::metadata(&path)?.len();
        saved.push(format!("{} ({})", kind.name(), format_bytes(size)));
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
    if saved.is_empty() {
        println!("exchange plans saved: none (switchgnn needs none)");
    } else {
        println!(
            "exchange plans saved: {}; switchgnn needs none",
            saved.join(", ")
        );
    }
    Ok(())
}

/// The dataset's arrays in bytes, as a reader holds them.
fn dataset_bytes(d: &switchgnn_datasets::Dataset) -> u64 {
    let graph = d.graph.offsets().len() as u64 * 8 + d.graph.neighbor_ids().len() as u64 * 4;
    let features = d.features.as_ref().map_or(0, |f| f.memory_bytes());
    let labels = d.labels.as_ref().map_or(0, |l| l.values().len() as u64 * 4);
    graph + features + labels
}
