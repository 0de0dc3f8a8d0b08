//! Multi-level block partitioning (SwitchGNN §3.3): split the boundary graph into blocks whose
//! aggregators fit the switch memory, run them one after another.
//!
//! A block is a set of cross-worker edges. Inside a block every endpoint is a destination
//! (the graph is symmetric, so each edge feeds both endpoints' aggregators) and needs
//! `⌈D/32⌉` aggregators; a block fits when its endpoints times that stays within the switch's
//! aggregator count. Level by level:
//! 1. the pending edges form a graph; if all its vertices fit, it is one block and we are done;
//! 2. otherwise METIS cuts it into `k = ⌈V / (capacity · fill_target)⌉` parts; edges inside a
//!    part become that part's block candidate, edges between parts stay pending for the next
//!    level (a vertex may thus appear in several blocks; its partial sums add up on the host);
//! 3. a part that METIS's imbalance left above capacity keeps its highest-degree vertices and
//!    passes the edges of the rest to the next level;
//! 4. part candidates are packed into blocks first-fit-decreasing (parts of one level share no
//!    vertex, so their sizes add), which fills blocks even when parts come out small.
//!
//! With [`BlockMethod::Parts`], when every worker's boundary fits half a block — the common
//! case of many workers — the same two steps run on the *worker parts* instead of on vertices ([`MAX_PARTS_FOR_GROUPING`]
//! parts at most): METIS groups whole parts on the small part graph (weights: boundary vertices
//! per part, cross edges per part pair) so that each group fills a block, the edges inside a
//! group form its block, and the edges between groups are finished by pair grouping of parts.
//! Worker parts are METIS clusters already, so this keeps locality at the cost of a few passes
//! over the edges instead of full-size METIS runs on the boundary graph.
//!
//! On dense, skewed graphs a k-way cut keeps most edges between parts, and repeating it would
//! take dozens of METIS runs. So once a level places less than [`MIN_LEVEL_SHARE`] of its
//! edges, or after [`MAX_METIS_LEVELS`] levels, the rest is finished in one step: METIS groups
//! the remaining vertices into groups of at most half a block, and the edges between each pair of
//! groups (or inside one group) form a block. Every pair block fits by construction, so the
//! partitioning always ends, with at most `MAX_METIS_LEVELS + 1` levels.

use serde::Serialize;
use switchgnn_datasets::Graph;

use crate::assignment::Assignment;
use crate::error::{PartitionError, PlanCheckError, Result};
use crate::metis_kway::{weighted_kway, MetisCsr, MetisOptions, Weights};
use crate::traffic::{aggregators_per_vertex, AGGREGATOR_BYTES};

/// Levels of repeated k-way cuts before the pair-grouping step finishes the rest.
pub const MAX_METIS_LEVELS: u32 = 4;
/// A level that places less than this share of its edges hands over to pair grouping.
pub const MIN_LEVEL_SHARE: f64 = 0.25;
/// Above this many workers the part graph (dense, parts × parts) is not built.
pub const MAX_PARTS_FOR_GROUPING: u32 = 4096;

/// How blocks are cut.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BlockMethod {
    /// METIS on the boundary graph, vertex by vertex: the least traffic, the most time.
    #[default]
    Vertices,
    /// Group whole worker parts (when each part's boundary fits half a block): a few passes
    /// over the edges instead of full METIS runs, at the cost of more traffic.
    Parts,
}

/// What the block partitioning must respect.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BlockParams {
    /// Aggregator memory of the switch, bytes.
    pub switch_memory: u64,
    /// Feature width exchanged through these blocks.
    pub width: usize,
    /// Target share of capacity per METIS part; the rest absorbs METIS's imbalance.
    pub fill_target: f64,
    /// METIS options of the block cuts.
    pub metis: MetisOptions,
    /// How blocks are cut.
    pub method: BlockMethod,
    /// Most switch table entries a block may need: its (vertex, aggregator) pairs (twice its
    /// edges) plus its destinations. A block above it is cut into runs of its edges.
    pub table_entries: Option<u64>,
}

impl BlockParams {
    /// Aggregators one destination of width [`BlockParams::width`] takes.
    pub fn aggregators_per_vertex(&self) -> u64 {
        aggregators_per_vertex(self.width)
    }

    /// Destination vertices one block may hold.
    pub fn capacity_vertices(&self) -> u64 {
        self.switch_memory / AGGREGATOR_BYTES / self.aggregators_per_vertex()
    }
}

