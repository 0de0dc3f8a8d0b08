//! Every loader on the real datasets in `../shared/datasets`, checked against the counts its
//! README gives. Skips (and says so) when the folder is absent; never under `CI=true`.

use switchgnn_datasets::testdata::shared_dataset;
use switchgnn_datasets::{cache, load_path, Dataset, Format, LoadOptions, SplitSource, Stats};

struct Expect {
    file: &'static str,
    format: Format,
    vertices: usize,
    edges: u64,
    features: usize,
    classes: u32,
}

fn load(file: &str) -> Option<Dataset> {
    let path = shared_dataset(file)?;
    Some(load_path(&path, &LoadOptions::default()).unwrap_or_else(|e| panic!("{e}")))
}

fn check(e: &Expect) -> Option<Dataset> {
    let path = shared_dataset(e.file)?;
    assert_eq!(
        switchgnn_datasets::detect_format(&path).unwrap(),
        e.format,
        "{}",
        e.file
    );
    let d = load(e.file)?;
    assert_eq!(d.num_vertices(), e.vertices, "{} vertices", e.file);
    assert_eq!(d.graph.num_edges(), e.edges, "{} edges", e.file);
    assert_eq!(d.graph.num_self_loops(), 0, "{} self-loops", e.file);
    assert_eq!(
        d.features.as_ref().unwrap().cols(),
        e.features,
        "{} features",
        e.file
    );
    assert_eq!(
        d.labels.as_ref().unwrap().num_classes(),
        e.classes,
        "{} classes",
        e.file
    );
    d.split.validate(d.num_vertices()).unwrap();
    Some(d)
}

