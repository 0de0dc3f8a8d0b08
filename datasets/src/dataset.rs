//! A dataset: graph, optional features and labels, and a split.

use serde::{Deserialize, Serialize};

use crate::error::Invalid;
use crate::features::Features;
use crate::graph::Graph;
use crate::split::Split;

/// Integer class labels, one per vertex.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Labels {
    values: Vec<u32>,
    num_classes: u32,
    /// Human names of the classes where the source has them (MUSAE page types).
    class_names: Option<Vec<String>>,
}

impl Labels {
    /// Checked constructor: every label below `num_classes`, and one name per class if named.
    pub fn new(
        values: Vec<u32>,
        num_classes: u32,
        class_names: Option<Vec<String>>,
    ) -> Result<Labels, Invalid> {
        if let Some(i) = values.iter().position(|&c| c >= num_classes) {
            return Err(Invalid::new(
                format!("label of vertex {i}"),
                format!("class {} out of range for {num_classes} classes", values[i]),
            ));
        }
        if let Some(names) = &class_names {
            if names.len() != num_classes as usize {
                return Err(Invalid::new(
                    "class names",
                    format!("{} names for {num_classes} classes", names.len()),
                ));
            }
        }
        Ok(Labels {
            values,
            num_classes,
            class_names,
        })
    }

    /// Labels given as signed integers (as numpy stores them); classes are `0..=max`.
    pub fn from_i64(raw: &[i64]) -> Result<Labels, Invalid> {
        if let Some(i) = raw.iter().position(|&c| c < 0 || c >= u32::MAX as i64) {
            return Err(Invalid::new(
                format!("label of vertex {i}"),
                format!("class {} is not a class id", raw[i]),
            ));
        }
        let num_classes = raw.iter().max().map_or(0, |&m| m as u32 + 1);
        Labels::new(raw.iter().map(|&c| c as u32).collect(), num_classes, None)
    }

    /// Each vertex's class id, below [`Labels::num_classes`].
    pub fn values(&self) -> &[u32] {
        &self.values
    }

    /// Classes, including any that no vertex has.
    pub fn num_classes(&self) -> u32 {
        self.num_classes
    }

    /// Human names of the classes, by id, where the dataset ships them.
    pub fn class_names(&self) -> Option<&[String]> {
        self.class_names.as_deref()
    }

    /// Vertices per class.
    pub fn class_counts(&self) -> Vec<u64> {
        let mut counts = vec![0u64; self.num_classes as usize];
        for &c in &self.values {
            counts[c as usize] += 1;
        }
        counts
    }
}

/// Everything a node-classification run needs about its graph.
#[derive(Debug, Clone, PartialEq)]
pub struct Dataset {
    /// How results and caches name the dataset.
    pub name: String,
    /// The symmetric graph the GNN aggregates over.
    pub graph: Graph,
    /// Input features, one row per vertex; `None` for a bare graph.
    pub features: Option<Features>,
    /// Class of every vertex; `None` for a graph without a task.
    pub labels: Option<Labels>,
    /// Train, validation and test vertices.
    pub split: Split,
}

impl Dataset {
    /// Build and check that features, labels and split all speak of the same vertices.
    pub fn new(
        name: impl Into<String>,
        graph: Graph,
        features: Option<Features>,
        labels: Option<Labels>,
        split: Split,
    ) -> Result<Dataset, Invalid> {
        let n = graph.num_vertices();
        if let Some(f) = &features {
            if f.rows() != n {
                return Err(Invalid::new(
                    "features",
                    format!("{} feature rows for {n} vertices", f.rows()),
                ));
            }
        }
        if let Some(l) = &labels {
            if l.values().len() != n {
                return Err(Invalid::new(
                    "labels",
                    format!("{} labels for {n} vertices", l.values().len()),
                ));
            }
        }
        split.validate(n)?;
        Ok(Dataset {
            name: name.into(),
            graph,
            features,
            labels,
            split,
        })
    }

    /// Vertices of the graph (features, labels and split agree with it).
    pub fn num_vertices(&self) -> usize {
        self.graph.num_vertices()
    }
}
