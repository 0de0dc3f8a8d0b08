//! Tensors built from a dataset: the propagation matrix of each model kind as a sparse CSR
//! tensor, the input features (dense, or CSR multiplied without densifying), labels and split
//! indices.
//!
//! Propagation matrices are kept *separable*: `P = diag(left) · S · diag(right)` with `S` a 0/1
//! structure (the graph, plus self-loops for GCN). The local product uses `P` with the scales
//! folded into its values, one CSR product per call; a distributed worker can scale by `right`
//! before sending and by `left` after summing, so the network only ever adds.

use switchgnn_datasets::{Dataset, Features, Graph};
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
        Propagation::gcn_rows(graph, &Rows::all(graph.num_vertices()))
    }

    /// The neighbour mean of GraphSAGE: `D^-1 A` without self-loops (an isolated vertex's mean is
    /// zero). Its transpose `A D^-1` has the same structure, since the graph is symmetric.
    pub fn mean(graph: &Graph) -> Propagation {
        Propagation::mean_rows(graph, &Rows::all(graph.num_vertices()))
    }

    /// The block of GCN's `P` between the vertices of `rows` (a worker's own vertices): the
    /// scales come from the whole graph's degrees, the entries only from edges inside `rows`.
    pub fn gcn_rows(graph: &Graph, rows: &Rows) -> Propagation {
        let degree = |v: u32| {
            let row = graph.neighbors(v);
            row.len() + usize::from(row.binary_search(&v).is_err())
        };
        let scale: Vec<f32> = rows
            .ids
            .iter()
            .map(|&v| 1.0 / (degree(v) as f32).sqrt())
            .collect();
        let (offsets, columns) = local_structure(graph, rows, true);
        let values = csr_values(&offsets, &columns, |row, col| scale[row] * scale[col]);
        Propagation {
            forward: csr_tensor(&offsets, &columns, values, rows.len()),
            transpose: None,
            left: scale.clone(),
            right: scale,
            rows: rows.len(),
            entries: columns.len(),
        }
    }

    /// The block of GraphSAGE's mean between the vertices of `rows`; see [`Propagation::gcn_rows`].
    pub fn mean_rows(graph: &Graph, rows: &Rows) -> Propagation {
        let inv_degree: Vec<f32> = rows
            .ids
            .iter()
            .map(|&v| match graph.degree(v) {
                0 => 0.0,
                d => 1.0 / d as f32,
            })
            .collect();
        let (offsets, columns) = local_structure(graph, rows, false);
        let forward = csr_values(&offsets, &columns, |row, _| inv_degree[row]);
        let transpose = csr_values(&offsets, &columns, |_, col| inv_degree[col]);
        Propagation {
            forward: csr_tensor(&offsets, &columns, forward, rows.len()),
            transpose: Some(csr_tensor(&offsets, &columns, transpose, rows.len())),
            left: inv_degree,
            right: vec![1.0; rows.len()],
            rows: rows.len(),
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

    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Stored entries of `P` (edges in both directions plus self-loops).
    pub fn entries(&self) -> usize {
        self.entries
    }
}

/// A set of vertices and their positions: all of a graph's, or one worker's.
#[derive(Debug, Clone)]
pub struct Rows {
    /// Global ids, ascending.
    pub ids: Vec<u32>,
    /// Position of every global vertex in `ids`, `u32::MAX` when absent; empty when `ids` is
    /// every vertex (the position is the id).
    position: Vec<u32>,
}

impl Rows {
    pub fn all(n: usize) -> Rows {
        Rows {
            ids: (0..n as u32).collect(),
            position: Vec::new(),
        }
    }

    /// The vertices `ids` (ascending, distinct) of a graph of `n`.
    pub fn subset(ids: Vec<u32>, n: usize) -> Rows {
        debug_assert!(ids.windows(2).all(|w| w[0] < w[1]));
        let mut position = vec![u32::MAX; n];
        for (i, &v) in ids.iter().enumerate() {
            position[v as usize] = i as u32;
        }
        Rows { ids, position }
    }

    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Where global vertex `v` sits, if it is one of these rows.
    pub fn position(&self, v: u32) -> Option<u32> {
        if self.position.is_empty() {
            ((v as usize) < self.ids.len()).then_some(v)
        } else {
            self.position
                .get(v as usize)
                .copied()
                .filter(|&p| p != u32::MAX)
        }
    }
}

/// The CSR of the graph restricted to `rows` (positions as column ids, rows kept sorted), with
/// `(v, v)` merged into every row when `self_loops` (a self-loop the graph has is kept once).
fn local_structure(graph: &Graph, rows: &Rows, self_loops: bool) -> (Vec<u64>, Vec<u32>) {
    let mut offsets = Vec::with_capacity(rows.len() + 1);
    let mut columns = Vec::new();
    offsets.push(0u64);
    for (i, &v) in rows.ids.iter().enumerate() {
        let row = graph.neighbors(v);
        let at = row.partition_point(|&u| u < v);
        let has_loop = row.get(at) == Some(&v);
        let rest = if has_loop { at + 1 } else { at };
        columns.extend(row[..at].iter().filter_map(|&u| rows.position(u)));
        if self_loops || has_loop {
            columns.push(i as u32);
        }
        columns.extend(row[rest..].iter().filter_map(|&u| rows.position(u)));
        offsets.push(columns.len() as u64);
    }
    (offsets, columns)
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
    let crow: Vec<i64> = offsets.iter().map(|&o| o as i64).collect();
    let col: Vec<i64> = columns.iter().map(|&c| i64::from(c)).collect();
    Tensor::sparse_csr_tensor_crow_col_value_size(
        &Tensor::from_slice(&crow),
        &Tensor::from_slice(&col),
        &Tensor::from_slice(values),
        [rows as i64, cols as i64],
        (Kind::Float, Device::Cpu),
    )
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
    Dense(Tensor),
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
        let (matrix, applied, _) =
            FeatureMatrix::of_rows(features, norm, &Rows::all(features.rows()));
        (matrix, applied)
    }

    /// The rows `rows` of `features` (a worker's vertices), normalised as `norm` says; `Auto`
    /// is decided over the whole matrix, so every worker decides alike. Also returns where the
    /// dropout mask's entries of these rows sit in the whole matrix's mask, as `(start, len)`
    /// runs.
    #[allow(clippy::type_complexity)]
    pub fn of_rows(
        features: &Features,
        norm: FeatureNorm,
        rows: &Rows,
    ) -> (FeatureMatrix, FeatureNorm, Vec<(u64, usize)>) {
        let applied = match norm {
            FeatureNorm::Auto => {
                let values = match features {
                    Features::Dense(d) => d.values(),
                    Features::Sparse(s) => s.values(),
                };
                if values.iter().all(|&x| x >= 0.0) {
                    FeatureNorm::Row
                } else {
                    FeatureNorm::None
                }
            }
            n => n,
        };
        let scaled = |row: &mut [f32]| {
            if applied == FeatureNorm::Row {
                let sum: f32 = row.iter().sum();
                let s = if sum == 0.0 { 0.0 } else { 1.0 / sum };
                row.iter_mut().for_each(|x| *x *= s);
            }
        };
        let (n, cols) = (rows.len(), features.cols());
        let mut runs = Vec::with_capacity(n);
        let matrix = match features {
            Features::Dense(d) => {
                let mut values = Vec::with_capacity(n * cols);
                for &v in &rows.ids {
                    let at = values.len();
                    values.extend_from_slice(d.row(v as usize));
                    scaled(&mut values[at..]);
                    runs.push((u64::from(v) * cols as u64, cols));
                }
                FeatureMatrix::Dense(Tensor::from_slice(&values).reshape([n as i64, cols as i64]))
            }
            Features::Sparse(s) => {
                let global = s.indptr();
                let mut indptr = Vec::with_capacity(n + 1);
                let (mut indices, mut values) = (Vec::new(), Vec::new());
                indptr.push(0u64);
                for &v in &rows.ids {
                    let (c, x) = s.row(v as usize);
                    indices.extend_from_slice(c);
                    let at = values.len();
                    values.extend_from_slice(x);
                    scaled(&mut values[at..]);
                    indptr.push(indices.len() as u64);
                    runs.push((global[v as usize], c.len()));
                }
                FeatureMatrix::Sparse(SparseInput::new(&indptr, &indices, values, n, cols))
            }
        };
        (matrix, applied, runs)
    }

    pub fn rows(&self) -> usize {
        match self {
            FeatureMatrix::Dense(t) => t.size()[0] as usize,
            FeatureMatrix::Sparse(s) => s.rows,
        }
    }

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
    pub num_classes: usize,
    pub train: Tensor,
    pub val: Tensor,
    pub test: Tensor,
    pub train_len: usize,
    pub val_len: usize,
    pub test_len: usize,
}

