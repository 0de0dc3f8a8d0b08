//! The exchanges the simulator compares, each a real driver of the dataplane's engines and
//! switch model:
//!
//! | mode | plan | engine | switch |
//! |---|---|---|---|
//! | `host` | every cross edge | host exchange (BNS-GCN, p = 1) | forwards |
//! | `g3` | every cross edge | host exchange in balanced rounds (see [`BalancedHostExchange`]) | forwards |
//! | `strawman` | one block of every cross edge, random order | in-network | best-effort aggregators, overflow to hosts |
//! | `switchgnn` | the plan's blocks, priority BFS (GAMR) | in-network | aggregators per block |
//! | `switchgnn-nogamr` | the plan's blocks, random order | in-network | aggregators per block |
//! | `reduce` | every destination, blocks that fit the memory | pre-aggregated partial sums | one pass per partial |
//! | `host-two-level` | host-reduce's partial sums, a rack's for a destination in another rack summed by one proxy worker of the rack first (proxies chosen for the fabric's racks) | host two-level (see [`HostRackProxy`]) | forwards |
//! | `hybrid` | per (source, destination worker) pair, multicast or a partial sum, chosen for the run's chip | pre-aggregated, with multicast senders | one pass per partial, one per multicast destination |
//! | `auto` | the planner's pick among host, switchgnn and reduce: the least bound on the run's chip | that kind's | that kind's |
//!
//! [`BalancedHostExchange`]: switchgnn_dataplane::engine::BalancedHostExchange
//! [`HostRackProxy`]: switchgnn_dataplane::engine::HostRackProxy

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use switchgnn_chip::{Chip, HostCost};
use switchgnn_dataplane::cc::Aimd;
use switchgnn_dataplane::control::nodes::{controlled_star, ControlledWorker};
use switchgnn_dataplane::control::ControlTimers;
use switchgnn_dataplane::engine::{
    EngineConfig, EngineError, Exchange, ExchangeOutput, LocalFeatures, Timers,
};
use switchgnn_dataplane::fixed::Scale;
use switchgnn_dataplane::framing::HostFraming;
use switchgnn_dataplane::plan::{ExchangePlan, PlanError};
use switchgnn_dataplane::switch::{
    two_level, JobConfig, Racks, Switch, SwitchConfig, SwitchCounters, SwitchError,
};
use switchgnn_dataplane::wire::{HEADER_LEN, MAX_LANES};
use switchgnn_dataplane::{ExchangeId, ExchangeKind, Nanos};
use switchgnn_datasets::Graph;
use switchgnn_partition::Plan;
use switchgnn_scheduler::exchange::PlanOptions;
use thiserror::Error;

use crate::driver::{
    pipe_room, run_two_level, run_with_background, Bundle, PassPipes, RunResult, SimConfig,
    SimError, Tap,
};
use crate::fabric::Topology;

/// An exchange kind the simulator runs, as the command line names it.
/// What the simulator runs for one exchange: an exchange kind, or the best host-only kind
/// picked per run, before it is planned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SimKind {
    /// The host exchange: raw copies (BNS-GCN with p = 1).
    Host,
    /// The host exchange in G3's balanced rounds.
    G3,
    /// Host-only pre-aggregation: one partial sum per remote destination.
    HostReduce,
    /// Per worker pair, raw copies or partial sums, whichever is fewer rows.
    HostHybrid,
    /// The host two-level exchange: its plan is made for the racks it runs on (on the star,
    /// one rack: host-reduce's partial sums).
    HostTwoLevel,
    /// One block, best-effort aggregators, overflow to the hosts.
    Strawman,
    /// SwitchGNN's blocks and per-edge multicast.
    SwitchGnn,
    /// Partial sums added in the switch.
    Reduce,
    /// Reduce with multicast senders where the chip favours them.
    Hybrid,
    /// The planner's pick on the run's chip.
    Auto,
    /// The fastest host-only kind by the chip model's bound (the host exchange, host-only
    /// pre-aggregation or the host hybrid): the baseline every in-network kind is judged
    /// against.
    BestHost,
}

