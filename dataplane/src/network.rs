//! An in-memory star network: the switch in the middle, one link to each worker, seeded faults
//! on every hop (loss, duplication, reordering by extra delay, bit corruption — smoltcp's fault
//! injector is the model). Links have a rate and a delay, so the switch's egress queues grow
//! and ECN marking has something to react to. Deterministic for a seed, and bounded: a run
//! stops with an error after `max_events` events instead of spinning.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use serde::Serialize;
use thiserror::Error;

use crate::engine::Exchange;
use crate::fault::FaultInjector;
use crate::link::{ceil_nanos, to_picos, Port};
use crate::node::{Address, Nanos, Node, SwitchNode, MAX_DATAGRAM_LEN};
use crate::switch::Switch;

pub use crate::fault::Faults;
pub use crate::link::LinkConfig;

/// Settings of the in-memory network.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct NetworkConfig {
    /// Rate and delay of every link.
    pub link: LinkConfig,
    /// Faults applied on every hop.
    pub faults: Faults,
    /// Seed of the fault injector.
    pub seed: u64,
    /// Deliveries plus timer firings before the run is declared stuck.
    pub max_events: u64,
}

impl NetworkConfig {
    /// 100 Gbps links, `faults` seeded by `seed`, and a limit of 50 million events.
    pub fn new(faults: Faults, seed: u64) -> NetworkConfig {
        NetworkConfig {
            link: LinkConfig::hundred_gbps(),
            faults,
            seed,
            max_events: 50_000_000,
        }
    }
}

/// Why a run did not finish.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum NetworkError {
    /// No packet in flight and no timer set, but some workers have not finished.
    #[error("no event left at {now} ns but workers are unfinished")]
    Stalled {
        /// When it stalled, nanoseconds.
        now: Nanos,
    },
    /// The run passed this many events.
    #[error("more than {0} events: the exchange does not terminate")]
    EventLimit(u64),
    /// A packet was addressed to a worker the run does not have.
    #[error("a packet for worker {0}, which is not in the run")]
    NoSuchWorker(u16),
}

/// Counters of one network run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct NetworkStats {
    /// Packets put on a link (every hop counts).
    pub transmitted: u64,
    /// Packet copies delivered to a node.
    pub delivered: u64,
    /// Packets lost.
    pub lost: u64,
    /// Packets sent twice.
    pub duplicated: u64,
    /// Copies held back by an extra delay.
    pub reordered: u64,
    /// Copies with a bit flipped.
    pub corrupted: u64,
    /// Corrupted frames dropped by the frame check.
    pub frame_errors: u64,
    /// Deliveries plus timer firings.
    pub events: u64,
    /// Deepest switch egress queue seen (bytes).
    pub peak_queue_bytes: u64,
    /// Time the last worker finished.
    pub finish_time: Nanos,
}

#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Event {
    at: Nanos,
    seq: u64,
    to: Address,
    from: Address,
    bytes: Vec<u8>,
}

/// The network and its clock.
#[derive(Debug)]
pub struct Network {
    cfg: NetworkConfig,
    faults: FaultInjector,
    now: Nanos,
    seq: u64,
    events: BinaryHeap<Reverse<Event>>,
    /// Each worker's link to the switch, and the switch's egress port towards it.
    uplinks: Vec<Port>,
    downlinks: Vec<Port>,
    /// Workers taken off the network.
    down: Vec<bool>,
    stats: NetworkStats,
}

impl Network {
    /// A network of `workers` workers around one switch, its clock at 0.
    pub fn new(cfg: NetworkConfig, workers: u16) -> Network {
        Network {
            faults: FaultInjector::new(cfg.faults, cfg.seed),
            cfg,
            now: 0,
            seq: 0,
            events: BinaryHeap::new(),
            uplinks: (0..workers).map(|_| cfg.link.port()).collect(),
            downlinks: (0..workers).map(|_| cfg.link.port()).collect(),
            down: vec![false; usize::from(workers)],
            stats: NetworkStats::default(),
        }
    }

