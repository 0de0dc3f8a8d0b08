//! End-to-end runs of the `switchgnn` binary.

use std::path::Path;

use switchgnn_datasets::testdata::shared_dataset;

mod support;

use support::{assert_worker_1_named, spawn, start_switch, start_switch_as, switchgnn};

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
        vec!["switch", "--help"],
        vec!["worker", "--help"],
        vec!["exchange", "--help"],
        vec!["train", "--help"],
        vec!["simulate", "--help"],
        vec!["p4", "resources", "--help"],
        vec!["p4", "entries", "--help"],
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
    // The planner's pick per layer is recorded, and the weighed kinds are printed.
    assert!(
        out.contains("layer 1 on tofino1-32") && out.contains("auto chose"),
        "{out}"
    );
    assert!(
        verified.contains("layer 0 runs") && verified.contains("layer 1 runs"),
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
    // synthetic:small at 2 and 8 workers, 16 KiB of aggregators, with `extra` options.
    let analyze = |extra: &[&str]| {
        let mut args = vec![
            "analyze",
            "synthetic:small",
            "--workers",
            "2,8",
            "--switch-memory",
            "16KiB",
            "--json",
        ];
        args.extend_from_slice(extra);
        json(&args)
    };
    let rows = analyze(&[]);
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
    // The verdict names a real chip that hosts the workers, and the ideal switch can only be
    // more favourable to in-network aggregation.
    let speedup = |r: &serde_json::Value| r["verdict"]["speedup_at_best"].as_f64().unwrap();
    let ideal = json(&[
        "analyze",
        "synthetic:small",
        "--workers",
        "2,8",
        "--chip",
        "ideal",
        "--json",
    ]);
    for (real, ideal) in rows.iter().zip(ideal.as_array().unwrap()) {
        assert_eq!(real["chip"], "tofino1-32");
        assert_eq!(ideal["chip"], "ideal");
        assert!(
            speedup(real) > 0.0 && speedup(ideal) >= speedup(real),
            "{real} {ideal}"
        );
        assert!(real["plans"][0]["verdict"]["in_network"]["seconds"].as_f64() > Some(0.0));
        // The pre-aggregated exchange recirculates only to read its sums out: no more than
        // SwitchGNN, which also reads out every sum and passes once per further destination.
        let pre = &real["reduce"]["in_network"];
        let ours = &real["plans"][0]["verdict"]["in_network"];
        let recirculation = |x: &serde_json::Value| x["recirculation_s"].as_f64().unwrap();
        assert!(
            recirculation(pre) > 0.0 && recirculation(pre) <= recirculation(ours),
            "{pre} {ours}"
        );
        // The planner's pick is one of the kinds it weighs, never predicted slower than the
        // best host-only kind, which is the verdicts' baseline.
        for r in [real, ideal] {
            let (pick, base) = (&r["pick"], &r["best_host_only"]);
            let kind = pick["kind"].as_str().unwrap();
            assert!(
                [
                    "host",
                    "host-reduce",
                    "host-hybrid",
                    "switchgnn",
                    "reduce",
                    "hybrid"
                ]
                .contains(&kind),
                "{kind}"
            );
            assert!(
                ["host", "host-reduce", "host-hybrid"].contains(&base["kind"].as_str().unwrap())
            );
            let seconds = |x: &serde_json::Value| x["seconds"].as_f64().unwrap();
            assert!(seconds(pick) <= seconds(base), "{pick} {base}");
            assert_eq!(r["verdict"]["baseline"], base["kind"]);
            assert_eq!(seconds(&r["verdict"]["host_exchange"]), seconds(base));
            // The hybrid is judged against the same baseline, and it is a candidate.
            assert_eq!(r["hybrid"]["baseline"], base["kind"]);
            assert!(
                seconds(pick) <= seconds(&r["hybrid"]["in_network"]),
                "{pick}"
            );
        }
    }
    // With the links' delay the bounds add the messages' latency: one block of SwitchGNN
    // waits (2 + 4) delays of 5 µs, on top of at least the rows that fall between them, and
    // never more than the resources' time plus it; a plan of many blocks 4 more per block.
    let delayed = analyze(&["--link-delay-us", "5"]);
    for (plain, late) in rows.iter().zip(delayed.as_array().unwrap()) {
        let s = |x: &serde_json::Value, k: &str| x[k].as_f64().unwrap();
        let (a, b) = (
            &plain["verdict"]["in_network"],
            &late["verdict"]["in_network"],
        );
        assert_eq!(s(a, "latency_s"), 0.0);
        assert!((s(b, "latency_s") - 30e-6).abs() < 1e-12, "{b}");
        assert!(
            s(b, "seconds") > s(a, "seconds") && s(b, "seconds") <= s(a, "seconds") + 30e-6,
            "{a} {b}"
        );
        let blocks = late["plans"][0]["blocks"].as_f64().unwrap();
        let many = &late["plans"][0]["verdict"]["in_network"];
        assert!(blocks > 1.0, "{late}");
        assert!(
            (s(many, "latency_s") - (2.0 + 4.0 * blocks) * 5e-6).abs() < 1e-12,
            "{many}"
        );
    }
}

