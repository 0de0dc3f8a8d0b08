//! The reference trainer end to end: accuracy on the Planetoid citation graphs against the GCN
//! paper, determinism, early stopping, the logs, and option checks.
//!
//! Every test pins libtorch to one thread (a per-thread setting): tests run side by side on a
//! 2-core machine, and OpenMP teams of two per test would fight over the cores.

use switchgnn_datasets::synthetic::{generate, Preset};
use switchgnn_datasets::testdata::shared_dataset;
use switchgnn_datasets::{load_path, BuildOptions, Dataset, Graph, LoadOptions, NoProgress, Split};
use switchgnn_trainer::{
    train, FeatureNorm, ModelConfig, ModelKind, Prepared, RunReport, Summary, TrainConfig,
    TrainError, TrainLog,
};

fn run(dataset: &Dataset, config: &TrainConfig) -> RunReport {
    switchgnn_trainer::set_threads(1);
    let mut data = Prepared::new(dataset, config).unwrap();
    train(&mut data, config, &mut |_| {}).unwrap()
}

fn synthetic(scale: f64) -> Dataset {
    let spec = Preset::from_name("small").unwrap().spec(scale, 1).unwrap();
    generate(&spec, &NoProgress).unwrap()
}

fn shared(file: &str) -> Option<Dataset> {
    let path = shared_dataset(file)?;
    Some(load_path(&path, &LoadOptions::default()).unwrap())
}

/// The same dataset with every edge removed: GCN then sees each vertex alone, an MLP.
fn without_edges(d: &Dataset) -> Dataset {
    let empty = Graph::from_edges(d.num_vertices(), &[], BuildOptions::default()).unwrap();
    Dataset::new(
        format!("{} without edges", d.name),
        empty,
        d.features.clone(),
        d.labels.clone(),
        d.split.clone(),
    )
    .unwrap()
}

/// Kipf & Welling's setting (2 layers, 16 hidden, dropout 0.5, lr 0.01, weight decay 5e-4 on
/// the first layer, 200 epochs, row-normalised features) on the Planetoid public split, seed 0.
///
/// Thresholds: over seeds 0–9 this trainer measured Cora 82.2 ± 1.0 % and CiteSeer
/// 71.0 ± 1.2 % test accuracy (README, "Trainer"). A fixed seed is deterministic on one machine,
/// but another libtorch build or CPU rounds differently and the run takes another path, so the
/// bound sits about three standard deviations below the mean: 79 % and 67.5 %. Both remain
/// far above what the model reaches without the graph (next test).
#[test]
fn planetoid_accuracy_matches_the_gcn_paper() {
    for (file, split_size, bound) in [("cora.npz", 140, 0.79), ("citeseer.npz", 120, 0.675)] {
        let Some(d) = shared(file) else { continue };
        assert_eq!(
            d.split.train.len(),
            split_size,
            "{file}: the Planetoid split"
        );
        let report = run(&d, &TrainConfig::default());
        let best = report.best();
        let test = best.test_accuracy.unwrap();
        eprintln!(
            "{file}: test {test:.4} at epoch {} (val {:.4})",
            report.best_epoch, best.val_accuracy
        );
        assert_eq!(report.epochs.len(), 200);
        assert!(test >= bound, "{file}: test accuracy {test} below {bound}");
        assert!(
            best.train_accuracy > 0.9,
            "{file}: the model fits its training vertices"
        );
    }
}

/// The propagation matters: on Cora the graph is worth about 20 points (Kipf & Welling report
/// 81.5 % for GCN against 55.1 % for an MLP). Demand at least 10.
#[test]
fn the_graph_carries_the_accuracy_on_cora() {
    let Some(d) = shared("cora.npz") else { return };
    let config = TrainConfig::default();
    let with = run(&d, &config).best().test_accuracy.unwrap();
    let alone = run(&without_edges(&d), &config)
        .best()
        .test_accuracy
        .unwrap();
    eprintln!("cora: test {with:.4} with the graph, {alone:.4} without");
    assert!(with >= alone + 0.10, "with {with}, without {alone}");
}

/// Both models, deeper and wider than the default, learn the synthetic graph. Its 8 classes
/// make chance 12.5 %; 50 epochs reach 92–98 % test accuracy in these four settings, and
/// 80 % leaves room for another platform's rounding while still catching a model that does not
/// learn.
#[test]
fn both_models_learn_the_synthetic_graph() {
    let d = synthetic(0.5);
    for kind in [ModelKind::Gcn, ModelKind::Sage] {
        for (layers, hidden) in [(2, 16), (3, 64)] {
            let config = TrainConfig {
                model: ModelConfig {
                    kind,
                    layers,
                    hidden,
                    dropout: 0.5,
                },
                epochs: 50,
                ..TrainConfig::default()
            };
            let report = run(&d, &config);
            let test = report.best().test_accuracy.unwrap();
            eprintln!("{kind:?} {layers}x{hidden}: test {test:.4}");
            assert!(
                test > 0.8,
                "{kind:?} {layers}x{hidden}: test accuracy {test}"
            );
            let first = &report.epochs[0];
            let last = report.epochs.last().unwrap();
            assert!(
                last.train_loss < first.train_loss,
                "{kind:?}: the loss falls"
            );
        }
    }
}

