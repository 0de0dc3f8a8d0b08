//! A grid of simulations: for each worker count, one METIS partition; for each memory, the
//! block plan; for each mode, each distinct layer width simulated once. Backward exchanges run
//! the same plan (the graph is symmetric, so the transposed plan is the plan) and the engines
//! are deterministic, so a layer's backward exchange takes exactly its forward time; the
//! report lists both.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Mutex;
use std::time::Duration;

use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use switchgnn_chip::{Bound, Chip, ChipChoice, ChipError, HostCost, Load};
use switchgnn_dataplane::engine::Timers;
use switchgnn_dataplane::node::{Address, Nanos};
use switchgnn_dataplane::ExchangeKind;
use switchgnn_datasets::{Dataset, Progress};
use switchgnn_net::capture::Capture;
use switchgnn_partition::{Assignment, Plan, PlanSpec};
use switchgnn_scheduler::exchange::PlanOptions;
use switchgnn_scheduler::planner::{choose, CANDIDATES, HOST_ONLY};
use thiserror::Error;

use crate::driver::SimConfig;
use crate::driver::Tap;
use crate::fabric::{HostSpec, LinkSpec, PortStats, SwitchSpec, Topology};
use crate::modes::{
    exchange_plan, scale_for, simulate_exchange_tapped, ExchangeSetup, ExchangeSim, ModeError,
    RateControl, SimKind, SimMode,
};
use crate::series::Series;

/// Everything a sweep varies and everything it holds fixed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepSpec {
    /// The dataset's name.
    pub dataset: String,
    /// Worker counts to run.
    pub workers: Vec<u16>,
    /// Switch aggregator memories to run (bytes).
    pub memories: Vec<u64>,
    /// Exchange kinds to run.
    pub modes: Vec<SimMode>,
    /// Width exchanged at each layer.
    pub feature_dims: Vec<usize>,
    /// Compute time of one epoch (forward and backward) on one worker, added to the
    /// simulated communication.
    pub compute_ms: f64,
    /// Every host link.
    pub link: LinkSpec,
    /// Buffer of each switch egress queue, bytes (drop-tail).
    pub buffer_bytes: u64,
    /// Egress backlog above which the switch marks ECN, bytes.
    pub ecn_threshold: u64,
    /// Which chip each worker count runs on.
    pub chip: ChipChoice,
    /// The hosts' stacks.
    pub host: HostSpec,
    /// Bytes a frame adds to a dataplane packet on the wire.
    pub frame_overhead: u64,
    /// Width of one bucket of the time series.
    pub sample_ns: u64,
    /// Data chunks a worker may have unacknowledged.
    pub window: usize,
    /// How the workers' rate controllers answer ECN echoes.
    #[serde(default)]
    pub rate_control: RateControl,
    /// The engines' timers.
    pub timers: Timers,
    /// One chunk per vertex standing for all of its chunks (see [`crate::driver::Bundle`]).
    pub bundle: bool,
    /// Seed of the plans' random orders and of the fault injector.
    pub seed: u64,
    /// Probability that a packet is lost on each hop (the dataplane's fault injector, seeded
    /// by `seed`).
    #[serde(default)]
    pub loss: f64,
    /// Runs at once (each holds a plan and its engines in memory).
    pub jobs: usize,
    /// Packet captures of every run, if asked for.
    #[serde(default)]
    pub pcap: Option<PcapSpec>,
}

/// `simulate --pcap FILE`: every run's first `packets` packets at the switch's ports, each run
/// in its own file — `FILE` with the run's id before the extension (`cap.pcap` →
/// `cap-w8-10MB-reduce-d128.pcap`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PcapSpec {
    /// The capture file; each run's id goes before its extension.
    pub path: std::path::PathBuf,
    /// Packets each run captures at most.
    pub packets: u64,
}

impl PcapSpec {
    /// The file of the run with id `id`.
    pub fn file(&self, id: &str) -> std::path::PathBuf {
        let stem = self
            .path
            .file_stem()
            .map_or_else(|| "capture".into(), |s| s.to_string_lossy().into_owned());
        let name = match self.path.extension() {
            Some(ext) => format!("{stem}-{id}.{}", ext.to_string_lossy()),
            None => format!("{stem}-{id}"),
        };
        self.path.with_file_name(name)
    }
}

/// What a capture in the simulator writes: workers at 10.0.x.y, the switch at 10.255.255.254,
/// one UDP port on both ends; times from the start of the run.
struct SimCapture(Capture);

