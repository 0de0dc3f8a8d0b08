//! The switch process and its workers over real UDP sockets on loopback, in one test process
//! (threads): exactness in every mode with and without injected faults, the handshake's
//! refusals, a worker dying mid-layer, and a switch restarted between layers.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use switchgnn_chip::{block_floors, Chip};
use switchgnn_dataplane::control::SwitchFailure;
use switchgnn_dataplane::wire::FRAME_OVERHEAD;
use switchgnn_datasets::{Dataset, LoadOptions, NoProgress, Source};
use switchgnn_partition::{Plan, PlanSpec};
use switchgnn_transport::runner::{run_worker, RunError, RunOptions, WorkerReport};
use switchgnn_transport::server::{ServerConfig, ServerError, ServerReport, SwitchServer};
use switchgnn_transport::ShimConfig;
use switchgnn_transport::WorkerError;
use switchgnn_transport::{ExchangeKind, Link, Session, Timeouts, WorkerClient, WorkerConfig};

fn dataset() -> Dataset {
    let source: Source = "synthetic:small,scale=0.25".parse().unwrap();
    source.load(&LoadOptions::default(), &NoProgress).unwrap()
}

/// A plan for `workers` with a tight switch memory so that layers take several blocks.
fn plan(dataset: &Dataset, workers: u32, dims: Vec<usize>, memory: u64) -> Plan {
    let spec = PlanSpec::new(dataset.name.clone(), workers, dims).switch_memory(memory);
    Plan::prepare(dataset, &spec, &|_| {}).unwrap()
}

fn timeouts() -> Timeouts {
    Timeouts {
        join_ms: 10_000,
        peer_ms: 2_000,
        ..Timeouts::default()
    }
}

fn server_config(world: u16, memory: u64, faults: ShimConfig) -> ServerConfig {
    ServerConfig {
        timeouts: timeouts(),
        faults,
        ..ServerConfig::loopback(
            1,
            world,
            (memory / switchgnn_dataplane::switch::AGGREGATOR_BYTES) as usize,
        )
    }
}

fn worker_config(
    session: &Session,
    rank: u16,
    switch: SocketAddr,
    faults: ShimConfig,
) -> WorkerConfig {
    WorkerConfig {
        job: 1,
        rank,
        world: session.workers(),
        mode: session.mode,
        plan_checksum: session.checksum,
        switch,
        bind: SocketAddr::from(([127, 0, 0, 1], 0)),
        timeouts: timeouts(),
        link: Link::default(),
        faults: ShimConfig {
            seed: faults.seed + u64::from(rank) + 1,
            ..faults
        },
        transport: Default::default(),
        secret: None,
    }
}

fn options(rank: u16) -> RunOptions {
    RunOptions {
        job: 1,
        rank,
        epochs: 1,
        line_rate: Link::default().rate(),
        window: Link::default().window,
        timers: timeouts().protocol(),
        framing: Default::default(),
        compute: std::time::Duration::ZERO,
        chip: None,
    }
}

/// Start the switch and every worker; return the switch's report and each worker's result.
fn run_job(
    dataset: &Arc<Dataset>,
    session: &Arc<Session>,
    memory: u64,
    faults: ShimConfig,
) -> (ServerReport, Vec<Result<WorkerReport, RunError>>) {
    run_job_on(dataset, session, memory, faults, None)
}

