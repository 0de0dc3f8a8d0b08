//! GCN and GraphSAGE-mean models, run as a chain of dense segments joined by aggregations.
//!
//! A layer is `pre` (dropout, and the projection when it narrows the width) → **aggregate** →
//! `post` (the projection when it widens, bias, ReLU). Autograd records only the dense segments:
//! each aggregation input is detached, and the aggregation output enters the next segment as a
//! fresh leaf. The backward pass walks the segments from the loss down: the gradient at a leaf
//! goes through the aggregation's own backward (`Pᵀ · g`), and is pushed into the segment below
//! with `(z · g).sum().backward()`. A distributed worker swaps the [`Aggregate`] for one that adds
//! the remote part of the sum; the model code stays as it is. The reference trainer runs the same
//! path, so what it measures is what a worker will run.
//!
//! Layer order: projecting first (`P · (H W)`) exchanges the output width, aggregating first
//! (`(P · H) W`) the input width; the model picks the narrower one per layer.

use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};

use crate::dropout::{glorot, init_rng, Dropout};
use crate::error::{Result, TrainError};
use crate::graph_tensors::{FeatureMatrix, Propagation};

/// The neighbourhood step of a layer: `Y = P · Z` forward and `∂Z = Pᵀ · ∂Y` backward.
/// A distributed implementation may fail (a lost peer), so both return a `Result`.
pub trait Aggregate {
    /// `P · z` for layer `layer` (rows of `z`: the vertices held).
    fn forward(&mut self, layer: usize, z: &Tensor) -> Result<Tensor>;
    /// `Pᵀ · grad` for layer `layer`: the gradient flowing back through the aggregation.
    fn backward(&mut self, layer: usize, grad: &Tensor) -> Result<Tensor>;
}

/// The whole graph in one process: a local sparse product.
impl Aggregate for Propagation {
    fn forward(&mut self, _layer: usize, z: &Tensor) -> Result<Tensor> {
        Ok(self.apply(z))
    }

    fn backward(&mut self, _layer: usize, grad: &Tensor) -> Result<Tensor> {
        Ok(self.apply_transpose(grad))
    }
}

/// The layer type of a model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ModelKind {
    /// Kipf & Welling's GCN: `H' = σ(P H W + b)` with `P = D̂^-1/2 (A + I) D̂^-1/2`.
    Gcn,
    /// GraphSAGE with the mean aggregator: `H' = σ(H W_self + mean_N(H) W_neigh + b)`.
    Sage,
}

impl ModelKind {
    /// The kind's name on the command line and in logs.
    pub fn name(self) -> &'static str {
        match self {
            ModelKind::Gcn => "gcn",
            ModelKind::Sage => "sage",
        }
    }

    /// The propagation matrix this model aggregates with.
    pub fn propagation(self, graph: &switchgnn_datasets::Graph) -> Propagation {
        match self {
            ModelKind::Gcn => Propagation::gcn(graph),
            ModelKind::Sage => Propagation::mean(graph),
        }
    }
}

impl std::str::FromStr for ModelKind {
    type Err = TrainError;

    fn from_str(s: &str) -> Result<Self> {
        match s {
            "gcn" => Ok(ModelKind::Gcn),
            "sage" => Ok(ModelKind::Sage),
            other => Err(TrainError::Config(format!(
                "model `{other}`: expected gcn or sage"
            ))),
        }
    }
}

/// The shape of a model; the input and output widths come from the data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelConfig {
    /// The layer type.
    pub kind: ModelKind,
    /// Graph convolution layers (at least 1).
    pub layers: usize,
    /// Width of every hidden layer.
    pub hidden: usize,
    /// Dropout rate on every layer's input, the input features included.
    pub dropout: f64,
}

impl Default for ModelConfig {
    /// Kipf & Welling's Cora setting.
    fn default() -> Self {
        ModelConfig {
            kind: ModelKind::Gcn,
            layers: 2,
            hidden: 16,
            dropout: 0.5,
        }
    }
}

impl ModelConfig {
    /// Input and output width of every layer for `inputs` features and `classes` classes.
    pub fn layer_widths(&self, inputs: usize, classes: usize) -> Vec<(usize, usize)> {
        (0..self.layers)
            .map(|l| {
                let input = if l == 0 { inputs } else { self.hidden };
                let output = if l + 1 == self.layers {
                    classes
                } else {
                    self.hidden
                };
                (input, output)
            })
            .collect()
    }