/// `analyze --racks`: what crosses the spine layer with two-level aggregation, per kind.
#[test]
fn analyze_counts_what_crosses_the_racks() {
    let rows = json(&[
        "analyze",
        "synthetic:small",
        "--workers",
        "8",
        "--racks",
        "2,8",
        "--json",
    ]);
    let fabrics = rows[0]["fabrics"].as_array().unwrap();
    assert_eq!(fabrics.len(), 2);
    let bytes = |f: &serde_json::Value, kind: &str| f[kind]["bytes"].as_u64().unwrap();
    let packets = |f: &serde_json::Value, kind: &str| f[kind]["packets"].as_u64().unwrap();
    for f in fabrics {
        assert!(bytes(f, "reduce") <= bytes(f, "switchgnn"), "{f}");
        // The host exchange's copies go packed to the MTU, the partial sums a chunk a packet.
        assert!(packets(f, "host") < packets(f, "reduce"), "{f}");
        // The host hybrid moves no more rows than either host-only kind on any worker pair.
        let least = bytes(f, "host").min(bytes(f, "host_reduce"));
        assert!(bytes(f, "host_hybrid") <= least, "{f}");
        // The rack proxies send one partial per other rack and destination across, where
        // host-reduce sends one per worker.
        assert!(bytes(f, "host_two_level") <= bytes(f, "host_reduce"), "{f}");
    }
    // With a rack per worker, partial sums (one per rack and destination) cross in fewer bytes
    // than every copy. (With two racks the packed copies cross in fewer: 4.53 against 4.71 MB
    // at width 128.)
    assert!(
        bytes(&fabrics[1], "reduce") < bytes(&fabrics[1], "host"),
        "{}",
        fabrics[1]
    );
    // More racks, more of the exchange crosses; with a rack per worker the host exchange's
    // copies all do (twice: up and down), and its payload is the host-link traffic.
    assert!(bytes(&fabrics[0], "host") < bytes(&fabrics[1], "host"));
    let out = switchgnn(&[
        "analyze",
        "synthetic:small",
        "--workers",
        "4",
        "--racks",
        "8",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("4 workers cannot fill 8 racks"), "{err}");
}

/// The table says what its figures rest on: each bound term's basis, and the chip's sources.
#[test]
fn analyze_names_the_basis_of_its_figures() {
    let text = stdout_ok(&["analyze", "synthetic:small", "--workers", "4"]);
    assert!(text.contains("against the best host-only kind"), "{text}");
    // By default the chip's spare ports are looped (it says so), 28 on the 32-port Tofino 1.
    assert!(
        text.contains("28 front-panel ports of 100 Gb/s in loopback"),
        "{text}"
    );
    assert!(
        [
            "a chip limit",
            "the recirculation ports this program uses",
            "the link rate",
            "an assumed per-packet host cost"
        ]
        .iter()
        .any(|basis| text.contains(basis)),
        "{text}"
    );
    assert!(
        text.contains("the chip model's figures and their sources:"),
        "{text}"
    );
    assert!(text.contains("Tofino 2 recirculation"), "{text}");
    // Without looped ports, recirculation bounds the same exchange.
    let text = stdout_ok(&[
        "analyze",
        "synthetic:small",
        "--workers",
        "4",
        "--loopback-ports",
        "0",
    ]);
    assert!(!text.contains("ports of 100 Gb/s in loopback"), "{text}");
    assert!(
        text.contains("the recirculation ports this program uses"),
        "{text}"
    );
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

#[test]
fn exchange_runs_every_mode_exactly_over_real_processes() {
    let dir = tempfile::tempdir().unwrap();
    let summary = dir.path().join("summary.json");
    // With loss, the switch's model on two cores (aggregators spread by destination).
    for (loss, cores) in [("0", "1"), ("0.02", "2")] {
        stdout_ok(&[
            "exchange",
            "synthetic:small,scale=0.25",
            "--workers",
            "4",
            "--feature-dims",
            "40,16",
            "--switch-memory",
            "64KB",
            "--exchange",
            "switch,host,strawman",
            "--switch-cores",
            cores,
            "--loss",
            loss,
            "--json",
            summary.to_str().unwrap(),
        ]);
        let modes: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&summary).unwrap()).unwrap();
        let modes = modes.as_array().unwrap();
        assert_eq!(modes.len(), 3);
        for m in modes {
            let name = m["mode"].as_str().unwrap();
            let exchanges = m["exchanges"].as_array().unwrap();
            // Two layers, forward then backward.
            assert_eq!(exchanges.len(), 4, "{name}");
            for x in exchanges {
                assert_eq!(x["exact"], true, "{name} loss {loss}: {x}");
                // Every modelled byte crossed the wire (resends only add to it).
                assert!(x["payload"].as_u64() >= x["model"].as_u64(), "{name}: {x}");
            }
            assert_eq!(m["switch"]["counters"]["exchanges_completed"], 4, "{name}");
            let per_core = m["switch"]["passes_per_core"].as_array().unwrap();
            assert_eq!(per_core.len().to_string(), cores, "{name}");
            if name != "host" {
                // Every core aggregated its share.
                assert!(
                    per_core.iter().all(|p| p.as_u64() > Some(0)),
                    "{name}: {per_core:?}"
                );
            }
        }
    }
}

