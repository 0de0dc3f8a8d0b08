//! Boundary and traffic figures on Cora and Amazon-Computers, checked against an independent
//! brute-force count.

use std::collections::HashSet;

use switchgnn_datasets::testdata::shared_dataset;
use switchgnn_datasets::{load_path, Dataset, LoadOptions};
use switchgnn_partition::traffic::{aggregators_per_vertex, AGGREGATOR_BYTES};
use switchgnn_partition::{Assignment, Boundary, Method, MetisOptions, Traffic};

fn load(file: &str) -> Option<Dataset> {
    let path = shared_dataset(file)?;
    Some(load_path(&path, &LoadOptions::default()).unwrap())
}

/// Every figure recomputed from plain edge iteration and hash sets.
fn brute_force_check(d: &Dataset, a: &Assignment, width: usize) {
    let b = Boundary::analyze(&d.graph, a);
    let t = Traffic::estimate(&b, width);
    let owner = |v: u32| a.part(v);
    // (vertex, remote worker) pairs: one host-exchange copy each.
    let mut copies: HashSet<(u32, u32)> = HashSet::new();
    let mut cross = 0u64;
    for v in 0..d.num_vertices() as u32 {
        for &u in d.graph.neighbors(v) {
            if owner(u) != owner(v) {
                copies.insert((v, owner(u)));
                if v < u {
                    cross += 1;
                }
            }
        }
    }
    let boundary: HashSet<u32> = copies.iter().map(|&(v, _)| v).collect();
    assert_eq!(b.cross_edges, cross);
    assert_eq!(b.total_fanout, copies.len() as u64);
    assert_eq!(b.boundary_vertices, boundary.len() as u64);
    // Each copy crosses its sender's uplink and its receiver's downlink.
    assert_eq!(t.host_bytes, 2 * copies.len() as u64 * 4 * width as u64);
    assert_eq!(
        t.ideal_bytes(),
        2 * boundary.len() as u64 * 4 * width as u64
    );
    assert_eq!(
        t.ideal_aggregator_bytes,
        boundary.len() as u64 * aggregators_per_vertex(width) * AGGREGATOR_BYTES
    );
    for w in 0..a.num_parts() {
        let wb = &b.workers[w as usize];
        let mine = (0..d.num_vertices() as u32)
            .filter(|&v| owner(v) == w)
            .count() as u64;
        let mine_boundary = boundary.iter().filter(|&&v| owner(v) == w).count() as u64;
        let receives = copies.iter().filter(|&&(_, to)| to == w).count() as u64;
        assert_eq!(
            (wb.vertices, wb.boundary, wb.inner),
            (mine, mine_boundary, mine - mine_boundary)
        );
        assert_eq!(wb.remote_neighbors, receives);
    }
    assert!(t.ideal_bytes() <= t.host_bytes);
}

#[test]
fn cora_boundary_and_traffic() {
    let Some(d) = load("cora.npz") else { return };
    for workers in [2, 4, 8] {
        let metis = Assignment::compute(&d.graph, workers, &Method::Metis(MetisOptions::default()))
            .unwrap();
        brute_force_check(&d, &metis, 1433);
        let random = Assignment::compute(&d.graph, workers, &Method::Random { seed: 1 }).unwrap();
        brute_force_check(&d, &random, 16);
        // METIS cuts far fewer edges than a random assignment.
        let cut = |a: &Assignment| Boundary::analyze(&d.graph, a).cross_edges;
        assert!(
            cut(&metis) * 3 < cut(&random),
            "{} vs {}",
            cut(&metis),
            cut(&random)
        );
        assert!(metis.imbalance() <= 1.1, "imbalance {}", metis.imbalance());
    }
}

#[test]
fn amazon_computers_boundary_and_traffic() {
    let Some(d) = load("amazon-computers.npz") else {
        return;
    };
    for workers in [4, 8] {
        let a = Assignment::compute(&d.graph, workers, &Method::Metis(MetisOptions::default()))
            .unwrap();
        brute_force_check(&d, &a, 767);
    }
    let h = Assignment::compute(&d.graph, 8, &Method::Hash).unwrap();
    brute_force_check(&d, &h, 128);
}
