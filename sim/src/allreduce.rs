//! The in-switch all-reduce (SwitchML's protocol, `dataplane::allreduce`) on the simulated
//! star: every host runs the worker engine, the switch model runs the job's slots, and the
//! time is compared with SwitchML's bound — what the data needs to cross one host link once.

use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use switchgnn_dataplane::allreduce::{AllReduceConfig, AllReduceEngine, ReduceOp};
use switchgnn_dataplane::switch::{JobConfig, Switch, SwitchConfig};
use switchgnn_dataplane::wire::{HEADER_LEN, MAX_LANES};
use switchgnn_dataplane::Nanos;
use switchgnn_datasets::{BuildOptions, Graph};
use switchgnn_partition::Assignment;
use switchgnn_scheduler::exchange::reduce_plan;

use crate::driver::{run, RunResult, SimConfig};
use crate::modes::ModeError;

/// One simulated all-reduce.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AllReduceSim {
    /// Workers taking part.
    pub workers: u16,
    /// Values each worker contributes.
    pub values: usize,
    /// Slots of the switch's all-reduce region.
    pub slots: u16,
    /// When the last worker had every result.
    pub finish_ns: Nanos,
    /// What one worker's slices need on its uplink at line rate, framing included: the
    /// bound no all-reduce through one switch can beat.
    pub link_ns: f64,
    /// Slices the workers sent again after a timeout, all together.
    pub retransmits: u64,
    /// The run's own measurements.
    pub run: RunResult,
}

impl AllReduceSim {
    /// The time against the link bound.
    pub fn ratio(&self) -> f64 {
        self.finish_ns as f64 / self.link_ns
    }
}

/// Worker `rank`'s values: uniform in the range whose sum over `workers` fits int32 (what an
/// agreed fixed-point scale guarantees).
pub fn allreduce_values(rank: u16, workers: u16, len: usize, seed: u64) -> Vec<i32> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ (u64::from(rank) << 32));
    let bound = i32::MAX / i32::from(workers.max(1));
    (0..len).map(|_| rng.random_range(-bound..=bound)).collect()
}

/// A switch with job 1 of `workers` workers and no all-reduce region yet. The switch installs
/// a job with its exchange plans; a one-edge-per-worker star stands in for them.
pub fn allreduce_switch(workers: u16, ecn_threshold: u64) -> Result<Switch, ModeError> {
    allreduce_switch_for(&[(1, workers)], ecn_threshold)
}

/// A switch with each of `jobs` (id, workers), their ports one after the other in that
/// order, and no all-reduce yet.
pub fn allreduce_switch_for(jobs: &[(u16, u16)], ecn_threshold: u64) -> Result<Switch, ModeError> {
    let mut switch = Switch::new(SwitchConfig {
        aggregators: 16,
        ecn_threshold,
        ports: jobs.iter().map(|&(_, w)| w).sum(),
    });
    let mut first_port = 0;
    for &(job, workers) in jobs {
        let n = usize::from(workers).max(2);
        let edges: Vec<(u32, u32)> = (1..n as u32).map(|v| (0, v)).collect();
        let graph =
            Graph::from_edges(n, &edges, BuildOptions::default()).expect("a star is a valid graph");
        let owner = (0..n).map(|v| (v % usize::from(workers)) as u32).collect();
        let assignment =
            Assignment::new(owner, u32::from(workers)).expect("every vertex has an owner");
        let plan = reduce_plan(&graph, &assignment, 1, 1 << 20)?;
        switch.add_job(JobConfig::new(job, vec![Arc::new(plan)]).at_port(first_port))?;
        first_port += workers;
    }
    Ok(switch)
}

/// Sum `values` int32 values per worker over the star of `cfg` with `slots` slots; also returns
/// each worker's result.
pub fn simulate_allreduce(
    cfg: &SimConfig,
    values: usize,
    slots: u16,
    seed: u64,
) -> Result<(AllReduceSim, Vec<Vec<i32>>), ModeError> {
    let workers = cfg.topology.hosts();
    let mut switch = allreduce_switch(workers, cfg.switch.ecn_threshold)?;
    switch.add_allreduce(1, slots)?;
    let mut hosts: Vec<Box<AllReduceEngine>> = (0..workers)
        .map(|rank| {
            let cfg = AllReduceConfig {
                job: 1,
                rank,
                slots,
                op: ReduceOp::Sum,
                operation: 0,
                start: 0,
                rto: 100_000,
            };
            Box::new(AllReduceEngine::new(
                cfg,
                allreduce_values(rank, workers, values, seed),
            ))
        })
        .collect();
    let result = run(cfg, None, &mut switch, &mut hosts)?;
    let slices = values.div_ceil(MAX_LANES) as f64;
    let wire = slices * (HEADER_LEN as f64 + cfg.frame_overhead as f64) + 4.0 * values as f64;
    let link_gbps = cfg.host.uplink_gbps(&cfg.topology);
    let sim = AllReduceSim {
        workers,
        values,
        slots,
        finish_ns: result.finish_ns,
        link_ns: wire * 8.0 / link_gbps,
        retransmits: hosts.iter().map(|h| h.stats().retransmits).sum(),
        run: result,
    };
    let outputs = hosts.into_iter().map(|h| h.into_output()).collect();
    Ok((sim, outputs))
}
