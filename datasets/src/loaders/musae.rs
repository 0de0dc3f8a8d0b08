//! The MUSAE layout (Rozemberczki et al. 2019): `<name>_edges.csv` (`id_1,id_2`),
//! `<name>.json` (`{"vertex": [feature ids]}`, a sparse binary bag of features) and
//! `<name>_target.csv`, a table with a vertex id column and a class column. Which columns those
//! are differs between the MUSAE graphs and is read from the header:
//!
//! | graphs | target header | vertex id | class |
//! |---|---|---|---|
//! | Facebook page-page | `id,facebook_id,page_name,page_type` | `id` | `page_type` |
//! | Twitch (DE, EN, ES, FR, PT, RU) | `id,days,mature,views,partner,new_id` | `new_id` | `mature` |
//! | GitHub | `id,name,ml_target` | `id` | `ml_target` |
//! | Deezer Europe | `id,target` | `id` | `target` |
//!
//! Any other table: the first column and the last, or the columns the options name.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use super::text::{csv, csv_error, field};
use super::LoadOptions;
use crate::dataset::{Dataset, Labels};
use crate::error::{Error, Result};
use crate::features::{Features, SparseFeatures};
use crate::graph::Graph;

/// The `<name>` of a folder holding `<name>_edges.csv`, if any.
pub(crate) fn detect(dir: &Path) -> Option<String> {
    let entries = std::fs::read_dir(dir).ok()?;
    entries.filter_map(|e| e.ok()).find_map(|e| {
        let name = e.file_name().into_string().ok()?;
        name.strip_suffix("_edges.csv").map(str::to_string)
    })
}

pub(crate) fn load(dir: &Path, options: &LoadOptions) -> Result<Dataset> {
    let name = detect(dir).ok_or_else(|| {
        Error::malformed(dir, "folder", "no `<name>_edges.csv` file (MUSAE layout)")
    })?;
    let file = |suffix: &str| -> PathBuf { dir.join(format!("{name}{suffix}")) };
    let (labels, n) = read_targets(&file("_target.csv"), options)?;
    let edges_path = file("_edges.csv");
    let edges = read_edges(&edges_path, n)?;
    options.check_edges(&edges_path, edges.len())?;
    let graph = Graph::from_edges(n, &edges, options.build).map_err(|e| e.at(&edges_path))?;
    let features = read_features(&file(".json"), n)?;
    let split = options.random_split(n)?;
    Dataset::new(name, graph, Some(features), Some(labels), split).map_err(|e| e.at(dir))
}

/// The known layouts: a column that identifies the layout, its id column and class column.
const LAYOUTS: [(&str, &str, &str); 4] = [
    ("new_id", "new_id", "mature"),
    ("ml_target", "id", "ml_target"),
    ("page_type", "id", "page_type"),
    ("target", "id", "target"),
];

/// The index of column `wanted` (a header name or a 0-based index) of `headers`.
fn column(path: &Path, headers: &csv::StringRecord, what: &str, wanted: &str) -> Result<usize> {
    if let Some(i) = headers.iter().position(|h| h.trim() == wanted) {
        return Ok(i);
    }
    match wanted.parse::<usize>() {
        Ok(i) if i < headers.len() => Ok(i),
        _ => Err(Error::malformed(
            path,
            "header",
            format!(
                "no {what} column `{wanted}` (columns: {})",
                headers.iter().collect::<Vec<_>>().join(", ")
            ),
        )),
    }
}

/// The (vertex id, class) columns of a target file: named by the options, else those of the
/// layout its header shows, else the first and the last.
fn target_columns(
    path: &Path,
    headers: &csv::StringRecord,
    options: &LoadOptions,
) -> Result<(usize, usize)> {
    let find = |name: &str| headers.iter().position(|h| h.trim() == name);
    let layout = LAYOUTS.iter().find(|(marker, id, class)| {
        find(marker).is_some() && find(id).is_some() && find(class).is_some()
    });
    let (default_id, default_class) = match layout {
        Some(&(_, id, class)) => (find(id), find(class)),
        None => (Some(0), headers.len().checked_sub(1)),
    };
    let id = match &options.id_column {
        Some(name) => column(path, headers, "vertex id", name)?,
        None => default_id.unwrap_or(0),
    };
    let class = match &options.label_column {
        Some(name) => column(path, headers, "class", name)?,
        None => default_class.unwrap_or(0),
    };
    if id == class {
        return Err(Error::malformed(
            path,
            "header",
            "the vertex id and the class are the same column: name them with --id-column and \
             --label-column",
        ));
    }
    Ok((id, class))
}

