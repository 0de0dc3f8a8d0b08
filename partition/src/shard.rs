//! Per-worker shards: what one worker of a plan needs of the dataset, and nothing more.
//!
//! A worker trains on its own vertices: their features, labels and split membership, the
//! edges among them, and a few figures only the whole graph knows (each vertex's full degree,
//! which scales its messages; the most remote neighbours any vertex has, which sizes the
//! fixed-point scale; whether any feature is negative, which decides `auto` normalisation;
//! the split sizes, which losses are shares of). [`DataShard::cut`] takes exactly that out of a
//! dataset; `switchgnn shard` writes one file per worker so that a worker's memory grows with
//! its part, not with the graph.
//!
//! A shard file is a [`container`](switchgnn_datasets::container) of kind `SGNNSHRD`:
//!
//! | section | type | content |
//! |---|---|---|
//! | `meta` | u8 | JSON [`ShardMeta`]: rank, workers, the fingerprints of the graph and the assignment it was cut for, whole-graph figures |
//! | `ids` | u32 | the worker's vertices (global ids), ascending |
//! | `degrees` | u32 | each one's degree in the whole graph (a kept self-loop counts) |
//! | `local.offsets`, `local.columns` | u64, u32 | the graph among them as CSR over positions in `ids`, rows sorted |
//! | `feat.values` (+ `feat.indptr`, `feat.indices` when sparse) | f32 (u64, u32) | their feature rows |
//! | `feat.starts` | u64 | where each row's values start in the whole matrix's values (the dropout mask's layout) |
//! | `labels` | u32 | their classes |
//! | `split.train`, `split.val`, `split.test` | u32 | positions in `ids` of the split's vertices, in the dataset's order |
//!
//! Loading checks everything a worker relies on (ids, CSR, features, labels, split) and names
//! the file and the section; [`DataShard::check_plan`] refuses a shard cut for another plan.

use std::path::{Path, PathBuf};

use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use switchgnn_datasets::container::{Container, Section};
use switchgnn_datasets::{Dataset, DenseFeatures, Features, Graph, SparseFeatures, SplitSource};
use xxhash_rust::xxh3::xxh3_64;

use crate::error::{PartitionError, Result, ShardMismatch};
use crate::plan::{graph_fingerprint, Plan};

/// The container kind of a shard file.
pub const MAGIC: &[u8; 8] = b"SGNNSHRD";
/// Bump on any change of layout or meaning; older shards are refused with the command to rerun.
pub const VERSION: u32 = 1;
/// The folder of a plan directory that holds its shards.
pub const SHARDS_DIR: &str = "shards";

/// Worker `rank`'s shard file in plan directory `plan`.
pub fn shard_path(plan: &Path, rank: u32) -> PathBuf {
    plan.join(SHARDS_DIR)
        .join(format!("worker-{rank:04}.shard"))
}

/// A fingerprint of who owns which vertex.
pub fn assignment_fingerprint(parts: &[u32]) -> u64 {
    xxh3_64(bytemuck::cast_slice(parts))
}

/// What a shard records about itself and about the whole graph.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShardMeta {
    /// The worker this shard is for.
    pub rank: u32,
    /// Workers of the job.
    pub workers: u32,
    /// The dataset's name.
    pub dataset: String,
    /// Vertices of the whole graph.
    pub vertices: usize,
    /// Undirected edges of the whole graph, self-loops included.
    pub edges: u64,
    /// Self-loops of the whole graph.
    pub self_loops: u64,
    /// The whole graph's fingerprint ([`crate::plan::graph_fingerprint`]): the plan's graph.
    pub graph_fingerprint: u64,
    /// [`assignment_fingerprint`] of the plan's assignment: who owns which vertex.
    pub assignment_fingerprint: u64,
    /// The whole feature matrix's shape, if the dataset has features.
    pub features: Option<FeatureShape>,
    /// The classes, if the dataset has labels.
    pub labels: Option<LabelShape>,
    /// Where the split came from.
    pub split: SplitSource,
    /// Train, validation and test vertices of the whole graph.
    pub split_sizes: [usize; 3],
    /// The most neighbours on other workers that any vertex of the graph has.
    pub max_remote_degree: u64,
    /// The switchgnn version that wrote the shard.
    pub writer: String,
}

