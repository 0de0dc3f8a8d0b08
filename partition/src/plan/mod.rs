//! The plan: everything the switch and the workers need to know before the first packet,
//! computed once offline and stored as a directory.
//!
//! | file | content |
//! |---|---|
//! | `manifest.json` | format version, the spec (dataset, workers, partitioner, switch memory, feature widths), dataset fingerprint, boundary figures, block fill, per-layer traffic, the size and xxh3 checksum of every other file, and its own xxh3 (`checksum`, of the manifest written without it) |
//! | `assignment.bin` | magic `SGNNASGN`, version u32, reserved u32, vertex count u64, then one u32 worker id per vertex |
//! | `blocks-a<k>.bin` | blocks for widths needing `k` aggregators per vertex: magic `SGNNBLKS`, version u32, reserved u32, block count u64, then per block level u32, reserved u32, edge count u64 and the edges as u32 pairs `(u, v)`, `u < v` |
//! | `switch-a<k>.bin` | the switch's tables of those blocks: magic `SGNNSWCH`, version u32, reserved u32, block count u64, then per block a [`BlockTable`]: row count `n` u64, vertices `n`×u32, owner workers `n`×u32, expected contributions `n`×u32, row offsets `(n+1)`×u64, slot count u64, aggregator slots ×u32 |
//! | `orders-a<k>.bin` | the send order of every block (magic `SGNNORDR`): per block a vertex count u64 and the vertices as u32 in send order |
//! | `worker-<r>-a<k>.bin` | worker `r`'s rows of the same tables (magic `SGNNWORK`), in its send order: what it sends in each block, into which slots, and the contributions it expects back |
//!
//! All integers little-endian. Every file is written atomically and the manifest last, so a
//! plan directory is either the old plan or the complete new one. Loading checks every
//! checksum and every header and names the file that fails.
//!
//! The graph is symmetric, so the backward pass (gradients over the transposed edges) uses the
//! same blocks as the forward pass with the roles of sender and destination swapped; one
//! set of blocks per width serves both directions.

mod encoding;
mod manifest;
mod write;

use std::collections::BTreeMap;
use std::path::Path;

use switchgnn_datasets::{Dataset, Graph};
use xxhash_rust::xxh3::xxh3_64;

use crate::assignment::Assignment;
use crate::blocks::{BlockParams, Blocks, Fill};
use crate::boundary::Boundary;
use crate::error::{PartitionError, PlanCheckError, Result};
use crate::traffic::{aggregators_per_vertex, reduction, row_bytes, Traffic};
pub use encoding::{blocks_file, orders_file, switch_file, worker_file};
use encoding::{
    check_orders, decode_assignment, decode_blocks, decode_orders, io, malformed, ASSIGNMENT,
    MANIFEST,
};
use manifest::check_exchange;
pub use manifest::{
    BlockSetInfo, BoundarySummary, DatasetInfo, ExchangeChoice, FileSum, LayerChoice, LayerTraffic,
    Manifest, OrderInfo, PlanSpec, PlannedOn, FORMAT_VERSION,
};

/// A plan in memory.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// What the plan is for and what it holds.
    pub manifest: Manifest,
    /// Each vertex's worker.
    pub assignment: Assignment,
    /// One per distinct aggregators-per-vertex, in the order of `manifest.block_sets`.
    pub block_sets: Vec<Blocks>,
    /// Per block set, per block: the send order (global vertex ids), once set.
    pub orders: Option<Vec<Vec<Vec<u32>>>>,
}

/// Read and check a plan's manifest and assignment.
fn read_head(dir: &Path) -> Result<(Manifest, Assignment)> {
    let manifest_path = dir.join(MANIFEST);
    let text = std::fs::read(&manifest_path).map_err(|e| io(&manifest_path, e))?;
    let mut manifest: Manifest = serde_json::from_slice(&text)
        .map_err(|e| malformed(&manifest_path, format!("line {}", e.line()), e.to_string()))?;
    if manifest.format_version != FORMAT_VERSION {
        return Err(malformed(
            &manifest_path,
            "format_version",
            format!(
                "plan format {}, this build reads {FORMAT_VERSION}; prepare the plan again",
                manifest.format_version
            ),
        ));
    }
    manifest
        .unseal()
        .map_err(|why| malformed(&manifest_path, "checksum", why.to_string()))?;
    if let Some(choice) = &manifest.exchange {
        check_exchange(choice, manifest.spec.feature_dims.len())
            .map_err(|why| malformed(&manifest_path, "exchange", why.to_string()))?;
    }
    let assignment = decode_assignment(
        &dir.join(ASSIGNMENT),
        &load_checked(dir, &manifest, ASSIGNMENT)?,
        manifest.spec.workers,
    )?;
    Ok((manifest, assignment))
}

