//! The single-process reference training loop: full-graph epochs of forward, backward and an
//! Adam step on the training vertices, an evaluation pass per epoch, model selection and early
//! stopping on the validation set.

use std::time::Instant;

use serde::{Deserialize, Serialize};
use switchgnn_datasets::Dataset;
use tch::nn::{self, OptimizerConfig};
use tch::{Kind, Reduction, Tensor};

use crate::dropout::{Dropout, MaskLayout};
use crate::error::{Result, TrainError};
use crate::graph_tensors::{FeatureMatrix, FeatureNorm, Propagation, Targets};
use crate::model::{
    Aggregate, Model, ModelConfig, ModelKind, FIRST_LAYER_GROUP, OTHER_LAYERS_GROUP,
};

/// Everything one training run is set up with (the single-process and distributed runs
/// alike).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrainConfig {
    /// The model's shape.
    pub model: ModelConfig,
    /// Most epochs to run.
    pub epochs: usize,
    /// Adam's learning rate.
    pub lr: f64,
    /// L2 penalty on the first layer's parameters only, as Kipf & Welling apply it (added to
    /// the gradient, the way `torch.optim.Adam`'s `weight_decay` does).
    pub weight_decay: f64,
    /// Stop after this many epochs without a better validation result; `None` runs every epoch.
    pub patience: Option<usize>,
    /// Seed of the weights and the dropout masks.
    pub seed: u64,
    /// How input features are normalised before training.
    pub feature_norm: FeatureNorm,
}

impl Default for TrainConfig {
    /// Kipf & Welling's Cora setting: 200 epochs, lr 0.01, weight decay 5e-4, dropout 0.5.
    fn default() -> Self {
        TrainConfig {
            model: ModelConfig::default(),
            epochs: 200,
            lr: 0.01,
            weight_decay: 5e-4,
            patience: None,
            seed: 0,
            feature_norm: FeatureNorm::Auto,
        }
    }
}

impl TrainConfig {
    /// Settings a run can use: the model's, at least one epoch, a positive learning rate, a
    /// non-negative weight decay, a patience of at least 1.
    pub fn check(&self) -> Result<()> {
        self.model.check()?;
        if self.epochs == 0 {
            return Err(TrainError::Config("epochs must be at least 1".into()));
        }
        if !(self.lr > 0.0 && self.lr.is_finite()) {
            return Err(TrainError::Config(format!(
                "learning rate {} must be positive",
                self.lr
            )));
        }
        if !(self.weight_decay >= 0.0 && self.weight_decay.is_finite()) {
            return Err(TrainError::Config(format!(
                "weight decay {} must be non-negative",
                self.weight_decay
            )));
        }
        if self.patience == Some(0) {
            return Err(TrainError::Config("patience must be at least 1".into()));
        }
        Ok(())
    }
}

/// One epoch's figures. Accuracies and the validation loss come from an evaluation pass (no
/// dropout) after the epoch's step; the training loss is the one the step minimised.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpochRecord {
    /// 1-based.
    pub epoch: usize,
    /// Cross-entropy over the training vertices, as minimised.
    pub train_loss: f64,
    /// Cross-entropy over the validation vertices.
    pub val_loss: f64,
    /// Share of training vertices classified right.
    pub train_accuracy: f64,
    /// Share of validation vertices classified right.
    pub val_accuracy: f64,
    /// `None` when the split has no test vertices.
    pub test_accuracy: Option<f64>,
    /// Forward, backward and optimiser step.
    pub train_seconds: f64,
    /// The evaluation pass.
    pub eval_seconds: f64,
    /// Of the two: time in exchanges and all-reduces (zero in one process).
    #[serde(default)]
    pub comm_seconds: f64,
    /// Bytes this worker sent and received in the epoch: exchange packets and all-reduces.
    #[serde(default)]
    pub bytes_sent: u64,
    /// Bytes this worker received in the epoch.
    #[serde(default)]
    pub bytes_received: u64,
}

impl EpochRecord {
    /// Is this epoch's validation result better than `other`'s: higher accuracy, or the same
    /// accuracy at a lower loss.
    pub fn better_than(&self, other: &EpochRecord) -> bool {
        self.val_accuracy > other.val_accuracy
            || (self.val_accuracy == other.val_accuracy && self.val_loss < other.val_loss)
    }
}

/// One training run (one seed).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunReport {
    /// The seed of the weights and dropout masks.
    pub seed: u64,
    /// Every epoch run, in order.
    pub epochs: Vec<EpochRecord>,
    /// The selected epoch (1-based): best validation accuracy, ties to the lower validation loss.
    pub best_epoch: usize,
    /// Whether patience ran out before the last epoch.
    pub stopped_early: bool,
}

impl RunReport {
    /// The selected epoch's record.
    pub fn best(&self) -> &EpochRecord {
        &self.epochs[self.best_epoch - 1]
    }

