//! switchgnn's binary dataset cache: parse a large graph once, then load it at memory speed.
//!
//! Layout (all integers little-endian):
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 8 | magic `SGNNDSET` |
//! | 8 | 4 | format version ([`VERSION`]) |
//! | 12 | 4 | number of sections `S` |
//! | 16 | 8 | xxh3-64 of the section table |
//! | 24 | 40 | reserved, zero |
//! | 64 | 48·S | section table: name (16 bytes, zero-padded), element type (u32), reserved (u32), offset (u64), length in bytes (u64), xxh3-64 of the data (u64) |
//! | … | | section data, each starting at a multiple of 64 bytes |
//!
//! Every array starts 64-byte aligned so the file can be memory-mapped and each section viewed
//! in place as a typed slice; [`read`] reads them into owned arrays instead, one copy each. A `meta` section holds JSON (name, counts, class names, split
//! source). Loading checks the magic, the version, both checksums and every dataset invariant,
//! so a truncated, corrupted or hand-edited file is an error that names the section.

use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};
use xxhash_rust::xxh3::xxh3_64;

use crate::atomic::write_atomically;
use crate::dataset::{Dataset, Labels};
use crate::error::{Error, Result};
use crate::features::{DenseFeatures, Features, SparseFeatures};
use crate::graph::Graph;
use crate::split::{Split, SplitSource};

pub const MAGIC: &[u8; 8] = b"SGNNDSET";
/// Bump on any change of layout or meaning; older files are then refused with a clear message.
pub const VERSION: u32 = 1;
const HEADER_LEN: usize = 64;
const ENTRY_LEN: usize = 48;
const ALIGN: usize = 64;
const MAX_SECTIONS: u32 = 64;

#[cfg(not(target_endian = "little"))]
compile_error!("the dataset cache stores little-endian arrays and is read in place");

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
enum Elem {
    U8 = 1,
    U32 = 2,
    U64 = 3,
    F32 = 4,
}

impl Elem {
    fn size(self) -> usize {
        match self {
            Elem::U8 => 1,
            Elem::U32 | Elem::F32 => 4,
            Elem::U64 => 8,
        }
    }
    fn from_code(code: u32) -> Option<Elem> {
        [Elem::U8, Elem::U32, Elem::U64, Elem::F32]
            .into_iter()
            .find(|e| *e as u32 == code)
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct Meta {
    name: String,
    num_vertices: usize,
    num_edges: u64,
    features: Option<FeatureMeta>,
    labels: Option<LabelMeta>,
    split: SplitSource,
    writer: String,
}

#[derive(Debug, Serialize, Deserialize)]
struct FeatureMeta {
    sparse: bool,
    rows: usize,
    cols: usize,
}

#[derive(Debug, Serialize, Deserialize)]
struct LabelMeta {
    num_classes: u32,
    class_names: Option<Vec<String>>,
}

struct Section<'a> {
    name: &'static str,
    elem: Elem,
    bytes: &'a [u8],
}

/// Write `dataset` to `path` atomically.
pub fn write(dataset: &Dataset, path: &Path) -> Result<()> {
    let meta = Meta {
        name: dataset.name.clone(),
        num_vertices: dataset.num_vertices(),
        num_edges: dataset.graph.num_edges(),
        features: dataset.features.as_ref().map(|f| FeatureMeta {
            sparse: f.is_sparse(),
            rows: f.rows(),
            cols: f.cols(),
        }),
        labels: dataset.labels.as_ref().map(|l| LabelMeta {
            num_classes: l.num_classes(),
            class_names: l.class_names().map(<[String]>::to_vec),
        }),
        split: dataset.split.source.clone(),
        writer: concat!("switchgnn-datasets ", env!("CARGO_PKG_VERSION")).into(),
    };
    let meta_json = serde_json::to_vec(&meta).expect("meta serialises");
    let section = |name, elem, bytes| Section { name, elem, bytes };
    let mut sections = vec![
        section("meta", Elem::U8, &meta_json[..]),
        section(
            "offsets",
            Elem::U64,
            bytemuck::cast_slice(dataset.graph.offsets()),
        ),
        section(
            "neighbors",
            Elem::U32,
            bytemuck::cast_slice(dataset.graph.neighbor_ids()),
        ),
        section(
            "split.train",
            Elem::U32,
            bytemuck::cast_slice(&dataset.split.train),
        ),
        section(
            "split.val",
            Elem::U32,
            bytemuck::cast_slice(&dataset.split.val),
        ),
        section(
            "split.test",
            Elem::U32,
            bytemuck::cast_slice(&dataset.split.test),
        ),
    ];
    match &dataset.features {
        Some(Features::Dense(d)) => {
            sections.push(section(
                "feat.values",
                Elem::F32,
                bytemuck::cast_slice(d.values()),
            ));
        }
        Some(Features::Sparse(s)) => {
            sections.push(section(
                "feat.values",
                Elem::F32,
                bytemuck::cast_slice(s.values()),
            ));
            sections.push(section(
                "feat.indptr",
                Elem::U64,
                bytemuck::cast_slice(s.indptr()),
            ));
            sections.push(section(
                "feat.indices",
                Elem::U32,
                bytemuck::cast_slice(s.indices()),
            ));
        }
        None => {}
    }
    if let Some(l) = &dataset.labels {
        sections.push(section(
            "labels",
            Elem::U32,
            bytemuck::cast_slice(l.values()),
        ));
    }

    // Lay the sections out, then write header, table and data in one pass.
    let mut table = Vec::with_capacity(sections.len() * ENTRY_LEN);
    let mut cursor = align(HEADER_LEN + sections.len() * ENTRY_LEN);
    let mut placed = Vec::with_capacity(sections.len());
    for s in &sections {
        let mut name = [0u8; 16];
        name[..s.name.len()].copy_from_slice(s.name.as_bytes());
        table.extend_from_slice(&name);
        table.extend_from_slice(&(s.elem as u32).to_le_bytes());
        table.extend_from_slice(&0u32.to_le_bytes());
        table.extend_from_slice(&(cursor as u64).to_le_bytes());
        table.extend_from_slice(&(s.bytes.len() as u64).to_le_bytes());
        table.extend_from_slice(&xxh3_64(s.bytes).to_le_bytes());
        placed.push(cursor);
        cursor = align(cursor + s.bytes.len());
    }
    let mut header = [0u8; HEADER_LEN];
    header[..8].copy_from_slice(MAGIC);
    header[8..12].copy_from_slice(&VERSION.to_le_bytes());
    header[12..16].copy_from_slice(&(sections.len() as u32).to_le_bytes());
    header[16..24].copy_from_slice(&xxh3_64(&table).to_le_bytes());

    write_atomically(path, |w| {
        w.write_all(&header)?;
        w.write_all(&table)?;
        let mut pos = HEADER_LEN + table.len();
        for (s, &at) in sections.iter().zip(&placed) {
            w.write_all(&vec![0u8; at - pos])?;
            w.write_all(s.bytes)?;
            pos = at + s.bytes.len();
        }
        w.write_all(&vec![0u8; cursor - pos])
    })
}

fn align(x: usize) -> usize {
    x.div_ceil(ALIGN) * ALIGN
}

/// Where one section lies in the file, from the (checksummed) section table.
struct Entry {
    elem: Elem,
    offset: u64,
    len: u64,
    checksum: u64,
}

type ReadAt<'a> = &'a dyn Fn(&mut [u8], u64, &str) -> Result<()>;

/// The section table of an open cache file, and how to read from it.
struct Sections<'a> {
    entries: std::collections::HashMap<String, Entry>,
    read_at: ReadAt<'a>,
    bad: &'a dyn Fn(&str, String) -> Error,
}

