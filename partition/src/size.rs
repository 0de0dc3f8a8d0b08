//! Byte sizes as people write them: `100MB` (10^6), `64MiB` (2^20), `1GB`, or plain bytes.

use crate::error::{PartitionError, Result};

/// Parse a size such as `100MB`, `10 MiB`, `512KB` or `4096`.
pub fn parse_bytes(text: &str) -> Result<u64> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = (t[..split].trim(), t[split..].trim());
    let scale: u64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "kib" => 1 << 10,
        "mib" => 1 << 20,
        "gib" => 1 << 30,
        _ => return Err(bad(text)),
    };
    let value: f64 = number.parse().map_err(|_| bad(text))?;
    if !value.is_finite() || value < 0.0 {
        return Err(bad(text));
    }
    Ok((value * scale as f64).round() as u64)
}

fn bad(text: &str) -> PartitionError {
    PartitionError::Usage(format!(
        "`{text}` is not a size (examples: 100MB, 10MiB, 4096)"
    ))
}

/// `100 MB`-style rendering with decimal units, for tables.
pub fn format_bytes(bytes: u64) -> String {
    let b = bytes as f64;
    match bytes {
        0..1_000 => format!("{bytes} B"),
        1_000..1_000_000 => format!("{:.1} KB", b / 1e3),
        1_000_000..1_000_000_000 => format!("{:.1} MB", b / 1e6),
        _ => format!("{:.2} GB", b / 1e9),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units() {
        assert_eq!(parse_bytes("100MB").unwrap(), 100_000_000);
        assert_eq!(parse_bytes("10 MiB").unwrap(), 10 << 20);
        assert_eq!(parse_bytes("4096").unwrap(), 4096);
        assert_eq!(parse_bytes("1.5GB").unwrap(), 1_500_000_000);
        assert!(parse_bytes("ten MB").is_err());
        assert!(parse_bytes("10 parsecs").is_err());
        assert_eq!(format_bytes(123_456_789), "123.5 MB");
    }
}
