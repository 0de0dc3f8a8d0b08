//! Tensors built from a dataset: the propagation matrix of each model kind as a sparse CSR
//! tensor, the input features (dense, or CSR multiplied without densifying), labels and split
//! indices.
//!
//! Propagation matrices are kept *separable*: `P = diag(left) · S · diag(right)` with `S` a 0/1
//! structure (the graph, plus self-loops for GCN). The local product uses `P` with the scales
//! folded into its values, one CSR product per call; a distributed worker can scale by `right`
//! before sending and by `left` after summing, so the network only ever adds.

use switchgnn_datasets::{Dataset, Features, Graph};
use switchgnn_partition::shard::DataShard;
use tch::{Device, Kind, Tensor};

use crate::error::{Result, TrainError};

/// A propagation matrix `P = diag(left) · S · diag(right)` and its transpose, as CSR tensors.
#[derive(Debug)]
pub struct Propagation {
    forward: Tensor,
    /// `Pᵀ` when `P` is not symmetric; `None` when `P` is (GCN's `D^-1/2 (A+I) D^-1/2`).
    transpose: Option<Tensor>,
    /// Per-row scale applied after summing (`1/√d` for GCN, `1/d` for the mean).
    pub left: Vec<f32>,
    /// Per-column scale applied before sending (`1/√d` for GCN, 1 for the mean).
    pub right: Vec<f32>,
    rows: usize,
    entries: usize,
}

impl Propagation {
    /// GCN's symmetric normalisation with self-loops: `D̂^-1/2 (A + I) D̂^-1/2`, where `D̂` counts
    /// the self-loop. A self-loop the graph already has is not added twice.
    pub fn gcn(graph: &Graph) -> Propagation {
        Propagation::gcn_local(&LocalGraph::whole(graph))
    }

    /// The neighbour mean of GraphSAGE: `D^-1 A` without self-loops (an isolated vertex's mean is
    /// zero). Its transpose `A D^-1` has the same structure, since the graph is symmetric.
    pub fn mean(graph: &Graph) -> Propagation {
        Propagation::mean_local(&LocalGraph::whole(graph))
    }

    /// The block of GCN's `P` among `local`'s rows (a worker's own vertices): the scales come
    /// from the whole graph's degrees, the entries only from edges among the rows.
    pub fn gcn_local(local: &LocalGraph<'_>) -> Propagation {
        let scale: Vec<f32> = (0..local.len())
            .map(|i| {
                let with_loop = local.degree(i) + usize::from(!local.has_self_loop(i));
                1.0 / (with_loop as f32).sqrt()
            })
            .collect();
        let (offsets, columns) = local.structure(true);
        let values = csr_values(&offsets, &columns, |row, col| scale[row] * scale[col]);
        Propagation {
            forward: csr_tensor(&offsets, &columns, values, local.len()),
            transpose: None,
            left: scale.clone(),
            right: scale,
            rows: local.len(),
            entries: columns.len(),
        }
    }

    /// The block of GraphSAGE's mean among `local`'s rows; see [`Propagation::gcn_local`].
    pub fn mean_local(local: &LocalGraph<'_>) -> Propagation {
        let inv_degree: Vec<f32> = (0..local.len())
            .map(|i| match local.degree(i) {
                0 => 0.0,
                d => 1.0 / d as f32,
            })
            .collect();
        let (offsets, columns) = local.structure(false);
        let forward = csr_values(&offsets, &columns, |row, _| inv_degree[row]);
        let transpose = csr_values(&offsets, &columns, |_, col| inv_degree[col]);
        Propagation {
            forward: csr_tensor(&offsets, &columns, forward, local.len()),
            transpose: Some(csr_tensor(&offsets, &columns, transpose, local.len())),
            left: inv_degree,
            right: vec![1.0; local.len()],
            rows: local.len(),
            entries: columns.len(),
        }
    }

    /// `P · z`.
    pub fn apply(&self, z: &Tensor) -> Tensor {
        self.forward.mm(z)
    }

    /// `Pᵀ · g`: the gradient of `P · z` with respect to `z`.
    pub fn apply_transpose(&self, g: &Tensor) -> Tensor {
        self.transpose.as_ref().unwrap_or(&self.forward).mm(g)
    }

