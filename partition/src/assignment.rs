//! Which worker owns each vertex: METIS k-way, or the random and hash baselines, or a file
//! computed elsewhere (ParMETIS, DGL) — the rest of the pipeline works with any of them.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use switchgnn_datasets::Graph;

use crate::error::{PartitionError, Result};
use crate::metis_kway::{metis_kway, MetisOptions};

/// A part id for every vertex.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assignment {
    parts: Vec<u32>,
    num_parts: u32,
}

/// How to split the vertices across workers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "method")]
pub enum Method {
    /// METIS k-way: few cut edges, balanced vertex counts.
    Metis(MetisOptions),
    /// Uniformly random owner per vertex (seeded): the worst case for boundary size.
    Random {
        /// Seeds the draw: the same seed gives the same owners.
        seed: u64,
    },
    /// Owner = vertex id mod parts, the default of many systems without a partitioner.
    Hash,
    /// Read from a text file, one part id per line (see [`Assignment::read_text`]).
    File {
        /// The part file.
        path: std::path::PathBuf,
    },
}

impl Assignment {
    /// Checked constructor: every part id below `num_parts`.
    pub fn new(parts: Vec<u32>, num_parts: u32) -> Result<Assignment> {
        if num_parts == 0 {
            return Err(PartitionError::Usage("zero parts".into()));
        }
        if let Some(v) = parts.iter().position(|&p| p >= num_parts) {
            return Err(PartitionError::Usage(format!(
                "vertex {v} assigned to part {} of {num_parts}",
                parts[v]
            )));
        }
        Ok(Assignment { parts, num_parts })
    }

    /// Partition `graph` into `num_parts` parts.
    pub fn compute(graph: &Graph, num_parts: u32, method: &Method) -> Result<Assignment> {
        let n = graph.num_vertices();
        if num_parts == 0 || num_parts as usize > n {
            return Err(PartitionError::Usage(format!(
                "{num_parts} workers for {n} vertices: need between 1 and {n}"
            )));
        }
        let parts = match method {
            Method::Metis(options) => metis_kway(
                graph.offsets(),
                graph.neighbor_ids(),
                num_parts,
                options,
                "the worker partition",
            )?,
            Method::Random { seed } => {
                let mut rng = ChaCha8Rng::seed_from_u64(*seed);
                (0..n).map(|_| rng.random_range(0..num_parts)).collect()
            }
            Method::Hash => (0..n as u32).map(|v| v % num_parts).collect(),
            Method::File { path } => return Assignment::read_text(path, n, num_parts),
        };
        Assignment::new(parts, num_parts)
    }

    /// Read a text file with one part id per line, one line per vertex (the format of METIS's
    /// `gpmetis` output and easy to write from ParMETIS or DGL).
    pub fn read_text(path: &Path, num_vertices: usize, num_parts: u32) -> Result<Assignment> {
        let io = |e| PartitionError::io(path, e);
        let bad = |record: String, reason: String| PartitionError::malformed(path, record, reason);
        let file = std::fs::File::open(path).map_err(io)?;
        let mut parts = Vec::with_capacity(num_vertices);
        for (i, line) in BufReader::new(file).lines().enumerate() {
            let line = line.map_err(io)?;
            let text = line.trim();
            if text.is_empty() || text.starts_with('#') {
                continue;
            }
            let record = format!("line {}", i + 1);
            let part: u32 = text
                .parse()
                .map_err(|_| bad(record.clone(), format!("`{text}` is not a part id")))?;
            if part >= num_parts {
                return Err(bad(
                    record,
                    format!("part {part} out of range for {num_parts} workers"),
                ));
            }
            parts.push(part);
        }
        if parts.len() != num_vertices {
            return Err(bad(
                "file".into(),
                format!("{} part ids for {num_vertices} vertices", parts.len()),
            ));
        }
        Assignment::new(parts, num_parts)
    }

    /// Write the text form that [`Assignment::read_text`] reads.
    pub fn write_text(&self, out: &mut impl Write) -> std::io::Result<()> {
        for p in &self.parts {
            writeln!(out, "{p}")?;
        }
        Ok(())
    }

    /// The worker that owns vertex `v`.
    pub fn part(&self, v: u32) -> u32 {
        self.parts[v as usize]
    }

    /// Each vertex's worker, by vertex id.
    pub fn parts(&self) -> &[u32] {
        &self.parts
    }

    /// Workers (parts), including any that own no vertex.
    pub fn num_parts(&self) -> u32 {
        self.num_parts
    }

    /// Vertices per part.
    pub fn part_sizes(&self) -> Vec<u64> {
        let mut sizes = vec![0u64; self.num_parts as usize];
        for &p in &self.parts {
            sizes[p as usize] += 1;
        }
        sizes
    }

    /// Largest part over the mean part size (1.0 = perfectly balanced).
    pub fn imbalance(&self) -> f64 {
        let sizes = self.part_sizes();
        let max = *sizes.iter().max().unwrap_or(&0) as f64;
        max / (self.parts.len() as f64 / self.num_parts as f64)
    }
}