/// The bytes of file `name` of the plan in `dir`, checked against the manifest's size and
/// checksum.
fn load_checked(dir: &Path, manifest: &Manifest, name: &str) -> Result<Vec<u8>> {
    let path = dir.join(name);
    let manifest_path = dir.join(MANIFEST);
    let sum = manifest
        .files
        .get(name)
        .ok_or_else(|| malformed(&manifest_path, "files", format!("no checksum for {name}")))?;
    let bytes = std::fs::read(&path).map_err(|e| io(&path, e))?;
    if bytes.len() as u64 != sum.bytes || xxh3_64(&bytes) != sum.xxh3 {
        return Err(malformed(
            &path,
            "file",
            "size or checksum differs from the manifest (changed or truncated)",
        ));
    }
    Ok(bytes)
}

/// Fingerprint of a graph's CSR arrays.
pub fn graph_fingerprint(graph: &Graph) -> u64 {
    let a = xxh3_64(bytemuck::cast_slice(graph.offsets()));
    let b = xxh3_64(bytemuck::cast_slice(graph.neighbor_ids()));
    xxh3_64(&[a.to_le_bytes(), b.to_le_bytes()].concat())
}

impl Plan {
    /// Compute a plan. `stage` is told when each stage starts (for progress display).
    pub fn prepare(dataset: &Dataset, spec: &PlanSpec, stage: &dyn Fn(&str)) -> Result<Plan> {
        if spec.feature_dims.is_empty() || spec.feature_dims.contains(&0) {
            return Err(PartitionError::Usage(
                "feature dims must list one positive width per layer".into(),
            ));
        }
        if !(spec.fill_target > 0.0 && spec.fill_target <= 1.0) {
            return Err(PartitionError::Usage(format!(
                "fill target {} must lie in (0, 1]",
                spec.fill_target
            )));
        }
        stage("worker partition");
        let assignment = Assignment::compute(&dataset.graph, spec.workers, &spec.partitioner)?;
        Plan::prepare_with(dataset, spec, assignment, stage)
    }

    /// [`Plan::prepare`] on a worker partition already computed (by the same `spec`): several
    /// memories or widths then share one METIS run.
    pub fn prepare_with(
        dataset: &Dataset,
        spec: &PlanSpec,
        assignment: Assignment,
        stage: &dyn Fn(&str),
    ) -> Result<Plan> {
        let graph = &dataset.graph;
        if assignment.parts().len() != graph.num_vertices()
            || assignment.num_parts() != spec.workers
        {
            return Err(PartitionError::Usage(format!(
                "the worker partition has {} vertices in {} parts; the plan needs {} in {}",
                assignment.parts().len(),
                assignment.num_parts(),
                graph.num_vertices(),
                spec.workers
            )));
        }
        stage("boundary analysis");
        let boundary = Boundary::analyze(graph, &assignment);

        // One block set per distinct aggregator count; it serves every width that needs it.
        let mut groups: BTreeMap<u64, usize> = BTreeMap::new();
        for &w in &spec.feature_dims {
            let widest = groups.entry(aggregators_per_vertex(w)).or_insert(w);
            *widest = (*widest).max(w);
        }
        let mut block_sets = Vec::new();
        for (&apv, &width) in &groups {
            stage(&format!(
                "blocks for width {width} ({apv} aggregators per vertex)"
            ));
            let params = BlockParams {
                switch_memory: spec.switch_memory,
                width,
                fill_target: spec.fill_target,
                metis: spec.block_metis.clone(),
                method: spec.block_method,
                table_entries: spec.table_entries,
            };
            block_sets.push(Blocks::build(graph, &assignment, &params)?);
        }
        let infos: Vec<BlockSetInfo> = block_sets
            .iter()
            .map(|b| {
                let fill: Fill = b.fill();
                let apv = b.params.aggregators_per_vertex();
                BlockSetInfo {
                    aggregators_per_vertex: apv,
                    width: b.params.width,
                    capacity_vertices: b.params.capacity_vertices(),
                    levels: b.levels,
                    blocks: fill.blocks,
                    mean_fill: fill.mean,
                    min_fill: fill.min,
                    vertex_slots: fill.vertex_slots,
                    file: blocks_file(apv),
                }
            })
            .collect();
        let traffic = spec
            .feature_dims
            .iter()
            .enumerate()
            .map(|(layer, &width)| {
                let t = Traffic::estimate(&boundary, width);
                let set = infos
                    .iter()
                    .find(|s| s.aggregators_per_vertex == aggregators_per_vertex(width))
                    .expect("a block set per width");
                let plan_bytes = 2 * row_bytes(set.vertex_slots, width);
                LayerTraffic {
                    layer,
                    width,
                    host_bytes: t.host_bytes,
                    ideal_bytes: t.ideal_bytes(),
                    plan_bytes,
                    ideal_reduction: t.ideal_reduction(),
                    plan_reduction: reduction(plan_bytes, t.host_bytes),
                }
            })
            .collect();
        let manifest = Manifest {
            format_version: FORMAT_VERSION,
            spec: spec.clone(),
            order: None,
            exchange: None,
            dataset: DatasetInfo {
                name: dataset.name.clone(),
                vertices: graph.num_vertices(),
                edges: graph.num_edges(),
                fingerprint: graph_fingerprint(graph),
            },
            boundary: BoundarySummary {
                boundary_vertices: boundary.boundary_vertices,
                cross_edges: boundary.cross_edges,
                total_fanout: boundary.total_fanout,
                mean_fanout: boundary.mean_fanout(),
                largest_component_vertices: boundary.components.largest_vertices,
                imbalance: assignment.imbalance(),
            },
            block_sets: infos,
            traffic,
            files: BTreeMap::new(),
            created_by: concat!("switchgnn ", env!("CARGO_PKG_VERSION")).into(),
            checksum: None,
        };
        Ok(Plan {
            manifest,
            assignment,
            block_sets,
            orders: None,
        })
    }