/// The UDP port of captured packets: the dissector finds switchgnn by its magic on any port,
/// but Wireshark gives a port its registered dissector first (47000, the Tofino program's, is
/// Hotline's), so a port of the dynamic range that none claims.
const CAPTURE_UDP_PORT: u16 = 60001;

impl SimCapture {
    fn address(a: Address) -> SocketAddr {
        let ip = match a {
            Address::Switch => Ipv4Addr::new(10, 255, 255, 254),
            Address::Worker(w) => Ipv4Addr::new(10, 0, (w >> 8) as u8, (w & 0xff) as u8 + 1),
        };
        SocketAddr::new(IpAddr::V4(ip), CAPTURE_UDP_PORT)
    }
}

impl Tap for SimCapture {
    fn packet(&mut self, at: Nanos, from: Address, to: Address, bytes: &[u8]) {
        self.0.record_at(
            Duration::from_nanos(at),
            Self::address(from),
            Self::address(to),
            None,
            bytes,
        );
    }
}

impl SweepSpec {
    /// The paper's setting for `modes` on `chip`: 100 Gb/s links with 2 µs of delay, 10 MB
    /// egress buffers marking ECN above 100 KB, 20 ns per packet at each host, a window of 512
    /// chunks, halving on echoes, bundled chunks, no compute, no loss, seed 0, one job. The
    /// receivers' patience is 5 ms, as the reproduction runs have it: the 200 µs default sets
    /// off fetch storms at 128 workers and on recirculation-bound chips.
    pub fn paper(
        dataset: &str,
        workers: Vec<u16>,
        memories: Vec<u64>,
        modes: Vec<SimMode>,
        feature_dims: Vec<usize>,
        chip: ChipChoice,
    ) -> SweepSpec {
        SweepSpec {
            dataset: dataset.into(),
            workers,
            memories,
            modes,
            feature_dims,
            compute_ms: 0.0,
            link: LinkSpec::hundred_gbps(),
            buffer_bytes: 10_000_000,
            ecn_threshold: 100_000,
            chip,
            host: HostSpec::hundred_gbps(),
            frame_overhead: crate::driver::FRAME_OVERHEAD,
            sample_ns: 10_000,
            window: 512,
            rate_control: RateControl::Halve,
            timers: Timers {
                result: 5_000_000,
                ..Timers::default()
            },
            bundle: true,
            seed: 0,
            loss: 0.0,
            jobs: 1,
            pcap: None,
        }
    }

    /// The core's configuration for `workers` hosts, on the chip [`SweepSpec::chip`] picks
    /// for them.
    pub fn config(&self, workers: u16) -> Result<SimConfig, ChipError> {
        let switch = SwitchSpec {
            buffer_bytes: self.buffer_bytes,
            ecn_threshold: self.ecn_threshold,
            chip: self.chip.resolve(u32::from(workers), self.link.gbps)?,
        };
        Ok(SimConfig {
            topology: Topology::star(workers, self.link),
            switch,
            host: self.host,
            frame_overhead: self.frame_overhead,
            sample_ns: self.sample_ns,
            max_events: 4_000_000_000,
            faults: switchgnn_dataplane::fault::Faults::lossy(self.loss),
            fault_seed: self.seed,
        })
    }

    /// One forward exchange of `mode` at `layer` as the sweep runs it: the spec's bundling,
    /// window, timers and rate control, the run's host framing, no control plane, one level.
    fn setup(
        &self,
        mode: SimMode,
        switch_memory: u64,
        layer: u8,
        cfg: &SimConfig,
    ) -> ExchangeSetup {
        ExchangeSetup {
            mode,
            switch_memory,
            bundle: self.bundle,
            window: self.window,
            timers: self.timers,
            layer,
            backward: false,
            control: None,
            rate_control: self.rate_control,
            two_level: false,
            chip_floor: true,
            framing: cfg.host.framing,
        }
    }

