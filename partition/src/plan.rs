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

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use switchgnn_datasets::atomic::write_atomically;
use switchgnn_datasets::{Dataset, Graph};
use xxhash_rust::xxh3::{xxh3_64, Xxh3};

use crate::assignment::{Assignment, Method};
use crate::blocks::{Block, BlockMethod, BlockParams, Blocks, Fill};
use crate::boundary::Boundary;
use crate::error::{PartitionError, PlanCheckError, Result};
use crate::metis_kway::MetisOptions;
use crate::tables::{block_table, encode_table};
use crate::traffic::{aggregators_per_vertex, reduction, row_bytes, Traffic};
use crate::BlockTable;
use rayon::prelude::*;

pub const FORMAT_VERSION: u32 = 2;
const MANIFEST: &str = "manifest.json";
const ASSIGNMENT: &str = "assignment.bin";
const ASSIGNMENT_MAGIC: &[u8; 8] = b"SGNNASGN";
const BLOCKS_MAGIC: &[u8; 8] = b"SGNNBLKS";
const SWITCH_MAGIC: &[u8; 8] = b"SGNNSWCH";
const WORKER_MAGIC: &[u8; 8] = b"SGNNWORK";
const ORDERS_MAGIC: &[u8; 8] = b"SGNNORDR";

/// File of the send orders of block set `apv`.
pub fn orders_file(apv: u64) -> String {
    format!("orders-a{apv}.bin")
}

/// File of the blocks of block set `apv`.
pub fn blocks_file(apv: u64) -> String {
    format!("blocks-a{apv}.bin")
}

/// File of the switch tables for block set `apv`.
pub fn switch_file(apv: u64) -> String {
    format!("switch-a{apv}.bin")
}

/// File of worker `rank`'s tables for block set `apv`.
pub fn worker_file(rank: u32, apv: u64) -> String {
    format!("worker-{rank}-a{apv}.bin")
}

/// What to plan for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanSpec {
    /// The dataset argument the plan was made from (a path or `synthetic:...`).
    pub dataset: String,
    pub workers: u32,
    pub partitioner: Method,
    /// Aggregator memory of the switch, bytes.
    pub switch_memory: u64,
    /// Width exchanged at each layer.
    pub feature_dims: Vec<usize>,
    /// Target share of capacity per METIS part in block partitioning.
    pub fill_target: f64,
    /// METIS options of the block partitioning.
    pub block_metis: MetisOptions,
    /// How blocks are cut.
    #[serde(default)]
    pub block_method: BlockMethod,
    /// Table entries one block may need on the switch ((vertex, aggregator) pairs plus
    /// destinations); `None`: no limit besides the aggregator memory.
    #[serde(default)]
    pub table_entries: Option<u64>,
}

impl PlanSpec {
    /// A spec with the defaults: METIS worker partition, 100 MB of aggregators (the paper's
    /// largest switch memory), blocks filled to 90 %, METIS blocks, no table-entry limit.
    /// The setters below change one field each.
    pub fn new(dataset: impl Into<String>, workers: u32, feature_dims: Vec<usize>) -> PlanSpec {
        PlanSpec {
            dataset: dataset.into(),
            workers,
            partitioner: Method::Metis(MetisOptions::default()),
            switch_memory: 100_000_000,
            feature_dims,
            fill_target: 0.9,
            block_metis: MetisOptions::default(),
            block_method: BlockMethod::default(),
            table_entries: None,
        }
    }

    pub fn switch_memory(mut self, bytes: u64) -> PlanSpec {
        self.switch_memory = bytes;
        self
    }

    pub fn partitioner(mut self, method: Method) -> PlanSpec {
        self.partitioner = method;
        self
    }

    pub fn fill_target(mut self, share: f64) -> PlanSpec {
        self.fill_target = share;
        self
    }

    pub fn block_metis(mut self, options: MetisOptions) -> PlanSpec {
        self.block_metis = options;
        self
    }

    pub fn block_method(mut self, method: BlockMethod) -> PlanSpec {
        self.block_method = method;
        self
    }