    /// The network's clock.
    pub fn now(&self) -> Nanos {
        self.now
    }

    /// Counters so far (the fault counts are the injector's).
    pub fn stats(&self) -> NetworkStats {
        let f = self.faults.stats();
        NetworkStats {
            transmitted: f.packets,
            lost: f.lost,
            duplicated: f.duplicated,
            reordered: f.reordered,
            corrupted: f.corrupted,
            frame_errors: f.frame_errors,
            ..self.stats.clone()
        }
    }

    /// Put a packet for `to` on the link from `from`, through the fault injector.
    fn transmit(&mut self, from: Address, to: Address, bytes: Vec<u8>) {
        let port = match (from, to) {
            (Address::Worker(w), _) => usize::from(w),
            (Address::Switch, Address::Worker(w)) => usize::from(w),
            (Address::Switch, Address::Switch) => return,
        };
        // Split borrows: the injector hands each surviving copy straight to the link.
        let Network {
            faults,
            uplinks,
            downlinks,
            events,
            stats,
            seq,
            now,
            ..
        } = self;
        if port >= uplinks.len() {
            // Still drawn, so that the fault stream does not depend on stray packets.
            faults.apply(bytes, |_, _| {});
            return;
        }
        let now_ps = to_picos(*now);
        faults.apply(bytes, |bytes, extra| {
            let link = if from == Address::Switch {
                &mut downlinks[port]
            } else {
                &mut uplinks[port]
            };
            // The in-memory network's queues never drop (their buffers are unbounded).
            let arrival = link
                .send(now_ps, bytes.len() as u64)
                .expect("an unbounded buffer");
            if from == Address::Switch {
                stats.peak_queue_bytes = stats.peak_queue_bytes.max(link.backlog(now_ps));
            }
            *seq += 1;
            events.push(Reverse(Event {
                at: ceil_nanos(arrival) + extra,
                seq: *seq,
                to,
                from,
                bytes,
            }));
        });
    }

    fn flush<N: Node + ?Sized>(&mut self, node: &mut N, from: Address) {
        let mut buf = [0u8; MAX_DATAGRAM_LEN];
        while let Some(t) = node.poll_transmit(self.now, &mut buf) {
            self.transmit(from, t.to, buf[..t.len].to_vec());
        }
    }

    /// Take worker `w` off the network (a crash, a pulled cable): from now on it sends and
    /// receives nothing, and its timers never fire.
    pub fn kill(&mut self, w: u16) {
        if let Some(down) = self.down.get_mut(usize::from(w)) {
            *down = true;
        }
    }

    /// Run until every worker has finished its exchange.
    pub fn run<S: SwitchNode, E: Exchange + ?Sized>(
        &mut self,
        switch: &mut S,
        workers: &mut [Box<E>],
    ) -> Result<NetworkStats, NetworkError> {
        self.drive(switch, workers, None, |w| w.iter().all(|e| e.is_finished()))
    }

    /// Run every node until the clock reaches `until` (nodes with timers, such as those of
    /// the control plane, make time pass even when nothing is sent).
    pub fn run_until<S: SwitchNode, W: Node>(
        &mut self,
        switch: &mut S,
        workers: &mut [W],
        until: Nanos,
    ) -> Result<NetworkStats, NetworkError> {
        self.drive(switch, workers, Some(until), |_| false)
    }

    /// Run every node until `done` holds for the workers (checked after every event), or
    /// until the clock reaches `until`.
    pub fn run_while<S: SwitchNode, W: Node>(
        &mut self,
        switch: &mut S,
        workers: &mut [W],
        until: Nanos,
        done: impl Fn(&[W]) -> bool,
    ) -> Result<NetworkStats, NetworkError> {
        self.drive(switch, workers, Some(until), done)
    }

