//! The OGB node-property raw layout (as ogbn-arxiv ships it):
//! `raw/edge.csv.gz` (`src,dst`), `raw/node-feat.csv.gz` (one float row per vertex, optional),
//! `raw/node-label.csv.gz`, `raw/num-node-list.csv.gz`, `raw/num-edge-list.csv.gz`, and
//! `split/<name>/{train,valid,test}.csv.gz`.

use std::io::BufRead;
use std::path::{Path, PathBuf};

use rayon::prelude::*;

use super::text::{field, open, read_int_column};
use super::LoadOptions;
use crate::dataset::{Dataset, Labels};
use crate::error::{Error, Result};
use crate::features::{DenseFeatures, Features};
use crate::graph::Graph;
use crate::split::{Split, SplitSource};

pub(crate) fn is_ogb(dir: &Path) -> bool {
    dir.join("raw").join("edge.csv.gz").is_file()
}

pub(crate) fn load(dir: &Path, options: &LoadOptions) -> Result<Dataset> {
    let raw = dir.join("raw");
    let count_path = raw.join("num-node-list.csv.gz");
    let n = match read_int_column::<u64>(&count_path, "vertex count")?.as_slice() {
        [n] if *n > 0 && *n < u32::MAX as u64 => *n as usize,
        other => {
            return Err(Error::malformed(
                &count_path,
                "file",
                format!("expected one positive vertex count, found {other:?}"),
            ))
        }
    };
    let edges = read_edges(&raw.join("edge.csv.gz"), n)?;
    options.check_edges(&raw.join("edge.csv.gz"), edges.len())?;
    let edge_count_path = raw.join("num-edge-list.csv.gz");
    if edge_count_path.is_file() {
        let counts = read_int_column::<u64>(&edge_count_path, "edge count")?;
        if counts != [edges.len() as u64] {
            return Err(Error::malformed(
                &edge_count_path,
                "file",
                format!("says {counts:?} edges, edge.csv.gz holds {}", edges.len()),
            ));
        }
    }
    let edge_path = raw.join("edge.csv.gz");
    let graph = Graph::from_edges(n, &edges, options.build).map_err(|e| e.at(&edge_path))?;
    drop(edges);

    let feat_path = raw.join("node-feat.csv.gz");
    let features = if feat_path.is_file() {
        Some(Features::Dense(read_features(&feat_path, n)?).compact())
    } else {
        None
    };
    let label_path = raw.join("node-label.csv.gz");
    let labels = if label_path.is_file() {
        let raw_labels = read_int_column::<i64>(&label_path, "label")?;
        if raw_labels.len() != n {
            return Err(Error::malformed(
                &label_path,
                "file",
                format!("{} labels for {n} vertices", raw_labels.len()),
            ));
        }
        Some(Labels::from_i64(&raw_labels).map_err(|e| e.at(&label_path))?)
    } else {
        None
    };
    let split = read_split(dir, n, options)?;
    let name = dir
        .file_name()
        .map_or("ogb".into(), |s| s.to_string_lossy().into_owned());
    Dataset::new(name, graph, features, labels, split).map_err(|e| e.at(dir))
}

fn read_edges(path: &Path, n: usize) -> Result<Vec<(u32, u32)>> {
    let mut edges = Vec::new();
    for (i, line) in open(path)?.lines().enumerate() {
        let line = line.map_err(|e| Error::io(path, e))?;
        if line.trim().is_empty() {
            continue;
        }
        let record = format!("line {}", i + 1);
        let mut parts = line.split(',');
        let (Some(a), Some(b), None) = (parts.next(), parts.next(), parts.next()) else {
            return Err(Error::malformed(path, record, "expected `src,dst`"));
        };
        let u: u32 = field(path, &record, "vertex id", a)?;
        let v: u32 = field(path, &record, "vertex id", b)?;
        if u as usize >= n || v as usize >= n {
            return Err(Error::malformed(
                path,
                record,
                format!("edge ({u}, {v}) out of range for {n} vertices"),
            ));
        }
        edges.push((u, v));
    }
    Ok(edges)
}

/// One comma-separated float row per vertex; rows are parsed in parallel.
fn read_features(path: &Path, n: usize) -> Result<DenseFeatures> {
    let lines: Vec<String> = open(path)?
        .lines()
        .collect::<std::io::Result<_>>()
        .map_err(|e| Error::io(path, e))?;
    if lines.len() != n {
        return Err(Error::malformed(
            path,
            "file",
            format!("{} feature rows for {n} vertices", lines.len()),
        ));
    }
    let rows: Vec<Vec<f32>> = lines
        .par_iter()
        .enumerate()
        .map(|(i, line)| {
            let record = format!("line {}", i + 1);
            line.split(',')
                .map(|x| field::<f32>(path, &record, "feature", x))
                .collect()
        })
        .collect::<Result<_>>()?;
    let width = rows[0].len();
    if let Some(i) = rows.iter().position(|r| r.len() != width) {
        return Err(Error::malformed(
            path,
            format!("line {}", i + 1),
            format!("{} values, line 1 has {width}", rows[i].len()),
        ));
    }
    DenseFeatures::new(n, width, rows.concat()).map_err(|e| e.at(path))
}

fn read_split(dir: &Path, n: usize, options: &LoadOptions) -> Result<Split> {
    let split_root = dir.join("split");
    let mut names: Vec<String> = std::fs::read_dir(&split_root)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok())
                .filter(|e| e.path().is_dir())
                .filter_map(|e| e.file_name().into_string().ok())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    let name = match (&options.split_name, names.as_slice()) {
        (Some(want), _) if names.contains(want) => want.clone(),
        (Some(want), _) => {
            return Err(Error::Usage(format!(
                "{}: no split named `{want}` (found: {})",
                split_root.display(),
                names.join(", ")
            )))
        }
        (None, []) => return options.random_split(n),
        (None, [only]) => only.clone(),
        (None, several) => {
            return Err(Error::Usage(format!(
                "{}: several splits ({}); choose one with --split-name",
                split_root.display(),
                several.join(", ")
            )))
        }
    };
    let part = |file: &str| -> Result<Vec<u32>> {
        let p: PathBuf = split_root.join(&name).join(format!("{file}.csv.gz"));
        read_int_column(&p, "vertex id")
    };
    let (train, val, test) = (part("train")?, part("valid")?, part("test")?);
    let source = SplitSource::Given { name: name.clone() };
    Split::from_ids(n, train, val, test, source).map_err(|e| e.at(&split_root.join(&name)))
}
