//! `switchgnn switch`: the software switch as a process, serving one job over UDP or DPDK, or
//! several jobs at once over UDP (`--also-job`), or one switch of a two-level fabric
//! (`--tier leaf|spine`, the job file's `[fabric]`).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use switchgnn_transport::collective::{RunningService, ServiceConfig};
use switchgnn_transport::job::TransportKind;
use switchgnn_transport::server::{
    AllReducePool, ProcessTier, ServedJob, ServerConfig, SwitchServer,
};
use switchgnn_transport::{JobFile, Session};

use crate::job_args::{load_session, parse_mode, write_json, JobArgs};

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    pub(crate) job: JobArgs,
    /// Address to listen on (default: the job file's switch address).
    #[arg(long)]
    pub(crate) listen: Option<SocketAddr>,
    /// Write the address actually bound (useful with port 0) to this file once listening.
    #[arg(long, value_name = "FILE")]
    pub(crate) ready_file: Option<PathBuf>,
    /// Write the final counters as JSON to this file.
    #[arg(long, value_name = "FILE")]
    pub(crate) report: Option<PathBuf>,
    /// Print the status line every this many seconds (SIGUSR1 prints it at any time).
    #[arg(long, value_name = "SECS")]
    pub(crate) status_every: Option<f64>,
    /// Aggregator memory (e.g. 10MB; default: the memory the plan was prepared for, or the
    /// Tofino program's 16 MiB on 4 pipes with --entries).
    #[arg(long)]
    pub(crate) switch_memory: Option<String>,
    /// Cores of the switch model: its aggregators spread over this many shards by destination,
    /// the first on the thread that moves packets, each other on a thread of its own (1 to 64;
    /// a leaf or spine of a two-level fabric runs on one).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub(crate) cores: u16,
    /// Take the switch's tables from a P4Runtime entries file (`switchgnn p4 entries --format
    /// p4runtime`) instead of the plan: the job id, workers, exchange, ECN threshold and plan
    /// checksum come from the file; the job file (if any) gives addresses and timeouts.
    #[arg(long, value_name = "FILE")]
    pub(crate) entries: Option<PathBuf>,
    /// Serve this job file's job too, at the same time and address (repeat for more): each
    /// job gets its own switch ports, admission, secret and all-reduce region, and shares the
    /// aggregator pool (the sum of the jobs' plan memories unless --switch-memory says).
    /// Over UDP only; the first job's file gives the address, link and faults.
    #[arg(long, value_name = "FILE")]
    pub(crate) also_job: Vec<PathBuf>,
    /// Slots of the all-reduce pool that best-effort jobs (`allreduce.best_effort = true`)
    /// share (ATP); what it cannot take, the switch's host finishes. Default: 256 when a job
    /// asks for best-effort, none otherwise.
    #[arg(long, value_name = "SLOTS")]
    pub(crate) allreduce_pool: Option<u32>,
    /// A shared slot whose slice has not progressed for this long may be taken by another
    /// (ATP's leak timeout).
    #[arg(long, value_name = "MS", default_value_t = 10.0)]
    pub(crate) allreduce_leak_ms: f64,
    /// Run as one switch of the job file's two-level fabric (its `[fabric]` section): the
    /// `leaf` of --rack (listening on its `fabric.leaves` address, joining the spine) or the
    /// `spine` (listening on the job's `switch`, the all-reduce service beside it).
    #[arg(long, value_enum, conflicts_with_all = ["entries", "also_job"])]
    pub(crate) tier: Option<TierArg>,
    /// With --tier leaf: the leaf's rack.
    #[arg(long, requires = "tier")]
    pub(crate) rack: Option<u16>,
    /// With --tier leaf: the spine's address (default: the job file's `switch`).
    #[arg(long, requires = "tier")]
    pub(crate) spine: Option<SocketAddr>,
    #[command(flatten)]
    pub(crate) capture: crate::capture_args::CaptureArgs,
}

/// Which switch of a two-level fabric `switch --tier` runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum TierArg {
    Leaf,
    Spine,
}

