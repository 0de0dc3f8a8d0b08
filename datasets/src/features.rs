//! Vertex features: dense `f32` rows, or CSR when most entries are zero.
//!
//! Bag-of-words features such as Coauthor-CS (18333 × 6805, 0.9% non-zero) would take 500 MB
//! dense; they stay sparse unless a caller asks for [`Features::to_dense`] by name.

use rayon::prelude::*;

use crate::error::Invalid;

/// Above this share of non-zeros a CSR matrix is larger than the dense one (8 bytes per entry
/// against 4), so [`Features::compact`] switches representation around it.
const DENSE_BREAK_EVEN: f64 = 0.5;

/// Row-major dense matrix.
#[derive(Debug, Clone, PartialEq)]
pub struct DenseFeatures {
    rows: usize,
    cols: usize,
    values: Vec<f32>,
}

/// CSR matrix: row `i` holds `indices[indptr[i]..indptr[i+1]]` with the matching `values`.
#[derive(Debug, Clone, PartialEq)]
pub struct SparseFeatures {
    rows: usize,
    cols: usize,
    indptr: Vec<u64>,
    indices: Vec<u32>,
    values: Vec<f32>,
}

/// A vertex feature matrix, one row per vertex, dense or sparse.
#[derive(Debug, Clone, PartialEq)]
pub enum Features {
    /// Every entry stored.
    Dense(DenseFeatures),
    /// Non-zeros only, as CSR.
    Sparse(SparseFeatures),
}

impl DenseFeatures {
    /// Checked constructor: the length must be `rows * cols` and every value finite.
    pub fn new(rows: usize, cols: usize, values: Vec<f32>) -> Result<Self, Invalid> {
        if cols == 0 {
            return Err(Invalid::new("features", "zero feature columns"));
        }
        if values.len() != rows * cols {
            return Err(Invalid::new(
                "features",
                format!(
                    "{} values for a {rows} x {cols} matrix (expected {})",
                    values.len(),
                    rows * cols
                ),
            ));
        }
        if let Some(i) = values.par_iter().position_first(|x| !x.is_finite()) {
            return Err(Invalid::new(
                format!("feature row {} column {}", i / cols, i % cols),
                format!("value {} is not finite", values[i]),
            ));
        }
        Ok(DenseFeatures { rows, cols, values })
    }

    /// Feature width.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Row `i`'s values.
    pub fn row(&self, i: usize) -> &[f32] {
        &self.values[i * self.cols..(i + 1) * self.cols]
    }

    /// All values, row-major.
    pub fn values(&self) -> &[f32] {
        &self.values
    }
}

impl SparseFeatures {
    /// Checked constructor: monotone `indptr`, column ids in range and unique within a row,
    /// finite values.
    pub fn new(
        rows: usize,
        cols: usize,
        indptr: Vec<u64>,
        indices: Vec<u32>,
        values: Vec<f32>,
    ) -> Result<Self, Invalid> {
        if cols == 0 || cols > u32::MAX as usize {
            return Err(Invalid::new(
                "features",
                format!("{cols} feature columns is not a usable width"),
            ));
        }
        if indptr.len() != rows + 1 {
            return Err(Invalid::new(
                "features indptr",
                format!(
                    "{} entries for {rows} rows (expected {})",
                    indptr.len(),
                    rows + 1
                ),
            ));
        }
        if indices.len() != values.len() {
            return Err(Invalid::new(
                "features",
                format!(
                    "{} column indices but {} values",
                    indices.len(),
                    values.len()
                ),
            ));
        }
        if indptr[0] != 0 || indptr[rows] != indices.len() as u64 {
            return Err(Invalid::new(
                "features indptr",
                format!(
                    "must run from 0 to {} non-zeros, found {}..{}",
                    indices.len(),
                    indptr[0],
                    indptr[rows]
                ),
            ));
        }
        if let Some(r) = (0..rows).find(|&r| indptr[r] > indptr[r + 1]) {
            return Err(Invalid::new(format!("features indptr[{r}]"), "decreasing"));
        }
        let bad_row = (0..rows).into_par_iter().find_map_first(|r| {
            let range = indptr[r] as usize..indptr[r + 1] as usize;
            let mut cols_seen: Vec<u32> = indices[range.clone()].to_vec();
            if let Some(&c) = cols_seen.iter().find(|&&c| c as usize >= cols) {
                return Some((r, format!("column {c} out of range for width {cols}")));
            }
            if let Some(x) = values[range].iter().find(|x| !x.is_finite()) {
                return Some((r, format!("value {x} is not finite")));
            }
            cols_seen.sort_unstable();
            if cols_seen.windows(2).any(|w| w[0] == w[1]) {
                return Some((r, "a column appears twice".to_string()));
            }
            None
        });
        if let Some((r, reason)) = bad_row {
            return Err(Invalid::new(format!("feature row {r}"), reason));
        }
        Ok(SparseFeatures {
            rows,
            cols,
            indptr,
            indices,
            values,
        })
    }

    /// Column ids and values of row `i`.
    pub fn row(&self, i: usize) -> (&[u32], &[f32]) {
        let range = self.indptr[i] as usize..self.indptr[i + 1] as usize;
        (&self.indices[range.clone()], &self.values[range])
    }

    /// Feature width.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Row `i`'s entries are `indptr[i]..indptr[i + 1]` (`rows + 1` offsets).
    pub fn indptr(&self) -> &[u64] {
        &self.indptr
    }

