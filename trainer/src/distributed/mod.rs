//! The distributed worker: each worker holds its own vertices, aggregates the edges among them
//! with a local sparse product, and gets the remote part of every sum through an exchange.
//!
//! With `P = diag(left) · S · diag(right)` ([`Propagation`]), row `v` of `P · Z` is
//! `left[v] · Σ_{u ∈ N̂(v)} right[u] · Z[u]`. Split the sum by owner: the local part is the
//! worker's block of `P`; the remote part needs, for every boundary vertex `v` (one with a
//! neighbour on another worker), `Σ_{remote u} right[u] · Z[u]` — exactly the sum an exchange
//! delivers when every worker sends `right[u] · Z[u]` for its own boundary vertices. The network
//! only adds. The backward pass needs `Pᵀ · G`, whose row `u` is
//! `right[u] · Σ_{v ∈ N̂(u)} left[v] · G[v]` (the graph is symmetric): the same exchange with
//! the scales swapped.
//!
//! - [`Shard`]: a worker's rows, features, targets, local propagation and boundary;
//! - [`RemoteSums`]: what the shard needs from the network (exchange and all-reduce);
//! - [`ShardBackend`]: the two together, a [`Backend`](crate::train::Backend) for the
//!   training loop;
//! - [`network`]: [`RemoteSums`] over the transport's UDP worker client and the collective;
//! - [`cluster`]: a worker's whole run, and a whole job on one machine.

pub mod cluster;
pub mod network;

use switchgnn_partition::shard::DataShard;
use tch::Tensor;

use crate::dropout::MaskLayout;
use crate::error::{Result, TrainError};
use crate::graph_tensors::{FeatureMatrix, FeatureNorm, LocalGraph, Propagation, Targets};
use crate::model::{Aggregate, ModelKind};
use crate::train::{Collective, Local, Traffic};

/// One worker's part of the graph.
#[derive(Debug)]
pub struct Shard {
    /// The worker's rank.
    pub rank: u16,
    /// Workers of the job.
    pub workers: u16,
    /// The worker's vertices (global ids), ascending.
    pub ids: Vec<u32>,
    /// The worker's feature rows, normalised.
    pub features: FeatureMatrix,
    /// Its labels and split positions.
    pub targets: Targets,
    /// The normalisation applied to the features (`auto` resolved over the whole graph).
    pub feature_norm: FeatureNorm,
    /// Where the input's dropout mask entries sit in the whole graph's mask.
    input_runs: Vec<(u64, usize)>,
    /// The block of the propagation matrix among the worker's vertices.
    propagation: Propagation,
    /// Global ids of the boundary vertices (a neighbour on another worker), ascending.
    boundary: Vec<u32>,
    /// The most remote neighbours any vertex of the graph has: the most contributions one
    /// exchanged sum can have, whatever the exchange.
    pub max_remote_degree: u64,
    /// Their positions in `rows` (`i64`), and their scales as columns.
    boundary_index: Tensor,
    boundary_left: Tensor,
    boundary_right: Tensor,
}

impl Shard {
    /// The training state of worker `data.meta.rank` from its part of the dataset. Each of
    /// the shard's arrays is dropped as soon as its tensors are built, so that the peak stays
    /// near one copy of the data.
    pub fn new(mut data: DataShard, kind: ModelKind, norm: FeatureNorm) -> Result<Shard> {
        let (features, feature_norm, input_runs) = FeatureMatrix::of_shard(&data, norm)
            .ok_or_else(|| TrainError::NoFeatures(data.meta.dataset.clone()))?;
        data.features = None;
        let targets = Targets::of_shard(&data)?;
        let positions: Vec<usize> = (0..data.len()).filter(|&i| data.on_boundary(i)).collect();
        let local = LocalGraph::of_shard(&data);
        let propagation = match kind {
            ModelKind::Gcn => Propagation::gcn_local(&local),
            ModelKind::Sage => Propagation::mean_local(&local),
        };
        let column = |scales: &[f32]| {
            let picked: Vec<f32> = positions.iter().map(|&i| scales[i]).collect();
            Tensor::from_slice(&picked).view([-1, 1])
        };
        Ok(Shard {
            rank: data.meta.rank as u16,
            workers: data.meta.workers as u16,
            boundary_index: Tensor::from_slice(
                &positions.iter().map(|&i| i as i64).collect::<Vec<_>>(),
            ),
            boundary_left: column(&propagation.left),
            boundary_right: column(&propagation.right),
            boundary: positions.iter().map(|&i| data.ids[i]).collect(),
            max_remote_degree: data.meta.max_remote_degree,
            ids: data.ids,
            features,
            targets,
            feature_norm,
            input_runs,
            propagation,
        })
    }

