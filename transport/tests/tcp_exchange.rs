//! The host exchange over TCP between worker threads: the same fixed-point sums as the host
//! engine through the switch, over connections made once and reused; peers of another job or
//! without the secret are refused by name.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use rand::{Rng, SeedableRng};
use switchgnn_dataplane::control::Secret;
use switchgnn_dataplane::engine::LocalFeatures;
use switchgnn_dataplane::fixed::Scale;
use switchgnn_dataplane::plan::ExchangePlan;
use switchgnn_datasets::{LoadOptions, NoProgress, Source};
use switchgnn_partition::{Plan, PlanSpec};
use switchgnn_transport::loopback::run_single_exchange;
use switchgnn_transport::server::ServerConfig;
use switchgnn_transport::tcp_exchange::{Listening, MeshConfig, TcpMesh, TcpRoutes};
use switchgnn_transport::{ExchangeKind, Session};

const LOCALHOST: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

fn config(rank: u16, world: u16, checksum: u64, secret: Option<Secret>) -> MeshConfig {
    MeshConfig {
        job: 1,
        rank,
        world,
        checksum,
        secret,
        join: Duration::from_secs(2),
        idle: Duration::from_secs(20),
        line_rate: None,
    }
}

/// Every worker's connections, made by threads that were handed each other's addresses.
fn meshes(configs: Vec<MeshConfig>) -> Vec<Result<TcpMesh, String>> {
    let listening: Vec<Listening> = configs
        .into_iter()
        .map(|c| Listening::bind(LOCALHOST, c).unwrap())
        .collect();
    let addrs: Vec<SocketAddr> = listening.iter().map(|l| l.local_addr().unwrap()).collect();
    thread::scope(|s| {
        let threads: Vec<_> = listening
            .into_iter()
            .map(|l| {
                let addrs = &addrs;
                s.spawn(move || l.connect(addrs).map_err(|e| e.to_string()))
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    })
}

#[test]
fn tcp_sums_are_the_host_engines_bit_for_bit_and_connections_are_reused() {
    let source: Source = "synthetic:small,scale=0.25".parse().unwrap();
    let dataset = source.load(&LoadOptions::default(), &NoProgress).unwrap();
    let workers = 4u16;
    let spec = PlanSpec::new(dataset.name.clone(), u32::from(workers), vec![70, 16]);
    let prepared = Plan::prepare(&dataset, &spec, &|_| {}).unwrap();
    let session = Session::new(&prepared, &dataset.graph, ExchangeKind::Host).unwrap();
    let secret = Secret::new(b"a secret of sixteen bytes".to_vec()).unwrap();
    let mut meshes: Vec<TcpMesh> = meshes(
        (0..workers)
            .map(|r| config(r, workers, session.checksum, Some(secret.clone())))
            .collect(),
    )
    .into_iter()
    .map(Result::unwrap)
    .collect();
    let before: Vec<_> = meshes.iter().map(TcpMesh::totals).collect();
    // Per worker, the stream bytes its exchanges sent and received.
    let mut moved = vec![(0u64, 0u64); usize::from(workers)];
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
    // Both layers, twice each over the same connections; 70 lanes: a short second chunk.
    for (seq, layer) in [0usize, 1, 1, 0].into_iter().enumerate() {
        let plan: &Arc<ExchangePlan> = &session.layers[layer];
        let n = dataset.num_vertices();
        let features: Vec<f32> = (0..n * plan.width)
            .map(|_| rng.random_range(-1.0..=1.0))
            .collect();
        let scale = Scale::for_bound(1.0, plan.most_contributions()).unwrap();
        let server = ServerConfig::loopback(1, workers, 1 << 16);
        let (_, engines) = run_single_exchange(
            ExchangeKind::Host,
            plan.clone(),
            &features,
            scale,
            server,
            false,
        )
        .unwrap();
        let got: Vec<_> = thread::scope(|s| {
            let threads: Vec<_> = meshes
                .iter_mut()
                .map(|mesh| {
                    let (features, scale) = (&features, &scale);
                    s.spawn(move || {
                        let rank = mesh.rank();
                        let routes = TcpRoutes::new(plan, rank).unwrap();
                        let (vertices, values) = plan.local_rows(rank, features);
                        let local = LocalFeatures {
                            vertices: &vertices,
                            width: plan.width,
                            values: &values,
                        };
                        let (output, stats) =
                            mesh.exchange(&routes, seq as u32, scale, local).unwrap();
                        assert!(stats.bytes_sent > stats.payload_sent);
                        (output, (stats.bytes_sent, stats.bytes_received))
                    })
                })
                .collect();
            threads.into_iter().map(|t| t.join().unwrap()).collect()
        });
        for (rank, ((tcp, bytes), engine)) in got.iter().zip(&engines).enumerate() {
            moved[rank].0 += bytes.0;
            moved[rank].1 += bytes.1;
            assert!(!tcp.vertices.is_empty());
            assert_eq!(tcp, engine, "layer {layer}, worker {rank}");
        }
    }
    // Every byte sent over the job's connections was received, and the totals are the
    // handshakes' and the exchanges' bytes: no exchange opened connections of its own.
    let sent: u64 = moved.iter().map(|m| m.0).sum();
    assert_eq!(sent, moved.iter().map(|m| m.1).sum::<u64>());
    for ((mesh, before), moved) in meshes.iter().zip(&before).zip(&moved) {
        let t = mesh.totals();
        assert_eq!(t.connections, u64::from(workers) - 1);
        assert_eq!(t.bytes_sent, before.bytes_sent + moved.0);
        assert_eq!(t.bytes_received, before.bytes_received + moved.1);
    }
}

#[test]
fn peers_of_another_plan_or_without_the_secret_are_refused_by_name() {
    let secret = Secret::new(b"a secret of sixteen bytes".to_vec()).unwrap();
    // Worker 0 runs other plans: worker 1 refuses it, and says why.
    let got = meshes(vec![config(0, 2, 7, None), config(1, 2, 8, None)]);
    let err = got[0].as_ref().unwrap_err();
    assert!(
        err.contains("worker 1 refused worker 0") && err.contains("other exchange plans"),
        "{err}"
    );
    let err = got[1].as_ref().unwrap_err();
    assert!(err.contains("workers [0] did not connect"), "{err}");
    // Worker 0 lacks the job's secret.
    let got = meshes(vec![config(0, 2, 7, None), config(1, 2, 7, Some(secret))]);
    let err = got[0].as_ref().unwrap_err();
    assert!(err.contains("admission proof does not verify"), "{err}");
}
