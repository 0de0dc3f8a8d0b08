//! `switchgnn train`: the single-process reference trainer, one or more seeds, with a progress
//! line per epoch, the per-epoch log as CSV and JSON and the curves as SVG.

use std::path::PathBuf;

use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use switchgnn_trainer::plot::write_svg;
use switchgnn_trainer::{
    train, DatasetSummary, EpochRecord, FeatureNorm, ModelConfig, ModelKind, Prepared, Summary,
    TrainConfig, TrainLog,
};

use crate::dataset_args::DatasetArgs;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub dataset: DatasetArgs,
    /// gcn (Kipf & Welling) or sage (GraphSAGE, mean aggregator).
    #[arg(long, default_value = "gcn")]
    pub model: String,
    /// Graph convolution layers.
    #[arg(long, default_value_t = 2)]
    pub layers: usize,
    /// Width of the hidden layers.
    #[arg(long, default_value_t = 16)]
    pub hidden: usize,
    /// Dropout rate on every layer's input.
    #[arg(long, default_value_t = 0.5)]
    pub dropout: f64,
    /// Adam's learning rate.
    #[arg(long, default_value_t = 0.01)]
    pub lr: f64,
    /// L2 penalty on the first layer's parameters.
    #[arg(long, default_value_t = 5e-4)]
    pub weight_decay: f64,
    #[arg(long, default_value_t = 200)]
    pub epochs: usize,
    /// Stop after this many epochs without a better validation accuracy (default: run all).
    #[arg(long)]
    pub patience: Option<usize>,
    /// Seed of the first run's weights and dropout masks.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Train this many models, seeds `seed`, `seed + 1`, ..., and report mean ± std.
    #[arg(long, default_value_t = 1)]
    pub runs: u64,
    /// Input feature scaling: row (divide each row by its sum), none, or auto (row when no
    /// feature is negative).
    #[arg(long, default_value = "auto")]
    pub feature_norm: String,
    /// libtorch's intra-op threads (default: libtorch's choice, one per core).
    #[arg(long)]
    pub threads: Option<i32>,
    /// Folder for log.csv, log.json and curves.svg (default results/train-<dataset>-<model>).
    #[arg(long, short)]
    pub out: Option<PathBuf>,
    /// Print a line every this many epochs (the last epoch always).
    #[arg(long, default_value_t = 10)]
    pub print_every: usize,
    /// Print the summary as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> Result<()> {
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
    let dataset = args.dataset.load()?;
    let summary = DatasetSummary::of(&dataset);
    let mut data = Prepared::new(&dataset, &config)
        .with_context(|| format!("cannot train on `{}`", args.dataset.dataset))?;
    drop(dataset);

    let bar = ProgressBar::new(config.epochs as u64 * args.runs).with_style(
        ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} epochs ({eta})")
            .expect("valid template")
            .progress_chars("=> "),
    );
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
        let report = train(&mut data, &run_config, &mut observe)?;
        if report.stopped_early {
            // Keep the bar's total honest: skipped epochs count as done.
            bar.inc((config.epochs - report.epochs.len()) as u64);
        }
        let best = report.best();
        println!(
            "seed {seed}: test {} at epoch {} (val {:.4}, train {:.4}){}, {:.2} ms/epoch",
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
        );
        runs.push(report);
    }
    bar.finish_and_clear();

    let log = TrainLog {
        dataset: summary,
        config: config.clone(),
        feature_norm: data.feature_norm,
        parameters: config
            .model
            .parameter_count(data.features.cols(), data.targets.num_classes),
        threads: switchgnn_trainer::threads(),
        summary: Summary::of(&runs),
        runs,
    };
    let out = args.out.clone().unwrap_or_else(|| {
        PathBuf::from("results").join(format!(
            "train-{}-{}",
            file_safe(&log.dataset.name),
            config.model.kind.name()
        ))
    });
    std::fs::create_dir_all(&out).with_context(|| format!("cannot create {}", out.display()))?;
    log.write_csv(&out.join("log.csv"))?;
    log.write_json(&out.join("log.json"))?;
    write_svg(&log, &out.join("curves.svg"))?;

    let s = &log.summary;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&log.summary)?);
    } else {
        let d = &log.dataset;
        println!(
            "{}: {} vertices, {} edges, split {} ({}/{}/{}); {} {}x{}, {} parameters, feature norm {}, {} threads",
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

fn short(e: &EpochRecord) -> String {
    format!(
        "loss {:.4}  train {:.4}  val {:.4} (loss {:.4})  test {}  {:.1} ms",
        e.train_loss,
        e.train_accuracy,
        e.val_accuracy,
        e.val_loss,
        e.test_accuracy
            .map_or("n/a".to_string(), |t| format!("{t:.4}")),
        e.train_seconds * 1e3
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
