//! End-to-end runs of the `switchgnn` binary.

use std::path::Path;
use std::process::{Command, Output};

use switchgnn_datasets::testdata::shared_dataset;

fn switchgnn(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_switchgnn"))
        .args(args)
        .output()
        .expect("the binary runs")
}

fn stdout_ok(args: &[&str]) -> String {
    let out = switchgnn(args);
    assert!(
        out.status.success(),
        "switchgnn {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn json(args: &[&str]) -> serde_json::Value {
    serde_json::from_str(&stdout_ok(args)).unwrap()
}

#[test]
fn inspect_cora_reports_the_known_figures() {
    let Some(cora) = shared_dataset("cora.npz") else {
        return;
    };
    let s = json(&["inspect", cora.to_str().unwrap(), "--json"]);
    assert_eq!(s["vertices"], 2708);
    assert_eq!(s["edges"], 5278);
    assert_eq!(s["features"]["width"], 1433);
    assert_eq!(s["classes"]["count"], 7);
    assert_eq!(
        (
            &s["split"]["train"],
            &s["split"]["val"],
            &s["split"]["test"]
        ),
        (&140.into(), &500.into(), &1000.into())
    );
    let table = stdout_ok(&["inspect", cora.to_str().unwrap()]);
    assert!(
        table.contains("2708") && table.contains("140 / 500 / 1000"),
        "{table}"
    );
}

#[test]
fn generate_then_inspect_the_cache() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("small.sgnn");
    let msg = stdout_ok(&[
        "generate",
        "small",
        "--scale",
        "0.5",
        "--seed",
        "4",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(msg.contains("2000 vertices"), "{msg}");
    let from_cache = json(&["inspect", out.to_str().unwrap(), "--json"]);
    let direct = json(&["inspect", "synthetic:small,scale=0.5,seed=4", "--json"]);
    assert_eq!(from_cache, direct);
    assert_eq!(from_cache["edges"], 10_000);
}

#[test]
fn convert_writes_a_cache_that_loads_the_same() {
    let Some(src) = shared_dataset("yandex/chameleon.npz") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("chameleon.sgnn");
    stdout_ok(&[
        "convert",
        src.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    let a = json(&["inspect", src.to_str().unwrap(), "--json"]);
    let b = json(&["inspect", out.to_str().unwrap(), "--json"]);
    assert_eq!(a, b);
}

#[test]
fn bad_input_fails_cleanly_and_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("broken.txt");
    std::fs::write(&bad, "0 1\n1 banana\n").unwrap();
    for args in [
        vec!["inspect", bad.to_str().unwrap()],
        vec!["inspect", "synthetic:no-such-preset"],
        vec!["inspect", "/nonexistent/graph.npz"],
        vec![
            "generate",
            "reddit-like",
            "--scale",
            "0.00001",
            "--out",
            "x.sgnn",
        ],
    ] {
        let out = switchgnn(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} should fail");
        assert!(err.starts_with("error:"), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
    let err = String::from_utf8(switchgnn(&["inspect", bad.to_str().unwrap()]).stderr).unwrap();
    assert!(
        err.contains("broken.txt") && err.contains("line 2"),
        "{err}"
    );
    assert!(
        !Path::new("x.sgnn").exists(),
        "a failed generate writes nothing"
    );
}

#[test]
fn every_level_has_help() {
    for args in [
        vec!["--help"],
        vec!["inspect", "--help"],
        vec!["convert", "--help"],
        vec!["generate", "--help"],
    ] {
        let text = stdout_ok(&args);
        assert!(text.contains("Usage:"), "{args:?}");
    }
}