    pub fn table_entries(mut self, limit: Option<u64>) -> PlanSpec {
        self.table_entries = limit;
        self
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DatasetInfo {
    pub name: String,
    pub vertices: usize,
    pub edges: u64,
    /// xxh3 of the CSR arrays: a plan only applies to the exact graph it was made for.
    pub fingerprint: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BoundarySummary {
    pub boundary_vertices: u64,
    pub cross_edges: u64,
    pub total_fanout: u64,
    pub mean_fanout: f64,
    pub largest_component_vertices: u64,
    pub imbalance: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BlockSetInfo {
    pub aggregators_per_vertex: u64,
    /// The widest layer this set serves.
    pub width: usize,
    pub capacity_vertices: u64,
    pub levels: u32,
    pub blocks: usize,
    pub mean_fill: f64,
    pub min_fill: f64,
    pub vertex_slots: u64,
    pub file: String,
}

/// Payload bytes of one layer, one direction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LayerTraffic {
    pub layer: usize,
    pub width: usize,
    pub host_bytes: u64,
    pub ideal_bytes: u64,
    pub plan_bytes: u64,
    pub ideal_reduction: f64,
    pub plan_reduction: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FileSum {
    pub bytes: u64,
    pub xxh3: u64,
}

/// Which send order the plan's blocks carry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OrderInfo {
    /// The order's name (e.g. `priority-bfs`), as the scheduler calls it.
    pub kind: String,
    pub seed: u64,
}

/// The exchange kind chosen for each layer (`switchgnn prepare --exchange`), with what the
/// choice was based on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExchangeChoice {
    /// `auto` (the least predicted time on `chip`) or the kind the user named.
    pub by: String,
    /// The chip the predictions are for, in words.
    pub chip: String,
    /// One per layer, in layer order.
    pub layers: Vec<LayerChoice>,
    /// The chip and hosts the choice was made for: a hybrid layer's plan is rebuilt for
    /// them by every process of the job (`None`: the default chip for the worker count).
    #[serde(default)]
    pub planned_on: Option<PlannedOn>,
}

/// The chip options and host costs of a choice (`switchgnn_chip::ChipChoice` and
/// `HostCost`, kept as plain values here).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlannedOn {
    /// The chip preset's name.
    pub preset: String,
    pub loopback_ports: u32,
    pub recirculation_ports: Option<u32>,
    pub link_gbps: f64,
    pub host_packet_ns: f64,
    /// The MTU and the packets per acknowledgement of the host-only baseline the kinds were
    /// judged against (`switchgnn_chip::HostFraming`); `None` in plans made before the
    /// baseline was framed so, which judged against one 64-lane chunk per packet.
    #[serde(default)]
    pub host_mtu: Option<u32>,
    #[serde(default)]
    pub host_ack_every: Option<u32>,
}

/// One layer's exchange kind, and the predicted time (seconds) of every kind weighed: the chip
/// model's lower bound, the busiest resource of the chip and the hosts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LayerChoice {
    pub kind: String,
    pub predicted_s: BTreeMap<String, f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub format_version: u32,
    pub spec: PlanSpec,
    /// Send order of every block; absent until [`Plan::set_orders`].
    #[serde(default)]
    pub order: Option<OrderInfo>,
    /// The exchange kind of each layer; absent until [`Plan::set_exchange`].
    #[serde(default)]
    pub exchange: Option<ExchangeChoice>,
    pub dataset: DatasetInfo,
    pub boundary: BoundarySummary,
    pub block_sets: Vec<BlockSetInfo>,
    pub traffic: Vec<LayerTraffic>,
    pub files: BTreeMap<String, FileSum>,
    pub created_by: String,
    /// xxh3 (hex) of this manifest as written without this field: a manifest edited by hand
    /// or damaged fails it, so none of its fields can disagree with what was prepared.
    /// Written last, checked first (after the format version).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checksum: Option<String>,
}

impl Manifest {
    /// The manifest's bytes on disk: pretty JSON with its own checksum (the one in memory
    /// keeps none).
    fn sealed(&self) -> Vec<u8> {
        let mut sealed = Manifest {
            checksum: None,
            ..self.clone()
        };
        let body = serde_json::to_vec_pretty(&sealed).expect("manifest serialises");
        sealed.checksum = Some(format!("{:016x}", xxh3_64(&body)));
        serde_json::to_vec_pretty(&sealed).expect("manifest serialises")
    }

    /// Check the checksum of a manifest read from disk (it is then taken out).
    fn unseal(&mut self) -> std::result::Result<(), String> {
        let Some(stated) = self.checksum.take() else {
            return Err("no checksum of its own: not written by switchgnn prepare".into());
        };
        let body = serde_json::to_vec_pretty(self).expect("manifest serialises");
        let actual = format!("{:016x}", xxh3_64(&body));
        if stated == actual {
            Ok(())
        } else {
            Err(format!(
                "its checksum ({stated}) is not that of its contents ({actual}): edited by hand \
                 or damaged; prepare the plan again"
            ))
        }
    }
}

