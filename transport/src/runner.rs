//! A worker's run of the exchange benchmark: every scheduled exchange in turn, with the
//! values of [`Workload`], then the check of every output against the direct computation.

use std::time::Instant;

use serde::{Deserialize, Serialize};
use std::sync::Arc;
use switchgnn_chip::Chip;
use switchgnn_dataplane::cc::Aimd;

use switchgnn_dataplane::engine::{
    EngineConfig, EngineError, EngineStats, Exchange, ExchangeOutput, LocalFeatures,
};
use switchgnn_dataplane::plan::ExchangePlan;
use switchgnn_dataplane::wire::FRAME_OVERHEAD;
use switchgnn_dataplane::{ExchangeKind, Nanos};
use switchgnn_datasets::Dataset;
use thiserror::Error;

use crate::client::{WorkerClient, WorkerError, WorkerWire};
use crate::session::Session;
use crate::tcp_exchange::{TcpExchangeError, TcpMesh, TcpRoutes, TcpTotals};
use crate::workload::{OwnedRows, Workload};

/// Why a worker's run of `switchgnn exchange` stopped.
#[derive(Debug, Error)]
pub enum RunError {
    /// Its connection to the switch failed.
    #[error(transparent)]
    Worker(#[from] WorkerError),
    /// An engine refused its plan or inputs.
    #[error("{during}: {source}")]
    Engine {
        /// Which exchange.
        during: String,
        /// Why.
        source: switchgnn_dataplane::engine::EngineError,
    },
    /// No fixed-point scale fits the values.
    #[error("{during}: {source}")]
    Scale {
        /// Which exchange.
        during: String,
        /// Why.
        source: switchgnn_dataplane::fixed::FixedError,
    },
    /// The exchange over TCP failed.
    #[error("{during}: {source}")]
    Tcp {
        /// Which exchange (or the meeting).
        during: String,
        /// Why.
        source: TcpExchangeError,
    },
}

/// One exchange as a worker saw it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExchangeReport {
    /// Its place in the worker's sequence of exchanges.
    pub seq: u32,
    /// The layer it belongs to.
    pub layer: u8,
    /// Whether it carried gradients (the backward pass).
    pub backward: bool,
    /// Values per row.
    pub width: usize,
    /// Blocks of its plan.
    pub blocks: usize,
    /// Wall time from the switch's go for the first block (every worker has joined) to the
    /// engine's completion: the exchange itself, without the wait for the slowest worker to
    /// reach it (the time from creating the engine when it never started). Over TCP, from
    /// when every peer had begun the exchange ([`TcpMesh::last_seconds`]).
    pub seconds: f64,
    /// The engine's counters.
    pub engine: EngineStats,
    /// Rows of the output that differ from the direct computation (0 = exact).
    pub mismatched_rows: usize,
    /// Rows of the output.
    pub rows: usize,
    /// Whether the values were the dataset's features (else seeded stand-ins).
    pub dataset_values: bool,
}

/// Everything a worker reports at the end.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkerReport {
    /// The worker's rank.
    pub rank: u16,
    /// The exchange's name.
    pub mode: String,
    /// Every exchange, in order.
    pub exchanges: Vec<ExchangeReport>,
    /// Traffic with the switch.
    pub wire: WorkerWire,
    /// The connections to the other workers, when the exchanges ran over TCP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp: Option<TcpTotals>,
}

/// How a worker runs the schedule.
#[derive(Debug, Clone, Copy)]
pub struct RunOptions {
    /// The job's id.
    pub job: u16,
    /// This worker's rank.
    pub rank: u16,
    /// Rounds of the schedule (every layer forward, then backward).
    pub epochs: u32,
    /// Sending rate cap (bytes/s) of the congestion controller.
    pub line_rate: f64,
    /// Unacknowledged data chunks at most.
    pub window: usize,
    /// The engines' protocol timers.
    pub timers: switchgnn_dataplane::engine::Timers,
    /// How the host exchange packs its copies and acknowledges them.
    pub framing: switchgnn_dataplane::framing::HostFraming,
    /// Time spent between two exchanges, as a training step computes (the worker reads no
    /// packet meanwhile; its heartbeats keep it alive at the switch).
    pub compute: std::time::Duration,
    /// The switch's chip, when known: each exchange's blocks get their floors from it.
    pub chip: Option<Chip>,
}