    /// `P` as a CSR tensor.
    pub fn matrix(&self) -> &Tensor {
        &self.forward
    }

    /// Rows of `P`: the vertices it aggregates into.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Stored entries of `P` (edges in both directions plus self-loops).
    pub fn entries(&self) -> usize {
        self.entries
    }
}

/// The rows a propagation block is built from: each row's neighbours among the rows (positions,
/// ascending) and each row's degree in the whole graph. The whole graph in one process, or one
/// worker's shard.
#[derive(Debug, Clone, Copy)]
pub struct LocalGraph<'a> {
    offsets: &'a [u64],
    columns: &'a [u32],
    /// Whole-graph degrees; `None` when the rows are the whole graph (a row's length is then
    /// its degree).
    degrees: Option<&'a [u32]>,
}

impl<'a> LocalGraph<'a> {
    /// Every vertex of `graph`.
    pub fn whole(graph: &'a Graph) -> LocalGraph<'a> {
        LocalGraph {
            offsets: graph.offsets(),
            columns: graph.neighbor_ids(),
            degrees: None,
        }
    }

    /// A worker's vertices, from its shard.
    pub fn of_shard(shard: &'a DataShard) -> LocalGraph<'a> {
        LocalGraph {
            offsets: &shard.local_offsets,
            columns: &shard.local_columns,
            degrees: Some(&shard.degrees),
        }
    }

    /// Rows.
    pub fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    /// Whether there are no rows.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn row(&self, i: usize) -> &'a [u32] {
        &self.columns[self.offsets[i] as usize..self.offsets[i + 1] as usize]
    }

    fn degree(&self, i: usize) -> usize {
        self.degrees.map_or(self.row(i).len(), |d| d[i] as usize)
    }

    fn has_self_loop(&self, i: usize) -> bool {
        self.row(i).binary_search(&(i as u32)).is_ok()
    }

    /// The rows' CSR with `(i, i)` merged into every row when `self_loops` (a self-loop the
    /// graph has is kept once).
    fn structure(&self, self_loops: bool) -> (Vec<u64>, Vec<u32>) {
        let mut offsets = Vec::with_capacity(self.len() + 1);
        let mut columns = Vec::with_capacity(self.columns.len() + self.len());
        offsets.push(0u64);
        for i in 0..self.len() {
            let row = self.row(i);
            let at = row.partition_point(|&u| u < i as u32);
            let has_loop = row.get(at) == Some(&(i as u32));
            let rest = if has_loop { at + 1 } else { at };
            columns.extend_from_slice(&row[..at]);
            if self_loops || has_loop {
                columns.push(i as u32);
            }
            columns.extend_from_slice(&row[rest..]);
            offsets.push(columns.len() as u64);
        }
        (offsets, columns)
    }
}

fn csr_values(offsets: &[u64], columns: &[u32], value: impl Fn(usize, usize) -> f32) -> Vec<f32> {
    let mut values = Vec::with_capacity(columns.len());
    for row in 0..offsets.len() - 1 {
        for &col in &columns[offsets[row] as usize..offsets[row + 1] as usize] {
            values.push(value(row, col as usize));
        }
    }
    values
}

/// A square `n × n` CSR tensor of `f32` values.
fn csr_tensor(offsets: &[u64], columns: &[u32], values: Vec<f32>, n: usize) -> Tensor {
    csr_matrix(offsets, columns, &values, n, n)
}

fn csr_matrix(
    offsets: &[u64],
    columns: &[u32],
    values: &[f32],
    rows: usize,
    cols: usize,
) -> Tensor {
    let crow = filled(offsets.len(), 1, |at, out: &mut [i64]| {
        for (o, &x) in out.iter_mut().zip(&offsets[at..]) {
            *o = x as i64;
        }
    });
    let col = filled(columns.len(), 1, |at, out: &mut [i64]| {
        for (o, &x) in out.iter_mut().zip(&columns[at..]) {
            *o = i64::from(x);
        }
    });
    Tensor::sparse_csr_tensor_crow_col_value_size(
        &crow,
        &col,
        &Tensor::from_slice(values),
        [rows as i64, cols as i64],
        (Kind::Float, Device::Cpu),
    )
}

/// A 1-D tensor of `len` entries written block by block: `fill(start, block)` writes entries
/// `start..start + block.len()`, and blocks are whole multiples of `unit` entries (a row). Only
/// one block of about 4 MiB exists beside the tensor at any time, so a large tensor never
/// costs twice its size on the way in (as building a `Vec` and copying it would).
pub(crate) fn filled<T>(len: usize, unit: usize, fill: impl Fn(usize, &mut [T])) -> Tensor
where
    T: tch::kind::Element + Default + Copy,
{
    let unit = unit.max(1);
    let block = ((1usize << 22) / std::mem::size_of::<T>() / unit).max(1) * unit;
    let tensor = Tensor::zeros([len as i64], (T::KIND, Device::Cpu));
    let mut buffer = vec![T::default(); block.min(len)];
    let mut start = 0;
    while start < len {
        let n = block.min(len - start);
        let chunk = &mut buffer[..n];
        fill(start, chunk);
        tensor
            .narrow(0, start as i64, n as i64)
            .copy_(&Tensor::from_slice(chunk));
        start += n;
    }
    tensor
}

/// How input features are scaled before training.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FeatureNorm {
    /// Leave the features as they are.
    None,
    /// Divide every row by its sum (Kipf & Welling's preprocessing of bag-of-words features);
    /// rows summing to zero stay zero.
    Row,
    /// `Row` when no feature is negative (bag-of-words, counts), `None` otherwise.
    Auto,
}

