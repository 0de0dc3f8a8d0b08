//! The chip options of every command that judges a switch (`analyze`, `prepare`, `simulate`,
//! `p4 resources`), and the verdicts they print.

use anyhow::{bail, Context, Result};
use switchgnn_chip::{Chip, ChipChoice, HostCost};
use switchgnn_dataplane::wire::FRAME_OVERHEAD;
use switchgnn_dataplane::ExchangeKind;
use switchgnn_datasets::Graph;
use switchgnn_partition::{ExchangeChoice, Plan, PlannedOn};
use switchgnn_scheduler::exchange::PlanOptions;
use switchgnn_scheduler::planner::{layer_choice, weigh, CANDIDATES};

#[derive(Debug, Clone, clap::Args)]
pub struct ChipArgs {
    /// Switch chip: tofino1-32, tofino1-64, tofino2, or ideal (the paper's switch, where
    /// aggregator passes and recirculation cost nothing). Default: the smallest real chip that
    /// hosts the workers at the link rate.
    #[arg(long)]
    pub chip: Option<String>,
    /// Front-panel ports put in loopback: more recirculation bandwidth, fewer worker ports.
    #[arg(long, default_value_t = 0)]
    pub loopback_ports: u32,
    /// Dedicated recirculation ports the program uses (default: all, one per pipe).
    #[arg(long)]
    pub recirculation_ports: Option<u32>,
}

impl ChipArgs {
    pub fn choice(&self) -> Result<ChipChoice> {
        Ok(ChipChoice {
            preset: self.chip.as_deref().map(str::parse).transpose()?,
            loopback_ports: self.loopback_ports,
            recirculation_ports: self.recirculation_ports,
        })
    }
}

/// The options of a command that prints verdicts (`analyze`, `prepare`): the chip and what the
/// bounds charge each host.
#[derive(Debug, Clone, clap::Args)]
pub struct VerdictArgs {
    #[command(flatten)]
    pub chip: ChipArgs,
    /// Host link rate, Gbit/s (for the verdict).
    #[arg(long, default_value_t = 100.0)]
    pub gbps: f64,
    /// Host processing cost per packet sent and per packet received, ns (for the verdict).
    #[arg(long, default_value_t = 20.0)]
    pub host_packet_ns: f64,
    /// How the host-only baseline frames its copies.
    #[command(flatten)]
    pub framing: crate::framing_args::FramingArgs,
}

impl VerdictArgs {
    /// What the bounds charge each host.
    pub fn cost(&self) -> Result<HostCost> {
        if !(self.gbps > 0.0 && self.host_packet_ns >= 0.0) {
            bail!("--gbps must be positive and --host-packet-ns not negative");
        }
        Ok(HostCost {
            link_gbps: self.gbps,
            per_packet_ns: self.host_packet_ns,
            frame_overhead: FRAME_OVERHEAD,
            framing: self.framing.framing(),
        })
    }
}

/// Per layer: the planner's pick (`auto`) or the named kind, with every candidate's predicted
/// lower bound on `chip`.
pub fn choose_exchanges(
    plan: &Plan,
    graph: &Graph,
    exchange: ExchangeKind,
    chip: &Chip,
    cost: &HostCost,
) -> Result<ExchangeChoice> {
    let mut layers = Vec::new();
    for layer in 0..plan.manifest.spec.feature_dims.len() {
        let choice = weigh(
            graph,
            plan,
            layer,
            &CANDIDATES,
            chip,
            cost,
            PlanOptions::default(),
        )
        .with_context(|| format!("cannot weigh the exchange kinds of layer {layer}"))?;
        let mut entry = layer_choice(&choice);
        if exchange != ExchangeKind::Auto {
            entry.kind = exchange.name().to_string();
        }
        layers.push(entry);
    }
    Ok(ExchangeChoice {
        by: exchange.name().to_string(),
        chip: chip.describe(),
        layers,
        planned_on: Some(PlannedOn {
            preset: chip.preset.name().to_string(),
            loopback_ports: chip.loopback_ports,
            recirculation_ports: Some(chip.recirculation_ports),
            link_gbps: cost.link_gbps,
            host_packet_ns: cost.per_packet_ns,
            host_mtu: Some(cost.framing.mtu),
            host_ack_every: Some(cost.framing.ack_every),
        }),
    })
}

/// The `auto` choice with every default (the smallest real chip that hosts the workers at
/// 100 Gb/s, 20 ns per packet): what a plan prepared on the fly records. `None` when no chip
/// hosts that many workers.
pub fn default_choice(plan: &Plan, graph: &Graph) -> Result<Option<ExchangeChoice>> {
    let cost = HostCost {
        link_gbps: 100.0,
        per_packet_ns: 20.0,
        frame_overhead: FRAME_OVERHEAD,
        framing: Default::default(),
    };
    let Ok(chip) = ChipChoice::default().resolve(plan.manifest.spec.workers, cost.link_gbps) else {
        return Ok(None);
    };
    choose_exchanges(plan, graph, ExchangeKind::Auto, &chip, &cost).map(Some)
}
