//! Exchange plans from what the planning crates make: a prepared plan's blocks and send orders
//! (SwitchGNN), or every cross edge of a graph as one block (the strawman and the host
//! exchange); and the direct computation every exchange must equal. The protocol crate
//! (`switchgnn_dataplane`) runs plans; it does not know graphs or partitioners.

use rayon::prelude::*;
use switchgnn_chip::{Chip, HostCost};
use switchgnn_dataplane::engine::ExchangeOutput;
use switchgnn_dataplane::plan::{ExchangePlan, Mode, PlanBlock, PlanError};
use switchgnn_dataplane::switch::Racks;
use switchgnn_dataplane::table::BlockTable;
use switchgnn_dataplane::ExchangeKind;
use switchgnn_datasets::Graph;
use switchgnn_partition::traffic::{aggregators_per_vertex, AGGREGATOR_BYTES};
use switchgnn_partition::{block_table, Assignment, Block, Blocks, Plan};

use crate::blocks::block_orders;
pub use crate::hybrid::reduce_plan;
use crate::{order, Adjacency, OrderKind};

/// Building exchange plans from plans and graphs (import it to call
/// `ExchangePlan::from_plan` and `ExchangePlan::whole_graph`).
pub trait ExchangePlans: Sized {
    /// The exchange of `layer` of a prepared plan (SwitchGNN mode). Uses the plan's send
    /// orders when it has them, else priority BFS (seed 0).
    fn from_plan(plan: &Plan, layer: usize) -> Result<Self, PlanError>;

    /// One block of every cross edge of `graph` under `assignment`: the strawman's or the
    /// host exchange's plan, with the send order `kind` (the strawman uses a random order).
    fn whole_graph(
        graph: &Graph,
        assignment: &Assignment,
        width: usize,
        mode: Mode,
        kind: OrderKind,
        seed: u64,
    ) -> Result<Self, PlanError>;
}

impl ExchangePlans for ExchangePlan {
    fn from_plan(plan: &Plan, layer: usize) -> Result<ExchangePlan, PlanError> {
        let width = layer_width(plan, layer)?;
        let apv = aggregators_per_vertex(width);
        let set_index = plan
            .block_sets
            .iter()
            .position(|s| s.params.aggregators_per_vertex() == apv)
            .ok_or(PlanError::NoLayer {
                layer,
                layers: plan.manifest.spec.feature_dims.len(),
            })?;
        let set = &plan.block_sets[set_index];
        let orders = match &plan.orders {
            Some(o) => o[set_index].clone(),
            None => block_orders(set, &plan.assignment, OrderKind::PriorityBfs, 0),
        };
        let blocks = set
            .blocks
            .par_iter()
            .zip(orders)
            .map(|(block, order)| PlanBlock::new(block_table(block, &plan.assignment), &order[..]))
            .collect::<Result<Vec<_>, _>>()?;
        new_plan(Mode::Blocks, width, &plan.assignment, blocks)
    }

    fn whole_graph(
        graph: &Graph,
        assignment: &Assignment,
        width: usize,
        mode: Mode,
        kind: OrderKind,
        seed: u64,
    ) -> Result<ExchangePlan, PlanError> {
        let blocks = match cross_edge_table(graph, assignment) {
            None => Vec::new(),
            Some(table) => {
                let adj = Adjacency::new(&table.offsets, &table.slots);
                let rows = order(adj, kind, seed);
                let order: Vec<u32> = rows.iter().map(|&i| table.vertices[i as usize]).collect();
                vec![PlanBlock::new(table, &order)?]
            }
        };
        new_plan(mode, width, assignment, blocks)
    }
}