/// The whole feature matrix, as far as a worker needs to know it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FeatureShape {
    /// Feature width.
    pub cols: usize,
    /// Stored as CSR.
    pub sparse: bool,
    /// No feature of the whole matrix is negative.
    pub nonnegative: bool,
}

/// The whole dataset's classes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabelShape {
    /// Classes: the model's output width.
    pub num_classes: u32,
    /// Class names, where the dataset ships them.
    pub class_names: Option<Vec<String>>,
}

/// One worker's part of a dataset. See the module docs.
#[derive(Debug, Clone, PartialEq)]
pub struct DataShard {
    /// What the shard says about itself and the whole graph.
    pub meta: ShardMeta,
    /// The worker's vertices, ascending.
    pub ids: Vec<u32>,
    /// Each vertex's degree in the whole graph.
    pub degrees: Vec<u32>,
    /// The graph among the worker's vertices: row `i`'s neighbours are the positions
    /// `local_columns[local_offsets[i]..local_offsets[i + 1]]`, ascending.
    pub local_offsets: Vec<u64>,
    /// Neighbour positions, row after row.
    pub local_columns: Vec<u32>,
    /// The worker's feature rows.
    pub features: Option<Features>,
    /// Where each row's values start in the whole feature matrix's values.
    pub feature_starts: Vec<u64>,
    /// Each vertex's class, if the dataset has labels.
    pub labels: Option<Vec<u32>>,
    /// Positions in `ids` of the split's vertices, in the order the dataset lists them (the
    /// order losses are summed in).
    pub train: Vec<u32>,
    /// Positions of the validation vertices, as `train`.
    pub val: Vec<u32>,
    /// Positions of the test vertices, as `train`.
    pub test: Vec<u32>,
}

/// Cuts a dataset into the shards of an assignment; the whole-graph figures are computed once.
#[derive(Debug)]
pub struct Cutter<'a> {
    dataset: &'a Dataset,
    parts: &'a [u32],
    /// Each vertex's position among its own worker's vertices.
    position: Vec<u32>,
    meta: ShardMeta,
}

/// The most neighbours one vertex has on other workers (`parts[v]`: vertex `v`'s worker): the
/// most terms any sum of an exchange has, which sizes the fixed-point scale every worker must
/// share.
pub fn most_remote_neighbours(graph: &Graph, parts: &[u32]) -> u64 {
    (0..graph.num_vertices() as u32)
        .into_par_iter()
        .map(|v| {
            let own = parts[v as usize];
            graph
                .neighbors(v)
                .iter()
                .filter(|&&u| parts[u as usize] != own)
                .count() as u64
        })
        .max()
        .unwrap_or(0)
}

