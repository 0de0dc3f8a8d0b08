//! Shared pieces of the text loaders: opening plain or gzip files, parsing fields with errors
//! that name the file, the line and the field.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::Path;
use std::str::FromStr;

use crate::error::{Error, Result};

/// A buffered reader over `path`, inflating it when the name ends in `.gz`. A plain file
/// whose last line does not end is refused: a file cut short (a copy or download that
/// stopped) most often ends mid-line, and its last record may still parse, just wrong. (A
/// gzip file cut short fails to inflate.)
pub(crate) fn open(path: &Path) -> Result<Box<dyn BufRead + Send>> {
    let mut file = File::open(path).map_err(|e| Error::io(path, e))?;
    let reader: Box<dyn Read + Send> = if path.extension().is_some_and(|e| e == "gz") {
        Box::new(flate2::read::MultiGzDecoder::new(BufReader::new(file)))
    } else {
        check_last_line_ends(path, &mut file)?;
        Box::new(file)
    };
    Ok(Box::new(BufReader::with_capacity(1 << 20, reader)))
}

/// Refuse `file` (at `path`, positioned at its start, and left there) when it is not empty
/// and its last byte is not a newline; the error names the last line.
fn check_last_line_ends(path: &Path, file: &mut File) -> Result<()> {
    let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
    if len == 0 {
        return Ok(());
    }
    let mut last = [0u8];
    file.seek(SeekFrom::End(-1))
        .and_then(|_| file.read_exact(&mut last))
        .map_err(|e| Error::io(path, e))?;
    file.seek(SeekFrom::Start(0))
        .map_err(|e| Error::io(path, e))?;
    if last[0] == b'\n' {
        return Ok(());
    }
    // Only on this rare path: count the lines to name the last one.
    let mut lines = 1;
    for byte in BufReader::new(&mut *file).bytes() {
        lines += usize::from(byte.map_err(|e| Error::io(path, e))? == b'\n');
    }
    file.seek(SeekFrom::Start(0))
        .map_err(|e| Error::io(path, e))?;
    Err(Error::malformed(
        path,
        format!("line {lines}"),
        "the last line does not end (no newline): the file looks cut short; if it is \
         complete, end its last line",
    ))
}

/// A CSV reader over a plain or gzip file.
pub(crate) fn csv(path: &Path, has_headers: bool) -> Result<csv::Reader<Box<dyn BufRead + Send>>> {
    Ok(csv::ReaderBuilder::new()
        .has_headers(has_headers)
        .flexible(true)
        .from_reader(open(path)?))
}

/// Parse one field; on failure the error says where (`record`) and what was found.
pub(crate) fn field<T: FromStr>(path: &Path, record: &str, what: &str, raw: &str) -> Result<T> {
    raw.trim().parse().map_err(|_| {
        Error::malformed(
            path,
            record.to_string(),
            format!("{what} `{raw}` is not a valid {}", type_word::<T>()),
        )
    })
}

fn type_word<T>() -> &'static str {
    let name = std::any::type_name::<T>();
    if name.starts_with('f') {
        "number"
    } else {
        "non-negative integer"
    }
}

/// Map a CSV reading error to our error type, keeping its line number.
pub(crate) fn csv_error(path: &Path, e: csv::Error) -> Error {
    let record = e
        .position()
        .map_or("file".to_string(), |p| format!("line {}", p.line()));
    match e.into_kind() {
        csv::ErrorKind::Io(io) => Error::io(path, io),
        other => Error::malformed(path, record, format!("{other:?}")),
    }
}

/// Read every line of a one-column file of integers (OGB splits, counts).
pub(crate) fn read_int_column<T: FromStr>(path: &Path, what: &str) -> Result<Vec<T>> {
    let mut out = Vec::new();
    for (i, line) in open(path)?.lines().enumerate() {
        let line = line.map_err(|e| Error::io(path, e))?;
        if line.trim().is_empty() {
            continue;
        }
        out.push(field(path, &format!("line {}", i + 1), what, &line)?);
    }
    Ok(out)
}