impl FeatureNorm {
    /// The normalisation `Auto` stands for, given whether every feature is non-negative.
    fn resolve(self, nonnegative: impl FnOnce() -> bool) -> FeatureNorm {
        match self {
            FeatureNorm::Auto if nonnegative() => FeatureNorm::Row,
            FeatureNorm::Auto => FeatureNorm::None,
            n => n,
        }
    }

    /// The normalisation's name on the command line and in logs.
    pub fn name(self) -> &'static str {
        match self {
            FeatureNorm::None => "none",
            FeatureNorm::Row => "row",
            FeatureNorm::Auto => "auto",
        }
    }
}

impl std::str::FromStr for FeatureNorm {
    type Err = TrainError;

    fn from_str(s: &str) -> Result<Self> {
        match s {
            "none" => Ok(FeatureNorm::None),
            "row" => Ok(FeatureNorm::Row),
            "auto" => Ok(FeatureNorm::Auto),
            other => Err(TrainError::Config(format!(
                "feature normalisation `{other}`: expected none, row or auto"
            ))),
        }
    }
}

/// Input features as tensors: dense, or CSR kept sparse.
#[derive(Debug)]
pub enum FeatureMatrix {
    /// A dense `f32` matrix, one row per vertex.
    Dense(Tensor),
    /// CSR, multiplied as such.
    Sparse(SparseInput),
}

/// A CSR feature matrix and its transpose. Training needs `Xᵀ · G` for the first layer's
/// weight gradient every epoch; libtorch's autograd would transpose the CSR matrix for that each
/// time (300 ms an epoch on Amazon-Computers), so the transpose is built once here, with the
/// permutation that carries a dropout mask over to its values.
#[derive(Debug)]
pub struct SparseInput {
    crow: Tensor,
    col: Tensor,
    values: Tensor,
    rows: usize,
    cols: usize,
    t_crow: Tensor,
    t_col: Tensor,
    /// Entry `k` of the transpose is entry `t_perm[k]` of `X`.
    t_perm: Tensor,
}