/// A job file served besides the first: the job, its plans and the memory they were cut for.
fn also_job(path: &std::path::Path, listen: SocketAddr) -> Result<(JobFile, Arc<Session>, u64)> {
    let job = JobFile::read(path)?;
    if job.switch != listen {
        bail!(
            "{} names the switch {}, but this switch listens on {listen}: jobs served together \
             name the same switch address",
            path.display(),
            job.switch
        );
    }
    let (plan, session) = load_session(&job)?;
    Ok((job, session, plan.manifest.spec.switch_memory))
}

/// The all-reduce services the jobs need: at the switch's own address (`None`: every job
/// without a `collective` address, over UDP), or at each `collective` address named.
fn services(jobs: &[JobFile]) -> Result<BTreeMap<Option<SocketAddr>, Vec<ServiceConfig>>> {
    let mut at: BTreeMap<Option<SocketAddr>, Vec<ServiceConfig>> = BTreeMap::new();
    for job in jobs {
        let service =
            ServiceConfig::of(job.job, job.world, &job.timeouts).with_secret(job.secret()?);
        match (job.collective, job.transport) {
            (None, TransportKind::Udp) => at.entry(None).or_default().push(service),
            (Some(addr), _) => at.entry(Some(addr)).or_default().push(service),
            // A DPDK switch address is not the kernel's: no service without an address.
            (None, TransportKind::Dpdk) => eprintln!(
                "switch: no all-reduce service for job {} (DPDK without a `collective` address \
                 in the job file): exchanges only",
                job.job
            ),
        }
    }
    Ok(at)
}

/// The job and its exchange plans: from the plan and dataset, or from an entries file.
fn job_and_session(args: &Args) -> Result<(JobFile, Arc<Session>, u64)> {
    let Some(path) = &args.entries else {
        let job = args.job.job(args.listen)?;
        let (plan, session) = load_session(&job)?;
        let memory = plan.manifest.spec.switch_memory;
        return Ok((job, session, memory));
    };
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let tables = switchgnn_p4::p4runtime::from_json(&text)
        .and_then(|e| e.switch_tables().map(|t| (e, t)))
        .with_context(|| format!("{} is not a usable entries file", path.display()));
    let (entries, tables) = tables?;
    let mode = parse_mode(&entries.meta.exchange)?;
    let mut job = if args.job.job.is_some() || args.job.plan.is_some() {
        let mut job = args.job.job(args.listen)?;
        if job.job != tables.job || job.world != tables.workers || job.mode != mode {
            bail!(
                "the job file describes job {} ({} workers, {} exchange) but {} installs job {} \
                 ({} workers, {} exchange)",
                job.job,
                job.world,
                job.mode.name(),
                path.display(),
                tables.job,
                tables.workers,
                mode.name()
            );
        }
        if job.allreduce.best_effort {
            bail!(
                "the job file asks for a best-effort all-reduce (a pool shared by jobs), which \
                 entries do not install: give the job its own region (best_effort = false, and \
                 `p4 entries --allreduce-slots`)"
            );
        }
        // A job that sums over tcp has no use for the region; one that sums in the switch
        // must agree with the entries on its size (none at all: its workers are told so).
        let in_switch = job.allreduce.via == switchgnn_transport::job::AllReduceVia::Switch;
        if in_switch && tables.allreduce_slots != 0 && job.allreduce.slots != tables.allreduce_slots
        {
            bail!(
                "the job file's [allreduce] slots = {} but {} installs {} all-reduce slots (`p4 \
                 entries --allreduce-slots`): the switch serves what the entries install; make \
                 the two agree",
                job.allreduce.slots,
                path.display(),
                tables.allreduce_slots
            );
        }
        job.allreduce.slots = tables.allreduce_slots;
        job
    } else {
        let listen = args
            .listen
            .context("with --entries and no job file, give the address with --listen")?;
        let mut job = JobFile::loopback(PathBuf::new(), mode, listen, tables.workers);
        job.job = tables.job;
        job.allreduce.slots = tables.allreduce_slots;
        job
    };
    job.link.ecn_threshold_bytes = Some(tables.ecn_threshold_bytes);
    let session = Session {
        mode,
        layers: tables.layers,
        checksum: tables.plan_checksum,
    };
    let memory = switchgnn_p4::program::aggregator_memory(switchgnn_p4::program::MAX_PIPES);
    Ok((job, Arc::new(session), memory))
}