/// One block: cross-worker edges, each once as `(u, v)` with `u < v`, sorted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Block {
    /// The level that placed it (1 = the first METIS split).
    pub level: u32,
    /// The block's cross-worker edges.
    pub edges: Vec<(u32, u32)>,
}

impl Block {
    /// Endpoints of the block's edges, sorted: its senders and, equally, its destinations.
    pub fn vertices(&self) -> Vec<u32> {
        let mut v: Vec<u32> = self.edges.iter().flat_map(|&(a, b)| [a, b]).collect();
        v.sort_unstable();
        v.dedup();
        v
    }
}

/// The blocks of one feature width.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Blocks {
    /// What the blocks were cut for.
    pub params: BlockParams,
    /// Every cross-worker edge lies in exactly one of them.
    pub blocks: Vec<Block>,
    /// Deepest level of the multi-level cut (1 when one split sufficed).
    pub levels: u32,
}

/// How well blocks use the aggregator memory.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Fill {
    /// Blocks.
    pub blocks: usize,
    /// Destinations over capacity, averaged over blocks.
    pub mean: f64,
    /// The least-filled block's destinations over capacity.
    pub min: f64,
    /// Blocks per level.
    pub per_level: Vec<usize>,
    /// Sum over blocks of their endpoints (each sends once and receives once per block).
    pub vertex_slots: u64,
}

/// Table entries a block needs on the switch: a pass entry per (vertex, aggregator) pair, two
/// per edge, and a slot entry per destination.
pub fn table_entries(edges: usize, vertices: usize) -> u64 {
    2 * edges as u64 + vertices as u64
}

/// Cut every block whose table entries exceed `limit` into runs of its sorted edges, each
/// within the limit. A run's vertices are a subset of its block's, so it still fits the
/// aggregator memory; edges sorted by their first endpoint keep a vertex's edges together.
fn split_for_table(blocks: Vec<Block>, limit: u64) -> Result<Vec<Block>> {
    if limit < table_entries(1, 2) {
        return Err(PartitionError::Usage(format!(
            "a table of {limit} entries cannot hold one edge (it needs {})",
            table_entries(1, 2)
        )));
    }
    let mut out = Vec::with_capacity(blocks.len());
    let mut ids = std::collections::HashSet::new();
    for block in blocks {
        if table_entries(block.edges.len(), block.vertices().len()) <= limit {
            out.push(block);
            continue;
        }
        let mut run: Edges = Vec::new();
        ids.clear();
        for &(u, v) in &block.edges {
            let new = [u, v].iter().filter(|x| !ids.contains(*x)).count();
            if table_entries(run.len() + 1, ids.len() + new) > limit {
                out.push(Block {
                    level: block.level,
                    edges: std::mem::take(&mut run),
                });
                ids.clear();
            }
            ids.insert(u);
            ids.insert(v);
            run.push((u, v));
        }
        out.push(Block {
            level: block.level,
            edges: run,
        });
    }
    Ok(out)
}

