//! `switchgnn train`: full-graph training, one or more seeds, with a progress line per epoch,
//! the per-epoch log as CSV and JSON and the curves as SVG.
//!
//! - `--workers 1`: the single-process reference trainer;
//! - `--workers M` (M ≥ 2): prepares (or reuses) a plan for M workers and the model's
//!   aggregated widths, starts the software switch with its collective service and M workers
//!   on loopback, and trains over real UDP with the chosen exchange;
//! - `--job FILE`: one worker of a multi-host job (its switch runs `switchgnn switch --job`).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use switchgnn_datasets::Dataset;
use switchgnn_trainer::distributed::cluster::{run_training_worker, LoopbackJob};
use switchgnn_trainer::distributed::Shard;
use switchgnn_trainer::plot::write_svg;
use switchgnn_trainer::{
    train, DatasetSummary, EpochRecord, FeatureNorm, ModelConfig, ModelKind, Prepared, RunReport,
    Summary, TrainConfig, TrainLog,
};
use switchgnn_transport::job::{resolve_rank, AllReduceVia, ExchangeVia};
use switchgnn_transport::JobFile;

use crate::dataset_args::DatasetArgs;
use crate::job_args::{load_worker, parse_exchange};
use crate::loopback_args::LoopbackArgs;
use crate::partition_args::{reuse_or_prepare, PartitionArgs};

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    pub(crate) dataset: DatasetArgs,
    /// gcn (Kipf & Welling) or sage (GraphSAGE, mean aggregator).
    #[arg(long, default_value = "gcn")]
    pub(crate) model: String,
    /// Graph convolution layers.
    #[arg(long, default_value_t = 2)]
    pub(crate) layers: usize,
    /// Width of the hidden layers.
    #[arg(long, default_value_t = 16)]
    pub(crate) hidden: usize,
    /// Dropout rate on every layer's input.
    #[arg(long, default_value_t = 0.5)]
    pub(crate) dropout: f64,
    /// Adam's learning rate.
    #[arg(long, default_value_t = 0.01)]
    pub(crate) lr: f64,
    /// L2 penalty on the first layer's parameters.
    #[arg(long, default_value_t = 5e-4)]
    pub(crate) weight_decay: f64,
    #[arg(long, default_value_t = 200)]
    pub(crate) epochs: usize,
    /// Stop after this many epochs without a better validation accuracy (default: run all).
    #[arg(long)]
    pub(crate) patience: Option<usize>,
    /// Seed of the first run's weights and dropout masks.
    #[arg(long, default_value_t = 0)]
    pub(crate) seed: u64,
    /// Train this many models, seeds `seed`, `seed + 1`, ..., and report mean ± std.
    #[arg(long, default_value_t = 1)]
    pub(crate) runs: u64,
    /// Input feature scaling: row (divide each row by its sum), none, or auto (row when no
    /// feature is negative).
    #[arg(long, default_value = "auto")]
    pub(crate) feature_norm: String,
    /// libtorch's intra-op threads (default: libtorch's choice, one per core).
    #[arg(long)]
    pub(crate) threads: Option<i32>,
    /// Folder for log.csv, log.json and curves.svg (default results/train-<dataset>-<model>).
    #[arg(long, short)]
    pub(crate) out: Option<PathBuf>,
    /// Print a line every this many epochs (the last epoch always).
    #[arg(long, default_value_t = 10)]
    pub(crate) print_every: usize,
    /// Print the summary as JSON on stdout.
    #[arg(long)]
    pub(crate) json: bool,
    /// Workers: 1 trains in this process (the reference); more run the distributed trainer
    /// over the software switch on loopback.
    #[arg(long, default_value_t = 4)]
    pub(crate) workers: u32,
    /// The exchange of a distributed run: switch (SwitchGNN blocks), host, g3, host-reduce
    /// (host-only partial sums), host-hybrid (per worker pair, raw copies or partial sums, the
    /// fewer rows), strawman, reduce (partial sums added in the switch), auto (per layer, the
    /// kind the planner picks) or tcp (the host exchange over TCP between the workers, the
    /// kernel's transport).
    #[arg(long, default_value = "switch")]
    pub(crate) exchange: String,
    /// Where the gradient all-reduce runs: switch (in the switch's slots, SwitchML's protocol)
    /// or tcp (the parameter-server service beside it). Default: the job file's, else switch.
    #[arg(long, value_name = "switch|tcp")]
    pub(crate) allreduce: Option<String>,
    /// Plan folder to reuse, or to create when it does not exist (default: `plan-<M>` in the
    /// output folder, re-prepared when it does not fit).
    #[arg(long, value_name = "DIR")]
    pub(crate) plan: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) net: LoopbackArgs,
    /// Run as one worker of the job in this file (its plan must be prepared for the model's
    /// aggregated widths); the rank comes from --rank or the launcher's variables.
    #[arg(long, value_name = "FILE")]
    pub(crate) job: Option<PathBuf>,
    /// This worker's rank (with --job).
    #[arg(long, requires = "job")]
    pub(crate) rank: Option<u16>,
    /// The switch's address (with --job; default: the job file's).
    #[arg(long, requires = "job")]
    pub(crate) switch: Option<SocketAddr>,
}

