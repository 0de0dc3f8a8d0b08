//! The single-process reference training loop: full-graph epochs of forward, backward and an
//! Adam step on the training vertices, an evaluation pass per epoch, model selection and early
//! stopping on the validation set.

use std::time::Instant;

use serde::{Deserialize, Serialize};
use switchgnn_datasets::Dataset;
use tch::nn::{self, OptimizerConfig};
use tch::{Kind, Tensor};

use crate::dropout::Dropout;
use crate::error::{Result, TrainError};
use crate::graph_tensors::{FeatureMatrix, FeatureNorm, Propagation, Targets};
use crate::model::{Model, ModelConfig, ModelKind, FIRST_LAYER_GROUP, OTHER_LAYERS_GROUP};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrainConfig {
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
    pub train_loss: f64,
    pub val_loss: f64,
    pub train_accuracy: f64,
    pub val_accuracy: f64,
    /// `None` when the split has no test vertices.
    pub test_accuracy: Option<f64>,
    /// Forward, backward and optimiser step.
    pub train_seconds: f64,
    /// The evaluation pass.
    pub eval_seconds: f64,
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
    pub seed: u64,
    pub epochs: Vec<EpochRecord>,
    /// The selected epoch (1-based): best validation accuracy, ties to the lower validation loss.
    pub best_epoch: usize,
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
    pub features: FeatureMatrix,
    pub propagation: Propagation,
    pub targets: Targets,
    /// The normalisation actually applied (`Auto` resolved).
    pub feature_norm: FeatureNorm,
    /// The model kind whose propagation matrix this holds.
    pub kind: ModelKind,
}

impl Prepared {
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

/// Train one model from `config.seed`, calling `observe` after every epoch.
pub fn train(
    data: &mut Prepared,
    config: &TrainConfig,
    observe: &mut dyn FnMut(&EpochRecord),
) -> Result<RunReport> {
    config.check()?;
    if data.kind != config.model.kind {
        return Err(TrainError::Config(format!(
            "data prepared for {} cannot train {}",
            data.kind.name(),
            config.model.kind.name()
        )));
    }
    let t = &data.targets;
    let model = Model::new(
        &config.model,
        data.features.cols(),
        t.num_classes,
        config.seed,
    )?;
    let mut opt = nn::Adam::default().build(model.var_store(), config.lr)?;
    opt.set_weight_decay_group(FIRST_LAYER_GROUP, config.weight_decay);
    if config.model.layers > 1 {
        opt.set_weight_decay_group(OTHER_LAYERS_GROUP, 0.0);
    }
    // The dropout stream is seeded apart from the weights (which use `seed` itself).
    let mut dropout = Dropout::new(config.model.dropout, config.seed ^ 0x5eed_d80f_0a75_u64);
    let train_labels = t.labels.index_select(0, &t.train);
    let val_labels = t.labels.index_select(0, &t.val);

    let mut epochs: Vec<EpochRecord> = Vec::with_capacity(config.epochs);
    let mut best = 0usize;
    let mut stopped_early = false;
    for epoch in 1..=config.epochs {
        let started = Instant::now();
        opt.zero_grad();
        let (logits, tape) =
            model.forward(&data.features, &mut data.propagation, Some(&mut dropout));
        let loss = logits
            .index_select(0, &t.train)
            .cross_entropy_for_logits(&train_labels);
        model.backward(
            &loss,
            tape.expect("training pass"),
            &data.features,
            &mut data.propagation,
        );
        opt.step();
        let train_loss = f64::try_from(&loss)?;
        let train_seconds = started.elapsed().as_secs_f64();

        let started = Instant::now();
        let (logits, _) = model.forward(&data.features, &mut data.propagation, None);
        let correct = logits.argmax(-1, false).eq_tensor(&t.labels);
        // Counted in integers, so an accuracy is an exact share of its split.
        let accuracy = |ids: &Tensor, len: usize| -> Result<f64> {
            let hits = i64::try_from(correct.index_select(0, ids).sum(Kind::Int64))?;
            Ok(hits as f64 / len as f64)
        };
        let val_loss = f64::try_from(
            logits
                .index_select(0, &t.val)
                .cross_entropy_for_logits(&val_labels),
        )?;
        let record = EpochRecord {
            epoch,
            train_loss,
            val_loss,
            train_accuracy: accuracy(&t.train, t.train_len)?,
            val_accuracy: accuracy(&t.val, t.val_len)?,
            test_accuracy: if t.test_len > 0 {
                Some(accuracy(&t.test, t.test_len)?)
            } else {
                None
            },
            train_seconds,
            eval_seconds: started.elapsed().as_secs_f64(),
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
