//! Options shared by the commands that partition a graph across workers.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;
use switchgnn_partition::size::parse_bytes;
use switchgnn_partition::{
    BlockMethod, BlockParams, Method, MetisOptions, Objective, Plan, PlanSpec,
};

use crate::job_args::{check_plan_fits, read_plan};
use crate::progress::Bars;

/// A graph and how to partition it: the inputs of every command that plans.
#[derive(Debug, Args)]
pub(crate) struct PlanInputs {
    #[command(flatten)]
    pub(crate) dataset: crate::dataset_args::DatasetArgs,
    #[command(flatten)]
    pub(crate) partition: PartitionArgs,
}

#[derive(Debug, Args)]
pub(crate) struct PartitionArgs {
    /// metis, random, hash, or the path of a file with one part id per vertex (from ParMETIS,
    /// DGL, gpmetis...).
    #[arg(long, default_value = "metis")]
    pub(crate) partitioner: String,
    /// Seed of METIS and of the random partitioner.
    #[arg(long, default_value_t = 0)]
    pub(crate) seed: u64,
    /// Largest part over the mean part that METIS may produce.
    #[arg(long, default_value_t = 1.03)]
    pub(crate) imbalance: f64,
    /// What METIS minimises: edge cut or communication volume.
    #[arg(long, default_value = "cut", value_parser = ["cut", "volume"])]
    pub(crate) objective: String,
    /// How blocks are cut: `vertices` (METIS on the boundary graph: least traffic) or `parts`
    /// (group whole worker parts: much faster with many workers, more traffic).
    #[arg(long, default_value = "vertices", value_parser = ["vertices", "parts"])]
    pub(crate) block_method: String,
    /// Most switch table entries one block may need ((vertex, aggregator) pairs plus
    /// destinations): a Tofino's exact-match tables hold far fewer pairs than a large graph
    /// has, so larger blocks are cut (`switchgnn p4 resources` says what a plan needs).
    #[arg(long, value_name = "N")]
    pub(crate) table_entries: Option<u64>,
    /// Share of the aggregator memory each block part aims at; the rest absorbs imbalance.
    #[arg(long, default_value_t = 0.9)]
    pub(crate) fill_target: f64,
}

impl PartitionArgs {
    pub(crate) fn metis_options(&self) -> MetisOptions {
        MetisOptions {
            seed: (self.seed % i32::MAX as u64) as i32,
            imbalance: self.imbalance,
            objective: if self.objective == "volume" {
                Objective::Volume
            } else {
                Objective::Cut
            },
        }
    }

    pub(crate) fn block_method(&self) -> BlockMethod {
        if self.block_method == "parts" {
            BlockMethod::Parts
        } else {
            BlockMethod::Vertices
        }
    }

    /// The plan to prepare for `dataset` (the dataset argument as given) with these options.
    pub(crate) fn plan_spec(
        &self,
        dataset: &str,
        workers: u32,
        switch_memory: u64,
        feature_dims: Vec<usize>,
    ) -> PlanSpec {
        PlanSpec::new(dataset.to_string(), workers, feature_dims)
            .switch_memory(switch_memory)
            .partitioner(self.method())
            .fill_target(self.fill_target)
            .block_metis(self.metis_options())
            .block_method(self.block_method())
            .table_entries(self.table_entries)
    }

    /// Block partitioning parameters for a switch memory and feature width.
    pub(crate) fn block_params(&self, switch_memory: u64, width: usize) -> BlockParams {
        BlockParams {
            switch_memory,
            width,
            fill_target: self.fill_target,
            metis: self.metis_options(),
            method: self.block_method(),
            table_entries: self.table_entries,
        }
    }

    pub(crate) fn method(&self) -> Method {
        match self.partitioner.as_str() {
            "metis" => Method::Metis(self.metis_options()),
            "random" => Method::Random { seed: self.seed },
            "hash" => Method::Hash,
            path => Method::File {
                path: PathBuf::from(path),
            },
        }
    }
}

/// Feature width to plan for when none is given: the dataset's, or 128 (a common hidden width)
/// for a graph without features.
pub(crate) fn default_width(dataset: &switchgnn_datasets::Dataset) -> usize {
    dataset.features.as_ref().map_or(128, |f| f.cols())
}

/// Comma-separated positive integers, e.g. `32,64,128`.
pub(crate) fn parse_list<T: std::str::FromStr>(text: &str, what: &str) -> Result<Vec<T>> {
    let items: Option<Vec<T>> = text.split(',').map(|x| x.trim().parse().ok()).collect();
    match items {
        Some(v) if !v.is_empty() => Ok(v),
        _ => bail!("{what} `{text}`: expected a comma-separated list such as 32,64,128"),
    }
}

/// Comma-separated sizes, e.g. `10MB,100MB`.
pub(crate) fn parse_sizes(text: &str) -> Result<Vec<u64>> {
    text.split(',').map(|s| Ok(parse_bytes(s)?)).collect()
}

/// The plan in `dir` when it was prepared for this graph and `spec` (workers, widths, switch
/// memory); else a new one, prepared and written there. A plan in `dir` for another graph or
/// request is an error, unless `replace` allows overwriting it (a folder the program chose
/// itself).
pub(crate) fn reuse_or_prepare(
    dataset: &switchgnn_datasets::Dataset,
    spec: &PlanSpec,
    dir: &Path,
    replace: bool,
) -> Result<Plan> {
    if dir.join("manifest.json").exists() {
        let existing = read_plan(dir).and_then(|plan| {
            check_plan_fits(&plan, &dataset.graph, dir)?;
            let have = &plan.manifest.spec;
            if have.workers == spec.workers
                && have.feature_dims == spec.feature_dims
                && have.switch_memory == spec.switch_memory
            {
                return Ok(plan);
            }
            bail!(
                "the plan in {} is for {} workers, widths {:?}, {} B of switch memory; this run \
                 asks for {}, {:?}, {} B (choose another --plan folder)",
                dir.display(),
                have.workers,
                have.feature_dims,
                have.switch_memory,
                spec.workers,
                spec.feature_dims,
                spec.switch_memory
            )
        });
        match existing {
            Ok(plan) => {
                println!("reusing the plan in {}", dir.display());
                return Ok(plan);
            }
            Err(e) if !replace => return Err(e),
            Err(e) => println!("preparing a new plan in {}: {e:#}", dir.display()),
        }
    }
    let bars = Bars::new();
    let mut plan = Plan::prepare(dataset, spec, &|stage| {
        use switchgnn_datasets::Progress;
        bars.stage(stage, None)
    })?;
    // Record what `--exchange auto` would run, as `prepare` does.
    if let Some(choice) = crate::chip_args::default_choice(&plan, &dataset.graph)? {
        plan.set_exchange(choice)?;
    }
    bars.finish();
    plan.write(dir)
        .with_context(|| format!("cannot write the plan to {}", dir.display()))?;
    Ok(plan)
}