    fn drive<S: SwitchNode, W: Node>(
        &mut self,
        switch: &mut S,
        workers: &mut [W],
        until: Option<Nanos>,
        done: impl Fn(&[W]) -> bool,
    ) -> Result<NetworkStats, NetworkError> {
        if self.down.len() < workers.len() {
            self.down.resize(workers.len(), false);
        }
        for (w, node) in workers.iter_mut().enumerate() {
            if !self.down[w] {
                self.flush(node, Address::Worker(w as u16));
            }
        }
        self.flush(switch, Address::Switch);
        loop {
            if done(workers) {
                self.stats.finish_time = self.now;
                return Ok(self.stats());
            }
            // A timer: (when, None for the switch or Some(worker)).
            let timer = workers
                .iter()
                .enumerate()
                .filter(|&(i, _)| !self.down[i])
                .filter_map(|(i, w)| w.poll_timeout().map(|t| (t, Some(i))))
                .chain(switch.poll_timeout().map(|t| (t, None)))
                .min();
            let packet = self.events.peek().map(|Reverse(e)| e.at);
            let next = match (packet, timer) {
                (None, None) => None,
                (Some(p), Some((t, _))) => Some(p.min(t)),
                (Some(p), None) => Some(p),
                (None, Some((t, _))) => Some(t),
            };
            match (next, until) {
                (Some(t), Some(u)) if t > u => {
                    self.now = self.now.max(u);
                    return Ok(self.stats());
                }
                // Nothing left to happen: time passes to `until`, or (without one) the run
                // is stuck.
                (None, Some(u)) if u < Nanos::MAX => {
                    self.now = self.now.max(u);
                    return Ok(self.stats());
                }
                (None, _) => return Err(NetworkError::Stalled { now: self.now }),
                _ => {}
            }
            let deliver = match (packet, timer) {
                (Some(p), Some((t, _))) => p <= t,
                (Some(_), None) => true,
                _ => false,
            };
            self.stats.events += 1;
            if self.stats.events > self.cfg.max_events {
                return Err(NetworkError::EventLimit(self.cfg.max_events));
            }
            if deliver {
                let Reverse(e) = self.events.pop().expect("peeked");
                self.now = self.now.max(e.at);
                match e.to {
                    Address::Switch => {
                        self.stats.delivered += 1;
                        for port in 0..self.downlinks.len() {
                            switch.set_egress_queue(
                                port as u16,
                                self.downlinks[port].backlog(to_picos(self.now)),
                            );
                        }
                        switch.handle_packet(self.now, e.from, &e.bytes);
                        self.flush(switch, Address::Switch);
                    }
                    Address::Worker(w) => {
                        let i = usize::from(w);
                        let node = workers.get_mut(i).ok_or(NetworkError::NoSuchWorker(w))?;
                        if self.down[i] {
                            continue;
                        }
                        self.stats.delivered += 1;
                        node.handle_packet(self.now, e.from, &e.bytes);
                        self.flush(node, Address::Worker(w));
                    }
                }
            } else {
                let (t, who) = timer.expect("a timer");
                self.now = self.now.max(t);
                match who {
                    Some(i) => {
                        let node = &mut workers[i];
                        node.handle_timeout(self.now);
                        self.flush(node, Address::Worker(i as u16));
                    }
                    None => {
                        switch.handle_timeout(self.now);
                        self.flush(switch, Address::Switch);
                    }
                }
            }
        }
    }
}

/// Everything one in-memory exchange produced.
#[derive(Debug, Clone)]
pub struct ExchangeRun {
    /// Per worker, its exchange output.
    pub outputs: Vec<crate::engine::ExchangeOutput>,
    /// Per worker, its engine's counters.
    pub engines: Vec<crate::engine::EngineStats>,
    /// The switch's counters.
    pub switch: crate::switch::SwitchCounters,
    /// The network's counters.
    pub network: NetworkStats,
}