/// A plan in memory.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub manifest: Manifest,
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
        .map_err(|why| malformed(&manifest_path, "checksum", why))?;
    if let Some(choice) = &manifest.exchange {
        check_exchange(choice, manifest.spec.feature_dims.len())
            .map_err(|why| malformed(&manifest_path, "exchange", why))?;
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
        check_exchange(&choice, self.manifest.spec.feature_dims.len())
            .map_err(PartitionError::Usage)?;
        self.manifest.exchange = Some(choice);
        Ok(())
    }

    /// Write the plan directory; the manifest goes last and records every file's checksum.
    /// Every file streams to disk as it is encoded, so writing holds no second copy of the
    /// plan: only the switch tables of one block set at a time.
    pub fn write(&mut self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
        let mut files = BTreeMap::new();
        let mut put = |name: &str, bytes: Vec<u8>| -> Result<()> {
            let sum = stream_file(dir, name, |w| w.write_all(&bytes))?;
            files.insert(name.to_string(), sum);
            Ok(())
        };
        put(ASSIGNMENT, encode_assignment(&self.assignment))?;
        for (set, info) in self.block_sets.iter().zip(&self.manifest.block_sets) {
            put(&info.file, encode_blocks(&set.blocks))?;
        }
        if let Some(orders) = &self.orders {
            for (set, info) in orders.iter().zip(&self.manifest.block_sets) {
                put(
                    &orders_file(info.aggregators_per_vertex),
                    encode_orders(set),
                )?;
            }
        }
        for s in 0..self.block_sets.len() {
            let tables = self.block_tables(s);
            let sums: Vec<(String, FileSum)> = self
                .table_file_names(s)
                .into_par_iter()
                .map(|(name, of)| {
                    let sum = stream_file(dir, &name, |w| Plan::encode_table_file(&tables, of, w))?;
                    Ok((name, sum))
                })
                .collect::<Result<_>>()?;
            files.extend(sums);
        }
        self.manifest.files = files;
        let json = self.manifest.sealed();
        write_atomically(&dir.join(MANIFEST), |w| w.write_all(&json))?;
        self.remove_stale_files(dir)
    }

    /// Remove plan files of an earlier plan in `dir` that this manifest no longer lists.
    fn remove_stale_files(&self, dir: &Path) -> Result<()> {
        let ours = |name: &str| {
            name.ends_with(".bin")
                && ["blocks-a", "switch-a", "orders-a", "worker-"]
                    .iter()
                    .any(|p| name.starts_with(p))
        };
        for entry in std::fs::read_dir(dir).map_err(|e| io(dir, e))? {
            let entry = entry.map_err(|e| io(dir, e))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if ours(&name) && !self.manifest.files.contains_key(&name) {
                std::fs::remove_file(entry.path()).map_err(|e| io(&entry.path(), e))?;
            }
        }
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

    /// The switch and per-worker table files of every block set, derived from the blocks.
    /// The switch tables of block set `s`, one per block, and each block's rows per worker in
    /// its send order (table row order without orders).
    fn block_tables(&self, s: usize) -> SetTables {
        let workers = self.manifest.spec.workers;
        let orders = self.orders.as_ref().map(|o| &o[s]);
        let (tables, rows) = self.block_sets[s]
            .blocks
            .par_iter()
            .enumerate()
            .map(|(b, block)| {
                let table = block_table(block, &self.assignment);
                let rows = match orders {
                    Some(o) => table.rows_by_worker(&o[b], workers),
                    None => table.rows_by_worker(&table.vertices, workers),
                };
                (table, rows)
            })
            .unzip();
        SetTables { tables, rows }
    }

    /// The table files of block set `s`: the switch's, then each worker's.
    fn table_file_names(&self, s: usize) -> Vec<(String, TableFile)> {
        let apv = self.manifest.block_sets[s].aggregators_per_vertex;
        std::iter::once((switch_file(apv), TableFile::Switch))
            .chain(
                (0..self.manifest.spec.workers)
                    .map(|r| (worker_file(r, apv), TableFile::Worker(r))),
            )
            .collect()
    }

    /// Write one table file of a block set from its switch tables and per-worker rows.
    fn encode_table_file(
        set: &SetTables,
        of: TableFile,
        w: &mut impl Write,
    ) -> std::io::Result<()> {
        let count = set.tables.len() as u64;
        match of {
            TableFile::Switch => {
                w.write_all(&header(SWITCH_MAGIC, count))?;
                for t in &set.tables {
                    encode_table(t, w)?;
                }
            }
            TableFile::Worker(r) => {
                w.write_all(&header(WORKER_MAGIC, count))?;
                for (t, rows) in set.tables.iter().zip(&set.rows) {
                    encode_table(&t.for_worker_rows(r, &rows[r as usize]), w)?;
                }
            }
        }
        Ok(())
    }

    /// Check that the table files in `dir` are exactly what the blocks imply (their checksums
    /// were checked against the manifest first). One file at a time is held in memory.
    pub fn verify_tables(&self, dir: &Path) -> Result<(), PlanCheckError> {
        for s in 0..self.block_sets.len() {
            let tables = self.block_tables(s);
            self.table_file_names(s)
                .into_par_iter()
                .try_for_each(|(name, of)| {
                    let sum = self
                        .manifest
                        .files
                        .get(&name)
                        .ok_or_else(|| PlanCheckError::NotInManifest(name.clone()))?;
                    let path = dir.join(&name);
                    let bytes =
                        std::fs::read(&path).map_err(|source| PlanCheckError::Unreadable {
                            path: path.clone(),
                            source,
                        })?;
                    if bytes.len() as u64 != sum.bytes || xxh3_64(&bytes) != sum.xxh3 {
                        return Err(PlanCheckError::Checksum(path));
                    }
                    let mut expected = Vec::with_capacity(bytes.len());
                    Plan::encode_table_file(&tables, of, &mut expected)
                        .expect("writing to memory cannot fail");
                    if bytes != expected {
                        return Err(PlanCheckError::TablesDisagree(path));
                    }
                    Ok(())
                })?;
        }
        Ok(())
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

fn io(path: &Path, source: std::io::Error) -> PartitionError {
    PartitionError::io(path, source)
}

fn malformed(path: &Path, record: impl Into<String>, reason: impl Into<String>) -> PartitionError {
    PartitionError::malformed(path, record, reason)
}

/// A block set's switch tables and, per block, each worker's rows in send order.
struct SetTables {
    tables: Vec<BlockTable>,
    rows: Vec<Vec<Vec<u32>>>,
}

/// Which table file of a block set.
#[derive(Debug, Clone, Copy)]
enum TableFile {
    Switch,
    Worker(u32),
}

/// Write `dir/name` atomically through `fill`, summing the bytes on their way to disk.
fn stream_file(
    dir: &Path,
    name: &str,
    fill: impl FnOnce(&mut Summing<'_>) -> std::io::Result<()>,
) -> Result<FileSum> {
    let mut sum = FileSum { bytes: 0, xxh3: 0 };
    write_atomically(&dir.join(name), |w| {
        let mut summing = Summing {
            inner: w,
            hasher: Xxh3::new(),
            bytes: 0,
        };
        fill(&mut summing)?;
        sum = FileSum {
            bytes: summing.bytes,
            xxh3: summing.hasher.digest(),
        };
        Ok(())
    })?;
    Ok(sum)
}

/// A writer that passes bytes on and keeps their count and checksum.
struct Summing<'a> {
    inner: &'a mut dyn Write,
    hasher: Xxh3,
    bytes: u64,
}

impl Write for Summing<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

fn header(magic: &[u8; 8], count: u64) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(magic);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(&count.to_le_bytes());
    out
}

fn encode_assignment(a: &Assignment) -> Vec<u8> {
    let mut out = header(ASSIGNMENT_MAGIC, a.parts().len() as u64);
    out.extend_from_slice(bytemuck::cast_slice(a.parts()));
    out
}

fn encode_blocks(blocks: &[Block]) -> Vec<u8> {
    let mut out = header(BLOCKS_MAGIC, blocks.len() as u64);
    for b in blocks {
        out.extend_from_slice(&b.level.to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&(b.edges.len() as u64).to_le_bytes());
        for &(u, v) in &b.edges {
            out.extend_from_slice(&u.to_le_bytes());
            out.extend_from_slice(&v.to_le_bytes());
        }
    }
    out
}

/// Bounds-checked little-endian reads that name the file and offset on failure.
struct Cursor<'a> {
    path: PathBuf,
    bytes: &'a [u8],
    at: usize,
}

