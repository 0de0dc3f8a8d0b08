//! Property tests of block partitioning on random graphs: every cross-worker edge in exactly
//! one block, every block within capacity, and partial sums over blocks plus local neighbours
//! equal the full neighbourhood sum exactly.

use proptest::prelude::*;
use switchgnn_datasets::{BuildOptions, Graph};
use switchgnn_partition::blocks::table_entries;
use switchgnn_partition::{Assignment, BlockMethod, BlockParams, Blocks, Method, MetisOptions};

fn random_graph(n: usize, raw: &[(u32, u32)]) -> Graph {
    let edges: Vec<(u32, u32)> = raw
        .iter()
        .map(|&(u, v)| (u % n as u32, v % n as u32))
        .collect();
    Graph::from_edges(n, &edges, BuildOptions::default()).unwrap()
}

fn params(memory_aggregators: u64, width: usize) -> BlockParams {
    BlockParams {
        switch_memory: memory_aggregators * switchgnn_dataplane::switch::AGGREGATOR_BYTES,
        width,
        fill_target: 0.9,
        metis: MetisOptions::default(),
        method: BlockMethod::Vertices,
        table_entries: None,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn blocks_cover_the_boundary_exactly_and_fit(
        n in 8usize..120,
        raw in proptest::collection::vec((0u32..1000, 0u32..1000), 10..600),
        workers in 2u32..6,
        aggregators in 2u64..80,
        width in 1usize..100,
        use_metis in any::<bool>(),
        by_parts in any::<bool>(),
        seed in 0u64..1000,
        table_limit in proptest::option::of(4u64..60),
    ) {
        let g = random_graph(n, &raw);
        let method = if use_metis { Method::Metis(MetisOptions::default()) } else { Method::Random { seed } };
        let a = Assignment::compute(&g, workers.min(n as u32), &method).unwrap();
        let method = if by_parts { BlockMethod::Parts } else { BlockMethod::Vertices };
        let p = BlockParams { method, table_entries: table_limit, ..params(aggregators, width) };
        let apv = p.aggregators_per_vertex();
        match Blocks::build(&g, &a, &p) {
            Ok(blocks) => {
                prop_assert!(blocks.check(&g, &a).is_ok(), "{:?}", blocks.check(&g, &a));
                for b in &blocks.blocks {
                    prop_assert!(b.vertices().len() as u64 * apv <= aggregators);
                    let entries = table_entries(b.edges.len(), b.vertices().len());
                    prop_assert!(table_limit.is_none_or(|limit| entries <= limit), "{} entries", entries);
                }
                // Integer features; the exchange must reproduce the neighbourhood sums exactly.
                let x: Vec<i64> = (0..n as i64).map(|v| (v * 7919 + seed as i64) % 1013 - 500).collect();
                let mut got = vec![0i64; n];
                for v in 0..n as u32 {
                    for &u in g.neighbors(v) {
                        if a.part(u) == a.part(v) {
                            got[v as usize] += x[u as usize];
                        }
                    }
                }
                for b in &blocks.blocks {
                    for &(u, v) in &b.edges {
                        got[v as usize] += x[u as usize];
                        got[u as usize] += x[v as usize];
                    }
                }
                for v in 0..n as u32 {
                    let direct: i64 = g.neighbors(v).iter().map(|&u| x[u as usize]).sum();
                    prop_assert_eq!(got[v as usize], direct, "vertex {}", v);
                }
            }
            Err(e) => {
                // Only refusal allowed: memory below what a single edge needs.
                prop_assert!(aggregators / apv < 2, "unexpected refusal: {}", e);
            }
        }
    }
}

#[test]
fn one_block_when_everything_fits_and_many_when_not() {
    let raw: Vec<(u32, u32)> = (0..400u32).map(|i| (i * 31 % 97, i * 17 % 89)).collect();
    let g = random_graph(100, &raw);
    let a = Assignment::compute(&g, 4, &Method::Hash).unwrap();
    let roomy = Blocks::build(&g, &a, &params(1000, 32)).unwrap();
    assert_eq!(roomy.blocks.len(), 1);
    assert_eq!(roomy.levels, 1);
    let tight = Blocks::build(&g, &a, &params(20, 32)).unwrap();
    assert!(tight.blocks.len() > 5, "{} blocks", tight.blocks.len());
    tight.check(&g, &a).unwrap();
    let fill = tight.fill();
    assert!(
        fill.mean > 0.5 && fill.mean <= 1.0,
        "mean fill {}",
        fill.mean
    );
    // Wider features need more aggregators per vertex, so more blocks.
    let wide = Blocks::build(&g, &a, &params(20, 128)).unwrap();
    assert!(wide.blocks.len() > tight.blocks.len());
}

#[test]
fn many_small_workers_group_whole_parts() {
    // 600 vertices on 60 workers: every part's boundary (at most 10 vertices) fits half of a
    // 64-destination block, so blocks are built from whole parts in at most two levels.
    let raw: Vec<(u32, u32)> = (0..3000u32)
        .map(|i| (i * 7919 % 600, i * 104_729 % 599))
        .collect();
    let g = random_graph(600, &raw);
    let a = Assignment::compute(&g, 60, &Method::Hash).unwrap();
    let p = BlockParams {
        method: BlockMethod::Parts,
        table_entries: None,
        ..params(64, 32)
    };
    let blocks = Blocks::build(&g, &a, &p).unwrap();
    blocks.check(&g, &a).unwrap();
    assert!(blocks.levels <= 2, "{} levels", blocks.levels);
    assert!(blocks.blocks.len() > 10);
    let fill = blocks.fill();
    assert!(fill.mean > 0.4, "mean fill {}", fill.mean);
}
