//! Two-level aggregation on a leaf-spine fabric in memory: beyond exactness (the suite), the
//! leaves really aggregate — the spine takes one partial per rack and destination, and the
//! in-network kinds move fewer bytes between racks than the host exchange.

mod common;

use common::{dataset_of, random_graph};
use switchgnn_conformance::Fixture;
use switchgnn_dataplane::engine::Timers;
use switchgnn_dataplane::fault::Faults;
use switchgnn_dataplane::leafspine::LeafSpine;
use switchgnn_dataplane::network::{run_exchange_two_level, ExchangeRun, NetworkConfig, RunSetup};
use switchgnn_dataplane::reference::encode_matrix;
use switchgnn_dataplane::switch::SwitchConfig;
use switchgnn_dataplane::wire::PacketType;
use switchgnn_dataplane::{ExchangeId, ExchangeKind};
use switchgnn_scheduler::exchange::remote_sums;
use switchgnn_transport::loopback::run_single_exchange_two_level;
use switchgnn_transport::{ServerConfig, Timeouts};

/// 400 vertices on 8 workers (four racks of two), width 24, 32 KiB of aggregators.
fn fixture() -> Fixture {
    Fixture::new(&dataset_of(random_graph(400, 2400, 5)), 8, 24, 32 << 10)
}

fn setup(f: &Fixture, faults: Faults, seed: u64) -> RunSetup {
    let most = (0..f.graph.num_vertices() as u32)
        .map(|v| f.graph.degree(v))
        .max()
        .unwrap();
    RunSetup {
        exchange: ExchangeId {
            job: 1,
            epoch: 0,
            layer: 0,
            backward: false,
        },
        scale: switchgnn_dataplane::fixed::Scale::for_bound(1.0, most).unwrap(),
        switch: SwitchConfig {
            aggregators: f.aggregators,
            ecn_threshold: 100_000,
            ports: 8,
        },
        network: NetworkConfig::new(faults, seed),
        timers: Timers::default(),
        paced: true,
        window: 64,
        framing: Default::default(),
    }
}

/// One exchange of `kind` on four racks of two, its sums checked against the direct ones.
fn run_exact(f: &Fixture, kind: ExchangeKind, s: &RunSetup) -> (ExchangeRun, LeafSpine) {
    let plan = f.plan(kind);
    let (run, fabric) =
        run_exchange_two_level(kind, plan.clone(), &f.features, s, 4).expect("a run");
    let (encoded, _) = encode_matrix(&s.scale, &f.features, plan.width);
    let want = remote_sums(&f.graph, &f.assignment, plan.width, &encoded);
    for (got, want) in run.outputs.iter().zip(&want) {
        assert_eq!(got.sums, want.sums, "{kind}: sums differ");
    }
    (run, fabric)
}

#[test]
fn leaves_aggregate_and_the_spine_finishes() {
    let f = fixture();
    let s = setup(&f, Faults::none(), 1);
    let mut cross = Vec::new();
    for kind in [
        ExchangeKind::Host,
        ExchangeKind::Switchgnn,
        ExchangeKind::Reduce,
        ExchangeKind::Hybrid,
    ] {
        let (_, fabric) = run_exact(&f, kind, &s);
        let spine = fabric.spine().counters();
        if kind.in_network() {
            // Every data packet the spine sees is a leaf's partial sum, and it finishes sums.
            assert!(spine.received(PacketType::Data) > 0, "{kind}: no partial");
            assert!(spine.aggregations > 0, "{kind}: the spine finished nothing");
            assert_eq!(spine.total_drops(), 0, "{kind}: {:?}", spine.drops());
            // Each (destination, chunk) the spine finished got at most one partial per rack.
            assert!(spine.received(PacketType::Data) <= 4 * spine.aggregations);
            for r in 0..4 {
                let leaf = fabric.leaf(r).counters();
                assert!(leaf.aggregations > 0, "{kind}: leaf {r} aggregated nothing");
                assert_eq!(
                    leaf.total_drops(),
                    0,
                    "{kind}: leaf {r}: {:?}",
                    leaf.drops()
                );
            }
        } else {
            assert_eq!(spine.received(PacketType::Data), 0);
        }
        // What the planning side counts is what crossed.
        let predicted = switchgnn_dataplane::switch::spine_traffic(
            f.plan(kind),
            fabric.racks(),
            0,
            Default::default(),
        );
        assert_eq!(fabric.carried(), predicted, "{kind}");
        eprintln!(
            "{kind}: {} bytes between racks, spine {} partials in, {} sums out",
            fabric.cross_rack_bytes(),
            spine.received(PacketType::Data),
            spine.sent(PacketType::Result),
        );
        cross.push((kind, fabric.cross_rack_bytes()));
    }
    // The leaves' partial sums cross between racks in place of the host exchange's copies.
    // (SwitchGNN's leaf partials go one 64-lane chunk a packet: against the host exchange
    // packed to the MTU they carry more bytes, 349,568 against 309,648 here.)
    let host = cross[0].1;
    for &(kind, bytes) in cross[1..]
        .iter()
        .filter(|(k, _)| *k != ExchangeKind::Switchgnn)
    {
        assert!(
            bytes < host,
            "{kind} moves {bytes} bytes between racks, the host exchange {host}"
        );
    }
}

