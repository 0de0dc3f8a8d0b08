//! The engine's data: the rows it sends and the sums it produces.

use std::collections::HashMap;

use bitvec::vec::BitVec;

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
    width: usize,
    lanes: Vec<i32>,
    /// Each held vertex's row, looked up for every record sent and every source of every
    /// partial sum. Host-reduce at width 745 (Amazon-Computers, 4 workers, three interleaved
    /// runs) took 102–110 ms per exchange with a search through the sorted vertices, 97–105
    /// with this map, 91–98 with an array over every vertex of the graph — which would cost 4
    /// bytes per graph vertex in every engine, one built per exchange (400 MB at 100 M).
    index: HashMap<u32, u32, foldhash::fast::RandomState>,
    /// Per row and chunk (`position · chunks + chunk`), whether every lane is zero: such a
    /// chunk goes as a zero record ([`crate::wire::RECORD_ZERO`]), and a partial sum of only
    /// such chunks too. Empty unless [`EncodedRows::with_zero_chunks`] made it.
    zero: BitVec,
    chunks: usize,
}

impl EncodedRows {
    /// `lanes` holds `width` lanes for each of `vertices`, in their order.
    pub(super) fn new(vertices: &[u32], width: usize, lanes: Vec<i32>) -> EncodedRows {
        let index = (0..).zip(vertices).map(|(i, &v)| (v, i)).collect();
        EncodedRows {
            width,
            lanes,
            index,
            zero: BitVec::new(),
            chunks: width.div_ceil(crate::wire::MAX_LANES).max(1),
        }
    }

    /// `self` knowing which chunks are all zeros: what the packed host copies need (one pass
    /// over the lanes), the in-network kinds not.
    pub(super) fn with_zero_chunks(mut self) -> EncodedRows {
        let chunks = self.chunks;
        self.zero = self
            .lanes
            .chunks(self.width.max(1))
            .flat_map(|row| {
                (0..chunks).map(move |c| {
                    let at = (c * crate::wire::MAX_LANES).min(row.len());
                    let end = (at + crate::wire::MAX_LANES).min(row.len());
                    row[at..end].iter().all(|&x| x == 0)
                })
            })
            .collect();
        self
    }

    /// Whether every lane of chunk `c` of the row kept at `position` is zero (false unless
    /// [`EncodedRows::with_zero_chunks`] looked).
    pub(super) fn is_zero_at(&self, position: u32, c: usize) -> bool {
        self.zero
            .get(position as usize * self.chunks + c)
            .is_some_and(|z| *z)
    }

    /// Lanes `c·64 .. c·64 + lanes` of vertex `v`, if the worker holds it.
    pub fn chunk(&self, v: u32, c: usize, lanes: usize) -> Option<&[i32]> {
        Some(self.chunk_at(self.position(v)?, c, lanes))
    }

    /// Where vertex `v`'s row is kept, if the worker holds it: for [`EncodedRows::chunk_at`],
    /// so that a row read chunk after chunk is looked up once.
    pub(super) fn position(&self, v: u32) -> Option<u32> {
        self.index.get(&v).copied()
    }

    /// [`EncodedRows::chunk`] of the row kept at `position`.
    pub(super) fn chunk_at(&self, position: u32, c: usize, lanes: usize) -> &[i32] {
        &self.lanes[position as usize * self.width + c * crate::wire::MAX_LANES..][..lanes]
    }
}
