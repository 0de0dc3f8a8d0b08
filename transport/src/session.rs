//! What the switch and every worker of a job derive alike from the plan and the dataset: one
//! exchange plan per layer for the job's mode, their joint checksum, and the order in which
//! exchanges run.

use std::sync::Arc;

use switchgnn_dataplane::plan::{ExchangePlan, PlanError};
use switchgnn_dataplane::ExchangeId;
use switchgnn_datasets::Graph;
use switchgnn_partition::Plan;
use switchgnn_scheduler::exchange::{exchange_plan, ExchangePlans, PlanOptions};

use switchgnn_dataplane::ExchangeKind;

/// The exchange plans of a job, one per layer.
#[derive(Debug, Clone)]
pub struct Session {
    /// The exchange the plans are for.
    pub mode: ExchangeKind,
    /// One plan per layer.
    pub layers: Vec<Arc<ExchangePlan>>,
    /// What every worker and the switch compare at admission: the plans' checksum.
    pub checksum: u64,
}

impl Session {
    /// The plans of every layer for `kind` (`switchgnn_scheduler::exchange::exchange_plan`):
    /// SwitchGNN runs the plan's blocks; the strawman (in a random order, as a naive sender
    /// would, seeded by the layer) and the host exchanges run every cross edge of the graph as
    /// one block.
    pub fn new(plan: &Plan, graph: &Graph, kind: ExchangeKind) -> Result<Session, PlanError> {
        if kind == ExchangeKind::Switchgnn {
            return Session::switchgnn(plan);
        }
        let layers = (0..plan.manifest.spec.feature_dims.len())
            .map(|layer| {
                let seed = if kind == ExchangeKind::Strawman {
                    layer as u64
                } else {
                    0
                };
                let options = PlanOptions {
                    seed,
                    ..PlanOptions::default()
                };
                exchange_plan(kind, graph, plan, layer, options).map(Arc::new)
            })
            .collect::<Result<Vec<_>, PlanError>>()?;
        Ok(Session::from_layers(kind, layers))
    }

    /// SwitchGNN's session: the plan's blocks, layer by layer; no graph needed.
    pub fn switchgnn(plan: &Plan) -> Result<Session, PlanError> {
        let layers = (0..plan.manifest.spec.feature_dims.len())
            .map(|layer| ExchangePlan::from_plan(plan, layer).map(Arc::new))
            .collect::<Result<Vec<_>, PlanError>>()?;
        Ok(Session::from_layers(ExchangeKind::Switchgnn, layers))
    }

    /// Worker `rank`'s view of every layer ([`ExchangePlan::for_worker`]: the rows its engine
    /// reads), under the whole session's checksum, which the worker presents at join.
    pub fn for_worker(&self, rank: u16) -> Session {
        Session {
            mode: self.mode,
            layers: self
                .layers
                .iter()
                .map(|p| Arc::new(p.for_worker(rank)))
                .collect(),
            checksum: self.checksum,
        }
    }

    /// A session of exchange plans built elsewhere (one per layer), with their checksum.
    pub fn from_layers(mode: ExchangeKind, layers: Vec<Arc<ExchangePlan>>) -> Session {
        let mut h = mix(0x5347_4e4e);
        for p in &layers {
            h = mix(h ^ p.checksum());
        }
        Session {
            mode,
            layers,
            checksum: h,
        }
    }

    /// The job's workers (0 without a layer).
    pub fn workers(&self) -> u16 {
        self.layers.first().map_or(0, |p| p.workers)
    }

    /// The exchanges of one training step, with their sequence numbers: every layer forward,
    /// then every layer backward from the last (the transposed exchange of the gradients).
    pub fn schedule(&self, job: u16, epoch: u32) -> Vec<Scheduled> {
        let n = self.layers.len();
        let per_epoch = 2 * n as u32;
        let forward = (0..n).map(|l| (l, false));
        let backward = (0..n).rev().map(|l| (l, true));
        forward
            .chain(backward)
            .enumerate()
            .map(|(i, (layer, backward))| Scheduled {
                id: ExchangeId {
                    job,
                    epoch,
                    layer: layer as u8,
                    backward,
                },
                seq: epoch * per_epoch + i as u32 + 1,
            })
            .collect()
    }
}

/// One exchange of the schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scheduled {
    /// The exchange's layer and direction.
    pub id: ExchangeId,
    /// Its place in the schedule.
    pub seq: u32,
}

impl Scheduled {
    /// `layer 1 forward`, `layer 0 backward`.
    pub fn describe(&self) -> String {
        let dir = if self.id.backward {
            "backward"
        } else {
            "forward"
        };
        format!("layer {} {dir}", self.id.layer)
    }
}

/// A 64-bit mixer (splitmix64's finaliser) to combine the per-layer checksums in order.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}