/// Run the session's schedule on a connected worker, check every output, say goodbye and
/// report. `progress` hears what the worker is doing.
pub fn run_worker(
    client: WorkerClient,
    session: &Session,
    dataset: &Dataset,
    opts: RunOptions,
    progress: &dyn Fn(&str),
) -> Result<WorkerReport, RunError> {
    run_schedule(client, None, session, dataset, opts, progress)
}

/// [`run_worker`] with every exchange over TCP between the workers (`mesh`, the connections to
/// every peer): the host exchange's copies, the switch only the control path. The session
/// must be of the host exchange.
pub fn run_worker_over_tcp(
    client: WorkerClient,
    mesh: TcpMesh,
    session: &Session,
    dataset: &Dataset,
    opts: RunOptions,
    progress: &dyn Fn(&str),
) -> Result<WorkerReport, RunError> {
    run_schedule(client, Some(mesh), session, dataset, opts, progress)
}

fn run_schedule(
    mut client: WorkerClient,
    mesh: Option<TcpMesh>,
    session: &Session,
    dataset: &Dataset,
    opts: RunOptions,
    progress: &dyn Fn(&str),
) -> Result<WorkerReport, RunError> {
    let RunOptions {
        job,
        rank,
        epochs,
        line_rate,
        window,
        timers,
        framing,
        compute,
        chip,
    } = opts;
    let floors = chip_floors(chip.as_ref(), session);
    // Over TCP: the connections and each layer's routes, built before any exchange.
    let mut over_tcp = match mesh {
        Some(mesh) => {
            let routes = session
                .layers
                .iter()
                .map(|plan| TcpRoutes::new(plan, rank))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|source| RunError::Tcp {
                    during: "laying out the TCP routes".into(),
                    source,
                })?;
            Some((mesh, routes))
        }
        None => None,
    };
    let mut done: Vec<(ExchangeReport, ExchangeOutput, Workload<'_>)> = Vec::new();
    for epoch in 0..epochs {
        for s in session.schedule(job, epoch) {
            if !done.is_empty() && !compute.is_zero() {
                std::thread::sleep(compute);
            }
            let during = format!("exchange {} ({})", s.seq, s.describe());
            progress(&during);
            let plan = &session.layers[usize::from(s.id.layer)];
            let workload =
                Workload::new(dataset, s.id, plan.width, u64::from(job)).map_err(|source| {
                    RunError::Scale {
                        during: during.clone(),
                        source,
                    }
                })?;
            let rows = OwnedRows::of(plan, rank, &workload);
            let started = Instant::now();
            let (output, stats, seconds) = match over_tcp.as_mut() {
                Some((mesh, routes)) => {
                    let r = &routes[usize::from(s.id.layer)];
                    let (output, stats) = mesh
                        .exchange(r, s.seq, &workload.scale, rows.local())
                        .map_err(|source| RunError::Tcp {
                            during: during.clone(),
                            source,
                        })?;
                    (output, stats, mesh.last_seconds())
                }
                None => {
                    let cfg = EngineConfig {
                        exchange: s.id,
                        seq: s.seq,
                        rank,
                        scale: workload.scale,
                        timers,
                        window: client.window(window),
                        framing,
                    };
                    let mut engine = new_engine(
                        session.mode,
                        cfg,
                        plan,
                        rows.local(),
                        line_rate,
                        client.congestion_window(),
                        client.now(),
                    )
                    .map_err(|e| RunError::Engine {
                        during: during.clone(),
                        source: e,
                    })?;
                    engine.set_block_floors(floors[usize::from(s.id.layer)].clone());
                    client.run(engine.as_mut(), &during)?;
                    // The exchange proper: from the first block's go (every worker has
                    // joined) to the end. Before the go a worker only waits for the others to
                    // reach this exchange.
                    let seconds = match engine.started_at() {
                        Some(t0) => client.now().saturating_sub(t0) as f64 * 1e-9,
                        None => started.elapsed().as_secs_f64(),
                    };
                    (engine.output().clone(), engine.stats().clone(), seconds)
                }
            };
            let report = ExchangeReport {
                seq: s.seq,
                layer: s.id.layer,
                backward: s.id.backward,
                width: plan.width,
                blocks: plan.blocks.len(),
                seconds,
                engine: stats,
                mismatched_rows: 0,
                rows: output.vertices.len(),
                dataset_values: workload.is_dataset(),
            };
            done.push((report, output, workload));
        }
    }
    // Goodbye first: the check is local work, and the switch need not wait for it.
    let wire = client.finish()?;
    progress("checking against the direct computation");
    let mut exchanges = Vec::with_capacity(done.len());
    for (mut report, output, workload) in done {
        let plan = &session.layers[usize::from(report.layer)];
        report.mismatched_rows = workload.mismatches(plan, rank, &output);
        exchanges.push(report);
    }
    let tcp = over_tcp.as_ref().map(|(mesh, _)| mesh.totals());
    Ok(WorkerReport {
        rank,
        mode: match tcp {
            Some(_) => "tcp".to_string(),
            None => session.mode.name().to_string(),
        },
        exchanges,
        wire,
        tcp,
    })
}

