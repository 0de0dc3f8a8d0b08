//! Reference trainer against PyTorch Geometric: epoch time (forward + backward + Adam step) of
//! the same GCN on the same graphs, features and split, in the same run and thread count.
//!
//! ```sh
//! cargo bench -p switchgnn-trainer --bench reference
//! ```
//!
//! Graphs: Cora, CiteSeer, Amazon-Computers and Coauthor-CS from `../shared/datasets` (skipped
//! when absent) and synthetic `reddit-like` at `SWITCHGNN_BENCH_SCALE` (default 0.25: 58K
//! vertices, 14M edges). Each graph is exported to raw arrays and trained by
//! `benches/pyg_gcn.py` in a Python environment that `scripts/pyg-venv.sh` creates once (several
//! GB). `SWITCHGNN_BENCH_PYG=0` measures this trainer alone; `SWITCHGNN_BENCH_THREADS` sets both
//! sides' threads (default: all cores); `SWITCHGNN_BENCH_EPOCHS` the timed epochs (default 50,
//! after 5 untimed); `SWITCHGNN_BENCH_DROPOUT` both sides' dropout rate (default 0.5);
//! `SWITCHGNN_BENCH_ONLY=coauthor` the graphs whose name starts so.
//!
//! Both sides train the same model (Kipf & Welling's 2x16 GCN) on the same preprocessed
//! features. Each side is used the way it is normally used: PyG gets dense features (as its
//! dataset classes give them) and draws dropout masks with libtorch's CPU generator; this
//! trainer keeps sparse features in CSR (dropout and products on the non-zeros only) and draws
//! masks with its own counter-based generator. `SWITCHGNN_BENCH_DROPOUT=0` takes the masks out
//! of the comparison.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use switchgnn_datasets::synthetic::{generate, Preset};
use switchgnn_datasets::testdata::shared_dataset;
use switchgnn_datasets::{load_path, Dataset, Features, LoadOptions, NoProgress};
use switchgnn_trainer::{train, FeatureNorm, ModelConfig, Prepared, TrainConfig};

const WARMUP: usize = 5;

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn write_raw<T: Copy, const N: usize>(
    dir: &Path,
    name: &str,
    values: &[T],
    bytes: fn(T) -> [u8; N],
) {
    let file = std::fs::File::create(dir.join(name)).expect("create array file");
    let mut w = std::io::BufWriter::with_capacity(1 << 20, file);
    for &v in values {
        w.write_all(&bytes(v)).expect("write array");
    }
    w.flush().expect("flush array");
}