/// [`run_job`] with workers that take their blocks' floors from `chip`.
fn run_job_on(
    dataset: &Arc<Dataset>,
    session: &Arc<Session>,
    memory: u64,
    faults: ShimConfig,
    chip: Option<Chip>,
) -> (ServerReport, Vec<Result<WorkerReport, RunError>>) {
    let world = session.workers();
    let mut server =
        SwitchServer::bind(server_config(world, memory, faults), session.clone()).unwrap();
    let addr = server.local_addr().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let server = thread::spawn(move || server.run(&stop, None));
    let workers: Vec<_> = (0..world)
        .map(|rank| {
            let (dataset, session) = (dataset.clone(), session.clone());
            thread::spawn(move || {
                let client = WorkerClient::connect(worker_config(&session, rank, addr, faults))?;
                let opts = RunOptions {
                    chip,
                    ..options(rank)
                };
                run_worker(client, &session, &dataset, opts, &|_| {})
            })
        })
        .collect();
    let results: Vec<_> = workers.into_iter().map(|w| w.join().unwrap()).collect();
    let report = server
        .join()
        .unwrap()
        .unwrap_or_else(|e| panic!("switch: {e}"));
    (report, results)
}

fn assert_exact(
    results: Vec<Result<WorkerReport, RunError>>,
    exchanges: usize,
) -> Vec<WorkerReport> {
    results
        .into_iter()
        .map(|r| {
            let r = r.unwrap_or_else(|e| panic!("worker: {e}"));
            assert_eq!(r.exchanges.len(), exchanges);
            for x in &r.exchanges {
                assert_eq!(
                    x.mismatched_rows, 0,
                    "worker {} exchange {} differs from the direct computation",
                    r.rank, x.seq
                );
            }
            r
        })
        .collect()
}

#[test]
fn every_mode_is_exact_over_udp_with_and_without_faults() {
    let dataset = Arc::new(dataset());
    let memory = 64 * 1024;
    let p = plan(&dataset, 4, vec![40, 16], memory);
    let lossy = ShimConfig {
        loss: 0.02,
        duplicate: 0.01,
        reorder: 0.02,
        reorder_delay_us: 2_000,
        seed: 9,
    };
    for mode in ExchangeKind::ALL {
        let session = Arc::new(Session::new(&p, &dataset.graph, mode).unwrap());
        for faults in [ShimConfig::default(), lossy] {
            let (report, results) = run_job(&dataset, &session, memory, faults);
            let workers = assert_exact(results, 4);
            // Width 40 is not the dataset's feature width (128): every exchange sends seeded
            // stand-ins rather than the features.
            assert!(workers[0].exchanges.iter().all(|x| !x.dataset_values));
            assert_eq!(report.counters.exchanges_completed, 4, "{mode:?}");
            assert_eq!(report.jobs[0].peers.len(), 4);
            if faults.loss > 0.0 {
                let lost: u64 = workers.iter().map(|w| w.wire.endpoint.shim.lost).sum();
                let resent: u64 = workers
                    .iter()
                    .flat_map(|w| &w.exchanges)
                    .map(|x| x.engine.retransmits + x.engine.fetches_sent)
                    .sum();
                assert!(
                    lost > 0 && resent > 0,
                    "{mode:?}: lost {lost}, recovered {resent}"
                );
            } else {
                // Without faults the only drops are copies of spurious retransmissions (a
                // busy 2-core machine can delay an ack past the RTO): duplicates, or stale
                // once their block has ended.
                use switchgnn_dataplane::switch::DropReason;
                let k = &report.counters;
                let benign = k.dropped(DropReason::Duplicate) + k.dropped(DropReason::Stale);
                let resent: u64 = workers
                    .iter()
                    .flat_map(|w| &w.exchanges)
                    .map(|x| x.engine.retransmits + x.engine.fetch_replies)
                    .sum();
                assert_eq!(k.total_drops(), benign, "{mode:?}: {:?}", k.drops());
                assert!(
                    benign <= resent,
                    "{mode:?}: {benign} drops, {resent} resent"
                );
            }
            // What each worker counted towards the switch is what the switch counted from it.
            for w in &workers {
                let seen = &report.jobs[0].peers[usize::from(w.rank)].traffic;
                if faults.loss == 0.0 {
                    assert_eq!(seen.packets_received, w.wire.to_switch.packets_sent);
                } else {
                    assert!(
                        seen.packets_received
                            <= w.wire.to_switch.packets_sent + w.wire.endpoint.shim.duplicated
                    );
                }
            }
        }
    }
}

