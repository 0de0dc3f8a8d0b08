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
    #[error(transparent)]
    Comm(#[from] CommError),
    /// The plot could not be drawn.
    #[error("plot: {0}")]
    Plot(String),
}

/// Why a distributed run's communication failed, with the error of the layer that failed
/// (`cause`, in the message: not a `source` too, or a whole chain would say it twice).
#[derive(Debug, thiserror::Error)]
pub enum CommError {
    /// The worker's connection to the switch (handshake, an exchange, goodbye).
    #[error("worker {rank}: {cause}")]
    Worker {
        /// The worker's rank.
        rank: u16,
        /// The transport's error.
        cause: switchgnn_transport::WorkerError,
    },
    /// The worker's connection to the all-reduce service.
    #[error("worker {rank}: {cause}")]
    Collective {
        /// The worker's rank.
        rank: u16,
        /// The collective client's error.
        cause: switchgnn_transport::collective::CollectiveError,
    },
    /// An exchange engine refused its inputs.
    #[error("{during}: {cause}")]
    Engine {
        /// The exchange being set up (layer and direction).
        during: String,
        /// The engine's error.
        cause: switchgnn_dataplane::engine::EngineError,
    },
    /// No fixed-point scale fits the values of a layer.
    #[error("layer {layer}: {cause}")]
    Scale {
        /// The layer, from 0.
        layer: usize,
        /// Why no scale fits.
        cause: switchgnn_dataplane::fixed::FixedError,
    },
    /// An exchange returned something else than the plan says.
    #[error("{during}: {what}")]
    Mismatch {
        /// The exchange (layer and direction).
        during: String,
        /// What differs.
        what: String,
    },
    /// No fixed-point scale fits the values of an in-switch all-reduce.
    #[error(transparent)]
    AllReduce(switchgnn_transport::ParticipantError),
    /// The host exchange over TCP between the workers (`--exchange tcp`).
    #[error(transparent)]
    Tcp(switchgnn_transport::ParticipantError),
    /// The switch process of a loopback run.
    #[error("switch: {0}")]
    Switch(#[from] switchgnn_transport::ServerError),
    /// The all-reduce service of a loopback run.
    #[error("collective service: {0}")]
    Service(switchgnn_transport::collective::CollectiveError),
    /// A socket of a loopback run could not be opened.
    #[error("{what}: {cause}")]
    Io {
        /// The socket's purpose.
        what: &'static str,
        /// What the operating system said.
        cause: std::io::Error,
    },
}

/// The trainer's result: [`TrainError`] unless said otherwise.
pub type Result<T, E = TrainError> = std::result::Result<T, E>;
