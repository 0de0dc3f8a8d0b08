//! Reading numpy `.npz` archives through `npyz`, with errors that name the archive and array.

use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};

use npyz::npz::NpzArchive;
use npyz::{DType, NpyFile, Order};

use crate::error::{Error, Result};

/// An opened `.npz` file.
pub(crate) struct Npz {
    path: PathBuf,
    archive: NpzArchive<BufReader<File>>,
    names: Vec<String>,
    /// Arrays not read yet; see [`Npz::verify_rest`].
    unread: Vec<String>,
}

/// A numeric array converted to a common element type, with its shape in row-major order.
pub(crate) struct Array<T> {
    pub data: Vec<T>,
    pub shape: Vec<u64>,
}

impl Npz {
    pub(super) fn open(path: &Path) -> Result<Npz> {
        File::open(path).map_err(|e| Error::io(path, e))?;
        let archive = NpzArchive::open(path).map_err(|e| {
            Error::malformed(
                path,
                "archive",
                format!("not a readable npz (zip) file: {e}"),
            )
        })?;
        let names: Vec<String> = archive.array_names().map(str::to_string).collect();
        Ok(Npz {
            path: path.to_path_buf(),
            archive,
            unread: names.clone(),
            names,
        })
    }

    pub(super) fn path(&self) -> &Path {
        &self.path
    }

    pub(super) fn has(&self, name: &str) -> bool {
        self.names.iter().any(|n| n == name)
    }

    pub(super) fn names(&self) -> &[String] {
        &self.names
    }

    fn malformed(&self, name: &str, reason: impl Into<String>) -> Error {
        Error::malformed(&self.path, format!("array `{name}`"), reason)
    }

    /// The raw bytes of one array. Reading the entry to its end makes the zip reader verify
    /// its CRC-32, so a damaged archive is refused instead of read as wrong numbers.
    fn entry(&mut self, name: &str) -> Result<Vec<u8>> {
        use std::io::Read;
        self.unread.retain(|n| n != name);
        let path = self.path.clone();
        let record = || format!("array `{name}`");
        let zip_name = npyz::npz::file_name_from_array_name(name);
        let mut file = match self.archive.zip_archive().by_name(&zip_name) {
            Ok(f) => f,
            Err(zip::result::ZipError::FileNotFound) => {
                return Err(Error::malformed(
                    &path,
                    record(),
                    "missing from the archive",
                ))
            }
            Err(e) => {
                return Err(Error::malformed(
                    &path,
                    record(),
                    format!("unreadable: {e}"),
                ))
            }
        };
        let mut bytes = Vec::with_capacity(file.size() as usize);
        file.read_to_end(&mut bytes)
            .map_err(|e| Error::malformed(&path, record(), format!("unreadable: {e}")))?;
        Ok(bytes)
    }

    /// Check the CRC of every array not read so far, so damage anywhere in the file is found.
    pub(super) fn verify_rest(&mut self) -> Result<()> {
        for name in self.unread.clone() {
            self.entry(&name)?;
        }
        Ok(())
    }

