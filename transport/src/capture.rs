//! Packet captures a person can open in Wireshark: every datagram an endpoint sends or
//! receives, as an Ethernet / IP / UDP frame around the switchgnn header, in a classic pcap
//! file. `tools/wireshark/switchgnn.lua` decodes the header. A capture stops recording after a
//! bounded number of packets, and is written to a temporary file renamed into place when it
//! is finished (or dropped), so a reader never sees half a capture under the final name.

use std::fs::File;
use std::io::{self, BufWriter};
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use pcap_file::pcap::{PcapPacket, PcapWriter};
use serde::{Deserialize, Serialize};

use crate::socket::EcnCodepoint;

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

/// A made-up MAC address for an IP address: Wireshark shows frames, and hosts on a capture
/// are easier to tell apart by their addresses.
fn mac(ip: IpAddr) -> [u8; 6] {
    let o = match ip {
        IpAddr::V4(v4) => v4.octets(),
        IpAddr::V6(v6) => {
            let b = v6.octets();
            [b[12], b[13], b[14], b[15]]
        }
    };
    // Locally administered, unicast.
    [0x02, 0x53, o[0], o[1], o[2], o[3]]
}

/// RFC 1071 checksum of `bytes`.
fn checksum(bytes: &[u8]) -> u16 {
    let mut sum: u32 = bytes
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// The Ethernet frame (without FCS) carrying `payload` from `from` to `to` over UDP.
pub fn frame(
    from: SocketAddr,
    to: SocketAddr,
    ecn: Option<EcnCodepoint>,
    payload: &[u8],
) -> Vec<u8> {
    let ecn_bits = match ecn {
        None => 0,
        Some(EcnCodepoint::Ect1) => 1,
        Some(EcnCodepoint::Ect0) => 2,
        Some(EcnCodepoint::Ce) => 3,
    };
    let udp_len = (8 + payload.len()) as u16;
    let mut out = Vec::with_capacity(14 + 40 + 8 + payload.len());
    out.extend_from_slice(&mac(to.ip()));
    out.extend_from_slice(&mac(from.ip()));
    match (from.ip(), to.ip()) {
        (IpAddr::V4(src), IpAddr::V4(dst)) => {
            out.extend_from_slice(&0x0800u16.to_be_bytes());
            let mut ip = [0u8; 20];
            ip[0] = 0x45;
            ip[1] = ecn_bits;
            ip[2..4].copy_from_slice(&(20 + udp_len).to_be_bytes());
            ip[6] = 0x40; // don't fragment
            ip[8] = 64; // TTL
            ip[9] = 17; // UDP
            ip[12..16].copy_from_slice(&src.octets());
            ip[16..20].copy_from_slice(&dst.octets());
            let sum = checksum(&ip);
            ip[10..12].copy_from_slice(&sum.to_be_bytes());
            out.extend_from_slice(&ip);
        }
        (src, dst) => {
            let v6 = |a: IpAddr| match a {
                IpAddr::V4(v4) => v4.to_ipv6_mapped(),
                IpAddr::V6(v6) => v6,
            };
            out.extend_from_slice(&0x86ddu16.to_be_bytes());
            let mut ip = [0u8; 40];
            ip[0] = 0x60 | (ecn_bits >> 4);
            ip[1] = ecn_bits << 4;
            ip[4..6].copy_from_slice(&udp_len.to_be_bytes());
            ip[6] = 17;
            ip[7] = 64;
            ip[8..24].copy_from_slice(&v6(src).octets());
            ip[24..40].copy_from_slice(&v6(dst).octets());
            out.extend_from_slice(&ip);
        }
    }
    out.extend_from_slice(&from.port().to_be_bytes());
    out.extend_from_slice(&to.port().to_be_bytes());
    out.extend_from_slice(&udp_len.to_be_bytes());
    // UDP checksum 0: none (allowed over IPv4; Wireshark does not complain).
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(payload);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

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
