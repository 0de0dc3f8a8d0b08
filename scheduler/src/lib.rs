//! Send orders for in-network aggregation and the model that scores them (SwitchGNN §3.2).
//!
//! - [`order`]: priority BFS (graph-aware multicast reordering), plain BFS, global
//!   degree-descending and seeded random orders over any adjacency;
//! - [`slots`]: the time-slot model — `k` packets in and `k` out per slot — giving the
//!   completion slot, the queue curve, its maximum and the idle output slots of an order;
//! - [`blocks`]: orders for every block of a plan, in parallel;
//! - [`exchange`]: the dataplane's exchange plans from a prepared plan or a graph, and the
//!   direct sums an exchange must equal.
//!
//! Both work on [`Adjacency`], a borrowed CSR view, so a whole graph and a block's table are
//! ordered and scored by the same code.

pub mod blocks;
pub mod exchange;
pub mod hybrid;
pub mod order;
pub mod planner;
pub mod slots;

pub use order::{order, OrderKind};
pub use slots::{evaluate, SlotReport};

/// A borrowed CSR adjacency over vertices `0..n`: row `v` is
/// `neighbors[offsets[v]..offsets[v + 1]]`.
#[derive(Debug, Clone, Copy)]
pub struct Adjacency<'a> {
    /// Row starts, `n + 1` of them.
    pub offsets: &'a [u64],
    /// Every row's neighbours, back to back.
    pub neighbors: &'a [u32],
}

impl<'a> Adjacency<'a> {
    /// The adjacency of these CSR arrays.
    pub fn new(offsets: &'a [u64], neighbors: &'a [u32]) -> Self {
        Adjacency { offsets, neighbors }
    }

    /// A whole graph's adjacency.
    pub fn of_graph(graph: &'a switchgnn_datasets::Graph) -> Self {
        Adjacency::new(graph.offsets(), graph.neighbor_ids())
    }

    /// Vertices `n`.
    pub fn num_vertices(&self) -> usize {
        self.offsets.len() - 1
    }

    /// The neighbours of `v`.
    pub fn row(&self, v: u32) -> &'a [u32] {
        &self.neighbors[self.offsets[v as usize] as usize..self.offsets[v as usize + 1] as usize]
    }

    /// How many neighbours `v` has.
    pub fn degree(&self, v: u32) -> u64 {
        self.offsets[v as usize + 1] - self.offsets[v as usize]
    }
}