/// Every cross edge of `graph` under `assignment` as one block's table; `None` without any.
fn cross_edge_table(graph: &Graph, assignment: &Assignment) -> Option<BlockTable> {
    // Counted first, allocated once, and dropped once the table holds the edges: on a graph
    // cut into many workers the list is nearly as large as the graph's adjacency.
    let cross = |&(u, v): &(u32, u32)| assignment.part(u) != assignment.part(v);
    let mut edges = Vec::with_capacity(graph.edges().filter(cross).count());
    edges.extend(graph.edges().filter(cross));
    (!edges.is_empty()).then(|| block_table(&Block { level: 0, edges }, assignment))
}

/// The host exchange's plan in its table's row order: what [`Load`](switchgnn_chip::Load)
/// counts does not depend on the send order, so a plan that is only counted skips computing
/// one.
fn host_plan_in_row_order(
    graph: &Graph,
    assignment: &Assignment,
    width: usize,
) -> Result<ExchangePlan, PlanError> {
    let blocks = match cross_edge_table(graph, assignment) {
        None => Vec::new(),
        Some(table) => {
            let rows = table.vertices.clone();
            vec![PlanBlock::new(table, &rows)?]
        }
    };
    new_plan(Mode::Host, width, assignment, blocks)
}

/// Choices within a kind's plan that are not kinds of their own.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PlanOptions {
    /// Seeds the send orders' random starts (and the strawman's random order).
    pub seed: u64,
    /// Priority BFS (the paper's graph-aware multicast reordering) rather than a seeded
    /// random order. The strawman always sends in a random order.
    pub graph_aware_order: bool,
    /// The chip and host costs the hybrid's pairs are chosen for; `None`: those the plan's
    /// manifest records (`hybrid::planned_on`), so that every process of a job agrees.
    pub chip: Option<(Chip, HostCost)>,
    /// The plan is only counted (`switchgnn_chip::Load`), never run: the host exchange then
    /// keeps its table's row order instead of computing a send order no count depends on.
    pub counted_only: bool,
    /// The racks the workers sit in, consecutive ranks evenly (`Racks::even`, as the
    /// simulator's and the in-memory leaf-spine fabrics place them): the host two-level
    /// exchange's proxies are chosen for them. `None` or 1: one rack (a star), where it is
    /// host-reduce.
    pub racks: Option<u16>,
}

impl Default for PlanOptions {
    fn default() -> Self {
        PlanOptions {
            seed: 0,
            graph_aware_order: true,
            chip: None,
            counted_only: false,
            racks: None,
        }
    }
}

/// The plan of one exchange of `kind` for `layer` of `plan`: SwitchGNN runs the plan's blocks
/// (in its send orders, or random ones without graph-aware ordering); the strawman and both
/// host exchanges run every cross edge of `graph` as one block. The one place that maps a
/// kind to its plan, for every driver.
pub fn exchange_plan(
    kind: ExchangeKind,
    graph: &Graph,
    plan: &Plan,
    layer: usize,
    options: PlanOptions,
) -> Result<ExchangePlan, PlanError> {
    let width = layer_width(plan, layer)?;
    let whole = |mode, order_kind| {
        ExchangePlan::whole_graph(
            graph,
            &plan.assignment,
            width,
            mode,
            order_kind,
            options.seed,
        )
    };
    let graph_order = if options.graph_aware_order {
        OrderKind::PriorityBfs
    } else {
        OrderKind::Random
    };
    match kind {
        ExchangeKind::Switchgnn => {
            let mut p = ExchangePlan::from_plan(plan, layer)?;
            if !options.graph_aware_order {
                for (b, block) in p.blocks.iter_mut().enumerate() {
                    let adj = Adjacency::new(&block.table.offsets, &block.table.slots);
                    block.order = order(adj, OrderKind::Random, options.seed + b as u64);
                }
            }
            Ok(p)
        }
        ExchangeKind::Strawman => whole(Mode::Strawman, OrderKind::Random),
        ExchangeKind::Host | ExchangeKind::BalancedHost if options.counted_only => {
            host_plan_in_row_order(graph, &plan.assignment, width)
        }
        ExchangeKind::Host | ExchangeKind::BalancedHost => whole(Mode::Host, graph_order),
        ExchangeKind::Reduce => {
            let aggregators = plan.manifest.spec.switch_memory / AGGREGATOR_BYTES;
            reduce_plan(graph, &plan.assignment, width, aggregators as usize)
        }
        ExchangeKind::HostReduce => host_reduce_plan(graph, &plan.assignment, width),
        ExchangeKind::HostHybrid => host_hybrid_plan(graph, &plan.assignment, width),
        ExchangeKind::HostTwoLevel => {
            let workers = plan.assignment.num_parts() as u16;
            let racks = Racks::even(workers, options.racks.unwrap_or(1).max(1))
                .map_err(|e| PlanError::NoChoice(format!("host-two-level: {e}")))?;
            host_two_level_plan(graph, &plan.assignment, width, &racks)
        }
        ExchangeKind::Hybrid => {
            let aggregators = plan.manifest.spec.switch_memory / AGGREGATOR_BYTES;
            let (chip, cost) = match options.chip {
                Some(on) => on,
                None => crate::hybrid::planned_on(plan)?,
            };
            crate::hybrid::hybrid_plan(
                graph,
                &plan.assignment,
                width,
                aggregators as usize,
                &chip,
                &cost,
            )
        }
        ExchangeKind::Auto => exchange_plan(chosen_kind(plan, layer)?, graph, plan, layer, options),
    }
}