/// The dataset as the trainer sees it (symmetric, no self-loops, its split) in raw arrays.
fn export(d: &Dataset, config: &TrainConfig, norm: FeatureNorm, threads: usize, dir: &Path) {
    let g = &d.graph;
    let rowptr: Vec<i64> = g.offsets().iter().map(|&o| o as i64).collect();
    let col: Vec<i64> = g.neighbor_ids().iter().map(|&c| i64::from(c)).collect();
    write_raw(dir, "rowptr.i64", &rowptr, i64::to_le_bytes);
    write_raw(dir, "col.i64", &col, i64::to_le_bytes);
    let features = d.features.as_ref().expect("features");
    let sparse = match features {
        Features::Sparse(s) => s.clone(),
        Features::Dense(_) => match features.clone().compact() {
            Features::Sparse(s) => s,
            // Dense rows: every entry stored.
            Features::Dense(dense) => {
                let (rows, cols) = (features.rows(), features.cols());
                let indptr = (0..=rows as u64).map(|r| r * cols as u64).collect();
                let indices = (0..rows).flat_map(|_| 0..cols as u32).collect();
                switchgnn_datasets::SparseFeatures::new(
                    rows,
                    cols,
                    indptr,
                    indices,
                    dense.values().to_vec(),
                )
                .expect("dense as CSR")
            }
        },
    };
    let fptr: Vec<i64> = sparse.indptr().iter().map(|&o| o as i64).collect();
    let fcol: Vec<i64> = sparse.indices().iter().map(|&c| i64::from(c)).collect();
    write_raw(dir, "feature_rowptr.i64", &fptr, i64::to_le_bytes);
    write_raw(dir, "feature_col.i64", &fcol, i64::to_le_bytes);
    write_raw(dir, "feature_val.f32", sparse.values(), f32::to_le_bytes);
    let labels: Vec<i64> = d
        .labels
        .as_ref()
        .expect("labels")
        .values()
        .iter()
        .map(|&c| i64::from(c))
        .collect();
    write_raw(dir, "labels.i64", &labels, i64::to_le_bytes);
    for (name, ids) in [
        ("train", &d.split.train),
        ("val", &d.split.val),
        ("test", &d.split.test),
    ] {
        let ids: Vec<i64> = ids.iter().map(|&i| i64::from(i)).collect();
        write_raw(dir, &format!("{name}.i64"), &ids, i64::to_le_bytes);
    }
    let m = &config.model;
    let meta = serde_json::json!({
        "vertices": d.num_vertices(),
        "features": features.cols(),
        "classes": d.labels.as_ref().unwrap().num_classes(),
        "layers": m.layers,
        "hidden": m.hidden,
        "dropout": m.dropout,
        "lr": config.lr,
        "weight_decay": config.weight_decay,
        "epochs": config.epochs - WARMUP,
        "warmup": WARMUP,
        "seed": config.seed,
        "threads": threads,
        "row_normalise": norm == FeatureNorm::Row,
        "edge_index_budget_bytes": 6u64 << 30,
    });
    std::fs::write(dir.join("meta.json"), meta.to_string()).expect("meta.json");
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

struct Ours {
    seconds: f64,
    test: f64,
    norm: FeatureNorm,
}

fn ours(d: &Dataset, config: &TrainConfig) -> Ours {
    let mut data = Prepared::new(d, config).expect("prepare");
    let report = train(&mut data, config, &mut |_| {}).expect("train");
    let timed = report.epochs[WARMUP..]
        .iter()
        .map(|e| e.train_seconds)
        .collect();
    Ours {
        seconds: median(timed),
        test: report.best().test_accuracy.unwrap_or(f64::NAN),
        norm: data.feature_norm,
    }
}

fn pyg(python: &Path, dir: &Path) -> Option<serde_json::Value> {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("benches/pyg_gcn.py");
    let out = Command::new(python)
        .arg(script)
        .arg(dir)
        .output()
        .expect("python runs");
    if !out.status.success() {
        eprintln!("PyG run failed: {}", String::from_utf8_lossy(&out.stderr));
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .last()
        .and_then(|l| serde_json::from_str(l).ok())
}

fn python() -> Option<PathBuf> {
    if std::env::var("SWITCHGNN_BENCH_PYG").is_ok_and(|v| v == "0") {
        return None;
    }
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scripts/pyg-venv.sh");
    let out = Command::new("bash")
        .arg(script)
        .output()
        .expect("bash runs");
    if !out.status.success() {
        eprintln!(
            "no PyG environment, measuring this trainer alone: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines().last().map(PathBuf::from)
}

fn main() {
    // `cargo bench` passes `--bench`; nothing else to parse.
    let threads = env_or(
        "SWITCHGNN_BENCH_THREADS",
        std::thread::available_parallelism().map_or(1, |n| n.get()),
    );
    let epochs: usize = env_or("SWITCHGNN_BENCH_EPOCHS", 50);
    let scale: f64 = env_or("SWITCHGNN_BENCH_SCALE", 0.25);
    let dropout: f64 = env_or("SWITCHGNN_BENCH_DROPOUT", 0.5);
    switchgnn_trainer::hide_libtorch_warnings();
    switchgnn_trainer::set_threads(threads as i32);
    let python = python();

    let mut graphs: Vec<(String, Box<dyn Fn() -> Dataset>)> = Vec::new();
    for file in [
        "cora.npz",
        "citeseer.npz",
        "amazon-computers.npz",
        "coauthor-cs.npz",
    ] {
        if let Some(path) = shared_dataset(file) {
            graphs.push((
                file.trim_end_matches(".npz").to_string(),
                Box::new(move || load_path(&path, &LoadOptions::default()).expect("load")),
            ));
        }
    }
    graphs.push((
        format!("reddit-like x{scale}"),
        Box::new(move || {
            let spec = Preset::from_name("reddit-like")
                .unwrap()
                .spec(scale, 1)
                .unwrap();
            generate(&spec, &NoProgress).expect("generate")
        }),
    ));

    println!(
        "GCN 2x16 (Kipf & Welling's setting, dropout {dropout}), {threads} thread(s), median of {epochs} \
         epochs after {WARMUP}: forward + backward + Adam step"
    );
    println!(
        "{:<22} {:>9} {:>11} {:>7} {:>10} {:>14} {:>10} {:>14} {:>16}",
        "graph",
        "vertices",
        "edges",
        "feats",
        "ours ms",
        "PyG edge ms",
        "PyG csr ms",
        "PyG best/ours",
        "test ours/PyG"
    );
    let only = std::env::var("SWITCHGNN_BENCH_ONLY").ok();
    for (name, load) in graphs {
        if only.as_deref().is_some_and(|o| !name.starts_with(o)) {
            continue;
        }
        let d = load();
        let config = TrainConfig {
            model: ModelConfig {
                dropout,
                ..ModelConfig::default()
            },
            epochs: WARMUP + epochs,
            ..TrainConfig::default()
        };
        let mine = ours(&d, &config);
        let dir = tempfile::tempdir().expect("temporary folder");
        let theirs = python.as_ref().and_then(|py| {
            export(&d, &config, mine.norm, threads, dir.path());
            pyg(py, dir.path())
        });
        let ms = |mode: &str| {
            theirs
                .as_ref()
                .and_then(|t| t["results"][mode]["median_seconds"].as_f64())
                .map(|s| s * 1e3)
        };
        let (edge, csr) = (ms("edge_index"), ms("csr"));
        let best = [edge, csr].into_iter().flatten().fold(f64::NAN, f64::min);
        let pyg_test = theirs
            .as_ref()
            .and_then(|t| t["results"]["csr"]["test_accuracy"].as_f64());
        let show = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.2}"));
        println!(
            "{:<22} {:>9} {:>11} {:>7} {:>10.2} {:>14} {:>10} {:>14} {:>16}",
            name,
            d.num_vertices(),
            d.graph.num_edges(),
            d.features.as_ref().map_or(0, |f| f.cols()),
            mine.seconds * 1e3,
            show(edge),
            show(csr),
            if best.is_nan() {
                "-".into()
            } else {
                format!("{:.2}x", best / (mine.seconds * 1e3))
            },
            format!(
                "{:.3} / {}",
                mine.test,
                pyg_test.map_or("-".into(), |t| format!("{t:.3}"))
            ),
        );
    }
}
