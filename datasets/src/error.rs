//! Error types. Loaders report the file and the record that is wrong; in-memory constructors
//! report an [`Invalid`] that a loader then pins to its file with [`Invalid::at`].

use std::path::{Path, PathBuf};

/// Everything that can go wrong while reading, building or writing a dataset.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The operating system refused a read or write.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file operated on.
        path: PathBuf,
        /// What the operating system said.
        source: std::io::Error,
    },
    /// A file was readable but one of its records is wrong.
    #[error("{}: {record}: {reason}", path.display())]
    Malformed {
        /// The file read.
        path: PathBuf,
        /// Which record: a line number, an array name, an edge index, a section.
        record: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A cache file written by another version of the format.
    #[error(
        "{}: cache format version {found}, this build reads version {expected}; re-create it with `switchgnn convert`",
        path.display()
    )]
    CacheVersion {
        /// The cache file.
        path: PathBuf,
        /// The file's version.
        found: u32,
        /// The version this build reads and writes.
        expected: u32,
    },
    /// An in-memory dataset breaks an invariant (no file involved).
    #[error("invalid dataset: {0}")]
    Invalid(#[from] Invalid),
    /// A dataset specification or option that cannot be honoured.
    #[error("{0}")]
    Usage(String),
}

/// A broken invariant, found while building a graph, features, labels or a split in memory.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{record}: {reason}")]
pub struct Invalid {
    /// Which part: a vertex, an edge, a section, a row.
    pub record: String,
    /// What is wrong with it.
    pub reason: String,
}

impl Invalid {
    /// A violation at `record`, because of `reason`.
    pub fn new(record: impl Into<String>, reason: impl Into<String>) -> Self {
        Invalid {
            record: record.into(),
            reason: reason.into(),
        }
    }

    /// Pin this invariant violation to the file it came from.
    pub fn at(self, path: &Path) -> Error {
        Error::Malformed {
            path: path.to_path_buf(),
            record: self.record,
            reason: self.reason,
        }
    }
}

impl Error {
    /// An I/O failure on `path`.
    pub fn io(path: &Path, source: std::io::Error) -> Self {
        Error::Io {
            path: path.to_path_buf(),
            source,
        }
    }

    /// A bad `record` in the file at `path`.
    pub fn malformed(path: &Path, record: impl Into<String>, reason: impl Into<String>) -> Self {
        Error::Malformed {
            path: path.to_path_buf(),
            record: record.into(),
            reason: reason.into(),
        }
    }
}

/// The datasets crate's result: [`Error`] unless said otherwise.
pub type Result<T, E = Error> = std::result::Result<T, E>;
