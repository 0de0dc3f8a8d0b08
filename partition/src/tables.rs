//! The lookup tables a block needs at run time (`switchgnn_dataplane::table::BlockTable`),
//! derived from its edges, and their layout in the plan's table files.

use switchgnn_dataplane::table::BlockTable;

use crate::assignment::Assignment;
use crate::blocks::Block;

/// The full (switch) table of `block`.
pub fn block_table(block: &Block, assignment: &Assignment) -> BlockTable {
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

/// Append `table` to `out` in the plan's binary layout: row count u64, then vertices,
/// workers and expected counts as u32 arrays, offsets as u64, slots as u32.
pub(crate) fn encode_table(table: &BlockTable, out: &mut Vec<u8>) {
    out.extend_from_slice(&(table.vertices.len() as u64).to_le_bytes());
    for array in [&table.vertices, &table.workers, &table.expected] {
        out.extend_from_slice(bytemuck::cast_slice(array));
    }
    out.extend_from_slice(bytemuck::cast_slice(&table.offsets));
    out.extend_from_slice(&(table.slots.len() as u64).to_le_bytes());
    out.extend_from_slice(bytemuck::cast_slice(&table.slots));
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
}