impl<'a> Cutter<'a> {
    /// `parts[v]` is vertex `v`'s worker, out of `workers`.
    pub fn new(dataset: &'a Dataset, parts: &'a [u32], workers: u32) -> Result<Cutter<'a>> {
        let graph = &dataset.graph;
        let n = graph.num_vertices();
        if parts.len() != n {
            return Err(PartitionError::Usage(format!(
                "the assignment covers {} vertices, the graph has {n}",
                parts.len()
            )));
        }
        if let Some(v) = parts.iter().position(|&p| p >= workers) {
            return Err(PartitionError::Usage(format!(
                "vertex {v} is assigned to worker {} of {workers}",
                parts[v]
            )));
        }
        let mut counts = vec![0u32; workers as usize];
        let position = parts
            .iter()
            .map(|&p| {
                let at = counts[p as usize];
                counts[p as usize] += 1;
                at
            })
            .collect();
        let max_remote_degree = most_remote_neighbours(graph, parts);
        let features = dataset.features.as_ref().map(|f| {
            let values = match f {
                Features::Dense(d) => d.values(),
                Features::Sparse(s) => s.values(),
            };
            FeatureShape {
                cols: f.cols(),
                sparse: f.is_sparse(),
                nonnegative: values.par_iter().all(|&x| x >= 0.0),
            }
        });
        let split = &dataset.split;
        let meta = ShardMeta {
            rank: 0,
            workers,
            dataset: dataset.name.clone(),
            vertices: n,
            edges: graph.num_edges(),
            self_loops: graph.num_self_loops(),
            graph_fingerprint: graph_fingerprint(graph),
            assignment_fingerprint: assignment_fingerprint(parts),
            features,
            labels: dataset.labels.as_ref().map(|l| LabelShape {
                num_classes: l.num_classes(),
                class_names: l.class_names().map(<[String]>::to_vec),
            }),
            split: split.source.clone(),
            split_sizes: [split.train.len(), split.val.len(), split.test.len()],
            max_remote_degree,
            writer: concat!("switchgnn-partition ", env!("CARGO_PKG_VERSION")).into(),
        };
        Ok(Cutter {
            dataset,
            parts,
            position,
            meta,
        })
    }

    /// Worker `rank`'s shard.
    pub fn cut(&self, rank: u32) -> DataShard {
        let (dataset, parts) = (self.dataset, self.parts);
        let graph = &dataset.graph;
        let ids: Vec<u32> = (0..graph.num_vertices() as u32)
            .filter(|&v| parts[v as usize] == rank)
            .collect();
        let degrees = ids.iter().map(|&v| graph.degree(v) as u32).collect();
        let mut local_offsets = Vec::with_capacity(ids.len() + 1);
        let mut local_columns = Vec::new();
        local_offsets.push(0u64);
        for &v in &ids {
            local_columns.extend(
                graph
                    .neighbors(v)
                    .iter()
                    .filter(|&&u| parts[u as usize] == rank)
                    .map(|&u| self.position[u as usize]),
            );
            local_offsets.push(local_columns.len() as u64);
        }
        let (features, feature_starts) = match &dataset.features {
            None => (None, Vec::new()),
            Some(Features::Dense(d)) => {
                let cols = d.cols();
                let values = ids.iter().flat_map(|&v| d.row(v as usize)).copied();
                let starts = ids.iter().map(|&v| u64::from(v) * cols as u64).collect();
                let rows = DenseFeatures::new(ids.len(), cols, values.collect())
                    .expect("rows of a valid matrix");
                (Some(Features::Dense(rows)), starts)
            }
            Some(Features::Sparse(s)) => {
                let mut indptr = Vec::with_capacity(ids.len() + 1);
                let (mut indices, mut values) = (Vec::new(), Vec::new());
                indptr.push(0u64);
                for &v in &ids {
                    let (c, x) = s.row(v as usize);
                    indices.extend_from_slice(c);
                    values.extend_from_slice(x);
                    indptr.push(indices.len() as u64);
                }
                let starts = ids.iter().map(|&v| s.indptr()[v as usize]).collect();
                let rows = SparseFeatures::new(ids.len(), s.cols(), indptr, indices, values)
                    .expect("rows of a valid matrix");
                (Some(Features::Sparse(rows)), starts)
            }
        };
        let labels = dataset
            .labels
            .as_ref()
            .map(|l| ids.iter().map(|&v| l.values()[v as usize]).collect());
        let positions = |split: &[u32]| -> Vec<u32> {
            split
                .iter()
                .filter(|&&v| parts[v as usize] == rank)
                .map(|&v| self.position[v as usize])
                .collect()
        };
        let split = &dataset.split;
        DataShard {
            meta: ShardMeta {
                rank,
                ..self.meta.clone()
            },
            degrees,
            local_offsets,
            local_columns,
            features,
            feature_starts,
            labels,
            train: positions(&split.train),
            val: positions(&split.val),
            test: positions(&split.test),
            ids,
        }
    }
}

/// Write every worker's shard of `plan` (prepared for `dataset`) into the plan directory
/// `dir`, several at once; `done` hears each rank as its file is in place. Returns the files'
/// total size in bytes.
pub fn write_shards(
    dataset: &Dataset,
    plan: &Plan,
    dir: &Path,
    done: &(dyn Fn(u32) + Sync),
) -> Result<u64> {
    if graph_fingerprint(&dataset.graph) != plan.manifest.dataset.fingerprint {
        return Err(PartitionError::Usage(format!(
            "the plan in {} was prepared for another graph than `{}`",
            dir.display(),
            dataset.name
        )));
    }
    let workers = plan.manifest.spec.workers;
    let cutter = Cutter::new(dataset, plan.assignment.parts(), workers)?;
    let folder = dir.join(SHARDS_DIR);
    std::fs::create_dir_all(&folder).map_err(|e| switchgnn_datasets::Error::io(&folder, e))?;
    (0..workers)
        .into_par_iter()
        .map(|rank| {
            let path = shard_path(dir, rank);
            cutter.cut(rank).write(&path)?;
            done(rank);
            let len = std::fs::metadata(&path)
                .map_err(|e| switchgnn_datasets::Error::io(&path, e))?
                .len();
            Ok(len)
        })
        .sum()
}

