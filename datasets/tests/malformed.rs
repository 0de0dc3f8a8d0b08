//! Every kind of malformed input gives an error that names the file and the record. Each test
//! writes its own small broken fixture.

use std::io::Write;
use std::path::{Path, PathBuf};

use npyz::WriterBuilder;
use switchgnn_datasets::synthetic::{generate, Preset};
use switchgnn_datasets::{cache, load_path, Error, LoadOptions, NoProgress};

enum Arr {
    I64(Vec<i64>, Vec<u64>),
    I32(Vec<i32>, Vec<u64>),
    F32(Vec<f32>, Vec<u64>),
    Bool(Vec<bool>, Vec<u64>),
}

fn write_npz(path: &Path, arrays: Vec<(&str, Arr)>) {
    let mut npz = npyz::npz::NpzWriter::create(path).unwrap();
    for (name, arr) in arrays {
        match arr {
            Arr::I64(d, s) => put(&mut npz, name, d, &s),
            Arr::I32(d, s) => put(&mut npz, name, d, &s),
            Arr::F32(d, s) => put(&mut npz, name, d, &s),
            Arr::Bool(d, s) => put(&mut npz, name, d, &s),
        }
    }
}

fn put<T: npyz::AutoSerialize>(
    npz: &mut npyz::npz::NpzWriter<std::io::BufWriter<std::fs::File>>,
    name: &str,
    data: Vec<T>,
    shape: &[u64],
) {
    let options = zip::write::FileOptions::default();
    let builder = npz.array::<T>(name, options).unwrap();
    let mut w = builder.default_dtype().shape(shape).begin_nd().unwrap();
    w.extend(data).unwrap();
    w.finish().unwrap();
}

/// A valid 3-vertex gnn-benchmark archive (path 0-1-2), with one array replaced when asked.
fn gnn_benchmark(dir: &Path, replace: Option<(&'static str, Arr)>) -> PathBuf {
    let mut arrays = vec![
        ("adj_data", Arr::F32(vec![1.0; 4], vec![4])),
        ("adj_indices", Arr::I32(vec![1, 0, 2, 1], vec![4])),
        ("adj_indptr", Arr::I64(vec![0, 1, 3, 4], vec![4])),
        ("adj_shape", Arr::I64(vec![3, 3], vec![2])),
        ("attr_data", Arr::F32(vec![1.0, 0.5, 2.0], vec![3])),
        ("attr_indices", Arr::I32(vec![0, 1, 1], vec![3])),
        ("attr_indptr", Arr::I64(vec![0, 1, 2, 3], vec![4])),
        ("attr_shape", Arr::I64(vec![3, 2], vec![2])),
        ("labels", Arr::I64(vec![0, 1, 0], vec![3])),
    ];
    if let Some((name, arr)) = replace {
        let slot = arrays
            .iter_mut()
            .find(|(n, _)| *n == name)
            .expect("known array");
        slot.1 = arr;
    }
    let path = dir.join("g.npz");
    write_npz(&path, arrays);
    path
}

/// The error for `path`, after checking it names the file and mentions `record`.
fn error_of(path: &Path, options: &LoadOptions, record: &str) -> String {
    let err = load_path(path, options).expect_err("malformed input must be refused");
    let msg = err.to_string();
    let file = path.file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        msg.contains(&file),
        "error does not name the file {file}: {msg}"
    );
    assert!(
        msg.contains(record),
        "error does not name the record `{record}`: {msg}"
    );
    msg
}

fn opts() -> LoadOptions {
    LoadOptions::default()
}

#[test]
fn the_valid_fixture_loads() {
    let dir = tempfile::tempdir().unwrap();
    let d = load_path(&gnn_benchmark(dir.path(), None), &opts()).unwrap();
    assert_eq!((d.num_vertices(), d.graph.num_edges()), (3, 2));
}

#[test]
fn truncated_npz() {
    let dir = tempfile::tempdir().unwrap();
    let path = gnn_benchmark(dir.path(), None);
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
    error_of(&path, &opts(), "archive");
}

#[test]
fn corrupt_npz() {
    let dir = tempfile::tempdir().unwrap();
    let path = gnn_benchmark(dir.path(), None);
    let mut bytes = std::fs::read(&path).unwrap();
    // Damage the first stored array's data (local header is 30 bytes + name).
    for b in &mut bytes[40..120] {
        *b ^= 0x5a;
    }
    std::fs::write(&path, &bytes).unwrap();
    error_of(&path, &opts(), "array `");
}