impl Blocks {
    /// Partition the cross-worker edges of `graph` under `assignment` into blocks.
    pub fn build(graph: &Graph, assignment: &Assignment, params: &BlockParams) -> Result<Blocks> {
        let capacity = params.capacity_vertices();
        // Counted first so that the list is allocated once at its size: on a graph cut into
        // many workers it is nearly as large as the graph's own adjacency.
        let cross = |&(u, v): &(u32, u32)| assignment.part(u) != assignment.part(v);
        let mut pending: Edges = Vec::with_capacity(graph.edges().filter(cross).count());
        pending.extend(graph.edges().filter(cross));
        if capacity < 2 && !pending.is_empty() {
            return Err(PartitionError::Usage(format!(
                "{} bytes of switch memory hold {} aggregators; one edge of width {} needs {}",
                params.switch_memory,
                params.switch_memory / AGGREGATOR_BYTES,
                params.width,
                2 * params.aggregators_per_vertex()
            )));
        }
        let mut blocks = Vec::new();
        let mut level = 0;
        let mut scratch = LocalIds::new(graph.num_vertices());
        let push = |placed: Vec<Edges>, level: u32, blocks: &mut Vec<Block>| {
            blocks.extend(placed.into_iter().map(|mut edges| {
                edges.sort_unstable();
                Block { level, edges }
            }));
        };
        let parts = match params.method {
            BlockMethod::Parts => by_parts(&pending, assignment, capacity, params, &mut scratch)?,
            BlockMethod::Vertices => None,
        };
        if let Some(levels) = parts {
            for (l, placed) in levels {
                tracing::debug!(level = l, blocks = placed.len(), "blocks from worker parts");
                push(placed, l, &mut blocks);
                level = l;
            }
            pending.clear();
        }
        // METIS levels while they place enough edges, then pair grouping for the rest.
        while !pending.is_empty() && level < MAX_METIS_LEVELS {
            level += 1;
            let before = pending.len();
            let (placed, rest) = split_level(
                std::mem::take(&mut pending),
                capacity,
                params,
                &mut scratch,
                level,
            )?;
            let share = 1.0 - rest.len() as f64 / before as f64;
            tracing::debug!(
                level,
                blocks = placed.len(),
                pending = rest.len(),
                share,
                "block level"
            );
            push(placed, level, &mut blocks);
            pending = rest;
            if share < MIN_LEVEL_SHARE {
                break;
            }
        }
        if !pending.is_empty() {
            level += 1;
            let placed = pair_blocks(
                std::mem::take(&mut pending),
                capacity,
                params,
                &mut scratch,
                level,
            )?;
            tracing::debug!(
                level,
                blocks = placed.len(),
                "pair grouping finished the rest"
            );
            push(placed, level, &mut blocks);
        }
        if let Some(limit) = params.table_entries {
            blocks = split_for_table(blocks, limit)?;
        }
        Ok(Blocks {
            params: params.clone(),
            blocks,
            levels: level,
        })
    }

    /// How full the blocks are, against [`BlockParams::capacity_vertices`].
    pub fn fill(&self) -> Fill {
        let capacity = self.params.capacity_vertices().max(1) as f64;
        let sizes: Vec<u64> = self
            .blocks
            .iter()
            .map(|b| b.vertices().len() as u64)
            .collect();
        let fills: Vec<f64> = sizes.iter().map(|&s| s as f64 / capacity).collect();
        let mut per_level = vec![0usize; self.levels as usize];
        for b in &self.blocks {
            per_level[b.level as usize - 1] += 1;
        }
        Fill {
            blocks: self.blocks.len(),
            mean: if fills.is_empty() {
                0.0
            } else {
                fills.iter().sum::<f64>() / fills.len() as f64
            },
            min: fills.iter().copied().fold(f64::INFINITY, f64::min).min(1.0),
            per_level,
            vertex_slots: sizes.iter().sum(),
        }
    }

    /// Check the invariants: every cross-worker edge in exactly one block, no other edge, and
    /// every block within capacity. Returns what is wrong.
    pub fn check(&self, graph: &Graph, assignment: &Assignment) -> Result<(), PlanCheckError> {
        let capacity = self.params.capacity_vertices();
        let mut all: Vec<(u32, u32)> = Vec::new();
        for (i, b) in self.blocks.iter().enumerate() {
            let size = b.vertices().len() as u64;
            if size > capacity {
                return Err(PlanCheckError::OverCapacity {
                    block: i,
                    size,
                    capacity,
                });
            }
            let entries = table_entries(b.edges.len(), size as usize);
            if let Some(limit) = self.params.table_entries.filter(|&l| entries > l) {
                return Err(PlanCheckError::TooManyEntries {
                    block: i,
                    entries,
                    limit,
                });
            }
            all.extend_from_slice(&b.edges);
        }
        all.sort_unstable();
        if let Some(w) = all.windows(2).find(|w| w[0] == w[1]) {
            return Err(PlanCheckError::EdgeTwice(w[0]));
        }
        let mut expected: Vec<(u32, u32)> = graph
            .edges()
            .filter(|&(u, v)| assignment.part(u) != assignment.part(v))
            .collect();
        expected.sort_unstable();
        if all != expected {
            return Err(PlanCheckError::EdgesDiffer {
                held: all.len(),
                expected: expected.len(),
                missing: expected
                    .iter()
                    .find(|e| all.binary_search(e).is_err())
                    .copied(),
                extra: all
                    .iter()
                    .find(|e| expected.binary_search(e).is_err())
                    .copied(),
            });
        }
        Ok(())
    }
}

/// Reusable map from global vertex ids to compact ids of one level's graph.
struct LocalIds {
    local: Vec<u32>,
}

impl LocalIds {
    fn new(n: usize) -> LocalIds {
        LocalIds {
            local: vec![u32::MAX; n],
        }
    }

