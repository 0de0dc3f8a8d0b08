//! `switchgnn worker`: one worker of a job, exchanging every layer forward and backward
//! through the switch and checking each result against the direct computation.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use anyhow::{bail, Result};
use switchgnn_transport::job::resolve_rank;
use switchgnn_transport::runner::{run_worker, RunOptions};
use switchgnn_transport::{WorkerClient, WorkerConfig};

use crate::job_args::{load, write_json, JobArgs};

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub job: JobArgs,
    /// This worker's rank (default: from SLURM_PROCID, RANK, OMPI_COMM_WORLD_RANK or
    /// PMI_RANK).
    #[arg(long)]
    pub rank: Option<u16>,
    /// The switch's address (default: the job file's; on a two-level fabric, the leaf of this
    /// worker's rack).
    #[arg(long)]
    pub switch: Option<SocketAddr>,
    /// Address to bind (default: the job file's, else any address and a free port).
    #[arg(long)]
    pub bind: Option<SocketAddr>,
    /// Rounds of the exchange schedule (every layer forward, then backward).
    #[arg(long, default_value_t = 1)]
    pub epochs: u32,
    /// Write this worker's report (per exchange: time, packets, bytes, exactness) as JSON.
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    #[command(flatten)]
    pub capture: crate::capture_args::CaptureArgs,
}

pub fn run(args: Args) -> Result<()> {
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
    let report = run_worker(client, &loaded.session, &loaded.dataset, opts, &|what| {
        tracing::info!(rank, "{what}")
    })?;
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
