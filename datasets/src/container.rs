//! The file container every switchgnn binary output shares (the dataset cache, per-worker
//! shards, saved exchange sessions): named, typed, checksummed arrays, each 64-byte aligned so
//! a file can be memory-mapped and viewed in place.
//!
//! Layout (all integers little-endian):
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 8 | magic (what kind of file) |
//! | 8 | 4 | format version of that kind |
//! | 12 | 4 | number of sections `S` |
//! | 16 | 8 | xxh3-64 of the section table |
//! | 24 | 40 | reserved, zero |
//! | 64 | 48·S | section table: name (16 bytes, zero-padded), element type (u32), reserved (u32), offset (u64), length in bytes (u64), xxh3-64 of the data (u64) |
//! | … | | section data, each starting at a multiple of 64 bytes; the file ends at the first multiple of 64 after the last |
//!
//! Opening checks the magic, the table's checksum, that every section lies inside the file and
//! that nothing follows the last one; reading a section checks its type and checksum. Every
//! failure is an [`Error`] naming the file and the section. Files are written atomically.

use std::collections::HashMap;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use xxhash_rust::xxh3::xxh3_64;

use crate::atomic::write_atomically;
use crate::error::{Error, Result};

const HEADER_LEN: usize = 64;
const ENTRY_LEN: usize = 48;
const ALIGN: usize = 64;
/// Longest section name.
pub const NAME_LEN: usize = 16;
/// A sanity bound on the section count, so a corrupted header cannot ask for a huge table.
const MAX_SECTIONS: u32 = 4096;

#[cfg(not(target_endian = "little"))]
compile_error!("switchgnn's binary files store little-endian arrays and are read in place");

/// The element type of a section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Elem {
    /// Bytes (also JSON text).
    U8 = 1,
    /// Little-endian `u32`.
    U32 = 2,
    /// Little-endian `u64`.
    U64 = 3,
    /// Little-endian IEEE `f32`.
    F32 = 4,
    /// Little-endian `u16`.
    U16 = 5,
}

impl Elem {
    fn size(self) -> usize {
        match self {
            Elem::U8 => 1,
            Elem::U16 => 2,
            Elem::U32 | Elem::F32 => 4,
            Elem::U64 => 8,
        }
    }

    fn from_code(code: u32) -> Option<Elem> {
        [Elem::U8, Elem::U32, Elem::U64, Elem::F32, Elem::U16]
            .into_iter()
            .find(|e| *e as u32 == code)
    }
}

/// One array to write.
#[derive(Debug)]
pub struct Section<'a> {
    /// At most [`NAME_LEN`] bytes, unique in the file.
    pub name: String,
    /// How to read `bytes`.
    pub elem: Elem,
    /// The array's raw little-endian bytes; a whole number of `elem`s.
    pub bytes: &'a [u8],
}

