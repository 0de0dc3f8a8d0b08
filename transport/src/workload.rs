//! The values `switchgnn exchange` sends and the check of what comes back.
//!
//! Every process derives the same values on its own: the dataset's features for the first
//! layer's forward exchange (when their width matches), and seeded pseudo-random values in
//! [-1, 1] for every other exchange (stand-ins for hidden activations and gradients, which the
//! trainer will supply). A worker then compares each of its sums with the direct computation
//! over its own vertices — no process needs anyone else's results to know it is exact.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use switchgnn_dataplane::engine::{ExchangeOutput, LocalFeatures};
use switchgnn_dataplane::fixed::{FixedError, Scale};
use switchgnn_dataplane::plan::ExchangePlan;
use switchgnn_dataplane::ExchangeId;
use switchgnn_datasets::{Dataset, Features};

/// Where one exchange's values come from.
#[derive(Debug)]
pub struct Workload<'a> {
    dataset: &'a Dataset,
    id: ExchangeId,
    width: usize,
    from_dataset: bool,
    seed: u64,
    /// The fixed-point scale the values are encoded at (fits every row's sums).
    pub scale: Scale,
}

impl<'a> Workload<'a> {
    /// The values of exchange `id` at `width` per row: the dataset's features where they fit
    /// (the first layer's forward exchange, at their width), else values seeded by `seed`;
    /// fails when no scale fits.
    pub fn new(
        dataset: &'a Dataset,
        id: ExchangeId,
        width: usize,
        seed: u64,
    ) -> Result<Workload<'a>, FixedError> {
        let from_dataset = id.layer == 0
            && !id.backward
            && dataset.features.as_ref().is_some_and(|f| f.cols() == width);
        let bound = match (&dataset.features, from_dataset) {
            (Some(Features::Dense(d)), true) => max_abs(d.values()),
            (Some(Features::Sparse(s)), true) => max_abs(s.values()),
            _ => 1.0,
        };
        let graph = &dataset.graph;
        let most = (0..graph.num_vertices() as u32)
            .map(|v| graph.degree(v))
            .max()
            .unwrap_or(1)
            .max(1);
        Ok(Workload {
            dataset,
            id,
            width,
            from_dataset,
            seed,
            scale: Scale::for_bound(bound.max(f32::MIN_POSITIVE), most)?,
        })
    }

    /// Whether the values are the dataset's features.
    pub fn is_dataset(&self) -> bool {
        self.from_dataset
    }

    /// The row of vertex `v`.
    pub fn row(&self, v: u32, out: &mut [f32]) {
        if self.from_dataset {
            match self.dataset.features.as_ref().expect("checked") {
                Features::Dense(d) => out.copy_from_slice(d.row(v as usize)),
                Features::Sparse(s) => {
                    out.fill(0.0);
                    let (cols, vals) = s.row(v as usize);
                    for (&c, &x) in cols.iter().zip(vals) {
                        out[c as usize] = x;
                    }
                }
            }
            return;
        }
        let id = &self.id;
        let key = self.seed
            ^ (u64::from(id.epoch) << 40)
            ^ (u64::from(id.layer) << 32)
            ^ (u64::from(id.backward) << 63)
            ^ u64::from(v);
        let mut rng = ChaCha8Rng::seed_from_u64(key);
        for x in out.iter_mut() {
            *x = rng.random_range(-1.0..=1.0);
        }
    }

    /// The rows of `vertices` (ascending), row-major.
    pub fn rows(&self, vertices: &[u32]) -> Vec<f32> {
        let mut values = vec![0.0; vertices.len() * self.width];
        for (&v, out) in vertices.iter().zip(values.chunks_mut(self.width)) {
            self.row(v, out);
        }
        values
    }

    /// Compare a worker's exchange output with the direct computation: for each of its
    /// receiving vertices, the integer sum of its remote neighbours' encoded rows. Returns the
    /// number of rows that differ.
    pub fn mismatches(&self, plan: &ExchangePlan, rank: u16, output: &ExchangeOutput) -> usize {
        let graph = &self.dataset.graph;
        let expected = plan.receivers(rank);
        if output.vertices != expected || output.width != self.width {
            return expected.len().max(output.vertices.len());
        }
        let mut row = vec![0.0f32; self.width];
        let mut lanes = vec![0i32; self.width];
        let mut sum = vec![0i64; self.width];
        let mut bad = 0;
        for (i, &v) in expected.iter().enumerate() {
            sum.fill(0);
            for &u in graph.neighbors(v) {
                if plan.owner[u as usize] == rank {
                    continue;
                }
                self.row(u, &mut row);
                self.scale.encode_row(&row, &mut lanes);
                for (s, &q) in sum.iter_mut().zip(&lanes) {
                    *s += i64::from(q);
                }
            }
            if output.sums[i * self.width..(i + 1) * self.width] != sum[..] {
                bad += 1;
            }
        }
        bad
    }
}

/// A worker's own vertices and their rows, ready for an engine.
#[derive(Debug)]
pub struct OwnedRows {
    /// The vertices whose rows the worker sends, ascending.
    pub vertices: Vec<u32>,
    /// Values per row.
    pub width: usize,
    /// Their rows, row-major.
    pub values: Vec<f32>,
}

impl OwnedRows {
    /// Worker `rank`'s rows of `workload` under `plan`.
    pub fn of(plan: &ExchangePlan, rank: u16, workload: &Workload<'_>) -> OwnedRows {
        // Only the vertices the worker sends need values.
        let vertices = plan.receivers(rank);
        let values = workload.rows(&vertices);
        OwnedRows {
            vertices,
            width: plan.width,
            values,
        }
    }

    /// The rows as an engine takes them.
    pub fn local(&self) -> LocalFeatures<'_> {
        LocalFeatures {
            vertices: &self.vertices,
            width: self.width,
            values: &self.values,
        }
    }
}

fn max_abs(values: &[f32]) -> f32 {
    values.iter().fold(0.0f32, |m, x| m.max(x.abs()))
}
