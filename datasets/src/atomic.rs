//! Atomic file output: write a temporary file beside the target, flush it to disk, then rename
//! it over the target, so a reader sees the old file or the complete new one and never a torn
//! write.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use crate::error::{Error, Result};

/// Write `path` through `fill`; the file appears only if `fill` and the flush succeed.
pub fn write_atomically(
    path: &Path,
    fill: impl FnOnce(&mut BufWriter<&mut File>) -> std::io::Result<()>,
) -> Result<()> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let io = |e| Error::io(path, e);
    let mut tmp = tempfile::Builder::new()
        .prefix(".switchgnn-")
        .suffix(".tmp")
        .tempfile_in(dir)
        .map_err(io)?;
    {
        let mut w = BufWriter::with_capacity(1 << 20, tmp.as_file_mut());
        fill(&mut w).map_err(io)?;
        w.flush().map_err(io)?;
    }
    // Temporary files are created private (0600); the result is an ordinary readable file.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let readable = std::fs::Permissions::from_mode(0o644);
        tmp.as_file().set_permissions(readable).map_err(io)?;
    }
    tmp.as_file().sync_all().map_err(io)?;
    tmp.persist(path).map_err(|e| io(e.error))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_write_leaves_the_old_file_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.bin");
        write_atomically(&path, |w| w.write_all(b"old")).unwrap();
        let err = write_atomically(&path, |w| {
            w.write_all(b"partial")?;
            Err(std::io::Error::other("disk on fire"))
        });
        assert!(err.is_err());
        assert_eq!(std::fs::read(&path).unwrap(), b"old");
        let leftovers = std::fs::read_dir(dir.path()).unwrap().count();
        assert_eq!(leftovers, 1, "the temporary file is removed");
    }
}