#[test]
fn a_seed_fixes_the_run() {
    let d = synthetic(0.25);
    let config = TrainConfig {
        epochs: 15,
        ..TrainConfig::default()
    };
    let strip = |r: RunReport| {
        r.epochs
            .into_iter()
            .map(|e| (e.train_loss, e.val_loss, e.train_accuracy, e.val_accuracy))
            .collect::<Vec<_>>()
    };
    let a = strip(run(&d, &config));
    let b = strip(run(&d, &config));
    assert_eq!(a, b, "the same seed gives the same run");
    let other = TrainConfig {
        seed: 1,
        ..config.clone()
    };
    assert_ne!(a, strip(run(&d, &other)), "another seed another run");
}

#[test]
fn early_stopping_waits_for_patience_and_keeps_the_best_epoch() {
    let d = synthetic(0.25);
    let config = TrainConfig {
        epochs: 400,
        patience: Some(10),
        lr: 0.05,
        ..TrainConfig::default()
    };
    let report = run(&d, &config);
    assert!(
        report.stopped_early,
        "ran all {} epochs",
        report.epochs.len()
    );
    assert_eq!(report.epochs.len(), report.best_epoch + 10);
    let best = report.best();
    for e in &report.epochs {
        assert!(
            !e.better_than(best),
            "epoch {} beats the selected one",
            e.epoch
        );
    }
}

#[test]
fn logs_round_trip_and_the_plot_draws_every_series() {
    let d = synthetic(0.25);
    let config = TrainConfig {
        epochs: 7,
        ..TrainConfig::default()
    };
    let runs = vec![
        run(&d, &config),
        run(
            &d,
            &TrainConfig {
                seed: 1,
                ..config.clone()
            },
        ),
    ];
    let log = TrainLog {
        dataset: switchgnn_trainer::DatasetSummary::of(&d),
        config: config.clone(),
        feature_norm: FeatureNorm::None,
        parameters: config.model.parameter_count(128, 8),
        threads: 1,
        workers: 1,
        exchange: None,
        allreduce: None,
        summary: Summary::of(&runs),
        runs,
    };
    let dir = tempfile::tempdir().unwrap();
    log.write_json(&dir.path().join("log.json")).unwrap();
    log.write_csv(&dir.path().join("log.csv")).unwrap();
    switchgnn_trainer::plot::write_svg(&log, &dir.path().join("curves.svg")).unwrap();

    let back: TrainLog =
        serde_json::from_slice(&std::fs::read(dir.path().join("log.json")).unwrap()).unwrap();
    assert_eq!(back, log);
    let csv = std::fs::read_to_string(dir.path().join("log.csv")).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert!(lines[0].starts_with("seed,epoch,train_loss,val_loss"));
    assert_eq!(lines.len(), 1 + 2 * 7);
    assert!(
        lines[8].starts_with("1,1,"),
        "second run's first epoch: {}",
        lines[8]
    );
    let svg = std::fs::read_to_string(dir.path().join("curves.svg")).unwrap();
    assert!(svg.starts_with("<svg"));
    for label in ["train loss", "val loss", ">\ntest\n<", "epoch", "accuracy"] {
        assert!(svg.contains(label), "the plot lacks {label:?}");
    }
    let n = log.summary.test_accuracy.unwrap();
    let tests: Vec<f64> = log
        .runs
        .iter()
        .map(|r| r.best().test_accuracy.unwrap())
        .collect();
    assert!((n.mean - (tests[0] + tests[1]) / 2.0).abs() < 1e-12);
}

#[test]
fn bad_options_and_unusable_datasets_are_errors() {
    let d = synthetic(0.1);
    let bad = |config: TrainConfig| Prepared::new(&d, &config).unwrap_err();
    let base = TrainConfig::default();
    for config in [
        TrainConfig {
            epochs: 0,
            ..base.clone()
        },
        TrainConfig {
            lr: 0.0,
            ..base.clone()
        },
        TrainConfig {
            patience: Some(0),
            ..base.clone()
        },
        TrainConfig {
            model: ModelConfig {
                layers: 0,
                ..ModelConfig::default()
            },
            ..base.clone()
        },
        TrainConfig {
            model: ModelConfig {
                dropout: 1.0,
                ..ModelConfig::default()
            },
            ..base.clone()
        },
    ] {
        assert!(matches!(bad(config), TrainError::Config(_)));
    }
    let mut gcn_data = Prepared::new(&d, &base).unwrap();
    let sage = TrainConfig {
        model: ModelConfig {
            kind: ModelKind::Sage,
            ..ModelConfig::default()
        },
        ..base.clone()
    };
    assert!(matches!(
        train(&mut gcn_data, &sage, &mut |_| {}).unwrap_err(),
        TrainError::Config(_)
    ));
    let mut unlabelled = d.clone();
    unlabelled.labels = None;
    assert!(matches!(
        Prepared::new(&unlabelled, &base).unwrap_err(),
        TrainError::NoLabels
    ));
    let mut featureless = d.clone();
    featureless.features = None;
    assert!(matches!(
        Prepared::new(&featureless, &base).unwrap_err(),
        TrainError::NoFeatures(_)
    ));
    let mut no_train = d.clone();
    let all: Vec<u32> = (0..d.num_vertices() as u32).collect();
    no_train.split = Split::from_ids(
        d.num_vertices(),
        vec![],
        all,
        vec![],
        no_train.split.source.clone(),
    )
    .unwrap();
    assert!(matches!(
        Prepared::new(&no_train, &base).unwrap_err(),
        TrainError::EmptySplit("train")
    ));
}