impl SimKind {
    /// The name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            SimKind::Host => "host",
            SimKind::G3 => "g3",
            SimKind::HostReduce => "host-reduce",
            SimKind::HostHybrid => "host-hybrid",
            SimKind::HostTwoLevel => "host-two-level",
            SimKind::Strawman => "strawman",
            SimKind::SwitchGnn => "switchgnn",
            SimKind::Reduce => "reduce",
            SimKind::Hybrid => "hybrid",
            SimKind::Auto => "auto",
            SimKind::BestHost => "best-host",
        }
    }

    /// The exchange kind it plans and runs.
    pub fn exchange_kind(self) -> ExchangeKind {
        match self {
            SimKind::Host => ExchangeKind::Host,
            SimKind::G3 => ExchangeKind::BalancedHost,
            SimKind::HostReduce => ExchangeKind::HostReduce,
            SimKind::HostHybrid => ExchangeKind::HostHybrid,
            SimKind::HostTwoLevel => ExchangeKind::HostTwoLevel,
            SimKind::Strawman => ExchangeKind::Strawman,
            SimKind::SwitchGnn => ExchangeKind::Switchgnn,
            SimKind::Reduce => ExchangeKind::Reduce,
            SimKind::Hybrid => ExchangeKind::Hybrid,
            SimKind::Auto => ExchangeKind::Auto,
            // One of the host-only kinds, chosen per run: the host exchange stands for both.
            SimKind::BestHost => ExchangeKind::Host,
        }
    }
}

/// The order a block's senders follow. An option of the plan, not a kind: only the kinds that
/// run a prepared plan's blocks have one to choose.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum SendOrder {
    /// The plan's graph-aware order (priority BFS, SwitchGNN's GAMR).
    #[default]
    GraphAware,
    /// A seeded random order (SwitchGNN without GAMR, for comparison).
    Random,
}

/// A simulated exchange: a kind and, for SwitchGNN's blocks, a send order. Named as on the
/// command line and in reports (`switchgnn-nogamr` is SwitchGNN's blocks in random order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct SimMode {
    /// What is planned and run.
    pub kind: SimKind,
    /// How a block's senders are ordered (only SwitchGNN's blocks are ever random).
    pub order: SendOrder,
}

impl From<SimKind> for SimMode {
    fn from(kind: SimKind) -> SimMode {
        SimMode::of(kind)
    }
}

impl SimMode {
    /// `kind` in its graph-aware order (the only order every kind has).
    pub const fn of(kind: SimKind) -> SimMode {
        SimMode {
            kind,
            order: SendOrder::GraphAware,
        }
    }

    /// SwitchGNN's blocks sent in random order: what GAMR's order is worth.
    pub const SWITCHGNN_NOGAMR: SimMode = SimMode {
        kind: SimKind::SwitchGnn,
        order: SendOrder::Random,
    };

    /// Every mode that runs one kind (`auto` and `best-host` pick one of them per run, in the
    /// sweep).
    pub const ALL: [SimMode; 10] = [
        SimMode::of(SimKind::Host),
        SimMode::of(SimKind::G3),
        SimMode::of(SimKind::HostReduce),
        SimMode::of(SimKind::HostHybrid),
        SimMode::of(SimKind::HostTwoLevel),
        SimMode::of(SimKind::Strawman),
        SimMode::of(SimKind::SwitchGnn),
        SimMode::SWITCHGNN_NOGAMR,
        SimMode::of(SimKind::Reduce),
        SimMode::of(SimKind::Hybrid),
    ];