    /// The graph of `edges` on compact ids, in METIS's index type, with the global id of each
    /// compact one (sorted, so compact order is global order). `edges` is consumed: the METIS
    /// graph holds the same edges and replaces the list instead of sitting beside it.
    fn metis_graph(&mut self, edges: Edges, what: &str) -> Result<(Vec<u32>, MetisCsr)> {
        // Mark the endpoints, then number them in global order: a scan of the vertices costs
        // less memory than a sorted copy of every endpoint.
        for &(a, b) in &edges {
            self.local[a as usize] = 0;
            self.local[b as usize] = 0;
        }
        let ids: Vec<u32> = (0..self.local.len() as u32)
            .filter(|&v| self.local[v as usize] != u32::MAX)
            .collect();
        for (i, &g) in ids.iter().enumerate() {
            self.local[g as usize] = i as u32;
        }
        let local = &self.local;
        let compact = edges
            .iter()
            .map(|&(a, b)| (local[a as usize], local[b as usize]));
        let graph = MetisCsr::from_edges(ids.len(), compact, 2 * edges.len(), what);
        self.release(&ids);
        Ok((ids, graph?))
    }

    fn release(&mut self, ids: &[u32]) {
        for &g in ids {
            self.local[g as usize] = u32::MAX;
        }
    }
}

/// Edges as `(u, v)` pairs with `u < v`.
type Edges = Vec<(u32, u32)>;
/// A level number and the edge sets of the blocks it placed.
type LevelBlocks = (u32, Vec<Edges>);

/// One level: returns the edge sets of the packed blocks and the edges left for the next level.
fn split_level(
    pending: Edges,
    capacity: u64,
    params: &BlockParams,
    scratch: &mut LocalIds,
    level: u32,
) -> Result<(Vec<Edges>, Edges)> {
    let edges = pending.len();
    let (ids, graph) = scratch.metis_graph(pending, &format!("block level {level}"))?;
    let n = ids.len() as u64;
    if n <= capacity {
        let all = graph
            .edges()
            .map(|(a, b)| (ids[a], ids[b]))
            .collect::<Edges>();
        return Ok((vec![all], Vec::new()));
    }
    let k = (n as f64 / (capacity as f64 * params.fill_target)).ceil() as u32;
    let what = format!("block level {level} ({n} vertices, {edges} edges, {k} parts)");
    let part = weighted_kway(&graph, None, k.max(2), &params.metis, &what)?;

    // Internal degree per vertex, to keep the best-connected vertices of an oversized part.
    let mut internal_degree = vec![0u64; ids.len()];
    for (a, b) in graph.edges() {
        if part[a] == part[b] {
            internal_degree[a] += 1;
            internal_degree[b] += 1;
        }
    }
    let parts = k.max(2) as usize;
    let mut members: Vec<Vec<usize>> = vec![Vec::new(); parts];
    for (i, &p) in part.iter().enumerate() {
        if internal_degree[i] > 0 {
            members[p as usize].push(i);
        }
    }
    let mut evicted = vec![false; ids.len()];
    for m in &mut members {
        if m.len() as u64 > capacity {
            m.sort_by_key(|&i| std::cmp::Reverse(internal_degree[i]));
            for &i in &m[capacity as usize..] {
                evicted[i] = true;
            }
            m.truncate(capacity as usize);
        }
    }
    // Counted first, then filled, so each list is allocated once at its size.
    let stays = |a: usize, b: usize| part[a] == part[b] && !evicted[a] && !evicted[b];
    let mut inside_len = vec![0usize; parts];
    let mut rest_len = 0;
    for (a, b) in graph.edges() {
        if stays(a, b) {
            inside_len[part[a] as usize] += 1;
        } else {
            rest_len += 1;
        }
    }
    let mut inside: Vec<Edges> = inside_len.into_iter().map(Vec::with_capacity).collect();
    let mut rest = Vec::with_capacity(rest_len);
    for (a, b) in graph.edges() {
        let edge = (ids[a], ids[b]);
        if stays(a, b) {
            inside[part[a] as usize].push(edge);
        } else {
            rest.push(edge);
        }
    }
    let items: Vec<(u64, Vec<(u32, u32)>)> = inside
        .into_iter()
        .filter(|e| !e.is_empty())
        .map(|edges| (endpoint_count(&edges), edges))
        .collect();
    Ok((first_fit_decreasing(items, capacity), rest))
}

