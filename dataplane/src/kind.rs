//! The kinds of exchange, and the one place that turns a kind into an engine. Every driver
//! (the in-memory network, the simulator, the UDP worker) asks [`ExchangeKind::engine`]; the
//! planning side (`switchgnn_scheduler::exchange::exchange_plan`) makes each kind's plan.
//! Variations of a kind that change neither its plan's shape nor its engine (a random send
//! order instead of priority BFS, say) are options of the plan, not kinds.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::cc::Controller;
use crate::engine::{
    BalancedHostEngine, EngineConfig, EngineError, Exchange, HostEngine, HostHybridEngine,
    HostReduceEngine, HostTwoLevelEngine, InNetworkEngine, LocalFeatures, ReduceEngine,
};
use crate::node::Nanos;
use crate::plan::{ExchangePlan, Mode};

/// How an exchange moves features.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ExchangeKind {
    /// In-network aggregation over a prepared plan's blocks (SwitchGNN).
    Switchgnn,
    /// In-network aggregation of every cross edge at once, first-come aggregators, overflow
    /// to the hosts.
    Strawman,
    /// The host exchange through a plain switch (BNS-GCN, p = 1).
    Host,
    /// The host exchange in G3's balanced rounds (each worker sends to one peer at a time).
    #[serde(rename = "g3")]
    BalancedHost,
    /// Pre-aggregated partial sums, one per (worker, destination), added in one switch pass.
    Reduce,
    /// The same partial sums sent host to host, packed to the MTU (DistGNN's partial
    /// aggregation); the switch only forwards them. (Named `hostreduce` in job files before
    /// it had its command-line name there too.)
    #[serde(rename = "host-reduce", alias = "hostreduce")]
    HostReduce,
    /// The host hybrid: per ordered worker pair, the host exchange's raw copies or host-only
    /// partial sums, whichever is fewer rows (a tie goes to raw copies), host to host packed
    /// to the MTU; the switch only forwards them. The choice is per pair: a worker's rows to
    /// one peer are all of one way (`switchgnn_scheduler::exchange::host_hybrid_plan`).
    #[serde(rename = "host-hybrid")]
    HostHybrid,
    /// The host-only answer to two-level aggregation on a leaf-spine fabric: host-only
    /// partial sums, but for a destination owned in another rack each rack's workers send
    /// theirs to one proxy worker of the rack, which adds them up and sends one partial across
    /// the spine (as hierarchical all-reduce does). On one rack it is host-reduce. The
    /// proxies depend on the racks: `switchgnn_scheduler::exchange::host_two_level_plan`.
    #[serde(rename = "host-two-level")]
    HostTwoLevel,
    /// Per (source, destination worker) pair, SwitchGNN's multicast or a partial sum, as the
    /// chip model favours (`switchgnn_scheduler::hybrid`); runs as a reduce plan.
    Hybrid,
    /// Per layer, the kind the plan records (`switchgnn prepare --exchange auto` picks the one
    /// with the least predicted time). Not a kind of its own: each layer runs a concrete one.
    Auto,
}

impl ExchangeKind {
    /// Every kind.
    pub const ALL: [ExchangeKind; 9] = [
        ExchangeKind::Switchgnn,
        ExchangeKind::Host,
        ExchangeKind::HostReduce,
        ExchangeKind::HostHybrid,
        ExchangeKind::HostTwoLevel,
        ExchangeKind::Strawman,
        ExchangeKind::BalancedHost,
        ExchangeKind::Reduce,
        ExchangeKind::Hybrid,
    ];

