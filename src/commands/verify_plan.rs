//! `switchgnn verify-plan`: re-read a plan, check every checksum, and check it against its graph.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use switchgnn_datasets::{LoadOptions, NoProgress, Source};
use switchgnn_partition::Plan;
use switchgnn_scheduler::exchange::chosen_kind;

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The plan directory.
    pub(crate) plan: PathBuf,
    /// The dataset to check against (default: the one recorded in the plan).
    #[arg(long)]
    pub(crate) dataset: Option<String>,
}

pub(crate) fn run(args: Args) -> Result<()> {
    let plan = Plan::read(&args.plan)
        .with_context(|| format!("plan {} is damaged", args.plan.display()))?;
    println!("checksums of {} files: ok", plan.manifest.files.len());
    let spec = args
        .dataset
        .as_deref()
        .unwrap_or(&plan.manifest.spec.dataset);
    let dataset = spec
        .parse::<Source>()?
        .load(&LoadOptions::default(), &NoProgress)
        .with_context(|| format!("cannot load dataset `{spec}` to check the plan against"))?;
    if let Err(problem) = plan.verify(&dataset.graph) {
        bail!(
            "plan {} does not hold for `{spec}`: {problem}",
            args.plan.display()
        );
    }
    if let Err(problem) = plan.verify_tables(&args.plan) {
        bail!("plan {}: {problem}", args.plan.display());
    }
    let blocks: usize = plan.block_sets.iter().map(|s| s.blocks.len()).sum();
    println!(
        "plan holds: {} vertices on {} workers, every cross-worker edge in exactly one of {} blocks, every block within capacity, switch and worker tables match the blocks",
        dataset.num_vertices(),
        plan.manifest.spec.workers,
        blocks
    );
    match &plan.manifest.exchange {
        Some(choice) => {
            for layer in 0..choice.layers.len() {
                let kind = chosen_kind(&plan, layer)
                    .with_context(|| format!("plan {}", args.plan.display()))?;
                println!(
                    "layer {layer} runs {kind} under `--exchange auto` ({} on {})",
                    if choice.by == "auto" {
                        "the planner's pick"
                    } else {
                        "named at prepare"
                    },
                    choice.chip
                );
            }
        }
        None => println!(
            "no exchange kind recorded: name one at run time (`--exchange auto` needs one)"
        ),
    }
    Ok(())
}
