//! What one exchange (one layer, one direction) needs at run time: the block tables in the
//! order they run, each block's send order, and which worker owns each vertex.
//!
//! Three modes share this shape so that every engine and the switch read the same structure:
//! - [`Mode::Blocks`]: SwitchGNN — the plan's blocks, one after another, aggregators assigned
//!   by the control plane (slot `s`, chunk `c` → aggregator `s·C + c`);
//! - [`Mode::Strawman`]: one block holding every cross edge, aggregators allocated on first
//!   arrival from a bounded pool, overflow forwarded raw to the destination's host;
//! - [`Mode::Host`]: the host exchange (BNS-GCN with p = 1) over a plain switch; the single
//!   table tells each worker which remote workers need which of its vertices.
//!
//! Plans are built from a prepared plan or a graph on the planning side
//! (`switchgnn_scheduler::exchange`); this crate only runs them.

use serde::Serialize;
use thiserror::Error;

use crate::table::BlockTable;
use crate::wire::MAX_LANES;

/// Why a plan cannot be built or used.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum PlanError {
    /// A layer the plan does not have.
    #[error("layer {layer} is not in the plan (it has {layers} layers)")]
    NoLayer {
        /// The layer asked for.
        layer: usize,
        /// Layers the plan has.
        layers: usize,
    },
    /// The width needs more 32-lane chunks than the wire's chunk field can number.
    #[error("width {0} needs more than 255 chunks of {MAX_LANES} lanes")]
    TooWide(usize),
    /// A width of zero.
    #[error("width must be positive")]
    ZeroWidth,
    /// A count beyond what the wire format can carry.
    #[error("{what} {value} does not fit the wire format (limit {limit})")]
    TooLarge {
        /// What is counted.
        what: &'static str,
        /// The count.
        value: u64,
        /// The largest count the wire format carries.
        limit: u64,
    },
    /// A send order that does not list each of its block's vertices exactly once.
    #[error("the plan's orders do not match its blocks: {0}")]
    BadOrder(String),
}

/// How the switch treats an exchange.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum Mode {
    /// SwitchGNN: the plan's blocks in turn, aggregators assigned by the control plane.
    Blocks,
    /// One block of every cross edge, aggregators allocated on first arrival.
    Strawman,
    /// The host exchange over a plain switch.
    Host,
}

impl Mode {
    /// The mode's name, as errors and reports give it.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Blocks => "switchgnn",
            Mode::Strawman => "strawman",
            Mode::Host => "host",
        }
    }
}

/// One block at run time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanBlock {
    /// The block's lookup table.
    pub table: BlockTable,
    /// Table rows in send order (every worker sends its own rows in this relative order).
    pub order: Vec<u32>,
}

impl PlanBlock {
    /// Table row of global vertex `v`, if it is in this block.
    pub fn row_of(&self, v: u32) -> Option<usize> {
        self.table.vertices.binary_search(&v).ok()
    }

    /// Global ids of the sources that feed row `i`'s aggregator (its in-block neighbours),
    /// ascending.
    pub fn sources(&self, i: usize) -> impl ExactSizeIterator<Item = u32> + '_ {
        self.table
            .row(i)
            .iter()
            .map(|&s| self.table.vertices[s as usize])
    }
}

/// Everything one exchange needs, shared by the switch and every worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExchangePlan {
    /// How the switch treats the exchange.
    pub mode: Mode,
    /// Feature width `D` of the exchange.
    pub width: usize,
    /// Workers taking part.
    pub workers: u16,
    /// Owner worker of every vertex.
    pub owner: Vec<u16>,
    /// The blocks, in the order they run.
    pub blocks: Vec<PlanBlock>,
}

impl ExchangePlan {
    /// An exchange of `width` over `blocks`, each vertex `v` owned by worker `owner[v]` of
    /// `workers`; checked against what the wire format can carry.
    pub fn new(
        mode: Mode,
        width: usize,
        workers: u32,
        owner: Vec<u16>,
        blocks: Vec<PlanBlock>,
    ) -> Result<ExchangePlan, PlanError> {
        if width == 0 {
            return Err(PlanError::ZeroWidth);
        }
        if width.div_ceil(MAX_LANES) > u8::MAX as usize {
            return Err(PlanError::TooWide(width));
        }
        let fits = |what, value: u64, limit: u64| {
            if value > limit {
                Err(PlanError::TooLarge { what, value, limit })
            } else {
                Ok(())
            }
        };
        fits("workers", u64::from(workers), u64::from(u16::MAX))?;
        // Block ids leave one value above the last for "exchange finished".
        fits("blocks", blocks.len() as u64, u64::from(u16::MAX) - 1)?;
        for b in &blocks {
            let most = b.table.expected.iter().copied().max().unwrap_or(0);
            fits(
                "contributions per aggregator",
                u64::from(most),
                u64::from(u16::MAX),
            )?;
        }
        Ok(ExchangePlan {
            mode,
            width,
            workers: workers as u16,
            owner,
            blocks,
        })
    }