impl SparseInput {
    fn new(indptr: &[u64], indices: &[u32], values: Vec<f32>, rows: usize, cols: usize) -> Self {
        // Counting sort by column gives the transpose's CSR (rows of Xᵀ = columns of X), with
        // entries in increasing row order within each of its rows.
        let mut t_offsets = vec![0u64; cols + 1];
        for &c in indices {
            t_offsets[c as usize + 1] += 1;
        }
        for c in 0..cols {
            t_offsets[c + 1] += t_offsets[c];
        }
        let mut next: Vec<u64> = t_offsets[..cols].to_vec();
        let mut t_col = vec![0i64; indices.len()];
        let mut t_perm = vec![0i64; indices.len()];
        for r in 0..rows {
            let range = indptr[r] as usize..indptr[r + 1] as usize;
            for (k, &c) in range.clone().zip(&indices[range]) {
                let c = c as usize;
                let at = next[c] as usize;
                next[c] += 1;
                t_col[at] = r as i64;
                t_perm[at] = k as i64;
            }
        }
        let i64s = |v: &[u64]| Tensor::from_slice(&v.iter().map(|&o| o as i64).collect::<Vec<_>>());
        SparseInput {
            crow: i64s(indptr),
            col: Tensor::from_slice(&indices.iter().map(|&c| i64::from(c)).collect::<Vec<_>>()),
            values: Tensor::from_slice(&values),
            rows,
            cols,
            t_crow: i64s(&t_offsets),
            t_col: Tensor::from_slice(&t_col),
            t_perm: Tensor::from_slice(&t_perm),
        }
    }

    fn masked_values(&self, mask: Option<&Tensor>) -> Tensor {
        match mask {
            Some(m) => &self.values * m,
            None => self.values.shallow_clone(),
        }
    }

    /// `X ⊙ mask` as a CSR tensor.
    fn masked(&self, mask: Option<&Tensor>) -> Tensor {
        csr(
            &self.crow,
            &self.col,
            &self.masked_values(mask),
            self.rows,
            self.cols,
        )
    }

    /// `(X ⊙ mask)ᵀ` as a CSR tensor.
    fn masked_transpose(&self, mask: Option<&Tensor>) -> Tensor {
        let values = self.masked_values(mask).index_select(0, &self.t_perm);
        csr(&self.t_crow, &self.t_col, &values, self.cols, self.rows)
    }
}

fn csr(crow: &Tensor, col: &Tensor, values: &Tensor, rows: usize, cols: usize) -> Tensor {
    Tensor::sparse_csr_tensor_crow_col_value_size(
        crow,
        col,
        values,
        [rows as i64, cols as i64],
        (Kind::Float, Device::Cpu),
    )
}

impl FeatureMatrix {
    /// Tensors of `features`, row-normalised as `norm` says. Returns the normalisation applied.
    pub fn new(features: &Features, norm: FeatureNorm) -> (FeatureMatrix, FeatureNorm) {
        let values = match features {
            Features::Dense(d) => d.values(),
            Features::Sparse(s) => s.values(),
        };
        let applied = norm.resolve(|| values.iter().all(|&x| x >= 0.0));
        (FeatureMatrix::build(features, applied), applied)
    }

    /// A worker's feature rows, normalised as `norm` says; `Auto` is decided over the whole
    /// matrix (the shard records it), so every worker decides alike. Also returns where the
    /// dropout mask's entries of these rows sit in the whole matrix's mask, as `(start, len)`
    /// runs. `None` when the dataset has no features.
    #[allow(clippy::type_complexity)]
    pub fn of_shard(
        shard: &DataShard,
        norm: FeatureNorm,
    ) -> Option<(FeatureMatrix, FeatureNorm, Vec<(u64, usize)>)> {
        let (features, shape) = (shard.features.as_ref()?, shard.meta.features.as_ref()?);
        let applied = norm.resolve(|| shape.nonnegative);
        let runs = (0..features.rows())
            .map(|i| {
                let len = match features {
                    Features::Dense(d) => d.cols(),
                    Features::Sparse(s) => (s.indptr()[i + 1] - s.indptr()[i]) as usize,
                };
                (shard.feature_starts[i], len)
            })
            .collect();
        Some((FeatureMatrix::build(features, applied), applied, runs))
    }