impl Sections<'_> {
    /// Read one section into an owned array and verify its checksum.
    fn get<T: bytemuck::Pod>(&self, name: &str, elem: Elem) -> Result<Vec<T>> {
        let record = format!("section `{name}`");
        let e = self
            .entries
            .get(name)
            .ok_or_else(|| (self.bad)(&record, "missing".into()))?;
        if e.elem != elem {
            return Err((self.bad)(
                &record,
                format!("element type {:?}, expected {elem:?}", e.elem),
            ));
        }
        let mut out = vec![T::zeroed(); e.len as usize / std::mem::size_of::<T>()];
        (self.read_at)(bytemuck::cast_slice_mut(&mut out), e.offset, &record)?;
        if xxh3_64(bytemuck::cast_slice(&out)) != e.checksum {
            return Err((self.bad)(
                &record,
                "checksum mismatch (corrupted file)".into(),
            ));
        }
        Ok(out)
    }
}

/// Read and verify a cache file. Sections are read straight into owned arrays (one copy, so
/// peak memory is the dataset's size); their alignment would also allow mapping them in place.
pub fn read(path: &Path) -> Result<Dataset> {
    use std::os::unix::fs::FileExt;

    let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let file_len = file.metadata().map_err(|e| Error::io(path, e))?.len();
    let bad = |record: &str, reason: String| Error::malformed(path, record.to_string(), reason);
    let read_at = |buf: &mut [u8], at: u64, record: &str| {
        file.read_exact_at(buf, at).map_err(|e| match e.kind() {
            std::io::ErrorKind::UnexpectedEof => bad(record, "file ends early (truncated?)".into()),
            _ => Error::io(path, e),
        })
    };

    let mut header = [0u8; HEADER_LEN];
    if file_len < HEADER_LEN as u64 {
        return Err(bad(
            "header",
            "not a switchgnn dataset cache (too short)".into(),
        ));
    }
    read_at(&mut header, 0, "header")?;
    if &header[..8] != MAGIC {
        return Err(bad(
            "header",
            "not a switchgnn dataset cache (bad magic)".into(),
        ));
    }
    let u32_at =
        |b: &[u8], at: usize| u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"));
    let u64_at =
        |b: &[u8], at: usize| u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"));
    let version = u32_at(&header, 8);
    if version != VERSION {
        return Err(Error::CacheVersion {
            path: path.to_path_buf(),
            found: version,
            expected: VERSION,
        });
    }
    let count = u32_at(&header, 12);
    if count > MAX_SECTIONS || (HEADER_LEN + count as usize * ENTRY_LEN) as u64 > file_len {
        return Err(bad(
            "header",
            format!("{count} sections do not fit the file (truncated?)"),
        ));
    }
    let mut table = vec![0u8; count as usize * ENTRY_LEN];
    read_at(&mut table, HEADER_LEN as u64, "section table")?;
    if xxh3_64(&table) != u64_at(&header, 16) {
        return Err(bad(
            "section table",
            "checksum mismatch (corrupted file)".into(),
        ));
    }

    let mut entries = std::collections::HashMap::new();
    for (i, raw) in table.chunks_exact(ENTRY_LEN).enumerate() {
        let name = std::str::from_utf8(&raw[..16])
            .map_err(|_| bad("section table", format!("entry {i} has a non-UTF-8 name")))?
            .trim_end_matches('\0')
            .to_string();
        let record = format!("section `{name}`");
        let code = u32_at(raw, 16);
        let elem = Elem::from_code(code)
            .ok_or_else(|| bad(&record, format!("unknown element type {code}")))?;
        let (offset, len, checksum) = (u64_at(raw, 24), u64_at(raw, 32), u64_at(raw, 40));
        if offset.checked_add(len).is_none_or(|end| end > file_len) {
            return Err(bad(
                &record,
                format!("runs past the end of the file ({file_len} bytes; truncated?)"),
            ));
        }
        if offset % ALIGN as u64 != 0 || len % elem.size() as u64 != 0 {
            return Err(bad(&record, "misaligned or partial array".into()));
        }
        entries.insert(
            name,
            Entry {
                elem,
                offset,
                len,
                checksum,
            },
        );
    }

    // The writer pads the file to the alignment after its last section and writes nothing
    // more: anything beyond is not this cache's (an append, a concatenation).
    let last_end = entries
        .values()
        .map(|e| e.offset + e.len)
        .max()
        .unwrap_or(0)
        .max((HEADER_LEN + count as usize * ENTRY_LEN) as u64);
    let expected_len = (last_end as usize).div_ceil(ALIGN) as u64 * ALIGN as u64;
    if file_len != expected_len {
        return Err(bad(
            "end of file",
            format!(
                "{} bytes after the last section, which ends the cache at byte {expected_len} \
                 (appended to or concatenated?)",
                file_len.saturating_sub(expected_len)
            ),
        ));
    }

    let sections = Sections {
        entries,
        read_at: &read_at,
        bad: &bad,
    };
    let get_u32 = |name: &str| sections.get::<u32>(name, Elem::U32);
    let get_u64 = |name: &str| sections.get::<u64>(name, Elem::U64);
    let get_f32 = |name: &str| sections.get::<f32>(name, Elem::F32);

    let meta: Meta = serde_json::from_slice(&sections.get::<u8>("meta", Elem::U8)?)
        .map_err(|e| bad("section `meta`", format!("invalid JSON: {e}")))?;
    let graph =
        Graph::from_csr(get_u64("offsets")?, get_u32("neighbors")?).map_err(|e| e.at(path))?;
    if graph.num_vertices() != meta.num_vertices || graph.num_edges() != meta.num_edges {
        return Err(bad(
            "section `meta`",
            "vertex or edge count disagrees with the graph".into(),
        ));
    }
    let features = match &meta.features {
        None => None,
        Some(fm) => {
            let values = get_f32("feat.values")?;
            let f = if fm.sparse {
                let indptr = get_u64("feat.indptr")?;
                let indices = get_u32("feat.indices")?;
                Features::Sparse(
                    SparseFeatures::new(fm.rows, fm.cols, indptr, indices, values)
                        .map_err(|e| e.at(path))?,
                )
            } else {
                Features::Dense(
                    DenseFeatures::new(fm.rows, fm.cols, values).map_err(|e| e.at(path))?,
                )
            };
            Some(f)
        }
    };
    let labels = match meta.labels {
        None => None,
        Some(lm) => Some(
            Labels::new(get_u32("labels")?, lm.num_classes, lm.class_names)
                .map_err(|e| e.at(path))?,
        ),
    };
    let split = Split::from_ids(
        meta.num_vertices,
        get_u32("split.train")?,
        get_u32("split.val")?,
        get_u32("split.test")?,
        meta.split,
    )
    .map_err(|e| e.at(path))?;
    Dataset::new(meta.name, graph, features, labels, split).map_err(|e| e.at(path))
}
