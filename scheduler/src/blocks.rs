//! Orders for every block of a plan, computed in parallel.

use rayon::prelude::*;
use switchgnn_partition::{block_table, Assignment, BlockTable, Blocks, OrderInfo, Plan};

use crate::order::{order, OrderKind};
use crate::slots::{evaluate, SlotReport};
use crate::Adjacency;

/// Run `f` on every block's table, its adjacency (in table rows) and its order under `kind`,
/// in parallel. Block `b` is ordered with seed `seed + b`, so blocks differ but the whole is
/// reproducible.
fn per_block<R: Send>(
    set: &Blocks,
    assignment: &Assignment,
    kind: OrderKind,
    seed: u64,
    f: impl Fn(&BlockTable, Adjacency<'_>, Vec<u32>) -> R + Sync,
) -> Vec<R> {
    set.blocks
        .par_iter()
        .enumerate()
        .map(|(b, block)| {
            let table = block_table(block, assignment);
            let adj = Adjacency::new(&table.offsets, &table.slots);
            let ord = order(adj, kind, seed.wrapping_add(b as u64));
            f(&table, adj, ord)
        })
        .collect()
}

/// The send order of every block, as global vertex ids.
pub fn block_orders(
    set: &Blocks,
    assignment: &Assignment,
    kind: OrderKind,
    seed: u64,
) -> Vec<Vec<u32>> {
    per_block(set, assignment, kind, seed, |table, _, ord| {
        ord.into_iter()
            .map(|i| table.vertices[i as usize])
            .collect()
    })
}

/// Give every block of `plan` its send order under `kind` (block `b` seeded `seed + b`), and
/// record which order it is: what `switchgnn prepare` and the Python `prepare` both do.
pub fn set_plan_orders(
    plan: &mut Plan,
    kind: OrderKind,
    seed: u64,
) -> Result<(), switchgnn_partition::PartitionError> {
    let orders = plan
        .block_sets
        .iter()
        .map(|set| block_orders(set, &plan.assignment, kind, seed))
        .collect();
    let info = OrderInfo {
        kind: kind.name().to_string(),
        seed,
    };
    plan.set_orders(info, orders)
}

/// The time-slot report of every block under `kind`.
pub fn block_reports(
    set: &Blocks,
    assignment: &Assignment,
    kind: OrderKind,
    seed: u64,
    k: u64,
) -> Vec<SlotReport> {
    per_block(set, assignment, kind, seed, |_, adj, ord| {
        evaluate(adj, &ord, k)
    })
}