/// `check` every `(file, vertices, edges, features, classes)` of one format.
fn check_each(
    format: Format,
    cases: &[(&'static str, usize, u64, usize, u32)],
) -> Vec<(&'static str, Dataset)> {
    cases
        .iter()
        .filter_map(|&(file, vertices, edges, features, classes)| {
            let e = Expect {
                file,
                format,
                vertices,
                edges,
                features,
                classes,
            };
            check(&e).map(|d| (file, d))
        })
        .collect()
}

fn split_sizes(d: &Dataset) -> (usize, usize, usize) {
    (d.split.train.len(), d.split.val.len(), d.split.test.len())
}

#[test]
fn planetoid_npz_with_given_masks() {
    let cora = Expect {
        file: "cora.npz",
        format: Format::GnnBenchmark,
        vertices: 2708,
        edges: 5278,
        features: 1433,
        classes: 7,
    };
    if let Some(d) = check(&cora) {
        assert_eq!(split_sizes(&d), (140, 500, 1000));
        assert!(
            d.features.as_ref().unwrap().is_sparse(),
            "bag of words stays sparse"
        );
        assert!(matches!(d.split.source, SplitSource::Given { .. }));
    }
    let citeseer = Expect {
        file: "citeseer.npz",
        format: Format::GnnBenchmark,
        vertices: 3327,
        edges: 4552,
        features: 3703,
        classes: 6,
    };
    if let Some(d) = check(&citeseer) {
        assert_eq!(split_sizes(&d), (120, 500, 1000));
    }
}

#[test]
fn shchur_npz_with_random_split() {
    let cases = [
        ("amazon-computers.npz", 13752, 245861, 767, 10),
        ("amazon-photo.npz", 7650, 119081, 745, 8),
        ("coauthor-cs.npz", 18333, 81894, 6805, 15),
    ];
    for (file, d) in check_each(Format::GnnBenchmark, &cases) {
        assert!(matches!(d.split.source, SplitSource::Random { .. }));
        let n = d.num_vertices() as f64;
        assert_eq!(d.split.train.len(), (0.6 * n).round() as usize);
        if file == "coauthor-cs.npz" {
            // 18333 x 6805 would be 500 MB dense.
            assert!(d.features.as_ref().unwrap().is_sparse());
        }
    }
}

#[test]
fn yandex_npz_with_ten_fixed_splits() {
    let cases = [
        ("yandex/squirrel.npz", 5201, 198353, 2089, 5),
        ("yandex/chameleon.npz", 2277, 31371, 2325, 5),
        ("yandex/tolokers.npz", 11758, 519000, 10, 2),
        ("yandex/actor.npz", 7600, 26659, 932, 5),
        ("yandex/minesweeper.npz", 10000, 39402, 7, 2),
    ];
    for (file, d) in check_each(Format::Yandex, &cases) {
        assert_eq!(
            d.split.source,
            SplitSource::Given {
                name: "split 0".into()
            }
        );
        let (tr, va, te) = split_sizes(&d);
        assert!(tr > 0 && va > 0 && te > 0, "{file}: {tr}/{va}/{te}");
    }
    // A different split index gives a different split of the same graph.
    if let Some(path) = shared_dataset("yandex/minesweeper.npz") {
        let other = LoadOptions {
            split_index: 3,
            ..Default::default()
        };
        let a = load("yandex/minesweeper.npz").unwrap();
        let b = load_path(&path, &other).unwrap();
        assert_eq!(a.graph, b.graph);
        assert_ne!(a.split.train, b.split.train);
        let beyond = LoadOptions {
            split_index: 10,
            ..Default::default()
        };
        let err = load_path(&path, &beyond).unwrap_err().to_string();
        assert!(err.contains("has 10 splits"), "{err}");
    }
}

#[test]
fn musae_facebook() {
    let e = Expect {
        file: "musae/facebook",
        format: Format::Musae,
        vertices: 22470,
        edges: 170823,
        features: 4714,
        classes: 4,
    };
    if let Some(d) = check(&e) {
        let names = d.labels.as_ref().unwrap().class_names().unwrap().to_vec();
        assert_eq!(names, ["company", "government", "politician", "tvshow"]);
        assert!(d.features.as_ref().unwrap().is_sparse());
    }
}

#[test]
fn ogb_layout_matches_the_npz_of_the_same_graph() {
    let e = Expect {
        file: "amazon-photo-ogb",
        format: Format::Ogb,
        vertices: 7650,
        edges: 119081,
        features: 745,
        classes: 8,
    };
    let Some(ogb) = check(&e) else { return };
    assert_eq!(
        ogb.split.source,
        SplitSource::Given {
            name: "random".into()
        }
    );
    let (tr, va, te) = split_sizes(&ogb);
    assert_eq!(tr + va + te, 7650);
    assert_eq!(tr, 4590, "60% of 7650");
    let Some(npz) = load("amazon-photo.npz") else {
        return;
    };
    assert_eq!(ogb.graph, npz.graph);
    assert_eq!(ogb.labels, npz.labels);
    assert_eq!(
        ogb.features.unwrap().to_dense(),
        npz.features.unwrap().to_dense()
    );
}

#[test]
fn cache_round_trip_on_real_graphs() {
    let dir = tempfile::tempdir().unwrap();
    for file in ["cora.npz", "yandex/chameleon.npz", "musae/facebook"] {
        let Some(d) = load(file) else { continue };
        let out = dir.path().join("x.sgnn");
        cache::write(&d, &out).unwrap();
        assert_eq!(
            switchgnn_datasets::detect_format(&out).unwrap(),
            Format::Cache
        );
        let back = load_path(&out, &LoadOptions::default()).unwrap();
        assert_eq!(back, d, "{file}");
        assert_eq!(Stats::of(&back), Stats::of(&d));
    }
}

#[test]
fn degree_skew_matches_the_readme() {
    // README: share of total degree held by the top 20% of vertices.
    for (file, share) in [
        ("yandex/squirrel.npz", 0.78),
        ("yandex/tolokers.npz", 0.73),
        ("musae/facebook", 0.65),
        ("amazon-computers.npz", 0.59),
        ("cora.npz", 0.47),
    ] {
        let Some(d) = load(file) else { continue };
        let got = Stats::of(&d).degree.top20_share;
        assert!((got - share).abs() < 0.01, "{file}: {got} vs {share}");
    }
}
