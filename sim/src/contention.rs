//! The exchange beside other traffic: background TCP flows ([`crate::background`]) at a set
//! load share the fabric with one exchange, in each setting of the workers' ECN rate control
//! (halve, proportional, off). What each costs the other is measured against runs alone in the
//! same study: the exchange's time against its time on an empty fabric and against its share
//! bound (the flows' average load taken off its busiest link), and the flows' completion-time
//! slowdowns against those of the same flows with no exchange running.

use serde::{Deserialize, Serialize};
use switchgnn_dataplane::fixed::Scale;
use switchgnn_dataplane::node::{HostNode, Node};
use switchgnn_dataplane::plan::ExchangePlan;
use switchgnn_dataplane::switch::{Switch, SwitchConfig};
use switchgnn_dataplane::{Address, Nanos, Transmit};

use crate::background::{Background, BackgroundSpec, FctSummary, FlowSizes};
use crate::driver::{run_with_background, RunResult, SimConfig};
use crate::fabric::{PortStats, Topology};
use crate::modes::{simulate_exchange_beside, ExchangeSetup, ModeError, RateControl, SimMode};
use crate::racks::FabricShape;

/// One setting of the workers' rate control.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct WithTraffic {
    /// How the exchange's workers react to ECN.
    pub rate_control: RateControl,
    /// The exchange on an empty fabric.
    pub exchange_alone_ns: Nanos,
    /// The time the exchange needs beside flows that take exactly their average load off
    /// every link: its busiest link's bytes (alone) at the share the flows leave, `1 − load`
    /// of the link's rate, and never less than its time alone. Beyond it, the exchange lost
    /// more than the flows' share; below it, the flows waited for the exchange. `Nanos::MAX`
    /// when the flows' average load alone fills a link the exchange uses (an oversubscribed
    /// uplink): no share is left, and there is no bound.
    pub share_bound_ns: Nanos,
    /// The exchange beside the flows.
    pub exchange_ns: Nanos,
    /// The flows beside the exchange.
    pub flows: FctSummary,
    /// Their 99th-percentile slowdown over that of the same flows with no exchange running.
    pub p99_ratio: f64,
    /// Their median slowdown over that of the same flows with no exchange running.
    pub median_ratio: f64,
    /// Retransmissions of the exchange's workers.
    pub exchange_retransmits: u64,
}

impl WithTraffic {
    /// The exchange's time beside the flows over its time alone.
    pub fn exchange_ratio(&self) -> f64 {
        self.exchange_ns as f64 / self.exchange_alone_ns.max(1) as f64
    }

    /// The exchange's time beside the flows over its share bound (`None` without a bound).
    pub fn bound_ratio(&self) -> Option<f64> {
        (self.share_bound_ns != Nanos::MAX)
            .then(|| self.exchange_ns as f64 / self.share_bound_ns.max(1) as f64)
    }
}

/// What a study found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Contention {
    /// Workers of the exchange.
    pub workers: u16,
    /// The switch's aggregator memory (bytes).
    pub memory: u64,
    /// The chip preset the switch ran on.
    pub chip: String,
    /// The exchange kind that ran.
    pub mode: SimMode,
    /// The leaf-spine the study ran on (`None`: the star).
    #[serde(default)]
    pub fabric: Option<FabricShape>,
    /// The flows' size distribution.
    pub sizes: FlowSizes,
    /// Their offered load, a fraction of each host's uplink.
    pub load: f64,
    /// Flows arrive during the exchange's time alone (with the default rate control), or the
    /// span asked for.
    pub duration_ns: Nanos,
    /// Flows started.
    pub flows: usize,
    /// The flows with no exchange running.
    pub alone: FctSummary,
    /// One entry per rate-control setting, in [`RateControl::ALL`]'s order.
    pub settings: Vec<WithTraffic>,
}

impl Contention {
    /// "star", or the fabric and its levels of aggregation.
    pub fn place(&self) -> String {
        match self.fabric {
            None => "star".into(),
            Some(f) => {
                let levels = if f.two_level {
                    "two-level"
                } else {
                    "one level"
                };
                format!("{} ({levels})", f.describe(self.workers))
            }
        }
    }

