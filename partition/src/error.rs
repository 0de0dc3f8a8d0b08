//! Errors of the partitioning stage.

#[derive(Debug, thiserror::Error)]
pub enum PartitionError {
    /// Parameters that cannot work (e.g. more workers than vertices, memory below one edge).
    #[error("{0}")]
    Usage(String),
    /// A file could not be read or written, or one of its records is wrong (the error names
    /// the file and the record; it is the datasets crate's error type, shared by every stage).
    #[error(transparent)]
    Dataset(#[from] switchgnn_datasets::Error),
    /// METIS refused the input or ran out of memory.
    #[error("METIS failed on {what}: {source}")]
    Metis { what: String, source: metis::Error },
}

pub type Result<T, E = PartitionError> = std::result::Result<T, E>;

impl PartitionError {
    pub(crate) fn io(path: &std::path::Path, source: std::io::Error) -> Self {
        switchgnn_datasets::Error::io(path, source).into()
    }

    pub(crate) fn malformed(
        path: &std::path::Path,
        record: impl Into<String>,
        reason: impl Into<String>,
    ) -> Self {
        switchgnn_datasets::Error::malformed(path, record, reason).into()
    }
}
