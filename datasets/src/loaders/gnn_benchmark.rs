//! The gnn-benchmark `.npz` layout (Shchur et al. 2018): CSR adjacency `adj_*`, CSR features
//! `attr_*` (or a dense `attr_matrix`), `labels`, and optional Planetoid masks.

use std::path::Path;

use super::npz::Npz;
use super::LoadOptions;
use crate::dataset::{Dataset, Labels};
use crate::error::{Error, Result};
use crate::features::{DenseFeatures, Features, SparseFeatures};
use crate::graph::Graph;
use crate::split::{Split, SplitSource};

pub(crate) fn is_gnn_benchmark(npz: &Npz) -> bool {
    npz.has("adj_indptr") && npz.has("adj_indices")
}

pub(crate) fn load(path: &Path, options: &LoadOptions) -> Result<Dataset> {
    let mut npz = Npz::open(path)?;
    let (n, edges) = read_csr_edges(&mut npz)?;
    let graph = Graph::from_edges(n, &edges, options.build).map_err(|e| e.at(path))?;
    drop(edges);

    let features = read_features(&mut npz, n)?;
    let labels = if npz.has("labels") {
        let raw = npz.ints("labels")?;
        npz.expect_len("labels", &raw, n)?;
        Some(Labels::from_i64(&raw.data).map_err(|e| e.at(path))?)
    } else {
        None
    };
    let split = if npz.has("train_mask") {
        let mut mask = |name: &str| -> Result<Vec<bool>> {
            let m = npz.bools(name)?;
            npz.expect_len(name, &m, n)?;
            Ok(m.data)
        };
        let (train, val, test) = (mask("train_mask")?, mask("val_mask")?, mask("test_mask")?);
        let source = SplitSource::Given {
            name: "masks".into(),
        };
        Split::from_masks(&train, &val, &test, source).map_err(|e| e.at(path))?
    } else {
        options.random_split(n)?
    };
    npz.verify_rest()?;
    Dataset::new(super::stem(path), graph, features, labels, split).map_err(|e| e.at(path))
}

/// Vertex count and the (directed) entries of the `adj_*` CSR matrix as edges.
fn read_csr_edges(npz: &mut Npz) -> Result<(usize, Vec<(u32, u32)>)> {
    let path = npz.path().to_path_buf();
    let shape = npz.ints("adj_shape")?.data;
    let n = match shape.as_slice() {
        [r, c] if r == c && *r >= 0 => *r as usize,
        other => {
            return Err(Error::malformed(
                &path,
                "array `adj_shape`",
                format!("{other:?} is not the shape of a square adjacency matrix"),
            ))
        }
    };
    let indptr = npz.ints("adj_indptr")?;
    npz.expect_len("adj_indptr", &indptr, n + 1)?;
    let indices = npz.ints("adj_indices")?.data;
    check_indptr(&path, "adj_indptr", &indptr.data, indices.len())?;
    let mut edges = Vec::with_capacity(indices.len());
    for row in 0..n {
        let range = indptr.data[row] as usize..indptr.data[row + 1] as usize;
        for (k, &col) in indices[range.clone()].iter().enumerate() {
            let k = range.start + k;
            if col < 0 || col as u64 >= n as u64 {
                return Err(Error::malformed(
                    &path,
                    format!("array `adj_indices` entry {k} (row {row})"),
                    format!("column {col} out of range for {n} vertices"),
                ));
            }
            edges.push((row as u32, col as u32));
        }
    }
    Ok((n, edges))
}

/// `indptr` must start at 0, never decrease and end at `nnz`.
fn check_indptr(path: &Path, name: &str, indptr: &[i64], nnz: usize) -> Result<()> {
    let bad = |record: String, reason: String| Err(Error::malformed(path, record, reason));
    if indptr.first() != Some(&0) || indptr.last() != Some(&(nnz as i64)) {
        return bad(
            format!("array `{name}`"),
            format!(
                "must run from 0 to {nnz} (the number of stored entries), found {:?}..{:?}",
                indptr.first(),
                indptr.last()
            ),
        );
    }
    if let Some(i) = indptr.windows(2).position(|w| w[0] > w[1]) {
        return bad(format!("array `{name}` entry {i}"), "decreasing".into());
    }
    Ok(())
}

fn read_features(npz: &mut Npz, n: usize) -> Result<Option<Features>> {
    let path = npz.path().to_path_buf();
    if npz.has("attr_matrix") {
        let m = npz.floats("attr_matrix")?;
        return match m.shape.as_slice() {
            [r, c] if *r as usize == n => {
                let d = DenseFeatures::new(n, *c as usize, m.data).map_err(|e| e.at(&path))?;
                Ok(Some(Features::Dense(d).compact()))
            }
            other => Err(Error::malformed(
                &path,
                "array `attr_matrix`",
                format!("shape {other:?} does not have {n} rows"),
            )),
        };
    }
    if !npz.has("attr_indptr") {
        return Ok(None);
    }
    let shape = npz.ints("attr_shape")?.data;
    let cols = match shape.as_slice() {
        [r, c] if *r as usize == n && *c > 0 => *c as usize,
        other => {
            return Err(Error::malformed(
                &path,
                "array `attr_shape`",
                format!("{other:?} is not ({n}, width)"),
            ))
        }
    };
    let indptr = npz.ints("attr_indptr")?;
    npz.expect_len("attr_indptr", &indptr, n + 1)?;
    let indices = npz.ints("attr_indices")?.data;
    let values = npz.floats("attr_data")?.data;
    check_indptr(&path, "attr_indptr", &indptr.data, indices.len())?;
    if let Some(k) = indices
        .iter()
        .position(|&c| c < 0 || c as u64 >= cols as u64)
    {
        return Err(Error::malformed(
            &path,
            format!("array `attr_indices` entry {k}"),
            format!("column {} out of range for width {cols}", indices[k]),
        ));
    }
    let sparse = SparseFeatures::new(
        n,
        cols,
        indptr.data.iter().map(|&x| x as u64).collect(),
        indices.iter().map(|&x| x as u32).collect(),
        values,
    )
    .map_err(|e| e.at(&path))?;
    Ok(Some(Features::Sparse(sparse).compact()))
}