/// The kind `plan` records for `layer` (`switchgnn prepare --exchange`).
pub fn chosen_kind(plan: &Plan, layer: usize) -> Result<ExchangeKind, PlanError> {
    let choice = plan.manifest.exchange.as_ref().ok_or_else(|| {
        PlanError::NoChoice(
            "the plan records no exchange kind per layer: prepare it again with this build \
             (`prepare --exchange auto`), or name the exchange"
                .into(),
        )
    })?;
    let name = &choice
        .layers
        .get(layer)
        .ok_or(PlanError::NoLayer {
            layer,
            layers: choice.layers.len(),
        })?
        .kind;
    match ExchangeKind::parse(name) {
        Some(ExchangeKind::Auto) | None => Err(PlanError::NoChoice(format!(
            "the plan records `{name}` for layer {layer}, which is not an exchange kind"
        ))),
        Some(kind) => Ok(kind),
    }
}

/// The host-only pre-aggregated exchange of `graph` under `assignment`: the reduce
/// exchange's partial sums, sent host to host. No aggregator holds them, so every destination
/// is in one block.
pub fn host_reduce_plan(
    graph: &Graph,
    assignment: &Assignment,
    width: usize,
) -> Result<ExchangePlan, PlanError> {
    let mut p = reduce_plan(graph, assignment, width, usize::MAX)?;
    p.mode = Mode::HostReduce;
    Ok(p)
}

