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
}

/// A numeric array converted to a common element type, with its shape in row-major order.
pub(crate) struct Array<T> {
    pub data: Vec<T>,
    pub shape: Vec<u64>,
}

impl Npz {
    pub fn open(path: &Path) -> Result<Npz> {
        File::open(path).map_err(|e| Error::io(path, e))?;
        let archive = NpzArchive::open(path).map_err(|e| {
            Error::malformed(
                path,
                "archive",
                format!("not a readable npz (zip) file: {e}"),
            )
        })?;
        let names = archive.array_names().map(str::to_string).collect();
        Ok(Npz {
            path: path.to_path_buf(),
            archive,
            names,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn has(&self, name: &str) -> bool {
        self.names.iter().any(|n| n == name)
    }

    pub fn names(&self) -> &[String] {
        &self.names
    }

    fn malformed(&self, name: &str, reason: impl Into<String>) -> Error {
        Error::malformed(&self.path, format!("array `{name}`"), reason)
    }

    fn open_array<R>(
        &mut self,
        name: &str,
        read: impl FnOnce(NpyFile<zip::read::ZipFile<'_>>) -> std::io::Result<R>,
    ) -> Result<R> {
        let path = self.path.clone();
        let err = |e: std::io::Error| {
            Error::malformed(&path, format!("array `{name}`"), format!("unreadable: {e}"))
        };
        match self.archive.by_name(name).map_err(err)? {
            Some(file) => read(file).map_err(err),
            None => Err(Error::malformed(
                &path,
                format!("array `{name}`"),
                "missing from the archive",
            )),
        }
    }

    /// Any integer array, widened to `i64`.
    pub fn ints(&mut self, name: &str) -> Result<Array<i64>> {
        let (code, shape, order) = self.describe(name)?;
        let data: Vec<i64> = match code.as_str() {
            "i1" => self.read_as::<i8, _>(name, i64::from)?,
            "u1" => self.read_as::<u8, _>(name, i64::from)?,
            "i2" => self.read_as::<i16, _>(name, i64::from)?,
            "u2" => self.read_as::<u16, _>(name, i64::from)?,
            "i4" => self.read_as::<i32, _>(name, i64::from)?,
            "u4" => self.read_as::<u32, _>(name, i64::from)?,
            "i8" => self.read_as::<i64, _>(name, |x| x)?,
            "u8" => {
                let raw = self.read_as::<u64, _>(name, |x| x)?;
                match raw.iter().position(|&x| x > i64::MAX as u64) {
                    Some(i) => return Err(self.malformed(name, format!("entry {i} too large"))),
                    None => raw.into_iter().map(|x| x as i64).collect(),
                }
            }
            other => return Err(self.malformed(name, format!("dtype {other}, expected integers"))),
        };
        self.finish(name, data, shape, order)
    }

    /// Any float array, as `f32`.
    pub fn floats(&mut self, name: &str) -> Result<Array<f32>> {
        let (code, shape, order) = self.describe(name)?;
        let data: Vec<f32> = match code.as_str() {
            "f4" => self.read_as::<f32, _>(name, |x| x)?,
            "f8" => self.read_as::<f64, _>(name, |x| x as f32)?,
            "f2" => return Err(self.malformed(name, "half-precision floats are not supported")),
            _ => self
                .ints(name)
                .map(|a| a.data.into_iter().map(|x| x as f32).collect())?,
        };
        self.finish(name, data, shape, order)
    }

    /// A boolean array (numpy `|b1`; integer 0/1 arrays are accepted too).
    pub fn bools(&mut self, name: &str) -> Result<Array<bool>> {
        let (code, shape, order) = self.describe(name)?;
        let data: Vec<bool> = if code == "b1" {
            self.read_as::<bool, _>(name, |x| x)?
        } else {
            let ints = self.ints(name)?.data;
            if let Some(i) = ints.iter().position(|&x| x != 0 && x != 1) {
                return Err(self.malformed(name, format!("entry {i} is {}, not 0/1", ints[i])));
            }
            ints.into_iter().map(|x| x == 1).collect()
        };
        self.finish(name, data, shape, order)
    }

    /// Element type code without byte order (e.g. `i4`), shape and memory order.
    fn describe(&mut self, name: &str) -> Result<(String, Vec<u64>, Order)> {
        let (dtype, shape, order) =
            self.open_array(name, |f| Ok((f.dtype(), f.shape().to_vec(), f.order())))?;
        match dtype {
            DType::Plain(ts) => {
                let s = ts.to_string();
                Ok((
                    s.trim_start_matches(['<', '>', '|', '=']).to_string(),
                    shape,
                    order,
                ))
            }
            other => Err(self.malformed(name, format!("unsupported dtype {other:?}"))),
        }
    }

    fn read_as<T: npyz::Deserialize, U>(
        &mut self,
        name: &str,
        convert: impl Fn(T) -> U,
    ) -> Result<Vec<U>> {
        let raw: Vec<T> = self.open_array(name, |f| f.into_vec::<T>())?;
        Ok(raw.into_iter().map(convert).collect())
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
    pub fn expect_len<T>(&self, name: &str, array: &Array<T>, len: usize) -> Result<()> {
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
