//! Dataset statistics: the numbers that say how a graph will behave under partitioning and
//! in-network aggregation (size, degree skew, components) and as a learning task.

use petgraph::unionfind::UnionFind;
use rayon::prelude::*;
use serde::Serialize;

use crate::dataset::Dataset;
use crate::split::SplitSource;

/// A dataset's statistics, as `switchgnn stats` prints them (serialised as JSON too).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Stats {
    /// The dataset's name.
    pub name: String,
    /// Vertices.
    pub vertices: usize,
    /// Undirected edges, each counted once.
    pub edges: u64,
    /// Vertices with an edge to themselves.
    pub self_loops: u64,
    /// Vertices without any edge.
    pub isolated_vertices: u64,
    /// Connected components (an isolated vertex is one).
    pub components: u64,
    /// Vertices of the largest component.
    pub largest_component: u64,
    /// How degrees are spread.
    pub degree: DegreeStats,
    /// The feature matrix, if any.
    pub features: Option<FeatureStats>,
    /// The labels, if any.
    pub classes: Option<ClassStats>,
    /// The split's sizes and source.
    pub split: SplitStats,
}

/// Degree distribution: the skew that decides how unevenly boundary traffic falls.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct DegreeStats {
    /// Mean adjacency entries per vertex.
    pub mean: f64,
    /// Median degree.
    pub median: f64,
    /// Largest degree.
    pub max: u64,
    /// Share of all adjacency entries held by the 20% highest-degree vertices.
    pub top20_share: f64,
    /// Gini coefficient of the degree distribution (0 = all equal, → 1 = one hub).
    pub gini: f64,
}

/// Size and sparsity of the features.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct FeatureStats {
    /// Columns.
    pub width: usize,
    /// Whether stored as CSR.
    pub sparse: bool,
    /// Non-zero entries.
    pub nonzeros: u64,
    /// Share of entries that are non-zero.
    pub density: f64,
    /// Bytes the arrays hold in memory.
    pub bytes: u64,
}

/// Class balance and how much the graph's edges follow the classes.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ClassStats {
    /// Classes.
    pub count: u32,
    /// Vertices per class, by class id.
    pub sizes: Vec<u64>,
    /// Class names, where the dataset ships them.
    pub names: Option<Vec<String>>,
    /// Share of vertices in the largest class (the accuracy of always guessing it).
    pub majority_share: f64,
    /// Largest class size over smallest non-empty class size.
    pub imbalance: f64,
    /// Share of edges whose endpoints share a class (low on heterophilous graphs).
    pub edge_homophily: f64,
}

/// Sizes of the split's sets.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SplitStats {
    /// Training vertices.
    pub train: usize,
    /// Validation vertices.
    pub val: usize,
    /// Test vertices.
    pub test: usize,
    /// Where the split came from.
    pub source: SplitSource,
}

impl Stats {
    /// Compute every statistic of `dataset` (linear in its size, in parallel).
    pub fn of(dataset: &Dataset) -> Stats {
        let g = &dataset.graph;
        let n = g.num_vertices();
        let degrees: Vec<u64> = (0..n as u32).into_par_iter().map(|v| g.degree(v)).collect();
        let (components, largest) = components(dataset);
        Stats {
            name: dataset.name.clone(),
            vertices: n,
            edges: g.num_edges(),
            self_loops: g.num_self_loops(),
            isolated_vertices: degrees.par_iter().filter(|&&d| d == 0).count() as u64,
            components,
            largest_component: largest,
            degree: degree_stats(degrees),
            features: dataset.features.as_ref().map(|f| {
                let nonzeros = f.nnz();
                FeatureStats {
                    width: f.cols(),
                    sparse: f.is_sparse(),
                    nonzeros,
                    density: nonzeros as f64 / (f.rows() as f64 * f.cols() as f64),
                    bytes: f.memory_bytes(),
                }
            }),
            classes: dataset.labels.as_ref().map(|l| {
                let sizes = l.class_counts();
                let max = sizes.iter().copied().max().unwrap_or(0);
                let min = sizes.iter().copied().filter(|&s| s > 0).min().unwrap_or(0);
                ClassStats {
                    count: l.num_classes(),
                    majority_share: max as f64 / n as f64,
                    imbalance: if min > 0 {
                        max as f64 / min as f64
                    } else {
                        0.0
                    },
                    names: l.class_names().map(<[String]>::to_vec),
                    edge_homophily: edge_homophily(g, l.values()),
                    sizes,
                }
            }),
            split: SplitStats {
                train: dataset.split.train.len(),
                val: dataset.split.val.len(),
                test: dataset.split.test.len(),
                source: dataset.split.source.clone(),
            },
        }
    }
}

