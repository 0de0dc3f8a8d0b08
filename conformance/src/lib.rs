//! One conformance suite for every driver of the protocol (burn's parameterised collective
//! tests are the model): one list of cases — every exchange kind × a set of network conditions
//! × forward and backward — and one [`Driver`] trait that the in-memory network, the
//! simulator and the UDP processes on loopback each implement. Every case must deliver sums
//! bit-identical to the direct computation, on every driver. A new driver (DPDK) implements
//! the trait and runs the same list.
//!
//! The tests in `tests/` also exercise the protocol core on real plans beyond the suite.

pub mod allocations;
pub mod allreduce;

use std::sync::Arc;

use switchgnn_dataplane::cc::Controller;
use switchgnn_dataplane::control::ControlTimers;
use switchgnn_dataplane::engine::{EngineConfig, Exchange, ExchangeOutput, LocalFeatures, Timers};
use switchgnn_dataplane::fault::Faults;
use switchgnn_dataplane::fixed::Scale;
use switchgnn_dataplane::framing::HostFraming;
use switchgnn_dataplane::network::{
    run_exchange_controlled, run_exchange_sharded, run_exchange_two_level, NetworkConfig, RunSetup,
};
use switchgnn_dataplane::plan::ExchangePlan;
use switchgnn_dataplane::reference::encode_matrix;
use switchgnn_dataplane::switch::{SwitchConfig, SwitchCounters, AGGREGATOR_BYTES};
use switchgnn_dataplane::wire::PacketType;
use switchgnn_dataplane::{ExchangeId, ExchangeKind, Nanos};
use switchgnn_datasets::{Dataset, Graph};
use switchgnn_partition::{Assignment, Plan, PlanSpec};
use switchgnn_scheduler::exchange::{exchange_plan, remote_sums, PlanOptions};
use switchgnn_sim::driver::SimConfig;
use switchgnn_sim::modes::{feature, simulate_exchange, ExchangeSetup, SimKind, SimMode};
use switchgnn_transport::loopback::{run_single_exchange, run_single_exchange_two_level};
use switchgnn_transport::server::ServerConfig;
use switchgnn_transport::ShimConfig;
use switchgnn_transport::{Link, Timeouts};
use thiserror::Error;

/// A network condition of the suite. Delays of held-back packets are the driver's to choose
/// (a few round trips of its own links).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Condition {
    /// How the suite's reports name it.
    pub name: &'static str,
    /// Probability that a link drops a packet.
    pub loss: f64,
    /// Probability that a link delivers a packet twice.
    pub duplicate: f64,
    /// Probability that a link holds a packet back, so later ones overtake it.
    pub reorder: f64,
    /// A fixed-point scale for one contribution, so that sums overflow int32 in the switch and
    /// fall back to the hosts.
    pub overflowing_scale: bool,
    /// Four aggregators in the switch: most in-network contributions go raw to the hosts.
    pub tiny_pool: bool,
    /// The links' MTU: the host kinds pack their copies into packets this large.
    pub mtu: u32,
}

impl Condition {
    /// How the host kinds frame their copies under this condition.
    pub fn framing(&self) -> HostFraming {
        HostFraming {
            mtu: self.mtu,
            ..HostFraming::default()
        }
    }

    /// Whether only the host kinds feel it (jumbo frames: the switch's own packets keep the
    /// chip's 64-lane layout, so the in-network kinds would run as under [`CLEAN`]'s loss).
    pub fn host_only(&self) -> bool {
        self.mtu != HostFraming::default().mtu
    }
}

const CLEAN: Condition = Condition {
    name: "lossless",
    loss: 0.0,
    duplicate: 0.0,
    reorder: 0.0,
    overflowing_scale: false,
    tiny_pool: false,
    mtu: 1_500,
};

/// The conditions every kind runs under (the host kinds alone under jumbo frames).
pub const CONDITIONS: [Condition; 7] = [
    CLEAN,
    Condition {
        name: "1% loss",
        loss: 0.01,
        ..CLEAN
    },
    Condition {
        name: "5% loss",
        loss: 0.05,
        ..CLEAN
    },
    Condition {
        name: "duplication and reordering",
        duplicate: 0.05,
        reorder: 0.1,
        ..CLEAN
    },
    Condition {
        name: "lane overflow",
        overflowing_scale: true,
        ..CLEAN
    },
    Condition {
        name: "tiny aggregator pool",
        tiny_pool: true,
        ..CLEAN
    },
    Condition {
        name: "jumbo frames and 5% loss",
        mtu: 9_000,
        // Jumbo frames make few packets: at 1% some drivers lost none of them.
        loss: 0.05,
        ..CLEAN
    },
];

