//! The dataset argument shared by every subcommand that reads a graph.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use switchgnn_datasets::{BuildOptions, Dataset, Format, LoadOptions, Source, SplitFractions};

use crate::progress::Bars;

#[derive(Debug, Args)]
pub(crate) struct DatasetArgs {
    /// A dataset file or folder (gnn-benchmark or Yandex .npz, MUSAE folder, OGB raw folder,
    /// edge list, switchgnn cache), or `synthetic:<preset>[,scale=S][,seed=N]` with a preset of
    /// small, reddit-like, products-like, yelp-like.
    pub(crate) dataset: String,
    /// Read the path as this format instead of detecting it.
    #[arg(long, value_parser = ["gnn-benchmark", "yandex", "musae", "ogb", "edge-list", "cache"])]
    pub(crate) format: Option<String>,
    /// Keep self-loop edges (dropped by default: GCN adds its own).
    #[arg(long)]
    pub(crate) keep_self_loops: bool,
    /// Seed of the random split drawn for datasets that ship none.
    #[arg(long, default_value_t = 0)]
    pub(crate) split_seed: u64,
    /// Train and validation fractions of that random split; the test set gets the rest.
    #[arg(long, value_name = "TRAIN,VAL", default_value = "0.6,0.2")]
    pub(crate) split_fractions: String,
    /// Which fixed split of a Yandex dataset (they ship ten).
    #[arg(long, default_value_t = 0)]
    pub(crate) split_index: usize,
    /// Which `split/<name>` folder of an OGB dataset.
    #[arg(long)]
    pub(crate) split_name: Option<String>,
    /// Edge lists: number vertices 0..n in order of their ids instead of using ids as given.
    #[arg(long)]
    pub(crate) relabel: bool,
    /// Edge lists: a file of `id x1 x2 ...` feature rows.
    #[arg(long, value_name = "FILE")]
    pub(crate) features: Option<PathBuf>,
    /// Edge lists: a file of `id class` lines.
    #[arg(long, value_name = "FILE")]
    pub(crate) labels: Option<PathBuf>,
    /// MUSAE target files: the vertex id column (header name or 0-based index; default: from
    /// the header's layout, e.g. `new_id` for Twitch, else the first column).
    #[arg(long, value_name = "COLUMN")]
    pub(crate) id_column: Option<String>,
    /// MUSAE target files: the class column (default: from the header's layout, e.g. `mature`
    /// for Twitch, else the last column).
    #[arg(long, value_name = "COLUMN")]
    pub(crate) label_column: Option<String>,
    /// MUSAE and OGB folders: accept an edge file with no edges (refused by default, as
    /// damage; a plain edge list without edges is always refused: it has no vertices).
    #[arg(long)]
    pub(crate) allow_empty: bool,
}

impl DatasetArgs {
    pub(crate) fn source(&self) -> Result<Source> {
        Ok(self.dataset.parse()?)
    }

    pub(crate) fn options(&self) -> Result<LoadOptions> {
        let (train, val) = self
            .split_fractions
            .split_once(',')
            .and_then(|(t, v)| Some((t.trim().parse().ok()?, v.trim().parse().ok()?)))
            .with_context(|| {
                format!(
                    "--split-fractions `{}`: expected TRAIN,VAL such as 0.6,0.2",
                    self.split_fractions
                )
            })?;
        Ok(LoadOptions {
            format: self
                .format
                .as_deref()
                .map(str::parse::<Format>)
                .transpose()?,
            build: BuildOptions {
                keep_self_loops: self.keep_self_loops,
            },
            split_seed: self.split_seed,
            split_fractions: SplitFractions { train, val },
            split_index: self.split_index,
            split_name: self.split_name.clone(),
            relabel: self.relabel,
            features_file: self.features.clone(),
            labels_file: self.labels.clone(),
            id_column: self.id_column.clone(),
            label_column: self.label_column.clone(),
            allow_empty: self.allow_empty,
        })
    }

    /// Load or generate the dataset, with progress bars for long work.
    pub(crate) fn load(&self) -> Result<Dataset> {
        let source = self.source()?;
        let options = self.options()?;
        let bars = Bars::new();
        let started = std::time::Instant::now();
        let dataset = source
            .load(&options, &bars)
            .with_context(|| format!("cannot load dataset `{}`", self.dataset))?;
        bars.finish();
        tracing::info!(elapsed = ?started.elapsed(), name = %dataset.name, "dataset ready");
        Ok(dataset)
    }
}
