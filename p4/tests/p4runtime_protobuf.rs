//! The P4Runtime JSON against the real protobuf: `p4/ptf/validate_p4runtime.py` parses every
//! write request as a `p4.v1.WriteRequest` with the `p4runtime` package that
//! `scripts/p4py.sh` installs into `.p4py/`. Without those modules the test says why it
//! skips, except under `CI=true`, where it fails.

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;

use common::synthetic;

use switchgnn_dataplane::plan::{ExchangePlan, Mode};
use switchgnn_p4::{p4runtime, Entries, Install};
use switchgnn_partition::{Plan, PlanSpec};
use switchgnn_scheduler::exchange::ExchangePlans;
use switchgnn_scheduler::OrderKind;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// `python3` with the P4Runtime modules on its path, or `None` after saying why not.
fn python() -> Option<Command> {
    let site = repo().join(".p4py");
    let probe = Command::new("python3")
        .env("PYTHONPATH", &site)
        .args(["-c", "import p4.v1.p4runtime_pb2"])
        .output();
    if probe.is_ok_and(|o| o.status.success()) {
        let mut cmd = Command::new("python3");
        cmd.env("PYTHONPATH", &site);
        return Some(cmd);
    }
    let in_ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
    assert!(
        !in_ci,
        "CI=true but python3 cannot import the P4Runtime modules from {}: run scripts/p4py.sh",
        site.display()
    );
    eprintln!(
        "SKIPPED: python3 cannot import the P4Runtime modules from {} (run scripts/p4py.sh)",
        site.display()
    );
    None
}

#[test]
fn p4runtime_json_parses_as_write_requests() {
    let Some(mut python) = python() else { return };
    let d = synthetic(400, 2000, 3);
    let spec = PlanSpec::new(d.name.clone(), 3, vec![40, 16])
        .switch_memory(16 * 1024)
        .table_entries(Some(800));
    let plan = Plan::prepare(&d, &spec, &|_| {}).unwrap();
    let blocks: Vec<Arc<ExchangePlan>> = (0..2)
        .map(|l| Arc::new(ExchangePlan::from_plan(&plan, l).unwrap()))
        .collect();
    let host = vec![Arc::new(
        ExchangePlan::whole_graph(
            &d.graph,
            &plan.assignment,
            16,
            Mode::Host,
            OrderKind::PriorityBfs,
            0,
        )
        .unwrap(),
    )];
    let dir = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    let mut updates = Vec::new();
    for (name, layers) in [("blocks", blocks), ("host", host)] {
        // With an all-reduce region (its table entry and its cleared register words) and
        // looped ports (the value set, written whole).
        let mut install = Install {
            allreduce_slots: 8,
            ..Install::defaults(3)
        };
        install.loop_ports(8).unwrap();
        let entries = Entries::build(1, &layers, 42, &install).unwrap();
        let path = dir.path().join(format!("{name}.json"));
        std::fs::write(&path, p4runtime::to_json(&entries)).unwrap();
        files.push(path);
        let cleared: u64 = entries.clears.iter().map(|c| c.count).sum();
        assert_eq!(cleared, 16 + 16 * 8 + 16);
        updates.push(
            entries.tables.len()
                + entries.groups.len()
                + entries.sessions.len()
                + cleared as usize
                + 1,
        );
    }
    let out = python
        .arg(repo().join("p4/ptf/validate_p4runtime.py"))
        .args(&files)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for n in updates {
        assert!(stdout.contains(&format!(": {n} updates valid")), "{stdout}");
    }
}

/// The PTF suite cannot run here (it needs a Tofino model), but it must at least compile.
#[test]
fn the_ptf_suite_compiles() {
    let Some(mut python) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let out = python
        .env("PYTHONPYCACHEPREFIX", dir.path())
        .args(["-m", "py_compile"])
        .arg(repo().join("p4/ptf/switchgnn_test.py"))
        .arg(repo().join("p4/ptf/validate_p4runtime.py"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