/// One case of the suite.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Case {
    /// The exchange kind whose plan runs.
    pub kind: ExchangeKind,
    /// The network it runs under.
    pub condition: Condition,
    /// The backward pass's exchange (its own exchange id), not the forward one.
    pub backward: bool,
}

impl std::fmt::Display for Case {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let dir = if self.backward { "backward" } else { "forward" };
        write!(f, "{} / {} / {dir}", self.kind, self.condition.name)
    }
}

/// Every case: each kind × each condition × forward and backward.
pub fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    for kind in ExchangeKind::ALL {
        for condition in CONDITIONS {
            if condition.host_only() && kind.in_network() {
                continue;
            }
            for backward in [false, true] {
                out.push(Case {
                    kind,
                    condition,
                    backward,
                });
            }
        }
    }
    out
}

/// What a driver runs: one exchange of `plan` (the plan of the case's kind) with every
/// vertex's row of `features`, under `scale`, on a switch with `aggregators`.
#[derive(Debug, Clone, Copy)]
pub struct Run<'a> {
    /// The case to run.
    pub case: Case,
    /// The plan of the case's kind.
    pub plan: &'a Arc<ExchangePlan>,
    /// Every vertex's features, row-major, `plan.width` to a row.
    pub features: &'a [f32],
    /// The fixed-point scale that every host encodes with.
    pub scale: Scale,
    /// Aggregators in the switch (in every switch of a two-level fabric).
    pub aggregators: usize,
    /// Seeds the driver's faults.
    pub seed: u64,
}

/// What a driver's run produced: each worker's output in rank order, and evidence that the
/// case's condition was felt.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// Each worker's received sums, in rank order.
    pub outputs: Vec<ExchangeOutput>,
    /// What the faults and the switch did during the run.
    pub felt: Felt,
}

/// Counts a driver reports of what its faults and its switch did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Felt {
    /// Packets the faults dropped.
    pub lost: u64,
    /// Packets the faults delivered twice.
    pub duplicated: u64,
    /// Aggregators released by a lane overflow.
    pub overflows: u64,
    /// Contributions the switch sent raw to a host.
    pub raw_forwarded: u64,
    /// Packets of packed host copies and their acks the switch took in: the host kinds run
    /// packed, not one chunk per packet.
    pub packed: u64,
    /// The largest packet the switch took in, bytes (jumbo frames were sent).
    pub largest: u64,
}

impl Felt {
    /// `lost` and `duplicated` by the driver's faults, the rest from the switch's counters.
    pub fn of(lost: u64, duplicated: u64, switch: &SwitchCounters) -> Felt {
        Felt {
            lost,
            duplicated,
            overflows: switch.overflows,
            raw_forwarded: switch.raw_forwarded,
            packed: switch.received(PacketType::Rows),
            largest: switch.largest_in,
        }
    }
}

impl std::ops::AddAssign for Felt {
    fn add_assign(&mut self, o: Felt) {
        self.lost += o.lost;
        self.duplicated += o.duplicated;
        self.overflows += o.overflows;
        self.raw_forwarded += o.raw_forwarded;
        self.packed += o.packed;
        self.largest = self.largest.max(o.largest);
    }
}

/// Why a driver could not finish a run: its own error (the in-memory network's, the
/// simulator's, the UDP processes'), boxed so that every driver fits one trait.
pub type DriverError = Box<dyn std::error::Error + Send + Sync>;

/// Why a case failed: the driver did not finish, or its sums differ from the direct ones.
#[derive(Debug, Error)]
pub enum CheckError {
    /// The driver could not finish the run.
    #[error("{0}")]
    Driver(DriverError),
    /// The driver returned another number of outputs than there are workers.
    #[error("{got} outputs for {want} workers")]
    Outputs {
        /// Outputs returned.
        got: usize,
        /// Workers of the plan.
        want: usize,
    },
    /// A worker received sums for another set of vertices than it should.
    #[error("worker {worker}: other receiving vertices")]
    Vertices {
        /// The worker's rank.
        worker: usize,
    },
    /// A lane of a sum differs from the direct computation (the first such lane).
    #[error("worker {worker}: vertex {vertex} lane {lane} is {got}, the direct sum {want}")]
    Sum {
        /// The worker's rank.
        worker: usize,
        /// The receiving vertex.
        vertex: u32,
        /// The feature column.
        lane: usize,
        /// The fixed-point sum the driver delivered.
        got: i64,
        /// The direct fixed-point sum.
        want: i64,
    },
}