/// `switch --tier`: one switch of the job's two-level fabric.
fn run_tier(args: &Args, tier: TierArg) -> Result<()> {
    if args.job.job.is_none() {
        bail!("--tier needs a job file (--job) with a [fabric] section");
    }
    if args.cores > 1 {
        bail!(
            "--cores {}: a leaf or spine of a two-level fabric runs on one core (its partial \
             sums are not split by destination)",
            args.cores
        );
    }
    let job = args.job.job(None)?;
    let (Some(racks), Some(fabric)) = (job.racks()?, job.fabric.as_ref()) else {
        bail!("--tier: the job file has no [fabric] section naming the leaves");
    };
    let (plan, session) = load_session(&job)?;
    let memory = match &args.switch_memory {
        Some(text) => switchgnn_partition::size::parse_bytes(text)?,
        None => plan.manifest.spec.switch_memory,
    };
    let racks = Arc::new(racks);
    let (listen, process, what) = match tier {
        TierArg::Spine => (
            args.listen.unwrap_or(job.switch),
            ProcessTier::Spine { racks },
            "spine".to_string(),
        ),
        TierArg::Leaf => {
            let rack = args.rack.context("--tier leaf needs --rack")?;
            let Some(&addr) = fabric.leaves.get(usize::from(rack)) else {
                bail!(
                    "--rack {rack}: the fabric has {} racks",
                    fabric.leaves.len()
                );
            };
            let spine = args.spine.unwrap_or(job.switch);
            (
                args.listen.unwrap_or(addr),
                ProcessTier::Leaf { rack, racks, spine },
                format!("leaf of rack {rack} (spine {spine})"),
            )
        }
    };
    // A fabric's all-reduce runs at the spine's service, never in a leaf's pool.
    let cfg = ServerConfig {
        allreduce_best_effort: false,
        allreduce_pool: None,
        ..server_config(args, &job, listen, memory)?
    };
    let listening = || format!("cannot listen on {listen}");
    // Training's all-reduce service runs beside the spine (or at the job's `collective`).
    let (mut server, collective) = match &process {
        ProcessTier::Spine { racks } => {
            let service =
                ServiceConfig::of(job.job, job.world, &job.timeouts).with_secret(job.secret()?);
            match job.collective {
                None => {
                    let (server, running) = SwitchServer::bind_spine_with_service(
                        cfg,
                        session.clone(),
                        racks.clone(),
                        service,
                    )
                    .with_context(listening)?;
                    (server, Some(running))
                }
                Some(at) => {
                    let server = SwitchServer::bind_tier(cfg, session.clone(), process.clone())
                        .with_context(listening)?;
                    let running = RunningService::start_jobs(at, vec![(service, None)])
                        .with_context(|| format!("cannot listen on TCP {at} for the service"))?;
                    (server, Some(running))
                }
            }
        }
        ProcessTier::Leaf { .. } => (
            SwitchServer::bind_tier(cfg, session.clone(), process).with_context(listening)?,
            None,
        ),
    };
    announce(args, &mut server, &format!("{what} of job"), &job, &session)?;
    let (stop, status) = signals(args)?;
    let result = server.run(&stop, Some(&status));
    let collective = collective.map(|c| c.finish(Duration::from_secs(2)));
    finish(args, &mut server)?;
    let outcome = result?;
    eprintln!(
        "switch: {what}: {} aggregations, {} exchanges completed, {} all-reduce slices",
        outcome.counters.aggregations,
        outcome.counters.exchanges_completed,
        outcome.counters.reduce_slices
    );
    if let Some(collective) = collective {
        let collective = collective.context("the collective service failed")?;
        if collective.rounds > 0 {
            eprintln!(
                "switch: {} all-reduce rounds, {} values reduced",
                collective.rounds, collective.values_in
            );
        }
    }
    Ok(())
}

/// The switch of `job` listening on `listen` with `memory` of aggregators on the cores asked
/// for: the job file's own switch ([`ServerConfig::of_job`]).
fn server_config(
    args: &Args,
    job: &JobFile,
    listen: SocketAddr,
    memory: u64,
) -> Result<ServerConfig> {
    Ok(ServerConfig {
        cores: args.cores,
        ..ServerConfig::of_job(job, listen, memory, job.secret()?)
    })
}