    /// The name on the command line and in reports. A random order means something only for
    /// SwitchGNN's blocks; any other kind is named (and runs) as itself.
    pub fn name(self) -> &'static str {
        match (self.kind, self.order) {
            (SimKind::SwitchGnn, SendOrder::Random) => "switchgnn-nogamr",
            (kind, _) => kind.name(),
        }
    }

    /// The mode a name stands for, if any.
    pub fn from_name(name: &str) -> Option<SimMode> {
        SimMode::ALL
            .into_iter()
            .chain([SimKind::Auto.into(), SimKind::BestHost.into()])
            .find(|m| m.name() == name)
    }

    /// The exchange kind the mode runs.
    pub fn exchange_kind(self) -> ExchangeKind {
        self.kind.exchange_kind()
    }

    /// Whether the switch's aggregator memory changes what the mode does.
    pub fn uses_memory(self) -> bool {
        self.exchange_kind().in_network()
    }

    /// Whether the mode runs a prepared plan's blocks.
    pub fn uses_blocks(self) -> bool {
        self.kind == SimKind::SwitchGnn
    }
}

impl From<SimMode> for String {
    fn from(mode: SimMode) -> String {
        mode.name().to_string()
    }
}

impl TryFrom<String> for SimMode {
    type Error = String;
    fn try_from(name: String) -> Result<SimMode, String> {
        SimMode::from_name(&name).ok_or_else(|| format!("unknown simulated exchange `{name}`"))
    }
}

