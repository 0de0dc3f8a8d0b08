//! A training job's processes: one worker ([`run_training_worker`], what `switchgnn train
//! --job` runs on each host) and a whole job on one machine ([`run_loopback`]: the software
//! switch with its collective service and every worker as threads, over loopback UDP and TCP).

use std::hash::{Hash, Hasher};
use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use switchgnn_datasets::Dataset;
use switchgnn_partition::shard::{Cutter, DataShard};
use switchgnn_partition::Plan;
use switchgnn_transport::client::WorkerWire;
use switchgnn_transport::collective::{CollectiveReport, ServiceConfig};
use switchgnn_transport::server::{ServerConfig, ServerReport, SwitchServer};
use switchgnn_transport::{JobFile, Participant, Session};

use super::network::NetworkSums;
use super::{Shard, ShardBackend};
use crate::error::{CommError, Result, TrainError};
use crate::graph_tensors::FeatureNorm;
use crate::train::{train_on, EpochRecord, RunReport, TrainConfig};
use switchgnn_transport::participant::ExchangeTotals;

/// What one worker did.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkerOutcome {
    /// The worker's rank.
    pub rank: u16,
    /// Its training run (the figures are global, the same on every worker).
    pub report: RunReport,
    /// What its exchanges did.
    pub totals: ExchangeTotals,
    /// Its traffic as its sockets saw it.
    pub wire: WorkerWire,
    /// The feature normalisation applied (`auto` resolved).
    pub feature_norm: FeatureNorm,
    /// Vertices it owned.
    pub vertices: usize,
    /// Of those, vertices with a neighbour on another worker.
    pub boundary: usize,
}

/// What a whole loopback job did.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ClusterOutcome {
    /// Each worker, by rank.
    pub workers: Vec<WorkerOutcome>,
    /// The software switch.
    pub switch: ServerReport,
    /// The all-reduce service.
    pub collective: CollectiveReport,
}

/// A fingerprint of the settings every worker must share: refused by the collective service
/// when workers disagree.
fn agreement(config: &TrainConfig, session: &Session) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    serde_json::to_string(config)
        .expect("a config serialises")
        .hash(&mut h);
    session.checksum.hash(&mut h);
    h.finish()
}

/// Run the worker of `job` whose training state is `shard` (built from its part of the
/// dataset with [`Shard::new`]) against the switch at
/// `switch`: join, train, say goodbye. `observe` hears every epoch (the figures are global:
/// every worker sees the same ones).
pub fn run_training_worker(
    shard: Shard,
    session: Arc<Session>,
    job: &JobFile,
    switch: SocketAddr,
    config: &TrainConfig,
    observe: &mut dyn FnMut(&EpochRecord),
) -> Result<WorkerOutcome> {
    if shard.workers != job.world {
        return Err(TrainError::Config(format!(
            "the shard of worker {} is one of {}, the job has {} workers",
            shard.rank, shard.workers, job.world
        )));
    }
    let rank = shard.rank;
    let agreement = agreement(config, &session);
    let participant = Participant::connect(
        job,
        session,
        rank,
        switch,
        agreement,
        shard.max_remote_degree,
        job.secret()
            .map_err(|e| TrainError::Config(e.to_string()))?,
    )
    .map_err(super::network::comm)?;
    let mut sums = NetworkSums::new(participant, shard.boundary())?;
    let report = {
        let mut backend = ShardBackend {
            shard: &shard,
            remote: &mut sums,
        };
        train_on(shard.local(), &mut backend, config, observe)?
    };
    let totals = sums.totals().clone();
    let wire = sums.finish()?;
    Ok(WorkerOutcome {
        rank,
        report,
        totals,
        wire,
        feature_norm: shard.feature_norm,
        vertices: shard.ids.len(),
        boundary: shard.boundary().len(),
    })
}