#[test]
fn mismatched_array_lengths() {
    let dir = tempfile::tempdir().unwrap();
    let short_indptr = Some(("adj_indptr", Arr::I64(vec![0, 1, 3], vec![3])));
    error_of(
        &gnn_benchmark(dir.path(), short_indptr),
        &opts(),
        "array `adj_indptr`",
    );
    let short_labels = Some(("labels", Arr::I64(vec![0, 1], vec![2])));
    error_of(
        &gnn_benchmark(dir.path(), short_labels),
        &opts(),
        "array `labels`",
    );
    let bad_end = Some(("attr_indptr", Arr::I64(vec![0, 1, 2, 5], vec![4])));
    error_of(
        &gnn_benchmark(dir.path(), bad_end),
        &opts(),
        "array `attr_indptr`",
    );
}

#[test]
fn vertex_id_out_of_range() {
    let dir = tempfile::tempdir().unwrap();
    let bad = Some(("adj_indices", Arr::I32(vec![1, 0, 7, 1], vec![4])));
    let msg = error_of(
        &gnn_benchmark(dir.path(), bad),
        &opts(),
        "array `adj_indices` entry 2",
    );
    assert!(msg.contains("out of range"), "{msg}");

    let edges = dir.path().join("edges.txt");
    std::fs::write(&edges, "# a graph\n0 1\n1 2\n").unwrap();
    let labels = dir.path().join("labels.txt");
    std::fs::write(&labels, "0 1\n1 0\n9 1\n").unwrap();
    let with_labels = LoadOptions {
        labels_file: Some(labels.clone()),
        ..opts()
    };
    let err = load_path(&edges, &with_labels).unwrap_err().to_string();
    assert!(
        err.contains("labels.txt") && err.contains("line 3"),
        "{err}"
    );
}

#[test]
fn non_numeric_fields() {
    let dir = tempfile::tempdir().unwrap();
    let edges = dir.path().join("edges.txt");
    std::fs::write(&edges, "0 1\n1 two\n").unwrap();
    let msg = error_of(&edges, &opts(), "line 2");
    assert!(msg.contains("`two`"), "{msg}");

    // OGB layout with a bad edge field, gzip-compressed as OGB ships it.
    let ogb = dir.path().join("ogb");
    std::fs::create_dir_all(ogb.join("raw")).unwrap();
    let gz = |name: &str, text: &str| {
        let f = std::fs::File::create(ogb.join("raw").join(name)).unwrap();
        let mut e = flate2::write::GzEncoder::new(f, flate2::Compression::fast());
        e.write_all(text.as_bytes()).unwrap();
        e.finish().unwrap();
    };
    gz("num-node-list.csv.gz", "3\n");
    gz("edge.csv.gz", "0,1\n1,x2\n");
    let err = load_path(&ogb, &opts()).unwrap_err().to_string();
    assert!(
        err.contains("edge.csv.gz") && err.contains("line 2"),
        "{err}"
    );

    // MUSAE with a non-numeric id in the edge csv.
    let musae = dir.path().join("musae");
    std::fs::create_dir_all(&musae).unwrap();
    std::fs::write(musae.join("x_target.csv"), "id,name,kind\n0,a,p\n1,b,q\n").unwrap();
    std::fs::write(musae.join("x_edges.csv"), "id_1,id_2\n0,1\n1,?\n").unwrap();
    std::fs::write(musae.join("x.json"), r#"{"0": [1], "1": [0]}"#).unwrap();
    let err = load_path(&musae, &opts()).unwrap_err().to_string();
    assert!(
        err.contains("x_edges.csv") && err.contains("line 3"),
        "{err}"
    );
}

#[test]
fn nan_and_infinite_features() {
    let dir = tempfile::tempdir().unwrap();
    let nan = Some(("attr_data", Arr::F32(vec![1.0, f32::NAN, 2.0], vec![3])));
    let msg = error_of(&gnn_benchmark(dir.path(), nan), &opts(), "feature row 1");
    assert!(msg.contains("not finite"), "{msg}");

    let edges = dir.path().join("edges.txt");
    std::fs::write(&edges, "0 1\n").unwrap();
    let feats = dir.path().join("feats.txt");
    std::fs::write(&feats, "0 1.0 2.0\n1 inf 0.5\n").unwrap();
    let with_feats = LoadOptions {
        features_file: Some(feats),
        ..opts()
    };
    let err = load_path(&edges, &with_feats).unwrap_err().to_string();
    assert!(
        err.contains("feats.txt") && err.contains("feature row 1"),
        "{err}"
    );

    // Yandex layout with a dense matrix holding infinity.
    let yandex = dir.path().join("y.npz");
    write_npz(
        &yandex,
        vec![
            (
                "node_features",
                Arr::F32(vec![0.0, 1.0, f32::INFINITY, 2.0], vec![2, 2]),
            ),
            ("node_labels", Arr::I64(vec![0, 1], vec![2])),
            ("edges", Arr::I64(vec![0, 1], vec![1, 2])),
            ("train_masks", Arr::Bool(vec![true, false], vec![1, 2])),
            ("val_masks", Arr::Bool(vec![false, true], vec![1, 2])),
            ("test_masks", Arr::Bool(vec![false, false], vec![1, 2])),
        ],
    );
    error_of(&yandex, &opts(), "feature row 1 column 0");
}

#[test]
fn empty_graphs() {
    let dir = tempfile::tempdir().unwrap();
    let edges = dir.path().join("empty.txt");
    std::fs::write(&edges, "# nothing here\n").unwrap();
    error_of(&edges, &opts(), "no edges");
    let zero = Some(("adj_shape", Arr::I64(vec![0, 0], vec![2])));
    let path = gnn_benchmark(dir.path(), zero);
    assert!(load_path(&path, &opts()).is_err());
}

/// A MUSAE folder `x` in `dir` with two vertices and the edge file `edges`.
fn musae_with_edges(dir: &Path, edges: &str) -> PathBuf {
    let musae = dir.join("musae");
    std::fs::create_dir_all(&musae).unwrap();
    std::fs::write(musae.join("x_target.csv"), "id,name,kind\n0,a,p\n1,b,q\n").unwrap();
    std::fs::write(musae.join("x_edges.csv"), edges).unwrap();
    std::fs::write(musae.join("x.json"), r#"{"0": [1], "1": [0]}"#).unwrap();
    musae
}

/// An edge file with no edges loaded as a graph without edges (issue 45); it is refused,
/// naming the file, unless asked for.
#[test]
fn empty_edge_files_are_refused_unless_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let musae = musae_with_edges(dir.path(), "id_1,id_2\n");
    let err = load_path(&musae, &opts()).unwrap_err().to_string();
    assert!(
        err.contains("x_edges.csv") && err.contains("no edges") && err.contains("--allow-empty"),
        "{err}"
    );
    let allow = LoadOptions {
        allow_empty: true,
        ..opts()
    };
    let d = load_path(&musae, &allow).unwrap();
    assert_eq!((d.num_vertices(), d.graph.num_edges()), (2, 0));
}

/// A text file cut short mid-line (its last record may still parse, as another number) is
/// refused, naming the file and its last line; the same file ended properly loads.
#[test]
fn a_last_line_without_its_newline_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let edges = dir.path().join("edges.txt");
    std::fs::write(&edges, "0 1\n1 2\n2 3").unwrap();
    let msg = error_of(&edges, &opts(), "line 3");
    assert!(msg.contains("cut short"), "{msg}");
    std::fs::write(&edges, "0 1\n1 2\n2 3\n").unwrap();
    assert_eq!(load_path(&edges, &opts()).unwrap().graph.num_edges(), 3);

    let musae = musae_with_edges(dir.path(), "id_1,id_2\n0,1\n1,1");
    let err = load_path(&musae, &opts()).unwrap_err().to_string();
    assert!(
        err.contains("x_edges.csv") && err.contains("line 3"),
        "{err}"
    );
}

