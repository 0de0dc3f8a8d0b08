//! The event loop: hosts and a switch, all sans-IO state machines, joined by the fabric's
//! ports. It is the simulator's only driver, for the dataplane's own engines and switch model
//! as for the simple nodes of the validation tests.

use std::time::Instant;

use serde::{Deserialize, Serialize};
use switchgnn_dataplane::fault::{FaultStats, Faults};
pub use switchgnn_dataplane::node::{HostNode, SwitchNode};
use switchgnn_dataplane::switch::Switch;
use switchgnn_dataplane::wire::MAX_LANES;
use switchgnn_dataplane::{Address, Nanos};
use thiserror::Error;

mod event_loop;
mod flight;
mod pipes;

pub use pipes::{pipe_room, PassPipes, HOME_PIPE};

use event_loop::Loop;

use crate::background::Background;
use crate::fabric::{HostSpec, PortStats, SwitchSpec, Topology};
use crate::series::{Series, Traffic};

/// Chunk bundling: an exchange of width `width` simulated with one 64-lane chunk per vertex,
/// each packet standing for the `chunks` packets of the real exchange. Every packet of a
/// vertex then follows the same path at once, so times are those of the real exchange to
/// within one vertex's chunks per hop, at 1/`chunks` of the work. Byte counts and per-packet
/// costs are those of the real packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bundle {
    /// The real exchange's width.
    pub width: u32,
    /// Real chunks each simulated packet stands for.
    pub chunks: u32,
}

impl Bundle {
    /// The bundling of an exchange of width `width`.
    pub fn of_width(width: usize) -> Bundle {
        Bundle {
            width: width as u32,
            chunks: width.div_ceil(MAX_LANES) as u32,
        }
    }
}

pub use switchgnn_dataplane::wire::FRAME_OVERHEAD;

/// Everything the core is configured with.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SimConfig {
    /// Hosts, switches and links.
    pub topology: Topology,
    /// The switch's chip, buffers and ECN threshold.
    pub switch: SwitchSpec,
    /// The hosts' stacks.
    pub host: HostSpec,
    /// Bytes a frame adds to the dataplane packet on the wire ([`FRAME_OVERHEAD`] for
    /// Ethernet/IPv4/UDP).
    pub frame_overhead: u64,
    /// Width of one bucket of the time series.
    pub sample_ns: Nanos,
    /// Events after which a run is declared not to terminate.
    pub max_events: u64,
    /// Faults on every hop (the dataplane's injector), and their seed.
    #[serde(default)]
    pub faults: Faults,
    /// Seed of the fault injector.
    #[serde(default)]
    pub fault_seed: u64,
}

impl SimConfig {
    /// The paper's setup: a star of `hosts` on 100 Gbps, 2 µs links.
    pub fn paper(hosts: u16) -> SimConfig {
        SimConfig {
            topology: Topology::star(hosts, crate::fabric::LinkSpec::hundred_gbps()),
            switch: SwitchSpec::for_hosts(hosts),
            host: HostSpec::hundred_gbps(),
            frame_overhead: FRAME_OVERHEAD,
            sample_ns: 10_000,
            max_events: 2_000_000_000,
            faults: Faults::none(),
            fault_seed: 0,
        }
    }
}

/// Why a run did not finish.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SimError {
    /// Nothing is scheduled, yet hosts or flows are not done: a node waits for nothing.
    #[error("no event left at {now} ns but {unfinished} hosts and {flows} background flows are unfinished")]
    Stalled {
        /// When the events ran out.
        now: Nanos,
        /// Hosts not done.
        unfinished: usize,
        /// Background flows not done.
        flows: usize,
    },
    /// The run took more events than its limit.
    #[error("more than {0} events: the run does not terminate")]
    EventLimit(u64),
    /// The hosts given do not match the topology.
    #[error("the topology has {topology} hosts but {given} were given")]
    Hosts {
        /// Hosts of the topology.
        topology: u16,
        /// Hosts given.
        given: usize,
    },
    /// The leaves given do not match the topology's racks.
    #[error("two-level aggregation needs a leaf-spine and a leaf switch per rack ({racks} racks, {given} leaves given)")]
    Leaves {
        /// Racks of the topology (0 on a star).
        racks: u16,
        /// Leaf switches given.
        given: usize,
    },
}

