//! A job's state on the switch: its configured layers, the running exchange and the
//! aggregators of the running block, and the checks that tie a packet to them.

use std::sync::Arc;

use bitvec::vec::BitVec;

use super::counters::DropReason;
use super::output::Pipeline;
use super::racks::Tier;
use super::reduce;
use crate::node::ExchangeId;
use crate::plan::ExchangePlan;
use crate::wire::{PlanLimits, Repr};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Agg {
    Idle,
    Active(u32),
    Done,
    Released,
}

/// Aggregator state of the running block, per (slot, chunk).
#[derive(Debug)]
pub(super) struct BlockState {
    pub(super) seen: BitVec,
    pub(super) agg: Vec<Agg>,
    pub(super) counted: Vec<u16>,
    pub(super) remaining: Vec<u16>,
    /// A leaf's: per table row, whether the spine finishes its sum (the leaf sends its share
    /// up instead of a result down). Empty elsewhere.
    pub(super) up: BitVec,
    /// The spine's: per table row, the racks whose partials it waits for (a bit each). Empty
    /// elsewhere.
    pub(super) racks_in: Vec<u64>,
}

impl BlockState {
    pub(super) fn new(plan: &ExchangePlan, block: usize) -> BlockState {
        let c = plan.chunks();
        let t = &plan.blocks[block].table;
        let n = t.len() * c;
        // One seen bit per sender and chunk: a source vertex, or in reduce mode a
        // (destination, worker) pair and then each multicast sender.
        let senders = if plan.mode.pre_aggregated() {
            t.slots.len() + plan.blocks[block].multicast.len()
        } else {
            t.len()
        };
        BlockState {
            seen: BitVec::repeat(false, senders * c),
            agg: vec![Agg::Idle; n],
            counted: vec![0; n],
            remaining: t
                .expected
                .iter()
                .flat_map(|&e| std::iter::repeat_n(e as u16, c))
                .collect(),
            up: BitVec::new(),
            racks_in: Vec::new(),
        }
    }

    /// Take an aggregator from the pool for `k` on its first contribution (none when the pool,
    /// or the job's region of it, is exhausted).
    pub(super) fn claim(&mut self, k: usize, f: &mut Pipeline) {
        if self.agg[k] == Agg::Idle {
            if let Some(a) = f.pool.alloc(f.job) {
                self.agg[k] = Agg::Active(a);
                f.note_occupancy();
            }
        }
    }

    /// Give back every aggregator the block still holds (those of destinations that finished
    /// by fetching raw features never saw a resend).
    pub(super) fn release(self, f: &mut Pipeline) {
        for a in self.agg {
            if let Agg::Active(i) = a {
                f.pool.release(i);
            }
        }
    }
}

#[derive(Debug)]
pub(super) struct Run {
    pub(super) id: ExchangeId,
    pub(super) seq: u32,
    pub(super) plan: Arc<ExchangePlan>,
    pub(super) started: bool,
    /// The running block; `plan.blocks.len()` once the exchange is complete.
    pub(super) block: u16,
    pub(super) joined: BitVec,
    pub(super) done: BitVec,
    pub(super) state: Option<BlockState>,
}

impl Run {
    pub(super) fn finished(&self) -> bool {
        self.started && usize::from(self.block) == self.plan.blocks.len()
    }
}

#[derive(Debug)]
pub(super) struct Job {
    pub(super) workers: u16,
    /// The port of worker 0 (see [`JobConfig::first_port`]).
    pub(super) first_port: u16,
    pub(super) layers: Vec<Arc<ExchangePlan>>,
    pub(super) current: Option<Run>,
    /// The exchange before `current`, its sequence number and block count, to repeat its
    /// final go to a worker that missed it.
    pub(super) previous: Option<(ExchangeId, u32, u16)>,
    /// Where the job's all-reduce runs, if it has one.
    pub(super) reduce: Option<AllReduce>,
    /// Where this switch sits in the job's fabric.
    pub(super) tier: Tier,
}

/// Where a job's all-reduce runs.
#[derive(Debug)]
pub(super) enum AllReduce {
    /// A region of slots of its own (SwitchML).
    Region(reduce::ReduceRegion),
    /// The pool shared by best-effort jobs, with the host behind it (ATP).
    BestEffort,
}

/// Ids in range for the layer's plan.
pub(super) fn check_limits(job: &Job, repr: &Repr) -> Result<(), DropReason> {
    let plan = job
        .layers
        .get(usize::from(repr.layer))
        .ok_or(DropReason::OutOfRange)?;
    let limits = PlanLimits {
        vertices: plan.owner.len() as u32,
        blocks: plan.blocks.len() as u32 + 1,
        workers: u32::from(job.workers),
        layers: job.layers.len() as u32,
        chunks: plan.chunks() as u32,
    };
    repr.check_plan(&limits).map_err(DropReason::of)
}

/// The running exchange and block a packet must belong to.
pub(super) fn running<'a>(job: &'a mut Job, repr: &Repr) -> Result<&'a mut Run, DropReason> {
    match &mut job.current {
        Some(run) if run.id.matches(repr) && run.started && !run.finished() => Ok(run),
        _ => Err(DropReason::Stale),
    }
}
