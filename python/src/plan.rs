//! `switchgnn.prepare`: a plan directory from a graph given as arrays and the owner of every
//! vertex (a partition made elsewhere, e.g. by DGL), with its shards and every exchange kind's
//! plans saved so that neither the switch nor a worker needs the graph again. The folder is the
//! one `switchgnn prepare` and `switchgnn shard` write, through the same [`PlanDir`]: the
//! command's `switch`, `worker` and `exchange` run on it, and Python opens theirs.

use std::path::{Path, PathBuf};

use switchgnn_chip::{ChipChoice, HostCost};
use switchgnn_dataplane::wire::FRAME_OVERHEAD;
use switchgnn_dataplane::ExchangeKind;
use switchgnn_datasets::{BuildOptions, Dataset, Graph, Split, SplitSource};
use switchgnn_partition::size::parse_bytes;
use switchgnn_partition::{Assignment, Plan, PlanSpec};
use switchgnn_scheduler::blocks::set_plan_orders;
use switchgnn_scheduler::planner::choose_exchanges;
use switchgnn_scheduler::OrderKind;
use switchgnn_transport::{PlanDir, PlanDirError};

/// A caller's mistake (a Python `ValueError`) or a failure on the way (a `SwitchgnnError`).
#[derive(Debug)]
pub(crate) enum Failure {
    Usage(String),
    Failed(String),
}

impl Failure {
    fn failed(e: impl std::fmt::Display) -> Failure {
        Failure::Failed(e.to_string())
    }
}

/// A kind the folder lacks is the caller's to fix; anything else failed on the way.
impl From<PlanDirError> for Failure {
    fn from(e: PlanDirError) -> Failure {
        match e {
            PlanDirError::NoKind { .. } => Failure::Usage(e.to_string()),
            other => Failure::failed(other),
        }
    }
}

/// Everything `prepare` is asked for.
#[derive(Debug)]
pub(crate) struct PrepareArgs {
    pub(crate) num_vertices: usize,
    pub(crate) src: Vec<i64>,
    pub(crate) dst: Vec<i64>,
    pub(crate) owner: Vec<i64>,
    pub(crate) workers: Option<u32>,
    pub(crate) feature_dims: Vec<usize>,
    pub(crate) out_dir: PathBuf,
    pub(crate) switch_memory: String,
    pub(crate) kinds: Vec<String>,
    pub(crate) order: String,
    pub(crate) order_seed: u64,
    pub(crate) name: String,
    pub(crate) symmetrize: bool,
    /// The chip the planner weighs the kinds on (`None`: the smallest real one that hosts the
    /// workers, when a kind needs a verdict).
    pub(crate) chip: Option<String>,
    /// Front-panel ports looped back as recirculation paths: a number, or `spare`.
    pub(crate) loopback_ports: String,
    /// What the verdict charges each host: its link rate and its cost per packet.
    pub(crate) gbps: f64,
    pub(crate) host_packet_ns: f64,
}

/// An exchange kind by name: every kind, `hybrid` and `auto` included (a plan that carries them
/// records the planner's verdict, made by [`prepare`] on a chip).
pub(crate) fn parse_kind(name: &str) -> Result<ExchangeKind, Failure> {
    ExchangeKind::parse(name).ok_or_else(|| {
        Failure::Usage(format!(
            "unknown exchange kind `{name}` (one of: switchgnn, host, g3, host-reduce, \
             host-hybrid, host-two-level, strawman, reduce, hybrid, auto)"
        ))
    })
}