    /// Attach the send order of every block (per set, per block, global vertex ids). Each must
    /// be a permutation of its block's vertices.
    pub fn set_orders(&mut self, info: OrderInfo, orders: Vec<Vec<Vec<u32>>>) -> Result<()> {
        check_orders(&self.block_sets, &orders)?;
        self.manifest.order = Some(info);
        self.orders = Some(orders);
        Ok(())
    }

    /// Record the exchange kind of each layer (one entry per layer of the spec).
    pub fn set_exchange(&mut self, choice: ExchangeChoice) -> Result<()> {
        check_exchange(&choice, self.manifest.spec.feature_dims.len())?;
        self.manifest.exchange = Some(choice);
        Ok(())
    }

    /// Read a plan directory, checking the manifest version and every file's checksum.
    pub fn read(dir: &Path) -> Result<Plan> {
        let (manifest, assignment) = read_head(dir)?;
        let load = |name: &str| load_checked(dir, &manifest, name);
        let mut block_sets = Vec::new();
        for info in &manifest.block_sets {
            let blocks = decode_blocks(&dir.join(&info.file), &load(&info.file)?)?;
            let levels = blocks.iter().map(|b| b.level).max().unwrap_or(0);
            block_sets.push(Blocks {
                params: BlockParams {
                    switch_memory: manifest.spec.switch_memory,
                    width: info.width,
                    fill_target: manifest.spec.fill_target,
                    metis: manifest.spec.block_metis.clone(),
                    method: manifest.spec.block_method,
                    table_entries: manifest.spec.table_entries,
                },
                blocks,
                levels,
            });
        }
        let orders = match &manifest.order {
            None => None,
            Some(_) => {
                let mut sets = Vec::new();
                for info in &manifest.block_sets {
                    let name = orders_file(info.aggregators_per_vertex);
                    sets.push(decode_orders(&dir.join(&name), &load(&name)?)?);
                }
                check_orders(&block_sets, &sets)
                    .map_err(|e| malformed(&dir.join("orders"), "orders", e.to_string()))?;
                Some(sets)
            }
        };
        Ok(Plan {
            manifest,
            assignment,
            block_sets,
            orders,
        })
    }

    /// The manifest and the assignment only, checked as [`Plan::read`] checks them, with no
    /// block sets and no orders: what a worker that holds its shard and its saved view of the
    /// exchange needs, without the blocks of every worker.
    pub fn read_summary(dir: &Path) -> Result<Plan> {
        let (manifest, assignment) = read_head(dir)?;
        Ok(Plan {
            manifest,
            assignment,
            block_sets: Vec::new(),
            orders: None,
        })
    }

    /// Check the plan against its graph: same fingerprint, every cross-worker edge in exactly
    /// one block of every set, every block within capacity.
    pub fn verify(&self, graph: &Graph) -> Result<(), PlanCheckError> {
        if graph_fingerprint(graph) != self.manifest.dataset.fingerprint {
            return Err(PlanCheckError::OtherGraph);
        }
        if self.assignment.parts().len() != graph.num_vertices() {
            return Err(PlanCheckError::AssignmentShort);
        }
        for (set, info) in self.block_sets.iter().zip(&self.manifest.block_sets) {
            set.check(graph, &self.assignment)
                .map_err(|problem| PlanCheckError::InSet {
                    file: info.file.clone(),
                    problem: Box::new(problem),
                })?;
        }
        Ok(())
    }
}
