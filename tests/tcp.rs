//! The TCP baseline (`--exchange tcp`): the host exchange over TCP between the workers, exact
//! in `switchgnn exchange` beside the host exchange through the switch, and training as the
//! host exchange does, in one process or as separate processes from a job file.

mod support;

use support::{loopback_losses, losses, spawn, start_switch, switchgnn, wait_job};

const DATA: &str = "synthetic:small,scale=0.25";

#[test]
fn exchange_over_tcp_is_exact_and_reports_like_the_other_kinds() {
    let dir = tempfile::tempdir().unwrap();
    let summary = dir.path().join("summary.json");
    let run = switchgnn(&[
        "exchange",
        DATA,
        "--workers",
        "3",
        "--feature-dims",
        "70,16",
        "--exchange",
        "host,tcp",
        "--json",
        summary.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(stdout.contains("tcp exchange:"), "{stdout}");
    assert!(
        stdout.contains("host vs tcp (the kernel's transport)"),
        "{stdout}"
    );
    let modes: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&summary).unwrap()).unwrap();
    let modes = modes.as_array().unwrap();
    let names: Vec<&str> = modes.iter().map(|m| m["mode"].as_str().unwrap()).collect();
    assert_eq!(names, ["host", "tcp"]);
    let (host, tcp) = (&modes[0]["exchanges"], &modes[1]["exchanges"]);
    assert_eq!(tcp.as_array().unwrap().len(), 4);
    for (h, t) in host.as_array().unwrap().iter().zip(tcp.as_array().unwrap()) {
        assert_eq!(t["exact"], true, "{t}");
        // The same copies: the host exchange's traffic model, which TCP moves exactly once
        // (the host exchange's own payload adds whatever it resent: on a busy machine a
        // lossless run can still time out and resend or fetch).
        assert_eq!(t["model"], h["model"], "{t} vs {h}");
        assert_eq!(t["payload"], t["model"], "{t}");
        assert!(h["payload"].as_u64() >= h["model"].as_u64(), "{h}");
        assert!(t["seconds"].as_f64().unwrap() > 0.0, "{t}");
        assert!(t["packets"].as_u64().unwrap() > 0, "{t}");
        assert!(t["bytes"].as_u64() > t["payload"].as_u64(), "{t}");
    }
    // Nothing went through the switch's data path.
    let counters = &modes[1]["switch"]["counters"];
    assert_eq!(counters["exchanges_completed"], 0, "{counters}");
    assert_eq!(modes[0]["switch"]["counters"]["exchanges_completed"], 4);
}

#[test]
fn tcp_is_refused_where_it_cannot_run_and_listed_where_unknown() {
    let run = switchgnn(&["exchange", DATA, "--exchange", "tcp", "--transport", "dpdk"]);
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(!run.status.success());
    assert!(
        err.contains("--exchange tcp runs over the kernel's TCP"),
        "{err}"
    );
    let run = switchgnn(&["exchange", DATA, "--exchange", "host,tcp", "--loss", "0.01"]);
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(!run.status.success());
    assert!(err.contains("run tcp without --loss"), "{err}");
    let run = switchgnn(&["exchange", DATA, "--exchange", "tpc"]);
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(!run.status.success());
    assert!(
        err.contains("unknown exchange `tpc`") && err.contains("tcp"),
        "{err}"
    );
}

/// Training over TCP sums exactly what the host exchange sums: the same losses, epoch by
/// epoch, on one machine and as separate processes from a job file.
#[test]
fn training_over_tcp_matches_the_host_exchange() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let plan = d.join("plan");
    let prepared = switchgnn(&[
        "prepare",
        DATA,
        "--workers",
        "2",
        "--feature-dims",
        "16,8",
        "--out",
        plan.to_str().unwrap(),
    ]);
    assert!(prepared.status.success());
    let common = ["--epochs", "3", "--threads", "1", "--print-every", "1"];
    let host = loopback_losses(DATA, "2", "host", &plan, &d.join("host"), &common);
    let tcp = loopback_losses(DATA, "2", "tcp", &plan, &d.join("tcp"), &common);
    assert_eq!(host.len(), 3);
    assert_eq!(tcp, host);
    let log: serde_json::Value =
        serde_json::from_slice(&std::fs::read(d.join("tcp").join("log.json")).unwrap()).unwrap();
    assert_eq!(log["exchange"], "tcp");

    // The same job as processes: the switch, and a `train --job` per worker.
    let job = d.join("job.toml");
    std::fs::write(
        &job,
        "job = 4\nplan = \"plan\"\nmode = \"host\"\nexchange_via = \"tcp\"\n\
         switch = \"127.0.0.1:0\"\nworld = 2\nbind = \"127.0.0.1:0\"\n",
    )
    .unwrap();
    let job = job.to_str().unwrap();
    let (switch, addr) = start_switch(d, job, &[]);
    let workers: Vec<_> = (0..2)
        .map(|rank| {
            let (rank, out) = (rank.to_string(), d.join(format!("out-{rank}")));
            let mut args = vec![
                "train",
                DATA,
                "--job",
                job,
                "--rank",
                &rank,
                "--switch",
                &addr,
                "--out",
                out.to_str().unwrap(),
            ];
            args.extend_from_slice(&common);
            spawn(&args, &[])
        })
        .collect();
    wait_job(workers, switch);
    assert_eq!(losses(&d.join("out-0").join("log.json")), host);
    let log: serde_json::Value =
        serde_json::from_slice(&std::fs::read(d.join("out-0").join("log.json")).unwrap()).unwrap();
    assert_eq!(log["exchange"], "tcp");
}
