//! The Yandex heterophilous-graph `.npz` layout (Platonov et al. 2023): dense `node_features`,
//! `node_labels`, an `edges` list and ten fixed splits as `[10, N]` masks.

use std::path::Path;

use super::npz::Npz;
use super::LoadOptions;
use crate::dataset::{Dataset, Labels};
use crate::error::{Error, Result};
use crate::features::{DenseFeatures, Features};
use crate::graph::Graph;
use crate::split::{Split, SplitSource};

pub(crate) fn is_yandex(npz: &Npz) -> bool {
    npz.has("node_features") && npz.has("edges")
}

pub(crate) fn load(path: &Path, options: &LoadOptions) -> Result<Dataset> {
    let mut npz = Npz::open(path)?;
    let feats = npz.floats("node_features")?;
    let (n, width) = match feats.shape.as_slice() {
        [n, f] if *n > 0 => (*n as usize, *f as usize),
        other => {
            return Err(Error::malformed(
                path,
                "array `node_features`",
                format!("shape {other:?} is not (vertices, width)"),
            ))
        }
    };
    let features = DenseFeatures::new(n, width, feats.data).map_err(|e| e.at(path))?;

    let raw_edges = npz.ints("edges")?;
    if raw_edges.shape.len() != 2 || raw_edges.shape[1] != 2 {
        return Err(Error::malformed(
            path,
            "array `edges`",
            format!("shape {:?} is not (edges, 2)", raw_edges.shape),
        ));
    }
    let mut edges = Vec::with_capacity(raw_edges.data.len() / 2);
    for (i, pair) in raw_edges.data.chunks_exact(2).enumerate() {
        let ok = |x: i64| x >= 0 && (x as u64) < n as u64;
        if !ok(pair[0]) || !ok(pair[1]) {
            return Err(Error::malformed(
                path,
                format!("array `edges` row {i}"),
                format!("({}, {}) out of range for {n} vertices", pair[0], pair[1]),
            ));
        }
        edges.push((pair[0] as u32, pair[1] as u32));
    }
    let graph = Graph::from_edges(n, &edges, options.build).map_err(|e| e.at(path))?;

    let labels = npz.ints("node_labels")?;
    npz.expect_len("node_labels", &labels, n)?;
    let labels = Labels::from_i64(&labels.data).map_err(|e| e.at(path))?;

    let split = read_split(&mut npz, n, options.split_index)?;
    npz.verify_rest()?;
    let features = Some(Features::Dense(features).compact());
    Dataset::new(super::stem(path), graph, features, Some(labels), split).map_err(|e| e.at(path))
}

/// Row `index` of the `[splits, N]` mask arrays.
fn read_split(npz: &mut Npz, n: usize, index: usize) -> Result<Split> {
    let mut row = |name: &str| -> Result<Vec<bool>> {
        let masks = npz.bools(name)?;
        let splits = match masks.shape.as_slice() {
            [s, len] if *len as usize == n => *s as usize,
            [len] if *len as usize == n => 1,
            other => {
                return Err(Error::malformed(
                    npz.path(),
                    format!("array `{name}`"),
                    format!("shape {other:?} is not (splits, {n})"),
                ))
            }
        };
        if index >= splits {
            return Err(Error::Usage(format!(
                "{}: split index {index} requested, the file has {splits} splits",
                npz.path().display()
            )));
        }
        Ok(masks.data[index * n..(index + 1) * n].to_vec())
    };
    let (train, val, test) = (row("train_masks")?, row("val_masks")?, row("test_masks")?);
    let source = SplitSource::Given {
        name: format!("split {index}"),
    };
    Split::from_masks(&train, &val, &test, source).map_err(|e| e.at(npz.path()))
}