    /// Trainable scalars of this model for `inputs` features and `classes` classes.
    pub fn parameter_count(&self, inputs: usize, classes: usize) -> usize {
        let weights = match self.kind {
            ModelKind::Gcn => 1,
            ModelKind::Sage => 2,
        };
        self.layer_widths(inputs, classes)
            .into_iter()
            .map(|(input, output)| weights * input * output + output)
            .sum()
    }

    /// Per layer: the width its aggregation carries, the narrower of its input and output (what
    /// a plan's exchanges must be prepared for).
    pub fn aggregated_widths(&self, inputs: usize, classes: usize) -> Vec<usize> {
        self.layer_widths(inputs, classes)
            .into_iter()
            .map(|(input, output)| input.min(output))
            .collect()
    }

    /// A usable shape: at least one layer, a positive hidden width, dropout in `[0, 1)`.
    pub fn check(&self) -> Result<()> {
        if self.layers == 0 {
            return Err(TrainError::Config(
                "a model needs at least one layer".into(),
            ));
        }
        if self.hidden == 0 {
            return Err(TrainError::Config("hidden width must be positive".into()));
        }
        if !(0.0..1.0).contains(&self.dropout) {
            return Err(TrainError::Config(format!(
                "dropout {} must be in [0, 1)",
                self.dropout
            )));
        }
        Ok(())
    }
}

#[derive(Debug)]
struct Layer {
    input: usize,
    output: usize,
    /// GCN's weight, or GraphSAGE's neighbour weight.
    weight: Tensor,
    /// GraphSAGE's self weight.
    self_weight: Option<Tensor>,
    bias: Tensor,
    /// `P · (H W)` rather than `(P · H) W`.
    project_first: bool,
}

/// Tensors crossing an aggregation: `agg` goes through it; `skip` (GraphSAGE's self term)
/// crosses to the next segment unchanged.
#[derive(Debug)]
struct Crossing {
    agg: Tensor,
    skip: Option<Tensor>,
}

/// What a training forward pass keeps for its backward pass.
#[derive(Debug)]
pub struct Tape {
    /// Per layer: what its lower segment produced, still attached to that segment's graph.
    sent: Vec<Crossing>,
    /// Per layer: what the upper segment received, as leaves that collect the gradient.
    received: Vec<Crossing>,
    /// The dropout mask applied to the input features.
    input_mask: Option<Tensor>,
}

/// A model with its parameters in a [`VarStore`]: the first layer in optimiser group 0 (the one
/// with weight decay, as in Kipf & Welling), the others in group 1.
#[derive(Debug)]
pub struct Model {
    config: ModelConfig,
    vs: VarStore,
    layers: Vec<Layer>,
}

/// The optimiser group of the first layer's parameters.
pub const FIRST_LAYER_GROUP: usize = 0;
/// The optimiser group of every later layer's parameters.
pub const OTHER_LAYERS_GROUP: usize = 1;

impl Model {
    /// Glorot-uniform weights and zero biases, drawn from `seed`.
    pub fn new(config: &ModelConfig, inputs: usize, classes: usize, seed: u64) -> Result<Model> {
        config.check()?;
        let vs = VarStore::new(Device::Cpu);
        let mut rng = init_rng(seed);
        let mut layers = Vec::with_capacity(config.layers);
        for (l, (input, output)) in config.layer_widths(inputs, classes).into_iter().enumerate() {
            let group = if l == 0 {
                FIRST_LAYER_GROUP
            } else {
                OTHER_LAYERS_GROUP
            };
            let path = vs.root().sub(format!("layer{l}")).set_group(group);
            let weight_of =
                |name: &str, rng: &mut ChaCha8Rng| path.var_copy(name, &glorot(rng, input, output));
            let weight = weight_of("weight", &mut rng);
            let self_weight = match config.kind {
                ModelKind::Gcn => None,
                ModelKind::Sage => Some(weight_of("self_weight", &mut rng)),
            };
            let bias = path.zeros("bias", &[output as i64]);
            layers.push(Layer {
                input,
                output,
                weight,
                self_weight,
                bias,
                project_first: output <= input,
            });
        }
        Ok(Model {
            config: config.clone(),
            vs,
            layers,
        })
    }

