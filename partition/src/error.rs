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
    /// Send orders that do not fit the blocks.
    #[error(transparent)]
    Check(#[from] PlanCheckError),
}

/// What is wrong with a plan: its blocks against the graph, its orders against its blocks, or
/// its table files against both.
#[derive(Debug, thiserror::Error)]
pub enum PlanCheckError {
    #[error("block {block} holds {size} destinations, capacity {capacity}")]
    OverCapacity {
        block: usize,
        size: u64,
        capacity: u64,
    },
    #[error("block {block} needs {entries} table entries, the limit is {limit}")]
    TooManyEntries {
        block: usize,
        entries: u64,
        limit: u64,
    },
    #[error("edge {0:?} lies in more than one block")]
    EdgeTwice((u32, u32)),
    #[error(
        "blocks hold {held} edges, the boundary graph {expected} (first missing {missing:?}, \
         first extra {extra:?})"
    )]
    EdgesDiffer {
        held: usize,
        expected: usize,
        missing: Option<(u32, u32)>,
        extra: Option<(u32, u32)>,
    },
    #[error("the graph differs from the one the plan was made for")]
    OtherGraph,
    #[error("the assignment does not cover every vertex")]
    AssignmentShort,
    /// A problem of one block set's file.
    #[error("{file}: {problem}")]
    InSet {
        file: String,
        problem: Box<PlanCheckError>,
    },
    #[error("the manifest lists no {0}")]
    NotInManifest(String),
    #[error("{}: {source}", path.display())]
    Unreadable {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("{}: size or checksum differs from the manifest", .0.display())]
    Checksum(std::path::PathBuf),
    #[error("{}: tables disagree with the blocks", .0.display())]
    TablesDisagree(std::path::PathBuf),
    #[error("{orders} order sets for {sets} block sets")]
    OrderSets { orders: usize, sets: usize },
    #[error("set {set}: {orders} orders for {blocks} blocks")]
    OrderCount {
        set: usize,
        orders: usize,
        blocks: usize,
    },
    #[error("set {set} block {block}: the order is not a permutation of the block's vertices")]
    NotAPermutation { set: usize, block: usize },
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