    /// Tensors of every row of `features`, normalised as `applied` says.
    fn build(features: &Features, applied: FeatureNorm) -> FeatureMatrix {
        let scaled = |row: &mut [f32]| {
            if applied == FeatureNorm::Row {
                let sum: f32 = row.iter().sum();
                let s = if sum == 0.0 { 0.0 } else { 1.0 / sum };
                row.iter_mut().for_each(|x| *x *= s);
            }
        };
        let (n, cols) = (features.rows(), features.cols());
        match features {
            Features::Dense(d) => {
                let values = filled(n * cols, cols, |at, out: &mut [f32]| {
                    out.copy_from_slice(&d.values()[at..at + out.len()]);
                    out.chunks_mut(cols).for_each(scaled);
                });
                FeatureMatrix::Dense(values.reshape([n as i64, cols as i64]))
            }
            Features::Sparse(s) => {
                let mut values = s.values().to_vec();
                let p = s.indptr();
                for i in 0..n {
                    scaled(&mut values[p[i] as usize..p[i + 1] as usize]);
                }
                FeatureMatrix::Sparse(SparseInput::new(p, s.indices(), values, n, cols))
            }
        }
    }

    /// Rows: one per vertex held.
    pub fn rows(&self) -> usize {
        match self {
            FeatureMatrix::Dense(t) => t.size()[0] as usize,
            FeatureMatrix::Sparse(s) => s.rows,
        }
    }

    /// Feature width.
    pub fn cols(&self) -> usize {
        match self {
            FeatureMatrix::Dense(t) => t.size()[1] as usize,
            FeatureMatrix::Sparse(s) => s.cols,
        }
    }

    /// Entries a dropout mask covers: every cell when dense, the stored values when sparse.
    pub fn mask_len(&self) -> usize {
        match self {
            FeatureMatrix::Dense(t) => t.numel(),
            FeatureMatrix::Sparse(s) => s.values.numel(),
        }
    }

    /// `(X ⊙ mask) · w`, the mask (if any) covering [`FeatureMatrix::mask_len`] entries. A sparse
    /// `X` stays sparse: the mask scales its stored values and the product is a CSR product.
    pub fn matmul(&self, w: &Tensor, mask: Option<&Tensor>) -> Tensor {
        match self {
            FeatureMatrix::Dense(x) => match mask {
                Some(m) => (x * m.view_as(x)).mm(w),
                None => x.mm(w),
            },
            FeatureMatrix::Sparse(s) => s.masked(mask).mm(w),
        }
    }

    /// `(X ⊙ mask)ᵀ · g`: the gradient of [`FeatureMatrix::matmul`] with respect to `w`.
    pub fn transpose_matmul(&self, g: &Tensor, mask: Option<&Tensor>) -> Tensor {
        match self {
            FeatureMatrix::Dense(x) => match mask {
                Some(m) => (x * m.view_as(x)).transpose(0, 1).mm(g),
                None => x.transpose(0, 1).mm(g),
            },
            FeatureMatrix::Sparse(s) => s.masked_transpose(mask).mm(g),
        }
    }

    /// `X ⊙ mask` as a dense tensor; only for narrow inputs, which are aggregated before they
    /// are projected (see the model's layer order).
    pub fn masked_dense(&self, mask: Option<&Tensor>) -> Tensor {
        match self {
            FeatureMatrix::Dense(x) => match mask {
                Some(m) => x * m.view_as(x),
                None => x.shallow_clone(),
            },
            FeatureMatrix::Sparse(s) => s.masked(mask).to_dense(None, false),
        }
    }
}

/// Labels and split as index tensors.
#[derive(Debug)]
pub struct Targets {
    /// Class of every vertex (`i64`).
    pub labels: Tensor,
    /// Classes: the model's output width.
    pub num_classes: usize,
    /// Rows of the training vertices (`i64`).
    pub train: Tensor,
    /// Rows of the validation vertices (`i64`).
    pub val: Tensor,
    /// Rows of the test vertices (`i64`).
    pub test: Tensor,
    /// Training vertices of the whole graph: the loss is a mean over them.
    pub train_len: usize,
    /// Validation vertices of the whole graph.
    pub val_len: usize,
    /// Test vertices of the whole graph.
    pub test_len: usize,
}