/// Once bound: start the capture, write the ready file, say where `what` ("job", "spine of
/// job") listens.
fn announce(
    args: &Args,
    server: &mut SwitchServer,
    what: &str,
    job: &JobFile,
    session: &Session,
) -> Result<()> {
    if let Some(capture) = args.capture.start()? {
        server.capture_to(capture);
    }
    let addr = server.local_addr()?;
    if let Some(path) = &args.ready_file {
        write_json(path, &addr.to_string())?;
    }
    eprintln!(
        "switch: {what} {} ({} exchange, {} workers, {} layers) listening on {addr}",
        job.job,
        job.mode.name(),
        job.world,
        session.layers.len()
    );
    Ok(())
}

/// Stop on SIGINT and SIGTERM, print the status line on SIGUSR1 (and every --status-every).
fn signals(args: &Args) -> Result<(Arc<AtomicBool>, Arc<AtomicBool>)> {
    let stop = Arc::new(AtomicBool::new(false));
    let status = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, stop.clone())?;
    }
    signal_hook::flag::register(signal_hook::consts::SIGUSR1, status.clone())?;
    if let Some(secs) = args.status_every {
        let every = Duration::from_secs_f64(secs.max(0.1));
        let (status, stop) = (status.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(every);
                status.store(true, Ordering::Relaxed);
            }
        });
    }
    Ok((stop, status))
}

/// After the run: the status line, the capture closed, the report written.
fn finish(args: &Args, server: &mut SwitchServer) -> Result<()> {
    eprintln!("{}", server.status_line());
    if let Some(c) = server
        .finish_capture()
        .context("cannot finish the capture")?
    {
        eprintln!(
            "switch: captured {} packets ({} more past the limit)",
            c.packets, c.skipped
        );
    }
    if let Some(path) = &args.report {
        write_json(path, &server.report())?;
    }
    Ok(())
}