pub(crate) fn run(args: Args) -> Result<()> {
    let model = ModelConfig {
        kind: args.model.parse::<ModelKind>()?,
        layers: args.layers,
        hidden: args.hidden,
        dropout: args.dropout,
    };
    let config = TrainConfig {
        model,
        epochs: args.epochs,
        lr: args.lr,
        weight_decay: args.weight_decay,
        patience: args.patience,
        seed: args.seed,
        feature_norm: args.feature_norm.parse::<FeatureNorm>()?,
    };
    config.check()?;
    if !tracing::enabled!(tracing::Level::DEBUG) {
        switchgnn_trainer::hide_libtorch_warnings();
    }
    anyhow::ensure!(args.runs >= 1, "--runs must be at least 1");
    if let Some(threads) = args.threads {
        anyhow::ensure!(threads >= 1, "--threads must be at least 1");
        switchgnn_trainer::set_threads(threads);
    }
    if let Some(path) = &args.job {
        return run_job_worker(&args, path, &config);
    }
    anyhow::ensure!(
        (1..=512).contains(&args.workers),
        "--workers {} must be between 1 and 512",
        args.workers
    );
    args.net.check()?;
    let dataset = args.dataset.load()?;
    let summary = DatasetSummary::of(&dataset);
    let out = out_folder(&args, &summary, &config);
    std::fs::create_dir_all(&out).with_context(|| format!("cannot create {}", out.display()))?;
    let bar = ProgressBar::new(config.epochs as u64 * args.runs).with_style(
        ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} epochs ({eta})")
            .expect("valid template")
            .progress_chars("=> "),
    );
    let mut trainer = if args.workers == 1 {
        let data = Prepared::new(&dataset, &config)
            .with_context(|| format!("cannot train on `{}`", args.dataset.dataset))?;
        drop(dataset);
        Trainer::Reference(Box::new(data))
    } else {
        Trainer::Loopback(Box::new(Loopback::new(&args, &config, dataset, &out)?))
    };
    let mut runs = Vec::new();
    for seed in args.seed..args.seed + args.runs {
        let run_config = TrainConfig {
            seed,
            ..config.clone()
        };
        let mut observe = |e: &EpochRecord| {
            bar.inc(1);
            bar.set_message(format!("seed {seed} {}", short(e)));
            if e.epoch % args.print_every.max(1) == 0 || e.epoch == config.epochs {
                let line = format!("seed {seed} epoch {:>4}  {}", e.epoch, short(e));
                if bar.is_hidden() {
                    eprintln!("{line}");
                } else {
                    bar.println(line);
                }
            }
        };
        let report = trainer.train(&run_config, &mut observe)?;
        if report.stopped_early {
            // Keep the bar's total honest: skipped epochs count as done.
            bar.inc((config.epochs - report.epochs.len()) as u64);
        }
        println!("seed {seed}: {}", describe_run(&report));
        if let Trainer::Loopback(l) = &trainer {
            l.print_traffic();
        }
        runs.push(report);
    }
    bar.finish_and_clear();

    let (feature_norm, inputs, classes, workers, exchange, allreduce) = match &trainer {
        Trainer::Reference(d) => (
            d.feature_norm,
            d.features.cols(),
            d.targets.num_classes,
            1,
            None,
            None,
        ),
        Trainer::Loopback(l) => (
            l.feature_norm().unwrap_or(config.feature_norm),
            l.inputs,
            l.classes,
            args.workers as usize,
            Some(l.job.job().exchange_name().to_string()),
            Some(l.job.job().allreduce.via.name().to_string()),
        ),
    };
    let log = TrainLog {
        dataset: summary,
        config: config.clone(),
        feature_norm,
        parameters: config.model.parameter_count(inputs, classes),
        threads: switchgnn_trainer::threads(),
        workers,
        exchange,
        allreduce,
        summary: Summary::of(&runs),
        runs,
    };
    write_outputs(&log, &out, args.json)
}

