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
    pub(super) vertices: Vec<u32>,
    pub(super) width: usize,
    pub(super) lanes: Vec<i32>,
}

impl EncodedRows {
    /// Lanes `c·32 .. c·32 + lanes` of vertex `v`, if the worker holds it.
    pub fn chunk(&self, v: u32, c: usize, lanes: usize) -> Option<&[i32]> {
        let i = self.vertices.binary_search(&v).ok()?;
        Some(&self.lanes[i * self.width + c * crate::wire::MAX_LANES..][..lanes])
    }
}
