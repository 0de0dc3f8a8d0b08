//! What the control-plane tests share.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use switchgnn_datasets::{BuildOptions, Dataset, Graph, Split};

/// A random graph of `n` vertices whose first twentieth are hubs (a third of the edges start
/// there), so that some aggregators expect many contributions.
pub(crate) fn synthetic(n: usize, edges: usize, seed: u64) -> Dataset {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let list: Vec<(u32, u32)> = (0..edges)
        .map(|i| {
            let u = if i % 3 == 0 {
                rng.random_range(0..n as u32 / 20)
            } else {
                rng.random_range(0..n as u32)
            };
            (u, rng.random_range(0..n as u32))
        })
        .collect();
    let graph = Graph::from_edges(n, &list, BuildOptions::default()).unwrap();
    let split = Split::random(n, Default::default(), 0).unwrap();
    Dataset::new("synthetic", graph, None, None, split).unwrap()
}
