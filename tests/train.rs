//! End-to-end runs of `switchgnn train`.

mod support;

use support::{losses, switchgnn, wait_all, wait_job};

fn spawn(args: &[&str]) -> std::process::Child {
    support::spawn(args, &[])
}

#[test]
fn train_writes_the_log_and_the_plot() {
    for workers in ["1", "2"] {
        train_writes_the_log_and_the_plot_on(workers);
    }
}

fn train_writes_the_log_and_the_plot_on(workers: &str) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let args = [
        "train",
        "synthetic:small,scale=0.25,seed=2",
        "--workers",
        workers,
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
    assert_eq!(log["workers"].to_string(), workers);
    if workers == "1" {
        assert!(log["exchange"].is_null());
    } else {
        assert_eq!(log["exchange"], "switchgnn");
        assert!(
            stderr.contains("kB out/in"),
            "traffic in the progress lines: {stderr}"
        );
        assert!(out.join("plan-2").join("manifest.json").exists());
        // The default plan folder follows the model: other widths prepare a new plan there.
        let out_dir = out.to_str().unwrap();
        let again = switchgnn(&[
            "train",
            "synthetic:small,scale=0.25,seed=2",
            "--workers",
            "2",
            "--hidden",
            "4",
            "--epochs",
            "1",
            "--out",
            out_dir,
        ]);
        let said = String::from_utf8_lossy(&again.stdout);
        assert!(
            again.status.success(),
            "{}",
            String::from_utf8_lossy(&again.stderr)
        );
        assert!(said.contains("preparing a new plan"), "{said}");
    }
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

/// `switchgnn prepare` of `data` for `workers` at widths 16 and 8 into `plan`.
fn prepare(data: &str, workers: &str, plan: &std::path::Path) {
    let run = switchgnn(&[
        "prepare",
        data,
        "--workers",
        workers,
        "--feature-dims",
        "16,8",
        "--out",
        plan.to_str().unwrap(),
    ]);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
}

/// Start `train data --job job --rank rank --out out` with `extra` options.
fn train_job_worker(
    data: &str,
    job: &str,
    rank: usize,
    out: &std::path::Path,
    extra: &[&str],
) -> std::process::Child {
    let rank = rank.to_string();
    let mut args = vec![
        "train",
        data,
        "--job",
        job,
        "--rank",
        &rank,
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    spawn(&args)
}

/// A multi-host job started by hand (switch process, one `train --job` process per worker),
/// each worker reading only its shard and the switch only the saved exchange plans, trains
/// exactly as the loopback launcher does with the whole dataset and the same plan.
#[test]
fn a_job_of_separate_processes_trains_like_the_loopback_run() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let data = "synthetic:small,scale=0.25";
    let plan = d.join("plan");
    prepare(data, "4", &plan);
    let shard = switchgnn(&[
        "shard",
        "--plan",
        plan.to_str().unwrap(),
        "--exchange",
        "host",
    ]);
    let said = String::from_utf8_lossy(&shard.stdout);
    assert!(
        shard.status.success() && said.contains("4 shards") && said.contains("host ("),
        "{said}{}",
        String::from_utf8_lossy(&shard.stderr)
    );
    let job = d.join("job.toml");
    std::fs::write(
        &job,
        "job = 5\nplan = \"plan\"\nmode = \"host\"\nswitch = \"127.0.0.1:0\"\nworld = 4\n\
         bind = \"127.0.0.1:0\"\n",
    )
    .unwrap();
    let job = job.to_str().unwrap();
    let ready = d.join("switch.addr");
    let switch = spawn(&[
        "switch",
        "--job",
        job,
        "--ready-file",
        ready.to_str().unwrap(),
    ]);
    let addr = (0..1500)
        .find_map(|_| {
            let text = std::fs::read_to_string(&ready).ok();
            if text.is_none() {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            text
        })
        .map(|t| serde_json::from_str::<String>(&t).unwrap())
        .expect("the switch listens");
    let common = ["--epochs", "8", "--threads", "1", "--print-every", "4"];
    let workers: Vec<_> = (0..4)
        .map(|rank| {
            let out = d.join(format!("out-{rank}"));
            let extra = [&["--switch", addr.as_str()][..], &common[..]].concat();
            train_job_worker(data, job, rank, &out, &extra)
        })
        .collect();
    for (name, err) in wait_job(workers, switch) {
        if name == "switch" {
            // The gradients went through the switch's slots, not the tcp service.
            assert!(err.contains("in-switch all-reduce"), "{err}");
            assert!(!err.contains("all-reduce rounds"), "{err}");
        } else {
            assert!(err.contains("epoch    8  loss"), "{name}: {err}");
            assert!(
                err.contains("reading its shard") && err.contains("its view of the exchange"),
                "{name}: {err}"
            );
        }
    }
    // Rank 0 writes the log; the others only train.
    assert!(d.join("out-0").join("log.json").exists());
    assert!(!d.join("out-1").join("log.json").exists());

    let loopback = support::loopback_losses(data, "4", "host", &plan, &d.join("loopback"), &common);
    let by_hand = losses(&d.join("out-0").join("log.json"));
    assert_eq!(by_hand.len(), 8);
    assert_eq!(by_hand, loopback);

    // A plan prepared for other widths is refused with the widths to use.
    let other = switchgnn(&[
        "train", data, "--job", job, "--rank", "0", "--hidden", "32", "--epochs", "1",
    ]);
    assert!(!other.status.success());
    let err = String::from_utf8_lossy(&other.stderr);
    assert!(err.contains("--feature-dims 32,8"), "{err}");

    // Worker 1 handed worker 0's shard refuses it by name, before joining.
    let shards = plan.join("shards");
    std::fs::copy(
        shards.join("worker-0000.shard"),
        shards.join("worker-0001.shard"),
    )
    .unwrap();
    let wrong = switchgnn(&["train", data, "--job", job, "--rank", "1", "--epochs", "1"]);
    let err = String::from_utf8_lossy(&wrong.stderr);
    assert!(!wrong.status.success(), "{err}");
    assert!(
        err.contains("worker-0001.shard") && err.contains("worker 0's, not worker 1's"),
        "{err}"
    );
    // Shards without the job's exchange plans: the command that saves them is named.
    std::fs::remove_file(shards.join("exchange-host.session")).unwrap();
    std::fs::remove_file(shards.join("exchange-host-worker-0000.session")).unwrap();
    let none = switchgnn(&["train", data, "--job", job, "--rank", "0", "--epochs", "1"]);
    let err = String::from_utf8_lossy(&none.stderr);
    assert!(!none.status.success(), "{err}");
    assert!(err.contains("--exchange host"), "{err}");
}

/// A training job on a two-level fabric (the job file's `[fabric]`): a spine and two leaf
/// switch processes, four `train --job` processes each joining its rack's leaf, the gradients
/// summed in the spine's slots through the leaves. It trains exactly as the loopback launcher
/// does through one switch.
#[test]
fn a_training_job_on_leaf_and_spine_switches_trains_like_one_switch() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let data = "synthetic:small,scale=0.25";
    let plan = d.join("plan");
    prepare(data, "4", &plan);
    let job = d.join("job.toml");
    std::fs::write(
        &job,
        "job = 6\nplan = \"plan\"\nmode = \"reduce\"\nswitch = \"127.0.0.1:0\"\nworld = 4\n\
         bind = \"127.0.0.1:0\"\n[fabric]\nleaves = [\"127.0.0.1:0\", \"127.0.0.1:0\"]\n",
    )
    .unwrap();
    let job = job.to_str().unwrap();
    let start = |name: &str, extra: &[&str]| support::start_switch_as(d, name, job, extra);
    let (spine, spine_addr) = start("spine", &["--tier", "spine"]);
    let leaves: Vec<_> = (0..2)
        .map(|r: usize| {
            let rack = r.to_string();
            let extra = ["--tier", "leaf", "--rack", &rack, "--spine", &spine_addr];
            start(&format!("leaf{r}"), &extra)
        })
        .collect();
    // The workers' job file names the switches where they listen: each worker finds its leaf
    // there, and the all-reduce service beside the spine.
    let workers_job = d.join("workers.toml");
    std::fs::write(
        &workers_job,
        format!(
            "job = 6\nplan = \"plan\"\nmode = \"reduce\"\nswitch = \"{spine_addr}\"\n\
             world = 4\nbind = \"127.0.0.1:0\"\n[fabric]\nleaves = [\"{}\", \"{}\"]\n",
            leaves[0].1, leaves[1].1
        ),
    )
    .unwrap();
    let workers_job = workers_job.to_str().unwrap();
    let common = ["--epochs", "6", "--threads", "1", "--print-every", "3"];
    let workers: Vec<_> = (0..4)
        .map(|rank: usize| {
            let out = d.join(format!("out-{rank}"));
            train_job_worker(data, workers_job, rank, &out, &common)
        })
        .collect();
    let named = workers
        .into_iter()
        .enumerate()
        .map(|(r, c)| (format!("worker {r}"), c))
        .chain(
            leaves
                .into_iter()
                .enumerate()
                .map(|(r, (c, _))| (format!("leaf {r}"), c)),
        )
        .chain([("spine".to_string(), spine)]);
    for (name, err) in wait_all(named) {
        if name == "spine" {
            // The gradients were summed in the spine's slots.
            assert!(
                err.contains("all-reduce slices") && !err.contains(" 0 all-reduce slices"),
                "{err}"
            );
        }
    }
    let loopback =
        support::loopback_losses(data, "4", "reduce", &plan, &d.join("loopback"), &common);
    let two_level = losses(&d.join("out-0").join("log.json"));
    assert_eq!(two_level.len(), 6);
    assert_eq!(two_level, loopback);
}

/// Two training jobs through one switch process at the same time (`switch --also-job`), one
/// with its own all-reduce region, the other with an admission secret and its all-reduce
/// best-effort in the switch's shared pool: each trains exactly as it does alone on the
/// loopback launcher (with a region of its own).
#[test]
fn two_training_jobs_share_one_switch_and_each_trains_as_alone() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // (job id, dataset, exchange, secret?)
    let jobs = [
        (11, "synthetic:small,scale=0.25", "switchgnn", false),
        (12, "synthetic:small,scale=0.2,seed=5", "host", true),
    ];
    std::fs::write(d.join("secret"), "job twelve's secret, long enough\n").unwrap();
    let mut files = Vec::new();
    for (id, data, mode, secret) in jobs {
        let plan = d.join(format!("plan-{id}"));
        prepare(data, "2", &plan);
        let file = d.join(format!("job-{id}.toml"));
        let secret = if secret {
            "secret_file = \"secret\"\n[allreduce]\nbest_effort = true\nslots = 16\n"
        } else {
            ""
        };
        std::fs::write(
            &file,
            format!(
                "job = {id}\nplan = \"plan-{id}\"\nmode = \"{mode}\"\nswitch = \"127.0.0.1:0\"\n\
                 world = 2\nbind = \"127.0.0.1:0\"\n{secret}"
            ),
        )
        .unwrap();
        files.push(file.to_str().unwrap().to_string());
    }
    // A pool of 8 slots for a window of 16: some slices fall back to the switch's host.
    let (switch, addr) = support::start_switch(
        d,
        &files[0],
        &["--also-job", files[1].as_str(), "--allreduce-pool", "8"],
    );
    let common = ["--epochs", "4", "--threads", "1", "--print-every", "4"];
    let mut workers = Vec::new();
    for ((id, data, _, _), file) in jobs.iter().zip(&files) {
        for rank in 0..2 {
            let out = d.join(format!("out-{id}-{rank}"));
            let mut args = vec![
                "train",
                data,
                "--job",
                file,
                "--switch",
                &addr,
                "--out",
                out.to_str().unwrap(),
            ];
            let rank = rank.to_string();
            args.extend(["--rank", &rank]);
            args.extend(common);
            workers.push((format!("job {id} worker {rank}"), spawn(&args)));
        }
    }
    for (name, err) in wait_all(workers.into_iter().chain([("switch".to_string(), switch)])) {
        if name == "switch" {
            assert!(err.contains("also job 12"), "{err}");
            assert!(err.contains("in-switch all-reduce"), "{err}");
            assert!(err.contains("best-effort all-reduce"), "{err}");
        }
    }
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(d.join("switch.json")).unwrap()).unwrap();
    let served: Vec<_> = report["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| {
            (
                j["job"].as_u64().unwrap(),
                j["first_port"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(served, [(11, 0), (12, 2)], "{report}");
    assert_eq!(report["jobs"][1]["control"]["challenges"], 2, "{report}");
    let host = report["counters"]["reduce_host_slices"].as_u64().unwrap();
    assert!(host > 0, "the host finished no slice: {report}");

    // Jobs served together must have their own ids and name the same switch.
    let twice = switchgnn(&["switch", "--job", &files[0], "--also-job", &files[0]]);
    let err = String::from_utf8_lossy(&twice.stderr);
    assert!(
        !twice.status.success() && err.contains("job 11 is given twice"),
        "{err}"
    );
    let elsewhere = d.join("elsewhere.toml");
    std::fs::write(
        &elsewhere,
        std::fs::read_to_string(&files[1])
            .unwrap()
            .replace("127.0.0.1:0\"\nworld", "127.0.0.1:9\"\nworld"),
    )
    .unwrap();
    let other = switchgnn(&[
        "switch",
        "--job",
        &files[0],
        "--also-job",
        elsewhere.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&other.stderr);
    assert!(
        !other.status.success() && err.contains("name the same switch address"),
        "{err}"
    );

    for (id, data, mode, _) in jobs {
        let plan = d.join(format!("plan-{id}"));
        let alone = support::loopback_losses(
            data,
            "2",
            mode,
            &plan,
            &d.join(format!("alone-{id}")),
            &common,
        );
        let together = losses(&d.join(format!("out-{id}-0")).join("log.json"));
        assert_eq!(together.len(), 4);
        assert_eq!(together, alone, "job {id}");
    }
}