    /// Whether the spec describes a sweep that can run: worker counts (at least two each,
    /// each with a chip of enough ports), modes and positive feature widths, a memory for the
    /// in-network modes, a positive link rate and a loss probability below 1.
    pub fn validate(&self) -> Result<(), SweepError> {
        let usage = |why: String| Err(SweepError::Usage(why));
        if self.workers.is_empty() || self.modes.is_empty() || self.feature_dims.is_empty() {
            return usage("a sweep needs worker counts, modes and feature widths".into());
        }
        if self.workers.iter().any(|&w| w < 2) {
            return usage("every worker count must be at least 2".into());
        }
        if self.memories.is_empty() && self.modes.iter().any(|m| m.uses_memory()) {
            return usage("in-network modes need at least one switch memory".into());
        }
        if self.feature_dims.contains(&0) {
            return usage("feature widths must be positive".into());
        }
        if self.link.gbps.is_nan() || self.link.gbps <= 0.0 || self.sample_ns == 0 {
            return usage("the link rate and the sampling period must be positive".into());
        }
        if !(0.0..1.0).contains(&self.loss) {
            return usage(format!("loss {} must be in [0, 1)", self.loss));
        }
        for &w in &self.workers {
            self.chip
                .resolve(u32::from(w), self.link.gbps)
                .map_err(|source| SweepError::ChipFor { workers: w, source })?;
        }
        Ok(())
    }
}

/// One simulated exchange of the grid (a row of `runs.csv`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunRow {
    /// Workers.
    pub workers: u16,
    /// The chip preset it ran on.
    pub chip: String,
    /// `None` for the modes that use no aggregators.
    pub switch_memory: Option<u64>,
    /// The exchange mode.
    pub mode: SimMode,
    /// The exchange kind that ran: the mode's, or for `auto` the planner's pick.
    #[serde(default)]
    pub kind: String,
    /// Feature width exchanged.
    pub width: usize,
    /// The exchange's simulated time.
    pub comm_ns: u64,
    /// The chip model's lower bound on this exchange (`switchgnn_chip::Bound`).
    pub bound_ns: u64,
    /// The resource the bound comes from.
    pub bound_by: String,
    /// Frame bytes on all links, both directions.
    pub link_bytes: u64,
    /// Frame bytes on the hosts' uplinks.
    pub uplink_bytes: u64,
    /// Frame bytes on the switch's downlinks.
    pub downlink_bytes: u64,
    /// Frame bytes on the busiest downlink.
    pub busiest_downlink_bytes: u64,
    /// The deepest downlink backlog.
    pub peak_queue_bytes: u64,
    /// Packets dropped at full queues.
    pub drops: u64,
    /// Frame bytes delivered as the switch's sums.
    pub aggregated_bytes: u64,
    /// Frame bytes delivered as raw contributions.
    pub raw_bytes: u64,
    /// Aggregated bytes over aggregated and raw.
    pub aggregation_share: f64,
    /// Most aggregators held at once.
    pub peak_aggregators: usize,
    /// Passes through the recirculation paths.
    pub recirculations: u64,
    /// Time the recirculation paths were busy.
    pub recirculation_busy_ns: f64,
    /// Packets the workers sent again.
    pub retransmits: u64,
    /// Fetch requests the workers sent.
    pub fetches: u64,
    /// Acknowledgements that echoed ECN.
    pub ecn_echoes: u64,
    /// Events the simulator handled.
    pub events: u64,
    /// Wall-clock seconds of the run.
    pub wall_seconds: f64,
    /// Per host: (uplink bytes, downlink bytes, downlink peak backlog, downlink drops). Kept
    /// out of `report.json` and `runs.csv`: each run's links and series have their own files.
    #[serde(skip)]
    pub links: Vec<(u64, u64, u64, u64)>,
    /// Measurements over time.
    #[serde(skip)]
    pub series: Series,
}

impl RunRow {
    /// The row of one simulated exchange (its series moves into the row), with the chip
    /// model's `bound` on `chip`.
    pub fn of(
        workers: u16,
        switch_memory: Option<u64>,
        mode: SimMode,
        width: usize,
        sim: ExchangeSim,
        (chip, bound): (&Chip, Bound),
    ) -> RunRow {
        let r = sim.run;
        let bytes = |ports: &[PortStats]| ports.iter().map(|p| p.bytes).sum();
        RunRow {
            workers,
            chip: chip.preset.name().to_string(),
            switch_memory,
            mode,
            kind: mode.exchange_kind().name().to_string(),
            width,
            comm_ns: r.finish_ns,
            bound_ns: (bound.seconds * 1e9).ceil() as u64,
            bound_by: bound.by(),
            link_bytes: r.link_bytes(),
            uplink_bytes: bytes(&r.uplinks),
            downlink_bytes: bytes(&r.downlinks),
            busiest_downlink_bytes: r.downlinks.iter().map(|p| p.bytes).max().unwrap_or(0),
            peak_queue_bytes: r.peak_queue(),
            drops: r.drops(),
            aggregated_bytes: r.delivered.aggregated,
            raw_bytes: r.delivered.raw,
            aggregation_share: r.delivered.aggregation_share(),
            peak_aggregators: r.peak_aggregators,
            recirculations: r.recirculation.recirculations,
            recirculation_busy_ns: r.recirculation.busy_ns,
            retransmits: sim.retransmits,
            fetches: sim.fetches,
            ecn_echoes: sim.ecn_echoes,
            events: r.events,
            wall_seconds: r.wall_seconds,
            links: r
                .uplinks
                .iter()
                .zip(&r.downlinks)
                .map(|(u, d)| (u.bytes, d.bytes, d.peak_backlog, d.drops))
                .collect(),
            series: r.series,
        }
    }

