//! What `switch` and `worker` share: where the job comes from (a job file, or flags for a
//! quick run), and loading the dataset, the plan and the exchange session it names.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use switchgnn_datasets::{LoadOptions, Source};
use switchgnn_partition::plan::graph_fingerprint;
use switchgnn_partition::shard::{shard_path, Cutter, DataShard, SHARDS_DIR};
use switchgnn_partition::size::format_bytes;
use switchgnn_partition::Plan;
use switchgnn_transport::job::{self, ExchangeVia};
use switchgnn_transport::{ExchangeKind, JobFile, PlanDir, Session};

use crate::progress::Bars;

#[derive(Debug, clap::Args)]
pub(crate) struct JobArgs {
    /// The job file (TOML): plan, exchange mode, switch address, world size, timeouts, link,
    /// faults. Without one, the flags below describe the job.
    #[arg(long, value_name = "FILE")]
    pub(crate) job: Option<PathBuf>,
    /// The plan directory written by `switchgnn prepare` (without a job file).
    #[arg(long, value_name = "DIR", conflicts_with = "job")]
    pub(crate) plan: Option<PathBuf>,
    /// The exchange: switch (SwitchGNN blocks), host, g3, host-reduce (host-only partial
    /// sums), host-hybrid (per worker pair, raw copies or partial sums, the fewer rows),
    /// host-two-level (its rack proxies need racks: with none, one rack, host-reduce's sums),
    /// strawman, reduce (partial sums added in the switch), auto (each layer the kind its plan
    /// records) or tcp (the host exchange over TCP between the workers); without a job file.
    #[arg(long, default_value = "switch", conflicts_with = "job")]
    pub(crate) exchange: String,
    /// The dataset argument (default: the one the plan was prepared from).
    #[arg(long)]
    pub(crate) dataset: Option<String>,
}

impl JobArgs {
    /// The job: read from the file, or assembled from the flags with `switch` as the switch's
    /// address and the plan's worker count as the world size.
    pub(crate) fn job(&self, switch: Option<SocketAddr>) -> Result<JobFile> {
        let mut job = match (&self.job, &self.plan) {
            (Some(path), _) => JobFile::read(path)?,
            (None, Some(plan)) => {
                let (mode, via) = parse_exchange(&self.exchange)?;
                let switch = switch.context("without --job, give the switch's address")?;
                let workers = PlanDir::open_summary(plan)?.workers();
                let mut job = JobFile::loopback(plan.clone(), mode, switch, workers);
                job.bind = None;
                job.exchange_via = via;
                job
            }
            (None, None) => bail!("give a job file (--job FILE) or a plan (--plan DIR)"),
        };
        if let Some(addr) = switch {
            job.switch = addr;
        }
        if self.dataset.is_some() {
            job.dataset.clone_from(&self.dataset);
        }
        Ok(job)
    }
}

pub(crate) fn parse_mode(name: &str) -> Result<ExchangeKind> {
    ExchangeKind::parse(name).with_context(|| {
        format!(
            "unknown exchange `{name}` (one of: switch, host, g3, host-reduce, host-hybrid, \
             host-two-level, strawman, reduce, hybrid, auto)"
        )
    })
}

/// An exchange of the command line: a kind through the switch, or `tcp` (the host exchange
/// over TCP between the workers).
pub(crate) fn parse_exchange(name: &str) -> Result<(ExchangeKind, ExchangeVia)> {
    job::parse_exchange(name).with_context(|| {
        format!(
            "unknown exchange `{name}` (one of: switch, host, g3, host-reduce, host-hybrid, \
             host-two-level, strawman, reduce, hybrid, auto, tcp)"
        )
    })
}

/// A job's dataset, plan and exchange plans, checked against each other.
#[derive(Debug)]
pub(crate) struct Loaded {
    pub(crate) dataset: switchgnn_datasets::Dataset,
    pub(crate) plan: Plan,
    pub(crate) session: Arc<Session>,
}

pub(crate) fn load(job: &JobFile) -> Result<Loaded> {
    let plan = read_plan(&job.plan)?;
    check_world(job, &plan)?;
    let name = job
        .dataset
        .clone()
        .unwrap_or_else(|| plan.manifest.spec.dataset.clone());
    let dataset = load_dataset(&name)?;
    check_plan_fits(&plan, &dataset.graph, &job.plan)?;
    let session = Session::new(&plan, &dataset.graph, job.mode)
        .with_context(|| format!("cannot build the {} exchange plans", job.mode.name()))?;
    Ok(Loaded {
        dataset,
        plan,
        session: Arc::new(session),
    })
}

/// What one training worker reads: its shard when the plan directory has shards (written by
/// `switchgnn shard`), else the whole dataset, of which it keeps only its own part.
#[derive(Debug)]
pub(crate) struct WorkerInputs {
    pub(crate) plan: Plan,
    pub(crate) shard: DataShard,
    pub(crate) session: Arc<Session>,
    /// Where the worker's data came from, for the log.
    pub(crate) source: String,
}