/// A way of running the protocol.
pub trait Driver {
    /// How the suite's reports name the driver.
    fn name(&self) -> &'static str;
    /// Run one exchange as `run` describes; `Err` when the driver could not finish it (a
    /// timeout, a socket error), not when its sums are wrong: [`Fixture::check`] judges those.
    fn run(&self, run: &Run<'_>) -> Result<Outcome, DriverError>;
}

/// The in-memory network (`dataplane::network`): 100 Gb/s, 2 µs links; the workers join
/// through the control plane.
#[derive(Debug, Clone, Copy, Default)]
pub struct InMemory;

impl Driver for InMemory {
    fn name(&self) -> &'static str {
        "in-memory"
    }

    fn run(&self, r: &Run<'_>) -> Result<Outcome, DriverError> {
        let setup = in_memory_setup(r);
        // The workers join through the control plane first, over the same faulty links.
        let run = run_exchange_controlled(
            r.case.kind,
            r.plan.clone(),
            r.features,
            &setup,
            ControlTimers::default(),
        )?;
        Ok(Outcome {
            felt: Felt::of(run.network.lost, run.network.duplicated, &run.switch),
            outputs: run.outputs,
        })
    }
}

/// The in-memory network with the switch model in `shards` shards (aggregators spread by
/// destination, `switch::ShardedSwitch`), driven packet by packet; the workers start joined.
#[derive(Debug, Clone, Copy)]
pub struct InMemorySharded {
    /// Shards of the switch model, each with its share of the destinations.
    pub shards: u16,
}

impl Driver for InMemorySharded {
    fn name(&self) -> &'static str {
        "in-memory sharded"
    }

    fn run(&self, r: &Run<'_>) -> Result<Outcome, DriverError> {
        let setup = in_memory_setup(r);
        let run =
            run_exchange_sharded(r.case.kind, r.plan.clone(), r.features, &setup, self.shards)?;
        Ok(Outcome {
            felt: Felt::of(run.network.lost, run.network.duplicated, &run.switch),
            outputs: run.outputs,
        })
    }
}

/// The in-memory network with a two-level fabric in the switch's place
/// (`dataplane::leafspine`): `racks` leaf switches, each aggregating its own workers'
/// contributions, under one spine that finishes the sums; every switch with the run's
/// aggregators, every link (the leaf-spine ones too) 100 Gb/s with the case's faults.
#[derive(Debug, Clone, Copy)]
pub struct InMemoryTwoLevel {
    /// Leaf switches, each over a rack of consecutive ranks.
    pub racks: u16,
}

impl Driver for InMemoryTwoLevel {
    fn name(&self) -> &'static str {
        "in-memory two-level"
    }

    fn run(&self, r: &Run<'_>) -> Result<Outcome, DriverError> {
        let setup = in_memory_setup(r);
        let (run, _) =
            run_exchange_two_level(r.case.kind, r.plan.clone(), r.features, &setup, self.racks)?;
        Ok(Outcome {
            felt: Felt::of(run.network.lost, run.network.duplicated, &run.switch),
            outputs: run.outputs,
        })
    }
}

/// The discrete-event simulator (`sim`): the paper's 100 Gb/s star, chunk by chunk; the hosts
/// join through the control plane.
#[derive(Debug, Clone, Copy, Default)]
pub struct Simulator;

impl Driver for Simulator {
    fn name(&self) -> &'static str {
        "simulator"
    }

    fn run(&self, r: &Run<'_>) -> Result<Outcome, DriverError> {
        let cfg = SimConfig {
            faults: faults(&r.case.condition, 20_000),
            fault_seed: r.seed,
            max_events: 50_000_000,
            ..SimConfig::paper(r.plan.workers)
        };
        let setup = ExchangeSetup {
            mode: sim_mode(r.case.kind),
            switch_memory: r.aggregators as u64 * AGGREGATOR_BYTES,
            bundle: false,
            window: 64,
            timers: Timers::default(),
            layer: 0,
            backward: r.case.backward,
            // The hosts join through the control plane first.
            control: Some(ControlTimers::default()),
            rate_control: Default::default(),
            two_level: false,
            chip_floor: true,
            framing: r.case.condition.framing(),
        };
        simulated(r, &cfg, &setup)
    }
}