/// The engine of `kind` for one exchange, paced by AIMD at `line_rate` (bytes/s), with a
/// congestion window of at most `cfg.window` packets if `congestion_window`.
pub fn new_engine(
    kind: ExchangeKind,
    cfg: EngineConfig,
    plan: &Arc<ExchangePlan>,
    local: LocalFeatures<'_>,
    line_rate: f64,
    congestion_window: bool,
    now: Nanos,
) -> Result<Box<dyn Exchange>, EngineError> {
    let mut aimd = aimd(line_rate, &cfg.timers);
    if congestion_window {
        aimd = aimd.with_window(cfg.window);
    }
    kind.engine(cfg, plan.clone(), local, Box::new(aimd), now)
}

/// The least time `chip` (the switch, when the job names it) needs for each block of every
/// layer of `session`, computed once: an engine given its layer's fetches nothing before a
/// block has run that long (none without a chip).
pub fn chip_floors(chip: Option<&Chip>, session: &Session) -> Vec<Vec<Nanos>> {
    session
        .layers
        .iter()
        .map(|plan| match chip {
            Some(chip) => switchgnn_chip::block_floors(chip, plan, FRAME_OVERHEAD, None),
            None => Vec::new(),
        })
        .collect()
}

/// Bytes a worker sends at once ahead of its pacer: one segmentation-offload send's worth
/// (64 KiB). A process wakes up every few tens of microseconds at best; paced packet by
/// packet, it would send one datagram per wake-up and one system call per datagram.
pub const PACING_BURST: usize = 64 << 10;

/// What a loss with no ECN mark before it keeps of the rate (TCP Veno's factor for loss it
/// judges random).
pub const UNMARKED_LOSS_KEEP: f64 = 0.8;

/// AIMD at the link rate, its intervals scaled to a real network's round trips (the
/// defaults assume a 2 µs fabric): at most one cut per retransmission timeout, back to the
/// line rate within about 64 control intervals, and bursts of [`PACING_BURST`]. The switch
/// marks ECN before its queues fill, so a loss with no mark before it keeps 4/5 of the rate
/// ([`Aimd::with_unmarked_loss_keep`]; halving cost the host-only kinds 1.7× at 1% loss).
fn aimd(line_rate: f64, timers: &switchgnn_dataplane::engine::Timers) -> Aimd {
    let mut a = Aimd::new(line_rate).with_unmarked_loss_keep(UNMARKED_LOSS_KEEP);
    a.cut_interval = timers.rto;
    a.increase_interval = (timers.control / 8).max(1);
    a.burst = PACING_BURST;
    a
}