/// Why an exchange could not be simulated.
#[derive(Debug, Error)]
pub enum ModeError {
    /// The exchange plan could not be made.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// An engine refused its settings.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// The switch refused the job.
    #[error(transparent)]
    Switch(#[from] SwitchError),
    /// The run did not finish.
    #[error(transparent)]
    Sim(#[from] SimError),
    /// The topology and the plan disagree on the workers.
    #[error("the topology has {hosts} hosts, the plan {workers} workers")]
    Workers {
        /// Hosts of the topology.
        hosts: u16,
        /// Workers of the plan.
        workers: u16,
    },
    /// Two-level aggregation asked for where it cannot run; the text says what it needs.
    #[error("two-level aggregation {0}")]
    TwoLevel(&'static str),
}

/// The exchange plan of `mode` for `layer` of `plan` (whose assignment and, for the block
/// modes, blocks it uses), through the planning side's one factory. `seed` seeds the random
/// orders; `chip` is what the hybrid's pairs are chosen for (`None`: what the plan records).
pub fn exchange_plan(
    mode: SimMode,
    graph: &Graph,
    plan: &Plan,
    layer: usize,
    seed: u64,
    chip: Option<(Chip, HostCost)>,
) -> Result<ExchangePlan, ModeError> {
    exchange_plan_on(mode, graph, plan, layer, seed, chip, None)
}

/// [`exchange_plan`] for workers in `racks` racks of consecutive ranks (`None`: a star), which
/// only the host two-level exchange's plan depends on (its proxies).
pub fn exchange_plan_on(
    mode: SimMode,
    graph: &Graph,
    plan: &Plan,
    layer: usize,
    seed: u64,
    chip: Option<(Chip, HostCost)>,
    racks: Option<u16>,
) -> Result<ExchangePlan, ModeError> {
    let options = PlanOptions {
        seed,
        graph_aware_order: mode.order == SendOrder::GraphAware,
        chip,
        counted_only: false,
        racks,
    };
    Ok(switchgnn_scheduler::exchange::exchange_plan(
        mode.exchange_kind(),
        graph,
        plan,
        layer,
        options,
    )?)
}

/// How one exchange is simulated.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ExchangeSetup {
    /// The exchange kind to run.
    pub mode: SimMode,
    /// Aggregator memory of the switch, bytes.
    pub switch_memory: u64,
    /// Simulate one chunk per vertex standing for all of them (see [`Bundle`]).
    pub bundle: bool,
    /// Data chunks a worker may have unacknowledged (real chunks, also when bundled).
    pub window: usize,
    /// The engines' timers.
    pub timers: Timers,
    /// The layer the exchange is of (its id in the packets).
    pub layer: u8,
    /// A backward exchange (gradients) rather than a forward one.
    pub backward: bool,
    /// Run the control plane too: the hosts say hello over the simulated links before they
    /// send (the switch admits them), and both sides keep its timers. The measured time then
    /// includes the join. `None`: the hosts start already admitted (timings of the exchange
    /// alone).
    pub control: Option<ControlTimers>,
    /// How the workers' rate control answers the switch's ECN marks.
    #[serde(default)]
    pub rate_control: RateControl,
    /// On a leaf-spine: two-level aggregation, every leaf a switch of the exchange's (the
    /// switch model in its leaf tier, on a chip like spine 0's) that sums its rack's
    /// contributions before spine 0 finishes them. Without it the leaves only forward and the
    /// exchange's one switch is spine 0. Not with the control plane: the hosts start
    /// admitted (the switch processes' two-level control plane is not simulated).
    #[serde(default)]
    pub two_level: bool,
    /// The receivers fetch nothing before a block has run for the chip's least time for it
    /// ([`block_floors`]). Off: the result timeout alone starts fetch rounds, also while a slow
    /// chip is still working through the block (for comparison).
    #[serde(default = "yes")]
    pub chip_floor: bool,
    /// How the host exchange packs its copies (MTU) and acknowledges them.
    #[serde(default)]
    pub framing: HostFraming,
}

fn yes() -> bool {
    true
}

impl ExchangeSetup {
    /// `mode`'s first layer forward with `switch_memory` of aggregators, bundled, a window of
    /// 256 chunks, default timers and rate control, no control plane: the tests' setup.
    pub fn new(mode: SimMode, switch_memory: u64) -> ExchangeSetup {
        ExchangeSetup {
            mode,
            switch_memory,
            bundle: true,
            window: 256,
            timers: Timers::default(),
            layer: 0,
            backward: false,
            control: None,
            rate_control: RateControl::Halve,
            two_level: false,
            chip_floor: true,
            framing: HostFraming::default(),
        }
    }
}

/// How a worker's rate controller ([`Aimd`]) answers ECN echoes. Losses halve its rate in
/// every setting.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RateControl {
    /// Every echo (once per cut interval) halves the rate: the engines' default.
    #[default]
    Halve,
    /// An echo takes off half the marked fraction (DCTCP's α, [`Aimd::proportional`]).
    Proportional,
    /// Echoes are ignored: what the exchange does to other traffic without its congestion
    /// control.
    Off,
}

impl RateControl {
    /// Every setting, in the order studies run them.
    pub const ALL: [RateControl; 3] = [
        RateControl::Halve,
        RateControl::Proportional,
        RateControl::Off,
    ];

    /// The setting named `name` (as [`RateControl::name`] gives it).
    pub fn from_name(name: &str) -> Option<RateControl> {
        RateControl::ALL.into_iter().find(|r| r.name() == name)
    }

    /// The setting's name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            RateControl::Halve => "halve",
            RateControl::Proportional => "proportional",
            RateControl::Off => "off",
        }
    }

    /// A controller for a worker whose uplink runs at `line_rate` bytes per second.
    pub fn controller(self, line_rate: f64) -> Box<dyn switchgnn_dataplane::cc::Controller> {
        match self {
            RateControl::Halve => Box::new(Aimd::new(line_rate)),
            RateControl::Proportional => Box::new(Aimd::new(line_rate).proportional()),
            RateControl::Off => Box::new(switchgnn_dataplane::cc::IgnoreEcn(Aimd::new(line_rate))),
        }
    }
}