    /// A file-name-safe identifier.
    pub fn id(&self) -> String {
        RunRow::id_of(self.workers, self.switch_memory, self.mode, self.width)
    }

    /// The id of the run of `mode` at `width` on `workers` with `switch_memory`.
    pub fn id_of(workers: u16, switch_memory: Option<u64>, mode: SimMode, width: usize) -> String {
        format!(
            "w{}-{}-{}-d{}",
            workers,
            switch_memory.map_or("nomem".to_string(), |m| match m {
                m if m % 1_000_000 == 0 => format!("{}MB", m / 1_000_000),
                m if m % 1_000 == 0 => format!("{}KB", m / 1_000),
                m => format!("{m}B"),
            }),
            mode.name(),
            width
        )
    }
}

/// One exchange of one layer and direction, pointing at the run that simulated its width.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LayerRow {
    /// Workers.
    pub workers: u16,
    /// `None` for the modes that use no aggregators.
    pub switch_memory: Option<u64>,
    /// The exchange mode.
    pub mode: SimMode,
    /// The layer.
    pub layer: usize,
    /// A backward exchange (gradients).
    pub backward: bool,
    /// Feature width exchanged.
    pub width: usize,
    /// The exchange's simulated time.
    pub comm_ns: u64,
    /// Frame bytes on all links, both directions.
    pub link_bytes: u64,
}

/// One epoch: every layer forward and backward, plus the compute time.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EpochRow {
    /// Workers.
    pub workers: u16,
    /// The chip preset.
    pub chip: String,
    /// `None` for the modes that use no aggregators.
    pub switch_memory: Option<u64>,
    /// The exchange mode.
    pub mode: SimMode,
    /// Communication time of the epoch.
    pub comm_ms: f64,
    /// The chip model's bound on the epoch's communication.
    pub bound_ms: f64,
    /// Compute time of the epoch.
    pub compute_ms: f64,
    /// Communication plus compute.
    pub epoch_ms: f64,
    /// Frame bytes on all links over the epoch.
    pub link_bytes: u64,
    /// The deepest downlink backlog over the epoch.
    pub peak_queue_bytes: u64,
}

/// A sweep's spec and every row it produced.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SweepResult {
    /// What was swept.
    pub spec: SweepSpec,
    /// One row per simulated exchange.
    pub runs: Vec<RunRow>,
    /// One row per layer and direction.
    pub layers: Vec<LayerRow>,
    /// One row per epoch.
    pub epochs: Vec<EpochRow>,
}

