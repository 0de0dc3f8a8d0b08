//! What the end-to-end tests of the `switchgnn` binary share: running it, starting it in the
//! background, waiting for the files it writes.
#![allow(dead_code)] // each test binary uses its own part

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};

/// Run `switchgnn` with `args` to the end.
pub(crate) fn switchgnn(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_switchgnn"))
        .args(args)
        .output()
        .expect("the binary runs")
}

/// Start `switchgnn` with `args` in the background, output captured.
pub(crate) fn spawn(args: &[&str], env: &[(&str, &str)]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_switchgnn"))
        .args(args)
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary starts")
}

/// Wait until `child` (started with `RUST_LOG=info`) logs that it joined its switch, so that
/// killing it then kills a member of the job, however slowly a loaded machine started it
/// (up to 60 s). Its stderr is read up to that line.
pub(crate) fn wait_until_joined(child: &mut Child) {
    use std::io::BufRead;
    let stderr = child.stderr.take().expect("stderr piped");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if line.contains(" joined ") {
                let _ = tx.send(());
                break;
            }
        }
    });
    rx.recv_timeout(std::time::Duration::from_secs(60))
        .expect("the worker logs that it joined within 60 s");
}

/// The JSON string a process writes to `path` once it is ready (waits up to 30 s).
pub(crate) fn wait_for_file(path: &Path) -> String {
    for _ in 0..1500 {
        if let Ok(text) = std::fs::read_to_string(path) {
            return serde_json::from_str(&text).unwrap();
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    panic!("{} never appeared", path.display());
}

/// Start `switchgnn switch` for `job` (its report in `dir/switch.json`) with `extra` options;
/// returns the process and the address it listens on.
pub(crate) fn start_switch(dir: &Path, job: &str, extra: &[&str]) -> (Child, String) {
    start_switch_as(dir, "switch", job, extra)
}

/// [`start_switch`] with its files named after `name` (`dir/name.addr`, `dir/name.json`): one
/// of several switch processes.
pub(crate) fn start_switch_as(
    dir: &Path,
    name: &str,
    job: &str,
    extra: &[&str],
) -> (Child, String) {
    let ready = dir.join(format!("{name}.addr"));
    let report = dir.join(format!("{name}.json"));
    let mut args = vec![
        "switch",
        "--job",
        job,
        "--ready-file",
        ready.to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let child = spawn(&args, &[]);
    (child, wait_for_file(&ready))
}

/// After worker 1 of a two-worker job was killed: the switch and worker 0 both fail, the
/// switch naming worker 1 and worker 0 told by an abort that names it.
pub(crate) fn assert_worker_1_named(switch: Child, w0: Child) {
    let switch = switch.wait_with_output().unwrap();
    let w0 = w0.wait_with_output().unwrap();
    let switch_err = String::from_utf8_lossy(&switch.stderr);
    let w0_err = String::from_utf8_lossy(&w0.stderr);
    assert!(
        !switch.status.success() && !w0.status.success(),
        "the job ended normally: {switch_err}\n{w0_err}"
    );
    assert!(switch_err.contains("worker 1"), "{switch_err}");
    assert!(
        w0_err.contains("aborted") && w0_err.contains("worker 1"),
        "{w0_err}\nthe switch said: {switch_err}"
    );
}

/// The training losses of the first run in a training log.
pub(crate) fn losses(log: &Path) -> Vec<f64> {
    let log: serde_json::Value = serde_json::from_slice(&std::fs::read(log).unwrap()).unwrap();
    log["runs"][0]["epochs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["train_loss"].as_f64().unwrap())
        .collect()
}

/// Train `data` on the loopback launcher with `workers` workers, `exchange` and the saved
/// `plan`, the log in `out`, with `extra` options: the losses of its first run (what a job
/// started by hand must equal).
pub(crate) fn loopback_losses(
    data: &str,
    workers: &str,
    exchange: &str,
    plan: &Path,
    out: &Path,
    extra: &[&str],
) -> Vec<f64> {
    let mut args = vec![
        "train",
        data,
        "--workers",
        workers,
        "--exchange",
        exchange,
        "--plan",
        plan.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let run = switchgnn(&args);
    assert!(
        run.status.success(),
        "loopback training failed: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    losses(&out.join("log.json"))
}

/// Wait for a job's workers, then its switch: each must succeed. Each one's name ("worker 0",
/// …, "switch") and standard error, in that order.
pub(crate) fn wait_job(workers: Vec<Child>, switch: Child) -> Vec<(String, String)> {
    wait_all(
        workers
            .into_iter()
            .enumerate()
            .map(|(r, c)| (format!("worker {r}"), c))
            .chain([("switch".to_string(), switch)]),
    )
}

/// Wait for each named process in turn: each must succeed. Its name and standard error.
pub(crate) fn wait_all(named: impl IntoIterator<Item = (String, Child)>) -> Vec<(String, String)> {
    named
        .into_iter()
        .map(|(name, child)| {
            let out = child.wait_with_output().unwrap();
            let err = String::from_utf8_lossy(&out.stderr).into_owned();
            assert!(out.status.success(), "{name} failed: {err}");
            (name, err)
        })
        .collect()
}
