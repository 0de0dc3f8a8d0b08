//! A plan folder written the way the Python package's `switchgnn.prepare` writes it (through
//! the same library calls: an owner per vertex given, the plan and its shards written by
//! `PlanDir::create`, the kinds' plans saved by `PlanDir::save_kind`) runs under the
//! `switchgnn switch` and `worker` commands; a folder of an older Python package is refused,
//! naming its `python.json`.

use std::path::Path;

use switchgnn_datasets::{LoadOptions, NoProgress, Source};
use switchgnn_partition::{Assignment, Plan, PlanSpec};
use switchgnn_scheduler::blocks::set_plan_orders;
use switchgnn_scheduler::OrderKind;
use switchgnn_transport::{ExchangeKind, PlanDir};

mod support;

use support::{spawn, switchgnn, wait_all, wait_for_file};

const DATASET: &str = "synthetic:small,scale=0.25";

/// What `switchgnn.prepare` does with a graph and an owner per vertex (here: even and odd
/// vertices), the host exchange's plans saved.
fn prepare_as_python(dir: &Path) -> PlanDir {
    let dataset = DATASET
        .parse::<Source>()
        .unwrap()
        .load(&LoadOptions::default(), &NoProgress)
        .unwrap();
    let owner = (0..dataset.num_vertices() as u32).map(|v| v % 2).collect();
    let assignment = Assignment::new(owner, 2).unwrap();
    let spec = PlanSpec::new("python", 2, vec![16]).switch_memory(64_000);
    let mut plan = Plan::prepare_with(&dataset, &spec, assignment, &|_| {}).unwrap();
    set_plan_orders(&mut plan, OrderKind::PriorityBfs, 0).unwrap();
    let made = PlanDir::create(dir, plan, &dataset, &|_| {}).unwrap();
    let session = made
        .build_session(&dataset.graph, ExchangeKind::Host)
        .unwrap();
    made.save_kind(&session).unwrap();
    made
}

#[test]
fn a_plan_from_python_runs_under_the_switch_and_worker_commands() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("plan");
    let made = prepare_as_python(&dir);
    assert_eq!(
        made.saved_kinds(),
        [ExchangeKind::Switchgnn, ExchangeKind::Host]
    );
    assert!(made.contributions().unwrap() > 0);

    let plan = dir.to_str().unwrap();
    let ready = tmp.path().join("switch.addr");
    let switch = spawn(
        &[
            "switch",
            "--plan",
            plan,
            "--exchange",
            "host",
            "--listen",
            "127.0.0.1:0",
            "--ready-file",
            ready.to_str().unwrap(),
        ],
        &[],
    );
    let addr = wait_for_file(&ready);
    // The workers check every exchange against the direct computation on the graph, which a
    // plan from Python does not name: they are given it.
    let workers = (0..2).map(|rank| {
        let rank = rank.to_string();
        let args = [
            "worker",
            "--plan",
            plan,
            "--exchange",
            "host",
            "--dataset",
            DATASET,
            "--switch",
            &addr,
            "--rank",
            &rank,
        ];
        (format!("worker {rank}"), spawn(&args, &[]))
    });
    let named: Vec<_> = workers.collect();
    let done = wait_all(named.into_iter().chain([("switch".to_string(), switch)]));
    for (name, err) in &done[..2] {
        assert!(err.contains("2 exchanges exact"), "{name}: {err}");
    }
}

#[test]
fn a_folder_of_an_older_python_package_is_refused_by_name() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("plan");
    prepare_as_python(&dir);
    // What an older `switchgnn.prepare` left: no shards, the term count in `python.json`.
    std::fs::remove_dir_all(dir.join("shards")).unwrap();
    std::fs::write(dir.join("python.json"), "{}").unwrap();
    let err = PlanDir::open(&dir).unwrap_err().to_string();
    assert!(
        err.contains("python.json") && err.contains("prepare the plan again"),
        "{err}"
    );
    let out = switchgnn(&[
        "switch",
        "--plan",
        dir.to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("python.json"), "{err}");
}
