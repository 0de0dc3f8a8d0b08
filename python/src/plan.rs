//! `switchgnn.prepare`: a plan directory from a graph given as arrays and the owner of every
//! vertex (a partition made elsewhere, e.g. by DGL), with every exchange kind's plans saved so
//! that neither the switch nor a worker needs the graph again; and reading it back.
//!
//! Beside the plan the directory holds `python.json`: what a worker needs that the plan does
//! not say (the most remote neighbours any vertex has, which sets the fixed-point scale every
//! worker must agree on) and the kinds saved.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use switchgnn_dataplane::ExchangeKind;
use switchgnn_datasets::{BuildOptions, Dataset, Graph, Split, SplitSource};
use switchgnn_partition::plan::graph_fingerprint;
use switchgnn_partition::size::parse_bytes;
use switchgnn_partition::{Assignment, Plan, PlanSpec};
use switchgnn_scheduler::blocks::set_plan_orders;
use switchgnn_scheduler::OrderKind;
use switchgnn_transport::{session_file, Session};

pub const META_FILE: &str = "python.json";
pub const META_VERSION: u32 = 1;

/// What `python.json` holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Meta {
    pub format_version: u32,
    /// The plan's graph, as its manifest records it.
    pub graph_fingerprint: u64,
    /// The most remote neighbours any vertex has: every sum's largest number of terms.
    pub contributions: u64,
    /// The exchange kinds whose plans were saved.
    pub kinds: Vec<String>,
    pub created_by: String,
}

/// A caller's mistake (a Python `ValueError`) or a failure on the way (a `SwitchgnnError`).
#[derive(Debug)]
pub enum Failure {
    Usage(String),
    Failed(String),
}

impl Failure {
    fn failed(e: impl std::fmt::Display) -> Failure {
        Failure::Failed(e.to_string())
    }
}

/// Everything `prepare` is asked for.
#[derive(Debug)]
pub struct PrepareArgs {
    pub num_vertices: usize,
    pub src: Vec<i64>,
    pub dst: Vec<i64>,
    pub owner: Vec<i64>,
    pub workers: Option<u32>,
    pub feature_dims: Vec<usize>,
    pub out_dir: PathBuf,
    pub switch_memory: String,
    pub kinds: Vec<String>,
    pub order: String,
    pub order_seed: u64,
    pub name: String,
    pub symmetrize: bool,
}

/// The kinds a plan from Python can carry: `hybrid` and `auto` need a chip's verdict, which the
/// `switchgnn prepare` command makes.
pub fn parse_kind(name: &str) -> Result<ExchangeKind, Failure> {
    match ExchangeKind::parse(name) {
        Some(k @ (ExchangeKind::Hybrid | ExchangeKind::Auto)) => Err(Failure::Usage(format!(
            "the `{}` exchange needs a chip model's verdict; prepare such a plan with the \
             `switchgnn prepare` command",
            k.name()
        ))),
        Some(k) => Ok(k),
        None => Err(Failure::Usage(format!(
            "unknown exchange kind `{name}` (one of: switchgnn, host, g3, host-reduce, \
             host-hybrid, host-two-level, strawman, reduce)"
        ))),
    }
}

/// Edge `i` as vertex ids, or why not.
fn edge(args: &PrepareArgs, i: usize) -> Result<(u32, u32), Failure> {
    let (u, v) = (args.src[i], args.dst[i]);
    let n = args.num_vertices as i64;
    if !(0..n).contains(&u) || !(0..n).contains(&v) {
        return Err(Failure::Usage(format!(
            "edge {i} ({u}, {v}): vertex id out of range for {n} vertices"
        )));
    }
    Ok((u as u32, v as u32))
}

/// The graph of the edge list, checked to be what the exchange computes over: the switch sums
/// a vertex's remote neighbours over an undirected simple graph, so a directed or multi-edge
/// list would silently differ from the trainer's own aggregation.
fn graph_of(args: &PrepareArgs) -> Result<Graph, Failure> {
    if args.src.len() != args.dst.len() {
        return Err(Failure::Usage(format!(
            "src has {} entries but dst has {}",
            args.src.len(),
            args.dst.len()
        )));
    }
    let edges = (0..args.src.len())
        .map(|i| edge(args, i))
        .collect::<Result<Vec<_>, _>>()?;
    let mut directed: Vec<u64> = edges
        .iter()
        .filter(|(u, v)| u != v)
        .map(|&(u, v)| (u64::from(u) << 32) | u64::from(v))
        .collect();
    let given = directed.len();
    directed.sort_unstable();
    directed.dedup();
    let graph = Graph::from_edges(args.num_vertices, &edges, BuildOptions::default())
        .map_err(|e| Failure::Usage(format!("the edge list: {e}")))?;
    // Repeats are refused even when reverses are added: the trainer's own aggregation would
    // count them, the switch's would not.
    if given != directed.len() {
        return Err(Failure::Usage(format!(
            "the edge list repeats {} edges; the exchange sums each neighbour once (remove the \
             repeats, e.g. with dgl.to_simple)",
            given - directed.len()
        )));
    }
    if !args.symmetrize {
        let symmetric = graph.num_adjacency_entries() - graph.num_self_loops();
        if symmetric != directed.len() as u64 {
            return Err(Failure::Usage(format!(
                "{} edges lack their reverse; the exchange sums over undirected neighbours \
                 (add the reverse edges, e.g. with dgl.to_bidirected, or pass symmetrize=True)",
                symmetric - directed.len() as u64
            )));
        }
    }
    Ok(graph)
}

