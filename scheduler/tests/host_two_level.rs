//! The host two-level exchange's plan: host-only pre-aggregation's partial sums, with a rack's
//! workers feeding a destination in another rack merged into one pair of a proxy among them.
//! What it must keep: every source of every destination exactly once; at most one pair per
//! other rack; the same plan as host-reduce's on one rack; and the proxy role spread over a
//! rack's workers.

use switchgnn_dataplane::framing::copies_per_pair;
use switchgnn_dataplane::plan::{ExchangePlan, Mode};
use switchgnn_dataplane::switch::{spine_traffic, Racks};
use switchgnn_datasets::synthetic::{generate, Preset};
use switchgnn_datasets::{BuildOptions, Graph, NoProgress};
use switchgnn_partition::{Assignment, Method, MetisOptions};
use switchgnn_scheduler::exchange::{host_reduce_plan, host_two_level_plan};

/// Every claim on `graph` under `assignment` in `racks` racks.
fn check(graph: &Graph, assignment: &Assignment, racks: u16) -> (ExchangePlan, ExchangePlan) {
    let workers = assignment.num_parts() as u16;
    let map = Racks::even(workers, racks).unwrap();
    let reduce = host_reduce_plan(graph, assignment, 40).unwrap();
    let two = host_two_level_plan(graph, assignment, 40, &map).unwrap();
    assert_eq!(two.mode, Mode::HostTwoLevel);
    let (r, t) = (&reduce.blocks[0], &two.blocks[0]);
    assert_eq!(r.table.vertices, t.table.vertices);
    assert_eq!(r.table.workers, t.table.workers);
    assert_eq!(r.order, t.order);
    for row in 0..t.table.len() {
        let home = map.rack_of(t.table.workers[row] as u16);
        let range = |b: &switchgnn_dataplane::plan::PlanBlock| {
            let mut all: Vec<u32> = b
                .table
                .pairs_of(row)
                .flat_map(|p| b.partials.of(p).iter().copied())
                .collect();
            all.sort_unstable();
            all
        };
        // The same sources, each once.
        assert_eq!(range(r), range(t), "row {row}");
        assert_eq!(
            t.table.expected[row] as usize,
            t.table.row(row).len(),
            "row {row}"
        );
        let mut other_racks = Vec::new();
        for p in t.table.pairs_of(row) {
            let proxy = t.table.slots[p] as u16;
            let rack = map.rack_of(proxy);
            let owners: Vec<u16> = t
                .partials
                .of(p)
                .iter()
                .map(|&u| two.owner[u as usize])
                .collect();
            // A pair's sources are its rack's, and its worker feeds it itself.
            assert!(owners.iter().all(|&w| map.rack_of(w) == rack), "row {row}");
            assert!(
                owners.contains(&proxy),
                "row {row}: the proxy holds a share"
            );
            if rack == home {
                assert!(
                    owners.iter().all(|&w| w == proxy),
                    "row {row}: own rack direct"
                );
            } else {
                other_racks.push(rack);
            }
        }
        let n = other_racks.len();
        other_racks.sort_unstable();
        other_racks.dedup();
        assert_eq!(n, other_racks.len(), "row {row}: one pair per other rack");
    }
    (reduce, two)
}

#[test]
fn a_rack_sends_one_partial_per_destination_across() {
    // Vertex 0 (worker 0, rack 0) neighbours vertices 1 and 2 (workers 2 and 3, rack 1) and 3
    // (worker 1, rack 0). Rack 1's two partials for vertex 0 become one, from its proxy.
    let g = Graph::from_edges(4, &[(0, 1), (0, 2), (0, 3)], BuildOptions::default()).unwrap();
    let a = Assignment::new(vec![0, 2, 3, 1], 4).unwrap();
    let (reduce, two) = check(&g, &a, 2);
    let n = 4;
    let (r, t) = (
        copies_per_pair(&reduce, &reduce.blocks[0]),
        copies_per_pair(&two, &two.blocks[0]),
    );
    // host-reduce: 2 → 0, 3 → 0, 1 → 0 for vertex 0; 0 → 1, 0 → 2, 0 → 3 for the others.
    assert_eq!(r.iter().sum::<u64>(), 6);
    // Across racks: one partial from rack 1 to worker 0, and one share inside rack 1.
    let row = two.blocks[0].row_of(0).unwrap();
    let proxies: Vec<u32> = two.blocks[0].table.row(row).to_vec();
    assert_eq!(proxies.len(), 2, "worker 1 direct, rack 1's proxy");
    let proxy = proxies[1] as usize;
    let peer = 5 - proxy;
    assert_eq!(t[proxy * n], 1);
    assert_eq!(t[peer * n], 0);
    assert_eq!(t[peer * n + proxy], 1, "the share to the proxy");
    let racks = Racks::even(4, 2).unwrap();
    let cross = |p: &ExchangePlan| spine_traffic(p, &racks, 0, Default::default()).packets;
    assert!(cross(&two) < cross(&reduce));
}

#[test]
fn on_one_rack_it_is_host_reduce_and_on_more_it_crosses_less() {
    let small = generate(&Preset::Small.spec(0.5, 3).unwrap(), &NoProgress).unwrap();
    let g = &small.graph;
    for workers in [4u16, 8] {
        let a = Assignment::compute(
            g,
            u32::from(workers),
            &Method::Metis(MetisOptions::default()),
        )
        .unwrap();
        let (reduce, one) = check(g, &a, 1);
        assert_eq!(reduce.blocks, one.blocks, "{workers} workers, one rack");
        for racks in [2u16, 4].into_iter().filter(|&r| r < workers) {
            let (reduce, two) = check(g, &a, racks);
            let map = Racks::even(workers, racks).unwrap();
            let cross = |p: &ExchangePlan| spine_traffic(p, &map, 0, Default::default()).bytes;
            assert!(
                cross(&two) < cross(&reduce),
                "{workers} workers, {racks} racks: {} against {}",
                cross(&two),
                cross(&reduce)
            );
            // The proxy role is spread: every worker of a rack with several feeders proxies
            // for some destination in another rack.
            let b = &two.blocks[0];
            let mut proxies = vec![0u32; usize::from(workers)];
            for (p, &w) in b.table.slots.iter().enumerate() {
                if b.partials
                    .of(p)
                    .iter()
                    .any(|&u| u32::from(two.owner[u as usize]) != w)
                {
                    proxies[w as usize] += 1;
                }
            }
            eprintln!("{workers} workers, {racks} racks: sums proxied per worker {proxies:?}");
            assert!(proxies.iter().all(|&k| k > 0), "{proxies:?}");
        }
    }
}