pub(crate) fn run(args: Args) -> Result<()> {
    if let Some(tier) = args.tier {
        return run_tier(&args, tier);
    }
    let (job, session, plan_memory) = job_and_session(&args)?;
    let also = args
        .also_job
        .iter()
        .map(|path| also_job(path, job.switch))
        .collect::<Result<Vec<_>>>()?;
    let files: Vec<JobFile> = std::iter::once(job.clone())
        .chain(also.iter().map(|(j, _, _)| j.clone()))
        .collect();
    let best_effort = files.iter().any(|j| j.allreduce.best_effort);
    let cfg = jobs_config(&args, &job, plan_memory, &also, best_effort)?;
    let more = also
        .iter()
        .map(|(j, session, _)| {
            Ok(ServedJob {
                job: j.job,
                world: j.world,
                session: session.clone(),
                timeouts: j.timeouts,
                secret: j.secret()?,
                allreduce_slots: j.allreduce.slots,
                allreduce_best_effort: j.allreduce.best_effort,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let (mut server, collective) = bind_jobs(cfg, &session, more, &files)?;
    announce(&args, &mut server, "job", &job, &session)?;
    for (j, session, _) in &also {
        eprintln!(
            "switch: also job {} ({} exchange, {} workers, {} layers)",
            j.job,
            j.mode.name(),
            j.world,
            session.layers.len()
        );
    }

    let (stop, status) = signals(&args)?;
    let result = server.run(&stop, Some(&status));
    let collective: Vec<_> = collective
        .into_iter()
        .map(|c| c.finish(std::time::Duration::from_secs(2)))
        .collect();
    finish(&args, &mut server)?;
    let outcome = result?;
    for collective in collective {
        let collective = collective.context("the collective service failed")?;
        if collective.rounds > 0 {
            eprintln!(
                "switch: {} all-reduce rounds, {} values reduced",
                collective.rounds, collective.values_in
            );
        }
    }
    print_outcome(&outcome, &files, best_effort);
    Ok(())
}

/// The switch serving the first job and the `also` jobs: the memory they share (the sum of
/// their plans' unless --switch-memory says), each one's quota of it when there are several,
/// and the best-effort all-reduce pool when any asks for one (or --allreduce-pool sizes it).
fn jobs_config(
    args: &Args,
    job: &JobFile,
    plan_memory: u64,
    also: &[(JobFile, Arc<Session>, u64)],
    best_effort: bool,
) -> Result<ServerConfig> {
    let memory = match &args.switch_memory {
        Some(text) => switchgnn_partition::size::parse_bytes(text)?,
        // Each plan's blocks were cut to fit its memory: together they get the sum.
        None => plan_memory + also.iter().map(|(_, _, m)| m).sum::<u64>(),
    };
    if !(args.allreduce_leak_ms.is_finite() && args.allreduce_leak_ms > 0.0) {
        bail!("--allreduce-leak-ms must be positive");
    }
    let leak = Duration::from_secs_f64(args.allreduce_leak_ms / 1e3);
    Ok(ServerConfig {
        // Several jobs: each holds at most the aggregators its plan was cut for.
        aggregator_quotas: if also.is_empty() {
            Default::default()
        } else {
            std::iter::once((job.job, plan_memory))
                .chain(also.iter().map(|(j, _, m)| (j.job, *m)))
                .map(|(id, m)| {
                    let quota = m / switchgnn_dataplane::switch::AGGREGATOR_BYTES;
                    (id, quota as usize)
                })
                .collect()
        },
        allreduce_pool: match (args.allreduce_pool, best_effort) {
            (Some(slots), _) => Some(AllReducePool { slots, leak }),
            (None, true) => Some(AllReducePool {
                leak,
                ..AllReducePool::default()
            }),
            (None, false) => None,
        },
        ..server_config(args, job, job.switch, memory)?
    })
}

/// Bind the switch of `cfg` serving `session` and the `more` jobs, with the all-reduce
/// services the job `files` need: TCP on the switch's address, or each job's `collective`
/// address.
fn bind_jobs(
    cfg: ServerConfig,
    session: &Arc<Session>,
    more: Vec<ServedJob>,
    files: &[JobFile],
) -> Result<(SwitchServer, Vec<RunningService>)> {
    let listen = cfg.listen;
    let mut services = services(files)?;
    let listening = || format!("cannot listen on {listen}");
    let (server, mut collective) = match services.remove(&None) {
        Some(beside) => {
            let (server, running) =
                SwitchServer::bind_jobs_with_service(cfg, session.clone(), more, beside)
                    .with_context(listening)?;
            (server, vec![running])
        }
        None => (
            SwitchServer::bind_jobs(cfg, session.clone(), more).with_context(listening)?,
            Vec::new(),
        ),
    };
    for (at, jobs) in services {
        let at = at.expect("the switch's own address was taken out");
        let jobs = jobs
            .into_iter()
            .map(|s| {
                let liveness = server.liveness_of(s.job);
                (s, liveness)
            })
            .collect();
        let running = RunningService::start_jobs(at, jobs)
            .with_context(|| format!("cannot listen on TCP {at} for the collective service"))?;
        collective.push(running);
    }
    Ok((server, collective))
}

/// The closing lines: the best-effort pool's spills, the in-switch all-reduce, the traffic,
/// each core's share.
fn print_outcome(
    outcome: &switchgnn_transport::ServerReport,
    files: &[JobFile],
    best_effort: bool,
) {
    let k = &outcome.counters;
    if best_effort {
        eprintln!(
            "switch: best-effort all-reduce: {} collisions and {} leaks sent to the host, which \
             finished {} slices",
            k.reduce_collisions, k.reduce_leaks, k.reduce_host_slices
        );
    }
    if k.reduce_slices > 0 {
        eprintln!(
            "switch: in-switch all-reduce: {} slices of {} slots combined, {} lanes, {} results \
             sent again",
            k.reduce_slices,
            files
                .iter()
                .map(|j| j.allreduce.slots.to_string())
                .collect::<Vec<_>>()
                .join("+"),
            k.reduce_lane_updates,
            k.reduce_replays
        );
    }
    eprintln!(
        "switch: done in {:.2} s: {} exchanges, {} packets in ({} B), {} out ({} B), {} lane \
         updates, peak {} aggregators",
        outcome.elapsed_s,
        k.exchanges_completed,
        k.packets_in,
        k.bytes_in,
        k.packets_out,
        k.bytes_out,
        k.lane_updates,
        k.peak_aggregators
    );
    if outcome.passes_per_core.len() > 1 {
        let per_core: Vec<String> = outcome.passes_per_core.iter().map(u64::to_string).collect();
        eprintln!(
            "switch: model on {} cores, aggregator passes per core: {}",
            per_core.len(),
            per_core.join(", ")
        );
    }
}