impl Cursor<'_> {
    fn take(&mut self, n: usize, what: &str) -> Result<&[u8]> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len());
        let Some(end) = end else {
            return Err(malformed(
                &self.path,
                format!("offset {}", self.at),
                format!("file ends inside {what}"),
            ));
        };
        let s = &self.bytes[self.at..end];
        self.at = end;
        Ok(s)
    }
    fn u32(&mut self, what: &str) -> Result<u32> {
        Ok(u32::from_le_bytes(
            self.take(4, what)?.try_into().expect("4 bytes"),
        ))
    }
    fn u64(&mut self, what: &str) -> Result<u64> {
        Ok(u64::from_le_bytes(
            self.take(8, what)?.try_into().expect("8 bytes"),
        ))
    }
    fn header(&mut self, magic: &[u8; 8]) -> Result<u64> {
        if self.take(8, "the header")? != magic {
            return Err(malformed(
                &self.path,
                "header",
                "wrong magic: not this kind of plan file",
            ));
        }
        let version = self.u32("the header")?;
        if version != FORMAT_VERSION {
            return Err(malformed(
                &self.path,
                "header",
                format!("version {version}, expected {FORMAT_VERSION}"),
            ));
        }
        self.u32("the header")?;
        self.u64("the header")
    }
}

fn encode_orders(orders: &[Vec<u32>]) -> Vec<u8> {
    let mut out = header(ORDERS_MAGIC, orders.len() as u64);
    for o in orders {
        out.extend_from_slice(&(o.len() as u64).to_le_bytes());
        out.extend_from_slice(bytemuck::cast_slice(o));
    }
    out
}