/// One simulated exchange.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExchangeSim {
    /// The run's own measurements.
    pub run: RunResult,
    /// The switch's counters (summed over the leaves too, with two levels).
    pub switch: SwitchCounters,
    /// Summed over the workers.
    pub retransmits: u64,
    /// Fetch requests the workers sent.
    pub fetches: u64,
    /// Overflow notices the workers received.
    pub overflow_notices: u64,
    /// Acknowledgements that echoed ECN.
    pub ecn_echoes: u64,
}

/// The switch and engines after a run, and the run's figures.
type Ran = (Switch, Vec<Box<dyn Exchange>>, RunResult);

/// [`run`] through the control plane: the switch model behind its control machine, each
/// engine in a worker that joins first.
#[allow(clippy::too_many_arguments)]
fn run_controlled(
    cfg: &SimConfig,
    bundle: Option<Bundle>,
    setup: &ExchangeSetup,
    timers: ControlTimers,
    switch: Switch,
    engines: Vec<Box<dyn Exchange>>,
    tap: Option<&mut dyn Tap>,
    background: Option<&mut crate::background::Background>,
    pass_pipes: &PassPipes,
) -> Result<Ran, ModeError> {
    let (mut switch, workers) = controlled_star(
        switch,
        engines,
        1,
        setup.mode.exchange_kind().name(),
        timers,
    );
    let mut hosts: Vec<Box<ControlledWorker>> = workers.into_iter().map(Box::new).collect();
    let result = run_with_background(
        cfg,
        bundle,
        &mut switch,
        &mut hosts,
        tap,
        background,
        Some(pass_pipes),
    )?;
    let engines = hosts
        .iter_mut()
        .map(|h| {
            h.take_engine(result.finish_ns)
                .expect("each host ran its engine")
        })
        .collect();
    Ok((switch.switch, engines, result))
}

/// Feature value of lane `j` of vertex `v`: deterministic, in [-1, 1), so that sums can be
/// checked against the direct computation.
pub fn feature(v: u32, j: usize) -> f32 {
    let x = (v as u64).wrapping_mul(2_654_435_761) ^ (j as u64).wrapping_mul(40_503);
    (x % 2_000) as f32 / 1_000.0 - 1.0
}

/// What every worker must hold after an exchange of [`feature`] values at `width` under
/// `assignment` and `scale`: the direct computation the simulated sums are checked against.
pub fn direct_sums(
    graph: &Graph,
    assignment: &switchgnn_partition::Assignment,
    width: usize,
    scale: &Scale,
) -> Vec<ExchangeOutput> {
    let n = graph.num_vertices();
    let values: Vec<f32> = (0..n as u32)
        .flat_map(|v| (0..width).map(move |j| feature(v, j)))
        .collect();
    let (encoded, _) = switchgnn_dataplane::reference::encode_matrix(scale, &values, width);
    switchgnn_scheduler::exchange::remote_sums(graph, assignment, width, &encoded)
}

/// The fixed-point scale every worker agrees on: values within 1, at most `contributions`
/// of them per sum.
pub fn scale_for(graph: &Graph) -> Scale {
    let most = (0..graph.num_vertices() as u32)
        .map(|v| graph.degree(v))
        .max()
        .unwrap_or(1);
    Scale::for_bound(1.0, most.max(1)).expect("a scale for any degree that fits a plan")
}

/// The least time the switch of `cfg` needs for each of `plan`'s blocks alone, ns
/// ([`switchgnn_chip::block_floors`]; on a two-level leaf-spine, the busiest leaf's): the
/// engines fetch nothing before a block has run this long ([`Exchange::set_block_floors`]).
pub fn block_floors(plan: &ExchangePlan, cfg: &SimConfig, two_level: bool) -> Vec<u64> {
    let racks = match cfg.topology {
        Topology::LeafSpine { racks, .. } if two_level => {
            Racks::even(cfg.topology.hosts(), racks).ok()
        }
        _ => None,
    };
    switchgnn_chip::block_floors(&cfg.switch.chip, plan, cfg.frame_overhead, racks.as_ref())
}