    /// Parse the header of `bytes`: element code without byte order (e.g. `i4`), shape, order.
    fn header<'b>(&self, name: &str, bytes: &'b [u8]) -> Result<(NpyFile<&'b [u8]>, String)> {
        let npy = NpyFile::new(bytes)
            .map_err(|e| self.malformed(name, format!("not a valid .npy array: {e}")))?;
        match npy.dtype() {
            DType::Plain(ts) => {
                let code = ts.to_string();
                let code = code.trim_start_matches(['<', '>', '|', '=']).to_string();
                Ok((npy, code))
            }
            other => Err(self.malformed(name, format!("unsupported dtype {other:?}"))),
        }
    }

    /// Any integer array, widened to `i64`.
    pub(super) fn ints(&mut self, name: &str) -> Result<Array<i64>> {
        let bytes = self.entry(name)?;
        let (npy, code) = self.header(name, &bytes)?;
        let (shape, order) = (npy.shape().to_vec(), npy.order());
        let data = self.int_values(name, npy, &code)?;
        self.finish(name, data, shape, order)
    }

    fn int_values(&self, name: &str, npy: NpyFile<&[u8]>, code: &str) -> Result<Vec<i64>> {
        fn widen<T: npyz::Deserialize + Into<i128>>(
            npy: NpyFile<&[u8]>,
        ) -> std::io::Result<Vec<i128>> {
            Ok(npy.into_vec::<T>()?.into_iter().map(Into::into).collect())
        }
        let wide = match code {
            "i1" => widen::<i8>(npy),
            "u1" => widen::<u8>(npy),
            "i2" => widen::<i16>(npy),
            "u2" => widen::<u16>(npy),
            "i4" => widen::<i32>(npy),
            "u4" => widen::<u32>(npy),
            "i8" => widen::<i64>(npy),
            "u8" => widen::<u64>(npy),
            other => return Err(self.malformed(name, format!("dtype {other}, expected integers"))),
        }
        .map_err(|e| self.malformed(name, format!("unreadable: {e}")))?;
        wide.into_iter()
            .enumerate()
            .map(|(i, x)| {
                i64::try_from(x).map_err(|_| self.malformed(name, format!("entry {i} too large")))
            })
            .collect()
    }

    /// Any float (or integer) array, as `f32`.
    pub(super) fn floats(&mut self, name: &str) -> Result<Array<f32>> {
        let bytes = self.entry(name)?;
        let (npy, code) = self.header(name, &bytes)?;
        let (shape, order) = (npy.shape().to_vec(), npy.order());
        let unreadable = |e: std::io::Error| self.malformed(name, format!("unreadable: {e}"));
        let data: Vec<f32> = match code.as_str() {
            "f4" => npy.into_vec::<f32>().map_err(unreadable)?,
            "f8" => npy
                .into_vec::<f64>()
                .map_err(unreadable)?
                .into_iter()
                .map(|x| x as f32)
                .collect(),
            "f2" => return Err(self.malformed(name, "half-precision floats are not supported")),
            _ => self
                .int_values(name, npy, &code)?
                .into_iter()
                .map(|x| x as f32)
                .collect(),
        };
        self.finish(name, data, shape, order)
    }

    /// A boolean array (numpy `|b1`; integer 0/1 arrays are accepted too).
    pub(super) fn bools(&mut self, name: &str) -> Result<Array<bool>> {
        let bytes = self.entry(name)?;
        let (npy, code) = self.header(name, &bytes)?;
        let (shape, order) = (npy.shape().to_vec(), npy.order());
        let data: Vec<bool> = if code == "b1" {
            npy.into_vec::<bool>()
                .map_err(|e| self.malformed(name, format!("unreadable: {e}")))?
        } else {
            let ints = self.int_values(name, npy, &code)?;
            if let Some(i) = ints.iter().position(|&x| x != 0 && x != 1) {
                return Err(self.malformed(name, format!("entry {i} is {}, not 0/1", ints[i])));
            }
            ints.into_iter().map(|x| x == 1).collect()
        };
        self.finish(name, data, shape, order)
    }

    fn finish<T: Copy>(
        &self,
        name: &str,
        data: Vec<T>,
        shape: Vec<u64>,
        order: Order,
    ) -> Result<Array<T>> {
        let expected: u64 = shape.iter().product();
        if data.len() as u64 != expected {
            return Err(self.malformed(name, format!("{} entries for shape {shape:?}", data.len())));
        }
        let data = match (order, shape.as_slice()) {
            (Order::Fortran, [rows, cols]) => transpose(&data, *cols as usize, *rows as usize),
            (Order::Fortran, s) if s.len() > 2 => {
                return Err(self.malformed(name, "Fortran-ordered arrays above 2-D"))
            }
            _ => data,
        };
        Ok(Array { data, shape })
    }

    /// A 1-D array of exactly `len` entries.
    pub(super) fn expect_len<T>(&self, name: &str, array: &Array<T>, len: usize) -> Result<()> {
        if array.shape.len() != 1 || array.data.len() != len {
            return Err(self.malformed(name, format!("shape {:?}, expected ({len},)", array.shape)));
        }
        Ok(())
    }
}

/// `data` holds a `rows x cols` matrix in row-major order; return its transpose.
fn transpose<T: Copy>(data: &[T], rows: usize, cols: usize) -> Vec<T> {
    let mut out = Vec::with_capacity(data.len());
    for c in 0..cols {
        for r in 0..rows {
            out.push(data[r * cols + c]);
        }
    }
    out
}