    /// The entry of `rate_control`.
    pub fn setting(&self, rate_control: RateControl) -> Option<&WithTraffic> {
        self.settings
            .iter()
            .find(|w| w.rate_control == rate_control)
    }
}

/// A host with nothing to do: the background's runs without an exchange.
#[derive(Debug, Default)]
struct Idle;

impl Node for Idle {
    fn handle_packet(&mut self, _: Nanos, _: Address, _: &[u8]) {}
    fn handle_timeout(&mut self, _: Nanos) {}
    fn poll_transmit(&mut self, _: Nanos, _: &mut [u8]) -> Option<Transmit> {
        None
    }
    fn poll_timeout(&self) -> Option<Nanos> {
        None
    }
}

impl HostNode for Idle {
    fn is_done(&self) -> bool {
        true
    }
}

/// Run `background`'s flows on `cfg`'s fabric with nothing else on it.
pub fn background_alone(
    cfg: &SimConfig,
    background: &mut Background,
) -> Result<RunResult, ModeError> {
    let hosts = cfg.topology.hosts();
    let mut idle: Vec<Box<Idle>> = (0..hosts).map(|_| Box::default()).collect();
    let mut switch = Switch::new(SwitchConfig {
        aggregators: 1,
        ecn_threshold: cfg.switch.ecn_threshold,
        ports: hosts,
    });
    Ok(run_with_background(
        cfg,
        None,
        &mut switch,
        &mut idle,
        None,
        Some(background),
        None,
    )?)
}

/// Run the study for `plan`'s exchange of `mode` on `cfg`'s star, or on `fabric` (with its
/// hosts split over the racks): flows of `sizes` at `load` (a fraction of each host's link),
/// arriving over the exchange's time alone or over `duration_ns` if given; `seed` draws them.
#[allow(clippy::too_many_arguments)]
pub fn contention(
    plan: &ExchangePlan,
    mode: SimMode,
    cfg: &SimConfig,
    setup: &ExchangeSetup,
    scale: Scale,
    fabric: Option<FabricShape>,
    sizes: FlowSizes,
    load: f64,
    duration_ns: Option<Nanos>,
    seed: u64,
) -> Result<Contention, ModeError> {
    let cfg = &fabric.map_or(*cfg, |f| f.config(cfg));
    let setup = &ExchangeSetup {
        two_level: fabric.is_some_and(|f| f.two_level),
        ..*setup
    };
    let hosts = cfg.topology.hosts();
    let link = cfg.topology.host_link();
    let gbps = cfg.host.uplink_gbps(&cfg.topology);
    let exchange = |rate_control: RateControl, background: Option<&mut Background>| {
        let setup = ExchangeSetup {
            rate_control,
            ..*setup
        };
        simulate_exchange_beside(plan.clone(), cfg, &setup, scale, None, background)
            .map(|(sim, _)| sim)
    };
    let alone: Vec<(RateControl, Nanos, Nanos)> = RateControl::ALL
        .iter()
        .map(|&rc| {
            let run = exchange(rc, None)?.run;
            Ok::<_, ModeError>((rc, run.finish_ns, share_bound(cfg, &run, load)))
        })
        .collect::<Result<_, _>>()?;
    let duration = duration_ns.unwrap_or(alone[0].1).max(1);
    let spec = BackgroundSpec::new(sizes, load, duration, seed);
    let flows =
        || Background::new(spec, hosts, gbps, link.delay_ns, cfg.frame_overhead).on(&cfg.topology);

    let mut quiet = flows();
    background_alone(cfg, &mut quiet)?;
    let flows_alone = FctSummary::of(&quiet.records());

    let settings = alone
        .into_iter()
        .map(|(rate_control, exchange_alone_ns, share_bound_ns)| {
            let mut b = flows();
            let sim = exchange(rate_control, Some(&mut b))?;
            let summary = FctSummary::of(&b.records());
            Ok::<_, ModeError>(WithTraffic {
                rate_control,
                exchange_alone_ns,
                share_bound_ns,
                exchange_ns: sim.run.finish_ns,
                p99_ratio: summary.p99_slowdown / flows_alone.p99_slowdown.max(1e-9),
                median_ratio: summary.median_slowdown / flows_alone.median_slowdown.max(1e-9),
                flows: summary,
                exchange_retransmits: sim.retransmits,
            })
        })
        .collect::<Result<_, _>>()?;
    Ok(Contention {
        workers: hosts,
        memory: setup.switch_memory,
        chip: cfg.switch.chip.preset.name().to_string(),
        mode,
        fabric,
        sizes,
        load,
        duration_ns: duration,
        flows: quiet.flows(),
        alone: flows_alone,
        settings,
    })
}

