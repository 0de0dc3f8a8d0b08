//! Loaders for the graph formats users arrive with, and format detection.

mod edge_list;
mod gnn_benchmark;
mod musae;
mod npz;
mod ogb;
mod text;
mod yandex;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::dataset::Dataset;
use crate::error::{Error, Result};
use crate::graph::BuildOptions;
use crate::split::{Split, SplitFractions};

/// The file layouts switchgnn reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Format {
    /// gnn-benchmark `.npz` (Cora, CiteSeer, Amazon, Coauthor as Shchur et al. ship them).
    GnnBenchmark,
    /// Yandex heterophilous-graph `.npz`.
    Yandex,
    /// MUSAE folder (`<name>_edges.csv`, `<name>.json`, `<name>_target.csv`).
    Musae,
    /// OGB node-property raw folder (`raw/`, `split/`).
    Ogb,
    /// Plain whitespace-separated edge list (SNAP style), optionally gzip-compressed.
    EdgeList,
    /// switchgnn's own binary cache (`switchgnn convert`).
    Cache,
}

impl Format {
    /// Every format, in the order detection tries them.
    pub const ALL: [Format; 6] = [
        Format::GnnBenchmark,
        Format::Yandex,
        Format::Musae,
        Format::Ogb,
        Format::EdgeList,
        Format::Cache,
    ];

    /// The format's name for `--format`.
    pub fn name(self) -> &'static str {
        match self {
            Format::GnnBenchmark => "gnn-benchmark",
            Format::Yandex => "yandex",
            Format::Musae => "musae",
            Format::Ogb => "ogb",
            Format::EdgeList => "edge-list",
            Format::Cache => "cache",
        }
    }
}

impl std::str::FromStr for Format {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Format::ALL
            .into_iter()
            .find(|f| f.name() == s)
            .ok_or_else(|| {
                let names: Vec<_> = Format::ALL.iter().map(|f| f.name()).collect();
                Error::Usage(format!(
                    "unknown format `{s}` (one of: {})",
                    names.join(", ")
                ))
            })
    }
}

/// Choices a loader cannot make from the file alone. The default detects the format, drops
/// self-loops, and draws a 60/20/20 random split with seed 0 where the dataset has none.
#[derive(Debug, Clone, Default)]
pub struct LoadOptions {
    /// Skip detection and read the path as this format.
    pub format: Option<Format>,
    /// How to build the graph from the file's edges.
    pub build: BuildOptions,
    /// Seed and fractions of the random split drawn when a dataset ships none.
    pub split_seed: u64,
    /// Fractions of that random split.
    pub split_fractions: SplitFractions,
    /// Which of several fixed splits (Yandex ships ten).
    pub split_index: usize,
    /// Which `split/<name>` folder of an OGB dataset.
    pub split_name: Option<String>,
    /// Edge lists: number vertices compactly in order of their ids instead of using ids as is.
    pub relabel: bool,
    /// Edge lists: `id x1 x2 ...` feature rows.
    pub features_file: Option<PathBuf>,
    /// Edge lists: `id class` lines.
    pub labels_file: Option<PathBuf>,
    /// MUSAE target files: the column holding the vertex id (a header name or a 0-based
    /// index); default: detected from the header (`new_id` for Twitch), else the first.
    pub id_column: Option<String>,
    /// MUSAE target files: the column holding the class; default: detected from the header
    /// (`mature` for Twitch, `ml_target` for GitHub, `target` for Deezer, `page_type` for
    /// Facebook), else the last.
    pub label_column: Option<String>,
    /// Formats with their own list of vertices (MUSAE, OGB): accept an edge file with no
    /// edges (refused by default: an empty edge file is far more often damage than a graph
    /// without edges). A plain edge list without edges has no vertices and is always refused.
    pub allow_empty: bool,
}

impl LoadOptions {
    pub(crate) fn random_split(&self, n: usize) -> Result<Split> {
        Ok(Split::random(n, self.split_fractions, self.split_seed)?)
    }

    /// Refuse an edge file that held no edges, unless [`LoadOptions::allow_empty`].
    pub(crate) fn check_edges(&self, path: &Path, edges: usize) -> Result<()> {
        if edges == 0 && !self.allow_empty {
            return Err(Error::malformed(
                path,
                "file",
                "no edges: empty or damaged (--allow-empty accepts a graph without edges)",
            ));
        }
        Ok(())
    }
}

/// Guess the format of `path` from what it contains.
pub fn detect_format(path: &Path) -> Result<Format> {
    let meta = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
    if meta.is_dir() {
        if ogb::is_ogb(path) {
            return Ok(Format::Ogb);
        }
        if musae::detect(path).is_some() {
            return Ok(Format::Musae);
        }
        return Err(Error::Usage(format!(
            "{}: a folder, but neither an OGB raw layout (raw/edge.csv.gz) nor MUSAE (<name>_edges.csv)",
            path.display()
        )));
    }
    let mut head = [0u8; 8];
    let read = {
        use std::io::Read;
        let mut f = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
        f.read(&mut head).map_err(|e| Error::io(path, e))?
    };
    if read == 8 && &head == crate::cache::MAGIC {
        return Ok(Format::Cache);
    }
    if head.starts_with(b"PK") || path.extension().is_some_and(|e| e == "npz") {
        let npz = npz::Npz::open(path)?;
        if gnn_benchmark::is_gnn_benchmark(&npz) {
            return Ok(Format::GnnBenchmark);
        }
        if yandex::is_yandex(&npz) {
            return Ok(Format::Yandex);
        }
        return Err(Error::malformed(
            path,
            "archive",
            format!(
                "an npz with arrays [{}]: neither gnn-benchmark (adj_indptr, adj_indices) nor Yandex (node_features, edges)",
                npz.names().join(", ")
            ),
        ));
    }
    Ok(Format::EdgeList)
}

/// Read a dataset file or folder.
pub fn load_path(path: &Path, options: &LoadOptions) -> Result<Dataset> {
    let format = match options.format {
        Some(f) => f,
        None => detect_format(path)?,
    };
    tracing::info!(path = %path.display(), format = format.name(), "loading dataset");
    match format {
        Format::GnnBenchmark => gnn_benchmark::load(path, options),
        Format::Yandex => yandex::load(path, options),
        Format::Musae => musae::load(path, options),
        Format::Ogb => ogb::load(path, options),
        Format::EdgeList => edge_list::load(path, options),
        Format::Cache => crate::cache::read(path),
    }
}

/// A dataset name from a file name without its extensions.
pub(crate) fn stem(path: &Path) -> String {
    let name = path
        .file_name()
        .map_or_else(|| "dataset".into(), |s| s.to_string_lossy().into_owned());
    name.split('.').next().unwrap_or(&name).to_string()
}