fn edge_homophily(g: &crate::Graph, labels: &[u32]) -> f64 {
    let same: u64 = (0..g.num_vertices() as u32)
        .into_par_iter()
        .map(|u| {
            let c = labels[u as usize];
            g.neighbors(u)
                .iter()
                .filter(|&&v| labels[v as usize] == c)
                .count() as u64
        })
        .sum();
    let entries = g.num_adjacency_entries();
    if entries == 0 {
        0.0
    } else {
        same as f64 / entries as f64
    }
}

/// Number of connected components (isolated vertices count as their own) and the largest size.
fn components(dataset: &Dataset) -> (u64, u64) {
    let g = &dataset.graph;
    let n = g.num_vertices();
    let mut uf = UnionFind::<u32>::new(n);
    for (u, v) in g.edges() {
        uf.union(u, v);
    }
    let labels = uf.into_labeling();
    let mut sizes = vec![0u64; n];
    for &root in &labels {
        sizes[root as usize] += 1;
    }
    let count = sizes.iter().filter(|&&s| s > 0).count() as u64;
    (count, sizes.into_iter().max().unwrap_or(0))
}

fn degree_stats(mut degrees: Vec<u64>) -> DegreeStats {
    degrees.par_sort_unstable();
    let n = degrees.len();
    let total: u64 = degrees.iter().sum();
    let median = if n % 2 == 1 {
        degrees[n / 2] as f64
    } else {
        (degrees[n / 2 - 1] + degrees[n / 2]) as f64 / 2.0
    };
    let top = (n as f64 * 0.2).ceil() as usize;
    let top_sum: u64 = degrees[n - top..].iter().sum();
    // Gini on ascending values: sum_i (2i - n - 1) x_i / (n * sum x), i = 1..n.
    let weighted: f64 = degrees
        .iter()
        .enumerate()
        .map(|(i, &d)| (2.0 * (i as f64 + 1.0) - n as f64 - 1.0) * d as f64)
        .sum();
    let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { 0.0 };
    DegreeStats {
        mean: ratio(total as f64, n as f64),
        median,
        max: degrees.last().copied().unwrap_or(0),
        top20_share: ratio(top_sum as f64, total as f64),
        gini: ratio(weighted, n as f64 * total as f64),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::Graph;
    use crate::split::Split;

    fn dataset(n: usize, edges: &[(u32, u32)]) -> Dataset {
        let g = Graph::from_edges(n, edges, Default::default()).unwrap();
        let split = Split::random(n, Default::default(), 1).unwrap();
        Dataset::new("t", g, None, None, split).unwrap()
    }

    #[test]
    fn star_plus_isolated_vertex() {
        // Centre 0 with leaves 1..=4, vertex 5 alone.
        let s = Stats::of(&dataset(6, &[(0, 1), (0, 2), (0, 3), (0, 4)]));
        assert_eq!((s.vertices, s.edges, s.isolated_vertices), (6, 4, 1));
        assert_eq!((s.components, s.largest_component), (2, 5));
        assert_eq!(s.degree.max, 4);
        assert_eq!(s.degree.median, 1.0);
        // Top 20% = ceil(1.2) = 2 vertices: degrees 4 and 1 of 8 entries.
        assert!((s.degree.top20_share - 5.0 / 8.0).abs() < 1e-12);
        // Ascending 0,1,1,1,1,4: sum (2i-7) x_i = -3-1+1+3+20 = 20 over 6*8.
        assert!((s.degree.gini - 20.0 / 48.0).abs() < 1e-12);
    }

    #[test]
    fn regular_graph_has_zero_gini() {
        let s = Stats::of(&dataset(4, &[(0, 1), (1, 2), (2, 3), (3, 0)]));
        assert_eq!(s.degree.gini, 0.0);
        assert_eq!(s.components, 1);
        assert!((s.degree.top20_share - 0.25).abs() < 1e-12);
    }
}
