//! Orders for every block of a plan, computed in parallel.

use rayon::prelude::*;
use switchgnn_partition::{Assignment, BlockTable, Blocks};

use crate::order::{order, OrderKind};
use crate::slots::{evaluate, SlotReport};
use crate::Adjacency;

/// The send order of every block, as global vertex ids. Block `b` is ordered with seed
/// `seed + b`, so blocks differ but the whole is reproducible.
pub fn block_orders(
    set: &Blocks,
    assignment: &Assignment,
    kind: OrderKind,
    seed: u64,
) -> Vec<Vec<u32>> {
    set.blocks
        .par_iter()
        .enumerate()
        .map(|(b, block)| {
            let table = BlockTable::of(block, assignment);
            let adj = Adjacency::new(&table.offsets, &table.slots);
            order(adj, kind, seed.wrapping_add(b as u64))
                .into_iter()
                .map(|i| table.vertices[i as usize])
                .collect()
        })
        .collect()
}

/// The time-slot report of every block under `kind`.
pub fn block_reports(
    set: &Blocks,
    assignment: &Assignment,
    kind: OrderKind,
    seed: u64,
    k: u64,
) -> Vec<SlotReport> {
    set.blocks
        .par_iter()
        .enumerate()
        .map(|(b, block)| {
            let table = BlockTable::of(block, assignment);
            let adj = Adjacency::new(&table.offsets, &table.slots);
            let ord = order(adj, kind, seed.wrapping_add(b as u64));
            evaluate(adj, &ord, k)
        })
        .collect()
}
