//! What the end-to-end tests of the `switchgnn` binary share: running it, starting it in the
//! background, waiting for the files it writes.
#![allow(dead_code)] // each test binary uses its own part

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};

/// Run `switchgnn` with `args` to the end.
pub fn switchgnn(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_switchgnn"))
        .args(args)
        .output()
        .expect("the binary runs")
}

/// Start `switchgnn` with `args` in the background, output captured.
pub fn spawn(args: &[&str], env: &[(&str, &str)]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_switchgnn"))
        .args(args)
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary starts")
}

/// The JSON string a process writes to `path` once it is ready (waits up to 30 s).
pub fn wait_for_file(path: &Path) -> String {
    for _ in 0..1500 {
        if let Ok(text) = std::fs::read_to_string(path) {
            return serde_json::from_str(&text).unwrap();
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    panic!("{} never appeared", path.display());
}

/// The training losses of the first run in a training log.
pub fn losses(log: &Path) -> Vec<f64> {
    let log: serde_json::Value = serde_json::from_slice(&std::fs::read(log).unwrap()).unwrap();
    log["runs"][0]["epochs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["train_loss"].as_f64().unwrap())
        .collect()
}