#[test]
fn an_auto_exchange_says_what_it_ran_and_for_which_chip() {
    let dir = tempfile::tempdir().unwrap();
    let summary = dir.path().join("summary.json");
    let json = summary.to_str().unwrap();
    let run = |kind: &str| {
        let small = "synthetic:small,scale=0.25";
        let args = [
            "exchange",
            small,
            "--workers",
            "4",
            "--feature-dims",
            "40,16",
        ];
        stdout_ok(&[&args[..], &["--exchange", kind, "--json", json]].concat())
    };
    let text = run("auto");
    let modes: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&summary).unwrap()).unwrap();
    let picked = &modes[0]["picked"];
    let kinds: Vec<&str> = picked["kinds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k.as_str().unwrap())
        .collect();
    assert_eq!(kinds.len(), 2, "{picked}");
    assert!(kinds.iter().all(|k| *k != "auto"), "{picked}");
    let chip = picked["chip"].as_str().unwrap();
    assert!(chip.starts_with("tofino"), "{chip}");
    let line = format!("auto ran {} (by layer)", kinds.join(", "));
    assert!(text.contains(&line), "{text}");
    assert!(text.contains("does not describe"), "{text}");
    // A named kind prints no such line.
    assert!(!run("host").contains("auto ran"));
}

/// Start `switchgnn worker` for `job` against the switch at `addr`.
fn worker(job: &str, addr: &str, extra: &[&str], env: &[(&str, &str)]) -> std::process::Child {
    let mut args = vec!["worker", "--job", job, "--switch", addr];
    args.extend_from_slice(extra);
    spawn(&args, env)
}

/// Start workers 0 and 1 of `job` against the switch at `addr`, wait for them and `switch`,
/// and return each worker's stderr; every process must succeed.
fn two_workers_and_the_switch(job: &str, addr: &str, switch: std::process::Child) -> [String; 2] {
    let w0 = worker(job, addr, &["--rank", "0"], &[]);
    let w1 = worker(job, addr, &["--rank", "1"], &[]);
    let mut errs = [String::new(), String::new()];
    for (name, child) in [("worker 0", w0), ("worker 1", w1), ("switch", switch)] {
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{name} failed: {err}");
        if let Some(rank) = name.strip_prefix("worker ") {
            errs[rank.parse::<usize>().unwrap()] = err;
        }
    }
    errs
}

/// A plan of two workers and a job file for it; returns the job file's path.
fn two_worker_job(dir: &Path, dims: &str, extra: &str) -> std::path::PathBuf {
    let plan = dir.join("plan");
    stdout_ok(&[
        "prepare",
        "synthetic:small,scale=0.25",
        "--workers",
        "2",
        "--feature-dims",
        dims,
        "--out",
        plan.to_str().unwrap(),
    ]);
    let job = dir.join("job.toml");
    std::fs::write(
        &job,
        format!(
            "job = 3\nplan = \"plan\"\nmode = \"switchgnn\"\nswitch = \"127.0.0.1:0\"\n\
             world = 2\nbind = \"127.0.0.1:0\"\n{extra}"
        ),
    )
    .unwrap();
    job
}

#[test]
fn switch_and_workers_started_by_hand_or_by_a_launcher() {
    let dir = tempfile::tempdir().unwrap();
    let job = two_worker_job(dir.path(), "24", "");
    let job = job.to_str().unwrap();
    let (switch, addr) = start_switch(dir.path(), job, &[]);
    // Rank 0 from the command line, rank 1 from torchrun-style variables.
    let w0 = worker(job, &addr, &["--rank", "0"], &[]);
    let w1 = worker(job, &addr, &[], &[("RANK", "1"), ("WORLD_SIZE", "2")]);
    for (name, child) in [("worker 0", w0), ("worker 1", w1), ("switch", switch)] {
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{name} failed: {err}");
        if name.starts_with("worker") {
            assert!(err.contains("2 exchanges exact"), "{name}: {err}");
        }
    }
    let report = dir.path().join("switch.json");
    let counters: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    assert_eq!(counters["counters"]["exchanges_completed"], 2);

    // A launcher whose world size disagrees with the job is refused before anything starts.
    let out = worker(job, &addr, &[], &[]).wait_with_output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no rank"));
    let slurm = [("SLURM_PROCID", "0"), ("SLURM_NTASKS", "4")];
    let out = worker(job, &addr, &[], &slurm).wait_with_output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("SLURM_NTASKS=4"));
}

