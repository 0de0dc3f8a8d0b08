//! `switchgnn generate`: draw a synthetic dataset from a preset and write the binary cache.

use std::path::PathBuf;

use anyhow::{Context, Result};
use switchgnn_datasets::synthetic::{generate, Preset};
use switchgnn_datasets::{cache, Stats};

use crate::progress::Bars;

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// small, reddit-like, products-like or yelp-like.
    pub(crate) preset: String,
    /// Multiply vertex and edge counts (the average degree stays).
    #[arg(long, default_value_t = 1.0)]
    pub(crate) scale: f64,
    /// Seed of every random choice; the same seed gives the same graph on any machine.
    #[arg(long, default_value_t = 0)]
    pub(crate) seed: u64,
    /// Where to write the cache.
    #[arg(long, short)]
    pub(crate) out: PathBuf,
}

pub(crate) fn run(args: Args) -> Result<()> {
    let spec = Preset::from_name(&args.preset)?.spec(args.scale, args.seed)?;
    tracing::info!(?spec, "generating");
    let bars = Bars::new();
    let started = std::time::Instant::now();
    let dataset = generate(&spec, &bars)?;
    bars.finish();
    let elapsed = started.elapsed();
    cache::write(&dataset, &args.out)
        .with_context(|| format!("cannot write cache {}", args.out.display()))?;
    let s = Stats::of(&dataset);
    println!(
        "generated {} in {:.1?}: {} vertices, {} edges, {} features, {} classes, top-20% degree share {:.3}; wrote {}",
        dataset.name,
        elapsed,
        s.vertices,
        s.edges,
        spec.features,
        spec.classes,
        s.degree.top20_share,
        args.out.display()
    );
    Ok(())
}