/// The time `run`'s exchange needs on `cfg` beside flows that take exactly their average load
/// off every link: its busiest link's bytes at the share of the link's rate the flows leave,
/// never less than its time alone; `Nanos::MAX` when the flows alone fill a link it uses. On a
/// host's link the flows offer `load` of its rate; on a leaf-spine's inner links, the share of
/// that which crosses racks (every flow picks its destination among the other hosts alike)
/// spread over the spines (ECMP).
fn share_bound(cfg: &SimConfig, run: &RunResult, load: f64) -> Nanos {
    // Bytes over the bytes per nanosecond the flows leave (none when they take it all).
    let at_share = |bytes: u64, gbps: f64, taken: f64| match bytes {
        0 => 0.0,
        _ if taken >= 1.0 => f64::INFINITY,
        _ => bytes as f64 / (gbps / 8.0 * (1.0 - taken)),
    };
    let busiest = |ports: &[PortStats], gbps: f64, taken: f64| -> f64 {
        ports
            .iter()
            .map(|p| at_share(p.bytes, gbps, taken))
            .fold(0.0, f64::max)
    };
    let host_gbps = cfg.host.uplink_gbps(&cfg.topology);
    let mut slowest = busiest(&run.uplinks, host_gbps, load).max(busiest(
        &run.downlinks,
        cfg.topology.host_link().gbps,
        load,
    ));
    if let Topology::LeafSpine {
        hosts_per_rack,
        spines,
        uplink,
        ..
    } = cfg.topology
    {
        let hosts = f64::from(cfg.topology.hosts());
        let per_rack = f64::from(hosts_per_rack);
        let crossing = (hosts - per_rack) / (hosts - 1.0).max(1.0);
        let taken =
            load * per_rack * host_gbps * crossing / (f64::from(spines.max(1)) * uplink.gbps);
        slowest = slowest
            .max(busiest(&run.leaf_uplinks, uplink.gbps, taken))
            .max(busiest(&run.spine_downlinks, uplink.gbps, taken));
    }
    if slowest.is_finite() {
        (slowest.ceil() as Nanos).max(run.finish_ns)
    } else {
        Nanos::MAX
    }
}

/// The study as a Markdown table: one row per rate-control setting.
pub fn contention_table(studies: &[Contention]) -> String {
    let mut out = String::from(
        "| workers | chip | memory | mode | fabric | flows | load | rate control | exchange alone \
         (µs) | share bound (µs) | beside flows (µs) | × alone | × bound | flows' p50 / p99 \
         slowdown | alone p50 / p99 | p99 × |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for c in studies {
        for w in &c.settings {
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} {} | {:.2} | {} | {:.1} | {} | {:.1} | {:.2} | {} | {:.2} / {:.2} | {:.2} / {:.2} | {:.2} |\n",
                c.workers,
                c.chip,
                switchgnn_partition::size::format_bytes(c.memory),
                c.mode.name(),
                c.place(),
                c.flows,
                c.sizes.name(),
                c.load,
                w.rate_control.name(),
                w.exchange_alone_ns as f64 / 1e3,
                w.bound_ratio()
                    .map_or("—".into(), |_| format!("{:.1}", w.share_bound_ns as f64 / 1e3)),
                w.exchange_ns as f64 / 1e3,
                w.exchange_ratio(),
                w.bound_ratio().map_or("—".into(), |r| format!("{r:.2}")),
                w.flows.median_slowdown,
                w.flows.p99_slowdown,
                c.alone.median_slowdown,
                c.alone.p99_slowdown,
                w.p99_ratio,
            ));
        }
    }
    out
}
