//! Writing a plan directory, and checking its table files against the blocks they come from:
//! both encode the same switch and worker tables, one block set at a time.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use rayon::prelude::*;
use switchgnn_datasets::atomic::write_atomically;
use xxhash_rust::xxh3::xxh3_64;

use super::encoding::{
    encode_assignment, encode_blocks, encode_orders, header, io, orders_file, stream_file,
    switch_file, worker_file, ASSIGNMENT, MANIFEST, SWITCH_MAGIC, WORKER_MAGIC,
};
use super::manifest::FileSum;
use super::Plan;
use crate::error::{PlanCheckError, Result};
use crate::tables::{block_table, encode_table};
use crate::BlockTable;

impl Plan {
    /// Write the plan directory; the manifest goes last and records every file's checksum.
    /// Every file streams to disk as it is encoded, so writing holds no second copy of the
    /// plan: only the switch tables of one block set at a time.
    pub fn write(&mut self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
        let mut files = BTreeMap::new();
        let mut put = |name: &str, bytes: Vec<u8>| -> Result<()> {
            let sum = stream_file(dir, name, |w| w.write_all(&bytes))?;
            files.insert(name.to_string(), sum);
            Ok(())
        };
        put(ASSIGNMENT, encode_assignment(&self.assignment))?;
        for (set, info) in self.block_sets.iter().zip(&self.manifest.block_sets) {
            put(&info.file, encode_blocks(&set.blocks))?;
        }
        if let Some(orders) = &self.orders {
            for (set, info) in orders.iter().zip(&self.manifest.block_sets) {
                put(
                    &orders_file(info.aggregators_per_vertex),
                    encode_orders(set),
                )?;
            }
        }
        for s in 0..self.block_sets.len() {
            let tables = self.block_tables(s);
            let sums: Vec<(String, FileSum)> = self
                .table_file_names(s)
                .into_par_iter()
                .map(|(name, of)| {
                    let sum = stream_file(dir, &name, |w| Plan::encode_table_file(&tables, of, w))?;
                    Ok((name, sum))
                })
                .collect::<Result<_>>()?;
            files.extend(sums);
        }
        self.manifest.files = files;
        let json = self.manifest.sealed();
        write_atomically(&dir.join(MANIFEST), |w| w.write_all(&json))?;
        self.remove_stale_files(dir)
    }

    /// Remove plan files of an earlier plan in `dir` that this manifest no longer lists.
    fn remove_stale_files(&self, dir: &Path) -> Result<()> {
        let ours = |name: &str| {
            name.ends_with(".bin")
                && ["blocks-a", "switch-a", "orders-a", "worker-"]
                    .iter()
                    .any(|p| name.starts_with(p))
        };
        for entry in std::fs::read_dir(dir).map_err(|e| io(dir, e))? {
            let entry = entry.map_err(|e| io(dir, e))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if ours(&name) && !self.manifest.files.contains_key(&name) {
                std::fs::remove_file(entry.path()).map_err(|e| io(&entry.path(), e))?;
            }
        }
        Ok(())
    }

    /// The switch and per-worker table files of every block set, derived from the blocks.
    /// The switch tables of block set `s`, one per block, and each block's rows per worker in
    /// its send order (table row order without orders).
    fn block_tables(&self, s: usize) -> SetTables {
        let workers = self.manifest.spec.workers;
        let orders = self.orders.as_ref().map(|o| &o[s]);
        let (tables, rows) = self.block_sets[s]
            .blocks
            .par_iter()
            .enumerate()
            .map(|(b, block)| {
                let table = block_table(block, &self.assignment);
                let rows = match orders {
                    Some(o) => table.rows_by_worker(&o[b], workers),
                    None => table.rows_by_worker(&table.vertices, workers),
                };
                (table, rows)
            })
            .unzip();
        SetTables { tables, rows }
    }

    /// The table files of block set `s`: the switch's, then each worker's.
    fn table_file_names(&self, s: usize) -> Vec<(String, TableFile)> {
        let apv = self.manifest.block_sets[s].aggregators_per_vertex;
        std::iter::once((switch_file(apv), TableFile::Switch))
            .chain(
                (0..self.manifest.spec.workers)
                    .map(|r| (worker_file(r, apv), TableFile::Worker(r))),
            )
            .collect()
    }

    /// Write one table file of a block set from its switch tables and per-worker rows.
    fn encode_table_file(
        set: &SetTables,
        of: TableFile,
        w: &mut impl Write,
    ) -> std::io::Result<()> {
        let count = set.tables.len() as u64;
        match of {
            TableFile::Switch => {
                w.write_all(&header(SWITCH_MAGIC, count))?;
                for t in &set.tables {
                    encode_table(t, w)?;
                }
            }
            TableFile::Worker(r) => {
                w.write_all(&header(WORKER_MAGIC, count))?;
                for (t, rows) in set.tables.iter().zip(&set.rows) {
                    encode_table(&t.for_worker_rows(r, &rows[r as usize]), w)?;
                }
            }
        }
        Ok(())
    }

    /// Check that the table files in `dir` are exactly what the blocks imply (their checksums
    /// were checked against the manifest first). One file at a time is held in memory.
    pub fn verify_tables(&self, dir: &Path) -> Result<(), PlanCheckError> {
        for s in 0..self.block_sets.len() {
            let tables = self.block_tables(s);
            self.table_file_names(s)
                .into_par_iter()
                .try_for_each(|(name, of)| {
                    let sum = self
                        .manifest
                        .files
                        .get(&name)
                        .ok_or_else(|| PlanCheckError::NotInManifest(name.clone()))?;
                    let path = dir.join(&name);
                    let bytes =
                        std::fs::read(&path).map_err(|source| PlanCheckError::Unreadable {
                            path: path.clone(),
                            source,
                        })?;
                    if bytes.len() as u64 != sum.bytes || xxh3_64(&bytes) != sum.xxh3 {
                        return Err(PlanCheckError::Checksum(path));
                    }
                    let mut expected = Vec::with_capacity(bytes.len());
                    Plan::encode_table_file(&tables, of, &mut expected)
                        .expect("writing to memory cannot fail");
                    if bytes != expected {
                        return Err(PlanCheckError::TablesDisagree(path));
                    }
                    Ok(())
                })?;
        }
        Ok(())
    }
}

/// A block set's switch tables and, per block, each worker's rows in send order.
struct SetTables {
    tables: Vec<BlockTable>,
    rows: Vec<Vec<Vec<u32>>>,
}

/// Which table file of a block set.
#[derive(Debug, Clone, Copy)]
enum TableFile {
    Switch,
    Worker(u32),
}
