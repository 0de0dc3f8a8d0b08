//! The exchange on leaf-spine fabrics ([`Topology::LeafSpine`]): the same exchange plan on
//! the star and on every fabric of a grid of rack counts and oversubscriptions, measured
//! against its time on the star in the same study, with the bytes that crossed the spine layer.
//!
//! With two-level aggregation ([`FabricSpec::two_level`], the default of `simulate --racks`)
//! every leaf is a switch of the exchange: it sums its rack's contributions, finishes the sums
//! whose contributions are all its own, relays everything else (the host exchange's copies
//! stay in the rack when they can), and spine 0 finishes the rest. With one level, the
//! exchange's only switch is spine 0, so every packet of every kind — the host exchange's
//! copies too, which the switch relays — goes up to it and down again, and its spine-layer
//! bytes equal its host-link bytes.

use serde::{Deserialize, Serialize};
use switchgnn_dataplane::fixed::Scale;
use switchgnn_dataplane::plan::ExchangePlan;
use switchgnn_dataplane::Nanos;

use crate::driver::SimConfig;
use crate::fabric::Topology;
use crate::modes::{simulate_exchange, ExchangeSetup, ModeError, SimKind, SimMode};

/// The fabrics a study runs: every rack count with every oversubscription.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FabricSpec {
    /// Rack counts to run.
    pub racks: Vec<u16>,
    /// Spines of every fabric.
    pub spines: u16,
    /// Oversubscriptions to run (hosts' bandwidth into a leaf over its uplinks').
    pub oversubscription: Vec<f64>,
    /// Every leaf a switch of the exchange's (else the leaves only forward).
    #[serde(default)]
    pub two_level: bool,
}

/// One leaf-spine fabric: a study's hosts split evenly over `racks` racks, links as the star's.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct FabricShape {
    /// Racks.
    pub racks: u16,
    /// Spines.
    pub spines: u16,
    /// Hosts' bandwidth into a leaf over its uplinks'.
    pub oversubscription: f64,
    /// Every leaf a switch of the exchange's (else the leaves only forward).
    pub two_level: bool,
}

impl FabricShape {
    /// The fabric for `cfg`'s hosts, with `cfg`'s host links.
    pub fn topology(&self, cfg: &SimConfig) -> Topology {
        let hosts = cfg.topology.hosts();
        Topology::leaf_spine(
            self.racks,
            hosts / self.racks.max(1),
            self.spines,
            cfg.topology.host_link(),
            self.oversubscription,
        )
    }

    /// `cfg` with its star replaced by this fabric.
    pub fn config(&self, cfg: &SimConfig) -> SimConfig {
        SimConfig {
            topology: self.topology(cfg),
            ..*cfg
        }
    }

    /// "4 racks × 8, 2 spines, 2:1" (or "1 spine") for `hosts` hosts.
    pub fn describe(&self, hosts: u16) -> String {
        describe(
            self.racks,
            hosts / self.racks.max(1),
            self.spines,
            self.oversubscription,
        )
    }
}

fn describe(racks: u16, hosts_per_rack: u16, spines: u16, oversubscription: f64) -> String {
    // The ratio without trailing zeros: 2, 1.5.
    let ratio = format!("{oversubscription:.2}");
    let ratio = ratio.trim_end_matches('0').trim_end_matches('.');
    let noun = if spines == 1 { "spine" } else { "spines" };
    format!("{racks} racks × {hosts_per_rack}, {spines} {noun}, {ratio}:1")
}

impl FabricSpec {
    /// Every fabric of the grid, rack count by rack count.
    pub fn fabrics(&self) -> Vec<FabricShape> {
        self.racks
            .iter()
            .flat_map(|&racks| {
                self.oversubscription
                    .iter()
                    .map(move |&oversubscription| FabricShape {
                        racks,
                        spines: self.spines,
                        oversubscription,
                        two_level: self.two_level,
                    })
            })
            .collect()
    }

    /// Why hosts of one of the `workers` counts cannot fill these fabrics, if they cannot.
    pub fn check(&self, workers: &[u16]) -> Result<(), String> {
        if self.racks.is_empty() || self.oversubscription.is_empty() {
            return Err("a fabric study needs rack counts and oversubscriptions".into());
        }
        if self.spines == 0 {
            return Err("--spines must be at least 1".into());
        }
        if let Some(&o) = self
            .oversubscription
            .iter()
            .find(|&&o| !(o.is_finite() && o > 0.0))
        {
            return Err(format!("oversubscription {o} must be a positive ratio"));
        }
        for &w in workers {
            if let Some(r) = self.racks.iter().find(|&&r| r == 0 || w % r != 0) {
                return Err(format!(
                    "{w} workers do not fill {r} racks evenly (each rack holds the same number \
                     of hosts)"
                ));
            }
        }
        Ok(())
    }
}

/// One fabric's run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct OnFabric {
    /// Racks.
    pub racks: u16,
    /// Hosts in each rack.
    pub hosts_per_rack: u16,
    /// Spines.
    pub spines: u16,
    /// Hosts' bandwidth into a leaf over its uplinks'.
    pub oversubscription: f64,
    /// The exchange's time on this fabric.
    pub exchange_ns: Nanos,
    /// Frame bytes on the links between leaves and spines, both directions.
    pub spine_bytes: u64,
    /// Frame bytes on the hosts' links, both directions.
    pub host_link_bytes: u64,
    /// Packets dropped at full queues (hosts' egresses and the spine layer's).
    pub drops: u64,
    /// Packets the workers sent again.
    pub retransmits: u64,
    /// Fetches the destinations sent (their recovery: raw features from the sources' owners).
    #[serde(default)]
    pub fetches: u64,
    /// Acknowledgements that echoed ECN.
    pub ecn_echoes: u64,
}

