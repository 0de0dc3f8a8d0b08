//! `switchgnn worker`: one worker of a job, exchanging every layer forward and backward
//! through the switch and checking each result against the direct computation.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use switchgnn_transport::collective::{CollectiveClient, Member};
use switchgnn_transport::job::{resolve_rank, ExchangeVia};
use switchgnn_transport::runner::{run_worker, run_worker_over_tcp, RunOptions};
use switchgnn_transport::tcp_exchange::{MeshConfig, TcpMesh};
use switchgnn_transport::{JobFile, Session, WorkerClient, WorkerConfig};

use crate::job_args::{load, write_json, JobArgs};

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    pub(crate) job: JobArgs,
    /// This worker's rank (default: from SLURM_PROCID, RANK, OMPI_COMM_WORLD_RANK or
    /// PMI_RANK).
    #[arg(long)]
    pub(crate) rank: Option<u16>,
    /// The switch's address (default: the job file's; on a two-level fabric, the leaf of this
    /// worker's rack).
    #[arg(long)]
    pub(crate) switch: Option<SocketAddr>,
    /// Address to bind (default: the job file's, else any address and a free port).
    #[arg(long)]
    pub(crate) bind: Option<SocketAddr>,
    /// Rounds of the exchange schedule (every layer forward, then backward).
    #[arg(long, default_value_t = 1)]
    pub(crate) epochs: u32,
    /// Write this worker's report (per exchange: time, packets, bytes, exactness) as JSON.
    #[arg(long, value_name = "FILE")]
    pub(crate) report: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) capture: crate::capture_args::CaptureArgs,
}

pub(crate) fn run(args: Args) -> Result<()> {
    let job = args.job.job(args.switch)?;
    let rank = resolve_rank(args.rank, job.world, &|k| std::env::var(k).ok())?;
    // On a two-level fabric, the leaf switch of the worker's rack.
    let switch = args.switch.unwrap_or_else(|| job.switch_of(rank));
    let loaded = load(&job)?;
    let mut cfg = WorkerConfig::of_job(&job, rank, loaded.session.checksum, switch, job.secret()?);
    if let Some(bind) = args.bind {
        cfg.bind = bind;
    }
    let mut client = WorkerClient::connect_capturing(cfg, args.capture.start()?)?;
    let cancel = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, cancel.clone())?;
    }
    client.set_cancel(cancel);
    tracing::info!(rank, %switch, "joined");
    let opts = RunOptions {
        job: job.job,
        rank,
        epochs: args.epochs,
        line_rate: job.link.rate(),
        window: job.link.window,
        timers: job.timeouts.protocol(),
        framing: job.link.framing(),
        compute: std::time::Duration::ZERO,
        chip: job.chip(),
    };
    let progress = |what: &str| tracing::info!(rank, "{what}");
    let report = match job.exchange_via {
        ExchangeVia::Switch => {
            run_worker(client, &loaded.session, &loaded.dataset, opts, &progress)?
        }
        ExchangeVia::Tcp => {
            let mesh = meet_peers(&job, &loaded.session, rank, switch)?;
            tracing::info!(rank, "connected to every other worker over TCP");
            run_worker_over_tcp(
                client,
                mesh,
                &loaded.session,
                &loaded.dataset,
                opts,
                &progress,
            )?
        }
    };
    if let Some(path) = &args.report {
        write_json(path, &report)?;
    }
    let bad: Vec<u32> = report
        .exchanges
        .iter()
        .filter(|x| x.mismatched_rows > 0)
        .map(|x| x.seq)
        .collect();
    let seconds: f64 = report.exchanges.iter().map(|x| x.seconds).sum();
    if !bad.is_empty() {
        bail!("worker {rank}: exchanges {bad:?} differ from the direct computation");
    }
    if let Some(tcp) = &report.tcp {
        eprintln!(
            "worker {rank}: {} B over TCP to the other workers, {} B from them ({} and {} \
             segments)",
            tcp.bytes_sent, tcp.bytes_received, tcp.segments_sent, tcp.segments_received
        );
    }
    eprintln!(
        "worker {rank}: {} exchanges exact in {seconds:.2} s; {} packets / {} B to the switch, \
         {} / {} B from it",
        report.exchanges.len(),
        report.wire.to_switch.packets_sent,
        report.wire.to_switch.bytes_sent,
        report.wire.to_switch.packets_received,
        report.wire.to_switch.bytes_received
    );
    Ok(())
}

/// The TCP exchange's connections to every other worker: they meet through the collective
/// service beside the switch, which this worker leaves once they have.
fn meet_peers(job: &JobFile, session: &Session, rank: u16, switch: SocketAddr) -> Result<TcpMesh> {
    let secret = job.secret()?;
    let who = Member {
        job: job.job,
        rank,
        world: job.world,
        agreement: session.checksum,
        secret: secret.clone(),
    };
    let at = job.collective_at(switch);
    let mut collective = CollectiveClient::connect(
        at,
        &who,
        job.timeouts.join(),
        job.timeouts.collective_idle(),
    )
    .with_context(|| format!("worker {rank}: cannot meet the other workers through {at}"))?;
    let cfg = MeshConfig {
        job: job.job,
        rank,
        world: job.world,
        checksum: session.checksum,
        secret,
        join: job.timeouts.join(),
        idle: job.timeouts.collective_idle(),
        line_rate: Some(job.link.rate()),
    };
    TcpMesh::join(&mut collective, cfg).with_context(|| format!("worker {rank}"))
}
