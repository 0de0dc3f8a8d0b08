//! Errors of the partitioning stage.

/// Everything that can stop partitioning, planning or sharding.
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
    Metis {
        /// The graph METIS was given (the worker partition, a block level).
        what: String,
        /// METIS's own error.
        source: metis::Error,
    },
    /// Send orders that do not fit the blocks.
    #[error(transparent)]
    Check(#[from] PlanCheckError),
    /// An exchange choice that does not fit the plan's layers.
    #[error(transparent)]
    Exchange(#[from] ExchangeChoiceError),
    /// A worker's shard was not cut for this plan and rank: the shards must be written again.
    #[error(
        "{}: this shard does not match the plan: {why}; write the shards again with \
         `switchgnn shard`",
        path.display()
    )]
    ShardMismatch {
        /// The shard file.
        path: std::path::PathBuf,
        /// How it differs.
        why: ShardMismatch,
    },
}

/// How a shard differs from the plan it is used with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShardMismatch {
    /// Cut from another graph.
    #[error(
        "it was cut from another graph ({dataset}, fingerprint {found:#018x}; the plan's is \
         {want:#018x})"
    )]
    OtherGraph {
        /// The shard's dataset name.
        dataset: String,
        /// The shard's graph fingerprint.
        found: u64,
        /// The plan's.
        want: u64,
    },
    /// Cut for another worker partition.
    #[error(
        "it was cut for another partition ({workers} workers, fingerprint {found:#018x}; the \
         plan has {plan_workers} workers, fingerprint {want:#018x})"
    )]
    OtherPartition {
        /// The shard's worker count.
        workers: u32,
        /// The shard's assignment fingerprint.
        found: u64,
        /// The plan's worker count.
        plan_workers: u32,
        /// The plan's assignment fingerprint.
        want: u64,
    },
    /// Another worker's shard.
    #[error("it is worker {found}'s, not worker {want}'s")]
    OtherWorker {
        /// The rank the shard was cut for.
        found: u32,
        /// The rank asked for.
        want: u32,
    },
}

/// What is wrong with a plan: its blocks against the graph, its orders against its blocks, or
/// its table files against both.
#[derive(Debug, thiserror::Error)]
pub enum PlanCheckError {
    /// A block holds more destinations than the switch's aggregators fit.
    #[error("block {block} holds {size} destinations, capacity {capacity}")]
    OverCapacity {
        /// The block's index in its set.
        block: usize,
        /// Its destinations.
        size: u64,
        /// Destinations the aggregators fit.
        capacity: u64,
    },
    /// A block needs more switch table entries than the limit.
    #[error("block {block} needs {entries} table entries, the limit is {limit}")]
    TooManyEntries {
        /// The block's index in its set.
        block: usize,
        /// Entries it needs.
        entries: u64,
        /// The spec's limit.
        limit: u64,
    },
    /// An edge lies in two blocks.
    #[error("edge {0:?} lies in more than one block")]
    EdgeTwice((u32, u32)),
    #[error(
        "blocks hold {held} edges, the boundary graph {expected} (first missing {missing:?}, \
         first extra {extra:?})"
    )]
    /// The blocks' edges are not the boundary graph's cross-worker edges.
    EdgesDiffer {
        /// Edges the blocks hold.
        held: usize,
        /// Cross-worker edges of the graph.
        expected: usize,
        /// The first cross-worker edge no block holds.
        missing: Option<(u32, u32)>,
        /// The first block edge that is not a cross-worker edge.
        extra: Option<(u32, u32)>,
    },
    /// The graph's fingerprint differs from the manifest's.
    #[error("the graph differs from the one the plan was made for")]
    OtherGraph,
    /// The assignment has another vertex count than the graph.
    #[error("the assignment does not cover every vertex")]
    AssignmentShort,
    /// A problem of one block set's file.
    #[error("{file}: {problem}")]
    InSet {
        /// The set's blocks file.
        file: String,
        /// What is wrong in it.
        problem: Box<PlanCheckError>,
    },
    /// A table file has no size and checksum in the manifest.
    #[error("the manifest lists no {0}")]
    NotInManifest(String),
    /// A table file could not be read.
    #[error("{}: {source}", path.display())]
    Unreadable {
        /// The file.
        path: std::path::PathBuf,
        /// What the operating system said.
        source: std::io::Error,
    },
    /// A table file's size or checksum differs from the manifest's.
    #[error("{}: size or checksum differs from the manifest", .0.display())]
    Checksum(std::path::PathBuf),
    /// A table file is not what the blocks and orders encode to.
    #[error("{}: tables disagree with the blocks", .0.display())]
    TablesDisagree(std::path::PathBuf),
    /// Another number of order sets than block sets.
    #[error("{orders} order sets for {sets} block sets")]
    OrderSets {
        /// Order sets given.
        orders: usize,
        /// Block sets of the plan.
        sets: usize,
    },
    /// A set has another number of orders than blocks.
    #[error("set {set}: {orders} orders for {blocks} blocks")]
    OrderCount {
        /// The block set.
        set: usize,
        /// Orders given for it.
        orders: usize,
        /// Its blocks.
        blocks: usize,
    },
    /// An order is not a permutation of its block's vertices.
    #[error("set {set} block {block}: the order is not a permutation of the block's vertices")]
    NotAPermutation {
        /// The block set.
        set: usize,
        /// The block within it.
        block: usize,
    },
}

/// Why an exchange choice does not fit a plan.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExchangeChoiceError {
    /// The choice has another number of layers than the plan.
    #[error("an exchange choice for {choice} layers in a plan of {plan}")]
    Layers {
        /// Layers in the choice.
        choice: usize,
        /// Layers in the plan's spec.
        plan: usize,
    },
    /// A layer's kind is empty.
    #[error("layer {0} names no exchange kind")]
    NoKind(usize),
}

/// The partition crate's result: [`PartitionError`] unless said otherwise.
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