    /// Mean time of an epoch's forward, backward and step, leaving out the first epoch (it pays
    /// for libtorch's one-time allocations) when there are others.
    pub fn mean_train_seconds(&self) -> f64 {
        let timed = if self.epochs.len() > 1 {
            &self.epochs[1..]
        } else {
            &self.epochs[..]
        };
        timed.iter().map(|e| e.train_seconds).sum::<f64>() / timed.len() as f64
    }
}

/// A dataset turned into tensors for one model kind, shared by every run over it.
#[derive(Debug)]
pub struct Prepared {
    /// Input features, normalised.
    pub features: FeatureMatrix,
    /// The propagation matrix of the model kind.
    pub propagation: Propagation,
    /// Labels and split.
    pub targets: Targets,
    /// The normalisation actually applied (`Auto` resolved).
    pub feature_norm: FeatureNorm,
    /// The model kind whose propagation matrix this holds.
    pub kind: ModelKind,
}

impl Prepared {
    /// Check `config` and turn `dataset` into tensors; an error when it has no features or
    /// labels.
    pub fn new(dataset: &Dataset, config: &TrainConfig) -> Result<Prepared> {
        config.check()?;
        let features = dataset
            .features
            .as_ref()
            .ok_or_else(|| TrainError::NoFeatures(dataset.name.clone()))?;
        let targets = Targets::new(dataset)?;
        let (features, feature_norm) = FeatureMatrix::new(features, config.feature_norm);
        let propagation = config.model.kind.propagation(&dataset.graph);
        tracing::info!(
            vertices = propagation.rows(),
            entries = propagation.entries(),
            ?feature_norm,
            "tensors ready"
        );
        Ok(Prepared {
            features,
            propagation,
            targets,
            feature_norm,
            kind: config.model.kind,
        })
    }
}

/// All-reduce across the workers of a distributed run.
pub trait Collective {
    /// Workers taking part (1: a single process, nothing to reduce).
    fn workers(&self) -> usize;
    /// Replace `values` by their element-wise sum over every worker; every worker must end
    /// with the same bits, so that all apply the same update.
    fn all_reduce_sum(&mut self, values: &mut [f32]) -> Result<()>;
    /// Communication so far (exchanges and all-reduces), for the per-epoch figures.
    fn traffic(&self) -> Traffic {
        Traffic::default()
    }
}

/// Communication counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Traffic {
    /// Time spent in exchanges and all-reduces.
    pub seconds: f64,
    /// Bytes sent.
    pub bytes_sent: u64,
    /// Bytes received.
    pub bytes_received: u64,
}

/// What the training loop runs on: the aggregation (local, or local plus the exchange of the
/// remote part) and the all-reduce.
pub trait Backend: Aggregate + Collective {}

impl<T: Aggregate + Collective> Backend for T {}

/// The whole graph in one process has nobody to reduce with.
impl Collective for Propagation {
    fn workers(&self) -> usize {
        1
    }

    fn all_reduce_sum(&mut self, _values: &mut [f32]) -> Result<()> {
        Ok(())
    }
}

/// The rows a training process holds: all of them (the reference) or a worker's.
#[derive(Debug)]
pub struct Local<'a> {
    /// Its feature rows.
    pub features: &'a FeatureMatrix,
    /// Its labels and split positions.
    pub targets: &'a Targets,
    /// Where its dropout mask entries sit among the whole graph's.
    pub layout: MaskLayout,
}

/// Train one model from `config.seed`, calling `observe` after every epoch.
pub fn train(
    data: &mut Prepared,
    config: &TrainConfig,
    observe: &mut dyn FnMut(&EpochRecord),
) -> Result<RunReport> {
    if data.kind != config.model.kind {
        return Err(TrainError::Config(format!(
            "data prepared for {} cannot train {}",
            data.kind.name(),
            config.model.kind.name()
        )));
    }
    let local = Local {
        features: &data.features,
        targets: &data.targets,
        layout: MaskLayout::whole(),
    };
    train_on(local, &mut data.propagation, config, observe)
}