impl DataShard {
    /// Vertices of this shard.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether the worker owns no vertex.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Row `i`'s neighbours among the shard's vertices (positions, ascending).
    pub fn local_row(&self, i: usize) -> &[u32] {
        &self.local_columns[self.local_offsets[i] as usize..self.local_offsets[i + 1] as usize]
    }

    /// Whether vertex `i` has neighbours on other workers.
    pub fn on_boundary(&self, i: usize) -> bool {
        self.degrees[i] as usize > self.local_row(i).len()
    }

    /// Write the shard to `path` atomically.
    pub fn write(&self, path: &Path) -> Result<()> {
        let meta = serde_json::to_vec(&self.meta).expect("meta serialises");
        let mut sections = vec![
            Section::u8s("meta", &meta),
            Section::u32s("ids", &self.ids),
            Section::u32s("degrees", &self.degrees),
            Section::u64s("local.offsets", &self.local_offsets),
            Section::u32s("local.columns", &self.local_columns),
            Section::u32s("split.train", &self.train),
            Section::u32s("split.val", &self.val),
            Section::u32s("split.test", &self.test),
        ];
        match &self.features {
            Some(Features::Dense(d)) => sections.push(Section::f32s("feat.values", d.values())),
            Some(Features::Sparse(s)) => {
                sections.push(Section::f32s("feat.values", s.values()));
                sections.push(Section::u64s("feat.indptr", s.indptr()));
                sections.push(Section::u32s("feat.indices", s.indices()));
            }
            None => {}
        }
        if self.features.is_some() {
            sections.push(Section::u64s("feat.starts", &self.feature_starts));
        }
        if let Some(l) = &self.labels {
            sections.push(Section::u32s("labels", l));
        }
        switchgnn_datasets::container::write(path, MAGIC, VERSION, &sections)?;
        Ok(())
    }

    /// Read and check a shard file.
    pub fn read(path: &Path) -> Result<DataShard> {
        let file = open_shard(path)?;
        let meta: ShardMeta = file.json("meta")?;
        let ids = file.u32s("ids")?;
        let n = ids.len();
        let bad = |section: &str, why: String| -> PartitionError {
            file.bad(format!("section `{section}`"), why).into()
        };
        if meta.rank >= meta.workers {
            return Err(bad(
                "meta",
                format!("rank {} of {} workers", meta.rank, meta.workers),
            ));
        }
        if let Some(i) = (1..n).find(|&i| ids[i - 1] >= ids[i]) {
            return Err(bad("ids", format!("entry {i} is not ascending")));
        }
        if ids.last().is_some_and(|&v| v as usize >= meta.vertices) {
            return Err(bad(
                "ids",
                format!("vertex beyond the graph's {}", meta.vertices),
            ));
        }
        let degrees = file.u32s("degrees")?;
        let local_offsets = file.u64s("local.offsets")?;
        let local_columns = file.u32s("local.columns")?;
        if degrees.len() != n {
            return Err(bad(
                "degrees",
                format!("{} entries for {n} vertices", degrees.len()),
            ));
        }
        check_csr(&local_offsets, &local_columns, n, n).map_err(|why| bad("local.columns", why))?;
        if let Some(i) =
            (0..n).find(|&i| (local_offsets[i + 1] - local_offsets[i]) > u64::from(degrees[i]))
        {
            return Err(bad(
                "degrees",
                format!(
                    "vertex {} has more local neighbours than its degree",
                    ids[i]
                ),
            ));
        }
        let (features, feature_starts) = match &meta.features {
            None => (None, Vec::new()),
            Some(shape) => {
                let values = file.f32s("feat.values")?;
                let features = if shape.sparse {
                    let indptr = file.u64s("feat.indptr")?;
                    let indices = file.u32s("feat.indices")?;
                    Features::Sparse(
                        SparseFeatures::new(n, shape.cols, indptr, indices, values)
                            .map_err(|e| PartitionError::from(e.at(path)))?,
                    )
                } else {
                    Features::Dense(
                        DenseFeatures::new(n, shape.cols, values)
                            .map_err(|e| PartitionError::from(e.at(path)))?,
                    )
                };
                let starts = file.u64s("feat.starts")?;
                if starts.len() != n {
                    return Err(bad(
                        "feat.starts",
                        format!("{} entries for {n} vertices", starts.len()),
                    ));
                }
                (Some(features), starts)
            }
        };
        let labels = match &meta.labels {
            None => None,
            Some(shape) => {
                let labels = file.u32s("labels")?;
                if labels.len() != n {
                    return Err(bad(
                        "labels",
                        format!("{} labels for {n} vertices", labels.len()),
                    ));
                }
                if let Some(i) = labels.iter().position(|&c| c >= shape.num_classes) {
                    return Err(bad(
                        "labels",
                        format!(
                            "vertex {}: class {} of {}",
                            ids[i], labels[i], shape.num_classes
                        ),
                    ));
                }
                Some(labels)
            }
        };
        let mut split = Vec::with_capacity(3);
        for name in ["split.train", "split.val", "split.test"] {
            let p = file.u32s(name)?;
            if p.iter().any(|&i| i as usize >= n) {
                return Err(bad(
                    name,
                    format!("a position beyond the shard's {n} vertices"),
                ));
            }
            split.push(p);
        }
        let test = split.pop().expect("three");
        let val = split.pop().expect("three");
        let train = split.pop().expect("three");
        Ok(DataShard {
            meta,
            ids,
            degrees,
            local_offsets,
            local_columns,
            features,
            feature_starts,
            labels,
            train,
            val,
            test,
        })
    }

