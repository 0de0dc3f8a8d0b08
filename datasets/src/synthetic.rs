//! Synthetic graphs: a degree-corrected stochastic block model with power-law degrees.
//!
//! Each vertex gets a planted community (its class label) and a Pareto-distributed weight. An
//! edge picks its first endpoint in proportion to weight over all vertices, and its second in
//! proportion to weight inside the first endpoint's community with probability `homophily`,
//! otherwise over all vertices. Expected degrees then follow the weights (the degree correction
//! of Karrer & Newman), so a small Pareto tail index gives the hub-heavy degree skew of social
//! graphs such as Reddit, where 20% of the vertices hold about 80% of the neighbours.
//!
//! Features are a class centre scaled by `feature_signal`, plus unit Gaussian noise; a share
//! `label_noise` of the vertices draw their features around another class's centre. A single
//! vertex's features then separate two classes only with error Φ(−signal), while averaging over
//! mostly same-class neighbours removes most of the noise: learnable, not trivial, and better
//! with the graph than without it.
//!
//! Everything is drawn from counter-based streams (seed, purpose, index), so the output depends
//! on the seed alone, not on the number of threads.

use rand::distr::weighted::WeightedIndex;
use rand::distr::Distribution;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::weighted::WeightedAliasIndex;
use rand_distr::StandardNormal;
use rayon::prelude::*;
use serde::Serialize;

use crate::dataset::{Dataset, Labels};
use crate::error::{Error, Invalid, Result};
use crate::features::{DenseFeatures, Features};
use crate::graph::Graph;
use crate::progress::Progress;
use crate::split::{Split, SplitFractions};

/// Named parameter sets. The large ones match the sizes of the SwitchGNN evaluation graphs,
/// counting each undirected edge once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Preset {
    /// A few thousand vertices: quick runs, tests, the README's default job.
    Small,
    /// Reddit: 232,965 vertices, 57,307,946 edges (DGL's 114.6M counts both directions),
    /// 602 features, 41 classes.
    RedditLike,
    /// ogbn-products: 2,449,029 vertices, 61,859,140 edges, 100 features, 47 classes.
    ProductsLike,
    /// Yelp (GraphSAINT): 716,847 vertices, 6,977,409 edges, 300 features, 100 classes.
    YelpLike,
}

impl Preset {
    /// Every preset, smallest first.
    pub const ALL: [Preset; 4] = [
        Preset::Small,
        Preset::RedditLike,
        Preset::ProductsLike,
        Preset::YelpLike,
    ];

    /// The preset's name on the command line (`synthetic:<name>`).
    pub fn name(self) -> &'static str {
        match self {
            Preset::Small => "small",
            Preset::RedditLike => "reddit-like",
            Preset::ProductsLike => "products-like",
            Preset::YelpLike => "yelp-like",
        }
    }

    /// The preset called `name`; a usage error lists the names.
    pub fn from_name(name: &str) -> Result<Preset> {
        Preset::ALL
            .into_iter()
            .find(|p| p.name() == name)
            .ok_or_else(|| {
                let names: Vec<_> = Preset::ALL.iter().map(|p| p.name()).collect();
                Error::Usage(format!(
                    "unknown synthetic preset `{name}` (one of: {})",
                    names.join(", ")
                ))
            })
    }

    /// The preset's parameters with vertex and edge counts multiplied by `scale` (average
    /// degree, feature width and classes stay).
    pub fn spec(self, scale: f64, seed: u64) -> Result<SyntheticSpec> {
        // (vertices, edges, features, classes, homophily, degree tail, max degree fraction)
        let (n, m, f, k, homophily, tail, max_frac) = match self {
            Preset::Small => (4_000, 20_000, 128, 8, 0.75, 1.6, 0.05),
            Preset::RedditLike => (232_965, 57_307_946, 602, 41, 0.8, 0.65, 0.15),
            Preset::ProductsLike => (2_449_029, 61_859_140, 100, 47, 0.8, 1.0, 0.01),
            Preset::YelpLike => (716_847, 6_977_409, 300, 100, 0.6, 1.2, 0.01),
        };
        if !(scale.is_finite() && scale > 0.0) {
            return Err(Error::Usage(format!(
                "scale {scale} must be a positive number"
            )));
        }
        let spec = SyntheticSpec {
            name: if scale == 1.0 {
                self.name().to_string()
            } else {
                format!("{}@{scale}", self.name())
            },
            vertices: (n as f64 * scale).round() as usize,
            edges: (m as f64 * scale).round() as u64,
            features: f,
            classes: k,
            homophily,
            degree_tail: tail,
            max_degree_fraction: max_frac,
            class_size_decay: 0.5,
            feature_signal: 1.0,
            label_noise: 0.1,
            split: SplitFractions::default(),
            seed,
        };
        spec.check()?;
        Ok(spec)
    }
}