/// Run the whole job on this machine: the switch (and its collective service) on a free
/// loopback port and `job.world` workers (`shards` in rank order), each in a thread with
/// `threads` libtorch threads.
/// `observe` hears rank 0's epochs.
#[allow(clippy::too_many_arguments)]
pub fn run_loopback(
    shards: &[DataShard],
    session: Arc<Session>,
    job: &JobFile,
    aggregators: usize,
    config: &TrainConfig,
    threads: i32,
    observe: &mut (dyn FnMut(&EpochRecord) + Send),
) -> Result<ClusterOutcome> {
    let server_cfg = ServerConfig {
        secret: job
            .secret()
            .map_err(|e| TrainError::Config(e.to_string()))?,
        timeouts: job.timeouts,
        link: job.link,
        faults: job.faults,
        allreduce_slots: job.allreduce.slots,
        ..ServerConfig::loopback(job.job, job.world, aggregators)
    };
    let service =
        ServiceConfig::of(job.job, job.world, &job.timeouts).with_secret(server_cfg.secret.clone());
    let (mut server, collective) =
        SwitchServer::bind_with_service(server_cfg, session.clone(), service)
            .map_err(CommError::Switch)?;
    let addr = server.local_addr().map_err(|cause| CommError::Io {
        what: "switch socket",
        cause,
    })?;
    let job = JobFile {
        bind: Some(SocketAddr::from(([127, 0, 0, 1], 0))),
        ..job.clone()
    };
    let stop = AtomicBool::new(false);
    let observe = Mutex::new(observe);
    let (switch, workers) = std::thread::scope(|s| {
        let switch = s.spawn(|| {
            let outcome = server.run(&stop, None);
            (outcome, server.report())
        });
        let workers: Vec<_> = shards
            .iter()
            .map(|data| {
                let rank = data.meta.rank;
                let (session, job, observe) = (session.clone(), &job, &observe);
                s.spawn(move || {
                    crate::set_threads(threads);
                    let mut hear = |e: &EpochRecord| {
                        if rank == 0 {
                            (observe.lock().expect("not poisoned"))(e);
                        }
                    };
                    let shard = Shard::new(data.clone(), config.model.kind, config.feature_norm)?;
                    // Each worker runs on its own view of the plans, as a real worker does.
                    let view = Arc::new(session.for_worker(rank as u16));
                    run_training_worker(shard, view, job, addr, config, &mut hear)
                })
            })
            .collect();
        let workers: Vec<Result<WorkerOutcome>> = workers
            .into_iter()
            .map(|w| w.join().expect("a worker thread panicked"))
            .collect();
        if workers.iter().any(|w| w.is_err()) {
            // The switch would wait for goodbyes that will not come.
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        (switch.join().expect("the switch thread panicked"), workers)
    });
    let collective = collective.finish(std::time::Duration::from_secs(2));
    // A worker error comes before the switch's: the lowest failed rank's, which names any
    // peer it lost.
    let workers = workers.into_iter().collect::<Result<Vec<_>>>()?;
    let (outcome, report) = switch;
    outcome.map_err(CommError::Switch)?;
    let collective = collective.map_err(CommError::Service)?;
    Ok(ClusterOutcome {
        workers,
        switch: report,
        collective,
    })
}

/// A distributed job on this machine, trained once per seed: the dataset, who owns each
/// vertex, the exchange session and the job file; what `switchgnn train --workers M` runs.
#[derive(Debug)]
pub struct LoopbackJob {
    shards: Vec<DataShard>,
    session: Arc<Session>,
    job: JobFile,
    aggregators: usize,
    threads: i32,
    last: Option<ClusterOutcome>,
}

impl LoopbackJob {
    /// The job of `job.world` workers on `plan` (prepared for `dataset`) with the exchange
    /// `job.mode`, a switch of `aggregators` and `threads` libtorch threads per worker. The
    /// dataset is cut into the workers' shards here and not kept.
    pub fn new(
        dataset: Dataset,
        plan: &Plan,
        job: JobFile,
        aggregators: usize,
        threads: i32,
    ) -> Result<LoopbackJob> {
        let session = Session::new(plan, &dataset.graph, job.mode).map_err(|e| {
            TrainError::Config(format!("cannot build the {} exchange plans: {e}", job.mode))
        })?;
        let workers = u32::from(job.world);
        let cutter = Cutter::new(&dataset, plan.assignment.parts(), workers)
            .map_err(|e| TrainError::Config(e.to_string()))?;
        let shards = (0..workers).map(|rank| cutter.cut(rank)).collect();
        Ok(LoopbackJob {
            shards,
            session: Arc::new(session),
            job,
            aggregators,
            threads,
            last: None,
        })
    }

    /// Train `config` once over the loopback job; rank 0's report (every worker holds the same
    /// figures). `observe` hears rank 0's epochs.
    pub fn train(
        &mut self,
        config: &TrainConfig,
        observe: &mut (dyn FnMut(&EpochRecord) + Send),
    ) -> Result<RunReport> {
        let outcome = run_loopback(
            &self.shards,
            self.session.clone(),
            &self.job,
            self.aggregators,
            config,
            self.threads,
            observe,
        )?;
        let report = outcome.workers[0].report.clone();
        self.last = Some(outcome);
        Ok(report)
    }

    /// What the last [`LoopbackJob::train`] did, per worker and at the switch.
    pub fn last(&self) -> Option<&ClusterOutcome> {
        self.last.as_ref()
    }

    /// The job file the workers and the switch share.
    pub fn job(&self) -> &JobFile {
        &self.job
    }
}

impl ClusterOutcome {
    /// One line on the traffic of the run, over all workers.
    pub fn traffic_line(&self) -> String {
        let epochs = self.workers[0].report.epochs.len().max(1) as f64;
        let sum = |f: &dyn Fn(&WorkerOutcome) -> f64| self.workers.iter().map(f).sum::<f64>();
        let sent = sum(&|w| w.report.epochs.iter().map(|e| e.bytes_sent as f64).sum());
        let comm = self
            .workers
            .iter()
            .map(|w| w.report.epochs.iter().map(|e| e.comm_seconds).sum::<f64>())
            .fold(0.0, f64::max);
        let retransmits = sum(&|w| w.totals.retransmits as f64);
        let fetches = sum(&|w| w.totals.fetches_sent as f64);
        let bound = self
            .workers
            .iter()
            .map(|w| w.totals.worst_error_bound)
            .fold(0.0, f64::max);
        format!(
            "{} workers: {:.3} MB sent per epoch by all workers, {:.1} ms of communication per \
             epoch (slowest worker), {} exchanges each, {retransmits} retransmits, {fetches} \
             fetches; switch: {} aggregations, peak {} aggregators, {} socket drops; \
             fixed-point error ≤ {:.1e} per sum",
            self.workers.len(),
            sent / epochs / 1e6,
            1e3 * comm / epochs,
            self.workers[0].totals.exchanges,
            self.switch.counters.aggregations,
            self.switch.counters.peak_aggregators,
            self.switch.ingress.socket_drops,
            bound,
        )
    }
}