    /// The name in job files, reports and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            ExchangeKind::Switchgnn => "switchgnn",
            ExchangeKind::Strawman => "strawman",
            ExchangeKind::Host => "host",
            ExchangeKind::BalancedHost => "g3",
            ExchangeKind::Reduce => "reduce",
            ExchangeKind::HostReduce => "host-reduce",
            ExchangeKind::HostHybrid => "host-hybrid",
            ExchangeKind::HostTwoLevel => "host-two-level",
            ExchangeKind::Hybrid => "hybrid",
            ExchangeKind::Auto => "auto",
        }
    }

    /// Accepts the names the command line uses (`switch`, `blocks` and `multicast` are
    /// SwitchGNN).
    pub fn parse(name: &str) -> Option<ExchangeKind> {
        match name {
            "switch" | "switchgnn" | "blocks" | "multicast" => Some(ExchangeKind::Switchgnn),
            "strawman" => Some(ExchangeKind::Strawman),
            "host" => Some(ExchangeKind::Host),
            "g3" => Some(ExchangeKind::BalancedHost),
            "reduce" | "pre-aggregated" => Some(ExchangeKind::Reduce),
            "host-reduce" => Some(ExchangeKind::HostReduce),
            "host-hybrid" => Some(ExchangeKind::HostHybrid),
            "host-two-level" => Some(ExchangeKind::HostTwoLevel),
            "hybrid" => Some(ExchangeKind::Hybrid),
            "auto" => Some(ExchangeKind::Auto),
            _ => None,
        }
    }

    /// How the switch treats the kind's packets (`None` for `auto`, whose layers may differ).
    pub fn mode(self) -> Option<Mode> {
        Some(match self {
            ExchangeKind::Switchgnn => Mode::Blocks,
            ExchangeKind::Strawman => Mode::Strawman,
            ExchangeKind::Host | ExchangeKind::BalancedHost => Mode::Host,
            ExchangeKind::Reduce | ExchangeKind::Hybrid => Mode::Reduce,
            ExchangeKind::HostReduce => Mode::HostReduce,
            ExchangeKind::HostHybrid => Mode::HostHybrid,
            ExchangeKind::HostTwoLevel => Mode::HostTwoLevel,
            ExchangeKind::Auto => return None,
        })
    }

    /// The kind a plan of `mode` runs when nothing else says (the host exchange for
    /// [`Mode::Host`]).
    pub fn of_mode(mode: Mode) -> ExchangeKind {
        match mode {
            Mode::Blocks => ExchangeKind::Switchgnn,
            Mode::Strawman => ExchangeKind::Strawman,
            Mode::Host => ExchangeKind::Host,
            Mode::Reduce => ExchangeKind::Reduce,
            Mode::HostReduce => ExchangeKind::HostReduce,
            Mode::HostHybrid => ExchangeKind::HostHybrid,
            Mode::HostTwoLevel => ExchangeKind::HostTwoLevel,
        }
    }

    /// Whether the switch's aggregator memory matters to the kind.
    pub fn in_network(self) -> bool {
        matches!(
            self,
            ExchangeKind::Switchgnn
                | ExchangeKind::Strawman
                | ExchangeKind::Reduce
                | ExchangeKind::Hybrid
                | ExchangeKind::Auto
        )
    }

    /// The engine of one worker for one exchange of this kind, paced by `cc`.
    pub fn engine(
        self,
        cfg: EngineConfig,
        plan: Arc<ExchangePlan>,
        local: LocalFeatures<'_>,
        cc: Box<dyn Controller>,
        now: Nanos,
    ) -> Result<Box<dyn Exchange>, EngineError> {
        Ok(match self {
            ExchangeKind::Switchgnn | ExchangeKind::Strawman => {
                Box::new(InNetworkEngine::new(cfg, plan, local, cc, now)?)
            }
            ExchangeKind::Host => Box::new(HostEngine::new(cfg, plan, local, cc, now)?),
            ExchangeKind::BalancedHost => {
                Box::new(BalancedHostEngine::new(cfg, plan, local, cc, now)?)
            }
            ExchangeKind::Reduce | ExchangeKind::Hybrid => {
                Box::new(ReduceEngine::new(cfg, plan, local, cc, now)?)
            }
            ExchangeKind::HostReduce => Box::new(HostReduceEngine::new(cfg, plan, local, cc, now)?),
            ExchangeKind::HostHybrid => Box::new(HostHybridEngine::new(cfg, plan, local, cc, now)?),
            ExchangeKind::HostTwoLevel => {
                Box::new(HostTwoLevelEngine::new(cfg, plan, local, cc, now)?)
            }
            // Each layer's plan says which kind it is.
            ExchangeKind::Auto => {
                return ExchangeKind::of_mode(plan.mode).engine(cfg, plan, local, cc, now)
            }
        })
    }
}

impl std::fmt::Display for ExchangeKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for k in ExchangeKind::ALL {
            assert_eq!(ExchangeKind::parse(k.name()), Some(k));
        }
        assert_eq!(ExchangeKind::parse("switch"), Some(ExchangeKind::Switchgnn));
        assert_eq!(ExchangeKind::parse("nope"), None);
        assert_eq!(ExchangeKind::BalancedHost.mode(), Some(Mode::Host));
        assert_eq!(ExchangeKind::parse("auto"), Some(ExchangeKind::Auto));
    }
}