/// What a study found for one exchange.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RackStudy {
    /// Workers of the exchange.
    pub workers: u16,
    /// The switch's aggregator memory (bytes).
    pub memory: u64,
    /// The chip preset the exchange's switch ran on.
    pub chip: String,
    /// The exchange kind that ran.
    pub mode: SimMode,
    /// Two-level aggregation on the fabrics.
    #[serde(default)]
    pub two_level: bool,
    /// The exchange on the star (every host one hop from the switch).
    pub star_ns: Nanos,
    /// Frame bytes on the star's links, both directions.
    pub star_link_bytes: u64,
    /// Packets dropped on the star.
    pub star_drops: u64,
    /// Packets the workers sent again on the star.
    pub star_retransmits: u64,
    /// Fetches the destinations sent on the star.
    #[serde(default)]
    pub star_fetches: u64,
    /// The runs on each fabric.
    pub fabrics: Vec<OnFabric>,
}

impl OnFabric {
    /// "4 racks × 8, 2 spines, 2:1" (or "1 spine").
    pub fn describe(&self) -> String {
        describe(
            self.racks,
            self.hosts_per_rack,
            self.spines,
            self.oversubscription,
        )
    }

    /// The exchange's time here over its time on the star.
    pub fn over_star(&self, study: &RackStudy) -> f64 {
        self.exchange_ns as f64 / study.star_ns.max(1) as f64
    }
}

/// Run `plan`'s exchange of `mode` on `cfg`'s star and on every fabric of `spec` (its hosts
/// split evenly over the racks, links as the star's); on a fabric of `r` racks the exchange
/// runs `replan(r)`, the same plan but for a kind whose plan depends on the racks (the host
/// two-level exchange's proxies).
pub fn rack_study(
    plan: &ExchangePlan,
    replan: &dyn Fn(u16) -> Result<ExchangePlan, ModeError>,
    mode: SimMode,
    cfg: &SimConfig,
    setup: &ExchangeSetup,
    scale: Scale,
    spec: &FabricSpec,
) -> Result<RackStudy, ModeError> {
    let hosts = cfg.topology.hosts();
    let star = simulate_exchange(plan.clone(), cfg, setup, scale)?.0;
    let mut fabrics = Vec::new();
    for fabric in spec.fabrics() {
        let on = fabric.config(cfg);
        let two_level = ExchangeSetup {
            two_level: fabric.two_level,
            ..*setup
        };
        let sim = simulate_exchange(replan(fabric.racks)?, &on, &two_level, scale)?.0;
        fabrics.push(OnFabric {
            racks: fabric.racks,
            hosts_per_rack: hosts / fabric.racks.max(1),
            spines: fabric.spines,
            oversubscription: fabric.oversubscription,
            exchange_ns: sim.run.finish_ns,
            spine_bytes: sim.run.spine_bytes(),
            host_link_bytes: sim.run.link_bytes(),
            drops: sim.run.drops(),
            retransmits: sim.retransmits,
            fetches: sim.fetches,
            ecn_echoes: sim.ecn_echoes,
        });
    }
    Ok(RackStudy {
        workers: hosts,
        memory: setup.switch_memory,
        chip: cfg.switch.chip.preset.name().to_string(),
        mode,
        two_level: spec.two_level,
        star_ns: star.run.finish_ns,
        star_link_bytes: star.run.link_bytes(),
        star_drops: star.run.drops(),
        star_retransmits: star.retransmits,
        star_fetches: star.fetches,
        fabrics,
    })
}

/// The studies as a Markdown table: one row per exchange and fabric. `spine × host` is the
/// row's spine-layer bytes over the host exchange's on the same fabric, when the host
/// exchange is among the studies.
pub fn rack_table(studies: &[RackStudy]) -> String {
    let mut out = String::from(
        "| workers | chip | memory | mode | fabric | exchange (µs) | × star | spine layer (MB) | \
         spine × host | drops | retransmits | fetches |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    let host_bytes = |workers: u16, f: &OnFabric| {
        studies
            .iter()
            .filter(|s| s.mode.kind == SimKind::Host && s.workers == workers)
            .flat_map(|s| &s.fabrics)
            .find(|h| {
                h.racks == f.racks
                    && h.spines == f.spines
                    && h.oversubscription == f.oversubscription
            })
            .map(|h| h.spine_bytes)
    };
    for s in studies {
        let memory = switchgnn_partition::size::format_bytes(s.memory);
        let levels = if s.two_level { " (two-level)" } else { "" };
        let lead = format!(
            "| {} | {} | {memory} | {}{levels} |",
            s.workers,
            s.chip,
            s.mode.name()
        );
        out.push_str(&format!(
            "{lead} star | {:.1} | 1.00 | – | – | {} | {} | {} |\n",
            s.star_ns as f64 / 1e3,
            s.star_drops,
            s.star_retransmits,
            s.star_fetches,
        ));
        for f in &s.fabrics {
            let versus = host_bytes(s.workers, f).map_or("–".to_string(), |h| {
                format!("{:.2}", f.spine_bytes as f64 / h.max(1) as f64)
            });
            out.push_str(&format!(
                "{lead} {} | {:.1} | {:.2} | {:.1} | {versus} | {} | {} | {} |\n",
                f.describe(),
                f.exchange_ns as f64 / 1e3,
                f.over_star(s),
                f.spine_bytes as f64 / 1e6,
                f.drops,
                f.retransmits,
                f.fetches,
            ));
        }
    }
    out
}