/// Every parameter of the generator.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SyntheticSpec {
    /// The generated dataset's name (`<preset>@<scale>` when scaled).
    pub name: String,
    /// Vertices to generate.
    pub vertices: usize,
    /// Undirected edges, exact after deduplication.
    pub edges: u64,
    /// Feature width.
    pub features: usize,
    /// Classes (planted communities).
    pub classes: usize,
    /// Probability that an edge's second endpoint comes from the first endpoint's community.
    pub homophily: f64,
    /// Pareto tail index of vertex weights: smaller means more skewed degrees.
    pub degree_tail: f64,
    /// Cap on any vertex's expected degree, as a fraction of the vertex count.
    pub max_degree_fraction: f64,
    /// Community sizes fall as `(c + 1)^-decay` (0 = balanced classes).
    pub class_size_decay: f64,
    /// Separation of class centres, in units of the per-dimension noise.
    pub feature_signal: f64,
    /// Share of vertices whose features are drawn around another class's centre.
    pub label_noise: f64,
    /// Fractions of the random split drawn for the dataset.
    #[serde(skip)]
    pub split: SplitFractions,
    /// Seeds every random draw: the same spec gives the same dataset.
    pub seed: u64,
}

impl SyntheticSpec {
    /// Parameters the generator can honour: enough vertices per class, an edge count the vertices can hold, fractions and probabilities in range.
    pub fn check(&self) -> Result<()> {
        let fail = |msg: String| Err(Error::Usage(format!("synthetic `{}`: {msg}", self.name)));
        let n = self.vertices;
        if n < 2 * self.classes.max(1) || n >= u32::MAX as usize {
            return fail(format!(
                "{n} vertices is too few for {} classes (or beyond u32 ids); use a larger scale",
                self.classes
            ));
        }
        // Past half of all possible pairs, rejection of repeats stops converging.
        let possible = n as f64 * (n as f64 - 1.0) / 2.0;
        if self.edges == 0 || self.edges as f64 > 0.5 * possible {
            return fail(format!(
                "{} edges among {n} vertices is empty or denser than half of all pairs; use a larger scale",
                self.edges
            ));
        }
        if self.features == 0 || self.classes < 2 {
            return fail("needs at least one feature and two classes".into());
        }
        let unit = |x: f64| (0.0..=1.0).contains(&x);
        if !unit(self.homophily) || !unit(self.label_noise) || self.degree_tail <= 0.0 {
            return fail(
                "homophily and label noise must lie in [0, 1], the tail index above 0".into(),
            );
        }
        if !(self.max_degree_fraction > 0.0 && self.max_degree_fraction <= 1.0) {
            return fail("max degree fraction must lie in (0, 1]".into());
        }
        self.split.check().map_err(Error::from)
    }
}

/// Purposes of the random streams; each (seed, purpose, index) triple is its own generator.
#[derive(Clone, Copy)]
enum Stream {
    Community = 1,
    Weight = 2,
    Edges = 3,
    Trim = 4,
    Centres = 5,
    Features = 6,
}

fn rng(seed: u64, stream: Stream, index: u64) -> ChaCha8Rng {
    let mut key = [0u8; 32];
    key[..8].copy_from_slice(&seed.to_le_bytes());
    key[8..16].copy_from_slice(&(stream as u64).to_le_bytes());
    key[16..24].copy_from_slice(&index.to_le_bytes());
    ChaCha8Rng::from_seed(key)
}

const CHUNK: usize = 1 << 16;
const EDGE_CHUNK: u64 = 1 << 20;
const MAX_ROUNDS: u32 = 12;

