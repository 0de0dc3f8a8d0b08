//! The plan's binary files: their names, headers and little-endian layouts (see the table in
//! [`crate::plan`]), bounds-checked decoding that names the file and offset, and streaming
//! writes that checksum the bytes on their way to disk.

use std::io::Write;
use std::path::{Path, PathBuf};

use switchgnn_datasets::atomic::write_atomically;
use xxhash_rust::xxh3::Xxh3;

use super::manifest::{FileSum, FORMAT_VERSION};
use crate::assignment::Assignment;
use crate::blocks::{Block, Blocks};
use crate::error::{PartitionError, PlanCheckError, Result};

pub(super) const MANIFEST: &str = "manifest.json";
pub(super) const ASSIGNMENT: &str = "assignment.bin";
const ASSIGNMENT_MAGIC: &[u8; 8] = b"SGNNASGN";
const BLOCKS_MAGIC: &[u8; 8] = b"SGNNBLKS";
pub(super) const SWITCH_MAGIC: &[u8; 8] = b"SGNNSWCH";
pub(super) const WORKER_MAGIC: &[u8; 8] = b"SGNNWORK";
const ORDERS_MAGIC: &[u8; 8] = b"SGNNORDR";

/// File of the send orders of block set `apv`.
pub fn orders_file(apv: u64) -> String {
    format!("orders-a{apv}.bin")
}

/// File of the blocks of block set `apv`.
pub fn blocks_file(apv: u64) -> String {
    format!("blocks-a{apv}.bin")
}

/// File of the switch tables for block set `apv`.
pub fn switch_file(apv: u64) -> String {
    format!("switch-a{apv}.bin")
}

/// File of worker `rank`'s tables for block set `apv`.
pub fn worker_file(rank: u32, apv: u64) -> String {
    format!("worker-{rank}-a{apv}.bin")
}

/// An I/O failure on `path`, as the datasets crate reports it.
pub(super) fn io(path: &Path, source: std::io::Error) -> PartitionError {
    PartitionError::io(path, source)
}

/// A bad `record` of the plan file at `path`.
pub(super) fn malformed(
    path: &Path,
    record: impl Into<String>,
    reason: impl Into<String>,
) -> PartitionError {
    PartitionError::malformed(path, record, reason)
}

/// Write `dir/name` atomically through `fill`, summing the bytes on their way to disk.
pub(super) fn stream_file(
    dir: &Path,
    name: &str,
    fill: impl FnOnce(&mut Summing<'_>) -> std::io::Result<()>,
) -> Result<FileSum> {
    let mut sum = FileSum { bytes: 0, xxh3: 0 };
    write_atomically(&dir.join(name), |w| {
        let mut summing = Summing {
            inner: w,
            hasher: Xxh3::new(),
            bytes: 0,
        };
        fill(&mut summing)?;
        sum = FileSum {
            bytes: summing.bytes,
            xxh3: summing.hasher.digest(),
        };
        Ok(())
    })?;
    Ok(sum)
}

/// A writer that passes bytes on and keeps their count and checksum.
pub(super) struct Summing<'a> {
    inner: &'a mut dyn Write,
    hasher: Xxh3,
    bytes: u64,
}

impl Write for Summing<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// A plan file's header: `magic`, the format version, a reserved word and `count` records.
pub(super) fn header(magic: &[u8; 8], count: u64) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(magic);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(&count.to_le_bytes());
    out
}

/// `assignment.bin`: one u32 worker id per vertex.
pub(super) fn encode_assignment(a: &Assignment) -> Vec<u8> {
    let mut out = header(ASSIGNMENT_MAGIC, a.parts().len() as u64);
    out.extend_from_slice(bytemuck::cast_slice(a.parts()));
    out
}

/// A `blocks-a<k>.bin` file: each block's level and its edges.
pub(super) fn encode_blocks(blocks: &[Block]) -> Vec<u8> {
    let mut out = header(BLOCKS_MAGIC, blocks.len() as u64);
    for b in blocks {
        out.extend_from_slice(&b.level.to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&(b.edges.len() as u64).to_le_bytes());
        for &(u, v) in &b.edges {
            out.extend_from_slice(&u.to_le_bytes());
            out.extend_from_slice(&v.to_le_bytes());
        }
    }
    out
}

/// Bounds-checked little-endian reads that name the file and offset on failure.
struct Cursor<'a> {
    path: PathBuf,
    bytes: &'a [u8],
    at: usize,
}

