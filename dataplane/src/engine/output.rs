//! The engine's data: the rows it sends and the sums it produces.

use serde::Serialize;

use crate::fixed::Scale;

/// Per local vertex with remote neighbours, the exact sum of its remote contributions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExchangeOutput {
    /// Vertices that receive, ascending (global ids).
    pub vertices: Vec<u32>,
    /// Lanes per vertex: the feature width.
    pub width: usize,
    /// The sums, row-major: `width` per vertex in the order of `vertices`.
    pub sums: Vec<i64>,
}

impl ExchangeOutput {
    /// All-zero sums for `vertices` at `width`.
    pub fn zeros(vertices: Vec<u32>, width: usize) -> ExchangeOutput {
        let sums = vec![0; vertices.len() * width];
        ExchangeOutput {
            vertices,
            width,
            sums,
        }
    }

    /// Sum of vertex `v`, if it receives anything.
    pub fn row(&self, v: u32) -> Option<&[i64]> {
        let i = self.vertices.binary_search(&v).ok()?;
        Some(&self.sums[i * self.width..(i + 1) * self.width])
    }

    /// The sums as floats under `scale`.
    pub fn decode(&self, scale: &Scale) -> Vec<f32> {
        self.sums.iter().map(|&q| scale.decode(q)).collect()
    }
}

/// The worker's encoded rows, for the vertices it sends.
#[derive(Debug)]
pub struct EncodedRows {
    pub(super) width: usize,
    pub(super) lanes: Vec<i32>,
    /// Per vertex of the graph, its row here (`NOT_HELD`: none). Looked up for every record
    /// sent and every source of every partial sum: a search through the sorted vertices took
    /// a sixth of a host-reduce worker's time at width 745 (Amazon-Computers, 4 workers).
    index: Vec<u32>,
}

/// [`EncodedRows`]' index entry of a vertex the worker does not hold.
const NOT_HELD: u32 = u32::MAX;

impl EncodedRows {
    /// `lanes` holds `width` lanes for each of `vertices` (ascending), in their order, of a
    /// graph of `graph_vertices` vertices.
    pub(super) fn new(
        vertices: &[u32],
        width: usize,
        lanes: Vec<i32>,
        graph_vertices: usize,
    ) -> EncodedRows {
        let mut index = vec![NOT_HELD; graph_vertices];
        for (i, &v) in vertices.iter().enumerate() {
            index[v as usize] = i as u32;
        }
        EncodedRows {
            width,
            lanes,
            index,
        }
    }

    /// Lanes `c·64 .. c·64 + lanes` of vertex `v`, if the worker holds it.
    pub fn chunk(&self, v: u32, c: usize, lanes: usize) -> Option<&[i32]> {
        let i = *self.index.get(v as usize).filter(|&&i| i != NOT_HELD)? as usize;
        Some(&self.lanes[i * self.width + c * crate::wire::MAX_LANES..][..lanes])
    }
}
