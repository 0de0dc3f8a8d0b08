//! A whole exchange job in one process: the switch and every worker as threads over UDP on
//! loopback. [`run_exchange_job`] has each worker run the schedule and check its outputs
//! ([`run_worker`]); [`run_single_exchange`] runs one exchange of a given plan, features and
//! scale and returns the outputs (the UDP driver of the conformance suite);
//! [`run_allreduce_job`] runs in-switch all-reduces; [`run_exchanges_together`] runs several
//! jobs' exchanges through one switch process at once. What tests and benchmarks of the
//! real-time drivers start from.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Instant;

use switchgnn_dataplane::allreduce::{AllReduceStats, ReduceOp};
use switchgnn_dataplane::engine::{EngineConfig, ExchangeOutput, LocalFeatures};
use switchgnn_dataplane::fixed::Scale;
use switchgnn_dataplane::plan::ExchangePlan;
use switchgnn_dataplane::{ExchangeId, ExchangeKind};
use switchgnn_datasets::Dataset;

use crate::client::{WorkerClient, WorkerConfig, WorkerError};
use crate::runner::{new_engine, run_worker, RunError, RunOptions, WorkerReport};
use crate::server::{
    ProcessTier, ServedJob, ServerConfig, ServerError, ServerReport, SwitchServer,
};
use crate::session::Session;
use switchgnn_dataplane::switch::Racks;

/// How worker `rank` of the job `server` runs joins it at `addr` (its own fault seed).
fn worker_config(
    server: &ServerConfig,
    session: &Session,
    rank: u16,
    addr: SocketAddr,
) -> WorkerConfig {
    WorkerConfig {
        job: server.job,
        rank,
        world: server.world,
        mode: session.mode,
        plan_checksum: session.checksum,
        switch: addr,
        bind: SocketAddr::from(([127, 0, 0, 1], 0)),
        timeouts: server.timeouts,
        link: server.link,
        faults: switchgnn_net::ShimConfig {
            seed: server.faults.seed ^ (u64::from(rank) + 1),
            ..server.faults
        },
        // Threads of one process share one EAL at most: loopback jobs run over UDP.
        transport: switchgnn_net::Transport::Udp,
        secret: server.secret.clone(),
    }
}

/// What a loopback job did.
#[derive(Debug)]
pub struct LoopbackOutcome {
    /// The switch's report at its end.
    pub switch: ServerReport,
    /// Each worker's report, or why it failed, by rank.
    pub workers: Vec<Result<WorkerReport, RunError>>,
    /// Wall time from the switch's start to its end.
    pub seconds: f64,
}

/// Serve the job of `server` with the switch in one thread and `worker(rank, switch address)`
/// for every rank in a thread of its own (see [`serve_jobs`]).
fn serve<T: Send, E: Send>(
    server: &ServerConfig,
    session: &Arc<Session>,
    worker: impl Fn(u16, SocketAddr) -> Result<T, E> + Sync,
) -> Result<(ServerReport, Vec<Result<T, E>>), ServerError> {
    let job = ServedJob::first(server, session.clone());
    let (report, mut workers) = serve_jobs(
        server,
        &[job],
        1,
        |_, _| {},
        |_, _, _, rank, addr| worker(rank, addr),
    )?;
    Ok((report, workers.remove(0)))
}

/// The configuration of `job` on the switch of `server` (its address, link, faults and
/// resources): what its workers join with.
fn job_config(server: &ServerConfig, job: &ServedJob) -> ServerConfig {
    ServerConfig {
        job: job.job,
        world: job.world,
        secret: job.secret.clone(),
        timeouts: job.timeouts,
        allreduce_slots: job.allreduce_slots,
        allreduce_best_effort: job.allreduce_best_effort,
        ..server.clone()
    }
}

/// Per job, per rank: what each worker returned.
type PerJob<T> = Vec<Vec<T>>;