/// Simulate `plan`'s exchange on the star of `cfg`; also returns each worker's sums. Takes the
/// plan by value: a bundled run narrows its width, and a large graph's plan is not copied.
pub fn simulate_exchange(
    plan: ExchangePlan,
    cfg: &SimConfig,
    setup: &ExchangeSetup,
    scale: Scale,
) -> Result<(ExchangeSim, Vec<ExchangeOutput>), ModeError> {
    simulate_exchange_tapped(plan, cfg, setup, scale, None)
}

/// [`simulate_exchange`], showing every packet at the switch's ports to `tap` (a packet
/// capture).
pub fn simulate_exchange_tapped(
    plan: ExchangePlan,
    cfg: &SimConfig,
    setup: &ExchangeSetup,
    scale: Scale,
    tap: Option<&mut dyn Tap>,
) -> Result<(ExchangeSim, Vec<ExchangeOutput>), ModeError> {
    simulate_exchange_beside(plan, cfg, setup, scale, tap, None)
}

/// [`simulate_exchange_tapped`] with `background` flows sharing the fabric (see
/// [`crate::driver::run_with_background`]).
pub fn simulate_exchange_beside(
    mut plan: ExchangePlan,
    cfg: &SimConfig,
    setup: &ExchangeSetup,
    scale: Scale,
    tap: Option<&mut dyn Tap>,
    background: Option<&mut crate::background::Background>,
) -> Result<(ExchangeSim, Vec<ExchangeOutput>), ModeError> {
    let hosts = cfg.topology.hosts();
    if hosts != plan.workers {
        return Err(ModeError::Workers {
            hosts,
            workers: plan.workers,
        });
    }
    let floors = if setup.chip_floor {
        block_floors(&plan, cfg, setup.two_level)
    } else {
        Vec::new()
    };
    let real_width = plan.width;
    // The host kinds pack their copies into MTU packets already (few packets, few events);
    // bundled, their packets would stand for other packets than they really make. Read from
    // the plan: `auto` may have picked a host kind.
    let packed = !plan.mode.switch_aggregates();
    let bundle =
        (setup.bundle && real_width > MAX_LANES && !packed).then(|| Bundle::of_width(real_width));
    let chunks = bundle.map_or(1, |b| b.chunks as usize);
    if bundle.is_some() {
        plan.width = MAX_LANES;
    }
    let plan = Arc::new(plan);
    let switch_config = SwitchConfig {
        aggregators: (setup.switch_memory / (MAX_LANES as u64 * 4) / chunks as u64) as usize,
        ecn_threshold: cfg.switch.ecn_threshold,
        ports: hosts,
    };
    let exchange = ExchangeId {
        job: 1,
        epoch: 0,
        layer: setup.layer,
        backward: setup.backward,
    };
    let room = pipe_room(
        setup.switch_memory,
        &cfg.switch.chip,
        real_width.div_ceil(MAX_LANES),
    );
    let pass_pipes = PassPipes::new(plan.clone(), &cfg.switch.chip, room);
    let job = JobConfig::new(1, (0..=setup.layer).map(|_| plan.clone()).collect());
    // With two levels the exchange's switch is the spine, and every rack has a leaf.
    let (mut switch, mut leaves) = if setup.two_level {
        let Topology::LeafSpine { racks, .. } = cfg.topology else {
            return Err(ModeError::TwoLevel("needs a leaf-spine topology"));
        };
        if setup.control.is_some() {
            return Err(ModeError::TwoLevel("runs without the control plane"));
        }
        two_level(&job, &Arc::new(Racks::even(hosts, racks)?), switch_config)?
    } else {
        let mut switch = Switch::new(switch_config);
        switch.add_job(job)?;
        (switch, Vec::new())
    };
    // The pacer counts the packets the engine builds; aim it at the line rate of the frames
    // they stand for.
    let link_gbps = cfg.host.uplink_gbps(&cfg.topology);
    let lanes = real_width.min(MAX_LANES);
    let built = if packed {
        setup.framing.datagram_len() as f64
    } else {
        (HEADER_LEN + 4 * lanes) as f64
    };
    let framed = match bundle {
        Some(b) => {
            (chunks * (HEADER_LEN + cfg.frame_overhead as usize) + 4 * b.width as usize) as f64
        }
        None => built + cfg.frame_overhead as f64,
    };
    let pace = link_gbps * 1e9 / 8.0 * built / framed;
    let window = (setup.window / chunks).max(1);

    let mut engines = engines_of(&plan, setup, exchange, scale, pace, window, &floors)?;
    let (switch, engines, result) = match setup.control {
        None if setup.two_level => {
            let result = run_two_level(
                cfg,
                bundle,
                &mut switch,
                &mut leaves,
                &mut engines,
                tap,
                background,
                Some(&pass_pipes),
            )?;
            (switch, engines, result)
        }
        None => {
            let result = run_with_background(
                cfg,
                bundle,
                &mut switch,
                &mut engines,
                tap,
                background,
                Some(&pass_pipes),
            )?;
            (switch, engines, result)
        }
        Some(timers) => run_controlled(
            cfg,
            bundle,
            setup,
            timers,
            switch,
            engines,
            tap,
            background,
            &pass_pipes,
        )?,
    };
    let sum = |f: fn(&switchgnn_dataplane::engine::EngineStats) -> u64| -> u64 {
        engines.iter().map(|e| f(e.stats())).sum()
    };
    let sim = ExchangeSim {
        retransmits: sum(|s| s.retransmits),
        fetches: sum(|s| s.fetches_sent),
        overflow_notices: sum(|s| s.overflow_notices),
        ecn_echoes: sum(|s| s.ecn_echoes),
        switch: leaves
            .iter()
            .fold(switch.counters().clone(), |mut all, leaf| {
                all += leaf.counters();
                all
            }),
        run: result,
    };
    let outputs = engines.iter().map(|e| e.output().clone()).collect();
    Ok((sim, outputs))
}

