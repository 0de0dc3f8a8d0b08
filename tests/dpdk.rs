//! The DPDK datapath for real, on one machine: the switch and the workers as separate
//! processes, each with its own EAL (no hugepages, no PCI devices), connected by memif — the
//! switch serves one memif interface per worker. Ethernet / IPv4 / UDP frames, ECN in the IP
//! header, the same switch model and engines as over the kernel's UDP.
//!
//! Run by the README's test command as `cargo test --features dpdk --test dpdk` (a build with
//! Debian's libdpdk-dev). Without the feature only the refusal of a DPDK job is tested; built
//! with the feature but without DPDK found at build time the tests skip with the reason, except
//! under `CI=true`.

mod support;

/// Built without the feature (the README's test command runs these tests again with
/// `--features dpdk`): asking for DPDK is refused with the way to get it.
#[cfg(not(feature = "dpdk"))]
#[test]
fn without_the_feature_dpdk_is_refused_with_the_way_to_get_it() {
    let out = support::switchgnn(&[
        "exchange",
        "synthetic:small,scale=0.25",
        "--workers",
        "2",
        "--transport",
        "dpdk",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("--features dpdk"), "{err}");
}

#[cfg(feature = "dpdk")]
mod with_dpdk {
    use std::net::TcpListener;
    use std::path::Path;
    use std::time::{Duration, Instant};

    use super::support::{
        assert_worker_1_named, losses, spawn, start_switch, switchgnn, wait_for_file,
    };

    /// Whether DPDK can run here; prints why not (and fails under CI, which must run these).
    fn dpdk_here() -> bool {
        if switchgnn_transport::dpdk::is_real() {
            return true;
        }
        let why = "this build found no DPDK (install libdpdk-dev and libclang-dev, rebuild)";
        assert!(std::env::var("CI").as_deref() != Ok("true"), "{why}");
        eprintln!("skipped: {why}");
        false
    }

    fn ok(out: &std::process::Output, what: &str) -> String {
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(
            out.status.success(),
            "{what} failed: {err}{}",
            String::from_utf8_lossy(&out.stdout)
        );
        err
    }

    /// Every exchange kind, exact over memif with no loss and with 2% of the datagrams lost.
    #[test]
    fn every_exchange_kind_is_exact_over_memif_with_and_without_loss() {
        if !dpdk_here() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let summary = dir.path().join("summary.json");
        let kinds = ["switch", "host", "g3", "strawman", "reduce", "auto"];
        // With loss, the switch's model on two cores (aggregators spread by destination).
        for (loss, cores) in [("0", "1"), ("0.02", "2")] {
            let out = switchgnn(&[
                "exchange",
                "synthetic:small,scale=0.25",
                "--workers",
                "3",
                "--feature-dims",
                "40,16",
                "--switch-memory",
                "64KB",
                "--exchange",
                &kinds.join(","),
                "--transport",
                "dpdk",
                "--switch-cores",
                cores,
                "--loss",
                loss,
                "--timeout",
                "120",
                "--json",
                summary.to_str().unwrap(),
            ]);
            ok(&out, &format!("exchange over DPDK at loss {loss}"));
            let modes: serde_json::Value =
                serde_json::from_slice(&std::fs::read(&summary).unwrap()).unwrap();
            let modes = modes.as_array().unwrap();
            assert_eq!(modes.len(), kinds.len());
            for m in modes {
                let name = m["mode"].as_str().unwrap();
                let exchanges = m["exchanges"].as_array().unwrap();
                assert_eq!(exchanges.len(), 4, "{name}");
                for x in exchanges {
                    assert_eq!(x["exact"], true, "{name} loss {loss}: {x}");
                    assert!(x["packets"].as_u64().unwrap() > 0, "{name}: {x}");
                }
                assert_eq!(m["switch"]["counters"]["exchanges_completed"], 4, "{name}");
                let per_core = m["switch"]["passes_per_core"].as_array().unwrap();
                assert_eq!(per_core.len().to_string(), cores, "{name}");
                // Nothing foreign or malformed crossed memif.
                let endpoint = &m["switch"]["endpoint"];
                assert_eq!(endpoint["malformed_frames"], 0, "{name}: {endpoint}");
            }
        }
    }

    /// Jumbo frames over DPDK are refused before anything runs (its packet buffers hold one
    /// 2 KiB frame), with the option to change.
    #[test]
    fn jumbo_frames_over_dpdk_are_refused_with_the_fix() {
        if !dpdk_here() {
            return;
        }
        let out = switchgnn(&[
            "exchange",
            "synthetic:small,scale=0.25",
            "--workers",
            "2",
            "--exchange",
            "host",
            "--transport",
            "dpdk",
            "--mtu",
            "9000",
            "--timeout",
            "60",
        ]);
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("datagrams of 8972 bytes") && err.contains("lower the MTU (--mtu)"),
            "{err}"
        );
    }

    /// A job file for `world` workers over memif in `dir`, with `extra` lines.
    fn memif_job(dir: &Path, mode: &str, world: u16, extra: &str) -> String {
        let job = dir.join("job.toml");
        let socket = dir.join("job.memif");
        std::fs::write(
            &job,
            format!(
                "job = 7\nplan = \"plan\"\nmode = \"{mode}\"\nswitch = \"10.0.0.1:47000\"\n\
                 world = {world}\ntransport = \"dpdk\"\n{extra}\n[dpdk]\n\
                 eal = [\"--no-huge\", \"--no-pci\", \"-m\", \"192\"]\nmemif = \"{}\"\n",
                socket.display()
            ),
        )
        .unwrap();
        job.to_str().unwrap().to_string()
    }

    fn prepare(dir: &Path, data: &str, workers: &str, dims: &str) {
        let plan = dir.join("plan");
        let out = switchgnn(&[
            "prepare",
            data,
            "--workers",
            workers,
            "--feature-dims",
            dims,
            "--out",
            plan.to_str().unwrap(),
        ]);
        ok(&out, "prepare");
    }

    /// A worker process killed mid-job: the switch names it, the other worker is told, nobody
    /// hangs.
    #[test]
    fn a_killed_worker_is_named_by_the_switch() {
        if !dpdk_here() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        prepare(dir.path(), "synthetic:small,scale=0.25", "2", "64,64");
        // A 1 Mbit/s link stretches the exchanges over seconds; silence counts after 1 s.
        let job = memif_job(
            dir.path(),
            "switchgnn",
            2,
            "[timeouts]\npeer_ms = 1000\nresult_us = 1000000\n[link]\ngbps = 0.001",
        );
        let started = Instant::now();
        let (switch, _) = start_switch(dir.path(), &job, &[]);
        let w0 = spawn(&["worker", "--job", &job, "--rank", "0"], &[]);
        let mut w1 = spawn(
            &["worker", "--job", &job, "--rank", "1"],
            &[("RUST_LOG", "info")],
        );
        // Killed once it is a member, inside the stretched first exchanges.
        crate::support::wait_until_joined(&mut w1);
        std::thread::sleep(Duration::from_millis(1000));
        w1.kill().unwrap();
        w1.wait().unwrap();
        // A killed process cannot remove its EAL runtime folder (its prefix has its pid).
        let _ = std::fs::remove_dir_all(format!("/var/run/dpdk/switchgnn-7-1-{}", w1.id()));
        assert_worker_1_named(switch, w0);
        assert!(started.elapsed() < Duration::from_secs(40));
    }

    /// A training job whose switch and workers speak DPDK trains exactly as the same job does
    /// over the kernel's loopback (the all-reduce beside the switch stays on TCP).
    #[test]
    fn a_training_job_over_dpdk_matches_the_loopback_run() {
        if !dpdk_here() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let data = "synthetic:small,scale=0.25";
        prepare(d, data, "2", "16,8");
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let job = memif_job(
            d,
            "switchgnn",
            2,
            &format!("collective = \"127.0.0.1:{port}\""),
        );
        let (switch, _) = start_switch(d, &job, &[]);
        let common = ["--epochs", "6", "--threads", "1", "--print-every", "3"];
        let workers: Vec<_> = (0..2)
            .map(|rank| {
                let out = d.join(format!("out-{rank}"));
                let rank = rank.to_string();
                let mut args = vec![
                    "train",
                    data,
                    "--job",
                    &job,
                    "--rank",
                    &rank,
                    "--out",
                    out.to_str().unwrap(),
                ];
                args.extend(common);
                spawn(&args, &[])
            })
            .collect();
        for (rank, child) in workers.into_iter().enumerate() {
            let out = child.wait_with_output().unwrap();
            let err = ok(&out, &format!("worker {rank}"));
            assert!(err.contains("epoch    6  loss"), "worker {rank}: {err}");
        }
        let err = ok(&switch.wait_with_output().unwrap(), "switch");
        // The gradients crossed memif into the switch's slots, not the tcp service.
        assert!(err.contains("in-switch all-reduce"), "{err}");

        let loopback = super::support::loopback_losses(
            data,
            "2",
            "switch",
            &d.join("plan"),
            &d.join("loopback"),
            &common,
        );
        let over_dpdk = losses(&d.join("out-0").join("log.json"));
        assert_eq!(over_dpdk.len(), 6);
        assert_eq!(over_dpdk, loopback);
    }

    /// Network namespaces and veth pairs for one switch and `world` workers, removed on drop.
    struct Fabric {
        tag: String,
        world: u16,
    }

    impl Fabric {
        fn namespace(&self, who: &str) -> String {
            format!("sg{}{who}", self.tag)
        }

        fn switch_iface(&self, w: u16) -> String {
            format!("sg{}s{w}", self.tag)
        }

        fn worker_iface(&self, w: u16) -> String {
            format!("sg{}w{w}", self.tag)
        }

        /// Build it, or say why not (no `ip`, not root).
        fn build(world: u16) -> Result<Fabric, String> {
            let fabric = Fabric {
                tag: (std::process::id() % 100_000).to_string(),
                world,
            };
            let ip = |args: &[&str]| -> Result<(), String> {
                let out = std::process::Command::new("ip")
                    .args(args)
                    .output()
                    .map_err(|e| format!("cannot run `ip`: {e}"))?;
                if out.status.success() {
                    Ok(())
                } else {
                    Err(format!(
                        "ip {}: {}",
                        args.join(" "),
                        String::from_utf8_lossy(&out.stderr).trim()
                    ))
                }
            };
            let sw = fabric.namespace("sw");
            ip(&["netns", "add", &sw])?;
            for w in 0..world {
                let (ns, s, k) = (
                    fabric.namespace(&format!("w{w}")),
                    fabric.switch_iface(w),
                    fabric.worker_iface(w),
                );
                ip(&["netns", "add", &ns])?;
                ip(&["link", "add", &s, "type", "veth", "peer", "name", &k])?;
                ip(&["link", "set", &s, "netns", &sw])?;
                ip(&["link", "set", &k, "netns", &ns])?;
                ip(&["-n", &sw, "link", "set", &s, "up"])?;
                ip(&["-n", &ns, "link", "set", &k, "up"])?;
            }
            Ok(fabric)
        }

        /// `switchgnn args` inside namespace `who`.
        fn spawn(&self, who: &str, args: &[&str]) -> std::process::Child {
            std::process::Command::new("ip")
                .args(["netns", "exec", &self.namespace(who)])
                .arg(env!("CARGO_BIN_EXE_switchgnn"))
                .args(args)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("ip netns exec starts")
        }
    }

    impl Drop for Fabric {
        fn drop(&mut self) {
            // Deleting a namespace deletes the veth ends in it, and with them their peers.
            let mut names = vec![self.namespace("sw")];
            names.extend((0..self.world).map(|w| self.namespace(&format!("w{w}"))));
            for ns in names {
                let _ = std::process::Command::new("ip")
                    .args(["netns", "del", &ns])
                    .output();
            }
        }
    }

    /// The switch and each worker in a network namespace of its own, joined by veth pairs that
    /// DPDK drives through `net_af_packet`: every exchange kind exact with and without loss.
    #[test]
    fn every_exchange_kind_is_exact_over_af_packet_between_namespaces() {
        if !dpdk_here() {
            return;
        }
        let world = 2;
        let fabric = match Fabric::build(world) {
            Ok(f) => f,
            Err(why) => {
                assert!(
                    std::env::var("CI").as_deref() != Ok("true"),
                    "cannot build the namespaces: {why}"
                );
                eprintln!("skipped: cannot build the namespaces (root needed): {why}");
                return;
            }
        };
        let dir = tempfile::tempdir().unwrap();
        prepare(dir.path(), "synthetic:small,scale=0.25", "2", "40,16");
        for mode in ["switchgnn", "host", "g3", "strawman", "reduce", "auto"] {
            for loss in ["0.0", "0.02"] {
                let job = dir.path().join("job.toml");
                std::fs::write(
                    &job,
                    format!(
                        "job = 9\nplan = \"plan\"\nmode = \"{mode}\"\nswitch = \"10.0.0.1:47000\"\n\
                         world = {world}\ntransport = \"dpdk\"\n[faults]\nloss = {loss}\n[dpdk]\n\
                         eal = [\"--no-huge\", \"--no-pci\", \"-m\", \"192\"]\n\
                         switch_devices = [\"net_af_packet{{worker}},iface={}{{worker}}\"]\n\
                         worker_devices = [\"net_af_packet0,iface={}{{rank}}\"]\n",
                        fabric.switch_iface(0).trim_end_matches('0'),
                        fabric.worker_iface(0).trim_end_matches('0'),
                    ),
                )
                .unwrap();
                let job = job.to_str().unwrap();
                let ready = dir.path().join(format!("{mode}-{loss}.addr"));
                let report = dir.path().join(format!("{mode}-{loss}.json"));
                let switch = fabric.spawn(
                    "sw",
                    &[
                        "switch",
                        "--job",
                        job,
                        "--ready-file",
                        ready.to_str().unwrap(),
                        "--report",
                        report.to_str().unwrap(),
                    ],
                );
                wait_for_file(&ready);
                let workers: Vec<_> = (0..world)
                    .map(|w| {
                        let rank = w.to_string();
                        fabric.spawn(
                            &format!("w{w}"),
                            &["worker", "--job", job, "--rank", &rank, "--epochs", "1"],
                        )
                    })
                    .collect();
                for (w, child) in workers.into_iter().enumerate() {
                    let err = ok(
                        &child.wait_with_output().unwrap(),
                        &format!("{mode} at loss {loss}: worker {w}"),
                    );
                    assert!(
                        err.contains("4 exchanges exact"),
                        "{mode} {loss} worker {w}: {err}"
                    );
                }
                ok(
                    &switch.wait_with_output().unwrap(),
                    &format!("{mode} switch"),
                );
                let report: serde_json::Value =
                    serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
                assert_eq!(
                    report["counters"]["exchanges_completed"], 4,
                    "{mode} {loss}"
                );
                assert_eq!(report["endpoint"]["malformed_frames"], 0, "{mode} {loss}");
            }
        }
    }
}