/// Why a sweep could not run.
#[derive(Debug, Error)]
pub enum SweepError {
    /// A plan could not be partitioned.
    #[error("partition: {0}")]
    Partition(#[from] switchgnn_partition::PartitionError),
    /// One run failed.
    #[error("{what}: {source}")]
    Run {
        /// The run, in words.
        what: String,
        /// Why it failed.
        #[source]
        source: ModeError,
    },
    /// The spec asks for something the sweep cannot do.
    #[error("{0}")]
    Usage(String),
    /// A worker count's chip could not be chosen.
    #[error("chip: {0}")]
    Chip(#[from] ChipError),
    /// No chip of the choice serves this many workers.
    #[error("{workers} workers: {source}")]
    ChipFor {
        /// The worker count.
        workers: u16,
        /// Why the choice has no chip for it.
        source: ChipError,
    },
    /// The error names the file.
    #[error("cannot write the capture: {source}")]
    Capture {
        /// The capture file.
        path: std::path::PathBuf,
        /// What failed.
        source: std::io::Error,
    },
}

/// Run the sweep, [`SweepSpec::validate`]d first. `plan_spec(workers, memory)` gives the
/// partitioning options. Each worker count's runs come from [`sweep_workers`].
pub fn sweep(
    dataset: &Dataset,
    spec: &SweepSpec,
    plan_spec: &dyn Fn(u16, u64) -> PlanSpec,
    progress: &(dyn Progress + Sync),
) -> Result<SweepResult, SweepError> {
    spec.validate()?;
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(spec.jobs.max(1))
        .build()
        .map_err(|e| SweepError::Usage(format!("thread pool: {e}")))?;
    let mut runs = Vec::new();
    for &workers in &spec.workers {
        runs.extend(sweep_workers(
            dataset, spec, workers, plan_spec, &pool, progress,
        )?);
    }
    let (layers, epochs) = epochs(spec, &runs);
    Ok(SweepResult {
        spec: spec.clone(),
        runs,
        layers,
        epochs,
    })
}

/// Each distinct width of `feature_dims` and the first layer that has it: a layer's exchange
/// depends only on its width, so each is simulated once.
fn distinct_widths(feature_dims: &[usize]) -> Vec<(usize, usize)> {
    let mut widths: Vec<(usize, usize)> = Vec::new();
    for (l, &w) in feature_dims.iter().enumerate() {
        if !widths.iter().any(|&(x, _)| x == w) {
            widths.push((w, l));
        }
    }
    widths
}

/// The runs of one worker count: one partition; for each memory the block plan (one at a
/// time: a plan of a large graph is gigabytes) and the runs of every mode that uses it (the
/// modes without aggregators run with the first), at each distinct width, `spec.jobs` at once.
fn sweep_workers(
    dataset: &Dataset,
    spec: &SweepSpec,
    workers: u16,
    plan_spec: &dyn Fn(u16, u64) -> PlanSpec,
    pool: &rayon::ThreadPool,
    progress: &(dyn Progress + Sync),
) -> Result<Vec<RunRow>, SweepError> {
    let widths = distinct_widths(&spec.feature_dims);
    let scale = scale_for(&dataset.graph);
    progress.stage(&format!("{workers} workers: partition"), None);
    let first = plan_spec(workers, spec.memories.first().copied().unwrap_or(0));
    let assignment = Assignment::compute(&dataset.graph, u32::from(workers), &first.partitioner)?;
    // One entry per memory; `None` when the sweep has no memories (host modes only).
    let memories: Vec<Option<u64>> = if spec.memories.is_empty() {
        vec![None]
    } else {
        spec.memories.iter().map(|&m| Some(m)).collect()
    };
    let cfg = spec.config(workers)?;
    let done = Mutex::new(Vec::new());
    for (mi, &memory) in memories.iter().enumerate() {
        let memory_name = memory.map_or("-".into(), switchgnn_partition::size::format_bytes);
        progress.stage(
            &format!("{workers} workers: blocks for {memory_name}"),
            None,
        );
        let ps = plan_spec(workers, memory.unwrap_or(first.switch_memory));
        let plan = Plan::prepare_with(dataset, &ps, assignment.clone(), &|_| {})?;
        let jobs: Vec<(SimMode, usize)> = spec
            .modes
            .iter()
            .filter(|m| m.uses_memory() || mi == 0)
            .flat_map(|&m| (0..widths.len()).map(move |wi| (m, wi)))
            .collect();
        progress.stage(
            &format!(
                "{workers} workers, {memory_name}: {} simulations",
                jobs.len()
            ),
            Some(jobs.len() as u64),
        );
        let grid = GridRun {
            dataset,
            spec,
            plan: &plan,
            cfg: &cfg,
            workers,
            memory,
            scale,
        };
        pool.install(|| {
            jobs.par_iter().try_for_each(|&(mode, wi)| {
                let (width, layer) = widths[wi];
                let row = grid.run(mode, width, layer)?;
                done.lock().expect("results lock").push(row);
                progress.advance(1);
                Ok::<(), SweepError>(())
            })
        })?;
    }
    let mut rows = done.into_inner().expect("results lock");
    rows.sort_by_key(|r| (r.mode, r.switch_memory, r.width));
    Ok(rows)
}

/// What every run of one worker count and memory shares.
struct GridRun<'a> {
    dataset: &'a Dataset,
    spec: &'a SweepSpec,
    plan: &'a Plan,
    cfg: &'a SimConfig,
    workers: u16,
    memory: Option<u64>,
    scale: switchgnn_dataplane::fixed::Scale,
}

impl GridRun<'_> {
    /// Simulate `mode`'s exchange of the layer `layer` (of width `width`), capturing it if
    /// the spec asks; its row of `runs.csv`.
    fn run(&self, mode: SimMode, width: usize, layer: usize) -> Result<RunRow, SweepError> {
        let (spec, cfg, workers, memory) = (self.spec, self.cfg, self.workers, self.memory);
        let what = format!(
            "{workers} workers, {}, {}, width {width}",
            mode.name(),
            memory.map_or(
                "no aggregators".into(),
                switchgnn_partition::size::format_bytes
            )
        );
        let wrap = |source: ModeError| SweepError::Run {
            what: what.clone(),
            source,
        };
        let (kind, xplan) = self.exchange(mode, layer).map_err(wrap)?;
        let setup = spec.setup(mode, memory.unwrap_or(0), layer as u8, cfg);
        // Per pipe and path as the simulated chip places the blocks in this run's memory.
        let (chip, fo) = (&cfg.switch.chip, cfg.frame_overhead);
        let load = Load::of(&xplan, fo).spread_on(&xplan, chip, Some(setup.switch_memory), fo);
        let bound = Bound::of(chip, &load, &host_cost(cfg));
        let memory_used = memory.filter(|_| mode.uses_memory());
        let mut capture = match &spec.pcap {
            Some(p) => {
                let file = p.file(&RunRow::id_of(workers, memory_used, mode, width));
                let c =
                    Capture::create(&file, p.packets).map_err(|source| SweepError::Capture {
                        path: file.clone(),
                        source,
                    })?;
                Some((SimCapture(c), file))
            }
            None => None,
        };
        let tap = capture.as_mut().map(|(c, _)| c as &mut dyn Tap);
        let (sim, _) =
            simulate_exchange_tapped(xplan, cfg, &setup, self.scale, tap).map_err(wrap)?;
        if let Some((SimCapture(c), file)) = capture {
            c.finish()
                .map_err(|source| SweepError::Capture { path: file, source })?;
        }
        let row = RunRow {
            kind: kind.name().to_string(),
            ..RunRow::of(
                workers,
                memory_used,
                mode,
                width,
                sim,
                (&cfg.switch.chip, bound),
            )
        };
        tracing::info!(
            run = row.id(),
            comm_ms = row.comm_ns as f64 / 1e6,
            events = row.events,
            wall_s = row.wall_seconds,
            "simulated"
        );
        Ok(row)
    }

