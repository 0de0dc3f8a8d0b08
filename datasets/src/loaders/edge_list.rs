//! Plain edge lists, SNAP style: one `u v` pair per line, whitespace separated, `#` or `%`
//! comment lines, optionally gzip-compressed. Columns after the second (weights, timestamps)
//! are ignored. Optional side files give features (`id x1 x2 ...` per line) and labels
//! (`id class` per line), keyed by the same ids as the edge list.

use std::collections::HashMap;
use std::io::BufRead;
use std::path::Path;

use super::text::{field, open};
use super::LoadOptions;
use crate::dataset::{Dataset, Labels};
use crate::error::{Error, Result};
use crate::features::{DenseFeatures, Features};
use crate::graph::Graph;

/// How file ids become vertex ids.
struct IdMap {
    /// `None`: ids are used as they are (vertex count = largest id + 1).
    compact: Option<HashMap<u64, u32>>,
    n: usize,
}

impl IdMap {
    fn get(&self, id: u64) -> Option<u32> {
        match &self.compact {
            Some(map) => map.get(&id).copied(),
            None => (id < self.n as u64).then_some(id as u32),
        }
    }
}

pub(crate) fn load(path: &Path, options: &LoadOptions) -> Result<Dataset> {
    let raw = read_pairs(path)?;
    if raw.is_empty() {
        // Not even with --allow-empty: an edge list names its vertices only through its edges.
        return Err(Error::malformed(
            path,
            "file",
            "no edges: an edge list without edges has no vertices either",
        ));
    }
    let ids = if options.relabel {
        let mut all: Vec<u64> = raw.iter().flat_map(|&(u, v)| [u, v]).collect();
        all.sort_unstable();
        all.dedup();
        let map = all
            .iter()
            .enumerate()
            .map(|(i, &id)| (id, i as u32))
            .collect();
        IdMap {
            compact: Some(map),
            n: all.len(),
        }
    } else {
        let max = raw.iter().map(|&(u, v)| u.max(v)).max().unwrap_or(0);
        if max >= u32::MAX as u64 {
            return Err(Error::Usage(format!(
                "{}: vertex id {max} does not fit u32; pass --relabel to number vertices compactly",
                path.display()
            )));
        }
        IdMap {
            compact: None,
            n: max as usize + 1,
        }
    };
    let edges: Vec<(u32, u32)> = raw
        .iter()
        .map(|&(u, v)| (ids.get(u).expect("id seen"), ids.get(v).expect("id seen")))
        .collect();
    let graph = Graph::from_edges(ids.n, &edges, options.build).map_err(|e| e.at(path))?;
    drop(edges);
    let features = match &options.features_file {
        Some(p) => Some(Features::Dense(read_features(p, &ids)?).compact()),
        None => None,
    };
    let labels = match &options.labels_file {
        Some(p) => Some(read_labels(p, &ids)?),
        None => None,
    };
    let split = options.random_split(ids.n)?;
    Dataset::new(super::stem(path), graph, features, labels, split).map_err(|e| e.at(path))
}

/// Non-comment lines of a whitespace-separated file, with their 1-based line numbers.
fn data_lines(path: &Path, mut each: impl FnMut(String, &[&str]) -> Result<()>) -> Result<()> {
    for (i, line) in open(path)?.lines().enumerate() {
        let line = line.map_err(|e| Error::io(path, e))?;
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') || trimmed.starts_with('%') {
            continue;
        }
        let fields: Vec<&str> = trimmed.split_whitespace().collect();
        each(format!("line {}", i + 1), &fields)?;
    }
    Ok(())
}

fn read_pairs(path: &Path) -> Result<Vec<(u64, u64)>> {
    let mut pairs = Vec::new();
    data_lines(path, |record, fields| {
        if fields.len() < 2 {
            return Err(Error::malformed(path, record, "expected two vertex ids"));
        }
        let u = field(path, &record, "vertex id", fields[0])?;
        let v = field(path, &record, "vertex id", fields[1])?;
        pairs.push((u, v));
        Ok(())
    })?;
    Ok(pairs)
}

/// Looks up the vertex of a side-file line, or says which line names an unknown vertex.
fn vertex_of(path: &Path, record: &str, raw: &str, ids: &IdMap) -> Result<u32> {
    let id: u64 = field(path, record, "vertex id", raw)?;
    ids.get(id).ok_or_else(|| {
        Error::malformed(
            path,
            record,
            format!("vertex {id} does not occur in the graph"),
        )
    })
}

fn read_features(path: &Path, ids: &IdMap) -> Result<DenseFeatures> {
    let mut rows: Vec<Option<Vec<f32>>> = vec![None; ids.n];
    let mut width = None;
    data_lines(path, |record, fields| {
        let v = vertex_of(path, &record, fields[0], ids)?;
        let row: Vec<f32> = fields[1..]
            .iter()
            .map(|x| field(path, &record, "feature", x))
            .collect::<Result<_>>()?;
        if *width.get_or_insert(row.len()) != row.len() || row.is_empty() {
            return Err(Error::malformed(
                path,
                record,
                format!("{} features, earlier rows have {width:?}", row.len()),
            ));
        }
        rows[v as usize] = Some(row);
        Ok(())
    })?;
    let width = width.ok_or_else(|| Error::malformed(path, "file", "no feature rows"))?;
    let mut values = Vec::with_capacity(ids.n * width);
    for (v, row) in rows.into_iter().enumerate() {
        let row =
            row.ok_or_else(|| Error::malformed(path, format!("vertex {v}"), "has no feature row"))?;
        values.extend(row);
    }
    DenseFeatures::new(ids.n, width, values).map_err(|e| e.at(path))
}

fn read_labels(path: &Path, ids: &IdMap) -> Result<Labels> {
    let mut values = vec![None::<i64>; ids.n];
    data_lines(path, |record, fields| {
        if fields.len() != 2 {
            return Err(Error::malformed(path, record, "expected `vertex class`"));
        }
        let v = vertex_of(path, &record, fields[0], ids)?;
        let class: u32 = field(path, &record, "class", fields[1])?;
        values[v as usize] = Some(i64::from(class));
        Ok(())
    })?;
    let values: Vec<i64> = values
        .into_iter()
        .enumerate()
        .map(|(v, c)| c.ok_or_else(|| Error::malformed(path, format!("vertex {v}"), "no label")))
        .collect::<Result<_>>()?;
    Labels::from_i64(&values).map_err(|e| e.at(path))
}