#[test]
fn a_lost_partial_is_recovered_by_the_destination() {
    // Loss on every link, the leaf-spine ones included: partials and results are lost, and
    // the destinations fetch what they miss.
    let f = fixture();
    for kind in [ExchangeKind::Switchgnn, ExchangeKind::Reduce] {
        let (run, fabric) = run_exact(&f, kind, &setup(&f, Faults::lossy(0.05), 7));
        assert!(fabric.faults().lost > 0, "no packet lost between racks");
        let fetched: u64 = run.engines.iter().map(|e| e.fetches_sent).sum();
        assert!(fetched > 0, "{kind}: nothing was fetched");
    }
}

#[test]
fn the_host_two_level_exchange_crosses_the_spine_less_than_host_reduce() {
    // The fixture's host two-level plan is made for racks of two, the fabric's: a destination
    // fed by both workers of another rack takes one partial from that rack, not two.
    let f = fixture();
    let s = setup(&f, Faults::none(), 1);
    let mut cross = Vec::new();
    for kind in [ExchangeKind::HostReduce, ExchangeKind::HostTwoLevel] {
        let (_, fabric) = run_exact(&f, kind, &s);
        // What the planning side counts (shares to proxies included) is what crossed.
        let predicted = switchgnn_dataplane::switch::spine_traffic(
            f.plan(kind),
            fabric.racks(),
            0,
            Default::default(),
        );
        assert_eq!(fabric.carried(), predicted, "{kind}");
        assert_eq!(fabric.spine().counters().received(PacketType::Data), 0);
        eprintln!("{kind}: {} bytes between racks", fabric.cross_rack_bytes());
        cross.push(fabric.cross_rack_bytes());
    }
    assert!(
        cross[1] < cross[0],
        "host-two-level moves {} bytes between racks, host-reduce {}",
        cross[1],
        cross[0]
    );
}

#[test]
fn the_host_two_level_exchange_is_exact_under_loss() {
    // Shares to proxies, the proxies' rack sums and their acks are lost too.
    let f = fixture();
    let kind = ExchangeKind::HostTwoLevel;
    let (run, fabric) = run_exact(&f, kind, &setup(&f, Faults::lossy(0.05), 7));
    assert!(fabric.faults().lost > 0, "no packet lost between racks");
    let resent: u64 = run
        .engines
        .iter()
        .map(|e| e.retransmits + e.fetches_sent)
        .sum();
    assert!(resent > 0, "{kind}: nothing was resent or fetched");
}

/// A switch configuration on loopback for the fixture's 8 workers.
fn udp_server(f: &Fixture) -> ServerConfig {
    ServerConfig {
        timeouts: Timeouts::loopback(),
        ..ServerConfig::loopback(1, 8, f.aggregators)
    }
}