/// The planner's verdict for `plan` on the chip `args` names (or the smallest real chip that
/// hosts the workers, every idle port looped, as `switchgnn prepare` does), with hosts as
/// `args` costs them: what `hybrid` and `auto` need, recorded in the plan.
fn verdict(args: &PrepareArgs, plan: &mut Plan, graph: &Graph) -> Result<(), Failure> {
    if !(args.gbps > 0.0 && args.host_packet_ns >= 0.0) {
        return Err(Failure::Usage(
            "gbps must be positive and host_packet_ns not negative".into(),
        ));
    }
    let spare = args.loopback_ports == "spare";
    let loopback_ports = if spare {
        0
    } else {
        args.loopback_ports.parse().map_err(|_| {
            Failure::Usage(format!(
                "loopback_ports `{}`: give a number of ports, or \"spare\"",
                args.loopback_ports
            ))
        })?
    };
    let choice = ChipChoice {
        preset: args
            .chip
            .as_deref()
            .map(str::parse)
            .transpose()
            .map_err(|e: switchgnn_chip::ChipError| Failure::Usage(e.to_string()))?,
        loopback_ports,
        recirculation_ports: None,
        spare_loopback: spare,
    };
    let workers = plan.manifest.spec.workers;
    let chip = choice.resolve(workers, args.gbps).map_err(|e| {
        Failure::Usage(format!(
            "no chip to weigh the exchange kinds on ({e}); `hybrid` and `auto` need the \
             planner's verdict on one"
        ))
    })?;
    let cost = HostCost {
        delays: switchgnn_chip::Delays::NONE,
        link_gbps: args.gbps,
        per_packet_ns: args.host_packet_ns,
        frame_overhead: FRAME_OVERHEAD,
        framing: Default::default(),
    };
    let choice =
        choose_exchanges(plan, graph, ExchangeKind::Auto, &chip, &cost).map_err(Failure::failed)?;
    plan.set_exchange(choice).map_err(Failure::failed)
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
pub(crate) fn prepare(args: &PrepareArgs) -> Result<String, Failure> {
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
    let judged = kinds
        .iter()
        .any(|k| matches!(k, ExchangeKind::Hybrid | ExchangeKind::Auto));
    if judged || args.chip.is_some() {
        verdict(args, &mut plan, &dataset.graph)?;
    }
    let dir = PlanDir::create(&args.out_dir, plan, &dataset, &|_| {})?;
    // A `python.json` of an older build would contradict the folder's own files.
    let legacy = args
        .out_dir
        .join(switchgnn_transport::plan_dir::LEGACY_PYTHON_META);
    if legacy.exists() {
        std::fs::remove_file(&legacy)
            .map_err(|e| Failure::Failed(format!("cannot remove {}: {e}", legacy.display())))?;
    }
    for &kind in &kinds {
        // SwitchGNN's plans are the plan's own blocks.
        if kind != ExchangeKind::Switchgnn {
            let session = dir.build_session(&dataset.graph, kind).map_err(|e| {
                Failure::Failed(format!(
                    "cannot build the {} exchange plans: {e}",
                    kind.name()
                ))
            })?;
            dir.save_kind(&session)?;
        }
    }
    let names: Vec<&str> = kinds.iter().map(|k| k.name()).collect();
    Ok(summary(&dir, dir.contributions()?, &names))
}

fn summary(dir: &PlanDir, contributions: u64, kinds: &[&str]) -> String {
    let m = &dir.plan().manifest;
    let layers: Vec<serde_json::Value> = m
        .traffic
        .iter()
        .enumerate()
        .map(|(layer, t)| {
            let blocks = m
                .block_sets
                .iter()
                .find(|s| s.width >= t.width)
                .map_or(0, |s| s.blocks);
            // The planner's pick and every candidate's bound, where a verdict was made.
            let choice = m.exchange.as_ref().and_then(|e| e.layers.get(layer));
            serde_json::json!({
                "width": t.width,
                "blocks": blocks,
                "host_bytes": t.host_bytes,
                "plan_bytes": t.plan_bytes,
                "plan_reduction": t.plan_reduction,
                "pick": choice.map(|c| c.kind.clone()),
                "predicted_s": choice.map(|c| c.predicted_s.clone()),
            })
        })
        .collect();
    serde_json::json!({
        "dir": dir.dir().display().to_string(),
        "workers": m.spec.workers,
        "vertices": m.dataset.vertices,
        "edges": m.dataset.edges,
        "boundary_vertices": m.boundary.boundary_vertices,
        "cross_edges": m.boundary.cross_edges,
        "contributions": contributions,
        "kinds": kinds,
        "layers": layers,
        "chip": m.exchange.as_ref().map(|e| e.chip.clone()),
    })
    .to_string()
}

/// Open a plan folder (from [`prepare`], or `switchgnn prepare` and `shard`).
pub(crate) fn open(dir: &Path) -> Result<PlanDir, Failure> {
    Ok(PlanDir::open(dir)?)
}
