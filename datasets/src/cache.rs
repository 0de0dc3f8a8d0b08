//! switchgnn's binary dataset cache: parse a large graph once, then load it at memory speed.
//!
//! A [`container`](crate::container) file of kind `SGNNDSET` with sections `meta` (JSON: name,
//! counts, class names, split source), `offsets` and `neighbors` (the CSR), `split.train`,
//! `split.val`, `split.test`, `feat.values` (plus `feat.indptr` and `feat.indices` when
//! sparse) and `labels`. Every array is 64-byte aligned so the file can be memory-mapped and
//! each section viewed in place; [`read`] reads them into owned arrays instead, one copy each.
//! Loading checks the magic, the version, both checksums, the file's length and every dataset
//! invariant, so a truncated, corrupted, appended-to or hand-edited file is an error that names
//! the section.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::container::{Container, Section};
use crate::dataset::{Dataset, Labels};
use crate::error::{Error, Result};
use crate::features::{DenseFeatures, Features, SparseFeatures};
use crate::graph::Graph;
use crate::split::{Split, SplitSource};

/// The container kind of a dataset cache file: its first eight bytes.
pub const MAGIC: &[u8; 8] = b"SGNNDSET";
/// Bump on any change of layout or meaning; older files are then refused with a clear message.
pub const VERSION: u32 = 1;

#[derive(Debug, Serialize, Deserialize)]
struct Meta {
    name: String,
    num_vertices: usize,
    num_edges: u64,
    features: Option<FeatureMeta>,
    labels: Option<LabelMeta>,
    split: SplitSource,
    writer: String,
}

#[derive(Debug, Serialize, Deserialize)]
struct FeatureMeta {
    sparse: bool,
    rows: usize,
    cols: usize,
}

#[derive(Debug, Serialize, Deserialize)]
struct LabelMeta {
    num_classes: u32,
    class_names: Option<Vec<String>>,
}

/// Write `dataset` to `path` atomically.
pub fn write(dataset: &Dataset, path: &Path) -> Result<()> {
    let meta = Meta {
        name: dataset.name.clone(),
        num_vertices: dataset.num_vertices(),
        num_edges: dataset.graph.num_edges(),
        features: dataset.features.as_ref().map(|f| FeatureMeta {
            sparse: f.is_sparse(),
            rows: f.rows(),
            cols: f.cols(),
        }),
        labels: dataset.labels.as_ref().map(|l| LabelMeta {
            num_classes: l.num_classes(),
            class_names: l.class_names().map(<[String]>::to_vec),
        }),
        split: dataset.split.source.clone(),
        writer: concat!("switchgnn-datasets ", env!("CARGO_PKG_VERSION")).into(),
    };
    let meta_json = serde_json::to_vec(&meta).expect("meta serialises");
    let mut sections = vec![
        Section::u8s("meta", &meta_json),
        Section::u64s("offsets", dataset.graph.offsets()),
        Section::u32s("neighbors", dataset.graph.neighbor_ids()),
        Section::u32s("split.train", &dataset.split.train),
        Section::u32s("split.val", &dataset.split.val),
        Section::u32s("split.test", &dataset.split.test),
    ];
    match &dataset.features {
        Some(Features::Dense(d)) => sections.push(Section::f32s("feat.values", d.values())),
        Some(Features::Sparse(s)) => {
            sections.push(Section::f32s("feat.values", s.values()));
            sections.push(Section::u64s("feat.indptr", s.indptr()));
            sections.push(Section::u32s("feat.indices", s.indices()));
        }
        None => {}
    }
    if let Some(l) = &dataset.labels {
        sections.push(Section::u32s("labels", l.values()));
    }
    crate::container::write(path, MAGIC, VERSION, &sections)
}

/// Read and verify a cache file. Sections are read straight into owned arrays (one copy, so
/// peak memory is the dataset's size); their alignment would also allow mapping them in place.
pub fn read(path: &Path) -> Result<Dataset> {
    let file = Container::open(path, MAGIC, "switchgnn dataset cache")?;
    if file.version() != VERSION {
        return Err(Error::CacheVersion {
            path: path.to_path_buf(),
            found: file.version(),
            expected: VERSION,
        });
    }
    let bad = |record: &str, reason: String| file.bad(record, reason);
    let get_u32 = |name: &str| file.u32s(name);
    let get_u64 = |name: &str| file.u64s(name);
    let get_f32 = |name: &str| file.f32s(name);

    let meta: Meta = file.json("meta")?;
    let graph =
        Graph::from_csr(get_u64("offsets")?, get_u32("neighbors")?).map_err(|e| e.at(path))?;
    if graph.num_vertices() != meta.num_vertices || graph.num_edges() != meta.num_edges {
        return Err(bad(
            "section `meta`",
            "vertex or edge count disagrees with the graph".into(),
        ));
    }
    let features = match &meta.features {
        None => None,
        Some(fm) => {
            let values = get_f32("feat.values")?;
            let f = if fm.sparse {
                let indptr = get_u64("feat.indptr")?;
                let indices = get_u32("feat.indices")?;
                Features::Sparse(
                    SparseFeatures::new(fm.rows, fm.cols, indptr, indices, values)
                        .map_err(|e| e.at(path))?,
                )
            } else {
                Features::Dense(
                    DenseFeatures::new(fm.rows, fm.cols, values).map_err(|e| e.at(path))?,
                )
            };
            Some(f)
        }
    };
    let labels = match meta.labels {
        None => None,
        Some(lm) => Some(
            Labels::new(get_u32("labels")?, lm.num_classes, lm.class_names)
                .map_err(|e| e.at(path))?,
        ),
    };
    let split = Split::from_ids(
        meta.num_vertices,
        get_u32("split.train")?,
        get_u32("split.val")?,
        get_u32("split.test")?,
        meta.split,
    )
    .map_err(|e| e.at(path))?;
    Dataset::new(meta.name, graph, features, labels, split).map_err(|e| e.at(path))
}
