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
    pub seed: i32,
    /// Allowed largest part over the mean part (METIS's ufactor is (imbalance − 1) · 1000).
    pub imbalance: f64,
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

/// Partition the graph given by CSR `offsets`/`neighbors` (symmetric, no self-loops) into
/// `parts` parts. `what` names the graph in errors.
/// Serialises calls into METIS (see where it is taken).
static METIS_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

pub(crate) fn metis_kway(
    offsets: &[u64],
    neighbors: &[u32],
    parts: u32,
    options: &MetisOptions,
    what: &str,
) -> Result<Vec<u32>> {
    weighted_kway(offsets, neighbors, None, parts, options, what)
}

/// Vertex weights (what each part's weight sums) and edge weights (what the cut sums), in the
/// same order as `neighbors`.
pub(crate) struct Weights<'a> {
    pub vertex: &'a [i64],
    pub edge: &'a [i64],
}

/// [`metis_kway`] with vertex and edge weights: parts balance the vertex weight, the cut
/// minimises the edge weight.
pub(crate) fn weighted_kway(
    offsets: &[u64],
    neighbors: &[u32],
    weights: Option<Weights<'_>>,
    parts: u32,
    options: &MetisOptions,
    what: &str,
) -> Result<Vec<u32>> {
    let n = offsets.len() - 1;
    if parts <= 1 || neighbors.is_empty() {
        return Ok(vec![0; n]);
    }
    let too_large = || {
        PartitionError::Usage(format!(
            "{what}: {} adjacency entries exceed METIS's 32-bit index",
            neighbors.len()
        ))
    };
    let xadj: Vec<metis::Idx> = offsets
        .iter()
        .map(|&o| metis::Idx::try_from(o).map_err(|_| too_large()))
        .collect::<Result<_>>()?;
    let adjncy: Vec<metis::Idx> = neighbors.iter().map(|&v| v as metis::Idx).collect();
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
            .map(|&x| metis::Idx::try_from(x.max(0)).map_err(|_| too_large()))
            .collect()
    };
    let (vwgt, adjwgt) = match &weights {
        Some(w) => (Some(to_idx(w.vertex)?), Some(to_idx(w.edge)?)),
        None => (None, None),
    };
    let mut graph = metis::Graph::new(1, parts as metis::Idx, &xadj, &adjncy)
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
