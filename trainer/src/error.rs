//! The trainer's error type.

/// What can stop a training run before it starts or while it writes its results.
#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    /// The dataset has no vertex features to learn from.
    #[error("dataset `{0}` has no vertex features")]
    NoFeatures(String),
    /// Node classification needs labels.
    #[error("the dataset has no labels")]
    NoLabels,
    /// A split set the training loop cannot do without.
    #[error("the {0} split is empty")]
    EmptySplit(&'static str),
    /// An option out of range.
    #[error("{0}")]
    Config(String),
    /// libtorch refused an operation.
    #[error("libtorch: {0}")]
    Torch(#[from] tch::TchError),
    /// Writing a log or plot failed.
    #[error(transparent)]
    Output(#[from] switchgnn_datasets::Error),
    /// Communication with the other workers failed (a lost peer, the switch gone).
    #[error("{0}")]
    Comm(String),
    /// The plot could not be drawn.
    #[error("plot: {0}")]
    Plot(String),
}

pub type Result<T, E = TrainError> = std::result::Result<T, E>;