/// One exchange of `kind` over UDP through four leaf processes and a spine (the fixture's racks
/// of two), its sums checked against the direct ones; the spine's and the leaves' reports.
fn exact_over_udp_leaves(
    f: &Fixture,
    kind: ExchangeKind,
) -> (
    switchgnn_transport::ServerReport,
    Vec<switchgnn_transport::ServerReport>,
) {
    let plan = f.plan(kind);
    let scale = setup(f, Faults::none(), 1).scale;
    let (spine, leaves, outputs) = run_single_exchange_two_level(
        kind,
        plan.clone(),
        &f.features,
        scale,
        udp_server(f),
        false,
        4,
    )
    .unwrap_or_else(|e| panic!("{kind}: {e}"));
    let (encoded, _) = encode_matrix(&scale, &f.features, plan.width);
    let want = remote_sums(&f.graph, &f.assignment, plan.width, &encoded);
    for (got, want) in outputs.iter().zip(&want) {
        assert_eq!(got.sums, want.sums, "{kind}: sums differ");
    }
    (spine, leaves)
}

#[test]
fn over_udp_leaf_processes_aggregate_and_the_spine_finishes() {
    let f = fixture();
    for kind in [ExchangeKind::Switchgnn, ExchangeKind::Reduce] {
        let (spine, leaves) = exact_over_udp_leaves(&f, kind);
        // The spine's peers are the four leaves; it takes partial sums and finishes sums.
        assert_eq!(spine.jobs[0].peers.len(), 4);
        assert!(spine.counters.received(PacketType::Data) > 0, "{kind}");
        assert!(spine.counters.aggregations > 0, "{kind}");
        assert_eq!(spine.counters.exchanges_completed, 1);
        for (r, leaf) in leaves.iter().enumerate() {
            // Each leaf served its rack's two workers and aggregated for them.
            let ranks: Vec<u16> = leaf.jobs[0].peers.iter().map(|p| p.rank).collect();
            assert_eq!(ranks, vec![2 * r as u16, 2 * r as u16 + 1], "{kind}");
            assert!(leaf.counters.aggregations > 0, "{kind}: leaf {r}");
        }
    }
}

#[test]
fn over_udp_the_host_two_level_exchange_is_exact() {
    // Four leaf processes and a spine (the fixture's racks of two): the leaves only forward
    // the shares and the proxies' sums, and the sums are the direct ones.
    let f = fixture();
    let kind = ExchangeKind::HostTwoLevel;
    let (spine, leaves) = exact_over_udp_leaves(&f, kind);
    assert_eq!(spine.counters.exchanges_completed, 1);
    assert_eq!(
        spine.counters.aggregations, 0,
        "{kind}: nothing to aggregate"
    );
    for leaf in &leaves {
        assert_eq!(leaf.counters.aggregations, 0, "{kind}");
    }
}

#[test]
fn a_worker_at_another_racks_leaf_is_refused_by_name() {
    use std::sync::Arc;
    use switchgnn_dataplane::switch::Racks;
    use switchgnn_transport::server::ProcessTier;
    use switchgnn_transport::{Link, Session, SwitchServer, WorkerClient, WorkerConfig};
    let f = fixture();
    let plan = f.plan(ExchangeKind::Reduce);
    let session = Arc::new(Session::from_layers(
        ExchangeKind::Reduce,
        vec![plan.clone()],
    ));
    let racks = Arc::new(Racks::even(8, 4).unwrap());
    // Leaf 0 of a spine that is not there: admission is the leaf's own.
    let mut leaf = SwitchServer::bind_tier(
        udp_server(&f),
        session.clone(),
        ProcessTier::Leaf {
            rack: 0,
            racks,
            spine: "127.0.0.1:9".parse().unwrap(),
        },
    )
    .unwrap();
    let addr = leaf.local_addr().unwrap();
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        let stop = &stop;
        let running = s.spawn(move || leaf.run(stop, None));
        let worker = WorkerConfig {
            job: 1,
            rank: 5,
            world: 8,
            mode: session.mode,
            plan_checksum: session.checksum,
            switch: addr,
            bind: "127.0.0.1:0".parse().unwrap(),
            timeouts: Timeouts::loopback(),
            link: Link::default(),
            faults: Default::default(),
            transport: Default::default(),
            secret: None,
        };
        let Err(err) = WorkerClient::connect(worker) else {
            panic!("worker 5 admitted by rack 0's leaf")
        };
        let err = err.to_string();
        assert!(err.contains("serves ranks [0, 1]"), "{err}");
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        running.join().unwrap().ok();
    });
}