impl<'a> Section<'a> {
    /// A section of raw `bytes`.
    ///
    /// # Panics
    /// If `name` is longer than [`NAME_LEN`] bytes.
    pub fn new(name: impl Into<String>, elem: Elem, bytes: &'a [u8]) -> Section<'a> {
        let name = name.into();
        assert!(
            name.len() <= NAME_LEN,
            "section name `{name}` is longer than {NAME_LEN} bytes"
        );
        Section { name, elem, bytes }
    }

    /// A byte section (raw bytes or JSON text).
    pub fn u8s(name: impl Into<String>, v: &'a [u8]) -> Section<'a> {
        Section::new(name, Elem::U8, v)
    }
    /// A `u16` section.
    pub fn u16s(name: impl Into<String>, v: &'a [u16]) -> Section<'a> {
        Section::new(name, Elem::U16, bytemuck::cast_slice(v))
    }
    /// A `u32` section.
    pub fn u32s(name: impl Into<String>, v: &'a [u32]) -> Section<'a> {
        Section::new(name, Elem::U32, bytemuck::cast_slice(v))
    }
    /// A `u64` section.
    pub fn u64s(name: impl Into<String>, v: &'a [u64]) -> Section<'a> {
        Section::new(name, Elem::U64, bytemuck::cast_slice(v))
    }
    /// An `f32` section.
    pub fn f32s(name: impl Into<String>, v: &'a [f32]) -> Section<'a> {
        Section::new(name, Elem::F32, bytemuck::cast_slice(v))
    }
}

/// Write `sections` to `path` atomically as a file of kind `magic`, format `version`.
pub fn write(path: &Path, magic: &[u8; 8], version: u32, sections: &[Section<'_>]) -> Result<()> {
    let mut table = Vec::with_capacity(sections.len() * ENTRY_LEN);
    let mut cursor = align(HEADER_LEN + sections.len() * ENTRY_LEN);
    let mut placed = Vec::with_capacity(sections.len());
    for s in sections {
        let mut name = [0u8; NAME_LEN];
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
    header[..8].copy_from_slice(magic);
    header[8..12].copy_from_slice(&version.to_le_bytes());
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
#[derive(Debug)]
struct Entry {
    elem: Elem,
    offset: u64,
    len: u64,
    checksum: u64,
}

/// An open container file: its version and section table; sections are read on demand.
#[derive(Debug)]
pub struct Container {
    path: PathBuf,
    file: std::fs::File,
    version: u32,
    entries: HashMap<String, Entry>,
}

impl Container {
    /// Open `path`, a file of kind `magic` (`what` names the kind in errors), and check its
    /// header, section table and length. The version is the caller's to check.
    pub fn open(path: &Path, magic: &[u8; 8], what: &str) -> Result<Container> {
        let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
        let file_len = file.metadata().map_err(|e| Error::io(path, e))?.len();
        let bad = |record: &str, reason: String| Error::malformed(path, record, reason);
        let mut c = Container {
            path: path.to_path_buf(),
            file,
            version: 0,
            entries: HashMap::new(),
        };
        if file_len < HEADER_LEN as u64 {
            return Err(bad("header", format!("not a {what} (too short)")));
        }
        let mut header = [0u8; HEADER_LEN];
        c.read_at(&mut header, 0, "header")?;
        if &header[..8] != magic {
            return Err(bad("header", format!("not a {what} (bad magic)")));
        }
        c.version = u32_at(&header, 8);
        let count = u32_at(&header, 12);
        let table_end = HEADER_LEN as u64 + u64::from(count) * ENTRY_LEN as u64;
        if count > MAX_SECTIONS || table_end > file_len {
            return Err(bad(
                "header",
                format!("{count} sections do not fit the file (truncated?)"),
            ));
        }
        let mut table = vec![0u8; count as usize * ENTRY_LEN];
        c.read_at(&mut table, HEADER_LEN as u64, "section table")?;
        if xxh3_64(&table) != u64_at(&header, 16) {
            return Err(bad(
                "section table",
                "checksum mismatch (corrupted file)".into(),
            ));
        }
        for (i, raw) in table.chunks_exact(ENTRY_LEN).enumerate() {
            let name = std::str::from_utf8(&raw[..NAME_LEN])
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
            let entry = Entry {
                elem,
                offset,
                len,
                checksum,
            };
            if c.entries.insert(name, entry).is_some() {
                return Err(bad(&record, "appears twice in the section table".into()));
            }
        }
        // The writer pads the file to the alignment after its last section and writes nothing
        // more: anything beyond is not this file's (an append, a concatenation).
        let last_end = c
            .entries
            .values()
            .map(|e| e.offset + e.len)
            .max()
            .unwrap_or(0)
            .max(table_end);
        let expected_len = last_end.div_ceil(ALIGN as u64) * ALIGN as u64;
        if file_len != expected_len {
            return Err(bad(
                "end of file",
                format!(
                    "{} bytes after the last section, which ends the file at byte {expected_len} \
                     (appended to or concatenated?)",
                    file_len.saturating_sub(expected_len)
                ),
            ));
        }
        Ok(c)
    }

    /// The file this container was opened from (errors name it).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The format version in the header.
    pub fn version(&self) -> u32 {
        self.version
    }

    /// Whether the file has a section called `name`.
    pub fn has(&self, name: &str) -> bool {
        self.entries.contains_key(name)
    }

    /// An error about `record` of this file.
    pub fn bad(&self, record: impl Into<String>, reason: impl Into<String>) -> Error {
        Error::malformed(&self.path, record, reason)
    }

    fn read_at(&self, buf: &mut [u8], at: u64, record: &str) -> Result<()> {
        self.file
            .read_exact_at(buf, at)
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::UnexpectedEof => {
                    self.bad(record, "file ends early (truncated?)")
                }
                _ => Error::io(&self.path, e),
            })
    }

    /// Read section `name` into an owned array of `elem`s and verify its checksum.
    pub fn get<T: bytemuck::Pod>(&self, name: &str, elem: Elem) -> Result<Vec<T>> {
        assert_eq!(std::mem::size_of::<T>(), elem.size(), "element size");
        let record = format!("section `{name}`");
        let e = self
            .entries
            .get(name)
            .ok_or_else(|| self.bad(&record, "missing"))?;
        if e.elem != elem {
            return Err(self.bad(
                &record,
                format!("element type {:?}, expected {elem:?}", e.elem),
            ));
        }
        let mut out = vec![T::zeroed(); e.len as usize / elem.size()];
        self.read_at(bytemuck::cast_slice_mut(&mut out), e.offset, &record)?;
        if xxh3_64(bytemuck::cast_slice(&out)) != e.checksum {
            return Err(self.bad(&record, "checksum mismatch (corrupted file)"));
        }
        Ok(out)
    }

    /// Byte section `name`, checksum verified.
    pub fn u8s(&self, name: &str) -> Result<Vec<u8>> {
        self.get(name, Elem::U8)
    }
    /// `u16` section `name`, checksum verified.
    pub fn u16s(&self, name: &str) -> Result<Vec<u16>> {
        self.get(name, Elem::U16)
    }
    /// `u32` section `name`, checksum verified.
    pub fn u32s(&self, name: &str) -> Result<Vec<u32>> {
        self.get(name, Elem::U32)
    }
    /// `u64` section `name`, checksum verified.
    pub fn u64s(&self, name: &str) -> Result<Vec<u64>> {
        self.get(name, Elem::U64)
    }
    /// `f32` section `name`, checksum verified.
    pub fn f32s(&self, name: &str) -> Result<Vec<f32>> {
        self.get(name, Elem::F32)
    }

    /// Section `name` as JSON of type `T`.
    pub fn json<T: serde::de::DeserializeOwned>(&self, name: &str) -> Result<T> {
        serde_json::from_slice(&self.u8s(name)?)
            .map_err(|e| self.bad(format!("section `{name}`"), format!("invalid JSON: {e}")))
    }
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}