/// The pipeline's and the recirculation paths' totals.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Recirculation {
    /// Aggregator passes in all.
    pub passes: u64,
    /// Trips around the recirculation paths (passes after each packet's first).
    pub recirculations: u64,
    /// Bytes those trips carried (with the pass header).
    pub bytes: u64,
    /// Time the recirculation paths were busy, each path's time weighed by its share of their
    /// whole bandwidth (the time one server of that bandwidth would be busy).
    pub busy_ns: f64,
    /// Longest wait of a packet for the recirculation paths.
    pub max_wait_ns: f64,
    /// Time the pipes were busy with passes, each pipe's time weighed by its share of the
    /// pipes used (the time one server of their summed rate would be busy).
    #[serde(default)]
    pub pipeline_busy_ns: f64,
    /// Longest wait of a packet for a pipeline slot.
    #[serde(default)]
    pub pipeline_max_wait_ns: f64,
}

/// One run's measurements.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunResult {
    /// When the last host finished.
    pub finish_ns: Nanos,
    /// Events handled.
    pub events: u64,
    /// Wall-clock seconds the run took.
    pub wall_seconds: f64,
    /// Per host: its uplink (host → switch).
    pub uplinks: Vec<PortStats>,
    /// Per host: the switch's egress towards it.
    pub downlinks: Vec<PortStats>,
    /// A leaf-spine's leaf egresses towards the spines, rack-major (`r · spines + s`); empty
    /// for a star.
    #[serde(default)]
    pub leaf_uplinks: Vec<PortStats>,
    /// A leaf-spine's spine egresses towards the leaves, spine-major (`s · racks + r`).
    #[serde(default)]
    pub spine_downlinks: Vec<PortStats>,
    /// The pipelines' and recirculation paths' totals.
    pub recirculation: Recirculation,
    /// Most aggregators held at once.
    pub peak_aggregators: usize,
    /// Bytes delivered to hosts, by what they carried.
    pub delivered: Traffic,
    /// Measurements over time.
    pub series: Series,
    /// What the fault injector did (all zero without faults).
    #[serde(default)]
    pub faults: FaultStats,
}

impl RunResult {
    /// Frame bytes on all links, both directions.
    pub fn link_bytes(&self) -> u64 {
        self.uplinks
            .iter()
            .chain(&self.downlinks)
            .map(|p| p.bytes)
            .sum()
    }

    /// Frame bytes on the links between leaves and spines, both directions: what crossed the
    /// spine layer (0 on a star).
    pub fn spine_bytes(&self) -> u64 {
        self.leaf_uplinks
            .iter()
            .chain(&self.spine_downlinks)
            .map(|p| p.bytes)
            .sum()
    }

    /// Packets dropped at full queues, every switch egress.
    pub fn drops(&self) -> u64 {
        self.downlinks
            .iter()
            .chain(&self.leaf_uplinks)
            .chain(&self.spine_downlinks)
            .map(|p| p.drops)
            .sum()
    }

    /// The deepest backlog any host's downlink had.
    pub fn peak_queue(&self) -> u64 {
        self.downlinks
            .iter()
            .map(|p| p.peak_backlog)
            .max()
            .unwrap_or(0)
    }

    /// Events handled per wall-clock second.
    pub fn events_per_second(&self) -> f64 {
        self.events as f64 / self.wall_seconds.max(1e-9)
    }
}

/// Sees every packet at the switch's ports, as a port mirror would: each one that arrives
/// from a worker and each one the switch sends to a worker, at its simulated time (a packet
/// crossing a recirculation path is not seen again).
pub trait Tap {
    /// `bytes` went from `from` to `to` at `at`.
    fn packet(&mut self, at: Nanos, from: Address, to: Address, bytes: &[u8]);
}

/// Run until every host is done. Hosts are numbered as the topology's.
pub fn run<S: SwitchNode, H: HostNode + ?Sized>(
    cfg: &SimConfig,
    bundle: Option<Bundle>,
    switch: &mut S,
    hosts: &mut [Box<H>],
) -> Result<RunResult, SimError> {
    run_tapped(cfg, bundle, switch, hosts, None)
}

/// [`run`], showing every packet at the switch's ports to `tap`.
pub fn run_tapped<S: SwitchNode, H: HostNode + ?Sized>(
    cfg: &SimConfig,
    bundle: Option<Bundle>,
    switch: &mut S,
    hosts: &mut [Box<H>],
    tap: Option<&mut dyn Tap>,
) -> Result<RunResult, SimError> {
    run_with_background(cfg, bundle, switch, hosts, tap, None, None)
}

