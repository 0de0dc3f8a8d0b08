//! Graph datasets for switchgnn: a symmetric CSR [`Graph`], dense or sparse [`Features`],
//! [`Labels`] and a [`Split`], bundled as a [`Dataset`].
//!
//! - [`loaders`]: gnn-benchmark and Yandex `.npz`, MUSAE, OGB raw folders, SNAP edge lists.
//! - [`synthetic`]: a degree-corrected stochastic block model with presets shaped like the
//!   SwitchGNN evaluation graphs (`reddit-like`, `products-like`, `yelp-like`).
//! - [`cache`]: a versioned, checksummed, memory-mappable binary format, written atomically.
//! - [`stats`]: sizes, degree skew, components, features, classes and split.
//!
//! Malformed input is an [`Error`] that names the file and the record, never a panic.

pub mod atomic;
pub mod cache;
pub mod container;
mod dataset;
mod error;
mod features;
mod graph;
pub mod loaders;
pub mod progress;
mod source;
mod split;
pub mod stats;
pub mod synthetic;
pub mod testdata;

pub use dataset::{Dataset, Labels};
pub use error::{Error, Invalid, Result};
pub use features::{DenseFeatures, Features, SparseFeatures};
pub use graph::{BuildOptions, Graph};
pub use loaders::{detect_format, load_path, Format, LoadOptions};
pub use progress::{NoProgress, Progress};
pub use source::Source;
pub use split::{Split, SplitFractions, SplitSource};
pub use stats::Stats;
