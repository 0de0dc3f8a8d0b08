//! Boundary analysis: which vertices must leave their worker, and to how many workers.
//!
//! A vertex is a *boundary* vertex when at least one neighbour lives on another worker; its
//! *fan-out* is the number of distinct other workers among its neighbours — how many copies
//! the host exchange sends of it. The *boundary graph* keeps only cross-worker edges; its
//! connected components bound how much aggregator memory one block of in-network aggregation
//! would need to hold a whole component at once.

use petgraph::unionfind::UnionFind;
use rayon::prelude::*;
use serde::Serialize;
use switchgnn_datasets::Graph;

use crate::assignment::Assignment;

/// Figures of one worker.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct WorkerBoundary {
    /// Vertices the worker owns.
    pub vertices: u64,
    /// Vertices whose neighbours all live on this worker.
    pub inner: u64,
    /// Vertices with at least one neighbour elsewhere.
    pub boundary: u64,
    /// Distinct remote vertices adjacent to this worker: what it must receive from others.
    pub remote_neighbors: u64,
    /// Adjacency entries from this worker's vertices to other workers' vertices.
    pub cross_entries: u64,
}

/// Boundary figures of a whole assignment.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Boundary {
    /// Per worker, by rank.
    pub workers: Vec<WorkerBoundary>,
    /// Per vertex: distinct remote workers among its neighbours (0 for inner vertices).
    #[serde(skip)]
    pub fanout: Vec<u32>,
    /// Vertices with a neighbour on another worker (summed over workers).
    pub boundary_vertices: u64,
    /// Undirected edges whose endpoints live on different workers.
    pub cross_edges: u64,
    /// Sum of fan-outs: vertex copies the host exchange sends for one layer.
    pub total_fanout: u64,
    /// `fanout_histogram[k]`: vertices with fan-out `k`.
    pub fanout_histogram: Vec<u64>,
    /// Components of the boundary graph: how far blocks can split it.
    pub components: BoundaryComponents,
}

/// Connected components of the boundary graph (cross-worker edges only).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BoundaryComponents {
    /// Components with at least one edge.
    pub count: u64,
    /// Vertices of the largest component.
    pub largest_vertices: u64,
    /// Edges of the largest component.
    pub largest_edges: u64,
}

impl Boundary {
    /// Measure `assignment`'s boundary on `graph` (in parallel over vertex ranges).
    pub fn analyze(graph: &Graph, assignment: &Assignment) -> Boundary {
        let m = assignment.num_parts() as usize;
        let parts = assignment.parts();
        // Per vertex: fan-out and cross entries; per worker: remote neighbours it must receive.
        // Ranges of vertices in parallel, each with one scratch list of the other workers a
        // vertex reaches, so no per-vertex list outlives its vertex (those lists together
        // would be as large as the graph's adjacency).
        let n = graph.num_vertices();
        let chunk = (n / (rayon::current_num_threads() * 16)).max(1024);
        let ranges: Vec<std::ops::Range<usize>> = (0..n)
            .step_by(chunk)
            .map(|s| s..(s + chunk).min(n))
            .collect();
        let pieces: Vec<(Vec<u32>, Vec<u64>, Vec<u64>)> = ranges
            .into_par_iter()
            .map(|range| {
                let mut fanout = Vec::with_capacity(range.len());
                let mut cross = Vec::with_capacity(range.len());
                let mut remote = vec![0u64; m];
                let mut others: Vec<u32> = Vec::new();
                for v in range {
                    let own = parts[v];
                    others.clear();
                    others.extend(
                        graph
                            .neighbors(v as u32)
                            .iter()
                            .map(|&u| parts[u as usize])
                            .filter(|&p| p != own),
                    );
                    cross.push(others.len() as u64);
                    others.sort_unstable();
                    others.dedup();
                    fanout.push(others.len() as u32);
                    for &w in &others {
                        remote[w as usize] += 1;
                    }
                }
                (fanout, cross, remote)
            })
            .collect();
        let mut fanout = Vec::with_capacity(n);
        let mut cross = Vec::with_capacity(n);
        let mut remote = vec![0u64; m];
        for (f, c, r) in pieces {
            fanout.extend(f);
            cross.extend(c);
            for (total, x) in remote.iter_mut().zip(r) {
                *total += x;
            }
        }

        let mut workers = vec![WorkerBoundary::default(); m];
        for (v, &p) in parts.iter().enumerate() {
            let w = &mut workers[p as usize];
            w.vertices += 1;
            if fanout[v] > 0 {
                w.boundary += 1;
            } else {
                w.inner += 1;
            }
            w.cross_entries += cross[v];
        }
        for (w, r) in workers.iter_mut().zip(remote) {
            w.remote_neighbors = r;
        }
        let max_fanout = fanout.iter().copied().max().unwrap_or(0) as usize;
        let mut fanout_histogram = vec![0u64; max_fanout + 1];
        for &f in &fanout {
            fanout_histogram[f as usize] += 1;
        }
        Boundary {
            boundary_vertices: fanout.iter().filter(|&&f| f > 0).count() as u64,
            cross_edges: cross.iter().sum::<u64>() / 2,
            total_fanout: fanout.iter().map(|&f| u64::from(f)).sum(),
            components: components(graph, parts, &fanout),
            workers,
            fanout,
            fanout_histogram,
        }
    }

    /// Mean fan-out over boundary vertices.
    pub fn mean_fanout(&self) -> f64 {
        if self.boundary_vertices == 0 {
            0.0
        } else {
            self.total_fanout as f64 / self.boundary_vertices as f64
        }
    }
}

fn components(graph: &Graph, parts: &[u32], fanout: &[u32]) -> BoundaryComponents {
    let n = graph.num_vertices();
    let mut uf = UnionFind::<u32>::new(n);
    for (u, v) in graph.edges() {
        if parts[u as usize] != parts[v as usize] {
            uf.union(u, v);
        }
    }
    let mut vertices = vec![0u64; n];
    let mut edges = vec![0u64; n];
    for v in 0..n as u32 {
        if fanout[v as usize] == 0 {
            continue;
        }
        let root = uf.find(v) as usize;
        vertices[root] += 1;
        let own = parts[v as usize];
        // Each cross edge counted at its smaller endpoint.
        edges[root] += graph
            .neighbors(v)
            .iter()
            .filter(|&&u| u > v && parts[u as usize] != own)
            .count() as u64;
    }
    let largest = (0..n).max_by_key(|&r| (vertices[r], edges[r])).unwrap_or(0);
    BoundaryComponents {
        count: vertices.iter().filter(|&&c| c > 0).count() as u64,
        largest_vertices: vertices.get(largest).copied().unwrap_or(0),
        largest_edges: edges.get(largest).copied().unwrap_or(0),
    }
}