/// [`run_tapped`] with `background` flows between the hosts beside them: they share the
/// hosts' uplinks and the switch's egress queues (marked with ECN above the threshold, as
/// the exchange's packets are), and the run goes on until they have all completed too. The
/// result's `finish_ns` is still when the last host finished. `pass_pipes` places the chip's
/// passes on its pipes as the P4 program does (`None`: every pass in the home pipe).
pub fn run_with_background<S: SwitchNode, H: HostNode + ?Sized>(
    cfg: &SimConfig,
    bundle: Option<Bundle>,
    switch: &mut S,
    hosts: &mut [Box<H>],
    tap: Option<&mut dyn Tap>,
    background: Option<&mut Background>,
    pass_pipes: Option<&PassPipes>,
) -> Result<RunResult, SimError> {
    run_fabric(
        cfg,
        bundle,
        switch,
        &mut [],
        hosts,
        tap,
        background,
        pass_pipes,
    )
}

/// [`run_with_background`] with two-level aggregation on a leaf-spine: `spine` (spine 0) is
/// the exchange's switch with a leaf on each port (rack `r` on port `r`), and every host's
/// packets go to `leaves[rack]` first, the switch model in its leaf tier, which sums what its
/// rack contributes, sends partial sums up and relays the rest. Each leaf is a chip of
/// `cfg.switch`'s kind with pipes and recirculation paths of its own, and `pass_pipes` places
/// the passes of its hosts' packets (the spine's, of the leaves' partial sums, run in its home
/// pipe). `tap` sees the leaves' ports towards the hosts.
#[allow(clippy::too_many_arguments)]
pub fn run_two_level<S: SwitchNode, H: HostNode + ?Sized>(
    cfg: &SimConfig,
    bundle: Option<Bundle>,
    spine: &mut S,
    leaves: &mut [Switch],
    hosts: &mut [Box<H>],
    tap: Option<&mut dyn Tap>,
    background: Option<&mut Background>,
    pass_pipes: Option<&PassPipes>,
) -> Result<RunResult, SimError> {
    match cfg.topology {
        Topology::LeafSpine { racks, .. } if usize::from(racks) == leaves.len() => run_fabric(
            cfg, bundle, spine, leaves, hosts, tap, background, pass_pipes,
        ),
        Topology::LeafSpine { racks, .. } => Err(SimError::Leaves {
            racks,
            given: leaves.len(),
        }),
        Topology::Star { .. } => Err(SimError::Leaves {
            racks: 0,
            given: leaves.len(),
        }),
    }
}

/// The event loop behind every `run_*`: set up the loop, prime every node's first events,
/// then pop and dispatch events until every host (and background flow) is done.
#[allow(clippy::too_many_arguments)]
fn run_fabric<S: SwitchNode, H: HostNode + ?Sized>(
    cfg: &SimConfig,
    bundle: Option<Bundle>,
    switch: &mut S,
    leaves: &mut [Switch],
    hosts: &mut [Box<H>],
    tap: Option<&mut dyn Tap>,
    background: Option<&mut Background>,
    pass_pipes: Option<&PassPipes>,
) -> Result<RunResult, SimError> {
    if hosts.len() != usize::from(cfg.topology.hosts()) {
        return Err(SimError::Hosts {
            topology: cfg.topology.hosts(),
            given: hosts.len(),
        });
    }
    let started = Instant::now();
    // A tap of any lifetime, shortened to the loop's.
    let tap = tap.map(|t| t as &mut dyn Tap);
    let mut l = Loop::new(
        cfg, bundle, switch, leaves, hosts, tap, background, pass_pipes,
    );
    l.prime();
    let mut events = 0u64;
    while l.unfinished > 0 || l.background.as_ref().is_some_and(|b| !b.is_done()) {
        let Some((at, event)) = l.events.pop() else {
            return Err(SimError::Stalled {
                now: l.now,
                unfinished: l.unfinished,
                flows: l.background.as_ref().map_or(0, |b| b.unfinished()),
            });
        };
        step(&mut l, at, event, &mut events, cfg.max_events)?;
    }
    // What is still on its way when the last host finishes arrives (no timer fires any more),
    // so that every byte the hosts sent is counted on every link it crosses.
    while let Some((at, event)) = l.events.pop() {
        if !event.is_timer() {
            step(&mut l, at, event, &mut events, cfg.max_events)?;
        }
    }
    Ok(l.result(events, started))
}

/// Handle `event`, due `at`, as the `events`th of at most `max`.
fn step<S: SwitchNode, H: HostNode + ?Sized>(
    l: &mut Loop<'_, S, H>,
    at: Nanos,
    event: flight::Event,
    events: &mut u64,
    max: u64,
) -> Result<(), SimError> {
    *events += 1;
    if *events > max {
        return Err(SimError::EventLimit(max));
    }
    l.now = l.now.max(at);
    l.dispatch(event);
    Ok(())
}
