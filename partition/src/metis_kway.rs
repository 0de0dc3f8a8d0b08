//! A thin, checked call of METIS k-way partitioning on a CSR graph.

use serde::{Deserialize, Serialize};

use crate::error::{PartitionError, Result};

/// What METIS minimises.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Objective {
    /// Edges between parts.
    #[default]
    Cut,
    /// Total communication volume (vertices times the parts they must reach).
    Volume,
}

/// Options passed through to METIS.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetisOptions {
    /// METIS's random seed: the same seed gives the same partition.
    pub seed: i32,
    /// Allowed largest part over the mean part (METIS's ufactor is (imbalance − 1) · 1000).
    pub imbalance: f64,
    /// What METIS minimises.
    pub objective: Objective,
}

impl Default for MetisOptions {
    /// METIS's own defaults: 3% imbalance for k-way, edge-cut objective.
    fn default() -> Self {
        MetisOptions {
            seed: 0,
            imbalance: 1.03,
            objective: Objective::Cut,
        }
    }
}

/// A graph in METIS's own index type: what METIS reads, built once, so that no second copy of
/// a large graph sits beside it while METIS runs.
pub(crate) struct MetisCsr {
    xadj: Vec<metis::Idx>,
    adjncy: Vec<metis::Idx>,
}

impl MetisCsr {
    /// Copy a `u64`/`u32` CSR (symmetric, no self-loops) into METIS's index type.
    pub(crate) fn from_csr(offsets: &[u64], neighbors: &[u32], what: &str) -> Result<MetisCsr> {
        check_entries(neighbors.len(), what)?;
        Ok(MetisCsr {
            xadj: offsets.iter().map(|&o| o as metis::Idx).collect(),
            adjncy: neighbors.iter().map(|&v| v as metis::Idx).collect(),
        })
    }

    /// The graph of `edges` (pairs of compact ids below `vertices`, each edge once): each edge
    /// appears in both endpoints' rows, in the order of `edges`.
    pub(crate) fn from_edges(
        vertices: usize,
        edges: impl Iterator<Item = (u32, u32)> + Clone,
        entries: usize,
        what: &str,
    ) -> Result<MetisCsr> {
        check_entries(entries, what)?;
        let mut xadj = vec![0 as metis::Idx; vertices + 1];
        for (a, b) in edges.clone() {
            xadj[a as usize + 1] += 1;
            xadj[b as usize + 1] += 1;
        }
        for i in 0..vertices {
            xadj[i + 1] += xadj[i];
        }
        let mut cursor = xadj.clone();
        let mut adjncy = vec![0 as metis::Idx; entries];
        for (a, b) in edges {
            adjncy[cursor[a as usize] as usize] = b as metis::Idx;
            cursor[a as usize] += 1;
            adjncy[cursor[b as usize] as usize] = a as metis::Idx;
            cursor[b as usize] += 1;
        }
        Ok(MetisCsr { xadj, adjncy })
    }

    /// Vertices of the graph.
    pub(crate) fn vertices(&self) -> usize {
        self.xadj.len() - 1
    }

    /// `v`'s neighbours.
    pub(crate) fn neighbors(&self, v: usize) -> impl Iterator<Item = usize> + '_ {
        self.adjncy[self.xadj[v] as usize..self.xadj[v + 1] as usize]
            .iter()
            .map(|&u| u as usize)
    }

    /// Every edge once as compact ids `(a, b)` with `a < b`, in row order.
    pub(crate) fn edges(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        (0..self.vertices()).flat_map(move |a| {
            self.neighbors(a)
                .filter(move |&b| b > a)
                .map(move |b| (a, b))
        })
    }
}

/// METIS indexes adjacency entries with its own (32-bit) type.
fn check_entries(entries: usize, what: &str) -> Result<()> {
    if metis::Idx::try_from(entries).is_err() {
        return Err(PartitionError::Usage(format!(
            "{what}: {entries} adjacency entries exceed METIS's 32-bit index"
        )));
    }
    Ok(())
}

/// Partition the graph given by CSR `offsets`/`neighbors` (symmetric, no self-loops) into
/// `parts` parts. `what` names the graph in errors.
pub(crate) fn metis_kway(
    offsets: &[u64],
    neighbors: &[u32],
    parts: u32,
    options: &MetisOptions,
    what: &str,
) -> Result<Vec<u32>> {
    if parts <= 1 || neighbors.is_empty() {
        return Ok(vec![0; offsets.len() - 1]);
    }
    // The one copy METIS needs: its own index type.
    let graph = MetisCsr::from_csr(offsets, neighbors, what)?;
    weighted_kway(&graph, None, parts, options, what)
}

/// Vertex weights (what each part's weight sums) and edge weights (what the cut sums), in the
/// same order as the graph's adjacency entries.
pub(crate) struct Weights<'a> {
    /// One weight per vertex.
    pub vertex: &'a [i64],
    /// One weight per adjacency entry.
    pub edge: &'a [i64],
}

/// Serialises calls into METIS (see where it is taken).
static METIS_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// [`metis_kway`] on a graph already in METIS's index type, with optional vertex and edge
/// weights: parts balance the vertex weight, the cut minimises the edge weight.
pub(crate) fn weighted_kway(
    csr: &MetisCsr,
    weights: Option<Weights<'_>>,
    parts: u32,
    options: &MetisOptions,
    what: &str,
) -> Result<Vec<u32>> {
    let n = csr.vertices();
    if parts <= 1 || csr.adjncy.is_empty() {
        return Ok(vec![0; n]);
    }
    if !(options.imbalance >= 1.0 && options.imbalance < 3.0) {
        return Err(PartitionError::Usage(format!(
            "imbalance {} must lie in [1, 3)",
            options.imbalance
        )));
    }
    let ufactor = ((options.imbalance - 1.0) * 1000.0).round().max(1.0) as metis::Idx;
    let objective = match options.objective {
        Objective::Cut => metis::option::ObjType::Cut,
        Objective::Volume => metis::option::ObjType::Vol,
    };
    let mut part = vec![0 as metis::Idx; n];
    let metis_error = |source| PartitionError::Metis {
        what: what.to_string(),
        source,
    };
    let to_idx = |w: &[i64]| -> Result<Vec<metis::Idx>> {
        w.iter()
            .map(|&x| {
                metis::Idx::try_from(x.max(0)).map_err(|_| {
                    PartitionError::Usage(format!("{what}: weight {x} exceeds METIS's index"))
                })
            })
            .collect()
    };
    let (vwgt, adjwgt) = match &weights {
        Some(w) => (Some(to_idx(w.vertex)?), Some(to_idx(w.edge)?)),
        None => (None, None),
    };
    let mut graph = metis::Graph::new(1, parts as metis::Idx, &csr.xadj, &csr.adjncy)
        .map_err(|e| metis_error(e.into()))?;
    if let (Some(v), Some(e)) = (&vwgt, &adjwgt) {
        graph = graph.set_vwgt(v).set_adjwgt(e);
    }
    // METIS draws from one process-wide random generator: two partitions computed at once
    // interleave their draws and stop being reproducible for a seed. One at a time.
    let _serial = METIS_LOCK
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    graph
        .set_option(metis::option::Seed(options.seed))
        .set_option(metis::option::UFactor(ufactor))
        .set_option(objective)
        .part_kway(&mut part)
        .map_err(metis_error)?;
    Ok(part.into_iter().map(|p| p as u32).collect())
}
