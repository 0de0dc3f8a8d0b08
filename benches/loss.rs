//! Benchmark: what loss costs each exchange kind over real packets. `switchgnn exchange` (the
//! switch and 4 worker processes on loopback UDP, every result checked) at 0%, 1% and 5% loss
//! on every sender, three runs each with different fault seeds; per kind the median exchange
//! time at each loss and its ratio to the lossless median of the same run of this bench.
//!
//! The goal it measures (issue 41): every kind within 1.5× its lossless time at 1% loss and
//! within 3× at 5%. Each ratio is printed with whether it meets that.
//!
//! `cargo bench --bench loss [-- DATASET ...] ` (default: Cora and Amazon-Computers from
//! ../shared/datasets when present, else synthetic:small). `SWITCHGNN_BENCH_KINDS` picks the
//! kinds (default `switch,host,host-reduce,host-hybrid,reduce`), `SWITCHGNN_BENCH_RUNS` the
//! runs per loss (default 3).

mod support;

use std::path::Path;

const WORKERS: u32 = 4;
const LOSSES: [f64; 3] = [0.0, 0.01, 0.05];
/// The goal's bound on the time ratio at each loss of `LOSSES`.
const GOALS: [f64; 3] = [1.0, 1.5, 3.0];

/// One run: per kind, the summed exchange time (each exchange's slowest worker), seconds.
fn run(
    dataset: &str,
    kinds: &str,
    loss: f64,
    seed: u64,
    plan: &Path,
    out: &Path,
) -> Vec<(String, f64)> {
    let json = out.join(format!("loss-{loss}-{seed}.json"));
    let (loss_arg, seed_arg) = (loss.to_string(), seed.to_string());
    let args = [
        "--exchange",
        kinds,
        "--loss",
        &loss_arg,
        "--fault-seed",
        &seed_arg,
    ];
    let what = format!("exchange at {loss} loss");
    support::exchange(dataset, WORKERS, &args, plan, &json, &what)
        .iter()
        .map(|m| (m["mode"].as_str().unwrap().to_string(), support::seconds(m)))
        .collect()
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

fn main() {
    let mut datasets: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    if datasets.is_empty() {
        let shared = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/datasets");
        for name in ["cora.npz", "amazon-computers.npz"] {
            let path = shared.join(name);
            if path.exists() {
                datasets.push(path.display().to_string());
            }
        }
        if datasets.is_empty() {
            println!("(no ../shared/datasets: the synthetic graph only)");
            datasets.push("synthetic:small".into());
        }
    }
    let kinds = std::env::var("SWITCHGNN_BENCH_KINDS")
        .unwrap_or("switch,host,host-reduce,host-hybrid,reduce".into());
    let runs: u64 = std::env::var("SWITCHGNN_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3)
        .max(1);
    support::print_background_load();
    for dataset in &datasets {
        let dir = tempfile::tempdir().unwrap();
        let plan = dir.path().join("plan");
        println!(
            "{dataset}: switch + {WORKERS} worker processes on loopback UDP, 10 Gb/s emulated \
             links; widths the dataset's and 16, forward and backward; medians of {runs} runs"
        );
        // times[loss][kind] = the runs' times.
        let mut times: Vec<Vec<(String, Vec<f64>)>> = Vec::new();
        for &loss in &LOSSES {
            let mut by_kind: Vec<(String, Vec<f64>)> = Vec::new();
            for seed in 1..=runs {
                for (kind, s) in run(dataset, &kinds, loss, seed, &plan, dir.path()) {
                    match by_kind.iter_mut().find(|(k, _)| *k == kind) {
                        Some((_, v)) => v.push(s),
                        None => by_kind.push((kind, vec![s])),
                    }
                }
            }
            times.push(by_kind);
        }
        println!(
            "{:<10} {:>13} {:>13} {:>8} {:>13} {:>8}",
            "exchange", "0% loss (s)", "1% loss (s)", "ratio", "5% loss (s)", "ratio"
        );
        for (kind, clean) in &times[0] {
            let base = median(clean.clone());
            let mut line = format!("{kind:<10} {base:>13.3}");
            for (i, at) in times.iter().enumerate().skip(1) {
                let t = median(at.iter().find(|(k, _)| k == kind).unwrap().1.clone());
                let ratio = t / base;
                let met = if ratio <= GOALS[i] {
                    ""
                } else {
                    " (goal missed)"
                };
                line += &format!(" {t:>13.3} {ratio:>7.2}×{met}");
            }
            println!("{line}");
        }
    }
}