/// A spine and two leaf switch processes (`switch --tier`) and four worker processes, each
/// joining its rack's leaf: every exchange exact, the leaves aggregating, the spine finishing.
#[test]
fn leaf_and_spine_switch_processes_run_a_two_level_job() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let plan = d.join("plan");
    stdout_ok(&[
        "prepare",
        "synthetic:small,scale=0.25",
        "--workers",
        "4",
        "--feature-dims",
        "24",
        "--out",
        plan.to_str().unwrap(),
    ]);
    let job = d.join("job.toml");
    std::fs::write(
        &job,
        "job = 5\nplan = \"plan\"\nmode = \"reduce\"\nswitch = \"127.0.0.1:0\"\nworld = 4\n\
         bind = \"127.0.0.1:0\"\n[fabric]\nleaves = [\"127.0.0.1:0\", \"127.0.0.1:0\"]\n",
    )
    .unwrap();
    let job = job.to_str().unwrap();
    let start = |name: &str, extra: &[&str]| start_switch_as(d, name, job, extra);
    let (spine, spine_addr) = start("spine", &["--tier", "spine"]);
    let leaves: Vec<_> = (0..2)
        .map(|r| {
            let rack = r.to_string();
            start(
                &format!("leaf{r}"),
                &["--tier", "leaf", "--rack", &rack, "--spine", &spine_addr],
            )
        })
        .collect();
    let workers: Vec<_> = (0..4)
        .map(|rank: usize| {
            let rank_arg = rank.to_string();
            worker(job, &leaves[rank / 2].1, &["--rank", &rank_arg], &[])
        })
        .collect();
    for (rank, w) in workers.into_iter().enumerate() {
        let out = w.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "worker {rank}: {err}");
        assert!(err.contains("2 exchanges exact"), "worker {rank}: {err}");
    }
    for (name, child) in leaves
        .into_iter()
        .map(|(c, _)| c)
        .chain(std::iter::once(spine))
        .enumerate()
    {
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "switch {name}: {err}");
    }
    let report = |name: &str| -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(d.join(format!("{name}.json"))).unwrap()).unwrap()
    };
    let spine = report("spine");
    assert_eq!(spine["counters"]["exchanges_completed"], 2);
    assert!(spine["counters"]["aggregations"].as_u64() > Some(0));
    for r in 0..2 {
        let leaf = report(&format!("leaf{r}"));
        assert!(
            leaf["counters"]["aggregations"].as_u64() > Some(0),
            "{leaf}"
        );
        assert_eq!(leaf["jobs"][0]["peers"].as_array().unwrap().len(), 2);
    }
    // Without a [fabric], --tier is refused by name.
    let plain = d.join("plain.toml");
    let text = std::fs::read_to_string(job).unwrap();
    std::fs::write(&plain, text.split("[fabric]").next().unwrap()).unwrap();
    let out = switchgnn(&[
        "switch",
        "--job",
        plain.to_str().unwrap(),
        "--tier",
        "spine",
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("[fabric]"));
    // A fabric's switches run on one core; no switch on none.
    for (cores, why) in [("2", "runs on one core"), ("0", "--cores")] {
        let out = switchgnn(&["switch", "--job", job, "--tier", "spine", "--cores", cores]);
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(why), "--cores {cores}: {err}");
    }
}

#[test]
fn a_job_with_a_secret_admits_only_workers_that_hold_it() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("secret"), "the job's shared secret, 32 bytes\n").unwrap();
    std::fs::write(d.join("wrong"), "somebody else's secret, 32 bytes").unwrap();
    let job = two_worker_job(d, "24", "secret_file = \"secret\"\n");
    let text = std::fs::read_to_string(&job).unwrap();
    let wrong = d.join("wrong.toml");
    std::fs::write(&wrong, text.replace("\"secret\"", "\"wrong\"")).unwrap();
    let none = d.join("none.toml");
    std::fs::write(&none, text.replace("secret_file = \"secret\"\n", "")).unwrap();
    let job = job.to_str().unwrap();
    let (switch, addr) = start_switch(d, job, &[]);
    // Strangers first: neither takes rank 0, and each is told what it lacks.
    for (stranger, why) in [(&wrong, "does not verify"), (&none, "secret_file")] {
        let out = worker(stranger.to_str().unwrap(), &addr, &["--rank", "0"], &[])
            .wait_with_output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success(),
            "a worker without the secret joined: {err}"
        );
        assert!(err.contains(why), "{err}");
    }
    two_workers_and_the_switch(job, &addr, switch);
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(d.join("switch.json")).unwrap()).unwrap();
    let control = &report["jobs"][0]["control"];
    assert_eq!(report["counters"]["exchanges_completed"], 2, "{report}");
    assert_eq!(control["bad_proofs"], 1, "{control}");
    assert_eq!(control["admitted"], 2, "{control}");
}

#[test]
fn a_killed_worker_process_is_named_and_nothing_hangs() {
    let dir = tempfile::tempdir().unwrap();
    // A 1 Mbit/s link stretches the four exchanges over seconds (a patient result timer
    // keeps receivers from fetching what is merely slow); silence counts after 1 s.
    let job = two_worker_job(
        dir.path(),
        "64,64",
        "[timeouts]\npeer_ms = 1000\nresult_us = 1000000\n[link]\ngbps = 0.001\n",
    );
    let job = job.to_str().unwrap();
    let started = std::time::Instant::now();
    let (switch, addr) = start_switch(dir.path(), job, &[]);
    let w0 = worker(job, &addr, &["--rank", "0"], &[]);
    let mut w1 = worker(job, &addr, &["--rank", "1"], &[("RUST_LOG", "info")]);
    // Killed once it is a member (a loaded machine may take seconds to start it), inside the
    // stretched first exchanges.
    support::wait_until_joined(&mut w1);
    std::thread::sleep(std::time::Duration::from_millis(500));
    w1.kill().unwrap();
    w1.wait().unwrap();
    assert_worker_1_named(switch, w0);
    let elapsed = started.elapsed();
    assert!(elapsed < std::time::Duration::from_secs(60), "{elapsed:?}");
}