/// The host two-level exchange of `graph` under `assignment` on `racks`: host-only
/// pre-aggregation ([`host_reduce_plan`]), except that the workers of one rack feeding a
/// destination owned in another rack send their partial sums to one of them, the rack's proxy
/// for that destination, which adds them to its own and sends the owner one partial for the
/// whole rack — so a destination's owner takes at most one partial per other rack across the
/// spine, as two-level in-network aggregation has the leaves send (hierarchical all-reduce's
/// shape, with hosts doing the leaves' sums).
///
/// The proxy is chosen per (rack, destination) among the rack's workers that feed the
/// destination (so it holds a share itself, and its own vertex names the header), by a hash
/// of the destination: a worker proxies for about an equal share of its rack's destinations
/// elsewhere, so no one worker's link carries the rack's whole cross-rack traffic, and every
/// process derives the same choice from the plan inputs. In the plan the rack's workers merge
/// into one pair (destination, proxy) whose sources are every vertex of the rack neighbouring
/// the destination; pairs of the owner's own rack, and of a rack where one worker alone feeds
/// the destination, stay as in host-reduce. On one rack the plan is host-reduce's (in its own
/// mode), and so are its bytes.
pub fn host_two_level_plan(
    graph: &Graph,
    assignment: &Assignment,
    width: usize,
    racks: &Racks,
) -> Result<ExchangePlan, PlanError> {
    let mut p = host_reduce_plan(graph, assignment, width)?;
    p.mode = Mode::HostTwoLevel;
    let workers = p.workers;
    if racks.workers() < workers {
        return Err(PlanError::NoChoice(format!(
            "host-two-level: {} racked workers for a plan of {workers}",
            racks.workers()
        )));
    }
    for b in &mut p.blocks {
        let t = &b.table;
        let mut slots = Vec::with_capacity(t.slots.len());
        let mut offsets = Vec::with_capacity(t.offsets.len());
        let mut expected = Vec::with_capacity(t.expected.len());
        let mut starts = Vec::with_capacity(b.partials.starts.len());
        let mut sources = Vec::with_capacity(b.partials.sources.len());
        offsets.push(0u64);
        starts.push(0u64);
        // (rack, worker, pair) of one row's pairs.
        let mut by_rack: Vec<(u16, u16, usize)> = Vec::new();
        let mut merged: Vec<(u32, Vec<u32>)> = Vec::new();
        for row in 0..t.len() {
            let v = t.vertices[row];
            let home = racks.rack_of(t.workers[row] as u16);
            by_rack.clear();
            for p in t.pairs_of(row) {
                let w = t.slots[p] as u16;
                by_rack.push((racks.rack_of(w), w, p));
            }
            by_rack.sort_unstable();
            merged.clear();
            for group in by_rack.chunk_by(|a, b| a.0 == b.0) {
                if group[0].0 == home || group.len() == 1 {
                    for &(_, w, p) in group {
                        merged.push((u32::from(w), b.partials.of(p).to_vec()));
                    }
                    continue;
                }
                let proxy = group[proxy_index(v, group.len())].1;
                let mut all: Vec<u32> = group
                    .iter()
                    .flat_map(|&(_, _, p)| b.partials.of(p).iter().copied())
                    .collect();
                all.sort_unstable();
                merged.push((u32::from(proxy), all));
            }
            merged.sort_unstable_by_key(|m| m.0);
            for (w, of) in merged.drain(..) {
                slots.push(w);
                sources.extend_from_slice(&of);
                starts.push(sources.len() as u64);
            }
            expected.push((slots.len() - *offsets.last().unwrap() as usize) as u32);
            offsets.push(slots.len() as u64);
        }
        b.table.slots = slots;
        b.table.offsets = offsets;
        b.table.expected = expected;
        b.partials.starts = starts;
        b.partials.sources = sources;
    }
    Ok(p)
}

/// Which of `n` candidates proxies for destination `v`: a multiplicative hash of `v`, so that
/// consecutive destinations (one owner's, mostly) spread over the candidates.
fn proxy_index(v: u32, n: usize) -> usize {
    let h = u64::from(v).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32;
    (h % n as u64) as usize
}

/// The rows each way of the host-only exchanges moves per ordered worker pair: entry
/// `from · workers + to` is (raw copies, partial sums) — the host exchange's copies of
/// `from`'s vertices that neighbour a vertex of `to`, and host-only pre-aggregation's partial
/// sums, one per vertex of `to` that neighbours a vertex of `from`. The graph is symmetric,
/// so `from → to`'s partial sums are as many as `to → from`'s raw copies.
pub fn host_pair_rows(graph: &Graph, assignment: &Assignment) -> Vec<(u64, u64)> {
    let n = assignment.num_parts() as usize;
    let part = |v: u32| assignment.part(v) as usize;
    let mut rows = vec![(0u64, 0u64); n * n];
    // The last vertex that counted each worker: one count per (vertex, remote worker).
    let mut stamp = vec![u32::MAX; n];
    for x in 0..graph.num_vertices() as u32 {
        let home = part(x);
        for &y in graph.neighbors(x) {
            let w = part(y);
            if w == home || std::mem::replace(&mut stamp[w], x) == x {
                continue;
            }
            // `x` goes raw from its worker to `w`, or takes one partial sum from `w`.
            rows[home * n + w].0 += 1;
            rows[w * n + home].1 += 1;
        }
    }
    rows
}