/// Serve `jobs` with one switch process (`server` gives its address, link, faults and
/// resources) in one thread; for each rank of the first `active` jobs,
/// `worker(job index, job config, session, rank, switch address)` in a thread of its own, and
/// `beside(switch address, done)` in one more, `done` set once every worker has returned.
/// Threads are named (`switch`, `worker-N` or `job-J-worker-N`) so that a profile reads per
/// role (`perf report --comm switch`). The switch is stopped when a worker failed (it would
/// otherwise wait for goodbyes that will not come) or when some jobs run no workers here.
/// Each active job's results, in rank order.
fn serve_jobs<T: Send, E: Send>(
    server: &ServerConfig,
    jobs: &[ServedJob],
    active: usize,
    beside: impl FnOnce(SocketAddr, &AtomicBool) + Send,
    worker: impl Fn(usize, &ServerConfig, &Arc<Session>, u16, SocketAddr) -> Result<T, E> + Sync,
) -> Result<(ServerReport, PerJob<Result<T, E>>), ServerError> {
    let configs: Vec<ServerConfig> = jobs.iter().map(|j| job_config(server, j)).collect();
    let mut switch = SwitchServer::bind_jobs(
        configs[0].clone(),
        jobs[0].session.clone(),
        jobs[1..].to_vec(),
    )?;
    let addr = switch.local_addr()?;
    let (stop, done) = (AtomicBool::new(false), AtomicBool::new(false));
    let worker = &worker;
    let (switch, results) = thread::scope(|s| {
        let switch = thread::Builder::new()
            .name("switch".into())
            .spawn_scoped(s, || switch.run(&stop, None))
            .expect("spawn the switch thread");
        let beside = thread::Builder::new()
            .name("beside".into())
            .spawn_scoped(s, || beside(addr, &done))
            .expect("spawn the thread beside");
        let threads: Vec<Vec<_>> = jobs[..active]
            .iter()
            .zip(&configs)
            .enumerate()
            .map(|(j, (job, cfg))| {
                (0..job.world)
                    .map(|rank| {
                        let name = if jobs.len() == 1 {
                            format!("worker-{rank}")
                        } else {
                            format!("job-{}-worker-{rank}", job.job)
                        };
                        let session = &job.session;
                        thread::Builder::new()
                            .name(name)
                            .spawn_scoped(s, move || worker(j, cfg, session, rank, addr))
                            .expect("spawn a worker thread")
                    })
                    .collect()
            })
            .collect();
        let results: Vec<Vec<_>> = threads
            .into_iter()
            .map(|job| {
                job.into_iter()
                    .map(|w| w.join().expect("a worker thread panicked"))
                    .collect()
            })
            .collect();
        done.store(true, Ordering::Relaxed);
        beside.join().expect("the thread beside panicked");
        if active < jobs.len() || results.iter().flatten().any(Result::is_err) {
            stop.store(true, Ordering::Relaxed);
        }
        (switch.join().expect("the switch thread panicked"), results)
    });
    Ok((switch?, results))
}