/// `simulate` of a quarter of `small` on 4 workers with 1 MB of aggregators and width 32, in
/// `modes`, with `extra` options, writing its report to `out`.
fn simulate_small(modes: &str, extra: &[&str], out: &std::path::Path) -> String {
    let mut args = vec![
        "simulate",
        "synthetic:small,scale=0.25",
        "--workers",
        "4",
        "--switch-memory",
        "1MB",
        "--modes",
        modes,
        "--feature-dims",
        "32",
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    stdout_ok(&args)
}

/// `best-host` runs the host-only kind the chip model favours, the baseline of every ratio in
/// the epoch table; `auto` never has a larger bound.
#[test]
fn simulate_runs_the_best_host_only_kind_beside_the_pick() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("report");
    let text = simulate_small("best-host,host,host-reduce,host-hybrid,auto", &[], &out);
    assert!(text.contains("best host-only"), "{text}");
    let report = switchgnn_sim::report::read_report(&out).unwrap();
    let run_of = |mode: &str| {
        let name = |r: &&switchgnn_sim::sweep::RunRow| r.mode.name() == mode;
        report.runs.iter().find(name).unwrap().clone()
    };
    let best = run_of("best-host");
    assert!(
        ["host", "host-reduce", "host-hybrid"].contains(&best.kind.as_str()),
        "{best:?}"
    );
    // It is that kind's run exactly (the simulation is deterministic).
    let same = run_of(&best.kind);
    assert_eq!((best.comm_ns, best.bound_ns), (same.comm_ns, same.bound_ns));
    for kind in ["host", "host-reduce", "host-hybrid"] {
        assert!(best.bound_ns <= run_of(kind).bound_ns, "{kind}");
    }
    let auto = report.runs.iter().filter(|r| r.mode.name() == "auto");
    for a in auto {
        assert!(a.bound_ns <= best.bound_ns, "{a:?}");
        // A host kind picked by auto runs as that kind does (packed, not bundled).
        if ["host", "host-reduce", "host-hybrid"].contains(&a.kind.as_str()) {
            let same = run_of(&a.kind);
            assert_eq!((a.comm_ns, a.link_bytes), (same.comm_ns, same.link_bytes));
        }
    }
}

/// `--rate-control` chooses how the workers answer ECN echoes; the report records it, and with
/// a marking threshold every burst crosses, ignoring the echoes changes the run.
#[test]
fn simulate_takes_the_workers_rate_control() {
    let dir = tempfile::tempdir().unwrap();
    let run = |setting: &str| {
        let out = dir.path().join(setting);
        stdout_ok(&[
            "simulate",
            "synthetic:small,scale=0.25",
            "--workers",
            "4",
            "--modes",
            "host",
            "--feature-dims",
            "256",
            "--ecn-threshold",
            "2KB",
            "--rate-control",
            setting,
            "--out",
            out.to_str().unwrap(),
        ]);
        let report = switchgnn_sim::report::read_report(&out).unwrap();
        let readme = std::fs::read_to_string(out.join("README.md")).unwrap();
        (report, readme)
    };
    let (halve, _) = run("halve");
    let (off, readme) = run("off");
    assert_eq!(off.spec.rate_control.name(), "off");
    assert!(readme.contains("ECN echoes ignored"), "{readme}");
    let (h, o) = (&halve.runs[0], &off.runs[0]);
    assert!(h.ecn_echoes > 0 && o.ecn_echoes > 0, "{h:?} {o:?}");
    // Halving on every burst of echoes slows the senders; ignoring them does not.
    assert!(o.comm_ns < h.comm_ns, "{h:?} {o:?}");
    let bad = switchgnn(&[
        "simulate",
        "synthetic:small,scale=0.25",
        "--rate-control",
        "cubic",
        "--out",
        dir.path().join("bad").to_str().unwrap(),
    ]);
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("halve, proportional, off"), "{err}");
}