fn endpoint_count(edges: &[(u32, u32)]) -> u64 {
    let mut v: Vec<u32> = edges.iter().flat_map(|&(a, b)| [a, b]).collect();
    v.sort_unstable();
    v.dedup();
    v.len() as u64
}

/// Pack vertex-disjoint items into as few blocks as first-fit-decreasing finds.
fn first_fit_decreasing(
    mut items: Vec<(u64, Vec<(u32, u32)>)>,
    capacity: u64,
) -> Vec<Vec<(u32, u32)>> {
    items.sort_by_key(|(size, _)| std::cmp::Reverse(*size));
    let mut bins: Vec<(u64, Vec<(u32, u32)>)> = Vec::new();
    for (size, edges) in items {
        match bins.iter_mut().find(|(used, _)| used + size <= capacity) {
            Some((used, bin)) => {
                *used += size;
                bin.extend(edges);
            }
            None => bins.push((size, edges)),
        }
    }
    bins.into_iter().map(|(_, edges)| edges).collect()
}

/// Finish in one step: group the endpoints into groups of at most `capacity / 2` vertices
/// (METIS keeps neighbours together), then the edges between groups `i <= j` form block
/// `(i, j)`, which holds at most `capacity` vertices. Pair blocks are then packed
/// first-fit-decreasing, counting their sizes as if disjoint (safe: shared vertices only make
/// a bin emptier than counted).
fn pair_blocks(
    pending: Edges,
    capacity: u64,
    params: &BlockParams,
    scratch: &mut LocalIds,
    level: u32,
) -> Result<Vec<Edges>> {
    let (ids, graph) = scratch.metis_graph(pending, &format!("pair grouping at level {level}"))?;
    let half = (capacity / 2).max(1);
    let n = ids.len() as u64;
    let target = ((half as f64 * params.fill_target).floor() as u64).max(1);
    let k = n.div_ceil(target);
    let group: Vec<u32> = if half == 1 {
        (0..n as u32).collect()
    } else {
        let what = format!("pair grouping at level {level} ({n} vertices, {k} groups)");
        let part = weighted_kway(&graph, None, k as u32, &params.metis, &what)?;
        // METIS may overfill a group; split any such group into chunks of `half`.
        let mut members: Vec<Vec<usize>> = vec![Vec::new(); k as usize];
        for (i, &p) in part.iter().enumerate() {
            members[p as usize].push(i);
        }
        let mut group = vec![0u32; ids.len()];
        let mut next = 0u32;
        for m in members {
            for chunk in m.chunks(half as usize) {
                for &i in chunk {
                    group[i] = next;
                }
                next += 1;
            }
        }
        group
    };
    let mut by_pair: std::collections::BTreeMap<(u32, u32), Edges> = Default::default();
    for (a, b) in graph.edges() {
        let (ga, gb) = (group[a], group[b]);
        by_pair
            .entry((ga.min(gb), ga.max(gb)))
            .or_default()
            .push((ids[a], ids[b]));
    }
    drop(graph);
    let items = by_pair
        .into_values()
        .map(|edges| (endpoint_count(&edges), edges))
        .collect();
    Ok(first_fit_decreasing(items, capacity))
}