/// What [`run_exchange`] needs besides the plan and the features.
#[derive(Debug, Clone, Copy)]
pub struct RunSetup {
    /// The exchange to run.
    pub exchange: crate::node::ExchangeId,
    /// Fixed-point scale of the features.
    pub scale: crate::fixed::Scale,
    /// The switch's resources.
    pub switch: crate::switch::SwitchConfig,
    /// Links, faults and seed of the network.
    pub network: NetworkConfig,
    /// The engines' timers.
    pub timers: crate::engine::Timers,
    /// Pace with DCQCN-like AIMD at the link rate (else unpaced).
    pub paced: bool,
    /// Unacknowledged data chunks per worker (`usize::MAX`: no limit).
    pub window: usize,
    /// How the host exchange packs its copies (MTU) and acknowledges them.
    pub framing: crate::framing::HostFraming,
}

impl RunSetup {
    /// One forward exchange (job 1, epoch 0, layer 0) under `scale`, on a switch of `memory`
    /// bytes of aggregators, over 100 Gb/s links with `faults` drawn from `seed`; paced, 64
    /// chunks in flight per worker, the default timers.
    pub fn new(scale: crate::fixed::Scale, memory: u64, faults: Faults, seed: u64) -> RunSetup {
        RunSetup {
            exchange: crate::node::ExchangeId {
                job: 1,
                epoch: 0,
                layer: 0,
                backward: false,
            },
            scale,
            switch: crate::switch::SwitchConfig::with_memory(memory),
            network: NetworkConfig::new(faults, seed),
            timers: crate::engine::Timers::default(),
            paced: true,
            window: 64,
            framing: crate::framing::HostFraming::default(),
        }
    }
}

