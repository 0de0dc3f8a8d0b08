//! On skewed real graphs, priority BFS keeps the switch's backlog lower than a random order.

use switchgnn_datasets::testdata::shared_dataset;
use switchgnn_datasets::{load_path, LoadOptions};
use switchgnn_scheduler::{evaluate, order, Adjacency, OrderKind};

#[test]
fn priority_bfs_queues_less_than_random_on_skewed_graphs() {
    for file in [
        "yandex/squirrel.npz",
        "yandex/tolokers.npz",
        "amazon-computers.npz",
    ] {
        let Some(path) = shared_dataset(file) else {
            continue;
        };
        let d = load_path(&path, &LoadOptions::default()).unwrap();
        let adj = Adjacency::of_graph(&d.graph);
        for k in [1u64, 8] {
            let report = |kind| evaluate(adj, &order(adj, kind, 7), k);
            let pbfs = report(OrderKind::PriorityBfs);
            let random = report(OrderKind::Random);
            let degree = report(OrderKind::Degree);
            let bfs = report(OrderKind::Bfs);
            eprintln!(
                "{file} k={k}: max queue pbfs {} random {} bfs {} degree {}; z pbfs {} random {}",
                pbfs.max_queue,
                random.max_queue,
                bfs.max_queue,
                degree.max_queue,
                pbfs.completion,
                random.completion
            );
            assert!(
                pbfs.max_queue < random.max_queue,
                "{file} k={k}: priority BFS {} vs random {}",
                pbfs.max_queue,
                random.max_queue
            );
            assert!(pbfs.completion <= random.completion, "{file} k={k}");
        }
    }
}