/// One engine per worker of `plan`, each holding its own vertices' test features, paced at
/// `pace` with `window` packets in flight, and waiting at least `floors` per block.
fn engines_of(
    plan: &Arc<ExchangePlan>,
    setup: &ExchangeSetup,
    exchange: ExchangeId,
    scale: Scale,
    pace: f64,
    window: usize,
    floors: &[Nanos],
) -> Result<Vec<Box<dyn Exchange>>, ModeError> {
    let width = plan.width;
    let mut owned: Vec<Vec<u32>> = vec![Vec::new(); usize::from(plan.workers)];
    for (v, &w) in plan.owner.iter().enumerate() {
        owned[usize::from(w)].push(v as u32);
    }
    let mut engines: Vec<Box<dyn Exchange>> = Vec::with_capacity(owned.len());
    for (w, vertices) in owned.iter().enumerate() {
        let values: Vec<f32> = vertices
            .iter()
            .flat_map(|&v| (0..width).map(move |j| feature(v, j)))
            .collect();
        let local = LocalFeatures {
            vertices,
            width,
            values: &values,
        };
        let ecfg = EngineConfig {
            exchange,
            seq: 1,
            rank: w as u16,
            scale,
            timers: setup.timers,
            window,
            framing: setup.framing,
        };
        let cc = setup.rate_control.controller(pace);
        let p = plan.clone();
        // A mode that chooses per run (`auto`, `best-host`) runs what its plan is.
        let kind = match setup.mode.kind {
            SimKind::Auto | SimKind::BestHost => ExchangeKind::Auto,
            k => k.exchange_kind(),
        };
        let mut engine = kind.engine(ecfg, p, local, cc, 0)?;
        engine.set_block_floors(floors.to_vec());
        engines.push(engine);
    }
    Ok(engines)
}
