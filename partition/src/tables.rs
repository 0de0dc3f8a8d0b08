//! The lookup tables a block needs at run time (`switchgnn_dataplane::table::BlockTable`),
//! derived from its edges, and their layout in the plan's table files.

use std::io::Write;

use switchgnn_dataplane::table::BlockTable;

use crate::assignment::Assignment;
use crate::blocks::Block;

/// The full (switch) table of `block`.
pub fn block_table(block: &Block, assignment: &Assignment) -> BlockTable {
    // Each endpoint's row is found by index in a map as long as the ids, where the block
    // covers a good share of them (a whole-graph block has tens of millions of endpoints, and
    // a search per endpoint would dominate), and by binary search in its sorted vertices
    // otherwise (many small blocks built in parallel would each pay for the long map).
    let span = block
        .edges
        .iter()
        .map(|&(u, v)| u.max(v) as usize + 1)
        .max()
        .unwrap_or(0);
    if block.edges.len() >= span / 8 {
        dense_table(block, assignment, span)
    } else {
        sparse_table(block, assignment)
    }
}

/// [`block_table`] with a row map over the ids below `span` (every endpoint is below it).
fn dense_table(block: &Block, assignment: &Assignment, span: usize) -> BlockTable {
    let mut row = vec![u32::MAX; span];
    for &(u, v) in &block.edges {
        row[u as usize] = 0;
        row[v as usize] = 0;
    }
    let vertices: Vec<u32> = (0..span as u32)
        .filter(|&v| row[v as usize] != u32::MAX)
        .collect();
    for (i, &v) in vertices.iter().enumerate() {
        row[v as usize] = i as u32;
    }
    table_with(block, assignment, vertices, |_, v| row[v as usize])
}

/// [`block_table`] with a binary search of the block's sorted endpoints.
fn sparse_table(block: &Block, assignment: &Assignment) -> BlockTable {
    table_with(block, assignment, block.vertices(), |vertices, v| {
        vertices.binary_search(&v).expect("endpoint of the block") as u32
    })
}

/// The table of `block` whose sorted endpoints are `vertices`; `row(vertices, v)` is the row of
/// endpoint `v`.
fn table_with(
    block: &Block,
    assignment: &Assignment,
    vertices: Vec<u32>,
    row: impl Fn(&[u32], u32) -> u32,
) -> BlockTable {
    let slot = |v: u32| row(&vertices, v);
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

/// Write `table` to `out` in the plan's binary layout: row count u64, then vertices,
/// workers and expected counts as u32 arrays, offsets as u64, slots as u32.
pub(crate) fn encode_table(table: &BlockTable, out: &mut impl Write) -> std::io::Result<()> {
    out.write_all(&(table.vertices.len() as u64).to_le_bytes())?;
    for array in [&table.vertices, &table.workers, &table.expected] {
        out.write_all(bytemuck::cast_slice(array))?;
    }
    out.write_all(bytemuck::cast_slice(&table.offsets))?;
    out.write_all(&(table.slots.len() as u64).to_le_bytes())?;
    out.write_all(bytemuck::cast_slice(&table.slots))
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
        let t = block_table(&block, &a);
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

    #[test]
    fn both_ways_of_finding_rows_build_the_same_table_and_worker_views() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
        let n = 300u32;
        let a = Assignment::new((0..n).map(|v| v % 5).collect(), 5).unwrap();
        for edges in [40, 400, 4000] {
            let mut e: Vec<(u32, u32)> = (0..edges)
                .map(|_| (rng.random_range(0..n), rng.random_range(0..n)))
                .filter(|&(u, v)| u % 5 != v % 5)
                .map(|(u, v)| (u.min(v), u.max(v)))
                .collect();
            e.sort_unstable();
            e.dedup();
            let block = Block { level: 1, edges: e };
            let dense = dense_table(&block, &a, n as usize);
            assert_eq!(dense, sparse_table(&block, &a), "{edges} edges");
            assert_eq!(dense, block_table(&block, &a));
            // Every worker's rows found at once equal each worker's own search.
            let mut order = dense.vertices.clone();
            order.reverse();
            let rows = dense.rows_by_worker(&order, 5);
            for w in 0..5 {
                assert_eq!(
                    dense.for_worker_rows(w, &rows[w as usize]),
                    dense.for_worker_in_order(w, &order)
                );
            }
        }
    }
}