    /// Refuse a shard (read from `path`) that was not cut for worker `rank` of `plan`.
    pub fn check_plan(&self, plan: &Plan, rank: u32, path: &Path) -> Result<()> {
        self.meta.check_plan(plan, rank, path)
    }
}

/// A shard file opened and its format version checked.
fn open_shard(path: &Path) -> Result<Container> {
    let file = Container::open(path, MAGIC, "switchgnn shard")?;
    if file.version() != VERSION {
        return Err(file
            .bad(
                "header",
                format!(
                    "shard format {}, this build reads {VERSION}; write the shards again \
                     with `switchgnn shard`",
                    file.version()
                ),
            )
            .into());
    }
    Ok(file)
}

impl ShardMeta {
    /// Read only the header of the shard at `path`: what a reader that needs the whole graph's
    /// figures (the fixed-point term count) takes without loading the rows.
    pub fn read(path: &Path) -> Result<ShardMeta> {
        Ok(open_shard(path)?.json("meta")?)
    }

    /// Refuse a shard (read from `path`) that was not cut for worker `rank` of `plan`.
    pub fn check_plan(&self, plan: &Plan, rank: u32, path: &Path) -> Result<()> {
        let m = self;
        let want_graph = plan.manifest.dataset.fingerprint;
        let want_assignment = assignment_fingerprint(plan.assignment.parts());
        let why = if m.graph_fingerprint != want_graph {
            Some(ShardMismatch::OtherGraph {
                dataset: m.dataset.clone(),
                found: m.graph_fingerprint,
                want: want_graph,
            })
        } else if m.workers != plan.manifest.spec.workers
            || m.assignment_fingerprint != want_assignment
        {
            Some(ShardMismatch::OtherPartition {
                workers: m.workers,
                found: m.assignment_fingerprint,
                plan_workers: plan.manifest.spec.workers,
                want: want_assignment,
            })
        } else if m.rank != rank {
            Some(ShardMismatch::OtherWorker {
                found: m.rank,
                want: rank,
            })
        } else {
            None
        };
        match why {
            None => Ok(()),
            Some(why) => Err(PartitionError::ShardMismatch {
                path: path.to_path_buf(),
                why,
            }),
        }
    }
}

