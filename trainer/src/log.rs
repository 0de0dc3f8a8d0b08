//! The training log: every epoch of every run as CSV, and the whole record (dataset, settings,
//! runs, summary) as JSON. Both are written atomically (temporary file, then rename).

use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};
use switchgnn_datasets::atomic::write_atomically;
use switchgnn_datasets::{Dataset, SplitSource};
use switchgnn_partition::shard::ShardMeta;

use crate::error::Result;
use crate::graph_tensors::FeatureNorm;
use crate::train::{RunReport, TrainConfig};

/// What the log says about the data a model was trained on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DatasetSummary {
    /// The dataset's name.
    pub name: String,
    /// Vertices.
    pub vertices: usize,
    /// Undirected edges, self-loops excluded.
    pub edges: u64,
    /// Feature width.
    pub features: usize,
    /// Whether the features were multiplied as CSR.
    pub sparse_features: bool,
    /// Classes.
    pub classes: usize,
    /// Training vertices.
    pub train: usize,
    /// Validation vertices.
    pub val: usize,
    /// Test vertices.
    pub test: usize,
    /// Where the split came from, e.g. `given (planetoid)` or `random 0.6/0.2/rest, seed 0`.
    pub split: String,
}

impl DatasetSummary {
    /// The whole dataset's summary as a worker's shard records it.
    pub fn of_shard(meta: &ShardMeta) -> DatasetSummary {
        DatasetSummary {
            name: meta.dataset.clone(),
            vertices: meta.vertices,
            edges: meta.edges - meta.self_loops,
            features: meta.features.as_ref().map_or(0, |f| f.cols),
            sparse_features: meta.features.as_ref().is_some_and(|f| f.sparse),
            classes: meta.labels.as_ref().map_or(0, |l| l.num_classes as usize),
            train: meta.split_sizes[0],
            val: meta.split_sizes[1],
            test: meta.split_sizes[2],
            split: split_name(&meta.split),
        }
    }

    /// The summary of a whole dataset in memory.
    pub fn of(dataset: &Dataset) -> DatasetSummary {
        let s = &dataset.split;
        DatasetSummary {
            name: dataset.name.clone(),
            vertices: dataset.num_vertices(),
            edges: dataset.graph.num_edges() - dataset.graph.num_self_loops(),
            features: dataset.features.as_ref().map_or(0, |f| f.cols()),
            sparse_features: dataset.features.as_ref().is_some_and(|f| f.is_sparse()),
            classes: dataset
                .labels
                .as_ref()
                .map_or(0, |l| l.num_classes() as usize),
            train: s.train.len(),
            val: s.val.len(),
            test: s.test.len(),
            split: split_name(&s.source),
        }
    }
}

fn split_name(source: &SplitSource) -> String {
    match source {
        SplitSource::Given { name } => format!("given ({name})"),
        SplitSource::Random { seed, train, val } => {
            format!("random {train}/{val}/rest, seed {seed}")
        }
    }
}

/// Mean and sample standard deviation (n − 1; zero for a single run).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MeanStd {
    /// The mean; NaN over no values.
    pub mean: f64,
    /// The sample standard deviation; NaN over no values.
    pub std: f64,
}

impl MeanStd {
    /// Of `values`.
    pub fn of(values: &[f64]) -> MeanStd {
        let n = values.len() as f64;
        if values.is_empty() {
            return MeanStd {
                mean: f64::NAN,
                std: f64::NAN,
            };
        }
        let mean = values.iter().sum::<f64>() / n;
        let std = if values.len() > 1 {
            (values.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt()
        } else {
            0.0
        };
        MeanStd { mean, std }
    }
}

/// Figures over all runs, each taken at the run's selected epoch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Runs (seeds) summarised.
    pub runs: usize,
    /// Test accuracy; `None` when the split has no test vertices.
    pub test_accuracy: Option<MeanStd>,
    /// Validation accuracy.
    pub val_accuracy: MeanStd,
    /// The selected epoch.
    pub best_epoch: MeanStd,
    /// Forward + backward + step, per epoch.
    pub train_seconds_per_epoch: MeanStd,
}

