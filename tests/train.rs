//! End-to-end runs of `switchgnn train`.

use std::process::{Command, Output};

fn switchgnn(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_switchgnn"))
        .args(args)
        .output()
        .expect("the binary runs")
}

#[test]
fn train_writes_the_log_and_the_plot() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let args = [
        "train",
        "synthetic:small,scale=0.25,seed=2",
        "--epochs",
        "6",
        "--runs",
        "2",
        "--layers",
        "3",
        "--hidden",
        "8",
        "--threads",
        "1",
        "--print-every",
        "3",
        "--out",
        out.to_str().unwrap(),
    ];
    let run = switchgnn(&args);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    let stdout = String::from_utf8(run.stdout).unwrap();
    assert!(stdout.contains("test accuracy over 2 runs"), "{stdout}");
    // Progress lines every third epoch of each run (stderr is not a terminal here).
    for seed in 0..2 {
        for epoch in [3, 6] {
            let line = format!("seed {seed} epoch {epoch:>4}  loss");
            assert!(stderr.contains(&line), "missing {line:?} in {stderr}");
        }
    }
    assert!(
        !stderr.contains("Warning"),
        "libtorch's warnings are hidden: {stderr}"
    );

    let csv = std::fs::read_to_string(out.join("log.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + 2 * 6);
    let log: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("log.json")).unwrap()).unwrap();
    assert_eq!(log["config"]["model"]["layers"], 3);
    assert_eq!(log["runs"].as_array().unwrap().len(), 2);
    assert_eq!(log["summary"]["runs"], 2);
    assert_eq!(log["dataset"]["vertices"], 1000);
    let svg = std::fs::read_to_string(out.join("curves.svg")).unwrap();
    assert!(svg.starts_with("<svg"));
    let leftovers: Vec<_> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
}

#[test]
fn bad_train_options_fail_with_a_message() {
    for (args, says) in [
        (vec!["--layers", "0"], "at least one layer"),
        (vec!["--model", "gat"], "expected gcn or sage"),
        (vec!["--dropout", "1"], "dropout"),
        (
            vec!["--feature-norm", "column"],
            "expected none, row or auto",
        ),
    ] {
        let mut all = vec!["train", "synthetic:small,scale=0.1", "--epochs", "1"];
        all.extend(args.iter().copied());
        let run = switchgnn(&all);
        assert!(!run.status.success(), "{all:?} succeeded");
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert!(stderr.contains(says), "{all:?}: {stderr}");
    }
}