/// Draw a dataset from `spec`.
pub fn generate(spec: &SyntheticSpec, progress: &dyn Progress) -> Result<Dataset> {
    spec.check()?;
    let n = spec.vertices;
    progress.stage("communities and weights", Some(n as u64));
    let communities = assign_communities(spec);
    let weights = degree_weights(spec);
    progress.advance(n as u64);

    let keys = sample_edges(spec, &communities, &weights, progress)?;
    progress.stage("adjacency", None);
    let mut directed: Vec<u64> = keys
        .par_iter()
        .flat_map_iter(|&k| [k, k.rotate_left(32)])
        .collect();
    drop(keys);
    directed.par_sort_unstable();
    let graph = Graph::from_sorted_keys(n, &directed);
    drop(directed);

    let features = draw_features(spec, &communities, progress);
    let labels = Labels::new(communities, spec.classes as u32, None)?;
    let split = Split::random(n, spec.split, spec.seed)?;
    Ok(Dataset::new(
        spec.name.clone(),
        graph,
        Some(Features::Dense(features)),
        Some(labels),
        split,
    )?)
}

fn assign_communities(spec: &SyntheticSpec) -> Vec<u32> {
    let sizes: Vec<f64> = (0..spec.classes)
        .map(|c| (c as f64 + 1.0).powf(-spec.class_size_decay))
        .collect();
    let pick = WeightedIndex::new(&sizes).expect("positive class sizes");
    let mut out = vec![0u32; spec.vertices];
    out.par_chunks_mut(CHUNK)
        .enumerate()
        .for_each(|(c, chunk)| {
            let mut r = rng(spec.seed, Stream::Community, c as u64);
            for x in chunk {
                *x = pick.sample(&mut r) as u32;
            }
        });
    out
}

/// Pareto weights, scaled to expected degrees and capped at the maximum degree.
fn degree_weights(spec: &SyntheticSpec) -> Vec<f64> {
    let mut w = vec![0f64; spec.vertices];
    w.par_chunks_mut(CHUNK).enumerate().for_each(|(c, chunk)| {
        let mut r = rng(spec.seed, Stream::Weight, c as u64);
        for x in chunk {
            let u: f64 = 1.0 - r.random::<f64>(); // (0, 1]
            *x = u.powf(-1.0 / spec.degree_tail);
        }
    });
    let mean_degree = 2.0 * spec.edges as f64 / spec.vertices as f64;
    let cap = (spec.max_degree_fraction * spec.vertices as f64).max(mean_degree);
    // Rescale to mean degree, cap, and repeat: capping lowers the mean, rescaling raises it.
    for _ in 0..8 {
        let mean = w.par_iter().sum::<f64>() / w.len() as f64;
        let factor = mean_degree / mean;
        w.par_iter_mut().for_each(|x| *x = (*x * factor).min(cap));
    }
    w
}

/// Sample until exactly `spec.edges` distinct non-loop pairs exist. Returns sorted keys
/// `min << 32 | max`.
fn sample_edges(
    spec: &SyntheticSpec,
    communities: &[u32],
    weights: &[f64],
    progress: &dyn Progress,
) -> Result<Vec<u64>> {
    let global = WeightedAliasIndex::new(weights.to_vec())
        .map_err(|e| Error::Invalid(Invalid::new("synthetic weights", format!("unusable: {e}"))))?;
    let mut members: Vec<Vec<u32>> = vec![Vec::new(); spec.classes];
    for (v, &c) in communities.iter().enumerate() {
        members[c as usize].push(v as u32);
    }
    let local: Vec<Option<WeightedAliasIndex<f64>>> = members
        .par_iter()
        .map(|m| WeightedAliasIndex::new(m.iter().map(|&v| weights[v as usize]).collect()).ok())
        .collect();

    let target = spec.edges;
    let mut keys: Vec<u64> = Vec::new();
    let mut yield_rate = 0.95;
    for round in 0..MAX_ROUNDS {
        let need = target - keys.len() as u64;
        if need == 0 {
            break;
        }
        let draws = ((need as f64 / yield_rate) * 1.02).ceil() as u64 + 16;
        progress.stage(&format!("edges (round {})", round + 1), Some(draws));
        let chunks = draws.div_ceil(EDGE_CHUNK);
        let fresh: Vec<u64> = (0..chunks)
            .into_par_iter()
            .flat_map_iter(|c| {
                let len = EDGE_CHUNK.min(draws - c * EDGE_CHUNK);
                let mut r = rng(spec.seed, Stream::Edges, (u64::from(round) << 40) | c);
                let mut out = Vec::with_capacity(len as usize);
                for _ in 0..len {
                    let u = global.sample(&mut r) as u32;
                    let c_u = communities[u as usize] as usize;
                    let v = match &local[c_u] {
                        Some(table) if r.random::<f64>() < spec.homophily => {
                            members[c_u][table.sample(&mut r)]
                        }
                        _ => global.sample(&mut r) as u32,
                    };
                    if u != v {
                        out.push((u64::from(u.min(v)) << 32) | u64::from(u.max(v)));
                    }
                }
                progress.advance(len);
                out
            })
            .collect();
        let before = keys.len() as u64;
        keys.extend(fresh);
        keys.par_sort_unstable();
        keys.dedup();
        let gained = keys.len() as u64 - before;
        yield_rate = (gained as f64 / draws as f64).clamp(0.01, 1.0);
        tracing::debug!(
            round,
            draws,
            gained,
            total = keys.len(),
            "edge sampling round"
        );
        if keys.len() as u64 > target {
            trim_to(&mut keys, target, spec.seed, round);
        }
    }
    if (keys.len() as u64) < target {
        return Err(Error::Usage(format!(
            "synthetic `{}`: only {} distinct edges of {target} after {MAX_ROUNDS} rounds; the degree cap is too tight for this density",
            spec.name,
            keys.len()
        )));
    }
    Ok(keys)
}

