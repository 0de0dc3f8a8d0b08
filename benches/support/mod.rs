//! What the benches that run `switchgnn exchange` share: the run and its summary.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// Run `switchgnn exchange <dataset> --workers <workers> <args> --plan <plan> --json <json>`,
/// fail with `what` if it fails, and return its summary: one object per exchange kind, whose
/// every exchange was checked exact.
pub(crate) fn exchange(
    dataset: &str,
    workers: u32,
    args: &[&str],
    plan: &Path,
    json: &Path,
    what: &str,
) -> Vec<Value> {
    let status = Command::new(env!("CARGO_BIN_EXE_switchgnn"))
        .args(["exchange", dataset, "--workers", &workers.to_string()])
        .args(args)
        .arg("--plan")
        .arg(plan)
        .arg("--json")
        .arg(json)
        .stdout(std::process::Stdio::null())
        .status()
        .expect("switchgnn runs");
    assert!(status.success(), "{what} failed");
    let modes: Value = serde_json::from_slice(&std::fs::read(json).unwrap()).unwrap();
    let modes = modes.as_array().unwrap().clone();
    for m in &modes {
        let exchanges = m["exchanges"].as_array().unwrap();
        assert!(
            exchanges.iter().all(|x| x["exact"] == true),
            "{what}: inexact"
        );
    }
    modes
}

/// The summed exchange time of one kind's summary (each exchange's slowest worker), seconds.
pub(crate) fn seconds(mode: &Value) -> f64 {
    mode["exchanges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["seconds"].as_f64().unwrap())
        .sum()
}

/// The share of this machine's cores that other processes kept busy over half a second, read
/// from `/proc/stat` just before the runs (`None` where there is no such file). The host
/// kinds wait on process wake-ups at every hop; a background job takes cores those wake-ups
/// need, even at nice 19: a compiler at nice 19 beside the loopback exchange on 2 cores made the
/// host exchange's layer-0 times 1.6–1.8× longer. So the benches print it beside their
/// figures.
pub(crate) fn background_load() -> Option<f64> {
    fn totals() -> Option<(u64, u64)> {
        let stat = std::fs::read_to_string("/proc/stat").ok()?;
        let cpu = stat.lines().next()?.strip_prefix("cpu ")?;
        let ticks: Vec<u64> = cpu
            .split_whitespace()
            .filter_map(|t| t.parse().ok())
            .collect();
        // user nice system idle iowait irq softirq steal ...: idle and iowait are not busy.
        let idle = ticks.get(3)? + ticks.get(4).copied().unwrap_or(0);
        Some((ticks.iter().take(8).sum(), idle))
    }
    let (total0, idle0) = totals()?;
    std::thread::sleep(std::time::Duration::from_millis(500));
    let (total1, idle1) = totals()?;
    let total = total1.saturating_sub(total0);
    (total > 0).then(|| 1.0 - idle1.saturating_sub(idle0) as f64 / total as f64)
}

/// Print [`background_load`] as a line of the bench's header, with a warning when it is high
/// enough to matter.
pub(crate) fn print_background_load() {
    match background_load() {
        Some(busy) if busy > 0.1 => println!(
            "warning: other processes kept {:.0}% of the cores busy before this run; the \
             exchanges wait on process wake-ups, so their times (the host kinds' most) are \
             inflated: stop other work for figures to compare",
            100.0 * busy
        ),
        Some(busy) => println!(
            "other processes kept {:.0}% of the cores busy before this run",
            100.0 * busy
        ),
        None => println!("(no /proc/stat: background load not read)"),
    }
}