    /// Column id of each stored entry.
    pub fn indices(&self) -> &[u32] {
        &self.indices
    }

    /// Value of each stored entry.
    pub fn values(&self) -> &[f32] {
        &self.values
    }
}

impl Features {
    /// Rows: one per vertex.
    pub fn rows(&self) -> usize {
        match self {
            Features::Dense(d) => d.rows,
            Features::Sparse(s) => s.rows,
        }
    }

    /// Feature width.
    pub fn cols(&self) -> usize {
        match self {
            Features::Dense(d) => d.cols,
            Features::Sparse(s) => s.cols,
        }
    }

    /// Non-zero entries.
    pub fn nnz(&self) -> u64 {
        match self {
            Features::Dense(d) => d.values.par_iter().filter(|&&x| x != 0.0).count() as u64,
            Features::Sparse(s) => s.values.par_iter().filter(|&&x| x != 0.0).count() as u64,
        }
    }

    /// Share of entries that are non-zero.
    pub fn density(&self) -> f64 {
        let cells = self.rows() as f64 * self.cols() as f64;
        if cells == 0.0 {
            0.0
        } else {
            self.nnz() as f64 / cells
        }
    }

    /// Whether the matrix is stored as CSR.
    pub fn is_sparse(&self) -> bool {
        matches!(self, Features::Sparse(_))
    }

    /// Bytes held by the arrays.
    pub fn memory_bytes(&self) -> u64 {
        match self {
            Features::Dense(d) => d.values.len() as u64 * 4,
            Features::Sparse(s) => s.indptr.len() as u64 * 8 + s.indices.len() as u64 * 8,
        }
    }

    /// A dense copy. Explicitly named so large sparse matrices are never densified by accident.
    pub fn to_dense(&self) -> DenseFeatures {
        match self {
            Features::Dense(d) => d.clone(),
            Features::Sparse(s) => {
                let mut values = vec![0f32; s.rows * s.cols];
                values
                    .par_chunks_mut(s.cols)
                    .enumerate()
                    .for_each(|(r, out)| {
                        let (cols, vals) = s.row(r);
                        for (&c, &x) in cols.iter().zip(vals) {
                            out[c as usize] = x;
                        }
                    });
                DenseFeatures {
                    rows: s.rows,
                    cols: s.cols,
                    values,
                }
            }
        }
    }

    /// Pick the smaller representation: CSR below half non-zeros, dense above.
    pub fn compact(self) -> Features {
        let density = self.density();
        match self {
            Features::Dense(d) if density < DENSE_BREAK_EVEN => {
                Features::Sparse(dense_to_sparse(&d))
            }
            f @ Features::Sparse(_) if density > DENSE_BREAK_EVEN => Features::Dense(f.to_dense()),
            f => f,
        }
    }
}

fn dense_to_sparse(d: &DenseFeatures) -> SparseFeatures {
    let rows: Vec<(Vec<u32>, Vec<f32>)> = (0..d.rows)
        .into_par_iter()
        .map(|r| {
            d.row(r)
                .iter()
                .enumerate()
                .filter(|(_, &x)| x != 0.0)
                .map(|(c, &x)| (c as u32, x))
                .unzip()
        })
        .collect();
    let mut indptr = Vec::with_capacity(d.rows + 1);
    indptr.push(0u64);
    let nnz: usize = rows.iter().map(|r| r.0.len()).sum();
    let mut indices = Vec::with_capacity(nnz);
    let mut values = Vec::with_capacity(nnz);
    for (cols, vals) in rows {
        indices.extend_from_slice(&cols);
        values.extend_from_slice(&vals);
        indptr.push(indices.len() as u64);
    }
    SparseFeatures {
        rows: d.rows,
        cols: d.cols,
        indptr,
        indices,
        values,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dense_checks_shape_and_finiteness() {
        assert!(DenseFeatures::new(2, 2, vec![1.0; 3]).is_err());
        let err = DenseFeatures::new(2, 2, vec![1.0, 2.0, f32::NAN, 0.0]).unwrap_err();
        assert_eq!(err.record, "feature row 1 column 0");
        assert!(DenseFeatures::new(2, 2, vec![1.0, 2.0, f32::INFINITY, 0.0]).is_err());
    }

    #[test]
    fn sparse_checks_structure() {
        assert!(SparseFeatures::new(2, 3, vec![0, 1, 2], vec![0, 3], vec![1.0, 1.0]).is_err());
        assert!(SparseFeatures::new(2, 3, vec![0, 2, 2], vec![1, 1], vec![1.0, 1.0]).is_err());
        assert!(SparseFeatures::new(2, 3, vec![0, 1], vec![0], vec![1.0]).is_err());
        assert!(SparseFeatures::new(1, 3, vec![0, 1], vec![0], vec![f32::NAN]).is_err());
        assert!(SparseFeatures::new(2, 3, vec![0, 1, 2], vec![2, 0], vec![1.0, 5.0]).is_ok());
    }

    #[test]
    fn compact_round_trips_between_representations() {
        let dense = DenseFeatures::new(2, 4, vec![0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 2.5]).unwrap();
        let sparse = Features::Dense(dense.clone()).compact();
        assert!(sparse.is_sparse());
        assert_eq!(sparse.nnz(), 2);
        assert_eq!(sparse.to_dense(), dense);
        let full = DenseFeatures::new(1, 2, vec![1.0, 2.0]).unwrap();
        let f = Features::Sparse(dense_to_sparse(&full)).compact();
        assert_eq!(f, Features::Dense(full));
    }
}
