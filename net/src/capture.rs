//! Packet captures a person can open in Wireshark: every datagram an endpoint sends or
//! receives, as an Ethernet / IP / UDP frame around the switchgnn header, in a classic pcap
//! file. `tools/wireshark/switchgnn.lua` decodes the header. A capture stops recording after a
//! bounded number of packets, and is written to a temporary file renamed into place when it
//! is finished (or dropped), so a reader never sees half a capture under the final name.

use std::fs::File;
use std::io::{self, BufWriter};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use pcap_file::pcap::{PcapPacket, PcapWriter};
use serde::{Deserialize, Serialize};

use crate::datapath::EcnCodepoint;

/// What a finished capture holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CaptureStats {
    /// Packets written.
    pub packets: u64,
    /// Packets seen after the limit (not written).
    pub skipped: u64,
}

/// A capture being written.
#[derive(Debug)]
pub struct Capture {
    writer: Option<PcapWriter<BufWriter<File>>>,
    path: PathBuf,
    tmp: PathBuf,
    limit: u64,
    stats: CaptureStats,
}

impl Capture {
    /// Start a capture of at most `limit` packets, to be written to `path`.
    pub fn create(path: &Path, limit: u64) -> io::Result<Capture> {
        let mut name = path
            .file_name()
            .ok_or_else(|| io::Error::other(format!("{}: not a file name", path.display())))?
            .to_os_string();
        name.push(".partial");
        let tmp = path.with_file_name(name);
        let file = File::create(&tmp)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", tmp.display())))?;
        let writer = PcapWriter::new(BufWriter::new(file)).map_err(io::Error::other)?;
        Ok(Capture {
            writer: Some(writer),
            path: path.to_path_buf(),
            tmp,
            limit,
            stats: CaptureStats::default(),
        })
    }

    /// Record one UDP datagram of `payload` from `from` to `to`, marked `ecn`, now.
    pub fn record(
        &mut self,
        from: SocketAddr,
        to: SocketAddr,
        ecn: Option<EcnCodepoint>,
        payload: &[u8],
    ) {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO);
        self.record_at(now, from, to, ecn, payload);
    }

    /// [`Capture::record`] with the packet's time given: since the Unix epoch, or since the
    /// start of a simulation.
    pub fn record_at(
        &mut self,
        at: Duration,
        from: SocketAddr,
        to: SocketAddr,
        ecn: Option<EcnCodepoint>,
        payload: &[u8],
    ) {
        if self.stats.packets >= self.limit {
            self.stats.skipped += 1;
            return;
        }
        let Some(writer) = self.writer.as_mut() else {
            return;
        };
        let frame = frame(from, to, ecn, payload);
        let packet = PcapPacket::new(at, frame.len() as u32, &frame);
        match writer.write_packet(&packet) {
            Ok(_) => self.stats.packets += 1,
            Err(e) => {
                tracing::warn!(file = %self.tmp.display(), error = %e, "capture stopped");
                self.writer = None;
            }
        }
    }

    /// Write what is buffered and move the capture to its name.
    pub fn finish(mut self) -> io::Result<CaptureStats> {
        self.close()
    }

    fn close(&mut self) -> io::Result<CaptureStats> {
        if let Some(writer) = self.writer.take() {
            let file = writer
                .into_writer()
                .into_inner()
                .map_err(|e| io::Error::other(format!("{}: {e}", self.tmp.display())))?;
            file.sync_all()?;
            std::fs::rename(&self.tmp, &self.path)
                .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", self.path.display())))?;
        }
        Ok(self.stats)
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        if let Err(e) = self.close() {
            tracing::warn!(file = %self.path.display(), error = %e, "capture not written");
        }
    }
}

use crate::frame::frame;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::checksum;

    #[test]
    fn the_ipv4_header_checksums_to_zero_and_lengths_add_up() {
        let from: SocketAddr = "127.0.0.1:4000".parse().unwrap();
        let to: SocketAddr = "127.0.0.2:5000".parse().unwrap();
        let f = frame(from, to, Some(EcnCodepoint::Ce), &[1, 2, 3]);
        assert_eq!(f.len(), 14 + 20 + 8 + 3);
        assert_eq!(checksum(&f[14..34]), 0);
        assert_eq!(f[15] & 3, 3, "CE in the IP header");
        assert_eq!(u16::from_be_bytes([f[38], f[39]]), 11);
        assert_eq!(&f[42..], &[1, 2, 3]);
    }

    #[test]
    fn a_capture_appears_under_its_name_only_when_finished() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.pcap");
        let mut c = Capture::create(&path, 2).unwrap();
        let a: SocketAddr = "10.0.0.1:1".parse().unwrap();
        for _ in 0..3 {
            c.record(a, a, None, b"SG");
        }
        assert!(!path.exists());
        let stats = c.finish().unwrap();
        assert_eq!(
            stats,
            CaptureStats {
                packets: 2,
                skipped: 1
            }
        );
        let mut r = pcap_file::pcap::PcapReader::new(File::open(&path).unwrap()).unwrap();
        let mut n = 0;
        while let Some(p) = r.next_packet() {
            assert!(p.unwrap().data.ends_with(b"SG"));
            n += 1;
        }
        assert_eq!(n, 2);
    }
}