    /// The kind `mode` runs at `layer` and its exchange plan: `auto` runs what the planner
    /// picks on this chip, `best-host` the host-only kind it would pick, the hybrid is chosen
    /// for this run's chip, every other mode is its own kind.
    fn exchange(
        &self,
        mode: SimMode,
        layer: usize,
    ) -> Result<(ExchangeKind, switchgnn_dataplane::plan::ExchangePlan), ModeError> {
        let graph = &self.dataset.graph;
        let candidates: Option<&[ExchangeKind]> = match mode.kind {
            SimKind::Auto => Some(&CANDIDATES),
            SimKind::BestHost => Some(&HOST_ONLY),
            _ => None,
        };
        if let Some(candidates) = candidates {
            let options = PlanOptions {
                seed: self.spec.seed,
                ..PlanOptions::default()
            };
            let (_, kind, xplan) = choose(
                graph,
                self.plan,
                layer,
                candidates,
                &self.cfg.switch.chip,
                &host_cost(self.cfg),
                options,
            )?;
            return Ok((kind, xplan));
        }
        let on = Some((self.cfg.switch.chip, host_cost(self.cfg)));
        let xplan = exchange_plan(mode, graph, self.plan, layer, self.spec.seed, on)?;
        Ok((mode.exchange_kind(), xplan))
    }
}

/// What the chip model's bound charges the hosts of `cfg`, their links' delays included.
pub fn host_cost(cfg: &SimConfig) -> HostCost {
    HostCost {
        link_gbps: cfg.host.uplink_gbps(&cfg.topology),
        per_packet_ns: cfg.host.per_packet_ns as f64,
        frame_overhead: cfg.frame_overhead,
        framing: cfg.host.framing,
        delays: cfg.topology.delays(),
    }
}