/// The simulator on a leaf-spine of `racks` racks (one spine, no oversubscription) with
/// two-level aggregation: each leaf sums its rack's contributions, spine 0 finishes. The hosts
/// start admitted (the simulator does not model the two-level control plane; the UDP driver
/// runs it).
#[derive(Debug, Clone, Copy)]
pub struct SimulatorTwoLevel {
    /// Racks (leaf switches), each of `workers / racks` consecutive ranks.
    pub racks: u16,
}

impl Driver for SimulatorTwoLevel {
    fn name(&self) -> &'static str {
        "simulator two-level"
    }

    fn run(&self, r: &Run<'_>) -> Result<Outcome, DriverError> {
        let workers = r.plan.workers;
        let topology = switchgnn_sim::fabric::Topology::leaf_spine(
            self.racks,
            workers / self.racks,
            1,
            switchgnn_sim::fabric::LinkSpec::hundred_gbps(),
            1.0,
        );
        let cfg = SimConfig {
            topology,
            faults: faults(&r.case.condition, 20_000),
            fault_seed: r.seed,
            max_events: 50_000_000,
            ..SimConfig::paper(workers)
        };
        let setup = ExchangeSetup {
            backward: r.case.backward,
            two_level: true,
            chip_floor: true,
            framing: r.case.condition.framing(),
            ..ExchangeSetup::new(
                sim_mode(r.case.kind),
                r.aggregators as u64 * AGGREGATOR_BYTES,
            )
        };
        simulated(r, &cfg, &setup)
    }
}

/// The switch process and one worker thread per rank over UDP on loopback
/// (`transport::loopback`), with the fault shim on every sender.
#[derive(Debug, Clone, Copy, Default)]
pub struct Udp;

impl Driver for Udp {
    fn name(&self) -> &'static str {
        "udp"
    }

    fn run(&self, r: &Run<'_>) -> Result<Outcome, DriverError> {
        run_over_udp(r, udp_server(r))
    }
}

/// [`Udp`] with the switch process's model on `cores` cores (`switch --cores`): the
/// aggregators spread over threads by destination.
#[derive(Debug, Clone, Copy)]
pub struct UdpSharded {
    /// Threads of the switch process's model.
    pub cores: u16,
}

impl Driver for UdpSharded {
    fn name(&self) -> &'static str {
        "udp sharded"
    }

    fn run(&self, r: &Run<'_>) -> Result<Outcome, DriverError> {
        let server = ServerConfig {
            cores: self.cores,
            ..udp_server(r)
        };
        run_over_udp(r, server)
    }
}

/// Run `r` with a switch process of `server` and a worker thread per rank over UDP.
fn run_over_udp(r: &Run<'_>, server: ServerConfig) -> Result<Outcome, DriverError> {
    let (switch, outputs) = run_single_exchange(
        r.case.kind,
        r.plan.clone(),
        r.features,
        r.scale,
        server,
        r.case.backward,
    )?;
    // The switch's own sends pass the same shim: its figures show the faults were felt.
    let shim = &switch.endpoint.shim;
    Ok(Outcome {
        outputs,
        felt: Felt::of(shim.lost, shim.duplicated, &switch.counters),
    })
}

/// Simulate run `r` on `cfg` with `setup`: each worker's output and what the faults did. The
/// simulator's hosts hold `sim::modes::feature` values: the suite uses the same.
fn simulated(r: &Run<'_>, cfg: &SimConfig, setup: &ExchangeSetup) -> Result<Outcome, DriverError> {
    let (sim, outputs) = simulate_exchange((**r.plan).clone(), cfg, setup, r.scale)?;
    let faults = sim.run.faults;
    Ok(Outcome {
        outputs,
        felt: Felt::of(faults.lost, faults.duplicated, &sim.switch),
    })
}

/// The simulator's name for an exchange kind.
fn sim_mode(kind: ExchangeKind) -> SimMode {
    let kind = match kind {
        ExchangeKind::Switchgnn => SimKind::SwitchGnn,
        ExchangeKind::Strawman => SimKind::Strawman,
        ExchangeKind::Host => SimKind::Host,
        ExchangeKind::BalancedHost => SimKind::G3,
        ExchangeKind::HostReduce => SimKind::HostReduce,
        ExchangeKind::HostHybrid => SimKind::HostHybrid,
        ExchangeKind::HostTwoLevel => SimKind::HostTwoLevel,
        ExchangeKind::Reduce => SimKind::Reduce,
        ExchangeKind::Hybrid => SimKind::Hybrid,
        ExchangeKind::Auto => SimKind::Auto,
    };
    kind.into()
}