    /// The shape the model was built with.
    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    /// The model's parameters (libtorch's variable store).
    pub fn var_store(&self) -> &VarStore {
        &self.vs
    }

    /// Trainable scalars.
    pub fn parameters(&self) -> usize {
        self.vs
            .trainable_variables()
            .iter()
            .map(Tensor::numel)
            .sum()
    }

    /// Per layer: the width its aggregation carries (the narrower of its input and output).
    pub fn aggregated_widths(&self) -> Vec<usize> {
        self.layers
            .iter()
            .map(|l| if l.project_first { l.output } else { l.input })
            .collect()
    }

    /// Logits of every vertex. With `dropout` it is a training pass and returns the [`Tape`] its
    /// backward pass needs; without, an evaluation pass that records nothing.
    pub fn forward(
        &self,
        x: &FeatureMatrix,
        agg: &mut dyn Aggregate,
        dropout: Option<&mut Dropout>,
    ) -> Result<(Tensor, Option<Tape>)> {
        match dropout {
            Some(d) => {
                let mut tape = Tape {
                    sent: Vec::with_capacity(self.layers.len()),
                    received: Vec::with_capacity(self.layers.len()),
                    input_mask: None,
                };
                let logits = self.run(x, agg, Some(d), Some(&mut tape))?;
                Ok((logits, Some(tape)))
            }
            None => Ok((tch::no_grad(|| self.run(x, agg, None, None))?, None)),
        }
    }

    fn run(
        &self,
        x: &FeatureMatrix,
        agg: &mut dyn Aggregate,
        mut dropout: Option<&mut Dropout>,
        mut tape: Option<&mut Tape>,
    ) -> Result<Tensor> {
        let training = tape.is_some();
        let mut h: Option<Tensor> = None;
        for (l, layer) in self.layers.iter().enumerate() {
            let mask = dropout.as_deref_mut().and_then(|d| match &h {
                None => d.mask_input(x.mask_len()),
                Some(t) => d.mask_matrix(t.size()[0] as usize, t.size()[1] as usize),
            });
            let sent = self.pre(layer, h.as_ref(), x, mask.as_ref());
            let summed = agg.forward(l, &sent.agg.detach())?;
            let received = Crossing {
                agg: summed.set_requires_grad(training),
                skip: sent
                    .skip
                    .as_ref()
                    .map(|s| s.detach().set_requires_grad(training)),
            };
            h = Some(self.post(layer, &received, l + 1 == self.layers.len()));
            if let Some(tape) = tape.as_deref_mut() {
                tape.sent.push(sent);
                tape.received.push(received);
                if l == 0 {
                    tape.input_mask = mask;
                }
            }
        }
        Ok(h.expect("at least one layer"))
    }

    /// Dropout, then the projections that come before the aggregation.
    fn pre(
        &self,
        layer: &Layer,
        h: Option<&Tensor>,
        x: &FeatureMatrix,
        mask: Option<&Tensor>,
    ) -> Crossing {
        let project = |w: &Tensor| match h {
            // X is constant: autograd need not record this product (see `backward`).
            None => tch::no_grad(|| x.matmul(w, mask)),
            Some(h) => match mask {
                Some(m) => (h * m.view_as(h)).mm(w),
                None => h.mm(w),
            },
        };
        let agg = if layer.project_first {
            project(&layer.weight)
        } else {
            match h {
                None => x.masked_dense(mask),
                Some(h) => match mask {
                    Some(m) => h * m.view_as(h),
                    None => h.shallow_clone(),
                },
            }
        };
        Crossing {
            agg,
            skip: layer.self_weight.as_ref().map(project),
        }
    }

    /// The projection that comes after the aggregation, the self term, bias and ReLU.
    fn post(&self, layer: &Layer, received: &Crossing, last: bool) -> Tensor {
        // Out of place throughout: `received.agg` is a leaf that autograd must leave intact.
        let projected = if layer.project_first {
            received.agg.shallow_clone()
        } else {
            received.agg.mm(&layer.weight)
        };
        let summed = match &received.skip {
            Some(skip) => projected + skip,
            None => projected,
        };
        let out = summed + &layer.bias;
        if last {
            out
        } else {
            out.relu()
        }
    }

