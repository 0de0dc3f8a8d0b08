//! The chip options of every command that judges a switch (`analyze`, `prepare`, `simulate`,
//! `p4 resources`), and the verdicts they print.

use anyhow::{bail, Result};
use switchgnn_chip::{Chip, ChipChoice, Delays, HostCost};
use switchgnn_dataplane::wire::FRAME_OVERHEAD;
use switchgnn_dataplane::ExchangeKind;
use switchgnn_datasets::Graph;
use switchgnn_partition::{ExchangeChoice, Plan};
use switchgnn_scheduler::planner;

#[derive(Debug, Clone, clap::Args)]
pub(crate) struct ChipArgs {
    /// Switch chip: tofino1-32, tofino1-64, tofino2, or ideal (the paper's switch, where
    /// aggregator passes and recirculation cost nothing). Default: the smallest real chip that
    /// hosts the workers at the link rate.
    #[arg(long)]
    pub(crate) chip: Option<String>,
    /// Front-panel ports put in loopback as recirculation paths: more recirculation bandwidth,
    /// fewer worker ports. A number, or `spare`: every port no worker needs. Default: spare for
    /// `analyze` and `prepare` (what a switch with idle ports can spend); 0 for `simulate` and
    /// `p4 resources`, as `p4 entries` installs by default.
    #[arg(long, value_name = "N|spare")]
    pub(crate) loopback_ports: Option<LoopedPorts>,
    /// Dedicated recirculation ports the program uses (default: all, one per pipe).
    #[arg(long)]
    pub(crate) recirculation_ports: Option<u32>,
}

/// `--loopback-ports`: a count, or every port no worker needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LoopedPorts {
    Ports(u32),
    Spare,
}

impl std::str::FromStr for LoopedPorts {
    type Err = String;

    fn from_str(s: &str) -> Result<LoopedPorts, String> {
        match s {
            "spare" => Ok(LoopedPorts::Spare),
            _ => s
                .parse()
                .map(LoopedPorts::Ports)
                .map_err(|_| format!("`{s}`: give a number of ports, or spare")),
        }
    }
}

impl ChipArgs {
    /// The chip choice, with `default` looped ports where `--loopback-ports` is not given.
    pub(crate) fn choice(&self, default: LoopedPorts) -> Result<ChipChoice> {
        let looped = self.loopback_ports.unwrap_or(default);
        Ok(ChipChoice {
            preset: self.chip.as_deref().map(str::parse).transpose()?,
            loopback_ports: match looped {
                LoopedPorts::Ports(n) => n,
                LoopedPorts::Spare => 0,
            },
            recirculation_ports: self.recirculation_ports,
            spare_loopback: looped == LoopedPorts::Spare,
        })
    }

    /// The looped ports as a count, for a command that loops what the P4 program installs
    /// (`p4 resources`: `spare` depends on the chip and the cabling, so it takes a number).
    pub(crate) fn loopback_count(&self) -> Result<u32> {
        match self.loopback_ports.unwrap_or(LoopedPorts::Ports(0)) {
            LoopedPorts::Ports(n) => Ok(n),
            LoopedPorts::Spare => bail!(
                "--loopback-ports spare: give the number `p4 entries --loopback-ports` installs"
            ),
        }
    }
}

/// Say once per chip when `spare` looped its idle ports, so that no figure hides it.
pub(crate) fn note_spare(choice: &ChipChoice, chip: &Chip, workers: u32) {
    if choice.spare_loopback && chip.loopback_ports > 0 {
        eprintln!(
            "{} with {workers} workers: the {} front-panel ports no worker needs are looped back \
             as recirculation paths (--loopback-ports spare, the default here; 0 for none)",
            chip.preset.name(),
            chip.loopback_ports
        );
    }
}

/// The options of a command that prints verdicts (`analyze`, `prepare`): the chip and what the
/// bounds charge each host.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct VerdictArgs {
    #[command(flatten)]
    pub(crate) chip: ChipArgs,
    /// Host link rate, Gbit/s (for the verdict).
    #[arg(long, default_value_t = 100.0)]
    pub(crate) gbps: f64,
    /// Host processing cost per packet sent and per packet received, ns (for the verdict).
    #[arg(long, default_value_t = 20.0)]
    pub(crate) host_packet_ns: f64,
    /// One-way delay of a host's link to the switch, µs: each bound then adds the latency of
    /// the exchange's messages, (2 + 4 × blocks) such delays, so that plans of many blocks
    /// pay for their barriers (0: the resources alone; `simulate` counts its links' delay)
    #[arg(long, default_value_t = 0.0)]
    pub(crate) link_delay_us: f64,
    /// How the host-only baseline frames its copies.
    #[command(flatten)]
    pub(crate) framing: crate::framing_args::FramingArgs,
}

impl VerdictArgs {
    /// What the bounds charge each host.
    pub(crate) fn cost(&self) -> Result<HostCost> {
        if !(self.gbps > 0.0 && self.host_packet_ns >= 0.0 && self.link_delay_us >= 0.0) {
            bail!("--gbps must be positive, and --host-packet-ns and --link-delay-us not negative");
        }
        Ok(HostCost {
            link_gbps: self.gbps,
            per_packet_ns: self.host_packet_ns,
            frame_overhead: FRAME_OVERHEAD,
            framing: self.framing.framing(),
            delays: Delays::star(self.link_delay_us * 1e3),
        })
    }
}

/// The `auto` choice with every default (the smallest real chip that hosts the workers at
/// 100 Gb/s, 20 ns per packet): what a plan prepared on the fly records. `None` when no chip
/// hosts that many workers.
pub(crate) fn default_choice(plan: &Plan, graph: &Graph) -> Result<Option<ExchangeChoice>> {
    let cost = HostCost {
        link_gbps: 100.0,
        per_packet_ns: 20.0,
        frame_overhead: FRAME_OVERHEAD,
        framing: Default::default(),
        delays: Delays::NONE,
    };
    // As `prepare` chooses by default: every idle port looped.
    let choice = ChipChoice {
        spare_loopback: true,
        ..ChipChoice::default()
    };
    let Ok(chip) = choice.resolve(plan.manifest.spec.workers, cost.link_gbps) else {
        return Ok(None);
    };
    Ok(Some(planner::choose_exchanges(
        plan,
        graph,
        ExchangeKind::Auto,
        &chip,
        &cost,
    )?))
}