fn decode_orders(path: &Path, bytes: &[u8]) -> Result<Vec<Vec<u32>>> {
    let mut c = Cursor {
        path: path.to_path_buf(),
        bytes,
        at: 0,
    };
    let count = c.header(ORDERS_MAGIC)?;
    let mut out = Vec::new();
    for i in 0..count {
        let what = format!("order of block {i}");
        let len = c.u64(&what)?;
        let raw = c.take(len as usize * 4, &what)?;
        out.push(
            raw.chunks_exact(4)
                .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")))
                .collect(),
        );
    }
    Ok(out)
}

/// Every block's order is a permutation of its vertices.
fn check_orders(sets: &[Blocks], orders: &[Vec<Vec<u32>>]) -> Result<(), PlanCheckError> {
    if sets.len() != orders.len() {
        return Err(PlanCheckError::OrderSets {
            orders: orders.len(),
            sets: sets.len(),
        });
    }
    for (s, (set, os)) in sets.iter().zip(orders).enumerate() {
        if set.blocks.len() != os.len() {
            return Err(PlanCheckError::OrderCount {
                set: s,
                orders: os.len(),
                blocks: set.blocks.len(),
            });
        }
        for (b, (block, o)) in set.blocks.iter().zip(os).enumerate() {
            let mut sorted = o.clone();
            sorted.sort_unstable();
            if sorted != block.vertices() {
                return Err(PlanCheckError::NotAPermutation { set: s, block: b });
            }
        }
    }
    Ok(())
}

fn decode_assignment(path: &Path, bytes: &[u8], workers: u32) -> Result<Assignment> {
    let mut c = Cursor {
        path: path.to_path_buf(),
        bytes,
        at: 0,
    };
    let n = c.header(ASSIGNMENT_MAGIC)?;
    let raw = c.take(n as usize * 4, "the part ids")?;
    let parts: Vec<u32> = raw
        .chunks_exact(4)
        .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")))
        .collect();
    Assignment::new(parts, workers).map_err(|e| malformed(path, "part ids", e.to_string()))
}

fn decode_blocks(path: &Path, bytes: &[u8]) -> Result<Vec<Block>> {
    let mut c = Cursor {
        path: path.to_path_buf(),
        bytes,
        at: 0,
    };
    let count = c.header(BLOCKS_MAGIC)?;
    let mut blocks = Vec::new();
    for i in 0..count {
        let what = format!("block {i}");
        let level = c.u32(&what)?;
        c.u32(&what)?;
        let edges = c.u64(&what)?;
        let raw = c.take(edges as usize * 8, &what)?;
        let edges = raw
            .chunks_exact(8)
            .map(|e| {
                (
                    u32::from_le_bytes(e[..4].try_into().expect("4 bytes")),
                    u32::from_le_bytes(e[4..].try_into().expect("4 bytes")),
                )
            })
            .collect();
        blocks.push(Block { level, edges });
    }
    if c.at != bytes.len() {
        return Err(malformed(
            path,
            format!("offset {}", c.at),
            "trailing bytes after the last block",
        ));
    }
    Ok(blocks)
}

/// A choice names one kind per layer.
fn check_exchange(choice: &ExchangeChoice, layers: usize) -> std::result::Result<(), String> {
    if choice.layers.len() != layers {
        return Err(format!(
            "an exchange choice for {} layers in a plan of {layers}",
            choice.layers.len()
        ));
    }
    if let Some(l) = choice.layers.iter().position(|l| l.kind.is_empty()) {
        return Err(format!("layer {l} names no exchange kind"));
    }
    Ok(())
}