/// The owner of every vertex as an assignment to `workers` (default: the largest owner + 1).
fn assignment_of(args: &PrepareArgs) -> Result<Assignment, Failure> {
    if args.owner.len() != args.num_vertices {
        return Err(Failure::Usage(format!(
            "owner has {} entries for {} vertices",
            args.owner.len(),
            args.num_vertices
        )));
    }
    let largest = args.owner.iter().copied().max().unwrap_or(0);
    let workers = match args.workers {
        Some(w) => w,
        None => u32::try_from(largest + 1).unwrap_or(u32::MAX),
    };
    if !(1..=u32::from(u16::MAX)).contains(&workers) {
        return Err(Failure::Usage(format!(
            "{workers} workers: between 1 and 65535 expected"
        )));
    }
    let parts = args
        .owner
        .iter()
        .enumerate()
        .map(|(v, &o)| {
            u32::try_from(o)
                .ok()
                .filter(|&o| o < workers)
                .ok_or_else(|| {
                    Failure::Usage(format!(
                        "owner[{v}] = {o}: not a worker of {workers} (0 to {})",
                        workers - 1
                    ))
                })
        })
        .collect::<Result<Vec<u32>, _>>()?;
    Assignment::new(parts, workers).map_err(|e| Failure::Usage(e.to_string()))
}

/// Write the plan and every kind's exchange plans; a JSON summary of what was written.
pub fn prepare(args: &PrepareArgs) -> Result<String, Failure> {
    if args.feature_dims.is_empty() || args.feature_dims.contains(&0) {
        return Err(Failure::Usage(
            "feature_dims must list one positive width per layer".into(),
        ));
    }
    let kinds = args
        .kinds
        .iter()
        .map(|k| parse_kind(k))
        .collect::<Result<Vec<_>, _>>()?;
    if kinds.is_empty() {
        return Err(Failure::Usage("kinds names no exchange kind".into()));
    }
    let order = OrderKind::from_name(&args.order).ok_or_else(|| {
        let names: Vec<_> = OrderKind::ALL.iter().map(|k| k.name()).collect();
        Failure::Usage(format!(
            "unknown order `{}` (one of: {})",
            args.order,
            names.join(", ")
        ))
    })?;
    let memory = parse_bytes(&args.switch_memory).map_err(|e| Failure::Usage(e.to_string()))?;
    let graph = graph_of(args)?;
    let assignment = assignment_of(args)?;
    let workers = assignment.num_parts();
    let contributions =
        switchgnn_partition::shard::most_remote_neighbours(&graph, assignment.parts());
    let split = Split {
        train: Vec::new(),
        val: Vec::new(),
        test: Vec::new(),
        source: SplitSource::Given {
            name: "none".into(),
        },
    };
    let dataset =
        Dataset::new(args.name.clone(), graph, None, None, split).map_err(Failure::failed)?;
    let spec =
        PlanSpec::new(args.name.clone(), workers, args.feature_dims.clone()).switch_memory(memory);
    let mut plan =
        Plan::prepare_with(&dataset, &spec, assignment, &|_| {}).map_err(Failure::failed)?;
    set_plan_orders(&mut plan, order, args.order_seed).map_err(Failure::failed)?;
    let dir = &args.out_dir;
    plan.write(dir)
        .map_err(|e| Failure::Failed(format!("cannot write the plan to {}: {e}", dir.display())))?;
    for &kind in &kinds {
        save_kind(&plan, &dataset.graph, kind, dir)?;
    }
    let meta = Meta {
        format_version: META_VERSION,
        graph_fingerprint: graph_fingerprint(&dataset.graph),
        contributions,
        kinds: kinds.iter().map(|k| k.name().to_string()).collect(),
        created_by: concat!("switchgnn ", env!("CARGO_PKG_VERSION")).into(),
    };
    let path = dir.join(META_FILE);
    let json = serde_json::to_vec_pretty(&meta).expect("the metadata serialises");
    switchgnn_datasets::atomic::write_atomically(&path, |w| w.write_all(&json))
        .map_err(Failure::failed)?;
    Ok(summary(&plan, &meta, dir))
}