/// Per layer and direction, and per epoch, from the runs of each width.
fn epochs(spec: &SweepSpec, runs: &[RunRow]) -> (Vec<LayerRow>, Vec<EpochRow>) {
    let mut by_config: BTreeMap<(u16, Option<u64>, SimMode), Vec<&RunRow>> = BTreeMap::new();
    for r in runs {
        by_config
            .entry((r.workers, r.switch_memory, r.mode))
            .or_default()
            .push(r);
    }
    let mut layers = Vec::new();
    let mut epochs = Vec::new();
    for ((workers, switch_memory, mode), rows) in by_config {
        let mut comm = 0u64;
        let mut bound = 0u64;
        let mut bytes = 0u64;
        let mut peak = 0u64;
        for (layer, &width) in spec.feature_dims.iter().enumerate() {
            let Some(r) = rows.iter().find(|r| r.width == width) else {
                continue;
            };
            for backward in [false, true] {
                layers.push(LayerRow {
                    workers,
                    switch_memory,
                    mode,
                    layer,
                    backward,
                    width,
                    comm_ns: r.comm_ns,
                    link_bytes: r.link_bytes,
                });
                comm += r.comm_ns;
                bound += r.bound_ns;
                bytes += r.link_bytes;
            }
            peak = peak.max(r.peak_queue_bytes);
        }
        let comm_ms = comm as f64 / 1e6;
        epochs.push(EpochRow {
            workers,
            chip: rows.first().map_or(String::new(), |r| r.chip.clone()),
            switch_memory,
            mode,
            comm_ms,
            bound_ms: bound as f64 / 1e6,
            compute_ms: spec.compute_ms,
            epoch_ms: comm_ms + spec.compute_ms,
            link_bytes: bytes,
            peak_queue_bytes: peak,
        });
    }
    (layers, epochs)
}

/// The background traffic a contention sweep runs beside each exchange.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContentionSpec {
    /// Flow-size distributions to run.
    pub sizes: Vec<crate::background::FlowSizes>,
    /// Offered load, a fraction of each host's link.
    pub load: f64,
    /// Flows arrive over this span; `None`: over each exchange's time alone.
    pub duration_ns: Option<Nanos>,
    /// Run every study on each of these leaf-spine fabrics instead of the star.
    pub fabrics: Option<crate::racks::FabricSpec>,
}

/// [`crate::contention::contention`] for every worker count, memory, mode and flow-size
/// distribution of `spec` (the first layer's width; `auto` is refused: the study compares one
/// kind at a time). The studies run `spec.jobs` at a time.
pub fn contention_sweep(
    dataset: &Dataset,
    spec: &SweepSpec,
    background: &ContentionSpec,
    plan_spec: &dyn Fn(u16, u64) -> PlanSpec,
    progress: &dyn Progress,
) -> Result<Vec<crate::contention::Contention>, SweepError> {
    if !(background.load > 0.0 && background.load < 1.0) {
        return Err(SweepError::Usage(format!(
            "--load {} must be between 0 and 1 (a fraction of each host's link)",
            background.load
        )));
    }
    let fabrics: Vec<Option<crate::racks::FabricShape>> = match &background.fabrics {
        Some(f) => {
            f.check(&spec.workers).map_err(SweepError::Usage)?;
            f.fabrics().into_iter().map(Some).collect()
        }
        None => vec![None],
    };
    let variants: Vec<_> = background
        .sizes
        .iter()
        .flat_map(|&sizes| fabrics.iter().map(move |&f| (sizes, f)))
        .collect();
    studies(
        dataset,
        spec,
        plan_spec,
        progress,
        "background",
        &variants,
        &|(sizes, fabric)| match fabric {
            Some(f) => format!(
                "{} background, {} racks at {}:1",
                sizes.name(),
                f.racks,
                f.oversubscription
            ),
            None => format!("{} background", sizes.name()),
        },
        &|xplan, replan, mode, cfg, setup, scale, (sizes, fabric)| {
            // The host two-level exchange's proxies are chosen for the fabric's racks.
            let on_racks = match fabric {
                Some(f) if mode.kind == SimKind::HostTwoLevel => Some(replan(f.racks)?),
                _ => None,
            };
            crate::contention::contention(
                on_racks.as_ref().unwrap_or(xplan),
                mode,
                cfg,
                setup,
                scale,
                fabric,
                sizes,
                background.load,
                background.duration_ns,
                spec.seed,
            )
        },
    )
}

/// [`crate::racks::rack_study`] for every worker count, memory and mode of `spec` (the first
/// layer's width; `auto` is refused), on every fabric of `fabrics`. The studies run
/// `spec.jobs` at a time.
pub fn rack_sweep(
    dataset: &Dataset,
    spec: &SweepSpec,
    fabrics: &crate::racks::FabricSpec,
    plan_spec: &dyn Fn(u16, u64) -> PlanSpec,
    progress: &dyn Progress,
) -> Result<Vec<crate::racks::RackStudy>, SweepError> {
    fabrics.check(&spec.workers).map_err(SweepError::Usage)?;
    studies(
        dataset,
        spec,
        plan_spec,
        progress,
        "fabric",
        &[()],
        &|()| {
            format!(
                "{} fabrics",
                fabrics.racks.len() * fabrics.oversubscription.len()
            )
        },
        &|xplan, replan, mode, cfg, setup, scale, ()| {
            crate::racks::rack_study(xplan, replan, mode, cfg, setup, scale, fabrics)
        },
    )
}

