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