/// The in-memory drivers' setup of run `r`: 100 Gb/s, 2 µs links with the case's faults.
fn in_memory_setup(r: &Run<'_>) -> RunSetup {
    let mut network = NetworkConfig::new(faults(&r.case.condition, 20_000), r.seed);
    network.max_events = 20_000_000;
    RunSetup {
        exchange: exchange_id(r.case.backward),
        scale: r.scale,
        switch: SwitchConfig {
            aggregators: r.aggregators,
            ecn_threshold: 100_000,
            ports: r.plan.workers,
        },
        network,
        timers: Timers::default(),
        paced: true,
        window: 64,
        framing: r.case.condition.framing(),
    }
}

/// The UDP drivers' switch configuration of run `r`: loopback timeouts, the case's faults on
/// every sender's shim.
fn udp_server(r: &Run<'_>) -> ServerConfig {
    let c = &r.case.condition;
    ServerConfig {
        timeouts: Timeouts::loopback(),
        faults: ShimConfig {
            loss: c.loss,
            duplicate: c.duplicate,
            reorder: c.reorder,
            reorder_delay_us: 500,
            seed: r.seed,
        },
        link: Link {
            mtu: c.mtu,
            ..Link::default()
        },
        ..ServerConfig::loopback(1, r.plan.workers, r.aggregators)
    }
}

/// A spine process and a leaf process per rack (`racks` racks, workers in racks of consecutive
/// ranks) and one worker thread per rank over UDP on loopback
/// (`transport::loopback::run_single_exchange_two_level`), the fault shim on every sender.
#[derive(Debug, Clone, Copy)]
pub struct UdpTwoLevel {
    /// Leaf processes, each over a rack of consecutive ranks.
    pub racks: u16,
}

impl Driver for UdpTwoLevel {
    fn name(&self) -> &'static str {
        "udp two-level"
    }

    fn run(&self, r: &Run<'_>) -> Result<Outcome, DriverError> {
        let (spine, leaves, outputs) = run_single_exchange_two_level(
            r.case.kind,
            r.plan.clone(),
            r.features,
            r.scale,
            udp_server(r),
            r.case.backward,
            self.racks,
        )?;
        // Every switch's sends pass the shim: their figures show the faults were felt.
        let mut felt = Felt::default();
        for report in std::iter::once(&spine).chain(&leaves) {
            let shim = &report.endpoint.shim;
            felt += Felt::of(shim.lost, shim.duplicated, &report.counters);
        }
        Ok(Outcome { outputs, felt })
    }
}

/// The suite's exchange: job 1, epoch 0, layer 0, forward or `backward`.
fn exchange_id(backward: bool) -> ExchangeId {
    ExchangeId {
        job: 1,
        epoch: 0,
        layer: 0,
        backward,
    }
}

/// The condition's faults for a driver whose held-back packets wait up to `reorder_delay` ns.
fn faults(c: &Condition, reorder_delay: u64) -> Faults {
    Faults {
        loss: c.loss,
        duplicate: c.duplicate,
        reorder: c.reorder,
        reorder_delay,
        ..Faults::none()
    }
}

/// The suite's graph and plans: `graph` partitioned by `assignment`, one plan per kind.
#[derive(Debug)]
pub struct Fixture {
    /// The dataset's graph, whose direct remote sums are the expected results.
    pub graph: Graph,
    /// Each vertex's worker (METIS).
    pub assignment: Assignment,
    /// One plan per exchange kind, in [`ExchangeKind::ALL`]'s order.
    pub plans: Vec<(ExchangeKind, Arc<ExchangePlan>)>,
    /// The simulator's feature values for every vertex, row-major.
    pub features: Vec<f32>,
    /// Aggregators of the switch in the normal conditions.
    pub aggregators: usize,
}

