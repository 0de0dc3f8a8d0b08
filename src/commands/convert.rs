//! `switchgnn convert`: parse a dataset once and write the binary cache.

use std::path::PathBuf;

use anyhow::{Context, Result};
use switchgnn_datasets::cache;

use crate::dataset_args::DatasetArgs;

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    pub(crate) dataset: DatasetArgs,
    /// Where to write the cache (written atomically: a temporary file, then a rename).
    #[arg(long, short)]
    pub(crate) out: PathBuf,
}

pub(crate) fn run(args: Args) -> Result<()> {
    let dataset = args.dataset.load()?;
    cache::write(&dataset, &args.out)
        .with_context(|| format!("cannot write cache {}", args.out.display()))?;
    let size = std::fs::metadata(&args.out).map(|m| m.len()).unwrap_or(0);
    println!(
        "wrote {} ({} vertices, {} edges, {:.1} MB)",
        args.out.display(),
        dataset.num_vertices(),
        dataset.graph.num_edges(),
        size as f64 / 1e6
    );
    Ok(())
}