/// Blocks built from whole worker parts (see the module docs): `None` when some part's boundary
/// does not fit half a block or there are too many parts. Returns the placed blocks by level.
fn by_parts(
    pending: &[(u32, u32)],
    assignment: &Assignment,
    capacity: u64,
    params: &BlockParams,
    scratch: &mut LocalIds,
) -> Result<Option<Vec<LevelBlocks>>> {
    let m = assignment.num_parts();
    if !(2..=MAX_PARTS_FOR_GROUPING).contains(&m) || pending.is_empty() {
        return Ok(None);
    }
    let half = capacity / 2;
    let sizes = boundary_per_part(pending, assignment, scratch);
    if sizes.iter().any(|&s| s > half) {
        return Ok(None);
    }
    let part = |v: u32| assignment.part(v) as usize;

    // Level 1: groups of parts that fill a block; edges inside a group are its block.
    let target = (capacity as f64 * params.fill_target).max(1.0);
    let k = (sizes.iter().sum::<u64>() as f64 / target).ceil().max(1.0) as u32;
    let group = group_parts(
        pending,
        assignment,
        &sizes,
        k,
        params,
        "grouping worker parts into blocks",
    )?;
    let mut group_size = vec![0u64; k as usize];
    for (p, &g) in group.iter().enumerate() {
        group_size[g as usize] += sizes[p];
    }
    let mut inside: Vec<Edges> = vec![Vec::new(); k as usize];
    let mut rest = Vec::new();
    for &(a, b) in pending {
        let (ga, gb) = (group[part(a)], group[part(b)]);
        if ga == gb && group_size[ga as usize] <= capacity {
            inside[ga as usize].push((a, b));
        } else {
            rest.push((a, b));
        }
    }
    let items = inside
        .into_iter()
        .filter(|e| !e.is_empty())
        .map(|edges| (endpoint_count(&edges), edges))
        .collect();
    let mut levels = vec![(1, first_fit_decreasing(items, capacity))];
    if rest.is_empty() {
        return Ok(Some(levels));
    }

    // Level 2: groups of parts of at most half a block; every pair of groups is a block.
    let sizes = boundary_per_part(&rest, assignment, scratch);
    let target = (half as f64 * params.fill_target).max(1.0);
    let k = (sizes.iter().sum::<u64>() as f64 / target).ceil().max(1.0) as u32;
    let metis_group = group_parts(&rest, assignment, &sizes, k, params, "pairing worker parts")?;
    // METIS may overfill a group: split such groups, in part order, at half a block.
    let mut group = vec![0u32; m as usize];
    let mut next = 0u32;
    for g in 0..k {
        let mut used = 0u64;
        let mut opened = false;
        for p in (0..m as usize).filter(|&p| metis_group[p] == g) {
            if opened && used + sizes[p] > half {
                next += 1;
                used = 0;
            }
            group[p] = next;
            used += sizes[p];
            opened = true;
        }
        if opened {
            next += 1;
        }
    }
    let mut by_pair: std::collections::BTreeMap<(u32, u32), Edges> = Default::default();
    for &(a, b) in &rest {
        let (ga, gb) = (group[part(a)], group[part(b)]);
        by_pair
            .entry((ga.min(gb), ga.max(gb)))
            .or_default()
            .push((a, b));
    }
    let items = by_pair
        .into_values()
        .map(|edges| (endpoint_count(&edges), edges))
        .collect();
    levels.push((2, first_fit_decreasing(items, capacity)));
    Ok(Some(levels))
}

/// Distinct endpoints of `edges` in each worker part.
fn boundary_per_part(
    edges: &[(u32, u32)],
    assignment: &Assignment,
    scratch: &mut LocalIds,
) -> Vec<u64> {
    let mut sizes = vec![0u64; assignment.num_parts() as usize];
    let mut touched = Vec::new();
    for &(a, b) in edges {
        for v in [a, b] {
            if scratch.local[v as usize] == u32::MAX {
                scratch.local[v as usize] = 0;
                touched.push(v);
                sizes[assignment.part(v) as usize] += 1;
            }
        }
    }
    scratch.release(&touched);
    sizes
}

/// METIS on the part graph: vertex weight = boundary vertices of a part, edge weight = edges
/// between two parts. Returns a group id per part.
fn group_parts(
    edges: &[(u32, u32)],
    assignment: &Assignment,
    sizes: &[u64],
    k: u32,
    params: &BlockParams,
    what: &str,
) -> Result<Vec<u32>> {
    let m = assignment.num_parts() as usize;
    if k <= 1 {
        return Ok(vec![0; m]);
    }
    let mut weight = vec![0i64; m * m];
    for &(a, b) in edges {
        let (p, q) = (assignment.part(a) as usize, assignment.part(b) as usize);
        weight[p * m + q] += 1;
        weight[q * m + p] += 1;
    }
    let mut offsets = vec![0u64];
    let mut neighbors = Vec::new();
    let mut edge_weights = Vec::new();
    for p in 0..m {
        for q in 0..m {
            if p != q && weight[p * m + q] > 0 {
                neighbors.push(q as u32);
                edge_weights.push(weight[p * m + q]);
            }
        }
        offsets.push(neighbors.len() as u64);
    }
    let what = format!("{what} ({m} parts, {k} groups)");
    let graph = MetisCsr::from_csr(&offsets, &neighbors, &what)?;
    let vertex: Vec<i64> = sizes.iter().map(|&s| s as i64).collect();
    let weights = Weights {
        vertex: &vertex,
        edge: &edge_weights,
    };
    weighted_kway(&graph, Some(weights), k, &params.metis, &what)
}