    /// Gradients of `loss` (a function of the logits of the pass that made `tape` from the input
    /// `x`) into every parameter's `.grad()`, accumulated as autograd does.
    pub fn backward(
        &self,
        loss: &Tensor,
        tape: Tape,
        x: &FeatureMatrix,
        agg: &mut dyn Aggregate,
    ) -> Result<()> {
        loss.backward();
        for (l, layer) in self.layers.iter().enumerate().rev() {
            let (sent, received) = (&tape.sent[l], &tape.received[l]);
            let mut surrogate: Option<Tensor> = None;
            // Push `grad` into whatever `produced` was computed from.
            let mut push = |produced: &Tensor, grad: Tensor| {
                if produced.requires_grad() && grad.defined() {
                    let term = (produced * grad).sum(Kind::Float);
                    surrogate = Some(match surrogate.take() {
                        Some(s) => s + term,
                        None => term,
                    });
                }
            };
            let g_agg = received.agg.grad();
            let g_skip = received.skip.as_ref().map(Tensor::grad);
            if l > 0 {
                if g_agg.defined() {
                    push(&sent.agg, agg.backward(l, &g_agg)?);
                }
                if let (Some(produced), Some(g)) = (&sent.skip, g_skip) {
                    push(produced, g);
                }
            } else {
                // The input products were left out of autograd; their weights' gradients are
                // `(X ⊙ mask)ᵀ · G`, with X's transpose prepared once.
                let mask = tape.input_mask.as_ref();
                if layer.project_first && g_agg.defined() {
                    let g = agg.backward(l, &g_agg)?;
                    push(&layer.weight, x.transpose_matmul(&g, mask));
                }
                if let (Some(w), Some(g)) = (&layer.self_weight, g_skip) {
                    if g.defined() {
                        push(w, x.transpose_matmul(&g, mask));
                    }
                }
            }
            if let Some(s) = surrogate {
                s.backward();
            }
        }
        Ok(())
    }