/// Save the exchange plans of `kind` (the switch's and each worker's view); SwitchGNN's come
/// from the plan directory itself.
fn save_kind(plan: &Plan, graph: &Graph, kind: ExchangeKind, dir: &Path) -> Result<(), Failure> {
    if kind == ExchangeKind::Switchgnn {
        return Ok(());
    }
    let shards = dir.join(switchgnn_partition::shard::SHARDS_DIR);
    std::fs::create_dir_all(&shards)
        .map_err(|e| Failure::Failed(format!("cannot create {}: {e}", shards.display())))?;
    let session = Session::new(plan, graph, kind).map_err(|e| {
        Failure::Failed(format!(
            "cannot build the {} exchange plans: {e}",
            kind.name()
        ))
    })?;
    session_file::write(&session, plan, &session_file::session_path(dir, kind))
        .map_err(Failure::failed)?;
    for rank in 0..plan.manifest.spec.workers as u16 {
        let path = session_file::view_path(dir, kind, rank);
        session_file::write_view(&session.for_worker(rank), rank, plan, &path)
            .map_err(Failure::failed)?;
    }
    Ok(())
}

fn summary(plan: &Plan, meta: &Meta, dir: &Path) -> String {
    let m = &plan.manifest;
    let layers: Vec<serde_json::Value> = m
        .traffic
        .iter()
        .map(|t| {
            let blocks = m
                .block_sets
                .iter()
                .find(|s| s.width >= t.width)
                .map_or(0, |s| s.blocks);
            serde_json::json!({
                "width": t.width,
                "blocks": blocks,
                "host_bytes": t.host_bytes,
                "plan_bytes": t.plan_bytes,
                "plan_reduction": t.plan_reduction,
            })
        })
        .collect();
    serde_json::json!({
        "dir": dir.display().to_string(),
        "workers": m.spec.workers,
        "vertices": m.dataset.vertices,
        "edges": m.dataset.edges,
        "boundary_vertices": m.boundary.boundary_vertices,
        "cross_edges": m.boundary.cross_edges,
        "contributions": meta.contributions,
        "kinds": meta.kinds,
        "layers": layers,
    })
    .to_string()
}

/// A plan directory written by [`prepare`], read and checked.
#[derive(Debug)]
pub struct Prepared {
    pub dir: PathBuf,
    pub plan: Plan,
    pub meta: Meta,
}

impl Prepared {
    pub fn read(dir: &Path) -> Result<Prepared, Failure> {
        let plan = Plan::read(dir).map_err(|e| {
            Failure::Failed(format!("cannot read the plan in {}: {e}", dir.display()))
        })?;
        let path = dir.join(META_FILE);
        let text = std::fs::read(&path).map_err(|e| {
            Failure::Failed(format!(
                "cannot read {}: {e} (was the plan written by switchgnn.prepare?)",
                path.display()
            ))
        })?;
        let meta: Meta = serde_json::from_slice(&text)
            .map_err(|e| Failure::Failed(format!("{}: {e}", path.display())))?;
        if meta.format_version != META_VERSION {
            return Err(Failure::Failed(format!(
                "{}: format {}, this build reads {META_VERSION}; prepare the plan again",
                path.display(),
                meta.format_version
            )));
        }
        if meta.graph_fingerprint != plan.manifest.dataset.fingerprint {
            return Err(Failure::Failed(format!(
                "{} belongs to another graph than the plan beside it; prepare the plan again",
                path.display()
            )));
        }
        Ok(Prepared {
            dir: dir.to_path_buf(),
            plan,
            meta,
        })
    }

    pub fn workers(&self) -> u16 {
        self.plan.manifest.spec.workers as u16
    }

    fn check_kind(&self, kind: ExchangeKind) -> Result<(), Failure> {
        if kind == ExchangeKind::Switchgnn || self.meta.kinds.iter().any(|k| k == kind.name()) {
            return Ok(());
        }
        Err(Failure::Usage(format!(
            "the plan in {} has no {} exchange plans (it has: {}); prepare it with that kind",
            self.dir.display(),
            kind.name(),
            self.meta.kinds.join(", ")
        )))
    }

    /// The whole session of `kind`: what the switch installs.
    pub fn session(&self, kind: ExchangeKind) -> Result<Arc<Session>, Failure> {
        self.check_kind(kind)?;
        let session = if kind == ExchangeKind::Switchgnn {
            Session::switchgnn(&self.plan).map_err(Failure::failed)?
        } else {
            let path = session_file::session_path(&self.dir, kind);
            session_file::read(&path, &self.plan, kind).map_err(Failure::failed)?
        };
        Ok(Arc::new(session))
    }

    /// Worker `rank`'s view of the session of `kind`.
    pub fn view(&self, kind: ExchangeKind, rank: u16) -> Result<Arc<Session>, Failure> {
        self.check_kind(kind)?;
        let session = if kind == ExchangeKind::Switchgnn {
            Session::switchgnn(&self.plan)
                .map_err(Failure::failed)?
                .for_worker(rank)
        } else {
            let path = session_file::view_path(&self.dir, kind, rank);
            session_file::read_view(&path, &self.plan, kind, rank).map_err(Failure::failed)?
        };
        Ok(Arc::new(session))
    }
}