/// Workers told that the switch is a `tofino1-32` wait out its least time for each block before
/// they fetch (a real floor for this plan), and every kind stays exact, also under loss.
#[test]
fn workers_on_a_named_chip_wait_out_its_floors_and_stay_exact() {
    let dataset = Arc::new(dataset());
    let memory = 64 * 1024;
    let p = plan(&dataset, 4, vec![40, 16], memory);
    let chip = Chip::preset("tofino1-32").unwrap();
    let lossy = ShimConfig {
        loss: 0.02,
        seed: 11,
        ..ShimConfig::default()
    };
    for mode in [ExchangeKind::Switchgnn, ExchangeKind::Reduce] {
        let session = Arc::new(Session::new(&p, &dataset.graph, mode).unwrap());
        let floors = block_floors(&chip, &session.layers[0], FRAME_OVERHEAD, None);
        assert!(floors.iter().all(|&f| f > 0), "{mode:?}: {floors:?}");
        for faults in [ShimConfig::default(), lossy] {
            let (report, results) = run_job_on(&dataset, &session, memory, faults, Some(chip));
            assert_exact(results, 4);
            assert_eq!(report.counters.exchanges_completed, 4, "{mode:?}");
        }
    }
}

#[test]
fn dataset_features_go_through_the_first_layer() {
    let dataset = Arc::new(dataset());
    let memory = 1 << 20;
    let width = dataset.features.as_ref().unwrap().cols();
    let p = plan(&dataset, 2, vec![width], memory);
    let session = Arc::new(Session::new(&p, &dataset.graph, ExchangeKind::Switchgnn).unwrap());
    let (_, results) = run_job(&dataset, &session, memory, ShimConfig::default());
    let workers = assert_exact(results, 2);
    assert!(workers[0].exchanges[0].dataset_values);
    assert!(!workers[0].exchanges[1].dataset_values);
}

#[test]
fn mismatched_workers_are_refused_with_a_reason() {
    let dataset = dataset();
    let p = plan(&dataset, 2, vec![16], 1 << 20);
    let session = Arc::new(Session::new(&p, &dataset.graph, ExchangeKind::Switchgnn).unwrap());
    let mut server = SwitchServer::bind(
        ServerConfig {
            timeouts: Timeouts {
                join_ms: 1_000,
                ..timeouts()
            },
            ..server_config(2, 1 << 20, ShimConfig::default())
        },
        session.clone(),
    )
    .unwrap();
    let addr = server.local_addr().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let server = thread::spawn(move || server.run(&stop, None));

    let mut wrong_plan = worker_config(&session, 0, addr, ShimConfig::default());
    wrong_plan.plan_checksum ^= 1;
    let err = WorkerClient::connect(wrong_plan).unwrap_err().to_string();
    assert!(err.contains("plan checksum"), "{err}");
    let mut wrong_mode = worker_config(&session, 0, addr, ShimConfig::default());
    wrong_mode.mode = ExchangeKind::Host;
    let err = WorkerClient::connect(wrong_mode).unwrap_err().to_string();
    assert!(err.contains("exchange mode is host"), "{err}");
    let mut wrong_rank = worker_config(&session, 0, addr, ShimConfig::default());
    wrong_rank.rank = 5;
    let err = WorkerClient::connect(wrong_rank).unwrap_err().to_string();
    assert!(err.contains("rank 5"), "{err}");

    // Only rank 0 joins: the switch gives up at its join timeout and names rank 1.
    let _alone =
        WorkerClient::connect(worker_config(&session, 0, addr, ShimConfig::default())).unwrap();
    match server.join().unwrap() {
        Err(e @ ServerError::Failed(SwitchFailure::JoinTimeout { .. })) => {
            let text = e.to_string();
            assert!(
                text.contains("[1]") && text.contains("0 at 127.0.0.1"),
                "{text}"
            );
        }
        other => panic!("expected a join timeout, got {other:?}"),
    }
}

