//! The lookup table a block needs at run time, CSR-style.
//!
//! Within a block, every endpoint is both a sender and a destination (the graph is symmetric).
//! The destinations, sorted by vertex id, get aggregator slots `0..n`; slot `i` stands for the
//! `⌈D/64⌉` aggregators `i·k .. (i+1)·k` of a width-`D` feature. For the switch, a row per
//! vertex gives its owner, the contributions its aggregator expects (its in-block degree) and
//! the slots its feature is added into (its in-block neighbours'). A worker's table is the same
//! rows restricted to its own vertices: what it sends, where each goes, and what it expects
//! back. The partition crate derives tables from a block's edges.

use serde::Serialize;

/// Rows of one block's table, CSR-style: row `i` describes `vertices[i]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct BlockTable {
    /// Global vertex id of each row (ascending in a block's full table).
    pub vertices: Vec<u32>,
    /// Owner worker of each vertex: where its aggregated result goes.
    pub workers: Vec<u32>,
    /// Contributions the vertex's aggregator expects before it is complete.
    pub expected: Vec<u32>,
    /// Row `i`'s slots are `slots[offsets[i]..offsets[i + 1]]`.
    pub offsets: Vec<u64>,
    /// Aggregator slots (indices into the block's full destination list) a vertex feeds.
    pub slots: Vec<u32>,
}

impl BlockTable {
    /// The rows of worker `w` (slots still index the full destination list), in vertex order.
    pub fn for_worker(&self, w: u32) -> BlockTable {
        self.rows_of(w, 0..self.vertices.len())
    }

    /// The rows of worker `w` in the block's send order (global vertex ids): the worker's send
    /// sequence is the block order restricted to its own vertices.
    pub fn for_worker_in_order(&self, w: u32, order: &[u32]) -> BlockTable {
        let rows = order.iter().map(|v| {
            self.vertices
                .binary_search(v)
                .expect("the order lists the block's vertices")
        });
        self.rows_of(w, rows)
    }

    /// Every worker's rows, in the send order `order` (global vertex ids), found in one pass:
    /// `for_worker_rows(w, &rows[w])` equals `for_worker_in_order(w, order)` without searching
    /// the whole order once per worker.
    pub fn rows_by_worker(&self, order: &[u32], workers: u32) -> Vec<Vec<u32>> {
        let mut rows = vec![Vec::new(); workers as usize];
        for v in order {
            let i = self
                .vertices
                .binary_search(v)
                .expect("the order lists the block's vertices");
            rows[self.workers[i] as usize].push(i as u32);
        }
        rows
    }

    /// Worker `w`'s table made of `rows` (its rows, in its send order).
    pub fn for_worker_rows(&self, w: u32, rows: &[u32]) -> BlockTable {
        self.rows_of(w, rows.iter().map(|&i| i as usize))
    }

    fn rows_of(&self, w: u32, rows: impl Iterator<Item = usize>) -> BlockTable {
        let mut out = BlockTable {
            offsets: vec![0],
            ..Default::default()
        };
        for i in rows {
            if self.workers[i] == w {
                out.vertices.push(self.vertices[i]);
                out.workers.push(w);
                out.expected.push(self.expected[i]);
                out.slots.extend_from_slice(self.row(i));
                out.offsets.push(out.slots.len() as u64);
            }
        }
        out
    }

    /// Check the table's shape, as read from a file: one owner and one expected count per
    /// vertex, vertices strictly ascending, owners below `workers`, row offsets from 0 to the
    /// slot count without decreasing, and every slot below `slot_bound`.
    pub fn check(&self, workers: u32, slot_bound: usize) -> Result<(), TableError> {
        let n = self.vertices.len();
        if self.workers.len() != n || self.expected.len() != n {
            return Err(TableError::Lengths {
                vertices: n,
                owners: self.workers.len(),
                expected: self.expected.len(),
            });
        }
        if self.vertices.windows(2).any(|w| w[0] >= w[1]) {
            return Err(TableError::NotAscending);
        }
        if let Some(&owner) = self.workers.iter().find(|&&w| w >= workers) {
            return Err(TableError::Owner { owner, workers });
        }
        let o = &self.offsets;
        if o.len() != n + 1
            || o[0] != 0
            || o[n] != self.slots.len() as u64
            || o.windows(2).any(|w| w[0] > w[1])
        {
            return Err(TableError::Offsets {
                offsets: o.len(),
                slots: self.slots.len(),
            });
        }
        if let Some(&slot) = self.slots.iter().find(|&&s| s as usize >= slot_bound) {
            return Err(TableError::Slot {
                slot,
                bound: slot_bound,
            });
        }
        Ok(())
    }

    /// Slots fed by row `i`.
    pub fn row(&self, i: usize) -> &[u32] {
        &self.slots[self.pairs_of(i)]
    }

    /// Indices of row `i`'s entries in `slots` (in a reduce block, its pairs).
    pub fn pairs_of(&self, i: usize) -> std::ops::Range<usize> {
        self.offsets[i] as usize..self.offsets[i + 1] as usize
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.vertices.len()
    }

    /// Whether the table has no rows.
    pub fn is_empty(&self) -> bool {
        self.vertices.is_empty()
    }
}

/// Why a block table read from a file is malformed ([`BlockTable::check`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TableError {
    /// The per-vertex columns differ in length.
    #[error("{vertices} vertices with {owners} owners and {expected} expected counts")]
    Lengths {
        /// Vertices listed.
        vertices: usize,
        /// Owners listed.
        owners: usize,
        /// Expected counts listed.
        expected: usize,
    },
    /// A vertex is listed twice or out of order.
    #[error("vertices are not strictly ascending")]
    NotAscending,
    /// An owner is not one of the job's workers.
    #[error("owner {owner} of {workers} workers")]
    Owner {
        /// The owner named.
        owner: u32,
        /// Workers of the job.
        workers: u32,
    },
    /// The row offsets do not cover the slots from 0, in order.
    #[error("{offsets} row offsets do not run from 0 to the {slots} slots")]
    Offsets {
        /// Row offsets listed.
        offsets: usize,
        /// Slots listed.
        slots: usize,
    },
    /// A slot is beyond the block's rows.
    #[error("slot {slot} beyond {bound}")]
    Slot {
        /// The slot named.
        slot: u32,
        /// The first slot out of range.
        bound: usize,
    },
}