    /// 32-lane chunks per feature.
    pub fn chunks(&self) -> usize {
        self.width.div_ceil(MAX_LANES)
    }

    /// Lanes of chunk `c` (the last one may be short).
    pub fn chunk_lanes(&self, c: usize) -> usize {
        (self.width - c * MAX_LANES).min(MAX_LANES)
    }

    /// Every vertex of worker `w` that receives remote contributions, ascending: the rows of
    /// an exchange's output.
    pub fn receivers(&self, w: u16) -> Vec<u32> {
        let mut out: Vec<u32> = self
            .blocks
            .iter()
            .flat_map(|b| {
                b.table
                    .vertices
                    .iter()
                    .zip(&b.table.workers)
                    .filter(move |(_, &o)| o == u32::from(w))
                    .map(|(&v, _)| v)
            })
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// A fingerprint of everything the switch and the workers must agree on (mode, width,
    /// owners, every table and order), compared at start-up so that processes started with
    /// different plans refuse to run together.
    pub fn checksum(&self) -> u64 {
        fn put<T: Copy + Into<u64>>(h: &mut xxhash_rust::xxh3::Xxh3, words: &[T]) {
            h.update(&(words.len() as u64).to_le_bytes());
            for &w in words {
                h.update(&w.into().to_le_bytes());
            }
        }
        let mut h = xxhash_rust::xxh3::Xxh3::new();
        put(
            &mut h,
            &[self.mode as u32, self.width as u32, u32::from(self.workers)],
        );
        put(&mut h, &self.owner);
        for b in &self.blocks {
            let t = &b.table;
            put(&mut h, &t.vertices);
            put(&mut h, &t.workers);
            put(&mut h, &t.expected);
            put(&mut h, &t.offsets);
            put(&mut h, &t.slots);
            put(&mut h, &b.order);
        }
        h.digest()
    }

    /// Aggregators the largest block holds at once (slots × chunks).
    pub fn peak_aggregators(&self) -> usize {
        self.blocks
            .iter()
            .map(|b| b.table.len() * self.chunks())
            .max()
            .unwrap_or(0)
    }

    /// Worker `w`'s vertices (ascending) and their rows of `features`, a row-major matrix of
    /// every vertex of the graph: what that worker's engine is built from.
    pub fn local_rows(&self, w: u16, features: &[f32]) -> (Vec<u32>, Vec<f32>) {
        let width = self.width;
        let vertices: Vec<u32> = (0..self.owner.len() as u32)
            .filter(|&v| self.owner[v as usize] == w)
            .collect();
        let rows = vertices
            .iter()
            .flat_map(|&v| &features[v as usize * width..(v as usize + 1) * width])
            .copied()
            .collect();
        (vertices, rows)
    }

    /// The most contributions any aggregator adds up (at least 1): what a fixed-point scale
    /// must leave room for so that no sum in the switch overflows.
    pub fn most_contributions(&self) -> u64 {
        self.blocks
            .iter()
            .flat_map(|b| b.table.expected.iter())
            .map(|&e| u64::from(e))
            .max()
            .unwrap_or(1)
            .max(1)
    }
}

impl PlanBlock {
    /// A block of `table` sent in `order` (global vertex ids, each of the block's vertices once).
    pub fn new(table: BlockTable, order: &[u32]) -> Result<PlanBlock, PlanError> {
        plan_block(table, order)
    }
}

fn plan_block(table: BlockTable, order: &[u32]) -> Result<PlanBlock, PlanError> {
    if order.len() != table.len() {
        return Err(PlanError::BadOrder(format!(
            "an order of {} vertices for a block of {}",
            order.len(),
            table.len()
        )));
    }
    let mut seen = vec![false; table.len()];
    let rows = order
        .iter()
        .map(|v| {
            let i = table
                .vertices
                .binary_search(v)
                .map_err(|_| PlanError::BadOrder(format!("vertex {v} is not in its block")))?;
            if std::mem::replace(&mut seen[i], true) {
                return Err(PlanError::BadOrder(format!("vertex {v} is listed twice")));
            }
            Ok(i as u32)
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(PlanBlock { table, order: rows })
}