impl Fixture {
    /// `dataset` on `workers` METIS parts, every kind's plan for one layer of `width` (the
    /// SwitchGNN plan cut into blocks of `memory` bytes of aggregators). The host two-level
    /// exchange's plan is made for racks of two consecutive ranks when the workers pair up
    /// (`two_level.rs`'s fabric), so that its proxies work on every driver, on a star too
    /// (the racks only choose who sums for whom; the switch forwards either way).
    pub fn new(dataset: &Dataset, workers: u32, width: usize, memory: u64) -> Fixture {
        let spec = PlanSpec::new(dataset.name.clone(), workers, vec![width]).switch_memory(memory);
        let prepared = Plan::prepare(dataset, &spec, &|_| {}).expect("a plan of the fixture");
        let racks = (workers >= 4 && workers % 2 == 0).then_some((workers / 2) as u16);
        let plans = ExchangeKind::ALL
            .into_iter()
            .map(|kind| {
                let options = PlanOptions {
                    racks,
                    ..PlanOptions::default()
                };
                let plan = exchange_plan(kind, &dataset.graph, &prepared, 0, options)
                    .expect("every kind's plan");
                (kind, Arc::new(plan))
            })
            .collect();
        let n = dataset.graph.num_vertices();
        Fixture {
            graph: dataset.graph.clone(),
            assignment: prepared.assignment.clone(),
            plans,
            features: (0..n as u32)
                .flat_map(|v| (0..width).map(move |j| feature(v, j)))
                .collect(),
            aggregators: (memory / switchgnn_dataplane::switch::AGGREGATOR_BYTES) as usize,
        }
    }

    /// The plan of `kind`.
    pub fn plan(&self, kind: ExchangeKind) -> &Arc<ExchangePlan> {
        &self
            .plans
            .iter()
            .find(|(k, _)| *k == kind)
            .expect("a plan per kind")
            .1
    }

    /// Worker `rank`'s engine of `kind` for exchange `id` (the job's `seq`-th), holding its rows
    /// of the fixture's features, paced by `cc`, created at `now`; 64 chunks in flight, the
    /// default timers.
    #[allow(clippy::too_many_arguments)]
    pub fn engine(
        &self,
        kind: ExchangeKind,
        rank: u16,
        id: ExchangeId,
        seq: u32,
        scale: Scale,
        cc: Box<dyn Controller>,
        now: Nanos,
    ) -> Box<dyn Exchange> {
        let plan = self.plan(kind);
        let (vertices, values) = plan.local_rows(rank, &self.features);
        let cfg = EngineConfig {
            exchange: id,
            seq,
            rank,
            scale,
            timers: Timers::default(),
            window: 64,
            framing: Default::default(),
        };
        let local = LocalFeatures {
            vertices: &vertices,
            width: plan.width,
            values: &values,
        };
        kind.engine(cfg, plan.clone(), local, cc, now)
            .expect("an engine of the fixture's plan")
    }

    /// The scale of `case`: no overflow possible, or (lane overflow) room for one
    /// contribution only.
    pub fn scale(&self, case: &Case) -> Scale {
        let most = if case.condition.overflowing_scale {
            1
        } else {
            (0..self.graph.num_vertices() as u32)
                .map(|v| self.graph.degree(v))
                .max()
                .unwrap_or(1)
        };
        Scale::for_bound(1.0, most).expect("a scale")
    }

    /// Run `case` on `driver` and compare every worker's sums with the direct computation;
    /// `Err` says what differed. Returns what the driver felt.
    pub fn check(&self, driver: &dyn Driver, case: &Case, seed: u64) -> Result<Felt, CheckError> {
        let plan = self.plan(case.kind);
        let scale = self.scale(case);
        let aggregators = if case.condition.tiny_pool {
            4
        } else {
            self.aggregators
        };
        let run = Run {
            case: *case,
            plan,
            features: &self.features,
            scale,
            aggregators,
            seed,
        };
        let Outcome { outputs: got, felt } = driver.run(&run).map_err(CheckError::Driver)?;
        let (encoded, _) = encode_matrix(&scale, &self.features, plan.width);
        let want = remote_sums(&self.graph, &self.assignment, plan.width, &encoded);
        if got.len() != want.len() {
            return Err(CheckError::Outputs {
                got: got.len(),
                want: want.len(),
            });
        }
        for (w, (g, e)) in got.iter().zip(&want).enumerate() {
            if g.vertices != e.vertices {
                return Err(CheckError::Vertices { worker: w });
            }
            if let Some(i) = g.sums.iter().zip(&e.sums).position(|(a, b)| a != b) {
                return Err(CheckError::Sum {
                    worker: w,
                    vertex: g.vertices[i / plan.width],
                    lane: i % plan.width,
                    got: g.sums[i],
                    want: e.sums[i],
                });
            }
        }
        Ok(felt)
    }
}