fn small_cache(dir: &Path) -> PathBuf {
    let d = generate(&Preset::Small.spec(0.1, 1).unwrap(), &NoProgress).unwrap();
    let path = dir.join("small.sgnn");
    cache::write(&d, &path).unwrap();
    path
}

#[test]
fn wrong_cache_version() {
    let dir = tempfile::tempdir().unwrap();
    let path = small_cache(dir.path());
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[8..12].copy_from_slice(&99u32.to_le_bytes());
    std::fs::write(&path, &bytes).unwrap();
    let err = load_path(&path, &opts()).unwrap_err();
    assert!(
        matches!(err, Error::CacheVersion { found: 99, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("small.sgnn"));
}

#[test]
fn corrupt_and_truncated_cache() {
    let dir = tempfile::tempdir().unwrap();
    let path = small_cache(dir.path());
    let good = std::fs::read(&path).unwrap();

    let mut flipped = good.clone();
    let at = good.len() - 100; // inside the last section's data
    flipped[at] ^= 1;
    std::fs::write(&path, &flipped).unwrap();
    let msg = error_of(&path, &opts(), "section `");
    assert!(msg.contains("checksum"), "{msg}");

    std::fs::write(&path, &good[..good.len() / 2]).unwrap();
    let msg = error_of(&path, &opts(), "section `");
    assert!(msg.contains("truncated"), "{msg}");

    // Bytes appended after the last section are refused, naming the file.
    let mut appended = good.clone();
    appended.extend_from_slice(b"trailing bytes");
    std::fs::write(&path, &appended).unwrap();
    let msg = error_of(&path, &opts(), "end of file");
    assert!(msg.contains("14 bytes after the last section"), "{msg}");

    std::fs::write(&path, &good[..10]).unwrap();
    assert!(load_path(
        &path,
        &LoadOptions {
            format: Some(switchgnn_datasets::Format::Cache),
            ..opts()
        }
    )
    .is_err());
}
