//! The host hybrid moves, per ordered worker pair, the fewer rows of the host exchange's raw
//! copies and host-only pre-aggregation's partial sums: never more than either pure kind, pair
//! by pair, and so never a larger load on any host.

use switchgnn_chip::{Bound, Chip, HostCost, Load};
use switchgnn_dataplane::framing::copies_per_pair;
use switchgnn_dataplane::plan::{ExchangePlan, Mode};
use switchgnn_dataplane::wire::FRAME_OVERHEAD;
use switchgnn_datasets::synthetic::{generate, Preset};
use switchgnn_datasets::testdata::shared_dataset;
use switchgnn_datasets::{load_path, BuildOptions, Graph, LoadOptions, NoProgress};
use switchgnn_partition::{Assignment, Method, MetisOptions};
use switchgnn_scheduler::exchange::{
    host_hybrid_plan, host_pair_rows, host_reduce_plan, ExchangePlans,
};
use switchgnn_scheduler::OrderKind;

/// Rows per ordered pair of a one-block plan the switch only forwards.
fn rows(plan: &ExchangePlan) -> Vec<u64> {
    assert_eq!(plan.blocks.len(), 1, "{}: one block", plan.mode.name());
    copies_per_pair(plan, &plan.blocks[0])
}

/// Every per-pair and per-host claim on `graph` under `assignment`; returns the total rows of
/// the host exchange, host-only pre-aggregation and the host hybrid, and the pairs that go raw
/// and go as partial sums in the hybrid.
fn check(graph: &Graph, assignment: &Assignment, width: usize) -> ([u64; 3], usize, usize) {
    let n = assignment.num_parts() as usize;
    let host =
        ExchangePlan::whole_graph(graph, assignment, width, Mode::Host, OrderKind::Random, 0)
            .unwrap();
    let partial = host_reduce_plan(graph, assignment, width).unwrap();
    let hybrid = host_hybrid_plan(graph, assignment, width).unwrap();
    assert_eq!(hybrid.mode, Mode::HostHybrid);
    let (a, b, h) = (rows(&host), rows(&partial), rows(&hybrid));
    let counted = host_pair_rows(graph, assignment);
    let (mut raw_pairs, mut partial_pairs) = (0, 0);
    for p in 0..n * n {
        let (from, to) = (p / n, p % n);
        assert_eq!(
            counted[p],
            (a[p], b[p]),
            "{from} → {to}: the counts of each way"
        );
        // On a symmetric graph one way's partial sums are the other way's raw copies.
        assert_eq!(b[p], a[to * n + from], "{from} → {to}");
        assert_eq!(h[p], a[p].min(b[p]), "{from} → {to}: the fewer rows");
        if h[p] > 0 {
            if a[p] <= b[p] {
                raw_pairs += 1;
            } else {
                partial_pairs += 1;
            }
        }
    }
    // The plan says the same: pair by pair, its raw copies are the multicast senders' and its
    // partial sums the table's (destination, worker) pairs, never both on one pair.
    let block = &hybrid.blocks[0];
    let (t, m) = (&block.table, &block.multicast);
    let mut raw_rows = vec![0u64; n * n];
    for i in 0..m.len() {
        let from = usize::from(hybrid.owner[m.vertices[i] as usize]);
        let mut to: Vec<usize> = m
            .rows_of(i)
            .iter()
            .map(|&r| t.workers[r as usize] as usize)
            .collect();
        to.sort_unstable();
        to.dedup();
        for o in to {
            raw_rows[from * n + o] += 1;
        }
    }
    for p in 0..n * n {
        let expect_raw = h[p] > 0 && a[p] <= b[p];
        assert_eq!(raw_rows[p], if expect_raw { a[p] } else { 0 }, "pair {p}");
    }
    // No more bytes nor packets on any host either way, so a bound no higher on any chip.
    let cost = HostCost {
        delays: switchgnn_chip::Delays::NONE,
        link_gbps: 100.0,
        per_packet_ns: 20.0,
        frame_overhead: FRAME_OVERHEAD,
        framing: Default::default(),
    };
    let loads = [&host, &partial, &hybrid].map(|p| Load::for_cost(p, &cost));
    for other in &loads[..2] {
        for (x, y) in [
            (&loads[2].sent_bytes, &other.sent_bytes),
            (&loads[2].received_bytes, &other.received_bytes),
            (&loads[2].sent_packets, &other.sent_packets),
            (&loads[2].received_packets, &other.received_packets),
        ] {
            assert!(x.iter().zip(y).all(|(x, y)| x <= y), "{x:?} against {y:?}");
        }
        for preset in ["tofino1-32", "tofino2"] {
            let chip = Chip::preset(preset).unwrap();
            let (mine, theirs) = (
                Bound::of(&chip, &loads[2], &cost),
                Bound::of(&chip, other, &cost),
            );
            assert!(mine.seconds <= theirs.seconds, "{preset}");
        }
    }
    let total = |x: &[u64]| x.iter().sum::<u64>();
    ([total(&a), total(&b), total(&h)], raw_pairs, partial_pairs)
}

#[test]
fn a_hub_goes_raw_and_its_leaves_come_back_as_one_partial_sum() {
    // Vertex 0 on worker 0 neighbours vertices 1, 2 and 3 on worker 1. Worker 0 → 1: one raw
    // copy (vertex 0) against three partial sums; worker 1 → 0: three raw copies against one
    // partial sum (for vertex 0).
    let g = Graph::from_edges(4, &[(0, 1), (0, 2), (0, 3)], BuildOptions::default()).unwrap();
    let a = Assignment::new(vec![0, 1, 1, 1], 2).unwrap();
    let (totals, raw, partial) = check(&g, &a, 72);
    assert_eq!(totals, [4, 4, 2]);
    assert_eq!((raw, partial), (1, 1));
}

#[test]
fn never_more_rows_than_either_pure_kind_on_the_test_graphs() {
    let small = generate(&Preset::Small.spec(0.5, 3).unwrap(), &NoProgress).unwrap();
    let mut graphs = vec![("synthetic small", small.graph)];
    if let Some(path) = shared_dataset("cora.npz") {
        graphs.push((
            "cora",
            load_path(&path, &LoadOptions::default()).unwrap().graph,
        ));
    }
    for (name, g) in &graphs {
        for workers in [2, 4, 8] {
            let metis = Method::Metis(MetisOptions::default());
            for (how, method) in [("metis", metis), ("random", Method::Random { seed: 5 })] {
                let a = Assignment::compute(g, workers, &method).unwrap();
                let ([host, reduce, hybrid], raw, partial) = check(g, &a, 40);
                eprintln!(
                    "{name}, {workers} workers ({how}): rows host {host}, host-reduce {reduce}, \
                     host-hybrid {hybrid}; {raw} pairs raw, {partial} partial"
                );
                assert!(hybrid <= host.min(reduce));
            }
        }
    }
}