/// Check a CSR of `rows` rows over `cols` columns: offsets from 0 to the column count, never
/// decreasing, columns in range and strictly ascending in every row.
fn check_csr(
    offsets: &[u64],
    columns: &[u32],
    rows: usize,
    cols: usize,
) -> std::result::Result<(), String> {
    if offsets.len() != rows + 1 || offsets[0] != 0 || offsets[rows] != columns.len() as u64 {
        return Err(format!(
            "{} offsets for {rows} rows and {} entries",
            offsets.len(),
            columns.len()
        ));
    }
    for i in 0..rows {
        let (a, z) = (offsets[i], offsets[i + 1]);
        if a > z {
            return Err(format!("row {i}'s offsets decrease"));
        }
        let row = &columns[a as usize..z as usize];
        if row.windows(2).any(|w| w[0] >= w[1]) || row.last().is_some_and(|&c| c as usize >= cols) {
            return Err(format!("row {i} is not ascending within {cols} columns"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchgnn_datasets::synthetic::{generate, Preset};

    fn dataset() -> Dataset {
        generate(
            &Preset::Small.spec(0.2, 3).unwrap(),
            &switchgnn_datasets::NoProgress,
        )
        .unwrap()
    }

    fn halves(n: usize) -> Vec<u32> {
        (0..n as u32).map(|v| (v * 7 + v / 3) % 3).collect()
    }

    #[test]
    fn shards_cover_the_graph_exactly_once() {
        let d = dataset();
        let parts = halves(d.num_vertices());
        let cutter = Cutter::new(&d, &parts, 3).unwrap();
        let shards: Vec<DataShard> = (0..3).map(|r| cutter.cut(r)).collect();
        let mut all: Vec<u32> = shards.iter().flat_map(|s| s.ids.clone()).collect();
        all.sort_unstable();
        assert_eq!(all, (0..d.num_vertices() as u32).collect::<Vec<_>>());
        let train: usize = shards.iter().map(|s| s.train.len()).sum();
        assert_eq!(train, d.split.train.len());
        // Every edge is local to one shard or counted by both ends' degrees as remote.
        let local: u64 = shards.iter().map(|s| s.local_columns.len() as u64).sum();
        let remote: u64 = shards
            .iter()
            .flat_map(|s| {
                (0..s.len()).map(move |i| u64::from(s.degrees[i]) - s.local_row(i).len() as u64)
            })
            .sum();
        assert_eq!(local + remote, d.graph.neighbor_ids().len() as u64);
        let most = shards
            .iter()
            .flat_map(|s| {
                (0..s.len()).map(move |i| u64::from(s.degrees[i]) - s.local_row(i).len() as u64)
            })
            .max()
            .unwrap();
        assert_eq!(shards[0].meta.max_remote_degree, most);
        // A shard's rows are the dataset's rows.
        let s = &shards[1];
        let (Some(Features::Dense(whole)), Some(Features::Dense(part))) =
            (&d.features, &s.features)
        else {
            panic!("the small preset has dense features");
        };
        for (i, &v) in s.ids.iter().enumerate() {
            assert_eq!(part.row(i), whole.row(v as usize));
            assert_eq!(
                s.labels.as_ref().unwrap()[i],
                d.labels.as_ref().unwrap().values()[v as usize]
            );
        }
    }

    #[test]
    fn a_shard_round_trips_and_bad_files_are_named() {
        let d = dataset();
        let parts = halves(d.num_vertices());
        let shard = Cutter::new(&d, &parts, 3).unwrap().cut(2);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.shard");
        shard.write(&path).unwrap();
        assert_eq!(DataShard::read(&path).unwrap(), shard);

        // One flipped byte in the data: the checksum names the section.
        let mut bytes = std::fs::read(&path).unwrap();
        let at = bytes.len() - 100;
        bytes[at] ^= 0xff;
        std::fs::write(&path, &bytes).unwrap();
        let err = DataShard::read(&path).unwrap_err().to_string();
        assert!(err.contains("w.shard") && err.contains("checksum"), "{err}");

        // A dataset cache is not a shard.
        switchgnn_datasets::cache::write(&d, &path).unwrap();
        let err = DataShard::read(&path).unwrap_err().to_string();
        assert!(err.contains("not a switchgnn shard"), "{err}");

        // A well-formed file whose CSR lies is refused by name.
        let mut lying = shard.clone();
        lying.local_columns[0] = u32::MAX;
        lying.write(&path).unwrap();
        let err = DataShard::read(&path).unwrap_err().to_string();
        assert!(err.contains("local.columns"), "{err}");
    }
}
