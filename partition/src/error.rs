//! Errors of the partitioning stage.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum PartitionError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A part-assignment file with a bad line.
    #[error("{}: {record}: {reason}", path.display())]
    Malformed {
        path: PathBuf,
        record: String,
        reason: String,
    },
    /// Parameters that cannot work (e.g. more workers than vertices, memory below one edge).
    #[error("{0}")]
    Usage(String),
    /// Reading the dataset or writing a file through the datasets crate failed.
    #[error(transparent)]
    Dataset(#[from] switchgnn_datasets::Error),
    /// METIS refused the input or ran out of memory.
    #[error("METIS failed on {what}: {source}")]
    Metis { what: String, source: metis::Error },
}

pub type Result<T, E = PartitionError> = std::result::Result<T, E>;