/// The host hybrid of `graph` under `assignment`: per ordered worker pair, the way of
/// [`host_pair_rows`] with fewer rows — raw copies, as the host exchange sends them, or
/// partial sums, as host-only pre-aggregation does (a tie goes to raw copies, the simpler).
/// The choice is made per pair, whole: a worker's rows to one peer are all raw or all partial
/// (a finer choice within a pair could move fewer rows still). Every destination is in one
/// block, as a [`Mode::Reduce`] hybrid block: raw copies are its multicast senders, partial
/// sums its (destination, worker) pairs.
pub fn host_hybrid_plan(
    graph: &Graph,
    assignment: &Assignment,
    width: usize,
) -> Result<ExchangePlan, PlanError> {
    let n = assignment.num_parts() as usize;
    let raw: Vec<bool> = host_pair_rows(graph, assignment)
        .into_iter()
        .map(|(raw, partial)| raw <= partial)
        .collect();
    let goes_raw =
        |u: u32, v: u32| raw[assignment.part(u) as usize * n + assignment.part(v) as usize];
    let mut p = crate::hybrid::mixed_plan(graph, assignment, width, usize::MAX, &goes_raw)?;
    p.mode = Mode::HostHybrid;
    Ok(p)
}

/// The width exchanged at `layer` of `plan`.
fn layer_width(plan: &Plan, layer: usize) -> Result<usize, PlanError> {
    let dims = &plan.manifest.spec.feature_dims;
    dims.get(layer).copied().ok_or(PlanError::NoLayer {
        layer,
        layers: dims.len(),
    })
}

/// The SwitchGNN plan of `blocks` with every block sent in vertex order: for tools that judge a
/// block partition's load without preparing a plan (the order changes no count).
pub fn blocks_plan(
    blocks: &Blocks,
    assignment: &Assignment,
    width: usize,
) -> Result<ExchangePlan, PlanError> {
    let planned = blocks
        .blocks
        .iter()
        .map(|b| PlanBlock::new(block_table(b, assignment), &b.vertices()))
        .collect::<Result<Vec<_>, _>>()?;
    new_plan(Mode::Blocks, width, assignment, planned)
}

fn new_plan(
    mode: Mode,
    width: usize,
    assignment: &Assignment,
    blocks: Vec<PlanBlock>,
) -> Result<ExchangePlan, PlanError> {
    let owner = assignment.parts().iter().map(|&p| p as u16).collect();
    ExchangePlan::new(mode, width, assignment.num_parts(), owner, blocks)
}

/// Per worker, the sum over remote neighbours of `encoded` (one row of `width` per vertex).
pub fn remote_sums(
    graph: &Graph,
    assignment: &Assignment,
    width: usize,
    encoded: &[i32],
) -> Vec<ExchangeOutput> {
    let workers = assignment.num_parts() as usize;
    let mut outputs: Vec<ExchangeOutput> = (0..workers)
        .map(|_| ExchangeOutput::zeros(Vec::new(), width))
        .collect();
    for v in 0..graph.num_vertices() as u32 {
        let w = assignment.part(v);
        let mut row: Option<Vec<i64>> = None;
        for &u in graph.neighbors(v) {
            if assignment.part(u) == w {
                continue;
            }
            let acc = row.get_or_insert_with(|| vec![0; width]);
            let x = &encoded[u as usize * width..(u as usize + 1) * width];
            for (a, &q) in acc.iter_mut().zip(x) {
                *a += i64::from(q);
            }
        }
        if let Some(row) = row {
            let out = &mut outputs[w as usize];
            out.vertices.push(v);
            out.sums.extend(row);
        }
    }
    outputs
}