    /// Global ids of the vertices whose sums need remote contributions, ascending; they are
    /// also the vertices this worker sends.
    pub fn boundary(&self) -> &[u32] {
        &self.boundary
    }

    /// What the training loop reads.
    pub fn local(&self) -> Local<'_> {
        Local {
            features: &self.features,
            targets: &self.targets,
            layout: MaskLayout::rows(self.ids.clone(), self.input_runs.clone()),
        }
    }

    /// `P_local · z` plus the remote part, or the transposed product for `backward`.
    fn aggregate(
        &self,
        remote: &mut dyn RemoteSums,
        layer: usize,
        backward: bool,
        z: &Tensor,
    ) -> Result<Tensor> {
        let (local, before, after) = if backward {
            (
                self.propagation.apply_transpose(z),
                &self.boundary_left,
                &self.boundary_right,
            )
        } else {
            (
                self.propagation.apply(z),
                &self.boundary_right,
                &self.boundary_left,
            )
        };
        let width = z.size()[1] as usize;
        let send = z.index_select(0, &self.boundary_index) * before;
        let send = Vec::<f32>::try_from(send.flatten(0, -1))?;
        let sums = remote.exchange(layer, backward, width, &send)?;
        if sums.len() != send.len() {
            return Err(crate::CommError::Mismatch {
                during: format!("layer {layer}"),
                what: format!(
                    "the exchange returned {} values for {} boundary rows of width {width}",
                    sums.len(),
                    self.boundary.len()
                ),
            }
            .into());
        }
        let sums = Tensor::from_slice(&sums).view([-1, width as i64]) * after;
        Ok(local.index_add(0, &self.boundary_index, &sums))
    }
}

/// What a shard needs from the other workers.
pub trait RemoteSums: std::fmt::Debug {
    /// Workers of the job, this one included.
    fn workers(&self) -> usize;
    /// Every worker passes `rows`, the row-major `width`-wide values of its boundary vertices
    /// (ascending id); each gets back, for each of its boundary vertices, the sum of the values
    /// its neighbours on other workers passed.
    fn exchange(
        &mut self,
        layer: usize,
        backward: bool,
        width: usize,
        rows: &[f32],
    ) -> Result<Vec<f32>>;
    /// Sum `values` element-wise over every worker, in place (see
    /// [`Collective::all_reduce_sum`]).
    fn all_reduce_sum(&mut self, values: &mut [f32]) -> Result<()>;
    /// Communication so far.
    fn traffic(&self) -> Traffic;
}

/// A shard and its connection to the others: the training loop's backend on a worker.
#[derive(Debug)]
pub struct ShardBackend<'a> {
    /// The worker's part of the graph.
    pub shard: &'a Shard,
    /// Its connection to the other workers.
    pub remote: &'a mut dyn RemoteSums,
}

impl Aggregate for ShardBackend<'_> {
    fn forward(&mut self, layer: usize, z: &Tensor) -> Result<Tensor> {
        self.shard.aggregate(self.remote, layer, false, z)
    }

    fn backward(&mut self, layer: usize, grad: &Tensor) -> Result<Tensor> {
        self.shard.aggregate(self.remote, layer, true, grad)
    }
}

impl Collective for ShardBackend<'_> {
    fn workers(&self) -> usize {
        self.remote.workers()
    }

    fn all_reduce_sum(&mut self, values: &mut [f32]) -> Result<()> {
        self.remote.all_reduce_sum(values)
    }

    fn traffic(&self) -> Traffic {
        self.remote.traffic()
    }
}