/// Why an in-memory exchange failed.
#[derive(Debug, Error)]
pub enum ExchangeRunError {
    /// An engine could not be built.
    #[error(transparent)]
    Engine(#[from] crate::engine::EngineError),
    /// The switch refused the job.
    #[error(transparent)]
    Switch(#[from] crate::switch::SwitchError),
    /// The network run did not finish.
    #[error(transparent)]
    Network(#[from] NetworkError),
    /// A worker's control plane gave up (refused, aborted, the switch silent).
    #[error("worker {rank}: {failure}")]
    Control {
        /// The worker.
        rank: u16,
        /// What went wrong.
        failure: crate::control::WorkerFailure,
    },
    /// The feature matrix does not have one row per vertex of the plan.
    #[error("features hold {got} values, the graph needs {want}")]
    Features {
        /// Values given.
        got: usize,
        /// Vertices × width.
        want: usize,
    },
}

/// Run one exchange of `plan` over the in-memory network: a fresh switch, one engine per worker
/// (the kind of the plan's mode), `features` a row-major matrix of every vertex.
pub fn run_exchange(
    plan: std::sync::Arc<crate::plan::ExchangePlan>,
    features: &[f32],
    setup: &RunSetup,
) -> Result<ExchangeRun, ExchangeRunError> {
    run_exchange_through(plan.clone(), plan, features, setup)
}

/// [`run_exchange`] with the switch running `switch_plan` (for instance tables read back from
/// control-plane entries) while the workers run `plan`.
pub fn run_exchange_through(
    switch_plan: std::sync::Arc<crate::plan::ExchangePlan>,
    plan: std::sync::Arc<crate::plan::ExchangePlan>,
    features: &[f32],
    setup: &RunSetup,
) -> Result<ExchangeRun, ExchangeRunError> {
    let kind = crate::kind::ExchangeKind::of_mode(plan.mode);
    run_kind(kind, switch_plan, plan, features, setup)
}

/// [`run_exchange`] with the engines of `kind` (a kind whose plan has another kind's shape:
/// G3 runs a host-exchange plan).
pub fn run_exchange_kind(
    kind: crate::kind::ExchangeKind,
    plan: std::sync::Arc<crate::plan::ExchangePlan>,
    features: &[f32],
    setup: &RunSetup,
) -> Result<ExchangeRun, ExchangeRunError> {
    run_kind(kind, plan.clone(), plan, features, setup)
}

/// [`run_exchange_kind`] through the control plane: the switch model behind its control
/// machine, each engine in a worker that says hello first over the same faulty links, and
/// the control plane's timers running throughout (`timers`).
pub fn run_exchange_controlled(
    kind: crate::kind::ExchangeKind,
    plan: std::sync::Arc<crate::plan::ExchangePlan>,
    features: &[f32],
    setup: &RunSetup,
    timers: crate::control::ControlTimers,
) -> Result<ExchangeRun, ExchangeRunError> {
    let (switch, engines) = build(kind, plan.clone(), &plan, features, setup)?;
    let world = plan.workers;
    let (mut switch, mut workers) = crate::control::nodes::controlled_star(
        switch,
        engines,
        setup.exchange.job,
        kind.name(),
        timers,
    );
    let mut net = Network::new(setup.network, world);
    let network = net.run_while(&mut switch, &mut workers, Nanos::MAX, |w| {
        w.iter().all(|w| w.exchange_finished()) || w.iter().any(|w| w.control.failure().is_some())
    })?;
    for (rank, w) in workers.iter().enumerate() {
        if let Some(failure) = w.control.failure() {
            return Err(ExchangeRunError::Control {
                rank: rank as u16,
                failure: failure.clone(),
            });
        }
    }
    let engines: Vec<&dyn Exchange> = workers
        .iter()
        .map(|w| w.engine().expect("each worker ran its engine"))
        .collect();
    Ok(ExchangeRun {
        outputs: engines.iter().map(|e| e.output().clone()).collect(),
        engines: engines.iter().map(|e| e.stats().clone()).collect(),
        switch: switch.switch.counters().clone(),
        network,
    })
}

fn run_kind(
    kind: crate::kind::ExchangeKind,
    switch_plan: std::sync::Arc<crate::plan::ExchangePlan>,
    plan: std::sync::Arc<crate::plan::ExchangePlan>,
    features: &[f32],
    setup: &RunSetup,
) -> Result<ExchangeRun, ExchangeRunError> {
    let (mut switch, engines) = build(kind, switch_plan, &plan, features, setup)?;
    run_on(&mut switch, engines, setup, |s| s.counters().clone())
}

/// [`run_exchange_kind`] on a switch model in `shards` shards
/// ([`crate::switch::ShardedSwitch`]), driven packet by packet: the same exchange, its
/// aggregators spread over shards by destination.
pub fn run_exchange_sharded(
    kind: crate::kind::ExchangeKind,
    plan: std::sync::Arc<crate::plan::ExchangePlan>,
    features: &[f32],
    setup: &RunSetup,
    shards: u16,
) -> Result<ExchangeRun, ExchangeRunError> {
    let engines = engines(kind, &plan, features, setup)?;
    let mut switch = crate::switch::ShardedSwitch::new(setup.switch, shards)?;
    switch.add_job(job_of(&plan, setup))?;
    run_on(&mut switch, engines, setup, |s| s.counters())
}

/// Run `engines` against `switch` until they are finished; `counters` reads the switch's.
fn run_on<S: SwitchNode>(
    switch: &mut S,
    mut engines: Vec<Box<dyn Exchange>>,
    setup: &RunSetup,
    counters: impl Fn(&S) -> crate::switch::SwitchCounters,
) -> Result<ExchangeRun, ExchangeRunError> {
    let mut net = Network::new(setup.network, engines.len() as u16);
    let network = net.run(switch, &mut engines)?;
    Ok(ExchangeRun {
        outputs: engines.iter().map(|e| e.output().clone()).collect(),
        engines: engines.iter().map(|e| e.stats().clone()).collect(),
        switch: counters(switch),
        network,
    })
}

/// One exchange of `plan` as [`run_exchange_kind`] runs it, on a two-level fabric instead of
/// one switch: `racks` leaves (workers in racks of consecutive ranks) under one spine, every
/// switch with the setup's resources, the links between them like the workers' with the
/// setup's faults. The counters are every switch's added up; the network's cover the fabric's
/// inner links too.
pub fn run_exchange_two_level(
    kind: crate::kind::ExchangeKind,
    plan: std::sync::Arc<crate::plan::ExchangePlan>,
    features: &[f32],
    setup: &RunSetup,
    racks: u16,
) -> Result<(ExchangeRun, crate::leafspine::LeafSpine), ExchangeRunError> {
    let mut engines = engines(kind, &plan, features, setup)?;
    let mut fabric = crate::leafspine::LeafSpine::new(
        job_of(&plan, setup),
        crate::switch::Racks::even(plan.workers, racks)?,
        setup.switch,
        setup.network.link,
        setup.network.faults,
        // Other draws than the workers' links.
        setup.network.seed ^ 0x5eed_1eaf,
    )?;
    let mut net = Network::new(setup.network, plan.workers);
    let mut network = net.run_while(&mut fabric, &mut engines, Nanos::MAX, |w| {
        w.iter().all(|e| e.is_finished())
    })?;
    let inner = fabric.faults();
    network.transmitted += inner.packets;
    network.lost += inner.lost;
    network.duplicated += inner.duplicated;
    network.reordered += inner.reordered;
    network.corrupted += inner.corrupted;
    network.frame_errors += inner.frame_errors;
    let run = ExchangeRun {
        outputs: engines.iter().map(|e| e.output().clone()).collect(),
        engines: engines.iter().map(|e| e.stats().clone()).collect(),
        switch: fabric.counters(),
        network,
    };
    Ok((run, fabric))
}

/// The job of one exchange: `plan` for every layer up to the setup's.
fn job_of(
    plan: &std::sync::Arc<crate::plan::ExchangePlan>,
    setup: &RunSetup,
) -> crate::switch::JobConfig {
    crate::switch::JobConfig::new(
        setup.exchange.job,
        (0..=setup.exchange.layer).map(|_| plan.clone()).collect(),
    )
}

/// A switch running `switch_plan` and one engine of `kind` per worker of `plan`.
fn build(
    kind: crate::kind::ExchangeKind,
    switch_plan: std::sync::Arc<crate::plan::ExchangePlan>,
    plan: &std::sync::Arc<crate::plan::ExchangePlan>,
    features: &[f32],
    setup: &RunSetup,
) -> Result<(Switch, Vec<Box<dyn Exchange>>), ExchangeRunError> {
    let engines = engines(kind, plan, features, setup)?;
    let mut switch = Switch::new(setup.switch);
    switch.add_job(job_of(&switch_plan, setup))?;
    Ok((switch, engines))
}

/// One engine of `kind` per worker of `plan`, each holding its rows of `features`.
fn engines(
    kind: crate::kind::ExchangeKind,
    plan: &std::sync::Arc<crate::plan::ExchangePlan>,
    features: &[f32],
    setup: &RunSetup,
) -> Result<Vec<Box<dyn Exchange>>, ExchangeRunError> {
    use crate::cc::{Aimd, Controller, Unpaced};
    use crate::engine::{EngineConfig, LocalFeatures};

    let width = plan.width;
    let n = plan.owner.len();
    if features.len() != n * width {
        return Err(ExchangeRunError::Features {
            got: features.len(),
            want: n * width,
        });
    }
    let mut engines: Vec<Box<dyn Exchange>> = Vec::new();
    for w in 0..plan.workers {
        let (vertices, values) = plan.local_rows(w, features);
        let local = LocalFeatures {
            vertices: &vertices,
            width,
            values: &values,
        };
        let cfg = EngineConfig {
            exchange: setup.exchange,
            seq: 1,
            rank: w,
            scale: setup.scale,
            timers: setup.timers,
            window: setup.window,
            framing: setup.framing,
        };
        let cc: Box<dyn Controller> = if setup.paced {
            Box::new(Aimd::new(setup.network.link.rate))
        } else {
            Box::new(Unpaced)
        };
        // Each worker runs on its own view of the plan, as a worker of a real job does.
        let view = std::sync::Arc::new(plan.for_worker(w));
        engines.push(kind.engine(cfg, view, local, cc, 0)?);
    }
    Ok(engines)
}
