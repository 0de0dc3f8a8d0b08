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
        vec!["analyze", "--help"],
        vec!["prepare", "--help"],
        vec!["verify-plan", "--help"],
        vec!["order-eval", "--help"],
        vec!["train", "--help"],
    ] {
        let text = stdout_ok(&args);
        assert!(text.contains("Usage:"), "{args:?}");
    }
}

#[test]
fn prepare_then_verify_a_plan() {
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("plan");
    let out = stdout_ok(&[
        "prepare",
        "synthetic:small,scale=0.5",
        "--workers",
        "4",
        "--switch-memory",
        "32KiB",
        "--feature-dims",
        "128,16",
        "--out",
        plan.to_str().unwrap(),
    ]);
    assert!(out.contains("plan for small@0.5 on 4 workers"), "{out}");
    let verified = stdout_ok(&["verify-plan", plan.to_str().unwrap()]);
    assert!(
        verified.contains("every cross-worker edge in exactly one"),
        "{verified}"
    );

    // The plan belongs to its graph: another seed is refused with a clear message.
    let other = switchgnn(&[
        "verify-plan",
        plan.to_str().unwrap(),
        "--dataset",
        "synthetic:small,scale=0.5,seed=9",
    ]);
    assert!(!other.status.success());
    let err = String::from_utf8_lossy(&other.stderr);
    assert!(err.contains("differs"), "{err}");

    // A damaged file is named.
    let assignment = plan.join("assignment.bin");
    let mut bytes = std::fs::read(&assignment).unwrap();
    bytes[40] ^= 1;
    std::fs::write(&assignment, bytes).unwrap();
    let damaged = switchgnn(&["verify-plan", plan.to_str().unwrap()]);
    assert!(!damaged.status.success());
    let err = String::from_utf8_lossy(&damaged.stderr);
    assert!(err.contains("assignment.bin"), "{err}");
}

#[test]
fn analyze_reports_traffic_per_worker_count() {
    let rows = json(&[
        "analyze",
        "synthetic:small",
        "--workers",
        "2,8",
        "--switch-memory",
        "16KiB",
        "--json",
    ]);
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 2);
    for r in rows {
        let host = r["traffic"]["host_bytes"].as_u64().unwrap();
        let ideal = r["traffic"]["ideal_up_bytes"].as_u64().unwrap()
            + r["traffic"]["ideal_down_bytes"].as_u64().unwrap();
        let plan = r["plans"][0]["bytes"].as_u64().unwrap();
        assert!(ideal <= plan && ideal <= host, "{r}");
    }
    // More workers: more boundary, more host-exchange traffic.
    assert!(rows[1]["traffic"]["host_bytes"].as_u64() > rows[0]["traffic"]["host_bytes"].as_u64());
}

#[test]
fn order_eval_scores_orders_side_by_side() {
    let scored = json(&[
        "order-eval",
        "synthetic:small",
        "--order",
        "priority-bfs,random",
        "--json",
    ]);
    let rows = scored.as_array().unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0]["order"], "priority-bfs");
    let queue = |i: usize| rows[i]["max_queue"].as_u64().unwrap();
    assert!(
        queue(0) < queue(1),
        "priority BFS {} vs random {}",
        queue(0),
        queue(1)
    );
    let blocks = json(&[
        "order-eval",
        "synthetic:small",
        "--workers",
        "4",
        "--switch-memory",
        "32KiB",
        "--width",
        "64",
        "--json",
    ]);
    assert!(blocks[0]["blocks"].as_array().unwrap().len() > 1);
    let bad = switchgnn(&["order-eval", "synthetic:small", "--order", "sideways"]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("unknown order `sideways`"));
}