impl Cursor<'_> {
    fn take(&mut self, n: usize, what: &str) -> Result<&[u8]> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len());
        let Some(end) = end else {
            return Err(malformed(
                &self.path,
                format!("offset {}", self.at),
                format!("file ends inside {what}"),
            ));
        };
        let s = &self.bytes[self.at..end];
        self.at = end;
        Ok(s)
    }
    fn u32(&mut self, what: &str) -> Result<u32> {
        Ok(u32::from_le_bytes(
            self.take(4, what)?.try_into().expect("4 bytes"),
        ))
    }
    fn u64(&mut self, what: &str) -> Result<u64> {
        Ok(u64::from_le_bytes(
            self.take(8, what)?.try_into().expect("8 bytes"),
        ))
    }
    fn header(&mut self, magic: &[u8; 8]) -> Result<u64> {
        if self.take(8, "the header")? != magic {
            return Err(malformed(
                &self.path,
                "header",
                "wrong magic: not this kind of plan file",
            ));
        }
        let version = self.u32("the header")?;
        if version != FORMAT_VERSION {
            return Err(malformed(
                &self.path,
                "header",
                format!("version {version}, expected {FORMAT_VERSION}"),
            ));
        }
        self.u32("the header")?;
        self.u64("the header")
    }
}

/// An `orders-a<k>.bin` file: each block's vertices in send order.
pub(super) fn encode_orders(orders: &[Vec<u32>]) -> Vec<u8> {
    let mut out = header(ORDERS_MAGIC, orders.len() as u64);
    for o in orders {
        out.extend_from_slice(&(o.len() as u64).to_le_bytes());
        out.extend_from_slice(bytemuck::cast_slice(o));
    }
    out
}

/// Read what [`encode_orders`] wrote; `path` names the file in errors.
pub(super) fn decode_orders(path: &Path, bytes: &[u8]) -> Result<Vec<Vec<u32>>> {
    let mut c = Cursor {
        path: path.to_path_buf(),
        bytes,
        at: 0,
    };
    let count = c.header(ORDERS_MAGIC)?;
    let mut out = Vec::new();
    for i in 0..count {
        let what = format!("order of block {i}");
        let len = c.u64(&what)?;
        let raw = c.take(len as usize * 4, &what)?;
        out.push(
            raw.chunks_exact(4)
                .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")))
                .collect(),
        );
    }
    Ok(out)
}

/// Every block's order is a permutation of its vertices.
pub(super) fn check_orders(
    sets: &[Blocks],
    orders: &[Vec<Vec<u32>>],
) -> Result<(), PlanCheckError> {
    if sets.len() != orders.len() {
        return Err(PlanCheckError::OrderSets {
            orders: orders.len(),
            sets: sets.len(),
        });
    }
    for (s, (set, os)) in sets.iter().zip(orders).enumerate() {
        if set.blocks.len() != os.len() {
            return Err(PlanCheckError::OrderCount {
                set: s,
                orders: os.len(),
                blocks: set.blocks.len(),
            });
        }
        for (b, (block, o)) in set.blocks.iter().zip(os).enumerate() {
            let mut sorted = o.clone();
            sorted.sort_unstable();
            if sorted != block.vertices() {
                return Err(PlanCheckError::NotAPermutation { set: s, block: b });
            }
        }
    }
    Ok(())
}

/// Read what [`encode_assignment`] wrote, for `workers` workers.
pub(super) fn decode_assignment(path: &Path, bytes: &[u8], workers: u32) -> Result<Assignment> {
    let mut c = Cursor {
        path: path.to_path_buf(),
        bytes,
        at: 0,
    };
    let n = c.header(ASSIGNMENT_MAGIC)?;
    let raw = c.take(n as usize * 4, "the part ids")?;
    let parts: Vec<u32> = raw
        .chunks_exact(4)
        .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")))
        .collect();
    Assignment::new(parts, workers).map_err(|e| malformed(path, "part ids", e.to_string()))
}

/// Read what [`encode_blocks`] wrote; trailing bytes are an error.
pub(super) fn decode_blocks(path: &Path, bytes: &[u8]) -> Result<Vec<Block>> {
    let mut c = Cursor {
        path: path.to_path_buf(),
        bytes,
        at: 0,
    };
    let count = c.header(BLOCKS_MAGIC)?;
    let mut blocks = Vec::new();
    for i in 0..count {
        let what = format!("block {i}");
        let level = c.u32(&what)?;
        c.u32(&what)?;
        let edges = c.u64(&what)?;
        let raw = c.take(edges as usize * 8, &what)?;
        let edges = raw
            .chunks_exact(8)
            .map(|e| {
                (
                    u32::from_le_bytes(e[..4].try_into().expect("4 bytes")),
                    u32::from_le_bytes(e[4..].try_into().expect("4 bytes")),
                )
            })
            .collect();
        blocks.push(Block { level, edges });
    }
    if c.at != bytes.len() {
        return Err(malformed(
            path,
            format!("offset {}", c.at),
            "trailing bytes after the last block",
        ));
    }
    Ok(blocks)
}