impl Targets {
    /// The whole dataset's labels and split; an error when it has no labels or an empty
    /// training or validation set.
    pub fn new(dataset: &Dataset) -> Result<Targets> {
        let labels = dataset.labels.as_ref().ok_or(TrainError::NoLabels)?;
        let split = &dataset.split;
        Targets::of_parts(
            labels.values(),
            labels.num_classes() as usize,
            [&split.train, &split.val, &split.test],
            [split.train.len(), split.val.len(), split.test.len()],
        )
    }

    /// A worker's labels and the split vertices among them, as positions in its rows; the
    /// split sizes stay the whole graph's (losses and accuracies are shares of those).
    pub fn of_shard(shard: &DataShard) -> Result<Targets> {
        let labels = shard.labels.as_ref().ok_or(TrainError::NoLabels)?;
        let classes = shard.meta.labels.as_ref().ok_or(TrainError::NoLabels)?;
        Targets::of_parts(
            labels,
            classes.num_classes as usize,
            [&shard.train, &shard.val, &shard.test],
            shard.meta.split_sizes,
        )
    }

    /// `labels` of the rows, the split's rows as `positions` (train, validation, test) and
    /// the whole graph's split `sizes`.
    fn of_parts(
        labels: &[u32],
        num_classes: usize,
        positions: [&[u32]; 3],
        sizes: [usize; 3],
    ) -> Result<Targets> {
        for (name, size) in [("train", sizes[0]), ("validation", sizes[1])] {
            if size == 0 {
                return Err(TrainError::EmptySplit(name));
            }
        }
        let ids =
            |v: &[u32]| Tensor::from_slice(&v.iter().map(|&i| i64::from(i)).collect::<Vec<_>>());
        let values: Vec<i64> = labels.iter().map(|&c| i64::from(c)).collect();
        Ok(Targets {
            labels: Tensor::from_slice(&values),
            num_classes,
            train: ids(positions[0]),
            val: ids(positions[1]),
            test: ids(positions[2]),
            train_len: sizes[0],
            val_len: sizes[1],
            test_len: sizes[2],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchgnn_datasets::{BuildOptions, DenseFeatures, SparseFeatures};

    fn dense(t: &Tensor) -> Vec<Vec<f32>> {
        // A no-op on strided tensors.
        Vec::<Vec<f32>>::try_from(t.to_dense(None, false)).unwrap()
    }

    fn close(a: &[Vec<f32>], b: &[Vec<f32>]) -> bool {
        a.iter()
            .flatten()
            .zip(b.iter().flatten())
            .all(|(x, y)| (x - y).abs() < 1e-6)
    }

    /// Path 0 - 1 - 2 and an isolated vertex 3.
    fn path() -> Graph {
        Graph::from_edges(4, &[(0, 1), (1, 2)], BuildOptions::default()).unwrap()
    }

    #[test]
    fn gcn_normalisation_by_hand() {
        let p = Propagation::gcn(&path());
        // Degrees with the self-loop: 2, 3, 2, 1.
        let (a, b, c) = (0.5f32, 1.0 / 6f32.sqrt(), 1.0 / 3.0);
        let expected = vec![
            vec![a, b, 0.0, 0.0],
            vec![b, c, b, 0.0],
            vec![0.0, b, a, 0.0],
            vec![0.0, 0.0, 0.0, 1.0],
        ];
        assert!(
            close(&dense(p.matrix()), &expected),
            "{:?}",
            dense(p.matrix())
        );
        assert_eq!(p.entries(), 4 + 4);
        // The separable form gives the same matrix.
        for (i, row) in expected.iter().enumerate() {
            for (j, &x) in row.iter().enumerate() {
                let s = if x == 0.0 {
                    0.0
                } else {
                    p.left[i] * p.right[j]
                };
                assert!((s - x).abs() < 1e-6);
            }
        }
    }

    #[test]
    fn an_existing_self_loop_is_not_doubled() {
        let keep = BuildOptions {
            keep_self_loops: true,
        };
        let g = Graph::from_edges(3, &[(0, 1), (1, 1), (1, 2)], keep).unwrap();
        let without = Graph::from_edges(3, &[(0, 1), (1, 2)], BuildOptions::default()).unwrap();
        let a = dense(Propagation::gcn(&g).matrix());
        let b = dense(Propagation::gcn(&without).matrix());
        assert!(close(&a, &b));
    }

    #[test]
    fn mean_and_its_transpose() {
        let p = Propagation::mean(&path());
        let expected = vec![
            vec![0.0, 1.0, 0.0, 0.0],
            vec![0.5, 0.0, 0.5, 0.0],
            vec![0.0, 1.0, 0.0, 0.0],
            vec![0.0; 4],
        ];
        assert!(close(&dense(p.matrix()), &expected));
        let g = Tensor::from_slice(&[1f32, 2., 3., 4.]).reshape([4, 1]);
        let t = dense(&p.apply_transpose(&g));
        // Pᵀ g = column j of P dotted with g.
        let by_hand = [0.5 * 2.0, 1.0 + 3.0, 0.5 * 2.0, 0.0];
        for (row, want) in t.iter().zip(by_hand) {
            assert!((row[0] - want).abs() < 1e-6);
        }
    }

    #[test]
    fn sparse_features_multiply_like_dense_ones() {
        let s = SparseFeatures::new(
            3,
            4,
            vec![0, 2, 2, 4],
            vec![0, 3, 1, 2],
            vec![1.0, 3.0, 2.0, 2.0],
        )
        .unwrap();
        let d = Features::Sparse(s.clone()).to_dense();
        for norm in [FeatureNorm::None, FeatureNorm::Row] {
            let (sparse, _) = FeatureMatrix::new(&Features::Sparse(s.clone()), norm);
            let (dense_m, _) = FeatureMatrix::new(&Features::Dense(d.clone()), norm);
            let w = Tensor::from_slice(&[1f32, -1., 2., 0.5, 0., 1., 3., 3.]).reshape([4, 2]);
            let mask = Tensor::from_slice(&[2f32, 0., 2., 2.]);
            let dense_mask =
                Tensor::from_slice(&[2f32, 0., 0., 0., 0., 0., 0., 0., 0., 2., 2., 0.]);
            assert!(close(
                &dense(&sparse.matmul(&w, None)),
                &dense(&dense_m.matmul(&w, None))
            ));
            assert!(close(
                &dense(&sparse.matmul(&w, Some(&mask))),
                &dense(&dense_m.matmul(&w, Some(&dense_mask)))
            ));
            assert!(close(
                &dense(&sparse.masked_dense(Some(&mask))),
                &dense(&dense_m.masked_dense(Some(&dense_mask)))
            ));
            let g = Tensor::from_slice(&[1f32, 2., -1., 0.5, 3., 0.]).reshape([3, 2]);
            let by_hand = dense_m
                .masked_dense(Some(&dense_mask))
                .transpose(0, 1)
                .mm(&g);
            for (m, dm) in [(None, None), (Some(&mask), Some(&dense_mask))] {
                let want = dense_m.masked_dense(dm).transpose(0, 1).mm(&g);
                assert!(close(
                    &dense(&sparse.transpose_matmul(&g, m)),
                    &dense(&want)
                ));
                assert!(close(
                    &dense(&dense_m.transpose_matmul(&g, dm)),
                    &dense(&want)
                ));
            }
            assert!(close(
                &dense(&sparse.transpose_matmul(&g, Some(&mask))),
                &dense(&by_hand)
            ));
        }
    }

    #[test]
    fn row_normalisation() {
        let d = DenseFeatures::new(2, 2, vec![1.0, 3.0, 0.0, 0.0]).unwrap();
        let (m, applied) = FeatureMatrix::new(&Features::Dense(d), FeatureNorm::Auto);
        assert_eq!(applied, FeatureNorm::Row);
        assert!(close(
            &dense(&m.masked_dense(None)),
            &[vec![0.25, 0.75], vec![0.0, 0.0]]
        ));
        let signed = DenseFeatures::new(1, 2, vec![1.0, -3.0]).unwrap();
        let (m, applied) = FeatureMatrix::new(&Features::Dense(signed), FeatureNorm::Auto);
        assert_eq!(applied, FeatureNorm::None);
        assert!(close(&dense(&m.masked_dense(None)), &[vec![1.0, -3.0]]));
    }
}