/// Labels from the class column of the target file; class ids follow the sorted class names.
fn read_targets(path: &Path, options: &LoadOptions) -> Result<(Labels, usize)> {
    let mut rows: Vec<(usize, String)> = Vec::new();
    let mut reader = csv(path, true)?;
    let headers = reader.headers().map_err(|e| csv_error(path, e))?.clone();
    if headers.len() < 2 {
        return Err(Error::malformed(
            path,
            "header",
            "expected at least a vertex id column and a class column",
        ));
    }
    let (id_col, class_col) = target_columns(path, &headers, options)?;
    for (i, record) in reader.records().enumerate() {
        let record = record.map_err(|e| csv_error(path, e))?;
        let line = format!("line {}", i + 2);
        if record.len() <= id_col.max(class_col) {
            return Err(Error::malformed(
                path,
                line,
                format!(
                    "{} fields: no {} column",
                    record.len(),
                    if record.len() <= id_col {
                        "vertex id"
                    } else {
                        "class"
                    }
                ),
            ));
        }
        let id: usize = field(path, &line, "vertex id", &record[id_col])?;
        rows.push((id, record[class_col].trim().to_string()));
    }
    let n = rows.len();
    if n == 0 {
        return Err(Error::malformed(path, "file", "no vertices"));
    }
    let names: Vec<String> = rows
        .iter()
        .map(|(_, c)| c.clone())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let mut values = vec![u32::MAX; n];
    for (i, (id, class)) in rows.iter().enumerate() {
        let line = format!("line {}", i + 2);
        if *id >= n {
            return Err(Error::malformed(
                path,
                line,
                format!("vertex id {id} out of range: the file lists {n} vertices"),
            ));
        }
        if values[*id] != u32::MAX {
            return Err(Error::malformed(
                path,
                line,
                format!("vertex {id} listed twice"),
            ));
        }
        values[*id] = names.binary_search(class).expect("name collected above") as u32;
    }
    let num_classes = names.len() as u32;
    let labels = Labels::new(values, num_classes, Some(names)).map_err(|e| e.at(path))?;
    Ok((labels, n))
}

fn read_edges(path: &Path, n: usize) -> Result<Vec<(u32, u32)>> {
    let mut edges = Vec::new();
    let mut reader = csv(path, true)?;
    for (i, record) in reader.records().enumerate() {
        let record = record.map_err(|e| csv_error(path, e))?;
        let line = format!("line {}", i + 2);
        if record.len() != 2 {
            return Err(Error::malformed(path, line, "expected two vertex ids"));
        }
        let u: u32 = field(path, &line, "vertex id", &record[0])?;
        let v: u32 = field(path, &line, "vertex id", &record[1])?;
        if u as usize >= n || v as usize >= n {
            return Err(Error::malformed(
                path,
                line,
                format!("edge ({u}, {v}) out of range for {n} vertices"),
            ));
        }
        edges.push((u, v));
    }
    Ok(edges)
}

fn read_features(path: &Path, n: usize) -> Result<Features> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    let map: HashMap<String, Vec<u32>> = serde_json::from_str(&text).map_err(|e| {
        Error::malformed(
            path,
            format!("line {} column {}", e.line(), e.column()),
            format!("not a {{\"vertex\": [feature ids]}} object: {e}"),
        )
    })?;
    let mut rows: Vec<Option<Vec<u32>>> = vec![None; n];
    for (key, mut ids) in map {
        let v: usize = field(path, &format!("key \"{key}\""), "vertex id", &key)?;
        if v >= n {
            return Err(Error::malformed(
                path,
                format!("key \"{key}\""),
                format!("vertex out of range for {n} vertices"),
            ));
        }
        ids.sort_unstable();
        ids.dedup();
        rows[v] = Some(ids);
    }
    let width = rows
        .iter()
        .flatten()
        .filter_map(|r| r.last())
        .max()
        .map_or(1, |&m| m as usize + 1);
    let mut indptr = vec![0u64];
    let mut indices = Vec::new();
    for (v, row) in rows.into_iter().enumerate() {
        let row = row
            .ok_or_else(|| Error::malformed(path, format!("vertex {v}"), "has no feature list"))?;
        indices.extend(row);
        indptr.push(indices.len() as u64);
    }
    let values = vec![1.0; indices.len()];
    let sparse = SparseFeatures::new(n, width, indptr, indices, values).map_err(|e| e.at(path))?;
    Ok(Features::Sparse(sparse))
}