/// The log, its CSV, the curves, and the summary on stdout.
fn write_outputs(log: &TrainLog, out: &Path, json: bool) -> Result<()> {
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    log.write_csv(&out.join("log.csv"))?;
    log.write_json(&out.join("log.json"))?;
    write_svg(log, &out.join("curves.svg"))?;
    let s = &log.summary;
    let config = &log.config;
    if json {
        println!("{}", serde_json::to_string_pretty(&log.summary)?);
    } else {
        let d = &log.dataset;
        let on = match &log.exchange {
            Some(x) => format!("{} workers, {x} exchange", log.workers),
            None => "1 process".to_string(),
        };
        println!(
            "{}: {} vertices, {} edges, split {} ({}/{}/{}); {} {}x{}, {} parameters, feature norm {}, {on}, {} threads",
            d.name,
            d.vertices,
            d.edges,
            d.split,
            d.train,
            d.val,
            d.test,
            config.model.kind.name(),
            config.model.layers,
            config.model.hidden,
            log.parameters,
            log.feature_norm.name(),
            log.threads,
        );
        let test = s.test_accuracy.map_or("n/a".into(), |t| {
            format!("{:.2} ± {:.2} %", 100.0 * t.mean, 100.0 * t.std)
        });
        println!(
            "test accuracy over {} run{}: {test} (val {:.2} ± {:.2} %), {:.2} ms per epoch (forward+backward+step)",
            s.runs,
            if s.runs == 1 { "" } else { "s" },
            100.0 * s.val_accuracy.mean,
            100.0 * s.val_accuracy.std,
            1e3 * s.train_seconds_per_epoch.mean,
        );
    }
    eprintln!("wrote {}/{{log.csv,log.json,curves.svg}}", out.display());
    Ok(())
}

fn describe_run(report: &RunReport) -> String {
    let best = report.best();
    format!(
        "test {} at epoch {} (val {:.4}, train {:.4}){}, {:.2} ms/epoch",
        best.test_accuracy
            .map_or("n/a".to_string(), |t| format!("{t:.4}")),
        report.best_epoch,
        best.val_accuracy,
        best.train_accuracy,
        if report.stopped_early {
            format!(", stopped at epoch {}", report.epochs.len())
        } else {
            String::new()
        },
        report.mean_train_seconds() * 1e3,
    )
}

enum Trainer {
    Reference(Box<Prepared>),
    Loopback(Box<Loopback>),
}

impl Trainer {
    fn train(
        &mut self,
        config: &TrainConfig,
        observe: &mut (dyn FnMut(&EpochRecord) + Send),
    ) -> Result<RunReport> {
        match self {
            Trainer::Reference(data) => Ok(train(data, config, observe)?),
            Trainer::Loopback(l) => l.train(config, observe),
        }
    }
}