#[test]
fn a_worker_without_a_switch_gives_up_and_says_where_it_looked() {
    // A bound socket that never answers.
    let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = silent.local_addr().unwrap();
    let dataset = dataset();
    let p = plan(&dataset, 2, vec![16], 1 << 20);
    let session = Session::new(&p, &dataset.graph, ExchangeKind::Host).unwrap();
    let mut cfg = worker_config(&session, 0, addr, ShimConfig::default());
    cfg.timeouts.join_ms = 300;
    let started = Instant::now();
    let err = WorkerClient::connect(cfg).unwrap_err();
    assert!(matches!(err, WorkerError::NoSwitch { .. }));
    assert!(err.to_string().contains(&addr.to_string()));
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[test]
fn a_worker_dying_mid_layer_is_named_and_nobody_hangs() {
    let dataset = Arc::new(dataset());
    let memory = 64 * 1024;
    let p = plan(&dataset, 4, vec![64], memory);
    let session = Arc::new(Session::new(&p, &dataset.graph, ExchangeKind::Switchgnn).unwrap());
    let mut server = SwitchServer::bind(
        server_config(4, memory, ShimConfig::default()),
        session.clone(),
    )
    .unwrap();
    let addr = server.local_addr().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let server = thread::spawn(move || server.run(&stop, None));
    // A slow link (2 Mbit/s) keeps the layer running long enough to kill a worker inside it.
    let slow = Link {
        gbps: 0.002,
        ..Link::default()
    };
    let workers: Vec<_> = (0..4u16)
        .map(|rank| {
            let (dataset, session) = (dataset.clone(), session.clone());
            thread::spawn(move || {
                let mut cfg = worker_config(&session, rank, addr, ShimConfig::default());
                cfg.link = slow;
                let mut client = WorkerClient::connect(cfg)?;
                if rank == 2 {
                    let cancel = Arc::new(AtomicBool::new(false));
                    client.set_cancel(cancel.clone());
                    let c = cancel.clone();
                    thread::spawn(move || {
                        thread::sleep(Duration::from_millis(300));
                        c.store(true, Ordering::Relaxed);
                    });
                }
                let opts = RunOptions {
                    line_rate: slow.rate(),
                    ..options(rank)
                };
                run_worker(client, &session, &dataset, opts, &|_| {})
            })
        })
        .collect();
    let results: Vec<_> = workers.into_iter().map(|w| w.join().unwrap()).collect();
    let outcome = server.join().unwrap();
    let elapsed = started.elapsed();
    // Worker 2 was cancelled inside its first layer, not after finishing it.
    assert!(
        matches!(results[2], Err(RunError::Worker(WorkerError::Cancelled))),
        "{:?}",
        results[2].as_ref().err()
    );
    // Its socket closed with it, and the kernel refused the switch's next datagram to it: the
    // switch names it at once, not after the 2 s peer timeout.
    match outcome {
        Err(e @ ServerError::Failed(SwitchFailure::WorkerGone { rank: 2, .. })) => {
            let text = e.to_string();
            assert!(text.contains("layer 0 forward"), "{text}");
            assert!(text.contains("its port is closed"), "{text}");
        }
        other => panic!("expected worker 2 gone, got {other:?}"),
    }
    for rank in [0, 1, 3] {
        match &results[rank] {
            Err(RunError::Worker(WorkerError::Aborted(reason))) => {
                assert!(reason.contains("worker 2"), "{reason}")
            }
            other => panic!("worker {rank}: expected an abort naming worker 2, got {other:?}"),
        }
    }
    // Cancelled 0.3 s after joining; everything over before the 2 s peer timeout would have
    // named it.
    assert!(elapsed < Duration::from_secs(2), "{elapsed:?}");
}

#[test]
fn workers_rejoin_a_switch_restarted_between_layers() {
    let dataset = Arc::new(dataset());
    let memory = 64 * 1024;
    let p = plan(&dataset, 3, vec![40, 16], memory);
    let session = Arc::new(Session::new(&p, &dataset.graph, ExchangeKind::Switchgnn).unwrap());
    let first = SwitchServer::bind(
        ServerConfig {
            stop_after_exchanges: Some(2),
            overload: Default::default(),
            ..server_config(3, memory, ShimConfig::default())
        },
        session.clone(),
    )
    .unwrap();
    let addr = first.local_addr().unwrap();
    let s = session.clone();
    let switch = thread::spawn(move || {
        let stop = AtomicBool::new(false);
        let mut first = first;
        let one = first.run(&stop, None).unwrap();
        drop(first);
        // The replacement comes up on the same address a little later.
        thread::sleep(Duration::from_millis(200));
        let mut second = SwitchServer::bind(
            ServerConfig {
                listen: addr,
                ..server_config(3, memory, ShimConfig::default())
            },
            s,
        )
        .unwrap();
        let two = second.run(&stop, None).unwrap();
        (one, two)
    });
    let workers: Vec<_> = (0..3u16)
        .map(|rank| {
            let (dataset, session) = (dataset.clone(), session.clone());
            thread::spawn(move || {
                let client = WorkerClient::connect(worker_config(
                    &session,
                    rank,
                    addr,
                    ShimConfig::default(),
                ))?;
                run_worker(client, &session, &dataset, options(rank), &|_| {})
            })
        })
        .collect();
    let results: Vec<_> = workers.into_iter().map(|w| w.join().unwrap()).collect();
    let (one, two) = switch.join().unwrap();
    let workers = assert_exact(results, 4);
    assert_eq!(one.counters.exchanges_completed, 2);
    assert_eq!(two.counters.exchanges_completed, 2);
    assert!(workers.iter().all(|w| w.wire.rejoins >= 1));
}

/// A worker that computes for three peer timeouts between two exchanges is alive (its
/// heartbeats say so): nobody gives up on it, and the exchanges stay exact.
#[test]
fn a_long_computation_between_exchanges_is_not_a_lost_worker() {
    let dataset = Arc::new(dataset());
    let memory = 1 << 20;
    let p = plan(&dataset, 3, vec![16], memory);
    let session = Arc::new(Session::new(&p, &dataset.graph, ExchangeKind::Switchgnn).unwrap());
    let short = Timeouts {
        peer_ms: 300,
        ..timeouts()
    };
    let mut server = SwitchServer::bind(
        ServerConfig {
            timeouts: short,
            ..server_config(3, memory, ShimConfig::default())
        },
        session.clone(),
    )
    .unwrap();
    let addr = server.local_addr().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let server = thread::spawn(move || server.run(&stop, None));
    let workers: Vec<_> = (0..3u16)
        .map(|rank| {
            let (dataset, session) = (dataset.clone(), session.clone());
            thread::spawn(move || {
                let mut cfg = worker_config(&session, rank, addr, ShimConfig::default());
                cfg.timeouts = short;
                let client = WorkerClient::connect(cfg)?;
                let opts = RunOptions {
                    // Rank 1 computes for 3 peer timeouts between the forward and the
                    // backward exchange; the others wait for it at the barrier.
                    compute: if rank == 1 {
                        3 * short.peer()
                    } else {
                        Duration::ZERO
                    },
                    ..options(rank)
                };
                run_worker(client, &session, &dataset, opts, &|_| {})
            })
        })
        .collect();
    let results: Vec<_> = workers.into_iter().map(|w| w.join().unwrap()).collect();
    server
        .join()
        .unwrap()
        .unwrap_or_else(|e| panic!("switch: {e}"));
    assert_exact(results, 2);
}