/// Remove a uniformly random subset so exactly `target` keys remain (order kept).
fn trim_to(keys: &mut Vec<u64>, target: u64, seed: u64, round: u32) {
    let excess = keys.len() - target as usize;
    let mut r = rng(seed, Stream::Trim, u64::from(round));
    let mut drop: Vec<usize> = rand::seq::index::sample(&mut r, keys.len(), excess).into_vec();
    drop.sort_unstable();
    let mut next = drop.into_iter().peekable();
    let mut i = 0;
    keys.retain(|_| {
        let remove = next.peek() == Some(&i);
        if remove {
            next.next();
        }
        i += 1;
        !remove
    });
}

fn draw_features(
    spec: &SyntheticSpec,
    communities: &[u32],
    progress: &dyn Progress,
) -> DenseFeatures {
    let (n, f, k) = (spec.vertices, spec.features, spec.classes);
    let mut centre_rng = rng(spec.seed, Stream::Centres, 0);
    // Scaled so that two centres sit 2·signal noise-units apart along the line between them.
    let scale = spec.feature_signal * (2.0 / f as f64).sqrt();
    let centres: Vec<f32> = (0..k * f)
        .map(|_| (centre_rng.sample::<f64, _>(StandardNormal) * scale) as f32)
        .collect();
    progress.stage("features", Some(n as u64));
    let mut values = vec![0f32; n * f];
    values
        .par_chunks_mut(f * 256)
        .enumerate()
        .for_each(|(block, rows)| {
            for (i, row) in rows.chunks_mut(f).enumerate() {
                let v = block * 256 + i;
                let mut r = rng(spec.seed, Stream::Features, v as u64);
                let mut class = communities[v] as usize;
                if r.random::<f64>() < spec.label_noise {
                    class = (class + 1 + r.random_range(0..k - 1)) % k;
                }
                let centre = &centres[class * f..(class + 1) * f];
                for (x, &c) in row.iter_mut().zip(centre) {
                    *x = c + r.sample::<f32, _>(StandardNormal);
                }
            }
            progress.advance((rows.len() / f) as u64);
        });
    DenseFeatures::new(n, f, values).expect("generated features are finite and well-shaped")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::progress::NoProgress;
    use crate::stats::Stats;

    #[test]
    fn small_preset_has_exact_sizes_and_is_reproducible() {
        let spec = Preset::Small.spec(1.0, 42).unwrap();
        let a = generate(&spec, &NoProgress).unwrap();
        assert_eq!(a.num_vertices(), 4000);
        assert_eq!(a.graph.num_edges(), 20_000);
        assert_eq!(a.graph.num_self_loops(), 0);
        assert_eq!(a.features.as_ref().unwrap().cols(), 128);
        assert_eq!(a.labels.as_ref().unwrap().num_classes(), 8);
        let b = generate(&spec, &NoProgress).unwrap();
        assert_eq!(a, b);
        let c = generate(&Preset::Small.spec(1.0, 43).unwrap(), &NoProgress).unwrap();
        assert_ne!(a.graph, c.graph);
    }

    #[test]
    fn same_output_on_one_thread_and_many() {
        let spec = Preset::Small.spec(0.5, 3).unwrap();
        let one = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        let a = one.install(|| generate(&spec, &NoProgress).unwrap());
        let b = generate(&spec, &NoProgress).unwrap();
        assert_eq!(a, b);
    }

    #[test]
    fn scaled_preset_keeps_exact_size_and_homophily() {
        // 2% of Yelp: 14,337 vertices and 139,548 edges, the same average degree. (A scaled
        // Reddit is too dense to keep 80% of its edges inside 41 communities of ~110 vertices.)
        let d = generate(&Preset::YelpLike.spec(0.02, 1).unwrap(), &NoProgress).unwrap();
        assert_eq!(d.num_vertices(), 14_337);
        assert_eq!(d.graph.num_edges(), 139_548);
        let homophily = Stats::of(&d).classes.unwrap().edge_homophily;
        assert!(homophily > 0.55, "edge homophily {homophily}");
    }

    #[test]
    fn smaller_tail_index_gives_more_degree_skew() {
        let share = |tail: f64| {
            let spec = SyntheticSpec {
                degree_tail: tail,
                ..Preset::Small.spec(5.0, 11).unwrap()
            };
            let d = generate(&spec, &NoProgress).unwrap();
            Stats::of(&d).degree.top20_share
        };
        let (heavy, light) = (share(0.7), share(3.0));
        assert!(heavy > 0.7, "tail 0.7: top-20% share {heavy}");
        assert!(light < 0.45, "tail 3.0: top-20% share {light}");
    }

    /// Nearest-centroid accuracy (centroids from the training vertices) on raw features and on
    /// features averaged over each vertex and its neighbours: well above chance, far from
    /// perfect, and clearly better with the graph.
    #[test]
    fn small_preset_is_learnable_but_not_trivial() {
        let d = generate(&Preset::Small.spec(1.0, 5).unwrap(), &NoProgress).unwrap();
        let Some(Features::Dense(x)) = &d.features else {
            panic!("dense features")
        };
        let labels = d.labels.as_ref().unwrap().values();
        let f = x.row(0).len();
        let smoothed: Vec<f32> = (0..d.num_vertices() as u32)
            .flat_map(|v| {
                let nbrs = d.graph.neighbors(v);
                let mut acc = x.row(v as usize).to_vec();
                for &u in nbrs {
                    for (a, b) in acc.iter_mut().zip(x.row(u as usize)) {
                        *a += b;
                    }
                }
                acc.into_iter().map(move |a| a / (nbrs.len() + 1) as f32)
            })
            .collect();
        let accuracy = |rows: &[f32]| {
            let k = 8;
            let mut centroid = vec![0f64; k * f];
            let mut count = vec![0f64; k];
            for &v in &d.split.train {
                let c = labels[v as usize] as usize;
                count[c] += 1.0;
                for j in 0..f {
                    centroid[c * f + j] += rows[v as usize * f + j] as f64;
                }
            }
            for c in 0..k {
                for j in 0..f {
                    centroid[c * f + j] /= count[c].max(1.0);
                }
            }
            let correct = d.split.test.iter().filter(|&&v| {
                let row = &rows[v as usize * f..(v as usize + 1) * f];
                let best = (0..k)
                    .map(|c| {
                        let dist: f64 = row
                            .iter()
                            .zip(&centroid[c * f..(c + 1) * f])
                            .map(|(&a, &b)| (a as f64 - b).powi(2))
                            .sum();
                        (dist, c)
                    })
                    .min_by(|a, b| a.0.total_cmp(&b.0))
                    .unwrap()
                    .1;
                best == labels[v as usize] as usize
            });
            correct.count() as f64 / d.split.test.len() as f64
        };
        let raw = accuracy(x.values());
        let with_graph = accuracy(&smoothed);
        assert!(raw > 0.25 && raw < 0.85, "raw-feature accuracy {raw}");
        assert!(
            with_graph > raw + 0.05,
            "graph-smoothed {with_graph} vs raw {raw}"
        );
    }

    #[test]
    fn impossible_specs_are_refused() {
        assert!(Preset::RedditLike.spec(0.0001, 0).is_err());
        assert!(Preset::Small.spec(-1.0, 0).is_err());
        assert!(Preset::from_name("facebook-like").is_err());
    }
}