/// A distributed job on this machine (the library's [`LoopbackJob`]) and the model's widths.
struct Loopback {
    job: LoopbackJob,
    inputs: usize,
    classes: usize,
}

impl Loopback {
    /// Prepare (or reuse) the plan for the job's workers and the model's aggregated widths.
    fn new(args: &Args, config: &TrainConfig, dataset: Dataset, out: &Path) -> Result<Loopback> {
        let (mode, via) = parse_exchange(&args.exchange)?;
        let (inputs, classes) = inputs_and_classes(&dataset)?;
        let memory = args.net.memory()?;
        let spec = default_partition().plan_spec(
            &args.dataset.dataset,
            args.workers,
            memory,
            config.model.aggregated_widths(inputs, classes),
        );
        let (dir, replace) = match &args.plan {
            Some(dir) => (dir.clone(), false),
            None => (out.join(format!("plan-{}", args.workers)), true),
        };
        let plan = reuse_or_prepare(&dataset, &spec, &dir, replace)?;
        let mut job = JobFile::loopback(
            dir,
            mode,
            SocketAddr::from(([127, 0, 0, 1], 0)),
            args.workers as u16,
        );
        job.exchange_via = via;
        job.link = args.net.link();
        job.faults = args.net.faults();
        if let Some(via) = allreduce_via(args)? {
            job.allreduce.via = via;
        }
        if via == ExchangeVia::Tcp {
            args.net.check_tcp()?;
            job.validate()?;
        }
        let threads = args.threads.unwrap_or(1);
        let job = LoopbackJob::new(
            dataset,
            &plan,
            job,
            (memory / switchgnn_dataplane::switch::AGGREGATOR_BYTES) as usize,
            threads,
        )?;
        Ok(Loopback {
            job,
            inputs,
            classes,
        })
    }

    fn train(
        &mut self,
        config: &TrainConfig,
        observe: &mut (dyn FnMut(&EpochRecord) + Send),
    ) -> Result<RunReport> {
        Ok(self.job.train(config, observe)?)
    }

    /// The feature normalisation the workers applied (`auto` resolved).
    fn feature_norm(&self) -> Option<FeatureNorm> {
        self.job.last().map(|o| o.workers[0].feature_norm)
    }

    /// Traffic of the last run, over all workers.
    fn print_traffic(&self) {
        if let Some(o) = self.job.last() {
            println!("  {}", o.traffic_line());
        }
    }
}

/// The model's input width and class count for `dataset`.
fn inputs_and_classes(dataset: &Dataset) -> Result<(usize, usize)> {
    let features = dataset
        .features
        .as_ref()
        .with_context(|| format!("dataset `{}` has no vertex features", dataset.name))?;
    let labels = dataset
        .labels
        .as_ref()
        .context("the dataset has no labels")?;
    Ok((features.cols(), labels.num_classes() as usize))
}

/// `--out`, or `results/train-<dataset>-<model>`.
fn out_folder(args: &Args, dataset: &DatasetSummary, config: &TrainConfig) -> PathBuf {
    args.out.clone().unwrap_or_else(|| {
        PathBuf::from("results").join(format!(
            "train-{}-{}",
            file_safe(&dataset.name),
            config.model.kind.name()
        ))
    })
}

/// The partitioning options' defaults (METIS, fill 0.9), as `prepare` would use them.
fn default_partition() -> PartitionArgs {
    #[derive(clap::Parser)]
    struct Defaults {
        #[command(flatten)]
        partition: PartitionArgs,
    }
    <Defaults as clap::Parser>::parse_from(["defaults"]).partition
}

/// The `--allreduce` flag, checked.
fn allreduce_via(args: &Args) -> Result<Option<AllReduceVia>> {
    args.allreduce
        .as_deref()
        .map(|name| {
            AllReduceVia::parse(name).with_context(|| {
                format!("--allreduce {name}: the all-reduce runs in the switch or over tcp")
            })
        })
        .transpose()
}