/// Run `epochs` rounds of `session`'s schedule with every worker of `server`'s job. The
/// switch listens where `server.listen` says (port 0: a free one); the workers use the same
/// timeouts, link and faults (each with its own seed).
pub fn run_exchange_job(
    dataset: &Arc<Dataset>,
    session: &Arc<Session>,
    server: ServerConfig,
    epochs: u32,
) -> Result<LoopbackOutcome, ServerError> {
    let started = Instant::now();
    let (switch, workers) = serve(&server, session, |rank, addr| {
        let client = WorkerClient::connect(worker_config(&server, session, rank, addr))?;
        let opts = RunOptions {
            job: server.job,
            rank,
            epochs,
            line_rate: server.link.rate(),
            window: server.link.window,
            timers: server.timeouts.protocol(),
            framing: server.link.framing(),
            compute: std::time::Duration::ZERO,
            chip: None,
        };
        run_worker(client, session, dataset, opts, &|_| {})
    })?;
    Ok(LoopbackOutcome {
        switch,
        workers,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// Why a loopback exchange did not complete.
#[derive(Debug, thiserror::Error)]
pub enum LoopbackError {
    /// The switch failed.
    #[error("switch: {0}")]
    Switch(#[from] ServerError),
    /// A worker's connection failed.
    #[error("worker {rank}: {source}")]
    Worker {
        /// The worker's rank.
        rank: u16,
        /// Why.
        source: WorkerError,
    },
    /// A worker's engine refused its plan or inputs.
    #[error("worker {rank}: {source}")]
    Engine {
        /// The worker's rank.
        rank: u16,
        /// Why.
        source: switchgnn_dataplane::engine::EngineError,
    },
}

/// One worker's in-switch all-reduces: per operation, its result, wall time and counters.
#[derive(Debug)]
pub struct AllReduceRun {
    /// Each operation's result.
    pub outputs: Vec<Vec<i32>>,
    /// Each operation's wall time.
    pub seconds: Vec<f64>,
    /// Each operation's engine counters.
    pub stats: Vec<AllReduceStats>,
}

/// Every worker of `server`'s job runs `ops` in-switch all-reduces one after another
/// (in the slots the switch's welcome advertises; operation `i` of rank `r` combines `values(r, i)`), over
/// UDP on loopback. The switch's report and each worker's run, in rank order.
pub fn run_allreduce_job(
    server: &ServerConfig,
    session: &Arc<Session>,
    ops: &[ReduceOp],
    values: impl Fn(u16, usize) -> Vec<i32> + Sync,
) -> Result<(ServerReport, Vec<AllReduceRun>), LoopbackError> {
    let first = ServedJob::first(server, session.clone());
    let (report, mut runs) =
        run_allreduce_jobs(server, vec![first], ops, |_, rank, i| values(rank, i))?;
    Ok((report, runs.remove(0)))
}

/// [`run_allreduce_job`] for several jobs at once through one switch process (`server` gives
/// its address, link, faults and pool; `jobs` each job, the first included): operation `i` of
/// rank `r` of job `j` combines `values(j, r, i)`. Each job's runs, in the order of `jobs`.
pub fn run_allreduce_jobs(
    server: &ServerConfig,
    jobs: Vec<ServedJob>,
    ops: &[ReduceOp],
    values: impl Fn(u16, u16, usize) -> Vec<i32> + Sync,
) -> Result<(ServerReport, Vec<Vec<AllReduceRun>>), LoopbackError> {
    let (switch, runs) = serve_jobs(
        server,
        &jobs,
        jobs.len(),
        |_, _| {},
        |_, cfg, session, rank, addr| {
            let worker = |source| LoopbackError::Worker { rank, source };
            let mut client =
                WorkerClient::connect(worker_config(cfg, session, rank, addr)).map_err(worker)?;
            let mut run = AllReduceRun {
                outputs: Vec::new(),
                seconds: Vec::new(),
                stats: Vec::new(),
            };
            for (i, &op) in ops.iter().enumerate() {
                let began = Instant::now();
                let engine = client
                    .all_reduce(op, values(cfg.job, rank, i))
                    .map_err(worker)?;
                run.seconds.push(began.elapsed().as_secs_f64());
                run.stats.push(*engine.stats());
                run.outputs.push(engine.into_output());
            }
            client.finish().map_err(worker)?;
            Ok::<_, LoopbackError>(run)
        },
    )?;
    let runs = runs
        .into_iter()
        .map(|job| job.into_iter().collect::<Result<Vec<_>, _>>())
        .collect::<Result<Vec<_>, _>>()?;
    Ok((switch, runs))
}

/// One exchange of `plan` with the engines of `kind`, over UDP on loopback: the switch of
/// `server` (its job and world must be the plan's) and every worker as a thread, each holding
/// its own vertices' rows of `features` (row-major, one row per vertex of the graph). Returns
/// the switch's report and each worker's output, in rank order.
pub fn run_single_exchange(
    kind: ExchangeKind,
    plan: Arc<ExchangePlan>,
    features: &[f32],
    scale: Scale,
    server: ServerConfig,
    backward: bool,
) -> Result<(ServerReport, Vec<ExchangeOutput>), LoopbackError> {
    let session = Arc::new(Session::from_layers(kind, vec![plan.clone()]));
    let (switch, workers) = serve(&server, &session, |rank, addr| {
        let exchange = Exchange {
            kind,
            plan: &plan,
            features,
            scale,
            backward,
        };
        exchange.run(&server, &session, rank, addr)
    })?;
    let outputs = workers.into_iter().collect::<Result<Vec<_>, _>>()?;
    Ok((switch, outputs))
}

/// What a two-level run on loopback reports: the spine's report, each leaf's (by rack), and
/// each worker's output in rank order.
pub type TwoLevelRun = (ServerReport, Vec<ServerReport>, Vec<ExchangeOutput>);

/// [`run_single_exchange`] on a two-level fabric of `racks` racks: a spine process and a leaf
/// process per rack (each a thread with its own UDP socket, `server`'s resources, link and
/// faults), the workers in racks of consecutive ranks, each joining its rack's leaf.
pub fn run_single_exchange_two_level(
    kind: ExchangeKind,
    plan: Arc<ExchangePlan>,
    features: &[f32],
    scale: Scale,
    server: ServerConfig,
    backward: bool,
    racks: u16,
) -> Result<TwoLevelRun, LoopbackError> {
    let session = Arc::new(Session::from_layers(kind, vec![plan.clone()]));
    let map = Arc::new(
        Racks::even(server.world, racks)
            .map_err(|e| LoopbackError::Switch(ServerError::Config(e.to_string())))?,
    );
    let tier = |t| SwitchServer::bind_tier(server.clone(), session.clone(), t);
    let mut spine = tier(ProcessTier::Spine { racks: map.clone() })?;
    let spine_addr = spine.local_addr().map_err(ServerError::from)?;
    let mut leaves = (0..racks)
        .map(|rack| {
            tier(ProcessTier::Leaf {
                rack,
                racks: map.clone(),
                spine: spine_addr,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let leaf_addrs = leaves
        .iter()
        .map(|l| l.local_addr())
        .collect::<Result<Vec<_>, _>>()
        .map_err(ServerError::from)?;
    let stop = AtomicBool::new(false);
    let exchange = Exchange {
        kind,
        plan: &plan,
        features,
        scale,
        backward,
    };
    let (spine, leaves, outputs) = thread::scope(|s| {
        let stop = &stop;
        let spine = thread::Builder::new()
            .name("spine".into())
            .spawn_scoped(s, move || spine.run(stop, None))
            .expect("spawn the spine thread");
        let leaves: Vec<_> = leaves
            .iter_mut()
            .enumerate()
            .map(|(r, leaf)| {
                thread::Builder::new()
                    .name(format!("leaf-{r}"))
                    .spawn_scoped(s, move || leaf.run(stop, None))
                    .expect("spawn a leaf thread")
            })
            .collect();
        let workers: Vec<_> = (0..server.world)
            .map(|rank| {
                let addr = leaf_addrs[usize::from(map.rack_of(rank))];
                let (exchange, server, session) = (&exchange, &server, &session);
                thread::Builder::new()
                    .name(format!("worker-{rank}"))
                    .spawn_scoped(s, move || exchange.run(server, session, rank, addr))
                    .expect("spawn a worker thread")
            })
            .collect();
        // A failed worker or leaf stops the switches above it, which would otherwise wait for
        // goodbyes that will not come.
        let outputs = join_stopping(workers, "a worker", stop);
        let leaves = join_stopping(leaves, "a leaf", stop);
        (
            spine.join().expect("the spine thread panicked"),
            leaves,
            outputs,
        )
    });
    let outputs = outputs.into_iter().collect::<Result<Vec<_>, _>>()?;
    let leaves = leaves.into_iter().collect::<Result<Vec<_>, _>>()?;
    Ok((spine?, leaves, outputs))
}

/// Join `threads` (`what` names one in a panic), setting `stop` when any of them failed.
fn join_stopping<T, E>(
    threads: Vec<thread::ScopedJoinHandle<'_, Result<T, E>>>,
    what: &str,
    stop: &AtomicBool,
) -> Vec<Result<T, E>> {
    let results: Vec<_> = threads
        .into_iter()
        .map(|t| {
            t.join()
                .unwrap_or_else(|_| panic!("{what} thread panicked"))
        })
        .collect();
    if results.iter().any(Result::is_err) {
        stop.store(true, Ordering::Relaxed);
    }
    results
}

/// One exchange a worker runs: what [`Exchange::run`] needs besides the job.
struct Exchange<'a> {
    kind: ExchangeKind,
    plan: &'a Arc<ExchangePlan>,
    features: &'a [f32],
    scale: Scale,
    backward: bool,
}

impl Exchange<'_> {
    /// Worker `rank` of `server`'s job joins the switch at `addr`, runs the exchange with its
    /// own vertices' rows, and leaves: its output.
    fn run(
        &self,
        server: &ServerConfig,
        session: &Session,
        rank: u16,
        addr: SocketAddr,
    ) -> Result<ExchangeOutput, LoopbackError> {
        let plan = self.plan;
        let (link, timeouts) = (server.link, server.timeouts);
        let (vertices, values) = plan.local_rows(rank, self.features);
        let worker = |source| LoopbackError::Worker { rank, source };
        let mut client =
            WorkerClient::connect(worker_config(server, session, rank, addr)).map_err(worker)?;
        let cfg = EngineConfig {
            exchange: ExchangeId {
                job: server.job,
                epoch: 0,
                layer: 0,
                backward: self.backward,
            },
            seq: 1,
            rank,
            scale: self.scale,
            timers: timeouts.protocol(),
            window: client.window(link.window),
            framing: link.framing(),
        };
        let local = LocalFeatures {
            vertices: &vertices,
            width: plan.width,
            values: &values,
        };
        let mut engine = new_engine(
            self.kind,
            cfg,
            plan,
            local,
            link.rate(),
            client.congestion_window(),
            client.now(),
        )
        .map_err(|source| LoopbackError::Engine { rank, source })?;
        client
            .run(engine.as_mut(), "the exchange")
            .map_err(worker)?;
        client.finish().map_err(worker)?;
        Ok(engine.output().clone())
    }
}

/// One job of [`run_exchanges_together`]: one forward exchange of `plan` with `kind`'s
/// engines, every worker holding its own vertices' rows of `features`.
#[derive(Debug, Clone)]
pub struct ExchangeJob {
    /// The job's id.
    pub job: u16,
    /// The exchange it runs.
    pub kind: ExchangeKind,
    /// Its exchange plan.
    pub plan: Arc<ExchangePlan>,
    /// Every vertex's row, row-major; each worker takes its own.
    pub features: Arc<Vec<f32>>,
    /// The fixed-point scale the rows are encoded at.
    pub scale: Scale,
    /// The job's admission secret, if it has one.
    pub secret: Option<switchgnn_dataplane::control::Secret>,
}

/// Several jobs' exchanges at the same time through one switch process (`server` gives its
/// address, link, faults and resources; each job its own id, plan and secret), over UDP on
/// loopback; `idle` are served too but run no workers here. `during` runs beside them, with
/// the switch's address and a flag set once every worker is done (a third party sending
/// what it likes). Returns the switch's report and each job's outputs in rank order.
pub fn run_exchanges_together(
    server: &ServerConfig,
    jobs: &[ExchangeJob],
    idle: Vec<ServedJob>,
    during: impl FnOnce(SocketAddr, &AtomicBool) + Send,
) -> Result<(ServerReport, Vec<Vec<ExchangeOutput>>), LoopbackError> {
    let served: Vec<ServedJob> = jobs
        .iter()
        .map(|j| ServedJob {
            job: j.job,
            world: j.plan.workers,
            session: Arc::new(Session::from_layers(j.kind, vec![j.plan.clone()])),
            timeouts: server.timeouts,
            secret: j.secret.clone(),
            allreduce_slots: server.allreduce_slots,
            allreduce_best_effort: server.allreduce_best_effort,
        })
        .chain(idle)
        .collect();
    let (switch, outputs) = serve_jobs(
        server,
        &served,
        jobs.len(),
        during,
        |j, cfg, session, rank, addr| {
            let job = &jobs[j];
            let exchange = Exchange {
                kind: job.kind,
                plan: &job.plan,
                features: &job.features,
                scale: job.scale,
                backward: false,
            };
            exchange.run(cfg, session, rank, addr)
        },
    )?;
    let outputs = outputs
        .into_iter()
        .map(|job| job.into_iter().collect::<Result<Vec<_>, _>>())
        .collect::<Result<Vec<_>, _>>()?;
    Ok((switch, outputs))
}
