//! METIS keeps its random generator in process-wide state: partitions computed on several
//! threads at once must still be the ones a seed gives alone.

use switchgnn_datasets::synthetic::{generate, Preset};
use switchgnn_datasets::NoProgress;
use switchgnn_partition::{Assignment, Method, MetisOptions};

#[test]
fn concurrent_metis_partitions_are_reproducible() {
    let d = generate(&Preset::Small.spec(0.25, 3).unwrap(), &NoProgress).unwrap();
    let alone = Assignment::compute(&d.graph, 8, &Method::Metis(MetisOptions::default())).unwrap();
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                s.spawn(|| {
                    Assignment::compute(&d.graph, 8, &Method::Metis(MetisOptions::default()))
                        .unwrap()
                })
            })
            .collect();
        for h in handles {
            assert_eq!(h.join().unwrap().parts(), alone.parts());
        }
    });
}
