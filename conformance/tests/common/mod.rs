//! Shared set-up of the exchange tests: graphs, plans, features and the exactness check.

#![allow(dead_code)]

use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use switchgnn_dataplane::engine::Timers;
use switchgnn_dataplane::fixed::Scale;
use switchgnn_dataplane::network::{run_exchange, ExchangeRun, Faults, NetworkConfig, RunSetup};
use switchgnn_dataplane::node::MAX_DATAGRAM_LEN;
use switchgnn_dataplane::node::{Address, Node, Transmit};
use switchgnn_dataplane::plan::ExchangePlan;
use switchgnn_dataplane::reference::encode_matrix;
use switchgnn_dataplane::switch::{Switch, SwitchConfig};
use switchgnn_dataplane::wire::{Packet, Repr};
use switchgnn_dataplane::ExchangeId;
use switchgnn_datasets::{BuildOptions, Dataset, Graph, Split, SplitFractions};
use switchgnn_partition::{Method, MetisOptions, Plan, PlanSpec};
use switchgnn_scheduler::exchange::{remote_sums, ExchangePlans};

/// An Erdős–Rényi-style graph with a few hubs (so some aggregators expect many inputs).
pub(crate) fn random_graph(n: usize, edges: usize, seed: u64) -> Graph {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let hubs = (n / 20).max(1) as u32;
    let list: Vec<(u32, u32)> = (0..edges)
        .map(|i| {
            let u = if i % 3 == 0 {
                rng.random_range(0..hubs)
            } else {
                rng.random_range(0..n as u32)
            };
            (u, rng.random_range(0..n as u32))
        })
        .collect();
    Graph::from_edges(n, &list, BuildOptions::default()).unwrap()
}

pub(crate) fn dataset_of(graph: Graph) -> Dataset {
    let n = graph.num_vertices();
    let split = Split::random(n, SplitFractions::default(), 0).unwrap();
    Dataset::new("test", graph, None, None, split).unwrap()
}

/// A SwitchGNN plan of `workers` workers for one layer of `width`, with `memory` bytes of
/// aggregators.
pub(crate) fn block_plan(
    dataset: &Dataset,
    workers: u32,
    width: usize,
    memory: u64,
    partitioner: Method,
) -> Arc<ExchangePlan> {
    let spec = PlanSpec::new(dataset.name.clone(), workers, vec![width])
        .switch_memory(memory)
        .partitioner(partitioner);
    let plan = Plan::prepare(dataset, &spec, &|_| {}).unwrap();
    Arc::new(ExchangePlan::from_plan(&plan, 0).unwrap())
}

pub(crate) fn metis() -> Method {
    Method::Metis(MetisOptions::default())
}

/// Features uniform in [-1, 1].
pub(crate) fn features(n: usize, width: usize, seed: u64) -> Vec<f32> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..n * width)
        .map(|_| rng.random_range(-1.0..=1.0))
        .collect()
}

/// The no-overflow scale for features bounded by 1 and the graph's largest degree.
pub(crate) fn scale_for(graph: &Graph) -> Scale {
    let most = (0..graph.num_vertices() as u32)
        .map(|v| graph.degree(v))
        .max()
        .unwrap_or(1);
    Scale::for_bound(1.0, most).unwrap()
}

pub(crate) fn setup(
    scale: Scale,
    memory: u64,
    faults: Faults,
    seed: u64,
    backward: bool,
) -> RunSetup {
    let mut network = NetworkConfig::new(faults, seed);
    // Termination is checked by counting events, never by wall time.
    network.max_events = 5_000_000;
    RunSetup {
        exchange: ExchangeId {
            job: 7,
            epoch: 3,
            layer: 0,
            backward,
        },
        scale,
        switch: SwitchConfig {
            aggregators: (memory / switchgnn_dataplane::switch::AGGREGATOR_BYTES) as usize,
            ecn_threshold: 100_000,
            ports: 64,
        },
        network,
        timers: Timers::default(),
        paced: true,
        window: usize::MAX,
        framing: Default::default(),
    }
}

/// Run the exchange and assert every worker's sums equal the direct computation exactly.
pub(crate) fn run_exact(
    graph: &Graph,
    plan: &Arc<ExchangePlan>,
    values: &[f32],
    setup: &RunSetup,
) -> ExchangeRun {
    let run = run_exchange(plan.clone(), values, setup).unwrap_or_else(|e| panic!("{e}"));
    assert_exact(graph, plan, values, setup, &run);
    run
}

/// [`run_exact`] on a two-level fabric of `racks` racks in the switch's place.
pub(crate) fn run_exact_two_level(
    graph: &Graph,
    plan: &Arc<ExchangePlan>,
    values: &[f32],
    setup: &RunSetup,
    racks: u16,
) -> ExchangeRun {
    let kind = switchgnn_dataplane::ExchangeKind::of_mode(plan.mode);
    let (run, _) = switchgnn_dataplane::network::run_exchange_two_level(
        kind,
        plan.clone(),
        values,
        setup,
        racks,
    )
    .unwrap_or_else(|e| panic!("{racks} racks: {e}"));
    assert_exact(graph, plan, values, setup, &run);
    run
}

/// Assert that `run`'s sums equal the direct computation exactly.
pub(crate) fn assert_exact(
    graph: &Graph,
    plan: &Arc<ExchangePlan>,
    values: &[f32],
    setup: &RunSetup,
    run: &ExchangeRun,
) {
    let (encoded, _) = encode_matrix(&setup.scale, values, plan.width);
    let assignment = switchgnn_partition::Assignment::new(
        plan.owner.iter().map(|&w| u32::from(w)).collect(),
        u32::from(plan.workers),
    )
    .unwrap();
    let want = remote_sums(graph, &assignment, plan.width, &encoded);
    for (w, (got, want)) in run.outputs.iter().zip(&want).enumerate() {
        assert_eq!(
            got.vertices, want.vertices,
            "worker {w}: receiving vertices"
        );
        if got.sums != want.sums {
            let bad = got
                .sums
                .iter()
                .zip(&want.sums)
                .position(|(a, b)| a != b)
                .unwrap();
            panic!(
                "worker {w}: vertex {} lane {} is {} but should be {}",
                got.vertices[bad / plan.width],
                bad % plan.width,
                got.sums[bad],
                want.sums[bad]
            );
        }
    }
}

/// Hand `r` with `lanes` to switch `s` on `port` at time 0; everything it sends in return.
pub(crate) fn send(
    s: &mut Switch,
    port: u16,
    r: &Repr,
    lanes: &[i32],
) -> Vec<(Address, Repr, Vec<i32>)> {
    send_from(s, Address::Worker(port), r, lanes)
}

/// [`send`] from any address: a port, or (at a leaf) the uplink from the spine.
pub(crate) fn send_from(
    s: &mut Switch,
    from: Address,
    r: &Repr,
    lanes: &[i32],
) -> Vec<(Address, Repr, Vec<i32>)> {
    s.handle_packet(0, from, &r.to_bytes(lanes));
    let mut out = Vec::new();
    let mut buf = [0u8; MAX_DATAGRAM_LEN];
    while let Some(Transmit { to, len }) = s.poll_transmit(0, &mut buf) {
        let p = Packet::new_checked(&buf[..len]).unwrap();
        out.push((to, Repr::parse(&p).unwrap(), p.payload().collect()));
    }
    out
}