#[test]
fn simulate_writes_a_report_with_tables_series_and_plots() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("report");
    let text = stdout_ok(&[
        "simulate",
        "synthetic:small,scale=0.25",
        "--workers",
        "4,8",
        "--switch-memory",
        "64KB,1MB",
        "--modes",
        "host,g3,strawman,switchgnn,switchgnn-nogamr",
        "--feature-dims",
        "64,16",
        "--compute-ms",
        "1.5",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(
        text.contains("| 8 | tofino1-32 | 1.0 MB | switchgnn |"),
        "{text}"
    );
    let report = switchgnn_sim::report::read_report(&out).unwrap();
    // Per worker count: host and g3 once, three in-network modes per memory.
    assert_eq!(report.epochs.len(), 2 * (2 + 3 * 2));
    // Two distinct widths, one run each per configuration.
    assert_eq!(report.runs.len(), 2 * report.epochs.len());
    // Two layers, forward and backward.
    assert_eq!(report.layers.len(), 4 * report.epochs.len());
    for e in report.epochs.iter() {
        assert!(e.comm_ms > 0.0 && (e.epoch_ms - e.comm_ms - 1.5).abs() < 1e-9);
        // Every run names its chip, and no simulated epoch beats the chip model's bound.
        assert_eq!(e.chip, "tofino1-32");
        assert!(e.bound_ms > 0.0 && e.comm_ms >= e.bound_ms, "{e:?}");
        let layers: f64 = report
            .layers
            .iter()
            .filter(|l| {
                (l.workers, l.switch_memory, l.mode) == (e.workers, e.switch_memory, e.mode)
            })
            .map(|l| l.comm_ns as f64 / 1e6)
            .sum();
        assert!(
            (layers - e.comm_ms).abs() < 1e-6,
            "{layers} vs {}",
            e.comm_ms
        );
    }
    let csv = std::fs::read_to_string(out.join("epochs.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + report.epochs.len());
    for r in report.runs.iter() {
        for file in [
            format!("series/{}.csv", r.id()),
            format!("series/{}.json", r.id()),
            format!("links/{}.csv", r.id()),
        ] {
            assert!(out.join(&file).is_file(), "{file}");
        }
        let links = std::fs::read_to_string(out.join(format!("links/{}.csv", r.id()))).unwrap();
        assert_eq!(links.lines().count(), 1 + r.workers as usize, "{}", r.id());
    }
    for plot in [
        "epoch-time",
        "traffic",
        "peak-queue",
        "queue-vs-memory",
        "traffic-vs-memory",
    ] {
        let svg = std::fs::read_to_string(out.join(format!("plots/{plot}.svg"))).unwrap();
        assert!(svg.starts_with("<svg"), "{plot}");
        let png = std::fs::read(out.join(format!("plots/{plot}.png"))).unwrap();
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "{plot}");
    }
    assert!(std::fs::read_to_string(out.join("README.md"))
        .unwrap()
        .contains("simulate"));

    // A report of another format version is refused by name.
    let path = out.join("report.json");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(
        &path,
        text.replacen(
            &format!(
                "\"format_version\": {}",
                switchgnn_sim::report::FORMAT_VERSION
            ),
            "\"format_version\": 99",
            1,
        ),
    )
    .unwrap();
    let err = switchgnn_sim::report::read_report(&out)
        .unwrap_err()
        .to_string();
    assert!(err.contains("report.json") && err.contains("99"), "{err}");

    // With loss, the engines recover what the fault injector drops, and say so.
    let lossy = dir.path().join("lossy");
    simulate_small("host,switchgnn", &["--loss", "0.02"], &lossy);
    let lossy = switchgnn_sim::report::read_report(&lossy).unwrap();
    assert!(lossy.runs.iter().all(|r| r.retransmits + r.fetches > 0));

    // Bad input: an unknown mode is named.
    let bad = switchgnn(&[
        "simulate",
        "synthetic:small",
        "--modes",
        "host,magic",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("magic"));
    // A chip without enough ports for the workers is refused, saying so.
    let bad = switchgnn(&[
        "simulate",
        "synthetic:small",
        "--workers",
        "40",
        "--chip",
        "tofino1-32",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        err.contains("tofino1-32") && err.contains("fewer than 40"),
        "{err}"
    );
}

#[test]
fn a_switch_loaded_from_p4_entries_serves_exact_exchanges() {
    let dir = tempfile::tempdir().unwrap();
    let job = two_worker_job(dir.path(), "24,40", "");
    let job = job.to_str().unwrap();
    let plan = dir.path().join("plan");
    let plan = plan.to_str().unwrap();
    let entries = dir.path().join("entries.json");
    let entries = entries.to_str().unwrap();
    let p4_entries = |format: &str, out: &str, job_id: &str, extra: &[&str]| {
        let mut args = vec![
            "p4", "entries", "--plan", plan, "--format", format, "--job", job_id, "--out", out,
        ];
        args.extend_from_slice(extra);
        switchgnn(&args)
    };
    let out = p4_entries("p4runtime", entries, "3", &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(entries).unwrap()).unwrap();
    assert_eq!(doc["switchgnn"]["job"], 3);
    assert!(
        doc["write_requests"][0]["updates"]
            .as_array()
            .unwrap()
            .len()
            > 10
    );

    // The job file's 128 all-reduce slots, as a region whose words start from zero: banks,
    // their seen words (8 per bank) and counts, each cleared with a MODIFY.
    let modified = doc["write_requests"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r["updates"].as_array().unwrap())
        .filter(|u| u["type"] == "MODIFY" && u["entity"].get("registerEntry").is_some())
        .count();
    assert_eq!(modified, 256 + 256 * 8 + 256);

    let (switch, addr) = start_switch(dir.path(), job, &["--entries", entries]);
    for (rank, err) in two_workers_and_the_switch(job, &addr, switch)
        .iter()
        .enumerate()
    {
        assert!(err.contains("4 exchanges exact"), "worker {rank}: {err}");
    }

    // The bfrt_python form of the same entries.
    let script = dir.path().join("entries.py");
    let out = p4_entries("bfrt", script.to_str().unwrap(), "3", &[]);
    assert!(out.status.success());
    let text = std::fs::read_to_string(&script).unwrap();
    assert!(text.contains("p4 = bfrt.switchgnn.pipe"));
    assert!(text.contains("# Ingress.aggregation.vertex_aggregators ("));

    // Entries of another job than the job file's are refused, naming the file.
    let other = dir.path().join("job4.json");
    assert!(p4_entries("p4runtime", other.to_str().unwrap(), "4", &[])
        .status
        .success());
    let out = switchgnn(&["switch", "--job", job, "--entries", other.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("job4.json installs job 4"), "{err}");
    // Entries with another all-reduce region than the job file's are refused, naming both.
    let small = dir.path().join("small-region.json");
    let small = small.to_str().unwrap();
    let out = p4_entries("p4runtime", small, "3", &["--allreduce-slots", "16"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("all-reduce: 16 slots, 32 banks"), "{err}");
    let out = switchgnn(&["switch", "--job", job, "--entries", small]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("[allreduce] slots = 128") && err.contains("installs 16"),
        "{err}"
    );
    // Entries without a region serve the job (its workers would be told to sum over tcp).
    let none = dir.path().join("no-region.json");
    let none = none.to_str().unwrap();
    let out = p4_entries("p4runtime", none, "3", &["--allreduce-slots", "0"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let (mut switch, _) = start_switch(dir.path(), job, &["--entries", none]);
    switch.kill().unwrap();
    switch.wait().unwrap();
    // Looped front-panel ports as recirculation paths: two in each of the four pipes, listed
    // for the operator, in the parser's value set; the software switch loads the entries.
    let looped = dir.path().join("looped.json");
    let looped = looped.to_str().unwrap();
    let out = p4_entries("p4runtime", looped, "3", &["--loopback-ports", "8"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(looped).unwrap()).unwrap();
    assert_eq!(
        doc["switchgnn"]["looped_ports"],
        serde_json::json!([8, 12, 136, 140, 264, 268, 392, 396])
    );
    let (mut switch, _) = start_switch(dir.path(), job, &["--entries", looped]);
    switch.kill().unwrap();
    switch.wait().unwrap();
    let out = p4_entries("p4runtime", looped, "3", &["--loopback-ports", "6"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("multiple of 4"));
    // A count the program cannot mask is refused.
    let out = p4_entries("p4runtime", small, "3", &["--allreduce-slots", "100"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("power of two"));
    // A damaged file is refused too.
    std::fs::write(&other, "{\"switchgnn\": 1}").unwrap();
    let out = switchgnn(&["switch", "--job", job, "--entries", other.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a usable entries file"));

    // The resource model: a small plan fits with every block's tables resident.
    let report = dir.path().join("resources.json");
    let text = stdout_ok(&[
        "p4",
        "resources",
        "--plan",
        plan,
        "--json",
        report.to_str().unwrap(),
    ]);
    assert!(
        text.contains("verdict: fits a Tofino 1 with every block's tables resident"),
        "{text}"
    );
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    assert_eq!(r[0]["fits_resident"], true);
    assert_eq!(r[0]["workers"], 2);
    assert_eq!(r[0]["assumptions"]["looped_per_pipe"], 0);
    // With looped ports the recirculation bandwidth grows by their paths.
    let text = stdout_ok(&["p4", "resources", "--plan", plan, "--loopback-ports", "8"]);
    assert!(
        text.contains("Looped ports: 2 per pipe at 100 Gb/s; with the internal port, 3 paths"),
        "{text}"
    );
}

#[test]
fn simulate_writes_a_capture_of_each_run() {
    use pcap_file::pcap::PcapReader;
    use switchgnn_dataplane::wire::{Packet, PacketType, Repr};

    let dir = tempfile::tempdir().unwrap();
    let cap = dir.path().join("caps/run.pcap");
    let pcap = ["--pcap", cap.to_str().unwrap()];
    simulate_small(
        "host,reduce",
        &[&pcap[..], &["--pcap-packets", "1000000"]].concat(),
        &dir.path().join("report"),
    );
    // One capture per run, named by the run.
    let read = |name: &str| {
        let file = std::fs::File::open(dir.path().join("caps").join(name)).unwrap();
        let mut reader = PcapReader::new(file).unwrap();
        let mut out = Vec::new();
        while let Some(p) = reader.next_packet() {
            let p = p.unwrap();
            // Ethernet (14), IPv4 (20), UDP (8), then the switchgnn header.
            let packet = Packet::new_checked(&p.data[42..]).unwrap();
            let repr = Repr::parse(&packet).unwrap();
            out.push((p.timestamp, p.data[26..30].to_vec(), repr));
        }
        out
    };
    let reduce = read("run-w4-1MB-reduce-d32.pcap");
    let host = read("run-w4-nomem-host-d32.pcap");
    assert!(!host.is_empty());
    // Simulated time never goes back; the run opens with every worker's join.
    assert!(reduce.windows(2).all(|w| w[0].0 <= w[1].0));
    assert!(reduce[..4]
        .iter()
        .all(|p| p.2.packet_type == PacketType::Join));
    let switch_ip = [10, 255, 255, 254];
    let up_data = reduce
        .iter()
        .filter(|p| p.2.packet_type == PacketType::Data && !p.2.flags.ack)
        .inspect(|p| assert_ne!(p.1, switch_ip, "data comes from a worker"))
        .count();
    let results = reduce
        .iter()
        .filter(|p| p.2.packet_type == PacketType::Result)
        .inspect(|p| assert_eq!(p.1, switch_ip, "results come from the switch"))
        .count();
    // Partial sums go up, one sum per destination comes down: fewer sums than partials.
    assert!(
        up_data > 0 && results > 0 && results < up_data,
        "{up_data} {results}"
    );

    // A bounded capture stops at its limit.
    simulate_small(
        "reduce",
        &[&pcap[..], &["--pcap-packets", "10"]].concat(),
        &dir.path().join("report2"),
    );
    assert_eq!(read("run-w4-1MB-reduce-d32.pcap").len(), 10);
}

/// `simulate --background`: the exchange beside TCP flows, rate control on and off, as a
/// table, JSON and a figure; a bad distribution or `auto` is refused by name.
#[test]
fn simulate_background_studies_the_exchange_beside_tcp_flows() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("contention");
    let text = simulate_small(
        "host,switchgnn",
        &["--background", "hadoop", "--load", "0.4"],
        &out,
    );
    assert!(
        text.contains("| rate control |") && text.contains("2 studies"),
        "{text}"
    );
    let studies: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("contention.json")).unwrap()).unwrap();
    let studies = studies.as_array().unwrap();
    assert_eq!(studies.len(), 2);
    for s in studies {
        assert_eq!(s["sizes"], "hadoop");
        assert_eq!(s["load"], 0.4);
        let settings = s["settings"].as_array().unwrap();
        let names: Vec<&str> = settings
            .iter()
            .map(|w| w["rate_control"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["halve", "proportional", "off"], "{s}");
        for w in settings {
            assert!(w["exchange_ns"].as_u64().unwrap() > 0, "{s}");
            assert!(w["share_bound_ns"].as_u64().unwrap() > 0, "{s}");
            assert_eq!(w["flows"]["flows"], s["flows"], "{s}");
        }
    }
    assert!(std::fs::read_to_string(out.join("contention.md"))
        .unwrap()
        .contains("simulate"));
    assert!(std::fs::read_to_string(out.join("contention.svg"))
        .unwrap()
        .starts_with("<svg"));
    // With --racks, the same study on each leaf-spine fabric instead of the star.
    let on_fabric = dir.path().join("contention-fabric");
    let text = simulate_small(
        "reduce",
        &[
            "--background",
            "hadoop",
            "--load",
            "0.4",
            "--racks",
            "2",
            "--oversubscription",
            "2",
        ],
        &on_fabric,
    );
    assert!(
        text.contains("| 2 racks × 2, 2 spines, 2:1 (two-level) |"),
        "{text}"
    );
    let studies: serde_json::Value =
        serde_json::from_slice(&std::fs::read(on_fabric.join("contention.json")).unwrap()).unwrap();
    let fabric = &studies.as_array().unwrap()[0]["fabric"];
    assert_eq!(fabric["racks"], 2, "{studies}");
    assert_eq!(fabric["two_level"], true, "{studies}");
    for (modes, sizes, says) in [
        ("host", "tiny", "unknown flow sizes `tiny`"),
        ("auto", "hadoop", "leave `auto` and `best-host` out"),
        ("best-host", "hadoop", "leave `auto` and `best-host` out"),
    ] {
        let bad = switchgnn(&[
            "simulate",
            "synthetic:small,scale=0.25",
            "--workers",
            "4",
            "--modes",
            modes,
            "--background",
            sizes,
            "--out",
            dir.path().join("bad").to_str().unwrap(),
        ]);
        let err = String::from_utf8_lossy(&bad.stderr);
        assert!(!bad.status.success() && err.contains(says), "{err}");
    }
}

/// `simulate --racks`: each exchange on the star and on leaf-spine fabrics, as a table, JSON
/// and a figure; racks that do not divide the workers (also for `--background` on fabrics) and
/// a bad ratio are refused by name.
#[test]
fn simulate_racks_studies_the_exchange_on_leaf_spine_fabrics() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("fabric");
    let text = simulate_small(
        "host,reduce",
        &["--racks", "2", "--oversubscription", "1,4"],
        &out,
    );
    assert!(
        text.contains("2 racks × 2, 2 spines, 4:1") && text.contains("2 studies"),
        "{text}"
    );
    let studies: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("fabric.json")).unwrap()).unwrap();
    let studies = studies.as_array().unwrap();
    assert_eq!(studies.len(), 2);
    for s in studies {
        // Two-level aggregation unless --one-level says otherwise.
        assert_eq!(s["two_level"], true, "{s}");
        let fabrics = s["fabrics"].as_array().unwrap();
        assert_eq!(fabrics.len(), 2, "{s}");
        for f in fabrics {
            assert_eq!(f["racks"], 2);
            assert!(f["spine_bytes"].as_u64().unwrap() > 0, "{s}");
        }
    }
    for ext in ["md", "svg", "png"] {
        assert!(out.join(format!("fabric.{ext}")).is_file(), "fabric.{ext}");
    }
    for (extra, says) in [
        (&["--racks", "3"][..], "do not fill 3 racks"),
        (
            &["--racks", "2", "--oversubscription", "0"][..],
            "positive ratio",
        ),
        (
            &["--racks", "2", "--oversubscription", "x"][..],
            "`x` is not a ratio",
        ),
        (
            &["--racks", "3", "--background", "hadoop"][..],
            "do not fill 3 racks",
        ),
        (&["--one-level"][..], "--racks"),
    ] {
        let bad_out = dir.path().join("bad");
        let mut args = vec![
            "simulate",
            "synthetic:small,scale=0.25",
            "--workers",
            "4",
            "--modes",
            "host",
            "--out",
            bad_out.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let bad = switchgnn(&args);
        let err = String::from_utf8_lossy(&bad.stderr);
        assert!(
            !bad.status.success() && err.contains(says),
            "{extra:?}: {err}"
        );
    }
}

/// CPU seconds (user and system) the process `pid` has used so far, from `/proc/<pid>/stat`.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // The fields after the command name (in parentheses, which may hold spaces).
    let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
    // utime and stime are fields 14 and 15 of the whole line: 12 and 13 after the name.
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    // SAFETY: sysconf reads a constant of the system.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    ticks as f64 / per_second as f64
}

/// A switch waiting for workers that have not started sleeps: past twice the peer timeout
/// (when its stall deadline used to stay in the past, and it spun a core on empty receives)
/// it uses less than 5% of a core.
#[test]
fn a_switch_waiting_for_workers_does_not_spin() {
    let dir = tempfile::tempdir().unwrap();
    let job = two_worker_job(
        dir.path(),
        "24",
        "[timeouts]\npeer_ms = 200\njoin_ms = 30000\n",
    );
    let (mut switch, _) = start_switch(dir.path(), job.to_str().unwrap(), &[]);
    // Past two peer timeouts, with a wide margin.
    std::thread::sleep(std::time::Duration::from_millis(1000));
    let before = cpu_seconds(switch.id());
    let wall = std::time::Instant::now();
    std::thread::sleep(std::time::Duration::from_secs(2));
    let used = cpu_seconds(switch.id()) - before;
    let share = used / wall.elapsed().as_secs_f64();
    switch.kill().unwrap();
    switch.wait().unwrap();
    eprintln!(
        "the waiting switch used {used:.2} CPU-seconds in {:.1?}",
        wall.elapsed()
    );
    assert!(
        share < 0.05,
        "the waiting switch used {:.0}% of a core",
        share * 100.0
    );
}
