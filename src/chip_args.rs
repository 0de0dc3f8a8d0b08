//! The chip options of every command that judges a switch (`analyze`, `prepare`, `simulate`,
//! `p4 resources`), and the verdicts they print.

use anyhow::{bail, Result};
use switchgnn_chip::{Chip, ChipChoice, HostCost, Load, Verdict};
use switchgnn_dataplane::plan::{ExchangePlan, Mode};
use switchgnn_dataplane::wire::FRAME_OVERHEAD;
use switchgnn_datasets::Graph;
use switchgnn_partition::Plan;
use switchgnn_scheduler::exchange::ExchangePlans;
use switchgnn_scheduler::OrderKind;

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
        })
    }
}

/// Per layer of `plan`: its SwitchGNN exchange against the host exchange on `chip`.
pub fn plan_verdicts(
    plan: &Plan,
    graph: &Graph,
    chip: &Chip,
    cost: &HostCost,
) -> Result<Vec<Verdict>> {
    let mut out = Vec::new();
    for (layer, &width) in plan.manifest.spec.feature_dims.iter().enumerate() {
        let blocks = ExchangePlan::from_plan(plan, layer)?;
        let host = ExchangePlan::whole_graph(
            graph,
            &plan.assignment,
            width,
            Mode::Host,
            OrderKind::Random,
            0,
        )?;
        out.push(Verdict::of(
            chip,
            &Load::of(&blocks, cost.frame_overhead),
            &Load::of(&host, cost.frame_overhead),
            cost,
        ));
    }
    Ok(out)
}