/// One worker of a multi-host job; rank 0 writes the log.
fn run_job_worker(args: &Args, path: &Path, config: &TrainConfig) -> Result<()> {
    let mut job = JobFile::read(path)?;
    // On a two-level fabric, --switch names the worker's leaf and `switch` stays the spine
    // (where the all-reduce service is).
    if let (Some(addr), None) = (args.switch, &job.fabric) {
        job.switch = addr;
    }
    if let Some(via) = allreduce_via(args)? {
        job.allreduce.via = via;
    }
    if job.transport == switchgnn_transport::job::TransportKind::Dpdk && job.collective.is_none() {
        bail!(
            "{}: a training job over DPDK needs `collective`, a TCP address of the switch's host \
             that the kernel knows, for its all-reduce",
            path.display()
        );
    }
    let rank = resolve_rank(args.rank, job.world, &|k| std::env::var(k).ok())?;
    let switch = args.switch.unwrap_or_else(|| job.switch_of(rank));
    let inputs = load_worker(&job, rank)?;
    eprintln!("worker {rank}: reading {}", inputs.source);
    let meta = &inputs.shard.meta;
    let widths = (
        meta.features.as_ref().map(|f| f.cols),
        meta.labels.as_ref().map(|l| l.num_classes as usize),
    );
    let (Some(features), Some(classes)) = widths else {
        anyhow::bail!(
            "dataset `{}` has no vertex features or no labels",
            meta.dataset
        );
    };
    let want = config.model.aggregated_widths(features, classes);
    anyhow::ensure!(
        inputs.plan.manifest.spec.feature_dims == want,
        "the plan in {} exchanges widths {:?}, this model aggregates {want:?}; prepare it with \
         --feature-dims {}",
        job.plan.display(),
        inputs.plan.manifest.spec.feature_dims,
        want.iter()
            .map(|w| w.to_string())
            .collect::<Vec<_>>()
            .join(",")
    );
    let summary = DatasetSummary::of_shard(meta);
    let mut observe = |e: &EpochRecord| {
        if e.epoch % args.print_every.max(1) == 0 || e.epoch == config.epochs {
            eprintln!("worker {rank} epoch {:>4}  {}", e.epoch, short(e));
        }
    };
    let shard = Shard::new(inputs.shard, config.model.kind, config.feature_norm)?;
    let outcome = run_training_worker(
        shard,
        inputs.session.clone(),
        &job,
        switch,
        config,
        &mut observe,
    )?;
    println!("worker {rank}: {}", describe_run(&outcome.report));
    if rank != 0 {
        return Ok(());
    }
    let out = out_folder(args, &summary, config);
    let log = TrainLog {
        dataset: summary,
        config: config.clone(),
        feature_norm: outcome.feature_norm,
        parameters: config.model.parameter_count(features, classes),
        threads: switchgnn_trainer::threads(),
        workers: usize::from(job.world),
        exchange: Some(job.exchange_name().to_string()),
        allreduce: Some(job.allreduce.via.name().to_string()),
        summary: Summary::of(std::slice::from_ref(&outcome.report)),
        runs: vec![outcome.report],
    };
    write_outputs(&log, &out, args.json)
}

fn short(e: &EpochRecord) -> String {
    let comm = if e.bytes_sent + e.bytes_received > 0 {
        format!(
            "  comm {:.1} ms, {:.1}/{:.1} kB out/in",
            e.comm_seconds * 1e3,
            e.bytes_sent as f64 / 1e3,
            e.bytes_received as f64 / 1e3
        )
    } else {
        String::new()
    };
    format!(
        "loss {:.4}  train {:.4}  val {:.4} (loss {:.4})  test {}  {:.1} ms{comm}",
        e.train_loss,
        e.train_accuracy,
        e.val_accuracy,
        e.val_loss,
        e.test_accuracy
            .map_or("n/a".to_string(), |t| format!("{t:.4}")),
        (e.train_seconds + e.eval_seconds) * 1e3
    )
}

/// A dataset name as a file name: letters, digits, `-`, `_` and `.` kept, the rest `-`.
fn file_safe(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '-'
            }
        })
        .collect()
}
