//! The lookup tables a block needs at run time, derived from its edges.
//!
//! Within a block, every endpoint is both a sender and a destination (the graph is symmetric).
//! The destinations, sorted by vertex id, get aggregator slots `0..n`; slot `i` stands for the
//! `⌈D/32⌉` aggregators `i·k .. (i+1)·k` of a width-`D` feature. For the switch, a row per
//! vertex gives its owner, the contributions its aggregator expects (its in-block degree) and
//! the slots its feature is added into (its in-block neighbours'). A worker's table is the same
//! rows restricted to its own vertices: what it sends, where each goes, and what it expects back.

use serde::Serialize;

use crate::assignment::Assignment;
use crate::blocks::Block;

/// Rows of one block's table, CSR-style: row `i` describes `vertices[i]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct BlockTable {
    pub vertices: Vec<u32>,
    /// Owner worker of each vertex: where its aggregated result goes.
    pub workers: Vec<u32>,
    /// Contributions the vertex's aggregator expects before it is complete.
    pub expected: Vec<u32>,
    /// Row `i`'s slots are `slots[offsets[i]..offsets[i + 1]]`.
    pub offsets: Vec<u64>,
    /// Aggregator slots (indices into the block's full destination list) a vertex feeds.
    pub slots: Vec<u32>,
}

impl BlockTable {
    /// The full (switch) table of `block`.
    pub fn of(block: &Block, assignment: &Assignment) -> BlockTable {
        let vertices = block.vertices();
        let slot = |v: u32| vertices.binary_search(&v).expect("endpoint of the block") as u32;
        let mut degree = vec![0u64; vertices.len()];
        for &(u, v) in &block.edges {
            degree[slot(u) as usize] += 1;
            degree[slot(v) as usize] += 1;
        }
        let mut offsets = vec![0u64; vertices.len() + 1];
        for i in 0..vertices.len() {
            offsets[i + 1] = offsets[i] + degree[i];
        }
        let mut cursor = offsets.clone();
        let mut slots = vec![0u32; block.edges.len() * 2];
        for &(u, v) in &block.edges {
            let (su, sv) = (slot(u), slot(v));
            slots[cursor[su as usize] as usize] = sv;
            cursor[su as usize] += 1;
            slots[cursor[sv as usize] as usize] = su;
            cursor[sv as usize] += 1;
        }
        for i in 0..vertices.len() {
            slots[offsets[i] as usize..offsets[i + 1] as usize].sort_unstable();
        }
        BlockTable {
            workers: vertices.iter().map(|&v| assignment.part(v)).collect(),
            expected: degree.iter().map(|&d| d as u32).collect(),
            vertices,
            offsets,
            slots,
        }
    }

    /// The rows of worker `w` (slots still index the full destination list), in vertex order.
    pub fn for_worker(&self, w: u32) -> BlockTable {
        self.rows_of(w, 0..self.vertices.len())
    }

    /// The rows of worker `w` in the block's send order (global vertex ids): the worker's send
    /// sequence is the block order restricted to its own vertices.
    pub fn for_worker_in_order(&self, w: u32, order: &[u32]) -> BlockTable {
        let rows = order.iter().map(|v| {
            self.vertices
                .binary_search(v)
                .expect("the order lists the block's vertices")
        });
        self.rows_of(w, rows)
    }

    fn rows_of(&self, w: u32, rows: impl Iterator<Item = usize>) -> BlockTable {
        let mut out = BlockTable {
            offsets: vec![0],
            ..Default::default()
        };
        for i in rows {
            if self.workers[i] == w {
                out.vertices.push(self.vertices[i]);
                out.workers.push(w);
                out.expected.push(self.expected[i]);
                out.slots.extend_from_slice(self.row(i));
                out.offsets.push(out.slots.len() as u64);
            }
        }
        out
    }

    /// Slots fed by row `i`.
    pub fn row(&self, i: usize) -> &[u32] {
        &self.slots[self.offsets[i] as usize..self.offsets[i + 1] as usize]
    }

    pub fn len(&self) -> usize {
        self.vertices.len()
    }

    pub fn is_empty(&self) -> bool {
        self.vertices.is_empty()
    }

    /// Append this table to `out` in the plan's binary layout: row count u64, then vertices,
    /// workers and expected counts as u32 arrays, offsets as u64, slots as u32.
    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&(self.vertices.len() as u64).to_le_bytes());
        for array in [&self.vertices, &self.workers, &self.expected] {
            out.extend_from_slice(bytemuck::cast_slice(array));
        }
        out.extend_from_slice(bytemuck::cast_slice(&self.offsets));
        out.extend_from_slice(&(self.slots.len() as u64).to_le_bytes());
        out.extend_from_slice(bytemuck::cast_slice(&self.slots));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn switch_sums_equal_the_block_neighbourhood_sums() {
        // Path 0-1-2-3 on two workers {0,1} {2,3}, plus edge 0-3; the block holds the cross
        // edges 1-2 and 0-3.
        let a = Assignment::new(vec![0, 0, 1, 1], 2).unwrap();
        let block = Block {
            level: 1,
            edges: vec![(0, 3), (1, 2)],
        };
        let t = BlockTable::of(&block, &a);
        assert_eq!(t.vertices, [0, 1, 2, 3]);
        assert_eq!(t.workers, [0, 0, 1, 1]);
        assert_eq!(t.expected, [1, 1, 1, 1]);
        // Each source feeds its partner's slot.
        assert_eq!(
            (t.row(0), t.row(1), t.row(2), t.row(3)),
            (&[3][..], &[2][..], &[1][..], &[0][..])
        );
        let w1 = t.for_worker(1);
        assert_eq!(w1.vertices, [2, 3]);
        assert_eq!(w1.row(0), &[1]);
        assert_eq!(w1.row(1), &[0]);
    }
}