impl Targets {
    pub fn new(dataset: &Dataset) -> Result<Targets> {
        Targets::of_rows(dataset, &Rows::all(dataset.num_vertices()))
    }

    /// The labels of `rows` and the split vertices among them, as positions in `rows`; the
    /// split sizes stay the whole graph's (losses and accuracies are shares of those).
    pub fn of_rows(dataset: &Dataset, rows: &Rows) -> Result<Targets> {
        let labels = dataset.labels.as_ref().ok_or(TrainError::NoLabels)?;
        let split = &dataset.split;
        for (name, ids) in [("train", &split.train), ("validation", &split.val)] {
            if ids.is_empty() {
                return Err(TrainError::EmptySplit(name));
            }
        }
        let ids = |v: &[u32]| {
            Tensor::from_slice(
                &v.iter()
                    .filter_map(|&i| rows.position(i))
                    .map(i64::from)
                    .collect::<Vec<_>>(),
            )
        };
        let values: Vec<i64> = rows
            .ids
            .iter()
            .map(|&v| i64::from(labels.values()[v as usize]))
            .collect();
        Ok(Targets {
            labels: Tensor::from_slice(&values),
            num_classes: labels.num_classes() as usize,
            train: ids(&split.train),
            val: ids(&split.val),
            test: ids(&split.test),
            train_len: split.train.len(),
            val_len: split.val.len(),
            test_len: split.test.len(),
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