/// The training loop over `local` rows, aggregating and reducing through `backend`. Every
/// worker of a distributed run calls it with the same `config`; the loss is the sum over the
/// worker's training vertices divided by the whole split's size, so that the workers' losses
/// and gradients add up to the single-process ones.
pub fn train_on(
    local: Local<'_>,
    backend: &mut dyn Backend,
    config: &TrainConfig,
    observe: &mut dyn FnMut(&EpochRecord),
) -> Result<RunReport> {
    config.check()?;
    let t = local.targets;
    let x = local.features;
    let model = Model::new(&config.model, x.cols(), t.num_classes, config.seed)?;
    let mut opt = nn::Adam::default().build(model.var_store(), config.lr)?;
    opt.set_weight_decay_group(FIRST_LAYER_GROUP, config.weight_decay);
    if config.model.layers > 1 {
        opt.set_weight_decay_group(OTHER_LAYERS_GROUP, 0.0);
    }
    // The dropout stream is seeded apart from the weights (which use `seed` itself).
    let mut dropout = Dropout::with_layout(
        config.model.dropout,
        config.seed ^ 0x5eed_d80f_0a75_u64,
        local.layout,
    );
    let train_labels = t.labels.index_select(0, &t.train);
    let val_labels = t.labels.index_select(0, &t.val);
    // Summed losses over this process's vertices, as shares of the whole split.
    let loss_of = |logits: &Tensor, ids: &Tensor, labels: &Tensor, len: usize| {
        logits.index_select(0, ids).cross_entropy_loss::<Tensor>(
            labels,
            None,
            Reduction::Sum,
            -100,
            0.0,
        ) / len as f64
    };
    // Parameters in name order: the layout of the gradient all-reduce.
    let mut params: Vec<(String, Tensor)> = model.var_store().variables().into_iter().collect();
    params.sort_by(|a, b| a.0.cmp(&b.0));
    let distributed = backend.workers() > 1;

    let mut epochs: Vec<EpochRecord> = Vec::with_capacity(config.epochs);
    let mut best = 0usize;
    let mut stopped_early = false;
    for epoch in 1..=config.epochs {
        let traffic_before = backend.traffic();
        let started = Instant::now();
        opt.zero_grad();
        let (logits, tape) = model.forward(x, backend, Some(&mut dropout))?;
        let loss = loss_of(&logits, &t.train, &train_labels, t.train_len);
        model.backward(&loss, tape.expect("training pass"), x, backend)?;
        if distributed {
            all_reduce_gradients(&params, backend)?;
        }
        opt.step();
        let local_train_loss = f64::try_from(&loss)?;
        let train_seconds = started.elapsed().as_secs_f64();

        let started = Instant::now();
        let (logits, _) = model.forward(x, backend, None)?;
        let correct = logits.argmax(-1, false).eq_tensor(&t.labels);
        // Counted in integers, so an accuracy is an exact share of its split.
        let hits = |ids: &Tensor| -> Result<f64> {
            Ok(i64::try_from(correct.index_select(0, ids).sum(Kind::Int64))? as f64)
        };
        let val_loss = f64::try_from(loss_of(&logits, &t.val, &val_labels, t.val_len))?;
        // One reduction for every figure; exact for hit counts below 2²⁴.
        let mut figures = [
            local_train_loss as f32,
            val_loss as f32,
            hits(&t.train)? as f32,
            hits(&t.val)? as f32,
            hits(&t.test)? as f32,
        ];
        if distributed {
            backend.all_reduce_sum(&mut figures)?;
        }
        let traffic = backend.traffic();
        let share = |hits: f32, len: usize| f64::from(hits) / len as f64;
        // A single process keeps its losses in full precision.
        let (train_loss, val_loss) = if distributed {
            (f64::from(figures[0]), f64::from(figures[1]))
        } else {
            (local_train_loss, val_loss)
        };
        let record = EpochRecord {
            epoch,
            train_loss,
            val_loss,
            train_accuracy: share(figures[2], t.train_len),
            val_accuracy: share(figures[3], t.val_len),
            test_accuracy: (t.test_len > 0).then(|| share(figures[4], t.test_len)),
            train_seconds,
            eval_seconds: started.elapsed().as_secs_f64(),
            comm_seconds: traffic.seconds - traffic_before.seconds,
            bytes_sent: traffic.bytes_sent - traffic_before.bytes_sent,
            bytes_received: traffic.bytes_received - traffic_before.bytes_received,
        };
        observe(&record);
        if !train_loss.is_finite() {
            return Err(TrainError::Config(format!(
                "training diverged at epoch {epoch} (loss {train_loss}); lower the learning rate"
            )));
        }
        if best == 0 || record.better_than(&epochs[best - 1]) {
            best = epoch;
        }
        epochs.push(record);
        if let Some(patience) = config.patience {
            if epoch - best >= patience && epoch < config.epochs {
                stopped_early = true;
                tracing::info!(epoch, best, "early stop");
                break;
            }
        }
    }
    Ok(RunReport {
        seed: config.seed,
        epochs,
        best_epoch: best,
        stopped_early,
    })
}

/// Sum every parameter's gradient over the workers, in one round, and put the sums back.
fn all_reduce_gradients(params: &[(String, Tensor)], backend: &mut dyn Backend) -> Result<()> {
    let mut flat: Vec<f32> = Vec::new();
    for (name, p) in params {
        let g = p.grad();
        if !g.defined() {
            return Err(TrainError::Config(format!(
                "parameter {name} has no gradient"
            )));
        }
        flat.extend(Vec::<f32>::try_from(g.flatten(0, -1))?);
    }
    backend.all_reduce_sum(&mut flat)?;
    let mut at = 0;
    for (_, p) in params {
        let mut g = p.grad();
        let n = g.numel();
        let summed = Tensor::from_slice(&flat[at..at + n]).view_as(&g);
        g.copy_(&summed);
        at += n;
    }
    Ok(())
}
