//! What an engine is given: its settings and timers, the worker's features, and why it
//! refuses to start.

use serde::Serialize;
use thiserror::Error;

use crate::fixed::Scale;
use crate::framing::HostFraming;
use crate::node::{ExchangeId, Nanos};

/// Why an engine cannot be built.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum EngineError {
    /// The rank is not below the plan's worker count.
    #[error("worker {rank} is not in a plan of {workers} workers")]
    NoSuchWorker {
        /// The rank asked for.
        rank: u16,
        /// Workers in the plan.
        workers: u16,
    },
    /// The host exchange's framing is out of range.
    #[error(
        "host copies need an MTU of {min} to {max} bytes and at least one packet per ack, not \
         {mtu} and {ack_every}",
        min = HostFraming::MIN_MTU,
        max = HostFraming::MAX_MTU
    )]
    Framing {
        /// The MTU asked for.
        mtu: u32,
        /// The packets per acknowledgement asked for.
        ack_every: u32,
    },
    /// The features' width differs from the plan's.
    #[error("features have width {got}, the exchange needs {want}")]
    Width {
        /// Width of the features given.
        got: usize,
        /// Width of the plan.
        want: usize,
    },
    /// The features lack a vertex this worker sends.
    #[error("features are missing vertex {0}, which this worker sends")]
    MissingVertex(u32),
    /// Vertices not strictly ascending, or not width × vertices values.
    #[error("feature vertices must be ascending and hold width × vertices values")]
    BadFeatures,
    /// A reduce plan without the sources of its partial sums (a switch's view of it).
    #[error("the reduce plan lists no sources for its partial sums (a switch's view of it)")]
    NoSources,
    /// The engine's send strategy does not run plans of this mode.
    #[error("a {engine} engine cannot run a {mode} plan")]
    WrongMode {
        /// The strategy's name.
        engine: &'static str,
        /// The plan's mode.
        mode: &'static str,
    },
}

/// Timer settings; the defaults suit 100 Gbps links with microseconds of delay.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Timers {
    /// A data chunk unacknowledged this long is sent again.
    pub rto: Nanos,
    /// Join and block-done reports repeat at this interval until the go arrives.
    pub control: Nanos,
    /// No contribution for this long: fetch what is missing.
    pub result: Nanos,
}

impl Default for Timers {
    fn default() -> Self {
        Timers {
            rto: 50_000,
            control: 50_000,
            result: 200_000,
        }
    }
}

/// What a worker runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EngineConfig {
    /// The exchange (job, step, layer, direction) this engine runs.
    pub exchange: ExchangeId,
    /// Position of this exchange in the job's sequence (strictly increasing): the switch starts
    /// a new exchange only for a higher number.
    pub seq: u32,
    /// This worker's rank.
    pub rank: u16,
    /// Fixed-point scale every worker agreed on for this exchange.
    pub scale: Scale,
    /// Timer settings.
    pub timers: Timers,
    /// Data chunks a worker keeps unacknowledged at once (in-network modes): bounds the queue
    /// a slow switch builds up. `usize::MAX` leaves sending to the pacer alone.
    pub window: usize,
    /// How the host exchange packs its copies and acknowledges them.
    pub framing: HostFraming,
}

/// The worker's own features: ascending vertex ids and their rows, row-major.
#[derive(Debug, Clone, Copy)]
pub struct LocalFeatures<'a> {
    /// Vertices the worker owns, ascending (global ids).
    pub vertices: &'a [u32],
    /// Feature width: values per vertex.
    pub width: usize,
    /// The features, `width` values per vertex in the order of `vertices`.
    pub values: &'a [f32],
}
