//! Progress reporting for long work, kept free of any terminal library so the CLI decides how
//! to draw it (an indicatif bar) and tests and benchmarks stay quiet.

/// Receives progress from long-running library calls. Implementations must be cheap to call
/// from many threads.
pub trait Progress: Sync {
    /// A new stage begins; `total` is its number of units when known.
    fn stage(&self, name: &str, total: Option<u64>);
    /// `delta` more units of the current stage are done.
    fn advance(&self, delta: u64);
}

/// Ignores all progress.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoProgress;

impl Progress for NoProgress {
    fn stage(&self, _name: &str, _total: Option<u64>) {}
    fn advance(&self, _delta: u64) {}
}
