//! switchgnn's GCN trainer on libtorch (through `tch`).
//!
//! The single-process **reference** trainer: GCN (Kipf & Welling: symmetric normalisation with
//! self-loops) and GraphSAGE-mean, any depth and width, ReLU, dropout, Adam with weight decay
//! on the first layer, training on the train split and model selection and early stopping on
//! validation. The adjacency is a sparse CSR tensor; sparse input features are multiplied as
//! CSR, never densified. The **distributed** trainer runs the same loop on every worker over
//! its own vertices, with the remote part of each aggregation summed by an exchange through the
//! switch and the gradients all-reduced.
//!
//! - [`graph_tensors`]: propagation matrices (whole, or a worker's block), feature, label and
//!   split tensors;
//! - [`model`]: layers as dense segments joined by an [`Aggregate`] step with its own backward,
//!   the seam where a distributed worker adds the remote part of each sum;
//! - [`train`]: the training loop over a [`Backend`] (aggregation plus all-reduce); [`log`] and
//!   [`plot`]: its CSV, JSON and SVG outputs;
//! - [`distributed`]: worker shards, the exchange over the network, whole jobs;
//! - [`dropout`]: seeded dropout masks drawn at global positions, and initialisation,
//!   independent of libtorch's global generator.

pub mod distributed;
pub mod dropout;
mod error;
pub mod graph_tensors;
pub mod log;
pub mod model;
pub mod plot;
pub mod train;

pub use error::{CommError, Result, TrainError};
pub use graph_tensors::{FeatureMatrix, FeatureNorm, Propagation};
pub use log::{DatasetSummary, MeanStd, Summary, TrainLog};
pub use model::{Aggregate, Model, ModelConfig, ModelKind};
pub use train::{
    train, train_on, Backend, Collective, EpochRecord, Local, Prepared, RunReport, Traffic,
    TrainConfig,
};

/// libtorch's intra-op thread count.
pub fn threads() -> i32 {
    tch::get_num_threads()
}

/// Set libtorch's intra-op thread count for this process.
pub fn set_threads(n: i32) {
    tch::set_num_threads(n);
}

extern "C" {
    /// c10's minimum severity for its log and warning messages (0 info, 1 warning, 2 error).
    static mut FLAGS_caffe2_log_level: i32;
}

/// Silence libtorch's warnings (its errors still print). libtorch warns once per process that
/// sparse CSR support is "in beta", which is noise for a command-line user. Call it before any
/// tensor work starts; it sets a process-wide flag inside libtorch.
pub fn hide_libtorch_warnings() {
    // SAFETY: a plain `int` flag that libc10 exports and reads when it logs; it is written here
    // before training starts, so no libtorch thread reads it concurrently.
    unsafe {
        std::ptr::addr_of_mut!(FLAGS_caffe2_log_level).write(2);
    }
}