    /// Layer input and output widths, for logs.
    pub fn widths(&self) -> Vec<(usize, usize)> {
        self.layers.iter().map(|l| (l.input, l.output)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph_tensors::FeatureNorm;
    use switchgnn_datasets::synthetic::{generate, Preset};
    use switchgnn_datasets::NoProgress;

    /// The model written straight from its definition, autograd through everything, one fixed
    /// layer order: GCN `P (H W) + b`, GraphSAGE `H W_self + (P H) W_neigh + b`.
    fn plain_forward(model: &Model, x: &FeatureMatrix, p: &Propagation, d: &mut Dropout) -> Tensor {
        let mut h: Option<Tensor> = None;
        let n = model.layers.len();
        for (l, layer) in model.layers.iter().enumerate() {
            let len = h.as_ref().map_or(x.mask_len(), Tensor::numel);
            let mask = d.mask(len);
            let dropped = match (&h, &mask) {
                (None, m) => x.masked_dense(m.as_ref()),
                (Some(h), Some(m)) => h * m.view_as(h),
                (Some(h), None) => h.shallow_clone(),
            };
            let out = match &layer.self_weight {
                None => p.matrix().mm(&dropped.mm(&layer.weight)),
                Some(w_self) => dropped.mm(w_self) + p.matrix().mm(&dropped).mm(&layer.weight),
            } + &layer.bias;
            h = Some(if l + 1 == n { out } else { out.relu() });
        }
        h.unwrap()
    }

    #[test]
    fn parameter_count_matches_the_variables() {
        for kind in [ModelKind::Gcn, ModelKind::Sage] {
            for layers in [1, 2, 4] {
                let config = ModelConfig {
                    kind,
                    layers,
                    hidden: 16,
                    dropout: 0.5,
                };
                let model = Model::new(&config, 1433, 7, 0).unwrap();
                assert_eq!(model.parameters(), config.parameter_count(1433, 7));
            }
        }
        // Each layer aggregates at its narrower side.
        let wide = ModelConfig {
            layers: 3,
            hidden: 300,
            ..ModelConfig::default()
        };
        let model = Model::new(&wide, 128, 8, 0).unwrap();
        assert_eq!(model.aggregated_widths(), vec![128, 300, 8]);
        assert_eq!(wide.aggregated_widths(128, 8), model.aggregated_widths());
        assert_eq!(model.widths(), vec![(128, 300), (300, 300), (300, 8)]);
        // Kipf & Welling's Cora GCN: 1433·16 + 16 + 16·7 + 7.
        assert_eq!(ModelConfig::default().parameter_count(1433, 7), 23_063);
    }

    fn grads(model: &Model) -> Vec<(String, Vec<f32>)> {
        let mut v: Vec<_> = model
            .vs
            .variables()
            .into_iter()
            .map(|(name, t)| (name, Vec::<f32>::try_from(t.grad().flatten(0, -1)).unwrap()))
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    }

    /// The segmented backward pass gives the gradients plain autograd gives, for both models,
    /// both layer orders (hidden wider and narrower than the input), dense and sparse inputs.
    #[test]
    fn segmented_backward_equals_plain_autograd() {
        let spec = Preset::from_name("small").unwrap().spec(0.1, 3).unwrap();
        let data = generate(&spec, &NoProgress).unwrap();
        let features = data.features.as_ref().unwrap();
        let labels = Tensor::from_slice(
            &data
                .labels
                .as_ref()
                .unwrap()
                .values()
                .iter()
                .map(|&c| i64::from(c))
                .collect::<Vec<_>>(),
        );
        let sparse = switchgnn_datasets::Features::Dense(features.to_dense()).compact();
        let sparse = match sparse {
            f @ switchgnn_datasets::Features::Sparse(_) => f,
            // Synthetic features are dense; zero out most of them to get a sparse variant.
            switchgnn_datasets::Features::Dense(d) => {
                let thinned: Vec<f32> = d
                    .values()
                    .iter()
                    .map(|&x| if x > 1.0 { x } else { 0.0 })
                    .collect();
                let d = switchgnn_datasets::DenseFeatures::new(
                    features.rows(),
                    features.cols(),
                    thinned,
                )
                .unwrap();
                switchgnn_datasets::Features::Dense(d).compact()
            }
        };
        assert!(sparse.is_sparse());
        for kind in [ModelKind::Gcn, ModelKind::Sage] {
            for (hidden, layers) in [(8, 2), (300, 3)] {
                for input in [features, &sparse] {
                    let config = ModelConfig {
                        kind,
                        layers,
                        hidden,
                        dropout: 0.5,
                    };
                    let (x, _) = FeatureMatrix::new(input, FeatureNorm::None);
                    let mut p = kind.propagation(&data.graph);
                    let model = Model::new(&config, x.cols(), 8, 5).unwrap();
                    let (logits, tape) = model
                        .forward(&x, &mut p, Some(&mut Dropout::new(0.5, 9)))
                        .unwrap();
                    model
                        .backward(
                            &logits.cross_entropy_for_logits(&labels),
                            tape.unwrap(),
                            &x,
                            &mut p,
                        )
                        .unwrap();
                    let segmented = grads(&model);
                    model
                        .var_store()
                        .trainable_variables()
                        .iter()
                        .for_each(|t| {
                            let _ = t.grad().zero_();
                        });
                    let plain = plain_forward(&model, &x, &p, &mut Dropout::new(0.5, 9));
                    let diff = f64::try_from((&logits - &plain).abs().max()).unwrap();
                    let scale = f64::try_from(plain.abs().max()).unwrap();
                    eprintln!("{kind:?} {hidden}x{layers} sparse={}: logits differ by {diff:e} (scale {scale})", input.is_sparse());
                    assert!(
                        diff <= 1e-5 * scale,
                        "logits differ by {diff} (scale {scale})"
                    );
                    plain.cross_entropy_for_logits(&labels).backward();
                    let reference = grads(&model);
                    assert_eq!(segmented.len(), reference.len());
                    for ((name, a), (_, b)) in segmented.iter().zip(&reference) {
                        let scale = b.iter().fold(0f32, |m, x| m.max(x.abs()));
                        assert!(scale > 0.0, "{name} has a zero gradient");
                        let worst = a.iter().zip(b).fold(0f32, |m, (x, y)| m.max((x - y).abs()));
                        assert!(
                            worst <= 1e-4 * scale,
                            "{kind:?} {hidden}x{layers} {name}: differs by {worst} (scale {scale})"
                        );
                    }
                }
            }
        }
    }
}