impl Summary {
    /// Summarise `runs`.
    pub fn of(runs: &[RunReport]) -> Summary {
        let test: Option<Vec<f64>> = runs.iter().map(|r| r.best().test_accuracy).collect();
        let over =
            |f: &dyn Fn(&RunReport) -> f64| MeanStd::of(&runs.iter().map(f).collect::<Vec<_>>());
        Summary {
            runs: runs.len(),
            test_accuracy: test.map(|t| MeanStd::of(&t)),
            val_accuracy: over(&|r| r.best().val_accuracy),
            best_epoch: over(&|r| r.best_epoch as f64),
            train_seconds_per_epoch: over(&|r| r.mean_train_seconds()),
        }
    }
}

/// Everything one `train` invocation did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrainLog {
    /// The data trained on.
    pub dataset: DatasetSummary,
    /// Settings of the first run; later runs differ in the seed only.
    pub config: TrainConfig,
    /// The feature normalisation applied (`auto` resolved).
    pub feature_norm: FeatureNorm,
    /// Trainable scalars of the model.
    pub parameters: usize,
    /// libtorch's intra-op threads.
    pub threads: i32,
    /// Worker processes (1: the single-process reference).
    #[serde(default = "one")]
    pub workers: usize,
    /// The exchange of a distributed run: switch, host or strawman.
    #[serde(default)]
    pub exchange: Option<String>,
    /// Where a distributed run's all-reduce ran: `switch` or `tcp`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allreduce: Option<String>,
    /// Figures over all runs.
    pub summary: Summary,
    /// Every run, every epoch.
    pub runs: Vec<RunReport>,
}

fn one() -> usize {
    1
}

/// One CSV row.
#[derive(Debug, Serialize)]
struct Row {
    seed: u64,
    epoch: usize,
    train_loss: f64,
    val_loss: f64,
    train_accuracy: f64,
    val_accuracy: f64,
    test_accuracy: Option<f64>,
    train_seconds: f64,
    eval_seconds: f64,
    comm_seconds: f64,
    bytes_sent: u64,
    bytes_received: u64,
}

impl TrainLog {
    /// Every epoch of every run, one row each, with a header.
    pub fn write_csv(&self, path: &Path) -> Result<()> {
        write_atomically(path, |w| {
            let mut csv = csv::Writer::from_writer(w);
            for run in &self.runs {
                for e in &run.epochs {
                    csv.serialize(Row {
                        seed: run.seed,
                        epoch: e.epoch,
                        train_loss: e.train_loss,
                        val_loss: e.val_loss,
                        train_accuracy: e.train_accuracy,
                        val_accuracy: e.val_accuracy,
                        test_accuracy: e.test_accuracy,
                        train_seconds: e.train_seconds,
                        eval_seconds: e.eval_seconds,
                        comm_seconds: e.comm_seconds,
                        bytes_sent: e.bytes_sent,
                        bytes_received: e.bytes_received,
                    })
                    .map_err(std::io::Error::other)?;
                }
            }
            csv.flush()
        })?;
        Ok(())
    }

    /// The whole log as pretty JSON.
    pub fn write_json(&self, path: &Path) -> Result<()> {
        write_atomically(path, |w| {
            serde_json::to_writer_pretty(&mut *w, self)?;
            w.write_all(b"\n")
        })?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_and_sample_std() {
        let m = MeanStd::of(&[1.0, 2.0, 3.0, 4.0]);
        assert_eq!(m.mean, 2.5);
        assert!((m.std - (5.0f64 / 3.0).sqrt()).abs() < 1e-12);
        assert_eq!(MeanStd::of(&[0.7]).std, 0.0);
    }
}