pub(crate) fn load_worker(job: &JobFile, rank: u16) -> Result<WorkerInputs> {
    let path = shard_path(&job.plan, u32::from(rank));
    if !path.exists() {
        let loaded = load(job)?;
        let workers = loaded.plan.manifest.spec.workers;
        let shard = Cutter::new(&loaded.dataset, loaded.plan.assignment.parts(), workers)?
            .cut(u32::from(rank));
        return Ok(WorkerInputs {
            source: format!(
                "the whole dataset `{}` (no shard at {}; `switchgnn shard --plan {}` writes them)",
                loaded.dataset.name,
                path.display(),
                job.plan.display()
            ),
            session: Arc::new(loaded.session.for_worker(rank)),
            plan: loaded.plan,
            shard,
        });
    }
    // With this worker's saved view of the exchange, the plan's blocks are not needed.
    let summary = PlanDir::open_summary(&job.plan)?;
    let has_view = summary.has_view(job.mode, rank);
    let dir = if has_view {
        summary
    } else {
        PlanDir::open(&job.plan)?
    };
    check_world(job, dir.plan())?;
    let shard = DataShard::read(&path)?;
    shard.check_plan(dir.plan(), u32::from(rank), &path)?;
    let view = dir.view_path(job.mode, rank);
    let session = dir.saved_view(job.mode, rank)?.with_context(|| {
        format!(
            "{} holds shards but no saved {} exchange plans, which a worker without the \
             graph cannot build; run `switchgnn shard --plan {} --exchange {}`",
            job.plan.join(SHARDS_DIR).display(),
            job.mode.name(),
            job.plan.display(),
            job.mode.name()
        )
    })?;
    let plan = dir.into_plan();
    let size = |p: &Path| std::fs::metadata(p).map_or(0, |m| m.len());
    let view_note = if has_view {
        format!(
            " and its view of the exchange ({})",
            format_bytes(size(&view))
        )
    } else {
        String::new()
    };
    Ok(WorkerInputs {
        source: format!(
            "its shard {} ({}){view_note}",
            path.display(),
            format_bytes(size(&path))
        ),
        plan,
        shard,
        session: Arc::new(session),
    })
}

/// The job's plan and exchange plans, loading the dataset only when nothing saved serves:
/// what the switch process needs. The saved plans: SwitchGNN's from the plan directory,
/// another kind's from the file `switchgnn shard` (or Python's `switchgnn.prepare`) saved.
pub(crate) fn load_session(job: &JobFile) -> Result<(Plan, Arc<Session>)> {
    let dir = PlanDir::open(&job.plan)?;
    check_world(job, dir.plan())?;
    if let Some(session) = dir.saved_session(job.mode)? {
        return Ok((dir.into_plan(), Arc::new(session)));
    }
    let loaded = load(job)?;
    Ok((loaded.plan, loaded.session))
}

fn check_world(job: &JobFile, plan: &Plan) -> Result<()> {
    if plan.manifest.spec.workers != u32::from(job.world) {
        bail!(
            "the job has world = {} but the plan in {} is for {} workers",
            job.world,
            job.plan.display(),
            plan.manifest.spec.workers
        );
    }
    Ok(())
}

/// The whole plan of a plan folder.
pub(crate) fn read_plan(dir: &Path) -> Result<Plan> {
    Ok(PlanDir::open(dir)?.into_plan())
}

/// Load a dataset argument with default options.
pub(crate) fn load_dataset(name: &str) -> Result<switchgnn_datasets::Dataset> {
    let source: Source = name.parse()?;
    let bars = Bars::new();
    let dataset = source
        .load(&LoadOptions::default(), &bars)
        .with_context(|| format!("cannot load dataset `{name}`"))?;
    bars.finish();
    Ok(dataset)
}

/// A plan applies only to the graph it was prepared for.
pub(crate) fn check_plan_fits(
    plan: &Plan,
    graph: &switchgnn_datasets::Graph,
    dir: &Path,
) -> Result<()> {
    let want = plan.manifest.dataset.fingerprint;
    let got = graph_fingerprint(graph);
    if want != got {
        bail!(
            "the plan in {} was prepared for another graph ({}: {} vertices, {} edges, \
             fingerprint {want:#018x}; this one has {} vertices, {} edges, fingerprint {got:#018x})",
            dir.display(),
            plan.manifest.dataset.name,
            plan.manifest.dataset.vertices,
            plan.manifest.dataset.edges,
            graph.num_vertices(),
            graph.num_edges(),
        );
    }
    Ok(())
}

/// Write `value` as pretty JSON, atomically.
pub(crate) fn write_json(path: &Path, value: &impl serde::Serialize) -> Result<()> {
    let json = serde_json::to_vec_pretty(value)?;
    switchgnn_datasets::atomic::write_atomically(path, |w| std::io::Write::write_all(w, &json))
        .with_context(|| format!("cannot write {}", path.display()))
}