/// The study behind one exchange and one variant: its plan on the star, the same for workers
/// in a number of racks, the mode, ….
type Study<'a, V, S> = dyn Fn(
        &switchgnn_dataplane::plan::ExchangePlan,
        &dyn Fn(u16) -> Result<switchgnn_dataplane::plan::ExchangePlan, ModeError>,
        SimMode,
        &SimConfig,
        &ExchangeSetup,
        switchgnn_dataplane::fixed::Scale,
        V,
    ) -> Result<S, ModeError>
    + Sync
    + 'a;

/// Run `study` for every worker count, memory and mode of `spec` (the first layer's width) and
/// every variant, `spec.jobs` at a time; `what` names the study in errors (`auto` is refused:
/// a study compares one kind at a time), `describe` a variant in progress and errors.
#[allow(clippy::too_many_arguments)]
fn studies<V: Copy + Send + Sync, S: Send>(
    dataset: &Dataset,
    spec: &SweepSpec,
    plan_spec: &dyn Fn(u16, u64) -> PlanSpec,
    progress: &dyn Progress,
    what: &str,
    variants: &[V],
    describe: &(dyn Fn(V) -> String + Sync),
    study: &Study<'_, V, S>,
) -> Result<Vec<S>, SweepError> {
    if spec.modes.contains(&SimMode::of(SimKind::Auto))
        || spec.modes.contains(&SimMode::of(SimKind::BestHost))
    {
        return Err(SweepError::Usage(format!(
            "the {what} study compares one kind at a time: leave `auto` and `best-host` out of \
             --modes"
        )));
    }
    if spec.feature_dims.is_empty() || spec.workers.is_empty() {
        return Err(SweepError::Usage(
            "a study needs worker counts and a feature width".into(),
        ));
    }
    let scale = scale_for(&dataset.graph);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(spec.jobs.max(1))
        .build()
        .map_err(|e| SweepError::Usage(format!("thread pool: {e}")))?;
    let mut found = Vec::new();
    for &workers in &spec.workers {
        let cfg = spec.config(workers)?;
        let memories: Vec<u64> = if spec.memories.is_empty() {
            vec![0]
        } else {
            spec.memories.clone()
        };
        for (mi, &memory) in memories.iter().enumerate() {
            let memory_name = switchgnn_partition::size::format_bytes(memory);
            progress.stage(&format!("{workers} workers, {memory_name}: plan"), None);
            let plan = Plan::prepare(dataset, &plan_spec(workers, memory), &|_| {})?;
            let jobs: Vec<(SimMode, V)> = spec
                .modes
                .iter()
                .filter(|m| m.uses_memory() || mi == 0)
                .flat_map(|&m| variants.iter().map(move |&v| (m, v)))
                .collect();
            progress.stage(
                &format!("{workers} workers: {} {what} studies", jobs.len()),
                Some(jobs.len() as u64),
            );
            let done = pool.install(|| {
                jobs.par_iter()
                    .map(|&(mode, variant)| {
                        let wrap = |source: ModeError| SweepError::Run {
                            what: format!(
                                "{workers} workers, {}, {memory_name}, {}",
                                mode.name(),
                                describe(variant)
                            ),
                            source,
                        };
                        let on = Some((cfg.switch.chip, host_cost(&cfg)));
                        let xplan = exchange_plan(mode, &dataset.graph, &plan, 0, spec.seed, on)
                            .map_err(wrap)?;
                        let setup = spec.setup(mode, memory, 0, &cfg);
                        let replan = |racks: u16| {
                            if mode.kind == SimKind::HostTwoLevel {
                                crate::modes::exchange_plan_on(
                                    mode,
                                    &dataset.graph,
                                    &plan,
                                    0,
                                    spec.seed,
                                    on,
                                    Some(racks),
                                )
                            } else {
                                Ok(xplan.clone())
                            }
                        };
                        let s = study(&xplan, &replan, mode, &cfg, &setup, scale, variant)
                            .map_err(wrap)?;
                        progress.advance(1);
                        Ok::<_, SweepError>(s)
                    })
                    .collect::<Result<Vec<_>, _>>()
            })?;
            found.extend(done);
        }
    }
    Ok(found)
}
